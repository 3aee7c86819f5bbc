"""The lane-order probe (issue 31 item 10): gemm_gen/facts/lanes.py recovers, from a wrong C and its exact reference,
the permutation of each r x t block that the accumulator's lane order would cause, and `make validate` runs one
design per dense mmul shape through the fused epilogue so that a first run measures that order."""

from __future__ import annotations

import numpy as np
import pytest

from gemm_gen.app import validate
from gemm_gen.facts.devices import NPU1, NPU2
from gemm_gen.facts.lanes import block_permutation, lane_note


def _blocks_permuted(c: np.ndarray, r: int, t: int, perm: np.ndarray) -> np.ndarray:
    """C with every r x t block's row-major positions i holding the value of position perm[i]."""
    rows, cols = c.shape
    b = c.reshape(rows // r, r, cols // t, t).transpose(0, 2, 1, 3).reshape(-1, r * t)
    return b[:, perm].reshape(rows // r, cols // t, r, t).transpose(0, 2, 1, 3).reshape(rows, cols)


@pytest.mark.parametrize("r, t", [(4, 4), (4, 8), (8, 8), (2, 8)])
def test_a_permuted_accumulator_is_measured(r: int, t: int) -> None:
    rng = np.random.default_rng(r * t)
    want = rng.integers(-100, 100, (8 * r, 6 * t)).astype(np.float64)
    column_major = np.arange(r * t).reshape(r, t).T.ravel()  # lanes column by column, read as rows
    for perm in (np.arange(r * t), column_major, rng.permutation(r * t)):
        got = _blocks_permuted(want, r, t, perm)
        assert block_permutation(got, want, r, t) == tuple(int(x) for x in perm)
    assert "row-major" in lane_note(want, want, r, t)
    assert "permuted places" in lane_note(_blocks_permuted(want, r, t, column_major), want, r, t)


def test_wrong_values_are_no_lane_order() -> None:
    rng = np.random.default_rng(1)
    want = rng.standard_normal((16, 16))
    got = want.copy()
    got[3, 5] += 1.0  # a wrong value, not a misplaced one
    assert block_permutation(got, want, 4, 4) is None
    assert "not a lane-order fault" in lane_note(got, want, 4, 4)
    swapped = want.copy()
    swapped[0, :2] = swapped[0, 1::-1]  # one block's swap, the other blocks in place: no single permutation
    assert block_permutation(swapped, want, 4, 4) is None


@pytest.mark.parametrize("dev", [NPU1, NPU2], ids=lambda d: d.name)
def test_validate_runs_every_dense_shape_through_its_conversion(dev) -> None:
    """One lane-order row per dense mmul shape of the device: built through the fused epilogue where the types
    take one (bf16 bias; integer bias and requantization on 32-bit accumulators), else converted plainly
    (acc64), or skipped with the reason the design is refused."""
    rows = validate.lane_items(dev.name)
    shapes = [(t, s) for t, ss in dev.mmul_shapes.items() for s in ss]
    assert len(rows) == len(shapes)
    for (t_in, shape), row in zip(shapes, rows):
        assert row.role == "check" and f"{t_in} {'x'.join(map(str, shape))}" in row.name
        if row.config is None:
            assert row.skipped.startswith("not buildable here")
            continue
        c = row.config
        assert c.kernel.mmul == shape and c.types.precision.converts_c
        wide = dev.acc_bits(t_in, shape) == 64
        assert c.epilogue.is_identity == wide, row.name
        assert c.epilogue.bias or wide
    assert sum(r.config is not None for r in rows) >= len(rows) - 2
