"""make validate: build and run a fixed sweep on this machine's NPU, record it next to the model.

The sweep is data: first one small design per data type and B layout (role "fit": the rows
`gemm-gen calibrate --measurements` may fit the device constants on), then one tile per input type
with its planned L1 layout and with basic-sequential's (role "l1": what the cost of a bank shared by
the DMA and the core is fitted on), then decode calls (role "decode": one shim stream's rate and one
shim task's setup, fitted with the fit rows), then the papers' headline designs and the int4 designs
(role "check": only ever compared). Every design is built and run as `gemm-gen run` does, each run within its time limit
(runner.run_limit); a design that fails to build or run is recorded with its error (a hung one as
TIMEOUT) and the sweep goes on. The record
(build/validate_<device>.json) holds per design the config, PASS or the error count, the measured
min/avg/max microseconds and TOPS, the model's prediction, what aiecc measured of the cores' stack
frames against the stack they were given (backends/stack.py; "not reported" when aiecc said
nothing), and once the toolchain, driver and device as this machine reports them; a PNG plots
measured against predicted. FIRST_RUN_CHECKS is what a first run on each device confirms or
refutes, in the order things are most likely to fail: validate prints it, and
docs/hardware_path.md's list is generated from it (a test compares).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..backends import doctor, toolchain
from ..backends.compile import artifacts, is_current, run_build, stack_report
from ..backends.runner import run_design
from ..design import build_design
from ..design.serve import check
from ..facts.atomic import write_atomic
from ..facts.devices import DEVICES, device
from ..facts.errors import GemmGenError, RunTimeout, StackError
from ..model.fit import paper
from ..model.fit.calibrate import array_config
from ..model.predict import predict
from ..spec.config import GemmConfig
from ..spec.rules import decode_split, peano
from .cliargs import config_args
from .limits import slow_end_s

SMALL = (512, 512, 512)
# L1 allocation pairs (role "l1"): one tile per input type whose planned layout shares no bank between
# the DMA and the core while basic-sequential's does, run both ways on 2 columns (compute-bound: the
# cores' time shows), so that `gemm-gen calibrate --measurements` can fit the cost of a shared bank
# (model/l1_stall.py)
L1_PAIR = ((2048, 2048, 2048), (64, 32, 128, 512), 2)
L1_PAIR_TYPES = ("bf16", "i8")
# tiles of the small designs: (m, k, n, k_mt) per input type, valid for every output type and layout
# with C in the default accumulator (i16's int64 accumulator rows take half of L1 at 64 x 64)
SMALL_TILES = {"npu1": {"bf16": (64, 64, 64, 256), "i8": (64, 64, 64, 256), "i16": (64, 32, 64, 256)},
               "npu2": {"bf16": (64, 64, 64, 256), "i8": (64, 64, 64, 256), "i16": (64, 32, 64, 256)}}


# issue 22's unsettled constants (docs/int4_decode.md section 12), role "decode": one shim stream's rate,
# from one bf16 decode call on 1, 2, 4, ... columns (one B stream per column, so the time falls with the
# columns until DRAM's peak stops it), and the command processor's setup per shim task, from a call of
# many output blocks with a task group per block, its groups in flight one at a time (each waits for its
# setup) or four at once (a group's array time, about 2.3x its setup at the model's constants, hides it)
DECODE_CALL = (1, 4096, 4096)
SETUP_CALL = (1, 4096, 16384)
# the tuner's decode tiles for DECODE_CALL (tests/app/test_validate.py compares them with search.choose)
DECODE_TILES = {"npu1": (8, 8, 64, 1024), "npu2": (16, 8, 256, 1024)}
SETUP_N = 64  # the setup rows' n: SETUP_CALL has 16384 / (columns x 64) output blocks, 32 on npu2
# the int4 designs gemm-gen predict chooses (role "check": only compared; a test compares them with
# search.choose): the 4x16x16 mmul's issue rate (amd/IRON PR #182's size) and the W4A16 dequantization
# pass, both uncalibrated; (name, size, tiles, options)
# The decode calls take the split decode placement (one virtual column per core: rows 1, cols = the cores;
# docs/int4_decode.md section 13), which these rows also measure (its 32-way A broadcast and its stream across a
# column are routed by aiecc, never run here).
SPLIT: dict[str, dict[str, Any]] = {name: {"rows": 1, "cols": decode_split.virtual_columns(dev)}
                                     for name, dev in DEVICES.items()}
INT4_CHECKS: dict[str, tuple[tuple[str, tuple[int, int, int], tuple[int, int, int, int], dict[str, Any]], ...]] = {
    "npu1": (("i8 x i4 -> i32", (1024, 1024, 4096), (64, 176, 128, 1056), {"rho": 4, "b_pack": "strips"}),
             ("i8 x i4 -> i32 decode", DECODE_CALL, (8, 32, 32, 2048), {**SPLIT["npu1"], "b_pack": "strips"}),
             ("W4A16 g128 decode", DECODE_CALL, (8, 128, 32, 1024), {**SPLIT["npu1"], "group_size": 128})),
    "npu2": (("i8 x i4 -> i32", (1024, 1024, 4096), (88, 48, 128, 528), {"b_pack": "strips", "task_span": 0}),
             ("i8 x i4 -> i32 decode", DECODE_CALL, (8, 256, 128, 2048), {**SPLIT["npu2"], "b_pack": "strips"}),
             # the convert-once kernel (B dequantized straight into bfp16 tiles), npu2's W4A16 default
             ("W4A16 g128 decode", DECODE_CALL, (16, 128, 128, 1024), {**SPLIT["npu2"], "group_size": 128})),
}
# the bf16 decode call as the search now takes it (issue 34 item 4): role "check", only compared
SPLIT_CHECKS = {"npu1": (8, 32, 8, 1024), "npu2": (16, 64, 128, 1024)}
# issue 31 item 10, role "check": one design per dense mmul shape of the device, C accumulated wide and
# converted once through the fused epilogue (per-column bias, and requantization for integers, where the types
# take one), so that C shows the accumulator's lane order wherever the kernels read an r x t block out of it
# (gemm_gen/facts/lanes.py); a FAIL carries a note saying whether its errors are each block's values at permuted places
LANE_SIZE = (256, 256, 256)
ROLES = ("fit", "l1", "decode", "check")
# Peano's reported -O2 miscompiles (spec/rules/peano.py: llvm-aie #1262, a MAC loop and a LUT activation in one aie2p
# unit; mlir-aie #3792), role "check": one small epilogue design whose kernel is that combination (the K loop's
# macs and SiLU's tanh table), built at the default level and at -O1, each compared with `simulate` bit for bit
EPILOGUE_CALL = (512, 512, 512)
EPILOGUE_TILES = (64, 64, 64, 256)
EPILOGUE_OPT_LEVELS = (peano.DEFAULT_OPT_LEVEL, 1)


# a record's statuses: PASS, FAIL (wrong outputs), ERROR (build or XRT failed), TIMEOUT (a run that did
# not complete within its limit), SKIPPED; `gemm-gen calibrate --measurements` reads PASS rows only
BAD = ("FAIL", "ERROR", "TIMEOUT")


@dataclass(frozen=True)
class FirstRunCheck:
    """One thing the first `make validate` on an NPU confirms or refutes."""

    title: str
    look_at: str
    confirms: str
    refutes: str

    def line(self, number: int, markdown: bool = False) -> str:
        title = f"**{self.title}**" if markdown else self.title
        return f"{number}. {title} Look at {self.look_at}. Confirms: {self.confirms}. Refutes: {self.refutes}."


# Most likely to fail first: what no compiler has seen, then what the build checks, then the run.
FIRST_RUN_CHECKS: tuple[FirstRunCheck, ...] = (
    FirstRunCheck("The wide-accumulator kernels compile.",
                  "the fit rows' builds (no Peano or chess has compiled the kernels that keep C in f32/i32/i64)",
                  "every fit row builds",
                  "an ERROR whose `build/failed_<suffix>/build.log` points at the accumulator's load, store or "
                  "conversion in `templates/mm.cc.j2` (`--acc out` builds without them)"),
    FirstRunCheck("Stack frames fit the stacks.",
                  "each core's kernel frame as the build measures it, against the stack it reserves (`gemm-gen plan`)",
                  "every frame within its stack",
                  "a frame over it (the build refuses the design), or FAIL rows whose wrong outputs come from the "
                  "lowest L1 buffer, which an overflowing stack overwrites"),
    FirstRunCheck("aiecc's L1 layout is the predicted one.",
                  "a core's `aie.buffer` addresses (aiecc `--get-input-with-addresses`) against the design JSON's "
                  "`l1.predicted_addresses`, for the l1 rows",
                  "the same addresses",
                  "other addresses, or `bank-aware allocation failed` (`gemm-gen plan`'s bank map is then wrong; "
                  "build with `--l1-alloc basic-sequential`)"),
    FirstRunCheck("The runs complete and C is exact.",
                  "TIMEOUT and FAIL rows, the i16 ones apart (npu1 4x4x4 and npu2 4x4x8 mmuls: an int64 C kept as "
                  "int32 pairs through `aie::vector_cast`)",
                  "every fit row PASS",
                  "a TIMEOUT (a hang the simulator does not model); FAIL on the i16 rows only (the acc64 round trip, "
                  "whose lanes the simulator assumes low word first); FAIL elsewhere (data movement or numerics)"),
    FirstRunCheck("The accumulator's lanes are row-major.",
                  "the `lane order` check rows (one design per dense mmul shape, C converted once with a per-column "
                  "bias or requantization) and the `lane order:` note of any that FAIL (gemm_gen/facts/lanes.py)",
                  "every lane-order row PASS: each shape's mmul gives C's r x t block row-major, as aie_api documents "
                  "and the epilogue's per-column parameters assume",
                  "a FAIL whose note names a permutation of the block (that shape's accumulator reads out in another "
                  "order: the kernels must permute it, or not offer the shape); a FAIL whose note says the errors "
                  "are no permutation is another fault"),
    FirstRunCheck("Runtime parameters reach the cores in order.",
                  "`gemm-gen run --runtime-sizes` of a `--runtime-sizes mnk` build over several sizes in one "
                  "command (e.g. 512x512x512,300x200x100,64x512x64), and a `Gemm(..., activation='runtime')` "
                  "called with each activation in turn (validate runs neither): each call's sequence writes the "
                  "parameters, then sets every core's WorkerRuntimeBarrier, and the cores wait on it before reading",
                  "every size and every call PASS, the later ones included",
                  "FAIL on a later call only (a core read a parameter before that call's write landed: the barrier "
                  "does not order it), or a TIMEOUT (a core waits on a barrier nothing sets: compare the stream's "
                  "set with aiecc's, facts/devices.py CoreLocks' lock 0 at 0x1F000, as the encoder check does)"),
    FirstRunCheck("The LUT tanh reads its table.",
                  "the epilogue rows (bias + SiLU) and `make run M=256 K=256 N=256 BIAS=1 ACTIVATION=gelu` (validate "
                  "runs no GELU row), a core's `tanh_ab_*` and `tanh_cd_*` buffer addresses (aiecc "
                  "`--get-input-with-addresses`) and `data_bytes` in the build's `stack_<suffix>.json`",
                  "PASS, the two copies in two banks (bank = address / 16 KiB), `data_bytes` within the 256 B "
                  "`kernel data` reservation",
                  "FAIL on npu2 only (its 256-bit table layout, mlir-aie PR #2189, or the lane order the host models "
                  "for `load_lut_2x_float` and `::shuffle`); FAIL only for inputs within 2^-6 of a 2^-2 segment edge "
                  "(`aie::to_fixed_floor` not flooring); the copies in one bank (`mem_bank` not honoured: C silently "
                  "wrong); the build refused for its static data (raise `kernel data` in facts/devices.py)"),
    FirstRunCheck("The epilogue kernel survives Peano's default -O2.",
                  "the two epilogue rows (bias + SiLU: the K loop's macs and the tanh table's lookups in one unit, "
                  "the combination llvm-aie #1262 saw miscompiled at -O2 on aie2p; mlir-aie #3792 another), one "
                  "built at -O2 (the default, `--opt-level`/OPT_LEVEL) and one at -O1",
                  "both PASS: the NPU's C equals `gemm-gen simulate`'s bit for bit at either level",
                  "the -O2 row FAIL and the -O1 row PASS: the pinned Peano miscompiles our epilogue at -O2 (build "
                  "epilogues with OPT_LEVEL=1 and report it upstream); both FAIL: the epilogue itself "
                  "(docs/epilogues.md)"),
    FirstRunCheck("The host instruction encoder is trusted.",
                  "the `encoder` verdict in the build cache entry's `streams.json` after `gemm-gen run "
                  "--runtime-sizes` runs a size other than the xclbin's (validate runs none)",
                  "`\"matches\": true`",
                  "`\"matches\": false` and the first differing word (aiecc then writes every size's stream: "
                  "correct, but seconds per size)"),
    FirstRunCheck("Timing matches the model.",
                  "the summary's measured against predicted TOPS, then `gemm-gen calibrate --measurements`",
                  "fit rows within `gemm-gen predict`'s tops_low to tops_high",
                  "rows that the refit of the DRAM and dispatch constants does not bring in (the model's core side "
                  "is then wrong)"),
    FirstRunCheck("A shim stream's rate and a task's setup are the model's.",
                  "the decode rows: the same bf16 decode call on 1, 2, 4 and all columns, and a call of many task "
                  "groups with one or four in flight, then the `stream_gbps_256` and `bd_task_us` lines of "
                  "`gemm-gen calibrate --measurements` (docs/int4_decode.md section 12)",
                  "the decode call's time falls in proportion to its columns up to DRAM's peak, the setup call with "
                  "one group in flight is slower by about its groups' setups, and both constants are written near "
                  "calibration.json's",
                  "other values: each moves every decode prediction, and with them whether issue 22's decode "
                  "targets (85% of the DRAM roof, int4 3x bf16) can be met"),
    FirstRunCheck("The split decode placement builds, routes and runs as predicted.",
                  "the `bf16 decode-split` check row (and the int4 decode rows, which take the same placement): "
                  "aiecc's routing of the 32-way A broadcast beside 15 B streams and the one B stream across a "
                  "column, every memtile at 6 DMA channels (docs/int4_decode.md section 13)",
                  "it builds and PASSes, within its predicted range once the decode rows' constants are fitted",
                  "a routing or channel failure in aiecc (the placement is not expressible as built), or a time the "
                  "fitted constants do not explain (its busiest stream, 3 cores' B, is then not what the model "
                  "prices)"),
)


def first_run_lines(markdown: bool = False) -> list[str]:
    """FIRST_RUN_CHECKS as a numbered list (docs/hardware_path.md's is markdown=True)."""
    return [check.line(i, markdown) for i, check in enumerate(FIRST_RUN_CHECKS, 1)]


def first_run_text(dev_name: str) -> str:
    """What `make validate` prints after its summary."""
    return "\n".join([f"what this first run on an {dev_name} confirms or refutes, most likely to fail first:",
                      *(f"  {line}" for line in first_run_lines())])


@dataclass(frozen=True)
class SweepItem:
    name: str
    role: str  # one of ROLES
    source: str
    config: GemmConfig | None  # None: skipped
    skipped: str = ""


def sweep(dev_name: str, chess: bool) -> list[SweepItem]:
    """The fixed sweep of one device; designs that need chess are skipped without it."""
    dev = device(dev_name)
    items: list[SweepItem] = []
    M, K, N = SMALL
    for t_in, outs in dev.out_types.items():
        m, k, n, k_mt = SMALL_TILES[dev.name][t_in]
        for t_out in outs:
            for col in (False, True):
                c = GemmConfig(dev.name, M, K, N, m, k, n, k_mt, t_in, t_out, col)
                items.append(SweepItem(f"{t_in}->{t_out} B {'col' if col else 'row'}-major {M}x{K}x{N}", "fit",
                                       "gemm_gen small design", c))
    (M2, K2, N2), (m, k, n, k_mt), cols = L1_PAIR
    for t_in in L1_PAIR_TYPES:
        planned = GemmConfig(dev.name, M2, K2, N2, m, k, n, k_mt, t_in, t_in, cols=cols)
        for c in (planned, planned.with_(l1_alloc="basic-sequential")):
            how = c.array.l1_alloc or "planned"
            items.append(SweepItem(f"{t_in}->{t_in} {M2}x{K2}x{N2} ({m}x{k}x{n}, {cols} columns), L1 {how}", "l1",
                                   "gemm_gen L1 allocation pair", c))
    items += decode_items(dev_name)
    items += epilogue_items(dev_name)
    items += lane_items(dev_name)
    headline = list(paper.STRIKING_T2 if dev.name == "npu1" else paper.STRIKING_T3)
    if dev.name == "npu2":
        headline += [*paper.MLIR_AIE_ATB, paper.MLIR_AIE_BF16_EMU, paper.MLIR_AIE_BFP16]
    for row in headline:
        name = f"{row.source}: {row.dtype_in}->{row.dtype_out} {row.M}x{row.K}x{row.N} ({row.m}x{row.k}x{row.n})"
        c = array_config(row)
        if chess:  # the papers' kernels as they built them, with chess
            c = replace(c, compiler="chess")
        elif paper.block_row(row):  # the paper's chess stack; Peano builds get their own default
            c = replace(c, stack_bytes=0)
        else:  # the scalar kernel Peano gets: its own stack and variant (it cannot pipeline the paper's jk-flat)
            c = replace(c, compiler="peano", stack_bytes=0, expansion=None, kernel_loops=None)
        try:
            check(c)
        except GemmGenError as e:
            items.append(SweepItem(name, "check", row.source, None, f"not buildable here: {e}"))
            continue
        items.append(SweepItem(name, "check", row.source, c))
    return items


def epilogue_items(dev_name: str) -> list[SweepItem]:
    """The epilogue rows: one bias + SiLU design built at each of EPILOGUE_OPT_LEVELS (Peano)."""
    dev = device(dev_name)
    M, K, N = EPILOGUE_CALL
    m, k, n, k_mt = EPILOGUE_TILES
    items = []
    for level in EPILOGUE_OPT_LEVELS:
        c = GemmConfig(dev.name, M, K, N, m, k, n, k_mt, "bf16", "bf16", bias=True, activation="silu",
                       opt_level=level)
        items.append(SweepItem(f"bf16 bias + SiLU epilogue {M}x{K}x{N} ({m}x{k}x{n}), Peano -O{level}", "check",
                               "issue 31: Peano -O2 miscompiles (llvm-aie #1262, mlir-aie #3792)", c))
    return items


def lane_items(dev_name: str) -> list[SweepItem]:
    """The lane-order rows of one device (LANE_SIZE): every dense mmul shape, with the fused epilogue where the
    shape's types and accumulator take one, else its plain conversion once."""
    dev = device(dev_name)
    M, K, N = LANE_SIZE
    items = []
    for t_in, shapes in dev.mmul_shapes.items():
        m, k, n, k_mt = SMALL_TILES[dev.name][t_in]
        epilogue: dict[str, Any] = {"bias": True} if t_in == "bf16" else {"bias": True, "requant": "per_channel"}
        for shape in shapes:
            shape_name = "x".join(map(str, shape))
            scalar: dict[str, Any] = {"emulate_bf16_with_bfp16": False, "convert_once": False} if t_in == "bf16" else {}
            base = GemmConfig(dev.name, M, K, N, m, k, n, k_mt, t_in, t_in, mmul_shape=shape, **scalar)
            reason = ""
            for c, what in ((base.with_(**epilogue), "bias" if t_in == "bf16" else "bias + requantization"),
                            (base, "no epilogue")):
                try:
                    check(c)
                except GemmGenError as e:
                    reason = str(e)
                    continue
                items.append(SweepItem(f"lane order {t_in} {shape_name} ({what}) {M}x{K}x{N}", "check",
                                       "issue 31: the accumulator's lane order", c))
                break
            else:
                items.append(SweepItem(f"lane order {t_in} {shape_name}", "check",
                                       "issue 31: the accumulator's lane order", None, f"not buildable here: {reason}"))
    return items


def decode_items(dev_name: str) -> list[SweepItem]:
    """The decode rows (a stream's rate, a task's setup) and the int4 check rows of one device."""
    dev = device(dev_name)
    M, K, N = DECODE_CALL
    m, k, n, k_mt = DECODE_TILES[dev.name]
    items = []
    for cols in sorted({1, 2, 4, dev.columns}):
        c = GemmConfig(dev.name, M, K, N, m, k, n, k_mt, "bf16", "bf16", rows=1, cols=cols)
        items.append(SweepItem(f"bf16 decode {M}x{K}x{N} on {cols} column{'s' if cols > 1 else ''} ({m}x{k}x{n})",
                               "decode", "issue 22: one shim stream's rate", c))
    M, K, N = SETUP_CALL
    for groups in (1, 4):
        c = GemmConfig(dev.name, M, K, N, m, k, SETUP_N, k_mt, "bf16", "bf16", rows=1, task_span=1,
                       queue_groups=groups)
        items.append(SweepItem(f"bf16 decode {M}x{K}x{N} ({m}x{k}x{SETUP_N}), a task group per block, {groups} in "
                               "flight", "decode", "issue 22: the setup of one shim task", c))
    m, k, n, k_mt = SPLIT_CHECKS[dev.name]
    M, K, N = DECODE_CALL
    c = GemmConfig(dev.name, M, K, N, m, k, n, k_mt, "bf16", "bf16", b_pack="strips", **SPLIT[dev.name])
    items.append(SweepItem(f"bf16 decode-split {M}x{K}x{N} ({m}x{k}x{n}, B in strips)", "check",
                           "issue 34: B over every shim channel but A's, every core a slice of N", c))
    for name, (M, K, N), (m, k, n, k_mt), options in INT4_CHECKS[dev.name]:
        t_in, t_out = ("bf16", "bf16") if "group_size" in options else ("i8", "i32")
        c = GemmConfig(dev.name, M, K, N, m, k, n, k_mt, t_in, t_out, dtype_b="i4", **options)
        items.append(SweepItem(f"{name} {M}x{K}x{N} ({m}x{k}x{n})", "check", "issue 22: int4 kernels, uncalibrated",
                               c))
    return items


def _stats(times_us: list[float], macs: float) -> dict[str, float]:
    avg = sum(times_us) / len(times_us)
    return {"min_us": min(times_us), "avg_us": avg, "max_us": max(times_us),
            "max_tops": 2 * macs / min(times_us) / 1e6, "avg_tops": 2 * macs / avg / 1e6,
            "min_tops": 2 * macs / max(times_us) / 1e6}


def run_item(item: SweepItem, build_dir: Path, iters: int, warmup: int, xrt: Any,
             timeout_ms: int | None = None) -> dict[str, Any]:
    """Build (if needed), run and check one design; the error, if any, as a result (a run past its
    time limit as TIMEOUT, with the limit)."""
    record: dict[str, Any] = {"name": item.name, "role": item.role, "source": item.source}
    if item.config is None:
        return {**record, "status": "SKIPPED", "reason": item.skipped}
    c = item.config
    pred = predict(c)
    record.update(config=c.to_json(), predicted={"tops": pred.tops, "time_us": pred.time_us,
                                                 "bound": pred.bound})
    try:
        design = build_design(c)
        art = artifacts(design, build_dir)
        if not is_current(art, design):
            art = run_build(design, build_dir, config_args(c))
        report = stack_report(art)
        record["stack"] = report.to_json() if report else {"stack_bytes": c.array.stack_bytes, "status": "not reported",
                                                            "frame_bytes": None, "note": "no stack report kept"}
        result = run_design(c, art, iters, warmup, xrt=xrt, timeout_ms=timeout_ms, slow_end=slow_end_s)
    except RunTimeout as e:
        return {**record, "status": "TIMEOUT", "reason": str(e), "timeout_ms": e.timeout_ms}
    except StackError as e:  # aiecc (or gemm_gen) refused a frame deeper than the stack: record both
        record["stack"] = {"stack_bytes": e.stack_bytes, "status": "overflow", "frame_bytes": e.frame_bytes}
        return {**record, "status": "ERROR", "reason": str(e)}
    except GemmGenError as e:
        return {**record, "status": "ERROR", "reason": str(e)}
    except Exception as e:  # noqa: BLE001 - a failed run (XRT) must not end the sweep
        return {**record, "status": "ERROR", "reason": f"{type(e).__name__}: {e}"}
    record.update(status="PASS" if result.passed else "FAIL", errors=result.errors, checked=result.checked,
                  exact=result.exact, times_us=result.times_us, measured=_stats(result.times_us,
                                                                                c.size.M * c.size.K * c.size.N))
    if result.notes:  # a FAIL's lane-order verdict (gemm_gen/facts/lanes.py), among others
        record["notes"] = list(result.notes)
    return record


def run_sweep(dev_name: str, build_dir: Path, iters: int = 10, warmup: int = 1, progress: bool = True,
              xrt: Any = None, only: str = "all", timeout_ms: int | None = None) -> dict[str, Any]:
    """Run the sweep and return its record (the caller writes it)."""
    from tqdm import tqdm

    xrt = xrt or toolchain.pyxrt()
    env = doctor.environment()
    chess = doctor._tool(toolchain.xchesscc) is not None  # the wrapper and the compiler itself
    items = [i for i in sweep(dev_name, chess) if only in ("all", i.role)]
    records = []
    bar = tqdm(items, desc=f"validate {dev_name}", unit="design", file=sys.stderr, disable=not progress)
    for item in bar:
        bar.set_postfix_str(item.name[:40])
        records.append(run_item(item, build_dir, iters, warmup, xrt, timeout_ms))
    return {"format": 1, "device": device(dev_name).name, "environment": env, "iters": iters, "warmup": warmup,
            "designs": records}


def write_record(record: dict[str, Any], build_dir: Path) -> tuple[Path, Path]:
    """build/validate_<device>.json and its measured-vs-predicted PNG."""
    path = build_dir / f"validate_{record['device']}.json"
    write_atomic(path, json.dumps(record, indent=1) + "\n")
    return path, plot_record(record, build_dir / f"validate_{record['device']}.png")


def plot_record(record: dict[str, Any], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 5))
    top = 0.0
    for role, marker in (("fit", "o"), ("l1", "v"), ("decode", "^"), ("check", "s")):
        rows = [d for d in record["designs"] if d["role"] == role and d.get("measured")]
        x = [d["predicted"]["tops"] for d in rows]
        y = [d["measured"]["avg_tops"] for d in rows]
        top = max([top, *x, *y])
        ax.scatter(x, y, marker=marker, label=f"{role} rows ({len(rows)})")
    ax.plot([0, top * 1.05 or 1], [0, top * 1.05 or 1], color="grey", linewidth=0.8, label="measured = predicted")
    ax.set_xlabel("predicted TOPS (model)")
    ax.set_ylabel("measured TOPS (avg)")
    ax.set_title(f"gemm-gen validate {record['device']}: {record['environment'].get('device') or 'NPU'}")
    ax.legend()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return out


def summary(record: dict[str, Any]) -> str:
    """One line per design: status, measured and predicted TOPS (labelled), and their gap."""
    lines = [f"validate {record['device']} on {record['environment'].get('device') or 'an NPU'}: "
             f"measured (avg of {record['iters']} runs) against the model's PREDICTION"]
    for d in record["designs"]:
        if d["status"] == "SKIPPED" or "measured" not in d:
            lines.append(f"  {d['status']:<7} {d['role']:<6} {d['name']}: {d.get('reason', '')}")
            continue
        meas, pred = d["measured"]["avg_tops"], d["predicted"]["tops"]
        err = f"errors {d['errors']}, " if d["status"] == "FAIL" else ""
        lines.append(f"  {d['status']:<7} {d['role']:<6} {d['name']}: {err}measured {meas:.3f} TOPS, predicted "
                     f"{pred:.3f} ({(pred - meas) / meas:+.1%})")
    return "\n".join(lines + [stack_summary(record)])


def stack_summary(record: dict[str, Any]) -> str:
    """One line on the stack frames aiecc measured across the sweep, against the stacks given."""
    stacks = [d["stack"] for d in record["designs"] if d.get("stack")]
    measured = [s for s in stacks if s["status"] == "measured"]
    if not measured:
        said = ", ".join(sorted({s["status"] for s in stacks})) or "no design built"
        return f"stack frames: none measured by aiecc ({said})"
    worst = max(measured, key=lambda s: s["frame_bytes"] / s["stack_bytes"])
    return (f"stack frames: measured on {len(measured)} of {len(stacks)} built designs; the fullest stack is "
            f"{worst['frame_bytes']} of {worst['stack_bytes']} B")
