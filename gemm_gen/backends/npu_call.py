"""One GEMM call on the NPU for the operator API and `gemm-gen run --runtime-sizes`: the cached
xclbin, the call's instruction stream (made once per size beside it), buffers with their slack,
and C back.

A size's instruction stream comes from the host encoder (backends/txn.py, milliseconds) once the
encoder has written exactly aiecc's streams for the sizes `probe_calls` picks from the design (its own
size first, then sizes that take every branch of the encoder any served size takes); otherwise from
aiecc's instructions-only run (seconds). The ledger (STREAMS) names what it describes (the build, by
aiecc's stream of the own size, and the gemm_gen and encoder versions), the verdict, and who wrote each
stream; a rebuild or an upgrade drops it with its streams, so the verdict is reached again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from .. import version
from ..design.host_buffers import output_values, pad_inputs, with_slack
from ..design.ir import Design
from ..design.serve import serve
from ..facts.atomic import write_atomic
from ..facts.epilogue_args import EpilogueArgs
from ..facts.errors import GemmGenError, RunTimeout
from ..facts.quant_b import QuantB
from ..spec.call import CallPlan, plan_call
from ..spec.request import Problem
from . import cache, toolchain, txn
from .compile import artifacts, is_current, run_build, run_insts_build
from .runner import NpuKernel, NpuSession, SlowEnd, checked_timeout, run_limit

STREAMS = "streams.json"  # per cache entry: what it describes, the encoder's verdict, who wrote each stream


@dataclass(frozen=True)
class CallFiles:
    """The xclbin a design built into, and the instruction stream of one call."""

    xclbin: Path
    insts: Path
    how: str = "aiecc"  # who wrote the stream: "aiecc" or "host encoder"


def is_built(design: Design) -> bool:
    """Whether the design's xclbin is in the build cache, current."""
    return is_current(artifacts(design, cache.entry_dir(design)), design)


def call_files(design: Design, call: CallPlan, verbose: bool = False, gen_args: Sequence[str] = ()) -> CallFiles:
    """Build the design into its cache entry unless it is there and current, and the call's
    instruction stream unless it is there (the xclbin is never rebuilt for another size).
    `gen_args`: the gemm-gen flags of the design, for the build's log (the caller's: app/cliargs.py)."""
    entry = cache.make_entry(design)
    art = artifacts(design, entry)
    if not is_current(art, design):
        art = run_build(design, entry, gen_args=list(gen_args), verbose=verbose)
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
    """The file of a call's instruction stream: by its size, by the operands it reads from
    host-padded copies where those differ from the size's usual plan (the operator pads an A that
    holds Inf or NaN: other buffer strides, another stream), and by the leading dimensions of
    operands read in place from padded rows, and by C's layout where the shim stores it in the one
    the build was not made for (spec/rules/call_layouts.py)."""
    usual = plan_call(design.config, call.problem, c_col_maj=call.c_col_maj)
    extra = "" if call.c_col_maj == design.config.layout.c_col_maj else "_ccol" if call.c_col_maj else "_crow"
    extra += "" if call.padded == usual.padded else "_padded" + "".join(call.padded)
    extra += "".join(f"_ld{op}{ld}" for op, ld in call.lds)  # rows read in place at the user's stride
    return f"insts_{call.problem}{extra}.bin"


def ledger_identity(own_insts: Path) -> dict[str, Any]:
    """What a ledger's verdict and streams hold for: this build (aiecc's stream of the own size),
    this gemm_gen (which lowers each size's runtime sequence for aiecc) and this encoder."""
    return {"build": hashlib.sha256(own_insts.read_bytes()).hexdigest(), "gemm_gen": version.__version__,
            "encoder_version": txn.TXN_ENCODER_VERSION}


def _ledger(entry: Path, own_insts: Path) -> dict[str, Any]:
    """streams.json of this build; a ledger of an earlier build (another aiecc stream of the own
    size), of another gemm_gen or of another encoder is dropped with every stream it lists, so
    nothing is trusted across rebuilds or upgrades."""
    identity = ledger_identity(own_insts)
    try:
        ledger: dict[str, Any] = json.loads((entry / STREAMS).read_text())
    except (OSError, ValueError):
        ledger = {}
    if any(ledger.get(k) != v for k, v in identity.items()):
        for old in ledger.get("streams", {}):
            (entry / old).unlink(missing_ok=True)
        ledger = {**identity, "encoder": None, "streams": {}}
    return ledger


def _write_stream(design: Design, call: CallPlan, entry: Path, insts: Path, trusted: bool, verbose: bool) -> str:
    if trusted:
        write_atomic(insts, txn.encode_call(design, call).tobytes())
        return "host encoder"
    run_insts_build(design, call, entry, insts, verbose)
    return "aiecc"


def probe_candidates(design: Design) -> tuple[CallPlan, ...]:
    """Sizes the design serves that reach the encoder's branches (txn.branches): for each of M, K
    and N its own value, 1, one below, one past a block (M, N) or a k_mt chunk (K), one block of
    cores (N = n: B's strips contiguous) and one k_mt chunk (K = k_mt: A's rows contiguous); K only
    where the design takes a runtime K (else the values with its K walk). Calls it cannot serve are
    left out."""
    c = design.config
    if c.runtime.runtime_sizes == "fixed":
        return ()
    block_m, block_n = c.tiling.m * c.array.rows, c.tiling.n * c.array.cols
    ms = {c.size.M, 1, c.size.M - 1, block_m, block_m + 1}
    ns = {c.size.N, 1, c.size.N - 1, c.tiling.n, block_n, block_n + 1}
    if c.runtime.runtime_sizes == "mnk":
        ks = {c.size.K, 1, c.size.K - 1, c.tiling.k_mt, c.tiling.k_mt + 1}
    else:  # the same K walk: the K tail is the only freedom
        ks = {c.size.K, c.call.k_walk - c.tiling.k_mt + 1}
    calls: dict[str, CallPlan] = {}
    for M in sorted(v for v in ms if 1 <= v <= c.size.M):
        for K in sorted(v for v in ks if 1 <= v <= c.size.K):
            for N in sorted(v for v in ns if 1 <= v <= c.size.N):
                try:
                    call = serve(c, Problem(M, K, N))
                except GemmGenError:
                    continue
                calls.setdefault(stream_name(design, call), call)
    return tuple(calls.values())


def probe_calls(design: Design) -> tuple[CallPlan, ...]:
    """The sizes the encoder is checked on against aiecc: the xclbin's own size (aiecc wrote its
    stream with the build), then, greedily, the candidate that takes the most branches not yet
    taken (ties: the smaller problem), until every branch some candidate takes is taken."""
    own = design.config.call
    taken = {s: txn.branches(design, s) for s in probe_candidates(design)}
    wanted = set().union(txn.branches(design, own), *taken.values())
    chosen, covered = [own], set(txn.branches(design, own))
    while covered != wanted:
        best = max(taken, key=lambda s: (len(taken[s] - covered), -s.problem.macs, str(s.problem)))
        chosen.append(best)
        covered |= taken.pop(best)
    return tuple(chosen)


def _encoder_trusted(design: Design, own_insts: Path, entry: Path, ledger: dict[str, Any], verbose: bool) -> bool:
    """Whether the host encoder writes the very streams aiecc wrote, byte for byte, for every size
    probe_calls picks (aiecc's instructions-only run writes those it has not yet): checked once per
    ledger, the verdict, the sizes and branches checked, and the first differing word kept in it."""
    if ledger["encoder"] is not None:
        return bool(ledger["encoder"]["matches"])
    probes = probe_calls(design)
    checked: list[str] = []
    verdict: dict[str, Any] = {"matches": True}
    for call in probes:
        path = own_insts if call == design.config.call else entry / stream_name(design, call)
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
        checked.append(str(call.problem))
    verdict["checked"] = checked
    verdict["branches"] = sorted(set().union(*(txn.branches(design, call) for call in probes)))
    ledger["encoder"] = verdict
    return bool(verdict["matches"])


def run_on_npu(design: Design, call: CallPlan, a: np.ndarray, b: np.ndarray | QuantB, xrt: ModuleType | None = None,
               loaded: dict[Path, NpuKernel] | None = None, timeout_ms: int | None = None,
               slow_end: SlowEnd | None = None, gen_args: Sequence[str] = (),
               epilogue: EpilogueArgs | None = None) -> np.ndarray:
    """C of one call on the NPU, within `timeout_ms` (None: runner.run_limit's default from `slow_end`). `loaded`
    keeps each xclbin registered with its kernel open across calls (the operator's), so that a call
    loads an xclbin only the first time; one whose run timed out is dropped from it, so that the
    next call does not queue behind the hung run in the same hardware context. `epilogue`: the call's
    epilogue data, written into B's epilogue tiles (host_buffers.pad_inputs)."""
    checked_timeout(timeout_ms)  # a wrong limit: one line, before anything is built
    xrt = xrt or toolchain.pyxrt()  # no XRT: one line, before anything is built
    files = call_files(design, call, gen_args=gen_args)
    c = design.config
    loaded = {} if loaded is None else loaded
    if files.xclbin not in loaded:
        loaded[files.xclbin] = NpuKernel(xrt, files.xclbin, c.array.device)
    (a_buf, b_buf), c_bytes = with_slack(c, call, *pad_inputs(c, a, b, call, epilogue))
    session = NpuSession(xrt, files, a_buf, b_buf, c_bytes, c.array.device, loaded[files.xclbin],
                         limit=run_limit(c, files, call, timeout_ms, slow_end))
    try:
        session.run()
    except RunTimeout:
        del loaded[files.xclbin]
        raise
    return output_values(c, session.output(), call)  # a view of C's fresh buffer (session.output copies it)

