"""Choosing a design, one named step: `choose(request, params, measure)` turns a request (the options,
the size, what the user pinned) into a design. The space of tilings and the rules decide what is
valid, the model ranks it, and a measurement the caller passes in (as Triton's autotuner takes
`do_bench`) may re-rank the model's finalists. Where the options leave the kernel open (npu2 bf16 on
the bfp16 datapath: the emulated kernel, or the one that converts A and B to bfp16 once), each kernel
gets its own tiles and the faster by the model wins. Only the application layer calls it, and says
what it chose; nothing below it chooses."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from ..config import GemmConfig, b_packs, default_k_mt, default_tiles
from ..design.serve import check
from ..errors import GemmGenError, ToolchainMissing
from ..model.params import Params, load
from ..model.perf import Workload, estimate_config
from ..rules import array, decode_split
from ..rules.defaults import resolve
from ..spec import Pins, Request, Tiling
from .tune import Candidate, check_problem, tune, tuned_b_pack, tuned_config, tuned_k_mt
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
    with the model's k_mt. A bfp16 or int4 B's packing is the model's choice too when the options leave it open (one
    problem only), and so is the kernel where the convert-once option is open and both kernels can run
    (`kernel_options`; each with its own tiles, the faster predicted wins). With `measure`, a tiling
    left wholly open is the fastest measured of the model's MEASURED_FINALISTS best designs (of either
    kernel; a finalist that fails to build or run scores inf)."""
    pins, p = request.pins, params or load()
    # the rules that need no tiling refuse first: the model below must never price options they refuse
    # (a bfp16 A or C column-major, an epilogue on int4 weights: the model read them as scalar types)
    check_problem(Workload.of(open_config(request)), pins)
    packing_open = request.options.b_pack is None
    kernels = kernel_options(request, p)
    viable = [kern for kern in kernels if kern.config is not None]
    if viable:  # the model's faster kernel, its choice written into the options
        config = viable[0].config
        assert config is not None
    elif kernels and pins.m is pins.k is pins.n is None and not _several_sizes(pins):
        # neither kernel has a valid design and the tiles were the tuner's: its refusal for the default kernel, the
        # one searching again would raise
        default = resolve(request.options).kernel.convert_once
        raise next(kern.error for kern in kernels if kern.convert_once == default and kern.error is not None)
    else:  # one kernel only (or neither valid with pinned tiles: the fallback's own checks name the problem)
        config = _chosen(open_config(request), pins, packing_open, p)
    wholly_open = pins.m is pins.k is pins.n is None and not _several_sizes(pins)
    filled = tuple(name for name in ("m", "k", "n", "k_mt") if getattr(pins, name) is None)
    if filled and pins.rho is None and (_several_sizes(pins) or wholly_open):
        filled += ("rho",)
    if packing_open and len(b_packs(config.types.t_b, config.groups.group_size, _split(config))) > 1 \
            and not _several_sizes(pins):
        filled += ("b_pack",)
    if viable:
        filled += ("convert_once",)
    if decode_weighed(open_config(request), pins):
        filled += ("mapping",)
    if request.options.task_span is None and config.options.task_span is not None:  # weigh_span spanned it
        filled += ("task_span",)
    if measure is None or not wholly_open:  # only a wholly open tiling has finalists to measure
        return Choice(config, filled, kernels=kernels)
    # the tuner's candidates are the configs' options with their tiling: what the caller measures
    bases = [kern.config for kern in viable] or [config]
    finalists = sorted((c for b in bases if b is not None
                        for c in tune(Workload.of(b), MEASURED_FINALISTS, Pins(k_mt=pins.k_mt, rho=pins.rho), p).top),
                       key=lambda c: c.time_s)[:MEASURED_FINALISTS]
    measured = measure_candidates(finalists, measure)  # fastest first
    return Choice(measured[0].config, filled, tuple(measured), kernels)


def kernel_options(request: Request, params: Params | None = None) -> tuple[KernelOption, ...]:
    """Each kernel of an open convert-once option (rules/defaults.py: `Resolved.convert_once_open`),
    with the design the search gives it (the request's pins kept, the rest tuned for that kernel's
    own L1) and its predicted time, the faster first (ties: the emulated kernel); () when the option
    is given or only one kernel can run."""
    if not resolve(request.options).convert_once_open:
        return ()
    p = params or load()
    out = []
    for once in (False, True):
        req = replace(request, options=replace(request.options, convert_once=once))
        try:
            config = check(_chosen(open_config(req), req.pins, req.options.b_pack is None, p))
        except GemmGenError as e:
            out.append(KernelOption(once, None, math.inf, e.what, e))
            continue
        out.append(KernelOption(once, config, _predicted_s(config, req.pins, p)))
    return tuple(sorted(out, key=lambda kern: (kern.predicted_s, kern.convert_once)))


def _predicted_s(config: GemmConfig, pins: Pins, p: Params) -> float:
    """The model's time of the design's call, or its weighted time over several sizes (as tune_many
    weighs them)."""
    if not _several_sizes(pins):
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


def _split(c: GemmConfig) -> bool:
    """Whether a config is the split decode placement (rules/decode_split.py)."""
    return decode_split.is_split(c.dev, c.array.rows, c.array.cols)


def _several_sizes(pins: Pins) -> bool:
    return pins.sizes is not None and len(set(pins.sizes)) > 1


def decode_weighed(base: GemmConfig, pins: Pins) -> bool:
    """Whether the search weighs the decode mapping against the whole array: the mapping is open
    (no rows given) and a call it serves is decode shaped (M <= DECODE_M_MAX)."""
    if base.options.rows != 0 or base.dev.core_rows == 1:
        return False
    sizes = tuple(pins.sizes or ()) if _several_sizes(pins) else (base.size,)
    return any(array.decode_call(s.M) for s in sizes)


def _chosen(base: GemmConfig, pins: Pins, packing_open: bool, p: Params) -> GemmConfig:
    """The model's design for `base` with what `pins` leaves open filled in; for an open mapping and
    decode-shaped calls, the whole array's, the decode mapping's and the split decode placement's designs
    (rules/decode_split.py: the columns left open), the fastest predicted (on a tie the first of them; one with
    no valid design drops out)."""
    whole = _chosen_mapping(base, pins, packing_open, p)
    if not decode_weighed(base, pins):
        return whole
    options = [base.with_(rows=1)]
    if base.options.cols == 0:
        options.append(base.with_(rows=1, cols=decode_split.virtual_columns(base.dev)))
    valid = []
    for config in [whole, *(_chosen_mapping(o, pins, packing_open, p) for o in options)]:
        try:
            valid.append(check(config))
        except GemmGenError:
            continue
    if not valid:
        return whole  # its own checks name the problem
    return min(valid, key=lambda c: _predicted_s(c, pins, p))


def _chosen_mapping(base: GemmConfig, pins: Pins, packing_open: bool, p: Params) -> GemmConfig:
    """The model's design for `base` (its mapping as given) with what `pins` leaves open filled in."""
    m, k, n, k_mt, rho = pins.m, pins.k, pins.n, pins.k_mt, pins.rho
    tuned = m is None and k is None and n is None
    if _several_sizes(pins) and None in (m, k, n, k_mt):
        return tune_many(base, tuple(pins.sizes or ()), None if pins.weights is None else tuple(pins.weights), pins,
                         p).config
    if tuned:
        config = base
    else:
        dev, t = base.array.device, base.types
        dm, dk, dn, _ = default_tiles(dev, t.dtype_in, t.dtype_out, None, base.kernel.emulate_bf16_with_bfp16,
                                      t.dtype_b, t.acc)
        kk = dk if k is None else k
        config = base.with_(m=dm if m is None else m, k=kk, n=dn if n is None else n,
                            k_mt=default_k_mt(dev, t.dtype_in, t.dtype_out, kk, base.size.K, t.dtype_b, t.acc)
                            if k_mt is None else k_mt)
    # the packing of a bfp16 or int4 B (not W4A16's) is the model's choice too
    if packing_open and len(b_packs(config.types.t_b, config.groups.group_size, _split(config))) > 1:
        return tuned_b_pack(config, tuned, k_mt, rho, p)
    if tuned:  # an open task span is weighed with the tiles (tune): pinned tiles keep one task per block
        return tuned_config(config, k_mt, rho, p)
    if k_mt is None:
        return tuned_k_mt(config, p)
    return config
