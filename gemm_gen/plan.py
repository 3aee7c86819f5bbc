"""What a design costs in space and traffic: the numbers `gemm-gen plan` reports."""

from __future__ import annotations

from . import precision as prec
from .config import GemmConfig
from .design.model import Design
from .dtypes import dtype
from .hw.devices import TileKind
from .rules import kernel_variant as kv


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


def design_keys(c: GemmConfig) -> dict[str, object]:
    """What design it is, as plan and predict both report it: device, problem, tiling, types."""
    return {
        "device": c.dev.name,
        "problem": [c.M, c.K, c.N],
        "tile": [c.m, c.k, c.n],
        "k_mt": c.k_mt,
        "rho": c.rho,
        "t_ma": c.t_ma,
        "mmul": list(c.mmul),
        "dtype_in": c.dtype_in,
        "dtype_b": c.dtype_b,
        "dtype_out": c.dtype_out,
        "acc": c.acc,
        "precision": c.precision.name,
        "b_col_maj": c.b_col_maj,
        "b_pack": c.b_pack,
        "n_aie_cols": c.cols,
        "accumulator": accumulator(c),
        "rounding_of_c": c_rounding(c),
        "kernel_variant": variant_info(c),
        "convert_once": bool(c.convert_once),
    }


def variant_info(c: GemmConfig) -> dict[str, object]:
    """The kernel variant: accumulators per cluster, the pipelined loop, the code estimate."""
    v = c.variant
    block = c.block_kernel  # bfp16 kernels: one fixed variant of their own template
    code = (None if block else
            int(kv.code_bytes(c.dev, c.dtype_in, c.mmul, bool(c.emulate_bf16_with_bfp16), v.expansion, v.loops,
                              c.k, c.n)))
    return {"name": v.name, "expansion": list(v.expansion), "loops": v.loops,
            "accumulator_sets": None if block else kv.acc_sets(c.dev, c.dtype_in, c.mmul, v.expansion),
            "code_bytes_estimate": code, "program_bytes": c.dev.isa.program_bytes,
            "chosen": "given" if (c.expansion, c.kernel_loops) != (None, None) else "automatic"}


def accumulator(c: GemmConfig) -> str:
    """The kernel's accumulator as the AIE API names it, and what that means for C."""
    if c.t_in.is_float:
        return "accfloat (fp32 lanes)"
    acc = c.acc_bits
    if acc == c.t_out.bits:
        return f"acc{acc} (the {c.dtype_out} C stays in it: loaded and stored unshifted)"
    return f"acc{acc} ({c.dtype_out} C shift-round-saturated out of it, shift {c.shift})"


def c_rounding(c: GemmConfig) -> str:
    """When C is rounded (and saturated) into its output type: once, or after every k-step."""
    steps = c.call.k_steps
    narrow = "rounded" if c.t_out.is_float else "shift-round-saturated"
    if c.precision.converts_c:
        return (f"C accumulated in {c.acc} across all of K ({steps} k-step(s)), {narrow} once into {c.dtype_out} "
                f"after the last (--acc {prec.ACC_OUT}: per k-step, as mlir-aie and the papers)")
    if c.acc == c.dtype_out and c.acc != c.default_acc:
        return (f"C kept in {c.dtype_out} between calls (--acc {prec.ACC_OUT}): {narrow} after each of its {steps} "
                f"k-step(s), as mlir-aie's examples and the papers; drop --acc to round once")
    return f"C kept in the {c.acc} accumulator type across all of K: exact between calls, no conversion"


def plan(design: Design) -> dict[str, object]:
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
