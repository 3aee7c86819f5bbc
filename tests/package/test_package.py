"""A newcomer's first steps: `from gemm_gen import Gemm` works, `help(gemm_gen)` names it, and the
quick start in the package's docstring runs as written (on the simulator)."""

from __future__ import annotations

import pydoc
import re
import subprocess
import sys

import numpy as np

import gemm_gen


def test_gemm_is_importable_from_the_package():
    from gemm_gen import Gemm
    from gemm_gen.app.operator import Gemm as OperatorGemm

    assert Gemm is OperatorGemm and "Gemm" in gemm_gen.__all__


def test_help_names_gemm_and_the_cli():
    text = pydoc.render_doc(gemm_gen, renderer=pydoc.plaintext)
    assert "from gemm_gen import Gemm" in text and "gemm-gen simulate" in text and "source .venv/bin/activate" in text
    assert re.search(r"^\s+class Gemm\b", text, re.M)  # listed with the package's classes too


def test_the_quick_start_runs_as_written():
    """The docstring's Python lines, minus the NPU call, equal A @ B."""
    block = gemm_gen.__doc__.split("::", 1)[1].split("On the command line")[0]
    lines = [line.split("#")[0].strip() for line in block.splitlines() if "g(A, B)" not in line]
    scope: dict[str, object] = {}
    exec("\n".join(lines), scope)  # noqa: S102 - our own docstring
    A, B, C = (np.asarray(scope[name]) for name in "ABC")
    assert np.array_equal(C, A.astype(np.int64) @ B.astype(np.int64))


def test_importing_the_package_imports_no_toolchain():
    """Gemm comes with the package; the NPU toolchain and plotting stay lazy."""
    code = ("import sys, gemm_gen; bad = [m for m in ('aie', 'pyxrt', 'matplotlib', 'jinja2') if m in sys.modules];"
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
