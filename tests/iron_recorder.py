"""A strict recording stand-in for the part of mlir-aie 1.4.3's IRON the lowering calls. TESTS ONLY.

It is not IRON and produces no MLIR. It mirrors the pinned release signature by signature
(gemm_gen/backends/iron_1_4_3.json; test_iron_standin.py compares them with inspect) and refuses
what that release refuses (tests/data/iron_1_4_3_refusals.json, messages as IRON words them):
ObjectFifo options are keyword-only; handles join/split/forward only from the right end, with
argument lists as long as the offsets; fill/drain only on the right end, inside the runtime
sequence, from a sequence argument, in an open TaskGroup; Workers take `tile=`, refuse bare
ObjectFifos and pin untiled Buffers; Kernel calls need a resolved kernel and the declared number of
arguments, with Buffers unwrapped; a handle has one endpoint (a Worker, a link or the runtime); a
WorkerRuntimeBarrier is waited on and released only in a core of a Worker it was given, set only in the
runtime sequence, to a lock value (0..63).
Below ObjectFifo (1.4.3's programming guide sections 2g/2h): explicitly placed Buffers a Worker on a
neighbouring tile may also be given, Locks, Flows and per-tile DMA programs (TileDma, DmaChannel, Bd,
Acquire, Release), registered with Runtime.add_lock / add_flow / add_tile_dma; at resolve_program they are
held to what 1.4.3 verifies of them: a buffer or lock used only from a tile whose memory affinity reaches
it (own, west, north, south but not a memtile), a core tile's DMA on its own buffers and locks only, lock
ids and the locks a tile has (the fifos' counted), one acquire and one release per BD, the BDs and DMA
channels a tile has (the fifos' counted).
In the runtime sequence, aie.dialects.aiex's shim DMA tasks (shim_dma_single_bd_task, dma_start_task, dma_await_task,
dma_free_task) on a Flow's shim_symbol or a runtime fifo's allocation, RuntimeData.op their buffer: held to 1.4.3's
runtime-sequence BD-id pass (one 16-BD pool per shim tile shared with IRON's fills and drains, the token balance,
no second free) and to rules of the stand-in's own (start once, free only after an await since the start, every
task retired); docs/shared_l1.md section 4 lists them with their sources.
What mlir-aie refuses later is checked at resolve_program too: when the resolved module is verified,
each func.call operand's type against the kernel's declaration, every shim transfer inside its
runtime buffer (DMABDOp verifier), every Buffer placed, no data layout on a shim end and a link's
dims inside its slices (ObjectFifoCreateOp/LinkOp verifiers); when aiecc lowers the fifos, the link
pools' segments tiling their object (AIEObjectFifoSplit, ObjectFifoPoolOp verifier) and every
memtile and core DMA BD the fifos become (DMABDOp verifier: dims per tile kind, wraps, strides,
whole 32-bit words for elements narrower or wider than 32 bits, 9-byte bfp16 blocks included).

It records what it is told, so tests can compare the lowered program with the Design.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

from gemm_gen.backends.iron import device_class, device_names
from gemm_gen.facts.devices import CORE_DMA, MEM_DMA, SHIM_DMA


class IronRuntimeError(Exception):
    """IRON's runtime-sequence error."""


# ---- device -----------------------------------------------------------------------------------
class Tile:
    def __init__(self, col=None, row=None, *, tile_type=None, allocation_scheme=None):
        self.col, self.row, self.tile_type, self.allocation_scheme = col, row, tile_type, allocation_scheme

    @property
    def placed(self) -> bool:
        return self.col is not None and self.row is not None

    def at(self) -> tuple[int, int] | None:
        return (self.col, self.row) if self.placed else None

    def __repr__(self) -> str:
        return f"Tile({self.col if self.col is not None else '?'}, {self.row if self.row is not None else '?'})"


# python/iron/device/tile.py (1.4.3's gh-pages render @5100e2d6): Tile.with_type's refusal of another tile type
def _typed(tile: Tile, kind: str) -> Tile:
    """Tile.with_type: the tile as a `kind` tile (a new Tile when its type was open)."""
    if tile.tile_type is None:
        return Tile(tile.col, tile.row, tile_type=kind, allocation_scheme=tile.allocation_scheme)
    if tile.tile_type != kind:
        raise ValueError(f"Expected a {kind} tile, but got tile_type={tile.tile_type}")
    return tile


AnyComputeTile = Tile(tile_type="CoreTile")
AnyMemTile = Tile(tile_type="MemTile")
AnyShimTile = Tile(tile_type="ShimNOCTile")


class _Device:
    name = ""
    cols = 0
    rows = 6


# aie.iron.device makes one Device class per AIEDevice value (python/iron/device/device.py's create_class loop;
# gemm_gen.backends.iron.device_class names them). The NPU values of the 2026 device.pyi: npu1 (4 columns) and its
# 1- to 3-column partitions, npu2 (8) and its 1- to 7-column ones; which of them the v1.4.3 tag has is unverified.
def _device_class(name: str, cols: int) -> type[_Device]:
    return type(device_class(name), (_Device,), {"name": name, "cols": cols})


DEVICE_CLASSES = {cls.__name__: cls for cls in (
    *(_device_class(f"npu{gen}", whole) for gen, whole in ((1, 4), (2, 8))),
    *(_device_class(f"npu{gen}_{cols}col", cols) for gen, whole in ((1, 4), (2, 8)) for cols in range(1, whole)))}
NPU1, NPU2 = DEVICE_CLASSES["NPU1"], DEVICE_CLASSES["NPU2"]  # the whole arrays, as the stand-in's own tests use them


class v8bfp16ebs8(np.generic):  # noqa: N801 - IRON's marker type for 9-byte bfp16 blocks
    """Stand-in for aie.dialects.aiex.v8bfp16ebs8 (a marker np.generic subclass there too)."""


_DTYPES = {"bf16": ml_dtypes.bfloat16, "i8": np.int8, "i16": np.int16, "i32": np.int32, "f32": np.float32,
           "u8": np.uint8, "u16": np.uint16, "u32": np.uint32}


def str_to_dtype(dtype_str):
    try:
        return _DTYPES[dtype_str]
    except KeyError:
        raise ValueError(f"Unrecognized dtype: {dtype_str}") from None


def shape_dtype(obj_type: Any) -> tuple[tuple[int, ...], str]:
    """(shape, dtype name) of np.ndarray[shape, np.dtype[T]], as IRON reads obj types; a scalar
    type such as np.int32 (a kernel's by-value argument) is ((), its name)."""
    if isinstance(obj_type, type) and issubclass(obj_type, np.generic):
        return (), np.dtype(obj_type).name
    shape, dt = obj_type.__args__
    if dt.__args__[0] is v8bfp16ebs8:
        return tuple(shape), "v8bfp16ebs8"
    return tuple(shape), np.dtype(dt.__args__[0]).name


def _count(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape)) if shape else 1


def _elems(obj_type: Any) -> int:
    return _count(shape_dtype(obj_type)[0])


def _elem_bytes(obj_type: Any) -> int:
    """Bytes of one element of an objectfifo's memref: v8bfp16ebs8 is a 72-bit (9-byte) block, as
    DMABDOp::verify counts the bfp types (AIEDialect.cpp at 1.4.3, lines 3377-3379)."""
    elem = obj_type.__args__[1].__args__[0]
    return 9 if elem is v8bfp16ebs8 else np.dtype(elem).itemsize


# ---- taplib -----------------------------------------------------------------------------------
class TensorAccessPattern:
    """taplib's checks (utils.py at 1.4.3); like taplib, no check that the accesses stay inside."""

    def __init__(self, tensor_dims, offset, sizes, strides):
        dims = list(tensor_dims)
        if len(dims) == 0:
            raise ValueError(f"Number of tensor dimensions must be >= 1 (dimensions={tensor_dims})")
        if any(d <= 0 for d in dims):
            raise ValueError(f"Each tensor dimension must be >= 1 (dimensions={tensor_dims})")
        if len(dims) == 1:
            dims = [1, dims[0]]
        if offset < 0:
            raise ValueError(f"Offset must be >= 0 (offset={offset})")
        if offset >= int(np.prod(dims)):
            raise ValueError(f"Offset too large: {offset}. Max value allowed for tensor: {np.prod(dims)}")
        if sizes is None:
            raise ValueError("Sizes is None, but expected Sequence[int]")
        if strides is None:
            raise ValueError("Strides is None, but expected Sequence[int]")
        if len(sizes) == 0:
            raise ValueError("len(sizes) must be >0")
        if len(strides) == 0:
            raise ValueError("len(strides) must be >0")
        if len(sizes) != len(strides):
            raise ValueError(f"len(sizes) ({len(sizes)}) != len(strides) ({len(strides)})")
        if any(s < 1 for s in sizes):
            raise ValueError(f"All sizes must be >= 1, but got {sizes}")
        if any(s < 0 for s in strides):
            raise ValueError(f"All strides must be >= 0, but got {strides}")
        strides = list(strides)
        for i in range(len(sizes) - 1):  # taplib's cleaning: leading unit dims get stride 0
            if sizes[i] == 1:
                strides[i] = 0
            else:
                break
        self.tensor_dims, self.offset, self.sizes, self.strides = tuple(dims), offset, list(sizes), strides

    def max_index(self) -> int:
        return self.offset + sum((s - 1) * st for s, st in zip(self.sizes, self.strides))

    def count(self) -> int:
        return int(np.prod(self.sizes))


# ---- recording ----------------------------------------------------------------------------------
@dataclass
class Recorder:
    """Everything the stand-in was told, in order."""

    fifos: list[ObjectFifo] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)
    kernels: list[Kernel] = field(default_factory=list)
    workers: list[Worker] = field(default_factory=list)
    buffers: list[Buffer] = field(default_factory=list)
    transfers: list[dict[str, Any]] = field(default_factory=list)
    finishes: list[int] = field(default_factory=list)
    rt_events: list[tuple[str, Any]] = field(default_factory=list)  # ("task", group) / ("finish", group) in order
    barriers: list[WorkerRuntimeBarrier] = field(default_factory=list)
    locks: list[tuple[Tile, str]] = field(default_factory=list)  # the barrier locks Workers made, (tile, barrier)
    lock_uses: list[tuple[Lock, Worker]] = field(default_factory=list)  # explicit Locks a Worker's core used
    ops: list[tuple] = field(default_factory=list)  # the worker currently traced
    dma_tasks: list[DmaTask] = field(default_factory=list)  # the raw aiex shim tasks, in configure order
    tracing: Worker | None = None
    sequence: _ActiveSequence | None = None


REC = Recorder()


# python/iron/buffer.py and worker.py (1.4.3's gh-pages render @5100e2d6): the int and range checks of these options
def _int_at_least(value: Any, label: str, minimum: int) -> None:
    """IRON's check of an optional integer option (Buffer address/mem_bank, Worker stack/data size)."""
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{label} must be an int, but got {value.__class__.__name__}")
    if value < minimum:
        raise ValueError(f"{label} must be >= {minimum}, but got {value}")


# ---- buffers ----------------------------------------------------------------------------------
# python/iron/buffer.py (1.4.3's gh-pages render @5100e2d6): resolve before placement, use_write_rtp; reading a Buffer
# outside its worker,
# writing it outside the runtime sequence, an index past it or a non-int rtp value: the stand-in's own
# refusals of what 1.4.3 would lower to invalid IR (an SSA value used outside its region, an out-of-bounds
# memref.store) rather than refuse in Python
class Buffer:
    _index = itertools.count()

    def __init__(self, type=None, initial_value=None, name=None, tile=None, use_write_rtp=False,  # noqa: A002
                 address=None, mem_bank=None):
        if type is None and initial_value is None:
            raise ValueError("Must provide either type, initial value, or both.")
        _int_at_least(address, "Buffer address", 0)
        _int_at_least(mem_bank, "Buffer mem_bank", 0)
        if type is None:
            type = np.ndarray[initial_value.shape, np.dtype[initial_value.dtype.type]]  # noqa: A001
        self.type = type
        self.initial_value = initial_value  # python/iron/buffer.py resolve(): aie.buffer's initial_value
        self.use_write_rtp = bool(use_write_rtp)
        self.address, self.mem_bank = address, mem_bank
        self._name = name if name is not None else f"buf_{next(Buffer._index)}"
        self._tile, self._explicit_tile, self._owner_worker = tile, tile is not None, None
        self._readers: list[Worker] = []  # the non-owning Workers an explicitly placed Buffer was also given
        self.op: Any = None
        REC.buffers.append(self)

    @property
    def name(self) -> str:
        return self._name

    @property
    def tile(self) -> Tile | None:
        return self._tile

    def resolve(self) -> None:
        if self._tile is None or not self._tile.placed:
            raise ValueError(f"Cannot resolve buffer until it has been placed ({self._name})")
        self.op = ("buffer", self._name)

    def __getitem__(self, idx):
        """In a core: memref.load of one element (an i32 SSA value, usable as a range_ bound)."""
        if REC.tracing is None or (self._owner_worker is not REC.tracing and REC.tracing not in self._readers):
            raise ValueError(f"{self._name}[{idx}] is read outside the workers that were given the buffer")
        if not isinstance(idx, (int, np.integer)) or not 0 <= idx < _count(shape_dtype(self.type)[0]):
            raise IndexError(f"{self._name}[{idx}]: index outside the buffer")
        REC.ops.append(("load", self._name, int(idx)))  # where the core reads it, for ordering checks
        return LoadedValue(self, int(idx))

    def __setitem__(self, idx, value):
        """In the runtime sequence: aiex.npu.rtp_write, only for a buffer made with use_write_rtp=True
        (otherwise a memref.store that the sequence cannot hold), int index and int value."""
        if REC.sequence is None:
            raise ValueError(f"{self._name}[{idx}] = ... outside the runtime sequence")
        if not self.use_write_rtp:
            raise ValueError(f"{self._name} is written from the runtime sequence but was not made with "
                             f"use_write_rtp=True")
        if not isinstance(idx, (int, np.integer)) or not 0 <= idx < _count(shape_dtype(self.type)[0]):
            raise IndexError(f"{self._name}[{idx}]: index outside the buffer")
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
            raise TypeError(f"rtp_write of {self._name}[{idx}] takes an int, got {type(value).__name__}")
        REC.rt_events.append(("rtp", (self._name, int(idx), int(value))))

    def __repr__(self) -> str:
        return f"<buf {self._name}>"


@dataclass(frozen=True)
class LoadedValue:
    """A value a core loaded from one of its buffers (memref.load; range_ index_casts it)."""

    buffer: Buffer
    index: int


# ---- object fifos -------------------------------------------------------------------------------
class ObjectFifo:
    _index = itertools.count()

    def __init__(self, obj_type, *, depth=2, name=None, dims_to_stream=None, dims_from_stream_per_cons=None,
                 plio=False, pad_dimensions=None, pad_value=0, disable_synchronization=False, repeat_count=None,
                 delegate_tile=None, via_DMA=False, init_values=None, consumer_obj_type=None, aie_stream=None,  # noqa: N803
                 packet=False, packet_id=None):
        if depth is not None and depth < 1:
            raise ValueError(f"Default ObjectFifo depth must be > 0, but got {depth}")
        self.obj_type, self._depth = obj_type, depth
        self.name = name if name is not None else f"of{next(ObjectFifo._index)}"
        self.dims_to_stream, self.dims_from_stream_per_cons = dims_to_stream, dims_from_stream_per_cons
        self._prod: ObjectFifoHandle | None = None
        self._cons: list[ObjectFifoHandle] = []
        REC.fifos.append(self)

    @property
    def depth(self):
        return self._depth

    def prod(self, depth=None, channel=None, tile=None):
        if self._prod is not None:
            if depth is None and self._depth is None:
                raise ValueError("If depth is None, then depth must be specified.")
            if depth is not None and depth < 1:
                raise ValueError(f"Depth must be > 1, but got {depth}")
            if channel is not None and self._prod.channel != channel:
                raise ValueError(f"Producer handle for {self.name} already pinned to channel {self._prod.channel}, "
                                 f"cannot re-pin to {channel}.")
            if tile is not None and not _same_pin(self._prod.shim_tile, tile):
                raise ValueError(f"Producer handle for {self.name} already pinned to shim tile "
                                 f"{self._prod.shim_tile}, cannot re-pin to {tile}.")
            return self._prod
        self._prod = ObjectFifoHandle(self, True, depth, channel=channel, tile=tile)
        return self._prod

    def cons(self, depth=None, dims_from_stream=None, channel=None, tile=None):
        if depth is None and self._depth is None:
            raise ValueError("If depth is None, then depth must be specified.")
        if dims_from_stream is None:
            dims_from_stream = self.dims_from_stream_per_cons
        self._cons.append(ObjectFifoHandle(self, False, depth, dims_from_stream, channel=channel, tile=tile))
        return self._cons[-1]


def _same_pin(a: Tile | None, b: Tile | None) -> bool:
    return a is b or (a is not None and b is not None and a.at() == b.at())


@dataclass(frozen=True)
class Element:
    """What acquire() returns inside a worker: one object of the fifo (a memref of its type)."""

    fifo: str
    obj_type: Any

    def __repr__(self) -> str:
        return f"<{self.fifo}>"


class ObjectFifoHandle:
    def __init__(self, of, is_prod, depth=None, dims_from_stream=None, channel=None, tile=None):
        if depth is None:
            if not of.depth:
                raise ValueError("Must specify either ObjectFifoHandle depth or ObjectFifo default depth; both "
                                 "are None.")
            depth = of.depth
        if depth < 1:
            raise ValueError(f"Depth must be > 0 but is {depth}")
        if is_prod and dims_from_stream:
            raise ValueError("Can only specify dims_from_stream for cons handles")
        self.of, self.is_prod, self._depth, self.dims_from_stream = of, is_prod, depth, dims_from_stream
        self.channel, self.shim_tile = channel, tile
        self._endpoint: Any = None

    @property
    def endpoint(self) -> Any:
        return self._endpoint

    @endpoint.setter
    def endpoint(self, endpoint: Any) -> None:
        # IRON's ObjectFifoHandle.endpoint setter: a handle is one end of its fifo, bound once
        if self._endpoint and self._endpoint != endpoint:
            raise ValueError(f"Endpoint already set for ObjectFifoHandle {self.name}.{self.handle_type}: "
                             f"Set to {self._endpoint}, trying to set to {endpoint}")
        self._endpoint = endpoint

    @property
    def name(self):
        return self.of.name

    @property
    def handle_type(self) -> str:
        return "prod" if self.is_prod else "cons"

    @property
    def depth(self):
        return self._depth

    # python/iron/dataflow/objectfifo.py (1.4.3's gh-pages render @5100e2d6): the depth check; acquire / release
    # outside the holding
    # worker's core function: the stand-in's own (IRON would emit the op in the wrong region)
    def acquire(self, num_elem):
        if self._depth < num_elem:
            raise ValueError(f"Number of elements to acquire {num_elem} must be smaller than depth {self._depth}")
        if REC.tracing is None or self.endpoint is not REC.tracing:
            raise ValueError(f"acquire() on {self.name} outside the core function of the worker that holds it")
        REC.ops.append(("acquire", self.name, num_elem))
        return Element(self.name, self.of.obj_type)

    # python/iron/dataflow/objectfifo.py (1.4.3's gh-pages render @5100e2d6): as acquire above
    def release(self, num_elem):
        if self._depth < num_elem:
            raise ValueError(f"Number of elements to release {num_elem} must be smaller than depth {self._depth}")
        if REC.tracing is None or self.endpoint is not REC.tracing:
            raise ValueError(f"release() on {self.name} outside the core function of the worker that holds it")
        REC.ops.append(("release", self.name, num_elem))

    def fill(self, source, tap=None, wait=False, packet=None, offset_parameter=None, group=None, sizes=None,
             strides=None, offset=None, transfer_len=None, managed=True):
        if not self.is_prod:
            raise ValueError("fill() is only valid on a producer ObjectFifoHandle")
        return _transfer("fill", self, source, tap, wait, group, (sizes, strides, offset, transfer_len))

    def drain(self, dest, tap=None, wait=False, packet=None, offset_parameter=None, group=None, sizes=None,
              strides=None, offset=None, transfer_len=None, managed=True):
        if self.is_prod:
            raise ValueError("drain() is only valid on a consumer ObjectFifoHandle")
        return _transfer("drain", self, dest, tap, wait, group, (sizes, strides, offset, transfer_len))

    def join(self, offsets, tile=AnyMemTile, depths=None, obj_types=None, names=None, dims_to_stream=None,
             dims_from_stream=None, plio=False, repeat_counts=None):
        if not self.is_prod:
            raise ValueError(f"Cannot join() a {self.handle_type} ObjectFifoHandle")
        n = len(offsets)
        depths = _per(depths, [self.depth] * n, n, "Number of depths does not match number of offsets")
        obj_types = _per(obj_types, [self.of.obj_type] * n, n, "Number of obj_types does not match number of offsets")
        names = _per(names, [f"{self.name}_join{i}" for i in range(n)], n,
                     "Number of names does not match number of offsets")
        dims_to_stream = _per(dims_to_stream, [[]] * n, n, "Number of dims to stream does not match number of offsets")
        dims_from_stream = _per(dims_from_stream, [[]] * n, n,
                                "Number of dims_from_stream does not match number of offsets")
        subs = [ObjectFifo(obj_types[i], name=names[i], depth=depths[i], dims_to_stream=dims_to_stream[i] or None)
                for i in range(n)]
        ins = [s.cons(depth=depths[i], dims_from_stream=dims_from_stream[i] or None) for i, s in enumerate(subs)]
        _Link(ins, [self], tile, list(offsets), [])
        return subs

    def split(self, offsets, tile=AnyMemTile, depths=None, obj_types=None, names=None, dims_to_stream=None,
              dims_from_stream=None, plio=False, repeat_counts=None, pad_dimensions=None, pad_value=None):
        if self.is_prod:
            raise ValueError(f"Cannot split() a {self.handle_type} ObjectFifoHandle")
        n = len(offsets)
        depths = _per(depths, [self.depth] * n, n, "Number of depths does not match number of offsets")
        obj_types = _per(obj_types, [self.of.obj_type] * n, n, "Number of obj_types does not match number of offsets")
        names = _per(names, [f"{self.name}_split{i}" for i in range(n)], n,
                     "Number of names does not match number of offsets")
        dims_to_stream = _per(dims_to_stream, [[]] * n, n,
                              "Number of dims_to_stream arrays does not match number of offsets")
        dims_from_stream = _per(dims_from_stream, [[]] * n, n,
                                "Number of dims_from_stream arrays does not match number of offsets")
        subs = [ObjectFifo(obj_types[i], name=names[i], depth=depths[i], dims_to_stream=dims_to_stream[i] or None,
                           dims_from_stream_per_cons=dims_from_stream[i] or None) for i in range(n)]
        _Link([self], [s.prod() for s in subs], tile, [], list(offsets))
        return subs

    def forward(self, tile=AnyMemTile, obj_type=None, depth=None, name=None, dims_to_stream=None,
                dims_from_stream=None, plio=False, repeat_count=None, pad_dimensions=None, pad_value=0):
        if self.is_prod:
            raise ValueError(f"Cannot forward a {self.handle_type} ObjectFifoHandle")
        return self.split([0], tile=tile, obj_types=[obj_type] if obj_type is not None else None,
                          depths=[depth] if depth is not None else None,
                          names=[name] if name is not None else [self.name + "_fwd"],
                          dims_to_stream=[dims_to_stream] if dims_to_stream is not None else None,
                          dims_from_stream=[dims_from_stream] if dims_from_stream is not None else None)[0]


# python/iron/dataflow/objectfifo.py (1.4.3's gh-pages render @5100e2d6): join / split / forward refuse per-output
# lists of another length
def _per(given, default, n, message):
    if given is None:
        return default
    if len(given) != n:
        raise ValueError(message)
    return list(given)


class _Link:
    """ObjectFifoLink: the memtile end of its fifos."""

    def __init__(self, srcs, dsts, tile=AnyMemTile, src_offsets=None, dst_offsets=None):
        if not srcs:
            raise ValueError("An ObjectFifoLink must have at least one source")
        if not dsts:
            raise ValueError("An ObjectFifoLink must have at least one destination")
        if len(srcs) > 1 and len(dsts) > 1:
            raise ValueError("An ObjectFifoLink may only have > 1 of either sources or destinations, but not both")
        if src_offsets and len(src_offsets) != len(srcs):
            raise ValueError("The number of source offsets does not match the number of sources")
        if dst_offsets and len(dst_offsets) != len(dsts):
            raise ValueError("The number of destination offsets does not match the number of destinations")
        self.tile = _typed(tile if tile is not None else AnyMemTile, "MemTile")
        self.srcs, self.dsts = list(srcs), list(dsts)
        for h in (*srcs, *dsts):
            h.endpoint = self
        self.kind = "join" if len(srcs) > 1 else "split" if len(dsts) > 1 else "forward"
        self.offsets = list(src_offsets or dst_offsets or [0])
        REC.links.append({"kind": self.kind, "tile": self.tile, "srcs": [h.name for h in srcs],
                          "dsts": [h.name for h in dsts], "offsets": self.offsets, "op": self})

    def __repr__(self) -> str:
        return f"ObjectFifoLink({[h.name for h in self.srcs]} -> {[h.name for h in self.dsts]})"

    @property
    def owner(self) -> ObjectFifo:
        """The fifo whose object the link's pool holds (AIEObjectFifoSplit.cpp createLinkPools at
        1.4.3, lines 474-487): a join's output, a split's input, a forward's input unless its output
        is larger (the fifos here have no padding)."""
        big_in, out = self.srcs[0].of, self.dsts[0].of
        if self.kind == "join" or (self.kind == "forward" and _elems(out.obj_type) > _elems(big_in.obj_type)):
            return out
        return big_in

    def segments(self) -> list[tuple[int, int]]:
        """(offset, size) of the pool's segments as 1.4.3 derives them (createLinkPools, lines
        493-514): a join's or split's slice runs to the next offset, the last to the object's end,
        and a slice of no positive size takes its own fifo's element count."""
        total = _elems(self.owner.obj_type)
        if self.kind == "forward":
            return [(0, total)]
        side = self.srcs if self.kind == "join" else self.dsts
        out = []
        for i, (off, h) in enumerate(zip(self.offsets, side)):
            size = (self.offsets[i + 1] if i + 1 < len(side) else total) - off
            out.append((off, size if size > 0 else _elems(h.of.obj_type)))
        return out


# ---- kernels and workers --------------------------------------------------------------------------
class Kernel:
    def __init__(self, name, object_file_name, arg_types=None, *, link_with_mode=None, stack_size_override=None):
        if not name:
            raise ValueError("Kernel name cannot be empty.")
        self.name, self.object_file_name, self.arg_types = name, object_file_name, list(arg_types or [])
        self._op: Any = None
        REC.kernels.append(self)

    def resolve(self) -> None:
        self._op = ("func", self.name)

    def __call__(self, *args, **kwargs):
        if not self._op:
            raise ValueError("Kernel must be resolved before it can be called.")
        if len(args) != len(self.arg_types):
            raise ValueError(f"Kernel '{self.name}' expects {len(self.arg_types)} argument(s), but {len(args)} were "
                             f"provided.")
        operands = [a.op if isinstance(a, Buffer) else a for a in args]
        for i, (want, arg, got) in enumerate(zip(self.arg_types, args, operands)):
            _check_operand(self.name, i, want, arg, got)
        REC.ops.append(("call", self.name, args))


# llvm-project mlir/lib/Dialect/Func/IR/FuncOps.cpp, CallOp::verifySymbolUses: "operand type mismatch"
def _check_operand(kernel: str, i: int, want: Any, arg: Any, operand: Any) -> None:
    """func.call's verifier: every operand of the declared type. A memref operand may differ in shape
    when IRON collapses it to the declared 1-D parameter (same element count and type)."""
    w_shape, w_dt = shape_dtype(want)
    if w_shape == ():  # a by-value scalar: a constant, or an i32 the core loaded (memref.load) for an i32
        if isinstance(operand, LoadedValue) and w_dt == "int32" and shape_dtype(operand.buffer.type)[1] == w_dt:
            return
        if isinstance(operand, (bool, np.bool_)) or not isinstance(operand, (int, np.integer)):
            raise ValueError(f"'func.call' op operand type mismatch: expected {w_dt} for operand {i} of "
                             f"@{kernel}, but provided {operand!r}")
        return
    if isinstance(arg, Buffer):
        g_type = arg.type
    elif isinstance(operand, Element):
        g_type = operand.obj_type
    else:
        raise ValueError(f"'func.call' op operand type mismatch: expected a memref for operand {i} of @{kernel}, "
                         f"but provided {operand!r}")
    g_shape, g_dt = shape_dtype(g_type)
    if g_dt != w_dt or _count(g_shape) != _count(w_shape) or (len(w_shape) > 1 and g_shape != w_shape):
        raise ValueError(f"'func.call' op operand type mismatch: expected memref<{w_shape}x{w_dt}> for operand {i} "
                         f"of @{kernel}, but provided memref<{g_shape}x{g_dt}>")


class Worker:
    def __init__(self, core_fn, fn_args=None, tile=AnyComputeTile, while_true=True, stack_size=None, data_size=None,
                 allocation_scheme=None, trace=None, trace_events=None, dynamic_objfifo_lowering=None):
        if tile is None:
            tile = AnyComputeTile
        if tile.tile_type is not None and tile.tile_type != "CoreTile":
            raise ValueError(f"Worker requires a compute tile, but got tile_type={tile.tile_type}")
        _int_at_least(stack_size, "Worker stack_size", 1)
        _int_at_least(data_size, "Worker data_size", 0)
        self.allocation_scheme = allocation_scheme
        self.tile = _typed(tile, "CoreTile") if tile is not AnyComputeTile else Tile(tile_type="CoreTile")
        self.core_fn, self.fn_args = core_fn, list(fn_args or [])
        self.stack_size, self.while_true = stack_size, while_true
        self.fifos: list[ObjectFifoHandle] = []
        self.buffers: list[Buffer] = []
        self._barriers: list[WorkerRuntimeBarrier] = []
        for arg in _flatten(self.fn_args):
            if isinstance(arg, ObjectFifoHandle):
                arg.endpoint = self
                self.fifos.append(arg)
            elif isinstance(arg, Buffer):
                # worker.py L160-189 at 1.4.3: an explicitly placed Buffer may be shared; later Workers are readers
                if arg._owner_worker is not None and arg._owner_worker is not self:
                    if not arg._explicit_tile:
                        raise ValueError(f"Buffer '{arg._name}' has no explicit tile and is shared across Workers; "
                                         f"pin it to a tile (Buffer(tile=...)) so placement is unambiguous.")
                    self.buffers.append(arg)
                    arg._readers.append(self)
                else:
                    arg._owner_worker = self
                    self.buffers.append(arg)
                    if arg._tile is None:
                        arg._tile = self.tile
            elif isinstance(arg, ObjectFifo):
                raise ValueError("Cannot give an ObjectFifo directly to a worker; must give an ObjectFifoHandle "
                                 "obtained through ObjectFifo.prod() or ObjectFifo.cons()")
            elif isinstance(arg, WorkerRuntimeBarrier):  # worker.py L199-200 at 1.4.3
                self._barriers.append(arg)
        self.trace: list[tuple] = []
        REC.workers.append(self)


def _flatten(args):
    for a in args:
        if isinstance(a, (list, tuple)):
            yield from _flatten(a)
        else:
            yield a


# python/iron/controlflow.py (1.4.3's gh-pages render @5100e2d6): range_; its argument check is the stand-in's own
def range_(*args, iter_args=None, insert_yield=True, **kwargs):
    """IRON traces the body of a range_ loop once (scf.for)."""
    if not args or len(args) > 3 or not all(isinstance(a, (int, np.integer, LoadedValue)) for a in args):
        raise ValueError(f"range_ takes (stop) or (start, stop[, step]) integers or loaded values, got {args}")
    stop = args[-1] if len(args) == 1 else args[1]
    REC.ops.append(("loop", ("rtp", stop.buffer.name, stop.index) if isinstance(stop, LoadedValue) else stop))
    yield 0
    REC.ops.append(("end",))


# ---- runtime barriers ----------------------------------------------------------------------------
LOCK_VALUE_MAX = 0x3F  # AIE2TargetModel::getMaxLockValue (AIETargetModel.h), which SetLockOp::verify bounds by


def _lock_value(what: str, value: Any) -> int:
    """A lock value is an integer attribute (use_lock's `value`, set_lock's I32Attr); a float or a traced
    value fails where the op's attribute is built."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        # use_lock's and set_lock's values are I32Attr (AIEDialect.td, AIEXDialect.td): a float or a traced value
        # has no integer attribute to become
        raise TypeError(f"{what} takes an int lock value, got {type(value).__name__}")
    return int(value)


class WorkerRuntimeBarrier:
    """IRON's WorkerRuntimeBarrier as 1.4.3 has it (python/iron/worker.py L301-354, the release's doc render;
    the private half from the nearest stored 2026 worker.py, whose public half is line for line the render's):
    a Worker given one makes a lock on its tile as it resolves (Worker.resolve: lock(my_tile), no init) and
    registers it; wait_for_value and release_with_value use the last registered lock (use_lock Acquire, an
    acquire-equal on AIE2, and Release); set emits aiex.set_lock of every registered lock where it is called."""

    _index = itertools.count()

    def __init__(self, initial_value=0):
        self.initial_value = initial_value
        self.worker_locks: list[tuple[Tile, str]] = []
        self.name = f"barrier_{next(WorkerRuntimeBarrier._index)}"
        REC.barriers.append(self)

    def _registered(self) -> tuple[Tile, str]:
        if len(self.worker_locks) == 0:
            raise ValueError("No workers have been registered for this barrier. Need to pass the barrier as an "
                             "argument to the worker.")
        return self.worker_locks[-1]

    def _use_lock(self, action: str, value: Any) -> None:
        lock = self._registered()
        value = _lock_value(f"{self.name}.{action}", value)
        if REC.tracing is None:  # UseLockOp::verify (AIEDialect.cpp): a use_lock outside a core or a DMA
            raise ValueError("'aie.use_lock' op expects some parent op to be one of AIE::device, AIE::core, "
                             "func::func, AIE::mem, AIE::shimDMA, or AIEX::dma_configure_task")
        if lock[0] is not REC.tracing.tile:
            raise ValueError(f"{self.name}.{action} in the core of {REC.tracing.tile} uses the lock of {lock[0]}: "
                             f"the barrier was last registered by another Worker")
        REC.ops.append((f"barrier_{action}", self.name, value))

    def wait_for_value(self, value):
        self._use_lock("wait", value)

    def set(self, value):
        """_BarrierSetOp(self, value).resolve(): aiex.set_lock of every registered lock, here and now."""
        value = _lock_value(f"{self.name}.set", value)
        if REC.sequence is None:  # its docstring: "from within a runtime sequence body"
            raise ValueError(f"{self.name}.set({value}) outside the runtime sequence")
        if not 0 <= value <= LOCK_VALUE_MAX:  # SetLockOp::verify; the I32Attr reads a negative value as unsigned
            raise ValueError(f"'aiex.set_lock' op Lock value exceeds the maximum value of {LOCK_VALUE_MAX}")
        if not self.worker_locks:  # not 1.4.3's refusal: it silently emits nothing, and the core waits forever
            raise ValueError(f"{self.name}.set({value}) reaches no lock: no Worker was given the barrier, so 1.4.3 "
                             f"emits no aiex.set_lock and a core waiting on it hangs")
        REC.rt_events.append(("barrier", (self.name, value, tuple(t for t, _ in self.worker_locks))))

    def release_with_value(self, value):
        self._use_lock("release", value)


# ---- the lower-level primitives: Lock, Flow, TileDma (1.4.3's programming guide sections 2g and 2h) -----------
# What IRON 1.4.3 offers below ObjectFifo (1.4.3/api/iron/index.html "Advanced primitives", gh-pages @5100e2d6):
# python/iron/lock.py L33-55 (Lock), L91-99 (acquire); python/iron/dataflow/flow.py L70-104 (Flow);
# python/iron/dataflow/tile_dma.py (Acquire, Release, Bd, DmaChannel dataclasses; TileDma L231-257); Runtime
# add_flow / add_lock / add_tile_dma (runtime.py L255-271). Program.resolve_program (program.py L148-239) resolves
# the Runtime's locks before the TileDma buffers and the Worker bodies, and the TileDma programs after the Workers.
class NotResolvedError(Exception):
    """python/iron/resolvable.py's error: an object's op asked for before the object was resolved."""


class WireBundle:  # the aie.dialects._aie_enum_gen names the stand-in uses
    DMA = "DMA"


class DMAChannelDir:
    S2MM = "S2MM"
    MM2S = "MM2S"


class Lock:
    """A named aie.lock on a tile. Resolved only when given to Runtime.add_lock (program.py L206-207 at 1.4.3
    resolves `self._rt.locks` and nothing else), so a Lock a core or a DMA uses without it has no op."""

    _glock_index = itertools.count()

    def __init__(self, tile, lock_id=None, init=0, name=None):
        self._tile, self._lock_id, self._init = tile, lock_id, init
        self._name = name or f"lock_{next(Lock._glock_index)}"
        self._op: Any = None

    @property
    def tile(self) -> Tile:
        return self._tile

    @property
    def name(self) -> str:
        return self._name

    @property
    def lock_id(self) -> int | None:
        return self._lock_id

    @property
    def init(self) -> int:
        return self._init

    # python/iron/lock.py: `op` raises NotResolvedError until resolve() ran (stored version @087517df; the 1.4.3
    # render @5100e2d6 shows acquire, acquire_exact and release emitting use_lock(self.op, ...), L91-107)
    @property
    def op(self) -> Any:
        if self._op is None:
            raise NotResolvedError(f"Lock {self._name} has no op: register it with Runtime.add_lock (only the "
                                   f"runtime's locks are resolved, python/iron/program.py L206-207)")
        return self._op

    def resolve(self, loc=None, ip=None) -> None:
        if self._op is None:
            if self._tile is None or not self._tile.placed:  # lock.py resolve() (stored version @087517df)
                raise ValueError("Cannot resolve Lock until it has been placed.")
            self._op = ("lock", self._name)

    def acquire(self, value=1):
        """aie.use_lock(self, AcquireGreaterEqual, value): wait until the lock is >= value, then take value."""
        self._use("acquire_ge", value)

    def acquire_exact(self, value=1):
        """aie.use_lock(self, Acquire, value): wait until the lock equals value (AIE2 acquire-equal)."""
        self._use("acquire_eq", value)

    def release(self, value=1):
        """aie.use_lock(self, Release, value): add value to the lock."""
        self._use("release", value)

    def _use(self, action: str, value: Any) -> None:
        value = _lock_value(f"{self._name}.{action}", value)
        self.op  # noqa: B018 - lock.py emits use_lock(self.op, ...): an unresolved lock fails here
        if REC.tracing is None:  # UseLockOp::verify, AIEDialect.cpp 4073-4076 at 1.4.3 (doxygen render @7fdaee03)
            raise ValueError("'aie.use_lock' op expects some parent op to be one of AIE::device, AIE::core, "
                             "func::func, AIE::mem, AIE::shimDMA, or AIEX::dma_configure_task")
        REC.ops.append(("lock", self._name, action, value))
        REC.lock_uses.append((self, REC.tracing))

    def __repr__(self) -> str:
        return f"<lock {self._name} at {self._tile}>"


@dataclass(eq=False)
class Acquire:
    """aie.use_lock(lock, AcquireGreaterEqual | Acquire, value) at the start of a BD (tile_dma.py at 1.4.3)."""

    lock: Lock
    value: int = 1
    greater_equal: bool = True


@dataclass(eq=False)
class Release:
    """aie.use_lock(lock, Release, value) at the end of a BD (tile_dma.py at 1.4.3)."""

    lock: Lock
    value: int = 1


@dataclass(eq=False)
class Bd:
    """One BD block: acquires, aie.dma_bd of `buffer`, releases, aie.next_bd (tile_dma.py at 1.4.3)."""

    buffer: Buffer
    offset: int = 0
    length: int | None = None
    acquires: list = field(default_factory=list)
    releases: list = field(default_factory=list)
    next: int | str | None = "self"
    packet: tuple | None = None
    bd_id: int | None = None
    sizes: list = field(default_factory=list)
    strides: list = field(default_factory=list)
    pad_dimensions: list | None = None
    iteration: Any = None
    out_of_order_id: int | None = None

    def successor(self, index: int, count: int) -> int | None:
        """The index of the BD this one chains to in its channel (None: the chain ends)."""
        if self.next == "self":
            return index
        return self.next if isinstance(self.next, int) and 0 <= self.next < count else None


@dataclass(eq=False)
class DmaChannel:
    """One DMA channel of a tile with its BD chain (tile_dma.py at 1.4.3)."""

    direction: str
    channel: int
    bds: list
    pad_value: int = 0
    repeat_count: int = 0
    out_of_order: bool = False


class TileDma:
    """A tile's explicit DMA program: aie.mem (core tile), aie.memtile_dma or aie.shim_dma (tile_dma.py L231-257
    at 1.4.3); registered with Runtime.add_tile_dma and resolved after the Workers."""

    def __init__(self, tile, channels):
        self._tile = tile
        self._channels = list(channels)
        self._resolved = False

    @property
    def tile(self) -> Tile:
        return self._tile

    @property
    def channels(self) -> list[DmaChannel]:
        return list(self._channels)

    def all_tiles(self) -> list[Tile]:
        return [self._tile]

    def all_buffers_and_locks(self) -> tuple[list[Buffer], list[Lock]]:
        buffers: list[Buffer] = []
        locks: list[Lock] = []
        for ch in self._channels:
            for bd in ch.bds:
                if bd.buffer not in buffers:
                    buffers.append(bd.buffer)
                for use in (*bd.acquires, *bd.releases):
                    if use.lock not in locks:
                        locks.append(use.lock)
        return buffers, locks

    def resolve(self, loc=None, ip=None) -> None:
        """Acquire.emit / Release.emit use each lock's op: a lock the Runtime was not given fails here."""
        for ch in self._channels:
            for bd in ch.bds:
                for use in (*bd.acquires, *bd.releases):
                    use.lock.op  # noqa: B018
        self._resolved = True


class Flow:
    """One circuit-switched aie.flow (flow.py L70-104 at 1.4.3); with shim_symbol it also emits the
    aie.shim_dma_allocation a runtime sequence drives with shim_dma_single_bd_task."""

    def __init__(self, src, dst, *, src_port=WireBundle.DMA, src_channel=0, dst_port=WireBundle.DMA, dst_channel=0,
                 shim_symbol=None):
        self._src, self._dst = src, dst
        self._src_port, self._src_channel = src_port, src_channel
        self._dst_port, self._dst_channel = dst_port, dst_channel
        self._shim_symbol = shim_symbol

    @property
    def src(self) -> Tile:
        return self._src

    @property
    def dst(self) -> Tile:
        return self._dst

    def ends(self) -> tuple[tuple[Tile, str, int], tuple[Tile, str, int]]:
        return (self._src, self._src_port, self._src_channel), (self._dst, self._dst_port, self._dst_channel)

    def all_tiles(self) -> list[Tile]:
        return [self._src, self._dst]

    def shim_allocation(self) -> ShimAllocation | None:
        """The aie.shim_dma_allocation this Flow declares when resolved (None without shim_symbol): flow.py's
        `_emit_shim_dma_alloc`, read in the stored flow.py whose layout matches the 1.4.3 render (index id
        55174578802; SHIM_RESEARCH.md S8): the shim end as source is MM2S on src_channel, as destination S2MM on
        dst_channel; a shim_symbol on a Flow with no shim end raises this ValueError."""
        if self._shim_symbol is None:
            return None
        if tile_kind(self._src) == "ShimNOCTile":
            return ShimAllocation(self._shim_symbol, self._src, DMAChannelDir.MM2S, self._src_channel)
        if tile_kind(self._dst) == "ShimNOCTile":
            return ShimAllocation(self._shim_symbol, self._dst, DMAChannelDir.S2MM, self._dst_channel)
        raise ValueError(f"Flow.shim_symbol={self._shim_symbol!r} requires a shim endpoint, but neither src "
                         f"({self._src}) nor dst ({self._dst}) is a shim tile.")


@dataclass(frozen=True)
class ShimAllocation:
    """An aie.shim_dma_allocation (`$sym_name ($tile, $channel_dir, $channel_index)`, AIE dialect doc at 1.4.3,
    gh-pages @5100e2d6): a Flow's with shim_symbol, or the one aiecc makes for a fifo whose end is the runtime
    (named as the fifo, its channel chosen by aiecc: None here)."""

    symbol: str
    tile: Tile
    direction: str
    channel: int | None


# ---- the runtime sequence -------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class BlockArgument:
    """`RuntimeData.op`: the runtime sequence's block argument a tensor argument is bound to (runtime.py L341-344
    at 1.4.3), the memref value aiex builders such as shim_dma_single_bd_task take as `mem`."""

    data: RuntimeData

    def __repr__(self) -> str:
        return f"{self.data!r}.op"


@dataclass(frozen=True, eq=False)
class RuntimeData:
    """A runtime-sequence buffer argument."""

    index: int
    type: Any
    op: BlockArgument = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "op", BlockArgument(self))

    @property
    def numel(self) -> int:
        return _count(shape_dtype(self.type)[0])

    def __repr__(self) -> str:
        return f"<arg{self.index}>"


class TaskGroup:
    def __init__(self, id=None):  # noqa: A002 - IRON's name
        seq = REC.sequence
        if id is None and seq is None:
            raise RuntimeError("TaskGroup() must be constructed within the function passed to Runtime(seq_fn, "
                               "fn_args).")
        self.group_id = id if id is not None else next(seq.group_index)
        self.tasks: list[dict[str, Any]] = []
        self.finished = False
        if seq is not None:
            seq.open.append(self)

    # python/iron/runtime/runtime.py (1.4.3's gh-pages render @5100e2d6): a TaskGroup finished outside the
    # sequence: the stand-in's own
    def finish(self):
        seq = REC.sequence
        if seq is None or self not in seq.open:
            raise IronRuntimeError(f"Task group {self.group_id} is not open in the running sequence")
        seq.open.remove(self)
        self.finished = True
        REC.finishes.append(self.group_id)
        REC.rt_events.append(("finish", self.group_id))
        # runtime.py finish_task_group L89-113 at 1.4.3: the awaits of the group's wait=True tasks, then a free of
        # every task: each returns its BD to its shim tile's pool (AIEAssignRuntimeSequenceBDIDs.cpp L215-252)
        if any(t["wait"] for t in self.tasks):
            seq.last_await = next(seq.clock)
        for t in self.tasks:
            _return_bd(seq, t.get("bd"))

    def __repr__(self) -> str:
        return f"TaskGroup({self.group_id})"


@dataclass
class _ActiveSequence:
    args: list[RuntimeData]
    group_index: Any = field(default_factory=itertools.count)
    open: list[TaskGroup] = field(default_factory=list)
    used_default: bool = False
    used_explicit: bool = False
    allocations: dict[str, ShimAllocation] = field(default_factory=dict)  # the declared shim_dma_allocations
    bd_ids: dict[tuple[int, int], set[int]] = field(default_factory=dict)  # per tile: the BD ids in use
    tokens: dict[tuple, int] = field(default_factory=dict)  # per shim channel: issue_token starts not yet awaited
    tasks: list[DmaTask] = field(default_factory=list)  # the raw tasks, in configure order
    clock: Any = field(default_factory=itertools.count)  # orders starts and awaits
    last_await: int = -1  # when the last dma_await_task (raw, or a TaskGroup finish's) was emitted


# python/iron/runtime/runtime.py (1.4.3's gh-pages render @5100e2d6): fill / drain inside Runtime.sequence, on its
# arguments, in an open task
# group, with a TensorAccessPattern; a handle the Runtime was not given: the stand-in's own (no end to lower)
def _transfer(kind: str, handle: ObjectFifoHandle, buf: Any, tap: Any, wait: bool, group: Any, raw: tuple) -> Any:
    seq = REC.sequence
    if seq is None:
        raise RuntimeError(f"{kind}() must be called within the function passed to Runtime(seq_fn, fn_args)")
    if tap is not None and any(x is not None for x in raw):
        raise ValueError("DMATask: tap and sizes/strides/offset/transfer_len are mutually exclusive access-pattern "
                         "specifications; pass only one.")
    if not any(buf is a for a in seq.args):
        raise ValueError(f"{kind}() of {handle.name} needs a runtime-sequence buffer argument, got {buf!r}")
    if tap is not None and not isinstance(tap, TensorAccessPattern):
        raise ValueError(f"{kind}() of {handle.name}: tap must be a TensorAccessPattern, got {type(tap).__name__}")
    if group is None:
        seq.used_default = True
    else:
        if not isinstance(group, TaskGroup) or group not in seq.open:
            raise IronRuntimeError(f"{kind}() of {handle.name} in {group!r}, which is not an open task group")
        seq.used_explicit = True
    if not isinstance(handle.endpoint, RuntimeEndpoint):
        raise ValueError(f"{kind}() of {handle.name}: the handle was not given to Runtime(seq_fn, fn_args), so the "
                         f"runtime has no end of this fifo")
    record = {"kind": kind, "fifo": handle.name, "buffer": buf, "tap": tap, "wait": wait,
              "group": group.group_id if group is not None else None, "shim": handle.shim_tile}
    if handle.shim_tile is not None and handle.shim_tile.placed:  # a fill/drain is one shim BD task (dmatask.py)
        record["bd"] = _take_bd(seq, handle.shim_tile, "aiex.dma_configure_task")
    REC.transfers.append(record)
    REC.rt_events.append(("task", record["group"]))
    if group is not None:
        group.tasks.append(record)
    return record


# ---- aie.dialects.aiex in the runtime sequence: the DMA task ops a Flow's shim end is driven with ------------------
# What 1.4.3 establishes (SHIM_RESEARCH.md; docs/shared_l1.md 10.1): the AIEX ops dma_configure_task_for /
# dma_start_task / dma_await_task / dma_free_task (AIEX dialect doc, 1.4.3 gh-pages @5100e2d6); the BD-id pass
# AIEAssignRuntimeSequenceBDIDs.cpp (1.4.3 doxygen render, gh-pages @7fdaee03): one BD-id pool per tile for every
# runtime-sequence task (L56-79, seeded with the tile's static DMA BDs), ids taken at configure (L162-213) and
# returned by an await or a free (L215-252), a per-channel token balance (L100-150). The Python helpers
# (shim_dma_single_bd_task and the *_task wrappers) are not stored at the tag: they are modelled on what the three
# stored python/dialects/aiex.py versions share (@0155ebd7, older than the tag; index ids 55050849217 and 68996018272,
# later), with the 1.4.3 programming guide's signature (section-2d/DMATasks, gh-pages @5100e2d6).
_TASK_KEYWORDS_NOT_AT_TAG = ("offset_parameter", "axcache")  # in some stored aiex.py versions, not in all


@dataclass(eq=False)
class DmaTask:
    """A configured runtime-sequence DMA task (the `!index` result of aiex.dma_configure_task_for): one BD on its
    allocation's shim tile. `state`: configured, started, awaited or freed."""

    alloc: ShimAllocation
    mem: BlockArgument
    tap: TensorAccessPattern
    issue_token: bool
    bd: tuple[tuple[int, int], int]
    state: str = "configured"
    started: int = -1

    @property
    def channel_key(self) -> tuple:
        """verifyTokenBalance's key (tile, direction, channel; L115-121): a fifo's allocation, whose channel aiecc
        picks, is keyed by its name."""
        a = self.alloc
        return (a.tile.at(), a.direction, a.channel if a.channel is not None else a.symbol)

    def __repr__(self) -> str:
        return f"DmaTask({self.alloc.symbol}, {self.mem!r}, {self.state})"


def _take_bd(seq: _ActiveSequence, tile: Tile, op: str) -> tuple[tuple[int, int], int]:
    """AIEAssignRuntimeSequenceBDIDs.cpp allocateConfigure L162-213 at 1.4.3: the next free BD id of the tile's pool
    (seeded with its static DMA programs' BDs, L58-79), or this error when all getNumBDs are in use. The id the
    stand-in hands out (the lowest free) is its own numbering: BdIdGenerator::nextBdId was not read."""
    at = tile.at()
    assert at is not None
    used = seq.bd_ids.setdefault(at, set())
    free = [i for i in range(NUM_BDS[tile_kind(tile)]) if i not in used]
    if not free:
        raise ValueError(f"'{op}' op Too many simultaneously active buffer descriptors on tile ({at[0]},{at[1]}), "
                         f"which supports up to {NUM_BDS[tile_kind(tile)]}. Emit an aiex.dma_free_task / "
                         f"aiex.dma_await_task to reuse BDs.")
    used.add(free[0])
    return at, free[0]


def _return_bd(seq: _ActiveSequence, bd: tuple[tuple[int, int], int] | None) -> None:
    if bd is not None:
        seq.bd_ids[bd[0]].discard(bd[1])


def _in_sequence(name: str) -> _ActiveSequence:
    """The running sequence; an aiex builder outside it: the stand-in's own refusal (1.4.3 would emit the op at
    whatever insertion point is current, outside aiex.runtime_sequence)."""
    if REC.sequence is None:
        raise RuntimeError(f"{name}() must be called within the function passed to Runtime(seq_fn, fn_args)")
    return REC.sequence


def _task_pattern(mem: BlockArgument, tap: Any, offset: Any, sizes: Any, strides: Any,
                  transfer_len: Any) -> TensorAccessPattern:
    """The access pattern of a raw shim task, held to the shim BD fields the fills' are (verify_shim_bd, and the
    DMABDOp::verify bound on the buffer). Given as sizes/strides it is checked as a TensorAccessPattern over the
    buffer (taplib's checks: stricter than the helper, which takes raw lists)."""
    if tap is not None:
        if not isinstance(tap, TensorAccessPattern):
            raise ValueError(f"shim_dma_single_bd_task: tap must be a TensorAccessPattern, got {type(tap).__name__} "
                             f"(the stand-in's own check)")
    else:
        if sizes is None:
            # every stored aiex.py defaults sizes to [0, 0, 0, 0] (a zero-length BD): not established at 1.4.3
            raise ValueError("shim_dma_single_bd_task without tap or sizes is not established at 1.4.3 (the stored "
                             "aiex.py versions emit a zero-length BD)")
        strides = [0] * (len(sizes) - 1) + [1] if strides is None else strides
        if len(sizes) != len(strides):  # the dma_bd wrapper of index id 55050849217 (the older one zips silently)
            raise ValueError("dma_bd: sizes and strides must be the same length")
        tap = TensorAccessPattern((mem.data.numel,), offset or 0, list(sizes), list(strides))
    if transfer_len is not None and transfer_len != int(np.prod(tap.sizes[-3:])):
        # every stored shim_dma_bd (python/dialects/aiex.py, SHIM_RESEARCH.md S7) defaults the length to
        # prod(sizes[-3:]); another length's meaning on a shim BD at the tag was not read
        raise ValueError(f"shim_dma_single_bd_task: transfer_len {transfer_len} other than prod(sizes[-3:]) = "
                         f"{int(np.prod(tap.sizes[-3:]))} is not established at 1.4.3")
    if tap.max_index() >= mem.data.numel:  # DMABDOp::verify 3190-3530 at 1.4.3, as for the fills
        raise ValueError(f"'aie.dma_bd' op Specified stride(s) and size(s) result in out of bounds access in buffer, "
                         f"for index {tap.max_index()} in memref of length {mem.data.numel}.")
    verify_shim_bd(tap, _buffer_elem_bits(mem.data.type))
    if len(tap.sizes) != 4:
        # every stored helper (python/dialects/aiex.py) takes sizes[0] as the task's repeat count (sizes[0] - 1)
        # whatever the length, and @0155ebd7 defaults strides to four entries: only the 4-dim form of the 1.4.3
        # guide ("a maximum of four size dimensions ... not used should be set to 1") is unambiguous
        raise ValueError(f"shim_dma_single_bd_task with {len(tap.sizes)} sizes (not 4) is not established at 1.4.3")
    return tap


def shim_dma_single_bd_task(alloc, mem, *, tap=None, offset=None, sizes=None, strides=None, transfer_len=None,
                            issue_token=False, burst_length=0, packet=None, **keywords):
    """aiex.shim_dma_single_bd_task: configures (does not start) a one-BD task on the shim_dma_allocation `alloc`
    moving runtime buffer `mem` (a RuntimeData's `.op`), and returns it for dma_start_task. Only the keywords
    every stored version has; keyword-only after `mem` because `packet`'s position differs between them (9th in
    two, 10th in index id 68996018272): the stand-in is stricter there than any one version."""
    for name in keywords:
        if name in _TASK_KEYWORDS_NOT_AT_TAG:
            raise TypeError(f"shim_dma_single_bd_task(): keyword {name!r} is not established at 1.4.3 (only some "
                            f"stored aiex.py versions take it)")
        # no stored aiex.py version, nor the 1.4.3 guide's signature, takes it: Python's own refusal
        raise TypeError(f"shim_dma_single_bd_task() got an unexpected keyword argument '{name}'")
    seq = _in_sequence("shim_dma_single_bd_task")
    if tap is not None and not (offset is None and sizes is None and strides is None):  # every stored aiex.py
        raise ValueError("shim_dma_single_bd_task can take either a TensorAccessPattern OR (sizes and/or strides "
                         "and/or offsets), but not both.")
    if not isinstance(alloc, str):
        raise TypeError(f"shim_dma_single_bd_task: alloc must be the allocation's symbol name, got "
                        f"{type(alloc).__name__} (the stand-in's own: it has no allocation ops)")
    if alloc not in seq.allocations:
        # dma_configure_task_for's `alloc` is a symbol reference to an aie.shim_dma_allocation (AIEX dialect doc at
        # 1.4.3), resolved by --aie-substitute-shim-dma-allocations (AIEAssignRuntimeSequenceBDIDs.cpp L267-270);
        # the diagnostic's wording is the stand-in's own (that pass was not read)
        raise ValueError(f"'aiex.dma_configure_task_for' op no aie.shim_dma_allocation named @{alloc} (declared: "
                         f"{sorted(seq.allocations)}; a Flow's shim_symbol counts only once given to Runtime.add_flow)")
    if not isinstance(mem, BlockArgument) or not any(mem.data is a for a in seq.args):
        # the BD's buffer is the sequence's block argument, RuntimeData.op (runtime.py L341-344 at 1.4.3); anything
        # else is not a memref value of this sequence: the stand-in's own wording
        raise ValueError(f"shim_dma_single_bd_task on {alloc}: mem must be a runtime-sequence argument's .op, got "
                         f"{mem!r}")
    if burst_length != 0:  # the tag's valid burst lengths for a task were not read
        raise ValueError(f"shim_dma_single_bd_task: burst_length {burst_length} (other than 0, the largest) is not "
                         f"established at 1.4.3")
    if packet is not None:
        raise ValueError("shim_dma_single_bd_task: packet is not modelled by the stand-in's own (no packet flows)")
    pattern = _task_pattern(mem, tap, offset, sizes, strides, transfer_len)
    a = seq.allocations[alloc]
    task = DmaTask(a, mem, pattern, bool(issue_token), _take_bd(seq, a.tile, "aiex.dma_configure_task"))
    seq.tasks.append(task)
    REC.dma_tasks.append(task)
    REC.rt_events.append(("configure", alloc))
    return task


def _tasks(name: str, tasks: tuple, verb: str) -> _ActiveSequence:
    seq = _in_sequence(name)
    if not tasks:  # every stored aiex.py wrapper (its words, "to free" in dma_start_task's too)
        raise ValueError(f"{name} must receive at least one DMAConfigureTaskForOp to {verb}")
    for t in tasks:
        if not isinstance(t, DmaTask) or t not in seq.tasks:
            raise TypeError(f"{name}: {t!r} is not a task configured in this runtime sequence (the stand-in's own: "
                            f"IRON's fills and drains are finished by their TaskGroup)")
    return seq


def dma_start_task(*args):
    """aiex.dma_start_task of each task: pushes its BD on its channel's queue (with a token if issue_token)."""
    seq = _tasks("dma_start_task", args, "free")
    for t in args:
        if t.state != "configured":
            # starting a task twice (or after its await or free) is the stand-in's own refusal: 1.4.3's BD-id pass
            # does not check it, and the lowering never needs it (its BD may already be reused)
            raise ValueError(f"dma_start_task of {t!r}: a task is started once, before its await or free (the "
                             f"stand-in's own)")
        t.state, t.started = "started", next(seq.clock)
        if t.issue_token:  # verifyTokenBalance L125-128
            seq.tokens[t.channel_key] = seq.tokens.get(t.channel_key, 0) + 1
        REC.rt_events.append(("start", t.alloc.symbol))


def _recycle(t: DmaTask, op: str, seq: _ActiveSequence) -> None:
    """recycle L226-252 at 1.4.3: the task's BD returns to the pool; a free after its await is tolerated, any other
    second return is refused."""
    if t.state in ("awaited", "freed") and not (op == "aiex.dma_free_task" and t.state == "awaited"):
        raise ValueError(f"'{op}' op frees buffer descriptor ID {t.bd[1]}, which is not currently in use; it was "
                         f"already completed by an earlier aiex.dma_free_task or aiex.dma_await_task")
    _return_bd(seq, t.bd)


def dma_await_task(*args):
    """aiex.dma_await_task of each task: blocks the host until its token arrives, then returns its BD."""
    seq = _tasks("dma_await_task", args, "wait for")
    for t in args:
        if not t.issue_token:
            # dma_await_task needs issue_token = true (AIEX dialect doc at 1.4.3); "a non-issue_token await is
            # diagnosed later by aie-dma-tasks-to-npu" (AIEAssignRuntimeSequenceBDIDs.cpp L112-113, L131-133): the
            # wording below is the stand-in's own (that pass was not read)
            raise ValueError(f"'aiex.dma_await_task' op awaits {t!r}, configured without issue_token=True")
        if seq.tokens.get(t.channel_key, 0) < 1:  # verifyTokenBalance L136-143
            raise ValueError("'aiex.dma_await_task' op awaits a task-completion token on a channel where no "
                             "outstanding token is guaranteed to have been produced; the runtime sequence would "
                             "block here forever. Ensure a prior issue_token dma_start_task on the same tile, "
                             "direction and channel reaches this await")
        if t.state == "configured":
            # another task's token on the channel would let 1.4.3 through (it counts tokens per channel); awaiting
            # a task before starting it is still the stand-in's own refusal
            raise ValueError(f"dma_await_task of {t!r} before its dma_start_task (the stand-in's own)")
        _recycle(t, "aiex.dma_await_task", seq)
        seq.tokens[t.channel_key] -= 1
        t.state = "awaited"
        seq.last_await = next(seq.clock)
        REC.rt_events.append(("await", t.alloc.symbol))


def dma_free_task(*args):
    """aiex.dma_free_task of each task: returns its BD to the pool once the task is known complete."""
    seq = _tasks("dma_free_task", args, "free")
    for t in args:
        if t.state == "configured":
            raise ValueError(f"dma_free_task of {t!r} before its dma_start_task (the stand-in's own: its BD could "
                             f"be reused by the next task while it is still queued)")
        if t.state == "started" and seq.last_await < t.started:
            # "Using dma_free_task(X) before task X has completed will lead to a race condition" (1.4.3 programming
            # guide, section-2d/DMATasks): the stand-in asks for an await emitted after the task's start (its own,
            # or a TaskGroup finish's, such as the C drain of the same block); that await implies the task's
            # completion is the caller's claim, not checked here
            raise ValueError(f"dma_free_task of {t!r} with no dma_await_task since its start: it may still be "
                             f"running (the stand-in's own rule, from the 1.4.3 guide's race)")
        _recycle(t, "aiex.dma_free_task", seq)
        t.state = "freed"
        REC.rt_events.append(("free", t.alloc.symbol))


def _declare_allocations(rt: Runtime) -> dict[str, ShimAllocation]:
    """The sequence's aie.shim_dma_allocation symbols: each runtime fifo's (named as the fifo, which aiecc's
    objectfifo lowering declares: 1.4.3 guide section-2d's `alloc` bullet) and each added Flow's shim_symbol. Two
    with one name would be one MLIR symbol defined twice (the module's symbol table verifier: the stand-in's
    wording)."""
    out: dict[str, ShimAllocation] = {}
    found = [ShimAllocation(h.name, h.endpoint.tile, DMAChannelDir.MM2S if h.is_prod else DMAChannelDir.S2MM, None)
             for h in rt.fifos if isinstance(h.endpoint, RuntimeEndpoint) and h.endpoint.tile is not None
             and h.endpoint.tile.placed]
    found += [a for a in (f.shim_allocation() for f in rt.flows) if a is not None]
    for a in found:
        if a.symbol in out:  # MLIR's symbol table verifier (mlir/lib/IR/SymbolTable.cpp, not read here)
            raise ValueError(f"redefinition of symbol named '{a.symbol}' (two aie.shim_dma_allocation ops)")
        out[a.symbol] = a
    return out


def _retire_check(seq: _ActiveSequence) -> None:
    """A raw task neither awaited nor freed by the end of the sequence keeps its BD id for good: 1.4.3's BD-id pass
    does not refuse that (it only runs out, L194-203); the stand-in's own refusal, so the lowering frees each."""
    for t in seq.tasks:
        if t.state in ("configured", "started"):
            raise ValueError(f"{t!r} is never awaited or freed in the runtime sequence (the stand-in's own: its BD "
                             f"id stays taken)")


@dataclass(frozen=True)
class RuntimeEndpoint:
    """The runtime's end of a shim fifo (bound when the handle is given to Runtime)."""

    tile: Tile | None


class Runtime:
    def __init__(self, seq_fn, fn_args=None, *, strict_task_groups=True):
        self.seq_fn, self.fn_args, self.strict = seq_fn, list(fn_args or []), strict_task_groups
        self.flows: list[Flow] = []
        self.locks: list[Lock] = []
        self.tile_dmas: list[TileDma] = []
        self.fifos = [a for a in _flatten(self.fn_args) if isinstance(a, ObjectFifoHandle)]
        for h in self.fifos:  # _register_fn_args: the shim end of each handle given to the runtime
            h.endpoint = RuntimeEndpoint(_typed(h.shim_tile, "ShimNOCTile") if h.shim_tile else None)

    # python/iron/runtime/runtime.py L255-271 at 1.4.3: the lower-level primitives the Program resolves
    def add_flow(self, flow):
        self.flows.append(flow)

    def add_lock(self, lock):
        self.locks.append(lock)

    def add_tile_dma(self, tile_dma):
        self.tile_dmas.append(tile_dma)

    def resolve(self):
        args: list[Any] = []
        data: list[RuntimeData] = []
        for a in self.fn_args:
            if isinstance(a, type) or getattr(a, "__origin__", None) is np.ndarray:
                data.append(RuntimeData(len(data), a))
                args.append(data[-1])
            else:
                args.append(a)
        REC.sequence = seq = _ActiveSequence(data, allocations=_declare_allocations(self))
        for td in self.tile_dmas:  # seedFromStaticBds (L58-67): a shim tile's static BDs are taken
            if tile_kind(td.tile) == "ShimNOCTile":
                for _ in (bd for ch in td.channels for bd in ch.bds):
                    _take_bd(seq, td.tile, "aiex.dma_configure_task")
        try:
            self.seq_fn(*args)
            if seq.open:
                raise IronRuntimeError(f"Failed to close task groups: {seq.open}")
            _retire_check(seq)
            if self.strict and seq.used_default and seq.used_explicit:
                raise IronRuntimeError("Mixing explicit task groups and the default task group is prohibited. "
                                       "Please assign all tasks to a task group.")
        finally:
            REC.sequence = None
        self.data = data


# ---- what mlir-aie 1.4.3 verifies after IRON: the fifo ops, then aiecc's link pools and DMA BDs ----
# The messages are the diagnostics' text; the real tool prints them (IRON's verify, or aiecc with
# exit 1) where the stand-in raises ValueError. Sources, all at 1.4.3 (the gh-pages doxygen render
# of lib/Dialect/AIE/IR/AIEDialect.cpp, Transforms/AIEObjectFifoSplit.cpp, AIETargetModel.h):
#   ObjectFifoCreateOp::verify 467-609, ObjectFifoLinkOp::verify 1354-1474, ObjectFifoPoolOp::verify
#   646-703, ObjectFifoDmaEndpointOp::verify 899-957, DMABDOp::verify 3190-3530.
# AIE2TargetModel (AIETargetModel.h 769-807; npu2 is an AIE2 target model too): the dims a BD takes,
# its longest length in 32-bit words, the wrap (size) and step (stride) field bits, by tile kind.
BD_LIMITS = {"ShimNOCTile": (3, (1 << 32) - 1, 10, 20), "MemTile": (4, (1 << 17) - 1, 10, 17),
             "CoreTile": (3, (1 << 14) - 1, 8, 13)}


def _max_index(dims) -> int:
    return sum((size - 1) * stride for size, stride in dims)


def _bd(op: str, msg: str) -> ValueError:
    return ValueError(f"'{op}' op {msg}")


def verify_bd(kind: str, obj_type: Any, length: int, dims, buffer_elems: int | None = None) -> None:
    """DMABDOp::verify (lib/Dialect/AIE/IR/AIEDialect.cpp at 1.4.3, its gh-pages doxygen render, lines
    3190-3530) of a memtile or core BD moving `length` elements of a buffer of `obj_type`'s
    element type (`buffer_elems` long, one object unless given) along `dims` ((size, stride),
    outermost first, in elements)."""
    width, n = _elem_bytes(obj_type), buffer_elems if buffer_elems is not None else _elems(obj_type)
    if length * width % 4:
        raise _bd("aie.dma_bd", "transfer length must be multiple of 4 (i.e., represent 4 byte aligned address)")
    max_dims, max_words, wrap_bits, step_bits = BD_LIMITS[kind]
    words = length * width // 4
    if words > max_words:
        raise _bd("aie.dma_bd", f"buffer descriptor length ({words} 32-bit words) exceeds the maximum of {max_words} "
                                f"words supported by this tile type")
    if not dims:
        return
    dims = [tuple(d) for d in dims]
    if len(dims) > max_dims:
        raise _bd("aie.dma_bd", f"Cannot give more than {max_dims} dimensions for step sizes and wraps on this tile "
                                f"(got {len(dims)} dimensions).")
    if n <= _max_index(dims):
        raise _bd("aie.dma_bd", f"Specified stride(s) and size(s) result in out of bounds access in buffer, for index "
                                f"{_max_index(dims)} in memref of length {n}.")
    max_size, max_stride = (1 << wrap_bits) - 1, 1 << step_bits  # wraps unbiased, steps stored as stride - 1
    for size, stride in dims:
        if stride == 0:
            raise _bd("aie.dma_bd", "Invalid step size; must be a positive integer.")
        if stride > n:
            raise _bd("aie.dma_bd", f"Step size {stride} exceeds memref size {n}")
        if size > max_size:  # objectfifo BDs are memtile/core BDs: no contiguous-shim exemption
            raise _bd("aie.dma_bd", f"Size may not exceed {max_size}.")
        if stride > max_stride:
            raise _bd("aie.dma_bd", f"Stride may not exceed {max_stride}.")
    if width < 4 and dims[-1][1] != 1:  # streams move 32-bit words
        raise _bd("aie.dma_bd", "For <32b width datatypes, inner-most dim stride must be 1")
    if width > 4 and dims[-1][1] != 1:
        raise _bd("aie.dma_bd", "For >32b width datatypes, inner-most dim stride must be 1")
    stepping = [i for i, (size, _) in enumerate(dims) if size > 1]
    if width % 4 and stepping:  # sub-word and 9-byte bfp16 elements: every step whole 32-bit words
        for i in stepping:
            size, stride = dims[i]
            if i == stepping[-1] and size * width % 4:
                raise _bd("aie.dma_bd", f"Innermost dim size ({size}) * {width}-byte element width = {size * width} "
                                        f"bytes: innermost dim size must be a multiple of 4 bytes for sub-32b element "
                                        f"types (the hardware size register is 32-bit-word granularity).")
            if i != stepping[-1] and stride * width % 4:
                raise _bd("aie.dma_bd", f"Dim {i} stride ({stride}) * {width}-byte element width = {stride * width} "
                                        f"bytes: non-innermost dim stride must be a multiple of 4 bytes for sub-32b "
                                        f"element types (the hardware stepsize register is 32-bit-word granularity).")


def _buffer_elem_bits(obj_type: Any) -> int:
    """Bits of one element of a runtime buffer (v8bfp16ebs8: a 72-bit block)."""
    elem = obj_type.__args__[1].__args__[0]
    return 72 if elem is v8bfp16ebs8 else 8 * np.dtype(elem).itemsize


SHIM_WRAP_MAX, SHIM_STEP_MAX, SHIM_ITER_MAX, SHIM_REPEAT_MAX = 0x3FF, 1 << 20, 64, 256


def verify_shim_bd(tap: TensorAccessPattern, elem_bits: int) -> None:
    """A shim transfer as 1.4.3 lowers it (AIEDmaToNpu getHardwareStridesWraps, NpuWriteBdOp and
    NpuPushQueueOp verifiers, as shared/reference/iron_mlir_aie.md reads them): 4 dims,
    innermost first once padded; d0 sizes and all strides in whole 32-bit words (stride 1 of d0 exempt);
    d0 and d1 wraps within 10 bits (d0 not for a linear transfer), d2 unprogrammed; the outermost dim is
    the iteration (size <= 64, its stride within 20 bits) and the queue's repeat count (<= 256 runs),
    a stride of 0 a pure repeat."""
    if len(tap.sizes) > 4:
        raise ValueError(f"'aiex.npu.dma_memcpy_nd' op a shim transfer has at most 4 dimensions, got {tap.sizes}")
    pad = 4 - len(tap.sizes)
    s = list(reversed([1] * pad + list(tap.sizes)))
    t = list(reversed([0] * pad + list(tap.strides)))
    if s[0] * elem_bits % 32:
        raise ValueError("'aiex.npu.dma_memcpy_nd' op Transfer sizes must be multiples of 4 bytes")
    for i in range(3):
        if s[i] > 1 and t[i] < 1:
            raise ValueError(f"'aiex.npu.dma_memcpy_nd' op Stride {i} must be a positive integer")
        if s[i] > 1 and t[i] * elem_bits % 32 and not (i == 0 and t[i] == 1):
            raise ValueError(f"'aiex.npu.dma_memcpy_nd' op Stride {i} is {t[i] * elem_bits / 8:g} bytes, which is "
                             f"not divisible by 4")
    linear = t[0] == 1 and (s[1] == 1 or t[1] == s[0]) and (s[2] == 1 or t[2] == s[0] * s[1])
    d0_words = s[0] * elem_bits // 32
    if (d0_words > SHIM_WRAP_MAX and not linear) or s[1] > SHIM_WRAP_MAX:
        raise ValueError(f"'aiex.npu.writebd' op Size 0 ({d0_words} words) or 1 ({s[1]}) exceeds the [0:1023] range")
    for i in range(4):
        if s[i] > 1 and max(1, t[i] * elem_bits // 32) > SHIM_STEP_MAX:
            raise ValueError(f"'aiex.npu.writebd' op Stride {i} exceeds the [1:{SHIM_STEP_MAX}] range")
    if s[3] > 1 and t[3] > 0 and s[3] > SHIM_ITER_MAX:
        raise ValueError(f"'aiex.npu.writebd' op Iteration size {s[3]} exceeds the [1:{SHIM_ITER_MAX}] range")
    if s[3] > SHIM_REPEAT_MAX:
        raise ValueError(f"'aiex.npu.push_queue' op Repeat count {s[3] - 1} exceeds the [0:255] range")


def _handle_dims(h: ObjectFifoHandle):
    return h.of.dims_to_stream if h.is_prod else h.dims_from_stream


# lib/Dialect/AIE/IR/AIEDialect.cpp at 1.4.3 (its gh-pages doxygen render): ObjectFifoCreateOp::verify 467-609,
# ObjectFifoLinkOp::verify 1354-1474
def _verify_fifo_ops() -> None:
    """The verifiers of the aie.objectfifo and aie.objectfifo.link ops IRON emits."""
    for f in REC.fifos:
        if isinstance(f._prod.endpoint, RuntimeEndpoint) and f.dims_to_stream:
            raise ValueError("`dimensionsToStream` data layout transformations are not supported on shim tile "
                             "producers")
        if any(isinstance(h.endpoint, RuntimeEndpoint) and h.dims_from_stream for h in f._cons):
            raise ValueError("`dimensionsFromStreamPerConsumer` data layout transformations are not supported on "
                             "shim tile consumers")
    seen: dict[int, _Link] = {}
    for lk in REC.links:
        link = lk["op"]
        for h in (*link.srcs, *link.dsts):
            if id(h.of) in seen and seen[id(h.of)] is not link:
                raise _bd("aie.objectfifo", "objectfifo cannot be in more than one ObjectFifoLinkOp")
            seen[id(h.of)] = link
        if link.kind == "forward":
            continue
        total = _elems(link.owner.obj_type)
        lengths = [(link.offsets[i + 1] if i + 1 < len(link.offsets) else total) - off
                   for i, off in enumerate(link.offsets)]
        # the whole object's walk on the link's tile, against its shortest slice
        big = link.dsts[0] if link.kind == "join" else link.srcs[0]
        dims = _handle_dims(big)
        if dims and min(lengths) <= _max_index(dims):
            side, part = ("output", "join input") if link.kind == "join" else ("input", "distribute output")
            raise _bd("aie.objectfifo.link", f"specified {side} stride(s) and size(s) result in out of bounds access "
                                             f"in {part}, for index {_max_index(dims)} in transfer of length "
                                             f"{min(lengths)}.")


# lib/Dialect/AIE/IR/AIEDialect.cpp at 1.4.3 (its gh-pages doxygen render): ObjectFifoPoolOp::verify 646-703; the
# segments: lib/Dialect/AIE/Transforms/AIEObjectFifoSplit.cpp
def _verify_pool(link: _Link) -> None:
    """ObjectFifoPoolOp::verify of a link's pool: its segments tile the object."""
    previous, covered = -1, 0
    for offset, size in link.segments():
        if offset <= previous:
            raise _bd("aie.objectfifo.pool", "segments must be ordered by increasing offset")
        if offset != covered:
            raise _bd("aie.objectfifo.segment", "leaves a gap or overlaps the segment before it; segments must tile "
                                                "the object")
        previous, covered = offset, offset + size
    if covered != _elems(link.owner.obj_type):
        raise _bd("aie.objectfifo.pool", f"segments cover {covered} of {_elems(link.owner.obj_type)} elements")


# lib/Dialect/AIE/IR/AIEDialect.cpp at 1.4.3 (its gh-pages doxygen render): ObjectFifoDmaEndpointOp::verify 899-957
def fifo_bds() -> list[tuple[str, str, Any, int, int, Any]]:
    """Every memtile and core BD aiecc 1.4.3 lowers the fifos to, as (where, tile kind, the buffer's
    type, its elements, the BD's length, dims): a core end moves one object of its fifo; a link's
    end moves each pool segment it selects (a join's or split's big end all of them, a slice its
    own), in the pool's buffer, with its fifo's dims (--aie-objectfifo-split/-lower-dmas)."""
    out = []
    for f in REC.fifos:
        for h in ([f._prod] if f._prod else []) + f._cons:
            where = f"{f.name}.{h.handle_type}"
            if isinstance(h.endpoint, Worker):
                out.append((where, "CoreTile", f.obj_type, _elems(f.obj_type), _elems(f.obj_type), _handle_dims(h)))
            elif isinstance(h.endpoint, _Link):
                link, pool = h.endpoint, h.endpoint.owner.obj_type
                segs = link.segments()
                mine = segs if len(link.srcs if h in link.srcs else link.dsts) == 1 else \
                    [segs[(link.srcs if h in link.srcs else link.dsts).index(h)]]
                for i, (_, size) in enumerate(mine):
                    dims = _handle_dims(h)
                    if dims and _max_index(dims) >= size:  # ObjectFifoDmaEndpointOp::verify
                        name = f"s{segs.index(mine[i])}"  # the segment names of the 1.4.3 lowering doc's examples
                        raise _bd("aie.objectfifo.dma_endpoint", f"dimensions entry {i} exceeds selected segment "
                                                                 f"'{name}' of size {size}")
                    out.append((where, "MemTile", pool, _elems(pool), size, dims))
    return out


def _lower_fifos() -> None:
    """What aiecc's objectfifo passes refuse: pools that do not tile their object, then BDs."""
    for lk in REC.links:
        _verify_pool(lk["op"])
    for _where, kind, ty, n, length, dims in fifo_bds():
        verify_bd(kind, ty, length, dims, n)


# ---- what 1.4.3 verifies of the placed ops: who may use a buffer or a lock, lock ids and counts, the BDs -------
# Sources at 1.4.3 (gh-pages doxygen render @7fdaee03 of lib/Dialect/AIE/IR/AIEDialect.cpp, AIETargetModel.cpp/.h):
# UsesAreAccessible 287-334 (aie.buffer / aie.lock used from a tile whose memory affinity does not reach them),
# AIE2TargetModel::isLegalMemAffinity AIETargetModel.cpp 810-824 (its isMemEast is isInternal, 795-798), HasValidBDs
# 361-423, DMABDOp::verify 3226-3229 (a core tile's DMA touches only its own buffers), LockOp::verify 3938-3954,
# UseLockOp::verify 4018-4077 (a core tile's DMA touches only its own locks: 4053-4055), getNumLocks
# AIETargetModel.h 760-762, getMaxLockValue 764, getNumBDs 769-771. npu2 is an AIE2 target model too.
ROW_KINDS = {0: "ShimNOCTile", 1: "MemTile"}  # npu1 and npu2: shim row 0, memtile row 1, cores above
NUM_LOCKS = {"MemTile": 64, "CoreTile": 16, "ShimNOCTile": 16}
NUM_BDS = {"MemTile": MEM_DMA.bds, "CoreTile": CORE_DMA.bds, "ShimNOCTile": SHIM_DMA.bds}  # 48, 16, 16
DMA_CHANNELS = {"MemTile": MEM_DMA.s2mm_channels, "CoreTile": CORE_DMA.s2mm_channels,  # 6, 2, 2 per direction:
                "ShimNOCTile": SHIM_DMA.s2mm_channels}  # AM020 "AIE-ML Memory Module", "Tile" (facts/devices.py)
DMA_OP = {"MemTile": "aie.memtile_dma", "CoreTile": "aie.mem", "ShimNOCTile": "aie.shim_dma"}


def tile_kind(t: Tile) -> str:
    return ROW_KINDS.get(t.row, "CoreTile")


def mem_affinity(user: tuple[int, int], mem: tuple[int, int]) -> bool:
    """AIE2TargetModel::isLegalMemAffinity (AIETargetModel.cpp 810-824 at 1.4.3): a core reaches its own memory
    (isMemEast is isInternal) and its west, north and south neighbours', south only when that is not a memtile; a
    memtile (a DMA user) reaches its own memory and its east and west memtiles'."""
    (uc, ur), (mc, mr) = user, mem
    internal = (uc, ur) == (mc, mr)
    west, east = uc == mc + 1 and ur == mr, uc + 1 == mc and ur == mr
    north, south = uc == mc and ur + 1 == mr, uc == mc and ur == mr + 1
    if ROW_KINDS.get(ur) == "MemTile":
        return east or internal or west
    return (south and ROW_KINDS.get(mr) != "MemTile") or north or west or internal


def _placed_uses(program: Program) -> list[tuple[Any, Tile, str]]:
    """(buffer or lock, the tile that uses it, "core" or "dma"): each Worker's kernel operands, loads and lock
    ops, and each TileDma BD's buffer and locks."""
    by_name = {b.name: b for b in REC.buffers}
    uses: list[tuple[Any, Tile, str]] = []
    for w in program.workers:
        for op in w.trace:
            if op[0] == "call":
                uses += [(a, w.tile, "core") for a in _flatten(op[2]) if isinstance(a, Buffer)]
            elif op[0] == "load":
                uses.append((by_name[op[1]], w.tile, "core"))
    uses += [(lock, w.tile, "core") for lock, w in REC.lock_uses]
    for td in program.rt.tile_dmas:
        for ch in td.channels:
            for bd in ch.bds:
                uses.append((bd.buffer, td.tile, "dma"))
                uses += [(use.lock, td.tile, "dma") for use in (*bd.acquires, *bd.releases)]
    return uses


def _fifo_dma_ends() -> list[tuple[tuple[int, int], str, int]]:
    """(tile, direction, BDs) of every DMA end aiecc 1.4.3 lowers the fifos to on a core or memtile (AIEObjectFifoSplit
    / AIEObjectFifoLowerDMAs): a Worker's end moves its pool's objects (its depth), a link's end its selected
    segments of each pool object."""
    out = []
    for f in REC.fifos:
        for h in ([f._prod] if f._prod else []) + f._cons:
            direction = DMAChannelDir.MM2S if h.is_prod else DMAChannelDir.S2MM
            if isinstance(h.endpoint, Worker) and h.endpoint.tile.placed:
                out.append((h.endpoint.tile.at(), direction, h.depth))
            elif isinstance(h.endpoint, _Link) and h.endpoint.tile.placed:
                link = h.endpoint
                side = link.srcs if h in link.srcs else link.dsts
                direction = DMAChannelDir.S2MM if h in link.srcs else DMAChannelDir.MM2S
                segments = len(link.segments()) if len(side) == 1 else 1
                out.append((link.tile.at(), direction, link.owner.depth * segments))
    return out


def _fifo_locks_per_tile() -> dict[tuple[int, int], int]:
    """The locks aiecc 1.4.3 gives the fifos' pools, by tile (AIEObjectFifoAllocate allocateLocks: a produce and a
    consume lock per pool segment on AIE2): one pool per Worker end, one per link on its memtile."""
    count: dict[tuple[int, int], int] = {}
    for f in REC.fifos:
        for h in ([f._prod] if f._prod else []) + f._cons:
            if isinstance(h.endpoint, Worker) and h.endpoint.tile.placed:
                at = h.endpoint.tile.at()
                count[at] = count.get(at, 0) + 2
    for lk in REC.links:
        link = lk["op"]
        if link.tile.placed:
            count[link.tile.at()] = count.get(link.tile.at(), 0) + 2 * len(link.segments())
    return count


def _verify_locks(program: Program) -> None:
    """LockOp::verify (an explicit id below getNumLocks), then aie-assign-lock-ids (lib/Dialect/AIE/Transforms/
    AIEAssignLockIDs.cpp, stored version @124e1c5e; its 1.4.3 render not read): one id per lock, every lock of a
    tile, the fifos' and the barriers' included, within getNumLocks. The lock state is 6 bits (AM020 "AIE-ML Tile
    Architecture"; getMaxLockValue 0x3F): an initial value outside [0, 63] is the stand-in's own refusal (the
    1.4.3 verifiers read here do not bound aie.lock's init; aie-rt would, when the value is written)."""
    per_tile: dict[tuple[int, int], list[Lock]] = {}
    for lk in program.rt.locks:
        n = NUM_LOCKS[tile_kind(lk.tile)]
        if lk.lock_id is not None and not 0 <= lk.lock_id < n:
            raise ValueError(f"'aie.lock' op lock assigned invalid id (maximum is {n - 1})")
        if not isinstance(lk.init, int) or not 0 <= lk.init <= LOCK_VALUE_MAX:
            raise ValueError(f"{lk.name}: init {lk.init} is outside the 6-bit lock state [0, {LOCK_VALUE_MAX}]")
        per_tile.setdefault(lk.tile.at(), []).append(lk)
    implicit = _fifo_locks_per_tile()
    for t, _ in REC.locks:  # the WorkerRuntimeBarrier locks
        implicit[t.at()] = implicit.get(t.at(), 0) + 1
    for at in sorted(set(per_tile) | set(implicit)):
        explicit = per_tile.get(at, [])
        ids = [lk.lock_id for lk in explicit if lk.lock_id is not None]
        for i, lock_id in enumerate(ids):
            if lock_id in ids[:i]:
                raise ValueError(f"'aie.lock' op is assigned to the same lock ({lock_id}) as another op.")
        if len(explicit) + implicit.get(at, 0) > NUM_LOCKS[ROW_KINDS.get(at[1], "CoreTile")]:
            raise ValueError(f"'aie.lock' op not allocated a lock. (tile {at}: {len(explicit)} explicit locks and "
                             f"{implicit.get(at, 0)} for its fifos and barriers; only "
                             f"{NUM_LOCKS[ROW_KINDS.get(at[1], 'CoreTile')]} locks available in this tile)")


def _verify_accessible(program: Program) -> None:
    """UsesAreAccessible on aie.buffer and aie.lock; then a core tile's DMA on its own tile only (DMABDOp::verify,
    UseLockOp::verify's AccessesLocalLocks)."""
    uses = _placed_uses(program)
    for thing, user, _by in uses:
        if not mem_affinity(user.at(), thing.tile.at()):
            op = "aie.buffer" if isinstance(thing, Buffer) else "aie.lock"
            raise ValueError(f"'{op}' op in Column {thing.tile.col} and Row {thing.tile.row} is accessed from an "
                             f"unreachable tile in Column {user.col} and Row {user.row}")
    for thing, user, by in uses:  # AIEDialect.cpp at 1.4.3: DMABDOp::verify 3226-3229, UseLockOp::verify 4053-4055
        if by == "dma" and tile_kind(user) == "CoreTile" and thing.tile.at() != user.at():
            if isinstance(thing, Buffer):
                raise ValueError("'aie.dma_bd' op Core tile DMAs can only access a buffer in the same tile.")
            raise ValueError("'aie.use_lock' op can only access a lock in the same tile")


def _verify_tile_dmas(program: Program) -> None:
    """HasValidBDs (at most one acquire and one release per BD block; getNumBDs blocks per tile, the fifos' BDs on the
    tile counted too), aiecc's BD lock rule (a BD with a lock acquires and releases: AIERT.cpp) and the DMA channels
    a tile has (HasValidDMAChannels; AIEObjectFifoAllocate's "number of input DMA channel exceeded!", stored version
    @02aeab00), on each tile that has an explicit TileDma. Two TileDma programs for one tile and a DMA channel no Flow
    reaches are the stand-in's own refusals (1.4.3's Runtime.add_tile_dma, runtime.py L269-271, only appends; a
    channel without a stream waits forever)."""
    seen: set[tuple[int, int]] = set()
    flows = [f.ends() for f in program.rt.flows]
    fifo_ends = _fifo_dma_ends()
    for td in program.rt.tile_dmas:
        at, kind = td.tile.at(), tile_kind(td.tile)
        if at in seen:
            raise ValueError(f"two TileDma programs for {td.tile}: the stand-in's own refusal (1.4.3 emits one DMA "
                             f"region per TileDma)")
        seen.add(at)
        blocks = sum(b for t, _d, b in fifo_ends if t == at)
        for ch in td.channels:
            for bd in ch.bds:
                if len(bd.acquires) > 1:
                    raise ValueError(f"'{DMA_OP[kind]}' op BD block must have at most one acquire UseLockOp, found "
                                     f"{len(bd.acquires)}")
                if len(bd.releases) > 1:
                    raise ValueError(f"'{DMA_OP[kind]}' op BD block must have at most one release UseLockOp, found "
                                     f"{len(bd.releases)}")
                if bool(bd.acquires) != bool(bd.releases) and not ch.out_of_order:
                    # aiecc's configureLocksInBdBlock (lib/Targets/AIERT.cpp 371-374 at 1.4.3, doxygen render
                    # @7fdaee03): a BD with a lock needs an acquire and a release (out-of-order ones may only release);
                    # a BD with no lock at all skips it (L666) and is legal
                    raise ValueError("'aie.use_lock' op buffer descriptor with a lock must have both use_lock(acquire) "
                                     "and use_lock(release)")
                for use in (*bd.acquires, *bd.releases):
                    _bd_lock_value(use.value)
                blocks += 1
        if blocks > NUM_BDS[kind]:
            raise ValueError(f"'{DMA_OP[kind]}' op has more than {NUM_BDS[kind]} blocks")
        for direction in (DMAChannelDir.S2MM, DMAChannelDir.MM2S):
            mine = {ch.channel for ch in td.channels if ch.direction == direction}
            if len(mine) > DMA_CHANNELS[kind] or any(not 0 <= c < DMA_CHANNELS[kind] for c in mine):
                side = "input" if direction == DMAChannelDir.S2MM else "output"
                raise ValueError(f"'{DMA_OP[kind]}' op uses more {side} channels than available on this tile")
            if len(mine) + sum(1 for t, d, _b in fifo_ends if t == at and d == direction) > DMA_CHANNELS[kind]:
                side = "input" if direction == DMAChannelDir.S2MM else "output"
                raise ValueError(f"'aie.tile' op number of {side} DMA channel exceeded!")
            for c in sorted(mine):
                end = 1 if direction == DMAChannelDir.S2MM else 0
                if not any(f[end][0].at() == at and f[end][1] == WireBundle.DMA and f[end][2] == c for f in flows):
                    raise ValueError(f"{td.tile} DMA {direction} channel {c} has no Flow: the stand-in's own refusal "
                                     f"(its BDs would wait for a stream that never comes)")


def _bd_lock_value(value: Any) -> None:
    """A BD's lock value is a 7-bit signed field (acquire-greater-equal of v is written as -v): aie-rt's
    LockValUpperBound 63 / LowerBound -64 as /work/shared/reference/npu_hardware_numerics.md reads them; a value the
    lock state (6 bits, AM020) cannot hold is refused here, the stand-in's own placement of that bound."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"a BD's lock value is an int, got {type(value).__name__}")
    if not 0 <= value <= LOCK_VALUE_MAX:
        raise ValueError(f"a BD's lock value {value} is outside [0, {LOCK_VALUE_MAX}]")


def _verify_fifo_channels() -> None:
    """Every fifo end on a tile's DMA takes one channel of its direction, and a tile has DMA_CHANNELS of each
    (AM020: 6 each way on a memtile, 2 on a core or shim tile): AIEObjectFifoAllocate's channel analysis, "number of
    input/output DMA channel exceeded!" (read in the stored version @02aeab00, not at the tag), whether or not the
    tile also has an explicit TileDma (_verify_tile_dmas counts those channels with the fifos')."""
    count: dict[tuple[tuple[int, int], str], int] = {}
    for at, direction, _bds in _fifo_dma_ends():
        count[(at, direction)] = count.get((at, direction), 0) + 1
    for f in REC.fifos:  # the runtime's shim ends: a fill is an MM2S channel of its shim, a drain an S2MM one
        for h in ([f._prod] if f._prod else []) + f._cons:
            if isinstance(h.endpoint, RuntimeEndpoint) and h.endpoint.tile is not None and h.endpoint.tile.placed:
                key = (h.endpoint.tile.at(), DMAChannelDir.MM2S if h.is_prod else DMAChannelDir.S2MM)
                count[key] = count.get(key, 0) + 1
    for (at, direction), used in sorted(count.items()):
        kind = ROW_KINDS.get(at[1], "CoreTile")
        if used > DMA_CHANNELS[kind]:
            side = "input" if direction == DMAChannelDir.S2MM else "output"
            raise ValueError(f"'aie.tile' op number of {side} DMA channel exceeded! ({used} fifo ends on tile {at}, "
                             f"{DMA_CHANNELS[kind]} channels)")


def _verify_placed(program: Program) -> None:
    """What 1.4.3 verifies of explicitly placed Buffers, Locks and TileDmas (Flows are routed by aiecc), and the
    DMA channels the fifos take."""
    _verify_locks(program)
    _verify_accessible(program)
    _verify_tile_dmas(program)
    _verify_fifo_channels()


class Program:
    def __init__(self, device, rt, workers=None):
        if device is None:
            raise ValueError("Program requires a device, but none was selected. Pass an explicit Device, or ensure "
                             "an NPU runtime is available for iron.get_current_device().")
        self.device, self.rt, self.workers = device, rt, list(workers or [])

    def resolve_program(self, device_name="main"):
        """What the stand-in can check of IRON's resolution and of the verifier that follows it, in
        IRON's order: tiles, fifos, then each worker's kernels, buffers and body, the runtime last."""
        self._resolve_tiles()
        for f in REC.fifos:  # ObjectFifo.tiles() while IRON resolves the fifos
            if f._prod is None:
                raise ValueError("Cannot return prod.tile.op because prod was not created.")
            if f._prod.endpoint is None:
                raise ValueError(f"Prod endpoint not set for {f.name}")
            if not f._cons:
                raise ValueError("Cannot return cons tiles because cons were not created.")
            if any(h.endpoint is None for h in f._cons):
                raise ValueError(f"Cons endpoint not set for {f.name}")
        for lk in self.rt.locks:  # program.py L206-207: the runtime's Locks, before any body uses them
            lk.resolve()
        for td in self.rt.tile_dmas:  # L211-216: a TileDma's Buffers, placed on its tile when unplaced
            for b in td.all_buffers_and_locks()[0]:
                if b.tile is None:
                    b._tile = td.tile
                b.resolve()
        for w in self.workers:  # IRON emits the kernels and resolves the Buffers a worker was given
            for arg in _flatten(w.fn_args):
                if isinstance(arg, (Buffer, Kernel)):
                    arg.resolve()
            for barrier in w._barriers:  # Worker.resolve: a lock on the worker's tile per barrier, registered
                lock = (w.tile, barrier.name)
                REC.locks.append(lock)
                barrier.worker_locks.append(lock)
            REC.tracing, mark = w, len(REC.ops)
            try:
                w.core_fn(*w.fn_args)
            finally:
                REC.tracing = None
            w.trace = REC.ops[mark:]
            del REC.ops[mark:]
        for td in self.rt.tile_dmas:  # L238-239: the TileDma programs after the Workers
            td.resolve()
        for b in REC.buffers:  # a Buffer no worker holds is never placed
            b.resolve()
        self.rt.resolve()
        for t in REC.transfers:  # DMABDOp::verify of each shim transfer
            if t["tap"] is not None and t["tap"].max_index() >= t["buffer"].numel:
                raise ValueError(f"'aie.dma_bd' op Specified stride(s) and size(s) result in out of bounds access in "
                                 f"buffer, for index {t['tap'].max_index()} in memref of length {t['buffer'].numel}.")
            if t["tap"] is not None:
                verify_shim_bd(t["tap"], _buffer_elem_bits(t["buffer"].type))
        _verify_fifo_ops()
        _verify_placed(self)
        _lower_fifos()  # aiecc's part: refused there, checked here so every lowered program meets it
        return Dump(self)

    # python/iron/device/device.py and tile.py (1.4.3's gh-pages render @5100e2d6): tiles inside the device and of
    # their row's type; two
    # Workers on one core: the stand-in's own wording of aie.core's one-per-tile rule (AIEDialect.cpp CoreOp)
    def _resolve_tiles(self) -> None:
        """Device.resolve_tile: placed tiles inside the device, of the kind their row is; one core each."""
        kinds = ROW_KINDS
        placed = [w.tile for w in self.workers] + [b.tile for b in REC.buffers if b.tile is not None]
        placed += [t for f in self.rt.flows for t in f.all_tiles()] + [td.tile for td in self.rt.tile_dmas]
        placed += [lk.tile for lk in self.rt.locks if lk.tile is not None]
        placed += [lk["tile"] for lk in REC.links] + [h.endpoint.tile for f in REC.fifos
                                                      for h in ([f._prod] if f._prod else []) + f._cons
                                                      if isinstance(h.endpoint, RuntimeEndpoint) and h.endpoint.tile]
        for t in placed:
            if not t.placed:
                continue
            if not (0 <= t.col < self.device.cols and 0 <= t.row < self.device.rows):
                raise ValueError(f"Tile {t} is outside {self.device.name} ({self.device.cols} x {self.device.rows})")
            kind = kinds.get(t.row, "CoreTile")
            if t.tile_type is not None and t.tile_type != kind:
                raise ValueError(f"Expected a {t.tile_type} tile, but got tile_type={kind} at {t}")
        cores = [w.tile.at() for w in self.workers if w.tile.placed]
        if len(set(cores)) != len(cores):
            raise ValueError(f"two Workers on one core tile: {sorted(c for c in cores if cores.count(c) > 1)}")


class Dump:
    def __init__(self, program: Program) -> None:
        self.program = program

    def __str__(self) -> str:
        lines = [f"device {self.program.device.name}"]
        for f in sorted(REC.fifos, key=lambda f: f.name):
            lines.append(f"fifo {f.name} {shape_dtype(f.obj_type)} depth={f.depth} to={f.dims_to_stream} "
                         f"from={f.dims_from_stream_per_cons}")
        lines += [f"link {lk['kind']} {lk['tile']} {lk['srcs']} -> {lk['dsts']} {lk['offsets']}" for lk in REC.links]
        lines += [f"kernel {k.name} {k.object_file_name} {[shape_dtype(t) for t in k.arg_types]}" for k in REC.kernels]
        lines += [f"buffer {b.name} {shape_dtype(b.type)} at {b.tile}"
                  + ("" if b.mem_bank is None else f" bank={b.mem_bank}")
                  + ("" if b.initial_value is None else f" initial={np.asarray(b.initial_value).size}")
                  for b in REC.buffers]
        for w in self.program.workers:
            lines.append(f"worker {w.tile} stack={w.stack_size} trace={w.trace}")
        for t in REC.transfers:
            tap = t["tap"]
            lines.append(f"rt {t['kind']} {t['fifo']} {t['buffer']} {tap.offset} {tap.sizes} {tap.strides} "
                         f"group={t['group']} wait={t['wait']} shim={t['shim']}")
        lines += [f"rt task {t.alloc.symbol} {t.mem!r} {t.tap.offset} {t.tap.sizes} {t.tap.strides} "
                  f"token={t.issue_token}" for t in REC.dma_tasks]
        rt = self.program.rt  # the lower-level primitives, when a program has any
        lines += [f"lock {lk.name} at {lk.tile} id={lk.lock_id} init={lk.init}" for lk in rt.locks]
        for f in rt.flows:
            (s, sp, sc), (d, dp, dc) = f.ends()
            lines.append(f"flow {s} {sp}{sc} -> {d} {dp}{dc}" + (f" shim={f._shim_symbol}" if f._shim_symbol else ""))
        for td in rt.tile_dmas:
            for ch in td.channels:
                chain = [(bd.buffer.name, [(a.lock.name, a.value, a.greater_equal) for a in bd.acquires],
                          [(r.lock.name, r.value) for r in bd.releases], bd.next) for bd in ch.bds]
                lines.append(f"dma {td.tile} {ch.direction}{ch.channel} {chain}")
        return "\n".join(lines) + "\n"


def api():
    """A fresh recorder with the IronApi the lowering takes."""
    from gemm_gen.backends.iron import IronApi

    global REC
    REC = Recorder()
    return IronApi(ObjectFifo, ObjectFifoHandle, Worker, Kernel, Buffer, Runtime, TaskGroup, Program, Tile,
                   {name: DEVICE_CLASSES[device_class(name)] for name in device_names()}, range_,
                   TensorAccessPattern, str_to_dtype, {"bfp16": v8bfp16ebs8}, WorkerRuntimeBarrier), REC
