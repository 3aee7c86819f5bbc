"""The gemm-gen command line: outputs, exit codes, one-line errors, nothing half-written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gemm_gen.app.cli import main
from gemm_gen.model.perf import Workload
from gemm_gen.search.tune import tune

SMALL = ["--dev", "npu1", "-M", "128", "-K", "64", "-N", "128", "-m", "16", "-k", "16", "-n", "16",
         "--k-mt", "32"]


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_text_and_json(capsys):
    code, out, _ = run(capsys, "plan", *SMALL)
    assert code == 0 and "native    (m*rows) x k_mt x (n*cols) = 64 x 32 x 64" in out
    code, out, _ = run(capsys, "plan", *SMALL, "--json")
    info = json.loads(out)
    assert info["padded"] == [128, 64, 128] and info["shim_bds_live"]["shim(0,0)"] == 12
    # A, B double-buffered; the bf16 C object and the f32 accumulator rows beyond it; stack (mlir-aie's
    # 0xD00), kernel data
    assert info["l1_bytes"]["total"] == 2 * 16 * 16 * 2 * 2 + 16 * 16 * 2 + 8 * 16 * 4 + 3328 + 256
    assert info["acc"] == "f32" and "rounded once into bf16" in info["rounding_of_c"]
    code, out, _ = run(capsys, "plan", *SMALL, "--acc", "out", "--json")
    info = json.loads(out)
    assert info["l1_bytes"]["total"] == 2 * 16 * 16 * 2 * 2 + 16 * 16 * 2 + 3328 + 256
    assert info["acc"] == "bf16" and "--acc out" in info["rounding_of_c"]


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("dtype_in", ["bf16", "i8", "i16"])
def test_plan_reserves_at_least_mlir_aies_stack_by_default(capsys, dev, dtype_in):
    """Every default design reserves mlir-aie's matmul stack (0xD00) or more, and the tuner, the
    lowering's Worker and the L1 total use that same figure."""
    from gemm_gen.app.choice import choose_design as config_from_args
    from gemm_gen.app.cli import parser
    from gemm_gen.design import build_design

    args = ["plan", "--dev", dev, "-M", "1024", "-K", "1024", "-N", "1024", "--dtype_in", dtype_in, "--json"]
    code, out, _ = run(capsys, *args)
    l1 = json.loads(out)["l1_bytes"]
    assert code == 0 and l1["stack"] >= 3328 and l1["total"] == sum(v for k, v in l1.items() if k not in
                                                                      ("total", "capacity")) <= l1["capacity"]
    c = config_from_args(parser().parse_args(args))
    assert {w.stack_bytes for w in build_design(c).workers} == {l1["stack"]} and c.l1_bytes == l1["total"]


def test_plan_defaults_to_the_tuners_design(capsys):
    """Without tiles, plan shows the tuner's best for the kernel the model prefers (npu2 bf16 weighs the
    emulated and the convert-once kernel); held to the paper's kernel (emulated, 2x2 jk-flat as the model
    reads it: no overlap on npu2, where one cluster fills the accumulators), rho 1, C in bf16 and chess, which
    built it, it is the paper's own design (Striking Table 3, npu2 bf16 B column-major: 112x48x96, k_mt 384)."""
    args = ("plan", "--dev", "npu2", "-M", "4032", "-K", "4224", "-N", "4608", "--b-col-maj", "--json")
    code, out, _ = run(capsys, *args)
    info = json.loads(out)
    best = tune(Workload.new("npu2", 4032, 4224, 4608, b_col_maj=True, convert_once=info["convert_once"]), 1).best
    rival = tune(Workload.new("npu2", 4032, 4224, 4608, b_col_maj=True, convert_once=not info["convert_once"]), 1).best
    assert code == 0 and info["tile"] == [best.config.tiling.m, best.config.tiling.k, best.config.tiling.n]
    assert info["rho"] == best.config.tiling.rho and best.time_s <= rival.time_s
    assert [kern["convert_once"] for kern in info["kernel_choice"] if kern["chosen"]] == [info["convert_once"]]
    code, out, _ = run(capsys, *args, "--rho", "1", "--acc", "out", "--convert-once", "0", "--expansion", "2x2",
                         "--kernel-loops", "jk-flat", "--chess")  # chess: Peano cannot pipeline this jk-flat body
    info = json.loads(out)
    assert info["tile"] == [112, 48, 96] and info["k_mt"] == 384 and info["wasted_fraction"] == 0


def test_simulate_pass(capsys):
    code, out, _ = run(capsys, "simulate", *SMALL, "--dtype_in", "i8", "--dtype_out", "i16", "--b-col-maj", "1")
    assert code == 0 and out.rstrip().endswith("PASS") and "B column-major" in out
    code, out, _ = run(capsys, "simulate", *SMALL, "--json", "--seed", "7")
    result = json.loads(out)
    assert result["passed"] and result["mismatches"] == 0
    assert result["kernel_calls"]["matmul"] == 16 * 4 * 4  # cores x tiles x k-steps


def test_generate_is_atomic_and_deterministic(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "generate", *SMALL)
    files = list((tmp_path / "build").iterdir())
    assert code == 0 and [f.name for f in files] == ["design_128x64x128_16x16x16_4c_bf16_bf16_kmt32.json"]
    first = files[0].read_bytes()
    run(capsys, "generate", *SMALL)
    assert files[0].read_bytes() == first
    design = json.loads(first)
    assert design["format"] == "gemm_gen.design/5" and len(design["workers"]) == 16


@pytest.mark.parametrize("args,text", [
    (["-m", "128", "-k", "64", "-n", "128"], "L1 overflow"),
    (["-m", "100"], "m=100 is not a multiple of 2r=16"),
    (["--dev", "npu7"], "unknown device"),
    (["--dtype_in", "bf16", "--dtype_out", "i8"], "does not go with"),
    (["--queue-groups", "9"], "--queue-groups 9"),
    (["--mmul", "3x3x3"], "not an aie::mmul shape"),
    (["-m", "112", "-k", "48", "-n", "96", "--k-mt", str(48 * 30), "--b-col-maj", "--acc", "out"], "memtile"),
    (["--mmul", "8x1x8", "-m", "16", "-k", "8", "-n", "16", "--k-mt", "16", "--emulate-bf16-mmul-with-bfp16", "0"],
     "4-byte DMA word"),
    (["--dev", "npu1", "--dtype_in", "i8", "--dtype_out", "i8", "-m", "1024", "-k", "8", "-n", "16",
      "--k-mt", "8", "--acc", "out"], "wrap 1024 words exceeds the 10-bit field"),
    (["-K", str(384 * 5700)], "stride"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, monkeypatch, args, text):
    monkeypatch.chdir(tmp_path)
    base = ["--dev", "npu2", "-M", "512", "-N", "512"] + ([] if "-K" in args else ["-K", "512"])
    code, out, err = run(capsys, "generate", *base, *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("gemm-gen: error:") and text in err
    assert not (tmp_path / "build").exists()  # nothing half-written


def test_usage_errors_are_one_line(capsys):
    with pytest.raises(SystemExit) as info:
        main(["simulate", "-M", "x", "-K", "1", "-N", "1"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1 and "'x' is not a whole number" in err
    assert main(["plan", "-K", "1", "-N", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "-M missing" in err and "--runtime-sizes" in err


def test_simulation_failure_exits_1(capsys, monkeypatch):
    from gemm_gen.facts.errors import DeadlockError

    def stuck(*a, **k):
        raise DeadlockError("deadlock after 0 matmul calls", "inspect")

    monkeypatch.setattr("gemm_gen.sim.run.simulate_calls", stuck)
    code, out, _ = run(capsys, "simulate", *SMALL)
    assert code == 1 and out.startswith("FAIL: deadlock")


def test_console_script(tmp_path):
    exe = shutil.which("gemm-gen", path=str(Path(sys.executable).parent))
    assert exe, "the gemm-gen console script is installed with the package"
    done = subprocess.run([exe, "plan", *SMALL], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0 and "L1/core" in done.stdout
    bad = subprocess.run([exe, "plan", *SMALL, "-k", "20"], capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_make_passes_mlir_aie_variables():
    if not shutil.which("make"):
        pytest.skip("make is not installed")
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    variables = ["DEVICE=npu1", "M=256", "K=128", "N=64", "m=32", "K_MT=64", "DTYPE_IN=i8", "DTYPE_OUT=i16",
                 "B_COL_MAJ=1"]
    done = subprocess.run(["make", "--no-print-directory", "-n", "sim", *variables], capture_output=True,
                          text=True, cwd=root, env=env)
    line = next(ln for ln in done.stdout.splitlines() if "gemm-gen simulate" in ln)
    for part in ("simulate", "--dev npu1", "-M 256", "-K 128", "-N 64", "-m 32", "--k-mt 64", "--dtype_in i8",
                 "--dtype_out i16", "--b-col-maj 1"):
        assert part in line


def test_gemm_gen_debug_shows_the_traceback(monkeypatch, capsys):
    from gemm_gen.facts.errors import ConfigError

    args = ["plan", "--dev", "npu1", "-M", "512", "-K", "512", "-N", "512", "-m", "30"]
    assert main(args) == 2 and capsys.readouterr().err.count("\n") == 1
    monkeypatch.setenv("GEMM_GEN_DEBUG", "1")
    with pytest.raises(ConfigError, match="m=30"):
        main(args)


@pytest.mark.parametrize("command", ["kernel", "predict", "generate"])
def test_a_command_says_which_tiles_it_chose_and_how_to_pin_them(capsys, tmp_path, command):
    """With the tiles open, the command's one stderr line names what search.choose filled in and the
    flags that pin it; those flags give the same output with nothing chosen (and no line)."""
    extra = ["--build-dir", str(tmp_path)] if command == "generate" else []
    problem = ["--dev", "npu2", "-M", "512", "-K", "512", "-N", "512", "--dtype_in", "i8", "--dtype_out", "i16"]
    code, out, err = run(capsys, command, *problem, *extra)
    lines = err.splitlines()
    assert code == 0 and len(lines) == 1 and lines[0].startswith(f"gemm-gen {command}: chose tiles "), err
    pins = lines[0].split("(to pin them: ")[1].rstrip(")").split()
    code, pinned_out, pinned_err = run(capsys, command, *problem, *pins, *extra)
    assert code == 0 and pinned_err == "" and pinned_out == out


# ---- a CLI that starts at once (issue 33 item 3): which modules each command loads, not how long it takes -------
HEAVY = ("matplotlib", "scipy", "jinja2", "tqdm", "gemm_gen.sim", "gemm_gen.backends",
         "gemm_gen.backends.kernel_source", "gemm_gen.app.plots", "gemm_gen.app.operator",
         "gemm_gen.model.fit.measured")
PLAN = ["--dev", "npu2", "-M", "256", "-K", "256", "-N", "256"]


def loaded(*args: str) -> set[str]:
    """The modules a fresh interpreter holds after `gemm-gen <args>` (help exits included)."""
    code = ("import contextlib, io, sys\nfrom gemm_gen.app.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
            f"    try:\n        main({list(args)!r})\n    except SystemExit:\n        pass\n"
            "print('\\n'.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def among(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """The modules that are one of `names` or inside one of them."""
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


def test_help_loads_no_command_and_not_numpy():
    """`gemm-gen --help` lists the commands from the dispatcher's table alone."""
    mods = loaded("--help")
    assert among(mods, ("gemm_gen",)) == ["gemm_gen", "gemm_gen.app", "gemm_gen.app.cli", "gemm_gen.app.parsing",
                                          "gemm_gen.facts", "gemm_gen.facts.errors", "gemm_gen.version"]
    assert among(mods, ("numpy", *HEAVY)) == []


@pytest.mark.parametrize("args", [("plan", "--help"), ("plan", *PLAN), ("predict", *PLAN), ("generate", "--help")])
def test_plan_and_predict_load_only_what_they_use(args):
    """The search, the design and the model, but not the simulator, the back ends, the kernel renderer, the
    operator, the plots, tqdm, jinja2 or scipy."""
    mods = loaded(*args)
    assert among(mods, HEAVY) == [] and "gemm_gen.search" in mods


def test_a_command_loads_its_own_module_when_it_runs():
    """The check above can fail: simulate loads the simulator, roofline's help the plots module."""
    assert "gemm_gen.sim.run" in loaded("simulate", *SMALL) and "gemm_gen.app.plots" in loaded("roofline", "--help")


def test_every_command_has_its_flags_where_the_table_says():
    """app/cli.py's COMMANDS and the modules' FLAGS name the same commands, each once."""
    import importlib

    from gemm_gen.app.cli import COMMANDS

    names = [c.name for c in COMMANDS]
    assert len(names) == len(set(names))
    for module in {c.module for c in COMMANDS}:
        flags = importlib.import_module(f"gemm_gen.app.{module}").FLAGS
        assert sorted(flags) == sorted(c.name for c in COMMANDS if c.module == module), module


def test_the_package_exports_load_when_asked():
    """`import gemm_gen` loads none of the front door's modules; each name loads its own, and an unknown name
    is an AttributeError."""
    code = ("import sys, gemm_gen\nbefore = 'gemm_gen.app.operator' in sys.modules\n"
            "from gemm_gen import Gemm, Problem\nprint(before, Gemm.__module__, Problem.__module__, "
            "'Gemm' in dir(gemm_gen), hasattr(gemm_gen, 'Nope'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "gemm_gen.app.operator", "gemm_gen.spec.request", "True", "False"]
