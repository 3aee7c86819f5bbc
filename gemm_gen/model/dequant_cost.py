"""What a W4A16 core's dequantization (groupquant.dequant, in the kernel) costs per B object, in the model's terms.

UNCALIBRATED: no hardware figure of the W4A16 kernel exists. As model/epilogue_cost.py prices the fused
epilogue, the charge counts the vector operations of the kernel's dequantization per vector of values, at one
vector operation per cycle (the one vector slot), or the load and store issue when that is longer; a trace of
the kernel on an NPU is what would calibrate it.

Once per B object (each k-step's k x n tile; the kernel's contract: the q part dequantized into a k x n bf16
scratch, then the bf16 matmul body runs on it; with rho > 1 the rho calls of a k-step share that object), the
core:
- loads the q bytes (k n / 2) and the scale (and zero-point) rows through the load units;
- per vector of values (one vector load of bf16: hw CoreIsa.vld_bytes / 2 values, 16 on aie2, 32 on aie2p)
  issues DEQUANT_OPS[target] vector operations (below), plus ZERO_POINT_OPS with zero points;
- stores the k n bf16 values (k n 2 bytes) through the one store unit.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import BF16
from ..groupquant import object_bytes
from ..hw.devices import Device

# Vector operations per vector of values (guesses of the right order; UNCALIBRATED): unpack the int4 nibbles
# to 8 bits and sign-extend them to 16 (one unpack each), convert the integers to fp32 (two: into the
# accumulator, then its float conversion), arrange the vector's scales in the tile's element order (one
# shuffle: a B block's rows share its columns' scales), multiply by them (one fp32 mul) and round to bf16 (one
# to_vector<bfloat16>). aie2p's wider vectors (64-byte loads) take the same operations on twice the values.
DEQUANT_OPS = {"aie2": 7, "aie2p": 7}
ZERO_POINT_OPS = 1  # the fp32 subtraction of the zero point, before the scale


def values_per_vector(dev: Device) -> int:
    """bf16 values one vector of the dequantization holds: one vector load's worth."""
    return dev.isa.vld_bytes // BF16.bytes


def ops_per_vector(dev: Device, zero_points: bool) -> int:
    """Vector operations the dequantization issues per vector of values (uncalibrated)."""
    return DEQUANT_OPS[dev.aie_target] + (ZERO_POINT_OPS if zero_points else 0)


def object_cycles(dev: Device, k: np.ndarray | int, n: np.ndarray | int, group_size: int, zero_points: bool
                  ) -> np.ndarray:
    """Cycles a core spends dequantizing one k x n B object (uncalibrated): the busiest of its vector
    slot, load units and store unit."""
    isa = dev.isa
    k, n = np.asarray(k), np.asarray(n)
    values = k * n
    vector = values / values_per_vector(dev) * ops_per_vector(dev, zero_points)
    loads = object_bytes(k, n, group_size, zero_points) / isa.vld_bytes / isa.load_units
    stores = BF16.nbytes(values) / isa.vst_bytes / isa.store_units
    return np.asarray(np.maximum(np.maximum(vector, loads), stores), dtype=np.float64)


def b_bytes_per_value(k: np.ndarray | int, n: np.ndarray | int, group_size: int, zero_points: bool) -> np.ndarray:
    """A W4A16 B object's bytes per weight value: half a byte, and its share of the scale (zero-point) rows."""
    k, n = np.asarray(k), np.asarray(n)
    return np.asarray(object_bytes(k, n, group_size, zero_points) / (k * n), dtype=np.float64)
