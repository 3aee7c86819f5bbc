"""model/roof.floor_s: no design the model prices beats the bound it states (dispatch, the first task
group's setup, and the longest of the DRAM roof and B over its streams), so the bound that
docs/int4_decode.md section 12 reasons with is the model's own."""

from __future__ import annotations

import pytest

from gemm_gen.design import build_design
from gemm_gen.model.params import load
from gemm_gen.model.predict import predict
from gemm_gen.model.roof import floor_s
from gemm_gen.search import choose
from gemm_gen.spec import Options, Problem, Request

KINDS = {"bf16": ("bf16", None, "bf16", 0), "i8": ("i8", None, "i32", 0), "i8 x i4": ("i8", "i4", "i32", 0),
         "W4A16": ("bf16", "i4", "bf16", 128)}


def first_group_tasks(c) -> int:
    return sum(1 for op in build_design(c).runtime if op.task is not None and op.group == 0)


@pytest.mark.parametrize("dev,cols", [("npu1", 2), ("npu1", 4), ("npu2", 2), ("npu2", 8)])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_no_decode_design_beats_the_floor(dev, cols, kind):
    a, b, out, g = KINDS[kind]
    size = Problem(1, 4096, 4096)
    c = choose(Request(Options(dev, a, out, dtype_b=b, rows=1, cols=cols, group_size=g), size)).config
    tasks = first_group_tasks(c)
    floor = floor_s(dev, size, a, b or a, out, cols, tasks, group_size=g)
    predicted = predict(c).time_s
    assert predicted >= floor * (1 - 1e-9)
    assert predicted <= 2 * floor  # a bound that says something: the decode calls are near it


def test_the_floor_moves_with_each_of_its_terms():
    size = Problem(1, 4096, 4096)
    p = load()
    base = floor_s("npu2", size, "bf16", "bf16", "bf16", 8, 17, p)
    assert floor_s("npu2", size, "bf16", "bf16", "bf16", 8, 18, p) == pytest.approx(base + p.bd_task_us * 1e-6)
    assert floor_s("npu2", size, "bf16", "bf16", "bf16", 8, 17, p.with_(dispatch_us=p.dispatch_us + 10)) == \
        pytest.approx(base + 10e-6)
    # 8 streams: B over its streams binds (6.32 GB/s each); 16: the DRAM roof does
    assert floor_s("npu2", size, "bf16", "bf16", "bf16", 16, 17, p) == pytest.approx(
        (p.dispatch_us + 17 * p.bd_task_us) * 1e-6 + 2 * (4096 + 4096 * 4096 + 4096) / (p.dram["npu2"].peak_gbps * 1e9))
    fast = p.with_dram("npu2", stream_gbps_256=100.0)  # then the stream port (4 bytes a cycle) binds
    port = floor_s("npu2", size, "bf16", "bf16", "bf16", 1, 17, fast)
    assert port == pytest.approx((p.dispatch_us + 17 * p.bd_task_us) * 1e-6 + 4096 * 4096 * 2 / (4 * 1.8e9), rel=1e-3)
