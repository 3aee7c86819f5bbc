"""Every make target the README documents works with its documented variables (defect: `make roofline`
once failed as documented). Targets that need an NPU stop with one sentence here; the test suite, the
benchmarks, lint and clean are checked as dry runs (running them inside the tests would recurse)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
STAMP = ".venv/.installed"  # never reinstall from inside the tests


def make(*args: str, dry: bool = False) -> subprocess.CompletedProcess[str]:
    argv = ["make", "--no-print-directory", "-o", STAMP, *(["-n"] if dry else []), *args]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)


def documented_targets() -> set[str]:
    """Every target a `make ...` in the README names (`make a|b|c` lists several)."""
    text = (ROOT / "README.md").read_text()
    targets = set()
    for m in re.finditer(r"\bmake((?:\s+[A-Za-z_]+=\S*)*)\s+([a-z][a-z|-]*)", text):
        targets.update(t for t in m.group(2).split("|") if t)
    return targets


def test_the_readme_names_every_target_and_make_has_them():
    targets = documented_targets()
    assert {"sim", "test", "plan", "generate", "kernel", "mlir", "predict", "tune", "roofline", "all", "run",
            "dry-run", "doctor", "validate", "test-slow", "bench", "lint", "clean", "install"} <= targets
    for target in sorted(targets):
        done = make(target, dry=True)
        assert done.returncode == 0, (target, done.stderr)


@pytest.mark.parametrize("args,expect", [
    (("sim", "DEVICE=npu2", "M=1344", "K=1536", "N=1536", "B_COL_MAJ=1"), "PASS"),  # the README's main job
    (("sim", "DEVICE=npu1", "M=256", "K=512", "N=128", "N_AIE_COLS=1", "DTYPE_IN=i8", "DTYPE_OUT=i32",
      "m=32", "k=64", "n=32"), "PASS"),
    (("sim", "DEVICE=npu2", "M=512", "K=512", "N=256", "N_AIE_COLS=2", "m=64", "k=64", "n=64", "K_MT=128"), "PASS"),
    (("sim", "DEVICE=npu2", "M=512", "K=512", "N=1024", "PRESET=config1", "B_PACK=strips", "m=64", "k=64",
      "n=64", "K_MT=128", "RHO=2", "SEED=3"), "PASS"),
    (("plan", "DEVICE=npu2", "M=512", "K=512", "N=512", "DTYPE_IN=bfp16", "DTYPE_B=bfp16", "DTYPE_OUT=bfp16",
      "ACC=f32"), "kernel "),
    (("generate", "DEVICE=npu1", "M=512", "K=512", "N=512", "DTYPE_IN=i16", "DTYPE_OUT=i32"), "wrote build/design_"),
    (("kernel", "DEVICE=npu1", "M=512", "K=512", "N=512", "DTYPE_IN=i8", "DTYPE_OUT=i8"), "#include"),
    (("predict", "DEVICE=npu2", "M=1024", "K=1024", "N=1024"), "PREDICTED"),
    (("tune", "DEVICE=npu1", "M=1024", "K=1024", "N=1024", "DTYPE_IN=i8", "DTYPE_OUT=i16", "TOP=2"), "PREDICTED"),
    (("roofline",), "wrote build/roofline_"),
    (("roofline", "DEVICE=npu1", "DTYPE_IN=i8", "DTYPE_OUT=i16"), "wrote build/heatmap_"),
    (("dry-run", "DEVICE=npu1", "M=512", "K=512", "N=512", "CHESS=1"), "--xchesscc --xbridge"),
    (("dry-run", "DEVICE=npu2", "M=512", "K=512", "N=1024", "PRESET=config2"), "--dynamic-objFifos"),
    (("plan", "DEVICE=npu1", "M=512", "K=512", "N=512", "m=64", "k=64", "n=64", "EXPANSION=2x2", "KERNEL_LOOPS=k-flat",
      "L1_ALLOC=basic-sequential"), "2x2 accumulators per cluster, k-flat (given"),
    (("plan", "DEVICE=npu2", "M=512", "K=512", "N=512", "CHESS=1", "CONVERT_ONCE=0"), "variant   2x2"),
], ids=lambda x: " ".join(x) if isinstance(x, tuple) else None)
def test_documented_targets_work(args, expect):
    done = make(*args)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert expect in done.stdout


@pytest.mark.skipif(importlib.util.find_spec("aie") is not None or importlib.util.find_spec("pyxrt") is not None,
                    reason="this machine has the NPU toolchain (pytest -m hardware covers it)")
@pytest.mark.parametrize("args", [("mlir", "DEVICE=npu2"), ("all", "DEVICE=npu2", "M=512", "K=512", "N=512"),
                                  ("run", "DEVICE=npu1", "M=512", "K=512", "N=512", "WARMUP=1", "ITERS=2"),
                                  ("validate", "DEVICE=npu2")], ids=lambda x: x[0])
def test_npu_targets_stop_in_one_sentence_without_the_toolchain(args):
    done = make(*args)
    assert done.returncode != 0
    message = [line for line in done.stderr.splitlines() if line.startswith("gemm-gen")]
    assert len(message) == 1 and "Traceback" not in done.stderr, done.stderr
    assert re.search(r"install|build_drivers|not ready", message[0]), message


def test_doctor_reports_every_tool():
    done = make("doctor")
    assert "mlir-aie (IRON, aiecc): pinned 1.4.3" in done.stdout and "Peano (llvm-aie)" in done.stdout
    assert (done.returncode == 0) == ("everything is in place" in done.stdout)


@pytest.mark.parametrize("target,command", [("test", "pytest -q"), ("test-slow", "pytest -q -m slow"),
                                            ("bench", "scripts/bench_sim.py"), ("lint", "ruff check"),
                                            ("clean", "rm -rf build"), ("install", "")])
def test_the_rest_as_dry_runs(target, command):
    done = make(target, dry=True)
    assert done.returncode == 0 and command in done.stdout
