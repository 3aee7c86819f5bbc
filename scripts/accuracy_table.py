"""What each numerics path loses against the exact A @ B, measured through the simulator.

    python scripts/accuracy_table.py          # docs/accuracy.md's table (scripts/readme_figures.py writes it there)

Float paths: A 16 x 4096 and B 4096 x 256 of standard normal values rounded to bf16 (seed 0);
integer paths: 64 x 256 times 256 x 64 uniform over the whole input type (seed 0), where most
sums leave a narrow output type. Each row runs Gemm(...).simulate(A, B, report=True) with the
tuner's design and prints the Frobenius and max relative error against float64 / int64 A @ B, and
how many outputs equal A @ B rounded once (an output whose A @ B leaves the output type, clamped or wrapped, never
does: integer rows also give the share equal to clip(A @ B), what saturation means). The default accumulator (C kept in
fp32 / int32 / int64 across K) and acc='out' (C requantized every k-step, as mlir-aie) side by side.
"""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np

from gemm_gen import Gemm
from gemm_gen.facts.accuracy import percent
from gemm_gen.facts.errors import NumericsWarning

FLOAT_SHAPE = (16, 4096, 256)
INT_SHAPE = (64, 256, 64)
PATHS = [  # (label, Gemm keyword arguments)
    ("npu1 bf16 -> bf16", dict(device="npu1", dtype_in="bf16", dtype_out="bf16")),
    ("npu1 bf16 -> f32", dict(device="npu1", dtype_in="bf16", dtype_out="f32")),
    ("npu2 bf16 -> bf16 (bfp16 datapath, the default)", dict(device="npu2", dtype_in="bf16", dtype_out="bf16")),
    ("npu2 bf16 -> bf16 (plain bf16: emulate_bf16_with_bfp16=False)",
     dict(device="npu2", dtype_in="bf16", dtype_out="bf16", emulate_bf16_with_bfp16=False)),
    ("npu2 bf16 -> f32 (bfp16 datapath)", dict(device="npu2", dtype_in="bf16", dtype_out="f32")),
    ("npu2 bf16 x bfp16 -> bf16 (ATB config1 types)", dict(device="npu2", dtype_in="bf16", dtype_b="bfp16",
                                                          dtype_out="bf16")),
    ("npu2 bfp16 -> bfp16 (ATB config2 types)", dict(device="npu2", dtype_in="bfp16", dtype_out="bfp16")),
    ("npu1 i8 -> i8", dict(device="npu1", dtype_in="i8", dtype_out="i8")),
    ("npu2 i8 -> i16", dict(device="npu2", dtype_in="i8", dtype_out="i16")),
    ("npu1 i16 -> i32", dict(device="npu1", dtype_in="i16", dtype_out="i32")),
    ("npu2 i16 -> i32", dict(device="npu2", dtype_in="i16", dtype_out="i32")),
]


def inputs(dtype_in: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    if dtype_in in ("bf16", "bfp16"):
        M, K, N = FLOAT_SHAPE
        host = ml_dtypes.bfloat16 if dtype_in == "bf16" else np.float32
        return rng.standard_normal((M, K)).astype(host), rng.standard_normal((K, N)).astype(host)
    M, K, N = INT_SHAPE
    info = np.iinfo(np.int8 if dtype_in == "i8" else np.int16)
    return (rng.integers(info.min, info.max + 1, (M, K)).astype(info.dtype),
            rng.integers(info.min, info.max + 1, (K, N)).astype(info.dtype))


def row(label: str, kw: dict[str, object]) -> str:
    a, b = inputs(str(kw["dtype_in"]))
    cells = []
    for acc in (None, "out"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NumericsWarning)  # the table shows what the warning says
            c, r = Gemm(**kw, acc=acc).simulate(a, b, report=True)
        clip = ""
        if np.issubdtype(c.dtype, np.integer):  # C against clip(A @ B): the saturated outputs as meant too
            info = np.iinfo(c.dtype)
            want = np.clip(a.astype(np.int64) @ b.astype(np.int64), info.min, info.max)
            clip = f"; {np.count_nonzero(c == want) / c.size:.1%} equal to clip(A @ B)"
        cells.append(f"{percent(r.frobenius_rel)} / {r.max_rel:.2e} / {r.exact / r.elements:.1%}"
                     + (f" ({r.saturated:,} sat.)" if r.saturated else "") + clip)
    return f"| {label} | {' | '.join(cells)} |"


def activation_row(device: str, activation: str, kw: dict[str, object]) -> str:
    """One activation on one path: C = act(A @ B + bias) against float64, normwise and elementwise (the tail that
    accuracy.ACTIVATION_TAIL states for SiLU and GELU)."""
    M, K, N = ACTIVATION_SHAPE
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
    bias = rng.standard_normal(N).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        _, r = Gemm(device=device, dtype_in="bf16", bias=True, activation=activation, **kw).simulate(
            a, b, bias=bias, report=True)
    path = f"{device} bf16{' (bfp16 datapath)' if device == 'npu2' and not kw else ''}"
    return f"| {path}, {activation} | {percent(r.frobenius_rel)} | {r.max_rel:.3f} |"


ACTIVATION_SHAPE = (64, 192, 96)  # N(0, 1) bf16 A, B and an f32 bias (docs/epilogues.md section 5's shape)


def main() -> None:
    print("| path | default (C accumulated in fp32/int32/int64, rounded once) | acc='out' (C requantized per "
          "k-step) |")
    print("|---|---|---|")
    print("| | Frobenius / max rel / equal to A @ B rounded once | same |")
    for label, kw in PATHS:
        print(row(label, kw), flush=True)
    print(f"\n| path, act(A @ B + bias), {'x'.join(map(str, ACTIVATION_SHAPE))} | normwise (Frobenius) | "
          "elementwise max rel where \\|target\\| >= 2^-6 |")
    print("|---|---|---|")
    for device, kw in (("npu1", {}), ("npu2", {"emulate_bf16_with_bfp16": False}), ("npu2", {})):
        for activation in ("relu", "silu", "gelu"):
            print(activation_row(device, activation, kw), flush=True)


if __name__ == "__main__":
    main()
