#!/usr/bin/env python3
"""Benchmark: simulate npu2 4096 x 4096 x 2048 bf16 (target <= 60 s on 2 cores) against NumPy.

Prints the simulation time, a plain NumPy float32 matmul of the same size, and their ratio.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from gemm_gen.app.choice import choose_design
from gemm_gen.app.cli import parser
from gemm_gen.sim import simulate

LIMIT_S = 60.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dev", default="npu2")
    ap.add_argument("-M", type=int, default=4096)
    ap.add_argument("-K", type=int, default=4096)
    ap.add_argument("-N", type=int, default=2048)
    ap.add_argument("--dtype_in", default="bf16")
    a = ap.parse_args()
    args = parser().parse_args(["simulate", "--dev", a.dev, "-M", str(a.M), "-K", str(a.K), "-N", str(a.N),
                                "--dtype_in", a.dtype_in, "--b-col-maj"])
    config = choose_design(args)
    start = time.perf_counter()
    result = simulate(config)
    sim_s = time.perf_counter() - start

    rng = np.random.default_rng(0)
    x = rng.random((a.M, a.K), dtype=np.float32)
    y = rng.random((a.K, a.N), dtype=np.float32)
    best = min(_timed(lambda: x @ y) for _ in range(3))
    cores = os.cpu_count()
    print(f"machine: {cores} cores, numpy {np.__version__}")
    print(f"simulate {config.array.device} {a.M}x{a.K}x{a.N} {config.types.dtype_in}->{config.types.dtype_out} "
          f"(tiles {config.tiling.m}x{config.tiling.k}x{config.tiling.n}, k_mt {config.tiling.k_mt}): {sim_s:.1f} s "
          f"[{'PASS' if result.passed else 'FAIL'}; limit {LIMIT_S:.0f} s]")
    print(f"numpy float32 matmul {a.M}x{a.K}x{a.N}: {best:.3f} s")
    print(f"ratio simulate / numpy: {sim_s / best:.0f}x")
    return 0 if result.passed and sim_s <= LIMIT_S else 1


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


if __name__ == "__main__":
    sys.exit(main())
