"""The Design: plain data describing one GEMM program for the array.

It speaks IRON's vocabulary (ObjectFifo, link forward/split/join, Worker, Runtime fill/drain in
task groups) so that the IRON lowering is a direct translation, and the functional simulator and
the performance model read the very same objects.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import precision as prec
from ..call import CallPlan
from ..config import GemmConfig
from ..epilogue import Epilogue
from ..hw.devices import TileKind
from ..l1_banks import L1Plan
from ..precision import Precision
from ..rules import kernel_variant as kv
from ..rules import l1, peano
from ..rules.memtile import MemtileBuffer
from ..tap import Tap
from .grid import OPERANDS, Grid


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


@dataclass(frozen=True)
class KernelBuild:
    """What one kernel object file is rendered and compiled for: every field changes its code."""

    aie_target: str
    dtype_in: str
    dtype_out: str
    m: int
    k: int
    n: int
    mmul: tuple[int, int, int]
    b_col_maj: bool
    emulate_bf16_with_bfp16: bool
    rounding: str
    saturation: str
    shift: int
    compiler: str = "peano"
    rho: int = 1  # matmul computes (m / rho) rows into C slice `slice` (an int32 argument when rho > 1)
    dtype_b: str | None = None  # None: dtype_in
    acc: str | None = None  # C's type in L1 between calls; None: dtype_out
    expansion: tuple[int, int] = (2, 2)  # er x et accumulators per cluster (gemm_gen/rules/kernel_variant.py)
    loops: str = "k-pipelined"  # which loop of the nest is software-pipelined
    convert_once: bool = False  # bf16 converted to bfp16 once per call (A) / k-step (B), then bfp16 macs
    a_col_maj: bool = False  # A's blocks arrive as s x r blocks of A^T; the kernel transposes them
    c_col_maj: bool = False  # C's r x t blocks are kept transposed in L1 (column-major C below 32 bits)
    epilogue: Epilogue = Epilogue()  # applied once per C tile after its last k-step (gemm_gen/epilogue.py)
    group_size: int = 0  # W4A16: rows of K per int4 scale (gemm_gen/groupquant.py); 0: none
    zero_points: bool = False  # W4A16: a zero point per scale
    opt_level: int = peano.DEFAULT_OPT_LEVEL  # the compile's -O (Peano; rules/peano.py)

    @property
    def t_ma(self) -> int:
        return self.m // self.rho

    @property
    def block_kernel(self) -> bool:
        """Rendered from the bfp16 template: a bfp16 precision, or bf16 converted once."""
        return kv.block_kernel(self.precision, self.convert_once)

    @property
    def precision(self) -> Precision:
        return prec.resolve(self.dtype_in, self.dtype_b, self.dtype_out, self.acc)

    @property
    def acc_block(self) -> tuple[int, int]:
        """The in-place accumulator split's unit: (values per accumulator block, blocks per unit)."""
        return l1.acc_block(self.precision, self.convert_once, self.mmul)

    @property
    def c_split_elems(self) -> int:
        """Accumulator values kept in the C object, its first blocks (the rest in the worker's C acc buffer)."""
        return l1.c_split_blocks(self.precision, self.m, self.n, self.acc_block) * self.acc_block[0]

    @property
    def types(self) -> str:
        """in[_b]_out[_acc<acc>]: the operand types, B and acc named only when they differ."""
        p = self.precision
        return "_".join([p.a] + ([p.b] if p.b != p.a else []) + [p.out] + ([f"acc{p.acc}"] if p.converts_c else []))

    @property
    def symbols(self) -> dict[str, str]:
        """The extern "C" names of the kernels a worker calls, by role (one place for them)."""
        p = self.precision
        names = {"zero": f"zero_{p.acc}" if not p.converts_c else f"zero_{p.acc}_{p.out}",
                 "matmul": "_".join(["matmul", p.a] + ([p.b] if p.b != p.a else []) + [p.acc])}
        if p.converts_c:
            names["convert"] = f"convert_{p.acc}_{p.out}"
        return names

    @property
    def object_file(self) -> str:
        """mlir-aie's mm_<m>x<k>x<n>.o, extended so that different builds never share a name."""
        parts = [f"mm_{self.m}x{self.k}x{self.n}", self.aie_target, self.types,
                 "bcol" if self.b_col_maj else "brow", "x".join(map(str, self.mmul))]
        if self.emulate_bf16_with_bfp16:
            parts.append("bfp16emu")
        if self.compiler != "peano":
            parts.append(self.compiler)
        if self.rounding != "conv_even":
            parts.append(self.rounding)
        if self.saturation != "saturate":
            parts.append(f"sat_{self.saturation}")
        if self.shift:
            parts.append(f"shift{self.shift}")
        if self.rho > 1:
            parts.append(f"rho{self.rho}")
        if tuple(self.expansion) != (2, 2):
            parts.append("e" + "x".join(map(str, self.expansion)))
        if self.loops != "k-pipelined":
            parts.append(self.loops.replace("-", ""))
        if self.convert_once:
            parts.append("cvtonce")
        if self.a_col_maj:
            parts.append("acol")
        if self.c_col_maj:
            parts.append("ccol")
        if not self.epilogue.is_identity:
            parts.append(self.epilogue.tag)
        if self.group_size:
            parts.append(f"g{self.group_size}" + ("zp" if self.zero_points else ""))
        if self.opt_level != peano.DEFAULT_OPT_LEVEL:
            parts.append(f"O{self.opt_level}")
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
        planned (gemm_gen/l1_banks.py)."""
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
class Design:
    config: GemmConfig
    tensors: tuple[HostTensor, ...]
    fifos: tuple[ObjectFifo, ...]
    links: tuple[Link, ...]
    kernels: tuple[KernelSpec, ...]
    workers: tuple[Worker, ...]
    memtile_buffers: tuple[MemtileBuffer, ...]
    runtime: tuple[RuntimeOp, ...]
    l1: L1Plan | None = None  # every core's L1 allocation and its predicted bank map (l1_banks.py)
    # A, B and C in their DMA units for the design's own call (grid.py); another call's: grid(operand, call)
    grids: tuple[Grid, ...] = ()

    def grid(self, operand: str, call: CallPlan | None = None) -> Grid:
        """An operand's sizes in its DMA units, for one call of this design (default: its own)."""
        g = self.grids[OPERANDS.index(operand)]
        return g if call is None or call == self.config.call else g.at(call, operand)

    @property
    def roles(self) -> dict[str, str]:
        """Each kernel's role (zero, matmul, convert) by its symbol, as the workers call it."""
        return {k.name: k.role for k in self.kernels}

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
