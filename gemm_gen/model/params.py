"""The model's parameters, read from calibration.json (values with their sources).

DRAM parameters are per device. Device facts that the rest of the generator shares (array shape,
clock, peak MACs, L1/L2 sizes, BD counts, the cores' ISA facts: CORE_ISA) are read from
gemm_gen.facts.devices and never repeated here.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..facts.errors import ConfigError, opt

CALIBRATION_FILE = "calibration.json"
CALIBRATION_PACKAGE = __package__  # where it ships: the model's package (model/fit rewrites it here)
CALIBRATION_ENV = "GEMM_GEN_CALIBRATION"


@dataclass(frozen=True)
class Dram:
    """The DRAM path of one device on one machine (model/perf.py: the memory side)."""

    peak_gbps: float  # what all the NPU's streams reach together with long contiguous runs (the machine's)
    run_overhead_bytes: float  # bytes of transfer time lost per contiguous DRAM run (a page opened)
    page_sharing: float  # 0..1: share of side-by-side strips of lockstep columns read in one open page
    stream_gbps_256: float  # what one shim stream reaches alone with 256-byte bursts (its requests in flight)
    write_cost: float  # a written byte's cost on the shared path, in read bytes
    machine: str = ""  # the machine profile the peak is from

    def stream_gbps(self, burst_bytes: int) -> float:
        """One stream's ceiling at this burst size: a fixed number of bursts in flight (Little's law)."""
        return self.stream_gbps_256 * burst_bytes / 256


@dataclass(frozen=True)
class Params:
    bank_stall: float  # cycles per C vector load/store that pipelining cannot hide
    l1_conflict: float  # cycles per DMA bank access that meets a core access (model/l1_stall.py)
    bf16_via_bfp16_cycles: float
    bfp16_overhead: float  # cycles per 16 x 16 block of the ATB paper's chess kernel beyond its vmacs (atb eq. 13)
    flat_block_overhead: float  # cycles a flat software-pipelined bfp16 block loop exposes per block (mlir-aie #3650)
    switch_cycles: float
    bfp16_step_cycles: float  # a bfp16 kernel's core loss per k-step, beyond its rho switches (atb Table 1)
    stream_bytes_per_cycle: int
    dram: dict[str, Dram]  # per device: the machine chosen (default or `on_machine`)
    dispatch_us: float
    bd_task_us: float
    rtp_write_us: float  # one runtime-parameter word written into one core's memory by the sequence

    peaks: dict[str, dict[str, float]] = field(default_factory=dict)  # device -> machine -> peak_gbps

    def with_(self, **kw: Any) -> Params:
        return replace(self, **kw)

    def with_dram(self, dev: str, **kw: Any) -> Params:
        """Other DRAM constants for `dev`; a new peak becomes its machine's (`machine` relabels it)."""
        dram = dict(self.dram)
        dram[dev] = replace(dram[dev], **kw)
        peaks = self.peaks
        if "peak_gbps" in kw:
            peaks = {**self.peaks, dev: {**self.peaks.get(dev, {}), dram[dev].machine: float(kw["peak_gbps"])}}
        return replace(self, dram=dram, peaks=peaks)

    def on_machine(self, dev: str, machine: str | None) -> Params:
        """The parameters with `dev`'s DRAM peak of a named machine profile (None: unchanged)."""
        if machine is None or machine == self.dram[dev].machine:
            return self
        known = self.peaks.get(dev, {})
        if machine not in known:
            raise ConfigError(f"machine {machine!r} has no {dev} memory profile",
                              f"use one of {', '.join(sorted(known))}, or give {opt('dram_gbps')}")
        return self.with_dram(dev, peak_gbps=known[machine], machine=machine)


def raw() -> dict[str, Any]:
    """calibration.json as stored (values with their sources); the file GEMM_GEN_CALIBRATION names
    instead, when set (a `gemm-gen calibrate --output` refit), checked against the stored one's shape."""
    override = os.environ.get(CALIBRATION_ENV)
    stored: dict[str, Any] = json.loads(resources.files(CALIBRATION_PACKAGE).joinpath(CALIBRATION_FILE).read_text())
    return _override(Path(override), stored) if override else stored


def _override(path: Path, stored: dict[str, Any]) -> dict[str, Any]:
    """The calibration file the user names, or ConfigError in one line saying what is wrong with it."""
    where, fix = f"{CALIBRATION_ENV}={path}", (f"unset {CALIBRATION_ENV}, or set it to a file that "
                                                "`gemm-gen calibrate --measurements ... -o FILE` wrote")
    data = read_json(path, where, fix)
    problem = _shape_problem(stored, data, "")
    if problem:
        raise ConfigError(f"{where} is not a calibration file: {problem}", fix)
    return data  # type: ignore[no-any-return]


def read_json(path: Path, where: str, fix: str) -> Any:
    """A JSON file a user names (`where` names it in messages), or ConfigError in one line."""
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise ConfigError(f"{where}: cannot read it ({e.strerror})", fix) from None
    except ValueError as e:  # not UTF-8, or not JSON
        raise ConfigError(f"{where} is not a JSON file ({e})", fix) from None


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _shape_problem(stored: Any, data: Any, where: str) -> str | None:
    """What in `data` breaks the shape of the stored calibration (every object and constant the
    model reads, each constant's value a finite number or null), or None. Machine profiles may be
    added, so each is checked on its own."""
    here = where or "the top level"
    if not isinstance(stored, dict):
        return None
    if not isinstance(data, dict):
        return f"{here} is {type(data).__name__}, not an object"
    if "value" in stored:
        value, spread = data.get("value", "missing"), data.get("spread")
        if value is not None and not _is_number(value):
            return f"{where}.value is {value!r}, not a number"
        if spread is not None and not (isinstance(spread, list) and spread and all(map(_is_number, spread))):
            return f"{where}.spread is {spread!r}, not a list of numbers"
        return None
    if "machines" in stored:
        machines = data.get("machines")
        if not isinstance(machines, dict) or data.get("default_machine") not in machines:
            return f"{where}.default_machine names no profile of {where}.machines"
        profile = next(iter(stored["machines"].values()))
        for name, mine in machines.items():
            problem = _shape_problem(profile, mine, f"{where}.machines.{name}")
            if problem:
                return problem
    for key, child in stored.items():
        if key == "machines" or not isinstance(child, dict):
            continue  # sources and notes are for people
        if key not in data:
            return f"{where}.{key} is missing" if where else f"{key} is missing"
        problem = _shape_problem(child, data[key], f"{where}.{key}" if where else key)
        if problem:
            return problem
    return None


def _v(entry: dict[str, Any], default: float = 0.0) -> Any:
    value = entry["value"]
    return default if value is None else value


def peak_entry(data: dict[str, Any], dev: str, machine: str | None = None) -> dict[str, Any]:
    """calibration.json's peak_gbps entry of a device's machine (its default machine when None)."""
    d = data["dram"][dev]
    return d["machines"][machine or d["default_machine"]]["peak_gbps"]  # type: ignore[no-any-return]


def dram_entry(data: dict[str, Any], dev: str, what: str) -> dict[str, Any]:
    """A device's DRAM entry by its Dram field name (peak_gbps: its default machine's)."""
    if what == "peak_gbps":
        return peak_entry(data, dev)
    return data["dram"][dev][DRAM_KEYS.get(what, what)]  # type: ignore[no-any-return]


DRAM_KEYS = {"page_sharing": "lockstep_page_sharing", "stream_gbps_256": "stream_gbps_at_256_byte_bursts"}


def _dram(d: dict[str, Any]) -> Dram:
    machine = d["default_machine"]
    return Dram(float(_v(d["machines"][machine]["peak_gbps"], 1.0)), float(_v(d["run_overhead_bytes"])),
                float(_v(d[DRAM_KEYS["page_sharing"]])), float(_v(d[DRAM_KEYS["stream_gbps_256"]], 1.0)),
                float(_v(d["write_cost"], 1.0)), machine)


def from_raw(data: dict[str, Any]) -> Params:
    kern, core, rt = data["kernel"], data["core"], data["runtime"]
    dram = {dev: _dram(d) for dev, d in data["dram"].items()}
    peaks = {dev: {name: float(_v(m["peak_gbps"], 1.0)) for name, m in d["machines"].items()}
             for dev, d in data["dram"].items()}
    return Params(
        bank_stall=float(_v(kern["bank_stall_cycles_per_c_access"])),
        l1_conflict=float(_v(kern["l1_conflict_cycles_per_collision"])),
        bf16_via_bfp16_cycles=float(_v(kern["aie2p_bf16_via_bfp16_cycles_per_mmul"], 1.0)),
        bfp16_overhead=float(_v(kern["bfp16_cluster_overhead_cycles"])),
        flat_block_overhead=float(_v(kern["bfp16_flat_block_overhead_cycles"])),
        switch_cycles=float(_v(core["switch_cycles"])),
        bfp16_step_cycles=float(_v(core["bfp16_step_cycles"])),
        stream_bytes_per_cycle=int(_v(core["stream_bytes_per_cycle"])),
        dram=dram,
        dispatch_us=float(_v(rt["dispatch_us"])),
        bd_task_us=float(_v(rt["bd_task_us"])),
        rtp_write_us=float(_v(rt["rtp_write_us"])),
        peaks=peaks,
    )


@lru_cache(maxsize=1)
def load() -> Params:
    """The calibrated parameters the model uses by default."""
    return from_raw(raw())


# constants for which a larger value predicts a slower run (the others: a smaller one)
SLOWER_WHEN_LARGER = {"run_overhead_bytes", "write_cost", "dispatch_us", "bd_task_us", "rtp_write_us", "switch_cycles",
                      "bfp16_step_cycles",
                      "bank_stall_cycles_per_c_access", "l1_conflict_cycles_per_collision",
                      "aie2p_bf16_via_bfp16_cycles_per_mmul", "bfp16_cluster_overhead_cycles",
                      "bfp16_flat_block_overhead_cycles"}


def ends(data: dict[str, Any] | None = None) -> tuple[Params, Params]:
    """(pessimistic, optimistic) parameters: every constant with a `spread` (the values its sources
    or a leave-one-out refit leave open) at the end that predicts the slower (faster) run. The model
    is monotone in each, so these bound the prediction over the whole box of spreads."""
    data = data or raw()
    slow, fast = json.loads(json.dumps(data)), json.loads(json.dumps(data))

    def walk(node: Any, a: Any, b: Any, name: str) -> None:
        if isinstance(node, dict) and "value" in node:
            spread = node.get("spread")
            if spread:
                lo, hi = float(min(spread)), float(max(spread))
                a["value"], b["value"] = (hi, lo) if name in SLOWER_WHEN_LARGER else (lo, hi)
            return
        if isinstance(node, dict):
            for key, child in node.items():
                walk(child, a[key], b[key], key)

    walk(data, slow, fast, "")
    return from_raw(slow), from_raw(fast)


@lru_cache(maxsize=1)
def load_ends() -> tuple[Params, Params]:
    """ends() of the default calibration."""
    return ends(raw())
