"""Host buffers of a design: inputs zero-padded to the native size in their DRAM layout, C cropped.

Scalar operands are plain row-major arrays (B^T when B is column-major). A bfp16 operand is
quantized on the host (the helper's truncation, blocks of 8 along K for A and B, along N for C)
and stored as 8 x 8 tiles of 72 bytes (gemm_gen/bfp16.py), row-major over tiles:
- A: tile (i, j) = rows 8i.. of K columns 8j.., each row one block;
- B: tile (l, j) = columns 8l.. of B (rows of B^T), each column one block of 8 K values, as the
  kernel's mac_8x8_8x8T reads it; tiles ordered (l, j) when B is column-major, (j, l) when not, or
  in mlir-aie's ATB strips (GemmConfig.b_pack): per core column's K x n strip, per k x n L1 tile,
  1 x 2 super-blocks of tiles;
- C: tile (i, l) = rows 8i.. of N columns 8l.., each row one block.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .bfp16 import TILE, TILE_BYTES, tile_values, tiles_of
from .config import GemmConfig
from .design.grid import grid
from .numerics import Rounding

HOST_ROUNDING = Rounding.FLOOR  # mlir-aie's floatToBfp16 truncates whatever rounding it is asked for


def _padded(x: np.ndarray, shape: tuple[int, int], host: np.dtype) -> np.ndarray:
    out = np.zeros(shape, dtype=host)
    out[: x.shape[0], : x.shape[1]] = x
    return out


def pad_inputs(c: GemmConfig, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A (M x K) and B (K x N, logical) as the DRAM buffers the design reads: A Mp x Kp row-major;
    B Kp x Np row-major, or Np x Kp (B^T) when B is column-major; bfp16 operands as tiles."""
    t_a, t_b = c.t_in, c.t_b
    a_pad = _padded(a, (c.Mp, c.Kp), t_a.host)
    bt_pad = _padded(np.asarray(b).T, (c.Np, c.Kp), t_b.host)
    a_dram = tiles_of(a_pad, HOST_ROUNDING) if t_a.is_block else a_pad
    if t_b.is_block:
        tiles = tiles_of(bt_pad, HOST_ROUNDING)  # (Np/8, Kp/8) tiles of B^T rows = B columns
        if c.b_pack == "strips":
            b_dram = np.ascontiguousarray(_strip_view(c, tiles).transpose(0, 3, 1, 4, 2, 5)).reshape(
                c.Np // c.n, -1, TILE_BYTES)
        else:
            b_dram = tiles if c.b_col_maj else np.ascontiguousarray(tiles.transpose(1, 0, 2))
    else:
        b_dram = bt_pad if c.b_col_maj else np.ascontiguousarray(bt_pad.T)
    return a_dram, b_dram


def _strip_view(c: GemmConfig, tiles: np.ndarray) -> np.ndarray:
    """B^T's (Np/8, Kp/8) tiles as (strip, super-block column, 1 of 2, L1 tile row, tile row in it):
    mlir-aie's ATB host walks them strip, L1 tile row, super-block column, tile row, 1 of 2."""
    q = TILE
    return tiles.reshape(c.Np // c.n, c.n // (2 * q), 2, c.Kp // c.k, c.k // q, TILE_BYTES)


def b_unit(c: GemmConfig, kk: Any, nn: Any) -> Any:
    """Index, in B's DRAM buffer, of the unit (element, or bfp16 tile) at K unit kk, N unit nn."""
    g = grid(c, "B")
    if c.b_pack == "strips":
        strip, lr = np.divmod(nn, g.n)
        r, sbr = np.divmod(kk, g.k)
        sbc, b = np.divmod(lr, 2)
        return strip * g.Kp * g.n + r * g.k * g.n + sbc * 2 * g.k + sbr * 2 + b
    return nn * g.Kp + kk if c.b_col_maj else kk * g.Np + nn


def b_unit_coords(c: GemmConfig, unit: int) -> tuple[int, int]:
    """(K unit, N unit) of the unit at index `unit` of B's DRAM buffer (b_unit's inverse)."""
    g = grid(c, "B")
    if c.b_pack == "strips":
        strip, rest = divmod(unit, g.Kp * g.n)
        r, rest = divmod(rest, g.k * g.n)
        sbc, rest = divmod(rest, 2 * g.k)
        sbr, b = divmod(rest, 2)
        return r * g.k + sbr, strip * g.n + 2 * sbc + b
    if c.b_col_maj:
        nn, kk = divmod(unit, g.Kp)
        return kk, nn
    return divmod(unit, g.Np)


def dram_arrays(c: GemmConfig, a_raw: np.ndarray, b_raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The bytes of A's and B's DRAM buffers in the shapes pad_inputs gives them."""
    def shaped(t: Any, raw: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
        data = np.ascontiguousarray(raw).view(np.uint8)
        return data.reshape(*(s // TILE for s in shape), TILE_BYTES) if t.is_block else data.view(t.host).reshape(shape)

    a = shaped(c.t_in, a_raw, (c.Mp, c.Kp))
    if c.t_b.is_block and c.b_pack == "strips":
        return a, np.ascontiguousarray(b_raw).view(np.uint8).reshape(c.Np // c.n, -1, TILE_BYTES)
    return a, shaped(c.t_b, b_raw, (c.Np, c.Kp) if c.b_col_maj else (c.Kp, c.Np))


def host_values(c: GemmConfig, a_dram: np.ndarray, b_dram: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A (M x K) and B (K x N, logical) as the cores receive them, read back from the DRAM buffers
    pad_inputs made: bfp16 operands decoded from their tiles (so the reference multiplies exactly
    the quantized values the DMAs carry), scalar operands as they are."""
    M, K, N = c.M, c.K, c.N
    a = tile_values(a_dram) if c.t_in.is_block else a_dram
    if c.t_b.is_block and c.b_pack == "strips":
        q = TILE
        strips = b_dram.reshape(c.Np // c.n, c.Kp // c.k, c.n // (2 * q), c.k // q, 2, TILE_BYTES)
        bt = tile_values(np.ascontiguousarray(strips.transpose(0, 2, 4, 1, 3, 5)).reshape(c.Np // q, c.Kp // q,
                                                                                          TILE_BYTES))
    elif c.t_b.is_block:
        bt = tile_values(b_dram if c.b_col_maj else np.ascontiguousarray(b_dram.transpose(1, 0, 2)))
    else:
        bt = b_dram if c.b_col_maj else b_dram.T
    return a[:M, :K], np.ascontiguousarray(bt[:N, :K].T)


def output_values(c: GemmConfig, raw: np.ndarray) -> np.ndarray:
    """The M x N result from the padded C buffer's bytes (bfp16 tiles decoded)."""
    data = np.ascontiguousarray(raw).view(np.uint8)
    if c.t_out.is_block:
        values = tile_values(data.reshape(c.Mp // TILE, c.Np // TILE, c.t_out.unit_bytes))
    else:
        values = data.view(c.t_out.host).reshape(c.Mp, c.Np)
    return values[: c.M, : c.N]


def output_bytes(c: GemmConfig) -> int:
    """Size of the padded C buffer."""
    return c.t_out.nbytes(c.Mp * c.Np)
