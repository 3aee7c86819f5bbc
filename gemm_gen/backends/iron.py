"""Lower a Design to an IRON program of mlir-aie 1.4.3, and to MLIR (mlir-aie imported only when used).

The translation is one to one, in the API of the pinned release (pins.py; python/iron at v1.4.3):

- every Design ObjectFifo becomes an IRON ObjectFifo: the shim-fed and the joined ones constructed
  (keyword-only options), the others made by forward / split / join on their memtile (`tile=`);
- a shim end is pinned by its handle: `.prod(tile=shim)` for a fill, `.cons(tile=shim)` for a drain;
- every Worker is placed with `tile=` and runs the Design's loop IR; a worker's own L1 buffers are
  IRON Buffers placed on the worker's tile and handed to it and to its kernels;
- the runtime is `Runtime(seq_fn, [A, B, C types, *shim handles])` whose body fills and drains with
  the handles in the Design's task groups (`TaskGroup()`, `group=`, `finish()`);
- `Program(device, rt, workers=...)` resolves with every tile given, so mlir-aie's placement pass
  has nothing left to choose.
- a worker that reads runtime parameters gets a `WorkerRuntimeBarrier` (python/iron/worker.py at v1.4.3,
  L301-354: its Worker makes one lock on the worker's tile; `wait_for_value` is an acquire-equal of it in the
  core, `release_with_value` a release, `set` an aiex.set_lock in the runtime sequence). The sequence sets it
  after the parameter writes, which 1.4.3 lowers to plain write32s ordered against nothing else
  (AIEDmaToNpu.cpp RtpToWrite32Pattern); the core waits on it before reading them.

W4A16 (a design with group scales: groupquant): the Design already counts B's fifo objects, kernel argument and
host tensor in words of whole B objects (groupquant.object_bytes each: its values and its scale / zero-point rows,
moved linearly on the memtile), so they lower as every int4 buffer does, flat uint8. The k x n bf16 tile each matmul
dequantizes B into is one of the Design's worker buffers (`B_deq_<col>_<row>`, the matmul's last buffer
argument, before any int32 scalar: the kernel's `bfloat16 *b_deq`), lowered like every other: a core-local
IRON Buffer on the worker's tile (python/iron/buffer.py at v1.4.3: `Buffer(type=, name=, tile=)`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..design.ir import (
    Acquire,
    BarrierRelease,
    BarrierWait,
    Call,
    Design,
    Link,
    LocalBuffer,
    Loop,
    ObjectFifo,
    Op,
    Release,
    TileRef,
)
from ..design.tap import Tap
from ..facts.devices import DEVICES
from ..facts.dtypes import dtype
from ..facts.errors import BuildError, ConfigError, ToolchainMissing
from ..spec.rules import shared_l1
from . import pins
from .toolchain import import_module

SHIM_TAP_DIMS = 4  # shim BD tasks read a leading size > 1 as a repeat count: always give 4 dims


@dataclass(frozen=True)
class IronApi:
    """The IRON names the lowering uses: mlir-aie's real ones, or a test's recording stand-in."""

    ObjectFifo: Any
    ObjectFifoHandle: Any
    Worker: Any
    Kernel: Any
    Buffer: Any
    Runtime: Any
    TaskGroup: Any
    Program: Any
    Tile: Any
    # mlir-aie device name (facts.devices' column_devices: npu1, npu1_1col, ...) -> IRON's class
    devices: dict[str, Any]
    range_: Callable[..., Any]
    TensorAccessPattern: Any
    str_to_dtype: Callable[[str], Any]
    block_types: dict[str, Any]  # our block type name -> IRON's element type (bfp16: v8bfp16ebs8)
    WorkerRuntimeBarrier: Any

    def callables(self) -> dict[str, Callable[..., Any]]:
        """Each IRON callable the lowering uses, under its name in the pinned table."""
        return {
            "aie.iron.ObjectFifo.__init__": self.ObjectFifo.__init__,
            "aie.iron.ObjectFifo.prod": self.ObjectFifo.prod,
            "aie.iron.ObjectFifo.cons": self.ObjectFifo.cons,
            **{f"aie.iron.ObjectFifoHandle.{m}": getattr(self.ObjectFifoHandle, m)
               for m in ("acquire", "release", "fill", "drain", "join", "split", "forward")},
            "aie.iron.Worker.__init__": self.Worker.__init__,
            "aie.iron.Kernel.__init__": self.Kernel.__init__,
            "aie.iron.Buffer.__init__": self.Buffer.__init__,
            "aie.iron.Runtime.__init__": self.Runtime.__init__,
            "aie.iron.TaskGroup.__init__": self.TaskGroup.__init__,
            "aie.iron.TaskGroup.finish": self.TaskGroup.finish,
            "aie.iron.Program.__init__": self.Program.__init__,
            "aie.iron.Program.resolve_program": self.Program.resolve_program,
            "aie.iron.device.Tile.__init__": self.Tile.__init__,
            "aie.iron.controlflow.range_": self.range_,
            "aie.helpers.taplib.TensorAccessPattern.__init__": self.TensorAccessPattern.__init__,
            "aie.iron.dtype.str_to_dtype": self.str_to_dtype,
            **{f"aie.iron.WorkerRuntimeBarrier.{m}": getattr(self.WorkerRuntimeBarrier, m)
               for m in ("__init__", "wait_for_value", "set", "release_with_value")},
        }

    def check(self) -> None:
        """ToolchainMissing in one sentence unless every callable is the pinned release's."""
        for name, fn in self.callables().items():
            problem = pins.signature_problem(name, fn)
            if problem:
                raise ToolchainMissing(f"the installed IRON is not mlir-aie {pins.MLIR_AIE_RELEASE}'s, which gemm_gen "
                                       f"is written against: {problem}", pins.MLIR_AIE.install)


def _first(*candidates: tuple[str, str]) -> Any:
    """The first importable `module.attr` of the candidates (IRON moved some names between modules)."""
    for module, attr in candidates:
        try:
            found = getattr(import_module(module, "mlir-aie's IRON API", pins.MLIR_AIE.install), attr, None)
        except ToolchainMissing:
            continue
        if found is not None:
            return found
    names = " or ".join(f"{m}.{a}" for m, a in candidates)
    raise ToolchainMissing(f"this mlir-aie has no {names} (gemm_gen needs release {pins.MLIR_AIE_RELEASE})",
                           pins.MLIR_AIE.install)


def _block_types() -> dict[str, Any]:
    """bfp16's IRON element type where this mlir-aie has it (the 2026 block-datatype examples import
    it from aie.dialects.aiex); without it only bfp16 designs stop, when they are lowered."""
    try:
        return {"bfp16": _first(("aie.dialects.aiex", "v8bfp16ebs8"), ("aie.helpers.util", "v8bfp16ebs8"))}
    except ToolchainMissing:
        return {}


def device_class(name: str) -> str:
    r"""IRON's Device class for an aie.device name: aie.iron.device makes one per AIEDevice value, named by
    re.sub(r"NPU(\d+)_(\d+)COL", r"NPU\1Col\2", name.upper()) (npu1_2col -> NPU1Col2; mlir-aie
    python/iron/device/device.py, its create_class loop, read at a stored 2026 commit 0396c43b, not at the tag)."""
    return re.sub(r"NPU(\d+)_(\d+)COL", r"NPU\1Col\2", name.upper())


def device_names() -> tuple[str, ...]:
    """Every aie.device a design may be built for (hw.devices: each device's column_devices), sorted."""
    return tuple(sorted({name for dev in DEVICES.values() for name in dev.column_devices.values()}))


def iron_api() -> IronApi:
    """mlir-aie's IRON, checked against the pinned release; ToolchainMissing in one sentence otherwise."""
    iron = import_module("aie.iron", "mlir-aie's IRON API", pins.MLIR_AIE.install)
    device = import_module("aie.iron.device", "mlir-aie's IRON API", pins.MLIR_AIE.install)
    api = IronApi(
        iron.ObjectFifo,
        _first(("aie.iron.dataflow", "ObjectFifoHandle"), ("aie.iron.dataflow.objectfifo", "ObjectFifoHandle")),
        iron.Worker, iron.Kernel, _first(("aie.iron", "Buffer")), iron.Runtime,
        _first(("aie.iron", "TaskGroup"), ("aie.iron.runtime", "TaskGroup"),
               ("aie.iron.runtime.taskgroup", "TaskGroup")),
        iron.Program, device.Tile, {name: _first(("aie.iron.device", device_class(name))) for name in device_names()},
        _first(("aie.iron.controlflow", "range_")), _first(("aie.helpers.taplib", "TensorAccessPattern")),
        _first(("aie.iron.dtype", "str_to_dtype"), ("aie.iron", "str_to_dtype")),
        _block_types(),
        _first(("aie.iron", "WorkerRuntimeBarrier"), ("aie.iron.worker", "WorkerRuntimeBarrier")),
    )
    api.check()
    return api


def dims(tap: Tap | None, elem: str = "i32") -> list[tuple[int, int]] | None:
    """A Design pattern as IRON's dims_to_stream / dims_from_stream: (size, stride), outermost first,
    in IRON's elements (a bfp16 tile of the Design is 8 v8bfp16ebs8 blocks)."""
    if tap is None:
        return None
    t = tap.scaled(dtype(elem).blocks_per_unit)
    return list(zip(t.sizes, t.strides))


def check_lowerable(design: Design) -> None:
    """ConfigError in one line for a design the lowering does not take yet (neighbour-shared L1: docs/shared_l1.md
    section 10), asked before mlir-aie or any tool is looked for, so that installing them would not change the
    answer."""
    unbuilt = shared_l1.not_built(design.config.array.share_l1, "the IRON lowering")
    if unbuilt is not None:
        raise ConfigError(*unbuilt)


class _IronLowering:
    def __init__(self, design: Design, api: IronApi) -> None:
        check_lowerable(design)
        self.d, self.api = design, api
        self.fifos: dict[str, Any] = {}
        self.prod_handles: dict[str, Any] = {}
        self.rtps: dict[tuple[TileRef, str], Any] = {}  # (tile, name) -> a runtime-parameter Buffer
        self.barriers: dict[tuple[TileRef, str], Any] = {}  # (tile, name) -> a worker's WorkerRuntimeBarrier

    def tile(self, t: TileRef) -> Any:
        return self.api.Tile(t.col, t.row)

    def ty(self, shape: tuple[int, ...], name: str) -> Any:
        """IRON's buffer type: np.ndarray[shape, np.dtype[T]]. A bfp16 buffer of the Design (a
        shape in 8 x 8 tiles) is a flat array of v8bfp16ebs8 blocks, 8 per tile, as mlir-aie's
        block-datatype designs type theirs (the DMAs address it linearly either way)."""
        t = dtype(name)
        if t.is_block:
            if t.name not in self.api.block_types:
                raise ToolchainMissing(f"this mlir-aie has no {t.name} element type (v8bfp16ebs8 in aie.dialects.aiex "
                                       f"or aie.helpers.util)", pins.MLIR_AIE.install)
            n = 1
            for d in shape:
                n *= d
            return np.ndarray[(n * t.blocks_per_unit,), np.dtype[self.api.block_types[t.name]]]  # type: ignore[name-defined,misc]
        if t.is_packed:  # int4: a flat array of bytes (blocks_per_unit per word unit), as mlir-air and IRON
            n = 1       # type their int4 buffers; whether mlir-aie 1.4.3 takes an i4 memref is unchecked
            for d in shape:
                n *= d
            return np.ndarray[(n * t.blocks_per_unit,), np.dtype[np.uint8]]  # type: ignore[name-defined,misc]
        return np.ndarray[shape, np.dtype[self.api.str_to_dtype(name)]]  # type: ignore[valid-type,misc]

    def construct(self, f: ObjectFifo) -> Any:
        of = self.api.ObjectFifo(self.ty(f.obj_shape, f.dtype), depth=f.depth, name=f.name,
                                 dims_to_stream=dims(f.dims_to_stream, f.dtype),
                                 dims_from_stream_per_cons=dims(f.dims_from_stream, f.dtype))
        self.fifos[f.name] = of
        return of

    def link(self, lk: Link) -> None:
        srcs = [self.d.fifo(n) for n in lk.srcs]
        dsts = [self.d.fifo(n) for n in lk.dsts]
        place = self.tile(lk.tile)
        if lk.kind == "join":
            (out,) = dsts
            made = self.prod(out.name).join(
                self.offsets(lk, out), tile=place, depths=[f.depth for f in srcs],
                obj_types=[self.ty(f.obj_shape, f.dtype) for f in srcs], names=[f.name for f in srcs],
                dims_to_stream=[dims(f.dims_to_stream, f.dtype) or [] for f in srcs],
                dims_from_stream=[dims(f.dims_from_stream, f.dtype) or [] for f in srcs])
            self.fifos.update({f.name: m for f, m in zip(srcs, made)})
            return
        (src,) = srcs
        cons = self.fifos[src.name].cons()  # the memtile's end of the shim-fed fifo
        if lk.kind == "forward":
            (dst,) = dsts
            self.fifos[dst.name] = cons.forward(
                tile=place, obj_type=self.ty(dst.obj_shape, dst.dtype), depth=dst.depth, name=dst.name,
                dims_to_stream=dims(dst.dims_to_stream, dst.dtype),
                dims_from_stream=dims(dst.dims_from_stream, dst.dtype))
            return
        made = cons.split(
            self.offsets(lk, src), tile=place, depths=[f.depth for f in dsts],
            obj_types=[self.ty(f.obj_shape, f.dtype) for f in dsts], names=[f.name for f in dsts],
            dims_to_stream=[dims(f.dims_to_stream, f.dtype) or [] for f in dsts],
            dims_from_stream=[dims(f.dims_from_stream, f.dtype) or [] for f in dsts])
        self.fifos.update({f.name: m for f, m in zip(dsts, made)})

    @staticmethod
    def offsets(lk: Link, big: ObjectFifo) -> list[int]:
        """A join's or split's slice offsets in IRON's elements."""
        return [o * dtype(big.dtype).blocks_per_unit for o in lk.offsets]

    def prod(self, name: str) -> Any:
        """The fifo's one producer handle (IRON returns the same handle on every prod() call)."""
        if name not in self.prod_handles:
            self.prod_handles[name] = self.fifos[name].prod()
        return self.prod_handles[name]

    def worker(self, index: int, kernels: dict[str, Any]) -> Any:
        wk = self.d.workers[index]
        names = sorted(_fifo_names(wk.program))
        handles = [self.prod(n) if self.d.fifo(n).producer == wk.tile else self.fifos[n].cons() for n in names]
        ks = [kernels[k] for k in wk.kernels]
        bufs = [self.buffer(b, wk.tile) for b in wk.buffers]
        buffer_names = [b.name for b in wk.buffers]
        core_fn = _core_fn(wk.program, names, buffer_names, list(wk.kernels), self.api.range_)
        # its barrier: the last argument (IRON's Worker registers a lock for it on the worker's tile)
        barrier = []
        if wk.barrier is not None:
            barrier = [self.barriers.setdefault((wk.tile, wk.barrier), self.api.WorkerRuntimeBarrier())]
        # the L1 allocator the plan chose (design/l1_banks.py); the reservations ride along as unused arguments
        return self.api.Worker(core_fn, [*handles, *bufs, *ks, *barrier], tile=self.tile(wk.tile),
                               stack_size=wk.stack_bytes, allocation_scheme=wk.allocation_scheme)

    def buffer(self, b: LocalBuffer, at: TileRef) -> Any:
        """A worker's own L1 buffer: an IRON Buffer placed on the worker's tile, at the address or in
        the bank the L1 plan pins it to, with its initial value (the tanh table: IRON 1.4.3's
        Buffer(initial_value=) becomes aie.buffer's initial_value, which aiecc writes into the tile's memory
        when it configures the array: AIERT.cpp initBuffers)."""
        init = None if b.initial_value is None else \
            np.asarray(b.initial_value, dtype=dtype(b.dtype).host).reshape(b.shape)
        buf = self.api.Buffer(type=self.ty(b.shape, b.dtype), initial_value=init, name=b.name, tile=self.tile(at),
                              address=b.address, mem_bank=b.mem_bank, use_write_rtp=b.rtp)
        if b.rtp:  # written by the runtime sequence (aiex.npu.rtp_write)
            self.rtps[(at, b.name)] = buf
        return buf

    def tap(self, t: Tap, numel: int, elem: str) -> Any:
        t = t.scaled(dtype(elem).blocks_per_unit)
        pad = SHIM_TAP_DIMS - len(t.sizes)
        return self.api.TensorAccessPattern((numel,), t.offset, [1] * pad + list(t.sizes),
                                            [0] * pad + list(t.strides))

    def shim_handles(self) -> dict[str, Any]:
        """The shim end of every fifo the runtime fills or drains, pinned to its shim tile."""
        ends: dict[str, Any] = {}
        for t in self.d.tasks:
            if t.fifo not in ends:
                of = self.fifos[t.fifo]
                if t.direction == "fill":
                    ends[t.fifo] = self.prod_handles[t.fifo] = of.prod(tile=self.tile(t.shim))
                else:
                    ends[t.fifo] = of.cons(tile=self.tile(t.shim))
        return dict(sorted(ends.items()))

    def program(self) -> Any:
        d, api = self.d, self.api
        linked = {n for lk in d.links for n in (lk.srcs if lk.kind != "join" else lk.dsts)}
        for f in d.fifos:
            if f.name in linked or not any(f.name in (*lk.srcs, *lk.dsts) for lk in d.links):
                self.construct(f)
        ends = self.shim_handles()
        for lk in d.links:
            self.link(lk)
        missing = [f.name for f in d.fifos if f.name not in self.fifos]
        assert not missing, f"fifos without an IRON object: {missing}"

        kernels = {k.name: api.Kernel(k.name, k.object_file,
                                      [*(self.ty(s, t) for s, t in zip(k.arg_shapes, k.arg_dtypes)),
                                       *(np.int32 for _ in k.scalar_args)])
                   for k in d.kernels}
        workers = [self.worker(i, kernels) for i in range(len(d.workers))]

        numel = {t.name: t.units for t in d.tensors}  # in the Design's units, slack included
        elems = {t.name: numel[t.name] * dtype(t.dtype).blocks_per_unit for t in d.tensors}  # in IRON's
        fifo_names = list(ends)

        def sequence(*args: Any) -> None:
            buf = {t.name: b for t, b in zip(d.tensors, args)}
            handle = dict(zip(fifo_names, args[len(d.tensors):]))
            groups: dict[int, Any] = {}
            for op in d.runtime:
                if op.rtp is not None:  # before any transfer of the call (Design.runtime's order)
                    self.rtps[(op.rtp.tile, op.rtp.buffer)][op.rtp.index] = op.rtp.value
                    continue
                if op.barrier is not None:  # after the writes, before the transfers: what the cores wait for
                    self.barriers[(op.barrier.tile, op.barrier.barrier)].set(op.barrier.value)
                    continue
                if op.task is None:
                    groups.pop(op.group).finish()
                    continue
                t = op.task
                if op.group not in groups:
                    groups[op.group] = api.TaskGroup()
                tap = self.tap(t.tap, elems[t.tensor], d.tensor(t.tensor).dtype)
                transfer = handle[t.fifo].fill if t.direction == "fill" else handle[t.fifo].drain
                transfer(buf[t.tensor], tap=tap, wait=t.wait, group=groups[op.group])

        rt = api.Runtime(sequence, [*(self.ty((numel[t.name],), t.dtype) for t in d.tensors), *ends.values()])
        name, _ = d.config.dev.target(d.config.array.cols)
        return api.Program(api.devices[name](), rt, workers=workers)


def _fifo_names(ops: tuple[Op, ...]) -> set[str]:
    names: set[str] = set()
    for op in ops:
        if isinstance(op, (Acquire, Release)):
            names.add(op.fifo)
        elif isinstance(op, Loop):
            names |= _fifo_names(op.body)
    return names


def _core_fn(program: tuple[Op, ...], fifo_names: list[str], buffer_names: list[str], kernel_names: list[str],
             range_: Callable[..., Any]) -> Callable[..., None]:
    """The Worker body: the Design's loop IR, traced by IRON into the core's MLIR. Its arguments
    are the fifo handles, then the worker's own buffers, then the kernels, then its barrier (if any)."""

    def core_fn(*args: Any) -> None:
        handles = dict(zip(fifo_names, args[: len(fifo_names)]))
        rest = args[len(fifo_names):]
        held: dict[str, Any] = dict(zip(buffer_names, rest[: len(buffer_names)]))  # buffers: always held
        rest = rest[len(buffer_names):]
        kernels = dict(zip(kernel_names, rest[: len(kernel_names)]))
        barrier: Any = rest[len(kernel_names)] if len(rest) > len(kernel_names) else None  # the program's waits

        def run(ops: tuple[Op, ...]) -> None:
            for op in ops:
                if isinstance(op, Loop) and not isinstance(op.count, int):
                    # a count the core loads from its runtime-parameter buffer (range_ index_casts it)
                    for _ in range_(held[op.count.buffer][op.count.index]):
                        run(op.body)
                elif isinstance(op, Loop):
                    # a one-trip loop is emitted inline (mlir-aie issue #1547 workaround)
                    for _ in (range(1) if op.count == 1 else range_(op.count)):
                        run(op.body)
                elif isinstance(op, Acquire):
                    held[op.fifo] = handles[op.fifo].acquire(op.count)
                elif isinstance(op, Release):
                    handles[op.fifo].release(op.count)
                elif isinstance(op, BarrierWait):
                    barrier.wait_for_value(op.value)
                elif isinstance(op, BarrierRelease):
                    barrier.release_with_value(op.value)
                elif isinstance(op, Call):
                    # a scalar read from the runtime-parameter buffer is loaded as the call starts
                    scalars = [x if isinstance(x, int) else held[x.buffer][x.index] for x in op.scalars]
                    kernels[op.kernel](*[held[f] for f in op.args], *scalars)

        run(program)

    return core_fn


def lower(design: Design, api: IronApi | None = None) -> Any:
    """The IRON Program of a design (not yet resolved)."""
    check_lowerable(design)
    return _IronLowering(design, api or iron_api()).program()


def to_mlir(design: Design, api: IronApi | None = None) -> str:
    """The design as MLIR text, via Program.resolve_program() (every component is placed).

    Verify here too, so that aiecc never gets bad MLIR whatever resolve_program does on failure.
    """
    check_lowerable(design)  # a refusal of the input, not mlir-aie's: outside the try
    try:
        module = lower(design, api).resolve_program()
    except ToolchainMissing:
        raise
    except Exception as e:  # noqa: BLE001 - IRON's refusals (ValueError, IronRuntimeError...): our defect, not the input's
        raise BuildError(f"mlir-aie refused the lowered program: {type(e).__name__}: {str(e).splitlines()[0]}",
                         "report the design (gemm-gen generate) as a bug; GEMM_GEN_DEBUG=1 shows where") from e
    operation = getattr(module, "operation", None)
    if operation is not None:
        try:
            ok = operation.verify()
        except Exception as e:  # noqa: BLE001 - MLIRError carries the diagnostics
            raise BuildError(f"the lowered MLIR does not verify: {str(e).splitlines()[0]}",
                             "report the design (gemm-gen generate) as a bug; GEMM_GEN_DEBUG=1 shows where") from e
        if ok is False:
            raise BuildError("the lowered MLIR does not verify", "report the design (gemm-gen generate) as a bug")
    return str(module)

