"""gemm-gen: the command line. Bad input: one line, exit 2. A failed check: exit 1.

The dispatcher starts at once (issue 33 item 3): COMMANDS names each command's module by its dotted name, and a
module is imported only when its command is named, to add that command's flags and run it. So `gemm-gen --help`
loads none of them, and `plan` or `predict` load the search, the design and the model but not the simulator, the
back ends or the plots. With the front door's exports (gemm_gen/__init__.py, loaded when first used) these are the
package's deferred imports of its own code, made by name rather than as import statements inside functions
(tests/package/test_structure.py counts those, and keeps them at none): a new command is one row below and a
`FLAGS` entry in its module (docs/changes.md), and tests/app/test_cli.py checks that the two agree and which modules
`--help`, `plan` and `predict` load."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from ..facts.errors import BuildError, GemmGenError, SimulationError, spelling
from .parsing import EXIT_FAIL, EXIT_USAGE, Parser

DEBUG_ENV = "GEMM_GEN_DEBUG"  # set (not 0): errors raise with their traceback instead of one line
SPELLING_ENV = "GEMM_GEN_SPELLING"  # "make": options named as the Makefile's variables (spec.SPELLINGS)
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a C tool killed by the closed pipe would report
Flags = Callable[[argparse.ArgumentParser], None]  # adds a command's flags and sets its func


@dataclass(frozen=True)
class Command:
    """A command: its name, its line in `gemm-gen --help`, and the module of gemm_gen.app whose FLAGS[name] adds
    its flags (and the function that runs it)."""

    name: str
    help: str
    module: str

    def flags(self) -> Flags:
        """The command's flags, importing its module (only now: what it loads is loaded only when it runs)."""
        found: dict[str, Flags] = importlib.import_module(f"{__package__}.{self.module}").FLAGS
        return found[self.name]


COMMANDS = (
    Command("plan", "tiling, padding, L1/L2 budgets, BDs and DRAM traffic of a design", "design_commands"),
    Command("generate", "write the Design as JSON into build/", "design_commands"),
    Command("simulate", "run the design in the functional simulator and check it", "sim_commands"),
    Command("doctor", "the pinned NPU toolchain against what is installed (exit 0 when ready)", "npu_commands"),
    Command("validate", "on an NPU machine: doctor, then build, run and check a fixed sweep; "
            "build/validate_<dev>.json (measured vs predicted) and a PNG", "npu_commands"),
    Command("cache", "the build cache (one xclbin per design, an instruction stream per size): list or clear it "
            "($GEMM_GEN_CACHE, else ~/.cache/gemm_gen); clear removes only the entries gemm_gen created (each "
            "carries a .gemm_gen_entry marker), nothing else there", "npu_commands"),
    Command("kernel", "render the design's AIE-API kernel source (C++)", "npu_commands"),
    Command("mlir", "lower the design to MLIR through IRON (needs mlir-aie)", "npu_commands"),
    Command("build", "compile the kernel and run aiecc.py: build/final_*.xclbin, insts_*.bin", "npu_commands"),
    Command("run", "build if needed, run on the NPU through XRT, check and time it", "npu_commands"),
    Command("predict", "predicted time and throughput of a design (analytical model)", "model_commands"),
    Command("tune", "rank every valid tiling of a problem by predicted throughput", "tune_commands"),
    Command("calibrate", "refit the model's DRAM and dispatch constants on `make validate` records; report the "
            "error on the rows not fitted", "calibrate_commands"),
    Command("roofline", "PNG plots: predicted roofline sweep and tiling heat map", "plot_commands"),
    Command("make-args", "print gemm_gen.mk, the Makefile's option variables and GEN_ARGS, from the option table",
            "design_commands"),
)


def parser(named: Collection[str] | None = None) -> argparse.ArgumentParser:
    """gemm-gen's parser, with the flags of the commands `named` (None: every command's, for tests and scripts
    that parse several commands; each other command is listed with its help line only)."""
    p = Parser(prog="gemm-gen", description="Generate and check whole-array GEMM designs for Ryzen AI NPUs.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in COMMANDS:
        sp = sub.add_parser(command.name, help=command.help)
        if named is None or command.name in named:
            command.flags()(sp)
    return p


def named_command(argv: Sequence[str]) -> str | None:
    """The command argv names: its first word that is not a flag (gemm-gen's own only flag is --help)."""
    return next((word for word in argv if not word.startswith("-")), None)


def debugging() -> bool:
    """GEMM_GEN_DEBUG asks for tracebacks; unset, empty, 0, false, no and off mean it does not."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


def main(argv: list[str] | None = None) -> int:
    """gemm-gen; its messages name options in the spelling GEMM_GEN_SPELLING names (make's recipes set "make")."""
    with spelling(os.environ.get(SPELLING_ENV, "") or "cli"):
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    words = sys.argv[1:] if argv is None else argv
    command = named_command(words)
    try:
        args = parser(() if command is None else (command,)).parse_args(words)
        return int(args.func(args))
    except KeyboardInterrupt:  # outputs are written whole or not at all (facts/atomic.py): nothing to undo here
        if debugging():
            raise
        print("gemm-gen: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `gemm-gen kernel | head`: the reader left; say nothing more
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except GemmGenError as e:
        if debugging():  # the traceback, for reports of our own defects
            raise
        if isinstance(e, (SimulationError, BuildError)):
            print(f"FAIL: {e}", file=sys.stderr)
            return EXIT_FAIL
        print(f"gemm-gen: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:  # a file the user named that the command could not read or write
        if debugging():
            raise
        where = f"{e.filename}: " if e.filename else ""
        print(f"gemm-gen: error: {where}{e.strerror or e}; check the path and its permissions", file=sys.stderr)
        return EXIT_USAGE


def _silence_stdout() -> None:
    """Point stdout at /dev/null so Python's exit-time flush cannot fail on the closed pipe again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
