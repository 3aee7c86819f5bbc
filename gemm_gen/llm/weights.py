"""A format's int4 weights as our W4A16 weights (QuantB), without changing a weight's value.

Every format here stores unsigned 4-bit codes u in [0, 15] with a zero point zu (given, or a fixed 8) and
one scale s per group of K rows and column, meaning w = (u - zu) s. QuantB holds signed q, z in [-8, 7]:
q = u - 8 and z = zu - 8 leave q - z = u - zu, so (q - z) s is the format's weight whatever the scale.
Only the scale's type changes: the kernel takes bf16 scales (groupquant), and a format's fp16 (or fp32)
scale that is not a bf16 value is rounded once, to nearest even. That is a loss, never silent: ScaleLoss
measures it per layer against the format's own dequantization (`LoadedWeights.exact`: float64 (u - zu) s
with the format's scale as stored).

Group sizes: our kernels take a scale per 32, 64 or 128 rows of K (groupquant.GROUP_SIZES). A format group
that is a multiple of one of them (256, or one scale per column over all of K) is held exactly by repeating
each scale row (and zero-point row) over the groups it spans; any other group size is refused in one line.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from ..facts.accuracy import percent
from ..facts.dtypes import BF16
from ..facts.errors import ConfigError, ToolchainMissing
from ..facts.groupquant import GROUP_SIZES, groups_along_k, scales_out_of_range
from ..facts.quant_b import QuantB

OFFSET = 8  # an unsigned nibble u is q = u - 8 in QuantB's [-8, 7]; a zero point zu likewise
LLM_EXTRA = "pip install -e '.[llm]' (gguf, safetensors, onnx)"


def need(module: str, what: str) -> ModuleType:
    """A format's own package, imported when a loader first needs it (never by `import gemm_gen`)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ToolchainMissing(f"{what} needs the Python package '{module}', which is not installed",
                               LLM_EXTRA) from None


def refuse(source: str, name: str, what: str, fix: str) -> ConfigError:
    """One line naming the format, the tensor, the limit and the fix."""
    return ConfigError(f"{source} '{name}': {what}", fix)


def fields(words: np.ndarray, order: Sequence[int]) -> np.ndarray:
    """The eight 4-bit fields of 32-bit words along the last axis, placed as `order` says: field i (bits
    4i..4i+3) of word j is value 8 j + order[i] of the row (AutoAWQ's `order_map` convention; the identity
    for GPTQ's and ONNX's sequential packing). uint8 values in [0, 15], the last axis 8 times longer."""
    w = np.asarray(words).astype(np.uint32)  # int32 words with the top nibble >= 8 are negative: same bits
    f = ((w[..., None] >> (4 * np.arange(8, dtype=np.uint32))) & 0xF).astype(np.uint8)
    out = np.empty_like(f)
    out[..., list(order)] = f
    return out.reshape(*w.shape[:-1], w.shape[-1] * 8)


def nibbles_low_first(b: np.ndarray) -> np.ndarray:
    """Bytes' two 4-bit fields along the last axis, the low nibble first (ONNX MatMulNBits' B and zero
    points): uint8 values in [0, 15], the last axis twice as long."""
    b = np.asarray(b).astype(np.uint8)
    return np.stack([b & 0xF, b >> 4], axis=-1).reshape(*b.shape[:-1], -1)


def our_group(format_group: int, K: int) -> int | None:
    """The largest group size our kernels take whose groups each lie inside one of the format's (None: none
    does): a divisor of the format's group, or any when one format group spans all of K."""
    for g in sorted(GROUP_SIZES, reverse=True):
        if format_group % g == 0 or format_group >= K:
            return g
    return None


@dataclass(frozen=True)
class ScaleLoss:
    """What holding a layer's scales in bf16 costs, against the format's own scales and weights."""

    scales: int
    scales_changed: int  # scales that are not bf16 values (rounded once, to nearest even)
    max_rel: float  # max |bf16(s) - s| / |s| over the nonzero scales
    weights: int
    weights_changed: int  # weights (q - z) s whose value the rounding moves
    frobenius_rel: float  # ||W_ours - W_format|| / ||W_format||

    @property
    def exact(self) -> bool:
        return self.scales_changed == 0

    def text(self) -> str:
        if self.exact:
            return f"scales: all {self.scales:,} are bf16 values, every weight as the format means it"
        return (f"scales: {self.scales_changed:,} of {self.scales:,} are not bf16 values and are rounded to the "
                f"nearest (max rel {self.max_rel:.3g}); {self.weights_changed:,} of {self.weights:,} weights move, "
                f"Frobenius {percent(self.frobenius_rel)} of the format's own dequantization")


@dataclass(frozen=True, eq=False)
class LoadedWeights:
    """One layer's weights from a format: `quant` is what the W4A16 operator runs (K x N, q and z in
    [-8, 7], bf16 scales, our group size); `format_scales` (float64, one row per format group) and
    `format_group` are the format's own, for its dequantization (`exact`). `bias`: the layer's bias where
    the file has one (float32, N values). `notes`: what the mapping did (regrouping, zero points dropped)."""

    name: str
    source: str
    quant: QuantB
    format_scales: np.ndarray
    format_group: int
    bias: np.ndarray | None = None
    notes: tuple[str, ...] = ()

    @property
    def shape(self) -> tuple[int, int]:
        return self.quant.shape

    def exact(self) -> np.ndarray:
        """float64 (u - zu) s with the format's scales as stored: the weights the format means (ggml's,
        ONNX Runtime's fp32 dequantization give the same values; AutoAWQ's and AutoGPTQ's torch paths round
        them to fp16)."""
        q = self.quant
        d = q.q.astype(np.float64)
        rows = np.arange(q.shape[0])
        if q.zero_points is not None:
            d = d - q.zero_points.astype(np.float64)[rows // q.group_size]
        return d * self.format_scales[rows // self.format_group]

    def scale_loss(self) -> ScaleLoss:
        """The bf16 scales against the format's (ScaleLoss)."""
        theirs = self.format_scales
        rounded = theirs.astype(np.float32).astype(BF16.host).astype(np.float64)  # as from_unsigned rounds them
        nonzero = theirs != 0
        rel = np.abs(rounded - theirs)[nonzero] / np.abs(theirs[nonzero])
        w_fmt, w_ours = self.exact(), self.quant.exact()
        ref = float(np.linalg.norm(w_fmt)) or 1.0
        return ScaleLoss(int(theirs.size), int(np.count_nonzero(rounded != theirs)), float(rel.max(initial=0.0)),
                         int(w_fmt.size), int(np.count_nonzero(w_ours != w_fmt)),
                         float(np.linalg.norm(w_ours - w_fmt)) / ref)

    def text(self) -> str:
        """One line for people: the layer, its format, its mapping and its scales' loss."""
        K, N = self.shape
        q = self.quant
        zp = "zero points" if q.zero_points is not None else "no zero points"
        notes = "".join(f"; {n}" for n in self.notes)
        return (f"{self.name}: {self.source}, {K} x {N} (K x N), W4A16 group {q.group_size}, {zp}{notes}; "
                f"{self.scale_loss().text()}")

    def w4a8(self) -> tuple[np.ndarray, np.ndarray]:
        """(q, column scales) for the int8 x int4 operator (Gemm(dtype_in='i8', dtype_b='i4'), C in int32, the
        scales applied to C's columns afterwards): only where that is the same product, with no zero points
        and one scale per column over all of K. W4A8 has no group scales (a scale that changes along K cannot
        be taken out of the int32 sum), so grouped weights are refused in one line."""
        q = self.quant
        if q.zero_points is not None:
            raise refuse(self.source, self.name, "W4A8 (i8 x i4) has no zero points: (q - z) spans [-15, 15], "
                         "past int4", "run it as W4A16: Gemm(dtype_in='bf16', dtype_b='i4', zero_points=True)")
        if not (self.format_scales == self.format_scales[:1]).all():
            raise refuse(self.source, self.name, f"its scales change every {self.format_group} rows of K, and "
                         "W4A8 (i8 x i4 -> i32) has no group scales to apply inside the K sum",
                         f"run it as W4A16: Gemm(dtype_in='bf16', dtype_b='i4', group_size={q.group_size})")
        return q.q, self.format_scales[0].copy()


def from_unsigned(name: str, source: str, u: np.ndarray, scales: np.ndarray, format_group: int,
                  zu: np.ndarray | None = None, bias: np.ndarray | None = None,
                  notes: tuple[str, ...] = ()) -> LoadedWeights:
    """LoadedWeights of unsigned codes `u` (K x N, [0, 15]), the format's `scales` (fp16, fp32 or bf16, one row
    per group of `format_group` rows of K: ceil(K / g) x N) and zero points `zu` (same shape, [0, 15]; None: the
    format's fixed 8, so z = 0). Zero points that are all 8 are dropped (z = 0 everywhere: the same weights).
    Refused in one line: a group size our kernels cannot hold, scales of the wrong shape, scales that are
    not finite or that no bf16 the core can use is near (groupquant: normal, |s| <= about 2.378e36)."""
    u = np.asarray(u)
    K, N = u.shape
    g = our_group(format_group, K)
    if g is None:
        raise refuse(source, name, f"group size {format_group}: our W4A16 kernels take one scale per 32, 64 or "
                     f"128 rows of K (groupquant.GROUP_SIZES), and no groups of those sizes lie inside groups of "
                     f"{format_group}", "requantize the model with group size 32, 64 or 128")
    rows = groups_along_k(K, format_group)
    s = np.asarray(scales)
    if s.shape != (rows, N):
        raise refuse(source, name, f"scales are {s.shape}, for {rows} groups of {format_group} rows and {N} "
                     f"columns", f"give ({rows}, {N}) scales")
    if zu is not None and np.shape(zu) != (rows, N):
        raise refuse(source, name, f"zero points are {np.shape(zu)}, for {rows} x {N} scales",
                     f"give ({rows}, {N}) zero points")
    s64 = s.astype(np.float64)
    if not np.isfinite(s64).all():
        bad = int(np.count_nonzero(~np.isfinite(s64)))
        raise refuse(source, name, f"{bad:,} of {s.size:,} scales are not finite", "fix the checkpoint's scales")
    if s.dtype not in (np.float16, np.float32, BF16.host):
        raise refuse(source, name, f"scales of type {s.dtype}: the formats store fp16, fp32 or bf16 scales",
                     "give the scales as stored")
    mapped = (np.arange(groups_along_k(K, g)) * g) // format_group  # the format group of each of ours
    ours = s.astype(np.float32).astype(BF16.host)[mapped]  # one rounding (fp16 and fp32 to bf16: RNE)
    small, large = scales_out_of_range(ours)
    if small.any() or large.any():
        bad = ours[small | large].astype(np.float64)
        raise refuse(source, name, f"{int(bad.size):,} scales (first {bad[0]:.4g}) are outside what the core's "
                     f"fp32 datapath takes (0, or 2^-126 to about 2.378e36 in magnitude)",
                     "rescale the layer (fold a power of two into its output) or keep it in bf16")
    q = (u.astype(np.int16) - OFFSET).astype(np.int8)
    z = None if zu is None else (np.asarray(zu).astype(np.int16) - OFFSET).astype(np.int8)[mapped]
    said = list(notes)
    if len(mapped) != rows:
        said.append(f"format group {format_group} held as groups of {g} (each scale repeated, exact)")
    if z is not None and not z.any():
        z = None
        said.append("zero points all 8 (symmetric): dropped, q - z unchanged")
    b = None if bias is None else np.asarray(bias, np.float32).reshape(-1)
    if b is not None and b.size != N:
        raise refuse(source, name, f"bias has {b.size} values for {N} output columns", f"give {N} values")
    return LoadedWeights(name, source, QuantB(q, ours, z, g), s64, format_group, b, tuple(said))
