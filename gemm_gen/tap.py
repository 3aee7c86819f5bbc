"""Tensor access patterns: offset + (size, stride) dimensions, as DMAs walk a buffer.

A `Tap` is written in elements, outermost dimension first, like mlir-aie's taplib and
`dma_memcpy_nd`. DMAs address 32-bit words, so `Tap.to_words` turns it into the `WordTap` a
buffer descriptor holds; `WordTap.check` tests it against the DMA of the tile kind that runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

import numpy as np

from .dtypes import WORD_BYTES, DType
from .errors import DmaLimitError
from .hw.devices import DmaSpec, TileKind
from .rules import dma


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
        expect = 1
        for size, stride in zip(self.sizes[::-1], self.strides[::-1]):
            if size > 1 and stride != expect:
                return False
            expect *= size
        return self.offset == 0

    def scaled(self, parts: int) -> Tap:
        """The same walk over `parts` consecutive sub-elements per element (a 72-byte bfp16 tile is
        8 blocks of 9 bytes, or 18 words): unit-stride runs get longer, other walks gain an
        innermost dimension."""
        if parts == 1:
            return self
        if self.strides[-1] == 1 or self.sizes[-1] == 1:
            return Tap(self.offset * parts, self.sizes[:-1] + (self.sizes[-1] * parts,),
                       tuple(st * parts for st in self.strides[:-1]) + (1,))
        return Tap(self.offset * parts, self.sizes + (parts,), tuple(st * parts for st in self.strides) + (1,))

    def to_words(self, elem: DType) -> WordTap:
        """The same walk in 32-bit words (the pattern counts DMA units of `elem`): sub-word
        elements must move in whole words; a unit of several words (a bfp16 tile) moves whole."""
        b = elem.unit_bytes
        if b % WORD_BYTES == 0:
            t = self.scaled(b // WORD_BYTES)
            return WordTap(t.offset, t.sizes, t.strides)
        if b > WORD_BYTES:
            raise DmaLimitError(f"{elem} units of {b} bytes are not whole 32-bit words",
                                "use a type whose DMA unit is a multiple of 4 bytes")
        per = WORD_BYTES // b
        inner_size, inner_stride = self.sizes[-1], self.strides[-1]
        if inner_stride != 1 and inner_size > 1:
            raise DmaLimitError(
                f"innermost stride {inner_stride} on {elem} data splits 32-bit words",
                "DMAs move whole words; finish sub-word reordering in the kernel (e.g. transpose)",
            )
        if (inner_size * b) % WORD_BYTES or (self.offset * b) % WORD_BYTES:
            raise DmaLimitError(
                f"innermost run of {inner_size} x {elem} at offset {self.offset} is not whole "
                f"32-bit words",
                "make tile sizes and offsets multiples of 4 bytes",
            )
        strides = []
        for i, (size, stride) in enumerate(zip(self.sizes[:-1], self.strides[:-1])):
            if size > 1 and (stride * b) % WORD_BYTES:
                raise DmaLimitError(
                    f"stride {stride} x {elem} of dimension {len(self.sizes) - 1 - i} is not "
                    f"whole 32-bit words",
                    "make tile sizes and matrix widths multiples of 4 bytes",
                )
            strides.append(stride // per)
        return WordTap(self.offset // per, self.sizes[:-1] + (inner_size // per,), tuple(strides) + (1,))

    def to_json(self) -> dict[str, object]:
        return {"offset": self.offset, "sizes": list(self.sizes), "strides": list(self.strides)}

    def check_static_bd(self, spec: DmaSpec, buffer_elems: int, where: str, fix: str) -> None:
        """mlir-aie 1.4.3's verifier of memtile/core BDs: the tile kind's field widths applied to the
        dims in elements of the buffer's type (hw/devices.py TILE_EXTENT_SEARCH_MAX says where), which
        for elements narrower than a word is stricter than the fields (they count words)."""
        stride_max = dma.static_stride_max(spec, buffer_elems)
        for d, (size, stride) in enumerate(zip(self.sizes[::-1], self.strides[::-1])):
            if not dma.static_size_ok(spec, size):
                raise DmaLimitError(
                    f"{where}: d{d} size {size} elements exceeds mlir-aie's BD verifier limit for a "
                    f"{spec.kind.value} BD (max {spec.max_wrap})",
                    fix,
                )
            if stride > stride_max:
                raise DmaLimitError(
                    f"{where}: d{d} stride {stride} elements exceeds mlir-aie's BD verifier limit for a "
                    f"{spec.kind.value} BD (max {stride_max})",
                    fix,
                )


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
        """Raise DmaLimitError naming the dimension, the value and the limit that it breaks."""
        dims = self.dims()
        iteration: tuple[int, int] | None = None
        if spec.kind == TileKind.SHIM and len(dims) == spec.dims + 1:
            iteration = dims.pop()  # the shim's 4th dimension is its iteration/repeat
        if len(dims) > spec.dims:
            raise DmaLimitError(
                f"{where}: {len(dims)} address dimensions, a {spec.kind.value} DMA has "
                f"{spec.dims}{' + 1 iteration' if spec.kind == TileKind.SHIM else ''}",
                fix,
            )
        # a linear walk (unit stride, every other dimension of size 1) programs no wraps
        linear = dims[0][1] == 1 and all(size == 1 for size, _ in dims[1:])
        for d, (size, stride) in enumerate(dims):
            if d < spec.wrapped_dims and not linear and not dma.wrap_ok(spec, size):
                raise DmaLimitError(
                    f"{where}: d{d} wrap {size} words exceeds the {spec.wrap_bits}-bit field of a "
                    f"{spec.kind.value} BD (max {spec.max_wrap})",
                    fix,
                )
            if size > 1 and not 1 <= stride <= spec.max_stride:
                raise DmaLimitError(
                    f"{where}: d{d} stride {stride} words exceeds the {spec.step_bits}-bit field of "
                    f"a {spec.kind.value} BD (1..{spec.max_stride})",
                    fix,
                )
        length = reduce(lambda x, y: x * y, (s for s, _ in dims), 1)
        if length > spec.max_length:
            raise DmaLimitError(
                f"{where}: length {length} words exceeds the {spec.length_bits}-bit field of a "
                f"{spec.kind.value} BD (max {spec.max_length})",
                fix,
            )
        if iteration is not None:
            size, stride = iteration
            if stride == 0:
                if size > spec.max_repeat:
                    raise DmaLimitError(
                        f"{where}: repeat {size} exceeds the {spec.kind.value} repeat count "
                        f"(max {spec.max_repeat})",
                        fix,
                    )
            else:
                if size > spec.iteration_wrap_max:
                    raise DmaLimitError(
                        f"{where}: iteration wrap {size} exceeds the 6-bit field (max "
                        f"{spec.iteration_wrap_max})",
                        fix,
                    )
                if stride > spec.max_iteration_stride:
                    raise DmaLimitError(
                        f"{where}: iteration stride {stride} words exceeds the "
                        f"{spec.iteration_step_bits}-bit field (max {spec.max_iteration_stride})",
                        fix,
                    )
