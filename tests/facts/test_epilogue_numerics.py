"""gemm_gen/facts/epilogue.py against literal transliterations of its published sources (docs/epilogues.md
section 4, step 2): gemmlowp's SaturatingRoundingDoublingHighMul and RoundingDivideByPOT (fixedpoint.h
@032a5999 lines 312-323, 338-352), TFLite's MultiplyByQuantizedMultiplier (common.cc lines 65-76 and
20-35) and FullyConnectedPerChannel (tflite-micro fully_connected.h @cb60aa9c lines 33-72, 74-112), on
edge cases and random draws; the kernel's SRS form; the bf16 activation chains against an oracle written
with ml_dtypes' own bf16 arithmetic; section 1's error table as regression figures; and mutants that
each of these checks catches.

The transliterations keep the sources' statements one for one, with C++ int32 / int64 arithmetic on
NumPy int64 (no intermediate here leaves int64) and C++'s truncating division spelled out.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from gemm_gen.facts import epilogue as E
from gemm_gen.facts.dtypes import BF16, I8, I16
from gemm_gen.facts.rounding import Rounding, round_f32_to_bf16, shift_round

FACTS = json.loads((Path(__file__).parents[1] / "data" / "epilogue_facts.json").read_text())
ERRORS = FACTS["error_table"]["rows"]
I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
DRAWS = 1_000_000  # the plan's 10^6 random draws per check
Ints = np.ndarray


# ---- transliterations of the sources ------------------------------------------------------------------
def c_div(n: Ints, d: int) -> Ints:
    """C++ integer division: truncates toward zero."""
    return np.sign(n) * (np.abs(n) // d)


def gemmlowp_srdhm(a: Ints, b: Ints) -> Ints:
    """fixedpoint.h lines 312-323, SaturatingRoundingDoublingHighMul(int32, int32)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    overflow = (a == b) & (a == I32_MIN)
    a_64 = a
    b_64 = b
    ab_64 = a_64 * b_64
    nudge = np.where(ab_64 >= 0, 1 << 30, 1 - (1 << 30))
    ab_x2_high32 = c_div(ab_64 + nudge, 1 << 31)  # static_cast<int32_t>: fits unless overflow
    return np.where(overflow, I32_MAX, ab_x2_high32)


def gemmlowp_rdbpot(x: Ints, exponent: Ints) -> Ints:
    """fixedpoint.h lines 338-352, RoundingDivideByPOT(int32, int)."""
    x, exponent = np.asarray(x, np.int64), np.asarray(exponent, np.int64)
    assert np.all(exponent >= 0) and np.all(exponent <= 31)
    mask = (np.int64(1) << exponent) - 1
    zero = 0
    one = 1
    remainder = x & mask
    threshold = (mask >> 1) + ((x < zero) & one)
    return (x >> exponent) + ((remainder > threshold) & one)


def tflite_mbqm(x: Ints, quantized_multiplier: Ints, shift: Ints) -> Ints:
    """common.cc lines 65-76, the double-rounding MultiplyByQuantizedMultiplier(int32, int32, int)."""
    x, shift = np.asarray(x, np.int64), np.asarray(shift, np.int64)
    left_shift = np.where(shift > 0, shift, 0)
    right_shift = np.where(shift > 0, 0, -shift)
    scaled = x * (np.int64(1) << left_shift)
    assert np.all((scaled >= I32_MIN) & (scaled <= I32_MAX))  # int32 in C++
    return gemmlowp_rdbpot(gemmlowp_srdhm(scaled, quantized_multiplier), right_shift)


def tflite_mbqm_single(x: Ints, quantized_multiplier: Ints, shift: Ints) -> Ints:
    """common.cc lines 20-35, TFLITE_SINGLE_ROUNDING's MultiplyByQuantizedMultiplier(int32, int32, int)."""
    x, m, shift = np.asarray(x, np.int64), np.asarray(quantized_multiplier, np.int64), np.asarray(shift, np.int64)
    assert np.all(m >= 0) and np.all((shift >= -31) & (shift <= 30))
    total_shift = 31 - shift
    rnd = np.int64(1) << (total_shift - 1)
    result = x * m + rnd
    return result >> total_shift


def tflite_fc_per_channel(input_offset: int, output_offset: int, act_min: int, act_max: int,
                          output_multiplier: Ints, output_shift: Ints, input_data: Ints, filter_data: Ints,
                          bias_data: Ints | None) -> Ints:
    """tflite-micro reference/integer_ops/fully_connected.h lines 33-72 (int8 FullyConnectedPerChannel):
    input batches x accum_depth, filter output_depth x accum_depth; the loops over b and out_c as arrays."""
    acc = np.zeros((input_data.shape[0], filter_data.shape[0]), dtype=np.int64)
    for d in range(input_data.shape[1]):
        input_val = input_data[:, d : d + 1].astype(np.int64)
        filter_val = filter_data[:, d].astype(np.int64)
        acc += filter_val * (input_val + input_offset)
    assert np.all((acc >= I32_MIN) & (acc <= I32_MAX))  # int32_t acc
    if bias_data is not None:
        acc += bias_data
    acc = tflite_mbqm(acc, output_multiplier, output_shift)
    acc += output_offset
    acc = np.maximum(acc, act_min)
    acc = np.minimum(acc, act_max)
    return acc.astype(np.int8)


def tflite_fc_per_channel_int16(act_min: int, act_max: int, output_multiplier: Ints, output_shift: Ints,
                                input_data: Ints, filter_data: Ints, bias_data: Ints | None) -> Ints:
    """The same file, lines 74-112 (int16 FullyConnectedPerChannel, AccumScalar = int32_t): no offsets."""
    acc = input_data.astype(np.int64) @ filter_data.astype(np.int64).T
    assert np.all((acc >= I32_MIN) & (acc <= I32_MAX))
    if bias_data is not None:
        acc += bias_data
    acc_scaled = tflite_mbqm(acc, output_multiplier, output_shift)
    acc_scaled = np.maximum(acc_scaled, act_min)
    acc_scaled = np.minimum(acc_scaled, act_max)
    return acc_scaled.astype(np.int16)


# ---- inputs -------------------------------------------------------------------------------------------
EDGES = np.array([I32_MIN, I32_MIN + 1, -(1 << 30) - 1, -(1 << 30), -(1 << 30) + 1, -3, -2, -1, 0, 1, 2, 3,
                  (1 << 30) - 1, 1 << 30, (1 << 30) + 1, I32_MAX - 1, I32_MAX], dtype=np.int64)


def srdhm_ties() -> tuple[Ints, Ints]:
    """Pairs whose product is an odd multiple of 2^30 (a tie of round(a b / 2^31)), every split of the
    power of two and both signs."""
    rng = np.random.default_rng(1)
    a, b = [], []
    for p in range(31):
        for _ in range(8):
            oa = int(rng.integers(0, 1 << max(0, 30 - p))) * 2 + 1
            ob = int(rng.integers(0, 1 << max(0, p))) * 2 + 1
            va, vb = (1 << p) * oa, (1 << (30 - p)) * ob
            if va > I32_MAX or vb > I32_MAX:
                continue
            for sa, sb in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
                a.append(sa * va)
                b.append(sb * vb)
    return np.array(a, np.int64), np.array(b, np.int64)


def rdbpot_ties() -> tuple[Ints, Ints]:
    """x = odd * 2^(e-1) (exact halves) for e = 1..31 and both signs, plus the extremes at every e."""
    rng = np.random.default_rng(2)
    xs, es = [], []
    for e in range(32):
        for v in EDGES:
            xs.append(int(v))
            es.append(e)
        if e == 0:
            continue
        for _ in range(16):
            odd = int(rng.integers(0, 1 << (31 - e))) * 2 + 1
            x = odd << (e - 1)
            if x > I32_MAX:
                continue
            xs += [x, -x]
            es += [e, e]
    return np.array(xs, np.int64), np.array(es, np.int64)


def random_i32(rng: np.random.Generator, n: int) -> Ints:
    """int32 values, half uniform and half of random magnitude 2^0..2^31 (so small values are drawn too)."""
    u = rng.integers(I32_MIN, I32_MAX, n // 2, endpoint=True)
    bits = rng.integers(0, 32, n - n // 2)
    m = rng.integers(0, np.int64(1) << bits) * rng.choice([-1, 1], n - n // 2)
    return np.concatenate([u, np.clip(m, I32_MIN, I32_MAX)])


def mbqm_draws(rng: np.random.Generator, n: int, shifts: tuple[int, int] = (-31, 30),
               multipliers: tuple[int, int] = (I32_MIN, I32_MAX)) -> tuple[Ints, Ints, Ints]:
    """x, M, shift with x 2^left inside int32 (TFLite's domain)."""
    shift = rng.integers(*shifts, n, endpoint=True)
    m = rng.integers(*multipliers, n, endpoint=True)
    x = random_i32(rng, n)
    left = np.maximum(shift, 0)
    x = np.clip(x, I32_MIN >> left, I32_MAX >> left)
    return x, m, shift


# ---- SRDHM, RDBPOT, MBQM --------------------------------------------------------------------------------
def test_srdhm_edges_and_ties():
    a, b = np.meshgrid(EDGES, EDGES)
    ta, tb = srdhm_ties()
    for x, y in ((a.ravel(), b.ravel()), (ta, tb)):
        assert np.array_equal(E.srdhm(x, y), gemmlowp_srdhm(x, y))
    assert E.srdhm(I32_MIN, I32_MIN) == I32_MAX  # the one overflow
    assert E.srdhm(1 << 30, 1) == 1 and E.srdhm(-(1 << 30), 1) == 0  # +1/2 -> 1, -1/2 -> 0: ties to +inf


def test_rdbpot_edges_and_ties():
    x, e = rdbpot_ties()
    assert np.array_equal(E.rdbpot(x, e), gemmlowp_rdbpot(x, e))
    assert E.rdbpot(3, 1) == 2 and E.rdbpot(-3, 1) == -2  # 1.5 -> 2, -1.5 -> -2: ties away from zero
    with pytest.raises(ValueError):
        E.rdbpot(1, 32)


def test_srdhm_rdbpot_mbqm_on_random_draws():
    rng = np.random.default_rng(2126)
    a, b = random_i32(rng, DRAWS), random_i32(rng, DRAWS)
    assert np.array_equal(E.srdhm(a, b), gemmlowp_srdhm(a, b))
    e = rng.integers(0, 31, DRAWS, endpoint=True)
    assert np.array_equal(E.rdbpot(a, e), gemmlowp_rdbpot(a, e))
    x, m, s = mbqm_draws(rng, DRAWS)
    assert np.array_equal(E.mbqm(x, m, s), tflite_mbqm(x, m, s))


@pytest.mark.parametrize("shift", [0, 30, -30, -31, 7, -1])
def test_mbqm_at_the_shift_ends(shift):
    rng = np.random.default_rng(shift + 100)
    x, m, s = mbqm_draws(rng, 20_000, shifts=(shift, shift))
    x = np.concatenate([x, np.clip(EDGES, I32_MIN >> max(shift, 0), I32_MAX >> max(shift, 0))])
    m = np.concatenate([m, EDGES[::-1]])
    s = np.full(x.shape, shift)
    assert np.array_equal(E.mbqm(x, m, s), tflite_mbqm(x, m, s))
    if shift >= -E.MAX_RIGHT_SHIFT:
        assert np.array_equal(E.mbqm_srs(x, m, s), tflite_mbqm(x, m, s))


def test_mbqm_single_rounding():
    rng = np.random.default_rng(7)
    x, m, s = mbqm_draws(rng, DRAWS, multipliers=(0, I32_MAX))
    want = tflite_mbqm_single(x, m, s)
    fits = (want >= I32_MIN) & (want <= I32_MAX)  # TFLite DCHECKs the result into int32
    assert fits.mean() > 0.5
    assert np.array_equal(E.mbqm_single(x, m, s)[fits], want[fits])
    # one SRS of the exact product by 31 - shift under positive_inf, shift by shift
    for sh in (-31, -5, 0, 30):
        sel = s == sh
        assert np.array_equal(shift_round(x[sel] * m[sel], 31 - sh, Rounding.POS_INF)[fits[sel]], want[sel][fits[sel]])


def test_shift_round_is_srdhm_and_rdbpot():
    """rounding.shift_round under positive_inf (by 31) and symmetric_inf are gemmlowp's two roundings."""
    rng = np.random.default_rng(11)
    a, b = random_i32(rng, DRAWS), random_i32(rng, DRAWS)
    ta, tb = srdhm_ties()
    a, b = np.concatenate([a, ta]), np.concatenate([b, tb])
    ok = ~((a == I32_MIN) & (b == I32_MIN))
    assert np.array_equal(shift_round(a * b, 31, Rounding.POS_INF)[ok], gemmlowp_srdhm(a, b)[ok])
    x, e = rdbpot_ties()
    for v in np.unique(e):
        sel = e == v
        assert np.array_equal(shift_round(x[sel], int(v), Rounding.SYM_INF), gemmlowp_rdbpot(x[sel], e[sel]))


def test_rdbpot_is_one_uniform_srs_by_30():
    """RDBPOT(x, e) = srs(x 2^(30 - e), 30) under symmetric_inf for e in [0, 30]: one SRS for lanes of
    different shifts (the product stays below 2^61)."""
    rng = np.random.default_rng(13)
    x = np.concatenate([random_i32(rng, DRAWS), rdbpot_ties()[0]])
    e = np.concatenate([rng.integers(0, 30, DRAWS, endpoint=True), np.minimum(rdbpot_ties()[1], 30)])
    q = np.int64(1) << (30 - e)
    assert np.array_equal(shift_round(x * q, 30, Rounding.SYM_INF), gemmlowp_rdbpot(x, e))


def test_rdbpot_under_positive_inf_is_symmetric_inf():
    """Issue 31 item 7b: the kernel's RDBPOT step under positive_inf, srs(y Q - [y < 0], 30), equals
    srs(y Q, 30) under symmetric_inf (and gemmlowp's RDBPOT) for every right shift 0..30: exhaustively over
    every y in [-2^18, 2^18] (which holds every residue mod 2^right, both signs, for right <= 18) and, for every
    right, on the exact ties odd 2^(right - 1) of both signs up to int32's ends, their neighbours, and the int32
    extremes and random draws."""
    rng = np.random.default_rng(31)
    dense = np.arange(-(1 << 18), (1 << 18) + 1, dtype=np.int64)
    ties, tie_e = rdbpot_ties()
    for right in range(E.MAX_RIGHT_SHIFT + 1):
        q = np.int64(1) << (30 - right)
        at = ties[tie_e == right]
        y = np.unique(np.clip(np.concatenate([dense, at, at - 1, at + 1, random_i32(rng, 4096),
                                              np.array(EDGES, np.int64)]), I32_MIN, I32_MAX))
        want = np.clip(shift_round(y * q, 30, Rounding.SYM_INF), I32_MIN, I32_MAX)
        got = E.rdbpot_positive_inf(y, q)
        assert np.array_equal(got, want), right
        assert np.array_equal(got, gemmlowp_rdbpot(y, np.full_like(y, right))), right
    # without the correction, positive_inf rounds negative ties toward zero: the check sees it
    y = np.array([-3, -1, -5 << 9], np.int64)
    q = np.array([1 << 29, 1 << 29, 1 << 20], np.int64)  # right = 1, 1, 10: exact halves
    assert not np.array_equal(shift_round(y * q, 30, Rounding.POS_INF), E.rdbpot_positive_inf(y, q))


def test_kernel_srs_form_is_mbqm():
    rng = np.random.default_rng(17)
    x, m, s = mbqm_draws(rng, DRAWS, shifts=(-E.MAX_RIGHT_SHIFT, 30))
    ta, tb = srdhm_ties()
    x, m, s = np.concatenate([x, ta]), np.concatenate([m, tb]), np.concatenate([s, np.zeros_like(ta)])
    x, m, s = np.append(x, I32_MIN), np.append(m, I32_MIN), np.append(s, 0)  # SRDHM's overflow saturates
    assert np.array_equal(E.mbqm_srs(x, m, s), tflite_mbqm(x, m, s))
    p, q = E.srs_factors(np.array([3, 0, -30]))
    assert list(p) == [8, 1, 1] and list(q) == [1 << 30, 1 << 30, 1]
    with pytest.raises(ValueError, match="right shifts up to 30"):
        E.srs_factors(-31)


# ---- per-channel requantization ----------------------------------------------------------------------
def _fc_case(seed: int, batches: int = 24, depth: int = 96, channels: int = 40):
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 127, (batches, depth), endpoint=True)
    filt = rng.integers(-127, 127, (channels, depth), endpoint=True)  # TFLite's symmetric int8 weights
    bias = rng.integers(-(1 << 20), 1 << 20, channels)
    mult = rng.integers(1 << 30, I32_MAX, channels, endpoint=True)  # QuantizeMultiplier's range
    shift = rng.integers(-16, -10, channels, endpoint=True)  # most outputs inside i8, not clamped
    shift[:4] = (-30, -1, 0, 1)
    return a, filt, bias, mult, shift


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_requant_is_tflite_fully_connected_per_channel(seed):
    a, filt, bias, mult, shift = _fc_case(seed)
    input_offset, output_offset, act_min, act_max = 5 - seed * 7, -3 + seed, -128 + 20 * seed, 127 - seed
    want = tflite_fc_per_channel(input_offset, output_offset, act_min, act_max, mult, shift, a, filt, bias)
    # our GEMM: C = A @ B with B = filter^T, A's offset folded into the bias on the host
    rq = E.Requant(tuple(int(v) for v in mult), tuple(int(v) for v in shift), output_offset, act_min, act_max)
    b = filt.T
    got = rq.apply(a @ b, E.fold_input_offset(bias, b, input_offset))
    assert got.dtype == np.int8 and np.array_equal(got, want)
    assert np.mean((want > act_min) & (want < act_max)) > 0.5  # not a test of the clamp alone
    x = a @ b + E.fold_input_offset(bias, b, input_offset)
    kernel = np.clip(E.mbqm_srs(x, mult, shift).astype(np.int64) + output_offset, act_min, act_max)
    assert np.array_equal(kernel, want)  # the kernel's SRS form gives the same bytes
    real = rq.apply_real(a @ b, E.fold_input_offset(bias, b, input_offset))
    assert np.abs(real.astype(int) - want.astype(int)).max() <= 1  # double rounding: at most 1 off the real value


def test_requant_i16_is_tflite_int16_per_channel():
    rng = np.random.default_rng(5)
    a = rng.integers(-(1 << 12), 1 << 12, (16, 64))
    filt = rng.integers(-127, 127, (32, 64), endpoint=True)
    bias = rng.integers(-(1 << 16), 1 << 16, 32)
    mult = rng.integers(1 << 30, I32_MAX, 32, endpoint=True)
    shift = rng.integers(-20, 2, 32, endpoint=True)
    want = tflite_fc_per_channel_int16(-32768, 32767, mult, shift, a, filt, bias)
    rq = E.Requant(tuple(map(int, mult)), tuple(map(int, shift)), out=I16)
    got = rq.apply(a @ filt.T, bias)
    assert got.dtype == np.int16 and np.array_equal(got, want)
    assert np.count_nonzero(np.abs(got.astype(int)) > 127) > 0  # the i16 range is used


def test_requant_single_rounding_form():
    a, filt, bias, mult, shift = _fc_case(9)
    acc = a @ filt.T + bias
    rq = E.Requant(tuple(map(int, mult)), tuple(map(int, shift)), form=E.RequantForm.SINGLE)
    want = np.clip(tflite_mbqm_single(acc, mult, shift), -128, 127)
    assert np.array_equal(rq.apply(acc), want)


def test_requant_refuses_what_tflite_or_the_kernel_cannot_do():
    with pytest.raises(ValueError, match="multipliers but"):
        E.Requant((1 << 30,), (0, 0))
    with pytest.raises(ValueError, match="right shifts up to 30"):
        E.Requant((1 << 30,), (-31,))
    with pytest.raises(ValueError, match="not inside i8"):
        E.Requant((1 << 30,), (0,), act_min=-200)
    with pytest.raises(ValueError, match="i8 or i16"):
        E.Requant((1 << 30,), (0,), out=BF16)
    with pytest.raises(ValueError, match="columns but"):
        E.Requant((1 << 30,), (0,)).apply(np.zeros((2, 3), np.int64))
    with pytest.raises(ValueError, match="leaves int32"):
        E.Requant((1 << 30,), (0,)).apply(np.array([[I32_MAX]]), np.array([1]))
    with pytest.raises(ValueError, match="leaves int32"):
        E.mbqm(1 << 30, 1 << 30, 2)
    assert E.Requant((1 << 30,), (0,)).out == I8


# ---- the bf16 activations ----------------------------------------------------------------------------
def all_bf16(lo: float = -8.0, hi: float = 8.0) -> np.ndarray:
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(BF16.host)
    with np.errstate(invalid="ignore"):
        f = x.astype(np.float64)
    return x[np.isfinite(f) & (f >= lo) & (f <= hi)]


def bits(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=BF16.host).view(np.uint16)


def lut_tanh_bf16_ops(x: np.ndarray) -> np.ndarray:
    """getTanhBf16 as mlir-aie rewrote it (aie_runtime_lib/AIE2/lut_based_ops.h, stored version id 69055850465),
    with ml_dtypes' bf16 scalars: x clamped to [-4, 4 - 1/64], the segment's slope x + offset in float32, rounded."""
    xc = np.minimum(np.maximum(x, BF16.host.type(-4.0)), BF16.host.type(4.0 - 1 / 64))
    seg = np.clip(np.floor(xc.astype(np.float64) * 4) + 16, 0, 31).astype(int)
    s = np.asarray(E.TANH_SLOPES, np.float32)[seg]
    o = np.asarray(E.TANH_OFFSETS, np.float32)[seg]
    return (s * xc.astype(np.float32) + o).astype(BF16.host)


def silu_ml_dtypes(x: np.ndarray) -> np.ndarray:
    """aie2 silu.cc in ml_dtypes bf16 arithmetic (every op computed in float32, rounded to bf16)."""
    bf = BF16.host.type
    half_x = x * bf(0.5)
    tanh_half_x = lut_tanh_bf16_ops(half_x)
    tanh_half_x_approx = tanh_half_x + bf(1.0)
    sigmoid_approx = tanh_half_x_approx * bf(0.5)
    return x * sigmoid_approx


def gelu_ml_dtypes(x: np.ndarray) -> np.ndarray:
    """aie2 gelu.cc gelu_v16 in ml_dtypes bf16 arithmetic."""
    bf = BF16.host.type
    k0_5, k1, sqrt_2_over_pi, k_beta = bf(0.5), bf(1.0), bf(np.float32(0.79788456)), bf(np.float32(0.044715))
    x2 = x * x
    x3 = x * x2
    x3_beta = x3 * k_beta
    inner = x + x3_beta
    inner1 = inner * sqrt_2_over_pi
    tanh_out = lut_tanh_bf16_ops(inner1)
    one_plus_tanh = tanh_out + k1
    mul_v05 = k0_5 * one_plus_tanh
    return x * mul_v05


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_chains_are_the_kernels_bf16_ops():
    """Every finite bf16 input, overflow to inf included (the table's clamp makes tanh(+-inf) = +-1, so a GELU
    whose cube overflows gives x, where the unclamped lookup gave 0 inf = NaN)."""
    x = all_bf16(-np.inf, np.inf)
    assert np.array_equal(bits(E.tanh_lut(x)), bits(lut_tanh_bf16_ops(x)))
    assert np.array_equal(bits(E.silu_bf16(x)), bits(silu_ml_dtypes(x)))
    assert np.array_equal(bits(E.gelu_bf16(x)), bits(gelu_ml_dtypes(x)))
    assert np.array_equal(bits(E.relu_bf16(x)), bits(np.where(x > 0, x, np.zeros_like(x))))


def test_lut_tanh_values():
    x = np.array([-100, -4, -3.75, -0.25, -0.0, 0.0, 0.125, 0.25, 3.99, 4, 100], dtype=np.float32).astype(BF16.host)
    y = E.tanh_lut(x).astype(np.float64)
    assert y[0] == y[1] == -1 and y[-1] == y[-2] == 1  # clamped end segments (0, -1), (0, 1)
    assert y[5] == 0 and y[6] == 0.125  # (1, 0) around zero
    assert np.isnan(E.tanh_lut(np.array([np.nan], np.float32).astype(BF16.host)))[0]


def test_index_rounding_only_moves_points_near_a_boundary():
    """How bfloat16_to_int rounds is unpublished: any rule changes the result only within 2^-6 of a
    segment boundary."""
    x = all_bf16()
    base = E.tanh_lut(x)
    xf = x.astype(np.float64)
    near = np.abs(xf * 4 - np.round(xf * 4)) < 4 * 2.0 ** -E.INDEX_BITS
    for mode in (Rounding.CONV_EVEN, Rounding.SYM_ZERO, Rounding.CEIL):
        moved = bits(E.tanh_lut(x, index_rounding=mode)) != bits(base)
        assert moved.any() and not (moved & ~near).any()


def test_float_epilogue_order():
    rng = np.random.default_rng(3)
    acc = rng.standard_normal((8, 32)).astype(np.float32) * 4
    bias = rng.standard_normal(32).astype(np.float32)
    x = round_f32_to_bf16(acc + bias)
    for act in E.MODES:  # every compiled chain (a runtime build applies the one its call selects)
        y = E.float_epilogue(acc, bias, act)
        assert np.array_equal(bits(y), bits(E.activate_bf16(x, act)))
    with pytest.raises(ValueError, match="activation runtime is chosen per call"):
        E.float_epilogue(acc, bias, E.Activation.RUNTIME)
    y = E.float_epilogue(acc, bias, E.Activation.GELU, clamp=(-0.1, 2.0))
    assert np.array_equal(bits(y), bits(np.clip(E.gelu_bf16(x), -0.1 + 0 * E.gelu_bf16(x), 2)))
    assert float(y.min()) == float(np.float32(-0.1).astype(BF16.host))
    ref = E.float_epilogue_ref(acc, bias, E.Activation.SILU)
    assert np.linalg.norm(E.float_epilogue(acc, bias, E.Activation.SILU).astype(np.float64) - ref) \
        < 0.01 * np.linalg.norm(ref)
    with pytest.raises(ValueError, match="clamp bounds"):
        E.clamp_bf16(x, 1.0, 0.0)


# ---- section 1's error table ----------------------------------------------------------------------------
def _exact(f: Callable[..., np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    return lambda v: f(v, tanh=E.tanh_exact_bf16)


ROWS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], Callable[[np.ndarray], np.ndarray]]] = {
    "tanh_lut": (E.tanh_lut, E.tanh_ref),
    "tanh_exact": (E.tanh_exact_bf16, E.tanh_ref),
    "silu_lut": (E.silu_bf16, E.silu_ref),
    "silu_exact": (_exact(E.silu_bf16), E.silu_ref),
    "gelu_lut": (E.gelu_bf16, E.gelu_ref),
    "gelu_exact": (_exact(E.gelu_bf16), E.gelu_ref),
    "relu": (E.relu_bf16, E.relu_ref),
}


def errors(f: Callable[[np.ndarray], np.ndarray], ref: Callable[[np.ndarray], np.ndarray]) -> dict[str, float]:
    """Section 1's measures: over every finite bf16 in [-8, 8] (max abs, max rel where |y| >= 2^-6, the
    same from -2), and normwise over x ~ N(0, 1), N(0, 3) against float64 act(x) of the unrounded x."""
    x = all_bf16()
    xf = x.astype(np.float64)
    y, r = f(x).astype(np.float64), ref(xf)
    err = np.abs(y - r)
    big = np.abs(r) >= 2.0 ** -6
    out = {"max_abs": err.max(), "max_rel": (err[big] / np.abs(r[big])).max(),
           "max_rel_from_-2": (err[big & (xf >= -2)] / np.abs(r[big & (xf >= -2)])).max()}
    rng = np.random.default_rng(0)
    for s in (1, 3):
        z = rng.standard_normal(1 << 17) * s
        rz = ref(z)
        out[f"normwise_n0{s}"] = np.linalg.norm(f(z.astype(np.float32).astype(BF16.host)).astype(np.float64) - rz) \
            / np.linalg.norm(rz)
    return out


@pytest.mark.parametrize("row", sorted(ERRORS))
def test_error_table_is_reproduced(row):
    """Each figure of docs/epilogues.md's table, to the two digits it prints (a change of the chains or of
    the table moves one out)."""
    got = errors(*ROWS[row])
    for key, figure in ERRORS[row].items():
        assert got[key] == pytest.approx(figure, rel=0.05), key


# ---- mutants: each check above catches a plausible mistake ---------------------------------------------
def _mut_srdhm_sym(a, b):  # ties away from zero instead of toward +inf
    return np.minimum(shift_round(np.asarray(a, np.int64) * np.asarray(b, np.int64), 31, Rounding.SYM_INF),
                      I32_MAX)


def _mut_rdbpot_pos(x, e):  # ties toward +inf instead of away from zero
    return np.array([shift_round(np.int64(v), int(s), Rounding.POS_INF) for v, s in zip(x, e)])


def test_mutants_of_the_integer_path_are_caught():
    ta, tb = srdhm_ties()
    assert not np.array_equal(_mut_srdhm_sym(ta, tb), gemmlowp_srdhm(ta, tb))
    x, e = rdbpot_ties()
    assert not np.array_equal(_mut_rdbpot_pos(x, e), gemmlowp_rdbpot(x, e))
    a, filt, bias, mult, shift = _fc_case(0)
    want = tflite_fc_per_channel(0, 0, -128, 127, mult, shift, a, filt, bias)
    rq = E.Requant(tuple(map(int, mult)), tuple(map(int, shift)))
    acc = a @ filt.T
    assert not np.array_equal(rq.apply(acc), want)  # bias left out
    x, m, s = mbqm_draws(np.random.default_rng(6), 20_000, shifts=(-30, 0), multipliers=(1 << 30, I32_MAX))
    assert not np.array_equal(E.mbqm_single(x, m, s), tflite_mbqm(x, m, s))  # single rounding for double
    assert E.mbqm_single(1, 1 << 30, -1) == 0 != tflite_mbqm(1, 1 << 30, -1)  # 1/4: 1/2 rounded up, then 1/2 up
    # the SRS form with either rounding mode wrong, on the ties of each rounding
    ta, tb = srdhm_ties()
    tx, te = rdbpot_ties()
    keep = (te <= E.MAX_RIGHT_SHIFT) & (np.abs(tx) <= I32_MAX // 2)
    x = np.concatenate([ta, 2 * tx[keep]])  # x 2^30 / 2^31 = the tie itself, exactly, for the second SRS
    m = np.concatenate([tb, np.full(keep.sum(), 1 << 30)])
    s = np.concatenate([np.zeros_like(ta), -te[keep]])
    want = tflite_mbqm(x, m, s)
    assert np.array_equal(_srs_form(x, m, s, Rounding.POS_INF, Rounding.SYM_INF), want)
    assert np.array_equal(E.mbqm_srs(x, m, s), want)  # the kernel's form: one mode, RDBPOT corrected
    for first, second in ((Rounding.SYM_INF, Rounding.SYM_INF), (Rounding.POS_INF, Rounding.POS_INF),
                          (Rounding.CONV_EVEN, Rounding.SYM_INF), (Rounding.POS_INF, Rounding.CONV_EVEN)):
        assert not np.array_equal(_srs_form(x, m, s, first, second), want), (first, second)


def _srs_form(x: Ints, m: Ints, shift: Ints, first: Rounding, second: Rounding) -> Ints:
    """epilogue.mbqm_srs with its two SRS rounding modes as parameters."""
    p, q = E.srs_factors(shift)
    y0 = np.clip(x * p, I32_MIN, I32_MAX)
    y1 = np.clip(shift_round(y0 * m, 31, first), I32_MIN, I32_MAX)
    return np.clip(shift_round(y1 * q.astype(np.int64), 30, second), I32_MIN, I32_MAX)


def test_mutants_of_the_float_path_are_caught():
    x = all_bf16()
    bf = BF16.host.type
    # GELU with the float constants instead of gelu.cc's bf16 ones
    x3 = (x * (x * x)).astype(np.float32)
    inner = ((x + (x3 * np.float32(0.044715)).astype(BF16.host)).astype(np.float32) * np.float32(0.79788456))
    wrong = x * (bf(0.5) * (lut_tanh_bf16_ops(inner.astype(BF16.host)) + bf(1.0)))
    assert not np.array_equal(bits(wrong), bits(E.gelu_bf16(x)))
    # SiLU with the sigmoid in fp32 (no bf16 rounding of t + 1)
    t = lut_tanh_bf16_ops(x * bf(0.5)).astype(np.float32)
    wrong = round_f32_to_bf16(x.astype(np.float32) * ((t + 1) * np.float32(0.5)))
    assert not np.array_equal(bits(wrong), bits(E.silu_bf16(x)))
    # bias after the activation; clamp before it
    rng = np.random.default_rng(4)
    acc = (rng.standard_normal((16, 64)) * 3).astype(np.float32)
    bias = rng.standard_normal(64).astype(np.float32)
    good = E.float_epilogue(acc, bias, E.Activation.SILU, clamp=(-0.2, 1.5))
    late_bias = E.clamp_bf16(round_f32_to_bf16(E.silu_bf16(round_f32_to_bf16(acc)).astype(np.float32) + bias),
                             -0.2, 1.5)
    early_clamp = E.silu_bf16(E.clamp_bf16(round_f32_to_bf16(acc + bias), -0.2, 1.5))
    for wrong in (late_bias, early_clamp):
        assert not np.array_equal(bits(wrong), bits(good))
    # the table's errors move when the chain changes: the exact tanh's figures are not the LUT's
    assert errors(*ROWS["silu_exact"])["max_rel_from_-2"] != pytest.approx(ERRORS["silu_lut"]["max_rel_from_-2"],
                                                                           rel=0.05)


def test_the_chains_lut_tanh_rounds_under_the_chains_mode():
    """The kernel rounds every step, the LUT's output too, under the build's mode: the default tanh of a
    chain must follow `rounding`, not round to nearest even on its own."""
    from functools import partial

    from gemm_gen.facts.epilogue import Activation, float_epilogue, tanh_lut
    x = np.random.default_rng(3).normal(0, 3, 4096).astype(np.float32)
    for act in (Activation.SILU, Activation.GELU):
        mode = Rounding.FLOOR
        got = float_epilogue(x, activation=act, rounding=mode)
        same = float_epilogue(x, activation=act, rounding=mode, tanh=partial(tanh_lut, rounding=mode))
        nearest = float_epilogue(x, activation=act, rounding=mode, tanh=tanh_lut)
        np.testing.assert_array_equal(got.view(np.uint16), same.view(np.uint16))
        assert (got.view(np.uint16) != nearest.view(np.uint16)).any()  # the test can tell the two apart


def test_builds_differing_only_in_their_epilogue_have_different_object_files():
    from dataclasses import replace

    from gemm_gen.design.ir import KernelBuild
    from gemm_gen.facts.epilogue import Activation, Epilogue, RequantForm
    from gemm_gen.spec.request import Types
    base = KernelBuild("aie2p", Types.of("bf16", "bf16"), 64, 64, 64, (4, 8, 8), False, False, "conv_even", "saturate",
                       0)
    epilogues = [Epilogue(), Epilogue(bias=True), Epilogue(activation=Activation.SILU),
                 Epilogue(activation=Activation.SILU, clamp=(-1.5, 6.0)), Epilogue(activation=Activation.GELU),
                 Epilogue(bias=True, requant=RequantForm.DOUBLE)]
    names = {replace(base, epilogue=e).object_file for e in epilogues}
    assert len(names) == len(epilogues)
    assert replace(base, epilogue=Epilogue()).object_file == base.object_file
