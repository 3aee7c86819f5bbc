"""What neighbour-shared L1 (spec/rules/shared_l1.py; docs/shared_l1.md) changes in the predicted time: PREDICTED,
from the streams the design runs and what the kernel loads, with two assumptions stated (docs/model.md "Shared L1"):

- **Streams** (measured by nothing; the structure of docs/shared_l1.md 3.3): with B split each core's own S2MM
  brings every other B object (its slot's) and the memtile's two MM2S channels run side by side, so B's L1 transfer
  per k-step is half the unshared one. A on its west holder keeps the holder's stream as it was (the holder bounds
  the pair); the east core's is gone, which frees a channel and costs nothing.
- **The relay** (ASSUMED): the follower starts once the leader has acquired the full lock and released the relay
  lock; that lag is assumed to be at most one kernel switch (`switch_cycles`, calibrated: a call's lock acquires
  and releases and the call itself). It is exposed only where the L1 transfer bounds the k-step: the refill waits
  for the follower's release.
- **Two cores on one buffer** (ASSUMED rate): AM020 "AIE-ML Memory Module": a bank serves one request a cycle and
  the other requester retries the next cycle. Assumed: the two readers' loads from a shared buffer are independent
  in time, each at its time-averaged rate (model/l1_stall.access_bytes over the call's cycles), as if the
  buffer were one bank (an upper bound for independent streams); each collision costs one of the two a cycle, so
  each core loses loads x the other's rate / 2 cycles per call. Until a `make validate` row times one core alone
  against a pair on one buffer.
"""

from __future__ import annotations

import numpy as np

from ..spec.config import GemmConfig
from ..spec.rules import Ints, shared_l1
from .l1_stall import access_bytes
from .params import Params

ASSUMPTION = ("two readers' loads from a shared buffer independent in time, as if in one bank, each collision one "
              "cycle (AM020); the relay lag at most one kernel switch; neither measured")


def b_streams(share: str) -> int:
    """How many memtile streams bring one core's B objects side by side: two with B split, else one."""
    return 2 if shared_l1.shared(share, "B") else 1


def relay_cycles(share: str, p: Params) -> float:
    """The follower's lag behind the leader per object (assumed: one kernel switch), 0 without sharing."""
    return p.switch_cycles if share != shared_l1.NONE else 0.0


def two_reader_cycles(c: GemmConfig, call_cycles: float) -> float:
    """Cycles per k-step each core of a pair waits on the other's loads from the buffers they share."""
    v = c.variant
    if c.array.share_l1 == shared_l1.NONE or call_cycles <= 0 or v is None:
        return 0.0
    t = c.tiling
    return float(two_reader_stall(c, c.t_ma, t.k, t.n, t.rho, v.er, v.et, np.asarray(call_cycles)))


def two_reader_stall(c: GemmConfig, t_ma: Ints, k: Ints, n: Ints, rho: Ints, er: Ints, et: Ints,
                     call_cycles: np.ndarray) -> np.ndarray:
    """two_reader_cycles for any tiling of c's options (l1_stall.access_bytes; arrays broadcast): what the tuner's
    vectorised ranking adds per k-step, so that it weighs the two readers as the priced design does."""
    shape = np.broadcast(np.asarray(t_ma), np.asarray(k), np.asarray(n), np.asarray(rho), call_cycles).shape
    share = c.array.share_l1
    if share == shared_l1.NONE:
        return np.zeros(shape)
    loads = access_bytes(c, t_ma, k, n, rho, er, et)
    vector = c.dev.isa.vld_bytes
    calls = np.where(call_cycles > 0, call_cycles, np.inf)  # no call, no rate
    per_call = np.zeros(shape)
    for operand in shared_l1.OPERANDS[share]:
        loaded = np.asarray(loads[operand], dtype=np.float64) / vector  # vector loads one call makes from the buffer
        per_call = per_call + loaded * (loaded / calls) / 2
    return np.asarray(per_call * rho, dtype=np.float64)
