"""simulate(): run a Design on seeded inputs and check it against the exact reference."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from ..config import GemmConfig
from ..design import Design, build_design
from ..errors import DeadlockError, LayoutError, SimulationError
from ..hostdata import host_values, output_bytes, output_values, pad_inputs
from ..inputs import exact_bound, make_inputs
from ..numerics import reference, truth
from . import words as w
from .kernel import KernelEmulator, KernelStats
from .lower import Machine, lower
from .machine import Actor


@dataclass
class Traffic:
    level: str
    channel: str
    bytes: int  # read by the MM2S side
    delivered: int  # written by all S2MM sides (a broadcast delivers several copies)


@dataclass
class SimResult:
    config: GemmConfig
    passed: bool
    seconds: float
    elements: int
    mismatches: int
    first_mismatch: tuple[int, int, float, float] | None
    max_abs_error: float
    mean_abs_error: float
    max_rel_error: float  # max |C - truth| / max |truth|
    saturated_fraction: float
    nonzero_fraction: float
    traffic: list[Traffic]
    max_live_bds: dict[str, int]
    kernel: KernelStats
    core_passes: int
    inputs: str
    numerics_modelled: bool = True  # False: only data movement is checked (see notes)
    notes: list[str] = field(default_factory=list)

    def level_bytes(self) -> dict[str, tuple[int, int]]:
        out: dict[str, tuple[int, int]] = {}
        for t in self.traffic:
            b, d = out.get(t.level, (0, 0))
            out[t.level] = (b + t.bytes, d + t.delivered)
        return out

    def to_json(self) -> dict[str, object]:
        return {
            "config": self.config.to_json(),
            "passed": self.passed,
            "seconds": round(self.seconds, 3),
            "elements": self.elements,
            "mismatches": self.mismatches,
            "first_mismatch": self.first_mismatch,
            "max_abs_error": self.max_abs_error,
            "mean_abs_error": self.mean_abs_error,
            "max_rel_error": self.max_rel_error,
            "saturated_fraction": self.saturated_fraction,
            "nonzero_fraction": self.nonzero_fraction,
            "levels": {k: {"bytes": v[0], "delivered": v[1]} for k, v in self.level_bytes().items()},
            "channels": [t.__dict__ for t in self.traffic],
            "max_live_bds_per_shim": self.max_live_bds,
            "kernel_calls": {"matmul": self.kernel.matmul_calls, "zero": self.kernel.zero_calls,
                             "convert": self.kernel.convert_calls,
                             "tiles_done": self.kernel.tiles_done,
                             "per_core": self.kernel.calls_per_core},
            "acc32_overflows": self.kernel.acc_overflows,
            "inputs": self.inputs,
            "numerics_modelled": self.numerics_modelled,
            "notes": self.notes,
        }


def host_tensors(design: Design, a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    """DRAM contents: A and B zero-padded to the native multiple (B transposed when column-major)."""
    return dram_cells(design.config, *pad_inputs(design.config, a, b))


def dram_cells(c: GemmConfig, a_pad: np.ndarray, b_pad: np.ndarray) -> dict[str, np.ndarray]:
    """The simulator's DRAM: the host buffers of A and B as provenance-carrying cells, C empty."""
    c_words = output_bytes(c) // 4
    for name, words in (("A", a_pad.nbytes // 4), ("B", b_pad.nbytes // 4), ("C", c_words)):
        if words > w.MAX_WORDS:
            raise SimulationError(f"{name} has {words} words, more than the simulator's {w.MAX_WORDS}",
                                  "simulate a smaller problem (the design scales without change)")
    return {"A": w.pack(a_pad, w.TAG_A), "B": w.pack(b_pad, w.TAG_B),
            "C": np.zeros(c_words, dtype=np.uint64)}


def run_machine(m: Machine, progress: bool = False) -> None:
    """Step every actor until nothing moves; then the sequence must be done and the array idle."""
    actors: list[Actor] = [m.cmd, *m.streams, *m.cores]
    c = m.config
    total = c.tiles_per_core * c.k_steps * len(m.cores)
    with tqdm(total=total, unit="call", desc="simulating", disable=not progress, leave=False) as bar:
        seen = 0
        while True:
            progressed = False
            for actor in actors:
                if actor.step():
                    progressed = True
            if progress:
                calls = m.kernel.stats.matmul_calls
                bar.update(calls - seen)
                seen = calls
            if not progressed:
                break
    if not m.cmd.done:
        raise DeadlockError(deadlock_report(m), "inspect the blocked actors (gemm-gen simulate --json)")
    for ch in m.channels:
        if ch.active or (ch.queue is not None and ch.queue):
            raise SimulationError(f"{ch.describe()} is still busy after the sequence finished",
                                  "the runtime sequence moves more data than the workers use")
    for fifo, tile, cons in m.fifo_ends:
        if cons.value:
            raise SimulationError(f"{cons.value} object(s) of {fifo} at {tile} were never consumed",
                                  "balance the fifo's producer and consumer counts")
    m.kernel.finish()


def deadlock_report(m: Machine) -> str:
    stuck = [s for s in m.streams if s.src.active or (s.src.queue and len(s.src.queue))]
    waiting = [core for core in m.cores]
    parts = [f"deadlock after {m.kernel.stats.matmul_calls} matmul calls",
             f"command processor {m.cmd.blocked}" if m.cmd.blocked else "command processor idle"]
    if stuck:
        parts.append(f"{len(stuck)} stream(s) stalled, first: {stuck[0].blocked}")
    if waiting:
        parts.append(f"{len(waiting)} core(s) blocked, first: {waiting[0].describe()}")
    return "; ".join(parts)


def check_c_provenance(c: GemmConfig, cells: np.ndarray) -> None:
    tags = w.tags(cells)
    if not (tags == w.TAG_C).all():
        bad = int(np.flatnonzero(tags != w.TAG_C)[0])
        row, col = _c_position(c, bad)
        raise LayoutError(f"C[{row}, {col}] in DRAM was never written by a kernel "
                          f"(holds {w.TAG_NAMES[int(tags[bad])]} data)", "check the C drain patterns")
    ids = w.word_ids(cells)
    expect = np.arange(cells.size)
    if not np.array_equal(ids, expect):
        bad = int(np.flatnonzero(ids != expect)[0])
        got, want = _c_position(c, int(ids[bad])), _c_position(c, bad)
        raise LayoutError(f"C{list(want)} in DRAM received the result for C{list(got)} "
                          f"(data arrived in the wrong layout)", "check the C join / drain patterns")


def _c_position(c: GemmConfig, word: int) -> tuple[int, int]:
    """The C element a word of the C buffer holds (a bfp16 tile's first element)."""
    t = c.t_out
    if t.is_block:
        tile = word // (t.unit_bytes // 4)
        tr, tc = divmod(tile, c.Np // t.tile_cols)
        return tr * t.tile_rows, tc * t.tile_cols
    row, col = divmod(word * t.per_word, c.Np)
    return row, col


def simulate(config: GemmConfig | Design, seed: int = 0, progress: bool = False, inputs: str = "exact") -> SimResult:
    """Build (if needed) and simulate a design on seeded inputs of the given family (gemm_gen.inputs:
    "exact" float inputs have fp32-exact sums, "wide" ones exercise lossy conversions); raises on
    design errors."""
    start = time.perf_counter()
    design = config if isinstance(config, Design) else build_design(config)
    c = design.config
    a, b = make_inputs(c.M, c.K, c.N, c.t_in, c.t_out, seed, c.t_b, family=inputs)
    a_dram, b_dram = pad_inputs(c, a, b)
    dram = dram_cells(c, a_dram, b_dram)
    kernel = KernelEmulator(c)
    machine = lower(design, dram, kernel)
    run_machine(machine, progress)
    check_c_provenance(c, dram["C"])
    got = output_values(c, (dram["C"] & w.VALUE_MASK).astype(np.uint32))

    expect = reference(c.numerics, *host_values(c, a_dram, b_dram), c.k, c.Kp)
    exact = truth(a, b)
    g64 = got.astype(np.float64)
    diff = g64 != expect.astype(np.float64)
    mismatches = int(np.count_nonzero(diff))
    first = None
    if mismatches:
        i, j = (int(x) for x in np.argwhere(diff)[0])
        first = (i, j, float(g64[i, j]), float(expect[i, j]))
    err = np.abs(g64 - exact)
    scale = float(np.abs(exact).max()) or 1.0
    if c.t_out.is_float:
        saturated = 0.0
    else:
        saturated = float(np.mean((got == c.t_out.min) | (got == c.t_out.max)))
    traffic = []
    for s in machine.streams:
        traffic.append(Traffic(s.level, s.src.describe(), 4 * s.src.words, 4 * sum(d.words for d in s.dsts)))
    notes = []
    modelled = True
    p = c.precision
    if p.block:
        points = []
        if c.t_in.is_block or c.t_b.is_block:
            host = [x for x, t in (("A", c.t_in), ("B", c.t_b)) if t.is_block]
            points.append(f"{' and '.join(host)} quantized to bfp16ebs8 on the host (blocks of 8 along K, "
                          f"truncation as mlir-aie's helper)")
        if p.converts_a:
            points.append(f"A converted to bfp16 in the core (blocks of 8 along K, {c.rounding} rounding)")
        if c.t_acc.is_block:
            points.append(f"C requantized to bfp16 after every call (blocks of 8 along N, {c.rounding} rounding)")
        elif p.converts_c:
            points.append(f"C accumulated in {c.acc}, converted to bfp16 after its last call ({c.rounding})")
        notes.append("bfp16 quantization points: " + "; ".join(points) + " (the core's bfp16 rounding is "
                     "modelled on mlir-aie PR #3442; the exact on-chip conversion is unpublished)")
    if c.numerics.bfp16_inputs:
        how = ("once per call (A) and per k-step (B) by the convert-once kernel, the same bits as the AIE API's "
               "per-mmul emulation (tests/test_kernels.py proves it on the host)" if c.convert_once else
               "at every mmul by the AIE API's emulation")
        notes.append(f"bf16 via bfp16: A and B are quantized to bfp16ebs8 blocks of 8 along K with the core's "
                     f"{c.rounding} rounding, {how} (mlir-aie PR #3442); the exact on-chip conversion is unpublished")
    clamps = _core_conversion_clamps(c, a, b)
    if clamps:
        notes.append(f"{clamps} bfp16 blocks converted in the core round a mantissa past 127 and are clamped to 127 "
                     f"(assumed; the core's conversion there is unpublished): the exact input family avoids it")
    if saturated > 0.1:
        notes.append(f"{saturated:.0%} of outputs saturate: the check says little about them")
    if kernel.stats.acc_overflows:
        notes.append(f"{kernel.stats.acc_overflows} acc32 values overflowed (hardware behaviour unconfirmed)")
    if inputs == "exact":
        bound = exact_bound(c.K)
        float_desc = f"bf16 i*2^-{bound.bit_length() - 1}, |i| <= {bound}, 3% zeros (fp32-exact sums)"
    else:
        float_desc = "bf16 +-(1+f/128)*2^[-4,0], 3% zeros (wide: exact in fp64 only)"
    dist = (float_desc + (" (as fp32 before bfp16 quantization)" if p.block else "")
            if c.t_in.is_float else _int_desc(a, b))
    return SimResult(
        config=c,
        passed=mismatches == 0,
        seconds=time.perf_counter() - start,
        elements=int(got.size),
        mismatches=mismatches,
        first_mismatch=first,
        max_abs_error=float(err.max()),
        mean_abs_error=float(err.mean()),
        max_rel_error=float(err.max()) / scale,
        saturated_fraction=saturated,
        nonzero_fraction=float(np.count_nonzero(got)) / got.size,
        traffic=traffic,
        max_live_bds={str(k): v for k, v in sorted(machine.cmd.max_live.items())},
        kernel=kernel.stats,
        core_passes=min(core.passes for core in machine.cores),
        inputs=dist,
        numerics_modelled=modelled,
        notes=notes,
    )


def _core_conversion_clamps(c: GemmConfig, a: np.ndarray, b: np.ndarray) -> int:
    """Blocks that the core's bfp16 conversions of A and B (under the kernel's rounding) clamp."""
    from ..bfp16 import clamped_blocks

    rounding = c.numerics.rounding
    count = 0
    if c.numerics.bfp16_inputs or c.precision.converts_a:
        count += clamped_blocks(np.asarray(a, np.float32), 1, rounding)
    if c.numerics.bfp16_inputs:
        count += clamped_blocks(np.asarray(b, np.float32), 0, rounding)
    return count


def _int_desc(a: np.ndarray, b: np.ndarray) -> str:
    bound = int(max(np.abs(a).max(initial=0), np.abs(b).max(initial=0)))
    density = (np.count_nonzero(a) + np.count_nonzero(b)) / (a.size + b.size)
    return f"ints in [-{bound}, {bound}], {density:.0%} nonzero"
