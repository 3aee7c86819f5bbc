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
                  land linear in the core's B buffer: hostdata.write_epilogue_tiles).
B bfp16:          the kernel reads 1 x 2 super-blocks of 8 x 8 tiles (l1_layout.b_tile_pairs, mlir-aie's
                  order). Strips (mlir-aie's packing): shim reads a column's K x n strip as one run ->
                  memtile (one k x n L1 tile, already in that order) -> forwarded linearly, as mlir-aie's.
                  Row-major tiles: memtile (k x n) -> MM2S [n/16, k/8, 2] tiles -> L1 linear.
                  Column-major tiles: memtile (n x k_mt) -> MM2S [k_mt/k, k/8, n/8] tiles (K tile major)
                  -> core S2MM [k/8, n/16, 2] tiles into the pairs (the memtile alone would need 5 dims).
B int4:           in words of 8 values along N (Grid counts them): the row-major walks above. Strips
                  (hostdata): each column's K x n strip row-major and contiguous, so the shim reads it
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
Each pattern is written over one operand's Grid (design/grid.py): in elements for scalar types,
in 8 x 8 tiles for bfp16 (whose blocked layouts then reduce to row-major walks of tiles).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..call import CallPlan
from ..errors import ConfigError, opt
from ..hw.devices import DmaSpec, TileKind
from ..rules import decode_split, memtile
from ..tap import Tap
from .grid import Grid, grid
from .spans import shim_walk

if TYPE_CHECKING:
    from ..config import GemmConfig  # annotations only: the config does not import the design


# ---- memtile and core patterns (per object) --------------------------------------------------
def dims(tap: Tap | None) -> Tap | None:
    """A fifo's dims: None for a walk that is plain linear (bfp16 tiles already arrive in kernel
    order, and a linear BD programs no wraps)."""
    return None if tap is None or tap.is_linear() else tap


def a_l2_from_stream(c: Grid) -> Tap:
    """Memtile S2MM of A: the m x k_mt chunk (row-major on the stream) stored as (k-step, slice)
    tiles of T_MA x k, each contiguous, so that the MM2S walk fits in 4 dimensions for any rho."""
    t = c.t_ma
    if c.a_col_maj:  # the k_mt x m chunk of A^T (row-major on the stream): k x T_MA tiles of A^T
        return Tap(0, (c.k_mt // c.k, c.k, c.rho, t), (c.m * c.k, t, t * c.k, 1))
    return Tap(0, (c.rho, t, c.k_mt // c.k, c.k), (t * c.k, c.k, c.m * c.k, 1))


def a_l2_to_stream(c: Grid) -> Tap:
    """Memtile MM2S of A: per (k-step, slice) tile, T_MA x s column panels (bfp16: the tiles down
    each K tile column, which the core S2MM pairs into 2 x 1 super-blocks)."""
    t = c.t_ma
    if c.unit.is_block:  # in tiles: K tile major (the innermost stride is then not 1: 4 word dims)
        return Tap(0, (c.k_mt // c.k * c.rho, c.k, t), (t * c.k, 1, c.k))
    if c.a_col_maj:  # per A^T tile: r-column panels, each down K: s x r blocks of A^T in kernel order
        return Tap(0, (c.k_mt // c.k * c.rho, t // c.r, c.k, c.r), (t * c.k, c.r, t, 1))
    return Tap(0, (c.k_mt // c.k * c.rho, c.k // c.s, t, c.s), (t * c.k, c.s, c.k, 1))


def a_l1_from_stream(c: Grid) -> Tap:
    """Core S2MM of A: the column panels into r x s blocks (bfp16: K tile major tiles into 2 x 1
    super-blocks, (mb, kb) -> (mb // 2) 2 k + 2 kb + mb % 2, a pair 2 tiles in a row: 3 word dims;
    column-major A: the memtile already emits the s x r blocks of A^T in kernel order)."""
    if c.a_col_maj:
        return Tap.linear(c.t_ma * c.k)
    return Tap(0, (c.k // c.s, c.t_ma // c.r, c.r * c.s), (c.r * c.s, c.r * c.k, 1))


def b_l2_to_stream(c: Grid) -> Tap:
    if c.obj:  # a W4A16 object, already in kernel order (design/b_objects.py): forwarded as it is
        return Tap.linear(c.obj)
    if c.b_pack == "strips" and c.unit.is_block:  # one k x n L1 tile, already the kernel's 1 x 2 super-blocks
        return Tap.linear(c.k * c.n)
    if c.unit.is_block:  # 8 x 8 tiles: k, n, k_mt count tiles
        if c.b_col_maj:  # B^T object n x k_mt: per k-step K tile major; the core S2MM pairs the columns
            return Tap(0, (c.k_mt // c.k, c.k, c.n), (c.k, 1, c.k_mt))
        return Tap(0, (c.n // 2, c.k, 2), (2, c.n, 1))  # k x n object: column pairs, then K, then the pair
    if c.b_col_maj:  # B^T object n x k_mt
        return Tap(0, (c.k_mt // c.k, c.k // c.s, c.n, c.s), (c.k, c.s, c.k_mt, 1))
    return Tap(0, (c.k // c.s, c.n // c.t, c.s, c.t), (c.s * c.n, c.t, c.n, 1))


def b_l1_from_stream(c: Grid) -> Tap | None:
    if c.obj:
        return None
    if c.unit.is_block and memtile.b_chunked(c.b_col_maj, c.b_pack):
        # bfp16 B^T tiles arrive K tile major: (kb, nb) -> (nb // 2) 2 k + 2 kb + nb % 2 (a pair is 2 tiles in a row)
        return Tap(0, (c.k, c.n // 2, 2), (2, 2 * c.k, 1))
    if memtile.b_chunked(c.b_col_maj, c.b_pack):  # column-major tiles: the memtile sends B^T's k x n
        return Tap(0, (c.k // c.s, c.n // c.t, c.t * c.s), (c.t * c.s, c.t * c.k, 1))
    return None  # the memtile already emits s x t blocks in kernel order


def c_l2_to_stream(c: Grid) -> Tap:
    """Per join slice (one core's m x n tile): r x t blocks back to row-major rows (bfp16: 2 x 2
    super-blocks of tiles back to row-major tiles; column-major C: to columns, each m long, the r-row
    blocks' t-stride words gathered in the memtile: whole words for 32-bit C only; below 32 bits
    the kernel stores each block transposed, so a block's column is one run of r elements)."""
    if memtile.c_blocks_transposed(c.c_built_col_maj, c.unit):
        return Tap(0, (c.n // c.t, c.t, c.m // c.r, c.r), (c.r * c.t, c.r, c.r * c.n, 1))
    if c.c_built_col_maj:
        return Tap(0, (c.n // c.t, c.t, c.m // c.r, c.r), (c.r * c.t, 1, c.r * c.n, c.t))
    return Tap(0, (c.m // c.r, c.r, c.n // c.t, c.t), (c.r * c.n, c.t, c.r * c.t, 1))


# ---- shim (runtime) patterns over the host tensors -------------------------------------------
def _row_block(rows: int, row_stride_words: int, spec: DmaSpec) -> int:
    """Rows per inner block of a strip walk so that both the wrap and the outer stride fit.

    A strip of `rows` rows is walked as [rows/R, R, width]; R must divide rows, fit the d1 wrap,
    and R rows must fit the stride field. R = 1 always works while one row fits.
    """
    if rows <= spec.max_wrap:
        return rows
    for r in range(min(rows, spec.max_wrap), 0, -1):
        if rows % r == 0 and r * row_stride_words <= spec.max_stride:
            return r
    return 1


def _strip(offset: int, rows: int, width: int, row_stride: int, words_per_elem: float,
           spec: DmaSpec) -> Tap:
    r = _row_block(rows, int(row_stride * words_per_elem), spec)
    return Tap(offset, (rows // r, r, width), (r * row_stride, row_stride, 1))


def shim_a(c: Grid, block_row: int, shim: int) -> Tap:
    """The (a_rows*m) x K strip of A that A shim `shim` carries for the output block whose first
    row is `block_row` (one m-row strip per core row it serves), in k_mt chunks."""
    first_row = block_row + shim * c.a_rows * c.m
    if c.a_col_maj and c.a_rows == 1:  # A^T: K rows of the core row's m columns
        return _strip(first_row, c.kw, c.m, c.ld, c.unit.unit_bytes / 4, c.dev.dma[TileKind.SHIM])
    if c.a_col_maj:  # per k_mt chunk, each served core row's k_mt x m block of A^T in turn (the memtile's
        # split slices): the chunks are the shim BD's iteration dimension (rules/memtile.a_col_maj_chunks)
        return Tap(first_row, (c.kw // c.k_mt, c.a_rows, c.k_mt, c.m), (c.k_mt * c.ld, c.m, c.ld, 1))
    return Tap(first_row * c.ld, (c.kw // c.k_mt, c.a_rows * c.m, c.k_mt), (c.k_mt, c.ld, 1))


def shim_b(c: Grid, block_col: int, col: int) -> Tap:
    """The K x n strip of B for core column `col` of the output block whose first column is
    `block_col` (with an epilogue, K runs on by its tile's k-step: Grid.kb)."""
    first_col = block_col + col * c.n
    if c.obj:  # W4A16: the column's objects, contiguous in k-step order, one run (design/b_objects.py)
        steps = c.kw // c.k
        return Tap.linear(steps * c.obj, first_col // c.n * steps * c.obj)
    if c.b_pack == "strips":  # mlir-aie's packing: the strip is one contiguous run
        return Tap.linear(c.kb * c.n, first_col * c.kb)
    if c.b_col_maj:  # stored N x K: n rows of B^T, walked in k_mt chunks (k_mt = k with an epilogue tile)
        return Tap(first_col * c.ld, (c.kb // c.k_mt, c.n, c.k_mt), (c.k_mt, c.ld, 1))
    spec = c.dev.dma[TileKind.SHIM]
    return _strip(first_col, c.kb, c.n, c.ld, c.unit.unit_bytes / 4, spec)


def shim_c(c: Grid, block_row: int, block_col: int, col: int) -> Tap:
    """The (rows*m) x n block of C that column `col` joins for the output block at (block_row,
    block_col), in this call's layout. The memtile sends it in the build's: each core row's m x n
    tile row by row, or column by column in a column-major build. When the two differ (a 32-bit C
    only: rules/call_layouts.py) the shim stores it element by element, one word per run."""
    first_col = block_col + col * c.n
    spec = c.dev.dma[TileKind.SHIM]
    if c.c_col_maj and c.c_built_col_maj:  # tiles in columns, down C^T's rows (mlir-aie's [4, n, m] / [m, M, 1])
        return Tap(first_col * c.ld + block_row, (c.rows, c.n, c.m), (c.m, c.ld, 1))
    if c.c_col_maj:  # tile rows across C^T's rows: element (i, j) to C^T[j, i]
        return Tap(first_col * c.ld + block_row, (c.rows, c.m, c.n), (c.m, 1, c.ld))
    if c.c_built_col_maj:  # tile columns down C's rows: element (i, j) of each tile's stream to C[i, j]
        return Tap(block_row * c.ld + first_col, (c.rows, c.n, c.m), (c.m * c.ld, 1, c.ld))
    return _strip(block_row * c.ld + first_col, c.rows * c.m, c.n, c.ld, c.unit.unit_bytes / 4, spec)


# ---- the split decode placement (rules/decode_split.py) ---------------------------------------
def shim_b_stream(c: Grid, block_col: int, first: int, count: int) -> Tap:
    """A split B stream's walk for the output block whose first column is `block_col`: the K x n strips of
    virtual columns [first, first + count), per k-step (per k_mt chunk of B^T) every core's tile in turn,
    as the stream's memtile object holds them, one slice per core (before shim_walk fits it to one BD)."""
    col = block_col + first * c.n  # the stream's first column
    if c.obj:  # W4A16: each core column's objects contiguous in k-step order (design/b_objects.py)
        steps = c.kw // c.k
        return Tap(col // c.n * steps * c.obj, (steps, count, c.obj), (c.obj, steps * c.obj, 1))
    if c.b_pack == "strips":  # each core column's K x n strip contiguous: k x n of each per k-step
        return Tap(col * c.kb, (c.kb // c.k, count, c.k * c.n), (c.k * c.n, c.kb * c.n, 1))
    if c.b_col_maj:  # B^T: the stream's count n rows, in k_mt chunks
        return Tap(col * c.ld, (c.kb // c.k_mt, count * c.n, c.k_mt), (c.k_mt, c.ld, 1))
    # row-major: per k-step each core's k x n tile (the memtile's S2MM fills a split link's object slice by
    # slice, one BD each: sim/lower.py), so runs of n
    return Tap(col, (c.kb // c.k, count, c.k, c.n), (c.k * c.ld, c.n, c.ld, 1))


def shim_c_join(c: Grid, block_row: int, block_col: int, first: int, count: int) -> Tap:
    """The C a physical column joins along N in the split placement: virtual columns [first, first + count),
    each an m x n tile sent row by row (c_l2_to_stream), written side by side."""
    return Tap(block_row * c.ld + block_col + first * c.n, (count, c.m, c.n), (c.n, c.ld, 1))


SPLIT_FIX = f"use another k or n (or {opt('rows', 1)})"


def split_b_task(c: Grid, block_col: int, stream: int) -> Tap:
    """Split B stream `stream`'s walk for the output block at `block_col`, as one shim BD (spans.shim_walk), or
    DmaLimitError naming the limit."""
    s = decode_split.streams(c.dev)[stream]
    return shim_walk(shim_b_stream(c, block_col, s.first, s.count), c.unit, c.dev.dma[TileKind.SHIM],
                     f"shim MM2S B stream {stream} (split decode)", SPLIT_FIX)


def split_c_task(c: Grid, block_row: int, block_col: int, col: int) -> Tap:
    """Physical column `col`'s joined C walk for the output block at (block_row, block_col), as one shim BD."""
    rows = c.dev.core_rows
    return shim_walk(shim_c_join(c, block_row, block_col, col * rows, rows), c.unit, c.dev.dma[TileKind.SHIM],
                     f"shim S2MM C of column {col} (split decode)", SPLIT_FIX)


# ---- limits ----------------------------------------------------------------------------------
def check_dma_limits(config: GemmConfig, call: CallPlan | None = None) -> None:
    """Check every distinct pattern against the DMA that runs it (offsets do not matter), for one
    call (default: the problem the config was made for)."""
    call = call or config.call
    a, b, c = (grid(config, op, call) for op in ("A", "B", "C"))
    dev = config.dev
    shim, mem, core = dev.dma[TileKind.SHIM], dev.dma[TileKind.MEM], dev.dma[TileKind.CORE]
    last_row, last_col = call.m_origin(call.m_blocks - 1), call.n_origin(call.n_blocks - 1)
    qa, qb, qc = (g.unit.tile_rows for g in (a, b, c))
    qb = b.unit.tile_cols  # B is indexed along N (an int4 unit is 1 x 8)
    # the split placement: its own shim walks, each fitted to a BD
    if decode_split.is_split(config.dev, config.array.rows, config.array.cols):
        for i in range(len(decode_split.streams(config.dev))):
            split_b_task(b, last_col // qb, i)
        for col in range(config.dev.columns):
            split_c_task(c, last_row // qc, last_col // qc, col)
    checks = [
        (shim_a(a, last_row // qa, a.rows // a.a_rows - 1), a, shim, "shim MM2S A (m x K strip per core row)",
         "reduce m or k_mt, or K"),
        (shim_b(b, last_col // qb, b.cols - 1), b, shim, "shim MM2S B (K x n strip)", "reduce n or k_mt, or N"),
        (shim_c(c, last_row // qc, last_col // qc, c.cols - 1), c, shim, "shim S2MM C ((rows*m) x n block)",
         "reduce m or n, or N"),
        (a_l2_from_stream(a), a, mem, "memtile S2MM A (dims_from_stream)", "reduce m, k or k_mt"),
        (a_l2_to_stream(a), a, mem, "memtile MM2S A (dims_to_stream)", "reduce m, k or k_mt"),
        (b_l2_to_stream(b), b, mem, "memtile MM2S B (dims_to_stream)", "reduce n, k or k_mt"),
        (c_l2_to_stream(c), c, mem, "memtile MM2S C (dims_to_stream)", "reduce m or n"),
        (a_l1_from_stream(a), a, core, "core S2MM A (dims_from_stream)", "reduce m or k"),
        (Tap.linear(c.m * c.n), c, core, "core MM2S C", "reduce m or n"),
        (Tap.linear(b.b_l2_units), b, mem, "memtile S2MM B", "reduce n or k_mt"),
    ]
    b_l1 = b_l1_from_stream(b)
    if b_l1 is not None:
        checks.append((b_l1, b, core, "core S2MM B (dims_from_stream)", "reduce n or k"))
    else:
        checks.append((Tap.linear(b.b_l1_units), b, core, "core S2MM B", "reduce k or n"))
    for tap, g, spec, where, fix in checks:
        if tap.is_linear():
            tap = Tap.linear(tap.count)
        tap.to_words(g.unit).check(spec, where, fix)
    # memtile and core BDs also pass mlir-aie's static BD verifier (sizes in elements of the
    # memref's element type: bfp16 tiles count as their 8 v8bfp16ebs8 blocks)
    statics = [
        (a_l2_from_stream(a), a, mem, a.m * a.k_mt, "memtile S2MM A (dims_from_stream)", "reduce m, k or k_mt"),
        (a_l2_to_stream(a), a, mem, a.m * a.k_mt, "memtile MM2S A (dims_to_stream)", "reduce m, k or k_mt"),
        (b_l2_to_stream(b), b, mem, b.b_l2_units, "memtile MM2S B (dims_to_stream)", "reduce n, k or k_mt"),
        (c_l2_to_stream(c), c, mem, c.m * c.n, "memtile MM2S C (dims_to_stream, per join slice)",
         "reduce m or n"),
        (a_l1_from_stream(a), a, core, a.t_ma * a.k, "core S2MM A (dims_from_stream)", "reduce m or k"),
    ]
    if b_l1 is not None:
        statics.append((b_l1, b, core, b.k * b.n, "core S2MM B (dims_from_stream)", "reduce n or k"))
    for tap, g, spec, units, where, fix in statics:
        if dims(tap) is None:
            continue  # no dims: nothing for the verifier to check
        parts = g.unit.blocks_per_unit
        tap.scaled(parts).check_static_bd(spec, units * parts, where, fix)
    # the host buffers must be addressable
    for name, g in (("A", a), ("B", b), ("C", c)):
        rows, cols = call.storage(name)
        nbytes = g.unit.unit_nbytes(rows * cols // g.unit.unit_elems)
        if nbytes >= 1 << 48:
            raise ConfigError(f"{name} needs {nbytes} B, beyond the 48-bit shim address", "split the GEMM")
