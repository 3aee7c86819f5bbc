"""bfp16 GEMMs (the ATB paper's precision configs): tile storage, the config rules, the eq. 3 L1
budget, simulation of every precision, and the ways a broken bfp16 design is caught."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gemm_gen.design import build_design
from gemm_gen.design.build import kernel_build
from gemm_gen.design.host_buffers import host_values, output_values, pad_inputs
from gemm_gen.design.ir import Design
from gemm_gen.design.tap import Tap
from gemm_gen.facts import bfp16
from gemm_gen.facts.dtypes import dtype
from gemm_gen.facts.errors import ConfigError, LayoutError
from gemm_gen.facts.inputs import make_inputs
from gemm_gen.facts.precision import PRESETS
from gemm_gen.facts.rounding import Rounding
from gemm_gen.sim import simulate
from gemm_gen.sim.kernel import KernelEmulator
from gemm_gen.spec.checks import check_config
from gemm_gen.spec.config import GemmConfig

from ..spec.test_l1_split import row_pair_acc_bytes

FREE = {"bfp16->bf16": dict(dtype_in="bfp16", dtype_out="bf16"),
        "bfp16->f32": dict(dtype_in="bfp16", dtype_out="f32"),
        "bf16xbfp16->bfp16": dict(dtype_in="bf16", dtype_b="bfp16", dtype_out="bfp16"),
        "bfp16 acc f32": dict(dtype_in="bfp16", dtype_out="bfp16", acc="f32")}
PRECISIONS = {name: dict(dtype_in=p.a, dtype_b=p.b, dtype_out=p.out, acc=p.acc) for name, p in PRESETS.items()}
PRECISIONS.update(FREE)


def small(rho: int = 1, col: bool = True, m: int = 32, n: int = 32, **types: object) -> GemmConfig:
    """Two output blocks each way, two k_mt chunks, ragged M and N (padding)."""
    return GemmConfig("npu2", 2 * 4 * m - 5, 64, 2 * 8 * n - 3, m, 16, n, 32, b_col_maj=col, rho=rho,
                      **types)  # type: ignore[arg-type]


# ---- storage ---------------------------------------------------------------------------------
def test_tiles_round_trip_and_hold_rows_of_blocks():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((16, 24)) * 2.0 ** rng.integers(-6, 6, (16, 24))).astype(np.float32)
    tiles = bfp16.tiles_of(x)
    assert tiles.shape == (2, 3, 72) and tiles.dtype == np.uint8
    exps, mants = bfp16.encode(x)
    # tile (1, 2), row 3 is the block of A[8 + 3, 16:24]: its exponent byte, then 8 mantissas
    block = tiles[1, 2, 3 * 9:4 * 9]
    assert block[0] == exps[11, 2] and np.array_equal(block[1:].view(np.int8), mants[11, 16:24])
    assert np.array_equal(bfp16.tile_values(tiles), bfp16.quantize(x))
    e2, m2 = bfp16.from_tiles(tiles)
    assert np.array_equal(e2, exps) and np.array_equal(m2, mants)
    with pytest.raises(ValueError, match="whole 8 x 8 tiles"):
        bfp16.to_tiles(exps[:12], mants[:12])


@pytest.mark.parametrize("col", [True, False])
def test_host_buffers_hold_b_columns_as_blocks(col):
    c = small(col=col, **PRECISIONS["config2"])
    a, b = make_inputs(c.size.M, c.size.K, c.size.N, c.types.t_in, c.types.t_out, 3, c.types.t_b)
    a_dram, b_dram = pad_inputs(c, a, b)
    Mp, Kp, Np = c.call.covered
    assert a_dram.shape == (Mp // 8, Kp // 8, 72)
    assert b_dram.shape == ((Np // 8, Kp // 8, 72) if col else (Kp // 8, Np // 8, 72))
    tile = b_dram[1, 0] if col else b_dram[0, 1]  # N columns 8..15, K rows 0..7
    values = bfp16.tile_values(tile.reshape(1, 1, 72))  # rows of the tile = columns of B
    a_seen, b_seen = host_values(c, a_dram, b_dram)
    assert np.array_equal(values, b_seen[0:8, 8:16].T)
    assert np.array_equal(b_seen, bfp16.quantize(b, axis=0, rounding=Rounding.FLOOR)[:, :]) or c.size.K % 8
    assert np.array_equal(a_seen, bfp16.quantize(a, axis=1, rounding=Rounding.FLOOR)) or c.size.K % 8


def test_output_values_decode_c_tiles():
    c = small(**PRECISIONS["config2"])
    x = np.arange(c.call.Mp * c.call.Np, dtype=np.float32).reshape(c.call.Mp, c.call.Np) / 64
    raw = bfp16.tiles_of(x, Rounding.CONV_EVEN).reshape(-1)
    assert np.array_equal(output_values(c, raw), bfp16.quantize(x, rounding=Rounding.CONV_EVEN)[: c.size.M, : c.size.N])


# ---- config rules ----------------------------------------------------------------------------
def test_the_symmetric_config1_tile_needs_about_91_kib():
    c = GemmConfig("npu2", 4096, 4096, 2048, 128, 64, 128, 512, **PRECISIONS["config1"])
    with pytest.raises(ConfigError, match="L1 overflow") as e:
        check_config(c)
    assert "the buffers alone take 91.0 KiB" in str(e.value) and "raise --rho" in e.value.fix
    atb = check_config(replace(c, rho=4))  # atb Table 2: 60.3 KB with rho = 4
    parts = atb.l1_parts
    assert parts["A"] + parts["B"] + parts["C"] + parts["A bfp16"] == round(60.25 * 1024)


@pytest.mark.parametrize("preset, tile, rho, kib", [("config2", (192, 128, 96), 6, 56.25),
                                                    ("config3", (128, 64, 128), 4, 56.5),
                                                    ("config3", (96, 64, 128), 1, 57.0)])
def test_eq3_buffers_match_atb_table_2(preset, tile, rho, kib):
    """atb Table 2's L1 totals, with config3's accumulator split as mlir-aie splits it (whole row pairs in
    the bfp16 object, the rest in a static buffer); ours keeps whole 16 x 16 blocks there and needs less."""
    m, k, n = tile
    c = check_config(GemmConfig("npu2", 4 * m, 4 * k, 8 * n, m, k, n, 2 * k, rho=rho, **PRECISIONS[preset]))
    buffers = sum(v for name, v in c.l1_parts.items() if name not in ("stack", "kernel data"))
    ours = c.l1_parts.get("C acc", 0)
    theirs = row_pair_acc_bytes(c)
    assert buffers - ours + theirs == kib * 1024
    assert ours < theirs if c.types.precision.converts_c else ours == theirs == 0


def test_config3_keeps_more_than_half_the_accumulator_in_the_c_object():
    """mlir-aie's config3 keeps half of a 128 x 128 bf16 accumulator in the 18 KiB bfp16 C object (64 whole
    rows) and half in a 16 KiB static buffer; the object's bytes hold 144 of the 256 8 x 8 blocks, so ours
    keeps 144 (whole 16 x 16 blocks, in the order the conversion reads them) and C acc takes 14 KiB."""
    c = GemmConfig("npu2", 512, 256, 1024, 128, 64, 128, 128, rho=4, **PRECISIONS["config3"])
    assert c.c_split_elems == 144 * 64 and c.l1_parts["C acc"] == 112 * 64 * 2
    assert row_pair_acc_bytes(c) == 64 * 128 * 2
    # the split is by blocks, not by A slices: rho 1 and 8 keep it; atb's 96 x 128 config3 tile keeps 108 of
    # 192 blocks (whole row pairs: 96)
    assert replace(c, rho=1).c_split_elems == replace(c, rho=8).c_split_elems == 144 * 64
    assert replace(c, m=96, rho=1).c_split_elems == 108 * 64


@pytest.mark.parametrize("change, message", [
    (dict(device="npu1"), "npu1 has no bfp16 datapath"),
    (dict(dtype_b="bf16"), "multiplies bf16 or bfp16 A by bfp16 B"),
    (dict(dtype_in="i8"), "A must be bf16 or bfp16"),
    (dict(dtype_out="i32"), "writes bf16, f32 or bfp16"),
    (dict(acc="i32", dtype_out="bfp16"), "a bfp16 GEMM accumulates a bf16 C in f32, a bfp16 C in f32 or bf16"),
    (dict(acc="bf16", dtype_out="f32"), "--acc bf16 with --dtype_out f32"),
    (dict(emulate_bf16_with_bfp16=True), "already runs on the bfp16 datapath"),
    (dict(mmul_shape=(4, 8, 8)), "multiplies 8x8x8 blocks"),
    (dict(m=24), "m=24 is not a multiple of 16 (the bfp16 kernel's 16 x 16 C blocks"),
    (dict(k=12, k_mt=24), "k=12 would cut a bfp16ebs8 block"),
    (dict(k_mt=36, k=36), "would cut a bfp16ebs8 block"),
])
def test_bad_precisions_are_one_line_errors(change, message):
    base = dict(device="npu2", M=512, K=256, N=512, m=32, k=32, n=32, k_mt=64, dtype_in="bfp16",
                dtype_b="bfp16", dtype_out="bfp16")
    base.update(change)
    with pytest.raises(ConfigError) as e:
        check_config(GemmConfig(**base))  # type: ignore[arg-type]
    assert message in str(e.value) and "\n" not in str(e.value) and e.value.fix


def test_bfp16_defaults_peano_its_stack_and_no_emulation():
    c = small(**PRECISIONS["config1"])
    assert (c.kernel.compiler, c.kernel.emulate_bf16_with_bfp16, c.kernel.mmul) == ("peano", False, (8, 8, 8))
    # Peano: mlir-aie's Peano config1 stack 0x1700 less its 2304-byte A copy (ours is in its own
    # buffer), or the chess stack where larger (config3)
    assert [small(**PRECISIONS[p]).array.stack_bytes for p in ("config1", "config2", "config3")] == [0xE00, 0xE00,
                                                                                                     0xF00]
    # chess: mlir-aie's ATB stacks for the same work: config1 0x1700 less its A copy, 0xD00, 0xF00
    assert [small(**PRECISIONS[p], compiler="chess").array.stack_bytes
            for p in ("config1", "config2", "config3")] == [0xE00, 0xD00, 0xF00]
    assert dtype("bfp16").unit_bytes == 72


# ---- the design ------------------------------------------------------------------------------
def test_design_moves_tiles_and_declares_its_buffers():
    c = GemmConfig("npu2", 1024, 512, 2048, 128, 64, 128, 128, rho=4, **PRECISIONS["config3"])
    d = build_design(c)
    assert d.tensor("A").shape == (c.call.Mp // 8, c.call.k_walk // 8) and d.tensor("A").dtype == "bfp16"
    assert d.fifo("A_L2L1_0").obj_shape == (c.t_ma // 8, c.tiling.k // 8)
    # bfp16 tiles (dims in tiles): A's memtile stores (k-step, slice) tiles for rho > 1 and sends each
    # K tile major, the core S2MM pairs its rows into 2 x 1 super-blocks (K tile, row pair, 1 of 2);
    # row-major B's memtile walks into 1 x 2 super-blocks (column pair, K tile, 1 of 2); C leaves the core
    # in 2 x 2 super-blocks and its memtile walks them back to row-major tiles (row pair, row, column pair, column)
    t, k = c.t_ma // 8, c.tiling.k // 8
    assert d.fifo("A_L2L1_0").dims_to_stream == Tap(0, (c.tiling.k_mt // c.tiling.k * c.tiling.rho, k, t), (t * k, 1,
                                                                                                            k))
    assert d.fifo("A_L2L1_0").dims_from_stream == Tap(0, (k, t // 2, 2), (2, 2 * k, 1))
    assert d.fifo("A_L3L2_0").dims_from_stream is not None
    n = c.tiling.n // 8
    assert d.fifo("C_L2L3_0").dims_to_stream == Tap(0, (c.tiling.m // 16, 2, n // 2, 2), (2 * n, 2, 4, 1))
    assert d.fifo("B_L2L1_0").dims_from_stream is None
    assert d.fifo("B_L2L1_0").dims_to_stream == Tap(0, (c.tiling.n // 16, c.tiling.k // 8, 2), (2, c.tiling.n // 8, 1))
    w = d.workers[0]
    # the 112 of 256 8 x 8 accumulator blocks past the object's 144, in the blocked order
    assert [(b.name, b.shape, b.dtype) for b in w.buffers] == [("C_acc_0_0", (112 * 64,), "bf16")]
    names = kernel_build(c).symbols
    assert names == {"zero": "zero_bf16_bfp16", "matmul": "matmul_bfp16_bf16", "convert": "convert_bf16_bfp16"}
    assert [k.role for k in d.kernels] == ["zero", "matmul", "convert"]
    body = w.program[0].body
    assert body[-2].kernel == names["convert"] and body[-2].args == ("C_L1L2_0_0", "C_acc_0_0")


def test_config1_worker_passes_its_a_scratch():
    c = GemmConfig("npu2", 1024, 512, 2048, 128, 64, 128, 128, rho=4, **PRECISIONS["config1"])
    d = build_design(c)
    matmul = d.kernel(kernel_build(c).symbols["matmul"])
    assert matmul.arg_dtypes == ("bf16", "bfp16", "bf16", "bfp16") and matmul.scalar_args == ("i32",)
    assert matmul.arg_shapes[3] == (c.t_ma // 8, c.tiling.k // 8)
    assert d.workers[0].buffers[0].name == "A_bfp16_0_0"


# ---- simulation ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(PRECISIONS))
@pytest.mark.parametrize("rho, col", [(1, True), (2, False), (4, True)])
def test_every_precision_simulates_bit_exact(name, rho, col):
    c = small(rho=rho, col=col, m=64 if rho == 4 else 32, **PRECISIONS[name])
    r = simulate(c, seed=rho)
    assert r.passed and r.mismatches == 0, r.first_mismatch
    assert r.nonzero_fraction > 0.5 and "bfp16 quantization points" in r.notes[0]
    cores = c.array.rows * c.array.cols
    assert r.kernel.matmul_calls == cores * c.call.tiles_per_core * c.call.k_steps * rho
    assert r.kernel.convert_calls == (cores * c.call.tiles_per_core if c.types.precision.converts_c else 0)


def test_bfp16_dram_traffic_is_nine_eighths_of_bytes_per_value():
    c = small(**PRECISIONS["config2"])
    r = simulate(c)
    M, K, N = c.call.covered
    a_b = (M * K * N // (c.tiling.n * c.array.cols) + M * K * N // (c.tiling.m * c.array.rows)) * 9 // 8
    assert r.level_bytes()["DRAM -> memtile"][0] == a_b
    assert r.level_bytes()["memtile -> DRAM"][0] == M * N * 9 // 8


def _with_fifo(d: Design, name: str, **changes: object) -> Design:
    return replace(d, fifos=tuple(replace(f, **changes) if f.name == name else f for f in d.fifos))


def test_a_tile_in_the_wrong_order_is_a_layout_error():
    d = build_design(small(rho=2, **PRECISIONS["config2"]))
    with pytest.raises(LayoutError, match="A tile element"):
        simulate(_with_fifo(d, "A_L3L2_1", dims_from_stream=None))  # A's memtile reorder dropped


@pytest.mark.parametrize("name", ["config2", "config3"])
def test_c_tiles_left_in_the_kernels_order_are_a_layout_error(name):
    """The kernel keeps C (config3: once converted) in 2 x 2 super-blocks of tiles; a memtile that
    forwards them as they are, without undoing that order, writes the wrong tiles into DRAM."""
    d = build_design(small(rho=2, **PRECISIONS[name]))
    for col in range(d.config.array.cols):
        d = _with_fifo(d, f"C_L2L3_{col}", dims_to_stream=None)
    with pytest.raises(LayoutError, match=r"C\[0, 16\] in DRAM received the result for C\[8, 0\]"):
        simulate(d)


def test_host_quantization_must_match_the_kernels_operands(monkeypatch):
    """The reference multiplies the host's truncated A and B: rounding them to nearest instead makes
    the same simulated design fail (on inputs that bfp16 cannot hold exactly)."""
    c = small(**PRECISIONS["config2"])
    import gemm_gen.sim.run as run

    real = run.host_values

    def nearest(cfg, a_dram, b_dram, call):  # the same seed-0 inputs, rounded to nearest instead
        a, b = make_inputs(cfg.size.M, cfg.size.K, cfg.size.N, cfg.types.t_in, cfg.types.t_out, 0, cfg.types.t_b,
                           family="wide")
        return bfp16.quantize(a, 1, Rounding.CONV_EVEN), bfp16.quantize(b, 0, Rounding.CONV_EVEN)

    monkeypatch.setattr(run, "host_values", nearest)
    assert not simulate(c, inputs="wide").passed
    monkeypatch.setattr(run, "host_values", real)
    assert simulate(c, inputs="wide").passed


def test_skipping_the_per_call_requantization_fails():
    """Config 2 requantizes C after every call: a kernel that keeps fp32 between calls differs."""
    c = small(**PRECISIONS["config2"])
    orig = KernelEmulator.__init__

    def lazy(self, design, call=None):
        orig(self, design, call)
        self.numerics = replace(self.numerics, rounding=Rounding.FLOOR)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(KernelEmulator, "__init__", lazy)
        r = simulate(c)
    assert not r.passed and r.mismatches > 0


def test_a_missing_conversion_drains_unconverted_words():
    d = build_design(small(rho=2, **PRECISIONS["config3"]))
    w = d.workers[3]
    body = tuple(op for op in w.program[0].body if getattr(op, "kernel", "").startswith("convert") is False)
    broken = replace(d, workers=tuple(replace(x, program=(replace(x.program[0], body=body),)) if x is w else x
                                      for x in d.workers))
    with pytest.raises(LayoutError, match="never written by a kernel|wrong layout"):
        simulate(broken)


def test_design_json_lists_the_worker_buffers():
    import json

    from gemm_gen.design.serialize import dumps

    c = GemmConfig("npu2", 1024, 512, 2048, 128, 64, 128, 128, rho=4, **PRECISIONS["config3"])
    d = json.loads(dumps(build_design(c)))
    assert d["format"] == "gemm_gen.design/5"
    own = [b for b in d["workers"][0]["buffers"] if not b["name"].startswith("l1_reserve")]
    assert own == [{"name": "C_acc_0_0", "shape": [112 * 64], "dtype": "bf16", "address": None, "mem_bank": None,
                    "rtp": False}]
    matmul = next(k for k in d["kernels"] if k["role"] == "matmul")
    assert matmul["scalar_args"] == ["i32"] and matmul["build"]["acc"] == "bf16"


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_cli_plan_and_simulate_ragged_bfp16(preset, capsys):
    """Ragged sizes (tile counts not multiples of 8) and DRAM bytes counted in tiles."""
    import json

    from gemm_gen.app.cli import main

    args = ["--dev", "npu2", "-M", "100", "-K", "70", "-N", "90", "--preset", preset]
    assert main(["simulate", *args]) == 0
    assert capsys.readouterr().out.rstrip().endswith("PASS")
    assert main(["plan", *args, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    c = GemmConfig("npu2", 100, 70, 90, *info["tile"], info["k_mt"], rho=info["rho"], **PRECISIONS[preset])
    t = {name: dtype(c.value(attr)).elem_bytes for name, attr in (("A", "dtype_in"), ("B", "dtype_b"),
                                                                     ("C", "dtype_out"))}
    M, K, N = c.call.covered
    assert info["dram_bytes"]["C"] == M * N * t["C"]
    assert info["dram_bytes"]["A"] == M * K * t["A"] * c.call.n_blocks
    assert info["dram_bytes"]["B"] == K * N * t["B"] * c.call.m_blocks


# ---- mlir-aie's B packing (b_pack="strips") ---------------------------------------------------------
def test_strips_are_mlir_aies_atb_packing():
    """Each core column's K x n strip is contiguous; inside it the k x n L1 tiles follow each other,
    each walked as mlir-aie's ATB host does: 1 x 2 super-blocks of 8 x 8 tiles (super-block column
    outer, tile row, then the two tiles side by side), each tile 8 blocks of 8 K values, one per column."""
    c = GemmConfig("npu2", 512, 128, 512, 64, 32, 32, 64, dtype_in="bf16", dtype_b="bfp16", dtype_out="bf16",
                   b_pack="strips")
    a, b = make_inputs(c.size.M, c.size.K, c.size.N, c.types.t_in, c.types.t_out, 3, c.types.t_b)
    _, b_dram = pad_inputs(c, a, b)
    assert b_dram.shape == (c.call.Np // c.tiling.n, c.call.k_walk // 8 * c.tiling.n // 8, 72)
    bq = bfp16.quantize(b.astype(np.float32), axis=0)  # blocks of 8 along K
    expect = []
    for strip in range(c.call.Np // c.tiling.n):
        for r in range(c.call.k_walk // c.tiling.k):
            for sbc in range(c.tiling.n // 16):
                for sbr in range(c.tiling.k // 8):
                    for half in range(2):
                        k0, n0 = r * c.tiling.k + sbr * 8, strip * c.tiling.n + sbc * 16 + half * 8
                        expect.append(bq[k0:k0 + 8, n0:n0 + 8].T)  # 8 columns, each one block along K
    got = bfp16.tile_values(b_dram.reshape(1, -1, 72))  # the tiles side by side: 8 rows (blocks) x 8T
    assert np.array_equal(got.reshape(8, -1, 8).transpose(1, 0, 2), np.array(expect))
    back = host_values(c, *pad_inputs(c, a, b))[1]
    assert np.array_equal(back, bq)


@pytest.mark.parametrize("col", [False, True])
@pytest.mark.parametrize("name", ["config1", "config2", "config3"])
def test_strips_simulate_bit_exact_with_one_run_per_strip(name, col):
    c = replace(small(2, col, **PRECISIONS[name]), b_pack="strips")
    d = build_design(c)
    b_tasks = [t for t in d.tasks if t.tensor == "B"]
    assert all(t.tap.is_linear() or t.tap.sizes == (t.tap.count,) for t in b_tasks)
    assert {t.tap.count for t in b_tasks} == {c.call.k_walk // 8 * c.tiling.n // 8}
    assert simulate(d).passed


def test_strips_are_for_a_bfp16_b_only():
    with pytest.raises(ConfigError, match=r"--b-pack strips is mlir-aie's packing of a bfp16 B, not of bf16"):
        check_config(GemmConfig("npu2", 512, 128, 512, 64, 32, 32, 64, b_pack="strips"))
    with pytest.raises(ConfigError, match=r"unknown B packing 'rows'"):
        check_config(small(**PRECISIONS["config1"], b_pack="rows"))


def test_the_tuner_chooses_the_packing_when_left_open(capsys):
    """Strips read each column's B as one run: where B's DRAM runs matter the model prefers them, and
    the plan says which packing it chose; --b-pack fixes it."""
    from gemm_gen.app.cli import main

    args = ["plan", "--dev", "npu2", "-M", "4096", "-K", "4096", "-N", "2048", "--preset", "config1", "-m", "128",
            "-k", "64", "-n", "128", "--rho", "4", "--k-mt", "512", "--json"]
    import json

    assert main(args) == 0
    chosen = json.loads(capsys.readouterr().out)["b_pack"]
    assert main([*args, "--b-pack", "tiles"]) == 0
    assert json.loads(capsys.readouterr().out)["b_pack"] == "tiles"
    from gemm_gen.model.predict import predict

    base = GemmConfig("npu2", 4096, 4096, 2048, 128, 64, 128, 512, "bf16", "bf16", dtype_b="bfp16", rho=4)
    times = {p: predict(replace(base, b_pack=p)).time_us for p in ("tiles", "strips")}
    assert chosen == min(times, key=times.get)
