"""The numerics' bit tests (issue 33: one pass over the bits for the grid test and the lowest set bit) against
oracles that read each value as an exact fraction, never the code under test: bfp16.on_grid / grid_lowest (every
block of 8 a whole multiple of its step 2^(E - 133), finite, no denormal, no -0), numerics._lowest_bits (the
exponent of the lowest set bit over the nonzero values) and Product's comparison of its operands (_equal)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from gemm_gen.facts.bfp16 import BLOCK, NO_BITS, grid_lowest, on_grid
from gemm_gen.facts.numerics import _equal, _lowest_bits

SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-45, 3.4e38, 1.0, -1.0, 2.0**-126, 2.0**-149,
                     127 * 2.0**-6, 128 * 2.0**-6, 3.0, -0.75], np.float32)


def _low(x: float) -> int | None:
    """The exponent of the lowest set bit of a nonzero finite x, from its exact ratio p / 2^q."""
    if x == 0:
        return None
    p, q = float(x).as_integer_ratio()
    p = abs(p)
    return (p & -p).bit_length() - 1 - (q.bit_length() - 1)


def _lowest_oracle(x: np.ndarray) -> int:
    lows = [low for v in x.reshape(-1).tolist() if (low := _low(v)) is not None]
    return min(lows, default=NO_BITS)


def _grid_oracle(x: np.ndarray, axis: int) -> bool:
    moved = np.moveaxis(x, axis, -1)
    moved = np.pad(moved, [(0, 0)] * (moved.ndim - 1) + [(0, -moved.shape[-1] % BLOCK)])
    for block in moved.reshape(-1, BLOCK).tolist():
        if any(not np.isfinite(v) or (v == 0 and np.signbit(v)) or 0 < abs(v) < 2.0**-126 for v in block):
            return False
        E = max((np.frexp(np.float32(v))[1] + 126 for v in block if v != 0), default=0)  # biased exponent
        step = 2.0 ** (E - 133) if E else 1.0
        if any(v != 0 and (v / step) != int(v / step) for v in block):  # v / step exact: a power of two apart
            return False
    return True


def _arrays(rng: np.random.Generator):
    for trial in range(400):
        shape = tuple(int(v) for v in rng.integers(1, 19, size=rng.integers(1, 4)))
        kind = trial % 6
        x: np.ndarray
        if kind == 0:  # on the grid wherever a block's values share a scale
            x = rng.integers(-127, 128, size=shape) * 2.0 ** int(rng.integers(-130, 100))
        elif kind == 5:  # 8 significant bits: a block with a value past 127 steps is off by its lowest bit
            x = rng.integers(-255, 256, size=shape) * 2.0 ** int(rng.integers(-120, 100))
        elif kind == 1:  # mixed scales: off the grid in some blocks
            x = rng.integers(-127, 128, size=shape) * np.exp2(rng.integers(-20, 20, size=shape))
        elif kind == 2:
            x = rng.choice(SPECIALS, size=shape)
        elif kind == 3:  # the exact input family's values, a few zeros, now and then one special
            x = rng.integers(-127, 128, size=shape) * 2.0**-3 * (rng.random(shape) > 0.3)
            if rng.random() < 0.5:
                x.reshape(-1)[rng.integers(0, x.size)] = rng.choice(SPECIALS)
        else:  # any bit pattern
            x = rng.integers(0, 1 << 32, size=shape, dtype=np.uint64).astype(np.uint32).view(np.float32)
        yield np.asarray(x, np.float32)


def test_grid_and_lowest_bits_match_exact_oracles() -> None:
    rng = np.random.default_rng(33)
    seen = {True: 0, False: 0}
    for x in _arrays(rng):
        finite = bool(np.isfinite(x).all())
        assert _lowest_bits(x) == (_lowest_oracle(x) if finite else None)
        for axis in range(x.ndim):
            want = _grid_oracle(x, axis)
            seen[want] += 1
            assert on_grid(x, axis) == want
            assert grid_lowest(x, axis) == (_lowest_oracle(x) if want else None)
    assert min(seen.values()) > 50  # both answers were met


@pytest.mark.parametrize(("block", "lowest"), [
    ([1.0, 2.0**-6, -127 * 2.0**-6, 0, 0, 0, 0, 0], -6),  # multiples of the step 2^(E - 133) = 2^-6
    ([1.0, 2.0**-7, 0, 0, 0, 0, 0, 0], None),  # half a step
    ([255 * 2.0**-7, 0, 0, 0, 0, 0, 0, 0], None),  # 255 steps of 2^-7 need 8 bits: |q| past 127
    ([254 * 2.0**-7, 2.0**-6, 0, 0, 0, 0, 0, 0], -6),
])
def test_the_grid_ends_at_the_blocks_step(block: list[float], lowest: int | None) -> None:
    x = np.array(block, np.float32)
    assert grid_lowest(x) == lowest and _grid_oracle(x, 0) == (lowest is not None)


def test_large_arrays_are_tested_in_pieces_alike() -> None:
    rng = np.random.default_rng(5)
    x = (rng.integers(-127, 128, size=(700, 1536)) * 2.0**-7).astype(np.float32)  # pieces along both axes
    assert grid_lowest(x, 1) == grid_lowest(x, 0) == _lowest_bits(x) == -7
    x[699, 1535] = 1 + 2.0**-20  # in the last piece: off its block's grid, a lower set bit
    assert grid_lowest(x, 1) is None and grid_lowest(x, 0) is None
    assert _lowest_bits(x) == -20


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.float64, np.int8])
def test_operands_compare_as_numbers(dtype) -> None:
    mine = np.array([[0.0, 1.5], [-2.0, 3.0]]).astype(dtype)
    assert _equal(mine, mine.copy())
    assert _equal(mine[:, :1], np.ascontiguousarray(mine[:, :1]))  # a strided view of mine
    other = mine.copy()
    other[1, 1] = 4
    assert not _equal(mine, other)
    assert not _equal(mine, mine[:1])
    if dtype != np.int8:  # -0 equals 0 as a number, though its bits differ
        negzero = mine.copy()
        negzero[0, 0] = -0.0
        assert _equal(mine, negzero)
    assert _equal(mine, mine.astype(np.float64)) == np.array_equal(mine, mine.astype(np.float64))
