"""gemm-gen build: the command lines, the missing-toolchain stop, and a build with stand-in tools."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gemm_gen.backends import iron, toolchain
from gemm_gen.backends.build import run_build
from gemm_gen.cli import main
from gemm_gen.design import build_design
from gemm_gen.errors import BuildError, ToolchainMissing
from gemm_gen.kernels import render_kernel

from . import iron_recorder
from .conftest import small

ARGS = ["--dev", "npu2", "-M", "512", "-K", "512", "-N", "512", "-m", "32", "-k", "32", "-n", "32", "--k-mt", "64"]


@pytest.fixture
def no_tools(monkeypatch):
    """A machine without the toolchain, whatever this one has."""
    for var in ("PEANO_INSTALL_DIR", "MLIR_AIE_DIR", "AIETOOLS_DIR"):
        monkeypatch.delenv(var, raising=False)

    def missing(*_a, **_k):
        raise ToolchainMissing("tool is not installed", "install it")

    for name in ("peano_dir", "mlir_aie_dir", "aiecc", "xclbinutil", "xchesscc", "aietools_dir", "pyxrt"):
        monkeypatch.setattr(toolchain, name, missing)


def dry_run(capsys, *extra):
    assert main(["build", "--dry-run", *ARGS, *extra]) == 0
    out = capsys.readouterr().out
    return {line.split("# ", 1)[1]: nxt for line, nxt in zip(out.splitlines(), out.splitlines()[1:])
            if line.startswith("# ")}


@pytest.mark.parametrize("dev,target", [("npu1", "aie2"), ("npu2", "aie2p")])
def test_dry_run_peano(capsys, no_tools, dev, target):
    steps = dry_run(capsys, "--dev", dev)
    cc = steps["compile the kernel"]
    clang = "cd build && $PEANO_INSTALL_DIR/bin/clang++ -O2 -std=c++20"
    assert cc.startswith(f"{clang} --target={target}-none-unknown-elf")
    for flag in ("-Wno-parentheses", "-Wno-attributes", "-Wno-macro-redefined", "-Wno-empty-body",
                 "-Wno-missing-template-arg-list-after-template-kw", "-DNDEBUG", "-I$MLIR_AIE_DIR/include"):
        assert f" {flag} " in cc
    assert cc.endswith(".cc -o " + cc.split(" -o ")[-1]) and cc.split(" -o ")[-1].endswith(".o")
    aiecc = steps["aiecc: xclbin and NPU instructions"].split()
    assert aiecc[3:] == ["aiecc.py", "--alloc-scheme=basic-sequential", "--aie-generate-xclbin", "--no-compile-host",
                         f"--xclbin-name=final_{_suffix(dev)}.xclbin", "--no-xchesscc", "--no-xbridge", "--peano",
                         "$PEANO_INSTALL_DIR", "--aie-generate-npu-insts", f"--npu-insts-name=insts_{_suffix(dev)}.bin",
                         f"aie_{_suffix(dev)}.mlir"]
    assert steps["lower the design to MLIR (IRON)"].startswith("cd build && gemm-gen mlir --dev " + dev)


def _suffix(dev):
    cols = 4 if dev == "npu1" else 8
    return f"512x512x512_32x32x32_{cols}c_bf16_bf16_kmt64"


def test_dry_run_chess(capsys, no_tools):
    steps = dry_run(capsys, "--chess")
    assert steps["compile the kernel"].startswith("cd build && xchesscc_wrapper aie2p -I$AIETOOLS_DIR/include ")
    aiecc = steps["aiecc: xclbin and NPU instructions"]
    assert "--no-xchesscc" not in aiecc and "--peano" not in aiecc and "--aie-generate-npu-insts" in aiecc
    assert " --unified " in aiecc  # one xchesscc run for every core, as mlir-aie's makefile-common


def test_missing_toolchain_stops_before_writing(tmp_path, capsys, monkeypatch, no_tools):
    monkeypatch.chdir(tmp_path)
    assert main(["build", *ARGS]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not installed" in err
    assert not (tmp_path / "build").exists()


def _fake_tools(tmp_path: Path, monkeypatch, aiecc_exit: int = 0) -> None:
    """Stand-in clang++ and aiecc.py that write the files they are asked for; IRON's recorder."""
    peano = tmp_path / "peano"
    (peano / "bin").mkdir(parents=True)
    clang = peano / "bin" / "clang++"
    clang.write_text(f"#!{sys.executable}\nimport sys\nopen(sys.argv[sys.argv.index('-o') + 1], 'w').write('obj')\n")
    aiecc = tmp_path / "bin" / "aiecc"
    aiecc.parent.mkdir()
    aiecc.write_text(
        f"#!{sys.executable}\nimport sys\n"
        "args = dict(a.split('=', 1) for a in sys.argv[1:] if '=' in a)\n"
        f"if {aiecc_exit}: print('error: lowering failed', file=sys.stderr); sys.exit({aiecc_exit})\n"
        "open(args['--xclbin-name'], 'w').write('xclbin'); open(args['--npu-insts-name'], 'wb').write(b'\\0' * 8)\n")
    xclbinutil = tmp_path / "bin" / "xclbinutil"
    xclbinutil.write_text("#!/bin/sh\n")
    for f in (clang, aiecc, xclbinutil):
        f.chmod(0o755)
    monkeypatch.setenv("PEANO_INSTALL_DIR", str(peano))
    monkeypatch.setenv("MLIR_AIE_DIR", str(tmp_path / "mlir_aie"))
    monkeypatch.setenv("PATH", f"{aiecc.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(iron, "iron_api", lambda: iron_recorder.api()[0])


def test_build_with_stand_in_tools(tmp_path, monkeypatch):
    _fake_tools(tmp_path, monkeypatch)
    design = build_design(small("npu2", "i8", "i16"))
    out = tmp_path / "build"
    art = run_build(design, out, gen_args=[])
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [art.kernel_source, art.kernel_object, art.mlir.name, art.xclbin.name, art.insts.name])
    assert art.complete() and art.xclbin.read_text() == "xclbin"
    assert (out / art.kernel_source).read_text() == render_kernel(design.kernels[0].build)
    assert art.mlir.read_text().startswith("device npu2\nfifo A_L2L1_0")
    first = art.mlir.read_bytes()
    run_build(design, out, gen_args=[])
    assert art.mlir.read_bytes() == first  # the same design lowers to the same bytes


def test_failed_step_leaves_nothing(tmp_path, monkeypatch):
    _fake_tools(tmp_path, monkeypatch, aiecc_exit=1)
    out = tmp_path / "build"
    with pytest.raises(BuildError, match=r"aiecc: xclbin and NPU instructions failed \(exit 1\): error: lowering"):
        run_build(build_design(small("npu1")), out, gen_args=[])
    assert list(out.iterdir()) == []  # no artifacts, no scratch directory
