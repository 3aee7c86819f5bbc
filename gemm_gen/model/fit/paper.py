"""Published numbers the model is calibrated on and compared with (the two papers named below).

Striking = "Striking the Balance: GEMM Performance Optimization Across Generations of Ryzen AI NPUs";
atb = "Can Asymmetric Tile Buffering Be Beneficial?". Values the papers withhold are None: we
predict those rows but never compare them. Problem sizes the text leaves open ("~4K") are our
choice, stated in `note`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...spec.rules.block_loop import BlockLoop

# The papers' scalar kernels are their own (Striking sec. 5.1: the AIE API, xchesscc, "software
# pipelining and loop unrolling/flattening"); their accumulator expansion is unpublished. The model
# reads them as 2 x 2 clusters (the AIE API documentation's kernel) with the cluster and K loops
# flattened (jk-flat), and the calibration fits its constants on that reading.
PAPER_EXPANSION = (2, 2)
PAPER_LOOPS = "jk-flat"
# ... and their L1 allocation as mlir-aie's matrix_multiplication examples build (aiecc
# --alloc-scheme=basic-sequential since mlir-aie PR #1993), whose bank sharing the model charges
PAPER_L1_ALLOC = "basic-sequential"


def block_row(row: KernelRow | ArrayRow) -> bool:
    """A row on the bfp16 datapath (bfp16 B), whose kernel is ours (one variant) rather than a guess."""
    return "bfp16" in (row.dtype_in, getattr(row, "dtype_b", None))


@dataclass(frozen=True)
class KernelRow:
    """A single-core kernel throughput (Striking Tables 1-3, trace-measured MACs/cycle)."""

    source: str
    device: str
    dtype_in: str
    dtype_out: str
    m: int
    k: int
    n: int
    macs_per_cycle: float | None
    emulate: bool = False


@dataclass(frozen=True)
class ArrayRow:
    """An end-to-end whole-array result (wall clock, B column-major unless stated)."""

    source: str
    device: str
    dtype_in: str
    dtype_out: str
    m: int
    k: int
    n: int
    k_mt: int
    M: int
    K: int
    N: int
    tops: float | None
    b_col_maj: bool = True
    emulate: bool = False
    depth_c_l1: int = 1
    queue_groups: int = 4
    stack_bytes: int = 1024  # the paper builds with xchesscc and reserves 1 KB of L1 for the stack (eq. 5)
    note: str = ""
    dtype_b: str | None = None  # mixed precision (bfp16 designs of atb)
    acc: str | None = None
    rho: int = 1
    machine: str | None = None  # the memory profile it ran on (None: machine_of's reading of the source)
    block_loop: BlockLoop | None = None  # the measured bfp16 kernel's loop (None: our template's)


# The machines the sources measured on (model/calibration.json: each device's DRAM profiles)
STRIKING_MACHINES = {"npu1": "phoenix-minipc", "npu2": "krackan-minipc"}  # Striking sec. 5: two mini PCs


def machine_of(row: ArrayRow) -> str:
    """The memory profile of a row's machine: Striking's two mini PCs, else atb's and mlir-aie's Strix."""
    if row.machine:
        return row.machine
    if row.source.startswith("Striking"):
        return STRIKING_MACHINES[row.device]
    return "strix-laptop" if row.device == "npu2" else STRIKING_MACHINES["npu1"]


# k_mt of Tables 2 and 3 (Striking sec. 5.2.2)
K_MT = {("npu1", "i8", "i8"): 448, ("npu1", "i8", "i16"): 448, ("npu1", "i8", "i32"): 352,
        ("npu1", "bf16", "bf16"): 224, ("npu2", "i8", "i8"): 432, ("npu2", "i8", "i16"): 432,
        ("npu2", "i8", "i32"): 384, ("npu2", "bf16", "bf16"): 384}

STRIKING_T1 = [
    KernelRow("Striking T1", "npu1", "i8", "i8", 64, 232, 64, 233.0),
    KernelRow("Striking T1", "npu1", "i8", "i16", 64, 216, 64, 217.6),
    KernelRow("Striking T1", "npu1", "i8", "i32", 48, 280, 48, 192.0),
    KernelRow("Striking T1", "npu1", "bf16", "bf16", 64, 104, 64, 112.6),
    KernelRow("Striking T1", "npu2", "i8", "i8", 64, 232, 64, 450.6),
    KernelRow("Striking T1", "npu2", "i8", "i16", 64, 216, 64, 419.8),
    KernelRow("Striking T1", "npu2", "i8", "i32", 48, 280, 48, 384.0),
    KernelRow("Striking T1", "npu2", "bf16", "bf16", 48, 152, 48, 158.1, emulate=True),  # sec. 5.1: via bfp16
]


def k_mt_for(stated: int, k: int, K: int) -> int:
    """The paper states one k_mt per data type; a row whose k does not divide it gets the multiple
    of k that divides K and is closest to the stated value (our assumption, noted in the table)."""
    if stated % k == 0 and K % stated == 0:
        return stated
    options = [j * k for j in range(1, K // k + 1) if K % (j * k) == 0]
    return min(options, key=lambda v: (abs(v - stated), v))


def _t2(dt_in: str, dt_out: str, m: int, k: int, n: int, macs: float, M: int, K: int, N: int,
        tops: float) -> tuple[KernelRow, ArrayRow]:
    k_mt = k_mt_for(K_MT[("npu1", dt_in, dt_out)], k, K)
    return (KernelRow("Striking T2", "npu1", dt_in, dt_out, m, k, n, macs),
            ArrayRow("Striking T2", "npu1", dt_in, dt_out, m, k, n, k_mt, M, K, N, tops))


def _t3(dt_in: str, dt_out: str, m: int, k: int, n: int, M: int, K: int, N: int) -> tuple[KernelRow, ArrayRow]:
    k_mt = k_mt_for(K_MT[("npu2", dt_in, dt_out)], k, K)
    emu = dt_in == "bf16"
    return (KernelRow("Striking T3", "npu2", dt_in, dt_out, m, k, n, None, emulate=emu),
            ArrayRow("Striking T3", "npu2", dt_in, dt_out, m, k, n, k_mt, M, K, N, None, emulate=emu,
                     note="withheld in the paper: predicted only"))


_T2 = [
    _t2("i8", "i8", 112, 112, 112, 212.5, 4032, 4032, 4032, 6.52),
    _t2("i8", "i8", 112, 104, 128, 207.4, 4032, 4160, 4096, 6.48),
    _t2("i8", "i16", 96, 112, 96, 192.0, 4224, 4032, 4224, 5.85),
    _t2("i8", "i16", 80, 104, 128, 186.9, 4160, 4160, 4096, 5.75),
    _t2("i8", "i32", 80, 88, 96, 146.0, 4160, 4224, 4224, 4.42),
    _t2("i8", "i32", 64, 80, 128, 133.1, 4096, 4160, 4096, 4.09),
    _t2("bf16", "bf16", 96, 56, 96, 99.8, 4224, 4032, 4224, 3.12),
    _t2("bf16", "bf16", 96, 48, 112, 97.3, 4224, 4032, 4032, 3.02),
]
_T3 = [
    _t3("i8", "i8", 144, 72, 144, 4032, 4320, 4608),
    _t3("i8", "i8", 160, 64, 144, 4480, 4224, 4608),
    _t3("i8", "i16", 128, 72, 112, 4096, 4320, 4480),
    _t3("i8", "i16", 160, 64, 96, 4480, 4224, 4608),
    _t3("i8", "i32", 96, 64, 96, 4224, 4224, 4608),
    _t3("i8", "i32", 128, 56, 80, 4096, 4032, 4480),
    _t3("bf16", "bf16", 112, 48, 96, 4032, 4224, 4608),
    _t3("bf16", "bf16", 160, 40, 80, 4480, 4160, 4480),
]
STRIKING_T2_KERNELS = [k for k, _ in _T2]
STRIKING_T2 = [a for _, a in _T2]
STRIKING_T3_KERNELS = [k for k, _ in _T3]
STRIKING_T3 = [a for _, a in _T3]

# ---- figures in the text ---------------------------------------------------------------------
# Fig. 6a: XDNA bf16 96x56x96 at ~4K (we use Table 2's 4224 x 4032 x 4224), k_mt = k_ct = 56.
FIG6A_KMT56 = ArrayRow("Striking fig. 6a", "npu1", "bf16", "bf16", 96, 56, 96, 56, 4224, 4032, 4224, 1.27,
                       note="k_mt = k_ct = 56 (text)")
FIG6A_KMTS = (56, 112, 168, 224, 280, 336, 392, 448, 504, 560)  # multiples of k_ct up to 560 (text: 96% L2)
# Fig. 6b: XDNA2 int8-int16 128x72x112, k_mt chosen 432 (values withheld).
FIG6B_KMTS = (72, 144, 216, 288, 360, 432, 504, 576, 648, 720)
# Sec. 5.2.1: the Table 1 int8-int16 kernel at ~4K on XDNA is memory bound at 4.03 TOPS.
# The text gives neither the size nor k_mt: we take 4096 x 4320 x 4096 with k_mt = 432 = 2 k_ct.
SEC521_T1_KERNEL = ArrayRow("Striking 5.2.1", "npu1", "i8", "i16", 64, 216, 64, 432, 4096, 4320, 4096, 4.03,
                            note="size and k_mt assumed (text: ~4K)")
# Sec. 5.2.1: micro-benchmarked effective DRAM bandwidth of GEMM-like transfers.
MICROBENCH_GBPS = {"npu1": 15.0, "npu2": 50.0}
# XRT's df-bw validate test (Xilinx/VTD sequences/df_bw.txt, src/df_bw.cpp): 4 columns, each with
# MM2S 0-1 and S2MM 0-1 busy at once (16 streams), one linear 128 MiB run per stream, 256-byte
# bursts, (in + out) / time: 47.1 GiB/s on Strix in performance mode (amd/ryzen-ai-documentation
# docs/xrt_smi.rst), in GB/s.
DFBW_GBPS = round(47.1 * 2**30 / 1e9, 1)
DFBW_STREAMS = 16
DFBW_BURST = 256
# Sec. 5.2.1: the same kernel's compute peak on the XDNA2 array, 419.8 MACs/cycle x 32 x 1.8 GHz.
SEC521_XDNA2_PEAK_TOPS = 48.36
# Sec. 5.3.2: XDNA bf16 with a double-buffered C: 80x40x96 -> 2.76 TOPS (single C: 3.12, Table 2).
SEC532_DOUBLE_C = ArrayRow("Striking 5.3.2", "npu1", "bf16", "bf16", 80, 40, 96, 240, 4160, 4080, 4224, 2.76,
                           depth_c_l1=2, note="~4K: size and k_mt = 240 assumed")
# Sec. 5.3.3: BDs synchronised and reconfigured without overlap: -27% (XDNA int8-int16, Table 2).
SEC533_SEQUENTIAL_LOSS = 0.27
SEC533_DESIGN = STRIKING_T2[2]
# Sec. 5.3.1: a ~4K square int8-int16 GEMM on XDNA2 takes 5.2 ms (we take Table 3's design).
SEC531_XDNA2_MS = ArrayRow("Striking 5.3.1", "npu2", "i8", "i16", 128, 72, 112, 432, 4096, 4320, 4480, None,
                           note="5.2 ms stated; Table 3 design assumed")
SEC531_MS = 5.2
# Sec. 5.2.3: mean gain of B column-major over row-major across the sweeps (fig. 7-8).
COL_OVER_ROW = {("npu1", "i8", "i8"): 0.048, ("npu1", "i8", "i16"): 0.044, ("npu1", "bf16", "bf16"): 0.0057,
                ("npu2", "i8", "i8"): 0.191, ("npu2", "i8", "i16"): 0.252, ("npu2", "bf16", "bf16"): 0.087}
# Sec. 5.2.3: the best points of the sweeps (up to 8K) - upper envelopes, not single designs.
SWEEP_MAX_TOPS = {("npu1", "i8", "i8"): 6.76, ("npu1", "i8", "i16"): 6.05, ("npu1", "i8", "i32"): 4.57,
                  ("npu1", "bf16", "bf16"): 3.14, ("npu2", "i8", "i8"): 38.05, ("npu2", "i8", "i16"): 31.52,
                  ("npu2", "i8", "i32"): 25.31, ("npu2", "bf16", "bf16"): 14.71}

# ---- atb Table 1: BF16-BFP16 microkernel / core efficiency on Strix, T_MC = T_N = 128 -----------
# (T_K, rho, Eff_micro, Eff_core). Eff_core = Eff_micro with switching (eq. 15).
ATB_T1 = [(8, 1, 0.2, 0.156), (8, 2, 0.2, 0.149), (8, 4, 0.2, 0.134), (8, 8, 0.2, 0.116),
          (16, 1, 0.36, 0.284), (16, 2, 0.36, 0.272), (16, 4, 0.36, 0.257), (16, 8, 0.36, 0.195),
          (32, 2, 0.41, 0.331), (32, 4, 0.41, 0.312), (32, 8, 0.42, 0.306),
          (64, 4, 0.63, 0.511), (64, 8, 0.63, 0.482)]
ATB_PEAK_FLOPS_PER_CYCLE = 1024  # 512 bfp16 MACs/cycle (atb sec. 2.4)
ATB_TILE = 128  # T_MC = T_N = 128 (atb sec. 6.2)
# The kernel Table 1 measures: the ATB paper's hand-scheduled xchesscc config-1 kernel (mlir-aie PR
# #3076, config1/mm_bfp_mixed.cc @48cb5f3d: four 16 x 16 blocks per loop iteration, K unrolled, the
# next block's C loads interleaved with the current block's stores inside the group).
ATB_CHESS_LOOP = BlockLoop("ATB paper's chess kernel (4 blocks per iteration)", "atb-chess",
                           source="mlir-aie PR #3076 config1/mm_bfp_mixed.cc @48cb5f3d; atb Table 1")


# ---- mlir-aie PR #3650: the ATB kernels rewritten for Peano (zero spill, "II-maxxed") -----------
@dataclass(frozen=True)
class PeanoKernel:
    """One of PR #3650's kernels and the II its source reports: cycles per 16 x 16 C block in the
    steady state of its software-pipelined block loop (two stages). Facts and sources in
    tests/data/mlir_aie_atb_peano.json (tests/model/test_model_calibration.py checks these against it)."""

    preset: str
    t_ma: int  # rows of A per call (m / rho)
    k: int
    n: int
    ii: int
    loop: BlockLoop

    @property
    def macs_per_cycle(self) -> float:
        """The steady state's MACs per cycle: one block's 16 x 16 x k MACs per II."""
        return 16 * 16 * self.k / self.ii


def _peano(preset: str, k: int, n: int, ii: int, entries: str) -> PeanoKernel:
    loop = BlockLoop(f"mlir-aie #3650 {preset}: " + ("one flat block loop" if entries == "call" else
                                                     "one block loop per block row") + ", C prefetched",
                     "flat", entries, stages=2, source=f"{preset}/mm_bfp_mixed.cc (PR #3650)")
    return PeanoKernel(preset, 32, k, n, ii, loop)


PEANO_ATB = [_peano("config1", 64, 128, 42, "row"),  # fitted: flat_block_overhead
             _peano("config2", 128, 96, 77, "call"),  # checks
             _peano("config3", 64, 128, 41, "row")]


# ---- atb Table 2: whole-array bfp16 GEMMs (values withheld, see below) -------------------------
# Precision configs (gemm_gen/facts/precision.py): config1 bf16 x bfp16 -> bf16, config2 bfp16 throughout,
# config3 bfp16 with C accumulated in bf16. k_mt: mlir-aie's example streams config1's bf16 A in
# 512-column memtile chunks and configs 2-3 in k-column ones (one k-step per object). B: mlir-aie
# pre-tiles it per L1 tile on the host; our closest layout is B in row-major tile strips (a
# column-major bfp16 B strip of 512 K values would be 1152 words, past the shim's 10-bit wrap).
ATB_TYPES = {"config1": ("bf16", "bfp16", "bf16", None),  # (A, B when it differs, C, acc when it differs)
             "config2": ("bfp16", None, "bfp16", None),
             "config3": ("bfp16", None, "bfp16", "bf16")}


def _atb(preset: str, m: int, k: int, n: int, rho: int, M: int, K: int, N: int, tops: float | None = None,
         note: str = "") -> ArrayRow:
    dtype_in, dtype_b, dtype_out, acc = ATB_TYPES[preset]
    k_mt = max(k, 512 // k * k) if preset == "config1" else k
    # measured with the ATB paper's chess kernel (mlir-aie's README too, before PR #3650): priced as that loop
    return ArrayRow(f"atb Table 2 {preset}", "npu2", dtype_in, dtype_out, m, k, n, k_mt, M, K, N, tops,
                    b_col_maj=False, stack_bytes=0, note=note, dtype_b=dtype_b, acc=acc, rho=rho,  # 0: our default
                    block_loop=ATB_CHESS_LOOP)


ATB_T2 = [
    _atb("config1", 64, 64, 128, 1, 2048, 4096, 2048),
    _atb("config1", 64, 224, 64, 4, 2048, 4480, 2048),
    # the abstract's record, 24.6 TFLOPS, is the best config-1 design: this one by the paper's analysis
    _atb("config1", 128, 64, 128, 4, 4096, 4096, 2048, 24.6, "abstract: 24.6 TFLOPS; design assumed"),
    _atb("config2", 128, 64, 128, 1, 4096, 4096, 2048),
    _atb("config2", 256, 64, 128, 8, 4096, 4096, 2048),
    _atb("config2", 192, 128, 96, 6, 3072, 4096, 1536),
    _atb("config3", 96, 64, 128, 1, 3072, 4096, 2048),
    _atb("config3", 128, 64, 128, 4, 4096, 4096, 2048),
]
# mlir-aie's ATB example (gemm_asymmetric_tile_buffering/README.md, chess, xrt-smi turbo, min of 20
# runs) measured the three configs on Strix Point (Ryzen AI 9 HX 370) and on Krackan (its machine
# type not named: read as the Krackan profile): published hardware results.
MLIR_AIE_ATB = [
    replace(ATB_T2[2], source="mlir-aie ATB README config1", tops=24.3, note="Strix, turbo"),
    replace(ATB_T2[5], source="mlir-aie ATB README config2", tops=31.3, note="Strix, turbo"),
    replace(ATB_T2[7], source="mlir-aie ATB README config3", tops=28.5, note="Strix, turbo"),
    replace(ATB_T2[2], source="mlir-aie ATB README config1", tops=27.33, note="Krackan, turbo",
            machine="krackan-minipc"),
    replace(ATB_T2[5], source="mlir-aie ATB README config2", tops=31.58, note="Krackan, turbo",
            machine="krackan-minipc"),
    replace(ATB_T2[7], source="mlir-aie ATB README config3", tops=28.60, note="Krackan, turbo",
            machine="krackan-minipc"),
]
# mlir-aie's published block-datatype GEMMs (block_datatypes README, 8 columns, chess): bf16 through
# bfp16 emulation 8192 x 4224 x 4096 with 64 x 88 x 64 at 4.8 TFLOPS (atb's baseline), and bfp16 in
# and out 7680 x 4096 x 8192 with 96 x 128 x 64 at 10.2 TFLOPS.
MLIR_AIE_BF16_EMU = ArrayRow("mlir-aie block_datatypes README", "npu2", "bf16", "bf16", 64, 88, 64, 88, 8192, 4224,
                             4096, 4.8, emulate=True, stack_bytes=0xD00, note="k_mt = k assumed")
MLIR_AIE_BFP16 = ArrayRow("mlir-aie block_datatypes README", "npu2", "bfp16", "bfp16", 96, 128, 64, 128, 7680, 4096,
                          8192, 10.2, b_col_maj=False, stack_bytes=0xD00, note="k_mt = k (no memtile chunking) assumed")
