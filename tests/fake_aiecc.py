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
          "--xclbin-instance-name", "--xclbin-kernel-id", "--full-elf-name", "--pdi-name", "--elf-name", "--get"}
# --dynamic-objFifos is on by default (cl::init(true) since PR #2549): passing it changes nothing,
# =false asks for the unrolled lowering
FLAGS = {"--xchesscc", "--xbridge", "--unified", "--no-unified", "--dynamic-objFifos", "-v", "--verbose",
         "--progress", "--emit-dot"}
BOOLS = {"": True, "true": True, "TRUE": True, "True": True, "1": True,
         "false": False, "FALSE": False, "False": False, "0": False}  # llvm::cl::parser<bool>
ALLOC_SCHEMES = {"basic-sequential", "bank-aware"}


def fake_insts(mlir: str) -> bytes:
    """The stand-in instruction stream of an MLIR input: its runtime sequence lines (the IRON
    stand-in writes one `rt ...` line per transfer), whole 32-bit words."""
    text = "\n".join(line for line in mlir.splitlines() if line.startswith(("device ", "rt "))).encode()
    return text + b"\0" * (-len(text) % 4 or 4)


def fail(message: str) -> None:
    print(f"aiecc: {message}", file=sys.stderr)
    sys.exit(1)


def main(argv: list[str]) -> None:
    values: dict[str, str] = {}
    flags: set[str] = set()
    gets: set[str] = set()
    inputs: list[str] = []
    it = iter(argv)
    for arg in it:
        if not arg.startswith("-"):
            inputs.append(arg)
            continue
        name, eq, value = arg.partition("=")
        if name.startswith("--get-") and not eq:
            if name[6:] not in GETS:
                fail(f"Unknown command line argument '{arg}'.  Try: 'aiecc --help'")
            gets.add(name[6:])
        elif name in VALUED:
            values[name] = value if eq else next(it, "")
            if not values[name]:
                fail(f"for the {name} option: requires a value!")
        elif name in FLAGS:  # LLVM's cl::opt<bool>: bare, or =true/=false and their spellings
            if eq and value not in BOOLS:
                fail(f"for the {name} option: '{value}' is invalid value for boolean argument! Try 0 or 1")
            if BOOLS.get(value, True):
                flags.add(name)
        else:
            fail(f"Unknown command line argument '{arg}'.  Try: 'aiecc --help'")
    if "--get" in values:
        gets.add(values["--get"])
    if len(inputs) != 1:
        fail(f"expects one input MLIR file, got {inputs}")
    if not Path(inputs[0]).exists():
        fail(f"could not open input file '{inputs[0]}'")
    scheme = values.get("--alloc-scheme")
    if scheme is not None and scheme not in ALLOC_SCHEMES:  # a string option, refused when buffers are assigned
        fail(f"error: unknown buffer allocation scheme '{scheme}'")
    mlir = Path(inputs[0]).read_text()
    for obj in sorted(set(re.findall(r'link_with\s*=\s*"([^"]+)"', mlir) + re.findall(r"^kernel \S+ (\S+\.o) ", mlir,
                                                                                      re.MULTILINE))):
        if not Path(obj).exists():  # the core's link step needs every object its functions name
            fail(f"ld.lld: error: cannot open {obj}: No such file or directory")
    chess = bool(flags & {"--xchesscc", "--xbridge"})
    if not chess:
        for obj in sorted(Path(".").glob("*.o")):
            if obj.read_text(errors="replace").startswith("chess"):
                fail(f"ld.lld: error: {obj}: unknown file type (an xchesscc object in a Peano link; "
                     f"pass --xchesscc --xbridge)")
    if "xclbin" in gets:
        Path(values.get("--xclbin-name", "aie.xclbin")).write_text("xclbin")
    if "npu-insts" in gets:
        Path(values.get("--npu-insts-name", "insts_main_sequence.bin")).write_bytes(fake_insts(mlir))


if __name__ == "__main__":
    main(sys.argv[1:])
