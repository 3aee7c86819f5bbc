"""Derive the calibrated parameters from the published data, and compare the model with the papers.

`derive()` recomputes every 'calibrated' entry of calibration.json from gemm_gen.model.fit.paper in a
fixed order (each step uses the values before it); `rows()` lists every comparison of the model
with a published number (scripts/model_table.py renders them into docs/model.md).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from ...design import build_design
from ...design.l1_banks import plan
from ...facts.devices import device
from ...facts.precision import ACC_OUT
from ...spec.config import GemmConfig
from ..kernel import block_cycles, kernel_cycles, kernel_shape
from ..l1_stall import stall_cycles
from ..params import CALIBRATION_FILE, CALIBRATION_PACKAGE, Params, dram_entry, from_raw, load, peak_entry, raw
from ..perf import Workload, estimate, estimate_config
from ..traffic import design_traffic
from . import paper

# ---- helpers -----------------------------------------------------------------------------------


@lru_cache(maxsize=64)
def _kernel_row_design(row: paper.KernelRow) -> tuple[Any, Any]:
    """The row's kernel in a whole-array design as the paper built it (xchesscc's 1 KiB stack,
    the papers' kernel and L1 allocation), and that design's L1 plan."""
    c = GemmConfig(row.device, 4 * row.m, 4 * row.k, 8 * row.n, row.m, row.k, row.n, row.k, row.dtype_in,
                   row.dtype_out, True, emulate_bf16_with_bfp16=row.emulate, compiler="chess", stack_bytes=1024,
                   expansion=paper.PAPER_EXPANSION, kernel_loops=paper.PAPER_LOOPS, convert_once=False,
                   l1_alloc=paper.PAPER_L1_ALLOC, acc=ACC_OUT)
    return c, plan(c, c.array.l1_alloc)


def kernel_macs(p: Params, row: paper.KernelRow) -> float:
    """The row's kernel as a trace sees it running in its design: its cycles per call and the L1
    bank stalls of the paper's allocation."""
    dev = device(row.device)
    ks = kernel_shape(dev, row.dtype_in, row.dtype_out, dev.mmul_shape(row.dtype_in, row.emulate), row.emulate,
                      expansion=paper.PAPER_EXPANSION, loops=paper.PAPER_LOOPS, compiler="chess")
    cyc = float(kernel_cycles(p, ks, np.array(row.m), np.array(row.k), np.array(row.n)))
    c, l1 = _kernel_row_design(row)
    return row.m * row.k * row.n / (cyc + stall_cycles(c, l1, cyc, p.l1_conflict))


def array_config(row: paper.ArrayRow, **kw: Any):  # noqa: ANN201 - GemmConfig
    fields: dict[str, Any] = {"emulate_bf16_with_bfp16": row.emulate, "depth_c_l1": row.depth_c_l1,
                              "queue_groups": row.queue_groups, "stack_bytes": row.stack_bytes,
                              # the papers keep C in its output type between calls (mlir-aie's kernels)
                              "dtype_b": row.dtype_b, "acc": row.acc or ACC_OUT, "rho": row.rho}
    fields["l1_alloc"] = paper.PAPER_L1_ALLOC
    if not paper.block_row(row):  # the papers' scalar kernels, as the model reads them, and as chess built them
        fields.update(expansion=paper.PAPER_EXPANSION, kernel_loops=paper.PAPER_LOOPS, convert_once=False,
                      compiler="chess")
    fields.update(kw)
    return GemmConfig(row.device, row.M, fields.pop("K", row.K), row.N, row.m, row.k, row.n,
                      fields.pop("k_mt", row.k_mt), row.dtype_in, row.dtype_out, fields.pop("b_col_maj", row.b_col_maj),
                      **fields)


@lru_cache(maxsize=512)
def design_data(config: Any) -> tuple[dict[str, Any], int, Any]:
    design = build_design(config)
    return design_traffic(design), design.tasks_per_group, design.l1


def array_estimate(p: Params, row: paper.ArrayRow, **kw: Any):  # noqa: ANN201 - Estimate
    """The model on the row's design (traffic read from the built Design's runtime sequence, L1
    bank stalls from its plan). Not model/price.estimate(design): a row prices the published kernel's loop
    (block_loop) in ours' place, its task groups counted from the config, on the machine the row was measured on --
    the calibration's own question of the config, which fitting keeps as the constants were fitted."""
    c = array_config(row, **kw)
    traffic, tasks, l1 = design_data(c)
    return estimate_config(c, p.on_machine(row.device, paper.machine_of(row)), traffic, tasks, l1,
                           block_loop=row.block_loop)


def array_tops(p: Params, row: paper.ArrayRow, **kw: Any) -> float:
    return float(array_estimate(p, row, **kw).tops)


# the searches' bounds: a fit that lands on one is not written (derive says which, in one line)
SEARCH = {"kernel.aie2p_bf16_via_bfp16_cycles_per_mmul": (1.0, 8.0),
          "kernel.bank_stall_cycles_per_c_access": (0.0, 3.0),
          "kernel.l1_conflict_cycles_per_collision": (0.0, 1.0),
          "dram.npu1.peak_gbps": (1.0, 400.0), "dram.npu1.run_overhead_bytes": (0.0, 4000.0),
          "dram.npu2.run_overhead_bytes": (0.0, 16384.0),
          "dram.npu1.lockstep_page_sharing": (0.0, 1.0), "dram.npu2.lockstep_page_sharing": (0.0, 1.0),
          "runtime.bd_task_us": (0.0, 100.0)}


def _bisect(f: Callable[[float], float], lo: float, hi: float, iters: int = 60) -> float:
    """Root of a monotone f on [lo, hi]."""
    flo = f(lo)
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        fm = f(mid)
        if (fm > 0) == (flo > 0):
            lo, flo = mid, fm
        else:
            hi = mid
    return 0.5 * (lo + hi)


# ---- the derivation -----------------------------------------------------------------------------


def _atb_groups() -> dict[int, list[tuple[int, float, float]]]:
    groups: dict[int, list[tuple[int, float, float]]] = {}
    for tk, rho, micro, core in paper.ATB_T1:
        groups.setdefault(tk, []).append((rho, micro, core))
    return groups


def _atb_per_switch(tk: int) -> float:
    """1/Eff_core grows by this much per cycle of switch cost and per extra switch (eq. 15)."""
    return paper.ATB_PEAK_FLOPS_PER_CYCLE / (2 * paper.ATB_TILE * paper.ATB_TILE * tk)


def fit_switch_cycles(leave_out: tuple[int, int] | None = None) -> int:
    """delta from atb Table 1: least squares on the rise of 1/Eff_core with rho at each T_K
    (without the (T_K, rho) row `leave_out`)."""
    num = den = 0.0
    for tk, g in _atb_groups().items():
        rho0, micro0, core0 = g[0]
        y0 = 1 / core0 - 1 / micro0
        for rho, micro, core in g[1:]:
            if (tk, rho) == leave_out:
                continue
            x = _atb_per_switch(tk) * (rho - rho0)
            num += x * (1 / core - 1 / micro - y0)
            den += x * x
    return round(num / den)


def atb_step_loss(tk: int, delta: float) -> float:
    """Cycles per k-step the core loses at T_K = tk beyond its rho switches: 1/Eff_core - 1/Eff_micro
    of the group's smallest rho, in cycles (eq. 15), less rho switches of delta."""
    rho0, micro0, core0 = _atb_groups()[tk][0]
    return (1 / core0 - 1 / micro0) / _atb_per_switch(tk) - delta * rho0


def fit_bfp16_step_cycles(delta: float, leave_out: int | None = None) -> float:
    """The mean of atb_step_loss over Table 1's T_K values (without T_K = `leave_out`)."""
    losses = [atb_step_loss(tk, delta) for tk in _atb_groups() if tk != leave_out]
    return round(float(np.mean(losses)))


def atb_micro(p: Params, tk: int) -> float:
    """The ATB paper's chess kernel's efficiency per call at T_K = tk (atb's Eff_micro) as the model
    prices that structure: 128 x tk x 128, one call."""
    dev = device("npu2")
    ks = kernel_shape(dev, "bf16", "bf16", (8, 8, 8), False, "bfp16", block_loop=paper.ATB_CHESS_LOOP)
    t = paper.ATB_TILE
    cyc = float(kernel_cycles(p, ks, np.array(t), np.array(tk), np.array(t)))
    return t * tk * t / cyc / dev.peak_macs["bfp16"]


def fit_bfp16_overhead(leave_out: int | None = None) -> float:
    """epsilon of atb eq. 13 for our 2x2 chain clusters: 1 / Eff_micro = 1 + epsilon / V with
    V = 4 T_K / 8 single-cycle vmacs per cluster; least squares on 1 / Eff_micro over Table 1
    (without its row `leave_out`)."""
    num = den = 0.0
    for i, (tk, _, micro, _) in enumerate(paper.ATB_T1):
        if i == leave_out:
            continue
        v = 4 * tk / 8
        num += (1 / micro - 1) / v
        den += 1 / v**2
    return round(num / den, 1)


def peano_block_cycles(p: Params, pk: paper.PeanoKernel) -> float:
    """The model's cycles per 16 x 16 block of one of mlir-aie PR #3650's Peano kernels (its loop)."""
    dtype_in, dtype_b, dtype_out, acc = paper.ATB_TYPES[pk.preset]
    ks = kernel_shape(device("npu2"), dtype_in, dtype_out, (8, 8, 8), False, dtype_b, acc, block_loop=pk.loop)
    return float(block_cycles(p, ks, np.array(pk.k)))


def fit_flat_block_overhead(p: Params, row: int = 0) -> float:
    """What a flat block loop exposes per block: the `row`-th PR #3650 kernel's II less the busiest
    issue slot of its block (exactly determined by one kernel; config 1 is the fitted one)."""
    pk = paper.PEANO_ATB[row]
    return round(pk.ii - peano_block_cycles(p.with_(flat_block_overhead=0.0), pk), 1)


def bank_stall_rows() -> list[paper.KernelRow]:
    """The XDNA kernels beta is fitted on: Striking Table 1's and Table 2's."""
    return [r for r in paper.STRIKING_T1 if r.device == "npu1"] + paper.STRIKING_T2_KERNELS


def _grid(name: str, step: float) -> np.ndarray:
    """The grid a constant's search walks: its SEARCH range in steps."""
    lo, hi = SEARCH[name]
    return np.round(np.arange(lo, hi + step / 100, step), 2)


BETA_GRID = _grid("kernel.bank_stall_cycles_per_c_access", 0.01)
GAMMA_GRID = _grid("kernel.l1_conflict_cycles_per_collision", 0.05)


def fit_bank_stall(p: Params, gamma: float | None = None, leave_out: int | None = None,
                   errors: dict[tuple[float, float], list[float]] | None = None) -> tuple[float, float]:
    """(beta, gamma): least squares (log error) over the XDNA kernels of Tables 1 and 2, each in
    the paper's L1 layout (mlir-aie's basic-sequential), the C access stall beta jointly with the
    cost gamma of a DMA access meeting a core access in a shared bank (beta alone at a given gamma;
    without the kernel `leave_out`). `errors`: each kernel's squared log error per (beta, gamma) point of the
    grid, kept between the fits of one p (the leave-one-out fits walk the same points)."""
    rows = bank_stall_rows()
    seen = {} if errors is None else errors

    def loss(beta: float, gamma: float) -> float:
        per_row = seen.get((beta, gamma))
        if per_row is None:
            q = p.with_(bank_stall=beta, l1_conflict=gamma)
            per_row = seen[(beta, gamma)] = [math.log(kernel_macs(q, r) / (r.macs_per_cycle or 1)) ** 2 for r in rows]
        return sum(e for i, e in enumerate(per_row) if i != leave_out)

    gammas = GAMMA_GRID if gamma is None else [gamma]
    return min(((float(min(BETA_GRID, key=lambda b: loss(b, g))), float(g)) for g in gammas),
               key=lambda bg: loss(*bg))


def fit_bf16_via_bfp16(p: Params) -> float:
    row = next(r for r in paper.STRIKING_T1 if r.device == "npu2" and r.dtype_in == "bf16")
    target = row.macs_per_cycle or 1.0
    lo, hi = SEARCH["kernel.aie2p_bf16_via_bfp16_cycles_per_mmul"]
    return round(_bisect(lambda c: kernel_macs(p.with_(bf16_via_bfp16_cycles=c), row) - target, lo, hi), 2)


def fit_dram_npu1(p: Params) -> tuple[float, float]:
    """(peak GB/s, bytes lost per run) that put fig. 6a's k_mt = 56 point and sec. 5.2.1's
    memory-bound kernel exactly on their published throughputs."""
    a, b = paper.SEC521_T1_KERNEL, paper.FIG6A_KMT56

    def peak_for(lost: float) -> float:
        def f(bw: float) -> float:
            return array_tops(p.with_dram("npu1", peak_gbps=bw, run_overhead_bytes=lost), a) - (a.tops or 0)
        return _bisect(f, *SEARCH["dram.npu1.peak_gbps"], 50)

    def g(lost: float) -> float:
        q = p.with_dram("npu1", peak_gbps=peak_for(lost), run_overhead_bytes=lost)
        return array_tops(q, b) - (b.tops or 0)

    lost = _bisect(g, *SEARCH["dram.npu1.run_overhead_bytes"], 40)
    return round(peak_for(lost), 1), round(lost)


def microbench_run_bytes(p: Params) -> float:
    """The run length at which the npu1 bandwidth curve gives the micro-benchmarked 15 GB/s."""
    d = p.dram["npu1"]
    bw = paper.MICROBENCH_GBPS["npu1"]
    return bw * d.run_overhead_bytes / (d.peak_gbps - bw)


def dfbw_gbps(p: Params) -> float:
    """XRT's df-bw test as the model sees it (paper.DFBW): its streams, each one linear run (no run
    overhead to speak of), half of them reading and half writing, on the Strix laptop."""
    d = p.on_machine("npu2", "strix-laptop").dram["npu2"]
    shared = 2 * d.peak_gbps / (1 + d.write_cost)  # as many bytes written as read
    return min(shared, paper.DFBW_STREAMS * d.stream_gbps(paper.DFBW_BURST))


def fit_dram_npu2(p: Params) -> float:
    """The run overhead at which the micro-benchmark's runs give its 50 GB/s at the peak of its
    machine (Striking's Krackan mini PC)."""
    run = microbench_run_bytes(p)
    peak = p.on_machine("npu2", paper.STRIKING_MACHINES["npu2"]).dram["npu2"].peak_gbps
    return float(round(run * (peak / paper.MICROBENCH_GBPS["npu2"] - 1.0)))


def col_over_row_rows(dev: str) -> list[tuple[paper.ArrayRow, float]]:
    out = []
    for (d, t_in, t_out), gain in paper.COL_OVER_ROW.items():
        if d == dev:
            table = paper.STRIKING_T2 if dev == "npu1" else paper.STRIKING_T3
            out.append((next(r for r in table if (r.dtype_in, r.dtype_out) == (t_in, t_out)), gain))
    return out


def col_over_row(p: Params, row: paper.ArrayRow) -> float:
    return array_tops(p, row) / array_tops(p, row, b_col_maj=False) - 1.0


def fit_page_sharing(p: Params, dev: str, leave_out: int | None = None) -> float:
    """Least squares (log of 1 + gain) over the data types of sec. 5.2.3, on a 0.05 grid in [0, 1]
    (without the `leave_out`-th data type when given)."""
    data = [row for i, row in enumerate(col_over_row_rows(dev)) if i != leave_out]

    def loss(chi: float) -> float:
        q = p.with_dram(dev, page_sharing=chi)
        return sum(math.log((1 + col_over_row(q, r)) / (1 + gain)) ** 2 for r, gain in data)

    return float(min(_grid(f"dram.{dev}.lockstep_page_sharing", 0.05), key=loss))


def fit_bd_task(p: Params) -> float:
    row = paper.SEC533_DESIGN
    overlapped = array_tops(p, row)
    target = 1.0 - paper.SEC533_SEQUENTIAL_LOSS

    def f(us: float) -> float:
        return array_tops(p.with_(bd_task_us=us), row, queue_groups=1) / overlapped - target

    return round(_bisect(f, *SEARCH["runtime.bd_task_us"], 50), 2)


def _entry_of(data: dict[str, Any], name: str) -> dict[str, Any]:
    """A constant's entry in calibration.json data by its dotted name (a peak: the default machine's)."""
    section, *rest = name.split(".")
    if section == "dram":
        return dram_entry(data, *rest)
    return data[section][rest[0]]  # type: ignore[no-any-return]


@dataclass
class Derivation:
    """calibration.json re-derived, and the fits it refused to write (their stored values kept)."""

    data: dict[str, Any]
    refused: dict[str, str] = field(default_factory=dict)  # constant -> one line: why
    original: dict[str, Any] = field(init=False)  # the data as given (what a refusal keeps)

    def __post_init__(self) -> None:
        self.original = json.loads(json.dumps(self.data))

    def _entry(self, name: str) -> dict[str, Any]:
        return _entry_of(self.data, name)

    def stored(self, name: str) -> float:
        return float(self._entry(name)["value"])

    def put(self, names: str | tuple[str, ...], values: float | tuple[float, ...], rows: int, free: int) -> bool:
        """Write fitted values (one fit: names together), unless the fit has fewer rows than free
        parameters or one of them lands on a bound of its search: then none is written."""
        names = (names,) if isinstance(names, str) else names
        values = (values,) if isinstance(values, (int, float)) else values
        why = ""
        if rows < free:
            why = f"fitted from {rows} rows, fewer than its {free} free parameters"
        for name, value in zip(names, values):
            if name not in SEARCH:  # a closed form: no search, no bound
                continue
            lo, hi = SEARCH[name]
            if not why and min(value - lo, hi - value) <= 1e-3 * (hi - lo):
                why = (f"its fit {value:g}" + (f" for {name}" if len(names) > 1 else "")
                       + f" lands on (or past) the bound of its range [{lo:g}, {hi:g}]")
        if why:  # the value the data came with stays (not one an earlier round wrote)
            for name in names:
                self._entry(name)["value"] = _entry_of(self.original, name)["value"]
                self.refused[name] = f"{name} not written: {why}; the stored {self.stored(name):g} stays"
            return False
        for name, value in zip(names, values):
            entry = self._entry(name)
            entry["value"] = value
            entry["kind"] = "calibrated"
            self.refused.pop(name, None)  # an earlier round's refusal no longer holds
        return True

    def spread(self, name: str, values: list[float], source: str) -> None:
        entry = self._entry(name)
        entry["spread"] = [min(values + [entry["value"]]), max(values + [entry["value"]])]
        entry["spread_source"] = source


def derive(data: dict[str, Any] | None = None) -> Derivation:
    """calibration.json with every 'calibrated' value recomputed (the fixed ones kept), in a fixed
    order: each fit uses the values written before it (a refused one: its stored value)."""
    d = Derivation(json.loads(json.dumps(data or raw())))
    p = from_raw(d.data)
    rises = [(tk, rho) for tk, g in _atb_groups().items() for rho, _, _ in g[1:]]
    d.put("core.switch_cycles", fit_switch_cycles(), len(rises), 1)
    delta = d.stored("core.switch_cycles")
    d.spread("core.switch_cycles", [fit_switch_cycles(r) for r in rises],
             "leave-one-out: the fit without each rise of Table 1")
    d.put("core.bfp16_step_cycles", fit_bfp16_step_cycles(delta), len(_atb_groups()), 1)
    d.spread("core.bfp16_step_cycles", [fit_bfp16_step_cycles(delta, tk) for tk in _atb_groups()],
             "leave-one-out: the mean without each T_K")
    p = p.with_(switch_cycles=delta, bfp16_step_cycles=d.stored("core.bfp16_step_cycles"))
    kernels = len(bank_stall_rows())
    beta_gamma = ("kernel.bank_stall_cycles_per_c_access", "kernel.l1_conflict_cycles_per_collision")
    errors: dict[tuple[float, float], list[float]] = {}  # the grid's points, walked once for every fit below
    if not d.put(beta_gamma, fit_bank_stall(p, errors=errors), kernels, 2):
        # not identified together: beta alone, at the stored gamma
        gamma = d.stored("kernel.l1_conflict_cycles_per_collision")
        d.put("kernel.bank_stall_cycles_per_c_access", fit_bank_stall(p, gamma, errors=errors)[0], kernels, 1)
        d.spread("kernel.bank_stall_cycles_per_c_access",
                 [fit_bank_stall(p, gamma, i, errors)[0] for i in range(kernels)],
                 "leave-one-out: the fit without each kernel (the shared-bank cost at its stored value)")
    p = p.with_(bank_stall=d.stored("kernel.bank_stall_cycles_per_c_access"),
                l1_conflict=d.stored("kernel.l1_conflict_cycles_per_collision"))
    d.put("kernel.bfp16_cluster_overhead_cycles", fit_bfp16_overhead(), len(paper.ATB_T1), 1)
    d.spread("kernel.bfp16_cluster_overhead_cycles", [fit_bfp16_overhead(i) for i in range(len(paper.ATB_T1))],
             "leave-one-out: the fit without each row")
    p = p.with_(bfp16_overhead=d.stored("kernel.bfp16_cluster_overhead_cycles"))
    d.put("kernel.bfp16_flat_block_overhead_cycles", fit_flat_block_overhead(p), 1, 1)
    d.spread("kernel.bfp16_flat_block_overhead_cycles",
             [fit_flat_block_overhead(p, i) for i in range(len(paper.PEANO_ATB))],
             "the same fit on each of mlir-aie PR #3650's three Peano kernels alone (configs 1, 2, 3)")
    p = p.with_(flat_block_overhead=d.stored("kernel.bfp16_flat_block_overhead_cycles"))
    d.put("kernel.aie2p_bf16_via_bfp16_cycles_per_mmul", fit_bf16_via_bfp16(p), 1, 1)
    p = p.with_(bf16_via_bfp16_cycles=d.stored("kernel.aie2p_bf16_via_bfp16_cycles_per_mmul"))
    # the bandwidth curve and the page sharing of side-by-side strips touch the same data (C runs):
    # alternate until both settle (two rounds suffice on the grid used)
    for _ in range(3):
        # each fit is followed by what it left stored (written, or the given value when refused)
        d.put(("dram.npu1.peak_gbps", "dram.npu1.run_overhead_bytes"), fit_dram_npu1(p), 2, 2)
        p = p.with_dram("npu1", peak_gbps=d.stored("dram.npu1.peak_gbps"),
                        run_overhead_bytes=d.stored("dram.npu1.run_overhead_bytes"))
        d.put("dram.npu2.run_overhead_bytes", fit_dram_npu2(p), 1, 1)
        p = p.with_dram("npu2", run_overhead_bytes=d.stored("dram.npu2.run_overhead_bytes"))
        for dev in ("npu1", "npu2"):
            d.put(f"dram.{dev}.lockstep_page_sharing", fit_page_sharing(p, dev), len(col_over_row_rows(dev)), 1)
            p = p.with_dram(dev, page_sharing=d.stored(f"dram.{dev}.lockstep_page_sharing"))
    for dev in ("npu1", "npu2"):
        d.spread(f"dram.{dev}.lockstep_page_sharing",
                 [fit_page_sharing(p, dev, i) for i in range(len(col_over_row_rows(dev)))],
                 "leave-one-out: the fit without each data type")
    d.put("runtime.bd_task_us", fit_bd_task(p), 1, 1)
    return d


@dataclass(frozen=True)
class FitReport:
    """How well the data pins one calibrated constant down."""

    constant: str
    value: float
    rows: int  # data points it is fitted from
    free: int  # parameters fitted from them together
    loo: tuple[float, ...]  # the constant refitted without each row in turn (empty: not possible)
    note: str = ""


def fit_reports(data: dict[str, Any] | None = None) -> list[FitReport]:
    """Each calibrated constant: its data, its leave-one-out refits, and whether it is identified
    at all (exactly determined by as many rows as parameters, or on a bound of its search)."""
    data = data or raw()
    p = from_raw(data)
    kern, dram, rt = data["kernel"], data["dram"], data["runtime"]
    atb_rises = [(tk, rho) for tk, g in _atb_groups().items() for rho, _, _ in g[1:]]
    out = [FitReport("core.switch_cycles", data["core"]["switch_cycles"]["value"], len(atb_rises), 1,
                     tuple(float(fit_switch_cycles(r)) for r in atb_rises)),
           FitReport("core.bfp16_step_cycles", data["core"]["bfp16_step_cycles"]["value"], len(_atb_groups()), 1,
                     tuple(float(fit_bfp16_step_cycles(data["core"]["switch_cycles"]["value"], tk))
                           for tk in _atb_groups())),
           FitReport("kernel.bfp16_cluster_overhead_cycles", kern["bfp16_cluster_overhead_cycles"]["value"],
                     len(paper.ATB_T1), 1, tuple(fit_bfp16_overhead(i) for i in range(len(paper.ATB_T1))))]
    out.append(FitReport("kernel.bfp16_flat_block_overhead_cycles", kern["bfp16_flat_block_overhead_cycles"]["value"],
                         1, 1, (), "exactly determined: one row (PR #3650's config 1 II); its configs 2 and 3 "
                         "check it"))
    beta, gamma = (kern["bank_stall_cycles_per_c_access"]["value"], kern["l1_conflict_cycles_per_collision"]["value"])
    kernels = len(bank_stall_rows())
    refused = kern["l1_conflict_cycles_per_collision"]["kind"] != "calibrated"
    errors: dict[tuple[float, float], list[float]] = {}  # one walk of the grid for every leave-one-out fit
    loo_beta = tuple(fit_bank_stall(p, gamma, i, errors)[0] for i in range(kernels)) if refused else ()
    out.append(FitReport("kernel.bank_stall_cycles_per_c_access", beta, kernels, 1 if refused else 2, loo_beta,
                         "" if refused else "leave-one-out not run: a 2-D grid search per refit"))
    out.append(FitReport("kernel.l1_conflict_cycles_per_collision", gamma, kernels, 2, (),
                         "NOT IDENTIFIED: its fit lands on the bound 0 of its search [0, 1] (the data show no "
                         "cost of shared banks), so the calibration does not write it; the stored value is "
                         "assumed" if refused else ""))
    out.append(FitReport("kernel.aie2p_bf16_via_bfp16_cycles_per_mmul",
                         kern["aie2p_bf16_via_bfp16_cycles_per_mmul"]["value"], 1, 1, (),
                         "exactly determined: one row, one parameter"))
    out.append(FitReport("dram.npu1.peak_gbps + run_overhead_bytes",
                         peak_entry(data, "npu1")["value"], 2, 2, (),
                         "exactly determined: two rows, two parameters (fig. 6a's k_mt is stated, sec. 5.2.1's "
                         "design assumed)"))
    out.append(FitReport("dram.npu2.run_overhead_bytes", dram["npu2"]["run_overhead_bytes"]["value"], 1, 1, (),
                         "exactly determined: one microbenchmark figure and its machine's peak"))
    for dev in ("npu1", "npu2"):
        chi = dram[dev]["lockstep_page_sharing"]
        n = len(col_over_row_rows(dev))
        out.append(FitReport(f"dram.{dev}.lockstep_page_sharing", chi["value"], n, 1,
                             tuple(fit_page_sharing(p, dev, i) for i in range(n)),
                             "on the bound of its search [0, 1]" if chi["value"] in (0.0, 1.0) else ""))
    out.append(FitReport("runtime.bd_task_us", rt["bd_task_us"]["value"], 1, 1, (),
                         "exactly determined: one stated loss (27%, sec. 5.3.3)"))
    return out


def write(data: dict[str, Any]) -> str:
    path = resources.files(CALIBRATION_PACKAGE).joinpath(CALIBRATION_FILE)
    text = json.dumps(data, indent=2) + "\n"
    with resources.as_file(path) as real:
        real.write_text(text)
    return str(path)


# ---- model vs paper -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    group: str
    what: str
    paper: float | None
    model: float
    unit: str
    use: str  # "calibration", "check" or "prediction" (paper value withheld)
    note: str = ""
    upper_bound: bool = False  # the paper gives only "< paper"

    @property
    def error(self) -> float | None:
        """Relative error; for fractions the difference in points (model - paper); for an upper
        bound how far the model exceeds it (0 when below)."""
        if self.paper is None:
            return None
        if self.upper_bound:
            return max(0.0, self.model - self.paper)
        if self.unit == "fraction":
            return self.model - self.paper
        return self.model / self.paper - 1.0 if self.paper else None

    def error_text(self) -> str:
        e = self.error
        if e is None:
            return "n/a"
        if self.upper_bound:
            return "within" if e == 0 else f"+{100 * e:.1f} pt over"
        if self.unit == "fraction":
            return f"{100 * e:+.1f} pt"
        return f"{100 * e:+.1f}%"


def _kname(r: paper.KernelRow) -> str:
    emu = " (bf16 via bfp16)" if r.emulate else ""
    return f"{r.device} {r.dtype_in}-{r.dtype_out} {r.m}x{r.k}x{r.n}{emu}"


def _aname(r: paper.ArrayRow) -> str:
    return f"{r.device} {r.dtype_in}-{r.dtype_out} {r.m}x{r.k}x{r.n} k_mt {r.k_mt}, {r.M}x{r.K}x{r.N}"


def _array_row(p: Params, group: str, ar: paper.ArrayRow, what: str, use: str, note: str = "") -> Row:
    """A whole-array row: the model on the row's design, its bound named first in the note. The
    paper's value is given only for checks (a prediction's is withheld)."""
    e = array_estimate(p, ar)
    bound = "memory" if bool(e.memory_bound) else "compute"
    return Row(group, what, ar.tops if use != "prediction" else None, float(e.tops), "TOPS", use,
               f"{bound} bound{note}")


def rows(p: Params | None = None) -> list[Row]:
    p = p or load()
    out: list[Row] = []
    for r in paper.STRIKING_T1:
        use = "calibration" if (r.device == "npu1" or r.emulate) else "check"
        out.append(Row("Striking Table 1 (single core)", _kname(r), r.macs_per_cycle, kernel_macs(p, r),
                       "MACs/cycle", use))
    for kr in paper.STRIKING_T2_KERNELS:
        out.append(Row("Striking Table 2 (XDNA): kernel", _kname(kr), kr.macs_per_cycle, kernel_macs(p, kr),
                       "MACs/cycle", "calibration"))
    for ar in paper.STRIKING_T2:
        out.append(_array_row(p, "Striking Table 2 (XDNA): end to end", ar, _aname(ar), "check"))
    for kr, ar in zip(paper.STRIKING_T3_KERNELS, paper.STRIKING_T3):
        out.append(_array_row(p, "Striking Table 3 (XDNA2): end to end", ar,
                              _aname(ar) + (" bf16 via bfp16" if ar.emulate else ""), "prediction",
                              f"; kernel {kernel_macs(p, kr):.1f} MACs/cycle; value withheld"))
    out.extend(_text_rows(p))
    out.extend(_atb_rows(p))
    out.extend(_peano_rows(p))
    return out


def _peano_rows(p: Params) -> list[Row]:
    """mlir-aie PR #3650's Peano ATB kernels: the II its sources report per 16 x 16 C block against
    the model of the same loop (config 1 fixes the flat loop's exposed overhead; 2 and 3 check it)."""
    out: list[Row] = []
    for i, pk in enumerate(paper.PEANO_ATB):
        use = "calibration" if i == 0 else "check"
        note = (f"fixes flat_block_overhead = {p.flat_block_overhead:g}" if i == 0
                else f"k = {pk.k}" + (", bfp16 C (4 VMUL.f per block)" if pk.preset == "config2" else ""))
        out.append(Row("mlir-aie PR #3650 Peano kernels (per 16 x 16 block)",
                       f"{pk.preset} {pk.t_ma}x{pk.k}x{pk.n}: {pk.loop.name}", pk.ii, peano_block_cycles(p, pk),
                       "cycles", use, note))
    return out


def _text_rows(p: Params) -> list[Row]:
    out: list[Row] = []
    f6 = paper.FIG6A_KMT56
    out.append(Row("Striking text", "fig. 6a: npu1 bf16 96x56x96, k_mt = k = 56", f6.tops, array_tops(p, f6),
                   "TOPS", "calibration", "with sec. 5.2.1 fixes npu1 peak_gbps and run_overhead_bytes"))
    tops = [fig6_tops(p, f6, kmt) for kmt in paper.FIG6A_KMTS]
    out.append(Row("Striking text", "fig. 6a: gain from k_mt = 224 to 560 (text: < 1%)", 0.01,
                   tops[-1] / tops[3] - 1.0, "fraction", "check", "K = the multiple of k_mt nearest 4032",
                   upper_bound=True))
    out.append(Row("Striking text", "fig. 6a: k_mt 224 vs 56 (text: 3.12 / 1.27)", 3.12 / 1.27, tops[3] / tops[0],
                   "ratio", "check"))
    s = paper.SEC521_T1_KERNEL
    out.append(Row("Striking text", "sec. 5.2.1: npu1 i8-i16 64x216x64 at ~4K (memory bound)", s.tops,
                   array_tops(p, s), "TOPS", "calibration", s.note))
    for dev in ("npu1", "npu2"):
        d = p.on_machine(dev, paper.STRIKING_MACHINES[dev]).dram[dev]  # Striking's own machines
        run = microbench_run_bytes(p)
        bw = d.peak_gbps * run / (run + d.run_overhead_bytes)
        out.append(Row("Striking text", f"sec. 5.2.1: {dev} effective DRAM bandwidth, micro-benchmark",
                       paper.MICROBENCH_GBPS[dev], bw, "GB/s", "calibration",
                       f"at the benchmark's run length, {run:.0f} B (inferred)"))
    out.append(Row("XRT df-bw", "Strix, performance mode: 4 columns x 2 MM2S + 2 S2MM streams, one linear run each, "
                   "256-byte bursts, copy", paper.DFBW_GBPS, dfbw_gbps(p), "GB/s", "calibration",
                   "fixes stream_gbps_at_256_byte_bursts (the path's peak is above it)"))
    t1 = next(r for r in paper.STRIKING_T1 if r.device == "npu2" and r.dtype_out == "i16")
    npu2 = device("npu2")
    peak = kernel_macs(p, t1) * 2 * npu2.columns * npu2.core_rows * npu2.clock_ghz / 1000
    out.append(Row("Striking text", "sec. 5.2.1: XDNA2 array compute peak of the 64x216x64 i8-i16 kernel",
                   paper.SEC521_XDNA2_PEAK_TOPS, peak, "TOPS", "check"))
    dc = paper.SEC532_DOUBLE_C
    out.append(Row("Striking text", "sec. 5.3.2: npu1 bf16 80x40x96 with double-buffered C", dc.tops,
                   array_tops(p, dc), "TOPS", "check", dc.note))
    row = paper.SEC533_DESIGN
    loss = 1.0 - array_tops(p, row, queue_groups=1) / array_tops(p, row)
    out.append(Row("Striking text", "sec. 5.3.3: loss without overlapped BD reconfiguration (npu1 i8-i16)",
                   paper.SEC533_SEQUENTIAL_LOSS, loss, "fraction", "calibration", "fixes bd_task_us"))
    ms = paper.SEC531_XDNA2_MS
    out.append(Row("Striking text", "sec. 5.3.1: npu2 i8-i16 ~4K square, wall time", paper.SEC531_MS,
                   float(array_estimate(p, ms).time) * 1e3, "ms", "check", ms.note))
    for dev in ("npu1", "npu2"):
        for ar, gain in col_over_row_rows(dev):
            out.append(Row("Striking text", f"sec. 5.2.3: {dev} {ar.dtype_in}-{ar.dtype_out} gain of B column-major "
                           "over row-major", gain, col_over_row(p, ar), "fraction", "calibration",
                           "fixes lockstep_page_sharing; paper: mean over a sweep, model: the balanced design"))
    for key, best in paper.SWEEP_MAX_TOPS.items():
        dev, t_in, t_out = key
        ar = next(r for r in (paper.STRIKING_T2 if dev == "npu1" else paper.STRIKING_T3)
                  if (r.dtype_in, r.dtype_out) == (t_in, t_out))
        out.append(Row("Striking text", f"sec. 5.2.3: {dev} {t_in}-{t_out} best point of the sweep (up to 8K)", best,
                       _sweep_best(p, ar), "TOPS", "check", "model: best of the same sweep"))
    return out


def fig6_tops(p: Params, row: paper.ArrayRow, k_mt: int) -> float:
    """A point of fig. 6: the row's design with another k_mt, K the multiple of k_mt nearest the row's."""
    K = max(1, round(row.K / k_mt)) * k_mt
    return array_tops(p, row, k_mt=k_mt, K=K)


def _sweep_best(p: Params, ar: paper.ArrayRow) -> float:
    """Best predicted throughput over problem sizes that are multiples of the native size, <= 8K."""
    nm, nk, nn = ar.m * 4, ar.k_mt, ar.n * (4 if ar.device == "npu1" else 8)
    sizes = [(i * nm, j * nk, k * nn) for i in range(1, 8192 // nm + 1) for j in range(1, 8192 // nk + 1)
             for k in range(1, 8192 // nn + 1)]
    M, K, N = (np.array(x) for x in zip(*sizes))
    base = Workload.of(array_config(ar), block_loop=ar.block_loop)  # the paper's kernel and allocation
    stall = array_estimate(p, ar).l1_stall_cycles  # its L1 plan depends on the tile only
    best = 0.0
    for idx in range(len(sizes)):
        pr = base.with_(M=int(M[idx]), K=int(K[idx]), N=int(N[idx]))
        best = max(best, float(estimate(pr, ar.m, ar.k, ar.n, ar.k_mt, p, rho=ar.rho, l1_stall=stall).tops))
    return best


def _atb_rows(p: Params) -> list[Row]:
    """atb eq. 15 with our switch cost delta: the rise of the core loss with rho (what delta is
    fitted to), then the absolute core efficiency from the measured microkernel efficiency; our
    bfp16 kernel's Eff_micro (eq. 13, what epsilon is fitted to); the whole-array predictions of
    atb Table 2 and mlir-aie's published block-datatype GEMMs."""
    out: list[Row] = []
    for tk in sorted({r[0] for r in paper.ATB_T1}):
        micro = max(r[2] for r in paper.ATB_T1 if r[0] == tk)
        out.append(Row("atb Table 1 (eq. 13)", f"Eff_micro at T_K = {tk} (128 x {tk} x 128 bf16 x bfp16)", micro,
                       atb_micro(p, tk), "efficiency", "calibration",
                       f"fixes epsilon = {p.bfp16_overhead:g} cycles per cluster"))
    for ar in paper.ATB_T2:
        use = "check" if ar.tops is not None else "prediction"
        note = (f"; {ar.note}" if ar.note else "") + ("" if ar.tops is not None else "; value withheld")
        out.append(_array_row(p, ar.source, ar, _aname(ar) + f", rho {ar.rho}", use, note))
    for ar in paper.MLIR_AIE_ATB:
        out.append(_array_row(p, ar.source, ar, _aname(ar) + f", rho {ar.rho}", "check",
                              f"; {ar.note}; B in row-major tiles (mlir-aie pre-tiles B per L1 tile)"))
    for ar in (paper.MLIR_AIE_BF16_EMU, paper.MLIR_AIE_BFP16):
        out.append(_array_row(p, ar.source, ar, _aname(ar) + (" bf16 via bfp16" if ar.emulate else ""), "check",
                              f"; {ar.note}"))
    d = p.switch_cycles
    for tk, g in _atb_groups().items():
        rho0, _, core0 = g[0]
        for rho, _, core in g[1:]:
            pred = 1.0 / (1.0 / core0 + d * _atb_per_switch(tk) * (rho - rho0))
            out.append(Row("atb Table 1 (eq. 15)", f"Eff_core at T_K = {tk}, rho = {rho}, from the measured "
                           f"rho = {rho0} value", core, pred, "efficiency", "calibration", f"fixes delta = {d:g}"))
    for tk, rho, micro, core in paper.ATB_T1:
        step = fit_bfp16_step_cycles(d, leave_out=tk)  # this T_K's rows out of the step loss's fit
        pred = 1.0 / (1.0 / micro + (d * rho + step) * _atb_per_switch(tk))
        out.append(Row("atb Table 1 (eq. 15)", f"Eff_core at T_K = {tk}, rho = {rho}, from Eff_micro = {micro}",
                       core, pred, "efficiency", "check",
                       f"with {step:g} cycles per k-step fitted without T_K = {tk} (delta from every rise)"))
    return out
