"""What a user asks for, as small frozen types that hold only what was given.

A design is specified in three parts (the finished `config.GemmConfig` is the three together):
- `Problem`: the sizes of one call, M x K x N;
- `Options`: what one xclbin fixes besides its tiling (device, columns, types and numerics,
  layouts, kernel and compiler choices). A field left at its "not given" value (None, or 0 for
  `rows`, `cols` and `stack_bytes`) stays so: its default is derived on read by `rules.defaults.resolve`, never
  stored, so `dataclasses.replace(options, dtype_in="i8")` cannot carry a default of the old types;
- `Tiling`: m x k x n per core, k_mt per memtile object, rho (asymmetric tile buffering).
`Pins` are the parts of the tiling a user fixed, and a `Request` is options, sizes and pins: what the
search turns into a design.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any

from .errors import ConfigError


@dataclass(frozen=True, order=True)
class Problem:
    """The sizes of one GEMM call: C (M x N) = A (M x K) B (K x N)."""

    M: int
    K: int
    N: int

    def __post_init__(self) -> None:
        for name in ("M", "K", "N"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name}={value} must be a positive integer", f"give {name} >= 1")

    def __str__(self) -> str:
        return f"{self.M}x{self.K}x{self.N}"

    @property
    def macs(self) -> int:
        return self.M * self.K * self.N

    def to_json(self) -> dict[str, int]:
        return {"M": self.M, "K": self.K, "N": self.N}

    @classmethod
    def parse(cls, text: str) -> Problem:
        m = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*[xX]\s*(\d+)\s*", text)
        if m is None:
            raise ConfigError(f"size {text!r} is not MxKxN", "write sizes like 1000x777x333")
        return cls(*(int(g) for g in m.groups()))


@dataclass(frozen=True)
class Options:
    """What one xclbin fixes besides its tiling and size, as given (see the module docstring for
    the "not given" values; `rules.defaults.resolve` derives the rest)."""

    device: str
    dtype_in: str = "bf16"
    dtype_out: str | None = None  # None: bf16 for bf16, bfp16 for bfp16, i32 for integers
    b_col_maj: bool = False
    rows: int = 0  # 0: all core rows of the device
    cols: int = 0  # 0: all columns of the device
    emulate_bf16_with_bfp16: bool | None = None  # None: the device's default for bf16 (npu2: bfp16)
    compiler: str | None = None  # "peano" or "chess"; None: chess for bfp16, else peano
    mmul_shape: tuple[int, int, int] | None = None  # r x s x t; None: the device's default
    stack_bytes: int = 0  # 0: the default for the kernel (rules.defaults.default_stack: at least mlir-aie's 0xD00)
    # task groups of {A, B, C} BDs in flight per shim. The paper used 5 (15 BDs), but a shim
    # channel's task queue is 4 deep and the hardware drops a push onto a full one (mlir-aie PR
    # #3734): with only C awaited, at most 4 groups can be outstanding safely.
    queue_groups: int = 4
    depth_ab_l1: int = 2
    depth_ab_l2: int = 2
    depth_c_l1: int = 1  # single C buffer in L1 (sec. 5.3.2)
    depth_c_l2: int = 1
    rounding: str = "conv_even"
    saturation: str = "saturate"
    shift: int = 0
    # mixed precision (gemm_gen/precision.py): B's type (None: dtype_in) and C's type in L1 while
    # it accumulates (None: the kernel's accumulator; "out": dtype_out), e.g. bf16 for a bfp16 C;
    # dtype_b "i4" with an i8 A: int4 weights (precision.check_int4)
    dtype_b: str | None = None
    acc: str | None = None
    # how a bfp16 B sits in DRAM: "tiles", a matrix of 8 x 8 tiles (row-major over tiles, B^T's when
    # column-major); or "strips", mlir-aie's ATB packing: each core column's K x n strip one
    # contiguous run of its k x n L1 tiles, each in 1 x 2 super-blocks of 8 x 8 tiles. None: open,
    # the search's choice for a bfp16 or int4 B, "tiles" for any other. An int4 B in "strips": each core
    # column's K x n strip of its packed rows contiguous (hostdata), the memtile re-tiling as row-major
    b_pack: str | None = None
    # the kernel variant (gemm_gen/rules/kernel_variant.py): er x et accumulators per cluster and the
    # software-pipelined loop; None: the automatic choice for the tile
    expansion: tuple[int, int] | None = None
    kernel_loops: str | None = None
    # bf16 on npu2's bfp16 datapath: the kernel converts its A tile (every call) and its B tile (once
    # per k-step) to bfp16 in L1 scratch and runs bfp16 macs, instead of the AIE API's emulation
    # converting both operands at every mmul; the same bits (tests/test_kernels.py proves it on the
    # host). None: on wherever it can be built.
    convert_once: bool | None = None
    # L1 placement (gemm_gen/l1_banks.py): the allocator every core asks mlir-aie for; None: the
    # plan whose DMA and core buffers share the fewest banks (with reservations if that helps)
    l1_alloc: str | None = None
    # which sizes one build serves (gemm_gen/call.py): "fixed", the problem M x K x N only; "mn", any
    # M <= M and N <= N with the same K walk (the cores loop over output tiles until the data
    # stops); "mnk", also any K <= K (each core reads its k-steps per output tile from a runtime
    # parameter that every call writes)
    runtime_sizes: str = "fixed"
    # A stored column-major (K x M, i.e. A^T row-major): the DMAs carry s x r blocks of A^T and
    # the kernel transposes each on load (as B column-major); design/patterns.py
    a_col_maj: bool = False
    # C written column-major (N x M, i.e. C^T row-major): the memtile drains each core's tile in
    # columns and the shim writes them down C^T's rows (below 32 bits the kernel stores C's blocks
    # transposed, so the memtile moves whole words; rules/memtile.c_blocks_transposed)
    c_col_maj: bool = False
    # the fused epilogue (gemm_gen/epilogue.py, docs/epilogues.md), applied once to each C tile after its
    # last k-step: a bias over N (data, in the epilogue tile), an activation ("none", "relu", "silu",
    # "gelu"; None: none) and clamp bounds (float outputs; compile-time), per-channel requantization
    # ("per_channel": TFLite's double rounding; integer outputs; its parameters are data)
    bias: bool = False
    activation: str | None = None
    clamp: tuple[float, float] | None = None
    requant: str | None = None
    # W4A16 weights (gemm_gen/groupquant.py): int4 B with bf16 A takes one bf16 scale per `group_size`
    # rows of K and column (0: no groups, the int8 x int4 kernels), and with `zero_points` one zero point too
    group_size: int = 0
    zero_points: bool = False
    # output blocks per shim task (design/spans.py): one task per channel carries `task_span`
    # consecutive blocks of one row band when their patterns concatenate into one BD; 0: as many as
    # one BD can express; None: open (1 today's sequence, or the search's choice)
    task_span: int | None = None
    # the kernel compile's optimisation level, Peano's -O<n> (rules/peano.py); None: -O2, mlir-aie's
    # PEANOWRAP2(P)_FLAGS; -O1 is the workaround mlir-aie uses for the -O2 miscompiles (llvm-aie #1262)
    opt_level: int | None = None

    def __post_init__(self) -> None:
        if self.clamp is not None:  # JSON gives a list; options hash and compare as tuples
            object.__setattr__(self, "clamp", tuple(float(x) for x in self.clamp))
        for name in ("mmul_shape", "expansion"):  # JSON gives lists; options hash and compare as tuples
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, tuple(int(x) for x in value))


@dataclass(frozen=True)
class Tiling:
    """The kernel tile m x k x n of every core, the memtile's K chunk k_mt and rho (L1 holds m / rho
    rows of A: asymmetric tile buffering). Zeros: not chosen yet (a request's open tiling)."""

    m: int
    k: int
    n: int
    k_mt: int
    rho: int = 1


@dataclass(frozen=True)
class Pins:
    """The parts of the tiling a user fixed (None: the search chooses), and for a design serving
    several sizes those sizes and how often each is called. (Whether a bfp16 or int4 B's packing is open is
    the option's own: `Options.b_pack` None.)"""

    m: int | None = None
    k: int | None = None
    n: int | None = None
    k_mt: int | None = None
    rho: int | None = None
    sizes: tuple[Problem, ...] | None = None
    weights: tuple[float, ...] | None = None

    def tiling_items(self) -> tuple[tuple[str, int], ...]:
        """The pinned parts of the tiling as (name, value), in the order m, k, n, k_mt, rho."""
        return tuple((name, value) for name in ("m", "k", "n", "k_mt", "rho")
                     if (value := getattr(self, name)) is not None)


@dataclass(frozen=True)
class Request:
    """What the search turns into a design: the options, the size it is built for (with several
    sizes: their maxima, or larger) and the pins."""

    options: Options
    problem: Problem
    pins: Pins = Pins()


OPTION_NAMES = tuple(f.name for f in fields(Options))
TILING_NAMES = tuple(f.name for f in fields(Tiling))


def split_fields(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A flat dict of config fields -> (options, tiling, size, the rest) by name."""
    options = {k: v for k, v in values.items() if k in OPTION_NAMES}
    tiling = {k: v for k, v in values.items() if k in TILING_NAMES}
    size = {k: v for k, v in values.items() if k in ("M", "K", "N")}
    rest = {k: v for k, v in values.items() if k not in options and k not in tiling and k not in size}
    return options, tiling, size, rest
