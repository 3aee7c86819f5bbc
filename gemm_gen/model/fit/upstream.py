"""The published kernel each of our kernels resembles, and whether ours is predicted slower, at par or
faster (issue 20 item 4). docs/model.md's per-variant table (scripts/model_table.py) and `gemm-gen
predict` both ask here, so the two cannot disagree.

The comparison sets two predictions of the same model side by side: our kernel's structure and the
published kernel's structure as the model reads it (the Striking Table 1 kernels as 2 x 2 jk-flat
clusters, mlir-aie PR #3650's Peano kernels by their block loops), so the ratio is the difference of
the two structures, not the model's error against a measurement.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...facts.devices import device
from ...facts.errors import opt, spelled
from ..kernel import KernelShape, b_conversion_cycles, kernel_cycles, kernel_shape
from ..params import Params
from ..predict import Upstream
from . import paper

AT_PAR = 0.01  # within 1% either way: at par


@dataclass(frozen=True)
class Versus:
    """Our predicted rate against the model's price of the published kernel."""

    ours: float
    theirs: float

    @property
    def ratio(self) -> float:
        return self.ours / self.theirs

    @property
    def verdict(self) -> str:
        if self.ratio < 1 - AT_PAR:
            return "slower"
        if self.ratio > 1 + AT_PAR:
            return "faster"
        return "at par"

    def words(self) -> str:
        """The verdict as docs/model.md's table and `predict` write it."""
        if self.verdict == "at par":
            return f"at par (x{self.ratio:.2f})"
        return f"ours {self.verdict} than upstream (x{self.ratio:.2f})"


def versus(ours: float, theirs: float) -> Versus:
    return Versus(ours, theirs)


@dataclass(frozen=True)
class Resembled:
    """A published kernel: what it is, its figure, and its structure as the model reads it."""

    kernel: str
    same_kernel: bool
    published: float
    published_what: str
    tile: tuple[int, int, int]  # the call tile (T_MA x k x n) its figure was taken at
    shape: KernelShape  # its types and loop structure, to price at any tile


def _block_preset(ks: KernelShape) -> tuple[str, bool]:
    """The ATB precision config a block kernel is (True), or the nearest one (False)."""
    mine = (ks.types.dtype_in, ks.types.dtype_b, ks.types.dtype_out, ks.types.acc)
    for preset, (a, b, c, acc) in paper.ATB_TYPES.items():
        if not ks.convert_once and mine == (a, b or a, c, acc or c):
            return preset, True
    if ks.types.dtype_in == "bf16":  # bf16 A converted per call (config 1; convert-once converts B as well)
        return "config1", False
    return ("config2" if ks.types.acc == "bfp16" else "config3"), False


def resembled(ks: KernelShape) -> Resembled | None:
    """The published kernel our kernel of shape `ks` resembles, or None when none has its types."""
    dev = ks.dev
    if ks.block:
        preset, same = _block_preset(ks)
        pk = next(k for k in paper.PEANO_ATB if k.preset == preset)
        a, b, c, acc = paper.ATB_TYPES[preset]
        theirs = kernel_shape(device("npu2"), a, c, (8, 8, 8), False, b, acc, block_loop=pk.loop)
        what = f"II {pk.ii} reported, at {pk.t_ma}x{pk.k}x{pk.n}"
        return Resembled(f"{pk.loop.name} (Peano)", same, pk.macs_per_cycle, what, (pk.t_ma, pk.k, pk.n), theirs)
    if ks.types.dtype_b != ks.types.dtype_in:
        return None
    for row in paper.STRIKING_T1:
        if (row.device, row.dtype_in, row.dtype_out, row.emulate) == (dev.name, ks.types.dtype_in, ks.types.dtype_out,
                                                                          ks.emulate_bf16_with_bfp16):
            er, et = paper.PAPER_EXPANSION
            theirs = kernel_shape(dev, row.dtype_in, row.dtype_out, dev.mmul_shape(row.dtype_in, row.emulate),
                                  row.emulate, expansion=paper.PAPER_EXPANSION, loops=paper.PAPER_LOOPS,
                                  compiler="chess")
            name = (f"Striking Table 1 kernel {row.device} {row.dtype_in}-{row.dtype_out} (its own, read as "
                    f"{er}x{et} {paper.PAPER_LOOPS})")
            return Resembled(name, True, float(row.macs_per_cycle or 0.0), f"measured at {row.m}x{row.k}x{row.n}",
                             (row.m, row.k, row.n), theirs)
    return None


def _macs(p: Params, ks: KernelShape, t_ma: int, k: int, n: int, rho: int) -> float:
    """Predicted MACs/cycle of one t_ma x k x n call (a convert-once kernel's B conversion shared by
    its rho calls)."""
    cyc = float(kernel_cycles(p, ks, np.array(t_ma), np.array(k), np.array(n)))
    cyc += float(b_conversion_cycles(ks, np.array(k), np.array(n))) / rho
    return t_ma * k * n / cyc


def compare(p: Params, ks: KernelShape, t_ma: int, k: int, n: int, rho: int = 1) -> Upstream | None:
    """Our kernel at one call tile against the published kernel it resembles, priced at the same tile
    (both predictions); None when no published kernel has these types."""
    up = resembled(ks)
    if up is None:
        return None
    ours = _macs(p, ks, t_ma, k, n, rho)
    theirs = _macs(p, up.shape, t_ma, k, n, 1)
    v = versus(ours, theirs)
    notes = []
    if not up.same_kernel:
        notes.append("no published kernel has these types" + (" or converts B" if ks.convert_once else "")
                     + ": this one is the nearest, a reference")
    if ks.convert_once:
        notes.append("ours includes its B conversion, once per k-step over its rho calls")
    if not ks.block and ks.types.acc != up.shape.types.acc:
        notes.append(spelled(f"upstream keeps C in {up.shape.types.acc} between calls ({opt('acc', 'out')}), ours in "
                             f"{ks.types.acc}: part of the difference is the accumulator's memory, not the loop"))
    note = "; ".join(notes)
    return Upstream(up.kernel, up.same_kernel, up.published, up.published_what, ours, theirs, v.ratio, v.verdict,
                    v.words(), note)

