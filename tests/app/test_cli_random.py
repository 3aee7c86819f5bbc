"""Random flag combinations of `gemm-gen plan` and `gemm-gen simulate`, run in this process (issue 33 item 5):
each ends in exit 0 (simulate: PASS) or in exit 2 with exactly one line on stderr, never a traceback.

The flags come from the parser itself, so a flag added to plan or simulate without a generator here fails
`test_every_flag_has_a_generator`. Each run draws every option family with some probability (types,
accumulators, layouts, epilogues, int4, W4A16, the decode mapping, task spans, columns, runtime sizes
and modes, presets, the kernel options, sizes tiny, odd and huge); half the runs start from a type
combination a device has, so that many get past the type rules to the tuner, the design and the
simulator. Sizes stay small where something is simulated; huge sizes go to plan (and to simulate only
where the memory check must refuse them).

The draws are seeded: a failure names its command line (rerun it with GEMM_GEN_DEBUG=1 for the
traceback). GEMM_GEN_CLI_RUNS and GEMM_GEN_CLI_SEED change how many runs and which.
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import warnings
from collections import Counter
from collections.abc import Callable

import pytest

from gemm_gen.app.cli import main, parser

from ..random_designs import families_of_argv, record

RUNS = int(os.environ.get("GEMM_GEN_CLI_RUNS", "240"))
SEED = int(os.environ.get("GEMM_GEN_CLI_SEED", "33"))
COMMANDS = ("plan", "simulate")

# type combinations a device runs (dtype_in, dtype_b, dtype_out, acc): where half the runs start
VALID_TYPES = [("bf16", None, "bf16", None), ("bf16", None, "f32", None), ("i8", None, "i8", None),
               ("i8", None, "i16", None), ("i8", None, "i32", None), ("i16", None, "i16", None),
               ("i16", None, "i32", None), ("i8", "i4", "i32", None), ("i8", "i4", "i8", None),
               ("bf16", "i4", "bf16", None), ("bfp16", None, "bfp16", None), ("bfp16", "bfp16", "bf16", None),
               ("bf16", "bfp16", "bf16", "bf16"), ("bfp16", None, "f32", None), ("bf16", None, "bf16", "out"),
               ("i8", None, "i8", "out"), ("i16", None, "i16", "i64"), ("bf16", "bfp16", "bfp16", None)]
TYPES = ("bf16", "i8", "i16", "i32", "f32", "bfp16", "i4", "u8", "fp8")
ACCS = ("out", "f32", "i32", "i64", "bf16", "bfp16", "i16")


def _size(rng: random.Random, huge: bool) -> int:
    """A problem dimension: tiny, odd, ordinary, or huge (refused at once: sizes a plan or simulation of
    which takes minutes, such as 65536 cubed, are issue 33 item 2's and stay out of this suite)."""
    kind = rng.choices(("tiny", "odd", "plain", "huge"), (3, 3, 4, 1 if huge else 0))[0]
    if kind == "tiny":
        return rng.randint(1, 8)
    if kind == "odd":
        return rng.choice((13, 33, 77, 100, 129, 191, 257, 333))
    if kind == "plain":
        return rng.choice((16, 32, 64, 128, 256, 512))
    return rng.choice((2**31 - 1, 2**31, 10**12))  # the most a C int holds, and past it


def _tile(rng: random.Random, grid: tuple[int, ...]) -> str:
    return str(rng.choice(grid) * rng.choice((1, 1, 2, 3)) if rng.random() < 0.9 else rng.randint(1, 40))


def _runtime_sizes(rng: random.Random, dims: tuple[int, int, int]) -> str:
    count = rng.randint(2, 3)
    return ",".join("x".join(str(rng.randint(1, d)) for d in dims) for _ in range(count))


# one generator per flag (its first option string): its value text; `draw` decides whether the flag is given
Gen = Callable[[random.Random], str]
GENERATORS: dict[str, Gen] = {
    "--runtime-mode": lambda rng: rng.choice(("mn", "mnk")),
    "--mapping": lambda rng: rng.choice(("whole-array", "decode", "decode-split")),
    "--n-aie-cols": lambda rng: rng.choice(("1", "2", "4", "8", "3", "0")),
    "--rho": lambda rng: str(rng.choice((1, 1, 2, 3, 4, 9))),
    "--group-size": lambda rng: rng.choice(("32", "64", "128", "16", "0")),
    "--preset": lambda rng: rng.choice(("config1", "config2", "config3")),
    "--b-pack": lambda rng: rng.choice(("tiles", "strips")),
    "--emulate-bf16-mmul-with-bfp16": lambda rng: rng.choice(("0", "1")),
    "--opt-level": lambda rng: rng.choice(("0", "1", "2", "3")),
    "--mmul": lambda rng: rng.choice(("4x8x4", "8x8x4", "4x8x8", "8x8x8", "4x16x8", "4x4x4", "8x1x8", "4x2x8",
                                         "2x4x8", "4x32x8", "3x3x3")),
    "--expansion": lambda rng: rng.choice(("2x2", "4x2", "2x4", "4x4")),
    "--kernel-loops": lambda rng: rng.choice(("k-pipelined", "c-overlap", "k-flat", "jk-flat")),
    "--convert-once": lambda rng: rng.choice(("0", "1")),
    "--l1-alloc": lambda rng: rng.choice(("bank-aware", "basic-sequential")),
    "--share-l1": lambda rng: rng.choice(("none", "none", "b", "a", "ab", "ba")),
    "--queue-groups": lambda rng: str(rng.randint(1, 5)),
    "--task-span": lambda rng: str(rng.choice((0, 1, 2, 3, 8))),
    "--stack": lambda rng: rng.choice(("3328", "0", "1024", "8192", "65536")),
    "--shift": lambda rng: str(rng.choice((0, 0, 1, 4, 8, 15, 31, 63))),
    "--rounding": lambda rng: rng.choice(("conv_even", "floor", "ceil", "positive_inf", "symmetric_inf",
                                             "symmetric_zero", "conv_odd", "negative_inf")),
    "--saturation": lambda rng: rng.choice(("none", "saturate", "symmetric")),
    "--activation": lambda rng: rng.choice(("none", "relu", "silu", "gelu", "runtime")),
    "--clamp": lambda rng: rng.choice(("-6,6", "0,1", "1,-1", "-0.25,3")),
    "--requant": lambda rng: "per_channel",
    "--seed": lambda rng: str(rng.randint(0, 99)),
    "--inputs": lambda rng: rng.choice(("exact", "wide")),
    "--activation-call": lambda rng: rng.choice(("none", "silu", "gelu", "relu")),
}
# flags drawn by `draw` itself (sizes, tiles, types, layouts, switches), or that only change the output
DRAWN = {"--dev", "-M", "-K", "-N", "--runtime-sizes", "--weights", "--call-layouts", "-m", "-k", "-n", "--k-mt",
         "--dtype_in", "--dtype_b", "--dtype_out", "--acc", "--zero-points", "--a-col-maj", "--b-col-maj",
         "--c-col-maj", "--chess", "--bias", "--literal", "--predicted", "--json", "-v", "-h"}


def draw(rng: random.Random, command: str) -> list[str]:
    """One random command line of `command`."""
    simulate = command == "simulate"
    # half the runs are plain (a valid type combination, few other flags: most reach the design and the
    # simulator), half wild (any types, many flags: most are refused, each in one line)
    wild = rng.random() < 0.5
    argv = [command, "--dev", rng.choice(("npu1", "npu2"))]
    dims = tuple(_size(rng, huge=rng.random() < 0.1) for _ in range(3))
    if rng.random() < 0.85:
        argv += ["-M", str(dims[0]), "-K", str(dims[1]), "-N", str(dims[2])]
    if rng.random() < 0.2:  # one design for several sizes
        argv += ["--runtime-sizes", _runtime_sizes(rng, (min(d, 512) for d in dims))]  # type: ignore[arg-type]
        if rng.random() < 0.3:
            argv += ["--weights", ",".join(str(rng.choice((1, 3, 30))) for _ in range(rng.randint(2, 3)))]
        if rng.random() < 0.3:
            argv += ["--call-layouts", ",".join(rng.choice(("rrr", "rrc", "crr", "rcr", "ccc", "x"))
                                                for _ in range(rng.randint(1, 3)))]
    if rng.random() < 0.45:  # the tiling, or part of it
        for flag, grid in (("-m", (16, 32, 64)), ("-k", (8, 16, 32, 64)), ("-n", (16, 32, 64))):
            if rng.random() < 0.8:
                argv += [flag, _tile(rng, grid)]
        if rng.random() < 0.4:
            argv += ["--k-mt", _tile(rng, (32, 64, 128))]
    if not wild or rng.random() < 0.3:  # a type combination the devices have
        t_in, t_b, t_out, acc = rng.choice(VALID_TYPES)
    else:  # any
        t_in, t_b, t_out, acc = (*(rng.choice((None, *TYPES)) for _ in range(3)), rng.choice((None, *ACCS)))
    for flag, value in (("--dtype_in", t_in), ("--dtype_b", t_b), ("--dtype_out", t_out), ("--acc", acc)):
        if value is not None:
            argv += [flag, value]
    if t_b == "i4" and t_in == "bf16" and rng.random() < 0.8:  # W4A16: its group size, often
        argv += ["--group-size", rng.choice(("32", "64", "128"))]
        if rng.random() < 0.3:
            argv.append("--zero-points")
    elif rng.random() < 0.05:
        argv.append("--zero-points")
    for flag in ("--a-col-maj", "--b-col-maj", "--c-col-maj"):
        if rng.random() < 0.25:
            argv += [flag, rng.choice(("0", "1"))] if rng.random() < 0.7 else [flag]
    for flag in ("--chess", "--bias"):
        if rng.random() < 0.12:
            argv.append(flag)
    if simulate and rng.random() < 0.05:  # the literal simulator: the same verdicts, slower (rarely)
        argv.append("--literal")
    for flag, gen in GENERATORS.items():
        if flag in ("--seed", "--inputs", "--activation-call") and not simulate:
            continue
        if rng.random() < (0.15 if wild else 0.03):
            value = gen(rng)  # a value that starts with '-' is written --flag=VALUE
            argv += [f"{flag}={value}"] if value.startswith("-") else [flag, value]
    if simulate and rng.random() < 0.2:  # make sim's closing PREDICTED line
        argv.append("--predicted")
    if rng.random() < 0.1:
        argv.append("--json")
    return argv



def _flags(command: str) -> set[str]:
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {a.option_strings[0] for a in sub.choices[command]._actions}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_flag_has_a_generator(command: str) -> None:
    """A new flag of plan or simulate is drawn here too (or listed as drawn by `draw`)."""
    missing = sorted(_flags(command) - set(GENERATORS) - DRAWN)
    assert not missing, f"gemm-gen {command} has flags the random runs never draw: {missing}; add a generator"


def outcome(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[str, str, str]:
    """Run gemm-gen in this process: "pass" (exit 0) or "refused" (exit 2, one line on stderr), with
    stdout and stderr; a traceback, a warning, exit 1 or a refusal of more or less than one line fails with the
    command line."""
    line = "gemm-gen " + shlex.join(argv)
    with warnings.catch_warnings(record=True) as caught:  # what a user's stderr would show (pytest keeps it)
        warnings.simplefilter("always")
        try:
            code = main(argv)
        except SystemExit as e:  # argparse's refusals and --help
            code = e.code if isinstance(e.code, int) else 2
        except BaseException as e:  # noqa: BLE001 (any escape is the defect this test looks for)
            pytest.fail(f"{line}\nraised {type(e).__name__}: {e} (rerun with GEMM_GEN_DEBUG=1 for the traceback)",
                        pytrace=False)
    out, err = capsys.readouterr()
    said = [f"{w.filename}:{w.lineno}: {w.category.__name__}: {w.message}" for w in caught]
    assert not said, f"{line}\nexit {code} with warnings on stderr:\n" + "\n".join(said)
    if code == 0:
        if argv[0] == "simulate":
            assert "PASS" in out or '"passed": true' in out, f"{line}\nexit 0 without PASS:\n{out[-2000:]}"
        return "pass", out, err
    assert code == 2, f"{line}\nexit {code}:\n{out[-2000:]}\n{err[-2000:]}"
    assert err.count("\n") == 1 and err.startswith("gemm-gen") and "Traceback" not in err, \
        f"{line}\nexit 2 with stderr not one line:\n{err[-2000:]}"
    return "refused", out, err


# what random runs found, each now refused in one line that names the rule (issue 33 item 5): the tracebacks
# of the issue (the model asked a bfp16 A for .bytes before the layout rule refused it; space.tilings asked
# int4 weights for nbytes(1) before the epilogue rule refused them), a pinned expansion priced by the model
# (a divide-by-zero warning on stderr) before kernel_variant refused it, and an int4 B with no valid tiling
# left untiled by the packing search ("m=0 must be positive; give -m" to a user who gave no -m)
KNOWN = [
    ("simulate --dev npu2 -M 512 -K 1 -N 256 -m 16 -k 8 -n 64 --preset config3 --a-col-maj 1",
     "--a-col-maj with bfp16 A"),
    ("simulate --dev npu2 -M 512 -K 1 -N 256 -m 16 -k 8 -n 64 --preset config3 --a-col-maj 1 --c-col-maj 1",
     "--a-col-maj with bfp16 A"),
    ("simulate --dev npu2 -M 512 -K 1 -N 256 -m 16 -k 8 -n 64 --preset config3 --a-col-maj 1 --task-span 0",
     "--a-col-maj with bfp16 A"),
    ("simulate --dev npu1 --runtime-sizes 129x64x100,256x100x100 --requant per_channel --dtype_in bf16 "
     "--dtype_b i4 --dtype_out bf16 --group-size 32", "an epilogue with i4 weights"),
    ("plan --dev npu2 -M 6 -K 77 -N 256 --dtype_in i8 --dtype_b i4 --dtype_out i8 --expansion 4x2",
     "expansion 4x2 of the npu2 i8xi4 mmul 4x16x16 needs"),
    ("plan --dev npu2 -M 512 -K 512 -N 512 --dtype_in i8 --dtype_b i4 --dtype_out i8 --stack 64000",
     "no valid design for npu2 512x512x512"),
    ("simulate --dev npu1 -M 2 -K 3 -N 1 --dtype_in bf16 --dtype_b i4 --dtype_out bf16 --group-size 64 --expansion 4x4",
     "whose tiles split into --expansion 4x4 clusters"),
    ("simulate --dev npu1 -M 6 -K 64 -N 257 -m 192 -k 64 -n 48 --dtype_in i8 --dtype_b i4 --dtype_out i8 "
     "--convert-once 1", "--convert-once is for a bf16 A"),
    ("plan --dev npu1 -M 512 -K 33 -N 333 -m 64 -n 11 --dtype_in i8 --dtype_out i8", "n=11 is not a multiple of 2t=16"),
    ("simulate --dev npu1 -M 129 -K 16 -N 100 -m 32 -n 9 --dtype_in i8 --dtype_b i4 --dtype_out i8",
     "n=9 is not a multiple of 2t=16"),
    ("plan --dev npu2 -M 512 -K 512 -N 512 -m 32 --rho 3", "T_MA = m / rho = 10 is not a multiple of 2r=16"),
]


@pytest.mark.parametrize("line,says", KNOWN)
def test_what_random_runs_found_is_refused_in_one_line(capsys: pytest.CaptureFixture[str], line: str,
                                                       says: str) -> None:
    what, _, err = outcome(capsys, shlex.split(line))
    assert what == "refused" and says in err, err


def test_random_command_lines_pass_or_refuse_in_one_line(capsys: pytest.CaptureFixture[str],
                                                         say_at_end: Callable[[str], None]) -> None:
    rng = random.Random(SEED)
    seen: Counter[tuple[str, str]] = Counter()
    for _ in range(RUNS):
        argv = draw(rng, rng.choice(COMMANDS))
        what = outcome(capsys, argv)[0]
        seen[argv[0], what] += 1
        if argv[0] == "simulate":  # a random design: simulated equal to its reference, or refused in one line
            record("equal" if what == "pass" else "refused", *families_of_argv(argv))
    say_at_end(f"random CLI runs: {RUNS} (seed {SEED}; " + ", ".join(f"{cmd} {what} {n}" for (cmd, what), n
                                                                      in sorted(seen.items())) + ")")
    # both ends are reached: designs that pass and requests refused, for both commands
    assert all(seen[cmd, what] for cmd in COMMANDS for what in ("pass", "refused")), seen
