"""Tensor access patterns: offset + (size, stride) dimensions, as DMAs walk a buffer.

A `Tap` is written in elements, outermost dimension first, like mlir-aie's taplib and
`dma_memcpy_nd`. DMAs address 32-bit words, so `Tap.to_words` turns it into the `WordTap` a
buffer descriptor holds; `WordTap.check` tests it against the DMA of the tile kind that runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

import numpy as np

from ..facts.devices import DmaSpec
from ..facts.dtypes import WORD_BYTES, DType
from ..spec.rules import dma


def _indices(offset: int, sizes: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    idx = np.array([offset], dtype=np.int64)
    for size, stride in zip(sizes, strides):
        idx = (idx[:, None] + np.arange(size, dtype=np.int64) * stride).ravel()
    return idx


@dataclass(frozen=True)
class Tap:
    """offset, sizes, strides in elements; sizes[0] is the outermost dimension."""

    offset: int
    sizes: tuple[int, ...]
    strides: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.sizes) != len(self.strides) or not self.sizes:
            raise ValueError(f"sizes {self.sizes} and strides {self.strides} must pair up")
        if min(self.sizes) < 1 or min(self.strides) < 0 or self.offset < 0:
            raise ValueError(f"bad pattern {self}")

    @classmethod
    def linear(cls, length: int, offset: int = 0) -> Tap:
        return cls(offset, (length,), (1,))

    @property
    def count(self) -> int:
        return reduce(lambda x, y: x * y, self.sizes, 1)

    def indices(self) -> np.ndarray:
        """Element indices in transfer order."""
        return _indices(self.offset, self.sizes, self.strides)

    def max_index(self) -> int:
        return self.offset + sum((s - 1) * st for s, st in zip(self.sizes, self.strides))

    def is_linear(self) -> bool:
        """Whether the walk is just elements 0, 1, 2, ... (the DMA then needs no dims at all)."""
        return bool(dma.is_linear(self.walk))

    @classmethod
    def of(cls, walk: dma.Walk) -> Tap:
        """One design's walk (ints, or NumPy scalars) as a Tap."""
        return cls(int(walk.offset), tuple(int(s) for s in walk.sizes), tuple(int(s) for s in walk.strides))

    @property
    def walk(self) -> dma.Walk:
        """The walk as the rules (spec/rules/dma.py) read it."""
        return dma.Walk(self.offset, self.sizes, self.strides)

    def scaled(self, parts: int) -> Tap:
        """The same walk over `parts` consecutive sub-elements per element (a 72-byte bfp16 tile is
        8 blocks of 9 bytes, or 18 words): unit-stride runs get longer, other walks gain an
        innermost dimension (spec/rules/dma.scaled, whose unit outer dimension is dropped where a run grows)."""
        if parts == 1:
            return self
        walk, grows = dma.scaled(self.walk, parts)
        cut = 1 if grows else 0
        return Tap(walk.offset, tuple(walk.sizes[cut:]), tuple(walk.strides[cut:]))

    def to_words(self, elem: DType) -> WordTap:
        """The same walk in 32-bit words (the pattern counts DMA units of `elem`): sub-word
        elements must move in whole words; a unit of several words (a bfp16 tile) moves whole
        (spec/rules/dma.to_words, DmaLimitError for the first limit it breaks)."""
        b = elem.unit_bytes
        if b % WORD_BYTES == 0:
            t = self.scaled(b // WORD_BYTES)
            return WordTap(t.offset, t.sizes, t.strides)
        words, limits = dma.to_words(self.walk, elem)
        dma.raise_first(limits)
        return WordTap(words.offset, words.sizes, words.strides)

    def to_json(self) -> dict[str, object]:
        return {"offset": self.offset, "sizes": list(self.sizes), "strides": list(self.strides)}

    def check_static_bd(self, spec: DmaSpec, buffer_elems: int, where: str, fix: str) -> None:
        """mlir-aie 1.4.3's verifier of memtile/core BDs: the tile kind's field widths applied to the
        dims in elements of the buffer's type (spec/rules/dma.static_limits)."""
        dma.raise_first(dma.static_limits(spec, self.walk, buffer_elems, where), fix)


@dataclass(frozen=True)
class WordTap:
    """A pattern in 32-bit words: what a buffer descriptor holds."""

    offset: int
    sizes: tuple[int, ...]
    strides: tuple[int, ...]

    @property
    def count(self) -> int:
        return reduce(lambda x, y: x * y, self.sizes, 1)

    def indices(self) -> np.ndarray:
        return _indices(self.offset, self.sizes, self.strides)

    def dims(self) -> list[tuple[int, int]]:
        """(size, stride) innermost first, leading size-1 dimensions dropped."""
        dims = list(zip(self.sizes, self.strides))
        while len(dims) > 1 and dims[0][0] == 1:
            dims.pop(0)
        return dims[::-1]

    def check(self, spec: DmaSpec, where: str, fix: str) -> None:
        """Raise DmaLimitError naming the dimension, the value and the limit that it breaks
        (spec/rules/dma.bd_limits)."""
        dma.raise_first(dma.bd_limits(spec, dma.Walk(self.offset, self.sizes, self.strides), where), fix)
