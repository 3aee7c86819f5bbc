"""Neighbour-shared L1 ping/pong buffers (issue 34 item 2; the lowering at mlir-aie 1.4.3: docs/shared_l1.md).

B is identical down a core column and A along a core row, so a pair of neighbouring cores can keep one
copy of an operand's ping and pong buffers and both read them in place:

- `b`: B split over vertical pairs (core rows 2k, 2k+1 of the grid): the ping on the lower core, the pong on the
  upper, each core reading both (the "split" layout of docs/shared_l1.md 3.3). Built first because it is the
  layout that frees L1: every core holds one B buffer instead of two, where the one-holder layout keeps both on
  one core (whose L1 then bounds the tile as before) and only saves a stream.
- `a`: A's ping and pong both on the west core of a horizontal pair (columns 2k, 2k+1), read in place by its
  east neighbour: a core reaches its west neighbour's memory but not its east one's, so the pong cannot sit on
  the east core (docs/shared_l1.md section 1).
- `ab`: both.

Every shared buffer sits on its holder with three locks there (empty, full, relay: the relay protocol of
docs/shared_l1.md 3.2); the holder's own DMA fills it from one memtile MM2S stream per buffer slot it holds.
The rules here are over ints (they do not depend on the tiling), asked by spec/checks.check_shared_l1 for
one config and by search/space's RULES for every candidate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...facts.devices import Device, TileKind
from ...facts.errors import opt
from . import array as array_rule
from . import memtile
from .decode_split import is_split

NONE = "none"
OPERANDS = {"none": (), "b": ("B",), "a": ("A",), "ab": ("A", "B")}  # the operands each value shares
SLOTS = ("ping", "pong")  # object n of an operand lies in buffer n % 2
# the relay protocol's locks per shared buffer, all on its holder, with their initial values (docs/shared_l1.md 3.2):
# empty (2: the DMA waits for both readers' releases), full (the DMA's release, the leader's acquire), relay (the
# leader's release right after its acquire, the follower's acquire)
LOCKS = (("empty", 2), ("full", 0), ("relay", 0))
FIFO_LOCKS = 2  # an ObjectFifo end's locks on its tile (producer and consumer count)
# B split: a memtile buffer's L1 objects alternate between the two MM2S channels, the channel sending the buffer's
# first object relaying to the other once it has sent all of its own. A holder has one L1 buffer per slot, so the
# leading channel's third object of a buffer waits for the cores to release its second, which they read only after the
# other channel's object between, which waits for the relay: at most two per channel, four L1 objects per memtile
# object (found by the simulator: k_mt / k = 5 deadlocks, 4 runs; tests/sim/test_shared_l1_sim.py)
SPLIT_OBJECTS_MAX = 4


def shared(share: str, operand: str) -> bool:
    """Whether `share` places `operand`'s ping/pong buffers across neighbours."""
    return operand in OPERANDS.get(share, ())


def reaches(dev: Device, core: tuple[int, int], mem: tuple[int, int]) -> bool:
    """Whether the core at (column, row) reads the memory of the tile at (column, row) in place: its own, its
    west neighbour's, its north neighbour's, or its south neighbour's unless that is a memtile
    (AIE2TargetModel::isLegalMemAffinity, mlir-aie 1.4.3 AIETargetModel.cpp 810-824; AM020 "AIE-ML Tile
    Architecture"; npu2 is modelled as AIE2 there too). Never the east neighbour's (the verifier refuses it)."""
    (cc, cr), (mc, mr) = core, mem
    if dev.tile_kind(cr) != TileKind.CORE or dev.tile_kind(mr) == TileKind.SHIM:
        return False
    if (mc, mr) in ((cc, cr), (cc - 1, cr), (cc, cr + 1)):
        return dev.tile_kind(mr) == TileKind.CORE
    return (mc, mr) == (cc, cr - 1) and dev.tile_kind(mr) == TileKind.CORE


@dataclass(frozen=True)
class Holding:
    """One shared buffer: the operand, its slot (0 ping, 1 pong), the grid (column, row) of the core that holds it
    and the cores that read it in place, the leader first (the holder: it takes the full lock and relays)."""

    operand: str
    slot: int
    holder: tuple[int, int]
    readers: tuple[tuple[int, int], ...]


def holdings(rows: int, cols: int, share: str) -> tuple[Holding, ...]:
    """The shared buffers of a rows x cols grid (grid coordinates: column, row from the lowest core row), B's
    per vertical pair then A's per horizontal pair; () for an odd count the rules refuse."""
    out: list[Holding] = []
    if shared(share, "B") and rows % 2 == 0:
        for col in range(cols):
            for lo in range(0, rows, 2):
                pair = ((col, lo), (col, lo + 1))
                out += [Holding("B", slot, pair[slot], (pair[slot], pair[1 - slot])) for slot in (0, 1)]
    if shared(share, "A") and cols % 2 == 0:
        for row in range(rows):
            for west in range(0, cols, 2):
                out += [Holding("A", slot, (west, row), ((west, row), (west + 1, row))) for slot in (0, 1)]
    return tuple(out)


def absolute(dev: Device, tile: tuple[int, int]) -> tuple[int, int]:
    """A grid (column, row) as the array's (column, row): core rows start at dev.first_core_row."""
    return tile[0], tile[1] + dev.first_core_row


@dataclass(frozen=True)
class TileUse:
    """What one core tile spends on its L1 inputs and output: locks, BDs and DMA channels each way."""

    locks: int
    bds: int
    s2mm: int
    mm2s: int


def tile_use(tile: tuple[int, int], held: tuple[Holding, ...], share: str, depth_ab: int, depth_c: int,
             barrier: bool) -> TileUse:
    """A core's locks, BDs and channels: each buffer it holds its three relay locks and one BD (one S2MM channel per
    operand it holds any of), each operand it gets as an ObjectFifo its fifo's two locks, `depth_ab` BDs and a
    channel, C's fifo two locks, `depth_c` BDs and its MM2S channel, and the runtime barrier's lock."""
    mine = [h for h in held if h.holder == tile]
    locks, bds, s2mm = FIFO_LOCKS + int(barrier), depth_c, 0
    for operand in ("A", "B"):
        if shared(share, operand):
            own = [h for h in mine if h.operand == operand]
            locks += len(LOCKS) * len(own)
            bds += len(own)
            s2mm += bool(own)
        else:
            locks, bds, s2mm = locks + FIFO_LOCKS, bds + depth_ab, s2mm + 1
    return TileUse(locks, bds, s2mm, 1)


def memtile_mm2s(share: str, rows: int, cols: int, col: int) -> int:
    """The MM2S channels memtile `col` drives: C's drain to its shim, B's stream (two when B is split: pings to the
    lower cores, pongs to the upper ones) and one A stream per core row it carries A for (memtile.a_shims)."""
    a_cols = {memtile.a_shim_col(i, rows, cols) for i in range(memtile.a_shims(rows, cols))}
    a_rows = memtile.a_rows_per_shim(rows, cols) if col in a_cols else 0
    return 1 + (2 if shared(share, "B") else 1) + a_rows


def split_streams(depth_b_l2: Any, b_per_l2: Any) -> Any:
    """Whether B split's two streams carry memtile buffers of `b_per_l2` L1 objects, `depth_b_l2` of them: an even
    count per cycle of buffers (even objects go to one channel, odd ones to the other) and at most SPLIT_OBJECTS_MAX
    per buffer. Ints or NumPy arrays (search/space.py asks it of every tiling at once)."""
    return ((depth_b_l2 * b_per_l2) % 2 == 0) & (b_per_l2 <= SPLIT_OBJECTS_MAX)


def problem(dev: Device, share: str, rows: int, cols: int, depth_ab: int, depth_c: int, barrier: bool,
            epilogue_tile: bool, group_size: int, *, depth_b_l2: int = 2, b_per_l2: int = 1
            ) -> tuple[str, str] | None:
    """Why `share` cannot place this design's buffers, as (message, fix), None if it can: an unknown value; a
    mapping other than the whole array; no pair (an odd count of core rows for B, of columns for A); a reader out
    of its holder's reach (isLegalMemAffinity: no east neighbour, no memtile); not double-buffered; a core's locks,
    BDs or channels, or a memtile's MM2S channels, past the device's (facts/devices.py); and what is not built
    yet: an epilogue tile in B's objects and W4A16 B objects. B split streams the even L1 objects (pings) and the odd
    ones (pongs) of its memtile buffers on two channels: a cycle of the memtile's buffers must hold an even count of
    L1 objects (`depth_b_l2` buffers of `b_per_l2` each: k_mt / k for column-major B tiles, else 1), at most
    SPLIT_OBJECTS_MAX per buffer (split_streams)."""
    if share not in OPERANDS:
        return f"unknown L1 sharing {share!r}", f"use {opt('share_l1', *OPERANDS)}"
    if share == NONE:
        return None
    this = opt("share_l1", share)
    if rows != dev.core_rows or is_split(dev, rows, cols):
        mapping = array_rule.mapping_of(dev, rows, cols)
        return (f"{this} pairs neighbouring cores of the whole-array mapping; this design is {mapping}",
                f"drop {opt('share_l1')}, or use {opt('rows', dev.core_rows)}")
    if shared(share, "B") and rows % 2:
        return (f"{this} splits B over vertical pairs of core rows; {rows} rows leave one unpaired",
                f"drop {opt('share_l1')} or use an even row count")
    if shared(share, "A") and cols % 2:
        return (f"{this} keeps A on the west core of column pairs; {cols} column(s) leave one unpaired",
                f"use {opt('share_l1', 'b')}, or an even {opt('cols')}")
    if depth_ab != 2:
        return (f"{this} shares ping/pong buffers; depth_ab_l1={depth_ab} is not double-buffered",
                "use depth_ab_l1=2 (the default)")
    if shared(share, "B") and not split_streams(depth_b_l2, b_per_l2):
        if b_per_l2 > SPLIT_OBJECTS_MAX:
            return (f"{this} streams B's even and odd L1 objects to the lower and upper cores, relaying between the "
                    f"two streams per memtile buffer; {b_per_l2} L1 objects per memtile object (k_mt / k of "
                    f"column-major B tiles) put more than 2 on one stream, which waits for the other",
                    f"use {opt('k_mt')} <= {SPLIT_OBJECTS_MAX} x k, or drop {opt('share_l1')}")
        return (f"{this} streams B's even and odd L1 objects to the lower and upper cores; depth_ab_l2={depth_b_l2} "
                f"buffers of {b_per_l2} L1 object(s) each hold an odd count", "use depth_ab_l2=2 (the default)")
    held = holdings(rows, cols, share)
    for h in held:
        for reader in h.readers:
            if not reaches(dev, absolute(dev, reader), absolute(dev, h.holder)):
                return (f"{this}: the core at {absolute(dev, reader)} cannot read {h.operand}'s {SLOTS[h.slot]} on "
                        f"{absolute(dev, h.holder)} (a core reaches its own, west, north and south memory, never "
                        "a memtile's)", f"drop {opt('share_l1')}")
    core, mem = dev.dma[TileKind.CORE], dev.dma[TileKind.MEM]
    for col in range(cols):
        for row in range(rows):
            use = tile_use((col, row), held, share, depth_ab, depth_c, barrier)
            for what, n, most in (("locks", use.locks, core.locks), ("BDs", use.bds, core.bds),
                                  ("S2MM channels", use.s2mm, core.s2mm_channels),
                                  ("MM2S channels", use.mm2s, core.mm2s_channels)):
                if n > most:
                    return (f"{this}: the core at {absolute(dev, (col, row))} needs {n} {what}, it has {most}",
                            f"drop {opt('share_l1')}")
        need = memtile_mm2s(share, rows, cols, col)
        if need > mem.mm2s_channels:
            return (f"{this}: memtile {col} would drive {need} MM2S channels (B's pings and pongs, A's rows, C), it "
                    f"has {mem.mm2s_channels}", f"use {opt('share_l1', 'a')} or none, or more {opt('cols')}")
    if epilogue_tile and shared(share, "B"):
        return (f"{this} with an epilogue tile in B's objects is not built yet",
                f"drop {opt('share_l1')}, or use {opt('share_l1', 'a')}")
    if group_size:
        return f"{this} with W4A16 B objects is not built yet", f"drop {opt('share_l1')}"
    return None


# whether the IRON lowering runs shared designs (issue 34 item 2 step 5: the 1.4.3 primitives of docs/shared_l1.md 3):
# until it does, it refuses them (not_built) and the search does not weigh sharing (search/knobs.py), so that tune
# never picks a design the hardware path cannot build; the simulator and the model take them already
IRON_LOWERS = False


def searchable() -> bool:
    """Whether the search weighs sharing: only once every back end runs a shared design."""
    return IRON_LOWERS


def not_built(share: str, reader: str) -> tuple[str, str] | None:
    """Why `reader` (the IRON lowering) cannot take a design that shares L1 yet, None if it can: the relay protocol is
    not in the lowering (step 5), so plan, predict and simulate take such a design and the search does not offer it,
    but nothing lowers it as if it were unshared."""
    if share == NONE or IRON_LOWERS:
        return None
    return (f"{opt('share_l1', share)}: {reader} does not run neighbour-shared L1 buffers yet (issue 34 item 2)",
            f"drop {opt('share_l1')} (plan and predict show the shared design)")
