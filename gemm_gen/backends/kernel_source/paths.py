"""Where the kernel templates and the shared kernel header live.

In the repository they sit at the top level (templates/, kernels/), next to the package, and a checkout or an
editable install reads them there. A plain `pip install .` copies them into the installed package
(gemm_gen/backends/kernel_source/data/, setup.py's build step), which is looked at first.
"""

from __future__ import annotations

from pathlib import Path

from ...facts.errors import GemmGenError

PACKAGE_DATA = Path(__file__).resolve().parent / "data"  # the installed copy (setup.py's DATA)
REPO_ROOT = Path(__file__).resolve().parents[3]  # a checkout or an editable install


def _first_existing(what: str, *places: Path) -> Path:
    for path in places:
        if path.is_dir():
            return path
    raise GemmGenError(f"the {what} directory is missing (looked in {', '.join(str(p) for p in places)})",
                       "reinstall gemm_gen (pip install .) or use it from a checkout of its repository")


def templates_dir() -> Path:
    """The directory of the Jinja kernel templates (mm.cc.j2)."""
    return _first_existing("kernel template", PACKAGE_DATA / "templates", REPO_ROOT / "templates")


def kernel_include_dir() -> Path:
    """The directory to pass with -I when compiling a rendered kernel (gemm_gen_kernel.h)."""
    return _first_existing("kernel header", PACKAGE_DATA / "include", REPO_ROOT / "kernels")
