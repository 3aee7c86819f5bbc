"""Functional simulator: runs a Design's DMAs, locks, cores and runtime sequence on NumPy data."""

from .run import SimResult, simulate

__all__ = ["SimResult", "simulate"]
