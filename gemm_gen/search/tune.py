"""The tuner: every valid (m, k, n, k_mt) of a problem, ranked by the model.

The candidates come from the search space (gemm_gen/search/space.py): every (m, k, n, rho) on the grids
that L1 and the BD fields allow, filtered by every rule a design's check applies (space.RULES, over
all candidates at once: `mask` before any pricing, `k_mt_fit` for each k_mt: its granularity, a
column-major A's chunks, memtile placement with neighbour spill, every DMA walk's BD fields). The
tuner prices only what the rules keep, so every design it ranks builds: nothing is validated one by
one. For k_mt the model depends only on the number of K chunks q = ceil(K / k_mt) and on k_mt
itself, and for a fixed q the smallest k_mt is never worse (less padding and traffic for the same
number of runs), so each q contributes one k_mt. q rises from the fewest chunks the memtiles allow
until a lower bound of the time exceeds the N-th best found: the ranking of the top N is exact.
When no candidate keeps every rule, `refusal` says which rule refuses the one that keeps the most.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..design.serve import check
from ..facts.devices import TILE_EXTENT_SEARCH_MAX
from ..facts.errors import ConfigError, GemmGenError, opt
from ..model.params import Params, load, load_ends
from ..model.perf import Estimate, Workload, estimate, estimate_config
from ..spec.checks import check_expansion, check_pinned_granularity, check_untiled
from ..spec.config import B_PACKS, GemmConfig
from ..spec.request import MAPPINGS, Pins
from ..spec.rules import decode_split, dma
from ..spec.rules.padding import ceil_div, round_up
from . import space
from .knobs import Variant

MAX_ROUNDS = 1024
AHEAD = 8  # rounds of rank_all's k_mt walk whose rules (space.k_mt_fit) are asked at once once times prune
# designs priced with their L1 plan (l1_banks) before the top are kept: the ranking's vectorised model has no
# bank stalls, which can reorder close designs
FINALISTS = 12


@dataclass
class Candidate:
    config: GemmConfig
    tops: float
    time_s: float
    compute_bound_tops: float
    memory_bound_tops: float
    bound: str
    core_macs_per_cycle: float
    l1_bytes: int
    l1_fraction: float
    l2_bytes: int
    l2_fraction: float
    wasted_fraction: float
    tops_low: float = 0.0  # at the pessimistic / optimistic ends of the constants' spreads
    tops_high: float = 0.0
    measured_s: float | None = None

    @property
    def measured_tops(self) -> float | None:
        """None when not measured, or when the measurement failed (measured_s inf)."""
        if self.measured_s is None or math.isinf(self.measured_s):
            return None
        c = self.config
        return 2.0 * c.size.M * c.size.K * c.size.N / self.measured_s / 1e12

    def to_json(self) -> dict[str, Any]:
        c = self.config
        out: dict[str, Any] = {
            "m": c.tiling.m, "k": c.tiling.k, "n": c.tiling.n, "k_mt": c.tiling.k_mt, "rho": c.tiling.rho,
                               "predicted_tops": self.tops,
            "predicted_time_us": self.time_s * 1e6, "compute_bound_tops": self.compute_bound_tops,
            "memory_bound_tops": self.memory_bound_tops, "bound": self.bound,
            "core_macs_per_cycle": self.core_macs_per_cycle, "l1_bytes": self.l1_bytes,
            "l1_fraction": self.l1_fraction, "l2_bytes": self.l2_bytes, "l2_fraction": self.l2_fraction,
            "wasted_fraction": self.wasted_fraction, "tops_low": self.tops_low, "tops_high": self.tops_high,
        }
        if self.measured_s is not None:  # inf: it failed to build or run (JSON has no infinity)
            failed = math.isinf(self.measured_s)
            out["measured_time_us"] = None if failed else self.measured_s * 1e6
            out["measured_tops"] = self.measured_tops
        return out


@dataclass
class TuneResult:
    problem: Workload
    top: list[Candidate]
    evaluated: int  # (m, k, n, k_mt) candidates the model ranked
    tilings: int  # valid (m, k, n)
    seconds: float
    rejected_by_validate: int = 0  # 0: the rules keep only designs that build (kept for `tune --json`)
    notes: list[str] = field(default_factory=list)
    rank: str = "model"  # what ordered the designs (RANKS)
    kernels_weighed: bool = False  # the candidates are of both bf16 kernels (an open convert-once option)
    mappings_weighed: bool = False  # the candidates are of both mappings (whole array, decode: spec/rules/array.py)

    @property
    def best(self) -> Candidate:
        return self.top[0]


@dataclass
class _Bound:
    """Per (m, k, n): a time no k_mt with q K chunks can beat (K padded to one k-step only)."""

    floor: np.ndarray  # dispatch + compute time
    fixed_s: np.ndarray  # DRAM time of the bytes and of the runs that do not depend on q
    per_chunk_s: np.ndarray  # DRAM time of the run overheads per K chunk (A, and B column-major)

    def at(self, idx: np.ndarray, q: np.ndarray) -> np.ndarray:
        chunks = np.where(q > 1, q, 0) * self.per_chunk_s[idx]
        return np.asarray(np.maximum(self.floor[idx], self.fixed_s[idx] + chunks), dtype=np.float64)


def _bound(pr: Workload, e: Estimate, p: Params) -> _Bound:
    dram = p.dram[pr.base.dev.name]
    bw = dram.peak_gbps * 1e9
    tr = e.traffic
    Kp = e.padded[1]
    fixed_runs = tr["C"].effective_runs(dram.page_sharing)
    if pr.base.layout.a_col_maj:  # A^T's runs are its K rows, however K is chunked
        per_chunk = np.zeros_like(tr["A"].bytes)
        fixed_runs = fixed_runs + tr["A"].effective_runs(dram.page_sharing)
    else:  # one run per row (of tiles) of A per chunk
        per_chunk = tr["A"].bytes / (Kp * dma.run_bytes(pr.base.types.dtype_in))
    if pr.b_chunked:
        per_chunk = per_chunk + tr["B"].bytes / (Kp * dma.run_bytes(str(pr.base.types.dtype_b)))
    else:
        fixed_runs = fixed_runs + tr["B"].effective_runs(dram.page_sharing)
    nbytes = tr["A"].bytes + tr["B"].bytes + tr["C"].bytes * dram.write_cost
    lost = dram.run_overhead_bytes
    return _Bound(np.asarray(p.dispatch_us * 1e-6 + e.t_core), np.asarray((nbytes + fixed_runs * lost) / bw),
                  np.asarray(per_chunk * lost / bw))


def _fits_ahead(pr: Workload, m: np.ndarray, k: np.ndarray, n: np.ndarray, rho: np.ndarray, active: np.ndarray,
                j: np.ndarray, rounds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each of the next `rounds` rounds of rank_all's k_mt walk, the candidates it would ask about if none
    were pruned (ascending) and whether space.k_mt_fit accepts each at its k_mt, asked in one call."""
    planned, kmts = [], []
    j = j.copy()
    for _ in range(rounds):
        if active.size == 0:
            break
        planned.append(active)
        kmts.append(j[active] * k[active])
        active = active[j[active] > 1]
        j[active] = _smallest_j(pr.K, k[active], -(-pr.K // ((j[active] - 1) * k[active])))
    idx, kmt = np.concatenate(planned), np.concatenate(kmts)
    ok = space.k_mt_fit(pr.base, pr.size, m[idx], k[idx], n[idx], kmt, rho[idx])
    return list(zip(planned, np.split(ok, np.cumsum([a.size for a in planned])[:-1])))


def _smallest_j(K: int, k: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The smallest k_mt / k that still covers K in q chunks."""
    return np.asarray(-(-K // (q * k)), dtype=np.int64)


Ranked = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int]


def rank_all(pr: Workload, pins: Pins, top: int, p: Params, per_tiling: bool = False
              ) -> Ranked:
    """Model times of the candidates (m, k, n, k_mt, rho, time, tilings, evaluated); with per_tiling,
    at least the best k_mt of every (m, k, n, rho)."""
    listed = space.tilings(pr.base, pr.size, pins)
    tilings = listed.size
    if tilings == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, empty, empty, np.zeros(0), 0, 0
    kept = listed.take(space.mask(pr.base, pr.size, listed, pins))
    m, k, n, rho = kept
    K1 = round_up(pr.K, k)
    bound = _bound(pr, estimate(pr, m, k, n, K1, p, rho=rho), p)  # K padded to one k-step: below every k_mt
    out_idx: list[np.ndarray] = []
    out_kmt: list[np.ndarray] = []
    out_time: list[np.ndarray] = []
    if pins.k_mt is not None:
        kmt = np.full(m.shape, int(pins.k_mt), dtype=np.int64)
        idx = np.nonzero(space.k_mt_fit(pr.base, pr.size, m, k, n, kmt, rho))[0]
        e = estimate(pr, m[idx], k[idx], n[idx], kmt[idx], p, rho=rho[idx])
        out_idx.append(idx)
        out_kmt.append(kmt[idx])
        out_time.append(e.time)
    else:
        # j = k_mt / k: start from the fewest K chunks the BD fields and memtiles allow, then step to the
        # smallest j of each next chunk count (the one k_mt per padding class that is not dominated)
        j_hi = space.k_mt_steps_max(pr.base, pr.size, kept)
        j = _smallest_j(pr.K, k, -(-pr.K // (np.maximum(j_hi, 1) * k)))
        active = np.arange(m.size)
        threshold = np.inf
        found = 0
        own_best = np.full(m.size, np.inf)
        ahead: list[tuple[np.ndarray, np.ndarray]] = []  # the rules' verdicts for the rounds ahead
        rounds = 1
        for _ in range(MAX_ROUNDS):
            if active.size == 0:
                break
            if not ahead:
                ahead = _fits_ahead(pr, m, k, n, rho, active, j, rounds)
                # while no time can prune a candidate, the rounds ahead are exactly the rounds to come: ask the
                # rules about twice as many at once each time (a problem no tiling serves walks every k_mt of every
                # one); after, AHEAD at once (asking of a few candidates pruned meanwhile costs less than asking
                # round by round)
                rounds = rounds * 2 if threshold == np.inf and not per_tiling else AHEAD
            planned, verdict = ahead.pop(0)
            fit = verdict[np.searchsorted(planned, active)]
            kmt = j[active] * k[active]
            idx = active[fit]
            if idx.size:
                e = estimate(pr, m[idx], k[idx], n[idx], kmt[fit], p, rho=rho[idx])
                out_idx.append(idx)
                out_kmt.append(kmt[fit])
                out_time.append(e.time)
                found += idx.size
                own_best[idx] = np.minimum(own_best[idx], e.time)
                if found >= top:
                    threshold = float(np.partition(np.concatenate(out_time), top - 1)[top - 1])
            nxt = active[j[active] > 1]
            q_next = -(-pr.K // ((j[nxt] - 1) * k[nxt]))
            j[nxt] = _smallest_j(pr.K, k[nxt], q_next)
            if nxt.size:
                limit = own_best[nxt] if per_tiling else threshold
                keep = bound.at(nxt, q_next) < limit
                nxt, q_next = nxt[keep], q_next[keep]
            active = nxt
    if not out_idx:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, empty, empty, np.zeros(0), tilings, 0
    idx = np.concatenate(out_idx)
    kmt_all = np.concatenate(out_kmt)
    t_all = np.concatenate(out_time)
    return m[idx], k[idx], n[idx], kmt_all, rho[idx], t_all, tilings, int(idx.size)


RANKS = ("model", "pessimistic")  # rank by the prediction, or by its pessimistic end


def tune(pr: Workload, top: int = 5, pins: Pins | None = None,
         params: Params | None = None, ends: tuple[Params, Params] | None = None, rank: str = "model"
         ) -> TuneResult:
    """Rank every valid design of `pr` by predicted time (rank "pessimistic": by its time at the
    slow end of the constants' spreads, which the model's monotonicity makes the worst case); the
    finalists priced with their L1 plans, the best `top` kept. ConfigError (`refusal`) when none is valid."""
    start = time.perf_counter()
    p = params or load()
    slow, fast = ends or load_ends()
    if rank not in RANKS:
        raise ConfigError(f"unknown ranking {rank!r}", f"use {opt('rank', *RANKS)}")
    by = slow if rank == "pessimistic" else p
    pins = pins or Pins()
    check_problem(pr, pins)
    finalists = max(top, FINALISTS)
    m, k, n, kmt, rho, t, tilings, evaluated = rank_all(_ranked(pr), pins, finalists, by)
    # fastest first; ties: one that is as fast unspanned (today's sequence), longer k_mt, smaller C tile, lower rho
    spanned = t < estimate(pr, m, k, n, kmt, by, rho=rho).time if pr.base.options.task_span is None \
        else np.zeros(t.shape, dtype=bool)
    order = np.lexsort((rho, m * n, -kmt, spanned, t))[:finalists]
    if not order.size:
        raise refusal(pr, pins)
    # every ranked design keeps every rule (space.mask, space.k_mt_fit): the finalists with what the vectorised
    # ranking leaves out, their L1 plan's bank stalls
    found = [_candidate(weigh_span(pr.config(m[i], k[i], n[i], kmt[i], rho=int(rho[i])), by), p, slow, fast)
             for i in order]
    found = sorted(found, key=_rank_key(rank))[:top]
    return TuneResult(pr, found, evaluated, tilings, time.perf_counter() - start, rank=rank)


def refusal(pr: Workload, pins: Pins) -> ConfigError:
    """Why no tiling of `pr` is valid, in one line: the rule that refuses the candidate that keeps the most rules
    (space.RULES, in the order the config's check applies them), at the first k_mt the tuner would try, in the
    words of that candidate's own check."""
    types = pr.base.types
    what = f"no valid design for {pr.base.array.device} {pr.M}x{pr.K}x{pr.N} {types.dtype_in}->{types.dtype_out}"
    if pins.tiling_items():
        what += " with " + ", ".join(f"{k}={v}" for k, v in pins.tiling_items())
    listed = space.tilings(pr.base, pr.size, pins)
    if listed.size:
        m, k, n, rho = listed
        if pins.k_mt is not None:
            kmt = np.full(m.shape, int(pins.k_mt), dtype=np.int64)
        else:  # the fewest K chunks the BD fields and memtiles allow, as rank_all starts
            j_hi = space.k_mt_steps_max(pr.base, pr.size, listed)
            kmt = _smallest_j(pr.K, k, -(-pr.K // (np.maximum(j_hi, 1) * k))) * k
        first = space.broken(pr.base, pr.size, m, k, n, kmt, rho)
        i = int(np.argmax(first))
        rule = space.RULES[int(first[i])][0] if first[i] < len(space.RULES) else None
        if rule not in (None, "expansion"):
            try:
                check(pr.config(m[i], k[i], n[i], kmt[i], rho=int(rho[i])))
            except GemmGenError as e:
                return ConfigError(f"{what}; every tiling breaks a rule, e.g. m={m[i]} k={k[i]} n={n[i]} "
                                   f"k_mt={kmt[i]} rho={rho[i]}: {e.raw_what}", e.raw_fix)
    ex = pr.base.kernel.expansion  # space.mask keeps only the tiles a given expansion splits
    if ex is not None:
        return ConfigError(f"{what} whose tiles split into {opt('expansion', ex)} clusters",
                           f"use another {opt('expansion')} (or leave it out), or relax the fixed tile sizes")
    return ConfigError(what, "relax the fixed tile sizes or check the problem size")


def _ranked(pr: Workload) -> Workload:
    """The workload the vectorised ranking prices: with an open task span, spanned (padding.task_groups'
    bound: the model never prices more task groups faster); each finalist then takes the span its own
    design gives, or none where that is not faster (weigh_span)."""
    return pr.with_(task_span=0) if pr.base.options.task_span is None else pr


def weigh_span(config: GemmConfig, params: Params | None = None) -> GemmConfig:
    """For a checked config with an open task span: spanned (task_span 0, design/spans.py) when the model
    predicts it faster, else as it is (one task per output block, its build key unchanged)."""
    if config.options.task_span is not None:
        return config
    spanned = config.with_(task_span=0)
    try:
        faster = float(estimate_config(spanned, params).time) < float(estimate_config(config, params).time)
    except GemmGenError:  # a tiling the design refuses: its own checks say why, unspanned
        return config
    return spanned if faster else config


def _rank_key(rank: str) -> Callable[[Candidate], tuple[float, bool]]:
    """What orders validated candidates: the predicted time, or the pessimistic end's throughput; on a
    tie, one task per output block (today's sequence and build key) before a spanned design."""
    if rank == "pessimistic":
        return lambda cand: (-cand.tops_low, cand.config.runtime.task_span != 1)
    return lambda cand: (cand.time_s, cand.config.runtime.task_span != 1)


def check_problem(pr: Workload, pins: Pins | None = None) -> None:
    """The checks that do not depend on the tiling, with GemmConfig's own messages: what search.choose
    asks first, so that no model or tuner runs on options a rule refuses."""
    sizes = [("M", pr.M), ("K", pr.K), ("N", pr.N)]
    sizes += list((pins or Pins()).tiling_items())
    for name, value in sizes:
        if value < 1:
            raise ConfigError(f"{name}={value} must be positive", f"give {opt(name)} a size >= 1")
    r, s, t = pr.base.kernel.mmul  # raises for a device without a kernel for dtype_in
    # the largest tiles a core's share allows: if even these need too many runtime tasks, say so
    m = min(round_up(ceil_div(pr.M, pr.base.array.rows), 2 * r), round_up(TILE_EXTENT_SEARCH_MAX, 2 * r))
    n = min(round_up(ceil_div(pr.N, pr.base.array.cols), 2 * t), round_up(TILE_EXTENT_SEARCH_MAX, 2 * t))
    probe = pr.config(m, s, n, s, expansion=None, kernel_loops=None)  # the variant is the tile's, not checked here
    check_untiled(probe)
    check_expansion(pr.base)  # what the probe left out: a given expansion fits the registers (no tile needed)
    pinned = dict((pins or Pins()).tiling_items())  # the given sizes keep the tiles' granularity
    check_pinned_granularity(probe.with_(**pinned), set(pinned))


def _candidate(c: GemmConfig, p: Params, slow: Params, fast: Params) -> Candidate:
    # the closed form the space was ranked with (with the L1 bank stalls of the config's plan), for every finalist
    # alike: ranking configs, not pricing a built Design (predict does that: model/price.estimate)
    e = estimate_config(c, p)
    mem = sum(c.memtile_bytes_used())
    t_core, t_mem = float(e.t_core), float(e.t_mem)
    return Candidate(c, float(e.tops), float(e.time), float(e.compute_bound_tops), float(e.memory_bound_tops),
                     "memory" if t_mem > t_core else "compute", float(e.kernel_macs_per_cycle), c.l1_bytes,
                     c.l1_bytes / c.dev.l1_bytes, mem, mem / (c.dev.memtile_bytes * c.array.cols),
                     c.call.wasted_fraction, float(estimate_config(c, slow).tops), float(estimate_config(c, fast).tops))


def evaluate_all(pr: Workload, params: Params | None = None) -> dict[str, np.ndarray]:
    """Every valid (m, k, n) with its best k_mt and rho and predicted time (for the heat map)."""
    p = params or load()
    check_problem(pr)
    m, k, n, kmt, rho, t, _, _ = rank_all(_ranked(pr), Pins(), 1, p, per_tiling=True)
    order = np.lexsort((rho, kmt, n, k, m, t))  # per (m, k, n) keep the fastest
    m, k, n, kmt, rho, t = m[order], k[order], n[order], kmt[order], rho[order], t[order]
    keys = m * 10**12 + k * 10**6 + n
    _, first = np.unique(keys, return_index=True)
    return {"m": m[first], "k": k[first], "n": n[first], "k_mt": kmt[first], "rho": rho[first], "time": t[first],
            "tops": 2.0 * pr.macs / t[first] / 1e12}


def tune_variants(pr: Workload, variants: tuple[Variant, ...], top: int = 5, pins: Pins | None = None,
                  params: Params | None = None, ends: tuple[Params, Params] | None = None, rank: str = "model"
                  ) -> TuneResult:
    """tune() for each variant of the discrete knobs the options leave open (knobs.variants), merged by
    predicted time; a variant without a valid design drops out unless none has one (or only B's packing
    varies: then its refusal is the answer)."""
    chosen = {name for v in variants for name in v.chosen}
    # ties between variants: in the order the tuner has always listed them (B's packing, then the kernel, then
    # the mapping, the split placement last)
    order = sorted(variants, key=lambda v: (v.mapping == decode_split.SPLIT_MAPPING,
                                            B_PACKS.index(v.b_pack) if v.b_pack else 0, bool(v.convert_once),
                                            MAPPINGS.index(v.mapping) if v.mapping else 0))
    results: list[TuneResult] = []
    first_error: GemmGenError | None = None
    for variant in order:
        try:
            results.append(tune(replace(pr, base=variant.apply(pr.base)), top, pins, params, ends, rank))
        except GemmGenError as e:
            if chosen <= {"b_pack"}:
                raise
            first_error = first_error or e
    if not results:
        assert first_error is not None
        raise first_error
    merged = sorted((c for r in results for c in r.top), key=_rank_key(rank))[:top]
    return TuneResult(pr, merged, sum(r.evaluated for r in results), sum(r.tilings for r in results),
                      sum(r.seconds for r in results), sum(r.rejected_by_validate for r in results),
                      [n for r in results for n in r.notes], rank, "convert_once" in chosen, "mapping" in chosen)


def tuned_config(base: GemmConfig, k_mt: int | None = None, rho: int | None = None,
                 params: Params | None = None) -> GemmConfig:
    """`base` with the tuner's best m, k, n, rho (and k_mt, rho unless given) and task span where it was
    open; every other field kept."""

    best = tune(Workload.of(base), 1, Pins(k_mt=k_mt, rho=rho), params).best.config
    return base.with_(m=best.tiling.m, k=best.tiling.k, n=best.tiling.n, k_mt=best.tiling.k_mt, rho=best.tiling.rho,
                      task_span=best.options.task_span)


def tuned_k_mt(config: GemmConfig, params: Params | None = None) -> GemmConfig:
    """`config` with the tuner's best k_mt for its own m, k, n and rho. Unchanged when the tuner finds
    none (the tiles break a rule): checks.check_config then names the rule."""

    pins = Pins(config.tiling.m, config.tiling.k, config.tiling.n, rho=config.tiling.rho)
    try:
        best = tune(Workload.of(config), 1, pins, params).best.config
    except GemmGenError:
        return config
    return config.with_(k_mt=best.tiling.k_mt)
