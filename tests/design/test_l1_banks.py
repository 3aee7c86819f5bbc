"""L1 placement (gemm_gen/design/l1_banks.py): the allocators' rules, the bank sharing, the plan, and
what the model charges for sharing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemm_gen.design import build_design
from gemm_gen.design import l1_banks as lb
from gemm_gen.facts.devices import NPU1, NPU2
from gemm_gen.facts.errors import ConfigError
from gemm_gen.model.l1_stall import collisions
from gemm_gen.model.params import load
from gemm_gen.model.perf import estimate_config
from gemm_gen.spec.checks import check_config
from gemm_gen.spec.config import GemmConfig

from ..conftest import small

KIB = 1024


def buf(name: str, nbytes: int, role: str = "A", slot: int = 0, **kw: object) -> lb.L1Buffer:
    return lb.L1Buffer(name, nbytes, role, slot, **kw)  # type: ignore[arg-type]


def addresses(placed: list[lb.Placed] | None) -> dict[str, int]:
    assert placed is not None
    return {p.buffer.name: p.address for p in placed}


# ---- the allocators ------------------------------------------------------------------------------
def test_basic_sequential_packs_largest_first_from_the_stack() -> None:
    got = addresses(lb.basic_sequential(NPU1, [buf("a", 100), buf("b", 4000), buf("c", 100)], 1024))
    assert got == {"b": 1024, "a": 1024 + 4000, "c": 1024 + 4000 + 128}  # 32-byte aligned, stable on ties
    assert lb.basic_sequential(NPU1, [buf("x", 65 * KIB)], 1024) is None


def test_bank_aware_round_robins_while_memory_is_loose() -> None:
    """Largest first; each at the lowest address of the next bank after the previous one's."""
    got = addresses(lb.bank_aware(NPU1, [buf("a", 4 * KIB), buf("b", 8 * KIB), buf("c", 2 * KIB),
                                         buf("d", 8 * KIB)], 1024))
    assert got == {"b": 1024, "d": 16 * KIB, "a": 32 * KIB, "c": 48 * KIB}


def test_bank_aware_prefers_one_bank_and_keeps_room_for_what_is_left() -> None:
    # the 12 KiB buffer fits bank 0 after the stack; the 15 KiB one then needs a bank of its own
    got = addresses(lb.bank_aware(NPU1, [buf("big", 15 * KIB), buf("mid", 12 * KIB)], 1024))
    assert got["big"] // (16 * KIB) != got["mid"] // (16 * KIB)
    assert all(lb.Placed(buf(n, 1), a).address % 32 == 0 for n, a in got.items())


def test_bank_aware_pins_and_reservations() -> None:
    placed = lb.bank_aware(NPU2, [buf("r", 16 * KIB - 64, "reserve", fifo=False, address=64),
                                  buf("s", 2 * KIB, "scratch", fifo=False, mem_bank=3), buf("a", 8 * KIB)], 64)
    got = addresses(placed)
    assert got["r"] == 64 and 48 * KIB <= got["s"] < 64 * KIB and got["a"] >= 16 * KIB
    # an address on used bytes, or misaligned, cannot be placed
    assert lb.bank_aware(NPU2, [buf("r", 256, "reserve", fifo=False, address=0)], 1024) is None
    # pins align to the 32-byte bus (not to the 64-byte vectors: 2080 is fine, 2068 is not)
    assert lb.bank_aware(NPU2, [buf("r", 256, "reserve", fifo=False, address=2068)], 1024) is None
    assert lb.bank_aware(NPU2, [buf("r", 256, "reserve", fifo=False, address=2080)], 1024) is not None
    # a bank pin that does not fit its bank fails instead of moving
    assert lb.bank_aware(NPU1, [buf("s", 17 * KIB, "scratch", fifo=False, mem_bank=1)], 1024) is None


# ---- sharing -------------------------------------------------------------------------------------
def test_concurrent_pairs_follow_the_fifo_turnover() -> None:
    c = small("npu1", "bf16", "bf16", acc="out")
    bufs = lb.core_buffers(c)
    assert [b.name for b in bufs] == ["A0", "A1", "B0", "B1", "C0"]
    pairs = set(lb.concurrent(c, bufs))
    # rho = 1: A and B turn over together, so the same-slot objects are never DMA vs core
    assert ("A1", "A0") in pairs and ("B1", "A0") in pairs and ("A0", "C0") in pairs
    assert ("A0", "B0") not in pairs and ("B1", "A1") not in pairs and not any(x == "C0" for x, _ in pairs)
    # a C accumulated in f32 keeps its other rows in a worker Buffer only the core touches
    wide = small("npu1", "bf16", "bf16")
    assert [b.name for b in lb.core_buffers(wide)] == ["A0", "A1", "B0", "B1", "C0", "C acc"]
    assert not any(x == "C acc" for x, _ in lb.concurrent(wide, lb.core_buffers(wide)))
    atb = GemmConfig("npu1", 1024, 1024, 1024, 64, 32, 64, 64, rho=2)
    assert ("A0", "B0") in set(lb.concurrent(atb, lb.core_buffers(atb)))  # any A meets any B


def test_conflicts_count_the_dma_bytes_in_each_shared_bank() -> None:
    a = lb.Placed(buf("A1", 20 * KIB, slot=1), 10 * KIB)  # banks 0 and 1
    b = lb.Placed(buf("A0", 4 * KIB), 28 * KIB)  # bank 1
    got = lb.conflicts([a, b], [("A1", "A0")], 16 * KIB)
    assert got == [lb.Conflict("A1", "A0", 1, 14 * KIB)]
    assert lb.conflicts([a, b], [], 16 * KIB) == []  # sharing a bank costs only if both are busy at once


# ---- the plan ------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(st.sampled_from([("npu1", "bf16", "bf16"), ("npu1", "i8", "i16"), ("npu2", "bf16", "bf16"),
                        ("npu2", "i8", "i32"), ("npu1", "i16", "i32")]),
       st.integers(1, 8), st.integers(1, 12), st.integers(1, 8), st.sampled_from([1, 2, 4]))
def test_every_plan_is_a_valid_l1_image(types, mi: int, ki: int, ni: int, rho: int) -> None:
    """Whatever the plan: every buffer placed once, aligned, inside L1, above the stack, no two
    overlapping (reservations included), the kernel-data headroom left free; its conflicts are
    exactly the planned pairs that share a bank."""
    dev, t_in, t_out = types
    probe = GemmConfig(dev, 1, 1, 1, 1, 1, 1, 1, t_in, t_out)
    r, s, t = probe.kernel.mmul
    m, k, n = 2 * r * mi * rho, s * ki, 2 * t * ni
    try:
        c = check_config(GemmConfig(dev, 4 * m, k, 8 * n, m, k, n, k, t_in, t_out, rho=rho))
    except ConfigError:
        return
    plan = lb.plan(c)
    spans = sorted((p.address, p.end, p.buffer.name) for p in plan.placed)
    assert {p.buffer.name for p in plan.placed} >= {b.name for b in lb.core_buffers(c)}
    assert spans[0][0] >= c.array.stack_bytes and spans[-1][1] <= c.dev.l1_bytes
    assert all(x[1] <= y[0] for x, y in zip(spans, spans[1:]))
    assert all(p.address % 32 == 0 for p in plan.placed)
    if plan.reserved:
        assert plan.scheme == "bank-aware" and spans[-1][1] <= c.dev.l1_bytes - c.dev.core_static_bytes
    pairs = lb.concurrent(c, lb.core_buffers(c))
    assert plan.conflicts == tuple(lb.conflicts(list(plan.placed), pairs, plan.bank_bytes))
    assert plan.conflict_bytes <= min(lb.plan(c, s_).conflict_bytes for s_ in lb.SCHEMES
                                      if _fits(c, s_))


def _fits(c: GemmConfig, scheme: str) -> bool:
    try:
        lb.plan(c, scheme)
    except ConfigError:
        return False
    return True


def test_reservations_give_ping_and_pong_their_own_banks() -> None:
    """npu2 bf16 64 x 32 x 128: neither allocator separates them alone; reserved bytes steer
    bank-aware to C in banks 0-1, A0 and B0 in 2, A1 and B1 in 3, in every order of equal fifos."""
    c = GemmConfig("npu2", 512, 512, 1024, 64, 32, 128, 64, acc="out")
    assert all(lb.plan(c, s).conflict_bytes > 0 for s in lb.SCHEMES)
    plan = lb.plan(c)
    assert plan.reserved and plan.conflict_bytes == plan.worst_conflict_bytes == 0
    banks = {p.buffer.name: set(p.banks(plan.bank_bytes)) for p in plan.placed}
    assert banks["A0"] | banks["B0"] == {2} and banks["A1"] | banks["B1"] == {3} and banks["C0"] == {0, 1}


def test_a_given_scheme_is_kept_and_refused_when_it_does_not_fit() -> None:
    c = GemmConfig("npu1", 4224, 4032, 4224, 96, 56, 96, 224, b_col_maj=True, acc="out")  # 96% of L1
    assert lb.plan(c).scheme == "basic-sequential"  # bank-aware runs out of room
    with pytest.raises(ConfigError, match="do not fit bank-aware"):
        lb.plan(c, "bank-aware")
    d = build_design(GemmConfig("npu2", 512, 512, 1024, 64, 32, 128, 64, l1_alloc="basic-sequential", acc="out"))
    assert d.l1 is not None and d.l1.scheme == "basic-sequential" and not d.l1.reserved
    assert {w.allocation_scheme for w in d.workers} == {"basic-sequential"}
    with pytest.raises(ConfigError, match="unknown L1 allocation scheme"):
        check_config(GemmConfig("npu2", 512, 512, 1024, 64, 32, 128, 64, l1_alloc="first-fit", acc="out"))


def test_the_design_carries_the_plan_to_every_worker() -> None:
    d = build_design(GemmConfig("npu2", 512, 512, 1024, 64, 32, 128, 64, acc="out"))
    assert d.l1 is not None and d.l1.reserved
    for w in d.workers:
        held = [b for b in w.buffers if b.reservation]
        assert [(b.address, b.shape) for b in held] == [(at, (n,)) for at, n in d.l1.reserved]
        assert w.allocation_scheme == d.l1.scheme


# ---- the model -----------------------------------------------------------------------------------
def test_the_model_charges_only_shared_banks() -> None:
    """With a nonzero cost per collision, a layout the DMA and the core never share costs nothing
    and one they share costs; the calibrated cost itself is what the published kernels support."""
    p = load().with_(l1_conflict=1.0)
    steered = GemmConfig("npu2", 4096, 4096, 4096, 64, 32, 128, 256, acc="out")
    sequential = GemmConfig("npu2", 4096, 4096, 4096, 64, 32, 128, 256, l1_alloc="basic-sequential", acc="out")
    assert float(estimate_config(steered, p).l1_stall_cycles) == 0.0
    assert float(estimate_config(sequential, p).l1_stall_cycles) > 0.0
    plan = lb.plan(sequential, "basic-sequential")
    assert collisions(sequential, plan, 1000.0) > collisions(sequential, plan, 4000.0) > 0  # busier core, more
    assert load().l1_conflict >= 0.0


# ---- golden: what mlir-aie's own allocator tests expect at 1.4.3 ------------------------------------
GOLDEN = json.loads((Path(__file__).parents[1] / "golden" / "allocator" / "l1_alloc_1_4_3.json").read_text())["cases"]


@pytest.mark.parametrize("case", GOLDEN, ids=lambda c: c["source"].split(" ")[-1])
def test_allocators_place_as_mlir_aies_tests_expect(case: dict) -> None:
    dev = NPU1 if case["device"] == "npu1" else NPU2
    bufs = [lb.L1Buffer(b["name"], b["bytes"], "scratch", fifo=False, mem_bank=b.get("mem_bank"),
                        address=b.get("address"), aligned=b.get("aligned", True)) for b in case["buffers"]]
    placed = lb.allocate(dev, case["scheme"], bufs, case["stack"])
    got = addresses(placed)
    assert {name: got[name] for name in case["expect"]} == case["expect"], case["source"]


@pytest.mark.parametrize("config", [
    GemmConfig("npu2", 64, 1024, 512, 32, 128, 32, 128, "bf16", "bf16", dtype_b="i4", group_size=64,
               runtime_sizes="mnk"),  # C acc, the W4A16 scratch, the runtime-parameter buffer
    GemmConfig("npu2", 256, 256, 256, 64, 64, 64, 64, "bf16", "f32", convert_once=True, runtime_sizes="mnk"),
])
def test_the_plans_scratch_order_is_the_order_the_design_creates_its_buffers(config) -> None:
    """The allocator places a worker's Buffers in creation order, so the plan must list them in the order
    design/build.py's worker creates them (the merge of W4A16 once put the dequantized tile after the RTP
    buffer in the plan and before it in the design)."""
    part_of = {"A_bfp16": "A bfp16", "B_bfp16": "B bfp16", "C_acc": "C acc", "B_deq": "B bf16", "rtp": "RTP"}
    worker = build_design(config).workers[0]
    made = [part_of[prefix] for b in worker.buffers for prefix in part_of if b.name.startswith(prefix + "_")]
    planned = [b.name for b in lb.core_buffers(config) if b.role == "scratch"]
    assert len(made) >= 2 and made == planned
