"""One walk as one shim BD: the forms a walk may take (simplified, a repeat on the iteration dimension, a dimension
split where a field needs it), the first that fits its BD's fields.

The runtime sequence's spanned tasks (design/spans.py) and the split decode placement's B streams and joined C
(spec/rules/walks.py, spec/rules/decode_split.py) are walks the shim programs as one BD each: design/ asks this of the
one
design it builds, spec/rules/walks.py of every candidate the tuner weighs. A walk here is one design's (ints).
"""

from __future__ import annotations

from functools import cache, lru_cache
from math import isqrt

from ...facts.devices import DmaSpec
from ...facts.dtypes import WORD_BYTES, DType
from ...facts.errors import DmaLimitError
from .dma import Limit, Walk, bd_limits, keeps, raise_first, to_words


def simplified(walk: Walk) -> Walk:
    """The same walk with size-1 dimensions dropped and each dimension that continues the next inner
    one (stride = inner size x inner stride) merged into it."""
    dims = [(size, stride) for size, stride in zip(walk.sizes, walk.strides) if size > 1] or [(1, 1)]
    out = [dims[-1]]
    for size, stride in reversed(dims[:-1]):
        inner_size, inner_stride = out[0]
        if stride == inner_size * inner_stride:
            out[0] = (size * inner_size, inner_stride)
        else:
            out.insert(0, (size, stride))
    return Walk(walk.offset, tuple(s for s, _ in out), tuple(st for _, st in out))


@cache
def _divisors(size: int, most: int) -> tuple[int, ...]:
    """The divisors of `size` from `most` down to 2, largest first (found up to its square root: the tuner asks
    this of every distinct walk of every candidate, and a scan down from the wrap field's 1023 cost a third of
    the split placement's search, issue 33 item 4)."""
    low = [d for d in range(1, isqrt(size) + 1) if size % d == 0]
    return tuple(sorted({x for d in low for x in (d, size // d) if 2 <= x <= most}, reverse=True))


def _splits(walk: Walk, unit: DType, spec: DmaSpec) -> list[Walk]:
    """The walk with one dimension split in two (size = outer x inner), the inner one within the wrap
    field (the innermost counts words: whole words of `unit`), the largest few inners first. A repeat
    (step 0) is never split: it has one place, the iteration dimension."""
    out = []
    last = len(walk.sizes) - 1
    unit_bytes = unit.unit_bytes
    for i, (size, stride) in enumerate(zip(walk.sizes, walk.strides)):
        limit = spec.max_wrap * WORD_BYTES // unit_bytes if i == last else spec.max_wrap
        if size <= limit or stride == 0:
            continue
        inners = [d for d in _divisors(size, min(limit, size - 1))
                  if i != last or d * unit_bytes % WORD_BYTES == 0][:4]
        out += [Walk(walk.offset, (*walk.sizes[:i], size // d, d, *walk.sizes[i + 1:]),
                     (*walk.strides[:i], stride * d, stride, *walk.strides[i + 1:])) for d in inners]
    return out


def _placed(walk: Walk, dims: int) -> Walk:
    """A repeat (outermost step 0) as the shim BD's iteration dimension: unit dimensions between it
    and the address dimensions."""
    if len(walk.sizes) < 2 or walk.strides[0] != 0 or len(walk.sizes) > dims:
        return walk
    pad = dims + 1 - len(walk.sizes)
    return Walk(walk.offset, (walk.sizes[0], *(1,) * pad, *walk.sizes[1:]), (0, *(0,) * pad, *walk.strides[1:]))


def _limits(walk: Walk, unit: DType, spec: DmaSpec, where: str) -> list[Limit]:
    """The walk in words against the BD's fields (spec/rules/dma.to_words, bd_limits)."""
    words, conversion = to_words(walk, unit)
    return conversion + bd_limits(spec, words, where)


@lru_cache(maxsize=1 << 16)
def _fits(sizes: tuple[int, ...], strides: tuple[int, ...], offset_in_word: int, unit: DType, spec: DmaSpec) -> bool:
    """Whether a walk keeps every limit of its BD (`_limits`). Those read the offset only for whether the walk
    starts on a whole word (offset x unit bytes, the same modulo a word) and `where` only for their messages, so
    the tuner's candidates whose walks differ only there are asked once (the split placement's search asked a
    quarter of a million times for under twenty thousand distinct walks, issue 33 item 4)."""
    return bool(keeps(_limits(Walk(offset_in_word, sizes, strides), unit, spec, "")))


def _given(walk: Walk) -> Walk:
    """The walk as given, its size-1 dimensions dropped."""
    dims = [(size, stride) for size, stride in zip(walk.sizes, walk.strides) if size > 1] or [(1, 1)]
    return Walk(walk.offset, tuple(s for s, _ in dims), tuple(st for _, st in dims))


@lru_cache(maxsize=1 << 16)
def _form(sizes: tuple[int, ...], strides: tuple[int, ...], offset_in_word: int, unit: DType,
          spec: DmaSpec) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The sizes and strides of the first form of a walk that fits one shim BD, or None. Every form keeps the walk's
    offset, which `_fits` reads only modulo a word: the same for every walk of these sizes and strides."""
    walk = Walk(offset_in_word, sizes, strides)
    base = simplified(walk)
    if base.strides[0] == 0 and len(base.sizes) == 1:  # a repeat of nothing but one element
        base = Walk(base.offset, (base.sizes[0], 1), (0, 1))
    layer = [base, _given(walk)]
    for _ in range(3):
        for cand in layer:
            placed = _placed(cand, spec.dims)
            if _fits(placed.sizes, placed.strides, offset_in_word, unit, spec):
                return placed.sizes, placed.strides
        layer = [s for cand in layer for s in _splits(cand, unit, spec)][:64]
    return None


def shim_walk(walk: Walk, unit: DType, spec: DmaSpec, where: str, fix: str) -> Walk:
    """A walk as one shim BD: simplified, its repeat placed on the iteration dimension, a dimension split where a
    wrap or stride field needs it (up to two splits); DmaLimitError when no form fits, naming the limit the
    walk as given (its size-1 dimensions dropped) breaks."""
    form = _form(tuple(map(int, walk.sizes)), tuple(map(int, walk.strides)), int(walk.offset) % WORD_BYTES, unit, spec)
    if form is not None:
        return Walk(walk.offset, *form)
    given = _given(walk)
    raise_first(_limits(_placed(given, spec.dims), unit, spec, where), fix)  # raises, naming the limit
    raise DmaLimitError(f"{where}: no form of {given.sizes} / {given.strides} fits one shim BD",
                        fix)  # pragma: no cover - raise_first raised
