"""How much memory a simulation needs, said before it starts and refused when the machine lacks it.

Each mode has its own fit to the peak resident memory (`/usr/bin/time -f %M`, Linux x86-64, Python 3.11,
NumPy 2.x) of `gemm-gen simulate` with the tuner's designs, in MiB:

    rows                                         literal  fast (the default: docs/simulator.md)
    npu2 bf16->bf16 (via bfp16)  512^3                89     83
                                 1024^3              175    107
                                 2048x2048x1024      413    148
                                 2048^3              455    191
                                 4096x4096x2048     1390    317
                                 4096x1024x1024      447    176
                                 1024x4096x1024      425    170
    npu1 i8->i32 1024^3                              151    137
    npu1 i8->i8 2048^3                               296    240
    npu2 i8->i8 512^3                                 81     78
    npu2 i16->i32 2048x1024x2048                     396    268
    npu1 bf16->f32 2048x1024x1024                    232    140

The literal simulator keeps every DRAM word as a 64-bit cell with its provenance, the inputs in their host
types, the exact reference and the float64 truth of the product (each M x N), and the bfp16 quantization's
float intermediates. A grid search over base, C's elements, the 32-bit words of A, B and C and the
bfp16-quantized elements of A for the smallest worst overestimate that never underestimates gave 72 MiB, 22 B,
46 B, 32 B and 0 B: it overestimates every row by 1% to 24%.

The fast one keeps no cells for A and B, one float32 product, and C's cells: the same search over base, the
elements of float A and B, of integer A and B (their operands are float64) and C's elements gave 80 MiB, 8 B,
21 B and 26 B: it overestimates every row by 0% to 51% (the largest, 4096x4096x2048, most). A call the fast
simulator cannot show to pass runs literally (docs/simulator.md): a broken design's run may then need the
literal figure. tests/app/test_cli_bad_input.py keeps both sets of rows and checks the bounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..facts.dtypes import DType
from ..facts.errors import ConfigError, opt
from ..spec.config import GemmConfig
from ..spec.request import Problem
from .words import MAX_WORDS

BASE_BYTES = 72 * 2**20  # the interpreter, NumPy, the design and the lowered array
C_ELEMENT_BYTES = 22  # the exact reference and the output values, per element of C
WORD_BYTES = 46  # per 32-bit word of A, B and C: DRAM cells (uint64 + provenance), host and padded copies
QUANTIZED_A_BYTES = 32  # per element of A rounded through bfp16: the float intermediates of its blocks
QUANTIZED_B_BYTES = 0  # per element of B rounded through bfp16 (the fit leaves nothing to it)
# the fast simulator (the fit above)
FAST_BASE_BYTES = 80 * 2**20  # the interpreter, NumPy and its BLAS buffers, the design, the lowered array
FAST_FLOAT_INPUT_BYTES = 8  # per element of a float A and B: the inputs, the copies the tiles held, float32
FAST_INT_INPUT_BYTES = 21  # per element of an integer A and B: their operands in float64 besides
FAST_C_ELEMENT_BYTES = 26  # per element of C: the product, C's cells, the output and the reference
SAY_ABOVE = 10**9  # a run that needs more than this says so before it starts
GB = 1e9


def _words(t: DType, elements: int) -> float:
    return elements * t.elem_bytes / 4  # bfp16ebs8: 9 bytes per 8 values; i4: half a byte


def estimate_bytes(c: GemmConfig, p: Problem, literal: bool = False) -> int:
    """Peak memory of simulating one call of size `p` on the design `c` (the fits above) in the fast simulator,
    or the literal one."""
    a, b, out = p.M * p.K, p.K * p.N, p.M * p.N
    if not literal:
        per_input = FAST_FLOAT_INPUT_BYTES if c.types.t_in.is_float else FAST_INT_INPUT_BYTES
        return int(FAST_BASE_BYTES + per_input * (a + b) + FAST_C_ELEMENT_BYTES * out)
    words = _words(c.types.t_in, a) + _words(c.types.t_b, b) + _words(c.types.t_out, out)
    types = c.types
    quantized = c.numerics.bfp16_inputs or types.t_in.is_block or types.t_b.is_block or types.precision.converts_a
    per_input = QUANTIZED_A_BYTES * a + QUANTIZED_B_BYTES * b if quantized else 0
    return int(BASE_BYTES + C_ELEMENT_BYTES * out + WORD_BYTES * words + per_input)


def needed_bytes(c: GemmConfig, problems: Sequence[Problem], literal: bool = False) -> int:
    """Peak memory of simulating these calls one after another (each call's arrays are freed
    before the next one's are made)."""
    return max(estimate_bytes(c, p, literal) for p in problems)


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


def check_words(c: GemmConfig, problems: Sequence[Problem]) -> None:
    """ConfigError when an operand of a call, before any padding, has more 32-bit words than the simulator
    numbers (words.MAX_WORDS); the padded buffers are checked again when the call's DRAM is made (run.py)."""
    for p in problems:
        types = c.types
        for name, t, elements in (("A", types.t_in, p.M * p.K), ("B", types.t_b, p.K * p.N),
                                  ("C", types.t_out, p.M * p.N)):
            nbytes = -(-elements * t.block_bytes // t.block_elems)  # whole blocks
            words = -(-nbytes // 4)
            if words > MAX_WORDS:
                raise ConfigError(f"{name} of a {p} call has {words:,} words, more than the simulator's {MAX_WORDS:,}",
                                  "simulate a smaller problem (the design scales without change)")


def check_memory(c: GemmConfig, problems: Sequence[Problem], literal: bool = False) -> int:
    """The bytes a simulation of `problems` on the design `c` needs (`literal`: in the literal simulator);
    ConfigError when this machine has less available, or an operand has more words than the simulator numbers.
    It reads the types and sizes only (not the tiling): callers check before choosing a design or making any
    array."""
    need, have = needed_bytes(c, problems, literal), available_bytes()
    if have is not None and need > have:
        largest = max(problems, key=lambda p: estimate_bytes(c, p, literal))
        raise ConfigError(f"simulating {largest} needs about {need / GB:.1f} GB of memory and "
                          f"{max(have, 0) / GB:.1f} GB are available",
                          "simulate a smaller problem (the design scales without change), or list smaller sizes "
                          f"with {opt('sizes')} (each is simulated on its own)")
    check_words(c, problems)
    return need
