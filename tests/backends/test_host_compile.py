"""tests/host_compile.py: the host kernels compile against the precompiled aie.hpp, once per library
however many pytest workers ask for it (issue 33 item 4)."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gemm_gen.backends.kernel_source import kernel_symbols
from gemm_gen.facts.rounding import Rounding, Saturation

from .. import host_compile as hc
from . import test_kernels as tk

CASE = tk.ALL[0]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty compile cache of this test's own."""
    monkeypatch.setattr(hc, "CACHE", tmp_path)
    return tmp_path


@tk.needs_gxx
def test_kernels_read_the_precompiled_header(cache: Path) -> None:
    """g++ -H marks a precompiled header it reads with '!': each library's compile reads aie.hpp's .gch
    (a flag change that made g++ parse aie.hpp again would cost every kernel its compile time twice over)."""
    defines = tk.host_defines(CASE.build)
    src = cache / "kernel.cc"
    src.write_text(CASE.source)
    code, err = hc.run_gxx([*hc.with_pch(hc.host_flags(defines)), "-H", "-fsyntax-only", str(src)], "check")
    assert code == 0, err
    used = [line for line in err.splitlines() if line.startswith("!")]
    assert len(used) == 1 and used[0].endswith("aie_api/aie.hpp.gch"), err[:2000]


@tk.needs_gxx
def test_a_library_another_worker_compiles_is_waited_for_not_compiled_again(cache: Path) -> None:
    """While another process holds a library's lock, a compile that may not wait leaves it (compile_all takes
    it last); once the lock is free the library is compiled, whole, and loads with its kernel's symbols."""
    defines = tk.host_defines(CASE.build)
    key = hc.library_key(CASE.source, defines)
    with hc._locked(key):
        assert hc.compile_library(CASE.source, defines, wait=False) is None
        assert not (cache / f"{key}.so").exists()
    lib = hc.compile_library(CASE.source, defines, wait=False)
    assert lib == cache / f"{key}.so"
    loaded = ctypes.CDLL(str(lib))
    assert all(hasattr(loaded, name) for name in (*kernel_symbols(CASE.build), "gg_host_error"))
    assert not list(cache.glob("*.tmp")), "a temporary file was left behind"
    assert hc.compile_library(CASE.source, defines) == lib  # cached: no second compile


@dataclass(frozen=True)
class _Job:
    """A kernel for compile_all: an id and a source (and the build whose defines it takes)."""

    id: str
    source: str
    build: Any


def _defines(job: Any) -> tuple[str, ...]:
    return (*tk.host_defines(job.build), *getattr(job, "host_defines", ()))


def _one_flag_set(n: int) -> list[tk.Case]:
    """n of test_kernels' main cases that compile with the same flags, of different tile shapes."""
    by_flags: dict[tuple[str, ...], dict[tuple[int, int, int], tk.Case]] = {}
    for case in tk.MAIN:
        by_flags.setdefault(_defines(case), {}).setdefault((case.build.m, case.build.k, case.build.n), case)
    return next(list(cases.values())[:n] for cases in by_flags.values() if len(cases) >= n)


@tk.needs_gxx
def test_kernels_compiled_in_one_unit_are_each_a_library_of_their_own(cache: Path) -> None:
    """compile_all compiles kernels of one set of flags several per g++ run (one translation unit, issue 33
    item 4); each library still holds its own kernel under the kernel's C names (run, it equals facts/numerics.py bit
    for bit) and its own emulated mode registers."""
    cases = _one_flag_set(3)
    batches = hc.SPENT.runs["batch"]
    libs = hc.compile_all(cases, _defines)
    assert hc.SPENT.runs["batch"] == batches + 1, "the three kernels were not compiled in one g++ run"
    kernels = [tk.Kernel(libs[case.id], case.build) for case in cases]  # type: ignore[arg-type]
    for case, kernel in zip(cases, kernels):
        steps = tk.inputs(case)
        tk.assert_bit_equal(tk.run_tile(kernel, steps), tk.expected(case.build, steps), case.id)
    kernels[0].set_modes(Rounding.CEIL, Saturation.SYMMETRIC)
    assert kernels[1].modes() == (Rounding.FLOOR, Saturation.NONE), "two libraries share mode registers"
    assert not list(cache.glob("*.tmp")) and not list(cache.glob("batch-*")), "a temporary file was left behind"


@tk.needs_gxx
def test_a_kernel_that_does_not_compile_fails_alone_and_with_its_own_message(cache: Path) -> None:
    """A batch holding a kernel the stand-in refuses does not compile; its kernels are then compiled one by one:
    the others still build, and the refused one's error is its own compile's."""
    good, other = _one_flag_set(2)
    bad = _Job("refused", other.source + '\nstatic_assert(sizeof(int) == 0, "gg_refused_here");\n', other.build)
    libs = hc.compile_all([good, bad], _defines)
    assert isinstance(libs[good.id], Path)
    tk.Kernel(libs[good.id], good.build)  # type: ignore[arg-type]
    error = libs[bad.id]
    assert isinstance(error, AssertionError) and "gg_refused_here" in str(error)
    assert f"{hc.library_key(bad.source, _defines(bad))}.cc" in str(error), "the message is not the kernel's own"
