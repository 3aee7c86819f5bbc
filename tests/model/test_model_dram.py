"""The DRAM path's structure (machine profiles, concurrent streams, writes) and the calibration's
refusals: each rule is broken here and must show."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gemm_gen.app.cli import main
from gemm_gen.model.fit import calibrate, paper
from gemm_gen.model.params import load, raw
from gemm_gen.model.perf import Workload, estimate

NPU2 = ["--dev", "npu2", "-M", "2048", "-K", "2048", "-N", "2048", "--dtype_in", "i8", "--dtype_out", "i8",
        "-m", "128", "-k", "64", "-n", "128"]


def test_the_machine_is_a_stated_parameter(capsys):
    assert main(["predict", *NPU2, "--json"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert default["machine"] == "strix-laptop" and default["dram_peak_gbps"] == 65
    assert main(["predict", *NPU2, "--json", "--machine", "krackan-minipc"]) == 0
    assert json.loads(capsys.readouterr().out)["machine"] == "krackan-minipc"
    assert main(["predict", *NPU2, "--machine", "laptop"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "krackan-minipc, strix-laptop" in err


def test_each_row_is_priced_on_its_sources_machine():
    p = load()
    slow_krackan = p.with_(peaks={**p.peaks, "npu2": {**p.peaks["npu2"], "krackan-minipc": 30.0}})
    striking = paper.STRIKING_T3[2]  # memory bound, on Striking's Krackan mini PC
    strix = paper.MLIR_AIE_ATB[0]  # memory bound, on a Strix laptop
    assert paper.machine_of(striking) == "krackan-minipc" and paper.machine_of(strix) == "strix-laptop"
    assert calibrate.array_tops(slow_krackan, striking) < 0.8 * calibrate.array_tops(p, striking)
    assert calibrate.array_tops(slow_krackan, strix) == calibrate.array_tops(p, strix)
    krackan_twin = paper.MLIR_AIE_ATB[3]
    assert krackan_twin.note.startswith("Krackan") and paper.machine_of(krackan_twin) == "krackan-minipc"


def _one(pr: Workload, p, m=128, k=64, n=128, k_mt=256):
    return estimate(pr, m, k, n, k_mt, p)


def test_one_stream_alone_cannot_fill_the_path():
    pr = Workload.new("npu2", 2048, 2048, 2048, "i8", "i8", True)
    p = load()
    e = _one(pr, p)
    starved = p.with_dram("npu2", stream_gbps_256=0.05)
    s = _one(pr, starved)
    assert float(s.t_mem) == pytest.approx(float(s.t_stream)) and float(s.t_mem) > float(e.t_mem)
    busiest = max(float(e.traffic["A"].bytes) / 4, float(e.traffic["B"].bytes) / 8, float(e.traffic["C"].bytes) / 8)
    assert float(s.t_stream) == pytest.approx(busiest / (0.05e9 * 512 / 256))  # npu2's shim BDs burst 512 B
    # the df-bw row: 16 streams of 256-byte bursts give 16 x 3.16 GB/s, below the Strix peak
    assert calibrate.dfbw_gbps(p) == pytest.approx(16 * 3.16) and calibrate.dfbw_gbps(p) < 65


def test_written_bytes_cost_what_write_cost_says():
    pr = Workload.new("npu2", 2048, 2048, 2048, "i8", "i32", True)
    p = load()
    base, dear = _one(pr, p), _one(pr, p.with_dram("npu2", write_cost=2.0))
    c = base.traffic["C"]
    assert float(dear.t_dram - base.t_dram) == pytest.approx(float(c.bytes) / 65e9)
    # the last C block's drain writes too
    c_block = 4 * 8 * 128 * 128 * 4  # rows x cols x m x n x 4-byte C
    assert float(dear.t_drain) > float(base.t_drain)
    assert float(dear.t_drain - base.t_drain) <= c_block / 65e9 * (1 + 1e-9)


def test_a_users_peak_survives_the_machine_flag(capsys):
    assert main(["predict", *NPU2, "--json", "--machine", "krackan-minipc", "--dram-gbps", "20"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["dram_peak_gbps"] == 20 and info["machine"] == "--dram-gbps"
    assert main(["predict", *NPU2, "--dram-gbps", "20"]) == 0
    assert "20 GB/s peak (--dram-gbps)" in capsys.readouterr().out
    p = load().with_dram("npu2", peak_gbps=20.0)  # a peak set for the current machine stays its own
    assert p.on_machine("npu2", "krackan-minipc").on_machine("npu2", "strix-laptop").dram["npu2"].peak_gbps == 20


def test_the_calibration_refuses_a_fit_on_its_bound(monkeypatch):
    """The npu1 bandwidth pair solved against a point it cannot reach sits on its 4000-byte bound:
    neither constant is written, and one line says which and why."""
    monkeypatch.setattr(calibrate, "fit_dram_npu1", lambda p: (50.0, 4000.0))
    d = calibrate.derive()
    line = d.refused["dram.npu1.run_overhead_bytes"]
    assert "lands on (or past) the bound of its range [0, 4000]" in line and "\n" not in line
    assert "dram.npu1.peak_gbps" in d.refused  # fitted together: not written either, though in range
    assert d.stored("dram.npu1.peak_gbps") == load().dram["npu1"].peak_gbps
    assert d.data["dram"]["npu1"]["run_overhead_bytes"]["value"] == raw()["dram"]["npu1"]["run_overhead_bytes"]["value"]


def test_a_refusal_keeps_the_given_value_and_a_later_write_clears_it():
    d = calibrate.Derivation(raw())
    name = "dram.npu2.lockstep_page_sharing"
    given = d.stored(name)
    assert d.put(name, 0.6, 3, 1) and d.stored(name) == 0.6  # an early round writes
    assert not d.put(name, 1.0, 3, 1)  # a later round lands on the bound: the given value, not 0.6
    assert d.stored(name) == given and f"the stored {given:g} stays" in d.refused[name]
    assert d.put(name, 0.3, 3, 1) and name not in d.refused


def test_the_calibration_refuses_fewer_rows_than_parameters():
    d = calibrate.Derivation(raw())
    before = d.stored("runtime.bd_task_us")
    assert not d.put(("runtime.bd_task_us", "runtime.dispatch_us"), (9.0, 9.0), 1, 2)
    assert "fitted from 1 rows, fewer than its 2 free parameters" in d.refused["runtime.bd_task_us"]
    assert d.stored("runtime.bd_task_us") == before
    assert d.put("runtime.bd_task_us", 9.0, 1, 1) and d.stored("runtime.bd_task_us") == 9.0


def test_the_shared_bank_cost_is_not_identified_and_not_written():
    d = calibrate.derive()
    assert set(d.refused) == {"kernel.l1_conflict_cycles_per_collision"}
    assert raw()["kernel"]["l1_conflict_cycles_per_collision"]["kind"] == "assumed"


def test_page_sharing_is_what_makes_row_major_b_cheaper_on_npu1_than_on_npu2():
    """The named effect behind the old coalescing factor: with every side-by-side boundary in an
    open page (1) the B row-major runs cost as one run per group; with none (0) each strip opens one."""
    pr = Workload.new("npu2", 2048, 2048, 2048, "i8", "i8", False)
    p = load()
    open_pages = _one(pr, p.with_dram("npu2", page_sharing=1.0))
    closed = _one(pr, p.with_dram("npu2", page_sharing=0.0))
    b = open_pages.traffic["B"]
    assert np.all(b.merged_runs < b.runs)
    assert float(closed.t_dram - open_pages.t_dram) == pytest.approx(
        float((b.runs - b.merged_runs) + (open_pages.traffic["C"].runs - open_pages.traffic["C"].merged_runs))
        * p.dram["npu2"].run_overhead_bytes / 65e9)
