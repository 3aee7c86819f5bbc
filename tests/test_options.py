"""The option table (gemm_gen/spec.py OPTIONS, issue 32 item 1): one row per option, from which the config's
fields and JSON, the build suffix, both directions of the CLI's mapping, the operator's keywords and the
Makefile's arguments are derived. These tests hold the table to the records it describes and check each
derivation end to end."""

from __future__ import annotations

import dataclasses

import pytest

from gemm_gen.app import operator_args
from gemm_gen.app.cli import parser
from gemm_gen.app.cliargs import config_args, request
from gemm_gen.config import GemmConfig
from gemm_gen.search import choose
from gemm_gen.spec import FIELDS, OPTIONS, REQUEST_OPTIONS, ROWS, Options, Problem, Tiling


def test_every_field_has_one_row_and_every_row_a_field():
    fields = [f.name for kind in (Problem, Tiling, Options) for f in dataclasses.fields(kind)]
    assert sorted(FIELDS) == sorted(fields) and len(FIELDS) == len(set(FIELDS)) == len(OPTIONS)


def test_each_row_reads_its_value_from_the_sub_record_it_names():
    c = GemmConfig("npu1", 256, 512, 256, 32, 64, 32, 128, "i8", "i16", rho=2, bias=True, activation="relu",
                   requant="per_channel", l1_alloc="basic-sequential", task_span=0, opt_level=1)
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
                                                                    "c_col_maj", "group_size"}
    assert ROWS["group_size"].tag is not None
    w4 = GemmConfig("npu2", 256, 1024, 1024, 32, 128, 64, 128, "bf16", "bf16", dtype_b="i4", group_size=128,
                    zero_points=True)
    assert w4.suffix.endswith("_g128z")
