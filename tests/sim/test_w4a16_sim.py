"""W4A16 (issue 22 item 1b), the simulated path: bf16 A x int4 B with group scales (and zero points).

B's DRAM buffer holds, per core column, its objects contiguous in k-step order (b_objects); the simulated
kernel reads each object's bytes from L1 and dequantizes them (groupquant.dequant). C must equal the bf16
GEMM numerics of A x dequant(B) bit for bit (built from the weights given, never read back from B's buffer)
and lie within 1% (Frobenius) of float64 A @ ((q - z) s).
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gemm_gen import Gemm
from gemm_gen.app.cli import main
from gemm_gen.app.operands import bf16_rne
from gemm_gen.design import b_objects, build_design, patterns
from gemm_gen.design import host_buffers as hostdata
from gemm_gen.design.grid import grid
from gemm_gen.design.ir import Call, Loop
from gemm_gen.design.serve import check
from gemm_gen.design.tap import Tap
from gemm_gen.facts import groupquant
from gemm_gen.facts.devices import DEVICES
from gemm_gen.facts.dtypes import pack_i4
from gemm_gen.facts.errors import ConfigError, DmaLimitError, LayoutError, NumericsWarning, SimulationError
from gemm_gen.facts.inputs import group_weights
from gemm_gen.facts.l1_layout import b_layout
from gemm_gen.sim import simulate
from gemm_gen.spec.checks import check_granularity
from gemm_gen.spec.config import GemmConfig
from gemm_gen.spec.rules.defaults import resolve

from ..random_designs import record_config

# (m, k, n, k_mt) per device: npu1's bf16 mmul 4x8x4 (t = 4: half a word of int4, fine for whole objects)
TILES = {"npu1": (8, 64, 16, 128), "npu2": (16, 64, 16, 128)}


def _config(dev: str, M: int, K: int, N: int, g: int = 128, zp: bool = False, out: str = "bf16",
            tiles: tuple[int, int, int, int] | None = None, **kw: object) -> GemmConfig:
    m, k, n, k_mt = tiles or TILES[dev]
    return GemmConfig(dev, M, K, N, m, k, n, k_mt, "bf16", out, dtype_b="i4", group_size=g, zero_points=zp, **kw)


def _passes(c: GemmConfig, seed: int = 0, literal: bool = False) -> None:
    r = simulate(c, seed=seed, literal=literal)
    assert r.passed and r.mismatches == 0, (c.to_json(), r.first_mismatch)
    # against float64 A @ ((q - z) s): the 1% where C has enough elements for a Frobenius norm to be a
    # statistic; a 9-element bf16 C on npu2's bfp16 datapath has measured 1.04% (hypothesis found it)
    bound = 0.01 if r.accuracy.elements >= 256 else 0.02
    assert r.accuracy.frobenius_rel < bound, r.accuracy.text()
    assert any("W4A16" in n and "Frobenius" in n for n in r.notes)


# ---- the layout: one source of truth for the element order ---------------------------------------
@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_the_q_order_is_the_bf16_designs_l1_b_layout(dev):
    """kernel_order comes from the bf16 design's memtile -> core walk; l1_layout.b_layout (the kernel's
    blocked layout) says the same thing another way."""
    c = _config(dev, 64, 256, 64)
    order = b_objects.kernel_order(c)
    addr = b_layout(c.tiling.k, c.tiling.n, c.kernel.mmul[1], c.kernel.mmul[2], False)
    kk, jj = np.indices((c.tiling.k, c.tiling.n))
    assert np.array_equal(order[addr], kk * c.tiling.n + jj)
    assert not np.array_equal(order, np.arange(c.tiling.k * c.tiling.n))  # blocked, not row-major


def test_an_object_is_q_in_kernel_order_then_scale_rows_then_zero_rows():
    c = _config("npu2", 16, 256, 16, g=32, zp=True, tiles=(16, 64, 16, 64), cols=1)
    rng = np.random.default_rng(1)
    b = group_weights(rng.integers(-8, 8, (256, 16)).astype(np.int8), 32, True, 1)
    dram = hostdata.pad_inputs(c, np.zeros((16, 256), ml_dtypes.bfloat16), b)[1]
    lay = groupquant.ObjectLayout(64, 16, 32, True)
    assert dram.shape == (1, 4, lay.nbytes) and lay.rows == 2
    obj = dram[0, 1]  # k-step 1: rows 64..127, groups 2 and 3
    q = b.q[64:128, :16].reshape(-1)[b_objects.kernel_order(c)]
    assert np.array_equal(obj[: lay.q_bytes], pack_i4(q))
    assert np.array_equal(obj[lay.scale_offset: lay.zero_offset].view(ml_dtypes.bfloat16).reshape(2, 16),
                          b.scales[2:4])
    assert np.array_equal(obj[lay.zero_offset:].view(ml_dtypes.bfloat16).reshape(2, 16).astype(np.int8),
                          b.zero_points[2:4])


@pytest.mark.parametrize("once", [True, False])
def test_a_column_of_objects_is_one_shim_run_and_forwarded_linearly(once):
    """npu2's default kernel (convert once) dequantizes into its B bfp16 scratch (9 bytes per 8 values, A's bfp16
    copy before it); the emulated one (--convert-once 0) into a k x n bf16 scratch, its last buffer."""
    c = _config("npu2", 64, 512, 256, zp=True, **({} if once else {"convert_once": False}))
    assert c.kernel.convert_once == once
    gb = grid(c, "B")
    words = gb.obj * (c.call.k_walk // c.tiling.k)
    assert gb.obj * 4 == groupquant.object_bytes(c.tiling.k, c.tiling.n, 128, True)
    for col in range(c.array.cols):
        tap = patterns.shim_b(gb, 0, col)
        assert (tap.sizes, tap.strides, tap.offset) == ((words,), (1,), col * words)
    assert patterns.b_l2_to_stream(gb).is_linear() and patterns.b_l1_from_stream(gb) is None
    d = build_design(c)
    b_fifos = [f for f in d.fifos if f.name.startswith("B_")]
    assert all(f.obj_shape == (gb.obj,) and f.dims_to_stream is None and f.dims_from_stream is None for f in b_fifos)
    deq = [b for b in d.workers[0].buffers if b.name.startswith(("B_deq", "B_bfp16"))]
    matmul = next(s for s in d.kernels if s.role == "matmul")
    if once:
        assert [(b.name.split("_")[1], b.shape, b.dtype) for b in deq] == [("bfp16", (c.tiling.k // 8, c.tiling.n // 8),
                                                                            "bfp16")]
        assert matmul.arg_dtypes[3:5] == ("bfp16", "bfp16") and matmul.arg_shapes[4] == (c.tiling.k // 8,
                                                                                         c.tiling.n // 8)
        assert c.l1_parts["B bfp16"] == c.tiling.k * c.tiling.n * 9 // 8 and "B bf16" not in c.l1_parts
        return
    assert [(b.shape, b.dtype) for b in deq] == [((c.tiling.k, c.tiling.n), "bf16")]
    assert matmul.arg_shapes[-1] == (c.tiling.k, c.tiling.n) and matmul.arg_dtypes[-1] == "bf16"  # the scratch, last
    assert c.l1_parts["B bf16"] == c.tiling.k * c.tiling.n * 2 and "B bfp16" not in c.l1_parts


@pytest.mark.parametrize("zp", [False, True])
def test_padding_dequantizes_to_exact_zeros(zp):
    """K tail inside a group (q = z with zero points), whole padded groups (scale 0) and N tail."""
    c = _config("npu1", 8, 200, 40, g=64, zp=zp, tiles=(8, 32, 16, 64))
    b = group_weights(np.random.default_rng(2).integers(-8, 8, (200, 40)).astype(np.int8), 64, zp, 2)
    w = b_objects.padded(c, c.call, b).dequant().astype(np.float64)
    assert w.shape == (c.call.k_walk, c.call.Np) and c.call.k_walk > 200 and c.call.Np > 40
    assert not w[200:].any() and not w[:, 40:].any()
    assert np.array_equal(w[:200, :40], b.dequant().astype(np.float64))
    assert np.array_equal(b_objects.unpack_objects(c, c.call, b_objects.pack_objects(c, c.call, b)), w)


# ---- the simulator: bit-exact and within 1% -----------------------------------------------------
@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("g, k", [(32, 64), (64, 32), (128, 64), (128, 128), (32, 32)])  # k above, below, at g
@pytest.mark.parametrize("zp", [False, True])
def test_simulation_is_bit_exact_and_within_1_percent(dev, g, k, zp):
    m, _, n, _ = TILES[dev]
    _passes(_config(dev, 40, 3 * k + 40, 72, g=g, zp=zp, tiles=(m, k, n, 2 * k)))  # tails in M, K, N


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("zp", [False, True])
def test_decode_and_whole_array(dev, zp):
    m = TILES[dev][0]
    _passes(_config(dev, 1, 512, 256, zp=zp, tiles=(m, 64, 32, 128), rows=1))  # decode: one core row, M = 1
    _passes(_config(dev, 70, 320, 136, zp=zp, out="f32"))  # the whole array, f32 C


def test_cli_simulate_w4a16_with_the_search_and_the_decode_mapping(capsys):
    for extra in ([], ["--zero-points", "--mapping", "decode"]):
        code = main(["simulate", "--dev", "npu2", "-M", "1", "-K", "512", "-N", "512", "--dtype_in", "bf16",
                     "--dtype_b", "i4", "--group-size", "64", *extra])
        out = capsys.readouterr().out
        assert code == 0 and "PASS" in out and "C vs float64 A @ (" in out, out


SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def w4a16_configs(draw: st.DrawFn) -> GemmConfig:
    dev = draw(st.sampled_from(["npu1", "npu2"]))
    emulate = dev == "npu2" and draw(st.booleans())  # npu2's bf16 on the bfp16 datapath: its 8x8x8 only
    r, s, t = draw(st.sampled_from([(8, 8, 8)] if emulate else DEVICES[dev].mmul_shapes["bf16"]))
    g = draw(st.sampled_from(groupquant.GROUP_SIZES))
    k = draw(st.sampled_from([x for x in (16, 32, 64, 128, 256) if x % s == 0 and (x % g == 0 or g % x == 0)]))
    rho = draw(st.sampled_from([1, 1, 2]))
    m = 2 * r * draw(st.integers(1, 2)) * rho
    n = max(8, 2 * t) * draw(st.integers(1, 2))
    k_mt = k * draw(st.integers(1, 2))
    cols = draw(st.sampled_from(sorted(DEVICES[dev].column_devices)))
    rows = draw(st.sampled_from([1, DEVICES[dev].core_rows]))
    M, K, N = draw(st.integers(1, 2 * rows * m)), draw(st.integers(1, 2 * k_mt)), draw(st.integers(1, 2 * cols * n))
    return GemmConfig(dev, M, K, N, m, k, n, k_mt, "bf16", draw(st.sampled_from(["bf16", "f32"])), dtype_b="i4",
                      group_size=g, zero_points=draw(st.booleans()), mmul_shape=(r, s, t), rho=rho, cols=cols,
                      rows=rows, queue_groups=draw(st.integers(1, 4)), c_col_maj=draw(st.booleans()),
                      emulate_bf16_with_bfp16=emulate,
                      # on the bfp16 datapath: the convert-once kernel (the default) or the emulated one
                      convert_once=emulate and draw(st.booleans()))


@SETTINGS
@given(w4a16_configs(), st.integers(0, 2**16))
def test_random_w4a16_designs_simulate_exactly(c, seed):
    refused = (ConfigError, DmaLimitError)  # an invalid random config is refused with a reason, never simulated
    refusal = _refusal(c)
    with pytest.raises(refused) if refusal else contextlib.nullcontext():
        _passes(c, seed)
    record_config(c, "refused" if refusal else "equal")


def _refusal(c: GemmConfig) -> Exception | None:
    try:
        check(c)
    except (ConfigError, DmaLimitError) as e:
        return e
    return None


# ---- mutants that must fail ----------------------------------------------------------------------
def _mutated_host(monkeypatch, mutate) -> None:
    real = b_objects.pack_objects

    def packed(c, call, b):
        dram = real(c, call, b)
        return mutate(c, dram, groupquant.ObjectLayout(c.tiling.k, c.tiling.n, c.groups.group_size,
                                                       c.groups.zero_points))

    monkeypatch.setattr(hostdata, "pack_objects", packed)


def _scales_first(c, dram, lay):
    return np.concatenate([dram[..., lay.scale_offset:], dram[..., : lay.q_bytes]], axis=-1)


def _high_nibble_first(c, dram, lay):
    q = dram[..., : lay.q_bytes]
    return np.concatenate([(q >> 4) | (q << 4), dram[..., lay.q_bytes:]], axis=-1)


def _scale_rows_swapped(c, dram, lay):
    out = dram.copy()
    row = c.tiling.n * 2
    first, second = slice(lay.scale_offset, lay.scale_offset + row), slice(lay.scale_offset + row, lay.zero_offset)
    out[..., first], out[..., second] = dram[..., second], dram[..., first]
    return out


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # q bytes read as scales overflow: that is the point
@pytest.mark.parametrize("mutate", [_scales_first, _high_nibble_first, _scale_rows_swapped])
@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_a_host_that_breaks_the_object_layout_fails(monkeypatch, mutate, dev):
    c = _config(dev, 16, 256, 64, g=32)  # k = 64: two scale rows per object
    assert simulate(c).passed
    _mutated_host(monkeypatch, mutate)
    assert not simulate(c).passed


def test_a_memtile_that_re_tiles_the_object_fails(monkeypatch):
    """Forwarded even words first, then odd ones: the same bytes, another order; the kernel model reads
    the object from L1, so its provenance says so."""
    real = patterns.b_l2_to_stream

    def re_tiled(g):
        return Tap(0, (2, g.obj // 2), (1, 2)) if g.obj else real(g)

    c = _config("npu2", 16, 256, 64)
    monkeypatch.setattr(patterns, "b_l2_to_stream", re_tiled)
    with pytest.raises((LayoutError, SimulationError), match="B"):
        simulate(c)


def test_slices_out_of_order_read_a_stale_scratch():
    """The kernel dequantizes a B object on slice 0 of its k-step's rho calls; a design calling slice 1
    first would multiply by the previous object's scratch."""
    c = _config("npu2", 64, 256, 64, tiles=(32, 64, 32, 64), rho=2)
    design = build_design(c)
    assert simulate(design).passed

    def swapped(ops):
        out = []
        for op in ops:
            if isinstance(op, Loop):
                op = replace(op, body=tuple(swapped(op.body)))
            elif isinstance(op, Call) and op.scalars in ((0,), (1,)):
                op = replace(op, scalars=(1 - op.scalars[0],))
            out.append(op)
        return out

    bad = replace(design, workers=tuple(replace(wk, program=tuple(swapped(wk.program))) for wk in design.workers))
    with pytest.raises(LayoutError, match="slice 1 reads the B_deq scratch before slice 0"):
        simulate(bad)


@pytest.mark.parametrize("zp", [False, True])
def test_the_convert_once_scratch_holds_the_bfp16_tiles_the_body_multiplies(monkeypatch, zp):
    """npu2's default kernel: the simulated B_bfp16 scratch holds, in the 1 x 2 super-block order the body's B
    stream reads (l1_layout.b_tile_pairs), the bfp16 tiles of B^T whose values are the numerics' operand: the exact
    float32 weights quantized once along K."""
    from gemm_gen.facts import bfp16
    from gemm_gen.facts.l1_layout import b_tile_pairs
    from gemm_gen.sim import kernel as sim_kernel
    from gemm_gen.sim import words

    seen: list[tuple[np.ndarray, np.ndarray]] = []
    real = sim_kernel.KernelEmulator._b_values

    def spy(self, b_cells, deq_cells):
        tile = real(self, b_cells, deq_cells)
        seen.append((self.numerics.operand_b(tile), (deq_cells & words.VALUE_MASK).astype(np.uint32).view(np.uint8)))
        return tile

    monkeypatch.setattr(sim_kernel.KernelEmulator, "_b_values", spy)
    c = _config("npu2", 16, 256, 64, zp=zp, tiles=(16, 64, 32, 64))
    assert c.kernel.convert_once
    _passes(c, literal=True)  # the literal simulator: its matmul kernel dequantizes every object
    q = bfp16.TILE
    for want, scratch in seen[:4]:
        pairs = scratch.reshape(-1, bfp16.TILE_BYTES)
        tiles = pairs[b_tile_pairs(c.tiling.k // q, c.tiling.n // q)].transpose(1, 0, 2)  # (n/8, k/8) tiles of B^T
        got = bfp16.tile_values(np.ascontiguousarray(tiles)).T
        assert np.array_equal(got, want.astype(np.float32)) and np.any(got != 0)


# ---- refusals ------------------------------------------------------------------------------------
def test_npu1_t4_is_accepted_for_w4a16_and_refused_for_w4a8():
    c = _config("npu1", 64, 256, 64)
    assert c.kernel.mmul[2] == 4 and build_design(c)
    check_granularity(c)
    w4a8 = GemmConfig("npu2", 64, 256, 64, 16, 64, 16, 128, "i8", "i32", dtype_b="i4", mmul_shape=(4, 16, 4))
    with pytest.raises(ConfigError, match="t=4 x i4 = 2 B is not a multiple of the 4-byte DMA word") as e:
        check_granularity(w4a8)  # W4A8 re-tiles B's words into t-wide blocks: t = 4 cuts them
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("kw, match", [
    ({"tiles": (8, 64, 12, 128)}, "n=12 is not a multiple of 2t=8"),
    ({"tiles": (8, 48, 16, 96), "g": 32}, "-k 48 with --group-size 32"),
    ({"g": 48}, "--group-size 48"),
    ({"bias": True}, "its tile would ride in a B object of i4"),
    ({"convert_once": True}, "--convert-once is for a bf16 A .* not npu1"),  # npu1 has no bfp16 datapath
    ({"b_pack": "strips"}, "--b-pack strips with W4A16: its B is each core column's objects"),
    ({"dev": "npu2", "convert_once": True, "emulate_bf16_with_bfp16": False}, "turns off"),
])
def test_w4a16_configs_are_refused_in_one_line(kw, match):
    kw = dict(kw)
    dev = str(kw.pop("dev", "npu1"))
    with pytest.raises(ConfigError, match=match) as e:
        build_design(_config(dev, 64, 256, 64, **kw))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("kw, once", [({}, True), ({"convert_once": False}, False),
                                      ({"emulate_bf16_with_bfp16": False}, False), ({"activation": "relu"}, False)])
def test_npu2_w4a16_converts_once_where_it_can(kw, once):
    """npu2's default W4A16 kernel is the convert-once one (B dequantized straight into bfp16), never weighed by
    the search against the emulated one (other numerics); --convert-once 0, native bf16 mmuls and an epilogue
    (which the convert-once kernel has not) keep the emulated / native bf16 path. npu1 has no bfp16 datapath."""
    c = _config("npu2", 64, 256, 64, **kw)
    assert c.kernel.convert_once == once and c.kernel.block == once and not resolve(c.options).convert_once_open
    assert not _config("npu1", 64, 256, 64).kernel.convert_once


# ---- the operator --------------------------------------------------------------------------------
def _operands(K: int = 200, N: int = 72, g: int = 64, seed: int = 5):
    rng = np.random.default_rng(seed)
    A = rng.integers(-8, 8, (5, K)).astype(ml_dtypes.bfloat16)
    Bq = rng.integers(-8, 8, (K, N)).astype(np.int8)
    s = bf16_rne(np.ldexp(1 + rng.integers(0, 128, (-(-K // g), N)) / 128, -5))
    z = rng.integers(-8, 8, s.shape).astype(np.int8)
    return A, Bq, s, z


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_the_operator_takes_values_or_packed_bytes_with_scales_and_zero_points(dev):
    A, Bq, s, z = _operands()
    g = Gemm(device=dev, dtype_in="bf16", dtype_b="i4", group_size=64, zero_points=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NumericsWarning)  # bf16 scales: nothing rounded, nothing said
        C, acc = g.simulate(A, Bq, scales=s, zero_points=z, report=True)
    assert acc.frobenius_rel < 0.01
    exact = A.astype(np.float64) @ groupquant.dequant_exact(Bq, s, z, 64)
    assert np.allclose(C.astype(np.float64), exact, rtol=0.02, atol=0.5)
    assert np.array_equal(g.simulate(A, pack_i4(Bq, axis=0), packed=True, scales=s, zero_points=z), C)


def test_scales_that_are_not_bf16_are_rounded_once_and_said():
    A, Bq, s, _ = _operands()
    g = Gemm(device="npu1", dtype_in="bf16", dtype_b="i4", group_size=64)
    s64 = s.astype(np.float64) + 2.0**-20  # every scale just above a bf16 value: rounded down
    with pytest.warns(NumericsWarning, match=f"scales: {s.size} of {s.size} values are not bf16 values"):
        C = g.simulate(A, Bq, scales=s64)
    assert np.array_equal(C, g.simulate(A, Bq, scales=s))
    x = np.array([1 + 2.0**-8 + 2.0**-40, 1 + 2.0**-8, 1 + 3 * 2.0**-8])
    assert bf16_rne(x).astype(np.float64).tolist() == [1 + 2.0**-7, 1.0, 1 + 2.0**-6]  # once, to nearest even


@pytest.mark.parametrize("call, match", [
    (lambda g, A, B, s, z: g.simulate(A, B, zero_points=z), "needs scales: one bf16 scale per 64 rows"),
    (lambda g, A, B, s, z: g.simulate(A, B, scales=s[:3], zero_points=z), r"scales is 3 x 72, for B of 200 x 72"),
    (lambda g, A, B, s, z: g.simulate(A, B, scales=s), "needs zero_points="),
    (lambda g, A, B, s, z: g.simulate(A, B, scales=s, zero_points=z.T), "zero_points is 72 x 4"),
    (lambda g, A, B, s, z: g.simulate(A, B, scales=s, zero_points=z * 2), "outside i4's range"),
    (lambda g, A, B, s, z: g.simulate(A, B, scales=s.astype(np.float32) * np.inf, zero_points=z), "NaN or infinite"),
    (lambda g, A, B, s, z: g.simulate(A, B, scales=s.astype(np.float32).astype(str), zero_points=z), "holds text"),
    # the core flushes subnormals, and forms (136 + q) s in fp32: scales it cannot use (groupquant.MIN/MAX_SCALE)
    (lambda g, A, B, s, z: g.simulate(A, B, scales=np.where(np.arange(72) == 5, 2.0**-130, s.astype(np.float64)),
                                      zero_points=z),
     r"4 values below 1.175e-38 \(2\^-126\) but not 0 \(first scales\[0, 5\]"),
    (lambda g, A, B, s, z: g.simulate(A, B, scales=s.astype(np.float64) * 2.0**126, zero_points=z),
     r"above 2.378e\+36 after bf16 rounding .*pass scales of at most 2.378e\+36"),
    (lambda g, A, B, s, z: g.simulate(A, B, scales=np.full(s.shape, 1e300), zero_points=z), r"288 values above"),
    (lambda g, A, B, s, z: g.simulate(A, B * 2, scales=s, zero_points=z), "outside i4's range"),
    (lambda g, A, B, s, z: Gemm(device="npu2", dtype_in="bf16", dtype_b="i4", group_size=64).simulate(
        A, B, scales=s, zero_points=z), "zero_points given to a Gemm without zero points"),
    (lambda g, A, B, s, z: Gemm(device="npu2").simulate(A, B.astype(ml_dtypes.bfloat16), scales=s),
     "scales= belongs to int4 weights with group scales"),
    (lambda g, A, B, s, z: Gemm(device="npu2", dtype_in="bf16", dtype_b="i4"), "group_size=32 | 64 | 128"),
])
def test_the_operator_refuses_in_one_line(call, match):
    A, Bq, s, z = _operands()
    g = Gemm(device="npu2", dtype_in="bf16", dtype_b="i4", group_size=64, zero_points=True)
    with pytest.raises(ConfigError, match=match) as e:
        call(g, A, Bq, s, z)
    assert "\n" not in str(e.value)


# ---- CLI and names -------------------------------------------------------------------------------
@pytest.mark.parametrize("flags, text", [
    (["--dtype_in", "bf16", "--dtype_b", "i4"], "add --group-size"),
    (["--dtype_in", "bf16", "--dtype_b", "i4", "--group-size", "48"], "--group-size 48"),
    (["--dtype_in", "i8", "--dtype_b", "i4", "--group-size", "32"], "group scales belong to int4"),
    (["--zero-points"], "--zero-points without --group-size"),
    (["--dtype_in", "bf16", "--dtype_b", "i4", "--group-size", "x"], "--group-size"),
])
@pytest.mark.parametrize("command", ["simulate", "predict", "plan"])
def test_the_cli_exits_2_on_bad_w4a16_flags(command, flags, text, capsys):
    try:
        code = main([command, "--dev", "npu2", "-M", "16", "-K", "256", "-N", "64", *flags])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and text in err and err.count("\n") == 1, err


def test_build_names_say_the_group():
    assert _config("npu2", 16, 256, 64).suffix.endswith("_g128")
    assert _config("npu2", 16, 256, 64, g=32, zp=True).suffix.endswith("_g32z")
    plain = GemmConfig("npu2", 16, 256, 64, 16, 64, 16, 128, "bf16", "bf16")
    assert "_g" not in plain.suffix and "group_size" not in plain.to_json()


def test_the_npu_runner_lays_w4a16_out_and_checks_it(tmp_path):
    """gemm-gen run's path (an XRT stand-in that computes C from the buffers it is given): B as objects."""
    from gemm_gen.backends import runner

    from ..backends.test_runner import prebuilt
    from ..fake_pyxrt import FakeXrt
    c = _config("npu2", 40, 300, 72, g=64, zp=True)
    result = runner.run_design(c, prebuilt(c, tmp_path), iters=1, warmup=0, xrt=FakeXrt(c))
    assert result.passed and result.checked == 40 * 72
    # its accuracy is against float64 A @ ((q - z) s), as simulate reports it, not the bf16-rounded weights
    sim = simulate(c)
    assert result.accuracy == sim.accuracy and result.accuracy.exact < result.accuracy.elements


def test_the_search_weighs_no_packing_for_w4a16():
    """A W4A16 B has one layout: the choice fills no b_pack and the name carries none."""
    from gemm_gen.search import choose
    from gemm_gen.spec.request import Options, Problem, Request

    chosen = choose(Request(Options("npu2", "bf16", "bf16", dtype_b="i4", group_size=128), Problem(64, 1024, 512)))
    assert "b_pack" not in chosen.filled and chosen.config.layout.b_pack == "tiles"
    w4a8 = choose(Request(Options("npu2", "i8", "i32", dtype_b="i4"), Problem(64, 1024, 512)))
    assert "b_pack" in w4a8.filled  # an int4 B without groups: the model picks its packing


def test_the_operators_npu_call_equals_its_simulation(tmp_path, monkeypatch):
    """g(A, Bq, scales=s, zero_points=z) through the stand-in tools and XRT (tests/fake_pyxrt.py computes C
    from the buffers the call hands it): the same C as g.simulate, so the host lays the objects out alike."""
    from gemm_gen.backends import cache, toolchain

    from ..backends.test_build import _fake_tools
    from ..fake_pyxrt import FakeXrt

    _fake_tools(tmp_path, monkeypatch)
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    A, Bq, s, z = _operands()
    g = Gemm(device="npu2", dtype_in="bf16", dtype_b="i4", group_size=64, zero_points=True)
    want = g.simulate(A, Bq, scales=s, zero_points=z)
    design = g.design(*A.shape, Bq.shape[1])
    monkeypatch.setattr(toolchain, "pyxrt", lambda: FakeXrt(design.config))
    got = g(A, Bq, scales=s, zero_points=z)
    assert got.dtype == want.dtype and np.array_equal(got.view(np.uint16), want.view(np.uint16))
