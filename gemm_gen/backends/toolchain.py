"""Find the NPU toolchain (mlir-aie, Peano or xchesscc, XRT) or say in one sentence what is missing.

Nothing here imports a toolchain package at module import time: each finder imports or looks up
its tool when asked, and raises ToolchainMissing naming the tool and how to install it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from ..errors import ToolchainMissing

MLIR_AIE_INSTALL = ("install mlir-aie's Python wheel (Python 3.10/3.12/3.13): pip install mlir_aie -f "
                    "https://github.com/Xilinx/mlir-aie/releases/expanded_assets/latest-wheels-3")
PEANO_INSTALL = ("install Peano (pip install llvm-aie -f "
                 "https://github.com/Xilinx/llvm-aie/releases/expanded_assets/nightly) and set PEANO_INSTALL_DIR")
XRT_INSTALL = ("install the amdxdna driver and XRT with its Python bindings (mlir-aie's utils/build_drivers.sh, "
               "then source /opt/xilinx/xrt/setup.sh) on a Ryzen AI machine, or check the design with `make sim`")


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
    return Path(config.root_path())


def aiecc() -> str:
    found = shutil.which("aiecc.py") or shutil.which("aiecc")
    if not found:
        raise ToolchainMissing("aiecc.py (mlir-aie's compiler driver) is not on PATH", MLIR_AIE_INSTALL)
    return found


def peano_dir() -> Path:
    env = os.environ.get("PEANO_INSTALL_DIR")
    if env and (Path(env) / "bin" / "clang++").exists():
        return Path(env)
    try:  # the llvm-aie wheel installs Peano as a package
        spec = importlib.util.find_spec("llvm_aie")
    except (ImportError, ValueError):
        spec = None
    if spec and spec.submodule_search_locations:
        root = Path(list(spec.submodule_search_locations)[0])
        if (root / "bin" / "clang++").exists():
            return root
    where = f" ({env}/bin/clang++ does not exist)" if env else ""
    raise ToolchainMissing(f"Peano, the AIE clang++, is not installed{where}", PEANO_INSTALL)


def xchesscc() -> str:
    found = shutil.which("xchesscc_wrapper")
    if not found:
        raise ToolchainMissing("xchesscc_wrapper (the chess compiler) is not on PATH",
                               "install Vitis AIE Essentials with its license, or build with Peano (CHESS=0)")
    return found


def aietools_dir() -> Path:
    env = os.environ.get("AIETOOLS_DIR")
    if env:
        return Path(env)
    chess = Path(xchesscc()).resolve()
    return chess.parent.parent  # <aietools>/bin/xchesscc_wrapper


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
        aietools = look(aietools_dir, "$AIETOOLS_DIR")
        look(xchesscc, "xchesscc_wrapper")
    else:
        peano = look(peano_dir, "$PEANO_INSTALL_DIR")
        aietools = "$AIETOOLS_DIR"
    return Toolchain(look(mlir_aie_dir, "$MLIR_AIE_DIR"), peano, aietools, look(aiecc, "aiecc.py"), chess)
