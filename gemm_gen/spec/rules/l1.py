"""The L1 parts of a core and the capacity check (atb eq. 3, with the kernel's scratch and overhead).

A core holds depth_ab_l1 buffers of its A tile (T_MA = m / rho rows) and of its B tile, depth_c_l1
C objects of m x n, the kernel's bfp16 copies of a bf16 A tile (and B tile, converting once), a W4A16
kernel's dequantized B tile (bf16, or converting once those bfp16 tiles), the accumulator blocks a
converted C does not fit in its object, and the overhead that does not depend on
the tiling: the runtime parameters (with runtime K), the stack and aiecc's per-core static data.
GemmConfig.l1_parts calls `parts` with one design's numbers; the tuner calls `largest_k` with every
(m, n, rho) at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...facts.devices import Device
from ...facts.dtypes import BF16, DType, dtype
from ...facts.epilogue import TANH_TABLE_FLOATS
from ...facts.groupquant import object_bytes
from ...facts.precision import BFP16, Precision
from . import Ints, shared_l1
from .kernel_variant import block_kernel, converts_a_tile

# the parts names of the tanh table's two copies (a SiLU / GELU epilogue's kernel arguments): worker Buffers with
# an initial value, pinned to two banks (gemm_gen/design/l1_banks.py), each epilogue.TANH_TABLE_FLOATS fp32 values
TANH_PARTS = ("tanh ab", "tanh cd")
TANH_TABLE_BYTES = 4 * TANH_TABLE_FLOATS
RTP_PART = "RTP"  # the parts name of a core's runtime-parameter Buffer
# the parts name of a W4A16 core's dequantized bf16 B tile (its scalar kernel's last argument); a W4A16 convert-once
# kernel dequantizes into its "B bfp16" tile instead (9 bytes per 8 values)
B_DEQ_PART = "B bf16"
# A core's runtime-parameter Buffer has one layout, as long as the last word its design reads:
K_WORD = 0  # runtime K: the k-steps per output tile after the first (which the core peels)
TILES_WORD = 1  # runtime sizes: the output tiles this call gives each core (its tile loop's bound)
MODE_WORD = 2  # a runtime activation: the mode (epilogue.MODES)


def rtp_words(runtime_sizes: str, runtime_activation: bool) -> int:
    """Words of a core's runtime-parameter Buffer (0: none): up to the mode word with a runtime activation,
    up to the tiles word with a runtime K (words a design does not read are left unwritten)."""
    if runtime_activation:
        return MODE_WORD + 1
    return TILES_WORD + 1 if runtime_sizes == "mnk" else 0


def rtp_written(runtime_sizes: str, runtime_activation: bool) -> tuple[int, ...]:
    """The words the runtime sequence writes into every core's Buffer each call: the k-steps of a runtime
    K, the tiles of any design that serves several sizes and has the Buffer, and the mode."""
    if not rtp_words(runtime_sizes, runtime_activation):
        return ()
    return ((K_WORD,) if runtime_sizes == "mnk" else ()) + ((TILES_WORD,) if runtime_sizes != "fixed" else ()) \
        + ((MODE_WORD,) if runtime_activation else ())


def runtime_barrier(runtime_sizes: str, runtime_activation: bool) -> bool:
    """Whether each core waits on a runtime barrier: whenever it reads runtime parameters. mlir-aie 1.4.3
    lowers a parameter write to a plain write32 (AIEDmaToNpu.cpp RtpToWrite32Pattern) that nothing orders
    against the call's DMA data; the barrier's set, written after the parameters, is what the core waits
    for (IRON WorkerRuntimeBarrier, as mlir-aie's own GEMM and epilogue designs use it)."""
    return rtp_words(runtime_sizes, runtime_activation) > 0


def runtime_writes(runtime_sizes: str, runtime_activation: bool) -> int:
    """write32 ops per core per call in the instruction stream: the parameter words and the barrier's set."""
    return len(rtp_written(runtime_sizes, runtime_activation)) + runtime_barrier(runtime_sizes, runtime_activation)


@dataclass(frozen=True)
class L1Options:
    """What a core's L1 use depends on besides the tiling (GemmConfig.l1_options)."""

    precision: Precision  # A, B, C and C's accumulator types
    convert_once: bool
    acc_block: tuple[int, int]  # acc_block(): the in-place split's unit (values per block, blocks per unit)
    depth_ab: int
    depth_c: int
    overhead: tuple[tuple[str, int], ...]  # `overhead`'s parts, in order
    group_size: int = 0  # W4A16: rows of K per scale row of a B object (0: no group scales)
    zero_points: bool = False  # W4A16: a zero-point row per scale row
    share: str = "none"  # neighbour-shared L1 (spec/rules/shared_l1.py): whose ping/pong buffers a core pair keeps once

    def t(self, role: str) -> DType:
        p = self.precision
        return dtype({"A": p.a, "B": p.b, "C": p.out, "acc": p.acc}[role])


def overhead(dev: Device, stack_bytes: int, runtime_sizes: str, runtime_activation: bool = False,
             tanh_table: bool = False) -> dict[str, int]:
    """The L1 bytes of each core that do not depend on the tiling: the runtime parameters it reads
    (with runtime K, or a runtime activation), the tanh table's two copies (an epilogue that reads them),
    its stack and aiecc's per-core static data (the parts that take bytes)."""
    words = rtp_words(runtime_sizes, runtime_activation)  # what each call writes
    parts = {RTP_PART: words * 4} if words else {}
    if tanh_table:
        parts.update((name, TANH_TABLE_BYTES) for name in TANH_PARTS)
    parts["stack"] = stack_bytes
    parts.update((p.name, p.nbytes) for p in dev.core_static if p.nbytes)
    return parts


def a_rows(m: Ints, rho: Ints) -> Ints:
    """T_MA = m / rho: rows of an A tile in L1 (C keeps all m rows); m itself for a rho below 1,
    which the config check refuses with its own message."""
    return m // np.maximum(rho, 1) if isinstance(rho, np.ndarray) else m // max(rho, 1)


def acc_block(p: Precision, convert_once: bool, mmul: tuple[int, int, int]) -> tuple[int, int]:
    """(values, blocks) of the in-place split's unit: the accumulator block the kernel loads and stores
    whole (an r x t mmul block in the scalar template; an 8 x 8 tile in the bfp16 one), and how many
    consecutive blocks it reaches through one pointer, so that a split never falls inside them: 1 in the
    scalar template (each C block addressed on its own), 2 in the bfp16 template's row-major blocks (a
    16 x 16 block's two tiles of one row), 4 in its 2 x 2 super-blocks (the four tiles of a 16 x 16 block)."""
    if block_kernel(p, convert_once):
        q = dtype(BFP16).tile_rows
        return q * q, 4 if dtype(p.out).is_block else 2
    r, _, t = mmul
    return r * t, 1


def c_split_blocks(p: Precision, m: Ints, n: Ints, block: tuple[int, int]) -> Ints:
    """Accumulator blocks of an m x n C tile that live in the C object itself when C is converted after
    its last call: the first blocks of the accumulator's blocked order, as many whole units of
    `block` (acc_block: values per block, blocks per unit) as the object's bytes hold (atb config3: 144
    of a 128 x 128 bf16 accumulator's 256 8 x 8 blocks in its 18 KiB bfp16 object, where whole row pairs
    kept 128, mlir-aie's half; an f32 accumulator of 80 x 128 in its 20 KiB bf16 object: 80 of 160
    blocks, where whole row pairs kept 64). The rest go to a worker-local buffer (the C acc part). The conversion writes
    each block's output over the object in the same order, so it never overwrites a block it has not
    read (in_place_overwrite). Without a conversion every block is the object's."""
    values, unit = block
    count = m * n // values
    if not p.converts_c:
        return count
    room = dtype(p.out).nbytes(m * n)
    blocks = room // dtype(p.acc).nbytes(values * unit) * unit
    return np.minimum(count, blocks) if isinstance(blocks, np.ndarray) else min(count, blocks)


def in_place_overwrite(order: np.ndarray, acc_bytes: int, out_at: np.ndarray, out_bytes: int,
                       split: int) -> tuple[int, int] | None:
    """(step, block) of the first write of an in-place conversion over an accumulator block it has not
    read yet, None if none does. Step i reads block order[i] (the first `split` blocks lie in the object,
    acc_bytes each, in block order; the others elsewhere) and then writes its out_bytes of output at
    out_at[order[i]] bytes from the object's start. Every write must end at or below the first byte of
    every object block still unread (the kernels' rule; a block's own output may overlap it, since the
    block is loaded first)."""
    order = np.asarray(order, dtype=np.int64)
    end = np.maximum.accumulate(np.asarray(out_at, dtype=np.int64)[order] + out_bytes)  # written so far
    start = np.where(order < split, order * acc_bytes, np.iinfo(np.int64).max)  # object blocks, by step
    later = np.minimum.accumulate(start[::-1])[::-1][1:]  # the lowest object block read after each step
    bad = np.flatnonzero(end[:-1] > later)
    if not bad.size:
        return None
    step = int(bad[0])
    return step, int(later[step] // acc_bytes)


def c_split_problem(p: Precision, m: int, n: int, block: tuple[int, int], split: int) -> str | None:
    """Why `split` accumulator blocks in the C object break the in-place conversion, None if they do not:
    a split inside a unit of `block` (acc_block), past the tile, past the object's bytes, or one whose
    conversion (block i to output block i, in increasing order, as both templates convert) would write
    over a block not read yet (in_place_overwrite)."""
    values, unit = block
    count = m * n // values
    acc, out = dtype(p.acc).nbytes(values), dtype(p.out).nbytes(values)
    if split % unit or not 0 <= split <= count:
        return f"C split at block {split} of {count}: not a multiple of the kernel's {unit}-block unit inside the tile"
    if split * acc > dtype(p.out).nbytes(m * n):
        return (f"C split at block {split}: {split} x {acc} B of accumulator blocks exceed the "
                f"{dtype(p.out).nbytes(m * n)} B C object")
    order = np.arange(count)
    hit = in_place_overwrite(order, acc, order * out, out, split)
    if hit is not None:
        return (f"C split at block {split}: converting block {int(order[hit[0]])} in place writes over block "
                f"{hit[1]}, which is read later")
    return None


def b_object_bytes(o: L1Options, k: Ints, n: Ints) -> Ints:
    """Bytes of one k x n B object in L1: its values, and a W4A16 object's scale (and zero-point) rows
    (groupquant.ObjectLayout)."""
    if o.group_size:
        nbytes: Ints = object_bytes(k, n, o.group_size, o.zero_points)
        return nbytes if isinstance(k, np.ndarray) or isinstance(n, np.ndarray) else int(nbytes)
    return o.t("B").nbytes(k * n)


def buffers(o: L1Options, operand: str, holder: bool = True) -> int:
    """A core's buffers of A or B: depth_ab; with B split over a vertical pair (shared_l1), one (its slot); with A
    shared, both on the west core of the pair (`holder`) and none on its east neighbour, which reads them in
    place."""
    if not shared_l1.shared(o.share, operand):
        return o.depth_ab
    return 1 if operand == "B" else o.depth_ab if holder else 0


def parts(o: L1Options, m: Ints, k: Ints, n: Ints, rho: Ints, holder: bool = True) -> dict[str, Ints]:
    """Bytes of each part of a core's L1: A, B (depth_ab buffers, or what `buffers` says a core keeps of a shared
    operand: the holder's by default, the core that bounds the tile), C (depth_c), the kernel's scratch (a W4A16
    core's dequantized B tile too), then the overhead."""
    t_ma = a_rows(m, rho)
    out = {
        "A": buffers(o, "A", holder) * o.t("A").nbytes(t_ma * k),
        "B": buffers(o, "B", holder) * b_object_bytes(o, k, n),
        "C": o.depth_c * o.t("C").nbytes(m * n),
    }
    p = o.precision
    if o.group_size and not o.convert_once:  # W4A16: the kernel dequantizes each B object into one k x n bf16 tile
        out[B_DEQ_PART] = BF16.nbytes(k * n)
    if converts_a_tile(p, o.convert_once):  # the kernel's bfp16 copy of the A tile (atb: 60.3 KB for config1)
        out["A bfp16"] = dtype(BFP16).nbytes(t_ma * k)
    if o.convert_once:  # and of the B tile (W4A16: each B object dequantized straight into these tiles)
        out["B bfp16"] = dtype(BFP16).nbytes(k * n)
    if p.converts_c:  # accumulator blocks that do not fit in the C object
        out["C acc"] = o.t("acc").nbytes(m * n - c_split_blocks(p, m, n, o.acc_block) * o.acc_block[0])
    return out | dict(o.overhead)


def total(o: L1Options, m: Ints, k: Ints, n: Ints, rho: Ints) -> Ints:
    """A core's L1 bytes."""
    return sum(parts(o, m, k, n, rho).values())


def fits(o: L1Options, capacity: int, m: Ints, k: Ints, n: Ints, rho: Ints) -> Ints:
    """The capacity check: whether a core's L1 holds it all."""
    return total(o, m, k, n, rho) <= capacity


def largest_k(o: L1Options, capacity: int, m: np.ndarray, n: np.ndarray, rho: np.ndarray, step: int
              ) -> np.ndarray:
    """Per (m, n, rho): the largest multiple of `step` (the mmul's s) for which `fits` holds, 0 if
    none. L1 grows linearly in k (atb eq. 3), so two totals give the slope. A W4A16 B object also
    grows by a scale row per group past its first, which this slope misses: its k is then an upper
    bound, and the search's mask (space.mask) applies `fits` itself."""
    fixed = np.asarray(total(o, m, 0 * m, n, rho), dtype=np.int64)
    per_step = np.asarray(total(o, m, step + 0 * m, n, rho), dtype=np.int64) - fixed
    room = capacity - fixed
    return np.where(room > 0, room // per_step, 0) * step
