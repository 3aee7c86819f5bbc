"""The performance model: the paper's tables, physical trends, the Design-derived traffic, the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemm_gen.app.cli import main
from gemm_gen.design import build_design
from gemm_gen.facts.devices import device
from gemm_gen.facts.errors import GemmGenError
from gemm_gen.model.fit import calibrate, paper
from gemm_gen.model.params import load, raw
from gemm_gen.model.perf import Workload, estimate
from gemm_gen.model.traffic import analytic_traffic, design_traffic
from gemm_gen.spec.checks import check_config
from gemm_gen.spec.config import GemmConfig

KEYS = ("tops", "core_macs_per_cycle", "compute_bound_tops", "memory_bound_tops", "bound")


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def predict_json(capsys, *args: str) -> dict:
    code, out, err = run(capsys, "predict", *args, "--json")
    assert code == 0, err
    return json.loads(out)


def kernel_args(r: paper.KernelRow) -> list[str]:
    """A small problem on the row's kernel: one output block, four k-steps."""
    cols = device(r.device).columns
    args = ["--dev", r.device, "-M", str(4 * r.m), "-K", str(4 * r.k), "-N", str(cols * r.n), "-m", str(r.m),
            "-k", str(r.k), "-n", str(r.n), "--k-mt", str(r.k), "--dtype_in", r.dtype_in, "--dtype_out",
            r.dtype_out, "--b-col-maj", "--acc", "out"]  # the paper's kernels keep C in its own type
    if not paper.block_row(r):  # the paper's kernel as the model reads it, built by chess as the paper's was
        args += ["--expansion", "x".join(map(str, paper.PAPER_EXPANSION)), "--kernel-loops", paper.PAPER_LOOPS,
                 "--chess"]
    if r.emulate:
        args += ["--emulate-bf16-mmul-with-bfp16", "--stack", "1024"]  # xchesscc's stack, as in the paper
    return args


def array_args(r: paper.ArrayRow) -> list[str]:
    args = ["--dev", r.device, "-M", str(r.M), "-K", str(r.K), "-N", str(r.N), "-m", str(r.m), "-k", str(r.k),
            "-n", str(r.n), "--k-mt", str(r.k_mt), "--dtype_in", r.dtype_in, "--dtype_out", r.dtype_out,
            "--b-col-maj", "1" if r.b_col_maj else "0", "--stack", str(r.stack_bytes), "--acc", r.acc or "out"]
    if not paper.block_row(r):
        args += ["--expansion", "x".join(map(str, paper.PAPER_EXPANSION)), "--kernel-loops", paper.PAPER_LOOPS,
                 "--chess"]
    if r.emulate:
        args.append("--emulate-bf16-mmul-with-bfp16")
    return args


# ---- the paper's tables through the command line --------------------------------------------------
@pytest.mark.parametrize("row", paper.STRIKING_T1 + paper.STRIKING_T2_KERNELS, ids=calibrate._kname)
def test_single_core_throughput_within_10_percent(capsys, row):
    info = predict_json(capsys, *kernel_args(row))
    assert info["core_macs_per_cycle"] == pytest.approx(row.macs_per_cycle, rel=0.10)


@pytest.mark.parametrize("row", paper.STRIKING_T2, ids=calibrate._aname)
def test_table2_end_to_end_within_10_percent(capsys, row):
    info = predict_json(capsys, *array_args(row))
    assert info["tops"] == pytest.approx(row.tops, rel=0.10)
    assert info["predicted"] is True and all(k in info for k in KEYS)
    assert info["tops"] <= min(info["compute_bound_tops"], info["memory_bound_tops"])


def test_table3_is_predicted_not_compared(capsys):
    for row in paper.STRIKING_T3:
        assert row.tops is None  # withheld: never a target
        info = predict_json(capsys, *array_args(row))
        assert 0 < info["tops"] < info["peak_tops"] and info["bound"] in ("compute", "memory")


def test_every_parameter_has_a_source_and_a_value():
    def walk(node):
        if isinstance(node, dict) and "value" in node:
            assert node["value"] is not None and node["source"] and node["kind"] in ("fixed", "calibrated", "assumed")
            return 1
        return sum(walk(v) for k, v in node.items() if not k.startswith("_")) if isinstance(node, dict) else 0

    data = raw()
    assert walk(data) >= 12
    assert "isa" not in data  # the cores' ISA facts live in gemm_gen.facts.devices.CORE_ISA only


# ---- trends ----------------------------------------------------------------------------------------
def _bw(dev: str, run_bytes: float) -> float:
    d = load().dram[dev]
    return d.peak_gbps * run_bytes / (run_bytes + d.run_overhead_bytes)


@given(st.sampled_from(["npu1", "npu2"]), st.integers(4, 1 << 16), st.integers(4, 1 << 16))
def test_effective_bandwidth_rises_with_run_length_and_saturates(dev, a, b):
    lo, hi = sorted((a, b))
    assert _bw(dev, lo) <= _bw(dev, hi) < load().dram[dev].peak_gbps
    assert _bw(dev, 1 << 16) > 0.95 * load().dram[dev].peak_gbps


@pytest.mark.parametrize("dev,t_in,t_out,m,k,n", [("npu1", "bf16", "bf16", 96, 56, 96),
                                                  ("npu2", "i8", "i16", 128, 72, 112)])
def test_k_mt_raises_memory_bound_then_saturates(dev, t_in, t_out, m, k, n):
    """Fig. 6: longer k_mt -> longer contiguous DRAM runs -> more effective bandwidth, saturating."""
    K = k * 2520  # a multiple of every k_mt below: no padding differences
    kmts = [k * j for j in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)]
    pr = Workload.new(dev, 4 * m * 8, K, device(dev).columns * n * 8, t_in, t_out, True)
    e = estimate(pr, m, k, n, np.array(kmts))
    assert np.all(np.diff(e.memory_bound_tops) > 0)
    gains = e.memory_bound_tops[1:] / e.memory_bound_tops[:-1] - 1
    assert np.all(np.diff(gains) < 0) and gains[-1] < 0.05 < gains[0]
    assert np.all(np.diff(e.tops) >= -1e-4 * e.tops[:-1])  # a longer first fill costs microseconds


@pytest.mark.parametrize("row", paper.STRIKING_T2 + paper.STRIKING_T3, ids=calibrate._aname)
def test_column_major_b_is_at_least_row_major(row):
    p = load()
    col = calibrate.array_tops(p, row, b_col_maj=True)
    rowm = calibrate.array_tops(p, row, b_col_maj=False)
    assert col >= rowm * 0.995
    if row.device == "npu2" and row.dtype_in == "i8":
        assert col > rowm * 1.05  # sec. 5.2.3: 19-25% on XDNA2 for int8


@pytest.mark.parametrize("dev,t_in,t_out", [("npu1", "i8", "i16"), ("npu2", "i8", "i8"), ("npu1", "bf16", "bf16")])
def test_bound_switches_from_memory_to_compute_as_the_c_tile_grows(dev, t_in, t_out):
    d = device(dev)
    r, s, t = d.mmul_shape(t_in)
    step = 2 * max(r, t)
    sizes = np.arange(step, 161, step)
    pr = Workload.new(dev, 4032, 4032, 4608, t_in, t_out, True)
    k = 4 * s
    e = estimate(pr, sizes, k, sizes, 8 * k)
    bound = np.where(e.memory_bound, "memory", "compute")
    assert bound[0] == "memory" and bound[-1] == "compute"
    switch = int(np.argmax(bound == "compute"))
    assert np.all(bound[switch:] == "compute")


def test_single_c_buffer_costs_a_drain_double_buffer_hides_it():
    p = load()
    single = paper.STRIKING_T2[6]  # 96x56x96: only fits L1 with a single C buffer
    with pytest.raises(GemmGenError, match="L1 overflow"):
        check_config(calibrate.array_config(single, depth_c_l1=2))
    assert calibrate.array_tops(p, single) > calibrate.array_tops(p, paper.SEC532_DOUBLE_C)  # sec. 5.3.2
    small = paper.SEC532_DOUBLE_C  # a kernel that fits both ways: the second C buffer hides the drain
    assert calibrate.array_tops(p, small, depth_c_l1=2) > calibrate.array_tops(p, small, depth_c_l1=1)


def test_non_overlapped_bd_queue_costs_about_27_percent():
    row = paper.SEC533_DESIGN
    p = load()
    loss = 1 - calibrate.array_tops(p, row, queue_groups=1) / calibrate.array_tops(p, row)
    assert loss == pytest.approx(paper.SEC533_SEQUENTIAL_LOSS, abs=0.01)
    assert calibrate.array_tops(p, row, queue_groups=2) == pytest.approx(calibrate.array_tops(p, row), rel=1e-3)


def test_dispatch_dominates_tiny_problems():
    e = estimate(Workload.new("npu2", 256, 256, 256, "i8", "i8", True), 32, 64, 32, 64)
    assert float(e.time) > load().dispatch_us * 1e-6 and float(e.tops) < 1.0


# ---- traffic from the Design equals the closed form ------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(dev=st.sampled_from(["npu1", "npu2"]),
       types=st.sampled_from([("bf16", "bf16", None, None), ("i8", "i8", None, None), ("i8", "i32", None, None),
                              ("bf16", "f32", None, None), ("bf16", "bf16", "bfp16", None),
                              ("bfp16", "bfp16", None, None), ("bfp16", "bfp16", None, "bf16")]),
       col=st.booleans(), mm=st.integers(1, 3), kk=st.integers(1, 3), nn=st.integers(1, 3), jm=st.integers(1, 3),
       bm=st.integers(1, 3), bk=st.integers(1, 4), bn=st.integers(1, 3), shrink=st.integers(0, 3),
       cols_pick=st.integers(0, 3), strips=st.booleans(), a_col=st.booleans(), c_col=st.booleans())
def test_design_traffic_matches_closed_form(dev, types, col, mm, kk, nn, jm, bm, bk, bn, shrink, cols_pick, strips,
                                            a_col, c_col):
    d = device(dev)
    counts = sorted(d.column_devices)
    cols = counts[cols_pick % len(counts)]
    t_in, t_out, t_b, acc = types
    if "bfp16" in types and dev == "npu1":
        return  # no bfp16 datapath
    r, s, t = GemmConfig(dev, 1, 1, 1, 1, 1, 1, 1, t_in, t_out, dtype_b=t_b, acc=acc).kernel.mmul
    m, k, n = 2 * r * mm, s * kk * 2, 2 * t * nn
    k_mt = k * jm
    M, K, N = bm * 4 * m - shrink, bk * k_mt - shrink * s, bn * cols * n
    pack = "strips" if strips and "bfp16" in ((t_b or t_in),) else "tiles"
    c = GemmConfig(dev, M, max(K, s), N, m, k, n, k_mt, t_in, t_out, col, cols=cols, dtype_b=t_b, acc=acc,
                   b_pack=pack, a_col_maj=a_col, c_col_maj=c_col and (t_out in ("i32", "f32") or "bfp16" not in types))
    try:
        design = build_design(c)
    except GemmGenError:
        return
    got = design_traffic(design)
    Mp, Kp, Np = (np.array(x) for x in c.call.covered)
    want = analytic_traffic(c.array.rows, c.array.cols, (c.types.t_in, c.types.t_b, c.types.t_out), col, np.array(m),
                            np.array(k_mt),
                            np.array(n), Mp, Kp, Np, c.layout.b_pack, tuple(np.array(c.call.ld(x)) for x in "ABC"),
                            a_col,
                            c.layout.c_col_maj)
    for name in ("A", "B", "C"):
        assert float(got[name].bytes) == pytest.approx(float(want[name].bytes))
        assert float(got[name].runs) == pytest.approx(float(want[name].runs))
        assert float(got[name].merged_runs) == pytest.approx(float(want[name].merged_runs))


# ---- command line ----------------------------------------------------------------------------------
SMALL = ["--dev", "npu1", "-M", "512", "-K", "512", "-N", "512", "--dtype_in", "i8", "--dtype_out", "i16"]


def test_predict_json_keys_and_text(capsys):
    info = predict_json(capsys, *SMALL, "-m", "64", "-k", "64", "-n", "64", "--k-mt", "128")
    assert all(k in info for k in KEYS) and info["bound"] in ("compute", "memory")
    assert info["time_s"] > 0 and set(info["dram"]) == {"A", "B", "C"}
    code, out, _ = run(capsys, "predict", *SMALL, "-m", "64", "-k", "64", "-n", "64", "--k-mt", "128")
    assert code == 0 and out.startswith("PREDICTED") and "TOPS" in out


def test_predict_without_tiles_uses_the_tuned_design(capsys):
    from gemm_gen.search.tune import tune

    info = predict_json(capsys, *SMALL)
    best = tune(Workload.new("npu1", 512, 512, 512, "i8", "i16"), 1).best.config
    assert info["tile"] == [best.tiling.m, best.tiling.k, best.tiling.n] and info["k_mt"] == best.tiling.k_mt


@pytest.mark.parametrize("extra, message", [
    (["--dtype_b", "bfp16"], "npu1 has no bfp16 datapath"),  # SMALL is npu1
    (["--acc", "f32"], "C accumulates in the kernel's i32 accumulator (the default) or in its output type"),
    (["--acc", "i64"], "--acc i64 with --dtype_out i16"),  # npu1 i8 has acc32 lanes only
    (["--dtype_b", "i16"], "scalar kernels multiply one input type"),
])
def test_unsupported_precisions_exit_2(capsys, extra, message):
    code, out, err = run(capsys, "predict", *SMALL, *extra)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1 and out == ""


def test_trivial_rho_dtype_b_and_acc_are_accepted(capsys):
    info = predict_json(capsys, *SMALL, "--rho", "1", "--dtype_b", "i8", "--acc", "i16")
    assert info["tops"] > 0


def test_bad_input_exits_2(capsys):
    # predict looks past memory budgets, not past the hardware: a 256^3 tile's core BD is too long
    code, _, err = run(capsys, "predict", *SMALL, "-m", "256", "-k", "256", "-n", "256", "--k-mt", "256")
    assert code == 2 and "exceeds the 14-bit field of a core BD" in err


def test_predict_past_a_budget_but_not_past_a_rule(capsys):
    """A paper tile built by chess (1 KiB stack) overflows L1 under our default stack (mlir-aie's
    0xD00): still predicted, marked not buildable; a tile that breaks a divisibility rule is refused."""
    from gemm_gen.app.cli import main

    args = ["predict", "--dev", "npu2", "-M", "4096", "-K", "4096", "-N", "4096", "-k", "152", "-n", "48",
            "--dtype_in", "bf16", "--dtype_out", "bf16", "--acc", "out", "--json"]  # the paper's C in bf16
    assert main([*args, "-m", "48"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["buildable"] is False and "L1 overflow" in info["not_buildable_because"]
    assert abs(info["core_macs_per_cycle"] / 158.1 - 1) < 0.10  # Striking Table 1, XDNA2 bf16 (via bfp16)
    # with the paper's chess 1 KiB stack and kernel (the AIE API's per-mmul emulation) it fits, as in the paper
    assert main([*args, "-m", "48", "--chess", "--convert-once", "0", "--stack", "1024"]) == 0
    assert json.loads(capsys.readouterr().out)["buildable"] is True
    assert main([*args, "-m", "48", "--chess", "--convert-once", "0"]) == 0  # chess alone no longer means 1 KiB
    assert json.loads(capsys.readouterr().out)["buildable"] is False
    assert main([*args, "-m", "44"]) == 2
    assert "not a multiple of 2r=16" in capsys.readouterr().err


@pytest.mark.parametrize("dev,t_in,t_out", [("npu1", "i8", "i32"), ("npu2", "bf16", "bf16")])
def test_column_major_a_is_priced_by_its_runs(dev, t_in, t_out):
    """Column-major A is read as A^T in runs of m (one per K row and core row), whatever k_mt: the
    Design's count equals the closed form, the runs are shorter than row-major A's k_mt runs, and
    predict prices the difference (the same tiles, more DRAM time)."""
    row = GemmConfig(dev, 1024, 2048, 1024, 64, 64, 64, 256, t_in, t_out)
    col = row.with_(a_col_maj=True)
    got = design_traffic(build_design(col))["A"]
    Mp, Kp, Np = (np.array(x) for x in col.call.covered)
    want = analytic_traffic(col.array.rows, col.array.cols, (col.types.t_in, col.types.t_b, col.types.t_out), False,
                            np.array(64), np.array(256),
                            np.array(64), Mp, Kp, Np, "tiles", tuple(np.array(col.call.ld(x)) for x in "ABC"),
                            True)["A"]
    assert float(got.runs) == pytest.approx(float(want.runs)) and float(got.bytes) == float(want.bytes)
    assert float(got.run_bytes) == 64 * col.types.t_in.elem_bytes
    assert float(design_traffic(build_design(row))["A"].run_bytes) == 256 * row.types.t_in.elem_bytes
    wl_row, wl_col = Workload.of(row), Workload.of(col)
    t_row = float(estimate(wl_row, 64, 64, 64, 256).t_dram)
    t_col = float(estimate(wl_col, 64, 64, 64, 256).t_dram)
    assert t_col > t_row
