"""Snapshot what gemm-gen prints for a fixed set of designs, and compare two snapshots.

A restructuring must leave every user-visible output alone. This script runs `plan`, `plan --json`,
`predict --json`, `tune --json`, `kernel` and `generate` (its design JSON) for each design of DESIGNS
(every option family: types, accumulators, layouts, epilogues, int4, W4A16, decode, spans, columns,
runtime sizes, presets, kernel and compiler choices), in this process, with timings masked, and writes
one file per design and command into a folder. With --compare OLD it reports every file that differs
from OLD's (exit 1 when any does).

    python scripts/output_snapshot.py --out /tmp/before
    ... change the code ...
    python scripts/output_snapshot.py --out /tmp/after --compare /tmp/before
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import json
import re
import shlex
import sys
import tempfile
from pathlib import Path

from tqdm import tqdm

from gemm_gen.app.cli import main as cli_main

# (name, flags): every option family at least once, small sizes so that the whole set runs in minutes
DESIGNS: tuple[tuple[str, str], ...] = (
    ("npu1_bf16", "--dev npu1 -M 512 -K 512 -N 512"),
    ("npu2_bf16", "--dev npu2 -M 1024 -K 1024 -N 1024"),
    ("npu2_bf16_plain", "--dev npu2 -M 512 -K 512 -N 512 --emulate-bf16-mmul-with-bfp16 0"),
    ("npu2_bf16_convert_once", "--dev npu2 -M 512 -K 512 -N 512 --convert-once 1"),
    ("npu1_bf16_f32", "--dev npu1 -M 256 -K 512 -N 256 --dtype_out f32"),
    ("npu1_i8", "--dev npu1 -M 512 -K 512 -N 512 --dtype_in i8 --dtype_out i8"),
    ("npu2_i8_i16", "--dev npu2 -M 1024 -K 512 -N 1024 --dtype_in i8 --dtype_out i16"),
    ("npu2_i8_acc_out", "--dev npu2 -M 1024 -K 1024 -N 1024 --dtype_in i8 --dtype_out i8 --acc out"),
    ("npu1_i16_i32", "--dev npu1 -M 256 -K 256 -N 256 --dtype_in i16 --dtype_out i32"),
    ("npu1_i16_mmul", "--dev npu1 -M 256 -K 256 -N 256 --dtype_in i16 --dtype_out i32 --mmul 4x4x4"),
    ("npu1_bf16_pinned", "--dev npu1 -M 512 -K 512 -N 512 -m 64 -k 64 -n 64"),
    ("npu2_bf16_pinned_rho", "--dev npu2 -M 1024 -K 512 -N 1024 -m 64 -k 64 -n 64 --k-mt 256 --rho 2"),
    ("npu1_a_col", "--dev npu1 -M 256 -K 256 -N 256 --a-col-maj 1"),
    ("npu1_b_col", "--dev npu1 -M 256 -K 256 -N 256 --b-col-maj 1"),
    ("npu2_c_col", "--dev npu2 -M 512 -K 256 -N 512 --dtype_in i8 --dtype_out i16 --c-col-maj 1"),
    ("npu2_all_col", "--dev npu2 -M 512 -K 256 -N 512 --dtype_in i8 --dtype_out i32 --a-col-maj 1 --b-col-maj 1 "
                     "--c-col-maj 1"),
    ("npu2_config1", "--dev npu2 -M 1024 -K 1024 -N 1024 --preset config1"),
    ("npu2_config2", "--dev npu2 -M 1536 -K 1024 -N 768 --preset config2"),
    ("npu2_config3", "--dev npu2 -M 1024 -K 1024 -N 1024 --preset config3"),
    ("npu2_config2_strips", "--dev npu2 -M 1536 -K 1024 -N 768 --preset config2 --b-pack strips"),
    ("npu2_config2_chess", "--dev npu2 -M 1536 -K 1024 -N 768 --preset config2 --chess"),
    ("npu1_bias_relu", "--dev npu1 -M 256 -K 256 -N 256 --bias --activation relu"),
    ("npu2_silu", "--dev npu2 -M 512 -K 512 -N 512 --activation silu"),
    ("npu1_gelu_clamp", "--dev npu1 -M 256 -K 256 -N 256 --bias --activation gelu --clamp=-6,6"),
    ("npu2_runtime_act", "--dev npu2 -M 512 -K 512 -N 512 --bias --activation runtime"),
    ("npu1_requant_i8", "--dev npu1 -M 256 -K 256 -N 256 --dtype_in i8 --dtype_out i8 --bias --requant per_channel"),
    ("npu2_requant_i16", "--dev npu2 -M 512 -K 256 -N 512 --dtype_in i8 --dtype_out i16 --requant per_channel"),
    ("npu2_i8xi4", "--dev npu2 -M 1024 -K 1024 -N 1024 --dtype_in i8 --dtype_b i4 --dtype_out i32"),
    ("npu1_i8xi4_i8", "--dev npu1 -M 512 -K 512 -N 512 --dtype_in i8 --dtype_b i4 --dtype_out i8"),
    ("npu2_w4a16", "--dev npu2 -M 256 -K 1024 -N 1024 --dtype_in bf16 --dtype_b i4 --group-size 128"),
    ("npu1_w4a16_zp", "--dev npu1 -M 256 -K 512 -N 512 --dtype_in bf16 --dtype_b i4 --group-size 32 --zero-points"),
    ("npu2_decode_bf16", "--dev npu2 -M 1 -K 4096 -N 4096"),
    ("npu2_decode_w4a16", "--dev npu2 -M 1 -K 4096 -N 4096 --dtype_in bf16 --dtype_b i4 --group-size 128"),
    ("npu1_decode_mapping", "--dev npu1 -M 4 -K 2048 -N 2048 --mapping decode"),
    ("npu1_span", "--dev npu1 -M 512 -K 512 -N 1024 -m 64 -k 64 -n 64 --task-span 0"),
    ("npu2_cols2", "--dev npu2 -M 512 -K 512 -N 512 --n-aie-cols 2"),
    ("npu1_cols1", "--dev npu1 -M 256 -K 256 -N 128 --n-aie-cols 1 --dtype_in i8 --dtype_out i32"),
    ("npu2_sizes", "--dev npu2 --runtime-sizes 1000x777x333,1x4096x4096"),
    ("npu1_sizes_weights", "--dev npu1 --runtime-sizes 512x512x512,64x512x512 --weights 3,1"),
    ("npu1_runtime_mnk", "--dev npu1 -M 512 -K 512 -N 512 --runtime-mode mnk"),
    ("npu2_kernel_loops", "--dev npu2 -M 512 -K 512 -N 512 --dtype_in i8 --dtype_out i32 --expansion 2x2 "
                          "--kernel-loops k-pipelined"),
    ("npu1_l1_alloc", "--dev npu1 -M 256 -K 256 -N 256 --l1-alloc basic-sequential"),
    ("npu1_queue_stack", "--dev npu1 -M 256 -K 256 -N 256 --queue-groups 2 --stack 4096"),
    ("npu1_i8_shift", "--dev npu1 -M 256 -K 256 -N 256 --dtype_in i8 --dtype_out i8 --shift 4 --rounding floor "
                      "--saturation none"),
    ("npu1_chess_bf16", "--dev npu1 -M 256 -K 256 -N 256 --chess"),
)

COMMANDS: tuple[tuple[str, str], ...] = (
    ("plan", "plan"),
    ("plan_json", "plan --json"),
    ("predict_json", "predict --json"),
    ("tune_json", "tune --json --top 3"),
    ("kernel", "kernel"),
    ("generate", "generate"),
)

# what changes from run to run: wall-clock times, and temporary folders
_TIMES = (
    (re.compile(r'("search_seconds": )[-0-9.e]+'), r"\1<t>"),
    (re.compile(r"ranked in [\d.,]+ ?(ms|s)\b"), r"ranked in <t> \1"),
)


def masked(text: str, tmp: str) -> str:
    text = text.replace(tmp, "<tmp>")
    for pattern, repl in _TIMES:
        text = pattern.sub(repl, text)
    return text


def run(argv: list[str]) -> tuple[int, str]:
    """gemm-gen's exit code and everything it printed (stdout, then stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli_main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    return int(code or 0), out.getvalue() + ("\n--- stderr ---\n" + err.getvalue() if err.getvalue() else "")


def snapshot(out_dir: Path, only: str | None = None) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = [(d, c) for d in DESIGNS for c in COMMANDS if only is None or only in d[0]]
    for (name, flags), (cname, command) in tqdm(jobs, desc="snapshot", unit="output"):
        with tempfile.TemporaryDirectory() as tmp:
            extra = ["--build-dir", tmp] if cname == "generate" else []
            argv = command.split()[:1] + shlex.split(flags) + command.split()[1:] + extra
            code, text = run(argv)
            if cname == "generate":
                files = sorted(Path(tmp).glob("design_*.json"))
                for f in files:  # the design itself, parsed and written back in key order
                    text += f"\n--- {f.name} ---\n" + json.dumps(json.loads(f.read_text()), indent=1, sort_keys=True)
            (out_dir / f"{name}.{cname}.txt").write_text(masked(f"$ gemm-gen {shlex.join(argv)}\nexit {code}\n"
                                                                + text, tmp))


def compare(new: Path, old: Path) -> int:
    names = sorted({p.name for p in new.glob("*.txt")} | {p.name for p in old.glob("*.txt")})
    differ = 0
    for name in names:
        a, b = old / name, new / name
        if not a.exists() or not b.exists():
            print(f"{name}: only in {'new' if b.exists() else 'old'}")
            differ += 1
            continue
        if a.read_text() != b.read_text():
            differ += 1
            diff = difflib.unified_diff(a.read_text().splitlines(), b.read_text().splitlines(), str(a), str(b),
                                        lineterm="", n=1)
            lines = list(diff)
            print("\n".join(lines[:40]) + (f"\n... {len(lines) - 40} more lines" if len(lines) > 40 else ""))
    print(f"{len(names) - differ} of {len(names)} outputs identical")
    return 1 if differ else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="folder to write the snapshot into")
    p.add_argument("--compare", type=Path, help="a snapshot to compare the new one with")
    p.add_argument("--only", help="only the designs whose name contains this")
    args = p.parse_args()
    snapshot(args.out, args.only)
    return compare(args.out, args.compare) if args.compare else 0


if __name__ == "__main__":
    sys.exit(main())
