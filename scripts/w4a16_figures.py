"""PREDICTED figures of W4A16 (bf16 A x int4 B with group scales) against bf16 x bf16 and i8 x i4, for
docs/int4_decode.md section 10. All values are the model's predictions, none measured.

Each call gets the design `gemm-gen predict` chooses for it (search.choose: the tiles, B's packing, the kernel,
the decode mapping and the shim task span the model predicts fastest), priced by model.predict.

    .venv/bin/python scripts/w4a16_figures.py [--group-size 128] [--zero-points]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gemm_gen.model.predict import predict  # noqa: E402
from gemm_gen.search import choose  # noqa: E402
from gemm_gen.spec.request import Options, Problem, Request  # noqa: E402

SIZES = ((1, 4096, 4096), (1024, 1024, 4096))
KINDS = {"W4A16": ("bf16", "i4", "bf16"), "bf16 x bf16": ("bf16", None, "bf16"), "i8 x i4 -> i32": ("i8", "i4", "i32")}


def best(dev: str, size: tuple[int, int, int], kind: str, g: int, zp: bool) -> str:
    a, b, out = KINDS[kind]
    group = {"group_size": g, "zero_points": zp} if kind == "W4A16" else {}
    c = choose(Request(Options(dev, a, out, dtype_b=b, **group), Problem(*size))).config
    pr = predict(c)
    d, t = pr.design, pr.times_us
    M, K, N = size
    tile = d.tiling
    where = (f"{d.mapping}, " if d.mapping != "whole-array" else "") + f"{tile.m}x{tile.k}x{tile.n}, k_mt {tile.k_mt}"
    where += (f", rho {tile.rho}" if tile.rho > 1 else "") + (", strips" if d.layout.b_pack == "strips" else "")
    where += f", task span {d.task_span or 'longest'}" if d.task_span != 1 else ""
    where += ", convert-once kernel" if c.kernel.convert_once else ""  # npu2 W4A16: B dequantized straight into bfp16
    roof = pr.dram_roof
    assert roof is not None
    line = (f"| {dev} {M} x {K} x {N} {kind} | {where} | {pr.time_s * 1e6:,.1f} us, {roof.fraction(pr.time_s):.1%} of "
            f"{roof.time_s * 1e6:,.1f} us | core {t.core:,.1f}, memory {t.memory:,.1f}, "
            f"BD bubbles {t.bd_bubbles:,.1f}, dispatch {t.dispatch:,.1f}; B {pr.dram['B'].bytes / 1e6:,.2f} MB")
    if pr.dequant is not None:
        q = pr.dequant
        line += (f"; dequant {q.cycles_per_object:,.0f} cycles per B object, {q.core_us:,.1f} us "
                 f"({q.core_share:.0%} of core)")
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
