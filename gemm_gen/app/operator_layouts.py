"""How the operator reads the user's arrays as they lie in memory, and what it still copies.

A 2-D array is read in place when its rows (row-major: a C-ordered array, or rows padded to a
regular stride) or its columns (column-major: `X.T`, a Fortran-ordered array) are contiguous: A
column-major maps to the design's `a_col_maj` layout (A^T row-major), B column-major to
`b_col_maj`, when the Gemm leaves that layout open (`a_col_maj=None`, `b_col_maj=None`, the
defaults); rows padded past the stored width are read with a leading dimension, which the shim
transfers take (call.CallPlan.lds, the `ld` of design/grid.py). Everything else is copied once by
the host, and the call plan says why (one copy per operand: a padded copy is made in the design's
layout from any array, so reasons join). C is returned in the order asked: `order="F"` through
column-major C (`c_col_maj`) where the design builds it, else a host transpose.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ROW, COL, OTHER = "row-major", "column-major", "other"
ORDERS = ("C", "F")


@dataclass(frozen=True)
class Arrangement:
    """How one operand lies in memory: ROW (rows contiguous, `ld` elements apart), COL (columns
    contiguous, `ld` elements apart) or OTHER (`why` it cannot be read in place)."""

    kind: str
    ld: int = 0
    why: str = ""

    @property
    def col(self) -> bool:
        return self.kind == COL


def arrangement(name: str, x: np.ndarray) -> Arrangement:
    """How the 2-D array x lies in memory (a vector or a single element is row-major)."""
    item, (rows, cols), (s0, s1) = x.itemsize, x.shape, x.strides
    if x.size == 0:
        return Arrangement(ROW, cols)

    def lines(unit: int, step: int, count: int, width: int) -> int | None:
        """Elements between consecutive lines (rows or columns) whose elements are `unit` apart."""
        if width > 1 and unit != item:
            return None
        if count <= 1:
            return width
        if step <= 0 or step % item or step < width * item:
            return None
        return step // item

    row, col = lines(s1, s0, rows, cols), lines(s0, s1, cols, rows)
    if row is not None and (col is None or row == cols):
        return Arrangement(ROW, row)
    if col is not None:
        return Arrangement(COL, col)
    if s0 < 0 or s1 < 0:
        why = f"{name} has a negative stride (strides {x.strides}, a reversed view) and the DMAs read forward"
    else:
        why = (f"neither {name}'s rows nor its columns are contiguous (strides {x.strides} for {item}-byte "
               f"elements)")
    return Arrangement(OTHER, 0, why)


# numpy >= 2 keeps byte_bounds in np.lib.array_utils, numpy 1.x (pyproject allows >= 1.24) in np
_byte_bounds = getattr(np.lib, "array_utils", np).byte_bounds


def in_allocation(stored: np.ndarray, ld: int) -> bool:
    """Whether `stored`'s rows x ld span (the padding after its last row included) lies inside the
    memory its outermost base owns, so the DMAs may read it."""
    base = stored
    while isinstance(base.base, np.ndarray):
        base = base.base
    lo, hi = _byte_bounds(base)
    start = stored.__array_interface__["data"][0]
    return lo <= start and start + stored.shape[0] * ld * stored.itemsize <= hi


def layout_word(col: bool) -> str:
    return COL if col else ROW
