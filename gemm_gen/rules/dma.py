"""The BD bounds: how far one dimension of a buffer descriptor can count, per tile kind.

The limits are hw.devices' DMA field widths (DmaSpec). mlir-aie 1.4.3's verifier applies a static
(memtile or core) BD's fields to its dims in elements of the buffer's type (tap.Tap.check_static_bd);
a shim BD counts its wraps in 32-bit words (tap.WordTap.check). The design's checks call
`static_size_ok`, `static_stride_max` and `wrap_ok`; the tuner bounds its tile extents with
`static_extent_max` and `shim_extent_max`, which are the same limits solved for the extent.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import WORD_BYTES, dtype
from ..hw.devices import DmaSpec
from . import Ints


def wrap_ok(spec: DmaSpec, size: Ints) -> Ints:
    """Whether a wrapped dimension of `size` counts (words on a shim, elements on static BDs) fits
    the tile kind's wrap field."""
    return np.asarray(size) <= spec.max_wrap if isinstance(size, np.ndarray) else size <= spec.max_wrap


def static_size_ok(spec: DmaSpec, size: Ints) -> Ints:
    """mlir-aie's verifier of a memtile or core BD: a dim's size in elements within the wrap field."""
    return wrap_ok(spec, size)


def static_stride_max(spec: DmaSpec, buffer_elems: int) -> int:
    """mlir-aie's verifier of a memtile or core BD: the largest stride in elements, within the step
    field and within the buffer."""
    return min(spec.max_stride, buffer_elems)


def static_extent_max(spec: DmaSpec, unit: int) -> int:
    """The largest extent (in elements) a static BD dim can walk in steps of `unit` elements (e.g.
    an A tile's m rows in r-row blocks): the largest size `static_size_ok` accepts, times unit."""
    return spec.max_wrap * unit


def run_bytes(dtype_name: str) -> float:
    """DRAM bytes per column of one contiguous run of an operand: its element size, or for bfp16
    a tile's column of 8 rows (tiles are stored whole, 72 bytes for 8 columns)."""
    t = dtype(dtype_name)
    return t.unit_bytes / t.tile_cols


def shim_extent_max(spec: DmaSpec, dtype_name: str) -> int:
    """The most columns of an operand one shim wrap (counted in words) can cover: the largest
    extent `wrap_ok` accepts once converted to words."""
    return int(spec.max_wrap * WORD_BYTES // run_bytes(dtype_name))
