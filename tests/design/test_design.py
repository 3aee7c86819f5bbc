"""The Design: structure, the hop-by-hop layouts, the runtime BD queue, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from gemm_gen.app.plan_info import dram_bytes, live_bds_per_shim
from gemm_gen.design import build_design
from gemm_gen.design import patterns as P
from gemm_gen.design.grid import grid
from gemm_gen.design.ir import Acquire, Call, Loop, Release
from gemm_gen.design.serialize import dumps
from gemm_gen.facts.errors import ConfigError
from gemm_gen.facts.l1_layout import a_layout, b_layout, c_layout
from gemm_gen.spec.checks import check_config
from gemm_gen.spec.config import GemmConfig

from ..conftest import small


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_structure(dev):
    c = small(dev)
    d = build_design(c)
    names = {f.name for f in d.fifos}
    rows, cols = c.array.rows, c.array.cols
    assert len(d.fifos) == 2 * rows + 2 * cols + cols * (rows + 1)
    for row in range(rows):
        a = d.fifo(f"A_L2L1_{row}")
        assert [t.col for t in a.consumers] == list(range(cols))  # broadcast along the row
        assert {t.row for t in a.consumers} == {2 + row}
        assert a.producer.col == c.a_col(row) and a.producer.row == 1
    assert [c.a_col(r) for r in range(rows)] == ([0, 1, 2, 3] if dev == "npu1" else [0, 2, 4, 6])
    for col in range(cols):
        b = d.fifo(f"B_L2L1_{col}")
        assert {t.col for t in b.consumers} == {col} and len(b.consumers) == rows  # down the column
        join = next(lk for lk in d.links if lk.kind == "join" and lk.tile.col == col)
        assert join.offsets == tuple(r * c.tiling.m * c.tiling.n for r in range(rows))
        assert join.srcs == tuple(f"C_L1L2_{col}_{r}" for r in range(rows))
    assert {f"A_L3L2_{r}" for r in range(rows)} <= names
    assert d.fifo("A_L3L2_0").obj_elems == c.tiling.m * c.tiling.k_mt  # the memtile holds m x k_mt of A
    assert d.fifo("C_L2L3_0").depth == 1 and d.fifo("C_L1L2_0_0").depth == 1  # single C buffer


@pytest.mark.parametrize("dev,cols,a_cols", [("npu1", 1, [0, 0, 0, 0]), ("npu1", 2, [0, 0, 1, 1]),
                                              ("npu2", 2, [0, 0, 1, 1]), ("npu2", 4, [0, 1, 2, 3])])
def test_fewer_columns_split_a_in_its_memtile(dev, cols, a_cols):
    """mlir-aie's --n-aie-cols: with fewer columns than core rows one A memtile holds the tiles of
    rows / cols core rows and splits them (n_A_tiles_per_shim); one A task per A shim."""
    c = small(dev, N=2 * cols * 8 * 2, cols=cols)
    d = build_design(c)
    assert c.array.cols == cols and [c.a_col(r) for r in range(c.array.rows)] == a_cols
    per = 4 // min(cols, 4)
    shims = sorted(set(a_cols))
    for i, col in enumerate(shims):
        l2 = d.fifo(f"A_L3L2_{i}")
        assert l2.producer.col == col and l2.obj_elems == per * c.tiling.m * c.tiling.k_mt
        link = next(lk for lk in d.links if lk.srcs == (l2.name,))
        assert link.kind == ("split" if per > 1 else "forward")
        assert link.dsts == tuple(f"A_L2L1_{i * per + j}" for j in range(per))
        assert link.offsets == tuple(j * c.tiling.m * c.tiling.k_mt for j in range(per))
    for row in range(c.array.rows):
        assert [t.col for t in d.fifo(f"A_L2L1_{row}").consumers] == list(range(cols))
    first = [t for t in d.tasks if t.group == 0]
    assert sorted(t.name for t in first if t.tensor == "A") == [f"A{i}_g0" for i in range(len(shims))]
    assert sum(t.tensor == "B" for t in first) == cols == sum(t.tensor == "C" for t in first)


def test_column_counts_outside_mlir_aies_choices_are_refused():
    with pytest.raises(ConfigError, match=r"n_aie_cols=3 on npu1: designs use 1, 2, 4 columns"):
        build_design(small("npu1", cols=3))
    with pytest.raises(ConfigError, match=r"n_aie_cols=16 on npu2"):
        build_design(small("npu2", cols=16))


def test_worker_loop():
    c = small("npu2", "i8", "i16")
    d = build_design(c)
    (outer,) = d.workers[0].program
    assert isinstance(outer, Loop) and outer.count == c.call.tiles_per_core
    # C accumulates in i32 (the C object and the worker's C_acc rows) and is converted to i16 once
    acq_c, zero, inner, convert, rel_c = outer.body
    assert isinstance(acq_c, Acquire) and isinstance(zero, Call) and zero.kernel == "zero_i32_i16"
    assert zero.args == ("C_L1L2_0_0", "C_acc_0_0")
    assert isinstance(inner, Loop) and inner.count == c.call.k_steps
    kinds = [type(op) for op in inner.body]
    assert kinds == [Acquire, Acquire, Call, Release, Release]
    assert inner.body[2].kernel == "matmul_i8_i32" and isinstance(rel_c, Release)
    assert isinstance(convert, Call) and convert.kernel == "convert_i32_i16"
    obj = d.kernel("matmul_i8_i32").object_file
    tile = f"{c.tiling.m}x{c.tiling.k}x{c.tiling.n}"
    assert obj == f"mm_{tile}_aie2p_i8_i16_acci32_bcol_8x8x8_coverlap.o"  # npu2 i8: c-overlap
    assert d.kernel("zero_i32_i16").object_file == obj
    # with C kept in i16 between calls: no accumulator, no conversion
    out = build_design(small("npu2", "i8", "i16", acc="out"))
    acq_c, zero, inner, rel_c = out.workers[0].program[0].body
    assert zero.kernel == "zero_i16" and inner.body[2].kernel == "matmul_i8_i16"
    assert out.kernel("matmul_i8_i16").object_file == f"mm_{tile}_aie2p_i8_i16_bcol_8x8x8_coverlap.o"
    # every build parameter that changes the code changes the object's name
    names = {build_design(small("npu2", "i8", "i16", **kw)).kernels[0].object_file
             for kw in ({}, {"b_col_maj": False}, {"shift": 2}, {"saturation": "symmetric"},
                        {"rounding": "floor"})}
    assert len(names) == 5


def _compose_a(c: GemmConfig, m_block: int, row: int) -> list[np.ndarray]:
    """Element-level walk of A through shim -> memtile -> core: the L1 tiles in arrival order."""
    stream = P.shim_a(grid(c, "A"), c.call.m_origin(m_block), row).indices()  # A element ids in DRAM order
    mt_obj = c.tiling.m * c.tiling.k_mt
    tiles = []
    for start in range(0, stream.size, mt_obj):
        memtile = np.empty(mt_obj, dtype=np.int64)
        memtile[P.a_l2_from_stream(grid(c, "A")).indices()] = stream[start:start + mt_obj]  # memtile S2MM
        out = memtile[P.a_l2_to_stream(grid(c, "A")).indices()]
        size = c.t_ma * c.tiling.k
        for q in range(out.size // size):
            l1 = np.empty(size, dtype=np.int64)
            l1[P.a_l1_from_stream(grid(c, "A")).indices()] = out[q * size:(q + 1) * size]
            tiles.append(l1)
    return tiles


@pytest.mark.parametrize("dev,t_in,t_out,rho", [("npu1", "bf16", "bf16", 1), ("npu2", "i8", "i8", 1),
                                                ("npu2", "bf16", "f32", 1), ("npu1", "i8", "i16", 3),
                                                ("npu2", "i8", "i32", 2)])
def test_a_reaches_the_kernel_layout(dev, t_in, t_out, rho):
    base = small(dev, t_in, t_out)
    c = small(dev, t_in, t_out, m=base.tiling.m * rho, M=2 * 4 * base.tiling.m * rho, rho=rho)
    tiles = _compose_a(c, m_block=1, row=2)
    assert len(tiles) == c.call.k_steps * rho  # per k-step, rho A tiles of T_MA rows
    for n_tile, l1 in enumerate(tiles):
        q, sl = divmod(n_tile, rho)  # k-step q, C slice sl
        logical = l1[a_layout(c.t_ma, c.tiling.k, c.kernel.mmul[0],
                              c.kernel.mmul[1])]  # what the kernel reads as A[i, j]
        i, j = np.indices((c.t_ma, c.tiling.k))
        first_row = (1 * c.array.rows + 2) * c.tiling.m + sl * c.t_ma
        assert np.array_equal(logical, (first_row + i) * c.call.k_walk + q * c.tiling.k + j)


@pytest.mark.parametrize("col_maj", [True, False])
def test_b_reaches_the_kernel_layout(col_maj):
    c = small("npu2", "i8", "i32", b_col_maj=col_maj)
    stream = P.shim_b(grid(c, "B"), c.call.n_origin(1), col=3).indices()
    obj = c.b_l2_k * c.tiling.n
    step = 0
    for start in range(0, stream.size, obj):
        out = stream[start:start + obj][P.b_l2_to_stream(grid(c, "B")).indices()]
        for q in range(c.b_l2_k // c.tiling.k):
            l1 = np.empty(c.tiling.k * c.tiling.n, dtype=np.int64)
            piece = out[q * c.tiling.k * c.tiling.n:(q + 1) * c.tiling.k * c.tiling.n]
            dims = P.b_l1_from_stream(grid(c, "B"))
            l1[dims.indices() if dims else np.arange(l1.size)] = piece
            logical = l1[b_layout(c.tiling.k, c.tiling.n, c.kernel.mmul[1], c.kernel.mmul[2], col_maj)]
            kk, jj = np.indices((c.tiling.k, c.tiling.n))
            col = (1 * c.array.cols + 3) * c.tiling.n + jj
            row = step * c.tiling.k + kk
            assert np.array_equal(logical, col * c.call.k_walk + row if col_maj else row * c.call.Np + col)
            step += 1
    assert step == c.call.k_steps


def test_c_leaves_the_kernel_layout_row_major():
    c = small("npu1", "bf16", "bf16")
    # the joined memtile object: rows tiles, each holding logical C positions in the kernel layout
    i, j = np.indices((c.tiling.m, c.tiling.n))
    obj = np.empty(c.array.rows * c.tiling.m * c.tiling.n, dtype=np.int64)
    for r in range(c.array.rows):
        tile = np.empty(c.tiling.m * c.tiling.n, dtype=np.int64)
        tile[c_layout(c.tiling.m, c.tiling.n, c.kernel.mmul[0],
                      c.kernel.mmul[2]).ravel()] = ((r * c.tiling.m + i) * c.call.Np + j).ravel()
        obj[r * c.tiling.m * c.tiling.n:(r + 1) * c.tiling.m * c.tiling.n] = tile
    per_slice = P.c_l2_to_stream(grid(c, "C")).indices()
    stream = np.concatenate([obj[r * c.tiling.m * c.tiling.n + per_slice] for r in range(c.array.rows)])
    dram = np.full(c.call.Mp * c.call.Np, -1)
    dram[P.shim_c(grid(c, "C"), 0, 0, 0).indices()] = stream
    written = dram >= 0
    assert np.array_equal(dram[written], np.flatnonzero(written))  # every element lands on itself


def test_runtime_queue():
    c = small("npu2", M=4 * 4 * 16, N=2 * 8 * 16)  # 4 x 2 = 8 task groups (m = 16, n = 16)
    d = build_design(c)
    groups = c.call.m_blocks * c.call.n_blocks
    assert groups == 8
    assert sum(1 for op in d.runtime if op.op == "finish") == groups
    peak = live_bds_per_shim(d)
    assert peak["shim(0,0)"] == 12 and peak["shim(1,0)"] == 8  # A+B+C x 4 groups; B+C x 4
    assert max(peak.values()) <= 16
    # each task is issued before its group is finished; groups are finished in order
    seen, finished = set(), []
    for op in d.runtime:
        if op.task is not None:
            assert op.group not in finished
            seen.add(op.group)
        else:
            assert op.group in seen
            finished.append(op.group)
    assert finished == list(range(groups))
    # the C drains cover C exactly once; only C tasks wait
    covered = np.zeros(c.call.Mp * c.call.Np, dtype=int)
    for t in d.tasks:
        assert t.wait == (t.tensor == "C")
        if t.tensor == "C":
            np.add.at(covered, t.tap.indices(), 1)
    assert (covered == 1).all()


def test_dram_traffic_matches_the_papers_equations():
    c = GemmConfig("npu1", 4224, 4032, 4224, 96, 56, 96, 224, "bf16", "bf16", True, acc="out")  # the paper's
    traffic = dram_bytes(build_design(c))
    M, K, N = c.call.covered
    assert traffic["A"] == M * K * N * 2 // (c.tiling.n * c.array.cols)  # eq. 6
    assert traffic["B"] == M * K * N * 2 // (c.tiling.m * c.array.rows)  # eq. 7
    assert traffic["C"] == M * N * 2  # eq. 8


def test_large_dimensions_fit_the_bd_fields():
    # 65536 in every dimension: strips and chunking keep every shim field in range
    for col_maj in (True, False):
        c = check_config(GemmConfig("npu2", 65536, 65536, 65536, 112, 48, 96, 384, "bf16", "bf16", col_maj, acc="out"))
        last_row, last_col = c.call.m_origin(c.call.m_blocks - 1), c.call.n_origin(c.call.n_blocks - 1)
        b = P.shim_b(grid(c, "B"), last_col, c.array.cols - 1)
        assert b.to_words(c.types.t_in).strides[0] <= 1 << 20
        cc = P.shim_c(grid(c, "C"), last_row, last_col, c.array.cols - 1)
        assert cc.count == c.array.rows * c.tiling.m * c.tiling.n


def test_generated_design_is_deterministic():
    c = small("npu2", "i8", "i8", b_col_maj=False)
    assert dumps(build_design(c)) == dumps(build_design(c))
    assert dumps(build_design(c)) != dumps(build_design(small("npu2", "i8", "i8", b_col_maj=True)))
