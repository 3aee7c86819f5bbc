"""The functional simulator: passing designs, and each way a broken design is caught."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gemm_gen.design import build_design
from gemm_gen.design.build import group_tasks, runtime_sequence
from gemm_gen.design.ir import Design, RuntimeOp
from gemm_gen.design.tap import Tap
from gemm_gen.facts.errors import (
    BdExhaustionError,
    DeadlockError,
    DmaLimitError,
    LayoutError,
    OutOfRangeError,
    QueueOverflowError,
    SimulationError,
)
from gemm_gen.facts.inputs import make_inputs
from gemm_gen.facts.numerics import KernelNumerics
from gemm_gen.facts.rounding import Rounding
from gemm_gen.sim import simulate
from gemm_gen.sim.kernel import KernelEmulator
from gemm_gen.sim.lower import lower
from gemm_gen.sim.run import dram_contents, run_machine
from gemm_gen.spec.config import GemmConfig

from ..conftest import small

PAIRS = [("npu1", "bf16", "bf16"), ("npu1", "bf16", "f32"), ("npu1", "i8", "i8"), ("npu1", "i8", "i16"),
         ("npu1", "i8", "i32"), ("npu1", "i16", "i16"), ("npu1", "i16", "i32"), ("npu2", "bf16", "bf16"),
         ("npu2", "bf16", "f32"), ("npu2", "i8", "i8"), ("npu2", "i8", "i16"), ("npu2", "i8", "i32"),
         ("npu2", "i16", "i32")]


@pytest.mark.parametrize("dev,t_in,t_out", PAIRS)
@pytest.mark.parametrize("col_maj", [True, False])
def test_small_designs_pass(dev, t_in, t_out, col_maj):
    r = simulate(small(dev, t_in, t_out, col_maj))
    assert r.passed and r.mismatches == 0
    assert r.nonzero_fraction > 0.5 and r.accuracy.saturated < 0.05 * r.elements  # a PASS that means something


def test_emulated_bf16_and_padding():
    c = GemmConfig("npu2", 200, 100, 300, 16, 16, 16, 32, "bf16", "bf16", True, emulate_bf16_with_bfp16=True)
    r = simulate(c)
    assert c.kernel.mmul == (8, 8, 8) and r.passed and c.call.wasted_fraction > 0.3
    assert c.array.stack_bytes == 0xD00  # mlir-aie's stack for Peano's bfp16-emulated kernels
    assert r.numerics_modelled and "quantized to bfp16ebs8" in r.notes[0]


def test_bfp16_datapath_changes_the_numbers():
    """bf16 via bfp16 quantizes A and B along K: a design checked against plain bf16 numerics fails
    (on inputs that bfp16 cannot hold exactly; the default ones it holds exactly)."""
    c = small("npu2", "bf16", "bf16")
    assert c.kernel.emulate_bf16_with_bfp16 and c.numerics.bfp16_inputs  # npu2's default
    assert simulate(c, inputs="wide").passed
    plain = replace(c.numerics, bfp16_inputs=False)
    orig = KernelEmulator.__init__

    def plain_kernel(self, design, call=None):
        orig(self, design, call)
        self.numerics = plain

    import pytest as _pytest

    with _pytest.MonkeyPatch.context() as mp:
        mp.setattr(KernelEmulator, "__init__", plain_kernel)
        r = simulate(c, inputs="wide")
        assert simulate(c).passed  # exact inputs: bfp16 holds them, plain bf16 numerics agree
    assert not r.passed and r.mismatches > 0


def test_statistics_follow_the_design():
    c = small("npu2", "i8", "i16", M=3 * 4 * 16, N=2 * 8 * 16)
    r = simulate(c)
    M, K, N = c.call.covered
    levels = r.level_bytes()
    macs = M * K * N
    a_b = macs // (c.tiling.n * c.array.cols) + macs // (c.tiling.m * c.array.rows)  # eq. 6 + 7, 1-byte inputs
    assert levels["DRAM -> memtile"][0] == a_b
    assert levels["memtile -> DRAM"][0] == M * N * 2
    calls = c.array.rows * c.array.cols * c.call.tiles_per_core * c.call.k_steps
    assert r.kernel.matmul_calls == calls and r.kernel.tiles_done == c.array.rows * c.array.cols * c.call.tiles_per_core
    # every core receives one A and one B tile per call
    assert levels["memtile -> cores"][1] == calls * (c.tiling.m * c.tiling.k + c.tiling.k * c.tiling.n)
    assert r.max_live_bds["shim(0,0)"] == 12 and r.max_live_bds["shim(1,0)"] == 8


def _atb(dev: str = "npu2", t_in: str = "i8", t_out: str = "i16", rho: int = 3, b_col_maj: bool = True,
         **kw: object) -> GemmConfig:
    r = small(dev, t_in, t_out).kernel.mmul[0]
    return small(dev, t_in, t_out, b_col_maj, m=2 * r * rho, rho=rho, **kw)


@pytest.mark.parametrize("dev,t_in,t_out,rho,col_maj", [
    ("npu2", "i8", "i16", 3, True), ("npu1", "bf16", "bf16", 2, False), ("npu2", "bf16", "f32", 4, False),
    ("npu1", "i16", "i32", 2, True)])
def test_atb_designs_pass_with_rho_calls_per_k_step(dev, t_in, t_out, rho, col_maj):
    """Asymmetric tile buffering: rho A tiles of m / rho rows per B tile, each into its own C slice."""
    c = _atb(dev, t_in, t_out, rho, col_maj)
    r = simulate(c)
    assert r.passed and r.mismatches == 0 and c.t_ma * rho == c.tiling.m
    calls = c.array.rows * c.array.cols * c.call.tiles_per_core * c.call.k_steps * rho
    assert r.kernel.matmul_calls == calls
    levels = r.level_bytes()  # every core still receives all m rows of A once per k-step
    b_in = c.types.t_in.bytes
    assert levels["memtile -> cores"][1] == calls // rho * (c.tiling.m + c.tiling.n) * c.tiling.k * b_in


def test_atb_wrong_c_slice_is_a_layout_error():
    d = build_design(_atb())
    w = d.workers[0]

    def same_slice(ops):  # every matmul call told slice 0
        out = []
        for op in ops:
            if hasattr(op, "body"):
                op = replace(op, body=same_slice(op.body))
            elif getattr(op, "scalars", ()):
                op = replace(op, scalars=(0,))
            out.append(op)
        return tuple(out)

    broken = replace(d, workers=(replace(w, program=same_slice(w.program)), *d.workers[1:]))
    with pytest.raises(LayoutError, match="slice 0"):
        simulate(broken)


# column-major A (A^T in DRAM), alone and with column-major B, with tails on every size: the issue-23
# checks (i8 -> i32 and bf16 -> bf16 on both devices), rho > 1, and the cases the host must pad
@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("t_in,t_out", [("i8", "i32"), ("bf16", "bf16")])
@pytest.mark.parametrize("b_col_maj", [False, True])
def test_column_major_a_passes_with_tails(dev, t_in, t_out, b_col_maj):
    base = small(dev, t_in, t_out, b_col_maj, a_col_maj=True)
    s = base.kernel.mmul[1]
    c = base.with_(M=base.size.M + base.tiling.m + 4,
                   K=base.size.K + base.tiling.k - 2 * s if base.tiling.k > s else base.size.K + 6,
                   N=base.size.N - 2 * base.tiling.n + 4)
    r = simulate(c)
    assert r.passed and r.mismatches == 0 and r.nonzero_fraction > 0.5
    assert c.call.storage("A") == (c.size.K, c.size.M) and c.call.ld("A") == c.size.M


# column-major A on fewer columns than core rows: each A shim serves several rows, its k_mt chunks on
# the shim BD's iteration dimension (patterns.shim_a), alone and with B and C column-major, tails
@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("t_in,t_out", [("i8", "i32"), ("bf16", "bf16")])
@pytest.mark.parametrize("cols,others", [(1, False), (2, True)])
def test_column_major_a_on_fewer_columns_than_rows_passes_with_tails(dev, t_in, t_out, cols, others):
    base = small(dev, t_in, t_out, others, a_col_maj=True, c_col_maj=others, cols=cols)
    c = base.with_(M=base.size.M + base.tiling.m + 4, K=3 * base.size.K + base.tiling.k - 2 * base.kernel.mmul[1],
                   N=base.size.N - base.tiling.n + 4)
    assert c.a_rows_per_shim == 4 // cols and c.call.k_walk // c.tiling.k_mt > 1  # several rows, several chunks
    tap = build_design(c).tasks[0].tap
    assert tap.sizes == (c.call.k_walk // c.tiling.k_mt, c.a_rows_per_shim, c.tiling.k_mt, c.tiling.m)
    r = simulate(c)
    assert r.passed and r.mismatches == 0 and r.nonzero_fraction > 0.5


def test_column_major_a_shim_sending_rows_before_chunks_is_a_layout_error():
    """Mutant: the shim walks the chunks inside each core row's block (the order a one-row shim
    uses): the memtile's split slices then receive another row's columns."""
    c = small("npu1", "i8", "i32", False, a_col_maj=True, cols=2)
    c = c.with_(K=3 * c.size.K)
    d = build_design(c)
    runtime = tuple(replace(op, task=replace(op.task, tap=Tap(op.task.tap.offset, op.task.tap.sizes[1:2] + (
        op.task.tap.sizes[0] * op.task.tap.sizes[2], c.tiling.m), (c.tiling.m, c.call.ld("A"), 1))))
        if op.task is not None and op.task.tensor == "A" else op for op in d.runtime)
    with pytest.raises(LayoutError):
        simulate(replace(d, runtime=runtime))


@pytest.mark.parametrize("dev,t_in,t_out,rho", [("npu2", "i8", "i16", 3), ("npu1", "bf16", "f32", 2)])
def test_column_major_a_with_rho(dev, t_in, t_out, rho):
    c = _atb(dev, t_in, t_out, rho, False, a_col_maj=True)
    assert simulate(c.with_(M=c.size.M - 3, K=c.size.K - 1)).passed


def test_column_major_a_k_tail_reads_its_zero_slack_without_a_copy():
    """A^T's rows past K are its buffer's zeroed slack: no operand is padded, with B row-major."""
    c = small("npu1", "i8", "i32", False, a_col_maj=True)
    c = c.with_(K=c.size.K - 3)
    assert c.call.padded == () and "A^T" in c.call.k_tail
    assert simulate(c).passed


def test_column_major_a_given_row_major_is_a_layout_error():
    """The design reads A^T: the core's blocks of a row-major design's A (without the kernel's
    transpose, i.e. the row-major memtile walk) are caught."""
    d = build_design(small("npu1", "i8", "i32", a_col_maj=True))  # r != s: the walks differ
    row = build_design(small("npu1", "i8", "i32"))
    with pytest.raises(LayoutError, match="A tile"):
        simulate(_with_fifo(d, "A_L2L1_0", dims_to_stream=row.fifo("A_L2L1_0").dims_to_stream))


# column-major C (C^T in DRAM): every scalar output (below 32 bits the kernel stores C's blocks
# transposed), both devices, tails, alone and with A and B column-major
@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("t_in,t_out", [("i8", "i32"), ("bf16", "f32"), ("i16", "i32"), ("bf16", "bf16"),
                                        ("i8", "i8"), ("i8", "i16"), ("i16", "i16")])
@pytest.mark.parametrize("others", [False, True])
def test_column_major_c_passes_with_tails(dev, t_in, t_out, others):
    base = small(dev, t_in, t_out, others, a_col_maj=others, c_col_maj=True)
    for c in (base, base.with_(M=base.size.M + base.tiling.m + 4, K=base.size.K - 2,
                               N=base.size.N - 2 * base.tiling.n + 4),
              base.with_(M=base.size.M // 2 - 4)):  # a block with junk rows: C padded
        r = simulate(c)
        assert r.passed and r.mismatches == 0 and r.nonzero_fraction > 0.5, c
        assert c.call.storage("C")[1] == c.call.ld("C") and c.call.ld("C") in (c.size.M, c.call.Mp)


@pytest.mark.parametrize("t_out", ["i32", "i8"])
def test_column_major_c_with_rho(t_out):
    c = _atb("npu2", "i8", t_out, 3, False, c_col_maj=True)
    assert simulate(c.with_(M=c.size.M - 8, N=c.size.N - 3)).passed


@pytest.mark.parametrize("t_in,t_out", [("i8", "i32"), ("i8", "i8"), ("bf16", "bf16")])
def test_column_major_c_drained_row_major_is_a_layout_error(t_in, t_out):
    d = build_design(small("npu1", t_in, t_out, c_col_maj=True))
    row = build_design(small("npu1", t_in, t_out))
    with pytest.raises(LayoutError, match=r"C\[.*received the result for C\["):
        simulate(_with_fifo(d, "C_L2L3_1", dims_to_stream=row.fifo("C_L2L3_1").dims_to_stream))


@pytest.mark.parametrize("t_in,t_out", [("i8", "i8"), ("bf16", "bf16")])
def test_narrow_column_major_c_drained_as_32_bit_c_is_a_layout_error(t_in, t_out):
    """Below 32 bits the memtile walks the kernel's transposed blocks: the 32-bit walk (gathering
    a row-major block's columns) splits words, which the DMA limits refuse."""
    from gemm_gen.design import patterns
    from gemm_gen.design.grid import grid
    from gemm_gen.design.tap import Tap

    c = small("npu1", t_in, t_out, c_col_maj=True)
    d = build_design(c)
    g = grid(c, "C")
    wide = Tap(0, (g.n // g.t, g.t, g.m // g.r, g.r), (g.r * g.t, 1, g.r * g.n, g.t))
    assert patterns.c_l2_to_stream(g) != wide
    with pytest.raises(DmaLimitError, match="splits 32-bit words"):
        simulate(_with_fifo(d, "C_L2L3_1", dims_to_stream=patterns.dims(wide)))


def test_atb_a_without_its_memtile_reorder_is_a_layout_error():
    """The memtile must store A as rho stacked T_MA x k_mt tiles: without that reorder the cores
    receive rows of the wrong A tile."""
    d = build_design(_atb())
    with pytest.raises(LayoutError, match="A tile"):
        simulate(_with_fifo(d, "A_L3L2_0", dims_from_stream=None))


def _with_fifo(d: Design, name: str, **changes: object) -> Design:
    return replace(d, fifos=tuple(replace(f, **changes) if f.name == name else f for f in d.fifos))


def _with_runtime(d: Design, ops: list[RuntimeOp]) -> Design:
    return replace(d, runtime=tuple(ops))


def test_wrong_core_layout_is_a_layout_error():
    d = build_design(small("npu1"))
    t = d.fifo("A_L2L1_1").dims_from_stream
    swapped = Tap(0, (t.sizes[1], t.sizes[0], t.sizes[2]), (t.strides[1], t.strides[0], t.strides[2]))
    with pytest.raises(LayoutError, match=r"A tile element .* holds A\[.*expected A\["):
        simulate(_with_fifo(d, "A_L2L1_1", dims_from_stream=swapped))


def test_an_s2mm_pattern_that_writes_a_word_twice_is_a_layout_error():
    """Lowering refuses an S2MM walk that names a word twice (and so leaves another unwritten)."""
    d = build_design(small("npu1"))
    t = d.fifo("A_L2L1_1").dims_from_stream
    twice = Tap(0, t.sizes, (0, *t.strides[1:]))  # the outer dimension writes the same words again
    with pytest.raises(LayoutError, match="writes some words twice"):
        simulate(_with_fifo(d, "A_L2L1_1", dims_from_stream=twice))


def test_wrong_memtile_layout_of_b_is_a_layout_error():
    d = build_design(small("npu2", "i8", "i8", b_col_maj=False))
    with pytest.raises(LayoutError, match="B tile"):
        simulate(_with_fifo(d, "B_L2L1_5", dims_to_stream=None))


def test_wrong_c_drain_is_a_layout_error():
    d = build_design(small("npu1", "i8", "i32"))
    with pytest.raises(LayoutError, match=r"C\[.*received the result for C\["):
        simulate(_with_fifo(d, "C_L2L3_2", dims_to_stream=None))


def test_misaligned_k_is_a_layout_error():
    d = build_design(small("npu1"))
    c = d.config
    ops = []
    for op in d.runtime:  # A of row 0 starts one k-chunk late (and wraps into the next row)
        if op.task is not None and op.task.name.startswith("A0_"):
            tap = op.task.tap
            op = replace(op, task=replace(op.task, tap=replace(tap, offset=tap.offset + c.tiling.k_mt)))
        ops.append(op)
    with pytest.raises(LayoutError, match="A covers K from"):
        simulate(_with_runtime(d, ops))


def test_missing_fill_deadlocks():
    d = build_design(small("npu1", M=4 * 8 * 3))
    ops = [op for op in d.runtime if not (op.task is not None and op.task.name == "B1_g0")]
    with pytest.raises(DeadlockError, match=r"deadlock after .* awaits the token of C.*core\(\d,\d\) waits"):
        simulate(_with_runtime(d, ops))


def test_missing_drain_leaves_the_array_busy():
    # later drains take the shifted C stream, so the sequence ends with a memtile still sending
    d = build_design(small("npu1", M=4 * 8 * 3))
    ops = [op for op in d.runtime if not (op.task is not None and op.task.name == "C1_g0")]
    with pytest.raises(SimulationError, match="C_L2L3_1.*still busy"):
        simulate(_with_runtime(d, ops))


def test_pushing_past_the_task_queue_is_refused():
    # all A tasks first: the 5th A push could find the 4-deep queue full (the hardware drops it)
    c = small("npu1", M=4 * 8 * 6)  # 6 groups
    d = build_design(c)
    groups = range(c.call.m_blocks * c.call.n_blocks)
    tasks = [t for g in groups for t in group_tasks(c, c.call, g)]
    ops = [RuntimeOp("task", t.group, t) for t in sorted(tasks, key=lambda t: (t.tensor, t.group))]
    ops += [RuntimeOp("finish", g) for g in groups]
    with pytest.raises(QueueOverflowError, match="A0_g4 .* 5th task not yet retired .* holds 4"):
        simulate(_with_runtime(d, ops))


@pytest.mark.parametrize("groups", [5, 6])
def test_the_papers_five_groups_overflow_the_queue(groups):
    c = small("npu1", M=4 * 8 * 7)
    d = build_design(c)
    deep = replace(c, queue_groups=groups)  # validate() refuses it: 5 unretired tasks per channel
    with pytest.raises(QueueOverflowError, match="5th task"):
        simulate(replace(d, runtime=runtime_sequence(deep)))


def test_bd_exhaustion_is_detected():
    # three channels of four tasks fit 16 BDs; a shim with fewer BDs runs out while configuring
    c = small("npu1")
    d = build_design(c)
    machine = lower(d, dram_contents(d, *make_inputs(c.size.M, c.size.K, c.size.N, c.types.t_in, c.types.t_out)),
                    KernelEmulator(d))
    machine.cmd.shim_bds = 8
    with pytest.raises(BdExhaustionError, match="all 8 BDs live"):
        run_machine(machine)


def test_freeing_a_running_bd_is_caught():
    d = build_design(small("npu1", M=4 * 8 * 3))
    ops = [replace(op, task=replace(op.task, wait=False)) if op.task is not None else op for op in d.runtime]
    with pytest.raises(SimulationError, match="freed for reuse while its transfer"):
        simulate(_with_runtime(d, ops))


def test_out_of_range_task():
    d = build_design(small("npu2"))
    ops = list(d.runtime)
    i = next(i for i, op in enumerate(ops) if op.task is not None and op.task.tensor == "B")
    tap = ops[i].task.tap
    ops[i] = replace(ops[i], task=replace(ops[i].task, tap=replace(tap, offset=tap.offset + 10**7)))
    with pytest.raises(OutOfRangeError, match="reaches word"):
        simulate(_with_runtime(d, ops))


def test_numeric_mismatch_fails(monkeypatch):
    """If the kernel rounded differently from the reference, the comparison must see it."""
    orig = KernelEmulator.__init__

    def floor_kernel(self, design, call=None):
        orig(self, design, call)
        self.numerics = KernelNumerics(design.config.types.t_in, design.config.types.t_out, Rounding.FLOOR)

    monkeypatch.setattr(KernelEmulator, "__init__", floor_kernel)
    r = simulate(small("npu2", "bf16", "bf16"))
    assert not r.passed and r.mismatches > 0 and r.first_mismatch is not None


def test_int8_saturation_is_modelled_per_call():
    c = small("npu1", "i8", "i8", K=8 * 64)
    r = simulate(c, seed=3)
    assert r.passed and r.accuracy.saturated < 0.05 * r.elements
    # the inputs are scaled to K: most outputs are far from zero but inside int8
    assert r.nonzero_fraction > 0.8
