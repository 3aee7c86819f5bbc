"""Shared helpers for the tests."""

from __future__ import annotations

import os
import resource
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gemm_gen.spec.config import GemmConfig

from . import random_designs

BUILD = Path(__file__).parents[1] / "build"  # the user's build/ in the checkout: tests never write there


def build_snapshot(build: Path = BUILD, deep: bool = True) -> dict[str, tuple[int, int]]:
    """Every path under build/ (only its top level unless `deep`) with its size and modification
    time, and "." when build/ exists at all."""
    if not os.path.lexists(build):
        return {}
    out = {".": (0, 0)}
    if not build.is_dir() or build.is_symlink():
        return out
    walk = os.walk(build) if deep else [(str(build), [], [e.name for e in os.scandir(build)])]
    for folder, dirs, files in walk:
        for name in dirs + files:
            path = os.path.join(folder, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:  # gone since the walk listed it (a writability probe's temporary file)
                continue
            out[os.path.relpath(path, build)] = (st.st_size, st.st_mtime_ns)
    return out


def build_changes(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    return sorted(f"{'added' if k not in before else 'removed' if k not in after else 'changed'} {k}"
                  for k in before.keys() | after.keys() if before.get(k) != after.get(k))


@pytest.fixture(scope="session", autouse=True)
def _leave_build_alone() -> Iterator[None]:
    """`make test` writes nothing into the checkout's build/: the whole tree is compared after the run."""
    before = build_snapshot()
    yield
    changes = build_changes(before, build_snapshot())
    if changes:
        pytest.fail(f"the test run changed {BUILD}: {', '.join(changes[:10])}; write into tmp_path instead "
                    "(BUILD_DIR=, --build-dir, --out-dir, -o)", pytrace=False)


@pytest.fixture(autouse=True)
def _leave_build_alone_per_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """The same check on build/'s top level after each test, to name the test that wrote there."""
    before = build_snapshot(deep=False)
    yield
    changes = build_changes(before, build_snapshot(deep=False))
    if changes:
        pytest.fail(f"{request.node.nodeid} changed {BUILD}: {', '.join(changes[:10])}; write into tmp_path "
                    "instead (BUILD_DIR=, --build-dir, --out-dir, -o)", pytrace=False)


def small(dev: str = "npu1", dtype_in: str = "bf16", dtype_out: str = "bf16", b_col_maj: bool = True,
          M: int | None = None, K: int | None = None, N: int | None = None, **kw: object) -> GemmConfig:
    """A small valid config: the smallest tiles the kernel allows, two blocks each way."""
    from gemm_gen.facts.devices import device
    from gemm_gen.spec.config import emulation_default

    emulate = kw.get("emulate_bf16_with_bfp16")
    if emulate is None:
        emulate = emulation_default(dev, dtype_in)
    r, s, t = device(dev).mmul_shape(dtype_in, bool(emulate))
    m, k, n = 2 * r, 2 * s, 2 * t
    k_mt = kw.pop("k_mt", 2 * k)
    cols = device(dev).columns
    return GemmConfig(dev, M or 2 * 4 * m, K or 2 * k_mt, N or 2 * cols * n, kw.pop("m", m), kw.pop("k", k),
                      kw.pop("n", n), k_mt, dtype_in, dtype_out, b_col_maj, **kw)  # type: ignore[arg-type]


@pytest.fixture
def small_config():
    return small


# ---- what the run cost, said at its end (with pytest-xdist: summed over the workers) -----------------
SAID: list[str] = []  # lines tests asked to print at the end (e.g. how many random runs they made)


@pytest.fixture
def say_at_end() -> Callable[[str], None]:
    """A line for the summary at the end of the run (pytest -q hides what tests print)."""
    return SAID.append


def _cpu() -> float:
    """CPU seconds of this process and its finished children (g++, make, gemm-gen subprocesses)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


MODULE_CPU: dict[str, float] = {}  # CPU seconds per test module: its tests and fixtures, subprocesses included


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    start, drawn = _cpu(), random_designs.drawn()
    yield
    module = item.nodeid.split("::")[0]
    spent = _cpu() - start
    MODULE_CPU[module] = MODULE_CPU.get(module, 0.0) + spent
    if random_designs.drawn() > drawn:  # a test that drew random designs: its CPU time is theirs
        random_designs.CPU["seconds"] += spent


def _costs() -> dict[str, Any]:
    """This process's CPU seconds (its own, and its finished children's: g++, make, gemm-gen
    subprocesses), per test module, the host compiles by kind, and the lines tests asked to say."""
    from .host_compile import SPENT
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"cpu_self": own.ru_utime + own.ru_stime, "cpu_children": children.ru_utime + children.ru_stime,
            "module_cpu": dict(MODULE_CPU), "gxx_runs": dict(SPENT.runs), "gxx_cpu": dict(SPENT.cpu_s),
            "said": list(SAID), "random_designs": dict(random_designs.COUNTS), "random_cpu": dict(random_designs.CPU)}


def _merge(into: dict[str, Any], more: dict[str, Any]) -> None:
    for key, value in more.items():
        if isinstance(value, dict):
            for kind, x in value.items():
                into.setdefault(key, {})[kind] = into.get(key, {}).get(kind, 0) + x
        elif isinstance(value, list):
            into.setdefault(key, []).extend(value)
        else:
            into[key] = into.get(key, 0) + value


TOP_MODULES = 12  # the modules the summary names
WORKER_COSTS: list[dict[str, Any]] = []  # the xdist controller's copy of each worker's _costs()


def pytest_sessionfinish(session: pytest.Session) -> None:
    if hasattr(session.config, "workeroutput"):  # an xdist worker: hand its costs to the controller
        session.config.workeroutput["gemm_gen_costs"] = _costs()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    costs = getattr(node, "workeroutput", {}).get("gemm_gen_costs")
    if costs:
        WORKER_COSTS.append(costs)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Where the run's CPU time went: the test processes, the host g++ compiles (by kind; the rest of the
    subprocesses is make, gemm-gen and the like), what tests asked to say, and how many random designs the
    run checked (tests/random_designs.py), with the CPU time of the tests that drew them."""
    if hasattr(terminalreporter.config, "workeroutput"):
        return
    total: dict[str, Any] = {}
    own = _costs()
    if WORKER_COSTS:  # the controller's children are the workers, whose costs came whole
        own["cpu_children"] = 0.0
    for costs in (own, *WORKER_COSTS):
        _merge(total, costs)
    runs, cpu = total.get("gxx_runs", {}), total.get("gxx_cpu", {})
    gxx = sum(cpu.values())
    kinds = ", ".join(f"{runs[k]} {k} ({cpu[k]:.0f} s)" for k in sorted(runs))
    modules = sorted(total.get("module_cpu", {}).items(), key=lambda kv: -kv[1])
    if not modules:  # nothing ran (--collect-only)
        return
    lines = [f"CPU time: tests {total['cpu_self']:.0f} s, subprocesses {total['cpu_children']:.0f} s, of which "
             f"host g++ compiles {gxx:.0f} s ({kinds or 'none: every kernel was cached'})",
             "CPU time by module (with its compiles and subprocesses): "
             + ", ".join(f"{Path(m).stem} {t:.0f} s" for m, t in modules[:TOP_MODULES]), *total.get("said", [])]
    lines += random_designs.summary(total.get("random_designs", {}), total.get("random_cpu", {}).get("seconds", 0.0))
    terminalreporter.write_sep("-", "gemm_gen: what the run did")
    for line in lines:
        terminalreporter.write_line(line)
