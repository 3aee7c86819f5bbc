"""The price of each layout (issue 23 item 2 of the model): the kernel's transposes for column-major
A and a narrow column-major C (uncalibrated, from their operation count), each layout of a tiling
priced (model/layouts.py: another xclbin, or this one with C stored by the shim), predict and plan
saying so, and every row-major and B column-major price and tuner choice untouched."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemm_gen.app.cli import main
from gemm_gen.facts.devices import device
from gemm_gen.model import kernel as kmod
from gemm_gen.model.layouts import OTHER_XCLBIN, SAME_XCLBIN, THIS, cheapest, layout_prices
from gemm_gen.model.params import load
from gemm_gen.model.perf import Workload
from gemm_gen.search.tune import tune
from gemm_gen.spec.config import GemmConfig
from gemm_gen.spec.rules import kernel_variant as kv

P = load()


def _shape(dev: str, t_in: str, t_out: str, **kw: object) -> kmod.KernelShape:
    d = device(dev)
    return kmod.kernel_shape(d, t_in, t_out, d.mmul_shape(t_in, False), False, **kw)  # type: ignore[arg-type]


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([("npu1", "i8", "i32"), ("npu2", "i8", "i8"), ("npu1", "i16", "i32"), ("npu2", "bf16", "bf16"),
                        ("npu1", "bf16", "f32")]),
       st.sampled_from([(32, 64, 32), (64, 64, 64), (16, 128, 64), (64, 32, 128)]))
def test_the_kernels_transposes_are_charged_by_their_operation_count(types, tile):
    dev, t_in, t_out = types
    row = _shape(dev, t_in, t_out)
    m, k, n = tile
    base = kmod.kernel_cycles(P, row, np.int64(m), np.int64(k), np.int64(n))
    a_col = kmod.kernel_cycles(P, replace(row, a_col_maj=True), np.int64(m), np.int64(k), np.int64(n))
    c_col = kmod.kernel_cycles(P, replace(row, c_transposed=True), np.int64(m), np.int64(k), np.int64(n))
    assert a_col > base and c_col > base  # both transposes cost cycles (removing the charge fails this)
    r, s, t = row.mmul
    for er, et in kv.expansions(row.dev, t_in, row.mmul):
        terms = kmod.cluster_terms(P, replace(row, a_col_maj=True, c_transposed=True), (er, et))
        assert terms["a_transposes"] == er * -(-r * s * _bytes(t_in) // 64)  # a shuffle per 64-byte register
        assert terms["c_transposes"] == 2 * er * et * -(-r * t * _bytes(t_out) // 64)
        plain = kmod.cluster_terms(P, row, (er, et))
        assert plain["a_transposes"] == plain["c_transposes"] == 0


def _bytes(t: str) -> int:
    from gemm_gen.facts.dtypes import dtype
    return dtype(t).bytes


def test_only_column_major_a_and_a_narrow_c_kept_in_its_type_reach_the_kernel_model():
    def ks(**kw: object) -> kmod.KernelShape:
        return Workload.new("npu2", 512, 512, 512, "bf16", "bf16", **kw).kernel_shape  # type: ignore[arg-type]
    assert not ks().a_col_maj and not ks().c_transposed and not ks(b_col_maj=True).a_col_maj
    assert ks(a_col_maj=True).a_col_maj
    assert not ks(c_col_maj=True).c_transposed  # bf16 C from an f32 accumulator: transposed once per tile
    assert ks(c_col_maj=True, acc="bf16").c_transposed  # kept in bf16 between calls: every call
    assert not Workload.new("npu2", 512, 512, 512, "i8", "i32", c_col_maj=True).kernel_shape.c_transposed


@pytest.mark.parametrize("dev,t_in,t_out,col", [("npu1", "i8", "i32", False), ("npu2", "bf16", "bf16", True),
                                                ("npu2", "i8", "i8", True)])
def test_row_major_and_b_column_major_choices_do_not_see_the_transposes(monkeypatch, dev, t_in, t_out, col):
    pr = Workload.new(dev, 1024, 1024, 1024, t_in, t_out, col)
    with_charge = tune(pr, 1).best
    monkeypatch.setattr(kmod, "transpose_shuffles", lambda ks, er: (0.0, 0.0))
    without = tune(pr, 1).best
    assert with_charge.config == without.config and with_charge.time_s == without.time_s


def test_column_major_a_is_priced_slower_in_the_core_than_row_major():
    pr = Workload.new("npu2", 1024, 1024, 1024, "bf16", "bf16", True, a_col_maj=True)
    best = tune(pr, 1).best
    c = best.config
    row_kernel = kmod.kernel_cycles(P, replace(Workload.of(c).kernel_shape, a_col_maj=False),
                                          np.int64(c.t_ma), np.int64(c.tiling.k), np.int64(c.tiling.n))
    assert float(kmod.kernel_cycles(P, Workload.of(c).kernel_shape, np.int64(c.t_ma), np.int64(c.tiling.k),
                                    np.int64(c.tiling.n))) > float(row_kernel)


def test_each_layout_of_a_tiling_is_priced_and_a_32_bit_c_twice():
    c = GemmConfig("npu1", 512, 256, 512, 32, 32, 32, 64, "i8", "i32")
    prices = layout_prices(c, P)
    assert [(str(x.layouts), x.xclbin) for x in prices] == [
        ("rrr", THIS), ("crr", OTHER_XCLBIN), ("rcr", OTHER_XCLBIN), ("rrc", SAME_XCLBIN), ("rrc", OTHER_XCLBIN)]
    own, a_col, _, shim_c, built_c = prices
    assert own.a_transposes_per_round == 0 and a_col.a_transposes_per_round > 0
    assert shim_c.dram_run_bytes["C"] == 4  # one i32 per DRAM run: the shim's element-by-element drain
    assert built_c.dram_run_bytes["C"] == 4 * c.tiling.m  # runs of m down C^T's rows
    assert shim_c.time_s > built_c.time_s and shim_c.time_s > own.time_s
    assert cheapest(prices).time_s == min(x.time_s for x in prices if x.time_s is not None)


def test_a_layout_the_tiling_cannot_be_built_in_says_why():
    c = GemmConfig("npu2", 256, 256, 256, 32, 64, 32, 64, "bfp16", "bfp16")
    prices = {str(x.layouts): x for x in layout_prices(c, P)}
    assert prices["crr"].time_s is None and "--a-col-maj with bfp16 A" in (prices["crr"].refused or "")
    assert prices["rrr"].time_s is not None


def test_predict_and_plan_show_the_layouts_prices(capsys):
    args = ["--dev", "npu1", "-M", "512", "-K", "256", "-N", "512", "--dtype_in", "i8", "--dtype_out", "i32",
            "-m", "32", "-k", "32", "-n", "32", "--k-mt", "64", "--a-col-maj"]
    assert main(["predict", *args, "--json"]) == 0
    priced = json.loads(capsys.readouterr().out)["layouts_priced"]
    assert priced[0]["layouts"] == "crr" and priced[0]["kernel_transposes"]["calibrated"] is False
    assert {p["layouts"] for p in priced} == {"crr", "rrr", "ccr", "crc"}
    assert main(["predict", *args]) == 0
    text = capsys.readouterr().out
    assert "uncalibrated" in text and "crr  " in text and "this xclbin, C stored by the shim" in text
    assert main(["plan", *args]) == 0
    line = [x for x in capsys.readouterr().out.splitlines() if x.startswith("layouts")][0]
    assert "this design (crr)" in line and "all row-major rrr" in line
    assert main(["plan", *args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["layouts_priced"][0]["xclbin"] == THIS


def test_a_design_past_its_l1_budget_is_priced_and_its_alternatives_refused():
    """As predict does, the design asked about is priced as if it fitted; another layout of it is
    refused with the budget's one line, and cheapest() then names the design itself."""
    from gemm_gen.design.serve import check
    from gemm_gen.facts.errors import ConfigError

    c = GemmConfig("npu2", 384, 384, 768, 96, 96, 96, 96, "i8", "i32")
    with pytest.raises(ConfigError):
        check(c)
    prices = layout_prices(c, P)
    assert prices[0].xclbin == THIS and prices[0].time_s is not None
    assert all(x.time_s is None and x.refused for x in prices if x.xclbin == OTHER_XCLBIN)
    assert cheapest(prices) is prices[0] and cheapest(()) is None
