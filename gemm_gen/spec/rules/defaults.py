"""The defaults of the options a user did not give, derived on read from what was given.

`resolve(options)` is the one place where an option left open (spec.Options' None, or 0 for cols and
stack_bytes) becomes a value: the column count, B's type, the kernel compiler, bf16 emulation on
the bfp16 datapath, C's accumulator in L1, the convert-once kernel (search.choose weighs it against
the emulated one where both can run: `Resolved.convert_once_open`) and the core stack. Nothing
stores these back into the options, so replacing a given field re-derives every default that
depends on it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any, TypeVar

from ...facts import precision as prec
from ...facts.devices import Device, MmulShape, device
from ...facts.epilogue import Epilogue
from ...facts.errors import ConfigError, opt
from ...facts.precision import Precision
from ..request import (
    B_PACKS,
    ROWS,
    ArrayOptions,
    GroupQuant,
    KernelOptions,
    Layout,
    Options,
    RuntimeOptions,
    Tiling,
    Types,
)
from . import kernel_variant as kv
from . import tiling
from .dequant import code_reserve
from .epilogue import epilogue_of
from .l1 import a_rows

R = TypeVar("R")


@dataclass(frozen=True)
class Resolved:
    """Every option with its default applied, in the resolved config's sub-records (spec/request.py), and whether
    the convert-once kernel was left open where both kernels can run (search.choose weighs them)."""

    types: Types
    layout: Layout
    groups: GroupQuant
    kernel: KernelOptions
    array: ArrayOptions
    runtime: RuntimeOptions
    epilogue: Epilogue
    default_acc: str  # C's L1 type had acc not been given (dtype_out when the types have no kernel)
    convert_once_open: bool = False


def default_out(dtype_in: str) -> str:
    """C's type when dtype_out is not given: bf16 for bf16, bfp16 for bfp16, i32 for integers."""
    return {"bf16": "bf16", prec.BFP16: prec.BFP16}.get(dtype_in, "i32")


def emulation_default(dev_name: str, dtype_in: str) -> bool:
    """Whether bf16 on this device runs on the bfp16 datapath unless told otherwise."""
    return dtype_in == "bf16" and device(dev_name).bf16_emulation_default


def mmul(dev: Device, mmul_shape: MmulShape | None, p: Precision, emulate: bool) -> MmulShape:
    """The kernel's r x s x t: the given shape, else the bfp16 datapath's for a bfp16 precision,
    else the device's default for the input type."""
    if mmul_shape is not None:
        return mmul_shape
    if p.block:
        shape = dev.bfp16_mmul_shape
        if shape is None:
            prec.check_precision(p, dev)  # raises: the device has no bfp16 datapath
        assert shape is not None
        return shape
    return dev.mmul_shape(p.a, emulate, p.b)


def default_acc(dev: Device, dtype_in: str, dtype_out: str, shape: MmulShape) -> str:
    """C's L1 type when --acc is not given (precision.wide_acc) for this output and mmul; the
    output type itself when the types are invalid, for the checks to name the problem."""
    try:
        return prec.wide_acc(dtype_out, dev.acc_bits(dtype_in, shape))
    except ConfigError:
        return dtype_out


def convert_once_problem(dev: Device, p: Precision, emulate: bool, mmul_shape: MmulShape | None,
                         compiler: str, epilogue: bool = False) -> tuple[str, str] | None:
    """Why this GEMM cannot use the convert-once bf16 kernel ((what, fix) for a ConfigError), or
    None when it can: bf16 x bf16 on the bfp16 datapath (8x8x8), built by a bfp16 compiler; or W4A16 (bf16 x
    int4 with group scales) there, whose kernel then dequantizes each B object straight into bfp16 tiles."""
    if p.block or p.a != "bf16" or dev.bf16_emulation_shape is None:
        return (f"{opt('convert_once')} is for a bf16 A (times bf16, or W4A16's int4 B) on npu2's bfp16 datapath, "
                f"not {dev.name} {p.name}", f"drop {opt('convert_once')}")
    if not emulate:
        return (f"{opt('convert_once')} runs bf16 on the bfp16 datapath, which {opt('emulate_bf16_with_bfp16', False)} "
                "turns off", "drop one of the two")
    if mmul_shape is not None and tuple(mmul_shape) != dev.bf16_emulation_shape:
        return (f"{opt('convert_once')} multiplies {'x'.join(map(str, dev.bf16_emulation_shape))} bfp16 tiles, not "
                f"mmul {'x'.join(map(str, mmul_shape))}", f"drop {opt('mmul_shape')}")
    if epilogue:
        return ("the convert-once kernel is a bfp16 kernel, which has no fused epilogue yet (the emulated bf16 "
                "kernel has)", f"drop {opt('convert_once')}, or the epilogue")
    if compiler not in prec.BFP16_COMPILERS:
        return (f"the convert-once kernel is a bfp16 kernel, which builds with "
                f"{' or '.join(prec.BFP16_COMPILERS)} only, not {compiler}",
                f"use {opt('compiler', 'chess')}, Peano (no {opt('compiler', 'chess')}), or "
                f"{opt('convert_once', False)}")
    return None


def has_epilogue(o: Options) -> bool:
    """Whether the options ask for a fused epilogue (spec/rules/epilogue.py)."""
    return o.bias or o.activation not in (None, "none") or o.clamp is not None or o.requant is not None


def default_stack(dev_name: str, compiler: str, precision: Precision | None = None, convert_once: bool = False) -> int:
    """Core stack bytes, never less than what mlir-aie's matrix multiplications give their cores
    (facts.devices.MLIR_AIE_MM_STACK, 0xD00, which Peano's bf16-via-bfp16 kernels need): bfp16 kernels
    built with Peano (the convert-once bf16 kernel among them) what mlir-aie's Peano-built config1
    gets (0x1700) less its A copy, which our kernels keep in their own buffer (0xE00), or their chess
    stack where that is larger; chess-built bfp16 kernels
    what mlir-aie's ATB configs get for the same work (our kernels keep A's bfp16 copy and C's extra
    accumulator rows in their own L1 buffers, not on the stack; the convert-once bf16 kernel does
    config1's work plus B's conversion)."""
    dev = device(dev_name)
    block = precision is not None and precision.block
    if not dev.bfp16_stack_bytes or not (block or convert_once):
        return dev.default_stack_bytes
    if convert_once:
        chess = dev.bfp16_stack_bytes["convert_a"]
    else:
        assert precision is not None
        chess = dev.bfp16_stack_bytes["convert_c" if precision.converts_c else
                                      "convert_a" if precision.converts_a else ""]
    return max(chess, dev.bfp16_stack_bytes["peano"]) if compiler == "peano" else chess


@lru_cache(maxsize=4096)
def resolve(o: Options) -> Resolved:
    """The options' defaults, each derived from what was given (in dependency order: B's type,
    then the compiler and the datapath, which decide the mmul, which decides the accumulator, which
    with them decides the convert-once kernel and the stack)."""
    dev = device(o.device)
    out = o.dtype_out or default_out(o.dtype_in)
    dtype_b = o.dtype_b or o.dtype_in
    given_types = prec.resolve(o.dtype_in, dtype_b, out, o.acc)
    block = given_types.block
    compiler = o.compiler if o.compiler is not None else "peano"
    emulate = (o.emulate_bf16_with_bfp16 if o.emulate_bf16_with_bfp16 is not None
               else False if block else emulation_default(dev.name, o.dtype_in))
    if o.acc == prec.ACC_OUT:
        acc = out
    else:
        acc = o.acc or default_acc(dev, o.dtype_in, out, mmul(dev, o.mmul_shape, given_types, emulate))
    p = prec.resolve(o.dtype_in, dtype_b, out, acc)
    # Left open where both kernels can run, the convert-once kernel is the search's choice: search.choose
    # tunes the emulated and the convert-once kernel, each with tiles that fit its own L1 (the
    # convert-once kernel's A and B bfp16 copies need smaller ones), and writes the one the model
    # predicts faster into the options. What a config built without the search gets is the fallback
    # below: convert once under chess (as before Peano could build it), else the emulated kernel,
    # whose default tiles (the paper's 112 x 48 x 96) leave no L1 for the copies (76,512 B > 64 KiB).
    # W4A16 is not weighed: where the convert-once kernel can run it is the default, since it dequantizes each
    # B object straight into bfp16 tiles (one rounding) where the emulated kernel rounds the weights to bf16 and
    # the AIE API re-quantizes them to bfp16 at every mmul: other numerics, so no search picks between the two
    # (--convert-once 0 asks for the emulated one).
    buildable = convert_once_problem(dev, p, emulate, o.mmul_shape, compiler, has_epilogue(o)) is None
    default_once = buildable and (compiler == "chess" or bool(o.group_size))
    convert_once = o.convert_once if o.convert_once is not None else default_once
    stack = o.stack_bytes or default_stack(dev.name, compiler, p, convert_once)
    shape = mmul(dev, o.mmul_shape, p, emulate)
    kernel = _record(KernelOptions, o, emulate_bf16_with_bfp16=emulate, compiler=compiler, mmul=shape,
                     convert_once=convert_once, block=kv.block_kernel(p, convert_once))
    array = _record(ArrayOptions, o, rows=o.rows or dev.core_rows, cols=o.cols or dev.columns, stack_bytes=stack)
    return Resolved(Types(o.dtype_in, out, dtype_b, acc), _record(Layout, o, b_pack=o.b_pack or B_PACKS[0]),
                    _record(GroupQuant, o), kernel, array, _record(RuntimeOptions, o),
                    epilogue_of(o.bias, o.activation, o.clamp, o.requant), default_acc(dev, o.dtype_in, out, shape),
                    o.convert_once is None and buildable and not o.group_size)


def _record(kind: type[R], o: Options, **derived: Any) -> R:
    """A sub-record of the resolved config: the derived values given, and every other field the option of its
    name as given, or the table's constant default where it has one and the option was not given (so an option
    without a derived default needs no line here)."""
    values = {}
    for f in fields(kind):  # type: ignore[arg-type]
        if f.name in derived:
            values[f.name] = derived[f.name]
        else:
            given = getattr(o, f.name)
            values[f.name] = ROWS[f.name].default if given is None and ROWS[f.name].default is not None else given
    return kind(**values)


def variant(dev_name: str, types: Types, kernel: KernelOptions, groups: GroupQuant, tile: Tiling,
            epilogue: bool) -> kv.KernelVariant | None:
    """The kernel's accumulator expansion and loop structure for a tile: bfp16 kernels their fixed one, else the
    given expansion and loops (checked: ConfigError) or the automatic ones. None when there is no kernel to vary:
    the tiling not chosen yet (zeros: the search's configs), a tile off its mmul's grid (spec/rules/tiling.py), a
    convert-once kernel that cannot be built (convert_once_problem; `epilogue`: one was asked for), or a scalar A
    type the device has no matmul kernel for; check_config names what is wrong with those, in its own order, before
    anything reads the variant."""
    if min(tile.m, tile.k, tile.n, tile.rho) <= 0 or tile.m % tile.rho:
        return None
    steps = tiling.steps(kernel.mmul, types.precision.block, kernel.block)
    if not tiling.divisible(steps, tile.m, tile.k, tile.n, tile.k_mt, tile.rho):
        return None
    if kernel.convert_once and convert_once_problem(device(dev_name), types.precision, kernel.emulate_bf16_with_bfp16,
                                                    kernel.mmul_shape, kernel.compiler, epilogue) is not None:
        return None
    if kernel.block:
        if kernel.expansion not in (None, (2, 2)) or kernel.kernel_loops not in (None, "k-pipelined"):
            raise ConfigError("bfp16 kernels have one variant (2x2 clusters of 8x8 tiles, K loop pipelined)",
                              f"drop {opt('expansion')} and {opt('kernel_loops')}")
        return kv.KernelVariant(2, 2, "k-pipelined")
    if types.dtype_in not in device(dev_name).input_types:  # check_types names the type (with a given mmul, the
        return None  # search's probe tile gets here)
    return _scalar_variant(dev_name, types.dtype_in, types.dtype_b, kernel.mmul, kernel.emulate_bf16_with_bfp16,
                           a_rows(tile.m, tile.rho), tile.k, tile.n, kernel.expansion, kernel.kernel_loops,
                           groups.group_size, groups.zero_points, kernel.compiler)


@lru_cache(maxsize=4096)
def _scalar_variant(dev_name: str, dtype_in: str, dtype_b: str, shape: MmulShape, emulate: bool, t_ma: int, k: int,
                    n: int, expansion: tuple[int, int] | None, loops: str | None, group_size: int, zero_points: bool,
                    compiler: str) -> kv.KernelVariant:
    """kernel_variant.choose for a scalar kernel (cached: a config made again, or with another size, chooses
    once)."""
    dev = device(dev_name)
    # W4A16: the matmul function also holds the dequantization pass, so the loops leave its code room
    reserve = code_reserve(dev.name, group_size, zero_points, shape)
    return kv.choose(dev, dev.operands(dtype_in, dtype_b), shape, emulate, t_ma, k, n, expansion, loops, reserve,
                     compiler)
