"""The XRT runner against a recording pyxrt stand-in (tests/fake_pyxrt.py), and its CLI."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest

from gemm_gen.app.cli import main
from gemm_gen.backends import runner, toolchain
from gemm_gen.backends.compile import artifacts, build_stamp
from gemm_gen.design import build_design
from gemm_gen.facts.errors import ToolchainMissing

from ..conftest import small
from ..fake_pyxrt import FakeXrt

SMALL = ["--dev", "npu1", "-M", "128", "-K", "64", "-N", "128", "-m", "16", "-k", "16", "-n", "16",
         "--k-mt", "32", "--dtype_in", "i8", "--dtype_out", "i16"]


def prebuilt(c, tmp_path, words=37):
    """Stand-in build artifacts: an xclbin file and an instruction stream of `words` words."""
    design = build_design(c)
    art = artifacts(design, tmp_path / "build")
    art.build_dir.mkdir(parents=True, exist_ok=True)
    art.xclbin.write_bytes(b"xclbin")
    np.arange(words, dtype=np.uint32).tofile(art.insts)
    art.stamp.write_text(json.dumps(build_stamp(design)))
    return art


@pytest.mark.parametrize("t_in,t_out,col_maj", [("i8", "i16", True), ("bf16", "bf16", False)])
def test_run_checks_and_reports(tmp_path, t_in, t_out, col_maj):
    c = small("npu2", t_in, t_out, col_maj)
    xrt = FakeXrt(c)
    result = runner.run_design(c, prebuilt(c, tmp_path), iters=3, warmup=2, xrt=xrt)
    assert result.passed and result.errors == 0 and result.checked == c.size.M * c.size.N
    assert result.exact == c.size.M * c.size.N  # the stand-in computes the exact reference
    text = "\n".join(result.lines()) + "\n"  # as `gemm-gen run` prints it
    # mlir-aie's test.cpp: "\nAvg ...us.\nAvg NPU gflops: ...\n" three times, then "\nPASS!\n\n"
    pair = r"\n{} NPU matmul time: [0-9]+\.[0-9]{{2}}us\.\n{} NPU gflops: [0-9]+\.[0-9]{{2}}\n"
    assert re.fullmatch(pair.format("Avg", "Avg") + pair.format("Min", "Max") + pair.format("Max", "Min")
                        + r"\nPASS!\n\n", text), text
    # what mlir-aie's sweep.sh reads
    assert float(re.search(r"Avg NPU matmul time: ([0-9.]+)us\.", text).group(1)) == pytest.approx(
        sum(result.times_us) / 3, abs=0.005)
    # buffers: instructions cacheable in group 1, A/B/C host-only in groups 3/4/5
    bos = [e[2:] for e in xrt.log if e[0] == "bo"]
    assert bos == [("cacheable", 1), ("host_only", 3), ("host_only", 4), ("host_only", 5)]
    runs = [e for e in xrt.log if e[0] == "run"]
    assert len(runs) == 5 and runs[0] == ("run", 3, 37, 1, 3, 4, 5)  # opcode 3, 37 instruction words
    assert xrt.log[-1] == ("sync", 5, "from_device")  # C is read back after the runs


def test_wrong_results_fail(tmp_path, capsys, monkeypatch):
    c = small("npu1", "i8", "i16")
    result = runner.run_design(c, prebuilt(c, tmp_path), iters=1, warmup=0, xrt=FakeXrt(c, broken=True))
    assert not result.passed and result.first_error is not None
    text = "\n".join(result.lines()) + "\n"
    assert text.endswith(f"Min NPU gflops: {result.gflops(max(result.times_us)):.2f}\n\nError count: "
                         f"{result.errors}\n\n\nFailed.\n\n")  # test.cpp's full-check wording: no "(out of"


@pytest.mark.parametrize("t_in, t_out", [("i8", "i16"), ("bf16", "bf16")])
def test_a_permuted_accumulator_is_named_in_the_notes(tmp_path, t_in, t_out):
    """Issue 31 item 10: an NPU whose mmul gave each r x t block column by column fails the run, and the run's
    notes say which lane order C shows (gemm_gen/facts/lanes.py); a zeroed C is no lane-order fault."""
    c = small("npu1", t_in, t_out)
    r, _, t = c.kernel.mmul
    column_major = tuple(int(x) for x in np.arange(r * t).reshape(r, t).T.ravel())
    result = runner.run_design(c, prebuilt(c, tmp_path), iters=1, warmup=0, xrt=FakeXrt(c, lanes=column_major))
    assert not result.passed
    assert any(f"{list(column_major)}" in note and "not row-major" in note for note in result.notes), result.notes
    assert runner.run_design(c, prebuilt(c, tmp_path), iters=1, warmup=0,
                             xrt=FakeXrt(c, lanes=tuple(range(r * t)))).passed
    zeros = runner.run_design(c, prebuilt(c, tmp_path), iters=1, warmup=0, xrt=FakeXrt(c, broken=True))
    assert any("not a lane-order fault" in note for note in zeros.notes)


def test_cli_run_with_a_device(tmp_path, capsys, monkeypatch):
    from gemm_gen.app.choice import choose_design as config_from_args
    from gemm_gen.app.cli import parser

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(runner.UNSECURE_XCLBIN, raising=False)
    c = config_from_args(parser().parse_args(["run", *SMALL]))
    prebuilt(c, tmp_path)
    monkeypatch.setattr(toolchain, "pyxrt", lambda: FakeXrt(c))
    assert main(["run", *SMALL, "--iters", "2"]) == 0
    out = capsys.readouterr().out
    # what C lost against A @ B, then mlir-aie's lines
    first, rest = out.split("\n", 1)
    assert first.startswith("vs exact A @ B: max abs "), first
    said = re.search(r"; ([\d,]+) of 16,384 equal to A @ B rounded once(?:; ([\d,]+) saturated)?", first)
    assert said and sum(int(x.replace(",", "")) for x in said.groups(default="0")) == 16_384, first
    assert rest.startswith("\nAvg NPU matmul time: ") and out.endswith("\nPASS!\n\n")
    assert os.environ[runner.UNSECURE_XCLBIN] == "1"  # as mlir-aie's `make run` exports it
    monkeypatch.setattr(toolchain, "pyxrt", lambda: FakeXrt(c, broken=True))
    assert main(["run", *SMALL, "--json"]) == 1
    assert '"passed": false' in capsys.readouterr().out


def test_cli_run_without_xrt_is_one_sentence(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def missing():
        raise ToolchainMissing("XRT's Python bindings cannot be imported (`import pyxrt`: No module named 'pyxrt')",
                               toolchain.XRT_INSTALL)

    monkeypatch.setattr(toolchain, "pyxrt", missing)
    assert main(["run", *SMALL]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pyxrt" in err and "make sim" in err
    assert not (tmp_path / "build").exists()


def test_measure_for_the_tuner(tmp_path, monkeypatch):
    c = small("npu2", "i8", "i8")
    prebuilt(c, tmp_path)
    monkeypatch.setattr(toolchain, "pyxrt", lambda: FakeXrt(c))
    seconds = runner.measure(c, iters=2, warmup=0, build_dir=str(tmp_path / "build"))
    assert 0 < seconds < 10


def test_bfp16_designs_run_and_check(tmp_path):
    from gemm_gen.spec.config import GemmConfig

    c = GemmConfig("npu2", 512, 256, 1024, 64, 32, 64, 64, rho=2, dtype_in="bfp16", dtype_out="bfp16", acc="bf16")
    result = runner.run_design(c, prebuilt(c, tmp_path), iters=1, warmup=0, xrt=FakeXrt(c))
    assert result.passed and result.checked == c.size.M * c.size.N


# ---- the pyxrt stand-in refuses what pyxrt refuses ---------------------------------------------------
def _session():
    xrt = FakeXrt(small("npu1", "i8", "i16"))
    dev = xrt.device(0)
    xb = xrt.xclbin("final.xclbin")
    dev.register_xclbin(xb)
    return xrt, dev, xrt.kernel(xrt.hw_context(dev, xb.get_uuid()), "MLIR_AIE")


@pytest.mark.parametrize("breaks,exc,text", [
    (lambda x, d, k: x.bo(d, 64, "host_only", k.group_id(3)), TypeError, "incompatible constructor arguments"),
    (lambda x, d, k: x.bo(d, 64, x.bo.host_only, 3).sync("to_device"), TypeError, "xclBOSyncDirection"),
    (lambda x, d, k: d.get_info("name"), TypeError, "xrt_info_device"),
    (lambda x, d, k: x.hw_context(d, "uuid-other.xclbin"), RuntimeError, "not registered"),
    (lambda x, d, k: k(3, x.bo(d, 64, x.bo.cacheable, 1), 1.5), TypeError, "expected pyxrt.bo or int"),
    (lambda x, d, k: k(*range(9)), RuntimeError, "9 arguments for a kernel of 8"),
    (lambda x, d, k: k.group_id(8), RuntimeError, "out of range"),
], ids=["bo-flags", "sync-direction", "info-key", "unregistered-xclbin", "arg-kind", "arg-count", "group-id"])
def test_the_pyxrt_standin_refuses(breaks, exc, text):
    xrt, dev, kernel = _session()
    with pytest.raises(exc, match=text):
        breaks(xrt, dev, kernel)


def test_run_on_the_other_npu_family_is_one_line(tmp_path, capsys, monkeypatch):
    from gemm_gen.app.choice import choose_design as config_from_args
    from gemm_gen.app.cli import parser

    monkeypatch.chdir(tmp_path)
    c = config_from_args(parser().parse_args(["run", *SMALL]))  # an npu1 design
    prebuilt(c, tmp_path)
    monkeypatch.setattr(toolchain, "pyxrt", lambda: FakeXrt(c, device_name="RyzenAI-npu4"))
    assert main(["run", *SMALL]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "this machine's NPU (RyzenAI-npu4) is an npu2; the design is for an npu1" in err


@pytest.mark.parametrize("step", ["hw_context", "wait"])
def test_xrt_failures_are_one_line(tmp_path, capsys, monkeypatch, step):
    """XRT raises RuntimeError when it refuses an xclbin or a run fails: one line naming the step."""
    from gemm_gen.app.choice import choose_design as config_from_args
    from gemm_gen.app.cli import parser

    monkeypatch.chdir(tmp_path)
    c = config_from_args(parser().parse_args(["run", *SMALL]))
    prebuilt(c, tmp_path)
    xrt = FakeXrt(c)

    def refuse(*_a, **_k):
        raise RuntimeError("DRM_IOCTL_AMDXDNA_CREATE_HWCTX IOCTL failed (err=-22): Invalid argument")

    if step == "hw_context":
        monkeypatch.setattr(xrt, "hw_context", refuse)
    else:
        real = xrt.kernel
        monkeypatch.setattr(xrt, "kernel", lambda *a: type("K", (), {
            "group_id": real(*a).group_id,
            "__call__": lambda self, *args: type("Run", (), {"wait": lambda self, *limit: refuse()})()})())
    monkeypatch.setattr(toolchain, "pyxrt", lambda: xrt)
    assert main(["run", *SMALL]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "XRT could not" in err and "Invalid argument" in err


@pytest.mark.parametrize("skip", ["to_device", "from_device"])
def test_a_missing_sync_gives_wrong_results(tmp_path, monkeypatch, skip):
    """The NPU sees only what was synced to it, the host only what was synced back: a runner that
    skipped either would report errors, not pass."""
    c = small("npu1", "i8", "i16")
    xrt = FakeXrt(c)
    real_bo = xrt.bo

    class Lazy(real_bo):  # noqa: N801 - a bo whose sync in one direction does nothing
        def sync(self, direction, *rest):
            if direction.name.lower().endswith(skip):
                return
            super().sync(direction, *rest)

    monkeypatch.setattr(xrt, "bo", Lazy)
    result = runner.run_design(c, prebuilt(c, tmp_path), iters=1, warmup=0, xrt=xrt)
    assert not result.passed
