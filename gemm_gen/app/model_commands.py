"""gemm-gen predict | tune | roofline: the performance model's commands (all outputs are predictions)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import search
from ..atomic import check_output_dir, check_output_file, write_all, write_atomic
from ..checks import check_config
from ..config import GemmConfig, b_packs
from ..design.serve import SERVED
from ..errors import ConfigError, ToolchainMissing
from ..hw.devices import device
from ..model.fit import measured, upstream
from ..model.layouts import LayoutPrice, cheapest, layout_prices
from ..model.params import Params, load, load_ends
from ..model.perf import Workload
from ..model.predict import Prediction, Upstream, predict
from ..rules import array
from ..rules.defaults import resolve
from ..search.choosing import decode_weighed
from ..search.tune import RANKS, Candidate, TuneResult, tune_b_packs
from ..search.tune_many import ManyResult, tune_many
from .choice import choice, say_chosen
from .cliargs import EXIT_USAGE, SIZE, base_config, counted, pins, problem_args
from .limits import measure
from .plots import heatmap_png, pyplot, roofline_png


def _model_args(p: argparse.ArgumentParser) -> None:
    problem_args(p)
    p.add_argument("--dram-gbps", "--dram_gbps", dest="dram_gbps", type=float, default=None, metavar="X",
                   help="predict with your memory system's streaming bandwidth, X GB/s (default: the peak of the "
                   "machine profile, --machine)")
    p.add_argument("--machine", default=None, metavar="NAME",
                   help="the memory profile of the machine: npu1 phoenix-minipc; npu2 strix-laptop (default) or "
                   "krackan-minipc (model/calibration.json: each with its sources)")


def _params(a: argparse.Namespace) -> Params:
    """The model's parameters, with the user's DRAM bandwidth when given."""
    return _with_dram(a, load())


def _ends(a: argparse.Namespace) -> tuple[Params, Params]:
    """The pessimistic and optimistic parameters; a bandwidth the user gives is not uncertain."""
    slow, fast = load_ends()
    return _with_dram(a, slow), _with_dram(a, fast)


def _with_dram(a: argparse.Namespace, p: Params) -> Params:
    p = p.on_machine(device(a.dev).name, a.machine)
    if a.dram_gbps is None:
        return p
    if not 0 < a.dram_gbps <= 1000:
        raise ConfigError(f"--dram-gbps {a.dram_gbps} is not a bandwidth the model can use",
                          "give GB/s between 0 and 1000, e.g. --dram-gbps 20")
    return p.with_dram(device(a.dev).name, peak_gbps=a.dram_gbps, machine=USER_PEAK)


USER_PEAK = "--dram-gbps"  # the machine label of a peak the user gives


def _base(a: argparse.Namespace) -> GemmConfig:
    """The requested problem and options with the tiling left open (0)."""
    return base_config(a)


# ---- predict ------------------------------------------------------------------------------------
def cmd_predict(a: argparse.Namespace) -> int:
    chosen = choice(a)
    c, params = chosen.config, _params(a)
    info = replace(predict(c, params, _ends(a)),
                   upstream=upstream.compare(params, Workload.of(c).kernel_shape, c.t_ma, c.tiling.k, c.tiling.n,
                                             c.tiling.rho))
    prices = layout_prices(c, params)
    say_chosen("predict", chosen)
    print(json.dumps(info.to_json() | {"layouts_priced": [x.to_json() for x in prices]}, indent=1) if a.json
          else "\n".join([predict_text(info), *layout_lines(prices)]))
    return 0


def layout_lines(prices: tuple[LayoutPrice, ...]) -> list[str]:
    """Each layout of the design's tiling and its predicted price (model/layouts.py)."""
    lines = ["  layouts      A, B, C r(ow)/c(olumn)-major at this tiling, PREDICTED (kernel transposes: "
             "uncalibrated, from their operation count)"]
    best = cheapest(prices)
    for x in prices:
        if x.time_s is None:
            lines.append(f"    {x.layouts}  {x.xclbin}: not built: {x.refused}")
            continue
        runs = ", ".join(f"{name} {b:,.0f} B" for name, b in x.dram_run_bytes.items())
        shuffles = [f"A {x.a_transposes_per_round:g} shuffles/round" if x.a_transposes_per_round else "",
                    f"C {x.c_transposes_per_cluster:g} shuffles/cluster" if x.c_transposes_per_cluster else ""]
        tr = "; transposes " + ", ".join(t for t in shuffles if t) if any(shuffles) else ""
        lines.append(f"    {x.layouts}  {x.time_s * 1e6:,.0f} us, {x.tops:.2f} TOPS ({x.xclbin}); DRAM runs {runs}{tr}"
                     + ("  <- fastest" if x is best and len(prices) > 1 else ""))
    return lines


def _types(dtype_in: str, dtype_b: str, dtype_out: str, acc: str, emulate: bool) -> str:
    """bf16->bf16, bf16 via bfp16->bf16, or A bf16 x B bfp16 -> C bf16 (acc ...) for mixed ones."""
    if dtype_b == dtype_in and acc == dtype_out:
        return f"{dtype_in}{' via bfp16' if emulate else ''}->{dtype_out}"
    return f"A {dtype_in} x B {dtype_b} -> C {dtype_out}" + (f" (acc {acc})" if acc != dtype_out else "")


def predict_text(d: Prediction) -> str:
    dk = d.design  # what design it is
    lay = dk.layout
    layout = ("column-major" if lay.b_col_maj else "row-major") + (", DRAM strips" if lay.b_pack == "strips" else "")
    types = _types(dk.types.dtype_in, dk.types.dtype_b, dk.types.dtype_out, dk.types.acc, d.emulate_bf16_with_bfp16)
    t = d.times_us
    M, K, N = dk.size.M, dk.size.K, dk.size.N
    m, k, n = dk.tiling.m, dk.tiling.k, dk.tiling.n
    lines = [
        f"PREDICTED (analytical model, not a measurement): {dk.device} {M}x{K}x{N} "
        f"{types}, B {layout}",
        f"  design       {_mapping_words(dk.mapping)}kernel {m}x{k}x{n}, k_mt {dk.tiling.k_mt}"
        + (f", rho {dk.tiling.rho} (A tiles of {dk.t_ma} rows)" if dk.tiling.rho > 1 else "")
        + f", mmul {'x'.join(map(str, dk.mmul))}; "
        f"padded to {'x'.join(map(str, d.padded))}"
        + ("" if dk.task_span == 1 else "; each shim task spans "
           + (f"{dk.task_span} output blocks" if dk.task_span else "as many output blocks as one BD expresses")
           + f" along N ({d.task_groups} task groups)"),
        f"  throughput   {d.tops:.2f} TOPS in {d.time_us:,.0f} us ({d.bound} bound); "
        f"{d.tops_low:.2f} to {d.tops_high:.2f} TOPS over the constants' spreads",
        f"  bounds       compute {d.compute_bound_tops:.2f} TOPS, memory {d.memory_bound_tops:.2f} TOPS, "
        f"device peak {d.peak_tops:.2f} TOPS",
        f"  core         {d.core_macs_per_cycle:.1f} MACs/cycle per kernel call ({d.core_efficiency:.1%} of "
        f"peak); {d.core_macs_per_cycle_in_array:.1f} in the array with switching, zeroing and C drains",
        "  DRAM         " + (f"{d.dram_peak_gbps:g} GB/s peak ({USER_PEAK}); " if d.machine == USER_PEAK
                             else f"{d.machine} profile at {d.dram_peak_gbps:g} GB/s peak; ") + ", ".join(
            f"{name} {v.bytes / 2**20:,.1f} MiB in {v.run_bytes:.0f} B runs at {v.effective_gbps:.1f} GB/s"
            for name, v in d.dram.items()),
        *roof_lines(d),
        f"  time (us)    core {t.core:,.0f}, memory {t.memory:,.0f}, fill {t.fill:,.0f}, "
        f"drain {t.drain:,.0f}, BD bubbles {t.bd_bubbles:,.0f}, dispatch {t.dispatch:,.0f}",
        f"  memory use   L1 {d.l1_bytes:,} B ({d.l1_fraction:.0%}), "
        f"L2 {d.l2_bytes:,} B ({d.l2_fraction:.0%})",
    ]
    lines += [] if d.epilogue is None else [d.epilogue.text()]
    lines += [] if d.dequant is None else [d.dequant.text()]
    lines += upstream_lines(d.upstream, dk.t_ma, k, n)
    lines += mixed_rate_lines(dk.device, dk.types.dtype_in, dk.types.dtype_b)
    if not d.buildable:
        lines.append(f"  NOT BUILDABLE as given ({d.not_buildable_because}); predicted as if it fitted")
    return "\n".join(lines)


def _mapping_words(mapping: str) -> str:
    """The design line's mapping, named only when it is not the whole array's."""
    return "decode mapping (one core row, each column a slice of N, B read once); " if mapping == "decode" else ""


def roof_lines(d: Prediction) -> list[str]:
    """The call's DRAM roof against the predicted time (model/roof.py)."""
    r = d.dram_roof
    if r is None:
        return []
    what = "A, B with its scales, C" if d.dequant is not None else "A, B, C"
    return [f"  DRAM roof    {r.time_s * 1e6:,.1f} us ({r.bytes / 1e6:,.2f} MB of unpadded {what} / {r.gbps:g} GB/s); "
            f"PREDICTED {d.time_us:,.1f} us = {r.fraction(d.time_s):.1%} of DRAM roof"]


def mixed_rate_lines(dev_name: str, dtype_in: str, dtype_b: str) -> list[str]:
    """Where the kernel rate of a mixed-type mmul (int8 x int4) comes from, for the reader to weigh."""
    dev = device(dev_name)
    key = dev.operands(dtype_in, dtype_b)
    source = dev.mixed_rate_sources.get(key)
    return [] if source is None else [f"  kernel rate  {key} mmul: {source}"]


def upstream_lines(u: Upstream | None, t_ma: int, k: int, n: int) -> list[str]:
    """Our kernel against the published kernel it resembles, both predicted at this call tile."""
    if u is None:
        return ["  upstream     no published kernel of these types to compare our kernel with"]
    lines = [f"  upstream     {'resembles' if u.same_kernel else 'nearest'}: {u.kernel}, "
             f"{u.published:.1f} MACs/cycle ({u.published_what})",
             f"               PREDICTED at {t_ma}x{k}x{n}: ours {u.ours:.1f} MACs/cycle per call, that kernel's "
             f"structure {u.theirs:.1f}: {u.words}"]
    if u.note:
        lines.append(f"               ({u.note})")
    return lines


# ---- tune ---------------------------------------------------------------------------------------
def cmd_tune(a: argparse.Namespace) -> int:
    base = _base(a)
    top = max(a.top, a.measure or 0)
    pinned = pins(a)
    if a.runtime_sizes:
        if a.measure:
            raise ConfigError(f"--measure {a.measure} re-ranks the designs of one size; --runtime-sizes ranks one "
                              "design for several", "drop --measure, or tune one size at a time")

        many = tune_many(base, tuple(a.runtime_sizes), a.weights, pinned, _params(a))
        print(json.dumps(many.to_json(), indent=1) if a.json else tune_many_text(many))
        return 0
    packs = (a.b_pack,) if a.b_pack else b_packs(base.types.t_b, base.groups.group_size)  # the model picks B's packing
    kernels = (False, True) if resolve(base.options).convert_once_open else ()  # and npu2 bf16's kernel
    rows = (0, 1) if decode_weighed(base, pinned) else ()  # and the mapping of a decode-shaped call
    result = tune_b_packs(Workload.of(base), top, pinned, packs, _params(a), _ends(a), a.rank, kernels, rows)
    result.top = [replace(c, config=base.with_(m=c.config.tiling.m, k=c.config.tiling.k, n=c.config.tiling.n,
                                               k_mt=c.config.tiling.k_mt,
                                            rho=c.config.tiling.rho, b_pack=c.config.layout.b_pack,
                                            **({"convert_once": c.config.kernel.convert_once} if kernels else {}),
                                            **({"rows": c.config.options.rows} if rows else {})))
                  for c in result.top]
    if a.measure:
        try:
            measured = measure_on_npu(result.top[: a.measure], a.iters, a.warmup, progress=True)
        except ToolchainMissing as e:
            print(f"gemm-gen tune: cannot measure: {e}", file=sys.stderr)
            return EXIT_USAGE
        result.top = measured + result.top[a.measure:]
    if a.json:
        print(json.dumps(tune_json(result, a.top if not a.measure else len(result.top)), indent=1))
    else:
        print(tune_text(result, a.top if not a.measure else len(result.top)))
    return 0


def measure_on_npu(cands: list[Candidate], iters: int, warmup: int, progress: bool = True) -> list[Candidate]:
    """The candidates measured on the NPU (app/limits.measure passed to search.measure_candidates:
    fastest first, one that fails to build or run scores inf and the rest go on), with a progress bar."""
    from tqdm import tqdm

    bar = tqdm(total=len(cands), desc="measuring on the NPU", unit="design", file=sys.stderr, disable=not progress)

    def on_npu(c: GemmConfig) -> float:
        bar.set_postfix_str(f"{c.tiling.m}x{c.tiling.k}x{c.tiling.n} k_mt {c.tiling.k_mt}")
        try:
            return measure(c, iters, warmup)
        finally:
            bar.update()

    try:
        return search.measure_candidates(cands, on_npu)
    finally:
        bar.close()


def tune_json(r: TuneResult, count: int) -> dict[str, Any]:
    pr, c = r.problem, r.problem.base
    return {
        "predicted": True,
        "device": c.array.device, "problem": [pr.M, pr.K, pr.N], "dtype_in": c.types.dtype_in,
            "dtype_b": c.types.dtype_b,
        "dtype_out": c.types.dtype_out, "acc": c.types.acc, "b_col_maj": c.layout.b_col_maj,
        "emulate_bf16_with_bfp16": c.kernel.emulate_bf16_with_bfp16,
        "tilings": r.tilings, "candidates_ranked": r.evaluated, "rejected_by_validate": r.rejected_by_validate,
        "search_seconds": r.seconds,
        "ranked_by": "measurement" if any(c.measured_s is not None for c in r.top) else r.rank,
        "top": [c.to_json() | ({"convert_once": bool(c.config.kernel.convert_once)} if r.kernels_weighed else {})
                | ({"mapping": array.mapping_of(c.config.dev, c.config.array.rows)} if r.mappings_weighed else {})
                for c in r.top[:count]],
    }


def tune_text(r: TuneResult, count: int) -> str:
    pr, spec = r.problem, r.problem.base
    layout = "column-major" if spec.layout.b_col_maj else "row-major"
    types = _types(spec.types.dtype_in, str(spec.types.dtype_b), spec.types.dtype_out, str(spec.types.acc),
                   bool(spec.kernel.emulate_bf16_with_bfp16))
    measured = any(c.measured_s is not None for c in r.top)
    lines = [f"tune {spec.array.device} {pr.M}x{pr.K}x{pr.N} {types}, B {layout}: "
             f"{r.tilings:,} tilings, {r.evaluated:,} candidates ranked in {r.seconds * 1e3:.0f} ms "
             f"(throughputs are PREDICTED by the model"
             f"{'; re-ranked by measurement' if measured else ''}"
             f"{'; ranked by the pessimistic end of each range' if r.rank == 'pessimistic' and not measured else ''})"]
    packs = len(b_packs(pr.base.types.t_b, pr.base.groups.group_size)) > 1  # a B type with a packing to choose: show it
    head = f"{'rank':>4}  {'m x k x n':<14} {'k_mt':>5}  {'rho':>3}  " + (f"{'B pack':<6}  " if packs else "") + \
        (f"{'kernel':<12}  " if r.kernels_weighed else "") + (f"{'mapping':<11}  " if r.mappings_weighed else "") + \
        f"{'pred TOPS':>9}  {'range':<11}  {'bound':<7}  {'compute':>7}  " \
           f"{'memory':>7}  {'MAC/cyc':>7}  {'L1':>4}  {'L2':>4}  {'pad':>5}"
    if measured:
        head += f"  {'meas TOPS':>9}"
    lines.append(head)
    for i, c in enumerate(r.top[:count], 1):
        cf = c.config
        line = (f"{i:>4}  {f'{cf.tiling.m}x{cf.tiling.k}x{cf.tiling.n}':<14} {cf.tiling.k_mt:>5}  {cf.tiling.rho:>3}  "
                + (f"{cf.layout.b_pack:<6}  " if packs else "")
                + (f"{'convert-once' if cf.kernel.convert_once else 'emulated':<12}  " if r.kernels_weighed else "")
                + (f"{array.mapping_of(cf.dev, cf.array.rows):<11}  " if r.mappings_weighed else "")
                + f"{c.tops:>9.2f}  "
                f"{f'{c.tops_low:.2f}-{c.tops_high:.2f}':<11}  {c.bound:<7}  "
                f"{c.compute_bound_tops:>7.2f}  {c.memory_bound_tops:>7.2f}  {c.core_macs_per_cycle:>7.1f}  "
                f"{c.l1_fraction:>4.0%}  {c.l2_fraction:>4.0%}  {c.wasted_fraction:>5.1%}")
        if measured:
            mt = c.measured_tops
            line += f"  {mt:>9.2f}" if mt is not None else f"  {'-':>9}"
        lines.append(line)
    return "\n".join(lines)


def tune_many_text(r: ManyResult) -> str:
    c = r.config
    types = _types(c.types.dtype_in, str(c.types.dtype_b), c.types.dtype_out, str(c.types.acc),
                   bool(c.kernel.emulate_bf16_with_bfp16))
    served = SERVED[c.runtime.runtime_sizes]
    lines = [f"tune one design for {len(r.sizes)} sizes, {c.array.device} {types}, B "
             f"{'column' if c.layout.b_col_maj else 'row'}-major: {r.candidates} candidates priced at every size in "
             f"{r.seconds:.1f} s (times are PREDICTED by the model)",
             f"design  {c.tiling.m}x{c.tiling.k}x{c.tiling.n}, k_mt "
             f"{c.tiling.k_mt}" + (f", rho {c.tiling.rho}" if c.tiling.rho > 1 else "")
             + ("" if c.runtime.task_span == 1 else
                f", shim tasks spanning {c.runtime.task_span or 'as many'} output blocks (--task-span "
                f"{c.runtime.task_span})")
             + f"; built for {c.size.M}x{c.size.K}x{c.size.N}, serves {served}",
             f"{'size':<16} {'weight':>6}  {'pred TOPS':>9}  {'pred us':>9}   {'own design':<22} {'pred TOPS':>9}  "
             f"{'pred us':>9}  {'loss':>6}"]
    for s in r.sizes:
        sp = s.special
        own = "(none)"
        if sp:
            t = sp.tiling
            own = f"{t.m}x{t.k}x{t.n} k_mt {t.k_mt}" + (f" rho {t.rho}" if t.rho > 1 else "")
        shared_tops = 2.0 * s.size.macs / s.shared_s / 1e12
        line = f"{str(s.size):<16} {s.weight:>6g}  {shared_tops:>9.3f}  {s.shared_s * 1e6:>9,.1f}   {own:<22} "
        if s.special_s is not None and s.loss is not None:
            line += f"{2.0 * s.size.macs / s.special_s / 1e12:>9.3f}  {s.special_s * 1e6:>9,.1f}  {s.loss:>6.1%}"
        lines.append(line)
    shared, special = r.total("shared"), r.total("special")
    lines.append(f"weighted total: {shared * 1e6:,.1f} us on the one design, {special * 1e6:,.1f} us on a design per "
                 f"size ({shared / special - 1:+.1%}; one xclbin instead of {len(r.sizes)})")
    return "\n".join(lines)


# ---- roofline -----------------------------------------------------------------------------------
MAX_POINTS = 100_000  # sweep points: each is three model evaluations; a plot shows no more


def cmd_roofline(a: argparse.Namespace) -> int:
    out = check_output_dir(a.out_dir, "--out-dir")
    pyplot()  # an unusable plotting backend: one line before any work
    chosen = choice(a)
    config = check_config(chosen.config, budgets=False)  # as predict: a budget alone does not stop a prediction
    say_chosen("roofline", chosen)
    emulated = "bfp16emu" if config.kernel.emulate_bf16_with_bfp16 else ""
    name = (f"{config.array.device}_{config.types.dtype_in}{emulated}_"
            f"{config.types.dtype_out}_{'bcol' if config.layout.b_col_maj else 'brow'}")
    roof, roof_png = roofline_png(config,
                                  out / f"roofline_{name}_{config.tiling.m}x{config.tiling.k}x{config.tiling.n}.png",
                                  a.max_size,
                                  a.points)
    heat, heat_png = heatmap_png(config, out / f"heatmap_{name}_{config.size.M}x{config.size.K}x{config.size.N}.png")
    write_all({Path(roof["path"]): roof_png, Path(heat["path"]): heat_png})  # both or neither
    if a.json:
        print(json.dumps({"predicted": True, "roofline": roof, "heatmap": heat}, indent=1))
    else:
        print(f"wrote {roof['path']} ({roof['points']} predicted points, best {roof['best_tops']:.2f} TOPS)")
        print(f"wrote {heat['path']} ({heat['tilings']} tilings, best {heat['best_tops']:.2f} TOPS predicted)")
    return 0


# ---- calibrate ----------------------------------------------------------------------------------
def cmd_calibrate(a: argparse.Namespace) -> int:
    output = None if a.output is None else check_output_file(a.output, "-o")  # before the refit
    rows = measured.read_records([Path(f) for f in a.measurements])
    result = measured.refit(rows, machine=a.machine)
    if a.json:
        print(json.dumps({"fitted": result.fitted, "refused": result.refused,
                          "errors": {role: {r.name: e for r, e in result.errors(result.after, role)}
                                     for role in ("fit", "check")}}, indent=1))
    else:
        print(measured.report(result))
    if output is not None:
        write_atomic(output, json.dumps(measured.calibration_data(result, a.machine), indent=2) + "\n")
        if not a.json:
            print(f"wrote {a.output}: set GEMM_GEN_CALIBRATION={a.output} for predict, tune and the tuner's "
                  f"choices to use it")
    return 0


def register(sub: Any) -> None:
    sp = sub.add_parser("predict", help="predicted time and throughput of a design (analytical model)")
    _model_args(sp)
    sp.set_defaults(func=cmd_predict)

    sp = sub.add_parser("tune", help="rank every valid tiling of a problem by predicted throughput")
    _model_args(sp)
    sp.add_argument("--top", type=counted(1, what="a design count"), default=5, help="designs to list (default 5)")
    sp.add_argument("--rank", choices=RANKS, default="model",
                    help="rank by the prediction (model) or by its pessimistic end over the constants' spreads")
    sp.add_argument("--measure", type=counted(0, what="a design count"), default=0, metavar="N",
                    help="build and run the top N on the NPU and re-rank them by measurement")
    sp.add_argument("--iters", type=counted(1, what="a run count"), default=10, help="timed runs per measured design")
    sp.add_argument("--warmup", type=counted(0, what="a run count"), default=1, help="untimed runs before timing")
    sp.set_defaults(func=cmd_tune)

    sp = sub.add_parser("calibrate", help="refit the model's DRAM and dispatch constants on `make validate` "
                        "records; report the error on the rows not fitted")
    sp.add_argument("--measurements", nargs="+", required=True, metavar="FILE",
                    help="build/validate_<device>.json files from NPU machines")
    sp.add_argument("-o", "--output", help="write the refitted calibration JSON here")
    sp.add_argument("--machine", default=None, metavar="NAME",
                    help="the machine the records come from: its profile gets the refitted peak (a new name adds "
                    "a profile) and becomes the default in the output (default: the device's default profile)")
    sp.add_argument("--json", action="store_true", help="print one JSON object")
    sp.set_defaults(func=cmd_calibrate)

    sp = sub.add_parser("roofline", help="PNG plots: predicted roofline sweep and tiling heat map")
    problem_args(sp)
    sp.add_argument("--out-dir", default="build", help="where the PNG files go (default build/)")
    sp.add_argument("--max-size", type=SIZE, default=8192, help="largest M, K, N of the sweep")
    sp.add_argument("--points", type=counted(1, MAX_POINTS, "a point count"), default=500,
                    help="problem sizes sampled for the sweep")
    sp.set_defaults(func=cmd_roofline)
