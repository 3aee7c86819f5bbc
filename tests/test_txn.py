"""The host-side instruction stream encoder (gemm_gen/backends/txn.py) against the words of
mlir-aie's own lit tests, and a call's stream against the transfers it encodes.

Vectors (mlir-aie main @760932a4, the lowering identical to 1.4.3's AIEDmaToNpu.cpp except the
AXCache attribute, whose default is unchanged; research note txn_golden.md):
- test/Targets/NPU/npu_instgen.mlir, npu2_instgen.mlir, npu2_1col_header.mlir,
  npu2_instgen_multiple_devices.mlir (aie-translate --aie-npu-to-binary, every word CHECKed);
- test/Runtime/TxnEncoding/txn_encoding_host.test (TxnEncoding.h itself, CHECK-NEXT);
- test/Targets/NPU/npu_dma_memcpy.mlir (a shim BD's 8 words), dma_to_npu_width_conversion.mlir
  @2f53db79 (bf16 BD and its queue word), dma_to_npu_burst_length.mlir (npu2's 512-byte burst),
  push_to_queue.mlir (queue words), npu_address_patch_ddr_offset.mlir (the DDR fold),
  rtp_write.mlir (a runtime-parameter write32).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gemm_gen.backends import txn
from gemm_gen.call import Problem
from gemm_gen.design import build_design
from gemm_gen.design.serve import serve
from gemm_gen.dtypes import WORD_BYTES, dtype

from .conftest import small

NPU1_INSTGEN = [0x06030100, 0x00000104, 0x00000007, 0x000000DC,
                0x00000000, 0x00000000, 0x06400DEF, 0x00000000, 0x00000042, 0x00000018,
                0x00000000, 0x00000000, 0xABC00DEF, 0x00000000, 0x00000314, 0x00000018,
                0x00000001, 0x00000000, 0x12345679, 0x00000030, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6A, 0x6B,
                0x00000001, 0x00000101, 0x02100064, 0x00000030, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6A, 0x6B,
                0x00000003, 0x00000000, 0x0430567A, 0x00000000, 0x00001001, 0xF00FF00F, 0x0000001C,
                0x00000080, 0x00000010, 0x00030401, 0x05010200,
                0x00020008, 0x00000400, 0x12345678, 0x00000ABC]
TXN_HOST = [0x06040100, 0x00000105, 0x00000007, 0x000000B4,
            0, 0, 0x06400DEF, 0, 0x42, 0x18,
            3, 0, 0x00012340, 0, 0xAB, 0xFF, 0x1C,
            0x80, 0x10, 0x00010200, 0x03040500,
            1, 0x00000706, 0x00021000, 0x1C, 0xDEADBEEF, 0x12345678, 0x9ABCDEF0,
            0x81, 0x30, 0, 0, 0, 0, 0x00033000, 0, 2, 0, 0x80, 0,
            0x00090008, 0x100, 0xDEADC0DE, 0x00000001,
            0x00000306]


def _instgen_ops(last: txn.Op) -> list[txn.Op]:
    data = tuple(range(100, 108))
    return [txn.Write32(txn.address(3, 4, 0xABC00DEF), 0x42), txn.Write32(0xABC00DEF, 0x314),
            txn.BlockWrite(0x12345679, data), txn.BlockWrite(txn.address(1, 1, 100), data, col=1, row=1),
            txn.MaskWrite32(txn.address(2, 3, 0x567A), 0x1001, 0xF00FF00F), txn.Sync(3, 4, 1, 5, 1, 2), last]


def test_streams_equal_mlir_aies_translator_word_for_word():
    npu1 = txn.encode(_instgen_ops(txn.LoadPdi(2, 1024, 0xABC12345678)), 3, 4, 6)
    assert npu1.tolist() == NPU1_INSTGEN
    npu2 = txn.encode(_instgen_ops(txn.Preempt(3)), 4, 8, 6)
    assert npu2.tolist() == [0x06040100, 0x00000108, 0x00000007, 0x000000D0] + NPU1_INSTGEN[4:51] + [0x00000306]
    assert txn.encode([], 4, 1, 6).tolist() == [0x06040100, 0x00000101, 0x00000000, 0x00000010]
    one = txn.encode([txn.Write32(txn.address(2, 2, 0x04040404), 0x04040404)], 4, 8, 6)
    assert one.tolist() == [0x06040100, 0x108, 1, 0x28, 0, 0, 0x04240404, 0, 0x04040404, 0x18]
    host = txn.encode([txn.Write32(0x06400DEF, 0x42), txn.MaskWrite32(0x12340, 0xAB, 0xFF), txn.Sync(1, 2, 0, 3, 4, 5),
                       txn.BlockWrite(0x00021000, (0xDEADBEEF, 0x12345678, 0x9ABCDEF0), col=6, row=7),
                       txn.AddressPatch(0x33000, 2, 0x80), txn.LoadPdi(9, 0x100, 0x1DEADC0DE), txn.Preempt(3)],
                      4, 5, 6)
    assert host.tolist() == TXN_HOST


@pytest.mark.parametrize("offset,sizes,strides,elem_bits,burst,words,repeat", [
    # npu_dma_memcpy.mlir: i32 [1,2,32,32] / [4096,2048,64,1] from offset 4096 (the memcpy path writes 0 where
    # IRON's dma-task path writes the byte offset: word 1)
    (4096, (1, 2, 32, 32), (4096, 2048, 64, 1), 32, 2,
     [0x800, 16384, 0, 0x02000000, 0x8200003F, 0x020007FF, 0, 0x02000000], 0),
    # dma_to_npu_width_conversion.mlir: bf16 [4,4,64,64] / [0,64,256,1], a zero outer stride repeats
    (0, (4, 4, 64, 64), (0, 64, 256, 1), 16, 2, [0x2000, 0, 0, 0x02000000, 0x8400007F, 0x0200001F, 0, 0x02000000], 3),
    # dma_to_npu_burst_length.mlir: a contiguous i32 transfer on npu2 goes linear with the 512-byte burst
    (0, (1, 1, 1, 32), (0, 0, 0, 1), 32, 3, [32, 0, 0, 0, 0xC0000000, 0x02000000, 0, 0x02000000], 0),
    # static_vs_dynamic/memcpy_nd.mlir's i32 [2,4,8,64] / [2048,512,64,1] (words derived from the read rules, not
    # CHECKed there): contiguous inside, so linear; the outer dimension both iterates and repeats
    (0, (2, 4, 8, 64), (2048, 512, 64, 1), 32, 3, [0x800, 0, 0, 0, 0xC0000000, 0x02000000, 0x001007FF, 0x02000000], 1),
])
def test_shim_bd_words_equal_the_lowering(offset, sizes, strides, elem_bits, burst, words, repeat):
    bd = txn.shim_bd(offset, sizes, strides, elem_bits, burst)
    assert list(bd.words) == words and bd.repeat == repeat


def test_queue_patch_and_rtp_words_equal_the_lowering():
    assert txn.queue_push(0, txn.S2MM, 1, 3, 0, True) == txn.Write32(0x1D20C, 0x80000003)  # push_to_queue.mlir
    assert txn.queue_push(2, txn.MM2S, 0, 2, 3, False) == txn.Write32(0x0401D214, 0x00030002)
    assert txn.queue_push(0, txn.S2MM, 0, 0, 3, True).value == 0x80030000  # width_conversion's queue word
    five = txn.host_address(0, 0, 5, 0x100)  # npu_address_patch_ddr_offset.mlir: args past 5 get the DDR fold
    assert txn.encode([five], 4, 8, 6).tolist()[4:] == [0x81, 0x30, 0, 0, 0, 0, 0x1D004, 0, 5, 0, 0x80000100, 0]
    assert txn.host_address(0, 0, 4, 0x100).arg_plus == 0x100
    assert txn.Write32(txn.address(2, 3, 1536), 50).words()[2] == 0x04300600  # rtp_write.mlir: tile (2, 3)


def _bd_word_walk(words: tuple[int, ...], repeat: int, base_bytes: int) -> np.ndarray:
    """The 32-bit words a shim BD moves, from its fields as AM025 defines them (d0, d1 with wraps,
    d2 without: it steps until the length is moved; the iteration dimension per repeat), from the
    address the patch writes into its word 1 (the buffer's plus `base_bytes`)."""
    length = words[0]
    base = base_bytes // WORD_BYTES
    d0_size, d0_step = words[3] >> 20 & 0x3FF, (words[3] & 0xFFFFF) + 1
    d1_size, d1_step = words[4] >> 20 & 0x3FF, (words[4] & 0xFFFFF) + 1
    d2_step = (words[5] & 0xFFFFF) + 1
    it_wrap, it_step = (words[6] >> 20 & 0x3F) + 1, (words[6] & 0xFFFFF) + 1
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
    from gemm_gen.tap import Tap

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
    pattern over its host buffer (from the address its patch writes), in order; it is pushed onto
    its fifo's shim channel; no BD id is taken twice while live on a column; each awaited task is
    synced on its channel; the runtime parameters land at the core's RTP buffer; the header
    counts what follows."""
    from gemm_gen.config import RTP_PART
    from gemm_gen.design.build import host_tensors, runtime_sequence

    c = replace(small(dev, t_in, t_out, col), runtime_sizes="mnk")
    c = replace(c, M=max(c.M, 1024), K=max(c.K, 1024), N=max(c.N, 2048))
    design = build_design(c)
    call = serve(c, Problem.parse(size))
    words = txn.encode_call(design, call)
    ops = txn.call_ops(design, call)
    assert words[2] == len(ops) and words[3] == 4 * words.size
    runtime = runtime_sequence(c, call)
    tensors = {t.name: (i, t) for i, t in enumerate(host_tensors(c, call, runtime))}
    channel = txn.shim_channels(design)
    rtp = next(p.address for p in design.l1.placed if p.buffer.name == RTP_PART)
    it = iter(ops)
    live: dict[int, set[int]] = {}
    group_ids: dict[int, list[tuple[int, int]]] = {}
    checked = synced = 0
    for op in runtime:
        if op.rtp is not None:
            w = next(it)
            assert w == txn.Write32(txn.address(op.rtp.tile.col, op.rtp.tile.row, rtp), call.k_steps - 1)
            continue
        if op.task is None:  # the group finishes: a sync per awaited task, then its ids free up
            for t, bd_id in group_ids.pop(op.group):
                if t.wait:
                    direction, ch = channel[t.fifo]
                    assert next(it) == txn.Sync(t.shim.col, 0, direction, ch)
                    synced += 1
                live[t.shim.col].remove(bd_id)
            continue
        task = op.task
        bw, patch, push = next(it), next(it), next(it)
        assert isinstance(bw, txn.BlockWrite) and isinstance(patch, txn.AddressPatch) and isinstance(push, txn.Write32)
        bd_id = ((bw.address & 0xFFFFF) - txn.SHIM_BD_BASE) // txn.BD_BYTES
        assert bw.address == txn.address(task.shim.col, 0, txn.SHIM_BD_BASE + bd_id * txn.BD_BYTES)
        assert bd_id not in live.setdefault(task.shim.col, set())  # never two live tasks on one BD
        live[task.shim.col].add(bd_id)
        group_ids.setdefault(op.group, []).append((task, bd_id))
        arg, tensor = tensors[task.tensor]
        t = dtype(tensor.dtype)
        assert patch == txn.host_address(task.shim.col, bd_id, arg, patch.arg_plus)
        direction, ch = channel[task.fifo]
        repeat = push.value >> 16 & 0xFF
        assert push == txn.queue_push(task.shim.col, direction, ch, bd_id, repeat, task.wait)
        got = _bd_word_walk(bw.data, repeat, patch.arg_plus)
        assert np.array_equal(got, _tap_word_walk(task.tap.scaled(t.blocks_per_unit), t.block_bytes)), task.name
        checked += 1
    assert next(it, None) is None and checked == sum(op.task is not None for op in runtime) and synced > 0


def test_a_large_calls_stream_needs_no_toolchain():
    c = replace(small("npu2", "i8", "i32"), M=4096, K=4096, N=4096, runtime_sizes="mnk")
    design = build_design(c)
    words = txn.encode_call(design, serve(c, Problem(4096, 4096, 2048)))
    assert words.dtype == np.uint32 and words.size > 1000
