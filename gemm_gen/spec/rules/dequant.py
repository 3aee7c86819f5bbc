"""W4A16's dequantization passes: what they read and write per vector, and their vector operations.

Once per B object the kernel turns its int4 B object (gemm_gen/facts/groupquant.py) into the tile its body reads:
- the scalar template (templates/mm.cc.j2: npu1, and npu2 with --convert-once 0 or native bf16 mmuls) into a
  k x n bf16 scratch, one s x t block of B per vector of V = s t values;
- npu2's convert-once template (templates/mm_bfp16.cc.j2, the default there) straight into bfp16 tiles of B^T
  (`to_bfp16`), one 8 x 8 tile per vector of 64 values, which the convert-once body's macs then read.

Each pass is ONE flat software-pipelined loop over the object, entered once per object, with the block
columns innermost: the bf16 pass walks the object's blocks along N first (a trip is the blocks of one 8-column
scale load, 8 / t of them, in `trip_rows` K block rows), the bfp16 pass in the order of its one output stream
(column pair, then K: a trip is the pair's two tiles in `trip_rows` K tiles). A trip's K rows lie in one group
and share the scales (and zero points) it loads and spreads over the lanes; the rest of the scale work is per
trip, not hoisted. Before issue 31 (item 8) the scalar pass hoisted it out of an inner loop over one group's K
blocks instead: g / s trips (4 at g = 32), entered once per (group, column block), 64 times for a 32 x 256
object. TRIP_ROWS trades that work against code: two rows halve it, at twice the trip's code.

bf16 pass, per vector (block) of V = s t values, in order (the scale and zero-point work is the trip's, so per
vector it is divided by the trip's K rows as well):

    load_v             the V / 2 bytes of int4 values (vector_cast<int4> reinterprets them: no operation)
    load_v             the 8 scales of the block's 8-column chunk (t / 8 of a load per vector), one 128-bit vector;
                       interleave_zip of the chunk's row with itself on t = 4 (half an operation per vector), and
                       grow_replicate over the block's s rows
    (zero points)      likewise loaded, to_fixed<int16> and + the bias bits (136 + z), per chunk; zipped on t = 4;
                       grow_replicate per block
    unpack             int4 -> int8
    unpack             int8 -> int16
    add                the bias bits 0x4308 (int16): the bits of the bf16 value 136 + q (vector_cast<bfloat16>
                       reinterprets them: no operation). No integer-to-float conversion, which in aie_api's
                       Fix2Float for 16-bit inputs (detail/aie2/ and detail/aie2p/elementary.hpp) would be four
                       operations: from_vector_sign (UPS), add_accum, sub_accum, to_vector_sign (SRS)
    mul                (136 + q) x the scale into accfloat (exact)
    msc                minus (136 + z) x the scale (136 without zero points): exact (Sterbenz), so (q - z) s
    to_vector<bf16>    the one rounding, to nearest even
    store_v            V bf16 values (one or two stores, by the core's store width)

bfp16 pass, per 8 x 8 tile (64 values), in order (the scale work again the trip's): load_v of its 32 int4 bytes;
load_v of its 8 columns' scales,
grow_replicate over the 8 rows and transpose (each column's scale on the 8 lanes of its row of B^T); with zero
points the same, after to_fixed<int16> and the bias add; unpack twice, the bias add, the transpose to B^T (as
aie_api's emulation transposes B), mul, msc (exact, as above), to_vector<bfp16ebs8> (the one rounding, under
the core's rounding mode: blocks of 8 K values per column) and the output stream's push of the 72-byte tile.

Operation counts are AIE API calls at the vector's own width (a 64-lane bf16 / 2048-bit accfloat operation may
take two instructions), not measured cycles: the figure the performance model's uncalibrated charge can be
checked against.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...facts.devices import DEVICES, Device
from ...facts.dtypes import BF16, BFP16
from ...facts.errors import opt
from . import Ints
from . import kernel_variant as kv

MIN_LANES = 32  # the smallest int4 vector the AIE API has (UG1603 "Data Types": int4 32..256 lanes)
BLOCK_COLUMNS = (4, 8)  # t: the scale pattern of a block row is 8 scales (t = 8) or half of them zipped (t = 4)
SCALE_LANES = 8  # scales per load: one 128-bit vector of bf16, the smallest the API has
TILE_LANES = BFP16.tile_rows * BFP16.tile_cols  # the bfp16 pass: one 8 x 8 tile of B^T per vector
TILES_PER_TRIP = 2  # the bfp16 pass: a column pair's two tiles per trip (its output stream's order)
TRIP_ROWS = 2  # K block rows (tiles) per trip of either pass, sharing the scales (fewer when a group has fewer)
LOADS = ("load_v",)  # the operations the load units issue
STORES = ("store_v", "push")  # the operations the store unit issues
# Software-pipeline stages the model assumes of each pass's loop: every entry fills and drains STAGES - 1 trips.
# ASSUMED, not measured: the stage count mlir-aie PR #3650 reports for its pipelined bfp16 block loop (the only
# published stage count of a kernel loop on these cores); the pass is entered once per B object.
PASS_STAGES = 2


@dataclass(frozen=True)
class DequantOps:
    """Operations of one dequantization pass per vector of `lanes` values (the flat loop's per-trip operations,
    spread over the trip's vectors)."""

    lanes: int  # V: s t of the mmul the bf16 pass feeds, or a bfp16 tile's 64
    vectors_per_trip: int  # vectors (blocks, tiles) one trip of the flat loop makes
    per_vector: tuple[tuple[str, float], ...]  # in order
    to_bfp16: bool = False  # the convert-once pass: bfp16 tiles out (else bf16)

    @property
    def ops(self) -> float:
        """Operations per vector, memory ones included."""
        return sum(n for _, n in self.per_vector)

    def _count(self, kinds: tuple[str, ...]) -> float:
        return sum(n for name, n in self.per_vector if name.startswith(kinds))

    @property
    def vector_ops(self) -> float:
        """Operations per vector on the one vector slot (its loads and stores excluded)."""
        return self.ops - self._count(LOADS + STORES)

    @property
    def loads(self) -> float:
        """Load operations per vector (the load units)."""
        return self._count(LOADS)

    @property
    def out_bytes(self) -> float:
        """Bytes one vector writes: V bf16 values, or a 72-byte bfp16 tile (9 bytes per 8 values)."""
        return (BFP16 if self.to_bfp16 else BF16).nbytes(self.lanes)


def to_bfp16(group_size: int, convert_once: bool) -> bool:
    """Whether a kernel dequantizes its B objects straight into bfp16 tiles (npu2's convert-once W4A16 kernel:
    the exact (q - z) s rounded once, by the bfp16 quantization) rather than into bf16 (groupquant.dequant)."""
    return bool(group_size) and bool(convert_once)


def block_problem(mmul: tuple[int, int, int], group_size: int) -> tuple[str, str] | None:
    """(what, fix) when the bf16 pass cannot read B in the mmul's s x t blocks: one block per vector of s t int4
    values (at least the MIN_LANES of the smallest int4 vector), t in BLOCK_COLUMNS (the scale pattern of a block
    row), s dividing the group size (a block inside one group); else None."""
    _, s, t = mmul
    if s * t >= MIN_LANES and t in BLOCK_COLUMNS and group_size % s == 0:
        return None
    return (f"mmul {'x'.join(map(str, mmul))} with int4 weights: the dequantization pass takes s x t blocks of at "
            f"least {MIN_LANES} values, t in {BLOCK_COLUMNS}, s dividing the group size {group_size}",
            "use the device's default bf16 mmul shape")


def trip_rows(k: int, group_size: int, s: int) -> int:
    """K block rows (of s rows) per trip of the pass over a k-row object: TRIP_ROWS, or a group's (or the object's)
    fewer, so that a trip's rows lie in one group."""
    return max(1, min(TRIP_ROWS, min(k, group_size) // s))


def _device(dev_name: str) -> Device:
    return DEVICES[dev_name]


def dequant_ops(dev_name: str, zero_points: bool = False, mmul: tuple[int, int, int] | None = None,
                to_bfp16: bool = False, rows: int = TRIP_ROWS) -> DequantOps:
    """A pass's operations per vector on `dev_name` (npu1, npu2): the bfp16 pass (`to_bfp16`, npu2's convert-once
    kernel), else the bf16 pass for `mmul` (default: the device's default bf16 mmul; npu2: the bf16-via-bfp16
    8x8x8 it uses by default); `rows` K block rows per trip (trip_rows), which share the scale work."""
    dev = _device(dev_name)
    isa = dev.isa
    if to_bfp16:  # a trip: the pair's two tiles in `rows` K tiles; each column's scales loaded once per trip
        lanes, per_trip, chunk = TILE_LANES, TILES_PER_TRIP * rows, 1.0 / rows
        spread = [("grow_replicate", chunk), ("transpose", chunk)]  # value c on the 8 lanes of B^T's row c
    else:  # a trip: one 8-column chunk (8 / t blocks) in `rows` K block rows, one 8-scale load
        if mmul is None:
            mmul = dev.mmul_shape("bf16", dev.bf16_emulation_default)
        _, s, t = mmul
        lanes, per_trip, chunk = s * t, SCALE_LANES // t * rows, t / SCALE_LANES / rows
        zipped = 0.5 / rows if t < SCALE_LANES else 0.0  # one zip serves a chunk's two block columns
        spread = [("interleave_zip", zipped), ("grow_replicate", 1.0 / rows)]
    ops: list[tuple[str, float]] = [("load_v int4 bytes", -(-lanes // 2 // isa.vld_bytes)), ("load_v scales", chunk)]
    ops += [(f"{name} scales", n) for name, n in spread]
    if zero_points:
        ops += [("load_v zero points", chunk), ("to_fixed<int16> zero points", chunk),
                ("add bias bits to zero points", chunk)]
        ops += [(f"{name} zero points", n) for name, n in spread]
    ops += [("unpack int4->int8", 1), ("unpack int8->int16", 1), ("add bias bits", 1)]
    ops += [("transpose to B^T", 1)] if to_bfp16 else []
    ops += [("mul by scale", 1), ("msc offset by scale", 1)]
    if to_bfp16:
        ops += [("to_vector<bfp16ebs8>", 1), ("push bfp16 tile", 1)]
    else:
        ops += [("to_vector<bfloat16>", 1), ("store_v bf16", -(-lanes * 2 // isa.vst_bytes))]
    return DequantOps(lanes, per_trip, tuple((name, float(n)) for name, n in ops if n), to_bfp16)


def dequant_code_bytes(dev_name: str, zero_points: bool, mmul: tuple[int, int, int] | None = None) -> int:
    """Upper estimate of the scalar kernel's bf16 pass's code, as kernel_variant.code_bytes estimates the matmul's:
    one trip's operations each in a full instruction, the pipelined loop PIPELINE_COPIES times."""
    dev = _device(dev_name)
    d = dequant_ops(dev_name, zero_points, mmul)
    trip = math.ceil(d.ops * d.vectors_per_trip)
    return trip * kv.PIPELINE_COPIES * dev.isa.instruction_bytes


def code_reserve(dev_name: str, group_size: int, zero_points: bool, mmul: tuple[int, int, int]) -> int:
    """Program bytes the matmul function holds besides its loop nest: W4A16's dequantization pass (none without
    group scales), which the automatic loop structure leaves room for (kernel_variant.auto_loops)."""
    return dequant_code_bytes(dev_name, zero_points, mmul) if group_size else 0


def matmul_code_bytes(dev: Device, mmul: tuple[int, int, int], emulate: bool, expansion: tuple[int, int],
                      loops: str, k: Ints, n: Ints, zero_points: bool) -> Ints:
    """Estimated program memory of a W4A16 matmul: the bf16 loop nest (kernel_variant.code_bytes) plus the
    dequantization pass (dequant_code_bytes), against the matmul's CODE_BUDGET (an int, or one per tile of
    arrays)."""
    nest = kv.code_bytes(dev, "bf16", mmul, emulate, expansion, loops, k, n)
    need = nest + dequant_code_bytes(dev.name, zero_points, mmul)
    return need if isinstance(k, np.ndarray) or isinstance(n, np.ndarray) else int(need)


def code_budget(dev: Device) -> int:
    """The matmul's share of the core's program memory (kernel_variant.CODE_BUDGET)."""
    return int(kv.CODE_BUDGET * dev.isa.program_bytes)


def code_fits(dev: Device, mmul: tuple[int, int, int], emulate: bool, expansion: tuple[int, int], loops: str,
              k: Ints, n: Ints, zero_points: bool) -> Ints:
    """Whether a W4A16 matmul and its pass fit the matmul's program-memory budget (per tile of arrays)."""
    return matmul_code_bytes(dev, mmul, emulate, expansion, loops, k, n, zero_points) <= code_budget(dev)


def code_problem(dev: Device, mmul: tuple[int, int, int], emulate: bool, expansion: tuple[int, int], loops: str,
                 k: int, n: int, zero_points: bool) -> tuple[str, str] | None:
    """(what, fix) when a W4A16 matmul and its pass exceed the matmul's program-memory budget, else None."""
    if code_fits(dev, mmul, emulate, expansion, loops, k, n, zero_points):
        return None
    need, budget = matmul_code_bytes(dev, mmul, emulate, expansion, loops, k, n, zero_points), code_budget(dev)
    return (f"the matmul and its dequantization pass (about {need} B of code) exceed their {budget} B of the "
            f"{dev.name} core's {dev.isa.program_bytes} B program memory",
            f"use {opt('kernel_loops', 'k-pipelined')}, or a smaller kernel tile")
