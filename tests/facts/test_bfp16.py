"""bfp16ebs8 against an independent scalar transcription of mlir-aie's host helper (helper.h)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemm_gen.facts.bfp16 import BLOCK_BYTES, decode, encode, pack, quantize, unpack
from gemm_gen.facts.rounding import Rounding


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def helper_encode(block: list[float]) -> tuple[int, list[int]]:
    """floatToBfp16 of mlir-aie's block_datatypes/helper.h, scalar."""
    bits = [f32_bits(x) for x in block]
    exps = [(b >> 23) & 0xFF for b in bits]
    E = max((e for e in exps if e != 0xFF), default=0)
    out = []
    for b, e in zip(bits, exps):
        if e == 0xFF:  # Inf/NaN: left out of the exponent; its mantissa is not specified, use 0
            out.append(0)
            continue
        m24 = (b & 0x7FFFFF) | (0x800000 if e != 0 else 0)
        m = ((-m24) & 0xFFFFFFFF) if b >> 31 else m24  # 32-bit two's complement
        q = (m >> 17) & 0xFF  # (uint8)(m >> 17)
        q = q - 256 if q >= 128 else q  # (int8)
        shift = E - e
        q = (-1 if q < 0 else 0) if shift >= 32 else q >> shift  # arithmetic shift
        out.append(q)
    return E, out


def as_f32(values):
    return np.array(values, dtype=np.float32)


EDGE_BLOCKS = [
    [0.0] * 8,  # zeros
    [-0.0, 0.0, -0.0, 0.0, 0.0, -0.0, 0.0, 0.0],
    [1.0, -1.0, 0.5, -0.5, 0.25, -0.25, 2.0, -2.0],  # negatives, mixed exponents
    [1.5000001, -1.5000001, 1.9999999, -1.9999999, 3.0, -3.0, 0.1, -0.1],  # values that truncate
    [3.4e38, -3.4e38, 1.0, 1e-30, -1e-30, 2.0**127, -(2.0**127), 0.0],  # the largest exponents
    [1.2e-38, -1.2e-38, 2.0**-126, -(2.0**-126), 1.0e-38, 0.0, 2.0**-125, -(2.0**-125)],  # the smallest normals
    [1e-40, -1e-40, 2.0**-149, 0.0, 0.0, 0.0, 0.0, 0.0],  # denormals only
    [1.0, 2.0**-7, 2.0**-8, -(2.0**-8), 2.0**-30, -(2.0**-30), 3.0, 7.0],  # shifted out below the block max
    [float("inf"), 1.0, -2.0, 0.5, float("-inf"), 0.25, 0.125, float("nan")],  # Inf/NaN left out of E
]


@pytest.mark.parametrize("block", EDGE_BLOCKS, ids=range(len(EDGE_BLOCKS)))
def test_encode_matches_the_helper_on_edge_cases(block):
    exps, mants = encode(as_f32(block))
    E, q = helper_encode([float(x) for x in as_f32(block)])
    assert int(exps[0]) == E
    finite = [i for i, x in enumerate(block) if np.isfinite(x)]
    assert [int(mants[i]) for i in finite] == [q[i] for i in finite]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), min_size=8, max_size=8))
def test_encode_matches_the_helper(block):
    exps, mants = encode(as_f32(block))
    E, q = helper_encode([float(x) for x in as_f32(block)])
    assert int(exps[0]) == E and [int(v) for v in mants] == q


def test_decode_is_q_times_two_to_e_minus_127_over_64():
    exps = np.array([127, 130, 0], dtype=np.uint8)
    mants = np.array([64, -64, 1, -128, 127, 0, 32, -1] + [5] * 8 + [1] * 8, dtype=np.int8)
    got = decode(exps, mants)
    assert got[0] == 1.0 and got[1] == -1.0 and got[2] == 1 / 64 and got[3] == -2.0
    assert got[8] == 5 * 2.0**3 / 64
    assert got[16] == 2.0**-127 / 64


def test_round_trip_and_idempotence():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(8 * 64) * np.exp2(rng.integers(-20, 20, 8 * 64))).astype(np.float32)
    q = quantize(x)
    assert np.array_equal(quantize(q), q)  # values on the grid stay put
    exps, mants = encode(q)
    assert np.array_equal(decode(exps, mants), q)
    # each value moved down by less than one step of its block's grid (floor = truncation)
    step = np.repeat(np.exp2(exps.astype(np.float64) - 133), 8)
    x64, q64 = x.astype(np.float64), q.astype(np.float64)
    assert np.all(q64 <= x64) and np.all(x64 - q64 < step)


def test_the_core_rounding_mode_rounds_to_nearest():
    # block maximum below 2: E = 127, so the grid step is 2^(127 - 127) / 64 = 1/64
    x = as_f32([1.0, 1 + 3 / 256, -(1 + 1 / 256), 1 + 3 / 128, 0, 0, 0, 0])
    floor = quantize(x, rounding=Rounding.FLOOR)
    even = quantize(x, rounding=Rounding.CONV_EVEN)
    assert floor[1] == 1.0 and even[1] == 1 + 1 / 64  # 0.75 of a step: floor down, nearest up
    assert floor[2] == -(1 + 1 / 64) and even[2] == -1.0  # floor goes toward -inf
    assert floor[3] == 1 + 1 / 64 and even[3] == 1 + 2 / 64  # a tie (q = 65.5) goes to the even 66


def test_rounding_up_at_the_block_maximum_saturates():
    x = as_f32([1.99999, 0, 0, 0, 0, 0, 0, 0])  # q = 127.99 rounds to 128, beyond int8
    exps, mants = encode(x, Rounding.CONV_EVEN)
    assert int(mants[0]) == 127


def test_nine_byte_blocks():
    x = as_f32([1.0, -1.0, 0.5, 0, 0, 0, 0, 3.0] * 2)
    exps, mants = encode(x)
    data = pack(exps, mants)
    assert len(data) == 2 * BLOCK_BYTES and data[0] == int(exps[0])  # the exponent byte comes first
    e2, m2 = unpack(data)
    assert np.array_equal(e2, exps) and np.array_equal(m2, mants)
    with pytest.raises(ValueError, match="whole blocks of 8"):
        encode(as_f32([1.0] * 7))


def test_blocks_whose_maximum_rounds_past_127_are_counted():
    """The largest value of a block is 64..127.99 times its block's scale: 127.5 and up rounds to 128
    under round-to-nearest, which encode() clamps to 127 (unpublished on the core): counted."""
    from gemm_gen.facts.bfp16 import clamped_blocks, encode

    top = np.array([[127.75 / 64, 0.5, -1.0, 0.25, 0.0, 0.125, 1.0, 0.75]], dtype=np.float32)
    ok = np.array([[127.25 / 64, 0.5, -1.0, 0.25, 0.0, 0.125, 1.0, 0.75]], dtype=np.float32)
    assert clamped_blocks(top, rounding=Rounding.CONV_EVEN) == 1 and encode(top, Rounding.CONV_EVEN)[1][0, 0] == 127
    assert clamped_blocks(top, rounding=Rounding.FLOOR) == 0  # truncation never rounds up
    assert clamped_blocks(ok, rounding=Rounding.CONV_EVEN) == 0
    both = np.concatenate([top, ok], axis=1)
    assert clamped_blocks(both, rounding=Rounding.CONV_EVEN) == 1
    assert clamped_blocks(both.T, axis=0, rounding=Rounding.CONV_EVEN) == 1
