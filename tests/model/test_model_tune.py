"""The tuner: exhaustive and exact under the model, fast, at least the paper's choice; --measure."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemm_gen.app.choice import choose_design as config_from_args
from gemm_gen.app.cli import main, parser
from gemm_gen.facts.errors import BuildError, GemmGenError, ToolchainMissing
from gemm_gen.model.fit import calibrate, paper
from gemm_gen.model.params import load
from gemm_gen.model.perf import Workload, estimate
from gemm_gen.search.space import RHO_MAX, tilings
from gemm_gen.search.tune import evaluate_all, tune
from gemm_gen.spec.checks import check_config, check_divisibility, check_l1
from gemm_gen.spec.config import GemmConfig
from gemm_gen.spec.request import Pins
from gemm_gen.spec.rules import l1, memtile, tiling


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def problem(row: paper.ArrayRow, col: bool = True) -> Workload:
    """The row's problem with the paper's options (C kept in its output type, as its kernels do)."""
    return Workload.new(row.device, row.M, row.K, row.N, row.dtype_in, row.dtype_out, col,
                       emulate_bf16_with_bfp16=row.emulate, stack_bytes=row.stack_bytes, acc=row.acc or "out")


@pytest.mark.parametrize("row", paper.STRIKING_T2 + paper.STRIKING_T3, ids=calibrate._aname)
def test_tuned_design_is_at_least_the_papers_choice(row):
    # the search's time (the paper: under 1 s) is measured by scripts/bench_tune.py, not asserted here
    result = tune(problem(row), 5)
    assert result.best.tops >= calibrate.array_tops(load(), row) * (1 - 1e-9)
    assert [c.tops for c in result.top] == sorted((c.tops for c in result.top), reverse=True)
    for c in result.top:
        check_config(c.config)
        assert c.l1_bytes <= c.config.dev.l1_bytes


def _brute_force(pr: Workload, params=None) -> np.ndarray:
    """Every (m, k, n, rho) and every multiple of k for k_mt that fits: sorted predicted times."""
    m, k, n, rho = tilings(pr.base, pr.size, Pins())
    r = pr.base.kernel.mmul[0]  # every asymmetry whose A tile (m / rho rows) fits a core's share is searched
    assert set(rho.tolist()) == {x for x in range(1, RHO_MAX + 1) if 2 * r * x <= m.max()}
    times = []
    K1 = -(-pr.K // k) * k
    for j in range(1, int((K1 // k).max()) + 1):
        keep = j * k <= K1
        mm, kk, nn, rr = m[keep], k[keep], n[keep], rho[keep]
        kmt = j * kk
        fit = memtile.fit(memtile.l2_pools(pr.base.l2_options, mm, kk, nn, kmt),
                          pr.base.dev.target(pr.base.array.cols)[1],
                          pr.base.dev.memtile_bytes, mm.size)
        if fit.any():
            times.append(estimate(pr, mm[fit], kk[fit], nn[fit], kmt[fit], params, rho=rr[fit]).time)
    return np.sort(np.concatenate(times))


@pytest.mark.parametrize("pr", [Workload.new("npu1", 520, 600, 700, "i8", "i16", True, task_span=1),
                                Workload.new("npu2", 640, 1000, 1536, "bf16", "bf16", False, task_span=1),
                                Workload.new("npu2", 300, 2000, 500, "i8", "i8", True, task_span=0)], ids=str)
def test_pruned_search_finds_the_exhaustive_optimum(pr):
    """With a task span given (1, or 0 priced in the vectorised closed form) the pruned search is exact."""
    every = _brute_force(pr)
    result = tune(pr, 5)
    got = sorted(c.time_s for c in result.top)
    assert got[0] == pytest.approx(every[0], rel=1e-12)
    assert np.allclose(got, every[: len(got)], rtol=1e-12)


@pytest.mark.parametrize("change", [{"write_cost": 0.3, "page_sharing": 1.0}, {"write_cost": 2.0},
                                    {"stream_gbps_256": 0.5}], ids=str)
def test_the_pruning_bound_holds_with_any_dram_constants(change):
    """The tuner prunes with a lower bound of the DRAM time: cheap writes, open pages or a tight
    stream ceiling must not make it cut the optimum."""
    pr = Workload.new("npu2", 640, 1000, 1536, "i8", "i32", False, task_span=1)
    p = load().with_dram("npu2", **change)
    every = _brute_force(pr, p)
    got = sorted(c.time_s for c in tune(pr, 5, params=p).top)
    assert np.allclose(got, every[: len(got)], rtol=1e-12)


@pytest.mark.parametrize("change", [{"write_cost": 0.3, "page_sharing": 1.0}, {"write_cost": 2.0}], ids=str)
def test_the_pruning_bound_is_below_every_k_mts_time(change):
    """_bound at q K chunks never exceeds the time of any k_mt with q chunks."""
    from gemm_gen.search.tune import _bound

    pr = Workload.new("npu2", 2048, 1536, 2048, "i8", "i32", False)
    p = load().with_dram("npu2", **change)
    m, k, n, rho = tilings(pr.base, pr.size, Pins())
    K1 = -(-pr.K // k) * k
    bound = _bound(pr, estimate(pr, m, k, n, K1, p, rho=rho), p)
    checked = 0
    for j in (1, 2, 3, 4, 6, 8):
        keep = np.nonzero(j * k <= K1)[0]
        kmt = j * k[keep]
        q = -(-pr.K // kmt)
        t = estimate(pr, m[keep], k[keep], n[keep], kmt, p, rho=rho[keep]).time
        assert np.all(bound.at(keep, q) <= t * (1 + 1e-12)), j
        checked += keep.size
    assert checked > 1000


def test_heat_map_data_has_the_best_k_mt_of_every_tiling():
    pr = Workload.new("npu1", 520, 600, 700, "i8", "i16", True, task_span=1)
    allc = evaluate_all(pr)
    m, k, n, _ = tilings(pr.base, pr.size, Pins())
    assert len(allc["m"]) <= m.size and allc["tops"].max() == pytest.approx(tune(pr, 1).best.tops)


def test_fixed_sizes_constrain_the_search(capsys):
    code, out, _ = run(capsys, "tune", "--dev", "npu2", "-M", "2048", "-K", "2048", "-N", "2048", "--dtype_in", "i8",
                       "--dtype_out", "i16", "-k", "64", "--top", "3", "--json")
    info = json.loads(out)
    assert code == 0 and len(info["top"]) == 3 and all(c["k"] == 64 for c in info["top"])
    assert info["predicted"] is True and info["ranked_by"] == "model"
    assert {"l1_fraction", "l2_fraction", "compute_bound_tops", "memory_bound_tops", "bound"} <= set(info["top"][0])


def test_tune_text_lists_bounds_and_memory_use(capsys):
    code, out, _ = run(capsys, "tune", "--dev", "npu1", "-M", "1024", "-K", "1024", "-N", "1024", "--top", "4")
    lines = out.splitlines()
    assert code == 0 and "PREDICTED" in lines[0] and "L1" in lines[1] and "L2" in lines[1] and len(lines) == 6


def test_tune_bad_input_exits_2(capsys):
    code, out, err = run(capsys, "tune", "--dev", "npu1", "-M", "64", "-K", "64", "-N", "64", "--dtype_in", "bf16",
                         "--dtype_out", "i8")
    assert code == 2 and out == "" and "dtype_out" in err


def test_config_without_tiles_is_the_tuned_design():
    a = parser().parse_args(["plan", "--dev", "npu2", "-M", "4096", "-K", "4096", "-N", "2048"])
    c = config_from_args(a)
    best = tune(Workload.new("npu2", 4096, 4096, 2048, convert_once=c.kernel.convert_once),
                1).best.config  # its kernel's
    assert (c.tiling.m, c.tiling.k, c.tiling.n, c.tiling.k_mt, c.tiling.rho) == (best.tiling.m, best.tiling.k,
                                                                                 best.tiling.n, best.tiling.k_mt,
                                                                                 best.tiling.rho)
    a = parser().parse_args(["plan", "--dev", "npu2", "-M", "4096", "-K", "4096", "-N", "2048", "--k-mt", "96"])
    assert config_from_args(a).tiling.k_mt == 96
    a = parser().parse_args(["plan", "--dev", "npu2", "-M", "4096", "-K", "4096", "-N", "2048", "-m", "64"])
    assert config_from_args(a).tiling.m == 64  # explicit tiles: the old defaults for the rest


# ---- --measure ---------------------------------------------------------------------------------------
@pytest.fixture
def fake_backends(monkeypatch):
    """A stand-in for gemm_gen.backends: 'measures' the reverse of the model's order."""
    calls = []

    def measure(config, iters, warmup):
        calls.append((config.tiling.m, config.tiling.k, config.tiling.n, config.tiling.k_mt, iters, warmup))
        return 1e-3 * (10 - len(calls))  # later candidates run faster

    monkeypatch.setattr("gemm_gen.app.tune_commands.measure", measure)
    return calls


def test_measure_reranks_by_measurement_with_a_progress_bar(capsys, fake_backends):
    args = ["tune", "--dev", "npu1", "-M", "1024", "-K", "1024", "-N", "1024", "--measure", "3", "--iters", "7",
            "--warmup", "2"]
    code, out, err = run(capsys, *args, "--json")
    info = json.loads(out)
    assert code == 0 and len(fake_backends) == 3 and all(c[4:] == (7, 2) for c in fake_backends)
    assert info["ranked_by"] == "measurement"
    measured = [c for c in info["top"] if "measured_time_us" in c]
    assert len(measured) == 3
    assert [c["measured_time_us"] for c in measured] == sorted(c["measured_time_us"] for c in measured)
    order = [(c[0], c[1], c[2], c[3]) for c in fake_backends]
    assert (measured[0]["m"], measured[0]["k"], measured[0]["n"], measured[0]["k_mt"]) == order[-1]
    assert "measuring on the NPU" in err and "3/3" in err


def test_measure_without_toolchain_exits_2_with_one_sentence(capsys, monkeypatch, fake_backends):
    def missing(config, iters, warmup):
        raise ToolchainMissing("XRT (pyxrt) is not installed", "install XRT and the NPU driver")

    monkeypatch.setattr("gemm_gen.app.tune_commands.measure", missing)
    code, out, err = run(capsys, "tune", "--dev", "npu1", "-M", "1024", "-K", "1024", "-N", "1024", "--measure", "2")
    last = [line for line in err.splitlines() if "cannot measure" in line]
    assert code == 2 and out == "" and len(last) == 1 and "XRT" in last[0]


def test_a_design_that_fails_on_the_npu_ranks_last_and_the_rest_are_measured(capsys, monkeypatch, fake_backends):
    """search.measure_candidates through the CLI: the first finalist fails to build (inf, no TOPS, null
    in the JSON), the others are measured and ranked above it."""
    def flaky(config, iters, warmup):
        fake_backends.append((config.tiling.m, config.tiling.k, config.tiling.n, config.tiling.k_mt))
        if len(fake_backends) == 1:
            raise BuildError("aiecc: the design does not fit")
        return 1e-3 * len(fake_backends)

    monkeypatch.setattr("gemm_gen.app.tune_commands.measure", flaky)
    args = ["tune", "--dev", "npu1", "-M", "1024", "-K", "1024", "-N", "1024", "--measure", "3"]
    code, out, _ = run(capsys, *args, "--json")
    top = json.loads(out)["top"]
    assert code == 0 and len(fake_backends) == 3
    assert [c["measured_tops"] is None for c in top[:3]] == [False, False, True]
    assert (top[2]["m"], top[2]["k"], top[2]["n"], top[2]["k_mt"]) == fake_backends[0]
    assert top[2]["measured_time_us"] is None and top[0]["measured_time_us"] < top[1]["measured_time_us"]
    fake_backends.clear()
    code, out, _ = run(capsys, *args)
    rows = [line for line in out.splitlines() if line.lstrip()[:1].isdigit()]
    assert code == 0 and len(fake_backends) == 3
    assert rows[2].rstrip().endswith(" -") and not rows[0].rstrip().endswith(" -"), out  # no TOPS for a failure


def test_no_valid_design_is_a_clear_error():
    with pytest.raises(GemmGenError, match="no valid design"):
        tune(Workload.new("npu1", 1024, 1024, 1024, "i8", "i8", True), 1, Pins(m=8, k=8, n=4096))


@pytest.mark.parametrize("row", paper.ATB_T2, ids=lambda r: f"{r.source[-7:]}-{r.m}x{r.k}x{r.n}-rho{r.rho}")
def test_tune_answers_the_atb_problems_at_least_as_well_as_their_designs(row):
    """atb Table 2's bfp16 problems: the tuner searches rho too, and its best predicted design is at
    least the paper's own (each validated: L1 per eq. 3, bfp16 tiles, shim wraps)."""
    pr = Workload.new("npu2", row.M, row.K, row.N, row.dtype_in, row.dtype_out, row.b_col_maj, dtype_b=row.dtype_b,
                     acc=row.acc or "out")  # the paper's C
    result = tune(pr, 3)
    assert result.best.tops >= calibrate.array_tops(load(), row) * (1 - 1e-9)
    assert {c.config.types.precision for c in result.top} == {result.best.config.types.precision}
    for c in result.top:
        check_config(c.config)
    assert max(c.config.tiling.rho for c in result.top) > 1  # asymmetric designs win these memory-bound problems


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([("npu2", "bfp16", "bfp16", None, "bf16"), ("npu2", "bfp16", "bfp16", None, "f32"),
                        ("npu2", "bf16", "bf16", "bfp16", None), ("npu2", "bfp16", "bfp16", None, None),
                        ("npu1", "i8", "i16", None, None), ("npu2", "bf16", "f32", None, None)]),
       st.integers(1, 16), st.integers(1, 40), st.integers(1, 16), st.sampled_from([1, 2, 3, 4, 6, 8]),
       st.sampled_from([None, "chess", "peano"]), st.sampled_from(["fixed", "mnk"]))
def test_the_tuners_l1_filter_accepts_exactly_what_the_configs_l1_check_accepts(types, mb, kb, nb, rho, compiler,
                                                                                 served):
    """The tuner keeps the k of each (m, n, rho) up to rules.l1.largest_k, over arrays of candidates;
    GemmConfig's L1 check (rules.l1.fits with the config's own numbers) accepts a tiling exactly when
    its k is within that bound (eq. 3 plus scratch, accumulator rows, and the overhead: the runtime
    parameter, the stack, aiecc's per-core static data; with chess, npu2 bf16 converts once: A and B
    bfp16 copies; bfp16 built with Peano has a 0x1700 stack). And the array form of the L1 total is
    the scalar form: one function serves both."""
    dev, t_in, t_out, t_b, acc = types
    probe = GemmConfig(dev, 1, 1, 1, 1, 1, 1, 1, t_in, t_out, dtype_b=t_b, acc=acc, compiler=compiler)
    r, s, t = probe.kernel.mmul
    m, k, n = 2 * r * mb * rho, s * kb, 2 * t * nb
    c = GemmConfig(dev, 4 * m, k, 8 * n, m, k, n, k, t_in, t_out, dtype_b=t_b, acc=acc, rho=rho, compiler=compiler,
                   runtime_sizes=served)
    pr = Workload.of(c)
    arr = (np.array([m]), np.array([n]), np.array([rho]))
    k_max = int(l1.largest_k(pr.base.l1_options, c.dev.l1_bytes, *arr, s)[0])
    try:
        check_l1(c)
        accepted = True
    except GemmGenError as e:
        assert "L1 overflow" in e.what
        accepted = False
    assert accepted == (k <= k_max)
    assert int(l1.total(pr.base.l1_options, arr[0], np.array([k]), arr[1], arr[2])[0]) == c.l1_bytes


@pytest.mark.parametrize("pr", [Workload.new("npu1", 2048, 8192, 2048, "i8", "i16", True),
                                Workload.new("npu2", 2048, 8192, 2048, "bf16", "bf16", False, compiler="chess"),
                                Workload.new("npu2", 2048, 8192, 2048, "bfp16", "bfp16", True, acc="bf16",
                                            runtime_sizes="mnk")], ids=str)
def test_every_tilings_largest_k_is_the_largest_the_l1_check_accepts(pr):
    """On the tuner's own candidates: for each (m, n, rho) it searches, its largest k passes
    GemmConfig's L1 check and one mmul step more does not (K is large enough that only L1 bounds k)."""
    m, k, n, rho = tilings(pr.base, pr.size, Pins())
    s = pr.base.kernel.mmul[1]
    keys = np.stack([m, n, rho], axis=1)
    groups, inverse = np.unique(keys, axis=0, return_inverse=True)
    k_top = np.zeros(len(groups), dtype=np.int64)
    np.maximum.at(k_top, inverse.ravel(), k)
    rng = np.random.default_rng(19)
    for i in rng.choice(len(groups), size=min(60, len(groups)), replace=False):
        mm, nn, rr = (int(x) for x in groups[i])
        kk = int(k_top[i])
        assert kk < 512 * s  # the search's own extent bound is not what stopped k
        check_l1(pr.config(mm, kk, nn, kk, rho=rr))
        with pytest.raises(GemmGenError, match="L1 overflow"):
            check_l1(pr.config(mm, kk + s, nn, kk + s, rho=rr))


@pytest.mark.parametrize("pr", [Workload.new("npu1", 1000, 700, 900, "i8", "i16", True),
                                Workload.new("npu2", 1000, 700, 900, "bfp16", "bfp16", False, acc="bf16"),
                                Workload.new("npu2", 1000, 700, 900, "bf16", "bf16", False,
                                             emulate_bf16_with_bfp16=True, convert_once=True)], ids=str)
def test_the_tuners_grid_is_exactly_what_the_divisibility_check_accepts(pr):
    """The tuner enumerates m, k, n on rules.tiling's steps: every candidate passes GemmConfig's
    divisibility check, and every m (per rho) and n up to the largest searched one that the check
    accepts is searched."""
    m, k, n, rho = tilings(pr.base, pr.size, Pins())
    st = tiling.steps(pr.base.kernel.mmul, pr.base.types.precision.block, pr.base.kernel.block)
    assert tiling.divisible(st, m, k, n, k, rho).all()
    if pr.base.kernel.block:  # the bfp16 kernels' super-blocks: whole 16 x 16 C blocks per call
        assert (m // rho % 16 == 0).all() and (n % 16 == 0).all()
    _, s, _ = pr.base.kernel.mmul

    def accepted(mm: int, nn: int, rr: int) -> bool:
        try:
            check_divisibility(pr.config(mm, s, nn, s, rho=rr))
        except GemmGenError:
            return False
        return True

    n0 = int(n.min())
    for rr in np.unique(rho).tolist():
        ms = set(m[rho == rr].tolist())
        assert ms == {x for x in range(1, max(ms) + 1) if accepted(x, n0, rr)}, rr
    ns = set(n.tolist())
    assert ns == {x for x in range(1, max(ns) + 1) if accepted(int(m.min()), x, 1)}
