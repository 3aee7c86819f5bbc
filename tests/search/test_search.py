"""search.choose: a request (options, size, pins) becomes a design in one step; what it filled in is
named; a measurement the caller passes re-ranks the model's finalists, a failed finalist scoring inf."""

from __future__ import annotations

import math

import pytest

import gemm_gen.search.choosing as search_module
import gemm_gen.search.tune as tune_module
from gemm_gen.facts.errors import BuildError, ToolchainMissing
from gemm_gen.model.params import load
from gemm_gen.model.perf import Workload
from gemm_gen.search import MEASURED_FINALISTS, choose, open_config
from gemm_gen.search.tune import tune
from gemm_gen.spec.request import Options, Pins, Problem, Request

OPTIONS = Options("npu2", "i8", "i16")
SIZE = Problem(1024, 1024, 1024)


def test_an_open_tiling_is_the_models_best_and_says_what_it_filled():
    chosen = choose(Request(OPTIONS, SIZE))
    best = tune(Workload.of(open_config(Request(OPTIONS, SIZE))), 1).best.config
    assert (chosen.config.tiling.m, chosen.config.tiling.k, chosen.config.tiling.n, chosen.config.tiling.k_mt,
            chosen.config.tiling.rho,
            chosen.config.runtime.task_span) == (best.tiling.m, best.tiling.k, best.tiling.n, best.tiling.k_mt,
                                                 best.tiling.rho, best.runtime.task_span)
    spanned = ("task_span",) if best.options.task_span is not None else ()  # the open span: the model's choice too
    assert chosen.filled == ("m", "k", "n", "k_mt", "rho", *spanned) and chosen.measured == ()


def test_a_pinned_tiling_is_kept_and_nothing_is_filled():
    pins = Pins(64, 64, 64, 256, 1)
    chosen = choose(Request(OPTIONS, SIZE, pins))
    c = chosen.config
    assert (c.tiling.m, c.tiling.k, c.tiling.n, c.tiling.k_mt, c.tiling.rho) == (64, 64, 64, 256,
                                                                                 1) and not chosen.chose_anything


def test_pinned_tiles_get_the_models_k_mt_only():
    chosen = choose(Request(OPTIONS, SIZE, Pins(m=64, k=64, n=64)))
    assert chosen.filled == ("k_mt",) and chosen.config.tiling.k_mt % 64 == 0


def test_the_request_keeps_what_the_user_gave_and_derives_the_rest():
    chosen = choose(Request(Options("npu2", "bf16", "bf16", stack_bytes=4096), Problem(512, 512, 512)))
    assert chosen.config.array.stack_bytes == 4096 and chosen.config.types.acc == "f32"


def test_a_measurement_re_ranks_the_models_finalists():
    """The fake measurement reverses the model's order: the model's worst finalist is measured
    fastest and is chosen; every finalist carries its time, fastest first."""
    model_order = [c.config for c in tune(Workload.of(open_config(Request(OPTIONS, SIZE))), MEASURED_FINALISTS).top]
    seen = []

    def measure(c):
        seen.append(c)
        return 1.0 + len(model_order) - [(x.tiling.m, x.tiling.k, x.tiling.n, x.tiling.k_mt,
                                          x.tiling.rho) for x in model_order].index(
            (c.tiling.m, c.tiling.k, c.tiling.n, c.tiling.k_mt, c.tiling.rho))

    chosen = choose(Request(OPTIONS, SIZE), measure=measure)
    assert len(seen) == len(model_order) == MEASURED_FINALISTS
    last = model_order[-1]
    c = chosen.config
    assert (c.tiling.m, c.tiling.k, c.tiling.n, c.tiling.k_mt) == (last.tiling.m, last.tiling.k, last.tiling.n,
                                                                   last.tiling.k_mt)
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
    assert all(chosen.config.value(name) == getattr(pins, name)
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


# ---- the kernel of npu2 bf16: emulated, or converting A and B to bfp16 once ------------------------
BF16 = Options("npu2", "bf16", "bf16")
BF16_SIZE = Problem(1024, 2048, 1024)


def _kernel_params(slower: str):
    """The calibrated params with one kernel made slower: the emulated one (its per-mmul conversion
    cost) or the convert-once one (the bfp16 kernels' per-cluster and per-k-step losses)."""
    p = load()
    if slower == "emulated":
        return p.with_(bf16_via_bfp16_cycles=4 * p.bf16_via_bfp16_cycles + 4)
    return p.with_(bfp16_overhead=4 * p.bfp16_overhead + 40, bfp16_step_cycles=4 * p.bfp16_step_cycles + 400)


def _tuned_time(options: Options, once: bool, p) -> float:
    """The tuner's best predicted time for one kernel, tuned on its own (its own L1, its own tiles)."""
    request = Request(options.__class__(**{**options.__dict__, "convert_once": once}), BF16_SIZE)
    return tune(Workload.of(open_config(request)), 1, params=p).best.time_s


@pytest.mark.parametrize("slower", ["emulated", "convert-once", None])
def test_an_open_kernel_is_the_one_the_model_predicts_faster(slower):
    """With the convert-once option open, each kernel is tuned with its own tiles and the faster by
    the model wins; params that slow one kernel or the other move the choice (not a fixed answer)."""
    p = load() if slower is None else _kernel_params(slower)
    chosen = choose(Request(BF16, BF16_SIZE), p)
    times = {once: _tuned_time(BF16, once, p) for once in (False, True)}
    faster = min(times, key=lambda once: (times[once], once))
    assert chosen.config.kernel.convert_once is faster and "convert_once" in chosen.filled
    assert [kern.convert_once for kern in chosen.kernels] == [faster, not faster]
    for kern in chosen.kernels:  # the reported times are the tuner's own
        assert kern.config is not None and kern.config.kernel.convert_once is kern.convert_once
        assert kern.predicted_s == pytest.approx(times[kern.convert_once], rel=1e-12)
    if slower is not None:
        assert chosen.config.kernel.convert_once is (slower == "emulated")


def test_both_ways_of_the_kernel_choice_happen():
    """The two params of the test above really pull the choice both ways."""
    picks = {choose(Request(BF16, BF16_SIZE), _kernel_params(slower)).config.kernel.convert_once
             for slower in ("emulated", "convert-once")}
    assert picks == {False, True}


@pytest.mark.parametrize("once", [False, True])
def test_an_explicit_kernel_is_kept(once):
    """--convert-once 0 / 1 is the user's: kept even where the model prefers the other kernel."""
    options = Options("npu2", "bf16", "bf16", convert_once=once)
    for slower in ("emulated", "convert-once"):
        chosen = choose(Request(options, BF16_SIZE), _kernel_params(slower))
        assert chosen.config.kernel.convert_once is once
        assert chosen.kernels == () and "convert_once" not in chosen.filled


def test_each_kernels_design_holds_its_own_l1_budget():
    """The convert-once candidate's tiles leave L1 room for its A and B bfp16 copies; both candidates
    pass check_config."""
    from gemm_gen.spec.checks import check_config

    for kern in choose(Request(BF16, Problem(4096, 4096, 4096))).kernels:
        c = kern.config
        assert c is not None and check_config(c) is c and c.l1_bytes <= c.dev.l1_bytes
        assert ("A bfp16" in c.l1_parts and "B bfp16" in c.l1_parts) is kern.convert_once


def test_pinned_tiles_too_large_for_the_copies_keep_the_emulated_kernel():
    """The paper's 112x48x96 leaves no L1 for the convert-once copies: that kernel has no design, the
    emulated one is taken, and the reason is kept."""
    chosen = choose(Request(BF16, Problem(4032, 4224, 4608), Pins(112, 48, 96, 384, 1)), _kernel_params("emulated"))
    assert chosen.config.kernel.convert_once is False and chosen.kernels[0].convert_once is False
    assert chosen.kernels[1].config is None and "L1" in chosen.kernels[1].why_not


@pytest.mark.parametrize("options", [Options("npu1", "bf16", "bf16"), Options("npu2", "i8", "i16"),
                                     Options("npu2", "bf16", "bf16", emulate_bf16_with_bfp16=False)], ids=str)
def test_other_types_weigh_no_kernel_and_keep_the_tuners_choice(options):
    """Where the convert-once kernel cannot run (npu1, integers, bf16 off the bfp16 datapath) nothing
    is weighed and the tuner's design is the one it was."""
    chosen = choose(Request(options, SIZE))
    best = tune(Workload.of(open_config(Request(options, SIZE))), 1).best.config
    assert chosen.kernels == () and "convert_once" not in chosen.filled and chosen.config == best
    assert chosen.config.kernel.convert_once is False


def test_a_measurement_weighs_both_kernels_finalists(monkeypatch):
    """A measured choice re-ranks the model's best designs of either kernel: the finalists are the
    fastest predicted of both kernels' own finalists, and the measurement orders them."""
    p = load()
    tuned_for = []

    def recording_tune(pr, *args, **kw):
        tuned_for.append(bool(pr.base.kernel.convert_once))
        return tune(pr, *args, **kw)

    monkeypatch.setattr(search_module, "tune", recording_tune)
    chosen = choose(Request(BF16, BF16_SIZE), p, lambda config: 1.0 if config.kernel.convert_once else 2.0)
    assert sorted(tuned_for[-2:]) == [False, True]  # each kernel's finalists (after tuning each kernel's design)
    union = sorted([c for kern in chosen.kernels for c in tune(Workload.of(open_config(Request(
        Options("npu2", "bf16", "bf16", convert_once=kern.convert_once), BF16_SIZE))), MEASURED_FINALISTS,
        params=p).top], key=lambda c: c.time_s)[:MEASURED_FINALISTS]  # the faster kernel's first on ties
    assert [c.config for c in chosen.measured] == sorted((c.config for c in union),
                                                         key=lambda c: 1.0 if c.kernel.convert_once else 2.0)


def test_plan_says_which_kernel_and_why(capsys):
    """`gemm-gen plan` names the kernel it chose and both kernels' predicted times, labelled."""
    from gemm_gen.app.cli import main

    args = ["plan", "--dev", "npu2", "-M", "1024", "-K", "2048", "-N", "1024"]
    assert main(args) == 0
    text = capsys.readouterr().out
    chosen = choose(Request(BF16, BF16_SIZE))
    assert "PREDICTED faster" in text and f"the {chosen.kernels[0].name} kernel" in text
    for kern in chosen.kernels:
        assert f"predicted {kern.predicted_s * 1e6:,.0f} us" in text
    assert main([*args, "--convert-once", "0"]) == 0
    assert "PREDICTED faster" not in capsys.readouterr().out


def test_tune_ranks_both_kernels_where_the_option_is_open(capsys):
    """`gemm-gen tune` ranks the designs of both kernels together when the option is open, so its first
    design is the one choose takes; with the kernel given, only that kernel's designs."""
    import json

    from gemm_gen.app.cli import main

    args = ["tune", "--dev", "npu2", "-M", "1024", "-K", "2048", "-N", "1024", "--top", "40", "--json"]
    assert main(args) == 0
    top = json.loads(capsys.readouterr().out)["top"]
    chosen = choose(Request(BF16, BF16_SIZE)).config
    assert top[0]["convert_once"] is chosen.kernel.convert_once and (top[0]["m"], top[0]["k"], top[0]["n"]) == (
        chosen.tiling.m, chosen.tiling.k, chosen.tiling.n)
    assert [t["predicted_time_us"] for t in top] == sorted(t["predicted_time_us"] for t in top)
    assert {t["convert_once"] for t in top} == {False, True}  # both kernels' designs are in the ranking
    assert main([*args, "--convert-once", "0"]) == 0
    assert all("convert_once" not in t for t in json.loads(capsys.readouterr().out)["top"])


def test_a_design_for_several_sizes_weighs_the_kernels_by_weighted_time():
    """With several sizes, each kernel's shared design is priced over all of them (weighted) and the
    smaller weighted time wins; each reported time is that kernel's design's weighted prediction."""
    from gemm_gen.model.perf import estimate_config

    sizes = (Problem(512, 1024, 512), Problem(1024, 2048, 1024))
    pins = Pins(sizes=sizes, weights=(3.0, 1.0))
    chosen = choose(Request(Options("npu2", "bf16", "bf16", runtime_sizes="mnk"), Problem(1024, 2048, 1024), pins))
    p = load()
    for kern in chosen.kernels:
        assert kern.config is not None
        weighted = sum(w * float(estimate_config(kern.config, p, call=s).time) for s, w in zip(sizes, (3.0, 1.0)))
        assert kern.predicted_s == pytest.approx(weighted, rel=1e-12)
    assert chosen.kernels[0].predicted_s <= chosen.kernels[1].predicted_s
    assert chosen.config == chosen.kernels[0].config and "convert_once" in chosen.filled
