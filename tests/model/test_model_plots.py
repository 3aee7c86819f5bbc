"""gemm-gen roofline: both PNG plots are written, readable and labelled as predictions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gemm_gen.app.cli import main

PNG = b"\x89PNG\r\n\x1a\n"


def test_roofline_and_heat_map_are_written(capsys, tmp_path):
    code = main(["roofline", "--dev", "npu1", "-M", "1024", "-K", "1024", "-N", "1024", "--dtype_in", "i8",
                 "--dtype_out", "i16", "--b-col-maj", "--out-dir", str(tmp_path), "--max-size", "2048",
                 "--points", "40", "--json"])
    info = json.loads(capsys.readouterr().out)
    assert code == 0 and info["predicted"] is True
    for key in ("roofline", "heatmap"):
        path = Path(info[key]["path"])
        assert path.parent == tmp_path and path.suffix == ".png"
        data = path.read_bytes()
        assert data.startswith(PNG) and len(data) > 20_000
    assert info["roofline"]["points"] == 40 and info["heatmap"]["tilings"] > 100
    assert not list(tmp_path.glob(".*.tmp"))  # written atomically


def test_roofline_text_names_the_files(capsys, tmp_path):
    code = main(["roofline", "--dev", "npu2", "-M", "512", "-K", "512", "-N", "512", "--out-dir", str(tmp_path),
                 "--max-size", "1024", "--points", "10"])
    out = capsys.readouterr().out
    assert code == 0 and out.count("wrote ") == 2 and "predicted" in out
    assert len(list(tmp_path.glob("*.png"))) == 2


@pytest.mark.parametrize("args", [["--dev", "npu1", "-M", "1024", "-K", "1024", "-N", "1024", "--dtype_in", "i8",
                                   "--dtype_out", "i16", "--b-col-maj"],
                                  ["--dev", "npu2", "-M", "2048", "-K", "2048", "-N", "2048", "-m", "64", "-k", "64",
                                   "-n", "64", "--k-mt", "256", "--dtype_in", "i8", "--dtype_out", "i8"]])
def test_the_plots_roofs_are_predicts(capsys, tmp_path, args):
    """One place computes a design's roofs: the plot's compute roof is predict's compute bound, its memory roof
    meets predict's memory bound at the call's arithmetic intensity, and its star is predict's throughput (they
    were the sweep's medians, issue 33 item 7)."""
    assert main(["predict", *args, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert main(["roofline", *args, "--out-dir", str(tmp_path), "--max-size", "4096", "--points", "20", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)["roofline"]
    ai = 2.0 * np.prod(d["problem"]) / sum(v["bytes"] for v in d["dram"].values())
    assert r["call"]["ai"] == pytest.approx(ai, rel=1e-12)
    assert r["compute_roof_tops"] == pytest.approx(d["compute_bound_tops"], rel=1e-12)
    assert r["memory_gbps"] * ai / 1e3 == pytest.approx(d["memory_bound_tops"], rel=1e-12)
    assert r["call"]["tops"] == pytest.approx(d["tops"], rel=1e-12)
