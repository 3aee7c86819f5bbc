"""GemmConfig: every number of one whole-array output-stationary GEMM design (its checks: spec/checks.py).

Tiling (Striking the Balance, sec. 4.1): r x s x t mmul -> m x k x n kernel in L1 -> rows x cols
cores (native size (m*rows) x k_mt x (n*cols)) -> the problem M x K x N, padded up to a multiple of
the native size on the host (inputs with zeros, C cropped).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from ..facts import precision as prec
from ..facts.devices import Device, device
from ..facts.dtypes import DType, dtype
from ..facts.epilogue import Epilogue
from ..facts.errors import ConfigError, opt
from ..facts.numerics import KernelNumerics
from ..facts.rounding import Rounding, Saturation
from .call import CallPlan, plan_call
from .request import (
    B_PACKS,
    FIELDS,
    L1_SCHEMES,
    OPTIONS,
    ROWS,
    RUNTIME_SIZES,
    ArrayOptions,
    GroupQuant,
    KernelOptions,
    Layout,
    Options,
    Problem,
    RuntimeOptions,
    Tiling,
    Types,
    split_fields,
)
from .rules import decode_split, l1, memtile, padding, shared_l1, walks
from .rules import epilogue as rules_epilogue
from .rules.defaults import convert_once_problem as _convert_once_problem
from .rules.defaults import emulation_default, has_epilogue, resolve
from .rules.defaults import variant as resolved_variant
from .rules.kernel_variant import KernelVariant
from .rules.memtile import MemtileBuffer, c_blocks_transposed

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

def b_packs(t_b: DType, group_size: int = 0, split: bool = False) -> tuple[str, ...]:
    """The DRAM packings a B of type t_b can take (the search weighs them when the option is open): both
    for a B the host re-encodes anyway (bfp16, int4: DType.host_encoded), where strips cost no extra copy,
    and in the split decode placement (`split`, spec/rules/decode_split.py), whose B is a model's weights, packed
    once (a host copy, which the call plan names); tiles (the user's own layout) for any other. A W4A16 B
    (group_size > 0) has one layout, each column's objects in k-step order (design/b_objects.py): the option
    does not apply, so "tiles", its default."""
    return B_PACKS if (t_b.host_encoded or split) and not group_size else ("tiles",)


__all__ = ["B_PACKS", "FIELDS", "L1_SCHEMES", "RUNTIME_SIZES", "GemmConfig", "b_packs", "default_k_mt",
           "default_tiles", "emulation_default"]


@dataclass(frozen=True, init=False, eq=False)
class GemmConfig:
    """What one xclbin fixes (device, columns, types, tiles, depths, kernel) and the size it is built
    for (with runtime sizes: the largest it serves): the options as given (spec.Options), the
    tiling and the size, resolved when the config is made (spec/rules/defaults.py: resolve, variant) into
    the records readers read, every option with its default applied: `types` (with the concrete
    accumulator and precision), `kernel` (with the mmul), `layout`, `groups`, `array`, `runtime`,
    `epilogue`, and the kernel's `variant`. Nothing is derived again on read, and the config forwards
    none of their fields (`c.types.dtype_out`, `c.tiling.m`, `c.kernel.mmul`). Made again, as by
    `dataclasses.replace(config, dtype_in="i8", dtype_out="i32")`, it derives B's type, the accumulator
    and the stack afresh. `checks.check_config` checks the config's own rules; design/serve.py's
    `check()` adds every DMA pattern.

    Built as `GemmConfig(device, M, K, N, m, k, n, k_mt, dtype_in, dtype_out, ...)` with any field of
    FIELDS by name, or from its parts (`options=`, `tiling=`, `size=`, flat fields overriding them).
    Two configs are equal when every field (spec.OPTIONS: `value`) reads the same."""

    options: Options
    tiling: Tiling
    size: Problem
    # resolved when the config is made (spec/rules/defaults.py: resolve): every option with its default applied
    types: Types = field(init=False, compare=False)
    layout: Layout = field(init=False, compare=False)
    epilogue: Epilogue = field(init=False, compare=False)
    groups: GroupQuant = field(init=False, compare=False)
    kernel: KernelOptions = field(init=False, compare=False)
    array: ArrayOptions = field(init=False, compare=False)
    runtime: RuntimeOptions = field(init=False, compare=False)
    dev: Device = field(init=False, compare=False)
    convert_once_open: bool = field(init=False, compare=False)  # search.choose weighs both bf16 kernels
    default_acc: str = field(init=False, compare=False)  # C's L1 type had acc not been given
    # the kernel's accumulator expansion and loop structure (spec/rules/defaults.py: variant), resolved with the tiling:
    # a given one the tile cannot have fails here, as the config is made. None when there is no kernel to vary:
    # the tiling open (the search's configs of tiling 0), off its mmul's grid, or a convert-once kernel that cannot
    # be built (check_config names why)
    variant: KernelVariant | None = field(init=False, compare=False)

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
        dev = device(options.device)
        if options.device != dev.name:
            options = replace(options, device=dev.name)  # one spelling per device
        r = resolve(options)  # the defaults, derived now: a bad option fails here, as given
        variant = resolved_variant(dev.name, r.types, r.kernel, r.groups, tiling, has_epilogue(options))
        for name, value in (("options", options), ("tiling", tiling), ("size", size), ("types", r.types),
                            ("layout", r.layout), ("epilogue", r.epilogue), ("groups", r.groups), ("kernel", r.kernel),
                            ("array", r.array), ("runtime", r.runtime), ("dev", dev),
                            ("convert_once_open", r.convert_once_open), ("default_acc", r.default_acc),
                            ("variant", variant)):
            object.__setattr__(self, name, value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GemmConfig) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    @cached_property
    def _key(self) -> tuple[object, ...]:
        return tuple(self.value(name) for name in FIELDS)

    def with_(self, **changes: Any) -> GemmConfig:
        """This config with fields of FIELDS changed by name (dataclasses.replace, typed for the
        flat fields): every default the changed fields decide is derived afresh."""
        return replace(self, **changes)

    def value(self, name: str) -> Any:
        """Option `name`'s value (spec.OPTIONS), its default applied: read from the sub-record the table names."""
        row = ROWS[name]
        if row.group == "epilogue":
            return rules_epilogue.option_values(self.epilogue)[name]
        return getattr(getattr(self, row.group), name)

    # ---- what the fields mean --------------------------------------------------------------
    @property
    def c_t_blocks(self) -> bool:
        """The kernel keeps C's r x t blocks transposed in L1 (column-major C narrower than 32 bits:
        the memtile then drains C's columns in whole words; l1_layout.c_layout)."""
        return c_blocks_transposed(self.layout.c_col_maj, self.types.t_out)

    @property
    def convert_once_problem(self) -> tuple[str, str] | None:
        """Why this GEMM cannot use the convert-once bf16 kernel ((what, fix) for a ConfigError), or
        None when it can (spec/rules/defaults.py)."""
        return _convert_once_problem(self.dev, self.types.precision, self.kernel.emulate_bf16_with_bfp16,
                                     self.kernel.mmul_shape, self.kernel.compiler, not self.epilogue_free)

    @property
    def numerics(self) -> KernelNumerics:
        t, k = self.types, self.kernel
        return KernelNumerics(
            t.t_in, t.t_out, Rounding[k.rounding.upper()], Saturation[k.saturation.upper()], k.shift,
            bfp16_inputs=bool(k.emulate_bf16_with_bfp16) and t.t_in.is_float, acc_bits=self.acc_bits,
            dtype_b=t.t_b, acc=t.t_acc, epilogue=self.epilogue,
        )

    @property
    def acc_block(self) -> tuple[int, int]:
        """The in-place accumulator split's unit: (values per accumulator block, blocks per unit)."""
        return l1.acc_block(self.types.precision, bool(self.kernel.convert_once), self.kernel.mmul)

    @property
    def c_split_elems(self) -> int:
        """With C converted after its last call (acc != dtype_out): how many of the m n accumulator
        values live in the C object itself (its first blocks, as many whole units as its bytes hold);
        the other m n - c_split_elems live in a worker-local buffer (spec/rules/l1.c_split_blocks)."""
        block = self.acc_block
        return l1.c_split_blocks(self.types.precision, self.tiling.m, self.tiling.n, block) * block[0]

    @property
    def t_ma(self) -> int:
        """Rows of an A tile in L1 (T_MA = m / rho); C keeps all m rows (T_MC)."""
        return l1.a_rows(self.tiling.m, self.tiling.rho)

    # ---- sizes -------------------------------------------------------------------------------
    @cached_property
    def native(self) -> tuple[int, int, int]:
        """The GEMM the whole array computes natively: (m*rows) x k_mt x (n*cols)."""
        return self.tiling.m * self.array.rows, self.tiling.k_mt, self.tiling.n * self.array.cols

    @cached_property
    def call(self) -> CallPlan:
        """How the design computes the problem it was made for (gemm_gen/spec/call.py)."""
        return plan_call(self, Problem(self.size.M, self.size.K, self.size.N))

    @property
    def b_l2_k(self) -> int:
        """K extent of a B object in the memtile: k_mt when column-major tiles, else k (row-major, or
        one L1 tile of a strip)."""
        return self.tiling.k_mt if memtile.b_chunked(self.layout.b_col_maj, self.layout.b_pack) else self.tiling.k

    @property
    def a_shims(self) -> int:
        """Shim/memtile columns that carry A (mlir-aie's n_shim_mem_A): one per core row, or every
        column when there are fewer columns than rows."""
        return memtile.a_shims(self.array.rows, self.array.cols)

    @property
    def a_rows_per_shim(self) -> int:
        """Core rows whose A tiles one A memtile splits off (mlir-aie's n_A_tiles_per_shim)."""
        return memtile.a_rows_per_shim(self.array.rows, self.array.cols)

    def a_shim_col(self, i: int) -> int:
        """Column of A shim `i` (npu2's 8 columns carry A on the even ones, sec. 4.2.2)."""
        return memtile.a_shim_col(i, self.array.rows, self.array.cols)

    def a_col(self, row: int) -> int:
        """Column whose shim and memtile carry the A tiles of core row `row`."""
        return self.a_shim_col(row // self.a_rows_per_shim)

    @cached_property
    def a_cols(self) -> tuple[int, ...]:
        return tuple(self.a_col(i) for i in range(self.array.rows))

    # ---- budgets -----------------------------------------------------------------------------
    @property
    def l1_overhead(self) -> dict[str, int]:
        """The L1 bytes of each core that do not depend on the tiling: the runtime parameters it
        reads (with runtime K), the tanh table's two copies (a SiLU / GELU epilogue), its stack and aiecc's
        per-core static data (facts.devices.CORE_STATIC, the parts that take bytes): spec/rules/l1.py."""
        return l1.overhead(self.dev, self.array.stack_bytes, self.runtime.runtime_sizes,
                           self.epilogue.activation.value == "runtime", self.epilogue.uses_tanh)

    @property
    def l1_options(self) -> l1.L1Options:
        """What the L1 rules (spec/rules/l1.py) read of this config besides its tiling; the tuner passes
        the same to them with its candidates."""
        return l1.L1Options(self.types.precision, bool(self.kernel.convert_once), self.acc_block,
                            self.array.depth_ab_l1, self.array.depth_c_l1, tuple(self.l1_overhead.items()),
                            self.groups.group_size, self.groups.zero_points, self.array.share_l1)

    @property
    def shared_l1_problem(self) -> tuple[str, str] | None:
        """Why this config's share_l1 cannot place its buffers (spec/rules/shared_l1.problem), None if it can."""
        a = self.array
        return shared_l1.problem(self.dev, a.share_l1, a.rows, a.cols, a.depth_ab_l1, a.depth_c_l1,
                                 l1.runtime_barrier(self.runtime.runtime_sizes, self.epilogue.runtime),
                                 self.epilogue.needs_tile, self.groups.group_size, depth_b_l2=a.depth_ab_l2,
                                 b_per_l2=self.b_per_l2)

    @property
    def b_per_l2(self) -> int:
        """L1 B objects per memtile B object: k_mt / k for column-major B tiles (memtile.b_chunked), else 1 (and 1
        while the tiling is open)."""
        chunked = memtile.b_chunked(self.layout.b_col_maj, self.layout.b_pack)
        return self.tiling.k_mt // self.tiling.k if chunked and self.tiling.k else 1

    @property
    def l1_parts(self) -> dict[str, int]:
        """Bytes of each core's L1 use: A, B (double-buffered), C (single), the kernel's scratch,
        then l1_overhead (runtime parameters, stack, aiecc's per-core static data): spec/rules/l1.py."""
        return l1.parts(self.l1_options, self.tiling.m, self.tiling.k, self.tiling.n, self.tiling.rho)

    @property
    def l1_bytes(self) -> int:
        return sum(self.l1_parts.values())

    @cached_property
    def walk_options(self) -> walks.WalkOptions:
        """What the DMA walks (spec/rules/walks.py) read of this config besides its tiling and its call."""
        t, lay = self.types, self.layout
        return walks.WalkOptions(self.dev, (t.t_in, t.t_b, t.t_out), self.kernel.mmul, self.array.rows,
                                 self.array.cols, lay.a_col_maj, lay.b_col_maj, lay.c_col_maj, lay.b_pack,
                                 self.groups.group_size, bool(self.groups.zero_points))

    @property
    def l2_options(self) -> memtile.L2Options:
        """What the memtile rules (spec/rules/memtile.py) read of this config besides its tiling."""
        a = self.array
        split = decode_split.is_split(self.dev, a.rows, a.cols)
        return memtile.L2Options(a.rows, a.cols, self.types.t_in, self.types.t_b, self.types.t_out,
                                 memtile.b_chunked(self.layout.b_col_maj, self.layout.b_pack), a.depth_ab_l2,
                                 a.depth_c_l2, self.groups.group_size, self.groups.zero_points,
                                 tuple((s.shim, s.count) for s in decode_split.streams(self.dev)) if split else (),
                                 self.dev.core_rows if split else 0)

    def l2_pools(self) -> list[memtile.Pool]:
        """The memtile links that own L2 buffers, in mlir-aie's IR order."""
        return memtile.l2_pools(self.l2_options, self.tiling.m, self.tiling.k, self.tiling.n, self.tiling.k_mt)

    def memtile_buffers(self) -> list[MemtileBuffer]:
        """Every L2 buffer, each at its own memtile (before placement)."""
        return [MemtileBuffer(f"{p.name}_buff_{i}", p.nbytes, p.col, p.col) for p in self.l2_pools()
                for i in range(p.depth)]

    def memtile_placement(self) -> list[MemtileBuffer]:
        """The L2 buffers where mlir-aie places them (gemm_gen/spec/rules/memtile.py): home, else the less
        used neighbour memtile of the target device; ConfigError when one finds no room or when
        spilled buffers need more than the 4 channels that reach a neighbour."""
        return memtile.place_one(self.l2_pools(), self.dev.target(self.array.cols)[1], self.dev.memtile_bytes)

    def memtile_bytes_used(self) -> list[int]:
        """Bytes on each memtile of the target device."""
        used = [0] * self.dev.target(self.array.cols)[1]
        for buf in self.memtile_placement():
            used[buf.home_col] += buf.nbytes
        return used

    @property
    def acc_bits(self) -> int:
        """Bits of one accumulator lane of the kernel's aie::mmul (floats: fp32)."""
        return self.dev.acc_bits(self.types.dtype_in, self.kernel.mmul)

    # ---- presentation ------------------------------------------------------------------------
    @property
    def suffix(self) -> str:
        """mlir-aie's target_suffix MxKxN_mxkxn_<cols>c, extended so that builds never share names:
        types, B layout and k_mt by name, any other non-default knob by a short digest."""
        t, tile = self.types, self.tiling
        types = [t.dtype_in] + ([t.dtype_b] if t.dtype_b != t.dtype_in else []) + [t.dtype_out]
        if t.acc != self.default_acc:  # the default accumulator goes unnamed
            types += [f"acc{prec.ACC_OUT if t.acc == t.dtype_out else t.acc}"]
        parts = [f"{self.size}_{tile.m}x{tile.k}x{tile.n}_{self.array.cols}c", "_".join(types)]
        tags = sorted(((row.named, row.name, row.tag) for row in OPTIONS if row.tag is not None), key=lambda t: t[0])
        parts += [text for _, name, tag in tags if (text := tag(self.value(name), self)) is not None]
        named = [row.name for row in OPTIONS if row.named]
        # the defaults the named options decide (with the group fields: W4A16's convert-once kernel on npu2)
        default = GemmConfig(**{name: self.value(name) for name in named})
        extras = {k: v for k, v in self.to_json().items() if k not in named and v != default.value(k)}
        if extras:
            digest = hashlib.sha1(json.dumps(extras, sort_keys=True).encode()).hexdigest()[:8]
            parts.append(digest)
        return "_".join(parts)

    def to_json(self) -> dict[str, object]:
        """Every field as it reads (defaults applied), in FIELDS order: what a build is keyed on. A field
        the table writes only when set (the epilogue's, the group scales', a task span or -O other than the
        default) is left out otherwise, so a config without them keeps its key and its cached builds."""
        written = {"always": True, "epilogue": not self.epilogue_free, "groups": bool(self.groups.group_size)}
        out = {}
        for row in OPTIONS:
            value = self.value(row.name)
            if written.get(row.written, value != row.default):
                out[row.name] = value
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
    # the types and datapath a config of these options gets (the default accumulator where acc is None)
    r = resolve(Options(dev.name, dtype_in, dtype_out, dtype_b=dtype_b, acc=acc,
                        emulate_bf16_with_bfp16=emulate_bf16_with_bfp16))
    p, emulate_bf16_with_bfp16 = r.types.precision, r.kernel.emulate_bf16_with_bfp16
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
        raise ConfigError(f"no tile fits L1 for {dtype_in}->{dtype_out} on {dev.name}",
                          f"give {opt('m')} {opt('k')} {opt('n')}")
    m, k, n = best
    k_mt = k * max(1, math.ceil(384 / k))
    return m, k, n, k_mt
