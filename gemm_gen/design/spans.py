"""Spanning shim tasks: one task per channel for several consecutive output blocks of a row band.

The runtime sequence issues a task per channel per output block (design/build.py), and the command
processor spends `bd_task_us` setting each up (docs/model.md). The blocks of one row band along N
walk the same pattern on every channel at offsets in arithmetic progression (patterns.shim_a/b/c
depend on the block only through the offset): A the same strip (step 0), B and C the next block's
columns. Their concatenation is then that walk with one more, outermost, dimension: one BD when it
fits the shim's 3 dimensions plus its iteration dimension (a step of 0 is the task's repeat). Each
channel delivers exactly the per-block sequence's data, in order, so the memtiles and cores do not
change.
"""

from __future__ import annotations

from ..call import CallPlan
from ..dtypes import WORD_BYTES, DType
from ..errors import DmaLimitError
from ..hw.devices import DmaSpec
from ..tap import Tap


def regular_blocks(call: CallPlan) -> int:
    """How many leading blocks of a row band sit at n_origin(j) = j * block_n: all of them, or all
    but a last block moved back to end at N (its offset breaks the progression)."""
    last = call.n_blocks - 1
    return call.n_blocks if call.n_origin(last) == last * call.block_n else last


def row_spans(call: CallPlan, span: int) -> tuple[tuple[int, ...], ...]:
    """The N blocks of one row band in spans of at most `span` (>= 1) consecutive blocks; a moved
    last block is a span of its own."""
    regular = regular_blocks(call)
    spans = [tuple(range(j, min(j + span, regular))) for j in range(0, regular, span)]
    return tuple(spans + [(j,) for j in range(regular, call.n_blocks)])


def block_spans(call: CallPlan, span: int) -> tuple[tuple[int, ...], ...]:
    """Every span of a call in sequence order (row band by row band), as output block (task group)
    indices m_block * n_blocks + n_block."""
    return tuple(tuple(mb * call.n_blocks + j for j in s) for mb in range(call.m_blocks) for s in row_spans(call, span))


def simplified(tap: Tap) -> Tap:
    """The same walk with size-1 dimensions dropped and each dimension that continues the next inner
    one (stride = inner size x inner stride) merged into it."""
    dims = [(size, stride) for size, stride in zip(tap.sizes, tap.strides) if size > 1] or [(1, 1)]
    out = [dims[-1]]
    for size, stride in reversed(dims[:-1]):
        inner_size, inner_stride = out[0]
        if stride == inner_size * inner_stride:
            out[0] = (size * inner_size, inner_stride)
        else:
            out.insert(0, (size, stride))
    return Tap(tap.offset, tuple(s for s, _ in out), tuple(st for _, st in out))


def concat(taps: list[Tap]) -> Tap | None:
    """One walk for the taps in turn, or None: they must share sizes and strides, their offsets
    an arithmetic progression (step 0: the same walk repeated)."""
    first = taps[0]
    if len(taps) == 1:
        return first
    step = taps[1].offset - first.offset
    if step < 0 or any((t.sizes, t.strides) != (first.sizes, first.strides) or t.offset != first.offset + i * step
                       for i, t in enumerate(taps)):
        return None
    return Tap(first.offset, (len(taps), *first.sizes), (step, *first.strides))


def _splits(tap: Tap, unit: DType, spec: DmaSpec) -> list[Tap]:
    """The walk with one dimension split in two (size = outer x inner), the inner one within the wrap
    field (the innermost counts words: whole words of `unit`), the largest few inners first. A repeat
    (step 0) is never split: it has one place, the iteration dimension."""
    out = []
    last = len(tap.sizes) - 1
    for i, (size, stride) in enumerate(zip(tap.sizes, tap.strides)):
        limit = spec.max_wrap * WORD_BYTES // unit.unit_bytes if i == last else spec.max_wrap
        if size <= limit or stride == 0:
            continue
        inners = [d for d in range(min(limit, size - 1), 1, -1)
                  if size % d == 0 and (i != last or d * unit.unit_bytes % WORD_BYTES == 0)][:4]
        out += [Tap(tap.offset, (*tap.sizes[:i], size // d, d, *tap.sizes[i + 1:]),
                    (*tap.strides[:i], stride * d, stride, *tap.strides[i + 1:])) for d in inners]
    return out


def _placed(tap: Tap, dims: int) -> Tap:
    """A repeat (outermost step 0) as the shim BD's iteration dimension: unit dimensions between it
    and the address dimensions."""
    if len(tap.sizes) < 2 or tap.strides[0] != 0 or len(tap.sizes) > dims:
        return tap
    pad = dims + 1 - len(tap.sizes)
    return Tap(tap.offset, (tap.sizes[0], *(1,) * pad, *tap.sizes[1:]), (0, *(0,) * pad, *tap.strides[1:]))


def _fits(tap: Tap, unit: DType, spec: DmaSpec) -> bool:
    try:
        tap.to_words(unit).check(spec, "", "")
    except DmaLimitError:
        return False
    return True


def shim_walk(tap: Tap, unit: DType, spec: DmaSpec, where: str, fix: str) -> Tap:
    """A span's walk as one shim BD: simplified, its repeat placed on the iteration dimension, a
    dimension split where a wrap or stride field needs it (up to two splits); DmaLimitError when no
    form fits, naming the limit the blocks' own walk with the span's dimension on top breaks."""
    base = simplified(tap)
    if base.strides[0] == 0 and len(base.sizes) == 1:  # a repeat of nothing but one element
        base = Tap(base.offset, (base.sizes[0], 1), (0, 1))
    dims = [(size, stride) for size, stride in zip(tap.sizes, tap.strides) if size > 1] or [(1, 1)]
    given = Tap(tap.offset, tuple(s for s, _ in dims), tuple(st for _, st in dims))
    layer = [base, given]
    for _ in range(3):
        for cand in layer:
            placed = _placed(cand, spec.dims)
            if _fits(placed, unit, spec):
                return placed
        layer = [s for cand in layer for s in _splits(cand, unit, spec)][:64]
    _placed(given, spec.dims).to_words(unit).check(spec, where, fix)  # raises, naming the limit
    raise DmaLimitError(f"{where}: no form of {given} fits one shim BD", fix)  # pragma: no cover - check raised
