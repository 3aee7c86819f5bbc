"""Flags and parsing shared by every gemm-gen command (mlir-aie's names), and one-line errors: the flags
become the base config and the pins (what the user fixed); choosing the rest is search.choose's step
(app/choice.py), never the parser's."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Any

from ..facts import precision as prec
from ..facts.devices import TileKind, device
from ..facts.errors import ConfigError, opt
from ..facts.rounding import Rounding, Saturation
from ..spec import request as spec
from ..spec.call import check_weights, parse_sizes
from ..spec.config import GemmConfig, b_packs
from ..spec.request import NOT_GIVEN, OPTIONS, REQUEST_OPTIONS, Opt, Options, Pins, Problem, Request, Tiling
from ..spec.rules import array, decode_split
from ..spec.rules.call_layouts import Layouts
from ..spec.rules.kernel_variant import CANDIDATES

# The largest M, K, N (and any count a flag takes): mlir-aie's host program reads sizes as C ints and
# the cores' k-step runtime parameter is an int32, so nothing larger can reach an NPU.
MAX_SIZE = 2**31 - 1
MAX_SEED = 2**63 - 1  # seeds round-trip through int64 (NumPy, --json readers)
MAX_MMUL = 64  # no aie::mmul dimension comes near this (the largest is 16); past it a shape is a typo


def whole(value: str, example: str = "512") -> int:
    """An integer written in digits; ArgumentTypeError naming the value otherwise (1e3, 1.5, x)."""
    try:
        return int(value, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number (write digits, e.g. {example})") from None


def counted(low: int, high: int = MAX_SIZE, what: str = "a size", example: str = "512") -> Callable[[str], int]:
    """An argparse type: a whole number in low..high (argparse names the flag in front)."""
    def parse(value: str) -> int:
        v = whole(value, example)
        if not low <= v <= high:
            raise argparse.ArgumentTypeError(f"{v} is out of range: {what} is {low} to {high:,}")
        return v

    return parse


SIZE = counted(1)
SEED = counted(0, MAX_SEED, "a seed", "7")


def _mode(kind: type[Rounding] | type[Saturation]) -> Callable[[str], str]:
    """An argparse type: the name of one of the kernel's rounding or saturation modes."""
    names = [m.name.lower() for m in kind]

    def parse(value: str) -> str:
        if value.lower() not in names:
            raise argparse.ArgumentTypeError(f"unknown mode {value!r}; use one of {', '.join(names)}")
        return value.lower()

    return parse


def _b_col_maj(value: str) -> bool:
    if value.lower() in ("1", "true", "yes"):
        return True
    if value.lower() in ("0", "false", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected 0 or 1, got {value!r}")


def _dims(value: str, count: int, form: str, example: str) -> tuple[int, ...]:
    """RxSxT-like text: `count` whole numbers from 1 to MAX_MMUL, joined by x."""
    parts = value.lower().split("x")
    if len(parts) != count or not all(p.strip().isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"expected {form} such as {example}, got {value!r}")
    dims = tuple(int(p) for p in parts)
    if not all(1 <= d <= MAX_MMUL for d in dims):
        raise argparse.ArgumentTypeError(f"{value!r}: each of {form} is 1 to {MAX_MMUL} (e.g. {example})")
    return dims


def _shape(value: str) -> tuple[int, int, int]:
    r, s, t = _dims(value, 3, "RxSxT", "4x8x8")
    return r, s, t


def _sizes(value: str) -> tuple[Problem, ...]:
    if any(not part.strip() for part in value.split(",")):  # "1x1x1,," is a typo, not one size
        raise argparse.ArgumentTypeError(f"{value!r} has an empty size between commas "
                                         "(write sizes like 1000x777x333,1x4096x4096)")
    try:
        sizes = parse_sizes(value)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    for p in sizes:
        if max(p.M, p.K, p.N) > MAX_SIZE:
            raise argparse.ArgumentTypeError(f"size {p}: each of M, K, N is at most {MAX_SIZE:,}")
    return sizes


def _weights(text: str) -> tuple[float, ...]:
    try:
        return check_weights(tuple(float(part) for part in text.split(",")))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of numbers (write weights like 30,1,1)") from None
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _layouts(text: str) -> tuple[Layouts, ...]:
    try:
        return tuple(Layouts.parse(part) for part in text.split(","))
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _expansion(value: str) -> tuple[int, int]:
    er, et = _dims(value, 2, "ERxET", "4x2")
    if (er, et) not in CANDIDATES:
        raise argparse.ArgumentTypeError(f"{value!r} is not an expansion the kernels have; use "
                                         + ", ".join("x".join(map(str, c)) for c in CANDIDATES))
    return er, et


# The CLI's readers of option values (spec.Opt.reader), each naming what it reads when a value is out of range
READERS: dict[str, Callable[[str], Any]] = {
    "size": SIZE, "columns": counted(0, what="a column count"), "bool": _b_col_maj, "shape": _shape,
    "stack": counted(0, what="a stack size", example="3328"), "groups": counted(1, what="a group count"),
    "rho": counted(1, what="rho"), "rounding": _mode(Rounding), "saturation": _mode(Saturation),
    "shift": counted(0, 63, "a shift"), "expansion": _expansion, "group": counted(0, what="a group size"),
    "span": counted(0, what="a block count"), "int": int, "clamp": lambda value: _clamp(value),
    "sizes": _sizes, "weights": _weights, "layouts": _layouts}
# the order --help lists the flags in (an option not named here is listed after these, in the table's order)
HELP_ORDER = ("device", "M", "K", "N", "sizes", "weights", "call_layouts", "runtime_sizes", "m", "k", "n", "cols",
              "rows", "k_mt", "rho", "dtype_in", "dtype_b", "group_size", "zero_points", "dtype_out", "acc", "preset",
              "b_col_maj", "a_col_maj", "c_col_maj", "b_pack", "emulate_bf16_with_bfp16", "compiler", "opt_level",
              "mmul_shape", "expansion", "kernel_loops", "convert_once", "l1_alloc", "queue_groups", "task_span",
              "stack_bytes", "shift", "rounding", "saturation", "bias", "activation", "clamp", "requant")
# the options config_args always writes (the rest only where given)
ALWAYS = ("device", "M", "K", "N", "m", "k", "n", "k_mt", "dtype_in", "dtype_out", "b_col_maj")
_DEFAULTS = {f.name: None if f.default is MISSING else f.default for kind in (Problem, Tiling, Options)
             for f in fields(kind)}


def add_flag(p: argparse.ArgumentParser, row: Opt) -> None:
    """The CLI flag of one row of the option table."""
    default = _DEFAULTS.get(row.name) if row.cli_default is NOT_GIVEN else row.cli_default
    if row.cli == "switch":
        p.add_argument(*row.flags, dest=row.attr, action="store_true", help=row.help)
    elif row.cli == "bool":
        p.add_argument(*row.flags, dest=row.attr, nargs="?", const=True, default=default, type=_b_col_maj,
                       help=row.help)
    else:
        p.add_argument(*row.flags, dest=row.attr, default=default, help=row.help, type=READERS.get(row.reader, str),
                       choices=row.choices)


def problem_args(p: argparse.ArgumentParser) -> None:
    """The problem, tiling and type flags every design command takes: one per row of the option table
    (spec.OPTIONS) that has a flag, and the request's own (sizes, weights, call layouts, preset)."""
    rows = {**{o.name: o for o in OPTIONS if o.flags}, **{o.name: o for o in REQUEST_OPTIONS if o.name in HELP_ORDER}}
    for name in (*HELP_ORDER, *(name for name in rows if name not in HELP_ORDER)):
        add_flag(p, rows[name])
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _clamp(value: str) -> tuple[float, float]:
    """LO,HI: two finite numbers, LO <= HI."""
    parts = value.split(",")
    try:
        lo, hi = (float(x) for x in parts) if len(parts) == 2 else (math.nan, math.nan)
    except ValueError:
        lo = hi = math.nan
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise argparse.ArgumentTypeError(f"expected LO,HI (two finite numbers, LO <= HI) such as -6,6, got {value!r}")
    return lo, hi


def types(a: argparse.Namespace) -> dict[str, str | None]:
    """The operand types the flags ask for, as Options takes them: a preset's, or --dtype_in, --dtype_b,
    --dtype_out and --acc (those not given: None, their defaults derived with the config's)."""
    given = {"dtype_in": a.dtype_in, "dtype_b": a.dtype_b, "dtype_out": a.dtype_out, "acc": a.acc}
    if a.preset is None:
        return given
    p = prec.PRESETS[a.preset]
    for (name, value), fixed in zip(given.items(), (p.a, p.b, p.out, p.acc)):
        if name == "acc" and value == prec.ACC_OUT and fixed == p.out:
            continue  # the preset keeps C in its output type: the same thing said twice
        if value is not None and value != fixed:
            raise ConfigError(f"{opt('preset', a.preset)} sets {opt(name, fixed)}, not {value}",
                              f"drop {opt(name)} or the preset")
    return {"dtype_in": p.a, "dtype_b": p.b, "dtype_out": p.out, "acc": p.acc}


def sizes(a: argparse.Namespace) -> tuple[tuple[int, int, int], str]:
    """The problem the design is built for (with --runtime-sizes: the largest of each dimension,
    or -M -K -N where given) and which sizes it serves (GemmConfig.runtime_sizes)."""
    given = (a.M, a.K, a.N)
    listed = getattr(a, "runtime_sizes", None)
    mode = getattr(a, "runtime_mode", None)
    weights = getattr(a, "weights", None)
    call_layouts(a)  # one per listed size
    if weights is not None and (not listed or len(weights) != len(listed)):
        raise ConfigError(f"{opt('weights')} gives {len(weights)} weights for {len(listed or ())} {opt('sizes')}",
                          f"give one weight per size listed in {opt('sizes')}")
    if not listed:
        missing = [opt(name) for name, v in zip("MKN", given) if v is None]
        if missing:
            raise ConfigError(f"no problem size: {' '.join(missing)} missing",
                              f"give {opt('M')} {opt('K')} {opt('N')}, or {opt('sizes')}")
        return (a.M, a.K, a.N), mode or "fixed"
    most = tuple(max(getattr(p, name) for p in listed) for name in "MKN")
    for name, value, top in zip("MKN", given, most):
        if value is not None and value < top:
            raise ConfigError(f"{opt(name, value)} is less than the {top} that {opt('sizes')} asks for",
                              f"drop {opt(name)} or give at least {top}")
    problem = tuple(v if v is not None else top for v, top in zip(given, most))
    needed = "mnk" if len({p.K for p in listed}) > 1 or problem[1] != most[1] else "mn"
    if mode == "mn" and needed == "mnk":
        ks = sorted({p.K for p in listed} | {problem[1]})
        raise ConfigError(f"{opt('runtime_sizes', 'mn')} serves one K, and the sizes (with {opt('K')}) ask for K = "
                          f"{', '.join(map(str, ks))}", f"use {opt('runtime_sizes', 'mnk')}, or drop it")
    return (problem[0], problem[1], problem[2]), mode or needed


def call_layouts(a: argparse.Namespace) -> tuple[Layouts, ...] | None:
    """Each --runtime-sizes call's layouts (--call-layouts), or None when not given."""
    given = getattr(a, "call_layouts", None)
    listed = getattr(a, "runtime_sizes", None)
    if given is not None and (not listed or len(given) != len(listed)):
        raise ConfigError(f"{opt('call_layouts')} gives {len(given)} layouts for {len(listed or ())} {opt('sizes')}",
                          f"give one layout (like rrc) per size listed in {opt('sizes')}")
    return given


def check_device_flags(a: argparse.Namespace) -> None:
    """The flags whose range depends on the device, named by their own flag (GemmConfig names its
    fields, as the Python operator does)."""
    dev = device(a.dev)
    if a.n_aie_cols and not array.columns_ok(dev, a.n_aie_cols):
        counts = ", ".join(map(str, dev.column_devices))
        raise ConfigError(f"{opt('cols', a.n_aie_cols)}: {dev.name} designs use {counts} columns",
                          f"give {opt('cols', *dev.column_devices)}, or leave it out for all")
    if a.stack and not array.stack_ok(dev, a.stack):
        raise ConfigError(f"{opt('stack_bytes', a.stack)}: the core stack is a multiple of 16 bytes below the "
                          f"{dev.l1_bytes:,} B of L1", f"give {opt('stack_bytes')} like 3328 (0xD00) or 4096, or "
                          "leave it out")
    depth = dev.dma[TileKind.SHIM].task_queue_depth
    if not array.queue_ok(dev, a.queue_groups):
        raise ConfigError(f"{opt('queue_groups', a.queue_groups)}: a shim channel's task queue holds {depth} tasks "
                          "(the hardware drops a push onto a full queue)", f"give {opt('queue_groups', 1)} to {depth}")


def options(a: argparse.Namespace) -> Options:
    """Every option the flags give (an absent flag leaves its option open: derived on read), read row by
    row of the option table; the types (a preset, or the type flags), the mapping and the sizes served
    are read as the CLI gives them."""
    check_device_flags(a)
    _, served = sizes(a)
    values: dict[str, Any] = {}
    for row in OPTIONS:
        if row.flags and row.group not in ("size", "tiling", "types"):
            value = getattr(a, row.attr)
            values[row.name] = (row.on if value else _DEFAULTS[row.name]) if row.cli == "switch" else value
    mapping, dev = getattr(a, "mapping", None), device(a.dev)
    values.update({name: value for name, value in types(a).items() if value is not None}, runtime_sizes=served,
                  rows=array.mapping_rows(dev, mapping) if mapping else 0)
    if mapping and array.mapping_cols(dev, mapping):  # decode-split: its grid's columns, one per core
        values["cols"] = array.mapping_cols(dev, mapping)
    if values.get("dtype_b") == values.get("dtype_in", Options.dtype_in):
        values.pop("dtype_b")  # B's type given as A's: left to its default, so config_args leaves it out
    return Options(**values)


def problem(a: argparse.Namespace) -> Problem:
    """The size the design is built for (with --runtime-sizes: the largest it serves)."""
    return Problem(*sizes(a)[0])


def base_config(a: argparse.Namespace, m: int = 0, k: int = 0, n: int = 0, k_mt: int = 0) -> GemmConfig:
    """The problem and every option the flags give, with the tiling as passed (0: still open)."""
    return GemmConfig(options=options(a), tiling=Tiling(m, k, n, k_mt, a.rho or 1), size=problem(a))


def pins(a: argparse.Namespace) -> Pins:
    """The tiling, rho, sizes and weights the flags fix (the rest is left to search.choose)."""
    return Pins(a.m, a.k, a.n, a.k_mt, a.rho, sizes=getattr(a, "runtime_sizes", None),
                weights=getattr(a, "weights", None))


def request(a: argparse.Namespace) -> Request:
    """What the flags ask for: the options and the size they give, and the pins."""
    return Request(options(a), problem(a), pins(a))


def config_args(c: GemmConfig) -> list[str]:
    """gemm-gen flags that rebuild `c` (the inverse of base_config and pins, every tile pinned): the
    problem, the tiles and the types, then every option given (in the option table's order), and the
    ones the search would fill if left open (a bfp16 or int4 B's packing, an open convert-once kernel)."""
    given = spec.given(c.options)
    mapping = array.mapping_of(c.dev, c.array.rows, c.array.cols)
    if array.mapping_cols(c.dev, mapping):  # decode-split: the mapping by name, which fixes the columns too
        given = {**{k: v for k, v in given.items() if k != "cols"}, "rows": mapping}
    split = decode_split.is_split(c.dev, c.array.rows, c.array.cols)
    opened = {"b_pack": len(b_packs(c.types.t_b, c.groups.group_size, split)) > 1, "convert_once": c.convert_once_open}
    args: list[str] = []
    for row in OPTIONS:
        if row.flag is None:
            continue
        if row.name in ALWAYS or opened.get(row.name, False):
            args += row.cli_args(c.value(row.name))
        elif row.name in given:
            args += row.cli_args(given[row.name])
        elif row.group == "tiling" and c.value(row.name) != _DEFAULTS[row.name]:
            args += row.cli_args(c.value(row.name))
    return args


# ---- the Makefile's argument list (gemm_gen.mk), from the same table ------------------------------------
MAKE_INCLUDE = "gemm_gen.mk"
MAKE_REQUEST = ("sizes", "preset")  # the request's variables GEN_ARGS passes (TIMEOUT_MS is run's own)


def _make_arg(row: Opt) -> str:
    """How the Makefile passes one option's variable to gemm-gen: a 0/1 switch, a 0/1 value it always has, or
    a value only when the variable is set."""
    var, flag = f"$({row.make})", str(row.flag)
    if row.cli == "switch":
        return f"$(if $(filter 1,{var}),{flag})"
    if row.cli == "bool" and _DEFAULTS.get(row.name) is False:
        return f"{flag} {var}"
    if row.fmt == "clamp":  # LO may start with '-': written --clamp=LO,HI
        return f"$(if {var},{flag}={var})"
    return f"$(if {var},{flag} {var})"


def make_include() -> str:
    """gemm_gen.mk: the Makefile's option variables, the ones that are 0 or 1, and GEN_ARGS (the gemm-gen
    arguments they make), one row of the option table each. `gemm-gen make-args` prints it;
    tests/app/test_make.py keeps the checked-in file equal to it."""
    rows = [row for row in (*OPTIONS, *REQUEST_OPTIONS)
            if row.make is not None and (row.group != "request" or row.name in MAKE_REQUEST)]
    switches = [row.make for row in rows if row.cli == "switch" or (row.cli == "bool" and
                                                                     _DEFAULTS.get(row.name) is False)]
    lines = ["# Generated from gemm_gen's option table (gemm_gen/spec/request.py) by `gemm-gen make-args`: "
             "do not edit.",
             "# After changing an option: .venv/bin/gemm-gen make-args > gemm_gen.mk (tests/app/test_make.py "
             "checks it).",
             "# (each `override`: an environment value, under make -e too, cannot replace them)",
             f"override OPTION_VARS := {' '.join(str(row.make) for row in rows)}",
             "# the variables that are 0 or 1 (default 0)",
             f"override SWITCH_VARS := {' '.join(str(v) for v in switches)}",
             "# the gemm-gen arguments the variables make",
             "override GEN_ARGS = " + " \\\n\t".join(_make_arg(row) for row in rows)]
    return "\n".join(lines) + "\n"
