"""Flags and parsing shared by every gemm-gen command (mlir-aie's names), and one-line errors: the flags
become the base config and the pins (what the user fixed); choosing the rest is search.choose's step
(app/choice.py), never the parser's."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from .. import precision as prec
from ..call import check_weights, parse_sizes
from ..config import L1_SCHEMES, GemmConfig, emulation_default
from ..errors import ConfigError
from ..hw.devices import TileKind, device
from ..rounding import Rounding, Saturation
from ..rules import array, peano
from ..rules import epilogue as epilogue_rule
from ..rules.call_layouts import Layouts
from ..rules.defaults import default_out
from ..rules.kernel_variant import CANDIDATES, LOOPS
from ..spec import Options, Pins, Problem, Request, Tiling

# The largest M, K, N (and any count a flag takes): mlir-aie's host program reads sizes as C ints and
# the cores' k-step runtime parameter is an int32, so nothing larger can reach an NPU.
MAX_SIZE = 2**31 - 1
MAX_SEED = 2**63 - 1  # seeds round-trip through int64 (NumPy, --json readers)
MAX_MMUL = 64  # no aie::mmul dimension comes near this (the largest is 16); past it a shape is a typo


def whole(value: str, example: str = "512") -> int:
    """An integer written in digits; ArgumentTypeError naming the value otherwise (1e3, 1.5, x)."""
    try:
        return int(value, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number (write digits, e.g. {example})") from None


def counted(low: int, high: int = MAX_SIZE, what: str = "a size", example: str = "512") -> Callable[[str], int]:
    """An argparse type: a whole number in low..high (argparse names the flag in front)."""
    def parse(value: str) -> int:
        v = whole(value, example)
        if not low <= v <= high:
            raise argparse.ArgumentTypeError(f"{v} is out of range: {what} is {low} to {high:,}")
        return v

    return parse


SIZE = counted(1)
SEED = counted(0, MAX_SEED, "a seed", "7")


def _mode(kind: type[Rounding] | type[Saturation]) -> Callable[[str], str]:
    """An argparse type: the name of one of the kernel's rounding or saturation modes."""
    names = [m.name.lower() for m in kind]

    def parse(value: str) -> str:
        if value.lower() not in names:
            raise argparse.ArgumentTypeError(f"unknown mode {value!r}; use one of {', '.join(names)}")
        return value.lower()

    return parse


def _b_col_maj(value: str) -> bool:
    if value.lower() in ("1", "true", "yes"):
        return True
    if value.lower() in ("0", "false", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected 0 or 1, got {value!r}")


def _dims(value: str, count: int, form: str, example: str) -> tuple[int, ...]:
    """RxSxT-like text: `count` whole numbers from 1 to MAX_MMUL, joined by x."""
    parts = value.lower().split("x")
    if len(parts) != count or not all(p.strip().isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"expected {form} such as {example}, got {value!r}")
    dims = tuple(int(p) for p in parts)
    if not all(1 <= d <= MAX_MMUL for d in dims):
        raise argparse.ArgumentTypeError(f"{value!r}: each of {form} is 1 to {MAX_MMUL} (e.g. {example})")
    return dims


def _shape(value: str) -> tuple[int, int, int]:
    r, s, t = _dims(value, 3, "RxSxT", "4x8x8")
    return r, s, t


def _sizes(value: str) -> tuple[Problem, ...]:
    if any(not part.strip() for part in value.split(",")):  # "1x1x1,," is a typo, not one size
        raise argparse.ArgumentTypeError(f"{value!r} has an empty size between commas "
                                         "(write sizes like 1000x777x333,1x4096x4096)")
    try:
        sizes = parse_sizes(value)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    for p in sizes:
        if max(p.M, p.K, p.N) > MAX_SIZE:
            raise argparse.ArgumentTypeError(f"size {p}: each of M, K, N is at most {MAX_SIZE:,}")
    return sizes


def _weights(text: str) -> tuple[float, ...]:
    try:
        return check_weights(tuple(float(part) for part in text.split(",")))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of numbers (write weights like 30,1,1)") from None
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _layouts(text: str) -> tuple[Layouts, ...]:
    try:
        return tuple(Layouts.parse(part) for part in text.split(","))
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _expansion(value: str) -> tuple[int, int]:
    er, et = _dims(value, 2, "ERxET", "4x2")
    if (er, et) not in CANDIDATES:
        raise argparse.ArgumentTypeError(f"{value!r} is not an expansion the kernels have; use "
                                         + ", ".join("x".join(map(str, c)) for c in CANDIDATES))
    return er, et


def problem_args(p: argparse.ArgumentParser) -> None:
    """The problem, tiling and type flags every design command takes."""
    p.add_argument("--dev", default="npu2", help="npu1 (Phoenix, 4x4) or npu2 (Strix/Krackan, 4x8)")
    p.add_argument("-M", type=SIZE, help="rows of A and C (with --runtime-sizes: the most it serves)")
    p.add_argument("-K", type=SIZE, help="reduction dimension")
    p.add_argument("-N", type=SIZE, help="columns of B and C")
    p.add_argument("--runtime-sizes", "--runtime_sizes", dest="runtime_sizes", type=_sizes, default=None,
                   help="build one design for several sizes, e.g. 1000x777x333,1x4096x4096 (SIZES=): it serves any "
                   "M, K, N up to the largest (-M -K -N raise that), the cores reading their k-steps per tile from a "
                   "runtime parameter when the sizes' K differ")
    p.add_argument("--weights", type=_weights, default=None,
                   help="with --runtime-sizes: how often each size is called (e.g. 30,1,1; default all 1); the "
                   "tuner picks the design with the least weighted time")
    p.add_argument("--call-layouts", "--call_layouts", dest="call_layouts", type=_layouts, default=None,
                   help="with --runtime-sizes: each size's layouts of A, B and C, r(ow-major) or c(olumn-major), e.g. "
                   "rrr,rrc (default: the build's); one xclbin serves a 32-bit C in either layout (plan says which "
                   "calls share an xclbin)")
    p.add_argument("--runtime-mode", "--runtime_mode", dest="runtime_mode", choices=("mn", "mnk"), default=None,
                   help="which sizes one build serves: mn, any M and N up to -M -N with -K's K walk; mnk, also any K "
                   "up to -K (k-steps from a runtime parameter); default: fixed, or what --runtime-sizes needs")
    p.add_argument("-m", type=SIZE, help="core tile rows (default: the paper's balanced kernel)")
    p.add_argument("-k", type=SIZE, help="core tile reduction")
    p.add_argument("-n", type=SIZE, help="core tile columns")
    p.add_argument("--n-aie-cols", "--n_aie_cols", dest="n_aie_cols", type=counted(0, what="a column count"),
                   default=0,
                   help="array columns the design uses (npu1: 1, 2, 4; npu2: 1, 2, 4, 8; default: all)")
    p.add_argument("--mapping", choices=array.MAPPINGS, default=None,
                   help="whole-array: every core row, A split over the rows; decode: one core row, m covering the "
                   "padded M, each column a slice of N, B read once (for M <= 16); decode-split: every core its own "
                   "slice of N, B over every shim channel but A's (docs/int4_decode.md section 13). Default: the "
                   "model's fastest for decode-shaped calls, else whole-array")
    p.add_argument("--k-mt", "--k_mt", dest="k_mt", type=SIZE, help="K extent of an A (and column-major B) "
                   "memtile object; a multiple of k")
    p.add_argument("--rho", type=counted(1, what="rho"), help="asymmetric tile buffering: A tiles of m / rho rows "
                   "stream past each B tile, C keeps m rows (default 1 with given tiles; the tuner's choice without)")
    p.add_argument("--dtype_in", "--dtype-in", default=None, help="A's type: bf16, i8, i16, or bfp16 (npu2; "
                   "default bf16)")
    p.add_argument("--dtype_b", "--dtype-b", dest="dtype_b", default=None,
                   help="B's type when it differs from A's: bfp16 (npu2, with bf16 or bfp16 A), or i4 (int4 weights "
                   "with i8 A: packed two per byte, exact int32 accumulation; with bf16 A (W4A16): --group-size)")
    p.add_argument("--group-size", "--group_size", dest="group_size", type=counted(0, what="a group size"),
                   default=0, help="W4A16 (--dtype_in bf16 --dtype_b i4): rows of K per bf16 weight scale, "
                   "32, 64 or 128 (the scales ride in B's objects)")
    p.add_argument("--zero-points", "--zero_points", dest="zero_points", action="store_true",
                   help="W4A16: one int4 zero point per group and column too (w = (q - z) s)")
    p.add_argument("--dtype_out", "--dtype-out", default=None, help="C's type: bf16/f32 for bf16; i8/i16/i32 for "
                   "ints; bf16/f32/bfp16 for bfp16 GEMMs (default: bf16, i32, or bfp16 for bfp16 A)")
    p.add_argument("--acc", default=None, help="C's type in L1 while it accumulates across K. Default: the "
                   "kernel's accumulator (f32 for float C, i32, or i64 for 16-bit acc64 mmuls), C rounded and "
                   "saturated once after the last k-step, so C is A @ B rounded once; 'out': C kept in --dtype_out "
                   "and requantized after every k-step, as mlir-aie's examples and the papers (half the C memory "
                   "or less, a rounding and saturation per k-step); bf16 or f32 for a bfp16 C")
    p.add_argument("--preset", choices=sorted(prec.PRESETS), default=None,
                   help="the ATB paper's precision configs: config1 = bf16 A x bfp16 B -> bf16, config2 = "
                   "bfp16 x bfp16 -> bfp16, config3 = config2 with C accumulated in bf16")
    p.add_argument("--b-col-maj", "--b_col_maj", dest="b_col_maj", nargs="?", const=True, default=False,
                   type=_b_col_maj, help="B stored column-major (N x K); takes an optional 0/1")
    p.add_argument("--a-col-maj", "--a_col_maj", dest="a_col_maj", nargs="?", const=True, default=False,
                   type=_b_col_maj, help="A stored column-major (K x M, i.e. A^T row-major); takes an optional 0/1")
    p.add_argument("--c-col-maj", "--c_col_maj", dest="c_col_maj", nargs="?", const=True, default=False,
                   type=_b_col_maj, help="C written column-major (N x M, i.e. C^T row-major; scalar outputs); takes "
                   "an optional 0/1")
    p.add_argument("--b-pack", "--b_pack", dest="b_pack", choices=("tiles", "strips"), default=None,
                   help="DRAM layout of a bfp16 or int4 B: tiles (bfp16: a matrix of 8x8 tiles; int4: packed rows) or "
                   "strips (each core column's K x n strip contiguous; bfp16: mlir-aie's ATB packing); default: the "
                   "model's choice")
    p.add_argument("--emulate-bf16-mmul-with-bfp16", dest="emulate", nargs="?", const=True, default=None,
                   type=_b_col_maj, help="bf16 via the bfp16 datapath (8x8x8 mmul); npu2's default, 0 turns it off")
    p.add_argument("--chess", action="store_true",
                   help="compile the kernel with xchesscc (CHESS=1) instead of Peano; sets its stack")
    p.add_argument("--opt-level", "--opt_level", dest="opt_level", type=int, choices=peano.OPT_LEVELS, default=None,
                   help=f"Peano's -O for the kernel (OPT_LEVEL=; default {peano.DEFAULT_OPT_LEVEL}, as mlir-aie's "
                   "PEANOWRAP2(P)_FLAGS; 1 is mlir-aie's workaround for the -O2 miscompiles llvm-aie #1262 and "
                   "mlir-aie #3792 report)")
    p.add_argument("--mmul", type=_shape, help="aie::mmul shape RxSxT (default: the device's for dtype_in)")
    p.add_argument("--expansion", type=_expansion, default=None,
                   help="accumulators per cluster ERxET (2x2, 4x2, 2x4, 4x4; default: the widest whose registers fit "
                   "and that splits the tile)")
    p.add_argument("--kernel-loops", "--kernel_loops", dest="kernel_loops", choices=LOOPS, default=None,
                   help="which kernel loop is software-pipelined, the inner ones unrolled (default: the most "
                   "overlapping one whose code fits, when the registers leave room to overlap)")
    p.add_argument("--convert-once", "--convert_once", dest="convert_once", nargs="?", const=True, default=None,
                   type=_b_col_maj, help="npu2 bf16 on the bfp16 datapath: convert A and B to bfp16 once per call / "
                   "k-step instead of at every mmul (the same bits; default: the kernel the model predicts faster, "
                   "each tuned with its own tiles)")
    p.add_argument("--l1-alloc", "--l1_alloc", dest="l1_alloc", choices=L1_SCHEMES, default=None,
                   help="mlir-aie's L1 allocator for every core (default: the plan whose DMA and core buffers share "
                   "the fewest banks, steered with reserved bytes where that helps)")
    p.add_argument("--queue-groups", type=counted(1, what="a group count"), default=Options.queue_groups,
                   help="task groups in flight per shim (at most the 4-deep shim task queue)")
    p.add_argument("--task-span", "--task_span", dest="task_span", type=counted(0, what="a block count"),
                   default=None, help="output blocks along N each shim task carries when their patterns make one "
                   "BD (1: a task per block; 0: as many as one BD expresses; default: 1, or the search's choice)")
    p.add_argument("--stack", type=counted(0, what="a stack size", example="3328"), default=0,
                   help="core stack bytes (default: mlir-aie's 3328 = 0xD00, more for bfp16 kernels; aiecc "
                   "checks it against the kernel's measured frames)")
    p.add_argument("--shift", type=counted(0, 63, "a shift"), default=0, help="SRS shift of integer outputs")
    p.add_argument("--rounding", type=_mode(Rounding), default="conv_even", help="rounding mode the kernel sets")
    p.add_argument("--saturation", type=_mode(Saturation), default="saturate",
                   help="saturation the kernel sets for narrowed integers")
    p.add_argument("--bias", action="store_true",
                   help="fused epilogue: add a bias over N to C after its last k-step (f32 for bf16 C, i32 for "
                   "requantized C; data in the epilogue tile, one more B object per output tile)")
    p.add_argument("--activation", choices=epilogue_rule.ACTIVATIONS, default=None,
                   help="fused epilogue: the activation after the bias (bf16 C: relu, silu, gelu as mlir-aie's aie2 "
                   "bf16 kernels compute them; requantized C: relu, its act_min)")
    p.add_argument("--clamp", type=_clamp, default=None,
                   help="fused epilogue: clamp a bf16 C to LO,HI after the activation (bf16 bounds; write "
                   "--clamp=-6,6)")
    p.add_argument("--requant", choices=tuple(epilogue_rule.REQUANTS), default=None,
                   help="fused epilogue: TFLite's per-channel requantization of an i32 accumulator to an i8 / i16 C "
                   "(double rounding; multipliers, shifts, zero point and act_min/max are call data)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _clamp(value: str) -> tuple[float, float]:
    """LO,HI: two finite numbers, LO <= HI."""
    parts = value.split(",")
    try:
        lo, hi = (float(x) for x in parts) if len(parts) == 2 else (math.nan, math.nan)
    except ValueError:
        lo = hi = math.nan
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise argparse.ArgumentTypeError(f"expected LO,HI (two finite numbers, LO <= HI) such as -6,6, got {value!r}")
    return lo, hi


def types(a: argparse.Namespace) -> prec.Precision:
    """The operand types the flags ask for: a preset, or --dtype_in/--dtype_b/--dtype_out/--acc."""
    given = {"--dtype_in": a.dtype_in, "--dtype_b": a.dtype_b, "--dtype_out": a.dtype_out, "--acc": a.acc}
    if a.preset is not None:
        p = prec.PRESETS[a.preset]
        for (flag, value), fixed in zip(given.items(), (p.a, p.b, p.out, p.acc)):
            if flag == "--acc" and value == prec.ACC_OUT and fixed == p.out:
                continue  # the preset keeps C in its output type: the same thing said twice
            if value is not None and value != fixed:
                raise ConfigError(f"--preset {a.preset} sets {flag} {fixed}, not {value}",
                                  f"drop {flag} or the preset")
        return p
    dtype_in = a.dtype_in or "bf16"
    dtype_out = a.dtype_out or default_out(dtype_in)
    return prec.resolve(dtype_in, a.dtype_b, dtype_out, a.acc)


def sizes(a: argparse.Namespace) -> tuple[tuple[int, int, int], str]:
    """The problem the design is built for (with --runtime-sizes: the largest of each dimension,
    or -M -K -N where given) and which sizes it serves (GemmConfig.runtime_sizes)."""
    given = (a.M, a.K, a.N)
    listed = getattr(a, "runtime_sizes", None)
    mode = getattr(a, "runtime_mode", None)
    weights = getattr(a, "weights", None)
    call_layouts(a)  # one per listed size
    if weights is not None and (not listed or len(weights) != len(listed)):
        raise ConfigError(f"--weights gives {len(weights)} weights for {len(listed or ())} --runtime-sizes",
                          "give one weight per size listed in --runtime-sizes")
    if not listed:
        missing = [f"-{name}" for name, v in zip("MKN", given) if v is None]
        if missing:
            raise ConfigError(f"no problem size: {' '.join(missing)} missing", "give -M -K -N, or --runtime-sizes")
        return (a.M, a.K, a.N), mode or "fixed"
    most = tuple(max(getattr(p, name) for p in listed) for name in "MKN")
    for name, value, top in zip("MKN", given, most):
        if value is not None and value < top:
            raise ConfigError(f"-{name} {value} is less than the {top} that --runtime-sizes asks for",
                              f"drop -{name} or give at least {top}")
    problem = tuple(v if v is not None else top for v, top in zip(given, most))
    needed = "mnk" if len({p.K for p in listed}) > 1 or problem[1] != most[1] else "mn"
    if mode == "mn" and needed == "mnk":
        ks = sorted({p.K for p in listed} | {problem[1]})
        raise ConfigError(f"--runtime-mode mn serves one K, and the sizes (with -K) ask for K = "
                          f"{', '.join(map(str, ks))}", "use --runtime-mode mnk, or drop it")
    return (problem[0], problem[1], problem[2]), mode or needed


def call_layouts(a: argparse.Namespace) -> tuple[Layouts, ...] | None:
    """Each --runtime-sizes call's layouts (--call-layouts), or None when not given."""
    given = getattr(a, "call_layouts", None)
    listed = getattr(a, "runtime_sizes", None)
    if given is not None and (not listed or len(given) != len(listed)):
        raise ConfigError(f"--call-layouts gives {len(given)} layouts for {len(listed or ())} --runtime-sizes",
                          "give one layout (like rrc) per size listed in --runtime-sizes")
    return given


def check_device_flags(a: argparse.Namespace) -> None:
    """The flags whose range depends on the device, named by their own flag (GemmConfig names its
    fields, as the Python operator does)."""
    dev = device(a.dev)
    if a.n_aie_cols and not array.columns_ok(dev, a.n_aie_cols):
        counts = ", ".join(map(str, dev.column_devices))
        raise ConfigError(f"--n-aie-cols {a.n_aie_cols}: {dev.name} designs use {counts} columns",
                          f"give --n-aie-cols {counts.replace(', ', ' or ')}, or leave it out for all")
    if a.stack and not array.stack_ok(dev, a.stack):
        raise ConfigError(f"--stack {a.stack}: the core stack is a multiple of 16 bytes below the "
                          f"{dev.l1_bytes:,} B of L1", "give --stack like 3328 (0xD00) or 4096, or leave it out")
    depth = dev.dma[TileKind.SHIM].task_queue_depth
    if not array.queue_ok(dev, a.queue_groups):
        raise ConfigError(f"--queue-groups {a.queue_groups}: a shim channel's task queue holds {depth} tasks "
                          "(the hardware drops a push onto a full queue)", f"give --queue-groups 1 to {depth}")


def options(a: argparse.Namespace) -> Options:
    """Every option the flags give (an absent flag leaves its option open: derived on read)."""
    check_device_flags(a)
    p = types(a)
    _, served = sizes(a)
    rows = array.mapping_rows(device(a.dev), a.mapping) if getattr(a, "mapping", None) else 0
    cols = array.mapping_cols(device(a.dev), a.mapping) if getattr(a, "mapping", None) else 0
    return Options(a.dev, p.a, p.out, bool(a.b_col_maj), rows=rows, cols=cols or a.n_aie_cols or 0,
                   emulate_bf16_with_bfp16=a.emulate,
                   compiler="chess" if a.chess else None, mmul_shape=a.mmul, queue_groups=a.queue_groups,
                   stack_bytes=a.stack or 0, shift=a.shift, rounding=a.rounding, saturation=a.saturation,
                   dtype_b=p.b, acc=p.acc if a.preset is not None else a.acc, b_pack=a.b_pack,
                   expansion=a.expansion, kernel_loops=a.kernel_loops, convert_once=a.convert_once,
                   l1_alloc=a.l1_alloc, runtime_sizes=served, a_col_maj=bool(a.a_col_maj),
                   c_col_maj=bool(a.c_col_maj), bias=bool(a.bias), activation=a.activation, clamp=a.clamp,
                   requant=a.requant, group_size=a.group_size, zero_points=bool(a.zero_points),
                   task_span=a.task_span, opt_level=a.opt_level)


def problem(a: argparse.Namespace) -> Problem:
    """The size the design is built for (with --runtime-sizes: the largest it serves)."""
    return Problem(*sizes(a)[0])


def base_config(a: argparse.Namespace, m: int = 0, k: int = 0, n: int = 0, k_mt: int = 0) -> GemmConfig:
    """The problem and every option the flags give, with the tiling as passed (0: still open)."""
    return GemmConfig(options=options(a), tiling=Tiling(m, k, n, k_mt, a.rho or 1), size=problem(a))


def pins(a: argparse.Namespace) -> Pins:
    """The tiling, rho, sizes and weights the flags fix (the rest is left to search.choose)."""
    return Pins(a.m, a.k, a.n, a.k_mt, a.rho, sizes=getattr(a, "runtime_sizes", None),
                weights=getattr(a, "weights", None))


def request(a: argparse.Namespace) -> Request:
    """What the flags ask for: the options and the size they give, and the pins."""
    return Request(options(a), problem(a), pins(a))


def config_args(c: GemmConfig) -> list[str]:
    """gemm-gen flags that rebuild `c` (the inverse of base_config and pins, every tile pinned),
    defaults left out."""
    args = ["--dev", c.device, "-M", str(c.M), "-K", str(c.K), "-N", str(c.N), "-m", str(c.m), "-k", str(c.k),
            "-n", str(c.n), "--k-mt", str(c.k_mt), "--dtype_in", c.dtype_in, "--dtype_out", c.dtype_out,
            "--b-col-maj", str(int(c.b_col_maj))]
    if c.a_col_maj:
        args += ["--a-col-maj", "1"]
    if c.c_col_maj:
        args += ["--c-col-maj", "1"]
    mapping = array.mapping_of(c.dev, c.rows, c.cols)
    if c.cols != c.dev.columns and not array.mapping_cols(c.dev, mapping):
        args += ["--n-aie-cols", str(c.cols)]
    if c.rows != c.dev.core_rows:
        args += ["--mapping", mapping]
    if c.dtype_b != c.dtype_in:
        args += ["--dtype_b", str(c.dtype_b)]
    if c.acc != c.default_acc:
        args += ["--acc", prec.ACC_OUT if c.acc == c.dtype_out else str(c.acc)]
    if c.group_size:
        args += ["--group-size", str(c.group_size)] + (["--zero-points"] if c.zero_points else [])
    base = GemmConfig(c.device, c.M, c.K, c.N, c.m, c.k, c.n, c.k_mt, c.dtype_in, c.dtype_out,
                      emulate_bf16_with_bfp16=c.emulate_bf16_with_bfp16, compiler=c.compiler, dtype_b=c.dtype_b,
                      acc=c.acc, mmul_shape=c.mmul_shape)
    block = c.precision.block
    if c.emulate_bf16_with_bfp16 != (not block and emulation_default(c.device, c.dtype_in)):
        args += ["--emulate-bf16-mmul-with-bfp16", str(int(bool(c.emulate_bf16_with_bfp16)))]
    if c.compiler == "chess" and not block:
        args += ["--chess"]
    if c.mmul_shape is not None:
        args += ["--mmul", "x".join(map(str, c.mmul_shape))]
    if c.t_b.is_block:
        args += ["--b-pack", c.b_pack]
    if c.expansion is not None:
        args += ["--expansion", "x".join(map(str, c.expansion))]
    if c.kernel_loops is not None:
        args += ["--kernel-loops", c.kernel_loops]
    if c.convert_once != base.convert_once:
        args += ["--convert-once", str(int(bool(c.convert_once)))]
    if c.l1_alloc is not None:
        args += ["--l1-alloc", c.l1_alloc]
    if c.runtime_sizes != "fixed":
        args += ["--runtime-mode", c.runtime_sizes]
    if c.bias:
        args += ["--bias"]
    if c.activation != "none":
        args += ["--activation", c.activation]
    if c.clamp is not None:
        args += [f"--clamp={c.clamp[0]:g},{c.clamp[1]:g}"]
    if c.requant is not None:
        args += ["--requant", c.requant]
    for flag, name in (("--rho", "rho"), ("--queue-groups", "queue_groups"), ("--task-span", "task_span"),
                       ("--stack", "stack_bytes"), ("--opt-level", "opt_level"),
                       ("--shift", "shift"),
                       ("--rounding", "rounding"), ("--saturation", "saturation")):
        if getattr(c, name) != getattr(base, name):
            args += [flag, str(getattr(c, name))]
    return args
