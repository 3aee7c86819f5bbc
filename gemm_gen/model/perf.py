"""Predicted end-to-end time of a whole-array GEMM design (vectorised over candidate tilings).

    T = dispatch + max(T_core + fill + drain, T_mem) + BD setup

T_core (all cores run in lockstep; eq. 9 of Striking with the efficiency spelled out):
    tiles per core x [k_steps x max(rho x (kernel on m/rho rows + switch), L1 DMA of A or B)
                      + zero kernel + switch + C drain to the memtile (single C buffer, sec. 5.3.2)]
    (with asymmetric tile buffering each k-step makes rho kernel calls, one per A tile: atb eq. 13-15)
T_mem (eq. 10 with the DRAM path's structure):
    max( sum over A, B, C of (bytes x write_cost for C + runs x run_overhead) / peak_bw  (the shared path),
         busiest shim stream / its port rate,  busiest shim stream / what one stream keeps in flight )
    runs: contiguous DRAM runs; the boundaries between side-by-side strips of lockstep columns fall
    in an open page with probability page_sharing. With S streams of equal load the bandwidth is
    min(peak_bw, S x stream_bw) less the run overheads.
Fused epilogue (model/epilogue_cost.py, UNCALIBRATED): its vector operations per output tile join C's
    conversion; its tile is one more B object per output tile on the core's B channel, exposed where its
    transfer outlasts the conversion; B's DRAM bytes and runs grow by (k_steps + 1) / k_steps.
fill / drain: the first A and B memtile objects and the last C block cross DRAM unoverlapped
    (their bytes are part of T_mem, so a memory-bound run hides them).
BD setup: the command processor configures a task group's BDs while the array runs the previous
    group (a two-stage pipeline: the first setup, then only what a setup takes beyond a group's
    run); with one group in flight every group waits for its setup, fill and drain (sec. 5.3.3).
Every term grows with the work and the costs, so the prediction is monotone in each resource.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..design import l1_banks
from ..design.build import group_blocks
from ..design.l1_banks import L1Plan
from ..facts.devices import Device, TileKind
from ..facts.dtypes import dtype
from ..facts.epilogue import Epilogue
from ..facts.errors import GemmGenError
from ..spec.call import plan_call
from ..spec.config import GemmConfig
from ..spec.request import Problem
from ..spec.rules import decode_split, memtile, padding
from ..spec.rules.block_loop import BlockLoop
from ..spec.rules.dequant import dequant_code_bytes, to_bfp16
from ..spec.rules.l1 import runtime_writes
from ..spec.rules.padding import covered
from . import dequant_cost, epilogue_cost, shared_cost
from . import kernel as kmod
from .l1_stall import stall_cycles
from .params import Params, load
from .traffic import TensorTraffic, analytic_traffic

GIGA = 1e9


@dataclass(frozen=True)
class Workload:
    """What the model prices: a design's options (`base`, a GemmConfig whose tiling the model
    chooses: its m, k, n, k_mt, rho are ignored) at one call size (`size`)."""

    base: GemmConfig
    size: Problem
    # a bfp16 kernel's loop when it is not the one our template renders: a published kernel the model
    # prices to check itself against that kernel's measurements (None: ours, rules.block_loop)
    block_loop: BlockLoop | None = None
    # the fused epilogue priced (None: the config's own, GemmConfig.epilogue once the options carry one,
    # else none)
    epilogue: Epilogue | None = None

    @classmethod
    def of(cls, c: GemmConfig, call: Problem | None = None, block_loop: BlockLoop | None = None,
           epilogue: Epilogue | None = None) -> Workload:
        """The config's own workload, or one call of it at another size (`call`)."""
        return cls(c.with_(m=0, k=0, n=0, k_mt=0, rho=1), call or Problem(c.size.M, c.size.K, c.size.N), block_loop,
                   epilogue)

    @classmethod
    def new(cls, device: str, M: int, K: int, N: int, dtype_in: str = "bf16", dtype_out: str = "bf16",
            b_col_maj: bool = False, **options: Any) -> Workload:
        """A workload from its sizes and a GemmConfig's options (their defaults where not given)."""
        return cls.of(GemmConfig(device, M, K, N, 0, 0, 0, 0, dtype_in, dtype_out, b_col_maj, **options))

    def with_(self, M: int | None = None, K: int | None = None, N: int | None = None, **options: Any) -> Workload:
        """Another size, or other options."""
        size = Problem(M or self.M, K or self.K, N or self.N)
        return Workload(self.base.with_(M=size.M, K=size.K, N=size.N, **options), size, self.block_loop,
                        self.epilogue)

    @property
    def epi(self) -> Epilogue:
        """The epilogue priced: the given one, else the config's (read by name: GemmConfig gains the field
        with the epilogue options), else none."""
        if self.epilogue is not None:
            return self.epilogue
        own = getattr(self.base, "epilogue", None)
        return own if isinstance(own, Epilogue) else Epilogue()

    @property
    def M(self) -> int:
        return self.size.M

    @property
    def K(self) -> int:
        return self.size.K

    @property
    def N(self) -> int:
        return self.size.N

    def config(self, m: int, k: int, n: int, k_mt: int, **kw: object) -> GemmConfig:
        """The design with this tiling, built for this size."""
        return self.base.with_(M=self.M, K=self.K, N=self.N, m=int(m), k=int(k), n=int(n), k_mt=int(k_mt), **kw)

    @property
    def b_chunked(self) -> bool:
        """B reaches the memtile in k_mt chunks of column-major tiles (else one k x n object at a time)."""
        return memtile.b_chunked(self.base.layout.b_col_maj, self.base.layout.b_pack)

    @property
    def b_layout(self) -> str:
        """B's DRAM layout as the model prices its runs: a W4A16 B is each column's objects in k-step order
        (strips, whatever the packing option), else the config's packing."""
        return "strips" if self.base.groups.group_size else self.base.layout.b_pack

    @property
    def kernel_shape(self) -> kmod.KernelShape:
        c = self.base
        k = c.kernel
        return kmod.shape(c.dev, c.types, k.mmul, k.emulate_bf16_with_bfp16, k.expansion, k.kernel_loops,
                          k.convert_once, self.block_loop, c.layout.a_col_maj,
                          c.c_t_blocks and not c.types.precision.converts_c,
                          dequant_code_bytes(c.dev.name, c.groups.zero_points, k.mmul) if c.groups.group_size else 0,
                          k.compiler)

    @property
    def elem_bytes(self) -> tuple[float, float, float, float]:
        """Bytes per value of A, B, C (in DRAM and its L1 object) and C's L1 accumulator."""
        c = self.base
        return tuple(dtype(str(t)).elem_bytes for t in (c.types.dtype_in, c.types.dtype_b, c.types.dtype_out,
                                                         c.types.acc))  # type: ignore[return-value]

    @property
    def macs(self) -> int:
        return self.M * self.K * self.N

    def __str__(self) -> str:  # test ids
        c = self.base
        layout = "col" if c.layout.b_col_maj else "row"
        return f"{c.array.device}-{self.size}-{c.types.dtype_in}-{c.types.dtype_out}-{layout}"


@dataclass
class Estimate:
    """Arrays (one entry per candidate) of the predicted quantities; times in seconds."""

    time: np.ndarray
    t_core: np.ndarray
    t_mem: np.ndarray
    t_dram: np.ndarray
    t_port: np.ndarray
    t_stream: np.ndarray
    t_fill: np.ndarray
    t_drain: np.ndarray
    t_bubbles: np.ndarray
    t_dispatch: float
    kernel_cycles: np.ndarray
    kernel_macs_per_cycle: np.ndarray
    core_macs_per_cycle: np.ndarray  # incl. switching, zero kernel, C drain, L1 DMA waits
    tops: np.ndarray
    compute_bound_tops: np.ndarray
    memory_bound_tops: np.ndarray
    padded: tuple[np.ndarray, np.ndarray, np.ndarray]
    traffic: dict[str, TensorTraffic]
    effective_gbps: dict[str, np.ndarray]
    groups: np.ndarray  # output blocks
    spans: np.ndarray  # task groups: one per output block, or per span of blocks (design/spans.py)
    l1_stall_cycles: np.ndarray | float = 0.0  # per k-step: bank stalls (l1_stall.py), a shared pair's wait
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def memory_bound(self) -> np.ndarray:
        return np.asarray(self.t_mem > self.t_core)


def shim_stream_rates(p: Params, dev: Device) -> tuple[float, float]:
    """Bytes per second one shim stream carries at most: (its stream port's, 4 bytes a cycle; what the
    bursts it keeps in flight allow, at the largest burst, mlir-aie's burst_length 0)."""
    return (p.stream_bytes_per_cycle * (dev.clock_ghz * GIGA),
            p.dram[dev.name].stream_gbps(max(dev.shim_burst_bytes)) * GIGA)


def dram_lds(pr: Workload, k_mt: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Elements between rows of A's, B's (as stored) and C's DRAM buffers for each candidate: the
    problem's own sizes where the call plan leaves an operand on the array, the padded extent where
    the host pads it (gemm_gen/spec/call.py decides; only k_mt and n can change its decision)."""
    k_mt, n = np.broadcast_arrays(np.asarray(k_mt, dtype=np.int64), np.asarray(n, dtype=np.int64))
    pairs, inverse = np.unique(np.stack([k_mt.ravel(), n.ravel()]), axis=1, return_inverse=True)
    lds = np.array([_lds(pr, int(km), int(nn)) for km, nn in pairs.T], dtype=np.int64).reshape(-1, 3)
    out = lds[inverse.ravel()]
    return tuple(out[:, i].reshape(k_mt.shape) for i in range(3))  # type: ignore[return-value]


@functools.lru_cache(maxsize=4096)
def _lds(pr: Workload, k_mt: int, n: int) -> tuple[int, int, int]:
    # a config for the call's geometry only: no kernel is built for this tile, so none of its variant is asked
    geometry = pr.config(pr.base.dev.core_rows, k_mt, n, k_mt, expansion=None, kernel_loops=None)
    call = plan_call(geometry, Problem(pr.M, pr.K, pr.N))
    return call.ld("A"), call.ld("B"), call.ld("C")


def estimate(pr: Workload, m: np.ndarray | int, k: np.ndarray | int, n: np.ndarray | int,
             k_mt: np.ndarray | int, params: Params | None = None,
             traffic: dict[str, TensorTraffic] | None = None,
             tasks_per_group: int | None = None, rho: np.ndarray | int = 1,
             l1_stall: np.ndarray | float = 0.0, task_groups: int | None = None) -> Estimate:
    """Predict every candidate (m, k, n, k_mt, rho) of one problem; arrays broadcast against each other.

    `traffic` (bytes and runs per tensor from a Design's runtime sequence) replaces the closed-form
    count when given; `tasks_per_group` likewise (shim tasks per task group), and `task_groups` (one per
    output block, or per span of blocks with a task span: padding.task_groups otherwise). `l1_stall`: cycles
    per k-step the core waits on L1 banks it shares with the DMA (model/l1_stall.py), spread over
    the k-step's calls: they count as kernel time, as a trace of the running kernel would see them.
    """
    p = params or load()
    dev = pr.base.dev
    rows, cols = pr.base.array.rows, pr.base.array.cols
    split = decode_split.is_split(dev, rows, cols)  # one virtual column per core (spec/rules/decode_split.py)
    f_hz = dev.clock_ghz * GIGA
    b_a, b_b, b_out, b_acc = pr.elem_bytes
    ks = pr.kernel_shape
    isa = dev.isa
    sbw = p.stream_bytes_per_cycle
    m, k, n, k_mt, rho = (np.asarray(x, dtype=np.int64) for x in (m, k, n, k_mt, rho))
    g, zp = pr.base.groups.group_size, pr.base.groups.zero_points
    # W4A16: a B object is its int4 values and its scale (zero-point) rows (groupquant.ObjectLayout)
    b_obj_b = dequant_cost.b_bytes_per_value(k, n, g, zp) if g else np.float64(b_b)

    # what the call plan's whole blocks compute (spec/rules/padding.py, as gemm_gen/spec/call.py's CallPlan)
    Mp, Kp, Np = (np.asarray(x) for x in covered(np.int64(pr.M), np.int64(pr.K), np.int64(pr.N), m * rows, k_mt,
                                                 n * cols))
    m_blocks, n_blocks = Mp // (m * rows), Np // (n * cols)
    groups = m_blocks * n_blocks
    spans = task_groups if task_groups is not None else padding.task_groups(
        m_blocks, n_blocks, pr.base.runtime.task_span, dev.dma[TileKind.SHIM].iteration_wrap_max)
    k_steps = Kp // k

    # ---- compute side (cycles of one core) ------------------------------------------------
    # one call: an A tile of T_MA = m / rho rows, with its share of the k-step's L1 bank stalls and of the cycles a
    # core of a neighbour-shared pair waits on the other's loads (model/shared_cost.py, assumed rate)
    call = kmod.kernel_cycles(p, ks, m // rho, k, n)
    stall = np.asarray(l1_stall, dtype=np.float64) + shared_cost.two_reader_stall(
        pr.base, m // rho, k, n, rho, *kmod.cluster_shape(ks, m // rho, n), call)
    kcyc = call + stall / rho
    # A and B arrive on separate core channels; neighbour-shared L1 (model/shared_cost.py): B split brings B on two
    # streams side by side, and the relay's lag is exposed where the transfer bounds the k-step
    share = pr.base.array.share_l1
    l1_dma = (np.maximum(m * k * b_a, k * n * b_obj_b / shared_cost.b_streams(share)) / sbw
              + shared_cost.relay_cycles(share, p))
    b_convert = kmod.b_conversion_cycles(ks, k, n)  # convert-once bf16: B once per k-step
    # W4A16: the B object dequantized once per k-step into the tile the calls read, bf16 or (converting once)
    # bfp16 (uncalibrated)
    b_dequant = (dequant_cost.object_cycles(dev, k, n, g, zp, pr.base.kernel.mmul,
                                            to_bfp16(g, pr.base.kernel.convert_once)) if g
                 else np.zeros(np.broadcast(k, n).shape))
    step_loss = p.bfp16_step_cycles if ks.block else 0.0  # atb Table 1: per k-step, whatever rho
    step = np.maximum(rho * (kcyc + p.switch_cycles) + b_convert + b_dequant + step_loss, l1_dma)
    zero = m * n * b_acc / isa.vst_bytes + p.switch_cycles
    if pr.base.types.precision.converts_c:  # C's final conversion: read the accumulator, write C, one more call
        zero = zero + m * n * (b_acc / isa.vld_bytes + b_out / isa.vst_bytes) + p.switch_cycles
    epi = pr.epi
    epi_b = epilogue_cost.extra_b_objects(epi)
    if not epi.is_identity:  # the epilogue's vector operations in the conversion (uncalibrated)
        zero = zero + epilogue_cost.core_cycles(epi, m, n)
    if epi_b:  # its tile on the B channel: exposed where the transfer outlasts the conversion
        zero = zero + np.maximum(epi_b * k * n * b_b / sbw - zero, 0.0)
    c_to_l2 = m * n * b_out / sbw
    c_stall = c_to_l2 if pr.base.array.depth_c_l1 == 1 else np.zeros_like(c_to_l2)
    tile = k_steps * step + zero + c_stall
    t_core = groups * tile / f_hz

    # ---- memory side ---------------------------------------------------------------------
    if traffic is None:
        types = (dtype(pr.base.types.dtype_in), dtype(str(pr.base.types.dtype_b)), dtype(pr.base.types.dtype_out))
        traffic = analytic_traffic(rows, cols, types, pr.base.layout.b_col_maj, m, k_mt, n, Mp, Kp, Np, pr.b_layout,
                                   dram_lds(pr, k_mt, n), pr.base.layout.a_col_maj, pr.base.layout.c_col_maj, epi_b * k,
                                   b_obj_b / b_b, k if split else 0)
    dram = p.dram[dev.name]
    bw = dram.peak_gbps * GIGA
    lost = dram.run_overhead_bytes
    chi = dram.page_sharing
    cost = {"A": 1.0, "B": 1.0, "C": dram.write_cost}  # C is the only tensor written
    t_tensor = {name: (tr.bytes * cost[name] + tr.effective_runs(chi) * lost) / bw for name, tr in traffic.items()}
    t_dram = np.asarray(sum(t_tensor.values()), dtype=np.float64)
    # every shim stream is also bounded alone: by its stream port, and by the bursts it keeps in flight
    a_shims = memtile.a_shims(rows, cols)  # fewer columns than rows: one A shim serves several core rows
    # the split decode placement: B's busiest channel carries its longest run of cores, C's each physical
    # column's core_rows tiles (spec/rules/decode_split.py); else a channel per column
    b_share, c_share = (decode_split.b_channel_share(dev), 1 / dev.columns) if split else (1 / cols, 1 / cols)
    c_tiles = dev.core_rows if split else rows  # C tiles one shim channel drains per output block
    per_channel = np.maximum(np.maximum(traffic["A"].bytes / a_shims, traffic["B"].bytes * b_share),
                             traffic["C"].bytes * c_share)
    port_bps, flight_bps = shim_stream_rates(p, dev)
    t_port = per_channel / port_bps
    t_stream = per_channel / flight_bps
    t_mem = np.maximum(np.maximum(t_dram, t_port), t_stream)

    # ---- pipeline fill and drain, BD queue, dispatch ---------------------------------------
    k_first = np.minimum(k_mt, Kp)
    a_obj = rows * m * k_first * b_a
    # the first A objects: rows strips of m rows (one run each when they hold all of K); A^T's k_first
    # rows of m per core row when column-major
    a_obj_runs = rows * k_first if pr.base.layout.a_col_maj else np.where(Kp > k_mt, rows * m, rows)
    b_l2_k = k_first if pr.b_chunked else k
    b_obj = cols * n * b_l2_k * b_obj_b
    side = 1.0 - chi + chi / cols  # lockstep side-by-side strips of all columns
    b_obj_runs: Any
    if pr.b_layout == "strips":  # each column's strip is one run
        b_obj_runs = cols * side
    else:
        b_obj_runs = np.where(Kp > k_mt, cols * n, cols) if pr.base.layout.b_col_maj else cols * k * side
    t_refill = (a_obj + b_obj + (a_obj_runs + b_obj_runs) * lost) / bw
    c_block = cols * rows * m * n * b_out
    c_block_runs = cols * rows * n if pr.base.layout.c_col_maj else cols * rows * m * side  # C^T: a run per column
    t_c_dram = (c_block * dram.write_cost + c_block_runs * lost) / bw
    t_c_stream = c_tiles * m * n * b_out / (sbw * f_hz)
    t_drain_block = np.maximum(t_c_dram, t_c_stream) + c_to_l2 / f_hz
    tasks = tasks_per_group if tasks_per_group is not None else padding.tasks_per_group(a_shims, cols, dev, rows)
    t_cp = tasks * p.bd_task_us * 1e-6
    # The array: the first objects arrive and the last C block leaves unoverlapped, unless DRAM is
    # busy all along anyway (their bytes are in t_mem: counted once). The command processor
    # configures group g + 1 while the array runs group g (a two-stage pipeline; one queued group
    # is enough to overlap); with one group in flight every group waits for its own setup, fill
    # and drain. A group is one output block, or a span of them (design/spans.py): its tasks move
    # every block of the span, so the setup is paid once per span.
    if pr.base.runtime.queue_groups <= 1:
        array = np.maximum(t_core + spans * (t_refill + t_drain_block), t_mem)
        t_bubbles = spans * t_cp
    else:
        array = np.maximum(t_core + t_refill + t_drain_block, t_mem)
        t_bubbles = t_cp + (spans - 1) * np.maximum(0.0, t_cp - array / spans)
    # a design that reads runtime parameters (a runtime K, the tiles of a call, a runtime activation): the
    # sequence writes each word into each core's memory before the transfers, then sets each core's barrier.
    # Assumed: the barrier's set, one write32 of a lock register (aiex.set_lock), costs what a parameter's
    # write32 costs; the core's wait and release are two lock instructions per call, left out (a few cycles
    # against the call's microseconds).
    writes = runtime_writes(pr.base.runtime.runtime_sizes, pr.base.epilogue.runtime) * rows * cols
    t_dispatch = (p.dispatch_us + writes * p.rtp_write_us) * 1e-6
    time = t_dispatch + array + t_bubbles

    ops = 2.0 * pr.macs
    padded_macs = (Mp * Kp * Np).astype(np.float64)
    cores = rows * cols
    core_cycles = t_core * f_hz
    return Estimate(
        time=np.asarray(time, dtype=np.float64),
        t_core=np.asarray(t_core, dtype=np.float64),
        t_mem=np.asarray(t_mem, dtype=np.float64),
        t_dram=t_dram,
        t_port=np.asarray(t_port, dtype=np.float64),
        t_stream=np.asarray(t_stream, dtype=np.float64),
        t_fill=np.asarray(t_refill, dtype=np.float64),
        t_drain=np.asarray(t_drain_block, dtype=np.float64),
        t_bubbles=np.asarray(t_bubbles, dtype=np.float64),
        t_dispatch=t_dispatch,
        kernel_cycles=kcyc,
        kernel_macs_per_cycle=np.asarray((m // rho) * k * n / kcyc, dtype=np.float64),
        core_macs_per_cycle=np.asarray(padded_macs / cores / core_cycles, dtype=np.float64),
        tops=np.asarray(ops / time / 1e12, dtype=np.float64),
        compute_bound_tops=np.asarray(ops / t_core / 1e12, dtype=np.float64),
        memory_bound_tops=np.asarray(ops / t_mem / 1e12, dtype=np.float64),
        padded=(Mp, Kp, Np),
        traffic=traffic,
        effective_gbps={name: np.asarray(traffic[name].bytes / t / GIGA, dtype=np.float64)
                        for name, t in t_tensor.items()},
        groups=groups,
        spans=np.asarray(spans),
        l1_stall_cycles=stall,
        extra={**({"epilogue_cycles_per_tile": epilogue_cost.core_cycles(epi, m, n)} if not epi.is_identity else {}),
               **({"dequant_cycles_per_object": b_dequant} if g else {})},
    )


def estimate_config(c: GemmConfig, params: Params | None = None, traffic: dict[str, TensorTraffic] | None = None,
                    tasks_per_group: int | None = None, plan: L1Plan | None = None,
                    call: Problem | None = None, block_loop: BlockLoop | None = None,
                    epilogue: Epilogue | None = None, task_groups: int | None = None) -> Estimate:
    """estimate() of one config, not built into a Design (the tuner's closed form at one tiling, and calibration
    over measured configs; a built Design is priced by model/price.estimate), with its L1 bank stalls: the plan
    (the config's allocator, as l1_banks.plan chooses it, unless given) and the stall it costs at the kernel's
    call time; `call`: one call of a design that serves many sizes (its blocks cover the call's sizes, whole);
    `block_loop`: a published bfp16 kernel's loop in place of ours (Workload.block_loop); `epilogue`: the
    fused epilogue priced (Workload.epilogue; None: the config's own); `task_groups`: the design's (None:
    its runtime sequence's count, a task span's spans as the design groups them)."""
    p = params or load()
    pr = Workload.of(c, call, block_loop, epilogue)
    if task_groups is None and c.runtime.task_span != 1:
        task_groups = len(group_blocks(c, c.call if call is None else plan_call(c, call)))
    if plan is None and p.l1_conflict:
        try:
            plan = l1_banks.plan(c, c.array.l1_alloc)
        except GemmGenError:  # a design past its L1 budget (predict still prices it): no layout, no stall
            plan = None
    return priced(pr, c, p, traffic, tasks_per_group, plan, task_groups)


def priced(pr: Workload, c: GemmConfig, p: Params, traffic: dict[str, TensorTraffic] | None,
           tasks_per_group: int | None, plan: L1Plan | None, task_groups: int | None) -> Estimate:
    """estimate() at c's tiling, once, with the L1 bank stalls `plan` costs at the kernel's call time (the stall
    depends on the kernel's cycles alone, which it does not change: no second pricing)."""
    m, k, n, k_mt, rho = (np.asarray(x, dtype=np.int64) for x in (c.tiling.m, c.tiling.k, c.tiling.n, c.tiling.k_mt,
                                                                  c.tiling.rho))
    stall = 0.0
    call_cycles = float(kmod.kernel_cycles(p, pr.kernel_shape, m // rho, k, n))
    if p.l1_conflict and plan is not None:
        stall = stall_cycles(c, plan, call_cycles, p.l1_conflict)
    return estimate(pr, c.tiling.m, c.tiling.k, c.tiling.n, c.tiling.k_mt, p, traffic, tasks_per_group, c.tiling.rho,
                    stall, task_groups)
