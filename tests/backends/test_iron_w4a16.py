"""The IRON lowering of a W4A16 design (issue 22 item 1b), against the strict stand-in of mlir-aie 1.4.3's IRON
(tests/iron_recorder.py): B objects as flat uint8 of groupquant.object_bytes, one core-local bf16 Buffer per
Worker (the Design's B_deq_<col>_<row>) passed as the matmul's last buffer argument, before the int32 slice,
the kernel declared to match (npu2's emulated kernel, npu1's); npu2's default convert-once kernel dequantizes
into its B_bfp16 Buffer instead; the memtile forwards whole objects linearly."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gemm_gen.backends.iron import lower
from gemm_gen.design import build_design
from gemm_gen.design.ir import Call, Loop
from gemm_gen.facts import groupquant
from gemm_gen.spec.config import GemmConfig

from .. import iron_recorder
from ..iron_recorder import shape_dtype


def w4a16(dev: str = "npu2", rho: int = 1, zp: bool = False, g: int = 128, k: int = 128, k_mt: int = 128,
          once: bool = False) -> GemmConfig:
    """A W4A16 design; on npu2 with the emulated kernel (its bf16 scratch) unless `once` (npu2's default, the
    convert-once kernel)."""
    return GemmConfig(dev, 256, 512, 256, 32 * rho, k, 32, k_mt, "bf16", "bf16", dtype_b="i4", group_size=g,
                      zero_points=zp, rho=rho, convert_once=once)


def lowered(design, api=None):
    fresh, rec = iron_recorder.api()
    program = lower(design, api or fresh)
    program.resolve_program()
    return program, rec


@pytest.mark.parametrize("rho, zp, g, k", [(1, False, 128, 128), (2, True, 64, 128), (1, False, 128, 64)])
def test_b_objects_are_bytes_and_the_matmul_takes_its_bf16_tile_last_of_its_buffers(rho, zp, g, k):
    c = w4a16(rho=rho, zp=zp, g=g, k=k, k_mt=k)
    design = build_design(c)
    program, rec = lowered(design)
    obj = groupquant.ObjectLayout(k, c.tiling.n, g, zp).nbytes
    b_fifos = [f for f in rec.fifos if f.name.startswith("B_")]
    assert b_fifos and all(shape_dtype(f.obj_type) == ((obj,), "uint8") for f in b_fifos)
    (matmul,) = [kn for kn in rec.kernels if kn.name.startswith("matmul")]
    types = [shape_dtype(t) for t in matmul.arg_types]
    assert types[1] == ((obj,), "uint8")
    deq_at = -2 if rho > 1 else -1  # the last buffer, before the int32 C slice when rho > 1
    assert types[deq_at] == ((k, c.tiling.n), "bfloat16")
    assert (types[-1] == ((), "int32")) == (rho > 1)
    deq = {b.name: b for b in rec.buffers if b.name.startswith("B_deq_")}
    assert len(deq) == len(design.workers)
    for w, wk in zip(program.workers, design.workers):
        (name,) = [b.name for b in wk.buffers if b.name.startswith("B_deq_")]
        buf = deq[name]
        assert (buf.tile.col, buf.tile.row) == (wk.tile.col, wk.tile.row)  # core-local: on the worker's tile
        calls = [op for op in w.trace if op[0] == "call" and op[1] == matmul.name]
        assert calls and all(op[2][deq_at] is buf for op in calls)
    # the other kernels keep their signatures
    others = [kn for kn in rec.kernels if kn is not matmul]
    assert others and all(((k, c.tiling.n), "bfloat16") not in [shape_dtype(t) for t in kn.arg_types] for kn in others)


@pytest.mark.parametrize("rho, zp", [(1, False), (2, True)])
def test_converting_once_b_objects_are_bytes_and_dequantize_into_the_b_bfp16_buffer(rho, zp):
    """npu2's default W4A16 kernel: B objects as uint8, the matmul's buffers A, B, C, A_bfp16, B_bfp16, C_acc (the
    convert-once kernel's, each core-local, the B object dequantized into B_bfp16), no bf16 scratch."""
    c = w4a16(rho=rho, zp=zp, once=True)
    design = build_design(c)
    program, rec = lowered(design)
    obj = groupquant.ObjectLayout(c.tiling.k, c.tiling.n, c.groups.group_size, zp).nbytes
    (matmul,) = [kn for kn in rec.kernels if kn.name.startswith("matmul")]
    types = [shape_dtype(t) for t in matmul.arg_types]
    bfp16 = "v8bfp16ebs8"
    assert types[1] == ((obj,), "uint8") and types[3] == ((c.t_ma * c.tiling.k // 8,), bfp16)
    assert types[4] == ((c.tiling.k * c.tiling.n // 8,), bfp16) and (types[-1] == ((), "int32")) == (rho > 1)
    assert not [b for b in rec.buffers if b.name.startswith("B_deq_")]
    scratch = {b.name: b for b in rec.buffers if b.name.startswith("B_bfp16_")}
    assert len(scratch) == len(design.workers)
    for w, wk in zip(program.workers, design.workers):
        (name,) = [b.name for b in wk.buffers if b.name.startswith("B_bfp16_")]
        buf = scratch[name]
        assert (buf.tile.col, buf.tile.row) == (wk.tile.col, wk.tile.row)
        calls = [op for op in w.trace if op[0] == "call" and op[1] == matmul.name]
        assert calls and all(op[2][4] is buf for op in calls)


def test_without_group_scales_nothing_changes():
    c = GemmConfig("npu2", 256, 512, 256, 32, 128, 32, 128, "i8", "i8", dtype_b="i4")
    _, rec = lowered(build_design(c))
    assert not [b for b in rec.buffers if b.name.startswith("B_deq_")]
    b_fifos = [f for f in rec.fifos if f.name.startswith("B_")]
    assert all(shape_dtype(f.obj_type) == ((128 * 32 // 2,), "uint8") for f in b_fifos)


def test_the_memtile_forwards_whole_objects_linearly():
    c = w4a16(zp=True)
    _, rec = lowered(build_design(c))
    obj = groupquant.object_bytes(c.tiling.k, c.tiling.n, c.groups.group_size, True)
    bds = [(kind, length, dims) for where, kind, ty, n, length, dims in iron_recorder.fifo_bds()
           if "B_" in str(where)]
    assert bds and all(dims in (None, []) for _, _, dims in bds)
    assert {length for _, length, _ in bds} == {int(obj)}


# ---- the stand-in refuses what 1.4.3 refuses of the scratch: each mutant breaks one rule ----------------------
def _mutant(design, matmul_args=None, arg_dtype=None):
    """The design with its matmul calls' arguments, or the declared dtype of its last buffer argument, changed."""
    def call(op):
        if isinstance(op, Loop):
            return replace(op, body=tuple(call(o) for o in op.body))
        if isinstance(op, Call) and op.kernel.startswith("matmul") and matmul_args:
            return replace(op, args=matmul_args(op.args))
        return op
    workers = tuple(replace(w, program=tuple(call(o) for o in w.program)) for w in design.workers)
    kernels = tuple(replace(k, arg_dtypes=(*k.arg_dtypes[:-1], arg_dtype)) if arg_dtype and k.role == "matmul"
                    else k for k in design.kernels)
    return replace(design, workers=workers, kernels=kernels)


def test_a_matmul_call_without_the_tile_is_refused():
    with pytest.raises(ValueError, match="expects 5 argument"):
        lowered(_mutant(build_design(w4a16()), matmul_args=lambda args: args[:-1]))


def test_a_tile_declared_with_another_type_is_refused():
    with pytest.raises(ValueError, match="operand type mismatch"):
        lowered(_mutant(build_design(w4a16()), arg_dtype="f32"))


def test_one_untiled_tile_shared_by_workers_is_refused():
    fresh, _ = iron_recorder.api()
    shared: dict[str, object] = {}
    real_buffer = fresh.Buffer

    def one_buffer(**kw):
        if kw["name"].startswith("B_deq_"):
            kw = {**kw, "tile": None, "name": "B_deq"}
            return shared.setdefault("b", real_buffer(**kw))
        return real_buffer(**kw)

    with pytest.raises(ValueError, match="shared across Workers"):
        lowered(build_design(w4a16()), replace(fresh, Buffer=one_buffer))
