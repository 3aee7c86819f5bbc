"""Element types: size, host (NumPy/ml_dtypes) type, range. One place for each type's facts."""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from .errors import ConfigError

WORD_BYTES = 4  # DMAs address 32-bit words on every AIE2/AIE2P tile


@dataclass(frozen=True)
class DType:
    """A matrix element type as mlir-aie names it (bf16, i8, ...).

    Sizes are kept per block so that block formats (bfp16ebs8: 8 values in 9 bytes)
    fit the same description; scalar types are blocks of one element.
    """

    name: str
    block_elems: int
    block_bytes: int
    is_float: bool
    host: np.dtype  # type of a host array holding decoded values

    @property
    def bytes(self) -> int:
        """Bytes per element (scalar types only)."""
        if self.block_elems != 1:
            raise ValueError(f"{self.name} is a block type; use nbytes()")
        return self.block_bytes

    @property
    def bits(self) -> int:
        return 8 * self.bytes

    def nbytes(self, count: int) -> int:
        """Bytes taken by `count` elements (a whole number of blocks)."""
        if count % self.block_elems:
            raise ValueError(f"{count} {self.name} elements cut a {self.block_elems}-element block")
        return count // self.block_elems * self.block_bytes

    @property
    def per_word(self) -> int:
        """Elements per 32-bit word (scalar types of at most 4 bytes)."""
        return WORD_BYTES // self.bytes

    @property
    def min(self) -> int:
        return int(np.iinfo(self.host).min)

    @property
    def max(self) -> int:
        return int(np.iinfo(self.host).max)

    def __str__(self) -> str:
        return self.name


BF16 = DType("bf16", 1, 2, True, np.dtype(ml_dtypes.bfloat16))
F32 = DType("f32", 1, 4, True, np.dtype(np.float32))
I8 = DType("i8", 1, 1, False, np.dtype(np.int8))
I16 = DType("i16", 1, 2, False, np.dtype(np.int16))
I32 = DType("i32", 1, 4, False, np.dtype(np.int32))

DTYPES: dict[str, DType] = {t.name: t for t in (BF16, F32, I8, I16, I32)}


def dtype(name: str | DType) -> DType:
    """Look a type up by its mlir-aie name."""
    if isinstance(name, DType):
        return name
    try:
        return DTYPES[name]
    except KeyError:
        raise ConfigError(
            f"unknown data type {name!r}", f"use one of {', '.join(sorted(DTYPES))}"
        ) from None
