"""Lower a Design to an IRON program, and to MLIR through mlir-aie (imported only when used).

The translation is one to one: every Design ObjectFifo becomes an IRON ObjectFifo (the shim-fed
and joined ones constructed, the others made by forward/split/join on their memtile), every Worker
runs the Design's loop IR, and the runtime sequence issues the same fill/drain tasks in the same
task groups (python/iron in mlir-aie: dataflow/objectfifo.py, worker.py, runtime/runtime.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..design.model import Acquire, Call, Design, Link, LocalBuffer, Loop, ObjectFifo, Op, Release, TileRef
from ..dtypes import dtype
from ..errors import BuildError, ToolchainMissing
from ..tap import Tap
from .toolchain import MLIR_AIE_INSTALL, import_module

SHIM_TAP_DIMS = 4  # shim_dma_single_bd_task reads sizes[0] > 1 as a repeat count: always give 4 dims


@dataclass(frozen=True)
class IronApi:
    """The IRON names the lowering uses: mlir-aie's real ones, or a test's recording stand-in."""

    ObjectFifo: Any
    Worker: Any
    Kernel: Any
    Runtime: Any
    Program: Any
    Tile: Any
    devices: dict[str, Any]  # our device name -> IRON device class (NPU1 is the 4-column array)
    range_: Callable[[int], Any]
    TensorAccessPattern: Any
    str_to_dtype: Callable[[str], Any]
    Buffer: Any  # a worker's own L1 buffer
    block_types: dict[str, Any]  # our block type name -> IRON's element type (bfp16: v8bfp16ebs8)


def iron_api() -> IronApi:
    """mlir-aie's IRON, or ToolchainMissing in one sentence."""
    iron = import_module("aie.iron", "mlir-aie's IRON API", MLIR_AIE_INSTALL)
    device = import_module("aie.iron.device", "mlir-aie's IRON API", MLIR_AIE_INSTALL)
    controlflow = import_module("aie.iron.controlflow", "mlir-aie's IRON API", MLIR_AIE_INSTALL)
    taplib = import_module("aie.helpers.taplib", "mlir-aie's taplib", MLIR_AIE_INSTALL)
    util = import_module("aie.helpers.util", "mlir-aie's type helpers", MLIR_AIE_INSTALL)
    # newer IRON names a worker's buffer Buffer, older wheels LocalBuffer (same type/initial_value/
    # name arguments); block types arrived with the block-datatype examples. Designs that need
    # neither lower on any wheel; the others fail with one sentence when they are used.
    buffer = getattr(iron, "Buffer", None) or getattr(iron, "LocalBuffer", None)
    blocks = {"bfp16": util.v8bfp16ebs8} if hasattr(util, "v8bfp16ebs8") else {}
    return IronApi(iron.ObjectFifo, iron.Worker, iron.Kernel, iron.Runtime, iron.Program, device.Tile,
                   {"npu1": device.NPU1, "npu2": device.NPU2}, controlflow.range_, taplib.TensorAccessPattern,
                   iron.str_to_dtype, buffer, blocks)


def dims(tap: Tap | None, elem: str = "i32") -> list[tuple[int, int]] | None:
    """A Design pattern as IRON's dims_to_stream / dims_from_stream: (size, stride), outermost first,
    in IRON's elements (a bfp16 tile of the Design is 8 v8bfp16ebs8 blocks)."""
    if tap is None:
        return None
    t = tap.scaled(dtype(elem).blocks_per_unit)
    return list(zip(t.sizes, t.strides))


class _Lowering:
    def __init__(self, design: Design, api: IronApi) -> None:
        self.d, self.api = design, api
        self.fifos: dict[str, Any] = {}
        self.prod_handles: dict[str, Any] = {}
        self.cons_handles: dict[tuple[str, TileRef], Any] = {}

    def tile(self, t: TileRef) -> Any:
        return self.api.Tile(t.col, t.row)

    def ty(self, shape: tuple[int, ...], name: str) -> Any:
        """IRON's buffer type: np.ndarray[shape, np.dtype[T]]. A bfp16 buffer of the Design (a
        shape in 8 x 8 tiles) is a flat array of v8bfp16ebs8 blocks, 8 per tile, as mlir-aie's
        block-datatype designs type theirs (the DMAs address it linearly either way)."""
        t = dtype(name)
        if t.is_block:
            if t.name not in self.api.block_types:
                raise ToolchainMissing(f"this mlir-aie has no {t.name} element type (aie.helpers.util.v8bfp16ebs8)",
                                       MLIR_AIE_INSTALL)
            n = 1
            for d in shape:
                n *= d
            return np.ndarray[(n * t.blocks_per_unit,), np.dtype[self.api.block_types[t.name]]]  # type: ignore[name-defined,misc]
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
                self.offsets(lk, out), placement=place, depths=[f.depth for f in srcs],
                obj_types=[self.ty(f.obj_shape, f.dtype) for f in srcs], names=[f.name for f in srcs],
                dims_to_stream=[dims(f.dims_to_stream, f.dtype) or [] for f in srcs],
                dims_from_stream=[dims(f.dims_from_stream, f.dtype) or [] for f in srcs])
            self.fifos.update({f.name: m for f, m in zip(srcs, made)})
            return
        (src,) = srcs
        cons = self.cons(src.name, lk.tile)
        if lk.kind == "forward":
            (dst,) = dsts
            self.fifos[dst.name] = cons.forward(
                placement=place, obj_type=self.ty(dst.obj_shape, dst.dtype), depth=dst.depth, name=dst.name,
                dims_to_stream=dims(dst.dims_to_stream, dst.dtype),
                dims_from_stream=dims(dst.dims_from_stream, dst.dtype))
            return
        made = cons.split(
            self.offsets(lk, src), placement=place, depths=[f.depth for f in dsts],
            obj_types=[self.ty(f.obj_shape, f.dtype) for f in dsts], names=[f.name for f in dsts],
            dims_to_stream=[dims(f.dims_to_stream, f.dtype) or [] for f in dsts],
            dims_from_stream=[dims(f.dims_from_stream, f.dtype) or [] for f in dsts])
        self.fifos.update({f.name: m for f, m in zip(dsts, made)})

    @staticmethod
    def offsets(lk: Link, big: ObjectFifo) -> list[int]:
        """A join's or split's slice offsets in IRON's elements."""
        return [o * dtype(big.dtype).blocks_per_unit for o in lk.offsets]

    def prod(self, name: str) -> Any:
        if name not in self.prod_handles:
            self.prod_handles[name] = self.fifos[name].prod()
        return self.prod_handles[name]

    def cons(self, name: str, at: TileRef) -> Any:
        key = (name, at)
        if key not in self.cons_handles:
            self.cons_handles[key] = self.fifos[name].cons()
        return self.cons_handles[key]

    def worker(self, index: int, kernels: dict[str, Any]) -> Any:
        wk = self.d.workers[index]
        names = sorted(_fifo_names(wk.program))
        handles = [self.prod(n) if self.d.fifo(n).producer == wk.tile else self.cons(n, wk.tile) for n in names]
        ks = [kernels[k] for k in wk.kernels]
        bufs = [self.buffer(b) for b in wk.buffers]
        core_fn = _core_fn(wk.program, names, [b.name for b in wk.buffers], list(wk.kernels), self.api.range_)
        return self.api.Worker(core_fn, [*handles, *bufs, *ks], placement=self.tile(wk.tile),
                               stack_size=wk.stack_bytes)

    def buffer(self, b: LocalBuffer) -> Any:
        """A worker's own L1 buffer: an IRON Buffer, placed on the worker's tile by the Worker."""
        if self.api.Buffer is None:
            raise ToolchainMissing("this mlir-aie's IRON has no Buffer (or LocalBuffer) for a worker's own memory",
                                   MLIR_AIE_INSTALL)
        return self.api.Buffer(self.ty(b.shape, b.dtype), name=b.name)

    def tap(self, t: Tap, numel: int, elem: str) -> Any:
        t = t.scaled(dtype(elem).blocks_per_unit)
        pad = SHIM_TAP_DIMS - len(t.sizes)
        return self.api.TensorAccessPattern((numel,), t.offset, [1] * pad + list(t.sizes),
                                            [0] * pad + list(t.strides))

    def program(self) -> Any:
        d, api = self.d, self.api
        linked = {n for lk in d.links for n in (lk.srcs if lk.kind != "join" else lk.dsts)}
        for f in d.fifos:
            if f.name in linked or not any(f.name in (*lk.srcs, *lk.dsts) for lk in d.links):
                self.construct(f)
        for lk in d.links:
            self.link(lk)
        missing = [f.name for f in d.fifos if f.name not in self.fifos]
        assert not missing, f"fifos without an IRON object: {missing}"

        kernels = {k.name: api.Kernel(k.name, k.object_file,
                                      [*(self.ty(s, t) for s, t in zip(k.arg_shapes, k.arg_dtypes)),
                                       *(np.int32 for _ in k.scalar_args)])
                   for k in d.kernels}
        workers = [self.worker(i, kernels) for i in range(len(d.workers))]

        numel = {t.name: t.shape[0] * t.shape[1] for t in d.tensors}  # in the Design's units
        elems = {t.name: numel[t.name] * dtype(t.dtype).blocks_per_unit for t in d.tensors}  # in IRON's
        rt = api.Runtime()
        with rt.sequence(*[self.ty((numel[t.name],), t.dtype) for t in d.tensors]) as bufs:
            buf = {t.name: b for t, b in zip(d.tensors, bufs)}
            rt.start(*workers)
            groups: dict[int, Any] = {}
            for op in d.runtime:
                if op.task is None:
                    rt.finish_task_group(groups.pop(op.group))
                    continue
                t = op.task
                tg = groups.get(op.group)
                if tg is None:
                    tg = groups[op.group] = rt.task_group()
                tap = self.tap(t.tap, elems[t.tensor], d.tensor(t.tensor).dtype)
                if t.direction == "fill":
                    rt.fill(self.prod(t.fifo), buf[t.tensor], tap=tap, task_group=tg, wait=t.wait,
                            placement=self.tile(t.shim))
                else:
                    rt.drain(self.cons(t.fifo, t.shim), buf[t.tensor], tap=tap, task_group=tg, wait=t.wait,
                             placement=self.tile(t.shim))
        return api.Program(api.devices[d.config.device](), rt)


def _fifo_names(ops: tuple[Op, ...]) -> set[str]:
    names: set[str] = set()
    for op in ops:
        if isinstance(op, (Acquire, Release)):
            names.add(op.fifo)
        elif isinstance(op, Loop):
            names |= _fifo_names(op.body)
    return names


def _core_fn(program: tuple[Op, ...], fifo_names: list[str], buffer_names: list[str], kernel_names: list[str],
             range_: Callable[[int], Any]) -> Callable[..., None]:
    """The Worker body: the Design's loop IR, traced by IRON into the core's MLIR. Its arguments
    are the fifo handles, then the worker's own buffers, then the kernels."""

    def core_fn(*args: Any) -> None:
        handles = dict(zip(fifo_names, args[: len(fifo_names)]))
        rest = args[len(fifo_names):]
        held: dict[str, Any] = dict(zip(buffer_names, rest[: len(buffer_names)]))  # buffers: always held
        kernels = dict(zip(kernel_names, rest[len(buffer_names):]))

        def run(ops: tuple[Op, ...]) -> None:
            for op in ops:
                if isinstance(op, Loop):
                    # a one-trip loop is emitted inline (mlir-aie issue #1547 workaround)
                    for _ in (range(1) if op.count == 1 else range_(op.count)):
                        run(op.body)
                elif isinstance(op, Acquire):
                    held[op.fifo] = handles[op.fifo].acquire(op.count)
                elif isinstance(op, Release):
                    handles[op.fifo].release(op.count)
                elif isinstance(op, Call):
                    kernels[op.kernel](*[held[f] for f in op.args], *op.scalars)

        run(program)

    return core_fn


def lower(design: Design, api: IronApi | None = None) -> Any:
    """The IRON Program of a design (not yet resolved)."""
    return _Lowering(design, api or iron_api()).program()


def to_mlir(design: Design, api: IronApi | None = None) -> str:
    """The design as MLIR text, via Program.resolve_program() (every component is placed).

    resolve_program only logs a failed verification; verify here so that aiecc never gets bad MLIR.
    """
    module = lower(design, api).resolve_program()
    operation = getattr(module, "operation", None)
    if operation is not None:
        try:
            ok = operation.verify()
        except Exception as e:  # noqa: BLE001 - MLIRError carries the diagnostics
            raise BuildError(f"the lowered MLIR does not verify: {str(e).splitlines()[0]}",
                             "report the design (gemm-gen generate) as a bug") from None
        if ok is False:
            raise BuildError("the lowered MLIR does not verify", "report the design (gemm-gen generate) as a bug")
    return str(module)


if __name__ == "__main__":  # pragma: no cover - `python -m gemm_gen.backends.iron` = gemm-gen mlir
    from ..cli import main

    sys.exit(main(["mlir", *sys.argv[1:]]))
