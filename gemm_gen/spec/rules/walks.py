"""The access pattern of every DMA hop (Striking the Balance sec. 4.3 and 4.4), and the BD limits they keep.

Each walk is written once, here, over one operand's Grid (its sizes in its DMA units), with ints for one
design or NumPy arrays for every candidate the tuner weighs: design/patterns.py makes the Design's taps from
them, and `limits` lists every limit the design's walks keep (the DMA's fields, spec/rules/dma.py) in the order its
check raises them, which design/patterns.check_dma_limits raises the first of for one design and the search
space (gemm_gen/search/space.py) applies to all candidates at once. design/patterns.py describes each walk.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Protocol

import numpy as np

from ...facts.devices import Device, DmaSpec, TileKind
from ...facts.dtypes import WORD_BYTES, DType
from ...facts.errors import ConfigError, DmaLimitError, opt
from ...facts.groupquant import object_bytes
from . import Ints, decode_split, memtile
from .bd_form import shim_walk
from .dma import Limit, Walk, bd_limits, flattened, is_linear, scaled, static_limits, to_words

OPERANDS = ("A", "B", "C")


@dataclass(frozen=True)
class CallExtents:
    """What the walks read of one call of a design (call.CallPlan.extents; its sizes are arrays, one per
    candidate, in the search space)."""

    Mp: Ints  # the call's blocks cover Mp x k_walk x Np
    k_walk: Ints
    Np: Ints
    lds: tuple[Ints, Ints, Ints]  # elements between rows of A's, B's and C's DRAM buffers
    sizes: tuple[tuple[Ints, Ints], ...]  # (rows, columns) of A's, B's and C's DRAM buffers
    c_col_maj: bool  # this call's C layout
    b_extra_k: Ints  # K of B's epilogue tile past k_walk (0: none)
    last_row: Ints  # first C row of the last block row (moved back to end at M when the call shifts it)
    last_col: Ints


class Call(Protocol):
    """A call of a design (call.CallPlan)."""

    @property
    def extents(self) -> CallExtents: ...


@dataclass(frozen=True)
class Grid:
    """One operand's sizes in its DMA units: the numbers its walks are written in (ints, or arrays of
    candidates).

    An int4 B moves in 32-bit words of 8 values along N (its sizes along N count words). Scalar operands move
    element by element, and their L1 tiles are blocked r x s / s x t / r x t as the mmul reads them. A bfp16
    operand moves in 8 x 8 tiles (gemm_gen/facts/dtypes.py): every size is in tiles, and since one tile already is the
    kernel's mmul block, its L1 layout is plain row-major in tiles; the "block" of the walks is then a whole row
    of the tile (r = 1, s = k, t = n), except for A, whose L1 slice is 2 x 1 super-blocks of tiles
    (l1_layout.a_tile_pairs, mlir-aie's order, one kernel stream): the A walks' block is then 2 x 1 tiles (r =
    2, s = 1); and for C, whose L1 object is 2 x 2 super-blocks of tiles (l1_layout.c_tile_blocks, one kernel
    stream each way): r = t = 2."""

    unit: DType  # the operand's type; sizes count its DMA units
    m: Ints
    k: Ints
    n: Ints
    k_mt: Ints
    t_ma: Ints
    rho: Ints
    r: Ints  # the L1 block of the walks (units)
    s: Ints
    t: Ints
    Mp: Ints  # the call's blocks cover Mp x Np
    kw: Ints  # K as the array walks it (whole k_mt chunks)
    Np: Ints
    ld: Ints  # units between rows of this operand's DRAM buffer (B^T's when column-major)
    rows: int
    cols: int
    b_col_maj: bool
    dev: Device
    b_pack: str = "tiles"  # GemmConfig.b_pack
    a_col_maj: bool = False  # A's DRAM buffer is A^T (ld: units between rows of A^T)
    c_col_maj: bool = False  # C's DRAM buffer is C^T (this call's layout)
    c_built_col_maj: bool = False  # the build's C layout: its memtile sends C's columns (spec/rules/call_layouts.py)
    k_extra: Ints = 0  # B only: units of K past kw that B's walk also reads (the epilogue tile, one k-step)
    obj: Ints = 0  # W4A16 B only: words of one B object (q, scale rows, zero rows: b_objects), else 0

    def at(self, call: Call, operand: str) -> Grid:
        """This grid for another call of the same design: the call's extents, leading dimension and C layout, in
        this operand's units (a tile's rows along M and K, its columns along N and the leading dimension)."""
        qr, qc = self.unit.tile_rows, self.unit.tile_cols
        e = call.extents
        return replace(self, Mp=e.Mp // qr, kw=e.k_walk // qr, Np=e.Np // qc, ld=e.lds[OPERANDS.index(operand)] // qc,
                       c_col_maj=e.c_col_maj, k_extra=e.b_extra_k // qr if operand == "B" else 0)

    @property
    def objects(self) -> bool:
        """W4A16's B: objects of `obj` words (q, scale rows, zero rows), walked linearly."""
        return bool(np.any(self.obj))

    @property
    def b_l2_units(self) -> Ints:
        """Units of one B object in the memtile (a W4A16 object: its words)."""
        return self.obj if self.objects else self.b_l2_k * self.n

    @property
    def b_l1_units(self) -> Ints:
        """Units of one B object in L1."""
        return self.obj if self.objects else self.k * self.n

    @property
    def kb(self) -> Ints:
        """K extent of B's shim walk: kw, and the epilogue tile's k-step when there is one."""
        return self.kw + self.k_extra

    @property
    def a_rows(self) -> int:
        """Core rows served by one A shim and memtile (mlir-aie's n_A_tiles_per_shim)."""
        return memtile.a_rows_per_shim(self.rows, self.cols)

    @property
    def b_l2_k(self) -> Ints:
        """K extent of a B object in the memtile: k_mt for column-major tiles, else k."""
        return self.k_mt if memtile.b_chunked(self.b_col_maj, self.b_pack) else self.k


@dataclass(frozen=True)
class WalkOptions:
    """What the walks read of a config besides its tiling and its call (GemmConfig.walk_options)."""

    dev: Device
    types: tuple[DType, DType, DType]  # A, B, C
    mmul: tuple[int, int, int]
    rows: int
    cols: int
    a_col_maj: bool
    b_col_maj: bool
    c_col_maj: bool  # the build's C layout
    b_pack: str
    group_size: int = 0
    zero_points: bool = False


def grid(o: WalkOptions, operand: str, m: Ints, k: Ints, n: Ints, k_mt: Ints, rho: Ints, call: Call) -> Grid:
    """The sizes of operand A, B or C in that operand's DMA units, for one call."""
    unit = o.types[OPERANDS.index(operand)]
    t_ma = m // rho
    if unit.is_packed:
        return _packed_grid(o, operand, unit, m, k, n, k_mt, t_ma, rho, call)
    q = unit.tile_rows
    assert unit.tile_cols == q, "tile units are square"
    if q == 1:
        r, s, t = o.mmul
    else:
        k_u, n_u = k // q, n // q
        r = 2 if operand in ("A", "C") else 1  # A: 2 x 1 super-blocks of tiles; C: 2 x 2
        s = 1 if operand == "A" or (operand == "B" and not o.b_col_maj) else k_u
        t = 2 if operand == "C" else 1 if operand == "B" and o.b_col_maj else n_u
    return Grid(unit, m // q, k // q, n // q, k_mt // q, t_ma // q, rho, r, s, t, 0, 0, 0, 0, o.rows, o.cols,
                o.b_col_maj, o.dev, o.b_pack, o.a_col_maj, False, o.c_col_maj).at(call, operand)


def _packed_grid(o: WalkOptions, operand: str, unit: DType, m: Ints, k: Ints, n: Ints, k_mt: Ints, t_ma: Ints,
                 rho: Ints, call: Call) -> Grid:
    """An int4 B (row-major, packed along N: checks.check_int4_layout) in its DMA units, 32-bit words of
    tile_cols values along N: K extents stay in values, N extents (n, t, Np, the leading dimension)
    count words, so every walk is the row-major scalar one over a K x N/8 matrix of words. A W4A16 B
    (group scales) is objects of `obj` words instead, walked linearly; its t may cut a word
    (npu1's bf16 4 x 8 x 4: nothing re-tiles nibbles, so t // q is never used)."""
    assert operand == "B" and not o.b_col_maj, "int4 is B's type only, row-major"
    q = unit.tile_cols
    obj = object_bytes(k, n, o.group_size, o.zero_points) // WORD_BYTES if o.group_size else 0
    obj = obj if isinstance(obj, np.ndarray) else int(obj)
    r, s, t = o.mmul
    return Grid(unit, m, k, n // q, k_mt, t_ma, rho, r, s, t // q, 0, 0, 0, 0, o.rows, o.cols, o.b_col_maj, o.dev,
                o.b_pack, o.a_col_maj, False, o.c_col_maj, 0, obj).at(call, operand)


# ---- memtile and core walks (per object) --------------------------------------------------------------------
def a_l2_from_stream(c: Grid) -> Walk:
    t = c.t_ma
    if c.a_col_maj:  # the k_mt x m chunk of A^T (row-major on the stream): k x T_MA tiles of A^T
        return Walk(0, (c.k_mt // c.k, c.k, c.rho, t), (c.m * c.k, t, t * c.k, 1))
    return Walk(0, (c.rho, t, c.k_mt // c.k, c.k), (t * c.k, c.k, c.m * c.k, 1))


def a_l2_to_stream(c: Grid) -> Walk:
    t = c.t_ma
    if c.unit.is_block:  # in tiles: K tile major (the innermost stride is then not 1: 4 word dims)
        return Walk(0, (c.k_mt // c.k * c.rho, c.k, t), (t * c.k, 1, c.k))
    if c.a_col_maj:  # per A^T tile: r-column panels, each down K: s x r blocks of A^T in kernel order
        return Walk(0, (c.k_mt // c.k * c.rho, t // c.r, c.k, c.r), (t * c.k, c.r, t, 1))
    return Walk(0, (c.k_mt // c.k * c.rho, c.k // c.s, t, c.s), (t * c.k, c.s, c.k, 1))


def a_l1_from_stream(c: Grid) -> Walk:
    if c.a_col_maj:
        return Walk.linear(c.t_ma * c.k)
    return Walk(0, (c.k // c.s, c.t_ma // c.r, c.r * c.s), (c.r * c.s, c.r * c.k, 1))


def b_l2_to_stream(c: Grid) -> Walk:
    if c.objects:  # a W4A16 object, already in kernel order (design/b_objects.py): forwarded as it is
        return Walk.linear(c.obj)
    if c.b_pack == "strips" and c.unit.is_block:  # one k x n L1 tile, already the kernel's 1 x 2 super-blocks
        return Walk.linear(c.k * c.n)
    if c.unit.is_block:  # 8 x 8 tiles: k, n, k_mt count tiles
        if c.b_col_maj:  # B^T object n x k_mt: per k-step K tile major; the core S2MM pairs the columns
            return Walk(0, (c.k_mt // c.k, c.k, c.n), (c.k, 1, c.k_mt))
        return Walk(0, (c.n // 2, c.k, 2), (2, c.n, 1))  # k x n object: column pairs, then K, then the pair
    if c.b_col_maj:  # B^T object n x k_mt
        return Walk(0, (c.k_mt // c.k, c.k // c.s, c.n, c.s), (c.k, c.s, c.k_mt, 1))
    return Walk(0, (c.k // c.s, c.n // c.t, c.s, c.t), (c.s * c.n, c.t, c.n, 1))


def b_l1_from_stream(c: Grid) -> Walk | None:
    if c.objects:
        return None
    if c.unit.is_block and memtile.b_chunked(c.b_col_maj, c.b_pack):
        # bfp16 B^T tiles arrive K tile major: (kb, nb) -> (nb // 2) 2 k + 2 kb + nb % 2 (a pair is 2 tiles in a row)
        return Walk(0, (c.k, c.n // 2, 2), (2, 2 * c.k, 1))
    if memtile.b_chunked(c.b_col_maj, c.b_pack):  # column-major tiles: the memtile sends B^T's k x n
        return Walk(0, (c.k // c.s, c.n // c.t, c.t * c.s), (c.t * c.s, c.t * c.k, 1))
    return None  # the memtile already emits s x t blocks in kernel order


def c_l2_to_stream(c: Grid) -> Walk:
    if memtile.c_blocks_transposed(c.c_built_col_maj, c.unit):
        return Walk(0, (c.n // c.t, c.t, c.m // c.r, c.r), (c.r * c.t, c.r, c.r * c.n, 1))
    if c.c_built_col_maj:
        return Walk(0, (c.n // c.t, c.t, c.m // c.r, c.r), (c.r * c.t, 1, c.r * c.n, c.t))
    return Walk(0, (c.m // c.r, c.r, c.n // c.t, c.t), (c.r * c.n, c.t, c.r * c.t, 1))


# ---- shim (runtime) walks over the host tensors -------------------------------------------------------------
def row_block(rows: Ints, row_stride_words: Ints, spec: DmaSpec) -> Ints:
    """Rows per inner block of a strip walk (_row_blocks) for one strip or an array of them."""
    if isinstance(rows, np.ndarray) or isinstance(row_stride_words, np.ndarray):
        return _row_blocks(rows, row_stride_words, spec)
    if rows <= spec.max_wrap:
        return rows
    return _one_row_block(int(rows), int(row_stride_words), spec)


@lru_cache(maxsize=4096)
def _one_row_block(rows: int, row_stride_words: int, spec: DmaSpec) -> int:
    return int(_row_blocks(np.array([rows]), np.array([row_stride_words]), spec)[0])


def _row_blocks(rows: Ints, row_stride_words: Ints, spec: DmaSpec) -> np.ndarray:
    """Rows per inner block of a strip walk so that both the wrap and the outer stride fit.

    A strip of `rows` rows is walked as [rows/R, R, width]; R must divide rows, fit the d1 wrap,
    and R rows must fit the stride field: the largest such R, or `rows` when they fit the wrap, or 1 (which
    always works while one row fits). Computed once per distinct (rows, stride) of the candidates.
    """
    rows_a, stride_a = np.broadcast_arrays(np.asarray(rows, dtype=np.int64), np.asarray(row_stride_words,
                                                                                        dtype=np.int64))
    pairs, back = np.unique(np.stack([rows_a.ravel(), stride_a.ravel()]), axis=1, return_inverse=True)
    r = np.arange(1, spec.max_wrap + 1, dtype=np.int64)
    out = np.empty(pairs.shape[1], dtype=np.int64)
    for lo in range(0, pairs.shape[1], 256):  # a few distinct strips; bounded memory for many
        rs, ss = pairs[0, lo:lo + 256, None], pairs[1, lo:lo + 256, None]
        ok = (r <= rs) & (rs % r == 0) & (r * ss <= spec.max_stride)
        largest = np.where(ok, r, 1).max(axis=1)
        out[lo:lo + 256] = np.where(rs[:, 0] <= spec.max_wrap, rs[:, 0], largest)
    return out[np.asarray(back).ravel()].reshape(rows_a.shape)


def _strip(offset: Ints, rows: Ints, width: Ints, row_stride: Ints, words_per_elem: float, spec: DmaSpec) -> Walk:
    stride_words = row_stride * words_per_elem
    r = row_block(rows, stride_words.astype(np.int64) if isinstance(stride_words, np.ndarray) else int(stride_words),
                  spec)
    return Walk(offset, (rows // r, r, width), (r * row_stride, row_stride, 1))


def shim_a(c: Grid, block_row: Ints, shim: int) -> Walk:
    """The (a_rows*m) x K strip of A that A shim `shim` carries for the output block whose first
    row is `block_row` (one m-row strip per core row it serves), in k_mt chunks."""
    first_row = block_row + shim * c.a_rows * c.m
    if c.a_col_maj and c.a_rows == 1:  # A^T: K rows of the core row's m columns
        return _strip(first_row, c.kw, c.m, c.ld, c.unit.unit_bytes / 4, c.dev.dma[TileKind.SHIM])
    if c.a_col_maj:  # per k_mt chunk, each served core row's k_mt x m block of A^T in turn (the memtile's
        # split slices): the chunks are the shim BD's iteration dimension (spec/rules/memtile.a_col_maj_chunks)
        return Walk(first_row, (c.kw // c.k_mt, c.a_rows, c.k_mt, c.m), (c.k_mt * c.ld, c.m, c.ld, 1))
    return Walk(first_row * c.ld, (c.kw // c.k_mt, c.a_rows * c.m, c.k_mt), (c.k_mt, c.ld, 1))


def shim_b(c: Grid, block_col: Ints, col: int) -> Walk:
    """The K x n strip of B for core column `col` of the output block whose first column is
    `block_col` (with an epilogue, K runs on by its tile's k-step: Grid.kb)."""
    first_col = block_col + col * c.n
    if c.objects:  # W4A16: the column's objects, contiguous in k-step order, one run (design/b_objects.py)
        steps = c.kw // c.k
        return Walk.linear(steps * c.obj, first_col // c.n * steps * c.obj)
    if c.b_pack == "strips":  # mlir-aie's packing: the strip is one contiguous run
        return Walk.linear(c.kb * c.n, first_col * c.kb)
    if c.b_col_maj:  # stored N x K: n rows of B^T, walked in k_mt chunks (k_mt = k with an epilogue tile)
        return Walk(first_col * c.ld, (c.kb // c.k_mt, c.n, c.k_mt), (c.k_mt, c.ld, 1))
    return _strip(first_col, c.kb, c.n, c.ld, c.unit.unit_bytes / 4, c.dev.dma[TileKind.SHIM])


def shim_c(c: Grid, block_row: Ints, block_col: Ints, col: int) -> Walk:
    """The (rows*m) x n block of C that column `col` joins for the output block at (block_row,
    block_col), in this call's layout (see design/patterns.shim_c)."""
    first_col = block_col + col * c.n
    if c.c_col_maj and c.c_built_col_maj:  # tiles in columns, down C^T's rows (mlir-aie's [4, n, m] / [m, M, 1])
        return Walk(first_col * c.ld + block_row, (c.rows, c.n, c.m), (c.m, c.ld, 1))
    if c.c_col_maj:  # tile rows across C^T's rows: element (i, j) to C^T[j, i]
        return Walk(first_col * c.ld + block_row, (c.rows, c.m, c.n), (c.m, 1, c.ld))
    if c.c_built_col_maj:  # tile columns down C's rows: element (i, j) of each tile's stream to C[i, j]
        return Walk(block_row * c.ld + first_col, (c.rows, c.n, c.m), (c.m * c.ld, 1, c.ld))
    return _strip(block_row * c.ld + first_col, c.rows * c.m, c.n, c.ld, c.unit.unit_bytes / 4,
                  c.dev.dma[TileKind.SHIM])


# ---- the split decode placement's shim walks (spec/rules/decode_split.py) ---------------------------------------
SPLIT_FIX = f"use another k or n (or {opt('rows', 1)})"


def shim_b_stream(c: Grid, block_col: Ints, first: int, count: int) -> Walk:
    """A split B stream's walk for the output block whose first column is `block_col`: the K x n strips of
    virtual columns [first, first + count), per k-step (per k_mt chunk of B^T) every core's tile in turn,
    as the stream's memtile object holds them, one slice per core (before bd_form.shim_walk fits it to one BD)."""
    col = block_col + first * c.n  # the stream's first column
    if c.objects:  # W4A16: each core column's objects contiguous in k-step order (design/b_objects.py)
        steps = c.kw // c.k
        return Walk(col // c.n * steps * c.obj, (steps, count, c.obj), (c.obj, steps * c.obj, 1))
    if c.b_pack == "strips":  # each core column's K x n strip contiguous: k x n of each per k-step
        return Walk(col * c.kb, (c.kb // c.k, count, c.k * c.n), (c.k * c.n, c.kb * c.n, 1))
    if c.b_col_maj:  # B^T: the stream's count n rows, in k_mt chunks
        return Walk(col * c.ld, (c.kb // c.k_mt, count * c.n, c.k_mt), (c.k_mt, c.ld, 1))
    # row-major: per k-step each core's k x n tile (the memtile's S2MM fills a split link's object slice by
    # slice, one BD each: sim/lower.py), so runs of n
    return Walk(col, (c.kb // c.k, count, c.k, c.n), (c.k * c.ld, c.n, c.ld, 1))


def shim_c_join(c: Grid, block_row: Ints, block_col: Ints, first: int, count: int) -> Walk:
    """The C a physical column joins along N in the split placement: virtual columns [first, first + count),
    each an m x n tile sent row by row (c_l2_to_stream), written side by side."""
    return Walk(block_row * c.ld + block_col + first * c.n, (count, c.m, c.n), (c.n, c.ld, 1))


def split_b_where(stream: int) -> str:
    return f"shim MM2S B stream {stream} (split decode)"


def split_c_where(col: int) -> str:
    return f"shim S2MM C of column {col} (split decode)"


def _ints(walk: Walk) -> Walk:
    """One design's walk in plain ints."""
    return Walk(int(walk.offset), tuple(int(s) for s in walk.sizes), tuple(int(s) for s in walk.strides))


def one_bd(walk: Walk, unit: DType, spec: DmaSpec, where: str) -> Walk:
    """One design's walk as one shim BD (bd_form.shim_walk), or DmaLimitError naming the limit."""
    return shim_walk(_ints(walk), unit, spec, where, SPLIT_FIX)


def _one_bd_limit(walk: Walk, g: Grid, where: str) -> Limit:
    """Per candidate: whether the walk fits one shim BD in some form (bd_form.shim_walk, as the build programs
    it), and, for a candidate whose walk does not, what the build says. Each distinct walk is tried once."""
    spec = g.dev.dma[TileKind.SHIM]
    parts = [walk.offset, *walk.sizes, *walk.strides]
    shape = np.broadcast_shapes(*(np.shape(x) for x in parts))
    table = np.stack([np.broadcast_to(np.asarray(x, dtype=np.int64), shape).ravel() for x in parts], axis=1)
    distinct, which = np.unique(table, axis=0, return_inverse=True)
    said = []
    for row in distinct:
        try:
            one_bd(Walk(row[0], tuple(row[1:1 + len(walk.sizes)]), tuple(row[1 + len(walk.sizes):])), g.unit, spec,
                   where)
            said.append("")
        except DmaLimitError as e:
            said.append(e.raw_what)
    what = np.array(said, dtype=object)[np.asarray(which).ravel()].reshape(shape)
    ok = what == ""
    if not shape:
        return Limit(bool(ok), "{}", (str(what),), SPLIT_FIX)
    return Limit(ok, "{}", (what,), SPLIT_FIX)


def split_limits(b: Grid, c: Grid, last_row: Ints, last_col: Ints) -> list[tuple[Limit, str]]:
    """The split placement's shim walks (each B stream, each physical column's joined C) as one BD each, for the
    last output block (offsets do not matter but for whole words)."""
    dev = b.dev
    qb, qc = b.unit.tile_cols, c.unit.tile_rows
    out = [(_one_bd_limit(shim_b_stream(b, last_col // qb, s.first, s.count), b, split_b_where(i)), SPLIT_FIX)
           for i, s in enumerate(decode_split.streams(dev))]
    rows = dev.core_rows
    out += [(_one_bd_limit(shim_c_join(c, last_row // qc, last_col // qc, col * rows, rows), c, split_c_where(col)),
             SPLIT_FIX) for col in range(dev.columns)]
    return out


# ---- the limits of every walk of a call ---------------------------------------------------------------------
SHIM_BUFFER_BYTES = 1 << 48  # the shim's host addresses
HOST_BUFFER = "{} needs {} B, beyond the 48-bit shim address"


HOPS = ("shim", "tiles")  # the shim walks of a call, and the memtile and core walks with the host buffers


def limits(a: Grid, b: Grid, c: Grid, call: Call, hops: tuple[str, ...] = HOPS) -> list[tuple[Limit, str]]:
    """Every limit the walks of a call keep (of the `hops` asked), with the fix each names, in the order the
    design's check raises them: each distinct walk (offsets do not matter: the last output block's) against the
    DMA that runs it in words, the shim's first, then the memtile and core walks against mlir-aie's static BD
    verifier (sizes in elements of the buffer's type: bfp16 tiles count as their 8 v8bfp16ebs8 blocks), then the
    host buffers' addresses."""
    dev = a.dev
    shim, mem, core = dev.dma[TileKind.SHIM], dev.dma[TileKind.MEM], dev.dma[TileKind.CORE]
    out: list[tuple[Limit, str]] = []
    if "shim" in hops:
        last_row, last_col = call.extents.last_row, call.extents.last_col
        if decode_split.is_split(dev, a.rows, a.cols):  # the split placement's own walks, each one BD
            out += split_limits(b, c, last_row, last_col)
        qa, qc = a.unit.tile_rows, c.unit.tile_rows
        qb = b.unit.tile_cols  # B is indexed along N (an int4 unit is 1 x 8)
        out += _word_limits([
            (shim_a(a, last_row // qa, a.rows // a.a_rows - 1), a, shim, "shim MM2S A (m x K strip per core row)",
             "reduce m or k_mt, or K"),
            (shim_b(b, last_col // qb, b.cols - 1), b, shim, "shim MM2S B (K x n strip)", "reduce n or k_mt, or N"),
            (shim_c(c, last_row // qc, last_col // qc, c.cols - 1), c, shim, "shim S2MM C ((rows*m) x n block)",
             "reduce m or n, or N"),
        ])
    if "tiles" not in hops:
        return out
    b_l1 = b_l1_from_stream(b)
    out += _word_limits([
        (a_l2_from_stream(a), a, mem, "memtile S2MM A (dims_from_stream)", "reduce m, k or k_mt"),
        (a_l2_to_stream(a), a, mem, "memtile MM2S A (dims_to_stream)", "reduce m, k or k_mt"),
        (b_l2_to_stream(b), b, mem, "memtile MM2S B (dims_to_stream)", "reduce n, k or k_mt"),
        (c_l2_to_stream(c), c, mem, "memtile MM2S C (dims_to_stream)", "reduce m or n"),
        (a_l1_from_stream(a), a, core, "core S2MM A (dims_from_stream)", "reduce m or k"),
        (Walk.linear(c.m * c.n), c, core, "core MM2S C", "reduce m or n"),
        (Walk.linear(b.b_l2_units), b, mem, "memtile S2MM B", "reduce n or k_mt"),
        (b_l1, b, core, "core S2MM B (dims_from_stream)", "reduce n or k") if b_l1 is not None else
        (Walk.linear(b.b_l1_units), b, core, "core S2MM B", "reduce k or n"),
    ])
    statics = [
        (a_l2_from_stream(a), a, mem, a.m * a.k_mt, "memtile S2MM A (dims_from_stream)", "reduce m, k or k_mt"),
        (a_l2_to_stream(a), a, mem, a.m * a.k_mt, "memtile MM2S A (dims_to_stream)", "reduce m, k or k_mt"),
        (b_l2_to_stream(b), b, mem, b.b_l2_units, "memtile MM2S B (dims_to_stream)", "reduce n, k or k_mt"),
        (c_l2_to_stream(c), c, mem, c.m * c.n, "memtile MM2S C (dims_to_stream, per join slice)", "reduce m or n"),
        (a_l1_from_stream(a), a, core, a.t_ma * a.k, "core S2MM A (dims_from_stream)", "reduce m or k"),
    ]
    if b_l1 is not None:
        statics.append((b_l1, b, core, b.k * b.n, "core S2MM B (dims_from_stream)", "reduce n or k"))
    for walk, g, spec, units, where, fix in statics:
        parts = g.unit.blocks_per_unit
        linear = is_linear(walk)  # no dims: nothing for the verifier to check
        out += [(lim._replace(ok=linear | lim.ok), fix)
                for lim in static_limits(spec, scaled(walk, parts)[0], units * parts, where)]
    for name, g, (rows, cols) in zip(OPERANDS, (a, b, c), call.extents.sizes):  # the host buffers: addressable
        nbytes = g.unit.unit_nbytes(rows * cols // g.unit.unit_elems)
        out.append((Limit(nbytes < SHIM_BUFFER_BYTES, HOST_BUFFER, (name, nbytes), "split the GEMM", ConfigError), ""))
    return out


def _word_limits(words: list[tuple[Walk, Grid, DmaSpec, str, str]]) -> list[tuple[Limit, str]]:
    """Each walk in 32-bit words against the DMA that runs it (a linear walk as one dimension), with its fix."""
    out: list[tuple[Limit, str]] = []
    for walk, g, spec, where, fix in words:
        in_words, conversion = to_words(flattened(walk), g.unit)
        out += [(lim, fix) for lim in conversion + bd_limits(spec, in_words, where)]
    return out

