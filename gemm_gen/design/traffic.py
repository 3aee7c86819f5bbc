"""What a runtime sequence moves over the shims, counted once when the Design is built: bytes and contiguous
DRAM runs per host tensor, and its task groups (design/build.py stores them in the Design; the model prices
them, model/traffic.py)."""

from __future__ import annotations

from collections.abc import Iterable

from ..facts.dtypes import dtype
from .ir import HostTensor, ShimTask, TensorCount
from .tap import Tap

TENSORS = ("A", "B", "C")


def contiguous_run(tap: Tap) -> int:
    """Elements the pattern reads back to back before it jumps (innermost dims merged)."""
    dims = [(size, stride) for size, stride in zip(tap.sizes, tap.strides) if size > 1][::-1]
    if not dims:
        return 1
    size, stride = dims[0]
    if stride != 1:
        return 1
    run = size
    for size, stride in dims[1:]:
        if stride != run:
            break
        run *= size
    return run


def _side_by_side(taps: list[Tap]) -> int:
    """How many of a group's taps on one tensor continue each other's runs (1 if they do not)."""
    first = taps[0]
    run = contiguous_run(first)
    if len(taps) < 2 or any((t.sizes, t.strides) != (first.sizes, first.strides) for t in taps):
        return 1
    offsets = sorted(t.offset for t in taps)
    if all(b - a == run for a, b in zip(offsets, offsets[1:])):
        return len(taps)
    return 1


def count_traffic(tasks: Iterable[ShimTask], tensors: tuple[HostTensor, ...]) -> tuple[TensorCount, ...]:
    """Bytes and runs per tensor (A, B, C), summed over a runtime sequence's shim tasks."""
    unit = {t.name: dtype(t.dtype).unit_bytes for t in tensors}  # taps count DMA units
    acc: dict[str, list[float]] = {name: [0.0, 0.0, 0.0] for name in TENSORS}
    by_group: dict[tuple[int, str], list[Tap]] = {}
    for task in tasks:
        count = task.tap.count
        acc[task.tensor][0] += count * unit[task.tensor]
        acc[task.tensor][1] += count // contiguous_run(task.tap)
        by_group.setdefault((task.group, task.tensor), []).append(task.tap)
    for (_, tensor), taps in by_group.items():
        side = _side_by_side(taps)
        acc[tensor][2] += sum(t.count // contiguous_run(t) for t in taps) / side
    return tuple(TensorCount(name, b, r, mr) for name, (b, r, mr) in acc.items())


def task_groups(tasks: tuple[ShimTask, ...]) -> int:
    """The task groups of a runtime sequence: one per output block, or per span."""
    return len({t.group for t in tasks})


def tasks_per_group(tasks: tuple[ShimTask, ...]) -> int:
    """Shim tasks the command processor configures per task group (the first group's: an output block's, or a
    span's)."""
    return sum(1 for t in tasks if t.group == 0)
