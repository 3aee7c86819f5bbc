"""Element types: size, host (NumPy/ml_dtypes) type, range. One place for each type's facts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import overload

import ml_dtypes
import numpy as np

from .errors import ConfigError

WORD_BYTES = 4  # DMAs address 32-bit words on every AIE2/AIE2P tile


@dataclass(frozen=True)
class DType:
    """A matrix element type as mlir-aie names it (bf16, i8, bfp16, ...).

    Sizes are kept per block so that block formats (bfp16ebs8: 8 values in 9 bytes) fit the same
    description; scalar types are blocks of one element. A DMA moves whole *units*: one element of
    a scalar type, one tile_rows x tile_cols tile of a block type (bfp16: an 8 x 8 tile of eight
    9-byte row blocks, 72 bytes = 18 words, since a 9-byte block cannot be addressed in 32-bit
    words). A Design's shapes and access patterns count units.
    """

    name: str
    block_elems: int
    block_bytes: int
    is_float: bool
    host: np.dtype  # type of a host array holding decoded values
    tile_rows: int = 1  # unit = tile_rows x tile_cols values (1 x 1 for scalar types)
    tile_cols: int = 1

    @property
    def is_block(self) -> bool:
        """A block float format (bfp16: a shared exponent per block), quantized on the host."""
        return self.block_elems > 1 and self.is_float

    @property
    def is_packed(self) -> bool:
        """A sub-byte integer packed several to a byte (i4: two, the low nibble first); its DMA unit
        is one 32-bit word of values along a row (pack_i4)."""
        return self.block_elems > 1 and not self.is_float

    @property
    def host_encoded(self) -> bool:
        """The host re-encodes this operand (quantizes bfp16, packs int4) into a buffer of its own, so
        the DRAM buffer is always the host's padded copy, never the user's array read in place."""
        return self.is_block or self.is_packed

    @property
    def value_bits(self) -> int:
        """Bits of one value as it is stored (i4: 4; bfp16: its 8-bit mantissa plus 1 of 8 exponent bits)."""
        return 8 * self.block_bytes // self.block_elems

    @property
    def unit_elems(self) -> int:
        return self.tile_rows * self.tile_cols

    @property
    def unit_bytes(self) -> int:
        """Bytes of one DMA unit (an element, or a tile of blocks)."""
        return self.nbytes(self.unit_elems)

    def unit_nbytes(self, units: int) -> int:
        return units * self.unit_bytes

    @property
    def blocks_per_unit(self) -> int:
        """Elements of mlir-aie's element type per DMA unit (bfp16: 8 v8bfp16ebs8 blocks; else 1)."""
        return self.unit_elems // self.block_elems

    @property
    def elem_bytes(self) -> float:
        """Average bytes per value (bfp16: 1.125), for budgets and the model."""
        return self.block_bytes / self.block_elems

    @property
    def bytes(self) -> int:
        """Bytes per element (scalar types only)."""
        if self.block_elems != 1:
            raise ValueError(f"{self.name} is a block type; use nbytes()")
        return self.block_bytes

    @property
    def bits(self) -> int:
        return 8 * self.bytes

    @overload
    def nbytes(self, count: int) -> int: ...

    @overload
    def nbytes(self, count: np.ndarray) -> np.ndarray: ...

    def nbytes(self, count: int | np.ndarray) -> int | np.ndarray:
        """Bytes taken by `count` elements (a whole number of blocks); an array of counts (the
        tuner's candidates, gemm_gen/spec/rules) gives one size per count."""
        cut = np.any(count % self.block_elems) if isinstance(count, np.ndarray) else count % self.block_elems
        if cut:
            raise ValueError(f"{count} {self.name} elements cut a {self.block_elems}-element block")
        return count // self.block_elems * self.block_bytes

    @property
    def per_word(self) -> int:
        """Elements per 32-bit word (scalar types of at most 4 bytes)."""
        return WORD_BYTES // self.bytes

    @property
    def min(self) -> int:
        return -(1 << (self.value_bits - 1)) if self.is_packed else int(np.iinfo(self.host).min)

    @property
    def max(self) -> int:
        return (1 << (self.value_bits - 1)) - 1 if self.is_packed else int(np.iinfo(self.host).max)

    def __str__(self) -> str:
        return self.name


BF16 = DType("bf16", 1, 2, True, np.dtype(ml_dtypes.bfloat16))
F32 = DType("f32", 1, 4, True, np.dtype(np.float32))
I8 = DType("i8", 1, 1, False, np.dtype(np.int8))
I16 = DType("i16", 1, 2, False, np.dtype(np.int16))
I32 = DType("i32", 1, 4, False, np.dtype(np.int32))
# an accumulator type only (C's L1 type between kernel calls for acc64 shapes): kept in L1 as pairs
# of int32 lanes (aie::vector_cast<int32> of an accum<acc64>), never an operand or an output
I64 = DType("i64", 1, 8, False, np.dtype(np.int64))
# bfp16ebs8 (gemm_gen/facts/bfp16.py): blocks of 8 values along a row of its tile; decoded to fp32
BFP16 = DType("bfp16", 8, 9, True, np.dtype(np.float32), tile_rows=8, tile_cols=8)
# int4 (B only, issue 22): two values per byte, the even element in the low nibble (mlir-air's int4
# host packing and CPU reference, docs/int4_decode.md); held on the host as int8 in [-8, 7]. A BD moves
# 32-bit words, so its DMA unit is 8 values along a row of B (4 bytes): every walk counts words.
I4 = DType("i4", 2, 1, False, np.dtype(np.int8), tile_rows=1, tile_cols=8)

DTYPES: dict[str, DType] = {t.name: t for t in (BF16, F32, I8, I16, I32, I64, BFP16, I4)}


def widen(x: np.ndarray) -> np.ndarray:
    """x as float64, exactly: bf16 through float32 (ml_dtypes' own bf16 -> float64 cast is several times slower)."""
    x = np.asarray(x)
    if x.dtype == BF16.host:
        x = x.astype(np.float32)
    return x.astype(np.float64)


def pack_i4(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """int4 values (any integer array, `axis` of even length) packed two per byte along `axis`:
    element 2i in the low nibble, 2i + 1 in the high one. ValueError outside [-8, 7]."""
    if axis not in (-1, np.ndim(values) - 1):
        return np.moveaxis(pack_i4(np.moveaxis(np.asarray(values), axis, -1)), -1, axis)
    v = np.asarray(values)
    if v.shape[-1] % I4.block_elems:
        raise ValueError(f"{v.shape[-1]} int4 values along a row cut a byte: use an even count")
    if v.size and (int(v.min()) < I4.min or int(v.max()) > I4.max):
        raise ValueError(f"int4 values must lie in [{I4.min}, {I4.max}], found [{int(v.min())}, {int(v.max())}]")
    u = v.astype(np.int64) & 0xF
    return (u[..., 0::2] | (u[..., 1::2] << 4)).astype(np.uint8)


def unpack_i4(packed: np.ndarray, axis: int = -1) -> np.ndarray:
    """The int8 values of bytes packed by pack_i4 along `axis` (which doubles), sign-extended."""
    if axis not in (-1, np.ndim(packed) - 1):
        return np.moveaxis(unpack_i4(np.moveaxis(np.asarray(packed), axis, -1)), -1, axis)
    b = np.asarray(packed).astype(np.uint8)
    nibbles = np.stack([b & 0xF, b >> 4], axis=-1).reshape(*b.shape[:-1], -1).astype(np.int8)
    return np.where(nibbles > I4.max, nibbles - 16, nibbles).astype(np.int8)


def dtype(name: str | DType) -> DType:
    """Look a type up by its mlir-aie name."""
    if isinstance(name, DType):
        return name
    try:
        return DTYPES[name]
    except KeyError:
        raise ConfigError(
            f"unknown data type {name!r}", f"use one of {', '.join(sorted(n for n in DTYPES if n != I64.name))}"
        ) from None
