"""The lane order of an mmul's accumulator, as C shows it (issue 31 item 10; docs/hardware_path.md).

The kernels read an r x t block of C out of the accumulators only through the mmul (`to_vector`, and
`vector_cast` of `to_accum()` for acc64 lanes, read back whole by `load_acc`): aie_api documents that order as
row-major (aie_doc.hpp, group_mmul's "Tiled matrix layout": C "arranged in tiles of" M x N, row-major; mmul's
constructors take row-major data, detail/mmul.hpp's C_block_interleave_cols permutes the hardware's lanes back
into it; jgmelber/aie_api @2b7eedf). The fused epilogue then applies per-column parameters (bias, multipliers)
to those lanes as row-major. If an NPU's mmul gave another order for some shape, C would hold each block's
values at permuted places: `block_permutation` recovers that permutation from C and its exact reference, so a
FAIL on a lane-order row of `make validate` says which order the hardware has (gemm_gen/app/validate.py).
"""

from __future__ import annotations

import numpy as np


def block_permutation(got: np.ndarray, want: np.ndarray, r: int, t: int) -> tuple[int, ...] | None:
    """The one permutation p of an r x t block's row-major positions with got[block][i] == want[block][p[i]] in
    every whole r x t block of C (blocks aligned at C's origin); None when no single permutation explains C
    (wrong values, not misplaced ones, or too few distinct values to tell). The identity is row-major."""
    rows, cols = (got.shape[0] // r) * r, (got.shape[1] // t) * t
    if rows == 0 or cols == 0:
        return None

    def blocks(x: np.ndarray) -> np.ndarray:  # (blocks, r t) in row-major order inside each block
        return x[:rows, :cols].reshape(rows // r, r, cols // t, t).transpose(0, 2, 1, 3).reshape(-1, r * t)

    g, w = blocks(np.asarray(got, np.float64)), blocks(np.asarray(want, np.float64))
    # candidates[i, j]: position j of the reference can be position i of C, in every block
    candidates = np.all(g[:, :, None] == w[:, None, :], axis=0)
    if not np.all(candidates.sum(axis=1) == 1):
        return None
    perm = tuple(int(j) for j in candidates.argmax(axis=1))
    return perm if len(set(perm)) == r * t else None


def lane_note(got: np.ndarray, want: np.ndarray, r: int, t: int) -> str:
    """One line on what a wrong C says about the accumulator's lane order (for a run's notes)."""
    perm = block_permutation(got, want, r, t)
    if perm is None:
        return f"lane order: C's errors are not one permutation of each {r} x {t} block (not a lane-order fault)"
    if perm == tuple(range(r * t)):
        return f"lane order: each {r} x {t} block's values are in place (row-major)"
    return (f"lane order: each {r} x {t} block of C holds its values at permuted places: position i (row-major) "
            f"has the value of position {list(perm)}[i]; the mmul's accumulator is not row-major there")
