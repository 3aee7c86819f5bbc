"""gemm_gen: generate, check and model whole-array GEMM designs for AMD Ryzen AI NPUs.

Quick start in Python (Gemm: C = A @ B on your NumPy arrays)::

    import numpy as np
    from gemm_gen import Gemm

    g = Gemm(device="npu1", dtype_in="i8", dtype_out="i32")
    A = np.ones((64, 256), np.int8)
    B = np.ones((256, 64), np.int8)
    C = g.simulate(A, B)   # any machine: the functional simulator, checked against A @ B
    C = g(A, B)            # an NPU with mlir-aie and XRT: build (cached), run, return C

On the command line (`make install` puts it in .venv/bin: `source .venv/bin/activate` first)::

    gemm-gen plan --dev npu2 -M 512 -K 512 -N 512       # the design: tiling, budgets, BDs
    gemm-gen simulate --dev npu2 -M 512 -K 512 -N 512   # simulate it and check every output
    gemm-gen --help                                     # every command

or through make: `make sim DEVICE=npu2 M=512 K=512 N=512`.

Underneath: a Request (the Options a user gives, the Problem size, the Pins of the tiling) goes
through `choose` (the search: the rules' space of tilings ranked by the model) to a GemmConfig, every
number of a design; build_design turns it into the Design that the simulator, the performance model
and the IRON lowering all read::

    from gemm_gen import Options, Problem, Request, build_design, choose

    chosen = choose(Request(Options("npu2", "i8", "i16"), Problem(1024, 1024, 1024)))
    design = build_design(chosen.config)   # chosen.filled names what the search chose
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .version import __version__

if TYPE_CHECKING:  # what the names below are, for type checkers; at run time each loads when first used
    from .app.linear import Linear
    from .app.operator import Gemm
    from .design import Design, build_design
    from .search import Choice, choose
    from .spec.config import GemmConfig
    from .spec.request import Options, Pins, Problem, Request, Tiling

# The front door's names and the modules that define them. Each loads when first asked for (PEP 562), so that
# `import gemm_gen.app.cli` (every `gemm-gen` command) does not pay for the operator, the simulator and the back
# ends before it parses its flags (issue 33 item 3); `from gemm_gen import Gemm` works as before.
EXPORTS = {"Gemm": "app.operator", "Linear": "app.linear", "GemmConfig": "spec.config", "Design": "design",
           "build_design": "design", "Choice": "search", "choose": "search", "Options": "spec.request",
           "Pins": "spec.request", "Problem": "spec.request", "Request": "spec.request", "Tiling": "spec.request"}

__all__ = ["Choice", "Design", "Gemm", "GemmConfig", "Linear", "Options", "Pins", "Problem", "Request", "Tiling",
           "__version__", "build_design", "choose"]


def __getattr__(name: str) -> Any:
    if name not in EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{EXPORTS[name]}"), name)
    globals()[name] = value  # found once: later reads do not come back here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *EXPORTS})
