"""What aiecc says of each core's stack after a build, and the check gemm_gen adds on top.

A core's stack sits at L1 offset 0, directly below its buffers with no clearance, so a frame deeper
than `stack_size` silently overwrites the lowest buffer. Confirmed at the v1.4.3 tag (the release's
documentation, programming_guide/core_data_memory, rendered at 1.4.3 on mlir-aie's gh-pages; its
IRON API render shows PR #3613's `stack_size_override` on Kernel and ExternalFunction):

- aiecc measures each Peano-linked core's stack requirement on the linked ELF (`.stack_sizes`
  frames, relocations for the call edges, the largest path from `__start`, counting crt1's
  `_main_init` frame: PRs #3613, #3680), writes it as `measured_stack_size` on the `aie.core`, and
  fails the build when `stack_size` is smaller: `stack_size = M is insufficient: this core needs N
  bytes` (error). It also writes the linked `.data/.rodata/.bss` total as `measured_data_size`.
- `--get=measured_stack_sizes.mlir` dumps the module carrying both attributes.
- Frames of objects compiled without `-fstack-size-section` count as 0: `no stack size information
  for N function(s) this core reaches, so its requirement is at least M bytes and may be higher`
  (warning); no `measured_stack_size` is written, and a core declaring less than M still fails.
  So gemm_gen compiles its Peano kernels with `-fstack-size-section` (backends/compile.py).
- A chess (--xbridge, BCF) link keeps no relocations: `cannot determine this core's stack
  requirement: ...; stack_size is not being validated for this core` (warning); nothing written.

Assumed, not confirmed at the tag: that `--get=measured_stack_sizes.mlir` combines with
`--get-xclbin --get-npu-insts` in one call and lands in the output directory (aiecc's default, the
working directory), and how the attribute is printed (`measured_stack_size = N : i32` in the core's
attribute dictionary, as the docs show it). Whatever aiecc does not report is recorded as "not
reported", never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..facts.errors import StackError, opt

MEASURED_MODULE = "measured_stack_sizes.mlir"  # aiecc 1.4.3's name for the module with the measurements
GET_MEASURED = f"--get={MEASURED_MODULE}"
STACK_ALIGN = 16  # GemmConfig's stack granularity

# aiecc 1.4.3's diagnostics (the release's core_data_memory page, "What to do when you hit a diagnostic")
_INSUFFICIENT = re.compile(r"stack_size = (\d+) is insufficient: this core needs (\d+) bytes")
_ABSENT = re.compile(r"stack_size is absent, so this core uses the device default of (\d+) bytes, but it needs "
                     r"(\d+) bytes")
_LOWER_BOUND = re.compile(r"no stack size information for \d+ function\(s\) this core reaches, so its requirement "
                          r"is at least (\d+) bytes")
_NOT_VALIDATED = "stack_size is not being validated for this core"
_CORE = re.compile(r'"?aie\.core"?\(\s*(%[\w.$-]+)\s*\)')
_TILE = re.compile(r"(%[\w.$-]+)\s*=\s*aie\.tile\(\s*(\d+)\s*,\s*(\d+)\s*\)")
_MEASURED = re.compile(r"(?<![\w])measured_stack_size\s*=\s*(\d+)")
_DATA = re.compile(r"(?<![\w])measured_data_size\s*=\s*(\d+)")

STATUSES = ("measured", "lower bound", "not validated", "not reported")


@dataclass(frozen=True)
class StackReport:
    """What a build learnt of its cores' stacks: per core ("col,row") the measured frame, or a lower
    bound of it; per core the measured static data; and how much aiecc said (STATUSES)."""

    stack_bytes: int
    status: str
    frames: dict[str, int] = field(default_factory=dict)
    data: dict[str, int] = field(default_factory=dict)
    note: str = ""

    @property
    def frame_bytes(self) -> int | None:
        """The deepest core's frame (a lower bound when status is "lower bound"), if reported."""
        return max(self.frames.values()) if self.frames else None

    @property
    def deepest(self) -> str | None:
        """The core ("col,row") with the deepest reported frame."""
        return max(self.frames, key=lambda k: self.frames[k]) if self.frames else None

    @property
    def overflows(self) -> bool:
        """A reported frame exceeds the stack. aiecc 1.4.3 fails such a build itself; gemm_gen refuses
        it too, for a build whose check was off or whose output says otherwise."""
        return self.frame_bytes is not None and self.frame_bytes > self.stack_bytes

    @property
    def data_bytes(self) -> int | None:
        return max(self.data.values()) if self.data else None

    def to_json(self) -> dict[str, Any]:
        return {"stack_bytes": self.stack_bytes, "status": self.status, "frame_bytes": self.frame_bytes,
                "frames": self.frames, "data_bytes": self.data_bytes, "data": self.data, "note": self.note}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> StackReport:
        return cls(int(d["stack_bytes"]), str(d["status"]), {k: int(v) for k, v in d.get("frames", {}).items()},
                   {k: int(v) for k, v in d.get("data", {}).items()}, str(d.get("note", "")))


def measured_module(text: str) -> tuple[dict[str, int], dict[str, int]]:
    """measured_stack_size and measured_data_size per core ("col,row", or the tile's SSA name when
    its aie.tile is not in the text) of a module aiecc wrote."""
    tiles = {name: f"{col},{row}" for name, col, row in _TILE.findall(text)}
    cores = list(_CORE.finditer(text))
    frames: dict[str, int] = {}
    data: dict[str, int] = {}
    for i, core in enumerate(cores):  # a core's attributes follow its region, before the next core
        segment = text[core.end():cores[i + 1].start() if i + 1 < len(cores) else len(text)]
        key = tiles.get(core.group(1), core.group(1))
        if m := _MEASURED.search(segment):
            frames[key] = int(m.group(1))
        if m := _DATA.search(segment):
            data[key] = int(m.group(1))
    return frames, data


def insufficient(output: str) -> tuple[int, int] | None:
    """(declared, needed) bytes of the worst core aiecc refused for its stack, if it refused one."""
    found = [(int(a), int(b)) for a, b in _INSUFFICIENT.findall(output) + _ABSENT.findall(output)]
    return max(found, key=lambda f: f[1]) if found else None


def read_report(workdir: Path, output: str, stack_bytes: int, chess: bool) -> StackReport:
    """The report of a successful aiecc run in `workdir` that printed `output`."""
    found = [workdir / MEASURED_MODULE, *sorted(workdir.glob(f"*.prj/{MEASURED_MODULE}"))]
    module = next((p for p in found if p.is_file()), None)
    frames, data = measured_module(module.read_text(errors="replace")) if module else ({}, {})
    if frames:
        return StackReport(stack_bytes, "measured", frames, data, f"aiecc's measured_stack_size ({MEASURED_MODULE})")
    bounds = [int(b) for b in _LOWER_BOUND.findall(output)]
    if bounds:
        return StackReport(stack_bytes, "lower bound", {"any": max(bounds)}, data,
                           "aiecc found functions without .stack_sizes; the frame is at least this")
    if chess or _NOT_VALIDATED in output:
        return StackReport(stack_bytes, "not validated", {}, data,
                           "aiecc 1.4.3 does not measure chess (BCF) links")
    return StackReport(stack_bytes, "not reported", {}, data,
                       f"aiecc wrote no {MEASURED_MODULE} and no stack diagnostic")


def overflow(what: str, frame: int, stack: int, core: str | None = None, more: str = "") -> StackError:
    """The one line for a stack too small: what, the frame and the stack, and the --stack to give."""
    who = f"core ({core.replace(',', ', ')})'s" if core and "," in core else "a core's"
    return StackError(f"{what}: {who} stack frame is {frame} B, more than the {stack} B stack it has (a deeper "
                      "frame silently overwrites the core's lowest L1 buffer)",
                      f"rebuild with {opt('stack_bytes', -(-frame // STACK_ALIGN) * STACK_ALIGN)}{more}", frame, stack)


def data_overflow(what: str, data: int, reserved: int, core: str | None = None, more: str = "") -> StackError:
    """The one line for static data past its reservation: aiecc linked more .data/.rodata/.bss into a core
    than the L1 plan kept free for it (facts/devices.py CORE_STATIC `kernel data`), so the buffers' placement
    the plan predicted is not the one aiecc built."""
    who = f"core ({core.replace(',', ', ')})" if core and "," in core else "a core"
    return StackError(f"{what}: {who} holds {data} B of static data (measured_data_size), more than the {reserved} B "
                      "the L1 plan keeps for it", f"raise the `kernel data` reservation in hw/devices.py to at least "
                      f"{data} B and rebuild{more}", data, reserved)
