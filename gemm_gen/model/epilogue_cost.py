"""What a fused epilogue (gemm_gen/epilogue.py) adds to one output tile, in the model's terms.

UNCALIBRATED: no hardware figure of the epilogue exists. The charge counts the vector operations of the
kernel's chain (templates/mm_epilogue.cc.j2) per VECTOR_LANES values, beyond the plain conversion's load
and store (model/perf.py charges those already), at one operation per cycle; a trace of the kernel on an
NPU is what would calibrate it (docs/epilogues.md step 8).

- Core: ops x m n / VECTOR_LANES cycles per output tile, in C's final conversion. A runtime-activation
  build (one xclbin, the mode read per call) is charged its costliest mode, as the model does not know the
  calls, plus MODE_SWITCH_CYCLES per output tile (the kernel's one switch on the mode, per convert call).
- B channel: the epilogue tile is one more B object per output tile (k x n values of B's type).
- DRAM: B grows by one k-row tile per column tile, (k_steps + 1) / k_steps of its bytes and runs.
"""

from __future__ import annotations

import numpy as np

from ..epilogue import VECTOR_LANES, Activation, Epilogue, tile_layout

# Vector operations per VECTOR_LANES values (templates/mm_epilogue.cc.j2). A bf16 mul or add is two: the
# fp32 operation and its to_vector<bfloat16>; the LUT tanh six (index conversion, clamp to the table,
# the LUT read, the mac, the conversion, the input's copy linear_approx keeps).
BF16_OP = 2
TANH_OPS = 6
ACTIVATION_OPS = {
    Activation.NONE: 0,
    Activation.RELU: 1,  # max(x, 0)
    Activation.SILU: 4 * BF16_OP + TANH_OPS,  # x / 2, tanh, + 1, / 2, x sigmoid
    Activation.GELU: 8 * BF16_OP + TANH_OPS,  # x^2, x^3, beta x^3, + x, s (.), tanh, + 1, 0.5 (.), x (.)
}
# A runtime activation's switch: the mode load, compare and branch once per convert call (per output tile),
# a pipeline refill after the taken branch. A guess of the right order: no trace of it exists.
MODE_SWITCH_CYCLES = 8
BIAS_OPS = 1  # the fp32 add (the parameter row is loaded once per block column)
CLAMP_OPS = 2  # max, min
# acc + bias and its SRS 0; three int32 x int32 muls and their SRS; + zero point and its SRS; max, min;
# the narrowing SRS (the two rounding-mode writes per block are scalar)
REQUANT_OPS = 2 + 3 * 2 + 2 + 2 + 1


def vector_ops(epilogue: Epilogue) -> int:
    """Vector operations per VECTOR_LANES values of C (0: no epilogue)."""
    if epilogue.requant is not None:
        return REQUANT_OPS
    return (BIAS_OPS * epilogue.bias + max(ACTIVATION_OPS[a] for a in epilogue.modes)
            + (CLAMP_OPS if epilogue.clamp is not None else 0))


def core_cycles(epilogue: Epilogue, m: np.ndarray | int, n: np.ndarray | int) -> np.ndarray:
    """Cycles the epilogue adds to C's conversion of one m x n output tile (uncalibrated)."""
    switch = MODE_SWITCH_CYCLES if epilogue.runtime else 0
    return np.asarray(vector_ops(epilogue) * np.asarray(m) * np.asarray(n) / VECTOR_LANES + switch,
                      dtype=np.float64)


def extra_b_objects(epilogue: Epilogue) -> int:
    """B objects the epilogue adds per output tile: its tile, when it reads one."""
    return 0 if tile_layout(epilogue, 1) is None else 1
