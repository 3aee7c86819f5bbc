"""Kernel templates: render every supported KernelBuild, compile it on the host and check it.

Each rendered source is compiled unchanged with the host g++ against tests/aie_host (a minimal
stand-in for the AIE API with the numerics of gemm_gen/numerics.py) into a shared library, loaded
with ctypes and run on random tiles laid out in the blocked L1 layouts (gemm_gen/l1_layout.py):
zero, then matmul twice (two k-steps). C read back through its layout must equal
KernelNumerics.call applied twice, bit for bit. This checks the kernel's addressing, loop
structure, transposes, shifts and mode handling; it cannot check the AIE compilers or the
hardware's own arithmetic (that needs Peano or chess and an NPU).

Compiled libraries are cached by a hash of source, flags and headers under
.pytest_cache/gemm_gen_kernels/, so only changed kernels are rebuilt.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from gemm_gen.design import build_design
from gemm_gen.design.model import KernelBuild
from gemm_gen.dtypes import dtype
from gemm_gen.errors import ConfigError
from gemm_gen.hw.devices import NPU1, NPU2, Device
from gemm_gen.inputs import make_inputs
from gemm_gen.kernels import (
    kernel_defines,
    kernel_include_dir,
    kernel_params,
    kernel_source,
    kernel_symbols,
    render_kernel,
    source_file,
)
from gemm_gen.kernels import render as render_module
from gemm_gen.l1_layout import a_layout, b_layout, c_layout
from gemm_gen.numerics import KernelNumerics, Rounding, Saturation

from .conftest import small

REPO = Path(__file__).resolve().parents[1]
HOST_API = REPO / "tests" / "aie_host"
HOST_PROBE = HOST_API / "host_probe.cc"
CACHE = REPO / ".pytest_cache" / "gemm_gen_kernels"
CXX = shutil.which("g++")
CXXFLAGS = ("-std=c++20", "-O1", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared",
            "-fno-gnu-unique")  # every library keeps its own emulated mode registers
GUARD = 64  # elements of sentinel values around every L1 buffer

needs_gxx = pytest.mark.skipif(CXX is None, reason="g++ not found: the host kernel checks need a C++20 g++")

PAIRS = (("bf16", "bf16"), ("bf16", "f32"), ("i8", "i8"), ("i8", "i16"), ("i8", "i32"),
         ("i16", "i16"), ("i16", "i32"))


# ---- the variants ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One kernel to compile and run. hot: integer inputs over their full range (drawn as for an
    i32 output), so that shifted outputs round and saturate. patch: (old, new) edits of the
    rendered source, for kernels that must fail."""

    build: KernelBuild
    hot: bool = False
    patch: tuple[str, str] | None = None

    @property
    def id(self) -> str:
        tag = "-mutant" if self.patch else ""
        return f"{self.build.aie_target}-{source_file(self.build)[:-3]}{tag}"

    @property
    def source(self) -> str:
        text = render_kernel(self.build)
        if self.patch:
            assert self.patch[0] in text
            text = text.replace(*self.patch)
        return text


def build(dev: Device, dtype_in: str, dtype_out: str, blocks: tuple[int, int, int], b_col_maj: bool,
          mmul: tuple[int, int, int] | None = None, emulate: bool = False, rounding: str = "conv_even",
          saturation: str = "saturate", shift: int = 0, rho: int = 1) -> KernelBuild:
    """A KernelBuild whose A tile is `blocks` (2r, s, 2t) units of the mmul shape; C has rho A tiles."""
    r, s, t = mmul or dev.mmul_shape(dtype_in, emulate)
    m, k, n = 2 * r * blocks[0] * rho, s * blocks[1], 2 * t * blocks[2]
    return KernelBuild(dev.aie_target, dtype_in, dtype_out, m, k, n, (r, s, t), b_col_maj, emulate,
                       rounding, saturation, shift, rho=rho)


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
        Case(build(NPU1, "i8", "i32", (1, 2, 2), True, rounding="conv_odd", shift=4), True),
        Case(build(NPU2, "i16", "i32", (2, 2, 1), False, rounding="pos_inf", shift=5), True),
        Case(build(NPU1, "bf16", "bf16", (1, 2, 2), True, rounding="floor")),
        Case(build(NPU2, "bf16", "bf16", (2, 2, 1), False, rounding="sym_zero")),
    ]
    cases += [  # asymmetric tile buffering: matmul updates one of rho slices of C
        Case(build(NPU1, "bf16", "bf16", (1, 2, 1), True, rho=3)),
        Case(build(NPU2, "i8", "i16", (1, 2, 2), False, rho=2, shift=3)),
        Case(build(NPU2, "bf16", "bf16", (1, 2, 1), False, emulate=True, rho=4)),
        Case(build(NPU1, "i16", "i32", (2, 1, 1), True, rho=2)),
    ]
    return cases


CASES = _cases()
MAIN = [c for c in CASES if not c.build.emulate_bf16_with_bfp16]
EMULATED = [c for c in CASES if c.build.emulate_bf16_with_bfp16]
# kernels that must fail: a bf16 kernel without its set_rounding call
_BF16 = build(NPU1, "bf16", "bf16", (1, 2, 2), False)
NO_ROUNDING = Case(_BF16, patch=("  aie::set_rounding(aie::rounding_mode::conv_even);\n", ""))
# an ATB kernel that ignores its slice argument
_ATB = build(NPU2, "i8", "i32", (1, 2, 1), False, rho=2)
NO_SLICE = Case(_ATB, patch=("C + slice * gemm_gen_kernel::T_MA", "C + 0 * slice * gemm_gen_kernel::T_MA"))
ALL = [*CASES, Case(_ATB), NO_ROUNDING, NO_SLICE]


# ---- compiling and loading ---------------------------------------------------------------------
def _host_flags(defines: tuple[str, ...]) -> tuple[str, ...]:
    return (*CXXFLAGS, *defines, f"-I{HOST_API}", f"-I{kernel_include_dir()}")


@cache
def _toolchain_fingerprint() -> str:
    """The compiler's version and every header a kernel includes: a change rebuilds every kernel."""
    assert CXX is not None
    parts = [subprocess.run([CXX, "--version"], capture_output=True, text=True, check=True).stdout]
    for path in (HOST_API / "aie_api" / "aie.hpp", HOST_PROBE, kernel_include_dir() / "gemm_gen_kernel.h"):
        parts.append(path.read_text())
    return "\0".join(parts)


def compile_library(source: str, defines: tuple[str, ...]) -> Path:
    """Compile a rendered kernel plus the host probe into a shared library, cached by content."""
    assert CXX is not None
    flags = _host_flags(defines)
    key = hashlib.sha256("\0".join((source, *flags, _toolchain_fingerprint())).encode()).hexdigest()[:32]
    lib = CACHE / f"{key}.so"
    if lib.exists():
        return lib
    CACHE.mkdir(parents=True, exist_ok=True)
    src = CACHE / f"{key}.cc"
    src.write_text(source)
    tmp = CACHE / f"{key}.{os.getpid()}.tmp.so"
    proc = subprocess.run([CXX, *flags, str(src), str(HOST_PROBE), "-o", str(tmp)], capture_output=True, text=True)
    if proc.returncode:
        raise AssertionError(f"{CXX} failed on {src}:\n{proc.stderr}")
    os.replace(tmp, lib)
    return lib


@pytest.fixture(scope="module")
def libraries() -> dict[str, Path | BaseException]:
    """Every kernel of ALL, compiled once (in parallel on all cores)."""
    if CXX is None:
        pytest.skip("g++ not found: the host kernel checks need a C++20 g++")

    def one(case: Case) -> Path | BaseException:
        try:
            return compile_library(case.source, kernel_defines(case.build))
        except BaseException as e:  # reported by the test that needs this kernel
            return e

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        return dict(zip((c.id for c in ALL), pool.map(one, ALL)))


class Kernel:
    """A loaded kernel library: the two kernels and the host's emulated mode registers."""

    def __init__(self, path: Path, b: KernelBuild) -> None:
        self.lib = ctypes.CDLL(str(path))
        self.build = b
        zero_name, matmul_name = kernel_symbols(b)
        self.zero_fn = getattr(self.lib, zero_name)
        self.matmul_fn = getattr(self.lib, matmul_name)
        self.zero_fn.argtypes = [ctypes.c_void_p]
        self.matmul_fn.argtypes = [ctypes.c_void_p] * 3 + ([ctypes.c_int32] if b.rho > 1 else [])
        for fn in (self.lib.gg_host_set_rounding, self.lib.gg_host_set_saturation):
            fn.argtypes = [ctypes.c_uint]
        self.lib.gg_host_get_rounding.restype = ctypes.c_uint
        self.lib.gg_host_get_saturation.restype = ctypes.c_uint

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
    """Guard value bits: a quiet NaN for floats (it poisons any sum that reads it), else a pattern."""
    return {2: 0x7FC0, 4: 0x7FC00000}[host.itemsize] if host.kind in "fV" else 0x5A5A5A5A


class Guarded:
    """An L1 buffer of `size` elements with GUARD sentinel elements on either side."""

    def __init__(self, size: int, host: np.dtype) -> None:
        self.host = np.dtype(host)
        self.uint = np.dtype(f"u{self.host.itemsize}")
        self.bits = np.full(size + 2 * GUARD, _sentinel(self.host) & np.iinfo(self.uint).max, dtype=self.uint)
        self.size = size

    @property
    def body(self) -> np.ndarray:
        return self.bits[GUARD:GUARD + self.size].view(self.host)

    @property
    def ptr(self) -> int:
        return self.bits.ctypes.data + GUARD * self.host.itemsize

    def guards_intact(self) -> bool:
        ref = _sentinel(self.host) & np.iinfo(self.uint).max
        return bool(np.all(self.bits[:GUARD] == ref) and np.all(self.bits[GUARD + self.size:] == ref))


def numerics(b: KernelBuild, rounding: Rounding | None = None) -> KernelNumerics:
    mode = Rounding[b.rounding.upper()] if rounding is None else rounding
    return KernelNumerics.of(b.dtype_in, b.dtype_out, rounding=mode, saturation=Saturation[b.saturation.upper()],
                             shift=b.shift, bfp16_inputs=b.emulate_bf16_with_bfp16)


def inputs(case: Case, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Two k-steps of A (m x k) and B (k x n), logical, from gemm_gen.inputs."""
    b = case.build
    a, bb = make_inputs(b.m, 2 * b.k, b.n, b.dtype_in, "i32" if case.hot else b.dtype_out, seed=seed)
    return [(a[:, i * b.k:(i + 1) * b.k], bb[i * b.k:(i + 1) * b.k]) for i in range(2)]


def run_tile(kernel: Kernel, steps: list[tuple[np.ndarray, np.ndarray]], b_col_maj: bool | None = None,
             modes: tuple[Rounding, Saturation] = (Rounding.FLOOR, Saturation.NONE)) -> np.ndarray:
    """zero, then per k-step one matmul per A tile (rho of them, each T_MA rows, sharing the B
    tile as the ATB worker loop does), on L1 buffers in the kernel's layouts; returns C (m x n).

    b_col_maj overrides the layout B is written in (to prove a wrong layout is caught). `modes`
    are the mode registers the kernel finds (reset values by default) and must leave behind.
    """
    b = kernel.build
    r, s, t = b.mmul
    t_in, t_out = dtype(b.dtype_in), dtype(b.dtype_out)
    col_maj = b.b_col_maj if b_col_maj is None else b_col_maj
    kernel.set_modes(*modes)
    c = Guarded(b.m * b.n, t_out.host)  # starts as sentinel garbage: zero must clear all of it
    kernel.zero_fn(c.ptr)
    for a_tile, b_tile in steps:
        b_buf = Guarded(b.k * b.n, t_in.host)
        b_buf.body[b_layout(b.k, b.n, s, t, col_maj)] = b_tile
        for i in range(b.rho):
            a_buf = Guarded(b.t_ma * b.k, t_in.host)
            a_buf.body[a_layout(b.t_ma, b.k, r, s)] = a_tile[i * b.t_ma:(i + 1) * b.t_ma]
            kernel.matmul_fn(a_buf.ptr, b_buf.ptr, c.ptr, *((i,) if b.rho > 1 else ()))
            assert kernel.modes() == modes, "the kernel must restore the mode registers it found"
            assert a_buf.guards_intact()
        assert b_buf.guards_intact()
    assert c.guards_intact(), "the kernel wrote outside its C tile"
    return c.body[c_layout(b.m, b.n, r, t)]


def expected(b: KernelBuild, steps: list[tuple[np.ndarray, np.ndarray]],
             rounding: Rounding | None = None) -> np.ndarray:
    nm = numerics(b, rounding)
    c = nm.zero((b.m, b.n))
    for a_tile, b_tile in steps:
        assert nm.acc_overflows(nm.accumulate(c, a_tile, b_tile)) == 0, "inputs must not overflow acc32"
        c = nm.call(c, a_tile, b_tile)
    return c


def bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).view(f"u{x.dtype.itemsize}")


def assert_bit_equal(got: np.ndarray, want: np.ndarray, what: str) -> None:
    diff = np.argwhere(bits(got) != bits(want))
    if diff.size:
        i, j = diff[0]
        raise AssertionError(f"{what}: {len(diff)} of {got.size} elements differ, first C[{i},{j}] = "
                             f"{got[i, j]!r}, numerics.py says {want[i, j]!r}")


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
@pytest.mark.parametrize("case", EMULATED, ids=lambda c: c.id)
def test_bf16_via_bfp16_kernel_quantizes_like_the_numerics(libraries, case: Case) -> None:
    """npu2 bf16 with emulate_bf16_with_bfp16: the same template with mmul 8x8x8, compiled with
    -DAIE_API_EMULATE_BFLOAT16_MMUL_WITH_BFP16. The AIE API then quantizes A rows and B columns to
    bfp16ebs8 blocks of 8 along K inside the mmul; tests/aie_host models that conversion as
    gemm_gen/bfp16.py does (the on-chip conversion itself is unpublished), and the result must equal
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
                    assert any((b.dtype_in, b.dtype_out, b.b_col_maj) == (din, dout, col) for b in mine)
            for shape in dev.mmul_shapes[din]:
                assert any(b.dtype_in == din and b.mmul == shape for b in mine)
    assert {(b.dtype_out, b.b_col_maj) for b in builds if b.emulate_bf16_with_bfp16} == {
        ("bf16", True), ("bf16", False), ("f32", True), ("f32", False)}


@needs_gxx
def test_integer_modes_are_exercised(libraries) -> None:
    """The hot integer cases really round and saturate: their result changes under the directed
    roundings (floor, ceil) other than theirs, and under every other saturation mode."""
    for case in (c for c in MAIN if c.hot):
        b = case.build
        steps = inputs(case)
        want = expected(b, steps)
        others = [replace(numerics(b), rounding=r) for r in (Rounding.FLOOR, Rounding.CEIL)
                  if r.name.lower() != b.rounding]
        if dtype(b.dtype_out).bits < 32:
            others += [replace(numerics(b), saturation=s) for s in Saturation if s.name.lower() != b.saturation]
        for nm in others:
            c = nm.zero((b.m, b.n))
            for a_tile, b_tile in steps:
                c = nm.call(c, a_tile, b_tile)
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
        assert_bit_equal(run_tile(kernel, steps), expected(case.build, steps, Rounding.FLOOR), "floor numerics")
    mutant = load(libraries, NO_ROUNDING)
    got = run_tile(mutant, steps, modes=(Rounding.FLOOR, Saturation.NONE))
    with pytest.raises(AssertionError, match="elements differ"):
        assert_bit_equal(got, want, "kernel without set_rounding")
    assert_bit_equal(got, expected(case.build, steps, Rounding.FLOOR), "kernel without set_rounding, floor")


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
    from gemm_gen.numerics import round_f32_to_bf16

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


# ---- rendering ---------------------------------------------------------------------------------
def test_render_is_deterministic_and_says_what_it_is_for() -> None:
    first = [render_kernel(c.build) for c in CASES]
    render_module._environment.cache_clear()  # a fresh Jinja environment, equal (not identical) builds
    assert [render_kernel(replace(c.build)) for c in CASES] == first
    for case, text in zip(CASES, first):
        b = case.build
        head = text[:1200]
        assert f"Rendered for {kernel_params(b).device} ({b.aie_target})" in head
        assert f"{b.m} x {b.k} x {b.n}" in head and " x ".join(map(str, b.mmul)) in head
        assert f"rounding {b.rounding}" in head and f"shift {b.shift}" in head
        zero_name, matmul_name = kernel_symbols(b)
        assert f"void {zero_name}(" in text and f"void {matmul_name}(" in text
        assert text.endswith("\n") and "\t" not in text


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


@pytest.mark.parametrize("change, message", [
    (dict(m=12), "2x2 expansion"),
    (dict(rho=3), "does not divide"),
    (dict(rho=2), "2x2 expansion"),  # T_MA = 4 < 2r
    (dict(k=12), "2x2 expansion"),
    (dict(mmul=(8, 8, 8)), "kernel shape"),
    (dict(emulate_bf16_with_bfp16=True), "npu2 bf16 feature"),
    (dict(dtype_out="i8"), "kernel"),
    (dict(shift=2), "shift"),
    (dict(rounding="nearest"), "rounding"),
    (dict(aie_target="aie1"), "aie_target"),
])
def test_render_refuses_builds_no_kernel_can_be_for(change: dict, message: str) -> None:
    base = build(NPU1, "bf16", "bf16", (1, 2, 1), False)  # m = 8, k = 16, n = 8
    with pytest.raises(ConfigError, match=message):
        render_kernel(replace(base, **change))


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


@needs_gxx
def test_loop_hints_for_chess_peano_and_host(tmp_path: Path) -> None:
    """chess gets its keywords behind the loop headers, Peano its clang loop pragmas in front,
    a host compiler neither; the trip counts are the rendered ones."""
    b = build(NPU2, "i8", "i8", (2, 3, 1), True)  # 2 row pairs, 3 k-blocks, 1 column pair
    p = kernel_params(b)
    source = render_kernel(b)
    chess = _preprocess(source, tmp_path, "-D__chess__", "-D__AIE_ARCH__=21")
    assert chess.returncode == 0, chess.stderr
    assert f"for (unsigned i = 0; i < K_BLOCKS; ++i) chess_prepare_for_pipelining chess_loop_range({p.k_blocks}, )" \
        in chess.stdout
    assert f"chess_loop_range({p.row_pairs}, )" in chess.stdout and "event0()" in chess.stdout
    assert "#pragma clang" not in chess.stdout
    peano = _preprocess(source, tmp_path, "-D__AIECC__", "-D__AIE_ARCH__=21")
    assert peano.returncode == 0, peano.stderr
    assert f"#pragma clang loop min_iteration_count({p.k_blocks})" in peano.stdout
    assert f"#pragma clang loop min_iteration_count({p.row_pairs})" in peano.stdout
    assert "chess_" not in peano.stdout and "event1()" in peano.stdout
    host = _preprocess(source, tmp_path)
    assert host.returncode == 0 and "chess_" not in host.stdout and "pragma clang" not in host.stdout
    assert "event0" not in host.stdout


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

