"""The array-level options' ranges on a device: the column counts designs use, the core stack, and
the task groups a shim channel's queue holds. The CLI (naming its flags) and checks.py (naming the
config's fields) both ask these, so the ranges cannot drift apart."""

from __future__ import annotations

from ..hw.devices import Device, TileKind

STACK_ALIGN = 16  # bytes: aiecc places the stack in 16-byte units


def columns_ok(dev: Device, cols: int) -> bool:
    """Whether a design can use `cols` columns of the device (mlir-aie's column-device variants)."""
    return cols in dev.column_devices


def stack_ok(dev: Device, stack_bytes: int) -> bool:
    """Whether `stack_bytes` is a stack aiecc can place: a positive multiple of 16 below L1's size."""
    return 0 < stack_bytes < dev.l1_bytes and stack_bytes % STACK_ALIGN == 0


def queue_ok(dev: Device, queue_groups: int) -> bool:
    """Whether `queue_groups` task groups in flight fit a shim channel's task queue (the hardware
    drops a push onto a full one, mlir-aie PR #3734)."""
    return 1 <= queue_groups <= dev.dma[TileKind.SHIM].task_queue_depth
