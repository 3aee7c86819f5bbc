"""Our bfp16 designs against the facts of mlir-aie's ATB examples after their Peano rewrite (PR #3650),
recorded with their sources in tests/data/mlir_aie_atb_peano.json (issue 20, item 1).

Where we already do what mlir-aie does, the test asserts it. Where we differ (A's DRAM packing), the
test states mlir-aie's fact and is marked xfail(strict=True): it passes, and so fails the suite as an
unexpected pass, when the kernel rewrite of docs/bfp16_kernels.md lands; then drop its mark.

Tile coordinates are 8 x 8 tiles (one tile = 8 bfp16ebs8 blocks of 8 values, 72 bytes).
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from gemm_gen.backends.kernel_source.render import render_kernel
from gemm_gen.design import build_design
from gemm_gen.design.host_buffers import b_unit, b_unit_coords
from gemm_gen.design.ir import Design
from gemm_gen.design.tap import Tap
from gemm_gen.facts.l1_layout import a_layout, a_tile_pairs, b_tile_pairs, c_layout, c_tile_blocks
from gemm_gen.facts.precision import BFP16_COMPILERS, PRESETS
from gemm_gen.spec.checks import check_config
from gemm_gen.spec.config import GemmConfig

from ..golden_facts import design_c_stream, design_l1_layout, fifo_parts

FACTS = json.loads((Path(__file__).parents[1] / "data" / "mlir_aie_atb_peano.json").read_text())
LAYOUTS = FACTS["host_layouts"]
CONFIGS = ("config1", "config2", "config3")
BFP16_A = ("config2", "config3")  # configs whose A reaches the core as bfp16
K_MT = {"config1": 512, "config2": 128, "config3": 64}  # config1: mlir-aie's mtk; else one k-step per chunk


def _precision(name: str) -> dict[str, str]:
    p = PRESETS[name]
    return dict(dtype_in=p.a, dtype_b=p.b, dtype_out=p.out, acc=p.acc)


def their_config(name: str) -> GemmConfig:
    """GemmConfig for mlir-aie's shape and tile of one config, B packed as their strips."""
    f = FACTS["configs"][name]
    s, t = f["shape"], f["tile"]
    return GemmConfig("npu2", s["M"], s["K"], s["N"], t["m"], t["k"], t["n"], K_MT[name], rho=t["rho"],
                      b_pack="strips", **_precision(name))  # type: ignore[arg-type]


@cache
def design(name: str) -> Design:
    return build_design(their_config(name))


# ---- mlir-aie's layouts, written from the recorded index formulas ----------------------------------------
def their_b_order(k: int, n: int) -> list[tuple[int, int]]:
    """(kb, nb) of each L1 position of one k x n B tile: 1 x 2 super-blocks (N tile pair outer, K tile,
    then the pair's two tiles)."""
    return [(kb, 2 * p + j) for p in range(n // 16) for kb in range(k // 8) for j in range(2)]


def their_a_order(rows: int, k: int) -> list[tuple[int, int]]:
    """(mb, kb) of each L1 position of a rows x k A slice: 2 x 1 super-blocks."""
    return [(2 * p + j, kb) for p in range(rows // 16) for kb in range(k // 8) for j in range(2)]


def their_c_order(rows: int, n: int) -> list[tuple[int, int]]:
    """(mb, nb) of each L1 position of a rows x n C tile: 2 x 2 super-blocks, row-major."""
    return [(2 * p + i, 2 * q + j) for p in range(rows // 16) for q in range(n // 16) for i in range(2)
            for j in range(2)]


def their_b_dram_tile(K: int, k: int, n: int, kk: np.ndarray, nn: np.ndarray) -> np.ndarray:
    """Index of B's tile (K tile kk, N tile nn) in mlir-aie's DRAM buffer (layout_transpose_L1_1x2_8x8block):
    L1 tiles column-major over (K/k, N/n), 1 x 2 super-blocks inside each."""
    kt, nt = k // 8, n // 8
    kb, nb = kk % kt, nn % nt
    return (nn // nt) * (K // 8) * nt + (kk // kt) * kt * nt + (nb // 2) * 2 * kt + kb * 2 + nb % 2


def _dims(entry: dict, env: dict[str, int]) -> Tap:
    """One recorded mlir-aie dims entry (expressions in m, k, n, mtk, r, s, t) as a Tap."""
    def ev(x: str | int) -> int:
        return x if isinstance(x, int) else int(eval(x.replace("/", "//"), {}, dict(env)))  # noqa: S307
    return Tap(0, tuple(ev(x) for x in entry["sizes"]), tuple(ev(x) for x in entry["strides"]))


# ---- what our designs put in L1 ----------------------------------------------------------------------
def _first_task(d: Design, fifo: str):
    return next(t for t in d.tasks if t.fifo == fifo)


def our_l1_tiles(d: Design, l3l2: str, l2l1: str) -> list[int]:
    """DRAM tile index (in the operand's buffer) of each L1 tile of the first object of `l2l1`, through
    the shim walk, the memtile S2MM, the memtile MM2S and the core S2MM of our Design."""
    _, pos = design_l1_layout(d, l2l1)
    parts = fifo_parts(d.fifo(l2l1))
    walk = _first_task(d, l3l2).tap.scaled(parts).indices()
    blocks = walk[pos[0]]
    tiles = blocks[::parts] // parts
    assert np.array_equal(blocks.reshape(-1, parts), tiles[:, None] * parts + np.arange(parts))  # whole tiles
    return [int(u) for u in tiles]


def our_b_order(name: str) -> list[tuple[int, int]]:
    d = design(name)
    c = d.config
    return [tuple(int(x) for x in b_unit_coords(c, u)) for u in our_l1_tiles(d, "B_L3L2_0", "B_L2L1_0")]


def our_a_order(name: str) -> list[tuple[int, int]]:
    d = design(name)
    cols = d.config.call.storage("A")[1] // 8  # A's DRAM buffer: tiles row-major over the whole matrix
    return [divmod(u, cols) for u in our_l1_tiles(d, "A_L3L2_0", "A_L2L1_0")]


def our_c_order(name: str) -> list[tuple[int, int]]:
    """(mb, nb) in DRAM of each L1 tile of the C object of the core at join offset 0."""
    d = design(name)
    f = d.fifo("C_L2L3_0")
    parts = fifo_parts(f)
    memtile = design_c_stream(d, "C_L2L3_0")
    dram = _first_task(d, "C_L2L3_0").tap.scaled(parts).indices()[: len(memtile)]
    link = next(lk for lk in d.links if "C_L2L3_0" in lk.dsts)
    src = d.fifo(link.srcs[link.offsets.index(0)])
    l1_blocks = src.obj_elems * parts
    at = {int(mb): int(db) for mb, db in zip(memtile, dram) if mb < l1_blocks}
    cols = d.config.call.storage("C")[1] // 8
    tiles = [divmod(at[p * parts] // parts, cols) for p in range(l1_blocks // parts)]
    r0, c0 = min(t[0] for t in tiles), min(t[1] for t in tiles)
    return [(r - r0, q - c0) for r, q in tiles]


def matmul_source(name: str) -> str:
    (mm,) = [k for k in design(name).kernels if k.role == "matmul"]
    return render_kernel(mm.build)


# ---- the facts file itself --------------------------------------------------------------------------
def test_facts_name_their_sources_and_examples_match_the_formulas():
    assert FACTS["pr"]["number"] == 3650 and FACTS["pr"]["first_release"]["confirmed"] is None
    assert [tuple(x) for x in LAYOUTS["B"]["l1_order_k64_n64"]] == their_b_order(64, 64)
    assert [tuple(x) for x in LAYOUTS["A_bfp16"]["l1_order_32x64"]] == their_a_order(32, 64)
    assert [tuple(x) for x in LAYOUTS["C_bfp16"]["l1_order_32x32"]] == their_c_order(32, 32)

    def sources(x):
        if isinstance(x, dict):
            if "repo" in x:
                yield x
            for v in x.values():
                yield from sources(v)
        elif isinstance(x, list):
            for v in x:
                yield from sources(v)

    found = list(sources(FACTS))
    assert len(found) > 10
    for s in found:
        assert s["repo"] == "Xilinx/mlir-aie" and s["path"] and s["lines"]
        assert s["commit"] or s["index_id"]  # the Peano versions are stored without their commit


# ---- where we agree ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", CONFIGS)
def test_their_shape_and_tile_build_and_pass_the_checks(name):
    c = their_config(name)
    check_config(c)
    d = design(name)
    t = FACTS["configs"][name]["tile"]
    assert d.fifo("A_L2L1_0").obj_shape[0] * (8 if c.types.t_in.is_block else 1) == t["t_ma"] == t["m"] // t["rho"]


@pytest.mark.parametrize("name", CONFIGS)
def test_mmul_shape_accumulators_and_rounding_agree(name):
    (mm,) = [k for k in design(name).kernels if k.role == "matmul"]
    assert list(mm.build.mmul) == FACTS["mmul"]["shape"]  # aie::mmul<8, 8, 8, bfp16ebs8>
    assert mm.build.expansion == (2, 2)  # acc0..acc3 over a 16 x 16 C block
    assert their_config(name).kernel.rounding == FACTS["rounding"]["kernel_sets"]  # conv_even


@pytest.mark.parametrize("name", CONFIGS)
def test_b_strips_are_their_dram_packing(name):
    """b_pack="strips" is layout_transpose_L1_1x2_8x8block, tile for tile."""
    c = their_config(name)
    kk, nn = np.meshgrid(np.arange(c.size.K // 8), np.arange(c.size.N // 8), indexing="ij")
    assert np.array_equal(b_unit(c, kk, nn), their_b_dram_tile(c.size.K, c.tiling.k, c.tiling.n, kk, nn))


@pytest.mark.parametrize("name", CONFIGS)
def test_b_shim_reads_one_run_per_core_column(name):
    c = their_config(name)
    runs = [t.tap for t in design(name).tasks if t.tensor == "B"]
    strip = c.size.K // 8 * c.tiling.n // 8  # tiles of one K x n strip (B_taps: n*K/8 blocks)
    assert all(t.is_linear() or t.sizes == (t.count,) for t in runs)
    assert {t.count for t in runs} == {strip}
    assert {t.offset % strip for t in runs} == {0}


@pytest.mark.parametrize("name", CONFIGS)
def test_b_memtile_object_already_holds_their_l1_order(name):
    """With strips, the memtile's B object is the strip's next k x n tile exactly as mlir-aie's core
    receives it (1 x 2 super-blocks): only our memtile MM2S dims reorder it (xfails below)."""
    d, c = design(name), their_config(name)
    f = d.fifo("B_L3L2_0")
    assert f.dims_from_stream is None  # memtile S2MM linear
    parts = fifo_parts(f)
    blocks = _first_task(d, "B_L3L2_0").tap.scaled(parts).indices()[: f.obj_elems * parts]
    tiles = blocks[::parts] // parts
    order = [tuple(int(x) for x in b_unit_coords(c, int(u))) for u in tiles]
    assert order == their_b_order(c.tiling.k, c.tiling.n)


def test_config1_a_memtile_and_core_dims_are_theirs():
    """mlir-aie's config1: memtile S2MM (m, mtk/k, k), memtile MM2S (mtk/k*4, k/s, m/4, s), core S2MM
    (k/s, m/4/r, r*s), in bf16 elements; ours split m into rho x T_MA but walk the same addresses."""
    d, f = design("config1"), FACTS["configs"]["config1"]
    t = f["tile"]
    env = dict(m=t["m"], k=t["k"], n=t["n"], mtk=t["mtk"], r=8, s=8, t=8)
    dd = f["design"]
    for ours, theirs in ((d.fifo("A_L3L2_0").dims_from_stream, dd["A_l3l2_dims_from_stream"]),
                         (d.fifo("A_L2L1_0").dims_to_stream, dd["A_l2l1_dims_to_stream"]),
                         (d.fifo("A_L2L1_0").dims_from_stream, dd["A_l2l1_dims_from_stream"])):
        assert ours is not None and np.array_equal(ours.indices(), _dims(theirs, env).indices())


def test_config1_c_memtile_dims_and_l1_layouts_are_theirs():
    d, f = design("config1"), FACTS["configs"]["config1"]
    t = f["tile"]
    env = dict(m=t["m"], k=t["k"], n=t["n"], r=8, s=8, t=8)
    ours = d.fifo("C_L2L3_0").dims_to_stream  # per join slice, as theirs walks one core's m x n
    assert ours is not None and np.array_equal(ours.indices(),
                                               _dims(f["design"]["C_l2l3_dims_to_stream"], env).indices())
    m, k, n, tma = t["m"], t["k"], t["n"], t["t_ma"]
    i, j = np.indices((m, n))
    assert np.array_equal(c_layout(m, n, 8, 8), (i // 8) * 8 * n + (j // 8) * 64 + (i % 8) * 8 + j % 8)
    i, j = np.indices((tma, k))
    assert np.array_equal(a_layout(tma, k, 8, 8), (i // 8) * 8 * k + (j // 8) * 64 + (i % 8) * 8 + j % 8)


def test_b_tile_pairs_is_their_formula():
    """l1_layout.b_tile_pairs (the kernel's L1 order of bfp16 B, read by the simulator) is the recorded order."""
    l1 = b_tile_pairs(8, 8)
    assert [int(l1[kb, nb]) for kb, nb in their_b_order(64, 64)] == list(range(64))


@pytest.mark.parametrize("name", CONFIGS)
def test_b_l1_tiles_are_1x2_super_blocks(name):
    """B's L1 tile order is mlir-aie's 1 x 2 super-blocks, l1(kb, nb) = (nb // 2) * 2 k/8 + 2 kb + nb % 2
    (docs/bfp16_kernels.md step 1: our kernel pops the column pair from one B stream)."""
    t = FACTS["configs"][name]["tile"]
    assert our_b_order(name) == their_b_order(t["k"], t["n"])


@pytest.mark.parametrize("name", CONFIGS)
def test_b_memtile_to_core_is_linear(name):
    """With strips, B's memtile -> core forward has no dims, as mlir-aie's: the strip arrives in kernel order."""
    d = design(name)
    f = d.fifo("B_L2L1_0")
    assert f.dims_to_stream is None and f.dims_from_stream is None


def test_a_tile_pairs_is_their_formula():
    """l1_layout.a_tile_pairs (the kernel's L1 order of bfp16 A, read by the simulator) is the recorded order."""
    l1 = a_tile_pairs(4, 8)
    assert [int(l1[mb, kb]) for mb, kb in their_a_order(32, 64)] == list(range(32))


@pytest.mark.parametrize("name", BFP16_A)
def test_a_l1_tiles_are_2x1_super_blocks(name):
    """bfp16 A's L1 tile order is mlir-aie's 2 x 1 super-blocks, l1(mb, kb) = (mb // 2) * 2 k/8 + 2 kb + mb % 2
    (docs/bfp16_kernels.md step 2: our kernel pops the row pair from one A stream)."""
    t = FACTS["configs"][name]["tile"]
    assert our_a_order(name) == their_a_order(t["t_ma"], t["k"])


def test_c_tile_blocks_is_their_formula():
    """l1_layout.c_tile_blocks (the kernel's L1 order of bfp16 C, read by the simulator) is the recorded order,
    and over 8 x 8 blocks of elements it is the same order of blocks (a converted accumulator's)."""
    l1 = c_tile_blocks(4, 4)
    assert [int(l1[mb, nb]) for mb, nb in their_c_order(32, 32)] == list(range(16))
    i, j = np.indices((32, 48))
    assert np.array_equal(c_tile_blocks(32, 48, 8, 8), c_tile_blocks(4, 6)[i // 8, j // 8] * 64 + (i % 8) * 8 + j % 8)


@pytest.mark.parametrize("name", BFP16_A)
def test_c_l1_tiles_are_2x2_super_blocks(name):
    """bfp16 C's L1 tile order is mlir-aie's 2 x 2 super-blocks, row-major (docs/bfp16_kernels.md: the kernel
    reads and writes a 16 x 16 block of C as 4 consecutive tiles, one stream each way); our memtile undoes it."""
    t = FACTS["configs"][name]["tile"]
    assert our_c_order(name) == their_c_order(t["m"], t["n"])


# ---- where we differ (xfail until the kernel rewrite lands) --------------------------------------------
@pytest.mark.parametrize("name", BFP16_A)
@pytest.mark.xfail(strict=True, reason="A's DRAM packing: mlir-aie stores each core row's m x K band as one "
                   "run (L1 tiles row-major over (M/m, K/k), layout_A_L1_2x1_8x8block); ours is the matrix's "
                   "tiles row-major, walked as m/8 strided rows per k_mt chunk")
def test_a_shim_reads_one_run_per_core_row(name):
    c = their_config(name)
    band = c.tiling.m // 8 * c.size.K // 8
    runs = [t.tap for t in design(name).tasks if t.tensor == "A"]
    assert all(t.is_linear() or t.sizes == (t.count,) for t in runs)
    assert {t.count for t in runs} == {band}


@pytest.mark.parametrize("name", CONFIGS)
def test_kernel_keeps_one_a_and_one_b_stream(name):
    """As mlir-aie's Peano kernels, two live input block streams in the MAC loop (one A, one B: each pops
    its pair of tiles), aie2p's two load FIFOs (llvm-aie #1090)."""
    streams = set(re.findall(r"TileIn[AB] (\w+)\(tile_at\((pA|pB),", matmul_source(name)))
    assert FACTS["configs"][name]["kernel"]["inner_loop_streams"]["input_block_streams"] == 2
    assert len(streams) == 2


def test_config2_kernel_reads_c_through_one_stream():
    """As mlir-aie's config2 Peano kernel, C goes through one input stream and one output stream, both linear
    over the slice's 2 x 2 super-blocks, constructed at their computed bases (no seek). Theirs reads through
    one persistent stream; ours builds it per block at the block's base once the A and B streams end, so
    that no more than two input streams hold a load FIFO at once (tests/backends/test_kernels.py measures that)."""
    source = matmul_source("config2")
    c_in = set(re.findall(r"TileInC (\w+)\(c_block\(slice,", source))
    c_out = set(re.findall(r"TileOutC (\w+)\(slice\)", source))
    assert FACTS["configs"]["config2"]["kernel"]["inner_loop_streams"]["c_streams"] == 2  # one in, one out
    assert len(c_in) == 1 and len(c_out) == 1
    assert ".seek(" not in source and ".pop_seek(" not in source


def test_bfp16_kernels_build_with_peano():
    """mlir-aie builds its ATB kernels with Peano since PR #3650; so do we, by default (chess an option).
    Not compiled here: the render and the build lines only."""
    assert BFP16_COMPILERS[0] == "peano" and "chess" in BFP16_COMPILERS
