#!/usr/bin/env python3
"""Benchmark: how long `gemm-gen --help` (and `plan`, `predict`) take to start, against `python -c "import numpy"`
in the same run (issue 33 item 3: --help within 3x of importing NumPy).

Each command runs as a fresh process, the commands interleaved round by round so that they share the machine's
load; the median wall time of each is printed with its ratio to NumPy's import. Exit 1 when `gemm-gen --help`
exceeds the limit. A benchmark, never a test: tests/app/test_cli.py checks which modules each command loads instead.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

LIMIT = 3.0  # gemm-gen --help against python -c "import numpy"
PLAN = ["--dev", "npu2", "-M", "512", "-K", "512", "-N", "512"]


def commands() -> dict[str, list[str]]:
    """The commands timed: the reference first, then gemm-gen's console script as a user runs it."""
    script = Path(sys.executable).with_name("gemm-gen")
    gemm_gen = [str(script)] if script.exists() else [sys.executable, "-m", "gemm_gen.app.cli"]
    return {"python -c 'import numpy'": [sys.executable, "-c", "import numpy"],
            "gemm-gen --help": [*gemm_gen, "--help"],
            "gemm-gen plan (512^3)": [*gemm_gen, "plan", *PLAN],
            "gemm-gen predict (512^3)": [*gemm_gen, "predict", *PLAN]}


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7, help="rounds (each command once per round); the median is kept")
    a = ap.parse_args()
    cmds = commands()
    for argv in cmds.values():  # warm the file cache and byte-compile once, untimed
        timed(argv)
    times: dict[str, list[float]] = {name: [] for name in cmds}
    for _ in range(a.runs):
        for name, argv in cmds.items():
            times[name].append(timed(argv))
    median = {name: statistics.median(t) for name, t in times.items()}
    numpy_s = median["python -c 'import numpy'"]
    print(f"median wall time of {a.runs} runs each, interleaved")
    for name, s in median.items():
        print(f"  {name:<26} {s * 1e3:7.0f} ms  {s / numpy_s:5.2f}x numpy's import")
    ratio = median["gemm-gen --help"] / numpy_s
    verdict = "PASS" if ratio <= LIMIT else "FAIL"
    print(f"{verdict}: gemm-gen --help is {ratio:.2f}x `python -c 'import numpy'` (limit {LIMIT:g}x)")
    return 0 if ratio <= LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
