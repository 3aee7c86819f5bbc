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
from gemm_gen.config import GemmConfig
from gemm_gen.design import build_design

from . import iron_recorder as ir
from .conftest import small

REFUSALS = json.loads((Path(__file__).parent / "data" / "iron_1_4_3_refusals.json").read_text())["refusals"]


def release_message(where: str, start: str) -> str:
    """The message of the pinned release's refusal in `where` that starts with `start` (so a rule
    below is only ever one the release has)."""
    found = [r["message"] for r in REFUSALS if r["where"].startswith(where) and r["message"].startswith(start)]
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

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
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


# ---- the defects of the earlier lowering, reintroduced, must fail -------------------------------------
ATB = GemmConfig("npu2", 512, 256, 1024, 64, 32, 64, 64, rho=2, dtype_in="bfp16", dtype_out="bfp16", acc="bf16")


def test_defect_1_buffers_the_worker_does_not_hold_are_never_placed(monkeypatch):
    """A worker's C accumulator rows that do not reach the Worker (and so are never pinned to its
    tile) cannot be resolved."""
    orig = iron_mod._Lowering.worker

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
    monkeypatch.setattr(iron_mod._Lowering, "worker", without_buffers)
    api, _ = ir.api()
    with pytest.raises(ValueError, match=r"Cannot resolve buffer until it has been placed \(C_acc_0_0\)"):
        lower(build_design(ATB), api).resolve_program()


def test_defect_2_kernel_arguments_of_the_wrong_kind_or_number(monkeypatch):
    """What func.call cannot take: a fifo handle where the acquired object belongs, or the ATB
    kernel called without its C slice."""
    api, _ = ir.api()
    c = small("npu2", "i8", "i16", m=48, rho=3)
    orig = iron_mod._core_fn

    def handles_not_objects(program, fifo_names, buffer_names, kernel_names, range_):
        fn = orig(program, fifo_names, buffer_names, kernel_names, range_)

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
        from gemm_gen.design.model import Call, Loop

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
    orig = iron_mod._Lowering.worker

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

    monkeypatch.setattr(iron_mod._Lowering, "worker", late_buffers)
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
