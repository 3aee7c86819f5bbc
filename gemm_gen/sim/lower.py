"""Lower a Design onto the simulated array, as mlir-aie's ObjectFifo transform would.

- A fifo between two tiles has `depth` buffers on each non-shim end, a prod lock (init depth) and a
  cons lock (init 0) per end, and one BD per buffer in a cyclic chain on each DMA channel.
- A memtile link owns one set of buffers (those of its bigger fifo: the joined one, the split one,
  or the larger of a forward's two) with one lock pair per slice; join/split slices get their own
  BDs, and the outer fifo's dims apply per slice (AIEObjectFifoStatefulTransform.cpp).
- Channels are numbered per tile in IR order (fifos by name: a fifo's producer end, then its
  consumer ends), except that on a memtile the endpoints of a link with a buffer in a neighbour
  memtile take the lowest channels first (gemm_gen/spec/rules/memtile.py); BDs, channels and locks are
  counted against the tile's DMA (memtile BDs per even/odd bank; channels 4-5 only reach local
  memory).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from ..design.channels import dma_channels, stream_end
from ..design.ir import Acquire, Design, Link, Loop, ObjectFifo, Op, RuntimeOp, SharedBuffer, TileRef
from ..design.tap import Tap
from ..facts.devices import TileKind
from ..facts.dtypes import dtype
from ..facts.errors import BdExhaustionError, LayoutError, OutOfRangeError, SimulationError
from ..spec.config import GemmConfig
from .kernel import KernelEmulator
from .machine import (
    Barrier,
    Bd,
    BdPool,
    Buffer,
    Channel,
    CommandProcessor,
    CoreActor,
    FifoEnd,
    Lock,
    SharedSlot,
    Step,
    Stream,
    Task,
)
from .words import initial

T = TypeVar("T")


@dataclass
class Machine:
    config: GemmConfig
    streams: list[Stream]
    cores: list[CoreActor]
    cmd: CommandProcessor
    channels: list[Channel]
    fifo_ends: list[tuple[str, TileRef, Lock]]  # (fifo, tile, lock counting full objects)
    dram: dict[str, np.ndarray]
    kernel: KernelEmulator
    design: Design
    shim_channels: dict[str, Channel]  # fifo -> the shim channel its tasks run on
    rtps: dict[tuple[TileRef, str], Buffer]  # (tile, buffer) -> a worker's runtime-parameter buffer
    barriers: dict[tuple[TileRef, str], Barrier]  # (tile, barrier) -> a worker's runtime barrier

    def snapshot(self) -> Snapshot:
        """The array's state between calls (every channel idle): what restore() puts back."""
        locks: dict[int, Lock] = {}
        buffers: dict[int, Buffer] = {}
        ends: dict[int, FifoEnd] = {}
        for ch in self.channels:
            for bd in ch.bds:
                locks.update((id(lk), lk) for lk in (bd.acquire, bd.release) if lk is not None)
                buffers[id(bd.buffer)] = bd.buffer
        for core in self.cores:
            for end in core.ends.values():
                ends[id(end)] = end
                locks.update((id(lock), lock) for lock in end.locks())
                buffers.update((id(b), b) for b in end.buffers)
            buffers.update((id(b), b) for b in core.buffers.values())
        return Snapshot(
            [(lock, lock.value) for lock in locks.values()],
            [(b, b.value, b.sets) for b in self.barriers.values()],
            [(end, end.next, list(end.held)) for end in ends.values()],
            [(b, b.cells.copy(), None if b.epochs is None else b.epochs.copy()) for b in buffers.values()],
            [(ch, ch.cur, ch.words) for ch in self.channels],
            [(core, core.pc, list(core.loops), core.at_start, core.synced, core.passes) for core in self.cores])

    def restore(self, snap: Snapshot) -> None:
        """Put the state of snapshot() back (a call that the fast simulator gave up on is then run literally)."""
        for lock, value in snap.locks:
            lock.value = value
        for barrier, value, sets in snap.barriers:
            barrier.value, barrier.sets = value, sets
        for end, nxt, held in snap.ends:
            end.next = nxt
            end.held.clear()
            end.held.extend(held)
        for buffer, cells, epochs in snap.buffers:
            buffer.cells[:] = cells
            if epochs is not None:
                assert buffer.epochs is not None
                buffer.epochs[:] = epochs
        for ch, cur, words in snap.channels:
            ch.cur, ch.words, ch.active, ch.pos, ch.length = cur, words, False, 0, 0
            if ch.queue is not None:
                ch.queue.clear()
        for core, pc, loops, at_start, synced, passes in snap.cores:
            core.pc, core.at_start, core.synced, core.passes = pc, at_start, synced, passes
            core.loops[:] = loops
            core.ready = None  # the core runs on from the same instruction: it checks its wait anew
            core.bind_calls(None)  # the literal emulator takes the cells

    def next_call(self, runtime: tuple[RuntimeOp, ...], dram: dict[str, np.ndarray], kernel: KernelEmulator) -> None:
        """Start another call on the same array: a new runtime sequence over new DRAM buffers;
        cores, locks, L1 and memtile buffers carry on as they are (one xclbin, many runs)."""
        self.dram, self.kernel = dram, kernel
        for core in self.cores:
            core.kernel = kernel
            core.bind_calls(None)  # the literal emulator takes the cells
        for ch in self.channels:
            ch.words = 0
        self.cmd = command_processor(self.design, runtime, dram, self.shim_channels, self.rtps, self.barriers)


@dataclass
class Snapshot:
    locks: list[tuple[Lock, int]]
    barriers: list[tuple[Barrier, int, int]]
    ends: list[tuple[FifoEnd, int, list[Buffer]]]
    buffers: list[tuple[Buffer, np.ndarray, np.ndarray | None]]
    channels: list[tuple[Channel, int, int]]
    cores: list[tuple[CoreActor, int, list[int], bool, int | None, int]]


def _level(src: TileRef, dst: TileRef) -> str:
    names = {TileKind.SHIM: "DRAM", TileKind.MEM: "memtile", TileKind.CORE: "cores"}
    return f"{names[src.kind]} -> {names[dst.kind]}"


class _MachineLowering:
    def __init__(self, design: Design, dram: dict[str, np.ndarray]) -> None:
        self.d = design
        self.c = design.config
        self.dev = self.c.dev
        self.dram = dram
        self.channels: list[Channel] = []
        self.n_channels: dict[tuple[TileRef, bool], int] = {}
        self.n_locks: dict[TileRef, int] = {}
        self.bd_pool = BdPool()
        self.fifo_ends: list[tuple[str, TileRef, Lock]] = []
        self.core_ends: dict[TileRef, dict[str, FifoEnd]] = {}
        self.producer_ch: dict[str, Channel] = {}
        self.consumer_ch: dict[str, list[Channel]] = {}
        self.shim_channel: dict[str, Channel] = {}
        self.patterns: dict[tuple[Tap | None, str, int, int], np.ndarray] = {}
        self.home = {b.name: b.home_col for b in design.memtile_buffers}
        self.channel_index = dma_channels(design)
        self.streams_of: dict[str, list[Channel]] = {}  # a shared fifo: its memtile MM2S channel per relay stream

    # ---- resources -------------------------------------------------------------------------
    def channel(self, tile: TileRef, mm2s: bool, what: str, bds: list[Bd] | None = None) -> Channel:
        spec = self.dev.dma[tile.kind]
        key = (tile, mm2s)
        index = self.channel_index.get((tile, mm2s, what))
        if index is None:  # a core endpoint: the next channel in IR order
            index = self.n_channels.get(key, 0)
            self.n_channels[key] = index + 1
        limit = spec.mm2s_channels if mm2s else spec.s2mm_channels
        if index >= limit:
            raise SimulationError(
                f"{tile} needs a {index + 1}th {'MM2S' if mm2s else 'S2MM'} channel for {what} "
                f"(it has {limit})",
                "route fewer fifos through this tile",
            )
        for bd in bds or ():
            if (bd.acquire is None) != (bd.release is None):
                # a BD takes no lock or an acquire and a release: mlir-aie 1.4.3's configureLocksInBdBlock
                # (lib/Targets/AIERT.cpp 371-374 at the tag) refuses a BD with a lock lacking either
                raise SimulationError(f"{tile} {'MM2S' if mm2s else 'S2MM'} BD of {bd.label} "
                                      f"{'acquires' if bd.acquire else 'releases'} a lock without "
                                      f"{'releasing' if bd.acquire else 'acquiring'} one (aiecc refuses it)",
                                      "give every BD with a lock both an acquire and a release")
        ch = Channel(f"{'MM2S' if mm2s else 'S2MM'}{index} ({what})", tile, mm2s, bds,
                     spec.task_queue_depth if tile.kind == TileKind.SHIM else 0)
        if bds:
            bank = index % spec.bd_banks
            self.bd_pool.take(tile, bank, len(bds), spec.bds // spec.bd_banks, what)
            if tile.kind == TileKind.MEM and index >= 4:
                remote = {b.buffer.name for b in bds if self.home.get(b.buffer.name, tile.col) != tile.col}
                if remote:
                    raise SimulationError(
                        f"{tile} channel {index} (local-only) must reach a neighbour's buffers {sorted(remote)}",
                        "keep spilled buffers on channels 0-3",
                    )
        self.channels.append(ch)
        return ch

    def lock(self, tile: TileRef, name: str, value: int) -> Lock:
        count = self.n_locks.get(tile, 0) + 1
        limit = self.dev.dma[tile.kind].locks
        if count > limit:
            raise BdExhaustionError(f"{tile} needs {count} locks (max {limit})", "use fewer fifos on this tile")
        self.n_locks[tile] = count
        return Lock(name, value)

    def buffers(self, fifo: ObjectFifo, tile: TileRef, depth: int, elems: int, prefix: str) -> list[Buffer]:
        words = dtype(fifo.dtype).unit_nbytes(elems) // 4
        return [Buffer(f"{prefix}_buff_{i}", tile, words) for i in range(depth)]

    def pattern(self, tap: Tap | None, fifo: ObjectFifo, offset: int, length: int, what: str,
                writes: bool) -> np.ndarray:
        """Word indices of a BD moving `length` elements at element `offset` of a buffer."""
        key = (tap, fifo.dtype, offset, length)
        if key in self.patterns:
            return self.patterns[key]
        t = dtype(fifo.dtype)
        tap = tap or Tap.linear(length)
        if tap.count != length:
            raise SimulationError(f"{what}: its pattern moves {tap.count} elements but its BD {length}",
                                  "make the fifo dims cover exactly one object (or slice)")
        if tap.max_index() >= length:
            raise OutOfRangeError(f"{what}: pattern reaches element {tap.max_index()} of a {length}-element "
                                  f"object", "keep the fifo dims inside the object")
        if t.unit_nbytes(offset) % 4:
            raise OutOfRangeError(f"{what}: slice offset {offset} x {t} is not word aligned",
                                  "align link offsets to 4 bytes")
        idx = tap.to_words(t).indices() + t.unit_nbytes(offset) // 4
        if writes and np.count_nonzero(_marked(idx)) != idx.size:
            raise LayoutError(f"{what}: the S2MM pattern writes some words twice (others never)",
                              "fix the dims_from_stream sizes and strides")
        idx.setflags(write=False)
        self.patterns[key] = idx
        return idx

    # ---- fifo ends -------------------------------------------------------------------------
    def core_end(self, f: ObjectFifo, tile: TileRef, producer: bool) -> Channel:
        """A core's end of a fifo: its L1 buffers, a lock pair, and the DMA channel serving them.

        The DMA empties full objects (MM2S, producer end) or fills free ones (S2MM, consumer end);
        the core acquires the other kind.
        """
        side = "prod" if producer else f"cons_{tile.col}_{tile.row}"
        bufs = self.buffers(f, tile, f.depth, f.obj_elems, f"{f.name}_{side}")
        free = self.lock(tile, f"{f.name}_{side}_prod_lock", f.depth)
        full = self.lock(tile, f"{f.name}_{side}_cons_lock", 0)
        tap = f.dims_to_stream if producer else f.dims_from_stream
        what = f"{tile} {'MM2S' if producer else 'S2MM'} of {f.name}"
        idx = self.pattern(tap, f, 0, f.obj_elems, what, writes=not producer)
        dma_takes, dma_gives = (full, free) if producer else (free, full)
        bds = [Bd(b, idx, dma_takes, dma_gives, f.name) for b in bufs]
        self.core_ends.setdefault(tile, {})[f.name] = FifoEnd(f.name, bufs, dma_gives, dma_takes)
        self.fifo_ends.append((f.name, tile, full))
        return self.channel(tile, producer, f.name, bds)

    def link(self, kind: str, tile: TileRef, srcs: list[ObjectFifo], dsts: list[ObjectFifo],
             offsets: tuple[int, ...]) -> None:
        if kind == "join":
            owner = dsts[0]
        elif kind == "split":
            owner = srcs[0]
        else:
            owner = srcs[0] if srcs[0].obj_elems >= dsts[0].obj_elems else dsts[0]
        total = owner.obj_elems
        if kind == "forward":
            slices = [(0, total)]
        else:
            ends = list(offsets[1:]) + [total]
            slices = [(o, e - o) for o, e in zip(offsets, ends)]
            if any(n <= 0 for _, n in slices):
                raise SimulationError(f"link at {tile}: offsets {offsets} do not slice {total} elements",
                                      "give increasing offsets inside the object")
        bufs = self.buffers(owner, tile, owner.depth, total, owner.name)
        pairs = [(self.lock(tile, f"{owner.name}_prod_lock_{r}", owner.depth),
                  self.lock(tile, f"{owner.name}_cons_lock_{r}", 0)) for r in range(len(slices))]
        for r, (_, cons) in enumerate(pairs):
            self.fifo_ends.append((owner.name if len(pairs) == 1 else f"{owner.name}[{r}]", tile, cons))

        def bds(f: ObjectFifo, tap: Tap | None, slice_ids: list[int], writes: bool) -> list[Bd]:
            out = []
            for b in bufs:
                for r in slice_ids:
                    off, n = slices[r]
                    what = f"{tile} {'S2MM' if writes else 'MM2S'} of {f.name} slice {r}"
                    idx = self.pattern(tap, f, off, n, what, writes)
                    prod, cons = pairs[r]
                    out.append(Bd(b, idx, prod, cons, f.name) if writes else Bd(b, idx, cons, prod, f.name))
            return out

        every = list(range(len(slices)))
        if kind == "join":
            for i, src in enumerate(srcs):
                self.consumer_ch.setdefault(src.name, []).append(
                    self.channel(tile, False, src.name, bds(src, src.dims_from_stream, [i], True)))
            self.producer_ch[dsts[0].name] = self.channel(tile, True, dsts[0].name,
                                                          bds(dsts[0], dsts[0].dims_to_stream, every, False))
        else:
            src = srcs[0]
            self.consumer_ch.setdefault(src.name, []).append(
                self.channel(tile, False, src.name, bds(src, src.dims_from_stream, every, True)))
            for j, dst in enumerate(dsts):
                ids = [j] if kind == "split" else every
                self.producer_ch[dst.name] = self.channel(tile, True, dst.name,
                                                          bds(dst, dst.dims_to_stream, ids, False))

    # ---- neighbour-shared buffers (docs/shared_l1.md 3.2-3.4) --------------------------------
    def split_link(self, link: Link, src: ObjectFifo, dst: ObjectFifo) -> None:
        """A shared operand's memtile leg split over two streams (B split: docs/shared_l1.md 3.3-3.4). Memtile buffer
        b holds L1 objects b r .. b r + r - 1 (r per memtile object: k_mt / k for column-major B tiles, else 1), and
        object i goes to slot i % 2: the first MM2S channel sends the pings, the second the pongs, one BD per channel
        and buffer moving that channel's objects of the buffer (every other L1 object: the fifo's outer dimension,
        which walks the r objects, at twice its stride). Each buffer has its own locks (one anonymous count would
        let one stream take the other's token): the shim's S2MM acquires empty and releases full; the channel
        sending the buffer's first object acquires full and, when the other channel has objects in the buffer too,
        releases the buffer's relay lock; the other acquires relay and releases empty, so the buffer is refilled
        after both have sent their objects. Every BD takes one acquire and one release: mlir-aie 1.4.3 refuses a BD
        with a lock that lacks either (`configureLocksInBdBlock`, lib/Targets/AIERT.cpp 371-374 at the tag), so the
        objects of one channel in one buffer cannot be a chain whose first BD acquires and whose last releases."""
        tile, obj = link.tile, dst.obj_elems
        r, rest = divmod(src.obj_elems, obj)
        if link.kind != "forward" or rest or (src.depth * r) % 2:
            raise SimulationError(f"{dst.name}: a split shared operand needs whole L1 objects in its memtile objects, "
                                  f"an even count per cycle of buffers ({link.kind} link, {src.obj_elems} / {obj} "
                                  f"elements, depth {src.depth})", "use depth_ab_l2=2")
        bufs = self.buffers(src, tile, src.depth, src.obj_elems, src.name)
        fill = self.pattern(src.dims_from_stream, src, 0, src.obj_elems, f"{tile} S2MM of {src.name}", True)
        s2mm: list[Bd] = []
        sends: tuple[list[Bd], list[Bd]] = ([], [])
        for b, buf in enumerate(bufs):
            empty, full = self.lock(tile, f"{src.name}_empty_{b}", 1), self.lock(tile, f"{src.name}_full_{b}", 0)
            s2mm.append(Bd(buf, fill, empty, full, src.name))
            self.fifo_ends.append((f"{src.name}[{b}]", tile, full))
            objects = [[j for j in range(r) if (b * r + j) % 2 == s] for s in (0, 1)]
            order = sorted((s for s in (0, 1) if objects[s]), key=lambda s: objects[s][0])
            takes, gives = [full], [empty]
            if len(order) == 2:
                relay = self.lock(tile, f"{src.name}_relay_{b}", 0)
                takes, gives = [full, relay], [relay, empty]
                self.fifo_ends.append((f"{src.name}[{b}] relay", tile, relay))
            for s, take, give in zip(order, takes, gives):
                js = objects[s]
                part = self.object_pattern(dst, src.obj_elems, r, js[0], f"{tile} MM2S of {dst.name}", len(js))
                sends[s].append(Bd(buf, part, take, give, dst.name))
        self.consumer_ch.setdefault(src.name, []).append(self.channel(tile, False, src.name, s2mm))
        self.streams_of[dst.name] = [self.channel(tile, True, stream_end(dst.name, s), sends[s]) for s in (0, 1)]

    def object_pattern(self, f: ObjectFifo, total: int, r: int, j: int, what: str, n: int = 1) -> np.ndarray:
        """Word indices of L1 objects j, j + 2, .. (n of them) of a memtile object of `total` elements holding r, under
        the fifo's MM2S pattern: its outermost dimension walks the r objects (column-major B tiles spanning k_mt),
        here n of them at twice its stride; with no pattern, object j is the j-th run of the object."""
        tap = f.dims_to_stream
        if r == 1:
            return self.pattern(tap, f, 0, total, what, False)
        if tap is None:
            one = Tap.linear(f.obj_elems, j * f.obj_elems)
            sub = one if n == 1 else Tap(one.offset, (n, f.obj_elems), (2 * f.obj_elems, 1))
        elif tap.sizes[0] == r:
            sub = Tap(tap.offset + j * tap.strides[0], tap.sizes[1:], tap.strides[1:]) if n == 1 else \
                Tap(tap.offset + j * tap.strides[0], (n, *tap.sizes[1:]), (2 * tap.strides[0], *tap.strides[1:]))
        else:
            raise SimulationError(f"{what}: its pattern's outer dimension ({tap.sizes[0]}) does not walk the {r} L1 "
                                  f"objects of a memtile object", "split B over its L1 objects")
        t = dtype(f.dtype)
        if sub.count != n * f.obj_elems or sub.max_index() >= total:
            raise OutOfRangeError(f"{what}: object {j}'s pattern moves {sub.count} of {n * f.obj_elems} elements up to "
                                  f"{sub.max_index()} of {total}", "keep the fifo dims inside the object")
        if t.unit_nbytes(sub.offset) % 4:
            raise OutOfRangeError(f"{what}: object {j} starts at element {sub.offset}, not on a word",
                                  "align the L1 objects to 4 bytes")
        idx = sub.to_words(t).indices()
        idx.setflags(write=False)
        return idx

    def shared_ends(self, f: ObjectFifo, held: tuple[SharedBuffer, ...]) -> list[Stream]:
        """A shared operand's L1 side: each shared buffer on its holder with its three locks there, the holder's own
        S2MM filling the buffers it holds (acquire empty by the reader count, release full), each reader's end
        taking object n from buffer n % 2 with the relay protocol (SharedSlot); and the streams feeding the
        holders, one per relay stream (Design.relay_streams)."""
        words = dtype(f.dtype).unit_nbytes(f.obj_elems) // 4
        fill = self.pattern(f.dims_from_stream, f, 0, f.obj_elems, f"S2MM of shared {f.name}", True)
        buffers: dict[str, Buffer] = {}
        slots: dict[tuple[str, TileRef], SharedSlot] = {}
        holders: dict[TileRef, list[Bd]] = {}
        for sb in held:
            buf = buffers[sb.name] = Buffer(sb.name, sb.holder, words)
            empty, full, relay = (self.lock(lk.tile, lk.name, lk.init) for lk in sb.locks)
            holders.setdefault(sb.holder, []).append(holder_bd(buf, fill, empty, full, len(sb.readers), f.name))
            self.fifo_ends += [(sb.name, sb.holder, full), (f"{sb.name} relay", sb.holder, relay)]
            for reader in sb.readers:
                slots[(sb.name, reader)] = reader_slot(sb, reader, empty, full, relay)
        channels = {tile: self.channel(tile, False, f.name, bds) for tile, bds in holders.items()}
        for tile in f.consumers:
            mine = sorted((sb for sb in held if tile in sb.readers), key=lambda sb: sb.slot)
            if [sb.slot for sb in mine] != [0, 1]:
                raise SimulationError(f"{tile} reads {len(mine)} shared buffer(s) of {f.name}, not a ping and a pong",
                                      "give every consumer of a shared operand both slots")
            ways = [slots[(sb.name, tile)] for sb in mine]
            self.core_ends.setdefault(tile, {})[f.name] = FifoEnd(f.name, [buffers[sb.name] for sb in mine],
                                                                  ways[0].take, ways[0].empty, slots=ways)
        sources = self.streams_of.get(f.name) or [self.producer_ch[f.name]]
        return [Stream(src, [channels[t] for t in fed], _level(f.producer, fed[0]))
                for src, fed in zip(sources, self.d.relay_streams(f.name), strict=True)]

    # ---- the whole design ------------------------------------------------------------------
    def lower(self, kernel: KernelEmulator, runtime: tuple[RuntimeOp, ...]) -> Machine:
        d = self.d
        for link in d.links:
            if d.shared_of(link.dsts[0]) and len(d.relay_streams(link.dsts[0])) > 1:
                self.split_link(link, d.fifo(link.srcs[0]), d.fifo(link.dsts[0]))
                continue
            self.link(link.kind, link.tile, [d.fifo(n) for n in link.srcs], [d.fifo(n) for n in link.dsts],
                      link.offsets)
        streams = []
        for f in d.fifos:
            held = d.shared_of(f.name)
            if held:
                streams += self.shared_ends(f, held)
                continue
            if f.name not in self.producer_ch:
                if f.producer.kind == TileKind.SHIM:
                    self.producer_ch[f.name] = self.shim_channel[f.name] = self.channel(f.producer, True, f.name)
                elif f.producer.kind == TileKind.CORE:
                    self.producer_ch[f.name] = self.core_end(f, f.producer, producer=True)
                else:
                    raise SimulationError(f"memtile fifo {f.name} is not linked", "link it to an input fifo")
            for tile in f.consumers:
                if tile.kind == TileKind.SHIM:
                    ch = self.shim_channel[f.name] = self.channel(tile, False, f.name)
                    self.consumer_ch.setdefault(f.name, []).append(ch)
                elif tile.kind == TileKind.CORE:
                    self.consumer_ch.setdefault(f.name, []).append(self.core_end(f, tile, producer=False))
            consumers = self.consumer_ch.get(f.name, [])
            if len(consumers) != len(f.consumers):
                raise SimulationError(f"fifo {f.name} reaches {len(consumers)} of its {len(f.consumers)} "
                                      f"consumers", "link its memtile end")
            streams.append(Stream(self.producer_ch[f.name], consumers, _level(f.producer, f.consumers[0])))

        cores = []
        rtps: dict[tuple[TileRef, str], Buffer] = {}
        barriers: dict[tuple[TileRef, str], Barrier] = {}
        for wk in d.workers:
            ends = self.core_ends.get(wk.tile, {})
            for name in _acquired(wk.program):
                if name not in ends:
                    raise SimulationError(f"{wk.tile} acquires {name}, which has no end on that tile",
                                          "place the worker where its fifos end")
            own = {b.name: Buffer(b.name, wk.tile, dtype(b.dtype).unit_nbytes(_elems(b.shape)) // 4, b.rtp)
                   for b in wk.buffers}
            for b in wk.buffers:  # what configuring the array writes (aie.buffer initial_value: the tanh table)
                if b.initial_value is not None:
                    own[b.name].cells[:] = initial(np.asarray(b.initial_value, dtype=dtype(b.dtype).host))
            rtps.update({(wk.tile, b.name): own[b.name] for b in wk.buffers if b.rtp})
            barrier = None
            if wk.barrier is not None:  # IRON makes its lock on the worker's tile
                self.lock(wk.tile, wk.barrier, 0)
                barrier = barriers[(wk.tile, wk.barrier)] = Barrier(wk.barrier, wk.tile)
            cores.append(CoreActor(wk.tile, wk.program, ends, kernel, own, barrier))
        token_rules(self.channels, cores)
        cmd = command_processor(d, runtime, self.dram, self.shim_channel, rtps, barriers)
        return Machine(self.c, streams, cores, cmd, self.channels, self.fifo_ends, self.dram, kernel, d,
                       self.shim_channel, rtps, barriers)


def token_rules(channels: list[Channel], cores: list[CoreActor]) -> None:
    """A lock's tokens are anonymous, so two rules keep every count meaning one thing, whatever order a run's
    schedule happens to give the agents (docs/shared_l1.md 3.2, the two protocols that race):
    - one acquiring agent (a DMA channel or a core) per lock: where two acquire one lock the faster can loop back
      and take the slower's token of an earlier fill (why a shared buffer has a relay lock rather than its DMA
      releasing full once per reader);
    - a lock released by several agents gates one buffer: else one reader's release of the pong lets the DMA
      refill the ping that another has not read (why each shared buffer has its own empty lock).
    mlir-aie's ObjectFifo lowering keeps both: each lock has one acquirer and one releaser."""
    acquirers: dict[int, str] = {}
    releasers: dict[int, set[str]] = {}
    gated: dict[int, set[str]] = {}
    named: dict[int, Lock] = {}

    def note(who: str, acquired: list[Lock], released: list[Lock]) -> None:
        for lock in acquired:
            first = acquirers.setdefault(id(lock), who)
            if first != who:
                raise SimulationError(f"{first} and {who} both acquire {lock.name}: its tokens are anonymous, so "
                                      f"the faster can take the slower's", "give each reader of a shared buffer its "
                                      "own lock: the leader acquires full and releases relay, the follower relay")
        for lock in released:
            releasers.setdefault(id(lock), set()).add(who)
            named[id(lock)] = lock

    for ch in channels:
        note(ch.describe(), [bd.acquire for bd in ch.bds if bd.acquire is not None],
             [bd.release for bd in ch.bds if bd.release is not None])
        for bd in ch.bds:
            if bd.acquire is not None:
                gated.setdefault(id(bd.acquire), set()).add(bd.buffer.name)
    for core in cores:
        for end in core.ends.values():
            if end.slots is None:
                note(str(core.tile), [end.acquire_lock], [end.release_lock])
            else:
                note(str(core.tile), [s.take for s in end.slots],
                     [lk for s in end.slots for lk in (s.relay, s.empty) if lk is not None])
    for key, who in releasers.items():
        buffers = gated.get(key, set())
        if len(who) > 1 and len(buffers) > 1:
            raise SimulationError(f"{', '.join(sorted(who))} all release {named[key].name}, which gates "
                                  f"{', '.join(sorted(buffers))}: one reader's release of one buffer lets its DMA "
                                  f"refill another that a reader still needs", "give each shared buffer its own "
                                  "empty lock")


def holder_bd(buf: Buffer, idx: np.ndarray, empty: Lock, full: Lock, readers: int, label: str) -> Bd:
    """The holder's S2MM BD for one shared buffer (docs/shared_l1.md 3.2): it waits until every reader has released
    the buffer (acquire-greater-equal the reader count on empty), writes the object, releases full by one (for the
    leader alone: the follower waits on the leader's relay)."""
    return Bd(buf, idx, empty, full, label, acquire_count=readers, release_count=1)


def reader_slot(sb: SharedBuffer, reader: TileRef, empty: Lock, full: Lock, relay: Lock) -> SharedSlot:
    """How `reader` takes a shared buffer's object (docs/shared_l1.md 3.2): the leader (the first reader) acquires
    full and releases relay, the follower acquires relay; both release empty after their last read."""
    leader = reader == sb.readers[0]
    return SharedSlot(full if leader else relay, relay if leader else None, empty)


def command_processor(d: Design, runtime: tuple[RuntimeOp, ...], dram: dict[str, np.ndarray],
                      shim_channel: dict[str, Channel], rtps: dict[tuple[TileRef, str], Buffer],
                      barriers: dict[tuple[TileRef, str], Barrier] | None = None) -> CommandProcessor:
    """The command processor running one call's runtime sequence over that call's DRAM buffers."""
    barriers = barriers or {}
    barrier_of = {b.tile: b for b in barriers.values()}  # a core's barrier stamps its parameter writes
    base: dict[tuple[tuple[int, ...], tuple[int, ...], str], tuple[np.ndarray, int]] = {}
    tasks: dict[str, Task] = {}
    groups: dict[int, list[Task]] = {}
    steps: list[Step] = []
    for op in runtime:
        if op.op == "rtp":
            write = op.rtp
            assert write is not None
            target = _worker_own(rtps, write.tile, write.buffer, "writes", "runtime-parameter buffer",
                                 "declare it with rtp=True")
            if not 0 <= write.index < target.cells.size:
                raise OutOfRangeError(f"runtime parameter {write.index} of {write.buffer} (it holds "
                                      f"{target.cells.size})", "write inside the buffer")
            steps.append(Step("write", None, buffer=target, index=write.index, value=write.value,
                              barrier=barrier_of.get(write.tile)))
            continue
        if op.op == "barrier":
            bset = op.barrier
            assert bset is not None
            barrier = _worker_own(barriers, bset.tile, bset.barrier, "sets", "runtime barrier",
                                  "give the worker its barrier")
            steps.append(Step("set", None, barrier=barrier, value=bset.value))
            continue
        if op.op == "task":
            spec = op.task
            assert spec is not None
            t = dtype(d.tensor(spec.tensor).dtype)
            key = (spec.tap.sizes, spec.tap.strides, t.name)
            if key not in base:
                idx = Tap(0, spec.tap.sizes, spec.tap.strides).to_words(t).indices()
                idx.setflags(write=False)
                base[key] = (idx, int(idx.max()))
            idx, top = base[key]
            cells = dram[spec.tensor]
            if t.unit_nbytes(spec.tap.offset) % 4:
                raise OutOfRangeError(f"task {spec.name} starts at element {spec.tap.offset}, not on a "
                                      f"32-bit word", "align the shim tap's offset to 4 bytes")
            first = t.unit_nbytes(spec.tap.offset) // 4
            if first + top >= cells.size:
                raise OutOfRangeError(f"task {spec.name} reaches word {first + top} of {spec.tensor} "
                                      f"({cells.size} words)", "fix the shim tap")
            task = Task(spec, cells, idx, first)
            tasks[spec.name] = task
            groups.setdefault(op.group, []).append(task)
            channel = shim_channel.get(spec.fifo)
            if channel is None or channel.tile != spec.shim:
                raise SimulationError(f"task {spec.name} targets {spec.fifo} on {spec.shim}, which has no "
                                      f"shim end there", "place the task on the fifo's shim")
            steps.append(Step("push", task, channel))
        else:
            group = groups.pop(op.group, [])
            steps.extend(Step("await", t) for t in group if t.spec.wait)
            steps.extend(Step("free", t) for t in group)
    if groups:
        raise SimulationError(f"task groups {sorted(groups)} are never finished", "finish every task group")
    return CommandProcessor(steps, d.config.dev.dma[TileKind.SHIM].bds)

def _worker_own(owned: dict[tuple[TileRef, str], T], tile: TileRef, name: str, verb: str, what: str, fix: str) -> T:
    """A worker's own part the runtime sequence reaches (its parameter buffer, its barrier), by tile and name."""
    found = owned.get((tile, name))
    if found is None:
        raise SimulationError(f"the runtime sequence {verb} {name} on {tile}, which is no {what} of a worker there",
                              fix)
    return found


def _elems(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _acquired(ops: tuple[Op, ...]) -> set[str]:
    names: set[str] = set()
    for op in ops:
        if isinstance(op, Acquire):
            names.add(op.fifo)
        elif isinstance(op, Loop):
            names |= _acquired(op.body)
    return names


def lower(design: Design, dram: dict[str, np.ndarray], kernel: KernelEmulator,
          runtime: tuple[RuntimeOp, ...] | None = None) -> Machine:
    """The array running `design`, its command processor set up for one call's runtime sequence
    (default: the design's own)."""
    return _MachineLowering(design, dram).lower(kernel, design.runtime if runtime is None else runtime)


def _marked(idx: np.ndarray) -> np.ndarray:
    """A mask of the words idx names (fewer set than idx has entries: some named twice); a pass, not a sort."""
    mask = np.zeros(int(idx.max(initial=-1)) + 1, bool)
    mask[idx] = True
    return mask
