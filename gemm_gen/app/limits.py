"""The default time limit of an NPU run, derived from the model here in the application layer (the
back ends do not import the model): the runner takes `slow_end_s` as its SlowEnd."""

from __future__ import annotations

from ..backends import runner
from ..model.params import load_ends
from ..model.perf import estimate_config
from ..spec.call import CallPlan
from ..spec.config import GemmConfig
from ..spec.request import Problem


def slow_end_s(c: GemmConfig, size: Problem) -> float:
    """Seconds the model predicts for one call of `c` at `size`, at the slow end of its constants'
    spreads: the runner's default limit is max(2 s, 100 x this) (backends/runner.py says why). The closed form
    of the config at that size: the runner holds a config, not a Design, and a bound needs no built sequence."""
    slow, _ = load_ends()
    return float(estimate_config(c, slow, call=size).time)


def run_limit(c: GemmConfig, files: runner.XclbinFiles, call: CallPlan | None = None,
              timeout_ms: int | None = None) -> runner.RunLimit:
    """runner.run_limit with the model's prediction: what `gemm-gen run` and the operator wait."""
    return runner.run_limit(c, files, call, timeout_ms, slow_end_s)


def measure(c: GemmConfig, iters: int = 10, warmup: int = 1) -> float:
    """Build (if needed) and run `c` on the NPU, each run within the model-derived limit: mean seconds
    per run (what `gemm-gen tune --measure` ranks by)."""
    return runner.measure(c, iters, warmup, slow_end=slow_end_s)
