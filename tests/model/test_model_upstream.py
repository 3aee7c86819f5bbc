"""Our kernels against the published kernels they resemble (issue 20 item 4): the comparison
docs/model.md's per-variant table and `gemm-gen predict` share (gemm_gen/model/fit/upstream.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gemm_gen.app.cli import main
from gemm_gen.facts.devices import device
from gemm_gen.model.fit import paper, upstream
from gemm_gen.model.kernel import kernel_shape
from gemm_gen.model.params import load
from gemm_gen.spec.config import PAPER_TILES

DOC = Path(__file__).resolve().parents[2] / "docs" / "model.md"


def predict(capsys, *args: str) -> tuple[dict, str]:
    assert main(["predict", *args, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert main(["predict", *args]) == 0
    return info, capsys.readouterr().out


def test_versus_names_slower_at_par_and_faster():
    assert upstream.versus(99.0, 100.0).verdict == "at par" and upstream.versus(101.0, 100.0).verdict == "at par"
    assert upstream.versus(98.9, 100.0).verdict == "slower"
    assert upstream.versus(101.1, 100.0).verdict == "faster"
    assert upstream.versus(93.0, 100.0).words() == "ours slower than upstream (x0.93)"
    assert upstream.versus(104.0, 100.0).words() == "ours faster than upstream (x1.04)"
    assert upstream.versus(100.0, 100.0).words() == "at par (x1.00)"


def test_the_published_kernels_each_variant_resembles():
    """Each ATB preset's kernel resembles PR #3650's kernel of that preset; the convert-once kernel
    only has the nearest (config 1, no published kernel converts B); scalar kernels resemble the
    Striking Table 1 kernel of their types and datapath, and types none has get None."""
    npu1, npu2 = device("npu1"), device("npu2")
    for preset, (a, b, c, acc) in paper.ATB_TYPES.items():
        up = upstream.resembled(kernel_shape(npu2, a, c, (8, 8, 8), False, b, acc))
        assert up is not None and up.same_kernel and up.kernel.startswith(f"mlir-aie #3650 {preset}:"), preset
    once = upstream.resembled(kernel_shape(npu2, "bf16", "bf16", (8, 8, 8), True, acc="f32", convert_once=True))
    assert once is not None and not once.same_kernel and "config1" in once.kernel
    i8 = upstream.resembled(kernel_shape(npu2, "i8", "i8", npu2.mmul_shape("i8"), False))
    assert i8 is not None and i8.same_kernel and i8.tile == (64, 232, 64) and i8.published == 450.6
    assert upstream.resembled(kernel_shape(npu1, "i16", "i32", npu1.mmul_shape("i16"), False)) is None
    plain = kernel_shape(npu2, "bf16", "bf16", npu2.mmul_shape("bf16", False), False)  # Striking's ran via bfp16
    assert upstream.resembled(plain) is None


def test_predict_says_where_ours_is_slower(capsys):
    """Our 2x2 kernel with only its K loop pipelined, against the Striking kernel read as 2x2
    jk-flat at the same tile and types: predicted slower, and predict says so in text and JSON."""
    args = ["--dev", "npu1", "-M", "256", "-K", "256", "-N", "256", "-m", "64", "-k", "64", "-n", "64",
            "--k-mt", "64", "--dtype_in", "i8", "--dtype_out", "i8", "--acc", "out", "--expansion", "2x2",
            "--kernel-loops", "k-pipelined"]
    info, text = predict(capsys, *args)
    up = info["upstream"]
    assert up["predicted"] is True and up["verdict"] == "slower" and up["ratio"] < 0.99 and up["same_kernel"]
    assert up["ours_macs_per_cycle"] == pytest.approx(info["core_macs_per_cycle"])
    assert "Striking Table 1 kernel npu1 i8-i8" in up["kernel"] and up["published_macs_per_cycle"] == 233.0
    assert "ours slower than upstream (x0.90)" in text and "PREDICTED at 64x64x64" in text


def test_the_published_structure_itself_is_at_par(capsys):
    """Priced with the published kernel's own structure (2x2 jk-flat, C in its output type, chess: Peano
    cannot pipeline a 2x2 jk-flat body this long), ours equals it: the comparison measures structure only."""
    args = ["--dev", "npu1", "-M", "256", "-K", "928", "-N", "256", "-m", "64", "-k", "232", "-n", "64",
            "--k-mt", "232", "--dtype_in", "i8", "--dtype_out", "i8", "--acc", "out", "--expansion", "2x2",
            "--kernel-loops", "jk-flat", "--chess"]
    info, text = predict(capsys, *args)
    assert info["upstream"]["verdict"] == "at par" and info["upstream"]["ratio"] == pytest.approx(1.0)
    assert info["upstream"]["note"] == "" and "at par (x1.00)" in text


def test_a_wider_accumulator_is_named_as_part_of_the_difference(capsys):
    args = ["--dev", "npu2", "-M", "256", "-K", "928", "-N", "512", "-m", "64", "-k", "232", "-n", "64",
            "--k-mt", "232", "--dtype_in", "i8", "--dtype_out", "i8"]  # C rounded once: kept in i32
    info, text = predict(capsys, *args)
    assert "upstream keeps C in i8 between calls (--acc out), ours in i32" in info["upstream"]["note"]
    assert "ours in i32" in text


def test_types_no_published_kernel_has(capsys):
    args = ["--dev", "npu1", "-M", "256", "-K", "256", "-N", "256", "--dtype_in", "i16", "--dtype_out", "i32"]
    info, text = predict(capsys, *args)
    assert info["upstream"] is None and "no published kernel of these types" in text


def test_bfp16_presets_and_convert_once_in_predict(capsys):
    info, text = predict(capsys, "--dev", "npu2", "--preset", "config2", "-M", "3072", "-K", "4096", "-N", "1536")
    assert info["upstream"]["kernel"].startswith("mlir-aie #3650 config2") and info["upstream"]["same_kernel"]
    assert "resembles: mlir-aie #3650 config2" in text
    info, text = predict(capsys, "--dev", "npu2", "-M", "1024", "-K", "1024", "-N", "1024", "--convert-once", "1")
    assert not info["upstream"]["same_kernel"] and "nearest: mlir-aie #3650 config1" in text
    assert "ours includes its B conversion" in info["upstream"]["note"]


@pytest.mark.parametrize("key", list(PAPER_TILES), ids=lambda k: "-".join(k))
def test_predict_and_the_table_give_one_verdict(capsys, key):
    """At the published tile, predict's verdict is the one docs/model.md's per-variant table prints
    for that row (both from upstream.compare)."""
    d, t_in, t_out = key
    emulate = d == "npu2" and t_in == "bf16"
    dev = device(d)
    up = upstream.resembled(kernel_shape(dev, t_in, t_out, dev.mmul_shape(t_in, emulate), emulate))
    assert up is not None
    m, k, n = up.tile
    args = ["--dev", d, "-M", str(4 * m), "-K", str(4 * k), "-N", str(dev.columns * n), "-m", str(m), "-k", str(k),
            "-n", str(n), "--k-mt", str(k), "--dtype_in", t_in, "--dtype_out", t_out, "--acc", "out",
            "--b-col-maj", "1"]
    if emulate:
        args += ["--emulate-bf16-mmul-with-bfp16", "1", "--convert-once", "0", "--stack", "1024"]
    info, _ = predict(capsys, *args)
    label = f"| {d} {t_in}-{t_out}{' (bf16 via bfp16, per mmul)' if emulate else ''} |"
    row = next(line for line in DOC.read_text().splitlines() if line.startswith(label))
    assert row.rstrip(" |").endswith(info["upstream"]["words"]), (row, info["upstream"]["words"])
    assert re.search(rf"\| {m}x{k}x{n}: {info['upstream']['ours_macs_per_cycle']:.1f} \|", row), row


def test_compare_prices_both_sides_at_the_given_tile():
    p, dev = load(), device("npu2")
    ks = kernel_shape(dev, "i8", "i8", dev.mmul_shape("i8"), False)
    a, b = upstream.compare(p, ks, 64, 232, 64), upstream.compare(p, ks, 32, 64, 64)
    assert a is not None and b is not None and a.theirs != b.theirs and a.ours != b.ours
