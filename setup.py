"""The package's build step beyond pyproject.toml: the kernel templates and header go into the wheel.

They live at the repository's top level (templates/, kernels/: the layout the project keeps, next to the
package), and a checkout or an editable install reads them there. A plain `pip install .` copies them into the
installed package as gemm_gen/backends/kernel_source/data/{templates,include}, which
gemm_gen/backends/kernel_source/paths.py reads first
(issue 32 item 7). Everything else about the package is in pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
# top-level directory -> its place inside the installed package, and the files taken from it (paths.py's DATA)
DATA = {"templates": ("gemm_gen/backends/kernel_source/data/templates", "*.j2"),
        "kernels": ("gemm_gen/backends/kernel_source/data/include", "*.h")}


class BuildPyWithKernelData(build_py):
    """build_py, then the templates and the kernel header copied into the build tree (sorted: the same wheel
    from the same checkout)."""

    def run(self) -> None:
        super().run()
        for source, (target, pattern) in DATA.items():
            out = Path(self.build_lib) / target
            out.mkdir(parents=True, exist_ok=True)
            for path in sorted((ROOT / source).glob(pattern)):
                shutil.copyfile(path, out / path.name)


# setuptools' own build tree stays out of build/, which holds the designs gemm-gen generates
setup(cmdclass={"build_py": BuildPyWithKernelData}, options={"build": {"build_base": ".setuptools-build"}})
