"""Every make target the README documents works with its documented variables (defect: `make roofline`
once failed as documented). Targets that need an NPU stop with one sentence here; the test suite, the
benchmarks, lint and clean are checked as dry runs (running them inside the tests would recurse).
Targets that write files write them into a temporary BUILD_DIR, never into the checkout's build/.
The Makefile's variables come only from its command line (defect: an exported SIZES or k silently
changed what `make sim M=.. K=.. N=..` checked), and its first install is quiet."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
STAMP = ".venv/.installed"  # never reinstall from inside the tests


def make(*args: str, dry: bool = False, env: dict[str, str] | None = None,
         cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    argv = ["make", "--no-print-directory", "-o", STAMP, *(["-n"] if dry else []), *args]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


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
    (("sim", "DEVICE=npu1", "M=256", "K=512", "N=128", "N_AIE_COLS=1", "DTYPE_IN=i8", "DTYPE_OUT=i32",
      "m=32", "k=64", "n=32"), "PASS"),
    (("sim", "DEVICE=npu2", "M=512", "K=512", "N=256", "N_AIE_COLS=2", "m=64", "k=64", "n=64", "K_MT=128"), "PASS"),
    (("sim", "DEVICE=npu2", "M=512", "K=512", "N=1024", "PRESET=config1", "B_PACK=strips", "m=64", "k=64",
      "n=64", "K_MT=128", "RHO=2", "SEED=3"), "PASS"),
    (("plan", "DEVICE=npu2", "M=512", "K=512", "N=512", "DTYPE_IN=bfp16", "DTYPE_B=bfp16", "DTYPE_OUT=bfp16",
      "ACC=f32"), "kernel "),
    (("generate", "DEVICE=npu1", "M=512", "K=512", "N=512", "DTYPE_IN=i16", "DTYPE_OUT=i32"), "wrote {build}/design_"),
    (("kernel", "DEVICE=npu1", "M=512", "K=512", "N=512", "DTYPE_IN=i8", "DTYPE_OUT=i8"), "#include"),
    (("predict", "DEVICE=npu2", "M=1024", "K=1024", "N=1024"), "PREDICTED"),
    (("plan", "DEVICE=npu2", "M=1", "K=256", "N=1024", "DTYPE_IN=i8", "MAPPING=decode"), "1 rows x 8 cols"),
    (("tune", "DEVICE=npu1", "M=1024", "K=1024", "N=1024", "DTYPE_IN=i8", "DTYPE_OUT=i16", "TOP=2"), "PREDICTED"),
    (("roofline",), "wrote {build}/roofline_"),
    (("roofline", "DEVICE=npu1", "DTYPE_IN=i8", "DTYPE_OUT=i16"), "wrote {build}/heatmap_"),
    (("dry-run", "DEVICE=npu1", "M=512", "K=512", "N=512", "CHESS=1"), "--xchesscc --xbridge"),
    # Peano's -O for the kernel (issue 31 item 12): in the compile line and the object's name
    (("dry-run", "DEVICE=npu2", "M=512", "K=512", "N=512", "OPT_LEVEL=1"), "clang++ -O1 -std=c++20"),
    (("dry-run", "DEVICE=npu2", "M=512", "K=512", "N=512", "OPT_LEVEL=1"), "_O1.o"),
    # no --dynamic-objFifos: aiecc's default; bfp16 builds with Peano unless CHESS=1
    (("dry-run", "DEVICE=npu2", "M=512", "K=512", "N=1024", "PRESET=config2"),
     "--alloc-scheme=basic-sequential --peano=$PEANO_INSTALL_DIR --get-xclbin"),
    (("dry-run", "DEVICE=npu2", "M=512", "K=512", "N=1024", "PRESET=config2", "CHESS=1"),
     "--alloc-scheme=basic-sequential --xchesscc --xbridge --get-xclbin"),
    (("plan", "DEVICE=npu1", "M=512", "K=512", "N=512", "m=64", "k=64", "n=64", "EXPANSION=2x2", "KERNEL_LOOPS=k-flat",
      "L1_ALLOC=basic-sequential"), "2x2 accumulators per cluster, k-flat (given"),
    (("plan", "DEVICE=npu2", "M=512", "K=512", "N=512", "CHESS=1", "CONVERT_ONCE=0"), "variant   2x2"),
], ids=lambda x: " ".join(x) if isinstance(x, tuple) else None)
def test_documented_targets_work(args, expect, tmp_path):
    done = make(*args, f"BUILD_DIR={tmp_path}")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert expect.format(build=tmp_path) in done.stdout
    if "{build}" in expect:
        assert any(tmp_path.iterdir())


def test_make_sim_ends_with_the_designs_predicted_throughput(capsys):
    """Issue 33 item 6: `make sim` ends one line after PASS with the design's throughput, labelled PREDICTED: the
    figures `gemm-gen predict` gives for the same request (the same design, chosen once by simulate)."""
    from gemm_gen.app.cli import main

    done = make("sim", "DEVICE=npu1", "M=256", "K=384", "N=128", "DTYPE_IN=i8", "DTYPE_OUT=i16")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    last = done.stdout.splitlines()[-2:]
    assert last[0] == "PASS" and last[1].startswith("PREDICTED on an npu1 (the analytical model, not a measurement): ")
    assert main(["predict", "--dev", "npu1", "-M", "256", "-K", "384", "-N", "128", "--dtype_in", "i8", "--dtype_out",
                 "i16", "--a-col-maj", "0", "--b-col-maj", "0", "--c-col-maj", "0", "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert f": {said['tops']:.2f} TOPS ({said['tops_low']:.2f} to {said['tops_high']:.2f} " in last[1]
    assert f", {said['time_us']:,.0f} us for 256x384x128, {said['bound']} bound" in last[1]


def test_make_sim_of_several_sizes_predicts_the_largest_it_serves():
    done = make("sim", "DEVICE=npu1", "SIZES=100x200x50,64x64x64", "DTYPE_IN=i8", "DTYPE_OUT=i32")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    last = done.stdout.splitlines()[-2:]
    assert last[0] == "PASS: one design served all 2 sizes" and last[1].startswith("PREDICTED on an npu1")
    assert "us for 100x200x64 (the largest size it serves)" in last[1]


def test_a_build_dir_with_spaces_and_quotes_stays_one_argument(tmp_path):
    """BUILD_DIR reaches gemm-gen as one argument whatever it holds (issue 33 item 7: "BUILD_DIR=/tmp/x a b" gave
    "unrecognized arguments: b")."""
    out = tmp_path / "x a b" / "it's"
    done = make("generate", "DEVICE=npu1", "M=128", "K=128", "N=128", f"BUILD_DIR={out}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(list(out.glob("design_*.json"))) == 1
    for target, flag in (("roofline", "--out-dir"), ("run", "--build-dir"), ("validate", "--build-dir")):
        argv = shlex.split(make(target, f"BUILD_DIR={out}", dry=True).stdout.splitlines()[-1])
        assert argv[argv.index(flag) + 1] == str(out), (target, argv)


@pytest.mark.skipif(importlib.util.find_spec("aie") is not None or importlib.util.find_spec("pyxrt") is not None,
                    reason="this machine has the NPU toolchain (pytest -m hardware covers it)")
@pytest.mark.parametrize("args", [("mlir", "DEVICE=npu2"), ("all", "DEVICE=npu2", "M=512", "K=512", "N=512"),
                                  ("run", "DEVICE=npu1", "M=512", "K=512", "N=512", "WARMUP=1", "ITERS=2"),
                                  ("validate", "DEVICE=npu2")], ids=lambda x: x[0])
def test_npu_targets_stop_in_one_sentence_without_the_toolchain(args, tmp_path):
    done = make(*args, f"BUILD_DIR={tmp_path / 'build'}")
    assert done.returncode != 0
    message = [line for line in done.stderr.splitlines() if line.startswith("gemm-gen")]
    assert len(message) == 1 and "Traceback" not in done.stderr, done.stderr
    assert re.search(r"install|build_drivers|not ready", message[0]), message
    assert not (tmp_path / "build").exists()


def test_doctor_reports_every_tool():
    done = make("doctor")
    assert "mlir-aie (IRON, aiecc): pinned 1.4.3" in done.stdout and "Peano (llvm-aie)" in done.stdout
    assert (done.returncode == 0) == ("everything is in place" in done.stdout)


@pytest.mark.parametrize("target,command", [("test", "pytest -q -n auto --dist worksteal"),
                                            ("test", "make test: every test but"),
                                            ("test-slow", "pytest -q -n auto --dist worksteal -m slow"),
                                            ("bench", "scripts/bench_sim.py"), ("lint", "ruff check"),
                                            ("clean", "rm -rf build"), ("install", "")])
def test_the_rest_as_dry_runs(target, command):
    done = make(target, dry=True)
    assert done.returncode == 0 and command in done.stdout


def test_the_test_targets_state_no_figure_nobody_measured():
    """The Makefile once said "about TODO minutes": what make test and make test-slow say of their time is what the
    run itself prints at its end (tests/conftest.py), not a figure typed into the Makefile."""
    for target in ("test", "test-slow"):
        said = " ".join(line for line in make(target, dry=True).stdout.splitlines() if line.startswith("echo "))
        assert "TODO" not in said and "it ends with the CPU time it took" in said, said
        assert not re.search(r"\d+(\.\d+)? (minutes|seconds|s)\b", said), said


def _read_variables() -> set[str]:
    """Every variable the Makefile reads: $(NAME) and $(NAME:...) references, plus every name it
    assigns (functions like $(if ...) and automatic variables are not names of this kind)."""
    text = (ROOT / "Makefile").read_text()
    read = set(re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)[):]", text))
    assigned = set(re.findall(r"^([A-Za-z_][A-Za-z0-9_]*)\s*[?:]?=", text, re.M))
    functions = {"if", "and", "or", "filter", "foreach", "call", "eval", "origin", "words", "error", "strip", "shell"}
    return (read | assigned) - functions


def _own_variables() -> set[str]:
    done = make("-p", "-f", "Makefile", "-f", "-", "help", dry=True)  # make's database: OWN_VARS as parsed
    found = re.search(r"^OWN_VARS := (.*)$", done.stdout, re.M)
    assert found, done.stderr
    return set(found.group(1).split())


def test_the_makefiles_option_variables_are_the_option_tables():
    """gemm_gen.mk (OPTION_VARS, SWITCH_VARS, GEN_ARGS) is what `gemm-gen make-args` derives from the option
    table: an option added to the table reaches make when the file is regenerated, and this fails until it is."""
    from gemm_gen.app.cliargs import MAKE_INCLUDE, make_include

    assert (ROOT / MAKE_INCLUDE).read_text() == make_include(), \
        f"regenerate it: .venv/bin/gemm-gen make-args > {MAKE_INCLUDE}"
    assert "include gemm_gen.mk" in (ROOT / "Makefile").read_text()


def test_make_passes_every_option_variable_as_its_flag():
    """Each option's variable (a row of the table) reaches gemm-gen as its flag, with its value."""
    from gemm_gen.spec.request import OPTIONS

    rows = [row for row in OPTIONS if row.make is not None and row.cli != "switch" and row.name != "clamp"]
    args = [f"{row.make}={7 if row.cli != 'bool' else 1}" for row in rows]
    done = make("plan", *args, "CLAMP=-6,6", "BIAS=1", "CHESS=1", "ZERO_POINTS=1", dry=True)
    assert done.returncode == 0, done.stderr
    for row in rows:
        assert f" {row.flag} {7 if row.cli != 'bool' else 1}" in done.stdout, row.name
    assert all(f" {flag}" in done.stdout for flag in ("--clamp=-6,6", "--bias", "--chess", "--zero-points"))


def test_every_variable_the_makefile_reads_is_taken_from_the_command_line_only():
    """A variable added to the Makefile without joining OWN_VARS would leak from the environment."""
    missing = _read_variables() - _own_variables() - {"PYTHON", "SHELL", "OWN_VARS", "is_01", "v", "1"}
    assert not missing, f"add {sorted(missing)} to OWN_VARS in the Makefile"


@pytest.mark.parametrize("target", ["sim", "plan", "tune", "roofline", "generate", "run", "validate", "dry-run"])
def test_exported_variables_change_nothing_make_runs(target):
    """Every variable the Makefile reads, exported with a value that would change the command (or
    stop make): the commands are those of a clean environment, command-line values still win."""
    args = (target, "DEVICE=npu1", "M=256", "K=256", "N=256", "m=32")
    clean = make(*args, dry=True, env={k: v for k, v in os.environ.items() if k not in _read_variables()})
    leaky = dict(os.environ, **{name: "7" for name in _read_variables() - {"PYTHON", "SHELL"}})
    dirty = make(*args, dry=True, env=leaky)
    assert clean.returncode == 0 and dirty.returncode == 0, dirty.stderr
    assert dirty.stdout == clean.stdout and "--dev npu1" in clean.stdout
    if target != "validate":  # its sweep is fixed
        assert "-M 256 -K 256 -N 256" in clean.stdout and "-m 32" in clean.stdout
    assert "-k 7" not in dirty.stdout and "--runtime-sizes" not in dirty.stdout


def test_make_sim_checks_the_sizes_given_not_the_exported_ones():
    """The issue's check: with SIZES=1x1x1 and k=7 exported, `make sim DEVICE=npu1 M=256 K=256 N=256`
    checks 256 x 256 x 256 and passes, and says so before it starts."""
    done = make("sim", "DEVICE=npu1", "M=256", "K=256", "N=256", env=dict(os.environ, SIZES="1x1x1", k="7"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "make sim: checking DEVICE=npu1 M=256 K=256 N=256"
    assert "M x K x N = 256 x 256 x 256" in done.stdout and "PASS" in done.stdout


def test_make_sim_names_sizes_and_variables_given_on_its_command_line():
    done = make("sim", "DEVICE=npu2", "SIZES=100x200x50,64x64x64", "m=32", "B_COL_MAJ=1", dry=True)
    assert done.stdout.splitlines()[0] == 'echo "make sim: checking DEVICE=npu2 SIZES=100x200x50,64x64x64 m=32 ' \
        'B_COL_MAJ=1"'


@pytest.mark.parametrize("arg,says", [("B_COL_MAJ=", "B_COL_MAJ= is empty"), ("CHESS=yes", "CHESS=yes is not 0 or 1"),
                                      ("B_COL_MAJ=2", "B_COL_MAJ=2 is not 0 or 1"),
                                      ("CHESS=0 1", "CHESS=0 1 is not 0 or 1")])
def test_a_flag_that_is_not_0_or_1_is_one_line_and_exit_2(arg, says):
    done = make("sim", "DEVICE=npu1", arg)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and says in done.stderr and "give " in done.stderr, done.stderr


FAKE_PYTHON = """#!{python}
# a stand-in for `python -m venv DIR`: DIR/bin/pip prints what pip and setuptools print, or fails
import os, sys
venv = sys.argv[sys.argv.index("venv") + 1]
os.makedirs(os.path.join(venv, "bin"), exist_ok=True)
pip = os.path.join(venv, "bin", "pip")
with open(pip, "w") as fh:
    fh.write("#!/bin/sh\\necho 'SetuptoolsDeprecationWarning: License classifiers are deprecated.'\\n"
             "echo '  !!  ********************************' >&2\\n"
             "if [ -n \\"$PIP_FAILS\\" ] && [ \\"$1\\" = install ] && [ \\"$2\\" = -e ]; then "
             "echo 'ERROR: No matching distribution found for numpy' >&2; exit 1; fi\\n")
os.chmod(pip, 0o755)
"""


@pytest.fixture
def fresh_clone(tmp_path):
    """The Makefile and pyproject.toml in a folder without .venv/, and a stand-in interpreter."""
    for name in ("Makefile", "gemm_gen.mk", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    fake = tmp_path / "fake_python"
    fake.write_text(FAKE_PYTHON.format(python=sys.executable))
    fake.chmod(0o755)
    return tmp_path, fake


def _install(where: Path, python: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "--no-print-directory", "install", f"PYTHON={python}"], cwd=where,
                          capture_output=True, text=True, timeout=60, env=dict(os.environ, **env))


def test_the_first_install_is_quiet_and_says_how_to_put_gemm_gen_on_path(fresh_clone):
    where, fake = fresh_clone
    done = _install(where, str(fake))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.splitlines() == [
        f"installing gemm_gen and its dependencies into .venv/ with {fake} (log: .venv/install.log)",
        f'installed; to run gemm-gen directly: source .venv/bin/activate (or export PATH="{where}/.venv/bin:$PATH")']
    assert "SetuptoolsDeprecationWarning" in (where / ".venv" / "install.log").read_text()
    assert (where / ".venv" / ".installed").exists()


@pytest.mark.parametrize("case", ["pip fails", "no such python"])
def test_a_failed_install_shows_its_error(fresh_clone, case):
    where, fake = fresh_clone
    done = _install(where, str(fake), PIP_FAILS="1") if case == "pip fails" else _install(where, "/nonexistent/python3")
    assert done.returncode != 0 and not (where / ".venv" / ".installed").exists()
    error = "No matching distribution found for numpy" if case == "pip fails" else "/nonexistent/python3"
    assert error in done.stderr and "make: installing into .venv/ failed: the log is above" in done.stderr, done.stderr


def test_the_build_guard_sees_what_a_test_leaves_in_build(tmp_path):
    """tests/conftest.py fails the run when build/ changes: the snapshot it compares sees a new
    build/, a file deep inside it, and a file whose bytes changed."""
    from ..conftest import build_changes, build_snapshot

    build = tmp_path / "build"
    empty = build_snapshot(build)
    build.mkdir()
    made = build_snapshot(build)
    assert build_changes(empty, made) == ["added ."]
    (build / "failed_x").mkdir()
    (build / "failed_x" / "build.log").write_text("one")
    deep = build_snapshot(build)
    assert build_changes(made, deep) == ["added failed_x", "added failed_x/build.log"]
    assert build_changes(made, build_snapshot(build, deep=False)) == ["added failed_x"]
    (build / "failed_x" / "build.log").write_text("three")
    assert build_changes(deep, build_snapshot(build)) == ["changed failed_x/build.log"]


def test_the_epilogue_variables_reach_the_generator():
    """BIAS ACTIVATION CLAMP REQUANT become gemm-gen's epilogue flags (issue 21); BIAS is 0 or 1."""
    done = make("plan", "BIAS=1", "ACTIVATION=gelu", "CLAMP=-6,6", dry=True)
    assert done.returncode == 0, done.stderr
    assert "--bias --activation gelu --clamp=-6,6" in done.stdout
    assert "--requant per_channel" in make("plan", "REQUANT=per_channel", dry=True).stdout
    plain = make("plan", dry=True).stdout
    assert "--bias" not in plain and "--activation" not in plain and "--requant" not in plain
    bad = make("plan", "BIAS=yes", dry=True)
    assert bad.returncode == 2 and "BIAS=yes is not 0 or 1" in bad.stderr
