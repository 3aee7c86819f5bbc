"""User-facing errors: one line naming the limit, the value and the fix.

A message names an option through a placeholder, `opt("dtype_out", "i8")`, never through a front end's
spelling of it: the CLI reads it as `--dtype_out i8`, make as `DTYPE_OUT=i8`, the operator as
`dtype_out='i8'` (spec/request.py spells each from the option table). `str(error)`, `error.what` and `error.fix`
read in the spelling in use (the CLI's unless a front end chose another: `spelling`); `error.spelled(speller)`
in a given one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

# A placeholder is MARK name (SEP json-value)* MARK: control characters no message text holds
_MARK, _SEP = "\x1e", "\x1f"
Speller = Callable[[str, tuple[object, ...]], str]  # (option name, the values given) -> the option as spelled


def opt(name: str, *values: object) -> str:
    """A placeholder naming option `name` (a row of spec.OPTIONS or spec.REQUEST_OPTIONS) with the values a
    message gives it (several: alternatives, "i8 or i16"); each front end spells it in its own terms."""
    return _MARK + name + "".join(_SEP + json.dumps(v) for v in values) + _MARK


def _plain(name: str, values: tuple[object, ...]) -> str:
    """The spelling before spec/request.py registers the CLI's: the name, and its values."""
    return name + ("=" + " or ".join(map(str, values)) if values else "")


_default: list[Speller] = [_plain]  # the CLI's, once spec/request.py is imported (use_spelling)
_named: dict[str, Speller] = {}  # the front ends' spellings by name (spec.SPELLINGS, once spec/request.py is imported)
_current: ContextVar[Speller | str | None] = ContextVar("gemm_gen_spelling", default=None)


def use_spelling(speller: Speller, named: dict[str, Speller] | None = None) -> None:
    """The spelling messages read in unless a front end chooses another (spec/request.py: the CLI's), and the
    spellings a front end can choose by name."""
    _default[0] = speller
    _named.update(named or {})


@contextmanager
def spelling(speller: Speller | str) -> Iterator[None]:
    """Messages read in `speller`'s terms inside the block (the CLI run by make: make's variables). A name
    ("make") is looked up when a message is read, so the CLI chooses one before it loads the option table
    (app/cli.py loads no more than it must); an unknown name reads as the default."""
    token = _current.set(speller)
    try:
        yield
    finally:
        _current.reset(token)


def _in_use() -> Speller:
    chosen = _current.get()
    if isinstance(chosen, str):
        return _named.get(chosen, _default[0])
    return chosen or _default[0]


def spelled(text: str, speller: Speller | None = None) -> str:
    """`text` with each option placeholder spelled by `speller` (None: the spelling in use)."""
    if _MARK not in text:
        return text
    speller = speller or _in_use()
    parts = text.split(_MARK)
    for i in range(1, len(parts), 2):
        name, *values = parts[i].split(_SEP)
        parts[i] = speller(name, tuple(json.loads(v) for v in values))
    return "".join(parts)


class GemmGenError(Exception):
    """A problem with the user's request; the CLI prints it on one line and exits 2. `raw_what` and `raw_fix`
    keep the option placeholders (errors.opt), for an error that wraps this one."""

    def __init__(self, what: str, fix: str = "") -> None:
        self.raw_what = what
        self.raw_fix = fix
        super().__init__(what, fix)

    @property
    def what(self) -> str:
        return spelled(self.raw_what)

    @property
    def fix(self) -> str:
        return spelled(self.raw_fix)

    def spelled(self, speller: Speller) -> tuple[str, str]:
        """(what, fix) with the options in `speller`'s terms."""
        return spelled(self.raw_what, speller), spelled(self.raw_fix, speller)

    def __str__(self) -> str:
        what, fix = self.what, self.fix
        return f"{what}; {fix}" if fix else what


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
