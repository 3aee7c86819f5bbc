"""One call's NPU instruction stream (insts.bin, mlir-aie 1.4.3's TXN format), encoded on the host
in milliseconds instead of by aiecc.

The word layouts are mlir-aie's: the header and the op encodings of include/aie/Runtime/TxnEncoding.h
(lib/Targets/AIETargetNPU.cpp before it), the shim BD fields of lib/Dialect/AIEX/Transforms/AIEDmaToNpu.cpp,
IRON's fill/drain as `shim_dma_single_bd_task` (python/dialects/aiex.py: the last three dimensions
move, an outer one repeats the task) lowered by AIEDMATasksToNPU.cpp, and before every queue push
that issues a completion token the maskwrite of the shim tile's controller id that AIEDmaToNpu.cpp's
PushQueuetoWrite32Pattern adds (only where the tile carries one: aiecc's default pipeline gives it one),
and the runtime-parameter writes and runtime-barrier sets (RtpToWrite32Pattern, AIELowerSetLock.cpp).
Register addresses and field positions are the device's (facts/devices.py ShimRegisters, CoreLocks);
every field is checked against its width, so a value that would spill
into its neighbour's bits is one line (TxnFieldError), never a wrong word. tests/backends/test_txn.py checks
the layouts against the words of mlir-aie's own lit tests (tests/data/txn_vectors.json).

What aiecc decides and no test shows (the shim channel of each fifo, the BD ids of
aie-assign-runtime-sequence-bd-ids, the order of the ops) is this module's assumption: `npu_call`
trusts the encoder for an xclbin only after its streams for the sizes `probe_calls` picks (every
branch below taken at least once) equal the ones aiecc wrote, byte for byte, and otherwise asks aiecc
for every size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..design.build import group_blocks, group_tasks, host_tensors, runtime_sequence
from ..design.channels import dma_channels
from ..design.ir import Design, RuntimeOp, ShimTask
from ..facts.devices import CORE_LOCKS, SHIM_DMA, SHIM_REGISTERS, CoreLocks, Device, DmaSpec, ShimRegisters, TileKind
from ..facts.dtypes import WORD_BYTES, dtype
from ..facts.errors import BuildError, TxnFieldError
from ..spec.call import CallPlan
from ..spec.rules.l1 import RTP_PART, runtime_barrier

# Bump with any change to the words the encoder writes for a call: a cached trust verdict
# (npu_call's streams.json) names the version it was reached with, and another version re-checks.
# 1: the first encoder; 2: the controller-id maskwrite before each token-issuing push, field checks;
# 3: each core's runtime-barrier set after the parameter writes (and the tiles word of a runtime-size design).
TXN_ENCODER_VERSION = 3

WORD_BITS = 8 * WORD_BYTES  # the DMAs' address granule (getAddressGenGranularity)
WORD_MAX = (1 << WORD_BITS) - 1
DDR_FOLD = 0x80000000  # host args past the first 5 get the DDR aperture from the compiler, not the firmware
FIRMWARE_ARGS = 5
S2MM, MM2S = 0, 1  # DMAChannelDir
TXN_MAJOR, TXN_MINOR = 0, 1
MEMTILE_ROWS = 1

OP_WRITE32, OP_BLOCKWRITE, OP_MASKWRITE32, OP_PREEMPT, OP_LOAD_PDI = 0x00, 0x01, 0x03, 0x06, 0x08
OP_SYNC, OP_ADDRESS_PATCH = 0x80, 0x81


def fits(what: str, value: int, largest: int, fix: str = "report the design (gemm-gen generate) as a bug",
         smallest: int = 0) -> int:
    """`value`, if it lies in its field's range; else the one line that names the field."""
    if not smallest <= value <= largest:
        raise TxnFieldError(f"{what} {value} does not fit its field ({smallest}..{largest}); written anyway it "
                            f"would spill into the neighbouring bits", fix)
    return value


def address(col: int, row: int, offset: int, regs: ShimRegisters = SHIM_REGISTERS) -> int:
    """The absolute register address of `offset` in tile (col, row)."""
    fits("register column", col, (1 << regs.col_bits) - 1)
    fits("register row", row, (1 << regs.row_bits) - 1)
    fits("register offset", offset, (1 << regs.row_shift) - 1)
    return col << regs.col_shift | row << regs.row_shift | offset


# ---- ops and their words (TxnEncoding.h) -------------------------------------------------------
@dataclass(frozen=True)
class Write32:
    address: int
    value: int

    def __post_init__(self) -> None:
        fits("write32 address", self.address, WORD_MAX)
        fits("write32 value", self.value, WORD_MAX)

    def words(self) -> list[int]:
        return [OP_WRITE32, 0, self.address, 0, self.value, 6 * WORD_BYTES]


@dataclass(frozen=True)
class MaskWrite32:
    address: int
    value: int
    mask: int

    def __post_init__(self) -> None:
        fits("maskwrite32 address", self.address, WORD_MAX)
        fits("maskwrite32 value", self.value, WORD_MAX)
        fits("maskwrite32 mask", self.mask, WORD_MAX)

    def words(self) -> list[int]:
        return [OP_MASKWRITE32, 0, self.address, 0, self.value, self.mask, 7 * WORD_BYTES]


@dataclass(frozen=True)
class BlockWrite:
    address: int
    data: tuple[int, ...]
    col: int = 0  # only a blockwrite written with column/row attributes carries them
    row: int = 0

    def __post_init__(self) -> None:
        fits("blockwrite address", self.address, WORD_MAX)
        fits("blockwrite column", self.col, 0xFF)
        fits("blockwrite row", self.row, 0xFF)
        for i, w in enumerate(self.data):
            fits(f"blockwrite word {i}", w, WORD_MAX)

    def words(self) -> list[int]:
        return [OP_BLOCKWRITE, self.col | self.row << 8, self.address, (4 + len(self.data)) * WORD_BYTES,
                *self.data]


@dataclass(frozen=True)
class Sync:
    """Wait for a channel's task completion token (TCT)."""

    col: int
    row: int
    direction: int
    channel: int
    ncol: int = 1
    nrow: int = 1

    def __post_init__(self) -> None:
        for name in ("col", "row", "direction", "channel", "ncol", "nrow"):
            fits(f"sync {name}", getattr(self, name), 0xFF)

    def words(self) -> list[int]:
        return [OP_SYNC, 4 * WORD_BYTES, self.direction | self.row << 8 | self.col << 16,
                self.nrow << 8 | self.ncol << 16 | self.channel << 24]


@dataclass(frozen=True)
class AddressPatch:
    """The firmware writes host buffer `arg_idx`'s address plus `arg_plus` bytes into `address`.

    arg_plus is kept below 2^32: its high word is 0 in every release (newer TxnEncoding.h carries a
    64-bit arg_plus in words 10 and 11, test/Targets/NPU/npu_address_patch_arg_plus_64bit.mlir;
    whether 1.4.3 does is unconfirmed), so a larger offset is refused rather than guessed."""

    address: int
    arg_idx: int
    arg_plus: int

    def __post_init__(self) -> None:
        fits("address patch register", self.address, WORD_MAX)
        fits("address patch argument", self.arg_idx, WORD_MAX)
        fits("address patch byte offset", self.arg_plus, WORD_MAX, "keep each host buffer below 4 GiB")

    def words(self) -> list[int]:
        return [OP_ADDRESS_PATCH, 12 * WORD_BYTES, 0, 0, 0, 0, self.address, 0, self.arg_idx, 0, self.arg_plus, 0]


@dataclass(frozen=True)
class LoadPdi:
    id: int
    size: int
    address: int

    def __post_init__(self) -> None:
        fits("load_pdi id", self.id, 0xFFFF)
        fits("load_pdi size", self.size, WORD_MAX)
        fits("load_pdi address", self.address, (1 << 64) - 1)

    def words(self) -> list[int]:
        return [OP_LOAD_PDI | self.id << 16, self.size, self.address & WORD_MAX, self.address >> WORD_BITS]


@dataclass(frozen=True)
class Preempt:
    level: int

    def __post_init__(self) -> None:
        fits("preempt level", self.level, 0xFFFFFF)

    def words(self) -> list[int]:
        return [OP_PREEMPT | self.level << 8]


Op = Write32 | MaskWrite32 | BlockWrite | Sync | AddressPatch | LoadPdi | Preempt


def encode(ops: list[Op], generation: int, columns: int, rows: int) -> np.ndarray:
    """The stream: a 4-word header (version, device generation and shape, op count, bytes), then
    each op's words."""
    fits("TXN header rows", rows, 0xFF)
    fits("TXN header device generation", generation, 0xFF)
    fits("TXN header columns", columns, 0xFF)
    body = [w for op in ops for w in op.words()]
    size = fits("TXN stream bytes", (4 + len(body)) * WORD_BYTES, WORD_MAX, "call a smaller size")
    header = [rows << 24 | generation << 16 | TXN_MINOR << 8 | TXN_MAJOR, MEMTILE_ROWS << 8 | columns, len(ops), size]
    return np.array(header + body, dtype=np.uint32)  # every word was checked against 32 bits above


# ---- a shim BD from a transfer's pattern (AIEDmaToNpu.cpp, BdLowering.h) --------------------------
@dataclass(frozen=True)
class ShimBd:
    """The 8 words of a shim BD for one transfer, how often its task repeats, and the shape of
    walk it programs: the encoder's branches it took ("linear" or "n-d", with "d1" and "d2" where
    those dimensions step, then "iteration" or "repeat" where the task runs more than once)."""

    words: tuple[int, ...]
    repeat: int  # the queue push's repeat count: the BD runs repeat + 1 times
    shape: str = ""


def shim_bd(offset: int, sizes: tuple[int, ...], strides: tuple[int, ...], elem_bits: int, burst: int,
            regs: ShimRegisters = SHIM_REGISTERS, spec: DmaSpec = SHIM_DMA) -> ShimBd:
    """A fill or drain of IRON's `shim_dma_single_bd_task`: 4 dimensions outermost first (fewer are
    padded with unit ones); the last three move (d2 has no wrap on a shim BD), the outermost
    repeats the BD, stepping by its stride (the BD's iteration dimension)."""
    fix = "report the design (gemm-gen generate) as a bug"
    if not 1 <= len(sizes) == len(strides) <= 4:
        raise TxnFieldError(f"a shim BD of sizes {tuple(sizes)} and strides {tuple(strides)} is not 1 to 4 "
                            f"dimensions with one stride each", fix)
    pad = 4 - len(sizes)
    s = [int(x) for x in reversed((1,) * pad + tuple(sizes))]  # innermost first
    t = [int(x) for x in reversed((0,) * pad + tuple(strides))]
    for d, (size, stride) in enumerate(zip(s, t)):
        fits(f"shim BD d{d} size", size, WORD_MAX, fix, smallest=1)
        fits(f"shim BD d{d} stride", stride, WORD_MAX, fix)

    def granules(n: int, what: str) -> int:
        bits = n * elem_bits
        if bits % WORD_BITS:
            raise TxnFieldError(f"shim BD {what}: {n} x {elem_bits}-bit elements are not whole 32-bit words", fix)
        return bits // WORD_BITS

    step_max = (1 << spec.step_bits) - 1  # a stride field holds stride - 1
    length = fits("shim BD buffer length (words)", granules(s[0] * s[1] * s[2], "length"), spec.max_length, fix)
    linear = (s[1] == 1 and s[2] == 1 and t[0] == 1) or (
        t[0] == 1 and (s[1] <= 1 or t[1] == s[0]) and (s[2] <= 1 or t[2] == s[0] * s[1]))
    shape = ["linear" if linear else "n-d"]
    d0_size = d0_stride = d1_size = d1_stride = d2_stride = 0
    if not linear:
        d0_size = fits("shim BD d0 wrap", granules(s[0], "d0 size"), spec.max_wrap, fix)
        d0_stride = 0 if elem_bits > WORD_BITS or t[0] * elem_bits < WORD_BITS else granules(t[0], "d0 stride") - 1
        d1_size = fits("shim BD d1 wrap", s[1], spec.max_wrap, fix)
        d1_stride = granules(t[1], "d1 stride") - 1 if s[1] > 1 else 0
        d2_stride = granules(t[2], "d2 stride") - 1 if s[2] > 1 else 0
        for d, field in enumerate((d0_stride, d1_stride, d2_stride)):
            fits(f"shim BD d{d} stride field (stride - 1, words)", field, step_max, fix)
        shape += [name for name, size in (("d1", s[1]), ("d2", s[2])) if size > 1]
    # The iteration register only for a stride: a pure repeat (stride 0) leaves it 0 and the queue push repeats
    # the BD. BdLowering.h's encodeHardwareStridesWraps alone would give size - 1, but AIEDMATasksToNPU.cpp's
    # rewriteSingleBD (IRON's path) and AIEDmaToNpu.cpp's memcpy path zero it for input_strides[3] == 0 ("must
    # lower to a iteration wrap of 0"), in every stored version 2024-2026; dma_to_npu_width_conversion.mlir
    # @b8b3fd2c checks the words (tests/data/txn_vectors.json, docs/hardware_path.md).
    iter_size = iter_stride = 0
    if s[3] > 1 and t[3] > 0:
        iter_size = fits("shim BD iteration wrap (size - 1)", s[3] - 1, spec.iteration_wrap_max - 1, fix)
        iter_stride = fits("shim BD iteration stride field (stride - 1, words)", granules(t[3], "iteration stride") - 1,
                           (1 << spec.iteration_step_bits) - 1, fix)
        shape.append("iteration")
    elif s[3] > 1:
        shape.append("repeat")
    repeat = fits("queue repeat count (repeats - 1)", s[3] - 1, spec.max_repeat - 1, fix)
    fits("shim BD burst length encoding", burst, (1 << regs.burst_bits) - 1, fix)
    word1 = fits("shim BD base address (bytes)", granules(offset, "offset") * WORD_BYTES, WORD_MAX,
                 "keep each host buffer below 4 GiB")
    valid_bd = 1
    words = (length, word1, 0, d0_size << regs.wrap_shift | d0_stride,
             burst << regs.burst_shift | d1_size << regs.wrap_shift | d1_stride,
             regs.axcache << regs.axcache_shift | d2_stride, iter_size << regs.wrap_shift | iter_stride,
             valid_bd << regs.valid_bd_shift)
    return ShimBd(words, repeat, " ".join(shape))


def host_address(col: int, bd_id: int, arg_idx: int, byte_offset: int,
                 regs: ShimRegisters = SHIM_REGISTERS) -> AddressPatch:
    """The patch that puts host buffer `arg_idx` (+ offset) into shim BD `bd_id`'s address word."""
    fold = DDR_FOLD if arg_idx >= FIRMWARE_ARGS else 0
    return AddressPatch(address(col, 0, regs.bd_base + bd_id * regs.bd_bytes + regs.bd_address_offset), arg_idx,
                        byte_offset + fold)


def _channel(direction: int, channel: int, spec: DmaSpec) -> bool:
    """Whether (direction, channel) is a channel of the shim DMA; True for MM2S."""
    fits("DMA direction (0 S2MM, 1 MM2S)", direction, 1)
    fits("shim DMA channel", channel, (spec.mm2s_channels if direction == MM2S else spec.s2mm_channels) - 1)
    return direction == MM2S


def queue_push(col: int, direction: int, channel: int, bd_id: int, repeat: int, token: bool,
               regs: ShimRegisters = SHIM_REGISTERS, spec: DmaSpec = SHIM_DMA) -> Write32:
    """Start BD `bd_id` on a shim channel (its task queue), `repeat` + 1 times, with a completion
    token when something awaits it."""
    queue = regs.ctrl(_channel(direction, channel, spec), channel) + regs.task_queue_offset
    fits("queue BD id", bd_id, spec.bds - 1)
    fits("queue repeat count (repeats - 1)", repeat, spec.max_repeat - 1)
    value = bd_id | repeat << regs.queue_repeat_shift | int(token) << regs.queue_token_shift
    return Write32(address(col, 0, queue), value)


def controller_id_write(col: int, direction: int, channel: int, controller_id: int,
                        regs: ShimRegisters = SHIM_REGISTERS, spec: DmaSpec = SHIM_DMA) -> MaskWrite32:
    """What aiecc writes before a push that issues a token from a shim tile that carries a controller id: the
    id into the channel's CTRL register (AIEDmaToNpu.cpp PushQueuetoWrite32Pattern), so the token is sent with it."""
    ctrl = regs.ctrl(_channel(direction, channel, spec), channel)
    value = controller_id << regs.controller_id_shift
    if value & ~regs.controller_id_mask or controller_id < 0:
        raise TxnFieldError(f"controller id {controller_id} does not fit the mask {regs.controller_id_mask:#x} "
                            f"of the DMA CTRL register", "report the device description as a bug")
    return MaskWrite32(address(col, 0, ctrl), value, regs.controller_id_mask)


def push_ops(col: int, direction: int, channel: int, bd_id: int, repeat: int, token: bool, controller_id: int | None,
             regs: ShimRegisters = SHIM_REGISTERS, spec: DmaSpec = SHIM_DMA) -> list[Op]:
    """AIEDmaToNpu.cpp PushQueuetoWrite32Pattern for a shim push: when it issues a token and the shim tile
    carries a `controller_id` (None: the tile has none), the maskwrite of that id; then the queue write32.
    aiecc's default pipeline gives every tile of the columns a design uses an id (aie-assign-tile-controller-ids:
    ShimRegisters.controller_id on the shim row), so every token push of our builds has its maskwrite; a module
    lowered without that pass (mlir-aie's push_to_queue.mlir lit test) has none."""
    ops: list[Op] = []
    if token and controller_id is not None:
        ops.append(controller_id_write(col, direction, channel, controller_id, regs, spec))
    ops.append(queue_push(col, direction, channel, bd_id, repeat, token, regs, spec))
    return ops


# ---- one call of a design ----------------------------------------------------------------------
def shim_channels(design: Design) -> dict[str, tuple[int, int]]:
    """(direction, channel) of every fifo's shim end (design/channels.py)."""
    return {name: (MM2S if mm2s else S2MM, ch) for (tile, mm2s, name), ch in dma_channels(design).items()
            if tile.kind == TileKind.SHIM}


@dataclass(frozen=True)
class _Encoding:
    """What every task of one call needs: the host arguments and their elements, the channels."""

    arg: dict[str, int]
    elem_bits: dict[str, int]
    parts: dict[str, int]
    channel: dict[str, tuple[int, int]]
    burst: int

    @classmethod
    def of(cls, design: Design, call: CallPlan) -> _Encoding:
        c = design.config
        tensors = host_tensors(c, call, ())  # their order and types (not their slack)
        return cls({t.name: i for i, t in enumerate(tensors)},
                   {t.name: 8 * dtype(t.dtype).block_bytes for t in tensors},  # mlir-aie's element (v8bfp16ebs8: 72)
                   {t.name: dtype(t.dtype).blocks_per_unit for t in tensors},
                   shim_channels(design), len(c.dev.shim_burst_bytes) - 1)  # the largest burst (burst_length 0)

    def bd(self, t: ShimTask, dev: Device) -> tuple[ShimBd, int]:
        """The task's BD, and the byte offset its address patch adds."""
        tap = t.tap.scaled(self.parts[t.tensor])
        bits = self.elem_bits[t.tensor]
        return (shim_bd(tap.offset, tap.sizes, tap.strides, bits, self.burst, dev.shim_registers,
                        dev.dma[TileKind.SHIM]), tap.offset * bits // 8)


def call_ops(design: Design, call: CallPlan, controller_id: int | None = SHIM_REGISTERS.controller_id) -> list[Op]:
    """The ops of one call's runtime sequence, in the order aiecc lowers them: runtime-parameter
    writes and barrier sets, then per task its BD (blockwrite), its host address (patch), the controller-id
    maskwrite when the push issues a token (from shim tiles with `controller_id`: aiecc's default), and its
    queue push; at the end of each task group a sync per awaited task, and the group's BD ids free again."""
    c = design.config
    dev: Device = c.dev
    regs, spec = dev.shim_registers, dev.dma[TileKind.SHIM]
    runtime = runtime_sequence(c, call)
    enc = _Encoding.of(design, call)
    rtp_address = _rtp_buffer_address(design)
    free: dict[int, list[int]] = {}  # shim column -> free BD ids
    live: dict[int, list[tuple[ShimTask, int]]] = {}  # group -> its tasks and their BD ids
    ops: list[Op] = []
    for op in runtime:
        if op.rtp is not None:
            ops.append(_rtp_write(op, rtp_address, regs))
        elif op.barrier is not None:
            ops.append(_barrier_set(op, dev.core_locks, regs))
        elif op.task is not None:
            t = op.task
            ids = free.setdefault(t.shim.col, list(range(spec.bds)))
            if not ids:
                raise BuildError(f"task {t.name} finds no free BD on shim column {t.shim.col} ({spec.bds} in use)",
                                 "report the design (gemm-gen generate) as a bug")
            bd_id = min(ids)
            ids.remove(bd_id)
            live.setdefault(op.group, []).append((t, bd_id))
            bd, byte_offset = enc.bd(t, dev)
            direction, ch = enc.channel[t.fifo]
            ops += [BlockWrite(address(t.shim.col, 0, regs.bd_base + bd_id * regs.bd_bytes, regs), bd.words),
                    host_address(t.shim.col, bd_id, enc.arg[t.tensor], byte_offset, regs)]
            ops += push_ops(t.shim.col, direction, ch, bd_id, bd.repeat, t.wait, controller_id, regs, spec)
        else:  # the group finishes: await its waited tasks, free every BD
            for t, bd_id in live.pop(op.group, []):
                if t.wait:
                    direction, ch = enc.channel[t.fifo]
                    ops.append(Sync(t.shim.col, 0, direction, ch))
                free[t.shim.col].append(bd_id)
    return ops


def _rtp_buffer_address(design: Design) -> int | None:
    """Where the L1 plan puts every core's runtime-parameter Buffer (the same on every core)."""
    if design.l1 is None:
        return None
    return next((p.address for p in design.l1.placed if p.buffer.name == RTP_PART), None)


def _rtp_write(op: RuntimeOp, buffer_address: int | None, regs: ShimRegisters = SHIM_REGISTERS) -> Write32:
    """aiex.npu.rtp_write: a write32 into the core's data memory at the Buffer's address."""
    w = op.rtp
    if w is None or buffer_address is None:
        raise BuildError("the design's L1 plan places no runtime-parameter buffer",
                         "report the design (gemm-gen generate) as a bug")
    return Write32(address(w.tile.col, w.tile.row, buffer_address + w.index * WORD_BYTES, regs),
                   fits("runtime parameter", w.value, WORD_MAX, "call a smaller K"))


def _barrier_set(op: RuntimeOp, locks: CoreLocks = CORE_LOCKS, regs: ShimRegisters = SHIM_REGISTERS) -> Write32:
    """WorkerRuntimeBarrier.set: aiex.set_lock, lowered by AIELowerSetLock.cpp to a write32 of the value into
    the core's lock value register (facts/devices.py CoreLocks: where, and which lock is assumed)."""
    b = op.barrier
    if b is None:
        raise BuildError("a barrier op without its set", "report the design (gemm-gen generate) as a bug")
    value = fits("runtime barrier value", b.value, locks.value_max, "set the barrier to a lock value")
    return Write32(address(b.tile.col, b.tile.row, locks.address(locks.barrier_id), regs), value)


def encode_call(design: Design, call: CallPlan) -> np.ndarray:
    """insts.bin of one call of `design`."""
    c = design.config
    _, columns = c.dev.target(c.array.cols)
    return encode(call_ops(design, call), c.dev.txn_generation, columns, c.dev.first_core_row + c.dev.core_rows)


# ---- which branches a call takes (npu_call.probe_calls picks sizes that cover them all) ---------
def branches(design: Design, call: CallPlan) -> frozenset[str]:
    """The encoder's branches that one call's stream goes through: each operand's BD shape
    ("A n-d d1 d2": A's strip in k_mt chunks, "B n-d d1 d2": a row-major B strip split into row
    blocks, "B linear", "C n-d d1", ...; ShimBd.shape), a nonzero buffer offset, the
    runtime-parameter writes of a runtime K, the controller-id maskwrite and sync of an awaited
    task, BD ids used again after their group finished, and what the call plan changes in the
    operands: a K tail, a block moved back to end at M or N, a host-padded operand (another
    leading dimension).

    Every task group of a call has the same task shapes (patterns.shim_a/b/c depend on the block
    only through the offset) but for a shorter or a moved last span (design/spans.py), which ends a
    row band, so the first and the last group show every shape and offset kind; this keeps the
    listing cheap for calls of thousands of groups."""
    c = design.config
    dev = c.dev
    enc = _Encoding.of(design, call)
    spanned = group_blocks(c, call)
    groups = len(spanned)
    found: set[str] = set()
    for g in sorted({0, groups - 1}):
        for t in group_tasks(c, call, g, spanned):
            bd, byte_offset = enc.bd(t, dev)
            found.add(f"{t.tensor} {bd.shape}")
            if byte_offset:
                found.add("nonzero offset")
            if t.wait:
                found.add("token")
    if runtime_barrier(c.runtime.runtime_sizes, c.epilogue.runtime):  # the parameter writes and barrier sets come first
        found.add("runtime parameters")
    if groups > c.runtime.queue_groups:
        found.add("BD ids reused")
    if call.k_walk != call.K:
        found.add("K tail")
    if call.shift_m or call.shift_n:
        found.add("moved block")
    found.update(f"padded {op}" for op in call.padded)
    return frozenset(found)
