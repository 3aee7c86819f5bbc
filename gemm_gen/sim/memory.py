"""How much memory a simulation needs, said before it starts and refused when the machine lacks it.

The simulator keeps every DRAM word as a 64-bit cell with its provenance, the inputs in their host
types, the exact reference and the float64 truth of the product (each M x N), and the bfp16
quantization's float intermediates: its peak grows with the elements of A, B and C.

The formula is fitted to the peak resident memory (`/usr/bin/time -f %M`, Linux x86-64, Python
3.11, NumPy 2.x) of `gemm-gen simulate` with the tuner's designs (C accumulated in its default
wide type; the accuracy against the exact product measured a block of rows at a time), in MiB:

    npu2 bf16->bf16 (via bfp16)  512^3 89, 1024^3 175, 2048x2048x1024 413, 2048^3 455,
                                 4096x4096x2048 1390, 4096x1024x1024 447, 1024x4096x1024 425
    npu1 i8->i32 1024^3 151      npu1 i8->i8 2048^3 296      npu2 i8->i8 512^3 81
    npu2 i16->i32 2048x1024x2048 396                          npu1 bf16->f32 2048x1024x1024 232

A grid search over base, C's elements, the 32-bit words of A, B and C and the bfp16-quantized
elements of A and B for the smallest worst overestimate that never underestimates gave 72 MiB,
22 B, 46 B, 32 B and 0 B: it overestimates every row by 1% to 24% (tests/test_cli_bad_input.py
keeps the rows and checks the bounds).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..config import GemmConfig
from ..dtypes import DType
from ..errors import ConfigError, opt
from ..spec import Problem

BASE_BYTES = 72 * 2**20  # the interpreter, NumPy, the design and the lowered array
C_ELEMENT_BYTES = 22  # the exact reference and the output values, per element of C
WORD_BYTES = 46  # per 32-bit word of A, B and C: DRAM cells (uint64 + provenance), host and padded copies
QUANTIZED_A_BYTES = 32  # per element of A rounded through bfp16: the float intermediates of its blocks
QUANTIZED_B_BYTES = 0  # per element of B rounded through bfp16 (the fit leaves nothing to it)
SAY_ABOVE = 10**9  # a run that needs more than this says so before it starts
GB = 1e9


def _words(t: DType, elements: int) -> float:
    return elements * t.elem_bytes / 4  # bfp16ebs8: 9 bytes per 8 values; i4: half a byte


def estimate_bytes(c: GemmConfig, p: Problem) -> int:
    """Peak memory of simulating one call of size `p` on the design `c` (the fit above)."""
    a, b, out = p.M * p.K, p.K * p.N, p.M * p.N
    words = _words(c.types.t_in, a) + _words(c.types.t_b, b) + _words(c.types.t_out, out)
    quantized = c.numerics.bfp16_inputs or c.types.t_in.is_block or c.types.t_b.is_block or c.types.precision.converts_a
    per_input = QUANTIZED_A_BYTES * a + QUANTIZED_B_BYTES * b if quantized else 0
    return int(BASE_BYTES + C_ELEMENT_BYTES * out + WORD_BYTES * words + per_input)


def needed_bytes(c: GemmConfig, problems: Sequence[Problem]) -> int:
    """Peak memory of simulating these calls one after another (each call's arrays are freed
    before the next one's are made)."""
    return max(estimate_bytes(c, p) for p in problems)


def available_bytes() -> int | None:
    """Memory this process can still get: /proc/meminfo's MemAvailable, lowered to what a cgroup v2
    limit leaves; None where neither can be read (not Linux: the check is skipped)."""
    try:
        text = Path("/proc/meminfo").read_text()
        free = next(int(line.split()[1]) * 1024 for line in text.splitlines() if line.startswith("MemAvailable:"))
    except (OSError, ValueError, StopIteration, IndexError):
        return None
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text())
        if limit != "max":
            free = min(free, int(limit) - used)
    except (OSError, ValueError):
        pass
    return free


def check_memory(c: GemmConfig, problems: Sequence[Problem]) -> int:
    """The bytes a simulation of `problems` on the design `c` needs; ConfigError when this machine
    has less available."""
    need, have = needed_bytes(c, problems), available_bytes()
    if have is not None and need > have:
        largest = max(problems, key=lambda p: estimate_bytes(c, p))
        raise ConfigError(f"simulating {largest} needs about {need / GB:.1f} GB of memory and "
                          f"{max(have, 0) / GB:.1f} GB are available",
                          "simulate a smaller problem (the design scales without change), or list smaller sizes "
                          f"with {opt('sizes')} (each is simulated on its own)")
    return need
