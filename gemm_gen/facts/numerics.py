"""Exact kernel numerics: what one matmul kernel call does to its C tile, bit for bit.

Model (mlir-aie's aie_kernels/aie2/mm.cc and aie2p/mm.cc, the AIE API's aie::mmul and to_vector, the
AIE-ML mode registers of AM020):
- bf16 inputs: products are exact in fp32; one kernel call adds its k products to the C tile
  loaded into an fp32 accumulator, and stores C back in its type with the core's rounding mode
  (our kernels set conv_even = round-to-nearest-even; the hardware default is floor).
  The order of the fp32 additions inside the fused mac datapath is unpublished. Two models, chosen by
  `fp32_per_mac`: by default (what the simulator, `gemm-gen simulate` and the reference follow) a call
  is the exact sum rounded once to fp32; with fp32_per_mac (what the host-compiled kernels' tests run
  under, tests/aie_host's -DGG_HOST_FP32_PER_MAC) the accumulator is rounded to fp32 after every
  hardware mac, each adding `mac_products` exact products per lane (`fused_mac_products`: the mmul's
  K where one intrinsic computes it, 1 where aie_api emulates it with elementwise macs), macs in K
  order. Sums are formed in fp64, which is exact for the inputs `gemm_gen.facts.inputs` generates, so the
  result does not depend on BLAS summation order and a tile computed alone equals the same tile
  computed inside a whole-matrix reference; for the "exact" family both models give the same bits.
- integer inputs: the accumulator (acc32, or acc64 for some 16-bit shapes) is loaded with C, the
  call adds its exact products and stores C back; C's L1 type `acc` decides when it is narrowed.
- C's L1 type `acc` (gemm_gen/facts/precision.py): by default the accumulator's own width (fp32, int32,
  or int64 for acc64 shapes), so C is carried exactly between calls and shifted, rounded and
  saturated into its DRAM type once, after the last call (`finish`): the result is the product as
  the user means it, rounded once. With acc = dtype_out (--acc out, mlir-aie's kernels) each call
  loads C << shift and narrows C with shift-round-saturate: a rounding, and for integers a
  saturation, after every k-step.
- bfp16ebs8 (gemm_gen/facts/precision.py): bfp16 operands arrive quantized on the host (the helper's
  truncation); a bf16 A multiplied by bfp16 B is converted in the core, blocks of 8 along K with
  the core's rounding mode (mlir-aie PR #3442; the exact on-chip conversion is unpublished). C is
  stored in its L1 type `acc` after every call (bfp16: blocks of 8 along N, core rounding), and
  converted to its DRAM type once after the last call when the two differ (`finish`).
The same `KernelNumerics.call` serves the kernel emulator (one m x n tile) and the reference
(the whole M x N matrix, one k-chunk at a time): only the blocking differs, never the arithmetic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from . import epilogue_args
from .bfp16 import BLOCK, CHUNK, NO_BITS, decode, encode, grid_lowest, lowest_bit, on_grid, quantize
from .dtypes import BFP16, F32, I64, DType, dtype
from .epilogue import Epilogue, Requant
from .rounding import Rounding, Saturation, round_f32_to_bf16, saturate, shift_round


@dataclass(frozen=True)
class KernelNumerics:
    """The arithmetic of one matmul kernel call and of the zero kernel."""

    dtype_in: DType
    dtype_out: DType
    rounding: Rounding = Rounding.CONV_EVEN
    saturation: Saturation = Saturation.SATURATE
    shift: int = 0
    # bf16 on the bfp16 datapath (AIE_API_EMULATE_BFLOAT16_MMUL_WITH_BFP16): the AIE API turns each
    # 8x8 A block into 8 row blocks and each 8x8 B block into 8 column blocks of bfp16ebs8, with the
    # core's rounding mode (mlir-aie PR #3442). K tiles start at multiples of 8, so the blocks are
    # 8 consecutive K values of a row of A / a column of B wherever the tile boundaries fall.
    bfp16_inputs: bool = False
    dtype_b: DType | None = None  # None: dtype_in
    acc: DType | None = None  # C's type in L1 between calls; None: dtype_out
    # float accumulation rounded to fp32 after every hardware mac (of mac_products exact products per
    # lane), macs in K order (one order the hardware may use; its own is unpublished) instead of the exact
    # sum rounded once: equal for the "exact" input family (gemm_gen.facts.inputs), and it shows what the
    # order can change for other inputs
    fp32_per_mac: bool = False
    mac_products: int = 1  # products one mac adds per lane before its rounding (fused_mac_products)
    acc_bits: int = 32  # integer accumulator lanes: acc32, or acc64 for some 16-bit shapes
    # the fused epilogue applied by the one conversion after the last call (gemm_gen/facts/epilogue.py); its data
    # (bias, requantization) are the call's, passed to `finish`
    epilogue: Epilogue = Epilogue()

    @property
    def accumulation(self) -> str:
        """Which fp32 accumulation model this follows (float inputs; integers are exact)."""
        if not self.dtype_in.is_float:
            return "integer: exact"
        if self.fp32_per_mac:
            return f"fp32 rounded after every mac of {self.mac_products} product(s) per lane, macs in K order"
        return "the exact sum rounded once to fp32 per kernel call"

    @classmethod
    def of(cls, dtype_in: str, dtype_out: str, **kw: object) -> KernelNumerics:
        for key in ("dtype_b", "acc"):
            if isinstance(kw.get(key), str):
                kw[key] = dtype(str(kw[key]))
        return cls(dtype(dtype_in), dtype(dtype_out), **kw)  # type: ignore[arg-type]

    @property
    def t_b(self) -> DType:
        return self.dtype_b or self.dtype_in

    @property
    def t_acc(self) -> DType:
        return self.acc or self.dtype_out

    @property
    def converts(self) -> bool:
        """C accumulates in another type than it is written in, and is converted once (`finish`)."""
        return self.t_acc != self.dtype_out

    def zero(self, shape: tuple[int, ...]) -> np.ndarray:
        return np.zeros(shape, dtype=self.t_acc.host)

    def operand_a(self, a: np.ndarray) -> np.ndarray:
        """A as the datapath multiplies it (fp64): bfp16 A as it arrived; bf16 A quantized to bfp16
        rows in the core when B is bfp16 or on the bf16-via-bfp16 datapath."""
        if self.quantizes_a:
            return self.to_bfp16(a, axis=1).astype(np.float64)
        return np.asarray(a, np.float64)

    def operand_b(self, b: np.ndarray) -> np.ndarray:
        """B as the datapath multiplies it (fp64): bfp16-quantized columns on the bfp16 datapath."""
        if self.quantizes_b:
            return self.to_bfp16(b, axis=0).astype(np.float64)
        return np.asarray(b, np.float64)

    @property
    def quantizes_a(self) -> bool:
        return self.dtype_in != BFP16 and (self.bfp16_inputs or self.t_b == BFP16)

    @property
    def quantizes_b(self) -> bool:
        return self.bfp16_inputs and self.t_b != BFP16

    def products(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Exact sum of products a @ b, as fp64 (exact for the inputs we feed: see module doc)."""
        return self.operand_a(a) @ self.operand_b(b)

    def to_bfp16(self, x: np.ndarray, axis: int) -> np.ndarray:
        """Quantize to bfp16ebs8 in blocks of 8 along `axis` (K), zero-padding a ragged last block."""
        return self.quantized(x, axis)[0]

    def quantized(self, x: np.ndarray, axis: int) -> tuple[np.ndarray, bool]:
        """to_bfp16(x, axis), and whether it left every value as it was."""
        x = np.asarray(x, dtype=np.float32)
        if on_grid(x, axis):  # every block already holds its quantized values (no rounding, no clamp)
            return x, True
        return self._rounded(x, axis), False

    def _rounded(self, x: np.ndarray, axis: int) -> np.ndarray:
        """to_bfp16 of float32 x, which is not on the grid."""
        n = x.shape[axis]
        pad = -n % BLOCK
        if pad:
            widths = [(0, 0)] * x.ndim
            widths[axis] = (0, pad)
            x = np.pad(x, widths)
        q = quantize(x, axis=axis, rounding=self.rounding)
        return np.take(q, np.arange(n), axis=axis) if pad else q

    def accumulate(self, c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The accumulator after one call: fp64 holding the exact fp32-path sum, or int64."""
        return self.accumulate_operands(c, self.operand_a(a), self.operand_b(b))

    def accumulate_operands(self, c: np.ndarray, a_op: np.ndarray, b_op: np.ndarray) -> np.ndarray:
        """accumulate() on operands already prepared by operand_a / operand_b."""
        if self.dtype_in.is_float and self.fp32_per_mac:
            acc = np.asarray(c, dtype=np.float32).astype(np.float64)
            for p0 in range(0, a_op.shape[1], self.mac_products):  # one mac: its products added in fp64, in K
                for p in range(p0, min(p0 + self.mac_products, a_op.shape[1])):  # order (as the host adds them)
                    acc = acc + a_op[:, p : p + 1] * b_op[p : p + 1, :]  # each product exact (16 significant bits)
                acc = acc.astype(np.float32).astype(np.float64)  # the mac's one fp32 rounding
            return acc
        if self.dtype_in.is_float:
            return a_op @ b_op + np.asarray(c, dtype=np.float64)
        up = 0 if self.converts else self.shift  # a wide C is carried unshifted, shifted down once
        return (np.asarray(c, dtype=np.int64) << up) + int_product(a_op, b_op)

    def store(self, acc: np.ndarray) -> np.ndarray:
        """Write the accumulator back to C's L1 type, as the kernel's to_vector does."""
        if self.dtype_in.is_float:
            acc32 = acc.astype(np.float32)  # the fp32 accumulator
            if self.t_acc == F32:
                return acc32
            if self.t_acc == BFP16:
                return _bfp16_values(*self.encode_acc(acc))
            return round_f32_to_bf16(acc32, self.rounding)
        if self.t_acc == I64:  # acc64 lanes stored whole (int32 pairs)
            return np.asarray(acc, dtype=np.int64)
        if self.converts:  # acc32 stored as int32, unshifted (a plain cast of its lanes)
            return saturate(acc, self.t_acc, self.saturation)
        return saturate(shift_round(acc, self.shift, self.rounding), self.dtype_out, self.saturation)

    def encode_acc(self, acc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A bfp16 C's blocks (exponents, mantissas) after a call: the fp32 accumulator quantized
        in blocks of 8 along N (the last axis) with the core's rounding mode."""

        return encode(np.asarray(acc).astype(np.float32), self.rounding)

    def finish(self, c: np.ndarray, bias: np.ndarray | None = None, requant: Requant | None = None,
               table: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """C in its DRAM type after the tile's last call: the L1 values, or their one conversion
        (shift-round-saturate of an integer accumulator, fp32 rounded to bf16 or to bfp16 blocks), or the
        epilogue (bias, activation, clamp; or requantization) over C's columns with the call's data (and the
        tanh table's slopes and offsets as the kernel read them, `table`)."""
        if not self.epilogue.is_identity:
            return epilogue_args.finish(self.epilogue, c, bias, requant, self.rounding, table)
        if not self.converts:
            return c
        if self.dtype_out == BFP16:
            return _bfp16_values(*self.encode_out(c))
        if self.dtype_out.is_float:
            return round_f32_to_bf16(np.asarray(c, dtype=np.float32), self.rounding)
        return saturate(shift_round(c, self.shift, self.rounding), self.dtype_out, self.saturation)

    def encode_out(self, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The final conversion of a bf16/f32 C accumulator to bfp16 (blocks of 8 along N)."""

        return encode(np.asarray(c).astype(np.float32), self.rounding)

    def call(self, c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """C <- kernel(C, A, B) for one call: accumulate A @ B into C and store C in its L1 type."""
        return self.store(self.accumulate(c, a, b))

    def acc_overflows(self, acc: np.ndarray) -> int:
        """How many accumulator values leave the accumulator's lanes (what acc32 does on overflow is
        unpublished: wrap or saturate; gemm_gen's inputs keep it from happening)."""
        if self.dtype_in.is_float:
            return 0
        lo, hi = -(1 << (self.acc_bits - 1)), (1 << (self.acc_bits - 1)) - 1
        return int(np.count_nonzero((acc < lo) | (acc > hi)))


def fused_mac_products(aie_target: str, dtype_in: str, mmul: tuple[int, int, int], bfp16_datapath: bool) -> int:
    """Products one hardware mac adds per accumulator lane before it rounds to fp32, for a float kernel: the
    bfp16 datapath's mac_8x8_8x8T (bfp16 operands, bf16 through AIE_API_EMULATE_BFLOAT16_MMUL_WITH_BFP16) adds 8;
    AIE2's bf16 mmul is one intrinsic per lane row, adding the mmul's K (aie_api detail/aie2/mmul_bf16_bf16.hpp
    @2b7eedf: mac_4x8_8x4 and kin); AIE2P's plain bf16 mmul is emulated with elementwise macs, one product each
    (detail/aie2p/mmul_bf16_bf16.hpp and emulated_mmul_intrinsics.hpp @2b7eedf: eight mac_elem_32 in K order).
    Integers: 0 (exact, no rounding). tests/aie_host's aie::mmul rounds likewise (host::mmul fused_k)."""
    if dtype_in not in ("bf16", "bfp16"):
        return 0
    if bfp16_datapath or dtype_in == "bfp16":
        return 8
    return mmul[1] if aie_target == "aie2" else 1


def reference(numerics: KernelNumerics, a: np.ndarray, b: np.ndarray, k: int, k_padded: int = 0,
              bias: np.ndarray | None = None, requant: Requant | None = None, given: Product | None = None
              ) -> np.ndarray:
    """Exact expected C: the kernel's arithmetic over the whole matrix, one k-chunk per call.

    `a` is M x K and `b` is K x N (logical, whatever B's storage), in their host types.
    Chunks start at multiples of k, as the kernel calls do; a final partial chunk stands for
    the zero-padded one (zero products change nothing). `k_padded` is the design's padded K: calls
    on padding add nothing but still store C, which is not idempotent for a bfp16 C (a block whose
    largest value rounded to mantissa -128 re-encodes one exponent higher), so they are made too.
    `bias` and `requant`: the epilogue's data over C's N columns (requant with ReLU already folded:
    epilogue_args.kernel_requant). `given`: an exact product of operands that may be these (chain).
    """
    c, acc, n_cols = _calls(numerics, a, b, k, k_padded, given)
    if numerics.dtype_out == BFP16:
        return _bfp16_values(*_encoded(numerics, c, acc))[:, :n_cols]
    return numerics.finish(c, bias, requant)[:, :n_cols]


def reference_bfp16(numerics: KernelNumerics, a: np.ndarray, b: np.ndarray, k: int, k_padded: int = 0
                    ) -> tuple[np.ndarray, np.ndarray]:
    """A bfp16 C as the kernel writes it: (exponents, mantissas) in blocks of 8 along N, over the
    columns padded to whole blocks (re-encoding reference()'s values is not the same: a block that
    holds -2^e moves to a higher exponent and drops bits of its other values)."""
    if numerics.dtype_out != BFP16:
        raise ValueError(f"reference_bfp16 is for a bfp16 C, not {numerics.dtype_out}")
    c, acc, _ = _calls(numerics, a, b, k, k_padded)
    return _encoded(numerics, c, acc)


def _calls(numerics: KernelNumerics, a: np.ndarray, b: np.ndarray, k: int, k_padded: int,
           given: Product | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """(C after the last call, the last call's accumulator, N) of the kernel calls over a and b."""
    n_cols = b.shape[1]
    exact = given.covers(a, b) if given is not None and given.serves(numerics) and collapses(numerics) else None
    if exact is not None:  # the calls are one exact product, and it has been made (Product.covers)
        if BFP16 in (numerics.t_acc, numerics.dtype_out) and n_cols % BFP16.block_elems:
            exact = np.pad(exact, ((0, 0), (0, -n_cols % BFP16.block_elems)))  # zero columns, as b's below
        return numerics.store(exact), exact, n_cols
    if k_padded > a.shape[1]:  # the design's extra calls on zero padding: they still requantize a bfp16 C
        a = np.pad(a, ((0, 0), (0, k_padded - a.shape[1])))
        b = np.pad(b, ((0, k_padded - b.shape[0]), (0, 0)))
    if BFP16 in (numerics.t_acc, numerics.dtype_out) and n_cols % BFP16.block_elems:
        # a bfp16 C has blocks of 8 along N: the padding columns (zero) share the last block
        b = np.pad(b, ((0, 0), (0, -n_cols % BFP16.block_elems)))
    c, acc, _, _ = chain(numerics, a, b, k)
    return c, acc, n_cols


def collapses(numerics: KernelNumerics) -> bool:
    """Whether the calls' stores can change nothing, so that exact arithmetic makes them one product (chain): C
    carried in fp32 between float calls, or in the accumulator's own integer type."""
    return numerics.t_acc == F32 if numerics.dtype_in.is_float else numerics.converts


@dataclass(frozen=True)
class Product:
    """Operands as the datapath multiplies them (float32 for floats, float64 for integers) over K's walk, and their
    exact product (float32, or int64), made once where one product stood for all the calls (chain): what the
    reference and the accuracy measure take instead of multiplying again (`covers`). Its operands hold no NaN (proven
    finite when it was made, or integers), which lets covers compare them by their bits first (_equal)."""

    a: np.ndarray
    b: np.ndarray
    exact: np.ndarray
    numerics: KernelNumerics  # whose quantization made a and b
    seen: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray | None]] = field(
        default_factory=dict, compare=False, repr=False)  # covers(), by its arguments (held: their ids stay theirs)

    def serves(self, numerics: KernelNumerics) -> bool:
        """These numerics make the same operands and accumulate them alike (the epilogue apart)."""
        return replace(self.numerics, epilogue=numerics.epilogue) == numerics

    def covers(self, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
        """The exact product of a (M x K) and b (K x N) as given, cut from this one, when it is that product and,
        under this product's numerics, what the datapath would make of them: a and b equal to this a's first rows
        and columns and this b's first rows and columns (so they are on the bfp16 grid wherever these are: the
        blocks of 8 along K start at 0 in both, and a block of a and b that ends at K holds these values and
        zeros, whose shared exponent is no larger), this b zero past K (this a finite there): else None."""
        key = (id(a), id(b))
        if key not in self.seen:
            self.seen[key] = (a, b, self._covers(a, b))
        return self.seen[key][2]

    def _covers(self, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
        rows, kk = np.shape(a)
        cols = np.shape(b)[1]
        if kk > self.a.shape[1] or rows > self.a.shape[0] or cols > self.b.shape[1] or np.shape(b)[0] != kk:
            return None
        if not (_equal(self.b[:kk, :cols], b) and _equal(self.a[:rows, :kk], a)):
            return None
        if self.b[kk:, :cols].any() or not np.isfinite(self.a[:rows, kk:]).all():
            return None
        return self.exact[:rows, :cols]


_UINTS = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _equal(mine: np.ndarray, given: np.ndarray) -> bool:
    """np.array_equal(mine, given) for a Product's operand (no NaN: its values were proven finite, or are integers):
    equal bits (an integer compare, cheaper than bf16's) where the types agree, else as numbers (-0 equals 0)."""
    if mine.shape == np.shape(given) and mine.dtype == np.asarray(given).dtype and mine.dtype.itemsize in _UINTS:
        u = _UINTS[mine.dtype.itemsize]
        if np.array_equal(mine.view(u), np.asarray(given).view(u)):
            return True
    return bool(np.array_equal(mine, given))


def chain(numerics: KernelNumerics, a: np.ndarray, b: np.ndarray, k: int, overflows: bool = False
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, Product | None]:
    """The kernel calls over whole matrices, one K chunk of k at a time in K order, as `call` does to a tile: (C
    after the last call, the last call's accumulator, with `overflows` the calls per element whose accumulator
    left its lanes (None where none can), and the Product where one stood for all the calls). When C is carried
    exactly between calls (`collapses`) and every partial sum of the products is exact in the arithmetic that forms
    it (`fp32_exact`; integers: inside the accumulator's lanes), each call's store changes nothing, and the calls are
    one product over all of K: the same bits, at BLAS speed (float32 for floats, whose values are float32
    numbers)."""
    if collapses(numerics) and numerics.dtype_in.is_float and (k % BLOCK == 0 or not numerics.quantizes_a):
        product = _float_product(numerics, a, b)
        if product is not None:
            return product.exact, product.exact, None, product  # fp32 C stores as it is
    a_op, b_op, a_same, b_same = _operands(numerics, a, b, k)
    if collapses(numerics) and not numerics.dtype_in.is_float:
        if _int_bound(a_op, b_op) <= min(numerics.t_acc.max, (1 << (numerics.acc_bits - 1)) - 1):
            exact = int_product(a_op, b_op)  # the Product keeps the values as given where they are the operands
            return numerics.store(exact), exact, None, Product(a if a_same else a_op, b if b_same else b_op, exact,
                                                               numerics)
    c = numerics.zero((a_op.shape[0], b_op.shape[1]))
    acc = c
    over = np.zeros(c.shape, np.int32) if overflows and not numerics.dtype_in.is_float else None
    lo, hi = -(1 << (numerics.acc_bits - 1)), (1 << (numerics.acc_bits - 1)) - 1
    for k0 in range(0, a_op.shape[1], k):
        acc = numerics.accumulate_operands(c, np.asarray(a_op[:, k0:k0 + k], np.float64),
                                           np.asarray(b_op[k0:k0 + k], np.float64))
        if over is not None:
            over += (acc < lo) | (acc > hi)
        c = numerics.store(acc)
    return c, acc, over, None


def _float_product(numerics: KernelNumerics, a: np.ndarray, b: np.ndarray) -> Product | None:
    """The float calls' one exact product (chain), A's rows a piece at a time (its float32 operand is never whole:
    less memory), each piece quantized as its tiles are (blocks of 8 along K: rows apart, k a multiple of 8);
    None where it is not exact (fp32_exact, over the whole of A)."""
    b_op, b_same, qb = _operand(numerics, b, 0, numerics.quantizes_b)
    if qb is None:
        return None
    rows = max(1, 4 * CHUNK // max(1, np.shape(a)[1]))
    exact = np.empty((np.shape(a)[0], b_op.shape[1]), np.float32)
    qa, sums, a_same, parts = NO_BITS, 0.0, True, []
    for r0 in range(0, np.shape(a)[0], rows):
        piece, same, low = _operand(numerics, a[r0:r0 + rows], 1, numerics.quantizes_a)
        if low is None:
            return None
        qa, a_same = min(qa, low), a_same and same
        sums = max(sums, float(np.abs(piece).sum(axis=1, dtype=np.float64).max(initial=0.0)))
        exact[r0:r0 + rows] = piece @ b_op
        parts.append(piece if not same else None)
    if not _exact_steps(qa, qb, sums * float(np.abs(b_op).max(initial=0.0)) if b_op.size else 0.0):
        return None
    a_op = a if a_same else np.concatenate([p if p is not None else np.asarray(a[i * rows:(i + 1) * rows], np.float32)
                                            for i, p in enumerate(parts)])
    return Product(a_op, b if b_same else b_op, exact, numerics)


def _operand(numerics: KernelNumerics, x: np.ndarray, axis: int, quantizes: bool
             ) -> tuple[np.ndarray, bool, int | None]:
    """x as the datapath multiplies it (float32; quantized along `axis` where `quantizes`), whether it holds x's
    values, and its _lowest_bits: on the bfp16 grid, from the grid test's own pass over the bits (grid_lowest)."""
    x32 = np.asarray(x, np.float32)
    if not quantizes:
        return x32, True, _lowest_bits(x32)
    low = grid_lowest(x32, axis)
    if low is not None:  # quantized() leaves it as it is
        return x32, True, low
    q = numerics._rounded(x32, axis)
    return q, False, _lowest_bits(q)


def _operands(numerics: KernelNumerics, a: np.ndarray, b: np.ndarray, k: int
              ) -> tuple[np.ndarray, np.ndarray, bool, bool]:
    """A and B as the datapath multiplies them, each K chunk of k quantized as one call quantizes its tile
    (float32 for floats, float64 for integers), and whether each holds its values unchanged. With k a multiple of
    bfp16's block the chunks' blocks are the whole matrix's, which is quantized at once."""
    if not numerics.dtype_in.is_float:
        return np.asarray(a, np.float64), np.asarray(b, np.float64), True, True
    whole = k % BLOCK == 0

    def chunked(x: np.ndarray, axis: int) -> tuple[np.ndarray, bool]:
        if whole:
            return numerics.quantized(x, axis)
        parts = [numerics.quantized(np.take(x, range(k0, min(k0 + k, x.shape[axis])), axis=axis), axis)
                 for k0 in range(0, x.shape[axis], k)]
        if not parts:
            return np.asarray(x, np.float32), True
        return np.concatenate([p for p, _ in parts], axis=axis), all(same for _, same in parts)

    a_op, a_same = chunked(a, 1) if numerics.quantizes_a else (np.asarray(a, np.float32), True)
    b_op, b_same = chunked(b, 0) if numerics.quantizes_b else (np.asarray(b, np.float32), True)
    return a_op, b_op, a_same, b_same


FP32_DIGITS = 24  # float32's significand: integers up to 2^24 are exact


def _lowest_bits(x: np.ndarray) -> int | None:
    """The exponent of the lowest set bit over the nonzero values of x (as float32 numbers): every value is a
    multiple of 2^that; None when x holds a value that is not a finite float32 number."""
    x32 = np.asarray(x, np.float32)
    if not np.isfinite(x32).all() or (x32.dtype != np.asarray(x).dtype and not np.array_equal(x32, x)):
        return None
    flat = np.ascontiguousarray(x32).view(np.uint32).reshape(-1)
    low = min((lowest_bit(flat[i:i + CHUNK]) for i in range(0, flat.size, CHUNK)), default=NO_BITS)
    return low


def _int_bound(a: np.ndarray, b: np.ndarray) -> float:
    """A bound on every partial sum of products of a row of a and a column of b: max_i sum_k |a_ik| max |b|."""
    if a.size == 0 or b.size == 0:
        return 0.0
    rows = max(1, CHUNK // max(1, a.shape[1]))  # pieces of rows: the absolute values stay in cache
    row_sums = max(float(np.abs(a[i:i + rows]).sum(axis=1, dtype=np.float64).max()) for i in range(0, len(a), rows))
    cols = max(1, CHUNK // max(1, b.shape[0]))
    return row_sums * max(float(np.abs(b[:, j:j + cols]).max()) for j in range(0, b.shape[1], cols))


def fp32_exact(a: np.ndarray, b: np.ndarray) -> bool:
    """Every partial sum of products a_ik b_kj, in any order and grouping, is a float32 number, so that a float32
    product (BLAS, fused or not) is the exact product: all values finite float32 numbers, the products multiples of
    2^(qa + qb) (each operand's lowest set bit) no finer than float32's smallest step, and every partial sum at most
    2^24 of those steps and below 2^127 (max_i sum_k |a_ik| max |b| bounds them). The exact input family
    (gemm_gen.facts.inputs) is built so."""
    qa, qb = _lowest_bits(a), _lowest_bits(b)
    if qa is None or qb is None:
        return False
    return _exact_steps(qa, qb, _int_bound(a, b))


def _exact_steps(qa: int, qb: int, bound: float) -> bool:
    """fp32_exact's test on its parts: each operand's lowest set bit and the bound on the partial sums."""
    if qa >= NO_BITS or qb >= NO_BITS:  # an operand of zeros: every product is 0
        return True
    if qa + qb < -149:
        return False
    bound *= 1 + 1e-9  # the float64 row sums' own rounding, covered
    return bound <= min(math.ldexp(1.0, FP32_DIGITS + qa + qb), math.ldexp(1.0, 127))


def _encoded(numerics: KernelNumerics, c: np.ndarray, acc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A bfp16 C's codes: the last call's requantization, or the final conversion of its accumulator."""
    return numerics.encode_acc(acc) if numerics.t_acc == BFP16 else numerics.encode_out(c)


def int_product(a_op: np.ndarray, b_op: np.ndarray) -> np.ndarray:
    """The exact integer product a @ b (int64): fp64 when no sum can leave its 53-bit significand,
    else int64 arithmetic (fp64 BLAS rounds 16-bit products summed over a long K)."""
    bound = float(np.abs(a_op).max(initial=0)) * float(np.abs(b_op).max(initial=0)) * a_op.shape[1]
    if bound < 2.0**FP32_DIGITS:  # every partial sum an integer below 2^24: exact in float32 too
        return (np.asarray(a_op, np.float32) @ np.asarray(b_op, np.float32)).astype(np.int64)
    if bound < 2.0**53:
        return (a_op @ b_op).astype(np.int64)
    return np.asarray(a_op, dtype=np.int64) @ np.asarray(b_op, dtype=np.int64)


def _bfp16_values(exps: np.ndarray, mants: np.ndarray) -> np.ndarray:

    return decode(exps, mants)
