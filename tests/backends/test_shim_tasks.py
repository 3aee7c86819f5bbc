"""The runtime-sequence DMA task ops a shared-L1 design's B shim leg needs (docs/shared_l1.md 10.1), against the
IRON stand-in: an explicit Flow's shim_dma_allocation driven by aiex.shim_dma_single_bd_task / dma_start_task /
dma_await_task / dma_free_task beside IRON's own TaskGroup fills and drains. Each rule the stand-in holds these
to (mlir-aie 1.4.3's, or its own where 1.4.3 is silent; docs/shared_l1.md section 4) is broken once here, and the
pattern the lowering will emit is recorded whole, accepted, and refused with its free missing or misplaced."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from gemm_gen.backends import pins

from .. import iron_recorder as ir

A_TY = np.ndarray[(64,), np.dtype[np.int32]]  # one object of A, of C and of B (the fifos' and the memtile's)
BUF = np.ndarray[(1 << 22,), np.dtype[np.int32]]  # each runtime buffer (room for the widest strides below)
LINEAR = {"sizes": [1, 1, 1, 64], "strides": [0, 0, 0, 1]}
TOKEN_RULE = r"^'aiex.dma_await_task' op awaits a task-completion token on a channel where no outstanding token"


def _tap(offset: int = 0) -> ir.TensorAccessPattern:
    return ir.TensorAccessPattern((1024,), offset, [1, 1, 1, 64], [0, 0, 0, 1])


def run(body: Callable[..., None], *, flows: list[ir.Flow] | None = None, fifos: bool = False,
        add_flow: bool = True, device: Callable[[], Any] = ir.NPU1) -> Any:
    """A program on column 0 whose runtime sequence body(a, b, c, a_in, c_out) runs: a Flow shim (0,0) MM2S 0 ->
    memtile (0,1) S2MM 0 declaring `B_in` (or `flows`), given to Runtime.add_flow unless add_flow is False; with
    `fifos`, A (shim -> core (0,2)) and C (core -> shim) ObjectFifos whose shim ends the runtime holds."""
    ir.api()
    shim, mem, core = ir.Tile(0, 0), ir.Tile(0, 1), ir.Tile(0, 2)
    handles: list[Any] = []
    workers = []
    if fifos:
        a_fifo, c_fifo = ir.ObjectFifo(A_TY, name="A_in", depth=2), ir.ObjectFifo(A_TY, name="C_out", depth=2)
        handles = [a_fifo.prod(tile=shim), c_fifo.cons(tile=shim)]
        workers = [ir.Worker(lambda a, c: None, [a_fifo.cons(), c_fifo.prod()], tile=core)]
    rt = ir.Runtime(lambda a, b, c, *hs: body(a, b, c, *hs), [BUF, BUF, BUF, *handles])
    if add_flow:
        for f in flows if flows is not None else [ir.Flow(shim, mem, src_channel=0, dst_channel=0,
                                                          shim_symbol="B_in")]:
            rt.add_flow(f)
    program = ir.Program(device(), rt, workers=workers)
    program.resolve_program()
    return program


def b_task(b: Any, block: int = 0, **kw: Any) -> ir.DmaTask:
    return ir.shim_dma_single_bd_task("B_in", b.op, offset=64 * block, **{**LINEAR, **kw})


# ---- the pattern the lowering will emit (docs/shared_l1.md 10.1, last paragraph) ---------------------------------
def b_shim_leg(blocks: int, free: str = "after") -> Callable[..., None]:
    """Per block: B's raw task started, A's fill and C's drain (wait=True) in a TaskGroup, tg.finish() (which
    awaits C, then frees A and C), then dma_free_task(B). `free`: "after" (as above), "missing", or "before" (the
    free between the drain and the finish, before C's await)."""
    def body(a: Any, b: Any, c: Any, a_in: Any, c_out: Any) -> None:
        for k in range(blocks):
            tg = ir.TaskGroup()
            task = b_task(b, k)
            ir.dma_start_task(task)
            a_in.fill(a, tap=_tap(64 * k), group=tg)
            c_out.drain(c, tap=_tap(64 * k), wait=True, group=tg)
            if free == "before":
                ir.dma_free_task(task)
            tg.finish()
            if free == "after":
                ir.dma_free_task(task)
    return body


def test_the_b_shim_leg_pattern_is_accepted_and_recorded_in_order() -> None:
    program = run(b_shim_leg(12), fifos=True)  # 12 blocks: 36 shim tasks, 3 live at a time on the one shim tile
    block = [("configure", "B_in"), ("start", "B_in"), ("task", 0), ("task", 0), ("finish", 0), ("free", "B_in")]
    events = ir.REC.rt_events
    assert events[:6] == block and len(events) == 12 * 6
    assert [e[0] for e in events] == [e[0] for e in block] * 12
    assert [t["kind"] for t in ir.REC.transfers] == ["fill", "drain"] * 12
    dump = str(ir.Dump(program)).splitlines()
    assert [line for line in dump if line.startswith("rt task")] == \
        [f"rt task B_in <arg1>.op {64 * k} [1, 1, 1, 64] [0, 0, 0, 1] token=False" for k in range(12)]
    assert "flow Tile(0, 0) DMA0 -> Tile(0, 1) DMA0 shim=B_in" in dump


def test_the_pattern_without_the_free_or_with_it_before_cs_await_is_refused() -> None:
    with pytest.raises(ValueError, match=r"never awaited or freed in the runtime sequence"):
        run(b_shim_leg(2, free="missing"), fifos=True)
    with pytest.raises(ValueError, match=r"^dma_free_task of .* with no dma_await_task since its start"):
        run(b_shim_leg(2, free="before"), fifos=True)


# ---- the allocation and the buffer -----------------------------------------------------------------------------
def test_an_alloc_must_name_a_declared_shim_dma_allocation() -> None:
    """dma_configure_task_for's alloc is a symbol reference to an aie.shim_dma_allocation (AIEX dialect doc at
    1.4.3): a Flow's shim_symbol once the Flow is given to Runtime.add_flow, or a runtime fifo's name."""
    run(lambda a, b, c: ir.dma_free_task(_awaited(b)))
    with pytest.raises(ValueError, match=r"^'aiex.dma_configure_task_for' op no aie.shim_dma_allocation named @B_x"):
        run(lambda a, b, c: ir.shim_dma_single_bd_task("B_x", b.op, **LINEAR))
    with pytest.raises(ValueError, match=r"named @B_in \(declared: \[\]"):
        run(lambda a, b, c: b_task(b), add_flow=False)
    with pytest.raises(TypeError, match="alloc must be the allocation's symbol name"):
        run(lambda a, b, c: ir.shim_dma_single_bd_task(ir.Flow(ir.Tile(0, 0), ir.Tile(0, 1)), b.op, **LINEAR))
    # a fifo's own allocation is declared under its name (the 1.4.3 guide's `alloc` bullet)
    run(lambda a, b, c, a_in, c_out: ir.dma_free_task(_awaited(b, alloc="A_in")), fifos=True)


def _awaited(b: Any, alloc: str = "B_in") -> ir.DmaTask:
    task = ir.shim_dma_single_bd_task(alloc, b.op, issue_token=True, **LINEAR)
    ir.dma_start_task(task)
    ir.dma_await_task(task)
    return task


def test_a_flow_declares_its_allocation_on_its_shim_end_only() -> None:
    """flow.py's _emit_shim_dma_alloc (the stored version matching the 1.4.3 render): shim as source -> MM2S on
    src_channel, as destination -> S2MM on dst_channel; no shim end -> ValueError; one symbol declared twice is
    refused."""
    shim, mem = ir.Tile(0, 0), ir.Tile(0, 1)
    out = ir.Flow(mem, shim, src_channel=2, dst_channel=1, shim_symbol="C_x").shim_allocation()
    assert out is not None and (out.tile, out.direction, out.channel) == (shim, ir.DMAChannelDir.S2MM, 1)
    into = ir.Flow(shim, mem, src_channel=1, dst_channel=3, shim_symbol="B_in").shim_allocation()
    assert into is not None and (into.direction, into.channel) == (ir.DMAChannelDir.MM2S, 1)
    with pytest.raises(ValueError, match=r"^Flow.shim_symbol='B_in' requires a shim endpoint, but neither src"):
        run(lambda a, b, c: None, flows=[ir.Flow(mem, ir.Tile(0, 2), shim_symbol="B_in")])
    with pytest.raises(ValueError, match=r"^redefinition of symbol named 'B_in'"):
        run(lambda a, b, c: None, flows=[ir.Flow(shim, mem, shim_symbol="B_in"),
                                         ir.Flow(shim, ir.Tile(0, 1), src_channel=1, dst_channel=1,
                                                 shim_symbol="B_in")])
    with pytest.raises(ValueError, match=r"^redefinition of symbol named 'A_in'"):
        run(lambda a, b, c, *hs: None, fifos=True, flows=[ir.Flow(shim, mem, src_channel=1, shim_symbol="A_in")])


def test_mem_is_a_runtime_arguments_op() -> None:
    """The BD's buffer is the sequence's block argument, RuntimeData.op (runtime.py L341-344 at 1.4.3)."""
    with pytest.raises(ValueError, match=r"mem must be a runtime-sequence argument's \.op, got <arg1>$"):
        run(lambda a, b, c: ir.shim_dma_single_bd_task("B_in", b, **LINEAR))
    foreign = ir.RuntimeData(1, BUF)
    with pytest.raises(ValueError, match=r"mem must be a runtime-sequence argument's \.op, got <arg1>\.op$"):
        run(lambda a, b, c: ir.shim_dma_single_bd_task("B_in", foreign.op, **LINEAR))


# ---- start, await, free ---------------------------------------------------------------------------------------
def _started(then: Callable[[ir.DmaTask], None]) -> Callable[..., None]:
    """A body that configures one B task without a token, starts it, then calls `then` on it."""
    def body(a: Any, b: Any, c: Any) -> None:
        t = b_task(b)
        ir.dma_start_task(t)
        then(t)
    return body


def test_a_task_is_started_once_and_awaited_only_with_a_token_after_its_start() -> None:
    with pytest.raises(ValueError, match=r"^dma_start_task of .* a task is started once"):
        run(_started(ir.dma_start_task))
    with pytest.raises(ValueError, match=r"configured without issue_token=True$"):
        run(_started(ir.dma_await_task))

    def await_before_start(a: Any, b: Any, c: Any) -> None:
        t = b_task(b, issue_token=True)
        ir.dma_await_task(t)
    with pytest.raises(ValueError, match=TOKEN_RULE):  # verifyTokenBalance at 1.4.3: no token on the channel
        run(await_before_start)

    def await_before_start_with_another_token(a: Any, b: Any, c: Any) -> None:
        first, second = b_task(b, issue_token=True), b_task(b, 1, issue_token=True)
        ir.dma_start_task(first)
        ir.dma_await_task(second)  # 1.4.3 counts first's token; the stand-in refuses
    with pytest.raises(ValueError, match=r"^dma_await_task of .* before its dma_start_task"):
        run(await_before_start_with_another_token)


def test_a_task_is_freed_once_after_its_start_and_an_await() -> None:
    def free_before_start(a: Any, b: Any, c: Any) -> None:
        ir.dma_free_task(b_task(b))
    with pytest.raises(ValueError, match=r"^dma_free_task of .* before its dma_start_task"):
        run(free_before_start)

    def free_twice(a: Any, b: Any, c: Any) -> None:
        t = _awaited(b)
        ir.dma_free_task(t)
        ir.dma_free_task(t)
    with pytest.raises(ValueError, match=r"^'aiex.dma_free_task' op frees buffer descriptor ID 0, which is not "
                                         r"currently in use"):
        run(free_twice)

    def await_after_free(a: Any, b: Any, c: Any) -> None:
        first, other = b_task(b, issue_token=True), b_task(b, 1, issue_token=True)
        ir.dma_start_task(first, other)
        ir.dma_await_task(other)
        ir.dma_free_task(first)  # after an await emitted since its start
        ir.dma_await_task(first)
    with pytest.raises(ValueError, match=r"^'aiex.dma_await_task' op frees buffer descriptor ID 0"):
        run(await_after_free)

    def free_after_another_tasks_await(a: Any, b: Any, c: Any) -> None:  # the B-after-C idiom, raw
        b_raw, c_raw = b_task(b), b_task(b, 1, issue_token=True)
        ir.dma_start_task(b_raw, c_raw)
        ir.dma_await_task(c_raw)
        ir.dma_free_task(b_raw, c_raw)  # c_raw: a free after its await is tolerated (L215-219)
    run(free_after_another_tasks_await)
    assert [e[0] for e in ir.REC.rt_events] == ["configure", "configure", "start", "start", "await", "free", "free"]


def test_every_task_is_awaited_or_freed_by_the_end_of_the_sequence() -> None:
    with pytest.raises(ValueError, match=r"^DmaTask\(B_in, <arg1>\.op, started\) is never awaited or freed"):
        run(lambda a, b, c: ir.dma_start_task(b_task(b)))
    with pytest.raises(ValueError, match=r"^DmaTask\(B_in, <arg1>\.op, configured\) is never awaited or freed"):
        run(lambda a, b, c: b_task(b))
    run(lambda a, b, c: _awaited(b))  # an await returns the BD too (L215-219)


def test_the_task_wrappers_take_at_least_one_task_of_this_sequence() -> None:
    """Every stored aiex.py's wrappers (their words; dma_start_task's says "to free" too)."""
    for fn, verb in ((ir.dma_start_task, "free"), (ir.dma_await_task, "wait for"), (ir.dma_free_task, "free")):
        with pytest.raises(ValueError, match=rf"^{fn.__name__} must receive at least one DMAConfigureTaskForOp to "
                                             rf"{verb}$"):
            run(lambda a, b, c, fn=fn: fn())
        with pytest.raises(TypeError, match="is not a task configured in this runtime sequence"):
            run(lambda a, b, c, fn=fn: fn(a))
    with pytest.raises(RuntimeError, match=r"must be called within the function passed to Runtime"):
        ir.api()
        ir.dma_start_task()


# ---- the shim tile's BD pool ----------------------------------------------------------------------------------
def _live(raw: int, fills: int = 0, free_first: bool = False) -> Callable[..., None]:
    """`raw` B tasks configured and started, then `fills` A fills in an open group; all retired at the end."""
    def body(a: Any, b: Any, c: Any, a_in: Any, c_out: Any) -> None:
        tasks = []
        for k in range(raw):
            tasks.append(b_task(b, k, issue_token=True))
            ir.dma_start_task(tasks[-1])
            if free_first:
                ir.dma_await_task(tasks[-1])
        tg = ir.TaskGroup()
        for k in range(fills):
            a_in.fill(a, tap=_tap(64 * k), group=tg)
        tg.finish()
        if not free_first:
            ir.dma_await_task(*tasks)
    return body


def test_a_shim_tile_has_16_bds_for_its_live_tasks_fills_and_drains_included() -> None:
    """AIEAssignRuntimeSequenceBDIDs.cpp at 1.4.3: one BD-id pool per tile (getNumBDs: 16 on a shim tile) for
    every runtime-sequence task, IRON's fills and drains among them; an await or a free returns an id."""
    too_many = (r"^'aiex.dma_configure_task' op Too many simultaneously active buffer descriptors on tile \(0,0\), "
                r"which supports up to 16\. Emit an aiex.dma_free_task / aiex.dma_await_task to reuse BDs\.$")
    run(_live(16), fifos=True)
    with pytest.raises(ValueError, match=too_many):
        run(_live(17), fifos=True)
    run(_live(14, fills=2), fifos=True)
    with pytest.raises(ValueError, match=too_many):
        run(_live(15, fills=2), fifos=True)
    run(_live(40, free_first=True), fifos=True)  # each awaited before the next: one id at a time
    assert ir.SHIM_DMA.bds == ir.NUM_BDS["ShimNOCTile"] == 16


def test_a_shim_tiles_static_bds_seed_its_pool() -> None:
    """seedFromStaticBds (L58-67): a static DMA program's BDs on the shim tile are taken before any task."""
    def with_static(bds: int) -> None:
        ir.api()
        shim, mem = ir.Tile(0, 0), ir.Tile(0, 1)
        buf = ir.Buffer(A_TY, name="s", tile=shim)
        def body(a: Any, b: Any, c: Any) -> None:
            tasks = [b_task(b, k, issue_token=True) for k in range(15)]
            ir.dma_start_task(*tasks)
            ir.dma_await_task(*tasks)

        rt = ir.Runtime(body, [BUF, BUF, BUF])
        rt.add_flow(ir.Flow(shim, mem, shim_symbol="B_in"))
        rt.add_flow(ir.Flow(mem, shim, src_channel=1, dst_channel=1))
        rt.add_tile_dma(ir.TileDma(shim, [ir.DmaChannel(ir.DMAChannelDir.S2MM, 1, [
            ir.Bd(buf, next=(k + 1) % bds) for k in range(bds)])]))
        ir.Program(ir.NPU1(), rt).resolve_program()
    with_static(1)  # 1 static + 15 tasks
    with pytest.raises(ValueError, match=r"Too many simultaneously active buffer descriptors on tile \(0,0\)"):
        with_static(2)


# ---- the task's access pattern --------------------------------------------------------------------------------
@pytest.mark.parametrize(("pattern", "message"), [
    ({"offset": (1 << 22) - 32, "sizes": [1, 1, 1, 64], "strides": [0, 0, 0, 1]},
     r"out of bounds access in buffer, for index 4194335 in memref of length 4194304"),
    ({"sizes": [1, 1, 1025, 2], "strides": [0, 0, 2, 1]}, r"^'aiex.npu.writebd' op Size 0 \(2 words\) or 1 \(1025\)"),
    ({"sizes": [1, 1, 2, 2], "strides": [0, 0, (1 << 20) + 1, 1]}, r"Stride 1 exceeds the \[1:1048576\] range"),
    ({"sizes": [1, 2, 2, 2, 2], "strides": [0, 0, 0, 0, 1]}, r"a shim transfer has at most 4 dimensions"),
    ({"sizes": [257, 1, 1, 2], "strides": [0, 0, 0, 1]}, r"Repeat count 256 exceeds the \[0:255\] range"),
    ({"sizes": [1, 1, 1, 64], "strides": [0, 0, 1]}, r"^dma_bd: sizes and strides must be the same length$"),
    ({"sizes": [1, 1, 1, 64], "tap": "tap"}, r"either a TensorAccessPattern OR \(sizes and/or strides"),
    ({}, r"without tap or sizes is not established at 1\.4\.3"),
    ({"sizes": [2, 64], "strides": [256, 1]}, r"with 2 sizes \(not 4\) is not established at 1\.4\.3"),
    ({"tap": "2d"}, r"with 2 sizes \(not 4\) is not established at 1\.4\.3"),
    ({"sizes": [1, 1, 1, 64], "transfer_len": 32}, r"transfer_len 32 other than prod\(sizes\[-3:\]\) = 64 is not "
                                                   r"established at 1\.4\.3"),
    ({"sizes": [1, 1, 1, 64], "burst_length": 256}, r"burst_length 256 .* is not established at 1\.4\.3"),
    ({"sizes": [1, 1, 1, 64], "packet": (0, 1)}, r"packet is not modelled"),
])
def test_a_tasks_sizes_and_strides_stay_inside_the_shim_bds_fields(pattern: dict[str, Any], message: str) -> None:
    """The shim BD limits the fills are held to (iron_recorder.verify_shim_bd) and DMABDOp::verify's bound."""
    taps = {"tap": _tap(), "2d": ir.TensorAccessPattern((1024,), 0, [2, 64], [256, 1])}
    given = {k: taps.get(v, v) if isinstance(v, str) else v for k, v in pattern.items()}
    with pytest.raises(ValueError, match=message):
        run(lambda a, b, c: ir.shim_dma_single_bd_task("B_in", b.op, **given))


def test_a_tasks_pattern_from_a_tap_or_sizes_is_the_same() -> None:
    def body(a: Any, b: Any, c: Any) -> None:
        walk = ([1, 1, 2, 64], [0, 0, 256, 1])
        by_tap = ir.shim_dma_single_bd_task("B_in", b.op, tap=ir.TensorAccessPattern((1024,), 128, *walk),
                                            issue_token=True)
        by_sizes = ir.shim_dma_single_bd_task("B_in", b.op, offset=128, sizes=walk[0], strides=walk[1],
                                              transfer_len=128)
        assert (by_tap.tap.offset, by_tap.tap.sizes, by_tap.tap.strides) == \
            (by_sizes.tap.offset, by_sizes.tap.sizes, by_sizes.tap.strides) == (128, *walk)
        ir.dma_start_task(by_tap, by_sizes)
        ir.dma_await_task(by_tap)
        ir.dma_free_task(by_sizes)
    run(body)


# ---- the keywords, and the pinned table ---------------------------------------------------------------------
def test_only_the_keywords_every_stored_version_has_are_taken() -> None:
    with pytest.raises(TypeError, match=r"keyword 'offset_parameter' is not established at 1\.4\.3"):
        run(lambda a, b, c: ir.shim_dma_single_bd_task("B_in", b.op, offset_parameter="p", **LINEAR))
    with pytest.raises(TypeError, match=r"keyword 'axcache' is not established at 1\.4\.3"):
        run(lambda a, b, c: ir.shim_dma_single_bd_task("B_in", b.op, axcache=2, **LINEAR))
    with pytest.raises(TypeError, match=r"got an unexpected keyword argument 'repeat_count'$"):
        run(lambda a, b, c: ir.shim_dma_single_bd_task("B_in", b.op, repeat_count=2, **LINEAR))
    with pytest.raises(TypeError, match="positional argument"):
        run(lambda a, b, c: ir.shim_dma_single_bd_task("B_in", b.op, None, 0, [1, 1, 1, 64]))


AIEX = {
    "aie.dialects.aiex.shim_dma_single_bd_task": ir.shim_dma_single_bd_task,
    "aie.dialects.aiex.dma_start_task": ir.dma_start_task,
    "aie.dialects.aiex.dma_await_task": ir.dma_await_task,
    "aie.dialects.aiex.dma_free_task": ir.dma_free_task,
}


@pytest.mark.parametrize("name", sorted(AIEX))
def test_the_aiex_helpers_signatures_are_the_pinned_tables(name: str) -> None:
    """Names, order and defaults as the pinned table (the stored versions' common part); the stand-in takes all
    but alloc and mem by keyword only (stricter), and its **keywords only exists to refuse the others by name."""
    params = [p for p in inspect.signature(AIEX[name]).parameters.values() if p.kind is not p.VAR_KEYWORD]
    entry = pins.iron_table()["signatures"][name]
    assert [(p.name, p.default is not p.empty) for p in params] == \
        [(p["name"], p["default"] is not None) for p in entry["params"]]
    for got, want in zip(params, entry["params"], strict=True):
        assert got.kind.name == want["kind"] or (got.kind.name == "KEYWORD_ONLY" and want["kind"] ==
                                                 "POSITIONAL_OR_KEYWORD" and want["default"] is not None)
        assert got.default is got.empty or repr(got.default) == want["default"]
    assert entry["confirmed_at_tag"] is False
    assert "not stored at v1.4.3" in entry["source"] or "every stored version" in entry["source"]
