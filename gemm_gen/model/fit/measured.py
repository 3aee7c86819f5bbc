"""gemm-gen calibrate --measurements: refit the device constants on `make validate` records.

The constants a laptop's measurements pin down better than the papers do are the DRAM ones of each
device (streaming bandwidth, bytes lost per contiguous run), the dispatch time of one run, one shim
stream's rate and one shim task's setup. They are fitted together by least squares on
log(predicted / measured) over the records' "fit" rows (the small designs) and "decode" rows (one
decode call on several column counts, a call of many task groups); the L1 allocation pairs ("l1")
then fit the cost of a shared bank. The "check" rows (the papers' headline designs, the int4
designs) are only compared, before and after, so the report says how the refit does out of sample.
A constant is not written when it lands on a bound of its search, when its device has fewer fit rows
than free parameters, or when no rows tell it apart; the report says which, in one line each.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...design import l1_banks
from ...facts.errors import ConfigError
from ...spec.config import GemmConfig
from ..params import Params, dram_entry, from_raw, load, raw, read_json
from ..perf import estimate_config
from .calibrate import design_data

BOUNDS = {"peak_gbps": (1.0, 400.0), "run_overhead_bytes": (0.0, 16384.0), "dispatch_us": (0.0, 5000.0),
          "l1_conflict": (0.0, 8.0), "stream_gbps_256": (0.1, 100.0), "bd_task_us": (0.0, 100.0)}
L1_CONFLICT = "l1_conflict"  # kernel.l1_conflict_cycles_per_collision
BD_TASK = "bd_task_us"  # runtime.bd_task_us
# a constant is seen by the rows when some row's log time moves by at least this much per unit of the
# constant's log at the solution (1% faster or slower for 1% more)
SEEN = 0.01
MISFIT = 0.25  # a refit that leaves a row it was fitted on further off than this writes nothing
ONE_SIDED = "beyond it no row's time moves with it (another bound binds first), and every design prices alike"


@dataclass(frozen=True)
class Measured:
    name: str
    role: str  # "fit", "l1" (allocation pairs: the bank-sharing cost), "decode" (stream rate, task setup) or "check"
    device: str
    config: GemmConfig
    seconds: float  # measured average
    record: str  # the file it came from


RECORD_FIX = "pass build/validate_<device>.json files that `make validate` wrote"


def read_records(paths: list[Path]) -> list[Measured]:
    """Every measured design of `make validate` files (skipped and failed designs left out);
    ConfigError in one line naming the file and the design for anything else."""
    rows = []
    for path in paths:
        for i, d in enumerate(_designs(path)):
            if not isinstance(d, dict):
                raise ConfigError(f"{path}: designs[{i}] is {type(d).__name__}, not an object", RECORD_FIX)
            if d.get("status") == "PASS":
                rows.append(_measured(path, i, d))
    return rows


def _designs(path: Path) -> list[Any]:
    """The "designs" list of one record file."""
    data = read_json(path, str(path), RECORD_FIX)
    designs = data.get("designs") if isinstance(data, dict) else None
    if not isinstance(designs, list):
        raise ConfigError(f"{path} is not a `make validate` record (no list of designs)", RECORD_FIX)
    return designs


def _measured(path: Path, i: int, d: dict[str, Any]) -> Measured:
    """One passed design of a record: its config rebuilt and its measured average time."""
    where = f"{path}: designs[{i}] ({d.get('name', 'unnamed')})"
    try:
        cfg = dict(d["config"])
        cfg["mmul_shape"] = tuple(cfg["mmul_shape"]) if cfg.get("mmul_shape") else None
        c = GemmConfig(**cfg)
        seconds = float(d["measured"]["avg_us"]) * 1e-6
        name, role = str(d["name"]), str(d["role"])
    except ConfigError as e:
        raise ConfigError(f"{where}: {e.raw_what}", RECORD_FIX) from None
    except (KeyError, TypeError, ValueError) as e:  # a key missing, or a value of the wrong kind
        raise ConfigError(f"{where} is not a measured design ({type(e).__name__}: {e})", RECORD_FIX) from None
    if not 0 < seconds < float("inf"):
        raise ConfigError(f"{where}: measured avg_us {seconds * 1e6} is not a time", RECORD_FIX)
    return Measured(name, role, c.array.device, c, seconds, str(path))


def predicted_s(p: Params, c: GemmConfig) -> float:
    traffic, tasks, l1 = design_data(c)
    return float(estimate_config(c, p, traffic, tasks, l1).time)


@dataclass
class Refit:
    before: Params
    after: Params
    fitted: dict[str, float]  # "npu2.peak_gbps" -> value
    refused: dict[str, str] = field(default_factory=dict)  # constant -> why it is not written
    rows: list[Measured] = field(default_factory=list)
    # constants written where no row's time moves with them any more: "at least" or "at most" that value
    one_sided: dict[str, str] = field(default_factory=dict)

    def errors(self, p: Params, role: str) -> list[tuple[Measured, float]]:
        """(row, predicted / measured - 1) of the rows of one role."""
        return [(r, predicted_s(p, r.config) / r.seconds - 1.0) for r in self.rows if r.role == role]


def _apply(p: Params, names: list[str], x: np.ndarray) -> Params:
    for name, value in zip(names, x):
        if name == "dispatch_us":
            p = p.with_(dispatch_us=float(value))
        elif name == L1_CONFLICT:
            p = p.with_(l1_conflict=float(value))
        elif name == BD_TASK:
            p = p.with_(bd_task_us=float(value))
        else:
            dev, what = name.split(".")
            p = p.with_dram(dev, **{what: float(value)})
    return p


def refit(rows: list[Measured], base: Params | None = None, machine: str | None = None) -> Refit:
    """Least squares of log(predicted / measured) over the fit and decode rows together (scipy's
    bounded trust region; the decode rows depend on the DRAM constants too, and the fit rows on a
    task's setup), from the `machine` profile's peak where the device has one (else its default's);
    then the cost of a shared bank on the L1 pairs. A constant refused (too few rows, rows that cannot
    tell it apart, on a bound of its search, no row's time moving with it) is held at its old value and
    the others are solved again without it, so that no written value was fitted beside a dropped one; a
    constant the solver moved to where no row's time depends on it is written as a one-sided value."""
    p0 = base or load()
    fit_rows = [r for r in rows if r.role == "fit"]
    decode_rows = [r for r in rows if r.role == "decode"]
    solved_rows = fit_rows + decode_rows
    devices = sorted({r.device for r in fit_rows})
    for dev in sorted({r.device for r in solved_rows}):
        if machine in p0.peaks.get(dev, {}):
            p0 = p0.on_machine(dev, machine)
    names = [f"{dev}.{what}" for dev in devices for what in ("peak_gbps", "run_overhead_bytes")]
    names += ["dispatch_us"] if fit_rows else []
    result = Refit(p0, p0, {}, {}, rows)
    for dev in devices:  # fewer points than free parameters: nothing to fit
        have = sum(r.device == dev for r in fit_rows)
        if have < 3:
            for what in ("peak_gbps", "run_overhead_bytes"):
                result.refused[f"{dev}.{what}"] = f"fitted from {have} fit rows of {dev}, fewer than the 3 free " \
                                                  f"parameters it shares with dispatch_us"
    decode, unseen = _decode_names(decode_rows)
    result.refused.update(unseen)
    names += decode
    if len(solved_rows) < len(names):
        for name in names:
            result.refused.setdefault(name, f"fitted from {len(solved_rows)} fit and decode rows, fewer than the "
                                            f"{len(names)} free parameters")
    for name in names:
        result.fitted[name] = _value(p0, name)
    free = [n for n in names if n not in result.refused]
    while free:
        values, moves = _solve(p0, free, solved_rows)
        result.fitted.update(values)
        dropped = {}
        for name in free:
            a, b = BOUNDS[name.split(".")[-1]]
            if min(values[name] - a, b - values[name]) <= 1e-4 * (b - a):  # approached, never sat on
                dropped[name] = f"landed on the bound of its search [{a:g}, {b:g}]"
        if not dropped:
            # moved from where the rows saw it to where none does (another bound binds first): the rows
            # say only which side it lies on, and any value there prices every design alike
            result.one_sided = {n: "at least" if values[n] > _value(p0, n) else "at most"
                                for n in free if moves[n] < SEEN}
            break
        result.refused.update(dropped)
        free = [n for n in free if n not in dropped]
    result.after = _apply(p0, free, np.array([result.fitted[n] for n in free]))
    off = result.errors(result.after, "fit") + result.errors(result.after, "decode")
    worst, error = max(off, key=lambda e: abs(e[1]), default=(None, 0.0))
    if free and worst is not None and abs(error) > MISFIT:
        for name in free:  # constants that do not explain the runs they were fitted on
            result.refused[name] = (f"the refit leaves {worst.name} {error:+.0%} off: no values of these constants "
                                    "explain the runs (the model's structure is wrong for them)")
        result.one_sided = {}
        result.after = p0
    _refit_l1_conflict(result)
    return result


def _value(p: Params, name: str) -> float:
    """A refittable constant's value in `p`, by its name here."""
    if name == "dispatch_us":
        return p.dispatch_us
    if name == L1_CONFLICT:
        return p.l1_conflict
    if name == BD_TASK:
        return p.bd_task_us
    dev, what = name.split(".")
    return float(getattr(p.dram[dev], what))


def _solve(p0: Params, names: list[str], rows: list[Measured]) -> tuple[dict[str, float], dict[str, float]]:
    """The constants `names` that best fit `rows` from `p0`, within BOUNDS, and for each the most any
    row's log time moves per unit of its log at the solution (the solver's Jacobian)."""
    from scipy.optimize import least_squares

    lo = np.array([BOUNDS[n.split(".")[-1]][0] for n in names])
    hi = np.array([BOUNDS[n.split(".")[-1]][1] for n in names])
    x0 = np.clip(np.array([_value(p0, n) for n in names], dtype=np.float64), lo + 1e-9 * (hi - lo),
                 hi - 1e-9 * (hi - lo))

    def residuals(x: np.ndarray) -> np.ndarray:
        p = _apply(p0, names, x)
        return np.array([np.log(predicted_s(p, r.config) / r.seconds) for r in rows])

    sol = least_squares(residuals, x0, bounds=(lo, hi), x_scale=np.maximum(np.abs(x0), 1.0), method="trf")
    moves = np.max(np.abs(np.asarray(sol.jac)), axis=0) * np.abs(sol.x)
    return ({n: float(v) for n, v in zip(names, sol.x)}, {n: float(s) for n, s in zip(names, moves)})


def _decode_names(rows: list[Measured]) -> tuple[list[str], dict[str, str]]:
    """The constants the decode rows fit (one shim stream's rate per device, one shim task's setup),
    and those they cannot tell apart, with why: a stream's rate differs from DRAM's peak only over
    rows of several column counts (one B stream each), a task's setup only over rows whose task
    groups wait for their setup differently (queue_groups)."""
    if not rows:
        return [], {}
    names, unseen = [], {}
    for dev in sorted({r.device for r in rows}):
        cols = {r.config.array.cols for r in rows if r.device == dev}
        name = f"{dev}.stream_gbps_256"
        if len(cols) < 2:
            unseen[name] = (f"fitted from decode rows of {dev} on {len(cols)} column count: a stream's rate and "
                            "DRAM's peak are not told apart")
        else:
            names.append(name)
    if len({r.config.runtime.queue_groups for r in rows}) < 2:
        unseen[BD_TASK] = "fitted from decode rows that all keep as many task groups in flight: nothing to compare"
    else:
        names.append(BD_TASK)
    return names, unseen


def _refit_l1_conflict(result: Refit) -> None:
    """The cost of a shared L1 bank, on the allocation pairs (role "l1") with the refitted device
    constants: one parameter, written only from two rows or more that differ in their sharing."""
    from scipy.optimize import least_squares

    rows = [r for r in result.rows if r.role == "l1"]
    if not rows:
        return
    lo, hi = BOUNDS[L1_CONFLICT]

    def residuals(x: np.ndarray) -> np.ndarray:
        p = result.after.with_(l1_conflict=float(x[0]))
        return np.array([np.log(predicted_s(p, r.config) / r.seconds) for r in rows])

    x0 = float(np.clip(result.after.l1_conflict, lo + 1e-6, hi - 1e-6))
    sol = least_squares(residuals, np.array([x0]), bounds=([lo], [hi]), method="trf")
    value = float(sol.x[0])
    result.fitted[L1_CONFLICT] = value
    shared = {l1_banks.plan(r.config, r.config.array.l1_alloc).conflict_bytes > 0 for r in rows}
    if shared != {True, False}:
        result.refused[L1_CONFLICT] = (f"fitted from {len(rows)} L1 pair rows that "
                                       f"{'all' if shared == {True} else 'none'} share a bank: nothing to compare")
    elif min(value - lo, hi - value) <= 1e-4 * (hi - lo) and value > lo + 1e-4 * (hi - lo):
        result.refused[L1_CONFLICT] = f"landed on the bound of its search [{lo:g}, {hi:g}]"
    else:
        result.after = result.after.with_(l1_conflict=value)


def calibration_data(r: Refit, machine: str | None = None) -> dict[str, Any]:
    """calibration.json with the written constants replaced, each with its source and without the
    spread the sources gave the old value. A refitted peak goes to the `machine` profile (added
    when new, copied from the default one), which becomes the device's default."""
    data = copy.deepcopy(raw())
    files = sorted({row.record for row in r.rows})
    for name, value in r.fitted.items():
        if name in r.refused:
            continue
        n_fit = sum(row.role in ("fit", "decode") for row in r.rows)
        source = f"fitted by gemm-gen calibrate on {n_fit} measured fit and decode rows of {', '.join(files)}"
        if name == "dispatch_us":
            entry = data["runtime"]["dispatch_us"]
        elif name == L1_CONFLICT:
            entry = data["kernel"]["l1_conflict_cycles_per_collision"]
            n_fit = sum(row.role == "l1" for row in r.rows)
            source = f"fitted by gemm-gen calibrate on {n_fit} measured L1 allocation pair rows of {', '.join(files)}"
        elif name == BD_TASK:
            entry = data["runtime"][BD_TASK]
        elif name.endswith(".stream_gbps_256"):
            dev = name.split(".")[0]
            n_fit = sum(row.role in ("fit", "decode") and row.device == dev for row in r.rows)
            source = (f"fitted by gemm-gen calibrate on {n_fit} measured fit and decode rows of {dev} in "
                      f"{', '.join(files)}")
            entry = dram_entry(data, dev, "stream_gbps_256")
        else:
            dev, what = name.split(".")
            if what == "peak_gbps" and machine:
                d = data["dram"][dev]
                profile = d["machines"].setdefault(machine, copy.deepcopy(d["machines"][d["default_machine"]]))
                d["default_machine"] = machine
                entry = profile["peak_gbps"]
            else:
                entry = dram_entry(data, dev, what)  # a peak: the device's default machine profile's
        if name in r.one_sided:
            source += f"; {r.one_sided[name]} this value: {ONE_SIDED}"
        entry.pop("spread", None)
        entry.pop("spread_source", None)
        entry.update(value=round(value, 3), kind="calibrated", source=source)
    from_raw(data)  # still a valid calibration
    return data


def report(r: Refit) -> str:
    lines = ["gemm-gen calibrate: device constants refitted on measured runs (the model's figures stay predictions)"]
    for name, value in r.fitted.items():
        old = _value(r.before, name)
        state = f"NOT WRITTEN: {r.refused[name]}" if name in r.refused else "written"
        if name in r.one_sided:
            state += f", as {r.one_sided[name]} this: {ONE_SIDED}"
        lines.append(f"  {name:<28} {old:>10.3f} -> {value:>10.3f}  ({state})")
    for role, what in (("fit", "rows the constants were fitted on"),
                       ("l1", "L1 allocation pairs, the bank cost's rows"),
                       ("decode", "decode calls, a stream's rate's and a task's setup's rows"),
                       ("check", "rows only checked (out of sample)")):
        before, after = r.errors(r.before, role), r.errors(r.after, role)
        if not before:
            lines.append(f"  {role} rows: none")
            continue
        mean = [float(np.mean([abs(e) for _, e in errs])) for errs in (before, after)]
        worst = [float(max(abs(e) for _, e in errs)) for errs in (before, after)]
        lines.append(f"  {role} rows ({what}, {len(before)}): mean |error| {mean[0]:.1%} -> {mean[1]:.1%}, "
                     f"max {worst[0]:.1%} -> {worst[1]:.1%}")
        for (row, e0), (_, e1) in zip(before, after):
            lines.append(f"    {row.name}: {e0:+.1%} -> {e1:+.1%}")
    return "\n".join(lines)
