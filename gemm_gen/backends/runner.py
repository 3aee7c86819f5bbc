"""Run a built design on the NPU through XRT (pyxrt), check it, and time it.

Buffers and the kernel call follow mlir-aie's matrix_multiplication host (test.cpp) and its Python
host runtime: instructions in a cacheable BO of group 1, A/B/C in host-only BOs of groups 3/4/5,
`kernel(3, instr_bo, instruction_count, A, B, C)` (the count in 32-bit words, mlir-aie PR #1609).
The output lines are mlir-aie's, so existing sweep scripts keep working. Every wait for a run has a
time limit (RunLimit): a hung design ends in one line instead of blocking forever.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import numpy as np

from ..design import build_design
from ..design.host_buffers import host_values, output_values, pad_inputs, with_slack
from ..facts.accuracy import Accuracy
from ..facts.accuracy import measure as measure_accuracy  # runner.measure times a design
from ..facts.epilogue_args import EpilogueArgs, kernel_requant, seeded_args
from ..facts.errors import BuildError, ConfigError, RunTimeout, ToolchainMissing, opt
from ..facts.inputs import group_weights, make_inputs
from ..facts.lanes import lane_note
from ..facts.numerics import reference
from ..spec.call import CallPlan
from ..spec.config import GemmConfig
from ..spec.request import Problem
from . import toolchain
from .compile import Artifacts, artifacts, is_current, run_build
from .doctor import npu_family

OPCODE = 3  # the NPU's "run the instruction sequence" opcode
UNSECURE_XCLBIN = "XRT_HACK_UNSECURE_LOADING_XCLBIN"
GROUP_INSTR, GROUP_A, GROUP_B, GROUP_C = 1, 3, 4, 5
# mlir-aie's nearly_equal for float outputs (common.h): abs 0.5, rel 0.05
ABS_TOL, REL_TOL = 0.5, 0.05

# How long one run may take. pyxrt binds run.wait() as XRT's wait(0) and run.wait(timeout_ms) with an
# unsigned int (Xilinx/XRT src/python/pybind11/src/pyxrt.cpp); xrt_kernel.h: 0 ms blocks until the run
# completes, a limit that passes returns ERT_CMD_STATE_TIMEOUT and "it is the callers responsibility to
# abort the run". pyxrt binds no run.abort() (C++ xrt::run::abort() is not exposed in the pyxrt.cpp
# versions read), so a timed-out run is left to XRT, released with its hardware context: at the end of
# `gemm-gen run`, when validate drops the design's kernel before the next one, or when the operator's
# next call loads the xclbin anew (npu_call.run_on_npu); whether the driver then recovers the array is
# unverified. xrt_kernel.h also warns that other runs completing within the limit can mask a timeout;
# gemm_gen runs one at a time.
# The default is generous on purpose: a run that is merely slow must not be cut short, only one that
# makes no progress. 100 x the model's time at the slow end of its constants' spreads: the model is
# within a factor of about 2 of every published measurement it is checked against (docs/model.md: mean
# 6%, worst +109%); an uncalibrated laptop (slower DRAM, a throttled clock, a kernel the compiler
# scheduled worse than the model assumes) is assumed to stay within another order of magnitude, and
# 100 x leaves room beyond both. The 2 s floor covers what the model
# does not price: a first run's setup in the driver and firmware and an NPU waking from a power state
# (milliseconds to tens of them, assumed, not measured), still short enough that `make validate` moves
# on quickly from a hung design. Every design of the validate sweeps gets 2 to 6 s.
# The prediction comes from the caller (SlowEnd): the back ends do not import the model.
TIMEOUT_FLOOR_MS = 2000
TIMEOUT_FACTOR = 100
MAX_TIMEOUT_MS = 2**32 - 1  # the binding's unsigned int; 0 would mean no limit, so the least is 1
# seconds one call of a design takes at the slow end of the model's constants (the application layer's
# app/limits.slow_end_s): what the default time limit is derived from
SlowEnd = Callable[[GemmConfig, Problem], float]


@dataclass
class RunResult:
    config: GemmConfig
    times_us: list[float]
    checked: int
    errors: int
    exact: int  # outputs equal to the exact reference, bit for bit
    accuracy: Accuracy  # C against the exact product of the inputs the NPU read
    first_error: tuple[int, int, float, float] | None = None
    notes: list[str] = field(default_factory=list)
    problem: Problem | None = None  # the call's size (None: the config's own)

    @property
    def passed(self) -> bool:
        return self.errors == 0

    def gflops(self, us: float) -> float:
        c = self.config
        macs = self.problem.macs if self.problem is not None else c.size.M * c.size.K * c.size.N
        return 2 * macs / (1000 * us)

    def lines(self) -> list[str]:
        """mlir-aie's host output (matrix_multiplication/test.cpp), line for line: a blank line before
        each timing pair, then PASS! or `Error count: N` and Failed. (we check every output, so
        never its sampled mode's `(out of ...)` suffix). Numbers as `make run` prints them: its
        default `-v 2` leaves std::cout in fixed notation with 2 decimals."""
        t = self.times_us
        avg, lo, hi = sum(t) / len(t), min(t), max(t)
        out = ["", f"Avg NPU matmul time: {avg:.2f}us.", f"Avg NPU gflops: {self.gflops(avg):.2f}",
               "", f"Min NPU matmul time: {lo:.2f}us.", f"Max NPU gflops: {self.gflops(lo):.2f}",
               "", f"Max NPU matmul time: {hi:.2f}us.", f"Min NPU gflops: {self.gflops(hi):.2f}"]
        if self.passed:
            return [*out, "", "PASS!", ""]
        return [*out, "", f"Error count: {self.errors}", "", "", "Failed.", ""]

    def to_json(self) -> dict[str, Any]:
        t = self.times_us
        avg = sum(t) / len(t)
        size = str(self.problem if self.problem is not None else self.config.size)
        return {"config": self.config.to_json(), "size": size, "passed": self.passed, "times_us": t, "avg_us": avg,
                "min_us": min(t), "max_us": max(t), "avg_gflops": self.gflops(avg), "checked": self.checked,
                "errors": self.errors, "exact": self.exact, "accuracy": self.accuracy.to_json(),
                "first_error": self.first_error, "notes": self.notes}


class XclbinFiles(Protocol):
    """An xclbin and the instruction stream to run with it (Artifacts, or one call's files)."""

    @property
    def xclbin(self) -> Path: ...

    @property
    def insts(self) -> Path: ...


@dataclass(frozen=True)
class RunLimit:
    """How long one run of one call may take, and what to say when it takes longer."""

    timeout_ms: int
    design: str  # the config's suffix (its build's file names)
    size: str  # the call's M x K x N
    xclbin: str
    predicted_us: float  # the model's time for the call, at the slow end of its constants (0: none given)
    given: bool  # --timeout-ms (or the operator's timeout_ms=) given, else the default

    def error(self) -> RunTimeout:
        how = "as given" if self.given else (f"the default: max({TIMEOUT_FLOOR_MS // 1000} s, {TIMEOUT_FACTOR} x "
                                             f"the predicted {self.predicted_us:,.0f} us)" if self.predicted_us else
                                             f"the default: {TIMEOUT_FLOOR_MS // 1000} s, no prediction given")
        return RunTimeout(f"the NPU run of design {self.design} at size {self.size} did not complete within "
                          f"{self.timeout_ms:,} ms ({how})",
                          f"rebuild it (remove {self.xclbin} and run again), check the NPU with `xrt-smi examine` "
                          f"and dmesg, or allow longer with {opt('timeout_ms')}",
                          self.timeout_ms)


def checked_timeout(value: Any) -> int | None:
    """None (the default limit) or a whole number of milliseconds XRT's wait takes as a limit:
    1 to MAX_TIMEOUT_MS (0 is XRT's "no limit"); anything else ConfigError, one line."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= MAX_TIMEOUT_MS:
        raise ConfigError(f"timeout_ms is {value!r}, not a whole number of milliseconds from 1 to {MAX_TIMEOUT_MS:,}",
                          "give e.g. timeout_ms=10000, or None for the default derived from the predicted time "
                          "(0 would mean no limit: XRT's wait(0) blocks until the run completes)")
    return int(value)


def run_limit(c: GemmConfig, files: XclbinFiles, call: CallPlan | None = None,
              timeout_ms: int | None = None, slow_end: SlowEnd | None = None) -> RunLimit:
    """The limit of one run of a call: `timeout_ms` if given (checked_timeout), else
    max(TIMEOUT_FLOOR_MS, TIMEOUT_FACTOR x slow_end's time for the call); without a slow_end, the floor."""
    timeout_ms = checked_timeout(timeout_ms)
    call = call or c.call
    predicted = 0.0 if slow_end is None else float(slow_end(c, call.problem))
    default = min(MAX_TIMEOUT_MS, max(TIMEOUT_FLOOR_MS, math.ceil(TIMEOUT_FACTOR * predicted * 1e3)))
    return RunLimit(default if timeout_ms is None else timeout_ms, c.suffix, str(call.problem), str(files.xclbin),
                    predicted * 1e6, timeout_ms is not None)


class NpuKernel:
    """The NPU with one xclbin registered and its kernel opened: loaded once, then run with any
    number of instruction streams and buffers (one per call size).

    XRT reports its failures as RuntimeError (a refused xclbin, no hardware context, a kernel that
    does not complete): each becomes one line, BuildError (exit 1), naming the step."""

    def __init__(self, xrt: ModuleType, xclbin_path: Path, family: str | None = None) -> None:
        # mlir-aie's `make run` exports this so that XRT loads an unsigned xclbin
        os.environ.setdefault(UNSECURE_XCLBIN, "1")
        try:
            self.device = xrt.device(0)
        except Exception as e:  # no /dev/accel: XRT raises RuntimeError
            raise ToolchainMissing(f"no NPU device is available to XRT ({e})", toolchain.XRT_INSTALL) from None
        self.xrt = xrt
        name = _xrt(lambda: str(self.device.get_info(xrt.xrt_info_device.name)), "read the NPU's name")
        found = npu_family(name)
        if family is not None and found is not None and found != family:
            raise ConfigError(f"this machine's NPU ({name}) is an {found}; the design is for an {family}",
                              f"use {opt('device', found)}")
        xclbin = _xrt(lambda: xrt.xclbin(str(xclbin_path)), f"load {xclbin_path}")
        names = [k.get_name() for k in xclbin.get_kernels()]
        kernel = next((n for n in names if n.startswith("MLIR_AIE")), names[0] if names else None)
        if kernel is None:
            raise ToolchainMissing(f"{xclbin_path} holds no kernel", "rebuild it with `gemm-gen build`")
        _xrt(lambda: self.device.register_xclbin(xclbin), f"register {xclbin_path} with the NPU")
        self.context = _xrt(lambda: xrt.hw_context(self.device, xclbin.get_uuid()), "create a hardware context")
        self.kernel = _xrt(lambda: xrt.kernel(self.context, kernel), f"open kernel {kernel}")


class NpuSession:
    """One call size on a loaded kernel: its instruction stream and its A, B, C buffers, ready to
    run again and again, each run within `limit`."""

    def __init__(self, xrt: ModuleType, art: XclbinFiles, a: np.ndarray, b: np.ndarray, c_bytes: int,
                 family: str | None = None, loaded: NpuKernel | None = None, *, limit: RunLimit) -> None:
        loaded = loaded or NpuKernel(xrt, art.xclbin, family)
        self.xrt, self.device, self.kernel, self.limit = xrt, loaded.device, loaded.kernel, limit
        self.insts = np.fromfile(art.insts, dtype=np.uint32)
        self.bo_instr = self._bo(self.insts, xrt.bo.cacheable, GROUP_INSTR)
        self.bo_a = self._bo(a, xrt.bo.host_only, GROUP_A)
        self.bo_b = self._bo(b, xrt.bo.host_only, GROUP_B)
        self.bo_c = self._bo(np.zeros(c_bytes, dtype=np.uint8), xrt.bo.host_only, GROUP_C)

    def _bo(self, data: np.ndarray, flags: Any, group: int) -> Any:
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        bo = self.xrt.bo(self.device, raw.nbytes, flags, self.kernel.group_id(group))
        np.frombuffer(bo.map(), dtype=np.uint8)[:] = raw
        bo.sync(self.xrt.xclBOSyncDirection.XCL_BO_SYNC_BO_TO_DEVICE)
        return bo

    def run(self) -> float:
        """One launch; microseconds from the call to its completion (as test.cpp times it). A run
        that does not complete within the limit: RunTimeout, one line."""
        start = time.perf_counter()
        handle = _xrt(lambda: self.kernel(OPCODE, self.bo_instr, self.insts.size, self.bo_a, self.bo_b, self.bo_c),
                      "start the kernel")
        state = _xrt(lambda: handle.wait(self.limit.timeout_ms), "wait for the kernel")
        elapsed = (time.perf_counter() - start) * 1e6
        if state == self.xrt.ert_cmd_state.ERT_CMD_STATE_TIMEOUT:
            raise self.limit.error()
        if state != self.xrt.ert_cmd_state.ERT_CMD_STATE_COMPLETED:
            raise BuildError(f"the NPU kernel ended in state {getattr(state, 'name', state)}",
                             "check `xrt-smi examine` and dmesg; rebuild with `gemm-gen build -v`")
        return elapsed

    def output(self) -> np.ndarray:
        self.bo_c.sync(self.xrt.xclBOSyncDirection.XCL_BO_SYNC_BO_FROM_DEVICE)
        return np.frombuffer(self.bo_c.map(), dtype=np.uint8).copy()


def _xrt(call: Any, what: str) -> Any:
    """One XRT call; its RuntimeError as one line naming the step."""
    try:
        return call()
    except RuntimeError as e:
        raise BuildError(f"XRT could not {what}: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
                         "check `xrt-smi examine`, the driver and the xclbin (GEMM_GEN_DEBUG=1 shows where)") from e


def expected_c(c: GemmConfig, received: tuple[np.ndarray, np.ndarray], call: CallPlan,
               epilogue: EpilogueArgs | None) -> np.ndarray:
    """The bit-exact reference C (float64) of the A and B values the NPU read, with the call's epilogue."""
    bias = None if epilogue is None else epilogue.bias
    requant = None if epilogue is None else kernel_requant(c.epilogue, epilogue.requant)
    numerics = replace(c.numerics, epilogue=c.epilogue.for_call(call.activation))  # a runtime build: the call's
    return reference(numerics, *received, c.tiling.k, call.k_walk, bias, requant).astype(np.float64)


def check_result(c: GemmConfig, got: np.ndarray, a: np.ndarray, b: np.ndarray,
                 dram: tuple[np.ndarray, np.ndarray] | None = None, inputs: str = "exact",
                 call: CallPlan | None = None, epilogue: EpilogueArgs | None = None,
                 b_exact: np.ndarray | None = None
                 ) -> tuple[int, int, int, Accuracy, tuple[int, int, float, float] | None]:
    """(checked, errors, exact, accuracy, first error): C against the bit-exact reference, and against
    the exact product of the inputs the NPU read (accuracy.measure), or of A and `b_exact` when given
    (W4A16: the float64 weights (q - z) s the user means, as simulate measures them).

    Integers, and floats computed from the "exact" input family (every partial sum exact in fp32, so
    the NPU's unpublished accumulation order cannot change a bit), must equal the exact reference.
    Floats from "wide" inputs must be within mlir-aie's tolerance of it; how many are bit-exact is
    reported either way. `epilogue`: the call's epilogue data (the reference applies it too).
    """
    call = call or c.call
    a_dram, b_dram = dram if dram is not None else pad_inputs(c, a, b, call, epilogue)  # the buffers the NPU read
    received = host_values(c, a_dram, b_dram, call)
    expect = expected_c(c, received, call, epilogue)
    g = got.astype(np.float64)
    if c.types.t_out.is_float and inputs != "exact":
        bad = np.abs(g - expect) > np.maximum(ABS_TOL, REL_TOL * np.abs(expect))
    else:
        bad = g != expect
    errors = int(np.count_nonzero(bad))
    first = None
    if errors:
        i, j = (int(x) for x in np.argwhere(bad)[0])
        first = (i, j, float(g[i, j]), float(expect[i, j]))
    accuracy = (measure_accuracy(got, *received, c.numerics) if b_exact is None
                else measure_accuracy(got, a, b_exact, c.numerics))
    return int(g.size), errors, int(np.count_nonzero(g == expect)), accuracy, first


def run_design(c: GemmConfig, art: Artifacts, iters: int = 10, warmup: int = 1, seed: int = 0,
               xrt: ModuleType | None = None, inputs: str = "exact", timeout_ms: int | None = None,
               slow_end: SlowEnd | None = None) -> RunResult:
    """Load, run `warmup` + `iters` times (each within run_limit's time), check the last result, and
    report the timings."""
    xrt = xrt or toolchain.pyxrt()
    return _run_call(c, c.call, art, xrt, None, iters, warmup, seed, inputs, timeout_ms, slow_end)


def run_calls(c: GemmConfig, calls: list[tuple[CallPlan, XclbinFiles]], iters: int = 10, warmup: int = 1,
              seed: int = 0, xrt: ModuleType | None = None, inputs: str = "exact",
              timeout_ms: int | None = None, slow_end: SlowEnd | None = None) -> list[RunResult]:
    """Several call sizes of one design: its xclbin loaded once, each size run with its own
    instruction stream and buffers, checked and timed like run_design."""
    xrt = xrt or toolchain.pyxrt()
    loaded = NpuKernel(xrt, calls[0][1].xclbin, c.array.device)
    for _, files in calls:
        if files.xclbin != calls[0][1].xclbin:
            raise ConfigError(f"{files.xclbin} is another xclbin than {calls[0][1].xclbin}",
                              "run one design's sizes together")
    return [_run_call(c, call, files, xrt, loaded, iters, warmup, seed, inputs, timeout_ms, slow_end)
            for call, files in calls]


def _run_call(c: GemmConfig, call: CallPlan, files: XclbinFiles, xrt: ModuleType, loaded: NpuKernel | None,
              iters: int, warmup: int, seed: int, inputs: str, timeout_ms: int | None,
              slow_end: SlowEnd | None) -> RunResult:
    p = call.problem
    a, b = make_inputs(p.M, p.K, p.N, c.types.t_in, c.types.t_out, seed, c.types.t_b, family=inputs)
    epilogue = seeded_args(c.epilogue, c.types.t_out, a, b, seed)  # as `simulate` draws them
    # W4A16: q with the scales (and zero points) `simulate` draws; the reference reads the weights back
    weights = group_weights(b, c.groups.group_size, c.groups.zero_points, seed) if c.groups.group_size else None
    a_pad, b_pad = pad_inputs(c, a, b if weights is None else weights, call, epilogue)
    (a_buf, b_buf), c_bytes = with_slack(c, call, a_pad, b_pad)  # the reads past a matrix stay in its buffer
    session = NpuSession(xrt, files, a_buf, b_buf, c_bytes, c.array.device, loaded,
                         limit=run_limit(c, files, call, timeout_ms, slow_end))
    for _ in range(warmup):
        session.run()
    times = [session.run() for _ in range(max(iters, 1))]
    got = output_values(c, session.output(), call)
    checked, errors, exact, accuracy, first = check_result(c, got, a, b, (a_pad, b_pad), inputs, call, epilogue,
                                                           None if weights is None else weights.exact())
    notes = []
    if errors:  # whether C's errors are its r x t blocks' values at permuted places (the mmul's lane order)
        want = expected_c(c, host_values(c, a_pad, b_pad, call), call, epilogue)
        notes.append(lane_note(got, want, c.kernel.mmul[0], c.kernel.mmul[2]))
    return RunResult(c, times, checked, errors, exact, accuracy, first, notes, problem=None if call == c.call else p)


def measure(c: GemmConfig, iters: int = 10, warmup: int = 1, build_dir: str = "build",
            slow_end: SlowEnd | None = None) -> float:
    """Build (if needed) and run a config; mean seconds per run. The tuner's --measure uses this."""
    design = build_design(c)
    xrt = toolchain.pyxrt()  # before building: no XRT, no point
    art = artifacts(design, Path(build_dir))
    if not is_current(art, design):
        art = run_build(design, Path(build_dir), gen_args=[])
    result = run_design(c, art, iters, warmup, xrt=xrt, slow_end=slow_end)
    return sum(result.times_us) / len(result.times_us) / 1e6
