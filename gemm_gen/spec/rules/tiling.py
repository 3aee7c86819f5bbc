"""The tiling's granularity: what m, k, n, k_mt and T_MA = m / rho must be multiples of.

Our kernels compute 2 x 2 blocks of r x s x t mmuls, so m and T_MA are multiples of 2r, k of s and
n of 2t; k_mt is whole k-steps; a bfp16 GEMM moves whole 8 x 8 tiles, so its m, k, n and k_mt are
multiples of 8 as well. A bfp16 kernel (templates/mm_bfp16.cc.j2: a bfp16 precision, or bf16 converted
once) reads A in 2 x 1, B in 1 x 2 and C in 2 x 2 super-blocks of 8 x 8 tiles (docs/bfp16_kernels.md),
so its T_MA = m / rho and n are multiples of 16 whatever its mmul shape. GemmConfig's divisibility
check reports the first broken `conditions` entry; the tuner enumerates only tilings on the
`m_step`, `k_step` and `n_step` grids, which are exactly the ones `divisible` accepts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...facts.devices import MmulShape
from ...facts.dtypes import dtype
from ...facts.precision import BFP16
from . import Ints
from .kernel_variant import KERNEL_EXPANSION
from .l1 import a_rows


@dataclass(frozen=True)
class Steps:
    """The quanta of a tiling for one mmul shape and precision."""

    block: int  # bfp16: the 8 x 8 tile every size is whole of; 1 for scalar types
    pair_r: int  # 2r: m and T_MA
    s: int  # k
    pair_t: int  # 2t: n
    super_block: int = 1  # a bfp16 kernel's super-block side (16 values: 2 tiles): T_MA and n; 1 otherwise


SUPER_BLOCK_TILES = 2  # tiles per side of the bfp16 kernels' 2 x 1 / 1 x 2 / 2 x 2 super-blocks


def steps(mmul: MmulShape, block: bool, block_kernel: bool = False) -> Steps:
    """The quanta for one mmul shape; `block`: bfp16 data in the DMAs (8 x 8 tiles), `block_kernel`:
    the bfp16 kernel (its super-blocks)."""
    r, s, t = mmul
    tile = dtype(BFP16).tile_rows
    return Steps(tile if block else 1, KERNEL_EXPANSION * r, s, KERNEL_EXPANSION * t,
                 SUPER_BLOCK_TILES * tile if block_kernel else 1)


def conditions(st: Steps, m: Ints, k: Ints, n: Ints, k_mt: Ints, rho: Ints) -> list[tuple[str, Ints]]:
    """Each granularity rule by name, with whether the tiling keeps it, in the order the config
    reports them (bfp16 tiles first)."""
    out = [(f"{name} bfp16", value % st.block == 0) for name, value in (("m", m), ("k", k), ("n", n), ("k_mt", k_mt))]
    out += [("m super-block", m % st.super_block == 0), ("T_MA super-block", a_rows(m, rho) % st.super_block == 0),
            ("n super-block", n % st.super_block == 0)]
    return out + [("m", m % st.pair_r == 0), ("T_MA", a_rows(m, rho) % st.pair_r == 0), ("k", k % st.s == 0),
                  ("n", n % st.pair_t == 0), ("k_mt", k_mt % k == 0)]


def divisible(st: Steps, m: Ints, k: Ints, n: Ints, k_mt: Ints, rho: Ints) -> Ints:
    """Whether every granularity rule holds (an array: per candidate)."""
    return np.logical_and.reduce([ok for _, ok in conditions(st, m, k, n, k_mt, rho)])


def m_step(st: Steps, rho: int) -> int:
    """The grid of m for one rho: T_MA = m / rho whole 2r blocks and super-blocks (and m whole bfp16 tiles)."""
    return math.lcm(st.pair_r * rho, st.block, st.super_block * rho)


def k_step(st: Steps) -> int:
    return math.lcm(st.s, st.block)


def n_step(st: Steps) -> int:
    return math.lcm(st.pair_t, st.block, st.super_block)
