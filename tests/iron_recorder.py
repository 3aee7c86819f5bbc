"""A recording stand-in for the parts of mlir-aie's IRON API the lowering calls. TESTS ONLY.

It is not IRON: it keeps IRON's signatures (python/iron @1e400306: ObjectFifo, ObjectFifoHandle
join/split/forward, Worker, Kernel, Runtime fill/drain/task_group/finish_task_group, Program,
taplib TensorAccessPattern), repeats the argument checks IRON makes, and records what it is told,
so tests can compare the lowered program with the Design. resolve_program() "traces" each worker's
core_fn once, as IRON does (range_ loops are traced once and recorded as loops).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class Tile:
    col: int
    row: int


class NPU1:
    name = "npu1"


class NPU2:
    name = "npu2"


class v8bfp16ebs8(np.generic):  # noqa: N801 - IRON's marker type for 9-byte bfp16 blocks
    """Stand-in for aie.helpers.util.v8bfp16ebs8 (a marker np.generic subclass there too)."""


class Buffer:
    """IRON's Buffer(type, initial_value, name): a Worker passed it in fn_args places it."""

    def __init__(self, type=None, initial_value=None, name=None, tile=None):  # noqa: A002 - IRON's names
        if type is None and initial_value is None:
            raise ValueError("Must provide either type, initial value, or both.")
        self.type, self.name, self.tile = type, name, tile
        REC.buffers.append(self)

    def __repr__(self) -> str:
        return f"<buf {self.name}>"


def str_to_dtype(name: str) -> Any:
    return {"bf16": ml_dtypes.bfloat16, "i8": np.int8, "i16": np.int16, "i32": np.int32, "f32": np.float32}[name]


def shape_dtype(obj_type: Any) -> tuple[tuple[int, ...], str]:
    """(shape, dtype name) of np.ndarray[shape, np.dtype[T]], as IRON reads obj types; a scalar
    type such as np.int32 (a kernel's by-value argument) is ((), its name)."""
    if isinstance(obj_type, type) and issubclass(obj_type, np.generic):
        return (), np.dtype(obj_type).name
    shape, dt = obj_type.__args__
    if dt.__args__[0] is v8bfp16ebs8:
        return tuple(shape), "v8bfp16ebs8"
    shape, dt = obj_type.__args__
    return tuple(shape), np.dtype(dt.__args__[0]).name


class TensorAccessPattern:
    def __init__(self, tensor_dims, offset, sizes, strides):  # taplib's checks (utils.py)
        if len(sizes) != len(strides) or not sizes:
            raise ValueError("len(sizes) != len(strides)")
        if any(s < 1 for s in sizes) or any(s < 0 for s in strides):
            raise ValueError("sizes must be >= 1 and strides >= 0")
        if not 0 <= offset < int(np.prod(tensor_dims)):
            raise ValueError(f"offset {offset} outside the tensor")
        self.tensor_dims, self.offset, self.sizes, self.strides = tuple(tensor_dims), offset, list(sizes), list(strides)


class Recorder:
    """Everything the stand-in was told, in order."""

    def __init__(self) -> None:
        self.fifos: list[ObjectFifo] = []
        self.links: list[dict[str, Any]] = []
        self.kernels: list[Kernel] = []
        self.workers: list[Worker] = []
        self.buffers: list[Buffer] = []
        self.ops: list[tuple] = []


REC = Recorder()


class ObjectFifo:
    def __init__(self, obj_type, depth=2, name=None, dims_to_stream=None, dims_from_stream_per_cons=None,
                 plio=False, pad_dimensions=None):
        if isinstance(depth, int) and depth < 1:
            raise ValueError("depth must be > 0")
        self.obj_type, self.depth, self.name = obj_type, depth, name
        self.dims_to_stream, self.dims_from_stream_per_cons = dims_to_stream, dims_from_stream_per_cons
        self._prod: ObjectFifoHandle | None = None
        self._cons: list[ObjectFifoHandle] = []
        REC.fifos.append(self)

    def prod(self, depth=None):
        if self._prod is None:
            self._prod = ObjectFifoHandle(self, True, depth if depth is not None else self.depth)
        return self._prod

    def cons(self, depth=None, dims_from_stream=None):
        h = ObjectFifoHandle(self, False, depth if depth is not None else self.depth,
                             dims_from_stream if dims_from_stream is not None else self.dims_from_stream_per_cons)
        self._cons.append(h)
        return h


class ObjectFifoHandle:
    def __init__(self, of, is_prod, depth, dims_from_stream=None):
        if is_prod and dims_from_stream:
            raise ValueError("Can only specify dims_from_stream for cons handles")
        self.of, self.is_prod, self.depth, self.dims_from_stream = of, is_prod, depth, dims_from_stream
        self.endpoint: Any = None

    @property
    def name(self):
        return self.of.name

    def _set_endpoint(self, endpoint):
        if self.endpoint is not None and self.endpoint != endpoint:
            raise ValueError(f"Endpoint already set for {self.name}")
        self.endpoint = endpoint

    def acquire(self, num_elem):
        if self.depth < num_elem:
            raise ValueError("acquire more than depth")
        REC.ops.append(("acquire", self.name, num_elem))
        return f"<{self.name}>"

    def release(self, num_elem):
        if self.depth < num_elem:
            raise ValueError("release more than depth")
        REC.ops.append(("release", self.name, num_elem))

    def join(self, offsets, placement=None, depths=None, obj_types=None, names=None, dims_to_stream=None,
             dims_from_stream=None, plio=False):
        if not self.is_prod:
            raise ValueError("Cannot join() a cons ObjectFifoHandle")
        n = len(offsets)
        for arg in (depths, obj_types, names, dims_to_stream, dims_from_stream):
            if arg is not None and len(arg) != n:
                raise ValueError("argument count does not match number of offsets")
        subs = [ObjectFifo(obj_types[i], depth=depths[i], name=names[i], dims_to_stream=dims_to_stream[i] or None)
                for i in range(n)]
        for i, s in enumerate(subs):
            s.cons(depth=depths[i], dims_from_stream=(dims_from_stream or [[]] * n)[i] or None)._set_endpoint(placement)
        self._set_endpoint(placement)
        REC.links.append({"kind": "join", "placement": placement, "srcs": names, "dsts": [self.name],
                          "offsets": list(offsets)})
        return subs

    def split(self, offsets, placement=None, depths=None, obj_types=None, names=None, dims_to_stream=None,
              dims_from_stream=None, plio=False):
        if self.is_prod:
            raise ValueError("Cannot split() a prod ObjectFifoHandle")
        n = len(offsets)
        depths = depths or [self.depth] * n
        obj_types = obj_types or [self.of.obj_type] * n
        names = names or [f"{self.name}_split{i}" for i in range(n)]
        dims_to_stream = dims_to_stream or [[]] * n
        dims_from_stream = dims_from_stream or [[]] * n
        subs = [ObjectFifo(obj_types[i], depth=depths[i], name=names[i], dims_to_stream=dims_to_stream[i] or None,
                           dims_from_stream_per_cons=dims_from_stream[i] or None) for i in range(n)]
        for s in subs:
            s.prod()._set_endpoint(placement)
        self._set_endpoint(placement)
        REC.links.append({"kind": "split" if n > 1 else "forward", "placement": placement, "srcs": [self.name],
                          "dsts": names, "offsets": list(offsets)})
        return subs

    def forward(self, placement=None, obj_type=None, depth=None, name=None, dims_to_stream=None,
                dims_from_stream=None, plio=False):
        if self.is_prod:
            raise ValueError("Cannot forward a prod ObjectFifoHandle")
        return self.split([0], placement=placement, obj_types=[obj_type] if obj_type else None,
                          depths=[depth] if depth else None, names=[name] if name else [f"{self.name}_fwd"],
                          dims_to_stream=[dims_to_stream] if dims_to_stream else None,
                          dims_from_stream=[dims_from_stream] if dims_from_stream else None)[0]


class Kernel:
    def __init__(self, name, object_file_name, arg_types=[]):  # noqa: B006 - IRON's signature
        self.name, self.object_file_name, self.arg_types = name, object_file_name, list(arg_types)
        REC.kernels.append(self)

    def __call__(self, *args):
        REC.ops.append(("call", self.name, args))


class Worker:
    def __init__(self, core_fn, fn_args=[], placement=None, while_true=True, stack_size=None,  # noqa: B006
                 allocation_scheme=None, trace=None, trace_events=None):
        if any(isinstance(a, ObjectFifo) for a in fn_args):
            raise ValueError("pass ObjectFifoHandles, not ObjectFifos, to a Worker")
        self.core_fn, self.fn_args, self.placement, self.stack_size = core_fn, list(fn_args), placement, stack_size
        for a in fn_args:
            if isinstance(a, ObjectFifoHandle):
                a._set_endpoint(placement)
            elif isinstance(a, Buffer):
                if a.tile is not None and a.tile != placement:
                    raise ValueError(f"buffer {a.name} is pinned to another tile")
                a.tile = placement  # IRON pins a worker's own buffers to its tile
        self.trace: list[tuple] = []
        REC.workers.append(self)


def range_(n):
    """IRON traces the body of a range_ loop once (scf.for)."""
    REC.ops.append(("loop", n))
    yield 0
    REC.ops.append(("end",))


@dataclass
class TaskGroup:
    index: int
    tasks: list[tuple] = field(default_factory=list)


class Runtime:
    def __init__(self, strict_task_groups=True):
        self.strict = strict_task_groups
        self.open: list[TaskGroup] = []
        self.ops: list[tuple] = []
        self.types: list[Any] = []
        self._next = 0
        self.in_sequence = False

    @contextmanager
    def sequence(self, *input_types):
        self.types = list(input_types)
        self.in_sequence = True
        yield tuple(f"<arg{i}>" for i in range(len(input_types)))
        self.in_sequence = False
        if self.open:
            raise ValueError(f"Failed to close task groups: {self.open}")

    def task_group(self):
        tg = TaskGroup(self._next)
        self._next += 1
        self.open.append(tg)
        return tg

    def finish_task_group(self, task_group):
        self.open.remove(task_group)
        self.ops.append(("finish", task_group.index))

    def _task(self, kind, handle, buf, tap, task_group, wait, placement):
        if not self.in_sequence:
            raise ValueError("fill/drain outside sequence()")
        if task_group is None and self.strict:
            raise ValueError("this test expects every task in an explicit task group")
        if task_group not in self.open:
            raise ValueError("task group is not open")
        handle._set_endpoint(("runtime", placement))
        self.ops.append((kind, handle.name, buf, tap, task_group.index, wait, placement))

    def fill(self, in_fifo, source, tap=None, task_group=None, wait=False, placement=None):
        if not in_fifo.is_prod:
            raise ValueError("fill takes a producer handle")
        self._task("fill", in_fifo, source, tap, task_group, wait, placement)

    def drain(self, out_fifo, dest, tap=None, task_group=None, wait=False, placement=None):
        if out_fifo.is_prod:
            raise ValueError("drain takes a consumer handle")
        self._task("drain", out_fifo, dest, tap, task_group, wait, placement)

    def start(self, *args):
        for w in args:
            if not isinstance(w, Worker):
                raise ValueError("Runtime can only start Worker objects")
            self.ops.append(("start", w.placement))


class Program:
    def __init__(self, device, rt):
        self.device, self.rt = device, rt

    def resolve_program(self, placer=None):
        """Trace each worker's core_fn once and return a deterministic text dump."""
        for w in REC.workers:
            mark = len(REC.ops)
            w.core_fn(*w.fn_args)
            w.trace = REC.ops[mark:]
            del REC.ops[mark:]
        return Dump(self)


class Dump:
    def __init__(self, program: Program) -> None:
        self.program = program

    def __str__(self) -> str:
        lines = [f"device {self.program.device.name}"]
        for f in sorted(REC.fifos, key=lambda f: f.name):
            lines.append(f"fifo {f.name} {shape_dtype(f.obj_type)} depth={f.depth} to={f.dims_to_stream} "
                         f"from={f.dims_from_stream_per_cons}")
        lines += [f"link {lk}" for lk in REC.links]
        lines += [f"kernel {k.name} {k.object_file_name} {[shape_dtype(t) for t in k.arg_types]}" for k in REC.kernels]
        lines += [f"buffer {b.name} {shape_dtype(b.type)} at {b.tile}" for b in REC.buffers]
        for w in REC.workers:
            lines.append(f"worker {w.placement} stack={w.stack_size} trace={w.trace}")
        lines += [f"rt {op[:3]} {op[3].offset if len(op) > 3 and op[3] is not None else ''} "
                  f"{op[3].sizes if len(op) > 3 else ''} {op[4:] if len(op) > 4 else ''}" for op in self.program.rt.ops]
        return "\n".join(lines) + "\n"


def api():
    """A fresh recorder with the IronApi the lowering takes."""
    from gemm_gen.backends.iron import IronApi

    global REC
    REC = Recorder()
    return IronApi(ObjectFifo, Worker, Kernel, Runtime, Program, Tile, {"npu1": NPU1, "npu2": NPU2}, range_,
                   TensorAccessPattern, str_to_dtype, Buffer, {"bfp16": v8bfp16ebs8}), REC
