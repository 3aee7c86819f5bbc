"""The split decode placement (issue 34 item 4, gemm_gen/spec/rules/decode_split.py): every core its own slice of N, B
over every shim MM2S channel but A's. Checked here: the placement's rule (every virtual column on one stream, in N
order; the channels each memtile needs, and a placement that needs a seventh refused, by the rule and by the
IRON 1.4.3 stand-in); designs simulated bit-exact on npu1 and npu2 with tails, for bf16 (B in strips, row-major
and column-major tiles), i8, int4 and W4A16 weights and bfp16 B; the model's busiest-channel term priced from
what the design's tasks move; the search weighing it for decode calls."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gemm_gen import search
from gemm_gen.backends.iron import lower
from gemm_gen.design import build_design
from gemm_gen.design.grid import grid
from gemm_gen.facts.devices import DEVICES, TileKind
from gemm_gen.facts.dtypes import dtype
from gemm_gen.facts.errors import ConfigError
from gemm_gen.model.params import load
from gemm_gen.model.perf import Workload, estimate, shim_stream_rates
from gemm_gen.model.predict import predict
from gemm_gen.model.traffic import analytic_traffic, design_traffic
from gemm_gen.sim import simulate
from gemm_gen.spec.checks import check_config
from gemm_gen.spec.config import GemmConfig
from gemm_gen.spec.request import Options, Problem, Request
from gemm_gen.spec.rules import array, decode_split

from .. import iron_recorder

NPU1, NPU2 = DEVICES["npu1"], DEVICES["npu2"]


def split(dev: str, M: int, K: int, N: int, m: int, k: int, n: int, k_mt: int, a: str = "bf16", out: str = "bf16",
          **kw: object) -> GemmConfig:
    d = DEVICES[dev]
    return GemmConfig(dev, M, K, N, m, k, n, k_mt, a, out, rows=1, cols=decode_split.virtual_columns(d), **kw)


# ---- the rule ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dev", [NPU1, NPU2], ids=lambda d: d.name)
def test_streams_cover_every_core_once_in_n_order(dev) -> None:
    streams = decode_split.streams(dev)
    cores = decode_split.virtual_columns(dev)
    assert [v for s in streams for v in s.columns] == list(range(cores))
    per_shim = {col: sum(s.shim == col for s in streams) for col in range(dev.columns)}
    mm2s = dev.dma[TileKind.SHIM].mm2s_channels
    assert per_shim == {col: mm2s - (col == decode_split.A_COL) for col in range(dev.columns)}
    # the fewest cores the busiest channel can carry: whole cores over the channels A leaves
    assert max(s.count for s in streams) == -(-cores // len(streams)) == 3
    assert decode_split.b_channel_share(dev) == 3 / cores
    assert decode_split.tasks_per_group(dev) == 1 + len(streams) + dev.columns == 3 * dev.columns
    # a stream carries cores of its own column, but the A column's last core: the next column's first stream
    crossing = [(s.shim, v) for s in streams for v in s.columns if decode_split.column_of(dev, v) != s.shim]
    assert crossing == [(1, dev.core_rows - 1)]


@pytest.mark.parametrize("dev", [NPU1, NPU2], ids=lambda d: d.name)
def test_every_memtile_has_the_channels_the_placement_needs(dev) -> None:
    spec = dev.dma[TileKind.MEM]
    used = decode_split.memtile_channels(dev)
    assert decode_split.channel_problem(dev) is None
    assert used[1] == (spec.s2mm_channels, spec.mm2s_channels)  # two B in, four C in; splits of 3 and 2, C out
    assert all(s2mm == spec.s2mm_channels for s2mm, _ in used.values())


def _seven_outputs(dev):
    """A placement whose second memtile splits to 4 + 2 cores and sends C: 7 MM2S channels."""
    out, first = [decode_split.Stream(0, 0, 3), decode_split.Stream(1, 3, 4), decode_split.Stream(1, 7, 2)], 9
    for col in range(2, dev.columns):
        for _ in range(2):
            count = min(2, decode_split.virtual_columns(dev) - first)
            out.append(decode_split.Stream(col, first, count))
            first += count
    return tuple(s for s in out if s.count)


def test_a_placement_past_a_memtiles_channels_is_refused(monkeypatch) -> None:
    placed = _seven_outputs(NPU2)
    assert [v for s in placed for v in s.columns] == list(range(32))
    assert "needs 6 S2MM and 7 MM2S channels on memtile 1, which has 6 and 6" in decode_split.channel_problem(
        NPU2, placed)
    monkeypatch.setattr(decode_split, "streams", lambda dev: placed)
    with pytest.raises(ConfigError, match="7 MM2S channels on memtile 1"):
        check_config(split("npu2", 1, 256, 1024, 16, 32, 16, 64, b_pack="strips"))


def test_the_iron_stand_in_refuses_a_seventh_memtile_channel(monkeypatch) -> None:
    """With our own rule switched off, the placement above reaches the IRON 1.4.3 stand-in, which refuses it as
    aiecc's fifo channel analysis would (tests/iron_recorder.py _verify_fifo_channels); the real one lowers."""
    c = split("npu2", 1, 256, 1024, 16, 32, 16, 64, b_pack="strips")
    fresh, _ = iron_recorder.api()
    lower(build_design(c), fresh).resolve_program()
    monkeypatch.setattr(decode_split, "streams", lambda dev: _seven_outputs(NPU2))
    monkeypatch.setattr(decode_split, "channel_problem", lambda dev, placed=None: None)
    fresh, _ = iron_recorder.api()
    with pytest.raises(ValueError, match="number of output DMA channel exceeded"):
        lower(build_design(c), fresh).resolve_program()


def test_the_mapping_names_its_grid() -> None:
    assert array.mapping_rows(NPU2, "decode-split") == 1 and array.mapping_cols(NPU2, "decode-split") == 32
    assert array.mapping_of(NPU2, 1, 32) == "decode-split" and array.mapping_of(NPU2, 1, 8) == "decode"
    assert array.columns_ok(NPU2, 32, 1) and not array.columns_ok(NPU2, 32, 4) and not array.columns_ok(NPU2, 16, 1)
    assert NPU2.target(32) == NPU2.target(8)


@pytest.mark.parametrize("change, message", [
    (dict(a_col_maj=True), "takes row-major A and C"),
    (dict(c_col_maj=True), "takes row-major A and C"),
    (dict(b_pack="strips", b_col_maj=True), "strips of a scalar B takes a row-major B"),
])
def test_what_the_placement_refuses(change, message) -> None:
    with pytest.raises(ConfigError, match=message):
        check_config(split("npu2", 1, 256, 1024, 16, 32, 16, 64, **change))


def test_scalar_strips_belong_to_the_split_placement() -> None:
    with pytest.raises(ConfigError, match="--mapping decode-split"):
        check_config(GemmConfig("npu2", 1, 256, 1024, 16, 32, 16, 64, "bf16", "bf16", rows=1, b_pack="strips"))
    c = check_config(split("npu2", 1, 256, 1024, 16, 32, 16, 64, b_pack="strips"))
    assert [x.operand for x in c.call.copies] == ["B"] and "packed in strips" in c.call.copies[0].why


def _case_id(c: GemmConfig) -> str:
    return (f"{c.dev.name}-{c.size}-{c.types.precision.name}-{c.layout.b_pack}"
            f"{'-bcol' if c.layout.b_col_maj else ''}")


# ---- the design, simulated ---------------------------------------------------------------------------------------
CASES = [
    split("npu2", 1, 256, 1024, 16, 32, 16, 64, b_pack="strips"),
    split("npu2", 7, 250, 1000, 16, 32, 16, 64, b_pack="strips"),  # tails in M, K and N
    split("npu2", 5, 250, 1000, 16, 32, 16, 64),  # B row-major tiles, tails
    split("npu2", 1, 256, 1024, 16, 32, 16, 64, b_col_maj=True),
    split("npu2", 3, 256, 2048, 16, 64, 32, 128, "i8", "i8", b_pack="strips"),
    split("npu2", 1, 256, 4096, 16, 32, 32, 64, "i8", "i32", b_col_maj=True, task_span=0),  # 4 groups, one span
    split("npu2", 1, 256, 2048, 16, 32, 32, 64, "i8", "i32", dtype_b="i4", b_pack="strips"),
    split("npu2", 1, 256, 1024, 16, 64, 16, 64, dtype_b="i4", group_size=64),  # W4A16
    split("npu2", 1, 256, 1024, 16, 32, 16, 64, "bfp16", "bfp16", dtype_b="bfp16", b_pack="strips"),
    split("npu1", 3, 256, 700, 16, 32, 16, 64, b_pack="strips"),
    split("npu1", 2, 512, 512, 8, 64, 16, 128, "i8", "i16"),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: _case_id(c))
def test_split_designs_simulate_exactly(c: GemmConfig) -> None:
    r = simulate(c)
    assert r.passed and r.mismatches == 0 and r.elements == c.size.M * c.size.N
    # every B byte crossed a shim once, and the busiest channel is the one carrying three cores
    d = build_design(c)
    per_channel = _channel_bytes(d)
    b_channels = [v for (fifo, _), v in per_channel.items() if fifo.startswith("B")]
    assert len(b_channels) == len(decode_split.streams(c.dev))
    assert max(b_channels) == pytest.approx(sum(b_channels) * decode_split.b_channel_share(c.dev), rel=0.01)


def _channel_bytes(d) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for op in d.runtime:
        if op.task is not None:
            t = d.tensor(op.task.tensor)
            key = (op.task.fifo, str(op.task.shim))
            out[key] = out.get(key, 0.0) + dtype(t.dtype).unit_nbytes(op.task.tap.count)
    return out


@pytest.mark.parametrize("c", [CASES[0], CASES[9], CASES[6]], ids=lambda c: f"{c.dev.name}-{c.types.precision.name}")
def test_split_designs_lower_through_the_iron_stand_in(c: GemmConfig) -> None:
    fresh, rec = iron_recorder.api()
    text = str(lower(build_design(c), fresh).resolve_program())
    assert text
    # the cross-column stream: the A column's last core takes its B from the next column's memtile
    link = next(x for x in rec.links if x["kind"] == "split" and "B_L3L2_1" in str(x))
    assert link is not None


# ---- the model -----------------------------------------------------------------------------------------------------
def test_the_model_prices_the_busiest_channel_the_design_has() -> None:
    """The stream bound is the busiest channel's bytes (the design's own: three cores' B) at one stream's rate."""
    c = check_config(split("npu2", 1, 4096, 4096, 16, 64, 128, 1024, b_pack="strips"))
    d = build_design(c)
    p = load()
    busiest = max(_channel_bytes(d).values())
    t = c.tiling
    e = estimate(Workload.of(c), t.m, t.k, t.n, t.k_mt, p, design_traffic(d), rho=t.rho)
    _, flight = shim_stream_rates(p, c.dev)
    assert float(e.t_stream) == pytest.approx(busiest / flight, rel=1e-9)
    assert busiest == pytest.approx(3 / 32 * 4096 * 4096 * 2)


@pytest.mark.parametrize("c", CASES, ids=lambda c: _case_id(c))
def test_the_closed_form_traffic_is_the_designs(c: GemmConfig) -> None:
    """The tuner's closed form counts the bytes, runs and side-by-side runs the design's walks make: strips read k
    rows at a time, each core's piece in turn; no two streams (2 or 3 cores each) nor C columns side by side. (The
    search ranks the placements by it: an optimistic count picked designs the design's own count priced 3x slower.)"""
    got = design_traffic(build_design(c))
    Mp, Kp, Np = (np.array(x) for x in c.call.covered)
    t, ty = c.tiling, c.types
    want = analytic_traffic(c.array.rows, c.array.cols, (ty.t_in, ty.t_b, ty.t_out), c.layout.b_col_maj,
                            np.array(t.m), np.array(t.k_mt), np.array(t.n), Mp, Kp, Np,
                            "strips" if c.groups.group_size else c.layout.b_pack,
                            tuple(np.array(c.call.ld(x)) for x in "ABC"), split_k=t.k,
                            b_object_scale=grid(c, "B").b_l1_units * 4 / (t.k * t.n * ty.t_b.elem_bytes)
                            if c.groups.group_size else 1.0)
    for name in ("A", "B", "C"):
        assert float(got[name].bytes) == pytest.approx(float(want[name].bytes)), name
        assert float(got[name].runs) == pytest.approx(float(want[name].runs)), name
        assert float(got[name].merged_runs) == pytest.approx(float(want[name].merged_runs)), name


def test_the_search_weighs_the_split_placement_for_decode_calls() -> None:
    """For a decode call with the mapping open, the search prices the whole array, the decode mapping and the
    split placement and keeps the fastest predicted; each is a valid design."""
    p = load()
    req = Request(Options("npu2", "bf16", "bf16"), Problem(1, 4096, 4096))
    chosen = search.choose(req, p).config
    times = {}
    for rows, cols in ((4, 8), (1, 8), (1, 32)):
        pinned = Request(replace(req.options, rows=rows, cols=cols), req.problem)
        config = search.choose(pinned, p).config
        times[array.mapping_of(config.dev, config.array.rows, config.array.cols)] = predict(config, p).time_s
    assert array.mapping_of(chosen.dev, chosen.array.rows, chosen.array.cols) == min(times, key=lambda k: times[k])
    assert predict(chosen, p).time_s == min(times.values())


def test_the_grid_is_one_row_of_virtual_columns() -> None:
    c = check_config(split("npu2", 1, 4096, 4096, 16, 64, 128, 1024, b_pack="strips"))
    gb = grid(c, "B")
    assert (gb.rows, gb.cols, c.call.Np) == (1, 32, 4096) and c.call.n_blocks == 1
    d = build_design(c)
    tiles = {(w.tile.col, w.tile.row) for w in d.workers}
    assert len(tiles) == 32 and tiles == {(col, row) for col in range(8) for row in range(2, 6)}
