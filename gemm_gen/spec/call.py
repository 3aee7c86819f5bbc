"""One call of a design: the problem it computes, and how the design's fixed tiling covers it.

A design fixes the tiling (m x k x n per core, k_mt per memtile object, rows x cols cores), so one
call covers M x N in blocks of (rows*m) x (cols*n) and K in k_mt chunks. A size that is not a
multiple of them is handled on the array wherever the DMAs can, with no host copy:

- M and N: the last block is moved back to end at M (N), overlapping its neighbour; the overlapped
  rows (columns) are computed twice, bit for bit the same, and written twice. A problem smaller
  than one block reads A's rows past M from the zeroed slack at the end of A's DRAM buffer and
  writes C's junk rows into C's slack.
- K: the array walks K up to a multiple of k_mt. Only the tail's products must vanish: with B
  row-major, B's rows past K are its buffer's zeroed slack while A's tail reads the next row's
  values (finite, times zero); with A column-major, A^T's rows past K are its zeroed slack;
  otherwise the host pads one operand with zeros.

The host pads (copies) an operand only where the DMAs cannot: rows that are not whole 32-bit words
(the shim's unit), C narrower than one block (its junk columns would land on the next row), a K
tail that ends inside a bfp16 block of 8, or a K tail with column-major B (both tails would read
real values). bfp16 operands are encoded on the host anyway; their padding rides along. An input whose rows the
user padded to a regular stride is read in place with that leading dimension (`lds`): its stored
width is the stride, whose rows must then be whole words (the operator's arrays: app/operator_layouts.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Protocol

from ..facts.dtypes import WORD_BYTES
from ..facts.epilogue import Epilogue
from ..facts.errors import ConfigError
from ..facts.numerics import KernelNumerics
from .request import ArrayOptions, Layout, Problem, Tiling, Types
from .rules import padding
from .rules.call_layouts import Layouts
from .rules.dma import pick
from .rules.walks import CallExtents

OPERANDS = ("A", "B", "C")
BLOCK_K = 8  # bfp16ebs8 shares one exponent across 8 values along K (dtypes.BFP16.tile_cols)


def parse_sizes(text: str) -> tuple[Problem, ...]:
    """'1000x777x333,1x4096x4096' -> the problems, in order (duplicates kept: each is a call)."""
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise ConfigError("no sizes given", "write sizes like 1000x777x333,1x4096x4096")
    return tuple(Problem.parse(p) for p in parts)


def check_weights(weights: tuple[float, ...]) -> tuple[float, ...]:
    """How often each of several sizes is called: finite, >= 0, one above 0 (else ConfigError)."""
    for w in weights:
        if not math.isfinite(w) or w < 0:
            raise ConfigError(f"weight {w}: each weight must be a finite number >= 0", "give weights like 30,1,1")
    if not sum(weights):
        raise ConfigError(f"weights {','.join(f'{w:g}' for w in weights)}: at least one must be above 0",
                          "give weights like 30,1,1")
    return weights


@dataclass(frozen=True)
class HostCopy:
    """An operand the host copies into a padded buffer (or C crops out of one), and why."""

    operand: str
    why: str
    count: int = 1  # copies made (a dtype conversion before a padded or rearranged copy makes two)


@dataclass(frozen=True)
class CallPlan:
    """How one call of a design covers its problem (in elements; see the module docstring)."""

    problem: Problem
    block_m: int  # rows*m: C rows one task group computes
    block_n: int  # cols*n
    k_mt: int
    k: int  # the kernel's K step: k_walk / k kernel calls per output tile
    b_col_maj: bool
    padded: tuple[str, ...]  # operands in a host-padded buffer (copied, or encoded as bfp16 tiles)
    copies: tuple[HostCopy, ...]  # the padded scalar operands, with the reason
    k_tail: str  # how K's tail past K (up to k_walk) multiplies to zero
    a_finite: bool  # the K tail multiplies A's next-row values by zero: float A must be finite
    shift_m: bool = False  # the last block row moves back to end at M (else junk rows go to slack)
    shift_n: bool = False
    a_col_maj: bool = False  # A stored as A^T (K x M)
    c_col_maj: bool = False  # C stored as C^T (N x M)
    # leading dimensions that differ from the stored matrix's width: (operand, elements between its
    # stored rows), for an input read in place from a user's array whose rows are padded
    lds: tuple[tuple[str, int], ...] = ()
    # K extent of the epilogue tile appended to B past k_walk (one k-step: docs/epilogues.md), 0 without one
    b_extra_k: int = 0
    # a runtime-activation build (docs/epilogues.md step 8): the activation this call selects, written as
    # the mode word of every core's runtime-parameter buffer; None: identity (mode 0)
    activation: str | None = None

    @property
    def M(self) -> int:
        return self.problem.M

    @property
    def layouts(self) -> Layouts:
        """The layouts of this call's A, B and C buffers."""
        return Layouts(self.a_col_maj, self.b_col_maj, self.c_col_maj)

    @property
    def K(self) -> int:
        return self.problem.K

    @property
    def N(self) -> int:
        return self.problem.N

    @property
    def m_blocks(self) -> int:
        return padding.ceil_div(self.M, self.block_m)

    @property
    def n_blocks(self) -> int:
        return padding.ceil_div(self.N, self.block_n)

    @property
    def k_walk(self) -> int:
        """K as the array walks it: whole k_mt chunks."""
        return padding.round_up(self.K, self.k_mt)

    @property
    def k_steps(self) -> int:
        """Kernel calls per output tile."""
        return self.k_walk // self.k

    @property
    def tiles_per_core(self) -> int:
        """Output tiles each core computes in this call (one per task group)."""
        return padding.tiles_per_core(self.M, self.N, self.block_m, self.block_n)

    @property
    def covered(self) -> tuple[int, int, int]:
        """Mp x k_walk x Np: what the call's whole blocks compute (spec/rules/padding.py, which the model
        uses too)."""
        return padding.covered(self.M, self.K, self.N, self.block_m, self.k_mt, self.block_n)

    @property
    def Mp(self) -> int:
        return self.covered[0]

    @property
    def Np(self) -> int:
        return self.covered[2]

    def m_origin(self, m_block: int) -> int:
        """First C row of block row `m_block` (the last one moved back to end at M when shifted; the sizes may
        be arrays, one per candidate design: spec/rules/walks.py)."""
        first = m_block * self.block_m
        return pick(first > self.M - self.block_m, self.M - self.block_m, first) if self.shift_m else first

    def n_origin(self, n_block: int) -> int:
        first = n_block * self.block_n
        return pick(first > self.N - self.block_n, self.N - self.block_n, first) if self.shift_n else first

    def storage(self, operand: str) -> tuple[int, int]:
        """(rows, columns) of an operand's DRAM buffer before any slack: the user's matrix, or its
        host-padded copy (A or B column-major is stored as A^T or B^T)."""
        padded = operand in self.padded
        lds = dict(self.lds)
        if operand in lds and not padded:  # the user's rows, padded to their leading dimension
            rows, _ = self._stored(operand, False)
            return rows, lds[operand]
        return self._stored(operand, padded)

    def _stored(self, operand: str, padded: bool) -> tuple[int, int]:
        if operand == "A":
            m, k = (self.Mp, self.k_walk) if padded else (self.M, self.K)
            return (k, m) if self.a_col_maj else (m, k)
        if operand == "B":
            k = self.k_walk + self.b_extra_k if padded else self.K
            n = self.Np if padded else self.N
            return (n, k) if self.b_col_maj else (k, n)
        m, n = (self.Mp, self.Np) if padded else (self.M, self.N)
        return (n, m) if self.c_col_maj else (m, n)

    def ld(self, operand: str) -> int:
        """Elements between consecutive rows of the operand's DRAM buffer."""
        return self.storage(operand)[1]

    @cached_property
    def extents(self) -> CallExtents:
        """What the DMA walks read of this call (spec/rules/walks.py)."""
        return CallExtents(self.Mp, self.k_walk, self.Np, (self.ld("A"), self.ld("B"), self.ld("C")),
                           tuple(self.storage(op) for op in OPERANDS), self.c_col_maj, self.b_extra_k,
                           self.m_origin(self.m_blocks - 1), self.n_origin(self.n_blocks - 1))

    @property
    def host_copies(self) -> int:
        return sum(c.count for c in self.copies)

    def with_copy(self, operand: str, why: str, separate: bool = False) -> CallPlan:
        """This plan with one more reason for the host to copy `operand`. A reason joins the
        operand's copy (a padded copy is made in the design's layout from any array), unless it is
        `separate`: a copy of its own (a dtype conversion, made before any other)."""
        old = {c.operand: c for c in self.copies}
        if operand in old:
            prev = old[operand]
            old[operand] = HostCopy(operand, f"{prev.why}; {why}", prev.count + int(separate))
        else:
            old[operand] = HostCopy(operand, why)
        return replace(self, copies=tuple(old[op] for op in OPERANDS if op in old))

    def copies_by_operand(self) -> dict[str, int]:
        """Host copies of A, B and C."""
        made = {c.operand: c.count for c in self.copies}
        return {op: made.get(op, 0) for op in OPERANDS}

    def copy_lines(self) -> list[str]:
        """'A: 0 copies', 'C: 1 copy: order='F' on a bf16 output needs a host transpose', ..."""
        made = {c.operand: c for c in self.copies}
        return [f"{op}: {made[op].count} cop{'y' if made[op].count == 1 else 'ies'}: {made[op].why}" if op in made
                else f"{op}: 0 copies" for op in OPERANDS]

    @property
    def wasted_fraction(self) -> float:
        """Share of the computed MACs that only produce junk or multiply the K tail."""
        return 1.0 - self.problem.macs / (self.Mp * self.k_walk * self.Np)

    def summary(self) -> dict[str, object]:
        """What `plan --json` reports about the call."""
        return {"problem": [self.M, self.K, self.N], "blocks": [self.m_blocks, self.n_blocks],
                "k_walk": self.k_walk, "host_copies": self.host_copies,
                "host_copies_by_operand": self.copies_by_operand(),
                "copies": {c.operand: c.why for c in self.copies},
                "encoded_on_host": [o for o in self.padded if o not in {c.operand for c in self.copies}],
                "m_tail": _tail("M", self.M, self.block_m, self.shift_m, "A"),
                "n_tail": _tail("N", self.N, self.block_n, self.shift_n, "B"),
                "k_tail": self.k_tail,
                **({"leading_dimensions": dict(self.lds)} if self.lds else {})}


def _tail(name: str, size: int, block: int, shifted: bool, src: str) -> str:
    junk, what = block - size % block, "rows" if name == "M" else "columns"
    if junk == block:
        return f"none ({name}={size} is a multiple of {block})"
    if shifted:
        return (f"the last block is moved back to end at {name}={size}; its {junk} {what} of overlap are computed "
                f"and written twice (the same bits)")
    return (f"the last block computes {junk} junk {what} past {name}={size} (read from {src}'s zeroed slack or "
            f"padding) and writes them to C's slack or padding")


class CallConfig(Protocol):
    """What a call plan reads of a design (config.GemmConfig is one)."""

    @property
    def tiling(self) -> Tiling: ...
    @property
    def types(self) -> Types: ...
    @property
    def layout(self) -> Layout: ...
    @property
    def array(self) -> ArrayOptions: ...
    @property
    def numerics(self) -> KernelNumerics: ...
    @property
    def epilogue(self) -> Epilogue: ...


def plan_call(c: CallConfig, problem: Problem, lds: dict[str, int] | None = None, c_col_maj: bool | None = None
              ) -> CallPlan:
    """How design `c` computes `problem`: blocks, the K walk, and what the host must pad.
    `lds`: leading dimensions of A or B read in place from rows padded past the stored width (the
    operator's, from the user's strides); one the host must pad anyway is dropped. `c_col_maj`:
    this call's C layout when the shim stores it in the other layout than the design's
    (spec/rules/call_layouts.py says when it can; design/serve.py asks)."""
    c_col = c.layout.c_col_maj if c_col_maj is None else c_col_maj
    block_m, block_n = c.tiling.m * c.array.rows, c.tiling.n * c.array.cols
    k_walk = padding.round_up(problem.K, c.tiling.k_mt)
    M, K, N = problem.M, problem.K, problem.N
    types = {"A": c.types.t_in, "B": c.types.t_b, "C": c.types.t_out}
    why: dict[str, str] = {}
    encoded = [op for op in OPERANDS if types[op].host_encoded]
    if c.layout.b_pack == "strips" and "B" not in encoded:  # a scalar B in strips (the split placement's weights)
        encoded.append("B")  # the host lays out B's whole buffer, as it encodes a bfp16 or int4 one
        why["B"] = (f"B is packed in strips (each {c.tiling.n}-column slice's K x {c.tiling.n} values contiguous): a "
                    f"model's weights, packed once")
    extra_k = c.tiling.k if c.epilogue.needs_tile else 0
    # a moved block starts at any element: only operands addressed in elements (not bfp16 tiles) can
    shift_m = M > block_m and M % block_m != 0 and "A" not in encoded and "C" not in encoded
    # ... and with A (C) column-major, its first row must be a whole word into A^T's (C^T's) rows
    shift_m = shift_m and not any(col and types[op].nbytes(M) % WORD_BYTES for op, col in (("A", c.layout.a_col_maj),
                                                                                         ("C", c_col)))
    # ... and its first column must be a whole word into B's (row-major) and C's rows
    # (not with an epilogue tile: a moved-back column tile's tile would overlap its neighbour's)
    shift_n = (N > block_n and N % block_n != 0 and "B" not in encoded and "C" not in encoded and not extra_k
               and all(types[op].nbytes(N) % WORD_BYTES == 0 for op in ("C",) + (() if c.layout.b_col_maj else ("B",))))
    ld = {"A": M if c.layout.a_col_maj else K, "B": K if c.layout.b_col_maj else N, "C": M if c_col else N}
    lds = {op: v for op, v in (lds or {}).items() if op in ("A", "B") and v != ld[op]}
    ld.update(lds)
    for op in OPERANDS:
        t = types[op]
        if op not in encoded and t.nbytes(ld[op]) % WORD_BYTES:
            why[op] = (f"its rows of {ld[op]} x {t} = {t.nbytes(ld[op])} B are not whole 32-bit words (the DMAs' "
                       f"unit)")
    if extra_k:  # B carries one epilogue tile per column tile past k_walk: always a host-made buffer
        why.setdefault("B", f"the epilogue tile (bias{' and scales' if c.epilogue.requant else ''} of each "
                            f"{c.tiling.n}-column tile) is appended to B as {c.tiling.k} more rows of K")
    if c_col:  # C^T's rows past N are slack; junk rows of C would land on C^T's next row
        if M % block_m and not shift_m and "C" not in why:
            why["C"] = (f"M={M} leaves {block_m - M % block_m} junk rows in its last block of {block_m}, which would "
                        f"land on column-major C's next column")
    elif N % block_n and not shift_n and "C" not in why and "C" not in encoded:
        why["C"] = (f"N={N} leaves {block_n - N % block_n} junk columns in its last block of {block_n}, which would "
                    f"land on C's next row")
    a_finite = False
    if k_walk == K:
        k_tail = f"none (K={K} is a multiple of k_mt={c.tiling.k_mt})"
    else:
        zeros = _k_tail_zeros(c, problem, why, encoded)
        # unless A itself is padded, its tail reads the next row's values, times zeros (B's slack or B's
        # padded copy): a float A must then be finite, or its Inf / NaN reach the previous row of C
        a_finite = c.types.t_in.is_float and "A" not in why and "A" not in encoded and zeros != "A slack"
        tail = f"K={K} is walked to {k_walk}: "
        k_tail = tail + {
            "B slack": "B's rows past K are the zeroed slack of its buffer (A's tail reads the next row's values, "
                       "finite, times zero)",
            "padded": "the host-padded operand carries zeros past K",
            "A slack": "column-major A's rows past K (rows of A^T) are the zeroed slack of its buffer (B's tail, "
                       "its slack or finite integers, times zero)",
        }[zeros]
    padded = tuple(op for op in OPERANDS if op in why or op in encoded)
    copies = tuple(HostCopy(op, why[op]) for op in OPERANDS if op in why)
    kept = tuple((op, v) for op, v in sorted(lds.items()) if op not in padded)  # a padded copy has its own width
    return CallPlan(problem, block_m, block_n, c.tiling.k_mt, c.tiling.k, c.layout.b_col_maj, padded, copies, k_tail,
                    a_finite, shift_m, shift_n, c.layout.a_col_maj, c_col, kept, extra_k)


def _k_tail_zeros(c: CallConfig, p: Problem, why: dict[str, str], encoded: list[str]) -> str:
    """Make sure K's tail multiplies to zero (adds the pads it needs to `why`); say where the
    zeros come from."""
    blocked_a = c.numerics.bfp16_inputs or c.types.precision.converts_a  # A's values share exponents along K
    blocked_b = c.numerics.bfp16_inputs
    if p.K % BLOCK_K:
        reason = (f"K={p.K} ends inside a bfp16 block of {BLOCK_K} values, whose shared exponent would see the "
                  f"tail")
        if blocked_a and "A" not in encoded:
            why.setdefault("A", reason)
        if blocked_b and "B" not in encoded:
            why.setdefault("B", reason)
    if "A" in why or "A" in encoded or "B" in why or "B" in encoded:
        return "padded"
    if c.layout.a_col_maj and (not c.layout.b_col_maj or not c.types.t_b.is_float):
        return "A slack"  # times B's slack zeros, or B^T's next row's integers
    if not c.layout.b_col_maj:
        return "B slack"
    if c.layout.a_col_maj:  # A's tail is zeros, B^T's the next column's values: a float Inf there would make NaN
        why["B"] = (f"K={p.K} is not a multiple of k_mt={c.tiling.k_mt} and column-major B's tail reads real values, "
                    f"which must not meet A's zero tail as Inf or NaN")
        return "padded"
    # B^T's tail reads the next column of B and A's the next row of A: one of them must be zeros.
    smaller = "A" if p.M <= p.N else "B"
    why[smaller] = (f"K={p.K} is not a multiple of k_mt={c.tiling.k_mt} and column-major B's tail reads real values, "
                    "so the smaller operand carries zeros")
    return "padded"
