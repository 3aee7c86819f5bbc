"""estimate(design): the model on one built Design, the one way a chosen design is priced.

Everything it prices is a fact the Design's build stored (design/build.py): the kernel record (its epilogue), the
shim traffic of its runtime sequence, its task groups and tasks per group, and its L1 plan (the bank stalls).
The tuner ranks a space of tilings with the vectorised model/perf.estimate instead: no Design per candidate.
"""

from __future__ import annotations

from ..design.ir import Design
from ..facts.epilogue import Epilogue
from .params import Params, load
from .perf import Estimate, Workload, priced
from .traffic import design_traffic


def estimate(design: Design, params: Params | None = None, epilogue: Epilogue | None = None) -> Estimate:
    """The predicted time of `design` under `params` (default: the calibrated constants). `epilogue`: what-if
    only, the same design with another fused epilogue priced in its kernel's place (predict asks it of each
    activation a runtime activation serves: a build of that activation alone)."""
    c = design.config
    p = params or load()
    pr = Workload.of(c, epilogue=design.build.epilogue if epilogue is None else epilogue)
    return priced(pr, c, p, design_traffic(design), design.tasks_per_group, design.l1, design.task_groups)

