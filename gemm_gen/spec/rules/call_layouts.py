"""Which operand layout a call may choose on its own, and which the xclbin fixes (issue 23 item 2).

What an xclbin fixes: the memtile and core access patterns (the ObjectFifos' dims) and the kernel
object. What each call writes: the shim BDs of its runtime sequence (instruction stream), i.e. the
offsets, sizes and strides over the host buffers. A layout is a per-call choice exactly when
changing it changes only the shim's walk over DRAM, with the same stream in and out of the memtile:

- A and B (i8, i16, bf16: sub-word elements; bfp16: 8 x 8 tiles of blocks along K): transposing
  them reorders elements within 32-bit words, which no DMA can (they move whole words,
  tap.Tap.to_words), so a column-major A or B reaches the memtile as whole-word runs of A^T / B^T,
  the memtile reorders its runs and the kernel transposes each block on load: another memtile
  pattern and another kernel, so another xclbin.
- C of 32 bits (i32, f32): one element is one word, so the shim can write whatever stream the
  memtile sends (rows of a tile in a row-major build, its columns in a column-major build) into C
  or into C^T, element by element: a per-call choice, at one word per DRAM run for the layout the
  build was not made for (model/traffic.py prices it).
- C narrower than 32 bits (bf16, i8, i16): a column-major build stores its blocks transposed in the
  kernel and gathers columns in the memtile; the other layout would need sub-word moves: xclbin.
- C bfp16: 8 x 8 tiles along N; its column-major form is not built (spec/checks.py): xclbin.
- Leading dimensions (rows padded to a regular stride) are the shim's alone: per call, any layout.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...facts.dtypes import WORD_BYTES, DType
from ...facts.errors import ConfigError

OPERANDS = ("A", "B", "C")
LETTERS = {"r": False, "c": True}  # row-major, column-major


@dataclass(frozen=True)
class Layouts:
    """The layouts of a call's A, B and C: column-major (True) or row-major (False)."""

    a_col_maj: bool = False
    b_col_maj: bool = False
    c_col_maj: bool = False

    @classmethod
    def parse(cls, text: str) -> Layouts:
        """'rrc' -> A and B row-major, C column-major (one letter per operand, A B C)."""
        t = text.strip().lower()
        if len(t) != 3 or any(ch not in LETTERS for ch in t):
            raise ConfigError(f"layouts {text!r} are not three letters r/c for A, B, C",
                              "write layouts like rrc (A, B row-major, C column-major)")
        return cls(*(LETTERS[ch] for ch in t))

    def col_maj(self, operand: str) -> bool:
        return bool(getattr(self, f"{operand.lower()}_col_maj"))

    def __str__(self) -> str:
        return "".join("c" if self.col_maj(op) else "r" for op in OPERANDS)

    def describe(self) -> str:
        """'A row-major, B row-major, C column-major'."""
        return ", ".join(f"{op} {'column' if self.col_maj(op) else 'row'}-major" for op in OPERANDS)


def per_call(operand: str, t: DType) -> bool:
    """Whether the shim alone can store `operand` of type `t` in either layout (the module docstring)."""
    return operand == "C" and not t.is_block and t.bytes == WORD_BYTES


def why_fixed(operand: str, t: DType) -> str:
    """Why the xclbin fixes the layout of `operand` of type `t` (per_call is False)."""
    if t.is_block:
        return f"{operand} {t} moves in 8 x 8 tiles whose blocks run along K (A, B) or N (C)"
    if operand == "C":
        return (f"a {t} C is narrower than the DMAs' 32-bit words: column-major, the kernel stores its blocks "
                f"transposed and the memtile gathers its columns")
    return (f"{operand} {t} is narrower than the DMAs' 32-bit words: column-major, the memtile reorders runs of "
            f"{operand}^T and the kernel transposes each block on load")


def served(build: Layouts, call: Layouts, types: dict[str, DType]) -> Layouts:
    """The call's layouts if an xclbin built with `build` serves them; else ConfigError naming the
    operand, why its xclbin fixes it, and the fix."""
    for op in OPERANDS:
        if call.col_maj(op) != build.col_maj(op) and not per_call(op, types[op]):
            want = "column" if call.col_maj(op) else "row"
            raise ConfigError(f"{op} {want}-major needs another xclbin than this {build.describe()} one: "
                              f"{why_fixed(op, types[op])}",
                              f"build a design with {op} {want}-major for these calls (gemm-gen plan "
                              f"--runtime-sizes ... --call-layouts ... says which calls share one)")
    return call


@dataclass(frozen=True)
class Xclbin:
    """One xclbin of a set of calls: the layouts it is built with and the calls (indices) it serves."""

    layouts: Layouts
    calls: tuple[int, ...]
    at_shim: tuple[int, ...]  # calls whose 32-bit C the shim stores in the layout the build was not made for

    def to_json(self) -> dict[str, object]:
        return {"layouts": str(self.layouts), "built_with": self.layouts.describe(), "calls": list(self.calls),
                "c_transposed_at_shim": list(self.at_shim)}


def xclbins(calls: Sequence[Layouts], types: dict[str, DType], weights: Sequence[float] | None = None
            ) -> tuple[Xclbin, ...]:
    """The fewest xclbins that serve `calls` (in order of first use): calls whose fixed layouts agree
    share one; a per-call operand is built in the layout its calls ask most often (by weight; on a
    tie, the first call's), and the others' are stored by the shim."""
    weights = weights if weights is not None else [1.0] * len(calls)
    fixed = [tuple(None if per_call(op, types[op]) else lay.col_maj(op) for op in OPERANDS) for lay in calls]
    keys = list(dict.fromkeys(fixed))
    out = []
    for key in keys:
        members = tuple(i for i, f in enumerate(fixed) if f == key)
        built = []
        for j, op in enumerate(OPERANDS):
            if key[j] is not None:
                built.append(bool(key[j]))
                continue
            col = sum(weights[i] for i in members if calls[i].col_maj(op))
            row = sum(weights[i] for i in members if not calls[i].col_maj(op))
            built.append(col > row or (col == row and calls[members[0]].col_maj(op)))
        lay = Layouts(*built)
        out.append(Xclbin(lay, members, tuple(i for i in members if calls[i] != lay)))
    return tuple(out)
