"""Neighbour-shared L1 (issue 34 item 2, steps 1 and 2): the share_l1 option's rules, the Design's shared buffers
and locks, the per-role L1 and bank plans (spec/rules/shared_l1.py, spec/rules/l1.py, design/l1_banks.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gemm_gen.design import l1_banks
from gemm_gen.design.build import build_design
from gemm_gen.facts.devices import TileKind, device
from gemm_gen.facts.errors import ConfigError
from gemm_gen.search import space
from gemm_gen.spec.checks import check_config
from gemm_gen.spec.config import GemmConfig
from gemm_gen.spec.request import Pins, Problem
from gemm_gen.spec.rules import l1, shared_l1


def cfg(dev: str = "npu1", share: str = "b", **kw: object) -> GemmConfig:
    args: dict[str, object] = dict(M=512, K=512, N=512, m=64, k=64, n=64, k_mt=128, dtype_in="i8", dtype_out="i32")
    args.update(kw)
    return GemmConfig(dev, share_l1=share, **args)


# ---- reach: AIE2TargetModel::isLegalMemAffinity (mlir-aie 1.4.3 AIETargetModel.cpp 810-824) ----------------------
@pytest.mark.parametrize("core, mem, ok", [
    ((1, 3), (1, 3), True),  # own
    ((1, 3), (0, 3), True),  # west
    ((1, 3), (1, 4), True),  # north
    ((1, 3), (1, 2), True),  # south, a core
    ((1, 3), (2, 3), False),  # east: the verifier refuses it
    ((1, 3), (1, 5), False),  # two away
    ((1, 3), (0, 4), False),  # diagonal
    ((1, 2), (1, 1), False),  # south is the memtile
    ((1, 2), (0, 1), False),  # a memtile anywhere
])
def test_a_core_reaches_its_own_west_north_and_south_core_memory_only(core, mem, ok):
    assert shared_l1.reaches(device("npu1"), core, mem) is ok


def test_every_holding_is_in_reach_of_its_readers_and_pairs_cover_the_grid():
    dev = device("npu2")
    held = shared_l1.holdings(dev.core_rows, 8, "ab")
    assert len(held) == 2 * 8 * 4 // 2 * 2  # per pair two buffers, B's pairs and A's pairs
    readers = {(h.operand, r) for h in held for r in h.readers}
    assert readers == {(op, (c, r)) for op in "AB" for c in range(8) for r in range(4)}  # every core reads both
    for h in held:
        assert h.readers[0] == h.holder  # the holder leads the relay
        assert all(shared_l1.reaches(dev, shared_l1.absolute(dev, r), shared_l1.absolute(dev, h.holder))
                   for r in h.readers)
        if h.operand == "A":
            assert h.holder[0] % 2 == 0  # west holder: the east core reads west, never the reverse


# ---- the refusals: one line naming the option, the value and the fix --------------------------------------------
@pytest.mark.parametrize("kw, words", [
    (dict(share="ba"), "unknown L1 sharing"),
    (dict(rows=1, M=16), "whole-array mapping; this design is decode"),
    (dict(share="a", cols=1), "1 column(s) leave one unpaired"),
    (dict(cols=1), "would drive 7 MM2S channels"),  # npu1 on one column: 4 A rows + B's two + C
    (dict(depth_ab_l1=1), "not double-buffered"),
    (dict(bias=True, dtype_in="bf16", dtype_out="bf16"), "epilogue tile in B's objects is not built yet"),
])
def test_each_rule_refuses_in_one_line(kw, words):
    c = cfg(**kw)  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as e:
        check_config(c)
    text = str(e.value)
    assert words in text and "\n" not in text and "--share-l1" in text


def test_a_tile_with_too_few_locks_or_bds_is_refused():
    """The counts come from facts/devices.py: a device whose core tile had 10 locks cannot hold A's six relay locks
    with B's three and C's fifo."""
    c = cfg(share="ab")
    assert c.shared_l1_problem is None
    dev = c.dev
    for field, value, what in (("locks", 10, "locks"), ("bds", 3, "BDs")):
        small = dataclasses.replace(dev, dma={**dev.dma, TileKind.CORE: dataclasses.replace(dev.dma[TileKind.CORE],
                                                                                            **{field: value})})
        why = shared_l1.problem(small, "ab", 4, 4, 2, 1, False, False, 0)
        assert why is not None and what in why[0], why
    use = shared_l1.tile_use((0, 0), shared_l1.holdings(4, 4, "ab"), "ab", 2, 1, True)
    assert use == shared_l1.TileUse(locks=6 + 3 + 2 + 1, bds=2 + 1 + 1, s2mm=2, mm2s=1)
    reader = shared_l1.tile_use((1, 0), shared_l1.holdings(4, 4, "ab"), "ab", 2, 1, False)
    assert reader == shared_l1.TileUse(locks=3 + 2, bds=1 + 1, s2mm=1, mm2s=1)  # its B pong and C: no A at all


def test_the_search_rule_agrees_with_the_check():
    for share, cols in (("b", 4), ("b", 1), ("a", 1), ("ab", 2)):
        c = cfg(share=share, cols=cols)
        m = np.array([64, 128])
        ok = space._shared_l1(c, Problem(512, 512, 512), m, m, m, m // 64, m)
        assert list(ok) == [c.shared_l1_problem is None] * 2
    assert ("shared L1", False, space._shared_l1) in space.RULES


# ---- L1: the lever -------------------------------------------------------------------------------------------------
def test_split_b_keeps_one_b_buffer_per_core_and_a_sharing_none_on_the_reader():
    o = cfg(share="none").l1_options
    b, a, ab = (cfg(share=s).l1_options for s in ("b", "a", "ab"))
    plain = l1.parts(o, 64, 64, 64, 1)
    assert l1.parts(b, 64, 64, 64, 1)["B"] == plain["B"] // 2
    assert l1.parts(a, 64, 64, 64, 1) == plain  # the holder bounds the tile
    assert l1.parts(a, 64, 64, 64, 1, holder=False)["A"] == 0
    assert l1.parts(ab, 64, 64, 64, 1)["A"] == plain["A"] and l1.parts(ab, 64, 64, 64, 1)["B"] == plain["B"] // 2
    m, n, r = np.array([64, 96]), np.array([64, 32]), np.array([1, 1])
    assert np.all(l1.largest_k(b, 65536, m, n, r, 8) > l1.largest_k(o, 65536, m, n, r, 8))


def test_a_tile_too_large_unshared_fits_with_b_split():
    big = dict(M=4096, K=4096, N=4096, m=64, k=256, n=64, k_mt=256, dtype_out="i8", acc="out")
    with pytest.raises(ConfigError, match="L1 overflow"):
        check_config(cfg(share="none", **big))  # type: ignore[arg-type]
    check_config(cfg(share="b", **big))  # type: ignore[arg-type]
    base = cfg(share="b", **big)  # type: ignore[arg-type]
    assert space.tilings(base, Problem(4096, 4096, 4096), Pins(m=64, n=64, rho=1)).k.max() >= 256


# ---- the Design's facts -----------------------------------------------------------------------------------------
def test_the_design_records_holders_readers_locks_and_sources():
    d = build_design(cfg(share="ab"))
    assert len(d.shared) == 4 * 2 * 2 + 4 * 2 * 2  # B: 4 columns x 2 pairs x 2; A: 4 rows x 2 pairs x 2
    for b in d.shared:
        assert [(x.name.rsplit("_", 1)[1], x.init, x.tile) for x in b.locks] == \
            [("empty", 2, b.holder), ("full", 0, b.holder), ("relay", 0, b.holder)]
        assert b.readers[0] == b.holder and len(b.readers) == 2
        assert b.source.kind == TileKind.MEM
        assert b.source.col == (b.holder.col if b.operand == "B" else d.config.a_col(b.holder.row - 2))
    assert build_design(cfg(share="none")).shared == ()


def test_each_core_role_has_its_own_plan_and_places_no_neighbours_buffer():
    c = cfg(share="ab")
    d = build_design(c)
    assert [r.role for r in d.l1_roles] == ["A holder, B ping", "A holder, B pong", "A reader, B ping",
                                            "A reader, B pong"]
    assert sorted(t for r in d.l1_roles for t in r.tiles) == sorted(w.tile for w in d.workers)
    assert d.l1 is d.l1_roles[0].plan
    for r in d.l1_roles:
        assert r.plan is not None
        placed = {p.buffer.name for p in r.plan.placed}
        reader = r.role.startswith("A reader")
        assert ({"A0", "A1"} <= placed) != reader
        assert ("B0" in placed) != ("B1" in placed)  # one B buffer, its slot
        assert r.plan.gama == ()  # GAMA's rules hold on this design's holders


def test_gama_names_a_ping_and_pong_in_adjacent_banks_and_a_and_b_together():
    c = cfg(share="a")
    buf = {name: l1_banks.L1Buffer(name, 4096, name[0], int(name[1])) for name in ("A0", "A1", "B0")}
    bank = 16384
    placed = [l1_banks.Placed(buf["A0"], 0), l1_banks.Placed(buf["A1"], bank + 64), l1_banks.Placed(buf["B0"], 8192)]
    broken = l1_banks.gama(c, placed, bank)
    assert broken == ("A0/A1 in one or adjacent banks", "A and B share bank(s) [0]")
    placed = [l1_banks.Placed(buf["A0"], 0), l1_banks.Placed(buf["A1"], 2 * bank), l1_banks.Placed(buf["B0"], bank)]
    assert l1_banks.gama(c, placed, bank) == ()
    assert l1_banks.gama(cfg(share="none"), [l1_banks.Placed(buf["A0"], 0), l1_banks.Placed(buf["A1"], 64)],
                         bank) == ()


def test_the_option_is_in_the_build_key_and_the_plan():
    c, plain = cfg(share="b"), cfg(share="none")
    assert "shb" in c.suffix and "sh" not in plain.suffix.split("_")
    assert c.to_json()["share_l1"] == "b" and "share_l1" not in plain.to_json()


def test_the_lowering_refuses_a_shared_design_until_it_runs_it():
    """The IRON lowering (step 5) is not built; the simulator runs shared designs (tests/sim/test_shared_l1_sim.py)."""
    from gemm_gen.backends.iron import _IronLowering
    d = build_design(cfg(share="b"))
    with pytest.raises(ConfigError, match="does not run neighbour-shared L1 buffers yet"):
        _IronLowering(d, None)


@pytest.mark.parametrize("cmd", ["mlir", "build"])
def test_the_cli_refuses_to_lower_a_shared_design_before_asking_for_mlir_aie(capsys, tmp_path, monkeypatch, cmd):
    """No mlir-aie here: a plain design's mlir and build say so in one line; a shared one says the lowering does not
    take it instead (installing mlir-aie would not help), in one line with exit 2, writing nothing."""
    from gemm_gen.app.cli import main
    from gemm_gen.backends import iron
    monkeypatch.chdir(tmp_path)
    args = [cmd, "--dev", "npu1", "-M", "256", "-K", "256", "-N", "256", "--dtype_in", "i8", "--dtype_out", "i32",
            "-m", "32", "-k", "32", "-n", "32", "--k-mt", "64", "--share-l1", "b"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not run neighbour-shared L1 buffers yet" in err and "mlir_aie" not in err
    assert not list(tmp_path.iterdir())
    with pytest.raises(ConfigError, match="does not run neighbour-shared"):
        iron.lower(build_design(cfg(share="b")))  # before looking for IRON
