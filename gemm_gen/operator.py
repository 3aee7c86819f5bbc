"""Gemm: a GEMM operator on your own NumPy / ml_dtypes arrays, on an NPU or in the simulator.

    g = Gemm(device="npu1", dtype_in="i8", dtype_out="i32")
    C = g.simulate(A, B)      # any machine: the functional simulator, checked data movement
    C = g(A, B)               # an NPU: builds (or finds in the cache) the xclbin, runs it through XRT

Without `max_size` every new shape gets its own design (tuned for it, kept for the next call of
that shape). With `max_size=(M, K, N)` one design serves every shape up to it (the cores read their
k-steps from a runtime parameter): one xclbin, an instruction stream per shape. Sizes that are
not multiples of the design's blocks run on the array without host copies wherever the DMAs allow
(gemm_gen/call.py). The numerics options are the CLI's (rounding, saturation, shift, ...).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from .call import CallPlan, HostCopy, Problem
from .config import GemmConfig
from .design import Design, build_design
from .design.serve import serve
from .dtypes import DType, dtype
from .errors import ConfigError
from .hostdata import output_values, pad_inputs


class Gemm:
    """C = A @ B for one device and set of types; see the module docstring."""

    def __init__(self, device: str = "npu2", dtype_in: str = "bf16", dtype_out: str | None = None, *,
                 dtype_b: str | None = None, acc: str | None = None, b_col_maj: bool = False,
                 max_size: tuple[int, int, int] | None = None, tiles: tuple[int, int, int, int] | None = None,
                 **options: Any) -> None:
        out = dtype_out or {"bf16": "bf16", "bfp16": "bfp16"}.get(dtype_in, "i32")
        try:  # the options are GemmConfig's; a wrong name is one line, not a TypeError
            probe = GemmConfig(device, 1, 1, 1, 1, 1, 1, 1, dtype_in, out, b_col_maj, dtype_b=dtype_b, acc=acc,
                               **options)
        except TypeError as e:
            raise ConfigError(f"Gemm: {e}", "pass GemmConfig's options (rounding, saturation, shift, ...)") from None
        self._base = probe
        self._tiles = tiles
        self._max = Problem(*max_size) if max_size is not None else None
        self._designs: dict[Problem, Design] = {}
        self._loaded: dict[Any, Any] = {}  # xclbin path -> its NpuKernel, loaded by the first NPU call
        self._sessions: dict[int, Any] = {}

    # ---- designs ------------------------------------------------------------------------------
    def design(self, M: int, K: int, N: int) -> Design:
        """The design that serves an M x K x N call (built once, then reused); whether it can serve
        that size is checked when the call is planned (one line naming the limit)."""
        key = self._max or Problem(M, K, N)
        if key not in self._designs:
            self._designs[key] = self._build(key, self._max is not None)
        return self._designs[key]

    def _build(self, size: Problem, runtime: bool) -> Design:
        from .model.choose import choose

        base = replace(self._base, M=size.M, K=size.K, N=size.N, runtime_sizes="mnk" if runtime else "fixed")
        m, k, n, k_mt = self._tiles or (None, None, None, None)
        return build_design(choose(base, m, k, n, k_mt, b_pack_open=self._base.t_b.is_block))

    # ---- calls --------------------------------------------------------------------------------
    def plan(self, A: Any, B: Any) -> CallPlan:
        """How the call C = A @ B runs: its design's blocks, the K walk, what the host copies."""
        a, b = self._operands(A, B)
        return self._call(self.design(a.shape[0], a.shape[1], b.shape[1]), a, b)

    def simulate(self, A: Any, B: Any) -> np.ndarray:
        """C from the functional simulator (every transfer and kernel call checked on the way)."""
        from .sim.run import ArraySession
        from .sim.words import VALUE_MASK

        a, b = self._operands(A, B)
        design = self.design(a.shape[0], a.shape[1], b.shape[1])
        call = self._call(design, a, b)
        session = self._sessions.setdefault(id(design), ArraySession(design))
        c_cells, _, _ = session.run(call, *pad_inputs(design.config, a, b, call))
        return output_values(design.config, (c_cells & VALUE_MASK).astype(np.uint32), call).copy()

    def __call__(self, A: Any, B: Any) -> np.ndarray:
        """C from the NPU through XRT (needs mlir-aie, Peano or chess, XRT and an NPU)."""
        from .backends.npu_call import run_on_npu

        a, b = self._operands(A, B)
        design = self.design(a.shape[0], a.shape[1], b.shape[1])
        return run_on_npu(design, self._call(design, a, b), a, b, loaded=self._loaded)

    # ---- checks -------------------------------------------------------------------------------
    def _call(self, design: Design, a: np.ndarray, b: np.ndarray) -> CallPlan:
        c = design.config
        call = serve(c, Problem(a.shape[0], a.shape[1], b.shape[1]))
        if call.a_finite and not np.isfinite(a.astype(np.float32)).all():
            # A's K tail would multiply the next row's Inf or NaN by zero: pad A instead
            why = "A holds Inf or NaN, which the K tail would multiply by zero into the previous row"
            call = replace(call, padded=tuple(sorted({*call.padded, "A"})), copies=(*call.copies, HostCopy("A", why)),
                           a_finite=False)
        return call

    def _operands(self, A: Any, B: Any) -> tuple[np.ndarray, np.ndarray]:
        a, b = np.asarray(A), np.asarray(B)
        if a.ndim != 2 or b.ndim != 2:
            raise ConfigError(f"A and B must be matrices, not arrays of {a.ndim} and {b.ndim} dimensions",
                              "pass 2-D arrays")
        if a.shape[1] != b.shape[0]:
            raise ConfigError(f"A is {a.shape[0]} x {a.shape[1]} but B is {b.shape[0]} x {b.shape[1]}: K differs",
                              "pass A (M x K) and B (K x N)")
        return _converted("A", a, self._base.t_in), _converted("B", b, self._base.t_b)


def _converted(name: str, x: np.ndarray, t: DType) -> np.ndarray:
    """x in t's host type when the conversion is exact; ConfigError (one line) otherwise. bfp16
    operands are quantized on the host anyway: any real values are accepted."""
    if not (np.issubdtype(x.dtype, np.number) or x.dtype == dtype("bf16").host):
        raise ConfigError(f"{name} has dtype {x.dtype}, not numbers", f"pass {name} as {t} ({t.host})")
    if t.is_block:
        return np.asarray(x, np.float32)
    if x.dtype == t.host:
        return x
    with np.errstate(invalid="ignore", over="ignore"):
        y = x.astype(t.host)
        same = y.astype(np.float64) == x.astype(np.float64)
    same |= np.isnan(x.astype(np.float64)) & np.isnan(y.astype(np.float64))
    if not same.all():
        i, j = (int(v) for v in np.argwhere(~same)[0])
        raise ConfigError(f"{name} is {x.dtype}, and {int(np.count_nonzero(~same))} of its values are not {t} values "
                          f"(first {name}[{i}, {j}] = {x[i, j]!r})",
                          f"convert it yourself ({name}.astype({t.host.name})) to accept the rounding")
    return y
