"""The Design: plain data describing one GEMM program for the array.

It speaks IRON's vocabulary (ObjectFifo, link forward/split/join, Worker, Runtime fill/drain in
task groups) so that the IRON lowering is a direct translation, and the functional simulator and
the performance model read the very same objects.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ..facts.devices import TileKind
from ..facts.epilogue import Epilogue
from ..spec.call import CallPlan
from ..spec.config import GemmConfig
from ..spec.request import Types
from ..spec.rules import kernel_variant as kv
from ..spec.rules import l1, peano
from ..spec.rules.memtile import MemtileBuffer
from .grid import OPERANDS, Grid
from .l1_banks import L1Plan
from .tap import Tap


@dataclass(frozen=True, order=True)
class TileRef:
    col: int
    row: int

    @property
    def kind(self) -> TileKind:
        return TileKind.SHIM if self.row == 0 else TileKind.MEM if self.row == 1 else TileKind.CORE

    def __str__(self) -> str:
        return f"{self.kind.value}({self.col},{self.row})"


@dataclass(frozen=True)
class ObjectFifo:
    """One ObjectFifo: a producer, one or more consumers (a broadcast when several), `depth` objects.

    dims_to_stream is the producer MM2S pattern over one object; dims_from_stream the consumers'
    S2MM pattern (the same for every consumer). None means a linear transfer.
    """

    name: str
    dtype: str
    obj_shape: tuple[int, ...]
    depth: int
    producer: TileRef
    consumers: tuple[TileRef, ...]
    dims_to_stream: Tap | None = None
    dims_from_stream: Tap | None = None

    @property
    def obj_elems(self) -> int:
        n = 1
        for d in self.obj_shape:
            n *= d
        return n


@dataclass(frozen=True)
class Link:
    """A memtile link: forward (1 -> 1), split (1 -> n, per-output offsets), join (n -> 1).

    offsets are element offsets of each slice in the memtile object: per source for a join,
    per destination for a split, (0,) for a forward.
    """

    kind: str
    tile: TileRef
    srcs: tuple[str, ...]
    dsts: tuple[str, ...]
    offsets: tuple[int, ...]


# ---- the worker program: a tiny loop IR the simulator interprets and IRON lowers -----------
@dataclass(frozen=True)
class Acquire:
    fifo: str
    count: int = 1


@dataclass(frozen=True)
class Release:
    fifo: str
    count: int = 1


@dataclass(frozen=True)
class Call:
    kernel: str
    args: tuple[str, ...]  # fifos (their currently acquired object) or local buffers, in order
    # int32 scalars after the buffers: constants (e.g. the ATB C slice), or a word of the core's
    # runtime-parameter buffer read as the call starts (a runtime activation's mode)
    scalars: tuple[int | RuntimeCount, ...] = ()


@dataclass(frozen=True)
class RuntimeCount:
    """A word the core reads from its runtime-parameter buffer (word `index`): a loop count as the loop
    starts (IRON bounds range_ by the loaded value), or a kernel's scalar argument as the call starts."""

    buffer: str
    index: int = 0


@dataclass(frozen=True)
class Loop:
    count: int | RuntimeCount
    body: tuple[Op, ...]


@dataclass(frozen=True)
class BarrierWait:
    """The core blocks until its runtime barrier holds `value` (IRON WorkerRuntimeBarrier.wait_for_value:
    an acquire-equal of the barrier's lock, which leaves the value as it is). What orders the runtime
    sequence's parameter writes before the core's reads: the sequence sets the barrier after its writes."""

    value: int = 1


@dataclass(frozen=True)
class BarrierRelease:
    """The core adds `value` to its runtime barrier's lock (IRON release_with_value), closing the barrier
    until the next call's sequence sets it again."""

    value: int = 1


Op = Acquire | Release | Call | Loop | BarrierWait | BarrierRelease


def _named_default(default: Any, tag: Callable[[Any, KernelBuild], str | None], rank: int) -> Any:
    """A KernelBuild field with its default and its part of the object file's name (rank: its place there)."""
    return field(default=default, metadata={"name": (rank, tag)})


@dataclass(frozen=True)
class KernelBuild:
    """What one kernel object file is rendered and compiled for: every field changes its code, and names it
    in `object_file` (its metadata "name": a rank and the text it adds; a field without one joins a digest)."""

    aie_target: str = field(metadata={"name": (1, lambda value, build: value)})
    types: Types = field(metadata={"name": (2, lambda value, build: build.type_names)})  # A, B, C and C in L1
    m: int = field(metadata={"name": (0, lambda value, build: f"mm_{build.m}x{build.k}x{build.n}")})
    k: int = field(metadata={"name": (0, lambda value, build: None)})  # in m's part
    n: int = field(metadata={"name": (0, lambda value, build: None)})  # in m's part
    mmul: tuple[int, int, int] = field(metadata={"name": (4, lambda value, build: "x".join(map(str, value)))})
    b_col_maj: bool = field(metadata={"name": (3, lambda value, build: "bcol" if value else "brow")})
    emulate_bf16_with_bfp16: bool = field(metadata={"name": (5, lambda value, build: "bfp16emu" if value else None)})
    rounding: str = field(metadata={"name": (7, lambda value, build: value if value != "conv_even" else None)})
    saturation: str = field(metadata={"name": (8, lambda value, build: f"sat_{value}" if value != "saturate"
                                                else None)})
    shift: int = field(metadata={"name": (9, lambda value, build: f"shift{value}" if value else None)})
    compiler: str = _named_default("peano", lambda value, build: value if value != "peano" else None, 6)
    # matmul computes (m / rho) rows into C slice `slice` (an int32 argument when rho > 1)
    rho: int = _named_default(1, lambda value, build: f"rho{value}" if value > 1 else None, 10)
    # er x et accumulators per cluster (gemm_gen/spec/rules/kernel_variant.py)
    expansion: tuple[int, int] = _named_default((2, 2), lambda value, build: "e" + "x".join(map(str, value))
                                                if tuple(value) != (2, 2) else None, 11)
    # which loop of the nest is software-pipelined
    loops: str = _named_default("k-pipelined", lambda value, build: value.replace("-", "")
                                if value != "k-pipelined" else None, 12)
    # bf16 converted to bfp16 once per call (A) / k-step (B), then bfp16 macs
    convert_once: bool = _named_default(False, lambda value, build: "cvtonce" if value else None, 13)
    a_col_maj: bool = _named_default(False, lambda value, build: "acol" if value else None, 14)  # A^T's blocks
    # C's r x t blocks are kept transposed in L1 (column-major C below 32 bits)
    c_col_maj: bool = _named_default(False, lambda value, build: "ccol" if value else None, 15)
    # applied once per C tile after its last k-step (gemm_gen/facts/epilogue.py)
    epilogue: Epilogue = _named_default(Epilogue(), lambda value, build: None if value.is_identity else value.tag,
                                        16)
    # W4A16: rows of K per int4 scale (gemm_gen/facts/groupquant.py); 0: none; with a zero point per scale
    group_size: int = _named_default(0, lambda value, build: f"g{value}" + ("zp" if build.zero_points else "")
                                     if value else None, 17)
    zero_points: bool = _named_default(False, lambda value, build: None, 17)  # in group_size's part
    # the compile's -O (Peano; spec/rules/peano.py)
    opt_level: int = _named_default(peano.DEFAULT_OPT_LEVEL, lambda value, build: f"O{value}"
                                    if value != peano.DEFAULT_OPT_LEVEL else None, 18)

    def with_(self, **changes: Any) -> KernelBuild:
        """This build with fields changed by name (dataclasses.replace); dtype_in, dtype_out, dtype_b and acc change
        its types as Types.of reads them (B's None: A's type; acc None or "out": C's own)."""
        names = ("dtype_in", "dtype_out", "dtype_b", "acc")
        if any(name in changes for name in names):
            t = self.types
            given = {"dtype_in": t.dtype_in, "dtype_out": t.dtype_out,
                     "dtype_b": None if t.dtype_b == t.dtype_in else t.dtype_b,
                     "acc": None if t.acc == t.dtype_out else t.acc}
            given.update({name: changes.pop(name) for name in names if name in changes})
            changes["types"] = Types.of(str(given["dtype_in"]), str(given["dtype_out"]), given["dtype_b"],
                                        given["acc"])
        return replace(self, **changes)

    @property
    def t_ma(self) -> int:
        return self.m // self.rho

    @property
    def variant(self) -> kv.KernelVariant:
        """The kernel variant built: er x et accumulators per cluster and the pipelined loop."""
        return kv.KernelVariant(*self.expansion, self.loops)

    @property
    def block_kernel(self) -> bool:
        """Rendered from the bfp16 template: a bfp16 precision, or bf16 converted once."""
        return kv.block_kernel(self.types.precision, self.convert_once)

    @property
    def acc_block(self) -> tuple[int, int]:
        """The in-place accumulator split's unit: (values per accumulator block, blocks per unit)."""
        return l1.acc_block(self.types.precision, self.convert_once, self.mmul)

    @property
    def c_split_elems(self) -> int:
        """Accumulator values kept in the C object, its first blocks (the rest in the worker's C acc buffer)."""
        return l1.c_split_blocks(self.types.precision, self.m, self.n, self.acc_block) * self.acc_block[0]

    @property
    def type_names(self) -> str:
        """in[_b]_out[_acc<acc>]: the operand types, B and acc named only when they differ."""
        p = self.types.precision
        return "_".join([p.a] + ([p.b] if p.b != p.a else []) + [p.out] + ([f"acc{p.acc}"] if p.converts_c else []))

    @property
    def symbols(self) -> dict[str, str]:
        """The extern "C" names of the kernels a worker calls, by role (one place for them)."""
        p = self.types.precision
        names = {"zero": f"zero_{p.acc}" if not p.converts_c else f"zero_{p.acc}_{p.out}",
                 "matmul": "_".join(["matmul", p.a] + ([p.b] if p.b != p.a else []) + [p.acc])}
        if p.converts_c:
            names["convert"] = f"convert_{p.acc}_{p.out}"
        return names

    @property
    def object_file(self) -> str:
        """mlir-aie's mm_<m>x<k>x<n>.o, extended so that different builds never share a name: each field's
        part, in its rank's order (fields(KernelBuild) metadata), and a digest of any field that has none."""
        named = sorted(((f.metadata["name"][0], f.name, f.metadata["name"][1]) for f in fields(self)
                        if "name" in f.metadata), key=lambda t: t[0])
        parts = [text for _, name, tag in named if (text := tag(getattr(self, name), self)) is not None]
        rest = {f.name: getattr(self, f.name) for f in fields(self)
                if "name" not in f.metadata and getattr(self, f.name) != f.default}
        if rest:
            parts.append(hashlib.sha1(repr(sorted(rest.items())).encode()).hexdigest()[:8])
        return "_".join(parts) + ".o"


@dataclass(frozen=True)
class KernelSpec:
    """An external kernel function a worker calls, and the object file it links with."""

    name: str
    role: str  # "zero", "matmul" or "convert" (C's final conversion, when acc != dtype_out)
    build: KernelBuild
    arg_shapes: tuple[tuple[int, ...], ...]
    arg_dtypes: tuple[str, ...]
    scalar_args: tuple[str, ...] = ()  # int32 arguments after the buffers

    @property
    def object_file(self) -> str:
        return self.build.object_file


RESERVE_PREFIX = "l1_reserve"


@dataclass(frozen=True)
class LocalBuffer:
    """A worker's own L1 buffer (IRON Buffer), passed to kernels by name like a fifo object."""

    name: str
    shape: tuple[int, ...]  # in DMA units of dtype, like fifo objects
    dtype: str
    address: int | None = None  # pinned L1 address (the allocator's reservations)
    mem_bank: int | None = None  # pinned L1 bank
    rtp: bool = False  # runtime parameters (IRON Buffer use_write_rtp): i32 words each call writes
    # what the buffer holds from configuration on (IRON Buffer initial_value: aie.buffer's initial_value, which
    # aiecc writes into the tile's memory when it configures the array), in dtype's values; the kernel only reads it
    initial_value: tuple[float, ...] | None = None

    @property
    def reservation(self) -> bool:
        """An unused buffer that only holds L1 bytes so that the allocator places the rest as
        planned (gemm_gen/design/l1_banks.py)."""
        return self.name.startswith(RESERVE_PREFIX)


@dataclass(frozen=True)
class Worker:
    tile: TileRef
    program: tuple[Op, ...]  # the body of core_fn; the core repeats it forever (while_true)
    kernels: tuple[str, ...]
    stack_bytes: int
    buffers: tuple[LocalBuffer, ...] = ()
    allocation_scheme: str | None = None  # mlir-aie's L1 allocator for this core (IRON Worker allocation_scheme)
    barrier: str | None = None  # its runtime barrier (IRON WorkerRuntimeBarrier, one lock on the core's tile)


# ---- the runtime sequence (command processor program) ----------------------------------------
@dataclass(frozen=True)
class HostTensor:
    """A runtime-sequence argument: a flat DRAM buffer holding a 2-D row-major array."""

    name: str
    shape: tuple[int, int]  # storage shape (B column-major is stored N x K)
    dtype: str
    slack: int = 0  # units past the matrix that the call's transfers reach (zeros the host adds)

    @property
    def units(self) -> int:
        """The buffer's size in DMA units: the matrix and its slack."""
        return self.shape[0] * self.shape[1] + self.slack


@dataclass(frozen=True)
class ShimTask:
    """One shim BD task: `fill` pushes host data into a fifo, `drain` writes a fifo to the host."""

    name: str
    direction: str  # "fill" or "drain"
    fifo: str
    tensor: str
    shim: TileRef
    tap: Tap  # over the host tensor, in elements
    wait: bool  # issue a completion token that finish_task_group awaits
    group: int


@dataclass(frozen=True)
class RtpWrite:
    """The runtime sequence writes `value` into word `index` of a worker's runtime-parameter
    buffer (a plain write32: the core reads it only after the barrier the sequence sets next)."""

    tile: TileRef
    buffer: str
    index: int
    value: int


@dataclass(frozen=True)
class BarrierSet:
    """The runtime sequence sets a worker's runtime barrier to `value` (IRON WorkerRuntimeBarrier.set:
    aiex.set_lock, a write32 of the lock's value register), after the call's parameter writes."""

    tile: TileRef
    barrier: str
    value: int = 1


@dataclass(frozen=True)
class RuntimeOp:
    """`task` configures and pushes one ShimTask; `finish` is IRON's finish_task_group: await
    the group's wait tasks, then free all its BDs; `rtp` writes one runtime parameter; `barrier`
    sets a worker's runtime barrier."""

    op: str  # "task" | "finish" | "rtp" | "barrier"
    group: int
    task: ShimTask | None = None
    rtp: RtpWrite | None = None
    barrier: BarrierSet | None = None


@dataclass(frozen=True)
class TensorCount:
    """One host tensor's shim traffic in a call's runtime sequence."""

    tensor: str
    bytes: float  # bytes moved over the shims
    runs: float  # contiguous DRAM runs of each task (each costs a fixed overhead)
    # the runs when the tasks of one group that walk side by side (same pattern, each starting where the previous
    # one's run ends, e.g. the B row-major and C strips of all columns) are counted as one longer run: they run in
    # lockstep, so their requests reach the same DRAM pages
    merged_runs: float


@dataclass(frozen=True)
class SharedLock:
    """One relay lock of a shared buffer, on its holder's tile (docs/shared_l1.md 3.2)."""

    name: str
    tile: TileRef
    init: int


@dataclass(frozen=True)
class SharedBuffer:
    """One neighbour-shared L1 buffer (spec/rules/shared_l1.py): object n of its operand lies in the buffer of slot
    n % 2; its holder's DMA fills it, and its readers (the leader first) read it in place. Its locks are empty,
    full and relay, in that order, all on the holder."""

    name: str
    operand: str  # "A" or "B"
    slot: int  # 0 ping, 1 pong
    holder: TileRef
    readers: tuple[TileRef, ...]
    locks: tuple[SharedLock, ...]
    source: TileRef  # the memtile whose MM2S stream brings its objects (one stream per (memtile, operand, slot))
    fifo: str  # the operand's memtile-to-core ObjectFifo whose objects it holds (A_L2L1_row, B_L2L1_col)


@dataclass(frozen=True)
class CoreL1:
    """The L1 plan of the cores of one role (design/l1_banks.CoreRole) and which cores those are."""

    role: str
    tiles: tuple[TileRef, ...]
    plan: L1Plan | None


@dataclass(frozen=True)
class Design:
    config: GemmConfig
    tensors: tuple[HostTensor, ...]
    fifos: tuple[ObjectFifo, ...]
    links: tuple[Link, ...]
    kernels: tuple[KernelSpec, ...]
    workers: tuple[Worker, ...]
    memtile_buffers: tuple[MemtileBuffer, ...]
    runtime: tuple[RuntimeOp, ...]
    # what the build computed, stored so that every reader (the model, the simulator, the keys, the renderer, the
    # IRON lowering) reads it here rather than recomputing it from the config (design/build.py):
    build: KernelBuild  # the one kernel object every core links (each KernelSpec's build)
    # A, B and C in their DMA units for the design's own call (grid.py); another call's: grid(operand, call)
    grids: tuple[Grid, ...]
    traffic: tuple[TensorCount, ...]  # A's, B's and C's shim traffic in the runtime sequence (design/traffic.py)
    task_groups: int  # the runtime sequence's task groups: one per output block, or per span of blocks
    tasks_per_group: int  # shim tasks per task group (the first group's)
    # every core's L1 allocation and its predicted bank map (design/l1_banks.py); None when no allocation fits
    l1: L1Plan | None = None
    # neighbour-shared L1 (spec/rules/shared_l1.py; empty without): the shared buffers, their holders, readers,
    # locks and memtile streams, and each core role's own L1 plan (`l1` is the first role's: the holder's)
    shared: tuple[SharedBuffer, ...] = ()
    l1_roles: tuple[CoreL1, ...] = ()

    def grid(self, operand: str, call: CallPlan | None = None) -> Grid:
        """An operand's sizes in its DMA units, for one call of this design (default: its own)."""
        g = self.grids[OPERANDS.index(operand)]
        return g if call is None or call == self.config.call else g.at(call, operand)

    @property
    def roles(self) -> dict[str, str]:
        """Each kernel's role (zero, matmul, convert) by its symbol, as the workers call it."""
        return {k.name: k.role for k in self.kernels}

    def shared_of(self, fifo: str) -> tuple[SharedBuffer, ...]:
        """The neighbour-shared buffers holding `fifo`'s objects (none: the fifo's consumers keep their own)."""
        return tuple(b for b in self.shared if b.fifo == fifo)

    def relay_streams(self, fifo: str) -> tuple[tuple[TileRef, ...], ...]:
        """The memtile MM2S streams bringing a shared fifo's objects, each as the holders it feeds: one stream to
        every holder when each holds both slots (A on its west core), else one per slot, slot s's objects to its
        slot's holders (B split: the even objects to the lower cores, the odd ones to the upper: docs/shared_l1.md
        3.3)."""
        held = self.shared_of(fifo)
        by_slot = [tuple(dict.fromkeys(b.holder for b in held if b.slot == s)) for s in (0, 1)]
        return (by_slot[0],) if by_slot[0] == by_slot[1] else tuple(by_slot)

    def fifo(self, name: str) -> ObjectFifo:
        for f in self.fifos:
            if f.name == name:
                return f
        raise KeyError(name)

    def kernel(self, name: str) -> KernelSpec:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)

    def tensor(self, name: str) -> HostTensor:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    @property
    def tasks(self) -> tuple[ShimTask, ...]:
        return tuple(op.task for op in self.runtime if op.task is not None)
