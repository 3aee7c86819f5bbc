"""W4A16 B on the host: int4 weights with group scales laid out as the B objects the cores receive.

B's DRAM buffer is (strip, k-step, object bytes): each core column's objects contiguous in k-step
order, each object groupquant.ObjectLayout's (q in the bf16 kernel's B element order, two per byte,
the even element in the low nibble; then the scale rows; then the zero-point rows). The element
order is not described again here: it is the bf16 design's own memtile -> core B walk
(design/patterns.py) applied to an index array (`kernel_order`).

Padding (K to the array's walk, N to whole column tiles): every padded weight dequantizes to exactly +0,
because the design reads A's K tail in place (the next row's values, host_buffers) and relies on B's padded
rows being zero. So q = 0, except in a group that K ends inside with zero points, where q = z (the group's
scale and zero point are the real ones, and (z - z) s = 0; q = 0 would give -z s); a whole padded group
has scale 0 and zero point 0 (0 rather than 1: with a scale of 1 a nonzero q or z would not vanish).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..facts import groupquant
from ..facts.dtypes import BF16, pack_i4, unpack_i4
from ..facts.quant_b import QuantB
from ..spec.call import CallPlan
from ..spec.config import GemmConfig
from ..spec.rules.dequant import to_bfp16
from . import patterns
from .grid import Grid, grid


def layout(c: GemmConfig) -> groupquant.ObjectLayout:
    return groupquant.ObjectLayout(c.tiling.k, c.tiling.n, c.groups.group_size, c.groups.zero_points)


def kernel_order(c: GemmConfig) -> np.ndarray:
    """order[p] = kk n + jj: the element of a k x n B tile at position p of the bf16 kernel's B buffer,
    from the walk the bf16 design gives a bf16 B of this tile (memtile MM2S, then core S2MM)."""
    return kernel_order_in(grid(c, "B"), c.tiling.n, c.kernel.mmul[2], c.call.Np)


def kernel_order_in(gb: Grid, n: int, t: int, Np: int) -> np.ndarray:
    """kernel_order on a W4A16 design's B grid (a Design's: Design.grid("B")), its tile's n values, the mmul's t
    and the call's Np values: the walks of a bf16 B of that tile."""
    g = replace(gb, unit=BF16, n=n, t=t, Np=Np, ld=Np, b_pack="tiles", obj=0)
    stream = patterns.b_l2_to_stream(g).indices()  # memtile element (row-major k x n) per stream position
    into_l1 = patterns.b_l1_from_stream(g)
    if into_l1 is None:
        return stream
    order = np.empty_like(stream)
    order[into_l1.indices()] = stream
    return order


def padded(c: GemmConfig, call: CallPlan, b: QuantB) -> QuantB:
    """q, scales and zero points over the array's K walk and Np columns (see the module's padding)."""
    K, N = b.shape
    kw, g = call.k_walk, c.groups.group_size
    groups = groupquant.groups_along_k(kw, g)
    q = np.zeros((kw, call.Np), np.int8)
    q[:K, :N] = b.q
    s = np.zeros((groups, call.Np), BF16.host)
    s[: b.scales.shape[0], :N] = b.scales
    z = None
    if b.zero_points is not None:
        z = np.zeros((groups, call.Np), np.int8)
        z[: b.zero_points.shape[0], :N] = b.zero_points
        q[K:] = z[groupquant.group_of_rows(np.arange(K, kw), g)]  # (z - z) s = 0 in the group K ends in
    return QuantB(q, s, z, g)


def pack_objects(c: GemmConfig, call: CallPlan, b: QuantB) -> np.ndarray:
    """B's DRAM buffer: (strip, k-step, object bytes) uint8, each object as groupquant.ObjectLayout."""
    p = padded(c, call, b)
    k, n, lay = c.tiling.k, c.tiling.n, layout(c)
    steps, strips = call.k_walk // k, call.Np // n
    tiles = p.q.reshape(steps, k, strips, n).transpose(2, 0, 1, 3).reshape(strips, steps, k * n)
    q = pack_i4(tiles[..., kernel_order(c)])  # even L1 position in the low nibble
    first = np.arange(steps) * k // c.groups.group_size  # each object's first group
    rows = first[:, None] + np.arange(lay.rows)[None, :]  # (step, row)

    def rows_of(x: np.ndarray) -> np.ndarray:  # (strip, step, rows * n bytes) of bf16 rows
        part = x.astype(BF16.host)[rows].reshape(steps, lay.rows, strips, n).transpose(2, 0, 1, 3)
        return np.ascontiguousarray(part).reshape(strips, steps, -1).view(np.uint8)

    parts = [q, rows_of(p.scales)] + ([rows_of(p.zero_points)] if p.zero_points is not None else [])
    return np.ascontiguousarray(np.concatenate(parts, axis=-1))


def unpack_object(c: GemmConfig, data: np.ndarray, order: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """One object's bytes as (q k x n in tile order, scale rows, zero-point rows or None): what the
    kernel reads (the inverse of pack_objects for one object). `order`: kernel_order(c), when the
    caller holds it (it is the same for every object of a config)."""
    lay = layout(c)
    data = np.ascontiguousarray(data, np.uint8).reshape(-1)
    flat = np.empty(c.tiling.k * c.tiling.n, np.int8)
    flat[kernel_order(c) if order is None else order] = unpack_i4(data[: lay.q_bytes])
    rows = (lay.rows, c.tiling.n)
    s = data[lay.scale_offset: lay.zero_offset].view(BF16.host).reshape(rows)
    z = data[lay.zero_offset: lay.nbytes].view(BF16.host).reshape(rows) if c.groups.zero_points else None
    return flat.reshape(c.tiling.k, c.tiling.n), s, z


def dequant_object(c: GemmConfig, data: np.ndarray, order: np.ndarray | None = None) -> np.ndarray:
    """The k x n weights the kernel's dequantization makes of an object's bytes (a tile inside one group takes
    its one scale row for every row: g = k): the bf16 tile it writes into its scratch (groupquant.dequant), or,
    dequantizing straight into bfp16 (rules.dequant.to_bfp16), the exact float32 values it quantizes
    (groupquant.dequant_f32)."""
    q, s, z = unpack_object(c, data, order)
    g = min(c.groups.group_size, c.tiling.k)
    dequant = groupquant.dequant_f32 if to_bfp16(c.groups.group_size, c.kernel.convert_once) else groupquant.dequant
    return dequant(q, s, z, g)


def unpack_objects(c: GemmConfig, call: CallPlan, b_dram: np.ndarray, order: np.ndarray | None = None) -> np.ndarray:
    """The dequantized weights (k_walk x Np: bf16, or float32 for rules.dequant.to_bfp16) the kernels see, read
    back from B's DRAM buffer. `order`: kernel_order(c), when the caller holds it."""
    strips, steps = call.Np // c.tiling.n, call.k_walk // c.tiling.k
    objs = np.ascontiguousarray(b_dram, np.uint8).reshape(strips, steps, -1)
    f32 = to_bfp16(c.groups.group_size, c.kernel.convert_once)
    out = np.empty((call.k_walk, call.Np), np.float32 if f32 else BF16.host)
    order = kernel_order(c) if order is None else order
    k, n = c.tiling.k, c.tiling.n
    for j in range(strips):
        for i in range(steps):
            out[i * k:(i + 1) * k, j * n:(j + 1) * n] = dequant_object(c, objs[j, i], order)
    return out

