"""The hardware path: IRON lowering, kernel + aiecc build, XRT runner (toolchain imported lazily)."""

from __future__ import annotations

from .runner import measure

__all__ = ["measure"]
