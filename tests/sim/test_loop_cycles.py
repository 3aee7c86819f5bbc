"""Cycles of rounds inside a task group repeated instead of run (sim/loops.py): long k-loops of every option family
equal the literal run bit for bit (C's cells, counts, traffic, the report) with cycles repeated; a walk whose
words stop repeating late in a BD is run there, not repeated past (a wrong word there is found by both
simulators, and would pass unseen without the check); the check itself on arrays."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gemm_gen.design import build_design
from gemm_gen.design import host_buffers as hostdata
from gemm_gen.design.tap import WordTap
from gemm_gen.facts.errors import GemmGenError
from gemm_gen.facts.inputs import make_inputs
from gemm_gen.facts.precision import PRESETS
from gemm_gen.sim import loops
from gemm_gen.sim.run import ArraySession
from gemm_gen.spec.config import GemmConfig
from gemm_gen.spec.request import Problem

from ..conftest import small
from .test_sim_fast import assert_same


def _preset(name: str, K: int, k_mt: int) -> GemmConfig:
    p = PRESETS[name]
    return GemmConfig("npu2", 4 * 32, K, 8 * 32, 32, 32, 32, k_mt, p.a, p.out, True, dtype_b=p.b, acc=p.acc)


# one tile per core and K several memtile chunks of many k-steps: most of each chunk is a steady cycle
LOOPED = {
    "npu1 i8 -> i32": lambda: small("npu1", "i8", "i32", M=4 * 32, N=4 * 32, K=32 * 32, m=32, k=32, n=32,
                                    k_mt=512),
    "npu2 bf16 bfp16 datapath, rho 2 (ping and pong alternate)": lambda: small(
        "npu2", "bf16", "bf16", M=4 * 32, N=8 * 32, K=40 * 64, m=32, k=64, n=32, k_mt=1024, rho=2),
    "npu2 bf16 plain rho 7, K tail": lambda: small("npu2", "bf16", "bf16", False, M=4 * 112, N=8 * 32,
                                                   K=30 * 32 - 5, m=112, k=32, n=32, k_mt=320, rho=7,
                                                   emulate_bf16_with_bfp16=False),
    "npu1 bf16 bias gelu, A column-major": lambda: small("npu1", "bf16", "bf16", False, M=4 * 32, N=4 * 32,
                                                         K=48 * 32, m=32, k=32, n=32, k_mt=512, bias=True,
                                                         activation="gelu", a_col_maj=True),
    "npu2 i8 x i4": lambda: GemmConfig("npu2", 4 * 32, 48 * 64, 8 * 32, 32, 64, 32, 1024, "i8", "i32", dtype_b="i4"),
    "npu2 W4A16 zero points": lambda: GemmConfig("npu2", 4 * 16, 32 * 64, 8 * 16, 16, 64, 16, 1024, "bf16", "bf16",
                                                 dtype_b="i4", group_size=64, zero_points=True),
    "npu2 decode": lambda: GemmConfig("npu2", 1, 48 * 64, 512, 16, 64, 16, 1024, "bf16", "bf16", rows=1),
    "npu2 decode-split, B in strips": lambda: GemmConfig("npu2", 3, 48 * 32, 1000, 16, 32, 16, 512, "bf16", "bf16",
                                                         rows=1, cols=32, b_pack="strips"),
    "npu2 preset config2": lambda: _preset("config2", 24 * 32, 256),
    "npu1 i16 C column-major": lambda: small("npu1", "i16", "i16", M=4 * 16, N=4 * 32, K=48 * 32, k=32, k_mt=512,
                                             c_col_maj=True),
}


@pytest.mark.parametrize("name", list(LOOPED))
def test_repeated_cycles_equal_the_literal_run(name: str) -> None:
    session = assert_same(build_design(LOOPED[name]()))
    assert session.flow is not None and session.flow.cycles_total > 0  # cycles were repeated, not run


def test_repeated_cycles_call_after_call() -> None:
    """Runtime sizes: a second call of another K on the same array repeats cycles of its own."""
    c = replace(small("npu1", "i8", "i32", M=4 * 32, N=4 * 32, K=32 * 32, m=32, k=32, n=32, k_mt=512),
                runtime_sizes="mnk")
    session = assert_same(build_design(c), [Problem(4 * 32, 32 * 32, 4 * 32), Problem(4 * 32 - 5, 24 * 32, 97)])
    assert session.flow is not None and session.flow.cycles > 0  # in the last call too


# ---- a walk whose words stop repeating late in a BD -----------------------------------------------------
def _late_defect(monkeypatch: pytest.MonkeyPatch, position: int) -> None:
    """The shim walks of A and B (2 chunks of 32 rows of 128 words each) read two words of their first chunk
    swapped, late in the chunk: both simulators read DRAM along the same walk."""
    real = WordTap.indices

    def indices(self: WordTap) -> np.ndarray:
        idx = real(self)
        if self.sizes == (2, 32, 128):
            idx = idx.copy()
            idx[position], idx[position + 1] = idx[position + 1], idx[position]
        return idx

    monkeypatch.setattr(WordTap, "indices", indices)


def _errors(d, literal: bool) -> tuple[str | None, ArraySession]:
    c = d.config
    session = ArraySession(d, literal)
    a, b = make_inputs(c.size.M, c.size.K, c.size.N, c.types.t_in, c.types.t_out, 0, c.types.t_b)
    try:
        session.run(c.call, *hostdata.pad_inputs(c, a, b, c.call))
    except GemmGenError as e:
        return f"{type(e).__name__}: {e}", session
    return None, session


LATE = 5 * 128 + 13 * 8 + 2  # word of row 5, k-step 13 of the first chunk (32 rows of 128 words)


def test_a_late_wrong_word_is_run_not_repeated(monkeypatch: pytest.MonkeyPatch) -> None:
    d = build_design(small("npu1", "i8", "i32", M=4 * 32, N=4 * 32, K=32 * 32, m=32, k=32, n=32, k_mt=512))
    _late_defect(monkeypatch, LATE)
    literal, _ = _errors(d, True)
    assert literal is not None  # the literal run finds the swapped words
    fast, session = _errors(d, False)
    assert fast == literal and session.fell_back is not None  # the fast run did not pass it


def test_without_the_check_a_late_wrong_word_passes_unseen(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the provenance check is for: repeating cycles past the changed words hides them."""
    d = build_design(small("npu1", "i8", "i32", M=4 * 32, N=4 * 32, K=32 * 32, m=32, k=32, n=32, k_mt=512))
    _late_defect(monkeypatch, LATE)
    monkeypatch.setattr(loops, "_periodic", lambda provenance, start, cycle, n: n)
    fast, session = _errors(d, False)
    assert fast is None and session.fell_back is None


# ---- the check on arrays ----------------------------------------------------------------------------------
def _sequence(cycles: int, cycle: int, shift: int) -> tuple[np.ndarray, np.ndarray]:
    tags = np.tile(np.r_[np.ones(cycle - 2, np.int8), np.zeros(2, np.int8)], cycles)
    ids = np.arange(cycles)[:, None] * shift + np.arange(cycle)[None] * 3
    ids[:, -2:] = 7  # untagged words: ids that mean nothing, the same each cycle
    return tags, ids.reshape(-1).astype(np.int64)


def test_periodic_counts_the_cycles_that_repeat() -> None:
    tags, ids = _sequence(10, 16, 40)
    assert loops._periodic((tags, ids), 0, 16, 100) == 8  # two seen, eight more in the sequence
    assert loops._periodic((tags, ids), 0, 16, 5) == 5  # no more than asked
    assert loops._periodic((tags, ids), 16, 16, 100) == 7


@pytest.mark.parametrize("change", ["tag", "tagged id", "untagged id"])
def test_periodic_stops_before_a_cycle_that_differs(change: str) -> None:
    tags, ids = _sequence(10, 16, 40)
    at = 6 * 16 + {"tag": 3, "tagged id": 5, "untagged id": 15}[change]  # in cycle 6
    if change == "tag":
        tags[at] = 2
    else:
        ids[at] += 1
    assert loops._periodic((tags, ids), 0, 16, 100) == 4  # cycles 2..5 repeat the first two; 6 does not
    assert loops._periodic((tags, ids), 0, 16, 3) == 3


def test_a_state_that_never_repeats_costs_few_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    """An anchor that leads to no repeat is dropped after LoopPeriods.MISSES returns and the search rests,
    longer each time: the snapshots stay a small share of the rounds."""
    counts = {"snaps": 0, "rounds": 0}
    snap, round_ = loops.LoopPeriods._snap, loops.LoopPeriods.round

    def counted_snap(self: loops.LoopPeriods) -> loops.Snap:
        counts["snaps"] += 1
        return snap(self)

    def counted_round(self: loops.LoopPeriods) -> None:
        counts["rounds"] += 1
        round_(self)

    monkeypatch.setattr(loops.LoopPeriods, "_snap", counted_snap)
    monkeypatch.setattr(loops.LoopPeriods, "round", counted_round)
    monkeypatch.setattr(loops.LoopPeriods, "_repeat", lambda self, x, y, z: False)  # nothing ever repeats
    d = build_design(small("npu2", "bf16", "bf16", M=4 * 32, N=8 * 32, K=400 * 64, m=32, k=64, n=32, k_mt=1024,
                           rho=2))  # the anchor comes back every round
    _, session = _errors(d, False)
    assert session.fell_back is None and counts["rounds"] > 300
    assert counts["snaps"] <= counts["rounds"] // 5, counts
