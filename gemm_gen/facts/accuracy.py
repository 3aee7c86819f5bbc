"""C against the exact product of the inputs it was computed from: what every loss cost.

The bit-exact reference (numerics.reference) says whether the array did what the kernels are
meant to do; this says how far that is from what the user means by A @ B. The exact product is
int64 for integer inputs and float64 for float ones (each bf16 or bfp16 product is exact there; a
sum of them rounds at 2^-53, far below any loss reported here). An integer C is measured against
A @ B / 2^shift, so that the shift's rounding and any saturation show; a float C against A @ B.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .dtypes import DType, widen
from .epilogue import Epilogue, Requant, float_epilogue_ref
from .numerics import KernelNumerics, Product, fp32_exact, int_product
from .rounding import Saturation, shift_round

# what an integer output past its type's range became, per saturation mode (accuracy text)
NARROWED = {Saturation.SATURATE: "saturated (A @ B outside the output type, clamped)",
            Saturation.SYMMETRIC: "saturated (A @ B outside the output type, clamped to +-max)",
            Saturation.NONE: "overflowed (A @ B outside the output type, wrapped: saturation none)"}


@dataclass(frozen=True)
class Accuracy:
    """C against the exact product P (integer outputs: P / 2^shift), over the outputs where P is
    finite."""

    elements: int
    # outputs equal to P rounded once into C's type (bfp16: rounded to fp32); never one whose P lies outside C's
    # type (an integer clamped or wrapped, a float that became Inf): those are not A @ B, and are counted below
    exact: int
    max_abs: float  # max |C - P|
    max_rel: float  # max |C - P| / max |P|
    frobenius_rel: float  # ||C - P|| / ||P|| (Frobenius norms)
    saturated: int  # integer outputs whose P lies outside C's type: clamped to its range (wrapped under none)
    nonfinite: int  # outputs that are NaN or Inf where P is finite (an overflow), or that differ where it is not
    saturation: str = "saturate"  # the kernel's saturation mode: what became of the `saturated` outputs

    @property
    def lossless(self) -> bool:
        return self.exact == self.elements

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    def text(self) -> str:
        """One line for people: the three errors, then what was clamped or not finite."""
        parts = [f"max abs {self.max_abs:.4g}, max rel {self.max_rel:.3g} (of max |A @ B|), "
                 f"Frobenius {percent(self.frobenius_rel)}; {self.exact:,} of {self.elements:,} equal to A @ B "
                 f"rounded once"]
        if self.saturated:
            parts.append(f"{self.saturated:,} {NARROWED[Saturation[self.saturation.upper()]]}")
        if self.nonfinite:
            parts.append(f"{self.nonfinite:,} not finite where A @ B is (or the other way)")
        return "; ".join(parts)


def percent(x: float) -> str:
    """A relative error as a percentage, tiny ones in scientific notation (never a bare 0.000%)."""
    return f"{x:.3%}" if x == 0 or x >= 1e-5 else f"{100 * x:.1e}%"


def exact_product(a: np.ndarray, b: np.ndarray, integer: bool) -> np.ndarray:
    """A @ B: int64 for integer inputs (exact), float64 for float ones."""
    if integer:
        return int_product(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    a_f, b_f = float_operands(a, b)
    with np.errstate(invalid="ignore", over="ignore"):  # Inf and NaN inputs give Inf and NaN, as IEEE says
        return np.asarray(a_f @ b_f, dtype=np.float64)


def float_operands(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Float A and B for their exact product: float32 where every partial sum is a float32 number (then the float32
    product is the exact one, numerics.fp32_exact), else float64 (exact as far as float64 is, as before)."""
    a32, b32 = np.asarray(a, np.float32), np.asarray(b, np.float32)
    if fp32_exact(a32, b32):
        return a32, b32
    return np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)


# What real data loses on two paths beyond the one rounding of C, measured here on standard normal bf16 inputs with
# the tuner's designs (scripts/accuracy_table.py prints them, tests/facts/test_accuracy.py re-measures them).
# `simulate`'s
# report and Gemm's docstring state them where a user meets the path: the seeded inputs a simulation draws by
# default are exact in bfp16 and sit where the activations are accurate, so its own figures do not show them.
ONE_BF16_ROUNDING = 0.0017  # relative Frobenius error of plain bf16 (npu1; npu2 without the bfp16 datapath)
BFP16_DATAPATH = 0.0094  # npu2's default bf16: A and B quantized to bfp16 blocks of 8 along K (16 x 4096 x 256)
# mlir-aie's tanh-form SiLU and GELU in bf16 (docs/epilogues.md section 1): largest elementwise relative error where
# |target| >= 2^-6, in the negative tail where 1 + tanh(x / 2) cancels (64 x 192 x 96 with a N(0, 1) bias); their
# normwise error stays that of the path (ONE_BF16_ROUNDING, or BFP16_DATAPATH's)
ACTIVATION_TAIL = {"silu": 0.37, "gelu": 0.16}

BLOCK_ELEMENTS = 1 << 18  # C is measured a block of rows at a time: its temporaries stay a few MiB


def measure(c: np.ndarray, a: np.ndarray, b: np.ndarray, numerics: KernelNumerics,
            given: Product | None = None) -> Accuracy:
    """C (M x N, its values) against the exact product of A (M x K) and B (K x N). `given`: an exact product
    already made of operands that may give the same products (numerics.Product.covers)."""
    exact = given.covers(a, b) if given is not None else None
    if exact is not None:  # each block's product cut from it
        a64, b64 = exact, None
    elif numerics.dtype_out.is_float:  # converted once
        a64, b64 = float_operands(a, b)
    else:
        a64, b64 = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    rows = max(1, BLOCK_ELEMENTS // max(1, c.shape[1]))
    parts = [_block(c[i:i + rows], a64[i:i + rows], b64, numerics) for i in range(0, c.shape[0], rows)]
    total = np.sum([p[:4] for p in parts], axis=0) if parts else np.zeros(4)
    max_abs = max((p[4] for p in parts), default=0.0)
    scale = max((p[5] for p in parts), default=0.0) or 1.0
    diff_sq, ref_sq = total[2], total[3] or 1.0
    return Accuracy(int(c.size), int(total[0]), float(max_abs), float(max_abs) / scale,
                    float(np.sqrt(diff_sq / ref_sq)), int(total[1]), int(sum(p[6] for p in parts)),
                    numerics.saturation.name.lower())


def _block(c: np.ndarray, a: np.ndarray, b: np.ndarray | None, numerics: KernelNumerics) -> tuple[float, ...]:
    """(exact, saturated, sum of squared errors, sum of squared targets, max abs error, max |target|,
    not finite) of a block of C's rows (a and b: float_operands for a float C, else float64; b None: a is the
    block's exact product)."""
    got = widen(c)
    out = numerics.dtype_out
    if out.is_float:
        with np.errstate(invalid="ignore", over="ignore"):  # Inf and NaN inputs give Inf and NaN, as IEEE says
            product = a @ b if b is not None else a  # a and b: float_operands
            target = np.asarray(product, dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):  # P past C's range rounds to Inf, as C's would
            # P in C's type (bfp16: its fp32 values); a float32 P rounds to it alike (it is exact there)
            rounded = widen((product if product.dtype == np.float32 else target).astype(out.host))
        overflowed = np.isfinite(target) & ~np.isfinite(rounded)  # P past C's range: Inf is not A @ B
        exact, saturated = int(np.count_nonzero(_same(got, rounded) & ~overflowed)), 0
    else:
        p = int_product(a, b) if b is not None else np.asarray(a, np.int64)
        q = shift_round(p, numerics.shift, numerics.rounding)  # the exactly rounded result, unclamped
        lo, hi = kept_range(out, numerics.saturation)
        inside = (q >= lo) & (q <= hi)
        saturated = int(np.count_nonzero(~inside))  # clamped or wrapped by the mode: not A @ B, never exact
        exact = int(np.count_nonzero((got == q) & inside))
        target = p / 2.0**numerics.shift
    finite, got_finite = np.isfinite(target), np.isfinite(got)
    if finite.all() and got_finite.all():  # the usual case: no masks, no copies (the same values in the same order)
        nonfinite = 0
        diff, ref = np.abs(got - target), np.abs(target)
    else:
        both = finite & got_finite
        nonfinite = int(np.count_nonzero(finite & ~got_finite) + np.count_nonzero(~finite & ~_same(got, target)))
        diff = np.abs(got[both] - target[both])
        ref = np.abs(target[both])
    diff, ref = diff.reshape(-1), ref.reshape(-1)
    return (exact, saturated, _squares(diff), _squares(ref), float(diff.max(initial=0.0)),
            float(ref.max(initial=0.0)), nonfinite)


def bound_losses(c: np.ndarray, a: np.ndarray, b: np.ndarray, numerics: KernelNumerics) -> tuple[int, int]:
    """(saturated, not finite) of a C computed with the default accumulator, without the whole
    product: only outputs at the output type's bounds can have saturated, and only outputs that are
    not finite can have overflowed, so only theirs are computed (a dot product each). Under saturation
    none an overflowed integer wraps to any value, so every output is computed."""
    got = np.asarray(c)
    out = numerics.dtype_out
    if out.is_float:
        rows, cols = np.nonzero(~np.isfinite(got.astype(np.float64)))
    elif numerics.saturation == Saturation.NONE:
        rows, cols = np.nonzero(np.ones(got.shape, dtype=bool))
    else:
        rows, cols = np.nonzero((got == out.min) | (got == out.max) | (got == -out.max))
    if rows.size == 0:
        return 0, 0
    a64, b64 = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    step = max(1, BLOCK_ELEMENTS // max(1, a64.shape[1]))
    saturated = nonfinite = 0
    for i in range(0, rows.size, step):
        r, k = rows[i:i + step], cols[i:i + step]
        with np.errstate(invalid="ignore", over="ignore"):
            p = np.einsum("nk,kn->n", a64[r], b64[:, k])  # exact below 2^53 (integers: |a b| K < 2^53)
        if out.is_float:
            nonfinite += int(np.count_nonzero(np.isfinite(p)))
        else:
            q = shift_round(p.astype(np.int64), numerics.shift, numerics.rounding)
            lo, hi = kept_range(out, numerics.saturation)
            saturated += int(np.count_nonzero((q < lo) | (q > hi)))
    return saturated, nonfinite


def kept_range(out: DType, saturation: Saturation) -> tuple[int, int]:
    """The integers an output of type `out` keeps as they are under `saturation` (symmetric: +-max, so the
    type's minimum is clamped too; rounding.saturate)."""
    return (-out.max if saturation == Saturation.SYMMETRIC else out.min), out.max


def acc32_overflow_bound(a: np.ndarray, b: np.ndarray, acc_bits: int) -> float | None:
    """K max|A| max|B| when it reaches past acc32's lanes (an integer sum could overflow them, and
    what acc32 then does is unpublished), else None."""
    a, b = np.asarray(a), np.asarray(b)
    if acc_bits != 32 or a.dtype.kind not in "iu":
        return None
    # in int64: np.abs of an int8 -128 is -128
    bound = float(np.abs(a.astype(np.int64)).max(initial=0)) * float(np.abs(b.astype(np.int64)).max(initial=0))
    bound *= a.shape[1]
    return bound if bound >= 2.0**31 else None


def _squares(x: np.ndarray) -> float:
    """The sum of squares, by NumPy's pairwise summation: deterministic, and unlike a BLAS dot (which may split it
    over threads) quick on a busy machine."""
    return float(np.sum(x * x))


def _same(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Elementwise equal, NaN equal to NaN."""
    return (x == y) | (np.isnan(x) & np.isnan(y))


# ---- the fused epilogue (docs/epilogues.md section 5) --------------------------------------------------------
TAIL_FLOOR = 2.0**-6  # elementwise relative errors are stated where |target| >= this (the tanh tail's scale)


@dataclass(frozen=True)
class EpilogueAccuracy:
    """C against float64 act(A @ B + bias) (clamped; requantized C: against the exact real requantization,
    (A @ B + bias) M 2^(shift - 31) rounded once, + zero point, clamped), and for requantized C how many
    outputs differ from TFLite's integer arithmetic (Requant.apply on the exact int32 A @ B)."""

    elements: int
    max_abs: float  # max |C - target|
    max_rel: float  # max |C - target| / |target| over |target| >= TAIL_FLOOR (the elementwise tail)
    frobenius_rel: float  # ||C - target|| / ||target|| (normwise)
    tflite_mismatches: int | None = None  # requantized C: outputs != Requant.apply; None for float C
    nonfinite: int = 0  # outputs not finite where the target is

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    def text(self) -> str:
        line = (f"normwise (Frobenius) {percent(self.frobenius_rel)}, max abs {self.max_abs:.4g}, elementwise max rel "
                f"{self.max_rel:.3g} where |target| >= 2^-6")
        if self.tflite_mismatches is not None:
            line += f"; {self.tflite_mismatches:,} of {self.elements:,} differ from TFLite's integer requantization"
        if self.nonfinite:
            line += f"; {self.nonfinite:,} not finite where the target is"
        return line


def measure_epilogue(c: np.ndarray, a: np.ndarray, b: np.ndarray, epilogue: Epilogue,
                     bias: np.ndarray | None = None, requant: Requant | None = None) -> EpilogueAccuracy:
    """C (M x N) after epilogue `epilogue` against its float64 target from A (M x K) and B (K x N) exactly;
    `requant` with ReLU folded into act_min (epilogue_args.kernel_requant), as the kernel applies it."""
    got = np.asarray(c, dtype=np.float64)
    tflite = None
    if epilogue.requant is not None:
        assert requant is not None
        acc = int_product(np.asarray(a, np.float64), np.asarray(b, np.float64))
        target = np.asarray(requant.apply_real(acc, bias), dtype=np.float64)
        tflite = int(np.count_nonzero(got != requant.apply(acc, bias)))
    else:
        acc64 = exact_product(a, b, integer=False)
        target = float_epilogue_ref(acc64, bias, epilogue.activation, epilogue.clamp)
    finite = np.isfinite(target)
    both = finite & np.isfinite(got)
    diff = np.abs(got - target)[both]
    ref = np.abs(target[both])
    tail = ref >= TAIL_FLOOR
    return EpilogueAccuracy(
        int(got.size), float(diff.max(initial=0.0)),
        float((diff[tail] / ref[tail]).max(initial=0.0)),
        float(np.sqrt(_squares(diff) / (_squares(ref) or 1.0))), tflite,
        int(np.count_nonzero(finite & ~np.isfinite(got))))
