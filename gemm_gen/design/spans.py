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

from ..facts.devices import DmaSpec
from ..facts.dtypes import DType
from ..spec.call import CallPlan
from ..spec.rules import bd_form
from .tap import Tap


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


def simplified(tap: Tap) -> Tap:
    """The same walk with size-1 dimensions dropped and each dimension that continues the next inner one merged
    into it (spec/rules/bd_form.simplified)."""
    return Tap.of(bd_form.simplified(tap.walk))


def shim_walk(tap: Tap, unit: DType, spec: DmaSpec, where: str, fix: str) -> Tap:
    """A span's walk as one shim BD (spec/rules/bd_form.shim_walk), or DmaLimitError naming the limit the blocks' own
    walk with the span's dimension on top breaks."""
    return Tap.of(bd_form.shim_walk(tap.walk, unit, spec, where, fix))
