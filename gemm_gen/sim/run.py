"""simulate(): run a Design on seeded inputs and check it against the exact reference."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import numpy as np
from tqdm import tqdm

from ..design import Design, build_design
from ..design.build import for_call
from ..design.host_buffers import host_values, output_values, pad_inputs
from ..design.ir import HostTensor, RuntimeOp
from ..design.serve import serve
from ..facts.accuracy import Accuracy, EpilogueAccuracy, measure, measure_epilogue, percent
from ..facts.bfp16 import clamped_blocks
from ..facts.dtypes import dtype as dtype_of
from ..facts.dtypes import widen
from ..facts.epilogue_args import EpilogueArgs, kernel_requant, seeded_args
from ..facts.errors import DeadlockError, LayoutError, SimulationError
from ..facts.inputs import SCALE_EXP, exact_bound, group_weights, make_inputs
from ..facts.numerics import Product, reference
from ..facts.quant_b import QuantB
from ..spec.call import CallPlan
from ..spec.config import GemmConfig
from ..spec.request import Problem
from ..spec.rules.call_layouts import Layouts
from ..spec.rules.dequant import to_bfp16
from ..spec.rules.epilogue import call_activation
from . import bulk
from . import words as w
from .contents import Keys, NotProven
from .flow import Flow
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
    call: CallPlan
    passed: bool
    seconds: float
    elements: int
    mismatches: int
    first_mismatch: tuple[int, int, float, float] | None
    accuracy: Accuracy  # C against the exact product of the inputs the array received
    nonzero_fraction: float
    traffic: list[Traffic]
    max_live_bds: dict[str, int]
    kernel: KernelStats
    core_passes: int
    inputs: str
    numerics_modelled: bool = True  # False: only data movement is checked (see notes)
    notes: list[str] = field(default_factory=list)
    # bfp16 operands are quantized on the host first: C against the product of the values before that
    accuracy_given: Accuracy | None = None
    # with an epilogue: C against float64 act(A @ B + bias) (requantized: the real requantization, and TFLite)
    epilogue: EpilogueAccuracy | None = None

    def level_bytes(self) -> dict[str, tuple[int, int]]:
        out: dict[str, tuple[int, int]] = {}
        for t in self.traffic:
            b, d = out.get(t.level, (0, 0))
            out[t.level] = (b + t.bytes, d + t.delivered)
        return out

    def to_json(self) -> dict[str, object]:
        return {
            "config": self.config.to_json(),
            "call": self.call.summary(),
            "passed": self.passed,
            "seconds": round(self.seconds, 3),
            "elements": self.elements,
            "mismatches": self.mismatches,
            "first_mismatch": self.first_mismatch,
            "accuracy": self.accuracy.to_json(),
            "accuracy_before_host_quantization": None if self.accuracy_given is None else self.accuracy_given.to_json(),
            **({} if self.epilogue is None else {"epilogue_accuracy": self.epilogue.to_json()}),
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
            "accumulation": self.config.numerics.accumulation,  # which fp32 accumulation model (facts/numerics.py)
            "notes": self.notes,
        }


def dram_contents(design: Design, a: np.ndarray, b: np.ndarray, call: CallPlan | None = None) -> dict[str, np.ndarray]:
    """DRAM contents of one call: A and B as the host lays them out (padded only where the call's
    plan says), with the slack its transfers reach, and C empty."""
    c = design.config
    call = call or c.call
    tensors = design.tensors if call == c.call else for_call(design, call).tensors
    return dram_cells(c, *pad_inputs(c, a, b, call), tensors)


def dram_cells(c: GemmConfig, a_dram: np.ndarray, b_dram: np.ndarray, tensors: tuple[HostTensor, ...]
               ) -> dict[str, np.ndarray]:
    """The simulator's DRAM: the host buffers of A and B as provenance-carrying cells followed by
    their zeroed slack (numbered on, as the bytes after the matrix are), C empty. `tensors`: the call's host
    tensors (its Design's)."""
    sizes = dram_words(c, tensors)
    out = {}
    for name, data in (("A", a_dram), ("B", b_dram), ("C", None)):
        if data is None:
            out[name] = np.zeros(sizes[name], dtype=np.uint64)
            continue
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        slack = np.zeros(4 * sizes[name] - raw.size, dtype=np.uint8)
        out[name] = w.pack(np.concatenate([raw, slack]), w.TAG_A if name == "A" else w.TAG_B)
    return out


def run_machine(m: Machine, progress: bool = False) -> None:
    """Step every actor until nothing moves; then the sequence must be done and the array idle."""
    actors: list[Actor] = [m.cmd, *m.streams, *m.cores]
    c, call = m.config, m.kernel.call
    total = call.m_blocks * call.n_blocks * call.k_walk // c.tiling.k * c.tiling.rho * len(m.cores)
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


def check_c_provenance(c: GemmConfig, cells: np.ndarray, call: CallPlan | None = None) -> None:
    """Every word of C's matrix holds a kernel result, and every word a kernel result reached
    (junk rows and columns in padding or slack included) holds the one for its own position."""
    call = call or c.call
    words = _c_words(c, call)
    tags = w.tags(cells[words])
    if not (tags == w.TAG_C).all():
        bad = int(words[np.flatnonzero(tags != w.TAG_C)[0]])
        row, col = _c_position(c, call, bad)
        raise LayoutError(f"C[{row}, {col}] in DRAM was never written by a kernel "
                          f"(holds {w.TAG_NAMES[int(w.tags(cells[bad:bad + 1])[0])]} data)",
                          "check the C drain patterns")
    written = np.flatnonzero(w.tags(cells) == w.TAG_C)
    ids = w.word_ids(cells[written])
    if not np.array_equal(ids, written):
        bad = int(written[np.flatnonzero(ids != written)[0]])
        got, want = _c_position(c, call, int(ids[bad])), _c_position(c, call, bad)
        raise LayoutError(f"C{list(want)} in DRAM received the result for C{list(got)} "
                          f"(data arrived in the wrong layout)", "check the C join / drain patterns")


def _c_words(c: GemmConfig, call: CallPlan) -> np.ndarray:
    """The words of C's buffer that hold the M x N result (not padding, not slack), ascending."""
    t, ld = c.types.t_out, call.ld("C")
    if t.is_block:  # whole tiles, each unit_bytes / 4 words
        q, per_tile = t.tile_rows, t.unit_bytes // 4
        tiles = (np.arange(-(-call.M // q))[:, None] * (ld // q) + np.arange(-(-call.N // q))[None, :]).ravel()
        return (tiles[:, None] * per_tile + np.arange(per_tile)).ravel()
    per = t.per_word
    lines, length = (call.N, call.M) if call.c_col_maj else (call.M, call.N)  # C^T: N rows of M
    if not lines or not length:
        return np.zeros(0, np.int64)
    first = np.arange(lines) * ld
    lo, hi = first // per, (first + length - 1) // per + 1  # each stored row's words, rows in ascending order
    if (lo[1:] <= hi[:-1]).all():  # rows that meet (no padding between them): one run
        return np.arange(lo[0], hi[-1])
    edges = np.zeros(int(hi[-1]) + 1, np.int64)
    np.add.at(edges, lo, 1)
    np.add.at(edges, hi, -1)
    return np.flatnonzero(np.cumsum(edges)[:-1] > 0)


def _c_position(c: GemmConfig, call: CallPlan, word: int) -> tuple[int, int]:
    """The C element a word of the C buffer holds (a bfp16 tile's first element)."""
    t, ld = c.types.t_out, call.ld("C")
    if t.is_block:
        tile = word // (t.unit_bytes // 4)
        tr, tc = divmod(tile, ld // t.tile_cols)
        return tr * t.tile_rows, tc * t.tile_cols
    row, col = divmod(word * t.per_word, ld)
    return (col, row) if call.c_col_maj else (row, col)


class ArraySession:
    """One Design on the simulated array, run call after call: the first call lowers it, later ones
    only bring a new runtime sequence and new DRAM buffers (one xclbin, many runs).

    A call runs in the fast simulator (sim/flow.py, sim/bulk.py) unless `literal` is set: the same machine and
    schedule moving contents instead of cells, every kernel call checked and computed at once. Where it cannot
    show that the literal run passes, the call runs literally from the state it started in (its error, if any,
    is the literal one), and so does every later call of the session (`fell_back` says why)."""

    def __init__(self, design: Design, literal: bool = False) -> None:
        self.design = design
        self.machine: Machine | None = None
        self.calls = 0
        self.literal = literal
        self.flow: Flow | None = None
        self.kernels: dict[int, KernelEmulator] = {}  # per call epoch: the emulator whose C views its keys use
        self.keys = Keys(self._c_arrays)
        self.fell_back: str | None = None

    def run(self, call: CallPlan, a_dram: np.ndarray, b_dram: np.ndarray, progress: bool = False
            ) -> tuple[np.ndarray, KernelEmulator, Machine]:
        """Run one call on DRAM buffers laid out as pad_inputs does; the C buffer's cells (its
        provenance checked), the call's kernel emulator and the machine."""
        return self.run_with(call, lambda: (a_dram, b_dram), progress)

    def run_with(self, call: CallPlan, operands: Callable[[], tuple[np.ndarray, np.ndarray]], progress: bool = False
                 ) -> tuple[np.ndarray, KernelEmulator, Machine]:
        """run() with the DRAM buffers asked for when they are needed (the fast machine moves none: it asks
        after its run)."""
        c = self.design.config
        if call == c.call:
            runtime, tensors = self.design.runtime, self.design.tensors
        else:  # the Design serving the call: its own sequence, whose transfers say how much slack each buffer needs
            served = for_call(self.design, call)
            runtime, tensors = served.runtime, served.tensors
        kernel = KernelEmulator(self.design, call)
        if not self.literal:
            sizes = dram_words(c, tensors)
            if self.machine is None:  # lowering's checks are the literal ones, and so are its errors
                self.machine = lower(self.design, _stand_ins(sizes), kernel, runtime)
            snap = self.machine.snapshot()
            try:
                cells = self._fast(call, kernel, runtime, sizes, operands, progress)
            except NotProven as why:
                self.machine.restore(snap)
                self.literal, self.fell_back, self.flow = True, str(why), None
            else:
                self.calls += 1
                return cells, kernel, self.machine
        dram = dram_cells(c, *operands(), tensors)
        if self.machine is None:
            self.machine = lower(self.design, dram, kernel, runtime)
        else:
            self.machine.next_call(runtime, dram, kernel)
        run_machine(self.machine, progress)
        check_c_provenance(c, dram["C"], call)
        self.calls += 1
        return dram["C"], kernel, self.machine

    def _c_arrays(self, name: str, n: int, mask: int, epoch: int) -> bulk.Provenance:
        return bulk.c_provenance(self.kernels[epoch])(name, n, mask)

    def _fast(self, call: CallPlan, kernel: KernelEmulator, runtime: tuple[RuntimeOp, ...], sizes: dict[str, int],
              operands: Callable[[], tuple[np.ndarray, np.ndarray]], progress: bool) -> np.ndarray:
        """One call in the fast simulator: C's cells as the literal run would leave them, or NotProven."""
        assert self.machine is not None
        m, c = self.machine, self.design.config
        if self.design.shared:  # before anything moves: the literal run then starts from the same state
            raise NotProven("the fast simulator does not follow neighbour-shared L1 buffers yet (their relay locks "
                            "and the split memtile streams): the call runs literally")
        if self.flow is None:
            self.flow = Flow(m, kernel, self.keys)
        flow = self.flow
        self.kernels = {self.calls: kernel}
        flow.recorder.use(kernel, self.calls)
        for i, core in enumerate(m.cores):
            flow.recorder.bind(core, i)
        total = call.m_blocks * call.n_blocks * call.k_walk // c.tiling.k * c.tiling.rho * len(m.cores)
        with tqdm(total=total, unit="call", desc="simulating", disable=not progress, leave=False) as bar:
            flow.run(runtime, _stand_ins(sizes), self.design, bar if progress else None)
        recs = flow.recorder.records()
        tiles = bulk.check_calls(recs, kernel, self.keys, flow.words)
        a_dram, b_dram = operands()
        written = bulk.drained_words(flow, tiles, sizes["C"])
        flow.clear_drains()
        if not written[_c_words(c, call)].all():
            raise NotProven("a word of C's matrix was never written")
        b_words = bulk.raw_words(b_dram, sizes["B"]) if c.epilogue.needs_tile else None
        stats = bulk.stats(recs, tiles, m.cores, 0)
        del recs
        flow.recorder.release()  # the records are checked: their memory goes before the numerics'
        result = bulk.compute(kernel, tiles, a_dram, b_dram, b_words, list(flow.recorder.tables.values()), sizes["C"])
        kernel.stats = replace(stats, acc_overflows=result.overflows)
        flow.end_call()
        return w.written_cells(result.words, written, w.TAG_C)


def dram_words(c: GemmConfig, tensors: tuple[HostTensor, ...]) -> dict[str, int]:
    """The 32-bit words of each DRAM buffer of a call (SimulationError past the simulator's word ids)."""
    words = {}
    for t in tensors:
        words[t.name] = -(-dtype_of(t.dtype).unit_nbytes(t.units) // 4)
        if words[t.name] > w.MAX_WORDS:
            raise SimulationError(f"{t.name} has {words[t.name]} words, more than the simulator's {w.MAX_WORDS}",
                                  "simulate a smaller problem (the design scales without change)")
    return words


def _stand_ins(sizes: dict[str, int]) -> dict[str, np.ndarray]:
    """DRAM buffers of the right sizes holding nothing (the fast machine only reads their sizes)."""
    return {name: np.broadcast_to(np.uint64(0), (n,)) for name, n in sizes.items()}


def simulate(config: GemmConfig | Design, seed: int = 0, progress: bool = False, inputs: str = "exact",
             activation: str | None = None, literal: bool = False) -> SimResult:
    """Build (if needed) and simulate a design on seeded inputs of the given family (gemm_gen.facts.inputs:
    "exact" float inputs have fp32-exact sums, "wide" ones exercise lossy conversions); raises on
    design errors. `activation`: what a runtime-activation build applies in this call. `literal`: move
    every word and call every kernel one by one (ArraySession), the same results and errors, slower."""
    design = config if isinstance(config, Design) else build_design(config)
    c = design.config
    return simulate_calls(design, [Problem(c.size.M, c.size.K, c.size.N)], seed, progress, inputs,
                          activations=[activation], literal=literal)[0]


def simulate_calls(design: Design, problems: Sequence[Problem], seed: int = 0, progress: bool = False,
                   inputs: str = "exact", layouts: Sequence[Layouts | None] | None = None,
                   activations: Sequence[str | None] | None = None, literal: bool = False) -> list[SimResult]:
    """Simulate one Design at each size in turn on the same simulated array (call i on inputs of
    seed + i, its operands in layouts[i], default the design's, a runtime-activation build applying
    activations[i]); raises for a size, layout or activation the design cannot serve or on any design error."""
    c = design.config
    lays = list(layouts) if layouts is not None else [None] * len(problems)
    acts = list(activations) if activations is not None else [None] * len(problems)
    # refuse every size, layout and activation the design cannot serve before running any
    calls = [replace(serve(c, p, lay), activation=call_activation(c.epilogue, act))
             for p, lay, act in zip(problems, lays, acts, strict=True)]
    session = ArraySession(design, literal)
    return [_checked_call(session, call, seed + i, progress, inputs) for i, call in enumerate(calls)]


@dataclass(frozen=True)
class _Drawn:
    """One call's seeded inputs: A, B's values (W4A16: as the kernel's pass hands them on) and B as given, the
    epilogue's arguments, and the DRAM buffers the host fills."""

    a: np.ndarray
    b_values: np.ndarray
    b: np.ndarray | QuantB
    args: EpilogueArgs | None
    a_dram: np.ndarray
    b_dram: np.ndarray


def _draw(c: GemmConfig, call: CallPlan, seed: int, inputs: str) -> _Drawn:
    a, b_values = make_inputs(call.M, call.K, call.N, c.types.t_in, c.types.t_out, seed, c.types.t_b, family=inputs)
    b: np.ndarray | QuantB = b_values
    if c.groups.group_size:  # W4A16: int4 q with group scales (and zero points)
        b = group_weights(b_values, c.groups.group_size, c.groups.zero_points, seed)
        b_values = b.dequant(to_bfp16(c.groups.group_size, c.kernel.convert_once))  # what the kernel's pass hands on
    args = seeded_args(c.epilogue.for_call(call.activation), c.types.t_out, a, b_values, seed)
    return _Drawn(a, b_values, b, args, *pad_inputs(c, a, b, call, args))


def _checked_call(session: ArraySession, call: CallPlan, seed: int, progress: bool, inputs: str) -> SimResult:
    start = time.perf_counter()
    c = session.design.config
    # the inputs are drawn (NumPy's loops, which let go of the interpreter) while the fast machine, which needs only
    # their sizes, runs in Python: two cores at work, the same inputs
    with ThreadPoolExecutor(1, thread_name_prefix="gemm-gen-inputs") as pool:
        drawing = pool.submit(_draw, c, call, seed, inputs)

        def operands() -> tuple[np.ndarray, np.ndarray]:
            got = drawing.result()
            return got.a_dram, got.b_dram

        c_cells, kernel, machine = session.run_with(call, operands, progress)
        drawn = drawing.result()
    a, b_values, b, args = drawn.a, drawn.b_values, drawn.b, drawn.args
    a_dram, b_dram = drawn.a_dram, drawn.b_dram
    e = c.epilogue.for_call(call.activation)
    got = output_values(c, w.data_words(c_cells), call)

    # W4A16: the reference takes the weights given (padded with zero weights, as b_objects pads them), never
    # B's buffer read back, so that a host layout bug cannot cancel out
    quant = b if isinstance(b, QuantB) else None
    received = (a, b_values) if quant is not None else host_values(c, a_dram, b_dram, call)
    requant = None if args is None else kernel_requant(e, args.requant)
    bias = None if args is None else args.bias
    expect = reference(replace(c.numerics, epilogue=e), *received, c.tiling.k, call.k_walk, bias, requant,
                       kernel.product)
    diff = got != expect  # as numbers (NaN differs from itself, -0 equals 0), in their own types
    mismatches = int(np.count_nonzero(diff))
    first = None
    if mismatches:
        i, j = (int(x) for x in np.argwhere(diff)[0])
        first = (i, j, float(widen(got[i:i + 1, j])[0]), float(expect[i, j]))
    del diff
    # W4A16: against float64 A @ ((q - z) s), the weights the user means (before any bf16 rounding)
    exact_b = None if quant is None else quant.exact()
    acc = measure(got, *received, c.numerics, kernel.product) if exact_b is None else \
        measure(got, a, exact_b, c.numerics)
    host_quantized = c.types.t_in.is_block or c.types.t_b.is_block
    saturated = acc.saturated / acc.elements
    traffic = []
    for s in machine.streams:
        traffic.append(Traffic(s.level, s.src.describe(), 4 * s.src.words, 4 * sum(d.words for d in s.dsts)))
    notes = []
    modelled = True
    p = c.types.precision
    if p.block:
        points = []
        if c.types.t_in.is_block or c.types.t_b.is_block:
            host = [x for x, t in (("A", c.types.t_in), ("B", c.types.t_b)) if t.is_block]
            points.append(f"{' and '.join(host)} quantized to bfp16ebs8 on the host (blocks of 8 along K, "
                          f"truncation as mlir-aie's helper)")
        if p.converts_a:
            points.append(f"A converted to bfp16 in the core (blocks of 8 along K, {c.kernel.rounding} rounding)")
        if c.types.t_acc.is_block:
            points.append(f"C requantized to bfp16 after every call (blocks of 8 along N, {c.kernel.rounding} "
                          "rounding)")
        elif p.converts_c:
            points.append(f"C accumulated in {c.types.acc}, converted to bfp16 after its last call "
                          f"({c.kernel.rounding})")
        notes.append("bfp16 quantization points: " + "; ".join(points) + " (the core's bfp16 rounding is "
                     "modelled on mlir-aie PR #3442; the exact on-chip conversion is unpublished)")
    if c.numerics.bfp16_inputs:
        how = ("once per call (A) and per k-step (B) by the convert-once kernel, the same bits as the AIE API's "
               "per-mmul emulation (tests/backends/test_kernels.py proves it on the host)" if c.kernel.convert_once else
               "at every mmul by the AIE API's emulation")
        if to_bfp16(c.groups.group_size, c.kernel.convert_once):  # W4A16 on the convert-once kernel
            how = ("A once per call by the convert-once kernel (the same bits as the AIE API's per-mmul emulation), "
                   "B, the W4A16 weights, from their exact values once per B object by its dequantization")
        notes.append(f"bf16 via bfp16: A and B are quantized to bfp16ebs8 blocks of 8 along K with the core's "
                     f"{c.kernel.rounding} rounding, {how} (mlir-aie PR #3442); the exact on-chip conversion is "
                     "unpublished")
    clamps = _core_conversion_clamps(c, a, b_values, kernel.product)
    if clamps:
        notes.append(f"{clamps} bfp16 blocks converted in the core round a mantissa past 127 and are clamped to 127 "
                     f"(assumed; the core's conversion there is unpublished): the exact input family avoids it")
    if exact_b is not None:
        notes.append(w4a16_note(c, b_values, exact_b, acc))
    if saturated > 0.1:
        notes.append(f"{saturated:.0%} of outputs saturate: the check says little about them")
    if kernel.stats.acc_overflows:
        notes.append(f"{kernel.stats.acc_overflows} acc32 values overflowed (hardware behaviour unconfirmed)")
    if inputs == "exact":
        bound = exact_bound(c.size.K)
        float_desc = f"bf16 i*2^-{bound.bit_length() - 1}, |i| <= {bound}, 3% zeros (fp32-exact sums)"
    else:
        float_desc = "bf16 +-(1+f/128)*2^[-4,0], 3% zeros (wide: exact in fp64 only)"
    if c.groups.group_size:
        float_desc += (f"; B int4 q uniform in [-8, 7], bf16 scales (1+f/128)*2^{SCALE_EXP}"
                       + (", zero points uniform in [-8, 7]" if c.groups.zero_points else ""))
    dist = (float_desc + (" (as fp32 before bfp16 quantization)" if p.block else "")
            if c.types.t_in.is_float else _int_desc(a, b_values))
    return SimResult(
        config=c,
        call=call,
        passed=mismatches == 0,
        seconds=time.perf_counter() - start,
        elements=int(got.size),
        mismatches=mismatches,
        first_mismatch=first,
        accuracy=acc,
        accuracy_given=measure(got, a, b_values, c.numerics) if host_quantized else None,
        epilogue=None if args is None else measure_epilogue(got, *received, e, bias, requant),
        nonzero_fraction=float(np.count_nonzero(got)) / got.size,
        traffic=traffic,
        max_live_bds={str(k): v for k, v in sorted(machine.cmd.max_live.items())},
        kernel=kernel.stats,
        core_passes=min(core.passes for core in machine.cores),
        inputs=dist,
        numerics_modelled=modelled,
        notes=notes,
    )


def w4a16_note(c: GemmConfig, weights: np.ndarray, exact: np.ndarray, acc: Accuracy) -> str:
    """What W4A16's losses cost: the weights as the dequantization rounds them once (`weights`, as the pass hands
    them on: bf16, or the float32 values npu2's convert-once kernel rounds straight to bfp16), against their
    float64 `exact` values, and C against float64 A @ ((q - z) s)."""
    bfp16_b = to_bfp16(c.groups.group_size, c.kernel.convert_once)
    if bfp16_b:  # the float32 weights the pass rounds once, into bfp16 (the numerics' quantization of B)
        weights = c.numerics.operand_b(weights)
    rounded = int(np.count_nonzero(weights.astype(np.float64) != exact))
    w = "(q - z) s" if c.groups.zero_points else "q s"
    how = f"quantizes {w} straight into bfp16 (blocks of 8 along K, {c.kernel.rounding})" if bfp16_b else \
        f"dequantizes bf16_rne({w})"
    return (f"W4A16 (group size {c.groups.group_size}{', zero points' if c.groups.zero_points else ''}): the core "
            f"{how} once per B object, {rounded:,} of {exact.size:,} weights rounded (a loss); "
            f"C vs float64 A @ ({w}): Frobenius {percent(acc.frobenius_rel)}, max abs {acc.max_abs:.4g}")


def _core_conversion_clamps(c: GemmConfig, a: np.ndarray, b: np.ndarray, product: Product | None = None) -> int:
    """Blocks that the core's bfp16 conversions of A and B (under the kernel's rounding) clamp: none where A and B
    are the operands of the simulator's exact product under these numerics (then every block is on its grid)."""
    rounding = c.numerics.rounding
    if product is not None and product.serves(c.numerics) and product.covers(a, b) is not None:
        return 0
    count = 0
    if c.numerics.bfp16_inputs or c.types.precision.converts_a:
        count += clamped_blocks(np.asarray(a, np.float32), 1, rounding)
    if c.numerics.bfp16_inputs:
        count += clamped_blocks(np.asarray(b, np.float32), 0, rounding)
    return count


def _int_desc(a: np.ndarray, b: np.ndarray) -> str:
    bound = int(max(np.abs(a).max(initial=0), np.abs(b).max(initial=0)))
    density = (np.count_nonzero(a) + np.count_nonzero(b)) / (a.size + b.size)
    return f"ints in [-{bound}, {bound}], {density:.0%} nonzero"
