#!/usr/bin/env python3
"""Write docs/speed.md: issue 20 item 5's speed targets against the model's predictions of the tuned
designs (search.choose, then model.predict), each with the best published record, whether the
prediction meets the target and what limits it, with the accurate numerics default and with the
papers' per-k-step choice side by side. Every throughput here is a PREDICTION of the model (our
kernels, Peano, the default DRAM profile); only the records are measurements, by others.

    python scripts/speed_targets.py            # rewrite docs/speed.md
    python scripts/speed_targets.py --check    # exit 1 if docs/speed.md is out of date
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gemm_gen import search
from gemm_gen.model.fit import paper
from gemm_gen.model.params import Params, load, load_ends
from gemm_gen.model.predict import Prediction, predict
from gemm_gen.spec.request import Options, Problem, Request

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "speed.md"
# mlir-aie's ATB example: its shapes and its published numbers (chess #3076, Peano #3650), with sources
ATB_FACTS = ROOT / "tests" / "data" / "mlir_aie_atb_peano.json"
TARGETS_SOURCE = "issue 20, item 5"


@dataclass(frozen=True)
class Record:
    """A published measurement (by others, on hardware), in TFLOPS / TOPS as 2 M K N / time."""

    value: float
    source: str


@dataclass(frozen=True)
class Numerics:
    """One way to handle C between kernel calls: the options that give it, and how to say it."""

    label: str
    options: dict[str, Any]


@dataclass(frozen=True)
class Target:
    """A speed target: the problem, the two numerics, the goal (TARGETS_SOURCE) and the records."""

    name: str
    size: Problem
    unit: str
    goal: float
    records: tuple[Record, ...]
    accurate: Numerics
    papers: Numerics
    b_col_maj: bool = False
    note: str = ""
    device: str = "npu2"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def record(self) -> Record:
        return max(self.records, key=lambda r: r.value)


def _atb() -> dict[str, Any]:
    return dict(json.loads(ATB_FACTS.read_text()))


def _atb_size(facts: dict[str, Any], preset: str) -> Problem:
    shape = facts["configs"][preset]["shape"]
    return Problem(shape["M"], shape["K"], shape["N"])


def _atb_records(facts: dict[str, Any], preset: str) -> tuple[Record, ...]:
    """Every machine's published figure of an ATB config: chess (#3076) and Peano (#3650)."""
    out = []
    for run, label in (("chess_pr3076", "mlir-aie #3076 (chess)"), ("peano_pr3650", "mlir-aie #3650 (Peano)")):
        for machine, value in facts["numbers"][run][preset].items():
            out.append(Record(float(value), f"{label}, {machine}"))
    return tuple(out)


# amd/IRON's flm GEMM on npu2 (iron/operators/flm/gemm/README.md @028e9cd9, "Performance / NPU2"):
# M=1024 K=1536 N=6144 bf16 (B pre-packed as bfp16, emulated mmul) in 1143 us, min of per-run medians
IRON_FLM = (Problem(1024, 1536, 6144), 1143e-6)


def _derived(size: Problem, seconds: float) -> float:
    return 2.0 * size.macs / seconds / 1e12


def targets() -> tuple[Target, ...]:
    facts = _atb()
    out_bf16 = Numerics("accurate default: C in fp32, rounded once", {})
    per_step = Numerics("papers: C rounded to bf16 every k-step (--acc out)", {"acc": "out"})
    flm_size, flm_s = IRON_FLM
    bf16_records = (
        Record(paper.SWEEP_MAX_TOPS[("npu2", "bf16", "bf16")], "Striking sec. 5.2.3, best of the bf16 sweep"),
        Record(_derived(flm_size, flm_s), f"amd/IRON flm GEMM {flm_size.M}x{flm_size.K}x{flm_size.N} in "
               f"{flm_s * 1e6:.0f} us (derived)"),
    )
    i8_records = (Record(paper.SWEEP_MAX_TOPS[("npu2", "i8", "i8")], "Striking sec. 5.2.3, best of the i8 sweep"),)
    col_note = "B column-major (the faster layout in Striking's sweeps, sec. 5.2.3)"
    return (
        Target("npu2 bf16 4096^3", Problem(4096, 4096, 4096), "TFLOPS", 17.0, bf16_records,
               out_bf16, per_step, True, col_note, extra={"dtype_in": "bf16", "dtype_out": "bf16"}),
        Target("ATB config 2", _atb_size(facts, "config2"), "TFLOPS", 33.0, _atb_records(facts, "config2"),
               Numerics("accurate default: C in fp32, converted to bfp16 once", {"dtype_b": "bfp16"}),
               Numerics("papers: C requantized to bfp16 every call (config2)", {"dtype_b": "bfp16", "acc": "out"}),
               extra={"dtype_in": "bfp16", "dtype_out": "bfp16"}),
        Target("ATB config 1", _atb_size(facts, "config1"), "TFLOPS", 28.0, _atb_records(facts, "config1"),
               Numerics("accurate default: C in fp32, rounded once", {"dtype_b": "bfp16"}),
               Numerics("papers: C rounded to bf16 every call (config1)", {"dtype_b": "bfp16", "acc": "out"}),
               extra={"dtype_in": "bf16", "dtype_out": "bf16"}),
        Target("ATB config 3", _atb_size(facts, "config3"), "TFLOPS", 31.0, _atb_records(facts, "config3"),
               Numerics("accurate default: C in fp32, converted to bfp16 once", {"dtype_b": "bfp16"}),
               Numerics("papers: C in bf16, converted to bfp16 once (config3)", {"dtype_b": "bfp16", "acc": "bf16"}),
               extra={"dtype_in": "bfp16", "dtype_out": "bfp16"}),
        Target("npu2 i8 4096^3", Problem(4096, 4096, 4096), "TOPS", 40.0, i8_records,
               Numerics("accurate default: C in int32, saturated once", {}),
               Numerics("papers: C requantized to i8 every k-step (--acc out)", {"acc": "out"}),
               True, col_note, extra={"dtype_in": "i8", "dtype_out": "i8"}),
    )


@dataclass(frozen=True)
class Outcome:
    """The model's tuned design for one target and one numerics, and its prediction."""

    chosen: search.Choice
    prediction: Prediction

    @property
    def tops(self) -> float:
        return self.prediction.tops


def outcome(t: Target, numerics: Numerics, p: Params, ends: tuple[Params, Params]) -> Outcome:
    options = Options(t.device, t.extra["dtype_in"], t.extra["dtype_out"], t.b_col_maj, **numerics.options)
    chosen = search.choose(Request(options, t.size), p)
    return Outcome(chosen, predict(chosen.config, p, ends))


def limit(d: Prediction) -> str:
    """What bounds the predicted time: the kernel (the cores' compute) or, on the memory side, the
    largest of DRAM, the shim stream ports and the bursts each stream keeps in flight."""
    t = d.times_us
    if d.bound == "compute":
        return (f"kernel: {d.core_macs_per_cycle:.0f} MACs/cycle per call ({d.core_efficiency:.0%} of peak), "
                f"{d.core_macs_per_cycle_in_array:.0f} in the array")
    parts = {"DRAM": t.dram, "streams/DMA (shim stream port)": t.shim_streams,
             "streams/DMA (bursts in flight per shim stream)": t.stream_in_flight}
    which = max(parts, key=lambda name: parts[name])
    gb = d.dram_bytes_total / 1e9
    return (f"{which}: {parts[which]:,.0f} us of memory time ({gb:.2f} GB at {d.effective_dram_gbps:.1f} GB/s) "
            f"against {t.core:,.0f} us of core time")


def _design(o: Outcome) -> str:
    c = o.chosen.config
    emulated = c.kernel.emulate_bf16_with_bfp16 and not c.types.precision.block
    kernel = "convert-once" if c.kernel.convert_once else ("emulated" if emulated else "")
    packing = f", B {c.layout.b_pack}" if c.types.t_b.is_block else ""
    t = c.tiling
    out = f"{t.m}x{t.k}x{t.n}, k_mt {t.k_mt}, rho {t.rho}{packing}" + (f", {kernel} kernel" if kernel else "")
    rival = [k for k in o.chosen.kernels if k.config is not None and k.config != c]
    if rival:
        r = rival[0]
        out += f" (the {r.name.split(' (')[0]} kernel: {_derived(c.size, r.predicted_s):.2f} predicted)"
    return out


def _meets(tops: float, goal: float) -> str:
    return "yes" if tops >= goal else "no"


def render(p: Params | None = None, ends: tuple[Params, Params] | None = None) -> str:
    p = p or load()
    ends = ends or load_ends()
    dram = p.dram["npu2"]
    rows = [(t, outcome(t, t.accurate, p, ends), outcome(t, t.papers, p, ends)) for t in targets()]
    lines = [
        "# Speed targets (issue 20, item 5): predictions, not measurements",
        "",
        "Generated by `scripts/speed_targets.py` from the tuner and the model (`search.choose`, then",
        "`model.predict`); `python scripts/speed_targets.py --check` fails when this page is stale, and",
        "tests/model/test_speed_targets.py runs it. Every throughput in the *predicted* columns is the",
        "analytical model's PREDICTION for the design the tuner picks (our kernels, built by Peano, the",
        f"`{dram.machine}` DRAM profile at {dram.peak_gbps:g} GB/s peak); nothing here ran on an NPU. The records are",
        "others' hardware measurements, each with its source; the targets are issue 20's. The model's",
        "numbers move whenever the model or the kernels change: rerun the script, never edit this page.",
        "",
        "Throughput is 2 M K N / time (TFLOPS for floats, TOPS for integers). *Accurate default*: C stays",
        "in the kernel's wide accumulator and is rounded (or saturated) once, after the last k-step (our",
        "default). *Papers*: the measured kernels' choice, C kept in its output type (or bf16) and rounded",
        "per k-step or per call. *Limited by* names the larger side of the model's time: the kernel",
        "(compute), or on the memory side DRAM, the shim stream ports or the bursts in flight per stream.",
        "",
        "| target | size | goal | record (source) | predicted, accurate default | meets | predicted, papers' "
        "choice | meets |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for t, acc, pap in rows:
        r = t.record
        size = f"{t.size.M}x{t.size.K}x{t.size.N}"
        lines.append(f"| {t.name} | {size} | >= {t.goal:g} {t.unit} | {r.value:.2f} ({r.source}) | "
                     f"{acc.tops:.2f} | {_meets(acc.tops, t.goal)} | {pap.tops:.2f} | {_meets(pap.tops, t.goal)} |")
    lines += ["", "## What limits each prediction", ""]
    for t, acc, pap in rows:
        lines.append(f"### {t.name}, {t.size.M}x{t.size.K}x{t.size.N} (goal >= {t.goal:g} {t.unit})")
        lines.append("")
        if t.note:
            lines += [t.note + ".", ""]
        lines.append("| numerics | predicted | range over the constants' spreads | design | limited by |")
        lines.append("|---|---|---|---|---|")
        for numerics, o in ((t.accurate, acc), (t.papers, pap)):
            d = o.prediction
            short = "" if o.tops >= t.goal else f" (short by {t.goal - o.tops:.2f})"
            lines.append(f"| {numerics.label} | {o.tops:.2f}{short} | {d.tops_low:.2f} to {d.tops_high:.2f} | "
                         f"{_design(o)} | {limit(d)} |")
        lines.append("")
        others = [r for r in t.records if r != t.record]
        if others:
            lines += ["Other records: " + "; ".join(f"{r.value:.2f} ({r.source})" for r in others) + ".", ""]
    lines += ["Sources of the records: Striking = the XDNA/XDNA2 GEMM paper's sweeps "
              "(gemm_gen/model/fit/paper.py); mlir-aie's ATB numbers and shapes = tests/data/mlir_aie_atb_peano.json "
              "(README tables of PRs #3076 and #3650); amd/IRON flm GEMM = iron/operators/flm/gemm/README.md "
              "@028e9cd9, \"Performance / NPU2\".", ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/speed.md is out of date")
    a = ap.parse_args()
    text = render()
    if a.check:
        current = DOC.read_text() if DOC.exists() else ""
        if current != text:
            print(f"{DOC} is out of date: run python scripts/speed_targets.py", file=sys.stderr)
            return 1
        print(f"{DOC} is up to date")
        return 0
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(text)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
