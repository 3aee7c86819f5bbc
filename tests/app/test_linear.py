"""Issue 35 item 2: Linear (gemm_gen/app/linear.py) holds int4 weights once and serves any M through a few designs,
each built once and chosen by M from the model's predictions; it reads NumPy arrays, `__dlpack__` and
`__array__` objects without a copy where the layout allows and says when it copies."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from gemm_gen.app import linear as linear_module
from gemm_gen.app import operator
from gemm_gen.app.linear import LAYER_BOUND, Linear, LinearPlan, as_numpy, tiers
from gemm_gen.facts.errors import ConfigError
from gemm_gen.facts.inputs import group_weights
from gemm_gen.facts.quant_b import QuantB
from gemm_gen.spec.rules.array import DECODE_M_MAX

K, N = 256, 96
RNG = np.random.default_rng(3535)


def _weights(zp: bool = True, g: int = 64) -> QuantB:
    return group_weights(RNG.integers(-8, 8, (K, N)).astype(np.int8), g, zp, 7)


@pytest.fixture
def builds(monkeypatch):
    """Every design the operator builds, counted (Gemm._build calls operator.build_design)."""
    made: list[object] = []
    real = operator.build_design

    def counting(config, *args, **kwargs):
        made.append(config)
        return real(config, *args, **kwargs)

    monkeypatch.setattr(operator, "build_design", counting)
    return made


def test_linear_serves_every_m_and_builds_each_design_once(builds):
    lin = Linear(_weights(), device="npu2", max_tokens=512)
    names = [t.name for t in lin.plan.tiers]
    assert names == ["decode", "decode-split", "small", "prefill"] and len(builds) == 4  # each built with the Linear
    chosen = {}
    for M in (1, 7, 16, 64, 300):
        x = RNG.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
        y = lin.simulate(x, report=True)
        assert y.shape == (M, N) and np.array_equal(y.view(np.uint16), lin.reference(x).view(np.uint16))
        assert lin.last_call.accuracy.frobenius_rel < LAYER_BOUND  # npu2's default datapath, plain bf16: 1% per layer
        route = lin.route(M)
        assert lin.last_call.tiers == (route.tier,)
        assert route.predicted_us[route.tier] == min(route.predicted_us.values())  # the model's fastest
        assert set(route.predicted_us) == {t.name for t in lin.plan.tiers if t.max_m >= M}
        chosen[M] = route.tier
    assert len(builds) == 4  # no call built a design
    grids = {name: (lin.plan.design(name).config.array.rows, lin.plan.design(name).config.array.cols)
             for name in names}
    # the decode mapping, the split decode placement (one virtual column per core), then the whole array
    assert grids == {"decode": (1, 8), "decode-split": (1, 32), "small": (4, 8), "prefill": (4, 8)}
    assert chosen[1] in ("decode", "decode-split") and chosen[300] == "prefill"  # these serve it best / at all
    assert all(chosen[M] not in ("decode", "decode-split") for M in (64, 300)) and DECODE_M_MAX == 16


def test_npu2_runs_plain_bf16_unless_the_bfp16_datapath_is_asked_for():
    """A Linear holds 1% per layer by default: on npu2 it runs plain bf16 (the Gemm's own default for bf16 is the
    bfp16 datapath); emulate_bf16_with_bfp16=True asks for the faster bfp16 datapath, which every call names with
    what it loses. npu1 has plain bf16 only."""
    w = _weights()
    for device, options, bfp16 in (("npu2", {}, False), ("npu2", {"emulate_bf16_with_bfp16": None}, False),
                                   ("npu2", {"emulate_bf16_with_bfp16": False}, False),
                                   ("npu2", {"emulate_bf16_with_bfp16": True}, True), ("npu1", {}, False)):
        lin = Linear(w, device=device, max_tokens=64, **options)
        assert lin.plan.bfp16 == bfp16 and all(lin.plan.design(t.name).config.kernel.emulate_bf16_with_bfp16 == bfp16
                                               for t in lin.plan.tiers), (device, options)
        lin.simulate(RNG.standard_normal((2, K)).astype(ml_dtypes.bfloat16))
        said = lin.last_call.datapath
        assert said == lin.plan.datapath() and f"datapath: {said}" in lin.last_call.lines()
        assert ("bfp16" in said) == (device == "npu2"), said  # npu1: no bfp16 datapath to offer
    with pytest.raises(ConfigError, match="emulate") as e:  # npu1 has no bfp16 datapath: the device's own refusal
        Linear(w, device="npu1", emulate_bf16_with_bfp16=True)
    assert "\n" not in str(e.value)


def test_the_route_follows_the_models_predictions(monkeypatch):
    """A model that prices the decode designs slower sends M = 1 to the whole array instead: the routing reads
    the predictions, nothing fixed."""
    lin = Linear(_weights(), device="npu1", max_tokens=64)
    assert lin.route(1).tier in ("decode", "decode-split")
    real = LinearPlan.predicted_us

    def slower_decode(self, tier, M, params=None):
        return real(self, tier, M, params) * (10 if tier.startswith("decode") else 1)

    monkeypatch.setattr(LinearPlan, "predicted_us", slower_decode)
    assert Linear(_weights(), device="npu1", max_tokens=64).route(1).tier == "prefill"


def test_tiers_follow_max_tokens():
    assert [(t.name, t.max_m) for t in tiers(2048)] == [("decode", 16), ("decode-split", 16), ("small", 64),
                                                         ("prefill", 2048)]
    assert [(t.name, t.max_m) for t in tiers(64)] == [("decode", 16), ("decode-split", 16), ("prefill", 64)]
    assert [(t.name, t.max_m) for t in tiers(64, split=False)] == [("decode", 16), ("prefill", 64)]
    assert [(t.name, t.max_m, t.mapping) for t in tiers(8)] == [("prefill", 8, "whole-array")]


def test_a_call_past_max_tokens_runs_in_chunks():
    lin = Linear(_weights(), device="npu1", max_tokens=32)
    x = RNG.standard_normal((70, K)).astype(ml_dtypes.bfloat16)
    y = lin.simulate(x)
    assert np.array_equal(y.view(np.uint16), lin.reference(x).view(np.uint16))
    call = lin.last_call
    assert call.tiers == (lin.route(32).tier, lin.route(32).tier, lin.route(6).tier)
    assert any("3 chunks of at most 32 rows" in c for c in call.copies)


def test_bias_and_activation_run_on_the_host_and_are_said():
    w = _weights()
    bias = RNG.standard_normal(N).astype(np.float32)
    lin = Linear(w, bias=bias, activation="silu", device="npu1", max_tokens=16)
    plain = Linear(w, device="npu1", max_tokens=16)
    x = RNG.standard_normal((3, K)).astype(ml_dtypes.bfloat16)
    y = lin.simulate(x, report=True)
    c = plain.simulate(x).astype(np.float64) + bias
    want = (c / (1 + np.exp(-c))).astype(np.float32).astype(ml_dtypes.bfloat16)  # silu, one rounding at the end
    assert np.abs(y.astype(np.float64) - want.astype(np.float64)).max() <= 2.0**-7 * np.abs(c).max()
    assert np.array_equal(y.view(np.uint16), lin.reference(x).view(np.uint16))
    assert any("bias and silu applied on the host" in s for s in lin.last_call.host_steps)
    assert lin.last_call.accuracy.frobenius_rel < 0.01


# ---- inputs: no copy where the layout allows, and every copy said ---------------------------------------
class DLPackOnly:
    """An array owner that offers only the DLPack protocol (as a CPU tensor of another library does)."""

    def __init__(self, a: np.ndarray) -> None:
        self._a = a

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


class ArrayOnly:
    """An object that hands out a new array through __array__ (NumPy cannot tell whether it copied)."""

    def __init__(self, a: np.ndarray) -> None:
        self._a = a

    def __array__(self, dtype=None, copy=None):
        return self._a.copy()


def test_inputs_are_read_in_place_and_copies_are_said():
    a = RNG.standard_normal((4, K)).astype(np.float32)
    copies: list[str] = []
    assert as_numpy(a, copies) is a and np.shares_memory(as_numpy(DLPackOnly(a), copies), a) and copies == []
    as_numpy(ArrayOnly(a), copies)
    assert len(copies) == 1 and "ArrayOnly, made into a NumPy array" in copies[0]

    lin = Linear(_weights(), device="npu1", max_tokens=16)
    bf = a.astype(ml_dtypes.bfloat16)
    y = lin.simulate(bf)  # a bf16 array: nothing to convert
    assert lin.last_call.copies == () and lin.last_call.gemm_copies == ()
    assert lin.simulate(bf[:0]).shape == (0, N) and lin.last_call.tiers == ()  # M = 0: nothing runs
    y3 = lin.simulate(bf.reshape(2, 2, K))  # (..., K): a view as M x K, and y in x's leading shape
    assert y3.shape == (2, 2, N) and np.array_equal(y3.reshape(4, N), y) and lin.last_call.copies == ()
    lin.simulate(DLPackOnly(a))
    assert len(lin.last_call.copies) == 1 and "float32, rounded to bf16 (RNE) into a copy" in lin.last_call.copies[0]
    lin.simulate(np.asfortranarray(bf))  # column-major x: the operator's design reads rows, so it rearranges
    assert any("A is column-major" in c for c in lin.last_call.gemm_copies)


def test_a_3d_strided_input_that_cannot_be_viewed_is_copied_and_said():
    lin = Linear(_weights(), device="npu1", max_tokens=16)
    x = np.zeros((2, 4, K), ml_dtypes.bfloat16).transpose(1, 0, 2)  # (4, 2, K): rows not evenly spaced
    x[...] = RNG.standard_normal(x.shape).astype(ml_dtypes.bfloat16)
    y = lin.simulate(x)
    assert y.shape == (4, 2, N) and any("reshaped into a copy" in c for c in lin.last_call.copies)
    assert np.array_equal(y.reshape(8, N), lin.simulate(np.ascontiguousarray(x).reshape(8, K)))


def test_torch_tensors_are_read_without_a_copy():
    torch = pytest.importorskip("torch")  # not a requirement: installed by hand to check this
    lin = Linear(_weights(), device="npu1", max_tokens=16)
    for t in (torch.randn(3, K), torch.randn(3, K).to(torch.bfloat16), torch.randn(K, 3).T):
        copies: list[str] = []
        a = as_numpy(t, copies)
        assert a.__array_interface__["data"][0] == t.data_ptr() and copies == []
    t = torch.randn(3, K).to(torch.bfloat16)
    assert np.array_equal(lin.simulate(t), lin.simulate(as_numpy(t, [])))
    assert lin.last_call.copies == ()
    with pytest.raises(ConfigError, match="cannot be read") as e:
        lin.simulate(torch.randn(3, K, requires_grad=True))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("make, match", [
    (lambda w: Linear(w, activation="tanh"), "activation='tanh'"),
    (lambda w: Linear(w, bias=np.zeros(3)), "bias has 3 values for N = 96"),
    (lambda w: Linear(w, max_tokens=0), "max_tokens=0"),
    (lambda w: Linear(w.q), "weights of type ndarray"),
    (lambda w: Linear(w, dtype_out="i8"), "dtype_out='i8'"),
    (lambda w: Linear(w, rows=1, tiles=(16, 64, 16, 64)), "rows, tiles: set by the Linear"),
    (lambda w: Linear(w, device="npu1", max_tokens=16).simulate(np.zeros((2, K + 1), np.float32)),
     "last axis must be K = 256"),
    (lambda w: Linear(w, device="npu1", max_tokens=16).simulate(np.zeros((2, K), np.int32)), "x is int32"),
])
def test_refusals_are_one_line(make, match):
    with pytest.raises(ConfigError, match=match) as e:
        make(_weights())
    assert "\n" not in str(e.value)


def test_the_npu_call_goes_through_the_operator(monkeypatch):
    """__call__ hands each chunk to its design's Gemm.__call__ with the held weights (the operator's NPU path,
    tested with the stand-in XRT in tests/sim/test_w4a16_sim.py); here the operator's call is recorded."""
    w = _weights()
    lin = Linear(w, device="npu2", max_tokens=64)
    seen = []

    def fake_call(self, A, B, **kw):
        seen.append((self, A.shape, B is w.q, kw["scales"] is w.scales, kw["zero_points"] is w.zero_points,
                     kw["timeout_ms"]))
        return self.simulate(A, B, scales=kw["scales"], zero_points=kw["zero_points"])

    monkeypatch.setattr(operator.Gemm, "__call__", fake_call)
    x = RNG.standard_normal((20, K)).astype(ml_dtypes.bfloat16)
    y = lin(x, timeout_ms=5000)
    tier = lin.route(20).tier
    assert seen == [(lin.plan.gemms[tier], (20, K), True, True, True, 5000)]
    assert np.array_equal(y.view(np.uint16), lin.reference(x).view(np.uint16))


def test_the_plan_predicts_at_any_size_without_weights():
    plan = LinearPlan("npu2", 2048, 8192, 32, False, max_tokens=2048)
    r = plan.route(1)
    slow, fast = plan.predicted_range_us(r.tier, 1)
    # the split decode placement: PREDICTED faster than the decode mapping at this shape (docs/llm_weights.md)
    assert fast <= r.predicted_us[r.tier] <= slow and r.tier == "decode-split"
    assert r.predicted_us["decode-split"] < r.predicted_us["decode"]
    c = plan.design(r.tier).config
    assert (c.size.M, c.size.K, c.size.N, c.groups.group_size, c.array.rows) == (DECODE_M_MAX, 2048, 8192, 32, 1)
    assert plan.design("small").config.size.M == linear_module.SMALL_M_MAX


def test_layers_of_one_shape_share_one_plan(builds):
    """A model's layers of one shape run on one set of designs (plan=): built once for all of them."""
    first = Linear(_weights(), device="npu1", max_tokens=64)
    made = len(builds)
    other = Linear(_weights(), plan=first.plan)
    assert len(builds) == made == len(first.plan.tiers)
    x = RNG.standard_normal((5, K)).astype(ml_dtypes.bfloat16)
    assert np.array_equal(other.simulate(x).view(np.uint16), other.reference(x).view(np.uint16))
    assert len(builds) == made
    with pytest.raises(ConfigError, match="plan= is for 256 x 96 weights, group 64") as e:
        Linear(_weights(g=32), plan=first.plan)
    assert "\n" not in str(e.value)
