"""plan and generate: a design from the flags, described or written as JSON. They load the search, the design and
the model's layout prices, never the simulator, the back ends or the plots (app/cli.py). make-args: the Makefile's
option variables, from the option table."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

from ..design import build_design
from ..design.serialize import dumps
from ..facts.atomic import check_output_dir, check_output_file, write_atomic
from ..model.layouts import layout_prices
from .choice import choice, kernel_choice_json, kernel_choice_text, say_chosen
from .cliargs import call_layouts, make_include, problem_args
from .plan_info import plan_info, xclbin_plan
from .report import plan_text


def cmd_plan(a: argparse.Namespace) -> int:
    chosen = choice(a)
    design = build_design(chosen.config)
    info = replace(plan_info(design), layouts=layout_prices(chosen.config))
    if a.runtime_sizes:  # several calls: the xclbins they need and which share one
        info = replace(info, calls=xclbin_plan(chosen.config, a.runtime_sizes, call_layouts(a), a.weights))
    kernels = kernel_choice_json(chosen)  # an open convert-once option: which kernel and why
    if a.json:
        print(json.dumps(info.to_json() | ({"kernel_choice": kernels} if kernels else {}), indent=1))
    else:
        print("\n".join(t for t in (plan_text(info), kernel_choice_text(chosen)) if t))
    return 0


def cmd_generate(a: argparse.Namespace) -> int:
    # where the output goes is checked before any work: the file -o names, else a file in --build-dir
    place = check_output_file(a.output, "-o") if a.output is not None else check_output_dir(a.build_dir, "--build-dir")
    chosen = choice(a)
    config = chosen.config
    design = build_design(config)  # validate before touching the output directory
    say_chosen("generate", chosen)
    text = dumps(design)
    out = place if a.output is not None else place / f"design_{design.config.suffix}.json"
    write_atomic(out, text)
    if a.json:
        print(json.dumps({"design": str(out), "bytes": len(text)}))
    else:
        print(f"wrote {out} ({len(text)} bytes)")
    return 0


def _plan_flags(p: argparse.ArgumentParser) -> None:
    problem_args(p)
    p.set_defaults(func=cmd_plan)


def _generate_flags(p: argparse.ArgumentParser) -> None:
    problem_args(p)
    p.add_argument("--build-dir", default="build")
    p.add_argument("-o", "--output", help="output file (default build/design_<suffix>.json)")
    p.set_defaults(func=cmd_generate)


def cmd_make_args(a: argparse.Namespace) -> int:
    print(make_include(), end="")
    return 0


def _make_args_flags(p: argparse.ArgumentParser) -> None:
    p.set_defaults(func=cmd_make_args)


# app/cli.py's COMMANDS names this module for them
FLAGS = {"plan": _plan_flags, "generate": _generate_flags, "make-args": _make_args_flags}
