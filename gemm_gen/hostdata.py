"""Host buffers of a design: inputs zero-padded to the native size in their DRAM layout, C cropped.

Scalar operands are plain row-major arrays (B^T when B is column-major). A bfp16 operand is
quantized on the host (the helper's truncation, blocks of 8 along K for A and B, along N for C)
and stored as 8 x 8 tiles of 72 bytes (gemm_gen/bfp16.py), row-major over tiles:
- A: tile (i, j) = rows 8i.. of K columns 8j.., each row one block;
- B: tile (l, j) = columns 8l.. of B (rows of B^T), each column one block of 8 K values, as the
  kernel's mac_8x8_8x8T reads it; tiles ordered (l, j) when B is column-major, (j, l) when not;
- C: tile (i, l) = rows 8i.. of N columns 8l.., each row one block.
"""

from __future__ import annotations

import numpy as np

from .bfp16 import TILE, tile_values, tiles_of
from .config import GemmConfig
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
        b_dram = tiles if c.b_col_maj else np.ascontiguousarray(tiles.transpose(1, 0, 2))
    else:
        b_dram = bt_pad if c.b_col_maj else np.ascontiguousarray(bt_pad.T)
    return a_dram, b_dram


def host_values(c: GemmConfig, a_dram: np.ndarray, b_dram: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A (M x K) and B (K x N, logical) as the cores receive them, read back from the DRAM buffers
    pad_inputs made: bfp16 operands decoded from their tiles (so the reference multiplies exactly
    the quantized values the DMAs carry), scalar operands as they are."""
    M, K, N = c.M, c.K, c.N
    a = tile_values(a_dram) if c.t_in.is_block else a_dram
    if c.t_b.is_block:
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
