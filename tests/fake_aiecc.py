"""A stand-in for mlir-aie 1.4.3's `aiecc` command line. TESTS ONLY: it compiles nothing.

It accepts exactly the options of the 1.4.3 driver that a build can pass (mlir-aie's 1.4.3 aiecc
documentation page; CommandLineOptions.h) and refuses the rest as LLVM's option parser does
("Unknown command line argument"): the 2025 flags --aie-generate-xclbin, --aie-generate-npu-insts,
--no-xchesscc, --no-xbridge and --no-compile-host are gone since PR #3364. It needs one input MLIR
file; every kernel object the MLIR links (link_with, or the IRON stand-in's kernel lines) must be in
its directory; it refuses to link a kernel object that xchesscc built into cores it compiles with
Peano (the default without --xchesscc/--xbridge; in the real tool that is a link failure; the fake
kernel compilers of test_build.py mark their objects). It writes the outputs it is asked for with
--get-xclbin / --get-npu-insts under the names given. Its "instruction stream" is not TXN: it is
the runtime sequence of its input as text (fake_insts), so that each call size gets its own stream
and the pyxrt stand-in can tell which size a stream runs.

It models aiecc 1.4.3's stack check (PRs #3613, #3680; the release's core_data_memory page): each
core of a Peano link needs crt1's `_main_init` frame plus the deepest frame its kernel objects record
(`.stack_sizes NAME BYTES` lines, which the tests' stand-in clang++ writes only when given
-fstack-size-section; the core body's own frame counts 0 here). A core whose stack_size is smaller
fails with aiecc's message; an object without frames gives aiecc's lower-bound warning; a chess link
is not validated (aiecc's warning). `--get=measured_stack_sizes.mlir` writes each core's
measured_stack_size and its measured_data_size: the linked .data/.rodata/.bss (the 1.4.3 docs,
core_data_memory), here the sum of the `.data_size BYTES` lines of the kernel objects the core links (the
tests' stand-in clang++ writes one: the rendered source's static data, backends/kernel_source/static_data.py) plus
crt1's and the core body's own, CORE_BODY_DATA (unknown for the real crt1: 0 here).

Usage: python fake_aiecc.py [aiecc arguments]   (installed as `aiecc` by the tests)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

GETS = {"input-with-addresses", "scratchpad-parameters", "core-elfs", "npu-insts", "elf", "cdo", "pdi", "txn",
        "ctrlpkt", "xclbin", "full-elf", "locmap", "host", "aiesim"}
VALUED = {"--alloc-scheme", "--xclbin-name", "--npu-insts-name", "--peano", "--aietools", "--tmpdir", "--output-dir",
          "--placer", "--device-name", "--sequence-name", "--nthreads", "--xclbin-kernel-name",
          "--xclbin-instance-name", "--xclbin-kernel-id", "--full-elf-name", "--pdi-name", "--elf-name", "--get",
          "--default-stack-size"}
# --dynamic-objFifos is on by default (cl::init(true) since PR #2549): passing it changes nothing,
# =false asks for the unrolled lowering
FLAGS = {"--xchesscc", "--xbridge", "--unified", "--no-unified", "--dynamic-objFifos", "-v", "--verbose",
         "--progress", "--emit-dot", "--no-measure-stack-size"}
BOOLS = {"": True, "true": True, "TRUE": True, "True": True, "1": True,
         "false": False, "FALSE": False, "False": False, "0": False}  # llvm::cl::parser<bool>
ALLOC_SCHEMES = {"basic-sequential", "bank-aware"}
MEASURED_MODULE = "measured_stack_sizes.mlir"
# outputs whose making compiles and links the cores (and so runs the stack check)
LINKS_CORES = {"xclbin", "core-elfs", "pdi", "full-elf", "cdo", "aiesim", MEASURED_MODULE}
DEFAULT_STACK = 1024  # AIETargetModel::getDefaultCoreStackSize at 1.4.3 (its docs: "currently 1024 bytes")
# crt1's `_main_init` frame, live under every core body: 64 B on aie2p (PR #3680); 32 B on aie2, whose
# crt1.o carries no .stack_sizes (aiecc's fallback table in StackSizeAnalysis.cpp, issue #3699)
MAIN_INIT_FRAME = {"npu1": 32, "npu2": 64}


def fake_insts(mlir: str) -> bytes:
    """The stand-in instruction stream of an MLIR input: its runtime sequence lines (the IRON
    stand-in writes one `rt ...` line per transfer), whole 32-bit words."""
    text = "\n".join(line for line in mlir.splitlines() if line.startswith(("device ", "rt "))).encode()
    return text + b"\0" * (-len(text) % 4 or 4)


def fail(message: str) -> None:
    """aiecc's exit on an error (each caller cites the rule it refuses; aiecc.cpp @e76c3e12 returns 1)."""
    print(f"aiecc: {message}", file=sys.stderr)
    sys.exit(1)


CORE_BODY_DATA = 0  # crt1's and the core body's .data/.bss in the stand-in (the real figure is aiecc's to measure)


def object_data(obj: Path) -> int:
    """The static data a (stand-in) kernel object holds: its `.data_size BYTES` lines."""
    return sum(int(line.split()[1]) for line in obj.read_text(errors="replace").splitlines()
               if line.startswith(".data_size ") and len(line.split()) == 2)


def object_frames(obj: Path) -> list[int]:
    """The frames a (stand-in) kernel object records in its .stack_sizes section."""
    return [int(line.split()[2]) for line in obj.read_text(errors="replace").splitlines()
            if line.startswith(".stack_sizes ") and len(line.split()) == 3]


def stack_check(mlir: str, source: str, objects: list[str], chess: bool, default: int) -> dict[tuple[int, int], int]:
    """aiecc 1.4.3's check of each core's stack_size against its linked frames: the measured
    requirement per core (col, row), exiting like aiecc when a core's stack is too small."""
    device = next((line.split()[1] for line in mlir.splitlines() if line.startswith("device ")), "npu2")
    base = MAIN_INIT_FRAME["npu1" if device.startswith("npu1") else "npu2"]
    frames = {obj: object_frames(Path(obj)) for obj in objects}
    unmeasured = [obj for obj, f in frames.items() if not f]
    need = base + max((max(f) for f in frames.values() if f), default=0)
    measured: dict[tuple[int, int], int] = {}
    # the check and its messages: tools/aiecc/StackSizeAnalysis.cpp (stored version @7e04ed3d, the nearest to
    # 1.4.3; PRs #3613, #3680), as the release's core_data_memory page describes it
    for lineno, line in enumerate(mlir.splitlines(), 1):
        m = re.match(r"worker Tile\((\d+), (\d+)\) stack=(\w+)", line)
        if not m:
            continue
        where = f"{source}:{lineno}:1"
        if chess:  # the BCF link keeps no relocations: aiecc warns and checks nothing
            print(f"{where}: warning: cannot determine this core's stack requirement: the linked core "
                  f"'core_{m[1]}_{m[2]}.elf' retains no relocations, so its call graph is unavailable; "
                  "stack_size is not being validated for this core", file=sys.stderr)
            continue
        if unmeasured:
            print(f"{where}: warning: no stack size information for {len(unmeasured)} function(s) this core "
                  f"reaches, so its requirement is at least {need} bytes and may be higher", file=sys.stderr)
        else:
            measured[(int(m[1]), int(m[2]))] = need
        declared = None if m[3] == "None" else int(m[3])
        if (declared if declared is not None else default) < need:
            print(f"{where}: error: " + (f"stack_size = {declared} is insufficient: this core needs {need} bytes"
                                         if declared is not None else
                                         f"stack_size is absent, so this core uses the device default of "
                                         f"{default} bytes, but it needs {need} bytes"), file=sys.stderr)
            sys.exit(1)  # StackSizeAnalysis.cpp @7e04ed3d: an insufficient stack_size is an error
    return measured


def measured_module(mlir: str, measured: dict[tuple[int, int], int], data: int) -> str:
    """--get=measured_stack_sizes.mlir: the cores with their measured attributes (the form aiecc
    1.4.3's docs show: `{stack_size = ..., measured_stack_size = ... : i32}` after the core's region);
    `data`: each core's linked static data (every core links the same objects)."""
    device = next((line.split()[1] for line in mlir.splitlines() if line.startswith("device ")), "npu2")
    lines = ["module {", f"  aie.device({device}) {{"]
    for m in re.finditer(r"^worker Tile\((\d+), (\d+)\) stack=(\w+)", mlir, re.MULTILINE):
        col, row = int(m[1]), int(m[2])
        attrs = [f"measured_data_size = {data} : i32"]
        if (col, row) in measured:
            attrs.append(f"measured_stack_size = {measured[(col, row)]} : i32")
        if m[3] != "None":
            attrs.append(f"stack_size = {m[3]} : i32")
        lines += [f"    %tile_{col}_{row} = aie.tile({col}, {row})",
                  f"    %core_{col}_{row} = aie.core(%tile_{col}_{row}) {{", "      aie.end",
                  f"    }} {{{', '.join(attrs)}}}"]
    return "\n".join([*lines, "  }", "}"]) + "\n"


def main(argv: list[str]) -> None:
    values: dict[str, str] = {}
    flags: set[str] = set()
    gets: set[str] = set()
    inputs: list[str] = []
    it = iter(argv)
    # the options: tools/aiecc/CommandLineOptions.h (stored version @df2f4416; 1.4.3's is its docs page,
    # gh-pages 1.4.3/aiecc/index.html @5100e2d6); the refusals' words are LLVM's cl parser's
    # (llvm/lib/Support/CommandLine.cpp: "Unknown command line argument", "requires a value!", "invalid value
    # for boolean argument!")
    for arg in it:
        if not arg.startswith("-"):
            inputs.append(arg)
            continue
        name, eq, value = arg.partition("=")
        if name.startswith("--get-") and not eq:
            if name[6:] not in GETS:
                fail(f"Unknown command line argument '{arg}'.  Try: 'aiecc --help'")  # CommandLine.cpp
            gets.add(name[6:])
        elif name in VALUED:
            values[name] = value if eq else next(it, "")
            if not values[name]:
                fail(f"for the {name} option: requires a value!")  # llvm/lib/Support/CommandLine.cpp
        elif name in FLAGS:  # LLVM's cl::opt<bool>: bare, or =true/=false and their spellings
            if eq and value not in BOOLS:
                # llvm/lib/Support/CommandLine.cpp, parser<bool>::parse
                fail(f"for the {name} option: '{value}' is invalid value for boolean argument! Try 0 or 1")
            if BOOLS.get(value, True):
                flags.add(name)
        else:  # llvm/lib/Support/CommandLine.cpp: an option CommandLineOptions.h does not declare
            fail(f"Unknown command line argument '{arg}'.  Try: 'aiecc --help'")
    if "--get" in values:
        gets.add(values["--get"])
    # one positional input (CommandLineOptions.h @df2f4416: cl::Positional, cl::Required); the three messages
    # below are the stand-in's own wording of what aiecc refuses
    if len(inputs) != 1:
        fail(f"expects one input MLIR file, got {inputs}")
    if not Path(inputs[0]).exists():
        fail(f"could not open input file '{inputs[0]}'")
    scheme = values.get("--alloc-scheme")
    if scheme is not None and scheme not in ALLOC_SCHEMES:  # a string option, refused when buffers are assigned
        fail(f"error: unknown buffer allocation scheme '{scheme}'")  # the schemes: AIEAssignBuffers.cpp
    mlir = Path(inputs[0]).read_text()
    objects = sorted(set(re.findall(r'link_with\s*=\s*"([^"]+)"', mlir) + re.findall(r"^kernel \S+ (\S+\.o) ", mlir,
                                                                                     re.MULTILINE)))
    for obj in objects:  # the link of each core (aiecc.cpp @e76c3e12 runs ld.lld with the objects link_with names)
        if not Path(obj).exists():  # the core's link step needs every object its functions name
            fail(f"ld.lld: error: cannot open {obj}: No such file or directory")
    chess = bool(flags & {"--xchesscc", "--xbridge"})
    # a chess object in a Peano link: ld.lld cannot read it (the stand-in's own wording of that link failure; the
    # fake kernel compilers of test_build.py mark their objects)
    if not chess:
        for obj in sorted(Path(".").glob("*.o")):
            if obj.read_text(errors="replace").startswith("chess"):
                fail(f"ld.lld: error: {obj}: unknown file type (an xchesscc object in a Peano link; "
                     f"pass --xchesscc --xbridge)")
    measured: dict[tuple[int, int], int] = {}
    if "--no-measure-stack-size" not in flags and gets & LINKS_CORES:  # an instructions-only run links no core
        default = int(values.get("--default-stack-size", "0")) or DEFAULT_STACK  # 0: the target's default
        measured = stack_check(mlir, inputs[0], objects, chess, default)
    if MEASURED_MODULE in gets:
        data = CORE_BODY_DATA + sum(object_data(Path(obj)) for obj in objects)
        Path(MEASURED_MODULE).write_text(measured_module(mlir, measured, data))
    if "xclbin" in gets:
        Path(values.get("--xclbin-name", "aie.xclbin")).write_text("xclbin")
    if "npu-insts" in gets:
        Path(values.get("--npu-insts-name", "insts_main_sequence.bin")).write_bytes(fake_insts(mlir))


if __name__ == "__main__":
    main(sys.argv[1:])
