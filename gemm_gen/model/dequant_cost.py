"""What a W4A16 core's dequantization (groupquant.dequant, in the kernel) costs per B object, in the model's terms.

UNCALIBRATED: no hardware figure of the W4A16 kernel exists. As model/epilogue_cost.py prices the fused
epilogue, the charge counts the vector operations of the kernel's dequantization per vector of values, at one
vector operation per cycle (the one vector slot), or the load and store issue when that is longer; a trace of
the kernel on an NPU is what would calibrate it.

Once per B object (each k-step's k x n tile; the kernel's contract: the q part dequantized into a k x n bf16
scratch, then the bf16 matmul body runs on it; with rho > 1 the rho calls of a k-step share that object), the
core:
- loads the q bytes (k n / 2) and the scale (and zero-point) rows through the load units;
- per vector of V values (the s t of the device's default bf16 mmul) issues the vector operations the kernel's
  pass issues (rules/dequant.py, the one count of them: its loads and stores are charged to the load and
  store units below, the rest to the one vector slot), plus its per-group setup spread over a group's blocks;
- stores the k n bf16 values (k n 2 bytes) through the one store unit.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import BF16
from ..groupquant import object_bytes
from ..hw.devices import Device
from ..rules.dequant import DequantOps, dequant_ops

MEMORY_OPS = ("load_v", "store_v")  # the pass's operations the load and store units issue, not the vector slot


Mmul = tuple[int, int, int]


def pass_ops(dev: Device, zero_points: bool, mmul: Mmul | None = None) -> DequantOps:
    """The kernel's dequantization pass on `dev` for the config's bf16 mmul (default: the device's), as
    rules/dequant.py counts it: V = s t values per vector."""
    return dequant_ops(dev.name, zero_points, mmul)


def values_per_vector(dev: Device, mmul: Mmul | None = None) -> int:
    """Values one vector of the pass holds (V = s t of the mmul)."""
    return pass_ops(dev, False, mmul).lanes


def ops_per_vector(dev: Device, zero_points: bool, mmul: Mmul | None = None) -> int:
    """Vector-slot operations the pass issues per vector of values (its loads and stores excluded)."""
    return sum(n for name, n in pass_ops(dev, zero_points, mmul).per_vector if not name.startswith(MEMORY_OPS))


def object_cycles(dev: Device, k: np.ndarray | int, n: np.ndarray | int, group_size: int, zero_points: bool,
                  mmul: Mmul | None = None) -> np.ndarray:
    """Cycles a core spends dequantizing one k x n B object (uncalibrated): the busiest of its vector
    slot, load units and store unit."""
    isa = dev.isa
    k, n = np.asarray(k), np.asarray(n)
    values = k * n
    d = pass_ops(dev, zero_points, mmul)
    _, s, _ = mmul or dev.mmul_shape("bf16", dev.bf16_emulation_default)
    blocks_per_group = np.maximum(np.minimum(k, group_size) // s, 1)  # a group's vectors in one column block
    vector = values / d.lanes * (ops_per_vector(dev, zero_points, mmul) + d.setup_ops / blocks_per_group)
    loads = object_bytes(k, n, group_size, zero_points) / isa.vld_bytes / isa.load_units
    stores = BF16.nbytes(values) / isa.vst_bytes / isa.store_units
    return np.asarray(np.maximum(np.maximum(vector, loads), stores), dtype=np.float64)


def b_bytes_per_value(k: np.ndarray | int, n: np.ndarray | int, group_size: int, zero_points: bool) -> np.ndarray:
    """A W4A16 B object's bytes per weight value: half a byte, and its share of the scale (zero-point) rows."""
    k, n = np.asarray(k), np.asarray(n)
    return np.asarray(object_bytes(k, n, group_size, zero_points) / (k * n), dtype=np.float64)
