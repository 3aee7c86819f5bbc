"""The model's charge for a fused epilogue (issue 21 step 7; model/epilogue_cost.py, uncalibrated): core cycles
per output tile, one more B object per tile on the core's B channel, B's DRAM traffic x (k_steps + 1) /
k_steps. An epilogue never makes a design cheaper; without one every estimate, rank and choice is as before."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemm_gen.app.model_commands import predict_text
from gemm_gen.design import build_design
from gemm_gen.facts.epilogue import VECTOR_LANES, Activation, Epilogue, RequantForm
from gemm_gen.model import epilogue_cost
from gemm_gen.model.params import load
from gemm_gen.model.perf import Workload, estimate, estimate_config
from gemm_gen.model.predict import epilogue_charge, prediction
from gemm_gen.model.price import estimate as estimate_design_of
from gemm_gen.search.tune import tune
from gemm_gen.spec.config import GemmConfig

FLOAT_EPILOGUES = [Epilogue(activation=Activation.RELU), Epilogue(bias=True), Epilogue(True, Activation.SILU),
                   Epilogue(True, Activation.GELU, (-1.0, 6.0)), Epilogue(False, Activation.GELU)]
INT_EPILOGUES = [Epilogue(requant=RequantForm.DOUBLE), Epilogue(bias=True, requant=RequantForm.DOUBLE)]
WORKLOADS = [("npu1", "bf16", "bf16", FLOAT_EPILOGUES), ("npu2", "bf16", "bf16", FLOAT_EPILOGUES),
             ("npu1", "i8", "i8", INT_EPILOGUES), ("npu2", "i16", "i16", INT_EPILOGUES)]


def _candidates(seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    m = rng.choice([16, 32, 64], 24)
    k = rng.choice([32, 64], 24)
    n = rng.choice([16, 32, 64], 24)
    return m, k, n, k * rng.choice([1, 2, 4], 24)


@pytest.mark.parametrize("dev, din, dout, epilogues", WORKLOADS, ids=lambda x: x if isinstance(x, str) else "")
def test_an_epilogue_never_makes_a_design_cheaper(dev: str, din: str, dout: str, epilogues: list[Epilogue]) -> None:
    wl = Workload.new(dev, 1024, 2048, 1536, din, dout)
    m, k, n, k_mt = _candidates(len(dev) + len(din))
    base = estimate(wl, m, k, n, k_mt)
    for e in epilogues:
        got = estimate(replace(wl, epilogue=e), m, k, n, k_mt)
        assert np.all(got.time >= base.time) and np.all(got.t_core > base.t_core), e
        assert np.all(got.traffic["B"].bytes >= base.traffic["B"].bytes)
        for name in ("A", "C"):
            assert np.array_equal(got.traffic[name].bytes, base.traffic[name].bytes)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(WORKLOADS), st.integers(0, 10_000), st.integers(1, 8), st.integers(1, 8), st.integers(1, 8))
def test_a_costlier_epilogue_is_never_cheaper(workload, seed: int, mb: int, kb: int, nb: int) -> None:
    """More work in the chain (bias, then an activation, then a clamp) never predicts less time."""
    dev, din, dout, _ = workload
    wl = Workload.new(dev, 128 * mb, 256 * kb, 128 * nb, din, dout)
    m, k, n, k_mt = _candidates(seed)
    chain = ([Epilogue(), Epilogue(bias=True), Epilogue(True, Activation.SILU), Epilogue(True, Activation.GELU),
              Epilogue(True, Activation.GELU, (-1.0, 1.0))] if dout == "bf16" else
             [Epilogue(), Epilogue(requant=RequantForm.DOUBLE), Epilogue(True, requant=RequantForm.DOUBLE)])
    times = [estimate(replace(wl, epilogue=e), m, k, n, k_mt).time for e in chain]
    for cheaper, dearer in zip(times, times[1:]):
        assert np.all(dearer >= cheaper)


def test_without_an_epilogue_every_estimate_is_as_before() -> None:
    wl = Workload.new("npu2", 2048, 2048, 2048, "bf16", "bf16")
    m, k, n, k_mt = _candidates(3)
    before = estimate(wl, m, k, n, k_mt)
    none = estimate(replace(wl, epilogue=Epilogue()), m, k, n, k_mt)
    for field in ("time", "t_core", "t_mem", "t_dram", "t_fill", "t_drain"):
        assert np.array_equal(getattr(before, field), getattr(none, field)), field
    assert none.extra == {}


@pytest.mark.parametrize("dev, din, dout, e", [("npu1", "i8", "i16", INT_EPILOGUES[1]),
                                               ("npu2", "bf16", "bf16", FLOAT_EPILOGUES[3])])
def test_the_tuner_ranks_as_before_without_an_epilogue_and_pays_for_one(dev: str, din: str, dout: str,
                                                                       e: Epilogue) -> None:
    wl = Workload.new(dev, 1024, 1024, 1024, din, dout)
    plain, none, with_e = tune(wl, 5), tune(replace(wl, epilogue=Epilogue()), 5), tune(replace(wl, epilogue=e), 5)
    assert [r.config for r in plain.top] == [r.config for r in none.top]
    assert [r.time_s for r in plain.top] == [r.time_s for r in none.top]
    assert with_e.best.time_s >= plain.best.time_s


def test_the_charge_is_the_counted_ops_per_lanes() -> None:
    """cycles per tile = vector ops x m n / 16; the tile's transfer is one B object per output tile; B's DRAM
    bytes grow by (k_steps + 1) / k_steps exactly (k_steps = K / k)."""
    e = Epilogue(True, Activation.GELU, (-1.0, 1.0))
    ops = epilogue_cost.BIAS_OPS + epilogue_cost.ACTIVATION_OPS[Activation.GELU] + epilogue_cost.CLAMP_OPS
    assert epilogue_cost.vector_ops(e) == ops
    assert float(epilogue_cost.core_cycles(e, 64, 32)) == ops * 64 * 32 / VECTOR_LANES
    assert epilogue_cost.extra_b_objects(Epilogue(activation=Activation.RELU)) == 0
    assert epilogue_cost.extra_b_objects(e) == 1
    wl = Workload.new("npu2", 512, 1024, 512, "bf16", "bf16")
    k = 64
    base, got = estimate(wl, 32, k, 32, 256), estimate(replace(wl, epilogue=e), 32, k, 32, 256)
    k_steps = 1024 // k
    assert float(got.traffic["B"].bytes) == pytest.approx(float(base.traffic["B"].bytes) * (k_steps + 1) / k_steps)
    assert float(got.extra["epilogue_cycles_per_tile"]) == ops * 32 * 32 / VECTOR_LANES  # type: ignore[arg-type]
    # no tile (ReLU alone): no more B traffic
    relu = estimate(replace(wl, epilogue=Epilogue(activation=Activation.RELU)), 32, k, 32, 256)
    assert float(relu.traffic["B"].bytes) == float(base.traffic["B"].bytes)


def _design_with(c: GemmConfig, e: Epilogue):
    d = build_design(c)
    return replace(d, build=replace(d.build, epilogue=e),
                   kernels=tuple(replace(k, build=replace(k.build, epilogue=e)) for k in d.kernels))


def test_predict_reads_the_kernels_epilogue_and_prints_its_charge() -> None:
    c = GemmConfig("npu2", 512, 512, 512, 64, 64, 64, 128, "bf16", "bf16", False)
    e = Epilogue(True, Activation.SILU)
    plain, with_e = build_design(c), _design_with(c, e)
    assert plain.build.epilogue.is_identity and with_e.build.epilogue == e
    p = load()
    base, got = estimate_design_of(plain, p), estimate_design_of(with_e, p)
    assert float(got.t_core) > float(base.t_core) and float(got.time) >= float(base.time)
    pred = prediction(with_e, got, p, float(got.tops), float(got.tops), None)
    assert pred.epilogue is None  # predict() adds the charge; the record without it has none
    text = predict_text(replace(pred, epilogue=epilogue_charge(e, c.tiling.m, c.tiling.n)))
    line = next(x for x in text.splitlines() if x.strip().startswith("epilogue"))
    ops = epilogue_cost.vector_ops(e)
    assert "PREDICTED" in line and "uncalibrated" in line and f"{ops} vector ops" in line
    assert f"{ops * c.tiling.m * c.tiling.n / VECTOR_LANES:,.0f} cycles per output tile" in line
    assert "epilogue" not in predict_text(pred)
    # the design's keys name its kernel's epilogue (design_keys reads the Design's KernelBuild); no charge is in it
    assert pred.to_json()["epilogue"] == e.to_json()
    assert replace(pred, epilogue=epilogue_charge(e, c.tiling.m, c.tiling.n)).to_json()["epilogue"]["predicted"] is True  # type: ignore[index]


def test_estimate_config_takes_an_epilogue() -> None:
    c = GemmConfig("npu1", 512, 512, 512, 64, 64, 64, 128, "i8", "i8", False)
    base = estimate_config(c)
    got = estimate_config(c, epilogue=INT_EPILOGUES[1])
    assert float(got.time) > float(base.time)
    assert float(estimate_config(c, epilogue=Epilogue()).time) == float(base.time)


# the vector operations of the rendered tanh_lut, one pattern per emitted operation (templates/mm_epilogue.cc.j2)
_TANH_OPS = (r"aie::min\(", r"aie::max\(", r"aie::to_fixed_floor<", r"aie::add\(", r"load_lut_2x_float\(",
             r"::shuffle\(", r"\.insert\(", r"aie::concat\(", r"mac_elem_\w+\(", r"to_vector<bfloat16>\(\)")


def test_the_tanh_charge_is_what_the_kernel_emits() -> None:
    """Issue 31 item 7c: the model prices the LUT tanh from the rendered function (the written-out lookup, no
    linear_approx object): 10 vector operations per 16 values on AIE2, 11 on AIE2P (the offsets' 32-lane
    accumulator), TANH_OPS the larger."""
    import re

    from gemm_gen.facts.epilogue import TANH_OPS

    from ..backends import test_kernel_epilogue as tke
    from ..backends import test_kernels as tk

    counts = {}
    for dev in ("aie2", "aie2p"):
        case = next(c for c in tke.FLOAT if c.build.epilogue.uses_tanh and c.build.aie_target == dev)
        text = tk.render_kernel(case.build)
        body = text[text.index("tanh_lut(const aie::vector<bfloat16, CHUNK> &x"):]
        body = body[:body.index("\n}\n")]
        counts[dev] = sum(len(re.findall(p, body)) for p in _TANH_OPS)
    assert counts == {"aie2": 10, "aie2p": 11} and TANH_OPS == max(counts.values())
    assert epilogue_cost.vector_ops(Epilogue(activation=Activation.SILU)) == 4 * epilogue_cost.BF16_OP + TANH_OPS
