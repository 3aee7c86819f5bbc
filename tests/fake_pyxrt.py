"""A recording stand-in for pyxrt, TESTS ONLY: it is not XRT and runs nothing on an NPU.

It keeps the calls mlir-aie's host code makes (device, xclbin, hw_context, kernel, bo with
flags/group ids, map, sync, kernel(opcode, instr_bo, count, *bos).wait(), ert_cmd_state) and
"executes" by computing C from the A/B buffers with the exact reference, so the runner's buffer
handling, syncs and checks can be tested. `broken=True` returns zeros instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gemm_gen.config import GemmConfig
from gemm_gen.numerics import reference


class xclBOSyncDirection:  # noqa: N801 - pyxrt's names
    XCL_BO_SYNC_BO_TO_DEVICE = "to_device"
    XCL_BO_SYNC_BO_FROM_DEVICE = "from_device"


class ert_cmd_state:  # noqa: N801
    ERT_CMD_STATE_COMPLETED = "completed"
    ERT_CMD_STATE_ERROR = "error"


class FakeXrt:
    """Use an instance in place of the pyxrt module."""

    xclBOSyncDirection = xclBOSyncDirection
    ert_cmd_state = ert_cmd_state

    def __init__(self, config: GemmConfig, broken: bool = False) -> None:
        self.config, self.broken = config, broken
        self.log: list[tuple] = []
        fake = self

        class bo:  # noqa: N801
            cacheable = "cacheable"
            host_only = "host_only"

            def __init__(self, device: Any, nbytes: int, flags: str, group: int) -> None:
                self.mem = bytearray(nbytes)
                self.flags, self.group = flags, group
                self.synced: str | None = None
                fake.log.append(("bo", nbytes, flags, group))

            def map(self) -> memoryview:
                return memoryview(self.mem)

            def sync(self, direction: str) -> None:
                self.synced = direction
                fake.log.append(("sync", self.group, direction))

        self.bo = bo

    def device(self, index: int) -> Any:
        self.log.append(("device", index))
        return self

    def register_xclbin(self, xclbin: Any) -> None:
        self.log.append(("register_xclbin",))

    def xclbin(self, path: str) -> Any:
        class Xclbin:
            def get_kernels(self) -> list[Any]:
                return [type("K", (), {"get_name": lambda self: "MLIR_AIE"})()]

            def get_uuid(self) -> str:
                return "uuid"

        self.log.append(("xclbin", path))
        return Xclbin()

    def hw_context(self, device: Any, uuid: str) -> str:
        return "context"

    def kernel(self, context: str, name: str) -> Any:
        fake = self

        class Kernel:
            def group_id(self, i: int) -> int:
                return i

            def __call__(self, opcode: int, instr: Any, count: int, a: Any, b: Any, c: Any) -> Any:
                fake.log.append(("run", opcode, count, instr.group, a.group, b.group, c.group))
                assert all(x.synced == xclBOSyncDirection.XCL_BO_SYNC_BO_TO_DEVICE for x in (instr, a, b))
                fake.execute(a.mem, b.mem, c.mem)
                return type("Run", (), {"wait": lambda self: ert_cmd_state.ERT_CMD_STATE_COMPLETED})()

        return Kernel()

    def execute(self, a_mem: bytearray, b_mem: bytearray, c_mem: bytearray) -> None:
        c = self.config
        a = np.frombuffer(bytes(a_mem), dtype=c.t_in.host).reshape(c.Mp, c.Kp)
        b = np.frombuffer(bytes(b_mem), dtype=c.t_in.host)
        b = b.reshape(c.Np, c.Kp).T if c.b_col_maj else b.reshape(c.Kp, c.Np)
        out = np.zeros((c.Mp, c.Np), dtype=c.t_out.host) if self.broken else reference(c.numerics, a, b, c.k)
        c_mem[:] = np.ascontiguousarray(out).view(np.uint8).tobytes()
