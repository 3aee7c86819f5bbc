"""build_design(config) -> Design: the whole-array output-stationary GEMM of Striking the Balance.

Mapping (sec. 4.2): core (col, row) computes C tile (block_row*rows + row, block_col*cols + col).
A streams (one per core row) enter through shim/memtile a_col(row) and are broadcast along the row;
B streams enter through every column and are broadcast down it; the rows C tiles of a column are
joined in its memtile and drained through its shim.
Runtime (sec. 4.4): one task group per output block (one A BD per row, one B and one C BD per
column); `queue_groups` groups are kept in flight, and the sequence waits only on C tokens.
"""

from __future__ import annotations

from ..config import GemmConfig
from ..tap import Tap
from . import patterns
from .model import (
    Acquire,
    Call,
    Design,
    HostTensor,
    KernelBuild,
    KernelSpec,
    Link,
    Loop,
    ObjectFifo,
    Release,
    RuntimeOp,
    ShimTask,
    TileRef,
    Worker,
)


def a_l3l2(row: int) -> str:
    return f"A_L3L2_{row}"


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
    return TileRef(col, c.dev.first_core_row + row)


def _input_path(
    c: GemmConfig, l3l2: str, l2l1: str, col: int, l2_elems: int, l1_shape: tuple[int, int],
    consumers: tuple[TileRef, ...], to_stream: Tap, from_stream: Tap | None, l2_from_stream: Tap | None = None,
) -> tuple[ObjectFifo, ObjectFifo, Link]:
    """shim(col) -> memtile(col) -> broadcast to `consumers`: the shape A and B share."""
    mem = TileRef(col, 1)
    into_l2 = ObjectFifo(l3l2, c.dtype_in, (l2_elems,), c.depth_ab_l2, TileRef(col, 0), (mem,),
                         dims_from_stream=l2_from_stream)
    into_l1 = ObjectFifo(l2l1, c.dtype_in, l1_shape, c.depth_ab_l1, mem, consumers,
                         dims_to_stream=to_stream, dims_from_stream=from_stream)
    return into_l2, into_l1, Link("forward", mem, (l3l2,), (l2l1,), (0,))


def build_design(config: GemmConfig, budgets: bool = True) -> Design:
    """The Design of a config. budgets=False builds one that breaks an L1/memtile budget (for the
    model to predict it); such a design is not buildable and its memtile buffers stay unplaced."""
    c = config.validate(budgets)
    fifos: list[ObjectFifo] = []
    links: list[Link] = []
    for row in range(c.rows):  # A: broadcast along core row `row`, in rho tiles of T_MA rows per k-step
        *pair, link = _input_path(c, a_l3l2(row), a_l2l1(row), c.a_col(row), c.m * c.k_mt, (c.t_ma, c.k),
                                  tuple(core(c, col, row) for col in range(c.cols)),
                                  patterns.a_l2_to_stream(c), patterns.a_l1_from_stream(c),
                                  patterns.a_l2_from_stream(c))
        fifos += pair
        links.append(link)
    for col in range(c.cols):  # B: broadcast down core column `col`
        *pair, link = _input_path(c, b_l3l2(col), b_l2l1(col), col, c.b_l2_k * c.n, (c.k, c.n),
                                  tuple(core(c, col, row) for row in range(c.rows)),
                                  patterns.b_l2_to_stream(c), patterns.b_l1_from_stream(c))
        fifos += pair
        links.append(link)
    for col in range(c.cols):
        mem = TileRef(col, 1)
        for row in range(c.rows):
            fifos.append(ObjectFifo(c_l1l2(col, row), c.dtype_out, (c.m, c.n), c.depth_c_l1, core(c, col, row), (mem,)))
        fifos.append(ObjectFifo(
            c_l2l3(col), c.dtype_out, (c.rows * c.m * c.n,), c.depth_c_l2, mem, (TileRef(col, 0),),
            dims_to_stream=patterns.c_l2_to_stream(c),
        ))
        links.append(Link("join", mem, tuple(c_l1l2(col, row) for row in range(c.rows)), (c_l2l3(col),),
                          tuple(row * c.m * c.n for row in range(c.rows))))

    obj = KernelBuild(c.dev.aie_target, c.dtype_in, c.dtype_out, c.m, c.k, c.n, c.mmul, c.b_col_maj,
                      bool(c.emulate_bf16_with_bfp16), c.rounding, c.saturation, c.shift, c.compiler, c.rho)
    zero = KernelSpec(f"zero_{c.dtype_out}", "zero", obj, ((c.m, c.n),), (c.dtype_out,))
    matmul = KernelSpec(
        f"matmul_{c.dtype_in}_{c.dtype_out}", "matmul", obj,
        ((c.t_ma, c.k), (c.k, c.n), (c.m, c.n)), (c.dtype_in, c.dtype_in, c.dtype_out),
        ("i32",) if c.rho > 1 else (),
    )
    workers = []
    for row in range(c.rows):
        for col in range(c.cols):
            a, b, cc = a_l2l1(row), b_l2l1(col), c_l1l2(col, row)
            if c.rho == 1:
                step: tuple = (Acquire(a), Acquire(b), Call(matmul.name, (a, b, cc)), Release(a), Release(b))
            else:  # ATB: B stays for the k-step while rho A tiles update their own C slices
                slices = tuple(op for i in range(c.rho)
                               for op in (Acquire(a), Call(matmul.name, (a, b, cc), (i,)), Release(a)))
                step = (Acquire(b), *slices, Release(b))
            k_loop = Loop(c.k_steps, step)
            program = (Loop(c.tiles_per_core, (Acquire(cc), Call(zero.name, (cc,)), k_loop, Release(cc))),)
            workers.append(Worker(core(c, col, row), program, (zero.name, matmul.name), c.stack_bytes))

    b_shape = (c.Np, c.Kp) if c.b_col_maj else (c.Kp, c.Np)
    tensors = (HostTensor("A", (c.Mp, c.Kp), c.dtype_in), HostTensor("B", b_shape, c.dtype_in),
               HostTensor("C", (c.Mp, c.Np), c.dtype_out))
    placement = c.memtile_placement() if budgets else c.memtile_buffers()
    return Design(c, tensors, tuple(fifos), tuple(links), (zero, matmul), tuple(workers),
                  tuple(placement), runtime_sequence(c))


def group_tasks(c: GemmConfig, group: int) -> list[ShimTask]:
    """The BD tasks of one output block, ordered per shim column: A (if any), B, C."""
    m_block, n_block = divmod(group, c.n_blocks)
    a_rows = {col: row for row, col in enumerate(c.a_cols)}
    tasks = []
    for col in range(c.cols):
        shim = TileRef(col, 0)
        if col in a_rows:
            row = a_rows[col]
            tasks.append(ShimTask(f"A{row}_g{group}", "fill", a_l3l2(row), "A", shim,
                                  patterns.shim_a(c, m_block, row), False, group))
        tasks.append(ShimTask(f"B{col}_g{group}", "fill", b_l3l2(col), "B", shim,
                              patterns.shim_b(c, n_block, col), False, group))
        tasks.append(ShimTask(f"C{col}_g{group}", "drain", c_l2l3(col), "C", shim,
                              patterns.shim_c(c, m_block, n_block, col), True, group))
    return tasks


def runtime_sequence(c: GemmConfig) -> tuple[RuntimeOp, ...]:
    """The overlapped BD queue: prime `queue_groups` groups, then retire one, issue the next."""
    groups = c.m_blocks * c.n_blocks
    ops: list[RuntimeOp] = []

    def issue(g: int) -> None:
        ops.extend(RuntimeOp("task", g, t) for t in group_tasks(c, g))

    for g in range(min(c.queue_groups, groups)):
        issue(g)
    for g in range(groups):
        ops.append(RuntimeOp("finish", g))
        if g + c.queue_groups < groups:
            issue(g + c.queue_groups)
    return tuple(ops)
