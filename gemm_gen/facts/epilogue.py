"""Fused-epilogue numerics (issue 21, docs/epilogues.md): what the kernel does to C after its last k-step,
bit for bit, and the float64 functions it approximates.

Integer outputs (TFLite / gemmlowp per-channel requantization, docs/epilogues.md section 1):
- `srdhm`: gemmlowp's SaturatingRoundingDoublingHighMul (fixedpoint.h lines 312-323): round(a b / 2^31),
  ties toward +inf, INT32_MIN * INT32_MIN saturated to INT32_MAX.
- `rdbpot`: gemmlowp's RoundingDivideByPOT (lines 338-352): round(x / 2^e), ties away from zero.
- `mbqm`: TFLite's MultiplyByQuantizedMultiplier, double rounding (common.cc lines 65-76);
  `mbqm_single`: its TFLITE_SINGLE_ROUNDING form (lines 20-35), one rounding, ties toward +inf.
- `mbqm_srs`: the same double rounding as the kernel computes it with three uniform SRS from acc64, all
  under positive_inf (one rounding mode for the kernel's whole conversion loop): x P, SRS 0; * M, SRS 31;
  * Q - [y < 0], SRS 30 (`rdbpot_positive_inf`: RDBPOT's ties away from zero under positive_inf); P = 2^left,
  Q = 2^(30 - right); tests/facts/test_epilogue_numerics.py proves it equals `mbqm`.
- `Requant.apply`: acc + bias (int32), MBQM per column, + zero point, clamp to [act_min, act_max],
  saturate to i8 / i16 (TFLite's FullyConnectedPerChannel, reference/integer_ops/fully_connected.h).

Float outputs (mlir-aie's aie2 bf16 kernels; bf16 in, bf16 out):
- `bias_bf16`: x = bf16(fp32(acc + bias)).
- `tanh_lut`: `getTanhBf16` (aie_runtime_lib/AIE2/lut_based_ops.h) as mlir-aie rewrote it (its linear_approx
  written out, x clamped to the table's range): 32 segments of width 1/4 on [-4, 4) (`TANH_SLOPES`,
  `TANH_OFFSETS`, from `tanh_lut_ab` in lut_based_ops.cpp), y = bf16(fp32(slope x + offset)); the table's
  layout per target (`lut_table`: 128-bit groups on AIE2, 256-bit on AIE2P) and how a lookup reads it back
  (`read_lut_table`).
- `silu_bf16`, `gelu_bf16`: aie2 silu.cc / gelu.cc, every product and sum rounded to bf16 where the
  kernel stores a bf16 vector; `relu_bf16`, `clamp_bf16`.
- `*_ref`: the float64 functions (tanh, x sigmoid(x), tanh-form GELU, ReLU, clamp).

Arithmetic model (docs/epilogues.md section 1, "Errors"): a bf16 x bf16 product is exact in fp32; an fp32
add is one IEEE round-to-nearest-even rounding (as facts/numerics.py assumes for accfloat adds); fp32 -> bf16
rounds under the core's crRnd mode (`rounding`, our kernels set conv_even). fp32 arithmetic here is
NumPy's IEEE float32, subnormals included; whether the core flushes subnormals is unpublished.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum

import numpy as np

from .dtypes import BF16, I8, I16, I32, DType
from .rounding import Rounding, Saturation, round_f32_to_bf16, round_real, saturate, shift_round

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
MAX_RIGHT_SHIFT = 30  # the SRS form needs Q = 2^(30 - right) to be an integer: right = 31 is refused
MAX_SHIFT = 30  # TFLite's shift range for the int32 MBQM is [-31, 30]

# ---- integer requantization ---------------------------------------------------------------------------


def srdhm(a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul of int32 values: round(a b / 2^31), ties toward +inf (the
    nudge and C++'s truncating division cancel for either sign), INT32_MIN^2 -> INT32_MAX."""
    prod = np.asarray(a, dtype=np.int64) * np.asarray(b, dtype=np.int64)
    return np.minimum(shift_round(prod, 31, Rounding.POS_INF), INT32_MAX).astype(np.int32)


def rdbpot(x: np.ndarray | int, exponent: np.ndarray | int) -> np.ndarray:
    """RoundingDivideByPOT of int32 values, 0 <= exponent <= 31: round(x / 2^e), ties away from zero."""
    x = np.asarray(x, dtype=np.int64)
    e = np.broadcast_to(np.asarray(exponent, dtype=np.int64), x.shape)
    if e.size and (e.min() < 0 or e.max() > 31):
        raise ValueError(f"RoundingDivideByPOT takes exponents 0..31, got {e.min()}..{e.max()}")
    out = np.empty(x.shape, dtype=np.int64)
    for v in np.unique(e):  # shift_round takes one shift: one pass per distinct exponent
        sel = e == v
        out[sel] = shift_round(x[sel], int(v), Rounding.SYM_INF)
    return out.astype(np.int32)


def _split_shift(shift: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(shift, dtype=np.int64)
    if s.size and (s.min() < -31 or s.max() > MAX_SHIFT):
        raise ValueError(f"shifts must lie in [-31, {MAX_SHIFT}], got {s.min()}..{s.max()}")
    return np.maximum(s, 0), np.maximum(-s, 0)


def mbqm(x: np.ndarray | int, multiplier: np.ndarray | int, shift: np.ndarray | int) -> np.ndarray:
    """TFLite's MultiplyByQuantizedMultiplier (double rounding, its default): RDBPOT(SRDHM(x 2^left, M),
    right) with left = max(shift, 0), right = max(-shift, 0). x 2^left must fit in int32 (TFLite's
    int32 product; its overflow is undefined behaviour in C++, so the domain ends there)."""
    left, right = _split_shift(shift)
    scaled = np.asarray(x, dtype=np.int64) << left
    if scaled.size and (scaled.min() < INT32_MIN or scaled.max() > INT32_MAX):
        raise ValueError("x * 2^left leaves int32 (outside TFLite's MultiplyByQuantizedMultiplier)")
    return rdbpot(srdhm(scaled, multiplier), right)


def mbqm_single(x: np.ndarray | int, multiplier: np.ndarray | int, shift: np.ndarray | int) -> np.ndarray:
    """TFLITE_SINGLE_ROUNDING's MultiplyByQuantizedMultiplier: round(x M / 2^(31 - shift)), ties toward
    +inf, one rounding of the exact int64 product (M >= 0, shift in [-31, 30])."""
    s = np.asarray(shift, dtype=np.int64)
    _split_shift(s)
    prod = np.asarray(x, dtype=np.int64) * np.asarray(multiplier, dtype=np.int64)
    total = np.broadcast_to(31 - s, prod.shape)
    out = np.empty(prod.shape, dtype=np.int64)
    for v in np.unique(total):
        sel = total == v
        out[sel] = shift_round(prod[sel], int(v), Rounding.POS_INF)
    return saturate(out, I32, Saturation.SATURATE)


def srs_factors(shift: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    """The per-lane int32 factors of the kernel's SRS form: P = 2^left, Q = 2^(30 - right)."""
    left, right = _split_shift(shift)
    if right.size and right.max() > MAX_RIGHT_SHIFT:
        raise ValueError(f"a right shift of {int(right.max())} needs Q = 2^{30 - int(right.max())}: "
                         f"the SRS form takes right shifts up to {MAX_RIGHT_SHIFT}")
    return (np.int64(1) << left).astype(np.int32), (np.int64(1) << (30 - right)).astype(np.int32)


def rdbpot_positive_inf(y: np.ndarray | int, q: np.ndarray | int) -> np.ndarray:
    """RDBPOT's step as the kernel computes it under positive_inf: srs(y Q - [y < 0], 30), saturated to int32,
    for int32 y and Q = 2^(30 - right) > 0. Equal to srs(y Q, 30) under symmetric_inf (ties away from zero):
    v = y Q has y's sign; for v >= 0 the two modes agree; for v < 0, positive_inf of v - 1 is
    floor((v - 1 + 2^29) / 2^30), which is v / 2^30 rounded to nearest with ties toward -inf (v is an integer),
    i.e. away from zero. The kernel's correction is max(min(y, 0), -1): two exact vector operations."""
    y = np.asarray(y, dtype=np.int64)
    below = np.maximum(np.minimum(y, 0), -1)
    v = y * np.asarray(q, dtype=np.int64) + below
    return saturate(shift_round(v, 30, Rounding.POS_INF), I32, Saturation.SATURATE)


def mbqm_srs(x: np.ndarray | int, multiplier: np.ndarray | int, shift: np.ndarray | int) -> np.ndarray:
    """MBQM as the kernel computes it with uniform SRS of int32 x int32 -> acc64 products, every one under
    positive_inf: y0 = srs(x P, 0); y1 = srs(y0 M, 31); y2 = rdbpot_positive_inf(y1, Q); every SRS
    saturating to int32 (which also gives SRDHM's INT32_MIN^2 -> INT32_MAX)."""
    p, q = srs_factors(shift)
    sat = Saturation.SATURATE
    y0 = saturate(np.asarray(x, dtype=np.int64) * p.astype(np.int64), I32, sat).astype(np.int64)
    y1 = saturate(shift_round(y0 * np.asarray(multiplier, dtype=np.int64), 31, Rounding.POS_INF), I32, sat)
    return rdbpot_positive_inf(y1, q)


class RequantForm(Enum):
    """Which MultiplyByQuantizedMultiplier: TFLite's default double rounding or TFLITE_SINGLE_ROUNDING."""

    DOUBLE = "double"
    SINGLE = "single"


_MBQM: dict[RequantForm, Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]] = {
    RequantForm.DOUBLE: mbqm, RequantForm.SINGLE: mbqm_single}


@dataclass(frozen=True)
class Requant:
    """Per-output-channel requantization parameters (one multiplier and shift per column of C)."""

    multiplier: tuple[int, ...]
    shift: tuple[int, ...]
    zero_point: int = 0
    act_min: int | None = None  # None: the output type's minimum (ReLU / ReLU6 are only these bounds)
    act_max: int | None = None
    out: DType = I8
    form: RequantForm = RequantForm.DOUBLE

    def __post_init__(self) -> None:
        if len(self.multiplier) != len(self.shift):
            raise ValueError(f"{len(self.multiplier)} multipliers but {len(self.shift)} shifts")
        if self.out not in (I8, I16):
            raise ValueError(f"requantization writes i8 or i16, not {self.out.name}")
        m = np.asarray(self.multiplier, dtype=np.int64)
        if m.size and (m.min() < 0 or m.max() > INT32_MAX):
            raise ValueError("multipliers are int32 values >= 0 (TFLite's quantized_multiplier)")
        srs_factors(np.asarray(self.shift, dtype=np.int64))  # refuses shifts outside [-30, 30]
        if not self.out.min <= self.lo <= self.hi <= self.out.max:
            raise ValueError(f"[act_min, act_max] = [{self.lo}, {self.hi}] is not inside {self.out.name}")

    @property
    def lo(self) -> int:
        return self.out.min if self.act_min is None else self.act_min

    @property
    def hi(self) -> int:
        return self.out.max if self.act_max is None else self.act_max

    def apply(self, acc: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
        """acc (rows x columns, int32 values) -> requantized output, TFLite's per-channel order."""
        acc = np.asarray(acc, dtype=np.int64)
        if acc.shape[-1] != len(self.multiplier):
            raise ValueError(f"{acc.shape[-1]} columns but {len(self.multiplier)} multipliers")
        x = acc if bias is None else acc + np.asarray(bias, dtype=np.int64)
        if x.size and (x.min() < INT32_MIN or x.max() > INT32_MAX):
            raise ValueError("acc + bias leaves int32 (TFLite's int32 accumulator)")
        return self.output(_MBQM[self.form](x, np.asarray(self.multiplier, np.int64), np.asarray(self.shift, np.int64)))

    def output(self, y: np.ndarray) -> np.ndarray:
        """The scaled values' last steps, TFLite's order: + zero point, clamp to [act_min, act_max], saturate."""
        return saturate(np.clip(y.astype(np.int64) + self.zero_point, self.lo, self.hi), self.out, Saturation.SATURATE)

    def apply_real(self, acc: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
        """The float64 reference: (acc + bias) M 2^(shift - 31) rounded once to nearest (ties away from
        zero), + zero point, clamped. MBQM's double rounding differs from it by at most 1."""
        x = np.asarray(acc, dtype=np.float64) + (0.0 if bias is None else np.asarray(bias, np.float64))
        scale = np.asarray(self.multiplier, np.float64) * np.exp2(np.asarray(self.shift, np.float64) - 31)
        y = round_real(x * scale, Rounding.SYM_INF) + self.zero_point
        return np.clip(y, self.lo, self.hi).astype(self.out.host)


def fold_input_offset(bias: np.ndarray | None, b: np.ndarray, input_offset: int) -> np.ndarray:
    """The bias that makes A @ B requantize as TFLite's sum_k B[k, c] (A[r, k] + input_offset) does:
    bias[c] + input_offset sum_k B[k, c] (int64; TFLite's weights are symmetric, so no B offset)."""
    b64 = np.asarray(b, dtype=np.int64)
    base = np.zeros(b64.shape[-1], dtype=np.int64) if bias is None else np.asarray(bias, dtype=np.int64)
    return base + int(input_offset) * b64.sum(axis=0)


# ---- bf16 activations ------------------------------------------------------------------------------------

# getTanhBf16's table (mlir-aie aie_runtime_lib/AIE2/lut_based_ops.cpp, tanh_lut_ab): segment i covers
# [-4 + i/4, -4 + (i+1)/4); the stored table holds each pair of segments twice (4 banks).
TANH_SLOPES: tuple[float, ...] = (
    0.0, 0.002838134765625, 0.005096435546875, 0.00750732421875, 0.0126953125, 0.021240234375,
    0.035400390625, 0.056396484375, 0.091796875, 0.1455078125, 0.2294921875, 0.34765625, 0.50390625,
    0.69140625, 0.8671875, 1.0, 1.0, 0.8671875, 0.69140625, 0.50390625, 0.34765625, 0.2294921875,
    0.1455078125, 0.091796875, 0.056396484375, 0.035400390625, 0.021240234375, 0.0126953125,
    0.00750732421875, 0.005096435546875, 0.002838134765625, 0.0)
TANH_OFFSETS: tuple[float, ...] = (
    -1.0, -0.98828125, -0.98046875, -0.97265625, -0.95703125, -0.93359375, -0.8984375, -0.8515625,
    -0.78125, -0.6875, -0.5625, -0.416015625, -0.259765625, -0.11962890625, -0.03076171875, 0.0,
    0.0, 0.03076171875, 0.11962890625, 0.259765625, 0.416015625, 0.5625, 0.6875, 0.78125, 0.8515625,
    0.8984375, 0.93359375, 0.95703125, 0.97265625, 0.98046875, 0.98828125, 1.0)
TANH_SEGMENT_BITS = 2  # getTanhBf16's step_bits = -2: segments of width 2^-2
TANH_BIAS = 16  # its bias: segment 16 starts at 0
INDEX_BITS = 6  # the lookup's index = floor(x 2^6) (aie::to_fixed_floor), a byte address: 16 bytes per segment
ENTRY_BYTES = 1 << (INDEX_BITS - TANH_SEGMENT_BITS)  # the index's step per segment (a pair, stored twice)
PAIR_BYTES = 8  # one {slope, offset} pair of fp32 values
# x is clamped to the table's range before the lookup (mlir-aie's rewritten getTanhBf16, aie_runtime_lib/AIE2/
# lut_based_ops.h, stored version id 69055850465): the end segments are constants, so no finite result
# changes, and +-inf gives +-1 instead of 0 inf. The top is the largest bf16 of the last segment's index range.
TANH_X_MIN = -float(TANH_BIAS >> TANH_SEGMENT_BITS)  # -4
TANH_X_MAX = float(TANH_BIAS >> TANH_SEGMENT_BITS) - 2.0 ** -INDEX_BITS  # 4 - 1/64, a bf16
TANH_TABLE_FLOATS = 4 * len(TANH_SLOPES)  # each pair twice, in 2 fp32 each: 128 floats, 512 bytes per copy


def lut_table(slopes: tuple[float, ...], offsets: tuple[float, ...], copy_bits: int) -> np.ndarray:
    """One copy (`ab` or `cd`) of a 4-way lookup table of {slope, offset} pairs in the target's layout
    (Device.lut_copy_bits): each group of copy_bits / 64 consecutive pairs, then the same group again
    (AIE2: 2 pairs, mlir-aie AIE2/lut_based_ops.cpp tanh_lut_ab; AIE2P: 4 pairs, AIE2P/lut_based_ops.cpp after
    PR #2189)."""
    per = copy_bits // (8 * PAIR_BYTES)
    pairs = np.stack([np.asarray(slopes, np.float32), np.asarray(offsets, np.float32)], axis=1)
    if per < 1 or len(pairs) % per:
        raise ValueError(f"{len(pairs)} pairs do not fill groups of {per} ({copy_bits}-bit copies)")
    groups = pairs.reshape(len(pairs) // per, 2 * per)
    return np.concatenate([groups, groups], axis=1).reshape(-1)


def lut_entry(entry: int, copy_bits: int) -> tuple[int, int]:
    """The byte offsets, in one table copy, of entry `entry`'s pair and of its repeat: pair entry % per of
    group entry // per, each group of copy_bits / 8 bytes stored twice (the layout `lut_table` writes and a
    4-way lookup of byte index 16 entry reads, as the host stand-in models it)."""
    group = copy_bits // 8
    per = group // PAIR_BYTES
    at = entry // per * 2 * group + entry % per * PAIR_BYTES
    return at, at + group


def read_lut_table(ab: np.ndarray, cd: np.ndarray, copy_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """The (slopes, offsets) a 4-way lookup reads from the two table copies (fp32 arrays) in the target's
    layout; ValueError when the four copies of an entry differ (which lane reads which copy is unpublished:
    every copy must hold the pair) or the tables are not whole groups."""
    words = [np.ascontiguousarray(t, dtype=np.float32).view(np.uint32) for t in (ab, cd)]
    if words[0].size != words[1].size or words[0].size % (copy_bits // 16):
        raise ValueError(f"tables of {words[0].size} and {words[1].size} floats are not whole {copy_bits}-bit "
                         f"groups stored twice")
    entries = words[0].size * 4 // (2 * PAIR_BYTES)
    pairs = np.empty((entries, 2), dtype=np.uint32)
    for e in range(entries):
        at, rep = (o // 4 for o in lut_entry(e, copy_bits))
        copies = {tuple(w[o:o + 2]) for w in words for o in (at, rep)}
        if len(copies) != 1:
            raise ValueError(f"entry {e}: the table's four copies of its pair differ ({copy_bits}-bit layout)")
        pairs[e] = copies.pop()
    f = pairs.view(np.float32)
    return f[:, 0].copy(), f[:, 1].copy()


def tanh_table(copy_bits: int) -> np.ndarray:
    """getTanhBf16's table (TANH_SLOPES, TANH_OFFSETS) as one copy in the target's layout."""
    return lut_table(TANH_SLOPES, TANH_OFFSETS, copy_bits)

# the bf16 constants of aie2 gelu.cc (`const bfloat16 sqrt_2_over_pi = 0.79788456f; kBeta = 0.044715f`)
GELU_SQRT_2_OVER_PI = float(np.float32(0.79788456).astype(BF16.host))  # 0.796875
GELU_BETA = float(np.float32(0.044715).astype(BF16.host))  # 0.044677734375


def _f32(x: np.ndarray | float) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def _mul(a: np.ndarray | float, b: np.ndarray | float, rounding: Rounding) -> np.ndarray:
    """aie::mul of two bf16 vectors stored as bf16: the product in fp32 (exact for normal bf16 values),
    rounded to bf16."""
    with np.errstate(over="ignore", invalid="ignore"):  # IEEE: overflow to inf, 0 inf = NaN
        return round_f32_to_bf16(_f32(a) * _f32(b), rounding)


def _add(a: np.ndarray | float, b: np.ndarray | float, rounding: Rounding) -> np.ndarray:
    """aie::add of two bf16 vectors: one fp32 rounding (IEEE), then to bf16."""
    with np.errstate(over="ignore", invalid="ignore"):
        return round_f32_to_bf16(_f32(a) + _f32(b), rounding)


def bias_bf16(acc: np.ndarray, bias: np.ndarray | None = None, rounding: Rounding = Rounding.CONV_EVEN
              ) -> np.ndarray:
    """The float epilogue's input: bf16(fp32(acc + bias)), bias broadcast over the rows."""
    acc = _f32(acc)
    return round_f32_to_bf16(acc if bias is None else acc + _f32(bias), rounding)


def tanh_segment(x: np.ndarray, index_rounding: Rounding = Rounding.FLOOR) -> np.ndarray:
    """The LUT segment of each bf16 x: the byte index round(x 2^6) (bfloat16_to_int; its rounding is
    unpublished, floor assumed: it only matters within 2^-6 of a boundary) over 16 bytes per segment,
    + the bias, clamped to [0, 31]."""
    xs = np.nan_to_num(np.clip(np.asarray(x, dtype=np.float64), -8.0, 8.0))
    byte = round_real(xs * (1 << INDEX_BITS), index_rounding)
    step = INDEX_BITS - TANH_SEGMENT_BITS
    return np.clip((byte >> step) + TANH_BIAS, 0, len(TANH_SLOPES) - 1)


def tanh_lut(x: np.ndarray, rounding: Rounding = Rounding.CONV_EVEN,
             index_rounding: Rounding = Rounding.FLOOR,
             table: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """getTanhBf16 as the kernel computes it: x clamped to [TANH_X_MIN, TANH_X_MAX], then
    bf16(fp32(slope x + offset)) of its segment (the bf16 slope times the bf16 x is exact in fp32; the mac
    adds the fp32 offset with one rounding; to_vector<bfloat16> rounds). `table`: the (slopes, offsets) the
    kernel read (read_lut_table), default TANH_SLOPES / TANH_OFFSETS."""
    xc = np.clip(np.asarray(x, dtype=BF16.host).astype(np.float32), TANH_X_MIN, TANH_X_MAX)  # bf16 bounds: exact
    seg = tanh_segment(xc, index_rounding)
    slopes, offsets = (TANH_SLOPES, TANH_OFFSETS) if table is None else table
    slope = np.asarray(slopes, dtype=np.float32)[seg]
    offset = np.asarray(offsets, dtype=np.float32)[seg]
    return round_f32_to_bf16(slope * xc + offset, rounding)


def tanh_exact_bf16(x: np.ndarray, rounding: Rounding = Rounding.CONV_EVEN) -> np.ndarray:
    """tanh rounded once to bf16: the best any native tanh can do (a reference, not a kernel)."""
    return round_f32_to_bf16(np.tanh(np.asarray(x, dtype=np.float64)).astype(np.float32), rounding)


Tanh = Callable[[np.ndarray], np.ndarray]


def _tanh(tanh: Tanh | None, rounding: Rounding) -> Tanh:
    """The tanh a chain uses: the LUT rounding its output under the chain's mode, as the kernel does."""
    return tanh if tanh is not None else lambda x: tanh_lut(x, rounding)


def silu_bf16(x: np.ndarray, tanh: Tanh | None = None, rounding: Rounding = Rounding.CONV_EVEN) -> np.ndarray:
    """aie2 silu.cc: half = x 0.5; t = tanh(half); sigmoid = (t + 1) 0.5; x sigmoid; each a bf16 vector."""
    x = np.asarray(x, dtype=BF16.host)
    t = _tanh(tanh, rounding)(_mul(x, 0.5, rounding))
    sigmoid = _mul(_add(t, 1.0, rounding), 0.5, rounding)
    return _mul(x, sigmoid, rounding)


def gelu_bf16(x: np.ndarray, tanh: Tanh | None = None, rounding: Rounding = Rounding.CONV_EVEN) -> np.ndarray:
    """aie2 gelu.cc (tanh form): x2 = x x; x3 = x x2; inner = (x + beta x3) s; t = tanh(inner);
    x (0.5 (t + 1)); every op a bf16 vector, beta and s the bf16 constants."""
    x = np.asarray(x, dtype=BF16.host)
    x3 = _mul(x, _mul(x, x, rounding), rounding)
    inner = _mul(_add(x, _mul(x3, GELU_BETA, rounding), rounding), GELU_SQRT_2_OVER_PI, rounding)
    half = _mul(0.5, _add(_tanh(tanh, rounding)(inner), 1.0, rounding), rounding)
    return _mul(x, half, rounding)


def relu_bf16(x: np.ndarray) -> np.ndarray:
    """aie::max(x, 0): exact."""
    x = np.asarray(x, dtype=BF16.host)
    return np.maximum(x, np.zeros_like(x))


def clamp_bf16(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """aie::clamp(x, lo, hi) with bf16 bounds (the bounds rounded to nearest even once)."""
    x = np.asarray(x, dtype=BF16.host)
    blo, bhi = (np.asarray(v, dtype=np.float32).astype(BF16.host) for v in (lo, hi))
    if not blo <= bhi:
        raise ValueError(f"clamp bounds {lo} > {hi}")
    return np.minimum(np.maximum(x, blo), bhi)


def tanh_ref(x: np.ndarray) -> np.ndarray:
    return np.tanh(np.asarray(x, dtype=np.float64))


def silu_ref(x: np.ndarray) -> np.ndarray:
    """x sigmoid(x) in float64 (written to avoid exp overflow for large |x|)."""
    x = np.asarray(x, dtype=np.float64)
    return x * 0.5 * (1.0 + np.tanh(x / 2))


def gelu_ref(x: np.ndarray) -> np.ndarray:
    """The tanh form of GELU: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))."""
    x = np.asarray(x, dtype=np.float64)
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def relu_ref(x: np.ndarray) -> np.ndarray:
    return np.maximum(np.asarray(x, dtype=np.float64), 0.0)


def clamp_ref(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return np.clip(np.asarray(x, dtype=np.float64), lo, hi)


class Activation(Enum):
    """The float epilogue's activations (docs/epilogues.md section 3)."""

    NONE = "none"
    RELU = "relu"
    SILU = "silu"
    GELU = "gelu"
    # every activation of the output type compiled in, one selected per call by a runtime parameter
    # (mlir-aie PR #3462: the mode is a kernel argument read from the core's RTP buffer)
    RUNTIME = "runtime"


# A runtime-activation build's mode word: mlir-aie's numbering (aie2p mm_activation_epilogue.cc:
# 0 identity, 1 SiLU, 2 GELU, 3 ReLU). The bf16 output serves all four.
MODES: dict[Activation, int] = {Activation.NONE: 0, Activation.SILU: 1, Activation.GELU: 2, Activation.RELU: 3}


_KERNEL: dict[Activation, Callable[..., np.ndarray]] = {
    Activation.NONE: lambda x, **_: np.asarray(x, dtype=BF16.host),
    Activation.RELU: lambda x, **_: relu_bf16(x),
    Activation.SILU: silu_bf16,
    Activation.GELU: gelu_bf16,
}
REFERENCE: dict[Activation, Callable[[np.ndarray], np.ndarray]] = {
    Activation.NONE: lambda x: np.asarray(x, dtype=np.float64),
    Activation.RELU: relu_ref,
    Activation.SILU: silu_ref,
    Activation.GELU: gelu_ref,
}


def activate_bf16(x: np.ndarray, activation: Activation, tanh: Tanh | None = None,
                  rounding: Rounding = Rounding.CONV_EVEN) -> np.ndarray:
    """One activation's bf16 kernel sequence on bf16 x (a runtime build's is the one its call selects:
    Epilogue.selected)."""
    if activation not in _KERNEL:
        raise ValueError(f"activation {activation.value} is chosen per call: select one of "
                         f"{', '.join(a.value for a in MODES)} (Epilogue.selected)")
    if activation in (Activation.SILU, Activation.GELU):
        return _KERNEL[activation](x, tanh=tanh, rounding=rounding)
    return _KERNEL[activation](x)


def float_epilogue(acc: np.ndarray, bias: np.ndarray | None = None, activation: Activation = Activation.NONE,
                   clamp: tuple[float, float] | None = None, tanh: Tanh | None = None,
                   rounding: Rounding = Rounding.CONV_EVEN) -> np.ndarray:
    """The float epilogue of docs/epilogues.md section 3: x = bf16(fp32(acc + bias)); y = act(x);
    y = clamp(y) with bf16 bounds; bf16 out."""
    y = activate_bf16(bias_bf16(acc, bias, rounding), activation, tanh, rounding)
    return y if clamp is None else clamp_bf16(y, *clamp)


def float_epilogue_ref(acc: np.ndarray, bias: np.ndarray | None = None, activation: Activation = Activation.NONE,
                       clamp: tuple[float, float] | None = None) -> np.ndarray:
    """float64 act(acc + bias), clamped: what `float_epilogue` approximates."""
    x = np.asarray(acc, dtype=np.float64) + (0.0 if bias is None else np.asarray(bias, np.float64))
    y = REFERENCE[activation](x)
    return y if clamp is None else clamp_ref(y, *clamp)


# ---- the epilogue as a design option, and the data it reads ----------------------------------------------


@dataclass(frozen=True)
class Epilogue:
    """What a design does to each C tile once, after its last k-step (docs/epilogues.md section 3).

    The interface between the design side (options, host data, simulator) and the kernel side: both read
    this and `TileLayout`, nothing else. The activation and the clamp bounds are compile-time; the bias and
    the requantization parameters are data, carried in the epilogue tile (one extra B-sized object per
    output tile), so one build serves any bias and scales."""

    bias: bool = False
    activation: Activation = Activation.NONE
    clamp: tuple[float, float] | None = None  # float outputs only; integer bounds are the requant's act_min/max
    requant: RequantForm | None = None  # integer outputs (i8 / i16) from an int32 accumulator

    @property
    def is_identity(self) -> bool:
        return self == Epilogue()

    @property
    def tag(self) -> str:
        """A short name for file names: every field that changes the kernel's code."""
        parts = ["epi"] + (["bias"] if self.bias else []) + [self.activation.value]
        if self.clamp is not None:
            parts.append("clamp{:g},{:g}".format(*self.clamp).replace("-", "m"))
        if self.requant is not None:
            parts.append(f"rq{self.requant.value}")
        return "-".join(parts)

    def to_json(self) -> dict[str, object]:
        return {"bias": self.bias, "activation": self.activation.value,
                "clamp": None if self.clamp is None else list(self.clamp),
                "requant": None if self.requant is None else self.requant.value}

    @property
    def needs_tile(self) -> bool:
        """Whether the kernel reads an epilogue tile: only bias and requantization carry data."""
        return self.bias or self.requant is not None

    @property
    def uses_tanh(self) -> bool:
        """Whether some activation the build serves reads the tanh table (SiLU, GELU; a runtime build's
        modes include both): the kernel then takes the table's two copies (docs/epilogues.md)."""
        return bool(set(self.modes) & {Activation.SILU, Activation.GELU})

    @property
    def runtime(self) -> bool:
        """Whether each call selects the activation (a mode word in the core's RTP buffer)."""
        return self.activation == Activation.RUNTIME

    @property
    def modes(self) -> tuple[Activation, ...]:
        """The activations the build serves: all of MODES (in mode order) for a runtime build, else its own."""
        return tuple(sorted(MODES, key=MODES.__getitem__)) if self.runtime else (self.activation,)

    def selected(self, activation: Activation | None) -> Epilogue:
        """The epilogue one call applies: a runtime build's with the call's activation (None: identity,
        mode 0); a compile-time build's itself (ValueError for another activation: it has no such code)."""
        if not self.runtime:
            if activation is not None and activation != self.activation:
                raise ValueError(f"this build's activation is {self.activation.value}; a call cannot choose "
                                 f"{activation.value} (build with activation runtime)")
            return self
        act = Activation.NONE if activation is None else activation
        if act not in self.modes:
            raise ValueError(f"a runtime-activation build serves {', '.join(a.value for a in self.modes)}, "
                             f"not {act.value}")
        return replace(self, activation=act)

    def for_call(self, activation: str | None) -> Epilogue:
        """`selected` by the activation's name, as a call plan carries it (CallPlan.activation)."""
        return self.selected(None if activation is None else Activation(activation))


REQUANT_HEADER_WORDS = 4  # zero point, act_min, act_max, 0 (pads the header to 16 bytes)
# the kernel's epilogue works on 16 lanes at a time (templates/mm_epilogue.cc.j2): the LUT tanh's table load
# serves 16 lanes (load_lut_2x_float, as aie_api detail/aie2/linear_approx.hpp's input.grow<16>()), an AIE2
# int32 x int32 -> acc64 mul is 16 lanes (mul_elem_16_2); the model charges the epilogue per VECTOR_LANES values
VECTOR_LANES = 16


# The kernel chain's vector operations per VECTOR_LANES values (templates/mm_epilogue.cc.j2), what the model
# charges (model/epilogue_cost.py) and the program-memory rule counts (spec/rules/kernel_variant.py). A bf16 mul or
# add is two: the fp32 operation and its to_vector<bfloat16>. The LUT tanh, as written out since issue 31 (no
# aie::linear_approx object): the clamp's min and max, aie::to_fixed_floor, the index's + centre, the 4-way table
# load, two shuffles (offsets, slopes), x into the upper half of a zeroed vector, the mac, its to_vector<bfloat16>
# (10 on AIE2); AIE2P's mac_elem_32 also takes the offsets into the upper half of a 32-lane accumulator (11). One
# figure for both targets, the larger. (The object form counted 6 here and was worse than that: its scratchpad
# store and reload and the object's stack traffic on every call, II 70 against 28 for the written-out form in
# mlir-aie's measurement that issue 31 quotes.)
BF16_OP = 2
TANH_OPS = 11
ACTIVATION_OPS = {
    Activation.NONE: 0,
    Activation.RELU: 1,  # max(x, 0)
    Activation.SILU: 4 * BF16_OP + TANH_OPS,  # x / 2, tanh, + 1, / 2, x sigmoid
    Activation.GELU: 8 * BF16_OP + TANH_OPS,  # x^2, x^3, beta x^3, + x, s (.), tanh, + 1, 0.5 (.), x (.)
}
BIAS_OPS = 1  # the fp32 add (the parameter row is loaded once per block column)
CLAMP_OPS = 2  # max, min
# acc + bias and its SRS 0; three int32 x int32 muls and their SRS; RDBPOT's correction under positive_inf
# (min, max, and its add into the accumulator: REQUANT_CORRECTION_OPS); + zero point and its SRS; max, min; the
# narrowing SRS. No rounding-mode write in the loop (convert() sets positive_inf once per call).
REQUANT_CORRECTION_OPS = 3
REQUANT_OPS = 2 + 3 * 2 + REQUANT_CORRECTION_OPS + 2 + 2 + 1


def mode_ops(epilogue: Epilogue) -> tuple[int, ...]:
    """Vector operations per VECTOR_LANES values of each compiled block loop (one per mode of a runtime
    build, each with its own bias and clamp; empty without an epilogue)."""
    if epilogue.is_identity:
        return ()
    if epilogue.requant is not None:
        return (REQUANT_OPS,)
    rest = BIAS_OPS * epilogue.bias + (CLAMP_OPS if epilogue.clamp is not None else 0)
    return tuple(rest + ACTIVATION_OPS[a] for a in epilogue.modes)


def vector_ops(epilogue: Epilogue) -> int:
    """Vector operations per VECTOR_LANES values of C (0: no epilogue); a runtime build's costliest mode."""
    return max(mode_ops(epilogue), default=0)


@dataclass(frozen=True)
class TileLayout:
    """Byte offsets of the epilogue tile's arrays in its L1 buffer (linear, little endian, 4-byte words),
    for a C tile of `n` columns. None: the array is absent.

    Float outputs: bias[n] f32. Integer outputs: bias[n] i32 (zeros when only requantizing), then for
    requantization multiplier[n], P[n] = 2^left, Q[n] = 2^(30 - right) (i32, `srs_factors`), and the
    header [zero_point, act_min, act_max, 0] (i32)."""

    n: int
    bias: int | None
    multiplier: int | None
    p: int | None
    q: int | None
    header: int | None
    nbytes: int


def tile_layout(epilogue: Epilogue, n: int) -> TileLayout | None:
    """Where each parameter sits in the epilogue tile of an n-column C tile; None when no tile is read."""
    if not epilogue.needs_tile:
        return None
    row = 4 * n
    if epilogue.requant is None:
        return TileLayout(n, 0, None, None, None, None, row)
    return TileLayout(n, 0, row, 2 * row, 3 * row, 4 * row, 4 * row + 4 * REQUANT_HEADER_WORDS)


def pack_tile(epilogue: Epilogue, columns: slice, bias: np.ndarray | None = None,
              requant: Requant | None = None, float_out: bool = True) -> np.ndarray:
    """The bytes of one epilogue tile for C's `columns` (a slice of the full column range; columns past the
    end of bias / requant are padding and get bias 0, multiplier 0, P = 1 and Q = 2^30)."""
    n = columns.stop - columns.start
    layout = tile_layout(epilogue, n)
    if layout is None:
        return np.zeros(0, dtype=np.uint8)
    words = np.zeros(layout.nbytes // 4, dtype=np.int32)
    if bias is not None:
        part = np.asarray(bias)[columns]
        dst = words[:n].view(np.float32) if float_out else words[:n]
        dst[:len(part)] = part.astype(np.float32 if float_out else np.int64)
    if epilogue.requant is not None:
        if requant is None:
            raise ValueError("an epilogue with requantization needs its Requant parameters")
        mult = np.zeros(n, dtype=np.int64)
        shift = np.full(n, 0, dtype=np.int64)
        got = np.asarray(requant.multiplier, np.int64)[columns]
        mult[:len(got)] = got
        shift[:len(got)] = np.asarray(requant.shift, np.int64)[columns]
        p, q = srs_factors(shift)
        for offset, values in ((layout.multiplier, mult), (layout.p, p), (layout.q, q)):
            assert offset is not None
            words[offset // 4:offset // 4 + n] = values
        assert layout.header is not None
        words[layout.header // 4:layout.header // 4 + 3] = (requant.zero_point, requant.lo, requant.hi)
    return words.view(np.uint8)


def requant_kernel(requant: Requant, acc: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """The integer epilogue as the kernel computes it, defined for every int32 accumulator: x = acc + bias
    saturated to int32 (exact in acc64, then SRS 0), `mbqm_srs` (saturating), + zero point, clamp, saturate.
    Equals `Requant.apply` (TFLite) wherever acc + bias fits int32, which TFLite assumes."""
    acc = np.asarray(acc, dtype=np.int64)
    x = acc if bias is None else acc + np.asarray(bias, dtype=np.int64)
    x = saturate(x, I32, Saturation.SATURATE).astype(np.int64)
    return requant.output(mbqm_srs(x, np.asarray(requant.multiplier, np.int64), np.asarray(requant.shift, np.int64)))
