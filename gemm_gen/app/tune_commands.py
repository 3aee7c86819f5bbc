"""gemm-gen tune: every valid tiling of a problem ranked by predicted throughput (or one design for several sizes),
and with --measure the top designs built and run on the NPU (the back ends load with this command only)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from typing import Any

from .. import search
from ..design.serve import SERVED
from ..facts.errors import ConfigError, ToolchainMissing
from ..model.perf import Workload
from ..search.knobs import variants
from ..search.tune import RANKS, Candidate, TuneResult, tune_variants
from ..search.tune_many import ManyResult, tune_many
from ..spec.config import GemmConfig, b_packs
from ..spec.rules import array, decode_split
from .cliargs import base_config, counted, pins
from .limits import measure
from .model_commands import model_args, model_ends, model_params, types_words
from .parsing import EXIT_USAGE


# ---- tune ---------------------------------------------------------------------------------------
def cmd_tune(a: argparse.Namespace) -> int:
    base = base_config(a)
    top = max(a.top, a.measure or 0)
    pinned = pins(a)
    if a.runtime_sizes:
        if a.measure:
            raise ConfigError(f"--measure {a.measure} re-ranks the designs of one size; --runtime-sizes ranks one "
                              "design for several", "drop --measure, or tune one size at a time")

        many = tune_many(base, tuple(a.runtime_sizes), a.weights, pinned, model_params(a))
        print(json.dumps(many.to_json(), indent=1) if a.json else tune_many_text(many))
        return 0
    # the model weighs the discrete knobs the options leave open (search/knobs.py: B's packing, npu2 bf16's kernel,
    # the mapping of a decode-shaped call)
    result = tune_variants(Workload.of(base), variants(base, pinned), top, pinned, model_params(a), model_ends(a),
                           a.rank)
    kernels, rows = result.kernels_weighed, result.mappings_weighed
    result.top = [replace(c, config=base.with_(m=c.config.tiling.m, k=c.config.tiling.k, n=c.config.tiling.n,
                                               k_mt=c.config.tiling.k_mt,
                                            rho=c.config.tiling.rho, b_pack=c.config.layout.b_pack,
                                            **({"convert_once": c.config.kernel.convert_once} if kernels else {}),
                                            **({"rows": c.config.options.rows, "cols": c.config.options.cols}
                                               if rows else {})))
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
                | ({"mapping": array.mapping_of(c.config.dev, c.config.array.rows, c.config.array.cols)}
                   if r.mappings_weighed else {})
                for c in r.top[:count]],
    }


def tune_text(r: TuneResult, count: int) -> str:
    pr, spec = r.problem, r.problem.base
    layout = "column-major" if spec.layout.b_col_maj else "row-major"
    types = types_words(spec.types.dtype_in, str(spec.types.dtype_b), spec.types.dtype_out, str(spec.types.acc),
                   bool(spec.kernel.emulate_bf16_with_bfp16))
    measured = any(c.measured_s is not None for c in r.top)
    lines = [f"tune {spec.array.device} {pr.M}x{pr.K}x{pr.N} {types}, B {layout}: "
             f"{r.tilings:,} tilings, {r.evaluated:,} candidates ranked in {r.seconds * 1e3:.0f} ms "
             f"(throughputs are PREDICTED by the model"
             f"{'; re-ranked by measurement' if measured else ''}"
             f"{'; ranked by the pessimistic end of each range' if r.rank == 'pessimistic' and not measured else ''})"]
    split = decode_split.is_split(pr.base.dev, pr.base.array.rows, pr.base.array.cols)
    # a B type with a packing to choose (or a split placement among the candidates, whose B may be in strips): show it
    packs = len(b_packs(pr.base.types.t_b, pr.base.groups.group_size, split)) > 1 \
        or any(c.config.layout.b_pack != "tiles" for c in r.top)
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
                + (f"{array.mapping_of(cf.dev, cf.array.rows, cf.array.cols):<11}  " if r.mappings_weighed else "")
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
    types = types_words(c.types.dtype_in, str(c.types.dtype_b), c.types.dtype_out, str(c.types.acc),
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


def _tune_flags(p: argparse.ArgumentParser) -> None:
    model_args(p)
    p.add_argument("--top", type=counted(1, what="a design count"), default=5, help="designs to list (default 5)")
    p.add_argument("--rank", choices=RANKS, default="model",
                   help="rank by the prediction (model) or by its pessimistic end over the constants' spreads")
    p.add_argument("--measure", type=counted(0, what="a design count"), default=0, metavar="N",
                   help="build and run the top N on the NPU and re-rank them by measurement")
    p.add_argument("--iters", type=counted(1, what="a run count"), default=10, help="timed runs per measured design")
    p.add_argument("--warmup", type=counted(0, what="a run count"), default=1, help="untimed runs before timing")
    p.set_defaults(func=cmd_tune)


FLAGS = {"tune": _tune_flags}  # app/cli.py's COMMANDS names this module for it
