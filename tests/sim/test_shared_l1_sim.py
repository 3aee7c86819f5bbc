"""Neighbour-shared L1 in the literal simulator (issue 34 item 2 step 3; docs/shared_l1.md 3.2-3.4): the shared
operand's buffers on their holders, filled by the holder's own S2MM (acquire empty by the reader count, release
full), the leader acquiring full and releasing relay, the follower acquiring relay, both releasing empty; the
memtile streaming B's pings and pongs on two channels (split) or A's objects to the west holders. Every run is
compared with the exact product and with the same design unshared, cell for cell; each protocol that races or
stalls is caught."""

from __future__ import annotations

import numpy as np
import pytest

from gemm_gen.design import build_design
from gemm_gen.design import host_buffers as hostdata
from gemm_gen.design.ir import Design
from gemm_gen.facts.errors import ConfigError, DeadlockError, SimulationError
from gemm_gen.facts.inputs import make_inputs
from gemm_gen.sim import lower as sim_lower
from gemm_gen.sim import simulate
from gemm_gen.sim.machine import Bd, Lock, SharedSlot
from gemm_gen.sim.run import ArraySession
from gemm_gen.spec.checks import check_config
from gemm_gen.spec.config import GemmConfig
from gemm_gen.spec.rules import shared_l1 as shared_l1_rule

from .test_bfp16_gemm import PRECISIONS

# tails every way: M, N not multiples of a block, K not of k_mt
TAILS = dict(M=200, K=136, N=232)
TYPES = {"i8": dict(dtype_in="i8", dtype_out="i32", m=32, k=32, n=32, k_mt=64),
         "i8->i8": dict(dtype_in="i8", dtype_out="i8", m=32, k=32, n=32, k_mt=64),
         "bf16": dict(dtype_in="bf16", dtype_out="bf16", m=32, k=32, n=32, k_mt=64)}


def cfg(dev: str, share: str, types: dict, **kw: object) -> GemmConfig:
    args: dict[str, object] = {**TAILS, **types, **kw}
    return GemmConfig(dev, share_l1=share, **args)  # type: ignore[arg-type]


def run_cells(d: Design, literal: bool = True, seed: int = 0) -> tuple[np.ndarray, ArraySession]:
    """C's cells (values and provenance) after one call of `d`, and its session."""
    c = d.config
    session = ArraySession(d, literal)
    a, b = make_inputs(c.size.M, c.size.K, c.size.N, c.types.t_in, c.types.t_out, seed, c.types.t_b)
    cells, _, _ = session.run(c.call, *hostdata.pad_inputs(c, a, b, c.call))
    return cells.copy(), session


def passes_like_unshared(c: GemmConfig) -> None:
    r = simulate(c)
    assert r.passed and r.mismatches == 0, r.first_mismatch
    assert r.nonzero_fraction > 0.5
    shared, _ = run_cells(build_design(c))
    plain, _ = run_cells(build_design(GemmConfig(**{**c.to_json(), "share_l1": "none"})))
    assert np.array_equal(shared, plain)  # values and provenance, cell for cell


# ---- bit-exact, with tails ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("share", ["b", "a", "ab"])
@pytest.mark.parametrize("types", list(TYPES))
def test_shared_designs_pass_bit_exact_with_tails(dev, share, types):
    c = cfg(dev, share, TYPES[types])
    assert check_config(c).array.share_l1 == share
    passes_like_unshared(c)


@pytest.mark.parametrize("share", ["b", "a", "ab"])
@pytest.mark.parametrize("preset", ["config2", "config3"])
@pytest.mark.parametrize("col", [True, False])
def test_shared_bfp16_configs_pass_bit_exact(share, preset, col):
    """The papers' bfp16 configs (npu2), with ragged M and N, B either way."""
    c = GemmConfig("npu2", 2 * 4 * 32 - 5, 128, 2 * 8 * 32 - 3, 32, 16, 32, 32, b_col_maj=col, share_l1=share,
                   **PRECISIONS[preset])  # type: ignore[arg-type]
    passes_like_unshared(c)


def test_the_exact_product_is_compared():
    """i8 -> i32 on shared B and A: every element exact, nothing saturated (the integer product has no loss)."""
    r = simulate(cfg("npu2", "ab", TYPES["i8"]))
    assert r.accuracy.exact == r.elements and r.accuracy.max_abs == 0.0


# ---- what the shared route moves -------------------------------------------------------------------------------
def test_b_split_streams_pings_and_pongs_on_two_memtile_channels_to_half_the_cores():
    c = cfg("npu1", "b", TYPES["i8"])
    r, plain = simulate(c), simulate(GemmConfig(**{**c.to_json(), "share_l1": "none"}))
    chans = {ch["channel"]: ch for ch in r.to_json()["channels"]}
    ping, pong = chans["mem(0,1) MM2S1 (B_L2L1_0)"], chans["mem(0,1) MM2S2 (B_L2L1_0 pong)"]
    whole = {ch["channel"]: ch for ch in plain.to_json()["channels"]}["mem(0,1) MM2S1 (B_L2L1_0)"]
    assert ping["bytes"] + pong["bytes"] == whole["bytes"]  # every object once, the even ones on the ping channel
    assert ping["delivered"] == 2 * ping["bytes"]  # to the two lower cores of the column (rows 2 and 4)
    assert ping["delivered"] + pong["delivered"] == whole["delivered"] // 2  # B to L1 halved


def test_a_reaches_only_the_west_holders():
    c = cfg("npu1", "a", TYPES["i8"])
    r, plain = simulate(c), simulate(GemmConfig(**{**c.to_json(), "share_l1": "none"}))
    level, whole = r.to_json()["levels"]["memtile -> cores"], plain.to_json()["levels"]["memtile -> cores"]
    a_whole = sum(ch["delivered"] for ch in plain.to_json()["channels"] if "(A_L2L1" in ch["channel"])
    assert whole["delivered"] - level["delivered"] == a_whole // 2


# ---- the fast simulator: falls back ----------------------------------------------------------------------------
def test_the_fast_simulator_falls_back_to_the_literal_run_with_the_same_cells():
    d = build_design(cfg("npu2", "ab", TYPES["bf16"]))
    fast, session = run_cells(d, literal=False)
    assert session.fell_back is not None and "neighbour-shared" in session.fell_back
    literal, _ = run_cells(d, literal=True)
    assert np.array_equal(fast, literal)


# ---- the protocols that race or stall: caught --------------------------------------------------------------------
def _follower_skips_the_relay(monkeypatch):
    right = sim_lower.reader_slot

    def slot(sb, reader, empty, full, relay):  # a follower that reads without acquiring anything
        return right(sb, reader, empty, full, relay) if reader == sb.readers[0] else \
            SharedSlot(Lock("nothing", 10 ** 9), None, empty)
    monkeypatch.setattr(sim_lower, "reader_slot", slot)


def _full_released_by_two(monkeypatch):  # both readers take a token of one count: no relay
    monkeypatch.setattr(sim_lower, "holder_bd", lambda buf, idx, empty, full, n, label:
                        Bd(buf, idx, empty, full, label, n, 2))
    monkeypatch.setattr(sim_lower, "reader_slot", lambda sb, reader, empty, full, relay: SharedSlot(full, None, empty))


def _dma_waits_for_one_reader(monkeypatch):
    monkeypatch.setattr(sim_lower, "holder_bd", lambda buf, idx, empty, full, n, label:
                        Bd(buf, idx, empty, full, label, 1, 1))


def _dma_waits_for_a_third_reader(monkeypatch):
    monkeypatch.setattr(sim_lower, "holder_bd", lambda buf, idx, empty, full, n, label:
                        Bd(buf, idx, empty, full, label, n + 1, 1))


def _one_empty_count_for_both_buffers(monkeypatch):
    """docs/shared_l1.md 3.2's second race: one empty lock (init 4) for a holder's ping and pong."""
    first: dict[object, Lock] = {}

    def bd(buf, idx, empty, full, n, label):
        one = first.setdefault(buf.tile, empty)
        if one is not empty:
            one.value += empty.value
        return Bd(buf, idx, one, full, label, n, 1)

    right = sim_lower.reader_slot

    def slot(sb, reader, empty, full, relay):
        way = right(sb, reader, empty, full, relay)
        return SharedSlot(way.take, way.relay, first[sb.holder])
    monkeypatch.setattr(sim_lower, "holder_bd", bd)
    monkeypatch.setattr(sim_lower, "reader_slot", slot)


DEFECTS = [
    (_follower_skips_the_relay, "b", SimulationError, "relay at .* never consumed"),
    (_follower_skips_the_relay, "a", SimulationError, "reads object 2 of A_L2L1_0 .* which holds object 0"),
    (_full_released_by_two, "b", SimulationError, "both acquire B_ping_0_2_full: its tokens are anonymous"),
    (_full_released_by_two, "a", SimulationError, "both acquire A_ping_0_2_full: its tokens are anonymous"),
    (_dma_waits_for_one_reader, "b", SimulationError, "reads object 1 of B_L2L1_0 .* which holds object 3"),
    (_dma_waits_for_one_reader, "a", SimulationError, "reads object 0 of A_L2L1_0 .* which holds object 2"),
    (_dma_waits_for_a_third_reader, "ab", DeadlockError, "waits to acquire .*_full"),
    (_one_empty_count_for_both_buffers, "a", SimulationError, "release A_ping_0_2_empty, which gates A_ping_0_2, "
                                                              "A_pong_0_2"),
]


@pytest.mark.parametrize("defect, share, error, words", DEFECTS,
                         ids=[f"{d[0].__name__.strip('_')}-{d[1]}" for d in DEFECTS])
def test_each_broken_protocol_is_caught(monkeypatch, defect, share, error, words):
    c = GemmConfig("npu1", 256, 256, 256, 32, 32, 32, 64, "i8", "i32", share_l1=share)
    defect(monkeypatch)
    with pytest.raises(error, match=words):
        simulate(c)


def test_the_right_protocol_passes_on_the_defect_tests_design():
    for share in ("b", "a", "ab"):
        assert simulate(GemmConfig("npu1", 256, 256, 256, 32, 32, 32, 64, "i8", "i32", share_l1=share)).passed


# ---- column-major B tiles spanning k_mt: several L1 objects per memtile object ------------------------------------
@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("k_mt, depth", [(64, 1), (64, 2), (96, 2)])  # r = k_mt / k = 2, 2, 3 L1 objects each
def test_b_split_streams_the_l1_objects_of_chunked_memtile_objects(dev, k_mt, depth):
    """Memtile buffer b holds L1 objects b r .. b r + r - 1; the pings go on one channel, the pongs on the other, one
    BD per channel and buffer, the buffer's full lock taken by the channel sending its first object and relayed to
    the other (r = 3: the pong channel leads on the odd buffers)."""
    c = cfg(dev, "b", {**TYPES["i8"], "k_mt": k_mt}, b_col_maj=True, depth_ab_l2=depth, K=2 * k_mt + 40)
    assert c.b_per_l2 == k_mt // 32
    passes_like_unshared(c)


# r = k_mt / k: 2 (one object per channel and buffer), 3 (two on one channel), 4 (two each, the most: the rule refuses
# 5 and more); the BD count stays depth_ab_l2 per channel, an unshared fifo end's, whatever r
@pytest.mark.parametrize("k_mt, per_bd", [(64, 1), (96, 2), (128, 2)])
def test_chunked_b_split_sends_each_channels_objects_of_a_buffer_in_one_bd_with_both_locks(monkeypatch, k_mt, per_bd):
    """mlir-aie 1.4.3 refuses a BD with a lock that lacks an acquire or a release (AIERT.cpp 371-374 at the tag):
    a channel's objects of one memtile buffer go in one BD (every other L1 object), which takes the buffer's lock
    and gives the next one; r = 3 puts two objects of buffer 0 on the ping channel."""
    made: list = []
    real = sim_lower._MachineLowering.channel

    def spy(self, tile, mm2s, what, bds=None):
        ch = real(self, tile, mm2s, what, bds)
        made.append((tile, mm2s, what, list(bds or [])))
        return ch

    monkeypatch.setattr(sim_lower._MachineLowering, "channel", spy)
    c = cfg("npu1", "b", {**TYPES["i8"], "k_mt": k_mt}, b_col_maj=True, K=2 * k_mt + 40)
    assert simulate(c).passed
    sends = [bds for tile, mm2s, what, bds in made if mm2s and what.startswith("B_L2L1_0")]
    assert len(sends) == 2
    obj = (len(sends[0][0].idx) + len(sends[1][0].idx)) // (k_mt // 32)  # one L1 object's words: buffer 0 holds r
    for bds in sends:
        assert len(bds) == 2  # one per memtile buffer (depth_ab_l2 = 2)
        assert all(bd.acquire is not None and bd.release is not None for bd in bds)
    assert max(len(bd.idx) for bds in sends for bd in bds) == per_bd * obj


def test_a_bd_with_a_lock_but_no_release_is_refused():
    """The machine lowering refuses what aiecc 1.4.3 refuses: a BD that acquires a lock and releases none (or the
    reverse), such as the chain form whose first BD acquires and whose last releases (AIERT.cpp 371-374)."""
    c = cfg("npu1", "b", TYPES["i8"])
    low = sim_lower._MachineLowering(build_design(c), {})
    from gemm_gen.design.ir import TileRef
    from gemm_gen.sim.machine import Buffer
    buf = Buffer("m", TileRef(0, 1), 4)
    with pytest.raises(SimulationError, match="acquires a lock without releasing one"):
        low.channel(TileRef(0, 1), True, "x", [Bd(buf, np.arange(4), Lock("full", 1), None, "B")])
    with pytest.raises(SimulationError, match="releases a lock without acquiring one"):
        low.channel(TileRef(0, 1), True, "y", [Bd(buf, np.arange(4), None, Lock("empty", 0), "B")])
    low.channel(TileRef(0, 1), True, "z", [Bd(buf, np.arange(4), None, None, "B"),
                                            Bd(buf, np.arange(4), Lock("a", 1), Lock("b", 0), "B")])


def test_chunked_b_split_with_bf16_and_tails_on_npu1():
    passes_like_unshared(cfg("npu1", "ab", TYPES["bf16"], b_col_maj=True))


# ---- what the split stream cannot carry: refused in one line ----------------------------------------------------
@pytest.mark.parametrize("kw, words", [
    (dict(depth_ab_l2=1), "depth_ab_l2=1 buffers of 1 L1 object"),
    (dict(depth_ab_l2=1, b_col_maj=True, k_mt=96), "depth_ab_l2=1 buffers of 3 L1 object"),
])
def test_b_split_refuses_an_odd_count_of_objects_per_cycle_of_buffers(kw, words):
    with pytest.raises(ConfigError, match=words) as e:
        check_config(cfg("npu1", "b", TYPES["i8"], **kw))
    assert "\n" not in str(e.value) and "--share-l1" in str(e.value)
    assert simulate(cfg("npu1", "a", TYPES["i8"], **kw)).passed  # A's one-holder stream takes them


@pytest.mark.parametrize("k_mt", [160, 256])  # r = 5, 8
def test_b_split_refuses_more_than_four_l1_objects_per_memtile_object(monkeypatch, k_mt):
    """More than two objects of one memtile buffer on one stream deadlock (the stream's third waits for the cores,
    which wait for the other stream's object between, which waits for the relay): the rule refuses it in one line, for
    the search's tilings too; past the rule the simulator finds the deadlock."""
    c = cfg("npu1", "b", {**TYPES["i8"], "k_mt": k_mt}, b_col_maj=True, K=2 * k_mt + 40)
    with pytest.raises(ConfigError, match=f"{k_mt // 32} L1 objects per memtile object") as e:
        check_config(c)
    assert "\n" not in str(e.value) and "--k-mt" in str(e.value)
    assert not shared_l1_rule.split_streams(2, k_mt // 32) and shared_l1_rule.split_streams(2, 4)
    assert list(shared_l1_rule.split_streams(2, np.array([2, 3, 4, 5, 8]))) == [True, True, True, False, False]
    monkeypatch.setattr(shared_l1_rule, "SPLIT_OBJECTS_MAX", 8)
    with pytest.raises(DeadlockError):
        simulate(c)


def test_a_dma_write_into_a_buffer_a_core_reads_is_refused():
    """The machine's own check, whatever the locks say: no S2MM writes a shared buffer while a core holds it."""
    from gemm_gen.design.ir import TileRef
    from gemm_gen.sim.machine import Buffer, Channel, Stream
    src_buf, shared = Buffer("src", TileRef(0, 1), 4), Buffer("B_ping_0_2", TileRef(0, 2), 4)
    full, empty, dst_full = Lock("full", 1), Lock("empty", 2), Lock("B_ping_0_2_full", 0)
    idx = np.arange(4)
    src = Channel("MM2S1", TileRef(0, 1), True, [Bd(src_buf, idx, full, Lock("e", 0), "B")])
    dst = Channel("S2MM0", TileRef(0, 2), False, [Bd(shared, idx, empty, dst_full, "B", 2, 1)])
    shared.readers = 1  # a core holds it (a follower that never acquired)
    with pytest.raises(SimulationError, match="writes B_ping_0_2 on core\\(0,2\\) while 1 core\\(s\\) read it"):
        Stream(src, [dst], "memtile -> cores").step()
    shared.readers = 0
    assert Stream(src, [dst], "memtile -> cores").step() and dst_full.value == 1 and shared.fills == 1
