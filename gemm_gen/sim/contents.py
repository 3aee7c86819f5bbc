"""What a memory region holds, symbolically: the fast simulator's provenance (sim/flow.py).

The literal simulator (sim/machine.py) moves 64-bit cells, each a data word with its provenance (sim/words.py).
The fast one moves no data: a region of a buffer holds a *content*, a key and a base, where the key names an
array of provenance (tag and word id per cell) for base 0 and the base is added to the ids of tagged cells (a
DRAM word offset, or a C tile's handle that sim/bulk.py resolves to its first word). A DMA that moves a run
of words from one content into a region makes a new key out of the old key, the two BD patterns and the run's
offsets: its provenance is computed once per distinct key (`Keys.provenance`), and a repeat of the same
transfer on other data (another k-step, another output block) costs one dictionary lookup. Every word a DMA
moves is still accounted for: its key's array says where each word came from, and sim/bulk.py checks those
arrays as the kernel emulator checks cells (sim/kernel.py).

Key definitions (tuples; ids are small ints, arrays are registered by identity):
- ("zero", n): n unwritten words (what memories come up as, and what the zero kernel leaves);
- ("stale", n): n words a previous call left (the fast path refuses to read them);
- ("dram", tag, arr): the words a shim task reads from A or B: ids arr (+ the task's first word);
- ("read", content, arr, off): the words an MM2S BD with pattern arr reads from a region at off;
- ("part", seq, pos, w): words pos..pos+w of a sequence;
- ("fill", arr, off, n, pieces): a region of n words that an S2MM BD with pattern arr filled from pieces
  (seq, dpos, w, delta): the run dpos..dpos+w of the BD took the sequence, its ids delta above the first's;
- ("kernel", name, n, mask, epoch): an L1 C object of n words as the kernels of call `epoch` wrote it: "out"
  (the conversion's whole object), "slices" (the matmuls' C slices in `mask`): sim/bulk.py's c_provenance.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import words as w

# A base names where the ids of a content's tagged cells start: a task's first word plus an offset, kept as the task's
# index in the call (TASK bits up) and the offset (ORIGIN-biased, below), so that a base says which task it came from
# (sim/period.py shifts them); or, at HANDLE and above, a C tile's handle (sim/bulk.py resolves both).
TASK = 32
ORIGIN = 1 << 31
HANDLE = 1 << 62
Provenance = tuple[np.ndarray, np.ndarray]  # (tags int8, ids int64 relative to the base) per cell

# the fast machine's kernel records (sim/flow.py Recorder): one row of FIELDS int64 per call
ZERO, MATMUL, CONVERT = 0, 1, 2
FIELDS = 8  # kind, core, handle, slice, A key, A base, B key, B base (convert: mode, B key, B base; zero: how)
CALLED, CARRIED = 0, 1  # a zero call of this call, or one the core made at the end of the previous call
UNWRITTEN = ("zero", "stale")  # key kinds whose base means nothing


class NotProven(Exception):
    """The fast path cannot show that the literal run passes; the literal run decides (its error, if any, is
    the answer)."""


class Keys:
    """Interned content keys and the provenance arrays they stand for (computed once each, on demand)."""

    def __init__(self, kernel_arrays: Callable[[str, int, int, int], Provenance]) -> None:
        self.ids: dict[tuple, int] = {}
        self.defs: list[tuple] = []
        self.arrays: dict[int, np.ndarray] = {}  # registered patterns, by identity (kept alive here)
        self.memo: dict[int, Provenance] = {}
        self.kernel_arrays = kernel_arrays
        self.stale: dict[int, int] = {}

    def __call__(self, d: tuple) -> int:
        k = self.ids.get(d)
        if k is None:
            k = self.ids[d] = len(self.defs)
            self.defs.append(d)
        return k

    def array(self, a: np.ndarray) -> int:
        """A pattern's id (its identity; the array is kept alive so that the id is never reused)."""
        i = id(a)
        if i not in self.arrays:
            self.arrays[i] = a
        return i

    def zero(self, n: int) -> int:
        return self(("zero", n))

    def is_stale(self, key: int) -> bool:
        return self.defs[key][0] == "stale"

    def provenance(self, key: int) -> Provenance:
        got = self.memo.get(key)
        if got is None:
            got = self.memo[key] = self._make(self.defs[key])
        return got

    def _make(self, d: tuple) -> Provenance:
        kind = d[0]
        if kind in ("zero", "stale"):
            return np.zeros(d[1], np.int8), np.zeros(d[1], np.int64)
        if kind == "dram":
            _, tag, arr = d
            ids = self.arrays[arr].astype(np.int64)
            return np.full(ids.size, tag, np.int8), ids
        if kind == "read":
            _, content, arr, off = d
            tags, ids = self.provenance(content)
            at = self.arrays[arr] - off
            return tags[at], ids[at]
        if kind == "part":
            _, seq, pos, n = d
            tags, ids = self.provenance(seq)
            return tags[pos:pos + n], ids[pos:pos + n]
        if kind == "fill":
            _, arr, off, n, pieces = d
            tags, ids = np.zeros(n, np.int8), np.zeros(n, np.int64)
            at = self.arrays[arr] - off
            for seq, dpos, run, delta in pieces:
                st, si = self.provenance(seq)
                where = at[dpos:dpos + run]
                tags[where] = st
                ids[where] = si + np.where(st != w.TAG_NONE, delta, 0)
            return tags, ids
        if kind == "kernel":
            return self.kernel_arrays(d[1], d[2], d[3], d[4])
        raise AssertionError(d)
