"""search.choose: a request (options, size, pins) becomes a design in one step; what it filled in is
named; a measurement the caller passes re-ranks the model's finalists, a failed finalist scoring inf."""

from __future__ import annotations

import math

import pytest

import gemm_gen.search.choosing as search_module
import gemm_gen.search.tune as tune_module
from gemm_gen.errors import BuildError, ToolchainMissing
from gemm_gen.model.params import load
from gemm_gen.model.perf import Workload
from gemm_gen.search import MEASURED_FINALISTS, choose, open_config
from gemm_gen.search.tune import tune
from gemm_gen.spec import Options, Pins, Problem, Request

OPTIONS = Options("npu2", "i8", "i16")
SIZE = Problem(1024, 1024, 1024)


def test_an_open_tiling_is_the_models_best_and_says_what_it_filled():
    chosen = choose(Request(OPTIONS, SIZE))
    best = tune(Workload.of(open_config(Request(OPTIONS, SIZE))), 1).best.config
    assert (chosen.config.m, chosen.config.k, chosen.config.n, chosen.config.k_mt, chosen.config.rho) == (
        best.m, best.k, best.n, best.k_mt, best.rho)
    assert chosen.filled == ("m", "k", "n", "k_mt", "rho") and chosen.measured == ()


def test_a_pinned_tiling_is_kept_and_nothing_is_filled():
    pins = Pins(64, 64, 64, 256, 1)
    chosen = choose(Request(OPTIONS, SIZE, pins))
    c = chosen.config
    assert (c.m, c.k, c.n, c.k_mt, c.rho) == (64, 64, 64, 256, 1) and not chosen.chose_anything


def test_pinned_tiles_get_the_models_k_mt_only():
    chosen = choose(Request(OPTIONS, SIZE, Pins(m=64, k=64, n=64)))
    assert chosen.filled == ("k_mt",) and chosen.config.k_mt % 64 == 0


def test_the_request_keeps_what_the_user_gave_and_derives_the_rest():
    chosen = choose(Request(Options("npu2", "bf16", "bf16", stack_bytes=4096), Problem(512, 512, 512)))
    assert chosen.config.stack_bytes == 4096 and chosen.config.acc == "f32"


def test_a_measurement_re_ranks_the_models_finalists():
    """The fake measurement reverses the model's order: the model's worst finalist is measured
    fastest and is chosen; every finalist carries its time, fastest first."""
    model_order = [c.config for c in tune(Workload.of(open_config(Request(OPTIONS, SIZE))), MEASURED_FINALISTS).top]
    seen = []

    def measure(c):
        seen.append(c)
        return 1.0 + len(model_order) - [(x.m, x.k, x.n, x.k_mt, x.rho) for x in model_order].index(
            (c.m, c.k, c.n, c.k_mt, c.rho))

    chosen = choose(Request(OPTIONS, SIZE), measure=measure)
    assert len(seen) == len(model_order) == MEASURED_FINALISTS
    last = model_order[-1]
    c = chosen.config
    assert (c.m, c.k, c.n, c.k_mt) == (last.m, last.k, last.n, last.k_mt)
    times = [c.measured_s for c in chosen.measured]
    assert times == sorted(times) and times[0] == 2.0


def test_a_finalist_that_fails_scores_inf_and_the_batch_goes_on():
    calls = []

    def measure(c):
        calls.append(c)
        if len(calls) == 1:
            raise BuildError("aiecc failed")  # the model's best does not build
        return float(len(calls))

    chosen = choose(Request(OPTIONS, SIZE), measure=measure)
    assert len(calls) == MEASURED_FINALISTS
    assert chosen.config == chosen.measured[0].config == calls[1]
    assert math.isinf(chosen.measured[-1].measured_s) and chosen.measured[-1].config == calls[0]


def test_a_missing_toolchain_stops_the_measurement():
    def measure(c):
        raise ToolchainMissing("pyxrt is not installed")

    with pytest.raises(ToolchainMissing):
        choose(Request(OPTIONS, SIZE), measure=measure)


@pytest.mark.parametrize("pins", [Pins(64, 64, 64, 256), Pins(m=32), Pins(k=64, n=64)])
def test_pinned_tiles_are_kept_and_not_measured(pins):
    """Any pinned tile size keeps the choice off the measured path (the model's finalists would drop
    the pin); the pins hold in the design."""
    def measure(c):
        raise AssertionError("nothing is open to measure")

    chosen = choose(Request(OPTIONS, SIZE, pins), measure=measure)
    assert chosen.measured == ()
    assert all(getattr(chosen.config, name) == getattr(pins, name)
               for name in ("m", "k", "n", "k_mt") if getattr(pins, name) is not None)


def test_the_params_passed_are_the_ones_that_rank(monkeypatch):
    """choose prices with the params it is given, down to the tuner: with the calibrated params
    passed in, no default is loaded anywhere (each loader would fail), and the choice is the same."""
    p = load()
    expect = choose(Request(OPTIONS, SIZE)).config

    def no_default():
        raise AssertionError("loaded the default params")

    monkeypatch.setattr(search_module, "load", no_default)
    monkeypatch.setattr(tune_module, "load", no_default)
    assert choose(Request(OPTIONS, SIZE), params=p).config == expect
    assert choose(Request(OPTIONS, SIZE, Pins(m=64, k=64, n=64)), params=p).filled == ("k_mt",)
    with pytest.raises(AssertionError, match="loaded the default"):
        choose(Request(OPTIONS, SIZE))


def test_the_package_front_door_offers_the_request_and_the_search():
    """The package docstring's example: a Request through choose to a design that builds."""
    import gemm_gen
    from gemm_gen.design import build_design

    request = gemm_gen.Request(gemm_gen.Options("npu2", "i8", "i16"), gemm_gen.Problem(1024, 1024, 1024))
    chosen = gemm_gen.choose(request)
    assert chosen.config == choose(Request(OPTIONS, SIZE)).config
    assert build_design(chosen.config).config == chosen.config and "choose(Request(" in gemm_gen.__doc__
