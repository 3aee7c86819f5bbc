"""Seeded test inputs chosen so that a PASS means something.

bf16, "exact" (the default): integers i in [-b, b] times 2^-p, plus a few exact zeros, with
b = min(127, isqrt((2^24 - 1) / K)) and 2^p the power of two at or below b (values about 1). Every
product is a multiple of 2^-2p, every sum of up to K of them (and every bf16 rounding of one, and C
carried between kernel calls) a multiple of 2^-2p below 2^(24-2p): all partial sums are exact in
fp32 whatever the order, so the NPU's unpublished fp32 accumulation order cannot change a bit, and
a run on hardware can be checked bit-exact like the simulator. They are exact in bfp16ebs8 too (a
block's mantissas are i 2^(6 - floor(log2 max|i|)), below 128), so bf16 through the bfp16
datapath loses nothing and never meets the 127.5 rounding tie at the top of a block.

bf16, "wide": normal values +-(1 + f/128) * 2^e with e in [-4, 0], plus a few exact zeros: every
value a multiple of 2^-11 below 2, every sum exact in fp64 (not fp32) whatever the order. They
exercise bfp16 quantization (shared exponents that drop bits) and fp32 ordering; tests that must see
lossy conversions use them.

integers: uniform values in [-b, b], sparsified when needed, scaled to K and the output type so
that C stays mostly inside its range (outputs that mostly saturate would prove nothing) and the
acc32 accumulator never overflows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .dtypes import BF16, BFP16, I4, DType, dtype
from .groupquant import groups_along_k
from .quant_b import QuantB

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


FP32_SIGNIFICAND = 24
DRAW_CHUNK = 1 << 20  # uniform doubles drawn at a time (one 64-bit draw each: pieces make the same stream)
INPUT_FAMILIES = ("exact", "wide")


def exact_bound(K: int) -> int:
    """The largest integer b such that K products of values in [-b, b] sum below 2^24 (fp32-exact)."""
    return max(1, min(127, math.isqrt(((1 << FP32_SIGNIFICAND) - 1) // max(K, 1))))


def bf16_exact_values(rng: np.random.Generator, shape: tuple[int, ...], K: int) -> np.ndarray:
    """i 2^-p, i uniform in [-b, b] (b = exact_bound(K)), a few more zeros: fp32-exact sums."""
    b = exact_bound(K)
    p = b.bit_length() - 1
    i = rng.integers(-b, b + 1, size=shape, dtype=np.int64).astype(np.int8)  # |i| <= 127 (the draws: int64's)
    flat = i.reshape(-1)
    for at in range(0, flat.size, DRAW_CHUNK):  # doubles drawn a piece at a time: the same stream, less memory
        flat[at:at + DRAW_CHUNK] *= rng.random(min(DRAW_CHUNK, flat.size - at)) >= ZERO_FRACTION
    v = i.astype(np.float32)
    v *= np.float32(2.0**-p)  # exact, as ldexp
    return v.astype(BF16.host)


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
                seed: int = 0, dtype_b: str | DType | None = None, family: str = "exact"
                ) -> tuple[np.ndarray, np.ndarray]:
    """Logical A (M x K) and B (K x N) in the host types of dtype_in and dtype_b (default dtype_in).

    Float inputs come from `family` ("exact": fp32-exact sums, the default; "wide": exact in fp64
    only, lossy in bfp16). bfp16 operands get the bf16 values as fp32; the host quantizes them
    (gemm_gen.design.host_buffers)."""
    t_in, t_out = dtype(dtype_in), dtype(dtype_out)
    t_b = dtype(dtype_b) if dtype_b is not None else t_in
    rng = np.random.default_rng(seed)
    if t_in.is_float and t_b.is_packed:  # W4A16: bf16 A, int4 q (group scales: group_weights)
        a, _ = make_inputs(M, K, N, t_in, t_out, seed, family=family)
        return a, rng.integers(t_b.min, t_b.max + 1, size=(K, N), dtype=np.int64).astype(t_b.host)
    if t_in.is_float:
        for t in (t_in, t_b):
            if t not in (BF16, BFP16):
                raise ValueError(f"no float input generator for {t}")
        if family not in INPUT_FAMILIES:
            raise ValueError(f"unknown input family {family!r}: use one of {INPUT_FAMILIES}")

        def values(shape: tuple[int, int]) -> np.ndarray:
            return bf16_exact_values(rng, shape, K) if family == "exact" else bf16_values(rng, shape)

        return values((M, K)).astype(t_in.host, copy=False), values((K, N)).astype(t_b.host, copy=False)
    dist = int_distribution(t_in, t_out, K)
    a = dist.sample(rng, (M, K), t_in.host)
    if t_b.is_packed:  # int4 weights: the whole range, -8 (whose sign extension a wrong unpack loses) included
        return a, rng.integers(t_b.min, t_b.max + 1, size=(K, N), dtype=np.int64).astype(t_b.host)
    if t_b != t_in:  # a mixed mmul's narrower B (i16 x i8): drawn for its own type, within A's bound
        return a, int_distribution(t_b, t_out, K).sample(rng, (K, N), t_b.host)
    return a, dist.sample(rng, (K, N), t_in.host)


SCALE_EXP = -4  # W4A16 scales: (1 + f/128) 2^-4, f uniform in [0, 128): every bf16 significand, positive


def group_weights(q: np.ndarray, group_size: int, zero_points: bool, seed: int = 0) -> QuantB:
    """W4A16 weights of int4 values q (K x N): a bf16 scale per group of K rows and column (all 8
    significand bits used, so (q - z) s rounds to bf16 for some weights: a loss the report shows) and,
    with zero points, integers in [-8, 7]."""
    rng = np.random.default_rng([seed, 4])
    shape = (groups_along_k(q.shape[0], group_size), q.shape[1])
    frac = rng.integers(0, 128, size=shape)
    scales = np.ldexp(1 + frac / 128, SCALE_EXP).astype(np.float32).astype(BF16.host)
    z = rng.integers(I4.min, I4.max + 1, size=shape).astype(np.int8) if zero_points else None
    return QuantB(np.asarray(q, np.int8), scales, z, group_size)
