"""numerics: shift-round-saturate, fp32 -> bf16 rounding, and the per-call kernel arithmetic.

Expectations are hand-computed or come from small independent oracles (exact fractions,
ml_dtypes round-to-nearest-even plus np.nextafter on the bf16 grid), never from the code
under test. Background: mlir-aie's aie_kernels/aie2/mm.cc and the AIE API's SRS and rounding modes.
"""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemm_gen.facts.dtypes import BF16, F32, I8, I16, I32
from gemm_gen.facts.inputs import make_inputs
from gemm_gen.facts.numerics import KernelNumerics, reference
from gemm_gen.facts.rounding import Rounding, Saturation, round_f32_to_bf16, saturate, shift_round

SETTINGS = settings(max_examples=50, deadline=None)
R = Rounding
bf16 = ml_dtypes.bfloat16

# ---------------------------------------------------------------------------------------------
# shift_round
# ---------------------------------------------------------------------------------------------
# (value, shift): exact quotient
CASES = [
    (17, 3),   # +2.125  below half
    (20, 3),   # +2.5    half, floor even
    (28, 3),   # +3.5    half, floor odd
    (22, 3),   # +2.75   above half
    (24, 3),   # +3      exact
    (-17, 3),  # -2.125
    (-20, 3),  # -2.5
    (-28, 3),  # -3.5
    (-22, 3),  # -2.75
    (-24, 3),  # -3
    (5, 1),    # +2.5
    (-5, 1),   # -2.5
    (7, 1),    # +3.5
    (-7, 1),   # -3.5
    (6, 1),    # +3 exact
    (-6, 1),   # -3 exact
]
# hand-computed results, one column per case above
TABLE = {
    R.FLOOR:     [2, 2, 3, 2, 3, -3, -3, -4, -3, -3, 2, -3, 3, -4, 3, -3],
    R.CEIL:      [3, 3, 4, 3, 3, -2, -2, -3, -2, -3, 3, -2, 4, -3, 3, -3],
    R.SYM_FLOOR: [2, 2, 3, 2, 3, -2, -2, -3, -2, -3, 2, -2, 3, -3, 3, -3],
    R.SYM_CEIL:  [3, 3, 4, 3, 3, -3, -3, -4, -3, -3, 3, -3, 4, -4, 3, -3],
    R.NEG_INF:   [2, 2, 3, 3, 3, -2, -3, -4, -3, -3, 2, -3, 3, -4, 3, -3],
    R.POS_INF:   [2, 3, 4, 3, 3, -2, -2, -3, -3, -3, 3, -2, 4, -3, 3, -3],
    R.SYM_ZERO:  [2, 2, 3, 3, 3, -2, -2, -3, -3, -3, 2, -2, 3, -3, 3, -3],
    R.SYM_INF:   [2, 3, 4, 3, 3, -2, -3, -4, -3, -3, 3, -3, 4, -4, 3, -3],
    R.CONV_EVEN: [2, 2, 4, 3, 3, -2, -2, -4, -3, -3, 2, -2, 4, -4, 3, -3],
    R.CONV_ODD:  [2, 3, 3, 3, 3, -2, -3, -3, -3, -3, 3, -3, 3, -3, 3, -3],
}


def test_table_covers_every_mode():
    assert set(TABLE) == set(Rounding)


@pytest.mark.parametrize("mode", list(Rounding), ids=lambda m: m.name)
def test_shift_round_hand_table(mode):
    for (v, s), want in zip(CASES, TABLE[mode], strict=True):
        got = shift_round(np.array([v]), s, mode)
        assert got.tolist() == [want], (mode.name, v, s)


@pytest.mark.parametrize("mode", list(Rounding), ids=lambda m: m.name)
def test_shift_round_vectorised_same_as_scalar(mode):
    for s in (1, 3):
        vals = np.array([v for v, sh in CASES if sh == s], dtype=np.int64)
        want = [w for (v, sh), w in zip(CASES, TABLE[mode]) if sh == s]
        assert shift_round(vals, s, mode).tolist() == want


@pytest.mark.parametrize("mode", list(Rounding), ids=lambda m: m.name)
def test_shift_zero_is_identity(mode):
    x = np.array([0, 1, -1, 7, -7, 2**40 + 3, -(2**40) - 3, 2**31, -(2**31) - 1], dtype=np.int64)
    out = shift_round(x, 0, mode)
    assert out.tolist() == x.tolist()
    assert out is not x  # a copy: callers may write to it


def oracle_round(v: int, s: int, mode: Rounding) -> int:
    """v / 2^s rounded per mode, with exact fractions."""
    x = Fraction(v, 1 << s)
    fl, ce = math.floor(x), math.ceil(x)
    if fl == ce:
        return fl
    pos = x > 0
    frac = x - fl
    directed = {
        R.FLOOR: fl, R.CEIL: ce,
        R.SYM_FLOOR: fl if pos else ce, R.SYM_CEIL: ce if pos else fl,
    }
    if mode in directed:
        return directed[mode]
    if frac < Fraction(1, 2):
        return fl
    if frac > Fraction(1, 2):
        return ce
    return {
        R.NEG_INF: fl, R.POS_INF: ce,
        R.SYM_ZERO: fl if pos else ce, R.SYM_INF: ce if pos else fl,
        R.CONV_EVEN: fl if fl % 2 == 0 else ce, R.CONV_ODD: fl if fl % 2 else ce,
    }[mode]


@SETTINGS
@given(
    vals=st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=30),
    s=st.integers(1, 20),
    mode=st.sampled_from(list(Rounding)),
)
def test_shift_round_matches_exact_oracle(vals, s, mode):
    # sprinkle exact ties and exact multiples into the draw
    vals = vals + [3 * (1 << s) + (1 << (s - 1)), -(5 << s) - (1 << (s - 1)), 9 << s, -(9 << s)]
    got = shift_round(np.array(vals, dtype=np.int64), s, mode).tolist()
    assert got == [oracle_round(v, s, mode) for v in vals]


# ---------------------------------------------------------------------------------------------
# saturate
# ---------------------------------------------------------------------------------------------
I8_IN = [0, 127, 128, 255, 256, -127, -128, -129, -200, 1000, -1000]
I8_WANT = {
    Saturation.NONE:      [0, 127, -128, -1, 0, -127, -128, 127, 56, -24, 24],
    Saturation.SATURATE:  [0, 127, 127, 127, 127, -127, -128, -128, -128, 127, -128],
    Saturation.SYMMETRIC: [0, 127, 127, 127, 127, -127, -127, -127, -127, 127, -127],
}
I16_IN = [0, 32767, 32768, 70000, -32767, -32768, -32769, -70000]
I16_WANT = {
    Saturation.NONE:      [0, 32767, -32768, 4464, -32767, -32768, 32767, -4464],
    Saturation.SATURATE:  [0, 32767, 32767, 32767, -32767, -32768, -32768, -32768],
    Saturation.SYMMETRIC: [0, 32767, 32767, 32767, -32767, -32767, -32767, -32767],
}


@pytest.mark.parametrize("mode", list(Saturation), ids=lambda m: m.name)
@pytest.mark.parametrize("t, xs, table", [(I8, I8_IN, I8_WANT), (I16, I16_IN, I16_WANT)], ids=["i8", "i16"])
def test_saturate_hand(mode, t, xs, table):
    out = saturate(np.array(xs, dtype=np.int64), t, mode)
    assert out.dtype == t.host
    assert out.tolist() == table[mode]


@SETTINGS
@given(
    xs=st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=40),
    t=st.sampled_from([I8, I16]),
)
def test_saturate_properties(xs, t):
    x = np.array(xs, dtype=np.int64)
    bits = t.bits
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    # NONE: two's complement truncation of the MSBs
    wrapped = saturate(x, t, Saturation.NONE).tolist()
    assert wrapped == [((v + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1)) for v in xs]
    assert saturate(x, t, Saturation.SATURATE).tolist() == [min(max(v, lo), hi) for v in xs]
    assert saturate(x, t, Saturation.SYMMETRIC).tolist() == [min(max(v, -hi), hi) for v in xs]


# ---------------------------------------------------------------------------------------------
# round_f32_to_bf16
# ---------------------------------------------------------------------------------------------
def f32_from_bits(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def bf16_bits(x) -> np.ndarray:
    return np.asarray(x).astype(bf16).view(np.uint16)


def special_bits() -> np.ndarray:
    """Ties (even and odd bf16 mantissas), carries into the exponent, signs, inf, nan, zeros."""
    return np.array(
        [
            0x3F808000, 0x3F818000, 0xBF808000, 0xBF818000,  # +-1 ties: even stays, odd goes up
            0x3F807FFF, 0x3F808001, 0xBF807FFF, 0xBF808001,  # just below / above half
            0x3FFF8000, 0x3FFFFFFF, 0xBFFF8000, 0xBFFFC000,  # mantissa all ones: carry to 2.0
            0x3F7F8000, 0x7F7F8000, 0x7F7FFFFF, 0xFF7FFFFF,  # carry to 1.0; to inf
            0x7F7F7FFF, 0x007F8000, 0x00008000, 0x80000001,  # below max; subnormal ties/tiny
            0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001,  # inf, nan
            0x00000000, 0x80000000, 0x3F800000, 0x00010000,  # zeros, exact values
        ],
        dtype=np.uint32,
    )


def random_bits(seed: int = 1234, n: int = 100_000) -> np.ndarray:
    rng = np.random.default_rng(seed)
    anything = rng.integers(0, 1 << 32, size=n, dtype=np.uint32)
    # exact ties: every high half (sign, exponent, 7 mantissa bits, even and odd) + 0x8000
    ties = (np.arange(1 << 16, dtype=np.uint32) << 16) | 0x8000
    # moderate magnitudes in [2^-20, 2^20), both signs
    moderate = (
        (rng.integers(0, 2, n, dtype=np.uint32) << 31)
        | (rng.integers(107, 147, n, dtype=np.uint32) << 23)
        | rng.integers(0, 1 << 23, n, dtype=np.uint32)
    )
    return np.concatenate([anything, ties, moderate, special_bits()])


def rne_oracle(bits: np.ndarray) -> np.ndarray:
    """Independent bit-level round-to-nearest-even (non-NaN inputs)."""
    b = bits.astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def test_conv_even_hand():
    x = f32_from_bits(np.array([0x3F808000, 0x3F818000, 0xBF818000, 0x3FFF8000, 0x7F7F8000], np.uint32))
    got = round_f32_to_bf16(x, R.CONV_EVEN)
    assert got.dtype == bf16
    assert got.view(np.uint16).tolist() == [0x3F80, 0x3F82, 0xBF82, 0x4000, 0x7F80]


def test_conv_even_equals_ml_dtypes_and_bit_oracle():
    bits = random_bits()
    x = f32_from_bits(bits)
    nan = np.isnan(x)
    assert nan.any() and np.isinf(x).any()
    with np.errstate(invalid="ignore"):  # casting NaNs warns
        got = round_f32_to_bf16(x, R.CONV_EVEN)
    assert got.dtype == bf16
    np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
    got_bits = got.view(np.uint16)[~nan]
    np.testing.assert_array_equal(got_bits, bf16_bits(x[~nan]))
    np.testing.assert_array_equal(got_bits, rne_oracle(bits[~nan]))


def test_directed_hand():
    x = np.array([1 + 2**-8, -(1 + 2**-8), 1 + 2**-9, -(1 + 3 * 2**-9), 3.0], dtype=np.float32)
    fl = round_f32_to_bf16(x, R.FLOOR).astype(np.float64)
    ce = round_f32_to_bf16(x, R.CEIL).astype(np.float64)
    tr = round_f32_to_bf16(x, R.SYM_FLOOR).astype(np.float64)
    up = 1 + 2**-7
    assert fl.tolist() == [1.0, -up, 1.0, -up, 3.0]  # floor: negatives move away from zero
    assert ce.tolist() == [up, -1.0, up, -1.0, 3.0]
    assert tr.tolist() == [1.0, -1.0, 1.0, -1.0, 3.0]  # sym_floor: toward zero


def test_directed_specials():
    x = f32_from_bits(np.array([0x7F800000, 0xFF800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7FC00000,
                                0xFFC00000, 0x7F800001], np.uint32))
    fl = round_f32_to_bf16(x, R.FLOOR).view(np.uint16)
    ce = round_f32_to_bf16(x, R.CEIL).view(np.uint16)
    # +-inf exact; the largest fp32 floors to the largest bf16 and ceils to inf (and mirrored)
    assert fl[:4].tolist() == [0x7F80, 0xFF80, 0x7F7F, 0xFF80]
    assert ce[:4].tolist() == [0x7F80, 0xFF80, 0x7F80, 0xFF7F]
    for mode in (R.FLOOR, R.CEIL, R.SYM_FLOOR, R.CONV_ODD):
        assert np.isnan(round_f32_to_bf16(x[4:], mode).astype(np.float32)).all()


def grid_neighbours(x: np.ndarray):
    """(floor, ceil) on the bf16 grid via ml_dtypes RNE and np.nextafter (independent of the code)."""
    rne = x.astype(bf16)
    r64 = rne.astype(np.float64)
    x64 = x.astype(np.float64)
    inf = np.array(np.inf, dtype=bf16)
    down = np.nextafter(rne, -inf)
    upn = np.nextafter(rne, inf)
    fl = np.where(r64 > x64, down, rne).astype(bf16)
    ce = np.where(r64 < x64, upn, rne).astype(bf16)
    return fl, ce


@pytest.mark.parametrize("mode", [m for m in Rounding if m != R.CONV_EVEN], ids=lambda m: m.name)
def test_all_modes_bracket_and_pick_the_right_neighbour(mode):
    bits = random_bits(seed=int(mode))
    x = f32_from_bits(bits)
    x = x[~np.isnan(x)]
    got = round_f32_to_bf16(x, mode)
    assert got.dtype == bf16
    g = got.astype(np.float64)
    # on the bf16 grid: the fp32 pattern of the result has 16 zero low bits
    assert not (got.astype(np.float32).view(np.uint32) & 0xFFFF).any()
    fl, ce = grid_neighbours(x)
    f64, c64, x64 = fl.astype(np.float64), ce.astype(np.float64), x.astype(np.float64)
    assert (f64 <= x64).all() and (x64 <= c64).all()
    assert ((g == f64) | (g == c64)).all()
    pos = x64 >= 0
    # for ties and nearest: treat the step past the largest finite bf16 as 2^128 (the pattern 0x7F80)
    c_ext = np.where(np.isinf(c64) & np.isfinite(x64), np.copysign(2.0**128, x64), c64)
    f_ext = np.where(np.isinf(f64) & np.isfinite(x64), np.copysign(2.0**128, x64), f64)
    with np.errstate(invalid="ignore"):  # inf - inf at +-inf inputs: never a tie
        below, above = x64 - f_ext, c_ext - x64
    tie = (below == above) & (f64 != c64)
    nearest = np.where(below < above, fl, ce).astype(np.float64)
    ce_odd = (ce.view(np.uint16) & 1) == 1
    if mode == R.FLOOR:
        want = f64
    elif mode == R.CEIL:
        want = c64
    elif mode == R.SYM_FLOOR:
        want = np.where(pos, f64, c64)
    elif mode == R.SYM_CEIL:
        want = np.where(pos, c64, f64)
    else:
        tie_pick = {
            R.NEG_INF: f64,
            R.POS_INF: c64,
            R.SYM_ZERO: np.where(pos, f64, c64),
            R.SYM_INF: np.where(pos, c64, f64),
            R.CONV_ODD: np.where(ce_odd, c64, f64),
        }[mode]
        want = np.where(tie, tie_pick, nearest)
        assert tie.sum() > 1000  # the ties really are in the set
    np.testing.assert_array_equal(g, want)
    if mode == R.FLOOR:  # toward -inf: negative non-grid values grow in magnitude
        neg_off = (x64 < 0) & (f64 != c64)
        assert (np.abs(g[neg_off]) > np.abs(x64[neg_off])).all()
    if mode == R.SYM_FLOOR:
        assert (np.abs(g) <= np.abs(x64)).all()


@SETTINGS
@given(bits=st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=50))
def test_conv_even_property(bits):
    b = np.array(bits, dtype=np.uint32)
    x = f32_from_bits(b)
    keep = ~np.isnan(x)
    got = round_f32_to_bf16(x[keep], R.CONV_EVEN).view(np.uint16)
    np.testing.assert_array_equal(got, rne_oracle(b[keep]))


# ---------------------------------------------------------------------------------------------
# KernelNumerics
# ---------------------------------------------------------------------------------------------
def bf(*vals) -> np.ndarray:
    arr = np.array(vals, dtype=np.float64)
    out = arr.astype(bf16)
    assert (out.astype(np.float64) == arr).all()  # the test values themselves are exact bf16
    return out


def loop_calls(num: KernelNumerics, a, b, k):
    c = num.zero((a.shape[0], b.shape[1]))
    for k0 in range(0, a.shape[1], k):
        c = num.call(c, a[:, k0 : k0 + k], b[k0 : k0 + k, :])
    return c


def test_bf16_rounds_once_per_call():
    num = KernelNumerics.of("bf16", "bf16")
    # products 1, 2^-8, 2^-8: one call sums to 1 + 2^-7 (a bf16 value); per-chunk calls see the
    # tie 1 + 2^-8 twice, which round-to-even takes back to 1.0 each time
    a = bf(1.0, 2**-4, 2**-4).reshape(1, 3)
    b = bf(1.0, 2**-4, 2**-4).reshape(3, 1)
    whole = num.call(num.zero((1, 1)), a, b)
    c = num.zero((1, 1))
    c = num.call(c, a[:, :1], b[:1, :])
    assert c.astype(np.float64).item() == 1.0
    c = num.call(c, a[:, 1:2], b[1:2, :])
    assert c.astype(np.float64).item() == 1.0
    c = num.call(c, a[:, 2:], b[2:, :])
    assert whole.dtype == bf16 and c.dtype == bf16
    assert whole.astype(np.float64).item() == 1 + 2**-7
    assert c.astype(np.float64).item() == 1.0
    assert reference(num, a, b, 3).astype(np.float64).item() == 1 + 2**-7
    assert reference(num, a, b, 1).astype(np.float64).item() == 1.0
    assert reference(num, a, b, 2).astype(np.float64).item() == 1.0  # chunks {1, 2^-8}, {2^-8}


def test_bf16_rounding_mode_is_applied_on_store():
    a = bf(-1.0, -(2**-4)).reshape(1, 2)
    b = bf(1.0, 2**-5).reshape(2, 1)  # -1 - 2^-9
    c0 = np.zeros((1, 1), dtype=bf16)
    even = KernelNumerics.of("bf16", "bf16").call(c0, a, b)
    floor = KernelNumerics.of("bf16", "bf16", rounding=R.FLOOR).call(c0, a, b)
    trunc = KernelNumerics.of("bf16", "bf16", rounding=R.SYM_FLOOR).call(c0, a, b)
    assert even.astype(np.float64).item() == -1.0
    assert floor.astype(np.float64).item() == -(1 + 2**-7)
    assert trunc.astype(np.float64).item() == -1.0


def test_f32_output_keeps_fp32_accumulator():
    num = KernelNumerics.of("bf16", "f32")
    # no bf16 rounding between calls: the 1 + 2^-8 partial sums survive
    a = bf(1.0, 2**-4, 2**-4).reshape(1, 3)
    b = bf(1.0, 2**-4, 2**-4).reshape(3, 1)
    out = reference(num, a, b, 1)
    assert out.dtype == np.float32
    assert out.item() == 1 + 2**-7
    # but fp32 rounding per call: products 1, 2^-24, 2^-24
    a = bf(1.0, 2**-12, 2**-12).reshape(1, 3)
    b = bf(1.0, 2**-12, 2**-12).reshape(3, 1)
    assert reference(num, a, b, 1).item() == 1.0  # each 1 + 2^-24 is an fp32 tie -> 1.0
    assert reference(num, a, b, 3).item() == 1 + 2**-23  # one call: exact sum, fp32 value
    c = np.array([[1 + 2**-23]], dtype=np.float32)  # not a bf16 value: kept as is
    assert num.call(c, np.zeros((1, 1), bf16), np.zeros((1, 1), bf16)).item() == 1 + 2**-23


def bf16_reference_oracle(a, b, k, out_f32=False):
    """C <- bf16(fp32(C + A_k @ B_k)) per chunk, in plain numpy/ml_dtypes."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    c = np.zeros((a.shape[0], b.shape[1]), dtype=np.float32 if out_f32 else bf16)
    for k0 in range(0, a.shape[1], k):
        s = c.astype(np.float64) + a64[:, k0 : k0 + k] @ b64[k0 : k0 + k, :]
        c = s.astype(np.float32) if out_f32 else s.astype(np.float32).astype(bf16)
    return c


@SETTINGS
@given(
    m=st.integers(1, 6), kk=st.integers(1, 300), n=st.integers(1, 6),
    k=st.integers(1, 80), seed=st.integers(0, 2**16), out=st.sampled_from(["bf16", "f32"]),
)
def test_bf16_reference_is_a_loop_of_calls(m, kk, n, k, seed, out):
    a, b = make_inputs(m, kk, n, "bf16", out, seed=seed)
    num = KernelNumerics.of("bf16", out)
    got = reference(num, a, b, k)
    np.testing.assert_array_equal(got.view(np.uint16 if out == "bf16" else np.uint32),
                                  loop_calls(num, a, b, k).view(np.uint16 if out == "bf16" else np.uint32))
    want = bf16_reference_oracle(a, b, k, out_f32=(out == "f32"))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


def test_i8_saturates_per_call():
    num = KernelNumerics.of("i8", "i8")  # SATURATE
    a = np.array([[100, 100]], dtype=np.int8)
    b = np.array([[2], [-1]], dtype=np.int8)
    exact = 100 * 2 + 100 * -1  # 100: fits i8
    assert reference(num, a, b, 2).item() == exact
    # per-call: 200 saturates to 127, then 127 - 100
    assert reference(num, a, b, 1).item() == 27
    assert loop_calls(num, a, b, 1).item() == 27
    assert reference(num, a, b, 1).dtype == np.int8
    # symmetric saturation clamps the negative side to -127
    a2 = np.array([[-100, 100]], dtype=np.int8)
    b2 = np.array([[2], [1]], dtype=np.int8)
    assert reference(num, a2, b2, 1).item() == -128 + 100
    sym = KernelNumerics.of("i8", "i8", saturation=Saturation.SYMMETRIC)
    assert reference(sym, a2, b2, 1).item() == -127 + 100
    # wrap-around is modular, so per-call wrapping equals wrapping the exact sum
    wrap = KernelNumerics.of("i8", "i8", saturation=Saturation.NONE)
    assert reference(wrap, a, b, 1).item() == 100
    assert reference(wrap, a2, b2, 1).item() == -100


@SETTINGS
@given(
    m=st.integers(1, 5), kk=st.integers(1, 200), n=st.integers(1, 5),
    k=st.integers(1, 64), seed=st.integers(0, 2**16),
    sat=st.sampled_from(list(Saturation)),
)
def test_int_reference_is_a_loop_of_calls(m, kk, n, k, seed, sat):
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (m, kk)).astype(np.int8)  # full range: saturates often
    b = rng.integers(-128, 128, (kk, n)).astype(np.int8)
    num = KernelNumerics.of("i8", "i8", saturation=sat)
    got = reference(num, a, b, k)
    np.testing.assert_array_equal(got, loop_calls(num, a, b, k))
    # independent: per-chunk exact integer sum, then narrow
    c = np.zeros((m, n), dtype=np.int64)
    for k0 in range(0, kk, k):
        s = c + a[:, k0 : k0 + k].astype(np.int64) @ b[k0 : k0 + k, :].astype(np.int64)
        if sat == Saturation.NONE:
            c = (s + 128) % 256 - 128
        elif sat == Saturation.SATURATE:
            c = np.clip(s, -128, 127)
        else:
            c = np.clip(s, -127, 127)
    np.testing.assert_array_equal(got.astype(np.int64), c)


def test_int_shift_upshifts_c_then_rounds_and_saturates():
    a3 = np.array([[3]], dtype=np.int8)
    a2 = np.array([[2]], dtype=np.int8)
    one = np.array([[1]], dtype=np.int8)
    c5 = np.array([[5]], dtype=np.int16)
    even = KernelNumerics.of("i8", "i16", shift=2)  # conv_even, saturate
    floor = KernelNumerics.of("i8", "i16", shift=2, rounding=R.FLOOR)
    symzero = KernelNumerics.of("i8", "i16", shift=2, rounding=R.SYM_ZERO)
    # acc = 5 << 2 + 3 = 23 -> 23 / 4 = 5.75
    assert even.accumulate(c5, a3, one).tolist() == [[23]]
    assert even.accumulate(c5, a3, one).dtype == np.int64
    assert even.call(c5, a3, one).tolist() == [[6]]
    assert floor.call(c5, a3, one).tolist() == [[5]]
    # acc = 22 -> 5.5: a tie
    assert even.call(c5, a2, one).tolist() == [[6]]
    assert floor.call(c5, a2, one).tolist() == [[5]]
    assert symzero.call(c5, a2, one).tolist() == [[5]]
    # negative: -5 << 2 + 2 = -18 -> -4.5
    cm5 = np.array([[-5]], dtype=np.int16)
    assert even.call(cm5, a2, one).tolist() == [[-4]]
    assert floor.call(cm5, a2, one).tolist() == [[-5]]
    assert symzero.call(cm5, a2, one).tolist() == [[-4]]
    # C survives a call with zero products only when the upshift and the shift cancel
    zero = np.zeros((1, 1), dtype=np.int8)
    assert even.call(c5, zero, zero).tolist() == [[5]]
    # narrowing after the shift: (32767 << 2 + 8) >> 2 = 32769 -> saturates / wraps
    big = np.array([[32767]], dtype=np.int16)
    a8 = np.array([[8]], dtype=np.int8)
    assert even.call(big, a8, one).tolist() == [[32767]]
    wrap = KernelNumerics.of("i8", "i16", shift=2, saturation=Saturation.NONE)
    assert wrap.call(big, a8, one).tolist() == [[32769 - 65536]]


def test_acc_overflows():
    num = KernelNumerics.of("i8", "i32")
    acc = np.array([2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 0, 5 * 2**31, -(2**40)], dtype=np.int64)
    assert num.acc_overflows(acc) == 4
    c = np.array([[2**31 - 1, -(2**31), 7]], dtype=np.int32)
    a = np.array([[1]], dtype=np.int8)
    b = np.array([[1, -1, 1]], dtype=np.int8)
    acc = num.accumulate(c, a, b)
    assert acc.tolist() == [[2**31, -(2**31) - 1, 8]]
    assert num.acc_overflows(acc) == 2
    # bf16 accumulates in floating point: nothing to overflow
    assert KernelNumerics.of("bf16", "bf16").acc_overflows(np.array([1e30, -1e30])) == 0


def test_zero_and_of():
    num = KernelNumerics.of("i8", "i16", shift=3)
    assert (num.dtype_in, num.dtype_out, num.shift) == (I8, I16, 3)
    z = num.zero((2, 3))
    assert z.shape == (2, 3) and z.dtype == np.int16 and not z.any()
    assert KernelNumerics.of("bf16", "f32").zero((1, 1)).dtype == F32.host
    assert KernelNumerics.of("bf16", "bf16").zero((1, 1)).dtype == BF16.host
    assert KernelNumerics.of("i8", "i32").zero((1,)).dtype == I32.host


# ---- the order of fp32 accumulation ------------------------------------------------------------------
@pytest.mark.parametrize("t_out", ["bf16", "f32"])
def test_fp32_per_mac_changes_nothing_on_exact_inputs_and_something_on_wide_ones(t_out):
    """The NPU accumulates in fp32 in an unpublished order: on the exact input family every partial
    sum is exact, so rounding after every mac gives the same C as the exact sum rounded once; on
    wide inputs it does not (so a hardware run on them can only be checked within a tolerance)."""
    from dataclasses import replace as _replace

    from gemm_gen.facts.inputs import make_inputs
    from gemm_gen.facts.numerics import KernelNumerics, reference

    once = KernelNumerics.of("bf16", t_out)
    per_mac = _replace(once, fp32_per_mac=True)
    a, b = make_inputs(64, 4096, 64, "bf16", t_out, seed=1)
    assert np.array_equal(reference(per_mac, a, b, 4096), reference(once, a, b, 4096))
    a, b = make_inputs(64, 4096, 64, "bf16", t_out, seed=1, family="wide")
    differ = reference(per_mac, a, b, 4096) != reference(once, a, b, 4096)
    assert differ.any()  # a bf16 C hides most of it: a few elements of 4096 round the other way


def test_per_mac_rounding_follows_each_macs_products():
    """Issue 31 item 11a: fp32_per_mac rounds after every hardware mac of `mac_products` products per lane
    (numerics.fused_mac_products: the mmul's K on AIE2, 8 through the bfp16 datapath, 1 for AIE2P's plain bf16
    mmul, which aie_api emulates with elementwise macs); on wide inputs rounding per 8 products and per product
    give different C, and both say which model they follow."""
    from dataclasses import replace as _replace

    from gemm_gen.facts.inputs import make_inputs
    from gemm_gen.facts.numerics import KernelNumerics, fused_mac_products, reference

    assert fused_mac_products("aie2", "bf16", (4, 8, 4), False) == 8
    assert fused_mac_products("aie2p", "bf16", (4, 8, 4), False) == 1
    assert fused_mac_products("aie2p", "bf16", (8, 8, 8), True) == 8
    assert fused_mac_products("aie2p", "bfp16", (8, 8, 8), False) == 8
    assert fused_mac_products("aie2", "i8", (4, 8, 8), False) == 0
    once = KernelNumerics.of("bf16", "f32")
    per_product = _replace(once, fp32_per_mac=True)
    per_eight = _replace(per_product, mac_products=8)
    a, b = make_inputs(32, 512, 32, "bf16", "f32", seed=3, family="wide")
    results = [reference(nm, a, b, 512) for nm in (once, per_product, per_eight)]
    assert not np.array_equal(results[1], results[2]) and not np.array_equal(results[0], results[2])
    assert "once" in once.accumulation and "8 product(s)" in per_eight.accumulation
    assert KernelNumerics.of("i8", "i32").accumulation == "integer: exact"
