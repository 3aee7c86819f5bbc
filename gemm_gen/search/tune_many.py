"""One design for many sizes: the tiling whose predicted time, weighted over the sizes, is least,
and what each size loses against a design specialised for it (every time here is a prediction).

Candidates are the tuner's best designs for the largest size (the xclbin is built for the maxima)
and each size's own best tiling; all of them are priced at every size with the vectorised model
(a call's blocks cover its sizes whole, and a design that reads its k-steps from runtime
parameters pays their writes per call), and the best that every rule of the build and of each size's call keeps
(space.mask, space.k_mt_fit, space.serves: design.serve's rules over all candidates at once) wins.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..design.serve import check, serve
from ..facts.errors import ConfigError, GemmGenError
from ..model.params import Params, load
from ..model.perf import Workload, estimate, estimate_config
from ..spec.call import check_weights
from ..spec.config import GemmConfig
from ..spec.request import Pins, Problem
from . import space
from .tune import rank_all, tune

CANDIDATES = 48  # designs of the largest size that enter the ranking over all sizes


@dataclass(frozen=True)
class SizeLoss:
    """One size: its predicted time on the shared design and on its own best design."""

    size: Problem
    weight: float
    shared_s: float
    special_s: float | None  # None: no design of its own (the tuner found none)
    special: GemmConfig | None

    @property
    def loss(self) -> float | None:
        """How much longer the shared design takes than the specialised one (0.1 = 10%)."""
        return None if self.special_s is None else self.shared_s / self.special_s - 1.0

    def to_json(self) -> dict[str, Any]:
        sp = self.special
        return {"size": str(self.size), "weight": self.weight, "predicted_time_us": self.shared_s * 1e6,
                "predicted_tops": 2.0 * self.size.macs / self.shared_s / 1e12,
                "specialised": None if sp is None or self.special_s is None else
                {"m": sp.tiling.m, "k": sp.tiling.k, "n": sp.tiling.n, "k_mt": sp.tiling.k_mt, "rho": sp.tiling.rho,
                 "predicted_time_us": self.special_s * 1e6,
                 "predicted_tops": 2.0 * self.size.macs / self.special_s / 1e12},
                "loss": self.loss}


@dataclass
class ManyResult:
    config: GemmConfig  # the shared design, built for the maxima
    sizes: list[SizeLoss]
    candidates: int
    seconds: float

    def total(self, which: str) -> float:
        """Weighted predicted seconds over the sizes ("shared" or "special"; sizes without a
        specialised design count at their shared time)."""
        return sum(s.weight * (s.shared_s if which == "shared" or s.special_s is None else s.special_s)
                   for s in self.sizes)

    def to_json(self) -> dict[str, Any]:
        c = self.config
        return {"predicted": True, "device": c.array.device, "built_for": [c.size.M, c.size.K, c.size.N],
                "runtime_sizes": c.runtime.runtime_sizes, "m": c.tiling.m, "k": c.tiling.k, "n": c.tiling.n,
                "k_mt": c.tiling.k_mt, "rho": c.tiling.rho,
                "candidates": self.candidates, "search_seconds": self.seconds,
                "weighted_time_us": {"shared": self.total("shared") * 1e6, "specialised": self.total("special") * 1e6},
                "sizes": [s.to_json() for s in self.sizes]}


EXACT_FINALISTS = 8  # per span variant, the valid head of the ranking priced exactly (it bounds a span's groups)


def _loss(config: GemmConfig, size: Problem, weight: float, special: tuple[float, GemmConfig] | None,
          p: Params) -> SizeLoss:
    """One size on the shared design, against the better of the tuner's design for that size and
    the shared tiling built for that size alone (which the tuner's ranking may have left out)."""
    shared = float(estimate_config(config, p, call=size).time)
    alone = config.with_(M=size.M, K=size.K, N=size.N, runtime_sizes="fixed")
    try:
        check(alone)
        own = (float(estimate_config(alone, p).time), alone)
    except GemmGenError:
        own = None
    best = min((x for x in (special, own) if x is not None), key=lambda x: x[0], default=None)
    return SizeLoss(size, weight, shared, None if best is None else best[0], None if best is None else best[1])


def tune_many(base: GemmConfig, sizes: tuple[Problem, ...], weights: tuple[float, ...] | None = None,
              pins: Pins | None = None, params: Params | None = None) -> ManyResult:
    """The design (base's options, built for its M, K, N, which must cover every size) that
    minimises the weighted predicted time over `sizes`, with each size's loss against its own."""
    start = time.perf_counter()
    p = params or load()
    pins = pins or Pins()
    # An open task span: every candidate is ranked with one task per output block and spanned (task_span 0,
    # design/spans.py), each variant by its own weighted time; the ranking prices a span by a bound on its
    # task groups (padding.task_groups), so the valid head of it is priced exactly (estimate_config, as
    # tune.weigh_span does) and the fastest of those wins. A given span is kept, in the specials too.
    span_open = base.options.task_span is None
    ranked_base = base.with_(task_span=1) if span_open else base
    weights = weights or (1.0,) * len(sizes)
    if len(weights) != len(sizes):
        raise ConfigError(f"{len(weights)} weights for {len(sizes)} sizes", "give one weight per size")
    check_weights(tuple(weights))
    merged: dict[Problem, float] = {}  # a size listed twice is one size called twice as often
    for size, wt in zip(sizes, weights):
        merged[size] = merged.get(size, 0.0) + float(wt)
    sizes, weights = tuple(merged), tuple(merged.values())
    top = Workload.of(ranked_base)
    m, k, n, kmt, rho, _, _, _ = rank_all(top, pins, CANDIDATES, p)
    cands = {(int(a), int(b), int(c), int(d), int(e)) for a, b, c, d, e in zip(m, k, n, kmt, rho)}
    specials: list[tuple[float, GemmConfig] | None] = []
    for size in sizes:  # each size's own best design (a fixed one: no runtime parameters)
        own = top.with_(M=size.M, K=size.K, N=size.N, runtime_sizes="fixed", task_span=base.options.task_span)
        try:
            best = tune(own, 1, pins, p).best
        except GemmGenError:
            specials.append(None)
            continue
        specials.append((best.time_s, best.config))
        cf = best.config
        cands.add((cf.tiling.m, cf.tiling.k, cf.tiling.n, cf.tiling.k_mt, cf.tiling.rho))
    if not cands:
        raise ConfigError(f"no valid design for the largest size {base.size.M}x{base.size.K}x{base.size.N}",
                          "relax the fixed tile sizes or split the sizes into several designs")
    arr = np.array(sorted(cands), dtype=np.int64).T
    w = np.asarray(weights, dtype=np.float64)

    def weighted(cfg: GemmConfig) -> np.ndarray:
        return w @ np.stack([estimate(Workload.of(cfg, s), arr[0], arr[1], arr[2], arr[3], p, rho=arr[4]).time
                             for s in sizes])

    spans = (None, 0) if span_open else (base.options.task_span,)  # None: one task per block, the key unchanged
    totals = np.concatenate([weighted(ranked_base if span is None else base.with_(task_span=span)) for span in spans])
    index = np.tile(np.arange(arr.shape[1]), len(spans))
    variant = np.repeat(np.arange(len(spans)), arr.shape[1])
    # ties: larger k_mt, then fewer MACs per tile, then smaller rho (as before spans), then one task per block
    order = np.lexsort((variant, arr[4][index], (arr[0] * arr[2])[index], -arr[3][index], totals))
    # every rule of the design built for the largest size, and of each size's call (space.serves): what
    # design.serve says of each candidate, over all of them at once (nothing is validated one by one)
    ok = space.mask(base, base.size, space.Tilings(arr[0], arr[1], arr[2], arr[4]), Pins()) & space.k_mt_fit(
        base, base.size, arr[0], arr[1], arr[2], arr[3], arr[4])
    for s in sizes:
        ok &= space.serves(base, s, arr[0], arr[1], arr[2], arr[3], arr[4])
    valid: list[GemmConfig] = []
    per_variant = [0] * len(spans)
    for e in order:
        i = int(index[e])
        v = int(variant[e])
        if per_variant[v] == EXACT_FINALISTS or not ok[i]:
            continue
        valid.append(base.with_(m=int(arr[0, i]), k=int(arr[1, i]), n=int(arr[2, i]), k_mt=int(arr[3, i]),
                                rho=int(arr[4, i]), task_span=spans[v]))
        per_variant[v] += 1
        if min(per_variant) == EXACT_FINALISTS:
            break
    if valid:
        exact = [sum(float(wt) * float(estimate_config(c, p, call=s).time) for s, wt in zip(sizes, weights))
                 for c in valid]
        chosen = valid[int(np.argmin(exact))]  # the first of equals: the ranking's order
        losses = [_loss(chosen, s, float(wt), sp, p) for s, wt, sp in zip(sizes, weights, specials)]
        return ManyResult(chosen, losses, len(cands), time.perf_counter() - start)
    what = f"no design serves all {len(sizes)} sizes"
    i = int(index[order[0]])
    first = base.with_(m=int(arr[0, i]), k=int(arr[1, i]), n=int(arr[2, i]), k_mt=int(arr[3, i]), rho=int(arr[4, i]))
    try:  # the best-ranked one's own check names the rule
        check(first)
        for s in sizes:
            serve(first, s)
    except GemmGenError as err:
        raise ConfigError(f"{what}; the best-ranked one fails: {err.raw_what}", err.raw_fix) from None
    raise ConfigError(what, "split the sizes into several designs")  # pragma: no cover - the rules refused it
