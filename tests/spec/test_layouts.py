"""Column-major A (issue 23 item 1): what the flag reaches (plan --json, keys and cache names, the
operator, the Makefile), what it refuses, and that it leaves the row-major choices alone. The
simulator checks are in tests/sim/test_sim.py, the IRON lowering in tests/backends/test_iron.py, the price in
tests/model/test_model.py, the kernel in tests/backends/test_kernels.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gemm_gen import Gemm
from gemm_gen.app.cli import main
from gemm_gen.design import build_design
from gemm_gen.design.build import kernel_build
from gemm_gen.design.serve import check
from gemm_gen.facts.errors import ConfigError
from gemm_gen.search import choose
from gemm_gen.spec.config import GemmConfig
from gemm_gen.spec.request import Options, Problem, Request

from ..app.test_cli_bad_input import refused

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--dev", "npu1", "-M", "128", "-K", "64", "-N", "128", "--dtype_in", "i8", "--dtype_out", "i32"]


def test_plan_json_shows_the_layouts(capsys):
    assert main(["plan", *SMALL, "--a-col-maj", "--b-col-maj", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["layouts"] == {"A": "column-major", "B": "column-major", "C": "row-major"}
    assert main(["plan", *SMALL, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["layouts"] == {"A": "row-major", "B": "row-major", "C": "row-major"}


def test_names_keys_and_flags_tell_the_layouts_apart():
    row = GemmConfig("npu1", 128, 64, 128, 16, 16, 16, 32, "i8", "i32")
    col = row.with_(a_col_maj=True)
    assert row != col and row.suffix != col.suffix and "acol" in col.suffix
    assert kernel_build(row).object_file != kernel_build(col).object_file
    assert col.to_json()["a_col_maj"] is True and row.to_json()["a_col_maj"] is False
    from gemm_gen.app.cliargs import config_args
    assert "--a-col-maj" in config_args(col) and "--a-col-maj" not in config_args(row)


@pytest.mark.parametrize("args,text", [
    (["--dev", "npu2", "-M", "256", "-K", "256", "-N", "256", "--dtype_in", "bfp16", "--a-col-maj"],
     "a bfp16 block shares one exponent over 8 K values of an A row"),
    (["--dev", "npu1", "-M", "128", "-K", "5000", "-N", "128", "--dtype_in", "i8", "--dtype_out", "i32", "-m", "16",
      "-k", "32", "-n", "32", "--k-mt", "64", "--a-col-maj", "--n-aie-cols", "2"],
     "walks K=5056 in 79 k_mt chunks on its BD's iteration dimension, at most 64; use --k-mt 96 or more"),
])
def test_what_column_major_a_refuses_is_one_line(capsys, args, text):
    err = refused(capsys, ["plan", *args])
    assert text in err


def test_either_bf16_kernel_takes_column_major_a():
    """The emulated and the convert-once kernel both read A^T's blocks (the latter transposes each
    before its conversion): the choice is left to the model, and both check."""
    c = choose(Request(Options("npu2", "bf16", "bf16", a_col_maj=True), Problem(512, 512, 512))).config
    assert c.layout.a_col_maj
    check(c)
    for once in (False, True):
        check(c.with_(convert_once=once, compiler="chess" if once else c.kernel.compiler))


@pytest.mark.parametrize("options,size", [(Options("npu1", "i8", "i32"), Problem(1024, 1024, 1024)),
                                          (Options("npu2", "bf16", "bf16"), Problem(2048, 512, 1024)),
                                          (Options("npu2", "i8", "i16", True), Problem(4096, 4096, 4096))])
def test_row_major_choices_are_unchanged_and_column_major_a_gets_its_own(options, size):
    """A row-major request is the same request whether a_col_maj is left out or given False (one
    search, one design), and the model's time of that design does not depend on column-major A's
    pricing: it equals its price as a row-major design with A's runs counted the row-major way.
    docs/speed.md (tests/model/test_speed_targets.py) pins the tuner's row-major designs themselves."""
    from dataclasses import replace
    row = choose(Request(options, size)).config
    assert choose(Request(replace(options, a_col_maj=False), size)).config == row
    col = choose(Request(replace(options, a_col_maj=True), size)).config
    assert col.layout.a_col_maj and not row.layout.a_col_maj
    check(col)  # every DMA pattern of the chosen column-major design within its limits


def test_the_operator_takes_a_transposed_view_without_a_copy_of_a():
    """Gemm(a_col_maj=True) reads A as A^T: X.T of a C-ordered X is passed as it is."""
    rng = np.random.default_rng(0)
    x = rng.integers(-8, 8, size=(40, 96), dtype=np.int8)  # K x M, C-ordered: A = x.T
    b = rng.integers(-8, 8, size=(40, 72), dtype=np.int8)
    g = Gemm("npu1", "i8", "i32", a_col_maj=True)
    c = g.simulate(x.T, b)
    assert np.array_equal(c, x.T.astype(np.int64) @ b.astype(np.int64))
    assert "A" not in g.plan(x.T, b).padded  # A^T's rows of 96 int8 are whole words: read in place


def test_make_passes_a_col_maj():
    out = subprocess.run(["make", "-n", "plan", "DEVICE=npu1", "M=128", "K=64", "N=128", "A_COL_MAJ=1"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert "--a-col-maj 1" in out
    bad = subprocess.run(["make", "-n", "plan", "A_COL_MAJ=yes"], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "A_COL_MAJ=yes is not 0 or 1" in bad.stderr


def test_column_major_bfp16_a_is_refused():
    with pytest.raises(ConfigError, match="shares one exponent over 8 K values"):
        build_design(GemmConfig("npu2", 256, 256, 256, 64, 64, 64, 64, "bfp16", "bfp16", a_col_maj=True))


# ---- column-major C against mlir-aie's facts ---------------------------------------------------
C_FACTS = json.loads((ROOT / "tests" / "data" / "mlir_aie_c_col_maj.json").read_text())


def _ev(expr: str, **names: int) -> int:
    return int(eval(expr, {"__builtins__": {}}, names))  # noqa: S307 - our own test data, arithmetic only


def _theirs_c(g, c: GemmConfig):  # noqa: ANN001, ANN202 - a grid.Grid; (their L1 layout, their walk, sizes)
    """mlir-aie's C column-major L1 layout of one m x n tile (transposed r x t blocks, blocks down the
    columns) and its memtile walk to the stream, from tests/data/mlir_aie_c_col_maj.json."""
    from gemm_gen.design import patterns

    m, n, r, t = g.m, g.n, g.r, g.t
    names = dict(m=m, n=n, r=r, t=t, M=c.size.M, N=c.size.N, cols=c.array.cols)
    i, j = np.indices((m, n))
    layout = ((j // t) * (m // r) + i // r) * (r * t) + (j % t) * r + i % r
    f = C_FACTS["memtile_dims_to_stream"]
    walk = patterns.Tap(0, tuple(_ev(x, **names) for x in f["sizes"]), tuple(_ev(x, **names) for x in f["strides"]))
    return layout, walk, names


def test_column_major_c_streams_and_writes_what_mlir_aie_does():
    """mlir-aie's kernel stores C blocks transposed and in column-major order, and its memtile walk
    reads them out as the tile's columns; ours keeps the row-major r x t blocks and its memtile walk
    gathers the columns (whole words for 32-bit C). Both streams are the m x n tile column by
    column, and the shim then writes 4 tiles of n columns down C^T's rows, mlir-aie's pattern."""
    from gemm_gen.design import patterns
    from gemm_gen.design.grid import grid
    from gemm_gen.facts.l1_layout import c_layout

    c = GemmConfig("npu1", 4 * 32 * 2, 64, 4 * 16 * 2, 32, 16, 16, 16, "i8", "i32", c_col_maj=True)
    g = grid(c, "C")
    m, n, r, t = g.m, g.n, g.r, g.t
    theirs_l1, their_walk, names = _theirs_c(g, c)  # mlir-aie's L1 element (i, j) and its memtile walk
    ours_l1 = c_layout(m, n, r, t)

    def stream(layout: np.ndarray, walk: patterns.Tap) -> list[tuple[int, int]]:
        where = {int(a): (int(x), int(y)) for (x, y), a in np.ndenumerate(layout)}
        return [where[int(a)] for a in walk.indices()]

    column_major = [(x, y) for y in range(n) for x in range(m)]
    assert stream(theirs_l1, their_walk) == column_major
    assert stream(ours_l1, patterns.c_l2_to_stream(g)) == column_major
    # the shim: mlir-aie's three inner dims [4, n, m] / [m, M, 1] per output block, at its offset
    s = C_FACTS["shim_c"]
    for col in range(c.array.cols):
        tap = patterns.shim_c(g, 0, 0, col)
        assert list(tap.sizes) == [_ev(x, **names) for x in s["sizes"][1:]]
        assert list(tap.strides) == [_ev(x, **names) for x in s["strides"][1:]]
        assert tap.offset == _ev(s["offset"], row_base=0, col=col, **names)


def test_column_major_bfp16_c_is_refused(capsys):
    err = refused(capsys, ["plan", "--dev", "npu2", "-M", "256", "-K", "256", "-N", "256", "--dtype_in", "bfp16",
                           "--dtype_out", "bfp16", "--c-col-maj"])
    assert "a bfp16 block shares one exponent over 8 N values of a C row" in err


@pytest.mark.parametrize("dev,t_in,t_out", [("npu1", "bf16", "bf16"), ("npu1", "i8", "i8"), ("npu1", "i16", "i16"),
                                            ("npu2", "bf16", "bf16"), ("npu2", "i8", "i8"), ("npu2", "i8", "i16")])
def test_narrow_column_major_c_streams_mlir_aies_columns_in_whole_words(dev, t_in, t_out):
    """Below 32 bits both kernels store each r x t block of C transposed (mlir-aie's C_COL_MAJ:
    aie::transpose(v, r, t)); mlir-aie orders the blocks column-major, ours row-major, and each
    memtile walk reads its layout out as the tile's columns, in runs of r elements: whole words."""
    from gemm_gen.design import patterns
    from gemm_gen.design.grid import grid
    from gemm_gen.facts.l1_layout import c_layout
    from gemm_gen.spec.rules.defaults import emulation_default

    from ..conftest import small

    c = small(dev, t_in, t_out, c_col_maj=True)
    assert c.c_t_blocks and kernel_build(c).c_col_maj and "_ccol" in kernel_build(c).object_file
    assert emulation_default(dev, t_in) == c.kernel.emulate_bf16_with_bfp16
    g = grid(c, "C")
    m, n, r, t = g.m, g.n, g.r, g.t
    theirs_l1, their_walk, _ = _theirs_c(g, c)
    ours_l1 = c_layout(m, n, r, t, col_maj=True)
    where_ours = {int(a): (int(x), int(y)) for (x, y), a in np.ndenumerate(ours_l1)}
    where_theirs = {int(a): (int(x), int(y)) for (x, y), a in np.ndenumerate(theirs_l1)}
    ours = patterns.c_l2_to_stream(g)
    column_major = [(x, y) for y in range(n) for x in range(m)]
    assert [where_theirs[int(a)] for a in their_walk.indices()] == column_major
    assert [where_ours[int(a)] for a in ours.indices()] == column_major
    # inside a block both store the same t x r transpose; the innermost run is r elements, whole words
    assert ours.sizes[-1] == r and ours.strides[-1] == 1 and c.types.t_out.nbytes(r) % 4 == 0
    assert np.array_equal(ours_l1[:r, :t], theirs_l1[:r, :t])


def test_plan_json_shows_column_major_c_and_make_passes_it(capsys):
    assert main(["plan", *SMALL, "--c-col-maj", "--a-col-maj", "--b-col-maj", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["layouts"] == {"A": "column-major", "B": "column-major", "C": "column-major"}
    out = subprocess.run(["make", "-n", "plan", "DEVICE=npu1", "M=128", "K=64", "N=128", "C_COL_MAJ=1"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert "--c-col-maj 1" in out
    row = GemmConfig("npu1", 128, 64, 128, 16, 16, 16, 32, "i8", "i32")
    assert row.suffix != row.with_(c_col_maj=True).suffix


def test_column_major_c_junk_rows_are_padded_junk_columns_are_not():
    c = GemmConfig("npu1", 4 * 32, 64, 4 * 16, 32, 16, 16, 16, "i8", "i32", c_col_maj=True)
    assert "C" in c.with_(M=100).call.padded  # rows past M would land on C^T's next row
    assert "C" not in c.with_(N=50).call.padded  # C^T's rows past N are slack
    assert c.with_(M=100).call.storage("C") == (c.with_(M=100).call.Np, c.with_(M=100).call.Mp)


@pytest.mark.parametrize("dev,t_in,t_out,size", [("npu1", "i8", "i8", (1000, 512, 776)),
                                                 ("npu2", "bf16", "bf16", (2048, 1000, 1032)),
                                                 ("npu1", "i16", "i16", (512, 512, 520)),
                                                 ("npu2", "i8", "i16", (1024, 1024, 1000))])
def test_narrow_column_major_c_tuner_candidates_keep_the_dma_limits(dev, t_in, t_out, size):
    """Every design the tuner keeps for a narrow column-major C is within the DMA limits (the
    memtile's column walk over transposed blocks, the shim's runs down C^T's rows), and the model
    prices C^T's runs of m: its predicted time differs from the row-major design's of the same tiles."""
    from gemm_gen.design.patterns import check_dma_limits
    from gemm_gen.model.perf import Workload, estimate_config
    from gemm_gen.search.tune import tune

    result = tune(Workload.new(dev, *size, t_in, t_out, c_col_maj=True), 5)
    assert result.top
    for cand in result.top:
        c = cand.config
        assert c.layout.c_col_maj and c.c_t_blocks and not c.kernel.block
        check_dma_limits(c)
        check(c)
        row = c.with_(c_col_maj=False)
        assert float(estimate_config(c).time) != float(estimate_config(row).time)
