"""Linear: a language model's int4 linear layer, y = act(x @ W + bias), serving any number of rows M.

    from gemm_gen.llm import load_gguf
    from gemm_gen.app.linear import Linear

    w = load_gguf("model.gguf")["blk.0.ffn_up.weight"]
    up = Linear(w, device="npu2")
    y = up.simulate(x)            # any machine: the functional simulator; x (M x K) or (..., K)
    y = up(x)                     # an NPU through XRT (Gemm.__call__)
    up.last_call.lines()          # which design served it, its PREDICTED time, every host copy and why

The weights are held once (the loader's QuantB, shared by every design). The runtimes that call NPU GEMMs
route by M: ggml-xdna sends M = 1 to a GEMV, 2-63 to a small GEMM and M >= 64 to prefill (issue 35), and
FastFlowLM keeps a few xclbins per model. A Linear keeps three designs, each built once when the Linear is
made and serving every M up to its own (one xclbin, an instruction stream per M: Gemm's max_size):

- "decode": the decode mapping (one core row, B read once: docs/int4_decode.md section 7) for M <= 16,
  spec/rules/array.DECODE_M_MAX, the bound up to which the search weighs that mapping;
- "decode-split": the split decode placement (every core a slice of N, B over every shim channel but A's:
  docs/int4_decode.md section 13) for M <= 16, the other placement the search weighs for decode calls (left out
  when the columns are given, as it fixes them);
- "small": the whole array for M <= 64 (SMALL_M_MAX, ggml-xdna's prefill threshold), its tiles chosen for 64 rows;
- "prefill": the whole array for M <= max_tokens (a longer call runs in chunks of max_tokens rows).

A call of M rows runs on whichever design serving M the model predicts fastest (`route`: gemm_gen.model's
estimate of that design's call, as `gemm-gen predict` prices it; ties go to the design built for fewer rows).
The thresholds are therefore the model's, per layer shape and device, not fixed numbers: `route(M)` shows each
design's predicted time, and docs/llm_weights.md lists the thresholds they give at Llama-3.2-1B's sizes.

The datapath: on npu2 a Linear runs plain bf16 (emulate_bf16_with_bfp16=False) unless asked otherwise, as it holds
the 1% a layer is held to (0.25-0.35% per layer on the formats' files: DATAPATH_LOSS); npu2's bfp16 datapath, the
Gemm's default for bf16, quantizes x and the dequantized weights to bfp16 blocks of 8 along K and measures
0.72-1.08% per layer, past 1% at its worst: a speed option (`emulate_bf16_with_bfp16=True`, PREDICTED 2.4x faster
decode and 4.7x faster prefill at Llama-3.2-1B's MLP, docs/llm_weights.md section 4), said on every call
(`last_call.datapath`) with its measured loss. `loss_budget(x)` splits a call's error into its steps (x's rounding
to bf16, the scales', the weights' and x's in the datapath, C's), each measured by gemm_gen.facts.accuracy.measure.

Inputs: NumPy arrays, anything with `__dlpack__` (a CPU torch tensor: np.from_dlpack, no copy; a bf16 tensor
through an int16 view of it, as NumPy has no bf16 DLPack type) or `__array__`. What the Linear copies, and
why, is in `last_call.copies` (x's conversion to bf16, a reshape that cannot be a view, chunks) next to the
operator's own (`last_call.gemm_copies`). bias and activation run on the host after C (the operator's fused
epilogue does not take int4 weights yet): act(C + bias) in float64, rounded once to C's type.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from ..design.serve import serve
from ..facts.accuracy import Accuracy, measure, percent
from ..facts.dtypes import BF16
from ..facts.epilogue import REFERENCE, Activation
from ..facts.errors import ConfigError
from ..facts.numerics import reference
from ..facts.quant_b import QuantB
from ..llm.weights import LoadedWeights
from ..model.params import load, load_ends
from ..model.perf import estimate_config
from ..spec.request import Problem
from ..spec.rules import array
from ..spec.rules.decode_split import SPLIT_MAPPING
from ..spec.rules.dequant import to_bfp16
from .operands import bf16_rne
from .operator import Gemm
from .operator_args import checked_device

SMALL_M_MAX = 64  # ggml-xdna's first prefill M (issue 35): the small whole-array design serves up to it
# what a Linear applies on the host after x @ W (+ bias): every float activation's float64 reference (facts/epilogue.py)
ACTIVATIONS = {act.value: ref for act, ref in REFERENCE.items() if act is not Activation.NONE}
# Gemm arguments a Linear sets itself: the weights' type and groups, each design's size, mapping and layouts, and
# the epilogue (bias and activation run on the host)
LINEAR_FIXES = frozenset({"dtype_in", "dtype_b", "group_size", "zero_points", "max_size", "rows", "tiles",
                          "a_col_maj", "b_col_maj", "c_col_maj", "bias", "activation", "clamp", "requant"})
OUT_TYPES: dict[str, np.dtype[Any]] = {"bf16": np.dtype(BF16.host), "f32": np.dtype(np.float32)}
# A layer's Frobenius error against float64 x @ W (W by the format's own rule) on each bf16 datapath, the least and
# the most measured on the formats' files (GGUF Q4_0, AWQ, GPTQ, MatMulNBits; four seeds; K = 1024, N = 256, N(0, 1)
# bf16 x, M = 1 and 64; npu1 and npu2): scripts/llm_accuracy.py prints them, tests/llm/test_llm_formats.py (slow)
# re-measures them, docs/llm_weights.md section 4 splits them into their steps. Plain bf16 holds the 1% per
# layer with room; the bfp16 datapath (x's blocks about 0.66%, the weights' about 0.55%) does not: an option.
DATAPATH_LOSS = {False: (0.00249, 0.00345), True: (0.00722, 0.01079)}  # bfp16 datapath? -> (least, most)
LAYER_BOUND = 0.01  # issue 35: each layer within 1% (Frobenius) of float64 x @ dequant(W) by the format's rule


@dataclass(frozen=True)
class Tier:
    """One of a Linear's designs: its name, the largest M it serves and its mapping."""

    name: str
    max_m: int
    mapping: str


def tiers(max_tokens: int, split: bool = True) -> tuple[Tier, ...]:
    """The designs of a Linear serving up to `max_tokens` rows per call (each bound kept below max_tokens); `split`:
    with the split decode placement beside the decode mapping."""
    decode = (Tier("decode", array.DECODE_M_MAX, "decode"),
              *((Tier(SPLIT_MAPPING, array.DECODE_M_MAX, SPLIT_MAPPING),) if split else ()))
    bounds = (*decode, Tier("small", SMALL_M_MAX, "whole-array"))
    return (*(t for t in bounds if t.max_m < max_tokens), Tier("prefill", max_tokens, "whole-array"))


def grid(dev: Any, mapping: str) -> dict[str, Any]:
    """The Gemm keywords of a mapping: its rows, and the columns the split decode placement fixes."""
    cols = array.mapping_cols(dev, mapping)
    return {"rows": array.mapping_rows(dev, mapping), **({"cols": cols} if cols else {})}


@dataclass(frozen=True)
class Route:
    """How a call of M rows runs: the tier chosen and every serving tier's PREDICTED time (us)."""

    M: int
    tier: str
    predicted_us: dict[str, float]

    def text(self) -> str:
        times = ", ".join(f"{name} {t:,.1f} us" for name, t in self.predicted_us.items())
        return f"M = {self.M}: {self.tier} (PREDICTED {times})"


@dataclass(frozen=True)
class LinearCall:
    """What one call did: M, the design (tier, mapping) of each chunk, the PREDICTED time, the host copies
    of x (`copies`, each with its reason), the operator's own copy lines, the host steps after C, the datapath
    with what it loses (LinearPlan.datapath), and C's accuracy against float64 act(x @ W + bias) with W by the
    format's own rule (when asked)."""

    M: int
    tiers: tuple[str, ...]
    predicted_us: float
    copies: tuple[str, ...]
    gemm_copies: tuple[str, ...]
    host_steps: tuple[str, ...]
    datapath: str
    accuracy: Accuracy | None = None

    def lines(self) -> list[str]:
        out = [f"M = {self.M}: {' + '.join(self.tiers)} design{'s' if len(self.tiers) > 1 else ''}, PREDICTED "
               f"{self.predicted_us:,.1f} us", f"datapath: {self.datapath}",
               *(f"x: {c}" for c in self.copies or ("no copy",)), *self.gemm_copies, *self.host_steps]
        if self.accuracy is not None:
            out.append(f"vs float64 act(x @ W + bias), W by the format's rule: {self.accuracy.text()}")
        return out


@dataclass(frozen=True)
class LossBudget:
    """A call's error split into its steps (Linear.loss_budget): each step's Accuracy against the exact product of
    the operands before it, and the total against float64 x @ W (W by the format's rule). The steps' errors are
    nearly independent, so their root sum of squares is close to the total's."""

    steps: tuple[tuple[str, Accuracy], ...]
    total: Accuracy

    def step(self, name: str) -> Accuracy:
        return dict(self.steps)[name]

    def root_sum_of_squares(self) -> float:
        return float(np.sqrt(sum(acc.frobenius_rel ** 2 for _, acc in self.steps)))

    def text(self) -> str:
        parts = ", ".join(f"{name} {percent(acc.frobenius_rel)}" for name, acc in self.steps)
        return (f"Frobenius {percent(self.total.frobenius_rel)} against float64 x @ W: {parts} (root sum of squares "
                f"{percent(self.root_sum_of_squares())})")


class LinearPlan:
    """The designs a Linear runs for a K x N int4 weight (no weights needed: `predict` at any size is cheap)."""

    def __init__(self, device: str, K: int, N: int, group_size: int, zero_points: bool, *, max_tokens: int = 2048,
                 dtype_out: str = "bf16", **options: Any) -> None:
        self.device = checked_device(device).name
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise ConfigError(f"max_tokens={max_tokens!r}: the most rows one call runs is an integer >= 1",
                              "pass e.g. max_tokens=2048 (longer calls run in chunks of it)")
        if dtype_out not in OUT_TYPES:
            raise ConfigError(f"dtype_out={dtype_out!r}: a W4A16 Linear writes bf16 or f32",
                              "pass dtype_out='bf16' or 'f32'")
        fixed = sorted(set(options) & LINEAR_FIXES)
        if fixed:
            raise ConfigError(f"{', '.join(fixed)}: set by the Linear (its weights and its designs), not an option",
                              f"drop {', '.join(fixed)}")
        self.K, self.N, self.max_tokens, self.dtype_out = K, N, max_tokens, dtype_out
        self.group_size, self.zero_points = group_size, zero_points
        dev = checked_device(device)
        self.tiers = tiers(max_tokens, split="cols" not in options and dev.core_rows > 1)
        self.has_bfp16 = dev.bfp16_mmul_shape is not None  # npu2: both bf16 datapaths; npu1: plain bf16 only
        if self.has_bfp16 and options.get("emulate_bf16_with_bfp16") is None:
            options["emulate_bf16_with_bfp16"] = False  # plain bf16 holds 1% per layer (DATAPATH_LOSS); bfp16: asked
        self.gemms = {t.name: Gemm(device, "bf16", dtype_out, dtype_b="i4", group_size=group_size,
                                   zero_points=zero_points, max_size=(t.max_m, K, N),
                                   a_col_maj=False, c_col_maj=False, **grid(dev, t.mapping), **options)
                      for t in self.tiers}
        self._routes: dict[int, Route] = {}

    @property
    def bfp16(self) -> bool:
        """Whether the designs run npu2's bfp16 datapath (x and the weights in bfp16 blocks of 8 along K)."""
        return bool(self.design(self.tiers[0].name).config.numerics.bfp16_inputs)

    def datapath(self) -> str:
        """The datapath in one line, with what a layer loses on it (DATAPATH_LOSS) and, on npu2, the other one."""
        def span(bfp16: bool) -> str:
            least, most = DATAPATH_LOSS[bfp16]
            return f"{least:.2%} to {most:.2%}"

        where = "Frobenius per layer measured on the formats' files (docs/llm_weights.md section 4)"
        if self.bfp16:
            return (f"bfp16 blocks of 8 along K for x and the dequantized weights (emulate_bf16_with_bfp16=True, the "
                    f"speed option), {span(True)} {where}: not within {LAYER_BOUND:.0%} at its worst; plain bf16, the "
                    f"default, {span(False)}")
        other = (f"; emulate_bf16_with_bfp16=True runs the faster bfp16 datapath at {span(True)}" if self.has_bfp16
                 else "")
        return (f"plain bf16 (the dequantized weights rounded once to bf16, C one rounding of fp32 sums), "
                f"{span(False)} {where}, within {LAYER_BOUND:.0%}{other}")

    def design(self, tier: str) -> Any:
        """The tier's design (built when the plan was made; the Gemm keeps it)."""
        t = next(t for t in self.tiers if t.name == tier)
        return self.gemms[tier].design(t.max_m, self.K, self.N)

    def predicted_us(self, tier: str, M: int, params: Any = None) -> float:
        """The model's time for an M-row call on the tier's design (PREDICTED, us): the closed form at the call's
        size, as search/tune_many ranked the tiers with it (a built Design holds its own call's facts only)."""
        return float(estimate_config(self.design(tier).config, params or load(),
                                     call=Problem(M, self.K, self.N)).time) * 1e6

    def predicted_range_us(self, tier: str, M: int) -> tuple[float, float]:
        """(slow, fast) ends of the prediction over the model constants' spreads (model.params.load_ends)."""
        slow, fast = load_ends()
        return self.predicted_us(tier, M, slow), self.predicted_us(tier, M, fast)

    def route(self, M: int) -> Route:
        """The tier an M-row call (1 <= M <= max_tokens) runs on: the fastest predicted of those serving M."""
        if M not in self._routes:
            serving = [t.name for t in self.tiers if t.max_m >= M]
            times = {name: self.predicted_us(name, M) for name in serving}
            self._routes[M] = Route(M, min(serving, key=lambda n: times[n]), times)  # ties: the first, smaller
        return self._routes[M]

    def chunks(self, M: int) -> list[tuple[int, int]]:
        """The row ranges a call of M rows runs as: one, or chunks of max_tokens rows."""
        return [(i, min(M, i + self.max_tokens)) for i in range(0, M, self.max_tokens)]


class Linear:
    """y = act(x @ W + bias) for int4 weights W (see the module docstring).

    `weights`: LoadedWeights (gemm_gen.llm's loaders; their bias is used when `bias` is None) or a QuantB;
    `bias`: N values or None; `activation`: None, 'relu', 'silu' or 'gelu'; `device`: 'npu1' or 'npu2';
    `max_tokens`: the most rows one call runs (longer calls run in chunks); `dtype_out`: 'bf16' or 'f32';
    further options go to every design's Gemm. The datapath: plain bf16 unless `emulate_bf16_with_bfp16=True`
    (npu2: the faster bfp16 datapath, whose loss per layer reaches past 1%: LinearPlan.datapath, DATAPATH_LOSS).
    `plan`: the designs of another Linear of the same shape (`other.plan`), shared instead of built again, as a
    runtime keeps one set of xclbins for every layer of a shape (device, max_tokens, dtype_out and options are then
    the plan's)."""

    def __init__(self, weights: LoadedWeights | QuantB, bias: Any = None, activation: str | None = None,
                 device: str = "npu2", *, max_tokens: int = 2048, dtype_out: str = "bf16",
                 plan: LinearPlan | None = None, **options: Any) -> None:
        if isinstance(weights, LoadedWeights):
            self.loaded: LoadedWeights | None = weights
            quant = weights.quant
            bias = weights.bias if bias is None else bias
        elif isinstance(weights, QuantB):
            self.loaded, quant = None, weights
        else:
            raise ConfigError(f"weights of type {type(weights).__name__}: a Linear takes LoadedWeights "
                              "(gemm_gen.llm's loaders) or a QuantB", "load them with gemm_gen.llm")
        self.quant = quant
        K, N = quant.shape
        if activation is not None and activation not in ACTIVATIONS:
            *others, last = map(repr, ACTIVATIONS)
            raise ConfigError(f"activation={activation!r}: a Linear applies none, {', '.join(others)} or {last}",
                              "pass one of those")
        self.activation = activation
        self.bias = None if bias is None else np.asarray(bias, np.float64).reshape(-1)
        if self.bias is not None and self.bias.size != N:
            raise ConfigError(f"bias has {self.bias.size} values for N = {N} outputs", f"pass {N} values")
        zp = quant.zero_points is not None
        if plan is None:
            plan = LinearPlan(device, K, N, quant.group_size, zp, max_tokens=max_tokens, dtype_out=dtype_out,
                              **options)
        elif (plan.K, plan.N, plan.group_size, plan.zero_points) != (K, N, quant.group_size, zp):
            raise ConfigError(f"plan= is for {plan.K} x {plan.N} weights, group {plan.group_size}, "
                              f"{'with' if plan.zero_points else 'no'} zero points; these are {K} x {N}, group "
                              f"{quant.group_size}, {'with' if zp else 'no'} zero points",
                              "share a plan only between layers of one shape and quantization")
        self.plan = plan
        self.last_call: LinearCall | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return self.quant.shape

    def route(self, M: int) -> Route:
        return self.plan.route(M)

    # ---- calls ---------------------------------------------------------------------------------
    def simulate(self, x: Any, *, report: bool = False) -> np.ndarray:
        """y from the functional simulator (each chunk checked on the way as Gemm.simulate checks it); with
        report=True, last_call.accuracy holds y against float64 act(x @ W + bias), W the format's weights."""
        return self._run(x, report, lambda g, a: g.simulate(a, self.quant.q, scales=self.quant.scales,
                                                            zero_points=self.quant.zero_points))

    def __call__(self, x: Any, *, report: bool = False, check: bool = True, timeout_ms: int | None = None
                 ) -> np.ndarray:
        """y from the NPU through XRT (Gemm.__call__: needs mlir-aie, Peano, XRT and an NPU)."""
        return self._run(x, report, lambda g, a: g(a, self.quant.q, scales=self.quant.scales,
                                                   zero_points=self.quant.zero_points, check=check,
                                                   timeout_ms=timeout_ms))

    def reference(self, x: Any) -> np.ndarray:
        """Our own reference of what simulate returns, bit for bit: each chunk's kernel numerics on the same
        design (numerics.reference over the dequantized weights, as the simulator's check computes it),
        then the same host steps."""
        a, lead, _, _ = self._activations(x)
        return self._host_steps(self._kernel_c(a)).reshape(*lead, self.shape[1])

    def loss_budget(self, x: Any) -> LossBudget:
        """Where the error of C = x @ W (before bias and activation) against float64 x @ W, W by the format's rule,
        comes from: each step measured by accuracy.measure against the exact product of the operands it was given
        (C by our reference, which simulate equals bit for bit)."""
        a, _, _, given = self._activations(x)
        c = self._kernel_c(a)
        numerics = self.plan.design(self.plan.tiers[0].name).config.numerics  # one datapath for every tier
        w_format = self.loaded.exact() if self.loaded is not None else self.quant.exact()
        w_ours, b_path = self.quant.exact(), self._datapath_b(self.plan.tiers[0].name)
        a_path = numerics.operand_a(a)
        a64 = a.astype(np.float64)
        steps = [("x rounded to bf16", measure(a64 @ w_format, given, w_format, numerics))] \
            if given.dtype != BF16.host else []
        steps += [("scales rounded to bf16", measure(a64 @ w_ours, a, w_format, numerics)),
                  (f"weights {'in bfp16 blocks' if self.plan.bfp16 else 'rounded to bf16'}",
                   measure(a64 @ b_path, a, w_ours, numerics))]
        if numerics.quantizes_a:
            steps.append(("x in bfp16 blocks", measure(a_path @ b_path, a, b_path, numerics)))
        steps.append((f"C (fp32 sums, rounded to {self.plan.dtype_out})", measure(c, a_path, b_path, numerics)))
        return LossBudget(tuple(steps), measure(c, given, w_format, numerics))

    def _datapath_b(self, tier: str) -> np.ndarray:
        """The weights as the tier's datapath multiplies them (float64): the kernel's dequantization (bf16, or
        fp32 values for the convert-once bfp16 pass) through numerics.operand_b (bfp16 blocks on that datapath)."""
        c = self.plan.design(tier).config
        return c.numerics.operand_b(self.quant.dequant(to_bfp16(c.groups.group_size, c.kernel.convert_once)))

    def _kernel_c(self, a: np.ndarray) -> np.ndarray:
        """C of the chunks' kernel numerics (our reference), before the host steps."""
        parts = []
        for lo, hi in self.plan.chunks(a.shape[0]):
            tier = self.plan.route(hi - lo).tier
            c = self.plan.design(tier).config
            call = serve(c, Problem(hi - lo, *self.shape))
            b = self.quant.dequant(to_bfp16(c.groups.group_size, c.kernel.convert_once))
            parts.append(reference(c.numerics, a[lo:hi], b, c.tiling.k, call.k_walk))
        return np.concatenate(parts) if parts else np.zeros((0, self.shape[1]), OUT_TYPES[self.plan.dtype_out])

    def _run(self, x: Any, report: bool, run: Any) -> np.ndarray:
        a, lead, copies, given = self._activations(x)
        M = a.shape[0]
        parts, names, gemm_copies, predicted = [], [], [], 0.0
        for lo, hi in self.plan.chunks(M):
            route = self.plan.route(hi - lo)
            g = self.plan.gemms[route.tier]
            parts.append(np.asarray(run(g, a[lo:hi])))
            names.append(route.tier)
            predicted += route.predicted_us[route.tier]
            if g.last_call is not None:
                gemm_copies += [line for line in g.last_call.copy_lines() if not line.endswith(": 0 copies")]
        if len(parts) > 1:
            copies.append(f"{len(parts)} chunks of at most {self.plan.max_tokens} rows (max_tokens), their C "
                          "rows joined on the host")
        c = np.concatenate(parts) if parts else np.zeros((0, self.shape[1]), OUT_TYPES[self.plan.dtype_out])
        y = self._host_steps(c)
        steps = []
        if self.bias is not None or self.activation is not None:
            what = " and ".join(w for w in ("bias" if self.bias is not None else "", self.activation or "") if w)
            steps.append(f"{what} applied on the host to C in float64, rounded once to {self.plan.dtype_out} (the "
                         "operator's fused epilogue does not take int4 weights yet)")
        acc = self._accuracy(y, given) if report else None
        self.last_call = LinearCall(M, tuple(names), predicted, tuple(copies), tuple(dict.fromkeys(gemm_copies)),
                                    tuple(steps), self.plan.datapath(), acc)
        return y.reshape(*lead, self.shape[1])

    # ---- the activations as they come --------------------------------------------------------------
    def _activations(self, x: Any) -> tuple[np.ndarray, tuple[int, ...], list[str], np.ndarray]:
        """(A: M x K bf16, x's leading shape, the host copies made with their reasons, x's values as given)."""
        K = self.shape[0]
        copies: list[str] = []
        a = as_numpy(x, copies)
        if a.ndim == 0 or a.shape[-1] != K:
            raise ConfigError(f"x has shape {a.shape}: its last axis must be K = {K}", f"pass (..., {K}) activations")
        lead = a.shape[:-1]
        flat = a.reshape(-1, K)
        if flat.size and not np.shares_memory(flat, a):
            copies.append(f"x of shape {a.shape} and strides {a.strides} cannot be viewed as M x K rows: reshaped "
                          "into a copy")
        given = flat
        if flat.dtype != BF16.host:
            if flat.dtype.kind != "f":
                raise ConfigError(f"x is {flat.dtype}: activations are real numbers (bf16, or float16/32/64 "
                                  "rounded to bf16)", "pass a float array")
            bf = bf16_rne(flat) if flat.dtype == np.float64 else flat.astype(BF16.host)  # one RNE rounding
            changed = int(np.count_nonzero(bf.astype(np.float64) != flat.astype(np.float64)))
            copies.append(f"x is {flat.dtype}, rounded to bf16 (RNE) into a copy: {changed:,} of {flat.size:,} values "
                          "changed (a loss, in the report)")
            flat = bf
        return flat, lead, copies, given

    def _host_steps(self, c: np.ndarray) -> np.ndarray:
        """act(C + bias) in float64, rounded once to C's type (C itself where there is neither)."""
        if self.bias is None and self.activation is None:
            return c
        y = c.astype(np.float64)
        if self.bias is not None:
            y = y + self.bias
        if self.activation is not None:
            y = ACTIVATIONS[self.activation](y)
        return bf16_rne(y) if self.plan.dtype_out == "bf16" else y.astype(np.float32)

    def _accuracy(self, y: np.ndarray, given: np.ndarray) -> Accuracy:
        """y against float64 act(x @ W + bias): x as given, W by the format's own rule (LoadedWeights.exact;
        the QuantB's exact weights when the Linear was given one)."""
        w = self.loaded.exact() if self.loaded is not None else self.quant.exact()
        target = given.astype(np.float64) @ w
        if self.bias is not None:
            target = target + self.bias
        if self.activation is not None:
            target = ACTIVATIONS[self.activation](target)
        got = y.astype(np.float64)
        rounded = bf16_rne(target).astype(np.float64) if self.plan.dtype_out == "bf16" else \
            target.astype(np.float32).astype(np.float64)
        diff = np.abs(got - target)
        ref = float(np.linalg.norm(target)) or 1.0
        scale = float(np.abs(target).max(initial=0.0)) or 1.0
        finite = np.isfinite(got)
        return Accuracy(int(got.size), int(np.count_nonzero(got == rounded)), float(diff.max(initial=0.0)),
                        float(diff.max(initial=0.0)) / scale, float(np.linalg.norm(got - target)) / ref, 0,
                        int(np.count_nonzero(~finite)))


def as_numpy(x: Any, copies: list[str]) -> np.ndarray:
    """x as a NumPy array without a copy where it can be: an ndarray as it is; `__dlpack__` through
    np.from_dlpack (a bf16 torch tensor through an int16 view, which NumPy's DLPack import takes); else
    `__array__` / np.asarray, said to copy where NumPy made its own array."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "__dlpack__"):
        try:
            return np.from_dlpack(x)
        except (TypeError, BufferError, RuntimeError, ValueError) as e:
            viewed = _bf16_view(x)
            if viewed is not None:
                return viewed
            if not hasattr(x, "__array__"):
                raise ConfigError(f"x ({type(x).__name__}) cannot be read through DLPack: {e}",
                                  "pass a CPU tensor (x.detach().cpu()) or a NumPy array") from None
            copies.append(f"x ({type(x).__name__}) refused DLPack ({e}); read through __array__")
    try:
        a = np.asarray(x)
    except Exception as e:  # noqa: BLE001 - any library's refusal becomes one line
        raise ConfigError(f"x ({type(x).__name__}) cannot be read as an array: {e}",
                          "pass a CPU tensor without gradient (x.detach().cpu()) or a NumPy array") from None
    if not hasattr(x, "__array_interface__") and not hasattr(x, "__dlpack__"):
        copies.append(f"x is a {type(x).__name__}, made into a NumPy array (a copy unless it hands out its own "
                      "memory through __array__)")
    return a


def _bf16_view(x: Any) -> np.ndarray | None:
    """A bf16 DLPack tensor (torch's) as ml_dtypes.bfloat16 without a copy: NumPy has no bf16 DLPack type, so
    the tensor's own int16 view goes through DLPack and NumPy views its bits. Only for a library already
    imported by the caller (sys.modules), never importing one."""
    lib = sys.modules.get(type(x).__module__.split(".")[0])
    bf16, i16 = getattr(lib, "bfloat16", None), getattr(lib, "int16", None)
    if lib is None or bf16 is None or i16 is None or getattr(x, "dtype", None) != bf16:
        return None
    try:
        return np.from_dlpack(x.view(i16)).view(ml_dtypes.bfloat16)
    except (TypeError, BufferError, RuntimeError, ValueError):
        return None


def summary(call: LinearCall) -> str:
    """One line of a call: its designs, its PREDICTED time and, when measured, its Frobenius error."""
    err = "" if call.accuracy is None else f", Frobenius {percent(call.accuracy.frobenius_rel)}"
    return f"M = {call.M}: {'+'.join(call.tiers)}, PREDICTED {call.predicted_us:,.1f} us{err}"


__all__ = ["DATAPATH_LOSS", "LAYER_BOUND", "Linear", "LinearCall", "LinearPlan", "LossBudget", "Route", "Tier",
           "as_numpy", "summary", "tiers"]
