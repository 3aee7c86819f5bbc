"""gemm-gen: the command line. Bad input: one line, exit 2. A failed check: exit 1."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace

from ..atomic import check_output_dir, check_output_file, write_atomic
from ..design import build_design
from ..design.serialize import dumps
from ..epilogue import MODES
from ..errors import BuildError, GemmGenError, SimulationError, spelling
from ..inputs import INPUT_FAMILIES
from ..model.layouts import layout_prices
from ..sim import run as sim_run
from ..sim.memory import GB, SAY_ABOVE, check_memory
from ..spec import SPELLINGS, Problem, spell_cli
from . import model_commands, npu_commands
from .choice import choice, choose_design, kernel_choice_json, kernel_choice_text, say_chosen
from .cliargs import EXIT_FAIL, EXIT_USAGE, SEED, Parser, call_layouts, make_include, problem_args
from .plan_info import plan_info, xclbin_plan
from .report import calls_text, plan_text, sim_text

# Command families in modules of their own: each has register(subparsers).
COMMAND_MODULES = (npu_commands, model_commands)
DEBUG_ENV = "GEMM_GEN_DEBUG"  # set (not 0): errors raise with their traceback instead of one line
SPELLING_ENV = "GEMM_GEN_SPELLING"  # "make": options named as the Makefile's variables (spec.SPELLINGS)
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a C tool killed by the closed pipe would report


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


CALL_ACTIVATIONS = tuple(a.value for a in MODES)  # what a runtime-activation build's call can select


def cmd_simulate(a: argparse.Namespace) -> int:
    config = choose_design(a)  # the report names it (the plan, tiles included) with the result
    design = build_design(config)
    problems = list(a.runtime_sizes or [Problem(config.size.M, config.size.K, config.size.N)])
    need = check_memory(config, problems)  # more than this machine has: one line, before any array is made
    if need > SAY_ABOVE:
        print(f"simulating needs about {need / GB:.1f} GB of memory", file=sys.stderr, flush=True)
    try:  # simulate_calls refuses any size the design cannot serve (exit 2) before it runs one
        results = sim_run.simulate_calls(design, problems, seed=a.seed, progress=not a.json and sys.stderr.isatty(),
                                         inputs=a.inputs, layouts=call_layouts(a),
                                         activations=[a.activation_call] * len(problems))
    except SimulationError as e:
        if a.json:
            print(json.dumps({"passed": False, "error": str(e), "kind": type(e).__name__}))
        else:
            print(f"FAIL: {e}")
        return EXIT_FAIL
    passed = all(r.passed for r in results)
    if a.json:
        out = [r.to_json() for r in results]
        print(json.dumps(out[0] if not a.runtime_sizes else {"passed": passed, "calls": out}, indent=1))
    elif not a.runtime_sizes:
        print(sim_text(results[0], plan_info(design), a.verbose))
    else:
        print(calls_text(results, plan_info(design)))
    return 0 if passed else EXIT_FAIL


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="gemm-gen", description="Generate and check whole-array GEMM designs for Ryzen AI NPUs.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    sp = sub.add_parser("plan", help="tiling, padding, L1/L2 budgets, BDs and DRAM traffic of a design")
    problem_args(sp)
    sp.set_defaults(func=cmd_plan)
    sp = sub.add_parser("generate", help="write the Design as JSON into build/")
    problem_args(sp)
    sp.add_argument("--build-dir", default="build")
    sp.add_argument("-o", "--output", help="output file (default build/design_<suffix>.json)")
    sp.set_defaults(func=cmd_generate)
    sp = sub.add_parser("simulate", help="run the design in the functional simulator and check it")
    problem_args(sp)
    sp.add_argument("--seed", type=SEED, default=0, help="seed of the test inputs")
    sp.add_argument("--inputs", choices=INPUT_FAMILIES, default="exact",
                    help="float inputs: exact (fp32-exact sums, the default) or wide (lossy in bfp16)")
    sp.add_argument("--activation-call", choices=CALL_ACTIVATIONS, default=None,
                    help="the activation each call selects on a build with --activation runtime (its mode word in "
                    "every core's runtime-parameter buffer; default none)")
    sp.add_argument("-v", "--verbose", action="store_true", help="list the bytes of every DMA channel")
    sp.set_defaults(func=cmd_simulate)
    sp = sub.add_parser("make-args", help="print gemm_gen.mk, the Makefile's option variables and GEN_ARGS, from "
                        "the option table")
    sp.set_defaults(func=cmd_make_args)
    for module in COMMAND_MODULES:
        module.register(sub)
    return p


def cmd_make_args(a: argparse.Namespace) -> int:
    print(make_include(), end="")
    return 0


def debugging() -> bool:
    """GEMM_GEN_DEBUG asks for tracebacks; unset, empty, 0, false, no and off mean it does not."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


def main(argv: list[str] | None = None) -> int:
    """gemm-gen; its messages name options in the spelling GEMM_GEN_SPELLING names (make's recipes set "make")."""
    with spelling(SPELLINGS.get(os.environ.get(SPELLING_ENV, ""), spell_cli)):
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    try:
        args = parser().parse_args(argv)
        return int(args.func(args))
    except KeyboardInterrupt:  # outputs are written whole or not at all (atomic.py): nothing to undo here
        if debugging():
            raise
        print("gemm-gen: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `gemm-gen kernel | head`: the reader left; say nothing more
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except GemmGenError as e:
        if debugging():  # the traceback, for reports of our own defects
            raise
        if isinstance(e, (SimulationError, BuildError)):
            print(f"FAIL: {e}", file=sys.stderr)
            return EXIT_FAIL
        print(f"gemm-gen: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:  # a file the user named that the command could not read or write
        if debugging():
            raise
        where = f"{e.filename}: " if e.filename else ""
        print(f"gemm-gen: error: {where}{e.strerror or e}; check the path and its permissions", file=sys.stderr)
        return EXIT_USAGE


def _silence_stdout() -> None:
    """Point stdout at /dev/null so Python's exit-time flush cannot fail on the closed pipe again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
