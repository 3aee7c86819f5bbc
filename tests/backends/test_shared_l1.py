"""Issue 34 item 1: one operand's L1 buffers shared by two neighbouring cores, at the pinned release.

mlir-aie 1.4.3 has no ObjectFifo form of it (a fifo with a DMA end gives every consumer its own pool;
docs/shared_l1.md), but IRON's lower-level primitives express it without a copy: Buffers placed on a
core and given to two Workers, explicit Locks, a TileDma per tile and Flows. This file holds the
prototype of that lowering against the IRON stand-in (tests/iron_recorder.py), the rules 1.4.3 refuses
it by (each broken once), and an exhaustive check of the lock protocol the prototype records: every
interleaving of the two cores and the DMAs that fill the shared buffers, each read seeing the object it
expects and nothing overwriting a buffer while a core reads it.
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from gemm_gen.backends import pins

from .. import iron_recorder as ir

B_TY = np.ndarray[(64,), np.dtype[np.int32]]  # one object of the shared operand
Coord = tuple[int, int]  # (column, row)


# ---- the prototype: a shared operand's ping and pong, its locks, DMAs and flows -----------------------------
@dataclass(frozen=True)
class SharedPlan:
    """Two cores `readers` read the same objects in the same order; object n lies in buffer n % 2, and
    buffer i is placed on `holds[i]`, a tile both readers reach. `protocol` is how the locks pace them:
    "relay" (the lowering this file proposes), or two broken ones kept to show the check catches them:
    "two_tokens" (the DMA releases two tokens both readers take) and "shared_empty" (one empty-count
    lock for both buffers)."""

    readers: tuple[Coord, Coord]
    holds: tuple[Coord, Coord]
    protocol: str = "relay"
    pairs: int = 2  # loop trips; each reads ping then pong

    @property
    def objects(self) -> int:
        return 2 * self.pairs


B_VERTICAL_HOLDER = SharedPlan(readers=((0, 2), (0, 3)), holds=((0, 2), (0, 2)))  # one tile holds both
B_VERTICAL_SPLIT = SharedPlan(readers=((0, 2), (0, 3)), holds=((0, 2), (0, 3)))  # ping below, pong above
A_HORIZONTAL_WEST = SharedPlan(readers=((0, 2), (1, 2)), holds=((0, 2), (0, 2)))  # west holds: east reads west


@dataclass
class SharedProgram:
    program: ir.Program
    workers: list[ir.Worker]
    buffers: list[ir.Buffer]
    locks: dict[str, ir.Lock]


def build_shared(plan: SharedPlan, device: Callable[[], Any] = ir.NPU1) -> SharedProgram:
    """The prototype lowering of one shared operand, in 1.4.3's IRON calls (a fresh stand-in each time).

    Per buffer i on tile H_i: empty_i (init 2: both readers' slots), full_i and relay_i (init 0), all on
    H_i. H_i's DMA: S2MM channel 0, one BD per buffer it holds, each acquire-greater-equal empty_i 2,
    write buffer i, release full_i 1. The reader on H_i leads buffer i: acquire full_i 1, release relay_i 1,
    read, release empty_i 1; the other reader acquires relay_i 1, reads, releases empty_i 1. The memtile
    holds the operand's two objects (their own empty/full locks) and feeds each holding tile from one
    MM2S channel (a tile holding both buffers gets them alternately on one channel); the shim fills the
    memtile through a Flow with a shim_symbol, which the runtime sequence drives with
    shim_dma_single_bd_task (the sequence here drives nothing; test_shim_tasks.py records that leg)."""
    ir.api()
    col = plan.readers[0][0]
    shim, mem = ir.Tile(col, 0), ir.Tile(col, 1)
    tiles = {at: ir.Tile(*at) for at in (*plan.readers, *plan.holds)}
    buffers = [ir.Buffer(B_TY, name=f"b{i}", tile=tiles[plan.holds[i]]) for i in range(2)]
    locks: dict[str, ir.Lock] = {}

    def lock(name: str, at: ir.Tile, init: int) -> ir.Lock:
        locks[name] = ir.Lock(at, init=init, name=name)
        return locks[name]

    if plan.protocol == "shared_empty":
        shared_empty = lock("empty", tiles[plan.holds[0]], 4)
    empty = [shared_empty if plan.protocol == "shared_empty" else lock(f"empty{i}", tiles[plan.holds[i]], 2)
             for i in range(2)]
    full = [lock(f"full{i}", tiles[plan.holds[i]], 0) for i in range(2)]
    relay = [lock(f"relay{i}", tiles[plan.holds[i]], 0) for i in range(2)] if plan.protocol != "two_tokens" else []
    leader = [plan.holds[i] if plan.holds[i] in plan.readers else plan.readers[0] for i in range(2)]

    def core_for(me: Coord) -> Callable[..., None]:
        def core(kernel: ir.Kernel, bufs: list[ir.Buffer], _locks: list[ir.Lock]) -> None:
            for _ in ir.range_(plan.pairs):
                for i in (0, 1):
                    if plan.protocol == "two_tokens":
                        full[i].acquire(1)
                    elif leader[i] == me:
                        full[i].acquire(1)
                        relay[i].release(1)
                    else:
                        relay[i].acquire(1)
                    kernel(bufs[i])
                    empty[i].release(1)
        return core

    kernel = ir.Kernel("read_b", "read_b.o", [B_TY])
    all_locks = list(locks.values())
    workers = [ir.Worker(core_for(at), [kernel, buffers, all_locks], tile=tiles[at]) for at in plan.readers]

    # the memtile: two objects, each with its empty/full pair
    mbuf = [ir.Buffer(B_TY, name=f"m{i}", tile=mem) for i in range(2)]
    mempty = [lock(f"m_empty{i}", mem, 1) for i in range(2)]
    mfull = [lock(f"m_full{i}", mem, 0) for i in range(2)]
    fill = ir.DmaChannel(ir.DMAChannelDir.S2MM, 0, [
        ir.Bd(mbuf[i], acquires=[ir.Acquire(mempty[i])], releases=[ir.Release(mfull[i])], next=1 - i)
        for i in range(2)])
    holders = sorted(set(plan.holds), key=plan.holds.index)
    sends, flows = [], [ir.Flow(shim, mem, src_channel=0, dst_channel=0, shim_symbol="B_in")]
    for ch, at in enumerate(holders):
        mine = [i for i in range(2) if plan.holds[i] == at]
        sends.append(ir.DmaChannel(ir.DMAChannelDir.MM2S, ch, [
            ir.Bd(mbuf[i], acquires=[ir.Acquire(mfull[i])], releases=[ir.Release(mempty[i])],
                  next=(j + 1) % len(mine)) for j, i in enumerate(mine)]))
        flows.append(ir.Flow(mem, tiles[at], src_channel=ch, dst_channel=0))
    dmas = [ir.TileDma(mem, [fill, *sends])]
    for at in holders:  # each holding core's S2MM fills the buffers it holds, in object order
        mine = [i for i in range(2) if plan.holds[i] == at]
        tokens = 2 if plan.protocol == "two_tokens" else 1
        dmas.append(ir.TileDma(tiles[at], [ir.DmaChannel(ir.DMAChannelDir.S2MM, 0, [
            ir.Bd(buffers[i], acquires=[ir.Acquire(empty[i], value=2)], releases=[ir.Release(full[i], value=tokens)],
                  next=(j + 1) % len(mine)) for j, i in enumerate(mine)])]))

    rt = ir.Runtime(lambda b: None, [np.ndarray[(64 * plan.objects,), np.dtype[np.int32]]])
    for lk in locks.values():
        rt.add_lock(lk)
    for f in flows:
        rt.add_flow(f)
    for td in dmas:
        rt.add_tile_dma(td)
    program = ir.Program(device(), rt, workers=workers)
    program.resolve_program()
    return SharedProgram(program, workers, buffers, locks)


# ---- an exhaustive check of the recorded lock protocol ------------------------------------------------------
DIRTY, EMPTY = -2, -1


@dataclass(frozen=True)
class Verdict:
    ok: bool
    states: int
    max_lock: int
    problem: str = ""


def _unroll(trace: list[tuple]) -> list[tuple]:
    """A Worker's core trace with its range_ loops unrolled, as ("lk", lock, action, value) and ("read", buffer)."""
    out: list[tuple] = []
    i = 0
    while i < len(trace):
        op = trace[i]
        if op[0] == "loop":
            depth, j = 1, i + 1
            while depth:
                depth += {"loop": 1, "end": -1}.get(trace[j][0], 0)
                j += 1
            out += _unroll(trace[i + 1:j - 1]) * int(op[1])
            i = j
            continue
        if op[0] == "lock":
            out.append(("lk", op[1], op[2], op[3]))
        elif op[0] == "call":
            out += [("read", a.name) for a in op[2] if isinstance(a, ir.Buffer)]
        i += 1
    return out


def explore(shared: SharedProgram, objects: int) -> Verdict:
    """Every interleaving of the two cores and of the core tiles' S2MM channels (their streams always hold the
    next object: object n goes to buffer b{n % 2}), with AIE2 lock semantics (acquire-greater-equal v waits for
    >= v and takes v, acquire-equal v waits for == v and takes nothing, release adds v: AIEDeadlockModel.cpp and
    the 1.4.3 programming guide section 2g). A DMA write and a core read each take two steps, so a write into a
    buffer a core is still reading is seen. Fails on a read of the wrong object, a buffer overwritten during a
    read, a lock past 63, or a state where the cores are not done and nothing can move."""
    program = shared.program
    names = sorted(lk.name for lk in program.rt.locks)
    index = {n: k for k, n in enumerate(names)}
    cores = [_unroll(w.trace) for w in program.workers]
    bufs = sorted({op[1] for c in cores for op in c if op[0] == "read"})
    bix = {b: k for k, b in enumerate(bufs)}
    chains = []
    for td in program.rt.tile_dmas:
        if ir.tile_kind(td.tile) != "CoreTile":
            continue
        for ch in td.channels:
            chains.append([(bix[bd.buffer.name],
                            (index[bd.acquires[0].lock.name], bd.acquires[0].value, bd.acquires[0].greater_equal)
                            if bd.acquires else None,
                            (index[bd.releases[0].lock.name], bd.releases[0].value) if bd.releases else None,
                            bd.successor(k, len(ch.bds))) for k, bd in enumerate(ch.bds)])
    start = (tuple(next(lk.init for lk in program.rt.locks if lk.name == n) for n in names),
             tuple((0, 0, 0) for _ in cores), tuple((0, 0) for _ in chains),
             tuple(EMPTY for _ in bufs), tuple(int(b[1:]) for b in bufs))
    seen, queue, max_lock = {start}, deque([start]), max(start[0])

    def can_acquire(value: int, want: int, ge: bool) -> bool:
        return value >= want if ge else value == want

    while queue:
        locks, cs, ds, content, nxt = queue.popleft()
        moves = []
        for c, (pc, phase, reads) in enumerate(cs):
            if pc == len(cores[c]):
                continue
            op = cores[c][pc]
            lk = list(locks)
            if op[0] == "lk":
                k = index[op[1]]
                if op[2] == "release":
                    lk[k] += op[3]
                elif not can_acquire(lk[k], op[3], op[2] == "acquire_ge"):
                    continue
                elif op[2] == "acquire_ge":
                    lk[k] -= op[3]
                moves.append((tuple(lk), _set(cs, c, (pc + 1, 0, reads)), ds, content, nxt))
            else:
                held = content[bix[op[1]]]
                if held != reads:
                    when = "starts" if phase == 0 else "ends"
                    return Verdict(False, len(seen), max_lock,
                                   f"core {program.workers[c].tile} {when} reading {op[1]} for object {reads} but it "
                                   f"holds {'a write in progress' if held == DIRTY else held}")
                moves.append((locks, _set(cs, c, (pc, 1, reads) if phase == 0 else (pc + 1, 0, reads + 1)), ds,
                              content, nxt))
        for d, (bd, phase) in enumerate(ds):
            buf, acq, rel, succ = chains[d][bd]
            lk, cont, nx = list(locks), list(content), list(nxt)
            if phase == 0:
                if nx[buf] >= objects or (acq and not can_acquire(lk[acq[0]], acq[1], acq[2])):
                    continue
                if acq and acq[2]:
                    lk[acq[0]] -= acq[1]
                cont[buf] = DIRTY
                new = (bd, 1)
            else:
                cont[buf], nx[buf] = nx[buf], nx[buf] + 2
                if rel:
                    lk[rel[0]] += rel[1]
                new = (succ if succ is not None else bd, 0)
            moves.append((tuple(lk), cs, _set(ds, d, new), tuple(cont), tuple(nx)))
        if not moves and any(pc < len(cores[c]) for c, (pc, _p, _r) in enumerate(cs)):
            return Verdict(False, len(seen), max_lock, f"deadlock: cores at {[pc for pc, _p, _r in cs]} of "
                                                       f"{[len(c) for c in cores]}, locks {dict(zip(names, locks))}")
        for m in moves:
            max_lock = max(max_lock, *m[0])
            if max_lock > ir.LOCK_VALUE_MAX:
                return Verdict(False, len(seen), max_lock, f"a lock passes {ir.LOCK_VALUE_MAX}")
            if m not in seen:
                seen.add(m)
                queue.append(m)
    return Verdict(True, len(seen), max_lock)


def _set(t: tuple, i: int, v: Any) -> tuple:
    return t[:i] + (v,) + t[i + 1:]


# ---- the prototype resolves at 1.4.3 and its protocol holds -----------------------------------------------
@pytest.mark.parametrize("plan", [B_VERTICAL_HOLDER, B_VERTICAL_SPLIT, A_HORIZONTAL_WEST],
                         ids=["B-one-holder", "B-ping-pong-split", "A-west-holder"])
@pytest.mark.parametrize("device", [ir.NPU1, ir.NPU2], ids=["npu1", "npu2"])
def test_the_prototype_lowers_with_1_4_3_primitives(plan: SharedPlan, device: Callable[[], Any]) -> None:
    """Each reader's kernel reads both shared buffers in place; the buffers and their locks sit on the holding
    tiles, which alone fill them; the reader that holds nothing has no B DMA at all."""
    shared = build_shared(plan, device)
    program = shared.program
    assert [b.tile.at() for b in shared.buffers] == list(plan.holds)
    for w in shared.workers:  # both cores call the kernel on b0 then b1, in place
        reads = [op[2][0].name for op in w.trace if op[0] == "call"]
        assert reads == ["b0", "b1"]
        assert {b.name for b in w.buffers} == {"b0", "b1"}  # 1.4.3 worker.py L178-179: a shared reader
    for i, at in enumerate(plan.holds):
        assert {shared.locks[n].tile.at() for n in (f"empty{i}", f"full{i}", f"relay{i}")} == {at}
    core_dmas = {td.tile.at(): td for td in program.rt.tile_dmas if ir.tile_kind(td.tile) == "CoreTile"}
    assert set(core_dmas) == set(plan.holds)
    for at, td in core_dmas.items():
        (channel,) = td.channels
        assert channel.direction == ir.DMAChannelDir.S2MM
        assert [bd.buffer.tile.at() for bd in channel.bds] == [at] * plan.holds.count(at)
        assert all(bd.acquires[0].value == 2 and bd.releases[0].value == 1 for bd in channel.bds)


@pytest.mark.parametrize("plan", [B_VERTICAL_HOLDER, B_VERTICAL_SPLIT, A_HORIZONTAL_WEST],
                         ids=["B-one-holder", "B-ping-pong-split", "A-west-holder"])
def test_the_relay_protocol_holds_in_every_interleaving(plan: SharedPlan) -> None:
    """Every read sees its object, nothing is overwritten under a reader, nothing waits forever, and no lock
    counts past 2."""
    plan = SharedPlan(plan.readers, plan.holds, pairs=3)
    verdict = explore(build_shared(plan), plan.objects)
    assert verdict.ok, verdict.problem
    assert verdict.states > 100 and verdict.max_lock == 2


@pytest.mark.parametrize("protocol,problem", [
    ("two_tokens", "reading b0 for object 2 but it holds 0"),  # a fast reader takes the slow one's token
    ("shared_empty", "holds a write in progress"),  # the leader's two releases let the DMA refill a read buffer
])
def test_the_check_catches_protocols_that_race(protocol: str, problem: str) -> None:
    plan = SharedPlan(B_VERTICAL_HOLDER.readers, B_VERTICAL_HOLDER.holds, protocol=protocol)
    verdict = explore(build_shared(plan), plan.objects)
    assert not verdict.ok and problem in verdict.problem


def test_the_check_catches_a_deadlock() -> None:
    """An empty count that starts at 1 never lets the DMA take 2: the cores wait forever."""
    shared = build_shared(B_VERTICAL_HOLDER)
    shared.locks["empty0"]._init = 1
    verdict = explore(shared, B_VERTICAL_HOLDER.objects)
    assert not verdict.ok and verdict.problem.startswith("deadlock")


# ---- the rules 1.4.3 refuses the placed ops by, each broken once ----------------------------------------------
def _core_reads(buffer_at: Coord, core_at: Coord, lock_at: Coord | None = None, device=ir.NPU1) -> None:
    """A Worker on `core_at` calls a kernel on a Buffer placed on `buffer_at` (and, with `lock_at`, first
    acquires a Lock placed there)."""
    ir.api()
    buf = ir.Buffer(B_TY, name="x", tile=ir.Tile(*buffer_at))
    kernel = ir.Kernel("read_b", "read_b.o", [B_TY])
    lk = ir.Lock(ir.Tile(*lock_at), init=1, name="l") if lock_at else None

    def body(k: ir.Kernel, b: ir.Buffer, *held: ir.Lock) -> None:
        for _ in ir.range_(1):
            if held:
                held[0].acquire(1)
            k(b)

    w = ir.Worker(body, [kernel, buf] + ([lk] if lk else []), tile=ir.Tile(*core_at))
    rt = ir.Runtime(lambda: None)
    if lk:
        rt.add_lock(lk)
    ir.Program(device(), rt, workers=[w]).resolve_program()


def _unreachable(op: str, thing: Coord, user: Coord) -> str:
    return (f"'{op}' op in Column {thing[0]} and Row {thing[1]} is accessed from an unreachable tile in Column "
            f"{user[0]} and Row {user[1]}")


@pytest.mark.parametrize("buffer_at,core_at", [((1, 3), (1, 3)), ((1, 4), (1, 3)), ((1, 2), (1, 3)),
                                               ((0, 3), (1, 3))], ids=["own", "north", "south", "west"])
def test_a_core_reads_its_own_and_its_west_north_and_south_neighbours(buffer_at: Coord, core_at: Coord) -> None:
    _core_reads(buffer_at, core_at)
    _core_reads(core_at, core_at, lock_at=buffer_at)  # and uses their locks


@pytest.mark.parametrize("buffer_at,core_at", [((2, 3), (1, 3)), ((1, 5), (1, 3)), ((0, 4), (1, 3)),
                                               ((1, 1), (1, 2))],
                         ids=["east", "two-rows-up", "diagonal", "memtile-south"])
def test_a_core_reaching_past_its_neighbours_is_refused(buffer_at: Coord, core_at: Coord) -> None:
    """UsesAreAccessible (AIEDialect.cpp 287-334 at 1.4.3) with AIE2's isLegalMemAffinity (AIETargetModel.cpp
    810-824): the east neighbour's memory (isMemEast is the tile itself), a tile two away, a diagonal one and
    a memtile below are out of reach, for a buffer and for a lock."""
    with pytest.raises(ValueError) as info:
        _core_reads(buffer_at, core_at)
    assert str(info.value) == _unreachable("aie.buffer", buffer_at, core_at)
    with pytest.raises(ValueError) as info:
        _core_reads(core_at, core_at, lock_at=buffer_at)
    assert str(info.value) == _unreachable("aie.lock", buffer_at, core_at)


def test_affinity_is_aie2s_on_npu2_too() -> None:
    _core_reads((6, 3), (7, 3), device=ir.NPU2)
    with pytest.raises(ValueError, match="unreachable tile in Column 6 and Row 3"):
        _core_reads((7, 3), (6, 3), device=ir.NPU2)


def _dma(tile_at: Coord, buffer_at: Coord, lock_at: Coord | None = None, bds: int = 1, acquires: int = 1,
         releases: int = 1, channel: int = 0, value: Any = 1, flow: bool = True, add_lock: bool = True,
         fifo_ends: int = 0, locks: int = 0, out_of_order: bool = False, twice: bool = False) -> None:
    """A TileDma on `tile_at` whose S2MM `channel` fills a Buffer on `buffer_at` (`bds` BDs, each with that many
    acquires and releases of a lock on `lock_at`); `fifo_ends` ObjectFifos end in a Worker on the tile and
    `locks` more Locks sit there; `twice`: a second TileDma program for the tile."""
    ir.api()
    tile = ir.Tile(*tile_at)
    buf = ir.Buffer(B_TY, name="x", tile=ir.Tile(*buffer_at))
    lk = ir.Lock(ir.Tile(*(lock_at or buffer_at)), init=1, name="l")
    chain = [ir.Bd(buf, acquires=[ir.Acquire(lk, value=value)] * acquires, releases=[ir.Release(lk, value=value)] *
                   releases, next=(k + 1) % bds) for k in range(bds)]
    fifos = [ir.ObjectFifo(B_TY, name=f"f{k}", depth=2) for k in range(fifo_ends)]
    rt = ir.Runtime(lambda *handles: None, [f.prod(tile=ir.Tile(tile_at[0], 0)) for f in fifos])
    rt.add_tile_dma(ir.TileDma(tile, [ir.DmaChannel(ir.DMAChannelDir.S2MM, channel, chain, out_of_order=out_of_order)]))
    if twice:
        rt.add_tile_dma(ir.TileDma(tile, [ir.DmaChannel(ir.DMAChannelDir.S2MM, channel, chain)]))
    if flow:
        rt.add_flow(ir.Flow(ir.Tile(tile_at[0], 1 if ir.tile_kind(tile) == "CoreTile" else 0), tile,
                            dst_channel=channel))
    if add_lock:
        rt.add_lock(lk)
    for k in range(locks):
        rt.add_lock(ir.Lock(tile, name=f"extra{k}"))
    workers = [ir.Worker(lambda *hs: None, [f.cons() for f in fifos], tile=tile)] if fifos else []
    ir.Program(ir.NPU1(), rt, workers=workers).resolve_program()


def test_a_core_tiles_dma_fills_only_its_own_memory_with_its_own_locks() -> None:
    """DMABDOp::verify 3226-3229 and UseLockOp::verify 4053-4055 at 1.4.3: the neighbour a core may read is out
    of its DMA's reach; a memtile's DMA reaches its east and west memtiles but no core."""
    _dma((0, 2), (0, 2))
    with pytest.raises(ValueError, match=r"^'aie.dma_bd' op Core tile DMAs can only access a buffer in the same tile"):
        _dma((0, 3), (0, 2))
    with pytest.raises(ValueError, match=r"^'aie.use_lock' op can only access a lock in the same tile$"):
        _dma((0, 3), (0, 3), lock_at=(0, 2))
    with pytest.raises(ValueError) as info:
        _dma((0, 1), (0, 2))
    assert str(info.value) == _unreachable("aie.buffer", (0, 2), (0, 1))


def test_lock_ids_and_counts_per_tile() -> None:
    """LockOp::verify 3938-3954 at 1.4.3 (getNumLocks: 16 on a core, 64 on a memtile) and aie-assign-lock-ids:
    every lock of a tile within that count, the fifos' pool locks (2 per pool) included."""
    ir.api()
    with pytest.raises(ValueError, match=r"^'aie.lock' op lock assigned invalid id \(maximum is 15\)$"):
        _one_lock((0, 2), lock_id=16)
    _one_lock((0, 1), lock_id=63)
    with pytest.raises(ValueError, match=r"^'aie.lock' op lock assigned invalid id \(maximum is 63\)$"):
        _one_lock((0, 1), lock_id=64)
    _dma((0, 2), (0, 2), locks=15)  # 16 locks on the core
    with pytest.raises(ValueError, match=r"^'aie.lock' op not allocated a lock\."):
        _dma((0, 2), (0, 2), locks=16)
    _dma((0, 2), (0, 2), locks=11, fifo_ends=1, channel=1)  # 12 + one fifo pool's 2 = 14
    with pytest.raises(ValueError, match=r"^'aie.lock' op not allocated a lock\."):
        _dma((0, 2), (0, 2), locks=14, fifo_ends=1, channel=1)  # 15 + 2


def _one_lock(at: Coord, lock_id: int | None = None, init: int = 0, twice: bool = False) -> None:
    ir.api()
    rt = ir.Runtime(lambda: None)
    rt.add_lock(ir.Lock(ir.Tile(*at), lock_id=lock_id, init=init, name="a"))
    if twice:
        rt.add_lock(ir.Lock(ir.Tile(*at), lock_id=lock_id, name="b"))
    ir.Program(ir.NPU1(), rt).resolve_program()


def test_two_locks_with_one_id_are_refused() -> None:
    with pytest.raises(ValueError, match=r"^'aie.lock' op is assigned to the same lock \(3\) as another op\.$"):
        _one_lock((0, 2), lock_id=3, twice=True)


def test_lock_values_stay_inside_the_six_bit_state() -> None:
    """The lock state is 6 bits (AM020; getMaxLockValue 0x3F at 1.4.3): an initial value or a BD's value past 63
    is refused (the stand-in's own placement of the bound, docs/shared_l1.md)."""
    _one_lock((0, 2), init=63)
    with pytest.raises(ValueError, match="outside the 6-bit lock state"):
        _one_lock((0, 2), init=64)
    _dma((0, 2), (0, 2), value=63)
    with pytest.raises(ValueError, match="a BD's lock value 64 is outside"):
        _dma((0, 2), (0, 2), value=64)


def test_a_lock_the_runtime_was_not_given_has_no_op() -> None:
    """program.py L206-207 at 1.4.3 resolves only Runtime.add_lock's locks; a core or a BD using another one
    fails where it asks for the lock's op."""
    with pytest.raises(ir.NotResolvedError):
        _dma((0, 2), (0, 2), add_lock=False)
    ir.api()
    lk = ir.Lock(ir.Tile(0, 2), init=1)
    w = ir.Worker(lambda held: held.acquire(1), [lk], tile=ir.Tile(0, 2))
    with pytest.raises(ir.NotResolvedError):
        ir.Program(ir.NPU1(), ir.Runtime(lambda: None), workers=[w]).resolve_program()


def test_a_lock_used_outside_a_core_is_refused() -> None:
    """UseLockOp::verify 4073-4076 at 1.4.3: a use_lock in the runtime sequence has no core or DMA parent."""
    ir.api()
    lk = ir.Lock(ir.Tile(0, 2), init=1)
    rt = ir.Runtime(lambda: lk.release(1))
    rt.add_lock(lk)
    with pytest.raises(ValueError, match=r"^'aie.use_lock' op expects some parent op to be one of"):
        ir.Program(ir.NPU1(), rt).resolve_program()


def test_a_bd_has_one_acquire_and_one_release() -> None:
    """HasValidBDs 395-420 at 1.4.3 (IRON's Bd takes lists; the verifier takes one of each)."""
    with pytest.raises(ValueError, match=r"^'aie.mem' op BD block must have at most one acquire UseLockOp, found 2$"):
        _dma((0, 2), (0, 2), acquires=2)
    with pytest.raises(ValueError, match=r"^'aie.mem' op BD block must have at most one release UseLockOp, found 2$"):
        _dma((0, 2), (0, 2), releases=2)


def test_a_bd_with_a_lock_acquires_and_releases() -> None:
    """aiecc's configureLocksInBdBlock (lib/Targets/AIERT.cpp 371-374 at 1.4.3): a BD that acquires and releases
    nothing, or one that acquires one lock and releases one, is configured; one that only acquires or only releases
    is refused (an out-of-order channel's BD may only release), on a core tile and on a memtile. So a chain whose
    first BD acquires and whose last releases (the BDs between taking no lock) is not a legal way to hold one buffer
    over several BDs."""
    message = r"^'aie.use_lock' op buffer descriptor with a lock must have both use_lock\(acquire\) and"
    for at in ((0, 2), (0, 1)):
        _dma(at, at, bds=3, acquires=0, releases=0)
        _dma(at, at, bds=3)
        with pytest.raises(ValueError, match=message):
            _dma(at, at, acquires=1, releases=0)
        with pytest.raises(ValueError, match=message):
            _dma(at, at, acquires=0, releases=1)
    _dma((0, 2), (0, 2), acquires=0, releases=1, out_of_order=True)


def test_a_memtile_has_48_bds_and_6_channels_each_way() -> None:
    """HasValidBDs and HasValidDMAChannels at 1.4.3 with a memtile's getNumBDs (48) and its 6 channels each way."""
    _dma((0, 1), (0, 1), bds=48)
    with pytest.raises(ValueError, match=r"^'aie.memtile_dma' op has more than 48 blocks$"):
        _dma((0, 1), (0, 1), bds=49)
    _dma((0, 1), (0, 1), channel=5)
    with pytest.raises(ValueError, match=r"^'aie.memtile_dma' op uses more input channels than available"):
        _dma((0, 1), (0, 1), channel=6)


def test_a_memtile_dma_reaches_its_east_and_west_memtiles() -> None:
    """isLegalMemAffinity at 1.4.3 (AIETargetModel.cpp 818-821): a memtile's DMA reaches its own and its neighbouring
    memtiles' memory, not one two columns away."""
    _dma((1, 1), (0, 1), lock_at=(1, 1))
    _dma((1, 1), (2, 1), lock_at=(1, 1))
    with pytest.raises(ValueError) as info:
        _dma((1, 1), (3, 1), lock_at=(1, 1))
    assert str(info.value) == _unreachable("aie.buffer", (3, 1), (1, 1))


def test_a_tile_has_one_tiledma_program_and_int_lock_values() -> None:
    """The stand-in's own refusals: two TileDma programs on one tile; a BD lock value that is not an int."""
    with pytest.raises(ValueError, match="two TileDma programs"):
        _dma((0, 2), (0, 2), twice=True)
    with pytest.raises(TypeError, match="a BD's lock value is an int"):
        _dma((0, 2), (0, 2), value=1.0)


def test_a_tile_has_16_bds_its_fifos_included() -> None:
    """HasValidBDs 380-383 at 1.4.3 (getNumBDs 16 on a core): the explicit BDs and the fifos' on one aie.mem."""
    _dma((0, 2), (0, 2), bds=16)
    with pytest.raises(ValueError, match=r"^'aie.mem' op has more than 16 blocks$"):
        _dma((0, 2), (0, 2), bds=17)
    with pytest.raises(ValueError, match=r"^'aie.mem' op has more than 16 blocks$"):
        _dma((0, 2), (0, 2), bds=15, fifo_ends=1, channel=1)  # 15 + a depth-2 fifo end


def test_a_core_has_two_dma_channels_each_way_its_fifos_included() -> None:
    with pytest.raises(ValueError, match=r"^'aie.mem' op uses more input channels than available on this tile$"):
        _dma((0, 2), (0, 2), channel=2)
    _dma((0, 2), (0, 2), fifo_ends=1, channel=1)
    with pytest.raises(ValueError, match=r"^'aie.tile' op number of input DMA channel exceeded!$"):
        _dma((0, 2), (0, 2), fifo_ends=2, channel=1)


def test_a_dma_channel_without_a_flow_is_refused() -> None:
    with pytest.raises(ValueError, match="has no Flow: the stand-in's own refusal"):
        _dma((0, 2), (0, 2), flow=False)


# ---- the 1.4.3 signatures of the primitives the prototype calls -----------------------------------------------
PRIMITIVES = {
    "aie.iron.Lock.__init__": lambda: ir.Lock.__init__,
    "aie.iron.Lock.acquire": lambda: ir.Lock.acquire,
    "aie.iron.Lock.acquire_exact": lambda: ir.Lock.acquire_exact,
    "aie.iron.Lock.release": lambda: ir.Lock.release,
    "aie.iron.dataflow.tile_dma.Acquire.__init__": lambda: ir.Acquire.__init__,
    "aie.iron.dataflow.tile_dma.Release.__init__": lambda: ir.Release.__init__,
    "aie.iron.dataflow.tile_dma.Bd.__init__": lambda: ir.Bd.__init__,
    "aie.iron.dataflow.tile_dma.DmaChannel.__init__": lambda: ir.DmaChannel.__init__,
    "aie.iron.dataflow.tile_dma.TileDma.__init__": lambda: ir.TileDma.__init__,
    "aie.iron.dataflow.Flow.__init__": lambda: ir.Flow.__init__,
    "aie.iron.Runtime.add_flow": lambda: ir.Runtime.add_flow,
    "aie.iron.Runtime.add_lock": lambda: ir.Runtime.add_lock,
    "aie.iron.Runtime.add_tile_dma": lambda: ir.Runtime.add_tile_dma,
}


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_the_primitives_signatures_are_the_pinned_releases(name: str) -> None:
    got = [(p.name, p.kind.name, p.default is not inspect.Parameter.empty)
           for p in inspect.signature(PRIMITIVES[name]()).parameters.values()]
    entry = pins.iron_table()["signatures"][name]
    assert got == [(p["name"], p["kind"], p["default"] is not None) for p in entry["params"]]
    assert entry["confirmed_at_tag"] and entry["source"].startswith("1.4.3/api/iron/index.html")
