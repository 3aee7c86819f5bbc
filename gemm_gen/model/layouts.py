"""What each operand layout costs one design: its tiling priced in the layouts a caller could ask
instead (PREDICTIONS): the design's own, each operand flipped, and all row-major.

A layout its xclbin fixes (spec/rules/call_layouts.py) is priced as the design built in that layout
(another xclbin: its memtile walks, its DRAM runs, its kernel's transposes, model/kernel.py); a
32-bit C in the other layout is priced on this very xclbin, from the call's own runtime sequence
(the shim's element-by-element drain: one DRAM run per element). A layout the same tiling cannot be
built in is listed with the one-line reason.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..design import build_design
from ..design.build import for_call
from ..design.ir import Design
from ..design.serve import built_layouts, serve
from ..facts.errors import ConfigError, GemmGenError
from ..spec.config import GemmConfig
from ..spec.request import Problem
from ..spec.rules.call_layouts import OPERANDS, Layouts, per_call
from .kernel import cluster_terms
from .params import Params, load
from .perf import Workload
from .price import estimate

THIS = "this design"
SAME_XCLBIN = "this xclbin, C stored by the shim in the other layout"
OTHER_XCLBIN = "another xclbin, same tiling"


@dataclass(frozen=True)
class LayoutPrice:
    """One layout of the design's tiling: where it runs and what it is predicted to cost."""

    layouts: Layouts
    xclbin: str  # THIS, SAME_XCLBIN or OTHER_XCLBIN
    time_s: float | None  # None: not buildable in this layout (refused says why)
    tops: float | None
    dram_run_bytes: dict[str, float]  # mean contiguous DRAM run per tensor
    a_transposes_per_round: float  # the kernel's vector-slot shuffles (uncalibrated, model/kernel.py)
    c_transposes_per_cluster: float
    refused: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"layouts": str(self.layouts), "describe": self.layouts.describe(), "xclbin": self.xclbin,
                "predicted_time_us": None if self.time_s is None else self.time_s * 1e6,
                "predicted_tops": self.tops, "dram_run_bytes": self.dram_run_bytes,
                "kernel_transposes": {"a_shuffles_per_round": self.a_transposes_per_round,
                                      "c_shuffles_per_cluster": self.c_transposes_per_cluster,
                                      "calibrated": False},
                "refused": self.refused}


def _flip(lay: Layouts, operand: str) -> Layouts:
    field = f"{operand.lower()}_col_maj"
    return replace(lay, **{field: not getattr(lay, field)})


def candidates(own: Layouts) -> tuple[Layouts, ...]:
    """The design's layouts, each operand flipped, and all row-major (each once, in that order)."""
    return tuple(dict.fromkeys([own, *(_flip(own, op) for op in OPERANDS), Layouts()]))


def layout_prices(c: GemmConfig, params: Params | None = None) -> tuple[LayoutPrice, ...]:
    """The design's tiling priced in each of `candidates` (the first is the design itself); a 32-bit
    C in the other layout twice: on this xclbin (the shim stores it) and built that way."""
    p = params or load()
    own = built_layouts(c)
    types = {"A": c.types.t_in, "B": c.types.t_b, "C": c.types.t_out}
    out = []
    for lay in candidates(own):
        shim = lay != own and all(lay.col_maj(op) == own.col_maj(op) or per_call(op, types[op]) for op in OPERANDS)
        for where in ((SAME_XCLBIN, OTHER_XCLBIN) if shim else (THIS if lay == own else OTHER_XCLBIN,)):
            out.append(_price(c, lay, where, p))
    return tuple(out)


def _price(c: GemmConfig, lay: Layouts, where: str, p: Params) -> LayoutPrice:
    """One layout of c's tiling: on c's xclbin with the call's own instruction stream, or built so."""
    priced = c if where != OTHER_XCLBIN else c.with_(a_col_maj=lay.a_col_maj, b_col_maj=lay.b_col_maj,
                                                      c_col_maj=lay.c_col_maj)
    try:
        design = _built(priced, where)
        if where == SAME_XCLBIN:
            design = for_call(design, serve(c, Problem(c.size.M, c.size.K, c.size.N), lay))
        e = estimate(design, p)
    except GemmGenError as err:
        return LayoutPrice(lay, where, None, None, {}, 0.0, 0.0, err.what)
    b = design.build
    terms = {} if b.block_kernel else cluster_terms(p, Workload.of(priced).kernel_shape, b.expansion)
    return LayoutPrice(lay, where, float(e.time), float(e.tops),
                       {name: float(t.run_bytes) for name, t in e.traffic.items()},
                       float(terms.get("a_transposes", 0.0)), float(terms.get("c_transposes", 0.0)))


def _built(c: GemmConfig, where: str) -> Design:
    """The Design to price: one that breaks only an L1 or memtile budget is priced as if it fitted
    when it is the design asked about (as model/predict.py does), and refused as an alternative."""
    try:
        return build_design(c)
    except ConfigError:
        if where != THIS:
            raise
        return build_design(c, budgets=False)


def cheapest(prices: tuple[LayoutPrice, ...]) -> LayoutPrice | None:
    """The predicted fastest of the priced layouts (the design's own on a tie); None if none is."""
    return min((x for x in prices if x.time_s is not None), key=lambda x: (x.time_s or 0.0, x.xclbin != THIS),
               default=None)
