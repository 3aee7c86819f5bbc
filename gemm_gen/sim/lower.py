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

from ..design.channels import dma_channels
from ..design.ir import Acquire, Design, Loop, ObjectFifo, Op, RuntimeOp, TileRef
from ..design.tap import Tap
from ..facts.devices import TileKind
from ..facts.dtypes import dtype
from ..facts.errors import BdExhaustionError, ConfigError, LayoutError, OutOfRangeError, SimulationError
from ..spec.config import GemmConfig
from ..spec.rules import shared_l1
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
                locks[id(bd.acquire)], locks[id(bd.release)] = bd.acquire, bd.release
                buffers[id(bd.buffer)] = bd.buffer
        for core in self.cores:
            for end in core.ends.values():
                ends[id(end)] = end
                locks[id(end.acquire_lock)], locks[id(end.release_lock)] = end.acquire_lock, end.release_lock
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
            core.gen.close()  # first: a closing interpreter writes back its own program counter
            core.pc, core.at_start, core.synced, core.passes = pc, at_start, synced, passes
            core.loops[:] = loops
            core.ready = None
            core.gen = core._run()  # noqa: SLF001 - a fresh interpreter at the same instruction: it re-checks its wait
            core.call_kernel = core._call  # noqa: SLF001 - the literal emulator takes the cells

    def next_call(self, runtime: tuple[RuntimeOp, ...], dram: dict[str, np.ndarray], kernel: KernelEmulator) -> None:
        """Start another call on the same array: a new runtime sequence over new DRAM buffers;
        cores, locks, L1 and memtile buffers carry on as they are (one xclbin, many runs)."""
        self.dram, self.kernel = dram, kernel
        for core in self.cores:
            core.kernel = kernel
            core.call_kernel = core._call  # noqa: SLF001 - the literal emulator takes the cells
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
        unbuilt = shared_l1.not_built(design.config.array.share_l1, "the simulator")
        if unbuilt is not None:
            raise ConfigError(*unbuilt)
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
        if writes and np.unique(idx).size != idx.size:
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

    # ---- the whole design ------------------------------------------------------------------
    def lower(self, kernel: KernelEmulator, runtime: tuple[RuntimeOp, ...]) -> Machine:
        d = self.d
        for link in d.links:
            self.link(link.kind, link.tile, [d.fifo(n) for n in link.srcs], [d.fifo(n) for n in link.dsts],
                      link.offsets)
        streams = []
        for f in d.fifos:
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
        cmd = command_processor(d, runtime, self.dram, self.shim_channel, rtps, barriers)
        return Machine(self.c, streams, cores, cmd, self.channels, self.fifo_ends, self.dram, kernel, d,
                       self.shim_channel, rtps, barriers)


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
