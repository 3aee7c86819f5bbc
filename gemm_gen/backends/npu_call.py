"""One GEMM call on the NPU for the operator API and `gemm-gen run --runtime-sizes`: the cached
xclbin, the call's instruction stream (made once per size beside it), buffers with their slack,
and C back.

A size's instruction stream comes from the host encoder (backends/txn.py, milliseconds) once the
encoder has written exactly aiecc's streams for two sizes of this build (its own and the smallest
it serves); otherwise from aiecc's instructions-only run (seconds). The ledger (STREAMS) names the
build it describes, the verdict, and who wrote each stream; a rebuild drops it with its streams.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from ..atomic import write_atomic
from ..call import CallPlan, plan_call
from ..design.model import Design
from ..hostdata import output_values, pad_inputs, with_slack
from . import cache, toolchain, txn

if TYPE_CHECKING:
    from .runner import NpuKernel

STREAMS = "streams.json"  # per cache entry: the build it describes, the encoder's verdict, who wrote each stream


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
    from .build import artifacts, is_current, run_build

    entry = cache.make_entry(design)
    art = artifacts(design, entry)
    if not is_current(art, design):
        art = run_build(design, entry, gen_args=config_args(design.config), verbose=verbose)
        cache.write_meta(design, entry)
    if call == design.config.call:
        return CallFiles(art.xclbin, art.insts)
    ledger = _ledger(entry, art.insts)
    name = stream_name(design, call)
    insts = entry / name
    if name not in ledger["streams"] or not insts.exists():
        trusted = _encoder_trusted(design, art.insts, entry, ledger, verbose)
        ledger["streams"][name] = _write_stream(design, call, entry, insts, trusted, verbose)
        write_atomic(entry / STREAMS, json.dumps(ledger, indent=1) + "\n")
    return CallFiles(art.xclbin, insts, ledger["streams"][name])


def stream_name(design: Design, call: CallPlan) -> str:
    """The file of a call's instruction stream: by its size, and by the operands it reads from
    host-padded copies where those differ from the size's usual plan (the operator pads an A that
    holds Inf or NaN: other buffer strides, another stream)."""
    usual = plan_call(design.config, call.problem)
    extra = "" if call.padded == usual.padded else "_padded" + "".join(call.padded)
    return f"insts_{call.problem}{extra}.bin"


def _ledger(entry: Path, own_insts: Path) -> dict[str, Any]:
    """streams.json of this build; a ledger of an earlier build (another aiecc stream of the own
    size) is dropped with every stream it lists, so nothing is trusted across rebuilds."""
    build = hashlib.sha256(own_insts.read_bytes()).hexdigest()
    try:
        ledger: dict[str, Any] = json.loads((entry / STREAMS).read_text())
    except (OSError, ValueError):
        ledger = {}
    if ledger.get("build") != build:
        for old in ledger.get("streams", {}):
            (entry / old).unlink(missing_ok=True)
        ledger = {"build": build, "encoder": None, "streams": {}}
    return ledger


def _write_stream(design: Design, call: CallPlan, entry: Path, insts: Path, trusted: bool, verbose: bool) -> str:
    from .build import run_insts_build

    if trusted:
        write_atomic(insts, txn.encode_call(design, call).tobytes())
        return "host encoder"
    run_insts_build(design, call, entry, insts, verbose)
    return "aiecc"


def probe_call(design: Design) -> CallPlan:
    """The second size the encoder is checked on: the smallest call the design serves (every
    block ragged, the fewest k-steps a runtime K allows), the branches its own size leaves out."""
    from ..call import Problem
    from ..design.serve import serve

    c = design.config
    return serve(c, Problem(1, 1 if c.runtime_sizes == "mnk" else c.K, 1))


def _encoder_trusted(design: Design, own_insts: Path, entry: Path, ledger: dict[str, Any], verbose: bool) -> bool:
    """Whether the host encoder writes the very streams aiecc wrote, byte for byte, for the
    xclbin's own size and for probe_call's (aiecc's instructions-only run): checked once per
    build, the verdict and the first differing word kept in the ledger."""
    from .build import run_insts_build

    if ledger["encoder"] is not None:
        return bool(ledger["encoder"]["matches"])
    verdict: dict[str, Any] = {"matches": True}
    probe = probe_call(design)
    cases = [(design.config.call, own_insts), (probe, entry / stream_name(design, probe))]
    for call, path in cases:
        try:
            ours = txn.encode_call(design, call)
        except Exception as e:  # noqa: BLE001 - any encoder failure: aiecc writes every stream
            verdict = {"matches": False, "size": str(call.problem), "encoder_failed": f"{type(e).__name__}: {e}"}
            break
        if not path.exists():
            run_insts_build(design, call, entry, path, verbose)
            ledger["streams"][path.name] = "aiecc"
        theirs = np.frombuffer(path.read_bytes(), dtype=np.uint8)
        theirs = theirs[: theirs.size // 4 * 4].view(np.uint32)
        n = min(ours.size, theirs.size)
        differ = np.flatnonzero(ours[:n] != theirs[:n])
        first = int(differ[0]) if differ.size else (None if ours.size == theirs.size else n)
        if first is not None:
            verdict = {"matches": False, "size": str(call.problem), "first_difference": first,
                       "words": {"host encoder": int(ours.size), "aiecc": int(theirs.size)}}
            break
    ledger["encoder"] = verdict
    return bool(verdict["matches"])


def run_on_npu(design: Design, call: CallPlan, a: np.ndarray, b: np.ndarray, xrt: ModuleType | None = None,
               loaded: dict[Path, NpuKernel] | None = None, timeout_ms: int | None = None) -> np.ndarray:
    """C of one call on the NPU, within `timeout_ms` (None: runner.run_limit's default). `loaded`
    keeps each xclbin registered with its kernel open across calls (the operator's), so that a call
    loads an xclbin only the first time; one whose run timed out is dropped from it, so that the
    next call does not queue behind the hung run in the same hardware context."""
    from ..errors import RunTimeout
    from .runner import NpuKernel, NpuSession, checked_timeout, run_limit

    checked_timeout(timeout_ms)  # a wrong limit: one line, before anything is built
    xrt = xrt or toolchain.pyxrt()  # no XRT: one line, before anything is built
    files = call_files(design, call)
    c = design.config
    loaded = {} if loaded is None else loaded
    if files.xclbin not in loaded:
        loaded[files.xclbin] = NpuKernel(xrt, files.xclbin, c.device)
    (a_buf, b_buf), c_bytes = with_slack(c, call, *pad_inputs(c, a, b, call))
    session = NpuSession(xrt, files, a_buf, b_buf, c_bytes, c.device, loaded[files.xclbin],
                         limit=run_limit(c, files, call, timeout_ms))
    try:
        session.run()
    except RunTimeout:
        del loaded[files.xclbin]
        raise
    return output_values(c, session.output(), call).copy()

