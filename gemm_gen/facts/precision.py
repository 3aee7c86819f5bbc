"""Operand types of a GEMM: A and B as they reach the cores, C in DRAM, and C's storage in L1.

C's L1 type between kernel calls (`acc`) is, by default, the kernel's own accumulator: fp32 for
float outputs, int32 for integer outputs of acc32 mmul shapes and int64 (int32 pairs) of acc64 ones.
C is then shifted, rounded and saturated into its output type once, after the last k-step, and a
GEMM returns what the user means by A @ B. `--acc out` keeps C in its output type instead and
requantizes it after every kernel call, as mlir-aie's matrix multiplication examples and both
papers' measured kernels do: half the C memory or less, at the cost of a rounding (and for
integers a saturation) per k-step.

Scalar GEMMs use one input type for A and B. Block-float (bfp16ebs8) GEMMs on npu2 mix them, as
the ATB paper's three precision configs do:

    config1   A bf16 (converted to bfp16 in the core), B bfp16, C bf16
    config2   A, B, C bfp16 (C requantized to bfp16 after every kernel call)
    config3   A, B, C bfp16 with C accumulated in bf16 and converted once, after its last call

Any other combination of --dtype_in, --dtype_b, --dtype_out and --acc that the bfp16 datapath can
run is accepted too (see `check`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .devices import Device, operand_key
from .dtypes import dtype
from .errors import ConfigError, opt

BFP16 = "bfp16"
# int4 weights (issue 22, W4A8): B in int4 times an int8 A, on the AIE API's 8b x 4b mmuls (acc32 only)
I4 = "i4"
I4_A_TYPES = ("i8",)
# W4A16: int4 B with group scales (gemm_gen/facts/groupquant.py) times a bf16 A, dequantized to bf16 in the core
W4A16_A_TYPES = ("bf16",)
W4A16_OUT_TYPES = ("bf16", "f32")
# what the bfp16 datapath multiplies: A bf16 (converted in the core) or bfp16, B always bfp16
BFP16_A_TYPES = ("bf16", BFP16)
BFP16_OUT_TYPES = ("bf16", "f32", BFP16)
# C's L1 type when it differs from its DRAM type: accumulate wider, convert after the last call
BFP16_ACC_TYPES = ("bf16", "f32")
# --acc out: C stays in its output type between calls (requantized per k-step; mlir-aie, the papers)
ACC_OUT = "out"
# the types C can accumulate in besides its own (--acc out)
ACC_TYPES = ("f32", "i32", "i64", "bf16", BFP16)
# compilers that build our bfp16 kernels (templates/mm_bfp16.cc.j2), the first the default. Peano
# was refused while the kernels kept four live block-vector input streams, more than aie2p's two
# load-FIFO registers: Peano spills the extra stream state to slots it cannot encode (llvm-aie #1090,
# no merged fix), and mlir-aie's own ATB kernels needed a zero-spill rewrite for Peano (#3650). Every
# variant now holds one A and one B input stream and one output stream (as #3650's Peano kernels do;
# counted on the host, tests/backends/test_kernels.py BFP16_FIFO_VARIANTS), so that reason is gone. Nothing
# here compiled them with Peano: whether the pinned llvm-aie builds them without spills is unverified.
BFP16_COMPILERS = ("peano", "chess")
BFP16_COMPILERS_WHY = ("the bfp16 kernels hold two live input streams (aie2p's two load FIFOs), as mlir-aie's "
                       "Peano-built ATB kernels do (#3650); not yet compiled with Peano here")


@dataclass(frozen=True)
class Precision:
    a: str
    b: str
    out: str
    acc: str

    @property
    def block(self) -> bool:
        """Whether the bfp16 datapath runs this GEMM (any operand in bfp16)."""
        return BFP16 in (self.a, self.b, self.out, self.acc)

    @property
    def converts_a(self) -> bool:
        """A arrives as bf16 and the kernel converts each A tile to bfp16 (into an L1 scratch)."""
        return self.b == BFP16 and self.a != BFP16

    @property
    def converts_c(self) -> bool:
        """C accumulates in `acc` and is converted to `out` after the tile's last kernel call."""
        return self.acc != self.out

    @property
    def name(self) -> str:
        for preset, p in PRESETS.items():
            if p == self:
                return preset
        return f"{self.a}x{self.b}->{self.out}" + (f" (acc {self.acc})" if self.converts_c else "")


PRESETS: dict[str, Precision] = {
    "config1": Precision("bf16", BFP16, "bf16", "bf16"),
    "config2": Precision(BFP16, BFP16, BFP16, BFP16),
    "config3": Precision(BFP16, BFP16, BFP16, "bf16"),
}


def resolve(dtype_in: str, dtype_b: str | None, dtype_out: str, acc: str | None) -> Precision:
    """The precision the flags ask for: B defaults to A's type; acc "out" (or None, for the operand
    types alone) is C's own type. The default wide accumulator needs the mmul: `wide_acc`."""
    return Precision(dtype_in, dtype_b or dtype_in, dtype_out, dtype_out if acc in (None, ACC_OUT) else str(acc))


_DROP_ACC = f"drop {opt('acc')}, or use {opt('acc', ACC_OUT)}"


def check_int4(p: Precision) -> None:
    """int4 is a weight type: B only, times an int8 A, into the int8 kernels' outputs; the 8b x 4b mmuls
    accumulate in acc32, so C is int32 in L1 (or its own type with --acc out)."""
    if p.a == I4 or p.out == I4:
        raise ConfigError(f"{opt('dtype_in' if p.a == I4 else 'dtype_out', I4)}: int4 is a weight type (B only)",
                          f"use {opt('dtype_in', 'i8')} {opt('dtype_b', I4)}")
    if p.a in W4A16_A_TYPES:
        check_w4a16(p)
        return
    if p.a not in I4_A_TYPES:
        raise ConfigError(f"{opt('dtype_b', I4)} with {opt('dtype_in', p.a)}: int4 B multiplies an int8 A (the AIE "
                          "API's 8b x 4b mmuls) or a bf16 A (W4A16, dequantized in the core); no 16b x 4b mmul",
                          f"use {opt('dtype_in', 'i8', 'bf16')}")
    if p.out not in ("i8", "i16", "i32"):
        raise ConfigError(f"{opt('dtype_out', p.out)} with int8 x int4: the integer kernel writes i8, i16 or i32",
                          f"use {opt('dtype_out', 'i32')}")
    if p.acc not in (p.out, "i32"):
        raise ConfigError(f"{opt('acc', p.acc)} with int8 x int4: C accumulates in the mmul's acc32 (i32, the "
                          f"default) or in its output type ({opt('acc', ACC_OUT)})", _DROP_ACC)


def check_w4a16(p: Precision) -> None:
    """W4A16: the core dequantizes int4 B to bf16 and runs the bf16 kernel, which accumulates in fp32."""
    if p.out not in W4A16_OUT_TYPES:
        raise ConfigError(f"{opt('dtype_out', p.out)} with bf16 x int4 weights: the bf16 kernel writes bf16 or f32",
                          f"use {opt('dtype_out', 'bf16')}")
    if p.acc not in (p.out, "f32"):
        raise ConfigError(f"{opt('acc', p.acc)} with bf16 x int4 weights: C accumulates in fp32 (the default) or "
                          f"in its output type ({opt('acc', ACC_OUT)})", _DROP_ACC)


def wide_acc(out: str, acc_bits: int) -> str:
    """C's L1 type by default: the kernel's accumulator, so that C is rounded once: fp32 for float
    outputs (bf16, f32, bfp16), int32 under an acc32 mmul, int64 under an acc64 one."""
    if dtype(out).is_float:
        return "f32"
    return "i64" if acc_bits == 64 else "i32"


def check_precision(p: Precision, dev: Device, acc_bits: int = 32) -> None:
    """Raise ConfigError unless `dev` has a kernel for this combination of types (`acc_bits`: the
    mmul's integer accumulator lanes, which fix the wide accumulator of integer outputs)."""
    for name in (p.a, p.b, p.out):
        dtype(name)  # unknown names fail here, with the list of types
    if p.acc not in ACC_TYPES and p.acc != p.out:
        raise ConfigError(f"{opt('acc', p.acc)} is no accumulator type", f"use {opt('acc', ACC_OUT)} (C in its "
                          f"output type), or one of {', '.join(ACC_TYPES)}; or drop {opt('acc')} for the default")
    if not p.block and I4 in (p.a, p.b, p.out):
        check_int4(p)
        return
    if not p.block:
        # two scalar types run where the device has a mixed mmul for the pair (facts.devices mixed_mmul_shapes)
        if p.b != p.a and operand_key(p.a, p.b) not in dev.mixed_mmul_shapes:
            raise ConfigError(f"{opt('dtype_b', p.b)} with {opt('dtype_in', p.a)}: scalar kernels multiply one input "
                              f"type", f"drop {opt('dtype_b')} (or use {opt('dtype_b', BFP16)} with bf16 A on npu2)")
        wide = wide_acc(p.out, acc_bits)
        if p.acc not in (p.out, wide):
            raise ConfigError(f"{opt('acc', p.acc)} with {opt('dtype_out', p.out)}: C accumulates in the kernel's "
                              f"{wide} accumulator (the default) or in its output type ({opt('acc', ACC_OUT)})",
                              _DROP_ACC)
        return
    if dev.bfp16_mmul_shape is None:
        raise ConfigError(f"{dev.name} has no bfp16 datapath (block datatypes are an XDNA2 feature)",
                          f"use {opt('device', 'npu2')}, or bf16/i8/i16 types")
    if p.b != BFP16:
        raise ConfigError(f"{opt('dtype_b', p.b)}: the bfp16 datapath multiplies bf16 or bfp16 A by bfp16 B",
                          f"use {opt('dtype_b', BFP16)}")
    if p.a not in BFP16_A_TYPES:
        raise ConfigError(f"{opt('dtype_in', p.a)} with bfp16 B: A must be bf16 or bfp16",
                          f"use {opt('dtype_in', *BFP16_A_TYPES)}")
    if p.out not in BFP16_OUT_TYPES:
        raise ConfigError(f"{opt('dtype_out', p.out)}: a bfp16 GEMM writes bf16, f32 or bfp16",
                          f"use {opt('dtype_out', *BFP16_OUT_TYPES)}")
    if p.converts_c and not (p.out == BFP16 and p.acc in BFP16_ACC_TYPES or p.out == "bf16" and p.acc == "f32"):
        raise ConfigError(f"{opt('acc', p.acc)} with {opt('dtype_out', p.out)}: a bfp16 GEMM accumulates a bf16 C "
                          f"in f32, a bfp16 C in f32 or bf16, or C in its own type ({opt('acc', ACC_OUT)})", _DROP_ACC)
