"""Where mlir-aie 1.4.3 puts a core's L1 buffers, which banks the DMA and the core then share, and
the allocation we ask for.

A core's 64 KiB of data memory is 4 banks of 16 KiB (AM020; mlir-aie getNumBanks). In each k-step
the core reads the current A and B objects (and C, and its own scratch) while the DMA writes the
next A and B objects: a DMA write and a core access to the same bank in one cycle stall one of them
(AM020: a round-robin arbiter per bank). So the DMA-written half of each ping-pong pair should share
no bank with anything the core reads at the same time (the GAMA paper's placement rules).

What mlir-aie 1.4.3 lets a design choose (IRON at the pin): the allocation scheme per worker
(`allocation_scheme="bank-aware"` or `"basic-sequential"`), and the address or bank of its own
`Buffer`s; ObjectFifo buffers carry neither (AIEObjectFifoAllocate creates them with no address or
mem_bank). So we reimplement the two allocators of AIEAssignBuffers.cpp at 1.4.3 (its release
Doxygen render, lines 274-387 and 765-1085: PR #3560's exact-occupancy bank-aware allocator), predict
the placement of every scheme for the design's buffers, and pick the one whose DMA-written buffers
share the fewest banks with the core's. Two points of the prediction are our reading, not the
source's: the order of equal-sized buffers (IR order: we try every order of equal-sized ObjectFifos
and keep the worst), and the `cap` of the bank-aware ranking (the bytes still to place after the
buffer). The placement is a prediction until mlir-aie's `--get-input-with-addresses` shows it.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from ..facts.devices import Device
from ..facts.errors import ConfigError, opt
from ..spec.config import L1_SCHEMES as SCHEMES
from ..spec.config import GemmConfig
from ..spec.rules import shared_l1
from ..spec.rules.l1 import B_DEQ_PART, RTP_PART, TANH_PARTS, b_object_bytes

BANK_WORD_BYTES = 16  # AM020: each bank is 128 bits wide


@dataclass(frozen=True)
class L1Buffer:
    """One buffer in a core's data memory, as the allocator sees it."""

    name: str
    nbytes: int
    # "A", "B", "C" (ObjectFifo objects), "scratch" (a worker Buffer), "table" (a copy of the tanh table, a
    # worker Buffer with an initial value, pinned to its bank), "reserve" (an unused one)
    role: str
    slot: int = 0  # which object of its fifo (buff_0, buff_1)
    fifo: bool = True
    mem_bank: int | None = None  # pinned bank (worker Buffers only)
    address: int | None = None  # pinned address (worker Buffers only: the reservations)
    aligned: bool = True  # aie.buffer's `aligned` (ours always are)
    # a neighbour's buffer this core reads in place (neighbour-shared L1, spec/rules/shared_l1.py): in the
    # concurrency of its phases, never placed in this core's memory
    remote: bool = False


@dataclass(frozen=True)
class Placed:
    buffer: L1Buffer
    address: int

    @property
    def end(self) -> int:
        return self.address + self.buffer.nbytes

    def banks(self, bank_bytes: int) -> range:
        return range(self.address // bank_bytes, (self.end - 1) // bank_bytes + 1)


@dataclass(frozen=True)
class Conflict:
    """A buffer the DMA accesses while the core accesses another one in the same bank."""

    dma: str  # buffer name
    core: str
    bank: int
    dma_bytes: int  # bytes of the DMA's buffer in that bank


@dataclass(frozen=True)
class L1Plan:
    """The allocation a design asks for and what it predicts."""

    scheme: str
    reserved: tuple[tuple[int, int], ...]  # (address, bytes) held by unused worker Buffers to steer the allocator
    placed: tuple[Placed, ...]  # for the assumed IR order (A, B, C: our fifos' creation and name order)
    conflicts: tuple[Conflict, ...]  # in that order
    worst_conflict_bytes: int  # the most over the other orders of equal-sized fifos
    order_dependent: bool  # whether another order of equal-sized fifos changes the conflicts
    bank_bytes: int
    stack_bytes: int
    # neighbour-shared L1: GAMA's placement rules this core's own shared buffers break (`gama`), best first
    gama: tuple[str, ...] = ()

    def bank_map(self) -> list[list[str]]:
        """Per bank, the buffers that touch it (the stack first)."""
        out: list[list[str]] = [[] for _ in range(4)]
        for b in range(4):
            if b * self.bank_bytes < self.stack_bytes:
                out[b].append("stack")
        for p in sorted(self.placed, key=lambda p: p.address):
            for b in p.banks(self.bank_bytes):
                out[b].append("reserved" if p.buffer.role == "reserve" else p.buffer.name)
        return out

    def mem_bank(self, name: str) -> int | None:
        """The bank a buffer of the plan is pinned to (the tanh table's copies), if any."""
        return next((p.buffer.mem_bank for p in self.placed if p.buffer.name == name), None)

    @property
    def conflict_bytes(self) -> int:
        return sum(f.dma_bytes for f in self.conflicts)

    def summary(self) -> dict[str, object]:
        """What plan and the design JSON both report of the plan."""
        out: dict[str, object] = {"scheme": self.scheme, "bank_map": self.bank_map(),
                                  "conflict_bytes": self.conflict_bytes,
                                  "worst_conflict_bytes": self.worst_conflict_bytes,
                                  "order_dependent": self.order_dependent}
        return out | ({"gama": list(self.gama)} if self.gama else {})


@dataclass(frozen=True)
class CoreMemory:
    """What AIEAssignBuffers knows of a compute tile's data memory (AIETargetModel at 1.4.3)."""

    nbytes: int
    banks: int
    bus_bytes: int  # getCompute... bus width: every aligned buffer, and every address pin, aligns to it
    vector_bytes: int  # the widest vector access: aligned buffers at least this big align to it

    @classmethod
    def of(cls, dev: Device) -> CoreMemory:
        # AIE2 (npu1): bus 256 bits, vectors 256; AIE2P (npu2): bus 256, vectors 512 bits
        return cls(dev.l1_bytes, 4, 32, 64 if dev.aie_target == "aie2p" else 32)

    @property
    def bank_bytes(self) -> int:
        return self.nbytes // self.banks

    def align(self, b: L1Buffer) -> int:
        """AIEAssignBuffers l.143-151, 579-586: 1 for an unaligned buffer, else the vector width
        when it is wider than the bus and the buffer holds a whole vector, else the bus width."""
        if not b.aligned:
            return 1
        return self.vector_bytes if self.vector_bytes > self.bus_bytes and b.nbytes >= self.vector_bytes \
            else self.bus_bytes


def _up(x: int, a: int) -> int:
    return -(-x // a) * a


def _down(x: int, a: int) -> int:
    return x // a * a


def _gaps(taken: list[tuple[int, int]], size: int) -> list[tuple[int, int]]:
    out, pos = [], 0
    for lo, hi in sorted(taken):
        if lo > pos:
            out.append((pos, lo))
        pos = max(pos, hi)
    if pos < size:
        out.append((pos, size))
    return out


def _pin_addresses(mem: CoreMemory, buffers: Sequence[L1Buffer], taken: list[tuple[int, int]]
                   ) -> list[Placed] | None:
    """Address-pinned buffers, in address order, exactly where they ask (l.923-960): on the bus
    alignment when aligned, inside the tile, on free bytes."""
    out = []
    for b in sorted((b for b in buffers if b.address is not None), key=lambda b: b.address or 0):
        at = b.address or 0
        if (b.aligned and at % mem.bus_bytes) or at + b.nbytes > mem.nbytes or \
                any(at < hi and lo < at + b.nbytes for lo, hi in taken):
            return None
        taken.append((at, at + b.nbytes))
        out.append(Placed(b, at))
    return out


def basic_sequential(dev: Device, buffers: list[L1Buffer], stack: int) -> list[Placed] | None:
    """basicAllocation (l.274-387): address pins where they are; the rest largest first (stable),
    from the stack upward, each aligned and moved past any pin it would overlap (mem_bank dropped)."""
    placed = _basic_sequential(CoreMemory.of(dev), tuple(buffers), stack)
    return None if placed is None else list(placed)


# The allocators read nothing of a device but its core memory: each allocation of the same buffers in the same
# memory is computed once (the search and the designs it builds ask for the same ones many times)
@lru_cache(maxsize=1 << 14)
def _basic_sequential(mem: CoreMemory, buffers: tuple[L1Buffer, ...], stack: int) -> tuple[Placed, ...] | None:
    taken: list[tuple[int, int]] = []
    out = _pin_addresses(mem, buffers, taken)
    if out is None:
        return None
    pins = sorted(taken)
    pos = stack
    for b in sorted((b for b in buffers if b.address is None), key=lambda b: -b.nbytes):
        pos = _up(pos, mem.align(b))
        for lo, hi in pins:
            if pos < hi and lo < pos + b.nbytes:
                pos = _up(hi, mem.align(b))
        out.append(Placed(b, pos))
        pos += b.nbytes
    return tuple(out) if max((p.end for p in out), default=0) <= mem.nbytes else None


def bank_aware(dev: Device, buffers: list[L1Buffer], stack: int) -> list[Placed] | None:
    """simpleBankAwareAllocation (l.978-1085, PR #3560): address pins first; then the bank-pinned
    buffers, each in its bank at the low or flush-top end of a gap, whichever leaves the largest
    free run; then the rest, largest first (stable), each at the candidate (the tightest gap in
    each bank, in the tile, and from a bank boundary, at its aligned low end) that touches the
    fewest banks, leaves the largest free run (capped at the bytes still to place), lies nearest
    after the round-robin cursor, fits its gap best, and sits lowest. None when one finds no room."""
    placed = _bank_aware(CoreMemory.of(dev), tuple(buffers), stack)
    return None if placed is None else list(placed)


@lru_cache(maxsize=1 << 14)
def _bank_aware(mem: CoreMemory, buffers: tuple[L1Buffer, ...], stack: int) -> tuple[Placed, ...] | None:
    bank_bytes = mem.bank_bytes
    taken: list[tuple[int, int]] = [(0, stack)] if stack else []
    out = _pin_addresses(mem, buffers, taken)
    if out is None:
        return None

    def largest_run(extra: tuple[int, int]) -> int:
        return max((hi - lo for lo, hi in _gaps([*taken, extra], mem.nbytes)), default=0)

    def tightest(lo: int, hi: int, n: int, a: int) -> tuple[int, int] | None:
        """findGap: among the free runs clipped to [lo, hi) where the aligned start fits, the one
        with the least slack (its clipped length minus n; the first on ties), at its aligned start."""
        best = None
        for g0, g1 in _gaps(taken, mem.nbytes):
            g0, g1 = max(g0, lo), min(g1, hi)
            at = _up(g0, a)
            if g0 < g1 and at + n <= g1 and (best is None or g1 - g0 - n < best[0]):
                best = (g1 - g0 - n, at)
        return best

    def slack_at(at: int, n: int) -> int:
        return next(g1 - g0 - n for g0, g1 in _gaps(taken, mem.nbytes) if g0 <= at < g1)

    rest = sorted((b for b in buffers if b.address is None), key=lambda b: (b.mem_bank is None, -b.nbytes))
    for group in ([b for b in rest if b.mem_bank is not None], [b for b in rest if b.mem_bank is None]):
        cursor = 0
        for i, b in enumerate(group):
            a, n = mem.align(b), b.nbytes
            if b.mem_bank is not None:  # findLeastFragmentingGap over its bank (l.436-470)
                blo, bhi = b.mem_bank * bank_bytes, (b.mem_bank + 1) * bank_bytes
                tries = []
                for g0, g1 in _gaps(taken, mem.nbytes):
                    g0, g1 = max(g0, blo), min(g1, bhi)
                    low = _up(g0, a)
                    if g0 < g1 and low + n <= g1:
                        tries += [(-largest_run((at, at + n)), at) for at in (low, max(_down(g1 - n, a), low))]
                if not tries:
                    return None
                at = min(tries)[1]
            else:
                cap = sum(x.nbytes for x in group[i + 1:])  # the bytes still to place after this one
                probes = [tightest(k * bank_bytes, (k + 1) * bank_bytes, n, a) for k in range(mem.banks)]
                probes.append(tightest(0, mem.nbytes, n, a))
                if bank_bytes % a == 0:
                    probes.append(tightest(0, mem.nbytes, n, bank_bytes))
                ranked = [((at + n - 1) // bank_bytes - at // bank_bytes + 1, -min(largest_run((at, at + n)), cap),
                           (at // bank_bytes - cursor) % mem.banks, slack_at(at, n), at)
                          for _, at in (x for x in probes if x is not None)]
                if not ranked:
                    return None
                at = min(ranked)[-1]
                cursor = (at // bank_bytes + 1) % mem.banks
            taken.append((at, at + n))
            out.append(Placed(b, at))
    return tuple(out)


def allocate(dev: Device, scheme: str, buffers: list[L1Buffer], stack: int) -> list[Placed] | None:
    own = [b for b in buffers if not b.remote]  # a neighbour's: in its own memory
    if scheme == "basic-sequential":
        return basic_sequential(dev, own, stack)
    return bank_aware(dev, own, stack)


# GemmConfig.l1_parts names of a worker's own Buffers, in the order design/build.py's worker creates them
# (a W4A16 core's dequantized B tile after the C acc rows, before the runtime-parameter buffer)
SCRATCH = ("A bfp16", "B bfp16", "C acc", B_DEQ_PART, RTP_PART)


@dataclass(frozen=True)
class CoreRole:
    """Which of a pair's shared buffers a core holds (neighbour-shared L1, spec/rules/shared_l1.py): A's both
    (`a_holder`: the west core of a pair; the east core reads them in place) and B's `b_slot` (0 ping on the lower
    core of a vertical pair, 1 pong on the upper). Without sharing every core is HOLDER."""

    a_holder: bool = True
    b_slot: int = 0

    def holds(self, c: GemmConfig, role: str, slot: int) -> bool:
        """Whether this core holds object `slot` of `role` in its own memory."""
        share = c.array.share_l1
        if role == "A" and shared_l1.shared(share, "A"):
            return self.a_holder
        if role == "B" and shared_l1.shared(share, "B"):
            return slot == self.b_slot
        return True

    def name(self, c: GemmConfig) -> str:
        """How plan names the role: the shared buffers this core holds."""
        share = c.array.share_l1
        held = ([("A holder" if self.a_holder else "A reader")] if shared_l1.shared(share, "A") else []) + \
            ([f"B {shared_l1.SLOTS[self.b_slot]}"] if shared_l1.shared(share, "B") else [])
        return ", ".join(held) or "every core"


HOLDER = CoreRole()


def core_roles(c: GemmConfig) -> tuple[CoreRole, ...]:
    """The distinct cores of a design's L1: one without sharing; the holder of everything it can hold first (the
    core that bounds the tile, spec/rules/l1.parts)."""
    share = c.array.share_l1
    a_sides = (True, False) if shared_l1.shared(share, "A") else (True,)
    b_slots = (0, 1) if shared_l1.shared(share, "B") else (0,)
    return tuple(CoreRole(a, b) for a in a_sides for b in b_slots)


def core_buffers(c: GemmConfig, role: CoreRole = HOLDER) -> list[L1Buffer]:
    """One core's L1 buffers in the order our IRON program creates them: the A and B objects it consumes
    (ObjectFifo objects; a shared operand's the pair's Buffers, those a neighbour holds marked remote), the C
    objects it produces, then its own Buffers (scratch, then the tanh table's two copies, unpinned: `plan` pins
    them)."""
    out = []
    for kind, nbytes, depth in (("A", c.types.t_in.nbytes(c.t_ma * c.tiling.k), c.array.depth_ab_l1),
                                ("B", b_object_bytes(c.l1_options, c.tiling.k, c.tiling.n), c.array.depth_ab_l1),
                                ("C", c.types.t_out.nbytes(c.tiling.m * c.tiling.n), c.array.depth_c_l1)):
        out += [L1Buffer(f"{kind}{i}", nbytes, kind, i, remote=not role.holds(c, kind, i)) for i in range(depth)]
    parts = c.l1_parts
    out += [L1Buffer(name, parts[name], "scratch", fifo=False) for name in SCRATCH if name in parts]
    return out + [L1Buffer(name, parts[name], "table", fifo=False) for name in TANH_PARTS if name in parts]


# Bank pins for the tanh table's two copies: any two different banks (the copies are alike, so a pair and its
# swap place the same bytes), in a fixed order for deterministic plans.
TABLE_BANK_PAIRS = tuple(itertools.combinations(range(4), 2))


def pin_tables(buffers: list[L1Buffer], banks: tuple[int, ...]) -> list[L1Buffer]:
    """The buffers with the tables pinned to `banks` (mem_bank: a hard placement in the bank-aware allocator,
    AIEAssignBuffers.cpp at 1.4.3; basicAllocation drops it, which is why a design with tables allocates
    bank-aware only)."""
    pins = iter(banks)
    return [replace(b, mem_bank=next(pins)) if b.role == "table" else b for b in buffers]


def tables_apart(placed: list[Placed], bank_bytes: int) -> bool:
    """aie::lut<4>'s rule: the table's two copies each inside one bank, and the two banks different (mlir-aie
    issue #3737: adjacent arrays land in one bank, and the lookup then reads the wrong port silently)."""
    banks = [tuple(p.banks(bank_bytes)) for p in placed if p.buffer.role == "table"]
    return all(len(b) == 1 for b in banks) and len({b[0] for b in banks}) == len(banks)


def concurrent(c: GemmConfig, buffers: list[L1Buffer]) -> list[tuple[str, str]]:
    """(DMA-accessed, core-accessed) buffer pairs that can be busy in the same cycle: while the
    core works on one A and one B object, C and its scratch, the DMA fills the other A and B
    objects (with rho > 1 A turns over rho times per B object, so any A meets any B) and, with two
    C objects, drains the other C."""
    by_role: dict[str, list[L1Buffer]] = {}
    for b in buffers:
        by_role.setdefault(b.role, []).append(b)
    core_only = [b.name for b in (*by_role.get("scratch", []), *by_role.get("table", []))]
    pairs: set[tuple[str, str]] = set()
    a_objs, b_objs, c_objs = (by_role.get(r, []) for r in ("A", "B", "C"))
    for a in a_objs:
        for bb in b_objs:
            if c.tiling.rho == 1 and a.slot != bb.slot:
                continue  # A and B turn over together
            for cc in c_objs:
                busy = [a.name, bb.name, cc.name, *core_only]
                dma = [x.name for x in (*a_objs, *b_objs) if x.name not in (a.name, bb.name)]
                dma += [x.name for x in c_objs if x.name != cc.name]
                pairs.update((d, k) for d in dma for k in busy)
    return sorted(pairs)


def conflicts(placed: list[Placed], pairs: list[tuple[str, str]], bank_bytes: int) -> list[Conflict]:
    where = {p.buffer.name: p for p in placed}
    out = []
    for dma, core in pairs:
        if dma not in where or core not in where:
            continue  # a neighbour's buffer: its bank is the neighbour's
        x, y = where[dma], where[core]
        for bank in set(x.banks(bank_bytes)) & set(y.banks(bank_bytes)):
            lo, hi = max(x.address, bank * bank_bytes), min(x.end, (bank + 1) * bank_bytes)
            out.append(Conflict(dma, core, bank, hi - lo))
    return out


def apart(c: GemmConfig, buffers: list[L1Buffer]) -> list[tuple[str, str]]:
    """The pairs of this core's own buffers GAMA's placement keeps in different banks when the design shares L1:
    a shared ping and its pong, and any A buffer and any B buffer (the two cores reading a shared buffer contend
    for its bank: docs/shared_l1.md section 6)."""
    if c.array.share_l1 == shared_l1.NONE:
        return []
    own = {kind: [b.name for b in buffers if b.role == kind and not b.remote] for kind in ("A", "B")}
    pairs = [(x, y) for x in own["A"] for y in own["B"]]
    return pairs + [(x, y) for kind in ("A", "B") if shared_l1.shared(c.array.share_l1, kind)
                    for x, y in itertools.combinations(own[kind], 2)]


def gama(c: GemmConfig, placed: list[Placed], bank_bytes: int) -> tuple[str, ...]:
    """GAMA's rules the placement breaks on this core's own buffers (neighbour-shared L1 only): a shared ping and
    its pong never in one bank or adjacent banks, A and B apart. "Adjacent" is read over the four 16 KiB banks the
    allocator sees (AM020: each two interleaved physical banks), our reading."""
    if c.array.share_l1 == shared_l1.NONE:
        return ()
    banks = {p.buffer.name: set(p.banks(bank_bytes)) for p in placed}
    out = []
    for kind in ("A", "B"):
        ping, pong = banks.get(f"{kind}0"), banks.get(f"{kind}1")
        if shared_l1.shared(c.array.share_l1, kind) and ping and pong and \
                any(abs(x - y) <= 1 for x in ping for y in pong):
            out.append(f"{kind}0/{kind}1 in one or adjacent banks")
    a = set().union(*(v for k, v in banks.items() if k in ("A0", "A1")))
    b = set().union(*(v for k, v in banks.items() if k in ("B0", "B1")))
    if a & b:
        out.append(f"A and B share bank(s) {sorted(a & b)}")
    return tuple(out)


def _orders(buffers: list[L1Buffer]) -> list[list[L1Buffer]]:
    """The IR orders that differ where the allocators' stable largest-first sort can see it: the
    fifos in any order (their own objects kept in order), those that sort alike counted once."""
    fifos: dict[str, list[L1Buffer]] = {}
    for b in buffers:
        if b.fifo and not b.remote:
            fifos.setdefault(b.role, []).append(b)
    rest = [b for b in buffers if not b.fifo and not b.remote]
    out, seen = [], set()
    for perm in itertools.permutations(fifos):
        order = [b for r in perm for b in fifos[r]] + rest
        key = tuple(b.name for b in sorted(order, key=lambda b: (b.mem_bank is None, -b.nbytes)))
        if key not in seen:
            seen.add(key)
            out.append(order)
    return out


def _classes(buffers: list[L1Buffer], pairs: list[tuple[str, str]]) -> list[list[L1Buffer]]:
    """Buffers grouped so that no concurrent pair falls in one group, nor the tanh table's two copies
    (largest first, greedily): each group may share banks, different groups may not. rho = 1: {A0, B0},
    {A1, B1}, {C, scratch}."""
    tables = [b.name for b in buffers if b.role == "table"]  # aie::lut<4>: two copies, two banks
    clash = set(pairs) | {(b, a) for a, b in pairs} | set(itertools.permutations(tables, 2))
    groups: list[list[L1Buffer]] = []
    for b in sorted((b for b in buffers if not b.remote), key=lambda b: -b.nbytes):
        for g in groups:
            if all((b.name, x.name) not in clash for x in g):
                g.append(b)
                break
        else:
            groups.append([b])
    return groups


def _targets(dev: Device, groups: list[list[L1Buffer]], stack: int, bank_bytes: int
             ) -> list[list[tuple[L1Buffer, int]]]:
    """Layouts that give each group its own banks: the groups in every order, each packed (largest
    first) from the next bank boundary after the previous one (64 bytes later if the previous one
    ends there, so that a reservation keeps the two holes apart), the first right after the stack."""
    out = []
    for perm in itertools.permutations(groups):
        pos, layout = stack, []
        for i, g in enumerate(perm):
            if i:
                end, pos = pos, _up(pos, bank_bytes)
                pos += 64 if pos == end else 0
            for b in g:
                pos = _up(pos, CoreMemory.of(dev).align(b))
                layout.append((b, pos))
                pos += b.nbytes
        if pos <= dev.l1_bytes:
            out.append(layout)
    return out


def _reservations(dev: Device, layout: list[tuple[L1Buffer, int]], stack: int) -> list[L1Buffer]:
    """Unused worker Buffers pinned over every byte the layout leaves free (but the last
    dev.core_static_bytes: aiecc's per-core static data, which Peano links into one run the
    buffers leave), so that the allocator finds only the layout's holes."""
    taken = sorted([(0, stack)] + [(at, at + b.nbytes) for b, at in layout])
    out: list[L1Buffer] = []
    pos = 0
    top = dev.l1_bytes - dev.core_static_bytes
    for lo, hi in [*taken, (top, top)]:
        start = _up(pos, 64)
        if lo - start >= 64:
            out.append(L1Buffer(f"l1_reserve_{len(out)}", (lo - start) // 32 * 32, "reserve", fifo=False,
                                address=start))
        pos = max(pos, hi)
    return out


def _evaluate(dev: Device, scheme: str, buffers: list[L1Buffer], pairs: list[tuple[str, str]], stack: int,
              bank_bytes: int) -> tuple[list[Placed], list[Conflict], int, bool] | None:
    """The placement and conflicts in our IR order, the worst conflict bytes over the other orders
    of equal-sized fifos, and whether the order matters; None when some order does not fit (or puts the
    tanh table's copies in one bank)."""
    first: tuple[list[Placed], list[Conflict]] | None = None
    worst, seen = 0, set()
    for order in _orders(buffers):
        placed = allocate(dev, scheme, order, stack)
        if placed is None or not tables_apart(placed, bank_bytes):
            return None
        found = conflicts(placed, pairs, bank_bytes)
        seen.add(tuple(sorted((f.dma, f.core, f.bank) for f in found)))
        first = first or (placed, found)
        worst = max(worst, sum(f.dma_bytes for f in found))
    assert first is not None
    return first[0], first[1], worst, len(seen) > 1


def plan(c: GemmConfig, scheme: str | None = None, role: CoreRole = HOLDER) -> L1Plan:
    """The allocation for one core of `c`. Given a scheme, that scheme as mlir-aie runs it.
    Otherwise the best of: bank-aware, basic-sequential, and bank-aware steered by reservations
    (unused worker Buffers pinned over the free bytes of a layout that gives the core's and the
    DMA's buffers their own banks, kept if the allocator then reproduces it). Best: the fewest
    bytes of DMA buffer in banks the core is using in our IR order, then over every order of
    equal-sized fifos, then the fewest reserved bytes, then bank-aware. A design that reads the tanh
    table pins its two copies to two banks (aie::lut<4>; every pair of banks is tried) and allocates
    bank-aware only: basic-sequential drops the pins, and is refused when asked for. With neighbour-shared L1,
    the plan of the core in `role` (the holder of everything it can hold by default), whose neighbours' buffers
    are not in its memory, ranked first by GAMA's rules on its own shared buffers (`gama`)."""
    dev = c.dev
    buffers = core_buffers(c, role)
    tables = [b.name for b in buffers if b.role == "table"]
    if tables and scheme == "basic-sequential":
        raise ConfigError("the tanh table's two copies must sit in two banks, and basic-sequential allocation "
                          "drops bank pins (mem_bank; AIEAssignBuffers.cpp basicAllocation at 1.4.3)",
                          f"allocate bank-aware ({opt('l1_alloc', 'bank-aware')}, the default with an epilogue table)")
    pins = TABLE_BANK_PAIRS if tables else ((),)
    pairs = concurrent(c, buffers)
    bank_bytes = dev.l1_bytes // 4
    stack = c.array.stack_bytes
    cands: list[tuple[tuple[int, int, int, int, int, int], L1Plan]] = []
    for s in (SCHEMES if scheme is None else (scheme,)):
        if tables and s != "bank-aware":
            continue  # only the bank-aware allocator honours the tables' bank pins
        for n, banks in enumerate(pins):
            got = _evaluate(dev, s, pin_tables(buffers, banks), pairs, stack, bank_bytes)
            if got is not None:
                placed, found, worst, dep = got
                p = L1Plan(s, (), tuple(placed), tuple(found), worst, dep, bank_bytes, stack,
                           gama(c, placed, bank_bytes))
                cands.append(((len(p.gama), p.conflict_bytes, worst, 0, SCHEMES.index(s), n), p))
    best = min((k for k, _ in cands), default=None)
    if scheme is None and (best is None or best[0] + best[2] > 0):  # GAMA broken, or the DMA meets the core
        for layout in _targets(dev, _classes(buffers, pairs + apart(c, buffers)), stack, bank_bytes):
            held = _reservations(dev, layout, stack)
            at = {b.name: a for b, a in layout}
            pinned = pin_tables(buffers, tuple(at[name] // bank_bytes for name in tables))
            got = _evaluate(dev, "bank-aware", pinned + held, pairs, stack, bank_bytes)
            if got is None or got[1] or max(x.end for x in got[0]) > dev.l1_bytes - dev.core_static_bytes:
                continue  # the allocator does not reproduce the layout, or fills the static data's run
            placed, found, worst, dep = got
            reserved = tuple((r.address or 0, r.nbytes) for r in held)
            p = L1Plan("bank-aware", reserved, tuple(placed), tuple(found), worst, dep, bank_bytes, stack,
                       gama(c, placed, bank_bytes))
            cands.append(((len(p.gama), 0, worst, sum(n for _, n in reserved), 0, 0), p))
            if not worst and not p.gama:
                break
    if not cands:
        raise ConfigError(f"the {c.l1_bytes} B of L1 buffers do not fit {scheme or 'any allocation'} "
                          f"({dev.l1_bytes} B in 4 banks)", "reduce m, k or n")
    return min(cands, key=lambda kp: kp[0])[1]
