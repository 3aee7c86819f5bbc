"""Random designs across every option family, through `gemm-gen simulate` as a user runs it (issue 33 item 5).

Each test forces one option family (types, accumulators, layouts, epilogues, int4, W4A16, decode, spans, columns,
runtime sizes, presets) and draws every other one now and then, on small ragged sizes with small tiles given (the
tuner then only fills in the kernel's options, so a design costs tens of milliseconds in the fast simulator).
Each command line must end in one of two ways (tests/app/test_cli_random.py `outcome`): exit 0 with every call PASS
(equal to the simulator's bit-exact reference) and, where C is A @ B rounded once (the default accumulator, no
epilogue, no block or group-quantized operand), every output equal to the exact product rounded once or
saturated; or exit 2 with one line on stderr. Anything else (a traceback, a warning, a FAIL) fails with the
command line, which hypothesis shrinks first.

Most draws must reach the simulator: a test whose designs are mostly refused tests the refusals, not the
designs, and fails. tests/random_designs.py counts the designs; the run's summary prints the counts.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gemm_gen.facts.devices import DEVICES, device
from gemm_gen.facts.precision import PRESETS

from ..random_designs import FAMILIES, families_of_argv, record
from .test_cli_random import outcome

EXAMPLES = 70  # per family: 11 families, 770 designs per run
AT_LEAST_SIMULATED = 0.6  # of a family's draws that must reach the simulator and PASS

SCALAR = [(dev, t_in, None, t_out) for dev, d in DEVICES.items() for t_in, outs in d.out_types.items()
          for t_out in outs]
INT4 = [(dev, "i8", "i4", t_out) for dev in DEVICES for t_out in ("i32", "i8", "i16")]
W4A16 = [(dev, "bf16", "i4", t_out) for dev in DEVICES for t_out in ("bf16", "f32")]
BFP16 = [("npu2", "bfp16", "bfp16", "bf16"), ("npu2", "bfp16", "bfp16", "f32"), ("npu2", "bf16", "bfp16", "bf16"),
         ("npu2", "bfp16", "bfp16", "bfp16")]
BASES = {"types": SCALAR, "int4": INT4, "W4A16": W4A16, "presets": [("npu2", p, None, None) for p in PRESETS]}
ANY_BASE = SCALAR * 3 + INT4 + W4A16 + BFP16


def _mmul(dev: str, t_in: str, t_b: str | None, emulate: bool) -> tuple[int, int, int]:
    """The block sizes a tile must be a multiple of (half of them: m % 2r, n % 2t): the mmul of the types, or the
    bfp16 kernels' 16 x 16 C blocks (presets, bfp16 operands, and npu2's W4A16, which converts B into bfp16)."""
    shape = device(dev).bfp16_mmul_shape
    if shape and (t_in in PRESETS or "bfp16" in (t_in, t_b) or (t_b == "i4" and t_in == "bf16")):
        return shape
    r, s, t = device(dev).mmul_shape(t_in, emulate, t_b)
    return r, s, t


def _epilogue_ok(t_in: str, t_b: str | None, t_out: str) -> bool:
    """Types whose C conversion takes an epilogue (spec/rules/epilogue.py): a scalar bf16 C, or an i8 / i16 C
    requantized from int8's i32 accumulator."""
    return t_b is None and (t_out == "bf16" if t_in == "bf16" else t_in == "i8" and t_out in ("i8", "i16"))


@st.composite
def command_lines(draw: st.DrawFn, focus: str) -> list[str]:
    """A `gemm-gen simulate` command line that exercises `focus` and, now and then, every other family that the
    drawn types can take (a family they cannot take would only be refused)."""
    def on(family: str) -> bool:
        return family == focus or draw(st.integers(0, 99)) >= 85  # hypothesis's simplest draw, 0, leaves it off

    bases = {**BASES, "epilogues": [b for b in SCALAR if _epilogue_ok(*b[1:])],
             "layouts": [b for b in ANY_BASE if b not in W4A16]}.get(focus, ANY_BASE)  # W4A16: row-major only
    dev, t_in, t_b, t_out = draw(st.sampled_from(bases))
    if focus in ("accumulators", "layouts", "decode", "spans", "columns", "runtime sizes") and draw(st.booleans()):
        dev, t_in, t_b, t_out = draw(st.sampled_from(SCALAR))  # the options most scalar designs take
    if focus not in ("types", "int4", "W4A16", "epilogues", "accumulators") and on("presets"):  # presets fix those
        dev, t_in, t_b, t_out = draw(st.sampled_from(BASES["presets"]))
    argv = ["simulate", "--dev", dev]
    if t_in in PRESETS:
        argv += ["--preset", t_in]
    else:
        argv += ["--dtype_in", t_in, "--dtype_out", t_out] + (["--dtype_b", t_b] if t_b else [])
    emulate = dev == "npu2" and t_in == "bf16" and t_b is None
    if emulate and draw(st.integers(0, 3)) == 0:
        argv += ["--emulate-bf16-mmul-with-bfp16", "0"]
        emulate = False
    group = 0
    if t_b == "i4" and t_in == "bf16":  # W4A16: its group size, and zero points now and then
        group = draw(st.sampled_from((32, 64, 128)))
        argv += ["--group-size", str(group)] + ["--zero-points"] * draw(st.booleans())
    scalar = t_in not in PRESETS and "bfp16" not in (t_in, t_b, t_out)
    epilogue = _epilogue_ok(t_in, t_b, t_out) and focus != "accumulators" and on("epilogues")
    if epilogue:
        if t_out == "bf16":
            argv += ["--bias"] * draw(st.booleans())
            argv += ["--activation", draw(st.sampled_from(("relu", "silu", "gelu", "runtime")))]
            argv += ["--clamp=-6,6"] * draw(st.booleans())
        else:
            argv += ["--requant", "per_channel"] + ["--bias"] * draw(st.booleans())
    if t_in not in PRESETS and not epilogue and on("accumulators"):  # a preset fixes its accumulator
        argv += ["--acc", "out" if scalar else draw(st.sampled_from(("bf16", "f32")))]
    if on("layouts"):
        flags = ("--a-col-maj", "--b-col-maj", "--c-col-maj") if scalar else ("--b-col-maj",)
        if t_b == "i4":  # int4 B is packed along N: row-major only
            flags = ("--a-col-maj", "--c-col-maj") if t_in == "i8" else ()
        given = draw(st.lists(st.sampled_from(flags), min_size=int(focus == "layouts"), unique=True)) if flags else []
        for flag in given:
            argv += [flag, "1"]
    decode = on("decode")
    # (the split placement fixes its columns: not when the draw is about the columns)
    mapping = draw(st.sampled_from(("decode",) if focus == "columns" else ("decode", "decode", "decode-split"))) \
        if decode else None
    if mapping:  # the decode mapping, or the split placement (one virtual column per core)
        argv += ["--mapping", mapping]
    if on("spans"):
        argv += ["--task-span", str(draw(st.sampled_from((0, 2, 3))))]
    cols = device(dev).columns
    if on("columns") and mapping != "decode-split":  # the split placement fixes its columns
        cols = draw(st.sampled_from(sorted(c for c in device(dev).column_devices if c < device(dev).columns)))
        argv += ["--n-aie-cols", str(cols)]
    # small tiles, given: the tuner only fills in the kernel's options
    r, s, t = _mmul(dev, t_in, t_b, emulate)
    rho = draw(st.sampled_from((1, 1, 1, 2)))
    m = 2 * r * draw(st.integers(1, 2)) * rho
    k = s * draw(st.sampled_from((1, 2, 4) if group else (1, 2, 3, 4) if not epilogue else (3, 4)))
    n = 2 * t * draw(st.integers(1, 2))
    k_mt = k * (1 if epilogue else draw(st.integers(1, 3)))  # an epilogue's tile rides in a whole k_mt chunk
    rows = 1 if decode else 4
    M = draw(st.integers(1, 16 if decode else 2 * rows * m))
    K, N = draw(st.integers(1, 2 * k_mt)), draw(st.integers(1, 2 * cols * n))
    argv += ["-m", str(m), "-k", str(k), "-n", str(n), "--k-mt", str(k_mt)] + (["--rho", str(rho)] if rho > 1 else [])
    if on("runtime sizes"):
        sizes = [(M, K, N)] + [(draw(st.integers(1, M)), draw(st.integers(1, K)), draw(st.integers(1, N)))
                               for _ in range(draw(st.integers(1, 2)))]
        argv += ["--runtime-sizes", ",".join("x".join(map(str, size)) for size in sizes)]
    else:
        argv += ["-M", str(M), "-K", str(K), "-N", str(N)]
    argv += ["--seed", str(draw(st.integers(0, 99))), "--json"]
    return argv


def _rounded_once(argv: list[str]) -> bool:
    """Whether C is meant to be A @ B rounded once (or saturated): the default accumulator, no epilogue, no bfp16
    or group-quantized operand."""
    families, types = families_of_argv(argv)
    return not families & {"accumulators", "epilogues", "W4A16", "presets"} and "bfp16" not in types


def check(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run one command line; "equal" or "refused" (anything else fails inside `outcome`)."""
    what, out, _ = outcome(capsys, argv)
    if what == "refused":
        return "refused"
    said = json.loads(out)
    calls = said["calls"] if "calls" in said else [said]
    for call in calls:
        assert call["passed"] and call["mismatches"] == 0, f"gemm-gen {' '.join(argv)}\n{call['first_mismatch']}"
        acc = call["accuracy"]
        if _rounded_once(argv):
            assert acc["exact"] + acc["saturated"] == acc["elements"], f"gemm-gen {' '.join(argv)}\n{acc}"
    return "equal"


@pytest.mark.parametrize("focus", FAMILIES)
def test_random_designs_equal_their_reference_or_are_refused_in_one_line(capsys: pytest.CaptureFixture[str],
                                                                        focus: str) -> None:
    seen: list[str] = []

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(command_lines(focus))
    def one(argv: list[str]) -> None:
        what = check(capsys, argv)
        families, types = families_of_argv(argv)
        assert focus in families, argv  # the draw exercised the family it was asked for
        record(what, families, types)
        seen.append(what)

    one()
    simulated = seen.count("equal") / len(seen)
    assert simulated >= AT_LEAST_SIMULATED, f"{focus}: only {simulated:.0%} of {len(seen)} draws were simulated"
