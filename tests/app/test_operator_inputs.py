"""The Python operator lets nothing pass silently (issue 17, item 3): what Gemm(...) and its calls
refuse, in one line each, and what they accept and carry through (NaN/Inf on plain bf16, empty
products)."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from gemm_gen.app.operator import Gemm
from gemm_gen.app.operator_args import in_operator_terms
from gemm_gen.facts.accuracy import Accuracy, EpilogueAccuracy
from gemm_gen.facts.errors import ConfigError, opt, spelled

BF16 = ml_dtypes.bfloat16
M, K, N = 16, 64, 32  # one small block on every path below

# each path with small tiles (what the tuner picks for 16 x 64 x 32), so that designs build fast
PATHS: dict[str, dict[str, Any]] = {
    "npu1-bf16": dict(device="npu1", dtype_in="bf16", tiles=(8, 16, 8, 64)),
    "npu1-bf16-f32": dict(device="npu1", dtype_in="bf16", dtype_out="f32", tiles=(8, 16, 8, 64)),
    "npu2-bf16-plain": dict(device="npu2", dtype_in="bf16", emulate_bf16_with_bfp16=False, tiles=(8, 8, 16, 64)),
    "npu2-bf16": dict(device="npu2", dtype_in="bf16", tiles=(16, 8, 16, 64)),  # default: the bfp16 datapath
    "npu2-bfp16": dict(device="npu2", dtype_in="bfp16", dtype_out="bf16", tiles=(16, 64, 16, 64)),
    "npu2-bf16xbfp16": dict(device="npu2", dtype_in="bf16", dtype_b="bfp16", tiles=(16, 64, 16, 64)),
    "npu1-i8": dict(device="npu1", dtype_in="i8", dtype_out="i32", tiles=(8, 16, 16, 64)),
    "npu2-i8": dict(device="npu2", dtype_in="i8", dtype_out="i32", tiles=(16, 16, 16, 64)),
    "npu1-i16": dict(device="npu1", dtype_in="i16", dtype_out="i32", tiles=(8, 16, 8, 64)),
    "npu2-i16": dict(device="npu2", dtype_in="i16", dtype_out="i32", tiles=(8, 8, 16, 64)),
}
PLAIN_BF16 = ("npu1-bf16", "npu1-bf16-f32", "npu2-bf16-plain")
# paths that quantize A and B to bfp16, and what the refusal names as the reason
QUANTIZED = {"npu2-bf16": "bfp16 datapath (emulate_bf16_with_bfp16=True",
             "npu2-bfp16": "is bfp16 (quantized on the host)",
             "npu2-bf16xbfp16": None}  # A: converted in the core; B: bfp16 on the host
INTEGER = ("npu1-i8", "npu2-i8", "npu1-i16", "npu2-i16")


@cache
def gemm(path: str) -> Gemm:
    """One operator per path for the whole module (its designs are kept between tests)."""
    return Gemm(**PATHS[path])


def grid(shape: tuple[int, int], seed: int) -> np.ndarray:
    """Small multiples of 1/4: exact in bf16 and bfp16, products exact in fp32."""
    return (np.random.default_rng(seed).integers(-4, 5, shape) / 4).astype(BF16)


def refusal(f: Any, *args: Any, **kwargs: Any) -> str:
    """The one-line message of the ConfigError that f(*args, **kwargs) raises."""
    with pytest.raises(ConfigError) as e:
        f(*args, **kwargs)
    text = str(e.value)
    assert "\n" not in text, text
    return text


# ---- NaN and Inf ---------------------------------------------------------------------------------
@pytest.mark.parametrize("path", sorted(QUANTIZED))
@pytest.mark.parametrize("operand", ["A", "B"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_inputs_on_a_bfp16_path_are_refused_with_how_many_and_where(path, operand, bad):
    a, b = grid((M, K), 1), grid((K, N), 2)
    x = a if operand == "A" else b
    x[3, 5] = bad
    x[7, 1] = np.nan
    text = refusal(gemm(path).simulate, a, b)
    assert f"{operand} holds 2 NaN or infinite values (first {operand}[3, 5] = {float(bad)!r})" in text
    assert "unpublished" in text
    reason = QUANTIZED[path] or ("convert a bf16 A to bfp16" if operand == "A" else "B is bfp16")
    assert reason in text
    if path == "npu2-bf16":  # the way out keeps them: plain bf16
        assert "emulate_bf16_with_bfp16=False" in text


def _masks_equal(got: np.ndarray, want: np.ndarray) -> bool:
    return all(np.array_equal(f(got), f(want)) for f in (np.isnan, np.isposinf, np.isneginf))


@pytest.mark.parametrize("path", PLAIN_BF16)
@pytest.mark.parametrize("size", [(M, K, N), (17, 70, 33)])
def test_nan_in_a_row_of_a_makes_that_row_of_c_nan_on_plain_bf16(path, size):
    m, k, n = size
    a, b = grid((m, k), 3), grid((k, n), 4)
    a[5, 9] = np.nan
    c = gemm(path).simulate(a, b).astype(np.float64)
    assert np.isnan(c[5]).all()
    assert np.isfinite(np.delete(c, 5, axis=0)).all()


@pytest.mark.parametrize("path", PLAIN_BF16)
def test_nan_in_a_column_of_b_makes_that_column_of_c_nan_on_plain_bf16(path):
    a, b = grid((M, K), 5), grid((K, N), 6)
    b[11, 7] = np.nan
    c = gemm(path).simulate(a, b).astype(np.float64)
    assert np.isnan(c[:, 7]).all() and np.isfinite(np.delete(c, 7, axis=1)).all()


@pytest.mark.parametrize("path", PLAIN_BF16)
@pytest.mark.parametrize("where", ["A", "B"])
@pytest.mark.parametrize("bad", [np.inf, -np.inf])
def test_inf_reaches_c_as_ieee_arithmetic_says_on_plain_bf16(path, where, bad):
    # Inf times a positive, negative or zero value gives +-Inf or NaN; +Inf meeting -Inf in one
    # sum gives NaN: C's non-finite values are those of the float64 product, sign for sign
    a, b = grid((M, K), 7), grid((K, N), 8)
    (a if where == "A" else b)[2, 3] = bad
    (a if where == "A" else b)[9, 20] = -bad
    c = gemm(path).simulate(a, b).astype(np.float64)
    with np.errstate(invalid="ignore"):
        want = a.astype(np.float64) @ b.astype(np.float64)
    assert not np.isfinite(want).all()
    assert _masks_equal(c, want)


def test_a_nan_the_k_tail_would_read_into_the_previous_row_is_padded_away():
    # with row-major B and K not a multiple of k_mt, row i's K tail reads row i + 1's first values
    # (times B's zeroed slack): a NaN there must not reach row i, so the host pads A instead
    g = gemm("npu1-bf16")
    a, b = grid((M, 70), 9), grid((70, N), 10)
    a[1, 0] = np.nan
    assert any(copy.operand == "A" and "NaN" in copy.why for copy in g.plan(a, b).copies)
    c = g.simulate(a, b).astype(np.float64)
    assert np.isnan(c[1]).all() and np.isfinite(np.delete(c, 1, axis=0)).all()


# ---- what is not real numbers --------------------------------------------------------------------
NOT_NUMBERS = {
    "complex": (lambda s: np.ones(s, np.complex128), r"is complex128: complex numbers.*\.real"),
    "bool": (lambda s: np.ones(s, bool), r"is bool, not numbers; pass [AB]\.astype\("),
    "object": (lambda s: np.ones(s, object), r"array of Python objects \(dtype object\)"),
    "text": (lambda s: np.full(s, "1"), r"holds text \(<U1\)"),
    "dates": (lambda s: np.full(s, np.datetime64("2020-01-01")), r"holds dates \(datetime64\[D\]\)"),
    "time spans": (lambda s: np.full(s, np.timedelta64(1, "s")), r"holds time spans .*np\.timedelta64\(1, 's'\)"),
}


@pytest.mark.parametrize("kind", sorted(NOT_NUMBERS))
@pytest.mark.parametrize("path", ["npu1-i8", "npu2-bf16", "npu2-bfp16", "npu2-i16"])
@pytest.mark.parametrize("operand", ["A", "B"])
def test_arrays_that_are_not_real_numbers_are_refused(kind, path, operand):
    make, pattern = NOT_NUMBERS[kind]
    a = make((M, K)) if operand == "A" else np.ones((M, K), np.int8)
    b = make((K, N)) if operand == "B" else np.ones((K, N), np.int8)
    text = refusal(gemm(path).simulate, a, b)
    assert text.startswith(f"{operand} ") and re.search(pattern, text), text


def test_complex_input_was_cast_before_and_is_refused_now():
    # the issue's case: an int8 operator given complex input dropped the imaginary part
    a = np.ones((M, K)) + 1j
    assert "imaginary" in refusal(gemm("npu2-i8").simulate, a, np.ones((K, N), np.int8))


def test_masked_values_and_ragged_lists_are_refused():
    g = gemm("npu1-i8")
    masked = np.ma.masked_array(np.ones((M, K), np.int8), mask=np.eye(M, K, dtype=bool))
    assert "masked array with 16 masked values" in refusal(g.simulate, masked, np.ones((K, N), np.int8))
    assert "not an array of numbers" in refusal(g.simulate, [[1, 2], [3]], np.ones((2, 2), np.int8))


# ---- integers ------------------------------------------------------------------------------------
def _limits(path: str) -> tuple[str, int, int, str]:
    t = PATHS[path]["dtype_in"]
    info = np.iinfo(np.int8 if t == "i8" else np.int16)
    return t, int(info.min), int(info.max), f"np.{info.dtype.name}"


@pytest.mark.parametrize("path", INTEGER)
def test_integers_outside_the_input_type_are_refused_not_wrapped(path):
    t, lo, hi, host = _limits(path)
    a = np.zeros((M, K), np.int64)
    a[0, 5], a[2, 3], a[9, 9] = hi + 173, lo - 1, 10**12
    text = refusal(gemm(path).simulate, a, np.ones((K, N), np.int8))
    assert text == (f"A has 3 values outside {t}'s range [{lo}, {hi}] (first A[0, 5] = {hi + 173}); clip them "
                    f"yourself (np.clip(A, {lo}, {hi}).astype({host})) to accept the saturation")


def test_the_issues_example_an_int32_300_for_an_i8_operator():
    a = np.zeros((M, K), np.int32)
    a[0, 5], a[1, 0], a[4, 4] = 300, -129, 1000
    assert refusal(gemm("npu1-i8").simulate, a, np.ones((K, N), np.int8)) == (
        "A has 3 values outside i8's range [-128, 127] (first A[0, 5] = 300); clip them yourself "
        "(np.clip(A, -128, 127).astype(np.int8)) to accept the saturation")


@pytest.mark.parametrize("path", ["npu1-i8", "npu2-i16"])
def test_unsigned_and_float_values_outside_the_range_are_refused(path):
    t, lo, hi, _ = _limits(path)
    g, b = gemm(path), np.ones((K, N), np.int8)
    assert f"outside {t}'s range" in refusal(g.simulate, np.full((M, K), 2**63, np.uint64), b)
    assert "(first A[0, 0] = 1e+20)" in refusal(g.simulate, np.full((M, K), 1e20), b)


@pytest.mark.parametrize("path", ["npu1-i8", "npu2-i16"])
def test_floats_for_an_integer_operator_must_be_whole_and_finite(path):
    g, b = gemm(path), np.ones((K, N), np.int8)
    half = np.zeros((M, K))
    half[2, 7] = 0.5
    assert "1 of its values is not whole numbers (first A[2, 7] = 0.5); round them yourself (np.rint(A)" in \
        refusal(g.simulate, half, b)
    for bad in (np.nan, np.inf):
        x = np.zeros((M, K))
        x[4, 1] = bad
        assert f"A holds 1 NaN or infinite value (first A[4, 1] = {bad!r}), which" in refusal(g.simulate, x, b)


@pytest.mark.parametrize("path", INTEGER)
def test_integers_of_any_type_within_the_range_are_multiplied_exactly(path):
    _, lo, hi, _ = _limits(path)
    rng = np.random.default_rng(11)
    a = rng.integers(lo, hi + 1, (M, K)).astype(np.int64)  # wider than the input type, values in range
    b = rng.integers(-3, 4, (K, N)).astype(np.float32)  # whole floats
    c = gemm(path).simulate(a, b)
    assert np.array_equal(c.astype(np.int64), a @ b.astype(np.int64))


# ---- floats --------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["npu1-bf16", "npu2-bf16", "npu2-bf16-plain"])
def test_a_bf16_operator_takes_exact_bf16_values_only_and_says_how_many(path):
    a = grid((M, K), 12).astype(np.float64)
    a[1, 2], a[3, 4] = 0.1, 1 + 2**-10
    text = refusal(gemm(path).simulate, a, grid((K, N), 13))
    assert text == ("A is float64, and 2 of its values are not bf16 values (first A[1, 2] = 0.1); convert it "
                    "yourself (A.astype(ml_dtypes.bfloat16)) to accept the rounding")
    exact = gemm(path).simulate(grid((M, K), 12).astype(np.float64), grid((K, N), 13).astype(np.int64) * 0)
    assert not exact.astype(np.float64).any()


def test_bfp16_takes_any_finite_real_within_float32():
    g = gemm("npu2-bfp16")
    assert g.simulate(np.full((M, K), 0.1), np.ones((K, N))).shape == (M, N)  # quantized on the host anyway
    big = np.zeros((M, K))
    big[6, 2] = 1e40
    assert "1 value beyond float32's range (first A[6, 2] = 1e+40)" in refusal(g.simulate, big, np.ones((K, N)))


# ---- shapes --------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["npu1-i8", "npu2-bf16", "npu2-bfp16", "npu1-bf16-f32"])
@pytest.mark.parametrize("shape", [(0, 5, 3), (3, 0, 4), (3, 5, 0), (0, 0, 0)])
def test_an_empty_product_gives_numpys_empty_or_zero_c_without_a_design(path, shape):
    m, k, n = shape
    g = gemm(path)
    built = set(g._designs)
    c = g.simulate(np.zeros((m, k), np.int8), np.zeros((k, n), np.int8))
    assert set(g._designs) == built  # no design, no simulation
    assert c.shape == (np.zeros((m, k)) @ np.zeros((k, n))).shape and not c.astype(np.float64).any()
    assert c.dtype == g.simulate(np.ones((M, K), np.int8), np.ones((K, N), np.int8)).dtype
    assert "empty product" in refusal(g.plan, np.zeros((m, k), np.int8), np.zeros((k, n), np.int8))


@pytest.mark.parametrize("shape", [(0, 5, 3), (3, 0, 4), (3, 5, 0)])
def test_an_empty_product_with_report_is_still_the_pair(shape):
    """report=True returns (C, its accuracy) for every product, an empty one too: `C, acc = g.simulate(...)` never
    unpacks C's rows instead (issue 33 item 7); so does a call to the NPU, which an empty product never reaches."""
    m, k, n = shape
    g = gemm("npu1-i8")
    for call in (g.simulate, g):
        c, acc = call(np.zeros((m, k), np.int8), np.zeros((k, n), np.int8), report=True)
        assert c.shape == (m, n) and isinstance(acc, Accuracy) and acc.elements == acc.exact == m * n
    e = Gemm(device="npu2", dtype_in="bf16", bias=True, activation="relu")  # M = 0: no output, no call
    c, acc = e.simulate(np.zeros((0, 32), BF16), np.zeros((32, 8), BF16), bias=np.zeros(8, np.float32), report=True)
    assert c.shape == (0, 8) and isinstance(acc, EpilogueAccuracy)


def test_empty_arrays_are_still_checked_for_their_type():
    assert "complex" in refusal(gemm("npu1-i8").simulate, np.zeros((0, 4), complex), np.zeros((4, 2), np.int8))


def test_shapes_that_are_not_matrices_or_do_not_meet_are_one_line():
    g = gemm("npu1-i8")
    assert "not arrays of 1 and 2 dimensions" in refusal(g.simulate, np.ones(K, np.int8), np.ones((K, N), np.int8))
    assert "K differs" in refusal(g.simulate, np.ones((M, K), np.int8), np.ones((K + 1, N), np.int8))


def test_sizes_over_max_size_are_refused_in_the_operators_terms():
    g = Gemm(device="npu2", dtype_in="i8", dtype_out="i32", max_size=(64, 64, 64), tiles=(16, 16, 16, 64))
    text = refusal(g.simulate, np.ones((65, 64), np.int8), np.ones((64, 64), np.int8))
    assert text.startswith("Gemm(device='npu2', dtype_in='i8', dtype_out='i32', max_size=(64, 64, 64)")
    assert "M=65 > 64, the largest M its design serves; use a Gemm whose max_size covers 65x64x64" in text


def _untouched(*a: Any, **k: Any) -> Any:
    raise AssertionError("a design was chosen or an operand copied before the memory check")


@pytest.mark.parametrize("path, packed", [("npu1-i8", False), ("npu2-bf16", False), ("w4a8", True)])
def test_arrays_too_large_to_simulate_are_one_configerror_before_any_copy_or_design(monkeypatch, path, packed):
    """The simulator's memory (and its word numbering) is checked from the shapes first: one line in the
    operator's terms, where a raw MemoryError came after the tuner (issue 33 item 2). Broadcast arrays: the test
    itself allocates nothing."""
    from gemm_gen.sim import memory

    g = Gemm(device="npu1", dtype_in="i8", dtype_b="i4", dtype_out="i32") if path == "w4a8" else gemm(path)
    monkeypatch.setattr(memory, "available_bytes", lambda: 10**9)
    monkeypatch.setattr("gemm_gen.search.choose", _untouched)
    monkeypatch.setattr("gemm_gen.app.operator.host_operand", _untouched)
    monkeypatch.setattr("gemm_gen.app.operator.unpack_i4", _untouched)
    big = 8192
    A = np.broadcast_to(np.int8(1), (big, big)) if path != "npu2-bf16" else np.broadcast_to(BF16(1), (big, big))
    B = np.broadcast_to(np.uint8(0x11), (big // 2, big)) if packed else A
    text = refusal(g.simulate, A, B, **({"packed": True} if packed else {}))
    assert re.search(r"^Gemm\(device='npu\d'.*\): simulating 8192x8192x8192 needs about \d+\.\d GB of memory and "
                     r"1\.0 GB are available; simulate smaller arrays", text), text
    monkeypatch.setattr(memory, "available_bytes", lambda: 10**15)  # a machine with the memory: the word limit
    wide = np.broadcast_to(np.int8(1), (1, 2**32 + 4))
    text = refusal(gemm("npu1-i8").simulate, wide, np.broadcast_to(np.int8(1), (2**32 + 4, 1)))
    assert "A of a 1x4294967300x1 call has 1,073,741,825 words, more than the simulator's" in text


# ---- Gemm(...) ----------------------------------------------------------------------------------
CONSTRUCTOR = [
    (dict(device="npu3"), r"^Gemm\(device='npu3'\): unknown device; use device='npu1' .* or 'npu2' "),
    (dict(device=2), r"^Gemm\(device=2\): device is a name"),
    (dict(device="npu1", dtype_in="bfp16"), r"npu1 multiplies 'bf16', 'i8' or 'i16', not 'bfp16'"),
    (dict(dtype_in="f16"), r"^Gemm\(dtype_in='f16'\): unknown type; use dtype_in='bf16', 'i8', 'i16' or 'bfp16'"),
    (dict(dtype_in=np.int8), r"types are named as mlir-aie names them; use dtype_in='i8'$"),
    (dict(dtype_in="i8", dtype_out="bf16"),
     r"^Gemm\(device='npu2', dtype_in='i8', dtype_out='bf16'\): an i8 GEMM writes 'i8', 'i16' or 'i32'; "
     r"use dtype_out='i8', 'i16' or 'i32'$"),
    (dict(device="npu1", dtype_in="i16", dtype_out="i8"), r"an i16 GEMM writes 'i16' or 'i32'"),
    (dict(device="npu1", dtype_out="bfp16"), r"npu1 has no bfp16 datapath.*use device='npu2'"),
    (dict(dtype_in="bf16", dtype_b="i8"), r"dtype_b='i8' with dtype_in='bf16': .*drop dtype_b"),
    (dict(dtype_in="bf16", acc="i32"), r"acc='i32' with dtype_out='bf16'.*; drop acc, or use acc='out'$"),
    (dict(tiles=(64, 64)),
     r"^Gemm\(tiles=\(64, 64\)\): tiles is \(m, k, n, k_mt\).*e\.g\. tiles=\(\d+, \d+, \d+, \d+\)"),
    (dict(tiles=(0, 8, 16, 64)), r"four integers >= 1"),
    (dict(tiles=(16.0, 8, 16, 64)), r"four integers >= 1"),
    (dict(tiles=(256, 256, 256, 512)), r"tiles=\(256, 256, 256, 512\)\): L1 overflow: .* > 65536 B per core"),
    (dict(tiles=(15, 8, 16, 64)), r"m=15 is not a multiple of 2r=16 .*; use m=16 or 32$"),
    (dict(tiles=(16, 8, 16, 60)), r"k_mt=60 is not a multiple of k=8; use tiles=\(m, k, n, 56\) or 64$"),
    (dict(max_size=(0, 5, 5)), r"^Gemm\(max_size=\(0, 5, 5\)\): max_size is \(M, K, N\).*three integers >= 1"),
    (dict(max_size=(5, 5)), r"max_size is \(M, K, N\)"),
    (dict(b_col_maj="yes"), r"^Gemm\(b_col_maj='yes'\): b_col_maj is True or False"),
    (dict(m=64), r"^Gemm\(m=64\): m is not an option; set it through tiles=\(m, k, n, k_mt\)$"),
    (dict(runtime_sizes="mnk"), r"set it through max_size=\(M, K, N\)$"),
    (dict(no_such_option=1),
     r"^Gemm\(no_such_option=1\): unknown option; use GemmConfig's options: a_col_maj, activation, b_pack, bias, "),
    (dict(rounding=5), r"^Gemm\(rounding=5\): rounding is a string"),
    (dict(activation="swish"), r"^Gemm\(activation='swish'\): unknown activation; use activation='none', 'relu', "),
    (dict(requant="per_tensor"), r"unknown requant; use requant='per_channel'$"),
    (dict(clamp=(1, "a")), r"^Gemm\(clamp=\(1, 'a'\)\): clamp is 2 real numbers or None"),
    (dict(bias=1), r"^Gemm\(bias=1\): bias is True, False or 'auto'"),
    (dict(dtype_in="i8", dtype_out="i8", activation="silu", requant="per_channel"),
     r"activation='silu' on a requantized i8 output.*or activation='relu'$"),
    (dict(requant="per_channel"), r"requant is TFLite's integer requantization, not for a bf16 output; use "
     r"dtype_out='i8' or 'i16'"),
    (dict(bias=True, acc="out"), r"acc='out' converts C after every k-step; drop acc"),
    (dict(rounding="nearest"), r"rounding='nearest'\): unknown rounding mode 'nearest'; use one of floor, "),
    (dict(kernel_loops="fast"),
     r"unknown kernel_loops; use kernel_loops='k-pipelined', 'c-overlap', 'k-flat' or 'jk-flat'$"),
    (dict(mmul_shape=(0, 8, 8)), r"mmul_shape is 3 integers >= 1 or None"),
    (dict(device="npu1", emulate_bf16_with_bfp16=True),
     r"npu2 bf16 feature, not npu1 bf16; drop emulate_bf16_with_bfp16$"),
    (dict(convert_once=True, emulate_bf16_with_bfp16=False), r"which emulate_bf16_with_bfp16=False turns off"),
    (dict(cols=3), r"use cols=1 or 2 or 4 or 8$"),
    (dict(rho=0), r"rho=0 must be positive; give rho a size >= 1$"),
]


@pytest.mark.parametrize("kwargs, pattern", CONSTRUCTOR, ids=[repr(kw) for kw, _ in CONSTRUCTOR])
def test_gemm_refuses_bad_arguments_when_it_is_made_in_its_own_terms(kwargs, pattern):
    text = refusal(Gemm, **kwargs)
    assert re.search(pattern, text), text
    assert "--" not in text and " -m " not in text  # keywords, not CLI flags


def test_good_arguments_make_a_gemm_and_the_options_given_are_kept():
    assert Gemm(device="strix", dtype_in="i8", dtype_out="i16", tiles=(16, 16, 16, 64))._base.array.device == "npu2"
    with_rho = Gemm(device="npu2", dtype_in="i8", dtype_out="i32", rho=2)
    assert with_rho.design(256, 256, 256).config.tiling.rho == 2  # the tuner keeps a rho the user fixed
    strips = Gemm(device="npu2", dtype_in="bfp16", b_pack="tiles", tiles=(16, 64, 16, 64))
    assert strips.design(M, K, N).config.layout.b_pack == "tiles"  # and a bfp16 B's packing


def test_the_options_a_message_names_read_as_the_operators_keywords():
    """A message names options by placeholder (errors.opt); the operator spells each as its keyword, the
    CLI as its flag (no text is rewritten)."""
    assert in_operator_terms(f"use {opt('dtype_out', 'i8', 'i16')}") == "use dtype_out='i8' or 'i16'"
    assert in_operator_terms(f"drop {opt('dtype_b')} (or use {opt('dtype_b', 'bfp16')} with bf16 A)") == \
        "drop dtype_b (or use dtype_b='bfp16' with bf16 A)"
    assert in_operator_terms(f"{opt('emulate_bf16_with_bfp16', False)} turns it off") == \
        "emulate_bf16_with_bfp16=False turns it off"
    both = f"use {opt('compiler', 'chess')}, or {opt('mmul_shape', (4, 8, 4))}"
    assert in_operator_terms(both) == "use compiler='chess', or mmul_shape=(4, 8, 4)"
    assert spelled(both) == "use --chess, or --mmul 4x8x4"
    assert in_operator_terms(f"give {opt('m')} a size, {opt('k_mt', 64)}, {opt('device', 'npu2')}") == \
        "give tiles' m a size, tiles=(m, k, n, 64), device='npu2'"


@pytest.mark.parametrize("kw", [dict(), dict(device="npu1", dtype_in="i8", dtype_out="i8"),
                                dict(device="npu2", dtype_in="i16", dtype_out="i16"), dict(acc="out")])
def test_the_tiles_a_refusal_suggests_build(kw):
    """The example in a refusal of tiles fits the Gemm's own accumulator (C in f32 / i32 / i64 takes
    room the papers' tiles do not leave): made with it, the Gemm builds."""
    with pytest.raises(ConfigError) as e:
        Gemm(**kw, tiles=(64, 64))
    example = tuple(int(x) for x in re.search(r"e\.g\. tiles=\((\d+), (\d+), (\d+), (\d+)\)", str(e.value)).groups())
    Gemm(**kw, tiles=example)


@pytest.mark.parametrize("options, message", [
    ({"task_span": -3}, r"task_span=-3 must be >= 0; use 1 \(one task per output block\) or 0"),
    ({"queue_groups": -1}, r"queue_groups=-1 must be >= 1; use the default 4"),
    ({"zero_points": True}, r"zero_points without group_size: .*add group_size=32 \| 64 \| 128, or drop zero_points"),
])
def test_options_no_tiling_changes_are_refused_when_the_gemm_is_made_naming_them(options, message):
    """Refused in the operator's terms as the Gemm is made, not as a tile the search could not find."""
    with pytest.raises(ConfigError, match=message):
        Gemm(device="npu2", dtype_in="i8", dtype_out="i32", dtype_b="i4", **options)


def test_the_operator_takes_the_kernel_opt_level_in_its_own_terms():
    """Issue 31 item 12: opt_level is an option of the Gemm as of the CLI (--opt-level); a level Peano does not
    have, or one with chess, is refused as the Gemm is made, in the operator's keywords."""
    assert Gemm(device="npu2", dtype_in="i8", dtype_out="i32", opt_level=1).design(256, 256,
                                                                                   256).config.kernel.opt_level == 1
    assert Gemm(device="npu2", dtype_in="i8", dtype_out="i32").design(256, 256, 256).config.kernel.opt_level == 2
    with pytest.raises(ConfigError, match=r"level 9 is not one of Peano's -O0 .. -O3; use opt_level=2"):
        Gemm(device="npu2", dtype_in="i8", dtype_out="i32", opt_level=9)
    with pytest.raises(ConfigError, match=r"opt_level=1 applies to Peano.*drop opt_level"):
        Gemm(device="npu2", dtype_in="i8", dtype_out="i32", opt_level=1, compiler="chess")
