"""Shared helpers for the tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from gemm_gen.config import GemmConfig

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
            st = os.lstat(path)
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
    from gemm_gen.config import emulation_default
    from gemm_gen.hw.devices import device

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
