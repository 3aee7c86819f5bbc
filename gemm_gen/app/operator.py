"""Gemm: a GEMM operator on your own NumPy / ml_dtypes arrays, on an NPU or in the simulator.

    g = Gemm(device="npu1", dtype_in="i8", dtype_out="i32")
    C = g.simulate(A, B)      # any machine: the functional simulator, checked data movement
    C = g(A, B)               # an NPU: builds (or finds in the cache) the xclbin, runs it through XRT

Without `max_size` every new shape gets its own design (tuned for it, kept for the next call of
that shape). With `max_size=(M, K, N)` one design serves every shape up to it (the cores read their
k-steps from a runtime parameter): one xclbin, an instruction stream per shape. Sizes that are
not multiples of the design's blocks run on the array without host copies wherever the DMAs allow
(gemm_gen/spec/call.py). The numerics options are the CLI's (rounding, saturation, shift, ...).

The arrays are read as they lie in memory (gemm_gen/app/operator_layouts.py): `X.T` or a
Fortran-ordered array through the column-major A / B designs (each layout is its own xclbin),
rows padded to a regular stride through a leading dimension, and `order="F"` returns C
column-major (through column-major C where a design writes it, else a host transpose). What the host
still copies is counted per operand with its reason (`g.last_call.copy_lines()`, `g.plan(A, B)`).
On an NPU every operand is also written into its XRT buffer object; the count is of the host's
rearrangements before that.

Nothing passes silently: `Gemm(...)` checks its arguments and builds its first design when it is
made (gemm_gen/app/operator_args.py), and every call checks A and B (gemm_gen/app/operands.py); each
refusal is one ConfigError line in the operator's own terms.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Any

import numpy as np

from .. import search
from ..backends.npu_call import run_on_npu
from ..backends.runner import checked_timeout
from ..design import Design, build_design
from ..design.host_buffers import output_values, pad_inputs
from ..design.serve import check_dma_limits, serve
from ..facts.accuracy import (
    NARROWED,
    Accuracy,
    EpilogueAccuracy,
    acc32_overflow_bound,
    bound_losses,
    measure,
    measure_epilogue,
)
from ..facts.dtypes import unpack_i4
from ..facts.epilogue_args import EpilogueArgs, kernel_requant
from ..facts.errors import ConfigError, DmaLimitError, GemmGenError, NumericsWarning
from ..facts.quant_b import QuantB
from ..sim.memory import check_memory
from ..sim.run import ArraySession
from ..sim.words import VALUE_MASK
from ..spec.call import CallPlan, HostCopy, plan_call
from ..spec.checks import check_queue
from ..spec.config import GemmConfig, default_tiles
from ..spec.request import Pins, Problem, Request
from ..spec.rules.epilogue import call_activation
from .cliargs import config_args
from .limits import slow_end_s
from .operands import as_matrix, bfp16_quantizer, group_operands, host_operand
from .operator_args import (
    check_flag,
    check_operator_types,
    check_options,
    checked_device,
    checked_max_size,
    checked_tiles,
    design_refusal,
    in_operator_terms,
    refuse,
)
from .operator_epilogue import epilogue_args
from .operator_layouts import ORDERS, OTHER, arrangement, in_allocation, layout_word

CONVERTED = "converted to the input type on the host"  # a copy of its own, before any other
Layout = tuple[bool, bool, bool]  # a_col_maj, b_col_maj, c_col_maj of a design
DESIGN_ERRORS = (ConfigError, DmaLimitError)  # what building or serving a design refuses (not a run's failure)


class Gemm:
    """C = A @ B for one device and set of types (see the module docstring).

    Built with: `device` 'npu1' or 'npu2' (or an alias such as 'strix'); `dtype_in` 'bf16', 'i8',
    'i16' or (npu2) 'bfp16', with `dtype_out` one the device writes for it (bf16: bf16, f32; i8:
    i8, i16, i32; i16: i16, i32; bfp16: bf16, f32, bfp16) and, on npu2, `dtype_b='bfp16'` and `acc`
    for the mixed bfp16 precisions; `dtype_b='i4'` with dtype_in 'i8' for int4 weights (both devices:
    B's values in [-8, 7], or packed bytes with `packed=True`, see simulate); `tiles=(m, k, n, k_mt)`,
    four integers >= 1, or None for the tuner; `max_size=(M, K, N)`, three integers >= 1, or None for
    a design per shape; and
    GemmConfig's other fields as options (rounding, saturation, shift, emulate_bf16_with_bfp16, ...),
    each of its field's type. Anything else is refused when the Gemm is made, in one ConfigError
    line naming the argument as given and what to pass instead; so are tiles and options that no
    design can take (the first design, for max_size, for the smallest size the tiles need, or for
    1 x 1 x 1, is built then).

    `a_col_maj`, `b_col_maj` and `c_col_maj` (options) are None by default: open, chosen per call
    from how A and B lie in memory and from the `order` asked for C; True or False fixes the layout
    (an array that lies the other way is then copied once, and the plan says so).
    The fused epilogue (docs/epilogues.md): `bias=True` (every call passes `bias=`) or `"auto"` (a call
    that passes one runs a design that adds it), `activation` ('relu', 'silu', 'gelu'), `clamp=(lo, hi)`
    (bf16 C) and `requant='per_channel'` (i8 / i16 C; every call passes `scale=(multiplier, shift)`).

    What C loses against A @ B (measured here on standard normal bf16 data, scripts/accuracy_table.py; a call's own
    loss with report=True): plain bf16 (npu1, or npu2 with emulate_bf16_with_bfp16=False) about 0.17% relative
    (Frobenius), the one rounding of C; npu2's default bf16 about 0.94%, as its bfp16 datapath quantizes A and B to
    blocks of 8 along K (elementwise, an output near zero can be off by more than its own size); integer outputs
    are clip(A @ B) exactly. activation='silu' and 'gelu' (mlir-aie's tanh form in bf16) add little normwise but err
    by up to 37% (SiLU) and 16% (GELU) elementwise where |target| >= 2^-6, in the negative tail where 1 + tanh(.)
    cancels (docs/epilogues.md section 1).
    """

    def __init__(self, device: str = "npu2", dtype_in: str = "bf16", dtype_out: str | None = None, *,
                 dtype_b: str | None = None, acc: str | None = None, b_col_maj: bool | None = None,
                 max_size: tuple[int, int, int] | None = None, tiles: tuple[int, int, int, int] | None = None,
                 **options: Any) -> None:
        given = {"dtype_out": dtype_out, "dtype_b": dtype_b, "acc": acc, "max_size": max_size, "tiles": tiles}
        # how the user made this Gemm, for messages: device and dtype_in always, the rest when given
        self._args = {"device": device, "dtype_in": dtype_in, **{k: v for k, v in given.items() if v is not None},
                      **({"b_col_maj": b_col_maj} if b_col_maj is not None else {}), **options}
        dev = checked_device(device)
        out = check_operator_types(dev, dtype_in, dtype_out, dtype_b, acc)
        # the layouts the user fixed (None: open, chosen per call from how the arrays lie in memory)
        self._fixed = {"A": options.pop("a_col_maj", None), "B": b_col_maj, "C": options.pop("c_col_maj", None)}
        for op, value in self._fixed.items():
            if value is not None:
                check_flag(f"{op.lower()}_col_maj", value)
        example = None if tiles is None else _paper_tiles(dev.name, dtype_in, out, dtype_b, acc,
                                                          options.get("emulate_bf16_with_bfp16"))
        self._tiles = checked_tiles(tiles, example)
        self._max = checked_max_size(max_size)
        # bias="auto": a call that passes a bias runs a design that adds it, one without a design that does not
        self._bias_auto = options.get("bias") == "auto"
        if self._bias_auto:
            options["bias"] = False
        elif "bias" in options and not isinstance(options["bias"], (bool, np.bool_)):
            raise refuse({"bias": options["bias"]}, "bias is True, False or 'auto'", "pass one of those")
        check_options(options)
        try:
            self._base = GemmConfig(dev.name, 1, 1, 1, 1, 1, 1, 1, dtype_in, out, bool(b_col_maj), dtype_b=dtype_b,
                                    acc=acc, a_col_maj=bool(self._fixed["A"]), c_col_maj=bool(self._fixed["C"]),
                                    **options)
            check_queue(self._base)  # the shim queue and task span, which no tiling changes: named as such
        except DESIGN_ERRORS as e:
            raise design_refusal(self._args, e) from None
        # the tuner leaves alone what the user fixed: rho (a bfp16 B's packing given stays in the options)
        self._rho: int | None = options.get("rho")
        self._designs: dict[tuple[Problem, Layout, bool], Design] = {}
        self._refused: dict[tuple[Problem, Layout, bool], ConfigError] = {}  # layouts no design takes, and why
        self.last_call: CallPlan | None = None  # the plan of the last call, its host copies counted
        self._loaded: dict[Any, Any] = {}  # xclbin path -> its NpuKernel, loaded by the first NPU call
        self._sessions: dict[int, Any] = {}
        self._first_design()

    def _first_design(self) -> None:
        """Build a design now, so that types, tiles and options that no design can take are refused
        when the Gemm is made: the design for max_size, else for the smallest size the tiles need
        (one block of the array), else for 1 x 1 x 1 and, if that has none (the tuner fits tiles
        to the size, and an option such as rho=3 needs larger ones), for one block of the paper's
        tiles."""
        if self._max is not None:
            self.design(*_astuple(self._max))
        elif self._tiles is not None:
            self.design(*_astuple(self._block(self._tiles)))
        else:
            try:
                self.design(1, 1, 1)
            except ConfigError as small:
                c = self._base
                paper = _paper_tiles(c.array.device, c.types.dtype_in, c.types.dtype_out, c.types.dtype_b, c.types.acc,
                                     c.kernel.emulate_bf16_with_bfp16)
                if paper is None:
                    raise small from None
                self.design(*_astuple(self._block(paper)))

    def _block(self, tiles: tuple[int, int, int, int]) -> Problem:
        """One block of the array for these tiles: (m x rows) x k_mt x (n x cols)."""
        m, _, n, k_mt = tiles
        return Problem(m * self._base.array.rows, k_mt, n * self._base.array.cols)

    # ---- designs ------------------------------------------------------------------------------
    def design(self, M: int, K: int, N: int, layout: Layout | None = None, bias: bool | None = None) -> Design:
        """The design that serves an M x K x N call with operand layouts `layout` (a_col_maj,
        b_col_maj, c_col_maj; default: the Gemm's own), built once, then reused; whether it can serve
        that size is checked when the call is planned (one line naming the limit). `bias`: whether it adds
        a bias (None: the Gemm's own; with bias="auto", whether the call passes one)."""
        layout = layout or self._base_layout
        bias = self._base.epilogue.bias if bias is None else bias
        key = (self._max or Problem(M, K, N), layout, bias)
        if key in self._refused:
            raise self._refused[key]
        if key not in self._designs:
            try:
                self._designs[key] = self._build(key[0], self._max is not None, layout, bias)
            except DESIGN_ERRORS as e:
                self._refused[key] = design_refusal(self._args, e)
                raise self._refused[key] from None
        return self._designs[key]

    @property
    def _base_layout(self) -> Layout:
        o = self._base.options
        return (o.a_col_maj, o.b_col_maj, o.c_col_maj)

    def _build(self, size: Problem, runtime: bool, layout: Layout, bias: bool) -> Design:
        a_col, b_col, c_col = layout
        options = replace(self._base.options, runtime_sizes="mnk" if runtime else "fixed", a_col_maj=a_col,
                          b_col_maj=b_col, c_col_maj=c_col, bias=bias)
        m, k, n, k_mt = self._tiles or (None, None, None, None)
        pins = Pins(m, k, n, k_mt, self._rho)
        return build_design(search.choose(Request(options, size, pins)).config)

    # ---- calls --------------------------------------------------------------------------------
    def plan(self, A: Any, B: Any, *, order: str = "C", packed: bool = False) -> CallPlan:
        """How the call C = A @ B runs: its design's blocks, the K walk, the layouts it reads the
        arrays in, and what the host copies (`copy_lines()`: each of A, B and C with its reason).
        A and B are checked as simulate() checks them; an empty product has no plan (refused)."""
        a, b = self._operands(A, B, packed)
        if _empty(a, b):
            M, K, N = a.shape[0], a.shape[1], b.shape[1]
            raise refuse(self._args, f"A @ B is {M} x {K} times {K} x {N}, an empty product: no call runs",
                         "simulate() and calling the Gemm return its C without running anything")
        return self._prepare(A, B, a, b, order)[1]

    def simulate(self, A: Any, B: Any, *, report: bool = False, order: str = "C", bias: Any = None,
                 scale: Any = None, zero_point: Any = None, act_min: Any = None, act_max: Any = None,
                 packed: bool = False, activation: str | None = None, scales: Any = None, zero_points: Any = None
                 ) -> np.ndarray | tuple[np.ndarray, Accuracy | EpilogueAccuracy]:
        """C from the functional simulator (every transfer and kernel call checked on the way);
        with report=True, (C, its Accuracy against the exact A @ B of the arrays given).

        What C is: by default A @ B accumulated exactly (int32, or int64 for int16 inputs) or in fp32,
        rounded and saturated once into dtype_out: integer outputs equal np.clip(A @ B) (with
        `shift`: A @ B / 2^shift rounded once), bf16 and f32 outputs one rounding of an fp32 sum.
        acc='out' rounds (and saturates) C after every k-step instead, as mlir-aie's examples do.
        Measured here (scripts/accuracy_table.py, 16 x 4096 x 256 standard normal bf16 inputs,
        Frobenius norm of C - A @ B relative to A @ B's): npu1 bf16 0.17%, npu2 bf16 (its default
        bfp16 datapath, which quantizes A and B to bfp16 blocks) 0.94%, npu2 bf16 with
        emulate_bf16_with_bfp16=False 0.17%; f32 outputs 4e-7 on npu1; acc='out' about 2.7% for
        bf16; integer outputs clip(A @ B) exactly (docs/accuracy.md). Outputs whose A @ B
        leaves the output type (integers clamped, floats Inf) come with a NumericsWarning.

        A (M x K) and B (K x N) are 2-D arrays of real numbers (NumPy integers and floats, ml_dtypes
        bfloat16 and kin), converted to the input types only where nothing changes:
        - i8 / i16 take integers in their range, and floats that are whole numbers in it; values
          outside are refused, not wrapped (clip them yourself: np.clip(A, -128, 127).astype(np.int8));
        - bf16 takes values that are bf16 values (float64 0.1 is not; A.astype(ml_dtypes.bfloat16)
          accepts the rounding), NaN and Inf included on the plain bf16 path, where they reach C
          as IEEE arithmetic says (a NaN in row i of A makes row i of C NaN);
        - bfp16 takes any finite value within float32's range (quantized on the host);
        - NaN and Inf are refused wherever an operand is quantized to bfp16 (bfp16 operands, a bf16 A
          times a bfp16 B, npu2's default bf16 on the bfp16 datapath): the hardware's handling of
          them is unpublished (emulate_bf16_with_bfp16=False keeps them on npu2);
        - complex, boolean, object, text and date arrays, masked arrays with masked values, K that
          differs between A and B, and sizes over max_size are refused.
        - int4 B (dtype_b='i4', W4A8): integers in [-8, 7] of shape (K, N), or with packed=True
          the bytes of a checkpoint's packing, (K / 2) x N, rows 2i and 2i + 1 of B in the low and the
          high nibble of byte row i (dtypes.pack_i4 along K); the host repacks them along N for the DMAs.
        - W4A16 (dtype_in='bf16', dtype_b='i4', group_size=32 | 64 | 128, zero_points=False | True): B as
          for W4A8, with `scales=` (ceil(K / group_size) x N real numbers, rounded to bf16 RNE: a scale the
          rounding changes is a NumericsWarning, never silent; 0 or between 2^-126 and about 2.378e36 in
          magnitude, what the core's fp32 datapath holds) and, with zero points, `zero_points=` (same
          shape, integers in [-8, 7]); C is the bf16 GEMM of A and bf16_rne((B - z) s), and report=True
          measures it against float64 A @ ((B - z) s).
        Each refusal is one ConfigError line saying how many values, the first one, and the fix.
        An empty product (M, K or N = 0) returns M x N zeros, as NumPy does, without a simulation.
        With a fused epilogue (Gemm(..., bias=True, activation=..., clamp=..., requant='per_channel')): `bias`,
        N values (f32 for a bf16 C, int32 for a requantized one); for requantization `scale=(multiplier,
        shift)`, N int32 multipliers and N shifts in [-30, 30] (TFLite's per-channel parameters),
        `zero_point`, `act_min`, `act_max` (default the output type's range; ReLU raises act_min to the zero
        point). C is then act(A @ B + bias) as mlir-aie's bf16 kernels compute it, or TFLite's integer
        requantization, and report=True gives its EpilogueAccuracy (against float64 act(A @ B + bias), and
        for requantization the outputs that differ from TFLite's arithmetic); gemm_gen/app/operator_epilogue.py
        checks the data (one line each). A Gemm built with activation='runtime' compiles every activation of
        its output type and each call selects one, `activation=` ('none' by default, 'relu', 'silu', 'gelu'),
        written into the cores' runtime-parameter buffers (one xclbin); any other build refuses a call's
        activation other than its own.

        The arrays are read as they lie in memory (gemm_gen/app/operator_layouts.py): a transposed
        view or a Fortran-ordered array through the column-major layouts, rows padded to a regular
        stride through a leading dimension; `order` ("C" or "F") is C's memory order. What the host
        still copies, and why, is in `last_call.copy_lines()` (and `plan(A, B)` before the call).
        """
        a, b = self._operands(A, B, packed, simulating=True)
        quant = self._weights(b, scales, zero_points)
        data = (bias, scale, zero_point, act_min, act_max)
        if _empty(a, b):  # C without a run; with report=True still the pair (C, its accuracy), as for any call
            base, epi = self._check_empty(a, b, *data)
            c = self._zeros(a, b, self._order(order))
            return self._checked(base, c, a, b, report, epi=epi) if report else c
        design, call, a, b = self._prepare(A, B, a, b, order, bias)
        call = self._select(design, call, activation)
        epi = epilogue_args(self._args, design.config, b.shape[1], *data)
        session = self._sessions.setdefault(id(design), ArraySession(design))
        with np.errstate(invalid="ignore"):  # NaN and Inf accepted on plain bf16 make NaN in C, as intended
            c_cells, _, _ = session.run(call, *pad_inputs(design.config, a, quant or b, call, epi))
        c = output_values(design.config, (c_cells & VALUE_MASK).astype(np.uint32), call)
        return self._checked(design.config, self._in_order(c, call, order), a, b if quant is None else quant.exact(),
                             report, epi=epi, activation=call.activation)

    def __call__(self, A: Any, B: Any, *, report: bool = False, check: bool = True,
                 timeout_ms: int | None = None, order: str = "C", bias: Any = None, scale: Any = None,
                 zero_point: Any = None, act_min: Any = None, act_max: Any = None, packed: bool = False,
                 activation: str | None = None, scales: Any = None, zero_points: Any = None
                 ) -> np.ndarray | tuple[np.ndarray, Accuracy | EpilogueAccuracy]:
        """C from the NPU through XRT (needs mlir-aie, Peano or chess, XRT and an NPU); A and B are
        checked as simulate() checks them. C is checked too, without a host GEMM where it can be:
        with the default accumulator only saturated or overflowed outputs can differ from A @ B
        rounded once, and only theirs are recomputed; with acc='out' (integers), or report=True,
        the whole product is (accuracy.measure). check=False skips C's check. The run must complete
        within `timeout_ms` milliseconds (None: max(2 s, 100 x the model's predicted time), as
        `gemm-gen run`), else RunTimeout, one line. The epilogue's data as simulate() takes it."""
        try:
            checked_timeout(timeout_ms)
        except ConfigError as e:
            raise design_refusal(self._args, e) from None
        a, b = self._operands(A, B, packed)
        quant = self._weights(b, scales, zero_points)
        data = (bias, scale, zero_point, act_min, act_max)
        if _empty(a, b):  # C without a run; with report=True still the pair (C, its accuracy), as for any call
            base, epi = self._check_empty(a, b, *data)
            c = self._zeros(a, b, self._order(order))
            return self._checked(base, c, a, b, report, epi=epi) if report else c
        design, call, a, b = self._prepare(A, B, a, b, order, bias)
        call = self._select(design, call, activation)
        epi = epilogue_args(self._args, design.config, b.shape[1], *data)
        c = self._in_order(run_on_npu(design, call, a, quant or b, loaded=self._loaded, timeout_ms=timeout_ms,
                                      slow_end=slow_end_s, gen_args=config_args(design.config), epilogue=epi),
                           call, order)
        if not check:
            return c
        c_ = design.config
        whole = report or (not c_.types.t_out.is_float and c_.types.acc == c_.types.dtype_out != c_.default_acc)
        return self._checked(design.config, c, a, b if quant is None else quant.exact(), report, whole, epi,
                             call.activation)

    def _select(self, design: Design, call: CallPlan, activation: str | None) -> CallPlan:
        """The call with the activation it selects (a runtime-activation build's mode; refused, one line,
        where the build has no code for it)."""
        try:
            return replace(call, activation=call_activation(design.config.epilogue, activation))
        except ConfigError as e:
            raise design_refusal(self._args, e) from None

    def _check_empty(self, a: np.ndarray, b: np.ndarray, *data: Any) -> tuple[GemmConfig, EpilogueArgs | None]:
        """An empty product with a fused epilogue: only M = 0 or N = 0 (no output) runs nothing; K = 0 would make
        act(bias), which no call computes. The config the call would have had (its bias) and its epilogue's data."""
        epilogue = not self._base.epilogue.is_identity or data[0] is not None
        if epilogue and a.shape[1] == 0 and a.shape[0] and b.shape[1]:
            raise refuse(self._args, "K = 0 with a fused epilogue: C would be the epilogue of zeros, which no call "
                         "computes", "pass K >= 1")
        base = self._base.with_(bias=True) if self._bias_auto and data[0] is not None else self._base
        return base, epilogue_args(self._args, base, b.shape[1], *data)

    @staticmethod
    def _checked(cfg: GemmConfig, c: np.ndarray, a: np.ndarray, b: np.ndarray, report: bool,
                 whole: bool = True, epi: EpilogueArgs | None = None, activation: str | None = None
                 ) -> np.ndarray | tuple[np.ndarray, Accuracy | EpilogueAccuracy]:
        """C, with a NumericsWarning for every way it can differ from A @ B beyond one rounding:
        outputs saturated or overflowed, integers that are not A @ B rounded and saturated once
        (per-k-step numerics), an acc32 accumulator these inputs can overflow; its Accuracy if
        asked. `whole`: against the whole product, else only the outputs at the type's bounds.
        With an epilogue: against float64 act(A @ B + bias) and TFLite's requantization (EpilogueAccuracy)."""
        nm = cfg.numerics
        if not cfg.epilogue.is_identity:
            return Gemm._checked_epilogue(cfg, c, a, b, report, epi, activation)
        accuracy = measure(c, a, b, nm) if whole else None
        if accuracy is not None:
            lost = accuracy.saturated or accuracy.nonfinite or (
                not nm.dtype_out.is_float and accuracy.exact < accuracy.elements)
            said = accuracy.text()
        else:
            saturated, nonfinite = bound_losses(c, a, b, nm)
            lost = saturated or nonfinite
            said = (f"{saturated:,} of {c.size:,} outputs {NARROWED[nm.saturation]}"
                    if saturated else f"{nonfinite:,} of {c.size:,} outputs not finite where A @ B is")
        if lost:
            warnings.warn(f"C differs from A @ B beyond rounding: {said}", NumericsWarning, stacklevel=3)
        bound = acc32_overflow_bound(a, b, cfg.acc_bits)
        if bound is not None:
            warnings.warn(f"K max|A| max|B| = {bound:.3g} reaches past the 32-bit accumulator of the "
                          f"{cfg.array.device} "
                          f"{cfg.types.dtype_in} mmul {'x'.join(map(str, cfg.kernel.mmul))}, whose overflow is "
                          f"unpublished: C may "
                          f"be wrong; use an mmul with a 64-bit accumulator, or split K", NumericsWarning,
                          stacklevel=3)
        return (c, accuracy if accuracy is not None else measure(c, a, b, nm)) if report else c

    @staticmethod
    def _checked_epilogue(cfg: GemmConfig, c: np.ndarray, a: np.ndarray, b: np.ndarray, report: bool,
                          epi: EpilogueArgs | None, activation: str | None = None
                          ) -> np.ndarray | tuple[np.ndarray, EpilogueAccuracy]:
        """C after an epilogue, with a NumericsWarning where it differs from TFLite's integer arithmetic (acc +
        bias past int32, where TFLite's own arithmetic is undefined) or is not finite where its target is."""
        e = cfg.epilogue.for_call(activation)
        bias = None if epi is None else epi.bias
        requant = kernel_requant(e, None if epi is None else epi.requant)
        try:
            acc = measure_epilogue(c, a, b, e, bias, requant)
        except ValueError as err:  # TFLite's reference refuses acc + bias past int32
            warnings.warn(f"C is the kernel's saturating requantization; TFLite's is undefined here: {err}",
                          NumericsWarning, stacklevel=3)
            return c
        if acc.tflite_mismatches or acc.nonfinite:
            warnings.warn(f"C after the epilogue: {acc.text()}", NumericsWarning, stacklevel=3)
        return (c, acc) if report else c

    # ---- checks -------------------------------------------------------------------------------
    def _call(self, design: Design, a: np.ndarray, b: np.ndarray, lds: dict[str, int] | None = None) -> CallPlan:
        c = design.config
        problem = Problem(a.shape[0], a.shape[1], b.shape[1])
        self._check_max(problem)
        try:
            call = serve(c, problem)
            if lds:
                call = plan_call(c, problem, lds)
                check_dma_limits(c, call)
        except DESIGN_ERRORS as e:
            raise design_refusal(self._args, e) from None
        # A's K tail reads the next row's values (and, with a leading dimension, the padding between
        # rows), times zeros: an Inf or NaN there would reach the previous row of C, so pad A instead
        read = a
        if "A" in dict(call.lds):
            read = pad_inputs(c, a, b, call)[0]
        if call.a_finite and not np.isfinite(np.asarray(read).astype(np.float32)).all():
            why = ("A (or the padding between its rows) holds Inf or NaN, which the K tail would multiply by zero "
                   "into the previous row")
            call = replace(call, padded=tuple(sorted({*call.padded, "A"})), copies=(*call.copies, HostCopy("A", why)),
                           a_finite=False)
        return call

    def _check_max(self, problem: Problem) -> None:
        if self._max is None:
            return
        for name, value, limit in zip("MKN", _astuple(problem), _astuple(self._max)):
            if value > limit:
                raise refuse(self._args, f"{name}={value} > {limit}, the largest {name} its design serves",
                             f"use a Gemm whose max_size covers {problem}")

    def _operands(self, A: Any, B: Any, packed: bool = False, simulating: bool = False
                  ) -> tuple[np.ndarray, np.ndarray]:
        """A and B checked and in the input types. `simulating`: the simulator's memory for their product is
        checked first, from their shapes, before any copy is made (or a design chosen)."""
        a, b = as_matrix("A", A), as_matrix("B", B)
        if packed is not False:
            self._check_packed(b, packed)
        if a.ndim != 2 or b.ndim != 2:
            raise ConfigError(f"A and B must be matrices, not arrays of {a.ndim} and {b.ndim} dimensions",
                              "pass 2-D arrays")
        k_b = 2 * b.shape[0] if packed is True else b.shape[0]  # packed int4: two rows of B per byte row
        if a.shape[1] != k_b:
            raise ConfigError(f"A is {a.shape[0]} x {a.shape[1]} but B is {k_b} x {b.shape[1]}: K differs",
                              "pass A (M x K) and B (K x N)")
        if simulating:
            self._check_memory(a.shape[0], a.shape[1], b.shape[1])
        if packed is True:
            b = unpack_i4(b.view(np.uint8), axis=0)
        c = self._base
        return (host_operand("A", a, c.types.t_in, bfp16_quantizer(c, "A")),
                host_operand("B", b, c.types.t_b, bfp16_quantizer(c, "B")))

    def _check_memory(self, M: int, K: int, N: int) -> None:
        """ConfigError when simulating this product needs more memory than the machine has (or more words than
        the simulator numbers); an empty product runs nothing."""
        if M * K * N == 0:
            return
        try:
            check_memory(self._base, [Problem(M, K, N)])  # the types and the size, whatever tiling is chosen
        except ConfigError as e:
            raise refuse(self._args, in_operator_terms(e.raw_what), "simulate smaller arrays (split A's rows or B's "
                         "columns into several calls: any design serves them)") from None

    def _weights(self, b: np.ndarray, scales: Any, zero_points: Any) -> QuantB | None:
        """W4A16's weights (B's int4 values with their checked scales and zero points), None for any other
        Gemm (which refuses scales and zero points); a scale that bf16 rounding changes is a NumericsWarning."""
        c = self._base
        if not c.groups.group_size:
            if scales is not None or zero_points is not None:
                given = "scales" if scales is not None else "zero_points"
                raise refuse(self._args, f"{given}= belongs to int4 weights with group scales (W4A16)",
                             f"drop {given}=, or make the Gemm with dtype_in='bf16', dtype_b='i4', "
                             "group_size=32 | 64 | 128")
            return None
        try:
            quant, changed = group_operands(b, scales, zero_points, c.groups.group_size, c.groups.zero_points)
        except ConfigError as e:
            raise design_refusal(self._args, e) from None
        if changed:
            warnings.warn(f"scales: {changed:,} of {quant.scales.size:,} values are not bf16 values and were rounded "
                          "to the nearest (even) bf16; the weights use the rounded scales", NumericsWarning,
                          stacklevel=3)
        return quant

    def _check_packed(self, b: np.ndarray, packed: Any) -> None:
        """packed=True: B must be int4 bytes ((K / 2) x N, pairs along K, the low nibble first)."""
        if packed is not True:
            raise refuse(self._args, f"packed={packed!r}: packed is True (B is packed int4 bytes) or False",
                         "pass packed=True or packed=False")
        if not self._base.types.t_b.is_packed:
            raise refuse(self._args, f"packed=True: B is {self._base.types.t_b}, not a packed type",
                         "pass B's values (packed=False), or make the Gemm with dtype_b='i4'")
        if b.ndim != 2 or b.dtype not in (np.uint8, np.int8):
            raise refuse(self._args, f"packed=True: B must be a 2-D array of bytes (uint8 or int8), not {b.ndim}-D "
                         f"{b.dtype}", "pass the packed bytes as np.uint8, (K / 2) x N")

    def _zeros(self, a: np.ndarray, b: np.ndarray, order: str = "C") -> np.ndarray:
        """C of an empty product: M x N zeros in C's host type (a sum over K = 0 is 0, as in NumPy)."""
        return np.zeros((a.shape[0], b.shape[1]), self._base.types.t_out.host, order=order)  # type: ignore[call-overload]

    # ---- layouts: the arrays as they lie in memory ------------------------------------------------
    def _order(self, order: Any) -> str:
        if not isinstance(order, str) or order not in ORDERS:
            raise refuse(self._args, f"order={order!r}: C's memory order is 'C' (row-major) or 'F' (column-major)",
                         "pass order='C' or order='F'")
        return order

    def _prepare(self, A: Any, B: Any, a: np.ndarray, b: np.ndarray, order: str, bias: Any = None
                 ) -> tuple[Design, CallPlan, np.ndarray, np.ndarray]:
        """The design, the call plan (every host copy counted, with its reason) and the operands as
        the call reads them, for arrays A and B as given (a, b: checked and in the input types); `bias`:
        the call's, which picks the design under bias="auto"."""
        with_bias = bias is not None if self._bias_auto else None
        order = self._order(order)
        given = {"A": (A, a), "B": (B, b)}
        copies: dict[str, list[str]] = {"A": [], "B": [], "C": []}
        lay = {}
        for op, (raw, x) in given.items():
            if x is not raw and not (isinstance(raw, np.ndarray) and np.may_share_memory(raw, x)):
                src = np.asarray(raw).dtype
                copies[op].append(f"{op} is {src}, {CONVERTED}")
            lay[op] = arrangement(op, x)
        types = {"A": self._base.types.t_in, "B": self._base.types.t_b}
        # a bfp16 operand is encoded into tiles on the host from any layout: its layout stays the Gemm's
        want = {op: self._fixed[op] if self._fixed[op] is not None else lay[op].col and not types[op].host_encoded
                for op in ("A", "B")}
        t_out = self._base.types.t_out
        c_col = self._fixed["C"] if self._fixed["C"] is not None else (
            order == "F" and not t_out.is_block)
        layout = (bool(want["A"]), bool(want["B"]), bool(c_col))
        M, K, N = a.shape[0], a.shape[1], b.shape[1]
        c_refused: str | None = None  # why no design writes the column-major C asked for
        try:
            design = self.design(M, K, N, layout, with_bias)
        except ConfigError as e:
            chosen = [op for op, v in zip("ABC", layout) if v and self._fixed[op] is None]
            if not chosen:
                raise
            fallback = tuple(v and self._fixed[op] is not None for op, v in zip("ABC", layout))
            design = self.design(M, K, N, fallback, with_bias)  # type: ignore[arg-type]
            layout = fallback  # type: ignore[assignment]
            why = in_operator_terms(e.raw_what)
            for op in chosen:
                if op != "C":
                    copies[op].append(f"{op} is column-major, but no design reads it so: {why}")
                else:
                    c_refused = why
        for op, col in zip("AB", layout):
            x, arr = given[op][1], lay[op]
            if types[op].host_encoded:
                continue  # encoded on the host (bfp16 tiles, packed int4) from any layout
            if arr.kind == OTHER:
                copies[op].append(arr.why)
            elif arr.col != col and x.shape[0] > 1 and x.shape[1] > 1:
                fixed = f"{op.lower()}_col_maj={self._fixed[op]!r}"
                copies[op].append(f"{op} is {layout_word(arr.col)} and Gemm({fixed}) reads it "
                                  f"{layout_word(col)}, so the host rearranges it")
        lds: dict[str, int] = {}
        for op, col in zip("AB", layout):
            x, arr = given[op][1], lay[op]
            stored = x.T if col else x
            if copies[op] or types[op].host_encoded or stored.flags.c_contiguous or arr.kind == OTHER:
                continue
            if not in_allocation(stored, arr.ld):
                copies[op].append(f"{op}'s rows are {arr.ld} elements apart, and the padding after its last row "
                                  f"lies outside its array's memory, which the DMAs would read")
            else:
                lds[op] = arr.ld
        try:
            call = self._call(design, a, b, lds)
        except ConfigError as e:
            if not lds:
                raise
            call = self._call(design, a, b)  # the DMAs cannot take the stride: the host packs the rows
            for op, ld in lds.items():
                copies[op].append(f"{op}'s rows are {ld} elements apart, which this design's transfers cannot "
                                  f"stride ({in_operator_terms(e.raw_what)})")
        c_word = layout_word(bool(layout[2]))
        if (order == "F") != bool(layout[2]):
            if self._fixed["C"] is not None:
                copies["C"].append(f"order='{order}' with Gemm(c_col_maj={self._fixed['C']!r}), which writes C "
                                   f"{c_word}: a host transpose")
            else:
                why = c_refused or f"no design writes a column-major {t_out} C"
                copies["C"].append(f"order='F' needs a host transpose ({why})")
        for op, whys in copies.items():
            for why in whys:
                call = call.with_copy(op, why, separate=why.endswith(CONVERTED))
        self.last_call = call
        return design, call, a, b

    def _in_order(self, c: np.ndarray, call: CallPlan, order: str) -> np.ndarray:
        """C in the memory order asked: the design's buffer as it is where it already lies so (no
        copy), else one copy (a crop of a padded buffer or a host transpose, counted in the plan)."""
        if order == "F" and c.flags.f_contiguous or order == "C" and c.flags.c_contiguous:
            return c
        return np.array(c, order=order)  # type: ignore[call-overload]


def _empty(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether M, K or N is 0."""
    return a.size == 0 or b.size == 0


def _astuple(p: Problem) -> tuple[int, int, int]:
    return p.M, p.K, p.N


def _paper_tiles(dev: str, dtype_in: str, dtype_out: str, dtype_b: str | None, acc: str | None,
                 emulate: Any) -> tuple[int, int, int, int] | None:
    """The paper's tiles for these types (config.default_tiles), or None when it has none for them."""
    try:
        return default_tiles(dev, dtype_in, dtype_out, None, emulate, dtype_b, acc)
    except (GemmGenError, TypeError):
        return None
