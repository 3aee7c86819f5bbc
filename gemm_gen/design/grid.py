"""One operand's sizes in its DMA units: the numbers its access patterns are written in.

An int4 B moves in 32-bit words of 8 values along N (its sizes along N count words, _packed_grid).
Scalar operands move element by element, and their L1 tiles are blocked r x s / s x t / r x t as
the mmul reads them. A bfp16 operand moves in 8 x 8 tiles (gemm_gen/dtypes.py): every size is in
tiles, and since one tile already is the kernel's mmul block, its L1 layout is plain row-major in
tiles; the "block" of the patterns is then a whole row of the tile (r = 1, s = k, t = n), except
for A, whose L1 slice is 2 x 1 super-blocks of tiles (l1_layout.a_tile_pairs, mlir-aie's order, one
kernel stream): the A patterns' block is then 2 x 1 tiles (r = 2, s = 1); and for C, whose L1 object is
2 x 2 super-blocks of tiles (l1_layout.c_tile_blocks, one kernel stream each way): r = t = 2.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .. import groupquant
from ..call import CallPlan
from ..dtypes import WORD_BYTES, DType
from ..hw.devices import Device
from ..rules import memtile

if TYPE_CHECKING:
    from ..config import GemmConfig  # annotations only: the config does not import the design


@dataclass(frozen=True)
class Grid:
    unit: DType  # the operand's type; sizes count its DMA units
    m: int
    k: int
    n: int
    k_mt: int
    t_ma: int
    rho: int
    r: int  # the L1 block of the patterns (units)
    s: int
    t: int
    Mp: int  # the call's blocks cover Mp x Np
    kw: int  # K as the array walks it (whole k_mt chunks)
    Np: int
    ld: int  # units between rows of this operand's DRAM buffer (B^T's when column-major)
    rows: int
    cols: int
    b_col_maj: bool
    dev: Device
    b_pack: str = "tiles"  # GemmConfig.b_pack
    a_col_maj: bool = False  # A's DRAM buffer is A^T (ld: units between rows of A^T)
    c_col_maj: bool = False  # C's DRAM buffer is C^T (this call's layout)
    c_built_col_maj: bool = False  # the build's C layout: its memtile sends C's columns (rules/call_layouts.py)
    k_extra: int = 0  # B only: units of K past kw that B's walk also reads (the epilogue tile, one k-step)
    obj: int = 0  # W4A16 B only: words of one B object (q, scale rows, zero rows: b_objects), else 0

    def at(self, call: CallPlan, operand: str) -> Grid:
        """This grid for another call of the same design: the call's extents, leading dimension and C layout, in
        this operand's units (a tile's rows along M and K, its columns along N and the leading dimension)."""
        qr, qc = self.unit.tile_rows, self.unit.tile_cols
        return replace(self, Mp=call.Mp // qr, kw=call.k_walk // qr, Np=call.Np // qc, ld=call.ld(operand) // qc,
                       c_col_maj=call.c_col_maj, k_extra=call.b_extra_k // qr if operand == "B" else 0)

    @property
    def b_l2_units(self) -> int:
        """Units of one B object in the memtile (a W4A16 object: its words)."""
        return self.obj or self.b_l2_k * self.n

    @property
    def b_l1_units(self) -> int:
        """Units of one B object in L1."""
        return self.obj or self.k * self.n

    @property
    def kb(self) -> int:
        """K extent of B's shim walk: kw, and the epilogue tile's k-step when there is one."""
        return self.kw + self.k_extra

    @property
    def a_rows(self) -> int:
        """Core rows served by one A shim and memtile (mlir-aie's n_A_tiles_per_shim)."""
        return memtile.a_rows_per_shim(self.rows, self.cols)

    @property
    def b_l2_k(self) -> int:
        """K extent of a B object in the memtile: k_mt for column-major tiles, else k."""
        return self.k_mt if memtile.b_chunked(self.b_col_maj, self.b_pack) else self.k


OPERANDS = ("A", "B", "C")


def grid(c: GemmConfig, operand: str, call: CallPlan | None = None) -> Grid:
    """The sizes of operand A, B or C of `c` in that operand's DMA units, for one call (default:
    the problem `c` was made for)."""
    call = call or c.call
    unit = {"A": c.types.t_in, "B": c.types.t_b, "C": c.types.t_out}[operand]
    if unit.is_packed:
        return _packed_grid(c, operand, call, unit)
    q = unit.tile_rows
    assert unit.tile_cols == q, "tile units are square"
    if q == 1:
        r, s, t = c.kernel.mmul[0], c.kernel.mmul[1], c.kernel.mmul[2]
    else:
        k_u, n_u = c.tiling.k // q, c.tiling.n // q
        r = 2 if operand in ("A", "C") else 1  # A: 2 x 1 super-blocks of tiles; C: 2 x 2
        s = 1 if operand == "A" or (operand == "B" and not c.layout.b_col_maj) else k_u
        t = 2 if operand == "C" else 1 if operand == "B" and c.layout.b_col_maj else n_u
    ti, lay = c.tiling, c.layout
    return Grid(unit, ti.m // q, ti.k // q, ti.n // q, ti.k_mt // q, c.t_ma // q, ti.rho, r, s, t, 0, 0, 0, 0,
                c.array.rows, c.array.cols, lay.b_col_maj, c.dev, lay.b_pack, lay.a_col_maj, False,
                lay.c_col_maj).at(call, operand)


def _packed_grid(c: GemmConfig, operand: str, call: CallPlan, unit: DType) -> Grid:
    """An int4 B (row-major, packed along N: checks.check_int4_layout) in its DMA units, 32-bit words of
    tile_cols values along N: K extents stay in values, N extents (n, t, Np, the leading dimension)
    count words, so every walk is the row-major scalar one over a K x N/8 matrix of words. A W4A16 B
    (group scales) is objects of `obj` words instead, walked linearly (patterns); its t may cut a word
    (npu1's bf16 4 x 8 x 4: nothing re-tiles nibbles, so t // q is never used)."""
    assert operand == "B" and not c.layout.b_col_maj, "int4 is B's type only, row-major"
    q = unit.tile_cols
    ti, lay, (r, s, t) = c.tiling, c.layout, c.kernel.mmul
    obj = groupquant.object_bytes(ti.k, ti.n, c.groups.group_size,
                                  c.groups.zero_points) // WORD_BYTES if c.groups.group_size else 0
    return Grid(unit, ti.m, ti.k, ti.n // q, ti.k_mt, c.t_ma, ti.rho, r, s, t // q, 0, 0, 0, 0, c.array.rows,
                c.array.cols, lay.b_col_maj, c.dev, lay.b_pack, lay.a_col_maj, False, lay.c_col_maj, 0,
                int(obj)).at(call, operand)
