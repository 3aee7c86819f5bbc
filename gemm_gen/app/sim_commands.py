"""simulate: the design run in the functional simulator and checked against the exact product. Its module is
imported only when the command runs (app/cli.py), so no other command loads the simulator."""

from __future__ import annotations

import argparse
import json
import sys

from ..design import build_design
from ..facts.epilogue import MODES
from ..facts.errors import SimulationError
from ..facts.inputs import INPUT_FAMILIES
from ..sim import run as sim_run
from ..sim.memory import GB, SAY_ABOVE, check_memory
from ..spec.config import GemmConfig
from ..spec.request import Problem
from .choice import choose_design
from .cliargs import SEED, base_config, call_layouts, problem_args
from .parsing import EXIT_FAIL
from .plan_info import plan_info
from .report import calls_text, sim_text

CALL_ACTIVATIONS = tuple(a.value for a in MODES)  # what a runtime-activation build's call can select


def cmd_simulate(a: argparse.Namespace) -> int:
    base = base_config(a)  # the types and sizes asked for, the tiling still open
    problems = list(a.runtime_sizes or [Problem(base.size.M, base.size.K, base.size.N)])
    # more than this machine has: one line before the tuner runs or any array is made (the need depends on the
    # types and sizes only, which choosing a design does not change)
    need = check_memory(base, problems, a.literal)
    config = choose_design(a)  # the report names it (the plan, tiles included) with the result
    if need > SAY_ABOVE:  # said once a design exists, so a refusal stays one line
        print(f"simulating needs about {need / GB:.1f} GB of memory", file=sys.stderr, flush=True)
    design = build_design(config)
    try:  # simulate_calls refuses any size the design cannot serve (exit 2) before it runs one
        results = sim_run.simulate_calls(design, problems, seed=a.seed, progress=not a.json and sys.stderr.isatty(),
                                         inputs=a.inputs, layouts=call_layouts(a),
                                         activations=[a.activation_call] * len(problems), literal=a.literal)
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
    if a.predicted and passed and not a.json:
        print(predicted_line(config, several=bool(a.runtime_sizes)))
    return 0 if passed else EXIT_FAIL


def predicted_line(c: GemmConfig, several: bool = False) -> str:
    """One line after PASS (`make sim` asks for it): what the analytical model predicts of this design at the size
    it is built for (a runtime-sized design: the largest it serves), with the range of the model's constants."""
    from ..model.predict import predict  # the model only when asked

    p = predict(c)
    return (f"PREDICTED on an {c.array.device} (the analytical model, not a measurement): {p.tops:.2f} TOPS "
            f"({p.tops_low:.2f} to {p.tops_high:.2f} over its constants' spreads), {p.time_us:,.0f} us for "
            f"{c.size.M}x{c.size.K}x{c.size.N}{' (the largest size it serves)' if several else ''}, {p.bound} bound; "
            "gemm-gen predict says why")


def _simulate_flags(p: argparse.ArgumentParser) -> None:
    problem_args(p)
    p.add_argument("--seed", type=SEED, default=0, help="seed of the test inputs")
    p.add_argument("--inputs", choices=INPUT_FAMILIES, default="exact",
                   help="float inputs: exact (fp32-exact sums, the default) or wide (lossy in bfp16)")
    p.add_argument("--activation-call", choices=CALL_ACTIVATIONS, default=None,
                   help="the activation each call selects on a build with --activation runtime (its mode word in "
                   "every core's runtime-parameter buffer; default none)")
    p.add_argument("-v", "--verbose", action="store_true", help="list the bytes of every DMA channel")
    p.add_argument("--predicted", action="store_true", help="after PASS, one line with the design's PREDICTED "
                   "throughput (the analytical model; make sim gives it)")
    p.add_argument("--literal", action="store_true", help="move every word and call every kernel one by one "
                   "(the same results and errors as the default, slower: docs/simulator.md)")
    p.set_defaults(func=cmd_simulate)


FLAGS = {"simulate": _simulate_flags}  # app/cli.py's COMMANDS names this module for it
