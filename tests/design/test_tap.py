"""Tap / WordTap: element walks, conversion to 32-bit words, and BD field limits.

Limits come from aie-rt's xaiemlgbl_params.h *_WIDTH macros (xaie2pgbl_reginit.c for aie2p) and mlir-aie's
AIEXDialect.cpp getHardwareStridesWraps:
core 3 dims (d0/d1 wrap 8 b, strides 13 b, length 14 b), memtile 4 dims (d0-d2 wrap 10 b,
strides 17 b, length 17 b), shim 3 dims + 1 iteration (d0/d1 wrap 10 b, strides 20 b,
iteration wrap 6 b = max 64, repeat max 256). Stride fields hold stride - 1, so the largest
stride is 2^bits; the last address dimension has no wrap field.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemm_gen.design.tap import Tap, WordTap
from gemm_gen.facts.devices import CORE_DMA, MEM_DMA, SHIM_DMA
from gemm_gen.facts.dtypes import BF16, F32, I8, I16, I32
from gemm_gen.facts.errors import DmaLimitError

SETTINGS = settings(max_examples=50, deadline=None)


def naive_indices(offset, sizes, strides):
    """Independent oracle: nested loops, outermost dimension first."""
    return [
        offset + sum(i * s for i, s in zip(idx, strides))
        for idx in itertools.product(*(range(n) for n in sizes))
    ]


# ---------------------------------------------------------------------------------------------
# Tap basics
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "offset, sizes, strides, expected",
    [
        (0, (4,), (1,), [0, 1, 2, 3]),
        (1, (2, 3), (10, 1), [1, 2, 3, 11, 12, 13]),
        # outermost first: the stride-1 dimension is the slowest one here
        (0, (2, 2, 2), (1, 4, 2), [0, 2, 4, 6, 1, 3, 5, 7]),
        # a transpose of a 2 x 3 row-major matrix
        (0, (3, 2), (1, 3), [0, 3, 1, 4, 2, 5]),
        # stride 0 repeats
        (5, (3, 2), (0, 1), [5, 6, 5, 6, 5, 6]),
    ],
)
def test_indices_hand_examples(offset, sizes, strides, expected):
    tap = Tap(offset, sizes, strides)
    assert tap.indices().tolist() == expected
    assert tap.count == len(expected)
    assert tap.max_index() == max(expected)


def test_count_and_max_index_hand():
    tap = Tap(7, (3, 4, 5), (100, 10, 2))
    assert tap.count == 60
    assert tap.max_index() == 7 + 2 * 100 + 3 * 10 + 4 * 2


def test_linear():
    tap = Tap.linear(5, offset=3)
    assert tap == Tap(3, (5,), (1,))
    assert tap.indices().tolist() == [3, 4, 5, 6, 7]
    assert tap.count == 5 and tap.max_index() == 7
    assert Tap.linear(4).indices().tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "offset, sizes, strides",
    [(0, (2, 3), (1,)), (0, (), ()), (0, (0,), (1,)), (0, (2,), (-1,)), (-1, (2,), (1,))],
)
def test_bad_patterns_rejected(offset, sizes, strides):
    with pytest.raises(ValueError):
        Tap(offset, sizes, strides)


dims_strategy = st.lists(
    st.tuples(st.integers(1, 4), st.integers(0, 20)), min_size=1, max_size=4
)


@SETTINGS
@given(offset=st.integers(0, 50), dims=dims_strategy)
def test_indices_match_nested_loops(offset, dims):
    sizes = tuple(d[0] for d in dims)
    strides = tuple(d[1] for d in dims)
    tap = Tap(offset, sizes, strides)
    expected = naive_indices(offset, sizes, strides)
    assert tap.indices().tolist() == expected
    assert tap.count == len(expected)
    assert tap.max_index() == max(expected)


# ---------------------------------------------------------------------------------------------
# to_words
# ---------------------------------------------------------------------------------------------
def test_to_words_bf16_hand():
    # 3 x 4 blocks of 16 bf16, rows 32 elements apart, blocks 256 apart, starting at element 8
    w = Tap(8, (3, 4, 16), (256, 32, 1)).to_words(BF16)
    assert w == WordTap(4, (3, 4, 8), (128, 16, 1))


def test_to_words_i8_hand():
    w = Tap(8, (2, 3, 32), (64, 128, 1)).to_words(I8)
    assert w == WordTap(2, (2, 3, 8), (16, 32, 1))


def test_to_words_i16_hand():
    assert Tap(2, (5, 6), (10, 1)).to_words(I16) == WordTap(1, (5, 3), (5, 1))


def test_to_words_size1_outer_dim_with_odd_stride_is_fine():
    # a size-1 dimension never steps, so its stride does not have to be whole words
    w = Tap(0, (1, 4), (3, 1)).to_words(BF16)
    assert w.sizes == (1, 2)
    assert w.indices().tolist() == [0, 1]


@pytest.mark.parametrize("t", [F32, I32])
def test_to_words_four_byte_types_unchanged(t):
    # 4-byte elements are words: anything goes, even a non-unit innermost stride and odd offsets
    tap = Tap(3, (2, 5), (7, 3))
    w = tap.to_words(t)
    assert (w.offset, w.sizes, w.strides) == (3, (2, 5), (7, 3))
    assert w.indices().tolist() == tap.indices().tolist()


def _expand_words(word_idx, per):
    return [w * per + j for w in word_idx for j in range(per)]


@SETTINGS
@given(
    t=st.sampled_from([BF16, I8, I16]),
    offset_words=st.integers(0, 10),
    inner_words=st.integers(1, 4),
    outer=st.lists(st.tuples(st.integers(1, 3), st.integers(0, 12)), max_size=3),
)
def test_to_words_walks_the_same_bytes(t, offset_words, inner_words, outer):
    per = 4 // t.bytes
    sizes = tuple(s for s, _ in outer) + (inner_words * per,)
    strides = tuple(st_ * per for _, st_ in outer) + (1,)
    tap = Tap(offset_words * per, sizes, strides)
    w = tap.to_words(t)
    # element walk == each word expanded into its `per` elements, in order
    assert _expand_words(w.indices().tolist(), per) == tap.indices().tolist()
    assert w.count * per == tap.count
    assert w.strides[-1] == 1 and w.sizes[-1] == inner_words
    assert w.offset == offset_words


def test_to_words_rejects_innermost_stride_on_subword():
    with pytest.raises(DmaLimitError, match="innermost stride 2"):
        Tap(0, (4, 4), (1, 2)).to_words(BF16)
    with pytest.raises(DmaLimitError, match="innermost stride 4"):
        Tap(0, (8, 4), (1, 4)).to_words(I8)


@pytest.mark.parametrize("t, n_bad, n_ok", [(BF16, 3, 4), (I8, 6, 8), (I8, 2, 4), (I16, 1, 2)])
def test_to_words_rejects_partial_word_runs(t, n_bad, n_ok):
    with pytest.raises(DmaLimitError, match=f"innermost run of {n_bad} x {t.name}"):
        Tap(0, (2, n_bad), (64, 1)).to_words(t)
    assert Tap(0, (2, n_ok), (64, 1)).to_words(t).sizes[-1] == n_ok * t.bytes // 4


@pytest.mark.parametrize("t, off_bad, off_ok", [(BF16, 1, 2), (I8, 2, 4), (I8, 3, 8), (I16, 3, 4)])
def test_to_words_rejects_unaligned_offset(t, off_bad, off_ok):
    with pytest.raises(DmaLimitError, match=f"at offset {off_bad} is not whole"):
        Tap(off_bad, (8,), (1,)).to_words(t)
    assert Tap(off_ok, (8,), (1,)).to_words(t).offset == off_ok * t.bytes // 4


def test_to_words_rejects_outer_stride_not_whole_words():
    with pytest.raises(DmaLimitError, match=r"stride 33 x bf16 of dimension 1"):
        Tap(0, (2, 4), (33, 1)).to_words(BF16)
    with pytest.raises(DmaLimitError, match=r"stride 6 x i8 of dimension 2"):
        Tap(0, (2, 2, 8), (6, 16, 1)).to_words(I8)
    # the same walks with whole-word strides are fine
    assert Tap(0, (2, 4), (34, 1)).to_words(BF16).strides == (17, 1)
    assert Tap(0, (2, 2, 8), (8, 16, 1)).to_words(I8).strides == (2, 4, 1)


# ---------------------------------------------------------------------------------------------
# WordTap.dims
# ---------------------------------------------------------------------------------------------
def test_dims_innermost_first_and_leading_ones_dropped():
    w = WordTap(0, (1, 1, 3, 1, 5), (9, 9, 20, 0, 1))
    assert w.dims() == [(5, 1), (1, 0), (3, 20)]
    assert WordTap(0, (1, 1), (0, 0)).dims() == [(1, 0)]


# ---------------------------------------------------------------------------------------------
# WordTap.check: one case just inside, one just outside each limit
# ---------------------------------------------------------------------------------------------
WHERE, FIX = "test hop", "do something else"


def ok(spec, sizes, strides, offset=0):
    WordTap(offset, tuple(sizes), tuple(strides)).check(spec, WHERE, FIX)


def bad(spec, sizes, strides, *fragments):
    with pytest.raises(DmaLimitError) as ei:
        WordTap(0, tuple(sizes), tuple(strides)).check(spec, WHERE, FIX)
    msg = str(ei.value)
    assert msg.startswith(WHERE + ":"), msg
    assert FIX in msg, msg
    for frag in fragments:
        assert re.search(frag, msg), (frag, msg)
    return msg


def test_spec_numbers():
    # the field widths of sec. 1.2, expressed as limits
    assert (CORE_DMA.dims, CORE_DMA.max_wrap, CORE_DMA.max_stride, CORE_DMA.max_length) == (
        3, 255, 2**13, 2**14 - 1)
    assert (MEM_DMA.dims, MEM_DMA.max_wrap, MEM_DMA.max_stride, MEM_DMA.max_length) == (
        4, 1023, 2**17, 2**17 - 1)
    assert (SHIM_DMA.dims, SHIM_DMA.max_wrap, SHIM_DMA.max_stride, SHIM_DMA.max_length) == (
        3, 1023, 2**20, 2**32 - 1)
    assert (SHIM_DMA.iteration_wrap_max, SHIM_DMA.max_iteration_stride, SHIM_DMA.max_repeat) == (
        64, 2**20, 256)


# --- number of dimensions ---
def test_core_dims():
    ok(CORE_DMA, (2, 2, 2), (8, 4, 1))
    ok(CORE_DMA, (1, 1, 2, 2, 2), (0, 0, 8, 4, 1))  # leading size-1 dims do not count
    bad(CORE_DMA, (2, 2, 2, 2), (16, 8, 4, 1), r"\b4 address dimensions", r"core DMA has 3\b")


def test_mem_dims():
    ok(MEM_DMA, (2, 2, 2, 2), (16, 8, 4, 1))
    bad(MEM_DMA, (2, 2, 2, 2, 2), (32, 16, 8, 4, 1), r"\b5 address dimensions", r"mem DMA has 4\b")


def test_shim_dims():
    ok(SHIM_DMA, (2, 2, 2, 2), (16, 8, 4, 1))  # 3 + the iteration dimension
    bad(SHIM_DMA, (2, 2, 2, 2, 2), (32, 16, 8, 4, 1), r"\b5 address dimensions",
        r"shim DMA has 3 \+ 1 iteration")


# --- d0 / d1 (and memtile d2) wraps ---
@pytest.mark.parametrize("spec, limit", [(CORE_DMA, 255), (SHIM_DMA, 1023), (MEM_DMA, 1023)])
def test_d0_wrap(spec, limit):
    ok(spec, (2, limit), (limit, 1))
    bad(spec, (2, limit + 1), (limit + 1, 1), rf"d0 wrap {limit + 1} words",
        rf"max {limit}\)", spec.kind.value)


@pytest.mark.parametrize("spec, limit", [(CORE_DMA, 255), (SHIM_DMA, 1023), (MEM_DMA, 1023)])
def test_d1_wrap(spec, limit):
    ok(spec, (2, limit, 2), (2 * limit, 2, 1))
    bad(spec, (2, limit + 1, 2), (2 * limit + 2, 2, 1), rf"d1 wrap {limit + 1} words", rf"max {limit}\)")


def test_mem_d2_wrap():
    ok(MEM_DMA, (2, 1023, 2, 2), (4096, 4, 2, 1))
    bad(MEM_DMA, (2, 1024, 2, 2), (4096, 4, 2, 1), r"d2 wrap 1024 words", r"max 1023\)")


@pytest.mark.parametrize(
    "spec, sizes, strides",
    [
        (CORE_DMA, (1000, 2, 2), (4, 2, 1)),  # core d2 has no wrap field
        (SHIM_DMA, (5000, 2, 2), (4, 2, 1)),  # shim d2 neither
        (MEM_DMA, (2000, 2, 2, 2), (8, 4, 2, 1)),  # memtile d3 neither
    ],
)
def test_last_dimension_has_no_wrap_limit(spec, sizes, strides):
    ok(spec, sizes, strides)


@pytest.mark.parametrize("spec, n", [(CORE_DMA, 5000), (SHIM_DMA, 100_000), (MEM_DMA, 100_000)])
def test_linear_transfer_has_no_wrap_limit(spec, n):
    ok(spec, (n,), (1,))
    ok(spec, (1, 1, n), (0, 0, 1))  # leading size-1 dimensions: still linear
    # split into two dimensions, the innermost extent is a wrap again
    bad(spec, (2, n), (n, 1), rf"d0 wrap {n} words")


def test_shim_linear_transfer_with_iteration_has_no_wrap_limit():
    # mlir-aie treats sizes [*,1,1,len] as linear whatever the iteration/repeat dimension
    # (sec. 1.3); the same 2000 words without the outer dimension already pass
    ok(SHIM_DMA, (1, 1, 1, 2000), (0, 0, 0, 1))
    ok(SHIM_DMA, (4, 1, 1, 2000), (0, 0, 0, 1))  # repeat 4 times
    ok(SHIM_DMA, (4, 1, 1, 2000), (2000, 0, 0, 1))  # iterate 4 times


# --- strides ---
@pytest.mark.parametrize("spec, limit", [(CORE_DMA, 2**13), (MEM_DMA, 2**17), (SHIM_DMA, 2**20)])
def test_d0_stride(spec, limit):
    ok(spec, (2,), (limit,))
    bad(spec, (2,), (limit + 1,), rf"d0 stride {limit + 1} words", rf"\(1\.\.{limit}\)")


@pytest.mark.parametrize("spec, limit", [(CORE_DMA, 2**13), (MEM_DMA, 2**17), (SHIM_DMA, 2**20)])
def test_d1_stride(spec, limit):
    ok(spec, (2, 2), (limit, 1))
    bad(spec, (2, 2), (limit + 1, 1), rf"d1 stride {limit + 1} words", rf"\(1\.\.{limit}\)")


@pytest.mark.parametrize("spec, limit", [(CORE_DMA, 2**13), (MEM_DMA, 2**17), (SHIM_DMA, 2**20)])
def test_d2_stride(spec, limit):
    ok(spec, (2, 2, 2), (limit, 2, 1))
    bad(spec, (2, 2, 2), (limit + 1, 2, 1), rf"d2 stride {limit + 1} words", rf"\(1\.\.{limit}\)")


def test_mem_d3_stride():
    ok(MEM_DMA, (2, 2, 2, 2), (2**17, 4, 2, 1))
    bad(MEM_DMA, (2, 2, 2, 2), (2**17 + 1, 4, 2, 1), rf"d3 stride {2**17 + 1} words", rf"\(1\.\.{2**17}\)")


@pytest.mark.parametrize("spec", [CORE_DMA, MEM_DMA, SHIM_DMA])
def test_zero_stride_needs_size_one(spec):
    ok(spec, (3, 1, 4), (4, 0, 1))  # a stride-0 dimension of size 1 never steps
    bad(spec, (2, 4), (0, 1), r"d1 stride 0 words")


# --- length ---
def test_core_length():
    ok(CORE_DMA, (3, 43, 127), (5461, 127, 1))  # 16383 words
    bad(CORE_DMA, (4, 64, 64), (4096, 64, 1), r"length 16384 words", r"14-bit", r"max 16383\)")
    ok(CORE_DMA, (16383,), (1,))  # linear transfers are exempt from wraps, not from the length
    bad(CORE_DMA, (16384,), (1,), r"length 16384 words", r"max 16383\)")


def test_mem_length():
    ok(MEM_DMA, (2**17 - 1,), (1,))
    bad(MEM_DMA, (2**17,), (1,), rf"length {2**17} words", rf"max {2**17 - 1}\)")


# --- shim iteration and repeat ---
def test_shim_iteration_wrap():
    ok(SHIM_DMA, (64, 2, 2, 2), (8, 4, 2, 1))
    bad(SHIM_DMA, (65, 2, 2, 2), (8, 4, 2, 1), r"iteration wrap 65\b", r"max 64\)")


def test_shim_iteration_stride():
    ok(SHIM_DMA, (3, 2, 2, 2), (2**20, 4, 2, 1))
    bad(SHIM_DMA, (3, 2, 2, 2), (2**20 + 1, 4, 2, 1), rf"iteration stride {2**20 + 1} words",
        rf"max {2**20}\)")


def test_shim_repeat():
    ok(SHIM_DMA, (256, 2, 2, 2), (0, 4, 2, 1))
    ok(SHIM_DMA, (100, 2, 2, 2), (0, 4, 2, 1))  # a repeat is not bound by the 6-bit iteration wrap
    bad(SHIM_DMA, (257, 2, 2, 2), (0, 4, 2, 1), r"repeat 257\b", r"max 256\)")


def test_pattern_from_elements_end_to_end():
    # an A-like core S2MM pattern: [k/s, m/r, r*s] bf16 with m=64, k=64, r=4, s=8
    tap = Tap(0, (8, 16, 32), (32, 4 * 64, 1))
    w = tap.to_words(BF16)
    assert w == WordTap(0, (8, 16, 16), (16, 128, 1))
    w.check(CORE_DMA, WHERE, FIX)
    # the same shape with 4x the rows breaks nothing but the core length (16 KiW > 16383)
    big = Tap(0, (8, 64, 64), (64, 4 * 256, 1)).to_words(BF16)
    with pytest.raises(DmaLimitError, match="length 16384 words"):
        big.check(CORE_DMA, WHERE, FIX)
    # numpy agrees on the element walk
    np.testing.assert_array_equal(tap.indices(), np.array(naive_indices(0, (8, 16, 32), (32, 256, 1))))


@pytest.mark.parametrize("spec", [SHIM_DMA, MEM_DMA, CORE_DMA])
def test_strided_single_dimension_is_not_linear(spec):
    # mlir-aie's linear form needs unit stride; a strided walk programs d0's wrap field
    n = spec.max_wrap + 1
    bad(spec, (n,), (2,), rf"d0 wrap {n} words")
    ok(spec, (n - 1,), (2,))
