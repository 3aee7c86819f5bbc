"""Build a design into build/final_<suffix>.xclbin and build/insts_<suffix>.bin.

Steps, as mlir-aie's matrix_multiplication Makefiles run them: render the kernel source, compile it
with Peano (clang++ --target=aie2|aie2p-none-unknown-elf) or xchesscc_wrapper (CHESS=1), lower the
Design to MLIR through IRON, and run aiecc to produce the xclbin and the NPU instructions.
Everything happens in a scratch directory under build/ and is moved into build/ only when every
step succeeded, so a failure never leaves partial artifacts. After aiecc, what it measured of each
core's stack is read (backends/stack.py), a core whose frame exceeds its stack is refused, and the
report is kept as build/stack_<suffix>.json.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .. import version
from ..design.build import for_call
from ..design.ir import Design, KernelBuild
from ..design.serialize import dumps
from ..facts.atomic import write_atomic
from ..facts.devices import KERNEL_DATA
from ..facts.errors import BuildError
from ..spec.call import CallPlan
from ..spec.rules import peano
from . import iron, stack, toolchain
from .kernel_source import kernel_defines, kernel_include_dir, render_kernel, source_file
from .toolchain import Toolchain

# mlir-aie's programming_examples/makefile-common: WARNING_FLAGS and PEANOWRAP2(P)_FLAGS
PEANO_WARNINGS = ["-Wno-parentheses", "-Wno-attributes", "-Wno-macro-redefined", "-Wno-empty-body",
                  "-Wno-missing-template-arg-list-after-template-kw"]
ALLOC_SCHEME = "basic-sequential"  # mlir-aie's matrix_multiplication default (buffer_aloc_flag)
# Record each function's frame in a .stack_sizes section, which aiecc 1.4.3 reads to check every
# core's stack_size (PRs #3613, #3680): without it the kernel's frames count as 0 and the core's
# requirement is only a lower bound (1.4.3 docs, core_data_memory; aiecc's own lit tests compile their
# aie2/aie2p kernels with this flag). A clang flag; xchesscc has none (aiecc does not check chess).
PEANO_STACK_FLAGS = ["-fstack-size-section"]


@dataclass(frozen=True)
class Artifacts:
    """The files a build produces, by mlir-aie's names."""

    build_dir: Path
    suffix: str
    kernel_source: str
    kernel_object: str

    @property
    def mlir(self) -> Path:
        return self.build_dir / f"aie_{self.suffix}.mlir"

    @property
    def xclbin(self) -> Path:
        return self.build_dir / f"final_{self.suffix}.xclbin"

    @property
    def insts(self) -> Path:
        return self.build_dir / f"insts_{self.suffix}.bin"

    @property
    def stamp(self) -> Path:
        """What the xclbin was built from (build_stamp)."""
        return self.build_dir / f"build_{self.suffix}.json"

    @property
    def stack_report(self) -> Path:
        """What aiecc measured of the cores' stacks (backends/stack.py StackReport)."""
        return self.build_dir / f"stack_{self.suffix}.json"

    @property
    def kernel_obj_path(self) -> Path:
        return self.build_dir / self.kernel_object

    def complete(self) -> bool:
        return self.xclbin.exists() and self.insts.exists()


@dataclass(frozen=True)
class Step:
    """One build step: a command line run in `cwd`, or gemm_gen's own work (`render`, `mlir`),
    which is shown as the equivalent gemm-gen command."""

    action: str  # "render" | "compile" | "mlir" | "aiecc"
    what: str
    argv: tuple[str, ...]
    cwd: str

    def shell(self) -> str:
        return f"cd {_sh(self.cwd)} && {' '.join(_sh(a) for a in self.argv)}"


def _sh(word: str) -> str:
    """Shell-quote a word, but leave $VARIABLE placeholders (dry runs) free to expand."""
    return word if re.fullmatch(r"[\w@%+=:,./$-]+", word) else shlex.quote(word)


def kernel_flags(tc: Toolchain, build: KernelBuild, include_dirs: list[str], defines: list[str]) -> list[str]:
    """Compiler flags of the kernel object (mlir-aie's PEANOWRAP2(P)_FLAGS / CHESSCCWRAP2(P)_FLAGS), with the
    build's -O level in place of their -O2 (spec/rules/peano.py) and, for a bfp16 kernel, the post-RA pipeliner
    flags mlir-aie PR #3650 compiles its flat block loop with."""
    includes = [f"-I{d}" for d in include_dirs]
    if tc.chess:
        return [build.aie_target, f"-I{tc.aietools_dir}/include", *includes, *defines]
    pipeliner = list(peano.BFP16_PIPELINER_FLAGS) if build.block_kernel else []
    return [peano.opt_flag(build.opt_level), "-std=c++20", f"--target={build.aie_target}-none-unknown-elf",
            *PEANO_WARNINGS, "-DNDEBUG", *PEANO_STACK_FLAGS, *pipeliner, f"-I{tc.mlir_aie_dir}/include", *includes,
            *defines]


def aiecc_flags(design: Design, tc: Toolchain, art: Artifacts) -> list[str]:
    """mlir-aie 1.4.3's aiecc (the C++ driver; outputs asked for with --get-*, Peano the default core
    compiler): the xclbin and the NPU instructions, mlir-aie's matrix_multiplication allocation
    scheme, and the core compiler named explicitly (--peano=DIR, or --xchesscc --xbridge as mlir-aie's
    compile utility passes for chess since PR #3501 made Peano the default). No --dynamic-objFifos,
    for any design (bfp16 included): dynamic objectfifo lowering is aiecc's default since PR #2549
    (cl::init(true), the pass agreeing since PR #3240), and since PR #3298 the stateful transform
    always lowers dynamically (=false only adds an unrolling pass). Peano builds also ask for the
    module with each core's measured stack (backends/stack.py; a chess link is not measured)."""
    argv = [tc.aiecc, f"--alloc-scheme={ALLOC_SCHEME}"]
    argv += ["--xchesscc", "--xbridge"] if tc.chess else [f"--peano={tc.peano_dir}"]
    return argv + ["--get-xclbin", f"--xclbin-name={art.xclbin.name}", "--get-npu-insts",
                   f"--npu-insts-name={art.insts.name}"] + ([] if tc.chess else [stack.GET_MEASURED])


def artifacts(design: Design, build_dir: Path) -> Artifacts:
    """What building `design` into `build_dir` produces."""
    kernel = design.kernels[0].build
    return Artifacts(build_dir, design.config.suffix, source_file(kernel), kernel.object_file)


def plan_build(design: Design, tc: Toolchain, build_dir: Path, gen_args: list[str]) -> tuple[Artifacts, list[Step]]:
    """The artifacts and the ordered steps of a build (nothing is run or written)."""
    kernel = design.kernels[0].build
    art = artifacts(design, build_dir)
    b = str(build_dir)
    compile_argv = (tc.kernel_cc, *kernel_flags(tc, kernel, [str(kernel_include_dir())], list(kernel_defines(kernel))),
                    "-c", art.kernel_source, "-o", art.kernel_object)
    aiecc_argv = aiecc_flags(design, tc, art) + [art.mlir.name]
    steps = [
        Step("render", "render the kernel source", ("gemm-gen", "kernel", *gen_args, "-o", art.kernel_source), b),
        Step("compile", "compile the kernel", compile_argv, b),
        Step("mlir", "lower the design to MLIR (IRON)", ("gemm-gen", "mlir", *gen_args, "-o", art.mlir.name), b),
        Step("aiecc", "aiecc: xclbin and NPU instructions", tuple(aiecc_argv), b),
    ]
    return art, steps


def build_stamp(design: Design) -> dict[str, object]:
    """What an xclbin was built from: the design, the kernel source, gemm_gen and the installed
    toolchain. A build whose stamp differs is stale and is rebuilt."""
    import hashlib
    import importlib.metadata

    def installed(dist: str) -> str | None:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None

    def sha(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()

    return {"design": sha(dumps(design)), "kernel": sha(render_kernel(design.kernels[0].build)),
            "gemm_gen": version.__version__, "mlir_aie": installed("mlir_aie"), "llvm_aie": installed("llvm-aie"),
            "compiler": design.config.kernel.compiler}


def stack_report(art: Artifacts) -> stack.StackReport | None:
    """What the build of `art` recorded of its cores' stacks (None: built before gemm_gen kept it)."""
    try:
        return stack.StackReport.from_json(json.loads(art.stack_report.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def is_current(art: Artifacts, design: Design) -> bool:
    """The artifacts exist and were built from this design with this gemm_gen and toolchain."""
    try:
        stamp = json.loads(art.stamp.read_text())
    except (OSError, ValueError):
        return False
    return art.complete() and stamp == build_stamp(design)


def run_build(design: Design, build_dir: Path, gen_args: list[str], verbose: bool = False) -> Artifacts:
    """Find the tools (or fail before writing anything), then run every step in a scratch directory.

    The kernel compiler is the design's (GemmConfig.compiler: peano, or chess). On success the
    artifacts move into build_dir with their stamp; on a failed step the scratch directory is kept as
    build_dir/failed_<suffix>/ with build.log (every command and its whole output), and no artifact
    is left under its final name."""
    iron.check_lowerable(design)  # a design the lowering does not take: said before any tool is looked for
    tc = toolchain.find_toolchain(design.config.kernel.compiler == "chess", strict=True)
    api = iron.iron_api()  # mlir-aie missing: fail before anything is written
    build_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".build-", dir=build_dir))
    log: list[str] = []
    art, steps = plan_build(design, tc, scratch, gen_args)
    try:
        kernel = design.kernels[0].build
        for step in steps:
            log.append(f"# {step.what}\n{step.shell()}")
            if verbose:
                print(log[-1], flush=True)
            if step.action == "render":
                write_atomic(scratch / art.kernel_source, render_kernel(kernel))
            elif step.action == "mlir":
                write_atomic(art.mlir, iron.to_mlir(design, api))
            else:
                try:
                    done = subprocess.run(step.argv, cwd=scratch, capture_output=True, text=True)
                except OSError as e:
                    raise BuildError(f"{step.what} could not start {step.argv[0]} ({e.strerror})",
                                     "check the toolchain with `gemm-gen doctor`") from None
                output = (done.stdout + done.stderr).rstrip()
                log.append(output + f"\n# exit {done.returncode}")
                if verbose and output:
                    print(output, flush=True)
                if done.returncode:
                    tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["(no output)"]
                    kept = _keep_failed(scratch, build_dir, art.suffix, log)
                    refused = stack.insufficient(output) if step.action == "aiecc" else None
                    if refused is not None:  # aiecc's own stack check: one line that says what to set
                        raise stack.overflow(f"aiecc refused {art.suffix}", refused[1], refused[0],
                                             more=f" (aiecc's whole output: {kept}/build.log)")
                    raise BuildError(f"{step.what} failed (exit {done.returncode}): {tail[0]}",
                                     f"its whole output and the build's files are in {kept}/ (build.log)")
                if step.action == "aiecc":
                    report = stack.read_report(scratch, output, design.config.array.stack_bytes, tc.chess)
                    log.append(f"# stack: {json.dumps(report.to_json())}")
                    if report.overflows:
                        kept = _keep_failed(scratch, build_dir, art.suffix, log)
                        raise stack.overflow(f"aiecc measured {art.suffix}", report.frame_bytes or 0,
                                             report.stack_bytes, report.deepest,
                                             more=f" (the build's files: {kept}/)")
                    reserved = design.config.l1_parts.get(KERNEL_DATA, 0)
                    if report.data_bytes is not None and report.data_bytes > reserved:
                        kept = _keep_failed(scratch, build_dir, art.suffix, log)
                        core = max(report.data, key=lambda k: report.data[k])
                        raise stack.data_overflow(f"aiecc measured {art.suffix}", report.data_bytes, reserved, core,
                                                  more=f" (the build's files: {kept}/)")
                    write_atomic(art.stack_report, json.dumps(report.to_json(), indent=1) + "\n")
        final = Artifacts(build_dir, art.suffix, art.kernel_source, art.kernel_object)
        final.stamp.unlink(missing_ok=True)  # interrupted among the moves below: no stamp vouches for a mix
        for name in (art.kernel_source, art.kernel_object, art.mlir.name, art.xclbin.name, art.insts.name,
                     art.stack_report.name):
            (scratch / name).replace(build_dir / name)
        write_atomic(final.stamp, json.dumps(build_stamp(design), indent=1) + "\n")
        return final
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _keep_failed(scratch: Path, build_dir: Path, suffix: str, log: list[str]) -> Path:
    """The failed build's scratch directory, kept for diagnosis as build_dir/failed_<suffix>."""
    (scratch / "build.log").write_text("\n".join(log) + "\n")
    kept = build_dir / f"failed_{suffix}"
    shutil.rmtree(kept, ignore_errors=True)
    scratch.rename(kept)
    return kept


def insts_step(design: Design, tc: Toolchain, mlir: str, insts: str, cwd: str) -> Step:
    """aiecc asked for the NPU instructions only: one call's runtime sequence for an xclbin that
    is already built (the cores, objectfifos and kernels are the design's own)."""
    argv = aiecc_flags(design, tc, artifacts(design, Path(cwd)))
    keep = [a for a in argv if not a.startswith(("--get-xclbin", "--xclbin-name=", "--npu-insts-name=",
                                                 stack.GET_MEASURED))]  # measuring would compile the cores
    return Step("aiecc", f"aiecc: the NPU instructions of {Path(insts).stem}", (*keep, f"--npu-insts-name={insts}",
                                                                            mlir), cwd)


def run_insts_build(design: Design, call: CallPlan, entry: Path, insts: Path, verbose: bool = False) -> Path:
    """Lower the design with one call's runtime sequence to MLIR and let aiecc write only its
    instruction stream into `insts` (beside the xclbin, whose kernel object it links)."""
    tc = toolchain.find_toolchain(design.config.kernel.compiler == "chess", strict=True)
    api = iron.iron_api()
    sized = for_call(design, call)  # the Design serving the call: its sequence, tensors and what they compute
    mlir = entry / f"aie_{call.problem}.mlir"
    write_atomic(mlir, iron.to_mlir(sized, api))
    step = insts_step(design, tc, mlir.name, insts.name, str(entry))
    if verbose:
        print(f"# {step.what}\n{step.shell()}", flush=True)
    try:
        done = subprocess.run(step.argv, cwd=entry, capture_output=True, text=True)
    except OSError as e:
        raise BuildError(f"{step.what} could not start {step.argv[0]} ({e.strerror})",
                         "check the toolchain with `gemm-gen doctor`") from None
    if done.returncode or not insts.exists():
        insts.unlink(missing_ok=True)
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise BuildError(f"{step.what} failed (exit {done.returncode}): {tail[0]}",
                         f"run it by hand in {entry}: {step.shell()}")
    return insts

