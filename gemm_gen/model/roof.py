"""The DRAM roof of one call: the bytes the call cannot avoid moving, at the model's DRAM rate.

bytes = A (M x K) + B (K x N) read once + C (M x N) written once, unpadded, at each operand's bytes
per value (bfp16: 1.125), and a W4A16 B's scale (and zero-point) rows, one per group of K rows per
column (groupquant: ceil(K / g) x N bf16 each); rate = the peak of the device's machine profile in the model's
parameters (params.Dram.peak_gbps, which `--dram-gbps` and `--machine` replace). No design moves
fewer bytes, and none moves them faster than that peak, so `roof_s / predicted time` is the share
of the roof a design reaches (issue 22: decode calls, M <= 16, live or die by it).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..facts import devices
from ..facts.dtypes import BF16, dtype
from ..facts.groupquant import groups_along_k
from ..spec.request import Problem
from .params import Params, load
from .perf import GIGA, shim_stream_rates


@dataclass(frozen=True)
class DramRoof:
    """A call's unavoidable DRAM bytes and the time they take at the DRAM peak (all predicted)."""

    bytes: int
    gbps: float  # the model's DRAM peak for the device
    machine: str  # the machine profile the peak is from

    @property
    def time_s(self) -> float:
        return self.bytes / (self.gbps * GIGA)

    def fraction(self, time_s: float) -> float:
        """The share of the roof a call of `time_s` reaches (1.0: at the roof)."""
        return self.time_s / time_s

    def to_json(self, time_s: float) -> dict[str, object]:
        return {"predicted": True, "bytes": self.bytes, "gbps": self.gbps, "machine": self.machine,
                "time_us": self.time_s * 1e6, "fraction": self.fraction(time_s)}


def call_bytes(size: Problem, dtype_in: str, dtype_b: str, dtype_out: str, group_size: int = 0,
               zero_points: bool = False) -> int:
    """Bytes of A and B read once and C written once, as the user's matrices hold them (no padding); with
    `group_size` (W4A16), B's scale rows too, and as many zero-point rows with `zero_points`."""
    M, K, N = size.M, size.K, size.N
    total = (M * K * dtype(dtype_in).elem_bytes + b_bytes(size, dtype_b, group_size, zero_points)
             + M * N * dtype(dtype_out).elem_bytes)
    return int(round(total))


def b_bytes(size: Problem, dtype_b: str, group_size: int = 0, zero_points: bool = False) -> float:
    """B's bytes as the user holds them: K x N values, and a W4A16 B's scale (and zero-point) rows."""
    K, N = size.K, size.N
    total = K * N * dtype(dtype_b).elem_bytes
    if group_size:
        total += groups_along_k(K, group_size) * N * BF16.elem_bytes * (2 if zero_points else 1)
    return float(total)


def dram_roof(device: str, size: Problem, dtype_in: str, dtype_b: str, dtype_out: str,
              params: Params | None = None, group_size: int = 0, zero_points: bool = False) -> DramRoof:
    """The DRAM roof of one call of `size` on `device` under the model's parameters (default: the
    calibrated ones); `group_size`, `zero_points`: a W4A16 B's scale rows (call_bytes)."""
    d = (params or load()).dram[device]
    return DramRoof(call_bytes(size, dtype_in, dtype_b, dtype_out, group_size, zero_points), d.peak_gbps,
                    d.machine)


def floor_s(device: str, size: Problem, dtype_in: str, dtype_b: str, dtype_out: str, streams: int, tasks: int,
            params: Params | None = None, group_size: int = 0, zero_points: bool = False) -> float:
    """No faster, under the model's terms, than any design of this call whose B crosses `streams` shim
    streams and whose first task group has `tasks` shim tasks (model/perf.py): dispatch, that group's
    setup (charged before the array runs), and the longest of the DRAM roof and B over its streams at one
    stream's rate (the bursts it keeps in flight) and at its port's (4 bytes a cycle). A bound, not a
    prediction: fill, drain, run losses and the cores only add."""
    p = params or load()
    b = b_bytes(size, dtype_b, group_size, zero_points) / streams
    roof = dram_roof(device, size, dtype_in, dtype_b, dtype_out, p, group_size, zero_points).time_s
    return (p.dispatch_us * 1e-6 + tasks * p.bd_task_us * 1e-6
            + max(roof, b / min(shim_stream_rates(p, devices.device(device)))))
