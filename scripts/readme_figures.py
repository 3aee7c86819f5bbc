"""The figures of README.md and of the docs that took its long sections, computed here and never typed (issue 33
item 6): each sits in a block between `<!-- figures: NAME -->` and `<!-- /figures -->`, and NAME's generator
below writes the block's text.

    python scripts/readme_figures.py                 # rewrite every block of README.md and docs/accuracy.md
    python scripts/readme_figures.py --check         # exit 1, naming each block whose text is not what this computes
    python scripts/readme_figures.py --check --fast  # the same without the blocks that take long to compute (SLOW)

Every generator reads the one place its fact lives: the devices from gemm_gen/facts/devices.py, the first run from
`make sim` itself (the README's first command), the losses from gemm_gen/facts/accuracy.py (measured again by
tests/facts/test_accuracy.py), the prices of `--acc out` from `gemm-gen predict`, the accuracy table from
scripts/accuracy_table.py. Model figures are labelled PREDICTED where they appear.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib.util
import io
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILES = ("README.md", "docs/accuracy.md")
BLOCK = re.compile(r"(<!-- figures: (?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- /figures -->)", re.S)

# the README's first command, and the lines of its output the README shows (the rest is the plan, and a time)
FIRST_RUN = ("make", "sim", "DEVICE=npu2", "M=1344", "K=1536", "N=1536", "B_COL_MAJ=1")
FIRST_RUN_SHOWN = ("  reference ", "  vs exact A @ B ", "PASS", "PREDICTED ")


def devices() -> str:
    from gemm_gen.facts.devices import DEVICES

    return "".join(f"- {d.name} = {d.marketing}: {d.core_rows} x {d.columns} cores ({d.aie_target})\n"
                   for d in DEVICES.values())


def first_run_lines(stdout: str) -> list[str]:
    """The lines of `make sim`'s output that the README shows."""
    return [line for line in stdout.splitlines() if line.startswith(FIRST_RUN_SHOWN)]


def first_run() -> str:
    # make's own install step is left out (-o): the tests never reinstall, and a fresh clone installs once
    done = subprocess.run(["make", "--no-print-directory", "-o", ".venv/.installed", *FIRST_RUN[1:]], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=True)
    return "```text\n" + "".join(f"{line}\n" for line in first_run_lines(done.stdout)) + "```\n"


def losses() -> str:
    from gemm_gen.facts.accuracy import ACTIVATION_TAIL, BFP16_DATAPATH, ONE_BF16_ROUNDING

    return (f"On real data npu2's default bf16 path loses about {BFP16_DATAPATH:.2%} (relative Frobenius error)\n"
            f"against A @ B, not the {ONE_BF16_ROUNDING:.2%} of one bf16 rounding: its bfp16 datapath quantizes A "
            "and B\n(`--emulate-bf16-mmul-with-bfp16 0` keeps plain bf16). SiLU and GELU, computed as mlir-aie does, "
            f"err by up\nto {ACTIVATION_TAIL['silu']:.0%} and {ACTIVATION_TAIL['gelu']:.0%} elementwise in their "
            "negative tail. docs/accuracy.md has every path.\n")


def _predicted_tops(*flags: str) -> float:
    from gemm_gen.app.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["predict", *flags, "--json"])
    if code != 0:
        raise RuntimeError(f"gemm-gen predict {' '.join(flags)} exited {code}")
    return float(json.loads(out.getvalue())["tops"])


def acc_out_price() -> str:
    size = ["--dev", "npu2", "-M", "4096", "-K", "4096", "-N", "4096"]
    tops = {(t, acc): _predicted_tops(*size, "--dtype_in", t, "--dtype_out", t, *(["--acc", "out"] if acc else []))
            for t in ("i8", "bf16") for acc in (False, True)}
    return ("PREDICTED by the model (`gemm-gen predict`) at 4096 x 4096 x 4096 on npu2, in TOPS:\n\n"
            "| types | C rounded once (the default) | `--acc out` |\n|---|---|---|\n"
            + "".join(f"| {t} -> {t} | {tops[t, False]:.1f} | {tops[t, True]:.1f} |\n" for t in ("i8", "bf16")))


def accuracy_table() -> str:
    spec = importlib.util.spec_from_file_location("accuracy_table", ROOT / "scripts" / "accuracy_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        module.main()
    return out.getvalue()


GENERATORS: dict[str, Callable[[], str]] = {"devices": devices, "first-run": first_run, "losses": losses,
                                            "acc-out-price": acc_out_price, "accuracy-table": accuracy_table}
SLOW = {"accuracy-table"}  # a few dozen simulations: checked by `make test-slow`, not `make test`


def blocks(text: str) -> list[str]:
    """The names of a text's blocks, in order; an unknown name is an error."""
    names = [m.group("name") for m in BLOCK.finditer(text)]
    unknown = sorted(set(names) - set(GENERATORS))
    if unknown:
        raise SystemExit(f"unknown figure blocks {unknown}: give each a generator in scripts/readme_figures.py")
    return names


def render(text: str, names: set[str], computed: dict[str, str]) -> str:
    """The text with the blocks in `names` rewritten (each generator runs once, its result kept in `computed`)."""
    def body(m: re.Match[str]) -> str:
        name = m.group("name")
        if name not in names:
            return m.group(0)
        if name not in computed:
            computed[name] = GENERATORS[name]()
        return m.group(1) + computed[name] + m.group(4)

    return BLOCK.sub(body, text)


def stale(path: Path, names: set[str], computed: dict[str, str]) -> list[str]:
    """Each block of `path` in `names` whose text differs from what its generator computes, with the diff."""
    text = path.read_text()
    new = render(text, names, computed)
    found = []
    for old_m, new_m in zip(BLOCK.finditer(text), BLOCK.finditer(new), strict=True):
        if old_m.group("body") != new_m.group("body"):
            diff = difflib.unified_diff(old_m.group("body").splitlines(), new_m.group("body").splitlines(),
                                        f"{path.name} as it is", "as computed", lineterm="")
            found.append(f"{path.relative_to(ROOT)}: block {old_m.group('name')} differs:\n" + "\n".join(diff))
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 if any block differs from what is computed")
    ap.add_argument("--fast", action="store_true", help=f"leave out the slow blocks ({', '.join(sorted(SLOW))})")
    ap.add_argument("files", nargs="*", default=list(FILES), help=f"default: {' '.join(FILES)}")
    a = ap.parse_args(argv)
    computed: dict[str, str] = {}
    differ = []
    for name in a.files:
        path = ROOT / name
        names = set(blocks(path.read_text())) - (SLOW if a.fast else set())
        if a.check:
            differ += stale(path, names, computed)
        else:
            path.write_text(render(path.read_text(), names, computed))
    for d in differ:
        print(d)
    if differ:
        print("run `python scripts/readme_figures.py` to write the figures as computed", file=sys.stderr)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
