"""Predicted end-to-end time of a whole-array GEMM design (vectorised over candidate tilings).

    T = dispatch + fill + max(T_core, T_mem) + drain + groups * bubble

T_core (all cores run in lockstep; eq. 9 of Striking with the efficiency spelled out):
    tiles per core x [k_steps x max(rho x (kernel on m/rho rows + switch), L1 DMA of A or B)
                      + zero kernel + switch + C drain to the memtile (single C buffer, sec. 5.3.2)]
    (with asymmetric tile buffering each k-step makes rho kernel calls, one per A tile: atb eq. 13-15)
T_mem (eq. 10 with a run-length dependent bandwidth):
    max( sum over A, B, C of (bytes + runs x run_overhead) / peak_bw ,  busiest shim channel / stream rate )
fill / drain: the first A and B memtile objects and the last C block cross DRAM unoverlapped.
bubble: a task group's BD (re)configuration by the command processor, hidden behind the other
    queued groups; with one group in flight it also waits for the group's C drain and refill (sec. 5.3.3).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import l1_banks
from .. import precision as prec
from ..call import Problem as CallProblem
from ..call import plan_call
from ..config import RTP_WORDS, GemmConfig
from ..dtypes import dtype
from ..errors import GemmGenError
from ..hw.devices import Device, device
from ..l1_banks import L1Plan
from ..precision import Precision
from . import kernel as kmod
from .l1_stall import stall_cycles
from .params import Params, load
from .traffic import TensorTraffic, analytic_traffic

GIGA = 1e9


@dataclass(frozen=True)
class Problem:
    """Everything of a GemmConfig except the tiling (m, k, n, k_mt)."""

    device: str
    M: int
    K: int
    N: int
    dtype_in: str = "bf16"
    dtype_out: str = "bf16"
    b_col_maj: bool = False
    emulate_bf16_with_bfp16: bool | None = None  # None: the device's default, as in GemmConfig
    mmul_shape: tuple[int, int, int] | None = None
    queue_groups: int = 4
    depth_ab_l1: int = 2
    depth_ab_l2: int = 2
    depth_c_l1: int = 1
    depth_c_l2: int = 1
    rows: int = 4
    cols: int = 0
    stack_bytes: int = 0
    compiler: str | None = None  # None: GemmConfig's default (chess for bfp16, else peano)
    dtype_b: str | None = None
    acc: str | None = None
    b_pack: str = "tiles"
    expansion: tuple[int, int] | None = None  # the kernel variant; None: the automatic one per tile
    kernel_loops: str | None = None
    convert_once: bool | None = None  # None: GemmConfig's default (on wherever it can be built)
    runtime_sizes: str = "fixed"  # GemmConfig.runtime_sizes: "mnk" cores read their k-steps each call

    def __post_init__(self) -> None:
        # the option defaults are GemmConfig's: resolve them through one probe config
        probe = self.config(0, 0, 0, 0)
        for name in ("emulate_bf16_with_bfp16", "compiler", "dtype_b", "acc", "convert_once"):
            object.__setattr__(self, name, getattr(probe, name))

    @classmethod
    def of(cls, c: GemmConfig, call: CallProblem | None = None) -> Problem:
        """The config's problem, or one call of it at another size (`call`)."""
        size = call or CallProblem(c.M, c.K, c.N)
        return cls(c.device, size.M, size.K, size.N, c.dtype_in, c.dtype_out, c.b_col_maj,
                   bool(c.emulate_bf16_with_bfp16), c.mmul_shape, c.queue_groups, c.depth_ab_l1, c.depth_ab_l2,
                   c.depth_c_l1, c.depth_c_l2, c.rows, c.cols, c.stack_bytes, c.compiler, c.dtype_b, c.acc, c.b_pack,
                   c.expansion, c.kernel_loops, c.convert_once, c.runtime_sizes)

    def config(self, m: int, k: int, n: int, k_mt: int, **kw: object) -> GemmConfig:
        return GemmConfig(self.device, self.M, self.K, self.N, int(m), int(k), int(n), int(k_mt), self.dtype_in,
                          self.dtype_out, self.b_col_maj, rows=self.rows, cols=self.cols,
                          emulate_bf16_with_bfp16=self.emulate_bf16_with_bfp16, mmul_shape=self.mmul_shape,
                          stack_bytes=self.stack_bytes, queue_groups=self.queue_groups,
                          depth_ab_l1=self.depth_ab_l1, depth_ab_l2=self.depth_ab_l2, depth_c_l1=self.depth_c_l1,
                          depth_c_l2=self.depth_c_l2, compiler=self.compiler, dtype_b=self.dtype_b, acc=self.acc,
                          b_pack=self.b_pack, expansion=self.expansion, kernel_loops=self.kernel_loops,
                          convert_once=self.convert_once, runtime_sizes=self.runtime_sizes,
                          **kw)  # type: ignore[arg-type]

    @property
    def dev(self) -> Device:
        return device(self.device)

    @property
    def b_chunked(self) -> bool:
        """B reaches the memtile in k_mt chunks of column-major tiles (else one k x n object at a time)."""
        return self.b_col_maj and self.b_pack == "tiles"

    @property
    def stack(self) -> int:
        """The core stack the design gets (stack_bytes, or GemmConfig's default for these options)."""
        return self.config(0, 0, 0, 0).stack_bytes

    @property
    def ncols(self) -> int:
        return self.cols or self.dev.columns

    @property
    def mmul(self) -> tuple[int, int, int]:
        return tuple(self.config(0, 0, 0, 0).mmul)  # type: ignore[return-value]

    @property
    def kernel_shape(self) -> kmod.KernelShape:
        return kmod.kernel_shape(self.dev, self.dtype_in, self.dtype_out, self.mmul, bool(self.emulate_bf16_with_bfp16),
                                 self.dtype_b, self.acc, self.expansion, self.kernel_loops, bool(self.convert_once))

    @property
    def precision(self) -> Precision:
        return prec.resolve(self.dtype_in, self.dtype_b, self.dtype_out, self.acc)

    @property
    def elem_bytes(self) -> tuple[float, float, float, float]:
        """Bytes per value of A, B, C (in DRAM and its L1 object) and C's L1 accumulator."""
        return tuple(dtype(str(t)).elem_bytes for t in (self.dtype_in, self.dtype_b, self.dtype_out,
                                                         self.acc))  # type: ignore[return-value]

    @property
    def macs(self) -> int:
        return self.M * self.K * self.N


@dataclass
class Estimate:
    """Arrays (one entry per candidate) of the predicted quantities; times in seconds."""

    time: np.ndarray
    t_core: np.ndarray
    t_mem: np.ndarray
    t_dram: np.ndarray
    t_port: np.ndarray
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
    groups: np.ndarray
    l1_stall_cycles: np.ndarray | float = 0.0  # per k-step (model/l1_stall.py)
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def memory_bound(self) -> np.ndarray:
        return np.asarray(self.t_mem > self.t_core)


def dram_lds(pr: Problem, k_mt: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Elements between rows of A's, B's (as stored) and C's DRAM buffers for each candidate: the
    problem's own sizes where the call plan leaves an operand on the array, the padded extent where
    the host pads it (gemm_gen/call.py decides; only k_mt and n can change its decision)."""
    k_mt, n = np.broadcast_arrays(np.asarray(k_mt, dtype=np.int64), np.asarray(n, dtype=np.int64))
    pairs, inverse = np.unique(np.stack([k_mt.ravel(), n.ravel()]), axis=1, return_inverse=True)
    lds = np.array([_lds(pr, int(km), int(nn)) for km, nn in pairs.T], dtype=np.int64).reshape(-1, 3)
    out = lds[inverse.ravel()]
    return tuple(out[:, i].reshape(k_mt.shape) for i in range(3))  # type: ignore[return-value]


@functools.lru_cache(maxsize=4096)
def _lds(pr: Problem, k_mt: int, n: int) -> tuple[int, int, int]:
    call = plan_call(pr.config(pr.dev.core_rows, k_mt, n, k_mt), CallProblem(pr.M, pr.K, pr.N))
    return call.ld("A"), call.ld("B"), call.ld("C")


def _round_up(x: np.ndarray | np.integer, q: np.ndarray) -> np.ndarray:
    return np.asarray(-(-x // q) * q)


def estimate(pr: Problem, m: np.ndarray | int, k: np.ndarray | int, n: np.ndarray | int,
             k_mt: np.ndarray | int, params: Params | None = None,
             traffic: dict[str, TensorTraffic] | None = None,
             tasks_per_group: int | None = None, rho: np.ndarray | int = 1,
             l1_stall: np.ndarray | float = 0.0) -> Estimate:
    """Predict every candidate (m, k, n, k_mt, rho) of one problem; arrays broadcast against each other.

    `traffic` (bytes and runs per tensor from a Design's runtime sequence) replaces the closed-form
    count when given; `tasks_per_group` likewise (shim tasks per output block). `l1_stall`: cycles
    per k-step the core waits on L1 banks it shares with the DMA (model/l1_stall.py), spread over
    the k-step's calls: they count as kernel time, as a trace of the running kernel would see them.
    """
    p = params or load()
    dev = pr.dev
    rows, cols = pr.rows, pr.ncols
    f_hz = dev.clock_ghz * GIGA
    b_a, b_b, b_out, b_acc = pr.elem_bytes
    ks = pr.kernel_shape
    isa = dev.isa
    sbw = p.stream_bytes_per_cycle
    m, k, n, k_mt, rho = (np.asarray(x, dtype=np.int64) for x in (m, k, n, k_mt, rho))

    Mp = _round_up(np.int64(pr.M), m * rows)
    Kp = _round_up(np.int64(pr.K), k_mt)
    Np = _round_up(np.int64(pr.N), n * cols)
    m_blocks, n_blocks = Mp // (m * rows), Np // (n * cols)
    groups = m_blocks * n_blocks
    k_steps = Kp // k

    # ---- compute side (cycles of one core) ------------------------------------------------
    # one call: an A tile of T_MA = m / rho rows, with its share of the k-step's L1 bank stalls
    kcyc = kmod.kernel_cycles(p, ks, m // rho, k, n) + np.asarray(l1_stall, dtype=np.float64) / rho
    l1_dma = np.maximum(m * k * b_a, k * n * b_b) / sbw  # A and B arrive on separate core channels
    b_convert = kmod.b_conversion_cycles(ks, k, n)  # convert-once bf16: B once per k-step
    step = np.maximum(rho * (kcyc + p.switch_cycles) + b_convert, l1_dma)
    zero = m * n * b_acc / isa.vst_bytes + p.switch_cycles
    if pr.precision.converts_c:  # C's final conversion: read the accumulator, write C, one more call
        zero = zero + m * n * (b_acc / isa.vld_bytes + b_out / isa.vst_bytes) + p.switch_cycles
    c_to_l2 = m * n * b_out / sbw
    c_stall = c_to_l2 if pr.depth_c_l1 == 1 else np.zeros_like(c_to_l2)
    tile = k_steps * step + zero + c_stall
    t_core = groups * tile / f_hz

    # ---- memory side ---------------------------------------------------------------------
    if traffic is None:
        types = (dtype(pr.dtype_in), dtype(str(pr.dtype_b)), dtype(pr.dtype_out))
        traffic = analytic_traffic(rows, cols, types, pr.b_col_maj, m, k_mt, n, Mp, Kp, Np, pr.b_pack,
                                   dram_lds(pr, k_mt, n))
    dram = p.dram[dev.name]
    bw = dram.peak_gbps * GIGA
    lost = dram.run_overhead_bytes
    chi = dram.coalescing
    t_tensor = {name: (tr.bytes + tr.effective_runs(chi) * lost) / bw for name, tr in traffic.items()}
    t_dram = np.asarray(sum(t_tensor.values()), dtype=np.float64)
    a_shims = min(rows, cols)  # fewer columns than rows: one A shim serves several core rows
    per_channel = np.maximum(np.maximum(traffic["A"].bytes / a_shims, traffic["B"].bytes / cols),
                             traffic["C"].bytes / cols)
    t_port = per_channel / (sbw * f_hz)
    t_mem = np.maximum(t_dram, t_port)

    # ---- pipeline fill and drain, BD queue, dispatch ---------------------------------------
    k_first = np.minimum(k_mt, Kp)
    a_obj = rows * m * k_first * b_a
    a_obj_runs = np.where(Kp > k_mt, rows * m, rows)
    b_l2_k = k_first if pr.b_chunked else k
    b_obj = cols * n * b_l2_k * b_b
    side = 1.0 - chi + chi / cols  # lockstep side-by-side strips of all columns
    b_obj_runs: Any
    if pr.b_pack == "strips":  # each column's strip is one run
        b_obj_runs = cols * side
    else:
        b_obj_runs = np.where(Kp > k_mt, cols * n, cols) if pr.b_col_maj else cols * k * side
    t_refill = (a_obj + b_obj + (a_obj_runs + b_obj_runs) * lost) / bw
    c_block = cols * rows * m * n * b_out
    t_c_dram = (c_block + cols * rows * m * side * lost) / bw
    t_c_stream = rows * m * n * b_out / (sbw * f_hz)
    t_drain_block = np.maximum(t_c_dram, t_c_stream) + c_to_l2 / f_hz
    tasks = tasks_per_group if tasks_per_group is not None else a_shims + 2 * cols
    t_cp = tasks * p.bd_task_us * 1e-6
    body = np.maximum(t_core, t_mem)
    t_group = body / groups
    if pr.queue_groups <= 1:
        bubble = t_cp + t_drain_block + t_refill
    else:
        bubble = np.maximum(0.0, t_cp - (pr.queue_groups - 1) * t_group)
    t_bubbles = groups * bubble
    # a design that serves many K reads its k-steps from runtime parameters: the sequence writes
    # each word into each core's memory before the transfers
    rtp_words = RTP_WORDS * rows * cols if pr.runtime_sizes == "mnk" else 0
    t_dispatch = (p.dispatch_us + rtp_words * p.rtp_write_us) * 1e-6
    time = t_dispatch + t_refill + body + t_drain_block + t_bubbles

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
        l1_stall_cycles=l1_stall,
    )


def estimate_config(c: GemmConfig, params: Params | None = None, traffic: dict[str, TensorTraffic] | None = None,
                    tasks_per_group: int | None = None, plan: L1Plan | None = None,
                    call: CallProblem | None = None) -> Estimate:
    """estimate() of one config with its L1 bank stalls: the plan (the config's allocator, as
    l1_banks.plan chooses it, unless given) and the stall it costs at the predicted call time;
    `call`: one call of a design that serves many sizes (its blocks cover the call's sizes, whole)."""
    p = params or load()
    pr = Problem.of(c, call)
    e = estimate(pr, c.m, c.k, c.n, c.k_mt, p, traffic, tasks_per_group, c.rho)
    if not p.l1_conflict:  # a shared bank costs nothing: no plan needed
        return e
    if plan is None:
        try:
            plan = l1_banks.plan(c, c.l1_alloc)
        except GemmGenError:  # a design past its L1 budget (predict still prices it): no layout
            return e
    stall = stall_cycles(c, plan, float(e.kernel_cycles), p.l1_conflict)
    return e if stall == 0 else estimate(pr, c.m, c.k, c.n, c.k_mt, p, traffic, tasks_per_group, c.rho, stall)
