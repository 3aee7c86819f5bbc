"""Spanning shim tasks (design/spans.py, --task-span): one task per channel carries several consecutive
output blocks of a row band. Each channel must deliver exactly the per-block sequence's data, in
order; the simulator proves it bit-exact, a span that skips a block fails, a span no BD can express
is refused in one line, and the model charges the BD setup once per span."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gemm_gen.app.cli import main
from gemm_gen.backends import txn
from gemm_gen.backends.iron import lower
from gemm_gen.design import build_design, spans
from gemm_gen.design import host_buffers as hostdata
from gemm_gen.design.build import block_tasks, group_blocks
from gemm_gen.design.ir import Design
from gemm_gen.design.tap import Tap
from gemm_gen.facts.devices import TileKind
from gemm_gen.facts.dtypes import dtype
from gemm_gen.facts.errors import ConfigError, DmaLimitError, GemmGenError
from gemm_gen.facts.inputs import make_inputs
from gemm_gen.model.perf import estimate_config
from gemm_gen.model.predict import predict
from gemm_gen.model.price import estimate
from gemm_gen.sim import simulate
from gemm_gen.sim import words as w
from gemm_gen.sim.run import ArraySession
from gemm_gen.spec.config import GemmConfig

from .. import iron_recorder as ir
from ..random_designs import record_config
from ..sim.test_int4 import int4_configs
from .test_properties import small_configs


def _words(d: Design) -> dict[str, list[np.ndarray]]:
    """Per shim fifo, the DRAM words its tasks walk, in sequence order (each word as often as moved)."""
    out: dict[str, list[np.ndarray]] = {}
    for t in d.tasks:
        unit = dtype(d.tensor(t.tensor).dtype)
        out.setdefault(t.fifo, []).append(t.tap.to_words(unit).indices())
    return out


def _same_delivery(a: Design, b: Design) -> bool:
    wa, wb = _words(a), _words(b)
    return wa.keys() == wb.keys() and all(np.array_equal(np.concatenate(wa[f]), np.concatenate(wb[f])) for f in wa)


def _simulated_c(c: GemmConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    call = c.call
    a, b = make_inputs(call.M, call.K, call.N, c.types.t_in, c.types.t_out, 0, c.types.t_b)
    cells, _, _ = ArraySession(build_design(c)).run(call, *hostdata.pad_inputs(c, a, b, call))
    return a, b, hostdata.output_values(c, (cells & w.VALUE_MASK).astype(np.uint32), call)


def _built(c: GemmConfig) -> Design | None:
    """The design of a random config, or None where it is refused (with a reason)."""
    try:
        return build_design(c)
    except (ConfigError, DmaLimitError):
        return None


# ---- the spans themselves -------------------------------------------------------------------------
def test_a_span_is_consecutive_blocks_of_one_row_band_and_a_moved_block_stands_alone():
    c = GemmConfig("npu1", 200, 64, 520, 32, 32, 32, 64, "i8", "i32")  # N 520 = 4 blocks of 128 + a moved one
    call = c.call
    assert call.shift_n and call.n_blocks == 5 and spans.regular_blocks(call) == 4
    assert spans.row_spans(call, 3) == ((0, 1, 2), (3,), (4,))
    assert spans.row_spans(call, 1) == tuple((j,) for j in range(5))
    groups = spans.block_spans(call, 4)
    assert groups == tuple(g for mb in range(call.m_blocks) for g in ((5 * mb, 5 * mb + 1, 5 * mb + 2, 5 * mb + 3),
                                                                      (5 * mb + 4,)))


def test_concatenation_needs_one_walk_at_evenly_stepped_offsets():
    t = Tap(10, (4, 8), (100, 1))
    at = [Tap(offset, t.sizes, t.strides) for offset in (10, 30, 50, 60)]
    assert spans.concat(at[:3]) == Tap(10, (3, 4, 8), (20, 100, 1))
    assert spans.concat([t, t]) == Tap(10, (2, 4, 8), (0, 100, 1))  # a repeat
    assert spans.concat([*at[:2], at[3]]) is None  # uneven
    assert spans.concat([t, Tap(30, (8, 4), (1, 100))]) is None  # another walk
    assert spans.simplified(Tap(0, (1, 3, 1, 4), (7, 4, 9, 1))) == Tap(0, (12,), (1,))  # merged, unit dims dropped


def test_a_span_with_one_block_is_todays_task_and_span_1_is_todays_sequence():
    c = GemmConfig("npu2", 300, 128, 1000, 32, 64, 32, 64, "i8", "i16")
    d1, d0 = build_design(c), build_design(c.with_(task_span=0))
    blocks = range(c.call.m_blocks * c.call.n_blocks)
    assert list(d1.tasks) == [t for g in blocks for t in block_tasks(c, c.call, g)]
    assert d1.task_groups == c.call.m_blocks * c.call.n_blocks
    assert d0.task_groups < d1.task_groups and d0.tasks_per_group == d1.tasks_per_group
    assert _same_delivery(d1, d0)


def test_the_longest_span_is_what_one_bd_expresses():
    """Span 0 takes the longest span every channel's walk fits; one block more is refused when asked."""
    c = GemmConfig("npu2", 16, 2048, 80 * 128, 16, 64, 16, 256, "i8", "i32", rows=1)  # 80 N blocks
    call = c.call
    assert call.n_blocks == 80
    longest = max(len(g) for g in group_blocks(c.with_(task_span=0), call))
    # B's strip already takes the BD's 3 dimensions (K in 8 chunks of 256 rows): the span steps on the
    # iteration dimension, whose wrap is the limit
    assert longest == c.dev.dma[TileKind.SHIM].iteration_wrap_max == 64
    build_design(c.with_(task_span=longest))
    with pytest.raises(DmaLimitError, match=r"task span .*--task-span 1") as e:
        build_design(c.with_(task_span=longest + 1))
    assert "\n" not in str(e.value)


def test_a_span_beyond_a_bd_field_is_refused_in_one_line_by_the_cli(capsys):
    code = main(["predict", "--dev", "npu2", "-M", "16", "-K", "2048", "-N", str(80 * 128), "--dtype_in", "i8",
                 "--dtype_out", "i32", "-m", "16", "-k", "64", "-n", "16", "--k-mt", "256", "--mapping", "decode",
                 "--task-span", "65"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "task span 65" in err and "iteration wrap 65" in err


def test_a_negative_span_is_refused():
    with pytest.raises(ConfigError, match="task_span=-1 must be >= 0"):
        build_design(GemmConfig("npu2", 64, 64, 512, 16, 64, 16, 64, "i8", "i32", task_span=-1))


# ---- the simulator: bit-exact, and a skipped block fails -----------------------------------------
CASES = {
    "npu2 i8xi4 strips tails": dict(device="npu2", M=100, K=200, N=900, m=32, k=64, n=32, k_mt=128, dtype_in="i8",
                                    dtype_out="i32", dtype_b="i4", b_pack="strips"),
    "npu2 i8xi4 row-major B, i8 out": dict(device="npu2", M=100, K=200, N=900, m=32, k=64, n=32, k_mt=64,
                                           dtype_in="i8", dtype_out="i8", dtype_b="i4"),
    "npu1 i8xi4 A and C column-major": dict(device="npu1", M=70, K=96, N=700, m=16, k=64, n=32, k_mt=64,
                                            dtype_in="i8", dtype_out="i32", dtype_b="i4", a_col_maj=True,
                                            c_col_maj=True),
    "npu1 i8 moved N block": dict(device="npu1", M=70, K=96, N=520, m=32, k=32, n=32, k_mt=64, dtype_in="i8",
                                  dtype_out="i16"),
    "npu2 i8 A and C column-major": dict(device="npu2", M=130, K=200, N=1100, m=32, k=64, n=32, k_mt=128,
                                         dtype_in="i8", dtype_out="i32", a_col_maj=True, c_col_maj=True),
    "npu2 bf16": dict(device="npu2", M=70, K=96, N=600, m=32, k=32, n=32, k_mt=32, dtype_in="bf16",
                      dtype_out="bf16"),
    "npu1 bf16 A and C column-major": dict(device="npu1", M=70, K=96, N=520, m=32, k=32, n=32, k_mt=64,
                                           dtype_in="bf16", dtype_out="f32", a_col_maj=True, c_col_maj=True),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("span", [0, 2])
def test_spanned_designs_simulate_exactly(name, span):
    c = GemmConfig(**CASES[name], task_span=span)
    d, d1 = build_design(c), build_design(c.with_(task_span=1))
    assert d.task_groups < d1.task_groups and _same_delivery(d, d1)
    r = simulate(d)
    assert r.passed and r.mismatches == 0, r.first_mismatch
    shim = c.dev.dma[TileKind.SHIM]
    assert max(r.max_live_bds.values()) <= min(c.runtime.queue_groups, d.task_groups) * 3 <= shim.bds
    if not c.types.t_out.is_float and c.types.t_out.name == "i32":  # and the exact product itself
        a, b, got = _simulated_c(c)
        assert np.array_equal(got.astype(np.int64), a.astype(np.int64) @ b.astype(np.int64))


def test_a_span_that_skips_a_block_fails(monkeypatch):
    """The mutant: every spanned walk steps two blocks at a time (it skips every other block and
    reads past the row band); the simulation must not pass."""
    c = GemmConfig(**CASES["npu2 i8xi4 strips tails"], task_span=2)
    assert simulate(c).passed
    concat = spans.concat

    def skipping(taps: list[Tap]) -> Tap | None:
        t = concat(taps)
        if t is None or len(taps) == 1 or t.strides[0] == 0:
            return t
        return Tap(t.offset, t.sizes, (2 * t.strides[0], *t.strides[1:]))

    monkeypatch.setattr(spans, "concat", skipping)
    try:
        r = simulate(c)
    except GemmGenError:
        return  # refused: the skipping walk leaves the buffer
    assert not r.passed


SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def spanned_configs(draw: st.DrawFn) -> GemmConfig:
    c = draw(st.one_of(small_configs(), int4_configs()))
    n_blocks = draw(st.integers(2, 5))
    N = draw(st.integers((n_blocks - 1) * c.array.cols * c.tiling.n + 1, n_blocks * c.array.cols * c.tiling.n))
    return c.with_(N=N, task_span=draw(st.sampled_from([0, 2, 3])))


@SETTINGS
@given(spanned_configs(), st.integers(0, 2**16))
def test_random_spanned_designs_deliver_the_same_data_and_simulate_exactly(c, seed):
    d = _built(c)
    if d is None:
        record_config(c, "refused")
        return  # an invalid random config is refused with a reason, never simulated
    assert _same_delivery(d, build_design(c.with_(task_span=1)))
    r = simulate(d, seed=seed)
    assert r.passed, (c.to_json(), r.first_mismatch)
    record_config(c)


# ---- the encoder and the IRON lowering --------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_encoder_and_iron_express_spanned_tasks(name):
    c = GemmConfig(**CASES[name], task_span=0)
    d = build_design(c)
    ops = txn.call_ops(d, c.call)
    bds = [op for op in ops if isinstance(op, txn.BlockWrite)]  # one BD written per task
    assert len(bds) == len(d.tasks) < len(build_design(c.with_(task_span=1)).tasks)
    shapes = txn.branches(d, c.call)
    assert any("repeat" in s for s in shapes if s.startswith("A")) or c.layout.a_col_maj  # A re-sent per block
    txn.encode_call(d, c.call)
    api, rec = ir.api()
    lower(d, api).resolve_program()
    assert len(rec.transfers) == len(d.tasks)


def _stride0_cases():
    from ..sim.test_decode import decode

    cases = {name: GemmConfig(**kw, task_span=0) for name, kw in CASES.items()}
    cases["npu2 bf16 decode"] = decode("npu2", "bf16", "bf16", 1, 128, 512).with_(task_span=0)
    cases["npu1 i8 decode"] = decode("npu1", "i8", "i16", 5, 128, 256, True).with_(task_span=0)
    return cases


STRIDE0 = _stride0_cases()


@pytest.mark.parametrize("name", sorted(STRIDE0))
def test_stride0_repeats_mean_the_same_words_to_the_encoder_the_simulator_and_iron(name):
    """The Design's taps are shared: for every shim task of a spanned call (A re-sent per block through a
    stride-0 dimension, spanned and decode A alike), the words the encoder's BD moves (decoded from its 8
    words and the push's repeat count as the hardware reads them: a zero iteration register repeats the same
    walk) are the words the simulator moves for the task, and the tap IRON is given encodes to the same BD."""
    from ..backends.test_txn import _bd_word_walk

    c = STRIDE0[name]
    d = build_design(c)
    enc = txn._Encoding.of(d, c.call)
    api, rec = ir.api()
    lower(d, api).resolve_program()
    assert len(rec.transfers) == len(d.tasks)
    repeats = 0
    for task, sent in zip(d.tasks, rec.transfers):
        t = dtype(d.tensor(task.tensor).dtype)
        bd, byte_offset = enc.bd(task, c.dev)
        moved = _bd_word_walk(bd.words, bd.repeat, byte_offset)
        sim = Tap(0, task.tap.sizes, task.tap.strides).to_words(t).indices() + t.unit_nbytes(task.tap.offset) // 4
        assert np.array_equal(moved, sim), task.name  # sim/lower.py command_processor's walk of the task
        tap = sent["tap"]  # in IRON's elements, padded to 4 dims (iron.py SHIM_TAP_DIMS)
        iron_bd = txn.shim_bd(tap.offset, tuple(tap.sizes), tuple(tap.strides), enc.elem_bits[task.tensor],
                              enc.burst)
        assert (iron_bd.words, iron_bd.repeat) == (bd.words, bd.repeat), task.name
        if task.tap.sizes[0] > 1 and task.tap.strides[0] == 0:
            repeats += 1
            assert bd.words[6] == 0 and bd.repeat == task.tap.sizes[0] - 1  # 1.4.3: the queue repeats it
    assert repeats > 0 or c.layout.a_col_maj


# ---- the model -------------------------------------------------------------------------------------
def test_the_model_charges_the_bd_setup_once_per_span():
    c = GemmConfig("npu2", 1024, 1024, 4096, 88, 48, 128, 528, "i8", "i32", dtype_b="i4", b_pack="strips")
    d1, d0 = build_design(c), build_design(c.with_(task_span=0))
    e1, e0 = estimate(d1), estimate(d0)
    assert (int(e1.spans), int(e0.spans)) == (12, 3) and int(e1.groups) == int(e0.groups) == 12
    t_cp = d0.tasks_per_group * 2.81e-6
    array = max(float(e0.t_core + e0.t_fill + e0.t_drain), float(e0.t_mem))
    assert float(e0.t_bubbles) == pytest.approx(t_cp + 2 * max(0.0, t_cp - array / 3), rel=1e-3)
    assert float(e0.time) < float(e1.time) and float(e0.t_mem) == float(e1.t_mem)  # the same traffic
    assert float(estimate_config(c.with_(task_span=0)).time) == pytest.approx(float(e0.time), rel=1e-9)
    p = predict(c.with_(task_span=0))
    assert p.task_groups == 3 and p.design.to_json()["task_span"] == 0
    assert "task_span" not in predict(c).design.to_json()


def test_the_search_spans_an_open_option_only_where_the_model_says_faster():
    from gemm_gen.model.perf import Workload
    from gemm_gen.search.tune import tune

    pr = Workload.new("npu2", 1024, 1024, 4096, "i8", "i32", dtype_b="i4", b_pack="strips")
    open_best, one_best = tune(pr, 1).best, tune(pr.with_(task_span=1), 1).best
    assert open_best.time_s < one_best.time_s and open_best.config.options.task_span == 0
    one_group = Workload.new("npu2", 1, 4096, 4096, "i8", "i32", dtype_b="i4", rows=1)  # decode: one group
    assert tune(one_group, 1).best.config.options.task_span is None


def test_the_iron_stand_in_refuses_a_shim_bd_beyond_its_iteration_field():
    """The stand-in verifies every shim transfer against 1.4.3's fields: the spanned design passes, the
    same task with a 65-long iteration (a span one block beyond the field) is refused."""
    from dataclasses import replace

    c = GemmConfig("npu2", 16, 2048, 80 * 128, 16, 64, 16, 256, "i8", "i32", rows=1, task_span=0)
    d = build_design(c)
    api, _ = ir.api()
    lower(d, api).resolve_program()
    ops = list(d.runtime)
    i = next(j for j, op in enumerate(ops) if op.task is not None and op.task.tensor == "B")
    task = ops[i].task
    assert task is not None and task.tap.sizes[0] == 64
    longer = replace(task.tap, sizes=(65, *task.tap.sizes[1:]))
    ops[i] = replace(ops[i], task=replace(task, tap=longer))
    api, _ = ir.api()
    with pytest.raises(ValueError, match="Iteration size 65"):
        lower(replace(d, runtime=tuple(ops)), api).resolve_program()


@pytest.mark.parametrize("sizes,strides,bits,match", [
    ((1, 1, 1, 6), (0, 0, 0, 1), 8, "multiples of 4 bytes"),  # 6 bytes: not whole words
    ((1, 1, 4, 8), (0, 0, 0, 1), 8, "Stride 1 must be a positive"),  # an address dim of stride 0
    ((1, 1, 4, 8), (0, 0, 10, 1), 8, "not divisible by 4"),  # a stride of 10 bytes
    ((1, 1, 2, 1024 * 4 + 4), (0, 0, 10000, 1), 8, "Size 0"),  # d0 of 1025 words, not linear
    ((1, 1, 1024, 4), (0, 0, 8, 1), 32, "or 1 \\(1024\\)"),  # d1 wrap
    ((1, 2, 2, 4), (0, 1 << 21, 4, 1), 32, "Stride 2 exceeds"),  # a stride beyond 20 bits
    ((65, 1, 2, 4), (8, 0, 4, 1), 32, "Iteration size 65"),
    ((257, 1, 2, 4), (0, 0, 4, 1), 32, "Repeat count 256"),
    ((2, 2, 2, 2, 4), (0, 0, 0, 4, 1), 32, "at most 4 dimensions"),
], ids=["size bytes", "stride 0", "stride bytes", "d0 wrap", "d1 wrap", "stride bits", "iteration",
        "repeat", "dims"])
def test_the_stand_ins_shim_bd_check_breaks_each_rule_once(sizes, strides, bits, match):
    """Each rule of 1.4.3's shim BD lowering the stand-in applies (ir.verify_shim_bd), broken once; the
    same walk within the rule passes."""
    with pytest.raises(ValueError, match=match):
        ir.verify_shim_bd(ir.TensorAccessPattern((1 << 24,), 0, list(sizes), list(strides)), bits)
    ir.verify_shim_bd(ir.TensorAccessPattern((1 << 24,), 0, [1, 1, 2, 4], [0, 0, 4, 1]), bits)


# ---- one design for several sizes (tune_many) -------------------------------------------------------
def _many(task_span):
    from gemm_gen.search.tune_many import tune_many
    from gemm_gen.spec.request import Problem

    base = GemmConfig("npu2", 1024, 1024, 4096, 64, 128, 128, 1024, "i8", "i8", dtype_b="i4", runtime_sizes="mnk",
                      task_span=task_span)
    return tune_many(base, (Problem(1024, 1024, 4096), Problem(512, 1024, 4096)))


def test_a_design_for_several_sizes_spans_its_tasks_when_the_weighted_time_is_faster():
    spanned, one = _many(None), _many(1)
    assert spanned.config.runtime.task_span == 0 and one.config.runtime.task_span == 1  # 1 given: kept
    assert spanned.total("shared") < one.total("shared")
    # each size's own best design weighs spans too, so the losses compare like with like
    assert all(s.special is not None and s.special.runtime.task_span == 0 for s in spanned.sizes)
    # the spanned design serves every size, checked as the simulator would run it
    from gemm_gen.design.serve import serve
    for s in spanned.sizes:
        serve(spanned.config, s.size)


def _many_i8(task_span):
    from gemm_gen.search.tune_many import tune_many
    from gemm_gen.spec.request import Problem

    sizes = (Problem(256, 512, 512), Problem(128, 512, 384), Problem(64, 512, 1024), Problem(200, 512, 1000))
    base = GemmConfig("npu2", 256, 512, 1024, 64, 64, 64, 64, "i8", "i32", runtime_sizes="mnk", task_span=task_span)
    return tune_many(base, sizes)


def test_weighing_spans_over_several_sizes_never_loses_to_one_task_per_block():
    """The ranking bounds a span's task groups; the head is priced exactly, so an open span is never worse than
    span 1 (a review found 594.2 us open against 585.0 us at span 1 for these sizes)."""
    open_, one = _many_i8(None), _many_i8(1)
    assert open_.total("shared") <= one.total("shared") * (1 + 1e-12)


def test_a_given_span_holds_for_each_sizes_own_design_too():
    r = _many_i8(2)
    assert r.config.runtime.task_span == 2
    assert all(s.special is None or s.special.runtime.task_span == 2 for s in r.sizes)


def test_an_unspanned_choice_for_several_sizes_reports_no_span():
    from gemm_gen.search import choose
    from gemm_gen.spec.request import Options, Pins, Problem, Request

    sizes = (Problem(256, 512, 512), Problem(128, 512, 384))
    chosen = choose(Request(Options("npu2", "i8", "i32", runtime_sizes="mnk"), Problem(256, 512, 512),
                            Pins(sizes=sizes)))
    assert chosen.config.runtime.task_span == 1 and "task_span" not in chosen.filled
