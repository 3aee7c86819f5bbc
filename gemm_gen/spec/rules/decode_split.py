"""The split decode placement (issue 34 item 4): every core its own slice of N, B over every shim MM2S channel.

The decode mapping (spec/rules/array.py, rows = 1) gives each column one core and one B stream: B crosses 8 shim
streams on npu2, one per column, and one core's stream port per column, so a 1 x 4096 x 4096 bf16 call is bound by
one stream's bursts in flight (4 MiB at 6.32 GB/s: 664 us) and one core's port (582 us). Using every core and both
MM2S channels of every shim is what it takes, and the A operand stands in the way: A needs one MM2S channel of
its own (mlir-aie 1.4.3 gives every ObjectFifo its own DMA channel: Xilinx/mlir-aie issue #2595, "each ObjectFIFO
lowering is assigned its own DMA channel", open), so 2 x columns - 1 channels are left for B. With equal shares per
core, a channel that carries B to c cores moves c / cores of B; over 15 channels 32 cores need two channels of 3
(3 MiB: 498 us, below DRAM's time for B) and thirteen of 2. No placement of whole columns does it (the A column
would carry its four cores' B on one channel: 664 us again); this one takes its fourth core's B from the next
column's memtile, a stream across one column (the stream switch routes any memtile MM2S port to any core).

The grid is rows = 1 by cols = columns x core_rows "virtual columns", one per core, so the call plan, the grids,
B's strips and C's columns are the decode mapping's with more columns; only where the tiles are differs:

- virtual column v (N block v of every output block) runs on core (v // R, row v % R) (R core rows), so the
  four virtual columns of a physical column are consecutive in N and its memtile joins their C along N;
- B: consecutive runs of virtual columns, one per shim MM2S channel in column order (column 0's second channel
  carries A), as even as the counts allow, the longer runs first; each run's memtile (above its shim) splits
  every object into the run's cores' k x n tiles;
- A: one stream into memtile 0, broadcast to every core; C: each physical column's four tiles joined in its
  memtile (slices along N), out through its shim.

The memtile DMA channels each memtile then needs are counted by `channel_problem` (6 each way on AIE-ML and
AIE2P memtiles, AM020 "Memory Tile Overview and Features"): npu2's memtile 1 uses all 6 MM2S (two splits of 3 and
2, and C) and every memtile all 6 S2MM (two B, four C; memtile 0: A, one B, four C).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...facts.devices import Device, TileKind
from ..request import MAPPINGS

SPLIT_MAPPING = MAPPINGS[2]  # the mapping option's value (spec.MAPPINGS)
A_COL = 0  # the shim and memtile that carry A (its second MM2S channel)


@dataclass(frozen=True)
class Stream:
    """One shim MM2S channel's B: virtual columns [first, first + count), split by its memtile."""

    shim: int  # the shim column (and the memtile above it)
    first: int
    count: int

    @property
    def columns(self) -> range:
        return range(self.first, self.first + self.count)


def virtual_columns(dev: Device) -> int:
    """The grid's columns in the split placement: one per core."""
    return dev.columns * dev.core_rows


def is_split(dev: Device, rows: int, cols: int) -> bool:
    """Whether a grid of rows x cols is the split placement (one row of one virtual column per core)."""
    return rows == 1 and dev.core_rows > 1 and cols == virtual_columns(dev)


def physical_columns(dev: Device, rows: int, cols: int) -> int:
    """The device columns a grid of rows x cols occupies."""
    return dev.columns if is_split(dev, rows, cols) else cols


def core_of(dev: Device, v: int) -> tuple[int, int]:
    """(column, core row) of the core that runs virtual column v."""
    return divmod(v, dev.core_rows)


def column_of(dev: Device, v: int) -> int:
    """The physical column (memtile, C join) of virtual column v."""
    return v // dev.core_rows


def streams(dev: Device) -> tuple[Stream, ...]:
    """B's shim streams in column order: one per MM2S channel but A's, the virtual columns in N order, as even as
    the counts allow (the longer runs first)."""
    channels = dev.dma[TileKind.SHIM].mm2s_channels
    shims = [col for col in range(dev.columns) for _ in range(channels - (col == A_COL))]
    count, extra = divmod(virtual_columns(dev), len(shims))
    out, first = [], 0
    for i, shim in enumerate(shims):
        n = count + (i < extra)
        out.append(Stream(shim, first, n))
        first += n
    return tuple(out)


def stream_of(dev: Device, v: int) -> Stream:
    """The stream that carries virtual column v's B."""
    return next(s for s in streams(dev) if v in s.columns)


def tasks_per_group(dev: Device) -> int:
    """Shim tasks of one output block: A, one per B stream, one C per physical column."""
    return 1 + len(streams(dev)) + dev.columns


def b_channel_share(dev: Device) -> float:
    """The share of B the busiest shim channel carries (the longest run over all virtual columns)."""
    return max(s.count for s in streams(dev)) / virtual_columns(dev)


def memtile_channels(dev: Device, placed: tuple[Stream, ...] | None = None) -> dict[int, tuple[int, int]]:
    """(S2MM, MM2S) channels of each memtile: A's stream in and its broadcast out (memtile A_COL), each B stream in
    and one channel per core it splits to, the column's C tiles in (one per core row) and the joined C out."""
    used = {col: [dev.core_rows, 1] for col in range(dev.columns)}  # C: one S2MM per core row, one MM2S
    used[A_COL][0] += 1
    used[A_COL][1] += 1
    for s in streams(dev) if placed is None else placed:
        used[s.shim][0] += 1
        used[s.shim][1] += s.count
    return {col: (s2mm, mm2s) for col, (s2mm, mm2s) in used.items()}


def channel_problem(dev: Device, placed: tuple[Stream, ...] | None = None) -> str | None:
    """Why a placement's memtiles run out of DMA channels, None if they do not."""
    spec = dev.dma[TileKind.MEM]
    for col, (s2mm, mm2s) in memtile_channels(dev, placed).items():
        if s2mm > spec.s2mm_channels or mm2s > spec.mm2s_channels:
            return (f"the split decode placement needs {s2mm} S2MM and {mm2s} MM2S channels on memtile {col}, which "
                    f"has {spec.s2mm_channels} and {spec.mm2s_channels}")
    return None
