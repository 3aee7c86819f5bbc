"""Whether a config can be built and which calls it serves: its own rules, then every DMA pattern
of each call against the DMA that runs it."""

from __future__ import annotations

from ..facts.errors import ConfigError, opt
from ..spec.call import CallPlan, plan_call
from ..spec.checks import check_config
from ..spec.config import GemmConfig
from ..spec.request import Problem
from ..spec.rules.call_layouts import Layouts, served
from ..spec.rules.padding import same_k_walk
from .ir import Design
from .patterns import check_dma_limits

SERVED = {"fixed": "only its own size", "mn": "any M and N up to its own with the same K walk",
          "mnk": "any M, K and N up to its own (k-steps from a runtime parameter each call writes)"}


def check(config: GemmConfig, budgets: bool = True) -> GemmConfig:
    """Raise ConfigError / DmaLimitError naming the first broken limit; return the config if fine.
    budgets=False skips the L1 and memtile capacity checks (checks.check_config)."""
    check_config(config, budgets)
    check_dma_limits(config)  # the patterns need a valid tiling first
    return config


def built_layouts(c: GemmConfig) -> Layouts:
    """The layouts a config is built with (what its own calls use)."""
    return Layouts(c.layout.a_col_maj, c.layout.b_col_maj, c.layout.c_col_maj)


def serve(config: GemmConfig, problem: Problem, layouts: Layouts | None = None) -> CallPlan:
    """How a built design computes `problem` with operands in `layouts` (default: the design's);
    ConfigError when it cannot serve it (a size it is not built for, or a layout its xclbin fixes
    otherwise: spec/rules/call_layouts.py)."""
    c = config
    build = built_layouts(c)
    lay = served(build, layouts or build, {"A": c.types.t_in, "B": c.types.t_b, "C": c.types.t_out})
    if problem == Problem(c.size.M, c.size.K, c.size.N) and lay == build:
        return c.call
    served_sizes = SERVED[c.runtime.runtime_sizes]
    if c.runtime.runtime_sizes == "fixed" and problem != Problem(c.size.M, c.size.K, c.size.N):
        raise ConfigError(f"{problem} is not {c.size.M}x{c.size.K}x{c.size.N}, and this design serves {served_sizes}",
                          f"build with {opt('sizes')} to serve several sizes with one xclbin")
    fix = f"build the design for the largest size ({opt('sizes')} lists them all)"
    for name, value, limit in (("M", problem.M, c.size.M), ("K", problem.K, c.size.K), ("N", problem.N, c.size.N)):
        if value > limit:
            raise ConfigError(f"{name}={value} > {limit} this design serves ({served_sizes})", fix)
    call = plan_call(c, problem, c_col_maj=lay.c_col_maj)
    if c.runtime.runtime_sizes == "mn" and not same_k_walk(problem.K, c.size.K, c.tiling.k_mt):
        raise ConfigError(f"K={problem.K} needs {call.k_walk // c.tiling.k} k-steps per output tile, and this "
                          f"design's cores take exactly {c.call.k_steps} ({served_sizes})",
                          "build with runtime sizes mnk (k-steps as a runtime parameter)")
    check_dma_limits(c, call)
    return call


def xclbin_part(design: Design) -> tuple[object, ...]:
    """What the xclbin fixes of a Design: its fifos (the memtile and core access patterns), links,
    kernels, worker programs and buffer placements; not its runtime sequence or host tensors,
    which each call writes (spec/rules/call_layouts.py)."""
    return (design.fifos, design.links, design.kernels, design.workers, design.memtile_buffers, design.l1)
