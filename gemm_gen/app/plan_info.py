"""What a design costs in space and traffic: the numbers `gemm-gen plan` reports (the report of a
design, not a planner: the call's plan is call.plan_call)."""

from __future__ import annotations

from ..config import GemmConfig
from ..design.keys import design_keys
from ..design.model import Design
from ..dtypes import dtype
from ..hw.devices import TileKind


def dram_bytes(design: Design) -> dict[str, int]:
    """Bytes each host tensor moves over the shims, summed over the runtime sequence."""
    out: dict[str, int] = {}
    for task in design.tasks:
        t = design.tensor(task.tensor)
        out[task.tensor] = out.get(task.tensor, 0) + dtype(t.dtype).unit_nbytes(task.tap.count)  # taps count units
    return out


def live_bds_per_shim(design: Design) -> dict[str, int]:
    """Most BDs the runtime sequence keeps configured at once on each shim."""
    live: dict[str, int] = {}
    peak: dict[str, int] = {}
    groups: dict[int, list[str]] = {}
    for op in design.runtime:
        if op.task is not None:
            shim = str(op.task.shim)
            live[shim] = live.get(shim, 0) + 1
            peak[shim] = max(peak.get(shim, 0), live[shim])
            groups.setdefault(op.group, []).append(shim)
        else:
            for shim in groups.pop(op.group, []):
                live[shim] -= 1
    return dict(sorted(peak.items()))


def plan_info(design: Design) -> dict[str, object]:
    """Everything `gemm-gen plan --json` prints for a design (and what the text renderers read)."""
    c: GemmConfig = design.config
    dev = c.dev
    l1_cap = dev.l1_bytes
    mem_used = c.memtile_bytes_used()
    traffic = dram_bytes(design)
    macs = c.M * c.K * c.N
    return {
        **design_keys(c),
        "device_name": dev.marketing,
        "native": list(c.native),
        "padded": list(c.call.covered),
        "wasted_fraction": c.call.wasted_fraction,
        "host_copies": c.call.host_copies,  # matrices the host copies or pads before or after the run
        "call": c.call.summary(),
        "runtime_sizes": c.runtime_sizes,
        "l1_depths": [c.depth_ab_l1, c.depth_ab_l1, c.depth_c_l1],
        "elem_bytes": {"A": c.t_in.elem_bytes, "B": c.t_b.elem_bytes, "C": c.t_out.elem_bytes,
                       "C acc": c.t_acc.elem_bytes},
        "array": [c.rows, c.cols],
        "a_columns": list(c.a_cols),
        "k_steps": c.call.k_steps,
        "tiles_per_core": c.call.tiles_per_core,
        "task_groups": c.call.m_blocks * c.call.n_blocks,
        "queue_groups": c.queue_groups,
        "l1_bytes": c.l1_parts | {"total": c.l1_bytes, "capacity": l1_cap},
        "l1_fraction": c.l1_bytes / l1_cap,
        "l2_bytes_per_memtile": mem_used,
        "l2_bytes_total": sum(mem_used),
        "l2_fraction": sum(mem_used) / (dev.memtile_bytes * c.cols),
        "l2_spilled": [b.name for b in c.memtile_placement() if b.home_col != b.owner_col],
        "shim_bds_live": live_bds_per_shim(design),
        "shim_bds": dev.dma[TileKind.SHIM].bds,
        "dram_bytes": traffic,
        "macs": macs,
        "padded_macs": c.call.Mp * c.call.k_walk * c.call.Np,
        "peak_tops": dev.peak_tops(c.dtype_in),
        "l1_plan": l1_info(design),
    }


def l1_info(design: Design) -> dict[str, object] | None:
    """The cores' L1 allocation and its predicted bank map (l1_banks.py)."""
    l1 = design.l1
    if l1 is None:
        return None
    return {**l1.summary(), "chosen": "given" if design.config.l1_alloc else "planned",
            "reserved_bytes": sum(n for _, n in l1.reserved), "bank_bytes": l1.bank_bytes,
            "shared": sorted({(f.dma, f.core, f.bank) for f in l1.conflicts})}
