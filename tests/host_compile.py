"""Compiling rendered kernels and small programs with the host g++ against tests/aie_host, once each.

Every library and program is cached by a hash of its source, its flags and the toolchain
(`fingerprint`: g++'s version and every header a kernel includes) under .pytest_cache/gemm_gen_kernels/,
so a second run compiles only what changed. On a clean clone (no cache) about a thousand kernels are
compiled; what made that slow, measured on 2 cores (issue 33 item 4), and what this module does:
- parsing aie.hpp and the standard headers it includes was three quarters of each compile: the header
  is precompiled once per set of flags (`pch_dir`, a g++ .gch; its macros and -O must match the
  compile that uses it, hence one per set) and every compile reads that instead (-Winvalid-pch with
  -Werror: a precompiled header g++ cannot use fails the compile rather than silently parsing again);
- host_probe.cc (the test entry points into the stand-in) was compiled again into every library: it is
  compiled once per set of flags into an object (`probe_object`) that each library links;
- what is left of each compile is half g++'s start, the precompiled header's load and the assembler's start:
  `compile_all` compiles the kernels of one set of flags BATCH to a translation unit (one g++ run), and links
  each kernel's library from that object on its own (gold when installed: a third of ld.bfd's time), so every
  library is still its own (see `batch_source`);
- the work is shared between processes (pytest-xdist workers) and threads: a compile holds an flock
  on its key, and `compile_all` first takes the kernels no one else is compiling, then waits for the
  rest, so two workers reaching the same module split its kernels instead of compiling each twice.
Every file appears under its final name whole or not at all (written under a temporary name, then
os.replace), so a reader never sees half a source, object or library.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from gemm_gen.backends.kernel_source import kernel_include_dir

REPO = Path(__file__).resolve().parents[1]
HOST_API = REPO / "tests" / "aie_host"
HOST_PROBE = HOST_API / "host_probe.cc"
# GEMM_GEN_KERNEL_CACHE: another folder (e.g. an empty one, to measure a clean clone's compiles)
CACHE = Path(os.environ.get("GEMM_GEN_KERNEL_CACHE") or REPO / ".pytest_cache" / "gemm_gen_kernels")
CXX = shutil.which("g++")
OPT = "-O1"  # the kernels' host code: -O0 compiles ~20% faster but runs the host AIE API many times slower
# gold links a kernel library in a third of ld.bfd's CPU time (0.013 s against 0.040 s, measured on this
# suite's libraries, issue 33 item 4: a seventh of each library's compile); the default linker without it
LINKER = ("-fuse-ld=gold",) if shutil.which("ld.gold") else ()
CXXFLAGS = ("-std=c++20", OPT, "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared", *LINKER,
            "-fno-gnu-unique")  # every library keeps its own emulated mode registers
# flags that only say what to link: a precompiled header and an object need the others to match
LINK_ONLY = ("-shared", *LINKER)


@cache
def fingerprint() -> str:
    """The compiler's version and every header a kernel includes: a change rebuilds every kernel."""
    assert CXX is not None
    parts = [subprocess.run([CXX, "--version"], capture_output=True, text=True, check=True).stdout]
    for path in (HOST_API / "aie_api" / "aie.hpp", HOST_PROBE, kernel_include_dir() / "gemm_gen_kernel.h"):
        parts.append(path.read_text())
    return "\0".join(parts)


def key_of(*parts: str) -> str:
    return hashlib.sha256("\0".join((*parts, fingerprint())).encode()).hexdigest()[:32]


def host_flags(defines: Sequence[str]) -> tuple[str, ...]:
    """The flags of a kernel library: the common ones, the build's defines (each once, in their first order: a
    define given twice is the same build, and would otherwise cost a precompiled header and a probe of its
    own), the stand-in and the kernel header."""
    return (*CXXFLAGS, *dict.fromkeys(defines), f"-I{HOST_API}", f"-I{kernel_include_dir()}")


def _tmp(path: Path) -> Path:
    """A name no other process or thread writes: per process and per thread."""
    return path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def write_atomic(path: Path, text: str) -> None:
    tmp = _tmp(path)
    tmp.write_text(text)
    os.replace(tmp, path)


@contextmanager
def _locked(key: str, wait: bool = True) -> Iterator[bool]:
    """An flock on `key` (between processes, and between threads: each opens its own lock file
    description). Yields whether it holds the lock: always with `wait`, else only when it was free."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{key}.lock", "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@dataclass
class Spent:
    """What this process's g++ runs cost: how many, and their CPU seconds (user + system, g++'s
    children included), by kind (library, program, pch, probe); printed at the end of the run."""

    runs: Counter[str] = field(default_factory=Counter)
    cpu_s: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, cpu_s: float) -> None:
        with self.lock:
            self.runs[kind] += 1
            self.cpu_s[kind] += cpu_s


SPENT = Spent()


def run_gxx(argv: Sequence[str], kind: str) -> tuple[int, str]:
    """g++ with `argv`: its exit status and stderr; its CPU time goes to SPENT[kind] (os.wait4 reads the
    child's own usage, which threads running other compiles at the same time do not blur)."""
    assert CXX is not None
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([CXX, *argv], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        SPENT.add(kind, usage.ru_utime + usage.ru_stime)
        err.seek(0)
        return proc.returncode, err.read().decode(errors="replace")


def _compile(argv: list[str], out: Path, what: str, kind: str) -> None:
    """Run g++ writing `out` whole: into a temporary name, renamed when g++ succeeded."""
    tmp = _tmp(out)
    code, stderr = run_gxx([*argv, "-o", str(tmp)], kind)
    if code:
        tmp.unlink(missing_ok=True)
        raise AssertionError(f"{CXX} failed on {what}:\n{stderr}")
    os.replace(tmp, out)


def _compile_flags(flags: Sequence[str]) -> tuple[str, ...]:
    return tuple(f for f in flags if f not in LINK_ONLY)


def pch_dir(flags: Sequence[str]) -> Path:
    """A folder whose aie_api/aie.hpp.gch is aie.hpp precompiled with `flags` (the link-only ones
    dropped); put it first on the include path. g++ looks for <aie_api/aie.hpp>.gch in each include
    folder before the header itself, and takes it when the macros and options match."""
    flags = _compile_flags(flags)
    key = key_of("pch", *flags)
    folder = CACHE / f"pch-{key}"
    gch = folder / "aie_api" / "aie.hpp.gch"
    if gch.exists():
        return folder
    with _locked(key):
        if not gch.exists():
            gch.parent.mkdir(parents=True, exist_ok=True)
            # through a one-line header: g++ warns (-Werror) about aie.hpp's #pragma once in a main file
            wrapper = CACHE / f"pch-{key}.hpp"
            write_atomic(wrapper, "#include <aie_api/aie.hpp>\n")
            _compile([*flags, "-x", "c++-header", str(wrapper)], gch, f"{wrapper} (aie.hpp precompiled)", "pch")
    return folder


def with_pch(flags: Sequence[str]) -> list[str]:
    """`flags` with aie.hpp precompiled for them first on the include path; a precompiled header g++
    cannot use is an error (-Winvalid-pch under -Werror) instead of a silent slow parse."""
    return [f"-I{pch_dir(flags)}", "-Winvalid-pch", *flags]


def probe_object(flags: Sequence[str]) -> Path:
    """host_probe.cc compiled once with `flags` (link-only ones dropped) into an object libraries link."""
    flags = _compile_flags(flags)
    key = key_of("probe", *flags)
    obj = CACHE / f"probe-{key}.o"
    if obj.exists():
        return obj
    with _locked(key):
        if not obj.exists():
            _compile([*with_pch(flags), "-c", str(HOST_PROBE)], obj, str(HOST_PROBE), "probe")
    return obj


def library_key(source: str, defines: Sequence[str]) -> str:
    return key_of(source, *host_flags(defines))


def _library(key: str, source: str, flags: Sequence[str]) -> Path:
    """Compile one kernel library alone (the caller holds its lock)."""
    lib = CACHE / f"{key}.so"
    if not lib.exists():
        src = CACHE / f"{key}.cc"
        write_atomic(src, source)
        _compile([*with_pch(flags), str(src), str(probe_object(flags))], lib, str(src), "library")
    return lib


def compile_library(source: str, defines: Sequence[str], wait: bool = True) -> Path | None:
    """A rendered kernel plus the host probe as a shared library, cached by content. Without `wait`,
    None when another process or thread is compiling it right now."""
    assert CXX is not None
    key = library_key(source, defines)
    lib = CACHE / f"{key}.so"
    if lib.exists():
        return lib
    with _locked(key, wait) as mine:
        if not mine:
            return None
        return _library(key, source, host_flags(defines))


# ---- several kernels in one translation unit (issue 33 item 4) --------------------------------------------------
# A library compiled alone spends half its CPU time on what does not depend on the kernel: g++'s start, loading
# the precompiled header, the assembler's start (0.085 s of 0.17 s, measured). So the kernels of one set of flags
# are compiled BATCH at a time in one translation unit into one object, each inside a namespace of its own
# (gg_batch<i>) and with its extern "C" names renamed (-D style macros, gg_batch<i>_<name>); then each kernel's
# library is linked from that object on its own, its C names given back by --defsym. Every library is still a
# library of its own (its own emulated mode registers, its own probe), exports its kernel's C names, and runs the
# same compiled code; a batch that does not compile (a kernel the stand-in refuses) is compiled one kernel at a
# time, so each failure is the kernel's own message.
BATCH = 8
_C_BLOCK = re.compile(r'^extern "C" \{\n(.*?)^\}  // extern "C"', re.S | re.M)
_C_NAME = re.compile(r"^[A-Za-z_][\w \*]*?\b(\w+)\(", re.M)
_SHARED_INCLUDE = re.compile(r'^#include (<aie_api/aie\.hpp>|"gemm_gen_kernel\.h")$', re.M)


def c_names(source: str) -> list[str] | None:
    """The C names a rendered kernel defines (its extern "C" block's functions); None when it cannot share a
    translation unit: no such block, or a macro of its own that the next kernel would see."""
    block = _C_BLOCK.search(source)
    if block is None or "#define" in source or "#undef" in source:
        return None
    return _C_NAME.findall(block.group(1)) or None


def batch_source(kernels: Sequence[tuple[str, str, list[str]]]) -> str:
    """One translation unit holding every (key, source, C names) kernel: the shared headers first (the
    precompiled one must come first, and cannot be included twice), then each kernel in its namespace with its
    C names renamed, its lines numbered as in its own file (CACHE/<key>.cc) for g++'s messages."""
    parts = ['#include <aie_api/aie.hpp>\n#include "gemm_gen_kernel.h"\n']
    for i, (key, source, names) in enumerate(kernels):
        parts += [f"#define {name} gg_batch{i}_{name}\n" for name in names]
        parts.append(f'namespace gg_batch{i} {{\n#line 1 "{CACHE / key}.cc"\n'
                     f"{_SHARED_INCLUDE.sub('', source)}\n}}  // namespace gg_batch{i}\n")
        parts += [f"#undef {name}\n" for name in names]
    return "".join(parts)


def _batch(kernels: Sequence[tuple[str, str, list[str]]], flags: Sequence[str]) -> bool:
    """Compile `kernels` (their locks held) in one translation unit and link each one's library; False when the
    unit does not compile or a library does not link (what was linked stays: each library is whole)."""
    obj = CACHE / f"batch-{key_of(*(key for key, _, _ in kernels), *flags)}.o"
    src = obj.with_suffix(".cc")
    write_atomic(src, batch_source(kernels))
    try:
        _compile([*with_pch(_compile_flags(flags)), "-c", str(src)], obj, f"a batch of {len(kernels)} kernels", "batch")
        for i, (key, source, names) in enumerate(kernels):
            write_atomic(CACHE / f"{key}.cc", source)
            _compile([*flags, str(obj), str(probe_object(flags)),
                      *(f"-Wl,--defsym={name}=gg_batch{i}_{name}" for name in names)],
                     CACHE / f"{key}.so", f"{key}.so (linked from {obj})", "link")
    except AssertionError:
        return False
    finally:
        obj.unlink(missing_ok=True)
        src.unlink(missing_ok=True)
    return True


def compile_threads() -> int:
    """g++ runs one process starts at once: its share of the cores (pytest-xdist starts one worker per core,
    each compiling: cores x cores compiles at once would only queue, each holding its memory)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    return max(1, -(-(os.cpu_count() or 2) // max(workers, 1)))


def compile_all(cases: Sequence[Any], defines_of: Callable[[Any], tuple[str, ...]]) -> dict[str, Path | BaseException]:
    """Every case's kernel (a `source` and an `id`; `defines_of(case)` its defines) compiled once, in parallel
    (compile_threads at once), BATCH kernels of the same flags per g++ run; the ones another process is compiling
    are taken last (and waited for then). A failure is kept for the test that needs that kernel."""
    assert CXX is not None
    jobs: dict[str, tuple[str, tuple[str, ...]]] = {}
    for case in cases:  # one job per distinct library: a mutant's control may be another case's kernel
        jobs.setdefault(case.id, (case.source, defines_of(case)))
    keys = {name: library_key(*job) for name, job in jobs.items()}
    by_flags: dict[tuple[str, ...], dict[str, str]] = {}  # flags -> key -> source, the kernels not yet built
    for name, (source, defines) in jobs.items():
        if not (CACHE / f"{keys[name]}.so").exists():
            by_flags.setdefault(host_flags(defines), {})[keys[name]] = source
    chunks = [(flags, list(todo.items())[i:i + BATCH]) for flags, todo in by_flags.items()
              for i in range(0, len(todo), BATCH)]
    done: dict[str, Path | BaseException] = {}  # key -> what this process made of it
    done_lock = threading.Lock()

    def chunk(item: tuple[tuple[str, ...], list[tuple[str, str]]]) -> None:
        flags, kernels = item
        with ExitStack() as stack:  # the kernels no one else is compiling, and not built meanwhile
            mine = [(key, source) for key, source in kernels
                    if stack.enter_context(_locked(key, wait=False)) and not (CACHE / f"{key}.so").exists()]
            named = [(key, source, c_names(source)) for key, source in mine]
            batchable = [(key, source, names) for key, source, names in named if names is not None]
            if len(batchable) > 1 and _batch(batchable, flags):
                alone = [(key, source) for key, source, names in named if names is None]
            else:
                alone = mine
            for key, source in alone:
                try:
                    got: Path | BaseException = _library(key, source, flags)
                except BaseException as e:  # reported by the test that needs this kernel
                    got = e
                with done_lock:
                    done[key] = got

    def rest(name: str) -> Path | BaseException:
        if keys[name] in done:
            return done[keys[name]]
        try:
            lib = compile_library(*jobs[name])  # built here, by another process, or waited for
            assert lib is not None
            return lib
        except BaseException as e:
            return e

    with ThreadPoolExecutor(max_workers=compile_threads()) as pool:
        list(pool.map(chunk, chunks))
        out = dict(zip(jobs, pool.map(rest, jobs)))
    return {case.id: out[case.id] for case in cases}


def host_program(src: str, flags: Sequence[str]) -> Path:
    """`src` (a main() that includes <aie_api/aie.hpp> first) compiled with `flags` and host_probe.cc
    into an executable, cached by content."""
    key = key_of(src, *flags)
    exe = CACHE / f"host_run_{key[:16]}"
    if exe.exists():
        return exe
    with _locked(key):
        if not exe.exists():
            source = CACHE / f"{exe.name}.cc"
            write_atomic(source, src)
            _compile([*with_pch(flags), *LINKER, str(source), str(probe_object(flags))], exe, str(source), "program")
    return exe
