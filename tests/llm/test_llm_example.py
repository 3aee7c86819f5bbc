"""Issue 35 item 3: scripts/llm_mlp.py, the worked example, runs in `make test` (in process, about 25 s here) and
prints its errors and PREDICTED times: a Llama-style MLP block from a GGUF file it writes, simulated at a decode
and a prefill shape on npu1, npu2's default (plain bf16) and npu2's bfp16 datapath, bit-exact against our
reference, each projection within 1% of float64 on the default datapaths, the block compared with the float64
chain of the format's own weights; the model's time per token at Llama-3.2-1B's size."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from gemm_gen.app.linear import LAYER_BOUND

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "llm_mlp.py"


def _script():
    spec = importlib.util.spec_from_file_location("llm_mlp", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_mlp_example_runs_and_prints_its_errors_and_predicted_times(tmp_path, capsys):
    assert _script().main(["--out-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "llama_mlp_q4_0.gguf").exists()
    runs = [line for line in out.splitlines() if "per projection gate+silu" in line]
    assert len(runs) == 6  # npu1, npu2's default and its bfp16 datapath; decode and prefill each
    defaults = [line for line in runs if "bfp16 datapath" not in line]
    assert len(defaults) == 4 and all("npu2 (plain bf16, the default)" in line for line in defaults
                                      if "npu2" in line)
    for line in runs:
        assert "3 of 3 bit-exact against our reference" in line, line
        errors = [float(x) for x in re.findall(r"(\d+\.\d+)%", line)]
        assert len(errors) == 5  # gate+silu, up, down, then the block and its bf16 hand-overs alone
        layers, block, handovers = errors[:3], errors[3], errors[4]
        assert handovers < block  # the chain of exact projections with bf16 hand-overs loses less than the block
        if line in defaults:  # the 1% per projection on each device's default datapath
            assert max(layers) < 100 * LAYER_BOUND, line
    # what the block is measured against, said where its figure is printed
    assert "block: y against the float64 chain down(silu(x @ W_gate) * (x @ W_up)) from x as given" in out
    assert "bf16 hand-overs alone" in out
    assert any("decode M = 1" in line and "(decode)" in line for line in runs)
    assert any("prefill M = 64" in line for line in runs)
    predicted = [line.strip() for line in out.splitlines() if line.strip().startswith("PREDICTED")]
    for label in ("npu1", "npu2 (plain bf16, the default)", "npu2 (bfp16 datapath, emulate_bf16_with_bfp16=True)"):
        for what in ("decode M = 1", "prefill M = 512"):
            assert any(line.startswith(f"PREDICTED {label} {what}") and "us per token" in line
                       for line in predicted), (label, what)
    assert "nothing measured" in out and "Llama-3.2-1B" in out
