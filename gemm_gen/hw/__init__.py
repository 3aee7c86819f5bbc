"""Hardware descriptions of the supported NPUs."""

from .devices import DEVICES, NPU1, NPU2, Device, DmaSpec, TileKind, device

__all__ = ["DEVICES", "NPU1", "NPU2", "Device", "DmaSpec", "TileKind", "device"]
