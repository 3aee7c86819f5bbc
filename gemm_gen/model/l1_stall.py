"""Cycles a core loses per k-step to the DMA using a bank the core is using (gemm_gen/design/l1_banks.py).

A bank serves one 128-bit access per cycle and arbitrates round-robin (AM020): when a DMA write
(or, for a second C object, a DMA read) meets a core access to the same bank, one of them waits. A
collision happens when the core touches that bank in the cycle the DMA does, which it does at its
time-averaged access rate into the buffers it keeps there (bytes a call loads and stores in them, in
vector accesses, over the call's cycles: the kernel's loop nest says which operand tiles each cluster
reloads). Each collision costs the core gamma cycles (`l1_conflict_cycles_per_collision`), the one
calibrated number: only buffer pairs the plan finds in one bank cost anything, and a layout without
shared banks costs 0.
"""

from __future__ import annotations

from ..design.l1_banks import BANK_WORD_BYTES, L1Plan
from ..facts.dtypes import dtype
from ..facts.precision import BFP16
from ..spec.config import GemmConfig
from ..spec.rules import Ints, l1
from ..spec.rules.kernel_variant import converts_a_tile


def access_bytes_per_call(c: GemmConfig) -> dict[str, float]:
    """Bytes one kernel call loads from and stores to each of a core's buffer roles."""
    v = c.variant
    assert v is not None, "a config check_config accepts has a kernel variant (rules/defaults.variant)"
    out = access_bytes(c, c.t_ma, c.tiling.k, c.tiling.n, c.tiling.rho, v.er, v.et)
    return {role: float(nbytes) for role, nbytes in out.items()}


def access_bytes(c: GemmConfig, t_ma: Ints, k: Ints, n: Ints, rho: Ints, er: Ints, et: Ints) -> dict[str, Ints]:
    """access_bytes_per_call for any tiling of c's options (its types, kernel and L1 options; its own tiling is not
    read): the call's A rows t_ma, k, n, rho and the cluster's expansion er x et, ints or arrays that broadcast (the
    tuner's candidates)."""
    r, _, t = c.kernel.mmul
    b16 = dtype(BFP16)
    a_tile, b_tile = c.types.t_in.nbytes(t_ma * k), c.types.t_b.nbytes(k * n)
    c_slice = 2 * c.types.t_acc.nbytes(t_ma * n)  # loaded and stored once per call
    if not c.kernel.block:  # each cluster reloads its A rows per cluster column, its B columns per cluster row
        return {"A": a_tile * n / (et * t), "B": b_tile * t_ma / (er * r), "C": c_slice}
    q2 = 2 * b16.tile_rows  # bfp16 kernels: 2 x 2 clusters of 8 x 8 tiles
    a_bfp16, b_bfp16 = b16.nbytes(t_ma * k), b16.nbytes(k * n)
    converts_a = converts_a_tile(c.types.precision, bool(c.kernel.convert_once))
    out: dict[str, Ints] = {"C": c_slice}
    if converts_a:  # read once and written as bfp16 once, then the bfp16 copy reloaded per cluster column
        out["A"], out["A bfp16"] = a_tile, a_bfp16 * (1 + n / q2)
    else:
        out["A"] = a_tile * n / q2
    if c.kernel.convert_once:  # B converted (W4A16: its object dequantized) once per k-step, i.e. per rho calls
        b_read = l1.b_object_bytes(c.l1_options, k, n)
        out["B"], out["B bfp16"] = b_read / rho, b_bfp16 / rho + b_bfp16 * t_ma / q2
    else:
        out["B"] = b_tile * t_ma / q2
    return out


def collisions(c: GemmConfig, plan: L1Plan, call_cycles: float) -> float:
    """Expected DMA bank accesses per k-step that meet a core access to the same bank."""
    if not plan.conflicts or call_cycles <= 0:
        return 0.0
    vector = c.dev.isa.vld_bytes
    rates = {role: nbytes / vector / call_cycles for role, nbytes in access_bytes_per_call(c).items()}

    def role(name: str) -> str:
        return name if name in rates else name.rstrip("0123456789")

    # DMA accesses per k-step into one object of each role: A objects turn over rho times per
    # k-step across depth_ab_l1 slots, B once, a second C object once per output tile
    turnover = {"A": c.tiling.rho / c.array.depth_ab_l1, "B": 1 / c.array.depth_ab_l1,
                "C": 1 / (c.array.depth_c_l1 * c.call.k_steps)}
    shared: dict[tuple[str, int], tuple[int, set[str]]] = {}
    for f in plan.conflicts:
        nbytes, cores = shared.get((f.dma, f.bank), (f.dma_bytes, set()))
        shared[(f.dma, f.bank)] = (nbytes, cores | {f.core})
    total = 0.0
    for (dma, _), (nbytes, cores) in shared.items():
        busy = min(1.0, sum(rates.get(role(y), 0.0) for y in cores))
        total += turnover[role(dma)] * nbytes / BANK_WORD_BYTES * busy
    return total


def stall_cycles(c: GemmConfig, plan: L1Plan, call_cycles: float, gamma: float) -> float:
    """Predicted cycles per k-step the core waits on banks it shares with the DMA."""
    return gamma * collisions(c, plan, call_cycles) if gamma else 0.0
