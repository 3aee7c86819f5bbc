"""Integer and bf16 rounding and saturation as the AIE core does them (crRnd, crSat): the leaf the
numerics and the bfp16 codec both build on."""

from __future__ import annotations

from enum import IntEnum

import numpy as np

from .dtypes import BF16, DType


class Rounding(IntEnum):
    """crRnd encodings (UG1583 "Mode Settings"); aie::rounding_mode spells some out (sym_inf is
    symmetric_inf), the kernel renderer maps the names."""

    FLOOR = 0
    CEIL = 1
    SYM_FLOOR = 2
    SYM_CEIL = 3
    NEG_INF = 8
    POS_INF = 9
    SYM_ZERO = 10
    SYM_INF = 11
    CONV_EVEN = 12
    CONV_ODD = 13


class Saturation(IntEnum):
    """crSat encodings: none wraps (truncates MSBs), saturate clamps, symmetric clamps to +-max."""

    NONE = 0
    SATURATE = 1
    SYMMETRIC = 3


def shift_round(acc: np.ndarray, shift: int, mode: Rounding) -> np.ndarray:
    """Arithmetic shift right of int64 values by `shift` bits, rounded per `mode`."""
    acc = np.asarray(acc, dtype=np.int64)
    if shift == 0:
        return acc.copy()
    q = acc >> shift  # floor
    r = acc & ((1 << shift) - 1)
    half = 1 << (shift - 1)
    return q + _round_up(mode, acc < 0, r != 0, r > half, r == half, q)


def round_real(t: np.ndarray, mode: Rounding) -> np.ndarray:
    """Real values (float64) rounded to integers per `mode`, the rules of shift_round."""
    t = np.asarray(t, dtype=np.float64)
    q = np.floor(t)
    r = t - q  # exact: q and t share their binade's grid
    return (q + _round_up(mode, t < 0, r != 0, r > 0.5, r == 0.5, q.astype(np.int64))).astype(np.int64)


def _round_up(mode: Rounding, neg: np.ndarray, inexact: np.ndarray, above: np.ndarray, at: np.ndarray,
              q: np.ndarray) -> np.ndarray:
    """Whether to add one to the floor: the crRnd decision from the sign, the remainder (nonzero,
    above half, exactly half) and the floor's parity."""
    if mode == Rounding.FLOOR:
        up = np.zeros_like(inexact)
    elif mode == Rounding.CEIL:
        up = inexact
    elif mode == Rounding.SYM_FLOOR:  # toward zero
        up = inexact & neg
    elif mode == Rounding.SYM_CEIL:  # away from zero
        up = inexact & ~neg
    elif mode == Rounding.NEG_INF:  # nearest, ties toward -inf
        up = above
    elif mode == Rounding.POS_INF:  # nearest, ties toward +inf
        up = above | at
    elif mode == Rounding.SYM_ZERO:  # nearest, ties toward zero
        up = above | (at & neg)
    elif mode == Rounding.SYM_INF:  # nearest, ties away from zero
        up = above | (at & ~neg)
    elif mode == Rounding.CONV_EVEN:
        up = above | (at & ((q & 1) == 1))
    elif mode == Rounding.CONV_ODD:
        up = above | (at & ((q & 1) == 0))
    else:  # pragma: no cover - IntEnum exhausts the cases
        raise ValueError(mode)
    return up


def saturate(x: np.ndarray, out: DType, mode: Saturation) -> np.ndarray:
    """Narrow int64 values to the integer type `out`."""
    lo, hi = out.min, out.max
    if mode == Saturation.NONE:
        bits = out.bits
        wrapped = (np.asarray(x, dtype=np.int64) - lo) & ((1 << bits) - 1)
        return (wrapped + lo).astype(out.host)
    if mode == Saturation.SYMMETRIC:
        lo = -hi
    return np.clip(x, lo, hi).astype(out.host)


def round_f32_to_bf16(x: np.ndarray, mode: Rounding = Rounding.CONV_EVEN) -> np.ndarray:
    """fp32 -> bf16 under a crRnd mode (conv_even equals ml_dtypes' round-to-nearest-even)."""
    x = np.asarray(x, dtype=np.float32)
    if mode == Rounding.CONV_EVEN:
        return x.astype(BF16.host)
    bits = x.view(np.uint32).astype(np.int64)
    sign = bits >> 31
    mag = bits & 0x7FFFFFFF
    # IEEE magnitudes are ordered like their bit patterns, so rounding the signed bit pattern
    # by 16 bits rounds the value onto the bf16 grid (carries move into the exponent).
    signed = np.where(sign == 1, -mag, mag)
    rounded = shift_round(signed, 16, mode)
    out_mag = np.abs(rounded) << 16
    nan = mag > 0x7F800000
    out_mag = np.where(nan, 0x7FC00000, out_mag)
    out_bits = (out_mag | (sign << 31)).astype(np.uint32)
    return out_bits.view(np.float32).astype(BF16.host)  # exact: low 16 bits are zero
