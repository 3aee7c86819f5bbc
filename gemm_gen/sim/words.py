"""The simulator's 32-bit DMA word, carried with its provenance.

Every simulated memory holds uint64 cells: bits 0-31 are the data word the hardware moves,
bits 32-61 the index of the word in its source tensor, bits 62-63 the tensor (A, B, C or none).
DMAs copy whole cells, so data and provenance travel together at word granularity; kernels read
the data bits, and checks read the provenance to say exactly what arrived where.
"""

from __future__ import annotations

import numpy as np

from ..facts.dtypes import DType

VALUE_MASK = np.uint64(0xFFFFFFFF)
ID_SHIFT = np.uint64(32)
ID_BITS = 30
ID_MASK = np.uint64((1 << ID_BITS) - 1)
TAG_SHIFT = np.uint64(62)
MAX_WORDS = 1 << ID_BITS

TAG_NONE, TAG_A, TAG_B, TAG_C = 0, 1, 2, 3
# a word a Buffer's initial value put there when the array was configured (aie.buffer initial_value): its
# provenance, in the id field of an untagged cell (a runtime-parameter word is the machine's RTP_WRITTEN, bit 32)
INITIAL_VALUE = np.uint64(1) << np.uint64(33)
TAG_NAMES = {TAG_NONE: "unwritten", TAG_A: "A", TAG_B: "B", TAG_C: "C"}


def pack(values: np.ndarray, tag: int, first_id: int = 0, ids: np.ndarray | None = None) -> np.ndarray:
    """Cells for a host array: its bytes as 32-bit words, numbered from `first_id`."""
    words = np.ascontiguousarray(values).reshape(-1).view(np.uint32).astype(np.uint64)
    if ids is None:
        ids = np.arange(first_id, first_id + words.size, dtype=np.uint64)
    return (np.uint64(tag) << TAG_SHIFT) | (ids.astype(np.uint64) << ID_SHIFT) | words


def written_cells(data: np.ndarray, written: np.ndarray, tag: int) -> np.ndarray:
    """Cells of a tensor whose word w holds its own word w of `data` wherever `written` (tag `tag`), 0 elsewhere:
    what a buffer holds after transfers that each wrote its own position (built in place)."""
    cells = np.asarray(data, np.uint32).astype(np.uint64)
    ids = np.arange(cells.size, dtype=np.uint64)
    ids <<= ID_SHIFT
    cells |= ids
    del ids
    cells |= np.uint64(tag) << TAG_SHIFT
    cells[~written] = 0
    return cells


def initial(values: np.ndarray) -> np.ndarray:
    """Cells holding a Buffer's initial value (its bytes as 32-bit words, provenance INITIAL_VALUE)."""
    return INITIAL_VALUE | np.ascontiguousarray(values).reshape(-1).view(np.uint32).astype(np.uint64)


def values(cells: np.ndarray, t: DType) -> np.ndarray:
    """The elements held by a run of cells (little-endian lanes within each word)."""
    return (cells & VALUE_MASK).astype(np.uint32).view(t.host)


def data_words(cells: np.ndarray) -> np.ndarray:
    """The data words of a run of cells (bits 0-31), a view: the low half of each little-endian cell."""
    return np.ascontiguousarray(cells).view(np.uint32)[0::2]


def word_ids(cells: np.ndarray) -> np.ndarray:
    return ((cells >> ID_SHIFT) & ID_MASK).astype(np.int64)


def tags(cells: np.ndarray) -> np.ndarray:
    return (cells >> TAG_SHIFT).astype(np.int64)


def element_ids(cells: np.ndarray, t: DType) -> np.ndarray:
    """Source element index of every element lane of every cell."""
    per = t.per_word
    ids = word_ids(cells)
    if per == 1:
        return ids
    return (ids[:, None] * per + np.arange(per, dtype=np.int64)).reshape(-1)
