"""The L1 parts of a core and the capacity check (atb eq. 3, with the kernel's scratch and overhead).

A core holds depth_ab_l1 buffers of its A tile (T_MA = m / rho rows) and of its B tile, depth_c_l1
C objects of m x n, the kernel's bfp16 copies of a bf16 A tile (and B tile, converting once), a W4A16
kernel's dequantized B tile (bf16, or converting once those bfp16 tiles), the accumulator rows a
converted C does not fit in its object, and the overhead that does not depend on
the tiling: the runtime parameters (with runtime K), the stack and aiecc's per-core static data.
GemmConfig.l1_parts calls `parts` with one design's numbers; the tuner calls `largest_k` with every
(m, n, rho) at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..dtypes import BF16, DType, dtype
from ..epilogue import TANH_TABLE_FLOATS
from ..groupquant import object_bytes
from ..hw.devices import Device
from ..precision import BFP16, Precision
from . import Ints
from .kernel_variant import converts_a_tile

# the parts names of the tanh table's two copies (a SiLU / GELU epilogue's kernel arguments): worker Buffers with
# an initial value, pinned to two banks (gemm_gen/l1_banks.py), each epilogue.TANH_TABLE_FLOATS fp32 values
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
    pair_rows: int  # the kernel's row pairs (KERNEL_EXPANSION r): a converted C keeps whole ones in its object
    depth_ab: int
    depth_c: int
    overhead: tuple[tuple[str, int], ...]  # `overhead`'s parts, in order
    group_size: int = 0  # W4A16: rows of K per scale row of a B object (0: no group scales)
    zero_points: bool = False  # W4A16: a zero-point row per scale row

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


def c_split_rows(p: Precision, m: Ints, n: Ints, quantum: int) -> Ints:
    """Accumulator rows of an m x n C tile that live in the C object itself when C is converted
    after its last call: as many whole row pairs of the kernel (`quantum` = 2r rows) as the
    object's bytes hold (atb config3: 64 of a 128 x 128 bf16 accumulator in its 18 KiB bfp16
    object, 48 of 96 x 128). The rest go to a worker-local buffer. Without a conversion all m rows
    are the object's."""
    if not p.converts_c:
        return m
    room = dtype(p.out).nbytes(m * n)
    per_row = dtype(p.acc).nbytes(n)
    rows = room // per_row // quantum * quantum
    return np.minimum(m, rows) if isinstance(rows, np.ndarray) else min(m, rows)


def b_object_bytes(o: L1Options, k: Ints, n: Ints) -> Ints:
    """Bytes of one k x n B object in L1: its values, and a W4A16 object's scale (and zero-point) rows
    (groupquant.ObjectLayout)."""
    if o.group_size:
        nbytes: Ints = object_bytes(k, n, o.group_size, o.zero_points)
        return nbytes if isinstance(k, np.ndarray) or isinstance(n, np.ndarray) else int(nbytes)
    return o.t("B").nbytes(k * n)


def parts(o: L1Options, m: Ints, k: Ints, n: Ints, rho: Ints) -> dict[str, Ints]:
    """Bytes of each part of a core's L1: A, B (depth_ab buffers), C (depth_c), the kernel's
    scratch (a W4A16 core's dequantized B tile too), then the overhead."""
    t_ma = a_rows(m, rho)
    out = {
        "A": o.depth_ab * o.t("A").nbytes(t_ma * k),
        "B": o.depth_ab * b_object_bytes(o, k, n),
        "C": o.depth_c * o.t("C").nbytes(m * n),
    }
    p = o.precision
    if o.group_size and not o.convert_once:  # W4A16: the kernel dequantizes each B object into one k x n bf16 tile
        out[B_DEQ_PART] = BF16.nbytes(k * n)
    if converts_a_tile(p, o.convert_once):  # the kernel's bfp16 copy of the A tile (atb: 60.3 KB for config1)
        out["A bfp16"] = dtype(BFP16).nbytes(t_ma * k)
    if o.convert_once:  # and of the B tile (W4A16: each B object dequantized straight into these tiles)
        out["B bfp16"] = dtype(BFP16).nbytes(k * n)
    if p.converts_c:  # accumulator rows that do not fit in the C object
        out["C acc"] = o.t("acc").nbytes((m - c_split_rows(p, m, n, o.pair_rows)) * n)
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
