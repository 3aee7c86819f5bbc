"""Steady rounds inside a task group in the fast machine (sim/flow.py), repeated instead of run.

sim/period.py repeats whole task groups; a group of a large design is itself long (a tile's k-loop: tens of
k-steps, each a few rounds of the schedule), and inside it the array repeats a short cycle of rounds: the cores
at the same instructions, the same locks, BDs and contents (sim/contents.py keys), while the memtile channels
walk on along the same BD, the tiles' bases move on by a constant and the k-loop counters count down. Such a
cycle is found by an anchor: the first tuple of program counters (with the sequence's step and the tile handles)
that comes back. At three returns X, Y, Z of the anchor the machine's state is taken apart into its structure
(everything but positions, bases and counters) and its numbers (those); when the three structures are equal, the
numbers moved by the same amount from X to Y as from Y to Z, and the kernel calls of the two cycles are the same
calls with their tile bases moved by a constant per call, the machine from Z repeats the cycle from Y with
everything moved once more, provided what it reads does so too: every channel that walks on within its BD reads,
over the cycles to be repeated, words whose provenance is the cycle's own moved by the same constant (the same
tags, ids a constant apart: the check that sim/flow.py's `part` makes run by run, made for all the repeats at
once), and stays inside its BD; every counting loop stays above zero. The repeats are then recorded (their calls
moved on, for sim/bulk.py to check as it checks any call) and the numbers jump ahead. Anything else (a task that
ends, a drain, a zero or conversion call, an S2MM BD in the middle of a fill that grows, a structure that
differs) skips nothing.
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable
from typing import TYPE_CHECKING

import numpy as np

from .contents import FIELDS, HANDLE, MATMUL, TASK, UNWRITTEN
from .machine import CommandProcessor, CoreActor, Lock
from .words import TAG_NONE

if TYPE_CHECKING:  # annotations only: the flow imports this module
    from .flow import Flow, LeanChannel, Region

BASE_COLUMNS = (5, 7)  # a matmul record's A and B bases (sim/contents.py FIELDS)


POS, WORDS, BASE, COUNTER, COUNT = range(5)  # what each number of a Snap is


class Snap:
    """The machine at one return of the anchor: its structure, its numbers, its record count."""

    __slots__ = ("numbers", "rows", "structure")

    def __init__(self, structure: Hashable, numbers: list[int], rows: int) -> None:
        self.structure, self.rows = structure, rows
        self.numbers = np.asarray(numbers, np.int64)


class LoopPeriods:
    """The anchor's returns in one call and the repeats they allow."""

    PATIENCE = 64  # rounds without the anchor's return before another anchor is looked for
    STRUCTURES = 8  # structures kept at once: more and the state does not repeat here
    MISSES = 16  # returns of an anchor that repeat nothing before it is dropped and the search rests
    REST_MAX = 1 << 14  # rounds of rest at most: each rest doubles, so a state that never repeats costs little

    def __init__(self, flow: Flow, cmd: CommandProcessor, cores: list[CoreActor], locks: list[Lock]) -> None:
        self.flow, self.cmd, self.cores, self.locks = flow, cmd, cores, locks
        self.channels: list[LeanChannel] = list(flow.channels.values())
        self.regions: list[Region] = [r for rs in flow.regions.values() for r in rs]
        self.anchor: Hashable | None = None  # the program counters that came back first
        self.seen: set[Hashable] = set()  # keys seen once, while no anchor is chosen
        self.since = 0  # rounds since the anchor last came back
        self.snaps: dict[Hashable, list[Snap]] = {}  # the anchor's last returns, per structure
        self.cycles = 0  # cycles repeated in this call
        self.rounds = 0
        self.misses = 0  # the anchor's returns since one repeated something
        self.rest, self.resume = self.PATIENCE, 0  # the next rest's length, and the round the search resumes at

    def round(self) -> None:
        """At the start of a round: a return of the anchor, and the repeat it allows."""
        self.rounds += 1
        if self.rounds < self.resume:
            return
        key = tuple([core.pc for core in self.cores])  # the next tile's cycle returns to the same instructions
        if self.anchor is None:
            if key not in self.seen:
                self.seen.add(key)
                return
            self.anchor, self.seen = key, set()
        elif key != self.anchor:
            self.since += 1
            if self.since > self.PATIENCE:
                self.anchor, self.since = None, 0
                self.snaps.clear()
            return
        self.since = 0
        snap = self._snap()
        # the anchor may come back more often than the state repeats (ping and pong objects alternate): the returns
        # are kept per structure, and a cycle is the distance between returns of one structure
        same = self.snaps.setdefault(snap.structure, [])
        same.append(snap)
        if len(same) > 3:
            del same[0]
        if len(same) == 3 and self._repeat(*same):
            self.snaps.clear()
            self.misses, self.rest = 0, self.PATIENCE
            return
        if len(self.snaps) > self.STRUCTURES:
            self.snaps = {snap.structure: same}
        self.misses += 1
        if self.misses > self.MISSES:  # this anchor does not lead to a cycle: rest, then look for another
            self.anchor, self.snaps, self.misses = None, {}, 0
            self.resume, self.rest = self.rounds + self.rest, min(2 * self.rest, self.REST_MAX)

    # ---- the state, apart -------------------------------------------------------------------------------
    def _snap(self) -> Snap:
        f, cmd = self.flow, self.cmd
        numbers: list[int] = []
        chans: list[tuple] = []
        for ch in self.channels:  # most are idle: their state is short
            numbers += (ch.pos, ch.words)
            if ch.active:
                numbers.append(ch.base)
                numbers += [b for _, _, _, b in ch.pieces]
                chans.append((ch.cur, True, ch.length, ch.mm2s, len(ch.drain), ch.seq,
                              id(ch.bd) if ch.queue is None else id(ch.task), tuple([p[:3] for p in ch.pieces]),
                              None if ch.queue is None else tuple(map(id, ch.queue))))
            else:
                chans.append((ch.cur, False, len(ch.drain), None if ch.queue is None else tuple(map(id, ch.queue))))
        defs = f.keys.defs
        numbers += [r.base if defs[r.key][0] not in UNWRITTEN else 0 for r in self.regions]
        regions = tuple([(r.key, r.filling) for r in self.regions])
        cores = []
        for core in self.cores:
            numbers += core.loops
            cores.append((core.pc, len(core.loops), core.passes, core.at_start, core.synced, core.ready is None,
                          tuple([(e.next, tuple(map(id, e.held))) for e in core.ends.values()])))
        rec = f.recorder
        numbers.append(rec.matmuls)
        live = tuple(sorted((str(shim), tuple(sorted((bd, id(t)) for bd, t in bds.items())))
                            for shim, bds in cmd.live.items()))
        structure = (cmd.pc, tuple(chans), regions, tuple(cores), tuple(sorted(rec.current.items())), rec.handles,
                     live, tuple(sorted(cmd.unretired.items())),
                     tuple([(b.value, b.sets) for b in f.m.barriers.values()]),
                     tuple([lock.value for lock in self.locks]), f.cross_tasks)
        return Snap(structure, numbers, len(rec.rows) // FIELDS)

    def _kinds(self) -> np.ndarray:
        """What each number of a Snap of the present structure is (_snap's order)."""
        kinds: list[int] = []
        for ch in self.channels:
            kinds += (POS, WORDS)
            if ch.active:
                kinds += [BASE] * (1 + len(ch.pieces))
        kinds += [BASE] * len(self.regions)
        for core in self.cores:
            kinds += [COUNTER] * len(core.loops)
        kinds.append(COUNT)
        return np.asarray(kinds, np.int8)

    # ---- the repeat -------------------------------------------------------------------------------------
    def _repeat(self, x: Snap, y: Snap, z: Snap) -> bool:
        """Repeat the cycle from y to z (three returns of one structure: round() keeps them per structure) as often
        as what follows z allows; whether anything was repeated."""
        step = y.numbers - x.numbers
        if not np.array_equal(z.numbers - y.numbers, step) or not step.any():
            return False
        rows = np.frombuffer(self.flow.recorder.rows, np.int64).reshape(-1, FIELDS)
        first, second = rows[x.rows:y.rows].copy(), rows[y.rows:z.rows].copy()
        del rows  # a view of the records holds their buffer, which the repeats extend
        if first.shape != second.shape or not first.size or (second[:, 0] != MATMUL).any():
            return False
        moved = second - first  # per call: how its bases move per cycle
        others = np.ones(FIELDS, bool)
        others[list(BASE_COLUMNS)] = False
        if moved[:, others].any():
            return False
        kinds = self._kinds()
        n = self._cycles(x, z, step, kinds)
        bases = np.concatenate([second[:, BASE_COLUMNS].reshape(-1), z.numbers[kinds == BASE]])
        moves = np.concatenate([moved[:, BASE_COLUMNS].reshape(-1), step[kinds == BASE]])
        if ((bases >= HANDLE) & (moves != 0)).any():
            return False  # a C tile's handle never moves inside a tile
        while n > 0 and ((bases + n * moves) >> TASK != bases >> TASK).any():
            n -= 1  # a base never leaves its task's words
        if n <= 0:
            return False
        copies = second[None] + np.arange(1, n + 1)[:, None, None] * moved[None]
        self.flow.recorder.rows.extend(array("q", copies.reshape(-1).tobytes()))
        self._assign(z.numbers + n * step)
        self.cycles += n
        return True

    def _cycles(self, x: Snap, z: Snap, step: np.ndarray, kinds: np.ndarray) -> int:
        """How many cycles after z the channels and the loops allow (0: none)."""
        n = 1 << 30
        counters = kinds == COUNTER
        if (step[counters] > 0).any():
            return 0
        down = counters & (step < 0)
        if down.any():  # every counting loop stays above zero
            n = min(n, int(((z.numbers[down] - 1) // -step[down]).min()))
        keys, memo = self.flow.keys, self.flow.periodic
        for ch, at in zip(self.channels, np.flatnonzero(kinds == POS).tolist(), strict=True):  # each its position
            d_pos, d_words = int(step[at]), int(step[at + 1])
            if d_pos:  # a channel that walks on: an MM2S inside one BD (or task) all cycle, through words that repeat
                if not ch.active or not ch.mm2s or d_pos < 0 or d_words != d_pos:
                    return 0
                n = min(n, (ch.length - 1 - int(z.numbers[at])) // d_pos)
                if n > 0:  # the next tile's cycles read the same sequence at the same places: asked once
                    ask = (ch.seq, int(x.numbers[at]), d_pos, n)
                    got = memo.get(ask)
                    if got is None:
                        got = memo[ask] = _periodic(keys.provenance(ch.seq), *ask[1:])
                    n = got
                if n <= 0:
                    return 0
        return n

    def _assign(self, numbers: np.ndarray) -> None:
        """The numbers back into the machine, in _snap's order."""
        values = numbers.tolist()
        at = 0
        for ch in self.channels:
            ch.pos, ch.words = values[at], values[at + 1]
            at += 2
            if ch.active:
                ch.base = values[at]
                ch.pieces = [(s, d, n, values[at + 1 + i]) for i, (s, d, n, _) in enumerate(ch.pieces)]
                at += 1 + len(ch.pieces)
        defs = self.flow.keys.defs
        for r in self.regions:
            if defs[r.key][0] not in UNWRITTEN:
                r.base = values[at]
            at += 1
        for core in self.cores:
            for i in range(len(core.loops)):
                core.loops[i] = values[at + i]
            at += len(core.loops)
        self.flow.recorder.matmuls = values[at]


def _periodic(provenance: tuple[np.ndarray, np.ndarray], start: int, cycle: int, n: int) -> int:
    """The most cycles m <= n such that words start .. start + (m + 2) cycle of a sequence are its first cycle's
    words moved on by a constant per cycle (the same tags; tagged ids a constant apart, untagged ones equal): the
    two cycles seen and m more."""
    tags, ids = provenance
    m = min(n, (tags.size - start) // cycle - 2)
    if m <= 0:
        return 0
    t = tags[start:start + (m + 2) * cycle].reshape(m + 2, cycle)
    i = ids[start:start + (m + 2) * cycle].reshape(m + 2, cycle)
    d = i[1:] - i[:-1]
    tagged = t[0] != TAG_NONE
    ok = (t[1:] == t[0]).all(axis=1) & (d[:, ~tagged] == 0).all(axis=1)
    if tagged.any():
        ok &= (d[:, tagged] == d[0][tagged][0]).all(axis=1)
    bad = np.flatnonzero(~ok)  # comparison j: cycle j + 1 is cycle j moved on
    good = int(bad[0]) if bad.size else m + 1
    return max(0, min(m, good - 1))
