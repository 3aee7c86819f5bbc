"""Decode-shaped calls (issue 22, items 2 and 3): the DRAM roof the model reports for every call, and
the decode mapping (one core row: m covers the padded M, each column a slice of N, B read once),
simulated bit-exact, lowered to IRON, weighed by the search against the whole array."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gemm_gen.app.cli import main
from gemm_gen.backends.iron import lower
from gemm_gen.backends.txn import TxnFieldError, encode_call, shim_bd
from gemm_gen.design import build_design
from gemm_gen.design.tap import Tap
from gemm_gen.facts.devices import TileKind, device
from gemm_gen.facts.errors import ConfigError, DmaLimitError
from gemm_gen.model.params import load
from gemm_gen.model.predict import predict
from gemm_gen.model.roof import call_bytes, dram_roof
from gemm_gen.model.traffic import design_traffic
from gemm_gen.search import choose
from gemm_gen.search.knobs import decode_weighed
from gemm_gen.sim.run import simulate
from gemm_gen.spec.checks import check_config
from gemm_gen.spec.config import GemmConfig
from gemm_gen.spec.request import MAPPINGS, Options, Pins, Problem, Request
from gemm_gen.spec.rules import array

from .. import iron_recorder
from ..design.test_properties import _design, small_configs
from ..random_designs import record_config


def decode(dev: str, dtype_in: str, dtype_out: str, M: int, K: int, N: int, b_col_maj: bool = False,
           **kw: object) -> GemmConfig:
    """A decode-mapped config with the smallest tiles the kernel allows (m covers M <= 16)."""
    d = device(dev)
    emulate = kw.get("emulate_bf16_with_bfp16")
    dtype_b = kw.get("dtype_b")
    r, s, t = d.mmul_shape(dtype_in, bool(emulate) if emulate is not None else dtype_in == "bf16" and dev == "npu2",
                           dtype_b=str(dtype_b) if dtype_b else None)
    m = max(2 * r, -(-M // (2 * r)) * 2 * r)
    k, n = 2 * s, 2 * t
    return GemmConfig(dev, M, K, N, m, k, n, 2 * k, dtype_in, dtype_out, b_col_maj, rows=1, **kw)


# ---- the DRAM roof -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype_in,dtype_out,each", [("bf16", "bf16", (2, 2, 2)), ("i8", "i32", (1, 1, 4)),
                                                    ("i8", "i8", (1, 1, 1))])
def test_roof_is_the_unpadded_bytes_over_the_models_dram_peak(dtype_in, dtype_out, each):
    size = Problem(3, 4096, 1000)
    roof = dram_roof("npu2", size, dtype_in, dtype_in, dtype_out)
    a, b, c = each
    assert roof.bytes == 3 * 4096 * a + 4096 * 1000 * b + 3 * 1000 * c  # no padding, each operand once
    peak = load().dram["npu2"].peak_gbps  # the model's one DRAM rate, not a second constant
    assert roof.gbps == peak and roof.time_s == pytest.approx(roof.bytes / (peak * 1e9), rel=1e-12)
    faster = dram_roof("npu2", size, dtype_in, dtype_in, dtype_out, load().with_dram("npu2", peak_gbps=2 * peak))
    assert faster.time_s == pytest.approx(roof.time_s / 2, rel=1e-12)
    assert roof.fraction(2 * roof.time_s) == pytest.approx(0.5)


def test_bfp16_bytes_count_the_shared_exponents():
    expected = 8 * 64 * 1.125 + 64 * 64 * 1.125 + 8 * 64 * 2
    assert call_bytes(Problem(8, 64, 64), "bfp16", "bfp16", "bf16") == int(expected)


def test_prediction_carries_the_roof_of_its_own_call():
    c = decode("npu2", "i8", "i32", 1, 512, 1024)
    p = predict(c)
    assert p.dram_roof is not None and p.roof_fraction is not None
    assert p.dram_roof.bytes == 512 + 512 * 1024 + 4 * 1024
    assert p.roof_fraction == pytest.approx(p.dram_roof.time_s / p.time_s)
    assert 0 < p.roof_fraction < 1  # dispatch alone keeps every call below its roof
    j = p.to_json()["dram_roof"]
    assert j["predicted"] is True and j["fraction"] == p.roof_fraction and j["bytes"] == p.dram_roof.bytes


def test_predict_prints_the_share_of_the_roof_for_every_call(capsys):
    for size in (["-M", "1", "-K", "1024", "-N", "1024"], ["-M", "256", "-K", "256", "-N", "256"]):
        assert main(["predict", "--dev", "npu2", *size, "--dtype_in", "i8"]) == 0
        line = next(x for x in capsys.readouterr().out.splitlines() if "DRAM roof" in x)
        assert "PREDICTED" in line and "% of DRAM roof" in line and "/ 65 GB/s" in line
    assert main(["predict", "--dev", "npu2", "-M", "1", "-K", "1024", "-N", "1024", "--dram-gbps", "20",
                 "--json"]) == 0
    roof = json.loads(capsys.readouterr().out)["dram_roof"]
    assert roof["gbps"] == 20 and roof["machine"] == "--dram-gbps"
    assert roof["time_us"] == pytest.approx(roof["bytes"] / 20e3)


def test_roofline_marks_decode_calls(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    args = ["roofline", "--dev", "npu2", "-K", "1024", "-N", "1024", "--out-dir", str(tmp_path), "--max-size",
            "1024", "--points", "30", "--json"]
    assert main([*args, "-M", "1", "--mapping", "decode"]) == 0
    info = json.loads(capsys.readouterr().out)["roofline"]
    assert info["decode_points"] > 0 and Path(info["path"]).exists()
    assert info["call"]["decode"] is True and info["call"]["tops"] > 0
    assert main([*args, "-M", "256", "--mapping", "whole-array"]) == 0  # native M 64: no call is decode shaped
    info = json.loads(capsys.readouterr().out)["roofline"]
    assert info["decode_points"] == 0 and info["call"]["decode"] is False


# ---- the mapping --------------------------------------------------------------------------------
def test_mapping_rules():
    npu2 = device("npu2")
    assert array.rows_ok(npu2, 1) and array.rows_ok(npu2, 4)
    assert not array.rows_ok(npu2, 2) and not array.rows_ok(npu2, 3)
    assert [array.mapping_rows(npu2, m) for m in MAPPINGS] == [4, 1, 1]  # whole-array, decode, decode-split
    assert array.mapping_of(npu2, 1) == "decode" and array.mapping_of(npu2, 4) == "whole-array"
    assert array.decode_call(16) and not array.decode_call(17)
    assert list(array.decode_call(np.array([1, 16, 17]))) == [True, True, False]


def test_two_core_rows_are_refused_in_one_line():
    with pytest.raises(ConfigError) as e:
        check_config(decode("npu2", "i8", "i32", 1, 256, 1024).with_(rows=2))
    assert "rows=2" in str(e.value) and "rows=1" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_one_core_row_each_column_a_slice_of_n_and_b_read_once(dev):
    c = decode(dev, "i8", "i32", 3, 256, 2 * device(dev).columns * 32)
    d = build_design(c)
    rows = {w.tile.row for w in d.workers}
    assert rows == {device(dev).first_core_row} and len(d.workers) == device(dev).columns
    traffic = design_traffic(d)
    assert float(traffic["B"].bytes) == c.size.K * c.size.N  # every weight crosses DRAM once
    blocks_n = c.size.N // (c.tiling.n * c.array.cols)
    assert float(traffic["A"].bytes) == c.tiling.m * c.size.K * blocks_n  # A, tiny, once per N block
    # the whole array pads M to 4 m and reads B once as well, but runs 4x the junk rows on 4x the cores
    whole = build_design(c.with_(rows=0))
    assert len(whole.workers) == 4 * len(d.workers) and whole.config.call.Mp == 4 * c.call.Mp


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("dtype_in,dtype_out", [("bf16", "bf16"), ("i8", "i32"), ("i8", "i8")])
@pytest.mark.parametrize("M", [1, 3, 16])
def test_decode_simulates_bit_exact(dev, dtype_in, dtype_out, M):
    cols = device(dev).columns
    c = decode(dev, dtype_in, dtype_out, M, 96 if dtype_in == "i8" else 64, 2 * cols * 16 + 8)
    r = simulate(c)
    assert r.passed and r.mismatches == 0
    if dtype_in == "i8" and dtype_out == "i32":  # exact: equal to the int64 product
        assert r.accuracy.max_abs == 0


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("dtype_out", ["i32", "i8"])
@pytest.mark.parametrize("M", [1, 3, 16])
def test_decode_with_int4_weights_simulates_exactly(dev, dtype_out, M):
    """int8 activations x int4 weights (W4A8) in one core row: M padded to the mmul's r, B read once
    at half a byte per weight, C equal to the simulator's reference and (i32) to the int64 product."""
    cols = device(dev).columns
    c = decode(dev, "i8", dtype_out, M, 96, 2 * cols * 32 + 16, dtype_b="i4")
    assert c.tiling.m % c.kernel.mmul[0] == 0 and c.tiling.m >= M
    d = build_design(c)
    assert float(design_traffic(d)["B"].bytes) == c.call.k_walk * c.call.Np / 2  # once, 2 per byte
    r = simulate(d, seed=M)
    assert r.passed and r.mismatches == 0
    if dtype_out == "i32":
        assert r.accuracy.max_abs == 0 and r.accuracy.lossless


def test_decode_lowers_to_iron_without_a_refusal():
    for c in (decode("npu2", "bf16", "bf16", 1, 128, 512), decode("npu1", "i8", "i16", 5, 128, 256, True)):
        fresh, rec = iron_recorder.api()
        d = build_design(c)
        str(lower(d, fresh).resolve_program())  # the recorder raises on any call 1.4.3 would reject
        assert sorted(f.name for f in rec.fifos) == sorted(f.name for f in d.fifos)
        assert len(rec.workers) == c.array.cols  # one core row


# ---- BD limits at LM-head sizes ---------------------------------------------------------------
def test_lm_head_decode_fits_every_shim_bd_field_without_repeats():
    """1 x 2048 x 128256 (a Llama-3 LM head): every task of the call encodes (wraps, strides,
    iteration, the queue's repeat count <= 255) and none relies on a repeat."""
    c = choose(Request(Options("npu2", "bf16", "bf16", rows=1), Problem(1, 2048, 128256), Pins())).config
    d = build_design(c)
    stream = encode_call(d, c.call)
    assert stream.size > 0
    assert all(t.tap.sizes[0] == 1 or len(t.tap.sizes) < 4 for t in d.tasks)


def test_a_repeat_past_the_queue_field_is_refused():
    shim_bd(0, (256, 1, 1, 64), (0, 0, 0, 1), 32, 3)  # 256 runs: repeat_count 255, the field's top
    with pytest.raises(TxnFieldError, match=r"queue repeat count.*255"):
        shim_bd(0, (257, 1, 1, 64), (0, 0, 0, 1), 32, 3)
    assert device("npu2").dma[TileKind.SHIM].max_repeat == 256


def test_lm_head_a_replays_are_tasks_not_a_repeat_past_the_limit():
    """mlir-aie's matrix_vector and mlir-air's GEMV replay the vector once per row tile with a
    stride-0 dimension. At an LM head's N that replay count passes the 256 runs one pushed task may
    make: the decode design issues one A task per N block instead, and the folded walk is refused."""
    c = decode("npu2", "i8", "i32", 1, 2048, 128256)  # n = 16: 1002 blocks of 8 x 16 columns
    d = build_design(c)
    blocks = c.call.n_blocks
    assert blocks > device("npu2").dma[TileKind.SHIM].max_repeat
    assert sum(t.tensor == "A" for t in d.tasks) == blocks
    a = next(t.tap for t in d.tasks if t.tensor == "A")
    folded = Tap(a.offset, (blocks, *a.sizes), (0, *a.strides))  # stride 0: a repeat of the whole walk
    assert len(a.sizes) == 3
    shim = device("npu2").dma[TileKind.SHIM]
    with pytest.raises(DmaLimitError, match=r"repeat \d+ exceeds the shim repeat count \(max 256\)"):
        folded.to_words(c.types.t_in).check(shim, "shim MM2S A", "one task per block")
    Tap(a.offset, (256, *a.sizes), (0, *a.strides)).to_words(c.types.t_in).check(shim, "shim MM2S A", "")  # the top


# ---- the search ---------------------------------------------------------------------------------
def _request(dev: str, dtype_in: str, M: int, K: int, N: int, rows: int = 0, **pins: object) -> Request:
    served = "mn" if pins.get("sizes") else "fixed"
    return Request(Options(dev, dtype_in, rows=rows, runtime_sizes=served), Problem(M, K, N),
                   Pins(**pins))  # type: ignore[arg-type]


@pytest.mark.parametrize("dtype_in", ["bf16", "i8"])
def test_search_takes_the_decode_mapping_when_the_model_says_it_is_faster(dtype_in):
    got = choose(_request("npu2", dtype_in, 1, 2048, 2048))
    whole = choose(_request("npu2", dtype_in, 1, 2048, 2048, rows=4)).config
    dec = choose(_request("npu2", dtype_in, 1, 2048, 2048, rows=1)).config
    req = _request("npu2", dtype_in, 1, 2048, 2048)  # the split decode placement (issue 34 item 4)
    spl = choose(replace(req, options=replace(req.options, rows=1, cols=32))).config
    t_whole, t_dec, t_split = predict(whole).time_s, predict(dec).time_s, predict(spl).time_s
    assert got.config == min((whole, dec, spl), key=lambda c: predict(c).time_s)
    assert "mapping" in got.filled
    assert t_dec < t_whole  # today's model: fewer BD tasks, no junk core rows
    assert t_split < t_dec  # and B over 15 shim streams, every core its own slice of N


def test_search_keeps_the_whole_array_for_large_m_and_a_given_mapping():
    assert not decode_weighed(GemmConfig("npu2", 17, 512, 512, 0, 0, 0, 0), Pins())
    assert choose(_request("npu2", "i8", 1024, 1024, 1024)).config.array.rows == 4
    assert choose(_request("npu2", "i8", 1, 2048, 2048, rows=4)).config.array.rows == 4
    assert "mapping" not in choose(_request("npu2", "i8", 1, 2048, 2048, rows=4)).filled


def test_one_xclbin_for_sizes_with_decode_steps_weighs_both_mappings():
    sizes = (Problem(1, 1024, 2048), Problem(16, 1024, 2048))
    pins = dict(sizes=sizes, weights=(1.0, 1.0))
    got = choose(_request("npu2", "i8", 16, 1024, 2048, **pins)).config
    each = [choose(_request("npu2", "i8", 16, 1024, 2048, rows=rows, **pins)).config for rows in (4, 1)]

    def weighted(c: GemmConfig) -> float:
        from gemm_gen.model.perf import estimate_config
        return sum(float(estimate_config(c, call=s).time) for s in sizes)

    assert got == min(each, key=weighted)


def test_cli_mapping_flag_round_trips(capsys):
    assert main(["plan", "--dev", "npu2", "-M", "2", "-K", "256", "-N", "1024", "--dtype_in", "i8",
                 "--mapping", "decode", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mapping"] == "decode" and out["array"] == [1, 8]
    from gemm_gen.app.cliargs import config_args
    c = choose(_request("npu2", "i8", 2, 256, 1024, rows=1)).config
    args = config_args(c)
    assert args[args.index("--mapping") + 1] == "decode"
    assert "--mapping" not in config_args(c.with_(rows=0))


# ---- the issue's sizes (slow: the full 1 x 4096 x 4096 call through the simulator) ---------------
@pytest.mark.slow
@pytest.mark.parametrize("dev,dtype_in,dtype_out", [("npu2", "bf16", "bf16"), ("npu2", "i8", "i32"),
                                                    ("npu1", "bf16", "bf16"), ("npu1", "i8", "i32")])
def test_issue_size_simulates(dev, dtype_in, dtype_out):
    c = choose(_request(dev, dtype_in, 1, 4096, 4096, rows=1)).config
    r = simulate(c)
    assert r.passed and c.array.rows == 1
    assert float(design_traffic(build_design(c))["B"].bytes) == 4096 * 4096 * (2 if dtype_in == "bf16" else 1)


@pytest.mark.slow
@pytest.mark.parametrize("dev", ["npu2", "npu1"])
def test_issue_size_with_int4_weights_simulates_exactly(dev):
    """1 x 4096 x 4096 i8 x i4 -> i32 (W4A8 decode), the design the search picks: bit-exact against the
    reference and equal to the int64 product; B (8 MiB of packed weights) crosses DRAM once."""
    req = Request(Options(dev, "i8", "i32", dtype_b="i4"), Problem(1, 4096, 4096), Pins())
    c = choose(req).config
    assert c.array.rows == 1 and c.types.dtype_b == "i4"  # the model's faster mapping for M = 1
    d = build_design(c)
    assert float(design_traffic(d)["B"].bytes) == 4096 * 4096 / 2
    r = simulate(d)
    assert r.passed and r.mismatches == 0 and r.accuracy.max_abs == 0 and r.accuracy.lossless


def test_operator_serves_a_decode_call_through_the_decode_mapping():
    from gemm_gen import Gemm

    g = Gemm(device="npu2", dtype_in="i8", dtype_out="i32")
    rng = np.random.default_rng(22)
    a = rng.integers(-128, 128, (1, 512), dtype=np.int8)
    b = rng.integers(-128, 128, (512, 1024), dtype=np.int8)
    assert np.array_equal(g.simulate(a, b), a.astype(np.int64) @ b.astype(np.int64))  # the exact product
    assert g.design(1, 512, 1024).config.array.rows == 1  # the model's faster mapping for M = 1
    assert g.design(64, 512, 1024).config.array.rows == 4


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_configs(), st.integers(1, array.DECODE_M_MAX), st.integers(0, 2**16))
def test_random_decode_designs_match_the_reference(c, M, seed):
    """Every device, type pair, layout, rho and column count of the property tests, in one core row."""
    c = c.with_(rows=1, M=min(M, c.tiling.m))
    r = simulate(_design(c), seed=seed)
    assert r.passed, (c, r.first_mismatch)
    assert r.kernel.tiles_done == c.array.cols * c.call.tiles_per_core
    record_config(c)


def test_tune_lists_both_mappings_for_a_decode_call(capsys):
    args = ["tune", "--dev", "npu2", "-K", "1024", "-N", "1024", "--dtype_in", "i8", "--top", "40", "--json"]
    assert main([*args, "-M", "1"]) == 0
    top = json.loads(capsys.readouterr().out)["top"]
    times = [c["predicted_time_us"] for c in top]
    assert times == sorted(times) and top[0]["mapping"] == "decode"  # both ranked, by predicted time
    assert main([*args, "-M", "1", "--mapping", "whole-array"]) == 0
    whole = json.loads(capsys.readouterr().out)["top"]
    assert "mapping" not in whole[0] and whole[0]["predicted_time_us"] > times[0]
    assert sum(c["mapping"] == "decode" for c in top) == sum(t < whole[0]["predicted_time_us"] for t in times)
    assert main([*args, "-M", "64"]) == 0
    assert all("mapping" not in c for c in json.loads(capsys.readouterr().out)["top"])
    assert main([*args[:-1], "-M", "1", "--top", "3"]) == 0
    assert "mapping" in capsys.readouterr().out.splitlines()[1]
