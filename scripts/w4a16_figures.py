"""PREDICTED figures of W4A16 (bf16 A x int4 B with group scales) against bf16 x bf16 and i8 x i4, for
docs/int4_decode.md section 10 (w4a16-model). All values are the model's predictions, none measured.

Each call gets the model's fastest design over the options the search weighs (B's packing for an int4 B,
the decode mapping for a decode-shaped call), ranked by the model alone (search.tune.rank_all): the
design walks of W4A16 are another branch's (w4a16-sim), so the designs are not validated here.

    .venv/bin/python scripts/w4a16_figures.py [--group-size 128] [--zero-points]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gemm_gen.config import b_packs  # noqa: E402
from gemm_gen.dtypes import dtype  # noqa: E402
from gemm_gen.model.params import load  # noqa: E402
from gemm_gen.model.perf import Workload, estimate  # noqa: E402
from gemm_gen.model.roof import dram_roof  # noqa: E402
from gemm_gen.rules import array  # noqa: E402
from gemm_gen.search.tune import FINALISTS, rank_all  # noqa: E402
from gemm_gen.spec import Pins, Problem  # noqa: E402

SIZES = ((1, 4096, 4096), (1024, 1024, 4096))
KINDS = {"W4A16": ("bf16", "i4", "bf16"), "bf16 x bf16": ("bf16", None, "bf16"), "i8 x i4 -> i32": ("i8", "i4", "i32")}


def best(dev: str, size: tuple[int, int, int], kind: str, g: int, zp: bool) -> str:
    a, b, out = KINDS[kind]
    M, K, N = size
    group = {"group_size": g, "zero_points": zp} if kind == "W4A16" else {}
    found = None
    for rows in ((0, 1) if array.decode_call(M) else (0,)):
        for pack in b_packs(dtype(b or a)):
            pr = Workload.new(dev, M, K, N, a, out, dtype_b=b, rows=rows, b_pack=pack, **group)
            m, k, n, kmt, rho, t, _, evaluated = rank_all(pr, Pins(), FINALISTS, load())
            if evaluated and (found is None or t.min() < found[0]):
                i = int(np.argmin(t))
                found = (float(t[i]), pr, int(m[i]), int(k[i]), int(n[i]), int(kmt[i]), int(rho[i]))
    assert found is not None, f"no design for {dev} {size} {kind}"
    t, pr, m, k, n, kmt, rho = found
    e = estimate(pr, m, k, n, kmt, rho=rho)
    c = pr.base
    roof = dram_roof(dev, Problem(M, K, N), c.dtype_in, str(c.dtype_b), c.dtype_out, None, c.group_size,
                     c.zero_points)
    where = ("decode, " if c.rows == 1 else "") + f"{m}x{k}x{n}, k_mt {kmt}" + (f", rho {rho}" if rho > 1 else "")
    where += ", strips" if pr.b_layout == "strips" else ""
    line = (f"| {dev} {M} x {K} x {N} {kind} | {where} | {t * 1e6:,.1f} us, {roof.fraction(t):.1%} of "
            f"{roof.time_s * 1e6:,.1f} us | core {float(e.t_core) * 1e6:,.1f}, memory {float(e.t_mem) * 1e6:,.1f}, "
            f"B {float(e.traffic['B'].bytes) / 1e6:,.2f} MB")
    if c.group_size:
        cycles = float(e.extra["dequant_cycles_per_object"])  # type: ignore[arg-type]
        objects = float(e.groups) * int(e.padded[1]) // k
        us = objects * cycles / (c.dev.clock_ghz * 1e3)
        share = us / (float(e.t_core) * 1e6)
        line += f"; dequant {cycles:,.0f} cycles per B object, {us:,.1f} us ({share:.0%} of core)"
    return line + " |"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--group-size", type=int, default=128)
    ap.add_argument("--zero-points", action="store_true")
    a = ap.parse_args()
    print("| call | design (model's fastest) | PREDICTED, % of DRAM roof | terms (us) |")
    print("|---|---|---|---|")
    for dev in ("npu2", "npu1"):
        for size in SIZES:
            for kind in KINDS:
                print(best(dev, size, kind, a.group_size, a.zero_points))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
