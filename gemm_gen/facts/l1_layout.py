"""The blocked L1 layouts the matmul kernel reads and writes (AIE API mmul tiles).

Each function returns addr[i, j]: the L1 element offset of logical element (i, j) of a tile.
- A (m x k): r x s blocks, row-major inside, blocks row-major.
- A column-major (m x k from A^T): the same blocks in the same order, each an s x r block of A^T
  (the kernel transposes each on load).
- B row-major (k x n): s x t blocks, row-major inside, blocks row-major.
- B column-major (k x n from B^T): t x s blocks of B^T (the kernel transposes each on load),
  blocks ordered down K first.
- C (m x n): r x t blocks, row-major inside, blocks row-major.
- C column-major below 32 bits (bf16, i8, i16): the same blocks in the same order, each stored
  transposed (t x r, the block's columns; the kernel's aie::transpose on store and on reload, as
  mlir-aie's C_COL_MAJ), so the memtile drains C's columns in runs of r elements, whole words.
- B in bfp16 (k x n in 8 x 8 tiles of B^T): mlir-aie's ATB order, 1 x 2 super-blocks (b_tile_pairs),
  whatever B's DRAM packing or major order: the kernel pops a column pair's two tiles per k-step
  from one stream.
- A in bfp16 (one T_MA x k slice in 8 x 8 tiles): mlir-aie's ATB order, 2 x 1 super-blocks
  (a_tile_pairs): the kernel pops a row pair's two tiles per k-step from one stream. A bf16 A that
  the kernel converts stays in a_layout's 8 x 8 blocks; the kernel writes its bfp16 copy in this order.
These are the kernel's contract, written independently of the DMA patterns that produce them.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@lru_cache(maxsize=64)
def a_layout(m: int, k: int, r: int, s: int, col_maj: bool = False) -> np.ndarray:
    i, j = np.indices((m, k))
    if col_maj:
        return _frozen((i // r) * (r * k) + (j // s) * (r * s) + (j % s) * r + (i % r))
    return _frozen((i // r) * (r * k) + (j // s) * (r * s) + (i % r) * s + (j % s))


@lru_cache(maxsize=64)
def b_layout(k: int, n: int, s: int, t: int, col_maj: bool) -> np.ndarray:
    i, j = np.indices((k, n))
    if col_maj:
        return _frozen((j // t) * (t * k) + (i // s) * (t * s) + (j % t) * s + (i % s))
    return _frozen((i // s) * (s * n) + (j // t) * (s * t) + (i % s) * t + (j % t))


@lru_cache(maxsize=64)
def c_layout(m: int, n: int, r: int, t: int, col_maj: bool = False) -> np.ndarray:
    i, j = np.indices((m, n))
    if col_maj:  # each r x t block stored transposed (t x r: the block's columns, r long)
        return _frozen((i // r) * (r * n) + (j // t) * (r * t) + (j % t) * r + (i % r))
    return _frozen((i // r) * (r * n) + (j // t) * (r * t) + (i % r) * t + (j % t))


@lru_cache(maxsize=64)
def b_tile_pairs(k: int, n: int) -> np.ndarray:
    """L1 tile index of bfp16 B's tile (kb, nb), k x n tiles (n even): 1 x 2 super-blocks, the N tile
    pair outer, then K, then the pair's two tiles, l1(kb, nb) = (nb // 2) * 2 k + 2 kb + nb % 2
    (mlir-aie's gemm_atb_layout.h layout_transpose_L1_1x2_8x8block inside one L1 tile)."""
    assert n % 2 == 0, "B's tile columns come in pairs"
    kb, nb = np.indices((k, n))
    return _frozen((nb // 2) * (2 * k) + 2 * kb + nb % 2)


@lru_cache(maxsize=64)
def a_tile_pairs(m: int, k: int) -> np.ndarray:
    """L1 tile index of bfp16 A's tile (mb, kb), m x k tiles (m even): 2 x 1 super-blocks, the row
    pair outer, then K, then the pair's two tiles, l1(mb, kb) = (mb // 2) * 2 k + 2 kb + mb % 2
    (mlir-aie's gemm_atb_layout.h layout_A_L1_2x1_8x8block inside one L1 slice); a_layout with
    2 x 1 blocks of tiles."""
    assert m % 2 == 0, "A's tile rows come in pairs"
    mb, kb = np.indices((m, k))
    return _frozen((mb // 2) * (2 * k) + 2 * kb + mb % 2)


@lru_cache(maxsize=64)
def c_tile_blocks(m: int, n: int, r: int = 1, t: int = 1) -> np.ndarray:
    """L1 offset of C's element (i, j), m x n, in r x t blocks (row-major inside) grouped in 2 x 2
    super-blocks, super-blocks row-major: block (mb, nb) at ((mb // 2) * (n / 2t) + nb // 2) * 4
    + 2 (mb % 2) + nb % 2. Over tiles (r = t = 1): bfp16 C's tile order (mlir-aie's gemm_atb_layout.h,
    whose host undoes it with layout_inverse_C_L1_2x2_8x8block); over elements in 8 x 8 blocks: the
    accumulator of a C converted into those tiles (mlir-aie's config3 bf16 accumulator)."""
    assert m % (2 * r) == 0 and n % (2 * t) == 0, "C's blocks come in 2 x 2 super-blocks"
    i, j = np.indices((m, n))
    mb, nb = i // r, j // t
    block = ((mb // 2) * (n // (2 * t)) + nb // 2) * 4 + 2 * (mb % 2) + nb % 2
    return _frozen(block * (r * t) + (i % r) * t + j % t)
