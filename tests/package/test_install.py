"""A plain `pip install .` (not editable) installs a gemm-gen that renders kernels and simulates from any
directory: setup.py copies the top-level templates/ and kernels/ into the wheel,
gemm_gen/backends/kernel_source/paths.py reads
the installed copy first (issue 32 item 7)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gemm_gen.backends.kernel_source import paths
from gemm_gen.facts.errors import GemmGenError

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "setup.py", "README.md", "gemm_gen", "templates", "kernels")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel pip builds from a copy of the checkout's sources (the checkout itself is not written)."""
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("wheel")
    for name in SOURCES:
        (shutil.copytree if (REPO / name).is_dir() else shutil.copyfile)(
            REPO / name, src / name, **({"ignore": shutil.ignore_patterns("__pycache__")} if (REPO / name).is_dir()
                                        else {}))
    # pip's own way: an isolated build environment with pyproject's build requirements from the package index
    run = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(src)],
                         capture_output=True, text=True)
    if run.returncode != 0 and "No matching distribution found for setuptools" in run.stderr:
        pytest.skip("the package index is unreachable: pip cannot fetch setuptools to build a wheel")
    assert run.returncode == 0, run.stderr
    (found,) = out.glob("gemm_gen-*.whl")
    return found


def test_the_wheel_carries_every_template_and_the_kernel_header(wheel: Path):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        for top, (inside, pattern) in {"templates": ("templates", "*.j2"), "kernels": ("include", "*.h")}.items():
            files = sorted((REPO / top).glob(pattern))
            assert files
            for path in files:
                name = f"gemm_gen/backends/kernel_source/data/{inside}/{path.name}"
                assert name in names, f"{name} missing from the wheel"
                assert z.read(name) == path.read_bytes()  # a copy, not a different version


def test_an_installed_package_renders_and_simulates_from_elsewhere(wheel: Path, tmp_path: Path):
    """Installed into a fresh target (no checkout on its path), run from another directory: `gemm-gen kernel`
    renders from the installed templates and `gemm-gen simulate` passes."""
    target, cwd = tmp_path / "site", tmp_path / "elsewhere"
    cwd.mkdir()
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    env = {**os.environ, "PYTHONPATH": str(target)}
    probe = ("import gemm_gen.backends.kernel_source.paths as p; print(p.templates_dir()); "
             "print(p.kernel_include_dir())")
    where = subprocess.run([sys.executable, "-c", probe], cwd=cwd, env=env, capture_output=True, text=True, check=True)
    assert all(line.startswith(str(target)) for line in where.stdout.split()), where.stdout  # not the checkout's
    cli = [sys.executable, "-m", "gemm_gen.app.cli"]
    kernel = subprocess.run([*cli, "kernel", "--dev", "npu2", "-M", "128", "-K", "128", "-N", "128"], cwd=cwd, env=env,
                            capture_output=True, text=True)
    assert kernel.returncode == 0, kernel.stderr
    assert "rendered by gemm_gen from templates/" in kernel.stdout and "#include" in kernel.stdout
    sim = subprocess.run([*cli, "simulate", "--dev", "npu1", "-M", "64", "-K", "64", "-N", "64"], cwd=cwd, env=env,
                         capture_output=True, text=True)
    assert sim.returncode == 0 and sim.stdout.rstrip().endswith("PASS"), sim.stdout + sim.stderr


def test_missing_kernel_data_is_one_line_naming_both_places(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setattr(paths, "PACKAGE_DATA", tmp_path / "data")
    monkeypatch.setattr(paths, "REPO_ROOT", tmp_path)
    with pytest.raises(GemmGenError) as e:
        paths.templates_dir()
    text = str(e.value)
    assert "\n" not in text and str(tmp_path / "data" / "templates") in text and "pip install ." in text
