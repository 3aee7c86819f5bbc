"""Kernel emulator: what the zero and matmul kernels do to the L1 tiles they are handed.

It reads the tiles in the blocked layout the kernel expects (l1_layout), so data that arrived in
any other layout is either caught by its provenance (not a contiguous block of A or B, A and B
from different K ranges, a tile switching rows mid-reduction, K chunks missing or repeated) or
computes the wrong values. The arithmetic is KernelNumerics.call, the same as the reference.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, NoReturn

import numpy as np

from ..design.b_objects import dequant_object, kernel_order_in
from ..design.grid import Grid
from ..design.host_buffers import b_unit_coords_in, b_unit_in
from ..design.ir import Design, TileRef
from ..facts import bfp16
from ..facts.dtypes import F32, I32, I64, WORD_BYTES, DType, unpack_i4
from ..facts.epilogue import MODES, Requant, read_lut_table
from ..facts.epilogue_args import read_tile
from ..facts.errors import LayoutError
from ..facts.l1_layout import a_layout, a_tile_pairs, b_layout, b_tile_pairs, c_layout, c_tile_blocks
from ..facts.numerics import KernelNumerics, Product
from ..spec.call import CallPlan
from ..spec.config import GemmConfig
from ..spec.rules.dequant import to_bfp16
from ..spec.rules.l1 import c_split_problem
from . import words as w

WORD = I32  # a lane of one 32-bit word: what a packed type's tile is gathered in
OPERAND_CACHE = 256  # prepared tiles kept: more than the A and B tiles in flight across the array


@dataclass
class TileState:
    """The output tile a core is accumulating, as its inputs' provenance says."""

    row0: int = -1
    col0: int = -1
    next_k: dict[int, int] = field(default_factory=dict)  # per C slice: the K chunk it needs next
    deq_word: int = -1  # W4A16: the B object (its first word) the core's scratch holds, dequantized by slice 0


@dataclass
class KernelStats:
    matmul_calls: int = 0
    zero_calls: int = 0
    convert_calls: int = 0
    tiles_done: int = 0  # output tiles whose K reduction completed
    acc_overflows: int = 0
    calls_per_core: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class TileView:
    """How one operand tile lies in L1 cells, precomputed per layout.

    gather: index into the cells' lane view (uint8/16/32) giving the logical matrix.
    hi: the expected upper 32 bits (tag, source word id) of every cell, for a tile whose first
        word comes from source word 0; a real tile adds its base word id.
    """

    gather: np.ndarray
    lane: np.dtype
    host: np.dtype
    hi: np.ndarray

    @classmethod
    def of(cls, addr: np.ndarray, t: DType, src_offset: np.ndarray, tag: int) -> TileView:
        per, b = t.per_word, t.bytes
        gather = (addr // per) * (8 // b) + addr % per  # cells are 8 bytes: data lanes first
        logical = np.empty(addr.size, dtype=np.int64)
        logical[addr.ravel()] = np.arange(addr.size)
        word_off = src_offset.ravel()[logical[::per]] // per
        hi = (np.uint64(tag) << np.uint64(w.ID_BITS)) + word_off.astype(np.uint64)
        return cls(gather, np.dtype(f"u{b}"), t.host, hi)

    def read(self, cells: np.ndarray) -> np.ndarray:
        return cells.view(self.lane)[self.gather].view(self.host)

    def write(self, cells: np.ndarray, values: np.ndarray, base_word: int) -> None:
        cells.view(self.lane)[self.gather] = np.ascontiguousarray(values, dtype=self.host).view(self.lane)
        cells.view(np.uint32)[1::2] = self.hi + np.uint64(base_word)

    def base_word(self, cells: np.ndarray) -> int | None:
        """The tile's first source word if every cell holds the word the layout predicts."""
        hi = cells >> w.ID_SHIFT
        base = hi[0] - self.hi[0]
        if base >> np.uint64(w.ID_BITS) or not np.array_equal(hi, self.hi + base):
            return None
        return int(base)


@dataclass(frozen=True)
class UnitView:
    """How a tile of multi-word units (bfp16 8 x 8 tiles) lies in L1 cells.

    gather[u, w]: the cell of word w of the u-th logical unit (row-major over the unit grid).
    hi: the expected upper 32 bits of those cells for a tile whose first word is source word 0.
    lines_are_rows: A and C tiles hold one block per row; B tiles one block per column (of K x n).
    """

    gather: np.ndarray
    hi: np.ndarray
    grid_shape: tuple[int, int]
    lines_are_rows: bool
    src_units: np.ndarray  # source unit offset of each logical unit (for error reports)

    @classmethod
    def of(cls, addr: np.ndarray, t: DType, src_units: np.ndarray, tag: int, lines_are_rows: bool) -> UnitView:
        words = t.unit_bytes // 4
        gather = addr.reshape(-1, 1) * words + np.arange(words)
        src_words = src_units.reshape(-1, 1) * words + np.arange(words)
        hi = (np.uint64(tag) << np.uint64(w.ID_BITS)) + src_words.astype(np.uint64)
        return cls(gather, hi, (int(addr.shape[0]), int(addr.shape[1])), lines_are_rows, src_units)

    def _units(self, cells: np.ndarray) -> np.ndarray:
        data = (cells[self.gather] & w.VALUE_MASK).astype(np.uint32)
        return data.view(np.uint8).reshape(*self.grid_shape, -1)

    def read(self, cells: np.ndarray) -> np.ndarray:
        """The logical values (rows x cols of the unit grid, times the tile size)."""
        vals = bfp16.tile_values(self._units(cells))  # tile rows = lines
        if self.lines_are_rows:
            return vals
        tr, tc = self.grid_shape
        q = bfp16.TILE
        return np.ascontiguousarray(vals.reshape(tr, q, tc, q).transpose(0, 3, 2, 1)).reshape(tr * q, tc * q)

    def write_encoded(self, cells: np.ndarray, exps: np.ndarray, mants: np.ndarray, base_word: int) -> None:
        """Store a matrix encoded in row blocks (lines are rows) with its provenance."""
        assert self.lines_are_rows
        tiles = bfp16.to_tiles(exps, mants).reshape(self.gather.shape[0], -1)
        words = tiles.view(np.uint32).astype(np.uint64)
        cells[self.gather] = ((self.hi + np.uint64(base_word)) << w.ID_SHIFT) | words

    def base_word(self, cells: np.ndarray) -> int | None:
        hi = cells[self.gather] >> w.ID_SHIFT
        base = hi.flat[0] - self.hi.flat[0]
        if base >> np.uint64(w.ID_BITS) or not np.array_equal(hi, self.hi + base):
            return None
        return int(base)

    def source_units(self, cells: np.ndarray) -> np.ndarray:
        """The source unit each logical unit holds, from its first word."""
        words = self.gather.shape[1]
        return (w.word_ids(cells[self.gather[:, 0]]) // words).reshape(self.grid_shape)


@dataclass(frozen=True)
class PairView:
    """An int64 accumulator kept as int32 pairs (low word first, as aie::vector_cast<int32> of an
    acc64 accumulator is stored): a TileView of the pairs' int32 words."""

    words: TileView

    def read(self, cells: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(self.words.read(cells)).view(np.int64)

    def write(self, cells: np.ndarray, values: np.ndarray, base_word: int) -> None:
        self.words.write(cells, np.ascontiguousarray(values, dtype=np.int64).view(np.int32), base_word)


@dataclass(frozen=True)
class PackedView:
    """A tile of a packed sub-byte type (int4 B) in L1 cells: a TileView of its 32-bit words (each one
    DMA unit, tile_cols values along a row) whose read unpacks the values, the low nibble first."""

    words: TileView

    @property
    def gather(self) -> np.ndarray:
        return self.words.gather

    def read(self, cells: np.ndarray) -> np.ndarray:
        data = np.ascontiguousarray(self.words.read(cells))  # (rows, words) of uint32 lanes
        return unpack_i4(data.view(np.uint8).reshape(data.shape[0], -1))

    def base_word(self, cells: np.ndarray) -> int | None:
        return self.words.base_word(cells)


@dataclass(frozen=True)
class ObjectView:
    """A W4A16 B object in L1 cells: a TileView of its words, linear (b_objects), whose read gives the
    object's bytes; the kernel model dequantizes them as the kernel does (b_objects.dequant_object)."""

    words: TileView

    @property
    def gather(self) -> np.ndarray:
        return self.words.gather

    def read(self, cells: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(self.words.read(cells)).view(np.uint8)

    def base_word(self, cells: np.ndarray) -> int | None:
        return self.words.base_word(cells)


View = TileView | UnitView | PackedView | ObjectView


# ---- where a tile's first word says it lies (array-wise: sim/bulk.py checks every call at once) -----------------
def units_at(g: Grid, word: Any) -> Any:
    """Index of the unit (element, or bfp16 tile) of an operand's buffer at `word` (arrays too)."""
    b = g.unit.unit_bytes
    return word * (WORD_BYTES // b) if b <= WORD_BYTES else word // (b // WORD_BYTES)


def a_rows(c: GemmConfig, g: Grid, a_word: np.ndarray, k0: Any) -> tuple[np.ndarray, np.ndarray]:
    """(first row, valid) of A tiles whose first words are `a_word`, given their K chunks k0."""
    q = g.unit.tile_rows
    unit = units_at(g, a_word)
    if c.layout.a_col_maj:  # A^T's row k0, column `row`
        row, rest = unit - k0 // q * g.ld, 0
    else:
        row, rest = np.divmod(unit - k0 // q, g.ld)
    return row * q, (rest == 0) & (row >= 0) & (row < g.Mp)


def b_cols(c: GemmConfig, call: CallPlan, g: Grid, b_word: np.ndarray, k0: Any) -> tuple[np.ndarray, np.ndarray]:
    """(first N column, valid) of B tiles whose first words are `b_word`, given that they must start K chunks k0
    (a junk column's values wrap into B's next row, so the word alone may not say)."""
    qk, qn = g.unit.tile_rows, g.unit.tile_cols  # values per unit along K and N
    unit, kk = units_at(g, b_word), k0 // qk
    if g.obj or c.layout.b_pack == "strips":
        got_k, nn = b_unit_coords_in(g, unit)
        ok = np.asarray(got_k == kk)
        if g.obj:
            ok = ok & (unit % g.obj == 0)  # the first word of an object
        return np.asarray(nn * qn), ok
    if c.layout.b_col_maj:
        nn, rest = np.divmod(unit - kk, g.ld)
    else:
        nn, rest = unit - kk * g.ld, 0
    return nn * qn, (rest == 0) & (nn >= 0) & (nn < g.Np)


def c_words(c: GemmConfig, call: CallPlan, row0: Any, col0: Any) -> Any:
    """C's source word holding element (row0, col0) (the first word of its tile for bfp16; arrays too)."""
    t, ld = c.types.t_out, call.ld("C")
    if t.is_block:
        q = t.tile_rows
        return ((row0 // q) * (ld // q) + col0 // q) * (t.unit_bytes // 4)
    return (col0 * ld + row0 if call.c_col_maj else row0 * ld + col0) // t.per_word


def input_view_of(addr: np.ndarray, t: DType, src: np.ndarray, tag: int, lines_are_rows: bool = True) -> View:
    """view_of for an input tile, which may also be of a packed type (addr and src then count words)."""
    if t.is_packed:
        return PackedView(TileView.of(addr, WORD, src, tag))
    return view_of(addr, t, src, tag, lines_are_rows)


def view_of(addr: np.ndarray, t: DType, src: np.ndarray, tag: int,
            lines_are_rows: bool = True) -> TileView | UnitView:
    """The view of a tile of operand type t: element lanes for scalar types, whole units for tiles."""
    if t.unit_bytes > 4:
        return UnitView.of(addr, t, src, tag, lines_are_rows)
    return TileView.of(addr, t, src, tag)


class KernelEmulator:
    """The kernels of one Design for one call: its kernel records (their roles) and its operands' grids come
    from the Design."""

    def __init__(self, design: Design, call: CallPlan | None = None) -> None:
        self.design = design
        self.c = c = design.config
        self.build = b = design.build  # the kernel record the build made: what the kernels compute
        self.call = call = call or c.call
        self.numerics = c.numerics
        self.p = b.types.precision
        self.roles = design.roles
        ga, gb, gc = (design.grid(op, call) for op in ("A", "B", "C"))
        self.grids = {"A": ga, "B": gb, "C": gc}
        i, j = np.indices((ga.t_ma, ga.k))
        # A's rows are ld apart in DRAM (A^T's when column-major); a tile has T_MA = m / rho rows
        self.a_off = j * ga.ld + i if b.a_col_maj else i * ga.ld + j
        kk, jj = np.indices((gb.k, gb.n))
        self.b_off = b_unit_in(gb, kk, jj)  # offsets inside one L1 tile: b_unit_in(gb, 0, 0) == 0
        # bfp16 A: 2 x 1 super-blocks of tiles (the kernel's one A stream)
        a_l1 = (a_tile_pairs(ga.t_ma, ga.k) if ga.unit.is_block
                else a_layout(ga.t_ma, ga.k, ga.r, ga.s, b.a_col_maj))
        self.a_view = view_of(a_l1, ga.unit, self.a_off, w.TAG_A)
        # bfp16 B: 1 x 2 super-blocks of tiles for every packing (the kernel's one B stream)
        self.b_view: View
        if gb.obj:  # W4A16: the object's words, linear from its first (its order inside is the host's)
            self.b_off = np.arange(gb.obj)[None, :]
            self.b_view = ObjectView(TileView.of(self.b_off, WORD, self.b_off, w.TAG_B))
        else:
            b_l1 = (b_tile_pairs(gb.k, gb.n) if gb.unit.is_block
                    else b_layout(gb.k, gb.n, gb.s, gb.t, b.b_col_maj))
            self.b_view = input_view_of(b_l1, gb.unit, self.b_off, w.TAG_B, lines_are_rows=False)
        # C in L1 while it accumulates: each call updates one slice of T_MA rows, contiguous in the
        # blocked layout. In C's own type; or, when acc != dtype_out, in acc's blocked layout (no
        # provenance until the final conversion), its first blocks inside the C object (c_split_elems
        # values) and the rest in the worker's C acc buffer.
        # bfp16 C: 2 x 2 super-blocks of tiles (one kernel stream each way); a T_MA slice is whole row
        # pairs, so it is a contiguous run of the same order. An accumulator converted into such tiles
        # is in the same order of 8 x 8 blocks (the kernel's in-place conversion is one linear pass).
        self.slice_words = b.types.t_acc.nbytes(b.t_ma * b.n) // 4
        self.acc_views: dict[int, TileView | PairView] = {}
        self.acc_super_blocks = self.p.converts_c and b.types.t_out.is_block
        if self.p.converts_c:
            # the kernel converts in place, block i over output block i in increasing order: the split must
            # leave no accumulator block to be overwritten before it is read
            problem = c_split_problem(self.p, b.m, b.n, b.acc_block, b.c_split_elems // b.acc_block[0])
            if problem is not None:
                raise LayoutError(problem, "split C's accumulator where rules/l1.c_split_blocks does")
            oi, oj = np.indices((gc.m, gc.n))  # the conversion writes the whole object in C's tiles
            self.out_view = view_of(self._c_l1(gc.m), gc.unit, self._c_off(oi, oj), w.TAG_C)
        else:
            ci, cj = np.indices((gc.t_ma, gc.n))
            self.c_view = view_of(self._c_l1(gc.t_ma), gc.unit, self._c_off(ci, cj), w.TAG_C)
        self.deq_order = (kernel_order_in(design.grid("B"), b.n, b.mmul[2], c.call.Np) if gb.obj
                          else np.zeros(0, np.int64))
        self.tiles: dict[TileRef, TileState] = {}
        self.calls: dict[TileRef, int] = {}
        self.stats = KernelStats()
        # A tile reaches every core of its row and a B tile every core of its column: prepare each
        # operand once. Sound because a tile passed its provenance check, so its source words say
        # exactly which block of the (read-only) input it holds.
        self.operands: OrderedDict[tuple[str, int], np.ndarray] = OrderedDict()
        # the fast simulator's one exact product of what the tiles held, where one stood for all calls (sim/bulk.py):
        # the reference and the accuracy measure take it where their operands give the same products
        self.product: Product | None = None

    def __call__(self, tile: TileRef, kernel: str, cells: list[np.ndarray], scalars: tuple[int, ...] = ()) -> None:
        role = self.roles.get(kernel)
        if role == "zero":
            self.zero(tile, cells)
        elif role == "matmul":
            a_cells, b_cells, c_cells, *extra = cells
            deq_cells = None  # W4A16's scratch: the last argument, or converting once its B bfp16 one (A's first)
            if self.build.group_size:
                deq_cells = extra[1] if self.build.convert_once else extra.pop()
            acc_cells = extra[-1] if self.p.converts_c else None
            self.matmul(tile, a_cells, b_cells, c_cells, c_slice=scalars[0] if scalars else 0, acc_cells=acc_cells,
                        deq_cells=deq_cells)
        elif role == "convert":
            # C, C_acc, [the epilogue tile], [the tanh table's two copies]; a runtime activation's mode: convert's
            # one scalar, when the build has it
            rest = cells[2:]
            tile_cells = rest.pop(0) if self.build.epilogue.needs_tile else None
            tables = (rest[0], rest[1]) if self.build.epilogue.uses_tanh and len(rest) >= 2 else None
            self.convert(tile, cells[0], cells[1], tile_cells, scalars[0] if scalars else None, tables)
        else:
            raise LayoutError(f"{tile} calls {kernel}, which is none of the design's kernels {sorted(self.roles)}",
                              "call the kernels the design declares")

    def _c_off(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """DRAM offsets (in C's units) of C's elements (i, j) from a tile's first one (C^T's when
        column-major)."""
        ld = self.grids["C"].ld
        return j * ld + i if self.call.c_col_maj else i * ld + j

    def _c_l1(self, rows: int) -> np.ndarray:
        """The L1 layout of `rows` rows of C in its own type (in tiles for bfp16)."""
        g = self.grids["C"]
        return c_tile_blocks(rows, g.n) if g.unit.is_block else c_layout(rows, g.n, g.r, g.t, self.build.c_col_maj)

    def _acc_view(self, rows: int) -> TileView | PairView:
        """rows x n of the accumulator in its blocked layout (no provenance: not C's words yet)."""
        if rows not in self.acc_views:
            b = self.build
            blocks = c_tile_blocks if self.acc_super_blocks else c_layout
            layout = blocks(rows, b.n, b.mmul[0], b.mmul[2])
            view: TileView | PairView
            if b.types.t_acc == I64:  # int32 pairs: element e is words 2e, 2e + 1
                pairs = np.stack([2 * layout, 2 * layout + 1], axis=-1).reshape(rows, 2 * b.n)
                view = PairView(TileView.of(pairs, I32, np.zeros(pairs.shape, dtype=np.int64), w.TAG_NONE))
            else:
                view = TileView.of(layout, b.types.t_acc, np.zeros((rows, b.n), dtype=np.int64), w.TAG_NONE)
            self.acc_views[rows] = view
        return self.acc_views[rows]

    def _acc_pieces(self, first: int, last: int, c_cells: np.ndarray,
                    acc_cells: np.ndarray | None) -> list[np.ndarray]:
        """Accumulator rows [first, last) (whole block rows, contiguous in the blocked order) as views of the
        cells that hold them, in order: the words of the blocks below the split in the C object, the rest
        in the worker's C acc buffer (the split may fall inside a row: spec/rules/l1.c_split_blocks)."""
        b = self.build
        per_row = b.types.t_acc.nbytes(b.n) // 4
        lo, hi, h = first * per_row, last * per_row, b.types.t_acc.nbytes(b.c_split_elems) // 4
        pieces = [c_cells[lo:min(hi, h)]] if lo < h else []
        if hi > h:
            if acc_cells is None:
                raise LayoutError("a matmul or convert call without its C acc buffer",
                                  "pass the worker's C acc buffer after the kernel's scratch")
            pieces.append(acc_cells[max(lo, h) - h:hi - h])
        return pieces

    def _acc_read(self, rows: int, pieces: list[np.ndarray]) -> np.ndarray:
        return self._acc_view(rows).read(pieces[0] if len(pieces) == 1 else np.concatenate(pieces))

    def _acc_write(self, rows: int, pieces: list[np.ndarray], values: np.ndarray) -> None:
        if len(pieces) == 1:
            self._acc_view(rows).write(pieces[0], values, 0)
            return
        cells = np.concatenate(pieces)
        self._acc_view(rows).write(cells, values, 0)
        at = 0
        for piece in pieces:
            piece[:] = cells[at:at + piece.size]
            at += piece.size

    def _c_word(self, row0: int, col0: int) -> int:
        """C's source word holding element (row0, col0) (the first word of its tile for bfp16)."""
        return int(c_words(self.c, self.call, row0, col0))

    # ---- kernels -------------------------------------------------------------------------------
    def zero(self, tile: TileRef, cells: list[np.ndarray]) -> None:
        state = self.tiles.get(tile)
        if state is not None:
            self._check_complete(tile, state)
        self.tiles[tile] = TileState()
        for part in cells:  # bfp16 zero is all-zero bytes too (exponent 0, mantissas 0)
            part[:] = 0
        self.stats.zero_calls += 1

    def _unit(self, name: str, word: int) -> int:
        """Index of the unit (element, or bfp16 tile) of operand `name`'s buffer at `word`."""
        return int(units_at(self.grids[name], word))

    def _b_col(self, b_word: int, k0: int) -> int | None:
        """The first N column of a B tile whose first word is `b_word`, given that it must start
        K chunk k0 (a junk column's values wrap into B's next row, so the word alone may not say);
        None when no column of that chunk starts there."""
        col, ok = b_cols(self.c, self.call, self.grids["B"], np.asarray(b_word), k0)
        return int(col) if ok else None

    def _a_row(self, a_word: int, k0: int) -> int | None:
        """The first row of an A tile whose first word is `a_word`, given its K chunk k0."""
        row, ok = a_rows(self.c, self.grids["A"], np.asarray(a_word), k0)
        return int(row) if ok else None

    def matmul(self, tile: TileRef, a_cells: np.ndarray, b_cells: np.ndarray, c_cells: np.ndarray,
               c_slice: int = 0, acc_cells: np.ndarray | None = None, deq_cells: np.ndarray | None = None) -> None:
        b = self.build
        if not 0 <= c_slice < b.rho:
            raise LayoutError(f"{tile} matmul: C slice {c_slice} outside 0..{b.rho - 1}",
                              "pass 0 <= slice < rho")
        n_call = self.calls.get(tile, 0)
        self.calls[tile] = n_call + 1
        a_word = self.a_view.base_word(a_cells)
        if a_word is None:
            self._explain(tile, n_call, "A", a_cells, w.TAG_A, self.a_view, self.a_off)
        b_word = self.b_view.base_word(b_cells)
        if b_word is None:
            self._explain(tile, n_call, "B", b_cells, w.TAG_B, self.b_view, self.b_off)
        where = f"{tile} matmul call {n_call}"
        state = self.tiles.setdefault(tile, TileState())
        # each slice of a C tile takes its K chunks in order (the order the reference adds them in)
        k0 = state.next_k.get(c_slice, 0)
        if k0 >= self.call.k_walk:
            raise LayoutError(f"{where}: slice {c_slice} of the tile of C[{state.row0}, {state.col0}] already has all "
                              f"{self.call.k_walk // b.k} K chunks",
                              "each k-chunk must reach an output tile once")
        row0, col0 = self._a_row(a_word, k0), self._b_col(b_word, k0)
        if row0 is None or col0 is None:
            name, unit = ("A", self._unit("A", a_word)) if row0 is None else ("B", self._unit("B", b_word))
            raise LayoutError(f"{where}: {name} covers K from {name}{self._coord(name, unit)}, not K chunk {k0} of "
                              f"slice {c_slice}", "A and B fifos must deliver the K chunks of a tile in order")
        tile_row0 = row0 - c_slice * b.t_ma  # the A rows say which slice of which C tile this is
        if state.row0 < 0:
            state.row0, state.col0 = tile_row0, col0
        elif (state.row0, state.col0) != (tile_row0, col0):
            raise LayoutError(
                f"{where}: accumulates C[{row0}, {col0}] (slice {c_slice}) into the tile of "
                f"C[{state.row0}, {state.col0}] before its K reduction finished",
                "each core must see all K chunks of one output tile between zero calls",
            )
        state.next_k[c_slice] = k0 + b.k
        if isinstance(self.b_view, ObjectView):  # the kernel dequantizes on slice 0 only; the others read b_deq
            if c_slice == 0:
                state.deq_word = b_word
            elif state.deq_word != b_word:
                raise LayoutError(f"{where}: slice {c_slice} reads the B_deq scratch before slice 0 dequantized this "
                                  "B object into it", "call slice 0 first on each B object")

        a_op = self._operand("A", a_word, lambda: self.numerics.operand_a(self.a_view.read(a_cells)))
        b_op = self._operand("B", b_word, lambda: self.numerics.operand_b(self._b_values(b_cells, deq_cells)))
        if self.p.converts_c:  # the slice's rows, in the C object and/or the C acc buffer
            pieces = self._acc_pieces(c_slice * b.t_ma, (c_slice + 1) * b.t_ma, c_cells, acc_cells)
            acc = self.numerics.accumulate_operands(self._acc_read(b.t_ma, pieces), a_op, b_op)
            self._acc_write(b.t_ma, pieces, self.numerics.store(acc))
        else:
            c_part = c_cells[c_slice * self.slice_words:(c_slice + 1) * self.slice_words]  # a view
            acc = self.numerics.accumulate_operands(self.c_view.read(c_part), a_op, b_op)
            if isinstance(self.c_view, UnitView):  # bfp16 C: requantized after every call
                self.c_view.write_encoded(c_part, *self.numerics.encode_acc(acc), self._c_word(row0, col0))
            else:
                self.c_view.write(c_part, self.numerics.store(acc), self._c_word(row0, col0))
        self.stats.acc_overflows += self.numerics.acc_overflows(acc)
        self.stats.matmul_calls += 1

    def _b_values(self, b_cells: np.ndarray, deq_cells: np.ndarray | None) -> np.ndarray:
        """B's k x n values: as the L1 tile holds them, or for W4A16 the object's bytes dequantized into the
        core's scratch, as the kernel's dequantization pass writes it: bf16 in kernel order, or (to_bfp16) bfp16
        tiles of B^T in 1 x 2 super-blocks under the core's rounding, whose values the numerics' quantization
        of the returned float32 tile gives again."""
        if not isinstance(self.b_view, ObjectView):
            return self.b_view.read(b_cells)
        if deq_cells is None:
            raise LayoutError("a W4A16 matmul call without its dequantization scratch",
                              "pass the B_deq buffer as the matmul's last argument")
        tile = dequant_object(self.c, self.b_view.read(b_cells), self.deq_order)
        if to_bfp16(self.build.group_size, self.build.convert_once):
            q = bfp16.TILE
            tiles = bfp16.tiles_of(np.ascontiguousarray(tile.T), self.numerics.rounding)  # (n/8, k/8) tiles of B^T
            scratch = np.empty((tiles.shape[0] * tiles.shape[1], bfp16.TILE_BYTES), np.uint8)
            scratch[b_tile_pairs(self.build.k // q, self.build.n // q)] = tiles.transpose(1, 0, 2)
        else:
            scratch = np.ascontiguousarray(tile.reshape(-1)[self.deq_order])
        deq_cells[:] = w.pack(np.ascontiguousarray(scratch).view(np.uint8), w.TAG_NONE)
        return tile

    def convert(self, tile: TileRef, c_cells: np.ndarray, acc_cells: np.ndarray,
                b_cells: np.ndarray | None = None, mode: int | None = None,
                tables: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """C's final conversion from its accumulator (object rows, then the C acc buffer's) to its
        DRAM type, written over the whole C object with C's provenance. With an epilogue tile, its
        parameters are read from the bytes of the B object held (`b_cells`), linear from its first; a
        runtime activation's `mode` is the word the core read from its runtime-parameter buffer; a SiLU or
        GELU epilogue reads the tanh table from its two copies (`tables`) in the target's layout."""
        state = self.tiles.get(tile)
        if state is None or state.row0 < 0:
            raise LayoutError(f"{tile} converts C before any matmul call", "convert after the K loop")
        values = self._acc_read(self.build.m, self._acc_pieces(0, self.build.m, c_cells, acc_cells))
        word = self._c_word(state.row0, state.col0)
        if isinstance(self.out_view, UnitView):  # bfp16 tiles
            self.out_view.write_encoded(c_cells, *self.numerics.encode_out(values), word)
        else:
            bias, requant = self._epilogue_data(tile, state, b_cells)
            numerics = self._mode_numerics(tile, mode)
            table = self._tanh_table(tile, tables)
            self.out_view.write(c_cells, numerics.finish(values, bias, requant, table), word)
        self.stats.convert_calls += 1

    def _mode_numerics(self, tile: TileRef, mode: int | None) -> KernelNumerics:
        """The numerics of this conversion: a runtime-activation build's with the activation of `mode`
        (epilogue.MODES; a mode the kernel has no case for, or none passed, is a design error)."""
        e = self.numerics.epilogue
        if not e.runtime:
            return self.numerics
        act = next((a for a, m in MODES.items() if m == mode), None)
        if act is None:
            raise LayoutError(f"{tile} converts C with activation mode {mode}, which the kernel has no case for "
                              f"(modes {sorted(MODES.values())})", "write the call's mode word into the RTP buffer")
        return replace(self.numerics, epilogue=e.selected(act))

    def _tanh_table(self, tile: TileRef, tables: tuple[np.ndarray, np.ndarray] | None
                    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The (slopes, offsets) the kernel's lookup reads from the tanh table's two copies: each must hold what
        the array's configuration wrote (its initial value), in this target's layout (epilogue.read_lut_table:
        npu1's 128-bit groups, npu2's 256-bit ones); None without a table."""
        if not self.build.epilogue.uses_tanh:
            return None
        if tables is None:
            raise LayoutError(f"{tile} converts C with a tanh activation but without the tanh table",
                              "pass the table's two copies to convert")
        if any(np.any(w.tags(t) != w.TAG_NONE) or np.any((t & w.INITIAL_VALUE) == 0) for t in tables):
            raise LayoutError(f"{tile} reads its tanh table from buffers the array's configuration did not write",
                              "give the table's Buffers their initial value")
        ab, cd = (w.values(t, F32) for t in tables)
        try:
            return read_lut_table(ab, cd, self.c.dev.lut_copy_bits)
        except ValueError as err:
            raise LayoutError(f"{tile}: its tanh table is not in {self.c.dev.name}'s lookup layout: {err}",
                              "write epilogue.tanh_table(Device.lut_copy_bits)") from None

    def _epilogue_data(self, tile: TileRef, state: TileState, b_cells: np.ndarray | None
                       ) -> tuple[np.ndarray | None, Requant | None]:
        """The bias and requantization the kernel reads from its epilogue tile: the B object must be the
        tile of this output tile's columns (its words from B's rows past k_walk at the tile's first column,
        in B's L1 layout), and its bytes, read linearly, an epilogue tile (epilogue_args.read_tile)."""
        e = self.build.epilogue
        if not e.needs_tile:
            return None, None
        if b_cells is None:
            raise LayoutError(f"{tile} converts C without its epilogue tile", "pass the B object to convert")
        walk = self.call.k_walk
        b_word = self.b_view.base_word(b_cells)
        if b_word is None or self._b_col(b_word, walk) != state.col0:
            got = "B data in the wrong layout" if b_word is None else f"B{self._coord('B', self._unit('B', b_word))}"
            raise LayoutError(f"{tile} converts the tile of C[{state.row0}, {state.col0}] with {got}, not the "
                              f"epilogue tile at B[{walk}, {state.col0}]",
                              "B's walk must bring each output tile's epilogue tile after its K loop")
        data = (b_cells & w.VALUE_MASK).astype(np.uint32).view(np.uint8)
        try:
            return read_tile(e, self.build.n, data, self.build.types.t_out.is_float, self.build.types.t_out)
        except ValueError as err:
            raise LayoutError(f"{tile}: the epilogue tile of C[{state.row0}, {state.col0}] does not hold "
                              f"parameters: {err}", "write it through the inverse of B's walk into L1") from None

    def _operand(self, name: str, word: int, make: Callable[[], np.ndarray]) -> np.ndarray:
        key = (name, word)
        op = self.operands.get(key)
        if op is None:
            op = self.operands[key] = make()
            if len(self.operands) > OPERAND_CACHE:
                self.operands.popitem(last=False)
        else:
            self.operands.move_to_end(key)
        return op

    def finish(self) -> None:
        """Check the last tile of every core (called when the run ends)."""
        for tile, state in self.tiles.items():
            self._check_complete(tile, state)
        self.stats.calls_per_core = {str(t): n for t, n in sorted(self.calls.items())}

    # ---- checks --------------------------------------------------------------------------------
    def _explain(self, tile: TileRef, n_call: int, name: str, cells: np.ndarray, tag: int,
                 view: View, offsets: np.ndarray) -> NoReturn:
        """Raise a LayoutError saying which element of a tile is not where the kernel expects it."""
        tags = w.tags(cells)
        if not (tags == tag).all():
            bad = int(np.flatnonzero(tags != tag)[0])
            raise LayoutError(
                f"{tile} matmul call {n_call}: L1 word {bad} of the {name} tile holds "
                f"{w.TAG_NAMES[int(tags[bad])]} data",
                f"check the {name} fifo's patterns and depths",
            )
        t = self.grids[name].unit
        if isinstance(view, PackedView | ObjectView):  # a packed tile's provenance is per word (one unit)
            view, t = view.words, WORD
        if isinstance(view, UnitView):
            ids = view.source_units(cells)
        else:
            elems = w.element_ids(cells, t)
            ids = np.empty(view.gather.shape, dtype=np.int64)
            per, lanes = t.per_word, 8 // t.bytes
            ids[...] = elems[(view.gather // lanes) * per + view.gather % lanes]
        expect = offsets + ids.flat[0]
        i, j = (int(x) for x in np.argwhere(ids != expect)[0])
        raise LayoutError(
            f"{tile} matmul call {n_call}: {name} tile element ({i}, {j}) holds "
            f"{name}{self._coord(name, int(ids[i, j]))}, expected {name}{self._coord(name, int(expect[i, j]))} "
            f"(data arrived in the wrong layout)",
            f"check the {name} access patterns (dims_to_stream / dims_from_stream / shim taps)",
        )

    def _coord(self, name: str, unit: int) -> str:
        """[row, col] of the element (of a bfp16 tile's first element) a source unit index names."""
        g = self.grids[name]
        q = g.unit.tile_rows
        if name == "A":
            return str([x * q for x in divmod(unit, g.ld)[::-1 if self.build.a_col_maj else 1]])
        kk, nn = b_unit_coords_in(self.grids["B"], unit)
        return str([kk * q, nn * g.unit.tile_cols])

    def _check_complete(self, tile: TileRef, state: TileState) -> None:
        if state.row0 < 0:
            return
        walk, k = self.call.k_walk, self.build.k
        short = [(s, state.next_k.get(s, 0)) for s in range(self.build.rho) if state.next_k.get(s, 0) != walk]
        if not short:
            self.stats.tiles_done += 1
            return
        done = sum(state.next_k.values()) // k
        raise LayoutError(
            f"{tile}: output tile C[{state.row0}, {state.col0}] was released after "
            f"{done} of {self.build.rho * walk // k} (slice, k-chunk) updates (first missing: slice, K = "
            f"{list(short[:1])})",
            "the worker loop and the A/B streams must cover all of K for every C slice",
        )
