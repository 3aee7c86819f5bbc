"""make validate (doctor, sweep, record, plot) end to end with stand-in tools, and the refit of the
model's device constants on such records."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from gemm_gen.app import validate
from gemm_gen.app.cli import main
from gemm_gen.backends import doctor
from gemm_gen.backends.compile import artifacts
from gemm_gen.design import build_design, l1_banks
from gemm_gen.facts.errors import ToolchainMissing
from gemm_gen.model.fit import measured
from gemm_gen.model.params import load, peak_entry
from gemm_gen.model.predict import predict
from gemm_gen.spec.config import GemmConfig

from ..backends.test_build import _fake_tools
from ..backends.test_doctor import laptop  # noqa: F401 - the fixture
from ..fake_pyxrt import FakeXrt


@cache
def sweep_xclbins(dev_name: str) -> dict[str, GemmConfig]:
    """Each sweep design's xclbin (under build/) -> its config, what the pyxrt stand-in runs: the same for every
    stand-in of a device, so built once per device and process (a validate run asks pyxrt several times)."""
    return {str(artifacts(build_design(i.config), Path("build")).xclbin): i.config
            for i in validate.sweep(dev_name, chess=False) if i.config is not None}


@pytest.fixture
def npu_laptop(tmp_path, monkeypatch, laptop):  # noqa: F811
    """Doctor ready, stand-in compilers and aiecc on PATH, a pyxrt stand-in that knows each xclbin."""
    from gemm_gen.backends import toolchain

    _fake_tools(tmp_path, monkeypatch)
    monkeypatch.setattr(toolchain, "peano_dir", lambda: tmp_path / "peano")
    monkeypatch.setattr(toolchain, "aiecc", lambda: str(tmp_path / "bin" / "aiecc"))

    def no_chess():
        raise ToolchainMissing("xchesscc is not on PATH", "install it")

    monkeypatch.setattr(toolchain, "xchesscc", no_chess)
    monkeypatch.chdir(tmp_path)

    def fake(dev_name):
        return FakeXrt(configs=dict(sweep_xclbins(dev_name)),
                       device_name="RyzenAI-npu1" if dev_name == "npu1" else "RyzenAI-npu4")

    monkeypatch.setattr(toolchain, "pyxrt", lambda: fake(NPU_NOW[0]))
    monkeypatch.setattr(doctor, "_which", lambda name: None if name == "xchesscc" else f"/usr/bin/{name}")
    return tmp_path


NPU_NOW = ["npu2"]


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_validate_runs_the_sweep_end_to_end(npu_laptop, capsys, dev):
    NPU_NOW[0] = dev
    code = main(["validate", "--dev", dev, "--only", "fit", "--iters", "2", "--warmup", "0"])
    out = capsys.readouterr().out
    assert code == 0, out
    record = json.loads((npu_laptop / "build" / f"validate_{dev}.json").read_text())
    png = npu_laptop / "build" / f"validate_{dev}.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    small = [i for i in validate.sweep(dev, chess=False) if i.role == "fit"]
    assert [d["name"] for d in record["designs"]] == [i.name for i in small]
    for d in record["designs"]:
        assert d["status"] == "PASS" and d["errors"] == 0 and d["checked"] == 512 * 512
        m = d["measured"]
        assert m["min_us"] <= m["avg_us"] <= m["max_us"] and m["max_tops"] >= m["avg_tops"] >= m["min_tops"]
        assert d["predicted"]["tops"] > 0 and len(d["times_us"]) == 2
        # what aiecc measured of the cores' stacks (the stand-in: crt1's frame plus the kernel's)
        assert d["stack"]["status"] == "measured" and d["stack"]["frame_bytes"] <= d["stack"]["stack_bytes"]
        assert d["stack"]["stack_bytes"] == d["config"]["stack_bytes"] >= 0xD00
    env = record["environment"]
    assert env["device"] in ("RyzenAI-npu1", "RyzenAI-npu4") and env["xrt"] == "2.21.75"
    assert env["pinned"]["mlir_aie"] == "1.4.3"
    assert f"wrote build/validate_{dev}.json" in out and "PREDICTION" in out
    assert f"stack frames: measured on {len(small)} of {len(small)} built designs; the fullest stack is" in out


def test_validate_stops_when_the_toolchain_is_not_ready(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(doctor, "_dist_version", lambda name: None)
    monkeypatch.setattr(doctor, "_which", lambda name: None)
    assert main(["validate", "--dev", "npu2"]) == 2
    captured = capsys.readouterr()
    assert "MISSING" in captured.out and captured.err.count("\n") == 1 and not (tmp_path / "build").exists()


def test_validate_refuses_the_wrong_device(npu_laptop, capsys):
    NPU_NOW[0] = "npu2"
    assert main(["validate", "--dev", "npu1"]) == 2
    assert "this machine's NPU is an npu2, not an npu1; use DEVICE=npu2" in capsys.readouterr().err


def test_a_failing_design_is_recorded_and_the_sweep_goes_on(npu_laptop, monkeypatch, capsys):
    from gemm_gen.backends import toolchain

    NPU_NOW[0] = "npu1"
    monkeypatch.setattr(toolchain, "pyxrt", lambda: FakeXrt(configs={}, broken=True, device_name="RyzenAI-npu1"))
    assert main(["validate", "--dev", "npu1", "--only", "fit", "--iters", "1", "--warmup", "0"]) == 1
    record = json.loads((npu_laptop / "build" / "validate_npu1.json").read_text())
    assert {d["status"] for d in record["designs"]} == {"ERROR"}  # the stand-in has no config: every run fails
    assert len(record["designs"]) == len([i for i in validate.sweep("npu1", False) if i.role == "fit"])


def test_a_stack_too_small_is_recorded_and_the_sweep_goes_on(npu_laptop, monkeypatch, capsys):
    """aiecc refuses every design (the kernels' frames outgrow their stacks): each is recorded with
    its frame and stack, and the sweep goes on."""
    NPU_NOW[0] = "npu2"
    monkeypatch.setenv("FAKE_KERNEL_FRAME", "8000")
    assert main(["validate", "--dev", "npu2", "--only", "fit", "--iters", "1", "--warmup", "0"]) == 1
    record = json.loads((npu_laptop / "build" / "validate_npu2.json").read_text())
    assert len(record["designs"]) == len([i for i in validate.sweep("npu2", False) if i.role == "fit"])
    for d in record["designs"]:
        assert d["status"] == "ERROR" and "rebuild with --stack 8064" in d["reason"]
        assert d["stack"] == {"stack_bytes": d["config"]["stack_bytes"], "status": "overflow", "frame_bytes": 8064}
    assert "stack frames: none measured by aiecc (overflow)" in capsys.readouterr().out


def test_the_full_sweep_is_buildable():
    """Every design of both sweeps builds a valid Design (skips name their reason)."""
    for dev in ("npu1", "npu2"):
        for chess in (False, True):
            for item in validate.sweep(dev, chess):
                if item.config is None:
                    assert item.skipped
                else:
                    build_design(item.config)


def test_make_validate_passes_the_documented_variables():
    out = subprocess.run(["make", "-n", "validate", "DEVICE=npu1", "ITERS=3", "WARMUP=2"], capture_output=True,
                         text=True, cwd=Path(__file__).parents[2], check=True).stdout
    assert "XRT_HACK_UNSECURE_LOADING_XCLBIN=1" in out and "gemm-gen validate --dev npu1 --iters 3" in out
    assert "--warmup 2" in out


# ---- the refit ----------------------------------------------------------------------------------------
def _record(tmp_path: Path, truth, dev: str = "npu2", scale: float = 1.0) -> Path:
    """A validate record whose measured times are the model's under `truth` constants (plus 1% noise),
    times `scale`."""
    rng = np.random.default_rng(1)
    items = [i for i in validate.sweep(dev, chess=True) if i.config is not None]
    designs = []
    for i in items:
        t = measured.predicted_s(truth, i.config) * (1 + rng.normal(0, 0.01)) * scale
        designs.append({"name": i.name, "role": i.role, "status": "PASS", "config": i.config.to_json(),
                        "measured": {"avg_us": t * 1e6}})
    path = tmp_path / f"validate_{dev}.json"
    path.write_text(json.dumps({"format": 1, "device": dev, "designs": designs}))
    return path


def test_calibrate_recovers_known_constants_and_reports_the_check_rows(tmp_path, capsys):
    base = load()
    truth = base.with_dram("npu2", peak_gbps=41.0, run_overhead_bytes=600.0).with_(dispatch_us=120.0)
    path = _record(tmp_path, truth)
    rows = measured.read_records([path])
    r = measured.refit(rows, base)
    assert r.fitted["npu2.peak_gbps"] == pytest.approx(41.0, rel=0.1)
    assert r.fitted["dispatch_us"] == pytest.approx(120.0, rel=0.15)
    assert not r.refused
    fit_after = [abs(e) for _, e in r.errors(r.after, "fit")]
    check_before = [abs(e) for _, e in r.errors(r.before, "check")]
    check_after = [abs(e) for _, e in r.errors(r.after, "check")]
    assert max(fit_after) < 0.05 and np.mean(check_after) < np.mean(check_before)
    out_file = tmp_path / "cal.json"
    assert main(["calibrate", "--measurements", str(path), "-o", str(out_file)]) == 0
    text = capsys.readouterr().out
    assert "check rows (rows only checked (out of sample)" in text and "fit rows (rows the constants" in text
    data = json.loads(out_file.read_text())
    assert peak_entry(data, "npu2")["kind"] == "calibrated"  # the default machine profile's
    assert "fitted by gemm-gen calibrate" in data["runtime"]["dispatch_us"]["source"]


def test_calibrate_fits_the_cost_of_a_shared_bank_on_the_allocation_pairs(tmp_path):
    """The sweep pairs a tile whose planned L1 layout shares no bank with its basic-sequential twin
    (which does); runs made with a known cost per collision give it back, and pairs that cannot
    tell it apart are refused."""
    items = [i for i in validate.sweep("npu2", chess=True) if i.role == "l1"]
    assert len(items) == 4
    sharing = [l1_banks.plan(i.config, i.config.array.l1_alloc).conflict_bytes > 0 for i in items]
    assert sharing == [False, True, False, True]
    base = load()
    truth = base.with_(l1_conflict=1.5)
    rows = measured.read_records([_record(tmp_path, truth)])
    r = measured.refit(rows, base)
    assert r.fitted["l1_conflict"] == pytest.approx(1.5, rel=0.25) and "l1_conflict" not in r.refused
    assert r.after.l1_conflict == pytest.approx(r.fitted["l1_conflict"])
    data = measured.calibration_data(r)
    assert "L1 allocation pair rows" in data["kernel"]["l1_conflict_cycles_per_collision"]["source"]
    alike = [row for row in rows if row.role != "l1" or row.config.array.l1_alloc is None]
    assert "nothing to compare" in measured.refit(alike, base).refused["l1_conflict"]


def test_calibrate_fits_a_streams_rate_and_a_tasks_setup_on_the_decode_rows(tmp_path):
    """Runs made with a slower shim stream (fewer bursts in flight at 512 bytes than the model's scaling
    from df-bw's 256) and a cheaper task setup than the model's give both back from the decode rows
    (issue 22's unsettled constants); rows that cannot tell them apart are refused. (A stream faster than
    the core's stream port, 4 bytes a cycle, is not seen by these rows: the port binds first.)"""
    base = load()
    stream = base.dram["npu2"].stream_gbps_256 * 0.6
    truth = base.with_dram("npu2", stream_gbps_256=stream).with_(bd_task_us=1.2)
    rows = measured.read_records([_record(tmp_path, truth)])
    assert {row.config.array.cols for row in rows if row.role == "decode"} == {1, 2, 4, 8}
    r = measured.refit(rows, base)
    assert r.fitted["npu2.stream_gbps_256"] == pytest.approx(stream, rel=0.1)
    assert r.fitted["bd_task_us"] == pytest.approx(1.2, rel=0.25)
    assert not {"npu2.stream_gbps_256", "bd_task_us"} & set(r.refused)
    assert r.after.bd_task_us == pytest.approx(r.fitted["bd_task_us"])
    assert max(abs(e) for _, e in r.errors(r.after, "decode")) < 0.05
    assert max(abs(e) for _, e in r.errors(r.before, "decode")) > 0.2  # the old constants did not fit them
    data = measured.calibration_data(r)
    assert "decode rows" in data["runtime"]["bd_task_us"]["source"]
    assert data["dram"]["npu2"]["stream_gbps_at_256_byte_bursts"]["kind"] == "calibrated"
    assert "decode calls" in measured.report(r)
    one = [row for row in rows
           if row.role != "decode" or (row.config.array.cols == 8 and row.config.runtime.queue_groups == 4)]
    r2 = measured.refit(one, base)
    assert "are not told apart" in r2.refused["npu2.stream_gbps_256"]
    assert "nothing to compare" in r2.refused["bd_task_us"]
    assert r2.after.bd_task_us == base.bd_task_us


def test_a_stream_faster_than_its_port_is_written_as_a_lower_bound(tmp_path):
    """Above one stream's port (4 bytes a cycle), no decode row's time depends on a stream's rate: the
    refit writes the value where the rows stop seeing it as "at least", and fits the rest beside it
    (held at the old value instead, it would drag dispatch and a task's setup away from the truth)."""
    base = load()
    truth = base.with_dram("npu2", stream_gbps_256=4.5)
    rows = measured.read_records([_record(tmp_path, truth)])
    r = measured.refit(rows, base)
    assert r.one_sided == {"npu2.stream_gbps_256": "at least"}
    assert 3.4 < r.fitted["npu2.stream_gbps_256"] <= 4.5 and "npu2.stream_gbps_256" not in r.refused
    assert r.fitted["dispatch_us"] == pytest.approx(base.dispatch_us, rel=0.15)
    assert r.fitted["bd_task_us"] == pytest.approx(base.bd_task_us, rel=0.15)
    assert "at least this value" in measured.calibration_data(r)["dram"]["npu2"]["stream_gbps_at_256_byte_bursts"][
        "source"]
    assert "as at least this" in measured.report(r)


def test_the_decode_rows_are_bound_by_what_they_fit():
    """Under the model's constants each stream row is bound by one shim stream (not by DRAM, a core or a
    port), and of the setup rows the one with four groups in flight hides all setups but the first while
    the one with one group in flight waits for every group's."""
    p = load()
    for dev in ("npu1", "npu2"):
        rows = [i.config for i in validate.decode_items(dev) if i.role == "decode"]
        for c in rows[:-2]:
            t = predict(c).times_us
            assert t.memory == t.stream_in_flight > max(t.core, t.shim_streams, t.dram), (dev, c.array.cols)
        one, four = rows[-2:]
        t_cp = (1 + 2 * one.array.cols) * p.bd_task_us
        groups = one.call.m_blocks * one.call.n_blocks
        assert predict(one).times_us.bd_bubbles == pytest.approx(groups * t_cp)
        assert predict(four).times_us.bd_bubbles == pytest.approx(t_cp)


STREAM_RATE = "stream rate"  # the decode mapping's own tiles, DECODE_TILES (one B stream per column)
# one case per row (ten tuner runs, the suite's longest test when they were one: issue 33 item 4)
TUNED_ROWS = [(dev, row) for dev in ("npu1", "npu2")
              for row in (STREAM_RATE, *(i.name for i in validate.decode_items(dev) if i.role == "check"))]


@pytest.mark.parametrize(("dev", "row"), TUNED_ROWS, ids=[f"{dev}-{row}" for dev, row in TUNED_ROWS])
def test_the_sweeps_tuned_designs_are_the_tuners(dev: str, row: str) -> None:
    """DECODE_TILES and INT4_CHECKS say they are what the search chooses: they are."""
    from gemm_gen.search import choose
    from gemm_gen.spec.request import Options, Problem, Request

    if row == STREAM_RATE:
        c = choose(Request(Options(dev, "bf16", compiler="peano", rows=1), Problem(*validate.DECODE_CALL))).config
        assert (c.tiling.m, c.tiling.k, c.tiling.n, c.tiling.k_mt) == validate.DECODE_TILES[dev] and c.array.rows == 1
        return
    want = next(i.config for i in validate.decode_items(dev) if i.role == "check" and i.name == row)
    opts = Options(dev, want.types.dtype_in, want.types.dtype_out,
                   dtype_b=None if want.types.dtype_b == "bf16" else "i4",
                   group_size=want.groups.group_size, compiler="peano")
    got = choose(Request(opts, Problem(want.size.M, want.size.K, want.size.N))).config
    assert got == want, row


def test_the_decode_rows_vary_what_they_fit():
    """Per device: one decode call on 1, 2, 4 and all columns (one B stream each), the setup call with one
    and with four task groups in flight, the split decode placement's bf16 check row and the three int4 ones."""
    for dev, columns in (("npu1", (1, 2, 4)), ("npu2", (1, 2, 4, 8))):
        items = validate.decode_items(dev)
        streams = [i.config for i in items if i.role == "decode" and i.config.size.N == 4096]
        assert [c.array.cols for c in streams] == list(columns) and {c.array.rows for c in streams} == {1}
        setup = [i.config for i in items if i.role == "decode" and i.config.size.N == 16384]
        assert [c.runtime.queue_groups for c in setup] == [1, 4] and {c.runtime.task_span for c in setup} == {1}
        assert [i.config.types.dtype_b for i in items if i.role == "check"] == ["bf16"] + ["i4"] * 3
        assert set(validate.decode_items(dev)) <= set(validate.sweep(dev, chess=False))


def test_calibrate_refuses_constants_on_a_bound_or_from_too_few_rows(tmp_path):
    base = load()
    # runs five times faster than the model can explain: dispatch would have to be negative
    rows = measured.read_records([_record(tmp_path, base, scale=0.2)])
    fit_only = measured.refit([row for row in rows if row.role != "decode"], base)
    assert "bound of its search [0, 5000]" in fit_only.refused["dispatch_us"]
    assert fit_only.after.dispatch_us == base.dispatch_us  # not written
    # with the decode rows the solver finds values inside every bound, which still leave the runs far off:
    # none is written
    r = measured.refit(rows, base)
    for name in ("npu2.peak_gbps", "npu2.run_overhead_bytes", "dispatch_us", "npu2.stream_gbps_256", "bd_task_us"):
        assert "the refit leaves" in r.refused[name] or "bound of its search" in r.refused[name], name
    assert r.after.dispatch_us == base.dispatch_us and r.after.bd_task_us == base.bd_task_us
    few = [replace(row, role="check") for row in rows[2:]] + rows[:2]
    r2 = measured.refit(few, base)
    assert "fewer than the 3 free parameters" in r2.refused["npu2.peak_gbps"]


def test_a_refit_calibration_is_what_the_model_then_uses(tmp_path, monkeypatch):
    base = load()
    truth = base.with_dram("npu2", peak_gbps=41.0, run_overhead_bytes=600.0).with_(dispatch_us=120.0)
    r = measured.refit(measured.read_records([_record(tmp_path, truth)]), base)
    out = tmp_path / "cal.json"
    out.write_text(json.dumps(measured.calibration_data(r)))
    monkeypatch.setenv("GEMM_GEN_CALIBRATION", str(out))
    load.cache_clear()
    try:
        assert load().dram["npu2"].peak_gbps == pytest.approx(r.fitted["npu2.peak_gbps"], abs=1e-3)
    finally:
        monkeypatch.delenv("GEMM_GEN_CALIBRATION")
        load.cache_clear()


def test_a_refit_peak_goes_to_the_named_machine_without_the_old_spread(tmp_path, monkeypatch):
    """The sources' spread belonged to the old value: a refit (here 41 GB/s, far below the Strix
    spread's 50.6) that kept it would predict a slow end faster than the prediction itself."""
    from gemm_gen.model.params import load_ends
    from gemm_gen.model.predict import predict

    base = load()
    truth = base.with_dram("npu2", peak_gbps=41.0, run_overhead_bytes=600.0).with_(dispatch_us=120.0)
    r = measured.refit(measured.read_records([_record(tmp_path, truth)]), base, machine="my-laptop")
    data = measured.calibration_data(r, "my-laptop")
    npu2 = data["dram"]["npu2"]
    assert npu2["default_machine"] == "my-laptop" and "strix-laptop" in npu2["machines"]
    entry = peak_entry(data, "npu2")
    assert entry["value"] == pytest.approx(r.fitted["npu2.peak_gbps"], abs=1e-3) and "spread" not in entry
    out = tmp_path / "cal.json"
    out.write_text(json.dumps(data))
    monkeypatch.setenv("GEMM_GEN_CALIBRATION", str(out))
    load.cache_clear()
    load_ends.cache_clear()
    try:
        c = next(i.config for i in validate.sweep("npu2", chess=True) if i.config is not None)
        info = predict(c)
        assert info.machine == "my-laptop"
        assert info.tops_low <= info.tops * (1 + 1e-9) <= info.tops_high * (1 + 1e-9)
    finally:
        monkeypatch.delenv("GEMM_GEN_CALIBRATION")
        load.cache_clear()
        load_ends.cache_clear()
