"""The operator's epilogue data (issue 21): `g(A, B, bias=b)` and `g.simulate(A, B, bias=b, scale=(multiplier,
shift), zero_point=zp, act_min=lo, act_max=hi)`, checked against the Gemm's epilogue and C's N columns, each
refusal one ConfigError line in the operator's terms (what was given, the limit, what to pass instead).

A float C's bias is f32 data (values f32 holds exactly: bf16, f16, f32, whole numbers, or float64 that round
to themselves); an integer C's bias is int32. Requantization takes one int32 multiplier (>= 0) and one shift
in [-30, 30] per column (TFLite's quantized_multiplier and shift; a right shift of 31 has no SRS form), a zero
point and [act_min, act_max] inside the output type.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..facts.epilogue import INT32_MAX, INT32_MIN, MAX_SHIFT, Requant
from ..facts.epilogue_args import EpilogueArgs
from ..facts.errors import ConfigError
from ..spec.config import GemmConfig
from .operator_args import refuse

REQUANT_ARGS = ("scale", "zero_point", "act_min", "act_max")


def _vector(args: dict[str, Any], name: str, value: Any, n_cols: int) -> np.ndarray:
    """value as a 1-D array of N real numbers (ConfigError naming `name` otherwise)."""
    try:
        x = np.asarray(value)
    except (TypeError, ValueError):
        x = np.asarray(None)
    if x.dtype.kind not in "iuf" and x.dtype.name not in ("bfloat16",):
        raise refuse(args, f"{name} holds {x.dtype} values, not real numbers", f"pass {name} as a NumPy array of "
                     f"{n_cols} numbers")
    if x.ndim != 1 or x.shape[0] != n_cols:
        raise refuse(args, f"{name} has shape {x.shape}, and C has N = {n_cols} columns",
                     f"pass {name} as {n_cols} values, one per column of C")
    return x


def _whole(args: dict[str, Any], name: str, x: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """x as int64, every value a whole number in [lo, hi]."""
    f = x.astype(np.float64)
    bad = ~np.isfinite(f) | (f != np.round(f)) | (f < lo) | (f > hi)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise refuse(args, f"{name}[{i}] = {x[i]!r} is not a whole number in [{lo}, {hi}] ({int(bad.sum())} such)",
                     f"pass {name} as integers in that range")
    return x.astype(np.int64)


def _scalar(args: dict[str, Any], name: str, value: Any, lo: int, hi: int) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)) or not lo <= value <= hi:
        raise refuse(args, f"{name}={value!r} is not an integer in [{lo}, {hi}]", f"pass {name} in that range")
    return int(value)


def float_bias(args: dict[str, Any], x: np.ndarray) -> np.ndarray:
    """A float C's bias as f32, each value one f32 holds exactly and finite."""
    f64 = x.astype(np.float64)
    with np.errstate(over="ignore"):
        f32 = f64.astype(np.float32)
    bad = ~np.isfinite(f64) | (f32.astype(np.float64) != f64)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise refuse(args, f"bias[{i}] = {x[i]!r} is not a finite f32 value ({int(bad.sum())} such): the epilogue adds "
                     f"an f32 bias", "pass bias.astype(np.float32) (finite values) to accept the rounding")
    return f32


def epilogue_args(args: dict[str, Any], c: GemmConfig, n_cols: int, bias: Any = None, scale: Any = None,
                  zero_point: Any = None, act_min: Any = None, act_max: Any = None) -> EpilogueArgs | None:
    """The call's epilogue data for a design of config `c` and C of `n_cols` columns (None: no epilogue data)."""
    e = c.epilogue
    given = {k: v for k, v in zip(REQUANT_ARGS, (scale, zero_point, act_min, act_max)) if v is not None}
    if bias is not None and not e.bias:
        raise refuse(args, "bias given, and this Gemm adds none", "make it with Gemm(..., bias=True)")
    if given and e.requant is None:
        what = "a bf16 output" if c.types.t_out.is_float else "this Gemm, which does not requantize"
        raise refuse(args, f"{', '.join(given)} given: requantization parameters, for {what}",
                     "drop them" + ("" if c.types.t_out.is_float else ", or make the Gemm with requant='per_channel'"))
    if e.bias and bias is None:
        raise refuse(args, "this Gemm adds a bias, and none was given", f"pass bias= {n_cols} values (one per column)")
    if e.requant is not None and scale is None:
        raise refuse(args, "this Gemm requantizes C, and no scale was given",
                     f"pass scale=(multiplier, shift), each {n_cols} integers (TFLite's per-channel parameters)")
    if e.is_identity:
        return None
    b = None
    if bias is not None:
        x = _vector(args, "bias", bias, n_cols)
        b = float_bias(args, x) if c.types.t_out.is_float else _whole(args, "bias", x, INT32_MIN, INT32_MAX)
    requant = None
    if e.requant is not None:
        if not isinstance(scale, (tuple, list)) or len(scale) != 2:
            raise refuse(args, "scale is (multiplier, shift)",
                         f"pass scale=(multiplier, shift), each {n_cols} integers")
        mult = _whole(args, "scale's multiplier", _vector(args, "scale's multiplier", scale[0], n_cols), 0, INT32_MAX)
        shift = _whole(args, "scale's shift", _vector(args, "scale's shift", scale[1], n_cols), -MAX_SHIFT, MAX_SHIFT)
        out = c.types.t_out
        zp = _scalar(args, "zero_point", 0 if zero_point is None else zero_point, out.min, out.max)
        lo = _scalar(args, "act_min", out.min if act_min is None else act_min, out.min, out.max)
        hi = _scalar(args, "act_max", out.max if act_max is None else act_max, lo, out.max)
        try:
            requant = Requant(tuple(int(v) for v in mult), tuple(int(v) for v in shift), zp, lo, hi, out, e.requant)
        except ValueError as err:  # pragma: no cover - every bound is checked above
            raise ConfigError(str(err), "check the requantization parameters") from None
    return EpilogueArgs(b, requant)
