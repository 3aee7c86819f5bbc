"""Kernel templates: render every supported KernelBuild, compile it on the host and check it.

Each rendered source is compiled unchanged with the host g++ against tests/aie_host (a minimal
stand-in for the AIE API with the numerics of gemm_gen/facts/numerics.py) into a shared library, loaded
with ctypes and run on random tiles laid out in the blocked L1 layouts (gemm_gen/facts/l1_layout.py):
zero, then matmul twice (two k-steps). C read back through its layout must equal
KernelNumerics.call applied twice, bit for bit. This checks the kernel's addressing, loop
structure, transposes, shifts and mode handling; it cannot check the AIE compilers or the
hardware's own arithmetic (that needs Peano or chess and an NPU).

bfp16 precisions (templates/mm_bfp16.cc.j2) run the same way on 8 x 8 tiles of 72 bytes: the host
quantizes bfp16 inputs as gemm_gen/design/host_buffers.py does, each k-step makes rho matmul calls, and a C
converted after its last call gets its convert call; C (bfp16 tiles decoded, and their bytes) must
equal KernelNumerics bit for bit.

Compiled libraries are cached by a hash of source, flags and headers under
.pytest_cache/gemm_gen_kernels/, so only changed kernels are rebuilt; tests/host_compile.py compiles
them (aie.hpp precompiled, the probe compiled once, the work shared between pytest workers).
"""

from __future__ import annotations

import ctypes
import re
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from gemm_gen.backends.kernel_source import (
    BlockKernelParams,
    kernel_defines,
    kernel_include_dir,
    kernel_params,
    kernel_source,
    kernel_symbols,
    render_kernel,
    source_file,
)
from gemm_gen.backends.kernel_source import render as render_module
from gemm_gen.design import build_design
from gemm_gen.design.build import kernel_build, kernel_specs
from gemm_gen.design.ir import KernelBuild
from gemm_gen.design.serve import check
from gemm_gen.facts import bfp16
from gemm_gen.facts.devices import NPU1, NPU2, Device
from gemm_gen.facts.dtypes import dtype
from gemm_gen.facts.errors import ConfigError
from gemm_gen.facts.inputs import make_inputs
from gemm_gen.facts.l1_layout import a_layout, b_layout, c_layout, c_tile_blocks
from gemm_gen.facts.numerics import KernelNumerics, fused_mac_products
from gemm_gen.facts.precision import BFP16, PRESETS, Precision, check_precision, wide_acc
from gemm_gen.facts.rounding import Rounding, Saturation
from gemm_gen.spec.checks import check_config
from gemm_gen.spec.config import GemmConfig
from gemm_gen.spec.request import Types
from gemm_gen.spec.rules import block_loop as bl
from gemm_gen.spec.rules import kernel_variant as kv

from .. import host_compile
from ..conftest import small
from ..host_compile import CACHE, CXX, HOST_API, HOST_PROBE  # noqa: F401 (other modules import them here)

REPO = Path(__file__).resolve().parents[2]
GUARD = 64  # elements of sentinel values around every L1 buffer
ALIGN = 64  # bytes: every L1 buffer starts vector aligned (mlir-aie aligns buffers; 64 for AIE2P)

needs_gxx = pytest.mark.skipif(CXX is None, reason="g++ not found: the host kernel checks need a C++20 g++")

PAIRS = (("bf16", "bf16"), ("bf16", "f32"), ("i8", "i8"), ("i8", "i16"), ("i8", "i32"),
         ("i16", "i16"), ("i16", "i32"))


# ---- the variants ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One kernel to compile and run. hot: integer inputs over their full range (drawn as for an
    i32 output), so that shifted outputs round and saturate. patches: (old, new) edits of the
    rendered source, for kernels that must fail (named by mutant)."""

    build: KernelBuild
    hot: bool = False
    patches: tuple[tuple[str, str], ...] = ()
    mutant: str = ""
    host_defines: tuple[str, ...] = ()  # host stand-in options (-DGG_HOST_FP32_PER_MAC)

    @property
    def id(self) -> str:
        tag = f"-mutant-{self.mutant}" if self.patches else ""
        tag += "".join(f"-{d.removeprefix('-D').lower()}" for d in self.host_defines)
        return f"{self.build.aie_target}-{source_file(self.build)[:-3]}{tag}"

    @property
    def source(self) -> str:
        text = render_kernel(self.build)
        for old, new in self.patches:
            assert text.count(old) == 1, f"{self.id}: the patch does not apply: {old!r}"
            text = text.replace(old, new)
        return text


def build(dev: Device, dtype_in: str, dtype_out: str, blocks: tuple[int, int, int], b_col_maj: bool,
          mmul: tuple[int, int, int] | None = None, emulate: bool = False, rounding: str = "conv_even",
          saturation: str = "saturate", shift: int = 0, rho: int = 1, expansion: tuple[int, int] | None = None,
          loops: str | None = None, wide: bool = False, a_col_maj: bool = False,
          c_col_maj: bool = False) -> KernelBuild:
    """A KernelBuild whose A tile is `blocks` (2r, s, 2t) units of the mmul shape; C has rho A tiles.
    The variant is the one a design would get (kernel_variant.choose) unless given. C stays in its
    output type between calls (--acc out) unless `wide`: then in the kernel's accumulator type. Built for
    Peano, or for chess where the given loops are a flattening Peano would not pipeline."""
    r, s, t = mmul or dev.mmul_shape(dtype_in, emulate)
    m, k, n = 2 * r * blocks[0] * rho, s * blocks[1], 2 * t * blocks[2]
    compiler = "peano"
    if expansion is not None and loops is not None and kv.peano_problem(dev, dtype_in, (r, s, t), emulate,
                                                                        expansion, loops, k, n):
        compiler = "chess"
    v = kv.choose(dev, dtype_in, (r, s, t), emulate, m // rho, k, n, expansion, loops, compiler=compiler)
    acc = wide_acc(dtype_out, dev.acc_bits(dtype_in, (r, s, t))) if wide else None
    return KernelBuild(dev.aie_target, Types.of(dtype_in, dtype_out, acc=acc), m, k, n, (r, s, t), b_col_maj, emulate,
                       rounding, saturation, shift, compiler=compiler, rho=rho, expansion=v.expansion, loops=v.loops,
                       a_col_maj=a_col_maj, c_col_maj=c_col_maj)


def _cases() -> list[Case]:
    cases = []
    for dev in (NPU1, NPU2):
        for din, dout in PAIRS:  # default mmul: two tile sizes, both B layouts
            cases += [Case(build(dev, din, dout, (1, 2, 2), False)), Case(build(dev, din, dout, (1, 2, 2), True)),
                      Case(build(dev, din, dout, (2, 3, 1), True))]
        for din, shapes in dev.mmul_shapes.items():  # every other mmul shape once
            for i, shape in enumerate(shapes[1:]):
                cases.append(Case(build(dev, din, din, (2, 2, 1), bool(i % 2), mmul=shape)))
    for dout in ("bf16", "f32"):  # npu2 bf16 through the bfp16 datapath
        cases += [Case(build(NPU2, "bf16", dout, (1, 2, 2), True, emulate=True)),
                  Case(build(NPU2, "bf16", dout, (2, 3, 1), False, emulate=True))]
    cases += [  # integer shift / rounding / saturation, and bf16 under other rounding modes
        Case(build(NPU2, "i8", "i8", (2, 2, 1), True, rounding="sym_inf", saturation="symmetric", shift=8), True),
        Case(build(NPU1, "i8", "i8", (1, 3, 2), False, rounding="conv_even", saturation="saturate", shift=7), True),
        Case(build(NPU1, "i16", "i16", (2, 2, 1), True, rounding="floor", saturation="none", shift=12), True),
        Case(build(NPU2, "i8", "i16", (1, 2, 2), False, rounding="ceil", shift=1), True),
        Case(build(NPU1, "i16", "i32", (1, 2, 2), True, rounding="conv_odd", shift=4), True),  # acc64
        Case(build(NPU2, "i16", "i32", (2, 2, 1), False, rounding="pos_inf", shift=5), True),
        Case(build(NPU1, "bf16", "bf16", (1, 2, 2), True, rounding="floor")),
        Case(build(NPU2, "bf16", "bf16", (2, 2, 1), False, rounding="sym_zero")),
    ]
    # every expansion the registers allow (the loop structures differ only in hints, which the host
    # compiler drops: test_loop_hints_for_chess_peano_and_host checks those; each is compiled anyway)
    for dev in (NPU1, NPU2):
        for din, shapes in dev.mmul_shapes.items():
            for i, expansion in enumerate(kv.expansions(dev, din, shapes[0])):
                outs = dev.out_types[din]
                cases.append(Case(build(dev, din, outs[i % len(outs)], (2, 2, 2), bool(i % 2), expansion=expansion,
                                        loops=kv.LOOPS[(i + len(din)) % len(kv.LOOPS)])))
    # c-overlap (the peeled last k-step stores each chain's C and reloads the next cluster's) for
    # every type pair on both devices: several clusters per block row and several block rows, so
    # the reload crosses both a cluster and a row boundary
    for dev in (NPU1, NPU2):
        for i, (din, dout) in enumerate(PAIRS):
            cases.append(Case(build(dev, din, dout, (4, 3, 2), bool(i % 2), loops="c-overlap"), din != "bf16"))
    cases += [
        Case(build(NPU2, "bf16", "f32", (2, 2, 2), False, emulate=True, loops="c-overlap")),
        Case(build(NPU1, "i8", "i32", (2, 1, 2), True, loops="c-overlap")),  # one k-step: nothing pipelined
    ]
    cases += [  # asymmetric tile buffering: matmul updates one of rho slices of C
        Case(build(NPU1, "bf16", "bf16", (1, 2, 1), True, rho=3)),
        Case(build(NPU2, "i8", "i32", (2, 2, 2), False, rho=2, loops="c-overlap")),
        Case(build(NPU2, "i8", "i16", (1, 2, 2), False, rho=2, shift=3)),
        Case(build(NPU2, "bf16", "bf16", (1, 2, 1), False, emulate=True, rho=4)),
        Case(build(NPU1, "i16", "i32", (2, 1, 1), True, rho=2)),
    ]
    # column-major A (s x r blocks of A^T, transposed on load): every type pair on both devices, with
    # either B layout, and every other mmul shape once
    for dev in (NPU1, NPU2):
        for i, (din, dout) in enumerate(PAIRS):
            cases.append(Case(build(dev, din, dout, (2, 3, 2), bool(i % 2), a_col_maj=True)))
        for din, shapes in dev.mmul_shapes.items():
            for i, shape in enumerate(shapes[1:]):
                cases.append(Case(build(dev, din, din, (2, 2, 1), bool(i % 2), mmul=shape, a_col_maj=True)))
    cases += [
        Case(build(NPU2, "bf16", "bf16", (1, 2, 2), True, emulate=True, a_col_maj=True)),
        Case(build(NPU2, "i8", "i32", (2, 2, 2), False, rho=2, loops="c-overlap", a_col_maj=True)),
        Case(build(NPU1, "bf16", "bf16", (1, 2, 1), True, rho=3, a_col_maj=True)),
    ]
    return cases + _wide_cases() + _c_col_maj_cases()


NARROW_PAIRS = [(din, dout) for din, dout in PAIRS if dtype(dout).bytes < 4]


def _c_col_maj_cases() -> list[Case]:
    """Column-major C below 32 bits (C's r x t blocks stored transposed, and transposed back on
    reload): every narrow type pair on both devices, with both loop structures that reload C (the
    plain one and c-overlap), C kept in its own type and accumulated wide (the conversion stores
    transposed), every other mmul shape once, rho slices, bf16 via bfp16 and column-major A and B."""
    cases = []
    for dev in (NPU1, NPU2):
        for i, (din, dout) in enumerate(NARROW_PAIRS):
            hot = din != "bf16"
            cases += [Case(build(dev, din, dout, (2, 3, 2), bool(i % 2), loops="k-pipelined", c_col_maj=True), hot),
                      Case(build(dev, din, dout, (4, 3, 2), not i % 2, loops="c-overlap", c_col_maj=True), hot),
                      Case(build(dev, din, dout, (1, 3, 2), bool(i % 2), wide=True, c_col_maj=True), hot)]
        for din, shapes in dev.mmul_shapes.items():
            for i, shape in enumerate(shapes[1:]):
                if dtype(din).bytes < 4:
                    cases.append(Case(build(dev, din, din, (2, 2, 1), bool(i % 2), mmul=shape, c_col_maj=True)))
    cases += [
        Case(build(NPU2, "bf16", "bf16", (1, 2, 2), True, emulate=True, c_col_maj=True)),
        Case(build(NPU2, "bf16", "bf16", (2, 2, 2), False, emulate=True, loops="c-overlap", wide=True, c_col_maj=True)),
        Case(build(NPU1, "i8", "i8", (1, 2, 1), True, rho=3, shift=5, c_col_maj=True), True),
        Case(build(NPU2, "i16", "i16", (1, 2, 1), False, rho=2, shift=9, wide=True, c_col_maj=True), True),
        Case(build(NPU1, "bf16", "bf16", (2, 3, 2), True, a_col_maj=True, c_col_maj=True)),
        Case(build(NPU2, "i8", "i8", (2, 2, 2), True, rho=2, loops="c-overlap", a_col_maj=True, c_col_maj=True), True),
    ]
    return cases


# an i8 C accumulated in int32: the object's bytes hold 6 of 24 4 x 8 blocks, one and a half block rows
SPLIT_MID_ROW = Case(build(NPU1, "i8", "i8", (1, 2, 2), False, rho=3, wide=True), True)


def _wide_cases() -> list[Case]:
    """C accumulated in the kernel's accumulator type (the default): every output narrower than it on
    both devices and B layouts, with shifts, rho slices on both sides of the split and full-range inputs."""
    cases = []
    for dev in (NPU1, NPU2):
        for din, dout in PAIRS:
            if wide_acc(dout, dev.acc_bits(din, dev.mmul_shape(din))) == dout:
                continue  # C already in the accumulator's type: nothing to convert
            cases += [Case(build(dev, din, dout, (2, 2, 1), False, wide=True), din != "bf16"),
                      Case(build(dev, din, dout, (1, 3, 2), True, wide=True))]
    cases += [
        Case(build(NPU2, "bf16", "bf16", (1, 2, 2), True, emulate=True, wide=True)),
        Case(build(NPU2, "bf16", "bf16", (1, 2, 1), False, emulate=True, rho=4, wide=True)),
        Case(build(NPU1, "i8", "i8", (1, 2, 1), True, rho=4, shift=9, rounding="sym_inf", wide=True), True),
        Case(build(NPU2, "i16", "i16", (1, 2, 2), False, rho=2, shift=12, saturation="symmetric", wide=True), True),
        Case(build(NPU1, "i16", "i32", (1, 2, 1), False, rho=3, shift=7, rounding="floor", wide=True), True),
        Case(build(NPU1, "i8", "i16", (2, 2, 2), True, expansion=(4, 2), loops="jk-flat", wide=True), True),
        # c-overlap on a C accumulated wide: reloads across the split between the object and C_acc
        Case(build(NPU1, "i8", "i8", (4, 2, 2), False, loops="c-overlap", wide=True), True),
        Case(build(NPU2, "i16", "i16", (2, 3, 2), True, rho=2, shift=6, loops="c-overlap", wide=True), True),
        Case(build(NPU2, "bf16", "bf16", (2, 2, 2), True, emulate=True, loops="c-overlap", wide=True)),
        Case(build(NPU1, "bf16", "bf16", (2, 2, 1), False, rounding="floor", wide=True)),
        # the split inside a block row (spec/rules/l1.c_split_blocks keeps whole r x t blocks), slice 0 across it
        SPLIT_MID_ROW,
        Case(build(NPU2, "i16", "i16", (1, 2, 2), True, rho=3, shift=5, wide=True, loops="k-pipelined"), True),
    ]
    return cases


CASES = _cases()
MAIN = [c for c in CASES if not c.build.emulate_bf16_with_bfp16]
EMULATED = [c for c in CASES if c.build.emulate_bf16_with_bfp16]
# kernels that must fail: a bf16 kernel without its set_rounding call
_BF16 = build(NPU1, "bf16", "bf16", (1, 2, 2), False)
NO_ROUNDING = Case(_BF16, patches=(("  aie::set_rounding(aie::rounding_mode::conv_even);\n", ""),),
                   mutant="no-rounding")
# an ATB kernel that ignores its slice argument
_ATB = build(NPU2, "i8", "i32", (1, 2, 1), False, rho=2)
NO_SLICE = Case(_ATB, patches=(("C + slice * gemm_gen_kernel::T_MA", "C + 0 * slice * gemm_gen_kernel::T_MA"),),
                mutant="no-slice")
# c-overlap kernels that must fail: the next cluster's C reloaded before this one's is stored (the
# store then writes the next cluster's old values), and the reload never moving to the next block row
_OVERLAP = build(NPU1, "i8", "i32", (4, 2, 2), False, loops="c-overlap")  # 2 x 2 clusters of 4x2
_STORE_C00 = "      store_c(pC + ((z + 0) * COL_BLOCKS + j + 0) * MMUL::size_C, C00);\n"
_RELOAD_C00 = "      C00 = load_c(pC + ((zn + 0) * COL_BLOCKS + jn + 0) * MMUL::size_C);\n"
OVERLAP_MUTANTS = {
    Case(_OVERLAP, patches=((_STORE_C00 + _RELOAD_C00, _RELOAD_C00 + _STORE_C00),),
         mutant="reload-before-store"): "elements differ",
    Case(_OVERLAP, patches=(("const unsigned zn = row_end && !last ? z + ER : z,", "const unsigned zn = z,"),),
         mutant="reload-same-row"): "elements differ",
}


# ---- bfp16 precisions (npu2, mac_8x8_8x8T on 8 x 8 tiles, chess) --------------------------------
def block_build(a: str, out: str, acc: str | None = None, blocks: tuple[int, int, int] = (1, 2, 1),
                b_col_maj: bool = False, rho: int = 1, rounding: str = "conv_even", a_col_maj: bool = False,
                c_col_maj: bool = False) -> KernelBuild:
    """A bfp16 KernelBuild (A bf16 or bfp16, B bfp16) whose A tile is `blocks` (16, 8, 16) units:
    T_MA = 16 blocks[0], k = 8 blocks[1], n = 16 blocks[2]; C has rho A tiles. a_col_maj: a bf16 A
    arrives in blocks of A^T; c_col_maj: a bf16 C's blocks are kept transposed (config.c_t_blocks)."""
    m, k, n = 16 * blocks[0] * rho, 8 * blocks[1], 16 * blocks[2]
    return KernelBuild(NPU2.aie_target, Types.of(a, out, BFP16, acc), m, k, n, (8, 8, 8), b_col_maj, False, rounding,
                       "saturate", 0, "chess", rho, a_col_maj=a_col_maj, c_col_maj=c_col_maj)


# column-major A (bf16, converted in the core) and C (bf16 blocks transposed; an f32 C keeps its blocks,
# the memtile gathers its columns): config1's C kept in bf16 between calls, a bf16 C converted once
# from f32, rho slices, K_TILES odd and past the unrolled loop
BLOCK_LAYOUT_BUILDS = [
    block_build("bf16", "bf16", blocks=(1, 3, 2), a_col_maj=True),
    block_build("bf16", "bf16", blocks=(2, 2, 1), b_col_maj=True, rho=2, c_col_maj=True),
    block_build("bf16", "bf16", blocks=(1, 5, 1), rho=3, a_col_maj=True, c_col_maj=True, rounding="floor"),
    block_build("bf16", "bf16", "f32", blocks=(1, 2, 1), rho=4, c_col_maj=True),  # slices 0, 1 in the object
    block_build("bf16", "bf16", "f32", blocks=(2, 3, 1), b_col_maj=True, a_col_maj=True, c_col_maj=True),
    block_build(BFP16, "bf16", "f32", blocks=(1, 4, 2), rho=2, c_col_maj=True),
    block_build("bf16", "f32", blocks=(2, 3, 1), rho=2, a_col_maj=True),
    block_build("bf16", "bf16", blocks=(1, 17, 1), a_col_maj=True, c_col_maj=True),
]


SPLIT_MID_PAIR = block_build("bf16", "bf16", "f32", blocks=(1, 2, 1), rho=3)  # 6 of 12 blocks in the object


def _block_cases() -> list[Case]:
    c1, c2, c3 = PRESETS["config1"], PRESETS["config2"], PRESETS["config3"]
    builds = [
        # config1: bf16 A converted in the core, bf16 C
        block_build(c1.a, c1.out, blocks=(1, 2, 2)),
        block_build(c1.a, c1.out, blocks=(1, 3, 1), b_col_maj=True, rho=4),
        block_build(c1.a, c1.out, blocks=(2, 4, 1), b_col_maj=True, rounding="floor"),
        # config2: bfp16 C requantized every call
        block_build(c2.a, c2.out, blocks=(2, 2, 1), b_col_maj=True),
        block_build(c2.a, c2.out, blocks=(1, 1, 2), rho=3),
        block_build(c2.a, c2.out, blocks=(1, 5, 1), b_col_maj=True, rho=2, rounding="pos_inf"),
        # config3: bf16 accumulator split between the C object and C_acc, converted after the last call
        block_build(c3.a, c3.out, c3.acc, blocks=(1, 2, 1), rho=4),  # slices 0, 1 in the object, 2, 3 in C_acc
        block_build(c3.a, c3.out, c3.acc, blocks=(2, 4, 1), b_col_maj=True),  # one slice across the split
        block_build(c3.a, c3.out, c3.acc, blocks=(1, 3, 2), b_col_maj=True, rho=3, rounding="sym_inf"),
        # the free combinations precision.check_precision accepts
        block_build(BFP16, "bf16", blocks=(1, 2, 1), b_col_maj=True),
        block_build(BFP16, "f32", blocks=(1, 2, 2), rho=2),
        block_build("bf16", "f32", blocks=(2, 3, 1), b_col_maj=True, rho=2),
        block_build("bf16", BFP16, blocks=(1, 2, 1)),
        block_build("bf16", BFP16, blocks=(1, 4, 1), b_col_maj=True, rho=2),
        block_build("bf16", BFP16, "bf16", blocks=(1, 2, 1), b_col_maj=True, rho=4),
        block_build("bf16", BFP16, "f32", blocks=(2, 2, 1), rho=2),
        block_build(BFP16, BFP16, "f32", blocks=(2, 2, 1), b_col_maj=True),  # all rows in C_acc
        block_build(BFP16, BFP16, "f32", blocks=(1, 3, 1), rho=4),
        # bf16 C accumulated in f32 and rounded once (the default accumulator of a bf16 C)
        block_build("bf16", "bf16", "f32", blocks=(1, 2, 1), rho=4),  # slices 0, 1 in the object
        block_build("bf16", "bf16", "f32", blocks=(2, 3, 1), b_col_maj=True, rounding="floor"),
        block_build(BFP16, "bf16", "f32", blocks=(1, 4, 2), b_col_maj=True, rho=2),
        # column-major B: K_TILES 1, even and odd, 2-3 clusters (the B stream's column pairs one after another)
        block_build(c2.a, c2.out, blocks=(2, 1, 3), b_col_maj=True),
        block_build(c1.a, c1.out, blocks=(1, 4, 3), b_col_maj=True, rho=2),
        block_build(BFP16, "f32", blocks=(2, 7, 2), b_col_maj=True),
        # K_TILES past rules.block_loop.UNROLL_K_TILES: a pipelined k loop inside the block loop, odd (peeled) and even
        block_build(c2.a, c2.out, blocks=(1, 17, 2), rho=2),
        block_build(c3.a, c3.out, c3.acc, blocks=(2, 18, 1), b_col_maj=True),
        # the split between the two tile rows of a row pair (an f32 accumulator of a bf16 C), slice 1 across it
        SPLIT_MID_PAIR,
        # the split inside a row pair, between its 16 x 16 blocks (an f32 accumulator of a bfp16 C), slice 0 across it
        block_build(BFP16, BFP16, "f32", blocks=(1, 2, 3), rho=2),
    ]
    return [Case(b) for b in builds]


BLOCK_CASES = _block_cases()
_CONFIG1 = BLOCK_CASES[0].build
_CONFIG2 = BLOCK_CASES[3].build
_CONFIG3 = BLOCK_CASES[6].build
# a config1 kernel that multiplies whatever the A scratch holds instead of converting A
NO_A_CONVERSION = Case(_CONFIG1, patches=(
    ("  gemm_gen_kernel::convert_a(A, A_bfp16);  // the whole A tile, once per call\n", "  (void)A;\n"),),
    mutant="no-a-conversion")
# a config3 kernel that keeps every accumulator row in the C object, past its end
NO_SPLIT = Case(_CONFIG3, patches=(
    ("    return t < SPLIT_TILES ? obj + t * LANES : buf + (t - SPLIT_TILES) * LANES;\n",
     "    return obj + t * LANES;\n"),), mutant="no-split")
# a config3 conversion that writes the last tile first: in place, it overwrites unread blocks
REVERSED_CONVERT = Case(_CONFIG3, patches=(
    ("  TileOutC out(c);\n", ""),
    ("  for (unsigned t = 0; t < TILE_M * TILE_N / LANES; ++t)",
     "  for (unsigned t = TILE_M * TILE_N / LANES; t-- > 0;)"),
    ("    out.push(block.template to_vector<bfp16ebs8>());\n",
     "    TileOutC out(c);\n    out.seek(static_cast<int>(t));\n"
     "    out.push(block.template to_vector<bfp16ebs8>());\n"),
), mutant="reversed-convert")
# a kernel whose B stream starts a column pair at K_TILES tiles per pair (as if the pair's two tiles
# were one column each) instead of the super-block's 2 K_TILES: from the second pair on it reads another's
B_PAIR_OFFSET = Case(BLOCK_CASES[-4].build, patches=(
    ("TileInB bs(tile_at(pB, bc * B_PAIR));", "TileInB bs(tile_at(pB, bc * K_TILES));"),), mutant="b-pair-offset")
# a kernel whose A stream starts a row pair at K_TILES tiles per pair (as if the pair's two tiles were one
# row each) instead of the super-block's 2 K_TILES: from the second row pair on it reads another's
A_PAIR_OFFSET = Case(BLOCK_CASES[-3].build, patches=(
    ("TileInA as_(tile_at(pA, br * A_PAIR));", "TileInA as_(tile_at(pA, br * K_TILES));"),), mutant="a-pair-offset")
# a config1 conversion that writes A_bfp16 in the order its bf16 blocks lie (row-major tiles), not the
# 2 x 1 super-blocks the A stream reads
A_BLOCK_ORDER = Case(_CONFIG1, patches=(
    ("    const unsigned mb = i / A_PAIR * 2 + i % 2, kb = i / 2 % K_TILES;",
     "    const unsigned mb = i / K_TILES, kb = i % K_TILES;"),), mutant="a-block-order")
# a config2 kernel that stores a 16 x 16 block's two top tiles swapped (inside a 2 x 2 super-block)
C_TILE_SWAP = Case(_CONFIG2, patches=(
    ("    cout.push(c00.template to_vector<bfp16ebs8>());\n    cout.push(c01.template to_vector<bfp16ebs8>());\n",
     "    cout.push(c01.template to_vector<bfp16ebs8>());\n    cout.push(c00.template to_vector<bfp16ebs8>());\n"),),
    mutant="c-tile-swap")
# a config2 kernel whose prefetch reads a block's bottom tiles into the top accumulators (from the
# second k-step on, C seeds the wrong accumulators)
C_PREFETCH_SWAP = Case(BLOCK_CASES[4].build, patches=(
    ("      c0 = cin.pop();\n      c1 = cin.pop();\n      c2 = cin.pop();\n      c3 = cin.pop();\n",
     "      c2 = cin.pop();\n      c3 = cin.pop();\n      c0 = cin.pop();\n      c1 = cin.pop();\n"),),
    mutant="c-prefetch-swap")
# a config2 kernel that walks its blocks as if C were row-major tiles (block b at tile 2 b, 2 tiles a row)
C_ROW_MAJOR = Case(BLOCK_CASES[4].build, patches=(
    ("  return tile_at(slice, 4 * (br * COL_PAIRS + bc));", "  return tile_at(slice, 2 * (br * COL_TILES + bc));"),),
    mutant="c-row-major")
# a config3 kernel whose accumulator is row-major blocks while its conversion reads 2 x 2 super-blocks
C_ACC_ROW_MAJOR = Case(BLOCK_CASES[8].build, patches=(
    ("constexpr unsigned C_ROW1 = 2 * LANES;", "constexpr unsigned C_ROW1 = COL_TILES * LANES;"),
    ("constexpr unsigned C_PAIR = 4 * LANES;", "constexpr unsigned C_PAIR = 2 * LANES;")), mutant="c-acc-row-major")
C_MUTANTS = [C_TILE_SWAP, C_PREFETCH_SWAP, C_ROW_MAJOR, C_ACC_ROW_MAJOR]
# column-major layouts: the A conversion without its transpose, config1's C stored or reloaded
# untransposed, and the final conversion of a bf16 C storing its blocks untransposed
_A_LOAD = "aie::load_v<LANES>(a + (mb * K_TILES + kb) * LANES)"
_C_STORE = "    aie::store_v(q, aie::transpose(v, Q, Q));"
_C_LOAD = "    return aie::transpose(aie::load_v<LANES>(q), Q, Q);"
_C_CONVERT = "aie::store_v(c + t * LANES, aie::transpose(block.template to_vector<T_C>(), Q, Q));"
LAYOUT_MUTANTS = [
    Case(BLOCK_LAYOUT_BUILDS[0], patches=((f"aie::transpose({_A_LOAD}, Q, Q)", _A_LOAD),), mutant="a-untransposed"),
    Case(BLOCK_LAYOUT_BUILDS[1], patches=((_C_STORE, "    aie::store_v(q, v);"),), mutant="c-store-untransposed"),
    Case(BLOCK_LAYOUT_BUILDS[1], patches=((_C_LOAD, "    return aie::load_v<LANES>(q);"),),
         mutant="c-reload-untransposed"),
    Case(BLOCK_LAYOUT_BUILDS[3],
         patches=((_C_CONVERT, "aie::store_v(c + t * LANES, block.template to_vector<T_C>());"),),
         mutant="c-convert-untransposed"),
]
BLOCK_CASES += [Case(b) for b in BLOCK_LAYOUT_BUILDS]  # after the mutants that index the list from its end
# a kernel that takes a 16 x 16 block's bottom tiles to lie beside its top ones although the split falls between
# them (the whole row pair addressed through one pointer, as before block splits)
PAIR_SPLIT = Case(SPLIT_MID_PAIR, patches=((
    "  return acc_tile(obj, buf, tile0 + br * 2 * COL_TILES + bc * (C_PAIR / LANES) + C_ROW1 / LANES);\n",
    "  return c_top(obj, buf, tile0, br, bc) + C_ROW1;\n"),), mutant="pair-split")
BLOCK_MUTANTS = [NO_A_CONVERSION, NO_SPLIT, PAIR_SPLIT, REVERSED_CONVERT, B_PAIR_OFFSET, A_PAIR_OFFSET, A_BLOCK_ORDER,
                 *C_MUTANTS, *LAYOUT_MUTANTS]

# scalar kernels with C in a wide accumulator: one that ignores the split (accumulator rows past the
# C object), one that converts backwards (in place it overwrites blocks not read yet), one that
# narrows C every call as --acc out does but still converts (the sums saturate or round early)
_WIDE = build(NPU1, "i8", "i8", (1, 2, 1), True, rho=4, shift=9, rounding="sym_inf", wide=True)
_WIDE_I16 = build(NPU2, "i16", "i32", (2, 2, 1), False, wide=True)
# a kernel that splits its accumulator at whole block rows (the old rule) while C_acc holds only the blocks past
# the block split: the blocks of the split's row past it push the rest beyond C_acc's end
_ACC_BLOCK_AT = "    return blk < SPLIT_BLOCKS ? obj + blk * ACC_BLOCK : buf + (blk - SPLIT_BLOCKS) * ACC_BLOCK;\n"
ROW_SPLIT = Case(SPLIT_MID_ROW.build, patches=((
    _ACC_BLOCK_AT,
    "    return blk < SPLIT_BLOCKS / COL_BLOCKS * COL_BLOCKS ? obj + blk * ACC_BLOCK\n"
    "        : buf + (blk - SPLIT_BLOCKS / COL_BLOCKS * COL_BLOCKS) * ACC_BLOCK;\n"),), mutant="row-split", hot=True)
WIDE_MUTANTS = {
    ROW_SPLIT: "wrote outside",
    Case(_WIDE, patches=((_ACC_BLOCK_AT, "    return obj + blk * ACC_BLOCK;\n"),),
         mutant="wide-no-split", hot=True): "wrote outside its C tile",
    Case(_WIDE, patches=(("for (unsigned b = 0; b < C_BLOCKS; ++b)", "for (unsigned b = C_BLOCKS; b-- > 0;)"),),
         mutant="wide-reversed-convert", hot=True): "elements differ",
    Case(_WIDE_I16, patches=(("  aie::store_v(p, aie::vector_cast<int32>(acc.to_accum()));  // acc64 lanes -> "
                              "int32 pairs",
                              "  aie::store_v(p, acc.template to_vector<int32>());  // saturated to int32"),
                             ("  return MMUL(aie::vector_cast<acc64>(aie::load_v<ACC_WORDS * MMUL::size_C>(p)));"
                              "  // int32 pairs -> acc64 lanes",
                              "  return MMUL(aie::load_v<MMUL::size_C>(p));"),),
         mutant="wide-int32-between-calls"): "elements differ",
}

# ---- bf16 converted once (npu2): the same bits as the AIE API's per-mmul bfp16 emulation ----------
def once_pair(dout: str, blocks: tuple[int, int, int], b_col_maj: bool, rho: int = 1, rounding: str = "conv_even",
              per_mac: bool = False, a_col_maj: bool = False, c_col_maj: bool = False) -> tuple[Case, Case]:
    """(the emulated kernel, the convert-once kernel) of one tile; per_mac: the host rounds fp32 lanes
    after every mac, so the two agree only if they issue the same macs in the same order."""
    # the emulated twin keeps the structure the convert-once kernel has (K loop pipelined, no peeling)
    emulated = build(NPU2, "bf16", dout, blocks, b_col_maj, emulate=True, rounding=rounding, rho=rho,
                     loops="k-pipelined", a_col_maj=a_col_maj, c_col_maj=c_col_maj)
    defines = ("-DGG_HOST_FP32_PER_MAC",) if per_mac else ()
    return (Case(emulated, host_defines=defines),
            Case(replace(emulated, convert_once=True, compiler="chess"), host_defines=defines))


ONCE_PAIRS = [  # per_mac pairs write f32, whose last bits show a different mac order
    once_pair("bf16", (1, 2, 2), False), once_pair("bf16", (2, 3, 1), True),
    once_pair("f32", (1, 4, 1), False, per_mac=True), once_pair("f32", (2, 5, 2), True, per_mac=True),
    once_pair("f32", (1, 4, 1), False, rho=3, per_mac=True), once_pair("f32", (1, 3, 2), True, rho=2),
    once_pair("f32", (1, 4, 2), True, rounding="floor", per_mac=True), once_pair("bf16", (1, 3, 1), False, rho=2),
    # column-major A (blocks of A^T transposed before the conversion) and bf16 C (blocks stored transposed)
    once_pair("bf16", (1, 2, 2), False, a_col_maj=True, c_col_maj=True), once_pair("bf16", (2, 3, 1), True, rho=2,
                                                                                     c_col_maj=True),
    once_pair("f32", (2, 3, 1), True, per_mac=True, a_col_maj=True),
]
# a convert-once kernel that forgets to transpose a row-major B block, one that writes B_bfp16 in its
# blocks' order, and one that converts B only at the tile's first k-step
_ONCE_ROW = ONCE_PAIRS[0][1].build
_ONCE_ATB = ONCE_PAIRS[4][1].build
ONCE_MUTANTS = [
    Case(_ONCE_ROW, patches=(("aie::transpose(aie::load_v<LANES>(b + (kb * COL_TILES + nb) * LANES), Q, Q);",
                              "aie::load_v<LANES>(b + (kb * COL_TILES + nb) * LANES);"),), mutant="no-b-transpose"),
    # a conversion that writes B_bfp16 in the order its blocks lie (not the 1 x 2 super-blocks it is read in)
    Case(_ONCE_ROW, patches=(("    const unsigned kb = i / 2 % K_TILES, nb = i / B_PAIR * 2 + i % 2;",
                              "    const unsigned kb = i / COL_TILES, nb = i % COL_TILES;"),), mutant="b-block-order"),
    Case(_ONCE_ATB, patches=(("  if (slice == 0)\n", "  if (slice == 0 && A_bfp16 == nullptr)\n"),),
         mutant="b-never-converted", host_defines=("-DGG_HOST_FP32_PER_MAC",)),
]


# ---- kernels the real AIE API or the hardware would not run as written: the host must refuse them ----
_I8_I32 = build(NPU1, "i8", "i32", (1, 2, 2), False, loops="k-pipelined")  # C stays in acc32
_I16_ACC32 = build(NPU1, "i16", "i32", (1, 2, 1), False, mmul=(4, 2, 8))  # int16 with a 32-bit accumulator
_BF16_NPU2 = build(NPU2, "bf16", "bf16", (1, 2, 2), False, loops="k-pipelined")
# B^T blocks, transposed by aie::transpose
_BF16_COL = build(NPU1, "bf16", "bf16", (1, 2, 2), True, loops="k-pipelined")
FIFO_LIMIT = "-DGEMM_GEN_HOST_FIFO_LIMIT"  # the host refuses more live block-vector streams than FIFOs (below)
# column-major C: the store's and the reload's transposes
_CCOL_BF16 = build(NPU1, "bf16", "bf16", (2, 3, 2), False, loops="k-pipelined", c_col_maj=True)
_CCOL_STORE = "aie::store_v(p, aie::transpose(acc.template to_vector<T_out>(SHIFT), MMUL::M, MMUL::N));"
_CCOL_LOAD = "return MMUL(aie::transpose(aie::load_v<MMUL::size_C>(p), MMUL::N, MMUL::M), SHIFT);"
C_COL_MAJ_MUTANTS = {  # (device, pair) -> the k-pipelined kernel storing, and reloading, C blocks untransposed
    (dev.name, pair, what): Case(build(dev, *pair, (2, 3, 2), bool(i % 2), loops="k-pipelined", c_col_maj=True),
                                 patches=((old, new),), mutant=f"c-{what}-untransposed")
    for dev in (NPU1, NPU2) for i, pair in enumerate(NARROW_PAIRS)
    for what, old, new in (("store", _CCOL_STORE, "aie::store_v(p, acc.template to_vector<T_out>(SHIFT));"),
                           ("reload", _CCOL_LOAD, "return MMUL(aie::load_v<MMUL::size_C>(p), SHIFT);"))}
HOST_MUTANTS = {  # mutant -> what the host says (a compile error, or a refusal recorded during the call)
    Case(_I8_I32, patches=(("aie::store_v(p, acc.template to_vector<T_out>(SHIFT));",
                            "aie::store_v(p, acc.template to_vector<T_out>(3));"),),
         mutant="acc32-store-shift"): "acc32 is stored as int32 with a plain cast that ignores the shift",
    Case(_I8_I32, patches=(("    return MMUL(aie::load_v<MMUL::size_C>(p), SHIFT);",
                            "    return MMUL(aie::load_v<MMUL::size_C>(p), 3);"),),
         mutant="acc32-load-shift"): "an int32 vector loads into acc32 only with shift 0",
    Case(_BF16_NPU2, patches=(("load_a(pA0);", "load_a(pA0 + 1);"),),
         mutant="unaligned-load"): "load_v of a 64-byte vector at an address 2 bytes past a 64-byte boundary",
    Case(_CONFIG2, patches=(("    Acc c00(c0), c01(c1), c10(c2), c11(c3);\n",
                             "    Acc c00 = c0, c01 = c1, c10 = c2, c11 = c3;\n"),),
         mutant="implicit-accum"): "g++ failed",
    Case(_CONFIG2, patches=(("      c1 = cin.pop();\n", "      c1 = cin.pop();\n      cin.seek(0);\n"),),
         mutant="seek-after-pop"): "seek() after a pop on a block-vector input stream",
    # the block's A and B streams still in scope when the next block's C is prefetched: three load FIFOs
    Case(_CONFIG2, patches=(("    Acc c00(c0), c01(c1), c10(c2), c11(c3);\n    {\n",
                             "    Acc c00(c0), c01(c1), c10(c2), c11(c3);\n"),
                            ("    }  // the A and B streams end here\n", "")),
         mutant="c-prefetch-beside-a-and-b"):
        "3 block-vector input streams hold a load FIFO at once, over the limit of 2",
    Case(_BF16_COL, patches=(("aie::transpose(aie::load_v<MMUL::size_B>(p), MMUL::N, MMUL::K)",
                              "aie::transpose(aie::load_v<MMUL::size_B>(p), 2 * MMUL::N, MMUL::K)"),),
         mutant="transpose-shape"): "the AIE API requires Row * Col == Elems",
    Case(_CCOL_BF16, patches=((_CCOL_STORE, _CCOL_STORE.replace("MMUL::M, MMUL::N", "MMUL::M, 2 * MMUL::N")),),
         mutant="c-transpose-shape"): "the AIE API requires Row * Col == Elems",
}
# ---- the load / store FIFO limit (issue 20 item 3) ----------------------------------------------------
# -DGEMM_GEN_HOST_FIFO_LIMIT: the host refuses a kernel whose block-vector streams hold more load FIFOs
# (input streams popped and still in scope) or store FIFOs (output streams pushed to) at once than the
# target has (tests/aie_host/aie_api/aie.hpp host::fifo_limits). Every kernel case is held to it
# (host_defines); BFP16_FIFO_VARIANTS also names each bfp16 variant's measured peaks.
# each bfp16 variant with the limit on -> the most (input, output) streams that hold a FIFO at once
BFP16_FIFO_VARIANTS: dict[str, tuple[Case, tuple[int, int]]] = {
    "config1": (Case(_CONFIG1), (2, 1)),
    "config2": (Case(BLOCK_CASES[4].build), (2, 1)),  # row-major B
    "config2-col-maj-b": (Case(_CONFIG2), (2, 1)),
    "config3": (Case(_CONFIG3), (2, 1)),
    "convert-once": (Case(ONCE_PAIRS[0][1].build), (2, 1)),
    "bfp16-x-bfp16": (Case(BLOCK_CASES[16].build), (2, 1)),
}

# ---- acc64 lanes kept as int32 pairs between calls (issue 31 item 10) ---------------------------------------
# store_acc writes aie::vector_cast<int32>(mmul.to_accum()) and load_acc casts it back: a round trip of the whole
# block, right whatever word order the cast has (unpublished). Every such kernel runs again with the host's order
# permuted (-DGG_HOST_ACC64_PERMUTED).
ACC64_PERMUTED = "-DGG_HOST_ACC64_PERMUTED"
ACC64_CASES = [Case(c.build, c.hot, host_defines=(ACC64_PERMUTED,)) for c in CASES
               if c.build.types.precision.acc == "i64"]

# ---- load FIFO fills (issue 31 item 11b): the A and B streams of a bfp16 kernel, counted on the host ----------
# -DGG_HOST_PEANO: aie_api's pop() fills the FIFO `if (!chess_manifest(load_count_ != 0))`, and Peano's
# chess_manifest is __builtin_constant_p, so a pop whose count is carried around a rolled loop fills every time
# (tests/aie_host/aie_api/aie.hpp host::loop_epoch). bfp16 A, f32 C: only the A and B streams pop.
PEANO = "-DGG_HOST_PEANO"
STREAM_BUILDS = {"k-steps written out": block_build(BFP16, "f32", blocks=(1, 4, 1)),
                 "k loop inside the block loop": block_build(BFP16, "f32", blocks=(2, 17, 1))}
STREAM_CASES = {(name, defines): Case(b, host_defines=defines)
                for name, b in STREAM_BUILDS.items() for defines in ((), (PEANO,))}

ALL = [*CASES, Case(_ATB), NO_ROUNDING, NO_SLICE, *STREAM_CASES.values(), *ACC64_CASES, Case(_OVERLAP),
       *OVERLAP_MUTANTS, *BLOCK_CASES, *BLOCK_MUTANTS,
       *WIDE_MUTANTS, Case(_I16_ACC32), *HOST_MUTANTS, *C_COL_MAJ_MUTANTS.values(),
       *(Case(m.build) for m in HOST_MUTANTS),
       *(case for pair in ONCE_PAIRS for case in pair), *ONCE_MUTANTS,
       *(case for case, _ in BFP16_FIFO_VARIANTS.values())]


# ---- compiling and loading ---------------------------------------------------------------------
PER_MAC = "-DGG_HOST_FP32_PER_MAC"  # fp32 accumulators rounded after every mac (numerics' fp32_per_mac)


def float_build(b: KernelBuild) -> bool:
    """A kernel whose accumulators are fp32 (bf16 or bfp16 inputs)."""
    return dtype(b.types.precision.a).is_float


def host_defines(b: KernelBuild) -> tuple[str, ...]:
    """The build's own defines, the target the host stand-in models (__AIE_ARCH__ 20 or 21), the FIFO limit
    (every kernel, scalar or bfp16, is held to the target's load and store FIFOs) and, for fp32 accumulators,
    the per-mac rounding (issue 31 item 11a: the mac order and each mac's rounding show in C)."""
    return (*kernel_defines(b), f"-D__AIE_ARCH__={render_module.AIE_ARCH[b.aie_target]}", FIFO_LIMIT,
            *((PER_MAC,) if float_build(b) else ()))


def mac_products(b: KernelBuild) -> int:
    """Products one of the build's macs adds per lane before its fp32 rounding (numerics.fused_mac_products)."""
    return fused_mac_products(b.aie_target, b.types.precision.a, b.mmul,
                              b.emulate_bf16_with_bfp16 or b.types.precision.block or b.convert_once)


def compile_library(source: str, defines: tuple[str, ...]) -> Path:
    """Compile a rendered kernel plus the host probe into a shared library, cached by content."""
    lib = host_compile.compile_library(source, defines)
    assert lib is not None  # it waits for a compile another worker started
    return lib


def compile_all(cases: list[Any]) -> dict[str, Path | BaseException]:
    """Every case's kernel (a `source`, a `build`, an `id`, optional `host_defines`), compiled once in
    parallel (shared with other pytest workers); a failure is kept for the test that needs
    that kernel."""
    if CXX is None:
        pytest.skip("g++ not found: the host kernel checks need a C++20 g++")
    return host_compile.compile_all(cases, lambda case: (*host_defines(case.build),
                                                         *getattr(case, "host_defines", ())))


@pytest.fixture(scope="module")
def libraries() -> dict[str, Path | BaseException]:
    """Every kernel of ALL, compiled once (in parallel, shared with the other pytest workers)."""
    return compile_all(ALL)


class HostApiError(AssertionError):
    """The kernel asked the host AIE API for something the real API or the hardware would not do."""


class Kernel:
    """A loaded kernel library: its kernels (zero, matmul, convert when C is converted) and the
    host's emulated mode registers."""

    def __init__(self, path: Path, b: KernelBuild) -> None:
        self.lib = ctypes.CDLL(str(path))
        self.build = b
        p = b.types.precision
        zero_name, matmul_name = kernel_symbols(b)
        self.zero_fn = getattr(self.lib, zero_name)
        self.matmul_fn = getattr(self.lib, matmul_name)
        self.zero_fn.argtypes = [ctypes.c_void_p] * (1 + p.converts_c)
        scratch = 2 if b.convert_once else int(p.converts_a)  # A (and B) bfp16 copies
        self.matmul_fn.argtypes = ([ctypes.c_void_p] * (3 + scratch + p.converts_c)
                                   + ([ctypes.c_int32] if b.rho > 1 else []))
        self.convert_fn = None
        if p.converts_c:
            self.convert_fn = getattr(self.lib, b.symbols["convert"])
            self.convert_fn.argtypes = [ctypes.c_void_p] * 2
        for fn in (self.lib.gg_host_set_rounding, self.lib.gg_host_set_saturation):
            fn.argtypes = [ctypes.c_uint]
        self.lib.gg_host_get_rounding.restype = ctypes.c_uint
        self.lib.gg_host_get_saturation.restype = ctypes.c_uint
        self.lib.gg_host_error.restype = ctypes.c_char_p
        self.lib.gg_host_fifo_peak.argtypes = [ctypes.c_uint]
        self.lib.gg_host_fifo_peak.restype = ctypes.c_uint
        self.lib.gg_host_clear_error()

    def checked(self, fn: Any, *args: Any) -> None:
        """Call a kernel; what the host API refused during the call fails the test (HostApiError)."""
        fn(*args)
        error = self.lib.gg_host_error().decode()
        if error:
            self.lib.gg_host_clear_error()
            raise HostApiError(f"{self.build.object_file}: {error}")

    def fifo_peaks(self) -> tuple[int, int]:
        """The most (input, output) block-vector streams that held a FIFO at once since the last call."""
        peaks = int(self.lib.gg_host_fifo_peak(0)), int(self.lib.gg_host_fifo_peak(1))
        self.lib.gg_host_reset_fifo_peaks()
        return peaks

    def set_modes(self, rounding: Rounding, saturation: Saturation) -> None:
        self.lib.gg_host_set_rounding(int(rounding))
        self.lib.gg_host_set_saturation(int(saturation))

    def modes(self) -> tuple[Rounding, Saturation]:
        return Rounding(self.lib.gg_host_get_rounding()), Saturation(self.lib.gg_host_get_saturation())


def load(libraries: dict[str, Path | BaseException], case: Case) -> Kernel:
    lib = libraries[case.id]
    if isinstance(lib, BaseException):
        raise lib
    return Kernel(lib, case.build)


# ---- running one output tile -------------------------------------------------------------------
def _sentinel(host: np.dtype) -> int:
    """Guard value bits: a quiet NaN for floats (it poisons any sum that reads it), else a pattern.
    Bytes (bfp16 storage, also read as bf16 / f32 accumulator rows) are 0x80: as bf16 or f32 a tiny
    negative normal that any sum of products written over it changes (a NaN or a huge value would
    survive a misplaced read-modify-write unchanged); as a bfp16 tile, blocks of -4."""
    if host == np.uint8:
        return 0x80
    return {2: 0x7FC0, 4: 0x7FC00000}[host.itemsize] if host.kind in "fV" else 0x5A5A5A5A


class Guarded:
    """An L1 buffer of `size` elements with `guard` (default GUARD) sentinel elements on either side."""

    def __init__(self, size: int, host: np.dtype, guard: int = GUARD) -> None:
        self.host = np.dtype(host)
        self.uint = np.dtype(f"u{self.host.itemsize}")
        self.guard = guard
        # the body 64-byte aligned, as vector loads need (AIE2P 512-bit: 64 bytes)
        n = size + 2 * guard
        raw = np.empty(n * self.host.itemsize + ALIGN, dtype=np.uint8)
        skip = (-(raw.ctypes.data + guard * self.host.itemsize)) % ALIGN
        self.raw = raw  # keeps the memory alive
        self.bits = raw[skip:skip + n * self.host.itemsize].view(self.uint)
        self.bits[:] = _sentinel(self.host) & np.iinfo(self.uint).max
        self.size = size

    @property
    def body(self) -> np.ndarray:
        return self.bits[self.guard:self.guard + self.size].view(self.host)

    @property
    def ptr(self) -> int:
        return self.bits.ctypes.data + self.guard * self.host.itemsize

    def guards_intact(self) -> bool:
        ref = _sentinel(self.host) & np.iinfo(self.uint).max
        return bool(np.all(self.bits[:self.guard] == ref) and np.all(self.bits[self.guard + self.size:] == ref))


def numerics(b: KernelBuild, rounding: Rounding | None = None) -> KernelNumerics:
    mode = Rounding[b.rounding.upper()] if rounding is None else rounding
    dev = NPU1 if b.aie_target == NPU1.aie_target else NPU2
    return KernelNumerics.of(b.types.dtype_in, b.types.dtype_out, rounding=mode,
                             saturation=Saturation[b.saturation.upper()],
                             shift=b.shift, bfp16_inputs=b.emulate_bf16_with_bfp16,
                             acc_bits=dev.acc_bits(b.types.dtype_in, b.mmul), acc=b.types.precision.acc,
                             fp32_per_mac=float_build(b), mac_products=max(1, mac_products(b)))


def inputs(case: Case, seed: int = 0, family: str = "wide") -> list[tuple[np.ndarray, np.ndarray]]:
    """Two k-steps of A (m x k) and B (k x n), logical, from gemm_gen.facts.inputs ("wide" float inputs by
    default: the kernels' lossy conversions must show)."""
    b = case.build
    a, bb = make_inputs(b.m, 2 * b.k, b.n, b.types.dtype_in, "i32" if case.hot else b.types.dtype_out, seed=seed,
                        family=family)
    return [(a[:, i * b.k:(i + 1) * b.k], bb[i * b.k:(i + 1) * b.k]) for i in range(2)]


def run_tile(kernel: Kernel, steps: list[tuple[np.ndarray, np.ndarray]], b_col_maj: bool | None = None,
             modes: tuple[Rounding, Saturation] = (Rounding.FLOOR, Saturation.NONE),
             a_col_maj: bool | None = None, c_col_maj: bool | None = None) -> np.ndarray:
    """zero, then per k-step one matmul per A tile (rho of them, each T_MA rows, sharing the B
    tile as the ATB worker loop does), on L1 buffers in the kernel's layouts; returns C (m x n).

    b_col_maj (a_col_maj) overrides the layout B (A) is written in, c_col_maj the one C is read in (to prove a
    wrong layout is caught). `modes`
    are the mode registers the kernel finds (reset values by default) and must leave behind.
    """
    b = kernel.build
    r, s, t = b.mmul
    t_in, t_out = dtype(b.types.dtype_in), dtype(b.types.dtype_out)
    col_maj = b.b_col_maj if b_col_maj is None else b_col_maj
    a_col = b.a_col_maj if a_col_maj is None else a_col_maj
    kernel.set_modes(*modes)
    # starts as sentinel garbage: zero must clear all of it; guarded widely enough that misplaced
    # accumulator rows (every m x n of them, 8 bytes each) only ever land in sentinels
    wide = 8 * b.m * b.n // t_out.host.itemsize
    c = Guarded(b.m * b.n, t_out.host, wide)
    # the accumulator rows beyond the C object (int64 ones as int32 pairs), when C is converted
    t_acc = dtype(b.types.precision.acc)
    words = t_acc.bytes // 4 if b.types.precision.converts_c and not t_acc.is_float else 1
    acc = (Guarded((b.m * b.n - b.c_split_elems) * words, np.float32 if t_acc.is_float else np.int32, 2 * b.m * b.n)
           if b.types.precision.converts_c else None)
    c_bufs = (c.ptr, *((acc.ptr,) if acc is not None else ()))
    # the convert-once kernel's own L1 buffers: bfp16 copies of the A and B tiles (72-byte tiles)
    tile_bytes = dtype(BFP16).unit_bytes
    scratch = ([Guarded(b.t_ma * b.k // 64 * tile_bytes, np.uint8), Guarded(b.k * b.n // 64 * tile_bytes, np.uint8)]
               if b.convert_once else [])
    kernel.checked(kernel.zero_fn, *c_bufs)
    for a_tile, b_tile in steps:
        b_buf = Guarded(b.k * b.n, t_in.host)
        b_buf.body[b_layout(b.k, b.n, s, t, col_maj)] = b_tile
        for i in range(b.rho):
            a_buf = Guarded(b.t_ma * b.k, t_in.host)
            a_buf.body[a_layout(b.t_ma, b.k, r, s, a_col)] = a_tile[i * b.t_ma:(i + 1) * b.t_ma]
            kernel.checked(kernel.matmul_fn, a_buf.ptr, b_buf.ptr, c.ptr, *(g.ptr for g in scratch),
                           *c_bufs[1:], *((i,) if b.rho > 1 else ()))
            assert kernel.modes() == modes, "the kernel must restore the mode registers it found"
            assert a_buf.guards_intact()
        assert b_buf.guards_intact()
    if kernel.convert_fn is not None:
        kernel.checked(kernel.convert_fn, *c_bufs)
        assert kernel.modes() == modes, "the conversion must restore the mode registers it found"
    assert c.guards_intact(), "the kernel wrote outside its C tile"
    assert acc is None or acc.guards_intact(), "the kernel wrote outside its C_acc buffer"
    assert all(g.guards_intact() for g in scratch), "the kernel wrote outside its bfp16 copies"
    return c.body[c_layout(b.m, b.n, r, t, b.c_col_maj if c_col_maj is None else c_col_maj)]


def expected(b: KernelBuild, steps: list[tuple[np.ndarray, np.ndarray]],
             rounding: Rounding | None = None, once: bool = False) -> np.ndarray:
    """C after the steps as facts/numerics.py computes it: fp32 accumulators rounded after every mac, as the host
    runs the kernels (-DGG_HOST_FP32_PER_MAC), or with `once` the exact sum rounded once per call (the
    simulator's model)."""
    nm = replace(numerics(b, rounding), fp32_per_mac=False) if once else numerics(b, rounding)
    c = nm.zero((b.m, b.n))
    for a_tile, b_tile in steps:
        assert nm.acc_overflows(nm.accumulate(c, a_tile, b_tile)) == 0, "inputs must not overflow acc32"
        c = nm.call(c, a_tile, b_tile)
    return nm.finish(c)


def bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).view(f"u{x.dtype.itemsize}")


def assert_bit_equal(got: np.ndarray, want: np.ndarray, what: str) -> None:
    diff = np.argwhere(bits(got) != bits(want))
    if diff.size:
        i, j = diff[0]
        raise AssertionError(f"{what}: {len(diff)} of {got.size} elements differ, first C[{i},{j}] = "
                             f"{got[i, j]!r}, numerics.py says {want[i, j]!r}")


# ---- running one bfp16 output tile -------------------------------------------------------------
HOST_ROUNDING = Rounding.FLOOR  # the host quantizes bfp16 inputs as gemm_gen/design/host_buffers.py does
U8 = np.dtype(np.uint8)


def block_numerics(b: KernelBuild, rounding: Rounding | None = None) -> KernelNumerics:
    p = b.types.precision
    mode = Rounding[b.rounding.upper()] if rounding is None else rounding
    return KernelNumerics.of(p.a, p.out, rounding=mode, saturation=Saturation[b.saturation.upper()], shift=0,
                             dtype_b=p.b, acc=p.acc, fp32_per_mac=True, mac_products=mac_products(b))


def block_inputs(b: KernelBuild, seed: int = 0, family: str = "wide") -> list[tuple[np.ndarray, np.ndarray]]:
    """Two k-steps of A (m x k) and B (k x n), logical, before any host quantization ("wide" inputs:
    quantization must lose bits)."""
    p = b.types.precision
    a, bb = make_inputs(b.m, 2 * b.k, b.n, p.a, p.out, seed=seed, dtype_b=p.b, family=family)
    return [(a[:, i * b.k:(i + 1) * b.k], bb[i * b.k:(i + 1) * b.k]) for i in range(2)]


def a_tiles(a: np.ndarray) -> np.ndarray:
    """A rows as the host stores bfp16 A (blocks of 8 along K, tiles row-major)."""
    return bfp16.tiles_of(a, HOST_ROUNDING)


def a_pairs(a: np.ndarray) -> np.ndarray:
    """a_tiles in bfp16 A's L1 order (l1_layout.a_tile_pairs): 2 x 1 super-blocks, row pair, K tile, 1 of 2."""
    tiles = a_tiles(a)
    rows, ks, nbytes = tiles.shape
    return tiles.reshape(rows // 2, 2, ks, nbytes).transpose(0, 2, 1, 3)


def bt_tiles(b_mat: np.ndarray) -> np.ndarray:
    """B as the host stores bfp16 B: tiles of B^T (blocks = 8 K values of a column), (n/8, k/8)."""
    return bfp16.tiles_of(np.ascontiguousarray(b_mat.T), HOST_ROUNDING)


def seen(b: KernelBuild, a: np.ndarray, b_mat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A and B as the kernel receives them: bfp16 operands quantized by the host (host_buffers)."""
    p = b.types.precision
    a_seen = bfp16.tile_values(a_tiles(a)) if p.a == BFP16 else a
    return a_seen, bfp16.tile_values(bt_tiles(b_mat)).T


def run_block_tile(kernel: Kernel, steps: list[tuple[np.ndarray, np.ndarray]],
                   modes: tuple[Rounding, Saturation] = (Rounding.FLOOR, Saturation.NONE),
                   layouts: tuple[bool, bool] | None = None,
                   ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
    """zero, per k-step rho matmul calls sharing one B tile, then convert when C is converted, on
    L1 buffers in the kernel's layouts. Returns C's values (m x n) and, for bfp16 C, its blocks
    (exponents, mantissas). A config1 A scratch starts out holding A as the host would quantize it
    (floor), so that only the kernel's own conversion gives the expected result. `layouts` overrides
    (a_col_maj, c_col_maj) of the buffers (default: the build's), to prove a wrong layout is caught."""
    b = kernel.build
    a_col, c_col = layouts if layouts is not None else (b.a_col_maj, b.c_col_maj)
    p = b.types.precision
    t_a, t_out, t_acc = dtype(p.a), dtype(p.out), dtype(p.acc)
    q = bfp16.TILE
    kernel.set_modes(*modes)
    # the C object and C_acc, guarded widely enough that a kernel misplacing accumulator rows
    # (whole m x n f32 of them) only ever writes into sentinels
    wide = 4 * b.m * b.n
    c = Guarded(t_out.nbytes(b.m * b.n), U8, wide) if t_out.is_block else Guarded(b.m * b.n, t_out.host, wide)
    acc = Guarded(b.m * b.n - b.c_split_elems, t_acc.host, wide) if p.converts_c else None
    bufs = (c.ptr, *((acc.ptr,) if acc is not None else ()))
    kernel.checked(kernel.zero_fn, *bufs)
    assert kernel.modes() == modes
    for a_step, b_step in steps:
        tiles = bt_tiles(b_step)  # (n/8, k/8) tiles of B^T
        b_buf = Guarded(tiles.size, U8)
        # every bfp16 B in L1 is 1 x 2 super-blocks (l1_layout.b_tile_pairs): column pair, K tile, 1 of 2
        pairs = tiles.reshape(b.n // (2 * q), 2, b.k // q, tiles.shape[-1]).transpose(0, 2, 1, 3)
        b_buf.body[:] = pairs.ravel()
        for i in range(b.rho):
            a_slice = a_step[i * b.t_ma:(i + 1) * b.t_ma]
            extra: list[int] = []
            if t_a.is_block:
                a_buf = Guarded(t_a.nbytes(b.t_ma * b.k), U8)
                a_buf.body[:] = a_pairs(a_slice).ravel()
            else:
                a_buf = Guarded(b.t_ma * b.k, t_a.host)
                a_buf.body[a_layout(b.t_ma, b.k, q, q, a_col)] = a_slice
            if p.converts_a:
                scratch = Guarded(dtype(BFP16).nbytes(b.t_ma * b.k), U8)
                scratch.body[:] = a_pairs(a_slice).ravel()
                extra.append(scratch.ptr)
            if acc is not None:
                extra.append(acc.ptr)
            kernel.checked(kernel.matmul_fn, a_buf.ptr, b_buf.ptr, c.ptr, *extra, *((i,) if b.rho > 1 else ()))
            assert kernel.modes() == modes, "the kernel must restore the mode registers it found"
            assert a_buf.guards_intact()
            if p.converts_a:
                assert scratch.guards_intact(), "the A conversion wrote outside its scratch"
        assert b_buf.guards_intact()
    if kernel.convert_fn is not None:
        kernel.checked(kernel.convert_fn, *bufs)
        assert kernel.modes() == modes
    assert c.guards_intact(), "the kernel wrote outside its C object"
    assert acc is None or acc.guards_intact(), "the kernel wrote outside its C_acc buffer"
    if t_out.is_block:  # bfp16 C in L1: 2 x 2 super-blocks of tiles (l1_layout.c_tile_blocks)
        tiles = c.body.reshape(-1, bfp16.TILE_BYTES)[c_tile_blocks(b.m // q, b.n // q)]
        exps, mants = bfp16.from_tiles(tiles)
        return bfp16.decode(exps, mants), (exps, mants)
    return c.body[c_layout(b.m, b.n, q, q, c_col)], None


def block_expected(b: KernelBuild, steps: list[tuple[np.ndarray, np.ndarray]], rounding: Rounding | None = None,
                   ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
    """KernelNumerics on the host-quantized inputs: C's values and, for bfp16 C, its blocks."""
    nm = block_numerics(b, rounding)
    c = nm.zero((b.m, b.n))
    blocks = None
    for a_step, b_step in steps:
        acc = nm.accumulate(c, *seen(b, a_step, b_step))
        c = nm.store(acc)
        if nm.t_acc.is_block:  # bfp16 C: the blocks of the last requantization
            blocks = nm.encode_acc(acc)
    if b.types.precision.converts_c:
        blocks = nm.encode_out(c) if nm.dtype_out.is_block else None
        c = nm.finish(c)
    return c, blocks


def assert_block_equal(got: tuple[np.ndarray, tuple[np.ndarray, np.ndarray] | None],
                       want: tuple[np.ndarray, tuple[np.ndarray, np.ndarray] | None], what: str) -> None:
    assert_bit_equal(got[0], want[0], what)
    assert (got[1] is None) == (want[1] is None)
    if got[1] is not None and want[1] is not None:
        assert np.array_equal(got[1][0], want[1][0]), f"{what}: block exponents differ"
        assert np.array_equal(got[1][1], want[1][1]), f"{what}: block mantissas differ"


# ---- the checks --------------------------------------------------------------------------------
@needs_gxx
@pytest.mark.parametrize("case", MAIN, ids=lambda c: c.id)
def test_kernel_matches_numerics(libraries, case: Case) -> None:
    """zero + two matmul calls on one tile equal KernelNumerics.call twice, bit for bit; the kernel
    sets its own modes whatever it finds, and restores them."""
    kernel = load(libraries, case)
    steps = inputs(case)
    want = expected(case.build, steps)
    found = ((Rounding.FLOOR, Saturation.NONE), (Rounding.CEIL, Saturation.SYMMETRIC))
    for modes in found:
        assert_bit_equal(run_tile(kernel, steps, modes=modes), want, case.id)


@needs_gxx
@pytest.mark.parametrize("case", ACC64_CASES, ids=lambda c: c.id)
def test_acc64_kernels_are_right_in_any_word_order(libraries, case: Case) -> None:
    """Issue 31 item 10: a C kept as int32 pairs between calls (acc64 mmuls) is exact with the host's
    aie::vector_cast word order permuted too: the kernel only ever reads back whole blocks it wrote."""
    assert ACC64_CASES and case.build.types.precision.acc == "i64"
    kernel = load(libraries, case)
    steps = inputs(case)
    assert_bit_equal(run_tile(kernel, steps), expected(case.build, steps), case.id)


@needs_gxx
@pytest.mark.parametrize("case", EMULATED, ids=lambda c: c.id)
def test_bf16_via_bfp16_kernel_quantizes_like_the_numerics(libraries, case: Case) -> None:
    """npu2 bf16 with emulate_bf16_with_bfp16: the same template with mmul 8x8x8, compiled with
    -DAIE_API_EMULATE_BFLOAT16_MMUL_WITH_BFP16. The AIE API then quantizes A rows and B columns to
    bfp16ebs8 blocks of 8 along K inside the mmul; tests/aie_host models that conversion as
    gemm_gen/facts/bfp16.py does (the on-chip conversion itself is unpublished), and the result must equal
    KernelNumerics with bfp16_inputs, bit for bit, and differ from plain bf16."""
    assert kernel_defines(case.build) == ("-DAIE_API_EMULATE_BFLOAT16_MMUL_WITH_BFP16",)
    assert case.build.mmul == (8, 8, 8)
    steps = inputs(case)
    got = run_tile(load(libraries, case), steps)
    assert_bit_equal(got, expected(case.build, steps), case.id)
    plain = numerics(case.build)
    plain = KernelNumerics(plain.dtype_in, plain.dtype_out, plain.rounding, plain.saturation, plain.shift)
    c = plain.zero((case.build.m, case.build.n))
    for a_tile, b_tile in steps:
        c = plain.call(c, a_tile, b_tile)
    assert not np.array_equal(bits(got), bits(c))  # the quantization is really exercised


def test_every_supported_variant_is_covered() -> None:
    builds = [c.build for c in CASES]
    for dev in (NPU1, NPU2):
        mine = [b for b in builds if b.aie_target == dev.aie_target]
        for din, outs in dev.out_types.items():
            for dout in outs:
                for col in (False, True):
                    assert any((b.types.dtype_in, b.types.dtype_out, b.b_col_maj) == (din, dout, col) for b in mine)
            for shape in dev.mmul_shapes[din]:
                assert any(b.types.dtype_in == din and b.mmul == shape for b in mine)
    assert {(b.types.dtype_out, b.b_col_maj) for b in builds if b.emulate_bf16_with_bfp16} == {
        ("bf16", True), ("bf16", False), ("f32", True), ("f32", False)}
    for dev in (NPU1, NPU2):  # every expansion of every default shape; every loop structure
        mine = [b for b in builds if b.aie_target == dev.aie_target]
        for din, shapes in dev.mmul_shapes.items():
            done = {tuple(b.expansion) for b in mine if b.types.dtype_in == din and b.mmul == shapes[0]}
            assert set(kv.expansions(dev, din, shapes[0])) <= done
        assert {b.loops for b in mine} == set(kv.LOOPS)
    assert {tuple(b.expansion) for b in builds} == set(kv.CANDIDATES)


@needs_gxx
def test_integer_modes_are_exercised(libraries) -> None:
    """The hot integer cases really round and saturate: their result changes under the directed
    roundings (floor, ceil) other than theirs, and under every other saturation mode."""
    for case in (c for c in MAIN if c.hot):
        b = case.build
        steps = inputs(case)
        want = expected(b, steps)
        others = [replace(numerics(b), rounding=r) for r in (Rounding.FLOOR, Rounding.CEIL)
                  if r.name.lower() != b.rounding and b.shift]  # without a shift nothing rounds
        if dtype(b.types.dtype_out).bits < 32:  # (an int32 C saturates only on full-range int16: test_acc64_...)
            others += [replace(numerics(b), saturation=s) for s in Saturation if s.name.lower() != b.saturation]
        for nm in others:
            c = nm.zero((b.m, b.n))
            for a_tile, b_tile in steps:
                c = nm.call(c, a_tile, b_tile)
            c = nm.finish(c)
            assert not np.array_equal(c, want), f"{case.id}: {nm.rounding!r}, {nm.saturation!r} give the same C"


@needs_gxx
def test_check_catches_wrong_layout_and_rounding(libraries) -> None:
    """The comparison can fail: B in the other layout, numerics with another rounding mode, and a
    kernel that does not set its rounding mode (it then inherits floor from reset) all mismatch."""
    case = Case(_BF16)
    kernel = load(libraries, case)
    steps = inputs(case)
    want = expected(case.build, steps)
    assert_bit_equal(run_tile(kernel, steps), want, "control")
    with pytest.raises(AssertionError, match="elements differ"):
        assert_bit_equal(run_tile(kernel, steps, b_col_maj=True), want, "B column-major for a row-major kernel")
    with pytest.raises(AssertionError, match="elements differ"):
        assert_bit_equal(run_tile(kernel, steps, a_col_maj=True), want, "A column-major for a row-major kernel")
    with pytest.raises(AssertionError, match="elements differ"):
        assert_bit_equal(run_tile(kernel, steps), expected(case.build, steps, Rounding.FLOOR), "floor numerics")
    mutant = load(libraries, NO_ROUNDING)
    got = run_tile(mutant, steps, modes=(Rounding.FLOOR, Saturation.NONE))
    with pytest.raises(AssertionError, match="elements differ"):
        assert_bit_equal(got, want, "kernel without set_rounding")
    assert_bit_equal(got, expected(case.build, steps, Rounding.FLOOR), "kernel without set_rounding, floor")


@needs_gxx
@pytest.mark.parametrize("mutant", list(OVERLAP_MUTANTS), ids=lambda c: c.mutant)
def test_check_catches_a_broken_cluster_overlap(libraries, mutant: Case) -> None:
    """c-overlap's order is what keeps it exact: each chain's store before its reload, and the reload
    from the next cluster (across block rows too). Breaking either changes C."""
    control = Case(mutant.build)
    assert kernel_params(mutant.build).row_clusters == 2 and kernel_params(mutant.build).col_clusters == 2
    steps = inputs(control)
    want = expected(control.build, steps)
    assert_bit_equal(run_tile(load(libraries, control), steps), want, "control")
    with pytest.raises(AssertionError, match=OVERLAP_MUTANTS[mutant]):
        assert_bit_equal(run_tile(load(libraries, mutant), steps), want, mutant.id)


@needs_gxx
@pytest.mark.parametrize("key", list(C_COL_MAJ_MUTANTS), ids=lambda k: f"{k[0]}-{k[1][0]}-{k[1][1]}-{k[2]}")
def test_check_catches_column_major_c_in_the_wrong_layout(libraries, key: tuple[str, tuple[str, str], str]) -> None:
    """Column-major C, every narrow type pair on both devices: the kernel's C read row-major, a kernel
    storing its blocks untransposed, and one reloading them untransposed (the second k-step reads
    what the first stored) all differ from the numerics."""
    mutant = C_COL_MAJ_MUTANTS[key]
    control = Case(mutant.build, mutant.hot)
    steps = inputs(control)
    want = expected(control.build, steps)
    kernel = load(libraries, control)
    assert_bit_equal(run_tile(kernel, steps), want, "control")
    with pytest.raises(AssertionError, match="elements differ"):
        assert_bit_equal(run_tile(kernel, steps, c_col_maj=False), want, "column-major C read row-major")
    with pytest.raises(AssertionError, match="elements differ"):
        assert_bit_equal(run_tile(load(libraries, mutant), steps), want, mutant.id)


@needs_gxx
def test_check_catches_an_atb_kernel_that_ignores_its_slice(libraries) -> None:
    """Every A tile of an ATB kernel must land in its own slice of C: one that writes slice 0 each
    time fails (and overwrites nothing outside C)."""
    steps = inputs(Case(_ATB))
    want = expected(_ATB, steps)
    assert_bit_equal(run_tile(load(libraries, Case(_ATB)), steps), want, "control")
    with pytest.raises(AssertionError, match="elements differ"):
        assert_bit_equal(run_tile(load(libraries, NO_SLICE), steps), want, "slice ignored")


@needs_gxx
def test_host_bf16_conversion_matches_ml_dtypes_and_numerics(libraries) -> None:
    """tests/aie_host's float -> bf16: bfloat16(float) equals ml_dtypes (round to nearest even),
    and to_vector's conversion under every crRnd mode equals numerics.round_f32_to_bf16."""
    from gemm_gen.facts.rounding import round_f32_to_bf16

    lib = load(libraries, Case(_BF16)).lib
    lib.gg_host_f32_to_bf16.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
    rng = np.random.default_rng(7)
    pats = rng.integers(0, 1 << 32, size=20000, dtype=np.uint64).astype(np.uint32)
    pats[: 4000] = (pats[: 4000] & 0xFFFF0000) | 0x8000  # exact ties
    pats[4000: 4100] = (pats[4000: 4100] & 0x807FFFFF) | 0x7F800000  # inf / NaN
    pats[4100: 4200] &= 0x807FFFFF  # zeros and subnormals
    pats[4200: 4300] = 0x7F7F8000 + np.arange(100, dtype=np.uint32)  # near the overflow to inf
    x = pats.view(np.float32)
    out = np.empty(x.size, dtype=np.uint16)
    for mode in Rounding:
        lib.gg_host_f32_to_bf16(x.ctypes.data, out.ctypes.data, x.size, int(mode))
        with np.errstate(invalid="ignore"):
            want = round_f32_to_bf16(x, mode).view(np.uint16)
            if mode == Rounding.CONV_EVEN:
                assert np.array_equal(out, x.astype(ml_dtypes.bfloat16).view(np.uint16))
        assert np.array_equal(out, want), mode


@needs_gxx
@pytest.mark.parametrize("case", BLOCK_CASES, ids=lambda c: c.id)
def test_bfp16_kernel_matches_numerics(libraries, case: Case) -> None:
    """zero + two k-steps of rho matmul calls (+ convert) on one tile equal KernelNumerics bit for
    bit: C's values, and for a bfp16 C its exponent and mantissa bytes; whatever modes the kernel
    finds, it sets its rounding and restores them."""
    kernel = load(libraries, case)
    steps = block_inputs(case.build)
    want = block_expected(case.build, steps)
    for modes in ((Rounding.FLOOR, Saturation.NONE), (Rounding.CEIL, Saturation.SYMMETRIC)):
        assert_block_equal(run_block_tile(kernel, steps, modes), want, case.id)


def test_bfp16_cases_cover_every_precision() -> None:
    """Every bfp16 precision precision.check accepts has a case, with rho 1 and rho > 1 and both B
    layouts among the cases, and config3 has a case whose slices sit in both places."""
    accepted = []
    for a in ("bf16", BFP16):
        for out in ("bf16", "f32", BFP16):
            for acc in ("bf16", "f32", BFP16):
                p = Precision(a, BFP16, out, acc)
                try:
                    check_precision(p, NPU2)
                except ConfigError:
                    continue
                accepted.append(p)
    builds = [c.build for c in BLOCK_CASES]
    assert len(accepted) == 12 and {b.types.precision for b in builds} == set(accepted)
    for preset in ("config1", "config2", "config3"):
        mine = [b for b in builds if b.types.precision == PRESETS[preset]]
        assert {b.rho > 1 for b in mine} == {False, True} and {b.b_col_maj for b in mine} == {False, True}
    # config3 slices both in the C object and in C_acc (the first one across the split, if the
    # split falls inside a slice), and an f32 accumulator wholly in C_acc
    assert any(b.types.precision == PRESETS["config3"] and b.rho > 1 and 0 < b.c_split_elems < b.m * b.n
               for b in builds)
    assert any(b.types.precision.converts_c and b.c_split_elems == 0 for b in builds)
    assert {b.k // 8 % 2 for b in builds} == {0, 1} and any(b.k == 8 for b in builds)  # both K tails, one step
    assert {b.rounding for b in builds} > {"conv_even"}


@needs_gxx
def test_bfp16_rounding_modes_are_exercised() -> None:
    """The kernels' own quantizations matter: with floor instead of the build's mode, config1's A
    conversion, config2's requantization and config3's final conversion all give another C."""
    for b in (_CONFIG1, BLOCK_CASES[3].build, _CONFIG3):
        steps = block_inputs(b)
        want = block_expected(b, steps)
        other = block_expected(b, steps, Rounding.FLOOR)
        assert not np.array_equal(bits(want[0]), bits(other[0])), b


@needs_gxx
@pytest.mark.parametrize("mutant", list(WIDE_MUTANTS), ids=lambda c: c.mutant)
def test_check_catches_broken_wide_accumulator_kernels(libraries, mutant) -> None:
    """A scalar kernel whose accumulator ignores the split, splits it at whole block rows while C_acc holds only
    the blocks past the block split, whose conversion runs backwards, or
    that keeps an int32 C between calls of an int64 accumulator (full-range int16, where partial sums
    leave int32) fails; the unpatched kernel passes."""
    control = Case(mutant.build, hot=mutant.hot)
    if mutant.build.types.dtype_in == "i16":
        rng = np.random.default_rng(5)
        b = mutant.build
        steps = [(rng.integers(-32768, 32768, (b.m, b.k)).astype(np.int16),
                  rng.integers(-32768, 32768, (b.k, b.n)).astype(np.int16)) for _ in range(4)]
        nm = numerics(b)
        a_all = np.concatenate([x for x, _ in steps], axis=1).astype(np.int64)
        b_all = np.concatenate([y for _, y in steps], axis=0).astype(np.int64)
        want = nm.finish(a_all @ b_all)
    else:
        steps = inputs(control)
        want = expected(control.build, steps)
    assert_bit_equal(run_tile(load(libraries, control), steps), want, "control")
    with pytest.raises(AssertionError, match=WIDE_MUTANTS[mutant]):
        assert_bit_equal(run_tile(load(libraries, mutant), steps), want, mutant.id)


@needs_gxx
def test_check_catches_broken_bfp16_kernels(libraries) -> None:
    """The comparison fails for a config1 kernel that skips its A conversion (it multiplies the
    host's floor quantization left in the scratch), a config3 kernel that ignores the split (it
    writes accumulator rows past the C object), and a config3 conversion that runs backwards (in
    place, it overwrites blocks it has not read yet), a kernel whose B stream starts its column
    pairs at the wrong tile, one whose A stream starts its row pairs at the wrong tile, a config1
    conversion that writes A_bfp16 in its blocks' row-major order instead of the 2 x 1 super-blocks,
    and kernels that break C's 2 x 2 super-blocks (two tiles of a block stored swapped, a block's C
    prefetched into the wrong accumulators, blocks walked as row-major tiles, a config3 accumulator
    kept in row-major blocks that its conversion reads as super-blocks), and one that addresses a 16 x 16 block's
    bottom tiles beside its top ones when the block split falls between them; the unpatched kernels pass."""
    for control, mutants in ((Case(_CONFIG1), {NO_A_CONVERSION: "elements differ", A_BLOCK_ORDER: "elements differ"}),
                             (Case(_CONFIG3), {NO_SPLIT: "wrote outside its C object",
                                               REVERSED_CONVERT: "elements differ"}),
                             (Case(SPLIT_MID_PAIR), {PAIR_SPLIT: "elements differ|wrote outside"}),
                             (Case(B_PAIR_OFFSET.build), {B_PAIR_OFFSET: "elements differ"}),
                             (Case(A_PAIR_OFFSET.build), {A_PAIR_OFFSET: "elements differ"}),
                             (Case(_CONFIG2), {C_TILE_SWAP: "elements differ"}),
                             (Case(C_ROW_MAJOR.build), {C_PREFETCH_SWAP: "elements differ",
                                                        C_ROW_MAJOR: "elements differ"}),
                             # a split inside its first row pair: the top tiles land on the wrong blocks, the bottom
                             # ones past the object
                             (Case(C_ACC_ROW_MAJOR.build), {C_ACC_ROW_MAJOR: "elements differ|wrote outside"})):
        steps = block_inputs(control.build)
        want = block_expected(control.build, steps)
        assert_block_equal(run_block_tile(load(libraries, control), steps), want, "control")
        for mutant, message in mutants.items():
            with pytest.raises(AssertionError, match=message):
                assert_block_equal(run_block_tile(load(libraries, mutant), steps), want, mutant.id)
    # the config1 mutant computes exactly bfp16 A (floor, from the host) x bfp16 B: only the
    # conversion is missing
    steps = block_inputs(_CONFIG1)
    host_a = block_expected(_CONFIG1.with_(dtype_in=BFP16, dtype_b=None), steps)
    assert_block_equal(run_block_tile(load(libraries, NO_A_CONVERSION), steps), host_a, "A as the host quantizes it")


@needs_gxx
@pytest.mark.parametrize("mutant", LAYOUT_MUTANTS, ids=lambda c: c.mutant)
def test_check_catches_untransposed_bfp16_layouts(libraries, mutant: Case) -> None:
    """Column-major A and C on the bfp16 kernels: the unpatched kernel equals the numerics, and one
    that skips a transpose (A's before its conversion; a bf16 C's store, reload or final conversion)
    does not; so does the right kernel whose buffers are laid out row-major."""
    control = Case(mutant.build)
    steps = block_inputs(control.build)
    want = block_expected(control.build, steps)
    assert_block_equal(run_block_tile(load(libraries, control), steps), want, "control")
    with pytest.raises(AssertionError, match="elements differ"):
        assert_block_equal(run_block_tile(load(libraries, mutant), steps), want, mutant.id)
    with pytest.raises(AssertionError, match="elements differ"):  # the kernel's layouts, not another's
        assert_block_equal(run_block_tile(load(libraries, control), steps, layouts=(False, False)), want, "row-major")


@needs_gxx
def test_host_bfp16_tiles_match_bfp16_py(libraries) -> None:
    """tests/aie_host's accum<accfloat, 64>::to_vector<bfp16ebs8>() (as the kernels quantize) equals
    gemm_gen/facts/bfp16.py encode() under every crRnd mode, byte for byte, including ties, mantissas that
    round past 127, denormals, zeros and Inf/NaN lanes; and a tile loads back as bfp16.decode."""
    lib = load(libraries, Case(_CONFIG1)).lib
    lib.gg_host_bfp16_tiles.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
    lib.gg_host_bfp16_values.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    rng = np.random.default_rng(11)
    n = 64 * 400
    x = (rng.standard_normal(n) * 2.0 ** rng.integers(-12, 12, n)).astype(np.float32)
    x[:4096] = (rng.integers(-512, 512, 4096) / 8.0).astype(np.float32)  # ties and exact values
    x[4096:4160] = 127.75  # one block of values that round up past the largest mantissa
    x[4160:4224:3] = -128.5
    pats = x.view(np.uint32)
    pats[4224:4480] &= 0x807FFFFF  # zeros and denormals
    pats[4480:4544:5] = (pats[4480:4544:5] & 0x807FFFFF) | 0x7F800000  # Inf / NaN lanes
    x[4544:4608] *= np.float32(2.0 ** -120)  # tiny normals next to denormals
    x[4608:4672] = 0.0  # an all-zero block
    out = np.empty(n // 64 * 72, dtype=np.uint8)
    for mode in Rounding:
        lib.gg_host_bfp16_tiles(x.ctypes.data, out.ctypes.data, n, int(mode))
        with np.errstate(invalid="ignore", over="ignore"):
            exps, mants = bfp16.encode(x.reshape(-1, 8), mode)
        blocks = out.reshape(-1, 9)
        assert np.array_equal(blocks[:, 0], exps.ravel()), mode
        assert np.array_equal(blocks[:, 1:].view(np.int8).ravel(), mants.ravel()), mode
    values = np.empty(n, dtype=np.float32)
    lib.gg_host_bfp16_values(out.ctypes.data, values.ctypes.data, n)
    assert np.array_equal(values.view(np.uint32), bfp16.decode(exps, mants).ravel().view(np.uint32))


# ---- rendering ---------------------------------------------------------------------------------
def spread(steps: list[tuple[np.ndarray, np.ndarray]], seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The steps with every 8-value block along K scaled by its own power of two (2^-12 .. 2^12):
    partial sums of very different magnitudes, so fp32 rounds them and the mac order shows."""
    rng = np.random.default_rng(seed)
    out = []
    for a, b in steps:
        sa = np.exp2(rng.integers(-12, 13, (a.shape[0], a.shape[1] // 8))).repeat(8, axis=1)
        sb = np.exp2(rng.integers(-12, 13, (b.shape[0] // 8, b.shape[1]))).repeat(8, axis=0)
        out.append(((a.astype(np.float32) * sa).astype(a.dtype), (b.astype(np.float32) * sb).astype(b.dtype)))
    return out


@needs_gxx
@pytest.mark.parametrize("pair", ONCE_PAIRS, ids=lambda p: p[1].id)
def test_convert_once_equals_the_emulation_bit_for_bit(libraries, pair: tuple[Case, Case]) -> None:
    """On random tiles of lossy ("wide") inputs: the convert-once kernel's C equals the emulated
    kernel's bit for bit (the same bfp16 conversions and, with the host rounding after every mac, the
    same macs in the same order), and both equal gemm_gen/facts/numerics.py's per-mac model; for an f32 C the
    per-mac rounding shows against the exact sum rounded once (else the order would go unchecked)."""
    emulated, once = pair
    assert once.build.convert_once and not emulated.build.convert_once
    assert PER_MAC in host_defines(once.build) and PER_MAC in host_defines(emulated.build)
    rounded_per_mac = 0
    for seed in range(4):
        steps = spread(inputs(emulated, seed=seed), seed)
        want = run_tile(load(libraries, emulated), steps)
        assert_bit_equal(run_tile(load(libraries, once), steps), want, f"{once.id} seed {seed}")
        assert_bit_equal(want, expected(emulated.build, steps), emulated.id)
        rounded_per_mac += int(np.any(bits(want) != bits(expected(emulated.build, steps, once=True))))
    assert rounded_per_mac > 0 or emulated.build.types.dtype_out != "f32"


@needs_gxx
@pytest.mark.parametrize("mutant", ONCE_MUTANTS, ids=lambda c: c.mutant)
def test_check_catches_a_wrong_convert_once_kernel(libraries, mutant: Case) -> None:
    emulated = Case(replace(mutant.build, convert_once=False, compiler="peano"), host_defines=mutant.host_defines)
    pair = next(p for p in ONCE_PAIRS if p[0].id == emulated.id)
    steps = inputs(pair[0], seed=1)
    with pytest.raises(AssertionError, match="differ"):
        assert_bit_equal(run_tile(load(libraries, mutant), steps), run_tile(load(libraries, pair[0]), steps),
                         mutant.id)


def test_render_is_deterministic_and_says_what_it_is_for() -> None:
    cases = [*CASES, *BLOCK_CASES]
    first = [render_kernel(c.build) for c in cases]
    render_module._environment.cache_clear()  # a fresh Jinja environment, equal (not identical) builds
    assert [render_kernel(replace(c.build)) for c in cases] == first
    for case, text in zip(cases, first):
        b = case.build
        head = text[:1200]
        assert f"Rendered for {kernel_params(b).device} ({b.aie_target})" in head
        assert f"{b.m} x {b.k} x {b.n}" in head and " x ".join(map(str, b.mmul)) in head
        assert f"rounding {b.rounding}" in head and f"shift {b.shift}" in head
        for role, name in b.symbols.items():
            assert f"void {name}(" in text, role
        if b.types.precision.block:
            p = b.types.precision
            assert f"A {p.a} x B {p.b} -> C {p.out}, C accumulated in {p.acc}" in head
            assert f"rho {b.rho}" in head and f"compiler {b.compiler}" in head and "mm_bfp16.cc.j2" in head
        assert text.endswith("\n") and "\t" not in text


def _signature(text: str, name: str) -> list[str]:
    """The parameter list of extern "C" function `name` in a rendered source."""
    head = text[text.index(f"void {name}(") + len(f"void {name}("):]
    return [param.strip() for param in head[:head.index(")")].split(",")]


@pytest.mark.parametrize("types", [
    dict(dtype_in="bf16", dtype_b="bfp16", dtype_out="bf16"),  # config1
    dict(dtype_in="bfp16", dtype_out="bfp16"),  # config2
    dict(dtype_in="bfp16", dtype_out="bfp16", acc="bf16"),  # config3
    dict(dtype_in="bf16", dtype_b="bfp16", dtype_out="bfp16", acc="f32"),
    dict(dtype_in="bfp16", dtype_out="f32"),
], ids=lambda t: "-".join(f"{v}" for v in t.values()))
@pytest.mark.parametrize("rho", [1, 4])
def test_bfp16_kernels_take_the_arguments_the_design_passes(types: dict, rho: int) -> None:
    """Every kernel of a bfp16 design exists in the rendered source with kernel_specs' argument
    list: buffers of the right element types in order, then the int32 slice when rho > 1."""
    cfg = GemmConfig("npu2", 1024, 512, 1024, 64, 64, 64, 128, rho=rho, **types)  # type: ignore[arg-type]
    check_config(cfg)
    b = kernel_build(cfg)
    src = kernel_source(b)
    assert src.defines == () and src.filename == b.object_file[:-2] + ".cc"
    assert src.convert_name == b.symbols.get("convert")
    specs = kernel_specs(cfg)
    assert set(specs) == set(b.symbols)
    for spec in specs.values():
        params = _signature(src.text, spec.name)
        want = [f"{render_module.C_TYPES[t]} *" for t in spec.arg_dtypes] + ["int32_t "] * len(spec.scalar_args)
        assert len(params) == len(want), (spec.name, params)
        for param, prefix in zip(params, want):
            assert param.startswith(prefix), (spec.name, param, prefix)


def test_bfp16_design_renders_its_kernel() -> None:
    """build_design's kernels for a bfp16 config render through kernel_source (one object file)."""
    design = build_design(GemmConfig("npu2", 512, 256, 1024, 32, 64, 32, 128, "bfp16", "bfp16", acc="bf16",
                                     rho=2))
    b = design.kernels[0].build
    assert {spec.build for spec in design.kernels} == {b}
    src = kernel_source(b)
    assert (src.zero_name, src.matmul_name, src.convert_name) == (b.symbols["zero"], b.symbols["matmul"],
                                                                  b.symbols["convert"])
    for spec in design.kernels:
        assert f"void {spec.name}(" in src.text


def test_source_file_and_symbols_follow_the_design() -> None:
    for cfg in (small("npu1", "i8", "i16", True), small("npu2", "bf16", "bf16", False),
                small("npu2", "bf16", "f32", True, emulate_bf16_with_bfp16=True)):
        design = build_design(cfg)
        names = {spec.role: spec.name for spec in design.kernels}
        b = design.kernels[0].build
        src = kernel_source(b)
        assert (src.zero_name, src.matmul_name) == (names["zero"], names["matmul"])
        assert src.filename == b.object_file[:-2] + ".cc"
        assert src.defines == kernel_defines(b)
        assert f'void {names["zero"]}(' in src.text and f'void {names["matmul"]}(' in src.text


# The renderer renders what the rules allowed (backends/kernel_source/render.py asserts them): a build that breaks a
# rule is
# refused by the config's own check first. Each case: the change to a valid build, what rendering it raises
# (AssertionError for a rule the config's check applied; ConfigError where the build's variant is recomputed by
# spec/rules/kernel_variant.choose), and the same rule broken in a config (`config`: its fields over SMALL), which
# check() refuses with `message`.
SMALL = dict(device="npu1", M=64, K=64, N=64, m=8, k=16, n=8, k_mt=16)  # the bf16 build below (m 8, k 16, n 8)


@pytest.mark.parametrize("change, raised, config, message", [
    (dict(m=12), ConfigError, dict(m=12), "m=12 is not a multiple of 2r=8"),
    (dict(rho=3), AssertionError, dict(rho=3), "rho=3 must be a divisor of m=8"),
    (dict(rho=2), ConfigError, dict(rho=2), r"T_MA = m / rho = 4 is not a multiple of 2r=8"),  # T_MA = 4 < 2r
    (dict(k=12), AssertionError, dict(k=12, k_mt=12), "k=12 is not a multiple of s=8"),
    (dict(expansion=(4, 4)), ConfigError, dict(expansion=(4, 4)), "does not split into 4x4 clusters"),
    (dict(expansion=(8, 2)), ConfigError, dict(expansion=(8, 2)), "not one of ours"),
    (dict(loops="unrolled"), ConfigError, dict(kernel_loops="unrolled"), "unknown kernel loop structure"),
    (dict(mmul=(8, 8, 8)), AssertionError, dict(mmul_shape=(8, 8, 8)), "not an aie::mmul shape"),
    (dict(emulate_bf16_with_bfp16=True), AssertionError, dict(emulate_bf16_with_bfp16=True), "npu2 bf16 feature"),
    (dict(dtype_out="i8"), AssertionError, dict(dtype_out="i8"), "does not go with dtype_in bf16"),
    (dict(shift=2), AssertionError, dict(shift=2), "applies to integer outputs only"),
    (dict(rounding="nearest"), AssertionError, dict(rounding="nearest"), "unknown rounding mode"),
    (dict(aie_target="aie1"), AssertionError, dict(device="npu0"), "unknown device"),
    # a C that stays in acc32 (int32 C) cannot be shifted; a shifted C must fit the accumulator
    (dict(dtype_in="i8", dtype_out="i32", mmul=(4, 8, 8), k=16, n=16, shift=4), AssertionError,
     dict(dtype_in="i8", dtype_out="i32", mmul_shape=(4, 8, 8), n=16, shift=4, acc="out"),
     "stays in the 32-bit accumulator"),
    (dict(dtype_in="i16", dtype_out="i32", mmul=(4, 2, 8), k=16, n=16, shift=1), AssertionError,
     dict(dtype_in="i16", dtype_out="i32", mmul_shape=(4, 2, 8), n=16, shift=1, acc="out"),
     "stays in the 32-bit accumulator"),
    (dict(dtype_in="i8", dtype_out="i16", mmul=(4, 8, 8), k=16, n=16, shift=17), AssertionError,
     dict(dtype_in="i8", dtype_out="i16", mmul_shape=(4, 8, 8), n=16, shift=17, acc="out"), r"at most 16"),
    (dict(dtype_in="i16", dtype_out="i32", mmul=(4, 4, 4), k=16, n=16, shift=33), AssertionError,
     dict(dtype_in="i16", dtype_out="i32", mmul_shape=(4, 4, 4), n=16, shift=33, acc="out"), r"at most 32"),
])
def test_render_asserts_what_the_config_check_refuses(change: dict, raised: type[Exception], config: dict,
                                                      message: str) -> None:
    base = build(NPU1, "bf16", "bf16", (1, 2, 1), False)  # m = 8, k = 16, n = 8
    with pytest.raises(raised):
        render_kernel(base.with_(**change))
    with pytest.raises(ConfigError, match=message):
        check(GemmConfig(**{**SMALL, **config}))


BLOCK_SMALL = dict(device="npu2", M=64, K=64, N=64, m=16, k=16, n=16, k_mt=16, dtype_in="bfp16", dtype_out="bf16",
                   acc="out", compiler="chess")  # the bfp16 build below


@pytest.mark.parametrize("change, raised, config, message", [
    (dict(aie_target="aie2"), AssertionError, dict(device="npu1"), "no bfp16 datapath"),
    (dict(mmul=(4, 8, 8)), AssertionError, dict(mmul_shape=(4, 8, 8)), "the bfp16 datapath multiplies 8x8x8"),
    (dict(emulate_bf16_with_bfp16=True), AssertionError, dict(emulate_bf16_with_bfp16=True),
     "already runs on the bfp16 datapath"),
    (dict(shift=3), AssertionError, dict(shift=3), "applies to integer outputs only"),
    (dict(rho=2), AssertionError, dict(rho=2), "T_MA = m / rho = 8 is not a multiple of 16"),  # T_MA = 8
    (dict(k=12), AssertionError, dict(k=12, k_mt=12), "k=12 would cut a bfp16ebs8 block"),
    (dict(expansion=(4, 2)), AssertionError, dict(expansion=(4, 2)), "one variant"),
    (dict(loops="k-flat"), AssertionError, dict(kernel_loops="k-flat"), "one variant"),
    (dict(n=24), AssertionError, dict(n=24), "n=24 is not a multiple of 16"),
    (dict(rho=3), AssertionError, dict(rho=3), "rho=3 must be a divisor of m=16"),
    (dict(dtype_out="i8"), AssertionError, dict(dtype_out="i8"), "bf16, f32 or bfp16"),
    (dict(dtype_in="i8"), AssertionError, dict(dtype_in="i8", dtype_b="bfp16"), "bf16 or bfp16"),
    (dict(rounding="nearest"), AssertionError, dict(rounding="nearest"), "unknown rounding mode"),
])
def test_render_asserts_what_the_config_check_refuses_of_bfp16(change: dict, raised: type[Exception], config: dict,
                                                               message: str) -> None:
    base = block_build(BFP16, BFP16, "bf16", blocks=(1, 2, 1))  # m = 16, k = 16, n = 16
    with pytest.raises(raised):
        render_kernel(base.with_(**change))
    with pytest.raises(ConfigError, match=message):
        check(GemmConfig(**{**BLOCK_SMALL, **config}))


def _preprocess(source: str, tmp_path: Path, *defines: str) -> subprocess.CompletedProcess:
    """Preprocess as an AIE compiler would, with an empty aie_api stub (macros only)."""
    assert CXX is not None
    stub = tmp_path / "stub"
    (stub / "aie_api").mkdir(parents=True, exist_ok=True)
    (stub / "aie_api" / "aie.hpp").write_text("")
    src = tmp_path / "k.cc"
    src.write_text(source)
    return subprocess.run([CXX, "-std=c++20", "-E", "-P", *defines, f"-I{stub}", f"-I{kernel_include_dir()}",
                           str(src)], capture_output=True, text=True)


LOOP_HEADERS = {"z": "for (unsigned z = 0; z < ROW_BLOCKS; z += ER)",
                "j": "for (unsigned j = 0; j < COL_BLOCKS; j += ET)",
                "k": "for (unsigned i = 0; i < K_BLOCKS; ++i)"}
LOOP_KINDS = {"k-pipelined": ("range", "range", "pipeline"), "c-overlap": ("range", "range", "pipeline"),
              "k-flat": ("range", "pipeline", "flatten"), "jk-flat": ("pipeline", "flatten", "flatten")}
# c-overlap pipelines all k-steps but the peeled last one
OVERLAP_K_HEADER = "for (unsigned i = 0; i + 1 < K_BLOCKS; ++i)"


@needs_gxx
@pytest.mark.parametrize("loops", kv.LOOPS)
def test_loop_hints_for_chess_peano_and_host(tmp_path: Path, loops: str) -> None:
    """chess gets its keywords behind the loop headers, Peano its clang loop pragmas in front, a
    host compiler neither; each loop nest pipelines, unrolls or only bounds the loops its structure
    says, with the rendered trip counts."""
    b = build(NPU1, "i8", "i8", (4, 3, 2), True, expansion=(4, 2), loops=loops)  # 2 x 3 x 2 loops
    p = kernel_params(b)
    assert (p.row_clusters, p.k_blocks, p.col_clusters) == (2, 3, 2)
    source = render_kernel(b)
    counts = {"z": p.row_clusters, "j": p.col_clusters, "k": p.k_blocks - (loops == "c-overlap")}
    headers = dict(LOOP_HEADERS, **({"k": OVERLAP_K_HEADER} if loops == "c-overlap" else {}))
    chess = _preprocess(source, tmp_path, "-D__chess__", "-D__AIE_ARCH__=20")
    peano = _preprocess(source, tmp_path, "-D__AIECC__", "-D__AIE_ARCH__=20")
    assert chess.returncode == 0 and peano.returncode == 0, chess.stderr + peano.stderr
    peano_lines = [line.strip() for line in peano.stdout.splitlines() if line.strip()]
    for (loop, header), kind in zip(headers.items(), LOOP_KINDS[loops]):
        count = counts[loop]
        after = {"range": f" chess_loop_range({count}, )", "flatten": " chess_flatten_loop",
                 "pipeline": f" chess_prepare_for_pipelining chess_loop_range({count}, )"}[kind]
        assert header + after + " {" in chess.stdout, (loop, kind)
        at = next(i for i, line in enumerate(peano_lines) if line.startswith(header))
        if kind == "flatten":  # a full unroll, mlir-aie's AIE_LOOP_UNROLL_FULL (issue 31 item 6)
            assert peano_lines[at - 1] == "#pragma clang loop unroll(full)", (loop, kind, peano_lines[at - 1])
        else:
            assert peano_lines[at - 1] == f"#pragma clang loop min_iteration_count({count})", (loop, kind)
    # Peano unrolls exactly the loops the structure flattens, nothing else
    assert peano.stdout.count("unroll") == LOOP_KINDS[loops].count("flatten")
    assert "#pragma clang" not in chess.stdout and "event0()" in chess.stdout
    assert "chess_" not in peano.stdout and "event1()" in peano.stdout
    host = _preprocess(source, tmp_path)
    assert host.returncode == 0 and "chess_" not in host.stdout and "pragma clang" not in host.stdout
    assert "event0" not in host.stdout


# mlir-aie's aie_kernels/aie_kernel_utils.h under __AIECC__ (the index's versions 87ac0175 and
# 072b1259 agree): AIE_LOOP_UNROLL_FULL a `clang loop unroll(full)` pragma (AIE_LOOP_FLATTEN is empty, which
# would leave a flattened structure a plain loop), AIE_PREPARE_FOR_PIPELINING empty,
# AIE_LOOP_MIN_ITERATION_COUNT(x) a `clang loop min_iteration_count(x)` pragma, AIE_PREPARE_FOR_POSTPIPELINING
# `clang loop pipeline(disable)`, AIE_LOOP_GPR_REALLOC `clang loop hint(aie-gpr-realloc, 1)` (072b1259)
MLIR_AIE_PEANO_HINTS = {"GG_FLATTEN_BEFORE for (;;) GG_FLATTEN_AFTER {}":
                            "#pragma clang loop unroll(full)\nfor (;;) {}",
                        "GG_PIPELINE_BEFORE(7) for (;;) GG_PIPELINE_AFTER(7) {}":
                            "#pragma clang loop min_iteration_count(7)\nfor (;;) {}",
                        "GG_POSTPIPELINE_BEFORE(5) for (;;) GG_POSTPIPELINE_AFTER(5) {}":
                            "#pragma clang loop min_iteration_count(5)\n#pragma clang loop pipeline(disable)\n"
                            "#pragma clang loop hint(aie-gpr-realloc, 1)\nfor (;;) {}",
                        "const int GG_DM_A *a; int GG_DM_C *c;":
                            "const int __aie_dm_resource_a *a; int __aie_dm_resource_c *c;"}


@needs_gxx
def test_peano_hints_spell_mlir_aies_macros(tmp_path: Path) -> None:
    """Under Peano the header's hints preprocess to what mlir-aie's own macros give: the flatten hint to
    AIE_LOOP_UNROLL_FULL's full unroll, the pipeline hint to the trip-count pragma alone, the bfp16 flat loop's
    hint to PR #3650's post-pipelining pragmas, the bank annotations to llvm-aie's keywords."""
    for use, expected in MLIR_AIE_PEANO_HINTS.items():
        out = _preprocess(f'#include "gemm_gen_kernel.h"\n{use}\n', tmp_path, "-D__AIECC__")
        assert out.returncode == 0, out.stderr
        lines = "\n".join(line.strip() for line in out.stdout.splitlines() if line.strip())
        assert lines == expected, (use, lines)


HELPER = re.compile(r"^(?:template <[^>]*>\n)?static (inline|GG_INLINE) ([^\n(]*?)\b(\w+)\(([^)]*)\)", re.M)
KEEPS_REGISTERS = ("MMUL", "aie::vector", "Acc", "Tile", "stream")  # what must not be spilled by a call


def not_inlined_register_helpers(source: str) -> list[str]:
    """Helpers of a rendered kernel that take an argument by reference, or take or return an
    accumulator, a vector or a stream, but are only `static inline` (a hint Peano may ignore)."""
    bad = []
    for kind, ret, name, params in HELPER.findall(source):
        by_ref = re.search(r"&(?!&)", params) is not None
        registers = any(t in ret or t in params for t in KEEPS_REGISTERS)
        if (by_ref or registers) and kind != "GG_INLINE":
            bad.append(name)
    return bad


def test_register_helpers_are_always_inlined() -> None:
    """Every rendered variant (scalar, bfp16, convert-once) forces its accumulator, vector and stream
    helpers inline under both compilers (GG_INLINE: always_inline), and the check catches one that
    is only `static inline`."""
    seen = 0
    for case in [*CASES, *BLOCK_CASES, *(c for pair in ONCE_PAIRS for c in pair)]:
        source = case.source
        assert not not_inlined_register_helpers(source), (case.id, not_inlined_register_helpers(source))
        seen += source.count("static GG_INLINE")
    assert seen > 0  # the scalar kernels' load_b, load_acc and store_acc
    mutant = render_kernel(build(NPU1, "i8", "i8", (1, 2, 2), False, wide=True)).replace(
        "static GG_INLINE void store_acc", "static inline void store_acc")
    assert not_inlined_register_helpers(mutant) == ["store_acc"]


@needs_gxx
def test_gg_inline_forces_inlining_under_every_compiler(tmp_path: Path) -> None:
    for defines in (("-D__AIECC__",), ("-D__chess__",), ()):
        out = _preprocess('#include "gemm_gen_kernel.h"\nstatic GG_INLINE int f(const int &x) { return x; }\n',
                          tmp_path, *defines)
        assert out.returncode == 0 and "__attribute__((always_inline))" in out.stdout, (defines, out.stderr)


@needs_gxx
def test_source_refuses_the_wrong_target_or_missing_emulation_flag(tmp_path: Path) -> None:
    wrong_arch = _preprocess(render_kernel(build(NPU2, "i8", "i8", (1, 1, 1), False)), tmp_path,
                             "-D__AIECC__", "-D__AIE_ARCH__=20")
    assert wrong_arch.returncode != 0 and "rendered for aie2p" in wrong_arch.stderr
    emulated = render_kernel(build(NPU2, "bf16", "bf16", (1, 1, 1), False, emulate=True))
    missing = _preprocess(emulated, tmp_path, "-D__AIECC__", "-D__AIE_ARCH__=21")
    assert missing.returncode != 0 and "AIE_API_EMULATE_BFLOAT16_MMUL_WITH_BFP16" in missing.stderr
    given = _preprocess(emulated, tmp_path, "-D__AIECC__", "-D__AIE_ARCH__=21", *kernel_defines(
        build(NPU2, "bf16", "bf16", (1, 1, 1), False, emulate=True)))
    assert given.returncode == 0, given.stderr
    native = render_kernel(build(NPU2, "bf16", "bf16", (1, 1, 1), False))
    extra = _preprocess(native, tmp_path, "-DAIE_API_EMULATE_BFLOAT16_MMUL_WITH_BFP16")
    assert extra.returncode != 0
    # the define changes bf16 mmuls only: an integer kernel builds with it (a global define is fine)
    ints = render_kernel(build(NPU2, "i8", "i8", (1, 1, 1), False))
    defined = _preprocess(ints, tmp_path, "-D__AIE_ARCH__=21", "-DAIE_API_EMULATE_BFLOAT16_MMUL_WITH_BFP16")
    assert defined.returncode == 0, defined.stderr



@needs_gxx
@pytest.mark.parametrize("k_tiles", [5, 19])
def test_bfp16_loop_hints_and_compiler_guard(tmp_path: Path, k_tiles: int) -> None:
    """The bfp16 kernels carry each compiler's loop hints with their rendered trip counts (chess's
    keywords, Peano's clang loop pragmas, as the scalar kernels), and refuse aie2. With the k-steps
    written out (K_TILES <= bl.UNROLL_K_TILES) the flat loop over 16 x 16 blocks is pipelined;
    with more, a pipelined k loop (K_TILES = 19: 8 ping-pong pairs, then the last pair peeled) sits
    inside it and the block loop carries its trip count only."""
    b = block_build("bf16", BFP16, "bf16", blocks=(2, k_tiles, 1), rho=2)  # config1 A, config3 C
    p = kernel_params(b)
    assert isinstance(p, BlockKernelParams) and p.blocks == 2 and p.split_tiles
    assert p.unroll_k == (k_tiles <= bl.UNROLL_K_TILES)
    source = render_kernel(b)
    chess = _preprocess(source, tmp_path, "-D__chess__", "-D__AIE_ARCH__=21")
    assert chess.returncode == 0, chess.stderr
    block_loop = "for (unsigned blk = 0; blk < BLOCKS; ++blk) "
    k_loop = "for (unsigned i = 0; i < 8; ++i) chess_prepare_for_pipelining chess_loop_range(8, )"
    if p.unroll_k:
        assert block_loop + "chess_prepare_for_pipelining chess_loop_range(2, )" in chess.stdout
        assert not re.search(r"for \(unsigned i = 0; i < \d+;", chess.stdout)  # no k loop
        assert chess.stdout.count("mac_8x8_8x8T(") == 4 * k_tiles
    else:
        assert block_loop + "chess_loop_range(2, )" in chess.stdout and k_loop in chess.stdout
    for count in (p.a_tiles, p.c_tiles, p.zero_obj_iters, p.zero_buf_iters):
        assert f"chess_prepare_for_pipelining chess_loop_range({count}, )" in chess.stdout
    assert "event0()" in chess.stdout
    peano = _preprocess(source, tmp_path, "-D__AIECC__", "-D__AIE_ARCH__=21")
    assert peano.returncode == 0, peano.stderr
    assert "chess_" not in peano.stdout and "#error" not in peano.stdout and "event1()" in peano.stdout
    lines = [line.strip() for line in peano.stdout.splitlines() if line.strip()]
    at = lines.index(block_loop + "{")
    if p.unroll_k:  # mlir-aie PR #3650's flat loop: left to the post-RA pipeliner, GPRs reallocated (issue 31 item 9)
        assert lines[at - 3:at] == ["#pragma clang loop min_iteration_count(2)", "#pragma clang loop pipeline(disable)",
                                    "#pragma clang loop hint(aie-gpr-realloc, 1)"]
    else:
        assert lines[at - 1] == "#pragma clang loop min_iteration_count(2)"
        at = lines.index("for (unsigned i = 0; i < 8; ++i) {")
        assert lines[at - 1] == "#pragma clang loop min_iteration_count(8)"
    assert peano.stdout.count("pipeline(disable)") == int(p.unroll_k)  # nowhere else
    # restrict streams with PR #3650's data-memory resources, and C's plain accesses through its bank (config3 C)
    for operand in "abc":
        assert f"aie::block_vector_restrict_input_buffer_stream<bfp16ebs8, 64, aie_dm_resource::{operand}>" in source
    # each stream is the one of its operand's resource: A's over pA, B's over pB, C's over the slice
    assert re.findall(r"TileIn([ABC]) \w+\(tile_at\(p([AB]),", source) == [("A", "A"), ("B", "B")]
    assert "(const T_ACC __aie_dm_resource_c *)p" in peano.stdout and "__aie_dm_resource" not in chess.stdout
    for count in (p.a_tiles, p.c_tiles, p.zero_obj_iters, p.zero_buf_iters):
        assert f"#pragma clang loop min_iteration_count({count})" in lines
    aie2 = _preprocess(source, tmp_path, "-D__chess__", "-D__AIE_ARCH__=20")
    assert aie2.returncode != 0 and "rendered for aie2p" in aie2.stderr


@needs_gxx
@pytest.mark.parametrize("variant", list(BFP16_FIFO_VARIANTS))
def test_every_bfp16_variant_preprocesses_for_peano_and_chess(tmp_path: Path, variant: str) -> None:
    """Peano is the bfp16 kernels' default compiler: every variant preprocesses for it with no chess
    keyword and no #error, and rendered for chess (--chess) it still carries chess's keywords."""
    case, _ = BFP16_FIFO_VARIANTS[variant]
    peano_build = replace(case.build, compiler="peano")
    source = render_kernel(peano_build)
    errors = [line for line in source.splitlines() if line.startswith("#error")]
    assert errors and all("rendered for aie2p" in line for line in errors)  # the target guard only
    peano = _preprocess(source, tmp_path, "-D__AIECC__", "-D__AIE_ARCH__=21", *kernel_defines(peano_build))
    assert peano.returncode == 0, peano.stderr
    assert "chess_" not in peano.stdout and "#pragma clang loop min_iteration_count(" in peano.stdout
    chess_build = replace(case.build, compiler="chess")
    chess = _preprocess(render_kernel(chess_build), tmp_path, "-D__chess__", "-D__AIE_ARCH__=21",
                        *kernel_defines(chess_build))
    assert chess.returncode == 0, chess.stderr
    assert "chess_prepare_for_pipelining" in chess.stdout and "#pragma clang" not in chess.stdout


# ---- the host API fails where the real one or the hardware would --------------------------------------
@needs_gxx
@pytest.mark.parametrize("mutant", list(HOST_MUTANTS), ids=lambda c: c.mutant)
def test_the_host_api_refuses_what_the_real_one_would(libraries, mutant) -> None:
    """A shift on an acc32 store or load, a misaligned vector load, an implicit accumulator
    conversion, a seek after a pop, a transpose of B blocks as a shape that is not the vector's, a bfp16
    kernel whose C prefetch runs beside its A and B streams (FIFO limit on): each fails (at compile
    time or during the call), while the unpatched kernel passes (with the same host options)."""
    message = HOST_MUTANTS[mutant]
    control = Case(mutant.build, host_defines=mutant.host_defines)
    is_block = mutant.build.types.precision.block
    run = (lambda k: run_block_tile(k, block_inputs(mutant.build))) if is_block else (
        lambda k: run_tile(k, inputs(control)))
    run(load(libraries, control))
    with pytest.raises(AssertionError, match=re.escape(message)):
        run(load(libraries, mutant))


@needs_gxx
def test_acc32_overflow_is_refused(libraries) -> None:
    """int16 x int16 into a 32-bit accumulator (npu1 mmul 4x2x8): a few products of 32767 leave it;
    what acc32 does then is unpublished, so the host refuses instead of guessing."""
    case = Case(_I16_ACC32)
    kernel = load(libraries, case)
    b = case.build
    full = [(np.full((b.m, b.k), 32767, np.int16), np.full((b.k, b.n), 32767, np.int16))] * 2
    with pytest.raises(HostApiError, match="a mac leaves the acc32 lanes"):
        run_tile(kernel, full)
    small_steps = [(np.ones((b.m, b.k), np.int16), np.ones((b.k, b.n), np.int16))] * 2
    assert np.array_equal(run_tile(kernel, small_steps), expected(b, small_steps))


@needs_gxx
@pytest.mark.parametrize("case",
                         [c for c in CASES if c.build.types.dtype_in == "i16" and c.build.types.precision.converts_c
                                  and c.build.types.dtype_out == "i32"], ids=lambda c: c.id)
def test_acc64_int32_c_on_full_range_int16_is_the_saturated_product(libraries, case: Case) -> None:
    """int16 x int16 -> int32 with C accumulated in int64 (acc64 lanes kept whole between calls as int32
    pairs): on full-range inputs, where most sums leave int32 and partial sums cross it both ways,
    C equals clip(A @ B) exactly (with the design's shift), what per-call int32 C cannot do."""
    b = case.build
    rng = np.random.default_rng(3)
    steps = [(rng.integers(-32768, 32768, (b.m, b.k)).astype(np.int16),
              rng.integers(-32768, 32768, (b.k, b.n)).astype(np.int16)) for _ in range(4)]
    a = np.concatenate([s[0] for s in steps], axis=1).astype(np.int64)
    bb = np.concatenate([s[1] for s in steps], axis=0).astype(np.int64)
    nm = numerics(b)
    exact = nm.finish(a @ bb)  # one shift-round-saturate of the exact sum
    assert np.count_nonzero(np.abs(a @ bb) > np.iinfo(np.int32).max) > b.m * b.n // 8
    got = run_tile(load(libraries, case), steps, modes=(Rounding.FLOOR, Saturation.NONE))
    assert_bit_equal(got, exact, case.id)
    if not b.shift:
        assert np.array_equal(got, np.clip(a @ bb, -2**31, 2**31 - 1))
    out = b.with_(acc=None)  # the same kernel with C in int32 between calls loses it
    per_call = numerics(out)
    c = per_call.zero((b.m, b.n))
    for a_tile, b_tile in steps:
        c = per_call.call(c, a_tile, b_tile)
    assert not np.array_equal(c, exact)


@needs_gxx
def test_subnormal_operands_are_refused(libraries) -> None:
    case = Case(_BF16)
    kernel = load(libraries, case)
    steps = inputs(case)
    a0 = steps[0][0].copy()
    a0.view(np.uint16)[0, 0] = 0x0001  # the smallest bf16 subnormal
    with pytest.raises(HostApiError, match="a subnormal A value"):
        run_tile(kernel, [(a0, steps[0][1]), steps[1]])



@needs_gxx
def test_subnormal_b_is_refused_by_the_convert_once_multiply(libraries) -> None:
    """The convert-once kernel's B^T times one (mul_elem_64) refuses a subnormal, as mmul does."""
    once = ONCE_PAIRS[0][1]
    steps = inputs(once)
    b0 = steps[0][1].copy()
    b0.view(np.uint16)[0, 0] = 0x0001
    with pytest.raises(HostApiError, match="a subnormal bf16 operand of mul_elem_64"):
        run_tile(load(libraries, once), [(steps[0][0], b0), steps[1]])


def _compiles(code: str, arch: int, *defines: str) -> subprocess.CompletedProcess[str]:
    assert CXX is not None
    src = f"#include <aie_api/aie.hpp>\nint main() {{\n{code}\nreturn 0;\n}}\n"
    return subprocess.run([CXX, "-std=c++20", "-fsyntax-only", f"-D__AIE_ARCH__={arch}", *defines, f"-I{HOST_API}",
                           "-x", "c++", "-"], input=src, capture_output=True, text=True)


@needs_gxx
@pytest.mark.parametrize("code,arch,defines", [
    ("using M = aie::mmul<4, 16, 8, bfloat16>; M m;", 20, ()),  # AIE2 bf16 4x16x8: a sparse B only
    ("using M = aie::mmul<4, 8, 8, int16>; M m;", 21, ()),  # AIE2P int16 4x8x8: a sparse B only
    ("using M = aie::mmul<4, 8, 8, int8, int8, acc64>; M m;", 20, ()),  # int8 has acc32 only
    ("using M = aie::mmul<4, 2, 8, int16, int16, acc64>; M m;", 20, ()),  # acc32 only
    ("aie::accum<accfloat, 64> a = aie::vector<float, 64>{};", 21, ()),  # explicit conversion
    ("static_assert(aie::mmul<4, 8, 4, bfloat16>::via_bfp16);", 21, ("-DAIE_API_EMULATE_BFLOAT16_MMUL_WITH_BFP16",)),
    ("static_assert(aie::mmul<8, 8, 8, bfloat16>::via_bfp16);", 21, ("-DAIE_API_EMULATE_BFLOAT16_MMUL_WITH_BFP16=0",)),
    ("static_assert(aie::mmul<4, 8, 8, bfloat16>::via_bfp16);", 20, ("-DAIE_API_EMULATE_BFLOAT16_MMUL_WITH_BFP16",)),
    ("", 19, ()),  # an arch the host does not model
    # int32 pairs loaded as a vector are twice C's size: no mmul takes them without vector_cast
    ("aie::mmul<4, 4, 4, int16> m(aie::vector<int32, 32>{});", 20, ()),
], ids=["aie2-bf16-4x16x8", "aie2p-i16-4x8x8", "i8-acc64", "i16-4x2x8-acc64", "implicit-accum",
        "emulated-4x8x4", "macro-0", "aie2-emulation", "unknown-arch", "pairs-as-c"])
def test_the_host_api_refuses_at_compile_time(code, arch, defines) -> None:
    assert _compiles(code, arch, *defines).returncode != 0


@needs_gxx
def test_the_host_api_takes_what_the_real_one_takes() -> None:
    emu = ("-DAIE_API_EMULATE_BFLOAT16_MMUL_WITH_BFP16",)
    for code, arch, defines in [
        ("static_assert(aie::mmul<8, 8, 8, bfloat16>::via_bfp16 && aie::mmul<4, 8, 8, bfloat16>::via_bfp16);", 21,
         emu),
        ("static_assert(!aie::mmul<8, 8, 4, bfloat16>::via_bfp16 && !aie::mmul<4, 8, 4, bfloat16>::via_bfp16);", 21,
         emu),
        ("static_assert(aie::mmul<4, 4, 4, int16>::acc_bits == 64 && aie::mmul<4, 2, 8, int16>::acc_bits == 32);",
         20, ()),
        ("static_assert(aie::mmul<4, 4, 8, int16>::acc_bits == 64 && aie::mmul<8, 1, 8, int16>::acc_bits == 32);",
         21, ()),
        ("aie::accum<accfloat, 64> a(aie::vector<float, 64>{}); (void)a;", 21, ()),
        # acc64 lanes to int32 pairs and back, as the kernels keep an int64 C between calls
        ("using M = aie::mmul<4, 4, 4, int16>; M m(aie::vector_cast<acc64>(aie::vector<int32, 32>{}));"
         " aie::vector<int32, 32> v = aie::vector_cast<int32>(m.to_accum()); (void)v;", 20, ()),
        ("using M = aie::mmul<4, 4, 8, int16>; M m(aie::vector_cast<acc64>(aie::vector<int32, 64>{}));"
         " aie::vector<int32, 64> v = aie::vector_cast<int32>(m.to_accum()); (void)v;", 21, ()),
    ]:
        done = _compiles(code, arch, *defines)
        assert done.returncode == 0, done.stderr


# ---- the FIFO limit, transpose shapes and vector alignment (issue 20 item 3) ---------------------------
def _host_run(code: str, arch: int, *defines: str, prelude: str = "") -> str:
    """Compile and run `code` (the body of main) against the host stand-in (its test entry points,
    host_probe.cc, linked in; `prelude` after the includes); what it refused ("" if nothing)."""
    assert CXX is not None
    src = (f"#include <aie_api/aie.hpp>\n#include <cstdio>\n{prelude}int main() {{\n{code}\n"
           "std::fputs(aie::host::error.c_str(), stdout);\nreturn 0;\n}\n")
    flags = ("-std=c++20", "-Wall", "-Wextra", "-Werror", "-Wno-unused-local-typedefs", f"-D__AIE_ARCH__={arch}",
             *defines, f"-I{HOST_API}", f"-I{kernel_include_dir()}")
    exe = host_compile.host_program(src, flags)
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout


_TILES = ("alignas(64) static unsigned char mem[72 * 8] = {};\n"
          "using In = aie::block_vector_input_buffer_stream<bfp16ebs8, 64>;\n"
          "using Out = aie::block_vector_output_buffer_stream<bfp16ebs8, 64>;\n"
          "[[maybe_unused]] const bfp16ebs8 *src = reinterpret_cast<const bfp16ebs8 *>(mem);\n"
          "[[maybe_unused]] bfp16ebs8 *dst = reinterpret_cast<bfp16ebs8 *>(mem);\n")
# kernels written for the FIFO limit: (body, target, whether the limit is on) -> what the host says
_FIFO_KERNELS = {
    "three-live-inputs": (_TILES + "In a(src), b(src), c(src); a.pop(); b.pop(); c.pop();", 21, True,
                          "3 block-vector input streams hold a load FIFO at once, over the limit of 2: AIE2P has 2 "
                          "load FIFOs (lf0, lf1) and 1 store FIFO (sf): llvm-aie aie2p/AIE2PRegisterInfo.td"),
    "two-live-outputs": (_TILES + "Out a(dst), b(dst); a.push(In(src).pop()); b.push(In(src).pop());", 21, True,
                         "2 block-vector output streams hold a store FIFO at once, over the limit of 1"),
    "a-copy-holds-one-more": (_TILES + "In a(src), b(src); a.pop(); b.pop(); In c = a; (void)c;", 21, True,
                              "3 block-vector input streams hold a load FIFO at once"),
    "aie2-has-none": (_TILES + "In a(src); a.pop();", 20, True,
                      "1 block-vector input streams hold a load FIFO at once, over the limit of 0: AIE2 has no load "
                      "or store FIFO registers: llvm-aie aie2/AIE2GenRegisterInfo.td"),
    # what fits: two popped inputs and one output; a stream not popped yet holds nothing, one out of
    # scope holds nothing any more
    "two-inputs-one-output": (_TILES + "In a(src), b(src), idle(src); Out o(dst); a.pop(); b.pop();"
                              " o.push(a.pop()); { In c(src); (void)c; }", 21, True, ""),
    "in-turn": (_TILES + "for (int i = 0; i < 4; ++i) { In a(src), b(src); a.pop(); b.pop(); }"
                " { Out o(dst); o.push(In(src).pop()); } { Out o(dst); o.push(In(src).pop()); }", 21, True, ""),
    "limit-off": (_TILES + "In a(src), b(src), c(src); a.pop(); b.pop(); c.pop();", 21, False, ""),
}


@needs_gxx
@pytest.mark.parametrize("name", list(_FIFO_KERNELS))
def test_the_host_api_refuses_more_live_streams_than_fifo_registers(name: str) -> None:
    """With -DGEMM_GEN_HOST_FIFO_LIMIT, a third input stream holding a load FIFO (popped and still in
    scope; a copy of one counts too), a second output stream holding the store FIFO, or any on AIE2
    fails with the limit and its source; two inputs and one output pass, and without the define nothing
    is refused."""
    code, arch, limit, message = _FIFO_KERNELS[name]
    got = _host_run(code, arch, *((FIFO_LIMIT,) if limit else ()))
    if message:
        assert message in got
    else:
        assert got == ""


_RESTRICT = _TILES + ("using RIn = aie::block_vector_restrict_input_buffer_stream<bfp16ebs8, 64, aie_dm_resource::c>;\n"
                      "mem[72 * 6] = 1;  // tile 6 differs from tiles 0 .. 5\n"
                      "In six(src); six.seek(6); const auto tile = six.pop();\n")
# kernels written for the restrict input stream (aie_api's block_vector_restrict_input_buffer_stream; mlir-aie PR
# #3650's kernels read A, B and C through them): what the host says
_RESTRICT_KERNELS = {
    # the tile read through a live restrict stream is overwritten by an output stream, then the stream pops again
    "written-under-a-live-stream": (_RESTRICT + "RIn r(src); r.pop(); { Out o(dst); o.push(tile); "
                                    "o.push(tile); } r.pop();",
                                    "written by another path while the stream lives"),
    # ... or it ends without another pop: refused as it ends
    "written-before-the-stream-ends": (_RESTRICT + "{ RIn r(src); r.pop(); Out o(dst); o.push(tile); "
                                       "o.push(tile); }", "written by another path while the stream lives"),
    # the template's own pattern: the restrict stream ends before anything writes what it read
    "ended-first": (_RESTRICT + "{ RIn r(src); r.pop(); r.pop(); } { Out o(dst); o.push(tile); }", ""),
    # writes it never read: tiles 4 .. 7 while it read 0 and 1
    "disjoint": (_RESTRICT + "RIn r(src); r.pop(); r.pop(); { Out o(dst); o.seek(4); o.push(tile); } r.pop();",
                 ""),
    # the plain stream promises nothing: the same write is no refusal
    "plain-stream": (_RESTRICT + "In r(src); r.pop(); { Out o(dst); o.push(tile); o.push(tile); } r.pop();", ""),
}


@needs_gxx
@pytest.mark.parametrize("name", list(_RESTRICT_KERNELS))
def test_the_host_api_refuses_a_write_under_a_live_restrict_stream(name: str) -> None:
    """A restrict input stream reads through a restrict pointer: while it lives nothing may write what it read by
    another path (C11 6.7.3.1; Peano may move its loads past the write). The host refuses a tile that changed under
    a live restrict stream, at its next pop or as it ends; the plain stream, a disjoint write or a write after the
    stream ended pass."""
    code, message = _RESTRICT_KERNELS[name]
    got = _host_run(code, 21)
    if message:
        assert message in got
    else:
        assert got == ""


@needs_gxx
@pytest.mark.parametrize("variant", list(BFP16_FIFO_VARIANTS))
def test_bfp16_kernels_hold_the_live_streams_documented(libraries, variant: str) -> None:
    """The most live (input, output) streams of each variant, measured on the kernel as rendered."""
    case, counts = BFP16_FIFO_VARIANTS[variant]
    kernel = load(libraries, case)
    kernel.fifo_peaks()
    if case.build.types.precision.block:
        run_block_tile(kernel, block_inputs(case.build))
    else:
        run_tile(kernel, inputs(case))
    assert kernel.fifo_peaks() == counts


@needs_gxx
@pytest.mark.parametrize("variant", list(BFP16_FIFO_VARIANTS))
def test_bfp16_kernels_fit_the_fifo_registers(libraries, variant: str) -> None:
    """Every bfp16 variant (config1, 2 with row- and column-major B, 3, convert-once, bfp16 x bfp16) runs
    with the FIFO limit on (issue 20 item 1: one A stream and one B stream in the k loop, AIE2P's two
    load FIFOs; one output stream)."""
    case, _ = BFP16_FIFO_VARIANTS[variant]
    assert FIFO_LIMIT in host_defines(case.build)
    kernel = load(libraries, case)
    if case.build.types.precision.block:
        run_block_tile(kernel, block_inputs(case.build))
    else:
        run_tile(kernel, inputs(case))


def stream_loads(kernel: Kernel, b: KernelBuild) -> tuple[int, int]:
    """(pops, fills) of the block-vector input streams over one tile (zero, two k-steps, convert)."""
    kernel.lib.gg_host_reset_stream_loads()
    run_block_tile(kernel, block_inputs(b))
    out = (ctypes.c_ulonglong * 2)()
    kernel.lib.gg_host_stream_loads(out)
    return int(out[0]), int(out[1])


@needs_gxx
@pytest.mark.parametrize("name", STREAM_BUILDS)
def test_streams_refill_on_every_pop_of_a_rolled_loop_under_peano(libraries, name: str) -> None:
    """Per 16 x 16 block, the A and B streams each pop 2 tiles per k-step. Where the k-steps are written out the
    fill count is a constant after inlining: one fill per 8 pops, under either compiler. In the pipelined k loop
    under Peano every pop after the block's first k-step fills (its count is carried around the loop), under
    chess (assumed to prove the count) still one per 8. The model's load budget per k-step
    (model.kernel.block_counts' step_loads, pop_loads) is what the host counted, to within the first k-step's
    manifest pops of each stream (one fill per stream and block)."""
    from gemm_gen.model import kernel as km
    from gemm_gen.spec.rules.block_loop import writes_out_k

    b = STREAM_BUILDS[name]
    k_tiles, blocks = b.k // 8, (b.t_ma // 16) * (b.n // 16) * b.rho * 2  # two k-steps
    pops_per_stream = 2 * k_tiles
    for defines in ((), (PEANO,)):
        case = STREAM_CASES[(name, defines)]
        pops, fills = stream_loads(load(libraries, case), b)
        assert pops == 2 * blocks * pops_per_stream
        rolled = defines and not writes_out_k(b.k)
        per_stream = pops_per_stream - 1 if rolled else -(-pops_per_stream // 8)
        assert fills == 2 * blocks * per_stream, (name, defines)
        ks = km.kernel_shape(NPU2, b.types.precision.a, b.types.precision.out, b.mmul, False, b.types.precision.b,
                             b.types.precision.acc,
                             compiler="peano" if defines else "chess")
        ks = replace(ks, block_loop=None)
        loop_ks = replace(ks, block_loop=km.bl.FLAT_LOOP if writes_out_k(b.k) else km.bl.K_LOOP_IN_BLOCK_LOOP)
        model = km.block_counts(loop_ks)["step_loads"] * k_tiles * blocks  # in 64-byte loads
        assert abs((pops + fills) - model) <= 2 * blocks, (name, defines, pops + fills, model)


@needs_gxx
def test_the_host_sees_a_loop_carried_fill_count() -> None:
    """The host's model of Peano's chess_manifest on written code: a stream popped in a hinted loop fills on
    every pop from the loop's second pop on; popped in straight-line code only at count 0; a pop_seek makes the
    count a constant again; without -DGG_HOST_PEANO (chess) only at count 0."""
    code = ("alignas(64) static unsigned char mem[72 * 64] = {};\n"
            "const bfp16ebs8 *p = reinterpret_cast<const bfp16ebs8 *>(mem);\n"
            "unsigned long long out[2]; gg_host_reset_stream_loads();\n"
            "{ aie::block_vector_input_buffer_stream<bfp16ebs8, 64> s(p);\n"
            "  for (int i = 0; i < 16; ++i) (void)s.pop(); }\n"  # straight-line (no hint): 2 fills
            "gg_host_stream_loads(out); std::printf(\"%llu %llu,\", out[0], out[1]); gg_host_reset_stream_loads();\n"
            "{ aie::block_vector_input_buffer_stream<bfp16ebs8, 64> s(p);\n"
            "  GG_PIPELINE_BEFORE(16) for (int i = 0; i < 16; ++i) GG_PIPELINE_AFTER(16) { (void)s.pop(); } }\n"
            "gg_host_stream_loads(out); std::printf(\"%llu %llu,\", out[0], out[1]); gg_host_reset_stream_loads();\n"
            "{ aie::block_vector_input_buffer_stream<bfp16ebs8, 64> s(p);\n"
            "  GG_PIPELINE_BEFORE(8) for (int i = 0; i < 8; ++i) GG_PIPELINE_AFTER(8) { (void)s.pop(); }\n"
            "  (void)s.pop_seek(0); (void)s.pop(); (void)s.pop(); }\n"
            "gg_host_stream_loads(out); std::printf(\"%llu %llu\", out[0], out[1]);\n")
    extern = ('#include "gemm_gen_kernel.h"\nextern "C" { void gg_host_stream_loads(unsigned long long *); '
              'void gg_host_reset_stream_loads(); }\n')
    assert _host_run(code, 21, "-DGG_HOST_PEANO", prelude=extern) == "16 2,16 16,11 10"
    assert _host_run(code, 21, prelude=extern) == "16 2,16 2,11 3"


@needs_gxx
@pytest.mark.parametrize("code,arch,message", [
    # 64-bit vectors need the target's natural alignment (vector_ldst_align): 32 on AIE2, 64 on AIE2P
    ("alignas(64) static int8 x[128] = {}; aie::load_v<8>(x + 16);", 20,
     "load_v of a 8-byte vector at an address 16 bytes past a 32-byte boundary"),
    ("alignas(64) static int8 x[128] = {}; aie::store_v(x + 32, aie::vector<int8, 8>{});", 21,
     "store_v of a 8-byte vector at an address 32 bytes past a 64-byte boundary"),
    ("alignas(64) static int8 x[128] = {}; aie::load_v<8>(x + 32);", 20, ""),
    ("alignas(64) static int16 x[128] = {}; aie::load_v<8>(x + 8);", 21, ""),  # 128 bits: 16 bytes
    ("alignas(64) static int16 x[128] = {}; aie::load_v<16>(x + 16);", 21, ""),  # 256 bits: 32 bytes
    ("alignas(64) static int16 x[128] = {}; aie::load_v<64>(x + 16);", 20, ""),  # 1024 bits on AIE2: 32 bytes
    # aie::transpose: Row * Col must be the vector's size (REQUIRES_MSG in aie_api's aie.hpp)
    ("aie::transpose(aie::vector<int16, 32>{}, 8, 8);", 21,
     "aie::transpose of a 32-element vector as 8 x 8: the AIE API requires Row * Col == Elems"),
    ("aie::transpose(aie::vector<int16, 32>{}, 0, 32);", 20, "as 0 x 32"),
    ("aie::transpose(aie::vector<bfloat16, 64>{}, 8, 8); aie::transpose(aie::vector<int8, 32>{}, 4, 8);", 21, ""),
], ids=["aie2-v8-at-16", "aie2p-v8-at-32", "aie2-v8-at-32", "aie2p-128-bit-at-16", "aie2p-256-bit-at-32",
        "aie2-1024-bit-at-32", "transpose-size", "transpose-zero-rows", "transpose-fits"])
def test_the_host_api_refuses_misaligned_small_vectors_and_bad_transposes(code: str, arch: int, message: str) -> None:
    """load_v / store_v align as aie_api's vector_ldst_align (a 64-bit vector needs the target's natural
    32 or 64 bytes, a 128-bit one 16, a 256-bit one 32); aie::transpose needs Row * Col == Elems."""
    got = _host_run(f"{code}\n", arch)
    if message:
        assert message in got
    else:
        assert got == ""
