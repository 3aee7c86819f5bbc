"""Design -> JSON (deterministic: the same Design always gives the same text)."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

from .ir import (
    Acquire,
    BarrierRelease,
    BarrierWait,
    Call,
    Design,
    KernelBuild,
    Loop,
    Op,
    Release,
    RuntimeCount,
    RuntimeOp,
    TileRef,
)
from .tap import Tap

# 2: call scalars, kernel scalar args, worker buffers; 3: the L1 plan; 4: runtime parameters (loop counts
# read from a buffer, rtp buffers, rtp writes), runtime_sizes, tensor slack; 5: runtime barriers (the
# workers' barrier, its wait and release, the sequence's sets)
FORMAT = "gemm_gen.design/5"


def _tile(t: TileRef) -> dict[str, Any]:
    return {"col": t.col, "row": t.row, "kind": t.kind.value}


def _tap(t: Tap | None) -> dict[str, Any] | None:
    return None if t is None else t.to_json()


def _word(x: int | RuntimeCount) -> int | dict[str, Any]:
    """A constant, or a word read from a runtime-parameter buffer."""
    return x if isinstance(x, int) else {"rtp": x.buffer, "index": x.index}


def _op(op: Op) -> dict[str, Any]:
    if isinstance(op, Loop):
        return {"op": "loop", "count": _word(op.count), "body": [_op(o) for o in op.body]}
    if isinstance(op, Acquire):
        return {"op": "acquire", "fifo": op.fifo, "count": op.count}
    if isinstance(op, Release):
        return {"op": "release", "fifo": op.fifo, "count": op.count}
    if isinstance(op, Call):
        return {"op": "call", "kernel": op.kernel, "args": list(op.args), "scalars": [_word(x) for x in op.scalars]}
    if isinstance(op, BarrierWait):
        return {"op": "barrier_wait", "value": op.value}
    if isinstance(op, BarrierRelease):
        return {"op": "barrier_release", "value": op.value}
    raise TypeError(op)


def _runtime_op(op: RuntimeOp) -> dict[str, Any]:
    if op.rtp is not None:
        return {"op": "rtp", "tile": _tile(op.rtp.tile), "buffer": op.rtp.buffer, "index": op.rtp.index,
                "value": op.rtp.value}
    if op.barrier is not None:
        return {"op": "barrier", "tile": _tile(op.barrier.tile), "barrier": op.barrier.barrier,
                "value": op.barrier.value}
    if op.task is None:
        return {"op": "finish", "group": op.group}
    return {"op": "task", "group": op.group, "name": op.task.name, "direction": op.task.direction,
            "fifo": op.task.fifo, "tensor": op.task.tensor, "shim": _tile(op.task.shim), "tap": _tap(op.task.tap),
            "wait": op.task.wait}


def _build(b: KernelBuild) -> dict[str, Any]:
    """A kernel build's fields; the epilogue only when there is one, so epilogue-free designs keep their text."""
    t = b.types  # written where the four type fields stood: A's and C's after the target, B's and C's L1 type
    # (None: A's, C's own) after rho, so the design text stays what it was
    out: dict[str, Any] = {}
    for f in fields(b):
        value = getattr(b, f.name)
        if f.name not in ("types", "epilogue"):
            out[f.name] = list(value) if isinstance(value, tuple) else value
        if f.name == "aie_target":
            out.update(dtype_in=t.dtype_in, dtype_out=t.dtype_out)
        if f.name == "rho":
            out.update(dtype_b=None if t.dtype_b == t.dtype_in else t.dtype_b,
                       acc=None if t.acc == t.dtype_out else t.acc)
    return out if b.epilogue.is_identity else {**out, "epilogue": b.epilogue.to_json()}


def design_to_json(d: Design) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "config": d.config.to_json(),
        "derived": {"padded": list(d.config.call.covered), "native": list(d.config.native),
                    "mmul": list(d.config.kernel.mmul)},
        "tensors": [{"name": t.name, "shape": list(t.shape), "dtype": t.dtype, "slack": t.slack} for t in d.tensors],
        "fifos": [
            {"name": f.name, "dtype": f.dtype, "obj_shape": list(f.obj_shape), "depth": f.depth,
             "producer": _tile(f.producer), "consumers": [_tile(t) for t in f.consumers],
             "dims_to_stream": _tap(f.dims_to_stream), "dims_from_stream": _tap(f.dims_from_stream)}
            for f in d.fifos
        ],
        "links": [
            {"kind": lk.kind, "tile": _tile(lk.tile), "srcs": list(lk.srcs), "dsts": list(lk.dsts),
             "offsets": list(lk.offsets)}
            for lk in d.links
        ],
        "kernels": [
            {"name": k.name, "role": k.role, "object_file": k.object_file,
             "build": _build(k.build),
             "arg_shapes": [list(s) for s in k.arg_shapes], "arg_dtypes": list(k.arg_dtypes),
             "scalar_args": list(k.scalar_args)}
            for k in d.kernels
        ],
        "workers": [
            {"tile": _tile(wk.tile), "program": [_op(o) for o in wk.program], "kernels": list(wk.kernels),
             "stack_bytes": wk.stack_bytes,
             "buffers": [{"name": b.name, "shape": list(b.shape), "dtype": b.dtype, "address": b.address,
                          "mem_bank": b.mem_bank, "rtp": b.rtp} for b in wk.buffers],
             "allocation_scheme": wk.allocation_scheme, "barrier": wk.barrier}
            for wk in d.workers
        ],
        "memtile_buffers": [b.__dict__ for b in d.memtile_buffers],
        "l1": None if d.l1 is None else {
            **d.l1.summary(), "reserved": [list(r) for r in d.l1.reserved],
            "predicted_addresses": {p.buffer.name: p.address for p in d.l1.placed if p.buffer.role != "reserve"}},
        "runtime": [_runtime_op(op) for op in d.runtime],
    }


def dumps(d: Design) -> str:
    return json.dumps(design_to_json(d), indent=1, sort_keys=False) + "\n"
