"""The padded sizes of a call: what whole blocks of the array and whole k_mt chunks of K cover.

A design computes M x N in blocks of block_m x block_n = (rows m) x (cols n) and walks K in k_mt
chunks (gemm_gen/spec/call.py says how the tails are handled); these are the sizes it computes, the
output tiles each core makes and the BD tasks of the runtime sequence. gemm_gen/spec/call.py's CallPlan,
GemmConfig's task check, the model (perf.estimate) and the tuner all use them.
"""

from __future__ import annotations

import numpy as np

from ...facts.devices import Device
from . import Ints, decode_split

# Every fine-grained shim BD is unrolled into the instruction stream (~64 bytes each); 1M tasks
# covers 65536^3 with small tiles and keeps insts.bin in the tens of MiB.
MAX_RUNTIME_TASKS = 1_000_000


def ceil_div(x: Ints, q: Ints) -> Ints:
    """How many q-sized pieces cover x."""
    return -(-x // q)


def round_up(x: Ints, q: Ints) -> Ints:
    """x up to the next multiple of q."""
    return -(-x // q) * q


def nearest(x: int, q: int) -> tuple[int, ...]:
    """The multiples of q next to x, for an error message's fix ((64, 80), or one value)."""
    lo = max(q, x // q * q)
    hi = lo + q if lo >= x else round_up(x, q)
    return (lo,) if lo == hi else (lo, hi)


def near(x: int, q: int) -> str:
    """nearest(x, q) as text: "64 or 80", or one value."""
    return " or ".join(map(str, nearest(x, q)))


def covered(M: Ints, K: Ints, N: Ints, block_m: Ints, k_mt: Ints, block_n: Ints) -> tuple[Ints, Ints, Ints]:
    """(Mp, K walked, Np): what a call's whole blocks and whole k_mt chunks compute."""
    return round_up(M, block_m), round_up(K, k_mt), round_up(N, block_n)


def same_k_walk(K: Ints, K_built: Ints, k_mt: Ints) -> Ints:
    """Whether a call of K walks as many k_mt chunks as the K a design was built for (what a design whose cores
    take a fixed number of k-steps serves: runtime sizes "mn")."""
    return round_up(K, k_mt) == round_up(K_built, k_mt)


def tiles_per_core(M: Ints, N: Ints, block_m: Ints, block_n: Ints) -> Ints:
    """Output tiles each core computes in one call (one per task group)."""
    return ceil_div(M, block_m) * ceil_div(N, block_n)


def tasks_per_group(a_shims: int, cols: int, dev: Device | None = None, rows: int = 0) -> int:
    """Shim BD tasks of one task group: one A task per shim that carries A (memtile.a_shims) and one
    B and one C task per column; the split decode placement's own count (spec/rules/decode_split.py) when `dev`
    and `rows` say the grid is it."""
    if dev is not None and decode_split.is_split(dev, rows, cols):
        return decode_split.tasks_per_group(dev)
    return a_shims + 2 * cols


def task_groups(m_blocks: Ints, n_blocks: Ints, span: int, span_max: int) -> Ints:
    """Task groups of a call whose output blocks are grouped `span` at a time along N within each
    row band (design/spans.py; 1: a group per block). Span 0, as many as one BD expresses, is bounded
    here by `span_max` (the shim's iteration wrap: where a spanned walk with a step usually has to
    go); the design's own count (design.build.group_blocks) may be more, for a walk with a shorter
    limit, and is what a built design is priced with."""
    per_row = n_blocks if span == 1 else ceil_div(n_blocks, span or span_max)
    return m_blocks * per_row


def runtime_tasks(tiles: Ints, a_shims: int, cols: int, dev: Device | None = None, rows: int = 0) -> Ints:
    """Shim BD tasks the runtime sequence pushes for `tiles` task groups (the largest call a design
    serves)."""
    return tiles * tasks_per_group(a_shims, cols, dev, rows)


def tasks_fit(tiles: Ints, a_shims: int, cols: int, dev: Device | None = None, rows: int = 0) -> Ints:
    """Whether the runtime sequence stays within MAX_RUNTIME_TASKS (an array: per candidate)."""
    return np.asarray(runtime_tasks(tiles, a_shims, cols, dev, rows)) <= MAX_RUNTIME_TASKS
