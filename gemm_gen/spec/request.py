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
from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any

from ..facts.dtypes import DType, dtype
from ..facts.epilogue import Activation, RequantForm
from ..facts.errors import ConfigError, use_spelling
from ..facts.precision import PRESETS, Precision
from ..facts.precision import resolve as prec_resolve
from ..facts.rounding import Rounding, Saturation


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
    # mixed precision (gemm_gen/facts/precision.py): B's type (None: dtype_in) and C's type in L1 while
    # it accumulates (None: the kernel's accumulator; "out": dtype_out), e.g. bf16 for a bfp16 C;
    # dtype_b "i4" with an i8 A: int4 weights (precision.check_int4)
    dtype_b: str | None = None
    acc: str | None = None
    # how a bfp16 B sits in DRAM: "tiles", a matrix of 8 x 8 tiles (row-major over tiles, B^T's when
    # column-major); or "strips", mlir-aie's ATB packing: each core column's K x n strip one
    # contiguous run of its k x n L1 tiles, each in 1 x 2 super-blocks of 8 x 8 tiles. None: open,
    # the search's choice for a bfp16 or int4 B, "tiles" for any other. An int4 B in "strips": each core
    # column's K x n strip of its packed rows contiguous (host_buffers), the memtile re-tiling as row-major
    b_pack: str | None = None
    # the kernel variant (gemm_gen/spec/rules/kernel_variant.py): er x et accumulators per cluster and the
    # software-pipelined loop; None: the automatic choice for the tile
    expansion: tuple[int, int] | None = None
    kernel_loops: str | None = None
    # bf16 on npu2's bfp16 datapath: the kernel converts its A tile (every call) and its B tile (once
    # per k-step) to bfp16 in L1 scratch and runs bfp16 macs, instead of the AIE API's emulation
    # converting both operands at every mmul; the same bits (tests/backends/test_kernels.py proves it on the
    # host). None: on wherever it can be built.
    convert_once: bool | None = None
    # L1 placement (gemm_gen/design/l1_banks.py): the allocator every core asks mlir-aie for; None: the
    # plan whose DMA and core buffers share the fewest banks (with reservations if that helps)
    l1_alloc: str | None = None
    # neighbour-shared L1 (issue 34, docs/shared_l1.md): whose ping/pong buffers a pair of neighbouring cores keeps
    # once, read in place by both (SHARE_L1: none, b, a, ab; spec/rules/shared_l1.py)
    share_l1: str = "none"
    # which sizes one build serves (gemm_gen/spec/call.py): "fixed", the problem M x K x N only; "mn", any
    # M <= M and N <= N with the same K walk (the cores loop over output tiles until the data
    # stops); "mnk", also any K <= K (each core reads its k-steps per output tile from a runtime
    # parameter that every call writes)
    runtime_sizes: str = "fixed"
    # A stored column-major (K x M, i.e. A^T row-major): the DMAs carry s x r blocks of A^T and
    # the kernel transposes each on load (as B column-major); design/patterns.py
    a_col_maj: bool = False
    # C written column-major (N x M, i.e. C^T row-major): the memtile drains each core's tile in
    # columns and the shim writes them down C^T's rows (below 32 bits the kernel stores C's blocks
    # transposed, so the memtile moves whole words; spec/rules/memtile.c_blocks_transposed)
    c_col_maj: bool = False
    # the fused epilogue (gemm_gen/facts/epilogue.py, docs/epilogues.md), applied once to each C tile after its
    # last k-step: a bias over N (data, in the epilogue tile), an activation ("none", "relu", "silu",
    # "gelu"; None: none) and clamp bounds (float outputs; compile-time), per-channel requantization
    # ("per_channel": TFLite's double rounding; integer outputs; its parameters are data)
    bias: bool = False
    activation: str | None = None
    clamp: tuple[float, float] | None = None
    requant: str | None = None
    # W4A16 weights (gemm_gen/facts/groupquant.py): int4 B with bf16 A takes one bf16 scale per `group_size`
    # rows of K and column (0: no groups, the int8 x int4 kernels), and with `zero_points` one zero point too
    group_size: int = 0
    zero_points: bool = False
    # output blocks per shim task (design/spans.py): one task per channel carries `task_span`
    # consecutive blocks of one row band when their patterns concatenate into one BD; 0: as many as
    # one BD can express; None: open (1 today's sequence, or the search's choice)
    task_span: int | None = None
    # the kernel compile's optimisation level, Peano's -O<n> (spec/rules/peano.py); None: -O2, mlir-aie's
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


# ---- what each option can be: the vocabularies the table, the CLI, the operator and the rules share ----
RUNTIME_SIZES = ("fixed", "mn", "mnk")  # Options.runtime_sizes
B_PACKS = ("tiles", "strips")  # DRAM layouts of a bfp16 or int4 B (Options.b_pack)
L1_SCHEMES = ("bank-aware", "basic-sequential")  # mlir-aie's L1 allocators (aie.tile allocation_scheme)
# neighbour-shared L1 ping/pong buffers (Options.share_l1, spec/rules/shared_l1.py): none; B's split over vertical
# core pairs (ping on the lower core, pong on the upper, both cores read both); A's on the west core of a
# horizontal pair (both buffers, read by its east neighbour too); both
SHARE_L1 = ("none", "b", "a", "ab")
LOOPS = ("k-pipelined", "c-overlap", "k-flat", "jk-flat")  # the kernel's loop structures, least to most overlap
EXPANSIONS = ((2, 2), (4, 2), (2, 4), (4, 4))  # er x et accumulators per cluster; narrower share too few loads
ACTIVATIONS = tuple(a.value for a in Activation)  # none, relu, silu, gelu, runtime (each call selects)
REQUANTS = {"per_channel": RequantForm.DOUBLE}  # TFLite's default double rounding
# every core row, one, or one row of one virtual column per core (spec/rules/array.py, spec/rules/decode_split.py)
MAPPINGS = ("whole-array", "decode", "decode-split")
ROUNDINGS = tuple(m.name.lower() for m in Rounding)
SATURATIONS = tuple(m.name.lower() for m in Saturation)
# The kernel compile's optimisation level (Peano's -O<n>, spec/rules/peano.py): mlir-aie's programming_examples/
# makefile-common PEANOWRAP2_FLAGS / PEANOWRAP2P_FLAGS = -O2, which IRON's ExternalFunction uses too.
DEFAULT_OPT_LEVEL = 2
OPT_LEVELS = (0, 1, 2, 3)


# ---- the resolved config's sub-records: every option with its default applied (spec/rules/defaults.py) ----
@dataclass(frozen=True)
class Types:
    """The operand types: A's, B's, C's in DRAM and C's in L1 while it accumulates (never "out": C's
    own type is written as dtype_out)."""

    dtype_in: str
    dtype_out: str
    dtype_b: str
    acc: str

    @classmethod
    def of(cls, dtype_in: str, dtype_out: str, dtype_b: str | None = None, acc: str | None = None) -> Types:
        """The types as a precision spells them given (B: A's type when None; acc "out" or None: C's own);
        for records made from type names (a paper's kernel, a test's). A config's come from rules.defaults."""
        p = prec_resolve(dtype_in, dtype_b, dtype_out, acc)
        return cls(p.a, p.out, p.b, p.acc)

    @cached_property
    def precision(self) -> Precision:
        return Precision(self.dtype_in, self.dtype_b, self.dtype_out, self.acc)

    @cached_property
    def t_in(self) -> DType:
        return dtype(self.dtype_in)

    @cached_property
    def t_b(self) -> DType:
        return dtype(self.dtype_b)

    @cached_property
    def t_out(self) -> DType:
        return dtype(self.dtype_out)

    @cached_property
    def t_acc(self) -> DType:
        return dtype(self.acc)


@dataclass(frozen=True)
class Layout:
    """How A, B and C lie in DRAM, and how a bfp16 or int4 B is packed."""

    a_col_maj: bool
    b_col_maj: bool
    c_col_maj: bool
    b_pack: str


@dataclass(frozen=True)
class GroupQuant:
    """W4A16's group scales (gemm_gen/facts/groupquant.py): rows of K per scale (0: none), and zero points."""

    group_size: int
    zero_points: bool


@dataclass(frozen=True)
class KernelOptions:
    """How the kernel computes and is compiled: the mmul (given, and as resolved), bf16 on the bfp16
    datapath, the compiler and its -O, the variant as given (spec/rules/kernel_variant.py), convert-once,
    and C's rounding, saturation and shift."""

    emulate_bf16_with_bfp16: bool
    compiler: str
    mmul_shape: tuple[int, int, int] | None
    mmul: tuple[int, int, int]
    rounding: str
    saturation: str
    shift: int
    expansion: tuple[int, int] | None
    kernel_loops: str | None
    convert_once: bool
    opt_level: int
    block: bool  # a bfp16 kernel (templates/mm_bfp16.cc.j2): a bfp16 precision, or bf16 converted once


@dataclass(frozen=True)
class ArrayOptions:
    """Where the design sits: the device, its core rows and columns, the core stack, the ObjectFIFO
    depths and the L1 allocator."""

    device: str
    rows: int
    cols: int
    stack_bytes: int
    depth_ab_l1: int
    depth_ab_l2: int
    depth_c_l1: int
    depth_c_l2: int
    l1_alloc: str | None
    share_l1: str


@dataclass(frozen=True)
class RuntimeOptions:
    """The runtime sequence: task groups in flight per shim, which sizes one build serves, and the
    output blocks per shim task."""

    queue_groups: int
    runtime_sizes: str
    task_span: int


# ---- the option table: one row per option, everything else about it derived from it ------------------
NOT_GIVEN: Any = object()  # a row's cli_default when the CLI's default is the field's


@dataclass(frozen=True)
class Opt:
    """One option of a design: the field (of Problem, Tiling or Options) that holds it as given, the
    sub-record of the resolved config that holds its value (`group`), and how each front end spells it.
    From the rows: FIELDS and to_json (spec/config.py), the build suffix, both directions of the CLI's
    mapping (app/cliargs.py), the operator's keywords (app/operator_args.py), the Makefile's argument
    list (gemm_gen.mk, `gemm-gen make-args`) and every message's spelling of an option (errors.opt)."""

    name: str
    group: str  # the resolved config's attribute: size, tiling, types, layout, epilogue, groups, kernel, array, runtime
    help: str = ""  # the CLI's --help text
    flags: tuple[str, ...] = ()  # the CLI's spellings, the first the one messages and config_args write; (): none
    make: str | None = None  # the Makefile variable
    keyword: str | None = None  # the operator's keyword; None: the name (tiles and max_size hold the tiling, size)
    cli: str = "value"  # "value": --flag VALUE; "switch": a bare flag that sets `on`; "bool": an optional 0 / 1
    on: Any = True  # the value a switch sets
    fmt: str = "text"  # how a value is written as text: text, shape (AxB), clamp (LO,HI), mapping (rows)
    reader: str = "text"  # how the CLI reads its value (app/cliargs.py READERS)
    choices: tuple[Any, ...] | None = None  # the values the CLI takes (None: the reader decides)
    written: str = "always"  # when to_json writes it: always; epilogue / groups: when set; changed: when not default
    named: int = 0  # its rank in the build suffix (0: part of the digest of the rest)
    tag: Callable[[Any, Any], str | None] | None = None  # its part of the build suffix: tag(value, config)
    dest: str | None = None  # the CLI's Namespace attribute (None: the name)
    cli_default: Any = NOT_GIVEN  # the CLI's default when it is not the field's
    default: Any = None  # what a "changed" option resolves to when not given (spec/rules/defaults.py reads it)

    @property
    def attr(self) -> str:
        return self.dest or self.name

    @property
    def flag(self) -> str | None:
        return self.flags[0] if self.flags else None

    def text(self, value: Any) -> str:
        """A value as the CLI and make write it: 4x8x4, -6,6, decode, 1 / 0, bf16."""
        if self.fmt == "shape":
            return "x".join(str(int(v)) for v in value)
        if self.fmt == "clamp":
            return "{:g},{:g}".format(*value)
        if self.fmt == "mapping":  # the rows (1: decode), or a mapping by name (decode-split also fixes cols)
            return value if value in MAPPINGS else MAPPINGS[1] if value == 1 else MAPPINGS[0]
        if isinstance(value, bool):
            return str(int(value))
        return str(value)

    def cli_args(self, value: Any) -> list[str]:
        """The CLI arguments that give this option `value` (config_args, and messages)."""
        flag = str(self.flag)
        if self.cli == "switch":
            return [flag] if value == self.on else []
        if self.fmt == "clamp":  # -6,6 starts with '-': written --clamp=LO,HI
            return [f"{flag}={self.text(value)}"]
        return [flag, self.text(value)]


_HELP_ACC = ("C's type in L1 while it accumulates across K. Default: the kernel's accumulator (f32 for float C, "
             "i32, or i64 for 16-bit acc64 mmuls), C rounded and saturated once after the last k-step, so C is A @ B "
             "rounded once; 'out': C kept in --dtype_out and requantized after every k-step, as mlir-aie's examples "
             "and the papers (half the C memory or less, a rounding and saturation per k-step); bf16 or f32 for a "
             "bfp16 C")


def _on(text: str) -> Callable[[Any, Any], str | None]:
    """A tag that names a True option."""
    return lambda value, c: text if value else None


OPTIONS: tuple[Opt, ...] = (
    Opt("device", "array", "npu1 (Phoenix, 4x4) or npu2 (Strix/Krackan, 4x8)", ("--dev",), "DEVICE", dest="dev",
        cli_default="npu2", named=1),
    Opt("M", "size", "rows of A and C (with --runtime-sizes: the most it serves)", ("-M",), "M", keyword="shapes",
        reader="size", named=1),
    Opt("K", "size", "reduction dimension", ("-K",), "K", keyword="shapes", reader="size", named=1),
    Opt("N", "size", "columns of B and C", ("-N",), "N", keyword="shapes", reader="size", named=1),
    Opt("m", "tiling", "core tile rows (default: the paper's balanced kernel)", ("-m",), "m", keyword="tiles",
        reader="size", named=1),
    Opt("k", "tiling", "core tile reduction", ("-k",), "k", keyword="tiles", reader="size", named=1),
    Opt("n", "tiling", "core tile columns", ("-n",), "n", keyword="tiles", reader="size", named=1),
    Opt("k_mt", "tiling", "K extent of an A (and column-major B) memtile object; a multiple of k",
        ("--k-mt", "--k_mt"), "K_MT", keyword="tiles", reader="size", named=5,
        tag=lambda value, c: f"kmt{value}" if value != c.tiling.k else None),
    Opt("dtype_in", "types", "A's type: bf16, i8, i16, or bfp16 (npu2; default bf16)", ("--dtype_in", "--dtype-in"),
        "DTYPE_IN", cli_default=None, named=1),
    Opt("dtype_out", "types", "C's type: bf16/f32 for bf16; i8/i16/i32 for ints; bf16/f32/bfp16 for bfp16 GEMMs "
        "(default: bf16, i32, or bfp16 for bfp16 A)", ("--dtype_out", "--dtype-out"), "DTYPE_OUT", named=1),
    Opt("b_col_maj", "layout", "B stored column-major (N x K); takes an optional 0/1", ("--b-col-maj", "--b_col_maj"),
        "B_COL_MAJ", cli="bool", reader="bool", fmt="bool01", named=3, tag=_on("bcol")),
    Opt("rows", "array", "whole-array: every core row, A split over the rows; decode: one core row, m covering the "
        "padded M, each column a slice of N, B read once (for M <= 16); decode-split: every core its own slice of N, "
        "B over every shim channel but A's (docs/int4_decode.md section 13). Default: the model's fastest for "
        "decode-shaped calls, else whole-array", ("--mapping",), "MAPPING", fmt="mapping", choices=MAPPINGS,
        dest="mapping", cli_default=None),
    Opt("cols", "array", "array columns the design uses (npu1: 1, 2, 4; npu2: 1, 2, 4, 8; default: all)",
        ("--n-aie-cols", "--n_aie_cols"), "N_AIE_COLS", reader="columns", dest="n_aie_cols", named=1),
    Opt("emulate_bf16_with_bfp16", "kernel", "bf16 via the bfp16 datapath (8x8x8 mmul); npu2's default, 0 turns it "
        "off", ("--emulate-bf16-mmul-with-bfp16",), cli="bool", reader="bool", fmt="bool01", dest="emulate"),
    Opt("compiler", "kernel", "compile the kernel with xchesscc (CHESS=1) instead of Peano; sets its stack",
        ("--chess",), "CHESS", cli="switch", on="chess", dest="chess"),
    Opt("mmul_shape", "kernel", "aie::mmul shape RxSxT (default: the device's for dtype_in)", ("--mmul",),
        reader="shape", fmt="shape", dest="mmul"),
    Opt("stack_bytes", "array", "core stack bytes (default: mlir-aie's 3328 = 0xD00, more for bfp16 kernels; aiecc "
        "checks it against the kernel's measured frames)", ("--stack",), reader="stack", dest="stack"),
    Opt("queue_groups", "runtime", "task groups in flight per shim (at most the 4-deep shim task queue)",
        ("--queue-groups",), reader="groups"),
    Opt("rho", "tiling", "asymmetric tile buffering: A tiles of m / rho rows stream past each B tile, C keeps m rows "
        "(default 1 with given tiles; the tuner's choice without)", ("--rho",), "RHO", reader="rho", cli_default=None),
    Opt("depth_ab_l1", "array"),
    Opt("depth_ab_l2", "array"),
    Opt("depth_c_l1", "array"),
    Opt("depth_c_l2", "array"),
    Opt("rounding", "kernel", "rounding mode the kernel sets", ("--rounding",), reader="rounding"),
    Opt("saturation", "kernel", "saturation the kernel sets for narrowed integers", ("--saturation",),
        reader="saturation"),
    Opt("shift", "kernel", "SRS shift of integer outputs", ("--shift",), reader="shift"),
    Opt("dtype_b", "types", "B's type when it differs from A's: bfp16 (npu2, with bf16 or bfp16 A), or i4 (int4 "
        "weights with i8 A: packed two per byte, exact int32 accumulation; with bf16 A (W4A16): --group-size)",
        ("--dtype_b", "--dtype-b"), "DTYPE_B", named=1),
    Opt("acc", "types", _HELP_ACC, ("--acc",), "ACC", named=1),
    Opt("b_pack", "layout", "DRAM layout of a bfp16 or int4 B: tiles (bfp16: a matrix of 8x8 tiles; int4: packed "
        "rows) or strips (each core column's K x n strip contiguous; bfp16: mlir-aie's ATB packing); default: the "
        "model's choice", ("--b-pack", "--b_pack"), "B_PACK", choices=B_PACKS, named=4,
        tag=lambda value, c: f"b{value}" if value != B_PACKS[0] else None),
    Opt("expansion", "kernel", "accumulators per cluster ERxET (2x2, 4x2, 2x4, 4x4; default: the widest whose "
        "registers fit and that splits the tile)", ("--expansion",), "EXPANSION", reader="expansion", fmt="shape"),
    Opt("kernel_loops", "kernel", "which kernel loop is software-pipelined, the inner ones unrolled (default: the "
        "most overlapping one whose code fits, when the registers leave room to overlap)",
        ("--kernel-loops", "--kernel_loops"), "KERNEL_LOOPS", choices=LOOPS),
    Opt("convert_once", "kernel", "npu2 bf16 on the bfp16 datapath: convert A and B to bfp16 once per call / k-step "
        "instead of at every mmul (the same bits; default: the kernel the model predicts faster, each tuned with its "
        "own tiles)", ("--convert-once", "--convert_once"), "CONVERT_ONCE", cli="bool", reader="bool",
        fmt="bool01"),
    Opt("l1_alloc", "array", "mlir-aie's L1 allocator for every core (default: the plan whose DMA and core buffers "
        "share the fewest banks, steered with reserved bytes where that helps)", ("--l1-alloc", "--l1_alloc"),
        "L1_ALLOC", choices=L1_SCHEMES),
    Opt("share_l1", "array", "neighbour-shared L1 ping/pong buffers: b, B's split over vertical core pairs (ping on "
        "the lower core, pong on the upper, each read in place by both); a, A's both on the west core of a horizontal "
        "pair, read in place by its east neighbour; ab, both; none (default)", ("--share-l1", "--share_l1"),
        "SHARE_L1", choices=SHARE_L1, written="changed", default=SHARE_L1[0], named=5,
        tag=lambda value, c: f"sh{value}" if value != SHARE_L1[0] else None),
    Opt("runtime_sizes", "runtime", "which sizes one build serves: mn, any M and N up to -M -N with -K's K walk; "
        "mnk, also any K up to -K (k-steps from a runtime parameter); default: fixed, or what --runtime-sizes "
        "needs", ("--runtime-mode", "--runtime_mode"), choices=RUNTIME_SIZES[1:], keyword="max_size",
        dest="runtime_mode",
        cli_default=None),
    Opt("a_col_maj", "layout", "A stored column-major (K x M, i.e. A^T row-major); takes an optional 0/1",
        ("--a-col-maj", "--a_col_maj"), "A_COL_MAJ", cli="bool", reader="bool", fmt="bool01", named=2,
        tag=_on("acol")),
    Opt("c_col_maj", "layout", "C written column-major (N x M, i.e. C^T row-major; scalar outputs); takes an "
        "optional 0/1", ("--c-col-maj", "--c_col_maj"), "C_COL_MAJ", cli="bool", reader="bool", fmt="bool01",
        named=3, tag=_on("ccol")),
    Opt("bias", "epilogue", "fused epilogue: add a bias over N to C after its last k-step (f32 for bf16 C, i32 for "
        "requantized C; data in the epilogue tile, one more B object per output tile)", ("--bias",), "BIAS",
        cli="switch", written="epilogue"),
    Opt("activation", "epilogue", "fused epilogue: the activation after the bias (bf16 C: relu, silu, gelu as "
        "mlir-aie's aie2 bf16 kernels compute them; requantized C: relu, its act_min)", ("--activation",),
        "ACTIVATION", choices=ACTIVATIONS, written="epilogue"),
    Opt("clamp", "epilogue", "fused epilogue: clamp a bf16 C to LO,HI after the activation (bf16 bounds; write "
        "--clamp=-6,6)", ("--clamp",), "CLAMP", reader="clamp", fmt="clamp", written="epilogue"),
    Opt("requant", "epilogue", "fused epilogue: TFLite's per-channel requantization of an i32 accumulator to an i8 / "
        "i16 C (double rounding; multipliers, shifts, zero point and act_min/max are call data)", ("--requant",),
        "REQUANT", choices=tuple(REQUANTS), written="epilogue"),
    Opt("group_size", "groups", "W4A16 (--dtype_in bf16 --dtype_b i4): rows of K per bf16 weight scale, 32, 64 or "
        "128 (the scales ride in B's objects)", ("--group-size", "--group_size"), "GROUP_SIZE", reader="group",
        written="groups", named=6,
        tag=lambda value, c: f"g{value}{'z' if c.groups.zero_points else ''}" if value else None),
    Opt("zero_points", "groups", "W4A16: one int4 zero point per group and column too (w = (q - z) s)",
        ("--zero-points", "--zero_points"), "ZERO_POINTS", cli="switch", written="groups", named=6),
    Opt("task_span", "runtime", "output blocks along N each shim task carries when their patterns make one BD (1: a "
        "task per block; 0: as many as one BD expresses; default: 1, or the search's choice)",
        ("--task-span", "--task_span"), "TASK_SPAN", reader="span", written="changed", default=1),
    Opt("opt_level", "kernel", f"Peano's -O for the kernel (OPT_LEVEL=; default {DEFAULT_OPT_LEVEL}, as mlir-aie's "
        "PEANOWRAP2(P)_FLAGS; 1 is mlir-aie's workaround for the -O2 miscompiles llvm-aie #1262 and mlir-aie #3792 "
        "report)", ("--opt-level", "--opt_level"), "OPT_LEVEL", reader="int", choices=OPT_LEVELS, written="changed",
        default=DEFAULT_OPT_LEVEL),
)
ROWS: dict[str, Opt] = {o.name: o for o in OPTIONS}
FIELDS = tuple(ROWS)  # GemmConfig's fields, in the order of its flat constructor and of to_json()

# What a request names besides a config's fields, spelled by the front ends as the options are: the sizes
# one design serves (the operator's max_size), the ATB paper's precision presets, how often each size is
# called, each call's layouts, and an NPU run's time limit.
REQUEST_OPTIONS: tuple[Opt, ...] = (
    Opt("sizes", "request", "build one design for several sizes, e.g. 1000x777x333,1x4096x4096 (SIZES=): it serves "
        "any M, K, N up to the largest (-M -K -N raise that), the cores reading their k-steps per tile from a "
        "runtime parameter when the sizes' K differ", ("--runtime-sizes", "--runtime_sizes"), "SIZES",
        keyword="max_size", reader="sizes", dest="runtime_sizes", cli_default=None),
    Opt("weights", "request", "with --runtime-sizes: how often each size is called (e.g. 30,1,1; default all 1); the "
        "tuner picks the design with the least weighted time", ("--weights",), reader="weights", cli_default=None),
    Opt("call_layouts", "request", "with --runtime-sizes: each size's layouts of A, B and C, r(ow-major) or "
        "c(olumn-major), e.g. rrr,rrc (default: the build's); one xclbin serves a 32-bit C in either layout (plan "
        "says which calls share an xclbin)", ("--call-layouts", "--call_layouts"), reader="layouts",
        cli_default=None),
    Opt("preset", "request", "the ATB paper's precision configs: config1 = bf16 A x bfp16 B -> bf16, config2 = "
        "bfp16 x bfp16 -> bfp16, config3 = config2 with C accumulated in bf16", ("--preset",), "PRESET",
        choices=tuple(sorted(PRESETS)), cli_default=None),
    Opt("timeout_ms", "request", "", ("--timeout-ms",), "TIMEOUT_MS"),
    Opt("dram_gbps", "request", "", ("--dram-gbps", "--dram_gbps")),  # the model's DRAM peak (predict, tune, ...)
    Opt("rank", "request", "", ("--rank",)),  # how tune ranks the designs
)
SPELLED: dict[str, Opt] = {**ROWS, **{o.name: o for o in REQUEST_OPTIONS}}

OPTION_NAMES = tuple(f.name for f in fields(Options))
TILING_NAMES = tuple(f.name for f in fields(Tiling))


def split_fields(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A flat dict of config fields -> (options, tiling, size, the rest) by name."""
    options = {k: v for k, v in values.items() if k in OPTION_NAMES}
    tiling = {k: v for k, v in values.items() if k in TILING_NAMES}
    size = {k: v for k, v in values.items() if k in ("M", "K", "N")}
    rest = {k: v for k, v in values.items() if k not in options and k not in tiling and k not in size}
    return options, tiling, size, rest


def given(options: Options) -> dict[str, Any]:
    """The options given, by name: every field not at its "not given" value."""
    return {f.name: getattr(options, f.name) for f in fields(Options)
            if f.name == "device" or getattr(options, f.name) != f.default}


# ---- spelling an option in each front end's terms (errors.opt's placeholders) ----------------------------
def _values(row: Opt, values: tuple[Any, ...], write: Callable[[Any], str], first: str, sep: str) -> str:
    shown = [write(v) for v in values]
    return first + sep + " or ".join(shown) if shown else first


def spell_cli(name: str, values: tuple[Any, ...]) -> str:
    """--dtype_out i8 or i16, --chess, --convert-once 0, -m, --clamp=-6,6."""
    row = SPELLED[name]
    if not values or row.flag is None:
        return row.flag or name
    if row.cli == "switch":
        return row.flag if all(v == row.on for v in values) else f"{row.flag} {' or '.join(map(str, values))}"
    if row.fmt == "clamp":
        return " or ".join(row.cli_args(v)[0] for v in values)
    return _values(row, values, row.text, row.flag, " ")


def spell_make(name: str, values: tuple[Any, ...]) -> str:
    """DTYPE_OUT=i8 or i16, CHESS=1, CONVERT_ONCE=0; an option make has no variable for as the CLI's."""
    row = SPELLED[name]
    if row.make is None:
        return spell_cli(name, values)
    if row.cli == "switch":
        return _values(row, values, lambda v: str(int(v == row.on)), row.make, "=")
    return _values(row, values, row.text, row.make, "=")


def _python(row: Opt, value: Any) -> str:
    if row.fmt == "shape" or isinstance(value, (list, tuple)):
        return repr(tuple(value))
    return repr(value)


def spell_operator(name: str, values: tuple[Any, ...]) -> str:
    """dtype_out='i8' or 'i16', compiler='chess', convert_once=False, tiles' m, max_size's M."""
    row = SPELLED[name]
    if row.group == "size":
        return f"max_size's {row.name}"
    if row.group == "tiling" and row.name != "rho" and not (row.name == "k_mt" and values):
        return f"tiles' {row.name}"
    if not values:
        return row.keyword or row.name
    if row.fmt == "mapping":  # the operator gives a mapping as the grid it is
        return " or ".join(_MAPPING_KEYWORDS[row.text(v)] for v in values)
    first, *rest = values
    given = f"tiles=(m, k, n, {first})" if row.name == "k_mt" else f"{row.keyword or row.name}={_python(row, first)}"
    return " or ".join([given, *(_python(row, v) for v in rest)])


# each mapping (spec.MAPPINGS) as the operator's keywords give it
_MAPPING_KEYWORDS = {MAPPINGS[0]: "rows=0", MAPPINGS[1]: "rows=1",
                     MAPPINGS[2]: "rows=1 with cols=columns x core rows (one per core)"}


SPELLINGS: dict[str, Callable[[str, tuple[Any, ...]], str]] = {
    "cli": spell_cli, "make": spell_make, "operator": spell_operator}
use_spelling(spell_cli, SPELLINGS)  # messages read in the CLI's terms unless a front end chooses its own
