"""Whether a config can be built and which calls it serves: its own rules, then every DMA pattern
of each call against the DMA that runs it."""

from __future__ import annotations

from ..call import CallPlan, plan_call
from ..checks import check_config
from ..config import GemmConfig
from ..errors import ConfigError
from ..spec import Problem
from .patterns import check_dma_limits

SERVED = {"fixed": "only its own size", "mn": "any M and N up to its own with the same K walk",
          "mnk": "any M, K and N up to its own (k-steps from a runtime parameter each call writes)"}


def check(config: GemmConfig, budgets: bool = True) -> GemmConfig:
    """Raise ConfigError / DmaLimitError naming the first broken limit; return the config if fine.
    budgets=False skips the L1 and memtile capacity checks (checks.check_config)."""
    check_config(config, budgets)
    check_dma_limits(config)  # the patterns need a valid tiling first
    return config


def serve(config: GemmConfig, problem: Problem) -> CallPlan:
    """How a built design computes `problem`; ConfigError when it cannot serve it."""
    c = config
    if problem == Problem(c.M, c.K, c.N):
        return c.call
    served = SERVED[c.runtime_sizes]
    if c.runtime_sizes == "fixed":
        raise ConfigError(f"{problem} is not {c.M}x{c.K}x{c.N}, and this design serves {served}",
                          "build with --runtime-sizes to serve several sizes with one xclbin")
    fix = "build the design for the largest size (--runtime-sizes lists them all)"
    for name, value, limit in (("M", problem.M, c.M), ("K", problem.K, c.K), ("N", problem.N, c.N)):
        if value > limit:
            raise ConfigError(f"{name}={value} > {limit} this design serves ({served})", fix)
    call = plan_call(c, problem)
    if c.runtime_sizes == "mn" and call.k_walk != c.call.k_walk:
        raise ConfigError(f"K={problem.K} needs {call.k_walk // c.k} k-steps per output tile, and this "
                          f"design's cores take exactly {c.call.k_steps} ({served})",
                          "build with runtime sizes mnk (k-steps as a runtime parameter)")
    check_dma_limits(c, call)
    return call
