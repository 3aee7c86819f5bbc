"""The fused epilogue in the scalar kernel (templates/mm_epilogue.cc.j2, issue 21 step 6).

Each rendered kernel is compiled on the host against tests/aie_host (as tests/backends/test_kernels.py does) and its
convert(C, C_acc[, E]) is run on accumulators written straight into the L1 accumulator layout (the C
object's first rows and C_acc), with the epilogue tile packed by gemm_gen/epilogue.pack_tile. C must
equal gemm_gen/facts/epilogue.py bit for bit: float_epilogue (bf16 outputs) or requant_kernel (i8 / i16), on
random data and on edge data (bf16 rounding ties, the LUT's segment edges, int32 extremes, acc + bias
past int32, SRS ties). A few builds also run the whole tile (zero, two k-steps, convert). Mutants of the
rendered source (a wrong rounding mode in either SRS, the bias added after the activation, the clamp
before it, the LUT index off by one, the zero point after the clamp) must be caught.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from gemm_gen.design.ir import KernelBuild
from gemm_gen.design.serve import check as check_config
from gemm_gen.facts.devices import NPU1, NPU2, Device
from gemm_gen.facts.dtypes import BF16, dtype
from gemm_gen.facts.epilogue import (
    INT32_MAX,
    INT32_MIN,
    Activation,
    Epilogue,
    Requant,
    RequantForm,
    bias_bf16,
    float_epilogue,
    pack_tile,
    read_lut_table,
    requant_kernel,
    tanh_lut,
    tanh_table,
    tile_layout,
)
from gemm_gen.facts.errors import ConfigError
from gemm_gen.facts.l1_layout import c_layout
from gemm_gen.facts.rounding import Rounding, Saturation
from gemm_gen.spec.config import GemmConfig

from . import test_kernels as tk

ACT = Activation
DOUBLE = RequantForm.DOUBLE


def ebuild(dev: Device, din: str, dout: str, blocks: tuple[int, int, int], epilogue: Epilogue,
           b_col_maj: bool = False, **kw: object) -> KernelBuild:
    """tests/test_kernels.build with C accumulated wide (the epilogue runs in its conversion)."""
    return replace(tk.build(dev, din, dout, blocks, b_col_maj, wide=True, **kw), epilogue=epilogue)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ECase:
    build: KernelBuild
    patches: tuple[tuple[str, str], ...] = ()
    mutant: str = ""
    host_defines: tuple[str, ...] = ()  # host stand-in options (-DGG_HOST_ACC64_PERMUTED)

    @property
    def id(self) -> str:
        e = self.build.epilogue
        what = (f"requant{'-bias' if e.bias else ''}" if e.requant else
                f"{e.activation.value}{'-bias' if e.bias else ''}{'-clamp' if e.clamp else ''}")
        tag = "".join(f"-{d.removeprefix('-D').lower()}" for d in self.host_defines)
        return f"{tk.source_file(self.build)[:-3]}-{what}" + (f"-mutant-{self.mutant}" if self.mutant else "") + tag

    @property
    def source(self) -> str:
        text = tk.render_kernel(self.build)
        for old, new in self.patches:
            assert text.count(old) == 1, f"{self.id}: the patch does not apply: {old!r}"
            text = text.replace(old, new)
        return text


def _float_cases() -> list[ECase]:
    out = []
    # every compile-time activation (tests/backends/test_kernel_epilogue_runtime.py: runtime), bias on and off, on
    # both devices' default shapes
    for i, act in enumerate(a for a in ACT if a != ACT.RUNTIME):
        for dev in (NPU1, NPU2):
            for bias in (False, True):
                clamp = (-1.5, 6.0) if (i + bias) % 2 else None
                out.append(ECase(ebuild(dev, "bf16", "bf16", (1, 2, 2), Epilogue(bias, act, clamp))))
    gelu = Epilogue(True, ACT.GELU, (-0.25, 3.0))
    out += [  # other mmul shapes, column-major C, rho slices, other rounding, bf16 through bfp16
        ECase(ebuild(NPU1, "bf16", "bf16", (2, 2, 1), gelu, mmul=(8, 8, 4), c_col_maj=True)),
        ECase(ebuild(NPU2, "bf16", "bf16", (1, 2, 1), Epilogue(True, ACT.SILU), mmul=(8, 8, 4), rho=2)),
        ECase(ebuild(NPU2, "bf16", "bf16", (2, 2, 1), gelu, mmul=(4, 8, 4), b_col_maj=True)),
        ECase(ebuild(NPU2, "bf16", "bf16", (1, 2, 1), Epilogue(True, ACT.RELU, (0.0, 6.0)), mmul=(8, 1, 8))),
        ECase(ebuild(NPU1, "bf16", "bf16", (2, 2, 2), Epilogue(True, ACT.SILU, (-2.0, 2.0)), rounding="floor")),
        ECase(ebuild(NPU2, "bf16", "bf16", (1, 2, 2), Epilogue(True, ACT.GELU), emulate=True)),
        ECase(ebuild(NPU1, "bf16", "bf16", (1, 2, 1), Epilogue(False, ACT.GELU), rho=3, c_col_maj=True)),
    ]
    return out


def _int_cases() -> list[ECase]:
    out = []
    for dev in (NPU1, NPU2):
        for din, dout in (("i8", "i8"), ("i8", "i16"), ("i16", "i16")):
            for bias in (False, True):
                out.append(ECase(ebuild(dev, din, dout, (1, 2, 2), Epilogue(bias=bias, requant=DOUBLE))))
    req = Epilogue(bias=True, requant=DOUBLE)
    out += [  # other mmul shapes (acc32 and acc64), column-major C, rho slices, a build's own modes ignored
        ECase(ebuild(NPU1, "i8", "i8", (2, 2, 1), req, mmul=(2, 8, 8), c_col_maj=True)),
        ECase(ebuild(NPU1, "i16", "i16", (1, 2, 1), req, mmul=(2, 4, 8))),
        ECase(ebuild(NPU1, "i16", "i16", (2, 2, 1), req, mmul=(4, 2, 8), rho=2)),  # acc32
        ECase(ebuild(NPU2, "i8", "i16", (1, 2, 2), req, mmul=(4, 8, 8), c_col_maj=True)),
        ECase(ebuild(NPU2, "i16", "i16", (1, 2, 1), req, mmul=(8, 1, 8))),  # acc32
        ECase(ebuild(NPU2, "i8", "i8", (2, 2, 2), req, rounding="floor", saturation="symmetric")),
        ECase(ebuild(NPU1, "i8", "i8", (4, 2, 2), req, loops="c-overlap")),
    ]
    return out


FLOAT = _float_cases()
INT = _int_cases()
# acc64 lanes kept as int32 pairs (aie::vector_cast, whose word order is unpublished): every such case again with
# the host's dump permuted (-DGG_HOST_ACC64_PERMUTED); the kernel must be right both ways
PERMUTED = "-DGG_HOST_ACC64_PERMUTED"
INT_PERMUTED = [replace(c, host_defines=(PERMUTED,)) for c in INT if tk.kernel_params(c.build).acc_words > 1]  # type: ignore[union-attr]
_GELU = ebuild(NPU1, "bf16", "bf16", (1, 2, 2), Epilogue(True, ACT.GELU, (-0.25, 3.0)))
_SILU = ebuild(NPU2, "bf16", "bf16", (1, 2, 2), Epilogue(True, ACT.SILU, (-0.125, 2.0)))
_REQ = ebuild(NPU1, "i8", "i8", (1, 2, 2), Epilogue(bias=True, requant=DOUBLE))
_REQ16 = ebuild(NPU2, "i16", "i16", (1, 2, 2), Epilogue(bias=True, requant=DOUBLE))
_MODE = "  aie::set_rounding(aie::rounding_mode::positive_inf);  // and rounds ties up: one mode for the whole loop\n"
_RDBPOT = "    y = aie::add(aie::mul(y, q_right), below).template to_vector<int32>(30);  // RDBPOT\n"
_BELOW = "    const aie::vector<int32, CHUNK> below = aie::max(aie::min(y, 0), -1);  // -1 where y < 0, else 0\n"
_ACC64_READ = "    const aie::accum<acc64, CHUNK> acc = block.template extract<CHUNK>(i);\n"
_ACT_LINE = "    y = activation(y, lut);\n"  # the GELU and SiLU builds the mutants patch read the tanh table
_BIAS_ADD = "    const aie::accum<accfloat, CHUNK> x = aie::add(acc, bias);  // acc + bias: one fp32 rounding\n"


def _clamp_line(b: KernelBuild) -> str:
    lo, hi = tk.kernel_params(b).epi_clamp  # type: ignore[union-attr, misc]
    return f"    y = aie::min(aie::max(y, bfloat16({lo})), bfloat16({hi}));\n"


_ZP = ("    aie::vector<int32, CHUNK> z = aie::add(aie::accum<acc64, CHUNK>(y), zero_point).template "
       "to_vector<int32>(0);\n    z = aie::min(aie::max(z, act_min), act_max);  // inside T_out: the narrowing "
       "below is exact\n")
MUTANTS = [
    # the conversion's one rounding mode: another mode breaks SRDHM's ties (and RDBPOT's)
    ECase(_REQ, ((_MODE, _MODE.replace("positive_inf", "conv_even")),), "mode-conv-even"),
    ECase(_REQ16, ((_MODE, _MODE.replace("positive_inf", "symmetric_inf")),), "mode-symmetric-inf"),
    # RDBPOT under positive_inf without its correction (negative ties toward +inf), or with it on every lane
    ECase(_REQ, ((_RDBPOT, _RDBPOT.replace("aie::add(aie::mul(y, q_right), below)", "aie::mul(y, q_right)")),
                (_BELOW, "")), "rdbpot-uncorrected"),
    ECase(_REQ16, ((_BELOW, _BELOW.replace("aie::max(aie::min(y, 0), -1)", "aie::broadcast<int32, CHUNK>(-1)")),),
          "rdbpot-corrected-everywhere"),
    ECase(_REQ, ((_ZP, "    aie::vector<int32, CHUNK> z = aie::min(aie::max(y, act_min), act_max);\n"
                       "    z = aie::add(aie::accum<acc64, CHUNK>(z), zero_point).template to_vector<int32>(0);\n"),),
          "zero-point-after-clamp"),
    *(ECase(b, ((_BIAS_ADD, "    const aie::accum<accfloat, CHUNK> x = acc;\n"),
                (_ACT_LINE, "    y = aie::add(aie::accum<accfloat, CHUNK>(activation(y, lut)), bias).template "
                            "to_vector<bfloat16>();\n")), "bias-after-activation") for b in (_GELU, _SILU)),
    *(ECase(b, ((_ACT_LINE + _clamp_line(b), _clamp_line(b) + _ACT_LINE),), "clamp-before-activation")
      for b in (_GELU, _SILU)),
    *(ECase(b, (("TANH_CENTRE = 256;", f"TANH_CENTRE = {centre};"),), f"lut-index-{name}")
      for b in (_GELU, _SILU) for centre, name in ((272, "plus-one"), (240, "minus-one"))),
]
# the epilogue reading a CHUNK-lane slice of the acc64 pairs (the kernel before issue 31 item 10): right with the
# host's default word order (each 16-lane slice is one 1024-bit cast, as aie_api casts), wrong once it is permuted
_REQ16_I64 = next(c.build for c in INT_PERMUTED if c.build.mmul == (4, 4, 8))
_SLICE_READ = ((_ACC64_READ, "    const aie::accum<acc64, CHUNK> acc = aie::vector_cast<acc64>(aie::load_v<ACC_WORDS * "
                             "CHUNK>(p + i * ACC_WORDS * CHUNK));\n"),
               ("  const aie::accum<acc64, MMUL::size_C> block = load_acc(p).to_accum();\n", ""))
SLICE_READ = ECase(_REQ16_I64, _SLICE_READ, "acc64-slice-read")
SLICE_READ_PERMUTED = ECase(_REQ16_I64, _SLICE_READ, "acc64-slice-read", (PERMUTED,))
# a rounding-mode write per block in the conversion loop (the kernel before issue 31 item 7b wrote two)
_LOOP_MODE = ECase(_REQ, ((_RDBPOT, "    aie::set_rounding(aie::rounding_mode::positive_inf);\n" + _RDBPOT),),
                   "mode-write-per-block")
ALL = [*FLOAT, *INT, *INT_PERMUTED, *MUTANTS, SLICE_READ, SLICE_READ_PERMUTED, _LOOP_MODE]


@pytest.fixture(scope="module")
def libraries() -> dict[str, Path | BaseException]:
    return tk.compile_all(ALL)


def _library(libraries: dict[str, Path | BaseException], case: ECase) -> Path:
    lib = libraries[case.id]
    if isinstance(lib, BaseException):
        raise lib
    return lib


# ---- the data ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Data:
    acc: np.ndarray  # m x n accumulator values (f32, or int64 within the accumulator's lanes)
    bias: np.ndarray | None
    requant: Requant | None = None


def _bf16_bits(bits: np.ndarray) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint32).astype(np.uint16).view(BF16.host).astype(np.float32)


def float_data(b: KernelBuild, seed: int) -> Data:
    """Random accumulators at several scales and, in the first columns (bias 0 there), edge values:
    bf16 rounding ties (an fp32 halfway between two bf16 values), the LUT's segment edges x = j / 4 and
    the bf16 values just below them, large values (the end segments), zeros. x never gets so small
    that a GELU cube would be subnormal (the host refuses those, as the core's flushing is unpublished)."""
    rng = np.random.default_rng(seed)
    m, n = b.m, b.n
    acc = (rng.standard_normal((m, n)) * rng.choice([0.3, 1.0, 3.0, 12.0], size=(m, n))).astype(np.float32)
    bias = (rng.standard_normal(n) * 2).astype(np.float32) if b.epilogue.bias else None
    edges = np.concatenate([
        # ties: bf16 bits with 0x8000 below them (odd and even neighbours, both signs)
        _bf16_bits(rng.integers(0x3C00, 0x4200, 24)).view(np.uint32) | 0x8000,
        (_bf16_bits(rng.integers(0xBC00, 0xC200, 24)).view(np.uint32) | 0x8000),
    ]).view(np.float32)
    quarters = np.arange(-20, 21, dtype=np.float32) / 4
    below = np.nextafter(quarters.astype(BF16.host), np.asarray(-np.inf, BF16.host)).astype(np.float32)
    special = np.asarray([0.0, 300.0, -300.0, 4096.0, -4096.0, 1e6, -1e6], dtype=np.float32)
    flat = np.concatenate([edges, quarters, below, special])
    edge_cols = min(n // 2, -(-flat.size // m))
    block = acc[:, :edge_cols].ravel()
    block[:min(flat.size, block.size)] = flat[:block.size]
    acc[:, :edge_cols] = block.reshape(m, edge_cols)
    if bias is not None:
        bias[:edge_cols] = 0.0
    x = bias_bf16(acc, bias).astype(np.float32)
    tiny = (x != 0) & (np.abs(x) < 1e-10)
    acc[tiny] = 1.0
    return Data(acc, bias)


def int_data(b: KernelBuild, seed: int) -> Data:
    """Random accumulators over int32 (past it for acc64 lanes) with INT32_MIN / MAX; per column a random
    bias (huge in some columns, so acc + bias saturates), multiplier (in [2^30, 2^31), and 0, 2^30 for
    SRDHM ties, INT32_MAX) and shift (in [-30, 30], mostly small right shifts, whose RDBPOT ties are
    frequent); a random zero point and clamp inside the output type."""
    rng = np.random.default_rng(seed)
    m, n = b.m, b.n
    out = dtype(b.types.dtype_out)
    wide = dtype(b.types.precision.acc).bits > 32
    lo, hi = (-(1 << 40), 1 << 40) if wide else (INT32_MIN, INT32_MAX + 1)
    size = rng.choice(3, size=(m, n), p=(0.3, 0.3, 0.4))  # full range, 2^20, or small enough to stay in range
    acc = np.choose(size, (rng.integers(lo, hi, (m, n)), rng.integers(-(1 << 20), 1 << 20, (m, n)),
                           rng.integers(-200, 201, (m, n))))
    acc.ravel()[:4] = (INT32_MIN, INT32_MAX, INT32_MIN, INT32_MAX)
    bias = None
    if b.epilogue.bias:
        bias = rng.integers(-(1 << 16), 1 << 16, n)
        bias[1::4] = rng.integers(INT32_MIN, INT32_MAX + 1, len(bias[1::4]))
        bias[:2] = (-1, 1)  # INT32_MIN - 1, INT32_MAX + 1 saturate
    mult = rng.integers(1 << 30, 1 << 31, n)
    shift = rng.integers(-6, 1, n)
    wild = rng.random(n) < 0.2
    shift[wild] = rng.integers(-30, 31, int(wild.sum()))
    # columns whose ties reach the output: M = 0; x / 2 by SRDHM alone (M = 2^30, shift 0); about x / 2
    # by RDBPOT alone (M = INT32_MAX, shift -1); both (M = 2^30, shift -1)
    ties = min(n, 8)
    mult[:ties], shift[:ties] = np.resize((0, 1 << 30, INT32_MAX, 1 << 30), ties), np.resize((0, 0, -1, -1), ties)
    if bias is not None:
        bias[2:ties] = rng.integers(-50, 51, max(0, ties - 2))  # x stays small there
    zp = int(rng.integers(out.min // 2, out.max // 2))
    lo_q, hi_q = sorted(int(v) for v in rng.integers(out.min, out.max + 1, 2))
    act = (lo_q, hi_q) if seed % 2 else (None, None)
    req = Requant(tuple(int(v) for v in mult), tuple(int(v) for v in shift), zp, act[0], act[1], out)
    return Data(acc.astype(np.int64), bias, req)


def expected(b: KernelBuild, d: Data) -> np.ndarray:
    e = b.epilogue
    if d.requant is not None:
        return requant_kernel(d.requant, d.acc, d.bias)
    mode = Rounding[b.rounding.upper()]
    # the kernel runs its whole chain under the build's mode register, the LUT's bf16 rounding included
    return float_epilogue(d.acc, d.bias, e.activation, e.clamp, partial(tanh_lut, rounding=mode), mode)


# ---- running one conversion -------------------------------------------------------------------------------
def write_accumulator(b: KernelBuild, acc: np.ndarray, c: tk.Guarded, buf: tk.Guarded,
                      lib: ctypes.CDLL | None = None) -> None:
    """The m x n accumulator in the kernel's L1 layout: blocked r x t blocks (row-major), rows [0, split)
    at the start of the C object, the rest in C_acc; int64 lanes as int32 pairs, each r x t block laid out as
    the kernel's store_acc writes it (aie::vector_cast of its r t lanes: the host's order, from `lib`)."""
    r, _, t = b.mmul
    t_acc = dtype(b.types.precision.acc)
    host = np.float32 if t_acc.is_float else (np.int64 if t_acc.bits > 32 else np.int32)
    blocked = np.empty(b.m * b.n, dtype=host)
    blocked[c_layout(b.m, b.n, r, t, False)] = acc
    if t_acc.bits > 32 and not t_acc.is_float:
        assert lib is not None, "acc64 pairs are laid out by the host's aie::vector_cast"
        words = np.empty(2 * blocked.size, dtype=np.int32)
        lanes = np.ascontiguousarray(blocked)
        lib.gg_host_acc64_words.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint]
        size_c = r * t
        for at in range(0, blocked.size, size_c):
            lib.gg_host_acc64_words(lanes[at:].ctypes.data, words[2 * at:].ctypes.data, size_c)
        blocked = words.view(np.int64)
    split = b.c_split_elems
    head = blocked[:split].view(np.uint8)
    c.body.view(np.uint8)[:head.size] = head
    buf.body[:] = blocked[split:].view(buf.body.dtype)


BANK = 16 * 1024  # a bank of the host's modelled L1 (aie.hpp host::l1_bank_bytes; gemm_gen/l1_banks.CoreMemory)
TABLE_AT = (2 * BANK, 3 * BANK + 1024)  # where the tests put the tanh table's two copies: in two banks


def device_of(b: KernelBuild) -> Device:
    return NPU1 if b.aie_target == NPU1.aie_target else NPU2


def pointer_args(b: KernelBuild) -> int:
    """convert's pointer arguments: C, C_acc, the epilogue tile, the tanh table's two copies."""
    return 2 + (tile_layout(b.epilogue, b.n) is not None) + 2 * b.epilogue.uses_tanh


def place_tables(kernel: tk.Kernel, b: KernelBuild, at: tuple[int, int] = TABLE_AT,
                 copy_bits: int | None = None) -> tuple[int, ...]:
    """The tanh table's two copies (in the target's layout, or copy_bits') written into the host's modelled L1 at
    byte offsets `at` and registered there (aie.hpp host::l1_place), as the L1 plan places them; their addresses
    (none when the build reads no table)."""
    if not b.epilogue.uses_tanh:
        return ()
    lib = kernel.lib
    lib.gg_host_l1_place.restype = ctypes.c_void_p
    lib.gg_host_l1_place.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
    lib.gg_host_l1_reset()
    table = tanh_table(copy_bits or device_of(b).lut_copy_bits)
    out = []
    for offset in at:
        ptr = lib.gg_host_l1_place(offset, table.nbytes)
        ctypes.memmove(ptr, table.ctypes.data, table.nbytes)
        out.append(ptr)
    return tuple(out)


def run_convert(lib: Path, b: KernelBuild, d: Data, convert: Callable[..., None] | None = None,
                table_at: tuple[int, int] = TABLE_AT, copy_bits: int | None = None) -> np.ndarray:
    """Write the accumulator, the epilogue tile and the tanh table, call convert, check the modes and guards,
    read C."""
    kernel = tk.Kernel(lib, b)
    layout = tile_layout(b.epilogue, b.n)
    t_out = dtype(b.types.dtype_out)
    kernel.convert_fn.argtypes = [ctypes.c_void_p] * pointer_args(b)
    tile = None
    if layout is not None:
        tile = tk.Guarded(layout.nbytes, np.uint8)
        tile.body[:] = pack_tile(b.epilogue, slice(0, b.n), d.bias, d.requant, t_out.is_float)
    tables = place_tables(kernel, b, table_at, copy_bits)
    modes = (Rounding.FLOOR, Saturation.NONE)
    kernel.set_modes(*modes)
    t_acc = dtype(b.types.precision.acc)
    words = 1 if t_acc.is_float else t_acc.bytes // 4
    c = tk.Guarded(b.m * b.n, t_out.host, 8 * b.m * b.n // t_out.host.itemsize)
    buf = tk.Guarded((b.m * b.n - b.c_split_elems) * words, np.float32 if t_acc.is_float else np.int32, 2 * b.m * b.n)
    write_accumulator(b, d.acc, c, buf, kernel.lib)
    args = (c.ptr, buf.ptr, *((tile.ptr,) if tile is not None else ()), *tables)
    kernel.lib.gg_host_reset_rounding_writes()
    kernel.checked(convert or kernel.convert_fn, *args)
    assert kernel.modes() == modes, "the conversion must restore the mode registers it found"
    assert c.guards_intact() and buf.guards_intact(), "the conversion wrote outside C or C_acc"
    assert tile is None or tile.guards_intact()
    r, _, t = b.mmul
    return c.body[c_layout(b.m, b.n, r, t, b.c_col_maj)]


def check(lib: Path, b: KernelBuild, seed: int) -> Data:
    d = (float_data if dtype(b.types.dtype_out).is_float else int_data)(b, seed)
    tk.assert_bit_equal(run_convert(lib, b, d), expected(b, d), b.object_file)
    return d


# ---- the tests -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", FLOAT, ids=lambda c: c.id)
def test_float_epilogue_kernel_equals_float_epilogue(libraries, case: ECase) -> None:
    for seed in range(3):
        check(_library(libraries, case), case.build, seed)


@pytest.mark.parametrize("case", INT, ids=lambda c: c.id)
def test_requant_kernel_equals_requant_kernel(libraries, case: ECase) -> None:
    for seed in range(3):
        d = check(_library(libraries, case), case.build, seed)
        assert d.requant is not None


@pytest.mark.parametrize("case", INT_PERMUTED, ids=lambda c: c.id)
def test_requant_kernel_reads_acc64_pairs_only_through_the_mmul(libraries, case: ECase) -> None:
    """Issue 31 item 10: with the host's acc64 dump permuted (aie::vector_cast's word order is unpublished) the
    kernel is still exact: it reads each block back whole through load_acc and takes row-major lanes from
    mmul::to_accum(). The same kernel passes with the default order (test_requant_kernel_equals_requant_kernel)."""
    for seed in range(3):
        check(_library(libraries, case), case.build, seed)


def test_a_slice_of_the_acc64_pairs_is_right_only_in_one_word_order(libraries) -> None:
    """The epilogue as it read acc64 lanes before item 10 (a CHUNK-lane slice of the int32 pairs): right with
    the host's default order, in which each 16-lane slice is its own 1024-bit cast (as aie_api casts), and
    wrong once the order is permuted: the permuted runs catch a kernel that relies on the dump's layout."""
    check(_library(libraries, SLICE_READ), SLICE_READ.build, 0)
    with pytest.raises(AssertionError, match="differ"):
        check(_library(libraries, SLICE_READ_PERMUTED), SLICE_READ_PERMUTED.build, 0)


def _convert_mode_writes(lib: Path, b: KernelBuild, seed: int) -> int:
    """aie::set_rounding calls during one convert call (the host counts them)."""
    check(lib, b, seed)
    counter = ctypes.CDLL(str(lib))  # the same loaded library: its counter
    counter.gg_host_rounding_writes.restype = ctypes.c_ulonglong
    return int(counter.gg_host_rounding_writes())


@pytest.mark.parametrize("case", INT, ids=lambda c: c.id)
def test_the_requant_loop_writes_no_rounding_mode(libraries, case: ECase) -> None:
    """Issue 31 item 7b: convert writes the rounding mode three times whatever its blocks (the build's mode,
    positive_inf before the loop, the restore after it), none per block."""
    assert _convert_mode_writes(_library(libraries, case), case.build, 0) == 3


def test_a_mode_write_in_the_loop_is_counted(libraries) -> None:
    """The count sees a write inside the loop: one per chunk of every block on top of the three."""
    b = _LOOP_MODE.build
    chunks = b.m * b.n // tk.kernel_params(b).epi_lanes  # type: ignore[union-attr]
    assert chunks > 1
    assert _convert_mode_writes(_library(libraries, _LOOP_MODE), b, 0) == 3 + chunks


def test_no_rendered_epilogue_writes_a_mode_inside_its_loops() -> None:
    """The rendered text of every epilogue build these tests run: the one rounding-mode write of the
    requantization sits in convert() before the block loop, and epilogue_block (the loop's body) writes none."""
    for case in (c for c in (*FLOAT, *INT) if not c.build.epilogue.is_identity):
        text = tk.render_kernel(case.build)
        body = text.split("epilogue_block(", 1)[1].split("\n}\n", 1)[0]
        assert "set_rounding" not in body and "set_saturation" not in body, case.id
        convert = text.split("static inline void convert", 1)[1].split("\n}\n", 1)[0]
        head, loop = convert.split("GG_PIPELINE_BEFORE", 1)
        assert "set_rounding" not in loop, case.id
        requant = case.build.epilogue.requant is not None
        assert ("aie::set_rounding(aie::rounding_mode::positive_inf)" in head) == requant, case.id


def test_the_edge_data_holds_its_edges() -> None:
    """The data the checks run on does reach the cases the mutants break: bf16 ties, LUT segment edges and
    end segments, saturated acc + bias, SRDHM and RDBPOT ties of both signs, clamped outputs."""
    d = float_data(_GELU, 0)
    bits = d.acc.view(np.uint32)
    assert np.sum((bits & 0xFFFF) == 0x8000) >= 16
    x = bias_bf16(d.acc, d.bias).astype(np.float64)
    assert np.sum(x * 4 == np.round(x * 4)) >= 20 and np.sum(np.abs(x) >= 4) >= 4
    b = _REQ16
    d = int_data(b, 1)
    assert d.bias is not None and d.requant is not None
    x = d.acc + d.bias
    assert np.any(x > INT32_MAX) and np.any(x < INT32_MIN)
    xs = np.clip(x, INT32_MIN, INT32_MAX)
    m = np.asarray(d.requant.multiplier)
    ties = (xs * m) % (1 << 31) == (1 << 30)
    assert np.any(ties & (xs > 0)) and np.any(ties & (xs < 0))
    y = requant_kernel(d.requant, d.acc, d.bias)
    assert np.any(y == d.requant.lo) and np.any(y == d.requant.hi)


@pytest.mark.parametrize("case", MUTANTS, ids=lambda c: c.mutant + "-" + c.build.types.dtype_out)
def test_mutant_epilogue_kernels_are_caught(libraries, case: ECase) -> None:
    # C differs; or the host refuses first (an index one segment up reads past the table's end)
    with pytest.raises(AssertionError, match="differ|outside its table"):
        for seed in range(3):
            check(_library(libraries, case), case.build, seed)


@pytest.mark.parametrize("case", [FLOAT[5], FLOAT[15], INT[1], INT[10]], ids=lambda c: c.id)
def test_the_whole_tile_with_its_epilogue(libraries, case: ECase) -> None:
    """zero, two k-steps of matmul, then convert with the tile: C is the epilogue of the kernel's
    accumulator as gemm_gen/facts/numerics.py computes it."""
    b = case.build
    kernel = tk.Kernel(_library(libraries, case), b)
    steps = tk.inputs(tk.Case(b, hot=not dtype(b.types.dtype_out).is_float))
    nm = tk.numerics(b)
    acc = nm.zero((b.m, b.n))
    for a_tile, b_tile in steps:
        acc = nm.call(acc, a_tile, b_tile)
    d = (float_data if dtype(b.types.dtype_out).is_float else int_data)(b, 7)
    d = replace(d, acc=np.asarray(acc))
    layout = tile_layout(b.epilogue, b.n)
    convert = kernel.convert_fn
    convert.argtypes = [ctypes.c_void_p] * pointer_args(b)
    tables = place_tables(kernel, b)
    tile = None
    if layout is not None:
        tile = tk.Guarded(layout.nbytes, np.uint8)
        tile.body[:] = pack_tile(b.epilogue, slice(0, b.n), d.bias, d.requant, dtype(b.types.dtype_out).is_float)
    # run_tile calls convert(C, C_acc): hand it the tile and the tables too
    kernel.convert_fn = lambda c, buf: convert(c, buf, *((tile.ptr,) if tile is not None else ()), *tables)
    got = tk.run_tile(kernel, steps)
    tk.assert_bit_equal(got, expected(b, d), b.object_file)


def test_an_epilogue_free_build_renders_as_before() -> None:
    """Every case of tests/backends/test_kernels.py renders without any epilogue text, and an identity epilogue
    is no epilogue (the same text as the build without one)."""
    for case in tk.ALL:
        text = tk.render_kernel(case.build)
        assert "epilogue" not in text.lower() and "EPI_" not in text
    b = tk.build(NPU1, "bf16", "bf16", (1, 2, 2), False, wide=True)
    assert tk.render_kernel(replace(b, epilogue=Epilogue())) == tk.render_kernel(b)


def test_convert_takes_the_tile_and_the_table_only_when_it_reads_them() -> None:
    for case in (*FLOAT, *INT):
        b = case.build
        text = tk.render_kernel(b)
        name = b.symbols["convert"]
        has_tile = tile_layout(b.epilogue, b.n) is not None
        (signature,) = [line for line in text.splitlines() if line.startswith(f"void {name}(")]
        assert (f" *C_acc, {tk.kernel_params(b).ctype_in} *E" in signature) == has_tile, case.id  # type: ignore[union-attr]
        assert ("float *lut_ab, float *lut_cd" in signature) == b.epilogue.uses_tanh, case.id
        assert signature.count("*") == pointer_args(b), case.id


def test_no_linear_approx_object_in_a_rendered_epilogue() -> None:
    """Issue 31 item 7a: the LUT tanh is written out (mlir-aie's rewritten getTanhBf16), with no aie::lut or
    aie::linear_approx object and no static table (the copies are kernel arguments)."""
    for case in (*FLOAT, *tke_runtime_builds()):
        text = tk.render_kernel(case.build)
        assert "linear_approx<" not in text and "aie::lut<" not in text, case.id
        assert "static const float" not in text and "TANH_LUT" not in text, case.id
        assert ("load_lut_2x_float(lut.ab, lut.cd, index" in text) == case.build.epilogue.uses_tanh, case.id


def tke_runtime_builds() -> list[ECase]:
    return [ECase(ebuild(dev, "bf16", "bf16", (1, 2, 2), Epilogue(True, ACT.RUNTIME))) for dev in (NPU1, NPU2)]


# mlir-aie's own tables, as published (the first two groups of tanh_lut_ab: segments 0-3): AIE2 stores each pair of
# {slope, offset} pairs twice (aie_runtime_lib/AIE2/lut_based_ops.cpp), AIE2P each group of four (AIE2P/
# lut_based_ops.cpp since PR #2189, ce9af0f1)
_S = (0.0, 0.002838134765625, 0.005096435546875, 0.00750732421875)
_O = (-1.0, -0.98828125, -0.98046875, -0.97265625)
_P = [(s, o) for s, o in zip(_S, _O)]
MLIR_AIE_TABLE_HEAD = {
    128: [*_P[0], *_P[1], *_P[0], *_P[1], *_P[2], *_P[3], *_P[2], *_P[3]],
    256: [*_P[0], *_P[1], *_P[2], *_P[3], *_P[0], *_P[1], *_P[2], *_P[3]],
}


@pytest.mark.parametrize("dev", [NPU1, NPU2], ids=lambda d: d.name)
def test_each_target_gets_mlir_aies_table_layout(dev: Device) -> None:
    """The table the design writes is mlir-aie's for the target (npu2's is not npu1's: 256-bit groups), and
    reads back through the target's lookup as the numerics' table; the other target's layout does not."""
    table = tanh_table(dev.lut_copy_bits)
    assert table.size == 128 and list(table[:16]) == [v for pair in MLIR_AIE_TABLE_HEAD[dev.lut_copy_bits]
                                                        for v in (pair if isinstance(pair, tuple) else (pair,))]
    slopes, offsets = read_lut_table(table, table, dev.lut_copy_bits)
    assert np.array_equal(slopes, np.float32(_tanh_slopes())) and np.array_equal(offsets, np.float32(_tanh_offsets()))
    other = 384 - dev.lut_copy_bits  # 128 <-> 256
    with pytest.raises(ValueError, match="copies of its pair differ"):
        read_lut_table(tanh_table(other), tanh_table(other), dev.lut_copy_bits)
    assert not np.array_equal(tanh_table(NPU1.lut_copy_bits), tanh_table(NPU2.lut_copy_bits))


def _tanh_slopes() -> tuple[float, ...]:
    from gemm_gen.facts.epilogue import TANH_SLOPES
    return TANH_SLOPES


def _tanh_offsets() -> tuple[float, ...]:
    from gemm_gen.facts.epilogue import TANH_OFFSETS
    return TANH_OFFSETS


def _tanh_case(dev: Device) -> ECase:
    return next(c for c in FLOAT if c.build.epilogue.activation == ACT.SILU and c.build.aie_target == dev.aie_target)


@pytest.mark.parametrize("dev", [NPU1, NPU2], ids=lambda d: d.name)
def test_the_host_lookup_fails_the_other_targets_table(libraries, dev: Device) -> None:
    """The host's 4-way lookup reads the target's layout: a SiLU kernel given the other target's table (npu1's
    128-bit layout on npu2: the defect issue 31 item 1 fixes) is refused; the right one passes."""
    case = _tanh_case(dev)
    d = float_data(case.build, 0)
    run_convert(_library(libraries, case), case.build, d)
    with pytest.raises(tk.HostApiError, match="copies of one .slope, offset. pair differ"):
        run_convert(_library(libraries, case), case.build, d, copy_bits=384 - dev.lut_copy_bits)


@pytest.mark.parametrize("at, message", [
    ((2 * BANK, 2 * BANK + 512), "share a bank"),
    ((2 * BANK + 32, 3 * BANK), "aligned"),
], ids=["one-bank", "misaligned"])
def test_the_host_lookup_refuses_tables_placed_wrong(libraries, at: tuple[int, int], message: str) -> None:
    """Issue 31 item 2: the two copies in one bank (two adjacent static arrays) are refused, as is a table
    off aie::vector_decl_align."""
    for dev in (NPU1, NPU2):
        case = _tanh_case(dev)
        if message == "aligned" and dev is NPU1:
            continue  # 32 bytes is AIE2's alignment
        with pytest.raises(tk.HostApiError, match=message):
            run_convert(_library(libraries, case), case.build, float_data(case.build, 0), table_at=at)


@pytest.mark.parametrize("case", [_tanh_case(NPU1), _tanh_case(NPU2), FLOAT[3], FLOAT[7]], ids=lambda c: c.id)
def test_every_bf16_through_the_kernels_tanh(libraries, case: ECase) -> None:
    """Every normal bf16 in [-16, 16] (and 0, and +-inf) as the accumulator of a SiLU or GELU build: C equals
    float_epilogue bit for bit, so the kernel's tanh (the clamp, the index's floor, the lookup, the mac) is
    epilogue.tanh_lut over [-8, 8] and past the table's ends."""
    b = case.build
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(BF16.host).astype(np.float32)
    keep = np.isfinite(x) & (np.abs(x) <= 16) & ((x == 0) | (np.abs(x) >= 2.0 ** -60))
    x = np.concatenate([x[keep], np.float32([np.inf, -np.inf])])
    per = b.m * b.n
    x = np.resize(x, -(-x.size // per) * per).reshape(-1, b.m, b.n)
    mode = Rounding[b.rounding.upper()]
    for acc in x:
        d = Data(acc, np.zeros(b.n, np.float32) if b.epilogue.bias else None)
        got = run_convert(_library(libraries, case), b, d)
        want = float_epilogue(acc, d.bias, b.epilogue.activation, b.epilogue.clamp, partial(tanh_lut, rounding=mode),
                              mode)
        tk.assert_bit_equal(got, want, b.object_file)


@pytest.mark.parametrize("build, config, message", [
    (ebuild(NPU1, "bf16", "bf16", (1, 2, 2), Epilogue(activation=ACT.RELU)), dict(activation="relu"), None),
    # ReLU of a requantized output is its act_min, which the host raises (epilogue_args.kernel_requant): the
    # kernel is the requantization's (the renderer refused it while the config's check took it)
    (ebuild(NPU1, "i8", "i8", (1, 2, 2), Epilogue(activation=ACT.RELU, requant=DOUBLE)),
     dict(dtype_in="i8", dtype_out="i8", activation="relu", requant="per_channel"), None),
    (replace(tk.build(NPU1, "bf16", "bf16", (1, 2, 2), False), epilogue=Epilogue(activation=ACT.RELU)),
     dict(activation="relu", acc="out"), "--acc out converts C after every k-step"),
    (ebuild(NPU1, "i8", "i8", (1, 2, 2), Epilogue(activation=ACT.RELU)), dict(dtype_in="i8", dtype_out="i8",
                                                                             activation="relu"), "add --requant"),
    (ebuild(NPU1, "i8", "i8", (1, 2, 2), Epilogue(bias=True)), dict(dtype_in="i8", dtype_out="i8", bias=True),
     "add --requant"),
    (ebuild(NPU1, "i8", "i8", (1, 2, 2), Epilogue(requant=RequantForm.SINGLE)),
     dict(dtype_in="i8", dtype_out="i8", requant="single"), "unknown requantization"),
    (ebuild(NPU1, "i8", "i8", (1, 2, 2), Epilogue(requant=DOUBLE), shift=3),
     dict(dtype_in="i8", dtype_out="i8", requant="per_channel", shift=3), "--shift 3 with --requant"),
    (ebuild(NPU1, "bf16", "bf16", (1, 2, 2), Epilogue(requant=DOUBLE)), dict(requant="per_channel"),
     "not for a bf16 output"),
    (ebuild(NPU1, "bf16", "bf16", (1, 2, 2), Epilogue(clamp=(2.0, 1.0))), dict(clamp=(2.0, 1.0)), "clamp bounds"),
    (ebuild(NPU1, "bf16", "bf16", (1, 2, 2), Epilogue(clamp=(0.0, float("inf")))), dict(clamp=(0.0, float("inf"))),
     "clamp bounds"),
    # finite in fp32, infinite in bf16 (the kernel's type for the bounds): the config refuses it too now
    (ebuild(NPU1, "bf16", "bf16", (1, 2, 2), Epilogue(clamp=(0.0, 3.4e38))), dict(clamp=(0.0, 3.4e38)),
     "not finite LO <= HI in bf16"),
])
def test_render_asserts_the_epilogue_rules_the_config_check_applies(build: KernelBuild, config: dict,
                                                                    message: str | None) -> None:
    """Each epilogue build: rendered when the config's check takes it, else refused by that check (with its
    message) and asserted by the renderer (which renders what the rules allowed)."""
    fields = {**dict(device="npu1", M=64, K=64, N=64, m=16, k=32, n=16, k_mt=32), **config}
    if message is None:
        check_config(GemmConfig(**fields))
        tk.render_kernel(build)
        return
    with pytest.raises(ConfigError, match=message):  # (an epilogue no option names fails as the config is made)
        check_config(GemmConfig(**fields))
    with pytest.raises(AssertionError):
        tk.render_kernel(build)


# ---- the host stand-in's epilogue operations ---------------------------------------------------------------
# the tanh table's two copies in host::l1 (fill: every pair {0.25, 0.5}, bf16-valued, all copies equal), a
# lookup index and the two outputs
def _tables(ab: int = 2 * BANK, cd: int = 3 * BANK, index: int = 256) -> str:
    return (f"float *ab = reinterpret_cast<float *>(aie::host::l1_place({ab}, 512));\n"
            f"float *cd = reinterpret_cast<float *>(aie::host::l1_place({cd}, 512));\n"
            "for (int i = 0; i < 128; ++i) ab[i] = cd[i] = (i % 2) ? 0.5f : 0.25f;\n"
            f"v16int32 idx = aie::broadcast<int32, 16>({index}); v32bfloat16 o0, o1;\n")


_LOOKUP = "load_lut_2x_float(ab, cd, idx, o0, o1);"


@tk.needs_gxx
@pytest.mark.parametrize("code", [
    "aie::lut<4, float, bfloat16> l(32, nullptr, nullptr);",  # no LUT objects: the kernel writes the lookup out
    "aie::linear_approx<bfloat16, int> a;",
    "aie::accum<accfloat, 16> a = aie::vector<float, 16>{};",  # explicit, as in the AIE API
    "aie::accum<acc64, 16> a = aie::vector<int32, 16>{};",
    "(void)aie::accum<acc64, 16>(aie::vector<int32, 16>{}).to_vector<int8>(0);",  # acc64 SRS: int16 / int32
    "(void)aie::accum<acc32, 16>(aie::vector<int32, 16>{}).to_vector<float>(0);",
    "(void)aie::max(aie::vector<float, 16>{}, aie::vector<float, 16>{});",  # modelled: int32, bf16
    "(void)aie::concat(aie::vector<int32, 8>{}, aie::vector<int32, 4>{});",
    "(void)aie::add(aie::accum<accfloat, 16>{}, aie::vector<int32, 16>{});",
    "(void)aie::to_fixed_floor<int16>(aie::vector<bfloat16, 16>{}, 6);",  # modelled: int32, 16 lanes
    "(void)aie::to_fixed_floor<int32>(aie::vector<bfloat16, 32>{}, 6);",
    "(void)aie::vector_cast<float>(aie::vector<bfloat16, 1>{});",  # bf16 lanes in whole fp32 words only
], ids=["lut-object", "linear-approx-object", "implicit-accfloat", "implicit-acc64", "acc64-to-int8",
        "acc32-to-float", "float-max", "concat-sizes", "accfloat-plus-int", "to-fixed-floor-int16",
        "to-fixed-floor-32-lanes", "vector-cast-odd-lanes"])
def test_the_host_epilogue_api_refuses_at_compile_time(code: str) -> None:
    for arch in (20, 21):
        assert tk._compiles(code, arch).returncode != 0


@tk.needs_gxx
@pytest.mark.parametrize("code, arch", [
    ("(void)mac_elem_16_2(v32bfloat16{}, v32bfloat16{}, aie::accum<accfloat, 16>{});", 21),
    ("(void)mac_elem_32(v32bfloat16{}, v32bfloat16{}, aie::accum<accfloat, 32>{});", 20),
], ids=["mac-elem-16-2-on-aie2p", "mac-elem-32-on-aie2"])
def test_each_targets_mac_is_its_own(code: str, arch: int) -> None:
    """The LUT tanh's mac: mac_elem_16_2 on AIE2, mac_elem_32 on AIE2P (aie_api linear_approx's #if, l.404-422);
    the other target's fails to compile, and its own compiles."""
    assert tk._compiles(code, arch).returncode != 0
    assert tk._compiles(code, 41 - arch).returncode == 0


@tk.needs_gxx
@pytest.mark.parametrize("code, message", [
    (_tables(cd=2 * BANK + 512) + _LOOKUP, "share a bank"),
    ("alignas(64) static float ab[128], cd[128]; v16int32 idx{}; v32bfloat16 o0, o1;" + _LOOKUP,
     "outside the modelled L1"),
    (_tables() + "ab[65] = 0.75f;" + _LOOKUP, "copies of one"),  # index 256: entry 16's pair at float 64
    (_tables() + "for (int i = 0; i < 128; i += 2) ab[i] = cd[i] = 0.3f;\n" + _LOOKUP, "not bf16-valued"),
    (_tables(index=512) + _LOOKUP, "outside its table"),
    (_tables(index=-16) + _LOOKUP, "outside its table"),
    (_tables(ab=2 * BANK + 16) + _LOOKUP, "aligned"),
    ("(void)::shuffle(v32bfloat16{}, v32bfloat16{}, 7);", "mode the host does not model"),
    ("(void)aie::host::l1_place(65536 - 256, 512);", "past the modelled L1"),
    ("(void)aie::to_fixed_floor<int32>(aie::broadcast<bfloat16, 16>(bfloat16(NAN)), 6);", "NaN"),
    ("(void)aie::to_fixed_floor<int32>(aie::broadcast<bfloat16, 16>(bfloat16(1e30f)), 6);", "past int32"),
    ("(void)aie::mul(aie::broadcast<bfloat16, 16>(bfloat16(1e-39f)), aie::broadcast<bfloat16, 16>(bfloat16(1.0f)));",
     "subnormal"),
    ("(void)aie::max(aie::broadcast<bfloat16, 16>(bfloat16(NAN)), bfloat16(0.0f));", "NaN"),
    ("(void)aie::accum<acc64, 16>(aie::vector<int32, 16>{}).to_vector<int32>(60);", "SRS"),
    ("(void)aie::accum<acc32, 16>(aie::vector<int32, 16>{}, 2);", "shift 0"),
    ("(void)aie::accum<acc32, 16>(aie::vector<int32, 16>{}).to_vector<int32>(1);", "ignores the shift"),
], ids=["one-bank", "outside-l1", "copies-differ", "slope-not-bf16", "index-past-the-end", "index-before-the-start",
        "misaligned-table", "shuffle-mode", "l1-place-past-the-end", "nan-index", "huge-index", "subnormal-mul",
        "nan-max", "srs-60", "acc32-ups", "acc32-int32-shift"])
def test_the_host_epilogue_api_refuses_what_the_real_one_would(code: str, message: str) -> None:
    for arch in (20, 21):
        assert message in tk._host_run(code, arch)


@tk.needs_gxx
def test_the_host_api_takes_the_epilogue_operations() -> None:
    ok = ("aie::vector<int32, 16> v = aie::broadcast<int32, 16>(3);\n"
          "aie::accum<acc64, 16> a(v); a = aie::add(a, v); (void)aie::mul(v, v).to_vector<int32>(31);\n"
          "(void)aie::accum<acc32, 16>(aie::min(aie::max(v, 0), 1)).to_vector<int8>(0);\n"
          "aie::vector<bfloat16, 16> x = aie::broadcast<bfloat16, 16>(bfloat16(0.5f));\n"
          "(void)aie::add(aie::accum<accfloat, 16>(x), x).to_vector<bfloat16>();\n"
          "(void)aie::concat(aie::vector<float, 4>{}, aie::vector<float, 4>{});\n"
          "aie::vector<bfloat16, 32> y; y.insert(1, x); (void)y.extract<16>(0);\n"
          "(void)aie::add(aie::to_fixed_floor<int32>(x, 6), 256);\n"
          + _tables() + _LOOKUP + "\n(void)aie::vector_cast<float>(::shuffle(o0, o1, T32_16x2_hi));\n"
          "(void)::shuffle(o0, o1, T16_16x4_lo);\n")
    for arch in (20, 21):
        assert tk._host_run(ok, arch) == ""


@tk.needs_gxx
@pytest.mark.parametrize("arch", [20, 21])
def test_the_host_lookup_reads_the_targets_layout(arch: int) -> None:
    """load_lut_2x_float and the two shuffles, as the kernel uses them, give each lane the slope (bf16) and the
    offset of its entry from a table in the target's layout (gemm_gen/epilogue.lut_table): entries 0..31 at byte
    indices 16 e + 0..15."""
    dev = NPU1 if arch == 20 else NPU2
    slopes = np.float32([(i + 1) / 64 for i in range(32)])  # bf16-valued
    offsets = np.float32([-3.0 - i / 1024 for i in range(32)])
    table = ", ".join(f"{float(v)!r}f" for v in _layout(slopes, offsets, dev))
    code = (f"static const float t[128] = {{{table}}};\n"
            "float *ab = reinterpret_cast<float *>(aie::host::l1_place(0, 512));\n"
            "float *cd = reinterpret_cast<float *>(aie::host::l1_place(16384, 512));\n"
            "for (int i = 0; i < 128; ++i) ab[i] = cd[i] = t[i];\n"
            "for (int e = 0; e < 32; e += 16) {\n"
            "  v16int32 idx; for (int i = 0; i < 16; ++i) idx[i] = 16 * (e + i) + (i % 16);\n"
            "  v32bfloat16 o0, o1; load_lut_2x_float(ab, cd, idx, o0, o1);\n"
            "  const aie::vector<float, 16> off = aie::vector_cast<float>(::shuffle(o0, o1, T32_16x2_hi));\n"
            "  const v32bfloat16 s = ::shuffle(o0, o1, T16_16x4_lo);\n"
            "  for (int i = 0; i < 16; ++i) std::printf(\"%.17g %.17g %u \", double(off[i]), double(float(s[16 + i])),"
            " unsigned(s[i].bits));\n"
            "}\n")
    got = np.asarray(tk._host_run(code, arch).split(), dtype=np.float64).reshape(32, 3)
    assert np.array_equal(got[:, 0], offsets) and np.array_equal(got[:, 1], slopes) and not got[:, 2].any()


def _layout(slopes: np.ndarray, offsets: np.ndarray, dev: Device) -> np.ndarray:
    from gemm_gen.facts.epilogue import lut_table
    return lut_table(tuple(float(v) for v in slopes), tuple(float(v) for v in offsets), dev.lut_copy_bits)
