"""The host-side instruction stream encoder (gemm_gen/backends/txn.py) against the words of mlir-aie's
own lit tests and the register facts of aie-rt (tests/data/txn_vectors.json: each vector with its
repository, path, commit and CHECK lines), a call's stream against the transfers it encodes, the
controller-id maskwrite aiecc writes before every token-issuing push, every field's range, and the
probe sizes that the trust verdict (backends/npu_call.py) checks against aiecc.

Expected words always come from the data file; the encoder's helpers only build the inputs.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gemm_gen.backends import npu_call, txn
from gemm_gen.design import build_design
from gemm_gen.design.serve import serve
from gemm_gen.facts.dtypes import WORD_BYTES, dtype
from gemm_gen.facts.errors import GemmGenError, TxnFieldError
from gemm_gen.spec.request import Problem

from ..conftest import small

VECTORS = json.loads((Path(__file__).parents[1] / "data" / "txn_vectors.json").read_text())
DIRECTION = {"S2MM": txn.S2MM, "MM2S": txn.MM2S}
CONTROLLER = VECTORS["controller_id"]
# the register of each shim channel, from aie-rt's NOC_MODULE registers (the data file)
CTRL = {(DIRECTION[ch["direction"]], ch["channel"]): ch["ctrl"] for ch in CONTROLLER["channels"]}
QUEUE = {(DIRECTION[ch["direction"]], ch["channel"]): ch["queue"] for ch in CONTROLLER["channels"]}
COL_SHIFT, ROW_SHIFT = 25, 20  # npu_instgen.mlir: write32 at column 3, row 4, 0x...00DEF is 0x06400DEF
OFFSET_BITS = 20  # AIETargetNPU keeps an address's low 20 bits when the op names its column and row


def _int(value: int | str) -> int:
    return value if isinstance(value, int) else int(value, 0)


def _words(hexes: list[str]) -> list[int]:
    return [int(w, 16) for w in hexes]


def _tile_address(op: dict) -> int:
    """The absolute address of an MLIR op written with column/row attributes, or its address as
    given (TxnEncoding.h's calls take it absolute)."""
    address = _int(op["address"])
    if "column" not in op:
        return address
    return txn.address(op["column"], op["row"], address & ((1 << OFFSET_BITS) - 1))


def _op(op: dict) -> txn.Op:
    """A lit test's op, from its attributes."""
    kind = op["op"]
    if kind == "write32":
        return txn.Write32(_tile_address(op), _int(op["value"]))
    if kind == "maskwrite32":
        return txn.MaskWrite32(_tile_address(op), _int(op["value"]), _int(op["mask"]))
    if kind == "blockwrite":
        col = op.get("column", op.get("col", 0))
        return txn.BlockWrite(_tile_address(op), tuple(op["data"]), col, op.get("row", 0))
    if kind == "sync":
        return txn.Sync(op["column"], op["row"], op["direction"], op["channel"], op["column_num"], op["row_num"])
    if kind == "address_patch":
        return txn.AddressPatch(_int(op["addr"]), op["arg_idx"], _int(op["arg_plus"]))
    if kind == "load_pdi":
        return txn.LoadPdi(op["id"], op["size"], _int(op["address"]))
    assert kind == "preempt", kind
    return txn.Preempt(op["level"])


# ---- word layouts against mlir-aie's lit tests ---------------------------------------------------
@pytest.mark.parametrize("vector", VECTORS["streams"], ids=lambda v: v["name"])
def test_streams_equal_mlir_aies_words(vector):
    h = vector["header"]
    got = txn.encode([_op(op) for op in vector["ops"]], h["generation"], h["columns"], h["rows"])
    assert got.tolist() == _words(vector["words"]), vector["source"]["path"]


@pytest.mark.parametrize("case", VECTORS["address_patches"]["cases"], ids=lambda c: c["source"]["check"][:30])
def test_address_patch_words_equal_the_lit_tests(case):
    if case["from"] == "arg_idx":  # the DDR fold: host_address adds it past the fifth argument
        words = txn.host_address(0, 0, case["arg_idx"], _int(case["arg_plus"])).words()[8:11]
    else:
        words = txn.AddressPatch(_int(case["addr"]), case["arg_idx"], _int(case["arg_plus"])).words()[6:12]
    assert words == _words(case["words"])


def test_an_address_patch_of_4_gib_or_more_is_refused():
    refused = VECTORS["address_patches"]["refused"]
    with pytest.raises(TxnFieldError, match="address patch byte offset 4294967296 does not fit"):
        txn.AddressPatch(74560, 0, _int(refused["arg_plus"]))


@pytest.mark.parametrize("case", VECTORS["queue_pushes"]["cases"], ids=lambda c: c["check"])
def test_queue_pushes_equal_the_lit_test(case):
    push = txn.queue_push(case["column"], DIRECTION[case["direction"]], case["channel"], case["bd_id"],
                          case["repeat_count"], case["issue_token"])
    assert (push.address, push.value) == (case["address"], case["value"])


@pytest.mark.parametrize("case", VECTORS["rtp_writes"]["cases"], ids=lambda c: c["check"])
def test_runtime_parameter_writes_equal_the_lit_test(case):
    from gemm_gen.design.ir import RtpWrite, RuntimeOp, TileRef

    op = RuntimeOp("rtp", -1, rtp=RtpWrite(TileRef(case["column"], case["row"]), "rtp", case["index"], case["value"]))
    write = txn._rtp_write(op, case["buffer_address"])
    assert write.value == case["value"]
    assert write.address == case["column"] << COL_SHIFT | case["row"] << ROW_SHIFT | case["local_address"]


def _bd_fields(words: tuple[int, ...]) -> dict[str, int]:
    """A shim BD's fields, at aie-rt's positions (xaiemlgbl_params.h NOC_MODULE_DMA_BD*_0..7)."""
    return {"buffer_length": words[0], "d0_size": words[3] >> 20 & 0x3FF, "d0_stride": words[3] & 0xFFFFF,
            "d1_size": words[4] >> 20 & 0x3FF, "d1_stride": words[4] & 0xFFFFF, "d2_stride": words[5] & 0xFFFFF,
            "iteration_size": words[6] >> 20 & 0x3F, "iteration_stride": words[6] & 0xFFFFF,
            "valid_bd": words[7] >> 25 & 1}


@pytest.mark.parametrize("case", VECTORS["shim_bds"]["cases"], ids=lambda c: c["name"])
def test_shim_bds_equal_the_lowering(case):
    bd = txn.shim_bd(case["offset"], tuple(case["sizes"]), tuple(case["strides"]), case["elem_bits"], case["burst"])
    if case.get("bd_words") is not None:
        expected = list(case["bd_words"])
        path = case.get("dma_task_path")
        if path:  # IRON's DMA-task lowering: the byte offset in word 1, AXCACHE in word 5 (see the data file)
            expected[1] = path["word1"]
            expected[5] |= path["word5_axcache"] << 24
        assert list(bd.words) == expected
    for field, value in case.get("fields", {}).items():
        assert _bd_fields(bd.words)[field] == value, field
    for index, value in case.get("checked_words", {}).items():
        assert bd.words[int(index)] == value
    if "repeat" in case:
        assert bd.repeat == case["repeat"]
    if "queue" in case:
        q = case["queue"]
        push = txn.queue_push(q.get("column", 0), DIRECTION[q["direction"]], q["channel"], q["bd_id"], bd.repeat,
                              q["issue_token"])
        assert (push.address, push.value) == (q["address"], q["value"])


def test_a_pure_repeat_leaves_the_iteration_register_zero():
    """A stride-0 outermost dimension repeats the BD through the queue push; its iteration register stays 0,
    as 1.4.3's lowering writes it (the stride0_repeat vector: word 6 of mlir-aie's own BD). An iteration size
    taken from the size alone (BdLowering.h's shared encoder without its callers' zero-stride rule) would
    write 3 << 20 there."""
    case = next(c for c in VECTORS["shim_bds"]["cases"] if c["name"] == "stride0_repeat_bf16_words")
    bd = txn.shim_bd(case["offset"], tuple(case["sizes"]), tuple(case["strides"]), case["elem_bits"], case["burst"])
    assert bd.words[6] == case["bd_words"][6] == 0 and bd.repeat == case["repeat"] and "repeat" in bd.shape


@pytest.mark.parametrize("which", ["without", "with"])
def test_a_token_push_writes_the_controller_id_only_from_a_tile_that_has_one(which):
    """AIEDmaToNpu.cpp: the maskwrite before a token push only when the shim tile carries a controller_id
    (mlir-aie's push_to_queue.mlir has none: the push alone); aiecc's pipeline gives every shim tile one."""
    case = CONTROLLER["lit_cases"][which]
    ops = txn.push_ops(case["column"], DIRECTION[case["direction"]], case["channel"], case["bd_id"],
                       case["repeat_count"], case["issue_token"], case.get("controller_id"))
    assert ops == [_op(op) for op in case["ops"]]
    untokened = txn.push_ops(case["column"], DIRECTION[case["direction"]], case["channel"], case["bd_id"],
                             case["repeat_count"], False, case.get("controller_id"))
    assert [type(op) for op in untokened] == [txn.Write32]  # no token, no maskwrite, with or without an id


@pytest.mark.parametrize("case", VECTORS["barrier_sets"]["cases"], ids=lambda c: c["check"][:24])
def test_barrier_sets_equal_the_lit_test(case):
    """WorkerRuntimeBarrier.set: aiex.set_lock, a write32 of the value into the core's lock register."""
    from dataclasses import replace as dc_replace

    from gemm_gen.design.ir import BarrierSet, RuntimeOp, TileRef
    from gemm_gen.facts.devices import CORE_LOCKS

    op = RuntimeOp("barrier", -1, barrier=BarrierSet(TileRef(case["column"], case["row"]), "b", case["value"]))
    locks = dc_replace(CORE_LOCKS, barrier_id=case["lock_id"])
    write = txn._barrier_set(op, locks)
    assert (write.address, write.value) == (case["column"] << COL_SHIFT | case["row"] << ROW_SHIFT
                                            | case["local_address"], case["value"])


def test_a_barrier_value_past_the_lock_is_one_line():
    from gemm_gen.design.ir import BarrierSet, RuntimeOp, TileRef

    with pytest.raises(TxnFieldError, match="runtime barrier value 64 does not fit its field"):
        txn._barrier_set(RuntimeOp("barrier", -1, barrier=BarrierSet(TileRef(0, 2), "b", 64)))


# ---- the controller id: aiecc's maskwrite before every push that issues a token -----------------
@pytest.mark.parametrize("col", [0, 3, 7])
@pytest.mark.parametrize("channel", CONTROLLER["channels"], ids=lambda ch: f"{ch['direction']}{ch['channel']}")
def test_the_controller_id_maskwrite_is_aieccs(channel, col):
    d, ch = DIRECTION[channel["direction"]], channel["channel"]
    write = txn.controller_id_write(col, d, ch, CONTROLLER["controller_id"])
    ctrl = col << CONTROLLER["column_shift"] | channel["ctrl"]
    # the maskwrite32 op's words (npu_instgen.mlir) with aiecc's value and mask (AIEDmaToNpu.cpp)
    assert write.words() == [3, 0, ctrl, 0, CONTROLLER["value"], CONTROLLER["mask"], 0x1C]
    assert CONTROLLER["value"] == CONTROLLER["controller_id"] << 8
    push = txn.queue_push(col, d, ch, 0, 0, True)
    assert push.address == col << CONTROLLER["column_shift"] | channel["queue"] == ctrl + 4


def _queue_of(op: txn.Op) -> tuple[int, int, int] | None:
    """(column, direction, channel) of a queue push, by its register (the data file's)."""
    if not isinstance(op, txn.Write32):
        return None
    local = op.address & ((1 << COL_SHIFT) - 1)
    found = [key for key, q in QUEUE.items() if q == local]
    return (op.address >> COL_SHIFT, *found[0]) if found else None


@pytest.mark.parametrize("dev,t_in,t_out,col,sizes", [
    ("npu1", "i8", "i32", False, "mnk"), ("npu1", "bf16", "bf16", True, "mn"),
    ("npu2", "i8", "i8", True, "mnk"), ("npu2", "bf16", "f32", False, "mn"),
])
def test_every_token_push_follows_one_controller_id_maskwrite(dev, t_in, t_out, col, sizes):
    """On both devices, a runtime-sized design's call writes the shim tile's controller id (15 << 8,
    mask 0x1F00) on the channel's CTRL register right before each push that issues a token, and
    nowhere else; the header counts the maskwrites too."""
    from gemm_gen.design.build import runtime_sequence

    c = replace(small(dev, t_in, t_out, col), runtime_sizes=sizes)
    c = replace(c, M=max(c.size.M, 256), N=max(c.size.N, 512))
    design = build_design(c)
    for call in (c.call, serve(c, Problem(c.size.M - 3, c.size.K, c.size.N - 5))):
        ops = txn.call_ops(design, call)
        token_pushes = maskwrites = 0
        for i, op in enumerate(ops):
            if isinstance(op, txn.MaskWrite32):
                maskwrites += 1
                queue = _queue_of(ops[i + 1])
                assert queue is not None and ops[i + 1].value >> 31 == 1  # a token push follows
                column, d, ch = queue
                assert (op.address, op.value, op.mask) == (column << COL_SHIFT | CTRL[d, ch], CONTROLLER["value"],
                                                            CONTROLLER["mask"])
            queue = _queue_of(op)
            if queue is not None and op.value >> 31:
                token_pushes += 1
                assert isinstance(ops[i - 1], txn.MaskWrite32)
        awaited = sum(op.task is not None and op.task.wait for op in runtime_sequence(c, call))
        assert maskwrites == token_pushes == awaited > 0
        words = txn.encode_call(design, call)
        assert words[2] == len(ops) and words[3] == 4 * words.size


def test_a_module_without_controller_ids_has_no_maskwrite():
    """The same call encoded for shim tiles without a controller_id (no aie-assign-tile-controller-ids): the
    token pushes alone, every other op as before."""
    c = replace(small("npu2", "i8", "i8", True), runtime_sizes="mnk")
    design = build_design(c)
    with_ids, without = txn.call_ops(design, c.call), txn.call_ops(design, c.call, controller_id=None)
    assert any(isinstance(op, txn.MaskWrite32) for op in with_ids)
    assert without == [op for op in with_ids if not isinstance(op, txn.MaskWrite32)]


# ---- every field's range: one line, never a word that spills into its neighbour ----------------
BIG = (1 << 20) + 1  # a stride of 2^20 + 1 words: 2^20 does not fit the 20-bit "stride - 1" field
BROKEN = {
    "d0 wrap": lambda: txn.shim_bd(0, (1, 1, 2, 1024), (0, 0, 2048, 1), 32, 2),
    "d1 wrap": lambda: txn.shim_bd(0, (1, 1, 1024, 4), (0, 0, 8, 1), 32, 2),
    "d0 stride field": lambda: txn.shim_bd(0, (1, 1, 2, 4), (0, 0, 4 * BIG, BIG), 32, 2),
    "d1 stride field": lambda: txn.shim_bd(0, (1, 1, 2, 4), (0, 0, BIG, 1), 32, 2),
    "d2 stride field": lambda: txn.shim_bd(0, (1, 2, 2, 4), (0, BIG, 8, 1), 32, 2),
    "iteration wrap": lambda: txn.shim_bd(0, (65, 1, 1, 4), (8, 0, 0, 1), 32, 2),
    "iteration stride field": lambda: txn.shim_bd(0, (2, 1, 1, 4), (BIG, 0, 0, 1), 32, 2),
    "queue repeat count": lambda: txn.shim_bd(0, (257, 1, 1, 4), (0, 0, 0, 1), 32, 2),
    "buffer length": lambda: txn.shim_bd(0, (1, 1, 2, 1 << 31), (0, 0, 1 << 31, 1), 32, 2),
    "not whole 32-bit words": lambda: txn.shim_bd(0, (1, 1, 1, 3), (0, 0, 0, 1), 16, 2),
    "base address": lambda: txn.shim_bd(1 << 30, (1, 1, 1, 4), (0, 0, 0, 1), 32, 2),
    "burst length": lambda: txn.shim_bd(0, (1, 1, 1, 4), (0, 0, 0, 1), 32, 4),
    "d0 size": lambda: txn.shim_bd(0, (1, 1, 1, 0), (0, 0, 0, 1), 32, 2),
    "queue BD id": lambda: txn.queue_push(0, txn.MM2S, 0, 16, 0, False),
    "queue repeat": lambda: txn.queue_push(0, txn.MM2S, 0, 0, 256, False),
    "shim DMA channel": lambda: txn.queue_push(0, txn.S2MM, 2, 0, 0, True),
    "DMA direction": lambda: txn.controller_id_write(0, 2, 0, 15),
    "register column": lambda: txn.address(128, 0, 0),
    "register row": lambda: txn.address(0, 32, 0),
    "register offset": lambda: txn.address(0, 0, 1 << 20),
    "write32 value": lambda: txn.Write32(0, 1 << 32),
    "maskwrite32 mask": lambda: txn.MaskWrite32(0, 0, 1 << 32),
    "blockwrite word 1": lambda: txn.BlockWrite(0, (0, 1 << 32)),
    "sync channel": lambda: txn.Sync(0, 0, 0, 256),
    "load_pdi id": lambda: txn.LoadPdi(1 << 16, 0, 0),
    "preempt level": lambda: txn.Preempt(1 << 24),
    "TXN header columns": lambda: txn.encode([], 4, 256, 6),
}


@pytest.mark.parametrize("field", BROKEN)
def test_a_field_out_of_range_is_one_line(field):
    with pytest.raises(TxnFieldError) as e:
        BROKEN[field]()
    assert field in str(e.value) and "\n" not in str(e.value) and isinstance(e.value, GemmGenError)


def test_a_runtime_parameter_past_32_bits_is_one_line():
    from gemm_gen.design.ir import RtpWrite, RuntimeOp, TileRef

    op = RuntimeOp("rtp", -1, rtp=RtpWrite(TileRef(0, 2), "rtp", 0, 1 << 32))
    with pytest.raises(TxnFieldError, match="runtime parameter 4294967296 does not fit"):
        txn._rtp_write(op, 1024)


def test_the_encoder_checks_no_field_by_assert():
    assert "assert " not in inspect.getsource(txn)


# ---- a call's stream, decoded: each transfer moves exactly its words ------------------------------
def _bd_word_walk(words: tuple[int, ...], repeat: int, base_bytes: int) -> np.ndarray:
    """The 32-bit words a shim BD moves, from its fields as AM025 defines them (d0, d1 with wraps,
    d2 without: it steps until the length is moved; the iteration dimension per repeat), from the
    address the patch writes into its word 1 (the buffer's plus `base_bytes`)."""
    f = _bd_fields(words)
    length = f["buffer_length"]
    base = base_bytes // WORD_BYTES
    d0_size, d0_step = f["d0_size"], f["d0_stride"] + 1
    d1_size, d1_step = f["d1_size"], f["d1_stride"] + 1
    d2_step = f["d2_stride"] + 1
    it_wrap, it_step = f["iteration_size"] + 1, f["iteration_stride"] + 1
    i = np.arange(length)
    inner = i if d0_size == 0 else (i % d0_size) * d0_step + (i // d0_size % d1_size) * d1_step + \
        (i // (d0_size * d1_size)) * d2_step
    runs = [base + (r % it_wrap) * it_step * (it_wrap > 1) + inner for r in range(repeat + 1)]
    return np.concatenate(runs)


def _tap_word_walk(tap, elem_bytes: int) -> np.ndarray:
    idx = np.array([tap.offset], dtype=np.int64)
    for size, stride in zip(tap.sizes, tap.strides):
        idx = (idx[:, None] + np.arange(size) * stride).ravel()
    byte = (idx[:, None] * elem_bytes + np.arange(elem_bytes)).ravel()
    words = byte // WORD_BYTES
    return words[np.r_[True, words[1:] != words[:-1]]]


@pytest.mark.parametrize("offset,sizes,strides,elem_bytes", [
    (0, (2, 4, 8, 64), (2048, 512, 64, 1), 4), (6, (3, 5, 7, 16), (4000, 96, 1000, 1), 2),
    (8, (2, 1, 64, 8), (8192, 0, 64, 1), 1), (0, (1, 3, 4, 72), (0, 1152, 288, 1), 9),
])
def test_a_bd_moves_the_words_of_its_pattern(offset, sizes, strides, elem_bytes):
    from gemm_gen.design.tap import Tap

    tap = Tap(offset, sizes, strides)
    bd = txn.shim_bd(offset, sizes, strides, 8 * elem_bytes, 2)
    assert bd.words[1] == offset * elem_bytes  # IRON's dma-task path writes the byte offset there too
    assert np.array_equal(_bd_word_walk(bd.words, bd.repeat, offset * elem_bytes), _tap_word_walk(tap, elem_bytes))


@pytest.mark.parametrize("dev,t_in,t_out,col,size", [
    ("npu1", "i8", "i32", False, "300x200x100"), ("npu1", "bf16", "bf16", True, "64x96x64"),
    ("npu2", "i8", "i8", True, "1000x776x2000"), ("npu2", "bf16", "f32", False, "130x64x70"),
])
def test_a_calls_stream_moves_exactly_the_words_of_its_transfers(dev, t_in, t_out, col, size):
    """Decode the stream back into what it does: each task's BD moves the words of its access
    pattern over its host buffer (from the address its patch writes, BD word 1 of its BD), in
    order; it is pushed onto its fifo's shim channel (aie-rt's queue register); no BD id is taken
    twice while live on a column; each awaited task is synced on its channel; the runtime
    parameters land at the core's RTP buffer."""
    from gemm_gen.design.build import host_tensors, runtime_sequence
    from gemm_gen.spec.rules.l1 import K_WORD, RTP_PART, TILES_WORD

    c = replace(small(dev, t_in, t_out, col), runtime_sizes="mnk")
    c = replace(c, M=max(c.size.M, 1024), K=max(c.size.K, 1024), N=max(c.size.N, 2048))
    design = build_design(c)
    call = serve(c, Problem.parse(size))
    ops = txn.call_ops(design, call)
    runtime = runtime_sequence(c, call)
    tensors = {t.name: (i, t) for i, t in enumerate(host_tensors(c, call, runtime))}
    channel = txn.shim_channels(design)
    rtp = next(p.address for p in design.l1.placed if p.buffer.name == RTP_PART)
    it = iter(ops)
    live: dict[int, set[int]] = {}
    group_ids: dict[int, list[tuple[int, int]]] = {}
    checked = synced = 0
    words = {K_WORD: call.k_steps - 1, TILES_WORD: call.tiles_per_core}
    for op in runtime:
        if op.rtp is not None:
            w = next(it)
            assert (w.address, w.value) == (op.rtp.tile.col << COL_SHIFT | op.rtp.tile.row << ROW_SHIFT | rtp
                                             + WORD_BYTES * op.rtp.index, words[op.rtp.index])
            continue
        if op.barrier is not None:  # lock 0's value register (the lower_set_lock vector's address), set to 1
            w = next(it)
            lock0 = next(c["local_address"] for c in VECTORS["barrier_sets"]["cases"] if c["lock_id"] == 0)
            assert (w.address, w.value) == (op.barrier.tile.col << COL_SHIFT | op.barrier.tile.row << ROW_SHIFT
                                             | lock0, 1)
            continue
        if op.task is None:  # the group finishes: a sync per awaited task, then its ids free up
            for t, bd_id in group_ids.pop(op.group):
                if t.wait:
                    direction, ch = channel[t.fifo]
                    assert next(it).words()[2:] == [direction | t.shim.col << 16, 1 << 8 | 1 << 16 | ch << 24]
                    synced += 1
                live[t.shim.col].remove(bd_id)
            continue
        task = op.task
        bw, patch = next(it), next(it)
        mask = next(it) if task.wait else None
        push = next(it)
        assert isinstance(bw, txn.BlockWrite) and isinstance(patch, txn.AddressPatch)
        assert isinstance(mask, txn.MaskWrite32) == task.wait
        col = bw.address >> COL_SHIFT
        bd_id = ((bw.address & 0xFFFFF) - 0x1D000) // 0x20  # aie-rt: DMA_BD<n>_0 at 0x1D000 + 0x20 n
        assert col == task.shim.col and 0 <= bd_id < 16 and bw.address == col << COL_SHIFT | 0x1D000 + 0x20 * bd_id
        assert bd_id not in live.setdefault(col, set())  # never two live tasks on one BD
        live[col].add(bd_id)
        group_ids.setdefault(op.group, []).append((task, bd_id))
        arg, tensor = tensors[task.tensor]
        assert (patch.address, patch.arg_idx) == (bw.address + 4, arg)  # BASE_ADDRESS_LOW: BD word 1
        assert _queue_of(push) == (col, *channel[task.fifo])
        assert (push.value & 0xF, push.value >> 31) == (bd_id, int(task.wait))
        repeat = push.value >> 16 & 0xFF
        t = dtype(tensor.dtype)
        got = _bd_word_walk(bw.data, repeat, patch.arg_plus)
        assert np.array_equal(got, _tap_word_walk(task.tap.scaled(t.blocks_per_unit), t.block_bytes)), task.name
        checked += 1
    assert next(it, None) is None and checked == sum(op.task is not None for op in runtime) and synced > 0


def test_a_large_calls_stream_needs_no_toolchain():
    c = replace(small("npu2", "i8", "i32"), M=4096, K=4096, N=4096, runtime_sizes="mnk")
    design = build_design(c)
    words = txn.encode_call(design, serve(c, Problem(4096, 4096, 2048)))
    assert words.dtype == np.uint32 and words.size > 1000


# ---- the probe sizes: every branch any served size takes is checked against aiecc ---------------
def _exact_branches(design, call) -> frozenset[str]:
    """txn.branches from every task of the call (not the first and last groups only)."""
    from gemm_gen.design.build import runtime_sequence

    enc = txn._Encoding.of(design, call)
    runtime = runtime_sequence(design.config, call)
    found = set()
    for op in runtime:
        if op.task is not None:
            bd, offset = enc.bd(op.task, design.config.dev)
            found |= {f"{op.task.tensor} {bd.shape}"} | ({"nonzero offset"} if offset else set()) | \
                ({"token"} if op.task.wait else set())
        if op.rtp is not None or op.barrier is not None:
            found.add("runtime parameters")
    groups = call.m_blocks * call.n_blocks
    found |= {"BD ids reused"} if groups > design.config.runtime.queue_groups else set()
    found |= {"K tail"} if call.k_walk != call.K else set()
    found |= {"moved block"} if call.shift_m or call.shift_n else set()
    return frozenset(found | {f"padded {op}" for op in call.padded})


PROBED = [("npu1", "i8", "i32", False, "mnk", 2048), ("npu1", "bf16", "bf16", True, "mn", 256),
          ("npu2", "bf16", "f32", True, "mnk", 1024), ("npu2", "i8", "i8", False, "mn", 2048),
          ("npu2", "i16", "i32", False, "mnk", 512)]


@pytest.mark.parametrize("dev,t_in,t_out,col,sizes,K", PROBED)
def test_the_probes_take_every_branch_any_served_size_takes(dev, t_in, t_out, col, sizes, K):
    c = replace(small(dev, t_in, t_out, col), runtime_sizes=sizes)
    c = replace(c, M=max(c.size.M, 256), K=K, N=max(c.size.N, 512))
    design = build_design(c)
    candidates = npu_call.probe_candidates(design)
    probes = npu_call.probe_calls(design)
    assert probes[0] == c.call  # aiecc wrote its stream with the build
    taken = set().union(*(txn.branches(design, p) for p in probes))
    assert taken == set().union(txn.branches(design, c.call), *(txn.branches(design, s) for s in candidates))
    for s in (*probes, *candidates[::7]):  # the sampled listing is the full walk's
        assert txn.branches(design, s) == _exact_branches(design, s), str(s.problem)
    # the encoder's branches reached by served sizes are all there: shapes, tails, padding, tokens
    assert {"token", "nonzero offset", "K tail", "A n-d d1 d2", "C n-d d1"} <= taken
    assert ("runtime parameters" in taken) == (sizes == "mnk")
    if K > 1023 and not col:  # K rows of a row-major B strip exceed the 10-bit wrap: the row-block split
        assert "B n-d d1 d2" in taken


def test_the_probes_go_past_the_own_size_and_the_smallest_where_those_miss_a_branch():
    c = replace(small("npu1", "i8", "i32", False), runtime_sizes="mnk", M=256, K=2048, N=512)
    design = build_design(c)
    smallest = serve(c, Problem(1, 1, 1))
    two = txn.branches(design, c.call) | txn.branches(design, smallest)
    taken = set().union(*(txn.branches(design, p) for p in npu_call.probe_calls(design)))
    assert two < taken  # e.g. B's strip without the row-block split, or one chunk of A that is not contiguous
    assert c.call in npu_call.probe_calls(design)


def test_a_fixed_size_design_is_probed_on_its_own_size_only():
    c = small("npu2", "i8", "i32")
    assert npu_call.probe_calls(build_design(c)) == (c.call,)


# ---- the trust verdict is keyed on the build, gemm_gen's version and the encoder's version -------
def test_an_upgrade_drops_the_verdict_and_the_streams_it_wrote(tmp_path, monkeypatch):
    """A verdict reached with another encoder (or another gemm_gen) is not reused: the ledger goes
    with every stream it lists, and the next size checks the new encoder against aiecc again."""
    from gemm_gen.backends import cache
    from gemm_gen.backends.npu_call import STREAMS, call_files, probe_calls, stream_name

    from .test_build import _fake_tools

    _fake_tools(tmp_path, monkeypatch)
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    c = replace(small("npu1", "i8", "i32"), runtime_sizes="mn")
    design = build_design(c)
    own = call_files(design, c.call)
    entry = own.insts.parent
    own.insts.write_bytes(txn.encode_call(design, c.call).tobytes())  # as if aiecc wrote what the encoder writes
    for probe in probe_calls(design)[1:]:
        (entry / stream_name(design, probe)).write_bytes(txn.encode_call(design, probe).tobytes())
    first = call_files(design, serve(c, Problem(3, c.size.K, 5)))
    ledger = json.loads((entry / STREAMS).read_text())
    assert first.how == "host encoder" and ledger["encoder"]["matches"] is True
    assert ledger["encoder"]["checked"] == [str(p.problem) for p in probe_calls(design)]
    assert (ledger["encoder_version"], ledger["gemm_gen"]) == (txn.TXN_ENCODER_VERSION,
                                                               __import__("gemm_gen").__version__)
    # an upgrade whose encoder writes other words: the old verdict must not vouch for it
    encode_call = txn.encode_call
    monkeypatch.setattr(txn, "TXN_ENCODER_VERSION", txn.TXN_ENCODER_VERSION + 1)
    monkeypatch.setattr(txn, "encode_call", lambda d, call: encode_call(d, call) ^ np.uint32(1))
    second = call_files(design, serve(c, Problem(5, c.size.K, 7)))
    ledger = json.loads((entry / STREAMS).read_text())
    assert not first.insts.exists()  # the old encoder's stream went with its ledger
    assert ledger["encoder_version"] == txn.TXN_ENCODER_VERSION
    assert ledger["encoder"]["matches"] is False and ledger["encoder"]["first_difference"] == 0
    assert second.how == "aiecc"
    monkeypatch.setattr("gemm_gen.version.__version__", "0.0.0-other")  # another gemm_gen: checked again too
    call_files(design, serve(c, Problem(7, c.size.K, 9)))
    assert json.loads((entry / STREAMS).read_text())["gemm_gen"] == "0.0.0-other"
    assert not second.insts.exists()
