"""What a W4A16 core's dequantization (groupquant.dequant, in the kernel) costs per B object, in the model's terms.

UNCALIBRATED: no hardware figure of the W4A16 kernel exists. As model/epilogue_cost.py prices the fused
epilogue, the charge counts the vector operations of the kernel's dequantization per vector of values, at one
vector operation per cycle (the one vector slot), or the load and store issue when that is longer; a trace of
the kernel on an NPU is what would calibrate it.

Once per B object (each k-step's k x n tile; with rho > 1 the rho calls of a k-step share that object), the
core runs the kernel's pass (spec/rules/dequant.py, the one count of its operations): the bf16 pass of the scalar
kernel (the q part dequantized into a k x n bf16 scratch, then the bf16 body), or npu2's convert-once pass
(straight into the k x n bfp16 tiles the convert-once body reads: `to_bfp16`). Per vector of V values it
- loads the int4 bytes and its columns' scales (and zero points): the pass's load operations, on the load units;
- issues the pass's vector-slot operations, one per cycle;
- stores V bf16 values, or pushes one 72-byte bfp16 tile, through the one store unit;
at the busiest of the three, and each entry of the pass's one software-pipelined loop (one per object) fills and
drains rules.dequant.PASS_STAGES - 1 trips (assumed).
"""

from __future__ import annotations

import numpy as np

from ..facts.devices import Device
from ..facts.dtypes import BFP16
from ..facts.groupquant import object_bytes
from ..spec.rules.dequant import PASS_STAGES, TRIP_ROWS, DequantOps, dequant_ops

Mmul = tuple[int, int, int]


def pass_ops(dev: Device, zero_points: bool, mmul: Mmul | None = None, to_bfp16: bool = False,
             rows: int = TRIP_ROWS) -> DequantOps:
    """The kernel's dequantization pass on `dev`: the bfp16 one (`to_bfp16`), else the bf16 one for the config's
    bf16 mmul (default: the device's), `rows` K block rows per trip, as spec/rules/dequant.py counts it."""
    return dequant_ops(dev.name, zero_points, mmul, to_bfp16, rows)


def values_per_vector(dev: Device, mmul: Mmul | None = None, to_bfp16: bool = False) -> int:
    """Values one vector of the pass holds (V = s t of the mmul, or a bfp16 tile's 64)."""
    return pass_ops(dev, False, mmul, to_bfp16).lanes


def ops_per_vector(dev: Device, zero_points: bool, mmul: Mmul | None = None, to_bfp16: bool = False,
                   rows: int = TRIP_ROWS) -> float:
    """Vector-slot operations the pass issues per vector of values (its loads and stores excluded)."""
    return pass_ops(dev, zero_points, mmul, to_bfp16, rows).vector_ops


def vector_cycles(dev: Device, zero_points: bool, mmul: Mmul | None = None, to_bfp16: bool = False,
                  rows: int = TRIP_ROWS) -> float:
    """Issue cycles of one vector in the pass's steady state: the busiest of the vector slot, the load units and
    the store unit."""
    isa = dev.isa
    d = pass_ops(dev, zero_points, mmul, to_bfp16, rows)
    return max(d.vector_ops, d.loads / isa.load_units, d.out_bytes / isa.vst_bytes / isa.store_units)


def pass_rows(dev: Device, k: np.ndarray | int, group_size: int, mmul: Mmul | None = None,
              to_bfp16: bool = False) -> np.ndarray:
    """K block rows per trip of the pass over k-row objects (rules.dequant.trip_rows, over arrays)."""
    s = BFP16.tile_rows if to_bfp16 else (mmul or dev.mmul_shape("bf16", dev.bf16_emulation_default))[1]
    return np.clip(np.minimum(np.asarray(k), group_size) // s, 1, TRIP_ROWS)


def object_cycles(dev: Device, k: np.ndarray | int, n: np.ndarray | int, group_size: int, zero_points: bool,
                  mmul: Mmul | None = None, to_bfp16: bool = False) -> np.ndarray:
    """Cycles a core spends dequantizing one k x n B object (uncalibrated): its vectors at vector_cycles each,
    and the one entry's fill and drain of the pass's pipelined loop."""
    k, n = np.asarray(k), np.asarray(n)
    rows = pass_rows(dev, k, group_size, mmul, to_bfp16)
    out = np.zeros(np.broadcast(k, n).shape, dtype=np.float64)
    for r in range(1, TRIP_ROWS + 1):
        d = pass_ops(dev, zero_points, mmul, to_bfp16, r)
        per_vector = vector_cycles(dev, zero_points, mmul, to_bfp16, r)
        fill = (PASS_STAGES - 1) * d.vectors_per_trip * per_vector
        out = np.where(rows == r, k * n / d.lanes * per_vector + fill, out)
    return out


def b_bytes_per_value(k: np.ndarray | int, n: np.ndarray | int, group_size: int, zero_points: bool) -> np.ndarray:
    """A W4A16 B object's bytes per weight value: half a byte, and its share of the scale (zero-point) rows."""
    k, n = np.asarray(k), np.asarray(n)
    return np.asarray(object_bytes(k, n, group_size, zero_points) / (k * n), dtype=np.float64)
