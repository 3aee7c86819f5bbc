"""The IRON lowering, checked against a strict stand-in of mlir-aie 1.4.3's IRON (tests/iron_recorder.py)."""

from __future__ import annotations

import importlib.util
from dataclasses import replace

import numpy as np
import pytest

from gemm_gen.backends import iron as iron_mod
from gemm_gen.backends.iron import SHIM_TAP_DIMS, dims, lower, to_mlir
from gemm_gen.design import build_design
from gemm_gen.design.build import acc_buffer
from gemm_gen.facts.errors import BuildError, ToolchainMissing
from gemm_gen.spec.config import GemmConfig

from .. import iron_recorder
from ..conftest import small


def lowered(c_or_design, api=None):
    fresh, rec = iron_recorder.api()
    design = c_or_design if hasattr(c_or_design, "fifos") else build_design(c_or_design)
    text = str(lower(design, api or fresh).resolve_program())
    return design, rec, text


def at(tile):
    return (tile.col, tile.row)


@pytest.mark.parametrize("dev,t_in,t_out,col_maj", [("npu1", "bf16", "bf16", True), ("npu2", "i8", "i16", False),
                                                    ("npu2", "bf16", "f32", True)])
def test_fifos_links_and_kernels(dev, t_in, t_out, col_maj):
    c = small(dev, t_in, t_out, col_maj)
    d, rec, _ = lowered(c)
    by_name = {f.name: f for f in rec.fifos}
    assert sorted(by_name) == sorted(f.name for f in d.fifos)  # one IRON fifo per Design fifo
    for f in d.fifos:
        of = by_name[f.name]
        shape, dt = iron_recorder.shape_dtype(of.obj_type)
        assert shape == f.obj_shape and of.depth == f.depth
        assert dt == {"bf16": "bfloat16", "i8": "int8", "i16": "int16", "i32": "int32", "f32": "float32"}[f.dtype]
        assert (of.dims_to_stream or None) == dims(f.dims_to_stream)
        assert (of.dims_from_stream_per_cons or None) == dims(f.dims_from_stream)
    # A and B forward on their memtile; C joins there with one offset per core row
    for lk in d.links:
        got = next(x for x in rec.links if x["dsts"] == list(lk.dsts) or x["srcs"] == list(lk.srcs))
        assert got["kind"] == lk.kind and got["offsets"] == list(lk.offsets) and at(got["tile"]) == at(lk.tile)
    k = {x.name: x for x in rec.kernels}
    spec = next(x for x in d.kernels if x.role == "matmul")
    matmul = k[spec.name]
    assert matmul.object_file_name == spec.object_file
    # A, B, the C object, and the accumulator rows beyond it when C accumulates in a wider type
    acc = [acc_buffer(c)[0]] if c.types.precision.converts_c else []
    assert [iron_recorder.shape_dtype(t)[0] for t in matmul.arg_types] == [(c.tiling.m, c.tiling.k), (c.tiling.k,
                                                                                                      c.tiling.n),
                                                                           (c.tiling.m, c.tiling.n), *acc]


@pytest.mark.parametrize("cfg", [small("npu2", "i8", "i16"), small("npu1", "i8", "i32", cols=2, N=2 * 2 * 16),
                                 small("npu2", "bf16", "bf16", cols=1, N=2 * 16),
                                 GemmConfig("npu2", 512, 256, 1024, 64, 32, 64, 64, rho=2, dtype_in="bfp16",
                                            dtype_out="bfp16", acc="bf16")],
                         ids=["npu2", "npu1-2c", "npu2-1c", "bfp16"])
def test_everything_is_placed_where_the_design_says(cfg):
    """mlir-aie 1.4.x would place logical tiles itself; the lowering leaves it nothing to choose, so
    the array runs exactly the design the simulator checked."""
    d, rec, _ = lowered(cfg)
    assert sorted(at(w.tile) for w in rec.workers) == sorted(at(w.tile) for w in d.workers)
    for w, dw in zip(rec.workers, d.workers):
        assert at(w.tile) == at(dw.tile) and w.stack_size == dw.stack_bytes
        assert [b.name for b in w.buffers] == [b.name for b in dw.buffers]
    assert all(b.tile is not None and b.tile.placed for b in rec.buffers)
    for lk in rec.links:
        assert lk["tile"].placed and lk["tile"].row == 1
    for t, task in zip(rec.transfers, d.tasks):
        assert at(t["shim"]) == at(task.shim)
    assert type(iron_recorder.REC) is iron_recorder.Recorder


def test_workers_ask_for_the_planned_l1_allocation():
    """Every Worker asks for the plan's allocator; the plan's reservations reach IRON as address-
    pinned Buffers on the worker's tile (passed, unused, to the worker)."""
    # l1_banks steers this one (C kept in bf16) with reservations
    c = GemmConfig("npu2", 512, 512, 1024, 64, 32, 128, 64, acc="out")
    d, rec, _ = lowered(c)
    assert d.l1 is not None and d.l1.reserved and d.l1.conflict_bytes == 0
    assert {w.allocation_scheme for w in rec.workers} == {d.l1.scheme}
    w = rec.workers[0]
    held = [b for b in w.buffers if b.name.startswith("l1_reserve")]
    assert [(b.address, iron_recorder.shape_dtype(b.type)[0]) for b in held] == [
        (at, (n,)) for at, n in d.l1.reserved]
    assert all(b.tile is w.tile or at(b.tile) == at(w.tile) for b in held)
    given = GemmConfig("npu2", 512, 512, 1024, 64, 32, 128, 64, l1_alloc="basic-sequential", acc="out")
    d2, rec2, _ = lowered(given)
    assert {w.allocation_scheme for w in rec2.workers} == {"basic-sequential"}
    assert not [b for w in rec2.workers for b in w.buffers if b.name.startswith("l1_reserve")]


def test_workers_trace_the_loop_ir():
    c = small("npu2", "i8", "i8", M=4 * 16 * 3)  # 3 output tiles per core, 4 k-steps
    d, rec, _ = lowered(c)
    assert len(rec.workers) == c.array.rows * c.array.cols
    w = next(w for w in rec.workers if at(w.tile) == (3, 4))
    assert w.stack_size == c.array.stack_bytes
    a, b, cc = "A_L2L1_2", "B_L2L1_3", "C_L1L2_3_2"
    # C accumulates in i32 (zero_i32_i8, matmul_i8_i32) and is converted to i8 once, before its release
    assert [op[0] if op[0] != "call" else op[1] for op in w.trace] == [
        "loop", "acquire", "zero_i32_i8", "loop", "acquire", "acquire", "matmul_i8_i32", "release", "release",
        "end", "convert_i32_i8", "release", "end"]
    names = [op[1] for op in w.trace if op[0] in ("acquire", "release")]
    assert names == [cc, a, b, a, b, cc]
    loops = [op[1] for op in w.trace if op[0] == "loop"]
    assert loops == [c.call.tiles_per_core, c.call.k_steps]
    call = next(op for op in w.trace if op[0] == "call" and op[1].startswith("matmul"))
    # the acquired objects and the worker's accumulator Buffer, in kernel order
    assert [repr(x) for x in call[2]][:3] == [f"<{a}>", f"<{b}>", f"<{cc}>"] and "C_acc_3_2" in repr(call[2][3])
    out = replace(c, acc="out")  # C kept in i8 between calls: no accumulator, no conversion
    w = next(w for w in lowered(out)[1].workers if at(w.tile) == (3, 4))
    assert [op[1] for op in w.trace if op[0] == "call"] == ["zero_i8", "matmul_i8_i8"]


def test_atb_worker_passes_the_c_slice_as_an_int32():
    """rho > 1: one B acquire per k-step around rho (acquire A, matmul(A, B, C, i), release A); the
    kernel is declared with IRON's scalar arg type np.int32 after its three buffers."""
    c = small("npu2", "i8", "i16", m=48, rho=3)
    d, rec, text = lowered(c)
    matmul = next(k for k in rec.kernels if k.name.startswith("matmul"))
    assert matmul.arg_types[-1] is np.int32 and len(matmul.arg_types) == 5  # A, B, C, C_acc, slice
    assert [iron_recorder.shape_dtype(t)[0] for t in matmul.arg_types[:4]] == [
        (c.t_ma, c.tiling.k), (c.tiling.k, c.tiling.n), (c.tiling.m, c.tiling.n), acc_buffer(c)[0]]
    w = next(w for w in rec.workers if at(w.tile) == (0, 2))
    calls = [op for op in w.trace if op[0] == "call" and op[1].startswith("matmul")]
    assert [op[2][-1] for op in calls] == [0, 1, 2]
    names = [op[1] for op in w.trace if op[0] in ("acquire", "release")]
    a, b = "A_L2L1_0", "B_L2L1_0"
    assert names[1:-1] == [b, *([a, a] * 3), b]
    assert "((), 'int32')" in text


def test_bfp16_design_types_blocks_and_passes_its_buffers():
    """config3 (bfp16 A, B, C accumulated in bf16): bfp16 objects are flat arrays of v8bfp16ebs8
    blocks (8 per Design tile), patterns and join offsets are scaled to blocks, and each worker
    passes its C acc Buffer (placed on its tile) to zero, matmul and convert."""
    c = GemmConfig("npu2", 1024, 512, 2048, 128, 64, 128, 128, rho=4, dtype_in="bfp16", dtype_out="bfp16",
                   acc="bf16")
    d, rec, text = lowered(c)
    by_name = {f.name: f for f in rec.fifos}
    a_l1 = by_name["A_L2L1_0"]
    assert iron_recorder.shape_dtype(a_l1.obj_type) == ((c.t_ma * c.tiling.k // 8,), "v8bfp16ebs8")
    a_l2 = by_name["A_L3L2_0"]  # A's memtile reorder for rho > 1, in blocks
    assert a_l2.dims_from_stream_per_cons == dims(d.fifo("A_L3L2_0").dims_from_stream, "bfp16")
    assert a_l2.dims_from_stream_per_cons[-1] == ((c.tiling.k // 8) * 8, 1)  # one k-row of tiles = k blocks
    join = next(x for x in rec.links if x["kind"] == "join")
    assert join["offsets"] == [row * c.tiling.m * c.tiling.n // 8 for row in range(c.array.rows)]  # blocks of C
    assert [(b.name, iron_recorder.shape_dtype(b.type)) for b in rec.buffers[:1]] == [
        ("C_acc_0_0", ((112 * 64,), "bfloat16"))]
    w = next(w for w in rec.workers if at(w.tile) == (0, 2))
    calls = [op for op in w.trace if op[0] == "call"]
    assert [op[1] for op in calls][:2] == ["zero_bf16_bfp16", "matmul_bfp16_bf16"]
    assert calls[-1][1] == "convert_bf16_bfp16" and repr(calls[-1][2][1]) == "<buf C_acc_0_0>"
    assert calls[1][2][3] is calls[-1][2][1] and calls[1][2][-1] == 0  # matmul(A, B, C, acc, slice 0)
    assert "buffer C_acc_7_3 ((7168,), 'bfloat16') at Tile(7, 5)" in text
    # shim taps and host buffers in blocks: A is Mp x Kp values = Mp Kp / 8 blocks
    fill = next(t for t in rec.transfers if t["kind"] == "fill" and t["fifo"] == "A_L3L2_0")
    assert fill["tap"].tensor_dims == (1, c.call.Mp * c.call.k_walk // 8) and fill["tap"].sizes[-1] % 8 == 0


def test_one_trip_loops_are_not_range_loops():
    # mlir-aie issue #1547: a single output tile per core is emitted without a loop
    c = small("npu1", M=4 * 8, N=4 * 8)
    assert c.call.tiles_per_core == 1
    _, rec, _ = lowered(c)
    assert [op[1] for op in rec.workers[0].trace if op[0] == "loop"] == [c.call.k_steps]


def test_runtime_tasks_and_task_groups():
    c = small("npu2", "bf16", "bf16", M=4 * 8 * 3, N=8 * 16 * 2)  # 6 task groups, 4 in flight
    d, rec, _ = lowered(c)
    tasks = d.tasks
    assert len(rec.transfers) == len(tasks)
    # the sequence issues and finishes groups exactly as the Design orders them, 4 in flight
    assert rec.rt_events == [("finish", op.group) if op.task is None else ("task", op.group) for op in d.runtime]
    open_groups, most_open = set(), 0
    for kind, group in rec.rt_events:
        if kind == "task":
            open_groups.add(group)
            most_open = max(most_open, len(open_groups))
        else:
            open_groups.discard(group)
    assert most_open == c.runtime.queue_groups and not open_groups
    for t, task in zip(rec.transfers, tasks):
        assert (t["kind"], t["fifo"], t["group"], t["wait"]) == (task.direction, task.fifo, task.group, task.wait)
        assert repr(t["buffer"]) == f"<arg{['A', 'B', 'C'].index(task.tensor)}>"
        tap = t["tap"]
        # always 4 dims with a unit outer size: a leading size > 1 would be read as a repeat
        assert len(tap.sizes) == SHIM_TAP_DIMS and tap.sizes[0] == 1
        assert tap.sizes[1:] == list(task.tap.sizes)
        assert [st for n, st in zip(tap.sizes[1:], tap.strides[1:]) if n > 1] == [
            st for n, st in zip(task.tap.sizes, task.tap.strides) if n > 1]  # taplib zeroes unit dims' strides
        assert tap.offset == task.tap.offset


def test_lowering_is_deterministic():
    c = small("npu2", "i8", "i32", b_col_maj=True)
    assert lowered(c)[2] == lowered(c)[2]
    assert lowered(c)[2] != lowered(small("npu2", "i8", "i32", b_col_maj=False))[2]


def test_device_per_column_count():
    """mlir-aie's whole_array: npu1 on 1 or 2 columns is its own device, npu2 builds on NPU2."""
    for dev, cols, name in [("npu1", 1, "npu1_1col"), ("npu1", 2, "npu1_2col"), ("npu1", 4, "npu1"),
                            ("npu2", 2, "npu2"), ("npu2", 8, "npu2")]:
        c = small(dev, "i8", "i32", cols=cols, N=2 * cols * 16)
        assert lowered(c)[2].startswith(f"device {name}\n")


@pytest.mark.skipif(importlib.util.find_spec("aie") is not None, reason="mlir-aie is installed here")
def test_without_mlir_aie_one_sentence():
    with pytest.raises(ToolchainMissing, match=r"IRON API cannot be imported .*pip install mlir_aie==1\.4\.3"):
        to_mlir(build_design(small("npu1")))


# ---- the release check ---------------------------------------------------------------------------
def test_a_different_iron_is_refused_in_one_sentence():
    """An IRON of another period (Worker(placement=...), positional ObjectFifo depth) is named as
    such before anything is lowered."""
    api, _ = iron_recorder.api()
    api.check()  # the stand-in is the pinned release's shape

    class OldWorker:
        def __init__(self, core_fn, fn_args=[], placement=None, while_true=True, stack_size=None):  # noqa: B006
            pass

    with pytest.raises(ToolchainMissing, match=r"not mlir-aie 1\.4\.3's.*Worker\.__init__.*mlir_aie==1\.4\.3"):
        replace(api, Worker=OldWorker).check()

    class PositionalFifo(iron_recorder.ObjectFifo):
        def __init__(self, obj_type, depth=2, name=None, dims_to_stream=None, dims_from_stream_per_cons=None):
            pass

    with pytest.raises(ToolchainMissing, match=r"ObjectFifo\.__init__"):
        replace(api, ObjectFifo=PositionalFifo).check()


def test_to_mlir_turns_irons_refusals_into_one_line(monkeypatch):
    api, _ = iron_recorder.api()
    design = build_design(small("npu2", "i8", "i16"))
    broken = replace(design, runtime=design.runtime[:-1])  # the last task group is never finished
    with pytest.raises(BuildError, match=r"mlir-aie refused the lowered program: IronRuntimeError: Failed to close "
                                         r"task groups.*GEMM_GEN_DEBUG=1 shows where") as info:
        to_mlir(broken, api)
    assert isinstance(info.value.__cause__, iron_recorder.IronRuntimeError)  # kept for GEMM_GEN_DEBUG
    monkeypatch.setattr(iron_mod, "iron_api", lambda: iron_recorder.api()[0])
    assert to_mlir(design, iron_recorder.api()[0]).startswith("device npu2\n")


def test_without_v8bfp16ebs8_only_bfp16_designs_stop():
    """Where this mlir-aie keeps v8bfp16ebs8 is not confirmed at 1.4.3: its absence stops bfp16
    designs only, in one sentence."""
    api, _ = iron_recorder.api()
    no_blocks = replace(api, block_types={})
    lower(build_design(small("npu2", "i8", "i16")), no_blocks)
    c = GemmConfig("npu2", 512, 256, 1024, 64, 32, 64, 64, rho=2, dtype_in="bfp16", dtype_out="bfp16", acc="bf16")
    with pytest.raises(ToolchainMissing, match=r"no bfp16 element type \(v8bfp16ebs8"):
        lower(build_design(c), no_blocks)


def test_runtime_k_lowers_to_rtp_buffers_written_before_any_transfer():
    """mnk designs: each worker gets a use_write_rtp Buffer and a WorkerRuntimeBarrier; its core waits on the
    barrier, closes it, then runs as many output tiles as the tiles word says, each bounding its K loop by the
    k-steps word (after the peeled first k-step); the sequence writes every core's two words first."""
    c = replace(small("npu2", "i8", "i8"), runtime_sizes="mnk")
    d, rec, _ = lowered(c)
    w = next(w for w in rec.workers if at(w.tile) == (3, 4))
    kinds = [op[0] if op[0] != "call" else op[1] for op in w.trace]
    assert kinds == ["barrier_wait", "barrier_release", "load", "loop", "acquire", "zero_i32_i8", "acquire",
                     "acquire", "matmul_i8_i32", "release", "release", "load", "loop", "acquire", "acquire",
                     "matmul_i8_i32", "release", "release", "end", "convert_i32_i8", "release", "end"]
    assert [op[1] for op in w.trace if op[0] == "loop"] == [("rtp", "rtp_3_2", 1), ("rtp", "rtp_3_2", 0)]
    assert sum(b.use_write_rtp for b in rec.buffers) == c.array.rows * c.array.cols
    events = [kind for kind, _ in rec.rt_events]
    writes = [v for kind, v in rec.rt_events if kind == "rtp"]
    cores = c.array.rows * c.array.cols
    assert events[: 3 * cores] == ["rtp"] * 2 * cores + ["barrier"] * cores
    assert {(i, v) for _, i, v in writes} == {(0, c.call.k_steps - 1), (1, c.call.tiles_per_core)}


def _barrier_order(d, rec):
    """What the lowering must hold for every core that reads runtime parameters: its WorkerRuntimeBarrier is
    its own (one lock, made on its tile); the sequence writes each of its parameters, then sets its barrier,
    before any transfer; its core waits on the barrier and closes it before it reads any parameter."""
    barrier_of = {(w.tile.col, w.tile.row): w.barrier for w in d.workers}
    assert all(barrier_of.values())
    assert len(rec.locks) == len(d.workers) and len({id(t) for t, _ in rec.locks}) == len(d.workers)
    for w in rec.workers:
        assert len(w._barriers) == 1  # noqa: SLF001
        (lock,) = w._barriers[0].worker_locks  # noqa: SLF001
        assert lock[0] is w.tile
        kinds = [op[0] for op in w.trace]
        assert kinds[:2] == ["barrier_wait", "barrier_release"] and "load" in kinds
        assert [op[2] for op in w.trace if op[0].startswith("barrier")] == [1, 1]
        assert kinds.index("load") > kinds.index("barrier_release")
    events = rec.rt_events
    first_task = next(i for i, (kind, _) in enumerate(events) if kind == "task")
    sets = [(i, v) for i, (kind, v) in enumerate(events) if kind == "barrier"]
    writes = [(i, v) for i, (kind, v) in enumerate(events) if kind == "rtp"]
    assert len(sets) == len(d.workers) and all(i < first_task for i, _ in sets)
    for i, (_name, value, tiles) in sets:
        assert value == 1 and len(tiles) == 1
        buffer = f"rtp_{tiles[0].col}_{tiles[0].row - d.config.dev.first_core_row}"
        mine = [j for j, v in writes if v[0] == buffer]
        assert mine and max(mine) < i  # every parameter of this core is written before its barrier's set


@pytest.mark.parametrize("cfg", [replace(small("npu2", "i8", "i8"), runtime_sizes="mnk"),
                                 replace(small("npu1", "i8", "i32"), runtime_sizes="mnk"),
                                 replace(small("npu2", "bf16", "bf16", False), bias=True, activation="runtime"),
                                 replace(small("npu1", "bf16", "bf16", False), bias=True, activation="runtime",
                                         runtime_sizes="mn")],
                         ids=["npu2-mnk", "npu1-mnk", "npu2-runtime-activation", "npu1-mn-runtime-activation"])
def test_runtime_parameters_are_ordered_by_a_runtime_barrier(cfg):
    """Runtime-parameter designs (--runtime-sizes mnk, --activation runtime, both) lower with a runtime barrier
    per core: set after the parameter writes, waited on before the first read (mlir-aie 1.4.3 orders nothing
    else: RtpToWrite32Pattern makes a plain write32 of each parameter)."""
    d, rec, _ = lowered(cfg)
    _barrier_order(d, rec)


def test_a_lowering_that_reads_before_the_barrier_or_sets_it_first_is_caught():
    """The checks above fail on the two ways to get it wrong: the wait moved behind the first read (the
    program's tile loop first), and the sets moved in front of the writes."""
    cfg = replace(small("npu2", "i8", "i8"), runtime_sizes="mnk")
    d = build_design(cfg)
    late_wait = replace(d, workers=tuple(replace(w, program=(*w.program[2:], *w.program[:2])) for w in d.workers))
    with pytest.raises(AssertionError):
        _barrier_order(late_wait, lowered(late_wait)[1])
    ops = d.runtime
    early_set = replace(d, runtime=tuple(o for o in ops if o.op == "barrier") + tuple(o for o in ops
                                                                                      if o.op != "barrier"))
    with pytest.raises(AssertionError):
        _barrier_order(early_set, lowered(early_set)[1])
    _barrier_order(d, lowered(d)[1])


def test_a_design_that_breaks_an_rtp_rule_does_not_lower():
    """The lowering's own rtp writes meet the stand-in's rules (tests/backends/test_iron_standin.py RULES):
    a parameter buffer not declared as one, an index past it, a value that is no int."""
    c = replace(small("npu2", "i8", "i8"), runtime_sizes="mnk")
    d = build_design(c)
    plain = replace(d, workers=tuple(replace(w, buffers=tuple(replace(b, rtp=False) for b in w.buffers))
                                     for w in d.workers))
    with pytest.raises((ValueError, KeyError)):
        lowered(plain)
    op = next(o for o in d.runtime if o.op == "rtp")
    for bad in (replace(op.rtp, index=2), replace(op.rtp, value=1.5)):  # the buffer holds 2 words
        broken = replace(d, runtime=tuple(replace(o, rtp=bad) if o is op else o for o in d.runtime))
        with pytest.raises((IndexError, TypeError)):
            lowered(broken)


@pytest.mark.parametrize("cfg", [small("npu1", "i8", "i32", False, a_col_maj=True),
                                 small("npu2", "bf16", "bf16", True, a_col_maj=True, rho=2, m=32),
                                 small("npu2", "i8", "i32", True, a_col_maj=True, M=8 * 4 * 3 - 5, K=100),
                                 small("npu2", "bf16", "f32", True, a_col_maj=True, c_col_maj=True, N=200),
                                 small("npu2", "bf16", "bf16", True, a_col_maj=True, c_col_maj=True, N=200),
                                 small("npu1", "i8", "i8", False, a_col_maj=True, c_col_maj=True, M=8 * 4 * 3 - 4)],
                         ids=["npu1-i8", "npu2-bf16-rho2", "npu2-i8-tails", "npu2-all-column-major",
                              "npu2-bf16-all-column-major", "npu1-i8-i8-all-column-major"])
def test_column_major_a_lowers_with_the_designs_patterns(cfg):
    """The stand-in of IRON 1.4.3 takes a column-major A design: its memtile reorder, the A^T shim
    strips (3 dims, leading unit), and the kernel object that transposes A."""
    d, rec, _ = lowered(cfg)
    by_name = {f.name: f for f in rec.fifos}
    for f in d.fifos:
        assert (by_name[f.name].dims_to_stream or None) == dims(f.dims_to_stream)
        assert (by_name[f.name].dims_from_stream_per_cons or None) == dims(f.dims_from_stream)
    a_fills = [(t, task) for t, task in zip(rec.transfers, d.tasks) if task.tensor == "A"]
    assert a_fills
    for t, task in a_fills:
        assert len(t["tap"].sizes) == SHIM_TAP_DIMS and t["tap"].sizes[0] == 1  # never a repeat
        assert t["tap"].strides[-1] == 1 and task.tap.strides[-2] == cfg.call.ld("A")  # down A^T's rows
    for t, task in zip(rec.transfers, d.tasks):
        if task.tensor == "C" and cfg.layout.c_col_maj:  # each core row's tile in columns, down C^T's rows
            assert t["tap"].sizes[0] == 1 and t["tap"].sizes[1:] == [cfg.array.rows, cfg.tiling.n, cfg.tiling.m]
            assert task.tap.strides == (cfg.tiling.m, cfg.call.ld("C"), 1)
    spec = next(x for x in d.kernels if x.role == "matmul")
    assert "_acol" in spec.object_file
    assert ("_ccol" in spec.object_file) == cfg.c_t_blocks  # the kernel that stores C's blocks transposed
    assert {x.name: x for x in rec.kernels}[spec.name].object_file_name == spec.object_file


@pytest.mark.parametrize("cfg", [small("npu1", "i8", "i32", False, a_col_maj=True, cols=2, K=3 * 2 * 32),
                                 small("npu2", "bf16", "bf16", True, a_col_maj=True, cols=1, K=3 * 2 * 16)],
                         ids=["npu1-i8-2-cols", "npu2-bf16-1-col"])
def test_column_major_a_on_fewer_columns_walks_its_chunks_on_the_iteration_dimension(cfg):
    """An A shim serving several core rows: IRON 1.4.3's stand-in takes the 4-dimension tap whose
    outermost dimension (the k_mt chunks) is the BD's iteration, and the shim BD encoder writes it
    as an iteration (not a repeat of the same data)."""
    from gemm_gen.backends import txn

    d, rec, _ = lowered(cfg)
    chunks = cfg.call.k_walk // cfg.tiling.k_mt
    a_fills = [(t, task) for t, task in zip(rec.transfers, d.tasks) if task.tensor == "A"]
    assert a_fills and chunks > 1
    for t, task in a_fills:
        assert list(t["tap"].sizes) == [chunks, cfg.a_rows_per_shim, cfg.tiling.k_mt, cfg.tiling.m]
        assert t["tap"].strides[0] == cfg.tiling.k_mt * cfg.call.ld("A")
        w = task.tap.to_words(cfg.types.t_in)
        bd = txn.shim_bd(w.offset, w.sizes, w.strides, 32, 0)
        assert "iteration" in bd.shape and bd.repeat == chunks - 1
