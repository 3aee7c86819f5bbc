"""What the Python operator accepts as A and B, and the one-line refusal of everything else.

The NPU multiplies real numbers in the design's input types (i8, i16, bf16, bfp16). A user's NumPy /
ml_dtypes array is converted only where nothing is lost or changed behind the user's back:
- complex, boolean, object, text, date and time-span arrays are refused: a cast would drop the
  imaginary parts or invent numbers;
- an integer type takes only values in its range (a cast would wrap 300 into 44 for i8, and the
  kernel saturates only its result) and, from floats, only whole numbers;
- bf16 takes only values that are bf16 values (float64 0.1 is not one): the user rounds;
- bfp16 takes any finite value within float32's range: it is quantized on the host anyway;
- NaN and Inf are refused wherever an operand is quantized to bfp16 on its way to the cores
  (`bfp16_quantizer`): how the hardware's conversion treats them in a shared exponent is
  unpublished, and the simulator's encoder (like mlir-aie's host helper) turns them into 0, which
  would give a finite, plausible C. Plain bf16 keeps them, and they reach C the IEEE way.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from ..facts import groupquant
from ..facts.dtypes import BF16, I4, DType
from ..facts.errors import ConfigError
from ..facts.quant_b import QuantB
from ..spec.config import GemmConfig


def as_matrix(name: str, x: Any) -> np.ndarray:
    """x as a NumPy array; ConfigError when it is not one (ragged lists) or hides values (a mask)."""
    if isinstance(x, np.ma.MaskedArray) and np.ma.is_masked(x):
        # np.asarray would hand the masked entries' hidden data to the GEMM
        raise ConfigError(f"{name} is a masked array with {int(np.ma.count_masked(x))} masked values",
                          f"fill them yourself ({name}.filled(0)) to say what they are")
    try:
        return np.asarray(x)
    except (TypeError, ValueError) as e:
        first = str(e).split(". ")[0] or type(e).__name__  # NumPy's first sentence says what is wrong
        raise ConfigError(f"{name} is not an array of numbers ({first})", f"pass {name} as a 2-D NumPy array") from None


def bfp16_quantizer(c: GemmConfig, name: str) -> str | None:
    """What quantizes operand `name` ("A" or "B") to bfp16 on its way to the cores, or None when its
    values reach the multipliers as they are (integers, plain bf16)."""
    t = c.types.t_in if name == "A" else c.types.t_b
    if t.is_block:
        return f"{name} is bfp16 (quantized on the host)"
    if name == "A" and c.types.precision.converts_a:
        return "the cores convert a bf16 A to bfp16 to multiply it by a bfp16 B"
    if t.is_float and c.kernel.emulate_bf16_with_bfp16:  # the numerics' bfp16_inputs (convert_once implies it)
        return (f"{c.array.device} runs bf16 on its bfp16 datapath (emulate_bf16_with_bfp16=True, its default), "
                f"which quantizes A and B to bfp16")
    return None


def host_operand(name: str, x: np.ndarray, t: DType, quantizer: str | None = None) -> np.ndarray:
    """x in t's host type, where the conversion changes nothing (bfp16: any finite value, as fp32);
    ConfigError (one line naming how many values, the first one and the fix) otherwise. `quantizer`
    (bfp16_quantizer's answer) says that x is quantized to bfp16 later: NaN and Inf are refused."""
    is_int = _number_kind(name, x, t) == "int"
    if is_int and x.dtype.kind == "V":  # ml_dtypes' int4 and kin: NumPy compares them only as wider ints
        x = x.astype(np.int64)
    if not is_int and (quantizer or not t.is_float):
        _refuse_non_finite(name, x, t, quantizer)
    if t.is_block:
        return _as_f32(name, x)
    if not t.is_float:
        _refuse_out_of_range(name, x, t)
        if not is_int:
            _refuse_fractions(name, x, t)
        return x if x.dtype == t.host else x.astype(t.host)
    return x if x.dtype == t.host else _exactly(name, x, t)


# ---- dtypes ---------------------------------------------------------------------------------------
def _number_kind(name: str, x: np.ndarray, t: DType) -> str:
    """"int" or "float" for arrays of real numbers; ConfigError for anything else."""
    dt = x.dtype
    if dt.kind in "iu":
        return "int"
    if dt.kind == "f":
        return "float"
    if dt.kind == "V":  # ml_dtypes' types (bfloat16, float8_*, int4, ...) are NumPy void types
        for kind, info in (("float", ml_dtypes.finfo), ("int", ml_dtypes.iinfo)):
            try:
                info(dt)
                return kind
            except ValueError:
                pass
    raise ConfigError(*_dtype_refusal(name, dt, t))


def _dtype_refusal(name: str, dt: np.dtype, t: DType) -> tuple[str, str]:
    """(what, fix) for an array that does not hold real numbers."""
    host = host_type_name(t)
    if dt.kind == "c":
        return (f"{name} is {dt}: complex numbers, and the NPU multiplies real ones (a cast would drop the "
                f"imaginary parts)", f"pass {name}.real if its imaginary parts are all zero, or compute the real "
                f"and imaginary parts as separate real GEMMs")
    if dt.kind == "b":
        return f"{name} is bool, not numbers", f"pass {name}.astype({host}) to multiply its 0s and 1s"
    if dt.kind == "O":
        return (f"{name} is an array of Python objects (dtype object), not of numbers",
                f"convert it yourself (np.asarray({name}, dtype={host})) and check what the conversion did")
    if dt.kind in "US":
        return f"{name} holds text ({dt}), not numbers", f"parse it into numbers ({host}) first"
    if dt.kind == "M":
        return f"{name} holds dates ({dt}), not numbers", "pass the numbers you mean to multiply"
    if dt.kind == "m":
        return (f"{name} holds time spans ({dt}), not plain numbers",
                f"divide by a unit first ({name} / np.timedelta64(1, 's'))")
    return f"{name} has dtype {dt}, not numbers", f"pass {name} as {t} ({host})"


def host_type_name(t: DType) -> str:
    """How a user names t's host type in code: ml_dtypes.bfloat16, np.int8, ..."""
    return f"ml_dtypes.{t.host.name}" if t.host.type.__module__.startswith("ml_dtypes") else f"np.{t.host.name}"


# ---- values ---------------------------------------------------------------------------------------
def _first(name: str, x: np.ndarray, mask: np.ndarray) -> str:
    """'first A[i, j] = v' for the first True of mask (row-major order)."""
    i, j = (int(v) for v in np.unravel_index(int(np.argmax(mask)), mask.shape))
    v = x[i, j]
    shown = int(v) if x.dtype.kind in "iu" else float(v)
    return f"first {name}[{i}, {j}] = {shown!r}"


def _values(count: int) -> str:
    return f"{count} value" + ("" if count == 1 else "s")


def _of_its_values(count: int) -> str:
    return f"{count} of its values " + ("is" if count == 1 else "are")


def _f64(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return x.astype(np.float64)


def _refuse_non_finite(name: str, x: np.ndarray, t: DType, quantizer: str | None) -> None:
    bad = ~np.isfinite(_f64(x))
    if not bad.any():
        return
    count = int(np.count_nonzero(bad))
    where = f"{name} holds {count} NaN or infinite value{'' if count == 1 else 's'} ({_first(name, x, bad)})"
    if not t.is_float:
        raise ConfigError(f"{where}, which {t} cannot hold", f"replace them yourself (e.g. np.nan_to_num({name}))")
    fix = f"replace them yourself (e.g. np.nan_to_num({name}))"
    if "emulate_bf16_with_bfp16" in str(quantizer):
        fix += ", or pass emulate_bf16_with_bfp16=False: plain bf16 carries NaN and Inf into C the IEEE way"
    raise ConfigError(f"{where}, and {quantizer}: the hardware's handling of NaN/Inf in a shared exponent is "
                      f"unpublished (the simulator would read them as 0)", fix)


def _refuse_out_of_range(name: str, x: np.ndarray, t: DType) -> None:
    lo, hi = t.min, t.max
    with np.errstate(invalid="ignore"):
        out = (x < lo) | (x > hi)  # NumPy 2 compares with out-of-range Python ints exactly
    if out.any():
        raise ConfigError(f"{name} has {_values(int(np.count_nonzero(out)))} outside {t}'s range [{lo}, {hi}] "
                          f"({_first(name, x, out)})",
                          f"clip them yourself (np.clip({name}, {lo}, {hi}).astype({host_type_name(t)})) to accept "
                          f"the saturation")


def _refuse_fractions(name: str, x: np.ndarray, t: DType) -> None:
    x64 = _f64(x)
    frac = x64 != np.floor(x64)
    if frac.any():
        raise ConfigError(f"{name} is {x.dtype}, and {_of_its_values(int(np.count_nonzero(frac)))} not whole "
                          f"numbers ({_first(name, x, frac)})",
                          f"round them yourself (np.rint({name}).astype({host_type_name(t)})) to accept the rounding")


def _exactly(name: str, x: np.ndarray, t: DType) -> np.ndarray:
    """x in float type t when every value converts exactly (NaN stays NaN)."""
    with np.errstate(all="ignore"):
        y = x.astype(t.host)
        x64, y64 = _f64(x), _f64(y)
    changed = ~((y64 == x64) | (np.isnan(x64) & np.isnan(y64)))
    if changed.any():
        raise ConfigError(f"{name} is {x.dtype}, and {_of_its_values(int(np.count_nonzero(changed)))} not {t} "
                          f"values ({_first(name, x, changed)})",
                          f"convert it yourself ({name}.astype({host_type_name(t)})) to accept the rounding")
    return y


def _as_f32(name: str, x: np.ndarray) -> np.ndarray:
    """x as fp32 for the host's bfp16 quantization; values past fp32's range are refused (they would
    become Inf, which no shared exponent holds)."""
    with np.errstate(all="ignore"):
        y = np.asarray(x, np.float32)
    lost = np.isfinite(_f64(x)) & ~np.isfinite(y)
    if lost.any():
        raise ConfigError(f"{name} has {_values(int(np.count_nonzero(lost)))} beyond float32's range "
                          f"({_first(name, x, lost)}), which bfp16's 8-bit shared exponent cannot reach",
                          f"scale {name} down (C scales with it)")
    return y


# ---- W4A16 group scales -----------------------------------------------------------------------------
def group_operands(q: np.ndarray, scales: Any, zero_points: Any, group_size: int, with_zero_points: bool
                   ) -> tuple[QuantB, int]:
    """W4A16 weights from q (K x N int4 values, already checked as B), `scales` (ceil(K / g) x N real
    numbers, rounded to bf16 RNE) and `zero_points` (same shape, integers in [-8, 7], when the Gemm has
    zero points); and how many scales the rounding changed (a loss the caller reports). ConfigError, one
    line, for a missing, extra, misshapen, non-numeric, non-finite or out-of-range one."""
    K, N = q.shape
    shape = (groupquant.groups_along_k(K, group_size), N)
    want = f"ceil(K / {group_size}) x N = {shape[0]} x {shape[1]}"
    if scales is None:
        raise ConfigError(f"W4A16 (group_size={group_size}) needs scales: one bf16 scale per {group_size} rows of "
                          "K and column", f"pass scales=, {want} values")
    of_b = f"for B of {K} x {N} with group_size={group_size}"
    s = _group_matrix("scales", scales, shape, of_b, want)
    _number_kind("scales", s, BF16)
    s64 = _f64(s)
    bad = ~np.isfinite(s64)
    if bad.any():
        raise ConfigError(f"scales holds {_values(int(np.count_nonzero(bad)))} NaN or infinite "
                          f"({_first('scales', s, bad)}): every weight of its group would be", "pass finite scales")
    rounded = bf16_rne(s64)
    small, large = groupquant.scales_out_of_range(rounded)
    if small.any():
        raise ConfigError(f"scales holds {_values(int(np.count_nonzero(small)))} below {groupquant.MIN_SCALE:.4g} "
                          f"(2^-126) but not 0 ({_first('scales', s, small)}): the core's float datapath flushes "
                          "subnormals to 0", "pass 0 or a scale of at least 2^-126 (or rescale the group)")
    if large.any():
        raise ConfigError(f"scales holds {_values(int(np.count_nonzero(large)))} above {groupquant.MAX_SCALE:.4g} "
                          f"after bf16 rounding ({_first('scales', s, large)}): the kernel forms (136 + q) s in "
                          "fp32, which would overflow", f"pass scales of at most {groupquant.MAX_SCALE:.4g}")
    changed = int(np.count_nonzero(rounded.astype(np.float64) != s64))
    z = None
    if zero_points is not None and not with_zero_points:
        raise ConfigError("zero_points given to a Gemm without zero points (w = q s)",
                          "make the Gemm with zero_points=True, or drop zero_points=")
    if with_zero_points:
        if zero_points is None:
            raise ConfigError(f"a Gemm with zero_points=True needs zero_points=, {want} integers in [-8, 7]",
                              "pass zero_points=, or make the Gemm with zero_points=False")
        z = host_operand("zero_points", _group_matrix("zero_points", zero_points, shape, of_b, want), I4)
    return QuantB(np.asarray(q, np.int8), np.ascontiguousarray(rounded), z, group_size), changed


def _group_matrix(name: str, x: Any, shape: tuple[int, int], of_b: str, want: str) -> np.ndarray:
    """`x` as a matrix of one value per group of K rows and column (`shape`); ConfigError, one line, otherwise."""
    m = as_matrix(name, x)
    if m.shape != shape:
        raise ConfigError(f"{name} is {' x '.join(map(str, m.shape)) or 'a scalar'}, {of_b}", f"pass {name} of {want}")
    return m


def bf16_rne(x: np.ndarray) -> np.ndarray:
    """float64 values rounded once to bf16, to nearest even (a cast through float32 rounds twice: 1 + 2^-8 +
    2^-40 would become 1). float32 rounded to odd first keeps the sticky bit, so its RNE to bf16 is x's."""
    x = np.asarray(x, np.float64)
    with np.errstate(over="ignore"):
        f = x.astype(np.float32)
    away = np.abs(f.astype(np.float64)) > np.abs(x)
    f = np.where(away, np.nextafter(f, np.float32(0)), f).astype(np.float32)
    inexact = f.astype(np.float64) != x
    odd = (f.view(np.uint32) | inexact.astype(np.uint32)).view(np.float32)
    return odd.astype(BF16.host)
