"""Column-major A and C on the bfp16 kernels (issue 23): a bf16 A converted in the core arrives in
blocks of A^T and is transposed before its conversion; a bf16 C's blocks are stored transposed, an f32
C's columns gathered by the memtile, as on the scalar kernels. A bfp16 A or C in DRAM is refused in
one line: its blocks share an exponent along K (A) or N (C), and A^T or C^T would share it along M."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gemm_gen.backends.iron import dims, lower
from gemm_gen.design import build_design
from gemm_gen.design.build import kernel_build
from gemm_gen.facts.errors import LayoutError
from gemm_gen.model import kernel as km
from gemm_gen.model.params import load
from gemm_gen.sim import simulate
from gemm_gen.spec.config import GemmConfig

from .. import iron_recorder
from ..app.test_cli_bad_input import refused

# bf16 A on the block kernels (config1's, converted once) and scalar C (kept in bf16, or f32 rounded once)
TYPES = {
    "config1": dict(dtype_in="bf16", dtype_b="bfp16", dtype_out="bf16", acc="bf16"),
    "bf16xbfp16->bf16 acc f32": dict(dtype_in="bf16", dtype_b="bfp16", dtype_out="bf16", acc="f32"),
    "bf16xbfp16->f32": dict(dtype_in="bf16", dtype_b="bfp16", dtype_out="f32"),
    "convert-once bf16": dict(dtype_in="bf16", dtype_out="bf16", convert_once=True, compiler="chess"),
    "convert-once f32": dict(dtype_in="bf16", dtype_out="f32", convert_once=True),
    "convert-once bf16 acc bf16": dict(dtype_in="bf16", dtype_out="bf16", acc="bf16", convert_once=True),
}
C_ONLY = {  # a bfp16 A stays row-major: C alone changes layout
    "bfp16->bf16": dict(dtype_in="bfp16", dtype_out="bf16"),
    "bfp16->f32": dict(dtype_in="bfp16", dtype_out="f32"),
    "bfp16->bf16 acc f32": dict(dtype_in="bfp16", dtype_out="bf16", acc="f32"),
}
LAYOUTS = {"a": (True, False), "c": (False, True), "ac": (True, True)}


def small(rho: int = 1, col: bool = True, **kw: object) -> GemmConfig:
    """Two output blocks each way, two k_mt chunks and a K tail, ragged M and N (padding)."""
    return GemmConfig("npu2", 2 * 4 * 32 - 5, 120, 2 * 8 * 32 - 3, 32 * rho, 16, 32, 32, b_col_maj=col, rho=rho,
                      **kw)  # type: ignore[arg-type]


CASES = [(name, lay, rho) for name in TYPES for lay in LAYOUTS for rho in (1, 2)]
CASES += [(name, "c", rho) for name in C_ONLY for rho in (1, 2)]


def config(name: str, lay: str, rho: int) -> GemmConfig:
    a_col, c_col = LAYOUTS[lay]
    return small(rho=rho, col=rho == 1, a_col_maj=a_col, c_col_maj=c_col, **{**TYPES, **C_ONLY}[name])


@pytest.mark.parametrize("name,lay,rho", CASES, ids=lambda x: str(x))
def test_column_major_a_and_c_simulate_bit_exact(name, lay, rho):
    c = config(name, lay, rho)
    assert c.kernel.block
    r = simulate(c, seed=rho)
    assert r.passed and r.mismatches == 0, r.first_mismatch
    assert r.nonzero_fraction > 0.5
    build = kernel_build(c)
    assert build.a_col_maj == c.layout.a_col_maj
    assert build.c_col_maj == (c.layout.c_col_maj and c.types.t_out.bytes < 4)  # bf16 blocks transposed, f32 gathered


def _fifos_from(d, other, names: tuple[str, ...]):
    """d with the fifos whose names start with `names` as the other design lays them out."""
    theirs = {f.name: f for f in other.fifos}
    return replace(d, fifos=tuple(theirs[f.name] if f.name.startswith(names) else f for f in d.fifos))


@pytest.mark.parametrize("name", ["config1", "convert-once bf16"])
def test_a_row_major_walk_of_a_column_major_a_is_caught(name):
    """The column-major A design with its A fifos walking as a row-major A's do: the kernel sees
    A^T where its blocks should be, and the simulator says so."""
    c = config(name, "a", 1)
    d = _fifos_from(build_design(c), build_design(c.with_(a_col_maj=False)), ("A_",))
    with pytest.raises(LayoutError):
        simulate(d)


@pytest.mark.parametrize("name", ["config1", "bf16xbfp16->bf16 acc f32", "bf16xbfp16->f32"])
def test_a_row_major_drain_of_a_column_major_c_is_caught(name):
    c = config(name, "c", 1)
    d = _fifos_from(build_design(c), build_design(c.with_(c_col_maj=False)), ("C_L2L3",))
    with pytest.raises(LayoutError):
        simulate(d)


@pytest.mark.parametrize("name,lay", [("config1", "ac"), ("convert-once bf16", "ac"), ("bf16xbfp16->f32", "ac"),
                                      ("bfp16->bf16", "c")])
def test_column_major_bfp16_kernels_lower_with_the_designs_patterns(name, lay):
    """IRON 1.4.3's stand-in takes the designs: the scalar operands' fifos walk as the design has them
    (A^T's blocks, C's columns), and the kernel object is the one that transposes A (and a bf16 C)."""
    c = config(name, lay, 1)
    d = build_design(c)
    fresh, rec = iron_recorder.api()
    lower(d, fresh).resolve_program()
    by_name = {f.name: f for f in rec.fifos}
    scalar = ("C_",) + (() if c.types.t_in.is_block else ("A_",))  # the lowering writes bfp16 tiles' walks in words
    for f in (f for f in d.fifos if f.name.startswith(scalar)):
        assert (by_name[f.name].dims_to_stream or None) == dims(f.dims_to_stream)
        assert (by_name[f.name].dims_from_stream_per_cons or None) == dims(f.dims_from_stream)
    spec = next(x for x in d.kernels if x.role == "matmul")
    assert ("_acol" in spec.object_file) == c.layout.a_col_maj
    assert ("_ccol" in spec.object_file) == c.c_t_blocks
    assert {x.name: x for x in rec.kernels}[spec.name].object_file_name == spec.object_file


@pytest.mark.parametrize("args,text", [
    (["--preset", "config2", "--a-col-maj"], "bfp16 block shares one exponent over 8 K values of an A row"),
    (["--dtype_in", "bfp16", "--dtype_out", "bf16", "--a-col-maj"], "pass A in bf16 (--dtype_in bf16)"),
    (["--preset", "config2", "--c-col-maj"], "bfp16 block shares one exponent over 8 N values of a C row"),
    (["--preset", "config3", "--c-col-maj"], "write C in bf16 or f32"),
    (["--dtype_in", "bf16", "--dtype_b", "bfp16", "--dtype_out", "bfp16", "--c-col-maj"], "8 M values"),
])
def test_column_major_bfp16_operands_are_refused_in_one_line(capsys, args, text):
    err = refused(capsys, ["plan", "--dev", "npu2", "-M", "256", "-K", "256", "-N", "256", *args])
    assert text in err and "\n" not in err.strip()


def test_column_major_bfp16_kernels_are_priced_with_their_transposes():
    """Priced as the scalar kernels' transposes: A's blocks once per conversion (vector-slot shuffles),
    a bf16 C's tiles on each reload and store; an f32 C (gathered by the memtile) costs the kernel
    nothing; the rest of the kernel prices as before."""
    p = load()
    for types in (TYPES["config1"], TYPES["convert-once bf16 acc bf16"]):
        row = small(**types).with_(m=32, k=64, n=32)
        cyc = {}
        for lay, (a_col, c_col) in {"r": (False, False), **LAYOUTS}.items():
            c = row.with_(a_col_maj=a_col, c_col_maj=c_col)
            ks = km.kernel_shape(c.dev, c.types.dtype_in, c.types.dtype_out, c.kernel.mmul,
                                 bool(c.kernel.emulate_bf16_with_bfp16), c.types.dtype_b,
                                 c.types.acc, c.kernel.expansion, c.kernel.kernel_loops, bool(c.kernel.convert_once),
                                 None, c.layout.a_col_maj,
                                 c.c_t_blocks and not c.types.precision.converts_c)
            cyc[lay] = float(km.block_call_cycles(p, ks, np.int64(32), np.int64(64), np.int64(32)))
        shuffles = 2 * 4 * 8  # A: 2 shuffles per 8 x 8 bf16 block, 4 x 8 blocks of the 32 x 64 tile
        assert cyc["a"] - cyc["r"] == pytest.approx(shuffles)
        assert cyc["c"] > cyc["r"] and cyc["ac"] == pytest.approx(cyc["a"] + cyc["c"] - cyc["r"])
    f32 = small(**TYPES["bf16xbfp16->f32"])
    assert not f32.with_(c_col_maj=True).c_t_blocks  # nothing for the kernel to transpose
