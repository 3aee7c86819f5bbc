"""The kernel variant of a scalar-type kernel tile: its accumulator expansion and its loop structure.

A kernel computes its C tile as *clusters* of er x et accumulators (er block rows of A times et
block columns of B, each an r x s x t aie::mmul): a round loads er A blocks and et B blocks for
er * et vmacs. Wider clusters need fewer loads per vmac and spread the cluster's fixed cost (loading
and storing C, filling and draining the pipeline) over more vmacs, as long as their accumulators fit
the accumulator file and their operands the vector file (register arithmetic, facts.devices.CORE_ISA).
mlir-aie's aie2 kernels use 4 x 4 for bf16 4x8x4 and 4 x 2 for i8 4x8x8 for that reason. npu2's
bf16-via-bfp16 emulation converts every operand through an accumulator register as well
(EMULATION_ACC_TEMPS): its 2 x 2 cluster of 8x8x8 fills the file, conversions included, and leaves
c-overlap no spare accumulator.

The loop structure says which loop the compiler software-pipelines, the others being plain or
flattened (fully unrolled):
- k-pipelined: the K loop of each cluster; nothing overlaps between clusters (the smallest code);
- c-overlap: the K loop pipelined as in k-pipelined, its last k-step peeled by the template: each
  chain's last mac, then its C store, then the next cluster's C reload into the same accumulator,
  so one cluster's stores and the next one's reloads run on the store and load units while the
  other chains still mac (explicit in the source, needing no room for a second cluster: one C block
  in flight through the vector registers, and a spare accumulator if there is one);
- k-flat: K flattened, the cluster loop along N pipelined: consecutive clusters of a block row overlap;
- jk-flat: K and the cluster loop flattened, the block-row loop pipelined (mlir-aie's OPT_PERF
  path): every cluster overlaps its neighbours.
Overlapping clusters by flattening needs room for the next cluster's accumulators: when a cluster
fills the accumulator file (acc_sets() == 1), flattening buys nothing and the automatic choice is
c-overlap (k-pipelined if even that does not fit). Otherwise it takes the most overlapping structure
whose estimated code fits CODE_BUDGET of the 16 KB program memory. The estimate is an upper
bound by construction (every cycle a full 128-bit instruction, the pipelined body held about
PIPELINE_COPIES times: prologue, kernel, epilogue); an explicit choice is never refused for it, the
plan prints it.

Under Peano a flattened loop is `#pragma clang loop unroll(full)` (kernels/gemm_gen_kernel.h), so the code is
what the estimate counts, as under chess; but Peano software-pipelines a loop only if its body fits the post-RA
pipeliner's largest II (spec/rules/peano.py POSTPIPELINER_MAX_II): a flattening structure whose pipelined body
needs more vector issue cycles than that is not offered with Peano, and refused when asked for
(peano_problem), since Peano would leave its cluster loop unpipelined, which is not what the model prices.

Functions take NumPy arrays (the tuner's candidates) or ints and apply the same rule to both. The
one predicate of a bfp16 (block) kernel lives here too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...facts.devices import MIXED, Device, MmulShape
from ...facts.dtypes import DType, dtype
from ...facts.errors import ConfigError, opt
from ...facts.precision import Precision
from ..request import EXPANSIONS, LOOPS
from . import peano

KERNEL_EXPANSION = 2  # our kernels compute 2 x 2 blocks of mmuls: m % 2r == 0, n % 2t == 0
FLATTENING = ("k-flat", "jk-flat")  # the structures that need a second cluster's accumulators
DEFAULT_LOOPS = "k-pipelined"
CANDIDATES = EXPANSIONS  # er x et (spec/request.py); narrower ones share too few loads
CODE_BUDGET = 0.5  # of the program memory, for flattened matmul code (the rest: zero kernel, main, runtime)
# of the program memory, for the fused epilogue's block loops (every mode of a runtime activation: the union
# must fit); the last quarter stays for the zero kernel, main and the runtime. A budget, not a measurement.
EPILOGUE_CODE_BUDGET = 0.25
PIPELINE_COPIES = 3
# vector instructions per 8x8x8 step of aie_api's bf16-via-bfp16 emulation: A and B converted to
# bfp16, then one mac_8x8_8x8T (aie2p/mmul_bf16_bf16.hpp, C_block_larger_internal)
EMULATION_INSTRUCTIONS = 3
# The emulation's conversions pass through the accumulator registers: the 8x8x8 mac builds each operand as an
# accum<accfloat, 64> (acc_a from A; acc_b = mul_elem_64(B^T, ones)) and converts it with to_v64bfp16ebs8
# (jgmelber/aie_api@2b7eedf include/aie_api/detail/aie2p/mmul_bf16_bf16.hpp l.106-117, the
# AIE_API_EMULATE_BFLOAT16_MMUL_WITH_BFP16 branch). A cluster's C leaves the rest of the file for them. As
# written both temporaries are live together; counted is the least a kernel runs with, one 2048-bit register
# through which the compiler serialises every conversion: mlir-aie's own aie2p bf16 kernel under the emulation
# is a 2 x 2 cluster of 8x8x8 (aie_kernels/aie2p/mm.cc matmul_vectorized_2x2_mmul, r = 8; read at
# andrej/mlir-aie@3ca0193ce, not at the v1.4.3 tag), 4 of aie2p's 5 registers, so one is all it has. That
# register is also the "spare" c-overlap's reload would use (spare_accumulators).
EMULATION_ACC_TEMPS = 1
EMULATION_TEMP_LANES = 64  # accum<accfloat, 64>: one 8 x 8 operand block in fp32 lanes


@dataclass(frozen=True)
class KernelVariant:
    """er x et accumulators per cluster, and which loop is software-pipelined."""

    er: int
    et: int
    loops: str

    @property
    def expansion(self) -> tuple[int, int]:
        return (self.er, self.et)

    @property
    def chains(self) -> int:
        return self.er * self.et

    @property
    def name(self) -> str:
        return f"{self.er}x{self.et} {self.loops}"


def operand_types(dtype_in: str) -> tuple[DType, DType]:
    """A's and B's types of an mmul key (facts.devices.Device.operands): "i8" is i8 x i8, "i8xi4" i8 x i4.
    Every function here takes such a key as its `dtype_in`."""
    a, _, b = dtype_in.partition(MIXED)
    return dtype(a), dtype(b or a)


def round_loads(dev: Device, dtype_in: str, mmul: MmulShape, er: int, et: int) -> int:
    """Vector loads of one cluster round: er A blocks and et B blocks."""
    r, s, t = mmul
    ta, tb = operand_types(dtype_in)
    vld = dev.isa.vld_bytes
    return er * -(-ta.nbytes(r * s) // vld) + et * -(-tb.nbytes(s * t) // vld)


def emulation_temp_bits(dev: Device, dtype_in: str, mmul: MmulShape, emulate: bool) -> int:
    """Accumulator bits the bf16-via-bfp16 emulation's operand conversions hold beside a cluster's C
    (EMULATION_ACC_TEMPS accum<accfloat, 64>); 0 for a native mmul."""
    if not emulate:
        return 0
    return EMULATION_ACC_TEMPS * EMULATION_TEMP_LANES * dev.acc_bits(dtype_in, mmul)


def register_bits(dev: Device, dtype_in: str, mmul: MmulShape, er: int, et: int,
                  emulate: bool = False) -> tuple[int, int]:
    """(accumulator bits, operand bits) one cluster holds: er * et C blocks (and, emulating bf16 with
    bfp16, the conversions' accumulator temporaries), er A and et B blocks."""
    r, s, t = mmul
    ta, tb = operand_types(dtype_in)
    acc = er * et * r * t * dev.acc_bits(dtype_in, mmul) + emulation_temp_bits(dev, dtype_in, mmul, emulate)
    operands = er * r * s * ta.value_bits + et * s * t * tb.value_bits
    return acc, operands


def acc_sets(dev: Device, dtype_in: str, mmul: MmulShape, expansion: tuple[int, int], emulate: bool = False) -> int:
    """How many clusters' accumulators fit the accumulator file at once (atb's D)."""
    return dev.isa.acc_file_bits // register_bits(dev, dtype_in, mmul, *expansion, emulate)[0]


def spare_accumulators(dev: Device, dtype_in: str, mmul: MmulShape, expansion: tuple[int, int],
                       emulate: bool = False) -> int:
    """Accumulators of one r x t block the file holds beyond one cluster's er x et (and the emulation's
    conversion temporaries): where c-overlap reloads the next cluster's C before a store has freed its
    chain's register."""
    r, _, t = mmul
    free = dev.isa.acc_file_bits - register_bits(dev, dtype_in, mmul, *expansion, emulate)[0]
    return free // (r * t * dev.acc_bits(dtype_in, mmul))


def c_block_accesses(dev: Device, dtype_in: str, mmul: MmulShape, c_bytes: int) -> tuple[int, int]:
    """(vector loads, vector stores) that move one r x t block of C of c_bytes per value."""
    r, _, t = mmul
    isa = dev.isa
    return -(-r * t * c_bytes // isa.vld_bytes), -(-r * t * c_bytes // isa.vst_bytes)


def overlap_fits(dev: Device, dtype_in: str, mmul: MmulShape, expansion: tuple[int, int]) -> bool:
    """c-overlap's registers: one round's operands and one C block in flight (a reload widened
    into its accumulator, C at most as wide as the accumulator lanes) fit the vector file; the
    accumulators need nothing beyond the cluster's own (a reload without a spare waits for its
    chain's store, which the model prices)."""
    r, _, t = mmul
    ops = register_bits(dev, dtype_in, mmul, *expansion)[1]
    return ops + r * t * dev.acc_bits(dtype_in, mmul) <= dev.isa.vector_file_bits


def expansions(dev: Device, dtype_in: str, mmul: MmulShape, emulate: bool = False) -> tuple[tuple[int, int], ...]:
    """The expansions whose registers fit, best first: more accumulators, then fewer loads per
    round, then more A rows. 2 x 2 always comes last or earlier (every kernel shape fits it)."""
    isa = dev.isa
    fit = [e for e in CANDIDATES
           if all(need <= have for need, have in zip(register_bits(dev, dtype_in, mmul, *e, emulate),
                                                      (isa.acc_file_bits, isa.vector_file_bits)))]
    if (2, 2) not in fit:
        raise ConfigError(f"the {dev.name} {dtype_in} mmul {'x'.join(map(str, mmul))} does not fit 2 x 2 "
                          "accumulators in the registers", f"use a smaller {opt('mmul_shape')}")
    return tuple(sorted(fit, key=lambda e: (-e[0] * e[1], round_loads(dev, dtype_in, mmul, *e), -e[0])))


def divides(mmul: MmulShape, expansion: tuple[int, int], t_ma: np.ndarray | int,
            n: np.ndarray | int) -> np.ndarray:
    """The tile splits into whole clusters: (m / rho) % (er r) == 0 and n % (et t) == 0."""
    r, _, t = mmul
    er, et = expansion
    return (np.asarray(t_ma) % (er * r) == 0) & (np.asarray(n) % (et * t) == 0)


def auto_expansion(dev: Device, dtype_in: str, mmul: MmulShape, t_ma: np.ndarray | int,
                   n: np.ndarray | int, emulate: bool = False) -> np.ndarray:
    """Per tile, the index into expansions() of the first that splits the tile into whole clusters."""
    order = expansions(dev, dtype_in, mmul, emulate)
    pick = np.full(np.broadcast(np.asarray(t_ma), np.asarray(n)).shape, len(order) - 1, dtype=np.int64)
    for i in reversed(range(len(order))):
        pick = np.where(divides(mmul, order[i], t_ma, n), i, pick)
    return pick


def instructions_per_mmul(dev: Device, dtype_in: str, mmul: MmulShape, emulate: bool) -> int:
    """Vector instructions one r x s x t step issues (what one cluster round costs in code)."""
    macs = mmul[0] * mmul[1] * mmul[2]
    if emulate:
        return EMULATION_INSTRUCTIONS
    per = dev.bf16_mmul_macs if dtype_in == "bf16" else dev.peak_macs[dtype_in]
    return max(1, -(-macs // per))


def pipelined_body(dev: Device, dtype_in: str, mmul: MmulShape, emulate: bool, expansion: tuple[int, int],
                   loops: str, k: np.ndarray | int, n: np.ndarray | int) -> np.ndarray:
    """Vector instructions of the software-pipelined loop's body (what is flattened inside it): its cycles in
    the one vector-mac issue slot, a lower bound on its II."""
    _, s, t = mmul
    er, et = expansion
    round_code = er * et * instructions_per_mmul(dev, dtype_in, mmul, emulate)
    steps = np.asarray(k) // s * round_code
    if loops in ("k-pipelined", "c-overlap"):  # the K loop: one round
        return np.full_like(steps, round_code)
    if loops == "k-flat":
        return steps
    if loops == "jk-flat":
        return steps * (np.asarray(n) // (et * t))
    raise ConfigError(f"unknown kernel loop structure {loops!r}", f"use one of {', '.join(LOOPS)}")


def code_bytes(dev: Device, dtype_in: str, mmul: MmulShape, emulate: bool, expansion: tuple[int, int],
               loops: str, k: np.ndarray | int, n: np.ndarray | int) -> np.ndarray:
    """Upper estimate of the matmul loop nest's code: the software-pipelined loop's body (what is
    flattened inside it) in full 128-bit instructions, PIPELINE_COPIES times."""
    body = pipelined_body(dev, dtype_in, mmul, emulate, expansion, loops, k, n)
    if loops == "c-overlap":
        # plus, once, the peeled last round (its A/B loads and macs) and each chain's C store and reload,
        # every one in an instruction of its own (C no wider than the accumulator lanes), and the first
        # cluster's C loads before the loops
        er, et = expansion
        round_code = er * et * instructions_per_mmul(dev, dtype_in, mmul, emulate)
        ld, st = c_block_accesses(dev, dtype_in, mmul, dev.acc_bits(dtype_in, mmul) // 8)
        peeled = round_code + round_loads(dev, dtype_in, mmul, er, et) + er * et * (2 * ld + st)
        body = body + -(-peeled // PIPELINE_COPIES)
    return np.asarray(body * PIPELINE_COPIES * dev.isa.instruction_bytes, dtype=np.int64)


def peano_pipelines(dev: Device, dtype_in: str, mmul: MmulShape, emulate: bool, expansion: tuple[int, int],
                    loops: str, k: np.ndarray | int, n: np.ndarray | int) -> np.ndarray:
    """Whether Peano's post-RA pipeliner can pipeline the structure's loop: its body's issue cycles within
    POSTPIPELINER_MAX_II (spec/rules/peano.py). Applied to the flattening structures only: the K loop of k-pipelined
    and c-overlap is one round, within the limit but for npu2's native bf16 4x8x8 with 8 chains (8 x 8 = 64
    cycles), which neither the rule nor the model treats as unpipelined yet (both structures alike)."""
    return np.asarray(pipelined_body(dev, dtype_in, mmul, emulate, expansion, loops, k, n)
                      <= peano.POSTPIPELINER_MAX_II)


def peano_problem(dev: Device, dtype_in: str, mmul: MmulShape, emulate: bool, expansion: tuple[int, int],
                  loops: str, k: int, n: int) -> tuple[str, str] | None:
    """Why Peano would not software-pipeline a flattening structure's loop ((what, fix)), or None."""
    if loops not in FLATTENING or bool(peano_pipelines(dev, dtype_in, mmul, emulate, expansion, loops, k, n)):
        return None
    body = int(pipelined_body(dev, dtype_in, mmul, emulate, expansion, loops, k, n))
    return (f"{loops} with Peano: the pipelined loop's unrolled body issues {body} vector instructions, past the "
            f"{peano.POSTPIPELINER_MAX_II}-cycle II Peano's post-RA pipeliner tries (-aie-postpipeliner-maxii), "
            "so Peano would not pipeline it",
            f"use {opt('kernel_loops', 'k-pipelined', 'c-overlap')} (or leave it to the automatic choice), a smaller "
            f"k or n, or {opt('compiler', 'chess')}")


def auto_loops(dev: Device, dtype_in: str, mmul: MmulShape, emulate: bool, expansion: tuple[int, int],
               k: np.ndarray | int, n: np.ndarray | int, reserve_bytes: int = 0,
               compiler: str = "peano") -> np.ndarray:
    """Per tile, the index into LOOPS of the most overlapping structure whose registers and code
    fit CODE_BUDGET (no flattening when the cluster's accumulators leave no room for the next), less
    `reserve_bytes` of other code the matmul function holds (W4A16's dequantization pass,
    gemm_gen/spec/rules/dequant.dequant_code_bytes), and, with Peano, whose loop Peano pipelines."""
    budget = CODE_BUDGET * dev.isa.program_bytes - reserve_bytes
    pick = np.zeros(np.broadcast(np.asarray(k), np.asarray(n)).shape, dtype=np.int64)
    room = acc_sets(dev, dtype_in, mmul, expansion, emulate) > 1
    for i, loops in enumerate(LOOPS):
        if loops in FLATTENING and not room or loops == "c-overlap" and not overlap_fits(dev, dtype_in, mmul,
                                                                                          expansion):
            continue
        fits = code_bytes(dev, dtype_in, mmul, emulate, expansion, loops, k, n) <= budget
        if compiler == "peano" and loops in FLATTENING:
            fits = fits & peano_pipelines(dev, dtype_in, mmul, emulate, expansion, loops, k, n)
        pick = np.where(fits, i, pick)
    return pick


def expansion_problem(dev: Device, dtype_in: str, mmul: MmulShape, emulate: bool,
                      expansion: tuple[int, int]) -> tuple[str, str] | None:
    """(what, fix) when no kernel of this mmul has the given expansion (its accumulators and operands do
    not fit the register files, or it is not one of ours); None when one has. It needs no tiling, so
    checks.check_types asks it before any search prices a kernel with it."""
    order = expansions(dev, dtype_in, mmul, emulate)
    if expansion in order:
        return None
    ex = "x".join(map(str, expansion))
    acc, ops = register_bits(dev, dtype_in, mmul, *expansion, emulate)
    return (f"expansion {ex} of the {dev.name} {dtype_in} mmul {'x'.join(map(str, mmul))} needs {acc} accumulator and "
            f"{ops} operand bits, more than the {dev.isa.acc_file_bits} and {dev.isa.vector_file_bits} the core has"
            if expansion in CANDIDATES else f"expansion {ex} is not one of ours",
            f"use {opt('expansion', *order)}")


def choices(dev: Device, dtype_in: str, mmul: MmulShape, emulate: bool, t_ma: np.ndarray | int, k: np.ndarray | int,
            n: np.ndarray | int, expansion: tuple[int, int] | None = None, loops: str | None = None,
            reserve_bytes: int = 0, compiler: str = "peano") -> tuple[np.ndarray, np.ndarray]:
    """Per tile, the variant `choose` takes: its expansion (an index into expansions()) and loop structure (an
    index into LOOPS), the given ones where given (`choose` refuses those that do not fit), else the automatic
    ones (auto_expansion, then auto_loops for that expansion)."""
    order = expansions(dev, dtype_in, mmul, emulate)
    k, n = np.broadcast_arrays(np.asarray(k), np.asarray(n), np.asarray(t_ma))[:2]
    given = None if expansion is None else (int(expansion[0]), int(expansion[1]))
    ex = np.full(k.shape, order.index(given), dtype=np.int64) if given in order else \
        np.broadcast_to(auto_expansion(dev, dtype_in, mmul, t_ma, n, emulate), k.shape)
    if loops is not None:
        return ex, np.full(k.shape, LOOPS.index(loops), dtype=np.int64)
    lp = np.zeros(k.shape, dtype=np.int64)
    for i, e in enumerate(order):
        sel = ex == i
        if sel.any():
            lp[sel] = auto_loops(dev, dtype_in, mmul, emulate, e, k[sel], n[sel], reserve_bytes, compiler)
    return ex, lp


def choose(dev: Device, dtype_in: str, mmul: MmulShape, emulate: bool, t_ma: int, k: int, n: int,
           expansion: tuple[int, int] | None = None, loops: str | None = None,
           reserve_bytes: int = 0, compiler: str = "peano") -> KernelVariant:
    """The variant of one kernel tile: the given expansion and loops (checked), or the automatic ones
    (leaving `reserve_bytes` of the matmul's code budget to other code, see auto_loops) for `compiler`."""
    if expansion is not None:
        expansion = (int(expansion[0]), int(expansion[1]))
        ex = "x".join(map(str, expansion))
        problem = expansion_problem(dev, dtype_in, mmul, emulate, expansion)
        if problem is not None:
            raise ConfigError(*problem)
        if not bool(divides(mmul, expansion, t_ma, n)):
            r, _, t = mmul
            raise ConfigError(f"kernel tile {t_ma}x{k}x{n} (m / rho x k x n) does not split into {ex} clusters "
                              f"of mmul {'x'.join(map(str, mmul))}",
                              f"use (m / rho) % {expansion[0] * r} == 0 and n % {expansion[1] * t} == 0, "
                              f"or another {opt('expansion')}")
    if loops is not None and loops not in LOOPS:
        raise ConfigError(f"unknown kernel loop structure {loops!r}", f"use {opt('kernel_loops', *LOOPS)}")
    ex_i, loops_i = choices(dev, dtype_in, mmul, emulate, t_ma, k, n, expansion, loops, reserve_bytes, compiler)
    chosen = expansions(dev, dtype_in, mmul, emulate)[int(ex_i)]
    if loops is not None and compiler == "peano" and (
            problem := peano_problem(dev, dtype_in, mmul, emulate, chosen, loops, k, n)):
        raise ConfigError(*problem)
    return KernelVariant(chosen[0], chosen[1], LOOPS[int(loops_i)])


def peano_loops_ok(dev: Device, dtype_in: str, mmul: MmulShape, emulate: bool, expansions_i: np.ndarray, loops: str,
                   k: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Per tile (its expansion an index into expansions(), as `choices` gives it): whether Peano pipelines a given
    structure's loop (peano_problem's rule)."""
    ok = np.ones(np.shape(k), dtype=bool)
    if loops not in FLATTENING:
        return ok
    for i, e in enumerate(expansions(dev, dtype_in, mmul, emulate)):
        sel = expansions_i == i
        if sel.any():
            ok[sel] = peano_pipelines(dev, dtype_in, mmul, emulate, e, loops, k[sel], n[sel])
    return ok


def epilogue_code_bytes(dev: Device, mode_ops: tuple[int, ...]) -> int:
    """Upper estimate of the fused epilogue's code, as code_bytes estimates the matmul's: each compiled block
    loop (epilogue.mode_ops: one per mode of a runtime activation) software-pipelined, its vector operations in
    full instructions, PIPELINE_COPIES times."""
    return sum(mode_ops) * PIPELINE_COPIES * dev.isa.instruction_bytes


def epilogue_code_problem(dev: Device, mode_ops: tuple[int, ...], what: str) -> tuple[str, str] | None:
    """Why the epilogue's code does not fit its EPILOGUE_CODE_BUDGET of program memory ((what, fix)), or None."""
    need, budget = epilogue_code_bytes(dev, mode_ops), int(EPILOGUE_CODE_BUDGET * dev.isa.program_bytes)
    if need <= budget:
        return None
    return (f"the epilogue's code ({what}: about {need} B) exceeds its {budget} B of the {dev.name} core's "
            f"{dev.isa.program_bytes} B program memory",
            f"build one activation ({opt('activation')} NAME), or drop {opt('clamp')}")


def block_kernel(p: Precision, convert_once: bool) -> bool:
    """Whether the kernel is a bfp16 one (templates/mm_bfp16.cc.j2, one fixed variant): a bfp16
    precision, or bf16 converted to bfp16 once per call."""
    return p.block or bool(convert_once)


def converts_a_tile(p: Precision, convert_once: bool) -> bool:
    """Whether the kernel converts its bf16 A tile to bfp16 in an L1 scratch (the ATB config1 A, or
    the convert-once bf16 kernel)."""
    return p.converts_a or bool(convert_once)
