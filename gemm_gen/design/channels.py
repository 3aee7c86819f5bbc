"""Which DMA channel each fifo end gets on the memtiles and shims, as mlir-aie assigns them: one
place for the simulator (which channel carries what) and the instruction-stream encoder (which
channel's queue a task is pushed onto, which channel a sync waits on)."""

from __future__ import annotations

from ..facts.devices import TileKind
from .ir import Design, TileRef


def stream_end(fifo: str, stream: int) -> str:
    """The memtile MM2S end of stream `stream` of a shared fifo (Design.relay_streams): the first is the fifo's own
    producer end, the second (B split: the pong objects) is named after it."""
    return fifo if stream == 0 else f"{fifo} pong"


def dma_channels(design: Design) -> dict[tuple[TileRef, bool, str], int]:
    """(memtile or shim tile, is MM2S, fifo) -> channel: endpoints in IR order (fifos by name; a
    fifo's producer end before its consumer ends), on a memtile those of links with a buffer away
    from the memtile first; each takes the lowest free channel of its tile and direction.
    Cross-tile memtile endpoints beyond channel 3 are left for the simulator's channel check to
    refuse. (The shim's order is the same rule, checked against aiecc only through its instruction
    stream: backends/npu_call.py.)"""
    cross = set()
    for lk in design.links:
        owner = lk.dsts[0] if lk.kind == "join" else lk.srcs[0]
        if any(b.home_col != b.owner_col for b in design.memtile_buffers if b.name.startswith(f"{owner}_buff_")):
            cross |= set(lk.srcs) | set(lk.dsts)
    ends = []
    for f in sorted(design.fifos, key=lambda f: f.name):
        if f.producer.kind in (TileKind.MEM, TileKind.SHIM):
            ends.append((f.producer, True, f.name))
            if design.shared_of(f.name):  # a shared operand split over two streams: the second right after
                ends += [(f.producer, True, stream_end(f.name, i)) for i in range(1, len(design.relay_streams(f.name)))]
        ends += [(t, False, f.name) for t in f.consumers if t.kind in (TileKind.MEM, TileKind.SHIM)]
    ends.sort(key=lambda e: e[2] not in cross)  # stable: cross-tile endpoints first, IR order otherwise
    taken: dict[tuple[TileRef, bool], int] = {}
    index = {}
    for tile, mm2s, name in ends:
        index[(tile, mm2s, name)] = taken.get((tile, mm2s), 0)
        taken[(tile, mm2s)] = index[(tile, mm2s, name)] + 1
    return index
