"""A Llama-style MLP block, y = down(silu(gate(x)) * up(x)), from a GGUF file of Q4_0 weights this script
writes (random weights, quantized by gguf-py's own Q4_0), run through the simulator at a decode and a prefill
shape on npu1 and npu2 (small dims, so it is quick), each output compared with the float64 reference of the
same dequantized weights (the format's own rule); then the model's PREDICTED time per token of the block at
Llama-3.2-1B's size (hidden 2048, intermediate 8192, Q4_0: group 32) on npu1 and npu2.

    .venv/bin/python scripts/llm_mlp.py [--hidden 256] [--intermediate 512] [--out-dir DIR]

Every time printed is PREDICTED by gemm_gen's model (docs/model.md), nothing is measured. The SiLU and the
gate * up product run on the host in NumPy (the operator's fused epilogue does not take int4 weights yet);
Linear (gemm_gen/app/linear.py) applies the SiLU to the gate's C and says so.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gemm_gen.app.linear import LAYER_BOUND, Linear, LinearPlan  # noqa: E402
from gemm_gen.app.operands import bf16_rne  # noqa: E402
from gemm_gen.facts.accuracy import percent  # noqa: E402
from gemm_gen.facts.epilogue import silu_ref  # noqa: E402
from gemm_gen.llm import load_gguf  # noqa: E402

NAMES = ("blk.0.ffn_gate.weight", "blk.0.ffn_up.weight", "blk.0.ffn_down.weight")  # llama.cpp's tensor names
LLAMA_3_2_1B = (2048, 8192)  # hidden, intermediate (Llama-3.2-1B's config.json)
SHAPES = {"decode": 1, "prefill": 64}
# npu2's two bf16 datapaths: a Linear's default, plain bf16 (about 0.3% per layer, within the issue's 1%), and the
# bfp16 datapath it runs when asked (emulate_bf16_with_bfp16=True: faster, PREDICTED; x and the dequantized weights
# quantized to bfp16 blocks, about 0.9% per layer and past 1% at worst); npu1 has plain bf16 only
BFP16 = {"emulate_bf16_with_bfp16": True}
RUNS = (("npu1", {}), ("npu2", {}), ("npu2", BFP16))
DATAPATH = {False: " (plain bf16, the default)", True: " (bfp16 datapath, emulate_bf16_with_bfp16=True)"}
BLOCK_TARGET = "the float64 chain down(silu(x @ W_gate) * (x @ W_up)) from x as given (float32), no rounding in it"
PREFILL_TOKENS = 512  # the prefill call whose time per token is predicted


def write_gguf(path: Path, hidden: int, intermediate: int, seed: int = 0) -> None:
    """Random gate, up and down weights as llama.cpp lays them out (ne = [inputs, outputs]: NumPy rows are the
    outputs), quantized to Q4_0 by gguf-py and written by its GGUFWriter."""
    import gguf  # the [llm] extra

    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(1)
    for name, (rows, cols) in zip(NAMES, ((intermediate, hidden), (intermediate, hidden), (hidden, intermediate))):
        w = (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)
        writer.add_tensor(name, gguf.quants.quantize(w, gguf.GGMLQuantizationType.Q4_0),
                          raw_dtype=gguf.GGMLQuantizationType.Q4_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def frobenius(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.linalg.norm(got.astype(np.float64) - want)) / (float(np.linalg.norm(want)) or 1.0)


def interfaces_only(x: np.ndarray, exact: list[np.ndarray]) -> np.ndarray:
    """The block with every projection exact (float64, the format's weights) but every value it hands on rounded to
    bf16 as the simulated block rounds it: x, silu(gate), up, h = silu(gate) * up and y."""
    xb = bf16_rne(x.astype(np.float64)).astype(np.float64)
    g = bf16_rne(silu_ref(xb @ exact[0])).astype(np.float64)
    u = bf16_rne(xb @ exact[1]).astype(np.float64)
    h = bf16_rne(g * u).astype(np.float64)
    return bf16_rne(h @ exact[2]).astype(np.float64)


def run_block(path: Path, device: str, hidden: int, seed: int = 1, **options: object) -> list[str]:
    """The block on the simulator at each of SHAPES: every projection's error against float64 act(input @ W) of its
    own input, and the block's against the float64 chain from x (BLOCK_TARGET). `options`: the Linears' (a
    datapath)."""
    layers = load_gguf(path, list(NAMES))
    wg, wu, wd = (layers[n] for n in NAMES)
    most = max(SHAPES.values())
    gate = Linear(wg, activation="silu", device=device, max_tokens=most, **options)
    up = Linear(wu, plan=gate.plan)  # the same shape: gate's designs, not built again
    down = Linear(wd, device=device, max_tokens=most, **options)
    exact = [w.exact() for w in (wg, wu, wd)]
    rng = np.random.default_rng(seed)
    lines = []
    for shape, M in SHAPES.items():
        x = rng.standard_normal((M, hidden)).astype(np.float32)
        g = gate.simulate(x, report=True)
        errs = {"gate+silu": gate.last_call}
        u = up.simulate(x, report=True)
        errs["up"] = up.last_call
        h = bf16_rne(g.astype(np.float64) * u.astype(np.float64))  # gate * up in NumPy, rounded once to bf16
        y = down.simulate(h, report=True)
        errs["down"] = down.last_call
        same = sum(np.array_equal(out.view(np.uint16), lin.reference(inp).view(np.uint16))
                   for out, lin, inp in ((g, gate, x), (u, up, x), (y, down, h)))
        x64 = x.astype(np.float64)
        want = (silu_ref(x64 @ exact[0]) * (x64 @ exact[1])) @ exact[2]
        parts = ", ".join(f"{name} {percent(c.accuracy.frobenius_rel)} ({'+'.join(c.tiers)})"
                          for name, c in errs.items() if c is not None and c.accuracy is not None)
        label = f"{device}{DATAPATH[bool(options)] if device == 'npu2' else ''}"
        lines.append(f"{label} {shape} M = {M}: per projection {parts}; {same} of 3 bit-exact against our "
                     f"reference; block {percent(frobenius(y, want))} (bf16 hand-overs alone "
                     f"{percent(frobenius(interfaces_only(x, exact), want))})")
    return lines


def predicted_per_token(device: str, hidden: int, intermediate: int, **options: object) -> list[str]:
    """The model's time per token of the block: decode (one token per call) and a PREFILL_TOKENS-token prefill,
    each projection on the design its Linear would route the call to (group 32, no zero points: Q4_0)."""
    shapes = {"gate": (hidden, intermediate), "up": (hidden, intermediate), "down": (intermediate, hidden)}
    by_shape = {shape: LinearPlan(device, *shape, 32, False, max_tokens=2048, **options)
                for shape in set(shapes.values())}  # gate and up share one shape, so one set of designs
    plans = {name: by_shape[shape] for name, shape in shapes.items()}
    label = f"{device}{DATAPATH[bool(options)] if device == 'npu2' else ''}"
    lines = []
    for what, M in (("decode", 1), ("prefill", PREFILL_TOKENS)):
        total = low = high = 0.0
        parts = []
        for name, plan in plans.items():
            route = plan.route(M)
            t = route.predicted_us[route.tier]
            slow, fast = plan.predicted_range_us(route.tier, M)
            total, low, high = total + t, low + fast, high + slow
            parts.append(f"{name} {t:,.1f} us ({route.tier})")
        lines.append(f"PREDICTED {label} {what} M = {M}: {total / M:,.1f} us per token ({low / M:,.1f} to "
                     f"{high / M:,.1f} over the model constants' spreads); {', '.join(parts)}")
    switch = [f"M = {m}: {plans['gate'].route(m).tier}" for m in (1, 16, 17, 64, 65, 2048)]
    lines.append(f"PREDICTED {label} gate routes: {'; '.join(switch)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--intermediate", type=int, default=512)
    ap.add_argument("--out-dir", type=Path, default=None, help="where the GGUF file goes (default: a temporary one)")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = (a.out_dir or Path(tmp)) / "llama_mlp_q4_0.gguf"
        write_gguf(path, a.hidden, a.intermediate)
        print(f"wrote {path}: gate, up ({a.intermediate} x {a.hidden}) and down ({a.hidden} x {a.intermediate}) "
              "Q4_0 weights (gguf-py)")
        for w in load_gguf(path, list(NAMES)).values():
            print(f"  {w.text()}")
        print("simulated; every error Frobenius, against float64 with the format's own weights (gguf-py's "
              "dequantization):")
        print(f"  per projection: C against float64 act(input @ W), its own input as given ({LAYER_BOUND:.0%} per "
              "layer on the default datapaths)")
        print(f"  block: y against {BLOCK_TARGET}; it holds x's rounding to bf16, the three projections' errors and "
              "the bf16 roundings of silu(gate), up and h = silu(gate) * up between them (SiLU and the product on "
              "the host, float64, rounded once)")
        print("  bf16 hand-overs alone: that chain with each projection exact (float64) and only x, silu(gate), up, "
              "h and y rounded to bf16: what any bf16 block loses, whatever its GEMMs")
        for device, options in RUNS:
            for line in run_block(path, device, a.hidden, **options):
                print(f"  {line}")
    hidden, inter = LLAMA_3_2_1B
    print(f"the model at Llama-3.2-1B's MLP (hidden {hidden}, intermediate {inter}, Q4_0), nothing measured:")
    for device, options in RUNS:
        for line in predicted_per_token(device, hidden, inter, **options):
            print(f"  {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
