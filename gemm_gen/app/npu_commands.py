"""gemm-gen kernel | mlir | build | run | doctor | validate | cache: the hardware path's commands."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import ModuleType

from ..backends import cache, doctor, iron, toolchain
from ..backends.compile import artifacts, is_current, plan_build, run_build
from ..backends.kernel_source import render_kernel
from ..backends.npu_call import call_files, is_built
from ..backends.runner import MAX_TIMEOUT_MS, TIMEOUT_FACTOR, TIMEOUT_FLOOR_MS, run_calls, run_design
from ..design import Design, build_design
from ..design.serve import serve
from ..facts.atomic import check_output_dir, check_output_file, write_atomic
from ..facts.devices import device
from ..facts.inputs import INPUT_FAMILIES
from . import validate
from .choice import choice, say_chosen
from .cliargs import SEED, call_layouts, config_args, counted, problem_args
from .limits import slow_end_s
from .parsing import EXIT_FAIL, EXIT_USAGE


def cmd_kernel(a: argparse.Namespace) -> int:
    output = None if a.output is None else check_output_file(a.output, "-o")  # before any work
    chosen = choice(a)
    design = build_design(chosen.config)
    text = render_kernel(design.kernels[0].build)
    say_chosen("kernel", chosen)  # once nothing can refuse it: a refusal stays one line
    if output is not None:
        write_atomic(output, text)
    else:
        sys.stdout.write(text)
    return 0


def cmd_mlir(a: argparse.Namespace) -> int:
    output = None if a.output is None else check_output_file(a.output, "-o")  # before any work
    chosen = choice(a)
    design = build_design(chosen.config)
    text = iron.to_mlir(design)
    say_chosen("mlir", chosen)  # once IRON has lowered it: a missing mlir-aie stays one line
    if output is not None:
        write_atomic(output, text)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def cmd_build(a: argparse.Namespace) -> int:
    build_dir = check_output_dir(a.build_dir, "--build-dir")
    chosen = choice(a)
    config = chosen.config
    design = build_design(config)
    gen_args = config_args(design.config)
    # missing tools are one sentence (as run_build says them), said before the chosen design; a design the lowering
    # does not take yet first (installing the tools would not help)
    iron.check_lowerable(design)
    tc = toolchain.find_toolchain(design.config.kernel.compiler == "chess", strict=not a.dry_run)
    if not a.dry_run:
        iron.iron_api()
    say_chosen("build", chosen)
    if a.dry_run:
        art, steps = plan_build(design, tc, build_dir, gen_args)
        if a.json:
            print(json.dumps({"steps": [{"what": s.what, "cwd": s.cwd, "argv": list(s.argv)} for s in steps],
                              "xclbin": str(art.xclbin), "insts": str(art.insts)}, indent=1))
        else:
            for step in steps:
                print(f"# {step.what}\n{step.shell()}")
        return 0
    art = run_build(design, build_dir, gen_args, verbose=a.verbose)
    if a.json:
        print(json.dumps({"xclbin": str(art.xclbin), "insts": str(art.insts), "mlir": str(art.mlir)}))
    else:
        print(f"built {art.xclbin} and {art.insts}")
    return 0


def cmd_run(a: argparse.Namespace) -> int:
    check_output_dir(a.build_dir, "--build-dir")
    chosen = choice(a)
    config = chosen.config
    design = build_design(config)
    xrt = toolchain.pyxrt()  # no XRT: one sentence and exit 2, before building anything
    say_chosen("run", chosen)
    if a.runtime_sizes:
        return _run_sizes(a, design, xrt)
    art = artifacts(design, Path(a.build_dir))
    if not is_current(art, design):
        art = run_build(design, Path(a.build_dir), config_args(design.config), verbose=a.verbose)
    result = run_design(design.config, art, a.iters, a.warmup, a.seed, xrt, a.inputs, a.timeout_ms, slow_end_s)
    if a.json:
        print(json.dumps(result.to_json(), indent=1))
    else:
        # what C lost against A @ B first (as test.cpp's verbose lines come first), then mlir-aie's lines
        print(f"vs exact A @ B: {result.accuracy.text()}")
        print("\n".join(result.lines()))  # mlir-aie ends with a blank line too
    return 0 if result.passed else EXIT_FAIL


def _run_sizes(a: argparse.Namespace, design: Design, xrt: ModuleType) -> int:
    """Each --runtime-sizes size on the NPU with one xclbin: built (or found) once in the build
    cache, one instruction stream per size beside it, the xclbin loaded once."""
    lays = call_layouts(a) or (None,) * len(a.runtime_sizes)  # refuse a size or layout before building anything
    calls = [serve(design.config, p, lay) for p, lay in zip(a.runtime_sizes, lays)]
    cached = is_built(design)
    files = [call_files(design, call, a.verbose, config_args(design.config)) for call in calls]
    results = run_calls(design.config, list(zip(calls, files)), a.iters, a.warmup,
                        a.seed, xrt, a.inputs, a.timeout_ms, slow_end_s)
    passed = all(r.passed for r in results)
    entry = cache.entry_dir(design)
    if a.json:
        print(json.dumps({"passed": passed, "xclbin": str(files[0].xclbin), "cache_hit": cached,
                          "calls": [dict(r.to_json(), insts=str(f.insts)) for r, f in zip(results, files)]}, indent=1))
        return 0 if passed else EXIT_FAIL
    print(f"xclbin {files[0].xclbin} ({'found in the build cache' if cached else 'built into the build cache'} "
          f"{entry.name}), loaded once")
    for r, f in zip(results, files):
        print(f"\nsize {r.problem or design.config.call.problem}: instructions {f.insts.name} (by {f.how})")
        print(f"vs exact A @ B: {r.accuracy.text()}")
        print("\n".join(r.lines()).rstrip("\n"))
    ok = f"PASS: one xclbin served all {len(results)} sizes"
    print(f"\n{ok}" if passed else f"\nFAIL: {sum(not r.passed for r in results)} of {len(results)} sizes failed")
    return 0 if passed else EXIT_FAIL


def cmd_doctor(a: argparse.Namespace) -> int:
    found = doctor.checks()
    print(json.dumps(doctor.to_json(found), indent=1) if a.json else doctor.report(found))
    return 0 if all(c.ok for c in found if c.required) else EXIT_FAIL


def cmd_validate(a: argparse.Namespace) -> int:
    dev = device(a.dev).name  # an unknown device or an unusable --build-dir: one line before the doctor
    check_output_dir(a.build_dir, "--build-dir")
    found = doctor.checks()
    if not all(c.ok for c in found if c.required):
        print(doctor.report(found))
        print("gemm-gen validate: error: the NPU toolchain is not ready (above); install what it names, then rerun",
              file=sys.stderr)
        return EXIT_USAGE
    family = next((doctor.npu_family(c.installed) for c in found if c.tool == "NPU" and c.installed), None)
    if family is not None and family != dev:
        print(f"gemm-gen validate: error: this machine's NPU is an {family}, not an {dev}; use DEVICE={family}",
              file=sys.stderr)
        return EXIT_USAGE
    record = validate.run_sweep(dev, Path(a.build_dir), a.iters, a.warmup, progress=not a.json, only=a.only,
                                timeout_ms=a.timeout_ms)
    path, png = validate.write_record(record, Path(a.build_dir))
    if a.json:
        print(json.dumps({"record": str(path), "plot": str(png), "designs": record["designs"],
                          "first_run_checks": validate.first_run_lines()}, indent=1))
    else:
        print(validate.summary(record))
        print(f"wrote {path} and {png}")
        print(validate.first_run_text(dev))
    bad = [d for d in record["designs"] if d["status"] in validate.BAD]
    return EXIT_FAIL if bad else 0


def _inputs_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--inputs", choices=INPUT_FAMILIES, default="exact",
                   help="float inputs: exact (fp32-exact sums, outputs checked bit for bit) or wide (lossy in "
                   "bfp16, checked within mlir-aie's tolerance on hardware)")


def cmd_cache(a: argparse.Namespace) -> int:
    if a.action == "clear":
        done = cache.clear()
        if a.json:
            print(json.dumps({"root": str(done.root), "cleared": len(done.entries), "not_ours": list(done.not_ours)}))
        else:
            print(f"removed {len(done.entries)} cached build(s) from {done.root}")
            _print_not_ours(done.not_ours)
        return 0
    found = cache.contents()
    if a.json:
        print(json.dumps({"root": str(found.root), "entries": [
            {"key": e.key, "path": str(e.path), "bytes": e.nbytes, "design": e.description, "sizes": list(e.sizes)}
            for e in found.entries], "not_ours": list(found.not_ours)}, indent=1))
        return 0
    print(f"{found.root}: {len(found.entries)} cached build(s)")
    for e in found.entries:
        sizes = f"; instruction streams for {', '.join(e.sizes)}" if e.sizes else ""
        print(f"  {e.key}  {e.nbytes / 2**20:7.1f} MiB  {e.description}{sizes}")
    _print_not_ours(found.not_ours)
    return 0


def _print_not_ours(names: tuple[str, ...]) -> None:
    """One line for what gemm_gen did not create there (and never lists as a build nor clears)."""
    if names:
        print(f"not ours (left alone, no gemm_gen entry marker): {', '.join(names)}")


def _timeout_arg(p: argparse.ArgumentParser, each: str) -> None:
    p.add_argument("--timeout-ms", type=counted(1, MAX_TIMEOUT_MS, "a time limit in milliseconds", "10000"),
                   default=None, help=f"time limit of each NPU run{each}: a run that has not completed by then is "
                   f"reported as hung (one line, exit 1) instead of waiting forever (default: max("
                   f"{TIMEOUT_FLOOR_MS // 1000} s, {TIMEOUT_FACTOR} x the model's predicted time at its slow end); "
                   "make: TIMEOUT_MS=")


def _build_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--build-dir", default="build")
    p.add_argument("-v", "--verbose", action="store_true", help="print each command as it runs")


def _doctor_flags(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--json", action="store_true", help="print one JSON object")
    sp.set_defaults(func=cmd_doctor)


def _validate_flags(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--dev", default="npu2", help="npu1 or npu2 (this machine's NPU)")
    sp.add_argument("--build-dir", default="build")
    sp.add_argument("--iters", type=counted(1, what="a run count"), default=10, help="timed runs per design")
    sp.add_argument("--warmup", type=counted(0, what="a run count"), default=1, help="untimed runs first")
    sp.add_argument("--only", choices=("all", *validate.ROLES), default="all",
                    help="the small designs (fit), the L1 allocation pairs (l1), the decode calls that fit a "
                    "stream's rate and a task's setup (decode), the papers' headline and the int4 designs (check), "
                    "or all")
    _timeout_arg(sp, " of every design (a hung design is recorded as TIMEOUT and the sweep goes on)")
    sp.add_argument("--json", action="store_true", help="print one JSON object")
    sp.set_defaults(func=cmd_validate)


def _cache_flags(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("action", choices=("list", "clear"))
    sp.add_argument("--json", action="store_true", help="print JSON")
    sp.set_defaults(func=cmd_cache)


def _kernel_flags(sp: argparse.ArgumentParser) -> None:
    problem_args(sp)
    sp.add_argument("-o", "--output", help="write to this file instead of stdout")
    sp.set_defaults(func=cmd_kernel)


def _mlir_flags(sp: argparse.ArgumentParser) -> None:
    problem_args(sp)
    sp.add_argument("-o", "--output", help="write to this file instead of stdout")
    sp.set_defaults(func=cmd_mlir)


def _build_flags(sp: argparse.ArgumentParser) -> None:
    problem_args(sp)
    _build_args(sp)
    sp.add_argument("--dry-run", action="store_true", help="print every command instead of running it")
    sp.set_defaults(func=cmd_build)


def _run_flags(sp: argparse.ArgumentParser) -> None:
    problem_args(sp)
    _build_args(sp)
    sp.add_argument("--warmup", type=counted(0, what="a run count"), default=1, help="untimed runs first")
    sp.add_argument("--iters", type=counted(1, what="a run count"), default=10, help="timed runs")
    sp.add_argument("--seed", type=SEED, default=0, help="seed of the inputs")
    _inputs_arg(sp)
    _timeout_arg(sp, "")
    sp.set_defaults(func=cmd_run)


# app/cli.py's COMMANDS names this module for these commands
FLAGS = {"doctor": _doctor_flags, "validate": _validate_flags, "cache": _cache_flags, "kernel": _kernel_flags,
         "mlir": _mlir_flags, "build": _build_flags, "run": _run_flags}
