"""Runtime parameters ordered before use (issue 31 item 4).

mlir-aie 1.4.3 lowers a runtime-parameter write to a plain write32 (AIEDmaToNpu.cpp RtpToWrite32Pattern):
nothing orders it against the call's DMA data. Each core that reads parameters therefore waits on a
WorkerRuntimeBarrier that the sequence sets after its writes. The simulator checks the ordering: every
parameter a core reads must have been written by this call's sequence before the barrier set the core
waited for. Each way to break it is caught here; the lowering's side is in tests/backends/test_iron.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gemm_gen.design import build_design
from gemm_gen.design.ir import BarrierRelease
from gemm_gen.facts.errors import DeadlockError, SimulationError
from gemm_gen.sim.run import simulate, simulate_calls
from gemm_gen.spec.request import Problem
from gemm_gen.spec.rules.l1 import MODE_WORD, TILES_WORD, rtp_written, runtime_barrier, runtime_writes

from ..conftest import small

MNK = replace(small("npu2", "i8", "i32"), runtime_sizes="mnk")


def _design():
    return build_design(MNK)


def _two_calls(d):
    c = d.config
    return simulate_calls(d, [Problem(c.size.M, c.size.K, c.size.N), Problem(c.size.M, c.size.K // 2, c.size.N)])


def _with_programs(d, change):
    return replace(d, workers=tuple(replace(w, program=change(w.program)) for w in d.workers))


def _with_runtime(d, change):
    return replace(d, runtime=change(d.runtime))


def test_the_design_passes_call_after_call():
    assert all(r.passed for r in _two_calls(_design()))


def test_a_read_before_the_wait_is_caught():
    """The tile loop (which reads the tiles word as it starts) before the wait."""
    late = _with_programs(_design(), lambda p: (p[2], p[0], p[1]))
    with pytest.raises(SimulationError, match=r"reads its loop count from rtp_\d_\d\[1\] before waiting on barrier_"):
        simulate(late)


def test_a_core_without_its_wait_is_caught():
    no_wait = _with_programs(_design(), lambda p: (p[2],))
    with pytest.raises(SimulationError, match="before waiting on barrier_"):
        simulate(no_wait)


def test_a_core_without_a_barrier_is_caught():
    """No barrier at all (the design before this change): nothing orders the write before the read."""
    d = _design()
    bare = replace(d, workers=tuple(replace(w, barrier=None, program=(w.program[2],)) for w in d.workers),
                   runtime=tuple(op for op in d.runtime if op.op != "barrier"))
    with pytest.raises(SimulationError, match="without a runtime barrier: nothing orders the sequence's write"):
        simulate(bare)


def test_a_set_before_the_writes_is_caught():
    """The sequence sets the barriers first and writes the parameters after: the core may read before the write
    lands, and the simulator says so even though its own writes are instantaneous."""
    def early(ops):
        return tuple(op for op in ops if op.op == "barrier") + tuple(op for op in ops if op.op != "barrier")

    with pytest.raises(SimulationError, match=r"which the sequence wrote after setting barrier_\d_\d \(set 1\)"):
        simulate(_with_runtime(_design(), early))


def test_a_missing_set_hangs_the_cores():
    silent = _with_runtime(_design(), lambda ops: tuple(op for op in ops if op.op != "barrier"))
    with pytest.raises(DeadlockError, match=r"waits for barrier_\d_\d = 1 \(the sequence's set\)"):
        simulate(silent)


def test_a_barrier_never_closed_is_caught_on_the_next_call():
    """Without the release the lock stays 1: the core runs into the next call before its sequence writes, and
    reads a word that call writes after its set."""
    open_ = _with_programs(_design(), lambda p: (p[0], p[2]))
    with pytest.raises(SimulationError, match="which the sequence wrote after setting"):
        _two_calls(open_)


def _second_call_without(monkeypatch, kind):
    """Two calls of the design; the second call's sequence loses its ops of `kind` ("rtp" or "barrier")."""
    from gemm_gen.sim import run as sim_run

    d = _design()
    c = d.config
    real = sim_run.for_call  # the Design serving each call that is not the design's own
    second = Problem(c.size.M, c.size.K, c.size.N - 1)

    def without(design, call):
        served = real(design, call)
        if call.N != second.N:
            return served
        return replace(served, runtime=tuple(op for op in served.runtime if op.op != kind))

    monkeypatch.setattr(sim_run, "for_call", without)
    return simulate_calls(d, [Problem(c.size.M, c.size.K // 2, c.size.N), second])


def test_a_stale_word_is_caught(monkeypatch):
    """The second call writes no parameters (its set only): the core would read the first call's words."""
    with pytest.raises(SimulationError, match=r"last written before set 1 of barrier_\d_\d: this call \(set 2\)"):
        _second_call_without(monkeypatch, "rtp")


def test_a_wait_without_a_barrier_given_is_caught():
    d = _design()
    given_none = replace(d, workers=tuple(replace(w, barrier=None) for w in d.workers),
                         runtime=tuple(op for op in d.runtime if op.op != "barrier"))
    with pytest.raises(SimulationError, match="waits on a runtime barrier it was not given"):
        simulate(given_none)


@pytest.mark.parametrize("value", [64, -1])
def test_a_set_outside_the_lock_values_is_caught(value):
    """A lock holds 0..63 (mlir-aie AIE2TargetModel::getMaxLockValue; SetLockOp::verify refuses more)."""
    d = _with_runtime(_design(), lambda ops: tuple(replace(op, barrier=replace(op.barrier, value=value))
                                                   if op.op == "barrier" else op for op in ops))
    with pytest.raises(SimulationError, match=rf"sets barrier_\d_\d on core\(\d,\d\) to {value}: a lock holds 0..63"):
        simulate(d)


def test_a_release_past_the_lock_is_caught():
    d = _with_programs(_design(), lambda p: (p[0], BarrierRelease(63), p[2]))
    with pytest.raises(SimulationError, match="releases barrier_0_0 past 63"):
        simulate(d)


def test_the_wait_is_an_acquire_equal(monkeypatch):
    """After a call the core's release leaves the lock at 2; a next call whose sequence never sets it to 1 hangs
    the cores (acquire-equal: a greater-or-equal acquire would let them run on unordered words)."""
    with pytest.raises(DeadlockError, match=r"waits for barrier_\d_\d = 1"):
        _second_call_without(monkeypatch, "barrier")


@pytest.mark.parametrize("sizes,act,written", [("fixed", False, ()), ("mn", False, ()),
                                               ("mnk", False, (0, TILES_WORD)), ("fixed", True, (MODE_WORD,)),
                                               ("mn", True, (TILES_WORD, MODE_WORD)),
                                               ("mnk", True, (0, TILES_WORD, MODE_WORD))])
def test_which_designs_read_which_words(sizes, act, written):
    """A design that serves several sizes and reads any word needs the tiles word (its program is one call);
    every design that reads a word waits on a barrier; each call writes its words and sets the barrier once."""
    assert rtp_written(sizes, act) == written
    assert runtime_barrier(sizes, act) == bool(written)
    assert runtime_writes(sizes, act) == len(written) + bool(written)


def test_an_mn_design_with_a_runtime_activation_runs_its_calls():
    cfg = replace(small("npu1", "bf16", "bf16", False), bias=True, activation="runtime", runtime_sizes="mn")
    d = build_design(cfg)
    c = d.config
    results = simulate_calls(d, [Problem(c.size.M, c.size.K, c.size.N), Problem(c.size.M // 2, c.size.K, c.size.N - 3)],
                             activations=["silu", "relu"])
    assert all(r.passed for r in results)
    cores = c.array.rows * c.array.cols
    assert [op.op for op in d.runtime][:3 * cores] == ["rtp"] * 2 * cores + ["barrier"] * cores


@pytest.mark.parametrize("cfg,writes", [(MNK, 3), (replace(small("npu2", "bf16", "bf16", False), bias=True,
                                                              activation="runtime"), 2)], ids=["mnk", "activation"])
def test_the_model_prices_each_write32_of_a_call(cfg, writes):
    """The sequence's parameter writes and barrier sets, one write32 each per core, at rtp_write_us each
    (runtime.rtp_write_us: one npu.write32 by the command processor; the set is assumed to cost the same)."""
    from gemm_gen.model.params import load
    from gemm_gen.model.perf import estimate_config

    p = load()
    cores = cfg.array.rows * cfg.array.cols
    free = float(estimate_config(cfg, p.with_(rtp_write_us=0.0)).time)
    got = float(estimate_config(cfg, p).time)
    assert got - free == pytest.approx(writes * cores * p.rtp_write_us * 1e-6, rel=1e-6)
