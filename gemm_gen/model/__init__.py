"""Analytical performance model and tuner for whole-array GEMM designs (issue 4).

Everything here is a prediction: see docs/model.md for the equations, the parameters with their
sources, and the model-versus-paper table.
"""

from __future__ import annotations

from .params import Params, load
from .perf import Estimate, Workload, estimate
from .predict import predict

__all__ = ["Estimate", "Params", "Workload", "estimate", "load", "predict"]
