"""Device descriptions: every hardware fact the generator relies on, in one place.

Sources (public; each fact below names its own where it is not one of these):
BD/channel/lock counts and field widths from aie-rt xaiemlgbl_params.h / xaie2pgbl_reginit.c
and mlir-aie AIETargetModel.h; memory sizes from AM020; clocks and array shapes from the
Striking-the-Balance paper (sec. 3.1, 5.2.1) and the xdna driver; mmul shapes from the AIE API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from .errors import ConfigError, opt

# ---- core stacks (mlir-aie 1.4.3) ----------------------------------------------------------------
# The stack sits at L1 offset 0, directly below the buffers with no clearance: a frame larger than
# stack_size silently overwrites the lowest buffer (mlir-aie 1.4.3 docs, programming_guide/
# core_data_memory). aiecc 1.4.3 measures each Peano-linked core's stack from its ELF's .stack_sizes
# (PRs #3613, #3680) and fails the build when stack_size is smaller; see backends/stack.py.
# What aiecc assumes for a core that states no stack_size (AIETargetModel::getDefaultCoreStackSize,
# "currently 1024 bytes" in the 1.4.3 docs); gemm_gen always states one.
MLIR_AIE_CORE_DEFAULT_STACK = 0x400
# What every mlir-aie matrix-multiplication design gives its cores (whole_array.py: `stack_size=0xD00`,
# "Peano needs more than the default 0x400"; every golden source in tests/golden/ that states a
# stack_size states 3328); our default for every design. Peano 22 (the pinned llvm-aie) grew frames
# that fit 1024 B to 1216 B (mlir-air PR #1980), so 0x400 is not safe for Peano builds.
MLIR_AIE_MM_STACK = 0xD00
# mlir-aie's ATB examples built with Peano (PR #3658 sized config1 at 0x1700 for a Peano build of
# the chess kernel; PR #3717 later shrank the sizes for zero-spill rewrites: which of the two the
# v1.4.3 tag carries is unconfirmed, 0x1700 is the safe one)
PEANO_ATB_STACK = 0x1700
# Of that, config1's converted_A array (32 x 64 bfp16: 2304 B) lives on mlir-aie's stack; our kernels
# keep their A_bfp16 copy in its own L1 buffer (counted with the buffers), so a Peano-built bfp16
# kernel gets the rest, 0xE00, or its chess stack where that is larger (config3's 0xF00). 0x1700
# itself overflows L1 at mlir-aie's own config1 and config2 tiles here (by 2304 B and 512 B).
ATB_CONFIG1_A_STACK_COPY = 0x900


@dataclass(frozen=True)
class CoreStatic:
    """One use of a core's L1 that aiecc makes besides the stack and the design's buffers (its
    name is its GemmConfig.l1_parts key), with what the pinned release says of it."""

    name: str
    nbytes: int
    confirmed: bool  # confirmed at the v1.4.3 tag, or our assumption
    source: str


# Per-core static L1 of aiecc 1.4.3. One place: GemmConfig.l1_parts (and so plan and the model), the
# tuner's L1 budget and the L1 allocator model (l1_banks, which keeps `kernel data` free at the top)
# all read it. Zero-byte entries say what is not there.
KERNEL_DATA = "kernel data"
CORE_STATIC: tuple[CoreStatic, ...] = (
    # the core's own .data/.rodata/.bss (crt1, the core body aiecc compiles, our kernel): Peano links
    # them into ONE contiguous run that the buffers leave, and aiecc 1.4.3 measures the linked total
    # as `measured_data_size` (1.4.3 docs, core_data_memory) -- backends/stack.py records it, and a build
    # whose measurement exceeds this reservation is refused. Our kernels define no static data: the tanh
    # table's two copies (1 KiB) are worker Buffers, counted as the L1 parts spec/rules/l1.TANH_PARTS, and
    # backends/kernel_source/render.render_kernel refuses a source that defines any
    # (backends/kernel_source/static_data.py). So this
    # is only an assumed margin for what no source of ours shows: crt1's and the core body's data, the
    # compiler's constant pools and jump tables (the runtime activation's switch).
    CoreStatic(KERNEL_DATA, 256, False, "assumed margin; aiecc 1.4.3 measures it (measured_data_size)"),
    # the dynamic ObjectFifo lowering's state (objects held, current object index per fifo port):
    # PR #1798 kept it in a per-core L1 state buffer, but at 1.4.3 AIEObjectFifoLowerCores.cpp
    # (release Doxygen, l.35-40 and 409-437) emits it as memref.alloca slots that mem2reg must turn
    # into loop-carried SSA values (the pass fails otherwise): no L1 buffer. What the register
    # allocator spills lands in the core's stack frame, which aiecc measures.
    CoreStatic("objectfifo state", 0, True, "AIEObjectFifoLowerCores.cpp at 1.4.3: bookkeeping promoted to SSA"),
)


class TileKind(str, Enum):
    SHIM = "shim"
    MEM = "mem"
    CORE = "core"


@dataclass(frozen=True)
class DmaSpec:
    """What the DMA of one tile kind can do (AIE2 and AIE2P share these numbers)."""

    kind: TileKind
    s2mm_channels: int
    mm2s_channels: int
    bds: int
    bd_banks: int  # memtile: even channels use BDs 0-23, odd ones 24-47
    dims: int  # address dimensions, the last one's extent implied by the length
    wrapped_dims: int  # how many of the inner dimensions have a wrap (size) field
    wrap_bits: int
    step_bits: int  # stride fields hold stride - 1
    length_bits: int  # buffer length field, in 32-bit words
    iteration_wrap_max: int  # the extra "iteration" dimension: 6-bit wrap - 1
    iteration_step_bits: int
    locks: int
    task_queue_depth: int  # tasks per channel (queued + running)
    max_repeat: int  # runs per pushed task (repeat_count field + 1)

    @property
    def max_wrap(self) -> int:
        return (1 << self.wrap_bits) - 1

    @property
    def max_stride(self) -> int:
        return 1 << self.step_bits

    @property
    def max_length(self) -> int:
        return (1 << self.length_bits) - 1

    @property
    def max_iteration_stride(self) -> int:
        return 1 << self.iteration_step_bits


SHIM_DMA = DmaSpec(TileKind.SHIM, 2, 2, 16, 1, 3, 2, 10, 20, 32, 64, 20, 16, 4, 256)
MEM_DMA = DmaSpec(TileKind.MEM, 6, 6, 48, 2, 4, 3, 10, 17, 17, 64, 17, 64, 4, 256)
CORE_DMA = DmaSpec(TileKind.CORE, 2, 2, 16, 1, 3, 2, 8, 13, 14, 64, 13, 16, 4, 256)

# mlir-aie 1.4.3's DMABDOp::verify checks the dims of every static (memtile and core) BD in elements
# of the buffer's type against the tile kind's own field widths (AIEDialect.cpp 3326-3354 with
# AIETargetModel.h 788-803 at the tag, read in its doxygen render): sizes up to 2^wrap_bits - 1
# (core 255, memtile 1023), strides up to 2^step_bits (core 2^13, memtile 2^17) and within the
# buffer (tap.Tap.check_static_bd). The tuner searches tile extents up to this bound: larger ones
# fit no L1 anyway.
TILE_EXTENT_SEARCH_MAX = 512

MmulShape = tuple[int, int, int]  # r x s x t of aie::mmul


MIXED = "x"  # joins A's and B's type in the key of a mixed-type mmul (no type name holds it)


def operand_key(dtype_in: str, dtype_b: str | None = None) -> str:
    """The key of mmul_shapes and peak_macs for A x B: A's type, or "AxB" when B's type differs
    (int8 x int4: "i8xi4")."""
    return dtype_in if dtype_b in (None, dtype_in) else f"{dtype_in}{MIXED}{dtype_b}"


@dataclass(frozen=True)
class ShimRegisters:
    """Where a shim NOC tile's DMA registers sit and how their fields are laid out: what the host
    encoder of the instruction stream (backends/txn.py) writes. The field widths are SHIM_DMA's.

    Sources: aie-rt driver/src/global/xaiemlgbl_params.h (AIE-ML, npu1) and xaie2pgbl_params.h
    (AIE2P, npu2), whose NOC_MODULE registers agree: DMA_BD<n>_0..7 at 0x1D000 + 0x20 n (BUFFER_LENGTH
    32 bits; BASE_ADDRESS_LOW in word 1; D0/D1_WRAP 10 bits at 20 and D0/D1/D2_STEPSIZE 20 bits at 0;
    BURST_LENGTH at 30; AXCACHE at 24; ITERATION_WRAP 6 bits at 20, ITERATION_STEPSIZE 20 bits;
    VALID_BD at 25), DMA_S2MM_0_CTRL 0x1D200, S2MM_1_CTRL 0x1D208, MM2S_0_CTRL 0x1D210, MM2S_1_CTRL
    0x1D218, each TASK_QUEUE 4 bytes on (START_BD_ID 4 bits, REPEAT_COUNT 8 bits at 16,
    ENABLE_TOKEN_ISSUE at 31), CONTROLLER_ID at bits 8..15 of CTRL. mlir-aie's AIETargetModel.cpp
    computes the same for both devices (AIE2TargetModel::getDmaBdAddress, getDmaBdAddressOffset,
    getDmaControlAddress; BaseNPU1/BaseNPU2TargetModel override none of them), with the absolute
    address col << 25 | row << 20 | offset (getColumnShift, getRowShift) and AXCache 2
    (getDefaultAxCache, "enable upsizing in NoC").

    The controller id: aiecc's resource pipeline runs aie-assign-tile-controller-ids (tools/aiecc/aiecc.cpp
    runResourceAllocationPipeline), whose fixed per-row map gives every shim tile of a 6-row device
    id 15 (test/dialect/AIE/assign_controller_ids.mlir: "aie.tile(0, 0) {controller_id =
    #aie.packet_info<pkt_type = 0, pkt_id = 15>}"; mlir-aie PR #1748 made the ids fixed, PR #3035
    moved the map into AIETargetModel). AIEDmaToNpu.cpp then writes, before every queue push that
    issues a completion token, a maskwrite32 of (controller id << 8) under mask 0x1F00 on the
    channel's CTRL register (a 5-bit packet id inside the 8-bit field).
    """

    col_shift: int = 25
    row_shift: int = 20
    col_bits: int = 7  # 32-bit absolute address: 7 column bits above 5 row bits above a 20-bit offset
    row_bits: int = 5
    bd_base: int = 0x1D000
    bd_bytes: int = 0x20
    bd_address_offset: int = 4  # the BD word the address patch writes (BASE_ADDRESS_LOW)
    ctrl_base: int = 0x1D200  # DMA_S2MM_0_CTRL
    ctrl_channel_stride: int = 0x8
    ctrl_mm2s_offset: int = 0x10
    task_queue_offset: int = 0x4
    controller_id: int = 15
    controller_id_shift: int = 8
    controller_id_mask: int = 0x1F00
    wrap_shift: int = 20  # D0_WRAP, D1_WRAP, ITERATION_WRAP
    burst_shift: int = 30
    burst_bits: int = 2
    axcache_shift: int = 24
    axcache: int = 2
    valid_bd_shift: int = 25
    queue_repeat_shift: int = 16
    queue_token_shift: int = 31

    def ctrl(self, mm2s: bool, channel: int) -> int:
        """The tile-local offset of a shim DMA channel's CTRL register (its task queue is 4 on)."""
        return self.ctrl_base + channel * self.ctrl_channel_stride + (self.ctrl_mm2s_offset if mm2s else 0)


SHIM_REGISTERS = ShimRegisters()


@dataclass(frozen=True)
class CoreLocks:
    """A compute tile's locks as a runtime barrier uses them (IRON WorkerRuntimeBarrier: one lock per worker).

    Sources (stored 2026 mlir-aie versions; the tag's own files are not readable here): AIETargetModel.cpp
    AIE2TargetModel::getLocalLockAddress, the value register of lock `id` at 0x1F000 + 0x10 id on a core tile
    (npu1 and npu2 alike); AIEX AIELowerSetLock.cpp SetLockToWrite32Pattern, which makes a barrier's set
    (aiex.set_lock) a write32 of the value there, column and row as any write32's; AIETargetModel.h
    AIE2TargetModel getNumLocks 16 on a core tile, getMaxLockValue 0x3F (SetLockOp::verify refuses more).

    Assumed: the barrier's lock gets id 0. IRON 1.4.3 makes it without an id (Worker.resolve: lock(my_tile)),
    aiecc's aie-assign-lock-ids runs before aie-objectFifo-stateful-transform makes the fifos' locks, and gives
    the first free id of the tile. A wrong id shows as the host encoder's streams differing from aiecc's
    (backends/npu_call.py trusts the encoder only after they match)."""

    base: int = 0x1F000
    stride: int = 0x10
    value_max: int = 0x3F
    barrier_id: int = 0

    def address(self, lock_id: int) -> int:
        """The tile-local offset of lock `lock_id`'s value register."""
        return self.base + self.stride * lock_id


CORE_LOCKS = CoreLocks()


@dataclass(frozen=True)
class CoreIsa:
    """One core generation's vector unit, as the kernels' variant rule and the model see it."""

    vld_bytes: int  # one vector load
    vst_bytes: int  # one vector store
    load_units: int
    store_units: int
    vld_latency: int  # cycles from a vector load to its register
    vst_latency: int
    vmac_to_store: int  # cycles from a vmac to the first store of its accumulator
    acc_distance: int  # cycles between dependent vmacs on one accumulator (atb P)
    acc_file_bits: int  # the accumulator register file
    vector_file_bits: int  # the vector (operand) register file
    program_bytes: int  # program memory
    instruction_bytes: int  # the widest VLIW instruction (one cycle of a fully used bundle)


# Sources: xdna_isa_microbenchmarks.md (XDNA1 and XDNA2 ISA tables, listing 2, the AIE2P scheduling
# definitions), atb sec. 4 / 4.3, AM020 "AIE-ML" (2 load + 1 store units of 256 bits; 16 KB program
# memory of 1024 128-bit instructions), UG1603 "Accumulator Registers" (AIE-ML: 9 x 1024-bit cm) and
# "Vector Registers" (24 x 256-bit w on AIE-ML and AIE-ML v2), llvm-aie AIE2PRegisterInfo.td (aie2p:
# 5 x 2048-bit dm accumulators, 24 x 256-bit w vectors), AM027 / UG1603 2025.1 (16 KB program
# memory on the newer cores too).
CORE_ISA: dict[str, CoreIsa] = {
    "aie2": CoreIsa(vld_bytes=32, vst_bytes=32, load_units=2, store_units=1, vld_latency=7, vst_latency=2,
                    vmac_to_store=6, acc_distance=4, acc_file_bits=9 * 1024, vector_file_bits=24 * 256,
                    program_bytes=16 * 1024, instruction_bytes=16),
    # P = 3: a 6-cycle vmac reads its accumulator in its fourth cycle (atb sec. 4.3)
    "aie2p": CoreIsa(vld_bytes=64, vst_bytes=64, load_units=2, store_units=1, vld_latency=7, vst_latency=2,
                     vmac_to_store=6, acc_distance=3, acc_file_bits=5 * 2048, vector_file_bits=24 * 256,
                     program_bytes=16 * 1024, instruction_bytes=16),
}


@dataclass(frozen=True)
class Device:
    """One NPU target as the generator maps it (whole array, 4 core rows)."""

    name: str  # our name and mlir-aie's aie.device name
    aliases: tuple[str, ...]
    marketing: str
    aie_target: str  # Peano target / kernel directory (aie2, aie2p)
    columns: int  # columns used, each with a shim NOC tile and a memtile
    # column counts a design may use (mlir-aie whole_array's --n-aie-cols choices), each with the
    # aie.device it is built for: npu1 has 1- and 2-column partitions, npu2 builds on the whole array
    column_devices: dict[int, str]
    core_rows: int
    clock_ghz: float  # array clock at the maximum performance level
    l1_bytes: int
    memtile_bytes: int
    default_stack_bytes: int  # every design's stack unless its kernel needs more (rules.defaults.default_stack)
    # r x s x t shapes our kernels may use, the first being the default, per input type
    mmul_shapes: dict[str, tuple[MmulShape, ...]]
    # the same for an A x B of two types (operand_key "AxB"; int8 x int4 weights)
    mixed_mmul_shapes: dict[str, tuple[MmulShape, ...]]
    # where each mixed key's peak_macs comes from (a source, or UNCALIBRATED and why): predict says it
    mixed_rate_sources: dict[str, str]
    # with AIE_API_EMULATE_BFLOAT16_MMUL_WITH_BFP16 (npu2 only; whole_array.py gives those kernels
    # 0xD00, now every design's default)
    bf16_emulation_shape: MmulShape | None
    # integer shapes whose aie::mmul keeps a 64-bit accumulator whatever the tag (the rest of the
    # integer shapes use acc32: aie_api 2026.1 detail/<arch>/mmul_16_16.hpp, mmul_8_8.hpp)
    acc64_shapes: dict[str, tuple[MmulShape, ...]]
    # bf16 GEMMs use the bfp16 datapath unless told otherwise: both papers' XDNA2 bf16 results do
    # (Striking sec. 5.1, ATB), and plain bf16 mmul is emulated with elementwise macs on aie2p
    bf16_emulation_default: bool
    # bfp16ebs8 operands (aie2p isSupportedBlockFormat): the mac_8x8_8x8T shape, or None without a
    # bfp16 datapath; and the stacks of chess-built bfp16 kernels, by what the kernel does beyond
    # bfp16 macs, after mlir-aie's ATB configs: "" (config2: 0xD00), "convert_a" (config1, which
    # mlir-aie sized 0x1700 for a Peano build, PRs #3658/#3717; ours keeps its 2304-byte A copy in
    # its own buffer: 0xE00), "convert_c" (config3: 0xF00); "peano": the least of any of them built
    # with Peano (mlir-aie's Peano config1 stack less its A copy)
    bfp16_mmul_shape: MmulShape | None
    bfp16_stack_bytes: dict[str, int]
    # peak MACs/cycle of one core per input type (what mac instructions can issue)
    peak_macs: dict[str, int]
    # MACs per vector instruction of a plain (not bfp16-emulated) bf16 mmul: npu1's native bf16
    # rate; npu2 has no native bf16 mmul and aie_api issues 32-lane elementwise macs (mac_elem_32,
    # aie2p/mmul_bf16_bf16.hpp; UNCONFIRMED rate, a third-party single-core hint of ~25 MACs/cycle agrees)
    bf16_mmul_macs: int
    out_types: dict[str, tuple[str, ...]]  # accepted dtype_out per dtype_in
    # the instruction stream's device generation (TXN header; mlir-aie AIETargetNPU.cpp txnDeviceGen)
    # and the shim DMA's AXI burst sizes, by their 2-bit encoding (AIETargetModel.cpp
    # getShimBurstEncodingsAndLengths); a BD gets the largest unless told otherwise
    txn_generation: int
    shim_burst_bytes: tuple[int, ...]
    # a 4-way lookup table (aie::lut<4>, load_lut_2x_*) stores its entries in groups of this many bits, each
    # group twice in a row, and the whole table again in the other bank: 128 on AIE2 (UG1603 2024.1,
    # "Lookup Tables and Linear Approximation": "128 bits repetition"; mlir-aie aie_runtime_lib/AIE2/
    # lut_based_ops.cpp tanh_lut_ab), 256 on AIE2P (mlir-aie PR #2189, ce9af0f1: "On AIE2P ... the look-up
    # table requires 256-bit replication instead of 128-bit", aie_runtime_lib/AIE2P/lut_based_ops.cpp)
    lut_copy_bits: int
    shim_registers: ShimRegisters = SHIM_REGISTERS  # the same on npu1 and npu2 (see ShimRegisters)
    core_locks: CoreLocks = CORE_LOCKS  # the same on npu1 and npu2 (see CoreLocks)
    dma: dict[TileKind, DmaSpec] = field(
        default_factory=lambda: {TileKind.SHIM: SHIM_DMA, TileKind.MEM: MEM_DMA, TileKind.CORE: CORE_DMA}
    )
    core_static: tuple[CoreStatic, ...] = CORE_STATIC

    @property
    def core_static_bytes(self) -> int:
        """L1 bytes of each core that aiecc uses besides the stack and the design's buffers."""
        return sum(p.nbytes for p in self.core_static)

    def operands(self, dtype_in: str, dtype_b: str | None = None) -> str:
        """The key of mmul_shapes / peak_macs for A x B: the mixed one where this device has a mixed
        mmul for the pair (int8 x int4), else A's type (bf16 x bfp16 B runs the bfp16 datapath)."""
        key = operand_key(dtype_in, dtype_b)
        return key if key in self.mixed_mmul_shapes else dtype_in

    def shapes(self, key: str) -> tuple[MmulShape, ...]:
        """The mmul shapes of an operands key (Device.operands), the default first; () for none."""
        return self.mmul_shapes.get(key) or self.mixed_mmul_shapes.get(key, ())

    @property
    def input_types(self) -> tuple[str, ...]:
        """The A types with a matmul kernel."""
        return tuple(self.mmul_shapes)

    @property
    def first_core_row(self) -> int:
        return 2

    def target(self, cols: int) -> tuple[str, int]:
        """(mlir-aie device name, its columns) that a design on `cols` columns is built for; the
        target's columns are the memtiles its buffers may spill into. A grid of one virtual column per core
        (spec/rules/decode_split.py) is built for the whole device."""
        name = self.column_devices[self.columns if cols == self.columns * self.core_rows else cols]
        return name, int(name.split("_")[1].removesuffix("col")) if "_" in name else self.columns

    def tile_kind(self, row: int) -> TileKind:
        if row == 0:
            return TileKind.SHIM
        if row == 1:
            return TileKind.MEM
        return TileKind.CORE

    def mmul_shape(self, dtype_in: str, emulate_bf16_with_bfp16: bool = False,
                   dtype_b: str | None = None) -> MmulShape:
        key = self.operands(dtype_in, dtype_b)
        if emulate_bf16_with_bfp16:
            if dtype_in != "bf16" or self.bf16_emulation_shape is None:
                raise ConfigError(
                    f"bf16-via-bfp16 emulation is an npu2 bf16 feature, not {self.name} {dtype_in}",
                    f"drop {opt('emulate_bf16_with_bfp16')}",
                )
            return self.bf16_emulation_shape
        try:
            return self.shapes(key)[0]
        except IndexError:
            raise ConfigError(
                f"{self.name} has no matmul kernel for dtype_in {key}",
                f"use {opt('dtype_in', *self.input_types)}",
            ) from None

    def acc_bits(self, dtype_in: str, mmul: MmulShape) -> int:
        """Bits of one accumulator lane of the aie::mmul for these inputs (floats: fp32)."""
        if dtype_in in ("bf16", "bfp16"):
            return 32
        return 64 if tuple(mmul) in self.acc64_shapes.get(dtype_in, ()) else 32

    @property
    def isa(self) -> CoreIsa:
        """The core's vector unit (CORE_ISA of its aie_target)."""
        return CORE_ISA[self.aie_target]

    def peak_tops(self, dtype_in: str) -> float:
        """Array peak in TOPS (2 ops per MAC) at the maximum clock."""
        cores = self.columns * self.core_rows
        return 2 * self.peak_macs[dtype_in] * cores * self.clock_ghz / 1000


_OUT_TYPES = {"bf16": ("bf16", "f32"), "i8": ("i8", "i16", "i32"), "i16": ("i16", "i32")}

NPU1 = Device(
    name="npu1",
    aliases=("npu", "phoenix", "xdna", "hawkpoint"),
    marketing="XDNA (Phoenix / Hawk Point)",
    aie_target="aie2",
    columns=4,  # the 5th column has no shim NOC tile; mlir-aie's npu1 is 4 columns
    column_devices={1: "npu1_1col", 2: "npu1_2col", 4: "npu1"},
    core_rows=4,
    clock_ghz=1.0,
    l1_bytes=64 * 1024,
    memtile_bytes=512 * 1024,
    default_stack_bytes=MLIR_AIE_MM_STACK,
    # dense-B shapes of aie_api 2026.1 (bf16 4x16x8 exists for a sparse B only)
    mmul_shapes={
        "bf16": ((4, 8, 4), (8, 8, 4)),
        "i8": ((4, 8, 8), (2, 8, 8), (8, 8, 8), (4, 16, 8)),
        "i16": ((4, 4, 4), (2, 4, 8), (4, 2, 8)),
    },
    # int8 x int4 (aie_api detail/aie2/mmul_8_4.hpp @306ac2c1: 4x16x8 one mac_4x16_16x8_conf;
    # 8x16x8 two sharing B; 4x32x8 two after interleave_unzip of A), acc32 only
    mixed_mmul_shapes={"i8xi4": ((4, 16, 8), (8, 16, 8), (4, 32, 8))},
    mixed_rate_sources={"i8xi4": "512 MACs/cycle, AM020's AIE-ML table (INT4 1024 operations/tile, INT8 512)"},
    bf16_emulation_shape=None,
    acc64_shapes={"i16": ((4, 4, 4), (2, 4, 8))},
    bf16_emulation_default=False,
    bfp16_mmul_shape=None,
    bfp16_stack_bytes={},
    # i8xi4: AM020 (AIE-ML) summary table, "INT4 operations/tile 1024" against INT8's 512 (ops = 2 per
    # MAC, int4 x int8), i.e. one 4x16x8 mac (512 MACs) per cycle
    peak_macs={"bf16": 128, "i8": 256, "i16": 64, "i8xi4": 512},
    bf16_mmul_macs=128,
    out_types=_OUT_TYPES,
    txn_generation=3,
    shim_burst_bytes=(64, 128, 256),
    lut_copy_bits=128,
)

NPU2 = Device(
    name="npu2",
    aliases=("strix", "krackan", "xdna2", "npu4", "npu5", "npu6"),
    marketing="XDNA2 (Strix / Strix Halo / Krackan)",
    aie_target="aie2p",
    columns=8,
    column_devices={1: "npu2", 2: "npu2", 4: "npu2", 8: "npu2"},
    core_rows=4,
    clock_ghz=1.8,
    l1_bytes=64 * 1024,
    memtile_bytes=512 * 1024,
    default_stack_bytes=MLIR_AIE_MM_STACK,
    mmul_shapes={
        "bf16": ((4, 8, 8), (8, 8, 4), (4, 8, 4), (8, 1, 8)),
        "i8": ((8, 8, 8), (4, 8, 8)),
        "i16": ((4, 4, 8), (8, 1, 8)),  # aie_api detail/aie2p/mmul_16_16.hpp (4x8x8: sparse B only)
    },
    # int8 x int4: one shape, 4x16x16 (aie_api detail/aie2p/mmul_8_4.hpp @4e950f7d, one
    # mac_4x16_16x16_conf on __AIE_ARCH__ 21), acc32 only
    mixed_mmul_shapes={"i8xi4": ((4, 16, 16),)},
    mixed_rate_sources={"i8xi4": "UNCALIBRATED: 4x16x16 is 1024 MACs per intrinsic, its issue rate is unpublished "
                                 "(amd/IRON PR #182 measured 1.32x int8); priced at int8's 512 MACs/cycle"},
    bf16_emulation_shape=(8, 8, 8),
    acc64_shapes={"i16": ((4, 4, 8),)},
    bf16_emulation_default=True,
    bfp16_mmul_shape=(8, 8, 8),
    bfp16_stack_bytes={"": MLIR_AIE_MM_STACK, "convert_a": 0xE00, "convert_c": 0xF00,
                       "peano": PEANO_ATB_STACK - ATB_CONFIG1_A_STACK_COPY},
    # bf16 through the bfp16 datapath issues 512 MACs/cycle; plain bf16 mmul is emulated
    # with elementwise macs (UNCONFIRMED rate), so 512 is the bf16 ceiling, not a promise.
    # bfp16: 512 MACs/cycle (atb sec. 2.4: 1024 flops/cycle per core).
    # i8xi4: UNCALIBRATED. One 4x16x16 intrinsic is 1024 MACs (aie_api), but its issue rate is
    # unpublished and amd/IRON PR #182 measured 1.32x int8, not 2x (docs/int4_decode.md): the int8 rate
    # is the floor we are sure of, so the peak (and the model) keeps it until a trace settles it.
    peak_macs={"bf16": 512, "i8": 512, "i16": 128, "bfp16": 512, "i8xi4": 512},
    bf16_mmul_macs=32,
    out_types=_OUT_TYPES,
    txn_generation=4,
    shim_burst_bytes=(64, 128, 256, 512),
    lut_copy_bits=256,
)

DEVICES: dict[str, Device] = {d.name: d for d in (NPU1, NPU2)}


def device(name: str | Device) -> Device:
    """Look a device up by name or alias (npu, npu1, npu2, strix, ...)."""
    if isinstance(name, Device):
        return name
    key = name.lower()
    for dev in DEVICES.values():
        if key == dev.name or key in dev.aliases:
            return dev
    raise ConfigError(f"unknown device {name!r}",
                      f"use {opt('device', 'npu1')} (Phoenix) or {opt('device', 'npu2')} (Strix/Krackan)")
