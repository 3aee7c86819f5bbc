"""The hardware path: IRON lowering, kernel + aiecc build, XRT runner (toolchain imported lazily)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import GemmConfig


def measure(config: GemmConfig, iters: int = 10, warmup: int = 1) -> float:
    """Build (if needed) and run `config` on the NPU: mean seconds per run (ToolchainMissing if absent)."""
    from .runner import measure as _measure

    return _measure(config, iters, warmup)


__all__ = ["measure"]
