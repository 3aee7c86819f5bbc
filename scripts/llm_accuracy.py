"""What a language model's int4 layer loses on each device and datapath, and where it comes from (docs/llm_weights.md
section 4).

    .venv/bin/python scripts/llm_accuracy.py      # about 2 minutes on a busy 2-core machine

For each of four seeds, one file of each format written with the format's own package by the tests' writers
(tests/llm/test_llm_formats.py: gguf-py's Q4_0 of Gaussian weights; AutoAWQ's and AutoGPTQ's packing with fp16 scales
and zero points; an ONNX MatMulNBits node, block 32, fp16 scales, zero points), K = 1024 inputs, N = 256 outputs,
no bias. Each runs at M = 1 (the decode design) and M = 64 on npu1, npu2's default (plain bf16) and npu2's bfp16
datapath (emulate_bf16_with_bfp16=True), x standard normal bf16 values (no loss of x's own).

Printed per run: the Frobenius error of C against float64 x @ W with W by the format's own rule, and its steps,
from Linear.loss_budget (C by our reference; the first seed's runs are simulated too and their report checked
against it), each measured by gemm_gen.facts.accuracy.measure against the exact product of its own operands: the
scales' rounding to bf16, the weights' in the datapath (bf16, or bfp16 blocks of 8 along K), x's bfp16 blocks
(bfp16 datapath only) and C's (fp32 sums, one rounding to bf16). Then each datapath's least, mean and most error
(the least and most are the figures Linear states: linear.DATAPATH_LOSS) and its steps' means.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the tests' writers: the table is of the files the tests check

import test_llm_formats as writers  # noqa: E402

from gemm_gen.app.linear import LAYER_BOUND, Linear  # noqa: E402
from gemm_gen.facts.accuracy import percent  # noqa: E402
from gemm_gen.llm import load_awq, load_gguf, load_gptq, load_onnx  # noqa: E402
from gemm_gen.llm.weights import LoadedWeights  # noqa: E402

K, N = 1024, 256
SHAPES = (1, 64)
SEEDS = (35, 36, 37, 38)  # one file of each format per seed, and x
RUNS = (("npu1", {}), ("npu2", {}), ("npu2", {"emulate_bf16_with_bfp16": True}))  # npu2's default: plain bf16


@dataclass(frozen=True)
class Row:
    """One run: its format, device, datapath, M, C's error (Linear's report) and its steps (loss_budget)."""

    kind: str
    seed: int
    device: str
    bfp16: bool
    M: int
    frobenius: float
    steps: tuple[tuple[str, float], ...]

    def text(self) -> str:
        path = "bfp16 datapath" if self.bfp16 else "plain bf16"
        steps = ", ".join(f"{name} {percent(err)}" for name, err in self.steps)
        return (f"{self.kind:5s} seed {self.seed} {self.device} {path:14s} M = {self.M:2d}: "
                f"{percent(self.frobenius)} ({steps})")


def layers(tmp: Path, seed: int) -> dict[str, LoadedWeights]:
    """One K x N layer of each format, written by the tests' writers and read by our loaders."""
    rng = np.random.default_rng(seed)
    writers.RNG = np.random.default_rng(seed)  # the AWQ and GPTQ writers draw from the test module's generator
    writers.write_gguf(tmp / "w.gguf", {"w": (rng.standard_normal((N, K)).astype(np.float32), writers.Q4_0)})
    blocks = K // 32
    writers.write_matmulnbits(tmp / "m.onnx", rng.integers(0, 16, (N, K)).astype(np.uint8),
                              (rng.random((N, blocks)) * 0.1 + 0.01).astype(np.float16), 32,
                              rng.integers(0, 16, (N, blocks)).astype(np.uint8))
    out = {"gguf": load_gguf(tmp / "w.gguf")["w"],
           "awq": load_awq(writers.awq_tensors(K, N)[0], "model.layers.0.mlp.up_proj"),
           "gptq": load_gptq(writers.gptq_tensors(K, N)[0], "layer"),
           "onnx": load_onnx(tmp / "m.onnx")["fc"]}
    # C alone: a bias adds the same to C and to its target, and is no part of the layer's error
    return {k: LoadedWeights(w.name, w.source, w.quant, w.format_scales, w.format_group, None, w.notes)
            for k, w in out.items()}


def measure_all(seeds: tuple[int, ...] = SEEDS) -> list[Row]:
    """Every run's error and steps (Linear.loss_budget, of C by our reference); the first seed's runs simulated too,
    their report checked to equal the budget's total (simulate equals the reference bit for bit: the tests)."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            for kind, w in layers(Path(tmp), seed).items():
                for device, options in RUNS:
                    lin = Linear(w, device=device, max_tokens=max(SHAPES), **options)
                    for M in SHAPES:
                        x = np.random.default_rng(seed + M).standard_normal((M, K)).astype(ml_dtypes.bfloat16)
                        budget = lin.loss_budget(x)
                        if seed == seeds[0]:
                            lin.simulate(x, report=True)
                            acc = lin.last_call.accuracy if lin.last_call is not None else None
                            assert acc is not None and np.isclose(acc.frobenius_rel, budget.total.frobenius_rel,
                                                                  rtol=1e-12, atol=0)
                        rows.append(Row(kind, seed, device, lin.plan.bfp16, M, budget.total.frobenius_rel,
                                        tuple((name, a.frobenius_rel) for name, a in budget.steps)))
    return rows


def ranges(rows: list[Row]) -> dict[bool, tuple[float, float]]:
    """Each datapath's least and most error over the runs (bfp16 datapath? -> (least, most))."""
    out = {}
    for bfp16 in (False, True):
        errs = [r.frobenius for r in rows if r.bfp16 == bfp16]
        out[bfp16] = (min(errs), max(errs))
    return out


def summary(rows: list[Row], bfp16: bool) -> str:
    """A datapath's errors over the runs: least, mean, most, the runs past LAYER_BOUND, and each step's mean."""
    mine = [r for r in rows if r.bfp16 == bfp16]
    errs = np.array([r.frobenius for r in mine])
    names = list(dict.fromkeys(name for r in mine for name, _ in r.steps))
    steps = ", ".join(f"{name} {percent(float(np.mean([dict(r.steps)[name] for r in mine])))}" for name in names)
    return (f"{'bfp16 datapath' if bfp16 else 'plain bf16'} ({len(mine)} runs): least {percent(float(errs.min()))}, "
            f"mean {percent(float(errs.mean()))}, most {percent(float(errs.max()))}; "
            f"{int(np.count_nonzero(errs >= LAYER_BOUND))} past {LAYER_BOUND:.0%}; mean steps: {steps}")


def main() -> int:
    rows = measure_all()
    print(f"C against float64 x @ W (W by the format's rule), K = {K}, N = {N}, x N(0, 1) bf16; its steps:")
    for row in rows:
        print(f"  {row.text()}")
    for bfp16 in (False, True):
        print(summary(rows, bfp16))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
