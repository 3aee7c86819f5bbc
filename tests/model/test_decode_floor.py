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
from gemm_gen.spec.config import GemmConfig
from gemm_gen.spec.request import Options, Problem, Request

KINDS = {"bf16": ("bf16", None, "bf16", 0), "i8": ("i8", None, "i32", 0), "i8 x i4": ("i8", "i4", "i32", 0),
         "W4A16": ("bf16", "i4", "bf16", 128)}


def beats_no_floor(c: GemmConfig, group_size: int = 0) -> tuple[float, float]:
    """(predicted, floor) seconds of a design, its B streams being its columns."""
    floor = floor_s(c.array.device, Problem(c.size.M, c.size.K, c.size.N), c.types.dtype_in, str(c.types.dtype_b),
                    c.types.dtype_out, c.array.cols,
                    build_design(c).tasks_per_group, group_size=group_size, zero_points=bool(c.groups.zero_points))
    return predict(c).time_s, floor


@pytest.mark.parametrize("dev,cols", [("npu1", 2), ("npu1", 4), ("npu2", 2), ("npu2", 8)])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_no_decode_design_beats_the_floor(dev: str, cols: int, kind: str) -> None:
    a, b, out, g = KINDS[kind]
    size = Problem(1, 4096, 4096)
    c = choose(Request(Options(dev, a, out, dtype_b=b, rows=1, cols=cols, group_size=g), size)).config
    predicted, floor = beats_no_floor(c, g)
    assert predicted >= floor * (1 - 1e-9)
    assert predicted <= 2 * floor  # a bound that says something: the decode calls are near it


@pytest.mark.parametrize("options", [{"task_span": 1, "queue_groups": 1}, {"task_span": 0, "queue_groups": 1},
                                     {"runtime_sizes": "mnk"}, {"b_col_maj": True, "queue_groups": 2, "k_mt": 256}])
def test_nor_does_a_design_with_its_groups_waiting_or_runtime_sizes(options: dict[str, object]) -> None:
    """The floor charges the first group's setup once: designs whose every group waits for its setup,
    or that write runtime parameters first, only add to it."""
    for dev, tiles in (("npu1", (8, 8, 64, 1024)), ("npu2", (16, 8, 256, 1024))):
        c = GemmConfig(dev, 1, 2048, 8192, *tiles, "bf16", "bf16", rows=1).with_(**options)
        predicted, floor = beats_no_floor(c)
        assert predicted >= floor * (1 - 1e-9), (dev, options)


def test_the_floor_moves_with_each_of_its_terms() -> None:
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
