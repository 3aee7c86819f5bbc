#!/usr/bin/env python3
"""Benchmark of issue 33 item 1: `gemm-gen simulate` against NumPy's float32 matmul of the same shape.

Cases (each the design the CLI picks for its flags, bf16 on npu2 by default):
  readme   the README's headline `make sim DEVICE=npu2 M=1344 K=1536 N=1536 B_COL_MAJ=1`
  cube     2048 x 2048 x 2048
  large    `gemm-gen simulate --dev npu2 -M 4096 -K 4096 -N 2048`

Each case runs in a child process of its own, which builds the design, simulates it (the checks and the
accuracy report included, as `simulate` does) and then times NumPy's float32 matmul of the same shape
(best of 3) in the same process: the ratio compares two figures taken under the same load. The child
reports PASS, the simulation's wall time, the ratio and its peak resident memory (ru_maxrss) next to
the bytes of A, B and C (the design's types, and float32's). The target is a ratio of at most 10.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

CASES = {
    "readme": ["--dev", "npu2", "-M", "1344", "-K", "1536", "-N", "1536", "--b-col-maj", "1"],
    "cube": ["--dev", "npu2", "-M", "2048", "-K", "2048", "-N", "2048"],
    "large": ["--dev", "npu2", "-M", "4096", "-K", "4096", "-N", "2048"],
}
TARGET = 10.0  # at most this many times NumPy's float32 matmul (issue 33 item 1)
MIB = 2**20


def child(case: str, literal: bool) -> dict[str, object]:
    """Simulate one case and time NumPy on its shape, in this process."""
    from gemm_gen.app.choice import choose_design
    from gemm_gen.app.cli import parser
    from gemm_gen.design import build_design
    from gemm_gen.sim import run

    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    args = parser().parse_args(["simulate", *CASES[case]])
    c = choose_design(args)
    design = build_design(c)
    kw = {"literal": True} if literal else {}
    start = time.perf_counter()
    result = run.simulate(design, **kw)
    sim_s = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    rng = np.random.default_rng(0)
    x = rng.random((c.M, c.K), dtype=np.float32)
    y = rng.random((c.K, c.N), dtype=np.float32)
    np_s = min(_timed(lambda: x @ y) for _ in range(3))
    own = (c.t_in.nbytes(c.M * c.K) + c.t_b.nbytes(c.K * c.N) + c.t_out.nbytes(c.M * c.N))
    return {"case": case, "device": c.device, "shape": f"{c.M}x{c.K}x{c.N}",
            "types": f"{c.dtype_in}->{c.dtype_out}", "tiles": f"{c.m}x{c.k}x{c.n} k_mt {c.k_mt} rho {c.rho}",
            "b_col_maj": c.b_col_maj, "passed": result.passed, "sim_s": sim_s, "numpy_s": np_s,
            "ratio": sim_s / np_s, "matmul_calls": result.kernel.matmul_calls, "peak_bytes": peak,
            "start_bytes": base_rss, "operand_bytes": own, "f32_operand_bytes": 4 * (c.M * c.K + c.K * c.N + c.M * c.N)}


def _timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases", nargs="*", help=f"of {', '.join(CASES)} (default: all)")
    ap.add_argument("--literal", action="store_true", help="the literal (event by event) simulator")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.literal)))
        return 0
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, numpy {np.__version__}, "
          f"mode {'literal' if a.literal else 'fast'}")
    unknown = sorted(set(a.cases) - set(CASES))
    if unknown:
        ap.error(f"unknown case(s) {unknown}: choose from {list(CASES)}")
    ok = True
    for case in a.cases or list(CASES):
        cmd = [sys.executable, __file__, "--child", case, *(["--literal"] if a.literal else [])]
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if out.returncode:
            print(f"{case}: the child failed\n{out.stderr}")
            ok = False
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        passed = bool(r["passed"]) and float(r["ratio"]) <= TARGET
        ok &= passed
        print(f"{case}: simulate {r['device']} {r['shape']} {r['types']} (tiles {r['tiles']}, B col-major "
              f"{int(bool(r['b_col_maj']))}, {r['matmul_calls']:,} kernel calls): {r['sim_s']:.2f} s "
              f"[{'PASS' if r['passed'] else 'FAIL'}]; numpy float32 matmul {r['numpy_s']:.3f} s; "
              f"ratio {r['ratio']:.1f}x (target <= {TARGET:.0f}x); peak RSS {r['peak_bytes'] / MIB:.0f} MiB "
              f"({r['start_bytes'] / MIB:.0f} MiB before the design; A + B + C {r['operand_bytes'] / MIB:.0f} MiB "
              f"in their types, {r['f32_operand_bytes'] / MIB:.0f} MiB as float32)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
