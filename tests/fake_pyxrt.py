"""A strict recording stand-in for pyxrt, TESTS ONLY: it is not XRT and runs nothing on an NPU.

It mirrors the pyxrt calls mlir-aie's host code and gemm_gen make (Xilinx/XRT
src/python/pybind11/src/pyxrt.cpp): device(index), xclbin(path) with get_kernels()/get_uuid(),
device.register_xclbin, hw_context(device, uuid) (only for a registered xclbin), kernel(context,
name) with group_id, bo(device, size, flags, group) with flags from bo.flags and groups from the
kernel, map / sync(direction) with xclBOSyncDirection members, kernel(...) returning a started run
whose wait() / wait(timeout_ms) gives an ert_cmd_state (run.wait below), device.get_info(xrt_info_device.X)
as a string; buffer objects have a host and a device side that only sync() copies between. Anything else
pybind11 would refuse (wrong argument kinds, unknown enum members, an
argument index beyond the kernel's) raises TypeError or RuntimeError as pyxrt does.

"Executing" computes C from the A/B buffers with the exact reference, so the runner's buffer
handling, syncs and checks can be tested; `broken=True` returns zeros instead; `configs` names the
design of each xclbin path, for sweeps of many designs; `calls` names the call size of each
instruction stream (by its bytes) for one design that serves many sizes: a run with a stream it
does not know fails as a wrong stream would on the NPU; `hangs` makes kernels that never complete
(True: every xclbin's, or a collection of xclbin paths): a timed wait returns ERT_CMD_STATE_TIMEOUT
at once, as XRT's does when its limit passes, and an untimed one raises UntimedWait (the real one
would block forever), which no `except Exception` catches, so a test whose code forgets the limit
fails instead of hanging.
"""

from __future__ import annotations

import enum
from collections.abc import Collection
from dataclasses import replace
from typing import Any

import numpy as np

from gemm_gen.design.host_buffers import dram_arrays, host_values, output_bytes, read_epilogue_tiles
from gemm_gen.facts.bfp16 import to_tiles
from gemm_gen.facts.numerics import reference, reference_bfp16
from gemm_gen.spec.call import CallPlan
from gemm_gen.spec.config import GemmConfig


class xclBOSyncDirection(enum.Enum):  # noqa: N801 - pyxrt's names
    XCL_BO_SYNC_BO_TO_DEVICE = 0
    XCL_BO_SYNC_BO_FROM_DEVICE = 1
    XCL_BO_SYNC_BO_GMIO_TO_AIE = 2
    XCL_BO_SYNC_BO_AIE_TO_GMIO = 3


class ert_cmd_state(enum.Enum):  # noqa: N801 - pyxrt binds these (not ert.h's RUNNING = 3)
    ERT_CMD_STATE_NEW = 1
    ERT_CMD_STATE_QUEUED = 2
    ERT_CMD_STATE_COMPLETED = 4
    ERT_CMD_STATE_ERROR = 5
    ERT_CMD_STATE_ABORT = 6
    ERT_CMD_STATE_SUBMITTED = 7
    ERT_CMD_STATE_TIMEOUT = 8
    ERT_CMD_STATE_NORESPONSE = 9
    ERT_CMD_STATE_SKERROR = 10
    ERT_CMD_STATE_SKCRASHED = 11


class xrt_info_device(enum.Enum):  # noqa: N801
    bdf, interface_uuid, kdma, max_clock_frequency_mhz, m2m, name, nodma, offline = range(8)
    electrical, thermal, mechanical, memory, platform, pcie_info, host, dynamic_regions, vmr = range(8, 17)


class _BoFlags(enum.Enum):
    normal, cacheable, device_only, host_only, p2p, svm = range(6)


KERNEL_ARGS = 8  # mlir-aie's MLIR_AIE kernel: opcode, instr bo, instr count, 5 buffer objects
UINT_MAX = 2**32 - 1  # run.wait's timeout_ms is a C++ unsigned int


class UntimedWait(BaseException):  # noqa: N818 - not an Exception: nothing in gemm_gen may catch it
    """An untimed wait on a kernel that never completes: the real pyxrt would block forever."""


def _wait_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """run.wait's overloads at the pinned XRT (Xilinx/XRT src/python/pybind11/src/pyxrt.cpp): wait(),
    bound to XRT's wait(0) (no limit), and wait(timeout_ms) with an unsigned int. The arguments have no
    py::arg names, so pybind11 takes no keyword; its integer caster refuses floats, strings, negative
    numbers and values past unsigned int (bool, an int subclass, it takes). The limit in ms, 0 for none."""
    ok = not kwargs and (not args or (len(args) == 1 and isinstance(args[0], int) and 0 <= args[0] <= UINT_MAX))
    if not ok:
        given = ", ".join([*(type(a).__name__ for a in args), *(f"{k}=" for k in kwargs)])
        raise TypeError("wait(): incompatible function arguments. The following argument types are supported:\n"
                        "    1. (self: pyxrt.run) -> pyxrt.ert_cmd_state\n"
                        f"    2. (self: pyxrt.run, arg0: int) -> pyxrt.ert_cmd_state\n\nInvoked with: {given}")
    return int(args[0]) if args else 0


class FakeXrt:
    """Use an instance in place of the pyxrt module."""

    xclBOSyncDirection = xclBOSyncDirection
    ert_cmd_state = ert_cmd_state
    xrt_info_device = xrt_info_device

    def __init__(self, config: GemmConfig | None = None, broken: bool = False, device_name: str | None = None,
                 configs: dict[str, GemmConfig] | None = None, calls: dict[bytes, CallPlan] | None = None,
                 hangs: bool | Collection[str] = False, lanes: tuple[int, ...] | None = None) -> None:
        if device_name is None:  # an NPU of the config's family, as XRT names them
            device_name = "RyzenAI-npu1" if config is not None and config.array.device == "npu1" else "RyzenAI-npu4"
        self.config, self.broken, self.device_name = config, broken, device_name
        self.configs = configs or {}  # xclbin path -> the design it was built for (sweeps)
        self.calls = calls or {}  # instruction stream bytes -> the call size it runs
        self.hangs = hangs  # True, or the xclbin paths whose kernel never completes
        # an NPU whose mmul reads each r x t block of C out in another lane order: position i (row-major) of every
        # block gets the value of position lanes[i] (gemm_gen/facts/lanes.py measures it; None: row-major, as aie_api
        # says)
        self.lanes = lanes
        self.log: list[tuple] = []
        self.registered: set[str] = set()
        fake = self

        class bo:  # noqa: N801
            flags = _BoFlags
            normal, cacheable, device_only = _BoFlags.normal, _BoFlags.cacheable, _BoFlags.device_only
            host_only, p2p, svm = _BoFlags.host_only, _BoFlags.p2p, _BoFlags.svm

            # pyxrt.cpp @00f9022b (stored version; XRT is pinned only as >= 2.21):
            # pybo.def(py::init<xrt::device, size_t, xrt::bo::flags, xrt::memory_group>()); a size of 0
            # refused with the stand-in's own wording (xrt::bo's check, xrt_bo.cpp, not read)
            def __init__(self, device: Any, nbytes: int, flags: _BoFlags, group: int) -> None:
                if device is not fake._device or not isinstance(nbytes, int) or not isinstance(flags, _BoFlags) \
                        or not isinstance(group, int):
                    raise TypeError("__init__(): incompatible constructor arguments (device, size: int, "
                                    "flags: pyxrt.bo.flags, memory_group: int)")
                if nbytes <= 0:
                    raise RuntimeError("bo: size must be positive")
                self.mem = bytearray(nbytes)  # the host's view (map())
                self.device_mem = bytearray(nbytes)  # what the NPU reads and writes; sync() copies between them
                self.flags, self.group = flags, group
                fake.log.append(("bo", nbytes, flags.name, group))

            def map(self) -> memoryview:
                return memoryview(self.mem)

            def size(self) -> int:
                return len(self.mem)

            # pyxrt.cpp @00f9022b (stored version; XRT is pinned only as >= 2.21): .def("sync", xrt::bo&,
            # xclBOSyncDirection[, size_t, size_t])
            def sync(self, direction: xclBOSyncDirection, size: int | None = None, offset: int = 0) -> None:
                if not isinstance(direction, xclBOSyncDirection):
                    raise TypeError("sync(): incompatible function arguments (pyxrt.xclBOSyncDirection)")
                if direction is xclBOSyncDirection.XCL_BO_SYNC_BO_TO_DEVICE:
                    self.device_mem[:] = self.mem
                elif direction is xclBOSyncDirection.XCL_BO_SYNC_BO_FROM_DEVICE:
                    self.mem[:] = self.device_mem
                fake.log.append(("sync", self.group, direction.name.removeprefix("XCL_BO_SYNC_BO_").lower()))

        self.bo = bo
        self._device: Any = None

    # ---- device, xclbin, context, kernel ----------------------------------------------------------
    # pyxrt.cpp @00f9022b (stored version; XRT is pinned only as >= 2.21): py::class_<xrt::device>,
    # py::init<unsigned int>() and py::init(std::string);
    # .def("get_info", xrt::device&, xrt::info::device)
    def device(self, index: int = 0) -> Any:
        if not isinstance(index, (int, str)):
            raise TypeError("device(): incompatible constructor arguments")
        fake = self

        class Device:
            def register_xclbin(self, xclbin: Any) -> None:
                fake.registered.add(xclbin.get_uuid())
                fake.log.append(("register_xclbin",))

            def get_info(self, key: xrt_info_device) -> str:
                if not isinstance(key, xrt_info_device):
                    raise TypeError("get_info(): incompatible function arguments (pyxrt.xrt_info_device)")
                return fake.device_name if key is xrt_info_device.name else f"<{key.name}>"

        self._device = Device()
        self.log.append(("device", index))
        return self._device

    # pyxrt.cpp @00f9022b (stored version; XRT is pinned only as >= 2.21): py::class_<xrt::xclbin> constructed
    # from a filename (py::init<const std::string&>)
    def xclbin(self, path: str) -> Any:
        if not isinstance(path, str):
            raise TypeError("xclbin(): incompatible constructor arguments (filename: str)")

        class Xclbin:
            def get_kernels(self) -> list[Any]:
                methods = {"get_name": lambda self: "MLIR_AIE", "get_num_args": lambda self: KERNEL_ARGS}
                return [type("K", (), methods)()]

            def get_uuid(self) -> str:
                return "uuid-" + path

        self.log.append(("xclbin", path))
        self.config = self.configs.get(path, self.config)
        return Xclbin()

    # pyxrt.cpp @00f9022b (stored version; XRT is pinned only as >= 2.21): hw_context(device, uuid); an xclbin not
    # registered with the device, and a kernel name the context
    # lacks, refused by XRT with other words (xrt_hw_context.cpp, xrt_kernel.cpp, not read): the stand-in's own
    def hw_context(self, device: Any, uuid: str) -> Any:
        if device is not self._device or uuid not in self.registered:
            raise RuntimeError("hw_context: the xclbin is not registered with this device")
        return ("context", uuid)

    def kernel(self, context: Any, name: str) -> Any:
        if not (isinstance(context, tuple) and context[0] == "context") or name != "MLIR_AIE":
            raise RuntimeError(f"kernel: no kernel {name!r} in this context")  # xrt_kernel.cpp (not read)
        fake = self

        xclbin_path = context[1].removeprefix("uuid-")
        hung = fake.hangs is True or (not isinstance(fake.hangs, bool) and xclbin_path in fake.hangs)

        class Run:  # no abort(): pyxrt binds none
            def __init__(self, state: ert_cmd_state, never_completes: bool = False) -> None:
                self._state, self.never_completes = state, never_completes

            def wait(self, *args: Any, **kwargs: Any) -> ert_cmd_state:
                timeout_ms = _wait_arguments(args, kwargs)
                fake.log.append(("wait", timeout_ms))
                if self.never_completes:
                    if timeout_ms == 0:  # the stand-in's own guard: real pyxrt would block forever
                        raise UntimedWait(f"wait() without a limit on a kernel of {xclbin_path} that never "
                                          "completes: pyxrt would block forever")
                    return ert_cmd_state.ERT_CMD_STATE_TIMEOUT
                return self._state

            def state(self) -> ert_cmd_state:  # a hung run's SUBMITTED is assumed (XRT may say RUNNING, 3,
                # which pyxrt's enum does not name); gemm_gen never reads it
                return self._state

        # pyxrt.cpp @00f9022b (stored version; XRT is pinned only as >= 2.21): .def("group_id",
        # &xrt::kernel::group_id) (XRT refuses an argument index past the kernel's); its
        # __call__ sets each argument inside try / catch (std::exception), so real pyxrt ignores an argument it
        # cannot set: refusing too many or ill-typed arguments is the stand-in's own, stricter rule
        class Kernel:
            def group_id(self, i: int) -> int:
                if not 0 <= i < KERNEL_ARGS:
                    raise RuntimeError(f"group_id: kernel argument {i} out of range")
                return i

            def __call__(self, *args: Any) -> Run:
                if len(args) > KERNEL_ARGS:
                    raise RuntimeError(f"kernel: {len(args)} arguments for a kernel of {KERNEL_ARGS}")
                for i, a in enumerate(args):
                    if not isinstance(a, (int, fake.bo)) or isinstance(a, bool):
                        raise TypeError(f"kernel argument {i}: expected pyxrt.bo or int, got {type(a).__name__}")
                opcode, instr, count, a, b, c = args[:6]
                fake.log.append(("run", opcode, count, instr.group, a.group, b.group, c.group))
                if hung:  # C is never written
                    return Run(ert_cmd_state.ERT_CMD_STATE_SUBMITTED, never_completes=True)
                call = None
                if fake.calls:
                    call = fake.calls.get(bytes(instr.device_mem[: 4 * count]))
                    if call is None:
                        return Run(ert_cmd_state.ERT_CMD_STATE_ERROR)  # a stream for no size of this xclbin
                    fake.log.append(("size", str(call.problem)))
                fake.execute(a.device_mem, b.device_mem, c.device_mem, call)  # unsynced host data is not seen
                return Run(ert_cmd_state.ERT_CMD_STATE_COMPLETED)

        return Kernel()

    def execute(self, a_mem: bytearray, b_mem: bytearray, c_mem: bytearray, call: CallPlan | None = None) -> None:
        c = self.config
        assert c is not None
        call = call or c.call
        if self.broken:
            c_mem[:] = bytes(len(c_mem))
            return
        a_dram, b_dram = dram_arrays(c, np.frombuffer(bytes(a_mem), np.uint8), np.frombuffer(bytes(b_mem), np.uint8),
                                     call)
        a, b = host_values(c, a_dram, b_dram, call)
        # the fused epilogue's data, as the cores read it from B's epilogue tiles (columns past N: padding)
        try:
            bias, requant = read_epilogue_tiles(c, call, b_dram) if c.epilogue.needs_tile else (None, None)
        except ValueError:  # no epilogue tile in B's buffer: P = Q = 0 and a [0, 0] clamp make every output 0
            c_mem[:] = bytes(len(c_mem))
            return
        if bias is not None:
            bias = bias[: call.N]
        if requant is not None:
            requant = replace(requant, multiplier=requant.multiplier[: call.N], shift=requant.shift[: call.N])
        rows, cols = call.storage("C")  # C's matrix (or its padded copy); the buffer may hold slack past it
        if c.types.t_out.is_block:  # the kernel's own codes (re-encoding decoded values can move a block)
            exps, mants = reference_bfp16(c.numerics, a, b, c.tiling.k, call.k_walk)
            full_e = np.zeros((rows, cols // 8), np.uint8)
            full_m = np.zeros((rows, cols), np.int8)
            full_e[: call.M, : exps.shape[1]], full_m[: call.M, : mants.shape[1]] = exps, mants
            data = to_tiles(full_e, full_m)
        else:
            full = np.zeros((cols, rows) if c.layout.c_col_maj else (rows, cols), dtype=np.float64)
            full[: call.M, : call.N] = reference(c.numerics, a, b, c.tiling.k, call.k_walk, bias, requant)
            if self.lanes is not None:
                full = _lanes_permuted(full, c.kernel.mmul[0], c.kernel.mmul[2], self.lanes)
            data = (full.T if c.layout.c_col_maj else full).astype(c.types.t_out.host)  # column-major C: C^T's rows
        assert data.nbytes == output_bytes(c, call) <= len(c_mem)
        c_mem[: data.nbytes] = np.ascontiguousarray(data).tobytes()


def _lanes_permuted(c: np.ndarray, r: int, t: int, lanes: tuple[int, ...]) -> np.ndarray:
    """C with position i (row-major) of every whole r x t block holding the value of position lanes[i]."""
    rows, cols = (c.shape[0] // r) * r, (c.shape[1] // t) * t
    out = c.copy()
    blocks = c[:rows, :cols].reshape(rows // r, r, cols // t, t).transpose(0, 2, 1, 3).reshape(-1, r * t)
    out[:rows, :cols] = (blocks[:, list(lanes)].reshape(rows // r, cols // t, r, t).transpose(0, 2, 1, 3)
                         .reshape(rows, cols))
    return out
