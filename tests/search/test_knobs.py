"""search/knobs.py: the discrete knobs as one declared list. The variants of a request are exactly what its
open options imply (every combination of the open knobs' values the rules allow), pinning an option removes
its knob, each variant writes its values into the config, and choose picks the fastest predicted variant."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gemm_gen.design.serve import check
from gemm_gen.facts.errors import GemmGenError
from gemm_gen.model.params import load
from gemm_gen.search import KNOBS, Variant, choose, open_config, variants
from gemm_gen.search.choosing import _predicted_s, _tiled
from gemm_gen.search.knobs import open_knobs
from gemm_gen.spec.request import B_PACKS, MAPPINGS, ROWS, Options, Pins, Problem, Request
from gemm_gen.spec.rules import array

W, D, S = MAPPINGS  # whole-array, decode, decode-split
BF16 = Options("npu2", "bf16", "bf16")  # npu2 bf16 on the bfp16 datapath: the kernel is open
I8 = Options("npu2", "i8", "i16")
BFP16_B = Options("npu2", "bf16", "bf16", dtype_b="bfp16", emulate_bf16_with_bfp16=True)
PREFILL, DECODE = Problem(512, 512, 512), Problem(1, 512, 512)


def listed(options: Options, size: Problem, pins: Pins | None = None) -> tuple[Variant, ...]:
    pins = pins or Pins()
    return variants(open_config(Request(options, size, pins)), pins)


def test_each_knob_takes_its_values_from_its_option_row():
    for knob in (k for k in KNOBS if not k.with_tiles):  # the task span is weighed per tiling, by the tile search
        row = ROWS[knob.option]
        assert knob.values == (row.choices if row.choices is not None else (False, True))
    assert {k.name for k in KNOBS} == {"convert_once", "mapping", "b_pack", "share_l1", "task_span"}


@pytest.mark.parametrize("options,size,expected", [
    # nothing open: one variant, the options' own
    (I8, PREFILL, (Variant(),)),
    # npu2 bf16: the emulated kernel, then the convert-once one
    (BF16, PREFILL, (Variant(convert_once=False), Variant(convert_once=True))),
    # a decode-shaped i8 call: the three mappings; an i8 B has one packing on the whole array and in decode, both in
    # the split placement (every core a slice of N: spec/rules/decode_split.py)
    (I8, DECODE, (Variant(mapping=W), Variant(mapping=D), Variant(mapping=S, b_pack="tiles"),
                  Variant(mapping=S, b_pack="strips"))),
], ids=["nothing-open", "kernel", "decode"])
def test_the_variants_are_what_the_open_options_imply(options, size, expected):
    assert listed(options, size) == expected


def test_a_bfp16_b_weighs_both_packings_on_every_mapping():
    got = listed(replace(BFP16_B, dtype_in="bfp16", dtype_out="bfp16", dtype_b=None,
                         emulate_bf16_with_bfp16=None), DECODE)
    assert got == tuple(Variant(mapping=m, b_pack=p) for m in MAPPINGS for p in B_PACKS)


@pytest.mark.parametrize("pin,gone", [
    ({"convert_once": True}, "convert_once"),
    ({"rows": 1}, "mapping"),
    ({"b_pack": "strips"}, "b_pack"),
], ids=["kernel", "mapping", "packing"])
def test_pinning_an_option_removes_its_knob(pin, gone):
    options = Options("npu2", "bfp16", "bfp16") if gone == "b_pack" else BF16
    size = DECODE if gone != "convert_once" else PREFILL
    before, after = listed(options, size), listed(replace(options, **pin), size)
    assert any(getattr(v, gone) is not None for v in before)
    assert all(getattr(v, gone) is None for v in after) and after
    open_before = {k.name for k in open_knobs(open_config(Request(options, size)), Pins())}
    open_after = {k.name for k in open_knobs(open_config(Request(replace(options, **pin), size)), Pins())}
    assert open_before - open_after == {gone}


def test_given_columns_leave_out_the_split_placement_only():
    got = listed(replace(I8, cols=4), DECODE)
    assert got == (Variant(mapping=W), Variant(mapping=D))


def test_one_design_for_several_sizes_keeps_the_default_packing():
    pins = Pins(sizes=(Problem(512, 512, 512), Problem(256, 512, 512)))
    options = Options("npu2", "bfp16", "bfp16")
    assert listed(options, PREFILL) == (Variant(b_pack="tiles"), Variant(b_pack="strips"))
    assert listed(options, PREFILL, pins) == (Variant(),)


def test_a_variant_writes_its_values_into_the_config():
    base = open_config(Request(Options("npu2", "bfp16", "bfp16"), DECODE))
    for v in variants(base, Pins()):
        c = v.apply(base)
        assert array.mapping_of(c.dev, c.array.rows, c.array.cols) == v.mapping
        assert c.layout.b_pack == v.b_pack and c.options.b_pack == v.b_pack


def test_choose_takes_the_fastest_variant_and_names_its_knobs():
    """Each variant with its own tiles (pinned here, so each is cheap): the chosen design is the fastest
    predicted valid one, the first of equals, and `filled` names the knobs its variant set."""
    pins, p = Pins(m=16, k=64, n=64), load()
    req = Request(I8, DECODE, pins)
    base = open_config(req)
    times = []
    for v in variants(base, pins):
        try:
            times.append((_predicted_s(check(_tiled(v.apply(base), pins, p)), pins, p), v))
        except GemmGenError:  # a variant the rules refuse drops out
            continue
    best = min(times, key=lambda tv: tv[0])[1]
    chosen = choose(req, params=p)
    c = chosen.config
    assert array.mapping_of(c.dev, c.array.rows, c.array.cols) == best.mapping
    assert "mapping" in chosen.filled and ("b_pack" in chosen.filled) is (best.b_pack is not None)
