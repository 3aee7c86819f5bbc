"""predict(): the model applied to one GemmConfig, with its traffic read from the built Design."""

from __future__ import annotations

from typing import Any

from ..config import GemmConfig
from ..design import build_design
from ..design.keys import design_keys
from ..design.model import Design
from ..errors import ConfigError
from .kernel import cluster_terms, overhead
from .params import Params, load, load_ends
from .perf import Estimate, Workload, estimate_config
from .traffic import design_traffic


def tasks_per_group(design: Design) -> int:
    """Shim tasks the command processor configures per output block (the first group's)."""
    return sum(1 for t in design.tasks if t.group == 0)


def estimate_design(design: Design, params: Params | None = None) -> Estimate:
    """The model on a built Design: its traffic, its task groups and its L1 plan."""
    return estimate_config(design.config, params, design_traffic(design), tasks_per_group(design), design.l1)


def predict(config: GemmConfig, params: Params | None = None,
            ends: tuple[Params, Params] | None = None) -> dict[str, Any]:
    """Everything `gemm-gen predict --json` prints for one design (all values predicted), with
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
    info = prediction_json(config, estimate_design(design, p), p, design)
    slow, fast = ends or load_ends()
    info["tops_low"] = _f(estimate_design(design, slow).tops)
    info["tops_high"] = _f(estimate_design(design, fast).tops)
    info["buildable"] = reason is None
    info["not_buildable_because"] = reason
    return info


def _f(x: Any) -> float:
    return float(x)


def prediction_json(c: GemmConfig, e: Estimate, p: Params, design: Design | None = None) -> dict[str, Any]:
    dev = c.dev
    peak = dev.peak_macs[c.dtype_in]
    v = c.variant
    terms = cluster_terms(p, Workload.of(c).kernel_shape, v.expansion)
    col_clusters = c.n // (v.et * c.t)
    buffers = design.memtile_buffers if design is not None else c.memtile_placement()
    mem = [sum(b.nbytes for b in buffers if b.home_col == col) for col in range(dev.target(c.cols)[1])]
    dram_total = sum(_f(t.bytes) for t in e.traffic.values())
    t_mem = _f(e.t_mem)
    return {
        "predicted": True,
        "model": "gemm_gen.model (analytical; see docs/model.md)",
        **design_keys(c).to_json(),
        "emulate_bf16_with_bfp16": c.emulate_bf16_with_bfp16,
        "padded": [int(x) for x in e.padded],
        "tops": _f(e.tops),
        "time_s": _f(e.time),
        "time_us": _f(e.time) * 1e6,
        "bound": "memory" if t_mem > _f(e.t_core) else "compute",
        "compute_bound_tops": _f(e.compute_bound_tops),
        "memory_bound_tops": _f(e.memory_bound_tops),
        "peak_tops": dev.peak_tops(c.dtype_in),
        "core_macs_per_cycle": _f(e.kernel_macs_per_cycle),
        "core_efficiency": _f(e.kernel_macs_per_cycle) / peak,
        "core_macs_per_cycle_in_array": _f(e.core_macs_per_cycle),
        "kernel_cycles_per_call": _f(e.kernel_cycles),
        "kernel_variant": v.name,
        "kernel_model": {"variant": v.name, "accumulators_per_cluster": v.chains, "loops": v.loops,
                         "ii": terms["ii"],
                         "overhead_per_cluster": _f(overhead(terms, v.loops, col_clusters)),
                         "serial_overhead_per_cluster": terms["serial_overhead"],
                         "accumulator_sets": terms["acc_sets"]},
        "machine": p.dram[dev.name].machine,
        "dram_peak_gbps": p.dram[dev.name].peak_gbps,
        "times_us": {"core": _f(e.t_core) * 1e6, "memory": t_mem * 1e6, "dram": _f(e.t_dram) * 1e6,
                     "shim_streams": _f(e.t_port) * 1e6, "stream_in_flight": _f(e.t_stream) * 1e6,
                     "fill": _f(e.t_fill) * 1e6,
                     "drain": _f(e.t_drain) * 1e6, "bd_bubbles": _f(e.t_bubbles) * 1e6,
                     "dispatch": e.t_dispatch * 1e6},
        "dram": {name: {"bytes": int(_f(t.bytes)), "runs": int(_f(t.runs)), "run_bytes": _f(t.run_bytes),
                        "effective_gbps": _f(e.effective_gbps[name])} for name, t in e.traffic.items()},
        "dram_bytes_total": int(dram_total),
        "effective_dram_gbps": dram_total / _f(e.t_dram) / 1e9,
        "task_groups": int(_f(e.groups)),
        "l1_bytes": c.l1_bytes,
        "l1_fraction": c.l1_bytes / dev.l1_bytes,
        "l2_bytes": sum(mem),
        "l2_fraction": sum(mem) / (dev.memtile_bytes * c.cols),
    }
