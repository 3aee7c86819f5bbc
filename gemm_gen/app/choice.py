"""Choosing a design, the one named step between a command's flags and the design it uses: the flags
give the base config and the pins (app/cliargs.py), search.choose fills in what is open, and the
commands that build, run or write a design say in one line what was chosen before they use it."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .. import search
from ..facts.errors import opt, spelled
from ..search import Choice, KernelOption
from ..spec.config import GemmConfig
from ..spec.rules import array
from .cliargs import request


def choice(a: argparse.Namespace) -> Choice:
    """What search.choose makes of the request the flags give."""
    return search.choose(request(a))


def choose_design(a: argparse.Namespace) -> GemmConfig:
    """The design a command's flags ask for: search.choose on their request."""
    return choice(a).config


def chosen_text(command: str, chosen: Choice) -> str | None:
    """One line naming what search.choose filled in, with the flags that pin it; None when the
    request pinned the whole tiling (and a bfp16 B's packing, and the kernel), so that nothing was
    chosen."""
    if not chosen.chose_anything:
        return None
    c, packing, kernel = chosen.config, "b_pack" in chosen.filled, "convert_once" in chosen.filled
    mapping = array.mapping_of(c.dev, c.array.rows, c.array.cols) if "mapping" in chosen.filled else None
    spanned = "task_span" in chosen.filled
    pinned = [("m", True), ("k", True), ("n", True), ("k_mt", True), ("rho", True), ("b_pack", packing),
              ("convert_once", kernel), ("rows", mapping is not None), ("task_span", spanned)]
    value = {"rows": mapping}  # the mapping by name: decode-split also fixes the columns
    flags = spelled(" ".join(opt(name, value.get(name, c.value(name))) for name, shown in pinned if shown))
    packed = f", B packed in {c.layout.b_pack}" if packing else ""
    packed += ", shim tasks spanning output blocks (predicted faster)" if spanned else ""
    packed += f", the {mapping} mapping (predicted faster)" if mapping else ""
    which = f"the {search.KERNEL_NAMES[bool(c.kernel.convert_once)].split(' (')[0]} kernel (predicted faster) and " \
        if kernel else ""
    return (f"gemm-gen {command}: chose {which}tiles {c.tiling.m}x{c.tiling.k}x{c.tiling.n}, k_mt {c.tiling.k_mt}, rho "
            f"{c.tiling.rho}{packed} "
            f"for {c.array.device} {c.size.M}x{c.size.K}x{c.size.N} (to pin them: {flags})")


def _tflops(c: GemmConfig, seconds: float) -> float:
    return 2.0 * c.size.M * c.size.K * c.size.N / seconds / 1e12


def kernel_choice_text(chosen: Choice) -> str | None:
    """The plan's lines on an open convert-once option: which kernel the search took and why (each
    kernel's predicted time with its own tiles); None when the kernel was given or had no rival."""
    if not chosen.kernels:
        return None
    first = chosen.kernels[0]
    lines = [f"chosen    the {first.name} kernel: PREDICTED faster by the model than the other bf16 kernel on "
             "the bfp16 datapath, each tuned with tiles that fit its own L1 (a prediction, not a measurement)"]
    for kern in chosen.kernels:
        label = f"{kern.name.split(' (')[0]:<13}"
        c = kern.config
        if c is None:
            lines.append(f"          {label} no valid design: {kern.why_not}")
            continue
        mark = "  <- chosen" if c == chosen.config else ""
        lines.append(f"          {label} predicted {kern.predicted_s * 1e6:,.0f} us, "
                     f"{_tflops(c, kern.predicted_s):.2f} TFLOPS (tiles {c.tiling.m}x{c.tiling.k}x{c.tiling.n}, k_mt "
                     f"{c.tiling.k_mt}, "
                     f"rho {c.tiling.rho}){mark}")
    lines.append(spelled(f"          {opt('convert_once', True)} or {opt('convert_once', False)} keeps one kernel"))
    return "\n".join(lines)


def kernel_choice_json(chosen: Choice) -> list[dict[str, Any]] | None:
    """kernel_choice_text's facts for `plan --json` (times predicted)."""
    if not chosen.kernels:
        return None
    return [_kernel_json(kern, kern.config is not None and kern.config == chosen.config) for kern in chosen.kernels]


def _kernel_json(kern: KernelOption, chosen: bool) -> dict[str, Any]:
    c = kern.config
    out: dict[str, Any] = {"kernel": kern.name, "convert_once": kern.convert_once, "chosen": chosen,
                           "predicted": True}
    if c is None:
        return out | {"valid": False, "why_not": kern.why_not}
    return out | {"valid": True, "predicted_time_us": kern.predicted_s * 1e6,
                  "predicted_tflops": _tflops(c, kern.predicted_s), "m": c.tiling.m, "k": c.tiling.k, "n": c.tiling.n,
                  "k_mt": c.tiling.k_mt,
                  "rho": c.tiling.rho}


def say_chosen(command: str, chosen: Choice) -> None:
    """chosen_text on stderr, once the design is built and before the command uses it (a design that
    fails its checks says only why; stdout keeps the command's output and --json)."""
    text = chosen_text(command, chosen)
    if text is not None:
        print(text, file=sys.stderr, flush=True)
