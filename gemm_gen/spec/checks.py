"""The config's own rules, checked in order: `check_config(config)` raises a ConfigError naming the
first broken one (what broke, and how to fix it). Each check applies rule functions of gemm_gen/spec/rules/
(written once, over ints or arrays, which the search's filter calls too) to one config and says the
result in the user's words; design/serve.py's `check()` adds every DMA pattern of the built design.
"""

from __future__ import annotations

from ..facts import groupquant
from ..facts import precision as prec
from ..facts.devices import Device, MmulShape, TileKind
from ..facts.dtypes import I4, DType, dtype
from ..facts.epilogue import mode_ops
from ..facts.errors import ConfigError, opt
from ..facts.rounding import Rounding, Saturation
from .config import B_PACKS, L1_SCHEMES, RUNTIME_SIZES, GemmConfig, b_packs
from .rules import array, decode_split, dequant, dma, l1, memtile, padding, peano
from .rules import epilogue as epilogue_rule
from .rules import kernel_variant as kv
from .rules import tiling as tiling_rule
from .rules.l1 import RTP_PART
from .rules.padding import MAX_RUNTIME_TASKS

# the widest down-shift (SRS) we let a conversion ask for: the bound tests/aie_host enforces, read from
# the SRS instructions' shift operand by an earlier session; not found in a public source (unconfirmed)
SRS_MAX_SHIFT = 59


def check_config(c: GemmConfig, budgets: bool = True) -> GemmConfig:
    """Raise ConfigError naming the first broken rule of the config itself; return c if fine.
    (gemm_gen/design/serve.py's check() adds the DMA patterns' limits.)

    budgets=False skips the L1 and memtile capacity checks only (to predict a design that
    would not fit as given, e.g. a paper's chess-compiled tile under Peano's larger stack).
    """
    check_types(c)
    check_array(c)
    check_divisibility(c)
    if c.groups.group_size:
        groupquant.check_tile_k(c.tiling.k, c.groups.group_size)
        # the kernel's loops must leave the dequantization pass room (backends/kernel_source/render.py refuses too)
        v = c.variant
        assert v is not None, "a config check_config accepts has a kernel variant (rules/defaults.variant)"
        code = dequant.code_problem(c.dev, c.kernel.mmul, bool(c.kernel.emulate_bf16_with_bfp16), v.expansion, v.loops,
                                    c.tiling.k, c.tiling.n, bool(c.groups.zero_points))
        if code is not None:
            raise ConfigError(*code)
    check_granularity(c)
    check_epilogue_tile(c)
    check_a_col_maj_chunks(c)
    if budgets:
        check_l1(c)
        c.memtile_placement()
    check_queue(c)
    return c


def check_untiled(c: GemmConfig) -> None:
    """The checks whose outcome does not depend on the tiling (types, the array, the shim queue): what
    the search asks of a probe design before it enumerates tilings."""
    check_types(c)
    check_array(c)
    check_queue(c)


def check_types(c: GemmConfig) -> None:
    dev, t_out = c.dev, c.types.t_out
    if c.kernel.compiler not in ("peano", "chess"):
        raise ConfigError(f"unknown kernel compiler {c.kernel.compiler!r}",
                          f"use peano (default) or chess ({opt('compiler', 'chess')})")
    peano.check_opt_level(c.kernel.opt_level, c.kernel.compiler)
    p = c.types.precision
    try:
        acc_bits = c.acc_bits
    except ConfigError:  # types without a kernel: named below
        acc_bits = 32
    prec.check_precision(p, dev, acc_bits)
    if p.block:
        check_block_types(c)
    else:
        check_scalar_types(c)
    if t_out.is_float and c.kernel.shift:
        raise ConfigError(f"shift {c.kernel.shift} applies to integer outputs only", f"drop {opt('shift')}")
    if c.layout.b_pack not in B_PACKS:
        raise ConfigError(f"unknown B packing {c.layout.b_pack!r}", f"use {opt('b_pack', *B_PACKS)}")
    if c.groups.group_size and c.layout.b_pack != "tiles":
        raise ConfigError(f"{opt('b_pack', c.layout.b_pack)} with W4A16: its B is each core column's objects (int4 "
                          "values and their scale rows) in k-step order already, one layout", f"drop {opt('b_pack')}")
    split = decode_split.is_split(c.dev, c.array.rows, c.array.cols)
    if c.layout.b_pack not in b_packs(c.types.t_b, split=split):
        raise ConfigError(f"{opt('b_pack', c.layout.b_pack)} is mlir-aie's packing of a bfp16 B, not of {c.types.t_b} "
                          "(or the host's strips of an int4 B, or of the split decode placement's weights)",
                          f"drop {opt('b_pack')}, or use {opt('dtype_b', prec.BFP16)} (or i4 with an i8 A, or "
                          f"{opt('rows', decode_split.SPLIT_MAPPING)})")
    if c.layout.b_pack == "strips" and not c.types.t_b.host_encoded and (c.layout.b_col_maj or c.epilogue.needs_tile):
        raise ConfigError(f"{opt('b_pack', 'strips')} of a scalar B takes a row-major B without an epilogue tile (each "
                          "core's K x n slice row-major, the memtile re-tiling it)",
                          f"drop {opt('b_col_maj')} and the bias / requantization, or {opt('b_pack')}")
    if split:
        check_split(c)
    if c.kernel.shift and not p.block:
        check_shift(c.dev, c.types.dtype_in, c.types.dtype_out, c.kernel.mmul, c.kernel.shift, str(c.types.acc))
    check_block_layouts(c)
    if c.kernel.convert_once and c.convert_once_problem is not None:
        raise ConfigError(*c.convert_once_problem)
    if c.array.l1_alloc is not None and c.array.l1_alloc not in L1_SCHEMES:
        raise ConfigError(f"unknown L1 allocation scheme {c.array.l1_alloc!r}",
                          f"use {opt('l1_alloc', *L1_SCHEMES)}, or leave it to the planner")
    if c.runtime.runtime_sizes not in RUNTIME_SIZES:
        raise ConfigError(f"unknown runtime sizes {c.runtime.runtime_sizes!r}",
                          f"use one of {', '.join(RUNTIME_SIZES)}")
    if c.kernel.rounding.upper() not in Rounding.__members__:
        raise ConfigError(f"unknown rounding mode {c.kernel.rounding!r}",
                          f"use one of {', '.join(r.name.lower() for r in Rounding)}")
    if c.kernel.saturation.upper() not in Saturation.__members__:
        raise ConfigError(f"unknown saturation mode {c.kernel.saturation!r}",
                          "use none, saturate or symmetric")
    check_epilogue(c)
    check_groups(c)


_W4A16 = f"{opt('dtype_in', 'bf16')} {opt('dtype_b', I4.name)}"  # W4A16's types
_GROUPS = f"{opt('group_size', groupquant.GROUP_SIZES[0])} | {' | '.join(map(str, groupquant.GROUP_SIZES[1:]))}"


def check_groups(c: GemmConfig) -> None:
    """Group scales belong to int4 B times a bf16 A (W4A16), which needs them."""
    w4a16 = c.types.dtype_b == I4.name and c.types.dtype_in in prec.W4A16_A_TYPES
    if c.groups.group_size and not w4a16:
        raise ConfigError(f"{opt('group_size', c.groups.group_size)} with {c.types.dtype_in} x {c.types.dtype_b}: "
                          f"group scales belong to "
                          "int4 weights times a bf16 A (W4A16)", f"drop {opt('group_size')}, or use {_W4A16}")
    if c.groups.zero_points and not c.groups.group_size:
        raise ConfigError(f"{opt('zero_points')} without {opt('group_size')}: a zero point belongs to a group's scale",
                          f"add {_GROUPS}, or drop {opt('zero_points')}")
    if w4a16 and not c.groups.group_size:
        raise ConfigError(f"{opt('dtype_b', I4.name)} with {opt('dtype_in', 'bf16')} (W4A16) needs one scale per "
                          "group of K rows", f"add {_GROUPS}")
    if c.groups.group_size:
        groupquant.check_group_size(c.groups.group_size)
    if w4a16 and c.groups.group_size and not c.kernel.block and (
            problem := dequant.block_problem(c.kernel.mmul, c.groups.group_size)):
        raise ConfigError(*problem)  # the bf16 pass's blocks (the convert-once pass reads 8 x 8 tiles)


def check_block_layouts(c: GemmConfig) -> None:
    """Column-major A and C where an operand is in bfp16: a bfp16 block shares one exponent along K
    (A's rows) or N (C's rows), so A^T or C^T in bfp16 would block along M, another format. A bf16 A
    (converted in the kernel) and a bf16 / f32 C take either layout, as on the scalar kernels."""
    if c.layout.a_col_maj and c.types.t_in.is_block:
        raise ConfigError(f"{opt('a_col_maj')} with bfp16 A: a bfp16 block shares one exponent over 8 K values of an "
                          "A row, so A^T in bfp16 would share it over 8 M values (another format)",
                          f"store A row-major (drop {opt('a_col_maj')}), or pass A in bf16 ({opt('dtype_in', 'bf16')})")
    if c.layout.c_col_maj and c.types.t_out.is_block:
        raise ConfigError(f"{opt('c_col_maj')} with bfp16 C: a bfp16 block shares one exponent over 8 N values of a "
                          "C row, so C^T in bfp16 would share it over 8 M values (another format)",
                          f"store C row-major (drop {opt('c_col_maj')}), or write C in bf16 or f32 "
                          f"({opt('dtype_out')})")


def check_epilogue(c: GemmConfig) -> None:
    """The epilogue the types can take (spec/rules/epilogue.py)."""
    problem = epilogue_rule.types_problem(c.epilogue, c.types.precision, c.kernel.block, c.kernel.shift)
    if problem is None:  # the union of a runtime activation's modes must fit the program memory
        e = c.epilogue
        what = f"{len(e.modes)} activations compiled" if e.runtime else e.tag
        problem = kv.epilogue_code_problem(c.dev, mode_ops(e), what)
    if problem is not None:
        raise ConfigError(*problem)


def check_epilogue_tile(c: GemmConfig) -> None:
    """The epilogue tile fits one B object, and a chunked B carries it as a whole chunk (spec/rules/epilogue.py)."""
    e = c.epilogue
    if not e.needs_tile:
        return
    size_b = c.types.t_b.nbytes(1)
    if not epilogue_rule.tile_fits(e, c.tiling.k, c.tiling.n, size_b):
        need = epilogue_rule.tile_bytes(e, c.tiling.n)
        step = tiling_rule.k_step(tiling_rule.steps(c.kernel.mmul, c.types.precision.block))
        k = epilogue_rule.smallest_k(e, c.tiling.n, size_b, step)
        raise ConfigError(f"the epilogue tile ({need} B for n={c.tiling.n}) does not fit one k x n B object "
                          f"(k={c.tiling.k}: {c.tiling.k * c.tiling.n * size_b} B)", f"use k >= {k}")
    if not epilogue_rule.chunk_ok(e, memtile.b_chunked(c.layout.b_col_maj, c.layout.b_pack), c.tiling.k, c.tiling.k_mt):
        raise ConfigError(f"column-major B reaches the memtile in k_mt={c.tiling.k_mt} chunks, and the epilogue tile "
                          f"is one k-step (k={c.tiling.k}) more of it",
                          f"use {opt('k_mt', c.tiling.k)}, or a row-major B")


def check_block_types(c: GemmConfig) -> None:
    shape = c.dev.bfp16_mmul_shape
    assert shape is not None  # prec.check_precision refused devices without a bfp16 datapath
    if c.kernel.emulate_bf16_with_bfp16:
        raise ConfigError(f"{opt('emulate_bf16_with_bfp16')} is for bf16 x bf16 GEMMs; this one already runs "
                          "on the bfp16 datapath", f"drop {opt('emulate_bf16_with_bfp16')}")
    if c.kernel.mmul_shape is not None and tuple(c.kernel.mmul_shape) != shape:
        raise ConfigError(f"mmul {'x'.join(map(str, c.kernel.mmul_shape))}: the bfp16 datapath multiplies "
                          f"{'x'.join(map(str, shape))} blocks", f"drop {opt('mmul_shape')}")
    if c.kernel.compiler not in prec.BFP16_COMPILERS:
        raise ConfigError(f"bfp16 kernels build with {' or '.join(prec.BFP16_COMPILERS)} only, not "
                          f"{c.kernel.compiler} ({prec.BFP16_COMPILERS_WHY})",
                          f"use Peano or {opt('compiler', 'chess')}, or leave the compiler to its default")


def check_scalar_types(c: GemmConfig) -> None:
    dev, t_in, t_out = c.dev, c.types.t_in, c.types.t_out
    if t_in.name not in dev.input_types:
        raise ConfigError(f"{dev.name} has no kernel for dtype_in {t_in}",
                          f"use {opt('dtype_in', *dev.input_types)}")
    allowed = dev.out_types[t_in.name]
    if t_out.name not in allowed:
        raise ConfigError(f"dtype_out {t_out} does not go with dtype_in {t_in}",
                          f"use {opt('dtype_out', *allowed)}")
    default = dev.mmul_shape(t_in.name, bool(c.kernel.emulate_bf16_with_bfp16),
                             c.types.dtype_b)  # raises for a wrong device/type
    operands = dev.operands(t_in.name, c.types.dtype_b)
    shapes_ok = (default,) if c.kernel.emulate_bf16_with_bfp16 else dev.shapes(operands)
    laid_out = [sh for sh in shapes_ok if not _block_rows_cut(c, sh)]  # the shapes the DMAs can lay out
    shapes = ", ".join("x".join(map(str, sh)) for sh in laid_out)
    given = None if c.kernel.mmul_shape is None else tuple(c.kernel.mmul_shape)
    if given is not None and given not in shapes_ok:
        raise ConfigError(f"mmul {'x'.join(map(str, given))} is not an aie::mmul shape of "
                          f"{dev.name} for {operands}", f"use one of {shapes}")
    cut = None if given is None else _block_rows_cut(c, given)
    if given is not None and cut:  # an mmul of the device no design can feed: refused before any tiling is tried
        raise ConfigError(f"mmul {'x'.join(map(str, given))} for {operands} can feed no "
                          f"design: {cut}, and the DMAs lay out the kernel's blocks in whole 32-bit words",
                          f"use one of {shapes}")
    if c.types.t_b.is_packed:
        check_int4_layout(c)
    check_expansion(c)


def check_expansion(c: GemmConfig) -> None:
    """A given expansion must fit the registers: no tiling needed to say so (search.choose asks it of the
    config as given, whose tiling is still open, since its probe tile leaves the expansion out)."""
    expansion, dev = c.kernel.expansion, c.dev
    if expansion is not None and not c.kernel.block:
        problem = kv.expansion_problem(dev, dev.operands(c.types.dtype_in, c.types.dtype_b), c.kernel.mmul,
                                       bool(c.kernel.emulate_bf16_with_bfp16), (int(expansion[0]), int(expansion[1])))
        if problem is not None:
            raise ConfigError(*problem)


def _block_rows_cut(c: GemmConfig, shape: tuple[int, ...]) -> str | None:
    """Why the rows of an mmul's blocks (A's r x s: s values; B's s x t and C's r x t: t values) are not whole
    32-bit words (check_granularity's rule for the s and t runs, which no tile size changes), or None."""
    _, s, t = shape
    types = c.types
    runs = [("s", s, types.t_in), ("t", t, types.t_out)] + ([] if c.groups.group_size else [("t", t, types.t_b)])
    return next((why for name, count, typ in runs if (why := _not_whole_words(name, count, typ))), None)


def _not_whole_words(name: str, count: int, t: DType) -> str | None:
    """Why `count` values of `t` in a row are not whole 32-bit words (a BD moves words), or None."""
    if not dma.packed_words(t, count):  # half-byte values: a run must be whole words of them
        return f"{name}={count} x {t} = {count * t.elem_bytes:g} B is not a multiple of the 4-byte DMA word"
    if not dma.byte_words(t, count):
        return f"{name}={count} x {t} = {t.nbytes(count)} B is not a multiple of the 4-byte DMA word"
    return None


def check_int4_layout(c: GemmConfig) -> None:
    """int4 B moves in 32-bit words of 8 values along N (dtypes.I4): its DRAM rows are packed along N,
    so a column-major B (packed along K) would need sub-word reordering no DMA can do."""
    if c.layout.b_col_maj:
        raise ConfigError(f"{opt('b_col_maj')} with int4 B: the host packs int4 B two per byte along N, and a BD "
                          "moves whole 4-byte words, so B^T cannot be re-tiled into the kernel's blocks",
                          f"store B row-major (drop {opt('b_col_maj')}); the operator packs it for you")


def check_split(c: GemmConfig) -> None:
    """The split decode placement's own rules (spec/rules/decode_split.py): row-major A and C (its C joins slices
    along N, its A is one broadcast stream), and memtiles with the DMA channels it needs."""
    if c.layout.a_col_maj or c.layout.c_col_maj:
        raise ConfigError(f"{opt('rows', decode_split.SPLIT_MAPPING)} takes row-major A and C",
                          f"drop {opt('a_col_maj')} / {opt('c_col_maj')}, or use {opt('rows', 1)}")
    problem = decode_split.channel_problem(c.dev)
    if problem is not None:
        raise ConfigError(problem, f"use {opt('rows', 1)}")


def check_array(c: GemmConfig) -> None:
    dev = c.dev
    for name, value in (("M", c.size.M), ("K", c.size.K), ("N", c.size.N), ("m", c.tiling.m), ("k", c.tiling.k),
                        ("n", c.tiling.n), ("k_mt", c.tiling.k_mt)):
        if value < 1:
            raise ConfigError(f"{name}={value} must be positive", f"give {opt(name)} a size >= 1")
    if not array.rows_ok(dev, c.array.rows):
        raise ConfigError(f"rows={c.array.rows}: a design uses all {dev.core_rows} core rows (whole-array) or one "
                          "(decode)", f"use rows={dev.core_rows} or rows=1 ({opt('rows', dev.core_rows, 1)})")
    if not array.columns_ok(dev, c.array.cols, c.array.rows):
        counts = ", ".join(map(str, dev.column_devices))
        raise ConfigError(f"n_aie_cols={c.array.cols} on {dev.name}: designs use {counts} columns",
                          f"use {opt('cols', *dev.column_devices)}")
    depths = (c.array.depth_ab_l1, c.array.depth_ab_l2, c.array.depth_c_l1, c.array.depth_c_l2)
    if not all(1 <= d <= 2 for d in depths):
        # IRON gives each fifo end at most max-acquire + 1 = 2 buffers for our loops
        raise ConfigError(f"fifo depths {depths} must be 1 or 2", "use the defaults 2, 2, 1, 1")
    if not array.stack_ok(dev, c.array.stack_bytes):
        raise ConfigError(f"stack {c.array.stack_bytes} B must be a positive multiple of {array.STACK_ALIGN} below the "
                          f"{dev.l1_bytes:,} B of L1",
                          f"give {opt('stack_bytes')} like 3328 (0xD00, mlir-aie's) or more")
    # the largest call it serves
    tasks = padding.runtime_tasks(c.call.tiles_per_core, c.a_shims, c.array.cols, dev, c.array.rows)
    if not padding.tasks_fit(c.call.tiles_per_core, c.a_shims, c.array.cols, dev, c.array.rows):
        raise ConfigError(
            f"the runtime sequence would push {tasks:,} BD tasks (over {MAX_RUNTIME_TASKS:,}; its "
            f"instruction stream would be about {tasks * 64 // 2**20} MiB)",
            "use larger m and n, or split the GEMM into several calls",
        )
    if c.tiling.rho < 1 or c.tiling.m % c.tiling.rho:
        raise ConfigError(f"rho={c.tiling.rho} must be a divisor of m={c.tiling.m} (T_MA = m / rho rows of A)",
                          f"use {opt('rho', 1)}, or a rho that divides m")
    shared = c.shared_l1_problem  # neighbour-shared L1 (spec/rules/shared_l1.py): pairs, reach, locks, channels
    if shared is not None:
        raise ConfigError(*shared)


def check_a_col_maj_chunks(c: GemmConfig) -> None:
    """Column-major A on fewer columns than core rows: an A shim walks its k_mt chunks on its BD's
    iteration dimension (spec/rules/memtile.a_col_maj_chunks), whose wrap bounds them."""
    k_walk = padding.round_up(c.size.K, c.tiling.k_mt)
    chunks = int(memtile.a_col_maj_chunks(c.layout.a_col_maj, c.array.rows, c.array.cols, k_walk, c.tiling.k_mt))
    most = c.dev.dma[TileKind.SHIM].iteration_wrap_max
    if chunks > most:
        raise ConfigError(f"{opt('a_col_maj')} on {c.array.cols} columns: each A shim serves {c.a_rows_per_shim} core "
                          f"rows and walks K={k_walk} in {chunks} k_mt chunks on its BD's iteration dimension, at most "
                          f"{most}", f"use {opt('k_mt', padding.round_up(-(-k_walk // most), c.tiling.k))} or more, "
                          f"{opt('cols', c.array.rows)} or more, or store A row-major")


def check_divisibility(c: GemmConfig) -> None:
    st = tiling_rule.steps(c.kernel.mmul, c.types.precision.block, c.kernel.block)  # the rule: spec/rules/tiling.py
    conditions = tiling_rule.conditions(st, c.tiling.m, c.tiling.k, c.tiling.n, c.tiling.k_mt, c.tiling.rho)
    broken = [name for name, ok in conditions if not ok]
    if broken:
        raise ConfigError(*_divisibility_error(c, broken[0], st))


# the tiling sizes each granularity rule (tiling_rule.conditions, by name) reads
_RULE_SIZES = {"m": {"m"}, "T_MA": {"m", "rho"}, "k": {"k"}, "n": {"n"}, "k_mt": {"k_mt", "k"}}


def check_pinned_granularity(c: GemmConfig, pinned: set[str]) -> None:
    """The granularity rules (check_divisibility's) that read only the `pinned` sizes of c's tiling: a
    given m, k, n, k_mt or rho is refused before any search prices a tiling with it."""
    st = tiling_rule.steps(c.kernel.mmul, c.types.precision.block, c.kernel.block)
    ti = c.tiling
    for name, ok in tiling_rule.conditions(st, ti.m, ti.k, ti.n, ti.k_mt, ti.rho):
        if not ok and _RULE_SIZES[name.split()[0]] <= pinned:
            raise ConfigError(*_divisibility_error(c, name, st))


def _divisibility_error(c: GemmConfig, name: str, st: tiling_rule.Steps) -> tuple[str, str]:
    """(what, fix) for the broken granularity rule `name` (a tiling_rule.conditions name)."""
    r, s, t = c.kernel.mmul
    where = f"{c.dev.name} {c.types.dtype_in} mmul {r}x{s}x{t}"
    if name.endswith(" bfp16"):  # DMAs move bfp16 in whole 8 x 8 tiles of 9-byte blocks
        q, size = st.block, name.split()[0]
        value = c.value(size)
        return (f"{size}={value} would cut a bfp16ebs8 block (8 values, 9 bytes): bfp16 moves in {q} x {q} tiles",
                f"use {size}={padding.near(value, q)}")
    if name.endswith(" super-block"):  # the bfp16 kernel's 2 x 1 A, 1 x 2 B, 2 x 2 C super-blocks of 8 x 8 tiles
        q, size = st.super_block, name.split()[0]
        why = (f"a multiple of {q} (the bfp16 kernel's 16 x 16 C blocks: A, B and C in 2 x 1, 1 x 2 and 2 x 2 "
               "super-blocks of 8 x 8 tiles)")
        if size == "T_MA":
            return (f"T_MA = m / rho = {c.t_ma} is not {why}", f"use a rho that leaves m / rho a multiple of {q}")
        value = c.value(size)
        return f"{size}={value} is not {why}", f"use {size}={padding.near(value, q)}"
    if name == "m":
        return (f"m={c.tiling.m} is not a multiple of 2r={2 * r} (2x2 blocks of the {where})",
                f"use m={padding.near(c.tiling.m, 2 * r)}")
    if name == "T_MA":
        return (f"T_MA = m / rho = {c.t_ma} is not a multiple of 2r={2 * r} (2x2 blocks of the {where})",
                f"use a rho that leaves m / rho a multiple of {2 * r}")
    if name == "k":
        return f"k={c.tiling.k} is not a multiple of s={s} ({where})", f"use k={padding.near(c.tiling.k, s)}"
    if name == "n":
        return (f"n={c.tiling.n} is not a multiple of 2t={2 * t} (2x2 blocks of the {where})",
                f"use n={padding.near(c.tiling.n, 2 * t)}")
    return (f"k_mt={c.tiling.k_mt} is not a multiple of k={c.tiling.k}",
            f"use {opt('k_mt', *padding.nearest(c.tiling.k_mt, c.tiling.k))}")


def check_granularity(c: GemmConfig) -> None:
    """Every contiguous DMA run must be whole 32-bit words (sec. 4.3); bfp16 moves in 72-byte
    tiles, always whole words."""
    _, mmul_s, mmul_t = c.kernel.mmul
    runs = [("s", mmul_s, c.types.t_in), ("t", mmul_t, c.types.t_b), ("k_mt", c.tiling.k_mt, c.types.t_in),
            ("n x cols", c.tiling.n * c.array.cols, c.types.t_b), ("t (C)", mmul_t, c.types.t_out),
            ("n x cols (C)", c.tiling.n * c.array.cols, c.types.t_out)]
    if c.groups.group_size:  # W4A16: B moves as whole objects, never re-tiled (npu1's t = 4 needs no word of 8)
        runs = [run for run in runs if run[2] is not c.types.t_b]
    for name, count, t in runs:
        why = _not_whole_words(name, count, t)
        if why and t.is_packed:
            raise ConfigError(f"{why} (a BD moves 32-bit words: {t} runs are multiples of {t.unit_elems} values)",
                              f"choose sizes whose {t} runs are multiples of {t.unit_elems} values")
        if why:
            raise ConfigError(why, "choose sizes whose rows are whole 32-bit words")


def check_l1(c: GemmConfig) -> None:
    parts = c.l1_parts
    cap = c.dev.l1_bytes
    if not l1.fits(c.l1_options, cap, c.tiling.m, c.tiling.k, c.tiling.n, c.tiling.rho):
        detail = " + ".join(f"{k} {v}" for k, v in parts.items())
        fixed = set(c.l1_overhead) - {RTP_PART}
        buffers = sum(v for name, v in parts.items() if name not in fixed)
        acc_out = (f", or {opt('acc', prec.ACC_OUT)} (C kept in {c.types.dtype_out}, requantized every k-step)"
                   if c.types.precision.converts_c else "")
        raise ConfigError(
            f"L1 overflow: {detail} = {c.l1_bytes} B > {cap} B per core "
            f"(m={c.tiling.m} k={c.tiling.k} n={c.tiling.n}" + (f" rho={c.tiling.rho}" if c.tiling.rho > 1 else "")
            + f", {c.types.precision.name}; the buffers alone take {buffers / 1024:.1f} KiB)",
            f"reduce m, k or n, or raise {opt('rho')} (A then holds m / rho rows){acc_out}",
        )


def check_queue(c: GemmConfig) -> None:
    shim = c.dev.dma[TileKind.SHIM]
    if c.runtime.task_span < 0:
        raise ConfigError(f"task_span={c.runtime.task_span} must be >= 0",
                          "use 1 (one task per output block) or 0 (as many blocks as one BD expresses)")
    per_group = 3  # one A, one B and one C task per shim column that carries all three
    if not array.queue_ok(c.dev, c.runtime.queue_groups):
        if c.runtime.queue_groups < 1:  # below the range (array.queue_ok): none in flight
            raise ConfigError(f"queue_groups={c.runtime.queue_groups} must be >= 1", "use the default 4")
        raise ConfigError(
            f"queue_groups={c.runtime.queue_groups} puts {c.runtime.queue_groups} unretired tasks on a shim channel "
            f"whose task queue holds {shim.task_queue_depth} (the hardware drops a push onto a full queue)",
            f"use queue_groups <= {shim.task_queue_depth}",
        )
    if c.runtime.queue_groups * per_group > shim.bds:  # pragma: no cover - implied by the queue depth today
        raise ConfigError(
            f"queue_groups={c.runtime.queue_groups} keeps {c.runtime.queue_groups * per_group} BDs live per "
            f"shim > {shim.bds} shim BDs",
            f"use queue_groups <= {shim.bds // per_group}",
        )


def check_shift(dev: Device, dtype_in: str, dtype_out: str, mmul: MmulShape, shift: int,
                acc_type: str | None = None) -> None:
    """ConfigError unless the kernel can shift C by `shift`. With C accumulated in its output type
    (`acc_type` None or dtype_out) each call loads C into the accumulator shifted up and stores it
    shifted down: a C that stays in a 32-bit accumulator (int32 C in acc32) cannot be shifted at all
    (the AIE API loads int32 into acc32 only with shift 0 and stores acc32 as int32 with a plain
    cast), and C shifted up must fit the accumulator's lanes. With a wider accumulator in L1 the
    sum is shifted down once, by the final conversion's SRS (0..59 bits, within the lanes)."""
    if not shift:
        return
    acc, out = dev.acc_bits(dtype_in, mmul), dtype(dtype_out).bits
    shape = "x".join(map(str, mmul))
    if acc_type not in (None, dtype_out):
        top = min(acc - 1, SRS_MAX_SHIFT)
        if not 0 < shift <= top:
            raise ConfigError(f"shift {shift}: the final conversion shifts the {acc}-bit accumulator of the "
                              f"{dev.name} {dtype_in} mmul {shape} down by 1..{top} bits", f"use a shift in 0..{top}")
        return
    wide = [s for s in dev.acc64_shapes.get(dtype_in, ()) if s in dev.mmul_shapes.get(dtype_in, ())]
    if acc == out:
        other = (f"{opt('mmul_shape', *wide)} (a 64-bit accumulator)" if wide else f"a narrower {opt('dtype_out')}")
        raise ConfigError(f"shift {shift}: an {dtype_out} C stays in the {acc}-bit accumulator of the {dev.name} "
                          f"{dtype_in} mmul {shape}, which the AIE API loads and stores unshifted",
                          f"drop {opt('shift')}, or use {other}")
    if not 0 < shift <= acc - out:
        raise ConfigError(f"shift {shift}: an {dtype_out} C shifted up must fit the {acc}-bit accumulator lanes of "
                          f"the {dev.name} {dtype_in} mmul {shape} (at most {acc - out})",
                          f"use a shift in 0..{acc - out}")




