"""The search space's rules (gemm_gen/search/space.py: RULES, `mask`, `k_mt_fit`) are the config's check over arrays.

Every rule a design's check (design.serve.check: checks.check_config, then the DMA walks' limits of
design/patterns.py) applies to a tiling is one of space.RULES, in the same order, computed on whole arrays of
candidates by the same rule functions (gemm_gen/spec/rules). These tests hold the two together: on random candidates of
many option families, the first rule the space says a candidate breaks is the rule its check (and its build)
names, and a candidate the space keeps builds; each rule is broken on purpose and refused by both; and the tuner
ranks only what the rules keep, so it never validates designs one by one (the fallback loop that spent 24 s on
4,844 checks before refusing `generate --dev npu2 -M 512 -N 512 -K 2188800`)."""

from __future__ import annotations

import re
import zlib

import numpy as np
import pytest

from gemm_gen.app.cli import main
from gemm_gen.design import build_design, patterns
from gemm_gen.design.grid import grid
from gemm_gen.design.serialize import dumps
from gemm_gen.design.serve import check, serve
from gemm_gen.design.tap import Tap
from gemm_gen.facts.errors import ConfigError, GemmGenError
from gemm_gen.model.perf import Workload
from gemm_gen.search import space
from gemm_gen.search import tune as tune_module
from gemm_gen.search.tune import tune
from gemm_gen.spec.config import GemmConfig
from gemm_gen.spec.request import Pins, Problem
from gemm_gen.spec.rules import decode_split, dma, walks

# what each rule's own check says (spec/checks.py, rules/, design/patterns.py), to tell which rule a check raised
SAYS = {
    "runtime tasks": r"BD tasks",
    "shared L1": r"--share-l1",
    "shared L1 split": r"--share-l1 .*(L1 objects per memtile object|hold an odd count)",
    "granularity": r"is not a multiple of|would cut a bfp16|super-block",
    "expansion": r"does not split into|bfp16 kernels have one variant",
    "loops": r"with Peano|unknown kernel loop",
    "group k": r"must cover whole groups",
    "code": r"dequantization pass .*exceed",
    "words": r"4-byte DMA word",
    "epilogue tile": r"the epilogue tile .* does not fit",
    "epilogue chunk": r"column-major B reaches the memtile",
    "A chunks": r"--a-col-maj on",
    "L1": r"L1 overflow",
    "memtiles": r"memtile \d+ cannot hold|channels would have to reach",
    "shim DMA": r"^shim ",
    "memtile and core DMA": r"^(memtile|core) |beyond the 48-bit shim address",
}

# option families (each with a size that makes some DMA limits bite): types, accumulators, layouts, columns,
# epilogues, int4, W4A16, bfp16 presets and B packings, the decode mapping, given kernel variants
FAMILIES = [
    ("npu1 bf16", dict(device="npu1"), (512, 4096, 512)),
    ("npu2 bf16 long K", dict(device="npu2"), (256, 2188800, 256)),
    ("npu2 i8 wide N", dict(device="npu2", dtype_in="i8", dtype_out="i8"), (256, 512, 3000000)),
    ("npu1 i8 i32 long K", dict(device="npu1", dtype_in="i8", dtype_out="i32"), (256, 700000, 256)),
    ("npu1 i16 k-flat", dict(device="npu1", dtype_in="i16", dtype_out="i32", kernel_loops="k-flat"),
     (512, 512, 512)),
    ("npu2 i8 jk-flat", dict(device="npu2", dtype_in="i8", dtype_out="i32", kernel_loops="jk-flat"),
     (512, 512, 512)),
    ("npu1 a_col one column", dict(device="npu1", a_col_maj=True, cols=1), (256, 30000, 256)),
    ("npu2 c_col tall", dict(device="npu2", dtype_in="i8", dtype_out="i32", c_col_maj=True), (1100000, 256, 256)),
    ("npu2 b_col bf16", dict(device="npu2", b_col_maj=True), (256, 300000, 256)),
    ("npu1 bias relu", dict(device="npu1", bias=True, activation="relu"), (256, 256, 256)),
    ("npu2 requant b_col", dict(device="npu2", dtype_in="i8", dtype_out="i16", requant="per_channel",
                                b_col_maj=True), (512, 4096, 512)),
    ("npu2 i8xi4 strips", dict(device="npu2", dtype_in="i8", dtype_b="i4", dtype_out="i8", b_pack="strips"),
     (512, 4096, 4096)),
    ("npu2 w4a16 jk-flat chess", dict(device="npu2", dtype_b="i4", group_size=128, kernel_loops="jk-flat",
                                      convert_once=False, compiler="chess"), (256, 1024, 1024)),
    ("npu1 w4a16 zero points", dict(device="npu1", dtype_b="i4", group_size=32, zero_points=True), (256, 512, 512)),
    ("npu2 config2 b_col", dict(device="npu2", dtype_in="bfp16", dtype_out="bfp16", acc="bfp16", b_col_maj=True),
     (512, 5120, 512)),
    ("npu2 config3", dict(device="npu2", dtype_in="bfp16", dtype_out="bfp16", acc="bf16"), (1024, 1024, 1024)),
    ("npu2 convert once", dict(device="npu2", convert_once=True), (512, 512, 512)),
    ("npu1 decode", dict(device="npu1", rows=1), (4, 2048, 2048)),
    # the split decode placement (spec/rules/decode_split.py: one row of one virtual column per core, B over every
    # shim channel but A's, C joined per physical column), sizes that make its B streams' and C's walks bite
    ("npu2 decode-split bf16 strips", dict(device="npu2", rows=1, cols=32, b_pack="strips"), (1, 4096, 4096)),
    ("npu2 decode-split bf16 long K", dict(device="npu2", rows=1, cols=32), (16, 200000, 4096)),
    ("npu2 decode-split b_col wide N", dict(device="npu2", rows=1, cols=32, b_col_maj=True), (2, 8192, 3000000)),
    ("npu1 decode-split i8", dict(device="npu1", rows=1, cols=16, dtype_in="i8", dtype_out="i8"), (8, 4096, 4096)),
    ("npu1 decode-split i8 long K", dict(device="npu1", rows=1, cols=16, dtype_in="i8", dtype_out="i32"),
     (4, 300000, 2048)),
    ("npu2 decode-split w4a16", dict(device="npu2", rows=1, cols=32, dtype_b="i4", group_size=128), (1, 4096, 4096)),
    # the in-place accumulator split at block granularity (spec/rules/l1.py: acc_block, c_split_blocks)
    ("npu2 bf16 x bfp16 f32", dict(device="npu2", dtype_b="bfp16", acc="f32"), (1024, 1024, 1024)),
    ("npu2 config2 f32", dict(device="npu2", dtype_in="bfp16", dtype_out="bfp16", acc="f32"), (512, 2048, 512)),
    ("npu2 bf16 convert once f32", dict(device="npu2", acc="f32", convert_once=True, emulate_bf16_with_bfp16=True),
     (512, 1024, 768)),
    ("npu1 i8 to i16", dict(device="npu1", dtype_in="i8", dtype_out="i16", acc="i32"), (512, 512, 512)),
    ("npu2 i8 via i32", dict(device="npu2", dtype_in="i8", dtype_out="i8", acc="i32"), (512, 2048, 512)),
    ("npu2 i16 via i64", dict(device="npu2", dtype_in="i16", dtype_out="i16", acc="i64"), (256, 1024, 512)),
]


def _open(options: dict, size: tuple[int, int, int]) -> GemmConfig:
    """A config of the family's options at its size, its tiling open (the tuner's base)."""
    M, K, N = size
    return GemmConfig(M=M, K=K, N=N, m=0, k=0, n=0, k_mt=0, **options)


def _sample(base: GemmConfig, count: int, seed: int) -> tuple[np.ndarray, ...]:
    """`count` random candidates of the space (m, k, n, rho) with a random k_mt each (j k-steps: one, a few, or as
    many as the BD fields and memtiles' capacity allow, or more)."""
    listed = space.tilings(base, base.size, Pins())
    rng = np.random.default_rng(seed)
    pick = rng.choice(listed.size, size=min(count, listed.size), replace=False)
    m, k, n, rho = (a[pick] for a in listed)
    j_hi = space.k_mt_steps_max(base, base.size, listed.take(pick))
    j = np.where(rng.random(pick.size) < 0.5, rng.integers(1, 5, pick.size),
                 np.maximum(j_hi + rng.integers(-1, 3, pick.size), 1))
    return m, k, n, j * k, rho


@pytest.mark.parametrize("name,options,size", FAMILIES, ids=[f[0] for f in FAMILIES])
def test_the_first_rule_the_space_says_is_the_one_the_check_names(name: str, options: dict,
                                                                   size: tuple[int, int, int]) -> None:
    """Random candidates: the space keeps one exactly when its check passes, and for one it refuses, the check
    raises the first rule the space says it breaks; `mask` and `k_mt_fit` together keep what every rule keeps."""
    base = _open(options, size)
    m, k, n, kmt, rho = _sample(base, 48, zlib.crc32(name.encode()))
    first = space.broken(base, base.size, m, k, n, kmt, rho)
    listed = space.Tilings(m, k, n, rho)
    keeps = space.mask(base, base.size, listed, Pins()) & space.k_mt_fit(base, base.size, m, k, n, kmt, rho)
    assert list(keeps) == list(first == len(space.RULES))
    for i in range(m.size):
        tiles = dict(m=int(m[i]), k=int(k[i]), n=int(n[i]), k_mt=int(kmt[i]), rho=int(rho[i]))
        if first[i] == len(space.RULES):
            check(base.with_(**tiles))
            continue
        rule = space.RULES[int(first[i])][0]
        with pytest.raises(GemmGenError) as raised:  # a given variant the tile cannot have: as the config is made
            check(base.with_(**tiles))
        assert re.search(SAYS[rule], raised.value.what), (rule, raised.value.what)


@pytest.mark.parametrize("name,options,size", [f for f in FAMILIES if max(f[2]) <= 4096],
                         ids=[f[0] for f in FAMILIES if max(f[2]) <= 4096])
def test_what_the_space_keeps_builds_and_what_it_refuses_does_not(name: str, options: dict,
                                                                  size: tuple[int, int, int]) -> None:
    """The full build (build_design) of candidates the space keeps succeeds, and of candidates it refuses
    raises the rule the space names."""
    base = _open(options, size)
    m, k, n, kmt, rho = _sample(base, 24, 7 + zlib.crc32(name.encode()))
    first = space.broken(base, base.size, m, k, n, kmt, rho)
    kept = [i for i in range(m.size) if first[i] == len(space.RULES)][:2]
    refused = [i for i in range(m.size) if first[i] < len(space.RULES)][:3]
    for i in kept + refused:
        tiles = dict(m=int(m[i]), k=int(k[i]), n=int(n[i]), k_mt=int(kmt[i]), rho=int(rho[i]))
        if i in kept:
            config = base.with_(**tiles)
            design = build_design(config)
            assert design.config == config and dumps(design)  # a whole design, written as `generate` writes it
            continue
        with pytest.raises(GemmGenError, match=SAYS[space.RULES[int(first[i])][0]]):
            build_design(base.with_(**tiles))


def test_the_random_candidates_break_the_rules_the_families_stress() -> None:
    """The families' random candidates are not all valid: together they break (first) at least these rules, so
    the agreement above is tested on refusals too."""
    seen = set()
    for name, options, size in FAMILIES:
        base = _open(options, size)
        m, k, n, kmt, rho = _sample(base, 48, zlib.crc32(name.encode()))
        seen |= {space.RULES[int(i)][0] for i in space.broken(base, base.size, m, k, n, kmt, rho)
                 if i < len(space.RULES)}
    assert {"loops", "group k", "code", "epilogue chunk", "A chunks", "memtiles", "shim DMA",
            "memtile and core DMA"} <= seen, seen


SERVED = [  # a design built for the largest size, the calls it serves (runtime sizes mn and mnk), and whether
    # some candidate the space keeps for the largest size serves only some of them (mn: the K walk)
    (dict(device="npu2", runtime_sizes="mn"), (1024, 4096, 2048), [(1000, 4096, 2000), (1, 4000, 2048),
                                                                  (512, 1000, 64)], True),
    (dict(device="npu1", dtype_in="i8", dtype_out="i8", runtime_sizes="mnk"), (4096, 2188800, 512),
     [(64, 700000, 512), (4096, 8, 100)], False),
    (dict(device="npu2", dtype_in="i8", dtype_out="i32", c_col_maj=True, runtime_sizes="mnk"), (900000, 256, 256),
     [(64, 256, 256), (900000, 100, 1)], False),
]


@pytest.mark.parametrize("options,built,sizes,refused", SERVED,
                         ids=[f"{o['device']}-{o['runtime_sizes']}" for o, _, _, _ in SERVED])
def test_what_the_space_says_a_design_serves_is_what_serve_says(options: dict, built: tuple[int, int, int],
                                                               sizes: list[tuple[int, int, int]],
                                                               refused: bool) -> None:
    """space.serves (tune_many's filter) against design.serve.serve, on random candidates the space keeps for
    the largest size: the same verdict for every call, the rule serve names being a DMA walk's or the K walk's."""
    base = _open(options, built)
    m, k, n, kmt, rho = _sample(base, 40, zlib.crc32(str(built).encode()))
    kept = space.mask(base, base.size, space.Tilings(m, k, n, rho), Pins()) & space.k_mt_fit(base, base.size, m, k,
                                                                                             n, kmt, rho)
    seen = set()
    for size in (Problem(*s) for s in sizes):
        says = space.serves(base, size, m, k, n, kmt, rho)
        for i in np.nonzero(kept)[0]:
            config = base.with_(m=int(m[i]), k=int(k[i]), n=int(n[i]), k_mt=int(kmt[i]), rho=int(rho[i]))
            try:
                serve(config, size)
                served = True
            except GemmGenError as e:
                served = False
                assert re.search(SAYS["shim DMA"] + "|" + SAYS["memtile and core DMA"] + "|k-steps per output tile",
                                 e.what), e.what
            assert bool(says[i]) == served, (config, size)
            seen.add(served)
    assert seen == ({True, False} if refused else {True})


def test_tune_many_validates_no_design_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """tune_many takes the head of its ranking that the rules keep (space.serves for each size), checking and
    serving no candidate one by one (but for the chosen design's loss at each size)."""
    from gemm_gen.search import tune_many as tm

    calls: list[object] = []
    real_serve, real_check = tm.serve, tm.check
    monkeypatch.setattr(tm, "serve", lambda c, s, *a: calls.append(("serve", s)) or real_serve(c, s, *a))
    monkeypatch.setattr(tm, "check", lambda c, *a: calls.append(("check", c)) or real_check(c, *a))
    base = _open(dict(device="npu2", runtime_sizes="mnk"), (1024, 4096, 2048))
    sizes = (Problem(1024, 4096, 2048), Problem(1, 4096, 2048), Problem(300, 1000, 700))
    result = tm.tune_many(base, sizes)
    for s in sizes:
        serve(result.config, s)
    assert [what for what, _ in calls] == ["check"] * len(sizes)  # _loss: each size's design built alone


# one config that breaks each rule (a given tiling at a given size), by rule name
BREAKS = {
    "runtime tasks": dict(device="npu1", M=448 * 20000, K=64, N=768 * 4, m=16, k=16, n=16, k_mt=16,
                          dtype_in="i8", dtype_out="i32"),
    "shared L1": dict(device="npu1", M=512, K=512, N=512, m=64, k=64, n=64, k_mt=64, share_l1="b", cols=1),
    # B split with 5 column-major L1 B tiles per memtile object (k_mt / k): past split_streams' 4 (a deadlock)
    "shared L1 split": dict(device="npu1", M=512, K=512, N=512, m=32, k=32, n=32, k_mt=160, share_l1="b",
                            b_col_maj=True, dtype_in="i8", dtype_out="i32"),
    "granularity": dict(device="npu1", M=512, K=512, N=512, m=64, k=64, n=64, k_mt=96),
    "expansion": dict(device="npu1", M=512, K=512, N=512, m=24, k=64, n=64, k_mt=64, expansion=(4, 4)),
    "loops": dict(device="npu1", M=512, K=512, N=512, m=64, k=256, n=64, k_mt=256, dtype_in="i8", dtype_out="i8",
                  kernel_loops="jk-flat"),
    "group k": dict(device="npu2", M=256, K=1024, N=1024, m=32, k=48, n=64, k_mt=48, dtype_b="i4", group_size=128),
    "code": dict(device="npu2", M=256, K=1024, N=1024, m=32, k=512, n=128, k_mt=512, dtype_b="i4", group_size=128,
                 kernel_loops="jk-flat", convert_once=False, compiler="chess"),
    "epilogue tile": dict(device="npu1", M=256, K=256, N=256, m=32, k=8, n=32, k_mt=8, dtype_in="i8",
                          dtype_out="i8", requant="per_channel", bias=True),
    "epilogue chunk": dict(device="npu2", M=512, K=4096, N=512, m=32, k=64, n=64, k_mt=128, dtype_in="i8",
                           dtype_out="i16", requant="per_channel", b_col_maj=True),
    "A chunks": dict(device="npu1", M=256, K=30000, N=256, m=32, k=32, n=32, k_mt=32, a_col_maj=True, cols=1),
    "L1": dict(device="npu1", M=512, K=512, N=512, m=128, k=128, n=128, k_mt=128),
    "memtiles": dict(device="npu1", M=512, K=65536, N=512, m=64, k=64, n=64, k_mt=16384),
    "shim DMA": dict(device="npu2", M=512, K=2188800, N=512, m=32, k=64, n=64, k_mt=128),
    # A^T's memtile object of 1025 k-steps: past mlir-aie's 1023 for a memtile BD dimension (static verifier)
    "memtile and core DMA": dict(device="npu1", M=64, K=8200, N=64, m=16, k=8, n=16, k_mt=8200, dtype_in="i8",
                                 dtype_out="i32", a_col_maj=True),
}


@pytest.mark.parametrize("rule", list(BREAKS))
def test_each_rule_broken_is_refused_by_the_space_and_by_the_check(rule: str) -> None:
    """A config that breaks the rule: the space's rule refuses its tiling, its check (and so its build) raises
    the rule's own message, and the space names that rule first."""
    tiles = {name: BREAKS[rule][name] for name in ("m", "k", "n", "k_mt", "rho") if name in BREAKS[rule]}
    base = GemmConfig(**{**BREAKS[rule], "m": 0, "k": 0, "n": 0, "k_mt": 0})  # its options, the tiling open
    names = [name for name, _, _ in space.RULES]
    _, _, fn = space.RULES[names.index(rule)]
    m, k, n, rho, kmt = (np.array([tiles.get(name, 1)]) for name in ("m", "k", "n", "rho", "k_mt"))
    assert not fn(base, base.size, m, k, n, rho, kmt).any()
    assert names[int(space.broken(base, base.size, m, k, n, kmt, rho)[0])] == rule
    with pytest.raises(GemmGenError, match=SAYS[rule]):  # a given variant the tile cannot have: as it is made
        check(GemmConfig(**BREAKS[rule]))


def test_a_given_variant_the_tile_cannot_have_is_named_before_the_config_rules() -> None:
    """A config is refused as it is made when a given expansion does not split its tile (spec/rules/defaults.variant),
    before check_config's rules run: the space names the expansion first too, though the tiling also breaks the
    runtime tasks' rule; off the tile grid, the config gets no variant and the check names the config's rules."""
    kw = dict(BREAKS["runtime tasks"], expansion=(2, 4))  # 16 x 16 x 16: n = 16 is no whole 2 x 4 clusters of 4x8x8
    base = GemmConfig(**{**kw, "m": 0, "k": 0, "n": 0, "k_mt": 0})
    names = [name for name, _, _ in space.RULES]
    one = [np.array([v]) for v in (16, 16, 16, 16, 1)]  # m, k, n, k_mt, rho
    assert names[int(space.broken(base, base.size, *one)[0])] == "expansion"
    assert not space.RULES[names.index("runtime tasks")][2](base, base.size, *one).any()
    with pytest.raises(ConfigError, match=SAYS["expansion"]):
        check(GemmConfig(**kw))
    off_grid = [np.array([v]) for v in (16, 16, 16, 24, 1)]  # k_mt = 24: not whole k-steps
    assert names[int(space.broken(base, base.size, *off_grid)[0])] == "runtime tasks"
    with pytest.raises(ConfigError, match=SAYS["runtime tasks"]):
        check(GemmConfig(**{**kw, "k_mt": 24}))


def test_the_word_rule_refuses_runs_that_cut_a_word() -> None:
    """checks.check_granularity's runs and the space's "words" rule: an i8 k_mt of 6 values (the granularity rule
    refuses it first on a real tiling) is no whole 32-bit word for either."""
    from gemm_gen.spec.checks import check_granularity

    config = GemmConfig("npu1", 512, 512, 512, 64, 6, 64, 6, "i8", "i8")
    ti = config.tiling
    one = [np.array([v]) for v in (ti.m, ti.k, ti.n, ti.rho, ti.k_mt)]
    names = [name for name, _, _ in space.RULES]
    assert not space.RULES[names.index("words")][2](config, config.size, *one).any()
    with pytest.raises(ConfigError, match=SAYS["words"]):
        check_granularity(config)


def test_the_refusal_of_an_impossible_size_names_the_limit_without_validating_designs(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """K = 2188800 bf16 puts A's rows 1094400 words apart, past every shim BD's 20-bit stride: no tiling can be
    built. The refusal is one line naming the limit, the value and a fix, and the tuner checks one design to word
    it (the old fallback loop checked 4,844)."""
    checked = []

    def counting(config: GemmConfig, budgets: bool = True) -> GemmConfig:
        checked.append(config)
        return check(config, budgets)

    monkeypatch.setattr(tune_module, "check", counting)
    code = main(["generate", "--dev", "npu2", "-M", "512", "-N", "512", "-K", "2188800", "--build-dir",
                 "/nonexistent/never"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "d1 stride 1094400 words exceeds the 20-bit field of a shim BD (1..1048576)" in err
    assert "; reduce" in err  # the fix
    assert len(checked) <= 2  # one per kernel weighed (emulated, convert-once): the representative's words


def test_the_tuner_ranks_only_what_the_rules_keep() -> None:
    """Every design the tuner returns was ranked, not validated one by one: none of its finalists is checked, and
    every one passes the check (the rules kept it)."""
    calls = []
    original = tune_module.check
    tune_module.check = lambda config, budgets=True: calls.append(config) or original(config, budgets)
    try:
        result = tune(Workload.of(_open(dict(device="npu2", kernel_loops="jk-flat", dtype_in="i8",
                                             dtype_out="i32"), (512, 512, 512))), 5)
    finally:
        tune_module.check = original
    assert not calls and result.rejected_by_validate == 0 and len(result.top) == 5
    for cand in result.top:
        check(cand.config)


SPLIT = [f for f in FAMILIES if "decode-split" in f[0]]


@pytest.mark.parametrize("name,options,size", SPLIT, ids=[f[0] for f in SPLIT])
def test_the_split_walks_the_space_keeps_are_the_ones_the_build_programs(name: str, options: dict,
                                                                          size: tuple[int, int, int]) -> None:
    """The split decode placement's B streams and joined C (spec/rules/walks.split_limits over arrays of candidates) fit
    one shim BD exactly where the build's tasks (design/patterns.split_b_task / split_c_task, one design at a
    time) fit, and a candidate that breaks one is refused with the build's message."""
    base = _open(options, size)
    m, k, n, kmt, rho = _sample(base, 48, 11 + zlib.crc32(name.encode()))
    keeps = np.zeros(m.shape, dtype=bool)
    said = np.empty(m.shape, dtype=object)
    for idx, call in space.call_plans(base, base.size, m, k, n, kmt, rho):
        b, c = (walks.grid(base.walk_options, op, m[idx], k[idx], n[idx], kmt[idx], rho[idx], call) for op in "BC")
        e = call.extents
        limits = [lim for lim, _ in walks.split_limits(b, c, e.last_row, e.last_col)]
        keeps[idx] = dma.keeps(limits)
        for pos, i in enumerate(idx):
            lim = dma.first_broken(limits, pos)
            said[i] = None if lim is None else lim.what(pos)
    seen = {True: 0, False: 0}
    for i in range(m.size):
        config = base.with_(m=int(m[i]), k=int(k[i]), n=int(n[i]), k_mt=int(kmt[i]), rho=int(rho[i]))
        call = config.call
        gb, gc = grid(config, "B", call), grid(config, "C", call)
        row, col = call.m_origin(call.m_blocks - 1), call.n_origin(call.n_blocks - 1)
        try:
            for s in range(len(decode_split.streams(config.dev))):
                patterns.split_b_task(gb, col // gb.unit.tile_cols, s)
            for pc in range(config.dev.columns):
                patterns.split_c_task(gc, row // gc.unit.tile_rows, col // gc.unit.tile_rows, pc)
        except GemmGenError as err:
            assert not keeps[i] and said[i] == err.raw_what, (i, said[i], err.raw_what)
            seen[False] += 1
            continue
        assert keeps[i], (i, said[i])
        seen[True] += 1
    assert seen[False] or name in ("npu2 decode-split w4a16",), seen  # the families make the split walks bite


@pytest.mark.parametrize("seed", range(4))
def test_the_word_walks_of_the_rules_equal_the_taps(seed: int) -> None:
    """spec/rules/dma.to_words over arrays (a unit outer dimension where a bfp16 run grows) moves the same words as
    Tap.to_words, tap by tap, and refuses the same taps."""
    from gemm_gen.facts.dtypes import BF16, BFP16, I4, I8

    rng = np.random.default_rng(seed)
    for _ in range(200):
        dims = int(rng.integers(1, 4))
        sizes = tuple(int(s) for s in rng.integers(1, 6, dims))
        strides = tuple(int(s) for s in rng.choice([0, 1, 2, 4, 8, 12], dims))
        tap = Tap(int(rng.choice([0, 4, 8])), sizes, strides)
        for unit in (I8, BF16, BFP16, I4):
            words, limits = dma.to_words(dma.Walk(np.array([tap.offset]), tuple(np.array([s]) for s in sizes),
                                                  tuple(np.array([s]) for s in strides)), unit)
            try:
                expected = tap.to_words(unit).indices()
            except GemmGenError:
                assert not np.all(dma.keeps(limits))
                continue
            assert np.all(dma.keeps(limits))
            got = Tap(int(np.atleast_1d(words.offset)[0]), tuple(int(np.atleast_1d(s)[0]) for s in words.sizes),
                      tuple(int(np.atleast_1d(s)[0]) for s in words.strides)).indices()
            assert list(got) == list(expected)


def test_a_problem_of_several_padding_classes_is_planned_per_class() -> None:
    """space.call_plans: the candidates' calls, one CallPlan per way the host pads and the last block moves, each
    equal (padded operands, moved blocks, leading dimensions) to the candidate's own config's call."""
    base = _open(dict(device="npu2", dtype_in="i8", dtype_out="i8"), (1000, 777, 333))
    listed = space.tilings(base, base.size, Pins())
    m, k, n, rho = (a[::97] for a in listed)
    kmt = k * 3
    seen = 0
    for idx, call in space.call_plans(base, base.size, m, k, n, kmt, rho):
        for pos, i in enumerate(idx[:5]):
            own = base.with_(m=int(m[i]), k=int(k[i]), n=int(n[i]), k_mt=int(kmt[i]), rho=int(rho[i])).call
            assert (own.padded, own.shift_m, own.shift_n) == (call.padded, call.shift_m, call.shift_n)
            assert [own.ld(op) for op in "ABC"] == [int(np.broadcast_to(call.ld(op), idx.shape)[pos]) for op in "ABC"]
            assert own.m_origin(own.m_blocks - 1) == int(np.broadcast_to(call.m_origin(call.m_blocks - 1),
                                                                         idx.shape)[pos])
            seen += 1
    assert seen > 5


def test_a_problem_too_large_for_memory_is_refused_before_the_tuner(monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """`simulate` of 65536^3 needs hundreds of GB: refused in one line before any tiling is listed."""
    def no_tuner(*args: object, **kw: object) -> None:
        raise AssertionError("the tuner ran")

    monkeypatch.setattr("gemm_gen.search.space.tilings", no_tuner)
    assert main(["simulate", "-M", "65536", "-K", "65536", "-N", "65536"]) == 2
    err = capsys.readouterr().err
    assert "GB of memory" in err and len(err.strip().splitlines()) == 1


def test_each_rule_is_listed_once_in_the_checks_order() -> None:
    """RULES names each rule once, and every one has a message to be told by."""
    names = [name for name, _, _ in space.RULES]
    assert len(names) == len(set(names)) == len(SAYS) and set(names) == set(SAYS)


@pytest.mark.parametrize("flags,says", [
    (["--a-col-maj"], "takes row-major A and C"),
    (["--b-pack", "strips", "--b-col-maj"], "of a scalar B takes a row-major B"),
])
def test_the_split_placements_untiled_rules_refuse_before_any_tiling_is_listed(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], flags: list[str], says: str) -> None:
    """The split decode placement's rules that no tiling changes (checks.check_split, the strips of a scalar B) are
    the tuner's first question (tune.check_problem): refused in one line before the space lists a tiling, so no
    candidate the rules keep is refused by them later."""
    def no_tilings(*args: object, **kw: object) -> None:
        raise AssertionError("the space listed tilings")

    monkeypatch.setattr("gemm_gen.search.space.tilings", no_tilings)
    assert main(["tune", "--dev", "npu2", "-M", "1", "-K", "4096", "-N", "4096", "--mapping", "decode-split",
                 *flags]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err


def test_the_tuner_keeps_b_splits_l1_objects_per_memtile_object_within_the_rule() -> None:
    """B split's rule reads k_mt (k_mt / k column-major L1 B tiles per memtile object: shared_l1.split_streams), so
    the space applies it per k_mt the model walks: the tuner's choice for npu2 i8 4096^3 with B column-major, which
    would take 9 L1 objects per memtile object (128x152x80, k_mt 1368) if the rule ran before k_mt was known, passes
    the config's check."""
    from gemm_gen import search
    from gemm_gen.model.params import load
    from gemm_gen.spec.request import Options, Request

    chosen = search.choose(Request(Options("npu2", "i8", "i8", True, share_l1="b"), Problem(4096, 4096, 4096)),
                           load()).config
    assert 1 < chosen.b_per_l2 <= 4
    check(chosen)
