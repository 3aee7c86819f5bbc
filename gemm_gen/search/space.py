"""The search space: the candidate tilings of a problem as arrays, filtered by the rules (issue 19).

As CUTLASS's generator lists tile descriptions and its manifest filter drops what a target cannot
run, `tilings` lists the candidate (m, k, n, rho) of a problem and `mask` and `k_mt_fit` drop those
that break a rule (RULES: every rule a design's check applies to its tiling, the DMA walks' BD
fields included); the model (search/tune.py) only prices what is left, and all of it builds. The
rules call the rule functions GemmConfig's checks call (gemm_gen/spec/rules), over all candidates at once.

The grids: rho (asymmetric tile buffering) from 1 to RHO_MAX, m a multiple of 2r rho (so that
T_MA = m / rho keeps the kernel's 2x2 blocks), n of 2t, k of s (spec/rules/tiling.py's steps), each no
larger than one core's share of the problem and than the BD fields allow (spec/rules/dma.py). k runs up
to the largest that L1 holds (spec/rules/l1.py's rule solved for k), not over every k with most masked
off: that would list millions of candidates. k_mt, a multiple of k, is not listed: the model walks
it (one k_mt per number of K chunks), starting from `k_mt_steps_max` and keeping the k_mt
`memtiles_fit` accepts.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, NamedTuple

import numpy as np

from ..facts.devices import TILE_EXTENT_SEARCH_MAX, TileKind
from ..facts.groupquant import tile_k_ok
from ..spec.call import CallPlan
from ..spec.config import GemmConfig
from ..spec.request import Pins, Problem
from ..spec.rules import dequant, dma, l1, memtile, shared_l1, tiling, walks
from ..spec.rules import epilogue as epilogue_rule
from ..spec.rules import kernel_variant as kv
from ..spec.rules.padding import ceil_div, round_up, same_k_walk, tasks_fit, tiles_per_core

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
    # the BD bounds (spec/rules/dma.py): A's core dims count r-row blocks, C's and B's shim wraps words
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
    # the L1 rule checks.check_l1 applies (spec/rules/l1.py), solved for the largest k
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


# ---- the rules, over every candidate at once -----------------------------------------------------------------
# Each rule says per candidate (m, k, n, rho, and k_mt where it reads it) whether it holds, by calling the rule
# functions of gemm_gen/spec/rules that the config's own check (its kernel variant as the config is made:
# spec/rules/defaults.variant; then checks.check_config and design/patterns.py's DMA limits) calls for one design.
# RULES lists them in the order that check raises them, so the first rule a candidate breaks is the one its check
# names. `mask` applies those that do not read k_mt (before the model
# prices anything), `k_mt_fit` the others for each k_mt the model walks; a candidate both keep passes
# design.serve.check() and builds (tests/search/test_space.py).
Rule = Callable[[GemmConfig, Problem, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def _tasks(base: GemmConfig, problem: Problem, m: np.ndarray, k: np.ndarray, n: np.ndarray, rho: np.ndarray,
           k_mt: np.ndarray) -> np.ndarray:
    """The runtime sequence's BD tasks (spec/rules/padding.py; checks.check_array)."""
    rows, cols = base.array.rows, base.array.cols
    return np.asarray(tasks_fit(tiles_per_core(problem.M, problem.N, m * rows, n * cols), base.a_shims, cols, base.dev,
                                 rows))


def _granularity(base: GemmConfig, problem: Problem, m: np.ndarray, k: np.ndarray, n: np.ndarray, rho: np.ndarray,
                 k_mt: np.ndarray) -> np.ndarray:
    """The tiling's granularity (spec/rules/tiling.py; checks.check_divisibility): the grids keep it but for k_mt."""
    st = tiling.steps(base.kernel.mmul, base.types.precision.block, base.kernel.block)
    return np.asarray(tiling.divisible(st, m, k, n, k_mt, rho))


def _has_variant(base: GemmConfig, m: np.ndarray, k: np.ndarray, n: np.ndarray, rho: np.ndarray,
                 k_mt: np.ndarray) -> np.ndarray:
    """Per candidate, whether its config gets a kernel variant as it is made (spec/rules/defaults.variant: a tile off
    its mmul's grid gets none, and check_config names its granularity instead). Where k_mt is not known yet (0:
    `mask`, before the model walks it) k_mt = k stands in: the rules that read k_mt refuse the rest."""
    return _granularity(base, Problem(1, 1, 1), m, k, n, rho, np.where(k_mt > 0, k_mt, k))


def _variants(base: GemmConfig, m: np.ndarray, k: np.ndarray, n: np.ndarray, rho: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """Per candidate, the kernel variant the config takes (spec/rules/kernel_variant.choices: indices into
    `expansions` and LOOPS)."""
    kern, groups = base.kernel, base.groups
    reserve = dequant.code_reserve(base.dev.name, groups.group_size, bool(groups.zero_points), kern.mmul)
    return kv.choices(base.dev, base.dev.operands(base.types.dtype_in, base.types.dtype_b), kern.mmul,
                      bool(kern.emulate_bf16_with_bfp16), l1.a_rows(m, rho), k, n, kern.expansion, kern.kernel_loops,
                      reserve, str(kern.compiler))


def _expansion(base: GemmConfig, problem: Problem, m: np.ndarray, k: np.ndarray, n: np.ndarray, rho: np.ndarray,
               k_mt: np.ndarray) -> np.ndarray:
    """A given expansion splits each tile into whole clusters (kernel_variant.divides; spec/rules/defaults.variant, as
    the config is made); a bfp16 kernel has one variant."""
    ex, loops = base.kernel.expansion, base.kernel.kernel_loops
    if base.kernel.block:
        ok = np.full(m.shape, ex in (None, (2, 2)) and loops in (None, kv.DEFAULT_LOOPS))
    elif ex is None:
        return np.ones(m.shape, dtype=bool)
    else:
        ok = np.asarray(kv.divides(base.kernel.mmul, (int(ex[0]), int(ex[1])), l1.a_rows(m, rho), n))
    return ok | ~_has_variant(base, m, k, n, rho, k_mt)


def _loops(base: GemmConfig, problem: Problem, m: np.ndarray, k: np.ndarray, n: np.ndarray, rho: np.ndarray,
           k_mt: np.ndarray) -> np.ndarray:
    """A given loop structure is known, and with Peano one whose loop Peano pipelines (kernel_variant.peano_problem;
    spec/rules/defaults.variant, as the config is made)."""
    loops = base.kernel.kernel_loops
    if base.kernel.block or loops is None or base.kernel.compiler != "peano" and loops in kv.LOOPS:
        return np.ones(m.shape, dtype=bool)
    if loops not in kv.LOOPS:
        ok = np.zeros(m.shape, dtype=bool)
    else:
        kern = base.kernel
        ex, _ = _variants(base, m, k, n, rho)
        ok = kv.peano_loops_ok(base.dev, base.dev.operands(base.types.dtype_in, base.types.dtype_b), kern.mmul,
                               bool(kern.emulate_bf16_with_bfp16), ex, loops, k, n)
    return ok | ~_has_variant(base, m, k, n, rho, k_mt)


def _group_k(base: GemmConfig, problem: Problem, m: np.ndarray, k: np.ndarray, n: np.ndarray, rho: np.ndarray,
             k_mt: np.ndarray) -> np.ndarray:
    """W4A16: whole groups per B object (groupquant.tile_k_ok)."""
    return np.asarray(tile_k_ok(k, base.groups.group_size)) if base.groups.group_size else np.ones(m.shape, dtype=bool)


def _code(base: GemmConfig, problem: Problem, m: np.ndarray, k: np.ndarray, n: np.ndarray, rho: np.ndarray,
          k_mt: np.ndarray) -> np.ndarray:
    """W4A16: the matmul and its dequantization pass fit their program memory (spec/rules/dequant.code_fits)."""
    ok = np.ones(m.shape, dtype=bool)
    if not base.groups.group_size or base.kernel.block:
        return ok
    operands = base.dev.operands(base.types.dtype_in, base.types.dtype_b)
    order = kv.expansions(base.dev, operands, base.kernel.mmul, bool(base.kernel.emulate_bf16_with_bfp16))
    ex, lp = _variants(base, m, k, n, rho)
    for e, loop in {(int(a), int(b)) for a, b in zip(ex, lp)}:
        sel = (ex == e) & (lp == loop)
        ok[sel] = dequant.code_fits(base.dev, base.kernel.mmul, bool(base.kernel.emulate_bf16_with_bfp16), order[e],
                                    kv.LOOPS[loop], k[sel], n[sel], bool(base.groups.zero_points))
    return ok


def _words(base: GemmConfig, problem: Problem, m: np.ndarray, k: np.ndarray, n: np.ndarray, rho: np.ndarray,
           k_mt: np.ndarray) -> np.ndarray:
    """Every contiguous DMA run whole 32-bit words (spec/rules/dma.py; checks.check_granularity)."""
    r, s, t = base.kernel.mmul
    types, cols = base.types, base.array.cols
    runs = [(s, types.t_in), (t, types.t_b), (k_mt, types.t_in), (n * cols, types.t_b), (t, types.t_out),
            (n * cols, types.t_out)]
    if base.groups.group_size:  # W4A16: B moves as whole objects, never re-tiled
        runs = [run for run in runs if run[1] is not types.t_b]
    ok = np.ones(m.shape, dtype=bool)
    for count, typ in runs:
        ok &= dma.packed_words(typ, count) & dma.byte_words(typ, count)
    return ok


def _epilogue_tile(base: GemmConfig, problem: Problem, m: np.ndarray, k: np.ndarray, n: np.ndarray,
                   rho: np.ndarray, k_mt: np.ndarray) -> np.ndarray:
    """The epilogue tile fits one k x n B object (spec/rules/epilogue.py)."""
    if not base.epilogue.needs_tile:  # (bfp16 B, whose elements have no whole bytes, takes no epilogue)
        return np.ones(m.shape, dtype=bool)
    return np.asarray(epilogue_rule.tile_fits(base.epilogue, k, n, base.types.t_b.nbytes(1)))


def _epilogue_chunk(base: GemmConfig, problem: Problem, m: np.ndarray, k: np.ndarray, n: np.ndarray,
                    rho: np.ndarray, k_mt: np.ndarray) -> np.ndarray:
    """A chunked B carries the epilogue tile only with k_mt = k (spec/rules/epilogue.py)."""
    if not base.epilogue.needs_tile:
        return np.ones(m.shape, dtype=bool)
    chunked = memtile.b_chunked(base.layout.b_col_maj, base.layout.b_pack)
    return np.asarray(epilogue_rule.chunk_ok(base.epilogue, chunked, k, k_mt)) & np.ones(m.shape, dtype=bool)


def _a_chunks(base: GemmConfig, problem: Problem, m: np.ndarray, k: np.ndarray, n: np.ndarray, rho: np.ndarray,
              k_mt: np.ndarray) -> np.ndarray:
    """A column-major A shim serving several core rows walks its k_mt chunks on its BD's iteration dimension
    (spec/rules/memtile.a_col_maj_chunks; checks.check_a_col_maj_chunks)."""
    chunks = memtile.a_col_maj_chunks(base.layout.a_col_maj, base.array.rows, base.array.cols,
                                      round_up(problem.K, k_mt), k_mt)
    return np.asarray(chunks <= base.dev.dma[TileKind.SHIM].iteration_wrap_max) & np.ones(m.shape, dtype=bool)


def _shared_l1(base: GemmConfig, problem: Problem, m: np.ndarray, k: np.ndarray, n: np.ndarray, rho: np.ndarray,
               k_mt: np.ndarray) -> np.ndarray:
    """Neighbour-shared L1 places the buffers (spec/rules/shared_l1.problem; checks.check_array): the same for every
    tiling of a base (whose open tiling counts one L1 object per memtile B object), but for B split's L1 objects per
    memtile buffer (_shared_l1_split)."""
    return np.full(m.shape, base.shared_l1_problem is None)


def _shared_l1_split(base: GemmConfig, problem: Problem, m: np.ndarray, k: np.ndarray, n: np.ndarray,
                     rho: np.ndarray, k_mt: np.ndarray) -> np.ndarray:
    """B split streams memtile buffers of k_mt / k L1 objects for column-major B tiles (shared_l1.split_streams, in
    spec/rules/shared_l1.problem): read per k_mt the model walks."""
    ok = np.ones(m.shape, dtype=bool)
    if shared_l1.shared(base.array.share_l1, "B") and memtile.b_chunked(base.layout.b_col_maj, base.layout.b_pack):
        ok &= shared_l1.split_streams(base.array.depth_ab_l2, k_mt // k)
    return ok


def _l1(base: GemmConfig, problem: Problem, m: np.ndarray, k: np.ndarray, n: np.ndarray, rho: np.ndarray,
        k_mt: np.ndarray) -> np.ndarray:
    """A core's L1 holds its buffers and overhead (spec/rules/l1.py; `tilings` bounds k by it already, but for a W4A16
    B object's scale rows)."""
    return np.asarray(l1.fits(base.l1_options, base.dev.l1_bytes, m, k, n, rho))


def _memtiles(base: GemmConfig, problem: Problem, m: np.ndarray, k: np.ndarray, n: np.ndarray, rho: np.ndarray,
              k_mt: np.ndarray) -> np.ndarray:
    return memtiles_fit(base, m, k, n, k_mt)


def _dma(hop: str) -> Rule:
    """The rule of one hop's DMA walks of the call within their BD's fields (spec/rules/walks.limits;
    design/patterns.check_dma_limits)."""
    def rule(base: GemmConfig, problem: Problem, m: np.ndarray, k: np.ndarray, n: np.ndarray, rho: np.ndarray,
             k_mt: np.ndarray) -> np.ndarray:
        ok = np.zeros(m.shape, dtype=bool)
        for idx, call in call_plans(base, problem, m, k, n, k_mt, rho):
            a, b, c = (walks.grid(base.walk_options, op, m[idx], k[idx], n[idx], k_mt[idx], rho[idx], call)
                       for op in walks.OPERANDS)
            ok[idx] = dma.keeps([lim for lim, _ in walks.limits(a, b, c, call, (hop,))])
        return ok
    return rule


_shim_dma, _tile_dma = _dma("shim"), _dma("tiles")
# (name, whether it reads k_mt, the rule), in the order the config's check raises them
# (a given expansion or loop structure the tile cannot have fails first, as the config is made, unless the tile is
# off its grid: _has_variant)
RULES: tuple[tuple[str, bool, Rule], ...] = (
    ("expansion", False, _expansion), ("loops", False, _loops), ("runtime tasks", False, _tasks),
    ("shared L1", False, _shared_l1), ("shared L1 split", True, _shared_l1_split),
    ("granularity", True, _granularity), ("group k", False, _group_k), ("code", False, _code), ("words", True, _words),
    ("epilogue tile", False, _epilogue_tile), ("epilogue chunk", True, _epilogue_chunk),
    ("A chunks", True, _a_chunks), ("L1", False, _l1), ("memtiles", True, _memtiles),
    ("shim DMA", True, _shim_dma), ("memtile and core DMA", True, _tile_dma),
)


# per base config (while it lives), the call plan of one candidate of each group of call_plans
_PLANS: weakref.WeakKeyDictionary[GemmConfig, dict[tuple[Problem, int], CallPlan]] = weakref.WeakKeyDictionary()


def call_plans(base: GemmConfig, problem: Problem, m: np.ndarray, k: np.ndarray, n: np.ndarray, k_mt: np.ndarray,
               rho: np.ndarray) -> Iterator[tuple[np.ndarray, CallPlan]]:
    """The candidates' calls of `problem`, one CallPlan per group of candidates over the group's arrays. What the
    host pads and whether the last block moves back (call.plan_call) depend on a tiling only through whether M
    and N are whole blocks and larger than one, and whether K is whole k_mt chunks: one candidate of each such
    group is planned, and the group takes its plan with its own tiles."""
    block_m, block_n = m * base.array.rows, n * base.array.cols
    key = ((problem.M % block_m != 0) * 1 + (problem.M > block_m) * 2 + (problem.N % block_n != 0) * 4
           + (problem.N > block_n) * 8 + (problem.K % k_mt != 0) * 16)
    plans: dict[tuple[object, ...], tuple[list[np.ndarray], CallPlan]] = {}
    known = _PLANS.setdefault(base, {})  # the tuner asks of one base round after round
    for group in np.unique(key):
        idx = np.nonzero(key == group)[0]
        i = int(idx[0])
        one = known.get((problem, int(group)))
        if one is None:
            # (the call does not read the kernel variant: a given one this tile cannot have is another rule's)
            one = known[problem, int(group)] = base.with_(M=problem.M, K=problem.K, N=problem.N, m=int(m[i]),
                                                          k=int(k[i]), n=int(n[i]), k_mt=int(k_mt[i]),
                                                          rho=int(rho[i]), expansion=None, kernel_loops=None).call
        shape = (one.padded, one.shift_m, one.shift_n, one.lds, bool(one.b_extra_k))  # what the tiles do not set
        plans.setdefault(shape, ([], one))[0].append(idx)
    for parts, one in plans.values():
        idx = np.sort(np.concatenate(parts))
        tiles: dict[str, Any] = dict(block_m=block_m[idx], block_n=block_n[idx], k_mt=k_mt[idx], k=k[idx],
                                     b_extra_k=k[idx] if one.b_extra_k else 0)  # its sizes computed by NumPy
        yield idx, replace(one, **tiles)


def _apply(base: GemmConfig, problem: Problem, m: np.ndarray, k: np.ndarray, n: np.ndarray, rho: np.ndarray,
           k_mt: np.ndarray, reads_k_mt: bool | None) -> np.ndarray:
    """Per candidate, whether it keeps the rules (those that read k_mt, those that do not, or all for None),
    each rule asked only of the candidates that kept the ones before it."""
    ok = np.ones(m.shape, dtype=bool)
    for _, uses, rule in sorted(RULES, key=lambda r: r[2] is _memtiles):  # the costliest last
        if reads_k_mt is not None and uses != reads_k_mt:
            continue
        idx = np.nonzero(ok)[0]
        if idx.size == 0:
            break
        ok[idx] = rule(base, problem, m[idx], k[idx], n[idx], rho[idx], k_mt[idx])
    return ok


def mask(base: GemmConfig, problem: Problem, candidates: Tilings, pins: Pins) -> np.ndarray:
    """Which candidates the rules that do not read k_mt accept (RULES), and for a pinned k_mt, that it is whole
    k-steps within the BD extent (the rules that read it: `k_mt_fit`)."""
    m, k, n, rho = candidates
    keep = _apply(base, problem, m, k, n, rho, np.zeros_like(k), False)
    k_mt = pins.k_mt
    if k_mt is not None:
        keep = keep & (k_mt % candidates.k == 0) & (k_mt // candidates.k <= TILE_EXTENT_SEARCH_MAX)
    return keep


def k_mt_fit(base: GemmConfig, problem: Problem, m: np.ndarray, k: np.ndarray, n: np.ndarray, k_mt: np.ndarray,
             rho: np.ndarray) -> np.ndarray:
    """Per (m, k, n, k_mt, rho) that `mask` keeps: whether the rules that read k_mt accept it (RULES: the
    granularity of k_mt, its runs in whole words, a chunked B's epilogue tile, a column-major A's chunks, the
    memtiles' placement, every DMA walk)."""
    return _apply(base, problem, m, k, n, rho, k_mt, True)


def serves(base: GemmConfig, size: Problem, m: np.ndarray, k: np.ndarray, n: np.ndarray, k_mt: np.ndarray,
           rho: np.ndarray) -> np.ndarray:
    """Per candidate built for base's size (whose rules it keeps): whether it serves a call of `size` in its own
    layouts, as design.serve.serve says of one design whose runtime sizes serve that size (M, K and N no larger
    than its own): the same K walk for runtime sizes "mn", and every DMA walk of that call within its BD's fields."""
    ok = np.ones(m.shape, dtype=bool)
    if base.runtime.runtime_sizes == "mn":
        ok &= np.asarray(same_k_walk(size.K, base.size.K, k_mt))
    for rule in (_shim_dma, _tile_dma):  # the DMA walks of the call
        idx = np.nonzero(ok)[0]
        ok[idx] = rule(base, size, m[idx], k[idx], n[idx], rho[idx], k_mt[idx])
    return ok


def broken(base: GemmConfig, problem: Problem, m: np.ndarray, k: np.ndarray, n: np.ndarray, k_mt: np.ndarray,
           rho: np.ndarray) -> np.ndarray:
    """Per candidate with its k_mt, the index into RULES of the first rule it breaks (len(RULES): none), which is
    the rule its config's check names."""
    first = np.full(m.shape, len(RULES), dtype=np.int64)
    for i, (_, _, rule) in enumerate(RULES):
        idx = np.nonzero(first == len(RULES))[0]
        if idx.size == 0:
            break
        ok = rule(base, problem, m[idx], k[idx], n[idx], rho[idx], k_mt[idx])
        first[idx[~ok]] = i
    return first


def k_mt_steps_max(base: GemmConfig, problem: Problem, candidates: Tilings) -> np.ndarray:
    """Per candidate: the most k-steps j an A memtile object (k_mt = j k) may span, from the BD
    fields and the memtiles' total capacity (where the model's k_mt walk starts; `memtiles_fit`
    decides)."""
    dev, cols = base.dev, base.array.cols
    k = candidates.k
    # A's shim d0 wrap counts k_mt columns in words (spec/rules/dma.py); no more than K padded to a k-step
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
    its L2 buffers (spec/rules/memtile.py)."""
    dev = base.dev
    return np.asarray(memtile.fit(memtile.l2_pools(base.l2_options, m, k, n, k_mt), dev.target(base.array.cols)[1],
                                  dev.memtile_bytes, m.size))
