"""Single-core kernel throughput from the VLIW accumulation-chain model (atb sec. 4, eq. 5-11).

Our kernels compute an m x k x n call as (m/(er r)) x (n/(et t)) *chain clusters* of C = er x et
accumulators (the kernel variant, gemm_gen/spec/rules/kernel_variant.py) sharing the loads of er A and et B
blocks per round, each chain k/s vmacs long.

    per cluster   T = V * II + O                      V = C k/s vmacs
    II            = max(mmul issue cycles, P / C, loads per round / (U_ld * C))         (eq. 6-7)
    O_serial      = T_prolog + T_epilog - C * II                                     (eq. 5, 9, 10)
    T_prolog      = l_vld + ceil((C loads + one round of A/B loads) / U_ld) - 1          (eq. 5)
    T_epilog      = l_vmac->vst + l_vst - 1 + max((C - 1) II + st_acc, C st_acc)        (eq. 9, one store unit)
    O             = beta * n_C + (O_serial - beta * n_C) * overlap                       (eq. 10 vs 11)

What overlaps is what the compiler software-pipelines, or what the template interleaves itself:
nothing between clusters when only the K loop is pipelined (k-pipelined: overlap = 1); with
c-overlap the peeled last round of each cluster stores each chain's C and reloads the next cluster's
into the same accumulator, so those reloads leave the next prolog (all of them when a spare
accumulator lets chain q reload into the register chain q - 1's store freed, all but the last
chain's otherwise), and O = max(beta n_C, O_overlap) with the call's first cluster paying its C
loads once (call_overhead); consecutive clusters of a block row when the K loop is flattened
inside the pipelined cluster loop (k-flat: all but the row's first cluster get h(D)), every cluster
when both are flattened inside the pipelined block-row loop (jk-flat: h(D)). D is how many clusters'
accumulators fit the accumulator file at once: with D = 1 nothing overlaps (eq. 10, h = 1); with
D = 2 either the next prolog or the previous epilog overlaps the steady state (h = 1/2); with D >= 3
both do (eq. 11, h = 0). What overlap cannot hide is beta cycles per C vector load or store (n_C per
cluster): port and bank conflicts with the A/B load stream, the one calibrated kernel parameter.

bfp16 kernels (the bfp16 datapath with bfp16 B, or bf16 converted once: gemm_gen/facts/precision.py) are
priced from their own loop (gemm_gen/spec/rules/block_loop.py: rules.block_loop.writes_out_k(k) picks the loop
templates/mm_bfp16.cc.j2 renders at each k), per 16 x 16 C block of 4 accumulators and k/8 k-steps of 2 A pops,
2 B pops and 4 single-cycle 8x8x8 macs:

    block (none)      = k/8 max(4, pops / U_ld) + max(0, T_prolog + T_epilog - 4) + widen     (eq. 5, 9, 10)
    block (flat)      = max(4 k/8 + widen, (k/8 pops + C loads) / U_ld, C stores / U_st) + o_flat   (eq. 11)
    block (atb-chess) = 4 k/8 + epsilon + widen                                                  (eq. 13)
    call              = blocks x block + entries x (stages - 1) x block + A conversion

A pop moves one 72-byte tile through the load units; C moves in its L1 type (bfp16 through a
stream, bf16 and f32 through plain loads and stores); widen is one VMUL.f per accumulator for a bfp16
C. o_flat (what the software-pipelined block loop leaves exposed) is fitted on mlir-aie PR #3650's
published II of its config-1 Peano kernel and checked on its configs 2 and 3; epsilon is fitted on atb
Table 1, which measures the ATB paper's chess kernel, and prices only that structure. Config 1 and the
convert-once kernel convert their bf16 A tile per call, the convert-once kernel its B tile per
k-step (b_conversion_cycles), each tile at convert_tile_cycles; W4A16's convert-once kernel
dequantizes its B object into the tiles instead (model/dequant_cost.py, charged per k-step in perf).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ..facts import precision as prec
from ..facts.devices import Device, device
from ..facts.dtypes import BF16, dtype
from ..spec.request import Types
from ..spec.rules import block_loop as bl
from ..spec.rules import kernel_variant as kv
from ..spec.rules.block_loop import BlockLoop
from ..spec.rules.kernel_variant import KernelVariant
from .params import Params


@dataclass(frozen=True)
class KernelShape:
    """What fixes the instruction schedule besides m, k, n."""

    device: str
    target: str  # aie2 / aie2p
    types: Types  # A's, B's and C's types and C's in L1 (spec.Types: the config's own record)
    r: int
    s: int
    t: int
    emulate_bf16_with_bfp16: bool
    peak_macs: int  # the device's peak MACs/cycle for dtype_in (efficiency denominator)
    expansion: tuple[int, int] | None = None  # None: kernel_variant's choice per tile
    loops: str | None = None  # None: kernel_variant's choice per tile
    convert_once: bool = False  # bf16 converted to bfp16 tiles once (A per call, B per k-step)
    block_loop: BlockLoop | None = None  # a block kernel's loop; None: the template's (block_loop.TEMPLATE_LOOP)
    a_col_maj: bool = False  # the kernel transposes each A block on load (column-major A)
    c_transposed: bool = False  # it transposes each C block on load and store (column-major C below 32 bits)
    code_reserve: int = 0  # bytes of the matmul's code budget other code holds (W4A16's dequantization pass)
    compiler: str = "peano"  # the kernel's compiler: the loop structure it gets (kernel_variant.auto_loops) and what
    # it makes of aie_api's chess_manifest (pop_loads)

    @property
    def block(self) -> bool:
        """A bfp16 kernel: bfp16 B on the bfp16 datapath, or bf16 converted once."""
        return kv.block_kernel(self.types.precision, self.convert_once)

    @property
    def loop(self) -> BlockLoop:
        """The block kernel's loop (what the model prices it by)."""
        return self.block_loop or bl.TEMPLATE_LOOP

    @property
    def mmul(self) -> tuple[int, int, int]:
        return (self.r, self.s, self.t)

    @property
    def operands(self) -> str:
        """The mmul key of A x B (facts.devices.Device.operands): "i8xi4" for int4 weights, else A's type."""
        return self.dev.operands(self.types.dtype_in, self.types.dtype_b or None)

    @property
    def dev(self) -> Device:
        return device(self.device)


# bfp16 kernels (templates/mm_bfp16.cc.j2): 2 x 2 clusters of 8 x 8 tiles (16 x 16 C blocks)
BFP16_VARIANT = KernelVariant(2, 2, "k-pipelined")
BLOCK = 16  # rows and columns of C per block
TILE = 8  # rows and columns of one bfp16ebs8 tile (64 values, 72 bytes)
# A bfp16 C in L1 (atb's config 2) enters each call's accumulators through the vector unit: one
# VMUL.f by the block exponent per 8 x 8 accumulator, in the vmac slot, before the chain starts
# (the atb author's config-2 kernel as xchesscc scheduled it: 4 VMUL.f beside 32 VMAC.f per 16 x 16
# block, ChengyueWang/mlir-aie programming_examples/ml/block_datatypes/atb_mm/config2_128_64_128/
# trace/v130/bitcode_cleaned.lst @169364d9). A bf16 C (configs 1, 3) widens on the load unit
# instead (VLDA.CONV).
BFP16_C_WIDEN_CYCLES = 1.0


# An aie::transpose of one block permutes it in vector registers: assumed one shuffle per 64-byte
# register the block spans, issued in the vector slot beside the mmuls. UNCALIBRATED: the operation
# count of the transposes templates/mm.cc.j2 writes, never measured (no trace of a column-major A or
# C kernel is published). B column-major's transposes are not charged: the kernels the constants are
# calibrated on (Striking's, mlir-aie's whole_array) read B column-major already.
SHUFFLE_BYTES = 64


def transpose_shuffles(ks: KernelShape, er: int) -> tuple[float, float]:
    """Vector-slot shuffles of the kernel's layout transposes (uncalibrated, SHUFFLE_BYTES): per
    round of an er x et cluster for its er A blocks (column-major A), and per C block load or store
    (column-major C below 32 bits, kept in its own type between calls)."""
    a = er * -(-ks.r * ks.s * dtype(ks.types.dtype_in).bytes // SHUFFLE_BYTES) if ks.a_col_maj else 0
    c = -(-ks.r * ks.t * dtype(ks.types.acc or ks.types.dtype_out).bytes // SHUFFLE_BYTES) if ks.c_transposed else 0
    return float(a), float(c)


def convert_tile_cycles(ks: KernelShape, transposed: bool = False) -> float:
    """Issue cycles to turn one 8 x 8 bf16 block into a bfp16 tile (ISA arithmetic, unmeasured): its
    128 bytes over the load units, two vector-unit operations (the multiply by one and the
    conversion) and, for a block of A^T (column-major A), its transpose's shuffles (SHUFFLE_BYTES,
    as the scalar kernels' are priced), and the output stream's push and flush on the one store unit."""
    isa = ks.dev.isa
    loads = -(-2 * 64 // isa.vld_bytes) / isa.load_units
    shuffles = -(-TILE * TILE * dtype("bf16").bytes // SHUFFLE_BYTES) if transposed else 0
    return max(loads, 2.0 + shuffles, 2.0 / isa.store_units)


def b_conversion_cycles(ks: KernelShape, k: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Cycles a convert-once kernel spends per k-step turning its bf16 B tile into bfp16 (0 otherwise, and 0
    for W4A16's, whose dequantization pass writes the tiles: model/dequant_cost.py); its A tile's conversion
    is part of each call (a_conversion_cycles)."""
    k, n = np.asarray(k), np.asarray(n)
    if not ks.convert_once or ks.types.precision.b != BF16.name:
        return np.zeros(np.broadcast(k, n).shape)
    return np.asarray((k // TILE) * (n // TILE) * convert_tile_cycles(ks), dtype=np.float64)


def a_conversion_cycles(ks: KernelShape, t_ma: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Cycles one call of a block kernel spends turning its bf16 A tile (T_MA x k) into bfp16 tiles
    (config 1 and convert-once; 0 otherwise, and 0 for the ATB chess kernel, whose epsilon holds it)."""
    t_ma, k = np.asarray(t_ma), np.asarray(k)
    if not kv.converts_a_tile(ks.types.precision, ks.convert_once) or ks.loop.overlap == "atb-chess":
        return np.zeros(np.broadcast(t_ma, k).shape)
    return np.asarray((t_ma // TILE) * (k // TILE) * convert_tile_cycles(ks, ks.a_col_maj), dtype=np.float64)


def _c_tile_ops(ks: KernelShape, unit_bytes: int) -> float:
    """Load (or store) operations of one 8 x 8 tile of C in its L1 type: a bfp16 tile (72 bytes)
    through a stream, whose buffer packs consecutive tiles, the other types in whole vectors."""
    t = dtype(ks.types.acc or ks.types.dtype_out)
    size = TILE * TILE * t.elem_bytes
    return float(size / unit_bytes) if t.is_block else float(-(-int(size) // unit_bytes))


def block_counts(ks: KernelShape) -> dict[str, float]:
    """What one 16 x 16 C block of the block kernel issues, by slot: per k-step (vector-slot cycles of
    its macs, load operations of its pops), per block (C loads, C stores, the vector-slot work beside
    the macs: the VMUL.f widening a bfp16 C, or a column-major bf16 C's transposes on reload and
    store, priced as the scalar kernels' are: transpose_shuffles), and the accumulators' store
    operations each."""
    isa, lp = ks.dev.isa, ks.loop
    st_acc = _c_tile_ops(ks, isa.vst_bytes)
    widen = lp.c_tiles * BFP16_C_WIDEN_CYCLES if dtype(ks.types.acc or ks.types.dtype_out).is_block else 0.0
    widen += 2 * lp.c_tiles * transpose_shuffles(ks, 1)[1]  # each C tile's reload and store
    return {"step_vector": lp.macs * mmul_cycles_block(ks),
            "step_loads": (lp.a_pops + lp.b_pops) * pop_loads(ks),
            "c_loads": lp.c_tiles * _c_tile_ops(ks, isa.vld_bytes), "c_stores": lp.c_tiles * st_acc,
            "widen": widen, "st_acc": st_acc}


# A load FIFO fill reads one native 512-bit load (aie_api detail/aie2p/array_helpers.hpp fifo_buffer_stream:
# native_ld_bits = 512, fill = ::fifo_ld_fill) and so does each pop of a tile (::fifo_ld_pop advances the pointer)
FIFO_FILL_BYTES = 64


def pop_loads(ks: KernelShape) -> float:
    """Load operations (of vld_bytes each) one pop of a 72-byte bfp16 tile costs: its own load, plus the FIFO
    fills. aie_api's pop() fills `if (!chess_manifest(load_count_ != 0))` (detail/aie2p/array_helpers.hpp
    lines 224-235 @2b7eedf): where the compiler knows the count, once per 8 pops (576 / 512 bits: tile_bytes /
    FIFO_FILL_BYTES loads per pop in all); under Peano chess_manifest is __builtin_constant_p (llvm-aie
    clang/lib/Headers/aiebase_chess.h line 25), so a pop whose count is carried around a rolled loop
    (BlockLoop.pops_in_rolled_loop) fills every time: 2 loads per pop. ASSUMED for chess: its chess_manifest
    proves the count in a pipelined loop (unpublished). tests/backends/test_kernels.py counts both on the host."""
    vld = ks.dev.isa.vld_bytes
    if ks.compiler == "peano" and ks.loop.pops_in_rolled_loop:
        return 2 * FIFO_FILL_BYTES / vld  # the pop's load and a fill
    return dtype(prec.BFP16).unit_bytes / vld  # 9 loads of 512 bits per 8 pops


def mmul_cycles_block(ks: KernelShape) -> float:
    """Vector-unit issue cycles of one bfp16 8x8x8 mmul."""
    return max(1.0, ks.r * ks.s * ks.t / ks.dev.peak_macs["bfp16"])


def _per_template_loop(ks: KernelShape, k: np.ndarray, price: Callable[[KernelShape], np.ndarray]) -> np.ndarray:
    """A price under the loop templates/mm_bfp16.cc.j2 renders at each k (rules.block_loop.writes_out_k):
    the flat block loop while the k-steps are written out, the K loop inside it past that."""
    k = np.asarray(k, dtype=np.int64)
    flat = price(replace(ks, block_loop=bl.FLAT_LOOP))
    inner = price(replace(ks, block_loop=bl.K_LOOP_IN_BLOCK_LOOP))
    return np.asarray(np.where(bl.writes_out_k(k), flat, inner), dtype=np.float64)


def block_cycles(p: Params, ks: KernelShape, k: np.ndarray) -> np.ndarray:
    """Cycles of one 16 x 16 C block in the steady state of the kernel's block loop (its II for a
    software-pipelined loop: what mlir-aie reports per block), for a k-deep call."""
    if ks.block_loop is None:  # the template's loop, which depends on k
        return _per_template_loop(ks, k, lambda loop_ks: block_cycles(p, loop_ks, k))
    isa, lp = ks.dev.isa, ks.loop
    c = block_counts(ks)
    steps = np.asarray(k, dtype=np.int64) // TILE
    if lp.overlap == "atb-chess":
        return np.asarray(steps * c["step_vector"] + p.bfp16_overhead + c["widen"], dtype=np.float64)
    if lp.overlap == "flat":  # the busiest slot of one iteration, plus what the pipeliner leaves exposed
        busiest = np.maximum(np.maximum(steps * c["step_vector"] + c["widen"],
                                        (steps * c["step_loads"] + c["c_loads"]) / isa.load_units),
                             c["c_stores"] / isa.store_units)
        return np.asarray(busiest + p.flat_block_overhead, dtype=np.float64)
    t = cluster_terms(p, ks)
    step = max(c["step_vector"], c["step_loads"] / isa.load_units)
    return np.asarray(steps * step + t["serial_overhead"], dtype=np.float64)


def block_call_cycles(p: Params, ks: KernelShape, t_ma: np.ndarray, k: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Cycles of one T_MA x k x n call of a block kernel: its blocks, the pipeline fill and drain of
    each entry into the block loop, and the A conversion of config 1 and convert-once."""
    t_ma, k, n = (np.asarray(x, dtype=np.int64) for x in (t_ma, k, n))
    if ks.block_loop is None:  # the template's loop, which depends on k
        return _per_template_loop(ks, k, lambda loop_ks: block_call_cycles(p, loop_ks, t_ma, k, n))
    lp = ks.loop
    rows = t_ma // BLOCK
    blocks = rows * (n // BLOCK)
    per_block = block_cycles(p, ks, k)
    entries = rows if lp.entries == "row" else np.ones_like(rows)
    fill = entries * (lp.stages - 1) * per_block if lp.overlap == "flat" else 0.0
    return np.asarray(blocks * per_block + fill + a_conversion_cycles(ks, t_ma, k), dtype=np.float64)


def variant(ks: KernelShape, t_ma: int, k: int, n: int) -> KernelVariant:
    """The variant the kernel of one t_ma x k x n call uses (the config's, or the automatic one)."""
    if ks.block:
        return BFP16_VARIANT
    return kv.choose(ks.dev, ks.operands, ks.mmul, ks.emulate_bf16_with_bfp16, t_ma, k, n, ks.expansion, ks.loops,
                     ks.code_reserve, ks.compiler)


def mmul_cycles(p: Params, ks: KernelShape) -> float:
    """Vector-unit issue cycles per r x s x t mmul step."""
    macs = ks.r * ks.s * ks.t
    if ks.block:
        return mmul_cycles_block(ks)
    if ks.types.dtype_in == "bf16":
        if ks.emulate_bf16_with_bfp16:
            return p.bf16_via_bfp16_cycles * max(1.0, macs / ks.peak_macs)
        return max(1.0, macs / ks.dev.bf16_mmul_macs)
    return max(1.0, macs / ks.peak_macs)


def cluster_terms(p: Params, ks: KernelShape, expansion: tuple[int, int] = (2, 2)) -> dict[str, float]:
    """II, the serial overhead and its parts for one er x et chain cluster (independent of m, k, n
    and of the loop structure; `overhead` applies that)."""
    if ks.block:  # one 16 x 16 block without overlap (eq. 5, 9, 10); flat and chess loops: block_cycles
        isa, c = ks.dev.isa, block_counts(ks)
        ii, chains = mmul_cycles_block(ks), ks.loop.c_tiles
        prolog = isa.vld_latency + -(-(c["c_loads"] + c["step_loads"]) // isa.load_units) - 1
        stores = max((chains - 1) * ii + c["st_acc"], c["c_stores"] / isa.store_units)
        epilog = isa.vmac_to_store + isa.vst_latency - 1 + stores
        serial = max(0.0, prolog + epilog - chains * ii) + c["widen"]
        return {"ii": ii, "serial_overhead": serial, "residual": serial, "h": 1.0, "prolog": prolog,
                "epilog": epilog, "acc_sets": 1, "c_accesses": c["c_loads"] + c["c_stores"],
                "round_loads": c["step_loads"], "chains": chains}
    isa = ks.dev.isa
    er, et = expansion
    chains = er * et
    b_out = dtype(ks.types.acc).bytes  # C moves between L1 and the accumulators in its L1 type
    round_loads = kv.round_loads(ks.dev, ks.operands, ks.mmul, er, et)  # bf16 via bfp16 still loads bf16
    ld_acc = -(-ks.r * ks.t * b_out // isa.vld_bytes)
    st_acc = -(-ks.r * ks.t * b_out // isa.vst_bytes)
    c_loads, c_stores = chains * ld_acc, chains * st_acc
    a_shuffles, c_shuffles = transpose_shuffles(ks, er)  # column-major A and C (uncalibrated)
    c_transposes = 2 * chains * c_shuffles  # each chain's C block in and out, serial with its loads and stores
    ii = max(mmul_cycles(p, ks) + a_shuffles / chains, isa.acc_distance / chains,
             round_loads / (isa.load_units * chains))
    prolog = isa.vld_latency + -(-(c_loads + round_loads) // isa.load_units) - 1
    stores = max((chains - 1) * ii + st_acc, chains * st_acc / isa.store_units)
    epilog = isa.vmac_to_store + isa.vst_latency - 1 + stores
    serial = max(0.0, prolog + epilog - chains * ii) + c_transposes
    # c-overlap: the peeled last round issues each chain's reload of the next cluster's C beside the
    # stores (load units against the store unit). With a spare accumulator, chain q reloads into the
    # one chain q - 1's store freed, so the reloads end with the stores; without one, the last
    # chain's reload follows its own store and shares the load units with the next cluster's first
    # A/B round. The next cluster's prolog keeps only those loads and their latency.
    emulate = ks.emulate_bf16_with_bfp16  # its operand conversions hold an accumulator register too
    late = 0 if kv.spare_accumulators(ks.dev, ks.operands, ks.mmul, expansion, emulate) >= 1 else ld_acc
    prolog_ov = isa.vld_latency + -(-(late + round_loads) // isa.load_units) - 1
    epilog_ov = isa.vmac_to_store + isa.vst_latency - 1 + max(stores, -(-(c_loads - late) // isa.load_units))
    serial_ov = max(0.0, prolog_ov + epilog_ov - chains * ii) + c_transposes
    depth = kv.acc_sets(ks.dev, ks.operands, ks.mmul, expansion, emulate)
    return {"ii": ii, "serial_overhead": serial, "residual": min(p.bank_stall * (c_loads + c_stores), serial),
            "serial_overlapped": serial_ov,
            "h": {0: 1.0, 1: 1.0, 2: 0.5}.get(depth, 0.0), "prolog": prolog, "epilog": epilog,
            "acc_sets": depth, "c_accesses": c_loads + c_stores, "round_loads": round_loads, "chains": chains,
            "a_transposes": a_shuffles, "c_transposes": c_transposes}


def overhead(terms: dict[str, float], loops: str, col_clusters: np.ndarray | int) -> np.ndarray:
    """O per cluster under a loop structure (what the pipelined loop lets neighbours hide)."""
    serial, residual, h = terms["serial_overhead"], terms["residual"], terms["h"]
    if loops == "c-overlap":  # beta n_C stays: the C accesses still meet the A/B stream
        shape = np.shape(np.asarray(col_clusters))
        return np.full(shape, max(residual, terms.get("serial_overlapped", serial)), dtype=np.float64)
    if loops == "k-pipelined":
        share = np.ones_like(np.asarray(col_clusters), dtype=np.float64)
    elif loops == "k-flat":  # the block row's first cluster has no predecessor in the pipelined loop
        cc = np.maximum(np.asarray(col_clusters, dtype=np.float64), 1.0)
        share = (h * (cc - 1) + 1) / cc
    else:
        share = np.full_like(np.asarray(col_clusters), h, dtype=np.float64)
    return np.asarray(residual + (serial - residual) * share, dtype=np.float64)


def call_overhead(terms: dict[str, float], loops: str) -> float:
    """Cycles one call adds beyond its clusters' O: c-overlap loads the first cluster's C before its
    loops, with nothing to overlap (it pays the k-pipelined O once)."""
    if loops != "c-overlap":
        return 0.0
    return float(terms["serial_overhead"] - overhead(terms, loops, 1))


def _expansions(ks: KernelShape, m: np.ndarray, n: np.ndarray) -> tuple[tuple[tuple[int, int], ...], np.ndarray]:
    """The expansions a scalar kernel of `ks` may take and, per m x n call (m: its A rows), the index of the one it
    takes: the given one, else the first that splits the tile into whole clusters (kernel_variant.auto_expansion)."""
    if ks.expansion is not None:
        return (tuple(ks.expansion),), np.zeros((), np.int64)  # type: ignore[return-value]
    emulate = ks.emulate_bf16_with_bfp16
    return (kv.expansions(ks.dev, ks.operands, ks.mmul, emulate),
            kv.auto_expansion(ks.dev, ks.operands, ks.mmul, m, n, emulate))


def cluster_shape(ks: KernelShape, m: np.ndarray | int, n: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    """Per m x n call (m: its A rows), the (er, et) expansion of its kernel's clusters: a scalar kernel's as
    kernel_cycles prices it, a bfp16 kernel's 2 x 2."""
    if ks.block:
        return np.asarray(2), np.asarray(2)
    order, pick = _expansions(ks, np.asarray(m), np.asarray(n))
    table = np.asarray(order, dtype=np.int64)
    return table[pick, 0], table[pick, 1]


def kernel_cycles(p: Params, ks: KernelShape, m: np.ndarray, k: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Cycles of one m x k x n kernel call (what the paper's trace-based Table 1 measures); m is the
    call's A rows (T_MA). Each tile gets the variant kernel_variant gives it."""
    m, k, n = (np.asarray(x, dtype=np.int64) for x in (m, k, n))
    if ks.block:
        return block_call_cycles(p, ks, m, k, n)
    dev, mmul = ks.dev, ks.mmul
    order, pick = _expansions(ks, m, n)
    shape = np.broadcast(m, k, n).shape
    out = np.zeros(shape, dtype=np.float64)
    for i, (er, et) in enumerate(order):
        terms = cluster_terms(p, ks, (er, et))
        cc = n // (et * ks.t)
        clusters = (m // (er * ks.r)) * cc
        loops = (kv.auto_loops(dev, ks.operands, mmul, ks.emulate_bf16_with_bfp16, (er, et), k, n, ks.code_reserve,
                               ks.compiler)
                 if ks.loops is None else np.full(shape, kv.LOOPS.index(ks.loops)))
        pick_loops = np.broadcast_to(loops, shape)
        o = np.choose(pick_loops, [np.broadcast_to(overhead(terms, lp, cc), shape) for lp in kv.LOOPS])
        once = np.choose(pick_loops, [call_overhead(terms, lp) for lp in kv.LOOPS])
        cyc = clusters * (er * et * (k // ks.s) * terms["ii"] + o) + once
        out = np.where(pick == i, cyc, out)
    return out


def kernel_shape(dev: Device, dtype_in: str, dtype_out: str, mmul: tuple[int, int, int],
                 emulate: bool, dtype_b: str | None = None, acc: str | None = None,
                 expansion: tuple[int, int] | None = None, loops: str | None = None,
                 convert_once: bool = False, block_loop: BlockLoop | None = None, a_col_maj: bool = False,
                 c_transposed: bool = False, code_reserve: int = 0, compiler: str = "peano") -> KernelShape:
    """A kernel's shape from type names (a paper's kernel, a table's row): `shape` with spec.Types.of."""
    return shape(dev, Types.of(dtype_in, dtype_out, dtype_b, acc), mmul, emulate, expansion, loops, convert_once,
                 block_loop, a_col_maj, c_transposed, code_reserve, compiler)


def shape(dev: Device, types: Types, mmul: tuple[int, int, int], emulate: bool,
          expansion: tuple[int, int] | None = None, loops: str | None = None, convert_once: bool = False,
          block_loop: BlockLoop | None = None, a_col_maj: bool = False, c_transposed: bool = False,
          code_reserve: int = 0, compiler: str = "peano") -> KernelShape:
    """A kernel's shape from its types' record (a config's: GemmConfig.types)."""
    return KernelShape(dev.name, dev.aie_target, types, *mmul, emulate,
                       dev.peak_macs[dev.operands(types.dtype_in, types.dtype_b)], expansion, loops, convert_once,
                       block_loop, a_col_maj, c_transposed, code_reserve, compiler)
