"""Single-core kernel throughput from the VLIW accumulation-chain model (atb sec. 4, eq. 5-11).

Our kernels compute an m x k x n call as (m/2r) x (n/2t) *chain clusters*: 2 x 2 accumulators
(C = 4 chains) sharing the loads of two A and two B blocks, each chain k/s vmacs long.

    per cluster   T = V * II + O                      V = 4 k/s vmacs
    II            = max(mmul issue cycles, P / C, loads per round / (U_ld * C))         (eq. 6-7)
    O_serial      = T_prolog + T_epilog - C * II                                     (eq. 5, 9, 10)
    T_prolog      = l_vld + ceil((C loads + one round of A/B loads) / U_ld) - 1          (eq. 5)
    T_epilog      = l_vmac->vst + l_vst - 1 + max((C - 1) II + st_acc, C st_acc)        (eq. 9, one store unit)
    O             = beta * n_C + (O_serial - beta * n_C) * h(D)                          (eq. 10 vs 11)

bfp16 kernels (the bfp16 datapath with bfp16 B: gemm_gen/precision.py) issue one 8x8x8 vmac per
cycle (II = 1); their per-cluster overhead epsilon is calibrated on atb Table 1 (eq. 13), which
measures exactly these kernels, instead of being derived from the load schedule.

D is how many clusters' accumulators fit the accumulator file at once. With D = 1 (every aie2p
kernel: five 2048-bit registers, four per cluster) nothing overlaps (eq. 10, h = 1); with D = 2
either the next prolog or the previous epilog overlaps the steady state (h = 1/2); with D >= 3 both
do (eq. 11, h = 0). What overlap cannot hide is beta cycles per C vector load or store (n_C per
cluster): port and bank conflicts with the A/B load stream, the one calibrated kernel parameter.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..dtypes import dtype
from ..hw.devices import Device
from .params import Params

CHAINS = 4  # 2 x 2 accumulators per cluster (KERNEL_EXPANSION = 2 in both directions)
ACC_LANE_BITS = 32  # acc32 / accfloat lanes


@dataclass(frozen=True)
class KernelShape:
    """What fixes the instruction schedule besides m, k, n."""

    target: str  # aie2 / aie2p
    dtype_in: str
    dtype_out: str
    r: int
    s: int
    t: int
    emulate_bf16_with_bfp16: bool
    peak_macs: int  # the device's peak MACs/cycle for dtype_in (efficiency denominator)
    dtype_b: str = ""  # "": dtype_in
    acc: str = ""  # C's type in L1; "": dtype_out

    @property
    def block(self) -> bool:
        """A bfp16 kernel: bfp16 B on the bfp16 datapath."""
        return self.dtype_b == "bfp16"


def mmul_cycles(p: Params, ks: KernelShape) -> float:
    """Vector-unit issue cycles per r x s x t mmul step."""
    macs = ks.r * ks.s * ks.t
    if ks.block:
        return max(1.0, macs / ks.peak_macs)
    if ks.target == "aie2p" and ks.dtype_in == "bf16":
        if ks.emulate_bf16_with_bfp16:
            return p.bf16_via_bfp16_cycles * max(1.0, macs / ks.peak_macs)
        return max(1.0, macs / p.aie2p_bf16_native_macs)
    return max(1.0, macs / ks.peak_macs)


def acc_lane_bits(ks: KernelShape) -> int:
    # aie2p 16-bit mmuls accumulate in acc64 (aie_api: 4x4x8 i16 is an acc64 mode)
    return 64 if ks.target == "aie2p" and ks.dtype_in == "i16" else ACC_LANE_BITS


def cluster_terms(p: Params, ks: KernelShape) -> dict[str, float]:
    """II, O and their parts for one chain cluster (independent of m, k, n)."""
    isa = p.isa[ks.target]
    if ks.block:
        ii = mmul_cycles(p, ks)
        return {"ii": ii, "overhead": p.bfp16_overhead, "serial_overhead": p.bfp16_overhead, "prolog": 0.0,
                "epilog": 0.0, "acc_sets": 1, "c_accesses": 0, "round_loads": 0}
    b_in = dtype(ks.dtype_in).bytes  # bf16 via bfp16 still loads bf16 and converts in the core
    b_out = dtype(ks.dtype_out).bytes
    ld_a = -(-ks.r * ks.s * b_in // isa.vld_bytes)
    ld_b = -(-ks.s * ks.t * b_in // isa.vld_bytes)
    round_loads = 2 * ld_a + 2 * ld_b  # two A and two B blocks feed four vmacs
    ld_acc = -(-ks.r * ks.t * b_out // isa.vld_bytes)
    st_acc = -(-ks.r * ks.t * b_out // isa.vst_bytes)
    c_loads, c_stores = CHAINS * ld_acc, CHAINS * st_acc
    ii = max(mmul_cycles(p, ks), isa.acc_distance / CHAINS, round_loads / (isa.load_units * CHAINS))
    prolog = isa.vld_latency + -(-(c_loads + round_loads) // isa.load_units) - 1
    stores = max((CHAINS - 1) * ii + st_acc, CHAINS * st_acc / isa.store_units)
    epilog = isa.vmac_to_store + isa.vst_latency - 1 + stores
    serial = max(0.0, prolog + epilog - CHAINS * ii)
    depth = isa.acc_file_bits // (CHAINS * ks.r * ks.t * acc_lane_bits(ks))
    hidden = {0: 1.0, 1: 1.0, 2: 0.5}.get(depth, 0.0)
    residual = min(p.bank_stall * (c_loads + c_stores), serial)
    overhead = residual + (serial - residual) * hidden
    return {"ii": ii, "overhead": overhead, "serial_overhead": serial, "prolog": prolog, "epilog": epilog,
            "acc_sets": depth, "c_accesses": c_loads + c_stores, "round_loads": round_loads}


def kernel_cycles(p: Params, ks: KernelShape, m: np.ndarray, k: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Cycles of one m x k x n kernel call (what the paper's trace-based Table 1 measures)."""
    terms = cluster_terms(p, ks)
    clusters = (m // (2 * ks.r)) * (n // (2 * ks.t))
    vmacs = CHAINS * (k // ks.s)
    return np.asarray(clusters * (vmacs * terms["ii"] + terms["overhead"]), dtype=np.float64)


def kernel_shape(dev: Device, dtype_in: str, dtype_out: str, mmul: tuple[int, int, int],
                 emulate: bool, dtype_b: str | None = None, acc: str | None = None) -> KernelShape:
    return KernelShape(dev.aie_target, dtype_in, dtype_out, *mmul, emulate, dev.peak_macs[dtype_in],
                       dtype_b or dtype_in, acc or dtype_out)
