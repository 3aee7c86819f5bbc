"""The W4A16 kernel (issue 22 item 1b): bf16 A times int4 B with group scales, rendered from
templates/mm.cc.j2 and compiled on the host against tests/aie_host.

Each matmul call dequantizes its B object (gemm_gen/facts/groupquant.py ObjectLayout) once into the bf16
scratch b_deq, then runs the bf16 body on it. Checked here: C equals the bf16 kernel's numerics on
A x groupquant.dequant(q, s, z, g) bit for bit, on npu1 (bf16 4x8x4, 8x8x4) and npu2 (the default
bf16-via-bfp16 8x8x8, and native 4x8x8 / 4x8x4), k below and above g, g = 32, 64, 128, with and
without zero points; C is within 1% (Frobenius) of the float64 product A @ dequant_exact; the
scratch holds groupquant.dequant's bits; each call unpacks the k n int4 values exactly once (the
host counts them). Mutants that must fail: a scale row off by one group, a high-nibble-first buffer,
truncation instead of round-to-nearest-even, a zero point added, and (performance) a dequantization
repeated inside the call. The host API's new rules each have a use that breaks them.
"""

from __future__ import annotations

import ctypes
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gemm_gen.backends.kernel_source import kernel_params, render_kernel
from gemm_gen.backends.kernel_source.render import w4a16_code_bytes
from gemm_gen.design.ir import KernelBuild
from gemm_gen.design.serve import check
from gemm_gen.facts import bfp16, groupquant
from gemm_gen.facts.devices import NPU1, NPU2, Device
from gemm_gen.facts.dtypes import BF16, BFP16, pack_i4
from gemm_gen.facts.epilogue import Activation, Epilogue
from gemm_gen.facts.errors import ConfigError
from gemm_gen.facts.inputs import make_inputs
from gemm_gen.facts.l1_layout import a_layout, b_layout, b_tile_pairs, c_layout
from gemm_gen.spec.config import GemmConfig
from gemm_gen.spec.rules import kernel_variant as kv
from gemm_gen.spec.rules.dequant import dequant_code_bytes, dequant_ops

from . import test_kernels as tk
from .test_kernels_int4 import _high_nibble_first

FROBENIUS_LIMIT = 0.01  # the W4A16 contract's target (docs/int4_decode.md section 10)


def w4_build(dev: Device, out: str, blocks: tuple[int, int, int], g: int, zp: bool,
             mmul: tuple[int, int, int] | None = None, emulate: bool | None = None, rho: int = 1,
             loops: str | None = None, wide: bool = True, rounding: str = "conv_even", once: bool = False
             ) -> KernelBuild:
    """A W4A16 KernelBuild whose A tile is `blocks` (2r, s, 2t) units of the bf16 mmul; C accumulates in
    fp32 (`wide`) or in its own type. `once`: npu2's convert-once kernel (templates/mm_bfp16.cc.j2, one
    variant), which dequantizes straight into bfp16 tiles."""
    emulate = dev.bf16_emulation_default if emulate is None else emulate
    if once:
        b = tk.build(dev, "bf16", out, blocks, False, emulate=True, rounding=rounding, rho=rho, loops="k-pipelined",
                     expansion=(2, 2), wide=wide)
        return b.with_(dtype_b="i4", group_size=g, zero_points=zp, convert_once=True)
    b = tk.build(dev, "bf16", out, blocks, False, mmul=mmul, emulate=emulate, rounding=rounding, rho=rho,
                 loops=loops, wide=wide)
    # the loops chosen with the pass's code reserved, as a W4A16 design must choose them
    v = kv.choose(dev, "bf16", b.mmul, emulate, b.t_ma, b.k, b.n, None, loops,
                  reserve_bytes=dequant_code_bytes(dev.name, zp, b.mmul))
    return b.with_(dtype_b="i4", group_size=g, zero_points=zp, expansion=v.expansion, loops=v.loops)


BUILDS = [
    # npu1: the default 4x8x4, k below and above g, every g, with and without zero points
    w4_build(NPU1, "bf16", (1, 2, 1), 32, False), w4_build(NPU1, "bf16", (1, 8, 2), 32, True),
    w4_build(NPU1, "f32", (2, 4, 1), 64, True), w4_build(NPU1, "bf16", (1, 16, 1), 64, False, wide=False),
    w4_build(NPU1, "bf16", (1, 8, 1), 128, True, rho=2), w4_build(NPU1, "f32", (1, 32, 1), 128, False),
    w4_build(NPU1, "bf16", (1, 8, 1), 32, True, mmul=(8, 8, 4), loops="k-pipelined"),
    w4_build(NPU1, "bf16", (1, 8, 2), 32, True, rounding="floor"),  # the body's mode is not the dequant's
    # npu2: the default bf16-via-bfp16 8x8x8, and native shapes
    w4_build(NPU2, "bf16", (1, 2, 1), 32, True), w4_build(NPU2, "bf16", (1, 8, 1), 32, False),
    w4_build(NPU2, "f32", (1, 4, 2), 64, True), w4_build(NPU2, "bf16", (2, 16, 1), 64, False, wide=False),
    w4_build(NPU2, "bf16", (1, 8, 1), 128, False), w4_build(NPU2, "bf16", (1, 32, 1), 128, True, rho=2),
    w4_build(NPU2, "f32", (1, 8, 1), 32, True, emulate=False, mmul=(4, 8, 8)),
    w4_build(NPU2, "bf16", (1, 16, 1), 64, False, emulate=False, mmul=(4, 8, 4)),
    w4_build(NPU1, "bf16", (1, 1, 2), 32, True),  # k = 8: one K block row per trip (rules.dequant.trip_rows)
]
# npu2's default W4A16 kernel: the convert-once body, each B object dequantized straight into bfp16 tiles;
# k below and above g, every g, with and without zero points, rho 2, f32 and bf16 C (wide and per-call), a
# kernel in `floor` mode (the mode the tiles are quantized in)
ONCE_BUILDS = [
    w4_build(NPU2, "bf16", (1, 2, 1), 32, True, once=True), w4_build(NPU2, "bf16", (1, 8, 2), 32, False, once=True),
    w4_build(NPU2, "f32", (1, 4, 1), 64, True, once=True),
    w4_build(NPU2, "bf16", (2, 16, 1), 64, False, once=True, wide=False),
    w4_build(NPU2, "bf16", (1, 8, 1), 128, False, once=True),
    w4_build(NPU2, "bf16", (1, 32, 1), 128, True, rho=2, once=True),
    w4_build(NPU2, "f32", (1, 8, 2), 32, True, once=True, rounding="floor"),
    w4_build(NPU2, "bf16", (1, 1, 2), 32, True, once=True),  # k = 8: one K tile per trip (rules.dequant.trip_rows)
]


def _id(b: KernelBuild) -> str:
    return b.object_file[:-2]


Case = tk.Case  # a build, optionally patched into a mutant (tk.compile_all's protocol)


_SCALE_ROW = "block_rows(aie::load_v<SCALE_LANES>(scales + row * TILE_N + c))"
_RNE = "aie::set_rounding(aie::rounding_mode::conv_even);  // bf16_rne"
_Z_ROW = "aie::to_fixed<int16>(aie::load_v<SCALE_LANES>(zeros + row * TILE_N + c), 0)"
_OFFSET = f"aie::add({_Z_ROW}, z_bias)"
_CALL = "  gemm_gen_kernel::dequant(B, b_deq);"
MUTANTS = {
    "scale-row-off-by-one": Case(BUILDS[1], patches=((_SCALE_ROW, _SCALE_ROW.replace(
        "row * TILE_N", "(row + 1) % SCALE_ROWS * TILE_N")),), mutant="scale-row-off-by-one"),
    "truncating": Case(BUILDS[1], patches=((_RNE, _RNE.replace("conv_even", "symmetric_zero")),), mutant="truncating"),
    "truncating-npu2": Case(BUILDS[10], patches=((_RNE, _RNE.replace("conv_even", "symmetric_zero")),),
                            mutant="truncating"),
    "zero-point-added": Case(BUILDS[1], patches=((_OFFSET, f"aie::sub(z_bias, {_Z_ROW})"),),
                             mutant="zero-point-added"),
    "dequant-per-block-row": Case(BUILDS[2], patches=((_CALL, "  for (unsigned z = 0; z < gemm_gen_kernel::ROW_BLOCKS; "
                                                              "++z)\n  " + _CALL),), mutant="dequant-per-block-row"),
}
_ONCE_CALL = "  gemm_gen_kernel::dequant_b(B, B_bfp16);"
_ONCE_SCALE = "over_bt_rows(aie::load_v<Q>(scales + row * TILE_N + col + 1 * Q));"
_ONCE_XT = ("(kb + 0) * COL_TILES + col / Q + 0) * Q_TILE_BYTES));\n      const aie::vector<bfloat16, LANES> xt =\n"
            "          aie::transpose(aie::vector_cast<bfloat16>(aie::add(aie::unpack(aie::unpack(q)), bias)), Q, Q);")
ONCE_MUTANTS = {
    # B's block not turned into B^T: each bfp16 block then holds 8 N values of one K row
    "once-no-transpose": Case(ONCE_BUILDS[1], patches=((_ONCE_XT, _ONCE_XT.replace("aie::transpose(", "(").replace(
        "bias)), Q, Q);", "bias)));")),), mutant="once-no-transpose"),
    # the scales of the pair's first block column used for both
    "once-scale-column": Case(ONCE_BUILDS[2], patches=((_ONCE_SCALE, _ONCE_SCALE.replace("+ 1 * Q", "+ 0 * Q")),),
                              mutant="once-scale-column"),
    # the scales spread along B^T's columns (grow_replicate without the transpose)
    "once-scales-not-over-rows": Case(ONCE_BUILDS[1], patches=(
        ("  return aie::transpose(v.template grow_replicate<LANES>(), Q, Q);",
         "  return v.template grow_replicate<LANES>();"),), mutant="once-scales-not-over-rows"),
    # the group's scale row taken as the object's first whatever the K tile (k above g)
    "once-first-scale-row": Case(ONCE_BUILDS[1], patches=((
        "    const unsigned row = kb / KB_PER_ROW;  // the trip's group", "    const unsigned row = 0 * kb;"),),
        mutant="once-first-scale-row"),
    # bf16 rounding first (the emulated kernel's numerics): a second rounding the contract does not have
    "once-bf16-first": Case(ONCE_BUILDS[4], patches=((
        "      tiles.push(w.template to_vector<bfp16ebs8>());\n    }\n    const bool pair_end",
        "      tiles.push(Acc(w.template to_vector<bfloat16>()).template to_vector<bfp16ebs8>());\n    }\n"
        "    const bool pair_end"),), mutant="once-bf16-first"),
    # (performance) dequantized on every slice of the k-step
    "once-every-slice": Case(ONCE_BUILDS[5], patches=(("  if (slice == 0)\n  " + _ONCE_CALL, _ONCE_CALL),),
                             mutant="once-every-slice"),
}
ALL = [*(Case(b) for b in BUILDS), *MUTANTS.values(), *(Case(b) for b in ONCE_BUILDS), *ONCE_MUTANTS.values()]


@pytest.fixture(scope="module")
def libraries() -> dict[str, Path | BaseException]:
    return tk.compile_all(ALL)


def load(libraries: dict[str, Path | BaseException], case: Case) -> tk.Kernel:
    lib = libraries[case.id]
    if isinstance(lib, BaseException):
        raise lib
    kernel = tk.Kernel(lib, case.build)
    b = case.build
    # b_deq is the last buffer, before the int32 slice (the Design's order: buffers, then scalars); converting
    # once, A_bfp16 and B_bfp16 follow C (tk.Kernel's order)
    if not b.convert_once:
        kernel.matmul_fn.argtypes = ([ctypes.c_void_p] * (4 + b.types.precision.converts_c)
                                     + ([ctypes.c_int32] if b.rho > 1 else []))
    kernel.lib.gg_host_int4_unpacked.restype = ctypes.c_ulonglong
    return kernel


# ---- inputs: A, and B as int4 values with group scales (and zero points) --------------------------
@dataclass(frozen=True)
class Weights:
    q: np.ndarray  # K x N int4 values
    scales: np.ndarray  # ceil(K / g) x N bf16
    zeros: np.ndarray | None  # same shape, integers in [-8, 7]
    g: int

    @property
    def w(self) -> np.ndarray:
        return groupquant.dequant(self.q, self.scales, self.zeros, self.g)

    @property
    def f32(self) -> np.ndarray:
        return groupquant.dequant_f32(self.q, self.scales, self.zeros, self.g)

    def seen(self, b: KernelBuild) -> np.ndarray:
        """What the build's dequantization hands to the body: bf16 weights, or converting once the exact ones."""
        return self.f32 if b.convert_once else self.w

    @property
    def exact(self) -> np.ndarray:
        return groupquant.dequant_exact(self.q, self.scales, self.zeros, self.g)


def weights(b: KernelBuild, steps: int, seed: int) -> Weights:
    """int4 values over their whole range; scales of 8 significant bits in [2^-6, 2^-1) of both signs, so
    (q - z) s has up to 12 significant bits and its bf16 rounding (ties too) shows."""
    rng = np.random.default_rng(seed)
    K, n, g = steps * b.k, b.n, b.group_size
    q = rng.integers(-8, 8, size=(K, n))
    rows = -(-K // g)
    mant = 1 + rng.integers(0, 128, size=(rows, n)) / 128
    scales = (rng.choice([-1.0, 1.0], size=(rows, n)) * mant * 2.0 ** rng.integers(-6, -1, size=(rows, n)))
    zeros = rng.integers(-8, 8, size=(rows, n)) if b.zero_points else None
    return Weights(q, scales.astype(BF16.host), zeros, g)


def b_object(b: KernelBuild, wt: Weights, step: int, pack=pack_i4) -> np.ndarray:
    """The k-step's B object, as groupquant.ObjectLayout says: the q values in the bf16 kernel's B element
    order (tk.run_tile's b_layout), packed two per byte, then the step's scale rows, then its zero points."""
    layout = groupquant.ObjectLayout(b.k, b.n, b.group_size, b.zero_points)
    _, s, t = b.mmul
    rows = slice(step * b.k, (step + 1) * b.k)
    flat = np.empty(b.k * b.n, np.int64)
    flat[b_layout(b.k, b.n, s, t, False)] = wt.q[rows]
    first = step * b.k // b.group_size
    srows = slice(first, first + layout.rows)
    obj = np.zeros(layout.nbytes, np.uint8)
    obj[:layout.q_bytes] = pack(flat)
    obj[layout.scale_offset:layout.zero_offset] = np.ascontiguousarray(wt.scales[srows]).view(np.uint8).ravel()
    if wt.zeros is not None:
        obj[layout.zero_offset:] = np.ascontiguousarray(wt.zeros[srows].astype(BF16.host)).view(np.uint8).ravel()
    return obj


def a_steps(b: KernelBuild, steps: int, seed: int) -> list[np.ndarray]:
    a, _ = make_inputs(b.m, steps * b.k, b.n, "bf16", b.types.dtype_out, seed=seed, family="wide")
    return [a[:, i * b.k:(i + 1) * b.k] for i in range(steps)]


@dataclass
class Run:
    c: np.ndarray
    # the scratch after each k-step: b_deq, logical k x n; converting once, B_bfp16's (n/8, k/8) tiles of B^T
    scratch: list[np.ndarray]
    unpacked: list[int]  # int4 lanes unpacked per call


def _bt_tiles(b: KernelBuild, pairs: np.ndarray) -> np.ndarray:
    """B_bfp16's bytes (1 x 2 super-blocks, l1_layout.b_tile_pairs) as (n/8, k/8, 72) tiles of B^T."""
    q = bfp16.TILE
    flat = pairs.reshape(-1, bfp16.TILE_BYTES)[b_tile_pairs(b.k // q, b.n // q)]  # (k/8, n/8, 72)
    return np.ascontiguousarray(flat.transpose(1, 0, 2))


def run_w4(kernel: tk.Kernel, a: list[np.ndarray], wt: Weights, pack=pack_i4) -> Run:
    """zero, then per k-step one matmul per A tile (rho) on the B object and its scratch (b_deq, or converting
    once A_bfp16 and B_bfp16); C read back."""
    b = kernel.build
    r, s, t = b.mmul
    c_host = np.dtype(BF16.host if b.types.dtype_out == "bf16" else np.float32)
    c = tk.Guarded(b.m * b.n, c_host, 8 * b.m * b.n // c_host.itemsize)
    acc = tk.Guarded(b.m * b.n - b.c_split_elems, np.float32, 2 * b.m * b.n) if b.types.precision.converts_c else None
    c_bufs = (c.ptr, *((acc.ptr,) if acc is not None else ()))
    tile_bytes = BFP16.unit_bytes
    if b.convert_once:  # A's bfp16 copy, and the B object dequantized into bfp16 tiles
        a_bfp16 = tk.Guarded(b.t_ma * b.k // 64 * tile_bytes, np.uint8)
        scratch = tk.Guarded(b.k * b.n // 64 * tile_bytes, np.uint8)
    else:
        scratch = tk.Guarded(b.k * b.n, BF16.host)
    modes = (tk.Rounding.CEIL, tk.Saturation.SYMMETRIC)  # what the kernel finds and must leave
    kernel.set_modes(*modes)
    kernel.checked(kernel.zero_fn, *c_bufs)
    out = Run(np.empty(0), [], [])
    for step, a_tile in enumerate(a):
        obj = tk.Guarded(groupquant.ObjectLayout(b.k, b.n, b.group_size, b.zero_points).nbytes, np.uint8)
        obj.body[:] = b_object(b, wt, step, pack)
        for i in range(b.rho):
            a_buf = tk.Guarded(b.t_ma * b.k, BF16.host)
            a_buf.body[a_layout(b.t_ma, b.k, r, s, False)] = a_tile[i * b.t_ma:(i + 1) * b.t_ma]
            kernel.lib.gg_host_reset_int4_unpacked()
            bufs = ((a_bfp16.ptr, scratch.ptr, *c_bufs[1:]) if b.convert_once else (*c_bufs[1:], scratch.ptr))
            kernel.checked(kernel.matmul_fn, a_buf.ptr, obj.ptr, c.ptr, *bufs, *((i,) if b.rho > 1 else ()))
            out.unpacked.append(int(kernel.lib.gg_host_int4_unpacked()))
            assert kernel.modes() == modes, "the kernel must restore the mode registers it found"
            assert a_buf.guards_intact()
            assert not b.convert_once or a_bfp16.guards_intact(), "the A conversion wrote outside its scratch"
        assert obj.guards_intact() and scratch.guards_intact(), "the kernel wrote outside its B object or scratch"
        out.scratch.append(_bt_tiles(b, scratch.body) if b.convert_once else
                           scratch.body[b_layout(b.k, b.n, s, t, False)].copy())
    if kernel.convert_fn is not None:
        kernel.checked(kernel.convert_fn, *c_bufs)
    assert c.guards_intact(), "the kernel wrote outside its C tile"
    out.c = c.body[c_layout(b.m, b.n, r, t, False)]
    return out


def expected(b: KernelBuild, a: list[np.ndarray], wt: Weights) -> np.ndarray:
    """The bf16 kernel's numerics (tests/backends/test_kernels.py's harness) on A x groupquant.dequant, or converting
    once
    on A x groupquant.dequant_f32 (the numerics' bfp16 quantization of B its one rounding)."""
    w = wt.seen(b)
    return tk.expected(b, [(a_tile, w[i * b.k:(i + 1) * b.k]) for i, a_tile in enumerate(a)])


def expected_scratch(b: KernelBuild, wt: Weights, step: int) -> np.ndarray:
    """The scratch after k-step `step`: dequant's bf16 tile, or converting once bfp16 tiles of the exact weights'
    B^T under the kernel's rounding mode (tiles of 8 K values per column, as the numerics quantize B)."""
    rows = slice(step * b.k, (step + 1) * b.k)
    if not b.convert_once:
        return wt.w[rows]
    return bfp16.tiles_of(np.ascontiguousarray(wt.f32[rows].T), tk.Rounding[b.rounding.upper()])


def frobenius(c: np.ndarray, a: list[np.ndarray], wt: Weights) -> float:
    exact = np.hstack(a).astype(np.float64) @ wt.exact
    return float(np.linalg.norm(c.astype(np.float64) - exact) / np.linalg.norm(exact))


def _inputs(b: KernelBuild, seed: int = 0, steps: int = 2) -> tuple[list[np.ndarray], Weights]:
    return a_steps(b, steps, seed), weights(b, steps, seed)


# ---- the kernel against the numerics ----------------------------------------------------------------
@tk.needs_gxx
@pytest.mark.parametrize("b", BUILDS + ONCE_BUILDS, ids=_id)
def test_w4a16_kernel_matches_the_numerics(libraries, b: KernelBuild) -> None:
    """C bit-equal to the bf16 numerics on A x dequant(q, s, z, g); the scratch bit-equal to dequant's
    tile; within 1% (Frobenius) of the float64 product; each B object's k n values unpacked once (rho calls)."""
    kernel = load(libraries, Case(b))
    a, wt = _inputs(b)
    run = run_w4(kernel, a, wt)
    tk.assert_bit_equal(run.c, expected(b, a, wt), b.object_file)
    for step, got in enumerate(run.scratch):
        tk.assert_bit_equal(got, expected_scratch(b, wt, step), f"{b.object_file} scratch of k-step {step}")
    # one pass per B object: the first of a k-step's rho calls (slice 0) dequantizes, the others reuse b_deq
    assert run.unpacked == [b.k * b.n if i == 0 else 0 for _ in a for i in range(b.rho)], "one pass per B object"
    # the contract's 1% holds for round-to-nearest; converting once in `floor` mode, A's and B's bfp16
    # quantizations truncate toward -inf as the mode says (biased: some 3% here), which the bits above pin
    if b.rounding == "conv_even" or not b.convert_once:
        assert frobenius(run.c, a, wt) < FROBENIUS_LIMIT


@tk.needs_gxx
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(which=st.sampled_from([1, 2, 9, 13, 14]), seed=st.integers(0, 2**32 - 1), steps=st.integers(1, 3))
def test_random_weights_and_calls_match_the_numerics(libraries, which: int, seed: int, steps: int) -> None:
    """Random A, int4 values, scales, zero points and k-step counts on compiled kernels of both devices."""
    b = BUILDS[which]
    a, wt = _inputs(b, seed, steps)
    run = run_w4(load(libraries, Case(b)), a, wt)
    tk.assert_bit_equal(run.c, expected(b, a, wt), b.object_file)
    assert frobenius(run.c, a, wt) < FROBENIUS_LIMIT


def test_builds_cover_both_devices_every_group_size_and_both_sides_of_g() -> None:
    seen = {(b.aie_target, b.group_size, b.k < b.group_size, b.zero_points) for b in BUILDS}
    for target in ("aie2", "aie2p"):
        for g in groupquant.GROUP_SIZES:
            assert {(target, g, True), (target, g, False)} <= {x[:3] for x in seen}, (target, g)
    assert {zp for *_, zp in seen} == {True, False}
    assert any(b.emulate_bf16_with_bfp16 for b in BUILDS) and any(b.aie_target == "aie2p" and not
                                                                   b.emulate_bf16_with_bfp16 for b in BUILDS)
    assert {tuple(b.mmul)[2] for b in BUILDS} == {4, 8}  # both scale patterns (t = 4 zipped, t = 8)


# ---- mutants ------------------------------------------------------------------------------------------
@tk.needs_gxx
@pytest.mark.parametrize("name", [m for m in MUTANTS if m != "dequant-per-block-row"])
def test_a_wrong_dequantization_fails(libraries, name: str) -> None:
    case = MUTANTS[name]
    b = case.build
    a, wt = _inputs(b)
    with pytest.raises((AssertionError, tk.HostApiError)):
        tk.assert_bit_equal(run_w4(load(libraries, case), a, wt).c, expected(b, a, wt), case.id)


@tk.needs_gxx
@pytest.mark.parametrize("name", [m for m in ONCE_MUTANTS if m != "once-every-slice"])
def test_a_wrong_bfp16_dequantization_fails(libraries, name: str) -> None:
    """The convert-once kernel's pass, broken one way at a time: C (or the host API) must tell."""
    case = ONCE_MUTANTS[name]
    b = case.build
    assert case.source != render_kernel(b)  # the patch applies (else the failure below would be the patch's)
    a, wt = _inputs(b)
    with pytest.raises((AssertionError, tk.HostApiError)):
        run = run_w4(load(libraries, case), a, wt)
        tk.assert_bit_equal(run.c, expected(b, a, wt), case.id)
        for step, got in enumerate(run.scratch):
            tk.assert_bit_equal(got, expected_scratch(b, wt, step), f"{case.id} scratch of k-step {step}")


@tk.needs_gxx
def test_a_bfp16_dequantization_on_every_slice_is_caught(libraries) -> None:
    """Performance: the convert-once kernel dequantizes on slice 0 only; on every slice the bits are equal, the
    host's count of unpacked int4 lanes is not."""
    case = ONCE_MUTANTS["once-every-slice"]
    b = case.build
    assert b.rho > 1 and case.source != render_kernel(b)
    a, wt = _inputs(b)
    run = run_w4(load(libraries, case), a, wt)
    tk.assert_bit_equal(run.c, expected(b, a, wt), case.id)
    assert run.unpacked == [b.k * b.n] * (len(a) * b.rho)


def test_both_passes_run_one_and_two_k_rows_per_trip() -> None:
    for builds in (BUILDS, ONCE_BUILDS):
        assert {kernel_params(b).trip_rows for b in builds} == {1, 2}  # type: ignore[union-attr]


def test_once_builds_cover_every_group_size_both_sides_of_g_and_the_modes() -> None:
    seen = {(b.group_size, b.k < b.group_size) for b in ONCE_BUILDS}
    assert seen == {(g, below) for g in groupquant.GROUP_SIZES for below in (True, False)}
    assert {b.zero_points for b in ONCE_BUILDS} == {True, False} and any(b.rho > 1 for b in ONCE_BUILDS)
    assert {b.rounding for b in ONCE_BUILDS} == {"conv_even", "floor"} and {b.types.dtype_out for b in ONCE_BUILDS} == {
        "bf16", "f32"}
    assert all(b.convert_once and b.block_kernel and b.emulate_bf16_with_bfp16 for b in ONCE_BUILDS)


@tk.needs_gxx
def test_a_high_nibble_first_object_fails(libraries) -> None:
    b = BUILDS[1]
    a, wt = _inputs(b)
    with pytest.raises(AssertionError, match="elements differ"):
        tk.assert_bit_equal(run_w4(load(libraries, Case(b)), a, wt, pack=_high_nibble_first).c, expected(b, a, wt),
                            "mutant")


@tk.needs_gxx
def test_a_dequantization_repeated_inside_the_call_is_caught(libraries) -> None:
    """Performance: bit-equal results, but the host counts the int4 lanes each call unpacks."""
    case = MUTANTS["dequant-per-block-row"]
    b = case.build
    assert b.t_ma // b.mmul[0] > 1
    a, wt = _inputs(b)
    run = run_w4(load(libraries, case), a, wt)
    tk.assert_bit_equal(run.c, expected(b, a, wt), case.id)  # the numbers cannot show it
    assert run.unpacked != [b.k * b.n] * (len(a) * b.rho)


# ---- rendering -------------------------------------------------------------------------------------------
def test_the_kernel_says_what_it_takes() -> None:
    b = BUILDS[1]
    text = render_kernel(b)
    p = kernel_params(b)
    assert (p.ctype_b, p.ctype_b_mem, p.ctype_b_obj) == ("bfloat16", "bfloat16", "uint8")  # type: ignore[union-attr]
    assert f"void {b.symbols['matmul']}(bfloat16 *A, uint8 *B, bfloat16 *C, float *C_acc, bfloat16 *b_deq) {{" in text
    assert "bf16 x i4 -> bf16" in text and "aie::mmul<4, 8, 4, T_in, T_b, accfloat>" in text
    assert text.count("gemm_gen_kernel::dequant(B, b_deq);") == 1
    rho = BUILDS[4]
    assert "bfloat16 *b_deq, int32_t slice) {" in render_kernel(rho)
    assert render_kernel(b) == text and b.object_file.endswith("_g32zp.o") and BUILDS[0].object_file.endswith("_g32.o")


def test_the_convert_once_kernel_takes_what_the_design_passes() -> None:
    """npu2's default W4A16 design: its kernel_specs' matmul arguments (A, the B object, C, A_bfp16, B_bfp16, C_acc,
    slice) are the rendered convert-once kernel's parameters, in order; no b_deq."""
    from gemm_gen.design import build_design
    from gemm_gen.spec.config import GemmConfig

    c = GemmConfig("npu2", 64, 256, 64, 32, 64, 32, 64, "bf16", "bf16", dtype_b="i4", group_size=32, zero_points=True,
                   rho=2)
    d = build_design(c)
    (matmul,) = [k for k in d.kernels if k.role == "matmul"]
    assert matmul.build.convert_once and matmul.arg_dtypes == ("bf16", "i4", "bf16", "bfp16", "bfp16", "f32")
    assert matmul.scalar_args == ("i32",)
    text = render_kernel(matmul.build)
    assert (f"void {matmul.name}(bfloat16 *A, uint8 *B, bfloat16 *C, bfp16ebs8 *A_bfp16, bfp16ebs8 *B_bfp16, "
            "float *C_acc, int32_t slice) {") in text
    assert "gemm_gen_kernel::dequant_b(B, B_bfp16);" in text and "b_deq" not in text


# The renderer renders what the rules allowed (backends/kernel_source/render.py asserts them): each build below breaks a
# rule,
# which the config's check refuses first (`config`: the same rule broken in a W4A16 config, over W4, with the
# check's message).
W4 = dict(device="npu2", M=64, K=256, N=64, m=16, k=32, n=16, k_mt=32, dtype_b="i4", group_size=32)


@pytest.mark.parametrize("change, config, message", [
    (dict(b_col_maj=True), dict(b_col_maj=True), "--b-col-maj with int4 B"),
    (dict(mmul=(8, 1, 8), k=8, expansion=(2, 2), loops="k-pipelined", emulate_bf16_with_bfp16=False),
     dict(mmul_shape=(8, 1, 8), k=8, k_mt=8, emulate_bf16_with_bfp16=False, convert_once=False), "can feed no design"),
    (dict(k=48), dict(k=48, k_mt=48), "cover whole groups"),
    (dict(group_size=0), dict(group_size=0), "needs one scale per group"),
    (dict(group_size=48), dict(group_size=48), "--group-size 48"),
])
def test_render_asserts_the_w4a16_rules_the_config_check_applies(change: dict, config: dict, message: str) -> None:
    b = replace(w4_build(NPU2, "bf16", (1, 4, 1), 32, False), **change)
    with pytest.raises(AssertionError):
        render_kernel(b)
    with pytest.raises(ConfigError, match=message):
        check(GemmConfig(**{**W4, "convert_once": False, **config}))


@pytest.mark.parametrize("change, config, message", [
    (dict(b_col_maj=True), dict(b_col_maj=True), "--b-col-maj with int4 B"),
    (dict(k=48), dict(k=48, k_mt=48), "cover whole groups"),
    (dict(group_size=48), dict(group_size=48), "--group-size 48"),
    (dict(emulate_bf16_with_bfp16=False), dict(emulate_bf16_with_bfp16=False), "bfp16 datapath"),
    (dict(epilogue=Epilogue(activation=Activation.RELU)), dict(activation="relu"), "epilogue"),
])
def test_render_asserts_the_convert_once_w4a16_rules_the_config_check_applies(change: dict, config: dict,
                                                                              message: str) -> None:
    b = replace(w4_build(NPU2, "bf16", (1, 4, 1), 32, False, once=True), **change)
    with pytest.raises(AssertionError):
        render_kernel(b)
    with pytest.raises(ConfigError, match=message):
        check(GemmConfig(**{**W4, "convert_once": True, **config}))


def test_group_scales_belong_to_w4a16_only() -> None:
    b = tk.build(NPU1, "bf16", "bf16", (1, 2, 2), False)
    with pytest.raises(AssertionError):
        render_kernel(replace(b, group_size=32))
    with pytest.raises(ConfigError, match="group scales belong to int4 weights times a bf16 A"):
        check(GemmConfig("npu1", 64, 64, 64, 8, 16, 16, 16, group_size=32))


# ---- program memory and the operation count ----------------------------------------------------------
def test_program_memory_counts_the_dequantization_pass() -> None:
    """The matmul's estimate (kernel_variant.code_bytes) plus the pass's, against CODE_BUDGET; a tile whose
    flattened matmul fits alone but not with the pass is refused."""
    b = BUILDS[1]
    v = kv.KernelVariant(*b.expansion, b.loops)
    nest = int(kv.code_bytes(NPU1, "bf16", b.mmul, False, v.expansion, v.loops, b.k, b.n))
    assert w4a16_code_bytes(b, NPU1, v) == nest + dequant_code_bytes("npu1", True, b.mmul) > nest
    budget = kv.CODE_BUDGET * NPU1.isa.program_bytes
    extra = dequant_code_bytes("npu1", True, (4, 8, 4))  # with zero points: the larger pass
    for k in range(8, 4096, 8):  # the largest flattened K that fits alone, then one that only fits alone
        fits = kv.code_bytes(NPU1, "bf16", (4, 8, 4), False, (2, 2), "k-flat", k, 8) <= budget
        if fits and kv.code_bytes(NPU1, "bf16", (4, 8, 4), False, (2, 2), "k-flat", k, 8) + extra > budget:
            if k % 32 == 0:
                # chess: Peano refuses this k-flat earlier, for its pipeliner (tests/spec/test_kernel_variant.py)
                tight = replace(w4_build(NPU1, "bf16", (1, 1, 1), 32, True), k=k, expansion=(2, 2), loops="k-flat",
                                compiler="chess")
                with pytest.raises(AssertionError):  # the config's check refuses it (spec/rules/dequant.code_fits)
                    render_kernel(tight)
                with pytest.raises(ConfigError, match="program memory"):
                    check(GemmConfig("npu1", 64, k, 64, tight.m, k, tight.n, k, dtype_b="i4", group_size=32,
                                     zero_points=True, expansion=(2, 2), kernel_loops="k-flat", compiler="chess"))
                # the automatic choice with the pass's reserve picks loops that fit with it
                auto = w4_build(NPU1, "bf16", (1, k // 8, 1), 32, True)
                assert auto.loops != "k-flat" and render_kernel(auto)
                return
    pytest.fail("no K separates the matmul's code from the matmul plus the dequantization pass")


def test_the_stack_is_the_bf16_kernels() -> None:
    """The pass keeps its vectors in registers and adds no local array: a W4A16 core gets the bf16
    kernel's stack (mlir-aie's matmul stack), and the rendered pass declares no array."""
    from gemm_gen.spec.rules.defaults import default_stack

    for b in BUILDS:
        dev = NPU1 if b.aie_target == NPU1.aie_target else NPU2
        assert default_stack(dev.name, b.compiler, b.types.precision) == default_stack(
            dev.name, b.compiler, b.with_(dtype_b=None, group_size=0, zero_points=False).types.precision)
        text = render_kernel(b)
        body = text[text.index("static inline void dequant("):text.index("// C (T_MA x n)")]
        assert "[" not in body.replace("[[", "")


@pytest.mark.parametrize("dev, zp, bfp16, lanes, ops, vector_ops", [
    # a trip's two K block rows share the scale work (rules.dequant.TRIP_ROWS); per vector:
    # 4x8x4: 32 values, two 256-bit stores; one 8-scale load, zip and two grow_replicates per 2 x 2 blocks
    ("npu1", False, False, 32, 10, 6.75), ("npu1", True, False, 32, 11.5, 8),
    # 8x8x8 (npu2's emulated kernel): 64 values, two 512-bit stores; a scale load and grow_replicate per 2 blocks
    ("npu2", False, False, 64, 10, 6.5), ("npu2", True, False, 64, 12, 8),
    # the convert-once pass: a tile of B^T, x transposed, one push of 72 bytes; each column's scales spread over
    # B^T's rows (grow_replicate, transpose) once per 2 tiles
    ("npu2", False, True, 64, 10.5, 8), ("npu2", True, True, 64, 13, 10),
])
def test_dequant_ops_per_vector(dev: str, zp: bool, bfp16: bool, lanes: int, ops: float, vector_ops: float) -> None:
    d = dequant_ops(dev, zp, to_bfp16=bfp16)
    assert (d.lanes, d.ops, d.vector_ops) == (lanes, ops, vector_ops)
    names = [name for name, _ in d.per_vector]
    assert names.count("unpack int4->int8") == 1 and "to_float<bfloat16>" not in names  # the bias bits instead
    assert ("add bias bits to zero points" in names) == zp
    assert ("interleave_zip scales" in names) == (dev == "npu1")  # t = 4 zips, t = 8 does not
    assert ("transpose to B^T" in names) == bfp16 and d.out_bytes == (lanes * 9 // 8 if bfp16 else 2 * lanes)


# the AIE API calls of a rendered pass that the count's vector-slot operations name (loads, stores, the stream's
# push and casts excluded); block_rows zips on t = 4 only
_VECTOR_CALLS = {"unpack": "aie::unpack(", "add": "aie::add(", "to_fixed": "aie::to_fixed<", "mul": "aie::mul(",
                 "msc": "aie::msc(", "to_vector": ".template to_vector<", "grow_replicate": "grow_replicate<",
                 "transpose": "aie::transpose(", "interleave_zip": "block_rows(aie"}


@pytest.mark.parametrize("b", [BUILDS[0], BUILDS[1], BUILDS[8], BUILDS[9], ONCE_BUILDS[0], ONCE_BUILDS[1]],
                         ids=_id)
def test_the_count_is_the_rendered_pass(b: KernelBuild) -> None:
    """spec/rules/dequant.py's vector-slot operations per trip of the flat loop are the AIE API calls the rendered
    pass makes per trip (the model charges that count): one count, read off the template."""
    text = render_kernel(b)
    dev = NPU1 if b.aie_target == NPU1.aie_target else NPU2
    if b.convert_once:
        body = text[text.index("static GG_INLINE aie::vector<bfloat16, LANES> over_bt_rows"):]
        body = body[:body.index("\n}\n\n", body.index("static inline void dequant_b("))]
        helper = body.count("aie::transpose(v.template grow_replicate")  # over_bt_rows: once, called per use
        calls = {k: body.count(v) for k, v in _VECTOR_CALLS.items()}
        uses = body.count("over_bt_rows(") - 1  # its calls, not its definition
        calls["transpose"] += uses - helper
        calls["grow_replicate"] += uses - helper
        calls["interleave_zip"] = 0
    else:
        body = text[text.index("static inline void dequant("):]
        body = body[:body.index("\n}\n")]
        calls = {k: body.count(v) for k, v in _VECTOR_CALLS.items()}
        calls["interleave_zip"] *= int(b.mmul[2] < 8)  # block_rows zips only when t = 4
    d = dequant_ops(dev.name, b.zero_points, b.mmul, to_bfp16=b.convert_once)
    assert sum(calls.values()) == d.vector_ops * d.vectors_per_trip, calls


# ---- the host API's new rules, each broken once -------------------------------------------------------------
def _syntax(code: str, arch: int, tmp_path: Path) -> subprocess.CompletedProcess:
    src = tmp_path / "probe.cc"
    src.write_text(f"#include <aie_api/aie.hpp>\nvoid probe() {{ {code} }}\n")
    assert tk.CXX is not None
    return subprocess.run([tk.CXX, "-std=c++20", "-fsyntax-only", f"-D__AIE_ARCH__={arch}", f"-I{tk.HOST_API}",
                           str(src)], capture_output=True, text=True)


@tk.needs_gxx
@pytest.mark.parametrize("code, message", [
    ("auto v = aie::unpack(aie::vector<bfloat16, 32>{}); (void)v;", "integer vectors"),
    ("auto v = aie::unpack(aie::vector<int4, 16>{}); (void)v;", "128- to 1024-bit"),  # 64-bit int4
    ("auto v = aie::unpack(aie::vector<int8, 128>{}); (void)v;", "128- to 1024-bit"),  # 2048-bit int16 result
    ("auto v = aie::unpack(aie::vector<int16, 32>{}); (void)v;", "int4 and int8 only"),
    ("auto v = aie::vector<bfloat16, 4>{}.grow_replicate<32>(); (void)v;", "128- to 1024-bit"),
    ("auto v = aie::vector<bfloat16, 16>{}.grow_replicate<24>(); (void)v;", "grows to a multiple"),
    ("auto v = aie::to_float<int32>(aie::vector<int16, 32>{}, 0); (void)v;", "float or bfloat16"),
    ("auto v = aie::to_float<bfloat16>(aie::vector<int16, 4>{}, 0); (void)v;", "128- to 1024-bit"),
    ("auto v = aie::to_fixed<int16>(aie::vector<float, 16>{}, 0); (void)v;", "bfloat16 vectors only"),
    ("auto v = aie::sub(aie::vector<int16, 4>{}, aie::vector<int16, 4>{}); (void)v;", "128- to 1024-bit"),
    ("auto v = aie::interleave_zip(aie::vector<bfloat16, 4>{}, aie::vector<bfloat16, 4>{}, 2); (void)v;",
     "128- to 1024-bit"),
    ("auto v = aie::vector_cast<bfloat16>(aie::vector<int32, 16>{}); (void)v;", "from int16 vectors only"),
    ("auto v = aie::msc(aie::accum<accfloat, 16>{}, aie::vector<int16, 16>{}, aie::vector<bfloat16, 16>{}); (void)v;",
     "no matching function"),
])
def test_the_host_api_refuses_what_the_real_one_lacks(code: str, message: str, tmp_path: Path) -> None:
    proc = _syntax(code, 20, tmp_path)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr[-2000:]


@tk.needs_gxx
def test_the_host_api_accepts_what_the_kernel_uses(tmp_path: Path) -> None:
    code = ("auto q = aie::vector_cast<int4>(aie::vector<uint8, 16>{}); auto w = aie::unpack(aie::unpack(q));"
            "auto f = aie::to_float<bfloat16>(aie::sub(w, w), 0);"
            "auto s = aie::interleave_zip(aie::vector<bfloat16, 8>{}, aie::vector<bfloat16, 8>{}, 4);"
            "auto r = s.first.grow_replicate<32>(); auto z = aie::to_fixed<int16>(aie::vector<bfloat16, 8>{}, 0);"
            "(void)aie::mul(f, r).to_vector<bfloat16>(); (void)z;"
            "auto x = aie::vector_cast<bfloat16>(aie::add(w, aie::broadcast<int16, 32>(0x4308)));"
            "(void)aie::msc(aie::mul(x, r), x, r).to_vector<bfloat16>();")
    for arch in (20, 21):
        proc = _syntax(code, arch, tmp_path)
        assert proc.returncode == 0, proc.stderr[-2000:]


@tk.needs_gxx
@pytest.mark.parametrize("code, message", [
    ("auto p = aie::interleave_zip(aie::vector<bfloat16, 8>{}, aie::vector<bfloat16, 8>{}, 3); (void)p;",
     "power of two"),
    ("auto p = aie::interleave_zip(aie::vector<bfloat16, 8>{}, aie::vector<bfloat16, 8>{}, 16); (void)p;",
     "power of two"),
    ("aie::vector<bfloat16, 8> v; v[0] = bfloat16(2.5f); auto z = aie::to_fixed<int16>(v, 0); (void)z;",
     "no int16 integer"),
    ("aie::vector<bfloat16, 16> v; v[0] = bfloat16(1e-39f); auto a = aie::msc(aie::mul(v, v), v, v); (void)a;",
     "subnormal bf16 operand of aie::mul"),
    ("aie::vector<bfloat16, 16> v, t; t[0] = bfloat16(1e-39f); auto a = aie::msc(aie::mul(v, v), t, v); (void)a;",
     "subnormal bf16 operand of aie::msc"),
])
def test_the_host_api_refuses_values_the_real_one_does_not_define(code: str, message: str) -> None:
    assert message in tk._host_run(code, 20)


@tk.needs_gxx
def test_the_host_operations_do_what_the_api_documents() -> None:
    """interleave_zip's chunks, unpack's sign extension of the int4 lanes, to_float under the rounding mode,
    grow_replicate's repetition."""
    code = ("aie::vector<int16, 8> v; for (unsigned i = 0; i < 8; ++i) v[i] = int16(i);\n"
            "auto p = aie::interleave_zip(v, v, 4);\n"
            "for (unsigned i = 0; i < 8; ++i) std::printf(\"%d %d \", int(p.first[i]), int(p.second[i]));\n"
            "aie::vector<uint8, 16> bytes; bytes[0] = 0x8F; bytes[1] = 0x70;\n"
            "auto w = aie::unpack(aie::unpack(aie::vector_cast<int4>(bytes)));\n"
            "for (unsigned i = 0; i < 4; ++i) std::printf(\"%d \", int(w[i]));\n"
            "aie::vector<int16, 16> big; big[0] = 257; aie::set_rounding(aie::rounding_mode::floor);\n"
            "std::printf(\"%g \", double(float(aie::to_float<bfloat16>(big, 0)[0])));\n"
            "aie::set_rounding(aie::rounding_mode::conv_even); big[0] = 259;\n"
            "std::printf(\"%g \", double(float(aie::to_float<bfloat16>(big, 0)[0])));\n"
            "auto g = v.grow_replicate<32>(); std::printf(\"%d %d \", int(g[8]), int(g[31]));\n"
            "aie::vector<int16, 16> q; q[0] = -8; q[1] = 7; q[2] = 0;\n"
            "auto x = aie::vector_cast<bfloat16>(aie::add(q, aie::broadcast<int16, 16>(0x4308)));\n"
            "for (unsigned i = 0; i < 3; ++i) std::printf(\"%g \", double(float(x[i])));\n"
            "auto s = aie::broadcast<bfloat16, 16>(bfloat16(-0.375f));\n"
            "auto c = aie::broadcast<bfloat16, 16>(bfloat16(131.f));\n"
            "auto d = aie::msc(aie::mul(x, s), c, s).to_vector<bfloat16>();\n"
            "for (unsigned i = 0; i < 3; ++i) std::printf(\"%g \", double(float(d[i])));\n")
    out = tk._host_run(code, 21).split()
    assert out[:16] == "0 4 1 5 2 6 3 7 0 4 1 5 2 6 3 7".split()
    assert out[16:20] == ["-1", "-8", "0", "7"]  # 0x8F: low nibble -1 first, high -8; 0x70: 0, 7
    assert out[20:22] == ["256", "260"]  # floor, and the tie 259 -> 260 (even)
    assert out[22:24] == ["0", "7"]
    assert out[24:27] == ["128", "143", "136"]  # the bias bits: 136 + q
    assert out[27:30] == ["1.125", "-4.5", "-1.875"]  # (q - z) x -0.375 with 136 + z = 131 (z = -5): mul, msc
