"""GemmConfig: budgets against the paper's own tables, padding, and every limit's error."""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import re

import pytest

from gemm_gen.design import build_design
from gemm_gen.design.channels import dma_channels
from gemm_gen.design.serve import check
from gemm_gen.facts import precision
from gemm_gen.facts.devices import TileKind
from gemm_gen.facts.errors import ConfigError, DmaLimitError, GemmGenError
from gemm_gen.model.fit.paper import ArrayRow
from gemm_gen.sim import simulate
from gemm_gen.spec import config as config_module
from gemm_gen.spec import request as spec
from gemm_gen.spec.checks import check_array, check_config, check_divisibility, check_queue
from gemm_gen.spec.config import FIELDS, PAPER_TILES, GemmConfig, default_k_mt, default_tiles
from gemm_gen.spec.request import OPTION_NAMES, TILING_NAMES, Options, Problem, Tiling
from gemm_gen.spec.rules import defaults, memtile, tiling
from gemm_gen.spec.rules import kernel_variant as kv
from gemm_gen.spec.rules.defaults import resolve

# Striking the Balance, Tables 2 and 3 (B column-major): kernel, L1 KB, L2 KB (all memtiles), GEMM
# size. k_mt is not printed per row; it follows from the L2 column (sec. 5.2.2 gives the first rows').
PAPER_STACK = ArrayRow.stack_bytes  # the papers' xchesscc stack, 1 KiB (Striking eq. 5)
PAPER_ROWS = [
    ("npu1", "i8", "i8", (112, 112, 112), 448, 61.3, 980, (4032, 4032, 4032)),
    ("npu1", "i8", "i8", (112, 104, 128), 416, 62.8, 1004, (4032, 4160, 4096)),
    ("npu1", "i8", "i16", (96, 112, 96), 448, 60.0, 960, (4224, 4032, 4224)),
    ("npu1", "i8", "i16", (80, 104, 128), 416, 62.3, 996, (4160, 4160, 4096)),
    ("npu1", "i8", "i32", (80, 88, 96), 352, 60.3, 964, (4160, 4224, 4224)),
    ("npu1", "i8", "i32", (64, 80, 128), 320, 62.0, 992, (4096, 4160, 4096)),
    ("npu1", "bf16", "bf16", (96, 56, 96), 224, 60.0, 960, (4224, 4032, 4224)),
    ("npu1", "bf16", "bf16", (96, 48, 112), 192, 60.0, 960, (4224, 4032, 4032)),
    ("npu2", "i8", "i8", (144, 72, 144), 432, 60.8, 2106, (4032, 4320, 4608)),
    ("npu2", "i8", "i8", (160, 64, 144), 384, 60.5, 2064, (4480, 4224, 4608)),
    ("npu2", "i8", "i16", (128, 72, 112), 432, 61.8, 2084, (4096, 4320, 4480)),
    ("npu2", "i8", "i16", (160, 64, 96), 384, 62.0, 2016, (4480, 4224, 4608)),
    ("npu2", "i8", "i32", (96, 64, 96), 384, 60.0, 2016, (4224, 4224, 4608)),
    # the paper prints 62.3 KB L1 for this row; its buffers add up to 62.75 KB (2*128*56 + 2*56*80
    # + 128*80*4 bytes), so we check the sum, not the printed figure
    ("npu2", "i8", "i32", (128, 56, 80), 336, 62.75, 2036, (4096, 4032, 4480)),
    ("npu2", "bf16", "bf16", (112, 48, 96), 384, 60.0, 2496, (4032, 4224, 4608)),
    ("npu2", "bf16", "bf16", (160, 40, 80), 320, 62.5, 2400, (4480, 4160, 4480)),
]


@pytest.mark.parametrize("dev,t_in,t_out,tile,k_mt,l1_kb,l2_kb,size", PAPER_ROWS)
def test_paper_budgets(dev, t_in, t_out, tile, k_mt, l1_kb, l2_kb, size):
    m, k, n = tile
    # the paper compiled with xchesscc (sec. 5.1) and reserved 1 KiB of stack (eq. 5; ours is 0xD00): its
    # XDNA2 bf16 kernels run via bfp16 with the AIE API's per-mmul emulation (no convert-once scratch)
    # and kept C in its output type between calls (--acc out), as mlir-aie's kernels do
    c = check_config(GemmConfig(dev, *size, m, k, n, k_mt, t_in, t_out, True, compiler="chess", convert_once=False,
                   acc="out", stack_bytes=PAPER_STACK))
    parts = c.l1_parts
    buffers = parts["A"] + parts["B"] + parts["C"]
    assert abs(buffers / 1024 - l1_kb) <= 0.05  # the paper prints one decimal
    assert sum(c.memtile_bytes_used()) == l2_kb * 1024
    assert c.call.wasted_fraction == 0  # the paper's sizes are multiples of its native size
    assert c.call.covered == size


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("types", [("bf16", "bf16", None, None), ("bf16", "f32", None, None), ("i8", "i8", None, None),
                                   ("i8", "i32", None, None), ("i16", "i16", None, None),
                                   ("bf16", "bf16", "bfp16", None), ("bfp16", "bfp16", None, None),
                                   ("bfp16", "bfp16", None, "bf16")])
@pytest.mark.parametrize("compiler", [None, "peano", "chess"])
@pytest.mark.parametrize("emulate", [None, False])
def test_every_default_stack_is_at_least_mlir_aies(dev, types, compiler, emulate):
    """Whatever the kernel and its compiler, a core's default stack is at least what every mlir-aie
    matrix multiplication gives its cores (0xD00): 0x400, aiecc's own default, overflowed Peano 22
    frames (mlir-air PR #1980). Peano-built bfp16 kernels get at least mlir-aie's Peano config1 stack
    (0x1700) less its A copy, which our kernels keep in their own buffer."""
    from gemm_gen.facts.devices import (
        ATB_CONFIG1_A_STACK_COPY,
        MLIR_AIE_CORE_DEFAULT_STACK,
        MLIR_AIE_MM_STACK,
        PEANO_ATB_STACK,
    )

    t_in, t_out, t_b, acc = types
    block = "bfp16" in (t_in, t_b)
    if block and dev == "npu1":
        return  # no bfp16 datapath
    c = GemmConfig(dev, 1, 1, 1, 0, 0, 0, 0, t_in, t_out, dtype_b=t_b, acc=acc, compiler=compiler,
                   emulate_bf16_with_bfp16=None if block else emulate)
    assert c.array.stack_bytes >= MLIR_AIE_MM_STACK > MLIR_AIE_CORE_DEFAULT_STACK
    if block and c.kernel.compiler == "peano":
        assert c.array.stack_bytes >= PEANO_ATB_STACK - ATB_CONFIG1_A_STACK_COPY
        assert c.array.stack_bytes == max(0xE00, GemmConfig(dev, 1, 1, 1, 0, 0, 0, 0, t_in, t_out, dtype_b=t_b, acc=acc,
                                                      compiler="chess").array.stack_bytes)
    assert c.l1_overhead["stack"] == c.array.stack_bytes


def test_paper_tiles_are_the_defaults():
    """...for C kept in its output type, as the papers' kernels keep it."""
    for (dev, t_in, t_out), tiles in PAPER_TILES.items():
        assert default_tiles(dev, t_in, t_out, acc="out") == tiles
    # a K smaller than k_mt does not pad K beyond one kernel step
    assert default_tiles("npu2", "bf16", "bf16", K=100, acc="out")[3] == 144
    assert default_k_mt("npu2", "bf16", "bf16", 40, acc="out") == 400  # 384 rounded to a multiple of 40


@pytest.mark.parametrize("dev,t_in,t_out", [("npu1", "i16", "i32"), ("npu2", "bf16", "f32"),
                                            ("npu2", "i16", "i16"), ("npu1", "bf16", "f32")])
def test_fallback_tiles_fit(dev, t_in, t_out):
    for acc in (None, "out"):  # the default accumulator, and C in its own type
        m, k, n, k_mt = default_tiles(dev, t_in, t_out, acc=acc)
        check_config(GemmConfig(dev, 1024, 1024, 1024, m, k, n, k_mt, t_in, t_out, acc=acc))


def test_default_tiles_leave_room_for_the_default_accumulator():
    """The papers' tiles keep C in its output type; with C accumulated in i32 / f32 they overflow L1,
    so the defaults for a wide accumulator are tiles that fit it."""
    for (dev, t_in, t_out), tiles in PAPER_TILES.items():
        c = GemmConfig(dev, 4096, 4096, 4096, *tiles, t_in, t_out, True)
        m, k, n, k_mt = default_tiles(dev, t_in, t_out)
        assert default_tiles(dev, t_in, t_out, acc=c.types.acc) == (m, k, n, k_mt)  # None is the default
        if c.types.precision.converts_c:
            assert (m, k, n, k_mt) != tiles
        check_config(GemmConfig(dev, 4096, 4096, 4096, m, k, n, k_mt, t_in, t_out, True))


def test_padding_and_waste():
    c = GemmConfig("npu2", 4096, 4096, 2048, 112, 48, 96, 384, "bf16", "bf16", True)
    assert c.native == (448, 384, 768)
    assert c.call.covered == (4480, 4224, 2304)
    assert c.call.wasted_fraction == pytest.approx(1 - 4096 * 4096 * 2048 / (4480 * 4224 * 2304))
    assert c.call.k_steps == 88 and c.call.tiles_per_core == 10 * 3


def _err(exc: type[Exception], **changes: object) -> str:
    # the paper's npu2 bf16 design, C kept in its output type as the paper's kernel does
    base = dict(device="npu2", M=4032, K=4224, N=4608, m=112, k=48, n=96, k_mt=384, dtype_in="bf16",
                dtype_out="bf16", b_col_maj=True, acc="out")
    base.update(changes)
    with pytest.raises(exc) as info:
        check(GemmConfig(**base))  # type: ignore[arg-type]
    msg = str(info.value)
    assert "\n" not in msg and ";" in msg  # one line: what is wrong; how to fix it
    return msg


def test_l1_overflow():
    msg = _err(ConfigError, m=128, k=64, n=128)
    assert "L1 overflow" in msg and "65536" in msg and "98304" in msg.replace(",", "") or "L1" in msg
    assert "reduce m, k or n" in msg
    # the paper's tile just fits with its chess 1 KiB stack, not with mlir-aie's 0xD00 (our default)
    check_config(GemmConfig("npu2", 4032, 4320, 4608, 144, 72, 144, 432, "i8", "i8", True, acc="out",
               stack_bytes=PAPER_STACK))
    assert "stack 3328" in _err(ConfigError, dtype_in="i8", dtype_out="i8", m=144, k=72, n=144, k_mt=432,
                                M=4032, K=4320, N=4608, acc="out")
    # and not with C accumulated in i32: the message names --acc out
    assert "--acc out" in _err(ConfigError, dtype_in="i8", dtype_out="i8", m=144, k=72, n=144, k_mt=432,
                                M=4032, K=4320, N=4608, acc=None)
    assert "L1 overflow" in _err(ConfigError, dtype_in="i8", dtype_out="i16", m=128, k=72, n=112, k_mt=432,
                                 M=4096, K=4320, N=4480, stack_bytes=0xD00)


def test_memtile_overflow_and_neighbour_spill():
    msg = _err(ConfigError, k_mt=48 * 30)
    assert "memtile" in msg and "k_mt" in msg
    # mlir-aie 1.4.x places the largest buffers first (PR #3116; A and B tie at 132 KiB and keep
    # IR order), each at home if it fits, else on the less used neighbour: B's second buffer leaves
    # the even memtiles that A also fills, and C (81 KiB) still fits at home
    c = check_config(GemmConfig("npu2", 4032, 936 * 5, 4608, 144, 72, 144, 936, "i8", "i8", True, acc="out",
                   stack_bytes=PAPER_STACK))  # the paper's tile, with its L1 budget
    spilled = {b.name: (b.owner_col, b.home_col) for b in c.memtile_placement() if b.home_col != b.owner_col}
    assert spilled == {f"B_L3L2_{col}_buff_1": (col, col + 1) for col in (0, 2, 4, 6)}
    assert max(c.memtile_bytes_used()) <= 512 * 1024


def test_a_spilled_c_join_takes_channels_0_to_3_and_simulates():
    """Since mlir-aie PR #2432 a join whose buffer sits in a neighbour memtile gets the channels
    that reach it (0-3) before anything else; the design builds and computes the right C."""
    c = check_config(GemmConfig("npu2", 448, 1152, 768, 112, 48, 96, 576, "bf16", "bf16", True, acc="out"))
    spilled = {b.name: b.home_col for b in c.memtile_placement() if b.home_col != b.owner_col}
    assert spilled == {f"C_L2L3_{col}_buff_0": col + 1 for col in (0, 2, 4, 6)}
    d = build_design(c)
    channels = {(name, mm2s): i for (tile, mm2s, name), i in dma_channels(d).items() if tile.col == 0 and tile.row == 1}
    assert [channels[(f"C_L1L2_0_{row}", False)] for row in range(4)] == [0, 1, 2, 3]
    assert channels[("C_L2L3_0", True)] == 0 and channels[("A_L3L2_0", False)] == 4
    assert simulate(d).passed


@pytest.mark.parametrize("config", [GemmConfig("npu2", 4096, 4096, 4096, 192, 64, 192, 512, "bf16", "bf16"),
                                    GemmConfig("npu2", 4096, 4096, 4096, 96, 64, 256, 512, "i16", "i32"),
                                    GemmConfig("npu1", 4096, 8192, 4096, 64, 32, 64, 4096, "i8", "i32")])
def test_a_memtile_overflow_says_what_is_true(config):
    """A buffer no memtile has room for: the message's figures are the placement's own, and each inequality it
    implies holds (it said "need 344064 B > 524288 B" where the memtile was full of its neighbours' buffers,
    issue 33 item 7)."""
    pools, cols, capacity = config.l2_pools(), config.dev.target(config.array.cols)[1], config.dev.memtile_bytes
    with pytest.raises(ConfigError) as e:
        memtile.place_one(pools, cols, capacity)
    found = re.match(r"memtile (\d+) cannot hold (\S+) \(([\d,]+) B\): mlir-aie's placement fills it with ([\d,]+) "
                     r"of its ([\d,]+) B \(its own A/B/C buffers need ([\d,]+) B(; the rest spilled into it from its "
                     r"neighbours)?\), and no neighbour has that much free \((.*)\)$", e.value.what)
    assert found, e.value.what
    col, size, held, cap, own = int(found[1]), *(int(found[i].replace(",", "")) for i in (3, 4, 5, 6))
    used = memtile.place(pools, cols, capacity).used[0]
    assert (held, cap) == (used[col], capacity) and held + size > cap and (found[7] is not None) == (held > own)
    assert own == sum(p.nbytes * p.depth for p in pools if p.col == col)
    for x, free in re.findall(r"memtile (\d+) ([\d,]+) B", found[8]):
        assert int(free.replace(",", "")) == capacity - used[int(x)] < size


def test_a_kept_placement_is_the_placement_and_a_refusal_is_raised_every_time():
    """spec/rules/memtile.place_one keeps its answer per distinct pools (issue 33 item 4): the answer is place's own, a
    caller that changes the list it got changes no later answer, and a refusal is raised at every ask."""
    c = GemmConfig("npu2", 4096, 4096, 4096, 64, 64, 128, 256, "i16", "i32")
    pools, cols, capacity = c.l2_pools(), c.dev.target(c.array.cols)[1], c.dev.memtile_bytes
    home = memtile.place(pools, cols, capacity).home[0]
    got = memtile.place_one(pools, cols, capacity)
    assert [b.home_col for b in got] == [int(home[p, i]) for p, pool in enumerate(pools) for i in range(pool.depth)]
    assert len({b.home_col for b in got}) > 1 or len(got) > 1
    got.clear()
    assert [b.home_col for b in memtile.place_one(pools, cols, capacity)] == [int(x) for p, pool in enumerate(pools)
                                                                               for x in home[p, :pool.depth]]
    big = GemmConfig("npu1", 4096, 8192, 4096, 64, 32, 64, 4096, "i8", "i32")
    for _ in range(2):
        with pytest.raises(ConfigError, match="cannot hold"):
            memtile.place_one(big.l2_pools(), big.dev.target(big.array.cols)[1], big.dev.memtile_bytes)


def test_spilled_links_needing_more_than_four_channels_are_refused():
    """Only memtile channels 0-3 reach a neighbour's memory (mlir-aie PR #551): a memtile whose
    spilled B and C links need 5 S2MM channels is refused (aiecc: DMA channels exceeded)."""
    with pytest.raises(ConfigError, match=r"memtile 0: 5 S2MM channels would have to reach spilled buffers of "
                                          r"B_L3L2_0, C_L2L3_0 .* only channels 0-3 can"):
        check_config(GemmConfig("npu2", 512, 2048, 128, 64, 64, 64, 1024, "i8", "i32", True, cols=1))


@pytest.mark.parametrize("change,text", [
    (dict(m=100), "m=100 is not a multiple of 2r=16"),  # npu2 bf16 runs 8x8x8 on the bfp16 datapath
    (dict(k=44), "k=44 is not a multiple of s=8"),
    (dict(n=88), "n=88 is not a multiple of 2t=16"),
    (dict(k_mt=400), "k_mt=400 is not a multiple of k=48"),
])
def test_divisibility(change, text):
    msg = _err(ConfigError, **change)
    assert text in msg and "use " in msg


def test_granularity():
    # npu2's 8x1x8 bf16 mmul reads s = 1 bf16 = 2 bytes per row: not a whole DMA word
    msg = _err(ConfigError, mmul_shape=(8, 1, 8), m=16, k=8, n=16, k_mt=16, M=64, K=32, N=128,
               emulate_bf16_with_bfp16=False)
    assert "4-byte" in msg and "2 B" in msg


@pytest.mark.parametrize("change,text", [
    # shim A walks k_mt * 2 bytes per row: 1200 words > 10-bit wrap
    (dict(device="npu1", m=16, k=48, n=16, k_mt=2400, M=64, K=2400, N=64), "d0 wrap 1200"),
    # shim A row stride K words > 20-bit stride field
    (dict(K=384 * 5700), "stride"),
    # m = 1024 i8 rows: shim d1 wrap
    (dict(device="npu1", dtype_in="i8", dtype_out="i8", m=1024, k=8, n=16, k_mt=8, M=4096, K=64, N=64),
     "wrap 1024"),
    # column-major B with n = 2048: 256 blocks of t down a core's 8-bit wrap (after shim/memtile)
    (dict(device="npu1", dtype_in="i8", dtype_out="i8", m=8, k=8, n=2048, k_mt=8, M=32, K=64, N=8192),
     "wrap"),
])
def test_dma_field_widths(change, text):
    msg = _err(DmaLimitError, **change)
    assert text in msg and "field" in msg and "(max" in msg or "(1.." in msg


def test_core_wrap_is_dominated_by_the_shim_wrap():
    # a core S2MM wrap of m/r >= 256 needs m >= 1024 A rows, which the shim's 10-bit wrap over an
    # m x K strip refuses first; m = 1016 (m/r = 254) passes both; the core's own 8-bit wrap is
    # exercised on WordTap in test_tap.py
    msg = _err(DmaLimitError, device="npu1", dtype_in="i8", dtype_out="i8", m=1024, k=16, n=16, k_mt=16,
               M=4096, K=64, N=64)
    assert "shim MM2S A" in msg and "wrap 1024 words exceeds the 10-bit field" in msg
    check_config(GemmConfig("npu1", 4064, 64, 64, 1016, 16, 16, 16, "i8", "i8", acc="out"))


def test_bd_budget_of_the_queue():
    msg = _err(ConfigError, queue_groups=5)
    assert "task queue holds 4" in msg and "drops a push" in msg and "queue_groups <= 4" in msg


@pytest.mark.parametrize("change,text", [
    (dict(dtype_out="i8"), "dtype_out i8 does not go with dtype_in bf16"),
    (dict(dtype_in="i16", dtype_out="i8"), "does not go with"),
    (dict(dtype_in="fp8"), "fp8"),
    (dict(rows=3), "rows=3"),
    (dict(cols=6), "cols=6"),
    (dict(device="npu1", cols=8), "cols=8"),
    (dict(device="npu1", emulate_bf16_with_bfp16=True), "npu2 bf16 feature"),
    (dict(mmul_shape=(4, 4, 4)), "not an aie::mmul shape"),
    (dict(rounding="nearest"), "unknown rounding"),
    (dict(shift=3), "integer outputs only"),
    (dict(M=0), "M=0"),
    (dict(depth_ab_l1=3), "fifo depths"),
    (dict(stack_bytes=1000), "multiple of 16"),
    (dict(M=448 * 20000, N=768 * 4), "BD tasks"),
])
def test_type_and_array_errors(change, text):
    assert text in _err(GemmGenError, **change)


def test_unknown_device():
    with pytest.raises(ConfigError, match="npu1"):
        GemmConfig("npu9", 64, 64, 64, 8, 8, 8, 8)


def test_emulated_bf16_uses_8x8x8():
    c = GemmConfig("npu2", 4096, 4096, 4096, 128, 64, 128, 256, "bf16", "bf16", True,
                   emulate_bf16_with_bfp16=True)
    assert c.kernel.mmul == (8, 8, 8)
    with pytest.raises(ConfigError):
        check_config(c)  # 128x64x128 bf16 needs 96 KiB of L1


@pytest.mark.parametrize("kind,sizes,strides,message", [
    (TileKind.MEM, (2, 1024), (1024, 1), "d0 size 1024 elements exceeds mlir-aie's BD verifier limit for a mem BD "
                                         "(max 1023)"),
    (TileKind.CORE, (2, 256), (256, 1), "d0 size 256 elements exceeds mlir-aie's BD verifier limit for a core BD "
                                        "(max 255)"),
    (TileKind.CORE, (2, 8), ((1 << 13) + 1, 1), "d1 stride 8193 elements exceeds mlir-aie's BD verifier limit for "
                                                "a core BD (max 8192)"),
    (TileKind.MEM, (2, 8), ((1 << 17) + 1, 1), "stride 131073 elements exceeds mlir-aie's BD verifier limit for a "
                                               "mem BD (max 131072)"),
])
def test_mlir_aie_static_bd_verifier(kind, sizes, strides, message):
    """mlir-aie 1.4.3 checks memtile/core BD dims in elements of the buffer's type against the tile
    kind's own field widths (memtile sizes up to 1023, strides 2^17; core 255, 2^13): one past each
    is refused, the limit itself is not."""
    from gemm_gen.design.tap import Tap
    from gemm_gen.facts.devices import NPU1

    spec = NPU1.dma[kind]
    with pytest.raises(DmaLimitError, match=re.escape(message)):
        Tap(0, sizes, strides).check_static_bd(spec, 1 << 20, "test", "fix")
    at_limit = tuple(min(x, spec.max_wrap) for x in sizes)
    Tap(0, at_limit, tuple(min(x, spec.max_stride) for x in strides)).check_static_bd(spec, 1 << 20, "test", "fix")


@pytest.mark.parametrize("dev,t_in,t_out,mmul,shift,message", [
    ("npu1", "i8", "i32", None, 4, "an i32 C stays in the 32-bit accumulator of the npu1 i8 mmul 4x8x8"),
    ("npu2", "i8", "i32", None, 1, "an i32 C stays in the 32-bit accumulator of the npu2 i8 mmul 8x8x8"),
    ("npu1", "i16", "i32", (4, 2, 8), 2, "use --mmul 4x4x4 or 2x4x8 .a 64-bit accumulator."),
    ("npu1", "i8", "i16", None, 17, r"shifted up must fit the 32-bit accumulator lanes .* \(at most 16\)"),
    ("npu2", "i8", "i8", None, 25, r"at most 24"),
    ("npu1", "i16", "i32", None, 33, r"64-bit accumulator lanes .* \(at most 32\)"),
])
def test_shifts_the_accumulator_cannot_take_are_refused(dev, t_in, t_out, mmul, shift, message):
    """With C kept in its output type (--acc out) each call shifts it up into the accumulator and
    down out of it: the AIE API loads int32 into acc32 only with shift 0 and stores acc32 as int32
    with a plain cast (aie_api detail/aie2*/accum.hpp): under chess a shift there is a compile error,
    under Peano it is silently dropped. A shifted C must fit the accumulator's lanes."""
    from tests.conftest import small

    tiles = dict(m=8, k=4, n=16, N=2 * 4 * 16) if mmul else {}  # the 4x2x8 mmul's 2x2 blocks
    with pytest.raises(ConfigError, match=message):
        check_config(small(dev, t_in, t_out, mmul_shape=mmul, shift=shift, acc="out", **tiles))
    check_config(small(dev, t_in, t_out, mmul_shape=mmul, acc="out", **tiles))  # unshifted: fine


@pytest.mark.parametrize("dev,t_in,t_out,shift,top", [
    ("npu1", "i8", "i16", 31, 31), ("npu2", "i8", "i8", 32, 31), ("npu1", "i16", "i32", 60, 59),
    ("npu2", "i16", "i16", 59, 59)])
def test_a_wide_accumulator_is_shifted_once_within_its_lanes(dev, t_in, t_out, shift, top):
    """With C accumulated in the kernel's accumulator type it is shifted down once, by the final
    conversion's SRS (at most 59 bits, and within the lanes); up-shifts no longer limit it."""
    from tests.conftest import small

    c = small(dev, t_in, t_out, shift=shift)
    assert c.types.precision.converts_c
    if shift > top:
        with pytest.raises(ConfigError, match=rf"down by 1..{top} bits"):
            check_config(c)
    else:
        check_config(c)


def test_the_plan_names_the_accumulator():
    from gemm_gen.app.plan_info import plan_info as plan
    from gemm_gen.design import build_design
    from tests.conftest import small

    assert plan(build_design(small("npu2", "i8", "i32"))).design.accumulator.startswith("acc32 (the i32 C stays in it")
    assert plan(build_design(small("npu2", "i16", "i32"))).design.accumulator.startswith("acc64 (i32 C shift-round")
    assert plan(build_design(small("npu1", "bf16", "bf16"))).design.accumulator == "accfloat (fp32 lanes)"


# ---- options hold what was given; defaults are derived on read -------------------------------------
@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_replacing_the_types_derives_every_default_afresh(dev):
    """dataclasses.replace on a bf16 config (B bf16, fp32 accumulator, npu2's bfp16 datapath) to
    i8 -> i32 gets exactly what an i8 -> i32 config gets, and validates; no default of the bf16
    types survives."""
    bf16 = GemmConfig(dev, 512, 512, 512, 64, 64, 64, 128, "bf16", "bf16")
    i8 = dataclasses.replace(bf16, dtype_in="i8", dtype_out="i32")
    fresh = GemmConfig(dev, 512, 512, 512, 64, 64, 64, 128, "i8", "i32")
    assert (i8.types.dtype_b, i8.types.acc, i8.kernel.emulate_bf16_with_bfp16) == ("i8", "i32", False)
    assert i8.to_json() == fresh.to_json() and i8 == fresh
    assert check_config(i8) is i8
    assert bf16.types.acc == "f32" and bf16.types.dtype_b == "bf16"


def test_replacing_options_keeps_what_was_given_and_nothing_else():
    given = Options("npu2", "bf16", "bf16", stack_bytes=4096, compiler="chess")
    i8 = dataclasses.replace(given, dtype_in="i8", dtype_out="i8")
    assert (i8.dtype_b, i8.acc, i8.emulate_bf16_with_bfp16, i8.convert_once) == (None, None, None, None)
    got = resolve(i8)
    assert (got.types.dtype_b, got.types.acc, got.array.stack_bytes, got.kernel.compiler, got.array.cols) == \
        ("i8", "i32", 4096, "chess", 8)
    # what the user gave sticks through a config's replace too; what they did not is derived
    c = GemmConfig(options=given, tiling=Tiling(64, 64, 64, 128), size=Problem(512, 512, 512))
    assert dataclasses.replace(c, dtype_in="i8", dtype_out="i8").array.stack_bytes == 4096
    assert dataclasses.replace(c, stack_bytes=0).array.stack_bytes == GemmConfig("npu2", 1, 1, 1, 1, 1, 1, 1,
                                                                           compiler="chess").array.stack_bytes


def test_a_config_is_equal_to_one_built_with_its_defaults_spelled_out():
    c = GemmConfig("npu2", 512, 512, 512, 64, 64, 64, 128, "i8", "i16")
    spelled = GemmConfig(**c.to_json())
    assert spelled == c and hash(spelled) == hash(c) and spelled.options != c.options
    assert c != c.with_(m=128)


@pytest.mark.parametrize("args, kwargs, text", [
    ((), {"M": 1}, "needs a device"),
    (("npu2", 1, 1, 1, 1, 1, 1), {}, "needs k_mt"),
    (("npu2", 1, 1, 1, 1, 1, 1, 1), {"tile": 4}, "no field tile"),
    (("npu2", 1, 1, 1, 1, 1, 1, 1), {"M": 4}, "M twice"),
])
def test_the_flat_constructor_refuses_what_a_dataclass_would(args, kwargs, text):
    with pytest.raises(TypeError, match=text):
        GemmConfig(*args, **kwargs)


def test_every_option_and_tiling_field_is_a_config_field_that_reads_back():
    """FIELDS (the flat constructor's order, and to_json's) names exactly the size, the tiling and the
    options; each reads back from a config as given when given."""
    assert set(FIELDS) == {"M", "K", "N"} | set(OPTION_NAMES) | set(TILING_NAMES)
    assert len(FIELDS) == len(set(FIELDS))
    c = GemmConfig("npu2", 512, 256, 128, 64, 32, 64, 128, "i8", "i16", rho=2, queue_groups=3, shift=1)
    assert [c.to_json()[name] for name in ("M", "K", "N", "m", "k", "n", "k_mt", "rho", "queue_groups", "shift")] == [
        512, 256, 128, 64, 32, 64, 128, 2, 3, 1]


def test_an_open_output_type_follows_the_input_type_through_replace():
    """dtype_out left open is derived from dtype_in on read (bf16 -> bf16, integers -> i32, as the
    CLI and Gemm default it), so replacing dtype_in cannot leave a bf16 output behind; rows left open
    are the device's core rows."""
    bf16 = Options("npu2")
    i8 = dataclasses.replace(bf16, dtype_in="i8")
    assert i8.dtype_out is None and resolve(bf16).types.dtype_out == "bf16" and resolve(i8).types.dtype_out == "i32"
    assert resolve(i8).array.rows == 4 and resolve(dataclasses.replace(i8, dtype_out="i8")).types.dtype_out == "i8"
    c = check_config(GemmConfig(options=i8, tiling=Tiling(64, 64, 64, 128), size=Problem(512, 512, 512)))
    assert (c.types.dtype_out, c.types.acc, c.array.rows) == ("i32", "i32", 4) and c == GemmConfig("npu2", 512, 512,
                                                                                                   512, 64, 64, 64, 128,
                                                                                 "i8", "i32")


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_the_cli_and_the_checks_refuse_the_same_array_options(dev):
    """spec/rules/array.py is the one range of --n-aie-cols, --stack and --queue-groups: the CLI's early
    flag check and the config's check refuse exactly the values the rule refuses."""
    from gemm_gen.app.cli import parser
    from gemm_gen.app.cliargs import check_device_flags
    from gemm_gen.facts.devices import device
    from gemm_gen.spec.rules import array

    d = device(dev)
    cases = ([("cols", "--n-aie-cols", v, array.columns_ok(d, v)) for v in range(1, 10)]
             + [("stack_bytes", "--stack", v, array.stack_ok(d, v)) for v in (16, 1000, 3328, 65520, 65536, 70000)]
             + [("queue_groups", "--queue-groups", v, array.queue_ok(d, v)) for v in range(1, 7)])
    for field, flag, value, ok in cases:
        a = parser().parse_args(["plan", "--dev", dev, "-M", "256", "-K", "256", "-N", "256", flag, str(value)])
        try:
            check_device_flags(a)
            cli_ok = True
        except ConfigError:
            cli_ok = False
        try:
            check_array(GemmConfig(dev, 256, 256, 256, 16, 16, 16, 16, "i8", "i32", **{field: value}))
            check_queue(GemmConfig(dev, 256, 256, 256, 16, 16, 16, 16, "i8", "i32", **{field: value}))
            config_ok = True
        except ConfigError:
            config_ok = False
        assert cli_ok == config_ok == ok, (field, value)


# ---- the bfp16 kernels' super-blocks (spec/rules/tiling.py; docs/bfp16_kernels.md step 5) --------------
CONFIG2 = dict(dtype_in="bfp16", dtype_out="bfp16", b_col_maj=False)
ONCE = dict(dtype_in="bf16", dtype_out="bf16", b_col_maj=False, emulate_bf16_with_bfp16=True, convert_once=True)


@pytest.mark.parametrize(("types", "m", "n", "rho", "named"), [
    (CONFIG2, 40, 128, 1, "m=40"), (CONFIG2, 64, 120, 1, "n=120"), (CONFIG2, 96, 128, 4, "T_MA = m / rho = 24"),
    (ONCE, 40, 96, 1, "m=40"), (ONCE, 64, 104, 1, "n=104")], ids=str)
def test_bfp16_kernels_refuse_a_tile_their_super_blocks_cut(types, m, n, rho, named):
    """A pinned tile whose T_MA or n is not whole 16 x 16 C blocks is refused in one line naming the
    super-block limit, the value and the fix (the same rule the tuner's grid uses: test_model_tune)."""
    c = GemmConfig("npu2", 1024, 1024, 1024, m, 64, n, 64, **types, rho=rho)
    with pytest.raises(ConfigError) as e:
        check_config(c)
    text = str(e.value)
    assert "\n" not in text and named in text and "a multiple of 16" in text and "super-blocks" in text, text
    assert "use " in text


def test_super_blocks_bind_whatever_the_mmul(monkeypatch):
    """The super-block rule is the kernel's, not the mmul's: with the 2 x 2 mmul blocks reduced to 8
    (as a 4-row mmul would give) it still refuses m = 40 for a bfp16 kernel and accepts it for a
    scalar one; the mutant without super-blocks lets it through."""
    monkeypatch.setattr(tiling, "KERNEL_EXPANSION", 1)  # 2r = 8 for the 8x8x8 mmul
    bfp16 = GemmConfig("npu2", 1024, 1024, 1024, 40, 64, 128, 64, **CONFIG2)
    with pytest.raises(ConfigError, match="m=40 is not a multiple of 16"):
        check_divisibility(bfp16)
    st = tiling.steps((8, 8, 8), False, False)  # a scalar kernel on the same grid takes m = 40
    assert all(ok for _, ok in tiling.conditions(st, 40, 64, 128, 64, 1))
    monkeypatch.setattr(tiling, "SUPER_BLOCK_TILES", 1)  # the mutant: no super-blocks
    check_divisibility(bfp16)


# ---- the fused epilogue's options (issue 21) -----------------------------------------------------------------
EPI_TILES = dict(m=32, k=32, n=32, k_mt=64)


def test_the_epilogue_options_are_fields_and_read_as_an_epilogue():
    from gemm_gen.facts.epilogue import Activation, Epilogue, RequantForm
    from gemm_gen.spec.request import OPTIONS

    epilogue_fields = {row.name for row in OPTIONS if row.group == "epilogue"}
    assert epilogue_fields == {"bias", "activation", "clamp", "requant"} and epilogue_fields <= set(OPTION_NAMES)
    c = GemmConfig("npu2", 256, 256, 256, **EPI_TILES, bias=True, activation="gelu", clamp=[-6, 6])
    assert c.epilogue == Epilogue(True, Activation.GELU, (-6.0, 6.0))
    assert c.options.clamp == (-6.0, 6.0)  # a list (JSON) reads as a tuple
    i8 = GemmConfig("npu1", 256, 256, 256, **EPI_TILES, dtype_in="i8", dtype_out="i8", requant="per_channel")
    assert i8.epilogue == Epilogue(requant=RequantForm.DOUBLE)
    assert GemmConfig("npu2", 256, 256, 256, **EPI_TILES).epilogue.is_identity


def test_an_epilogue_free_config_keeps_its_json_and_key():
    """No epilogue field appears in to_json() (the build key) unless one is set; setting one changes the key
    and the build's name."""
    from gemm_gen.spec.request import OPTIONS

    plain = GemmConfig("npu2", 256, 256, 256, **EPI_TILES)
    when_set = [row.name for row in OPTIONS if row.written != "always"]
    assert when_set == ["share_l1", "bias", "activation", "clamp", "requant", "group_size", "zero_points", "task_span",
                        "opt_level"]
    assert list(plain.to_json()) == [f for f in FIELDS if f not in when_set]
    assert plain.with_(task_span=1).to_json() == plain.to_json() and plain.with_(task_span=1) == plain
    # Peano's default -O2, said aloud, is the same build; another level is another (issue 31 item 12)
    assert plain.with_(opt_level=2).to_json() == plain.to_json() and plain.with_(opt_level=2) == plain
    o1 = plain.with_(opt_level=1)
    assert o1.to_json()["opt_level"] == 1 and o1 != plain and o1.suffix != plain.suffix
    spanned = plain.with_(task_span=0)
    assert spanned.to_json()["task_span"] == 0 and spanned != plain and spanned.suffix != plain.suffix
    grouped = plain.with_(group_size=128).to_json()
    assert (grouped["group_size"], grouped["zero_points"]) == (128, False) and grouped != plain.to_json()
    assert GemmConfig("npu2", 256, 256, 256, **EPI_TILES, activation="none").to_json() == plain.to_json()
    silu = plain.with_(activation="silu")
    assert silu.to_json()["activation"] == "silu" and silu.to_json()["bias"] is False
    assert silu != plain and silu.suffix != plain.suffix and silu.to_json() != plain.to_json()
    assert plain.with_(bias=True).suffix not in (plain.suffix, silu.suffix)


def test_an_epilogue_turns_the_convert_once_default_off():
    """npu2 bf16 runs the emulated kernel with an epilogue (the bfp16 kernels have none): the default of an
    open convert_once follows, even under chess, where it is on without one."""
    chess = GemmConfig("npu2", 256, 256, 256, **EPI_TILES, compiler="chess")
    assert chess.kernel.convert_once
    assert not chess.with_(bias=True).kernel.convert_once
    assert not resolve(chess.with_(activation="relu").options).convert_once_open


@pytest.mark.parametrize("kw,text", [
    (dict(activation="swish"), "unknown activation 'swish'"),
    (dict(requant="per_tensor", dtype_in="i8", dtype_out="i8"), "unknown requantization"),
    (dict(clamp=(2.0, 1.0)), "clamp bounds 2.0,1.0"),
    (dict(clamp=(float("nan"), 1.0)), "not finite"),
    (dict(bias=True, dtype_in="i8", dtype_out="i16"), "add --requant per_channel"),
    (dict(requant="per_channel", dtype_in="i16", dtype_out="i16"), "accumulates in i64"),
])
def test_epilogue_options_check_config_refuses(kw, text):
    with pytest.raises(ConfigError, match=re.escape(text)):
        check_config(GemmConfig("npu1", 256, 256, 256, **{**EPI_TILES, "k": 64, **kw}))


@pytest.mark.parametrize("dtype_in,dtype_out,kw", [
    ("bf16", "bf16", dict(bias=True)), ("i8", "i8", dict(requant="per_channel")),
    ("i8", "i16", dict(requant="per_channel", bias=True)),
])
def test_the_epilogue_tile_rule_names_the_smallest_k(dtype_in, dtype_out, kw):
    """k x n x size_b >= the tile's bytes: the smallest k on the mmul's grid passes, the step below fails."""
    from gemm_gen.spec.rules import epilogue as rule

    base = GemmConfig("npu1", 256, 512, 256, 32, 8, 32, 8, dtype_in, dtype_out, **kw)
    e, size_b = base.epilogue, base.types.t_b.nbytes(1)
    k = rule.smallest_k(e, 32, size_b, base.kernel.mmul[1])
    assert k * 32 * size_b >= rule.tile_bytes(e,
                                              32) > (k - base.kernel.mmul[1]) * 32 * size_b or k == base.kernel.mmul[1]
    check_config(base.with_(k=k, k_mt=k))
    if k > base.kernel.mmul[1]:
        with pytest.raises(ConfigError, match=f"use k >= {k}"):
            check_config(base.with_(k=k - base.kernel.mmul[1], k_mt=k - base.kernel.mmul[1]))


@pytest.mark.parametrize("dev,t_in,t_out,kw", [
    ("npu1", "i8", "i8", dict(requant="per_channel", bias=True)),
    ("npu2", "i8", "i16", dict(requant="per_channel", b_col_maj=True)),
    ("npu2", "bf16", "bf16", dict(bias=True, activation="gelu", b_col_maj=True)),
])
def test_the_tuners_filter_and_the_check_agree_on_the_epilogue_tile(dev, t_in, t_out, kw):
    """Every candidate the search space keeps passes check_config's epilogue rules, the array form of tile_fits
    equals its scalar form, and the tuner's designs (a short K included) all hold the tile."""
    from gemm_gen import search
    from gemm_gen.search import space
    from gemm_gen.spec.checks import check_epilogue_tile
    from gemm_gen.spec.request import Pins, Request
    from gemm_gen.spec.rules import epilogue as rule

    base = GemmConfig(dev, 256, 16, 256, 1, 1, 1, 1, t_in, t_out, **kw)
    listed = space.tilings(base, base.size, Pins())
    fits = rule.tile_fits(base.epilogue, listed.k, listed.n, base.types.t_b.nbytes(1))
    assert list(fits) == [bool(rule.tile_fits(base.epilogue, int(k), int(n), base.types.t_b.nbytes(1)))
                          for k, n in zip(listed.k, listed.n)]
    # requantization's tile (16n + 16 B) outgrows an i8 B object of k < 24: a short K needs a longer k
    assert fits.any() and fits.all() == (base.epilogue.requant is None)
    kept = listed.take(space.mask(base, base.size, listed, Pins()))
    for k, n in zip(kept.k[:200], kept.n[:200]):
        check_epilogue_tile(base.with_(k=int(k), n=int(n), k_mt=int(k)))
    chosen = search.choose(Request(base.options, base.size, Pins())).config
    check_config(chosen)
    assert chosen.tiling.k * chosen.tiling.n * chosen.types.t_b.nbytes(1) >= rule.tile_bytes(chosen.epilogue,
                                                                                             chosen.tiling.n)
    if chosen.layout.b_col_maj:
        assert chosen.tiling.k_mt == chosen.tiling.k


# ---- resolved once, when the config is made (issue 32 item 3) ----------------------------------------------
def _forwards(node: object) -> bool:
    """Whether a property's body only hands on a sub-record's value: `return self.<record>.<name>` (or an
    item of it), the shape of the 42 properties GemmConfig had."""
    assert isinstance(node, ast.FunctionDef)
    body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(body) != 1 or not isinstance(body[0], ast.Return):
        return False
    value = body[0].value
    while isinstance(value, ast.Subscript):
        value = value.value
    return (isinstance(value, ast.Attribute) and isinstance(value.value, ast.Attribute)
            and isinstance(value.value.value, ast.Name) and value.value.value.id == "self")


def test_gemm_config_forwards_no_field_of_its_sub_records():
    """Readers read c.types.dtype_out, c.tiling.m, c.kernel.mmul: no property hands a sub-record's field on, and
    no name of a sub-record's field or property is an attribute of the config."""
    tree = ast.parse(inspect.getsource(config_module))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "GemmConfig")
    decorated = {f: {getattr(d, "id", getattr(d, "attr", "")) for d in f.decorator_list} for f in cls.body
                 if isinstance(f, ast.FunctionDef)}
    props = [f for f, names in decorated.items() if names & {"property", "cached_property"}]
    assert props and [f.name for f in props if _forwards(f)] == []
    # the shape the scan refuses, to show it can fail
    assert _forwards(ast.parse("def dtype_out(self):\n    '''doc'''\n    return self.types.dtype_out").body[0])
    assert _forwards(ast.parse("def r(self):\n    return self.kernel.mmul[0]").body[0])
    own = {f.name for f in dataclasses.fields(GemmConfig)}
    for record in (spec.Types, spec.Layout, spec.GroupQuant, spec.KernelOptions, spec.ArrayOptions,
                   spec.RuntimeOptions, Tiling, Problem):
        names = {f.name for f in dataclasses.fields(record)}
        names |= {n for n, v in vars(record).items() if isinstance(v, (property, functools.cached_property))}
        assert not {n for n in names if hasattr(GemmConfig, n) and n not in own}, record.__name__


def test_the_variant_is_resolved_when_the_config_is_made_and_read_as_held(monkeypatch):
    """The concrete accumulator, precision, mmul and variant are held by the config: reading them asks no rule again
    (every rule that derives them is made to fail after the config is made)."""
    c = GemmConfig("npu1", 512, 512, 512, 64, 64, 64, 128, "i8", "i32", expansion=(4, 2))
    fresh = GemmConfig("npu1", 512, 512, 512, 64, 64, 64, 128, "i8", "i32", expansion=(4, 2))
    assert c.variant is not None and "variant" in {f.name for f in dataclasses.fields(GemmConfig)}

    def refuse(*args: object, **kw: object) -> None:
        raise AssertionError("a rule was asked again on read")

    for module, name in ((kv, "choose"), (defaults, "variant"), (defaults, "_scalar_variant"),
                         (defaults, "resolve"), (defaults, "mmul"), (defaults, "default_acc"), (precision, "resolve")):
        monkeypatch.setattr(module, name, refuse)
    assert (c.variant, c.kernel.mmul, c.types.acc, c.default_acc) == (fresh.variant, (4, 8, 8), "i32", "i32")
    assert c.variant.expansion == (4, 2)
    assert c.types.precision == fresh.types.precision and c.types.precision.acc == "i32"


@pytest.mark.parametrize("kw, message", [
    (dict(dtype_in="i8", dtype_out="i32", expansion=(4, 4)), "needs 32768 accumulator"),  # the registers
    (dict(device="npu1", dtype_in="i8", dtype_out="i32", m=40, expansion=(4, 2)), "does not split into 4x2 clusters"),
    (dict(dtype_in="i8", dtype_out="i32", m=256, k=256, n=256, k_mt=256, kernel_loops="jk-flat"), "jk-flat with Peano"),
    (dict(dtype_in="bfp16", dtype_out="bfp16", m=128, n=128, expansion=(4, 4)), "bfp16 kernels have one variant"),
    (dict(kernel_loops="spiral"), "unknown kernel loop structure"),
])
def test_a_variant_the_tile_cannot_have_is_refused_as_the_config_is_made(kw, message):
    fields = {**dict(device="npu2", M=512, K=512, N=512, m=64, k=64, n=64, k_mt=128), **kw}
    with pytest.raises(ConfigError, match=message):
        GemmConfig(**fields)


@pytest.mark.parametrize("kw, message", [
    (dict(m=60, expansion=(2, 2)), r"m=60 is not a multiple of 2r=8"),  # off the mmul grid: no kernel to vary
    (dict(n=60, kernel_loops="k-flat"), r"n=60 is not a multiple of 2t=8"),
    (dict(mmul_shape=(3, 3, 3), expansion=(2, 2)), r"mmul 3x3x3 is not an aie::mmul shape"),
    (dict(convert_once=True, expansion=(4, 4)), r"npu2's bfp16 datapath, not npu1"),  # no convert-once kernel
    # an A type without a kernel, its mmul given (as the search's probe tile has it): once a KeyError on the way
    (dict(dtype_in="f32", dtype_out="f32", mmul_shape=(4, 8, 4)), r"npu1 has no kernel for dtype_in f32"),
])
def test_a_config_without_a_kernel_has_no_variant_and_the_check_names_why(kw, message):
    """A tile off its mmul's grid, an A type the device has no kernel for, or a convert-once kernel that cannot
    be built, has no kernel to vary: the
    config is made with variant None, and check_config names the rule it breaks (before the variant's, as it
    did when the variant was derived on read)."""
    c = GemmConfig(**{**dict(device="npu1", M=512, K=512, N=512, m=64, k=64, n=64, k_mt=128), **kw})
    assert c.variant is None
    with pytest.raises(ConfigError, match=message):
        check_config(c)
