"""GemmConfig: every number of one whole-array output-stationary GEMM design (its checks: checks.py).

Tiling (Striking the Balance, sec. 4.1): r x s x t mmul -> m x k x n kernel in L1 -> rows x cols
cores (native size (m*rows) x k_mt x (n*cols)) -> the problem M x K x N, padded up to a multiple of
the native size on the host (inputs with zeros, C cropped).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from . import precision as prec
from .call import CallPlan, plan_call
from .dtypes import DType, dtype
from .epilogue import Epilogue
from .errors import ConfigError
from .hw.devices import Device, MmulShape, device
from .numerics import KernelNumerics
from .precision import Precision
from .rounding import Rounding, Saturation
from .rules import epilogue as rules_epilogue
from .rules import kernel_variant as kv
from .rules import l1, memtile, padding, peano, walks
from .rules.defaults import Resolved, default_acc, emulation_default, has_epilogue, resolve
from .rules.defaults import convert_once_problem as _convert_once_problem
from .rules.defaults import mmul as mmul_of
from .rules.dequant import dequant_code_bytes
from .rules.kernel_variant import KERNEL_EXPANSION, KernelVariant
from .rules.kernel_variant import choose as choose_variant
from .rules.memtile import MemtileBuffer, c_blocks_transposed
from .spec import Options, Problem, Tiling, split_fields

# Balanced kernels of Striking the Balance, Tables 2 and 3 (B column-major): (m, k, n, k_mt).
PAPER_TILES: dict[tuple[str, str, str], tuple[int, int, int, int]] = {
    ("npu1", "i8", "i8"): (112, 112, 112, 448),
    ("npu1", "i8", "i16"): (96, 112, 96, 448),
    ("npu1", "i8", "i32"): (80, 88, 96, 352),
    ("npu1", "bf16", "bf16"): (96, 56, 96, 224),
    ("npu2", "i8", "i8"): (144, 72, 144, 432),
    ("npu2", "i8", "i16"): (128, 72, 112, 432),
    ("npu2", "i8", "i32"): (96, 64, 96, 384),
    ("npu2", "bf16", "bf16"): (112, 48, 96, 384),
}

# The ATB paper's tiles for its precision configs (Table 2, mlir-aie's example): (m, k, n, k_mt, rho).
# k_mt: mlir-aie's 512 for config1's bf16 A; a bfp16 A strip of k_mt values is k_mt / 8 tiles of 18
# words, so its shim run must stay within 1023 words (k_mt <= 448).
ATB_TILES: dict[str, tuple[int, int, int, int, int]] = {
    "config1": (128, 64, 128, 512, 4),
    "config2": (192, 128, 96, 384, 6),
    "config3": (128, 64, 128, 448, 4),
}

RUNTIME_SIZES = ("fixed", "mn", "mnk")  # GemmConfig.runtime_sizes
B_PACKS = ("tiles", "strips")  # DRAM layouts of a bfp16 or int4 B (GemmConfig.b_pack)


def b_packs(t_b: DType, group_size: int = 0) -> tuple[str, ...]:
    """The DRAM packings a B of type t_b can take (the search weighs them when the option is open): both
    for a B the host re-encodes anyway (bfp16, int4: DType.host_encoded), where strips cost no extra copy;
    tiles (the user's own layout) for any other. A W4A16 B (group_size > 0) has one layout, each column's
    objects in k-step order (design/b_objects.py): the option does not apply, so "tiles", its default."""
    return B_PACKS if t_b.host_encoded and not group_size else ("tiles",)


# mlir-aie's L1 allocators (aie.tile allocation_scheme; IRON Worker(allocation_scheme=...))
L1_SCHEMES = ("bank-aware", "basic-sequential")


# GemmConfig's fields as it reads them, in the order of its flat constructor and of to_json()
FIELDS = ("device", "M", "K", "N", "m", "k", "n", "k_mt", "dtype_in", "dtype_out", "b_col_maj", "rows", "cols",
          "emulate_bf16_with_bfp16", "compiler", "mmul_shape", "stack_bytes", "queue_groups", "rho", "depth_ab_l1",
          "depth_ab_l2", "depth_c_l1", "depth_c_l2", "rounding", "saturation", "shift", "dtype_b", "acc", "b_pack",
          "expansion", "kernel_loops", "convert_once", "l1_alloc", "runtime_sizes", "a_col_maj", "c_col_maj",
          "bias", "activation", "clamp", "requant", "group_size", "zero_points", "task_span", "opt_level")
# the fused epilogue's fields: written by to_json only when set, so an epilogue-free config keeps its JSON
# text, its build key and its cached builds
EPILOGUE_FIELDS = ("bias", "activation", "clamp", "requant")
# W4A16's group scales: written by to_json only when set, for the same reason
GROUP_FIELDS = ("group_size", "zero_points")
# spanning shim tasks (design/spans.py): written by to_json only when not 1, for the same reason
SPAN_FIELDS = ("task_span",)
# the kernel's optimisation level: written by to_json only when not Peano's default, for the same reason
OPT_FIELDS = ("opt_level",)


@dataclass(frozen=True, init=False, eq=False)
class GemmConfig:
    """What one xclbin fixes (device, columns, types, tiles, depths, kernel) and the size it is built
    for (with runtime sizes: the largest it serves): the options as given (spec.Options), the
    tiling and the size. Every option reads as its value, defaults derived from what was given
    (rules/defaults.py: resolve), so `dataclasses.replace(config, dtype_in="i8", dtype_out="i32")` derives B's
    type, the accumulator and the stack afresh. `checks.check_config` checks the config's own rules;
    design/serve.py's `check()` adds every DMA pattern.

    Built as `GemmConfig(device, M, K, N, m, k, n, k_mt, dtype_in, dtype_out, ...)` with any field of
    FIELDS by name, or from its parts (`options=`, `tiling=`, `size=`, flat fields overriding them).
    Two configs are equal when every field reads the same."""

    options: Options
    tiling: Tiling
    size: Problem

    def __init__(self, *args: Any, options: Options | None = None, tiling: Tiling | None = None,
                 size: Problem | None = None, **flat: Any) -> None:
        if len(args) > len(FIELDS):
            raise TypeError(f"GemmConfig takes at most {len(FIELDS)} positional fields, not {len(args)}")
        for name, value in zip(FIELDS, args):
            if name in flat:
                raise TypeError(f"GemmConfig got {name} twice")
            flat[name] = value
        given_options, given_tiling, given_size, unknown = split_fields(flat)
        if unknown:
            raise TypeError(f"GemmConfig has no field {', '.join(sorted(unknown))}")
        if options is None:
            if "device" not in given_options:
                raise TypeError("GemmConfig needs a device")
            options = Options(**given_options)
        elif given_options:
            options = replace(options, **given_options)
        if tiling is None:
            missing = [n for n in ("m", "k", "n", "k_mt") if n not in given_tiling]
            if missing:
                raise TypeError(f"GemmConfig needs {', '.join(missing)}")
            tiling = Tiling(**given_tiling)
        elif given_tiling:
            tiling = replace(tiling, **given_tiling)
        if size is None or given_size:
            values = {**(size.to_json() if size is not None else {}), **given_size}
            missing = [n for n in ("M", "K", "N") if n not in values]
            if missing:
                raise TypeError(f"GemmConfig needs {', '.join(missing)}")
            size = Problem(**values)
        if options.device != device(options.device).name:
            options = replace(options, device=device(options.device).name)  # one spelling per device
        object.__setattr__(self, "options", options)
        object.__setattr__(self, "tiling", tiling)
        object.__setattr__(self, "size", size)
        self._resolved  # noqa: B018 - derive the defaults now: a bad option fails here, as given

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GemmConfig) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    @cached_property
    def _key(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in FIELDS)

    def with_(self, **changes: Any) -> GemmConfig:
        """This config with fields of FIELDS changed by name (dataclasses.replace, typed for the
        flat fields): every default the changed fields decide is derived afresh."""
        return replace(self, **changes)

    # ---- the fields, as given or with their defaults ------------------------------------------
    @property
    def device(self) -> str:
        return self.options.device

    @property
    def M(self) -> int:
        return self.size.M

    @property
    def K(self) -> int:
        return self.size.K

    @property
    def N(self) -> int:
        return self.size.N

    @property
    def m(self) -> int:
        return self.tiling.m

    @property
    def k(self) -> int:
        return self.tiling.k

    @property
    def n(self) -> int:
        return self.tiling.n

    @property
    def k_mt(self) -> int:
        return self.tiling.k_mt

    @property
    def rho(self) -> int:
        return self.tiling.rho

    @property
    def dtype_in(self) -> str:
        return self.options.dtype_in

    @property
    def dtype_out(self) -> str:
        return self._resolved.dtype_out

    @property
    def b_col_maj(self) -> bool:
        return self.options.b_col_maj

    @property
    def a_col_maj(self) -> bool:
        return self.options.a_col_maj

    @property
    def c_col_maj(self) -> bool:
        return self.options.c_col_maj

    @property
    def c_t_blocks(self) -> bool:
        """The kernel keeps C's r x t blocks transposed in L1 (column-major C narrower than 32 bits:
        the memtile then drains C's columns in whole words; l1_layout.c_layout)."""
        return c_blocks_transposed(self.c_col_maj, self.t_out)

    @property
    def rows(self) -> int:
        return self._resolved.rows

    @property
    def cols(self) -> int:
        return self._resolved.cols

    @property
    def emulate_bf16_with_bfp16(self) -> bool:
        return self._resolved.emulate_bf16_with_bfp16

    @property
    def compiler(self) -> str:
        return self._resolved.compiler

    @property
    def mmul_shape(self) -> MmulShape | None:
        return self.options.mmul_shape

    @property
    def stack_bytes(self) -> int:
        return self._resolved.stack_bytes

    @property
    def queue_groups(self) -> int:
        return self.options.queue_groups

    @property
    def opt_level(self) -> int:
        """The kernel compile's -O level (Peano; rules/peano.py DEFAULT_OPT_LEVEL when not given)."""
        return peano.DEFAULT_OPT_LEVEL if self.options.opt_level is None else self.options.opt_level

    @property
    def task_span(self) -> int:
        """Output blocks per shim task along N (1: one task per block; 0: the most one BD expresses)."""
        return 1 if self.options.task_span is None else self.options.task_span

    @property
    def depth_ab_l1(self) -> int:
        return self.options.depth_ab_l1

    @property
    def depth_ab_l2(self) -> int:
        return self.options.depth_ab_l2

    @property
    def depth_c_l1(self) -> int:
        return self.options.depth_c_l1

    @property
    def depth_c_l2(self) -> int:
        return self.options.depth_c_l2

    @property
    def rounding(self) -> str:
        return self.options.rounding

    @property
    def saturation(self) -> str:
        return self.options.saturation

    @property
    def shift(self) -> int:
        return self.options.shift

    @property
    def dtype_b(self) -> str:
        return self._resolved.dtype_b

    @property
    def acc(self) -> str:
        """C's type in L1 while it accumulates (the option's "out" reads as dtype_out)."""
        return self._resolved.acc

    @property
    def b_pack(self) -> str:
        return self._resolved.b_pack

    @property
    def expansion(self) -> tuple[int, int] | None:
        return self.options.expansion

    @property
    def kernel_loops(self) -> str | None:
        return self.options.kernel_loops

    @property
    def convert_once(self) -> bool:
        return self._resolved.convert_once

    @property
    def l1_alloc(self) -> str | None:
        return self.options.l1_alloc

    @property
    def runtime_sizes(self) -> str:
        return self.options.runtime_sizes

    @property
    def bias(self) -> bool:
        return self.options.bias

    @property
    def activation(self) -> str:
        return self.options.activation or "none"

    @property
    def clamp(self) -> tuple[float, float] | None:
        return self.options.clamp

    @property
    def requant(self) -> str | None:
        return self.options.requant

    @property
    def group_size(self) -> int:
        """Rows of K per int4 weight scale (W4A16; 0: no group scales)."""
        return self.options.group_size

    @property
    def zero_points(self) -> bool:
        return self.options.zero_points

    @property
    def epilogue(self) -> Epilogue:
        """What the kernel does to each C tile after its last k-step (rules/epilogue.py names the
        options it cannot take: checks.check_epilogue)."""
        return rules_epilogue.epilogue_of(self.bias, self.activation, self.clamp, self.requant)

    @cached_property
    def _resolved(self) -> Resolved:
        return resolve(self.options)

    @property
    def default_acc(self) -> str:
        """C's L1 type when --acc is not given (precision.wide_acc) for this output and mmul; the
        output type itself when the types are invalid, for checks.check_types to name the problem."""
        return default_acc(self.dev, self.dtype_in, self.dtype_out, self.mmul)

    # ---- what the fields mean --------------------------------------------------------------
    @property
    def dev(self) -> Device:
        return device(self.device)

    @property
    def t_in(self) -> DType:
        return dtype(self.dtype_in)

    @property
    def t_out(self) -> DType:
        return dtype(self.dtype_out)

    @property
    def t_b(self) -> DType:
        return dtype(str(self.dtype_b))

    @property
    def t_acc(self) -> DType:
        """C's type in L1 while it accumulates."""
        return dtype(str(self.acc))

    @property
    def precision(self) -> Precision:
        return prec.resolve(self.dtype_in, self.dtype_b, self.dtype_out, self.acc)

    @property
    def mmul(self) -> MmulShape:
        return mmul_of(self.dev, self.mmul_shape, self.precision, self.emulate_bf16_with_bfp16)

    @property
    def r(self) -> int:
        return self.mmul[0]

    @property
    def s(self) -> int:
        return self.mmul[1]

    @property
    def t(self) -> int:
        return self.mmul[2]

    @property
    def convert_once_problem(self) -> tuple[str, str] | None:
        """Why this GEMM cannot use the convert-once bf16 kernel ((what, fix) for a ConfigError), or
        None when it can (rules/defaults.py)."""
        return _convert_once_problem(self.dev, self.precision, self.emulate_bf16_with_bfp16, self.mmul_shape,
                                     self.compiler, not self.epilogue_free)

    @property
    def block_kernel(self) -> bool:
        """Whether the kernel is a bfp16 one (templates/mm_bfp16.cc.j2): a bfp16 precision, or
        bf16 converted once per call."""
        return kv.block_kernel(self.precision, bool(self.convert_once))

    @property
    def variant(self) -> KernelVariant:
        """The kernel's accumulator expansion and loop structure (bfp16 kernels: their fixed one)."""
        if self.block_kernel:
            if self.expansion not in (None, (2, 2)) or self.kernel_loops not in (None, "k-pipelined"):
                raise ConfigError("bfp16 kernels have one variant (2x2 clusters of 8x8 tiles, K loop pipelined)",
                                  "drop --expansion and --kernel-loops")
            return KernelVariant(2, 2, "k-pipelined")
        operands = self.dev.operands(self.dtype_in, self.dtype_b)  # "i8xi4" for int4 weights
        return choose_variant(self.dev, operands, self.mmul, bool(self.emulate_bf16_with_bfp16), self.t_ma,
                              self.k, self.n, self.expansion, self.kernel_loops, self.code_reserve,
                              str(self.compiler))

    @property
    def code_reserve(self) -> int:
        """Program bytes the matmul function holds besides its loop nest: W4A16's dequantization pass, which the
        automatic loop structure leaves room for (rules/kernel_variant.auto_loops)."""
        return dequant_code_bytes(self.dev.name, bool(self.zero_points), self.mmul) if self.group_size else 0

    @property
    def numerics(self) -> KernelNumerics:
        return KernelNumerics(
            self.t_in, self.t_out, Rounding[self.rounding.upper()], Saturation[self.saturation.upper()],
            self.shift, bfp16_inputs=bool(self.emulate_bf16_with_bfp16) and self.t_in.is_float,
            acc_bits=self.acc_bits,
            dtype_b=self.t_b, acc=self.t_acc, epilogue=self.epilogue,
        )

    @property
    def c_split_rows(self) -> int:
        """With C converted after its last call (acc != dtype_out): how many of the m accumulator
        rows live in the C object itself (whole row pairs of the kernel, as many as its bytes
        hold); the other m - c_split_rows live in a worker-local buffer (mlir-aie config3's layout)."""
        return l1.c_split_rows(self.precision, self.m, self.n, KERNEL_EXPANSION * self.r)

    @property
    def t_ma(self) -> int:
        """Rows of an A tile in L1 (T_MA = m / rho); C keeps all m rows (T_MC)."""
        return l1.a_rows(self.m, self.rho)

    # ---- sizes -------------------------------------------------------------------------------
    @cached_property
    def native(self) -> tuple[int, int, int]:
        """The GEMM the whole array computes natively: (m*rows) x k_mt x (n*cols)."""
        return self.m * self.rows, self.k_mt, self.n * self.cols

    @cached_property
    def call(self) -> CallPlan:
        """How the design computes the problem it was made for (gemm_gen/call.py)."""
        return plan_call(self, Problem(self.M, self.K, self.N))

    @property
    def b_l2_k(self) -> int:
        """K extent of a B object in the memtile: k_mt when column-major tiles, else k (row-major, or
        one L1 tile of a strip)."""
        return self.k_mt if memtile.b_chunked(self.b_col_maj, self.b_pack) else self.k

    @property
    def a_shims(self) -> int:
        """Shim/memtile columns that carry A (mlir-aie's n_shim_mem_A): one per core row, or every
        column when there are fewer columns than rows."""
        return memtile.a_shims(self.rows, self.cols)

    @property
    def a_rows_per_shim(self) -> int:
        """Core rows whose A tiles one A memtile splits off (mlir-aie's n_A_tiles_per_shim)."""
        return memtile.a_rows_per_shim(self.rows, self.cols)

    def a_shim_col(self, i: int) -> int:
        """Column of A shim `i` (npu2's 8 columns carry A on the even ones, sec. 4.2.2)."""
        return memtile.a_shim_col(i, self.rows, self.cols)

    def a_col(self, row: int) -> int:
        """Column whose shim and memtile carry the A tiles of core row `row`."""
        return self.a_shim_col(row // self.a_rows_per_shim)

    @cached_property
    def a_cols(self) -> tuple[int, ...]:
        return tuple(self.a_col(i) for i in range(self.rows))

    # ---- budgets -----------------------------------------------------------------------------
    @property
    def l1_overhead(self) -> dict[str, int]:
        """The L1 bytes of each core that do not depend on the tiling: the runtime parameters it
        reads (with runtime K), the tanh table's two copies (a SiLU / GELU epilogue), its stack and aiecc's
        per-core static data (hw.devices.CORE_STATIC, the parts that take bytes): rules/l1.py."""
        return l1.overhead(self.dev, self.stack_bytes, self.runtime_sizes, self.activation == "runtime",
                           self.epilogue.uses_tanh)

    @property
    def l1_options(self) -> l1.L1Options:
        """What the L1 rules (rules/l1.py) read of this config besides its tiling; the tuner passes
        the same to them with its candidates."""
        return l1.L1Options(self.precision, bool(self.convert_once), KERNEL_EXPANSION * self.r, self.depth_ab_l1,
                            self.depth_c_l1, tuple(self.l1_overhead.items()), self.group_size, self.zero_points)

    @property
    def l1_parts(self) -> dict[str, int]:
        """Bytes of each core's L1 use: A, B (double-buffered), C (single), the kernel's scratch,
        then l1_overhead (runtime parameters, stack, aiecc's per-core static data): rules/l1.py."""
        return l1.parts(self.l1_options, self.m, self.k, self.n, self.rho)

    @property
    def l1_bytes(self) -> int:
        return sum(self.l1_parts.values())

    @cached_property
    def walk_options(self) -> walks.WalkOptions:
        """What the DMA walks (rules/walks.py) read of this config besides its tiling and its call."""
        return walks.WalkOptions(self.dev, (self.t_in, self.t_b, self.t_out), self.mmul, self.rows, self.cols,
                                 self.a_col_maj, self.b_col_maj, self.c_col_maj, self.b_pack, self.group_size,
                                 bool(self.zero_points))

    @property
    def l2_options(self) -> memtile.L2Options:
        """What the memtile rules (rules/memtile.py) read of this config besides its tiling."""
        return memtile.L2Options(self.rows, self.cols, self.t_in, self.t_b, self.t_out,
                                 memtile.b_chunked(self.b_col_maj, self.b_pack), self.depth_ab_l2, self.depth_c_l2,
                                 self.group_size, self.zero_points)

    def l2_pools(self) -> list[memtile.Pool]:
        """The memtile links that own L2 buffers, in mlir-aie's IR order."""
        return memtile.l2_pools(self.l2_options, self.m, self.k, self.n, self.k_mt)

    def memtile_buffers(self) -> list[MemtileBuffer]:
        """Every L2 buffer, each at its own memtile (before placement)."""
        return [MemtileBuffer(f"{p.name}_buff_{i}", p.nbytes, p.col, p.col) for p in self.l2_pools()
                for i in range(p.depth)]

    def memtile_placement(self) -> list[MemtileBuffer]:
        """The L2 buffers where mlir-aie places them (gemm_gen/rules/memtile.py): home, else the less
        used neighbour memtile of the target device; ConfigError when one finds no room or when
        spilled buffers need more than the 4 channels that reach a neighbour."""
        return memtile.place_one(self.l2_pools(), self.dev.target(self.cols)[1], self.dev.memtile_bytes)

    def memtile_bytes_used(self) -> list[int]:
        """Bytes on each memtile of the target device."""
        used = [0] * self.dev.target(self.cols)[1]
        for buf in self.memtile_placement():
            used[buf.home_col] += buf.nbytes
        return used

    @property
    def acc_bits(self) -> int:
        """Bits of one accumulator lane of the kernel's aie::mmul (floats: fp32)."""
        return self.dev.acc_bits(self.dtype_in, self.mmul)

    # ---- presentation ------------------------------------------------------------------------
    @property
    def suffix(self) -> str:
        """mlir-aie's target_suffix MxKxN_mxkxn_<cols>c, extended so that builds never share names:
        types, B layout and k_mt by name, any other non-default knob by a short digest."""
        types = [self.dtype_in] + ([str(self.dtype_b)] if self.dtype_b != self.dtype_in else []) + [self.dtype_out]
        if self.acc != self.default_acc:  # the default accumulator goes unnamed
            types += [f"acc{prec.ACC_OUT if self.acc == self.dtype_out else self.acc}"]
        parts = [f"{self.M}x{self.K}x{self.N}_{self.m}x{self.k}x{self.n}_{self.cols}c", "_".join(types)]
        if self.a_col_maj:
            parts.append("acol")
        if self.b_col_maj:
            parts.append("bcol")
        if self.c_col_maj:
            parts.append("ccol")
        if self.b_pack != "tiles":
            parts.append(f"b{self.b_pack}")
        if self.k_mt != self.k:
            parts.append(f"kmt{self.k_mt}")
        if self.group_size:  # W4A16's group scales (g128), with zero points (g128z)
            parts.append(f"g{self.group_size}{'z' if self.zero_points else ''}")
        named = {"device", "M", "K", "N", "m", "k", "n", "k_mt", "dtype_in", "dtype_out", "b_col_maj", "cols", "b_pack",
                 "dtype_b", "acc", "a_col_maj", "c_col_maj", *GROUP_FIELDS}
        # with the group fields: the defaults they decide (W4A16's convert-once kernel on npu2) are defaults
        default = GemmConfig(self.device, self.M, self.K, self.N, self.m, self.k, self.n, self.k_mt,
                             self.dtype_in, self.dtype_out, dtype_b=self.dtype_b, acc=self.acc,
                             group_size=self.group_size, zero_points=self.zero_points)
        extras = {k: v for k, v in self.to_json().items() if k not in named and v != getattr(default, k)}
        if extras:
            digest = hashlib.sha1(json.dumps(extras, sort_keys=True).encode()).hexdigest()[:8]
            parts.append(digest)
        return "_".join(parts)

    def to_json(self) -> dict[str, object]:
        """Every field as it reads (defaults applied), in FIELDS order: what a build is keyed on. The
        epilogue's fields only when set (an epilogue-free config keeps its key)."""
        out = {name: getattr(self, name) for name in FIELDS
               if name not in EPILOGUE_FIELDS + GROUP_FIELDS + SPAN_FIELDS + OPT_FIELDS}
        if not self.epilogue_free:
            out.update({name: getattr(self, name) for name in EPILOGUE_FIELDS})
        if self.group_size:
            out.update({name: getattr(self, name) for name in GROUP_FIELDS})
        if self.task_span != 1:
            out.update({name: getattr(self, name) for name in SPAN_FIELDS})
        if self.opt_level != peano.DEFAULT_OPT_LEVEL:
            out.update({name: getattr(self, name) for name in OPT_FIELDS})
        return out

    @property
    def epilogue_free(self) -> bool:
        """No epilogue option given (every epilogue field at its default)."""
        return not has_epilogue(self.options)


def default_tiles(dev_name: str, dtype_in: str, dtype_out: str, K: int | None = None,
                  emulate_bf16_with_bfp16: bool | None = None, dtype_b: str | None = None,
                  acc: str | None = None) -> tuple[int, int, int, int]:
    """(m, k, n, k_mt) when the user gives none: the paper's balanced kernel for this device and
    types (the ATB paper's for its precision configs), else the largest balanced square-ish tile
    that fits L1 (the tuner replaces this). `acc` as GemmConfig takes it: None for the default
    accumulator, "out" for C in its output type (the papers' kernels, whose tiles leave no room for
    a wider accumulator), or a type."""
    dev = device(dev_name)
    key = (dev.name, dtype_in, dtype_out)
    block = prec.resolve(dtype_in, dtype_b, dtype_out, acc).block
    if emulate_bf16_with_bfp16 is None:
        emulate_bf16_with_bfp16 = not block and emulation_default(dev.name, dtype_in)
    if acc is None:  # the accumulator a config of these types gets by default
        acc = resolve(Options(dev.name, dtype_in, dtype_out, dtype_b=dtype_b,
                              emulate_bf16_with_bfp16=emulate_bf16_with_bfp16)).acc
    p = prec.resolve(dtype_in, dtype_b, dtype_out, acc)
    if p.block:
        prec.check_precision(p, dev)
        m, k, n, k_mt, _ = ATB_TILES.get(p.name, ATB_TILES["config2"])
    elif key in PAPER_TILES and not p.converts_c:
        m, k, n, k_mt = PAPER_TILES[key]
    else:
        m, k, n, k_mt = _fallback_tiles(dev, dtype_in, dtype_out, emulate_bf16_with_bfp16, p.acc)
    if K is not None:
        k_mt = min(k_mt, padding.round_up(K, k))  # never pad K further than one kernel step needs
    return m, k, n, k_mt


def default_k_mt(dev_name: str, dtype_in: str, dtype_out: str, k: int, K: int | None = None,
                 dtype_b: str | None = None, acc: str | None = None) -> int:
    """k_mt for a user-chosen k: the paper's choice for these types rounded to a multiple of k."""
    _, _, _, paper = default_tiles(dev_name, dtype_in, dtype_out, None, dtype_b=dtype_b, acc=acc)
    k_mt = max(k, round(paper / k) * k)
    if K is not None:
        k_mt = min(k_mt, padding.round_up(K, k))
    return k_mt


def _fallback_tiles(dev: Device, dtype_in: str, dtype_out: str, emulate: bool,
                    acc: str | None = None) -> tuple[int, int, int, int]:
    r, s, t = dev.mmul_shape(dtype_in, emulate)
    t_in, t_out = dtype(dtype_in), dtype(dtype_out)
    # a C accumulated in another type: the object and (at most) every row again in the accumulator
    t_acc = dtype(acc) if acc not in (None, dtype_out) else None
    budget = dev.l1_bytes - dev.default_stack_bytes - dev.core_static_bytes
    best: tuple[int, int, int] | None = None
    for mn in range(256, 0, -1):
        m = padding.round_up(mn, 2 * r)
        n = padding.round_up(mn, 2 * t)
        c_bytes = t_out.nbytes(m * n) + (t_acc.nbytes(m * n) if t_acc else 0)
        k = (budget - c_bytes) // (2 * t_in.nbytes(1) * (m + n)) if budget > c_bytes else 0
        k = k // s * s
        if k >= max(4 * s, 32):
            best = (m, k, n)
            break
    if best is None:  # pragma: no cover - every supported type has a small tile
        raise ConfigError(f"no tile fits L1 for {dtype_in}->{dtype_out} on {dev.name}", "give -m -k -n")
    m, k, n = best
    k_mt = k * max(1, math.ceil(384 / k))
    return m, k, n, k_mt
