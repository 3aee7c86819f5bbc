#!/usr/bin/env python3
"""Benchmark of issue 33 item 1: `gemm-gen simulate` against NumPy's float32 matmul of the same shape.

Cases (each the design the CLI picks for its flags, bf16 on npu2 by default):
  readme   the README's headline `make sim DEVICE=npu2 M=1344 K=1536 N=1536 B_COL_MAJ=1`
  cube     2048 x 2048 x 2048
  large    `gemm-gen simulate --dev npu2 -M 4096 -K 4096 -N 2048`

Each case runs in a child process of its own, which builds the design, simulates it (seeded inputs, the run,
its checks, the exact reference and the accuracy report: all that `gemm-gen simulate` does after choosing the
design) and then times NumPy's float32 matmul of the same shape (best of 3) in the same process, so that the
ratio compares two figures taken under the same load. It reports PASS, the simulation's wall time, the ratio,
and the peak resident memory of the simulating process (ru_maxrss) next to the bytes of A, B and C and to the
peak of a process that only runs NumPy's matmul (its operands, result and BLAS buffers), and the peak of live
allocations while simulating (tracemalloc, in a child of its own: tracing slows the run). The target is a ratio
of at most 10 (the machine's load is printed: other work slows both figures).
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


def _peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def child(case: str, literal: bool) -> dict[str, object]:
    """Simulate one case and time NumPy on its shape, in this process."""
    from gemm_gen.app.choice import choose_design
    from gemm_gen.app.cli import parser
    from gemm_gen.design import build_design
    from gemm_gen.sim import run

    start = _peak()  # the interpreter, NumPy and gemm_gen imported
    c = choose_design(parser().parse_args(["simulate", *CASES[case]]))
    design = build_design(c)
    kw = {"literal": True} if literal else {}
    t = time.perf_counter()
    result = run.simulate(design, **kw)
    sim_s = time.perf_counter() - t
    peak = _peak()
    M, K, N = c.size.M, c.size.K, c.size.N
    ty, ti = c.types, c.tiling
    x, y = _operands(M, K, N)
    np_s = min(_timed(lambda: x @ y) for _ in range(3))
    own = ty.t_in.nbytes(M * K) + ty.t_b.nbytes(K * N) + ty.t_out.nbytes(M * N)
    return {"case": case, "device": c.array.device, "shape": f"{M}x{K}x{N}",
            "types": f"{ty.dtype_in}->{ty.dtype_out}", "tiles": f"{ti.m}x{ti.k}x{ti.n} k_mt {ti.k_mt} rho {ti.rho}",
            "b_col_maj": c.layout.b_col_maj, "passed": result.passed, "sim_s": sim_s, "numpy_s": np_s,
            "ratio": sim_s / np_s, "matmul_calls": result.kernel.matmul_calls, "peak_bytes": peak,
            "start_bytes": start, "operand_bytes": own, "f32_operand_bytes": 4 * (M * K + K * N + M * N)}


def memory_child(case: str, literal: bool) -> dict[str, object]:
    """The peak of live allocations (tracemalloc: NumPy's arrays and Python's objects) while simulating the case:
    what the simulator holds at once, apart from the allocator's own slack that ru_maxrss also counts."""
    import tracemalloc

    from gemm_gen.app.choice import choose_design
    from gemm_gen.app.cli import parser
    from gemm_gen.design import build_design
    from gemm_gen.sim import run

    design = build_design(choose_design(parser().parse_args(["simulate", *CASES[case]])))
    tracemalloc.start()
    run.simulate(design, **({"literal": True} if literal else {}))
    return {"traced_peak_bytes": tracemalloc.get_traced_memory()[1]}


def numpy_child(case: str) -> dict[str, object]:
    """The peak of a process that imports NumPy and runs its float32 matmul of the case's shape."""
    flags = CASES[case]
    M, K, N = (int(flags[flags.index(f) + 1]) for f in ("-M", "-K", "-N"))
    start = _peak()
    x, y = _operands(M, K, N)
    x @ y
    return {"numpy_peak_bytes": _peak(), "numpy_start_bytes": start}


def _operands(M: int, K: int, N: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.random((M, K), dtype=np.float32), rng.random((K, N), dtype=np.float32)


def _timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _run_child(args: list[str]) -> dict[str, object] | str:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=False)
    if out.returncode:
        return out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases", nargs="*", help=f"of {', '.join(CASES)} (default: all)")
    ap.add_argument("--literal", action="store_true", help="the literal (event by event) simulator")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each case (each in a child of its own)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--numpy-child", help=argparse.SUPPRESS)
    ap.add_argument("--memory-child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.literal)))
        return 0
    if a.memory_child:
        print(json.dumps(memory_child(a.memory_child, a.literal)))
        return 0
    if a.numpy_child:
        print(json.dumps(numpy_child(a.numpy_child)))
        return 0
    unknown = sorted(set(a.cases) - set(CASES))
    if unknown:
        ap.error(f"unknown case(s) {unknown}: choose from {list(CASES)}")
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, numpy {np.__version__}, "
          f"mode {'literal' if a.literal else 'fast'}")
    ok = True
    for case in a.cases or list(CASES):
        np_peak = _run_child(["--numpy-child", case])
        traced = _run_child(["--memory-child", case, *(["--literal"] if a.literal else [])])
        for _ in range(a.repeat):
            r = _run_child(["--child", case, *(["--literal"] if a.literal else [])])
            if isinstance(r, str):
                print(f"{case}: the child failed\n{r}")
                ok = False
                continue
            ok &= bool(r["passed"]) and float(r["ratio"]) <= TARGET
            numpy_mem = "" if isinstance(np_peak, str) else \
                f"; NumPy's matmul alone: {(np_peak['numpy_peak_bytes'] - np_peak['numpy_start_bytes']) / MIB:.0f} MiB"
            live = "" if isinstance(traced, str) else f", {traced['traced_peak_bytes'] / MIB:.0f} MiB live at most"
            print(f"{case}: simulate {r['device']} {r['shape']} {r['types']} (tiles {r['tiles']}, B col-major "
                  f"{int(bool(r['b_col_maj']))}, {r['matmul_calls']:,} kernel calls): {r['sim_s']:.2f} s "
                  f"[{'PASS' if r['passed'] else 'FAIL'}]; numpy float32 matmul {r['numpy_s']:.3f} s; "
                  f"ratio {r['ratio']:.1f}x (target <= {TARGET:.0f}x); peak RSS {r['peak_bytes'] / MIB:.0f} MiB, "
                  f"{(r['peak_bytes'] - r['start_bytes']) / MIB:.0f} MiB above the imports{live} (A + B + C "
                  f"{r['operand_bytes'] / MIB:.0f} MiB in their types, {r['f32_operand_bytes'] / MIB:.0f} MiB as "
                  f"float32{numpy_mem})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
