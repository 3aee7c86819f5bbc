"""What a design costs in space and traffic: the numbers `gemm-gen plan` reports (the report of a
design, not a planner: the call's plan is call.plan_call)."""

from __future__ import annotations

from dataclasses import dataclass

from ..design.ir import Design
from ..design.keys import DesignKeys, design_keys
from ..design.l1_banks import L1Plan
from ..design.serve import built_layouts, serve
from ..facts.devices import TileKind
from ..facts.dtypes import dtype
from ..facts.errors import GemmGenError
from ..model.layouts import LayoutPrice
from ..spec.call import CallPlan
from ..spec.config import GemmConfig
from ..spec.request import Problem
from ..spec.rules import l1 as l1_rule
from ..spec.rules.call_layouts import Layouts, Xclbin, xclbins


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


@dataclass(frozen=True)
class ElemBytes:
    """Average bytes per value of each operand (bfp16: 1.125) and of C while it accumulates."""

    a: float
    b: float
    c: float
    c_acc: float

    def to_json(self) -> dict[str, float]:
        return {"A": self.a, "B": self.b, "C": self.c, "C acc": self.c_acc}


@dataclass(frozen=True)
class L1Budget:
    """A core's L1: the bytes of each part (spec/rules/l1.py: A, B, C, the kernel's scratch, the
    overheads, by name) against the capacity."""

    parts: dict[str, int]
    total: int
    capacity: int

    @property
    def fraction(self) -> float:
        return self.total / self.capacity

    def to_json(self) -> dict[str, int]:
        return self.parts | {"total": self.total, "capacity": self.capacity}


@dataclass(frozen=True)
class SharedInfo:
    """Neighbour-shared L1 (design/ir.SharedBuffer, spec/rules/shared_l1.py): the option's value, each shared
    buffer (name, holder, readers leader first, its three locks with their initial values, the memtile that streams
    it) and each core role's L1 plan with the cores that have it."""

    share: str
    buffers: tuple[tuple[str, str, tuple[str, ...], tuple[tuple[str, int], ...], str], ...]
    roles: tuple[tuple[str, tuple[str, ...], L1Plan | None], ...]

    def to_json(self) -> dict[str, object]:
        return {"share_l1": self.share,
                "buffers": [{"name": n, "holder": h, "readers": list(r), "locks": [list(x) for x in lk], "source": s}
                            for n, h, r, lk, s in self.buffers],
                "roles": [{"role": role, "tiles": list(tiles), "l1_plan": None if p is None else p.summary()}
                          for role, tiles, p in self.roles]}


def shared_info(design: Design) -> SharedInfo | None:
    """What plan says of a design's neighbour-shared L1, None without."""
    if not design.shared:
        return None
    return SharedInfo(design.config.array.share_l1,
                      tuple((b.name, str(b.holder), tuple(map(str, b.readers)),
                             tuple((x.name, x.init) for x in b.locks), str(b.source)) for b in design.shared),
                      tuple((r.role, tuple(map(str, r.tiles)), r.plan) for r in design.l1_roles))


@dataclass(frozen=True)
class L2Budget:
    """The memtiles: bytes on each, their sum against the array's capacity, and the buffers
    mlir-aie places on a neighbour's memtile."""

    per_memtile: tuple[int, ...]
    total: int
    fraction: float
    spilled: tuple[str, ...]


@dataclass(frozen=True)
class L1Info:
    """The cores' L1 allocation and its predicted bank map (design/l1_banks.py)."""

    plan: L1Plan
    chosen: str  # "given" (--l1-alloc) or "planned"
    reserved_bytes: int  # held by unused buffers to steer the allocator
    bank_bytes: int
    shared: tuple[tuple[str, str, int], ...]  # (DMA buffer, core buffer, bank) sharing a bank, sorted

    def to_json(self) -> dict[str, object]:
        return {**self.plan.summary(), "chosen": self.chosen, "reserved_bytes": self.reserved_bytes,
                "bank_bytes": self.bank_bytes, "shared": list(self.shared)}


@dataclass(frozen=True)
class XclbinPlan:
    """Several calls (sizes and layouts): the xclbins they need (spec/rules/call_layouts.py), and which of
    them this design serves (a call it refuses, with the first line of why)."""

    sizes: tuple[Problem, ...]
    layouts: tuple[Layouts, ...]
    xclbins: tuple[Xclbin, ...]
    built: Layouts  # this design's
    refused: tuple[tuple[int, str], ...]  # (call, why) for the calls this design cannot serve

    def to_json(self) -> dict[str, object]:
        return {"count": len(self.xclbins), "xclbins": [x.to_json() for x in self.xclbins],
                "calls": [{"size": str(p), "layouts": str(lay)} for p, lay in zip(self.sizes, self.layouts)],
                "this_design": {"layouts": str(self.built),
                                "serves": [i for i in range(len(self.sizes)) if i not in dict(self.refused)],
                                "refuses": {str(i): why for i, why in self.refused}}}


def xclbin_plan(c: GemmConfig, sizes: tuple[Problem, ...], layouts: tuple[Layouts, ...] | None = None,
                weights: tuple[float, ...] | None = None) -> XclbinPlan:
    """The xclbins `sizes` (each in its `layouts`, default this design's) need, and which calls
    design `c` serves."""
    lays = layouts or (built_layouts(c),) * len(sizes)
    refused = []
    for i, (p, lay) in enumerate(zip(sizes, lays)):
        try:
            serve(c, p, lay)
        except GemmGenError as e:
            refused.append((i, e.what))
    return XclbinPlan(sizes, lays, xclbins(lays, {"A": c.types.t_in, "B": c.types.t_b, "C": c.types.t_out}, weights),
                      built_layouts(c), tuple(refused))


@dataclass(frozen=True)
class PlanInfo:
    """Everything `gemm-gen plan` reports of a design (and what the text renderers read)."""

    design: DesignKeys
    device_name: str
    native: tuple[int, int, int]
    padded: tuple[int, int, int]
    call: CallPlan
    runtime_sizes: str
    l1_depths: tuple[int, int, int]  # A, B, C
    elem_bytes: ElemBytes
    array: tuple[int, int]  # rows, cols
    a_columns: tuple[int, ...]  # the column where each row's A enters
    task_groups: int
    queue_groups: int
    l1: L1Budget
    l2: L2Budget
    shim_bds_live: dict[str, int]  # per shim, sorted by name
    shim_bds: int
    dram_bytes: dict[str, int]  # per host tensor, in the order of the runtime sequence
    macs: int
    padded_macs: int
    peak_tops: float
    l1_plan: L1Info | None
    calls: XclbinPlan | None = None  # several calls asked (--runtime-sizes): the xclbins they need
    layouts: tuple[LayoutPrice, ...] = ()  # the tiling priced in other layouts (model/layouts.py; plan only)
    shared: SharedInfo | None = None  # neighbour-shared L1 (None without)

    def to_json(self) -> dict[str, object]:
        """What `gemm-gen plan --json` prints."""
        return {
            **self.design.to_json(),
            "device_name": self.device_name,
            "native": list(self.native),
            "padded": list(self.padded),
            "wasted_fraction": self.call.wasted_fraction,
            "host_copies": self.call.host_copies,  # matrices the host copies or pads before or after the run
            "call": self.call.summary(),
            "runtime_sizes": self.runtime_sizes,
            "l1_depths": list(self.l1_depths),
            "elem_bytes": self.elem_bytes.to_json(),
            "array": list(self.array),
            "a_columns": list(self.a_columns),
            "k_steps": self.call.k_steps,
            "tiles_per_core": self.call.tiles_per_core,
            "task_groups": self.task_groups,
            "queue_groups": self.queue_groups,
            "l1_bytes": self.l1.to_json(),
            "l1_fraction": self.l1.fraction,
            "l2_bytes_per_memtile": list(self.l2.per_memtile),
            "l2_bytes_total": self.l2.total,
            "l2_fraction": self.l2.fraction,
            "l2_spilled": list(self.l2.spilled),
            "shim_bds_live": dict(self.shim_bds_live),
            "shim_bds": self.shim_bds,
            "dram_bytes": dict(self.dram_bytes),
            "macs": self.macs,
            "padded_macs": self.padded_macs,
            "peak_tops": self.peak_tops,
            "l1_plan": None if self.l1_plan is None else self.l1_plan.to_json(),
            **({"xclbins": self.calls.to_json()} if self.calls is not None else {}),
            **({"layouts_priced": [x.to_json() for x in self.layouts]} if self.layouts else {}),
            **({"shared_l1": self.shared.to_json()} if self.shared is not None else {}),
        }


def plan_info(design: Design) -> PlanInfo:
    """What `gemm-gen plan` reports of a design."""
    c: GemmConfig = design.config
    dev = c.dev
    mem_used = c.memtile_bytes_used()
    return PlanInfo(
        design=design_keys(design),
        device_name=dev.marketing,
        native=c.native,
        padded=c.call.covered,
        call=c.call,
        runtime_sizes=c.runtime.runtime_sizes,
        l1_depths=(l1_rule.buffers(c.l1_options, "A"), l1_rule.buffers(c.l1_options, "B"), c.array.depth_c_l1),
        elem_bytes=ElemBytes(c.types.t_in.elem_bytes, c.types.t_b.elem_bytes, c.types.t_out.elem_bytes,
                             c.types.t_acc.elem_bytes),
        array=(c.array.rows, c.array.cols),
        a_columns=c.a_cols,
        task_groups=design.task_groups,
        queue_groups=c.runtime.queue_groups,
        l1=L1Budget(c.l1_parts, c.l1_bytes, dev.l1_bytes),
        l2=L2Budget(tuple(mem_used), sum(mem_used), sum(mem_used) / (dev.memtile_bytes * c.array.cols),
                    tuple(b.name for b in c.memtile_placement() if b.home_col != b.owner_col)),
        shim_bds_live=live_bds_per_shim(design),
        shim_bds=dev.dma[TileKind.SHIM].bds,
        dram_bytes=dram_bytes(design),
        macs=c.size.M * c.size.K * c.size.N,
        padded_macs=c.call.Mp * c.call.k_walk * c.call.Np,
        peak_tops=dev.peak_tops(dev.operands(c.types.dtype_in, c.types.dtype_b)),
        l1_plan=l1_info(design),
        shared=shared_info(design),
    )


def l1_info(design: Design) -> L1Info | None:
    """The cores' L1 allocation and its predicted bank map (design/l1_banks.py)."""
    l1 = design.l1
    if l1 is None:
        return None
    return L1Info(l1, "given" if design.config.array.l1_alloc else "planned", sum(n for _, n in l1.reserved),
                  l1.bank_bytes, tuple(sorted({(f.dma, f.core, f.bank) for f in l1.conflicts})))
