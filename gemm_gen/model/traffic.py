"""DRAM traffic of a design: bytes and contiguous runs per host tensor.

`design_traffic` reads them from the Design (its build counted every shim task's access pattern:
design/traffic.py);
`analytic_traffic` is the model's closed form of that count, vectorised over candidate tilings for
the tuner, which cannot build a Design per candidate; tests/model/test_model.py checks the model against
the built designs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..design.ir import Design
from ..facts.dtypes import DType
from ..spec.rules import memtile

TENSORS = ("A", "B", "C")


@dataclass
class TensorTraffic:
    bytes: np.ndarray  # bytes moved over the shims
    runs: np.ndarray  # contiguous DRAM runs of each task (each costs a fixed overhead)
    # the runs when the tasks of one group that walk side by side (same pattern, each starting
    # where the previous one's run ends, e.g. the B row-major and C strips of all columns) are
    # counted as one longer run: they run in lockstep, so their requests reach the same DRAM pages
    merged_runs: np.ndarray

    @property
    def run_bytes(self) -> np.ndarray:
        return np.asarray(self.bytes / np.maximum(self.runs, 1), dtype=np.float64)

    def effective_runs(self, page_sharing: float) -> np.ndarray:
        """Runs that open a DRAM page: a side-by-side boundary opens none with probability page_sharing."""
        return np.asarray(self.runs * (1.0 - page_sharing) + self.merged_runs * page_sharing, dtype=np.float64)


def design_traffic(design: Design) -> dict[str, TensorTraffic]:
    """Bytes and runs per tensor as the Design's build counted them over its runtime sequence's shim tasks
    (design/traffic.py), as the model's arrays."""
    return {t.tensor: TensorTraffic(np.asarray(t.bytes), np.asarray(t.runs), np.asarray(t.merged_runs))
            for t in design.traffic}


def analytic_traffic(rows: int, cols: int, types: tuple[DType, DType, DType], b_col_maj: bool,
                     m: np.ndarray, k_mt: np.ndarray, n: np.ndarray,
                     Mp: np.ndarray, Kp: np.ndarray, Np: np.ndarray, b_pack: str = "tiles",
                     lds: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
                     a_col_maj: bool = False, c_col_maj: bool = False,
                     extra_b_rows: np.ndarray | int = 0, b_object_scale: np.ndarray | float = 1.0,
                     split_k: np.ndarray | int = 0) -> dict[str, TensorTraffic]:
    """The runtime sequence's traffic in closed form (Striking eq. 6-8 with padding).

    A: every m x Kp strip is read once per output block column (N/(n cols) times), in k_mt runs
    (one long run when Kp == k_mt: consecutive rows then touch); column-major A is read as A^T, in
    runs of m (one per K row and core row: the K x m column strip of A^T; the shims of one block,
    one core row each, side by side), so its runs do not shrink with k_mt; column-major C is written
    as C^T in runs of m. B column-major likewise on B^T;
    B row-major in runs of n; a bfp16 B in mlir-aie's strips one run per strip. C is written once,
    in runs of n. `types` are A's, B's and C's: a bfp16 operand (1.125 B per value) moves in 8 x 8
    tiles, so each of its runs spans 8 rows. `lds` are the elements between rows of A's, B's (as
    stored) and C's DRAM buffers (gemm_gen/spec/call.py; default: the padded extents): rows touch only
    where a buffer's rows are exactly as long as a task reads them. `extra_b_rows`: rows the host appends to
    B per column tile (a fused epilogue's tile: k of them), read with it, so B's bytes and runs grow by
    (Kp + extra) / Kp = (k_steps + 1) / k_steps (run lengths unchanged). `b_object_scale`: B's bytes in DRAM
    over its values' (a W4A16 B's objects carry their scale and zero-point rows: groupquant.object_bytes per
    k-step and column tile over k n / 2), the same runs, each longer by it. `split_k`: the kernel's k in the split
    decode placement (spec/rules/decode_split.py; 0 elsewhere), whose B streams walk each core's piece in turn per
    k-step (strips: one run of k n per core and k-step) and whose streams and C columns differ or do not continue
    each other's runs: none side by side.
    """
    f = np.float64
    (b_a, q_a), (b_b, q_b), (b_out, q_c) = ((t.elem_bytes, t.tile_rows) for t in types)
    m_blocks, n_blocks = Mp // (m * rows), Np // (n * cols)
    lda, ldb, ldc = lds if lds is not None else (Mp if a_col_maj else Kp, Kp if b_col_maj else Np,
                                                 Mp if c_col_maj else Np)
    whole = (Kp <= k_mt) & (lda == Kp)  # one k_mt chunk of whole rows: a strip is one run, the strips touch
    whole_b = (Kp <= k_mt) & (ldb == Kp)
    a_bytes = (Mp * Kp * n_blocks * b_a).astype(f)
    a_shims = memtile.a_shims(rows, cols)  # each A task covers the strips of rows / a_shims core rows
    if a_col_maj:  # runs of m down A^T's K rows (rows touch when A^T is m wide); the shims' runs of one
        # block sit side by side when each serves one core row (one serving several sends its rows in turn)
        a_runs = a_bytes / (np.where(lda == m, Kp, 1) * m * b_a)
        a_side = np.where(lda == m, 1, a_shims if a_shims == rows else 1)
    else:
        a_runs = a_bytes / (np.where(whole, rows // a_shims * m * Kp, k_mt * q_a) * b_a)
        a_side = np.where(whole, a_shims, 1)
    b_bytes = (Np * Kp * m_blocks * b_b).astype(f)
    if b_pack == "strips" and np.any(split_k):  # the split placement: k x n of each strip per k-step
        b_runs = b_bytes / (np.asarray(split_k) * n * b_b)
        b_side = np.ones(np.shape(b_runs))
    elif b_pack == "strips":  # mlir-aie's packing: a column's K x n strip is one run, the columns side by side
        b_runs = b_bytes / (Kp * n * b_b)
        b_side = np.full(np.shape(b_runs), cols)
    elif b_col_maj:
        b_runs = b_bytes / (np.where(whole_b, n * Kp, k_mt * q_b) * b_b)
        b_side = np.where(whole_b, cols, 1)
    else:  # rows of n, or one run per strip when a single column's n spans all of B's rows
        b_runs = b_bytes / (np.where(ldb == n, Kp * n, n * q_b) * b_b)
        b_side = np.full(np.shape(b_runs), cols)
    if np.any(split_k):  # the split placement's streams carry 2 or 3 cores each: no two walk side by side
        b_side = np.ones(np.shape(b_runs))
    grow = (Kp + np.asarray(extra_b_rows)) / Kp  # 1 without an epilogue tile: B's traffic as before
    b_bytes, b_runs = b_bytes * grow, b_runs * grow
    b_bytes = b_bytes * np.asarray(b_object_scale)  # the runs cover the objects whole: as many, longer
    c_bytes = (Mp * Np * b_out).astype(f)
    if c_col_maj:  # C^T: runs of m, one per column and core row (one per m x n tile when C^T is m wide)
        c_runs = c_bytes / (np.where(ldc == m, m * n, m) * b_out)
        c_side = np.where(ldc == m, cols, 1)
    else:
        c_runs = c_bytes / (np.where(ldc == n, rows * m * n, n * q_c) * b_out)
        c_side = np.full(np.shape(c_runs), 1 if np.any(split_k) else cols)  # split: each column's C in its rows
    return {
        "A": TensorTraffic(a_bytes, np.asarray(a_runs, dtype=f), np.asarray(a_runs / a_side, dtype=f)),
        "B": TensorTraffic(b_bytes, np.asarray(b_runs, dtype=f), np.asarray(b_runs / b_side, dtype=f)),
        "C": TensorTraffic(c_bytes, np.asarray(c_runs, dtype=f), np.asarray(c_runs / c_side, dtype=f)),
    }
