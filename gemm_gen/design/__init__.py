"""The Design: pure data built from a GemmConfig, read by every back end."""

from .build import build_design
from .ir import Design

__all__ = ["Design", "build_design"]
