"""build_design(config) -> Design: the whole-array output-stationary GEMM of Striking the Balance.

Mapping (sec. 4.2): core (col, row) computes C tile (block_row*rows + row, block_col*cols + col).
A streams enter through shim/memtile a_col(row) (one per core row, or one per column split into
several rows' tiles when there are fewer columns than rows) and are broadcast along the row;
B streams enter through every column and are broadcast down it; the rows C tiles of a column are
joined in its memtile and drained through its shim.
Runtime (sec. 4.4): one task group per output block (one A BD per row, one B and one C BD per
column), or with task_span per span of consecutive blocks along N (design/spans.py: one BD per channel
for the whole span); `queue_groups` groups are kept in flight, and the sequence waits only on C tokens.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from ..facts import precision as prec
from ..facts.devices import TileKind
from ..facts.dtypes import BF16, F32, I32, I64, dtype
from ..facts.epilogue import MODES, TANH_TABLE_FLOATS, Activation, tanh_table
from ..facts.errors import DmaLimitError, GemmGenError, opt
from ..spec.call import CallPlan
from ..spec.config import GemmConfig
from ..spec.rules import decode_split, shared_l1
from ..spec.rules.kernel_variant import converts_a_tile
from ..spec.rules.l1 import K_WORD, MODE_WORD, TANH_PARTS, TILES_WORD, rtp_words, rtp_written, runtime_barrier
from . import l1_banks, patterns, spans, traffic
from .grid import Grid, grid
from .ir import (
    RESERVE_PREFIX,
    Acquire,
    BarrierRelease,
    BarrierSet,
    BarrierWait,
    Call,
    CoreL1,
    Design,
    HostTensor,
    KernelBuild,
    KernelSpec,
    Link,
    LocalBuffer,
    Loop,
    ObjectFifo,
    Op,
    Release,
    RtpWrite,
    RuntimeCount,
    RuntimeOp,
    SharedBuffer,
    SharedLock,
    ShimTask,
    TileRef,
    Worker,
)
from .l1_banks import L1Plan
from .serve import check
from .tap import Tap


def a_l3l2(shim: int) -> str:
    return f"A_L3L2_{shim}"


def a_l2l1(row: int) -> str:
    return f"A_L2L1_{row}"


def b_l3l2(col: int) -> str:
    return f"B_L3L2_{col}"


def b_l2l1(col: int) -> str:
    return f"B_L2L1_{col}"


def c_l1l2(col: int, row: int) -> str:
    return f"C_L1L2_{col}_{row}"


def c_l2l3(col: int) -> str:
    return f"C_L2L3_{col}"


def core(c: GemmConfig, col: int, row: int) -> TileRef:
    """The core of grid cell (col, row): itself, or in the split decode placement virtual column col's."""
    if decode_split.is_split(c.dev, c.array.rows, c.array.cols):
        col, row = decode_split.core_of(c.dev, col)
    return TileRef(col, c.dev.first_core_row + row)


def _input_path(
    c: GemmConfig, l3l2: str, l2l1: tuple[str, ...], col: int, dtype: str, l2_elems: int, l1_shape: tuple[int, ...],
    consumers: tuple[tuple[TileRef, ...], ...], to_stream: Tap, from_stream: Tap | None,
    l2_from_stream: Tap | None = None,
) -> tuple[list[ObjectFifo], Link]:
    """shim(col) -> memtile(col) -> broadcast to each group of `consumers`: the shape A and B share.

    One L1 fifo is a forward of the memtile object; several (A on fewer columns than core rows)
    split it into equal slices of `l2_elems` each, one per L1 fifo, with the same patterns."""
    mem = TileRef(col, 1)
    into_l2 = ObjectFifo(l3l2, dtype, (l2_elems * len(l2l1),), c.array.depth_ab_l2, TileRef(col, 0), (mem,),
                         dims_from_stream=patterns.dims(l2_from_stream))
    into_l1 = [ObjectFifo(name, dtype, l1_shape, c.array.depth_ab_l1, mem, cons,
                          dims_to_stream=patterns.dims(to_stream),
                          dims_from_stream=patterns.dims(from_stream)) for name, cons in zip(l2l1, consumers)]
    if len(l2l1) == 1:
        return [into_l2, *into_l1], Link("forward", mem, (l3l2,), l2l1, (0,))
    return [into_l2, *into_l1], Link("split", mem, (l3l2,), l2l1, tuple(j * l2_elems for j in range(len(l2l1))))


def kernel_build(c: GemmConfig) -> KernelBuild:
    """The one kernel object file every core of the design links."""
    v = c.variant
    assert v is not None, "a config check_config accepts has a kernel variant (rules/defaults.variant)"
    # every field by its name: the config's option of that name (spec.OPTIONS), else what the config resolved
    resolved: dict[str, Any] = {"aie_target": c.dev.aie_target, "types": c.types, "mmul": c.kernel.mmul,
                                "expansion": v.expansion, "loops": v.loops, "c_col_maj": c.c_t_blocks,
                                "epilogue": c.epilogue}
    return KernelBuild(**{f.name: resolved[f.name] if f.name in resolved else c.value(f.name)
                          for f in fields(KernelBuild)})


def acc_buffer(c: GemmConfig) -> tuple[tuple[int], str]:
    """(shape, dtype) of the worker's C accumulator blocks beyond the C object, in the accumulator's blocked
    order (a split may fall inside a row: spec/rules/l1.c_split_blocks): an int64 accumulator as int32 pairs
    (IRON 1.4.3's str_to_dtype has no i64; the kernel stores acc64 lanes as pairs)."""
    values = c.tiling.m * c.tiling.n - c.c_split_elems
    if c.types.t_acc == I64:
        return (2 * values,), I32.name
    return (values,), str(c.types.acc)


def b_l1_shape(gb: Grid) -> tuple[int, ...]:
    """A B object's shape in L1, in B's units: k x n, or a W4A16 object's words (b_objects)."""
    return (gb.obj,) if gb.obj else (gb.k, gb.n)


def b_deq_buffer(c: GemmConfig) -> tuple[tuple[int, int], str]:
    """(shape, dtype) of a W4A16 core's scratch: one B object dequantized to bf16, in kernel order."""
    return (c.tiling.k, c.tiling.n), BF16.name


def tanh_buffer_shape() -> tuple[tuple[int], str]:
    """(shape, dtype) of one copy of the tanh table: epilogue.TANH_TABLE_FLOATS fp32 values."""
    return (TANH_TABLE_FLOATS,), F32.name


def tanh_buffers(c: GemmConfig, col: int, row: int, l1: L1Plan | None) -> list[LocalBuffer]:
    """The tanh table's two copies on core (col, row): Buffers holding the target's table from configuration on
    (epilogue.tanh_table in Device.lut_copy_bits' layout), each pinned to the bank the L1 plan gives it (two
    banks: aie::lut<4>), none without an epilogue that reads them."""
    if not c.epilogue.uses_tanh:
        return []
    shape, dt = tanh_buffer_shape()
    values = tuple(float(v) for v in tanh_table(c.dev.lut_copy_bits))
    return [LocalBuffer(f"tanh_{part.split()[1]}_{col}_{row}", shape, dt, initial_value=values,
                        mem_bank=None if l1 is None else l1.mem_bank(part)) for part in TANH_PARTS]


def kernel_specs(c: GemmConfig, obj: KernelBuild | None = None) -> dict[str, KernelSpec]:
    """zero, matmul (and convert when C accumulates in another type), with their argument types.

    Buffers in order: A, B, C (the fifo object), then the worker's own A (and, converting bf16
    once, B) bfp16 scratch and C accumulator rows when the kernel needs them; int32 C slice last
    when rho > 1. `obj`: the config's kernel_build, when built already.
    """
    obj = obj or kernel_build(c)
    names = obj.symbols
    a, b, cg = (grid(c, op) for op in ("A", "B", "C"))
    p = c.types.precision
    c_obj = ((cg.m, cg.n), c.types.dtype_out)
    extra_c = [acc_buffer(c)] if p.converts_c else []  # acc blocks beyond the object
    scratch = []
    q = dtype(prec.BFP16).tile_rows
    if converts_a_tile(p, bool(c.kernel.convert_once)):  # the A tile converted to bfp16 tiles by the kernel
        scratch = [((c.t_ma // q, c.tiling.k // q), prec.BFP16)]
    if c.kernel.convert_once:  # and the B tile
        scratch.append(((c.tiling.k // q, c.tiling.n // q), prec.BFP16))
    # W4A16: the kernel dequantizes each B object into a k x n bf16 scratch, its last argument (converting once:
    # into the B bfp16 scratch above instead)
    deq = [b_deq_buffer(c)] if b.obj and not c.kernel.convert_once else []
    matmul_args = [((a.t_ma, a.k), c.types.dtype_in), (b_l1_shape(b), str(c.types.dtype_b)), c_obj, *scratch, *extra_c,
                   *deq]
    specs = {
        "zero": KernelSpec(names["zero"], "zero", obj, tuple(s for s, _ in [c_obj, *extra_c]),
                           tuple(t for _, t in [c_obj, *extra_c])),
        "matmul": KernelSpec(names["matmul"], "matmul", obj, tuple(s for s, _ in matmul_args),
                             tuple(t for _, t in matmul_args), ("i32",) if c.tiling.rho > 1 else ()),
    }
    if p.converts_c:
        # with an epilogue tile, the B object that carries it is the convert call's third argument; the tanh
        # table's two copies follow
        tile = [((b.k, b.n), str(c.types.dtype_b))] if c.epilogue.needs_tile else []
        tables = [tanh_buffer_shape()] * 2 if c.epilogue.uses_tanh else []
        convert_args = [c_obj, extra_c[0], *tile, *tables]
        mode = ("i32",) if c.epilogue.runtime else ()  # the call's activation (epilogue.MODES), a scalar
        specs["convert"] = KernelSpec(names["convert"], "convert", obj, tuple(s for s, _ in convert_args),
                                      tuple(t for _, t in convert_args), mode)
    return specs


def worker(c: GemmConfig, specs: dict[str, KernelSpec], col: int, row: int, l1: L1Plan | None = None) -> Worker:
    """Output-stationary loop: acquire C, zero it, K/k steps of A x B, (convert,) release C. With an
    epilogue tile the conversion holds one more B object, the tile: acquire B, convert, release B.

    With rho > 1 each k-step keeps its B tile while rho A tiles stream past it, each updating its
    own C slice (asymmetric tile buffering). `l1` is the core's L1 allocation: its scheme and the
    reservations that steer the allocator."""
    a, b, cc = a_l2l1(row), b_l2l1(col), c_l1l2(col, row)
    p = c.types.precision
    buffers = []
    scratch: tuple[str, ...] = ()
    acc: tuple[str, ...] = ()
    matmul = specs["matmul"]
    if converts_a_tile(p, bool(c.kernel.convert_once)):
        scratch = (f"A_bfp16_{col}_{row}",)
        buffers.append(LocalBuffer(scratch[0], matmul.arg_shapes[3], prec.BFP16))
    if c.kernel.convert_once:
        scratch = (*scratch, f"B_bfp16_{col}_{row}")
        buffers.append(LocalBuffer(scratch[1], matmul.arg_shapes[4], prec.BFP16))
    if p.converts_c:
        acc = (f"C_acc_{col}_{row}",)
        buffers.append(LocalBuffer(acc[0], *acc_buffer(c)))
    deq: tuple[str, ...] = ()
    # W4A16: the dequantized B object (kernel_specs' last matmul argument)
    if c.groups.group_size and not c.kernel.convert_once:
        deq = (f"B_deq_{col}_{row}",)
        buffers.append(LocalBuffer(deq[0], *b_deq_buffer(c)))
    words = rtp_words(c.runtime.runtime_sizes, c.epilogue.runtime)
    if words:
        buffers.append(LocalBuffer(rtp_buffer(col, row), (words,), "i32", rtp=True))
    tables = tanh_buffers(c, col, row, l1)  # the tanh table's copies, convert's last two buffers
    buffers += tables
    luts = tuple(t.name for t in tables)
    if l1 is not None:
        buffers += [LocalBuffer(f"{RESERVE_PREFIX}_{i}_{col}_{row}", (nbytes,), "i8", address=at)
                    for i, (at, nbytes) in enumerate(l1.reserved)]
    args = (a, b, cc, *scratch, *acc, *deq)
    if c.tiling.rho == 1:
        step: tuple = (Acquire(a), Acquire(b), Call(matmul.name, args), Release(a), Release(b))
    else:  # ATB: B stays for the k-step while rho A tiles update their own C slices
        slices = tuple(op for i in range(c.tiling.rho)
                       for op in (Acquire(a), Call(matmul.name, args, (i,)), Release(a)))
        step = (Acquire(b), *slices, Release(b))
    body: list = [Acquire(cc), Call(specs["zero"].name, (cc, *acc))]
    if c.runtime.runtime_sizes == "mnk":  # the first k-step is peeled: a call's K may be one k-step
        body += [*step, Loop(RuntimeCount(rtp_buffer(col, row), K_WORD), step)]
    else:
        body.append(Loop(c.call.k_steps, step))
    # a runtime activation: the mode word, convert's scalar
    mode = (RuntimeCount(rtp_buffer(col, row), MODE_WORD),) if c.epilogue.runtime else ()
    if c.epilogue.needs_tile:  # one more B object per output tile: the epilogue tile, read by the conversion
        body += [Acquire(b), Call(specs["convert"].name, (cc, *acc, b, *luts), mode), Release(b)]
    elif p.converts_c:
        body.append(Call(specs["convert"].name, (cc, *acc, *luts), mode))
    body.append(Release(cc))
    program: tuple[Op, ...]
    barrier = barrier_name(col, row) if runtime_barrier(c.runtime.runtime_sizes, c.epilogue.runtime) else None
    if barrier is None:
        # A fixed design counts its output tiles (mlir-aie's loop); one that serves many sizes and reads
        # no parameter runs output tiles for as long as data comes (the core repeats its program forever).
        program = (Loop(c.call.tiles_per_core, tuple(body)),) if c.runtime.runtime_sizes == "fixed" else tuple(body)
    else:
        # One pass of the program is one call (the core repeats it forever): wait until this call's sequence
        # has set the barrier, which it does after writing the parameters, then close it again for the next
        # call (mlir-aie's GEMM operator: wait_for_value(1), read, release_with_value(1)). Every read of the
        # call's words comes after the wait and before the call's last C object leaves, so before the next
        # call writes them. The call's output tiles: a constant, or the tiles word this call wrote.
        tiles = (c.call.tiles_per_core if c.runtime.runtime_sizes == "fixed"
                 else RuntimeCount(rtp_buffer(col, row), TILES_WORD))
        program = (BarrierWait(BARRIER_OPEN), BarrierRelease(BARRIER_OPEN), Loop(tiles, tuple(body)))
    return Worker(core(c, col, row), program, tuple(k.name for k in specs.values()), c.array.stack_bytes,
                  tuple(buffers),
                  None if l1 is None else l1.scheme, barrier)


def build_design(config: GemmConfig, budgets: bool = True) -> Design:
    """The complete Design of a valid config (raises ConfigError / DmaLimitError otherwise).

    budgets=False skips the L1 and memtile capacity checks (see checks.check_config)."""
    c = check(config, budgets)
    ga, gb, gc = (grid(c, op) for op in ("A", "B", "C"))
    fifos: list[ObjectFifo] = []
    links: list[Link] = []
    for shim in range(c.a_shims):  # A: each of its rows broadcast along core row `row`, in rho tiles of T_MA rows
        rows = range(shim * c.a_rows_per_shim, (shim + 1) * c.a_rows_per_shim)
        made, link = _input_path(c, a_l3l2(shim), tuple(a_l2l1(row) for row in rows), c.a_shim_col(shim),
                                 c.types.dtype_in, ga.m * ga.k_mt, (ga.t_ma, ga.k),
                                 tuple(tuple(core(c, col, row) for col in range(c.array.cols)) for row in rows),
                                 patterns.a_l2_to_stream(ga), patterns.a_l1_from_stream(ga),
                                 patterns.a_l2_from_stream(ga))
        fifos += made
        links.append(link)
    split = decode_split.is_split(c.dev, c.array.rows, c.array.cols)
    for col in range(0 if split else c.array.cols):  # B: broadcast down core column `col`
        made, link = _input_path(c, b_l3l2(col), (b_l2l1(col),), col, str(c.types.dtype_b), gb.b_l2_units,
                                 b_l1_shape(gb),
                                 (tuple(core(c, col, row) for row in range(c.array.rows)),),
                                 patterns.b_l2_to_stream(gb), patterns.b_l1_from_stream(gb))
        fifos += made
        links.append(link)
    if split:
        made_links = _split_paths(c, gb, gc)
        fifos += made_links[0]
        links += made_links[1]
    for col in range(0 if split else c.array.cols):  # C: join the rows tiles of column `col` in its memtile
        mem = TileRef(col, 1)
        for row in range(c.array.rows):
            fifos.append(ObjectFifo(c_l1l2(col, row), c.types.dtype_out, (gc.m, gc.n), c.array.depth_c_l1,
                                    core(c, col, row), (mem,)))
        fifos.append(ObjectFifo(
            c_l2l3(col), c.types.dtype_out, (c.array.rows * gc.m * gc.n,), c.array.depth_c_l2, mem, (TileRef(col, 0),),
            dims_to_stream=patterns.dims(patterns.c_l2_to_stream(gc)),
        ))
        links.append(Link("join", mem, tuple(c_l1l2(col, row) for row in range(c.array.rows)), (c_l2l3(col),),
                          tuple(row * gc.m * gc.n for row in range(c.array.rows))))

    obj = kernel_build(c)
    specs = kernel_specs(c, obj)
    roles = _l1_roles(c, budgets)  # every core holds the same buffers, but for the shared ones
    l1 = roles[0].plan
    workers = [worker(c, specs, col, row, l1) for row in range(c.array.rows) for col in range(c.array.cols)]
    placement = c.memtile_placement() if budgets else c.memtile_buffers()
    runtime = runtime_sequence(c, c.call)
    tensors = host_tensors(c, c.call, runtime)
    shared = shared_buffers(c)
    return Design(c, tensors, tuple(fifos), tuple(links), tuple(specs.values()), tuple(workers), tuple(placement),
                  runtime, obj, (ga, gb, gc), **runtime_facts(runtime, tensors), l1=l1, shared=shared,
                  l1_roles=roles if shared else ())


def shared_buffers(c: GemmConfig) -> tuple[SharedBuffer, ...]:
    """The neighbour-shared L1 buffers of `c` (spec/rules/shared_l1.holdings), each with its three relay locks on
    its holder and the memtile that streams its objects (B's: its column's; A's: the memtile of its row's A
    shim)."""
    out = []
    for h in shared_l1.holdings(c.array.rows, c.array.cols, c.array.share_l1):
        holder = core(c, *h.holder)
        name = f"{h.operand}_{shared_l1.SLOTS[h.slot]}_{holder.col}_{holder.row}"
        locks = tuple(SharedLock(f"{name}_{kind}", holder, init) for kind, init in shared_l1.LOCKS)
        source = TileRef(h.holder[0] if h.operand == "B" else c.a_col(h.holder[1]), 1)
        fifo = b_l2l1(h.holder[0]) if h.operand == "B" else a_l2l1(h.holder[1])
        out.append(SharedBuffer(name, h.operand, h.slot, holder, tuple(core(c, *t) for t in h.readers), locks, source,
                                fifo))
    return tuple(out)


def _l1_roles(c: GemmConfig, budgets: bool) -> tuple[CoreL1, ...]:
    """Each core role's L1 plan (l1_banks.core_roles: one without sharing), with the cores that have it."""
    out = []
    share = c.array.share_l1
    for role in l1_banks.core_roles(c):
        tiles = tuple(core(c, col, row) for row in range(c.array.rows) for col in range(c.array.cols)
                      if (not shared_l1.shared(share, "A") or (col % 2 == 0) == role.a_holder)
                      and (not shared_l1.shared(share, "B") or row % 2 == role.b_slot))
        out.append(CoreL1(role.name(c), tiles, _l1_plan(c, budgets, role)))
    return tuple(out)


def _l1_plan(c: GemmConfig, budgets: bool, role: l1_banks.CoreRole = l1_banks.HOLDER) -> L1Plan | None:
    """The cores' L1 allocation (l1_banks.plan); skipping the budgets, None when no allocation fits (a design
    past its L1 budget, which predict still prices: without bank stalls)."""
    try:
        return l1_banks.plan(c, c.array.l1_alloc, role)
    except GemmGenError:
        if budgets:
            raise
        return None


def runtime_facts(runtime: tuple[RuntimeOp, ...], tensors: tuple[HostTensor, ...]) -> dict[str, Any]:
    """What a runtime sequence computes, as the Design stores it: its shim traffic and task groups."""
    tasks = tuple(op.task for op in runtime if op.task is not None)
    return {"traffic": traffic.count_traffic(tasks, tensors), "task_groups": traffic.task_groups(tasks),
            "tasks_per_group": traffic.tasks_per_group(tasks)}


def for_call(design: Design, call: CallPlan) -> Design:
    """The Design serving another call (design/serve.serve plans it): that call's runtime sequence and host
    tensors, and what they compute; the xclbin's part (fifos, kernels, workers, the L1 plan) as it is."""
    c = design.config
    runtime = runtime_sequence(c, call)
    tensors = host_tensors(c, call, runtime)
    return replace(design, runtime=runtime, tensors=tensors, **runtime_facts(runtime, tensors))


def _split_paths(c: GemmConfig, gb: Grid, gc: Grid) -> tuple[list[ObjectFifo], list[Link]]:
    """B and C of the split decode placement (spec/rules/decode_split.py): each B stream from its shim into its memtile,
    split there to its cores (a k x n tile each); each physical column's C tiles joined along N in its memtile,
    out through its shim."""
    fifos: list[ObjectFifo] = []
    links: list[Link] = []
    for i, s in enumerate(decode_split.streams(c.dev)):
        made, link = _input_path(c, b_l3l2(i), tuple(b_l2l1(v) for v in s.columns), s.shim, str(c.types.dtype_b),
                                 gb.b_l2_units, b_l1_shape(gb), tuple((core(c, v, 0),) for v in s.columns),
                                 patterns.b_l2_to_stream(gb), patterns.b_l1_from_stream(gb))
        fifos += made
        links.append(link)
    rows = c.dev.core_rows
    for pc in range(c.dev.columns):
        mem = TileRef(pc, 1)
        joined = range(pc * rows, (pc + 1) * rows)
        fifos += [ObjectFifo(c_l1l2(v, 0), c.types.dtype_out, (gc.m, gc.n), c.array.depth_c_l1, core(c, v, 0),
                             (mem,)) for v in joined]
        fifos.append(ObjectFifo(c_l2l3(pc), c.types.dtype_out, (rows * gc.m * gc.n,), c.array.depth_c_l2, mem,
                                (TileRef(pc, 0),), dims_to_stream=patterns.dims(patterns.c_l2_to_stream(gc))))
        links.append(Link("join", mem, tuple(c_l1l2(v, 0) for v in joined), (c_l2l3(pc),),
                          tuple(j * gc.m * gc.n for j in range(rows))))
    return fifos, links


def rtp_buffer(col: int, row: int) -> str:
    """The runtime-parameter buffer of core (col, row) (spec/rules/l1.py: its words)."""
    return f"rtp_{col}_{row}"


BARRIER_OPEN = 1  # the value a call's sequence sets the barrier to, and its cores wait for and add on


def barrier_name(col: int, row: int) -> str:
    """The runtime barrier of core (col, row)."""
    return f"barrier_{col}_{row}"


def host_tensors(c: GemmConfig, call: CallPlan, runtime: tuple[RuntimeOp, ...] | None = None
                 ) -> tuple[HostTensor, ...]:
    """The runtime sequence's arguments for one call, in DMA units, each with the slack that the
    call's transfers (`runtime`, default the call's own sequence) reach past its matrix: junk rows
    of a problem smaller than one block, the K tail of the last row."""
    shapes = {}
    for name, t in (("A", c.types.t_in), ("B", c.types.t_b), ("C", c.types.t_out)):
        rows, cols = call.storage(name)
        shapes[name] = (rows // t.tile_rows, cols // t.tile_cols)
    gb = grid(c, "B", call)
    if gb.obj:  # one row per core-column strip of objects
        shapes["B"] = (gb.Np // gb.n, gb.kw // gb.k * gb.obj)
    elif c.layout.b_pack == "strips":  # one row per core-column strip
        shapes["B"] = (gb.Np // gb.n, gb.kw * gb.n)
    reach = {name: rows * cols for name, (rows, cols) in shapes.items()}
    for op in runtime_sequence(c, call) if runtime is None else runtime:
        if op.task is not None:
            reach[op.task.tensor] = max(reach[op.task.tensor], op.task.tap.max_index() + 1)
    types = {"A": c.types.dtype_in, "B": str(c.types.dtype_b), "C": c.types.dtype_out}
    return tuple(HostTensor(name, shapes[name], types[name], reach[name] - shapes[name][0] * shapes[name][1])
                 for name in ("A", "B", "C"))


def block_tasks(c: GemmConfig, call: CallPlan, block: int, group: int | None = None) -> list[ShimTask]:
    """The BD tasks of one output block, ordered per shim column: A (if any), B, C; in task group
    `group` (default: the block's own index)."""
    group = block if group is None else group
    m_block, n_block = divmod(block, call.n_blocks)
    ga, gb, gc = (grid(c, op, call) for op in ("A", "B", "C"))
    row0, col0 = call.m_origin(m_block), call.n_origin(n_block)
    if decode_split.is_split(c.dev, c.array.rows, c.array.cols):
        return _split_tasks(c, (ga, gb, gc), row0, col0, group)
    a_shims = {c.a_shim_col(i): i for i in range(c.a_shims)}
    tasks = []
    for col in range(c.array.cols):
        shim = TileRef(col, 0)
        if col in a_shims:
            i = a_shims[col]
            tasks.append(ShimTask(f"A{i}_g{group}", "fill", a_l3l2(i), "A", shim,
                                  patterns.shim_a(ga, row0 // ga.unit.tile_rows, i), False, group))
        tasks.append(ShimTask(f"B{col}_g{group}", "fill", b_l3l2(col), "B", shim,
                              patterns.shim_b(gb, col0 // gb.unit.tile_cols, col), False, group))
        tasks.append(ShimTask(f"C{col}_g{group}", "drain", c_l2l3(col), "C", shim,
                              patterns.shim_c(gc, row0 // gc.unit.tile_rows, col0 // gc.unit.tile_rows, col), True,
                              group))
    return tasks


def _split_tasks(c: GemmConfig, grids: tuple[Grid, Grid, Grid], row0: int, col0: int, group: int) -> list[ShimTask]:
    """One output block's tasks in the split decode placement, per shim column: A (column 0), its B streams, its
    C; every walk one shim BD (patterns.split_b_task / split_c_task)."""
    ga, gb, gc = grids
    tasks = []
    for pc in range(c.dev.columns):
        shim = TileRef(pc, 0)
        if pc == decode_split.A_COL:
            tasks.append(ShimTask(f"A0_g{group}", "fill", a_l3l2(0), "A", shim,
                                  patterns.shim_a(ga, row0 // ga.unit.tile_rows, 0), False, group))
        for i, s in enumerate(decode_split.streams(c.dev)):
            if s.shim == pc:
                tasks.append(ShimTask(f"B{i}_g{group}", "fill", b_l3l2(i), "B", shim,
                                      patterns.split_b_task(gb, col0 // gb.unit.tile_cols, i), False, group))
        tasks.append(ShimTask(f"C{pc}_g{group}", "drain", c_l2l3(pc), "C", shim,
                              patterns.split_c_task(gc, row0 // gc.unit.tile_rows, col0 // gc.unit.tile_rows, pc),
                              True, group))
    return tasks


SPAN_FIX = f"use {opt('task_span', 1)} (a task per output block) or 0 (the longest span one BD expresses)"


def span_tasks(c: GemmConfig, call: CallPlan, blocks: tuple[int, ...], group: int) -> list[ShimTask]:
    """Task group `group`: one task per channel for the consecutive output blocks `blocks` of one
    row band (design/spans.py), whose walk is the blocks' walks in turn; DmaLimitError when one
    channel's concatenation is no single shim BD."""
    per_block = [block_tasks(c, call, b, group) for b in blocks]
    if len(blocks) == 1:
        return per_block[0]
    shim = c.dev.dma[TileKind.SHIM]
    units = {name: grid(c, name, call).unit for name in ("A", "B", "C")}
    tasks = []
    for same in zip(*per_block):
        first = same[0]
        where = (f"task span {len(blocks)}: shim {'MM2S' if first.direction == 'fill' else 'S2MM'} {first.tensor} "
                 f"over output blocks {blocks[0]}..{blocks[-1]}")
        walk = spans.concat([t.tap for t in same])
        if walk is None:  # pragma: no cover - row_spans keeps only blocks in arithmetic progression
            raise DmaLimitError(f"{where}: the blocks' walks are not one pattern", SPAN_FIX)
        tasks.append(replace(first, tap=spans.shim_walk(walk, units[first.tensor], shim, where, SPAN_FIX)))
    return tasks


def task_span(c: GemmConfig, call: CallPlan) -> int:
    """The blocks per span of a call: the config's task_span (within the row band), or for 0 the
    most consecutive blocks whose every channel's walk one shim BD expresses (every span of that
    length has the same walks at other offsets: checking the first is enough)."""
    regular = spans.regular_blocks(call)
    if c.runtime.task_span:
        return max(1, min(c.runtime.task_span, regular))
    for span in range(regular, 1, -1):
        try:
            span_tasks(c, call, tuple(range(span)), 0)
        except DmaLimitError:
            continue
        return span
    return 1


def group_blocks(c: GemmConfig, call: CallPlan) -> tuple[tuple[int, ...], ...]:
    """The output blocks of each task group of a call, in sequence order (one each unless spanned)."""
    return spans.block_spans(call, task_span(c, call))


def group_tasks(c: GemmConfig, call: CallPlan, group: int,
                groups: tuple[tuple[int, ...], ...] | None = None) -> list[ShimTask]:
    """The BD tasks of task group `group` (`groups`: group_blocks, when known), ordered per shim
    column: A (if any), B, C."""
    blocks = (groups or group_blocks(c, call))[group]
    return span_tasks(c, call, blocks, group)


def runtime_sequence(c: GemmConfig, call: CallPlan | None = None) -> tuple[RuntimeOp, ...]:
    """One call's runtime sequence: the runtime parameters (spec/rules/l1.py rtp_written) and then every core's
    barrier set, then the overlapped BD queue: prime `queue_groups` groups, then retire one, issue the next."""
    call = call or c.call
    spanned = group_blocks(c, call)
    groups = len(spanned)
    ops: list[RuntimeOp] = []
    cores = [(col, row) for row in range(c.array.rows) for col in range(c.array.cols)]
    words = {K_WORD: call.k_walk // c.tiling.k - 1,
             TILES_WORD: call.tiles_per_core}  # runtime K's k-steps after the first
    if c.epilogue.runtime:  # the activation this call selects, every call (a stale mode is never read)
        words[MODE_WORD] = MODES[Activation(call.activation or "none")]
    for index in rtp_written(c.runtime.runtime_sizes, c.epilogue.runtime):
        ops += [RuntimeOp("rtp", -1, rtp=RtpWrite(core(c, col, row), rtp_buffer(col, row), index, words[index]))
                for col, row in cores]
    if runtime_barrier(c.runtime.runtime_sizes, c.epilogue.runtime):  # after the writes: what the cores wait for
        ops += [RuntimeOp("barrier", -1, barrier=BarrierSet(core(c, col, row), barrier_name(col, row), BARRIER_OPEN))
                for col, row in cores]

    def issue(g: int) -> None:
        ops.extend(RuntimeOp("task", g, t) for t in group_tasks(c, call, g, spanned))

    for g in range(min(c.runtime.queue_groups, groups)):
        issue(g)
    for g in range(groups):
        ops.append(RuntimeOp("finish", g))
        if g + c.runtime.queue_groups < groups:
            issue(g + c.runtime.queue_groups)
    return tuple(ops)
