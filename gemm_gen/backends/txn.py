"""One call's NPU instruction stream (insts.bin, mlir-aie 1.4.3's TXN format), encoded on the host
in milliseconds instead of by aiecc.

The word layouts are mlir-aie's: the header and the op encodings of include/aie/Runtime/TxnEncoding.h,
the shim BD fields of lib/Dialect/AIEX/Transforms/AIEDmaToNpu.cpp, IRON's fill/drain as
`shim_dma_single_bd_task` (python/dialects/aiex.py: the last three dimensions move, an outer one
repeats the task) lowered by AIEDMATasksToNPU.cpp. tests/test_txn.py checks every layout against the
words of mlir-aie's own lit tests. What aiecc decides and no test shows (the shim channel of each
fifo, the BD ids of aie-assign-runtime-sequence-bd-ids, the order of the ops) is this module's
assumption: `npu_call` trusts the encoder for an xclbin only after its stream for the xclbin's own
size equals the one aiecc wrote, byte for byte, and otherwise asks aiecc for every size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..call import CallPlan
from ..config import RTP_PART
from ..design.build import host_tensors, runtime_sequence
from ..design.channels import dma_channels
from ..design.model import Design, RuntimeOp, ShimTask
from ..dtypes import WORD_BYTES, dtype
from ..errors import BuildError
from ..hw.devices import Device, TileKind

WORD_BITS = 8 * WORD_BYTES  # the DMAs' address granule (getAddressGenGranularity)
COL_SHIFT, ROW_SHIFT = 25, 20  # absolute register address: col << 25 | row << 20 | offset
SHIM_BD_BASE, BD_BYTES = 0x1D000, 0x20  # shim BD n at 0x1D000 + 0x20 n; its address word at +4
SHIM_DMA_CTRL = 0x1D200  # channel ctrl: + 8 per channel, + 0x10 for MM2S; its task queue at ctrl + 4
AXCACHE = 2  # AIETargetModel::getDefaultAxCache ("enable upsizing in NoC")
DDR_FOLD = 0x80000000  # host args past the first 5 get the DDR aperture from the compiler, not the firmware
FIRMWARE_ARGS = 5
S2MM, MM2S = 0, 1  # DMAChannelDir
TXN_MAJOR, TXN_MINOR = 0, 1
MEMTILE_ROWS = 1

OP_WRITE32, OP_BLOCKWRITE, OP_MASKWRITE32, OP_PREEMPT, OP_LOAD_PDI = 0x00, 0x01, 0x03, 0x06, 0x08
OP_SYNC, OP_ADDRESS_PATCH = 0x80, 0x81


def address(col: int, row: int, offset: int) -> int:
    return (col & 0xFF) << COL_SHIFT | (row & 0xFF) << ROW_SHIFT | (offset & 0xFFFFF)


# ---- ops and their words (TxnEncoding.h) -------------------------------------------------------
@dataclass(frozen=True)
class Write32:
    address: int
    value: int

    def words(self) -> list[int]:
        return [OP_WRITE32, 0, self.address, 0, self.value, 6 * WORD_BYTES]


@dataclass(frozen=True)
class MaskWrite32:
    address: int
    value: int
    mask: int

    def words(self) -> list[int]:
        return [OP_MASKWRITE32, 0, self.address, 0, self.value, self.mask, 7 * WORD_BYTES]


@dataclass(frozen=True)
class BlockWrite:
    address: int
    data: tuple[int, ...]
    col: int = 0  # only a blockwrite written with column/row attributes carries them
    row: int = 0

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

    def words(self) -> list[int]:
        return [OP_SYNC, 4 * WORD_BYTES, self.direction | self.row << 8 | self.col << 16,
                self.nrow << 8 | self.ncol << 16 | self.channel << 24]


@dataclass(frozen=True)
class AddressPatch:
    """The firmware writes host buffer `arg_idx`'s address plus `arg_plus` bytes into `address`."""

    address: int
    arg_idx: int
    arg_plus: int

    def words(self) -> list[int]:
        return [OP_ADDRESS_PATCH, 12 * WORD_BYTES, 0, 0, 0, 0, self.address, 0, self.arg_idx, 0,
                self.arg_plus & 0xFFFFFFFF, 0]


@dataclass(frozen=True)
class LoadPdi:
    id: int
    size: int
    address: int

    def words(self) -> list[int]:
        return [OP_LOAD_PDI | self.id << 16, self.size, self.address & 0xFFFFFFFF, self.address >> 32]


@dataclass(frozen=True)
class Preempt:
    level: int

    def words(self) -> list[int]:
        return [OP_PREEMPT | self.level << 8]


Op = Write32 | MaskWrite32 | BlockWrite | Sync | AddressPatch | LoadPdi | Preempt


def encode(ops: list[Op], generation: int, columns: int, rows: int) -> np.ndarray:
    """The stream: a 4-word header (version, device generation and shape, op count, bytes), then
    each op's words."""
    body = [w for op in ops for w in op.words()]
    header = [rows << 24 | generation << 16 | TXN_MINOR << 8 | TXN_MAJOR, MEMTILE_ROWS << 8 | columns, len(ops),
              (4 + len(body)) * WORD_BYTES]
    out = np.array(header + body, dtype=np.int64)
    assert int(out.min()) >= 0 and int(out.max()) <= 0xFFFFFFFF, "a TXN word out of 32 bits"
    return out.astype(np.uint32)


# ---- a shim BD from a transfer's pattern (AIEDmaToNpu.cpp, BdLowering.h) --------------------------
@dataclass(frozen=True)
class ShimBd:
    """The 8 words of a shim BD for one transfer, and how often its task repeats."""

    words: tuple[int, ...]
    repeat: int  # the queue push's repeat count: the BD runs repeat + 1 times


def shim_bd(offset: int, sizes: tuple[int, ...], strides: tuple[int, ...], elem_bits: int, burst: int) -> ShimBd:
    """A fill or drain of IRON's `shim_dma_single_bd_task`: 4 dimensions outermost first (fewer are
    padded with unit ones); the last three move (d2 has no wrap on a shim BD), the outermost
    repeats the BD, stepping by its stride (the BD's iteration dimension)."""
    pad = 4 - len(sizes)
    s = [int(x) for x in reversed((1,) * pad + tuple(sizes))]  # innermost first
    t = [int(x) for x in reversed((0,) * pad + tuple(strides))]

    def granules(n: int) -> int:
        bits = n * elem_bits
        assert bits % WORD_BITS == 0, f"{n} x {elem_bits}-bit elements are not whole 32-bit words"
        return bits // WORD_BITS

    length = granules(s[0] * s[1] * s[2])
    linear = (s[1] == 1 and s[2] == 1 and t[0] == 1) or (
        t[0] == 1 and (s[1] <= 1 or t[1] == s[0]) and (s[2] <= 1 or t[2] == s[0] * s[1]))
    d0_size = d0_stride = d1_size = d1_stride = d2_stride = 0
    if not linear:
        d0_size = granules(s[0])
        d0_stride = 0 if elem_bits > WORD_BITS or t[0] * elem_bits < WORD_BITS else granules(t[0]) - 1
        d1_size = s[1]
        d1_stride = granules(t[1]) - 1 if s[1] > 1 else 0
        d2_stride = granules(t[2]) - 1 if s[2] > 1 else 0
    iter_size = iter_stride = 0
    if s[3] > 1 and t[3] > 0:
        iter_size, iter_stride = s[3] - 1, granules(t[3]) - 1
    valid_bd = 1
    words = (length, granules(offset) * WORD_BYTES if offset else 0, 0, d0_size << 20 | d0_stride,
             burst << 30 | d1_size << 20 | d1_stride, AXCACHE << 24 | d2_stride, iter_size << 20 | iter_stride,
             valid_bd << 25)
    return ShimBd(words, s[3] - 1 if s[3] > 1 else 0)


def host_address(col: int, bd_id: int, arg_idx: int, byte_offset: int) -> AddressPatch:
    """The patch that puts host buffer `arg_idx` (+ offset) into shim BD `bd_id`'s address word."""
    fold = DDR_FOLD if arg_idx >= FIRMWARE_ARGS else 0
    return AddressPatch(address(col, 0, SHIM_BD_BASE + bd_id * BD_BYTES + WORD_BYTES), arg_idx, byte_offset + fold)


def queue_push(col: int, direction: int, channel: int, bd_id: int, repeat: int, token: bool) -> Write32:
    """Start BD `bd_id` on a shim channel (its task queue), `repeat` + 1 times, with a completion
    token when something awaits it."""
    queue = SHIM_DMA_CTRL + channel * 8 + (0x10 if direction == MM2S else 0) + WORD_BYTES
    assert 0 <= bd_id <= 0xF and 0 <= repeat <= 0xFF, "the queue word holds a 4-bit BD id and an 8-bit repeat"
    return Write32(address(col, 0, queue), (bd_id & 0xF) | (repeat & 0xFF) << 16 | int(token) << 31)


# ---- one call of a design ----------------------------------------------------------------------
def shim_channels(design: Design) -> dict[str, tuple[int, int]]:
    """(direction, channel) of every fifo's shim end (design/channels.py)."""
    return {name: (MM2S if mm2s else S2MM, ch) for (tile, mm2s, name), ch in dma_channels(design).items()
            if tile.kind == TileKind.SHIM}


def call_ops(design: Design, call: CallPlan) -> list[Op]:
    """The ops of one call's runtime sequence, in the order aiecc lowers them: runtime-parameter
    writes, then per task its BD (blockwrite), its host address (patch) and its queue push; at the
    end of each task group a sync per awaited task, and the group's BD ids free again."""
    c = design.config
    dev: Device = c.dev
    runtime = runtime_sequence(c, call)
    tensors = host_tensors(c, call, runtime)
    arg = {t.name: i for i, t in enumerate(tensors)}
    elem_bits = {t.name: 8 * dtype(t.dtype).block_bytes for t in tensors}  # mlir-aie's element (v8bfp16ebs8: 72)
    parts = {t.name: dtype(t.dtype).blocks_per_unit for t in tensors}
    channel = shim_channels(design)
    burst = len(dev.shim_burst_bytes) - 1  # the largest (burst_length 0)
    # every core's runtime-parameter Buffer sits where the L1 plan puts it (the same on every core)
    rtp_address = next((p.address for p in design.l1.placed if p.buffer.name == RTP_PART), None) \
        if design.l1 is not None else None
    free: dict[int, list[int]] = {}  # shim column -> free BD ids
    live: dict[int, list[tuple[ShimTask, int]]] = {}  # group -> its tasks and their BD ids
    ops: list[Op] = []
    for op in runtime:
        if op.rtp is not None:
            ops.append(_rtp_write(op, rtp_address))
        elif op.task is not None:
            t = op.task
            ids = free.setdefault(t.shim.col, list(range(dev.dma[TileKind.SHIM].bds)))
            bd_id = min(ids)
            ids.remove(bd_id)
            live.setdefault(op.group, []).append((t, bd_id))
            tap = t.tap.scaled(parts[t.tensor])
            bd = shim_bd(tap.offset, tap.sizes, tap.strides, elem_bits[t.tensor], burst)
            base = SHIM_BD_BASE + bd_id * BD_BYTES
            direction, ch = channel[t.fifo]
            arg_idx = arg[t.tensor]
            ops += [BlockWrite(address(t.shim.col, 0, base), bd.words),
                    host_address(t.shim.col, bd_id, arg_idx, tap.offset * elem_bits[t.tensor] // 8),
                    queue_push(t.shim.col, direction, ch, bd_id, bd.repeat, t.wait)]
        else:  # the group finishes: await its waited tasks, free every BD
            for t, bd_id in live.pop(op.group, []):
                if t.wait:
                    direction, ch = channel[t.fifo]
                    ops.append(Sync(t.shim.col, 0, direction, ch))
                free[t.shim.col].append(bd_id)
    return ops


def _rtp_write(op: RuntimeOp, buffer_address: int | None) -> Write32:
    """aiex.npu.rtp_write: a write32 into the core's data memory at the Buffer's address."""
    assert op.rtp is not None
    if buffer_address is None:
        raise BuildError("the design's L1 plan places no runtime-parameter buffer",
                         "report the design (gemm-gen generate) as a bug")
    w = op.rtp
    return Write32(address(w.tile.col, w.tile.row, buffer_address + w.index * WORD_BYTES), w.value & 0xFFFFFFFF)


def encode_call(design: Design, call: CallPlan) -> np.ndarray:
    """insts.bin of one call of `design`."""
    c = design.config
    _, columns = c.dev.target(c.cols)
    return encode(call_ops(design, call), c.dev.txn_generation, columns, c.dev.first_core_row + c.dev.core_rows)
