"""The fast simulator's machine: the literal one's actors and schedule, moving contents instead of cells.

It runs on the literal machine's own parts (sim/lower.py: the same locks, fifo ends, buffers, BDs, command
processor and cores, with every static check that lowering makes), in the literal schedule (sim/run.py's
run_machine: the command processor, then every stream, then every core, until nothing moves), with the same
lock, queue, BD and barrier rules. What differs is what a transfer carries: not 64-bit cells but a content
(sim/contents.py), so that a DMA run costs a dictionary lookup instead of a gather and a scatter, and what a
kernel call does: it is recorded (`Recorder`), and sim/bulk.py checks every record's provenance and computes
the numerics of all calls at once.

Anything the literal run would refuse (a deadlock, a busy channel at the end, a queue overflow, an exhausted BD
pool, a read of a region while it is being written, a call the recorder cannot follow) stops the fast run with
NotProven or the literal error itself; the caller then runs the call literally, whose error is the answer.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Callable

import numpy as np

from ..design.ir import Design, RuntimeOp, TileRef
from ..facts.errors import GemmGenError
from . import words as w
from .contents import CALLED, CARRIED, CONVERT, FIELDS, HANDLE, MATMUL, ORIGIN, TASK, ZERO, Keys, NotProven
from .kernel import KernelEmulator
from .loops import LoopPeriods
from .lower import Machine, command_processor
from .machine import CALL, Bd, Buffer, Call, Channel, CommandProcessor, CoreActor, Task
from .period import Periods


class Region:
    """A run of a buffer's words that one S2MM BD fills whole (a slice of a memtile object, an L1 object), or
    the whole of a buffer only kernels write: what it holds now, and whether a fill is in flight."""

    __slots__ = ("base", "buffer", "filling", "key", "off", "size")

    def __init__(self, buffer: Buffer, off: int, size: int, key: int) -> None:
        self.buffer, self.off, self.size = buffer, off, size
        self.key, self.base = key, 0
        self.filling = False


class LeanBd:
    __slots__ = ("acquire", "fills", "idx", "length", "reads", "region", "release")

    def __init__(self, bd: Bd, region: Region, keys: Keys) -> None:
        if bd.acquire is None or bd.release is None or (bd.acquire_count, bd.release_count) != (1, 1):
            # shared L1's BDs (a chain sharing one lock pair, an acquire by the reader count): this machine moves
            # ObjectFifo BDs only
            raise NotProven(f"{bd.label}: a BD whose locks are not one acquire and one release of 1")
        self.acquire, self.release = bd.acquire, bd.release
        self.region = region
        self.idx = keys.array(bd.idx)
        self.length = len(bd.idx)
        self.reads: dict[int, int] = {}  # region key -> key of the words this BD reads from it
        self.fills: dict[int, int] = {}  # sequence key -> key of the region this BD fills from it whole


class LeanChannel:
    """A DMA channel of the fast machine (the literal Channel's state, carried back after each call)."""

    __slots__ = ("active", "base", "bd", "bds", "ch", "cur", "drain", "length", "mm2s", "pieces", "pos", "queue",
                 "seq", "task", "words")

    def __init__(self, ch: Channel, bds: list[LeanBd]) -> None:
        self.ch, self.mm2s, self.bds = ch, ch.mm2s, bds
        self.queue: deque[Task] | None = ch.queue
        self.cur, self.active = ch.cur, ch.active
        if self.active:
            raise NotProven(f"{ch.describe()} is in the middle of a BD")
        self.pos = self.length = self.words = 0
        self.seq = self.base = 0
        self.bd: LeanBd | None = None
        self.task: Task | None = None
        self.pieces: list[tuple[int, int, int, int]] = []
        self.drain: list = []  # a shim S2MM's DRAM writes: (sequence, base, task, run offset, run length)


class LeanStream:
    def __init__(self, src: LeanChannel, dsts: list[LeanChannel], flow: Flow) -> None:
        self.src, self.dsts, self.flow = src, dsts, flow

    def step(self) -> bool:
        src, dsts, flow = self.src, self.dsts, self.flow
        moved = False
        while True:
            # a channel that cannot start is the usual case: its BD's lock (or its empty queue) read here, without
            # a call (the streams are stepped every round)
            if not src.active and ((src.bds[src.cur].acquire.value < 1 if src.queue is None else not src.queue)
                                   or not flow.start(src)):
                return moved
            for d in dsts:
                if not d.active and ((d.bds[d.cur].acquire.value < 1 if d.queue is None else not d.queue)
                                     or not flow.start(d)):
                    return moved
            run = src.length - src.pos
            for d in dsts:
                if d.length - d.pos < run:
                    run = d.length - d.pos
            if src.pos == 0 and run == src.length:
                seq, base = src.seq, src.base
            else:
                seq, base = flow.part(src.seq, src.pos, run, src.base)
            for d in dsts:
                if d.queue is not None:  # a shim S2MM: the words land in DRAM
                    d.drain.append((seq, base, d.task, d.pos, run))
                else:
                    d.pieces.append((seq, d.pos, run, base))
                d.pos += run
                d.words += run
                if d.pos == d.length:
                    flow.finish(d)
            src.pos += run
            src.words += run
            if src.pos == src.length:
                flow.finish(src)
            moved = True


class Flow:
    """The fast machine over a lowered literal Machine: lean channels and streams, the literal command processor
    and cores (whose kernel is a Recorder), contents per region."""

    def __init__(self, machine: Machine, kernel: KernelEmulator, keys: Keys) -> None:
        self.m, self.keys = machine, keys
        self.regions: dict[int, list[Region]] = {}  # id(buffer) -> its regions, by offset
        self.whole: dict[int, Region] = {}  # id(buffer.cells) -> the region of a whole buffer (kernel arguments)
        self.channels: dict[int, LeanChannel] = {}
        for ch in machine.channels:
            self.channels[id(ch)] = LeanChannel(ch, [])
        for ch in machine.channels:  # S2MM regions first: they say how a buffer is cut
            if not ch.mm2s:
                self.channels[id(ch)].bds = [LeanBd(bd, self._fill_region(bd), keys) for bd in ch.bds]
        for ch in machine.channels:
            if ch.mm2s:
                self.channels[id(ch)].bds = [LeanBd(bd, self._read_region(bd), keys) for bd in ch.bds]
        self.streams = [LeanStream(self.channels[id(s.src)], [self.channels[id(d)] for d in s.dsts], self)
                        for s in machine.streams]
        self.recorder = Recorder(self, kernel)
        self.skipping = True  # repeat periods of task groups (sim/period.py) and cycles inside them (sim/loops.py)
        self.skipped = 0  # groups skipped in the last call
        self.skipped_total = 0  # and in every call so far
        self.cycles = 0  # cycles of rounds inside a group repeated in the last call (sim/loops.py)
        self.cycles_total = 0  # and in every call so far
        self.periodic: dict[tuple[int, int, int, int], int] = {}  # sim/loops.py's reads that repeat, per question
        self.dram_keys: dict[tuple[int, str], int] = {}
        self.parts: dict[tuple[int, int, int], tuple[int, int]] = {}  # (sequence, pos, run) -> (key, base shift)
        self.first_part: dict[tuple[int, int], tuple[int, int]] = {}  # (sequence, run) -> (pos, key) seen first

    # ---- runs of a sequence ------------------------------------------------------------------------------
    def part(self, seq: int, pos: int, run: int, base: int) -> tuple[int, int]:
        """The key and base of words pos..pos+run of a sequence: the key of the first run of that length seen in
        it, with the base moved, where this run is that one's translate (the same tags, ids a constant apart), so
        that the same transfer on other words (the next k-step's tile) has the same key; else a key of its own."""
        got = self.parts.get((seq, pos, run))
        if got is None:
            got = self.parts[(seq, pos, run)] = self._part(seq, pos, run)
        key, shift = got
        if shift and base >= HANDLE:  # a C tile's handle is no word offset: its runs keep keys of their own
            key, shift = self.keys(("part", seq, pos, run)), 0
        return key, base + shift

    def _part(self, seq: int, pos: int, run: int) -> tuple[int, int]:
        first = self.first_part.get((seq, run))
        if first is None:
            key = self.keys(("part", seq, pos, run))
            self.first_part[(seq, run)] = (pos, key)
            return key, 0
        at, key = first
        tags, ids = self.keys.provenance(seq)
        if np.array_equal(tags[pos:pos + run], tags[at:at + run]):
            tagged = tags[at:at + run] != w.TAG_NONE
            diff = ids[pos:pos + run][tagged] - ids[at:at + run][tagged]
            untagged_same = np.array_equal(ids[pos:pos + run][~tagged], ids[at:at + run][~tagged])
            if untagged_same and (diff.size == 0 or (diff == diff[0]).all()):
                return key, int(diff[0]) if diff.size else 0
        return self.keys(("part", seq, pos, run)), 0

    # ---- regions -----------------------------------------------------------------------------------------
    def _region(self, buffer: Buffer, off: int, size: int) -> Region:
        regions = self.regions.setdefault(id(buffer), [])
        for r in regions:
            if (r.off, r.size) == (off, size):
                return r
            if r.off < off + size and off < r.off + r.size:
                raise NotProven(f"{buffer.name}: S2MM BDs fill overlapping runs")
        r = Region(buffer, off, size, self.keys.zero(size))
        regions.append(r)
        if (off, size) == (0, buffer.cells.size):
            self.whole[id(buffer.cells)] = r
        return r

    def _fill_region(self, bd: Bd) -> Region:
        # lowering made each S2MM pattern a bijection onto its slice (no word twice, as many as the slice holds)
        return self._region(bd.buffer, int(bd.idx.min()), len(bd.idx))

    def _read_region(self, bd: Bd) -> Region:
        lo, hi = int(bd.idx.min()), int(bd.idx.max()) + 1
        for r in self.regions.get(id(bd.buffer), []):
            if r.off <= lo and hi <= r.off + r.size:
                return r
        if id(bd.buffer) in self.regions:
            raise NotProven(f"an MM2S BD of {bd.buffer.name} reads across the runs its S2MM BDs fill")
        return self._region(bd.buffer, 0, bd.buffer.cells.size)  # a buffer only kernels write

    def region_of(self, cells: np.ndarray) -> Region:
        """The whole-buffer region of a kernel argument (an L1 object or a worker's own buffer)."""
        r = self.whole.get(id(cells))
        if r is None:
            raise NotProven("a kernel argument is not one whole region")
        return r

    # ---- channels ----------------------------------------------------------------------------------------
    def start(self, ch: LeanChannel) -> bool:
        """As Channel.start: the next pushed task (shim) or the next BD once its lock allows."""
        if ch.queue is not None:
            if not ch.queue:
                return False
            task = ch.queue[0]
            ch.task, ch.length = task, len(task.base)
            if ch.mm2s:
                ch.seq, ch.base = self._dram_key(task), (self.task_index[id(task)] << TASK) + ORIGIN
        else:
            bd = ch.bds[ch.cur]
            if bd.acquire.value < 1:
                return False
            bd.acquire.value -= 1
            ch.bd, ch.length = bd, bd.length
            r = bd.region
            if r.filling:
                raise NotProven(f"{r.buffer.name} is read or filled while another BD fills it")
            if ch.mm2s:
                seq = bd.reads.get(r.key)
                if seq is None:
                    if self.keys.is_stale(r.key):
                        raise NotProven(f"{r.buffer.name} is read before this call filled it")
                    seq = bd.reads[r.key] = self.keys(("read", r.key, bd.idx, r.off))
                ch.seq, ch.base = seq, r.base
            else:
                r.filling = True
                ch.pieces = []
        ch.pos = 0
        ch.active = True
        return True

    def _dram_key(self, task: Task) -> int:
        key = (id(task.base), task.spec.tensor)
        got = self.dram_keys.get(key)
        if got is None:
            tag = {"A": w.TAG_A, "B": w.TAG_B}.get(task.spec.tensor)
            if tag is None:
                raise NotProven(f"task {task.spec.name} reads {task.spec.tensor}")
            got = self.dram_keys[key] = self.keys(("dram", tag, self.keys.array(task.base)))
        return got

    def finish(self, ch: LeanChannel) -> None:
        if ch.queue is not None:
            ch.queue.popleft().done = True
        else:
            bd = ch.bd
            assert bd is not None
            bd.release.value += 1
            ch.cur = (ch.cur + 1) % len(ch.bds)
            if not ch.mm2s:  # the region this S2MM BD filled now holds its pieces
                r, pieces = bd.region, ch.pieces
                r.filling = False
                if len(pieces) == 1:  # one run of one sequence: the usual fill (inline: it runs once per tile moved)
                    seq, _, run, base = pieces[0]
                    key = bd.fills.get(seq)
                    if key is None:
                        key = bd.fills[seq] = self.keys(("fill", bd.idx, r.off, r.size, ((seq, 0, run, 0),)))
                    r.key, r.base = key, base
                else:
                    self._commit(bd, pieces)
        ch.active = False

    def _commit(self, bd: LeanBd, pieces: list[tuple[int, int, int, int]]) -> None:
        """The key of a region filled from several runs."""
        r = bd.region
        base = pieces[0][3]
        if any(p[3] != base for p in pieces) and any(p[3] >= HANDLE for p in pieces):
            raise NotProven(f"{r.buffer.name} is filled from several C tiles in one BD")
        if any(p[3] >> TASK != base >> TASK for p in pieces):
            self.cross_tasks += 1  # ids a data-dependent distance apart (sim/period.py does not repeat it)
        origin = self.word(base)
        key = self.keys(("fill", bd.idx, r.off, r.size,
                         tuple((s, d, n, self.word(b) - origin) for s, d, n, b in pieces)))
        r.key, r.base = key, base

    # ---- one call --------------------------------------------------------------------------------------
    def run(self, runtime: tuple[RuntimeOp, ...], dram: dict[str, np.ndarray], design: Design,
            progress: object | None = None) -> CommandProcessor:
        """Run one call's sequence (the literal command processor over stand-in DRAM buffers of the right
        sizes) until nothing moves; NotProven unless it ends as the literal run must (sequence done, every
        channel idle, every object consumed)."""
        m = self.m
        cmd = command_processor(design, runtime, dram, m.shim_channels, m.rtps, m.barriers)
        m.cmd, m.dram = cmd, dram
        tasks = [step.task for step in cmd.steps if step.kind == "push" and step.task is not None]
        self.task_index = {id(t): i for i, t in enumerate(tasks)}
        self.firsts = [t.first for t in tasks]
        self.cross_tasks = 0
        periods = Periods(self, cmd, m.cores, tasks) if self.skipping else None
        loops = LoopPeriods(self, cmd, m.cores, periods.locks) if periods is not None else None  # one lock list
        for lean in self.channels.values():  # a literal call may have run in between
            lean.cur, lean.words = lean.ch.cur, 0
        actors: list = [cmd, *self.streams, *m.cores]
        self.recorder.begin()
        try:
            while True:
                if periods is not None and loops is not None:
                    skipped = periods.skipped
                    periods.round()
                    if periods.skipped != skipped:
                        loops.snaps.clear()  # the machine jumped: the anchor's returns so far are of another state
                    loops.round()
                progressed = False
                for actor in actors:
                    if actor.step():
                        progressed = True
                if progress is not None:
                    progress.update(self.recorder.matmuls - progress.n)  # type: ignore[attr-defined]
                if not progressed:
                    break
        except GemmGenError as e:  # the literal run stops at the same place with the same error
            raise NotProven(str(e)) from e
        self.skipped = periods.skipped if periods is not None else 0
        self.skipped_total += self.skipped
        self.cycles = loops.cycles if loops is not None else 0
        self.cycles_total += self.cycles
        if not cmd.done:
            raise NotProven("deadlock")
        for lean in self.channels.values():
            lean.ch.cur, lean.ch.words = lean.cur, lean.words
            if lean.active or (lean.queue is not None and lean.queue):
                raise NotProven(f"{lean.ch.describe()} is still busy")
        for _, _, cons in m.fifo_ends:
            if cons.value:
                raise NotProven("an object was never consumed")
        return cmd

    def end_call(self) -> None:
        """Contents this call left are stale for the next (its DRAM is another)."""
        for regions in self.regions.values():
            for r in regions:
                if r.base < HANDLE and not self.keys.defs[r.key][0] == "zero":
                    r.key, r.base = self.keys(("stale", r.size)), 0

    def word(self, base: int) -> int:
        """The word offset a task base stands for (a handle stands for itself)."""
        return base if base >= HANDLE else self.firsts[base >> TASK] + (base & (ORIGIN * 2 - 1)) - ORIGIN

    def words(self, bases: np.ndarray) -> np.ndarray:
        """word() of task bases, array-wise."""
        firsts = np.asarray(self.firsts, np.int64)
        return firsts[bases >> TASK] + (bases & (ORIGIN * 2 - 1)) - ORIGIN

    def drains(self) -> list:
        return [piece for lean in self.channels.values() for piece in lean.drain]

    def clear_drains(self) -> None:
        for lean in self.channels.values():
            lean.drain = []


class Recorder:
    """The cores' kernel in the fast machine: one record per call (sim/bulk.py checks and computes them), the
    C object's content as the kernel leaves it, and the literal emulator's checks where they are cheap. Each core
    calls it through the function `bind` puts in each CALL instruction, which resolves its arguments once."""

    def __init__(self, flow: Flow, kernel: KernelEmulator) -> None:
        self.flow = flow
        self.regions = {id(r.buffer): r for r in flow.whole.values()}  # a buffer's whole region, by buffer
        self.use(kernel, 0)
        self.tables: dict[tuple[int, int], object] = {}
        self.begin()

    def use(self, kernel: KernelEmulator, epoch: int) -> None:
        """The emulator of the call about to run (its C views name the C keys of this epoch)."""
        self.kernel, self.roles, self.c, self.epoch = kernel, kernel.roles, kernel.c, epoch
        c = self.c
        self.converts = kernel.p.converts_c
        # the matmul's arguments (design/build.py kernel_specs): A, B, C, then the scratch buffers, the C acc rows
        # and W4A16's dequantization buffer, as the emulator unpacks them
        spec = next(s for s in kernel.design.kernels if s.role == "matmul")
        self.matmul_args = len(spec.arg_shapes)
        self.acc_at = 0
        if self.converts:
            self.acc_at = self.matmul_args - 1 - (1 if c.groups.group_size and not c.kernel.convert_once else 0)
        self.slices: dict[tuple[int, bool, int], int] = {}
        keys = self.flow.keys
        self.zeros = {k for d, k in keys.ids.items() if d[0] == "zero"}
        self.stale = {k for d, k in keys.ids.items() if d[0] == "stale"}

    def begin(self) -> None:
        """A new call's records. A core that zeroed its next C object in the previous call (it runs its program
        on until it waits for data) starts this one inside that tile: a CARRIED row stands for its zero."""
        self.rows = array("q")
        self.handles = 0
        self.matmuls = 0
        current = getattr(self, "current", {})
        self.current: dict[int, tuple[int, int, int]] = {}  # core -> (handle, id(C buffer), id(acc buffer))
        for core, (_, c_id, acc_id) in current.items():
            self._zeroed(core, c_id, acc_id, CARRIED)

    def _zeroed(self, core: int, c_id: int, acc_id: int, how: int) -> None:
        handle = HANDLE + self.handles
        self.handles += 1
        self.current[core] = (handle, c_id, acc_id)
        self.rows.extend((ZERO, core, handle, how, 0, 0, 0, 0))

    def bind(self, actor: CoreActor, core: int) -> None:
        """The core's kernel calls: each CALL instruction's arguments (fifo ends or the core's own buffers), role
        and constant scalars, looked up at its first call into a function of its own that the instruction then
        carries."""

        def kernel_of(pc: int, op: Call) -> Callable[[Call], None]:
            def first(op: Call) -> None:
                plan = self._plan(actor, core, op)
                actor.code[pc] = (CALL, op, plan)
                plan(op)

            return first

        actor.bind_calls(kernel_of)

    def _plan(self, actor: CoreActor, core: int, op: Call) -> Callable[[Call], None]:
        # each argument's source: the held objects of its fifo end (a deque) or the core's own buffer (a 1-tuple),
        # so that src[0] is the buffer the call takes and an empty source means the core holds nothing there
        srcs = tuple((actor.buffers[n],) if n in actor.buffers else actor.ends[n].held for n in op.args)
        ints = tuple(x for x in op.scalars if isinstance(x, int))
        fixed = ints if len(ints) == len(op.scalars) else None
        role = self.roles.get(op.kernel)
        if role == "matmul":
            return self._matmul_call(actor, core, srcs, fixed)
        if role == "zero":
            handler: Callable[..., None] = lambda bufs, scalars: self._zero(core, bufs)  # noqa: E731
        elif role == "convert":
            handler = lambda bufs, scalars: self._convert(actor.tile, core, bufs, scalars)  # noqa: E731
        else:
            raise NotProven(f"{actor.tile} calls {op.kernel}, which is none of the design's kernels")

        def call(op: Call) -> None:
            if not all(srcs):
                raise NotProven(f"{actor.tile} calls {op.kernel} without holding an argument")
            handler([s[0] for s in srcs], fixed if fixed is not None else _scalars(actor, op))

        return call

    def _matmul_call(self, actor: CoreActor, core: int, srcs: tuple, fixed: tuple[int, ...] | None
                     ) -> Callable[[Call], None]:
        """A matmul call: its checks and its record. It runs once per kernel call (tens of thousands per GEMM
        call), so its lookups are hoisted out of it and it is one function rather than a chain of them."""
        if len(srcs) != self.matmul_args:
            def other(op: Call) -> None:
                if not all(srcs):
                    raise NotProven(f"{actor.tile} calls {op.kernel} without holding an argument")
                raise NotProven("a matmul call with other arguments than the design's")
            return other
        a_src, b_src, c_src = srcs[0], srcs[1], srcs[2]
        helds = tuple(s for s in srcs if isinstance(s, deque))  # the fifo ends' (a core's own buffer is always there)
        acc_src = srcs[self.acc_at] if self.acc_at else None
        regions = self.regions
        const_slice = (fixed[0] if fixed else 0) if fixed is not None else -1

        def call(op: Call) -> None:
            if not all(helds):
                raise NotProven(f"{actor.tile} calls {op.kernel} without holding an argument")
            c_slice = const_slice
            if fixed is None:
                scalars = _scalars(actor, op)
                c_slice = scalars[0] if scalars else 0
            got = self.current.get(core)
            c_id = id(c_src[0])
            if got is None or got[1] != c_id or (acc_src is not None and got[2] != id(acc_src[0])):
                raise NotProven("a call on a C object its core did not zero")
            a, b = regions.get(id(a_src[0])), regions.get(id(b_src[0]))
            stale = self.stale
            if a is None or b is None or a.filling or b.filling or a.key in stale or b.key in stale:
                raise NotProven("a kernel reads an operand while it is filled, or before this call filled it")
            region = regions[c_id]
            handle = got[0]
            if self.converts:  # the accumulator carries no provenance: C's cells stay as the zero call left them
                if region.key not in self.zeros:
                    raise NotProven("a matmul accumulates into a C object that holds C")
            else:  # this slice of C's rows now holds C, with the provenance of this tile (sim/bulk.py: c_provenance)
                key = self.slices.get((region.key, region.base == handle, c_slice))
                if key is None:
                    key = self._slice_key(region, handle, c_slice)
                region.key, region.base = key, handle
            self.rows.extend((MATMUL, core, handle, c_slice, a.key, a.base, b.key, b.base))
            self.matmuls += 1

        return call

    def _zero(self, core: int, bufs: list[Buffer]) -> None:
        for b in bufs:  # as the kernel does: the state a literal call after this one starts from
            b.cells[:] = 0
            region = self.regions.get(id(b))
            if region is not None:
                region.key, region.base = self.flow.keys.zero(region.size), 0
        self._zeroed(core, id(bufs[0]), id(bufs[1]) if len(bufs) > 1 else 0, CALLED)

    def _input(self, b: Buffer) -> Region:
        r = self.regions.get(id(b))
        if r is None or r.filling or r.key in self.stale:
            raise NotProven(f"a kernel reads {b.name} while it is filled, or before this call filled it")
        return r

    def _slice_key(self, region: Region, handle: int, c_slice: int) -> int:
        keys = self.flow.keys
        if not 0 <= c_slice < self.c.tiling.rho:
            raise NotProven("a C slice outside the object")
        d = keys.defs[region.key]
        if d[0] == "zero":
            mask = 0
        elif d[0] == "kernel" and d[1] == "slices" and region.base == handle:
            mask = d[3]
        else:
            raise NotProven("a C object holds another tile's slices")
        key = keys(("kernel", "slices", region.size, mask | 1 << c_slice, self.epoch))
        self.slices[(region.key, region.base == handle, c_slice)] = key
        return key

    def _convert(self, tile: TileRef, core: int, bufs: list[Buffer], scalars: tuple[int, ...]) -> None:
        c, k = self.c, self.kernel
        if len(bufs) < 2:
            raise NotProven("a convert call without its arguments")
        got = self.current.get(core)
        if got is None or got[1] != id(bufs[0]) or got[2] != id(bufs[1]):
            raise NotProven("a call on a C object its core did not zero")
        rest = bufs[2:]
        b_key = b_base = -1
        if c.epilogue.needs_tile:
            if not rest:
                raise NotProven("a convert call without its epilogue tile")
            b = self._input(rest.pop(0))
            b_key, b_base = b.key, b.base
        if c.epilogue.uses_tanh:  # the literal check, once per pair of buffers (nothing writes them after)
            if len(rest) < 2:
                raise NotProven("a convert call without its tanh table")
            pair = (id(rest[0]), id(rest[1]))
            if pair not in self.tables:
                self.tables[pair] = k._tanh_table(tile, (rest[0].cells, rest[1].cells))  # noqa: SLF001
        mode = scalars[0] if scalars else -1
        region = self.regions[id(bufs[0])]
        region.key, region.base = self.flow.keys(("kernel", "out", region.size, 0, self.epoch)), got[0]
        self.rows.extend((CONVERT, core, got[0], mode, b_key, b_base, 0, 0))

    def release(self) -> None:
        """Let the last call's records go (they were read)."""
        self.rows = array("q")

    def records(self) -> np.ndarray:
        return np.frombuffer(self.rows, dtype=np.int64).reshape(-1, FIELDS) if self.rows else \
            np.zeros((0, FIELDS), np.int64)


def _scalars(actor: CoreActor, op: Call) -> tuple[int, ...]:
    """A call's scalars, read now (a runtime parameter's word is read and checked at each call)."""
    return tuple(actor._word(x, f"{op.kernel} argument") for x in op.scalars)  # noqa: SLF001
