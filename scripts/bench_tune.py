#!/usr/bin/env python3
"""Benchmark: exhaustive tuner search time for the Striking Table 2 (XDNA) and Table 3 (XDNA2)
problems, B column- and row-major (the paper: under 1 s per problem). Exit 1 if any takes longer.

Prints, per problem, the search time, the tilings and candidates ranked, and the best design's
predicted throughput next to the prediction for the paper's own choice (all values predicted).
"""

from __future__ import annotations

import sys
import time

from gemm_gen.model.fit import calibrate, paper
from gemm_gen.model.params import load
from gemm_gen.model.perf import Workload
from gemm_gen.search.tune import tune

LIMIT_S = 1.0


def main() -> int:
    p = load()
    worst = 0.0
    print(f"{'problem':<44} {'B':<4} {'search':>8} {'tilings':>8} {'ranked':>8}  {'best design':<28} "
          f"{'pred TOPS':>9} {'paper choice':>12}")
    for row in paper.STRIKING_T2 + paper.STRIKING_T3:
        for col in (True, False):
            pr = Workload.new(row.device, row.M, row.K, row.N, row.dtype_in, row.dtype_out, col,
                             emulate_bf16_with_bfp16=row.emulate, stack_bytes=row.stack_bytes)
            start = time.perf_counter()
            r = tune(pr, 5)
            dt = time.perf_counter() - start
            worst = max(worst, dt)
            c = r.best.config
            ref = calibrate.array_tops(p, row, b_col_maj=col)
            emu = " bfp16" if row.emulate else ""
            name = f"{row.device} {row.dtype_in}-{row.dtype_out}{emu} {row.M}x{row.K}x{row.N}"
            print(f"{name:<44} {'col' if col else 'row':<4} {dt * 1e3:>6.0f}ms {r.tilings:>8} {r.evaluated:>8}  "
                  f"{f'{c.tiling.m}x{c.tiling.k}x{c.tiling.n} k_mt {c.tiling.k_mt} rho {c.tiling.rho}':<28} "
                  f"{r.best.tops:>9.2f} {ref:>12.2f}")
    print(f"slowest search {worst * 1e3:.0f} ms (limit {LIMIT_S * 1e3:.0f} ms)")
    return 0 if worst <= LIMIT_S else 1


if __name__ == "__main__":
    sys.exit(main())
