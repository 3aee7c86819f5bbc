"""The int8 x int4 kernel (issue 22, W4A8), rendered from templates/mm.cc.j2 and compiled on the host
against tests/aie_host (its int4 vectors and 8b x 4b mmul shapes as aie_api declares them): C equals
KernelNumerics on the int4 values bit for bit, and the mutants that break the int4 path fail."""

from __future__ import annotations

import numpy as np
import pytest

from gemm_gen.backends.kernel_source import kernel_params, render_kernel
from gemm_gen.design.ir import KernelBuild
from gemm_gen.facts.devices import NPU1, NPU2, Device
from gemm_gen.facts.dtypes import I4, pack_i4
from gemm_gen.facts.inputs import make_inputs
from gemm_gen.facts.l1_layout import a_layout, b_layout, c_layout
from gemm_gen.spec.request import Types
from gemm_gen.spec.rules import kernel_variant as kv

from .test_kernels import (
    CXX,
    Guarded,
    HostApiError,
    Kernel,
    assert_bit_equal,
    compile_library,
    expected,
    host_defines,
    needs_gxx,
)

OPERANDS = "i8xi4"


def i4_build(dev: Device, out: str, blocks: tuple[int, int, int], mmul: tuple[int, int, int] | None = None,
             rho: int = 1, loops: str | None = None, wide: bool = False, shift: int = 0,
             c_col_maj: bool = False) -> KernelBuild:
    """An int8 x int4 KernelBuild whose A tile is `blocks` (2r, s, 2t) units of the mmul."""
    r, s, t = mmul or dev.shapes(OPERANDS)[0]
    m, k, n = 2 * r * blocks[0] * rho, s * blocks[1], 2 * t * blocks[2]
    v = kv.choose(dev, OPERANDS, (r, s, t), False, m // rho, k, n, None, loops)
    acc = "i32" if wide and out != "i32" else None
    return KernelBuild(dev.aie_target, Types.of("i8", out, "i4", acc), m, k, n, (r, s, t), False, False, "conv_even",
                       "saturate", shift, rho=rho, expansion=v.expansion, loops=v.loops, c_col_maj=c_col_maj)


BUILDS = [
    i4_build(NPU2, "i32", (1, 2, 2)), i4_build(NPU2, "i32", (2, 3, 1), loops="k-pipelined"),
    i4_build(NPU2, "i8", (1, 2, 1), rho=2, shift=6), i4_build(NPU2, "i16", (1, 3, 2), wide=True, shift=3),
    i4_build(NPU1, "i32", (1, 2, 2)), i4_build(NPU1, "i32", (2, 2, 1), mmul=(8, 16, 8)),
    i4_build(NPU1, "i32", (1, 2, 1), mmul=(4, 32, 8), loops="k-pipelined"),
    i4_build(NPU1, "i8", (2, 3, 2), wide=True, shift=5, c_col_maj=True),
]


def _b_bytes(b: KernelBuild, b_tile: np.ndarray, pack=pack_i4) -> np.ndarray:
    """B's k x n int4 values as the L1 buffer holds them: the blocked layout's values, packed in pairs
    (the DMA moves whole words of the host's row-packed B, so pairs stay pairs)."""
    _, s, t = b.mmul
    flat = np.empty(b.k * b.n, np.int8)
    flat[b_layout(b.k, b.n, s, t, False)] = b_tile
    return pack(flat)


def run_int4_tile(kernel: Kernel, steps: list[tuple[np.ndarray, np.ndarray]], pack=pack_i4) -> np.ndarray:
    """zero, then per k-step one matmul per A tile (rho of them) on L1 buffers in the kernel's layouts."""
    b = kernel.build
    r, s, t = b.mmul
    t_out = np.dtype({"i8": np.int8, "i16": np.int16, "i32": np.int32}[b.types.dtype_out])
    c = Guarded(b.m * b.n, t_out, 8 * b.m * b.n // t_out.itemsize)
    acc = Guarded(b.m * b.n - b.c_split_elems, np.int32, 2 * b.m * b.n) if b.types.precision.converts_c else None
    c_bufs = (c.ptr, *((acc.ptr,) if acc is not None else ()))
    kernel.checked(kernel.zero_fn, *c_bufs)
    for a_tile, b_tile in steps:
        b_buf = Guarded(I4.nbytes(b.k * b.n), np.uint8)
        b_buf.body[:] = _b_bytes(b, b_tile, pack)
        for i in range(b.rho):
            a_buf = Guarded(b.t_ma * b.k, np.int8)
            a_buf.body[a_layout(b.t_ma, b.k, r, s, False)] = a_tile[i * b.t_ma:(i + 1) * b.t_ma]
            kernel.checked(kernel.matmul_fn, a_buf.ptr, b_buf.ptr, c.ptr, *c_bufs[1:], *((i,) if b.rho > 1 else ()))
            assert a_buf.guards_intact()
        assert b_buf.guards_intact()
    if kernel.convert_fn is not None:
        kernel.checked(kernel.convert_fn, *c_bufs)
    assert c.guards_intact(), "the kernel wrote outside its C tile"
    return c.body[c_layout(b.m, b.n, r, t, b.c_col_maj)]


def steps_of(b: KernelBuild, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    a, bb = make_inputs(b.m, 2 * b.k, b.n, "i8", b.types.dtype_out, seed=seed, dtype_b="i4")
    assert bb.min() == -8 and bb.max() == 7
    return [(a[:, i * b.k:(i + 1) * b.k], bb[i * b.k:(i + 1) * b.k]) for i in range(2)]


def _kernel(b: KernelBuild, source: str | None = None) -> Kernel:
    return Kernel(compile_library(source or render_kernel(b), host_defines(b)), b)


def _high_nibble_first(values: np.ndarray) -> np.ndarray:
    u = np.asarray(values).astype(np.int64) & 0xF
    return (u[..., 1::2] | (u[..., 0::2] << 4)).astype(np.uint8)


def test_the_int4_kernel_says_what_it_reads() -> None:
    b = BUILDS[0]
    p = kernel_params(b)
    assert (p.ctype_b, p.ctype_b_mem, p.b_values_per_elem) == ("int4", "uint8", 2)
    text = render_kernel(b)
    assert "aie::mmul<4, 16, 16, T_in, T_b, accauto>" in text and "i8 x i4 -> i32" in text
    assert "aie::vector_cast<T_b>(aie::load_v<B_BLOCK>(p))" in text and "uint8 *B" in text
    assert "using T_b = int8;" in render_kernel(KernelBuild("aie2p", Types.of("i8", "i32"), 32, 32, 32, (4, 8, 8),
                                                            False,
                                                            False, "conv_even", "saturate", 0))


@needs_gxx
@pytest.mark.parametrize("b", BUILDS, ids=lambda b: f"{b.aie_target}-{b.types.dtype_out}-{'x'.join(map(str, b.mmul))}-"
                                                     f"{b.m}x{b.k}x{b.n}-rho{b.rho}-{b.loops}")
def test_int4_kernel_matches_numerics(b: KernelBuild) -> None:
    steps = steps_of(b)
    got = run_int4_tile(_kernel(b), steps)
    assert_bit_equal(got, expected(b, steps), b.object_file)
    if b.types.dtype_out == "i32" and not b.shift:  # and the exact product itself
        exact = sum(a.astype(np.int64) @ bb.astype(np.int64) for a, bb in steps)
        assert np.array_equal(got.astype(np.int64), exact)


@needs_gxx
def test_a_high_nibble_first_buffer_fails_the_kernel() -> None:
    b = BUILDS[0]
    steps = steps_of(b)
    with pytest.raises(AssertionError, match="elements differ"):
        assert_bit_equal(run_int4_tile(_kernel(b), steps, pack=_high_nibble_first), expected(b, steps), "mutant")


@needs_gxx
@pytest.mark.parametrize("b", [BUILDS[0], BUILDS[4]], ids=["aie2p", "aie2"])
def test_b_pointers_that_count_int4_elements_fail(b: KernelBuild) -> None:
    """amd/IRON PR #182's bug: advancing the B pointer by size_B (int4 elements) instead of its bytes."""
    old = "constexpr unsigned B_STEP_K = (B_COL_MAJ ? 1 : COL_BLOCKS) * B_BLOCK;"
    source = render_kernel(b)
    assert source.count(old) == 1
    steps = steps_of(b)
    mutant = _kernel(b, source.replace(old, old.replace("B_BLOCK;", "MMUL::size_B;")))
    with pytest.raises((AssertionError, HostApiError)):
        assert_bit_equal(run_int4_tile(mutant, steps), expected(b, steps), "mutant")


@needs_gxx
@pytest.mark.parametrize("code, arch, message", [
    ("aie::mmul<4, 16, 8, int8, int4> m;", 21, "no such shape"),  # aie2's shape on aie2p
    ("aie::mmul<4, 16, 16, int8, int4> m;", 20, "no such shape"),  # aie2p's on aie2
    ("aie::mmul<4, 4, 8, int16, int4> m;", 21, "no such shape"),  # no 16b x 4b
    ("aie::mmul<4, 16, 16, int8, int4, acc64> m;", 21, "acc32 only"),
    ("auto v = aie::vector_cast<int4>(aie::vector<int16, 8>{});", 21, "from bytes"),
])
def test_the_host_api_refuses_int4_uses_the_real_one_lacks(code: str, arch: int, message: str, tmp_path) -> None:
    import subprocess

    from .test_kernels import HOST_API
    src = tmp_path / "probe.cc"
    src.write_text(f"#include <aie_api/aie.hpp>\nvoid probe() {{ {code} (void)m; }}\n".replace(
        "(void)m;", "(void)m;" if " m;" in code else "(void)v;"))
    assert CXX is not None
    proc = subprocess.run([CXX, "-std=c++20", "-fsyntax-only", f"-D__AIE_ARCH__={arch}", f"-I{HOST_API}", str(src)],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr[-2000:]
