"""Readable text for people: the plan of a design and the result of a simulation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..design.keys import DesignKeys, VariantInfo
from ..design.serve import SERVED
from ..facts.accuracy import ACTIVATION_TAIL, BFP16_DATAPATH, ONE_BF16_ROUNDING
from ..facts.devices import device
from ..facts.dtypes import dtype
from ..facts.epilogue import Epilogue
from ..model import shared_cost
from ..spec.call import CallPlan
from ..spec.rules import decode_split
from .plan_info import L1Info, PlanInfo, XclbinPlan

if TYPE_CHECKING:
    from ..sim.run import SimResult
    from ..spec.config import GemmConfig


def _x(v: tuple[int, ...]) -> str:
    return " x ".join(str(i) for i in v)


def _mib(b: float) -> str:
    return f"{b / 2**20:,.1f} MiB"


def _atb_lines(p: PlanInfo) -> list[str]:
    """The L1 byte budget of atb eq. 3 spelled out, for ATB and bfp16 designs."""
    d = p.design
    if d.tiling.rho <= 1 and "bfp16" not in (d.types.dtype_in, d.types.dtype_b, d.types.dtype_out):
        return []
    m, k, n = d.tiling.m, d.tiling.k, d.tiling.n
    da, db, dc = p.l1_depths
    ba, bb, bc = p.elem_bytes.a, p.elem_bytes.b, p.elem_bytes.c
    l1 = p.l1
    eq3 = l1.parts["A"] + l1.parts["B"] + l1.parts["C"]  # the parts are named after the buffers (spec/rules/l1.py)
    rest = [f"{name} {v}" for name, v in l1.parts.items() if name not in ("A", "B", "C")]
    lines = []
    if d.tiling.rho > 1:
        lines.append(f"ATB       rho = {d.tiling.rho}: A tiles of T_MA = {d.t_ma} rows stream past each B tile, "
                     f"C keeps T_MC = {m} rows")
    lines.append(f"eq. 3     {da} x {d.t_ma} x {k} x {ba:g} B (A) + {db} x {k} x {n} x {bb:g} B (B) + {dc} x {m} x "
                 f"{n} x {bc:g} B (C) = {eq3} B; + {', '.join(rest)} = {l1.total} B of {l1.capacity}")
    return lines


def _variant_line(v: VariantInfo, convert_once: bool, int4_b: bool = False) -> str:
    er, et = v.expansion
    sets = v.accumulator_sets
    once = ("bf16 A converted to bfp16 once per call, the int4 B object dequantized straight into bfp16 tiles once "
            "per k-step" if int4_b else "bf16 converted to bfp16 once (A per call, B per k-step)")
    room = (f"{once}, then bfp16 macs" if convert_once
            else "bfp16 kernel" if sets is None else "one cluster fills the accumulators" if sets <= 1
            else f"accumulators for {sets} clusters")
    code = ("" if v.code_bytes_estimate is None else
            f", code <= {v.code_bytes_estimate / 1024:.1f} KiB of {v.program_bytes // 1024} KiB (estimate)")
    return (f"variant   {er}x{et} accumulators per cluster, {v.loops} ({v.chosen}; {room}){code}")


def _array_line(p: PlanInfo) -> str:
    """The grid, and for the split decode placement where its virtual columns, streams and joins are."""
    if p.design.mapping != decode_split.SPLIT_MAPPING:
        return (f"array     {p.array[0]} rows x {p.array[1]} cols; A enters at columns {list(p.a_columns)}, "
                f"B and C at every column")
    dev = device(p.design.device)
    streams = decode_split.streams(dev)
    most = max(s.count for s in streams)
    rows = dev.core_rows
    return (f"array     {rows} rows x {dev.columns} cols as 1 row of {p.array[1]} virtual columns (decode-split: "
            f"column v on core (v // {rows}, v % {rows})); A enters at column {decode_split.A_COL}, "
            f"B over {len(streams)} shim MM2S streams (up to {most} cores each, split in the memtile), C joined per "
            "column along N")


def _acc_split_lines(d: DesignKeys) -> list[str]:
    """Where a converted C's accumulator lives: the blocks in the C object, the rest in C acc."""
    s = d.acc_split
    if s is None:
        return []
    shape = f"{s.block[0]}x{s.block[1]}"
    return [f"C split   in place: {s.in_object} of the accumulator's {s.blocks} {shape} blocks in the C object (its "
            f"first, in whole units of {s.unit}: as many as its bytes hold), the other {s.blocks - s.in_object} "
            "in C acc"]


def _l1_lines(l1: L1Info | None) -> list[str]:
    """The predicted bank map of a core's L1 and what the DMA and the core share."""
    if l1 is None:
        return []
    held = f", {l1.reserved_bytes} B reserved to steer it" if l1.reserved_bytes else ""
    banks = " | ".join(f"{i}: {' '.join(names) or '-'}" for i, names in enumerate(l1.plan.bank_map()))
    lines = [f"L1 banks  {l1.plan.scheme} ({l1.chosen}{held}), predicted: {banks}"]
    if not l1.shared:
        lines.append("          the DMA never writes a bank the core is reading")
    else:
        pairs = ", ".join(f"{dma}/{core} in {bank}" for dma, core, bank in l1.shared[:6])
        more = f" and {len(l1.shared) - 6} more" if len(l1.shared) > 6 else ""
        lines.append(f"          DMA/core sharing: {pairs}{more} ({l1.plan.conflict_bytes} B of DMA buffer)")
    if l1.plan.order_dependent:
        lines.append("          (depends on the IR order of equal-sized fifos, assumed A, B, C: worst "
                     f"{l1.plan.worst_conflict_bytes} B)")
    return lines


def _shared_lines(p: PlanInfo) -> list[str]:
    """Neighbour-shared L1: which core holds which buffer, who reads it, its locks, and each core role's banks."""
    s = p.shared
    if s is None:
        return []
    lines = [f"shared L1 {s.share}: {len(s.buffers)} buffers, each on its holder with locks "
             + ", ".join(f"{name.rsplit('_', 1)[1]} (init {init})" for name, init in s.buffers[0][3])
             + " (relay protocol: docs/shared_l1.md 3.2)"]
    lines += [f"          {name} on {holder}, read by {' then '.join(readers)}, streamed from {source}"
              for name, holder, readers, _, source in s.buffers[:4]]
    if len(s.buffers) > 4:
        lines.append(f"          ... and {len(s.buffers) - 4} more like them")
    for role, tiles, plan in s.roles:
        banks = "no plan fits" if plan is None else " | ".join(
            f"{i}: {' '.join(names) or '-'}" for i, names in enumerate(plan.bank_map()))
        gama = "" if plan is None or not plan.gama else f"; breaks GAMA's rules: {'; '.join(plan.gama)}"
        lines.append(f"          {role} ({len(tiles)} cores): {banks}{gama}")
    lines.append(f"          the model prices it with assumptions: {shared_cost.ASSUMPTION} (docs/model.md)")
    return lines


def plan_text(p: PlanInfo) -> str:
    d = p.design
    l1 = p.l1
    l2 = p.l2
    bds = p.shim_bds_live
    dram = p.dram_bytes
    layout = "column-major" if d.layout.b_col_maj else "row-major"
    if d.layout.b_pack == "strips":
        layout += (" in the kernel, packed in DRAM as mlir-aie's ATB strips (one run per core column)"
                   if dtype(d.types.dtype_b).is_block else ", packed in DRAM in strips (one run per core column)")
    types = f"{d.types.dtype_in} -> {d.types.dtype_out}"
    if d.types.dtype_b != d.types.dtype_in or d.types.acc != d.types.dtype_out:
        types = f"A {d.types.dtype_in} x B {d.types.dtype_b} -> C {d.types.dtype_out}" + (
            f" (accumulated in {d.types.acc})" if d.types.acc != d.types.dtype_out else "")
    if d.types.precision.name.startswith("config"):
        types += f", the ATB paper's {d.types.precision.name}"
    lines = [
        f"device    {d.device} ({p.device_name}), {types}, B {layout}",
        f"problem   M x K x N = {d.size.M} x {d.size.K} x {d.size.N}",
        f"native    (m*rows) x k_mt x (n*cols) = {_x(p.native)}",
        f"covered   {_x(p.padded)} ({p.call.wasted_fraction:.1%} of the MACs are junk or K tail); host copies: "
        + (", ".join(f"{x.operand} ({x.why})" for x in p.call.copies) or "none"),
        f"kernel    m x k x n = {d.tiling.m} x {d.tiling.k} x {d.tiling.n}, k_mt = {d.tiling.k_mt}, "
        + (f"rho = {d.tiling.rho} ({d.tiling.rho} calls of {d.t_ma} rows per k-step), " if d.tiling.rho > 1 else "")
        + f"mmul {'x'.join(map(str, d.mmul))}; "
        f"{p.call.k_steps} k-steps per output tile, {p.call.tiles_per_core} tiles per core",
        _variant_line(d.kernel_variant, d.convert_once, d.types.dtype_b == "i4"),
        f"acc       {d.accumulator}; {d.rounding_of_c}",
        *_acc_split_lines(d),
        *_epilogue_lines(d.epilogue, p.call),
        _array_line(p),
        "L1/core   " + " + ".join(f"{name} {v}" for name, v in l1.parts.items())
        + f" = {l1.total} B of {l1.capacity} ({l1.fraction:.1%})",
        *_l1_lines(p.l1_plan),
        *_shared_lines(p),
        *_atb_lines(p),
        f"L2        {', '.join(str(b) for b in l2.per_memtile)} B per memtile; {l2.total / 1024:.1f} KiB total "
        f"({l2.fraction:.0%})" + (f"; spilled to a neighbour: {', '.join(l2.spilled)}"
                                  if l2.spilled else ""),
        f"shim BDs  at most {max(bds.values())} of {p.shim_bds} live per shim "
        f"({p.queue_groups} task groups in flight, {p.task_groups} groups in all)",
        f"DRAM      A {_mib(dram['A'])} + B {_mib(dram['B'])} read, C {_mib(dram['C'])} written",
        f"peak      {p.peak_tops:.2f} TOPS for the array ({p.macs:,} MACs, "
        f"{p.padded_macs:,} with padding)",
        *_layout_line(p),
        *_xclbin_lines(p.calls),
    ]
    return "\n".join(lines)


def _layout_line(p: PlanInfo) -> list[str]:
    """What the design's tiling is predicted to cost all row-major, and in the fastest layout."""
    if not p.layouts:
        return []
    own = p.layouts[0]
    if own.time_s is None:
        return []
    said = [f"this design ({own.layouts}) {own.time_s * 1e6:,.0f} us"]
    built = [x for x in p.layouts if x.time_s is not None]
    for what, x in (("all row-major", next((x for x in built if str(x.layouts) == "rrr"), None)),
                    ("fastest", min(built, key=lambda x: (x.time_s, x is not own)))):
        if x is not None and x is not own and x.time_s is not None:
            said.append(f"{what} {x.layouts} {x.time_s * 1e6:,.0f} us ({x.time_s / own.time_s - 1:+.1%}, {x.xclbin})")
    return ["layouts   PREDICTED at this tiling: " + "; ".join(dict.fromkeys(said))
            + " (gemm-gen predict prices each layout)"]


def _xclbin_lines(x: XclbinPlan | None) -> list[str]:
    """Several calls: the xclbins they need, which calls share one, what this design serves."""
    if x is None:
        return []
    lines = [f"xclbins   {len(x.xclbins)} for the {len(x.sizes)} calls (layouts: rules/call_layouts.py)"]
    for i, xb in enumerate(x.xclbins):
        shim = (f"; C stored by the shim in the other layout, one word per DRAM run, for call(s) "
                f"{', '.join(map(str, xb.at_shim))}" if xb.at_shim else "")
        lines.append(f"  xclbin {i}: {xb.layouts.describe()} ({xb.layouts}): calls "
                     f"{', '.join(map(str, xb.calls))}{shim}")
    refused = dict(x.refused)
    serves = [i for i in range(len(x.sizes)) if i not in refused]
    lines.append(f"  this design ({x.built}) serves calls {', '.join(map(str, serves)) or 'none'}")
    lines += [f"  call {i} ({x.sizes[i]}, {x.layouts[i]}) refused: {why}" for i, why in x.refused]
    return lines


def sim_text(r: SimResult, p: PlanInfo, verbose: bool = False) -> str:
    c = r.config
    lines = [plan_text(p), "", "simulation"]
    lines.append(f"  inputs        seed-generated: {r.inputs}")
    lines.append(f"  {'level':<20} {'bytes read':>16} {'bytes delivered':>16}  per channel (min..max)")
    for level, (read, delivered) in r.level_bytes().items():
        per = [t.bytes for t in r.traffic if t.level == level]
        lines.append(f"  {level:<20} {read:>16,} {delivered:>16,}  {len(per)} x {min(per):,}..{max(per):,}")
    if verbose:
        for t in r.traffic:
            lines.append(f"    {t.channel:<44} {t.level:<18} {t.bytes:>14,} read {t.delivered:>14,} delivered")
    else:
        busiest = max(r.traffic, key=lambda t: t.bytes)
        lines.append(f"  busiest channel {busiest.channel}: {busiest.bytes:,} B (-v lists every channel)")
    lines.append(f"  shim BDs live  max {max(r.max_live_bds.values())} per shim "
                 f"({', '.join(f'{k} {v}' for k, v in r.max_live_bds.items())})")
    per_core = set(r.kernel.calls_per_core.values())
    converts = f", {r.kernel.convert_calls:,} C conversions" if r.kernel.convert_calls else ""
    lines.append(f"  kernel calls   {r.kernel.matmul_calls:,} matmul ({', '.join(str(x) for x in sorted(per_core))} "
                 f"per core){converts}, {r.kernel.tiles_done:,} output tiles completed")
    kind = "bit-exact" if c.types.t_out.is_float else "exact"
    lines.append(f"  reference      {r.elements - r.mismatches:,} of {r.elements:,} outputs equal ({kind}, "
                 f"{c.kernel.rounding} rounding; accumulation: {c.numerics.accumulation})")
    if r.first_mismatch:
        i, j, got, want = r.first_mismatch
        lines.append(f"  first mismatch C[{i}, {j}] = {got!r}, expected {want!r}")
    if r.epilogue is not None:  # C is act(A @ B + bias), or its requantization: measured against that
        e = c.epilogue.for_call(r.call.activation)
        target = ("the real requantization of A @ B + bias" if e.requant is not None else
                  f"float64 {e.activation.value}(A @ B{' + bias' if e.bias else ''})"
                  + (f" clamped to [{e.clamp[0]:g}, {e.clamp[1]:g}]" if e.clamp else ""))
        lines.append(f"  epilogue       vs {target}: {r.epilogue.text()} (bias and scales drawn from the seed)")
    else:
        lines.append(f"  vs exact A @ B {r.accuracy.text()}")
    if r.accuracy_given is not None:
        lines.append(f"  before bfp16   {r.accuracy_given.text()} (A @ B of the values before the host quantized them)")
    if not c.types.t_out.is_float:
        lines.append(f"  outputs        {r.nonzero_fraction:.1%} nonzero")
    for note in [*r.notes, *typical_loss_notes(c, r.call.activation)]:
        lines.append(f"  note           {note}")
    lines.append(f"  simulated in   {r.seconds:.1f} s")
    if not r.passed:
        lines.append(f"FAIL: {r.mismatches} of {r.elements} outputs differ from the reference")
    else:
        lines.append("PASS" if r.numerics_modelled else "PASS (data movement only: numerics not modelled)")
    return "\n".join(lines)


def typical_loss_notes(c: GemmConfig, activation: str | None) -> list[str]:
    """What real data loses on this path and the seeded inputs do not show (facts/accuracy.py's measured figures):
    npu2's
    bfp16 datapath for bf16, and the tanh-form SiLU / GELU."""
    notes = []
    if c.types.dtype_in == "bf16" and str(c.types.dtype_b) == "bf16" and c.numerics.bfp16_inputs:
        notes.append(f"on real data expect about {BFP16_DATAPATH:.2%} relative (Frobenius) error against A @ B, "
                     f"not the {ONE_BF16_ROUNDING:.2%} of one bf16 rounding: {c.array.device}'s bfp16 datapath "
                     "quantizes A and B (measured on N(0, 1) bf16 inputs, scripts/accuracy_table.py; elementwise, "
                     "an output near zero can be off by more than its own size); the default "
                     "seeded inputs are exact in bfp16 and do not show it (--inputs wide does); "
                     "--emulate-bf16-mmul-with-bfp16 0 keeps plain bf16")
    act = c.epilogue.for_call(activation).activation.value
    if act in ACTIVATION_TAIL:
        notes.append(f"{act} as mlir-aie computes it (tanh form in bf16) errs by up to {ACTIVATION_TAIL[act]:.0%} "
                     "elementwise where |target| >= 2^-6 on N(0, 1) data, in the negative tail where 1 + tanh(.) "
                     "cancels; normwise it adds little to the path's error (docs/epilogues.md section 1)")
    return notes


def _epilogue_lines(e: Epilogue, call: CallPlan) -> list[str]:
    """The fused epilogue, when there is one: what C's conversion applies, and the tile B carries."""
    if e.is_identity:
        return []
    act = ([f"runtime activation (one of {', '.join(a.value for a in e.modes)}, selected per call)"] if e.runtime
           else [e.activation.value] if e.activation.value != "none" else [])
    what = (["bias"] if e.bias else []) + act
    what += ([f"clamp [{e.clamp[0]:g}, {e.clamp[1]:g}]"] if e.clamp else [])
    what += ["per-channel requantization (TFLite, double rounding)"] if e.requant else []
    tile = (f"; its data in one more k-step of B per column tile ({call.b_extra_k} rows past K's walk, one more B "
            f"object per output tile)" if e.needs_tile else "")
    return [f"epilogue  {', '.join(what)}, once per C tile in its conversion{tile}"]


def calls_text(results: list[SimResult], p: PlanInfo) -> str:
    """Several sizes simulated on one design: the plan, then a line per call."""
    c = results[0].config
    served = SERVED[c.runtime.runtime_sizes]
    lines = [plan_text(p), "", f"one design, {len(results)} calls (it serves {served}; built once, never rebuilt)"]
    for i, r in enumerate(results):
        call = r.call
        copies = ", ".join(f"{x.operand} ({x.why})" for x in call.copies) or "none"
        kind = "bit-exact" if c.types.t_out.is_float else "exact"
        verdict = "PASS" if r.passed else f"FAIL ({r.mismatches} of {r.elements} outputs differ)"
        lines.append(f"  call {i}  {call.problem} ({call.layouts.describe()}): {verdict}, "
                     f"{r.elements - r.mismatches:,} of {r.elements:,} outputs equal ({kind}); "
                     f"{call.m_blocks * call.n_blocks} task groups, {call.k_walk // c.tiling.k} k-steps per tile, "
                     f"{r.seconds:.1f} s")
        lines.append(f"          host copies: {copies}; K tail: {call.k_tail}")
    ok = all(r.passed for r in results)
    lines.append(f"PASS: one design served all {len(results)} sizes" if ok else
                 f"FAIL: {sum(not r.passed for r in results)} of {len(results)} sizes differ from the reference")
    return "\n".join(lines)

