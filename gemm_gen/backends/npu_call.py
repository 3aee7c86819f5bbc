"""One GEMM call on the NPU for the operator API: the cached xclbin, the call's instruction
stream (built once per size beside it), buffers with their slack, and C back."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np

from ..call import CallPlan
from ..design.model import Design
from ..hostdata import output_values, pad_inputs, with_slack
from . import cache, toolchain


@dataclass(frozen=True)
class CallFiles:
    """The xclbin a design built into, and the instruction stream of one call."""

    xclbin: Path
    insts: Path


def is_built(design: Design) -> bool:
    """Whether the design's xclbin is in the build cache, current."""
    from .build import artifacts, is_current

    return is_current(artifacts(design, cache.entry_dir(design)), design)


def call_files(design: Design, call: CallPlan, verbose: bool = False) -> CallFiles:
    """Build the design into its cache entry unless it is there and current, and the call's
    instruction stream unless it is there (the xclbin is never rebuilt for another size)."""
    from ..cliargs import config_args
    from .build import artifacts, is_current, run_build, run_insts_build

    entry = cache.entry_dir(design)
    art = artifacts(design, entry)
    if not is_current(art, design):
        art = run_build(design, entry, gen_args=config_args(design.config), verbose=verbose)
        cache.write_meta(design, entry)
    if call == design.config.call:
        return CallFiles(art.xclbin, art.insts)
    insts = entry / f"insts_{call.problem}.bin"
    if not insts.exists():
        run_insts_build(design, call, entry, insts, verbose)
    return CallFiles(art.xclbin, insts)


def run_on_npu(design: Design, call: CallPlan, a: np.ndarray, b: np.ndarray, xrt: ModuleType | None = None
               ) -> np.ndarray:
    """C of one call on the NPU."""
    from .runner import NpuSession

    xrt = xrt or toolchain.pyxrt()  # no XRT: one line, before anything is built
    files = call_files(design, call)
    c = design.config
    (a_buf, b_buf), c_bytes = with_slack(c, call, *pad_inputs(c, a, b, call))
    session = NpuSession(xrt, files, a_buf, b_buf, c_bytes, c.device)
    session.run()
    return output_values(c, session.output(), call).copy()

