"""The model's floor for npu2 1 x 4096 x 4096 decode calls, per number of B shim streams, for
docs/int4_decode.md section 12: what issue 22's two decode targets (bf16 at >= 85% of the DRAM roof;
int4 weights >= 3x faster than bf16 weights) would need. All values are lower bounds implied by the
model's terms (model/roof.floor_s), not predictions of a built design and not measurements.

Each call's first task group is taken at its fewest shim tasks: one A task, one per B stream and one C
task (today's decode designs have one C task per column: more).

    .venv/bin/python scripts/decode_floor.py [--dev npu2] [--streams 4 16]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gemm_gen.model.params import load  # noqa: E402
from gemm_gen.model.roof import dram_roof, floor_s  # noqa: E402
from gemm_gen.spec.request import Problem  # noqa: E402

SIZE = Problem(1, 4096, 4096)
BF16 = ("bf16", "bf16", "bf16", 0)
INT4 = {"i8 x i4 -> i32": ("i8", "i4", "i32", 0), "W4A16 g128": ("bf16", "i4", "bf16", 128)}
TARGET_ROOF, TARGET_RATIO = 0.85, 3.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dev", default="npu2")
    ap.add_argument("--streams", type=int, nargs=2, default=(4, 16), metavar=("FROM", "TO"))
    a = ap.parse_args()
    p = load()
    roof = dram_roof(a.dev, SIZE, "bf16", "bf16", "bf16", p).time_s
    print(f"FLOOR (model's terms, lower bounds, not measured): {a.dev} {SIZE.M}x{SIZE.K}x{SIZE.N}; dispatch "
          f"{p.dispatch_us:g} us, {p.bd_task_us:g} us per shim task, bf16 DRAM roof {roof * 1e6:.1f} us")
    heads = " | ".join(f"{k} floor | bf16 / it" for k in INT4)
    print(f"| B streams | tasks | bf16 floor | % of roof | {heads} |")
    print("|---" * (4 + 2 * len(INT4)) + "|")
    floors: dict[str, list[tuple[float, int]]] = {"bf16": [], **{k: [] for k in INT4}}
    for s in range(a.streams[0], a.streams[1] + 1):
        tasks = 1 + s + 1
        t_bf16 = floor_s(a.dev, SIZE, *BF16[:3], s, tasks, p)
        floors["bf16"].append((t_bf16, s))
        cells = [f"{s}", f"{tasks}", f"{t_bf16 * 1e6:.1f} us", f"{roof / t_bf16:.1%}"]
        for kind, (a_t, b_t, c_t, g) in INT4.items():
            t = floor_s(a.dev, SIZE, a_t, b_t, c_t, s, tasks, p, group_size=g)
            floors[kind].append((t, s))
            cells += [f"{t * 1e6:.1f} us", f"{t_bf16 / t:.2f}x"]
        print("| " + " | ".join(cells) + " |")
    budget = roof / TARGET_ROOF  # the slowest bf16 call that meets the roof target
    print(f"bf16 at >= {TARGET_ROOF:.0%} of its roof takes <= {budget * 1e6:.1f} us (its lowest floor: "
          f"{min(floors['bf16'])[0] * 1e6:.1f} us on {min(floors['bf16'])[1]} streams), so int4 {TARGET_RATIO:g}x "
          f"faster needs <= {budget / TARGET_RATIO * 1e6:.1f} us:")
    for kind in INT4:
        t, s = min(floors[kind])
        verdict = "possible" if t <= budget / TARGET_RATIO else "not possible under these terms"
        print(f"  {kind}: lowest floor {t * 1e6:.1f} us (on {s} streams): {verdict}")


if __name__ == "__main__":
    main()
