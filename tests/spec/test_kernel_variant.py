"""The kernel variant rule (gemm_gen/spec/rules/kernel_variant.py), its config and CLI checks, and the model
that prices each variant (gemm_gen/model/kernel.py)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemm_gen.app.cli import main
from gemm_gen.facts.devices import DEVICES, NPU1, NPU2
from gemm_gen.facts.errors import ConfigError
from gemm_gen.model.fit import paper
from gemm_gen.model.kernel import kernel_cycles, kernel_shape, variant
from gemm_gen.model.params import load
from gemm_gen.model.predict import predict
from gemm_gen.spec.checks import check_config
from gemm_gen.spec.config import PAPER_TILES, GemmConfig
from gemm_gen.spec.rules import kernel_variant as kv
from gemm_gen.spec.rules import peano


def test_register_arithmetic_picks_mlir_aies_expansions_on_npu1() -> None:
    """aie2 bf16 4x8x4: 16 accumulators of 512 bits fit 9 x 1024 (mlir-aie's matmul_vectorized_4x4);
    i8 4x8x8: 8 of 1024 bits fit, and 4x2 loads fewer B blocks than 2x4 (matmul_vectorized_4x2_mmul)."""
    assert kv.expansions(NPU1, "bf16", (4, 8, 4))[0] == (4, 4)
    assert kv.expansions(NPU1, "i8", (4, 8, 8))[0] == (4, 2)
    assert (4, 4) not in kv.expansions(NPU1, "i8", (4, 8, 8))  # 16 x 1024 bits > 9216
    # npu2: one 8x8x8 cluster of 2 x 2 already holds 4 of the 5 x 2048-bit accumulators
    assert kv.expansions(NPU2, "i8", (8, 8, 8)) == ((2, 2),)
    assert kv.register_bits(NPU1, "bf16", (4, 8, 4), 4, 4) == (16 * 16 * 32, (4 * 32 + 4 * 32) * 16)
    for dev in DEVICES.values():  # 2 x 2 fits every shape, and comes after every wider choice
        for din, shapes in dev.mmul_shapes.items():
            for shape in shapes:
                order = kv.expansions(dev, din, shape)
                assert order[-1] == (2, 2) and all(er * et >= 4 for er, et in order)
                for er, et in order:
                    acc, ops = kv.register_bits(dev, din, shape, er, et)
                    assert acc <= dev.isa.acc_file_bits and ops <= dev.isa.vector_file_bits


def test_a_tile_that_does_not_split_falls_back_to_a_narrower_expansion() -> None:
    order = kv.expansions(NPU1, "bf16", (4, 8, 4))
    picks = kv.auto_expansion(NPU1, "bf16", (4, 8, 4), np.array([16, 8, 16, 24]), np.array([16, 16, 8, 8]))
    assert [order[i] for i in picks] == [(4, 4), (2, 4), (4, 2), (2, 2)]


def test_loops_overlap_only_when_registers_leave_room_and_the_code_fits() -> None:
    # 4x4 bf16 fills the accumulator file: no flattening, but c-overlap (it needs no second cluster)
    assert kv.choose(NPU1, "bf16", (4, 8, 4), False, 96, 56, 96).name == "4x4 c-overlap"
    assert kv.choose(NPU2, "i8", (8, 8, 8), False, 64, 64, 64).name == "2x2 c-overlap"
    # 2x2 leaves room for 4 clusters: the most overlapping structure whose code fits half of 16 KiB
    small = kv.choose(NPU1, "bf16", (4, 8, 4), False, 8, 16, 8)
    assert small.name == "2x2 jk-flat"
    # with chess (flattening by chess_flatten_loop), whatever fits the code budget; Peano's post-RA pipeliner
    # stops at a 60-cycle II, which 32 flattened k-steps of 4 chains (128 macs) pass (test below)
    big = kv.choose(NPU1, "bf16", (4, 8, 4), False, 8, 256, 16, expansion=(2, 2), compiler="chess")
    assert big.loops == "k-flat"  # two clusters per row
    huge = kv.choose(NPU1, "bf16", (4, 8, 4), False, 8, 1024, 16, expansion=(2, 2), compiler="chess")
    assert huge.loops == "c-overlap"  # flattening 128 k-steps does not fit; the peeled step does
    budget = kv.CODE_BUDGET * NPU1.isa.program_bytes
    for v, k, n in ((small, 16, 8), (big, 256, 16)):
        assert kv.code_bytes(NPU1, "bf16", (4, 8, 4), False, v.expansion, v.loops, k, n) <= budget
    assert kv.code_bytes(NPU1, "bf16", (4, 8, 4), False, (2, 2), "jk-flat", 256, 16) > budget
    assert kv.code_bytes(NPU1, "bf16", (4, 8, 4), False, (2, 2), "k-flat", 1024, 16) > budget
    sizes = [int(kv.code_bytes(NPU1, "i8", (4, 8, 8), False, (2, 2), lp, 64, 64)) for lp in kv.LOOPS]
    assert sizes == sorted(sizes) and sizes[0] < sizes[1] < sizes[-1]


def test_peano_offers_flattening_only_where_its_pipeliner_reaches() -> None:
    """Under Peano a flattened loop is a full unroll, and the loop around it is software-pipelined only if
    its body fits the post-RA pipeliner's largest II (spec/rules/peano.py): a flattening structure past it is not
    chosen with Peano (the same tile keeps it with chess), a pinned one is refused in one line, and the
    pipelined body is what both rules count."""
    dev, shape = NPU1, (4, 8, 4)  # one bf16 4x8x4 mmul per instruction on npu1
    limit = peano.POSTPIPELINER_MAX_II
    # 2x2 clusters: 4 instructions per k-step, so k-flat's body is 4 k / 8; at k = 120 it is exactly the limit
    fits, past = 8 * limit // 4, 8 * limit // 4 + 8
    assert int(kv.pipelined_body(dev, "bf16", shape, False, (2, 2), "k-flat", fits, 16)) == limit
    assert kv.choose(dev, "bf16", shape, False, 8, fits, 16, expansion=(2, 2)).loops == "k-flat"
    assert kv.choose(dev, "bf16", shape, False, 8, past, 16, expansion=(2, 2)).loops == "c-overlap"
    # chess flattens whatever fits the code budget: here the whole block row
    assert kv.choose(dev, "bf16", shape, False, 8, past, 16, expansion=(2, 2), compiler="chess").loops == "jk-flat"
    with pytest.raises(ConfigError, match="k-flat with Peano.*past the 60-cycle II"):
        kv.choose(dev, "bf16", shape, False, 8, past, 16, expansion=(2, 2), loops="k-flat")
    kv.choose(dev, "bf16", shape, False, 8, past, 16, expansion=(2, 2), loops="k-flat", compiler="chess")
    # jk-flat's body holds the whole block row: 2 clusters of 4 k / 8 each (48 at k = 48, 64 at k = 64)
    assert int(kv.pipelined_body(dev, "bf16", shape, False, (2, 2), "jk-flat", 64, 16)) == 2 * 4 * 8
    assert kv.choose(dev, "bf16", shape, False, 8, 48, 16, expansion=(2, 2)).loops == "jk-flat"
    assert kv.choose(dev, "bf16", shape, False, 8, 64, 16, expansion=(2, 2)).loops == "k-flat"
    assert kv.choose(dev, "bf16", shape, False, 8, 64, 16, expansion=(2, 2), compiler="chess").loops == "jk-flat"
    # the K loop of the other two is one round: never refused (npu2's native bf16 with 8 chains is 64 cycles; the
    # rule leaves both structures alike there, see kernel_variant.peano_pipelines)
    for lp in ("k-pipelined", "c-overlap"):
        assert kv.peano_problem(dev, "bf16", shape, False, (4, 4), lp, 4096, 4096) is None
        assert kv.peano_problem(NPU2, "bf16", (4, 8, 8), False, (2, 4), lp, 64, 64) is None
    assert kv.choose(NPU2, "bf16", (4, 8, 8), False, 8, 16, 32, expansion=(2, 4)).loops == "c-overlap"


def test_the_model_prices_the_structure_each_compiler_gets() -> None:
    """The model's automatic loop structure is the variant rule's for the config's compiler: a tile where
    Peano loses k-flat is priced as c-overlap under Peano and as jk-flat under chess."""
    p = load()
    k = 8 * peano.POSTPIPELINER_MAX_II // 4 + 8
    cyc = {}
    for compiler in ("peano", "chess"):
        auto = kernel_shape(NPU1, "bf16", "bf16", (4, 8, 4), False, expansion=(2, 2), compiler=compiler)
        v = variant(auto, 8, k, 16)
        given = kernel_shape(NPU1, "bf16", "bf16", (4, 8, 4), False, expansion=(2, 2), loops=v.loops, compiler=compiler)
        cyc[compiler] = float(kernel_cycles(p, auto, 8, k, 16))
        assert cyc[compiler] == float(kernel_cycles(p, given, 8, k, 16)), compiler
        assert v.loops == {"peano": "c-overlap", "chess": "jk-flat"}[compiler]
    assert cyc["peano"] != cyc["chess"]


def test_c_overlap_code_and_registers() -> None:
    """c-overlap's code: the pipelined K loop (three copies) plus, once, the peeled round and each
    chain's C store, reload and first load, every one in an instruction of its own; k changes nothing.
    Its registers: one round's operands and one C block fit the vector file for every variant, and
    with no spare accumulator (npu1 i8 8x8x8 2x2) it is still a valid choice."""
    dev, shape = NPU2, (8, 8, 8)
    ld, st = kv.c_block_accesses(dev, "i8", shape, 4)  # 8 x 8 int32 in 64-byte vectors
    assert (ld, st) == (4, 4)
    peeled = 4 + kv.round_loads(dev, "i8", shape, 2, 2) + 4 * (2 * ld + st)
    want = (4 * kv.PIPELINE_COPIES + -(-peeled // kv.PIPELINE_COPIES) * kv.PIPELINE_COPIES) * 16
    for k in (64, 4096):
        assert int(kv.code_bytes(dev, "i8", shape, False, (2, 2), "c-overlap", k, 64)) == want
    for d in DEVICES.values():
        for din, shapes in d.mmul_shapes.items():
            for sh in shapes:
                assert all(kv.overlap_fits(d, din, sh, e) for e in kv.expansions(d, din, sh))
    assert kv.spare_accumulators(NPU1, "i8", (8, 8, 8), (2, 2)) == 0
    assert kv.choose(NPU1, "i8", (8, 8, 8), False, 16, 64, 16, expansion=(2, 2)).loops == "c-overlap"
    assert kv.spare_accumulators(NPU2, "i8", (8, 8, 8), (2, 2)) == 1


def test_the_bf16_emulation_converts_through_an_accumulator_register(monkeypatch) -> None:
    """npu2's bf16-via-bfp16 8x8x8 mmul builds each operand as an accum<accfloat, 64> before converting it
    (aie2p/mmul_bf16_bf16.hpp): a 2 x 2 cluster's four C blocks and that temporary fill the five 2048-bit
    registers, so c-overlap has no spare for its reload, and the model prices the reload after its chain's
    store (as on npu1's i8 8x8x8)."""
    shape, acc = (8, 8, 8), 64 * 32
    assert kv.register_bits(NPU2, "bf16", shape, 2, 2) == (4 * acc, 4 * 64 * 16)
    assert kv.register_bits(NPU2, "bf16", shape, 2, 2, emulate=True) == (5 * acc, 4 * 64 * 16)
    assert kv.register_bits(NPU2, "bf16", shape, 2, 2, emulate=True)[0] == NPU2.isa.acc_file_bits
    assert kv.spare_accumulators(NPU2, "bf16", shape, (2, 2)) == 1
    assert kv.spare_accumulators(NPU2, "bf16", shape, (2, 2), emulate=True) == 0
    assert kv.expansions(NPU2, "bf16", shape, emulate=True) == ((2, 2),)
    assert kv.acc_sets(NPU2, "bf16", shape, (2, 2), emulate=True) == 1
    assert kv.choose(NPU2, "bf16", shape, True, 64, 64, 64).name == "2x2 c-overlap"
    with pytest.raises(ConfigError, match=f"needs {9 * acc} accumulator"):  # 4 x 2: 8 C blocks and the temporary
        kv.choose(NPU2, "bf16", shape, True, 64, 64, 64, expansion=(4, 2))
    from gemm_gen.model.kernel import cluster_terms

    p = load()
    ks = kernel_shape(NPU2, "bf16", "bf16", shape, True, expansion=(2, 2), loops="c-overlap")
    counted = cluster_terms(p, ks, (2, 2))
    monkeypatch.setattr(kv, "EMULATION_ACC_TEMPS", 0)  # the rule before: a spare the conversions really hold
    unseen = cluster_terms(p, ks, (2, 2))
    assert counted["serial_overhead"] == unseen["serial_overhead"]
    assert counted["serial_overlapped"] > unseen["serial_overlapped"]  # the last chain's reload waits


@pytest.mark.parametrize("change, message", [
    (dict(expansion=(3, 2)), "not one of ours"),
    (dict(expansion=(4, 4), dtype_in="i8", dtype_out="i8", m=128, n=128), "16384 accumulator"),
    (dict(kernel_loops="unrolled"), "unknown kernel loop structure"),
    (dict(dtype_in="bfp16", dtype_out="bfp16", expansion=(4, 2), m=64, n=64, k=64, k_mt=64), "one variant"),
])
def test_config_refuses_a_variant_it_cannot_build(change: dict, message: str) -> None:
    fields = dict(device="npu1", M=1024, K=1024, N=1024, m=72, k=64, n=64, k_mt=64, dtype_in="bf16", dtype_out="bf16")
    if change.get("dtype_in") == "bfp16":
        fields["device"] = "npu2"
    fields.update(change)
    with pytest.raises(ConfigError, match=message):
        check_config(GemmConfig(**fields))  # type: ignore[arg-type]


def test_cli_names_the_bad_variant_in_one_line(capsys) -> None:
    code = main(["plan", "--dev", "npu1", "-M", "1024", "-K", "1024", "-N", "1024", "-m", "72", "-k", "64",
                 "-n", "64", "--expansion", "4x4"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "4x4 clusters" in err
    with pytest.raises(SystemExit) as bad:
        main(["plan", "--dev", "npu1", "-M", "1024", "-K", "1024", "-N", "1024", "--expansion", "4by4"])
    assert bad.value.code == 2 and "ERxET" in capsys.readouterr().err


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([(d, din, dout) for d in DEVICES.values() for din, outs in d.out_types.items()
                        for dout in outs]),
       st.integers(1, 12), st.integers(1, 40), st.integers(1, 12), st.booleans())
def test_the_model_prices_the_variant_the_kernel_gets(case, mi: int, ki: int, ni: int, wide: bool) -> None:
    """The tuner's vectorised choice equals the scalar rule a build gets, for every tile."""
    dev, din, dout = case
    shape = dev.mmul_shapes[din][0]
    r, s, t = shape
    m, k, n = 2 * r * mi * (2 if wide else 1), s * ki, 2 * t * ni
    p = load()
    auto = kernel_shape(dev, din, dout, shape, False)
    v = kv.choose(dev, din, shape, False, m, k, n)
    given_ = kernel_shape(dev, din, dout, shape, False, expansion=v.expansion, loops=v.loops)
    assert float(kernel_cycles(p, auto, m, k, n)) == float(kernel_cycles(p, given_, m, k, n))
    # and it is never predicted slower than the 2x2 kernel with only its K loop pipelined
    plain = kernel_shape(dev, din, dout, shape, False, expansion=(2, 2), loops="k-pipelined")
    assert float(kernel_cycles(p, auto, m, k, n)) <= float(kernel_cycles(p, plain, m, k, n))


def test_overlap_follows_the_pipelined_loop() -> None:
    """With room for several clusters, k-flat hides all but each block row's first cluster and
    jk-flat all of them; with one cluster filling the file, the loop structure changes nothing."""
    p = load()
    cyc = {lp: float(kernel_cycles(p, kernel_shape(NPU1, "bf16", "bf16", (4, 8, 4), False, expansion=(2, 2),
                                                   loops=lp), 64, 64, 64)) for lp in kv.LOOPS}
    assert cyc["jk-flat"] < cyc["k-flat"] < cyc["k-pipelined"]
    full = {lp: float(kernel_cycles(p, kernel_shape(NPU1, "bf16", "bf16", (4, 8, 4), False, expansion=(4, 4),
                                                    loops=lp), 64, 64, 64)) for lp in kv.LOOPS}
    assert full["k-pipelined"] == full["k-flat"] == full["jk-flat"] >= full["c-overlap"]


def _expected_overlap(dev, din: str, shape: tuple[int, int, int], c_bytes: int,
                      p) -> tuple[float, float, float, float]:
    """(II, serial, overlapped serial, beta n_C) of one 2 x 2 cluster, from the ISA as the docstring of
    cluster_terms derives them."""
    isa = dev.isa
    ld, st = kv.c_block_accesses(dev, din, shape, c_bytes)
    rl = kv.round_loads(dev, din, shape, 2, 2)
    ii = max(512 / dev.peak_macs[din], isa.acc_distance / 4, rl / (isa.load_units * 4))  # one 8x8x8 mmul
    stores = max(3 * ii + st, 4 * st / isa.store_units)
    epilog = isa.vmac_to_store + isa.vst_latency - 1 + stores
    serial = isa.vld_latency + -(-(4 * ld + rl) // isa.load_units) - 1 + epilog - 4 * ii
    late = 0 if kv.spare_accumulators(dev, din, shape, (2, 2)) else ld
    epilog_ov = isa.vmac_to_store + isa.vst_latency - 1 + max(stores, -(-(4 * ld - late) // isa.load_units))
    overlapped = isa.vld_latency + -(-(late + rl) // isa.load_units) - 1 + epilog_ov - 4 * ii
    return ii, serial, overlapped, p.bank_stall * 4 * (ld + st)


@pytest.mark.parametrize("dev, dout", [(NPU2, "i32"), (NPU2, "i8"), (NPU1, "i32")])
def test_c_overlap_hides_the_reloads_down_to_the_calibrated_floor(dev, dout: str) -> None:
    """The peeled step's reloads leave the next cluster's prolog (all of them with a spare
    accumulator, all but the last chain's without: npu1 8x8x8); what stays per cluster is the larger
    of that schedule and beta n_C, and the call's first cluster pays the k-pipelined O once."""
    p = load()
    shape = (8, 8, 8)
    ii, serial, overlapped, floor = _expected_overlap(dev, "i8", shape, 4 if dout == "i32" else 1, p)
    ks = kernel_shape(dev, "i8", dout, shape, False, expansion=(2, 2), loops="c-overlap")
    from gemm_gen.model.kernel import cluster_terms

    terms = cluster_terms(p, ks, (2, 2))
    assert terms["serial_overhead"] == serial and terms["serial_overlapped"] == overlapped < serial
    o = max(min(floor, serial), overlapped)
    m, k, n = 32, 64, 48  # 2 x 3 clusters of 8 k-steps
    plain = replace(ks, loops="k-pipelined")
    assert float(kernel_cycles(p, ks, m, k, n)) == 6 * (4 * 8 * ii + o) + (serial - o)
    assert float(kernel_cycles(p, plain, m, k, n)) == 6 * (4 * 8 * ii + serial)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([(d, din, dout) for d in DEVICES.values() for din, outs in d.out_types.items()
                        for dout in outs]),
       st.integers(1, 8), st.integers(1, 40), st.integers(1, 8))
def test_c_overlap_is_never_predicted_slower_than_k_pipelined(case, mi: int, ki: int, ni: int) -> None:
    dev, din, dout = case
    shape = dev.mmul_shapes[din][0]
    r, s, t = shape
    m, k, n = 2 * r * mi, s * ki, 2 * t * ni
    p = load()
    for e in kv.expansions(dev, din, shape):
        if bool(kv.divides(shape, e, m, n)):
            ov, kp = (float(kernel_cycles(p, kernel_shape(dev, din, dout, shape, False, expansion=e, loops=lp),
                                          m, k, n)) for lp in ("c-overlap", "k-pipelined"))
            assert ov <= kp


@pytest.mark.parametrize("types", [("bf16", "bf16"), ("i8", "i8"), ("i8", "i16"), ("i8", "i32")])
def test_paper_designs_report_their_variant_and_are_no_slower_than_the_papers_kernel(types) -> None:
    """The npu1 paper designs (Striking Table 2) predicted with our kernel variant against the
    same design with the paper's kernel as the model reads it (2x2, flattened)."""
    m, k, n, k_mt = PAPER_TILES[("npu1", *types)]
    c = GemmConfig("npu1", 4224, 4032, 4224, m, k, n, k_mt, *types, b_col_maj=True)
    ours = predict(c)
    # the paper's kernel as chess built it (mlir-aie's OPT_PERF flattening is chess_flatten_loop)
    theirs = predict(GemmConfig("npu1", 4224, 4032, 4224, m, k, n, k_mt, *types, b_col_maj=True,
                                expansion=paper.PAPER_EXPANSION, kernel_loops=paper.PAPER_LOOPS, compiler="chess"))
    assert ours.to_json()["kernel_variant"] == c.variant.name and ours.kernel_model.variant == c.variant.name
    assert c.variant.expansion != (2, 2)  # a wider cluster than the paper's reading
    assert ours.core_macs_per_cycle >= theirs.core_macs_per_cycle
    assert json.dumps(ours.to_json())  # plain JSON


# ---- bf16 converted once (npu2) ---------------------------------------------------------------------
def _bf16(**kw: object) -> GemmConfig:
    fields: dict = dict(device="npu2", M=1024, K=1024, N=1024, m=64, k=64, n=64, k_mt=256)
    fields.update(kw)
    return GemmConfig(**fields)  # type: ignore[arg-type]


def test_convert_once_is_on_wherever_it_can_be_built() -> None:
    assert _bf16(compiler="chess").kernel.convert_once is True
    # Peano builds it when asked, but it is not Peano's default (its A / B copies need other default tiles)
    assert _bf16().kernel.convert_once is False and _bf16(convert_once=True).kernel.convert_once is True
    peano = check_config(_bf16(convert_once=True))
    # mlir-aie's 0x1700 less config1's A copy
    assert peano.kernel.compiler == "peano" and peano.array.stack_bytes == 0xE00
    assert _bf16(compiler="chess", emulate_bf16_with_bfp16=False).kernel.convert_once is False
    assert GemmConfig("npu1", 1024, 1024, 1024, 64, 64, 64, 256, compiler="chess").kernel.convert_once is False
    assert GemmConfig("npu2", 1024, 1024, 1024, 64, 64, 64, 256, "i8", "i8",
                      compiler="chess").kernel.convert_once is False
    c = check_config(_bf16(compiler="chess"))
    assert c.l1_parts["A bfp16"] == c.l1_parts["B bfp16"] == 64 * 64 * 9 // 8
    assert c.variant.name == "2x2 k-pipelined" and c.kernel.block


@pytest.mark.parametrize("change, message", [
    (dict(compiler="chess", emulate_bf16_with_bfp16=False), "turns off"),
    (dict(compiler="chess", device="npu1"), "npu2's bfp16 datapath"),
    (dict(compiler="chess", dtype_in="i8", dtype_out="i8"), "npu2's bfp16 datapath"),
])
def test_convert_once_refuses_what_it_cannot_build(change: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_config(_bf16(convert_once=True, **change))


def test_cli_convert_once_builds_with_peano(capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)  # the dry run's default build/ is not the checkout's
    code = main(["build", "--dry-run", "--dev", "npu2", "-M", "1024", "-K", "1024", "-N", "1024", "-m", "64", "-k",
                 "64", "-n", "64", "--convert-once"])
    out = capsys.readouterr().out
    assert code == 0
    aiecc = next(line for line in out.splitlines() if " aiecc " in line).split()
    assert "--xchesscc" not in aiecc and any(a.startswith("--peano=") for a in aiecc)
    assert any("--target=aie2p-none-unknown-elf" in line and "-fstack-size-section" in line
               for line in out.splitlines())


def _steps(t_ma: int, k: int, n: int, rho: int) -> tuple[float, float]:
    """Predicted cycles per k-step (rho calls and, converting once, one B conversion): (the AIE API's
    per-mmul emulation, the convert-once kernel)."""
    from gemm_gen.model.kernel import b_conversion_cycles

    p = load()
    emulated = kernel_shape(NPU2, "bf16", "bf16", (8, 8, 8), True)
    once = kernel_shape(NPU2, "bf16", "bf16", (8, 8, 8), True, convert_once=True)
    step_emulated = rho * float(kernel_cycles(p, emulated, t_ma, k, n))
    return step_emulated, rho * float(kernel_cycles(p, once, t_ma, k, n)) + float(b_conversion_cycles(once, k, n))


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 12), st.integers(2, 24), st.integers(2, 12), st.sampled_from([1, 2, 4]))
def test_the_model_says_converting_once_is_faster(mi: int, ki: int, ni: int, rho: int) -> None:
    """Wherever each converted tile serves two blocks or more (T_MA and n of 32 or more) over two
    k-steps or more: the reason it is the default wherever it builds. The model counts both
    conversions (A per call, B per k-step) in the kernel's own loop (issue 20 item 4)."""
    step_emulated, step_once = _steps(16 * mi, 8 * ki, 16 * ni, rho)
    assert step_once < step_emulated


def test_converting_once_without_reuse_is_not_faster():
    """One 16 x 16 block and one k-step: every converted tile is used once, as the emulation uses
    it, and the convert-once kernel also pays its cluster's prolog and epilog at one vmac per cycle."""
    step_emulated, step_once = _steps(16, 8, 16, 1)
    assert step_once >= step_emulated
