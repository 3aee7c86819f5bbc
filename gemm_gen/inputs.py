"""Seeded test inputs chosen so that a PASS means something.

bf16: normal values +-(1 + f/128) * 2^e with e in [-4, 0], plus a few exact zeros. Every value is
a multiple of 2^-11 below 2, so every product is a multiple of 2^-22 below 4, and every partial
sum (and every bf16 rounding of one) stays a multiple of 2^-22 far below 2^31: all sums are exact
in fp64 whatever the order, which makes the reference independent of BLAS blocking.

integers: uniform values in [-b, b], sparsified when needed, scaled to K and the output type so
that C stays mostly inside its range (outputs that mostly saturate would prove nothing) and the
acc32 accumulator never overflows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .dtypes import BF16, BFP16, DType, dtype

BF16_MIN_EXP, BF16_MAX_EXP = -4, 0
ZERO_FRACTION = 0.03


@dataclass(frozen=True)
class IntDistribution:
    bound: int  # values in [-bound, bound]
    density: float  # probability that a value is drawn at all (else 0)

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...], host: np.dtype) -> np.ndarray:
        x = rng.integers(-self.bound, self.bound + 1, size=shape, dtype=np.int64)
        if self.density < 1.0:
            x *= rng.random(shape) < self.density
        return x.astype(host)


def int_distribution(dtype_in: DType, dtype_out: DType, K: int) -> IntDistribution:
    """Pick integer inputs whose products sum to about a quarter of the output range."""
    if dtype_out.max >= (1 << 31) - 1:
        # i32 out: the only limit is acc32; bound the worst case K * b^2
        bound = min(dtype_in.max, math.isqrt(((1 << 31) - 1) // max(K, 1)))
        return IntDistribution(max(bound, 1), 1.0)
    target = dtype_out.max / 4  # aim std(C) here: a few sigma fit in range
    sqrt_k = math.sqrt(max(K, 1))
    # uniform ints in [-b, b] have variance b(b+1)/3; a sum of K products has std sqrt(K) b(b+1)/3
    bound = 1
    while bound < dtype_in.max and math.sqrt(max(K, 1)) * (bound + 1) * (bound + 2) / 3 <= target:
        bound += 1
    std_dense = sqrt_k * bound * (bound + 1) / 3
    # with density p the product variance shrinks by p^2
    density = min(1.0, target / std_dense)
    return IntDistribution(bound, density)


def bf16_values(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """+-(1 + f/128) * 2^e, e in [BF16_MIN_EXP, BF16_MAX_EXP], built as bf16 bit patterns.

    One 32-bit draw per value: bit 0 sign, bits 1-7 fraction, bits 8-15 exponent, 16-31 zeroing.
    """
    r = rng.integers(0, 1 << 32, size=shape, dtype=np.uint32)
    sign = (r & 1) << 15
    frac = (r >> 1) & 0x7F
    exp = ((r >> 8) & 0xFF) % (BF16_MAX_EXP - BF16_MIN_EXP + 1) + (127 + BF16_MIN_EXP)
    keep = (r >> 16) >= int(ZERO_FRACTION * 65536)
    return ((sign | (exp << 7) | frac) * keep).astype(np.uint16).view(BF16.host)


def make_inputs(M: int, K: int, N: int, dtype_in: str | DType, dtype_out: str | DType,
                seed: int = 0, dtype_b: str | DType | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Logical A (M x K) and B (K x N) in the host types of dtype_in and dtype_b (default dtype_in).

    bfp16 operands get the bf16 values as fp32; the host quantizes them (gemm_gen.hostdata)."""
    t_in, t_out = dtype(dtype_in), dtype(dtype_out)
    t_b = dtype(dtype_b) if dtype_b is not None else t_in
    rng = np.random.default_rng(seed)
    if t_in.is_float:
        for t in (t_in, t_b):
            if t not in (BF16, BFP16):
                raise ValueError(f"no float input generator for {t}")
        return bf16_values(rng, (M, K)).astype(t_in.host), bf16_values(rng, (K, N)).astype(t_b.host)
    dist = int_distribution(t_in, t_out, K)
    return dist.sample(rng, (M, K), t_in.host), dist.sample(rng, (K, N), t_in.host)
