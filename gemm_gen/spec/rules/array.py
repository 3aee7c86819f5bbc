"""The array-level options' ranges on a device: the column counts designs use, the core stack, and
the task groups a shim channel's queue holds. The CLI (naming its flags) and spec/checks.py (naming the
config's fields) both ask these, so the ranges cannot drift apart; and the mappings of the grid
(whole-array, or one core row for decode calls)."""

from __future__ import annotations

import numpy as np

from ...facts.devices import Device, TileKind
from . import Ints
from .decode_split import SPLIT_MAPPING, is_split, virtual_columns

STACK_ALIGN = 16  # bytes: aiecc places the stack in 16-byte units


def columns_ok(dev: Device, cols: int, rows: int = 0) -> bool:
    """Whether a design can use `cols` columns of the device (mlir-aie's column-device variants), or, in one
    row, one virtual column per core (the split decode placement, spec/rules/decode_split.py)."""
    return cols in dev.column_devices or is_split(dev, rows, cols)


def stack_ok(dev: Device, stack_bytes: int) -> bool:
    """Whether `stack_bytes` is a stack aiecc can place: a positive multiple of 16 below L1's size."""
    return 0 < stack_bytes < dev.l1_bytes and stack_bytes % STACK_ALIGN == 0


def queue_ok(dev: Device, queue_groups: int) -> bool:
    """Whether `queue_groups` task groups in flight fit a shim channel's task queue (the hardware
    drops a push onto a full one, mlir-aie PR #3734)."""
    return 1 <= queue_groups <= dev.dma[TileKind.SHIM].task_queue_depth


# ---- the decode mapping (issue 22) ---------------------------------------------------------------
# Calls of at most this many rows are decode steps (one token or a few: matrix-vector shaped); the
# issue's bound, which the roofline plot marks and for which the tuner also weighs the decode mapping.
DECODE_M_MAX = 16
# The mappings of the rows x cols grid: the whole array (every core row, A split over the rows), one core
# row ("decode": m covers the padded M, every column a slice of N, B read once), or one row of one virtual
# column per core ("decode-split": every core a slice of N, B over every shim channel but A's;
# spec/rules/decode_split.py). MAPPINGS: spec/request.py, with the option


def decode_call(M: Ints) -> Ints:
    """Whether a call of M rows is decode shaped (M <= DECODE_M_MAX)."""
    return np.asarray(M) <= DECODE_M_MAX if isinstance(M, np.ndarray) else M <= DECODE_M_MAX


def mapping_rows(dev: Device, mapping: str) -> int:
    """The grid rows a mapping uses on `dev`."""
    return 1 if mapping in ("decode", SPLIT_MAPPING) else dev.core_rows


def mapping_cols(dev: Device, mapping: str) -> int:
    """The grid columns a mapping fixes on `dev` (0: any the device offers, the option's)."""
    return virtual_columns(dev) if mapping == SPLIT_MAPPING else 0


def mapping_of(dev: Device, rows: int, cols: int = 0) -> str:
    """The mapping a design of `rows` x `cols` is."""
    if is_split(dev, rows, cols):
        return SPLIT_MAPPING
    return "decode" if rows == 1 and dev.core_rows != 1 else "whole-array"


def rows_ok(dev: Device, rows: int) -> bool:
    """Whether a design can use `rows` core rows: all of them, or one (the decode mapping)."""
    return rows in (1, dev.core_rows)
