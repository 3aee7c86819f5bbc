"""Runs that cannot hang (issue 18, item 2): every wait for an NPU run has a time limit, derived from
the model's predicted time unless given; a run past it ends `gemm-gen run` (and an operator call) in
one line, and `make validate` records it as TIMEOUT and goes on. The pyxrt stand-in's run.wait
mirrors the pinned XRT's binding (Xilinx/XRT src/python/pybind11/src/pyxrt.cpp: wait() is XRT's
wait(0), no limit; wait(timeout_ms) takes an unsigned int and returns ERT_CMD_STATE_TIMEOUT when the
limit passes, xrt_kernel.h), and its kernels that never complete refuse an untimed wait loudly."""

from __future__ import annotations

import ast
import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gemm_gen.app import validate
from gemm_gen.app.cli import main
from gemm_gen.app.limits import run_limit
from gemm_gen.backends import runner, toolchain
from gemm_gen.backends.compile import artifacts
from gemm_gen.design import build_design
from gemm_gen.design.serve import serve
from gemm_gen.facts.errors import ConfigError, RunTimeout
from gemm_gen.model.fit import measured
from gemm_gen.model.params import load_ends
from gemm_gen.model.perf import estimate_config
from gemm_gen.spec.config import GemmConfig
from gemm_gen.spec.request import Problem, spell_make, spell_operator

from ..backends.test_doctor import laptop  # noqa: F401 - npu_laptop's fixture
from ..backends.test_runner import SMALL, prebuilt
from ..conftest import small
from ..fake_pyxrt import FakeXrt, UntimedWait, ert_cmd_state
from .test_validate import NPU_NOW, npu_laptop  # noqa: F401 - the fixture

ROOT = Path(__file__).parents[2]


def _run(hangs=False):
    """A started run of the stand-in (kernel arguments as the runner passes them)."""
    xrt = FakeXrt(small("npu1", "i8", "i16"), hangs=hangs)
    dev = xrt.device(0)
    xb = xrt.xclbin("final.xclbin")
    dev.register_xclbin(xb)
    kernel = xrt.kernel(xrt.hw_context(dev, xb.get_uuid()), "MLIR_AIE")
    bos = [xrt.bo(dev, 1 << 20, xrt.bo.host_only, g) for g in (1, 3, 4, 5)]
    return xrt, kernel(3, bos[0], 4, *bos[1:])


# ---- the stand-in's run.wait: what the binding takes and refuses ---------------------------------------
@pytest.mark.parametrize("args,kwargs", [
    ((1.5,), {}),  # pybind11's integer caster refuses floats
    (("100",), {}),  # and strings
    ((-1,), {}),  # unsigned int: no negative limit
    ((2**32,), {}),  # nor one past unsigned int
    ((100, 1), {}),  # no overload takes two arguments
    ((), {"timeout_ms": 100}),  # the binding names no argument: no keywords
], ids=["float", "str", "negative", "past-uint", "two-args", "keyword"])
def test_the_pyxrt_standin_refuses_what_run_wait_refuses(args, kwargs):
    _, run = _run()
    with pytest.raises(TypeError, match=r"wait\(\): incompatible function arguments"):
        run.wait(*args, **kwargs)


def test_the_pyxrt_standin_takes_what_run_wait_takes():
    xrt, run = _run()
    for args in [(), (0,), (1,), (2**32 - 1,)]:
        assert run.wait(*args) is ert_cmd_state.ERT_CMD_STATE_COMPLETED
    assert [e for e in xrt.log if e[0] == "wait"] == [("wait", 0), ("wait", 0), ("wait", 1), ("wait", 2**32 - 1)]
    assert not hasattr(run, "abort")  # pyxrt binds no run.abort(): the runner cannot call one


def test_a_kernel_that_never_completes_times_out_and_refuses_an_untimed_wait():
    _, run = _run(hangs=True)
    assert run.wait(50) is ert_cmd_state.ERT_CMD_STATE_TIMEOUT
    for args in [(), (0,)]:  # XRT's wait(0) blocks until the run completes: here, forever
        with pytest.raises(UntimedWait, match="pyxrt would block forever"):
            run.wait(*args)
    try:  # no `except Exception` in gemm_gen can swallow it
        run.wait()
    except Exception:  # noqa: BLE001
        pytest.fail("UntimedWait was caught as an Exception")
    except UntimedWait:
        pass


def test_only_the_named_xclbins_hang():
    _, run = _run(hangs={"other.xclbin"})
    assert run.wait() is ert_cmd_state.ERT_CMD_STATE_COMPLETED
    _, run = _run(hangs={"final.xclbin"})
    assert run.wait(1) is ert_cmd_state.ERT_CMD_STATE_TIMEOUT


# ---- the runner ------------------------------------------------------------------------------------------
def test_a_hung_run_ends_in_one_line_naming_design_size_limit_and_what_to_try(tmp_path):
    c = small("npu1", "i8", "i16")
    art = prebuilt(c, tmp_path)
    xrt = FakeXrt(c, hangs=True)
    with pytest.raises(RunTimeout) as e:
        runner.run_design(c, art, iters=2, warmup=1, xrt=xrt, timeout_ms=50)
    text = str(e.value)
    assert "\n" not in text and e.value.timeout_ms == 50
    assert f"design {c.suffix} at size {c.size} did not complete within 50 ms (as given)" in text
    for fix in (str(art.xclbin), "xrt-smi examine", "--timeout-ms"):
        assert fix in text, fix
    # the time limit as each front end names it: make's variable, the operator's keyword
    assert e.value.spelled(spell_make)[1].endswith("or allow longer with TIMEOUT_MS")
    assert e.value.spelled(spell_operator)[1].endswith("or allow longer with timeout_ms")
    assert [e for e in xrt.log if e[0] == "wait"] == [("wait", 50)]  # the first run's wait, then nothing
    assert not any(e == ("sync", 5, "from_device") for e in xrt.log)  # C is never read


def test_the_default_limit_is_derived_from_the_predicted_time(tmp_path):
    """max(2 s, 100 x the model's time at the slow end of its constants), and what each wait passes."""
    slow, _ = load_ends()

    def derived(c, call=None):
        t = float(estimate_config(c, slow, call=(call or c.call).problem).time)
        return max(runner.TIMEOUT_FLOOR_MS, math.ceil(runner.TIMEOUT_FACTOR * t * 1e3))

    c = small("npu1", "i8", "i16")
    xrt = FakeXrt(c)
    runner.run_design(c, prebuilt(c, tmp_path), iters=2, warmup=1, xrt=xrt)
    assert [e for e in xrt.log if e[0] == "wait"] == [("wait", derived(c))] * 3 == [("wait", 2000)] * 3
    big = next(i.config for i in validate.sweep("npu1", chess=True) if "4224x4032x4224" in i.name)
    limit = run_limit(big, artifacts(build_design(big), tmp_path))
    assert limit.timeout_ms == derived(big) > runner.TIMEOUT_FLOOR_MS and not limit.given  # 47 ms predicted
    assert limit.predicted_us == pytest.approx(float(estimate_config(big, slow).time) * 1e6)
    # a design serving many sizes: each call's own prediction (a larger call, a longer limit)
    many = GemmConfig("npu2", 8192, 8192, 8192, 64, 64, 64, 256, "i8", "i8", runtime_sizes="mnk")
    files = artifacts(build_design(many), tmp_path)
    sizes = [Problem(8192, 8192, 8192), Problem(4096, 8192, 8192), Problem(64, 64, 64)]
    limits = [run_limit(many, files, serve(many, p)).timeout_ms for p in sizes]
    assert limits == [derived(many, serve(many, p)) for p in sizes]
    assert limits[0] > limits[1] > limits[2] == runner.TIMEOUT_FLOOR_MS


def test_a_limit_xrt_would_read_otherwise_is_refused():
    for bad in [0, -5, 2**32, 1.5, True, "100"]:  # 0: XRT's wait(0) has no limit
        with pytest.raises(ConfigError, match="timeout_ms is .* not a whole number of milliseconds from 1 to"):
            runner.checked_timeout(bad)
    assert runner.checked_timeout(None) is None and runner.checked_timeout(np.int64(7)) == 7


# ---- gemm-gen run ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("given", [None, "75"])
def test_cli_run_on_a_hung_kernel_is_one_line_and_exit_1(tmp_path, capsys, monkeypatch, given):
    from gemm_gen.app.choice import choose_design as config_from_args
    from gemm_gen.app.cli import parser

    monkeypatch.chdir(tmp_path)
    c = config_from_args(parser().parse_args(["run", *SMALL]))
    prebuilt(c, tmp_path)
    monkeypatch.setattr(toolchain, "pyxrt", lambda: FakeXrt(c, hangs=True))
    assert main(["run", *SMALL, *(["--timeout-ms", given] if given else [])]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err
    how = "75 ms (as given)" if given else "2,000 ms (the default: max(2 s, 100 x the predicted"
    assert captured.err.startswith(f"FAIL: the NPU run of design {c.suffix} at size 128x64x128 did not complete "
                                   f"within {how}"), captured.err


def test_cli_run_names_the_limit_in_help_and_refuses_a_bad_one(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--timeout-ms TIMEOUT_MS time limit of each NPU run" in text and "100 x the model's predicted" in text
    for bad, says in [("0", "1 to 4,294,967,295"), (str(2**32), "1 to 4,294,967,295"), ("1.5", "not a whole number")]:
        with pytest.raises(SystemExit) as e:
            main(["run", *SMALL, "--timeout-ms", bad])
        err = capsys.readouterr().err
        assert e.value.code == 2
        assert err.count("\n") == 1 and "argument --timeout-ms" in err and says in err, err


# ---- make validate ---------------------------------------------------------------------------------------
def test_validate_records_a_hung_design_and_goes_on(npu_laptop, monkeypatch, capsys):  # noqa: F811
    NPU_NOW[0] = "npu1"
    items = [i for i in validate.sweep("npu1", chess=False) if i.role == "fit"]
    configs = {str(artifacts(build_design(i.config), Path("build")).xclbin): i.config for i in items}
    hung = str(artifacts(build_design(items[1].config), Path("build")).xclbin)
    monkeypatch.setattr(toolchain, "pyxrt", lambda: FakeXrt(configs=configs, hangs={hung},
                                                            device_name="RyzenAI-npu1"))
    assert main(["validate", "--dev", "npu1", "--only", "fit", "--iters", "1", "--warmup", "0",
                 "--timeout-ms", "40"]) == 1
    out = capsys.readouterr().out
    path = npu_laptop / "build" / "validate_npu1.json"
    record = json.loads(path.read_text())
    statuses = [d["status"] for d in record["designs"]]
    assert statuses == ["PASS"] + ["TIMEOUT"] + ["PASS"] * (len(items) - 2)  # the sweep went on
    timed_out = record["designs"][1]
    assert timed_out["timeout_ms"] == 40 and "did not complete within 40 ms" in timed_out["reason"]
    assert "measured" not in timed_out and timed_out["predicted"]["time_us"] > 0
    assert f"  TIMEOUT fit    {items[1].name}: the NPU run of design {items[1].config.suffix}" in out
    # then what this first run confirms or refutes (item 5), the list docs/hardware_path.md holds
    checks = out.split("what this first run on an npu1 confirms or refutes, most likely to fail first:\n", 1)[1]
    assert checks.splitlines() == [f"  {line}" for line in validate.first_run_lines()]
    # gemm-gen calibrate --measurements reads the passed rows only
    rows = measured.read_records([path])
    assert [r.name for r in rows] == [i.name for k, i in enumerate(items) if k != 1]


def test_make_run_and_validate_pass_timeout_ms():
    def dry(*args):
        return subprocess.run(["make", "-n", "-o", ".venv/.installed", *args], capture_output=True, text=True,
                              cwd=ROOT, check=True).stdout

    assert "--timeout-ms 5000" in dry("run", "DEVICE=npu1", "M=256", "K=256", "N=256", "TIMEOUT_MS=5000")
    assert "--timeout-ms 7000" in dry("validate", "DEVICE=npu1", "TIMEOUT_MS=7000")
    assert "--timeout-ms" not in dry("run", "DEVICE=npu1", "M=256", "K=256", "N=256") + dry("validate")
    usage = (ROOT / "docs" / "usage.md").read_text()  # the flags and Make variables (moved from the README)
    assert "TIMEOUT_MS=" in usage and "--timeout-ms" in usage


# ---- the operator ----------------------------------------------------------------------------------------
def test_an_operator_call_on_a_hung_kernel_times_out(tmp_path, monkeypatch):
    from gemm_gen import Gemm
    from gemm_gen.backends import cache

    from ..backends.test_build import _fake_tools

    _fake_tools(tmp_path, monkeypatch)
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    g = Gemm(device="npu1", dtype_in="i8", dtype_out="i32")
    a = np.ones((64, 96), np.int8)
    b = np.ones((96, 64), np.int8)
    fake = FakeXrt(g.design(64, 96, 64).config, hangs=True)
    monkeypatch.setattr(toolchain, "pyxrt", lambda: fake)
    with pytest.raises(RunTimeout, match="did not complete within 30 ms"):
        g(a, b, timeout_ms=30)
    with pytest.raises(RunTimeout, match=r"within 2,000 ms \(the default"):
        g(a, b)
    assert [e for e in fake.log if e[0] == "wait"] == [("wait", 30), ("wait", 2000)]
    # the context holding a hung run is not reused: each call after a timeout loads the xclbin again
    assert [e[0] for e in fake.log].count("xclbin") == 2
    for bad in [0, 2.5, True, "10"]:
        with pytest.raises(ConfigError, match=r"^Gemm\(device='npu1'.*timeout_ms is"):
            g(a, b, timeout_ms=bad)


# ---- no untimed wait anywhere ------------------------------------------------------------------------------
def untimed_waits(source: str) -> list[int]:
    """Lines of `x.wait(...)` / `x.wait2(...)` calls without exactly one positional limit (pyxrt's
    wait() has no limit and its arguments take no keywords)."""
    return [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("wait", "wait2") and (len(node.args) != 1 or node.keywords)]


def test_the_scanner_finds_untimed_waits():
    src = "h.wait()\nh.wait(limit)\nh.wait(timeout_ms=5)\nr.wait2()\nx = f(h.wait())\n"
    assert untimed_waits(src) == [1, 3, 4, 5]


def test_no_untimed_wait_is_left_in_the_package():
    files = sorted((ROOT / "gemm_gen").rglob("*.py")) + sorted((ROOT / "scripts").rglob("*.py"))
    found = {str(f.relative_to(ROOT)): lines for f in files if (lines := untimed_waits(f.read_text()))}
    assert not found, f"waits without a time limit (pass runner's RunLimit.timeout_ms): {found}"
    assert any(".wait(self.limit.timeout_ms)" in f.read_text() for f in files)  # the runner's one wait
