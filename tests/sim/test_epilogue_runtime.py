"""One xclbin, several epilogues (issue 21 item 2, docs/epilogues.md step 8): `activation="runtime"` compiles
every bf16 activation and each call selects one through a mode word the runtime sequence writes into every
core's runtime-parameter buffer; the core reads it as convert's scalar argument after the call's first acquire.
The simulated kernel applies the mode it reads from the simulated buffer, so a write to the wrong word, a write
after the transfers or a mode no case handles fails; the result equals the compile-time build of that activation
bit for bit."""

from __future__ import annotations

import json
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest

from gemm_gen import Gemm
from gemm_gen.app.cli import main
from gemm_gen.backends.iron import lower
from gemm_gen.design import build_design
from gemm_gen.design.build import runtime_sequence
from gemm_gen.design.ir import BarrierRelease, BarrierWait, Call, RuntimeCount
from gemm_gen.facts.epilogue import MODES, Activation, Epilogue
from gemm_gen.facts.errors import ConfigError, LayoutError, SimulationError
from gemm_gen.sim import run as sim_run
from gemm_gen.spec.rules.epilogue import call_activation
from gemm_gen.spec.rules.l1 import MODE_WORD

from .. import iron_recorder
from ..conftest import small

M, K, N = 64, 128, 64
MODE_NAMES = [a.value for a in MODES]
RUNTIME = Activation.RUNTIME


def _data(seed: int = 3):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16),
            rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16), rng.standard_normal(N).astype(np.float32))


def _runtime(dev: str = "npu1", bias: bool = True):
    return replace(small(dev, "bf16", "bf16", False), bias=bias, activation="runtime")


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_each_call_selects_its_activation_bit_exact_with_the_compile_time_build(dev):
    """One runtime-activation Gemm, calls in turn on the same simulated array (one xclbin): each call's C equals
    the compile-time build of its activation bit for bit, and the modes differ from one another (each applied)."""
    a, b, bias = _data()
    g = Gemm(dev, "bf16", "bf16", activation="runtime", bias=True)
    got = {}
    for act in ["gelu", "none", "relu", "silu", "gelu"]:  # back to gelu: the mode is written every call
        c = g.simulate(a, b, bias=bias, activation=act)
        fixed = Gemm(dev, "bf16", "bf16", activation=act, bias=True).simulate(a, b, bias=bias)
        assert np.array_equal(c.view(np.uint16), fixed.view(np.uint16)), act
        got[act] = c.view(np.uint16)
    assert len({v.tobytes() for v in got.values()}) == 4
    assert len(g._sessions) == 1  # every call ran on the one design  # noqa: SLF001


def test_default_is_identity_and_without_bias_too():
    a, b, _ = _data(5)
    g = Gemm("npu1", "bf16", "bf16", activation="runtime")
    plain = Gemm("npu1", "bf16", "bf16").simulate(a, b)
    assert np.array_equal(g.simulate(a, b).view(np.uint16), plain.view(np.uint16))
    relu = Gemm("npu1", "bf16", "bf16", activation="relu").simulate(a, b)
    assert np.array_equal(g.simulate(a, b, activation="relu").view(np.uint16), relu.view(np.uint16))


def test_design_holds_one_mode_word_read_by_convert_after_the_barrier():
    """Each core: one rtp Buffer of MODE_WORD + 1 words and a runtime barrier; its program waits on the barrier,
    closes it, then runs the call's tiles, where convert's only scalar is RuntimeCount(its buffer, MODE_WORD);
    the sequence writes every core's mode, then sets every core's barrier, before any task. A compile-time
    build has none of this."""
    c = _runtime()
    d = build_design(c)
    for wk in d.workers:
        (rtp,) = [buf for buf in wk.buffers if buf.rtp]
        assert rtp.shape == (MODE_WORD + 1,) and wk.barrier is not None
        wait, release, loop = wk.program
        assert (wait, release) == (BarrierWait(1), BarrierRelease(1))
        assert loop.count == c.call.tiles_per_core  # fixed sizes: the tiles are the build's
        calls = [op for op in loop.body if isinstance(op, Call)]
        assert calls[-1].kernel == next(k.name for k in d.kernels if k.role == "convert")
        assert calls[-1].scalars == (RuntimeCount(rtp.name, MODE_WORD),)
    convert = next(k for k in d.kernels if k.role == "convert")
    assert convert.scalar_args == ("i32",)
    for act, mode in MODES.items():
        call = replace(c.call, activation=act.value)
        ops = runtime_sequence(c, call)
        kinds = [op.op for op in ops]
        writes = [op.rtp for op in ops if op.op == "rtp"]
        cores = c.array.rows * c.array.cols
        assert kinds[:2 * cores] == ["rtp"] * cores + ["barrier"] * cores and "rtp" not in kinds[2 * cores:]
        assert {(w.index, w.value) for w in writes} == {(MODE_WORD, mode)}
        assert len(writes) == cores
        sets = [op.barrier for op in ops if op.op == "barrier"]
        assert {(s.tile, s.barrier, s.value) for s in sets} == {(wk.tile, wk.barrier, 1) for wk in d.workers}
    fixed = build_design(replace(c, activation="gelu"))
    assert not any(buf.rtp for wk in fixed.workers for buf in wk.buffers)
    assert not any(wk.barrier for wk in fixed.workers)
    assert not [op for op in fixed.runtime if op.op in ("rtp", "barrier")]


def _mutated(monkeypatch, change):
    """Simulate with every call's runtime sequence changed by `change` (a design defect)."""
    real = sim_run.for_call  # the Design serving each call (the calls here are not the design's own)
    def changed(design, call):
        served = real(design, call)
        return replace(served, runtime=change(served.runtime))

    monkeypatch.setattr(sim_run, "for_call", changed)


def _sim(acts, seed=0):
    d = build_design(_runtime())
    return sim_run.simulate_calls(d, [sim_run.Problem(d.config.size.M, d.config.size.K, d.config.size.N)] * len(acts),
                                  seed,
                                  activations=acts)


def test_simulated_calls_pass_and_report_the_selected_activation():
    results = _sim(["silu", "relu", None])
    assert all(r.passed for r in results)
    assert [r.call.activation for r in results] == ["silu", "relu", None]


def test_mutant_mode_written_to_the_wrong_word_is_caught(monkeypatch):
    """The k-steps word (0) instead of the mode word: the core reads a word no call wrote."""
    _mutated(monkeypatch, lambda ops: tuple(replace(op, rtp=replace(op.rtp, index=0)) if op.op == "rtp" else op
                                            for op in ops))
    with pytest.raises(SimulationError, match=r"reads its .*convert.* argument from rtp_\d_\d\[0\]|before any call"):
        _sim(["silu"])


def test_mutant_mode_written_after_the_transfers_is_caught(monkeypatch):
    """Writes moved behind the call's tasks: the first call reads an unwritten word; on a later call the core
    would read the previous call's mode (stale), which the barrier's epochs catch (this call's set came before
    any write of this call)."""
    def late(ops):
        return tuple(op for op in ops if op.op != "rtp") + tuple(op for op in ops if op.op == "rtp")
    _mutated(monkeypatch, late)
    with pytest.raises(SimulationError, match="before any call wrote it"):
        _sim(["gelu"])
    monkeypatch.undo()
    d = build_design(_runtime())
    session = sim_run.ArraySession(d)
    check = sim_run._checked_call  # noqa: SLF001 - one session, call after call, as simulate_calls runs them
    assert check(session, replace(d.config.call, activation="gelu"), 0, False, "exact").passed
    _mutated(monkeypatch, late)
    with pytest.raises(SimulationError, match=r"last written before set 1 of barrier_\d_\d: this call \(set 2\) did "
                                              r"not write it"):
        check(session, replace(d.config.call, activation="relu"), 1, False, "exact")


def test_mutant_mode_no_case_handles_is_caught(monkeypatch):
    _mutated(monkeypatch, lambda ops: tuple(replace(op, rtp=replace(op.rtp, value=7)) if op.op == "rtp" else op
                                            for op in ops))
    with pytest.raises(LayoutError, match="activation mode 7, which the kernel has no case for"):
        _sim(["silu"])


def test_mutant_wrong_mode_value_is_caught(monkeypatch):
    """The mode of another activation written (silu's word for a gelu call): C differs from the reference."""
    _mutated(monkeypatch, lambda ops: tuple(replace(op, rtp=replace(op.rtp, value=MODES[Activation.SILU]))
                                            if op.op == "rtp" else op for op in ops))
    (r,) = _sim(["gelu"])
    assert not r.passed


def test_the_call_selection_rule():
    rt = Epilogue(True, Activation.RUNTIME)
    assert rt.modes == (Activation.NONE, Activation.SILU, Activation.GELU, Activation.RELU)
    assert [call_activation(rt, a) for a in (None, *MODE_NAMES)] == [None, *MODE_NAMES]
    with pytest.raises(ConfigError, match="serves none, silu, gelu, relu, not 'runtime'"):
        call_activation(rt, "runtime")
    fixed = Epilogue(True, Activation.GELU)
    assert call_activation(fixed, None) is None and call_activation(fixed, "gelu") is None
    with pytest.raises(ConfigError, match="this build's activation is gelu: a call cannot select relu"):
        call_activation(fixed, "relu")
    assert rt.selected(Activation.SILU) == Epilogue(True, Activation.SILU)


def test_refusals_are_one_line():
    a, b, bias = _data()
    g = Gemm("npu1", "bf16", "bf16", activation="runtime", bias=True)
    with pytest.raises(ConfigError, match=r"^Gemm\(.*\): a runtime-activation build serves none, silu, gelu, relu, "
                                          r"not 'tanh'; select one of") as e:
        g.simulate(a, b, bias=bias, activation="tanh")
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="this build's activation is relu: a call cannot select silu"):
        Gemm("npu1", "bf16", "bf16", activation="relu", bias=True).simulate(a, b, bias=bias, activation="silu")
    with pytest.raises(ConfigError, match="activation='runtime' on a requantized i8 output"):
        Gemm("npu1", "i8", "i8", activation="runtime", requant="per_channel")


def test_cli_simulate_selects_per_call(capsys):
    args = ["simulate", "--dev", "npu1", "-M", "64", "-K", "128", "-N", "64", "--dtype_in", "bf16",
            "--dtype_out", "bf16", "--bias", "--activation", "runtime"]
    assert main([*args, "--activation-call", "silu"]) == 0
    out = capsys.readouterr().out
    assert "runtime activation (one of none, silu, gelu, relu, selected per call)" in out
    assert "vs float64 silu(A @ B + bias)" in out and out.rstrip().endswith("PASS")
    assert main([*args, "--activation-call", "gelu", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["passed"]
    bad = ["simulate", "--dev", "npu1", "-M", "64", "-K", "128", "-N", "64", "--dtype_in", "bf16", "--dtype_out",
           "bf16", "--activation", "relu", "--activation-call", "silu"]
    assert main(bad) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a call cannot select silu" in err[0]


def test_iron_lowering_passes_the_loaded_mode_word_to_convert():
    """The recording stand-in of IRON: convert is called with buffer[MODE_WORD] as loaded by the core (an i32
    memref.load, accepted for the i32 scalar), and the sequence writes each core's mode before any task."""
    d = build_design(_runtime("npu2"))
    api, rec = iron_recorder.api()
    lower(d, api).resolve_program()
    convert = next(k.name for k in d.kernels if k.role == "convert")
    w = rec.workers[0]
    (call,) = [op for op in w.trace if op[0] == "call" and op[1] == convert]
    loaded = call[2][-1]
    assert isinstance(loaded, iron_recorder.LoadedValue) and loaded.index == MODE_WORD
    writes = [v for kind, v in rec.rt_events if kind == "rtp"]
    assert len(writes) == d.config.array.rows * d.config.array.cols and {(i, v) for _, i, v in writes} == {(MODE_WORD,
                                                                                                            0)}
    events = [kind for kind, _ in rec.rt_events]
    assert events[:len(writes)] == ["rtp"] * len(writes)


# ---- the model: the switch's charge, program memory, and whether a specialised build is faster -------------
def test_the_runtime_charge_is_the_costliest_mode_plus_a_switch_per_tile():
    from gemm_gen.model import epilogue_cost

    rt = Epilogue(True, RUNTIME, (-1.0, 6.0))
    assert epilogue_cost.vector_ops(rt) == max(epilogue_cost.vector_ops(rt.selected(a)) for a in MODES)
    for m, n in ((32, 32), (64, 96)):
        gelu = float(epilogue_cost.core_cycles(rt.selected(Activation.GELU), m, n))
        assert float(epilogue_cost.core_cycles(rt, m, n)) == gelu + epilogue_cost.MODE_SWITCH_CYCLES
    for a in MODES:  # the switch makes the runtime build dearer than any one of its modes
        assert float(epilogue_cost.core_cycles(rt, 64, 64)) > float(epilogue_cost.core_cycles(rt.selected(a), 64, 64))


def test_the_union_of_modes_must_fit_program_memory(monkeypatch):
    """spec/rules/kernel_variant.py: every mode's block loop counts (epilogue.mode_ops); with a budget between one
    mode's code and the union's, the runtime build is refused in one line and the compile-time one is not."""
    from gemm_gen.facts.devices import NPU1
    from gemm_gen.facts.epilogue import mode_ops
    from gemm_gen.spec.rules import kernel_variant as kv

    rt = Epilogue(True, RUNTIME, (-1.0, 6.0))
    union, gelu = (kv.epilogue_code_bytes(NPU1, mode_ops(e)) for e in (rt, rt.selected(Activation.GELU)))
    assert union == sum(kv.epilogue_code_bytes(NPU1, mode_ops(rt.selected(a))) for a in MODES) > gelu
    assert kv.epilogue_code_problem(NPU1, mode_ops(rt), "x") is None  # fits the real budget
    monkeypatch.setattr(kv, "EPILOGUE_CODE_BUDGET", (gelu + union) / 2 / NPU1.isa.program_bytes)
    cfg = replace(small("npu1", "bf16", "bf16", False), bias=True, clamp=(-1.0, 6.0))
    build_design(replace(cfg, activation="gelu"))
    with pytest.raises(ConfigError, match=r"the epilogue's code \(4 activations compiled: about \d+ B\) exceeds its "
                                          r"\d+ B of the npu1 core's 16384 B program memory; build one activation"):
        build_design(replace(cfg, activation="runtime"))


def test_predict_says_what_the_build_serves_and_whether_a_specialised_build_is_faster():
    from gemm_gen.model.predict import predict

    cfg = _runtime("npu2")
    pred = predict(cfg).epilogue
    assert pred is not None and pred.serves == tuple(MODE_NAMES)
    assert [a for a, _, _ in pred.specialised] == MODE_NAMES
    assert all(sp <= rt for _, rt, sp in pred.specialised)  # one activation alone never predicted slower
    assert "serves none, silu, gelu, relu" in pred.text() and "specialised  PREDICTED" in pred.text()
    fixed = predict(replace(cfg, activation="silu")).epilogue
    assert fixed is not None and fixed.serves == ("silu",) and fixed.specialised == ()
    assert "specialised" not in fixed.text()


@pytest.mark.parametrize("act", MODE_NAMES)
def test_the_instruction_stream_writes_the_mode_at_the_mode_word(act):
    """The call's instructions (backends/txn.py) open with one write32 per core into its RTP buffer at byte
    4 MODE_WORD, of the call's mode (npu_instgen.mlir's address layout, as tests/backends/test_txn.py checks it)."""
    from gemm_gen.backends import txn
    from gemm_gen.spec.rules.l1 import RTP_PART

    from ..backends.test_txn import COL_SHIFT, ROW_SHIFT

    d = build_design(_runtime("npu2"))
    call = replace(d.config.call, activation=act)
    rtp = next(p.address for p in d.l1.placed if p.buffer.name == RTP_PART)
    writes = txn.call_ops(d, call)[:d.config.array.rows * d.config.array.cols]
    want = {(w.tile.col << COL_SHIFT | w.tile.row << ROW_SHIFT | rtp + 4 * MODE_WORD, MODES[Activation(act)])
            for w in (op.rtp for op in d.runtime if op.rtp is not None)}
    assert {(w.address, w.value) for w in writes} == want and len(want) == len(writes)
