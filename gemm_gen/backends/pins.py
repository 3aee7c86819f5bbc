"""The one NPU toolchain gemm_gen's hardware path supports, written in one place.

mlir-aie 1.4.3 (tag v1.4.3, commit 95b3d1cc, the newest release whose commit public sources name;
its IRON was read from the 1.4.3 documentation render, see iron_1_4_3.json), the Peano build
that release pins in utils/peano-requirements.txt, and an XRT with the amdxdna driver new enough
for it. pyproject.toml's `npu` extra repeats the two wheel pins (a test keeps them equal);
`gemm-gen doctor` compares all of them with what is installed; the IRON lowering checks the
installed IRON's signatures against the pinned table before it runs.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from ..facts.errors import opt


@dataclass(frozen=True)
class Pin:
    """One pinned tool: what it is, which version, and how to get exactly that."""

    tool: str
    version: str
    install: str
    distribution: str | None = None  # the Python distribution that carries it, if any
    required: bool = True


MLIR_AIE_RELEASE = "1.4.3"
MLIR_AIE_COMMIT = "95b3d1ccc0bfe5183bae1fa9014cfdc1fb4d96c8"
MLIR_AIE_INDEX = f"https://github.com/Xilinx/mlir-aie/releases/expanded_assets/v{MLIR_AIE_RELEASE}"
PEANO_VERSION = "22.0.0.2026090701+3e93bf7b"  # mlir-aie v1.4.3's utils/peano-requirements.txt
PEANO_INDEX = "https://github.com/Xilinx/llvm-aie/releases/expanded_assets/nightly"
# not named by the release itself: the XRT that 1.4.2/1.4.3 users report running (2.21.75, 2.25.0)
XRT_MIN_VERSION = "2.21"

MLIR_AIE = Pin("mlir-aie (IRON, aiecc)", MLIR_AIE_RELEASE,
               f"pip install mlir_aie=={MLIR_AIE_RELEASE} -f {MLIR_AIE_INDEX} (Python 3.12 wheels; "
               f"or pip install -e '.[npu]' -f {MLIR_AIE_INDEX} -f {PEANO_INDEX})", "mlir_aie")
PEANO = Pin("Peano (llvm-aie)", PEANO_VERSION,
            f"pip install 'llvm-aie=={PEANO_VERSION}' -f {PEANO_INDEX}", "llvm-aie")
XRT = Pin("XRT with pyxrt and the amdxdna driver", f">= {XRT_MIN_VERSION}",
          "mlir-aie's utils/build_drivers.sh at v1.4.3, reboot, then source /opt/xilinx/xrt/setup.sh "
          "(a Ryzen AI machine; elsewhere check designs with `make sim`)")
CHESS = Pin(f"xchesscc (optional: {opt('compiler', 'chess')}, bfp16 kernels)", "any",
            "install Vitis AIE Essentials with its license so that xchesscc is on PATH", required=False)

PINS: tuple[Pin, ...] = (MLIR_AIE, PEANO, XRT, CHESS)


def npu_requirements() -> list[str]:
    """The wheels of the `npu` extra, as pyproject.toml must list them."""
    return [f"mlir_aie=={MLIR_AIE_RELEASE}", f"llvm-aie=={PEANO_VERSION}"]


# ---- the IRON signatures the lowering relies on ------------------------------------------------
@cache
def iron_table() -> dict[str, Any]:
    """mlir-aie 1.4.3's IRON signatures (names, kinds, defaults; with their sources)."""
    return json.loads(resources.files(__package__).joinpath("iron_1_4_3.json").read_text())  # type: ignore[arg-type]


# How gemm_gen calls each IRON callable: (positional arguments, keyword names). A release whose
# signature cannot take these calls is refused before anything is lowered.
IRON_CALLS: dict[str, tuple[int, tuple[str, ...]]] = {
    "aie.iron.ObjectFifo.__init__": (2, ("depth", "name", "dims_to_stream", "dims_from_stream_per_cons")),
    "aie.iron.ObjectFifo.prod": (1, ("tile",)),
    "aie.iron.ObjectFifo.cons": (1, ("tile",)),
    "aie.iron.ObjectFifoHandle.acquire": (2, ()),
    "aie.iron.ObjectFifoHandle.release": (2, ()),
    "aie.iron.ObjectFifoHandle.fill": (2, ("tap", "wait", "group")),
    "aie.iron.ObjectFifoHandle.drain": (2, ("tap", "wait", "group")),
    "aie.iron.ObjectFifoHandle.join": (2, ("tile", "depths", "obj_types", "names", "dims_to_stream",
                                           "dims_from_stream")),
    "aie.iron.ObjectFifoHandle.split": (2, ("tile", "depths", "obj_types", "names", "dims_to_stream",
                                            "dims_from_stream")),
    "aie.iron.ObjectFifoHandle.forward": (1, ("tile", "obj_type", "depth", "name", "dims_to_stream",
                                              "dims_from_stream")),
    "aie.iron.Worker.__init__": (3, ("tile", "stack_size")),
    "aie.iron.Kernel.__init__": (4, ()),
    "aie.iron.Buffer.__init__": (1, ("type", "name", "tile")),
    "aie.iron.Runtime.__init__": (3, ()),
    "aie.iron.TaskGroup.__init__": (1, ()),
    "aie.iron.TaskGroup.finish": (1, ()),
    "aie.iron.Program.__init__": (3, ("workers",)),
    "aie.iron.Program.resolve_program": (1, ()),
    "aie.iron.device.Tile.__init__": (3, ()),
    "aie.iron.controlflow.range_": (1, ()),
    "aie.helpers.taplib.TensorAccessPattern.__init__": (5, ()),
    "aie.iron.dtype.str_to_dtype": (1, ()),
    "aie.iron.WorkerRuntimeBarrier.__init__": (1, ()),
    "aie.iron.WorkerRuntimeBarrier.wait_for_value": (2, ()),
    "aie.iron.WorkerRuntimeBarrier.set": (2, ()),
    "aie.iron.WorkerRuntimeBarrier.release_with_value": (2, ()),
}


def _params(sig: inspect.Signature) -> list[tuple[str, str, bool]]:
    return [(p.name, p.kind.name, p.default is not inspect.Parameter.empty) for p in sig.parameters.values()]


def signature_problem(name: str, fn: Callable[..., Any]) -> str | None:
    """Why `fn` is not the pinned release's `name` (None when it is): a signature that differs
    from the pinned one where the table is confirmed at the tag, or one that cannot take our call."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return f"{name} has no readable signature"
    entry = iron_table()["signatures"][name]
    want = [(p["name"], p["kind"], p["default"] is not None) for p in entry["params"]]
    if entry["confirmed_at_tag"] and _params(sig) != want:
        got = ", ".join(p for p, _, _ in _params(sig))
        return f"{name}({got}) differs from release {MLIR_AIE_RELEASE}'s ({', '.join(p for p, _, _ in want)})"
    positional, keywords = IRON_CALLS[name]
    try:
        sig.bind(*([None] * positional), **dict.fromkeys(keywords))
    except TypeError as e:
        return f"{name} cannot take gemm_gen's call ({e})"
    return None
