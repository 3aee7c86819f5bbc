"""W4A16's dequantization pass (templates/mm.cc.j2): what it reads per vector, and its vector operations.

Once per matmul call the kernel turns its int4 B object (gemm_gen/groupquant.py) into a k x n bf16
scratch tile, one s x t block of B per vector of V = s t values, then runs the bf16 body on the scratch.
Per vector (the inner loop) it issues these AIE API operations, in order:

    load_v             the V / 2 bytes of int4 values (vector_cast<int4> reinterprets them: no operation)
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

and once per (scale row, column block), amortized over that group's K blocks: the 8 scales' load, on
t = 4 an interleave_zip (one per two column blocks), a grow_replicate; with zero points the same for
them plus a to_fixed<int16> and the bias add that makes 136 + z. Zero points thus cost nothing per
vector. Operation counts are AIE API calls at the vector's own width (a 64-lane
bf16 / 2048-bit accfloat operation may take two instructions), not measured cycles: the figure the
performance model's uncalibrated charge can be checked against.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..hw.devices import DEVICES, Device
from . import kernel_variant as kv

MIN_LANES = 32  # the smallest int4 vector the AIE API has (UG1603 "Data Types": int4 32..256 lanes)
BLOCK_COLUMNS = (4, 8)  # t: the scale pattern of a block row is 8 scales (t = 8) or half of them zipped (t = 4)
SCALE_LANES = 8  # scales per load: one 128-bit vector of bf16, the smallest the API has


@dataclass(frozen=True)
class DequantOps:
    """Vector operations of the dequantization pass for one vector of `lanes` int4 values."""

    lanes: int  # V = s t of the mmul the pass feeds
    per_vector: tuple[tuple[str, int], ...]  # the inner loop's operations, in order
    per_group_block: tuple[tuple[str, float], ...]  # once per (scale row, column block)

    @property
    def ops(self) -> int:
        """Operations per vector of `lanes` values (the inner loop)."""
        return sum(n for _, n in self.per_vector)

    @property
    def setup_ops(self) -> float:
        return sum(n for _, n in self.per_group_block)

    def ops_per_value(self, blocks_per_group: int) -> float:
        """Operations per int4 value, the per-group setup spread over `blocks_per_group` vectors."""
        return (self.ops + self.setup_ops / blocks_per_group) / self.lanes


def _device(dev_name: str) -> Device:
    return DEVICES[dev_name]


def dequant_ops(dev_name: str, zero_points: bool = False, mmul: tuple[int, int, int] | None = None) -> DequantOps:
    """The pass's vector operations per vector of V values on `dev_name` (npu1, npu2), for the device's
    default bf16 mmul (npu2: the bf16-via-bfp16 8x8x8 it uses by default) unless `mmul` is given."""
    dev = _device(dev_name)
    if mmul is None:
        mmul = dev.mmul_shape("bf16", dev.bf16_emulation_default)
    _, s, t = mmul
    lanes = s * t
    isa = dev.isa
    per_vector = [("load_v int4 bytes", -(-lanes // 2 // isa.vld_bytes)), ("unpack int4->int8", 1),
                  ("unpack int8->int16", 1)]
    per_vector += [("add bias bits", 1), ("mul by scale", 1), ("msc offset by scale", 1), ("to_vector<bfloat16>", 1),
                   ("store_v bf16", -(-lanes * 2 // isa.vst_bytes))]
    zipped = 0.5 if t < SCALE_LANES else 0.0  # one interleave_zip serves two column blocks
    setup: list[tuple[str, float]] = [("load scales", 1.0), ("interleave_zip scales", zipped),
                                      ("grow_replicate scales", 1.0)]
    if zero_points:
        setup += [("load zero points", 1.0), ("to_fixed<int16> zero points", 1.0),
                  ("interleave_zip zero points", zipped), ("grow_replicate zero points", 1.0),
                  ("add bias bits to zero points", 1.0)]
    return DequantOps(lanes, tuple(per_vector), tuple((name, n) for name, n in setup if n))


def dequant_code_bytes(dev_name: str, zero_points: bool, mmul: tuple[int, int, int] | None = None) -> int:
    """Upper estimate of the pass's code, as kernel_variant.code_bytes estimates the matmul's: its
    operations each in a full instruction, the pipelined inner loop PIPELINE_COPIES times, the setup once."""
    dev = _device(dev_name)
    d = dequant_ops(dev_name, zero_points, mmul)
    setup = len(d.per_group_block)  # one code copy per setup operation, whatever its amortized share
    return (d.ops * kv.PIPELINE_COPIES + setup) * dev.isa.instruction_bytes


def matmul_code_bytes(dev: Device, mmul: tuple[int, int, int], emulate: bool, expansion: tuple[int, int],
                      loops: str, k: int, n: int, zero_points: bool) -> int:
    """Estimated program memory of a W4A16 matmul: the bf16 loop nest (kernel_variant.code_bytes) plus the
    dequantization pass (dequant_code_bytes), against the matmul's CODE_BUDGET."""
    nest = kv.code_bytes(dev, "bf16", mmul, emulate, expansion, loops, k, n)
    return int(nest) + dequant_code_bytes(dev.name, zero_points, mmul)


def code_problem(dev: Device, mmul: tuple[int, int, int], emulate: bool, expansion: tuple[int, int], loops: str,
                 k: int, n: int, zero_points: bool) -> tuple[str, str] | None:
    """(what, fix) when a W4A16 matmul and its pass exceed the matmul's program-memory budget, else None."""
    need = matmul_code_bytes(dev, mmul, emulate, expansion, loops, k, n, zero_points)
    budget = int(kv.CODE_BUDGET * dev.isa.program_bytes)
    if need <= budget:
        return None
    return (f"the matmul and its dequantization pass (about {need} B of code) exceed their {budget} B of the "
            f"{dev.name} core's {dev.isa.program_bytes} B program memory",
            "use --kernel-loops k-pipelined, or a smaller kernel tile")
