"""The access pattern of every DMA hop (Striking the Balance sec. 4.3 and 4.4), in elements.

A (row-major):    shim m x K strip as k_mt chunks (one per core row its memtile serves)
                  -> memtile (m x k_mt per row; split per row when it serves several)
                  -> MM2S [k_mt/k, k/s, m, s] (m x s column panels per k-step)
                  -> core S2MM [k/s, m/r, r*s] into r x s blocks.
A bfp16:          the kernel reads 2 x 1 super-blocks of 8 x 8 tiles (l1_layout.a_tile_pairs, mlir-aie's
                  order): memtile (T_MA x k tiles per (k-step, slice), row-major) -> MM2S [k_mt/k rho, k/8,
                  T_MA/8] tiles (K tile major) -> core S2MM [k/8, T_MA/16, 2] tiles into the pairs (as
                  column-major B: the memtile alone would need 5 word dims for k_mt > k).
A column-major:   A^T (K x M) stored: shim K x m strip of A^T (one A shim per core row; one serving
                  several rows sends, per k_mt chunk, each row's k_mt x m block in turn: 4 dims, the
                  chunks on the shim BD's iteration dimension)
                  -> memtile S2MM [k_mt/k, k, rho, T_MA] into (k-step, slice) tiles of A^T, k x T_MA each
                  -> MM2S [tiles, T_MA/r, k, r] (s x r blocks of A^T, blocks along K)
                  -> core S2MM linear: the kernel transposes each block on load (sub-word
                  reordering is the kernel's, as for column-major B).
B column-major:   the same walk on B^T (n x K strips, n x k_mt in the memtile, t x s blocks).
B row-major:      shim K x n strip -> memtile (k x n, linear) -> MM2S [k/s, n/t, s, t] -> L1.
B's epilogue tile (docs/epilogues.md): one more k-step of B per column tile, past K's walk; it takes every
                  walk above unchanged (the host writes its bytes through that walk's inverse so that they
                  land linear in the core's B buffer: host_buffers.write_epilogue_tiles).
B bfp16:          the kernel reads 1 x 2 super-blocks of 8 x 8 tiles (l1_layout.b_tile_pairs, mlir-aie's
                  order). Strips (mlir-aie's packing): shim reads a column's K x n strip as one run ->
                  memtile (one k x n L1 tile, already in that order) -> forwarded linearly, as mlir-aie's.
                  Row-major tiles: memtile (k x n) -> MM2S [n/16, k/8, 2] tiles -> L1 linear.
                  Column-major tiles: memtile (n x k_mt) -> MM2S [k_mt/k, k/8, n/8] tiles (K tile major)
                  -> core S2MM [k/8, n/16, 2] tiles into the pairs (the memtile alone would need 5 dims).
B int4:           in words of 8 values along N (Grid counts them): the row-major walks above. Strips
                  (host_buffers): each column's K x n strip row-major and contiguous, so the shim reads it
                  as one run, as bfp16's, and the memtile re-tiles each k x n object as row-major B's.
B W4A16:          objects of q (the bf16 kernel's B order), scale rows and zero rows, `obj` words each
                  (design/b_objects.py): the shim reads a column's objects, contiguous in k-step order, as one run;
                  the memtile forwards each object linearly, the core receives it linearly.
C:                L1 r x t blocks -> memtile join (rows slices of m x n)
                  -> MM2S per slice [m/r, r, n/t, t] -> shim writes (rows*m) x n into C.
C bfp16:          the kernel keeps 2 x 2 super-blocks of 8 x 8 tiles (l1_layout.c_tile_blocks, mlir-aie's
                  order, one stream each way): the core sends its object linearly, the memtile MM2S undoes
                  the order per slice, [m/16, 2, n/16, 2] tiles (the scalar walk with 2 x 2 blocks of tiles;
                  a tile's 18 words join the innermost dimension: 4 word dims). mlir-aie instead forwards
                  the tiles as they are and unshuffles C on the host.
Each pattern is written over one operand's Grid (spec/rules/walks.py, which writes every walk once, for one
design or for every candidate the tuner weighs): in elements for scalar types, in 8 x 8 tiles for bfp16 (whose
blocked layouts then reduce to row-major walks of tiles). This module makes the Design's taps of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..facts.devices import TileKind
from ..spec.call import CallPlan
from ..spec.rules import decode_split, walks
from ..spec.rules.dma import Walk, raise_first
from .grid import Grid, grid
from .tap import Tap

if TYPE_CHECKING:
    from ..spec.config import GemmConfig  # annotations only: the config does not import the design


def _tap(walk: Walk) -> Tap:
    return Tap.of(walk)


# ---- memtile and core patterns (per object) --------------------------------------------------
def dims(tap: Tap | None) -> Tap | None:
    """A fifo's dims: None for a walk that is plain linear (bfp16 tiles already arrive in kernel
    order, and a linear BD programs no wraps)."""
    return None if tap is None or tap.is_linear() else tap


def a_l2_from_stream(c: Grid) -> Tap:
    """Memtile S2MM of A: the m x k_mt chunk (row-major on the stream) stored as (k-step, slice)
    tiles of T_MA x k, each contiguous, so that the MM2S walk fits in 4 dimensions for any rho."""
    return _tap(walks.a_l2_from_stream(c))


def a_l2_to_stream(c: Grid) -> Tap:
    """Memtile MM2S of A: per (k-step, slice) tile, T_MA x s column panels (bfp16: the tiles down
    each K tile column, which the core S2MM pairs into 2 x 1 super-blocks)."""
    return _tap(walks.a_l2_to_stream(c))


def a_l1_from_stream(c: Grid) -> Tap:
    """Core S2MM of A: the column panels into r x s blocks (bfp16: K tile major tiles into 2 x 1
    super-blocks, (mb, kb) -> (mb // 2) 2 k + 2 kb + mb % 2, a pair 2 tiles in a row: 3 word dims;
    column-major A: the memtile already emits the s x r blocks of A^T in kernel order)."""
    return _tap(walks.a_l1_from_stream(c))


def b_l2_to_stream(c: Grid) -> Tap:
    return _tap(walks.b_l2_to_stream(c))


def b_l1_from_stream(c: Grid) -> Tap | None:
    walk = walks.b_l1_from_stream(c)
    return None if walk is None else _tap(walk)


def c_l2_to_stream(c: Grid) -> Tap:
    """Per join slice (one core's m x n tile): r x t blocks back to row-major rows (bfp16: 2 x 2
    super-blocks of tiles back to row-major tiles; column-major C: to columns, each m long, the r-row
    blocks' t-stride words gathered in the memtile: whole words for 32-bit C only; below 32 bits
    the kernel stores each block transposed, so a block's column is one run of r elements)."""
    return _tap(walks.c_l2_to_stream(c))


# ---- shim (runtime) patterns over the host tensors -------------------------------------------
def shim_a(c: Grid, block_row: int, shim: int) -> Tap:
    """The (a_rows*m) x K strip of A that A shim `shim` carries for the output block whose first
    row is `block_row` (one m-row strip per core row it serves), in k_mt chunks; a strip of more
    rows than the d1 wrap holds is walked [rows/R, R, width] (walks.row_block)."""
    return _tap(walks.shim_a(c, block_row, shim))


def shim_b(c: Grid, block_col: int, col: int) -> Tap:
    """The K x n strip of B for core column `col` of the output block whose first column is
    `block_col` (with an epilogue, K runs on by its tile's k-step: Grid.kb)."""
    return _tap(walks.shim_b(c, block_col, col))


def shim_c(c: Grid, block_row: int, block_col: int, col: int) -> Tap:
    """The (rows*m) x n block of C that column `col` joins for the output block at (block_row,
    block_col), in this call's layout. The memtile sends it in the build's: each core row's m x n
    tile row by row, or column by column in a column-major build. When the two differ (a 32-bit C
    only: spec/rules/call_layouts.py) the shim stores it element by element, one word per run."""
    return _tap(walks.shim_c(c, block_row, block_col, col))


# ---- the split decode placement (spec/rules/decode_split.py) ---------------------------------------
def shim_b_stream(c: Grid, block_col: int, first: int, count: int) -> Tap:
    """A split B stream's walk for the output block whose first column is `block_col`: the K x n strips of
    virtual columns [first, first + count), per k-step every core's tile in turn (walks.shim_b_stream)."""
    return _tap(walks.shim_b_stream(c, block_col, first, count))


def shim_c_join(c: Grid, block_row: int, block_col: int, first: int, count: int) -> Tap:
    """The C a physical column joins along N in the split placement (walks.shim_c_join)."""
    return _tap(walks.shim_c_join(c, block_row, block_col, first, count))


def split_b_task(c: Grid, block_col: int, stream: int) -> Tap:
    """Split B stream `stream`'s walk for the output block at `block_col`, as one shim BD (spec/rules/bd_form), or
    DmaLimitError naming the limit."""
    s = decode_split.streams(c.dev)[stream]
    return _tap(walks.one_bd(walks.shim_b_stream(c, block_col, s.first, s.count), c.unit,
                             c.dev.dma[TileKind.SHIM], walks.split_b_where(stream)))


def split_c_task(c: Grid, block_row: int, block_col: int, col: int) -> Tap:
    """Physical column `col`'s joined C walk for the output block at (block_row, block_col), as one shim BD."""
    rows = c.dev.core_rows
    return _tap(walks.one_bd(walks.shim_c_join(c, block_row, block_col, col * rows, rows), c.unit,
                             c.dev.dma[TileKind.SHIM], walks.split_c_where(col)))


# ---- limits ----------------------------------------------------------------------------------
def check_dma_limits(config: GemmConfig, call: CallPlan | None = None) -> None:
    """Raise the first limit a walk of one call (default: the problem the config was made for) breaks
    (spec/rules/walks.limits: every distinct walk against the DMA that runs it, the static BD verifier, the
    host buffers' addresses)."""
    call = call or config.call
    a, b, c = (grid(config, op, call) for op in ("A", "B", "C"))
    for lim, fix in walks.limits(a, b, c, call):
        raise_first([lim], fix)
