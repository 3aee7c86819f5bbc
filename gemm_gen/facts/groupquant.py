"""W4A16 weights: int4 values with one bf16 scale (and optionally a zero point) per group of
`group_size` rows of K and per column of N. The one definition of their dequantization and of
where a B object (one k x n tile of one k-step, as a core receives it) keeps its scales.

A B object is, in bytes: the k x n int4 values in the element order in which the bf16 kernel reads
its B tile (the order the bf16 design's memtile -> core walk delivers), two per byte, the even
element in the low nibble (`dtypes.pack_i4`); then `scale_rows(k, g)` rows of n bf16 scales,
row-major; then, with zero points, as many rows of n bf16 zero points. The kernel dequantizes the
values once per object into a k x n bf16 tile of that same order (`dequant`), and multiplies A by it as
the bf16 kernel multiplies A by B; npu2's convert-once kernel instead quantizes the exact products
(`dequant_f32`) straight into bfp16 tiles, their one rounding (gemm_gen/facts/numerics.py's bfp16 quantization
of B).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .dtypes import BF16, I4
from .errors import ConfigError, opt

GROUP_SIZES = (32, 64, 128)  # along K; what AWQ / GPTQ checkpoints and the NPU stacks use
# The scales the core can use. Its float datapath flushes subnormals (AM020 "Floating-Point Vector Unit": no
# denormalized numbers; UG1603: flushed to zero), so a nonzero scale must be normal; and the kernel forms
# (136 + q) s with 136 + q <= 143 in fp32 (templates/mm.cc.j2), so 143 |s| must stay finite: the largest such
# bf16 is 0x7BE5 (about 2.378e36).
MIN_SCALE = 2.0 ** -126
MAX_SCALE = float(np.array([0x7BE5], np.uint16).view(BF16.host)[0])


def check_group_size(group_size: int) -> None:
    if group_size not in GROUP_SIZES:
        raise ConfigError(f"{opt('group_size', group_size)}: int4 weights take one scale per 32, 64 or 128 rows of "
                          "K", f"use {opt('group_size', GROUP_SIZES[0])} | {' | '.join(map(str, GROUP_SIZES[1:]))}")


def tile_k_ok(k: Any, group_size: int) -> Any:
    """Whether a B object of k rows covers whole groups of K, or lies inside one group (an int, or per tile of an
    array: the search space's rule)."""
    return (k % group_size == 0) | (group_size % k == 0)


def check_tile_k(k: int, group_size: int) -> None:
    """A B object covers whole groups, or lies inside one group (tile_k_ok)."""
    if not tile_k_ok(k, group_size):
        raise ConfigError(f"{opt('k', k)} with {opt('group_size', group_size)}: a B tile must cover whole groups of "
                          "K or lie inside one", f"use a k that divides {group_size} or is a multiple of it")


def groups_along_k(K: int, group_size: int) -> int:
    """Scale rows of a K-row weight matrix: one per group of K, the last one possibly partial."""
    return -(-K // group_size)


def scale_rows(k: int, group_size: int) -> int:
    """Rows of scales in one k-row B object: one per group it covers (one when k <= group_size)."""
    check_tile_k(k, group_size)
    return max(1, k // group_size)


@dataclass(frozen=True)
class ObjectLayout:
    """Byte offsets of the parts of one k x n B object."""

    k: int
    n: int
    group_size: int
    zero_points: bool

    @property
    def rows(self) -> int:
        return scale_rows(self.k, self.group_size)

    @property
    def q_bytes(self) -> int:
        return self.k * self.n // I4.block_elems

    @property
    def scale_offset(self) -> int:
        return self.q_bytes

    @property
    def zero_offset(self) -> int:
        return self.scale_offset + self.rows * self.n * BF16.block_bytes

    @property
    def nbytes(self) -> int:
        return self.zero_offset + (self.rows * self.n * BF16.block_bytes if self.zero_points else 0)


def object_bytes(k: Any, n: Any, group_size: int, zero_points: bool) -> Any:
    """ObjectLayout(k, n, group_size, zero_points).nbytes over arrays of tiles (the rules' vectorized
    form; tiles that cut a group are refused by check_tile_k, not here)."""
    k, n = np.asarray(k), np.asarray(n)
    rows = np.maximum(1, k // group_size)
    return k * n // I4.block_elems + rows * n * BF16.block_bytes * (2 if zero_points else 1)


def group_of_rows(rows: np.ndarray | int, group_size: int) -> np.ndarray:
    """The scale row (group) of each row of K."""
    return np.asarray(rows) // group_size


def scales_out_of_range(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(too small, too large): masks of the bf16 scales the core cannot use (MIN_SCALE, MAX_SCALE)."""
    a = np.abs(np.asarray(s, np.float64))
    return (a > 0) & (a < MIN_SCALE), a > MAX_SCALE


def dequant(q: np.ndarray, scales: np.ndarray, zero_points: np.ndarray | None, group_size: int) -> np.ndarray:
    """bf16 weights of int4 values `q` (K x N, in [-8, 7]) with `scales` (ceil(K / g) x N, bf16 values)
    and optional integer `zero_points` of the same shape (in [-8, 7]: a uint4 checkpoint's q - 8 and
    z - 8 give the same q - z): w = bf16_rne((q - z) * s), one rounding
    ((q - z) * s is exact in fp32: at most 5 integer bits times bf16's 8-bit significand). A zero weight is
    +0 whatever the scale's sign: the kernel computes (q - z) s as (136 + q) s - (136 + z) s, and IEEE
    gives +0 for the difference of two equal values (templates/mm.cc.j2)."""
    return dequant_f32(q, scales, zero_points, group_size).astype(BF16.host)


def dequant_f32(q: np.ndarray, scales: np.ndarray, zero_points: np.ndarray | None, group_size: int) -> np.ndarray:
    """float32 (q - z) s, exact (at most 5 integer bits times bf16's 8-bit significand), a zero weight +0 as in
    `dequant`: what npu2's convert-once W4A16 kernel (templates/mm_bfp16.cc.j2) rounds once, into bfp16."""
    d, s = _offsets_and_scales(q, scales, zero_points, group_size, np.float32)
    return d * s + np.float32(0.0)  # + 0: -0 becomes +0, nothing else changes


def dequant_exact(q: np.ndarray, scales: np.ndarray, zero_points: np.ndarray | None, group_size: int
                  ) -> np.ndarray:
    """float64 (q - z) * s: the weights a user's A @ dequant(B) means, before any rounding."""
    d, s = _offsets_and_scales(q, scales, zero_points, group_size, np.float64)
    return d * s


def _offsets_and_scales(q: np.ndarray, scales: np.ndarray, zero_points: np.ndarray | None, group_size: int,
                        t: type[np.floating]) -> tuple[np.ndarray, np.ndarray]:
    """(q - z, each row's scale row), K x N in float type t (exact in float32 and float64 alike)."""
    q = np.asarray(q)
    g = group_of_rows(np.arange(q.shape[0]), group_size)
    d = q.astype(t)
    if zero_points is not None:
        d = d - np.asarray(zero_points).astype(t)[g]
    return d, np.asarray(scales).astype(BF16.host).astype(t)[g]
