"""Render the matmul/zero kernel source of one KernelBuild from templates/mm.cc.j2.

One rendered file per KernelBuild holds the two extern "C" functions the Design calls,
zero_<dtype_out> and matmul_<dtype_in>_<dtype_out>, with every number of the build written out.
Rendering is a pure function of the build: equal builds give byte-identical sources.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import jinja2

from ..design.model import KernelBuild
from ..dtypes import dtype
from ..errors import ConfigError
from ..hw.devices import DEVICES, Device
from ..numerics import Rounding, Saturation
from .paths import templates_dir

TEMPLATE = "mm.cc.j2"
EMULATE_BFP16_DEFINE = "AIE_API_EMULATE_BFLOAT16_MMUL_WITH_BFP16"

# element types as the AIE API spells them
C_TYPES = {"bf16": "bfloat16", "f32": "float", "i8": "int8", "i16": "int16", "i32": "int32"}
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
    """Everything the template needs beyond the KernelBuild itself, derived and checked."""

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
    sets_saturation: bool  # integer outputs narrower than 32 bits
    row_pairs: int  # trip counts of the three matmul loops (over one A tile) and of the zero loop
    col_pairs: int
    k_blocks: int
    store_bits: int
    zero_lanes: int
    zero_iters: int


@dataclass(frozen=True)
class KernelSource:
    """A rendered kernel: what to write where, and how to compile it (with -I kernel_include_dir())."""

    build: KernelBuild
    filename: str
    text: str
    defines: tuple[str, ...]
    zero_name: str
    matmul_name: str


def source_file(build: KernelBuild) -> str:
    """The kernel's source name: its object file's, with .cc for .o (mm_64x64x64_..._4x8x8.cc)."""
    obj = build.object_file
    return (obj[: -len(".o")] if obj.endswith(".o") else obj) + ".cc"


def kernel_symbols(build: KernelBuild) -> tuple[str, str]:
    """The extern "C" names the Design's workers call: (zero_<out>, matmul_<in>_<out>)."""
    names = build.symbols
    return names["zero"], names["matmul"]


def kernel_defines(build: KernelBuild) -> tuple[str, ...]:
    """Preprocessor flags the rendered source must be compiled with (it refuses to build without)."""
    return (f"-D{EMULATE_BFP16_DEFINE}",) if build.emulate_bf16_with_bfp16 else ()


def _device(build: KernelBuild) -> Device:
    for dev in DEVICES.values():
        if dev.aie_target == build.aie_target:
            return dev
    targets = ", ".join(sorted(d.aie_target for d in DEVICES.values()))
    raise ConfigError(f"no device has aie_target {build.aie_target!r}", f"use one of {targets}")


def kernel_params(build: KernelBuild) -> KernelParams:
    """Check that the build is one our kernel can be for, and derive the template's numbers."""
    dev = _device(build)
    t_in, t_out = dtype(build.dtype_in), dtype(build.dtype_out)
    if build.dtype_out not in dev.out_types.get(build.dtype_in, ()):
        raise ConfigError(f"{dev.name} has no {build.dtype_in} -> {build.dtype_out} kernel",
                          f"use --dtype_in one of {', '.join(dev.out_types)} with a matching --dtype_out")
    mmul = tuple(build.mmul)
    r, s, t = mmul
    shapes = ((dev.bf16_emulation_shape,) if build.emulate_bf16_with_bfp16
              else dev.mmul_shapes.get(build.dtype_in, ()))
    if build.emulate_bf16_with_bfp16 and (build.dtype_in != "bf16" or dev.bf16_emulation_shape is None):
        raise ConfigError(f"bf16-via-bfp16 emulation is an npu2 bf16 feature, not {dev.name} {build.dtype_in}",
                          "drop --emulate-bf16-mmul-with-bfp16")
    if mmul not in shapes:
        raise ConfigError(f"mmul {r}x{s}x{t} is not a {dev.name} {build.dtype_in} kernel shape",
                          "use one of " + ", ".join("x".join(map(str, sh)) for sh in shapes if sh))
    if build.rho < 1 or build.m % build.rho:
        raise ConfigError(f"rho {build.rho} does not divide the kernel tile's m = {build.m}",
                          "use a rho >= 1 that divides m")
    if build.t_ma % (2 * r) or build.k % s or build.n % (2 * t) or min(build.m, build.k, build.n) <= 0:
        raise ConfigError(f"kernel tile {build.t_ma}x{build.k}x{build.n} (m / rho x k x n) does not fit the 2x2 "
                          f"expansion of mmul {r}x{s}x{t}",
                          f"use (m / rho) % {2 * r} == 0, k % {s} == 0, n % {2 * t} == 0")
    try:
        rounding = Rounding[build.rounding.upper()]
        saturation = Saturation[build.saturation.upper()]
    except KeyError as e:
        raise ConfigError(f"unknown rounding or saturation mode {e}",
                          "use a mode of gemm_gen.numerics.Rounding / Saturation") from None
    if not 0 <= build.shift <= 31 or (t_out.is_float and build.shift):
        raise ConfigError(f"shift {build.shift} is not valid for a {build.dtype_out} output",
                          "use 0..31 for integer outputs, 0 for float outputs")
    store_bits = STORE_BITS[build.aie_target]
    lanes = store_bits // t_out.bits
    while (build.m * build.n) % lanes:
        lanes //= 2
    zero_name, matmul_name = kernel_symbols(build)
    return KernelParams(
        device=dev.name, source_file=source_file(build), defines=kernel_defines(build),
        zero_name=zero_name, matmul_name=matmul_name,
        ctype_in=C_TYPES[build.dtype_in], ctype_out=C_TYPES[build.dtype_out],
        # integers: the accumulator the shape natively has (acc32, or acc64 for aie2p's 16-bit
        # 4x4x8), as mlir-aie's mm.cc does; our numerics accumulate exactly in int64 either way
        acc_tag="accfloat" if t_in.is_float else "accauto", aie_arch=AIE_ARCH[build.aie_target],
        rounding_mode=ROUNDING_MODES[rounding], saturation_mode=SATURATION_MODES[saturation],
        sets_saturation=not t_out.is_float and t_out.bits < 32,
        row_pairs=build.t_ma // (2 * r), col_pairs=build.n // (2 * t), k_blocks=build.k // s,
        store_bits=store_bits, zero_lanes=lanes, zero_iters=build.m * build.n // lanes,
    )


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_kernel(build: KernelBuild) -> str:
    """The C++ source of the build's zero and matmul kernels."""
    return _environment().get_template(TEMPLATE).render(b=build, p=kernel_params(build))


def kernel_source(build: KernelBuild) -> KernelSource:
    zero_name, matmul_name = kernel_symbols(build)
    return KernelSource(build, source_file(build), render_kernel(build), kernel_defines(build),
                        zero_name, matmul_name)
