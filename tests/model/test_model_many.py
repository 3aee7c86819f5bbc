"""One design for many sizes in the model: the runtime-parameter writes, whole blocks for small
calls, and the tuner over a list of sizes (gemm_gen/search/tune_many.py). Every time is predicted."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from gemm_gen.app.cli import main
from gemm_gen.design.serve import check, serve
from gemm_gen.facts.errors import GemmGenError
from gemm_gen.model.params import load
from gemm_gen.model.perf import Workload, estimate, estimate_config
from gemm_gen.search.tune_many import tune_many
from gemm_gen.spec.call import parse_sizes
from gemm_gen.spec.request import Problem
from gemm_gen.spec.rules.l1 import runtime_writes

from ..conftest import small

SIZES = parse_sizes("1000x777x333,64x4096x512,2048x1024x2048")


def _base(dev: str = "npu2", t_in: str = "i8", t_out: str = "i32"):
    top = tuple(max(getattr(s, d) for s in SIZES) for d in "MKN")
    return replace(small(dev, t_in, t_out), M=top[0], K=top[1], N=top[2], m=0, k=0, n=0, k_mt=0, runtime_sizes="mnk")


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_a_design_with_runtime_k_pays_its_write32s_per_core_each_call(dev):
    """Two parameter words (k-steps, tiles) and the barrier's set: three write32s per core and call."""
    c = small(dev, "i8", "i32")
    p = load()
    fixed = float(estimate_config(c, p).time)
    mnk = float(estimate_config(replace(c, runtime_sizes="mnk"), p).time)
    mn = float(estimate_config(replace(c, runtime_sizes="mn"), p).time)
    cores = c.array.rows * c.array.cols
    assert runtime_writes("mnk", False) == 3
    assert mnk - fixed == pytest.approx(3 * cores * p.rtp_write_us * 1e-6, rel=1e-9)
    assert mn == fixed  # cores that loop while data comes read no parameter
    assert (mnk - fixed) * 1e6 == pytest.approx(6.336 if dev == "npu2" else 3.168)  # 66 ns per core-write32


def test_a_small_call_pays_for_whole_blocks():
    """A call smaller than one block computes the block (its junk rows read slack): its core time is
    the whole block's, and its throughput falls with the share of useful rows."""
    c = small("npu2", "i8", "i32")
    rows = c.tiling.m * c.array.rows
    p = load()
    one = estimate(Workload.of(c, Problem(1, c.size.K, c.size.N)), c.tiling.m, c.tiling.k, c.tiling.n, c.tiling.k_mt, p,
                   rho=c.tiling.rho)
    full = estimate(Workload.of(c, Problem(rows, c.size.K, c.size.N)), c.tiling.m, c.tiling.k, c.tiling.n,
                    c.tiling.k_mt, p, rho=c.tiling.rho)
    assert float(one.t_core) == float(full.t_core)
    assert float(one.tops) * rows == pytest.approx(float(full.tops), rel=0.05)


def test_tune_many_picks_the_least_weighted_time_among_designs_that_serve_every_size():
    base = _base()
    p = load()
    r = tune_many(base, SIZES)
    c = r.config
    assert (c.size.M, c.size.K, c.size.N, c.runtime.runtime_sizes) == (base.size.M, base.size.K, base.size.N, "mnk")
    for s in SIZES:
        serve(c, s)  # the winner serves every size

    def total(cf):
        t = cf.tiling
        return sum(float(estimate(Workload.of(cf, s), t.m, t.k, t.n, t.k_mt, p, rho=t.rho).time) for s in SIZES)

    compared = 0
    for s in r.sizes:  # each size's own design, built for the maxima instead, never beats the winner overall
        assert s.special is not None and s.special_s is not None
        own = replace(s.special, M=c.size.M, K=c.size.K, N=c.size.N, runtime_sizes="mnk")
        try:
            check(own)
            for size in SIZES:
                serve(own, size)
        except GemmGenError:
            continue
        compared += 1
        assert total(c) <= total(own) * (1 + 1e-12)
    assert compared >= 1
    assert all(s.loss is not None and s.loss >= 0 for s in r.sizes)  # a design of its own is never slower


@pytest.mark.parametrize("sizes", ["1x4096x1,1x8x256,1x100x33", "64x64x64,64x64x64,4096x512x64"])
def test_no_size_loses_less_than_nothing(sizes):
    """The audit's case (tiny calls whose shared design walks a much longer K) and a size listed
    twice (one size, twice the weight): every loss is >= 0."""
    listed = parse_sizes(sizes)
    top = tuple(max(getattr(s, d) for s in listed) for d in "MKN")
    base = replace(small("npu2", "i16", "i32"), M=top[0], K=top[1], N=top[2], m=0, k=0, n=0, k_mt=0,
                   runtime_sizes="mnk")
    r = tune_many(base, listed)
    assert len(r.sizes) == len(set(listed)) and sum(s.weight for s in r.sizes) == len(listed)
    assert all(s.loss is not None and s.loss >= 0 for s in r.sizes)


def test_weights_move_the_design_towards_the_frequent_size():
    base = _base()
    even = tune_many(base, SIZES)
    heavy = tune_many(base, SIZES, (1.0, 1000.0, 1.0))
    assert heavy.sizes[1].shared_s <= even.sizes[1].shared_s
    assert heavy.total("shared") >= heavy.total("special")


def test_cli_tune_for_many_sizes(capsys):
    args = ["tune", "--dev", "npu1", "--dtype_in", "i8", "--dtype_out", "i32",
            "--runtime-sizes", "1000x777x333,1x4096x4096"]
    assert main(args + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["predicted"] and out["runtime_sizes"] == "mnk" and out["built_for"] == [1000, 4096, 4096]
    assert [s["size"] for s in out["sizes"]] == ["1000x777x333", "1x4096x4096"]
    assert all(np.isfinite(s["loss"]) for s in out["sizes"])
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "PREDICTED" in text and "weighted total" in text and "loss" in text
    assert main(args + ["--weights", "1,2,3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "3 weights for 2 --runtime-sizes" in err


def test_simulated_runtime_sizes_use_the_design_tuned_for_the_list():
    from gemm_gen.app.choice import choose_design as config_from_args
    from gemm_gen.app.cli import parser

    args = ["simulate", "--dev", "npu2", "--dtype_in", "i8", "--dtype_out", "i32",
            "--runtime-sizes", "1000x777x333,64x4096x512,2048x1024x2048"]
    c = config_from_args(parser().parse_args(args))
    r = tune_many(replace(c, m=0, k=0, n=0, k_mt=0, rho=1), SIZES)
    assert (c.tiling.m, c.tiling.k, c.tiling.n, c.tiling.k_mt, c.tiling.rho) == (r.config.tiling.m, r.config.tiling.k,
                                                                                 r.config.tiling.n,
                                                                                 r.config.tiling.k_mt,
                                                                                 r.config.tiling.rho)
