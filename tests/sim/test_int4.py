"""int4 weights with int8 activations (issue 22 item 1a, W4A8): packing, refusals, the simulator."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gemm_gen import Gemm
from gemm_gen.app.cli import main
from gemm_gen.design import build_design
from gemm_gen.design import host_buffers as hostdata
from gemm_gen.facts.devices import DEVICES
from gemm_gen.facts.dtypes import I4, dtype, pack_i4, unpack_i4
from gemm_gen.facts.errors import ConfigError, DmaLimitError
from gemm_gen.facts.inputs import make_inputs
from gemm_gen.sim import simulate
from gemm_gen.sim import words as w
from gemm_gen.sim.run import ArraySession
from gemm_gen.spec.checks import check_config, check_granularity
from gemm_gen.spec.config import GemmConfig

from ..random_designs import record_config

# the kernel tile per device that the small designs use: (m, k, n, k_mt)
TILES = {"npu1": (32, 32, 32, 64), "npu2": (32, 64, 32, 128)}


def _config(dev: str, M: int, K: int, N: int, out: str = "i32", **kw: object) -> GemmConfig:
    m, k, n, k_mt = TILES[dev]
    return GemmConfig(dev, M, K, N, m, k, n, k_mt, "i8", out, dtype_b="i4", **kw)


def _high_nibble_first(values: np.ndarray) -> np.ndarray:  # the mutant of pack_i4
    u = np.asarray(values).astype(np.int64) & 0xF
    return (u[..., 1::2] | (u[..., 0::2] << 4)).astype(np.uint8)


# ---- the type and the host packing ---------------------------------------------------------------
def test_i4_is_half_a_byte_in_one_place():
    assert I4.elem_bytes == 0.5 and I4.nbytes(8) == 4 and I4.unit_elems == 8 and I4.unit_bytes == 4
    assert (I4.min, I4.max, I4.value_bits) == (-8, 7, 4)
    assert I4.is_packed and not I4.is_block and I4.host_encoded and dtype("i4") is I4
    with pytest.raises(ValueError, match="cut a 2-element block"):
        I4.nbytes(7)
    with pytest.raises(ValueError, match="block type"):
        _ = I4.bytes  # no whole-byte size: every size computation must ask nbytes / elem_bytes


def test_packing_round_trips_every_byte_and_puts_the_even_element_low():
    every = np.arange(256, dtype=np.uint8).reshape(16, 16)
    values = unpack_i4(every)
    assert values.shape == (16, 32) and values.min() == -8 and values.max() == 7
    assert np.array_equal(pack_i4(values), every)
    assert pack_i4(np.array([[1, 2]]))[0, 0] == 0x21  # element 0 in the low nibble (mlir-air's packing)
    assert pack_i4(np.array([[-8, -1]]))[0, 0] == 0xF8
    assert not np.array_equal(_high_nibble_first(values), every)  # the mutant is a different packing


@pytest.mark.parametrize("bad, match", [(np.array([[8, 0]]), r"\[-8, 7\], found \[0, 8\]"),
                                        (np.array([[-9, 0]]), r"\[-8, 7\]"), (np.zeros((1, 3)), "even count")])
def test_packing_refuses_what_int4_cannot_hold(bad, match):
    with pytest.raises(ValueError, match=match):
        pack_i4(bad)


# ---- refusals ------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw, match", [
    ({"dtype_in": "i16"}, "int4 B multiplies an int8 A"),
    ({"dtype_in": "bf16", "dtype_out": "bf16"}, "needs one scale per group"),
    ({"dtype_in": "i4", "dtype_b": None}, "no matmul kernel for dtype_in i4; use --dtype_in bf16 or i8"),
    ({"dtype_out": "i4"}, "int4 is a weight type"),
    ({"b_col_maj": True}, "packs int4 B two per byte along N"),
    ({"mmul_shape": (4, 8, 8)}, "not an aie::mmul shape of npu2 for i8xi4"),
])
def test_int4_refusals_are_one_line(kw, match):
    args = {"dtype_in": "i8", "dtype_out": "i32", "dtype_b": "i4", **kw}
    with pytest.raises(ConfigError, match=match) as e:
        check_config(GemmConfig("npu2", 256, 256, 256, 32, 64, 32, 64, **args))
    assert "\n" not in str(e.value)


def test_a_tiling_that_cuts_a_dma_word_is_refused():
    """An mmul whose t holds 4 int4 values (2 bytes) would make B's rows half words: refused by name."""
    c = _config("npu2", 256, 256, 256, mmul_shape=(4, 16, 4))
    with pytest.raises(ConfigError, match=r"t=4 x i4 = 2 B is not a multiple of the 4-byte DMA word") as e:
        check_granularity(c)
    assert "\n" not in str(e.value)


def test_mmul_shapes_per_device():
    assert _config("npu2", 64, 64, 64).kernel.mmul == (4, 16, 16)
    assert _config("npu1", 64, 64, 64).kernel.mmul == (4, 16, 8)
    assert DEVICES["npu1"].shapes("i8xi4") == ((4, 16, 8), (8, 16, 8), (4, 32, 8))
    assert _config("npu2", 64, 64, 64).acc_bits == 32


def test_b_is_half_the_bytes_of_int8_in_l1_and_memtile():
    c4, c8 = _config("npu2", 256, 256, 256), _config("npu2", 256, 256, 256).with_(dtype_b=None)
    assert c4.l1_parts["B"] * 2 == c8.l1_parts["B"]
    b4 = next(p for p in c4.l2_pools() if p.name.startswith("B"))
    b8 = next(p for p in c8.l2_pools() if p.name.startswith("B"))
    assert b4.nbytes * 2 == b8.nbytes


def test_every_b_walk_counts_whole_words():
    """B's DMA unit is a word of 8 values: the design's B tensor counts K x N/8 units."""
    c = _config("npu2", 128, 128, 256)
    d = build_design(c)
    b = next(t for t in d.tensors if t.name == "B")
    assert b.shape == (128, 256 // 8) and b.dtype == "i4"


# ---- the simulator -------------------------------------------------------------------------------
def _simulated_c(c: GemmConfig, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A, B, C) of one simulated call: C read out of the simulated DRAM, nothing else compared."""
    call = c.call
    a, b = make_inputs(call.M, call.K, call.N, c.types.t_in, c.types.t_out, seed, c.types.t_b)
    cells, _, _ = ArraySession(build_design(c)).run(call, *hostdata.pad_inputs(c, a, b, call))
    return a, b, hostdata.output_values(c, (cells & w.VALUE_MASK).astype(np.uint32), call)


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("size", [(128, 128, 256), (100, 200, 300), (7, 33, 41)])
def test_simulation_equals_the_exact_product(dev, size):
    c = _config(dev, *size)
    a, b, got = _simulated_c(c)
    assert b.min() == -8 and b.max() == 7  # the whole int4 range, -8's sign bit included
    assert np.array_equal(got.astype(np.int64), a.astype(np.int64) @ b.astype(np.int64))
    r = simulate(c)  # and the simulator's own verdict: bit-exact against its reference, lossless
    assert r.passed and r.mismatches == 0 and r.accuracy.lossless and r.accuracy.max_abs == 0


def test_a_high_nibble_first_host_fails_the_simulation(monkeypatch):
    """The kernel reads the low nibble first: a host that packs the other way multiplies the wrong
    weights, and the check against the exact product says so."""
    c = _config("npu2", 64, 64, 64)
    a, b, got = _simulated_c(c)
    assert np.array_equal(got.astype(np.int64), a.astype(np.int64) @ b.astype(np.int64))
    monkeypatch.setattr(hostdata, "pack_i4", _high_nibble_first)
    a, b, got = _simulated_c(c)
    assert not np.array_equal(got.astype(np.int64), a.astype(np.int64) @ b.astype(np.int64))


SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def int4_configs(draw: st.DrawFn) -> GemmConfig:
    dev = draw(st.sampled_from(["npu1", "npu2"]))
    shapes = DEVICES[dev].shapes("i8xi4")
    r, s, t = draw(st.sampled_from(shapes))
    rho = draw(st.sampled_from([1, 1, 2]))
    m = 2 * r * draw(st.integers(1, 2)) * rho
    k = s * draw(st.integers(1, 3))
    n = 2 * t * draw(st.integers(1, 2))
    k_mt = k * draw(st.integers(1, 2))
    cols = draw(st.sampled_from(sorted(DEVICES[dev].column_devices)))
    M, K, N = draw(st.integers(1, 2 * 4 * m)), draw(st.integers(1, 2 * k_mt)), draw(st.integers(1, 2 * cols * n))
    return GemmConfig(dev, M, K, N, m, k, n, k_mt, "i8", draw(st.sampled_from(["i8", "i16", "i32"])),
                      dtype_b="i4", mmul_shape=(r, s, t), rho=rho, cols=cols, queue_groups=draw(st.integers(1, 4)),
                      a_col_maj=cols >= 4 and draw(st.booleans()), c_col_maj=draw(st.booleans()),
                      b_pack=draw(st.sampled_from(["tiles", "strips"])))


@SETTINGS
@given(int4_configs(), st.integers(0, 2**16))
def test_random_int4_designs_simulate_exactly(c, seed):
    try:
        design = build_design(c)
    except (ConfigError, DmaLimitError):
        record_config(c, "refused")
        return  # an invalid random config is refused with a reason, never simulated
    r = simulate(design, seed=seed)
    assert r.passed, (c.to_json(), r.first_mismatch)
    record_config(c)


# ---- the operator and the CLI --------------------------------------------------------------------
@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_the_operator_equals_the_exact_product_with_values_or_packed_bytes(dev):
    g = Gemm(device=dev, dtype_in="i8", dtype_b="i4", dtype_out="i32")
    rng = np.random.default_rng(3)
    A = rng.integers(-128, 128, (70, 96)).astype(np.int8)
    B = rng.integers(-8, 8, (96, 100)).astype(np.int8)
    exact = A.astype(np.int64) @ B.astype(np.int64)
    assert np.array_equal(g.simulate(A, B).astype(np.int64), exact)
    packed = pack_i4(B, axis=0)  # a checkpoint's bytes: K / 2 rows, pairs along K
    assert packed.shape == (48, 100) and np.array_equal(unpack_i4(packed, axis=0), B)
    assert np.array_equal(g.simulate(A, packed, packed=True).astype(np.int64), exact)
    assert np.array_equal(g.simulate(A, np.asfortranarray(B)).astype(np.int64), exact)  # any layout: packed anyway


@pytest.mark.parametrize("call, match", [
    (lambda g, A, B: g.simulate(A, B * 2), r"B has \d+ values outside i4's range \[-8, 7\]"),
    (lambda g, A, B: g.simulate(A, B, packed=1), "packed=1: packed is True"),
    (lambda g, A, B: g.simulate(A, B.astype(np.int16), packed=True), "B must be a 2-D array of bytes"),
    (lambda g, A, B: Gemm(device="npu2", dtype_in="i8").simulate(A, B, packed=True), "B is i8, not a packed type"),
    (lambda g, A, B: Gemm(device="npu2", dtype_in="i16", dtype_b="i4"), "int4 B multiplies an int8 A"),
])
def test_the_operator_refuses_in_one_line(call, match):
    g = Gemm(device="npu2", dtype_in="i8", dtype_b="i4", dtype_out="i32")
    A, B = np.ones((8, 16), np.int8), np.full((16, 8), -8, np.int8)
    with pytest.raises(ConfigError, match=match) as e:
        call(g, A, B)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("flags, text", [
    (["--dtype_in", "i8", "--dtype_b", "i4", "-M", "64", "-K", "96", "-N", "72"], "PASS"),
    (["--dtype_in", "i16", "--dtype_b", "i4", "-M", "64", "-K", "64", "-N", "64"], "int4 B multiplies an int8 A"),
    (["--dtype_in", "i8", "--dtype_b", "i4", "--b-col-maj", "-M", "64", "-K", "64", "-N", "64"], "drop --b-col-maj"),
])
def test_cli_dtype_b_i4(flags, text, capsys):
    code = main(["simulate", "--dev", "npu2", *flags])
    out = capsys.readouterr()
    assert text in out.out + out.err
    assert code == (0 if text == "PASS" else 2)


def test_the_iron_lowering_types_int4_buffers_as_bytes():
    """B's fifos and the kernel's B argument are flat bytes (mlir-air's and IRON's int4 buffers are),
    their walks in bytes; the stand-in of mlir-aie 1.4.3 verifies every BD (resolve_program)."""
    from gemm_gen.backends.iron import lower

    from .. import iron_recorder
    c = _config("npu2", 256, 256, 512)
    api, rec = iron_recorder.api()
    lower(build_design(c), api).resolve_program()
    b_l1 = [f for f in rec.fifos if f.name.startswith("B_L2L1")]
    assert b_l1 and all(iron_recorder.shape_dtype(f.obj_type) == ((c.tiling.k * c.tiling.n // 2,),
                                                                  "uint8") for f in b_l1)
    # k/s blocks down K, n/t across, s rows of t / 2 bytes: every stride and run whole words
    k, n = c.tiling.k, c.tiling.n
    assert b_l1[0].dims_to_stream == [(k // 16, 16 * n // 2), (n // 16, 8), (16, n // 2), (8, 1)]
    matmul = next(k for k in rec.kernels if len(k.arg_types) == 3)
    assert iron_recorder.shape_dtype(matmul.arg_types[1]) == ((c.tiling.k * c.tiling.n // 2,), "uint8")


# ---- the model -----------------------------------------------------------------------------------
def test_the_model_moves_half_of_int8s_b_bytes_and_says_where_its_rate_comes_from():
    from gemm_gen.app.model_commands import predict_text
    from gemm_gen.model.predict import predict

    c4 = GemmConfig("npu2", 1024, 1024, 4096, 96, 32, 128, 1024, "i8", "i32", dtype_b="i4")
    p4, p8 = predict(c4), predict(c4.with_(dtype_b=None))
    assert p4.dram["B"].bytes * 2 == p8.dram["B"].bytes and p4.dram["B"].runs == p8.dram["B"].runs
    assert p4.dram["B"].run_bytes * 2 == p8.dram["B"].run_bytes  # the same rows, half as long
    assert p4.dram["A"].bytes == p8.dram["A"].bytes and p4.dram["C"].bytes == p8.dram["C"].bytes
    assert p4.time_us < p8.time_us
    assert "kernel rate  i8xi4 mmul: UNCALIBRATED" in predict_text(p4)
    assert "i8xi4" not in predict_text(p8)
    npu1 = predict(GemmConfig("npu1", 512, 512, 512, 32, 64, 32, 128, "i8", "i32", dtype_b="i4"))
    assert "AM020" in predict_text(npu1) and npu1.peak_tops == 2 * DEVICES["npu1"].peak_tops("i8")


def test_the_tuner_and_plan_take_int4():
    g = Gemm(device="npu2", dtype_in="i8", dtype_b="i4", dtype_out="i32")
    c = g.design(512, 1024, 2048).config
    assert c.types.t_b is I4 and c.kernel.mmul == (4, 16, 16) and c.tiling.n % 16 == 0
    code = main(["plan", "--dev", "npu1", "-M", "256", "-K", "256", "-N", "256", "--dtype_in", "i8", "--dtype_b", "i4"])
    assert code == 0


# ---- B in strips (--b-pack strips): one long DMA run per core column ------------------------------
def _strips(dev: str, M: int, K: int, N: int, **kw: object) -> GemmConfig:
    return _config(dev, M, K, N, b_pack="strips", **kw)


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("size", [(128, 128, 256), (100, 200, 300), (7, 33, 41)])
def test_strips_simulate_exactly(dev, size):
    c = _strips(dev, *size)
    a, b, got = _simulated_c(c)
    assert np.array_equal(got.astype(np.int64), a.astype(np.int64) @ b.astype(np.int64))
    r = simulate(c)
    assert r.passed and r.mismatches == 0 and r.accuracy.lossless and r.accuracy.max_abs == 0


def test_a_strip_is_its_columns_packed_rows_contiguous_and_one_shim_run():
    """Strip j of B's buffer is pack_i4(B[:, j n : (j + 1) n]): K rows of n / 2 bytes back to back, so
    each B task is one contiguous run of K n / 2 bytes; the memtile re-tiles each k x n object as it
    does a row-major B's (its walks are unchanged)."""
    c = _strips("npu2", 64, 256, 512)
    call = c.call
    a, b = make_inputs(call.M, call.K, call.N, c.types.t_in, c.types.t_b, 1, c.types.t_b)
    _, b_dram = hostdata.pad_inputs(c, a, b, call)
    assert b_dram.shape == (call.Np // c.tiling.n, call.k_walk, c.tiling.n // 2)
    for j in range(call.Np // c.tiling.n):
        assert np.array_equal(b_dram[j], pack_i4(b[:, j * c.tiling.n:(j + 1) * c.tiling.n].astype(np.int8)))
    assert np.array_equal(hostdata.host_values(c, *hostdata.pad_inputs(c, a, b, call), call)[1], b)
    d, rows = build_design(c), build_design(c.with_(b_pack="tiles"))
    b_tasks = [t.tap for t in d.tasks if t.tensor == "B"]
    assert b_tasks and all(t.sizes[-1] == call.k_walk * c.tiling.n // 8 and set(t.sizes[:-1]) <= {1} for t in b_tasks)
    fifo = {f.name: f.dims_to_stream for f in d.fifos if f.name.startswith("B")}
    assert fifo == {f.name: f.dims_to_stream for f in rows.fifos if f.name.startswith("B")}


def test_strips_read_by_a_row_major_walk_fail():
    """The mutant: a strips design fed the row-major packed buffer multiplies the wrong weights, and
    the comparison with the exact product says so (so the layouts really differ)."""
    c = _strips("npu2", 64, 128, 512)
    call = c.call
    a, b = make_inputs(call.M, call.K, call.N, c.types.t_in, c.types.t_b, 2, c.types.t_b)
    a_dram, b_rows = hostdata.pad_inputs(c.with_(b_pack="tiles"), a, b, call)
    cells, _, _ = ArraySession(build_design(c)).run(call, a_dram, b_rows)
    got = hostdata.output_values(c, (cells & w.VALUE_MASK).astype(np.uint32), call)
    assert not np.array_equal(got.astype(np.int64), a.astype(np.int64) @ b.astype(np.int64))


def test_the_model_prices_a_strip_as_one_run_and_the_search_weighs_both_packings():
    """No new constant: the strips' longer runs go through the model's run-length terms. The search
    weighs both packings of an int4 B when the option is open, and keeps a given one."""
    from gemm_gen.model.predict import predict
    from gemm_gen.search import choose
    from gemm_gen.spec.request import Options, Pins, Problem, Request

    c = GemmConfig("npu2", 1024, 1024, 4096, 88, 32, 128, 1024, "i8", "i32", dtype_b="i4")
    rows, strips = predict(c), predict(c.with_(b_pack="strips"))
    assert rows.dram["B"].bytes == strips.dram["B"].bytes
    assert rows.dram["B"].run_bytes == c.tiling.n // 2 and strips.dram["B"].run_bytes == c.size.K * c.tiling.n // 2
    assert strips.dram["B"].effective_gbps > rows.dram["B"].effective_gbps and strips.time_s < rows.time_s
    size = Problem(1024, 1024, 4096)
    open_ = choose(Request(Options("npu2", "i8", "i32", dtype_b="i4"), size, Pins()))
    tiles = choose(Request(Options("npu2", "i8", "i32", dtype_b="i4", b_pack="tiles"), size, Pins())).config
    best = choose(Request(Options("npu2", "i8", "i32", dtype_b="i4", b_pack="strips"), size, Pins())).config
    assert "b_pack" in open_.filled and open_.config.layout.b_pack in ("tiles", "strips")
    assert predict(open_.config).time_s == min(predict(tiles).time_s, predict(best).time_s)
    assert tiles.layout.b_pack == "tiles" and best.layout.b_pack == "strips"


def test_strips_of_bf16_or_i8_are_refused_in_one_line():
    with pytest.raises(ConfigError, match=r"--b-pack strips is mlir-aie's packing of a bfp16 B, not of i8 .*int4"):
        check_config(GemmConfig("npu2", 128, 128, 256, 32, 64, 32, 128, "i8", "i32", b_pack="strips"))
    check_config(_strips("npu2", 128, 128, 256))  # int4 takes them


def test_the_iron_lowering_reads_a_strip_as_one_run():
    from gemm_gen.backends.iron import lower

    from .. import iron_recorder
    c = _strips("npu2", 256, 256, 512)
    api, _ = iron_recorder.api()
    lower(build_design(c), api).resolve_program()  # the 1.4.3 stand-in verifies every BD


def test_tune_shows_b_packing_for_int4_and_pins_it(capsys):
    args = ["tune", "--dev", "npu2", "-M", "64", "-K", "512", "-N", "1024", "--dtype_in", "i8", "--top", "3"]
    assert main([*args, "--dtype_b", "i4"]) == 0
    assert "B pack" in capsys.readouterr().out  # the model weighs both packings of an int4 B
    assert main([*args, "--dtype_b", "i4", "--b-pack", "tiles"]) == 0
    ranked = [line.split() for line in capsys.readouterr().out.splitlines() if line.strip()[:1].isdigit()]
    assert len(ranked) == 3 and all(row[4] == "tiles" for row in ranked)  # --b-pack pins it
    assert main(args) == 0
    assert "B pack" not in capsys.readouterr().out  # an i8 B is the user's own layout


def test_the_docs_header_says_what_is_built():
    """docs/int4_decode.md's status names every section that says it is built, and calls nothing built a plan (it
    said W4A16 was "still the plan" after W4A16 was built, issue 33 item 7)."""
    text = (Path(__file__).parents[2] / "docs" / "int4_decode.md").read_text()
    status = text.split("\n## ")[0]
    built = [n for n, title in re.findall(r"^## (\d+)\. (.*)$", text, re.M) if title.startswith("Built")]
    assert len(built) >= 5 and all(f"section {n}" in status for n in built), built
    assert "W4A16" in status and "plan below" not in status and "still the plan" not in status
    assert "W4A16" in next(title for n, title in re.findall(r"^## (\d+)\. (.*)$", text, re.M) if n == "10")
