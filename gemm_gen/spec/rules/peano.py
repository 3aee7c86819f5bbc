"""What the pinned Peano (llvm-aie 22.0.0.2026090701+3e93bf7b, mlir-aie v1.4.3's pin) does with our kernels'
loops and flags, written once: the renderer, the build, the variant rule and the model read these.

None of it was compiled here (no Peano on this machine). Each fact names what it was read in; the llvm-aie
sources are the index's stored versions, whose commits near 3e93bf7b (2026-09-07) are unknown, so a fact read
there is "accepted by the pinned Peano" by the date of the change that introduced it, not by a build:

- The post-RA software pipeliner tries initiation intervals up to `-aie-postpipeliner-maxii` (cl::init(60)) in
  at most `-aie-postpipeliner-maxtry-ii` (cl::init(20)) steps: llvm-aie
  llvm/lib/Target/AIE/AIEInterBlockScheduling.cpp (index id 57979429705; older versions had 10 and 40), and
  mlir-aie PR #3650's config2/mm_bfp_mixed.cc (tested with head llvm-aie, 2026-08-30 .. 09-10: "the loop's
  ResMII=68 exceeds the default max II of 60"). LLVM's pre-RA MachinePipeliner stops at smaller IIs
  (`pipeliner-max-mii`), so a loop whose body needs more than POSTPIPELINER_MAX_II cycles of one issue slot
  is not software-pipelined at all under the default flags.
- `#pragma clang loop unroll(full)` is mlir-aie's AIE_LOOP_UNROLL_FULL under __AIECC__
  (aie_kernels/aie_kernel_utils.h, stored versions 87ac0175 and 072b1259; v1.4.3's own, 95b3d1cc, is not
  stored), LLVM's full unroll of a loop with a constant trip count. The same header's AIE_LOOP_FLATTEN is
  empty under __AIECC__ (chess_flatten_loop under chess): mlir-aie's flattened loops are plain loops under
  Peano, and so were ours before issue 31.
- `#pragma clang loop pipeline(disable)` (AIE_PREPARE_FOR_POSTPIPELINING in both stored headers) keeps a
  loop from LLVM's pre-RA pipeliner and leaves it to the post-RA one (llvm-aie PR #359, 2025-02).
- `#pragma clang loop hint(aie-gpr-realloc, 1)` (AIE_LOOP_GPR_REALLOC, header 072b1259 only): a per-loop
  override of the cl::opt `aie-gpr-realloc` (AIEWawRegRewriter.cpp), parsed since llvm-aie PRs #916
  (2026-04-08, generic loop hints) and #943 (2026-04-15, LoopOptionOverrides); the error test
  clang/test/CodeGen/aie/aie-hint-errors.c spells it `hint(key, value)`. PR #3650 measured II 79 -> 77 with it.
- `__aie_dm_resource_a/b/c` and aie_api's `aie_dm_resource::a/b/c` put a pointer in a data-memory bank's
  address space (clang/test/CodeGen/aie/aie2p/aie2p-bank-annotation.cpp, 2025: address spaces 5, 6, ...):
  scheduling information, no change to any value.
"""

from __future__ import annotations

from ...facts.errors import ConfigError, opt
from ..request import DEFAULT_OPT_LEVEL, OPT_LEVELS

# ---- the post-RA pipeliner -----------------------------------------------------------------------
POSTPIPELINER_MAX_II = 60  # llvm-aie's default -aie-postpipeliner-maxii at the pin (see above)
# what mlir-aie PR #3650 passes for its config2 flat loop (n32_core.py compile_flags; ResMII 68 > 60); our
# bfp16 kernels' flat loop writes up to UNROLL_K_TILES = 16 k-steps out, as config2 does, so every bfp16 Peano
# build passes them (they only widen the search: a loop that pipelines at the default II still does)
BFP16_PIPELINER_MAX_II = 120
BFP16_PIPELINER_MAX_TRY_II = 50
BFP16_PIPELINER_FLAGS = ("-mllvm", f"-aie-postpipeliner-maxii={BFP16_PIPELINER_MAX_II}",
                         "-mllvm", f"-aie-postpipeliner-maxtry-ii={BFP16_PIPELINER_MAX_TRY_II}")

# ---- the optimisation level of a kernel compile ------------------------------------------------------
# mlir-aie's programming_examples/makefile-common: PEANOWRAP2_FLAGS / PEANOWRAP2P_FLAGS = -O2 ..., and IRON's
# ExternalFunction compiles with the same unless given compile_flags. Two reported Peano miscompiles are
# -O2 only (llvm-aie #1262: a MAC loop and a LUT activation in one aie2p unit, bad from nightly
# 22.0.0.2026082101, closed; mlir-aie #3792, 2026-09-23, open: -O1 correct); mlir-aie's own workaround
# (PR #2920's vision Makefiles) is -O1. xchesscc_wrapper takes no -O (CHESSCCWRAP2(P)_FLAGS have none).
# DEFAULT_OPT_LEVEL and OPT_LEVELS: spec/request.py, with the option


def check_opt_level(level: int, compiler: str) -> None:
    """A kernel optimisation level Peano takes (-O0 .. -O3), and only for Peano."""
    if level not in OPT_LEVELS:
        raise ConfigError(f"kernel optimisation level {level} is not one of Peano's -O{OPT_LEVELS[0]} .. "
                          f"-O{OPT_LEVELS[-1]}", f"use {opt('opt_level', DEFAULT_OPT_LEVEL)} (the default) or 1")
    if compiler != "peano" and level != DEFAULT_OPT_LEVEL:
        raise ConfigError(f"{opt('opt_level', level)} applies to Peano; xchesscc_wrapper takes no -O flag "
                          "(mlir-aie's CHESSCCWRAP2(P)_FLAGS)",
                          f"drop {opt('opt_level')}, or build with Peano (no {opt('compiler', 'chess')})")


def opt_flag(level: int) -> str:
    return f"-O{level}"
