"""The paper's balanced designs at full size (slow: `make test-slow`)."""

from __future__ import annotations

import pytest

from gemm_gen.app.cli import main

# the issue's acceptance commands, plus large K and row-major B. The papers' pinned tiles keep C in its
# output type between calls (--acc out, their numerics): with the wide accumulator (the default) most of
# them do not fit L1, which `gemm-gen plan` says in one line. The two largest i8 tiles also take a 1 KiB
# stack: with our default (mlir-aie's 0xD00) they are a few hundred bytes over L1.
FULL = [
    "--dev npu2 -M 4032 -K 4320 -N 4608 -m 144 -k 72 -n 144 --k-mt 432 --dtype_in i8 --dtype_out i8 --b-col-maj "
    "--acc out --stack 1024",
    "--dev npu2 -M 4032 -K 4224 -N 4608 -m 112 -k 48 -n 96 --k-mt 384 --dtype_in bf16 --dtype_out bf16 --b-col-maj "
    "--acc out",
    "--dev npu1 -M 4224 -K 4032 -N 4224 -m 96 -k 56 -n 96 --k-mt 224 --dtype_in bf16 --dtype_out bf16 --b-col-maj "
    "--acc out",
    "--dev npu1 -M 4160 -K 4224 -N 4224 -m 80 -k 88 -n 96 --k-mt 352 --dtype_in i8 --dtype_out i32",
    "--dev npu2 -M 256 -K 65536 -N 512",
    "--dev npu2 -M 256 -K 65536 -N 512 --dtype_in i8 --dtype_out i8 --b-col-maj",
    "--dev npu2 -M 4096 -K 4320 -N 4480 -m 128 -k 72 -n 112 --k-mt 432 --dtype_in i8 --dtype_out i16 --acc out "
    "--stack 1024",
    "--dev npu1 -M 4224 -K 4032 -N 4032 -m 96 -k 48 -n 112 --k-mt 192 --dtype_in bf16 --dtype_out bf16 --acc out",
    # issue 5: the ATB paper's precision configs 1-3 at its shapes
    "--dev npu2 -M 4096 -K 4096 -N 2048 -m 128 -k 64 -n 128 --rho 4 --preset config1",
    "--dev npu2 -M 3072 -K 4096 -N 1536 -m 192 -k 128 -n 96 --rho 6 --preset config2",
    "--dev npu2 -M 4096 -K 4096 -N 2048 -m 128 -k 64 -n 128 --rho 4 --preset config3",
]


@pytest.mark.slow
@pytest.mark.parametrize("args", FULL)
def test_full_size_design_passes(args, capsys):
    code = main(["simulate", *args.split()])
    out = capsys.readouterr().out
    assert code == 0 and out.rstrip().endswith("PASS"), out[-2000:]
