"""The fast simulator's kernels: every recorded call checked, and all of their numerics at once.

sim/flow.py runs the array and records each kernel call with the contents of the tiles it was handed. Here:

1. Provenance, per distinct content key (sim/contents.py), as the emulator checks cells (sim/kernel.py's views):
   a key passes when every cell holds the word its tile's layout predicts, all at one offset from the tile's
   first word; a call's first A (B) word is then its content's base plus that offset.
2. The emulator's per-call rules, array-wise over all calls: C slices in range, each slice's K chunks in order
   and complete, A and B of one tile at the rows and columns the words say (sim/kernel.py a_rows, b_cols), one
   output tile between zero calls, W4A16's dequantization on slice 0, conversions after a matmul, the epilogue
   tile at its tile's columns.
3. The numerics: what the tiles held is, by (1), the DRAM words at those offsets, so the calls' operands are
   the DRAM buffers read along the kernel's own offsets over the union of the tiles (`delivered`), and the
   calls of all tiles are one matrix chain in the kernel's K order (KernelNumerics, as numerics.reference
   computes it), then the conversion with the epilogue data each tile read from L1.
4. C in DRAM: every word a shim drain wrote must hold the result for its own position (each drained run's
   provenance, per distinct key, against the task's addresses) and every word of C's matrix must have been
   written; the buffer then holds the tiles' values in C's layout.

Anything that would make the literal run fail, or that this module does not model, raises NotProven.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ..design.b_objects import unpack_objects
from ..design.host_buffers import b_unit_in
from ..facts import bfp16
from ..facts.dtypes import DType, unpack_i4
from ..facts.epilogue import MODES, Requant
from ..facts.epilogue_args import read_tile
from ..facts.numerics import KernelNumerics, chain
from ..spec.call import CallPlan
from ..spec.config import GemmConfig
from . import words as w
from .contents import CALLED, CONVERT, HANDLE, MATMUL, ZERO, Keys, NotProven, Provenance
from .flow import Flow
from .kernel import (
    KernelEmulator,
    KernelStats,
    ObjectView,
    PackedView,
    TileView,
    UnitView,
    View,
    a_rows,
    b_cols,
    c_words,
)

ID_MASK = (1 << w.ID_BITS) - 1


# ---- provenance of views and keys ---------------------------------------------------------------------------
def _tile_view(view: View) -> TileView | UnitView:
    return view.words if isinstance(view, PackedView | ObjectView) else view


def view_provenance(view: View) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cells, tags, ids) a view expects of a tile whose first word is source word 0 (its `hi`, per cell)."""
    v = _tile_view(view)
    hi = np.asarray(v.hi, dtype=np.int64).reshape(-1)
    cells = v.gather.reshape(-1) if isinstance(v, UnitView) else np.arange(hi.size)
    return cells, (hi >> w.ID_BITS).astype(np.int8), hi & ID_MASK


def first_words(keys: Keys, view: View, ids: np.ndarray) -> np.ndarray:
    """Per distinct content key, the offset of its tile's first word from its base (as TileView.base_word finds
    it), or NotProven where the cells do not hold the tile the view expects."""
    cells, tags, want = view_provenance(view)
    whole = not isinstance(_tile_view(view), UnitView)
    table = np.zeros(int(ids.max(initial=-1)) + 1, np.int64)
    for key in np.flatnonzero(np.bincount(ids)):  # the distinct keys (small ints), ascending
        got_tags, got = keys.provenance(int(key))
        if (whole and got.size != cells.size) or got.size <= int(cells.max(initial=-1)):
            raise NotProven("a tile of another size")
        if not np.array_equal(got_tags[cells], tags):
            raise NotProven("a tile holds another operand's (or no) data")
        diff = got[cells] - want
        if diff.size and not (diff == diff[0]).all():
            raise NotProven("a tile's data arrived in the wrong layout")
        table[key] = diff[0] if diff.size else 0
    return table


def c_provenance(kernel: KernelEmulator) -> Callable[[str, int, int], Provenance]:
    """The arrays of sim/contents.py's "kernel" keys: C's cells as the matmuls (`slices`) or the conversion
    (`out`) leave them, for a tile whose first word is 0 (a slice below the first: its own first word's offset,
    which sim/bulk checks against every tile's)."""
    def arrays(name: str, n: int, mask: int) -> Provenance:
        tags, ids = np.zeros(n, np.int8), np.zeros(n, np.int64)
        if name == "out":
            _put(kernel.out_view, tags, ids, 0, 0)
            return tags, ids
        first = kernel._c_word(0, 0)  # noqa: SLF001 - the emulator's own arithmetic
        for s in range(kernel.c.tiling.rho):
            if mask >> s & 1:
                _put(kernel.c_view, tags, ids, s * kernel.slice_words,
                     kernel._c_word(s * kernel.c.t_ma, 0) - first)  # noqa: SLF001
        return tags, ids
    return arrays


def _put(view: TileView | UnitView, tags: np.ndarray, ids: np.ndarray, at: int, delta: int) -> None:
    cells, t, i = view_provenance(view)
    if at + int(cells.max(initial=-1)) >= tags.size:
        raise NotProven("a C view past its object")
    tags[at + cells] = t
    ids[at + cells] = i + delta


# ---- the calls ----------------------------------------------------------------------------------------------
@dataclass
class Tiles:
    """The output tiles of one call, one row per tile handle with matmuls: its core, first row and column."""

    handle: np.ndarray
    core: np.ndarray
    row0: np.ndarray
    col0: np.ndarray
    c_word: np.ndarray
    epilogue_b: np.ndarray  # the first word of the B object each tile's conversion read (-1: none)
    modes: set[int]


def _group_rank(keys: tuple[np.ndarray, ...], order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rank of each row within its group (rows ordered by `order` inside groups of equal keys) and the group
    id, both in the rows' own order."""
    idx = np.lexsort((order, *reversed(keys)))
    sk = [k[idx] for k in keys]
    new = np.ones(idx.size, bool)
    if idx.size:
        new[1:] = np.logical_or.reduce([k[1:] != k[:-1] for k in sk])
    group = np.cumsum(new) - 1
    starts = np.flatnonzero(new)
    rank_sorted = np.arange(idx.size) - starts[group]
    rank, gid = np.empty(idx.size, np.int64), np.empty(idx.size, np.int64)
    rank[idx], gid[idx] = rank_sorted, group
    return rank, gid


def check_calls(recs: np.ndarray, kernel: KernelEmulator, keys: Keys,
                words: Callable[[np.ndarray], np.ndarray]) -> Tiles:
    """The emulator's rules over every recorded call (module docstring, 2); the tiles they computed. `words`: the
    word offsets the recorded bases stand for (flow.Flow.words)."""
    c, call = kernel.c, kernel.call
    ga, gb = kernel.grids["A"], kernel.grids["B"]
    walk, k, rho = call.k_walk, c.tiling.k, c.tiling.rho
    t = np.arange(len(recs))
    mm = recs[:, 0] == MATMUL
    mt = t[mm]
    handle, slc = recs[mm, 2], recs[mm, 3]
    if ((slc < 0) | (slc >= rho)).any():
        raise NotProven("a C slice outside 0..rho-1")
    a_word = words(recs[mm, 5]) + first_words(keys, kernel.a_view, recs[mm, 4])[recs[mm, 4]]
    b_word = words(recs[mm, 7]) + first_words(keys, kernel.b_view, recs[mm, 6])[recs[mm, 6]]
    if ((a_word < 0) | (a_word > ID_MASK) | (b_word < 0) | (b_word > ID_MASK)).any():
        raise NotProven("a tile's first word outside its operand")
    rank, _ = _group_rank((handle, slc), mt)
    k0 = rank * k
    if (k0 >= walk).any():
        raise NotProven("a slice gets more K chunks than K has")
    row0, a_ok = a_rows(c, ga, a_word, k0)
    col0, b_ok = b_cols(c, call, gb, b_word, k0)
    if not (a_ok & b_ok).all():
        raise NotProven("A or B from another K chunk")
    tile_row0 = row0 - slc * c.t_ma
    seen = np.full(int(handle.max(initial=HANDLE - 1)) - HANDLE + 1, -1, np.int64)
    seen[(handle - HANDLE)[::-1]] = np.arange(handle.size)[::-1]  # each handle's first call (handles ascend)
    first = seen[seen >= 0]
    hs = handle[first]
    per_tile_row, per_tile_col = tile_row0[first], col0[first]
    where = np.searchsorted(hs, handle)
    if (tile_row0 != per_tile_row[where]).any() or (col0 != per_tile_col[where]).any():
        raise NotProven("a core accumulates two output tiles between zero calls")
    count = np.zeros((hs.size, rho), np.int64)
    np.add.at(count, (where, slc), 1)
    if (count != walk // k).any():
        raise NotProven("an output tile released before its K reduction finished")
    if isinstance(kernel.b_view, ObjectView):  # slice 0 dequantizes each B object; the others read its scratch
        order = np.lexsort((mt, handle))
        p = np.arange(order.size)
        h = handle[order]
        start = np.r_[0, np.flatnonzero(h[1:] != h[:-1]) + 1] if order.size else np.zeros(0, np.int64)
        group_start = np.repeat(start, np.diff(np.r_[start, order.size]))
        last0 = np.maximum.accumulate(np.where(slc[order] == 0, p, group_start - 1))  # the latest slice 0 call
        bw = b_word[order]
        if ((last0 < group_start) | (bw[np.maximum(last0, 0)] != bw)).any():
            raise NotProven("a slice reads the dequantization scratch before slice 0 filled it")
    # conversions: after a matmul of their tile; the epilogue tile at its columns; one activation mode
    cv = recs[:, 0] == CONVERT
    c_handle, c_t = recs[cv, 2], t[cv]
    at = np.searchsorted(hs, c_handle)
    known = (at < hs.size) & (hs[np.minimum(at, hs.size - 1)] == c_handle) if hs.size else np.zeros(0, bool)
    if not known.all() or (c_t < mt[first][at]).any():
        raise NotProven("a conversion before any matmul of its tile")
    epilogue_b = np.full(hs.size, -1, np.int64)
    if c.epilogue.needs_tile and cv.any():
        eb = words(recs[cv, 5]) + first_words(keys, kernel.b_view, recs[cv, 4])[recs[cv, 4]]
        col, ok = b_cols(c, call, gb, eb, walk)
        if not ok.all() or (col != per_tile_col[at]).any():
            raise NotProven("a conversion reads another column's epilogue tile")
        epilogue_b[at] = eb
    modes = set(int(x) for x in recs[cv, 3]) if c.epilogue.runtime else set()
    if c.epilogue.runtime and not modes <= set(MODES.values()):
        raise NotProven("an activation mode the kernel has no case for")
    core = recs[mm, 1][first]
    return Tiles(hs, core, per_tile_row, per_tile_col, np.asarray(c_words(c, call, per_tile_row, per_tile_col)),
                 epilogue_b, modes)


def stats(recs: np.ndarray, tiles: Tiles, cores: list, overflows: int) -> KernelStats:
    """The emulator's counts of one call."""
    mm = recs[:, 0] == MATMUL
    per_core = np.bincount(recs[mm, 1], minlength=len(cores))
    return KernelStats(int(mm.sum()), int(((recs[:, 0] == ZERO) & (recs[:, 3] == CALLED)).sum()),
                       int((recs[:, 0] == CONVERT).sum()), int(tiles.handle.size), overflows,
                       {str(t): int(n) for t, n in sorted((core.tile, per_core[i]) for i, core in enumerate(cores)
                                                          if per_core[i])})


# ---- C in DRAM ----------------------------------------------------------------------------------------------
def drained_words(flow: Flow, tiles: Tiles, size: int) -> np.ndarray:
    """The C words the drains wrote (a mask over C's buffer), each checked to hold its own position's result."""
    keys = flow.keys
    word_of = dict(zip(tiles.handle.tolist(), tiles.c_word.tolist(), strict=True))
    written = np.zeros(size, bool)
    diffs: dict[tuple[int, int, int, int], int] = {}
    for seq, base, task, dpos, run in flow.drains():
        if task.spec.tensor != "C" or base < HANDLE or base not in word_of:
            raise NotProven("a drain writes what is not a finished C tile of this call")
        at = task.base[dpos:dpos + run]
        key = (seq, id(task.base), dpos, run)
        d = diffs.get(key)
        if d is None:
            tags, ids = keys.provenance(seq)
            if not (tags == w.TAG_C).all():
                raise NotProven("a drain writes words that hold no C")
            diff = ids - at
            if not (diff == diff[0]).all():
                raise NotProven("C data in the wrong layout")
            d = diffs[key] = int(diff[0])
        if word_of[base] + d != task.first:
            raise NotProven("C data for another position")
        written[task.first + at] = True
    return written


# ---- the numerics -------------------------------------------------------------------------------------------
def raw_words(raw: np.ndarray, words: int) -> np.ndarray:
    """A DRAM buffer's bytes as `words` uint32 words (its zeroed slack included)."""
    out = np.zeros(words, np.uint32)
    flat = np.ascontiguousarray(raw).reshape(-1).view(np.uint8)
    out.view(np.uint8)[: flat.size] = flat[: 4 * words]
    return out



def _units(raw: np.ndarray, t: DType, count: int) -> np.ndarray:
    """A DRAM buffer's bytes as `count` units of t (elements; bfp16 tiles as rows of bytes; a packed type's
    32-bit words), zeros past its end."""
    data = np.zeros(count * t.unit_bytes, np.uint8)
    flat = np.ascontiguousarray(raw).reshape(-1).view(np.uint8)[: data.size]
    data[: flat.size] = flat
    if t.is_block:
        return data.reshape(count, t.unit_bytes)
    return data.view(np.uint32) if t.is_packed else data.view(t.host)


def _affine(units: np.ndarray, rows: int, cols: int, row_step: int, col_step: int) -> np.ndarray:
    """units[r row_step + c col_step] over rows x cols (each a unit: an element, or a row of bytes), a copy."""
    step = units.strides[0]
    view = np.lib.stride_tricks.as_strided(units, (rows, cols) + units.shape[1:],
                                           (row_step * step, col_step * step) + units.strides[1:], writeable=False)
    return np.ascontiguousarray(view)


def delivered_a(c: GemmConfig, kernel: KernelEmulator, raw: np.ndarray, rows: int) -> np.ndarray:
    """A's values as the tiles held them over rows 0..rows-1 and all of K's walk: unit (r, kk) of A's buffer
    at r ld + kk (A^T's kk ld + r), as sim/kernel.py's offsets read it."""
    g = kernel.grids["A"]
    r, kw = rows // g.unit.tile_rows, g.kw
    steps = (1, g.ld) if c.layout.a_col_maj else (g.ld, 1)
    units = _units(raw, g.unit, (r - 1) * steps[0] + (kw - 1) * steps[1] + 1 if r and kw else 0)
    grid_ = _affine(units, r, kw, *steps)
    return bfp16.tile_values(grid_) if g.unit.is_block else grid_


def delivered_b(c: GemmConfig, kernel: KernelEmulator, raw: np.ndarray, cols: int) -> np.ndarray:
    """B's values (K's walk x cols) as the tiles held them: unit b_unit(kk, nn) of B's buffer (W4A16: its objects
    dequantized as the kernel's pass does)."""
    call, g = kernel.call, kernel.grids["B"]
    if g.obj:  # whole objects, each k x n (columns past `cols` are the last strip's own)
        size = (call.Np // c.tiling.n) * (call.k_walk // c.tiling.k) * g.obj * 4
        data = np.zeros(size, np.uint8)
        flat = np.ascontiguousarray(raw).reshape(-1).view(np.uint8)[:size]
        data[: flat.size] = flat
        return unpack_objects(c, call, data, kernel.deq_order)[:, :cols]
    tr, tc = g.kw, -(-cols // g.unit.tile_cols)
    if c.layout.b_pack == "strips":  # not one stride per axis: every unit's index (host_buffers.b_unit)
        kk, nn = np.indices((tr, tc))
        idx = b_unit_in(g, kk, nn)
        picked = _units(raw, g.unit, int(idx.max(initial=-1)) + 1)[idx]
    else:  # b_unit is kk ld + nn (B^T's nn ld + kk)
        steps = (1, g.ld) if c.layout.b_col_maj else (g.ld, 1)
        units = _units(raw, g.unit, (tr - 1) * steps[0] + (tc - 1) * steps[1] + 1 if tr and tc else 0)
        picked = _affine(units, tr, tc, *steps)
    if g.unit.is_block:  # tiles of B^T: each tile's lines are B's columns (UnitView.read)
        vals = bfp16.tile_values(picked)
        q = bfp16.TILE
        return np.ascontiguousarray(vals.reshape(tr, q, tc, q).transpose(0, 3, 2, 1)).reshape(tr * q, tc * q)[:, :cols]
    if g.unit.is_packed:
        return unpack_i4(np.ascontiguousarray(picked).view(np.uint8).reshape(picked.shape[0], -1))[:, :cols]
    return picked


@dataclass
class Result:
    words: np.ndarray  # C's buffer as uint32 words, as the literal run leaves it
    overflows: int


def compute(kernel: KernelEmulator, tiles: Tiles, a_raw: np.ndarray, b_raw: np.ndarray,
            b_words: np.ndarray | None, tables: list, c_words_count: int) -> Result:
    """All calls' numerics (module docstring, 3) and C's buffer words."""
    c, call = kernel.c, kernel.call
    numerics: KernelNumerics = kernel.numerics
    rows = int((tiles.row0 + c.tiling.m).max(initial=0))
    cols = int((tiles.col0 + c.tiling.n).max(initial=0))
    if (tiles.row0 < 0).any() or (tiles.col0 < 0).any():
        raise NotProven("a tile before C's first row or column")
    block_c = c.types.t_out.is_block or c.types.t_acc.is_block
    if block_c and (tiles.col0 % bfp16.BLOCK).any():
        raise NotProven("a bfp16 C tile off the blocks of 8")
    if kernel.grids["B"].obj or c.layout.b_pack == "strips":
        if (tiles.col0 % c.tiling.n).any():
            raise NotProven("a B tile off its strip")
    a = delivered_a(c, kernel, a_raw, rows)
    b = delivered_b(c, kernel, b_raw, cols)
    acc_c, acc, over, product = chain(numerics, a, b, c.tiling.k, overflows=True)
    kernel.product = product
    overflows = 0
    if over is not None:
        for r0, c0 in zip(tiles.row0.tolist(), tiles.col0.tolist(), strict=True):
            overflows += int(over[r0:r0 + c.tiling.m, c0:c0 + c.tiling.n].sum())
    if kernel.p.converts_c:
        out = _converted(kernel, tiles, acc_c, b_words, tables, cols)
    elif c.types.t_out.is_block:  # bfp16 C, requantized after every call: its last encoding
        out = numerics.encode_acc(acc)
    else:
        out = acc_c
    return Result(_c_buffer(c, call, out, rows, cols, c_words_count), overflows)


def _converted(kernel: KernelEmulator, tiles: Tiles, values: np.ndarray, b_words: np.ndarray | None, tables: list,
               cols: int) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """C's conversion after the last call: bfp16 blocks, or the epilogue with each column tile's data as its
    conversion read it from L1 (its B object's bytes, linear) and the tanh table the cores read."""
    c = kernel.c
    numerics = kernel.numerics
    if c.types.t_out.is_block:
        return numerics.encode_out(values)
    e = numerics.epilogue
    if e.runtime:
        if len(tiles.modes) != 1:
            raise NotProven("conversions with different activation modes")
        (mode,) = tiles.modes
        act = next(a for a, m in MODES.items() if m == mode)
        numerics = replace(numerics, epilogue=e.selected(act))
    table = None
    if c.epilogue.uses_tanh:
        if not tables or any(not all(np.array_equal(x, y) for x, y in zip(t, tables[0], strict=True))
                             for t in tables):
            raise NotProven("cores read different tanh tables")
        table = tables[0]
    if not c.epilogue.needs_tile:
        return numerics.finish(values, None, None, table)
    assert b_words is not None, "an epilogue tile is read from B's words"
    out = np.zeros(values.shape, dtype=c.types.t_out.host)
    done: dict[int, np.ndarray] = {}
    for col0, word in sorted(set(zip(tiles.col0.tolist(), tiles.epilogue_b.tolist(), strict=True))):
        bias, requant = _epilogue_data(kernel, b_words, word)
        part = numerics.finish(values[:, col0:col0 + c.tiling.n], bias, requant, table)
        for other, prev in done.items():  # overlapping column tiles (a moved last block) must agree
            lo, hi = max(col0, other), min(col0, other) + c.tiling.n
            if lo < hi and not np.array_equal(prev[:, lo - other:hi - other], part[:, lo - col0:hi - col0]):
                raise NotProven("overlapping tiles with different epilogue data")
        done[col0] = part
        out[:, col0:col0 + c.tiling.n] = part
    return out


def _epilogue_data(kernel: KernelEmulator, b_words: np.ndarray, word: int) -> tuple[np.ndarray | None,
                                                                                     Requant | None]:
    """The bias and requantization an epilogue tile holds: the B object at `word`, its bytes in L1 order."""
    cells, _, ids = view_provenance(kernel.b_view)
    n_cells = int(cells.max(initial=-1)) + 1
    order = np.empty(n_cells, np.int64)
    order[cells] = ids  # the source word of each L1 cell (relative to the tile's first)
    data = b_words[word + order].view(np.uint8)
    c = kernel.c
    try:
        return read_tile(c.epilogue, c.tiling.n, data, c.types.t_out.is_float, c.types.t_out)
    except ValueError as err:
        raise NotProven(f"an epilogue tile that does not hold parameters: {err}") from None


def _c_buffer(c: GemmConfig, call: CallPlan, out: np.ndarray | tuple[np.ndarray, np.ndarray], rows: int, cols: int,
              words: int) -> np.ndarray:
    """C's values over rows x cols placed in C's buffer (its layout) as `words` uint32 words."""
    t, ld = c.types.t_out, call.ld("C")
    size = 4 * words
    if t.is_block:
        q = t.tile_rows
        tiles = bfp16.to_tiles(*out) if isinstance(out, tuple) else bfp16.tiles_of(out)
        span = (rows // q) * (ld // q)
        buf = np.zeros((max(span, -(-size // t.unit_bytes)), t.unit_bytes), np.uint8)
        buf[:span].reshape(rows // q, ld // q, t.unit_bytes)[:, : cols // q] = tiles
        return buf.reshape(-1)[:size].view(np.uint32)
    assert not isinstance(out, tuple)
    lines, width = (cols, rows) if call.c_col_maj else (rows, cols)
    flat = np.zeros(max(lines * ld, size // t.bytes), t.host)
    flat[: lines * ld].reshape(lines, ld)[:, :width] = out.T if call.c_col_maj else out
    return flat.view(np.uint8)[:size].view(np.uint32)
