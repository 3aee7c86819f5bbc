"""The option table (gemm_gen/spec/request.py OPTIONS, issue 32 item 1): one row per option, from which the config's
fields and JSON, the build suffix, both directions of the CLI's mapping, the operator's keywords and the
Makefile's arguments are derived. These tests hold the table to the records it describes and check each
derivation end to end."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import re
from pathlib import Path

import pytest

from gemm_gen.app import operator_args
from gemm_gen.app.cli import main, parser
from gemm_gen.app.cliargs import config_args, request
from gemm_gen.facts.errors import ConfigError, opt, spelling
from gemm_gen.search import choose
from gemm_gen.spec.config import GemmConfig
from gemm_gen.spec.request import (
    FIELDS,
    OPTIONS,
    REQUEST_OPTIONS,
    ROWS,
    Options,
    Problem,
    Tiling,
    spell_cli,
    spell_make,
    spell_operator,
)


def test_every_field_has_one_row_and_every_row_a_field():
    fields = [f.name for kind in (Problem, Tiling, Options) for f in dataclasses.fields(kind)]
    assert sorted(FIELDS) == sorted(fields) and len(FIELDS) == len(set(FIELDS)) == len(OPTIONS)


def test_each_row_reads_its_value_from_the_sub_record_it_names():
    c = GemmConfig("npu1", 256, 512, 256, 32, 64, 32, 128, "i8", "i16", rho=2, bias=True, activation="relu",
                   requant="per_channel", l1_alloc="basic-sequential", task_span=0, opt_level=1,
                   share_l1="b")
    for row in OPTIONS:
        if row.group != "epilogue":
            assert row.name in {f.name for f in dataclasses.fields(getattr(c, row.group))}, row.name
        assert c.value(row.name) == c.to_json().get(row.name, c.value(row.name)), row.name
    assert set(FIELDS) - set(c.to_json()) == {"group_size", "zero_points"}  # written only when set
    assert (c.value("requant"), c.value("activation"), c.value("rows"), c.value("acc")) == (
        "per_channel", "relu", 4, "i32")


def test_flags_and_make_variables_name_one_option_each():
    rows = (*OPTIONS, *REQUEST_OPTIONS)
    flags = [flag for row in rows for flag in row.flags]
    makes = [row.make for row in rows if row.make is not None]
    assert len(flags) == len(set(flags)) and len(makes) == len(set(makes))


def test_the_operator_takes_every_option_the_table_does_not_set_through_another_keyword():
    assert set(operator_args.OWN) | set(operator_args.KEYWORDS) | set(operator_args.SET_BY_OPERATOR) == set(FIELDS)
    assert operator_args.SET_BY_OPERATOR["k_mt"] == "tiles=(m, k, n, k_mt)"
    assert operator_args.SET_BY_OPERATOR["runtime_sizes"] == "max_size=(M, K, N)"


# configs with every option family given, and with options the search would fill left open
ROUND_TRIP = [
    dict(device="npu2", M=512, K=512, N=512, m=64, k=64, n=64, k_mt=128, dtype_in="i8", dtype_out="i16",
         a_col_maj=True, c_col_maj=True, rho=2, queue_groups=2, shift=3, rounding="floor", saturation="symmetric",
         stack_bytes=4096, l1_alloc="basic-sequential", expansion=(2, 2), kernel_loops="k-flat", task_span=0,
         opt_level=1, cols=4),
    dict(device="npu1", M=256, K=256, N=256, m=32, k=32, n=32, k_mt=64, dtype_in="bf16", dtype_out="bf16",
         bias=True, activation="gelu", clamp=(-6.0, 6.0), emulate_bf16_with_bfp16=False, mmul_shape=(4, 8, 4)),
    dict(device="npu1", M=256, K=256, N=256, m=32, k=32, n=32, k_mt=64, dtype_in="i8", dtype_out="i8",
         requant="per_channel", acc=None, runtime_sizes="mnk", rows=1),
    dict(device="npu2", M=256, K=1024, N=1024, m=32, k=128, n=64, k_mt=128, dtype_in="bf16", dtype_b="i4",
         dtype_out="bf16", group_size=128, zero_points=True, convert_once=False),
    dict(device="npu1", M=256, K=256, N=256, m=32, k=64, n=32, k_mt=64, dtype_in="i8", dtype_out="i8", acc="out"),
    # an int4 B's packing (config_args pins it: the search fills it when open), and a bfp16 design compiled with
    # chess (config_args once dropped --chess for bfp16 precisions, a default of the days chess built them)
    dict(device="npu2", M=512, K=512, N=512, m=64, k=64, n=64, k_mt=128, dtype_in="i8", dtype_b="i4",
         dtype_out="i32", b_pack="strips"),
    dict(device="npu2", M=512, K=512, N=1024, m=64, k=64, n=64, k_mt=256, dtype_in="bfp16", dtype_b="bfp16",
         dtype_out="bfp16", acc="bfp16", compiler="chess", b_pack="strips", rho=2),
]


@pytest.mark.parametrize("given", ROUND_TRIP, ids=lambda g: "-".join(str(v) for v in list(g.values())[:1] + [
    g["dtype_in"], g["dtype_out"]]))
def test_config_args_are_the_flags_that_rebuild_the_config(given):
    """config_args(c) parsed by the CLI and chosen by the search is c again: the two directions of the CLI's
    mapping agree, option by option."""
    c = GemmConfig(**given)
    a = parser().parse_args(["plan", *config_args(c)])
    assert choose(request(a)).config == c, config_args(c)


def test_config_args_write_only_what_was_given_and_the_problem():
    c = GemmConfig("npu1", 256, 256, 256, 32, 32, 32, 64, "i8", "i32")
    assert config_args(c) == ["--dev", "npu1", "-M", "256", "-K", "256", "-N", "256", "-m", "32", "-k", "32", "-n",
                              "32", "--k-mt", "64", "--dtype_in", "i8", "--dtype_out", "i32", "--b-col-maj", "0"]
    assert config_args(c.with_(clamp=(-6, 6), dtype_in="bf16", dtype_out="bf16"))[-1] == "--clamp=-6,6"


def test_the_build_suffix_names_the_named_options_and_digests_the_rest():
    c = GemmConfig("npu2", 512, 512, 512, 64, 64, 64, 128, "i8", "i16", a_col_maj=True, b_col_maj=True)
    assert c.suffix == "512x512x512_64x64x64_8c_i8_i16_acol_bcol_kmt128"
    other = c.with_(shift=2)
    assert other.suffix.startswith(c.suffix + "_") and len(other.suffix) == len(c.suffix) + 9
    assert {row.name for row in OPTIONS if row.tag is not None} == {"k_mt", "b_col_maj", "b_pack", "a_col_maj",
                                                                    "c_col_maj", "group_size", "share_l1"}
    assert ROWS["group_size"].tag is not None
    w4 = GemmConfig("npu2", 256, 1024, 1024, 32, 128, 64, 128, "bf16", "bf16", dtype_b="i4", group_size=128,
                    zero_points=True)
    assert w4.suffix.endswith("_g128z")


# ---- messages name options, each front end spells them (issue 32 item 2) ---------------------------------------
PACKAGE = Path(__file__).parents[2] / "gemm_gen"
# where a CLI flag is not a message's: the option table itself (it holds each option's flags and --help text)
SPELLS_FLAGS = {"spec/request.py"}
_COMMAND = re.compile(r"gemm-gen [a-z][a-z-]*[^`)]*")  # a gemm-gen command line a message quotes, flags and all
_MADE = re.compile(r"(^|[\s(])--$|[\s(]-$")  # a dash or two before a name: a flag made up in place


def cli_flags() -> set[str]:
    """Every flag of every gemm-gen command."""
    flags: set[str] = set()

    def walk(p: argparse.ArgumentParser) -> None:
        for action in p._actions:
            flags.update(s for s in action.option_strings if s not in ("-h", "--help"))
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    walk(sub)

    walk(parser())
    return flags


def flags_in_messages(root: Path, flags: set[str], skip: set[str]) -> list[str]:
    """path:line and flag of every CLI flag in a string of a module below app/ (docstrings, a lone flag (an argv
    element) and a quoted `gemm-gen ...` command line aside)."""
    named = re.compile(r"(?<![\w-])(" + "|".join(sorted(map(re.escape, flags), key=len, reverse=True)) + r")(?![\w-])")
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] == "app" or str(rel) in skip:
            continue
        tree = ast.parse(path.read_text())
        docs = {id(node.body[0].value) for node in ast.walk(tree)
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
                and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                text = _COMMAND.sub("", node.value)
                if text.strip() not in flags:
                    found += [f"{rel}:{node.lineno}: {m.group(1)}" for m in named.finditer(text)]
            if isinstance(node, ast.JoinedStr):  # a flag made of a name: f"--{name}"
                parts = node.values
                found += [f"{rel}:{node.lineno}: {a.value.strip()}{{...}}" for a, b in zip(parts, parts[1:])
                          if isinstance(a, ast.Constant) and isinstance(b, ast.FormattedValue)
                          and _MADE.search(str(a.value))]
    return sorted(found)


def test_no_module_below_the_app_names_a_cli_flag_in_a_message():
    found = flags_in_messages(PACKAGE, cli_flags(), SPELLS_FLAGS)
    assert not found, "name the option with errors.opt(name, value), not its CLI flag:\n" + "\n".join(found)


def test_the_flag_scan_finds_a_flag_in_a_message(tmp_path):
    (tmp_path / "app").mkdir()
    (tmp_path / "rules.py").write_text('"""Docstring: --dtype_out is fine here."""\n'
                                       'def f(x):\n    raise E(f"{x}: use --dtype_out i8", "drop -m")\n'
                                       'ARGV = ["--dtype_out", "-o"]\nHINT = "see `gemm-gen plan --json`"\n'
                                       'def g(name):\n'
                                       '    return f"give --{name} a size", f"x-{name}", f"{name}-{name}",\\\n'
                                       '        f"use -{name}"\n')
    (tmp_path / "app" / "cli.py").write_text('MSG = "use --dtype_out"\n')
    assert flags_in_messages(tmp_path, {"--dtype_out", "-m", "-o", "--json"}, set()) == [
        "rules.py:3: --dtype_out", "rules.py:3: -m", "rules.py:7: give --{...}", "rules.py:8: use -{...}"]


def test_every_request_option_is_a_flag_of_the_cli():
    flags = cli_flags()
    assert all(set(row.flags) <= flags for row in (*OPTIONS, *REQUEST_OPTIONS)), \
        [row.name for row in (*OPTIONS, *REQUEST_OPTIONS) if not set(row.flags) <= flags]


@pytest.mark.parametrize("speller,text", [
    (spell_cli, "--dtype_b i4 with --dtype_in bf16; use --dtype_out i8 or i16, --chess, --convert-once 0, "
                "--clamp=-6,6, -m, --k-mt 64"),
    (spell_make, "DTYPE_B=i4 with DTYPE_IN=bf16; use DTYPE_OUT=i8 or i16, CHESS=1, CONVERT_ONCE=0, CLAMP=-6,6, m, "
                 "K_MT=64"),
    (spell_operator, "dtype_b='i4' with dtype_in='bf16'; use dtype_out='i8' or 'i16', compiler='chess', "
                     "convert_once=False, clamp=(-6.0, 6.0), tiles' m, tiles=(m, k, n, 64)"),
])
def test_an_error_names_its_options_in_each_front_ends_terms(speller, text):
    e = ConfigError(f"{opt('dtype_b', 'i4')} with {opt('dtype_in', 'bf16')}",
                    f"use {opt('dtype_out', 'i8', 'i16')}, {opt('compiler', 'chess')}, {opt('convert_once', False)}, "
                    f"{opt('clamp', (-6.0, 6.0))}, {opt('m')}, {opt('k_mt', 64)}")
    assert "; ".join(e.spelled(speller)) == text
    with spelling(speller):
        assert str(e) == text
    assert str(e) == "; ".join(e.spelled(spell_cli))  # the CLI's, outside


def test_make_runs_gemm_gen_with_makes_spelling(capsys, monkeypatch):
    """The Makefile runs gemm-gen with GEMM_GEN_SPELLING=make: its refusals name make's variables."""
    argv = ["plan", "--dev", "npu2", "-M", "64", "-K", "64", "-N", "64", "--group-size", "7"]
    assert main(argv) == 2
    assert "--group-size 7 with bf16 x bf16" in capsys.readouterr().err
    monkeypatch.setenv("GEMM_GEN_SPELLING", "make")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "GROUP_SIZE=7 with bf16 x bf16" in err and "use DTYPE_IN=bf16 DTYPE_B=i4" in err and "--" not in err
