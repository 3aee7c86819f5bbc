"""Render the kernel source of one KernelBuild from templates/.

One rendered file per KernelBuild holds the extern "C" functions the Design calls (their names are
KernelBuild.symbols), with every number of the build written out:
- scalar types (bf16, i8, i16; templates/mm.cc.j2): zero(C) and matmul(A, B, C[, slice]) on
  aie::mmul blocks;
- bfp16ebs8 precisions (npu2; templates/mm_bfp16.cc.j2): zero(C[, C_acc]),
  matmul(A, B, C[, A_bfp16][, C_acc][, slice]) on 8 x 8 bfp16 tiles with mac_8x8_8x8T, and
  convert(C, C_acc) when C accumulates in another type than it is written in.
Rendering is a pure function of the build: equal builds give byte-identical sources.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ...design.ir import KernelBuild
from ...facts import epilogue as epi
from ...facts import groupquant
from ...facts import precision as prec
from ...facts.devices import DEVICES, Device
from ...facts.dtypes import BF16, BFP16, I4, dtype
from ...facts.errors import ConfigError
from ...facts.rounding import Rounding, Saturation
from ...spec.checks import check_shift
from ...spec.rules import dequant as dq
from ...spec.rules import epilogue as epilogue_rule
from ...spec.rules import kernel_variant as kv
from ...spec.rules.block_loop import writes_out_k
from ...spec.rules.l1 import c_split_problem
from .paths import templates_dir
from .static_data import static_data

if TYPE_CHECKING:
    import jinja2

TEMPLATE = "mm.cc.j2"
BFP16_TEMPLATE = "mm_bfp16.cc.j2"
EMULATE_BFP16_DEFINE = "AIE_API_EMULATE_BFLOAT16_MMUL_WITH_BFP16"

# element types as the AIE API spells them
C_TYPES = {"bf16": "bfloat16", "f32": "float", "i8": "int8", "i16": "int16", "i32": "int32", "bfp16": "bfp16ebs8",
           "i4": "int4"}
# what an L1 buffer of a packed type holds: bytes (mlir-air's and IRON's int4 buffers are bytes too)
PACKED_MEM_TYPE = "uint8"
# __AIE_ARCH__ as the AIE compilers define it (aie_api detail/config.hpp)
AIE_ARCH = {"aie2": 20, "aie2p": 21}
# widest vector store (bits): 256 on AIE2 (mlir-aie aie2/zero.cc), 512 on AIE2P (aie2p/zero.cc)
STORE_BITS = {"aie2": 256, "aie2p": 512}
# our mode names (numerics.Rounding / Saturation) -> aie::rounding_mode / aie::saturation_mode
ROUNDING_MODES = {
    Rounding.FLOOR: "floor", Rounding.CEIL: "ceil",
    Rounding.SYM_FLOOR: "symmetric_floor", Rounding.SYM_CEIL: "symmetric_ceil",
    Rounding.NEG_INF: "negative_inf", Rounding.POS_INF: "positive_inf",
    Rounding.SYM_ZERO: "symmetric_zero", Rounding.SYM_INF: "symmetric_inf",
    Rounding.CONV_EVEN: "conv_even", Rounding.CONV_ODD: "conv_odd",
}
SATURATION_MODES = {Saturation.NONE: "none", Saturation.SATURATE: "saturate", Saturation.SYMMETRIC: "symmetric"}


@dataclass(frozen=True)
class KernelParams:
    """Everything the scalar template needs beyond the KernelBuild itself, derived and checked."""

    template: ClassVar[str] = TEMPLATE
    device: str
    source_file: str
    defines: tuple[str, ...]
    zero_name: str
    matmul_name: str
    ctype_in: str
    ctype_out: str
    acc_tag: str
    aie_arch: int
    rounding_mode: str
    saturation_mode: str
    sets_saturation: bool  # integer outputs narrower than the accumulator lanes
    row_clusters: int  # trip counts of the three matmul loops (over one A tile) and of the zero loop
    col_clusters: int
    k_blocks: int
    # (before, after) loop-hint macros of the block-row, cluster and K loops (gemm_gen_kernel.h)
    hint_z: tuple[str, str]
    hint_j: tuple[str, str]
    hint_k: tuple[str, str]
    loops_doc: str
    store_bits: int
    zero_lanes: int
    zero_iters: int
    # B's type when it differs from A's (int4 weights): its mmul element, its L1 element, values per element
    dtype_b: str = ""
    ctype_b: str = ""
    ctype_b_mem: str = ""
    b_values_per_elem: int = 1
    # C accumulated in a wider type than it is written in, converted once (precision.converts_c)
    converts_c: bool = False
    convert_name: str | None = None
    acc: str = ""  # C's L1 type while it accumulates (i32, i64, f32)
    acc_doc: str = ""
    ctype_acc: str = ""  # its storage element (an i64 accumulator is stored as int32 pairs)
    acc_words: int = 1
    split_blocks: int = 0  # accumulator blocks (r x t) in the C object; the rest in C_acc
    acc_zero_lanes: int = 0
    zero_buf_iters: int = 0
    c_blocks: int = 0  # r x t blocks of C (the conversion loop)
    out_block_bytes: int = 0
    acc_block_bytes: int = 0
    # the fused epilogue, applied by convert (templates/mm_epilogue.cc.j2; none: the plain conversion)
    epilogue: bool = False
    epi_doc: str = ""
    epi_lanes: int = 0
    epi_tile: bool = False  # convert reads the epilogue tile (a third argument)
    epi_offsets: tuple[int, ...] = ()  # byte offsets: bias, and for requantization multiplier, P, Q, header
    epi_float: bool = False
    epi_requant: bool = False
    epi_bias: bool = False
    epi_activation: str = "none"
    epi_clamp: tuple[str, str] | None = None  # C++ literals of the bf16 bounds
    epi_tanh: bool = False
    epi_runtime: bool = False  # every activation compiled, convert's int32 `mode` selects (epilogue.MODES)
    epi_modes: tuple[tuple[str, int], ...] = ()  # (activation, mode word) in mode order, for a runtime build
    # the tanh table's lookup: the index's shift, its centre (bytes), x's clamp (bf16 literals), the table layout
    tanh_consts: tuple[int, int, str, str] = (0, 0, "", "")
    lut_copy_bits: int = 0
    gelu_constants: tuple[str, str] = ("", "")
    # W4A16 (gemm_gen/facts/groupquant.py): B arrives as one int4 object, dequantized once per call into b_deq
    w4a16: bool = False
    zero_points: bool = False
    scale_rows: int = 0  # scale rows (groups) in one B object
    q_bytes: int = 0  # the object's int4 values, before its scales
    kb_per_row: int = 0  # K block rows of B per scale row
    trip_rows: int = 0  # K block rows per trip of the pass's flat loop (rules.dequant.trip_rows)
    chunks: int = 0  # the pass's flat loop trips: 8-column chunks of trip_rows block rows
    blocks_per_chunk: int = 0  # blocks of one 8-column chunk (8 / t)
    ctype_b_obj: str = ""  # the matmul's B argument when it is not the body's B (the W4A16 object: bytes)


@dataclass(frozen=True)
class BlockKernelParams:
    """Everything the bfp16 template needs beyond the KernelBuild itself, derived and checked."""

    template: ClassVar[str] = BFP16_TEMPLATE
    device: str
    source_file: str
    defines: tuple[str, ...]
    precision: str  # the preset's name (config1..3) or the type combination
    zero_name: str
    matmul_name: str
    convert_name: str | None  # C's final conversion, when it accumulates in another type
    matmul_params: tuple[str, ...]  # the C parameter list, in kernel_specs' argument order
    ctype_in: str  # A as it arrives
    ctype_out: str  # the C object
    ctype_acc: str  # C while it accumulates
    ctype_b: str  # B as it arrives
    aie_arch: int
    rounding_mode: str
    converts_a: bool  # bf16 A converted to bfp16 tiles by the kernel (into the A_bfp16 scratch)
    converts_b: bool  # bf16 B converted too, once per k-step (into the B_bfp16 scratch): convert-once bf16
    converts_c: bool  # C accumulates in ctype_acc and `convert` writes it as bfp16 tiles
    acc_tiles: bool  # C accumulates as bfp16 tiles (requantized every call)
    out_tiles: bool  # C is written as bfp16 tiles (else bf16 / f32 in 8 x 8 blocks)
    out_tile_bytes: int  # bytes of one converted 8 x 8 block of C
    split_tiles: int  # 8 x 8 accumulator blocks in the C object (all unless converts_c)
    c_object_bytes: int
    c_super_blocks: bool  # C's 8 x 8 tiles / accumulator blocks in 2 x 2 super-blocks (a C written as bfp16 tiles)
    blocks: int  # 16 x 16 blocks of C per call: the flat loop's trip count
    k_tiles: int
    unroll_k: bool  # the k-steps written out (rules.block_loop.writes_out_k): the block loop is the innermost
    k_pairs: int  # ping-pong pairs of the K loop after its first step (when it is a loop)
    a_tiles: int  # tiles of one A tile (the conversion loop)
    b_tiles: int  # tiles of one B tile
    c_tiles: int  # tiles of the C object (the final conversion)
    acc_tile_bytes: int  # bytes of one 8 x 8 accumulator block when C accumulates in a scalar type
    store_bits: int
    zero_lanes: int  # one store of the zero kernel (scalar accumulators)
    zero_iters: int  # zero loop trip counts: bfp16 tiles, or stores into the object and into C_acc
    zero_obj_iters: int
    zero_buf_iters: int
    # W4A16 converted once: the B object (int4 values with group scales, gemm_gen/facts/groupquant.py) dequantized
    # straight into the B_bfp16 tiles (`converts_b` names that scratch), once per object
    w4a16: bool = False
    zero_points: bool = False
    scale_rows: int = 0  # scale rows (groups) in one B object
    q_bytes: int = 0  # the object's int4 values, before its scales
    kb_per_row: int = 0  # K tiles per scale row
    trip_rows: int = 0  # K tiles per trip of the pass's flat loop (rules.dequant.trip_rows)
    trips: int = 0  # the pass's flat loop trips

    @property
    def matmul_args(self) -> tuple[str, ...]:
        """The matmul's parameter names (A, B, C, A_bfp16, B_bfp16, C_acc, slice)."""
        return tuple(param.split()[-1].lstrip("*") for param in self.matmul_params)


@dataclass(frozen=True)
class KernelSource:
    """A rendered kernel: what to write where, and how to compile it (with -I kernel_include_dir())."""

    build: KernelBuild
    filename: str
    text: str
    defines: tuple[str, ...]
    zero_name: str
    matmul_name: str
    convert_name: str | None = None  # bfp16 precisions whose C accumulates in another type


def source_file(build: KernelBuild) -> str:
    """The kernel's source name: its object file's, with .cc for .o (mm_64x64x64_..._4x8x8.cc)."""
    obj = build.object_file
    return (obj[: -len(".o")] if obj.endswith(".o") else obj) + ".cc"


def kernel_symbols(build: KernelBuild) -> tuple[str, str]:
    """The extern "C" names the Design's workers call: (zero_<out>, matmul_<in>_<out>)."""
    names = build.symbols
    return names["zero"], names["matmul"]


def kernel_defines(build: KernelBuild) -> tuple[str, ...]:
    """Preprocessor flags the rendered source must be compiled with (it refuses to build without).
    bfp16 kernels (bfp16 precisions, bf16 converted once) call the block-float datapath directly and
    need none."""
    if build.block_kernel:
        return ()
    return (f"-D{EMULATE_BFP16_DEFINE}",) if build.emulate_bf16_with_bfp16 else ()


# The renderer renders what the rules allowed: every build it is given comes from a config that passed its check
# (design/serve.check: checks.check_config, whose rules the search space applies to all candidates at once), so
# each rule below is asserted, naming where the check applies it; a broken one is a defect of ours.
def _keeps(rule: Callable[..., object], *args: Any) -> bool:
    """Whether a rule of the config's check that raises ConfigError when broken holds for these arguments."""
    try:
        rule(*args)
    except ConfigError:
        return False
    return True


def _device(build: KernelBuild) -> Device:
    found = [dev for dev in DEVICES.values() if dev.aie_target == build.aie_target]
    assert found, f"the target of a device (GemmConfig.dev), not {build.aie_target!r}"  # any: the core is the target's
    return found[0]


def _modes(build: KernelBuild) -> tuple[Rounding, Saturation]:
    assert build.rounding.upper() in Rounding.__members__ and build.saturation.upper() in Saturation.__members__, \
        "known modes: checks.check_types"
    return Rounding[build.rounding.upper()], Saturation[build.saturation.upper()]


def kernel_params(build: KernelBuild) -> KernelParams | BlockKernelParams:
    """Derive the template's numbers of a build (whose rules the config's check applied)."""
    dev = _device(build)
    assert _keeps(prec.check_precision, build.types.precision, dev, dev.acc_bits(build.types.dtype_in, build.mmul)), \
        "types with a kernel: checks.check_types"
    if build.block_kernel:
        assert build.epilogue.is_identity, "no epilogue on the bfp16 kernels: rules/epilogue.types_problem"
        return block_kernel_params(build, dev)
    t_in, t_out = dtype(build.types.dtype_in), dtype(build.types.dtype_out)
    assert build.types.dtype_out in dev.out_types.get(build.types.dtype_in, ()), "checks.check_scalar_types"
    mmul = tuple(build.mmul)
    r, s, t = mmul
    operands = dev.operands(build.types.dtype_in, build.types.dtype_b)  # "i8xi4" for int4 weights
    shapes = ((dev.bf16_emulation_shape,) if build.emulate_bf16_with_bfp16 else dev.shapes(operands))
    assert mmul in shapes, "an mmul of the device: checks.check_scalar_types (Device.mmul_shape)"
    assert build.rho >= 1 and build.m % build.rho == 0, "rho divides m: checks.check_array"
    assert build.k % s == 0 and min(build.m, build.k, build.n) > 0, "the tiling's granularity: rules/tiling.py"
    # the variant the config took (registers, whole clusters, a known loop nest: GemmConfig.variant)
    variant = kv.choose(dev, operands, (r, s, t), build.emulate_bf16_with_bfp16, build.t_ma, build.k, build.n,
                        (build.expansion[0], build.expansion[1]), build.loops, compiler=build.compiler)
    er, et = variant.expansion
    row_clusters, col_clusters, k_blocks = build.t_ma // (er * r), build.n // (et * t), build.k // s
    hint_z, hint_j, hint_k, loops_doc = _loop_hints(variant.loops, row_clusters, col_clusters, k_blocks)
    rounding, saturation = _modes(build)
    assert not (t_out.is_float and build.shift), "no shift of a float output: checks.check_types"
    types = build.types
    assert _keeps(check_shift, dev, types.dtype_in, types.dtype_out, (r, s, t), build.shift, types.acc), \
        "checks.check_shift"
    store_bits = STORE_BITS[build.aie_target]
    lanes = store_bits // t_out.bits
    while (build.m * build.n) % lanes:
        lanes //= 2
    zero_name, matmul_name = kernel_symbols(build)
    acc = _scalar_acc(build, dev, store_bits) if build.types.precision.converts_c else {}
    acc.update(_w4a16(build, dev, variant))
    if not build.epilogue.is_identity:
        acc.update(_epilogue(build, dev, t_out.is_float))
    return KernelParams(
        device=dev.name, source_file=source_file(build), defines=kernel_defines(build),
        zero_name=zero_name, matmul_name=matmul_name,
        ctype_in=C_TYPES[build.types.dtype_in], ctype_out=C_TYPES[build.types.dtype_out],
        # integers: the accumulator the shape natively has (acc32, or acc64 for aie2p's 16-bit
        # 4x4x8), as mlir-aie's mm.cc does; our numerics accumulate exactly in int64 either way
        acc_tag="accfloat" if t_in.is_float else "accauto", aie_arch=AIE_ARCH[build.aie_target],
        rounding_mode=ROUNDING_MODES[rounding], saturation_mode=SATURATION_MODES[saturation],
        # every integer narrowing out of wider accumulator lanes saturates (an int32 C out of acc64 too)
        sets_saturation=not t_out.is_float and t_out.bits < dev.acc_bits(build.types.dtype_in, (r, s, t)),
        row_clusters=row_clusters, col_clusters=col_clusters, k_blocks=k_blocks,
        hint_z=hint_z, hint_j=hint_j, hint_k=hint_k, loops_doc=loops_doc,
        store_bits=store_bits, zero_lanes=lanes, zero_iters=build.m * build.n // lanes, **_b_types(build), **acc,
    )


def _b_types(build: KernelBuild) -> dict[str, Any]:
    """B's names in the scalar template: its own type, or a packed type (int4) read from bytes; a W4A16
    body reads the dequantized bf16 scratch, so its mmul and L1 types are A's."""
    t_b = dtype(build.types.precision.b)
    if not t_b.is_packed or is_w4a16(build):
        b = build.types.dtype_in if is_w4a16(build) else t_b.name  # a scalar B in its own type (i16 x i8)
        return dict(dtype_b=t_b.name, ctype_b=C_TYPES[b], ctype_b_mem=C_TYPES[b])
    return dict(dtype_b=t_b.name, ctype_b=C_TYPES[t_b.name], ctype_b_mem=PACKED_MEM_TYPE,
                b_values_per_elem=t_b.block_elems // t_b.block_bytes)


def is_w4a16(build: KernelBuild) -> bool:
    """bf16 A times int4 B: the core dequantizes B with its group scales, then runs the bf16 body."""
    return build.types.dtype_in in prec.W4A16_A_TYPES and build.types.precision.b == I4.name


def _w4a16_object(build: KernelBuild) -> groupquant.ObjectLayout | None:
    """The B object of a W4A16 build (None for any other build), asserting the rules that leave a pass for it:
    a group size and zero points only with bf16 x int4, a group size it has, a tile k that covers whole
    groups or lies inside one, a row-major B (both passes read row-major s x t blocks, along N first: the bf16
    body's B order, which the host writes the object's values in)."""
    g = build.group_size
    if not is_w4a16(build):
        assert not (g or build.zero_points), "group scales with W4A16 only: checks.check_groups"
        return None
    assert g in groupquant.GROUP_SIZES, "a group size with W4A16: checks.check_groups"
    assert groupquant.tile_k_ok(build.k, g), "whole groups per B object: checks.check_config (space.RULES)"
    assert not build.b_col_maj, "a row-major int4 B: checks.check_int4_layout"
    return groupquant.ObjectLayout(build.k, build.n, g, build.zero_points)


def _w4a16(build: KernelBuild, dev: Device, variant: kv.KernelVariant) -> dict[str, Any]:
    """The scalar template's numbers for W4A16's dequantization pass into bf16, asserting the rules that leave a
    pass for it: it reads B in the bf16 body's s x t blocks (row-major, blocks along N first), one block per vector
    of s t int4 values (at least the 32 lanes of the smallest int4 vector), each block inside one group, and the
    scales of 8 columns per 128-bit load (n is a multiple of 2 t >= 8: every expansion is at least 2 wide; the
    template asserts it)."""
    layout = _w4a16_object(build)
    if layout is None:
        return {}
    _, s, t = build.mmul
    assert dq.block_problem(build.mmul, build.group_size) is None, "the pass's blocks: checks.check_groups"
    assert dq.code_fits(dev, build.mmul, build.emulate_bf16_with_bfp16, variant.expansion, variant.loops,
                        build.k, build.n, build.zero_points), "its program memory: checks.check_config (space.RULES)"
    rows = dq.trip_rows(build.k, build.group_size, s)
    return dict(w4a16=True, ctype_b_obj=PACKED_MEM_TYPE, zero_points=build.zero_points, scale_rows=layout.rows,
                q_bytes=layout.q_bytes, kb_per_row=build.k // s // layout.rows, trip_rows=rows,
                chunks=build.k // s // rows * build.n // dq.SCALE_LANES, blocks_per_chunk=dq.SCALE_LANES // t)


def w4a16_code_bytes(build: KernelBuild, dev: Device, variant: kv.KernelVariant) -> int:
    """Estimated program memory of a W4A16 matmul: the bf16 loop nest (kernel_variant.code_bytes) plus the
    dequantization pass (dequant.dequant_code_bytes), against the matmul's CODE_BUDGET."""
    return dq.matmul_code_bytes(dev, build.mmul, build.emulate_bf16_with_bfp16, variant.expansion, variant.loops,
                                build.k, build.n, build.zero_points)


def _scalar_acc(build: KernelBuild, dev: Device, store_bits: int) -> dict[str, Any]:
    """The scalar template's numbers for a C accumulated in a wider type (i32, i64 or f32) and
    converted once: where its rows live, how they are stored and cleared, the conversion's loop."""
    p = build.types.precision
    t_out, t_acc = dtype(p.out), dtype(p.acc)
    r, _, t = build.mmul
    words = t_acc.bytes // 4  # int64 lanes are stored as int32 pairs
    split = build.c_split_elems // (r * t)
    _check_split(build, split)
    acc_lanes = store_bits // 32
    buf_elems = (build.m * build.n - build.c_split_elems) * words
    # whole stores: the buffer is whole r x t blocks (spec/rules/l1.c_split_blocks), and every mmul's block holds at
    # least 16 values (facts/devices.py mmul_shapes), a multiple of a 256- or 512-bit store's 32-bit lanes
    assert buf_elems % acc_lanes == 0, (buf_elems, store_bits)
    doc = {"f32": "fp32, the accumulator's own lanes", "i32": "int32, the acc32 lanes",
           "i64": "int64, the acc64 lanes, kept as int32 pairs"}[p.acc]
    return dict(converts_c=True, convert_name=build.symbols["convert"], acc=p.acc, acc_doc=doc,
                ctype_acc="float" if t_acc.is_float else "int32", acc_words=words, split_blocks=split,
                acc_zero_lanes=acc_lanes, zero_buf_iters=buf_elems // acc_lanes,
                c_blocks=build.m * build.n // (r * t), out_block_bytes=t_out.nbytes(r * t),
                acc_block_bytes=t_acc.nbytes(r * t))


def _check_split(build: KernelBuild, split: int) -> None:
    """Refuse a C split the kernel's in-place conversion cannot take (spec/rules/l1.c_split_problem)."""
    problem = c_split_problem(build.types.precision, build.m, build.n, build.acc_block, split)
    if problem is not None:
        raise ConfigError(problem, "split C's accumulator where rules/l1.c_split_blocks does")


def _c_float(value: float) -> str:
    """A float as an exact C++ float literal (the values rendered are bf16-valued and finite: the clamp's bounds
    by spec/rules/epilogue.epilogue_of)."""
    assert np.isfinite(value) and float(np.float32(value)) == value, value
    return f"{float(value)!r}f"


def _epilogue(build: KernelBuild, dev: Device, float_out: bool) -> dict[str, Any]:
    """The scalar template's numbers for a fused epilogue (gemm_gen/facts/epilogue.py), asserting the rules that leave a
    kernel for it: it runs in convert, so C must accumulate wide; bf16 outputs take the float chain, i8 / i16
    outputs the double-rounding requantization (ReLU as its act_min, which the host raises)."""
    e = build.epilogue
    # the types' epilogue (spec/rules/epilogue.types_problem: checks.check_epilogue): in C's one final conversion
    assert build.types.precision.converts_c, "the wide accumulator: rules/epilogue.types_problem"
    layout = epi.tile_layout(e, build.n)
    offsets = () if layout is None else tuple(o for o in (layout.bias, layout.multiplier, layout.p, layout.q,
                                                          layout.header) if o is not None)
    common = dict(epilogue=True, epi_lanes=epi.VECTOR_LANES, epi_tile=layout is not None, epi_offsets=offsets)
    if float_out:
        assert build.types.dtype_out in epilogue_rule.FLOAT_OUTS and e.requant is None, "rules/epilogue.types_problem"
        act = e.activation.value
        steps = [f"x = bf16(fp32(acc{' + bias' if e.bias else ''}))"]
        steps += [] if act == "none" else [f"y = {act}(x)"]
        steps += [] if e.clamp is None else [f"clamped to [{e.clamp[0]}, {e.clamp[1]}] in bf16"]
        clamp = None
        if e.clamp is not None:
            lo, hi = (float(np.float32(v).astype(BF16.host)) for v in e.clamp)
            assert lo <= hi, "the clamp's bounds in order: rules/epilogue.epilogue_of"
            clamp = (_c_float(lo), _c_float(hi))
        modes = tuple((a.value, epi.MODES[a]) for a in e.modes) if e.runtime else ()
        return dict(common, epi_float=True, epi_bias=e.bias, epi_activation=act, epi_clamp=clamp, epi_tanh=e.uses_tanh,
                    epi_runtime=e.runtime, epi_modes=modes,
                    epi_doc="; ".join(steps),
                    tanh_consts=(epi.INDEX_BITS, epi.TANH_BIAS * epi.ENTRY_BYTES, _c_float(epi.TANH_X_MIN),
                                 _c_float(epi.TANH_X_MAX)),
                    lut_copy_bits=dev.lut_copy_bits,
                    gelu_constants=(_c_float(epi.GELU_SQRT_2_OVER_PI), _c_float(epi.GELU_BETA)))
    # TFLite's double-rounding requantization into i8 / i16, ReLU only as its act_min (which the host folds in:
    # epilogue_args.kernel_requant), no clamp, no shift (spec/rules/epilogue.types_problem, REQUANTS)
    assert e.requant is epi.RequantForm.DOUBLE and build.types.dtype_out in epilogue_rule.REQUANT_OUTS
    assert e.activation.value in epilogue_rule.INT_ACTIVATIONS and e.clamp is None and not build.shift
    return dict(common, epi_requant=True, epi_bias=e.bias,
                epi_doc=f"x = sat32(acc{' + bias' if e.bias else ''}), TFLite's per-channel requantization "
                        f"(three SRS), + zero point, clamp to [act_min, act_max], {build.types.dtype_out}")


def _hint(kind: str, count: int) -> tuple[str, str]:
    if kind == "FLATTEN":
        return ("GG_FLATTEN_BEFORE", "GG_FLATTEN_AFTER")
    return (f"GG_{kind}_BEFORE({count})", f"GG_{kind}_AFTER({count})")


def _loop_hints(loops: str, rows: int, cols: int, ks: int) -> tuple[tuple[str, str], tuple[str, str],
                                                                    tuple[str, str], str]:
    """Which loop each compiler software-pipelines (PIPELINE), unrolls (FLATTEN) or only bounds."""
    kinds = {"k-pipelined": ("LOOP_RANGE", "LOOP_RANGE", "PIPELINE"),
             "c-overlap": ("LOOP_RANGE", "LOOP_RANGE", "PIPELINE"),
             "k-flat": ("LOOP_RANGE", "PIPELINE", "FLATTEN"),
             "jk-flat": ("PIPELINE", "FLATTEN", "FLATTEN")}[loops]
    if loops == "c-overlap":  # the pipelined K loop runs all k-steps but the peeled last one
        ks = max(1, ks - 1)
    docs = {"k-pipelined": "the K loop software-pipelined, clusters one after another",
            "c-overlap": "the K loop software-pipelined over all but the last k-step, which is peeled: each "
                         "chain's last mac, its C store and the next cluster's C reload, so stores and reloads "
                         "overlap the other chains' macs",
            "k-flat": "the K loop unrolled, the cluster loop software-pipelined",
            "jk-flat": "the cluster and K loops unrolled, the block-row loop software-pipelined"}
    z, j, k = (_hint(kind, count) for kind, count in zip(kinds, (rows, cols, ks)))
    return z, j, k, docs[loops]


def block_kernel_params(build: KernelBuild, dev: Device) -> BlockKernelParams:
    """The bfp16 template's numbers (npu2, mac_8x8_8x8T on 8 x 8 tiles, Peano or chess)."""
    p = build.types.precision
    shape = dev.bfp16_mmul_shape
    assert shape is not None  # prec.check_precision refused devices without a bfp16 datapath
    q = BFP16.tile_rows
    assert tuple(build.mmul) == shape, "mac_8x8_8x8T: checks.check_block_types"
    # the convert-once kernel: a bf16 A on the bfp16 datapath (spec/rules/defaults.convert_once_problem); bfp16
    # operands are not emulated (checks.check_block_types)
    assert (not p.block and p.a == "bf16") if build.convert_once else True
    assert build.emulate_bf16_with_bfp16 == bool(build.convert_once)
    assert build.compiler in prec.BFP16_COMPILERS, "checks.check_block_types"
    assert tuple(build.expansion) == (2, 2) and build.loops == "k-pipelined", "their one variant: GemmConfig.variant"
    assert build.rho >= 1 and build.m % build.rho == 0, "rho divides m: checks.check_array"
    # 2 x 2 clusters of 8 x 8 tiles (the super-blocks of spec/rules/tiling.py)
    assert build.t_ma % (2 * q) == build.k % q == build.n % (2 * q) == 0 and min(build.m, build.k, build.n) > 0
    rounding, _ = _modes(build)
    assert not build.shift, "no shift of a float output: checks.check_types"
    t_out, t_acc = dtype(p.out), dtype(p.acc)
    split = build.c_split_elems // (q * q)
    c_object_bytes = t_out.nbytes(build.m * build.n)
    if p.converts_c:
        _check_split(build, split)
    store_bits = STORE_BITS[build.aie_target]
    lanes = 0 if t_acc.is_block else store_bits // t_acc.bits
    converts_a, converts_b = kv.converts_a_tile(p, build.convert_once), build.convert_once
    layout = _w4a16_object(build)  # W4A16: B is the object's bytes, dequantized into B_bfp16
    w4a16: dict[str, Any] = {}
    if layout is not None:
        rows = dq.trip_rows(build.k, build.group_size, q)
        w4a16 = dict(w4a16=True, zero_points=build.zero_points, scale_rows=layout.rows, q_bytes=layout.q_bytes,
                     kb_per_row=build.k // q // layout.rows, trip_rows=rows,
                     trips=build.k // q // rows * build.n // (2 * q))
    ctype_b = PACKED_MEM_TYPE if layout is not None else C_TYPES[p.b]
    params = [f"{C_TYPES[p.a]} *A", f"{ctype_b} *B", f"{C_TYPES[p.out]} *C"]
    if converts_a:
        params.append(f"{C_TYPES[BFP16.name]} *A_bfp16")
    if converts_b:
        params.append(f"{C_TYPES[BFP16.name]} *B_bfp16")
    if p.converts_c:
        params.append(f"{C_TYPES[p.acc]} *C_acc")
    if build.rho > 1:
        params.append("int32_t slice")
    names = build.symbols
    k_tiles = build.k // q
    c_tiles = build.m * build.n // (q * q)
    return BlockKernelParams(
        device=dev.name, source_file=source_file(build), defines=kernel_defines(build),
        precision=p.name + (", converted to bfp16 once" if build.convert_once else ""),
        zero_name=names["zero"], matmul_name=names["matmul"], convert_name=names.get("convert"),
        matmul_params=tuple(params), ctype_in=C_TYPES[p.a], ctype_out=C_TYPES[p.out], ctype_acc=C_TYPES[p.acc],
        aie_arch=AIE_ARCH[build.aie_target], rounding_mode=ROUNDING_MODES[rounding],
        ctype_b=ctype_b, converts_a=converts_a, converts_b=converts_b, converts_c=p.converts_c,
        acc_tiles=t_acc.is_block, out_tiles=t_out.is_block, out_tile_bytes=t_out.nbytes(q * q), split_tiles=split,
        c_object_bytes=c_object_bytes, c_super_blocks=t_out.is_block,
        blocks=build.t_ma // (2 * q) * (build.n // (2 * q)), k_tiles=k_tiles, unroll_k=bool(writes_out_k(build.k)),
        k_pairs=(k_tiles - 1) // 2, a_tiles=build.t_ma * build.k // (q * q),
        b_tiles=build.k * build.n // (q * q), c_tiles=c_tiles,
        acc_tile_bytes=0 if t_acc.is_block else t_acc.nbytes(q * q), store_bits=store_bits, zero_lanes=lanes,
        zero_iters=c_tiles if t_acc.is_block else 0,
        zero_obj_iters=build.c_split_elems // lanes if lanes else 0,
        zero_buf_iters=(build.m * build.n - build.c_split_elems) // lanes if lanes else 0, **w4a16,
    )


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    import jinja2  # lazy: `import gemm_gen` reaches the back ends, and only rendering a kernel needs jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_kernel(build: KernelBuild) -> str:
    """The C++ source of the build's kernels (zero, matmul, and convert when C is converted). A source that
    defines static data is refused: the L1 plan counts none for the kernel (spec/rules/l1.py; the tanh table's two
    copies are worker Buffers, counted there), so such data would sit in L1 uncounted."""
    params = kernel_params(build)
    text = _environment().get_template(params.template).render(b=build, p=params)
    found = static_data(text)
    if found:
        raise ConfigError(f"the kernel {params.source_file} defines {sum(n for _, n in found)} B of static data "
                          f"({', '.join(f'{name} {n} B' for name, n in found)}) that the L1 plan does not count",
                          "pass it to the kernel as a worker Buffer (design/build.py tanh_buffers) instead")
    return text




def kernel_source(build: KernelBuild) -> KernelSource:
    zero_name, matmul_name = kernel_symbols(build)
    return KernelSource(build, source_file(build), render_kernel(build), kernel_defines(build),
                        zero_name, matmul_name, build.symbols.get("convert"))
