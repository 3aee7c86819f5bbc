"""Choosing a design, one named step: `choose(request, params, measure)` turns a request (the options,
the size, what the user pinned) into a design. The space of tilings and the rules decide what is
valid, the model ranks it, and a measurement the caller passes in (as Triton's autotuner takes
`do_bench`) may re-rank the model's finalists. Where the options leave a discrete knob open (knobs.py:
the kernel, the mapping, B's packing), each variant gets its own tiles and the fastest by the model
wins. Only the application layer calls it, and says what it chose; nothing below it chooses."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from ..design.serve import check
from ..facts.errors import GemmGenError, ToolchainMissing
from ..model.params import Params, load
from ..model.perf import Workload, estimate_config
from ..spec.config import GemmConfig, default_k_mt, default_tiles
from ..spec.request import Pins, Request, Tiling, given
from ..spec.rules.defaults import resolve
from .knobs import KNOBS, Variant, several_sizes, variants
from .tune import Candidate, check_problem, tune, tuned_config, tuned_k_mt
from .tune_many import tune_many

# Seconds one call of a design takes, measured by the caller (app/limits.measure builds and runs it
# on the NPU); the search never imports a back end.
Measure = Callable[[GemmConfig], float]
MEASURED_FINALISTS = 5  # the model's best designs a measurement re-ranks


@dataclass(frozen=True)
class KernelOption:
    """One kernel the search weighed for an open convert-once option: its design (None when no
    design of that kernel is valid, with the reason) and the model's predicted time of one call
    (weighted over the sizes of a design that serves several; inf when there is none)."""

    convert_once: bool
    config: GemmConfig | None
    predicted_s: float
    why_not: str = ""
    error: GemmGenError | None = field(default=None, compare=False)  # why not, as raised

    @property
    def name(self) -> str:
        return KERNEL_NAMES[self.convert_once]


# what the two bf16 kernels on the bfp16 datapath are called where a choice between them is reported
KERNEL_NAMES = {False: "emulated (bf16 converted to bfp16 at every mmul)",
                True: "convert-once (A and B converted to bfp16 once per call / k-step)"}


@dataclass(frozen=True)
class Choice:
    """The design a request gets, what the search filled in (names of the tiling's fields, "b_pack"
    when a bfp16 or int4 B's packing was open, "convert_once" when the kernel was), each kernel it weighed
    for an open convert-once option (the chosen one first) and, when a measurement re-ranked the
    model's finalists, each finalist with its measured time (inf: it failed to build or run)."""

    config: GemmConfig
    filled: tuple[str, ...]
    measured: tuple[Candidate, ...] = ()
    kernels: tuple[KernelOption, ...] = ()

    @property
    def chose_anything(self) -> bool:
        return bool(self.filled)


def open_config(request: Request) -> GemmConfig:
    """The request as a config whose tiling is still open (0), with a pinned rho."""
    return GemmConfig(options=request.options, tiling=Tiling(0, 0, 0, 0, request.pins.rho or 1),
                      size=request.problem)


def choose(request: Request, params: Params | None = None, measure: Measure | None = None) -> Choice:
    """The one way from a request to a design. The tiling's open sizes come from the model: for
    several `pins.sizes`, the design with the least weighted time over them that keeps the pinned ones
    (search/tune_many.py); for one problem all of them when none is pinned, else the paper's defaults
    with the model's k_mt. The discrete knobs the options leave open (knobs.KNOBS: the kernel, the
    mapping, B's packing) are its choice too: each variant (knobs.variants) gets its own tiles, and the
    fastest predicted valid one wins (on a tie the first in the list's order). With `measure`, a tiling
    left wholly open is the fastest measured of the model's MEASURED_FINALISTS best designs (of either
    kernel; a finalist that fails to build or run scores inf)."""
    pins, p = request.pins, params or load()
    # the rules that need no tiling refuse first: the model below must never price options they refuse
    # (a bfp16 A or C column-major, an epilogue on int4 weights: the model read them as scalar types)
    base = open_config(request)
    check_problem(Workload.of(base), pins)
    weighed = [_weigh(v, base, pins, p) for v in variants(base, pins)]
    kernels = _kernel_options(weighed)
    viable = [kern for kern in kernels if kern.config is not None]
    valid = [w for w in weighed if w.config is not None]
    if valid:  # the fastest predicted variant; on a tie the first in the list's order
        best = min(valid, key=lambda w: w.predicted_s)
    else:  # none valid: the default kernel's first variant, whose own checks (or its search) name the problem
        default = resolve(request.options).kernel.convert_once
        best = next(w for w in weighed if w.variant.convert_once in (None, default))
        if best.design is None:
            assert best.error is not None
            raise best.error
    config = best.config or best.design
    assert config is not None
    wholly_open = pins.m is pins.k is pins.n is None and not several_sizes(pins)
    filled = tuple(name for name in ("m", "k", "n", "k_mt") if getattr(pins, name) is None)
    if filled and pins.rho is None and (several_sizes(pins) or wholly_open):
        filled += ("rho",)
    # a kernel is chosen only where one is valid (with none, the default kernel's own checks speak)
    filled += tuple(name for name in best.variant.chosen if valid or name != "convert_once")
    filled += tuple(k.name for k in KNOBS if k.with_tiles and k.left_open(base)  # the tile search filled it
                    and k.name in given(config.options))
    if measure is None or not wholly_open:  # only a wholly open tiling has finalists to measure
        return Choice(config, filled, kernels=kernels)
    # the tuner's candidates are the configs' options with their tiling: what the caller measures
    bases = [kern.config for kern in viable] or [config]
    finalists = sorted((c for b in bases if b is not None
                        for c in tune(Workload.of(b), MEASURED_FINALISTS, Pins(k_mt=pins.k_mt, rho=pins.rho), p).top),
                       key=lambda c: c.time_s)[:MEASURED_FINALISTS]
    measured = measure_candidates(finalists, measure)  # fastest first
    return Choice(measured[0].config, filled, tuple(measured), kernels)


@dataclass(frozen=True)
class _Weighed:
    """One variant with the design the search gives it (None when finding its tiles failed), that
    design when valid (`config`), its predicted time (inf when not valid) and why not."""

    variant: Variant
    design: GemmConfig | None
    config: GemmConfig | None
    predicted_s: float
    error: GemmGenError | None = None


def _weigh(variant: Variant, base: GemmConfig, pins: Pins, p: Params) -> _Weighed:
    """A variant's design (its own tiles, the request's pins kept), checked, and its predicted time."""
    try:
        design = _tiled(variant.apply(base), pins, p)
    except GemmGenError as e:
        return _Weighed(variant, None, None, math.inf, e)
    try:
        config = check(design)
    except GemmGenError as e:
        return _Weighed(variant, design, None, math.inf, e)
    return _Weighed(variant, design, config, _predicted_s(config, pins, p))


def _kernel_options(weighed: Sequence[_Weighed]) -> tuple[KernelOption, ...]:
    """Each kernel of an open convert-once option, with its fastest valid variant's design and predicted
    time, the faster first (ties: the emulated kernel); () when the option is given or only one kernel
    can run."""
    out = []
    for once in (False, True):
        own = [w for w in weighed if w.variant.convert_once is once]
        if not own:
            return ()
        ok = [w for w in own if w.config is not None]
        if ok:
            best = min(ok, key=lambda w: w.predicted_s)
            out.append(KernelOption(once, best.config, best.predicted_s))
        else:
            assert own[0].error is not None
            out.append(KernelOption(once, None, math.inf, own[0].error.what, own[0].error))
    return tuple(sorted(out, key=lambda kern: (kern.predicted_s, kern.convert_once)))


def _predicted_s(config: GemmConfig, pins: Pins, p: Params) -> float:
    """The model's time of the design's call, or its weighted time over several sizes (as tune_many
    weighs them)."""
    if not several_sizes(pins):
        return float(estimate_config(config, p).time)
    sizes = tuple(pins.sizes or ())
    weights = pins.weights or (1.0,) * len(sizes)
    return sum(float(w) * float(estimate_config(config, p, call=s).time) for s, w in zip(sizes, weights))


def measure_candidates(cands: Sequence[Candidate], measure: Measure) -> list[Candidate]:
    """Each candidate with its measured time, fastest first; one that fails to build or run scores
    inf and the batch goes on. A missing toolchain stops it (nothing could be measured)."""
    out = []
    for c in cands:
        try:
            seconds = float(measure(c.config))
        except ToolchainMissing:
            raise
        except GemmGenError:
            seconds = math.inf
        out.append(replace(c, measured_s=seconds))
    return sorted(out, key=lambda c: c.measured_s if c.measured_s is not None else math.inf)


def _tiled(base: GemmConfig, pins: Pins, p: Params) -> GemmConfig:
    """The model's design for `base` (its discrete knobs as given) with what `pins` leaves open filled in."""
    m, k, n, k_mt, rho = pins.m, pins.k, pins.n, pins.k_mt, pins.rho
    if several_sizes(pins) and None in (m, k, n, k_mt):
        return tune_many(base, tuple(pins.sizes or ()), None if pins.weights is None else tuple(pins.weights), pins,
                         p).config
    if m is None and k is None and n is None:  # an open task span is weighed with the tiles (tune)
        return tuned_config(base, k_mt, rho, p)
    dev, t = base.array.device, base.types
    dm, dk, dn, _ = default_tiles(dev, t.dtype_in, t.dtype_out, None, base.kernel.emulate_bf16_with_bfp16,
                                  t.dtype_b, t.acc)
    kk = dk if k is None else k
    config = base.with_(m=dm if m is None else m, k=kk, n=dn if n is None else n,
                        k_mt=default_k_mt(dev, t.dtype_in, t.dtype_out, kk, base.size.K, t.dtype_b, t.acc)
                        if k_mt is None else k_mt)
    # pinned tiles keep one task per block; an open k_mt is the model's for them
    return tuned_k_mt(config, p) if k_mt is None else config
