"""The bfp16 block kernels are priced from their own loop (issue 20 item 4): spec/rules/block_loop.py's
structure is an input of the model, a constant fitted on a published kernel prices only kernels of
its structure, and mlir-aie PR #3650's published II check the flat loop."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from gemm_gen.facts.devices import device
from gemm_gen.model import kernel as km
from gemm_gen.model.fit import calibrate, paper
from gemm_gen.model.params import load
from gemm_gen.spec.rules import block_loop as bl

NPU2 = device("npu2")
FACTS = json.loads((Path(__file__).parents[1] / "data" / "mlir_aie_atb_peano.json").read_text())


def _ks(preset: str = "config1", loop: bl.BlockLoop | None = None, **kw: object) -> km.KernelShape:
    dtype_in, dtype_b, dtype_out, acc = paper.ATB_TYPES[preset]
    return km.kernel_shape(NPU2, dtype_in, dtype_out, (8, 8, 8), False, dtype_b, acc, block_loop=loop,
                           **kw)  # type: ignore[arg-type]


def test_peano_ii_are_the_facts_file_s():
    """One fact, two readers: the II the model is fitted and checked on are the JSON's."""
    for pk in paper.PEANO_ATB:
        kernel = FACTS["configs"][pk.preset]["kernel"]
        tile = FACTS["configs"][pk.preset]["tile"]
        assert pk.ii == kernel["measured_II"] and kernel["stages"] == pk.loop.stages
        assert (pk.t_ma, pk.n) == (tile["t_ma"], tile["n"]) and pk.k == tile["k"]


def test_checked_peano_kernels_are_within_5_percent():
    """Configs 2 and 3 fix nothing: the flat loop's overhead comes from config 1 alone."""
    p = load()
    assert p.flat_block_overhead == calibrate.fit_flat_block_overhead(p, 0)
    for pk in paper.PEANO_ATB[1:]:
        assert abs(calibrate.peano_block_cycles(p, pk) / pk.ii - 1) < 0.05, pk


def test_the_loop_is_an_input_more_overlap_is_cheaper():
    """The same block in the three structures: the flat loop hides its prolog and epilog, the
    per-cluster loop pays them, and none of them depends on another's constant."""
    p = load()
    none = float(km.block_cycles(p, _ks(loop=bl.CLUSTER_LOOP), 64))
    flat = float(km.block_cycles(p, _ks(loop=bl.FLAT_LOOP), 64))
    assert flat < none
    assert none == float(km.block_cycles(p.with_(bfp16_overhead=99.0, flat_block_overhead=99.0),
                                         _ks(loop=bl.CLUSTER_LOOP), 64))
    assert flat == float(km.block_cycles(p.with_(bfp16_overhead=99.0), _ks(loop=bl.FLAT_LOOP), 64))
    chess = _ks(loop=paper.ATB_CHESS_LOOP)
    assert float(km.block_cycles(p.with_(bfp16_overhead=99.0), chess, 64)) == 32 + 99.0


def test_epsilon_prices_no_kernel_of_ours():
    """atb Table 1's epsilon is the chess kernel's: no loop of ours moves with it."""
    p = load()
    for lp in (bl.TEMPLATE_LOOP, bl.CLUSTER_LOOP, bl.FLAT_LOOP):
        for preset in paper.ATB_TYPES:
            ks = _ks(preset, lp)
            a = km.kernel_cycles(p, ks, np.array(32), np.array(64), np.array(128))
            b = km.kernel_cycles(p.with_(bfp16_overhead=p.bfp16_overhead * 3), ks, np.array(32), np.array(64),
                                 np.array(128))
            assert float(a) == float(b), (lp.name, preset)


def test_block_cycles_follow_the_loop_s_counts():
    """Twice the macs per k-step doubles a flat block's vector time; more pops make a load-bound
    block slower; a bfp16 C adds its VMUL.f widening."""
    p = load()
    base = bl.FLAT_LOOP
    o = p.flat_block_overhead
    assert float(km.block_cycles(p, _ks(loop=base), 64)) == 32 + o
    assert float(km.block_cycles(p, _ks(loop=dataclasses.replace(base, macs=8)), 64)) == 64 + o
    heavy = dataclasses.replace(base, a_pops=8, b_pops=8)  # 16 x 72 B per k-step over two 64-B load units
    assert float(km.block_cycles(p, _ks(loop=heavy), 64)) == (8 * 16 * 72 / 64 + 8) / 2 + o
    assert float(km.block_cycles(p, _ks("config2", base), 64)) == 32 + 4 * km.BFP16_C_WIDEN_CYCLES + o


def test_conversions_are_counted_per_call():
    """Config 1 converts its bf16 A every call: exactly its tiles' conversions over config 3's call
    of the same shape (both bf16 C); the flat loop adds its fill once per entry."""
    p = load()
    for lp in (bl.CLUSTER_LOOP, bl.FLAT_LOOP):
        c1 = float(km.kernel_cycles(p, _ks("config1", lp), np.array(32), np.array(64), np.array(128)))
        c3 = float(km.kernel_cycles(p, _ks("config3", lp), np.array(32), np.array(64), np.array(128)))
        assert c1 - c3 == (32 // 8) * (64 // 8) * km.convert_tile_cycles(_ks("config1", lp))
    flat = _ks("config3", bl.FLAT_LOOP)
    per_block = float(km.block_cycles(p, flat, 64))
    assert float(km.kernel_cycles(p, flat, np.array(32), np.array(64), np.array(128))) == (16 + 1) * per_block
    row = _ks("config3", dataclasses.replace(bl.FLAT_LOOP, entries="row"))
    assert float(km.kernel_cycles(p, row, np.array(32), np.array(64), np.array(128))) == (16 + 2) * per_block


def test_our_kernel_is_priced_by_the_template_s_loop():
    p = load()
    ks = _ks("config1")
    assert ks.loop == bl.TEMPLATE_LOOP
    assert float(km.block_cycles(p, ks, 64)) == float(km.block_cycles(p, _ks("config1", bl.TEMPLATE_LOOP), 64))


def test_block_loop_refuses_unknown_structures():
    with pytest.raises(ValueError):
        bl.BlockLoop("x", "overlapped")
    with pytest.raises(ValueError):
        bl.BlockLoop("x", "flat", entries="tile")
