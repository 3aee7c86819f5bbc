"""The simulated array: locks, buffers, DMA channels, streams, cores and the command processor.

Semantics follow mlir-aie's lowering and deadlock model (AIEObjectFifoStatefulTransform,
AIEDeadlockModel): a BD acquires its lock (acquire-greater-equal), moves its words, releases;
a stream moves words only when the MM2S and every S2MM it feeds have a BD running (a broadcast
stalls on its slowest consumer); shim channels run pushed tasks in order, at most
`task_queue_depth` queued or running, and a push to a full queue stalls the command processor.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..design.ir import (
    Acquire,
    BarrierRelease,
    BarrierWait,
    Call,
    Loop,
    Op,
    Release,
    RuntimeCount,
    ShimTask,
    TileRef,
)
from ..facts.devices import CORE_LOCKS
from ..facts.errors import BdExhaustionError, QueueOverflowError, SimulationError


class Lock:
    __slots__ = ("name", "value")

    def __init__(self, name: str, value: int) -> None:
        self.name = name
        self.value = value


class Buffer:
    __slots__ = ("cells", "epochs", "fills", "name", "readers", "tile")

    def __init__(self, name: str, tile: TileRef, words: int, rtp: bool = False) -> None:
        self.name = name
        self.tile = tile
        # a neighbour-shared buffer's checks (docs/shared_l1.md 3.2): how many fills its DMA finished (fill j of slot
        # s holds the operand's object 2j + s: the object a reader expects) and how many cores hold it now (no DMA
        # may write it then); an ObjectFifo buffer counts its fills only
        self.fills = 0
        self.readers = 0
        self.cells = np.zeros(words, dtype=np.uint64)  # memories come up zero, tag "unwritten"
        # a runtime-parameter buffer: per word, how many times the core's barrier had been set when the
        # runtime sequence last wrote it (-1: never), which says whether a read is ordered after the write
        self.epochs = np.full(words, -1, dtype=np.int64) if rtp else None


LOCK_VALUE_MAX = CORE_LOCKS.value_max  # a lock's value field (mlir-aie AIE2TargetModel::getMaxLockValue)


class Barrier:
    """A worker's runtime barrier (IRON WorkerRuntimeBarrier): one lock on the core's tile that the runtime
    sequence sets (aiex.set_lock: a write32 of its value), the core waits on with acquire-equal (which leaves
    the value as it is) and adds to on release. `sets` counts the sequence's sets, its epochs."""

    __slots__ = ("name", "sets", "tile", "value")

    def __init__(self, name: str, tile: TileRef) -> None:
        self.name, self.tile = name, tile
        self.value = 0  # IRON 1.4.3 makes the lock without an init (worker.py Worker.resolve: lock(my_tile))
        self.sets = 0

    def set(self, value: int) -> None:
        if not 0 <= value <= LOCK_VALUE_MAX:  # mlir-aie's SetLockOp::verify
            raise SimulationError(f"the runtime sequence sets {self.name} on {self.tile} to {value}: a lock holds "
                                  f"0..{LOCK_VALUE_MAX}", "set the barrier to a lock value")
        self.value = value
        self.sets += 1

    def add(self, value: int) -> None:
        if self.value + value > LOCK_VALUE_MAX:
            raise SimulationError(f"{self.tile} releases {self.name} past {LOCK_VALUE_MAX} ({self.value} + {value}): "
                                  f"the lock's value would overflow", "release the barrier once per wait")
        self.value += value


@dataclass
class Bd:
    """A static BD of a memtile or core channel: lock, buffer, word pattern, lock."""

    buffer: Buffer
    idx: np.ndarray
    acquire: Lock | None  # None: a BD of a chain that takes no lock (the chain's first BD took it)
    release: Lock | None  # None: one that gives none (the chain's last BD gives it)
    label: str
    # acquire-greater-equal this many before moving, release this many after: 1 for every ObjectFifo BD; a shared
    # buffer's S2MM acquires its empty lock by its reader count (docs/shared_l1.md 3.2: both readers released it)
    acquire_count: int = 1
    release_count: int = 1


@dataclass
class Task:
    """A pushed shim task (one runtime fill or drain) and its BD."""

    spec: ShimTask
    cells: np.ndarray  # the DRAM tensor it reads or writes
    base: np.ndarray  # word pattern shared by tasks of the same shape
    first: int  # word offset of this task in the tensor
    bd_id: int = -1
    channel: Channel | None = None
    done: bool = False


class Channel:
    """One DMA channel. Static channels cycle through `bds`; shim channels run `queue`."""

    __slots__ = (
        "active",
        "bd",
        "bds",
        "blocked",
        "cur",
        "data",
        "depth",
        "idx",
        "length",
        "mm2s",
        "name",
        "pos",
        "queue",
        "target",
        "tile",
        "words",
    )

    def __init__(self, name: str, tile: TileRef, mm2s: bool, bds: list[Bd] | None = None,
                 queue_depth: int = 0) -> None:
        self.name = name
        self.tile = tile
        self.mm2s = mm2s
        self.bds = bds or []
        self.cur = 0
        self.queue: deque[Task] | None = deque() if queue_depth else None
        self.depth = queue_depth
        self.active = False
        self.target: np.ndarray = np.empty(0, dtype=np.uint64)
        self.idx: np.ndarray = np.empty(0, dtype=np.int64)
        self.pos = self.length = 0
        self.data: np.ndarray = self.target
        self.words = 0
        self.blocked = ""
        self.bd: Bd | None = None

    def start(self) -> bool:
        """Begin the next BD if its lock (or, on a shim, a pushed task) allows."""
        if self.queue is not None:
            if not self.queue:
                self.blocked = "has no task queued"
                return False
            task = self.queue[0]  # a running task still occupies its queue slot
            self.target, self.idx = task.cells, task.base + task.first
        else:
            bd = self.bds[self.cur]
            if bd.acquire is not None:
                if bd.acquire.value < bd.acquire_count:
                    self.blocked = f"waits on lock {bd.acquire.name} ({bd.label})"
                    return False
                bd.acquire.value -= bd.acquire_count
            self.bd, self.target, self.idx = bd, bd.buffer.cells, bd.idx
        self.pos, self.length = 0, len(self.idx)
        if self.mm2s:
            self.data = self.target[self.idx]
        self.active = True
        return True

    def finish(self) -> None:
        if self.queue is not None:
            self.queue.popleft().done = True
        else:
            assert self.bd is not None
            if self.bd.release is not None:
                release(self.bd.release, self.bd.release_count, self)
            if not self.mm2s:
                self.bd.buffer.fills += 1
            self.cur = (self.cur + 1) % len(self.bds)
        self.active = False

    def describe(self) -> str:
        return f"{self.tile} {self.name}"

    __str__ = describe


class Stream:
    """A circuit-switched connection from one MM2S to one or more S2MM channels."""

    def __init__(self, src: Channel, dsts: list[Channel], level: str) -> None:
        self.src, self.dsts, self.level = src, dsts, level
        self.blocked = ""

    def step(self) -> bool:
        src, dsts = self.src, self.dsts
        moved = False
        while True:
            if not src.active and not src.start():
                self.blocked = f"{src.describe()} {src.blocked}"
                return moved
            for d in dsts:
                if not d.active and not d.start():
                    self.blocked = f"{src.describe()} waits for {d.describe()}, which {d.blocked}"
                    return moved
            w = src.length - src.pos
            for d in dsts:
                w = min(w, d.length - d.pos)
            chunk = src.data[src.pos : src.pos + w]
            for d in dsts:
                if d.queue is None and d.bd is not None and d.bd.buffer.readers:
                    raise SimulationError(
                        f"{d.describe()} writes {d.bd.buffer.name} on {d.bd.buffer.tile} while "
                        f"{d.bd.buffer.readers} core(s) read it", "a shared buffer's DMA acquires its empty lock "
                        "once per reader, and each reader releases it only after its last read")
                d.target[d.idx[d.pos : d.pos + w]] = chunk
                d.pos += w
                d.words += w
                if d.pos == d.length:
                    d.finish()
            src.pos += w
            src.words += w
            if src.pos == src.length:
                src.finish()
            moved = True


def release(lock: Lock, count: int, who: object) -> None:
    """A release of `count` on `lock`, refused past the lock's 6-bit value (AM020; getMaxLockValue). `who` says
    who releases, as text only when refused (a release runs once per object moved)."""
    if lock.value + count > LOCK_VALUE_MAX:
        raise SimulationError(f"{who} releases {lock.name} past {LOCK_VALUE_MAX} ({lock.value} + {count})",
                              "release each lock once per acquire")
    lock.value += count


@dataclass
class SharedSlot:
    """A core's way into one neighbour-shared buffer (docs/shared_l1.md 3.2): the lock it acquires (the leader the
    buffer's full lock, the follower its relay lock), the relay lock the leader releases right after (None for the
    follower), the empty lock both release after their last read, and how many objects it read from the buffer."""

    take: Lock
    relay: Lock | None
    empty: Lock
    reads: int = 0


@dataclass
class FifoEnd:
    """A core's handle on one ObjectFifo: its L1 buffers and the locks it acquires/releases.

    A neighbour-shared operand's end (`slots`, one per buffer, aligned with `buffers`): object n lies in buffer
    n % 2, which may sit on a neighbour, and each buffer has its own locks (acquire_lock and release_lock are then
    the ping's)."""

    fifo: str
    buffers: list[Buffer]
    acquire_lock: Lock
    release_lock: Lock
    next: int = 0
    held: deque[Buffer] = field(default_factory=deque)
    slots: list[SharedSlot] | None = None

    def locks(self) -> list[Lock]:
        """Every lock the core acquires or releases through this end."""
        if self.slots is None:
            return [self.acquire_lock, self.release_lock]
        return [lock for s in self.slots for lock in (s.take, s.relay, s.empty) if lock is not None]


KernelFn = Callable[[TileRef, str, list[np.ndarray], tuple[int, ...]], None]


class Actor(Protocol):
    def step(self) -> bool:
        """Make as much progress as possible; say whether anything moved."""
        ...


def _holds_at_least(lock: Lock, count: int) -> Callable[[], bool]:
    """What an acquire-greater-equal waits for (an ObjectFifo's lock)."""
    return lambda: lock.value >= count


def _holds(barrier: Barrier, value: int) -> Callable[[], bool]:
    """What an acquire-equal waits for (a runtime barrier's wait)."""
    return lambda: barrier.value == value


# The core's program compiled into a flat list of instructions (an interpreter with a program counter and a
# stack of loop counters, rather than nested generators): one resume per wait, whatever the loop depth, and a
# state that both simulators can carry on from (sim/flow.py runs the same cores with another kernel).
ACQ, REL, CALL, LOOP, NEXT, WAIT, ADD, END = range(8)
SHARED_ACQ, SHARED_REL = 8, 9  # ACQ and REL on a neighbour-shared operand's end (the relay protocol), set at resolve
Instr = tuple


def compile_program(program: tuple[Op, ...]) -> list[Instr]:
    """(opcode, operands...) per op; LOOP (count, the pc after its NEXT), NEXT (the pc of its body)."""
    code: list[Instr] = []

    def emit(ops: tuple[Op, ...]) -> None:
        for op in ops:
            if isinstance(op, Loop):
                at = len(code)
                code.append((LOOP, op, -1))
                emit(op.body)
                code.append((NEXT, at + 1))
                code[at] = (LOOP, op, len(code))
            elif isinstance(op, Acquire):
                code.append((ACQ, op))
            elif isinstance(op, Release):
                code.append((REL, op))
            elif isinstance(op, Call):
                code.append((CALL, op))
            elif isinstance(op, BarrierWait):
                code.append((WAIT, op))
            elif isinstance(op, BarrierRelease):
                code.append((ADD, op))

    emit(program)
    code.append((END,))
    return code


class _NoEnd:
    """Stands for a fifo end a core does not have: using it raises the KeyError that looking the fifo up would."""

    def __init__(self, fifo: str) -> None:
        self.fifo = fifo

    def __getattr__(self, name: str) -> object:
        raise KeyError(self.fifo)


class CoreActor:
    """Runs a worker's program forever (IRON's while_true), calling the kernel emulator."""

    def __init__(self, tile: TileRef, program: tuple[Op, ...], ends: dict[str, FifoEnd],
                 kernel: KernelFn, buffers: dict[str, Buffer] | None = None, barrier: Barrier | None = None) -> None:
        self.tile, self.program, self.ends, self.kernel = tile, program, ends, kernel
        self.buffers = buffers or {}  # the worker's own L1 buffers
        self.barrier = barrier
        self.ready: Callable[[], bool] | None = None  # what the core waits for, when it waits
        self.waiting_on: Op | None = None  # the instruction's op it waits at (describe() says what)
        self.synced: int | None = None  # the barrier set this pass of the program waited for (its epoch)
        self.at_start = True  # at the top of the program, holding nothing
        self.passes = 0
        # ACQ and REL carry their fifo end and count after the op, looked up once (the ends stay the same objects:
        # a restore refills them), and an ACQ what it waits for; a fifo with no end on this tile fails when the
        # instruction runs, as a lookup would
        self.code = [self._resolved(ins) for ins in compile_program(program)]
        self.bind_calls(None)
        self.pc = 0
        self.loops: list[int] = []  # iterations left of each loop the program is in, innermost last

    def bind_calls(self, kernel_of: Callable[[int, Call], Callable[[Call], None]] | None) -> None:
        """How each CALL instruction reaches the kernel, carried in the instruction (one call per kernel call):
        with the cells of its arguments, to the literal emulator (None), or through the function kernel_of(pc,
        op) gives (sim/flow.py's recorder, which needs the buffers rather than their cells)."""
        for pc, ins in enumerate(self.code):
            if ins[0] == CALL:
                self.code[pc] = (CALL, ins[1], self._call if kernel_of is None else kernel_of(pc, ins[1]))

    def _resolved(self, ins: Instr) -> Instr:
        if ins[0] not in (ACQ, REL):
            return ins
        end = self.ends[ins[1].fifo] if ins[1].fifo in self.ends else _NoEnd(ins[1].fifo)
        if isinstance(end, FifoEnd) and end.slots is not None:  # its own opcodes keep the usual path free of a test
            return (SHARED_ACQ if ins[0] == ACQ else SHARED_REL, *ins[1:], end, ins[1].count)
        if ins[0] == REL:
            return (*ins, end, ins[1].count)
        return (*ins, end, ins[1].count, _holds_at_least(end.acquire_lock, ins[1].count)
                if isinstance(end, FifoEnd) else end)

    def step(self) -> bool:
        """Run the program until it waits for what is not there yet; say whether it moved."""
        if self.ready is not None and not self.ready():
            return False
        self.ready = self._run()
        return True

    def _run(self) -> Callable[[], bool]:
        """Run from self.pc until an acquire or a barrier wait cannot pass: what it waits for (the instruction runs
        again, checking it anew, at the next step). A plain method rather than a generator: a resume is a call."""
        # the program counter lives in a local while the core runs, and in self.pc whenever it waits (or stops)
        code, loops, pc = self.code, self.loops, self.pc
        try:
            while True:
                ins = code[pc]
                op = ins[0]
                if op == ACQ:
                    end, count = ins[2], ins[3]
                    lock = end.acquire_lock
                    if lock.value < count:
                        self.waiting_on = ins[1]
                        return ins[4]
                    self.at_start = False
                    lock.value -= count
                    buffers = end.buffers
                    if count == 1:  # the usual acquire, without a loop's cost (this runs once per kernel call)
                        end.held.append(buffers[end.next])
                        end.next = (end.next + 1) % len(buffers)
                    else:
                        for _ in range(count):
                            end.held.append(buffers[end.next])
                            end.next = (end.next + 1) % len(buffers)
                elif op == CALL:
                    ins[2](ins[1])
                elif op == REL:
                    end, count = ins[2], ins[3]
                    held = end.held
                    if len(held) < count:
                        raise SimulationError(f"{self.tile} releases {count} of {ins[1].fifo} holding "
                                              f"{len(held)}", "fix the worker program")
                    if count == 1:  # as an acquire's
                        held.popleft()
                    else:
                        for _ in range(count):
                            held.popleft()
                    end.release_lock.value += count
                elif op == NEXT:
                    loops[-1] -= 1
                    if loops[-1] > 0:
                        pc = ins[1]
                        continue
                    loops.pop()
                elif op == LOOP:
                    self.pc = pc
                    count = self._count(ins[1])
                    if count <= 0:
                        pc = ins[2]
                        continue
                    loops.append(count)
                elif op == WAIT:  # acquire-equal: the value stays
                    barrier = self._barrier(ins[1])
                    value = ins[1].value
                    if barrier.value != value:
                        self.waiting_on = ins[1]
                        return _holds(barrier, value)
                    self.synced = barrier.sets
                elif op == ADD:
                    self._barrier(ins[1]).add(ins[1].value)
                elif op == SHARED_ACQ:
                    wait = self._acquire_shared(ins[2], ins[3])
                    if wait is not None:
                        self.waiting_on = ins[1]
                        return wait
                    self.at_start = False
                elif op == SHARED_REL:
                    self._release_shared(ins[2], ins[3], ins[1].fifo)
                else:  # END: the program starts over (a call's parameters are read after this call's wait)
                    self.passes += 1
                    self.at_start = True
                    self.synced = None
                    pc = 0
                    continue
                pc += 1
        finally:
            self.pc = pc

    def _acquire_shared(self, end: FifoEnd, count: int) -> Callable[[], bool] | None:
        """Acquire the next object of a neighbour-shared operand (docs/shared_l1.md 3.2): the leader takes the
        buffer's full lock and at once releases its relay lock, the follower takes the relay lock; then the core
        reads the buffer in place, which must hold the object this core expects (fill `reads` of the buffer). None
        when acquired, else what the core waits for (the acquire runs again once it holds)."""
        assert end.slots is not None
        if count != 1:  # one lock per buffer: objects are taken one at a time (the loop unrolled over ping and pong)
            raise SimulationError(f"{self.tile} acquires {count} objects of shared {end.fifo} at once",
                                  "acquire a shared operand's objects one at a time")
        i = end.next
        slot, buf = end.slots[i], end.buffers[i]
        if slot.take.value < 1:
            return _holds_at_least(slot.take, 1)
        slot.take.value -= 1
        if slot.relay is not None:
            release(slot.relay, 1, self.tile)
        if buf.fills != slot.reads + 1:
            obj = 2 * slot.reads + i
            raise SimulationError(
                f"{self.tile} reads object {obj} of {end.fifo} from {buf.name} on {buf.tile}, which holds "
                f"{'nothing yet' if buf.fills == 0 else f'object {2 * (buf.fills - 1) + i}'}",
                "the leader takes the full lock and relays; the follower takes the relay lock (never the full one)")
        slot.reads += 1
        buf.readers += 1
        end.held.append(buf)
        end.next = (i + 1) % len(end.buffers)
        return None

    def _release_shared(self, end: FifoEnd, count: int, fifo: str) -> None:
        """Release the oldest held objects of a shared operand: the buffer's empty lock by one each."""
        assert end.slots is not None
        if len(end.held) < count:
            raise SimulationError(f"{self.tile} releases {count} of {fifo} holding {len(end.held)}",
                                  "fix the worker program")
        for _ in range(count):
            buf = end.held.popleft()
            slot = end.slots[end.buffers.index(buf)]
            if buf.fills != slot.reads:  # the buffer was refilled while this core read it
                raise SimulationError(f"{self.tile} releases {buf.name} on {buf.tile} after its DMA refilled it",
                                      "the DMA acquires the empty lock once per reader")
            buf.readers -= 1
            release(slot.empty, 1, self.tile)

    def _call(self, op: Call) -> None:
        cells = []
        for name in op.args:
            own = self.buffers.get(name)
            if own is not None:
                cells.append(own.cells)
                continue
            end = self.ends[name]
            if not end.held:
                raise SimulationError(f"{self.tile} calls {op.kernel} without holding {name}",
                                      "acquire before the call")
            cells.append(end.held[0].cells)
        scalars = tuple(self._word(x, f"{op.kernel} argument") for x in op.scalars) if op.scalars else ()
        self.kernel(self.tile, op.kernel, cells, scalars)

    def _word(self, word: int | RuntimeCount, what: str) -> int:
        """A constant, or a word read from a runtime parameter now (a loop's start, a call's)."""
        if isinstance(word, int):
            return word
        buffer = self.buffers[word.buffer]
        cell = buffer.cells[word.index]
        if not cell & RTP_WRITTEN:
            raise SimulationError(f"{self.tile} reads its {what} from {word.buffer}[{word.index}] before any "
                                  f"call wrote it", "write the runtime parameter before the call's transfers")
        self._ordered(buffer, word.index, what)
        return int(np.uint32(cell & np.uint64(0xFFFFFFFF)).view(np.int32))

    def _ordered(self, buffer: Buffer, index: int, what: str) -> None:
        """A parameter read is this call's write only when the core waited on its barrier in this pass and
        the sequence wrote the word after the previous set and before the one waited for: mlir-aie 1.4.3
        lowers the write to a plain write32 (AIEDmaToNpu.cpp RtpToWrite32Pattern), ordered only against
        the barrier's set that the sequence writes after it, never against the call's DMA data."""
        read = f"{self.tile} reads its {what} from {buffer.name}[{index}]"
        fix = "write the parameters, then set the worker's barrier, and wait on it before the first read"
        if self.barrier is None:
            raise SimulationError(f"{read} without a runtime barrier: nothing orders the sequence's write before "
                                  f"the read", fix)
        if self.synced is None:
            raise SimulationError(f"{read} before waiting on {self.barrier.name}: nothing orders the sequence's "
                                  f"write before the read", fix)
        assert buffer.epochs is not None
        written = int(buffer.epochs[index])
        if written >= self.synced:
            raise SimulationError(f"{read}, which the sequence wrote after setting {self.barrier.name} (set "
                                  f"{self.synced}): nothing orders that write before the read", fix)
        if written < self.synced - 1:
            raise SimulationError(f"{read}, last written before set {written + 1} of {self.barrier.name}: "
                                  f"this call (set {self.synced}) did not write it", fix)

    def _count(self, loop: Loop) -> int:
        """A loop's trip count: a constant, or read from a runtime parameter as the loop starts."""
        return self._word(loop.count, "loop count")

    def _barrier(self, op: BarrierWait | BarrierRelease) -> Barrier:
        if self.barrier is None:
            raise SimulationError(f"{self.tile} {'waits on' if isinstance(op, BarrierWait) else 'releases'} a "
                                  f"runtime barrier it was not given", "give the worker its WorkerRuntimeBarrier")
        return self.barrier

    def describe(self) -> str:
        op = self.waiting_on  # formatted here, not at each wait (tens of thousands a call)
        if isinstance(op, Acquire):
            end = self.ends.get(op.fifo)
            if end is not None and end.slots is not None:  # a shared operand's: the lock of the buffer it waits for
                return f"{self.tile} waits to acquire {op.fifo} ({end.slots[end.next].take.name})"
            return f"{self.tile} waits to acquire {op.fifo}"
        if isinstance(op, BarrierWait):
            assert self.barrier is not None
            return f"{self.tile} waits for {self.barrier.name} = {op.value} (the sequence's set)"
        return f"{self.tile} waits "


@dataclass
class Step:
    """One command-processor action: push a task to a channel, await its token, free its BD, write a
    runtime parameter into a core's L1, or set a core's runtime barrier."""

    kind: str  # "push" | "await" | "free" | "write" | "set"
    task: Task | None
    channel: Channel | None = None
    buffer: Buffer | None = None  # "write": the runtime-parameter buffer, its word, the value
    index: int = 0
    value: int = 0
    barrier: Barrier | None = None  # "write": the core's barrier (its epoch stamps the word); "set": the one set


RTP_WRITTEN = np.uint64(1) << np.uint64(32)  # a runtime-parameter word's provenance: written by a call


class CommandProcessor:
    """Runs the runtime sequence: configure+push tasks, await tokens, free BDs."""

    def __init__(self, steps: list[Step], shim_bds: int) -> None:
        self.steps = steps
        self.pc = 0
        self.shim_bds = shim_bds
        self.live: dict[TileRef, dict[int, Task]] = {}
        self.unretired: dict[int, int] = {}  # per channel: tasks pushed and not yet freed
        self.max_live: dict[TileRef, int] = {}
        self.blocked = ""

    @property
    def done(self) -> bool:
        return self.pc == len(self.steps)

    def step(self) -> bool:
        progressed = False
        while self.pc < len(self.steps):
            step = self.steps[self.pc]
            if step.kind == "write":
                assert step.buffer is not None and step.buffer.epochs is not None
                step.buffer.cells[step.index] = RTP_WRITTEN | np.uint64(step.value & 0xFFFFFFFF)
                step.buffer.epochs[step.index] = step.barrier.sets if step.barrier is not None else -1
                self.pc += 1
                progressed = True
                continue
            if step.kind == "set":
                assert step.barrier is not None
                step.barrier.set(step.value)
                self.pc += 1
                progressed = True
                continue
            task = step.task
            assert task is not None
            if step.kind == "push":
                channel = step.channel
                assert channel is not None and channel.queue is not None
                # The hardware drops a push onto a full queue, and whether it is full depends on
                # timing we do not model: refuse any push the sequence has not made room for.
                pending = self.unretired.get(id(channel), 0)
                if pending >= channel.depth:
                    raise QueueOverflowError(
                        f"push of {task.spec.name} to {channel.describe()} would be its {pending + 1}th task "
                        f"not yet retired by an await; its queue holds {channel.depth} and the hardware "
                        f"drops a push onto a full queue",
                        "finish a task group (await its tokens) before pushing more to this channel",
                    )
                self.unretired[id(channel)] = pending + 1
                task.channel = channel
                self._configure(task)
                channel.queue.append(task)
            elif step.kind == "await":
                if not task.done:
                    self.blocked = f"awaits the token of {task.spec.name} on {task.spec.shim}"
                    return progressed
            else:
                self._free(task)
            self.pc += 1
            progressed = True
        return progressed

    def _configure(self, task: Task) -> None:
        shim = task.spec.shim
        live = self.live.setdefault(shim, {})
        free = next((i for i in range(self.shim_bds) if i not in live), None)
        if free is None:
            raise BdExhaustionError(
                f"{shim} has all {self.shim_bds} BDs live when {task.spec.name} is configured "
                f"({', '.join(t.spec.name for t in live.values())})",
                "keep fewer task groups in flight (queue_groups)",
            )
        task.bd_id = free
        live[free] = task
        self.max_live[shim] = max(self.max_live.get(shim, 0), len(live))

    def _free(self, task: Task) -> None:
        if task.channel is not None:
            self.unretired[id(task.channel)] -= 1
        if not task.done:
            raise SimulationError(
                f"BD {task.bd_id} of {task.spec.name} on {task.spec.shim} is freed for reuse while its "
                f"transfer is still queued or running",
                "await a token that implies its completion before freeing it",
            )
        del self.live[task.spec.shim][task.bd_id]


class BdPool:
    """Counts static BDs per tile and bank against the tile's DMA (raises on exhaustion)."""

    def __init__(self) -> None:
        self.used: dict[tuple[TileRef, int], int] = {}

    def take(self, tile: TileRef, bank: int, count: int, limit: int, what: str) -> None:
        key = (tile, bank)
        self.used[key] = self.used.get(key, 0) + count
        if self.used[key] > limit:
            raise BdExhaustionError(
                f"{tile} needs {self.used[key]} BDs in bank {bank} (max {limit}) for {what}",
                "use shallower fifos or fewer links on this tile",
            )
