"""The hardware path: IRON lowering, kernel + aiecc build, XRT runner (toolchain imported lazily)."""

from __future__ import annotations

from typing import Any

__all__ = ["measure"]


def __getattr__(name: str) -> Any:
    # the runner is loaded when asked for: importing a module of this package (a kernel's renderer, the cache)
    # does not load the runner and the design builder behind it
    if name == "measure":
        from .runner import measure

        return measure
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
