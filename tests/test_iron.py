"""The IRON lowering, checked against a recording stand-in that keeps IRON's signatures."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from gemm_gen.backends.iron import SHIM_TAP_DIMS, dims, lower, to_mlir
from gemm_gen.design import build_design
from gemm_gen.errors import ToolchainMissing

from . import iron_recorder
from .conftest import small


def lowered(c):
    api, rec = iron_recorder.api()
    design = build_design(c)
    text = str(lower(design, api).resolve_program())
    return design, rec, text


@pytest.mark.parametrize("dev,t_in,t_out,col_maj", [("npu1", "bf16", "bf16", True), ("npu2", "i8", "i16", False),
                                                    ("npu2", "bf16", "f32", True)])
def test_fifos_links_and_kernels(dev, t_in, t_out, col_maj):
    c = small(dev, t_in, t_out, col_maj)
    d, rec, _ = lowered(c)
    by_name = {f.name: f for f in rec.fifos}
    assert sorted(by_name) == sorted(f.name for f in d.fifos)  # one IRON fifo per Design fifo
    for f in d.fifos:
        of = by_name[f.name]
        shape, dt = iron_recorder.shape_dtype(of.obj_type)
        assert shape == f.obj_shape and of.depth == f.depth
        assert dt == {"bf16": "bfloat16", "i8": "int8", "i16": "int16", "i32": "int32", "f32": "float32"}[f.dtype]
        assert (of.dims_to_stream or None) == dims(f.dims_to_stream)
        assert (of.dims_from_stream_per_cons or None) == dims(f.dims_from_stream)
    # A and B forward on their memtile; C joins there with one offset per core row
    for lk in d.links:
        got = next(x for x in rec.links if x["dsts"] == list(lk.dsts) or x["srcs"] == list(lk.srcs))
        assert got["kind"] == lk.kind and got["offsets"] == list(lk.offsets)
        assert got["placement"] == iron_recorder.Tile(lk.tile.col, lk.tile.row)
    k = {x.name: x for x in rec.kernels}
    matmul = k[f"matmul_{t_in}_{t_out}"]
    assert matmul.object_file_name == d.kernels[1].object_file
    assert [iron_recorder.shape_dtype(t)[0] for t in matmul.arg_types] == [(c.m, c.k), (c.k, c.n), (c.m, c.n)]


def test_workers_trace_the_loop_ir():
    c = small("npu2", "i8", "i8", M=4 * 16 * 3)  # 3 output tiles per core, 4 k-steps
    d, rec, _ = lowered(c)
    assert len(rec.workers) == c.rows * c.cols
    w = next(w for w in rec.workers if w.placement == iron_recorder.Tile(3, 4))
    assert w.stack_size == c.stack_bytes
    a, b, cc = "A_L2L1_2", "B_L2L1_3", "C_L1L2_3_2"
    assert [op[0] if op[0] != "call" else op[1] for op in w.trace] == [
        "loop", "acquire", "zero_i8", "loop", "acquire", "acquire", "matmul_i8_i8", "release", "release",
        "end", "release", "end"]
    names = [op[1] for op in w.trace if op[0] in ("acquire", "release")]
    assert names == [cc, a, b, a, b, cc]
    loops = [op[1] for op in w.trace if op[0] == "loop"]
    assert loops == [c.tiles_per_core, c.k_steps]
    call = next(op for op in w.trace if op[0] == "call" and op[1].startswith("matmul"))
    assert call[2] == (f"<{a}>", f"<{b}>", f"<{cc}>")  # the acquired objects, in kernel order


def test_atb_worker_passes_the_c_slice_as_an_int32():
    """rho > 1: one B acquire per k-step around rho (acquire A, matmul(A, B, C, i), release A); the
    kernel is declared with IRON's scalar arg type np.int32 after its three buffers."""
    c = small("npu2", "i8", "i16", m=48, rho=3)
    d, rec, text = lowered(c)
    matmul = next(k for k in rec.kernels if k.name.startswith("matmul"))
    assert matmul.arg_types[-1] is np.int32 and len(matmul.arg_types) == 4
    assert [iron_recorder.shape_dtype(t)[0] for t in matmul.arg_types[:3]] == [(c.t_ma, c.k), (c.k, c.n), (c.m, c.n)]
    w = next(w for w in rec.workers if w.placement == iron_recorder.Tile(0, 2))
    calls = [op for op in w.trace if op[0] == "call" and op[1].startswith("matmul")]
    assert [op[2][-1] for op in calls] == [0, 1, 2]
    names = [op[1] for op in w.trace if op[0] in ("acquire", "release")]
    a, b = "A_L2L1_0", "B_L2L1_0"
    assert names[1:-1] == [b, *([a, a] * 3), b]
    assert "((), 'int32')" in text


def test_bfp16_design_types_blocks_and_passes_its_buffers():
    """config3 (bfp16 A, B, C accumulated in bf16): bfp16 objects are flat arrays of v8bfp16ebs8
    blocks (8 per Design tile), patterns and join offsets are scaled to blocks, and each worker
    passes its C acc Buffer (placed on its tile) to zero, matmul and convert."""
    from gemm_gen.config import GemmConfig

    c = GemmConfig("npu2", 1024, 512, 2048, 128, 64, 128, 128, rho=4, dtype_in="bfp16", dtype_out="bfp16",
                   acc="bf16")
    d, rec, text = lowered(c)
    by_name = {f.name: f for f in rec.fifos}
    a_l1 = by_name["A_L2L1_0"]
    assert iron_recorder.shape_dtype(a_l1.obj_type) == ((c.t_ma * c.k // 8,), "v8bfp16ebs8")
    a_l2 = by_name["A_L3L2_0"]  # A's memtile reorder for rho > 1, in blocks
    assert a_l2.dims_from_stream_per_cons == dims(d.fifo("A_L3L2_0").dims_from_stream, "bfp16")
    assert a_l2.dims_from_stream_per_cons[-1] == ((c.k // 8) * 8, 1)  # one k-row of tiles = k blocks
    join = next(x for x in rec.links if x["kind"] == "join")
    assert join["offsets"] == [row * c.m * c.n // 8 for row in range(c.rows)]  # blocks of C
    assert [(b.name, iron_recorder.shape_dtype(b.type)) for b in rec.buffers[:1]] == [
        ("C_acc_0_0", ((64, 128), "bfloat16"))]
    w = next(w for w in rec.workers if w.placement == iron_recorder.Tile(0, 2))
    calls = [op for op in w.trace if op[0] == "call"]
    assert [op[1] for op in calls][:2] == ["zero_bf16_bfp16", "matmul_bfp16_bf16"]
    assert calls[-1][1] == "convert_bf16_bfp16" and repr(calls[-1][2][1]) == "<buf C_acc_0_0>"
    assert calls[1][2][3] is calls[-1][2][1] and calls[1][2][-1] == 0  # matmul(A, B, C, acc, slice 0)
    assert "buffer C_acc_7_3 ((64, 128), 'bfloat16') at Tile(col=7, row=5)" in text
    # shim taps and host buffers in blocks: A is Mp x Kp values = Mp Kp / 8 blocks
    fill = next(op for op in _runtime(rec) if op[0] == "fill" and op[1] == "A_L3L2_0")
    assert fill[3].tensor_dims == (c.Mp * c.Kp // 8,) and fill[3].sizes[-1] % 8 == 0


def test_an_old_iron_without_buffer_or_block_types_says_so():
    """Wheels before IRON's Buffer / v8bfp16ebs8 still lower scalar designs; bfp16 ones stop with one
    sentence instead of an AttributeError."""
    from dataclasses import replace

    from gemm_gen.config import GemmConfig

    api, _ = iron_recorder.api()
    old = replace(api, Buffer=None, block_types={})
    lower(build_design(small("npu2", "i8", "i16")), old)
    c = GemmConfig("npu2", 512, 256, 1024, 64, 32, 64, 64, rho=2, dtype_in="bfp16", dtype_out="bfp16", acc="bf16")
    with pytest.raises(ToolchainMissing, match="no bfp16 element type"):
        lower(build_design(c), old)
    with pytest.raises(ToolchainMissing, match="has no Buffer"):
        lower(build_design(c), replace(api, Buffer=None))
    c1 = GemmConfig("npu2", 512, 256, 1024, 64, 32, 64, 64, rho=2, dtype_in="bf16", dtype_b="bf16", dtype_out="bf16",
                    emulate_bf16_with_bfp16=False, queue_groups=4)
    lower(build_design(c1), old)


def test_one_trip_loops_are_not_range_loops():
    # mlir-aie issue #1547: a single output tile per core is emitted without a loop
    c = small("npu1", M=4 * 8, N=4 * 8)
    assert c.tiles_per_core == 1
    _, rec, _ = lowered(c)
    assert [op[1] for op in rec.workers[0].trace if op[0] == "loop"] == [c.k_steps]


def test_runtime_tasks_and_task_groups():
    c = small("npu2", "bf16", "bf16", M=4 * 8 * 3, N=8 * 16 * 2)  # 6 task groups, 4 in flight
    d, rec, _ = lowered(c)
    tasks = d.tasks
    ops = [op for op in _runtime(rec) if op[0] in ("fill", "drain")]
    assert len(ops) == len(tasks)
    open_groups, most_open = set(), 0
    for op in _runtime(rec):
        if op[0] in ("fill", "drain"):
            open_groups.add(op[4])
            most_open = max(most_open, len(open_groups))
        elif op[0] == "finish":
            open_groups.discard(op[1])
    assert most_open == c.queue_groups and not open_groups
    for op, t in zip(ops, tasks):
        kind, fifo, buf, tap, group, wait, placement = op
        assert (kind, fifo, group, wait) == (t.direction, t.fifo, t.group, t.wait)
        assert buf == f"<arg{['A', 'B', 'C'].index(t.tensor)}>"
        assert placement == iron_recorder.Tile(t.shim.col, 0)
        # always 4 dims with a unit outer size: shim_dma_single_bd_task reads sizes[0] > 1 as a repeat
        assert len(tap.sizes) == SHIM_TAP_DIMS and tap.sizes[0] == 1
        assert tap.sizes[1:] == list(t.tap.sizes) and tap.strides[1:] == list(t.tap.strides)
        assert tap.offset == t.tap.offset


def _runtime(rec):
    # the Runtime object is reachable from the Program the lowering returned; keep the last one
    return _LAST_RT["rt"].ops


_LAST_RT: dict = {}


@pytest.fixture(autouse=True)
def _capture_runtime(monkeypatch):
    orig = iron_recorder.Runtime.__init__

    def init(self, *a, **k):
        orig(self, *a, **k)
        _LAST_RT["rt"] = self

    monkeypatch.setattr(iron_recorder.Runtime, "__init__", init)


def test_lowering_is_deterministic():
    c = small("npu2", "i8", "i32", b_col_maj=True)
    assert lowered(c)[2] == lowered(c)[2]
    assert lowered(c)[2] != lowered(small("npu2", "i8", "i32", b_col_maj=False))[2]


@pytest.mark.skipif(importlib.util.find_spec("aie") is not None, reason="mlir-aie is installed here")
def test_without_mlir_aie_one_sentence():
    with pytest.raises(ToolchainMissing, match=r"mlir-aie's IRON API cannot be imported .*pip install mlir_aie"):
        to_mlir(build_design(small("npu1")))
