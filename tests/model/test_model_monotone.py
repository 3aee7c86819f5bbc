"""The model is monotone in every resource (issue 9): less bandwidth, more overhead, a slower kernel
or more work never predicts a faster run. Property tests over random problems and every tiling the
tuner considers for them (vectorised), on both devices and the main types and layouts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gemm_gen.model.params import Params, load
from gemm_gen.model.perf import Workload, dram_lds, estimate
from gemm_gen.search.space import tilings
from gemm_gen.spec.request import Pins

TYPES = [("npu1", "i8", "i16"), ("npu1", "bf16", "bf16"), ("npu2", "i8", "i8"), ("npu2", "bf16", "bf16"),
         ("npu2", "i16", "i32"), ("npu2", "i8", "i32"), ("npu2", "bfp16", "bfp16")]
SIZE = st.integers(32, 3000)
TOL = 1e-12


def _times(pr: Workload, p: Params, kmt_factor: int, queue_groups: int | None = None) -> np.ndarray:
    pr = pr if queue_groups is None else pr.with_(queue_groups=queue_groups)
    m, k, n, rho = tilings(pr.base, pr.size, Pins())
    kmt = np.minimum(k * kmt_factor, -(-pr.K // k) * k)
    return estimate(pr, m, k, n, kmt, p, rho=rho).time


# each change costs more: (what, how a Params changes for a device)
WORSE = {
    "less DRAM bandwidth": lambda p, d: p.with_dram(d, peak_gbps=p.dram[d].peak_gbps * 0.7),
    "more per-run overhead": lambda p, d: p.with_dram(d, run_overhead_bytes=p.dram[d].run_overhead_bytes * 2 + 64),
    "less page sharing": lambda p, d: p.with_dram(d, page_sharing=p.dram[d].page_sharing * 0.5),
    "fewer bursts in flight per stream": lambda p, d: p.with_dram(d, stream_gbps_256=p.dram[d].stream_gbps_256 * 0.2),
    "costlier writes": lambda p, d: p.with_dram(d, write_cost=p.dram[d].write_cost * 2),
    "more dispatch": lambda p, d: p.with_(dispatch_us=p.dispatch_us * 2),
    "slower BD setup": lambda p, d: p.with_(bd_task_us=p.bd_task_us * 3),
    "slower switches": lambda p, d: p.with_(switch_cycles=p.switch_cycles * 2 + 10),
    "slower C accesses": lambda p, d: p.with_(bank_stall=p.bank_stall + 2),
    "slower bf16 mmuls": lambda p, d: p.with_(bf16_via_bfp16_cycles=p.bf16_via_bfp16_cycles * 1.5),
    "slower bfp16 k-steps": lambda p, d: p.with_(bfp16_step_cycles=p.bfp16_step_cycles * 2 + 10),
    "narrower streams": lambda p, d: p.with_(stream_bytes_per_cycle=max(1, p.stream_bytes_per_cycle // 2)),
}


@pytest.mark.parametrize("what", sorted(WORSE))
@given(types=st.sampled_from(TYPES), M=SIZE, K=SIZE, N=SIZE, col=st.booleans(), kmt=st.sampled_from([1, 2, 4, 16]),
       queue=st.sampled_from([None, 1]))
@settings(max_examples=12, deadline=None)
def test_a_costlier_resource_never_predicts_a_faster_run(what, types, M, K, N, col, kmt, queue):
    dev, t_in, t_out = types
    pr = Workload.new(dev, M, K, N, t_in, t_out, col)
    p = load()
    base = _times(pr, p, kmt, queue)
    worse = _times(pr, WORSE[what](p, dev), kmt, queue)
    assert base.size and np.all(worse >= base * (1 - TOL)), \
        f"{int((worse < base * (1 - TOL)).sum())} of {base.size} designs got faster"


WORDS = st.integers(64, 750).map(lambda x: 4 * x)  # rows of whole words: no host copy for that reason


@given(types=st.sampled_from(TYPES), M=WORDS, K=WORDS, N=WORDS, col=st.booleans(), dim=st.sampled_from("MKN"),
       more=st.integers(1, 500).map(lambda x: 4 * x), queue=st.sampled_from([None, 1]))
@settings(max_examples=40, deadline=None)
def test_more_work_never_predicts_a_faster_run(types, M, K, N, col, dim, more, queue):
    """The same tilings on a larger problem (one dimension grown) take at least as long, wherever
    the data layout keeps its kind: both calls read the user's own matrices, and a grown K stays a
    whole number of k_mt chunks. (Rows exactly as long as the K walk, a host-padded copy's or a
    K that became a multiple of k_mt, make each block of A one contiguous DMA run, which the model
    rightly prices lower: a layout change, not less work.)"""
    dev, t_in, t_out = types
    small = Workload.new(dev, M, K, N, t_in, t_out, col, queue_groups=queue or 4)
    big = small.with_(**{dim: getattr(small, dim) + more})
    m, k, n, rho = tilings(small.base, small.size, Pins())
    kmt = np.minimum(4 * k, -(-small.K // k) * k)
    own = (small.K % kmt == 0) & (big.K % kmt == 0) if dim == "K" else np.ones(m.shape, dtype=bool)
    for pr in (small, big):
        lds = dram_lds(pr, kmt, n)
        own &= (lds[0] == pr.K) & (lds[1] == (pr.K if col else pr.N)) & (lds[2] == pr.N)
    assume(own.any())
    p = load()
    a = estimate(small, m, k, n, kmt, p, rho=rho).time[own]
    b = estimate(big, m, k, n, kmt, p, rho=rho).time[own]
    assert np.all(b >= a * (1 - TOL)), f"{int((b < a * (1 - TOL)).sum())} of {a.size} designs got faster"


def test_the_audits_cases_are_monotone():
    """The cases the audit found: npu2 256^3 with DRAM at 20 instead of 65 GB/s, and 20% less
    bandwidth over every tiling of 256^3 and 512^3 (1555 and 9307 designs got faster before)."""
    p = load()
    for size in (256, 512):
        pr = Workload.new("npu2", size, size, size, "i8", "i8", True)
        for factor in (1, 4):
            slow = _times(pr, p.with_dram("npu2", peak_gbps=p.dram["npu2"].peak_gbps * 0.8), factor)
            assert np.all(slow >= _times(pr, p, factor) * (1 - TOL))
    pr = Workload.new("npu2", 256, 256, 256, "i8", "i8", True)
    assert np.all(_times(pr, p.with_dram("npu2", peak_gbps=20.0), 1) >= _times(pr, p, 1))


@pytest.mark.parametrize("t_in", ["i8", "bf16"])
@pytest.mark.parametrize("size", [256, 1024, 4096])
def test_predict_with_slower_dram_is_never_faster(capsys, t_in, size):
    """The issue's check: `predict --dram-gbps 20` of the tuned npu2 design against the default."""
    import json

    from gemm_gen.app.cli import main

    args = ["predict", "--dev", "npu2", "-M", str(size), "-K", str(size), "-N", str(size), "--dtype_in", t_in,
            "--dtype_out", t_in, "--json"]
    tops = []
    for extra in ([], ["--dram-gbps", "20"]):
        assert main(args + extra) == 0
        out = json.loads(capsys.readouterr().out)
        tops.append(out["tops"])
    assert tops[1] <= tops[0]


def test_tune_256_cubed_picks_no_8_byte_dram_runs(capsys):
    import json

    from gemm_gen.app.cli import main

    assert main(["tune", "--dev", "npu2", "-M", "256", "-K", "256", "-N", "256", "--dtype_in", "i8", "--dtype_out",
                 "i8", "--json"]) == 0
    top = json.loads(capsys.readouterr().out)["top"]
    assert all(c["k_mt"] > 8 for c in top)


def test_dram_gbps_out_of_range_is_one_line(capsys):
    from gemm_gen.app.cli import main

    assert main(["predict", "--dev", "npu2", "-M", "256", "-K", "256", "-N", "256", "--dram-gbps", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--dram-gbps 0.0" in err
