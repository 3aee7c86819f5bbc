"""tests/host_compile.py: the host kernels compile against the precompiled aie.hpp, once per library
however many pytest workers ask for it (issue 33 item 4)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from gemm_gen.kernels import kernel_symbols

from . import host_compile as hc
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
