"""gemm-gen predict: the performance model's prediction of one design (all outputs are predictions), and the flags
and text the model's commands share (tune_commands.py). It loads the search, the design and the model, never the
simulator, the back ends or the plots (app/cli.py)."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

from ..facts.devices import device
from ..facts.errors import ConfigError
from ..model.fit import upstream
from ..model.layouts import LayoutPrice, cheapest, layout_prices
from ..model.params import Params, load, load_ends
from ..model.perf import Workload
from ..model.predict import Prediction, Upstream, predict
from .choice import choice, say_chosen
from .cliargs import problem_args


def model_args(p: argparse.ArgumentParser) -> None:
    problem_args(p)
    p.add_argument("--dram-gbps", "--dram_gbps", dest="dram_gbps", type=float, default=None, metavar="X",
                   help="predict with your memory system's streaming bandwidth, X GB/s (default: the peak of the "
                   "machine profile, --machine)")
    p.add_argument("--machine", default=None, metavar="NAME",
                   help="the memory profile of the machine: npu1 phoenix-minipc; npu2 strix-laptop (default) or "
                   "krackan-minipc (model/calibration.json: each with its sources)")


def model_params(a: argparse.Namespace) -> Params:
    """The model's parameters, with the user's DRAM bandwidth when given."""
    return _with_dram(a, load())


def model_ends(a: argparse.Namespace) -> tuple[Params, Params]:
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


# ---- predict ------------------------------------------------------------------------------------
def cmd_predict(a: argparse.Namespace) -> int:
    chosen = choice(a)
    c, params = chosen.config, model_params(a)
    info = replace(predict(c, params, model_ends(a)),
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


def types_words(dtype_in: str, dtype_b: str, dtype_out: str, acc: str, emulate: bool) -> str:
    """bf16->bf16, bf16 via bfp16->bf16, or A bf16 x B bfp16 -> C bf16 (acc ...) for mixed ones."""
    if dtype_b == dtype_in and acc == dtype_out:
        return f"{dtype_in}{' via bfp16' if emulate else ''}->{dtype_out}"
    return f"A {dtype_in} x B {dtype_b} -> C {dtype_out}" + (f" (acc {acc})" if acc != dtype_out else "")


def predict_text(d: Prediction) -> str:
    dk = d.design  # what design it is
    lay = dk.layout
    layout = ("column-major" if lay.b_col_maj else "row-major") + (", DRAM strips" if lay.b_pack == "strips" else "")
    types = types_words(dk.types.dtype_in, dk.types.dtype_b, dk.types.dtype_out, dk.types.acc,
                        d.emulate_bf16_with_bfp16)
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
    lines += [] if d.shared is None else [d.shared.text()]
    lines += upstream_lines(d.upstream, dk.t_ma, k, n)
    lines += mixed_rate_lines(dk.device, dk.types.dtype_in, dk.types.dtype_b)
    if not d.buildable:
        lines.append(f"  NOT BUILDABLE as given ({d.not_buildable_because}); predicted as if it fitted")
    return "\n".join(lines)


def _mapping_words(mapping: str) -> str:
    """The design line's mapping, named only when it is not the whole array's."""
    if mapping == "decode-split":
        return ("decode-split mapping (every core a slice of N, B read once over every shim MM2S channel but A's: "
                "rules/decode_split.py); ")
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


def _predict_flags(p: argparse.ArgumentParser) -> None:
    model_args(p)
    p.set_defaults(func=cmd_predict)


FLAGS = {"predict": _predict_flags}  # app/cli.py's COMMANDS names this module for it
