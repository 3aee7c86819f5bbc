"""User-facing errors: one line naming the limit, the value and the fix."""

from __future__ import annotations


class GemmGenError(Exception):
    """A problem with the user's request; the CLI prints it on one line and exits 2."""

    def __init__(self, what: str, fix: str = "") -> None:
        self.what = what
        self.fix = fix
        super().__init__(f"{what}; {fix}" if fix else what)


class CacheError(GemmGenError):
    """The build cache's directory cannot be used (missing, not a folder, unreadable), or a path in it
    that gemm_gen would write is not an entry gemm_gen created."""


class ConfigError(GemmGenError):
    """A GemmConfig that breaks a divisibility, budget or type rule."""


class DmaLimitError(GemmGenError):
    """An access pattern that does not fit the DMA of the tile that runs it."""


class TxnFieldError(GemmGenError):
    """A value the host encoder would write into an instruction-stream field too narrow for it (a
    BD wrap, stride, length, iteration, repeat or id, a register address): written anyway it would
    spill into the neighbouring bits, so it is refused."""


class SimulationError(GemmGenError):
    """The simulated design misbehaved (deadlock, BD exhaustion, bad data)."""


class DeadlockError(SimulationError):
    """No actor of the simulated array can make progress."""


class BdExhaustionError(SimulationError):
    """More buffer descriptors live on a tile than it has."""


class QueueOverflowError(SimulationError):
    """A push that could find its shim channel's task queue full (the hardware drops it)."""


class LayoutError(SimulationError):
    """Data reached a kernel or DRAM in the wrong layout."""


class OutOfRangeError(SimulationError):
    """An access pattern reads or writes outside its buffer."""


class BuildError(GemmGenError):
    """A build tool ran and failed (not bad input: exit 1)."""


class RunTimeout(BuildError):
    """An NPU run that did not complete within its time limit (exit 1, as a failed build: the design
    or the machine is at fault, not the request); `make validate` records it as TIMEOUT."""

    def __init__(self, what: str, fix: str = "", timeout_ms: int = 0) -> None:
        super().__init__(what, fix)
        self.timeout_ms = timeout_ms


class StackError(BuildError):
    """A core's measured stack frame is larger than the stack it was given (backends/stack.py)."""

    def __init__(self, what: str, fix: str, frame_bytes: int, stack_bytes: int) -> None:
        super().__init__(what, fix)
        self.frame_bytes = frame_bytes
        self.stack_bytes = stack_bytes


class ToolchainMissing(GemmGenError):
    """A toolchain part (mlir-aie, Peano, XRT, an NPU) is not available here."""


class NumericsWarning(UserWarning):
    """A result that differs from the exact product beyond one rounding (saturated or overflowed
    outputs): the value is what the hardware computes, and the warning says what it lost."""
