"""Host buffers of one call: A and B as the DRAM buffers the design reads, C as the one it writes.

A scalar operand is the user's own row-major matrix (B^T when B is column-major) unless the call's
plan (gemm_gen/spec/call.py) says the host must pad it; then it is a zero-padded copy of the blocks'
extent, and C is cropped out of its padded buffer. Reads and writes past a buffer's end land in
its slack (design/ir.py's `slack` of a runtime tensor), which the host adds as zeros.

Scalar operands are plain row-major arrays (A^T and B^T when column-major). A bfp16 operand is
quantized on the host (the helper's truncation, blocks of 8 along K for A and B, along N for C)
and stored as 8 x 8 tiles of 72 bytes (gemm_gen/facts/bfp16.py), row-major over tiles (an int4 B is always a
padded copy too, row-major, packed two values per byte along N, the low nibble first: dtypes.pack_i4;
in strips, each core column's K x n strip of those bytes contiguous, for one long DMA run per strip):
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

from ..facts.bfp16 import TILE, TILE_BYTES, tile_values, tiles_of
from ..facts.dtypes import DType, pack_i4, unpack_i4
from ..facts.dtypes import dtype as dtype_of
from ..facts.epilogue import Requant
from ..facts.epilogue_args import EpilogueArgs, read_tile, tile_bytes
from ..facts.l1_layout import b_layout
from ..facts.quant_b import QuantB
from ..facts.rounding import Rounding
from ..spec.call import CallPlan
from ..spec.config import GemmConfig
from .b_objects import layout as object_layout
from .b_objects import pack_objects, unpack_objects
from .build import host_tensors
from .grid import Grid, grid

HOST_ROUNDING = Rounding.FLOOR  # mlir-aie's floatToBfp16 truncates whatever rounding it is asked for


def _padded(x: np.ndarray, shape: tuple[int, int], host: np.dtype) -> np.ndarray:
    out = np.zeros(shape, dtype=host)
    out[: x.shape[0], : x.shape[1]] = x
    return out


def _in_place(stored: np.ndarray, ld: int | None, host: np.dtype) -> np.ndarray:
    """The stored matrix as the DRAM buffer the design reads: itself when its rows are contiguous
    (no copy), its rows x ld span when the call reads it with a leading dimension (the memory between
    rows included: the operator checked that it belongs to the array's allocation), else a copy."""
    if ld is None:
        return np.ascontiguousarray(stored, host)
    assert stored.dtype == host and stored.strides == (ld * stored.itemsize, stored.itemsize), "checked by the caller"
    return np.lib.stride_tricks.as_strided(stored, (stored.shape[0], ld), stored.strides, writeable=False)


def pad_inputs(c: GemmConfig, a: np.ndarray, b: np.ndarray | QuantB, call: CallPlan | None = None,
               epilogue: EpilogueArgs | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A (M x K) and B (K x N, logical) as the DRAM buffers one call reads: each the user's matrix
    as it is (B^T when column-major), or where the call's plan pads it a zero-padded copy; bfp16
    operands as tiles, W4A16 weights (QuantB) as objects (b_objects). With an epilogue tile, B's copy
    carries the call's `epilogue` data past K (write_epilogue_tiles; None: zeros, a bias of 0 and
    multipliers of 0)."""
    call = call or c.call
    t_a, t_b = c.types.t_in, c.types.t_b
    if c.groups.group_size and not isinstance(b, QuantB):
        raise TypeError(f"a W4A16 config (group_size={c.groups.group_size}) takes B as b_objects.QuantB, not {type(b)}")
    a_rows, a_cols = call.storage("A")
    a_stored = np.asarray(a).T if c.layout.a_col_maj else a  # A^T when column-major
    a_dram = (_padded(a_stored, (a_rows, a_cols), t_a.host) if "A" in call.padded
              else _in_place(a_stored, dict(call.lds).get("A"), t_a.host))
    if t_a.is_block:
        a_dram = tiles_of(a_dram, HOST_ROUNDING)
    if isinstance(b, QuantB):  # W4A16: (strip, k-step, object bytes), b_objects' layout
        return a_dram, pack_objects(c, call, b)
    bt_rows, bt_cols = call.storage("B")[::-1] if not c.layout.b_col_maj else call.storage("B")
    if "B" in call.padded:
        bt = _padded(np.asarray(b).T, (bt_rows, bt_cols), t_b.host)
    else:
        bt = np.asarray(b, t_b.host).T
        if "B" in dict(call.lds):  # B (or B^T) read in place from rows padded to its leading dimension
            stored = _in_place(bt if c.layout.b_col_maj else bt.T, dict(call.lds)["B"], t_b.host)
            bt = stored if c.layout.b_col_maj else stored.T
    if t_b.is_block:
        tiles = tiles_of(bt, HOST_ROUNDING)  # (Np/8, Kw/8) tiles of B^T rows = B columns
        if c.layout.b_pack == "strips":
            b_dram = np.ascontiguousarray(_strip_view(c, call, tiles).transpose(0, 3, 1, 4, 2, 5)).reshape(
                call.Np // c.tiling.n, -1, TILE_BYTES)
        else:
            b_dram = tiles if c.layout.b_col_maj else np.ascontiguousarray(tiles.transpose(1, 0, 2))
    elif t_b.is_packed:  # row-major (checks.check_int4_layout): pairs along N, the low nibble first
        b_dram = pack_i4(bt.T)
        if c.layout.b_pack == "strips":  # each core column's K x n strip contiguous: (strip, K, n / 2 bytes)
            b_dram = np.ascontiguousarray(b_dram.reshape(b_dram.shape[0], -1, c.tiling.n // 2).transpose(1, 0, 2))
    else:
        b_dram = np.ascontiguousarray(bt) if c.layout.b_col_maj else np.ascontiguousarray(bt.T)
        if c.layout.b_pack == "strips":  # row-major (checks): each core column's K x n strip contiguous: (strip, K, n)
            b_dram = np.ascontiguousarray(b_dram.reshape(b_dram.shape[0], -1, c.tiling.n).transpose(1, 0, 2))
        if epilogue is not None and c.epilogue.needs_tile:
            write_epilogue_tiles(c, call, b_dram, epilogue)
    return a_dram, b_dram


def write_epilogue_tiles(c: GemmConfig, call: CallPlan, b_dram: np.ndarray, args: EpilogueArgs) -> None:
    """Write each column tile's epilogue tile (epilogue_args.tile_bytes) into B's rows past k_walk, through
    the inverse of B's walk into L1: B's element (k_walk + kk, col0 + jj) lands at the core's L1 B address
    b_layout[kk, jj] (the blocked layout the memtile -> core walk makes, which the matmul calls read), so
    that the tile's bytes lie linear in the core's B buffer, whatever B's layout."""
    lane, to_l1, places = _tile_places(c, call)
    flat = b_dram.reshape(-1).view(lane)  # a view: b_dram is the host's own contiguous copy
    for col0 in range(0, call.Np, c.tiling.n):
        packed = tile_bytes(c.epilogue, args, col0, c.tiling.n, c.types.t_out.is_float).view(lane)
        l1 = np.zeros(to_l1.size, dtype=lane)
        l1[:packed.size] = packed
        flat[places(col0)] = l1[to_l1]


def _tile_places(c: GemmConfig, call: CallPlan) -> tuple[np.dtype, np.ndarray, Any]:
    """B's element lanes, the L1 address of each (kk, jj) of a B object (b_layout: what the memtile -> core
    walk makes of it), and per column tile its elements' places in B's buffer (rows past k_walk)."""
    g = grid(c, "B", call)
    kk, jj = np.indices((g.k, g.n))
    return (np.dtype(f"u{c.types.t_b.bytes}"), b_layout(g.k, g.n, g.s, g.t, c.layout.b_col_maj),
            lambda col0: b_unit(c, call.k_walk + kk, col0 + jj, call))


def _strip_view(c: GemmConfig, call: CallPlan, tiles: np.ndarray) -> np.ndarray:
    """B^T's (Np/8, Kw/8) tiles as (strip, super-block column, 1 of 2, L1 tile row, tile row in it):
    mlir-aie's ATB host walks them strip, L1 tile row, super-block column, tile row, 1 of 2."""
    q = TILE
    return tiles.reshape(call.Np // c.tiling.n, c.tiling.n // (2 * q), 2, call.k_walk // c.tiling.k, c.tiling.k // q,
                         TILE_BYTES)


def read_epilogue_tiles(c: GemmConfig, call: CallPlan, b_dram: np.ndarray
                        ) -> tuple[np.ndarray | None, Requant | None]:
    """(bias, requantization) over C's Np columns as the cores will read them from B's DRAM buffer (the
    inverse of write_epilogue_tiles, each tile gathered in L1 order and parsed by epilogue_args.read_tile):
    what an NPU stand-in computes C's epilogue with."""
    lane, to_l1, places = _tile_places(c, call)
    flat = np.ascontiguousarray(b_dram).reshape(-1).view(lane)
    parts = []
    for col0 in range(0, call.Np, c.tiling.n):
        l1 = np.zeros(to_l1.size, dtype=lane)
        l1[to_l1] = flat[places(col0)]
        parts.append(read_tile(c.epilogue, c.tiling.n, l1.view(np.uint8), c.types.t_out.is_float, c.types.t_out))
    bias = None if parts[0][0] is None else np.concatenate([p[0] for p in parts if p[0] is not None])
    first = parts[0][1]
    if first is None:
        return bias, None
    per_column = [r for _, r in parts if r is not None]
    return bias, Requant(sum((r.multiplier for r in per_column), ()), sum((r.shift for r in per_column), ()),
                         first.zero_point, first.act_min, first.act_max, first.out, first.form)


def b_unit(c: GemmConfig, kk: Any, nn: Any, call: CallPlan | None = None) -> Any:
    """Index, in B's DRAM buffer, of the unit (element, or bfp16 tile) at K unit kk, N unit nn."""
    return b_unit_in(grid(c, "B", call), kk, nn)


def b_unit_in(g: Grid, kk: Any, nn: Any) -> Any:
    """b_unit on B's grid for the call (a Design's: Design.grid("B", call)); the grid carries B's layout."""
    if g.obj:  # W4A16: the first word of the object that holds (kk, nn) (inside it: b_objects.kernel_order)
        strip, step = np.divmod(nn, g.n)[0], np.divmod(kk, g.k)[0]
        return (strip * (g.kw // g.k) + step) * g.obj
    if g.b_pack == "strips" and not g.unit.is_block:  # the strip row-major: K rows of n units (int4: n/8 words)
        strip, lr = np.divmod(nn, g.n)
        return strip * g.kw * g.n + kk * g.n + lr
    if g.b_pack == "strips":
        strip, lr = np.divmod(nn, g.n)
        r, sbr = np.divmod(kk, g.k)
        sbc, b = np.divmod(lr, 2)
        return strip * g.kw * g.n + r * g.k * g.n + sbc * 2 * g.k + sbr * 2 + b
    return nn * g.ld + kk if g.b_col_maj else kk * g.ld + nn


def b_unit_coords(c: GemmConfig, unit: int, call: CallPlan | None = None) -> tuple[int, int]:
    """(K unit, N unit) of the unit at index `unit` of B's DRAM buffer (b_unit's inverse)."""
    return b_unit_coords_in(grid(c, "B", call), unit)


def b_unit_coords_in(g: Grid, unit: int) -> tuple[int, int]:
    """b_unit_coords on B's grid for the call (b_unit_in's inverse)."""
    if g.obj:  # W4A16: the first (K, N unit) of the object the word belongs to
        strip, step = divmod(unit // g.obj, g.kw // g.k)
        return step * g.k, strip * g.n
    if g.b_pack == "strips" and not g.unit.is_block:
        strip, rest = divmod(unit, g.kw * g.n)
        kk, lr = divmod(rest, g.n)
        return kk, strip * g.n + lr
    if g.b_pack == "strips":
        strip, rest = divmod(unit, g.kw * g.n)
        r, rest = divmod(rest, g.k * g.n)
        sbc, rest = divmod(rest, 2 * g.k)
        sbr, b = divmod(rest, 2)
        return r * g.k + sbr, strip * g.n + 2 * sbc + b
    if g.b_col_maj:
        nn, kk = divmod(unit, g.ld)
        return kk, nn
    return divmod(unit, g.ld)


def _shaped(t: DType, raw: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """A buffer's bytes (slack dropped) as the array pad_inputs gives it."""
    data = np.ascontiguousarray(raw).view(np.uint8)
    if t.is_block:
        tiles = shape[0] // TILE * (shape[1] // TILE)
        return data[: tiles * TILE_BYTES].reshape(shape[0] // TILE, shape[1] // TILE, TILE_BYTES)
    if t.is_packed:  # packed bytes, a row of shape[1] values in nbytes(shape[1]) bytes
        return data[: t.nbytes(shape[0] * shape[1])].reshape(shape[0], t.nbytes(shape[1]))
    return data[: t.nbytes(shape[0] * shape[1])].view(t.host).reshape(shape)


def dram_arrays(c: GemmConfig, a_raw: np.ndarray, b_raw: np.ndarray, call: CallPlan | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """The bytes of A's and B's DRAM buffers (slack allowed) in the shapes pad_inputs gives them."""
    call = call or c.call
    a = _shaped(c.types.t_in, a_raw, call.storage("A"))
    if c.groups.group_size:  # W4A16 objects
        objs = (call.Np // c.tiling.n, call.k_walk // c.tiling.k)
        return a, np.ascontiguousarray(b_raw).view(np.uint8)[: objs[0] * objs[1] * object_layout(c).nbytes].reshape(
            *objs, -1)
    if c.types.t_b.is_block and c.layout.b_pack == "strips":
        rows, cols = call.storage("B")
        data = np.ascontiguousarray(b_raw).view(np.uint8)[: rows * cols // TILE ** 2 * TILE_BYTES]
        return a, data.reshape(call.Np // c.tiling.n, -1, TILE_BYTES)
    if c.types.t_b.is_packed and c.layout.b_pack == "strips":
        rows, cols = call.storage("B")
        data = np.ascontiguousarray(b_raw).view(np.uint8)[: c.types.t_b.nbytes(rows * cols)]
        return a, data.reshape(call.Np // c.tiling.n, rows, c.tiling.n // 2)
    if c.layout.b_pack == "strips":  # a scalar B's strips: (strip, K, n)
        rows, cols = call.storage("B")
        data = np.ascontiguousarray(b_raw).view(np.uint8)[: c.types.t_b.nbytes(rows * cols)].view(c.types.t_b.host)
        return a, data.reshape(call.Np // c.tiling.n, rows, c.tiling.n)
    return a, _shaped(c.types.t_b, b_raw, call.storage("B"))


def host_values(c: GemmConfig, a_dram: np.ndarray, b_dram: np.ndarray, call: CallPlan | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """A (M x K) and B (K x N, logical) as the cores receive them, read back from the DRAM buffers
    pad_inputs made: bfp16 operands decoded from their tiles (so the reference multiplies exactly
    the quantized values the DMAs carry), W4A16 objects dequantized (bf16), scalar operands as they are."""
    call = call or c.call
    M, K, N = call.M, call.K, call.N
    a = tile_values(a_dram) if c.types.t_in.is_block else a_dram.T if c.layout.a_col_maj else a_dram
    if c.groups.group_size:  # W4A16: the weights the kernels' dequantization makes of the objects
        bt = unpack_objects(c, call, b_dram).T
    elif c.types.t_b.is_block and c.layout.b_pack == "strips":
        q = TILE
        strips = b_dram.reshape(call.Np // c.tiling.n, call.k_walk // c.tiling.k, c.tiling.n // (2 * q),
                                c.tiling.k // q, 2, TILE_BYTES)
        bt = tile_values(np.ascontiguousarray(strips.transpose(0, 2, 4, 1, 3, 5)).reshape(
            call.Np // q, call.k_walk // q, TILE_BYTES))
    elif c.types.t_b.is_block:
        bt = tile_values(b_dram if c.layout.b_col_maj else np.ascontiguousarray(b_dram.transpose(1, 0, 2)))
    elif c.types.t_b.is_packed and c.layout.b_pack == "strips":  # (strip, K, n / 2) back to K x Np / 2
        bt = unpack_i4(np.ascontiguousarray(b_dram.transpose(1, 0, 2)).reshape(b_dram.shape[1], -1)).T
    elif c.types.t_b.is_packed:
        bt = unpack_i4(b_dram).T
    elif c.layout.b_pack == "strips":  # (strip, K, n) back to K x Np, then B^T
        bt = np.ascontiguousarray(b_dram.transpose(1, 0, 2)).reshape(b_dram.shape[1], -1).T
    else:
        bt = b_dram if c.layout.b_col_maj else b_dram.T
    return a[:M, :K], np.ascontiguousarray(bt[:N, :K].T)


def output_values(c: GemmConfig, raw: np.ndarray, call: CallPlan | None = None) -> np.ndarray:
    """The M x N result from the C buffer's bytes (slack and padding dropped, bfp16 tiles decoded)."""
    call = call or c.call
    rows, cols = call.storage("C")
    data = np.ascontiguousarray(raw).view(np.uint8)
    if c.types.t_out.is_block:
        values = tile_values(data[: rows * cols // TILE ** 2 * c.types.t_out.unit_bytes].reshape(
            rows // TILE, cols // TILE, c.types.t_out.unit_bytes))
    else:
        values = data[: c.types.t_out.nbytes(rows * cols)].view(c.types.t_out.host).reshape(rows, cols)
    if call.c_col_maj:  # C^T (this call's layout)
        values = values.T
    return values[: call.M, : call.N]


def output_bytes(c: GemmConfig, call: CallPlan | None = None) -> int:
    """Size of C's buffer (its padded copy when the call pads C), before any slack."""
    rows, cols = (call or c.call).storage("C")
    return c.types.t_out.nbytes(rows * cols)


def with_slack(c: GemmConfig, call: CallPlan, a_dram: np.ndarray, b_dram: np.ndarray
               ) -> tuple[tuple[np.ndarray, np.ndarray], int]:
    """A's and B's buffer bytes followed by the zeroed slack the call's transfers reach, and the
    bytes of C's buffer (its slack included): what the host allocates for the NPU."""
    tensors = {t.name: t for t in host_tensors(c, call)}

    def padded(x: np.ndarray, name: str) -> np.ndarray:
        t = tensors[name]
        raw = np.ascontiguousarray(x).reshape(-1).view(np.uint8)
        return np.concatenate([raw, np.zeros(dtype_of(t.dtype).unit_nbytes(t.slack), np.uint8)])

    return (padded(a_dram, "A"), padded(b_dram, "B")), dtype_of(tensors["C"].dtype).unit_nbytes(tensors["C"].units)

