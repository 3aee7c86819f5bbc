"""Seeded inputs (and the exactness they promise), element types, and device descriptions."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemm_gen.design.tap import Tap
from gemm_gen.facts.devices import CORE_DMA, DEVICES, MEM_DMA, NPU1, NPU2, SHIM_DMA, TileKind, device
from gemm_gen.facts.dtypes import BF16, DTYPES, F32, I8, I16, I32, WORD_BYTES, dtype
from gemm_gen.facts.errors import ConfigError, GemmGenError
from gemm_gen.facts.inputs import make_inputs
from gemm_gen.facts.numerics import KernelNumerics, reference

SETTINGS = settings(max_examples=50, deadline=None)
INT32_MAX = 2**31 - 1


def bits16(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint16)


# ---------------------------------------------------------------------------------------------
# make_inputs: determinism
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("t_in, t_out", [("bf16", "bf16"), ("bf16", "f32"), ("i8", "i8"), ("i8", "i32")])
def test_make_inputs_deterministic_per_seed(t_in, t_out):
    a1, b1 = make_inputs(16, 48, 24, t_in, t_out, seed=7)
    a2, b2 = make_inputs(16, 48, 24, t_in, t_out, seed=7)
    a3, b3 = make_inputs(16, 48, 24, t_in, t_out, seed=8)
    assert a1.shape == (16, 48) and b1.shape == (48, 24)
    assert a1.dtype == dtype(t_in).host and b1.dtype == dtype(t_in).host
    assert a1.tobytes() == a2.tobytes() and b1.tobytes() == b2.tobytes()
    assert a1.tobytes() != a3.tobytes() and b1.tobytes() != b3.tobytes()


def test_make_inputs_default_seed_is_stable():
    a1, _ = make_inputs(4, 8, 4, "bf16", "bf16")
    a2, _ = make_inputs(4, 8, 4, "bf16", "bf16", seed=0)
    assert a1.tobytes() == a2.tobytes()


# ---------------------------------------------------------------------------------------------
# make_inputs: bf16 values
# ---------------------------------------------------------------------------------------------
def test_wide_bf16_values_are_normal_with_small_exponents_and_some_zeros():
    a, b = make_inputs(200, 200, 200, "bf16", "bf16", seed=3, family="wide")
    v = np.concatenate([a.ravel(), b.ravel()])
    assert v.dtype == ml_dtypes.bfloat16
    raw = bits16(v).astype(np.int64)
    zero = raw == 0  # exact +0.0
    nz = raw[~zero]
    exp = ((nz >> 7) & 0xFF) - 127
    assert exp.min() == -4 and exp.max() == 0
    assert set(np.unique(exp).tolist()) == {-4, -3, -2, -1, 0}
    assert len(np.unique(nz & 0x7F)) == 128  # every 7-bit fraction occurs
    assert 0.4 < (nz >> 15).mean() < 0.6  # both signs, about evenly
    # ~3 % zeros (1966/65536 per value: 80000 draws give a std of ~0.0006)
    assert 0.025 < zero.mean() < 0.035
    # as real numbers: |x| in [2^-4, 2), and multiples of 2^-11, exactly
    x = v.astype(np.float64)[~zero]
    assert (np.abs(x) >= 2**-4).all() and (np.abs(x) < 2).all()
    scaled = x * 2**11
    assert (scaled == np.round(scaled)).all()
    # round trip: the values are exactly bf16 (and exactly fp32)
    assert (x.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64) == x).all()


@SETTINGS
@given(
    m=st.integers(1, 8), kk=st.integers(1, 3000), n=st.integers(1, 8),
    chunk=st.integers(1, 512), seed=st.integers(0, 2**32 - 1),
)
def test_fp64_products_do_not_depend_on_summation_order(m, kk, n, chunk, seed):
    a, b = make_inputs(m, kk, n, "bf16", "bf16", seed=seed)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    blas = a64 @ b64
    # reversed chunk order, each chunk its own matmul, then summed back to front
    rev = np.zeros((m, n))
    for k0 in reversed(range(0, kk, chunk)):
        rev = rev + a64[:, k0 : k0 + chunk] @ b64[k0 : k0 + chunk, :]
    # element by element, reversed k order, pure Python floats
    col = [float(sum(a64[0, k] * b64[k, 0] for k in reversed(range(kk))))]
    # exact integer arithmetic: values are multiples of 2^-11, products of 2^-22
    ai = (a64 * 2**11).astype(np.int64)
    bi = (b64 * 2**11).astype(np.int64)
    exact = (ai @ bi).astype(np.float64) / 2**22
    assert blas.tobytes() == rev.tobytes()
    assert blas.tobytes() == exact.tobytes()
    assert col[0] == exact[0, 0]


@SETTINGS
@given(
    m=st.integers(2, 10), kk=st.integers(1, 400), n=st.integers(2, 10),
    k=st.integers(1, 100), seed=st.integers(0, 2**16),
)
def test_tile_alone_equals_tile_inside_whole_reference(m, kk, n, k, seed):
    """What the exactness buys: a sub-tile's reference equals the slice of the whole one."""
    a, b = make_inputs(m, kk, n, "bf16", "bf16", seed=seed)
    num = KernelNumerics.of("bf16", "bf16")
    whole = reference(num, a, b, k)
    r0, c0 = m // 2, n // 2
    tile = reference(num, a[r0:, :], b[:, c0:], k)
    assert bits16(tile).tobytes() == bits16(np.ascontiguousarray(whole[r0:, c0:])).tobytes()


# ---------------------------------------------------------------------------------------------
# make_inputs: integers
# ---------------------------------------------------------------------------------------------
def test_i8_to_i8_rarely_saturates():
    K = 4320
    a, b = make_inputs(64, K, 64, "i8", "i8", seed=11)
    assert a.dtype == np.int8 and b.dtype == np.int8
    c = a.astype(np.float64) @ b.astype(np.float64)  # exact: |sum| << 2^53
    frac_out = np.mean(np.abs(c) > 127)
    assert frac_out < 0.05
    # and C is not trivially small either: a test that never leaves zero proves nothing
    assert np.abs(c).max() > 32
    assert c.std() > 8


@pytest.mark.parametrize("K", [65536, 1 << 20])
def test_i8_to_i32_worst_case_fits_int32(K):
    a, b = make_inputs(1, K, 2, "i8", "i32", seed=5)
    ma = int(np.abs(a.astype(np.int64)).max())
    mb = int(np.abs(b.astype(np.int64)).max())
    assert ma == mb  # the same distribution for A and B
    assert K * ma * mb <= INT32_MAX
    c = a.astype(np.int64) @ b.astype(np.int64)
    assert np.abs(c).max() <= INT32_MAX
    if K == 65536:
        # 127^2 * 65536 = 1_057_030_144 < 2^31: the whole i8 range is allowed and gets used
        assert ma == 127


def test_int_inputs_stay_inside_the_input_type():
    for t_out in ("i8", "i16", "i32"):
        a, b = make_inputs(8, 64, 8, "i8", t_out, seed=2)
        assert a.dtype == np.int8 and b.dtype == np.int8
        assert a.min() >= -127 and b.min() >= -127  # symmetric [-bound, bound]


# ---------------------------------------------------------------------------------------------
# dtypes
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "t, name, nbytes, per_word, host, is_float",
    [
        (BF16, "bf16", 2, 2, np.dtype(ml_dtypes.bfloat16), True),
        (F32, "f32", 4, 1, np.dtype(np.float32), True),
        (I8, "i8", 1, 4, np.dtype(np.int8), False),
        (I16, "i16", 2, 2, np.dtype(np.int16), False),
        (I32, "i32", 4, 1, np.dtype(np.int32), False),
    ],
)
def test_dtype_facts(t, name, nbytes, per_word, host, is_float):
    assert t.name == name and str(t) == name
    assert t.bytes == nbytes and t.bits == 8 * nbytes
    assert t.per_word == per_word
    assert t.host == host
    assert t.is_float is is_float
    assert t.nbytes(12) == 12 * nbytes
    assert dtype(name) is t
    assert dtype(t) is t
    assert DTYPES[name] is t
    # the host type really has that many bytes
    assert np.zeros(3, dtype=t.host).nbytes == 3 * nbytes


def test_word_bytes():
    assert WORD_BYTES == 4


@pytest.mark.parametrize("t, lo, hi", [(I8, -128, 127), (I16, -32768, 32767), (I32, -(2**31), 2**31 - 1)])
def test_int_ranges(t, lo, hi):
    assert (t.min, t.max) == (lo, hi)


def test_block_type_sizes():
    bfp = dtype("bfp16")
    assert bfp.nbytes(16) == 18 and bfp.elem_bytes == 1.125 and bfp.is_block
    with pytest.raises(ValueError):
        bfp.nbytes(12)
    with pytest.raises(ValueError):
        bfp.bytes  # noqa: B018 - a block type has no per-element size
    # a DMA moves 8 x 8 tiles: 72 bytes, 18 words; scalar types move one element
    assert (bfp.unit_elems, bfp.unit_bytes, bfp.unit_nbytes(3)) == (64, 72, 216)
    assert (I16.unit_elems, I16.unit_bytes, I16.is_block) == (1, 2, False)


def test_wide_units_move_whole_in_words():
    bfp = dtype("bfp16")
    contiguous = Tap(2, (3, 4), (10, 1)).to_words(bfp)  # 3 runs of 4 tiles: 72-word runs
    assert (contiguous.offset, contiguous.sizes, contiguous.strides) == (36, (3, 72), (180, 1))
    strided = Tap(0, (4, 2), (1, 4)).to_words(bfp)  # a transposing walk keeps each tile whole
    assert (strided.sizes, strided.strides) == ((4, 2, 18), (18, 72, 1))
    ids = strided.indices().reshape(8, 18)
    assert all((row == row[0] + np.arange(18)).all() for row in ids)


@pytest.mark.parametrize("bad", ["int8", "fp32", "bfloat16", "", "BF16"])
def test_dtype_lookup_error_names_valid_types(bad):
    with pytest.raises(ConfigError) as ei:
        dtype(bad)
    msg = str(ei.value)
    assert repr(bad) in msg
    for name in ("bf16", "bfp16", "f32", "i8", "i16", "i32"):
        assert name in msg
    assert isinstance(ei.value, GemmGenError)
    assert "bf16, bfp16, f32, i16, i32, i4, i8" in ei.value.fix  # i4: int4 weights (B only)


# ---------------------------------------------------------------------------------------------
# devices
# ---------------------------------------------------------------------------------------------
def test_device_arrays_and_clocks():
    assert (NPU1.columns, NPU1.core_rows, NPU1.clock_ghz) == (4, 4, 1.0)
    assert (NPU2.columns, NPU2.core_rows, NPU2.clock_ghz) == (8, 4, 1.8)
    assert set(DEVICES) == {"npu1", "npu2"}


def test_peak_tops():
    assert NPU2.peak_tops("i8") == pytest.approx(2 * 512 * 32 * 1.8 / 1000)
    assert NPU2.peak_tops("i8") == pytest.approx(58.9824)
    assert NPU1.peak_tops("i8") == pytest.approx(2 * 256 * 16 * 1.0 / 1000)
    assert NPU1.peak_tops("bf16") == pytest.approx(2 * 128 * 16 / 1000)


@pytest.mark.parametrize(
    "name, want",
    [("npu1", NPU1), ("npu", NPU1), ("phoenix", NPU1), ("Phoenix", NPU1),
     ("npu2", NPU2), ("strix", NPU2), ("STRIX", NPU2), ("krackan", NPU2)],
)
def test_device_lookup(name, want):
    assert device(name) is want


def test_device_passthrough_and_unknown():
    assert device(NPU2) is NPU2
    for bad in ("npu3", "", "versal"):
        with pytest.raises(ConfigError, match=repr(bad)):
            device(bad)


@pytest.mark.parametrize(
    "dev, dtype_in, shape",
    [(NPU1, "bf16", (4, 8, 4)), (NPU1, "i8", (4, 8, 8)), (NPU2, "bf16", (4, 8, 8)), (NPU2, "i8", (8, 8, 8))],
)
def test_default_mmul_shapes(dev, dtype_in, shape):
    assert dev.mmul_shape(dtype_in) == shape


def test_bf16_emulation_shape():
    assert NPU2.mmul_shape("bf16", emulate_bf16_with_bfp16=True) == (8, 8, 8)
    with pytest.raises(ConfigError, match="npu1"):
        NPU1.mmul_shape("bf16", emulate_bf16_with_bfp16=True)
    with pytest.raises(ConfigError, match="i8"):
        NPU2.mmul_shape("i8", emulate_bf16_with_bfp16=True)


def test_mmul_shape_unknown_dtype():
    with pytest.raises(ConfigError, match="f32"):
        NPU2.mmul_shape("f32")


def test_tile_kinds_and_dma_specs():
    for dev in (NPU1, NPU2):
        assert dev.first_core_row == 2
        assert [dev.tile_kind(r) for r in range(6)] == [TileKind.SHIM, TileKind.MEM] + [TileKind.CORE] * 4
        assert dev.dma[TileKind.SHIM] is SHIM_DMA
        assert dev.dma[TileKind.MEM] is MEM_DMA
        assert dev.dma[TileKind.CORE] is CORE_DMA
    # sec. 1.1: BDs, channels and locks per tile kind
    assert (CORE_DMA.bds, MEM_DMA.bds, SHIM_DMA.bds) == (16, 48, 16)
    assert (CORE_DMA.s2mm_channels, MEM_DMA.s2mm_channels, SHIM_DMA.s2mm_channels) == (2, 6, 2)
    assert (CORE_DMA.locks, MEM_DMA.locks, SHIM_DMA.locks) == (16, 64, 16)


def test_memory_sizes():
    for dev in (NPU1, NPU2):
        assert dev.l1_bytes == 64 * 1024
        assert dev.memtile_bytes == 512 * 1024


def test_int_distribution_bound_math():
    # independent statement of the i32 rule: the largest b <= 127 with K * b^2 <= int32 max
    from gemm_gen.facts.inputs import int_distribution

    for K in (1, 1000, 65536, 1 << 20, 1 << 24):
        want = max((x for x in range(1, 128) if K * x * x <= INT32_MAX), default=1)
        dist = int_distribution(I8, I32, K)
        assert (dist.bound, dist.density) == (want, 1.0), K


@pytest.mark.parametrize("K", [8, 600, 4096, 65536])
def test_exact_bf16_inputs_sum_exactly_in_fp32_in_any_order(K):
    """Every partial sum of the exact family is exact in fp32 whatever the order: forward, backward
    and pairwise fp32 sums all equal the fp64 sum, for the largest |A B| sum the bound allows."""
    from gemm_gen.facts.inputs import exact_bound

    a, b = make_inputs(4, K, 3, "bf16", "bf16", seed=5)
    prods = (a.astype(np.float64)[:, :, None] * b.astype(np.float64)[None, :, :]).transpose(0, 2, 1)
    exact = prods.sum(axis=-1)
    f = prods.astype(np.float32)
    forward = np.zeros(exact.shape, np.float32)
    for p in range(K):
        forward += f[..., p]
    backward = np.zeros(exact.shape, np.float32)
    for p in reversed(range(K)):
        backward += f[..., p]
    assert (forward == exact).all() and (backward == exact).all() and (f.sum(axis=-1) == exact).all()
    bound = exact_bound(K)
    assert K * bound**2 < 2**24 and (K * (bound + 1) ** 2 >= 2**24 or bound == 127)
    v = np.concatenate([a.ravel(), b.ravel()]).astype(np.float64)
    scale = 2.0 ** (bound.bit_length() - 1)
    assert np.all(v * scale == np.round(v * scale)) and np.abs(v * scale).max() <= bound
    assert 0.01 < np.mean(v == 0) < 0.2  # some exact zeros


def test_exact_bf16_inputs_are_exact_in_bfp16_and_never_meet_the_tie():
    """A block's mantissas are i 2^(6 - floor(log2 max|i|)) < 128: quantizing loses nothing, with any
    rounding, and no block rounds its maximum from 127.5."""
    from gemm_gen.facts import bfp16
    from gemm_gen.facts.rounding import Rounding

    a, _ = make_inputs(64, 512, 8, "bf16", "bf16", seed=9)
    x = a.astype(np.float32)
    for mode in (Rounding.FLOOR, Rounding.CONV_EVEN):
        assert (bfp16.quantize(x, 1, mode) == x).all()
    wide, _ = make_inputs(64, 512, 8, "bf16", "bf16", seed=9, family="wide")
    assert (bfp16.quantize(wide.astype(np.float32), 1, Rounding.CONV_EVEN) != wide.astype(np.float32)).any()
