"""Find the NPU toolchain (mlir-aie, Peano or xchesscc, XRT) or say in one sentence what is missing.

Nothing here imports a toolchain package at module import time: each finder imports or looks up
its tool when asked, and raises ToolchainMissing naming the tool and how to install it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from ..facts.errors import ToolchainMissing
from . import pins

MLIR_AIE_INSTALL = pins.MLIR_AIE.install
PEANO_INSTALL = f"{pins.PEANO.install}, and set PEANO_INSTALL_DIR (or let mlir-aie find the wheel)"
XRT_INSTALL = pins.XRT.install


def import_module(name: str, what: str, how: str) -> ModuleType:
    """Import a toolchain module or raise ToolchainMissing (one sentence: what, and how to get it)."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise ToolchainMissing(f"{what} cannot be imported (`import {name}`: {e.msg})", how) from None


def mlir_aie_dir() -> Path:
    """mlir-aie's install root (MLIR_AIE_DIR, as mlir-aie's Makefiles compute it)."""
    if os.environ.get("MLIR_AIE_DIR"):
        return Path(os.environ["MLIR_AIE_DIR"])
    config = import_module("aie.utils.config", "mlir-aie", MLIR_AIE_INSTALL)
    try:
        return Path(config.root_path())
    except Exception as e:  # noqa: BLE001 - a broken install: one sentence, not a traceback
        raise ToolchainMissing(f"mlir-aie is installed but cannot say where (aie.utils.config.root_path(): {e})",
                               MLIR_AIE_INSTALL) from None


def mlir_aie_tool(name: str) -> str | None:
    """A tool the mlir-aie wheel ships, found as mlir-aie finds it: <install root>/bin (the wheel's
    site-packages/mlir_aie/bin, which its utils/env_setup.sh puts on PATH), next to this Python (a
    venv's console scripts), then PATH."""
    roots: list[Path] = []
    try:
        roots.append(mlir_aie_dir() / "bin")
    except ToolchainMissing:
        pass
    roots.append(Path(sys.executable).parent)
    for root in roots:
        if (root / name).is_file() and os.access(root / name, os.X_OK):
            return str(root / name)
    return shutil.which(name)


def aiecc() -> str:
    """mlir-aie 1.4.x's C++ compiler driver: AIECC_PATH (mlir-aie's own override), else where the
    wheel keeps it."""
    found = os.environ.get("AIECC_PATH") or mlir_aie_tool("aiecc")
    if not found:
        raise ToolchainMissing("aiecc (mlir-aie's compiler driver) is neither in mlir-aie's bin directory nor on "
                               "PATH", MLIR_AIE_INSTALL)
    return found


def xclbinutil() -> str:
    found = shutil.which("xclbinutil")  # aiecc --get-xclbin calls it; the mlir-aie wheel does not ship it
    if not found:
        raise ToolchainMissing("xclbinutil (XRT's xclbin packager, which aiecc needs) is not on PATH",
                               "source /opt/xilinx/xrt/setup.sh")
    return found


def peano_dir() -> Path:
    """Peano's install root: PEANO_INSTALL_DIR, else mlir-aie's record of it, else the llvm-aie wheel."""
    candidates: list[Path] = []
    if os.environ.get("PEANO_INSTALL_DIR"):
        candidates.append(Path(os.environ["PEANO_INSTALL_DIR"]))
    try:
        candidates.append(Path(importlib.import_module("aie.utils.config").peano_install_dir()))
    except Exception:  # noqa: BLE001 - mlir-aie absent or without a recorded Peano
        pass
    try:  # the wheel installs into site-packages/llvm-aie (mlir-aie's utils/env_setup.sh)
        candidates.append(Path(str(importlib.metadata.distribution("llvm-aie").locate_file("llvm-aie"))))
    except importlib.metadata.PackageNotFoundError:
        pass
    for root in candidates:
        if (root / "bin" / "clang++").exists():
            return root
    where = f" (no bin/clang++ under {', '.join(map(str, candidates))})" if candidates else ""
    raise ToolchainMissing(f"Peano, the AIE clang++, is not installed{where}", PEANO_INSTALL)


CHESS_INSTALL = "install Vitis AIE Essentials with its license (xchesscc on PATH), or build with Peano (CHESS=0)"


def xchesscc() -> str:
    """mlir-aie's xchesscc_wrapper; it calls the real xchesscc, which must be on PATH too."""
    wrapper = mlir_aie_tool("xchesscc_wrapper")
    if not wrapper:
        raise ToolchainMissing("xchesscc_wrapper (mlir-aie's chess wrapper) is neither in mlir-aie's bin directory "
                               "nor on PATH", MLIR_AIE_INSTALL)
    if not shutil.which("xchesscc"):
        raise ToolchainMissing("xchesscc (the chess compiler) is not on PATH", CHESS_INSTALL)
    return wrapper


def aietools_dir() -> Path:
    """AIETOOLS_DIR, else the aietools root above xchesscc (as mlir-aie's makefile-common finds it)."""
    if os.environ.get("AIETOOLS_DIR"):
        return Path(os.environ["AIETOOLS_DIR"])
    chess = shutil.which("xchesscc")
    if not chess:
        raise ToolchainMissing("xchesscc (the chess compiler) is not on PATH", CHESS_INSTALL)
    return Path(chess).resolve().parent.parent


def pyxrt() -> ModuleType:
    return import_module("pyxrt", "XRT's Python bindings", XRT_INSTALL)


@dataclass(frozen=True)
class Toolchain:
    """Where the build tools are; a missing one reads as an environment variable placeholder."""

    mlir_aie_dir: str
    peano_dir: str
    aietools_dir: str
    aiecc: str
    chess: bool

    @property
    def kernel_cc(self) -> str:
        return "xchesscc_wrapper" if self.chess else f"{self.peano_dir}/bin/clang++"


def find_toolchain(chess: bool, strict: bool) -> Toolchain:
    """The tools a build needs. strict: raise ToolchainMissing for the first missing one (before
    anything is written); otherwise fill in $VARIABLE placeholders, for --dry-run."""

    def look(finder, placeholder: str) -> str:  # type: ignore[no-untyped-def]
        try:
            return str(finder())
        except ToolchainMissing:
            if strict:
                raise
            return placeholder

    if chess:
        peano = "$PEANO_INSTALL_DIR"
        look(xchesscc, "xchesscc_wrapper")
        aietools = look(aietools_dir, "$AIETOOLS_DIR")
    else:
        peano = look(peano_dir, "$PEANO_INSTALL_DIR")
        aietools = "$AIETOOLS_DIR"
    mlir_aie = look(mlir_aie_dir, "$MLIR_AIE_DIR")
    driver = look(aiecc, "aiecc")
    look(xclbinutil, "xclbinutil")
    return Toolchain(mlir_aie, peano, aietools, driver, chess)
