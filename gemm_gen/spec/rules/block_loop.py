"""The loop of a bfp16 block kernel, as the model prices it (issue 20 item 4).

Every bfp16 kernel (a bfp16 precision, or bf16 converted once: kernel_variant.block_kernel) computes
its C slice as 16 x 16 blocks of C, each four 8 x 8 accumulators (a 2 x 2 cluster of
bfp16ebs8 8x8x8 mmuls). Per block: the 4 C tiles are loaded into the accumulators, k/8 k-steps each
pop 2 A tiles and 2 B tiles and issue 4 macs, and the 4 results are stored. What differs between
kernels is how blocks follow each other:

- ``none``: block after block, each its own C loads, k-steps and stores; only the K loop is
  software-pipelined, so every block pays its prolog and epilog (atb eq. 10). The loop over blocks
  is entered once per block row (nested row-pair / column-pair loops).
- ``flat``: one software-pipelined loop over blocks; the next block's C tiles are loaded while the
  current block's results are stored, so a block costs the busiest issue slot of its iteration plus
  what the pipeliner leaves exposed (atb eq. 11). mlir-aie PR #3650's Peano ATB kernels: one flat
  loop over all blocks (config 2) or one per block row (configs 1 and 3), two stages.
- ``atb-chess``: the ATB paper's hand-scheduled xchesscc kernel (mlir-aie PR #3076's
  ``mm_bfp_mixed.cc``: four blocks per loop iteration, the next block's C loads interleaved with the
  stores inside the group): priced with the overhead atb Table 1 measured on it, and charged to
  no other structure.

writes_out_k(k) is the template's switch between its two loops (FLAT_LOOP where it holds,
K_LOOP_IN_BLOCK_LOOP past it): the renderer and the model both ask it; edit it together with
templates/mm_bfp16.cc.j2.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

OVERLAPS = ("none", "flat", "atb-chess")
ENTRIES = ("call", "row")


@dataclass(frozen=True)
class BlockLoop:
    """One block kernel's loop structure (per 16 x 16 C block and per k-step)."""

    name: str
    overlap: str  # one of OVERLAPS
    entries: str = "call"  # the block loop is entered once per call, or once per block row (ENTRIES)
    stages: int = 1  # software-pipeline stages of the block loop (flat): each entry fills and drains stages - 1 blocks
    a_pops: int = 2  # A tiles popped per k-step (a row pair)
    b_pops: int = 2  # B tiles popped per k-step (a column pair)
    macs: int = 4  # 8x8x8 macs per k-step (the 2 x 2 cluster)
    c_tiles: int = 4  # C tiles loaded and stored per block
    # the A and B pops sit in a rolled (pipelined) K loop, so a stream's fill count is carried around it: not a
    # compile-time constant, which Peano's aie_api fills on every pop (model/kernel.pop_loads)
    pops_in_rolled_loop: bool = False
    source: str = ""

    def __post_init__(self) -> None:
        if self.overlap not in OVERLAPS or self.entries not in ENTRIES or self.stages < 1:
            raise ValueError(f"block loop {self.name!r}: overlap {self.overlap!r}, entries {self.entries!r}, "
                             f"stages {self.stages}")


# the template before issue 20's flat loop (and a structure the model still compares with): `for z`
# (row pairs) / `for j` (column pairs), each cluster with fresh A and B streams, C loaded, the K loop
# pipelined (ping / pong), C stored; nothing overlaps between clusters.
CLUSTER_LOOP = BlockLoop("per-cluster, K loop pipelined", "none", "row", pops_in_rolled_loop=True,
                         source="templates/mm_bfp16.cc.j2 before the flat block loop (nested z / j loops)")
# mlir-aie's structure, and the template's when its k-steps are written out: one flat, software-
# pipelined loop over every 16 x 16 block of the call, the next block's C prefetched while the
# current block's results are stored.
FLAT_LOOP = BlockLoop("flat block loop, C prefetched", "flat", "call", stages=2,
                      source="mlir-aie PR #3650 config2/mm_bfp_mixed.cc (two stages, as measured there); "
                             "templates/mm_bfp16.cc.j2 for k / 8 <= UNROLL_K_TILES")
# the template with a longer K: the same flat loop over blocks, but a pipelined K loop inside it, so
# the pipeliner works on the K loop and each block's C traffic is exposed (as CLUSTER_LOOP's, entered
# once per call)
K_LOOP_IN_BLOCK_LOOP = BlockLoop("flat block loop, K loop pipelined inside", "none", "call", pops_in_rolled_loop=True,
                                 source="templates/mm_bfp16.cc.j2 for k / 8 > UNROLL_K_TILES")

# the most k-steps the template writes out, so that its loop over 16 x 16 C blocks is the innermost and
# pipelined across blocks (mlir-aie's config2 kernel writes out 16, k = 128); a longer K keeps a k loop
UNROLL_K_TILES = 16
TEMPLATE_LOOP = FLAT_LOOP  # the template's loop at every k up to 8 UNROLL_K_TILES (mlir-aie's tiles)


def writes_out_k(k: np.ndarray | int) -> np.ndarray:
    """Whether templates/mm_bfp16.cc.j2 writes a k-deep call's k-steps (8 K values each) out, so that
    its loop is FLAT_LOOP; past UNROLL_K_TILES it is K_LOOP_IN_BLOCK_LOOP."""
    return np.asarray(k) // 8 <= UNROLL_K_TILES
