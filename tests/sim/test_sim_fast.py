"""The fast simulator (sim/flow.py, sim/bulk.py) against the literal one (simulate(..., literal=True)): on every
option family the same C, bit for bit, the same counts and the same report; on broken designs the same error.

The fast path never gives an answer of its own for a design it cannot show to pass: such a call runs literally
(ArraySession.fell_back says why), so a broken design raises the literal error in both modes; the tests here also
check that the fast path did refuse it (a broken design it passed would show as a missing error)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from gemm_gen.design import build_design
from gemm_gen.design import host_buffers as hostdata
from gemm_gen.design.build import runtime_sequence
from gemm_gen.design.ir import Design
from gemm_gen.design.serve import serve
from gemm_gen.design.tap import Tap
from gemm_gen.facts.accuracy import measure
from gemm_gen.facts.devices import DEVICES
from gemm_gen.facts.dtypes import dtype
from gemm_gen.facts.epilogue_args import seeded_args
from gemm_gen.facts.errors import ConfigError, DmaLimitError, GemmGenError
from gemm_gen.facts.inputs import group_weights, make_inputs
from gemm_gen.facts.numerics import KernelNumerics, chain, reference
from gemm_gen.facts.precision import PRESETS
from gemm_gen.sim.run import ArraySession, simulate_calls
from gemm_gen.spec.config import GemmConfig, b_packs
from gemm_gen.spec.request import Problem
from gemm_gen.spec.rules import decode_split
from gemm_gen.spec.rules.dequant import to_bfp16

from ..conftest import small
from ..random_designs import record_config


def _report(results: list) -> list[str]:
    return [json.dumps({k: v for k, v in r.to_json().items() if k != "seconds"}, sort_keys=True) for r in results]


def _cells(d: Design, problems: list[Problem], literal: bool, seed: int = 0) -> tuple[list, ArraySession]:
    """Each call's C cells, kernel counts, traffic, live BDs and core passes on one session."""
    c = d.config
    session = ArraySession(d, literal)
    out = []
    for i, p in enumerate(problems):
        call = serve(c, p)
        a, b = make_inputs(call.M, call.K, call.N, c.types.t_in, c.types.t_out, seed + i, c.types.t_b)
        bq = b
        if c.groups.group_size:
            bq = group_weights(b, c.groups.group_size, c.groups.zero_points, seed + i)
            b = bq.dequant(to_bfp16(c.groups.group_size, c.kernel.convert_once))
        args = seeded_args(c.epilogue, c.types.t_out, a, b, seed + i)
        cells, kernel, m = session.run(call, *hostdata.pad_inputs(c, a, bq, call, args))
        out.append((cells.copy(), kernel.stats, [(s.src.words, [x.words for x in s.dsts]) for s in m.streams],
                    dict(m.cmd.max_live), [core.passes for core in m.cores]))
    return out, session


def assert_same(d: Design, problems: list[Problem] | None = None, seed: int = 0) -> ArraySession:
    """The fast and the literal simulator agree on every call of `problems` (default: the design's own size):
    C's cells (values and provenance), every count, and the whole report; the fast one ran every call itself
    (its session is returned)."""
    c = d.config
    problems = problems or [Problem(c.size.M, c.size.K, c.size.N)]
    fast, session = _cells(d, problems, literal=False, seed=seed)
    assert session.fell_back is None, session.fell_back
    literal, _ = _cells(d, problems, literal=True, seed=seed)
    for (fc, *f_rest), (lc, *l_rest) in zip(fast, literal, strict=True):
        assert np.array_equal(fc, lc)
        assert f_rest == l_rest
    assert _report(simulate_calls(d, problems, seed)) == _report(simulate_calls(d, problems, seed, literal=True))
    return session


# ---- every option family, one design each ------------------------------------------------------------------
FAMILIES = {
    "npu1 i8 -> i8 (acc i32)": lambda: small("npu1", "i8", "i8", M=200, K=100, N=300),
    "npu1 i16 -> i16 C column-major": lambda: small("npu1", "i16", "i16", M=130, K=256, N=70, c_col_maj=True),
    "npu1 i8 -> i32 A column-major": lambda: small("npu1", "i8", "i32", M=130, K=256, N=70, a_col_maj=True),
    "npu2 bf16 (bfp16 datapath)": lambda: small("npu2", "bf16", "bf16", M=300, K=200, N=100),
    "npu2 bf16 plain, rho 2": lambda: small("npu2", "bf16", "bf16", emulate_bf16_with_bfp16=False, rho=2, m=16),
    "npu2 bf16 acc out": lambda: small("npu2", "bf16", "bf16", acc="out"),
    "npu1 i8 acc out, shift 3": lambda: small("npu1", "i8", "i8", acc="out", shift=3),
    "npu2 i8 x i4": lambda: GemmConfig("npu2", 100, 200, 300, 32, 64, 32, 128, "i8", "i32", dtype_b="i4"),
    "npu2 W4A16 zero points": lambda: GemmConfig("npu2", 64, 512, 256, 16, 64, 16, 128, "bf16", "bf16",
                                                 dtype_b="i4", group_size=32, zero_points=True),
    "npu1 W4A16": lambda: GemmConfig("npu1", 64, 512, 256, 8, 64, 16, 128, "bf16", "bf16", dtype_b="i4",
                                     group_size=128),
    "npu2 bf16 bias gelu": lambda: small("npu2", "bf16", "bf16", False, bias=True, activation="gelu"),
    "npu1 bf16 bias silu clamp": lambda: small("npu1", "bf16", "bf16", False, bias=True, activation="silu",
                                               clamp=(-1.0, 2.0)),
    "npu2 i8 requant": lambda: GemmConfig("npu2", 256, 200, 300, 32, 64, 32, 64, "i8", "i16", True,
                                          requant="per_channel", activation="relu"),
    "npu2 i8 x i4 spans": lambda: GemmConfig("npu2", 100, 200, 900, 32, 64, 32, 128, "i8", "i32", dtype_b="i4",
                                             b_pack="strips", task_span=2),
    "npu2 two columns": lambda: small("npu2", "i8", "i32", cols=2),
    "npu2 decode": lambda: GemmConfig("npu2", 1, 512, 512, 16, 64, 16, 128, "bf16", "bf16", rows=1),
    # the split decode placement (spec/rules/decode_split.py): one virtual column per core, B split in the memtiles
    "npu2 decode-split, B in strips, tails": lambda: GemmConfig("npu2", 7, 250, 1000, 16, 32, 16, 64, "bf16", "bf16",
                                                                rows=1, cols=32, b_pack="strips"),
    "npu1 decode-split i8": lambda: GemmConfig("npu1", 2, 512, 512, 8, 64, 16, 128, "i8", "i16", rows=1, cols=16),
    **{f"npu2 preset {name}": (lambda p=p: GemmConfig("npu2", 2 * 4 * 32 - 5, 64, 2 * 8 * 32 - 3, 32, 16, 32, 32,
                                                      p.a, p.out, True, dtype_b=p.b, acc=p.acc))
       for name, p in PRESETS.items()},
}


@pytest.mark.parametrize("name", list(FAMILIES))
def test_fast_equals_literal(name: str) -> None:
    assert_same(build_design(FAMILIES[name]()))


@pytest.mark.parametrize("c, sizes", [
    (replace(small("npu1", "i8", "i32", M=128, K=128, N=256), runtime_sizes="mnk"),
     [(64, 64, 64), (7, 33, 41), (128, 128, 256)]),
    (replace(small("npu2", "bf16", "bf16", M=128, K=128, N=256), runtime_sizes="mn"), [(64, 128, 64), (100, 128, 3)]),
    (replace(small("npu1", "bf16", "bf16", False, M=64, K=128, N=64), bias=True, activation="runtime",
             runtime_sizes="mnk"), [(64, 128, 64), (30, 64, 30)]),
], ids=["mnk", "mn", "runtime activation"])
def test_fast_equals_literal_call_after_call(c: GemmConfig, sizes: list[tuple[int, int, int]]) -> None:
    """One array, several runtime sizes in turn: each call's state is the last one's (cores, locks, L1)."""
    assert_same(build_design(c), [Problem(*s) for s in sizes])


# ---- whole periods of task groups repeated (sim/period.py) ------------------------------------------------
PERIODIC = {  # enough task groups for a steady state; moved last blocks, spans, epilogues, W4A16, several calls
    "npu1 i8 -> i32, moved last blocks": (GemmConfig("npu1", 4 * 32 * 6 + 7, 64, 4 * 32 * 5 + 9, 32, 32, 32, 64, "i8",
                                                     "i32"), None),
    "npu2 bf16, rho 2": (GemmConfig("npu2", 4 * 32 * 6, 96, 8 * 32 * 4, 32, 32, 32, 96, "bf16", "bf16", rho=2), None),
    "npu1 bf16 bias gelu": (GemmConfig("npu1", 4 * 32 * 8, 64, 4 * 32 * 3, 32, 32, 32, 64, "bf16", "bf16", bias=True,
                                       activation="gelu"), None),
    "npu2 i8 x i4 spans of 2": (GemmConfig("npu2", 4 * 32 * 4, 128, 8 * 32 * 6, 32, 64, 32, 128, "i8", "i32",
                                           dtype_b="i4", task_span=2), None),
    "npu2 W4A16": (GemmConfig("npu2", 4 * 16 * 3, 256, 8 * 16 * 8, 16, 64, 16, 128, "bf16", "bf16", dtype_b="i4",
                              group_size=64, zero_points=True), None),
    "npu2 W4A16 decode (fewer groups repeated than in flight)": (
        GemmConfig("npu2", 1, 256, 8 * 32 * 7, 16, 64, 32, 128, "bf16", "bf16", dtype_b="i4", group_size=128, rows=1),
        None),
    "npu1 i8 runtime sizes, call after call": (replace(GemmConfig("npu1", 4 * 32 * 6, 128, 4 * 32 * 6, 32, 32, 32,
                                                                  64, "i8", "i32"), runtime_sizes="mnk"),
                                               [(4 * 32 * 6, 128, 4 * 32 * 6), (4 * 32 * 5 - 3, 64, 4 * 32 * 4 + 1)]),
}


@pytest.mark.parametrize("name", list(PERIODIC))
def test_repeated_periods_equal_the_literal_run(name: str) -> None:
    c, sizes = PERIODIC[name]
    session = assert_same(build_design(c), None if sizes is None else [Problem(*s) for s in sizes])
    assert session.flow is not None and session.flow.skipped_total > 0  # periods were repeated, not run


# ---- random designs of every family -----------------------------------------------------------------------
@st.composite
def configs(draw: st.DrawFn, long_k: bool = False) -> GemmConfig:
    """A small design of one option family: types and accumulators (presets included), layouts, epilogues,
    int4, W4A16, decode shapes, spans, column counts, runtime sizes. `long_k`: one output tile per core and K
    several memtile chunks of 8 to 16 k-steps (steady cycles inside a group: sim/loops.py)."""
    family = draw(st.sampled_from(["scalar", "preset", "int4", "w4a16", "epilogue", "decode", "decode-split"]))
    dev_name = draw(st.sampled_from(["npu1", "npu2"])) if family not in ("preset",) else "npu2"
    dev = DEVICES[dev_name]
    kw: dict = {}
    if family == "preset":
        p = draw(st.sampled_from(list(PRESETS.values())))
        t_in, t_out, kw = p.a, p.out, dict(dtype_b=p.b, acc=p.acc)
    elif family in ("int4",):
        t_in, t_out, kw = "i8", draw(st.sampled_from(["i32", "i8", "i16"])), dict(dtype_b="i4")
    elif family == "w4a16":
        t_in, t_out = "bf16", "bf16"
        kw = dict(dtype_b="i4", group_size=draw(st.sampled_from([32, 64, 128])), zero_points=draw(st.booleans()))
    else:
        t_in = draw(st.sampled_from(sorted(dev.out_types)))
        t_out = draw(st.sampled_from(sorted(dev.out_types[t_in])))
    if family == "epilogue":
        if t_out in ("i8", "i16") and t_in in ("i8", "i16"):
            kw.update(requant="per_channel", bias=draw(st.booleans()))
        elif t_out == "bf16":
            kw.update(bias=draw(st.booleans()), activation=draw(st.sampled_from(["relu", "silu", "gelu", "runtime"])))
        else:
            assume(False)
    emulate = kw.get("dtype_b") is None and dev_name == "npu2" and t_in == "bf16" and draw(st.booleans())
    if t_in == "bf16" and "dtype_b" not in kw:
        kw["emulate_bf16_with_bfp16"] = emulate
    try:
        r, s, t = GemmConfig(dev_name, 1, 1, 1, 1, 1, 1, 1, t_in, t_out, **kw).kernel.mmul
    except ConfigError:
        assume(False)
        raise
    rho = draw(st.sampled_from([1, 1, 2]))
    m = 2 * r * rho * draw(st.integers(1, 2))
    k = max(s, 64 if kw.get("dtype_b") == "i4" else s) * draw(st.integers(1, 2))
    n = 2 * t * draw(st.integers(1, 2)) * (2 if kw.get("dtype_b") == "i4" else 1)
    k_mt = k * (draw(st.integers(8, 16)) if long_k else draw(st.integers(1, 2)))
    cols = draw(st.sampled_from(sorted(dev.column_devices)))
    rows = 1 if family.startswith("decode") else 0
    if family == "decode-split":  # one row of one virtual column per core (spec/rules/decode_split.py)
        cols = decode_split.virtual_columns(dev)
        kw["b_pack"] = draw(st.sampled_from(b_packs(dtype(kw.get("dtype_b", t_in)), kw.get("group_size", 0), True)))
    M = draw(st.integers(1, 8)) if rows == 1 else draw(st.integers(1, (1 if long_k else 2) * 4 * m))
    K = draw(st.integers(2 * k_mt, 3 * k_mt) if long_k else st.integers(1, 2 * k_mt))
    N = draw(st.integers(1, (1 if long_k else 2) * cols * n))
    b_col = "dtype_b" not in kw and draw(st.booleans())
    return GemmConfig(dev_name, M, K, N, m, k, n, k_mt, t_in, t_out, b_col, cols=cols, rows=rows, rho=rho,
                      queue_groups=draw(st.integers(1, 4)), task_span=draw(st.sampled_from([1, 1, 0, 2])),
                      runtime_sizes=draw(st.sampled_from(["fixed", "fixed", "mn", "mnk"])), **kw)


def _random_design_equals_literal(c: GemmConfig, seed: int, later_call: bool) -> ArraySession:
    """A drawn design (refused ones are not drawn): fast and literal alike and both equal to the reference, on
    its own size and, with runtime sizes and `later_call`, a smaller call after it on the same array."""
    try:
        d = build_design(c)
    except (ConfigError, DmaLimitError):
        assume(False)
        raise
    problems = [Problem(c.size.M, c.size.K, c.size.N)]
    if later_call and c.runtime.runtime_sizes != "fixed":
        K = c.size.K if c.runtime.runtime_sizes == "mn" else max(1, c.size.K // 2)
        problems.append(Problem(max(1, c.size.M // 2), K, max(1, c.size.N // 3)))
    session = assert_same(d, problems, seed)
    assert all(r.passed for r in simulate_calls(d, problems, seed)), c.to_json()  # and both equal the reference
    record_config(c, calls=len(problems))
    return session


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(configs(), st.integers(0, 2**16))
def test_random_designs_fast_equals_literal(c: GemmConfig, seed: int) -> None:
    event(f"{c.types.dtype_in}x{c.types.dtype_b}->{c.types.dtype_out}" + (" W4A16" if c.groups.group_size else "")
          + ("" if c.epilogue.is_identity else " epilogue") + f" sizes {c.runtime.runtime_sizes}")
    _random_design_equals_literal(c, seed, later_call=True)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(configs(long_k=True), st.integers(0, 2**16))
def test_random_long_k_fast_equals_literal(c: GemmConfig, seed: int) -> None:
    """Long k-loops, where the fast machine repeats steady cycles of rounds (sim/loops.py)."""
    session = _random_design_equals_literal(c, seed, later_call=False)
    assert session.flow is not None
    event("cycles repeated" if session.flow.cycles_total else "no cycle repeated")


# ---- broken designs: the same error, and the fast path refused them --------------------------------------
def _fifo(d: Design, name: str, **changes: object) -> Design:
    return replace(d, fifos=tuple(replace(f, **changes) if f.name == name else f for f in d.fifos))


def _runtime(d: Design, ops: list) -> Design:
    return replace(d, runtime=tuple(ops))


def _wrong_core_layout(d: Design) -> Design:
    f = d.fifo("A_L2L1_0")
    tap = f.dims_from_stream
    assert tap is not None
    return _fifo(d, "A_L2L1_0", dims_from_stream=Tap(0, tap.sizes, (tap.strides[1], tap.strides[0], tap.strides[2])))


def _misaligned_k(d: Design) -> Design:
    k_mt = d.config.tiling.k_mt
    ops = [replace(op, task=replace(op.task, tap=replace(op.task.tap, offset=op.task.tap.offset + k_mt)))
           if op.task is not None and op.task.name == "A0_g0" else op for op in d.runtime]
    return _runtime(d, ops)


def _missing_fill(d: Design) -> Design:
    return _runtime(d, [op for op in d.runtime if op.task is None or op.task.name != "B1_g1"])


def _missing_drain(d: Design) -> Design:
    return _runtime(d, [op for op in d.runtime if op.task is None or op.task.name != "C1_g1"])


def _free_running(d: Design) -> Design:
    return _runtime(d, [replace(op, task=replace(op.task, wait=False)) if op.task is not None else op
                        for op in d.runtime])


def _five_groups(d: Design) -> Design:
    return replace(d, runtime=runtime_sequence(replace(d.config, queue_groups=5)))


def _wrong_drain(d: Design) -> Design:
    return _fifo(d, "C_L2L3_2", dims_to_stream=None)


def _wrong_memtile_b(d: Design) -> Design:
    return _fifo(d, "B_L2L1_1", dims_to_stream=None)


BROKEN = {"wrong core layout": _wrong_core_layout, "misaligned K": _misaligned_k, "missing fill": _missing_fill,
          "missing drain": _missing_drain, "freed while running": _free_running, "queue overflow": _five_groups,
          "wrong C drain": _wrong_drain, "wrong memtile B walk": _wrong_memtile_b}


@pytest.mark.parametrize("name", list(BROKEN))
def test_broken_designs_fail_alike(name: str) -> None:
    d = BROKEN[name](build_design(small("npu1", "i8", "i32", M=4 * 8 * 7)))
    errors = []
    for literal in (True, False):
        session = ArraySession(d, literal)
        c = d.config
        a, b = make_inputs(c.size.M, c.size.K, c.size.N, c.types.t_in, c.types.t_out, 0, c.types.t_b)
        with pytest.raises(GemmGenError) as err:
            session.run(c.call, *hostdata.pad_inputs(c, a, b, c.call))
        errors.append((type(err.value), str(err.value)))
        assert literal or session.fell_back is not None  # the fast path did not pass it
    assert errors[0] == errors[1]


# ---- the one exact product, shared ------------------------------------------------------------------------
def test_a_shared_product_serves_only_its_own_numerics() -> None:
    """numerics.Product: the reference takes the simulator's exact product only for the numerics that made its
    operands. Here the plain bf16 datapath's product (exact: the sums are exact in fp32) differs from the bfp16
    datapath's, which rounds 2^-7 next to 1.0 away (a block's step is then 2^-6): the bfp16 reference must not take
    it."""
    rng = np.random.default_rng(3)
    a = np.where(rng.random((16, 64)) < 0.5, 1.0, 2.0**-7).astype(np.float32)
    b = np.where(rng.random((64, 24)) < 0.5, -1.0, 2.0**-6).astype(np.float32)
    bfp = KernelNumerics.of("bf16", "bf16", bfp16_inputs=True, acc="f32")
    plain = replace(bfp, bfp16_inputs=False)
    _, _, _, given = chain(plain, a, b, 16)
    assert given is not None  # it collapsed into one exact product
    assert not np.array_equal(reference(bfp, a, b, 16), reference(plain, a, b, 16))
    assert np.array_equal(reference(bfp, a, b, 16, given=given), reference(bfp, a, b, 16))
    assert np.array_equal(reference(plain, a, b, 16, given=given), reference(plain, a, b, 16))
    # and the measure's exact product is the values' own, whoever made it
    assert measure(reference(plain, a, b, 16), a, b, plain, given) == measure(reference(plain, a, b, 16), a, b, plain)


def test_the_cli_simulates_literally_when_asked(capsys) -> None:
    """`gemm-gen simulate --literal` runs the literal simulator: the same report as the default's."""
    from gemm_gen.app.cli import main

    args = ["simulate", "--dev", "npu1", "-M", "100", "-K", "64", "-N", "70", "--dtype_in", "i8", "--dtype_out", "i8",
            "-m", "32", "-k", "32", "-n", "32", "--k-mt", "64", "--json"]
    reports = []
    for extra in ([], ["--literal"]):
        assert main([*args, *extra]) == 0
        report = json.loads(capsys.readouterr().out)
        report.pop("seconds")
        reports.append(report)
    assert reports[0] == reports[1] and reports[0]["passed"]
