"""The Gemm operator's arguments, checked when it is built, with refusals in the operator's own terms.

`Gemm(device=..., dtype_in=..., tiles=..., max_size=..., **options)` is checked argument by argument
here (one line each, saying what `Gemm(...)` was given and what to pass instead). What only a
design can tell (a tile that breaks L1, an option that does not go with the types) comes from
building one; its messages name options by placeholders (errors.opt), which `design_refusal` spells as
the operator's keywords (dtype_out='bf16').
"""

from __future__ import annotations

import typing
from types import NoneType, UnionType
from typing import Any

import numpy as np

from ..facts import precision as prec
from ..facts.devices import DEVICES, Device, device
from ..facts.dtypes import DTYPES, I64
from ..facts.errors import ConfigError, GemmGenError, spelled
from ..spec.request import OPTIONS, Options, Problem, Tiling, spell_operator
from ..spec.rules.defaults import default_out

# GemmConfig fields the operator sets itself (the option table's rows it takes through another keyword), and
# the argument that sets each
_SET_THROUGH = {"shapes": "the arrays' shapes (and max_size=(M, K, N))", "tiles": "tiles=(m, k, n, k_mt)",
                "max_size": "max_size=(M, K, N)"}
SET_BY_OPERATOR = {row.name: _SET_THROUGH[row.keyword] for row in OPTIONS if row.keyword in _SET_THROUGH}
# the Gemm keywords that set GemmConfig fields directly (its own parameters)
KEYWORDS = ("device", "dtype_in", "dtype_out", "dtype_b", "acc", "b_col_maj")
# the options Gemm takes as keywords (**options): every other row of the table
OWN = tuple(row.name for row in OPTIONS if row.name not in SET_BY_OPERATOR and row.name not in KEYWORDS)
# the options whose values are names from a list (checked here, in the operator's terms)
CHOICES = {row.name: row.choices for row in OPTIONS
           if row.choices is not None and row.reader == "text" and row.fmt == "text"}


def signature(args: dict[str, Any]) -> str:
    """How the user called Gemm, with the arguments given: Gemm(device='npu3', tiles=(64, 64))."""
    return "Gemm(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"


def refuse(args: dict[str, Any], what: str, fix: str) -> ConfigError:
    return ConfigError(f"{signature(args)}: {what}", fix)


# ---- device and types -----------------------------------------------------------------------------
def checked_device(value: Any) -> Device:
    """The device named `value` (a name or an alias such as 'strix')."""
    names = " or ".join(f"'{d.name}' for {d.marketing}" for d in DEVICES.values())
    if not isinstance(value, str):
        raise refuse({"device": value}, "device is a name", f"use device={names}")
    try:
        return device(value)
    except ConfigError:
        raise refuse({"device": value}, "unknown device", f"use device={names}") from None


def _quoted(names: typing.Iterable[str]) -> str:
    items = [f"'{n}'" for n in names]
    return ", ".join(items[:-1]) + f" or {items[-1]}" if len(items) > 1 else items[0]


# the types an operand or an output can have (i64 is an accumulator only)
OPERAND_TYPES = tuple(name for name in DTYPES if name != I64.name)
# what acc can be: C's own type, or a type C can accumulate in (precision.check_precision says which goes with which)
ACC_NAMES = (prec.ACC_OUT, "f32", "i32", I64.name, "bf16", prec.BFP16)


def _type_name(keyword: str, value: Any, allowed: typing.Iterable[str] = OPERAND_TYPES) -> str:
    """The type name `value` stands for; a NumPy / ml_dtypes type is refused with its name."""
    if isinstance(value, str) and (value in OPERAND_TYPES or value in allowed):
        return value  # a known name: whether it goes with the rest is checked with the rest
    try:  # np.int8, ml_dtypes.bfloat16, np.dtype('int16'), ...
        named = next((t.name for t in DTYPES.values() if not t.is_block and np.dtype(value) == t.host), None)
    except TypeError:
        named = None
    if named is not None:
        raise refuse({keyword: value}, "types are named as mlir-aie names them", f"use {keyword}='{named}'")
    raise refuse({keyword: value}, "unknown type", f"use {keyword}={_quoted(allowed)}")


def check_operator_types(dev: Device, dtype_in: Any, dtype_out: Any, dtype_b: Any, acc: Any) -> str:
    """Refuse types the device cannot multiply (dtype_in, dtype_b) or write (dtype_out); return
    dtype_out (given, or its default). What these four can be together beyond that is
    precision.check_precision's, which building the operator's first design runs."""
    given = {"device": dev.name, "dtype_in": dtype_in}
    block_types = (prec.BFP16,) if dev.bfp16_mmul_shape is not None else ()
    inputs = (*dev.input_types, *block_types)
    t_in = _type_name("dtype_in", dtype_in, inputs)
    if t_in not in inputs:
        raise refuse(given, f"{dev.name} multiplies {_quoted(inputs)}, not '{t_in}'",
                     f"use dtype_in={_quoted(inputs)}" + ("" if block_types else " (or device='npu2' for bfp16)"))
    names = {"dtype_out": dtype_out, "dtype_b": dtype_b, "acc": acc}
    t = {k: None if v is None else _type_name(k, v, ACC_NAMES if k == "acc" else OPERAND_TYPES)
         for k, v in names.items()}
    if prec.BFP16 in t.values() and not block_types:
        bfp16 = {k: v for k, v in names.items() if v == prec.BFP16}
        raise refuse({**given, **bfp16}, f"{dev.name} has no bfp16 datapath (block types are an XDNA2 feature)",
                     "use device='npu2', or bf16, i8 and i16 types")
    out = t["dtype_out"] or default_out(t_in)
    block = t_in in prec.BFP16_A_TYPES and prec.BFP16 in (t_in, *t.values())
    outs = prec.BFP16_OUT_TYPES if block else dev.out_types.get(t_in, ())
    if out not in outs:
        article = "an" if t_in[0] == "i" else "a"
        raise refuse({**given, "dtype_out": dtype_out}, f"{article} {t_in} GEMM writes {_quoted(outs)}"
                     + (" (on the bfp16 datapath)" if block else ""), f"use dtype_out={_quoted(outs)}")
    return out


# ---- tiles, sizes and options ---------------------------------------------------------------------
def _int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _positive_ints(value: Any, count: int) -> tuple[int, ...] | None:
    """value as `count` Python ints >= 1, or None when it is not that."""
    if not isinstance(value, (tuple, list)) or len(value) != count or not all(_int(v) and v >= 1 for v in value):
        return None
    return tuple(int(v) for v in value)


def checked_tiles(tiles: Any, example: tuple[int, int, int, int] | None) -> tuple[int, int, int, int] | None:
    """tiles as (m, k, n, k_mt), four ints >= 1 (None: the tuner picks them per design)."""
    if tiles is None:
        return None
    got = _positive_ints(tiles, 4)
    if got is None:
        eg = f", e.g. tiles={example}" if example else ""
        raise refuse({"tiles": tiles}, "tiles is (m, k, n, k_mt): the core tile's rows, reduction and columns, "
                     "and the K extent of A's memtile buffer, four integers >= 1",
                     f"pass four sizes{eg}, or leave tiles out and the tuner picks them")
    return got  # type: ignore[return-value]


def checked_max_size(max_size: Any) -> Problem | None:
    """max_size as the largest M x K x N one design serves (None: a design per shape)."""
    if max_size is None:
        return None
    got = _positive_ints(max_size, 3)
    if got is None:
        raise refuse({"max_size": max_size}, "max_size is (M, K, N), the largest sizes one design serves, "
                     "three integers >= 1", "pass e.g. max_size=(1024, 4096, 1024), or leave it out for a design "
                     "per shape")
    return Problem(*got)


def check_flag(name: str, value: Any) -> None:
    if not isinstance(value, (bool, np.bool_)):
        raise refuse({name: value}, f"{name} is True or False", f"pass {name}={bool(value)!r} if you mean that")


def _alternatives(hint: Any) -> tuple[Any, ...]:
    """The types a hint allows: (str, NoneType) for `str | None`, (int,) for `int`."""
    return typing.get_args(hint) if isinstance(hint, UnionType) or typing.get_origin(hint) is typing.Union else (hint,)


def _describe(hint: Any) -> str:
    """A type hint in words: 'a string', 'True or False or None', '3 integers >= 1 or None'."""
    args = _alternatives(hint)
    words = {str: "a string", int: "an integer", bool: "True or False", NoneType: "None"}
    parts = [(f"{len(typing.get_args(a))} " + ("real numbers" if _real_tuple(a) else "integers >= 1"))
             if typing.get_origin(a) is tuple else words.get(a, str(a)) for a in args]
    return " or ".join(parts)


def _real_tuple(hint: Any) -> bool:
    """A hint of a tuple of floats (the clamp bounds)."""
    return typing.get_origin(hint) is tuple and all(x is float for x in typing.get_args(hint))


def _reals(value: Any, count: int) -> bool:
    """value is `count` real numbers (ints or floats, not bools)."""
    return (isinstance(value, (tuple, list)) and len(value) == count
            and all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
                    for v in value))


def _fits(value: Any, hint: Any) -> bool:
    """Whether value has the type a GemmConfig field's hint names (bool is not an int here)."""
    for a in _alternatives(hint):
        if a is NoneType and value is None:
            return True
        if a is bool and isinstance(value, (bool, np.bool_)):
            return True
        if a is int and _int(value):
            return True
        if a is str and isinstance(value, str):
            return True
        if _real_tuple(a):
            if _reals(value, len(typing.get_args(a))):
                return True
        elif typing.get_origin(a) is tuple and _positive_ints(value, len(typing.get_args(a))) is not None:
            return True
        if a not in (NoneType, bool, int, str) and typing.get_origin(a) is not tuple:
            return True  # a type this check does not know: GemmConfig's own checks judge it
    return False


def check_options(options: dict[str, Any]) -> None:
    """options are GemmConfig fields the operator does not set itself, each of its field's type."""
    hints = {**typing.get_type_hints(Options), **typing.get_type_hints(Tiling)}
    for name, value in options.items():
        if name in SET_BY_OPERATOR:
            raise refuse({name: value}, f"{name} is not an option", f"set it through {SET_BY_OPERATOR[name]}")
        if name not in OWN:
            raise refuse({name: value}, "unknown option", f"use GemmConfig's options: {', '.join(sorted(OWN))}")
        if not _fits(value, hints[name]):
            raise refuse({name: value}, f"{name} is {_describe(hints[name])}", f"pass {name} as that")
        if name in CHOICES and value is not None and value not in CHOICES[name]:
            raise refuse({name: value}, f"unknown {name}", f"use {name}={_quoted(CHOICES[name])}")


# ---- refusals from designs ------------------------------------------------------------------------
def design_refusal(args: dict[str, Any], e: GemmGenError) -> ConfigError:
    """A design's refusal (ConfigError, DmaLimitError), or any message of the package's, as the operator's: one
    ConfigError line that names the Gemm's arguments and the options as its keywords (errors.opt's placeholders
    in the operator's spelling: dtype_out='i32', compiler='chess', tiles' m)."""
    return refuse(args, *e.spelled(spell_operator))


def in_operator_terms(text: str) -> str:
    """A message with its option placeholders (errors.opt) in the operator's terms."""
    return spelled(text, spell_operator)
