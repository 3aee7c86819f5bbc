"""W4A16 in the rules, the model and the search (issue 22 item 1b, branch w4a16-model; issue 31 item 8): B objects
counted at groupquant.object_bytes in L1, on the memtiles and in DRAM, the dequantized tile in L1 (bf16, or npu2's
convert-once bfp16 tiles), the dequantization charged once per B object (uncalibrated), the bf16 mmul rate,
predict's lines, the tuner's k."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemm_gen.app.model_commands import predict_text
from gemm_gen.facts import groupquant
from gemm_gen.facts.devices import DEVICES
from gemm_gen.facts.errors import ConfigError
from gemm_gen.model import dequant_cost
from gemm_gen.model.kernel import b_conversion_cycles, kernel_cycles
from gemm_gen.model.params import load
from gemm_gen.model.perf import Workload, estimate
from gemm_gen.model.predict import predict
from gemm_gen.model.roof import call_bytes
from gemm_gen.search.tune import rank_all, tune
from gemm_gen.spec.config import GemmConfig
from gemm_gen.spec.request import Pins, Problem
from gemm_gen.spec.rules import l1, memtile
from gemm_gen.spec.rules.dequant import dequant_ops


def w4a16(dev: str = "npu2", M: int = 256, K: int = 512, N: int = 256, m: int = 32, k: int = 128, n: int = 32,
          k_mt: int = 128, g: int = 128, zp: bool = False, **kw: object) -> GemmConfig:
    return GemmConfig(dev, M, K, N, m, k, n, k_mt, "bf16", "bf16", dtype_b="i4", group_size=g, zero_points=zp, **kw)


@pytest.mark.parametrize("k, g, zp", [(128, 128, False), (64, 128, False), (256, 64, True), (32, 32, True)])
def test_l1_counts_b_objects_at_object_bytes_and_one_bf16_scratch(k, g, zp):
    c = w4a16(k=k, k_mt=k, g=g, zp=zp, convert_once=False)  # npu2's emulated kernel, as npu1's
    parts = c.l1_parts
    assert parts["B"] == c.array.depth_ab_l1 * groupquant.ObjectLayout(k, c.tiling.n, g, zp).nbytes
    assert parts[l1.B_DEQ_PART] == k * c.tiling.n * 2  # one k x n bf16 tile per core, whatever the depth
    assert c.l1_bytes == sum(parts.values())
    # npu2's default, the convert-once kernel: the object dequantized into bfp16 tiles (9 bytes per 8 values),
    # with A's bfp16 copy, and no bf16 scratch
    once = w4a16(k=k, k_mt=k, g=g, zp=zp)
    assert once.kernel.convert_once and l1.B_DEQ_PART not in once.l1_parts
    assert once.l1_parts["B bfp16"] == k * c.tiling.n * 9 // 8 and once.l1_parts["A bfp16"] == c.t_ma * k * 9 // 8
    assert once.l1_parts["B"] == parts["B"] and once.l1_bytes == sum(once.l1_parts.values())
    # the same tiles without group scales (int8 x int4) keep k n / 2 bytes per B object and no scratch
    plain = GemmConfig("npu2", 256, 512, 256, 32, k, 32, k, "i8", "i8", dtype_b="i4")
    assert plain.l1_parts["B"] == plain.array.depth_ab_l1 * k * 32 // 2
    assert l1.B_DEQ_PART not in plain.l1_parts


def test_memtile_b_pool_holds_whole_objects():
    c = w4a16(k=64, k_mt=256)
    (b_pool,) = [p for p in c.l2_pools() if p.name == "B_L3L2_0"]
    assert b_pool.nbytes == groupquant.object_bytes(64, c.tiling.n, 128, False)  # one L1 object: B is not chunked
    chunked = memtile.L2Options(4, 8, c.types.t_in, c.types.t_b, c.types.t_out, True, 2, 2, 128, True)
    (b_big,) = [p for p in memtile.l2_pools(chunked, 32, 64, 32, 256) if p.name == "B_L3L2_0"]
    assert b_big.nbytes == 4 * groupquant.object_bytes(64, 32, 128, True)  # k_mt / k objects, each with its rows


@given(st.integers(1, 64).map(lambda x: 8 * x), st.sampled_from(groupquant.GROUP_SIZES))
def test_the_searchs_k_filter_is_check_tile_k(k, g):
    try:
        groupquant.check_tile_k(k, g)
        ok = True
    except ConfigError:
        ok = False
    assert bool(groupquant.tile_k_ok(np.array([k]), g)[0]) == ok


@pytest.mark.parametrize("dev, g, zp", [("npu2", 128, False), ("npu2", 32, True), ("npu1", 64, False)])
def test_tuner_candidates_fit_l1_and_cover_whole_groups(dev, g, zp):
    pr = Workload.of(w4a16(dev, 512, 2048, 1024, g=g, zp=zp))
    m, k, n, kmt, rho, t, _, evaluated = rank_all(pr, Pins(), 20, load())
    assert evaluated > 0
    o = pr.base.l1_options
    assert np.all(l1.fits(o, pr.base.dev.l1_bytes, m, k, n, rho))
    assert np.all((k % g == 0) | (g % k == 0))
    # the mask is what keeps them: the L1 rule's linear bound alone admits tiles that do not fit
    mm, nn = (a.ravel() for a in np.meshgrid(np.arange(16, 257, 16), np.arange(16, 257, 16)))
    k_max = l1.largest_k(o, pr.base.dev.l1_bytes, mm, nn, np.ones_like(mm), 8)
    assert not np.all(l1.fits(o, pr.base.dev.l1_bytes, mm, k_max, nn, 1))


def test_tuned_w4a16_design_validates_on_npu2():
    best = tune(Workload.of(w4a16("npu2", 1024, 1024, 4096)), 1).best.config
    groupquant.check_tile_k(best.tiling.k, 128)
    assert best.l1_bytes <= best.dev.l1_bytes


def test_b_dram_bytes_include_the_scale_rows_per_k_step_and_column_tile():
    pr = Workload.of(w4a16("npu2", 256, 1024, 512, zp=True))
    m, k, n, kmt = 32, 64, 32, 256
    e = estimate(pr, m, k, n, kmt)
    Mp, Kp, Np = (int(x) for x in e.padded)
    objects = (Mp // (m * 4)) * (Kp // k) * (Np // n)  # every B object, read once per block row
    assert float(e.traffic["B"].bytes) == objects * groupquant.object_bytes(k, n, 128, True)
    # the runs: one per column strip per block row, as int4 strips (the scale rows lengthen them)
    assert float(e.traffic["B"].runs) == (Mp // (m * 4)) * (Np // n)


@pytest.mark.parametrize("once", [True, False])
def test_dequant_is_charged_once_per_b_object(monkeypatch, once):
    pr = Workload.of(w4a16("npu2", 256, 1024, 512, convert_once=once))
    m, k, n, kmt = 32, 128, 64, 1024
    e = estimate(pr, m, k, n, kmt, rho=2)
    cycles = float(dequant_cost.object_cycles(pr.base.dev, k, n, 128, False, None, once))
    # aie2p, 64 values per vector either way (the emulated kernel's 8x8x8, a bfp16 tile), in one flat loop entered
    # once per object (PASS_STAGES 2: one trip to fill and drain), a trip two K block rows sharing their scales
    # (spec/rules/dequant.py): the bf16 pass's 6 vector-slot ops (two unpacks, the bias add, mul, msc, the rounding)
    # and half a grow_replicate, two blocks per trip; the bfp16 pass's 7 (the same and the transpose of x) and
    # half a grow_replicate and a transpose of the scales, four tiles per trip
    ops, trip = (8, 4) if once else (6.5, 2)
    assert cycles == k * n / 64 * ops + trip * ops
    assert float(e.extra["dequant_cycles_per_object"]) == cycles
    # a charge far above the k-step's transfers: each added cycle per object is one per k-step of every
    # output tile, not one per rho call (rho 2 here)
    times = []
    for charge in (1e5, 2e5):
        monkeypatch.setattr(dequant_cost, "object_cycles", lambda *args, c=charge: np.asarray(c))
        times.append(float(estimate(pr, m, k, n, kmt, rho=2).t_core))
    objects = float(e.groups) * int(e.padded[1]) // k
    assert math.isclose(times[1] - times[0], objects * 1e5 / 1.8e9, rel_tol=1e-9)


@pytest.mark.parametrize("once", [True, False])
def test_zero_points_cost_their_offsets_per_vector(once):
    """The kernel folds a zero point into the offset it subtracts ((136 + z) s): in the flat loop each vector
    loads its columns' zero points and makes their offsets (to_fixed, the bias add, spread over its lanes)."""
    dev = w4a16().dev
    with_z, without_z = (dequant_cost.ops_per_vector(dev, zp, None, once) for zp in (True, False))
    assert with_z == without_z + (2 if once else 1.5)  # per trip of two K rows: to_fixed, add, spread (and load)
    with_zp, without = (float(dequant_cost.object_cycles(dev, 128, 64, 32, zp, None, once)) for zp in (True, False))
    assert with_zp > without


@pytest.mark.parametrize("dev, once", [("npu1", False), ("npu2", False), ("npu2", True)])
def test_the_model_counts_the_kernels_operations(dev, once):
    """One count of the pass's operations: the kernel's (spec/rules/dequant.py), its loads and stores on their units."""
    d = dequant_ops(dev, False, to_bfp16=once)
    device = DEVICES[dev]
    assert dequant_cost.values_per_vector(device, None, once) == d.lanes
    assert dequant_cost.ops_per_vector(device, False, None, once) == d.ops - sum(
        n for name, n in d.per_vector if name.startswith(("load_v", "store_v", "push")))
    assert dequant_cost.vector_cycles(device, False, None, once) == max(
        d.vector_ops, d.loads / device.isa.load_units, d.out_bytes / device.isa.vst_bytes)


@pytest.mark.parametrize("once", [True, False])
def test_w4a16_runs_the_bf16_kernels_mmul_rate(once):
    """Its body is the bf16 kernel's: npu2's convert-once body (B's conversion its dequantization's, charged apart)
    or the emulated one."""
    c = w4a16("npu2", convert_once=once)
    bf = GemmConfig("npu2", 256, 512, 256, 32, 128, 32, 128, "bf16", "bf16", acc="f32", convert_once=once)
    p = load()
    ours = kernel_cycles(p, Workload.of(c).kernel_shape, 32, 128, 32)
    theirs = kernel_cycles(p, Workload.of(bf).kernel_shape, 32, 128, 32)
    assert float(ours) == float(theirs)
    ks = Workload.of(c).kernel_shape
    assert float(b_conversion_cycles(ks, 128, 32)) == 0.0  # no bf16 B to convert: the pass writes the tiles
    assert (float(b_conversion_cycles(Workload.of(bf).kernel_shape, 128, 32)) > 0) == once  # bf16 B: converted


def test_roof_counts_the_scale_rows():
    size = Problem(1, 4096, 4096)
    plain = call_bytes(size, "bf16", "i4", "bf16")
    assert call_bytes(size, "bf16", "i4", "bf16", 128) == plain + 32 * 4096 * 2
    assert call_bytes(size, "bf16", "i4", "bf16", 128, True) == plain + 2 * 32 * 4096 * 2
    assert call_bytes(Problem(1, 100, 8), "bf16", "i4", "bf16", 32) == 200 + 400 + 16 + 4 * 8 * 2  # ceil(100/32)


def test_predict_prints_the_uncalibrated_dequant_line_for_w4a16_only():
    d = predict(w4a16("npu2", 1, 4096, 4096, 16, 32, 256, 1024))
    text = predict_text(d)
    line = next(x for x in text.splitlines() if x.strip().startswith("dequant"))
    assert "PREDICTED, uncalibrated" in line and "into bfp16 tiles, 8 vector ops per 64 values" in line
    assert "B with its scales" in text
    assert d.to_json()["dequant"]["calibrated"] is False
    assert d.dram_roof is not None and d.dram_roof.bytes == call_bytes(Problem(1, 4096, 4096), "bf16", "i4", "bf16",
                                                                        128)
    plain = predict(GemmConfig("npu2", 256, 512, 256, 32, 128, 32, 128, "i8", "i8", dtype_b="i4"))
    assert "dequant" not in predict_text(plain) and "dequant" not in plain.to_json()


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(["npu1", "npu2"]), st.sampled_from(groupquant.GROUP_SIZES), st.booleans(),
       st.sampled_from([1, 8, 256]))
def test_decode_mapping_weighs_w4a16_as_int4(dev, g, zp, M):
    """The decode mapping (one core row) prices W4A16 as any int4 B: B read once, same charge per object."""
    base = w4a16(dev, M, 2048, 2048, g=g, zp=zp)
    for rows in (0, 1):
        pr = Workload.of(base.with_(rows=rows))
        _, k, _, _, _, t, _, evaluated = rank_all(pr, Pins(), 3, load())
        assert evaluated > 0 and np.all(np.isfinite(t))
        assert np.all((k % g == 0) | (g % k == 0))


def test_the_figures_script_prices_w4a16_with_its_dequant_and_roof():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "w4a16_figures.py"
    spec = importlib.util.spec_from_file_location("w4a16_figures", path)
    assert spec is not None and spec.loader is not None
    fig = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fig)
    line = fig.best("npu2", (1, 1024, 1024), "W4A16", 128, False)
    roof_us = call_bytes(Problem(1, 1024, 1024), "bf16", "i4", "bf16", 128) / (load().dram["npu2"].peak_gbps * 1e3)
    assert f"of {roof_us:,.1f} us" in line and "dequant" in line
    assert "dequant" not in fig.best("npu2", (1, 1024, 1024), "i8 x i4 -> i32", 128, False)


def test_the_dequant_charge_follows_the_configs_mmul():
    """npu2 without bfp16 emulation on 4x8x4: the pass runs 32-lane vectors (spec/rules/dequant.py), so the charge per
    value doubles against the default 8x8x8's 64 lanes (a review found the default's lanes priced for any mmul)."""
    dev = w4a16("npu2").dev
    wide = float(dequant_cost.object_cycles(dev, 128, 64, 64, False))
    narrow = float(dequant_cost.object_cycles(dev, 128, 64, 64, False, (4, 8, 4)))
    assert dequant_cost.values_per_vector(dev, (4, 8, 4)) == 32 and narrow > 1.9 * wide
    c = GemmConfig("npu2", 64, 1024, 512, 32, 128, 32, 128, "bf16", "bf16", dtype_b="i4", group_size=64,
                   emulate_bf16_with_bfp16=False, mmul_shape=(4, 8, 4))
    assert "into bf16, 6.75 vector ops per 32 values" in predict_text(predict(c))


def test_a_pinned_loop_nest_with_no_room_for_the_pass_is_refused_by_the_checks():
    """Before anything is built (plan, predict, simulate), not only when the kernel renders. (chess: Peano refuses
    this jk-flat earlier, for its pipeliner: tests/spec/test_kernel_variant.py)"""
    from gemm_gen.spec.checks import check_config

    c = GemmConfig("npu2", 64, 1024, 512, 32, 64, 64, 64, "bf16", "bf16", dtype_b="i4", group_size=64,
                   kernel_loops="jk-flat", compiler="chess", convert_once=False)
    with pytest.raises(ConfigError, match=r"dequantization pass \(about \d+ B of code\) exceed their 8192 B"):
        check_config(c)
    check_config(c.with_(kernel_loops=None))  # the automatic loops leave it room


@pytest.mark.parametrize("once", [True, False])
def test_a_trip_of_one_k_row_pays_its_scale_work_alone(once):
    """A trip of the pass spans rules.dequant.trip_rows K block rows of one group, which share the scales it loads
    and spreads: an 8-row object (one block row) pays that work per row, as the kernel renders it."""
    dev = DEVICES["npu2"]
    assert [int(dequant_cost.pass_rows(dev, k, 32, None, once)) for k in (8, 16, 256)] == [1, 2, 2]
    one, two = (dequant_cost.ops_per_vector(dev, False, None, once, rows) for rows in (1, 2))
    assert one - two == (1 if once else 0.5)  # the spread's half (grow_replicate, and transpose for bfp16 tiles)
    per_row = [float(dequant_cost.object_cycles(dev, k, 64, 32, False, None, once)) / k for k in (8, 16)]
    assert per_row[0] > per_row[1]
