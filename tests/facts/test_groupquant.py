"""The W4A16 contract (gemm_gen/facts/groupquant.py): dequantization rounds once, object layout, refusals."""

import numpy as np
import pytest

from gemm_gen.facts import groupquant
from gemm_gen.facts.dtypes import BF16
from gemm_gen.facts.errors import ConfigError
from gemm_gen.facts.groupquant import ObjectLayout, check_group_size, dequant, dequant_exact, scale_rows


def test_dequant_rounds_the_exact_product_once_to_nearest_even():
    rng = np.random.default_rng(1)
    q = rng.integers(-8, 8, (256, 24))
    s = rng.standard_normal((2, 24)).astype(BF16.host)
    z = rng.integers(-8, 8, (2, 24))
    w = dequant(q, s, z, 128)
    exact = dequant_exact(q, s, z, 128)
    assert w.dtype == BF16.host
    assert np.array_equal(w.astype(np.float64), exact.astype(np.float32).astype(BF16.host).astype(np.float64))
    # rows 0..127 use scale row 0, rows 128.. use row 1
    assert np.array_equal(w[127], ((q[127] - z[0]) * s[0].astype(np.float32)).astype(BF16.host))
    assert np.array_equal(w[128], ((q[128] - z[1]) * s[1].astype(np.float32)).astype(BF16.host))


def test_dequant_without_zero_points_is_q_times_s():
    q = np.array([[-8, 7], [1, 0]])
    s = np.array([[0.5, 3.0]], dtype=BF16.host)
    assert dequant(q, s, None, 32).astype(np.float32).tolist() == [[-4.0, 21.0], [0.5, 0.0]]


@pytest.mark.parametrize("k, g, rows", [(64, 32, 2), (128, 128, 1), (32, 128, 1), (256, 64, 4)])
def test_scale_rows(k, g, rows):
    assert scale_rows(k, g) == rows


def test_a_tile_that_cuts_a_group_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="-k 48 with --group-size 32"):
        scale_rows(48, 32)
    with pytest.raises(ConfigError, match="--group-size 48"):
        check_group_size(48)


def test_object_layout_puts_scales_then_zero_points_after_the_values():
    lay = ObjectLayout(k=64, n=32, group_size=32, zero_points=True)
    assert (lay.q_bytes, lay.scale_offset, lay.zero_offset, lay.nbytes) == (1024, 1024, 1024 + 128, 1024 + 256)
    assert ObjectLayout(64, 32, 32, False).nbytes == 1024 + 128


W4A16_TILES = dict(m=32, k=64, n=32, k_mt=256)


@pytest.mark.parametrize("kw, message", [
    (dict(dtype_in="bf16", dtype_b="i4"), "needs one scale per group of K rows"),
    (dict(dtype_in="bf16", dtype_b="i4", group_size=48), "--group-size 48"),
    (dict(dtype_in="i8", dtype_b="i4", group_size=32), "group scales belong to int4 weights times a bf16 A"),
    (dict(dtype_in="bf16", zero_points=True), "--zero-points without --group-size"),
    (dict(dtype_in="bf16", dtype_b="i4", group_size=128, dtype_out="i32"), "writes bf16 or f32"),
    (dict(dtype_in="bf16", dtype_b="i4", group_size=128, acc="bf16", dtype_out="f32"), "accumulates in fp32"),
    (dict(dtype_in="bf16", dtype_b="i4", group_size=128, k=96, k_mt=192), "-k 96 with --group-size 128"),
])
def test_w4a16_option_refusals_are_one_line(kw, message):
    from gemm_gen.spec.checks import check_config
    from gemm_gen.spec.config import GemmConfig

    with pytest.raises(ConfigError, match=message) as err:
        check_config(GemmConfig("npu2", 256, 256, 256, **{**W4A16_TILES, **kw}))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("dev", ["npu2"])  # npu1's 4x8x4 B runs of 4 int4 values cut a DMA word (to lift)
def test_w4a16_runs_the_bf16_mmul(dev):
    from gemm_gen.spec.checks import check_config
    from gemm_gen.spec.config import GemmConfig

    w = check_config(GemmConfig(dev, 256, 256, 256, dtype_in="bf16", dtype_b="i4", group_size=64, **W4A16_TILES))
    assert w.kernel.mmul == GemmConfig(dev, 256, 256, 256, dtype_in="bf16", **W4A16_TILES).kernel.mmul


def test_object_bytes_over_arrays_equals_the_layout():
    from gemm_gen.facts.groupquant import object_bytes

    ks, ns = np.array([32, 64, 256, 128]), np.array([16, 32, 64, 8])
    for zp in (False, True):
        assert object_bytes(ks, ns, 64, zp).tolist() == [ObjectLayout(k, n, 64, zp).nbytes for k, n in zip(ks, ns)]


def test_the_scale_limits_are_the_cores():
    """MAX_SCALE: the largest bf16 whose (136 + 7) s is finite in fp32 (the kernel's product), the next one
    overflows; MIN_SCALE: fp32's smallest normal (the core flushes subnormals); 0 and both limits pass."""
    import ml_dtypes

    top = np.array([groupquant.MAX_SCALE], ml_dtypes.bfloat16)
    after = (top.view(np.uint16) + 1).view(ml_dtypes.bfloat16)
    with np.errstate(over="ignore"):
        assert np.isfinite(np.float32(143) * top.astype(np.float32))[0]
        assert not np.isfinite(np.float32(143) * after.astype(np.float32))[0]
    assert groupquant.MIN_SCALE == float(np.finfo(np.float32).tiny)
    s = np.array([[0.0, groupquant.MIN_SCALE, -groupquant.MAX_SCALE, groupquant.MIN_SCALE / 2, -float(after[0])]])
    small, large = groupquant.scales_out_of_range(s)
    assert small.tolist() == [[False, False, False, True, False]]
    assert large.tolist() == [[False, False, False, False, True]]
