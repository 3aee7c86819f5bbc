"""One GEMM call on the NPU for the operator API and `gemm-gen run --runtime-sizes`: the cached
xclbin, the call's instruction stream (made once per size beside it), buffers with their slack,
and C back.

A size's instruction stream comes from the host encoder (backends/txn.py, milliseconds) once the
encoder has written, for the xclbin's own size, exactly the stream aiecc wrote; until then, or when
the two differ, from aiecc's instructions-only run (seconds). The verdict is kept in the entry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np

from ..atomic import write_atomic
from ..call import CallPlan
from ..design.model import Design
from ..hostdata import output_values, pad_inputs, with_slack
from . import cache, toolchain, txn

TXN_CHECK = "txn_check.json"  # whether the host encoder matches aiecc for this entry's xclbin


@dataclass(frozen=True)
class CallFiles:
    """The xclbin a design built into, and the instruction stream of one call."""

    xclbin: Path
    insts: Path
    how: str = "aiecc"  # who wrote the stream: "aiecc" or "host encoder"


def is_built(design: Design) -> bool:
    """Whether the design's xclbin is in the build cache, current."""
    from .build import artifacts, is_current

    return is_current(artifacts(design, cache.entry_dir(design)), design)


def call_files(design: Design, call: CallPlan, verbose: bool = False) -> CallFiles:
    """Build the design into its cache entry unless it is there and current, and the call's
    instruction stream unless it is there (the xclbin is never rebuilt for another size)."""
    from ..cliargs import config_args
    from .build import artifacts, is_current, run_build, run_insts_build

    entry = cache.entry_dir(design)
    art = artifacts(design, entry)
    if not is_current(art, design):
        art = run_build(design, entry, gen_args=config_args(design.config), verbose=verbose)
        cache.write_meta(design, entry)
    if call == design.config.call:
        return CallFiles(art.xclbin, art.insts)
    insts = entry / f"insts_{call.problem}.bin"
    trusted = encoder_matches_aiecc(design, art.insts, entry)
    if not insts.exists():
        if trusted:
            write_atomic(insts, txn.encode_call(design, call).tobytes())
        else:
            run_insts_build(design, call, entry, insts, verbose)
    return CallFiles(art.xclbin, insts, "host encoder" if trusted else "aiecc")


def encoder_matches_aiecc(design: Design, aiecc_insts: Path, entry: Path) -> bool:
    """Whether the host encoder writes, for the xclbin's own size, the very stream aiecc wrote
    (checked once per cache entry; the verdict and the first differing word go in TXN_CHECK)."""
    path = entry / TXN_CHECK
    try:
        return bool(json.loads(path.read_text())["matches"])
    except (OSError, ValueError, KeyError):
        pass
    ours = txn.encode_call(design, design.config.call)
    theirs = np.frombuffer(aiecc_insts.read_bytes(), dtype=np.uint8)
    theirs = theirs[: theirs.size // 4 * 4].view(np.uint32)
    n = min(ours.size, theirs.size)
    differ = np.flatnonzero(ours[:n] != theirs[:n])
    first = int(differ[0]) if differ.size else (None if ours.size == theirs.size else n)
    verdict = {"matches": first is None, "words": {"host encoder": int(ours.size), "aiecc": int(theirs.size)},
               "first_difference": first}
    write_atomic(path, json.dumps(verdict, indent=1) + "\n")
    return first is None


def run_on_npu(design: Design, call: CallPlan, a: np.ndarray, b: np.ndarray, xrt: ModuleType | None = None
               ) -> np.ndarray:
    """C of one call on the NPU."""
    from .runner import NpuSession

    xrt = xrt or toolchain.pyxrt()  # no XRT: one line, before anything is built
    files = call_files(design, call)
    c = design.config
    (a_buf, b_buf), c_bytes = with_slack(c, call, *pad_inputs(c, a, b, call))
    session = NpuSession(xrt, files, a_buf, b_buf, c_bytes, c.device)
    session.run()
    return output_values(c, session.output(), call).copy()

