"""The IRON stand-in holds to the pinned release: its signatures are mlir-aie 1.4.3's, it refuses
what 1.4.3 refuses (each rule broken once here), and the defects an earlier lowering had fail."""

from __future__ import annotations

import inspect
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gemm_gen.backends import iron as iron_mod
from gemm_gen.backends import pins
from gemm_gen.backends.iron import lower
from gemm_gen.design import build_design
from gemm_gen.spec.checks import check_config
from gemm_gen.spec.config import GemmConfig

from .. import iron_recorder as ir
from ..conftest import small

REFUSALS = json.loads((Path(__file__).parents[1] / "data" / "iron_1_4_3_refusals.json").read_text())["refusals"]


def release_message(where: str, start: str) -> str:
    """The message of the pinned release's refusal in `where` that starts with `start` (so a rule
    below is only ever one the release has)."""
    found = [r["message"] for r in REFUSALS if r["where"].startswith(where)
             and (r["message"].startswith(start) or start.startswith(r["message"].split("{")[0]))]
    assert found, f"no refusal of {where} starting {start!r} in the pinned release's table"
    return found[0]


# ---- signatures ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(pins.IRON_CALLS))
def test_signatures_are_the_pinned_releases(name):
    api, _ = ir.api()
    got = [(p.name, p.kind.name, p.default is not inspect.Parameter.empty)
           for p in inspect.signature(api.callables()[name]).parameters.values()]
    want = [(p["name"], p["kind"], p["default"] is not None) for p in pins.iron_table()["signatures"][name]["params"]]
    assert got == want


def test_the_table_names_its_release_and_source():
    t = pins.iron_table()
    assert t["release"] == pins.MLIR_AIE_RELEASE and t["commit"] == pins.MLIR_AIE_COMMIT
    assert t["read_from"]["repo"] == "Xilinx/mlir-aie" and len(t["read_from"]["commit"]) == 40
    assert {"Worker(placement=...) (kwarg is tile=)", "Runtime.sequence"} <= set(t["absent_at_tag"])
    assert all(r["source"] for r in REFUSALS)


def test_pyproject_npu_extra_is_the_pin():
    import tomllib

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]
    assert project["optional-dependencies"]["npu"] == pins.npu_requirements()


# ---- refusals: each rule of the release broken once --------------------------------------------------
TY = np.ndarray[(16,), np.dtype[np.int32]]


def _fresh():
    ir.api()


def _buffer_type_missing():
    ir.Buffer()


def _fifo_depth_zero():
    ir.ObjectFifo(TY, depth=0)


def _fifo_positional_depth():
    ir.ObjectFifo(TY, 2)  # keyword-only since 1.4


def _join_from_cons():
    ir.ObjectFifo(TY, name="x").cons().join([0, 8])


def _split_from_prod():
    ir.ObjectFifo(TY, name="x").prod().split([0, 8])


def _split_count_mismatch():
    ir.ObjectFifo(TY, name="x").cons().split([0, 8], names=["a"])


def _join_depths_mismatch():
    ir.ObjectFifo(TY, name="x").prod().join([0, 8], depths=[2])


def _forward_prod():
    ir.ObjectFifo(TY, name="x").prod().forward()


def _acquire_beyond_depth():
    ir.ObjectFifo(TY, name="x", depth=1).cons().acquire(2)


def _repin_prod():
    f = ir.ObjectFifo(TY, name="x")
    f.prod(tile=ir.Tile(0, 0))
    f.prod(tile=ir.Tile(1, 0))


def _worker_bare_fifo():
    ir.Worker(None, [ir.ObjectFifo(TY, name="x")], tile=ir.Tile(0, 2))


def _worker_on_memtile():
    ir.Worker(None, [], tile=ir.Tile(0, 1, tile_type="MemTile"))


def _worker_bad_stack():
    ir.Worker(None, [], tile=ir.Tile(0, 2), stack_size=0)


def _worker_placement_keyword():
    ir.Worker(None, [], placement=ir.Tile(0, 2))  # the 2025 keyword


def _shared_untiled_buffer():
    b = ir.Buffer(TY, name="b")
    ir.Worker(None, [b], tile=ir.Tile(0, 2))
    ir.Worker(None, [b], tile=ir.Tile(1, 2))


def _kernel_no_name():
    ir.Kernel("", "k.o", [TY])


def _kernel_unresolved_call():
    ir.Kernel("k", "k.o", [TY])(ir.Element("x", TY))


def _kernel_wrong_arity():
    k = ir.Kernel("k", "k.o", [TY, np.int32])
    k.resolve()
    k(ir.Element("x", TY))


def _kernel_wrong_operand():
    k = ir.Kernel("k", "k.o", [TY])
    k.resolve()
    k(ir.ObjectFifo(TY, name="x").cons())  # the handle, not the acquired object


def _tap_offset_outside():
    ir.TensorAccessPattern((16,), 16, [4], [1])


def _tap_negative_stride():
    ir.TensorAccessPattern((16,), 0, [4, 4], [-1, 1])


def _taskgroup_outside_sequence():
    ir.TaskGroup()


def _program_without_device():
    ir.Program(None, ir.Runtime(lambda: None))


def _sequence(body):
    """Resolve a one-fifo program whose runtime body is `body(a, handle)`."""
    f = ir.ObjectFifo(TY, name="x")
    h = f.prod(tile=ir.Tile(0, 0))
    rt = ir.Runtime(lambda a, hh: body(a, hh), [TY, h])
    rt.resolve()


def _fill_outside_sequence():
    ir.ObjectFifo(TY, name="x").prod().fill(None)


def _drain_on_prod():
    _sequence(lambda a, h: h.drain(a))


def _fill_from_a_non_argument():
    _sequence(lambda a, h: h.fill(np.zeros(16, np.int32), group=ir.TaskGroup()))


def _fill_tap_and_sizes():
    _sequence(lambda a, h: h.fill(a, tap=ir.TensorAccessPattern((16,), 0, [16], [1]), sizes=[16]))


def _group_left_open():
    def body(a, h):
        h.fill(a, group=ir.TaskGroup())

    _sequence(body)


def _mixed_groups():
    def body(a, h):
        tg = ir.TaskGroup()
        h.fill(a, group=tg)
        h.fill(a)
        tg.finish()

    _sequence(body)


def _dims_from_stream_on_prod():
    ir.ObjectFifoHandle(ir.ObjectFifo(TY, name="x"), True, dims_from_stream=[(4, 1)])


def _unknown_dtype():
    ir.str_to_dtype("fp8")


def _acquire_outside_a_worker():
    ir.ObjectFifo(TY, name="x").cons().acquire(1)


def _range_of_a_float():
    next(ir.range_(2.5))


def _kernel_operand_of_another_type():
    k = ir.Kernel("k", "k.o", [np.ndarray[(16,), np.dtype[np.int16]]])
    k.resolve()
    k(ir.Element("x", TY))


def _fill_into_a_finished_group():
    def body(a, h):
        tg = ir.TaskGroup()
        h.fill(a, group=tg)
        tg.finish()
        h.fill(a, group=tg)

    _sequence(body)


def _finish_twice():
    def body(a, h):
        tg = ir.TaskGroup()
        h.fill(a, group=tg)
        tg.finish()
        tg.finish()

    _sequence(body)


def _handle_not_given_to_the_runtime():
    f = ir.ObjectFifo(TY, name="x")
    h = f.prod(tile=ir.Tile(0, 0))
    rt = ir.Runtime(lambda a: h.fill(a, group=ir.TaskGroup()), [TY])  # the handle reaches the body by closure
    rt.resolve()


RTP_TY = np.ndarray[(2,), np.dtype[np.int32]]


def _rtp_write_to_a_plain_buffer():
    buf = ir.Buffer(RTP_TY, name="p")
    _sequence(lambda a, h: buf.__setitem__(0, 1))


def _rtp_write_outside_the_sequence():
    ir.Buffer(RTP_TY, name="p", use_write_rtp=True)[0] = 1


def _rtp_write_past_the_buffer():
    buf = ir.Buffer(RTP_TY, name="p", use_write_rtp=True)
    _sequence(lambda a, h: buf.__setitem__(2, 1))


def _rtp_write_of_a_float():
    buf = ir.Buffer(RTP_TY, name="p", use_write_rtp=True)
    _sequence(lambda a, h: buf.__setitem__(0, 1.5))


def _rtp_read_outside_its_worker():
    ir.Buffer(RTP_TY, name="p", use_write_rtp=True)[0]  # noqa: B018 - the read is the point


def _barrier_program(core=lambda b: b.wait_for_value(1), sequence=lambda b: b.set(1), given=True):
    """Resolve a one-worker program with a WorkerRuntimeBarrier: `core(b)` in the worker's core (the worker
    holds the barrier when `given`), `sequence(b)` in the runtime sequence."""
    b = ir.WorkerRuntimeBarrier()
    w = ir.Worker(lambda *args: core(b), [b] if given else [], tile=ir.Tile(0, 2))
    ir.Program(ir.NPU1(), ir.Runtime(lambda: sequence(b)), workers=[w]).resolve_program()


def _barrier_of_two_values():
    ir.WorkerRuntimeBarrier(0, 1)


def _barrier_initial_keyword():
    ir.WorkerRuntimeBarrier(init=1)


def _barrier_wait_without_a_worker():
    ir.WorkerRuntimeBarrier().wait_for_value(1)


def _barrier_release_without_a_worker():
    ir.WorkerRuntimeBarrier().release_with_value(1)


def _barrier_wait_without_a_value():
    _barrier_program(core=lambda b: b.wait_for_value())


def _barrier_wait_in_the_sequence():
    _barrier_program(sequence=lambda b: b.wait_for_value(1))


def _barrier_release_in_the_sequence():
    _barrier_program(sequence=lambda b: b.release_with_value(1))


def _barrier_set_outside_the_sequence():
    _barrier_program(core=lambda b: b.set(1))


def _barrier_set_past_the_lock():
    _barrier_program(sequence=lambda b: b.set(64))


def _barrier_set_negative():
    _barrier_program(sequence=lambda b: b.set(-1))


def _barrier_set_of_a_float():
    _barrier_program(sequence=lambda b: b.set(1.0))


def _barrier_wait_for_a_float():
    _barrier_program(core=lambda b: b.wait_for_value(0.5))


def _barrier_set_reaching_no_worker():
    _barrier_program(core=lambda b: None, given=False)


def _barrier_wait_in_another_workers_core():
    b = ir.WorkerRuntimeBarrier()
    mine = ir.Worker(lambda bb: None, [b], tile=ir.Tile(0, 2))
    other = ir.Worker(lambda: b.wait_for_value(1), [], tile=ir.Tile(1, 2))
    ir.Program(ir.NPU1(), ir.Runtime(lambda: b.set(1)), workers=[mine, other]).resolve_program()


def _program(*workers, extra=None):
    """Resolve a program of the given workers on NPU1 (4 x 6)."""
    if extra:
        extra()
    ir.Program(ir.NPU1(), ir.Runtime(lambda: None), workers=list(workers)).resolve_program()


def _worker_outside_the_device():
    _program(ir.Worker(None, [], tile=ir.Tile(4, 2)))  # npu1 has columns 0-3


def _two_workers_on_one_tile():
    _program(ir.Worker(None, [], tile=ir.Tile(0, 2)), ir.Worker(None, [], tile=ir.Tile(0, 2)))


def _link_on_a_core_row():
    def link():
        ir.ObjectFifo(TY, name="x").cons().forward(tile=ir.Tile(0, 3))

    _program(extra=link)


def _fifo_end_nobody_uses():
    def unused():
        f = ir.ObjectFifo(TY, name="x")
        ir.Worker(None, [f.prod()], tile=ir.Tile(0, 2))
        f.cons()  # a consumer handle that no worker, link or runtime takes

    _program(extra=unused)



# ---- one handle, one endpoint -------------------------------------------------------------------------
def _handle_given_to_two_workers():
    h = ir.ObjectFifo(TY, name="x").cons()
    ir.Worker(None, [h], tile=ir.Tile(0, 2))
    ir.Worker(None, [h], tile=ir.Tile(0, 3))


def _handle_given_to_a_worker_and_a_link():
    h = ir.ObjectFifo(TY, name="x").cons()
    ir.Worker(None, [h], tile=ir.Tile(0, 2))
    h.forward(tile=ir.Tile(0, 1))


# ---- what mlir-aie verifies of the fifos, and what aiecc refuses when it lowers them ---------------------
def _ty(n, elem=np.int32):
    return np.ndarray[(n,), np.dtype[elem]]


BFP = ir.v8bfp16ebs8


def _resolve(workers, handles, dev=None):
    """Resolve a program of these workers whose runtime holds these shim handles (no transfers)."""
    types = [h.of.obj_type for h in handles]
    rt = ir.Runtime(lambda *args: None, [*types, *handles])
    ir.Program(dev or ir.NPU1(), rt, workers=workers).resolve_program()


def _into_core(obj, dims_from=None, elem=None):
    """A fifo from the shim into a core, its core end laid out by `dims_from`."""
    f = ir.ObjectFifo(obj, name="x")
    shim = f.prod(tile=ir.Tile(0, 0))
    _resolve([ir.Worker(lambda *a: None, [f.cons(dims_from_stream=dims_from)], tile=ir.Tile(0, 2))], [shim])


def _through_memtile(obj, dims_from=None, dims_to=None, out=None):
    """A fifo from the shim into a memtile (its S2MM laid out by `dims_from`), forwarded to a core
    (the memtile MM2S laid out by `dims_to`)."""
    f = ir.ObjectFifo(obj, name="x")
    shim = f.prod(tile=ir.Tile(0, 0))
    g = f.cons(dims_from_stream=dims_from).forward(tile=ir.Tile(0, 1), obj_type=out, name="y", dims_to_stream=dims_to)
    _resolve([ir.Worker(lambda *a: None, [g.cons()], tile=ir.Tile(0, 2))], [shim])


def _split(offsets, subs, dims_from=None, dims_to=None, big=32):
    """A shim fifo of `big` int32 split on a memtile into fifos of `subs` elements, one core each."""
    f = ir.ObjectFifo(_ty(big), name="big")
    shim = f.prod(tile=ir.Tile(0, 0))
    made = f.cons(dims_from_stream=dims_from).split(
        offsets, tile=ir.Tile(0, 1), obj_types=[_ty(n) for n in subs], names=[f"s{i}" for i in range(len(subs))],
        dims_to_stream=dims_to)
    _resolve([ir.Worker(lambda *a: None, [m.cons()], tile=ir.Tile(0, 2 + i)) for i, m in enumerate(made)], [shim])


def _join(offsets, subs, dims_to=None, big=32):
    """Cores' fifos of `subs` int32 joined on a memtile into one of `big` drained by the shim."""
    f = ir.ObjectFifo(_ty(big), name="big", dims_to_stream=dims_to)
    shim = f.cons(tile=ir.Tile(0, 0))
    made = f.prod().join(offsets, tile=ir.Tile(0, 1), obj_types=[_ty(n) for n in subs],
                         names=[f"j{i}" for i in range(len(subs))])
    _resolve([ir.Worker(lambda *a: None, [m.prod()], tile=ir.Tile(0, 2 + i)) for i, m in enumerate(made)], [shim])


def _split_offsets_out_of_order():
    _split([0, 0], [16, 16])  # the first slice runs to the next offset: none, so its own 16


def _split_offsets_leave_a_gap():
    _split([8, 16], [8, 16])


def _join_offsets_past_the_object():
    _join([0, 32], [16, 16])  # the first slice runs to 32, the second (no room) takes its own 16


def _join_output_walk_past_a_slice():
    _join([0, 16], [16, 16], dims_to=[(2, 16), (16, 1)])  # the whole object's walk: 31 >= 16


def _split_input_walk_past_a_slice():
    _split([0, 16], [16, 16], dims_from=[(32, 1)])


def _split_output_walk_past_its_slice():
    _split([0, 16], [16, 16], dims_to=[[(2, 16), (8, 1)], []])


def _fifo_in_two_links():
    f = ir.ObjectFifo(TY, name="x")
    shim = f.prod(tile=ir.Tile(0, 0))
    ends = [f.cons().forward(tile=ir.Tile(0, 1), name=f"y{i}").cons() for i in range(2)]
    _resolve([ir.Worker(lambda *a: None, [e], tile=ir.Tile(0, 2 + i)) for i, e in enumerate(ends)], [shim])


def _dims_on_a_shim_producer():
    f = ir.ObjectFifo(TY, name="x", dims_to_stream=[(4, 4), (4, 1)])
    shim = f.prod(tile=ir.Tile(0, 0))
    _resolve([ir.Worker(lambda *a: None, [f.cons()], tile=ir.Tile(0, 2))], [shim])


def _dims_on_a_shim_consumer():
    f = ir.ObjectFifo(TY, name="x")
    shim = f.cons(tile=ir.Tile(0, 0), dims_from_stream=[(4, 4), (4, 1)])
    _resolve([ir.Worker(lambda *a: None, [f.prod()], tile=ir.Tile(0, 2))], [shim])


def _transfer_not_whole_words():
    _into_core(_ty(6, np.int8))


def _core_bd_too_long():
    _into_core(_ty(1 << 14))  # 16384 words: the core's length field holds 14 bits


def _four_dims_on_a_core():
    _into_core(TY, [(1, 4), (1, 4), (2, 2), (2, 1)])


def _five_dims_on_a_memtile():
    _through_memtile(TY, dims_from=[(1, 4), (1, 4), (1, 4), (2, 2), (2, 1)])


def _walk_past_the_object():
    _into_core(TY, [(2, 8), (9, 1)])


def _zero_stride():
    _into_core(TY, [(2, 0), (8, 1)])


def _core_wrap_over_255():
    _into_core(_ty(512), [(256, 1)])  # an 8-bit wrap on core tiles


def _memtile_wrap_over_1023():
    _through_memtile(_ty(2048), dims_from=[(1024, 1)])  # a 10-bit wrap on memtiles


def _core_stride_over_2_13():
    _into_core(_ty(1 << 14, np.int8), [(2, 8193), (4, 1)])


def _memtile_stride_over_2_17():
    _through_memtile(_ty(1 << 18, np.int8), dims_from=[(2, 131073), (4, 1)], out=_ty(1 << 10, np.int8))


def _i16_inner_stride_not_1():
    _into_core(_ty(16, np.int16), [(8, 2)])


def _bfp16_inner_stride_not_1():
    _into_core(_ty(16, BFP), [(8, 2)])


def _bfp16_inner_run_not_whole_words():
    _into_core(_ty(16, BFP), [(4, 4), (2, 1)])  # 2 blocks of 9 bytes


def _bfp16_memtile_stride_not_whole_words():
    _through_memtile(_ty(32, BFP), dims_from=[(2, 6), (4, 1)])  # a step of 6 blocks, 54 bytes


def _i8_inner_run_not_whole_words():
    _into_core(_ty(16, np.int8), [(4, 4), (2, 1)])


BD = "aiecc: DMABDOp::verify"  # the memtile and core BDs aiecc lowers the fifos to

RULES = [
    (_buffer_type_missing, ValueError, "aie.iron.Buffer.__init__", "Must provide either type"),
    (_fifo_depth_zero, ValueError, "aie.iron.ObjectFifo.__init__", "Default ObjectFifo depth must be > 0"),
    (_fifo_positional_depth, TypeError, None, "positional argument"),
    (_join_from_cons, ValueError, "aie.iron.ObjectFifoHandle.join", "Cannot join() a"),
    (_split_from_prod, ValueError, "aie.iron.ObjectFifoHandle.split", "Cannot split() a"),
    (_split_count_mismatch, ValueError, "aie.iron.ObjectFifoHandle.split", "Number of names does not match"),
    (_join_depths_mismatch, ValueError, "aie.iron.ObjectFifoHandle.join", "Number of depths does not match"),
    (_forward_prod, ValueError, "aie.iron.ObjectFifoHandle.forward", "Cannot forward a"),
    (_acquire_beyond_depth, ValueError, "aie.iron.ObjectFifoHandle.acquire", "Number of elements to acquire"),
    (_repin_prod, ValueError, "aie.iron.ObjectFifo.prod", "Producer handle for"),
    (_worker_bare_fifo, ValueError, "aie.iron.Worker.__init__", "Cannot give an ObjectFifo directly"),
    (_worker_on_memtile, ValueError, "aie.iron.Worker.__init__", "Worker requires a compute tile"),
    (_worker_bad_stack, ValueError, "aie.iron.Worker.__init__", "Worker stack_size must be >= 1"),
    (_worker_placement_keyword, TypeError, None, "placement"),
    (_shared_untiled_buffer, ValueError, "aie.iron.Worker.__init__", "Buffer '"),
    (_kernel_no_name, ValueError, "aie.iron.kernel.BaseKernel.__init__", "Kernel name cannot be empty"),
    (_kernel_unresolved_call, ValueError, "aie.iron.Kernel.__call__", "Kernel must be resolved"),
    (_kernel_wrong_arity, ValueError, "aie.iron.Kernel.__call__", "Kernel '"),
    (_kernel_wrong_operand, ValueError, None, "'func.call' op operand type mismatch"),
    (_tap_offset_outside, ValueError, "aie.helpers.taplib.utils.validate_offset", "Offset too large"),
    (_tap_negative_stride, ValueError, "aie.helpers.taplib.utils.validate_and_clean_sizes_strides",
     "All strides must be >= 0"),
    (_taskgroup_outside_sequence, RuntimeError, "aie.iron.TaskGroup.__init__", "TaskGroup() must be constructed"),
    (_program_without_device, ValueError, "aie.iron.Program.__init__", "Program requires a device"),
    (_fill_outside_sequence, RuntimeError, None, "fill() must be called within"),
    (_drain_on_prod, ValueError, "aie.iron.ObjectFifoHandle.drain", "drain() is only valid"),
    (_fill_from_a_non_argument, ValueError, None, "fill() of x needs a runtime-sequence buffer argument"),
    (_fill_tap_and_sizes, ValueError, "aie.iron.runtime.dmatask.DMATask.__init__", "DMATask: tap and sizes"),
    (_group_left_open, ir.IronRuntimeError, "aie.iron.Runtime", "Failed to close task groups"),
    (_mixed_groups, ir.IronRuntimeError, "aie.iron.Runtime", "Mixing explicit task groups"),
    (_dims_from_stream_on_prod, ValueError, "aie.iron.ObjectFifoHandle.__init__", "Can only specify dims_from_stream"),
    (_unknown_dtype, ValueError, "aie.iron.dtype.str_to_dtype", "Unrecognized dtype"),
    (_acquire_outside_a_worker, ValueError, None, "acquire() on x outside the core function"),
    (_range_of_a_float, ValueError, None, "range_ takes"),
    (_kernel_operand_of_another_type, ValueError, None, "'func.call' op operand type mismatch: expected memref"),
    (_fill_into_a_finished_group, ir.IronRuntimeError, None, "fill() of x in TaskGroup(0), which is not an open"),
    (_finish_twice, ir.IronRuntimeError, None, "Task group 0 is not open"),
    (_handle_not_given_to_the_runtime, ValueError, None, "the handle was not given to Runtime"),
    (_worker_outside_the_device, ValueError, None, "is outside npu1"),
    (_two_workers_on_one_tile, ValueError, None, "two Workers on one core tile"),
    (_link_on_a_core_row, ValueError, None, "Expected a MemTile tile, but got tile_type=CoreTile"),
    (_fifo_end_nobody_uses, ValueError, "aie.iron.ObjectFifo.tiles", "Cons endpoint not set"),
    (_rtp_write_to_a_plain_buffer, ValueError, None, "was not made with use_write_rtp=True"),
    (_rtp_write_outside_the_sequence, ValueError, None, "outside the runtime sequence"),
    (_rtp_write_past_the_buffer, IndexError, None, "index outside the buffer"),
    (_rtp_write_of_a_float, TypeError, None, "takes an int"),
    (_rtp_read_outside_its_worker, ValueError, None, "outside the worker"),
    (_barrier_of_two_values, TypeError, None, "positional argument"),
    (_barrier_initial_keyword, TypeError, None, "unexpected keyword argument 'init'"),
    (_barrier_wait_without_a_worker, ValueError, "aie.iron.WorkerRuntimeBarrier.wait_for_value",
     "No workers have been registered for this barrier"),
    (_barrier_release_without_a_worker, ValueError, "aie.iron.WorkerRuntimeBarrier.release_with_value",
     "No workers have been registered for this barrier"),
    (_barrier_wait_without_a_value, TypeError, None, "missing 1 required positional argument: 'value'"),
    (_barrier_wait_in_the_sequence, ValueError, "mlir: UseLockOp", "'aie.use_lock' op expects some parent op"),
    (_barrier_release_in_the_sequence, ValueError, "mlir: UseLockOp", "'aie.use_lock' op expects some parent op"),
    (_barrier_set_outside_the_sequence, ValueError, None, "set(1) outside the runtime sequence"),
    (_barrier_set_past_the_lock, ValueError, "mlir: SetLockOp",
     "'aiex.set_lock' op Lock value exceeds the maximum value of 63"),
    (_barrier_set_negative, ValueError, "mlir: SetLockOp", "'aiex.set_lock' op Lock value exceeds the maximum value"),
    (_barrier_set_of_a_float, TypeError, None, "takes an int lock value, got float"),
    (_barrier_wait_for_a_float, TypeError, None, "takes an int lock value, got float"),
    (_barrier_set_reaching_no_worker, ValueError, None, "reaches no lock: no Worker was given the barrier"),
    (_barrier_wait_in_another_workers_core, ValueError, None, "uses the lock of"),
    (_handle_given_to_two_workers, ValueError, "aie.iron.ObjectFifoHandle.endpoint",
     "Endpoint already set for ObjectFifoHandle x.cons: Set to"),
    (_handle_given_to_a_worker_and_a_link, ValueError, "aie.iron.ObjectFifoHandle.endpoint",
     "Endpoint already set for ObjectFifoHandle x.cons"),
    (_split_offsets_out_of_order, ValueError, "aiecc: ObjectFifoPoolOp", "'aie.objectfifo.pool' op segments must be"),
    (_split_offsets_leave_a_gap, ValueError, "aiecc: ObjectFifoPoolOp", "'aie.objectfifo.segment' op leaves a gap"),
    (_join_offsets_past_the_object, ValueError, "aiecc: ObjectFifoPoolOp",
     "'aie.objectfifo.pool' op segments cover 48 of 32 elements"),
    (_join_output_walk_past_a_slice, ValueError, "mlir: ObjectFifoLinkOp",
     "'aie.objectfifo.link' op specified output stride(s) and size(s) result in out of bounds access in join input, "
     "for index 31 in transfer of length 16."),
    (_split_input_walk_past_a_slice, ValueError, "mlir: ObjectFifoLinkOp",
     "'aie.objectfifo.link' op specified input stride(s) and size(s) result in out of bounds access in distribute"),
    (_split_output_walk_past_its_slice, ValueError, "aiecc: ObjectFifoDmaEndpointOp",
     "'aie.objectfifo.dma_endpoint' op dimensions entry 0 exceeds selected segment 's0' of size 16"),
    (_fifo_in_two_links, ValueError, "mlir: ObjectFifoLinkOp", "'aie.objectfifo' op objectfifo cannot be in more"),
    (_dims_on_a_shim_producer, ValueError, "mlir: ObjectFifoCreateOp", "`dimensionsToStream` data layout"),
    (_dims_on_a_shim_consumer, ValueError, "mlir: ObjectFifoCreateOp", "`dimensionsFromStreamPerConsumer` data"),
    (_transfer_not_whole_words, ValueError, BD, "'aie.dma_bd' op transfer length must be multiple of 4"),
    (_core_bd_too_long, ValueError, BD,
     "'aie.dma_bd' op buffer descriptor length (16384 32-bit words) exceeds the maximum of 16383 words"),
    (_four_dims_on_a_core, ValueError, BD,
     "'aie.dma_bd' op Cannot give more than 3 dimensions for step sizes and wraps on this tile (got 4 dimensions)."),
    (_five_dims_on_a_memtile, ValueError, BD, "'aie.dma_bd' op Cannot give more than 4 dimensions"),
    (_walk_past_the_object, ValueError, BD,
     "'aie.dma_bd' op Specified stride(s) and size(s) result in out of bounds access in buffer, for index 16"),
    (_zero_stride, ValueError, BD, "'aie.dma_bd' op Invalid step size; must be a positive integer."),
    (_core_wrap_over_255, ValueError, BD, "'aie.dma_bd' op Size may not exceed 255."),
    (_memtile_wrap_over_1023, ValueError, BD, "'aie.dma_bd' op Size may not exceed 1023."),
    (_core_stride_over_2_13, ValueError, BD, "'aie.dma_bd' op Stride may not exceed 8192."),
    (_memtile_stride_over_2_17, ValueError, BD, "'aie.dma_bd' op Stride may not exceed 131072."),
    (_i16_inner_stride_not_1, ValueError, BD, "'aie.dma_bd' op For <32b width datatypes, inner-most dim"),
    (_bfp16_inner_stride_not_1, ValueError, BD, "'aie.dma_bd' op For >32b width datatypes, inner-most dim"),
    (_bfp16_inner_run_not_whole_words, ValueError, BD,
     "'aie.dma_bd' op Innermost dim size (2) * 9-byte element width = 18 bytes"),
    (_bfp16_memtile_stride_not_whole_words, ValueError, BD,
     "'aie.dma_bd' op Dim 0 stride (6) * 9-byte element width = 54 bytes"),
    (_i8_inner_run_not_whole_words, ValueError, BD,
     "'aie.dma_bd' op Innermost dim size (2) * 1-byte element width = 2 bytes"),
]


@pytest.mark.parametrize("breaks,exc,where,start", RULES, ids=[r[0].__name__.strip("_") for r in RULES])
def test_the_standin_refuses_what_the_release_refuses(breaks, exc, where, start):
    _fresh()
    with pytest.raises(exc) as info:
        breaks()
    assert start in str(info.value)
    if where is not None:  # the release's own words (its table), up to the first formatted field
        fixed = release_message(where, start).split("{")[0]
        assert str(info.value).startswith(fixed)


def test_shim_transfers_outside_their_buffer_fail_verification():
    """taplib accepts any pattern whose offset is inside; the shim BD verifier refuses one that
    reads past the runtime buffer (DMABDOp::verify), here at resolve_program."""
    api, _ = ir.api()
    design = build_design(small("npu2", "i8", "i16"))
    tasks = list(design.runtime)
    first = next(i for i, op in enumerate(tasks) if op.task is not None and op.task.tensor == "A")
    task = tasks[first].task
    a = design.tensor("A")
    late = replace(task.tap, offset=a.shape[0] * a.shape[1] - task.tap.sizes[-1])  # the last row's last run
    tasks[first] = replace(tasks[first], task=replace(task, tap=late))
    with pytest.raises(ValueError, match=r"out of bounds access in buffer"):
        lower(replace(design, runtime=tuple(tasks)), api).resolve_program()



def test_the_bd_limits_are_the_devices():
    """The stand-in's copy of 1.4.3's AIE2TargetModel (dims, length words, wrap and step bits by tile
    kind) says what gemm_gen/facts/devices.py says of the DMAs (aie-rt's field widths)."""
    from gemm_gen.facts.devices import CORE_DMA, MEM_DMA, SHIM_DMA

    for kind, spec in (("CoreTile", CORE_DMA), ("MemTile", MEM_DMA), ("ShimNOCTile", SHIM_DMA)):
        assert ir.BD_LIMITS[kind] == (spec.dims, spec.max_length, spec.wrap_bits, spec.step_bits)


# ---- our designs meet all of it --------------------------------------------------------------------------
def _tuned(dev, t_in, t_out, col_maj, M=2048, K=2048, N=2048):
    from gemm_gen.spec.config import default_tiles

    return check_config(GemmConfig(dev, M, K, N, *default_tiles(dev, t_in, t_out, K), t_in, t_out, col_maj))


OURS = {
    "npu1 i8 small": small("npu1", "i8", "i16"),
    "npu1 bf16 col-major B": small("npu1", "bf16", "f32", b_col_maj=True),
    "npu1 i16 row-major B rho 2": small("npu1", "i16", "i32", b_col_maj=False, m=16, rho=2),
    "npu2 bf16 small": small("npu2", "bf16", "bf16"),
    "npu2 i8 rho 3": small("npu2", "i8", "i16", m=48, rho=3),
    "npu1 i8 2048^3 default tiles": _tuned("npu1", "i8", "i32", False),
    "npu2 bf16 2048^3 default tiles": _tuned("npu2", "bf16", "bf16", True),
    "npu2 i16 2048^3 default tiles": _tuned("npu2", "i16", "i32", False),
    "npu2 bfp16 ATB": None,  # _ATB, below
}


def _lowered(c):
    api, rec = ir.api()
    lower(build_design(c), api).resolve_program()  # every rule above, mlir-aie's and aiecc's included
    return rec


@pytest.mark.parametrize("name", sorted(OURS))
def test_our_designs_meet_what_1_4_3_verifies(name):
    """Every BD our fifos become passes 1.4.3's checks (resolve_program above), and every join or
    split slice is exactly its own fifo's object: 1.4.3 sizes a slice from the offsets alone
    (AIEObjectFifoSplit.cpp 493-514) and would not refuse a sub-fifo of another size."""
    c = OURS[name] or _ATB
    rec = _lowered(c)
    assert ir.fifo_bds(), "no memtile or core BD was checked"
    for lk in rec.links:
        op = lk["op"]
        if op.kind != "forward":
            side = op.srcs if op.kind == "join" else op.dsts
            assert [size for _, size in op.segments()] == [ir._elems(h.of.obj_type) for h in side], lk


def test_bfp16_blocks_on_memtile_fifos_meet_the_9_byte_rules():
    """1.4.3's DMABDOp::verify counts a v8bfp16ebs8 block as 9 bytes: innermost runs and the other
    steps in whole 32-bit words, innermost stride 1 (AIEDialect.cpp 3364-3426). The ATB design's
    memtile fifos carry such blocks along dims and pass; the same walk with an innermost run of
    blocks that is not whole words does not."""
    rec = _lowered(_ATB)
    bfp = [(w, dims) for w, kind, ty, _, _, dims in ir.fifo_bds()
           if kind == "MemTile" and ir.shape_dtype(ty)[1] == "v8bfp16ebs8" and dims]
    assert bfp, "the ATB design has no memtile fifo of bfp16 blocks with dims"
    where, dims = bfp[0]
    fifo = next(f for f in rec.fifos if f.name == where.split(".")[0])
    *outer, (size, stride) = dims
    short = size - 1 if (size - 1) % 4 else size - 2  # fewer blocks, not a multiple of 4 (of 9 bytes)
    with pytest.raises(ValueError, match=rf"Innermost dim size \({short}\) \* 9-byte element width"):
        ir.verify_bd("MemTile", fifo.obj_type, ir._elems(fifo.obj_type), [*outer, (short, stride)])


# ---- the defects of the earlier lowering, reintroduced, must fail -------------------------------------
ATB = _ATB = GemmConfig("npu2", 512, 256, 1024, 64, 32, 64, 64, rho=2, dtype_in="bfp16", dtype_out="bfp16",
                       acc="bf16")


def test_defect_1_buffers_the_worker_does_not_hold_are_never_placed(monkeypatch):
    """A worker's C accumulator rows that do not reach the Worker (and so are never pinned to its
    tile) cannot be resolved."""
    orig = iron_mod._IronLowering.worker

    def without_buffers(self, index, kernels):  # untiled Buffers reach the core function by closure
        made = orig(self, index, kernels)
        bufs = [a for a in made.fn_args if isinstance(a, ir.Buffer)]
        for b in bufs:
            b._tile, b._explicit_tile, b._owner_worker = None, False, None
        n, inner = len(made.fifos), made.core_fn
        made.fn_args = [a for a in made.fn_args if not isinstance(a, ir.Buffer)]
        made.buffers.clear()
        made.core_fn = lambda *args: inner(*args[:n], *bufs, *args[n:])
        return made

    api, _ = ir.api()
    lower(build_design(ATB), api).resolve_program()  # as lowered: fine
    monkeypatch.setattr(iron_mod._IronLowering, "worker", without_buffers)
    api, _ = ir.api()
    with pytest.raises(ValueError, match=r"Cannot resolve buffer until it has been placed \(C_acc_0_0\)"):
        lower(build_design(ATB), api).resolve_program()


def test_defect_2_kernel_arguments_of_the_wrong_kind_or_number(monkeypatch):
    """What func.call cannot take: a fifo handle where the acquired object belongs, or the ATB
    kernel called without its C slice."""
    api, _ = ir.api()
    c = small("npu2", "i8", "i16", m=48, rho=3)
    orig = iron_mod._core_fn

    def handles_not_objects(program, fifo_names, *rest):
        fn = orig(program, fifo_names, *rest)

        def core_fn(*args):
            for h in args[: len(fifo_names)]:  # acquire() now hands back the handle itself
                h.acquire = (lambda hh: (lambda n: (ir.REC.ops.append(("acquire", hh.name, n)), hh)[1]))(h)
            fn(*args)

        return core_fn

    monkeypatch.setattr(iron_mod, "_core_fn", handles_not_objects)
    with pytest.raises(ValueError, match=r"'func.call' op operand type mismatch: expected a memref"):
        lower(build_design(c), api).resolve_program()
    monkeypatch.setattr(iron_mod, "_core_fn", orig)

    def drop_scalar(program, *rest):
        from gemm_gen.design.ir import Call, Loop

        def strip(ops):
            return tuple(Loop(op.count, strip(op.body)) if isinstance(op, Loop)
                         else replace(op, scalars=()) if isinstance(op, Call) else op for op in ops)

        return orig(strip(program), *rest)

    monkeypatch.setattr(iron_mod, "_core_fn", drop_scalar)
    api, _ = ir.api()
    # A, B, the C object, the accumulator rows and the slice: five
    with pytest.raises(ValueError, match=r"Kernel 'matmul_i8_i32' expects 5 argument\(s\), but 4 were provided"):
        lower(build_design(c), api).resolve_program()


def test_defect_3_buffers_made_while_tracing_are_never_placed(monkeypatch):
    """The old LocalBuffer fallback made buffers outside any worker's hold: 1.4.3 has only Buffer,
    and a Buffer created inside core_fn is never handed to a Worker, so it cannot resolve."""
    api, _ = ir.api()
    assert not hasattr(ir, "LocalBuffer") and not hasattr(api, "LocalBuffer")
    orig = iron_mod._IronLowering.worker

    def late_buffers(self, index, kernels):
        wk = self.d.workers[index]
        made = orig(self, index, kernels)
        inner = made.core_fn
        n_fifos = len(made.fifos)

        def core_fn(*args):
            local = [ir.Buffer(type=self.ty(b.shape, b.dtype), name=f"{b.name}_late") for b in wk.buffers]
            inner(*args[:n_fifos], *local, *args[n_fifos + len(local):])

        made.core_fn = core_fn
        return made

    monkeypatch.setattr(iron_mod._IronLowering, "worker", late_buffers)
    with pytest.raises(ValueError, match=r"Cannot resolve buffer until it has been placed \(C_acc_0_0_late\)"):
        lower(build_design(ATB), api).resolve_program()


def test_shim_handles_must_reach_the_runtime_through_its_arguments(monkeypatch):
    """1.4.3 binds a shim end when its handle is given to Runtime(seq_fn, fn_args) and resolves the
    fifos before the body runs: a lowering that lets the body reach the handles by closure fails."""
    api, _ = ir.api()
    design = build_design(small("npu2", "i8", "i16"))
    real = ir.Runtime.__init__

    def without_handles(self, seq_fn, fn_args=None, *, strict_task_groups=True):
        n_tensors = len(design.tensors)
        handles = list(fn_args[n_tensors:])
        real(self, lambda *a: seq_fn(*a, *handles), fn_args[:n_tensors], strict_task_groups=strict_task_groups)

    monkeypatch.setattr(ir.Runtime, "__init__", without_handles)
    with pytest.raises(ValueError, match=r"(Prod|Cons) endpoint not set for [ABC]_L[23]L[23]_0"):
        lower(design, api).resolve_program()
