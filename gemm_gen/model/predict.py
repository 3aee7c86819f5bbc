"""predict(): the model applied to one GemmConfig's built Design (model/price.estimate), with what it reports."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..design import build_design
from ..design.ir import Design
from ..design.keys import DesignKeys, design_keys
from ..facts.epilogue import Epilogue
from ..facts.errors import ConfigError
from ..spec.config import GemmConfig
from ..spec.rules.dequant import to_bfp16
from . import dequant_cost, epilogue_cost, shared_cost
from . import kernel as kmod
from .kernel import cluster_terms, overhead
from .params import Params, load, load_ends
from .perf import Estimate, Workload
from .price import estimate
from .roof import DramRoof, dram_roof

MODEL = "gemm_gen.model (analytical; see docs/model.md)"  # what predict --json names as its source


@dataclass(frozen=True)
class KernelModel:
    """How the model reads the kernel variant: its chain cluster's II and serial overhead in cycles."""

    variant: str
    accumulators_per_cluster: int
    loops: str
    ii: float
    overhead_per_cluster: float
    serial_overhead_per_cluster: float
    accumulator_sets: int

    def to_json(self) -> dict[str, object]:
        return {"variant": self.variant, "accumulators_per_cluster": self.accumulators_per_cluster,
                "loops": self.loops, "ii": self.ii, "overhead_per_cluster": self.overhead_per_cluster,
                "serial_overhead_per_cluster": self.serial_overhead_per_cluster,
                "accumulator_sets": self.accumulator_sets}


@dataclass(frozen=True)
class Times:
    """The parts of the predicted time, in microseconds (model/perf.py names them t_*)."""

    core: float
    memory: float
    dram: float
    shim_streams: float
    stream_in_flight: float
    fill: float
    drain: float
    bd_bubbles: float
    dispatch: float

    def to_json(self) -> dict[str, float]:
        return {"core": self.core, "memory": self.memory, "dram": self.dram, "shim_streams": self.shim_streams,
                "stream_in_flight": self.stream_in_flight, "fill": self.fill, "drain": self.drain,
                "bd_bubbles": self.bd_bubbles, "dispatch": self.dispatch}


@dataclass(frozen=True)
class DramStream:
    """One host tensor's DRAM traffic: bytes, contiguous runs, and the bandwidth its runs reach."""

    bytes: int
    runs: int
    run_bytes: float
    effective_gbps: float

    def to_json(self) -> dict[str, float]:
        return {"bytes": self.bytes, "runs": self.runs, "run_bytes": self.run_bytes,
                "effective_gbps": self.effective_gbps}


@dataclass(frozen=True)
class Upstream:
    """Our kernel against the published kernel it resembles, both priced by the model at this design's
    call tile (model/fit/upstream.py fills it; `gemm-gen predict` prints it): every rate a prediction
    but `published`, which is the source's own figure at its own tile."""

    kernel: str  # the published kernel, as the model reads its structure
    same_kernel: bool  # False: no published kernel has these types or conversions; the nearest one, a reference
    published: float  # its MACs/cycle as published (measured, or from the II its source reports)
    published_what: str  # what that figure is and at which tile
    ours: float  # predicted MACs/cycle of our kernel per call at this tile
    theirs: float  # predicted MACs/cycle of the published kernel's structure at this tile
    ratio: float  # ours / theirs
    verdict: str  # "slower", "at par" or "faster" (model/fit/upstream.versus)
    words: str  # the verdict as docs/model.md's table writes it
    note: str  # what else differs (C's type between calls), or ""

    def to_json(self) -> dict[str, object]:
        return {"predicted": True, "kernel": self.kernel, "same_kernel": self.same_kernel,
                "published_macs_per_cycle": self.published, "published_what": self.published_what,
                "ours_macs_per_cycle": self.ours, "theirs_macs_per_cycle": self.theirs, "ratio": self.ratio,
                "verdict": self.verdict, "words": self.words, "note": self.note}


@dataclass(frozen=True)
class EpilogueCharge:
    """What a fused epilogue adds to the prediction (model/epilogue_cost.py): UNCALIBRATED, no hardware
    figure exists."""

    what: str  # the epilogue, as Epilogue.to_json
    vector_ops_per_lanes: int  # vector operations per VECTOR_LANES values of C
    cycles_per_tile: float  # core cycles per output tile
    extra_b_objects_per_tile: int  # its tile on the core's B channel
    serves: tuple[str, ...] = ()  # the activations the build serves (a runtime activation: all its modes)
    # a runtime activation: each mode's predicted time (s) as this build and as a build of that mode alone
    specialised: tuple[tuple[str, float, float], ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"predicted": True, "calibrated": False, "epilogue": self.what,
                "vector_ops_per_16_lanes": self.vector_ops_per_lanes, "cycles_per_tile": self.cycles_per_tile,
                "extra_b_objects_per_tile": self.extra_b_objects_per_tile, "serves": list(self.serves),
                "specialised": [{"activation": a, "runtime_s": rt, "specialised_s": sp}
                                for a, rt, sp in self.specialised]}

    def text(self) -> str:
        line = (f"  epilogue     PREDICTED, uncalibrated: {self.what}, {self.vector_ops_per_lanes} vector ops per "
                f"16 values, {self.cycles_per_tile:,.0f} cycles per output tile"
                + (f", {self.extra_b_objects_per_tile} more B object per tile" if self.extra_b_objects_per_tile
                   else "") + f"; serves {', '.join(self.serves)}")
        if self.specialised:
            parts = [f"{a} {percent_faster(rt, sp)}" for a, rt, sp in self.specialised]
            line += ("\n  specialised  PREDICTED: a build of one activation instead of the runtime switch: "
                     + ", ".join(parts))
        return line


def percent_faster(runtime_s: float, specialised_s: float) -> str:
    """How the specialised build compares: 'x% faster', or 'no faster' (the model's verdict)."""
    gain = (runtime_s - specialised_s) / runtime_s if runtime_s > 0 else 0.0
    return f"{gain:.1%} faster" if gain > 0.0005 else "no faster"


@dataclass(frozen=True)
class Prediction:
    """Everything `gemm-gen predict` reports of one design; every number is predicted."""

    design: DesignKeys
    emulate_bf16_with_bfp16: bool
    padded: tuple[int, int, int]
    tops: float
    time_s: float
    bound: str  # "memory" or "compute"
    compute_bound_tops: float
    memory_bound_tops: float
    peak_tops: float
    core_macs_per_cycle: float  # per kernel call
    core_efficiency: float  # of the core's peak MACs per cycle
    core_macs_per_cycle_in_array: float  # with switching, zeroing and C drains
    kernel_cycles_per_call: float
    kernel_model: KernelModel
    machine: str  # the machine profile of the DRAM constants
    dram_peak_gbps: float
    times_us: Times
    dram: dict[str, DramStream]  # per host tensor
    dram_bytes_total: int
    effective_dram_gbps: float
    task_groups: int
    l1_bytes: int
    l1_fraction: float
    l2_bytes: int
    l2_fraction: float
    tops_low: float  # at the pessimistic end of the constants' spreads
    tops_high: float  # at the optimistic end
    not_buildable_because: str | None  # the budget a design breaks (predicted as if it fitted), else None
    # the published kernel ours resembles (`gemm-gen predict` adds it: model/fit/upstream.py); None when
    # not asked, or when no published kernel has these types
    upstream: Upstream | None = None
    # the fused epilogue's charge (model/epilogue_cost.py, uncalibrated): None without one
    epilogue: EpilogueCharge | None = None
    # the call's unavoidable bytes at the DRAM peak (model/roof.py); prediction() always fills it
    dram_roof: DramRoof | None = None
    # a W4A16 core's dequantization (model/dequant_cost.py, uncalibrated): None for any other config
    dequant: DequantCharge | None = None
    # neighbour-shared L1 (model/shared_cost.py, assumed): None without
    shared: SharedCharge | None = None

    @property
    def roof_fraction(self) -> float | None:
        """The share of the DRAM roof the predicted time reaches."""
        return None if self.dram_roof is None else self.dram_roof.fraction(self.time_s)

    @property
    def time_us(self) -> float:
        return self.time_s * 1e6

    @property
    def buildable(self) -> bool:
        return self.not_buildable_because is None

    def to_json(self) -> dict[str, object]:
        """What `gemm-gen predict --json` prints."""
        return {
            "predicted": True,
            "model": MODEL,
            **self.design.to_json(),
            "emulate_bf16_with_bfp16": self.emulate_bf16_with_bfp16,
            "padded": list(self.padded),
            "tops": self.tops,
            "time_s": self.time_s,
            "time_us": self.time_us,
            "bound": self.bound,
            "compute_bound_tops": self.compute_bound_tops,
            "memory_bound_tops": self.memory_bound_tops,
            "peak_tops": self.peak_tops,
            "core_macs_per_cycle": self.core_macs_per_cycle,
            "core_efficiency": self.core_efficiency,
            "core_macs_per_cycle_in_array": self.core_macs_per_cycle_in_array,
            "kernel_cycles_per_call": self.kernel_cycles_per_call,
            # predict names the variant where plan details it (the key keeps its place among the design's)
            "kernel_variant": self.kernel_model.variant,
            "kernel_model": self.kernel_model.to_json(),
            "machine": self.machine,
            "dram_peak_gbps": self.dram_peak_gbps,
            "times_us": self.times_us.to_json(),
            "dram": {name: t.to_json() for name, t in self.dram.items()},
            "dram_bytes_total": self.dram_bytes_total,
            "effective_dram_gbps": self.effective_dram_gbps,
            "task_groups": self.task_groups,
            "l1_bytes": self.l1_bytes,
            "l1_fraction": self.l1_fraction,
            "l2_bytes": self.l2_bytes,
            "l2_fraction": self.l2_fraction,
            "tops_low": self.tops_low,
            "tops_high": self.tops_high,
            "buildable": self.buildable,
            "not_buildable_because": self.not_buildable_because,
            "upstream": None if self.upstream is None else self.upstream.to_json(),
            # only with an epilogue: every epilogue-free prediction keeps its JSON
            **({} if self.epilogue is None else {"epilogue": self.epilogue.to_json()}),
            "dram_roof": None if self.dram_roof is None else self.dram_roof.to_json(self.time_s),
            # only for W4A16: every other prediction keeps its JSON
            **({} if self.dequant is None else {"dequant": self.dequant.to_json()}),
            # only with shared L1: every unshared prediction keeps its JSON
            **({} if self.shared is None else {"shared_l1": self.shared.to_json()}),
        }


@dataclass(frozen=True)
class DequantCharge:
    """What a W4A16 core's dequantization adds to the prediction (model/dequant_cost.py): UNCALIBRATED, no
    hardware figure exists."""

    group_size: int
    zero_points: bool
    vector_ops: float  # per vector of values
    values_per_vector: int
    cycles_per_object: float  # per k x n B object (one per k-step)
    k: int
    n: int
    core_us: float  # the charge over the call, per core (all cores dequantize in lockstep)
    core_share: float  # of the predicted core time
    into: str = "bf16"  # what the pass writes: bf16, or (npu2's convert-once kernel) bfp16 tiles

    def to_json(self) -> dict[str, object]:
        return {"predicted": True, "calibrated": False, "group_size": self.group_size, "into": self.into,
                "zero_points": self.zero_points, "vector_ops_per_vector": self.vector_ops,
                "values_per_vector": self.values_per_vector, "cycles_per_b_object": self.cycles_per_object,
                "b_object": [self.k, self.n], "core_us": self.core_us, "core_share": self.core_share}

    def text(self) -> str:
        return (f"  dequant      PREDICTED, uncalibrated: int4 B with a scale per {self.group_size} rows of K"
                + (" and zero points" if self.zero_points else "")
                + f", dequantized into {self.into}, {self.vector_ops:g} vector ops per {self.values_per_vector} "
                f"values, {self.cycles_per_object:,.0f} cycles per {self.k}x{self.n} B object; "
                f"{self.core_us:,.1f} us of each core's time ({self.core_share:.0%} of the core time)")


@dataclass(frozen=True)
class SharedCharge:
    """What neighbour-shared L1 changes in the prediction (model/shared_cost.py): PREDICTED, with its assumptions
    (two cores on one buffer, the relay's lag), none measured."""

    share: str
    b_streams: int  # memtile streams bringing one core's B objects side by side
    relay_cycles: float  # the follower's lag per object, exposed where the L1 transfer bounds a k-step
    two_reader_cycles: float  # per k-step, each core, waiting on the other reader's loads

    def to_json(self) -> dict[str, object]:
        return {"predicted": True, "measured": False, "share_l1": self.share, "b_streams": self.b_streams,
                "relay_cycles_per_object": self.relay_cycles, "two_reader_cycles_per_k_step": self.two_reader_cycles,
                "assumption": shared_cost.ASSUMPTION}

    def text(self) -> str:
        return (f"  shared L1    PREDICTED, assumed: {self.share}; B on {self.b_streams} stream(s) per core, relay "
                f"{self.relay_cycles:g} cycles per object where the L1 transfer bounds a k-step, "
                f"{self.two_reader_cycles:,.1f} cycles per k-step per core on the other reader's loads "
                f"(assumed: {shared_cost.ASSUMPTION})")


def shared_charge(design: Design, p: Params) -> SharedCharge | None:
    """The neighbour-shared L1 terms of `design`'s prediction (None without sharing)."""
    c = design.config
    share = c.array.share_l1
    if not design.shared:
        return None
    m, k, n = (np.asarray(x, dtype=np.int64) for x in (c.t_ma, c.tiling.k, c.tiling.n))
    calls = kmod.kernel_cycles(p, Workload.of(c).kernel_shape, m, k, n)
    return SharedCharge(share, shared_cost.b_streams(share), shared_cost.relay_cycles(share, p),
                        shared_cost.two_reader_cycles(c, _f(calls)))


def dequant_charge(design: Design, e: Estimate) -> DequantCharge | None:
    """The dequantization's charge in estimate `e` of a W4A16 design (None for any other design)."""
    b, dev = design.build, design.config.dev
    if not b.group_size:
        return None
    cycles = _f(e.extra["dequant_cycles_per_object"])  # type: ignore[arg-type]
    objects = _f(e.groups) * int(e.padded[1]) // b.k  # k-steps per output tile, over the tiles
    core_us = objects * cycles / (dev.clock_ghz * 1e9) * 1e6
    bfp16 = to_bfp16(b.group_size, b.convert_once)
    rows = int(dequant_cost.pass_rows(dev, b.k, b.group_size, b.mmul, bfp16))
    return DequantCharge(b.group_size, b.zero_points,
                         dequant_cost.ops_per_vector(dev, b.zero_points, b.mmul, bfp16, rows),
                         dequant_cost.values_per_vector(dev, b.mmul, bfp16), cycles, b.k, b.n,
                         core_us, core_us / (_f(e.t_core) * 1e6), "bfp16 tiles" if bfp16 else "bf16")


def predict(config: GemmConfig, params: Params | None = None,
            ends: tuple[Params, Params] | None = None) -> Prediction:
    """Everything `gemm-gen predict` reports of one design (all values predicted), with
    `tops_low` / `tops_high` from the pessimistic and optimistic ends of the constants' spreads
    (`ends`, default params.load_ends()).

    A design that breaks only an L1 or memtile budget (say a paper's chess-built tile under Peano's
    larger stack) is still predicted, marked not buildable with the reason; other errors raise.
    """
    try:
        design, reason = build_design(config), None
    except ConfigError as e:
        design, reason = build_design(config, budgets=False), str(e)  # raises unless a budget broke
    p = params or load()
    slow, fast = ends or load_ends()
    # the design priced once under each set of constants: the calibrated ones, then the two ends of their spreads
    # (tops_low / tops_high: the same design under other constants, another question)
    own = estimate(design, p)
    pred = prediction(design, own, p, _f(estimate(design, slow).tops), _f(estimate(design, fast).tops), reason)
    epi = design.build.epilogue
    if epi.is_identity:
        return pred
    charge = epilogue_charge(epi, design.build.m, design.build.n)
    if epi.runtime:  # the model decides whether a build of one activation would be faster, per activation
        # each mode priced as a build of that activation alone (another kernel: another question), against this
        # design's own time, read from its one pricing
        alone = [(a.value, _f(own.time), _f(estimate(design, p, epi.selected(a)).time)) for a in epi.modes]
        charge = replace(charge, specialised=tuple(alone))
    return replace(pred, epilogue=charge)


def epilogue_charge(epi: Epilogue, m: int, n: int) -> EpilogueCharge:
    """The epilogue's charge per m x n output tile (model/epilogue_cost.py)."""
    what = ", ".join(f"{k} {v}" for k, v in epi.to_json().items() if v not in (None, False, "none"))
    return EpilogueCharge(what, epilogue_cost.vector_ops(epi), _f(epilogue_cost.core_cycles(epi, m, n)),
                          epilogue_cost.extra_b_objects(epi), tuple(a.value for a in epi.modes))


def _f(x: Any) -> float:
    return float(x)


def prediction(design: Design, e: Estimate, p: Params, tops_low: float, tops_high: float,
               not_buildable_because: str | None) -> Prediction:
    """The record of one design's estimate `e` (under params `p`) and its range."""
    c = design.config
    dev = c.dev
    peak = dev.peak_macs[dev.operands(c.types.dtype_in, c.types.dtype_b)]
    v = design.build.variant
    terms = cluster_terms(p, Workload.of(c).kernel_shape, v.expansion)
    col_clusters = design.build.n // (v.et * design.build.mmul[2])
    mem = [sum(b.nbytes for b in design.memtile_buffers if b.home_col == col)
           for col in range(dev.target(c.array.cols)[1])]
    dram_total = sum(_f(t.bytes) for t in e.traffic.values())
    t_mem = _f(e.t_mem)
    return Prediction(
        design=design_keys(design),
        emulate_bf16_with_bfp16=design.build.emulate_bf16_with_bfp16,
        padded=(int(e.padded[0]), int(e.padded[1]), int(e.padded[2])),
        tops=_f(e.tops),
        time_s=_f(e.time),
        bound="memory" if t_mem > _f(e.t_core) else "compute",
        compute_bound_tops=_f(e.compute_bound_tops),
        memory_bound_tops=_f(e.memory_bound_tops),
        peak_tops=dev.peak_tops(dev.operands(c.types.dtype_in, c.types.dtype_b)),
        core_macs_per_cycle=_f(e.kernel_macs_per_cycle),
        core_efficiency=_f(e.kernel_macs_per_cycle) / peak,
        core_macs_per_cycle_in_array=_f(e.core_macs_per_cycle),
        kernel_cycles_per_call=_f(e.kernel_cycles),
        kernel_model=KernelModel(v.name, v.chains, v.loops, terms["ii"], _f(overhead(terms, v.loops, col_clusters)),
                                 terms["serial_overhead"], int(terms["acc_sets"])),
        machine=p.dram[dev.name].machine,
        dram_peak_gbps=p.dram[dev.name].peak_gbps,
        times_us=Times(core=_f(e.t_core) * 1e6, memory=t_mem * 1e6, dram=_f(e.t_dram) * 1e6,
                       shim_streams=_f(e.t_port) * 1e6, stream_in_flight=_f(e.t_stream) * 1e6,
                       fill=_f(e.t_fill) * 1e6, drain=_f(e.t_drain) * 1e6, bd_bubbles=_f(e.t_bubbles) * 1e6,
                       dispatch=e.t_dispatch * 1e6),
        dram={name: DramStream(int(_f(t.bytes)), int(_f(t.runs)), _f(t.run_bytes), _f(e.effective_gbps[name]))
              for name, t in e.traffic.items()},
        dram_bytes_total=int(dram_total),
        effective_dram_gbps=dram_total / _f(e.t_dram) / 1e9,
        task_groups=design.task_groups,
        l1_bytes=c.l1_bytes,
        l1_fraction=c.l1_bytes / dev.l1_bytes,
        l2_bytes=sum(mem),
        l2_fraction=sum(mem) / (dev.memtile_bytes * c.array.cols),
        tops_low=tops_low,
        tops_high=tops_high,
        not_buildable_because=not_buildable_because,
        dram_roof=dram_roof(dev.name, c.size, c.types.dtype_in, str(c.types.dtype_b), c.types.dtype_out, p,
                            c.groups.group_size, c.groups.zero_points),
        dequant=dequant_charge(design, e),
        shared=shared_charge(design, p),
    )
