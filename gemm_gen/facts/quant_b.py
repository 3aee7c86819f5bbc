"""W4A16 weights as a user gives them: int4 values with a bf16 scale (and optionally a zero point) per group
of K rows and column (gemm_gen/facts/groupquant.py defines their dequantization). A fact of the call, below any
design: b_objects lays them out as the B objects a design's cores receive."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import groupquant


@dataclass(frozen=True, eq=False)
class QuantB:
    """W4A16 weights as the user gives them: q (K x N, int8 in [-8, 7]), scales (ceil(K / g) x N, bf16)
    and optional zero points (same shape, int8 in [-8, 7])."""

    q: np.ndarray
    scales: np.ndarray
    zero_points: np.ndarray | None
    group_size: int

    @property
    def shape(self) -> tuple[int, int]:
        return int(self.q.shape[0]), int(self.q.shape[1])

    def dequant(self, to_bfp16: bool = False) -> np.ndarray:
        """The weights the kernel's dequantization hands on: bf16 (groupquant.dequant: one RNE rounding); or, for
        a kernel that quantizes them straight to bfp16 (`to_bfp16`: rules.dequant.to_bfp16), their exact float32
        values (groupquant.dequant_f32), which the numerics' bfp16 quantization of B then rounds once."""
        f = groupquant.dequant_f32 if to_bfp16 else groupquant.dequant
        return f(self.q, self.scales, self.zero_points, self.group_size)

    def exact(self) -> np.ndarray:
        """float64 (q - z) s: the weights the user means."""
        return groupquant.dequant_exact(self.q, self.scales, self.zero_points, self.group_size)
