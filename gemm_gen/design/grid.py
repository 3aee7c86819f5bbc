"""One operand's sizes in its DMA units: the numbers its access patterns are written in (the Grid itself
and how it is computed live in spec/rules/walks.py, which the search space calls with every candidate at once).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..spec.call import CallPlan
from ..spec.rules import walks
from ..spec.rules.walks import OPERANDS, Grid

if TYPE_CHECKING:
    from ..spec.config import GemmConfig  # annotations only: the config does not import the design

__all__ = ["OPERANDS", "Grid", "grid"]


def grid(c: GemmConfig, operand: str, call: CallPlan | None = None) -> Grid:
    """The sizes of operand A, B or C of `c` in that operand's DMA units, for one call (default:
    the problem `c` was made for)."""
    return walks.grid(c.walk_options, operand, c.tiling.m, c.tiling.k, c.tiling.n, c.tiling.k_mt, c.tiling.rho,
                      call or c.call)
