"""The operator reads the user's arrays as they lie in memory (issue 23 item 3): transposed views
and Fortran-ordered arrays through the column-major layouts, rows padded to a regular stride
through a leading dimension, C in the order asked; every remaining host copy counted with its
reason (gemm_gen/app/operator_layouts.py, CallPlan.copy_lines)."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

from gemm_gen.app.cli import main
from gemm_gen.app.operator import Gemm
from gemm_gen.facts.errors import ConfigError

BF16 = ml_dtypes.bfloat16


def _bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).view(np.uint8)


def _i8(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    return rng.integers(-128, 128, shape, dtype=np.int8)


def _exact(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) @ b.astype(np.float64)


def test_x_transposed_is_read_in_place_as_column_major_a():
    """dW = X^T dY on npu2 bf16: X.T (X C-ordered) reaches the array as column-major A, no host copy
    of A; C equals the exact product within the reported error and the row-major call bit for bit."""
    rng = np.random.default_rng(23)
    X = rng.standard_normal((64, 96)).astype(BF16)  # K x M, C-ordered
    dY = rng.standard_normal((64, 80)).astype(BF16)  # K x N
    g = Gemm(device="npu2", dtype_in="bf16")
    c, acc = g.simulate(X.T, dY, report=True)
    call = g.last_call
    assert call is not None and call.a_col_maj and not call.b_col_maj
    assert call.copies_by_operand()["A"] == 0 and call.copy_lines()[0] == "A: 0 copies"
    exact = _exact(X.T, dY)
    err = np.abs(c.astype(np.float64) - exact)
    assert err.max() == pytest.approx(acc.max_abs) and acc.frobenius_rel < 0.02  # docs/accuracy.md: 0.94% on this path
    assert np.linalg.norm(c.astype(np.float64) - exact) <= acc.frobenius_rel * np.linalg.norm(exact) * (1 + 1e-9)
    row_major = g.simulate(np.ascontiguousarray(X.T), dY)
    assert not g.last_call.a_col_maj and g.last_call.copies_by_operand()["A"] == 0
    assert np.array_equal(_bits(c), _bits(row_major))
    # a Fortran-ordered A is the same layout
    g.simulate(np.asfortranarray(X.T), dY)
    assert g.last_call.a_col_maj and g.last_call.copies_by_operand()["A"] == 0


def test_column_major_b_and_both_operands_transposed():
    rng = np.random.default_rng(1)
    a, b = _i8(rng, (48, 64)), _i8(rng, (64, 40))
    g = Gemm(device="npu1", dtype_in="i8", dtype_out="i32")
    c = g.simulate(np.asfortranarray(a), np.asfortranarray(b))
    assert g.last_call.a_col_maj and g.last_call.b_col_maj
    assert g.last_call.copies_by_operand()["A"] == g.last_call.copies_by_operand()["B"] == 0
    assert np.array_equal(c, a.astype(np.int64) @ b)


def test_padded_rows_are_read_with_a_leading_dimension():
    """Rows padded to a regular stride: the shim reads them at that stride, no copy; even i8 rows of
    33 values (not whole words) read in place when their stride (36 B) is whole words."""
    rng = np.random.default_rng(2)
    g = Gemm(device="npu1", dtype_in="i8", dtype_out="i32")
    base, b = _i8(rng, (40, 36)), _i8(rng, (33, 24))
    a = base[:, :33]
    c = g.simulate(a, b)
    call = g.last_call
    assert dict(call.lds) == {"A": 36} and call.copies_by_operand()["A"] == 0
    assert np.array_equal(c, a.astype(np.int64) @ b)
    assert call.summary()["leading_dimensions"] == {"A": 36}
    # column-major B padded: a slice of a larger Fortran-ordered array
    bbase = np.asfortranarray(_i8(rng, (40, 24)))
    c = g.simulate(np.ascontiguousarray(a), bbase[:33])
    assert g.last_call.b_col_maj and dict(g.last_call.lds) == {"B": 40}
    assert g.last_call.copies_by_operand()["B"] == 0
    assert np.array_equal(c, a.astype(np.int64) @ bbase[:33])


def test_a_stride_that_is_not_whole_words_or_past_the_memory_is_a_counted_copy():
    rng = np.random.default_rng(3)
    g = Gemm(device="npu1", dtype_in="i8", dtype_out="i32")
    b = _i8(rng, (33, 24))
    a = _i8(rng, (40, 35))[:, :33]  # rows 35 B apart
    c = g.simulate(a, b)
    assert "not whole 32-bit words" in dict((x.operand, x.why) for x in g.last_call.copies)["A"]
    assert np.array_equal(c, a.astype(np.int64) @ b)
    buf = _i8(rng, (1, 39 * 36 + 33))[0]  # the last row's padding is not in the allocation
    tight = np.lib.stride_tricks.as_strided(buf, (40, 33), (36, 1))
    c = g.simulate(tight, b)
    assert "outside its array's memory" in g.last_call.copy_lines()[0]
    assert np.array_equal(c, tight.astype(np.int64) @ b)


def test_a_layout_the_user_fixed_that_disagrees_costs_one_copy_said():
    rng = np.random.default_rng(4)
    a, b = _i8(rng, (48, 64)), _i8(rng, (64, 40))
    g = Gemm(device="npu1", dtype_in="i8", dtype_out="i32", a_col_maj=False, b_col_maj=True)
    c = g.simulate(np.asfortranarray(a), b)
    lines = g.last_call.copy_lines()
    assert lines[0] == ("A: 1 copy: A is column-major and Gemm(a_col_maj=False) reads it row-major, so the host "
                        "rearranges it")
    assert lines[1].startswith("B: 1 copy: B is row-major and Gemm(b_col_maj=True)")
    assert g.last_call.host_copies >= 2 and not g.last_call.a_col_maj and g.last_call.b_col_maj
    assert np.array_equal(c, a.astype(np.int64) @ b)


def test_order_f_uses_column_major_c_and_a_fixed_row_major_c_a_host_transpose():
    rng = np.random.default_rng(5)
    a, b = _i8(rng, (64, 64)), _i8(rng, (64, 64))
    g = Gemm(device="npu2", dtype_in="i8", dtype_out="i32")
    c = g.simulate(a, b, order="F")
    assert g.last_call.c_col_maj and c.flags.f_contiguous and np.array_equal(c, a.astype(np.int64) @ b)
    assert "transpose" not in g.last_call.copy_lines()[2]
    x, y = rng.standard_normal((40, 64)).astype(BF16), rng.standard_normal((64, 48)).astype(BF16)
    gb = Gemm(device="npu2", dtype_in="bf16", emulate_bf16_with_bfp16=False)
    cf = gb.simulate(x, y, order="F")
    assert cf.flags.f_contiguous and gb.last_call.c_col_maj  # the kernel's transposed C store
    assert "transpose" not in gb.last_call.copy_lines()[2]
    assert np.array_equal(_bits(np.ascontiguousarray(cf)), _bits(gb.simulate(x, y)))
    row = Gemm(device="npu2", dtype_in="bf16", emulate_bf16_with_bfp16=False, c_col_maj=False)
    cr = row.simulate(x, y, order="F")
    assert cr.flags.f_contiguous and not row.last_call.c_col_maj
    assert "order='F' with Gemm(c_col_maj=False), which writes C row-major: a host transpose" in \
        row.last_call.copy_lines()[2]
    assert np.array_equal(_bits(np.ascontiguousarray(cr)), _bits(np.ascontiguousarray(cf)))
    fixed = Gemm(device="npu2", dtype_in="i8", dtype_out="i32", c_col_maj=True)
    cc = fixed.simulate(a, b)
    assert cc.flags.c_contiguous and "c_col_maj=True" in fixed.last_call.copy_lines()[2]
    assert np.array_equal(cc, a.astype(np.int64) @ b)


def test_bad_layouts_are_counted_copies_or_one_line_refusals():
    rng = np.random.default_rng(6)
    a, b = _i8(rng, (48, 64)), _i8(rng, (64, 40))
    g = Gemm(device="npu1", dtype_in="i8", dtype_out="i32")
    c = g.simulate(a[::-1], b)
    assert "negative stride" in g.last_call.copy_lines()[0]
    assert np.array_equal(c, a[::-1].astype(np.int64) @ b)
    big = _i8(rng, (96, 128))
    c = g.simulate(big[::2, ::2], b)
    assert "neither A's rows nor its columns are contiguous" in g.last_call.copy_lines()[0]
    assert np.array_equal(c, big[::2, ::2].astype(np.int64) @ b)
    c = g.simulate(a.astype(np.int16), b)
    assert "A: 1 copy: A is int16, converted to the input type on the host" in g.last_call.copy_lines()[0]
    with pytest.raises(ConfigError) as e:
        g.simulate(a, b, order="K")
    assert "\n" not in str(e.value) and "order='C' or order='F'" in str(e.value)
    with pytest.raises(ConfigError) as e:
        Gemm(device="npu1", dtype_in="i8", dtype_out="i32", a_col_maj=1)
    assert "\n" not in str(e.value) and "a_col_maj is True or False" in str(e.value)
    with pytest.raises(ConfigError) as e:
        Gemm(device="npu2", dtype_in="bfp16", c_col_maj=True)
    assert "\n" not in str(e.value) and "shares one exponent over 8 N values of a C row" in str(e.value)


def test_plan_json_counts_copies_per_operand(capsys):
    assert main(["plan", "--dev", "npu2", "-M", "1000", "-K", "777", "-N", "2000", "--dtype_in", "i8",
                 "--dtype_out", "i32", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    by_op, why = info["call"]["host_copies_by_operand"], info["call"]["copies"]
    assert sum(by_op.values()) == info["host_copies"] and set(why) == {op for op, n in by_op.items() if n}
    assert by_op["A"] == 1 and "not whole 32-bit words" in why["A"]


def test_the_npu_call_reads_x_transposed_in_place(tmp_path, monkeypatch):
    """g(X.T, dY) through the stand-in tools and XRT: column-major A's design, no copy of A, exact C;
    a padded stride gets its own instruction stream."""
    from gemm_gen.backends import cache, toolchain
    from gemm_gen.backends.npu_call import stream_name

    from ..backends.test_build import _fake_tools
    from ..fake_pyxrt import FakeXrt

    _fake_tools(tmp_path, monkeypatch)
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    rng = np.random.default_rng(7)
    X, dY = _i8(rng, (96, 64)), _i8(rng, (96, 64))
    g = Gemm(device="npu1", dtype_in="i8", dtype_out="i32")
    call = g.plan(X.T, dY)
    assert call.a_col_maj and call.copies_by_operand()["A"] == 0
    design = g.design(64, 96, 64, (True, False, False))
    monkeypatch.setattr(toolchain, "pyxrt", lambda: FakeXrt(design.config))
    assert np.array_equal(g(X.T, dY), X.T.astype(np.int32) @ dY.astype(np.int32))
    padded = g.plan(_i8(rng, (64, 100))[:, :96], dY)
    assert dict(padded.lds) == {"A": 100} and stream_name(g.design(64, 96, 64), padded).endswith("_ldA100.bin")


def test_a_conversion_before_a_padded_copy_counts_two():
    rng = np.random.default_rng(8)
    a, b = _i8(rng, (40, 33)).astype(np.int16), _i8(rng, (33, 24))
    g = Gemm(device="npu1", dtype_in="i8", dtype_out="i32")
    c = g.simulate(a, b)
    line = g.last_call.copy_lines()[0]
    assert line.startswith("A: 2 copies: its rows of 33 x i8") and "converted to the input type" in line
    assert g.last_call.copies_by_operand()["A"] == 2 and np.array_equal(c, a.astype(np.int64) @ b)
