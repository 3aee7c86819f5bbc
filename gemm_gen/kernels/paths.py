"""Where the kernel templates and the shared kernel headers live.

They sit at the repository's top level (templates/, kernels/), next to the package: gemm_gen is
used from a checkout or an editable install, so they are found relative to this file.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import GemmGenError

REPO_ROOT = Path(__file__).resolve().parents[2]


def _existing(path: Path, what: str) -> Path:
    if not path.is_dir():
        raise GemmGenError(f"the {what} directory {path} is missing",
                           "use gemm_gen from a checkout of its repository (pip install -e .)")
    return path


def templates_dir() -> Path:
    """The directory of the Jinja kernel templates (mm.cc.j2)."""
    return _existing(REPO_ROOT / "templates", "kernel template")


def kernel_include_dir() -> Path:
    """The directory to pass with -I when compiling a rendered kernel (gemm_gen_kernel.h)."""
    return _existing(REPO_ROOT / "kernels", "kernel header")
