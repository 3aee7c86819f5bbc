"""gemm-gen build: the command lines, the missing-toolchain stop, and a build with stand-in tools."""

from __future__ import annotations

import json
import os
import subprocess
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
    # mlir-aie 1.4.3's aiecc: outputs by --get-*, the core compiler named
    assert aiecc[3:] == ["aiecc", "--alloc-scheme=basic-sequential", "--peano=$PEANO_INSTALL_DIR", "--get-xclbin",
                         f"--xclbin-name=final_{_suffix(dev)}.xclbin", "--get-npu-insts",
                         f"--npu-insts-name=insts_{_suffix(dev)}.bin", f"aie_{_suffix(dev)}.mlir"]
    assert steps["lower the design to MLIR (IRON)"].startswith("cd build && gemm-gen mlir --dev " + dev)


def _suffix(dev):
    cols = 4 if dev == "npu1" else 8
    return f"512x512x512_32x32x32_{cols}c_bf16_bf16_kmt64"


@pytest.mark.parametrize("dev,target", [("npu1", "aie2"), ("npu2", "aie2p")])
def test_dry_run_chess(capsys, no_tools, dev, target):
    """Defect 4: since mlir-aie made Peano the default core compiler (PR #3501), chess must be named."""
    steps = dry_run(capsys, "--chess", "--dev", dev)
    assert steps["compile the kernel"].startswith(f"cd build && xchesscc_wrapper {target} -I$AIETOOLS_DIR/include ")
    aiecc = steps["aiecc: xclbin and NPU instructions"].split()
    assert "--xchesscc" in aiecc and "--xbridge" in aiecc and not any(a.startswith("--peano") for a in aiecc)
    assert "--dynamic-objFifos" not in aiecc


def test_dry_run_of_a_bfp16_design_leaves_dynamic_objfifos_to_aiecc(capsys, no_tools):
    """aiecc lowers every fifo dynamically by default since mlir-aie PR #2549 (the stateful transform
    only so since PR #3298): a bfp16 design's aiecc line, like any other's, has no --dynamic-objFifos."""
    assert main(["build", "--dry-run", "--dev", "npu2", "-M", "512", "-K", "512", "-N", "1024",
                 "--preset", "config1", "-m", "64", "-k", "64", "-n", "64", "--k-mt", "128"]) == 0
    out = capsys.readouterr().out
    aiecc = next(line for line in out.splitlines() if " aiecc " in line).split()
    assert "--xchesscc" in aiecc and not any(a.startswith("--dynamic-objFifos") for a in aiecc)


def test_missing_toolchain_stops_before_writing(tmp_path, capsys, monkeypatch, no_tools):
    monkeypatch.chdir(tmp_path)
    assert main(["build", *ARGS]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not installed" in err
    assert not (tmp_path / "build").exists()


def _fake_tools(tmp_path: Path, monkeypatch, aiecc_exit: int = 0) -> None:
    """Stand-in Peano clang++, xchesscc and mlir-aie 1.4.3's aiecc (tests/fake_aiecc.py) that write
    the files they are asked for; IRON's stand-in. Kernel objects say which compiler made them."""
    peano = tmp_path / "peano"
    (peano / "bin").mkdir(parents=True)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    writer = f"#!{sys.executable}\nimport sys\nopen(sys.argv[sys.argv.index('-o') + 1], 'w').write('{{}}')\n"
    (peano / "bin" / "clang++").write_text(writer.format("peano object"))
    (bindir / "xchesscc_wrapper").write_text(writer.format("chess object"))
    (bindir / "xchesscc").write_text("#!/bin/sh\n")
    fake = Path(__file__).with_name("fake_aiecc.py")
    (bindir / "aiecc").write_text(
        f"#!{sys.executable}\nimport runpy, sys\n"
        f"if {aiecc_exit}: print('error: lowering failed', file=sys.stderr); sys.exit({aiecc_exit})\n"
        f"sys.argv[0] = 'aiecc'; runpy.run_path({str(fake)!r}, run_name='__main__')\n")
    (bindir / "xclbinutil").write_text("#!/bin/sh\n")
    for f in [peano / "bin" / "clang++", *bindir.iterdir()]:
        f.chmod(0o755)
    monkeypatch.setenv("PEANO_INSTALL_DIR", str(peano))
    monkeypatch.setenv("MLIR_AIE_DIR", str(tmp_path / "mlir_aie"))
    monkeypatch.setenv("AIETOOLS_DIR", str(tmp_path / "aietools"))
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(iron, "iron_api", lambda: iron_recorder.api()[0])


def test_build_with_stand_in_tools(tmp_path, monkeypatch):
    _fake_tools(tmp_path, monkeypatch)
    design = build_design(small("npu2", "i8", "i16"))
    out = tmp_path / "build"
    art = run_build(design, out, gen_args=[])
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [art.kernel_source, art.kernel_object, art.mlir.name, art.xclbin.name, art.insts.name, art.stamp.name])
    assert art.complete() and art.xclbin.read_text() == "xclbin"
    assert (out / art.kernel_source).read_text() == render_kernel(design.kernels[0].build)
    assert art.mlir.read_text().startswith("device npu2\nfifo A_L2L1_0")
    assert (out / art.kernel_object).read_text() == "peano object"
    first = art.mlir.read_bytes()
    run_build(design, out, gen_args=[])
    assert art.mlir.read_bytes() == first  # the same design lowers to the same bytes


def test_a_failed_step_leaves_no_artifact_but_its_diagnosis(tmp_path, monkeypatch):
    _fake_tools(tmp_path, monkeypatch, aiecc_exit=1)
    out = tmp_path / "build"
    design = build_design(small("npu1"))
    with pytest.raises(BuildError, match=r"aiecc: xclbin and NPU instructions failed \(exit 1\): error: lowering.*"
                                         r"whole output and the build's files are in .*failed_"):
        run_build(design, out, gen_args=[])
    kept = out / f"failed_{design.config.suffix}"
    assert [p.name for p in out.iterdir()] == [kept.name]  # no artifact under its final name, no scratch
    log = (kept / "build.log").read_text()
    assert "# compile the kernel" in log and "error: lowering failed" in log and "# exit 1" in log
    assert (kept / f"aie_{design.config.suffix}.mlir").exists()  # what aiecc was given, to look at


def test_builds_are_stamped_and_a_stale_one_is_not_current(tmp_path, monkeypatch):
    """An xclbin is reused only if it was built from the same design, kernel, gemm_gen and toolchain."""
    from gemm_gen.backends.build import build_stamp, is_current

    _fake_tools(tmp_path, monkeypatch)
    design = build_design(small("npu2", "i8", "i16"))
    art = run_build(design, tmp_path / "build", gen_args=[])
    assert is_current(art, design)
    assert not is_current(art, build_design(small("npu2", "i8", "i16", shift=2)))  # another kernel
    stamp = build_stamp(design)
    art.stamp.write_text(json.dumps({**stamp, "mlir_aie": "1.4.2"}))  # built by another mlir-aie
    assert not is_current(art, design)
    art.stamp.unlink()
    assert not is_current(art, design)


def test_chess_build_with_stand_in_tools(tmp_path, monkeypatch):
    _fake_tools(tmp_path, monkeypatch)
    design = build_design(small("npu2", "i8", "i16", compiler="chess"))
    art = run_build(design, tmp_path / "build", gen_args=[])
    assert art.complete() and (art.build_dir / art.kernel_object).read_text() == "chess object"


def test_defect_4_chess_without_xchesscc_fails_to_link(tmp_path, monkeypatch):
    """Reintroduce the old chess flags (--unified only): aiecc compiles the cores with Peano, which
    cannot link the xchesscc-built kernel."""
    from gemm_gen.backends import build

    _fake_tools(tmp_path, monkeypatch)
    real = build.aiecc_flags
    monkeypatch.setattr(build, "aiecc_flags", lambda d, tc, art: [
        a for a in real(d, tc, art) if a not in ("--xchesscc", "--xbridge")] + ["--unified", f"--peano={tmp_path}"])
    with pytest.raises(BuildError, match=r"an xchesscc object in a Peano link"):
        run_build(build_design(small("npu2", "i8", "i16", compiler="chess")), tmp_path / "build", gen_args=[])


@pytest.mark.parametrize("old_flag", ["--aie-generate-xclbin", "--no-xchesscc", "--no-compile-host"])
def test_flags_of_older_aiecc_are_refused(tmp_path, monkeypatch, old_flag):
    from gemm_gen.backends import build

    _fake_tools(tmp_path, monkeypatch)
    real = build.aiecc_flags
    monkeypatch.setattr(build, "aiecc_flags", lambda d, tc, art: [*real(d, tc, art), old_flag])
    with pytest.raises(BuildError, match=rf"Unknown command line argument '{old_flag}'"):
        run_build(build_design(small("npu1")), tmp_path / "build", gen_args=[])


# ---- the aiecc stand-in refuses what aiecc 1.4.3 refuses ------------------------------------------
def _aiecc(tmp_path, *args, mlir='func.func private @k() attributes {link_with = "k.o"}\n', objects=("k.o",)):
    (tmp_path / "design.mlir").write_text(mlir)
    for obj in objects:
        (tmp_path / obj).write_text("peano object")
    fake = Path(__file__).with_name("fake_aiecc.py")
    return subprocess.run([sys.executable, str(fake), *args], cwd=tmp_path, capture_output=True, text=True)


@pytest.mark.parametrize("args,objects,message", [
    (["--get-xclbin", "--aie-generate-npu-insts", "design.mlir"], ("k.o",), "Unknown command line argument"),
    (["--get-xclbin", "--get-bitstream", "design.mlir"], ("k.o",), "Unknown command line argument '--get-bitstream'"),
    (["--get-xclbin"], ("k.o",), "expects one input MLIR file"),
    (["--get-xclbin", "--xclbin-name", "design.mlir"], ("k.o",), "expects one input MLIR file"),
    (["--get-xclbin", "design.mlir"], (), "cannot open k.o"),
    (["--alloc-scheme=fastest", "design.mlir"], ("k.o",), "unknown buffer allocation scheme"),
    (["--dynamic-objfifos", "design.mlir"], ("k.o",), "Unknown command line argument '--dynamic-objfifos'"),
    (["--dynamic-objFifos=yes", "design.mlir"], ("k.o",),
     "for the --dynamic-objFifos option: 'yes' is invalid value for boolean argument! Try 0 or 1"),
], ids=["removed-flag", "unknown-output", "no-input", "value-eats-input", "missing-object", "alloc-scheme",
        "option-names-are-case-sensitive", "not-a-boolean"])
def test_the_aiecc_standin_refuses(tmp_path, args, objects, message):
    done = _aiecc(tmp_path, *args, objects=objects)
    assert done.returncode == 1 and message in done.stderr


@pytest.mark.parametrize("flag", ["--dynamic-objFifos", "--dynamic-objFifos=false", "--dynamic-objFifos=0",
                                  "--dynamic-objFifos=True", "--xchesscc=FALSE"])
def test_the_aiecc_standin_takes_booleans_as_llvm_does(tmp_path, flag):
    done = _aiecc(tmp_path, flag, "--get-xclbin", "design.mlir")
    assert done.returncode == 0, done.stderr


def test_the_aiecc_standin_takes_what_aiecc_takes(tmp_path):
    done = _aiecc(tmp_path, "--alloc-scheme=basic-sequential", "--dynamic-objFifos=true", "--peano", "/opt/peano",
                  "--get-xclbin", "--xclbin-name=f.xclbin", "--get-npu-insts", "--npu-insts-name=i.bin", "design.mlir")
    assert done.returncode == 0, done.stderr
    insts = (tmp_path / "i.bin").read_bytes()
    assert (tmp_path / "f.xclbin").exists() and insts and len(insts) % 4 == 0  # whole instruction words
