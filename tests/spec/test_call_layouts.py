"""Layouts per call (issue 23 item 2, gemm_gen/spec/rules/call_layouts.py): which layout changes one
xclbin serves with only another instruction stream (a 32-bit C: the shim stores it in either
layout), which need another xclbin (A, B, a narrower or bfp16 C: the memtile and core patterns or
the kernel differ, compared here on the built Designs), the simulator running both layouts
bit-exact from one Design, and `plan` saying how many xclbins a set of calls needs."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gemm_gen.app.cli import main
from gemm_gen.backends.npu_call import stream_name
from gemm_gen.design import build_design, patterns
from gemm_gen.design.build import runtime_sequence
from gemm_gen.design.serve import serve, xclbin_part
from gemm_gen.facts.dtypes import dtype
from gemm_gen.facts.errors import ConfigError, DmaLimitError, LayoutError
from gemm_gen.sim.run import simulate_calls
from gemm_gen.spec.request import Problem
from gemm_gen.spec.rules.call_layouts import Layouts, per_call, served, xclbins

from ..app.test_cli_bad_input import refused
from ..conftest import small

ROW, C_COL, A_COL, B_COL = Layouts(), Layouts(c_col_maj=True), Layouts(a_col_maj=True), Layouts(b_col_maj=True)
TYPES = ("i8", "i16", "bf16", "i32", "f32", "bfp16")


def _types(a: str = "i8", b: str = "i8", c: str = "i32") -> dict:
    return {"A": dtype(a), "B": dtype(b), "C": dtype(c)}


@given(st.sampled_from(("A", "B", "C")), st.sampled_from(TYPES))
def test_only_a_32_bit_c_is_a_per_call_layout(operand, t):
    # one element per word: the shim can store it anywhere; anything narrower or blocked is fixed
    assert per_call(operand, dtype(t)) == (operand == "C" and t in ("i32", "f32"))


def test_layouts_parse_and_refuse_in_one_line():
    assert Layouts.parse("rrc") == C_COL and str(Layouts.parse(" CRR ")) == "crr"
    assert Layouts.parse("rcr").describe() == "A row-major, B column-major, C row-major"
    for bad in ("rr", "rrx", "rrrr", ""):
        with pytest.raises(ConfigError, match="three letters r/c for A, B, C"):
            Layouts.parse(bad)


@pytest.mark.parametrize("build,call,types,why", [
    (ROW, A_COL, _types(), "A i8 is narrower than the DMAs' 32-bit words"),
    (A_COL, ROW, _types(), "A i8 is narrower than the DMAs' 32-bit words"),
    (ROW, B_COL, _types("bf16", "bf16", "f32"), "B bf16 is narrower"),
    (ROW, C_COL, _types("bf16", "bf16", "bf16"), "a bf16 C is narrower than the DMAs' 32-bit words"),
    (C_COL, ROW, _types("i8", "i8", "i8"), "a i8 C is narrower"),
    (ROW, C_COL, _types("bfp16", "bfp16", "bfp16"), "C bfp16 moves in 8 x 8 tiles"),
])
def test_a_layout_the_xclbin_fixes_is_refused_naming_why(build, call, types, why):
    with pytest.raises(ConfigError, match="needs another xclbin") as e:
        served(build, call, types)
    assert why in e.value.what and "build a design with" in e.value.fix


def test_a_32_bit_c_is_served_in_either_layout():
    for build in (ROW, C_COL):
        for call in (ROW, C_COL):
            assert served(build, call, _types()) == call
            assert served(build, call, _types("bf16", "bf16", "f32")) == call


def test_xclbins_group_calls_by_what_the_xclbin_fixes():
    calls = [ROW, C_COL, A_COL, C_COL, Layouts(True, False, True)]
    got = xclbins(calls, _types())
    assert [(str(x.layouts), x.calls, x.at_shim) for x in got] == [("rrc", (0, 1, 3), (0,)), ("crr", (2, 4), (4,))]
    # bf16 C: each C layout is its own xclbin
    assert [x.calls for x in xclbins(calls, _types("bf16", "bf16", "bf16"))] == [(0,), (1, 3), (2,), (4,)]
    # the build takes the C layout the calls ask most often by weight; a tie takes the first call's
    assert str(xclbins([ROW, C_COL], _types(), [3.0, 1.0])[0].layouts) == "rrr"
    assert str(xclbins([ROW, C_COL], _types(), [1.0, 1.0])[0].layouts) == "rrr"
    assert str(xclbins([C_COL, ROW], _types(), [1.0, 1.0])[0].layouts) == "rrc"


@pytest.mark.parametrize("dev,t_in,t_out", [("npu1", "i8", "i32"), ("npu2", "bf16", "f32")])
@pytest.mark.parametrize("built_col", [False, True])
def test_one_design_serves_both_c_layouts_bit_exact(dev, t_in, t_out, built_col):
    c = small(dev, t_in, t_out, False, c_col_maj=built_col, runtime_sizes="mnk")
    design = build_design(c)
    fixed = xclbin_part(design)
    sizes = [Problem(c.size.M, c.size.K, c.size.N), Problem(c.size.M, c.size.K, c.size.N), Problem(c.size.M - 5,
                                                                                                   c.size.K - 3,
                                                                                                   c.size.N - 7),
             Problem(9, 8, 30)]
    lays = [C_COL, ROW, Layouts(c_col_maj=not built_col), Layouts(c_col_maj=built_col)]
    results = simulate_calls(design, sizes, layouts=lays)
    assert [r.call.c_col_maj for r in results] == [True, False, not built_col, built_col]
    assert all(r.passed and r.mismatches == 0 for r in results), [r.first_mismatch for r in results]
    assert xclbin_part(design) == fixed  # nothing of the xclbin changed between the calls
    # the other layout's call differs from the build's only in the C drains of its instruction stream
    own, other = (serve(c, sizes[0], lay) for lay in (Layouts(c_col_maj=built_col), Layouts(c_col_maj=not built_col)))
    ops = [[(op.op, op.task and (op.task.name, op.task.tensor)) for op in runtime_sequence(c, call)]
           for call in (own, other)]
    assert ops[0] == ops[1]
    taps = [{op.task.name: op.task.tap for op in runtime_sequence(c, call) if op.task} for call in (own, other)]
    changed = {name for name in taps[0] if taps[0][name] != taps[1][name]}
    assert changed and all(name.startswith("C") for name in changed)


def test_a_shim_that_ignores_the_builds_c_layout_is_caught(monkeypatch):
    """Mutant: the shim writes the call's layout as if the memtile sent it that way."""
    c = small("npu1", "i8", "i32", False, runtime_sizes="mn")
    design = build_design(c)
    shim_c = patterns.shim_c
    monkeypatch.setattr(patterns, "shim_c", lambda g, *a: shim_c(replace(g, c_built_col_maj=g.c_col_maj), *a))
    with pytest.raises(LayoutError, match="received the result for"):
        simulate_calls(design, [Problem(c.size.M, c.size.K, c.size.N)], layouts=[C_COL])


def test_fixed_layouts_change_the_xclbin_part_and_a_32_bit_c_only_its_memtile_drain():
    """Both designs built and compared: a layout the shim absorbs would leave the memtile and core
    patterns and the kernels alone; A's and a narrow C's change them."""
    def parts(**kw: object) -> tuple:
        return tuple(xclbin_part(build_design(small(**kw))))  # type: ignore[arg-type]

    def differ(x: tuple, y: tuple) -> set[str]:
        fifos = {f.name for f, g in zip(x[0], y[0]) if f != g}
        kernels = {k.object_file for k, j in zip(x[2], y[2]) if k != j}
        return fifos | ({"kernel"} if kernels else set())

    i8 = {"dev": "npu1", "dtype_in": "i8", "dtype_out": "i32", "b_col_maj": False}
    a = differ(parts(**i8), parts(**i8, a_col_maj=True))
    assert "kernel" in a and any(name.startswith("A_L3L2") for name in a) and any(n.startswith("A_L2L1") for n in a)
    bf = {"dev": "npu2", "dtype_in": "bf16", "dtype_out": "bf16", "b_col_maj": False}
    narrow = differ(parts(**bf), parts(**bf, c_col_maj=True))
    assert "kernel" in narrow and any(name.startswith("C_L2L3") for name in narrow)
    wide = differ(parts(**i8), parts(**i8, c_col_maj=True))
    assert wide == {f"C_L2L3_{col}" for col in range(4)}  # the memtile drain only: either build serves both


def test_the_other_c_layout_keeps_the_shims_dma_limits():
    # a column-major build's row-major call steps m rows of C per tile column: m x N words must fit
    c = small("npu1", "i8", "i32", False, c_col_maj=True, m=64, N=32768, runtime_sizes="mn")
    serve(c, Problem(c.size.M, c.size.K, c.size.N), C_COL)
    with pytest.raises(DmaLimitError, match="shim S2MM C.*stride .* words exceeds the 20-bit field"):
        serve(c, Problem(c.size.M, c.size.K, c.size.N), ROW)


def test_the_instruction_stream_of_the_other_c_layout_has_its_own_name():
    c = small("npu1", "i8", "i32", False, runtime_sizes="mn")
    design = build_design(c)
    p = Problem(c.size.M, c.size.K, c.size.N)
    assert stream_name(design, serve(c, p)) == f"insts_{p}.bin"
    assert stream_name(design, serve(c, p, C_COL)) == f"insts_{p}_ccol.bin"


ARGS = ["--dev", "npu1", "--dtype_in", "i8", "--dtype_out", "i32", "-m", "16", "-k", "16", "-n", "16",
        "--k-mt", "32"]


def test_plan_says_how_many_xclbins_and_which_calls_share_one(capsys):
    sizes = "128x64x128,100x60x90,128x64x128,64x64x64"
    assert main(["plan", *ARGS, "--runtime-sizes", sizes, "--call-layouts", "rrr,rrc,crr,rrc", "--json"]) == 0
    x = json.loads(capsys.readouterr().out)["xclbins"]
    assert x["count"] == 2
    assert [(b["layouts"], b["calls"], b["c_transposed_at_shim"]) for b in x["xclbins"]] == [
        ("rrc", [0, 1, 3], [0]), ("crr", [2], [])]
    assert x["this_design"]["serves"] == [0, 1, 3] and "A column-major needs another xclbin" in x["this_design"][
        "refuses"]["2"]
    assert main(["plan", *ARGS, "--runtime-sizes", sizes, "--call-layouts", "rrr,rrc,crr,rrc"]) == 0
    text = capsys.readouterr().out
    assert "xclbins   2 for the 4 calls" in text and "xclbin 1: A column-major" in text
    assert main(["plan", *ARGS, "--runtime-sizes", "128x64x128,64x64x64", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["xclbins"]["count"] == 1
    assert main(["plan", *ARGS, "-M", "128", "-K", "64", "-N", "128", "--json"]) == 0
    assert "xclbins" not in json.loads(capsys.readouterr().out)  # one size: nothing to group


def test_simulate_runs_each_calls_layout_and_refuses_a_fixed_one(capsys):
    sizes = "128x64x128,100x60x90"
    assert main(["simulate", *ARGS, "--runtime-sizes", sizes, "--call-layouts", "rrr,rrc"]) == 0
    out = capsys.readouterr().out
    assert "call 1  100x60x90 (A row-major, B row-major, C column-major): PASS" in out
    err = refused(capsys, ["simulate", *ARGS, "--runtime-sizes", sizes, "--call-layouts", "rrr,crr"])
    assert "A column-major needs another xclbin" in err
    err = refused(capsys, ["simulate", *ARGS, "--runtime-sizes", sizes, "--call-layouts", "rrr"])
    assert "--call-layouts gives 1 layouts for 2 --runtime-sizes" in err
    err = refused(capsys, ["plan", *ARGS, "-M", "64", "-K", "64", "-N", "64", "--call-layouts", "rrx"])
    assert "three letters r/c" in err


@pytest.mark.parametrize("built_col", [False, True])
def test_the_other_c_layouts_stream_lowers_through_iron_and_the_encoder(built_col):
    """The call's runtime sequence with the design's own fifos: IRON 1.4.3's stand-in takes its C
    drains (the element-by-element walk, innermost stride C's leading dimension), and the shim BD
    encoder writes them."""
    from gemm_gen.backends import txn
    from gemm_gen.backends.iron import lower
    from gemm_gen.design.build import host_tensors

    from .. import iron_recorder

    c = small("npu2", "bf16", "f32", False, c_col_maj=built_col, runtime_sizes="mn")
    design = build_design(c)
    call = serve(c, Problem(c.size.M - 3, c.size.K, c.size.N - 5), Layouts(c_col_maj=not built_col))
    runtime = runtime_sequence(c, call)
    sized = replace(design, runtime=runtime, tensors=host_tensors(c, call, runtime))
    api, rec = iron_recorder.api()
    lower(sized, api).resolve_program()
    drains = [(t, task) for t, task in zip(rec.transfers, sized.tasks) if task.tensor == "C"]
    assert drains and all(t["tap"].strides[-1] == call.ld("C") for t, _ in drains)
    assert all(list(t["tap"].sizes[-3:]) == list(task.tap.sizes) for t, task in drains)
    words = txn.encode_call(design, call)
    assert words.size > 0 and not np.array_equal(words, txn.encode_call(design, serve(c, call.problem)))
