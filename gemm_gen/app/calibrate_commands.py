"""gemm-gen calibrate: the model's DRAM and dispatch constants refitted on `make validate` records (scipy loads
with the fit, model/fit/measured.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..facts.atomic import check_output_file, write_atomic
from ..model.fit import measured


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


def _calibrate_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--measurements", nargs="+", required=True, metavar="FILE",
                   help="build/validate_<device>.json files from NPU machines")
    p.add_argument("-o", "--output", help="write the refitted calibration JSON here")
    p.add_argument("--machine", default=None, metavar="NAME",
                   help="the machine the records come from: its profile gets the refitted peak (a new name adds "
                   "a profile) and becomes the default in the output (default: the device's default profile)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_calibrate)


FLAGS = {"calibrate": _calibrate_flags}  # app/cli.py's COMMANDS names this module for it
