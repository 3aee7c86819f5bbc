"""Whole periods of task groups in the fast machine (sim/flow.py), repeated instead of run.

A call's runtime sequence issues one task group per output block (or span), and in its steady state the array
does the same thing for every group: the same locks, the same BDs, the same contents (sim/contents.py keys), only
on other tasks' data and into other output tiles. The machine is deterministic and its schedule fixed, so its
state at the start of a group, written relative to that group (tasks by their offset from its first task, bases by
the task they came from, C tiles' handles by their offset from the next one, the core's loop counters inside a
tile), decides everything it does next, given the ops that follow. When that relative state at group g_j equals
the one at an earlier g_i, and the next ops are the ones after g_i moved by (g_j - g_i) groups (the same kinds,
channels, task shapes and waits), the run from g_j repeats the run from g_i op for op: each repeat is recorded as
that period's kernel calls and drains moved onto its own tasks and tiles (sim/bulk.py then checks them all as it
checks any call), and the state jumps ahead by the periods (`Periods.skip`). A period stops short of any op that
is not such a copy (the last groups, a moved block, a parameter write) and of the end of a core's tile loop; the
machine then runs again until the end of the call. Where the state never repeats nothing is skipped.
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable
from typing import TYPE_CHECKING

import numpy as np

from .contents import CONVERT, FIELDS, HANDLE, MATMUL, ORIGIN, TASK, UNWRITTEN
from .machine import CALL, LOOP, CommandProcessor, CoreActor, Lock, Step, Task

if TYPE_CHECKING:  # annotations only: the machine imports this module
    from .flow import Flow, LeanChannel, Region

LOW = ORIGIN * 2 - 1  # a task base's offset bits


class Checkpoint:
    """The machine at the start of a group: its relative state and the counters that grow across groups."""

    def __init__(self, periods: Periods, group: int) -> None:
        f, cmd = periods.flow, periods.cmd
        self.group, self.pc, self.t0 = group, cmd.pc, periods.t0[group]
        self.handles, self.matmuls = f.recorder.handles, f.recorder.matmuls
        self.rows = len(f.recorder.rows) // FIELDS
        self.drains = [len(ch.drain) for ch in periods.channels]
        self.words = [ch.words for ch in periods.channels]
        self.passes = [core.passes for core in periods.cores]
        self.tiles = [periods.tile_loops(core) for core in periods.cores]
        self.cross = f.cross_tasks
        self.signature = periods.signature(self, cmd.pc - periods.pc_of[group])


class Periods:
    """Checkpoints at group boundaries of one call, and the skips they allow."""

    def __init__(self, flow: Flow, cmd: CommandProcessor, cores: list[CoreActor], tasks: list[Task]) -> None:
        self.flow, self.cmd, self.cores, self.tasks = flow, cmd, cores, tasks
        self.channels: list[LeanChannel] = list(flow.channels.values())
        self.regions: list[Region] = [r for rs in flow.regions.values() for r in rs]
        self.locks = _locks(flow)
        self.t0: dict[int, int] = {}
        for i, t in enumerate(tasks):
            self.t0.setdefault(t.spec.group, i)
        self.finish: list[tuple[int, int]] = []  # (first step of group g's finish, g), in step order
        seen: set[int] = set()
        for pc, step in enumerate(cmd.steps):
            if step.kind in ("await", "free") and step.task is not None and step.task.spec.group not in seen:
                seen.add(step.task.spec.group)
                self.finish.append((pc, step.task.spec.group))
        self.pc_of = {g: pc for pc, g in self.finish}
        self.next = 0  # index into self.finish of the next group boundary
        self.seen: dict[Hashable, Checkpoint] = {}
        # which loop of each core's program walks its output tiles (its body calls the zero kernel)
        self.tile_loop = [_tile_loops(core, flow.recorder.roles) for core in cores]
        self.skipped = 0  # groups skipped

    # ---- the state, relative to a group ----------------------------------------------------------------
    def tile_loops(self, core: CoreActor) -> list[int]:
        """The counters of the core's active loops that walk output tiles (they count down across groups)."""
        tiles = self.tile_loop[self.cores.index(core)]
        return [n for at, n in zip(_active(core), core.loops, strict=True) if at in tiles]

    def signature(self, cp: Checkpoint, pc: int) -> Hashable:
        """The state relative to checkpoint `cp`'s group (module docstring); `pc`: the sequence's step past the
        first of the group's finish."""
        f, cmd = self.flow, self.cmd
        index = f.task_index

        def task(t: Task | None) -> tuple[int, int, str, bool, bool] | None:
            if t is None:
                return None
            return (index[id(t)] - cp.t0, id(t.base), t.spec.tensor, t.spec.wait, t.done)

        def base(b: int) -> Hashable:
            if b >= HANDLE:
                return ("h", b - HANDLE - cp.handles)
            return ("t", (b >> TASK) - cp.t0, b & LOW)

        chans = []
        for ch in self.channels:
            state: tuple = (ch.cur, ch.active, ch.pos, ch.length)
            if ch.active:
                state += (ch.seq, base(ch.base) if ch.mm2s else None, id(ch.bd) if ch.queue is None else task(ch.task),
                          tuple((s, d, n, base(b)) for s, d, n, b in ch.pieces))
            if ch.queue is not None:
                state += (tuple(task(t) for t in ch.queue),)
            chans.append(state)
        regions = tuple((r.key, None if f.keys.defs[r.key][0] in UNWRITTEN else base(r.base), r.filling)
                        for r in self.regions)
        cores = []
        for core, tiles in zip(self.cores, self.tile_loop, strict=True):
            loops = tuple(n for at, n in zip(_active(core), core.loops, strict=True) if at not in tiles)
            ends = tuple((e.next, tuple(id(b) for b in e.held)) for e in core.ends.values())
            cores.append((core.pc, loops, core.at_start, core.synced, core.ready is None, ends))
        current = tuple(sorted((k, base(h), c, a) for k, (h, c, a) in f.recorder.current.items()))
        # which BD ids the live tasks hold is never seen (a free one is taken; the count is the limit): their tasks
        live = tuple(sorted((str(shim), tuple(sorted(task(t) or () for t in bds.values())))
                            for shim, bds in cmd.live.items()))
        unretired = tuple(cmd.unretired.get(id(ch.ch), 0) for ch in self.channels)
        barriers = tuple((b.value, b.sets) for b in f.m.barriers.values())
        return (pc, tuple(chans), regions, tuple(cores), current, live, unretired, barriers,
                tuple(lock.value for lock in self.locks))

    # ---- each round ------------------------------------------------------------------------------------
    def round(self) -> None:
        """At the start of a round: a checkpoint where the sequence entered the next group's finish, and the skip
        it allows."""
        cmd = self.cmd
        if self.next >= len(self.finish) or cmd.pc < self.finish[self.next][0]:
            return
        while self.next + 1 < len(self.finish) and cmd.pc >= self.finish[self.next + 1][0]:
            self.next += 1
        _, group = self.finish[self.next]
        self.next += 1
        if any(len(_active(core)) != len(core.loops) for core in self.cores):
            return
        cp = Checkpoint(self, group)
        earlier = self.seen.get(cp.signature)
        self.seen[cp.signature] = cp
        if earlier is not None and earlier.cross == cp.cross:
            self.skip(earlier, cp)

    def skip(self, a: Checkpoint, b: Checkpoint) -> None:
        """Repeat the period from checkpoint a to b as many times as the ops that follow b allow."""
        steps = self.cmd.steps
        span, tasks = b.pc - a.pc, b.t0 - a.t0
        if span <= 0 or tasks <= 0:
            return
        n = 0
        while b.pc + (n + 1) * span <= len(steps) and self._repeats(steps, a.pc, b.pc + n * span, span,
                                                                      (n + 1) * tasks):
            n += 1
        for tiles_a, tiles_b in zip(a.tiles, b.tiles, strict=True):  # stay inside every core's tile loop
            for x, y in zip(tiles_a, tiles_b, strict=True):
                step = x - y
                while n and step > 0 and y - n * step < step + 1:
                    n -= 1
        in_flight = [t for ch in self.channels for t in ([ch.task] if ch.task is not None and ch.active else [])
                     + list(ch.queue or [])] + [t for bds in self.cmd.live.values() for t in bds.values()]
        last = len(self.tasks)
        while n and any(self.flow.task_index[id(t)] + n * tasks >= last
                        or not _same_task(t, self.tasks[self.flow.task_index[id(t)] + n * tasks]) for t in in_flight):
            n -= 1
        if n:
            self._apply(a, b, n, span, tasks)

    def _repeats(self, steps: list[Step], ref: int, at: int, span: int, moved: int) -> bool:
        """Steps at..at+span are steps ref..ref+span on tasks `moved` places later."""
        index = self.flow.task_index
        for k in range(span):
            x, y = steps[ref + k], steps[at + k]
            if x.kind != y.kind or x.kind in ("write", "set") or x.channel is not y.channel:
                return False
            if x.task is None or y.task is None or index[id(y.task)] != index[id(x.task)] + moved:
                return False
            if not _same_task(x.task, y.task):
                return False
        return True

    def _apply(self, a: Checkpoint, b: Checkpoint, n: int, span: int, tasks: int) -> None:
        f, cmd, rec = self.flow, self.cmd, self.flow.recorder
        handles = b.handles - a.handles
        moved_tasks, moved_handles = n * tasks, n * handles
        index = f.task_index

        def task(t: Task) -> Task:
            return self.tasks[index[id(t)] + moved_tasks]

        def base(x: int, k: int = n) -> int:
            return x + k * handles if x >= HANDLE else x + ((k * tasks) << TASK)

        # the records of the skipped periods: period k's calls and drains are the reference's, k periods on
        ref = np.frombuffer(rec.rows, np.int64).reshape(-1, FIELDS)[a.rows:b.rows].copy()
        mm, cv = ref[:, 0] == MATMUL, (ref[:, 0] == CONVERT) & (ref[:, 5] != -1)
        moves = np.zeros(ref.shape, np.int64)  # per period: the handle, and the task bases of A and B
        moves[:, 2] = handles
        for col, rows_ in ((5, mm | cv), (7, mm)):
            moves[rows_, col] = np.where(ref[rows_, col] >= HANDLE, handles, tasks << TASK)
        copies = ref[None] + np.arange(1, n + 1)[:, None, None] * moves[None]
        rec.rows.extend(array("q", copies.reshape(-1).tobytes()))
        for ch, da, db, wa, wb in zip(self.channels, a.drains, b.drains, a.words, b.words, strict=True):
            drained = ch.drain[da:db]
            for k in range(1, n + 1):
                ch.drain.extend((seq, h + k * handles, self.tasks[index[id(t)] + k * tasks], at, run)
                                for seq, h, t, at, run in drained)
            ch.words += n * (wb - wa)
        # the state, n periods on
        # the tasks in flight move on: each takes the BD, channel and state of the one n periods before it (read
        # first: the two windows overlap when fewer groups are skipped than are in flight)
        flying = {id(t): t for bds in cmd.live.values() for t in bds.values()}
        flying.update((id(t), t) for ch in self.channels for t in list(ch.queue or []))
        states = [(task(t), t.bd_id, t.channel, t.done) for t in flying.values()]
        for t in self.tasks[:b.t0 + moved_tasks]:  # every task of the skipped groups ran
            t.done = True
        for new, bd_id, channel, done in states:
            new.bd_id, new.channel, new.done = bd_id, channel, done
        cmd.live = {shim: {bd: task(t) for bd, t in bds.items()} for shim, bds in cmd.live.items()}
        cmd.pc += n * span
        for ch in self.channels:
            if ch.queue is not None:
                queued = [task(t) for t in ch.queue]
                ch.queue.clear()
                ch.queue.extend(queued)
            if ch.active:
                if ch.task is not None:
                    ch.task = task(ch.task)
                ch.base = base(ch.base)
                ch.pieces = [(s, d, m, base(x)) for s, d, m, x in ch.pieces]
        for region in self.regions:
            if f.keys.defs[region.key][0] not in UNWRITTEN:
                region.base = base(region.base)
        rec.current = {k: (h + moved_handles, c, acc) for k, (h, c, acc) in rec.current.items()}
        rec.handles += moved_handles
        rec.matmuls += n * (b.matmuls - a.matmuls)
        for core, tiles, pa, pb, ta, tb in zip(self.cores, self.tile_loop, a.passes, b.passes, a.tiles, b.tiles,
                                               strict=True):
            core.passes += n * (pb - pa)
            deltas = iter(y - x for x, y in zip(ta, tb, strict=True))
            for i, at in enumerate(_active(core)):
                if at in tiles:
                    core.loops[i] += n * next(deltas)
        self.skipped += n * (b.group - a.group)
        self.next = next((i for i, (pc, _) in enumerate(self.finish) if pc > cmd.pc), len(self.finish))
        self.seen.clear()


def _same_task(x: Task, y: Task) -> bool:
    """Two tasks the machine treats alike: the same channel, walk shape, tensor, fifo and wait."""
    return (x.base is y.base and x.spec.tensor == y.spec.tensor and x.spec.fifo == y.spec.fifo
            and x.spec.wait == y.spec.wait and x.spec.shim == y.spec.shim)


def _active(core: CoreActor) -> list[int]:
    """The LOOP instructions the core is inside, outermost first (one per counter in core.loops)."""
    code, pc = core.code, core.pc
    return [i for i, ins in enumerate(code) if ins[0] == LOOP and i < pc < ins[2]]


def _tile_loops(core: CoreActor, roles: dict[str, str]) -> set[int]:
    """The LOOP instructions whose body calls the zero kernel: they walk output tiles."""
    code = core.code
    zeros = [i for i, ins in enumerate(code) if ins[0] == CALL and roles.get(ins[1].kernel) == "zero"]
    return {i for i, ins in enumerate(code) if ins[0] == LOOP and any(i < z < ins[2] for z in zeros)}


def _locks(flow: Flow) -> list[Lock]:
    """Every lock a BD or a core's fifo end uses, once each."""
    seen: dict[int, Lock] = {}
    for ch in flow.channels.values():
        for bd in ch.bds:
            seen.update((id(lk), lk) for lk in (bd.acquire, bd.release) if lk is not None)
    for core in flow.m.cores:
        for end in core.ends.values():
            seen.update((id(lock), lock) for lock in end.locks())
    return list(seen.values())
