"""The search space: the candidate tilings of a problem as arrays, filtered by the rules (issue 19).

As CUTLASS's generator lists tile descriptions and its manifest filter drops what a target cannot
run, `tilings` lists the candidate (m, k, n, rho) of a problem and `mask` drops those that break a
rule; the model (search/tune.py) only prices what is left. Both call the rule functions GemmConfig's
checks call (gemm_gen/rules), over all candidates at once; design.serve.check() runs on the
finalists only.

The grids: rho (asymmetric tile buffering) from 1 to RHO_MAX, m a multiple of 2r rho (so that
T_MA = m / rho keeps the kernel's 2x2 blocks), n of 2t, k of s (rules/tiling.py's steps), each no
larger than one core's share of the problem and than the BD fields allow (rules/dma.py). k runs up
to the largest that L1 holds (rules/l1.py's rule solved for k), not over every k with most masked
off: that would list millions of candidates. k_mt, a multiple of k, is not listed: the model walks
it (one k_mt per number of K chunks), starting from `k_mt_steps_max` and keeping the k_mt
`memtiles_fit` accepts.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .config import GemmConfig
from .hw.devices import TILE_EXTENT_SEARCH_MAX, TileKind
from .rules import dma, l1, memtile, tiling
from .rules import epilogue as epilogue_rule
from .rules import kernel_variant as kv
from .rules.padding import ceil_div, round_up, tasks_fit, tiles_per_core
from .spec import Pins, Problem

RHO_MAX = 8  # the largest asymmetry atb measures (Table 1); beyond it the switches dominate



class Tilings(NamedTuple):
    """Candidate tilings, one per index of four int64 arrays of one length (`size` of them; len() is
    4, the fields)."""

    m: np.ndarray
    k: np.ndarray
    n: np.ndarray
    rho: np.ndarray

    @property
    def size(self) -> int:
        return int(self.m.size)

    def take(self, keep: np.ndarray) -> Tilings:
        """The candidates a boolean mask (or an index array) keeps, in their order."""
        return Tilings(self.m[keep], self.k[keep], self.n[keep], self.rho[keep])


def tilings(base: GemmConfig, problem: Problem, pins: Pins) -> Tilings:
    """Every (m, k, n, rho) of `base`'s options at `problem`'s sizes on the grids, within L1 and the
    BD fields that do not depend on k_mt, keeping what `pins` fixes (ordered by rho, m, n, then k)."""
    dev = base.dev
    r, s, t = base.kernel.mmul
    rows, cols = base.array.rows, base.array.cols
    core = dev.dma[TileKind.CORE]
    shim = dev.dma[TileKind.SHIM]
    # the BD bounds (rules/dma.py): A's core dims count r-row blocks, C's and B's shim wraps words
    m_hi = min(round_up(ceil_div(problem.M, rows), 2 * r), TILE_EXTENT_SEARCH_MAX, dma.static_extent_max(core, r))
    n_hi = round_up(ceil_div(problem.N, cols), 2 * t)
    n_hi = min(n_hi, dma.shim_extent_max(shim, base.types.dtype_out))  # shim C d0 wrap
    if base.layout.b_pack == "strips":  # the shim reads each strip linearly; no core dims
        n_hi = min(n_hi, TILE_EXTENT_SEARCH_MAX)
    elif base.layout.b_col_maj:
        n_hi = min(n_hi, TILE_EXTENT_SEARCH_MAX, dma.static_extent_max(core, t))
    else:
        n_hi = min(n_hi, dma.shim_extent_max(shim, str(base.types.dtype_b)))
    st = tiling.steps(base.kernel.mmul, base.types.precision.block,
                      base.kernel.block)  # the grids check_divisibility accepts
    k_step = tiling.k_step(st)
    k_hi = min(round_up(problem.K, k_step), TILE_EXTENT_SEARCH_MAX * s)
    if base.epilogue.needs_tile:  # a short K still needs a k whose B object holds the epilogue tile
        k_hi = max(k_hi, epilogue_rule.smallest_k(base.epilogue, tiling.n_step(st), base.types.t_b.nbytes(1), k_step))
    rho_fixed = pins.rho
    rhos = [rho_fixed] if rho_fixed is not None else range(1, RHO_MAX + 1)
    ns = np.arange(tiling.n_step(st), n_hi + 1, tiling.n_step(st), dtype=np.int64)
    n_fixed = pins.n
    if n_fixed is not None:
        ns = np.array([n_fixed], dtype=np.int64)
    grids = []
    for rho in rhos:
        step = tiling.m_step(st, rho)
        ms = np.arange(step, m_hi + 1, step, dtype=np.int64)
        m_fixed = pins.m
        if m_fixed is not None:
            ms = np.array([m_fixed], dtype=np.int64)
            ms = ms[ms % step == 0]
        mm, nn = (a.ravel() for a in np.meshgrid(ms, ns, indexing="ij"))
        grids.append((mm, nn, np.full(mm.shape, rho, dtype=np.int64)))
    mm, nn, rr = (np.concatenate(g) for g in zip(*grids))
    # the L1 rule checks.check_l1 applies (rules/l1.py), solved for the largest k
    k_max = np.minimum(l1.largest_k(base.l1_options, dev.l1_bytes, mm, nn, rr, k_step), k_hi)
    k_fixed = pins.k
    if k_fixed is not None:
        keep = k_max >= int(k_fixed)
        mm, nn, rr = mm[keep], nn[keep], rr[keep]
        return Tilings(mm, np.full(mm.shape, int(k_fixed), dtype=np.int64), nn, rr)
    # every k-step from one up to each (m, n, rho)'s largest, as one flat run per (m, n, rho)
    counts = k_max // k_step
    keep = counts > 0
    mm, nn, rr, counts = mm[keep], nn[keep], rr[keep], counts[keep]
    m3 = np.repeat(mm, counts)
    n3 = np.repeat(nn, counts)
    r3 = np.repeat(rr, counts)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    k3 = (np.arange(m3.size, dtype=np.int64) - starts + 1) * k_step
    return Tilings(m3, k3, n3, r3)


def mask(base: GemmConfig, problem: Problem, candidates: Tilings, pins: Pins) -> np.ndarray:
    """Which candidates the rules that do not depend on k_mt accept: the runtime sequence's task
    count (rules/padding.py), a W4A16 tile's k against its group size and its L1 bytes (rules/l1.py's
    `largest_k` only bounds k there), a given expansion's clusters (kernel_variant.divides: the model
    prices no tile the kernel cannot split), and for a pinned k_mt, that it is whole k-steps within the BD
    extent."""
    rows, cols = base.array.rows, base.array.cols
    keep = np.asarray(tasks_fit(tiles_per_core(problem.M, problem.N, candidates.m * rows, candidates.n * cols),
                                base.a_shims, cols, base.dev, rows))
    # the epilogue tile fits one k x n B object (rules/epilogue.py)
    if base.epilogue.needs_tile:  # (bfp16 B, whose elements have no whole bytes, takes no epilogue)
        keep = keep & epilogue_rule.tile_fits(base.epilogue, candidates.k, candidates.n, base.types.t_b.nbytes(1))
    if base.groups.group_size:  # W4A16: whole groups per B object (groupquant.check_tile_k), and L1 exactly
        keep = keep & group_k_ok(candidates.k, base.groups.group_size)
        keep = keep & np.asarray(l1.fits(base.l1_options, base.dev.l1_bytes, candidates.m, candidates.k, candidates.n,
                                         candidates.rho))
    ex = base.kernel.expansion
    if ex is not None and not base.kernel.block:  # a given expansion splits each tile into whole clusters
        keep = keep & kv.divides(base.kernel.mmul, (int(ex[0]), int(ex[1])), candidates.m // candidates.rho,
                                 candidates.n)
    k_mt = pins.k_mt
    if k_mt is not None:
        chunked = memtile.b_chunked(base.layout.b_col_maj, base.layout.b_pack)
        keep = keep & epilogue_rule.chunk_ok(base.epilogue, chunked, candidates.k, k_mt)
        keep = keep & (k_mt % candidates.k == 0) & (k_mt // candidates.k <= TILE_EXTENT_SEARCH_MAX)
    return keep


def group_k_ok(k: np.ndarray, group_size: int) -> np.ndarray:
    """Which tile k groupquant.check_tile_k accepts: a B object covers whole groups of K or lies inside one."""
    k = np.asarray(k)
    return np.asarray((k % group_size == 0) | (group_size % k == 0))


def k_mt_steps_max(base: GemmConfig, problem: Problem, candidates: Tilings) -> np.ndarray:
    """Per candidate: the most k-steps j an A memtile object (k_mt = j k) may span, from the BD
    fields and the memtiles' total capacity (where the model's k_mt walk starts; `memtiles_fit`
    decides)."""
    dev, cols = base.dev, base.array.cols
    k = candidates.k
    # A's shim d0 wrap counts k_mt columns in words (rules/dma.py); no more than K padded to a k-step
    j_hi = np.minimum(round_up(problem.K, k) // k,
                      np.minimum(dma.shim_extent_max(dev.dma[TileKind.SHIM], base.types.dtype_in) // k,
                                 TILE_EXTENT_SEARCH_MAX))
    # all memtiles together must hold every L2 buffer: an upper bound on k_mt (placement decides)
    j_cap = memtile.largest_k_mt_steps(base.l2_options, cols * dev.memtile_bytes, candidates.m, k, candidates.n)
    chunked = memtile.b_chunked(base.layout.b_col_maj, base.layout.b_pack)
    if not np.all(epilogue_rule.chunk_ok(base.epilogue, chunked, 1, 2)):
        j_cap = np.minimum(j_cap, 1)  # a chunked B carries the epilogue tile as one more chunk: k_mt = k
    return np.asarray(np.minimum(j_hi, np.maximum(j_cap, 1)), dtype=np.int64)


def memtiles_fit(base: GemmConfig, m: np.ndarray, k: np.ndarray, n: np.ndarray, k_mt: np.ndarray) -> np.ndarray:
    """Per (m, k, n, k_mt): whether mlir-aie's memtile placement (neighbour spill, C kept home) holds
    its L2 buffers (rules/memtile.py)."""
    dev = base.dev
    return np.asarray(memtile.fit(memtile.l2_pools(base.l2_options, m, k, n, k_mt), dev.target(base.array.cols)[1],
                                  dev.memtile_bytes, m.size))
