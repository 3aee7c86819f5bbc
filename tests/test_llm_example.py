"""Issue 35 item 3: scripts/llm_mlp.py, the worked example, runs in `make test` (in process, about 15 s here) and
prints its errors and PREDICTED times: a Llama-style MLP block from a GGUF file it writes, simulated at a decode
and a prefill shape on npu1 and npu2, bit-exact against our reference, compared with the float64 chain of the
format's own weights; the model's time per token at Llama-3.2-1B's size."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "llm_mlp.py"


def _script():
    spec = importlib.util.spec_from_file_location("llm_mlp", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_mlp_example_runs_and_prints_its_errors_and_predicted_times(tmp_path, capsys):
    assert _script().main(["--out-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "llama_mlp_q4_0.gguf").exists()
    runs = [line for line in out.splitlines() if "block Frobenius" in line]
    assert len(runs) == 6  # npu1, npu2's two datapaths; decode and prefill each
    for line in runs:
        assert line.rstrip().endswith("3 of 3 bit-exact against our reference"), line
        errors = [float(x) for x in re.findall(r"(\d+\.\d+)%", line)]
        assert len(errors) == 4  # the block, then gate+silu, up, down
        if "bfp16 datapath" not in line:  # plain bf16 (npu1, npu2 opted in): the 1% per projection
            assert max(errors[1:]) < 1.0, line
    assert any("decode M = 1" in line and "(decode)" in line for line in runs)
    assert any("prefill M = 64" in line for line in runs)
    predicted = [line for line in out.splitlines() if line.strip().startswith("PREDICTED")]
    for dev in ("npu1", "npu2"):
        for what in ("decode M = 1", "prefill M = 512"):
            assert any(line.strip().startswith(f"PREDICTED {dev}") and what in line and "us per token" in line
                       for line in predicted), (dev, what)
    assert "nothing measured" in out and "Llama-3.2-1B" in out
