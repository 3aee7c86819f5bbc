"""One call's epilogue data (docs/epilogues.md section 3): the bias and the requantization parameters over
C's N columns, and the epilogue tile's bytes both ways (epilogue.pack_tile packs them; `read_tile` is what
the kernel reads back out of its L1 B buffer).

ReLU on a requantized output is its act_min: the host raises act_min to the zero point before packing the
header (`kernel_requant`), so the kernel's clamp is the whole activation, as TFLite's fused ReLU is.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from .dtypes import DType
from .epilogue import Activation, Epilogue, Requant, float_epilogue, pack_tile, requant_kernel, tanh_lut, tile_layout
from .rounding import Rounding


@dataclass(frozen=True, eq=False)
class EpilogueArgs:
    """A call's epilogue data over C's N columns: bias (f32 values for a float C, int32 for an integer one;
    None: zeros) and the per-column requantization (its act_min / act_max as given, ReLU not yet folded)."""

    bias: np.ndarray | None = None
    requant: Requant | None = None


def kernel_requant(e: Epilogue, requant: Requant | None) -> Requant | None:
    """The requantization the kernel applies: ReLU folded into act_min (max(act_min, zero_point))."""
    if requant is None or e.activation != Activation.RELU:
        return requant
    return replace(requant, act_min=max(requant.lo, requant.zero_point))


def tile_bytes(e: Epilogue, args: EpilogueArgs, col0: int, n: int, float_out: bool) -> np.ndarray:
    """The epilogue tile of the n-column C tile starting at column col0 (columns past N padded)."""
    return pack_tile(e, slice(col0, col0 + n), args.bias, kernel_requant(e, args.requant), float_out)


def read_tile(e: Epilogue, n: int, data: np.ndarray, float_out: bool, out: DType
              ) -> tuple[np.ndarray | None, Requant | None]:
    """(bias, requantization) of an n-column C tile from the epilogue tile's bytes, as the kernel reads
    them (the inverse of pack_tile). ValueError when a P or Q word is not the power of two it must be, or the
    header's pad word is not 0: the bytes are not an epilogue tile (they arrived in the wrong layout)."""
    layout = tile_layout(e, n)
    if layout is None:
        return None, None
    words = np.ascontiguousarray(data[:layout.nbytes]).view(np.int32)
    bias = words[:n].view(np.float32).copy() if float_out else words[:n].astype(np.int64)
    if e.requant is None:
        return (bias if e.bias else None), None
    assert layout.multiplier is not None and layout.p is not None and layout.q is not None
    assert layout.header is not None
    mult, p, q = (words[at // 4:at // 4 + n].astype(np.int64) for at in (layout.multiplier, layout.p, layout.q))
    zp, lo, hi, pad = (int(x) for x in words[layout.header // 4:layout.header // 4 + 4])
    left, right = _log2(p, "P"), 30 - _log2(q, "Q")
    if pad or np.any(left * right):
        raise ValueError(f"the epilogue tile's header pad {pad} or P, Q {p[:4]}, {q[:4]} are no epilogue tile's")
    return (bias if e.bias else None), Requant(tuple(int(x) for x in mult), tuple(int(x) for x in left - right),
                                               zp, lo, hi, out, e.requant)


def _log2(x: np.ndarray, name: str) -> np.ndarray:
    if np.any(x <= 0) or np.any(x & (x - 1)):
        raise ValueError(f"the epilogue tile's {name} words {x[:4]} are not powers of two")
    return np.log2(x).astype(np.int64)


def finish(e: Epilogue, acc: np.ndarray, bias: np.ndarray | None, requant: Requant | None,
           rounding: Rounding, table: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """C after the epilogue, from its accumulator (fp32 values, or int32): the float chain of
    epilogue.float_epilogue, or the kernel's saturating requantization (epilogue.requant_kernel). `table`: the
    tanh table's (slopes, offsets) as the kernel read them (epilogue.read_lut_table), default the numerics'."""
    if e.requant is not None:
        if requant is None:
            raise ValueError("an epilogue with requantization needs its parameters")
        return requant_kernel(requant, acc, bias)
    tanh = None if table is None else partial(tanh_lut, rounding=rounding, table=table)
    return float_epilogue(np.asarray(acc, dtype=np.float32), bias, e.activation, e.clamp, tanh, rounding)


def random_args(e: Epilogue, out: DType, n_cols: int, acc_scale: float, seed: int) -> EpilogueArgs:
    """Seeded epilogue data for a simulation: a bias of about acc_scale (float: N(0, acc_scale) in f32;
    integer: whole numbers), and for requantization multipliers in [2^30, 2^31), shifts that bring an
    accumulator of about acc_scale to about 2^5 (+-1 per column), a zero point in [-8, 8]."""
    rng = np.random.default_rng(seed)
    bias = None
    if e.bias:
        raw = rng.standard_normal(n_cols) * acc_scale
        bias = raw.astype(np.float32) if e.requant is None else np.round(raw).astype(np.int64)
    requant = None
    if e.requant is not None:
        base = int(np.round(np.log2(32.0 / max(acc_scale, 1.0))))
        shift = np.clip(base + rng.integers(-1, 2, n_cols), -30, 30)
        mult = rng.integers(1 << 30, 1 << 31, n_cols)
        requant = Requant(tuple(int(x) for x in mult), tuple(int(x) for x in shift), int(rng.integers(-8, 9)),
                          out=out, form=e.requant)
    return EpilogueArgs(bias, requant)


def acc_scale(a: np.ndarray, b: np.ndarray) -> float:
    """The typical size of an element of A @ B: sqrt(K) rms(A) rms(B) (what seeded epilogue data scales to)."""
    rms = [float(np.sqrt(np.mean(np.square(np.asarray(x, dtype=np.float64))))) if np.size(x) else 0.0
           for x in (a, b)]
    return max(float(np.sqrt(np.shape(a)[1])) * rms[0] * rms[1], 2.0**-10)


def seeded_args(e: Epilogue, out: DType, a: np.ndarray, b: np.ndarray, seed: int) -> EpilogueArgs | None:
    """The epilogue data `gemm-gen simulate` and `run` use with generated inputs A, B (None: no epilogue)."""
    return None if e.is_identity else random_args(e, out, np.shape(b)[1], acc_scale(a, b), seed)
