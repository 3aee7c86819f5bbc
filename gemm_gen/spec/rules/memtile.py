"""Memtile buffer placement and DMA channel rule of the pinned mlir-aie (ObjectFifo lowering, 1.4.x).

What mlir-aie does with the L2 buffers of a design (AIEObjectFifoAllocate.cpp after PR #3553,
the size sort of PR #3116, neighbour spill of PR #2432, the local-only channels of PR #551):

- Each memtile link owns one pool of `depth` buffers on its memtile (a join: its output fifo's;
  a forward or split: its input fifo's consumer end). Pools are taken in IR order (IRON emits
  fifos sorted by name), stably sorted by buffer size, largest first.
- Every buffer is placed on its own: at home if the memtile still has room (an exact fit is
  fine), else on the less used of the left and right neighbour memtiles of the target device
  (the left one on a tie) that has room; with no room anywhere the build fails.
- A pool with a buffer away from home is "cross-tile": all its endpoints on the memtile (every
  S2MM and MM2S channel of the link) take channels first, and only channels 0-3 can reach a
  neighbour's memory; the other endpoints then take the lowest free channels in IR order.

Both the GemmConfig check (one design, with messages: `place_one`) and the tuner (many candidates
at once, NumPy: `fit`) size the pools with `l2_pools` and run the same `place` below.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from ...facts.dtypes import DType
from ...facts.errors import ConfigError, opt
from ...facts.groupquant import object_bytes
from . import Ints

# memtile DMA channels that can reach a neighbour memtile's memory (getMaxChannelNumForAdjacentMemTile)
CROSS_TILE_CHANNELS = 4


@dataclass(frozen=True)
class Pool:
    """The buffers one memtile link owns, and the DMA endpoints that link has on that memtile."""

    name: str  # the owning fifo
    col: int  # its memtile
    nbytes: Any  # bytes per buffer: an int, or an array over the tuner's candidates
    depth: int
    s2mm: int  # endpoints (channels) of the link on its memtile, per direction
    mm2s: int


@dataclass(frozen=True)
class MemtileBuffer:
    """One ObjectFIFO buffer in L2: what it holds, whose it is, and where it lives."""

    name: str
    nbytes: int
    owner_col: int  # the memtile whose DMA channels use it
    home_col: int  # the memtile whose memory holds it (a neighbour when spilled)


def pools(rows: int, cols: int, a_bytes: Any, b_bytes: Any, c_bytes: Any, depth_ab: int, depth_c: int) -> list[Pool]:
    """The L2 pools of a whole-array design, in IR (name) order. `a_bytes` is one core row's A
    object (m x k_mt); an A memtile that serves several rows (fewer columns than rows, mlir-aie's
    n_A_tiles_per_shim) holds all of theirs and splits them to one channel per row."""
    a_rows = a_rows_per_shim(rows, cols)
    out = [Pool(f"A_L3L2_{i}", a_shim_col(i, rows, cols), a_bytes * a_rows, depth_ab, 1, a_rows)
           for i in range(a_shims(rows, cols))]
    out += [Pool(f"B_L3L2_{col}", col, b_bytes, depth_ab, 1, 1) for col in range(cols)]
    out += [Pool(f"C_L2L3_{col}", col, c_bytes, depth_c, rows, 1) for col in range(cols)]
    return sorted(out, key=lambda p: p.name)


@dataclass(frozen=True)
class L2Options:
    """What the L2 pools depend on besides the tiling (GemmConfig.l2_options)."""

    rows: int
    cols: int
    t_a: DType
    t_b: DType
    t_c: DType
    b_chunked: bool  # B reaches the memtile in k_mt chunks (column-major tiles), else k x n objects
    depth_ab: int
    depth_c: int
    group_size: int = 0  # W4A16: rows of K per scale row of a B object (0: no group scales)
    zero_points: bool = False
    # the split decode placement (spec/rules/decode_split.py): B's streams as (shim column, cores), and the core rows
    # whose C tiles each physical column joins; () for the whole-array and decode grids
    streams: tuple[tuple[int, int], ...] = ()
    join_rows: int = 0


def b_chunked(b_col_maj: bool, b_pack: str) -> bool:
    """Whether B's memtile object spans k_mt (column-major tiles) rather than one L1 tile's k."""
    return b_col_maj and b_pack == "tiles"


def l2_pools(o: L2Options, m: Ints, k: Ints, n: Ints, k_mt: Ints) -> list[Pool]:
    """The pools of one tiling (or of every candidate: arrays), in IR order: one core row's A
    object m x k_mt, a column's B object (k_mt or k) x n, a column's C object of rows m x n."""
    b_k = k_mt if o.b_chunked else k
    if o.streams:
        return split_pools(o, o.t_a.nbytes(m * k_mt), b_bytes(o, k, n, b_k), o.t_c.nbytes(o.join_rows * m * n))
    return pools(o.rows, o.cols, o.t_a.nbytes(m * k_mt), b_bytes(o, k, n, b_k), o.t_c.nbytes(o.rows * m * n),
                 o.depth_ab, o.depth_c)


def split_pools(o: L2Options, a_bytes: Any, b_bytes: Any, c_bytes: Any) -> list[Pool]:
    """The L2 pools of the split decode placement (spec/rules/decode_split.py), in IR order: A's one stream on memtile
    0 broadcast on; each B stream's object (one k x n tile per core it feeds) on its shim's memtile, split to those
    cores; each physical column's C tiles (join_rows of them) joined along N."""
    out = [Pool("A_L3L2_0", 0, a_bytes, o.depth_ab, 1, 1)]
    out += [Pool(f"B_L3L2_{i}", col, b_bytes * count, o.depth_ab, 1, count) for i, (col, count) in enumerate(o.streams)]
    out += [Pool(f"C_L2L3_{col}", col, c_bytes, o.depth_c, o.join_rows, 1) for col in range(o.cols // o.join_rows)]
    return sorted(out, key=lambda p: p.name)


def b_bytes(o: L2Options, k: Ints, n: Ints, b_k: Ints) -> Ints:
    """Bytes of a column's B object on its memtile (b_k rows of n): a W4A16 B's are b_k / k whole L1
    objects, each with its scale (and zero-point) rows (groupquant.ObjectLayout), forwarded linearly."""
    if not o.group_size:
        return o.t_b.nbytes(b_k * n)
    nbytes = b_k // k * object_bytes(k, n, o.group_size, o.zero_points)
    return nbytes if isinstance(nbytes, np.ndarray) and nbytes.ndim else int(nbytes)


def fit(pool_list: list[Pool], target_cols: int, capacity: int, candidates: int) -> np.ndarray:
    """Per candidate, whether mlir-aie places every buffer and its spilled pools' channels fit
    (what `place_one` checks, with messages, for one design)."""
    return place(pool_list, target_cols, capacity, candidates).ok()


def a_shims(rows: int, cols: int) -> int:
    """Shim/memtile columns that carry A (mlir-aie's n_shim_mem_A): one per core row, or every
    column when there are fewer columns than rows."""
    return min(cols, rows)


def a_rows_per_shim(rows: int, cols: int) -> int:
    """Core rows whose A tiles one A memtile splits off (mlir-aie's n_A_tiles_per_shim)."""
    return rows // a_shims(rows, cols)


def a_col_maj_chunks(a_col_maj: bool, rows: int, cols: int, k_walk: Ints, k_mt: Ints) -> Ints:
    """The k_mt chunks a column-major A shim task walks on its BD's iteration dimension (0 when it
    needs none): a shim serving several core rows sends each chunk's row blocks in turn
    (design/patterns.shim_a), so the chunks cannot merge into the K rows' own dimension. The
    iteration wrap (hw DmaSpec.iteration_wrap_max) bounds them."""
    several = a_col_maj and a_rows_per_shim(rows, cols) > 1
    return np.where(np.asarray(k_walk) > np.asarray(k_mt), np.asarray(k_walk) // np.asarray(k_mt), 0) * several


def c_blocks_transposed(c_col_maj: bool, t_out: DType) -> bool:
    """Column-major C narrower than 32 bits (bf16, i8, i16): the kernel stores each r x t block of C
    transposed (aie::transpose, mlir-aie's C_COL_MAJ), so a column's r elements in a block are one
    run of whole words the memtile can gather; a 32-bit C's blocks stay row-major (the memtile
    gathers its columns word by word). Block types (bfp16 C) are not built."""
    return c_col_maj and not t_out.is_block and t_out.bytes < 4


def a_shim_col(i: int, rows: int, cols: int) -> int:
    """Column of A shim `i`: every column when there are fewer columns than rows; npu2's 8
    columns spread the four A streams over the even columns (Striking sec. 4.2.2)."""
    return i * (cols // a_shims(rows, cols))


@dataclass
class Placement:
    """Where every buffer of every candidate went: home[c, p, i] is the memtile of buffer i of
    pool p for candidate c (-1: nowhere had room), and the bytes left on each memtile."""

    pools: list[Pool]
    home: np.ndarray  # (candidates, pools, max depth); unused depth slots hold the owner column
    used: np.ndarray  # (candidates, target columns)

    def placed(self) -> np.ndarray:
        """Candidates whose every buffer found room."""
        return np.all(self.home >= 0, axis=(1, 2))

    def cross(self) -> np.ndarray:
        """(candidates, pools): whether a pool has a buffer away from its memtile."""
        owner = np.array([p.col for p in self.pools])[None, :, None]
        return np.any((self.home != owner) & (self.home >= 0), axis=2)

    def channels_ok(self) -> np.ndarray:
        """Candidates whose cross-tile endpoints fit channels 0-3 of every memtile."""
        cross = self.cross()
        ok = np.ones(cross.shape[0], dtype=bool)
        for col in sorted({p.col for p in self.pools}):
            mine = np.array([p.col == col for p in self.pools])
            for attr in ("s2mm", "mm2s"):
                need = (cross[:, mine] * np.array([getattr(p, attr) for p in self.pools])[mine]).sum(axis=1)
                ok &= need <= CROSS_TILE_CHANNELS
        return ok

    def ok(self) -> np.ndarray:
        return self.placed() & self.channels_ok()


def place(pool_list: list[Pool], target_cols: int, capacity: int, candidates: int = 1) -> Placement:
    """mlir-aie's placement of every candidate's pools (sizes broadcast over `candidates`)."""
    n, p_count = candidates, len(pool_list)
    size = np.stack([np.broadcast_to(np.asarray(p.nbytes, dtype=np.int64), (n,)) for p in pool_list], axis=1)
    owner = np.array([p.col for p in pool_list])
    depth = np.array([p.depth for p in pool_list])
    order = np.argsort(-size, axis=1, kind="stable")  # largest first, IR order among equals
    used = np.zeros((n, target_cols), dtype=np.int64)
    home = np.broadcast_to(owner[None, :, None], (n, p_count, int(depth.max()))).copy()
    rows = np.arange(n)
    inf = np.iinfo(np.int64).max
    for slot in range(p_count):
        p = order[:, slot]
        nb, col = size[rows, p], owner[p]
        for i in range(int(depth.max())):
            active = i < depth[p]
            left, right = col - 1, col + 1
            used_l = np.where(left >= 0, used[rows, np.clip(left, 0, target_cols - 1)], inf)
            used_r = np.where(right < target_cols, used[rows, np.clip(right, 0, target_cols - 1)], inf)
            first = np.where(used_l <= used_r, left, right)  # the less used neighbour, the left on a tie
            second = np.where(used_l <= used_r, right, left)
            choice = np.full(n, -1, dtype=np.int64)
            for cand in (second, first, col):  # the last assignment that fits wins: home, then first, then second
                valid = (cand >= 0) & (cand < target_cols)
                fits = valid & (used[rows, np.clip(cand, 0, target_cols - 1)] + nb <= capacity)
                choice = np.where(fits, cand, choice)
            go = active & (choice >= 0)
            used[rows[go], choice[go]] += nb[go]
            home[rows[active], p[active], i] = choice[active]
    return Placement(pool_list, home, used)


def _overflow(pool_list: list[Pool], pool: Pool, i: int, used: np.ndarray, capacity: int) -> str:
    """Why a buffer found no memtile: its own memtile and each neighbour had less free than it takes. The memtile
    may be full of its neighbours' spilled buffers while its own need less than it holds (issue 33 item 7: "need
    344064 B > 524288 B" said otherwise), so what it holds and what its own buffers need are both said."""
    own = sum(q.nbytes * q.depth for q in pool_list if q.col == pool.col)
    free = ", ".join(f"memtile {x} {capacity - int(used[x]):,} B" for x in (pool.col - 1, pool.col + 1)
                     if 0 <= x < len(used))
    spilled = "; the rest spilled into it from its neighbours" if int(used[pool.col]) > own else ""
    return (f"memtile {pool.col} cannot hold {pool.name}_buff_{i} ({int(pool.nbytes):,} B): mlir-aie's placement "
            f"fills it with {int(used[pool.col]):,} of its {capacity:,} B (its own A/B/C buffers need {own:,} B"
            f"{spilled}), and no neighbour has that much free ({free})")


def place_one(pool_list: list[Pool], target_cols: int, capacity: int) -> list[MemtileBuffer]:
    """One design's buffers where mlir-aie puts them (IR order), or ConfigError naming the memtile,
    its need and the fix."""
    try:
        return list(_placed_one(tuple(pool_list), target_cols, capacity))
    except TypeError:  # a pool's bytes an array (unhashable): placed as given
        return list(_placed_one.__wrapped__(tuple(pool_list), target_cols, capacity))


@lru_cache(maxsize=4096)
def _placed_one(pools: tuple[Pool, ...], target_cols: int, capacity: int) -> tuple[MemtileBuffer, ...]:
    """place_one, kept per distinct pools: a design's checks, its Design, its L1 plan and the model each ask it of
    the same pools, at about two milliseconds a time (issue 33 item 4). A refusal is raised each time."""
    pool_list = list(pools)
    result = place(pool_list, target_cols, capacity)
    home, used = result.home[0], result.used[0]
    for p, pool in enumerate(pool_list):
        for i in range(pool.depth):
            if home[p, i] < 0:
                raise ConfigError(_overflow(pool_list, pool, i, used, capacity), f"reduce k_mt ({opt('k_mt')}) or m/n")
    cross = result.cross()[0]
    for col in sorted({q.col for q in pool_list}):
        for attr, what in (("s2mm", "S2MM"), ("mm2s", "MM2S")):
            spilled = [q for q, x in zip(pool_list, cross) if x and q.col == col]
            need = sum(getattr(q, attr) for q in spilled)
            if need > CROSS_TILE_CHANNELS:
                raise ConfigError(
                    f"memtile {col}: {need} {what} channels would have to reach spilled buffers of "
                    f"{', '.join(q.name for q in spilled)} in a neighbour memtile, but only channels 0-3 can",
                    f"reduce k_mt ({opt('k_mt')}) or m/n so that fewer buffers leave their memtile",
                )
    return tuple(MemtileBuffer(f"{pool.name}_buff_{i}", int(pool.nbytes), pool.col, int(home[p, i]))
                 for p, pool in enumerate(pool_list) for i in range(pool.depth))


def pool_bytes(pool_list: list[Pool]) -> Ints:
    """Bytes of every buffer of the pools (all memtiles together)."""
    return sum(p.nbytes * p.depth for p in pool_list)


def largest_k_mt_steps(o: L2Options, capacity: int, m: np.ndarray, k: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Per (m, k, n): the most k-steps j (k_mt = j k) whose pools fit `capacity` bytes (all memtiles
    together): a bound for the search, `fit` decides. The pools grow linearly in k_mt."""
    fixed = np.asarray(pool_bytes(l2_pools(o, m, k, n, 0 * k)), dtype=np.int64)
    per_step = np.asarray(pool_bytes(l2_pools(o, m, k, n, k)), dtype=np.int64) - fixed
    return np.asarray((capacity - fixed) // per_step, dtype=np.int64)
