"""Kernel emulator: what the zero and matmul kernels do to the L1 tiles they are handed.

It reads the tiles in the blocked layout the kernel expects (l1_layout), so data that arrived in
any other layout is either caught by its provenance (not a contiguous block of A or B, A and B
from different K ranges, a tile switching rows mid-reduction, K chunks missing or repeated) or
computes the wrong values. The arithmetic is KernelNumerics.call, the same as the reference.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn

import numpy as np

from ..config import GemmConfig
from ..design.model import TileRef
from ..dtypes import DType
from ..errors import LayoutError
from ..l1_layout import a_layout, b_layout, c_layout
from . import words as w

OPERAND_CACHE = 256  # prepared tiles kept: more than the A and B tiles in flight across the array


@dataclass
class TileState:
    """The output tile a core is accumulating, as its inputs' provenance says."""

    row0: int = -1
    col0: int = -1
    chunks: set[tuple[int, int]] = field(default_factory=set)  # (C slice, K start) seen


@dataclass
class KernelStats:
    matmul_calls: int = 0
    zero_calls: int = 0
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


class KernelEmulator:
    def __init__(self, c: GemmConfig) -> None:
        self.c = c
        self.numerics = c.numerics
        self.t_in, self.t_out = c.t_in, c.t_out
        i, j = np.indices((c.t_ma, c.k))
        self.a_off = i * c.Kp + j  # A is stored Mp x Kp; a tile has T_MA = m / rho rows
        kk, jj = np.indices((c.k, c.n))
        self.b_off = jj * c.Kp + kk if c.b_col_maj else kk * c.Np + jj
        ci, cj = np.indices((c.t_ma, c.n))
        self.a_view = TileView.of(a_layout(c.t_ma, c.k, c.r, c.s), c.t_in, self.a_off, w.TAG_A)
        self.b_view = TileView.of(b_layout(c.k, c.n, c.s, c.t, c.b_col_maj), c.t_in, self.b_off, w.TAG_B)
        # a call updates one C slice of T_MA rows: contiguous in the blocked layout
        self.c_view = TileView.of(c_layout(c.t_ma, c.n, c.r, c.t), c.t_out, ci * c.Np + cj, w.TAG_C)
        self.slice_words = c.t_out.nbytes(c.t_ma * c.n) // 4
        self.tiles: dict[TileRef, TileState] = {}
        self.calls: dict[TileRef, int] = {}
        self.stats = KernelStats()
        # A tile reaches every core of its row and a B tile every core of its column: prepare each
        # operand once. Sound because a tile passed its provenance check, so its source words say
        # exactly which block of the (read-only) input it holds.
        self.operands: OrderedDict[tuple[str, int], np.ndarray] = OrderedDict()

    def __call__(self, tile: TileRef, kernel: str, cells: list[np.ndarray], scalars: tuple[int, ...] = ()) -> None:
        if kernel.startswith("zero"):
            self.zero(tile, cells[0])
        else:
            a_cells, b_cells, c_cells = cells
            self.matmul(tile, a_cells, b_cells, c_cells, c_slice=scalars[0] if scalars else 0)

    # ---- kernels -------------------------------------------------------------------------------
    def zero(self, tile: TileRef, c_cells: np.ndarray) -> None:
        state = self.tiles.get(tile)
        if state is not None:
            self._check_complete(tile, state)
        self.tiles[tile] = TileState()
        c_cells[:] = 0
        self.stats.zero_calls += 1

    def matmul(self, tile: TileRef, a_cells: np.ndarray, b_cells: np.ndarray, c_cells: np.ndarray,
               c_slice: int = 0) -> None:
        c = self.c
        if not 0 <= c_slice < c.rho:
            raise LayoutError(f"{tile} matmul: C slice {c_slice} outside 0..{c.rho - 1}", "pass 0 <= slice < rho")
        n_call = self.calls.get(tile, 0)
        self.calls[tile] = n_call + 1
        a_word = self.a_view.base_word(a_cells)
        if a_word is None:
            self._explain(tile, n_call, "A", a_cells, w.TAG_A, self.a_view, self.a_off)
        b_word = self.b_view.base_word(b_cells)
        if b_word is None:
            self._explain(tile, n_call, "B", b_cells, w.TAG_B, self.b_view, self.b_off)
        per = self.t_in.per_word
        row0, a_k0 = divmod(a_word * per, c.Kp)
        if c.b_col_maj:
            col0, b_k0 = divmod(b_word * per, c.Kp)
        else:
            b_k0, col0 = divmod(b_word * per, c.Np)
        where = f"{tile} matmul call {n_call}"
        if a_k0 != b_k0:
            raise LayoutError(f"{where}: A covers K from {a_k0} but B from {b_k0}",
                              "A and B fifos must deliver the same k-chunk to each call")
        if a_k0 % c.k:
            raise LayoutError(f"{where}: the k-chunk starts at K={a_k0}, not a multiple of k={c.k}",
                              "align the K walk of the A/B patterns to k")
        state = self.tiles.setdefault(tile, TileState())
        tile_row0 = row0 - c_slice * c.t_ma  # the A rows say which slice of which C tile this is
        if state.row0 < 0:
            state.row0, state.col0 = tile_row0, col0
        elif (state.row0, state.col0) != (tile_row0, col0):
            raise LayoutError(
                f"{where}: accumulates C[{row0}, {col0}] (slice {c_slice}) into the tile of "
                f"C[{state.row0}, {state.col0}] before its K reduction finished",
                "each core must see all K chunks of one output tile between zero calls",
            )
        if (c_slice, a_k0) in state.chunks:
            raise LayoutError(f"{where}: k-chunk at K={a_k0} reaches C[{row0}, {col0}] twice",
                              "each k-chunk must reach an output tile once")
        state.chunks.add((c_slice, a_k0))

        a_op = self._operand("A", a_word, lambda: self.numerics.operand_a(self.a_view.read(a_cells)))
        b_op = self._operand("B", b_word, lambda: self.numerics.operand_b(self.b_view.read(b_cells)))
        c_part = c_cells[c_slice * self.slice_words:(c_slice + 1) * self.slice_words]  # a view
        acc = self.numerics.accumulate_operands(self.c_view.read(c_part), a_op, b_op)
        self.stats.acc_overflows += self.numerics.acc_overflows(acc)
        self.c_view.write(c_part, self.numerics.store(acc), (row0 * c.Np + col0) // self.t_out.per_word)
        self.stats.matmul_calls += 1

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
                 view: TileView, offsets: np.ndarray) -> NoReturn:
        """Raise a LayoutError saying which element of a tile is not where the kernel expects it."""
        tags = w.tags(cells)
        if not (tags == tag).all():
            bad = int(np.flatnonzero(tags != tag)[0])
            raise LayoutError(
                f"{tile} matmul call {n_call}: L1 word {bad} of the {name} tile holds "
                f"{w.TAG_NAMES[int(tags[bad])]} data",
                f"check the {name} fifo's patterns and depths",
            )
        elems = w.element_ids(cells, self.t_in)
        ids = np.empty(view.gather.shape, dtype=np.int64)
        per, lanes = self.t_in.per_word, 8 // self.t_in.bytes
        ids[...] = elems[(view.gather // lanes) * per + view.gather % lanes]
        expect = offsets + ids.flat[0]
        i, j = (int(x) for x in np.argwhere(ids != expect)[0])
        raise LayoutError(
            f"{tile} matmul call {n_call}: {name} tile element ({i}, {j}) holds "
            f"{name}{self._coord(name, int(ids[i, j]))}, expected {name}{self._coord(name, int(expect[i, j]))} "
            f"(data arrived in the wrong layout)",
            f"check the {name} access patterns (dims_to_stream / dims_from_stream / shim taps)",
        )

    def _coord(self, name: str, elem: int) -> str:
        c = self.c
        if name == "A":
            return str(list(divmod(elem, c.Kp)))
        if c.b_col_maj:
            col, row = divmod(elem, c.Kp)
            return str([row, col])
        return str(list(divmod(elem, c.Np)))

    def _check_complete(self, tile: TileRef, state: TileState) -> None:
        if state.row0 < 0:
            return
        expect = {(s, k0) for s in range(self.c.rho) for k0 in range(0, self.c.Kp, self.c.k)}
        if state.chunks == expect:
            self.stats.tiles_done += 1
            return
        missing = sorted(expect - state.chunks)
        raise LayoutError(
            f"{tile}: output tile C[{state.row0}, {state.col0}] was released after "
            f"{len(state.chunks)} of {len(expect)} (slice, k-chunk) updates (first missing: slice, K = "
            f"{missing[:1]})",
            "the worker loop and the A/B streams must cover all of K for every C slice",
        )
