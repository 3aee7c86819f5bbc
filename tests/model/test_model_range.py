"""Every prediction comes with a range: the model at the pessimistic and optimistic ends of the
constants that the sources or a leave-one-out refit leave loose (issue 9, item 5)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gemm_gen.app.cli import main
from gemm_gen.app.plots import sweep
from gemm_gen.model.params import SLOWER_WHEN_LARGER, ends, load, raw
from gemm_gen.model.perf import Workload
from gemm_gen.search.tune import tune

from ..conftest import small


def _spread_entries(node, name=""):
    if isinstance(node, dict) and "value" in node:
        if node.get("spread"):
            yield name, node
        return
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _spread_entries(v, k)


def test_the_loose_constants_have_sourced_spreads_around_their_value():
    entries = list(_spread_entries(raw()))
    names = {n for n, _ in entries}
    assert {"peak_gbps", "dispatch_us", "lockstep_page_sharing", "stream_gbps_at_256_byte_bursts"} <= names
    for name, e in entries:
        lo, hi = e["spread"]
        assert lo <= e["value"] <= hi and lo < hi and e["spread_source"], name


def test_the_ends_put_each_constant_where_it_costs_most_and_least():
    data = raw()
    slow, fast = ends(data)
    assert slow.dispatch_us == max(data["runtime"]["dispatch_us"]["spread"]) and "dispatch_us" in SLOWER_WHEN_LARGER
    assert fast.dispatch_us == min(data["runtime"]["dispatch_us"]["spread"])
    assert slow.dram["npu2"].peak_gbps == 50.6 and fast.dram["npu2"].peak_gbps == 66.6  # the Strix laptop's
    assert slow.on_machine("npu2", "krackan-minipc").dram["npu2"].peak_gbps == 50.0
    assert slow.dram["npu2"].page_sharing <= load().dram["npu2"].page_sharing <= fast.dram["npu2"].page_sharing
    assert slow.dram["npu2"].stream_gbps_256 < fast.dram["npu2"].stream_gbps_256
    assert slow.bd_task_us == fast.bd_task_us == load().bd_task_us  # no spread: not loose


@pytest.mark.parametrize("args", [
    ["--dev", "npu2", "-M", "4096", "-K", "4096", "-N", "4096", "--dtype_in", "i8", "--dtype_out", "i8"],
    ["--dev", "npu2", "-M", "256", "-K", "256", "-N", "256", "--dtype_in", "bf16"],
    ["--dev", "npu1", "-M", "2048", "-K", "1024", "-N", "512", "--dtype_in", "i8", "--dtype_out", "i16"],
])
def test_predict_reports_a_range_around_each_prediction(capsys, args):
    assert main(["predict", *args, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["tops_low"] <= d["tops"] <= d["tops_high"]
    if args[1] == "npu2":  # the npu2 bandwidth is loose: the range is not empty
        assert d["tops_low"] < d["tops_high"]
    assert main(["predict", *args]) == 0
    assert "over the constants' spreads" in capsys.readouterr().out


def test_a_users_bandwidth_is_not_uncertain(capsys):
    base = ["predict", "--dev", "npu2", "-M", "1024", "-K", "1024", "-N", "1024", "--dtype_in", "i8",
            "--dtype_out", "i8", "--json"]
    assert main(base) == 0
    wide = json.loads(capsys.readouterr().out)
    assert main(base + ["--dram-gbps", "65"]) == 0
    narrow = json.loads(capsys.readouterr().out)
    assert narrow["tops"] == pytest.approx(wide["tops"])
    assert narrow["tops_high"] - narrow["tops_low"] < wide["tops_high"] - wide["tops_low"]


def test_rank_pessimistic_puts_the_best_worst_case_first():
    pr = Workload.new("npu2", 4096, 4096, 4096, "i8", "i8")
    model = tune(pr, 5)
    pessimistic = tune(pr, 5, rank="pessimistic")
    lows = [c.tops_low for c in pessimistic.top]
    assert lows == sorted(lows, reverse=True)
    assert pessimistic.best.tops_low >= model.best.tops_low
    assert all(c.tops_low <= c.tops <= c.tops_high for c in model.top + pessimistic.top)


def test_tune_json_and_text_carry_the_range(capsys):
    args = ["tune", "--dev", "npu2", "-M", "512", "-K", "512", "-N", "512", "--dtype_in", "i8", "--dtype_out", "i8"]
    assert main(args + ["--json", "--rank", "pessimistic"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["ranked_by"] == "pessimistic" and all("tops_low" in c and "tops_high" in c for c in d["top"])
    assert main(args) == 0
    assert "range" in capsys.readouterr().out


def test_the_roofline_sweep_has_the_band():
    data = sweep(small("npu2", "i8", "i8"), max_size=1024, points=20)
    assert np.all(data["tops_low"] <= data["tops"] * (1 + 1e-12))
    assert np.all(data["tops"] <= data["tops_high"] * (1 + 1e-12))
