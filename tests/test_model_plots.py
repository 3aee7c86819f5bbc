"""gemm-gen roofline: both PNG plots are written, readable and labelled as predictions."""

from __future__ import annotations

import json
from pathlib import Path

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
