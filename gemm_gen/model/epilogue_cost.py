"""What a fused epilogue (gemm_gen/facts/epilogue.py) adds to one output tile, in the model's terms.

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

from ..facts.epilogue import (  # noqa: F401 - the op counts are re-exported for the model's readers
    ACTIVATION_OPS,
    BF16_OP,
    BIAS_OPS,
    CLAMP_OPS,
    REQUANT_OPS,
    TANH_OPS,
    VECTOR_LANES,
    Epilogue,
    tile_layout,
    vector_ops,
)

# the chain's vector operations per VECTOR_LANES values are the kernel's fact (gemm_gen/facts/epilogue.py: the
# program-memory rule counts them too); re-exported here, where the model prices them
# A runtime activation's switch: the mode load, compare and branch once per convert call (per output tile),
# a pipeline refill after the taken branch. A guess of the right order: no trace of it exists.
MODE_SWITCH_CYCLES = 8


def core_cycles(epilogue: Epilogue, m: np.ndarray | int, n: np.ndarray | int) -> np.ndarray:
    """Cycles the epilogue adds to C's conversion of one m x n output tile (uncalibrated)."""
    switch = MODE_SWITCH_CYCLES if epilogue.runtime else 0
    return np.asarray(vector_ops(epilogue) * np.asarray(m) * np.asarray(n) / VECTOR_LANES + switch,
                      dtype=np.float64)


def extra_b_objects(epilogue: Epilogue) -> int:
    """B objects the epilogue adds per output tile: its tile, when it reads one."""
    return 0 if tile_layout(epilogue, 1) is None else 1
