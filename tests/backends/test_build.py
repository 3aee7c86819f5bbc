"""gemm-gen build: the command lines, the missing-toolchain stop, and a build with stand-in tools."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gemm_gen.app.cli import main
from gemm_gen.backends import iron, toolchain
from gemm_gen.backends.compile import run_build
from gemm_gen.backends.kernel_source import render_kernel
from gemm_gen.backends.kernel_source import static_data as static_data_module
from gemm_gen.design import build_design
from gemm_gen.facts.errors import BuildError, ConfigError, ToolchainMissing

from .. import iron_recorder
from ..conftest import small

ARGS = ["--dev", "npu2", "-M", "512", "-K", "512", "-N", "512", "-m", "32", "-k", "32", "-n", "32", "--k-mt", "64"]


@pytest.fixture
def no_tools(monkeypatch, tmp_path):
    """A machine without the toolchain, whatever this one has; run from an empty folder (the commands' default
    build/ is then not the checkout's, which the suite never touches)."""
    monkeypatch.chdir(tmp_path)
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
                 "-Wno-missing-template-arg-list-after-template-kw", "-DNDEBUG", "-I$MLIR_AIE_DIR/include",
                 "-fstack-size-section"):  # the frames aiecc 1.4.3 checks stack_size against
        assert f" {flag} " in cc
    assert cc.endswith(".cc -o " + cc.split(" -o ")[-1]) and cc.split(" -o ")[-1].endswith(".o")
    aiecc = steps["aiecc: xclbin and NPU instructions"].split()
    # mlir-aie 1.4.3's aiecc: outputs by --get-*, the core compiler named, the measured stacks asked for
    assert aiecc[3:] == ["aiecc", "--alloc-scheme=basic-sequential", "--peano=$PEANO_INSTALL_DIR", "--get-xclbin",
                         f"--xclbin-name=final_{_suffix(dev)}.xclbin", "--get-npu-insts",
                         f"--npu-insts-name=insts_{_suffix(dev)}.bin", "--get=measured_stack_sizes.mlir",
                         f"aie_{_suffix(dev)}.mlir"]
    assert steps["lower the design to MLIR (IRON)"].startswith("cd build && gemm-gen mlir --dev " + dev)


def _suffix(dev):
    cols = 4 if dev == "npu1" else 8
    return f"512x512x512_32x32x32_{cols}c_bf16_bf16_kmt64"


@pytest.mark.parametrize("dev,target", [("npu1", "aie2"), ("npu2", "aie2p")])
def test_dry_run_chess(capsys, no_tools, dev, target):
    """Defect 4: since mlir-aie made Peano the default core compiler (PR #3501), chess must be named."""
    steps = dry_run(capsys, "--chess", "--dev", dev)
    assert steps["compile the kernel"].startswith(f"cd build && xchesscc_wrapper {target} -I$AIETOOLS_DIR/include ")
    assert "-fstack-size-section" not in steps["compile the kernel"]  # a clang flag; aiecc does not check chess
    aiecc = steps["aiecc: xclbin and NPU instructions"].split()
    assert "--xchesscc" in aiecc and "--xbridge" in aiecc and not any(a.startswith("--peano") for a in aiecc)
    assert "--dynamic-objFifos" not in aiecc and "--get=measured_stack_sizes.mlir" not in aiecc


def test_dry_run_of_a_bfp16_design_leaves_dynamic_objfifos_to_aiecc(capsys, no_tools):
    """aiecc lowers every fifo dynamically by default since mlir-aie PR #2549 (the stateful transform
    only so since PR #3298): a bfp16 design's aiecc line, like any other's, has no --dynamic-objFifos.
    bfp16 designs build with Peano by default (its target and stack flag, aiecc --peano), with
    xchesscc under --chess."""
    args = ["build", "--dry-run", "--dev", "npu2", "-M", "512", "-K", "512", "-N", "1024",
            "--preset", "config1", "-m", "64", "-k", "64", "-n", "64", "--k-mt", "128"]
    assert main(args) == 0
    out = capsys.readouterr().out
    aiecc = next(line for line in out.splitlines() if " aiecc " in line).split()
    assert "--xchesscc" not in aiecc and any(a.startswith("--peano=") for a in aiecc)
    assert not any(a.startswith("--dynamic-objFifos") for a in aiecc)
    compile_ = next(line for line in out.splitlines() if "--target=aie2p-none-unknown-elf" in line).split()
    assert "-fstack-size-section" in compile_
    assert main([*args, "--chess"]) == 0
    aiecc = next(line for line in capsys.readouterr().out.splitlines() if " aiecc " in line).split()
    assert "--xchesscc" in aiecc and not any(a.startswith("--dynamic-objFifos") for a in aiecc)


def test_missing_toolchain_stops_before_writing(tmp_path, capsys, monkeypatch, no_tools):
    monkeypatch.chdir(tmp_path)
    assert main(["build", *ARGS]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not installed" in err
    assert not (tmp_path / "build").exists()


STATIC_DATA = Path(static_data_module.__file__)  # what the stand-in compilers load to read a source's static data
KERNEL_FRAME = 512  # the stack frame the stand-in Peano records for a kernel (FAKE_KERNEL_FRAME overrides it)


def _fake_tools(tmp_path: Path, monkeypatch, aiecc_exit: int = 0) -> None:
    """Stand-in Peano clang++, xchesscc and mlir-aie 1.4.3's aiecc (tests/fake_aiecc.py) that write
    the files they are asked for; IRON's stand-in. Kernel objects say which compiler made them; the
    Peano stand-in records the kernel's frame (`.stack_sizes`) when given -fstack-size-section, as
    clang does, for the aiecc stand-in's stack check. The test runs from tmp_path (a command's default build/ is
    then not the checkout's)."""
    monkeypatch.chdir(tmp_path)
    peano = tmp_path / "peano"
    (peano / "bin").mkdir(parents=True)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    writer = (f"#!{sys.executable}\nimport os, sys\ntext = '{{}}'\n"
              "if '-fstack-size-section' in sys.argv:\n"
              f"    text += '\\n.stack_sizes matmul ' + os.environ.get('FAKE_KERNEL_FRAME', '{KERNEL_FRAME}')\n"
              # the object's static data: the source's (backends/kernel_source/static_data.py, loaded by its path:
              # the package is not imported for each compile), or FAKE_KERNEL_DATA's
              "import importlib.util\n"
              f"spec = importlib.util.spec_from_file_location('static_data', {str(STATIC_DATA)!r})\n"
              "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
              "static_data = mod.static_data\n"
              "src = open(sys.argv[sys.argv.index('-c') + 1]).read()\n"
              "data = int(os.environ.get('FAKE_KERNEL_DATA', sum(n for _, n in static_data(src))))\n"
              "text += '\\n.data_size ' + str(data) if data else ''\n"
              "open(sys.argv[sys.argv.index('-o') + 1], 'w').write(text)\n")
    (peano / "bin" / "clang++").write_text(writer.format("peano object"))
    (bindir / "xchesscc_wrapper").write_text(writer.format("chess object"))
    (bindir / "xchesscc").write_text("#!/bin/sh\n")
    fake = Path(__file__).parents[1] / "fake_aiecc.py"
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


@pytest.mark.parametrize("level", [0, 1, 3])
def test_the_opt_level_reaches_the_compile_and_the_build_names(capsys, no_tools, level):
    """Issue 31 item 12: --opt-level N replaces mlir-aie's -O2 in the Peano compile (nothing else changes there)
    and lands in the build's names (config suffix: xclbin, insts, MLIR; the kernel object), so two levels never
    share a build; the default level keeps today's names."""
    default = dry_run(capsys)
    given = dry_run(capsys, "--opt-level", str(level))
    cc0, cc1 = default["compile the kernel"].split(), given["compile the kernel"].split()
    assert "-O2" in cc0 and "-O2" not in cc1 and f"-O{level}" in cc1
    assert [w for w in cc0 if w != "-O2" and not w.startswith("mm_")] == \
        [w for w in cc1 if w != f"-O{level}" and not w.startswith("mm_")]
    assert cc1[-1] == cc0[-1].replace(".o", f"_O{level}.o")  # the object file
    xclbin = [w for w in given["aiecc: xclbin and NPU instructions"].split() if w.startswith("--xclbin-name=")]
    assert xclbin and xclbin[0] != f"--xclbin-name=final_{_suffix('npu2')}.xclbin"
    assert f"--xclbin-name=final_{_suffix('npu2')}.xclbin" in default["aiecc: xclbin and NPU instructions"]
    c2 = small("npu2")
    c1 = c2.with_(opt_level=level)
    assert c1.suffix != c2.suffix and c1.to_json()["opt_level"] == level and "opt_level" not in c2.to_json()


def test_the_opt_level_is_peanos_alone(capsys, no_tools):
    """xchesscc_wrapper takes no -O (mlir-aie's CHESSCCWRAP2(P)_FLAGS): a level with --chess is refused in one
    line; so is a level Peano does not have."""
    assert main(["build", "--dry-run", *ARGS, "--chess", "--opt-level", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--opt-level 1 applies to Peano" in err[0]
    assert main(["build", "--dry-run", *ARGS, "--chess", "--opt-level", "2"]) == 0  # the default, said aloud
    capsys.readouterr()
    from gemm_gen.spec.checks import check_config

    with pytest.raises(ConfigError, match="optimisation level 7 is not one of Peano's -O0 .. -O3"):
        check_config(small("npu2").with_(opt_level=7))


def test_bfp16_peano_builds_pass_pr3650s_pipeliner_flags(capsys, no_tools):
    """Issue 31 item 9: a bfp16 kernel's Peano compile widens the post-RA pipeliner's II search as mlir-aie PR
    #3650 does for its flat loop (spec/rules/peano.py); a scalar kernel's does not, nor does chess."""
    from gemm_gen.spec.rules import peano

    flags = " ".join(peano.BFP16_PIPELINER_FLAGS)
    assert flags == "-mllvm -aie-postpipeliner-maxii=120 -mllvm -aie-postpipeliner-maxtry-ii=50"
    assert f" {flags} " in dry_run(capsys, "--preset", "config2")["compile the kernel"]
    assert "aie-postpipeliner" not in dry_run(capsys)["compile the kernel"]
    assert "aie-postpipeliner" not in dry_run(capsys, "--preset", "config2", "--chess")["compile the kernel"]


def test_build_with_stand_in_tools(tmp_path, monkeypatch):
    _fake_tools(tmp_path, monkeypatch)
    design = build_design(small("npu2", "i8", "i16"))
    out = tmp_path / "build"
    art = run_build(design, out, gen_args=[])
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [art.kernel_source, art.kernel_object, art.mlir.name, art.xclbin.name, art.insts.name, art.stamp.name,
         art.stack_report.name])
    assert art.complete() and art.xclbin.read_text() == "xclbin"
    assert (out / art.kernel_source).read_text() == render_kernel(design.kernels[0].build)
    assert art.mlir.read_text().startswith("device npu2\nfifo A_L2L1_0")
    assert (out / art.kernel_object).read_text() == f"peano object\n.stack_sizes matmul {KERNEL_FRAME}"
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
    from gemm_gen.backends.compile import build_stamp, is_current

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
    from gemm_gen.backends import compile as build

    _fake_tools(tmp_path, monkeypatch)
    real = build.aiecc_flags
    monkeypatch.setattr(build, "aiecc_flags", lambda d, tc, art: [
        a for a in real(d, tc, art) if a not in ("--xchesscc", "--xbridge")] + ["--unified", f"--peano={tmp_path}"])
    with pytest.raises(BuildError, match=r"an xchesscc object in a Peano link"):
        run_build(build_design(small("npu2", "i8", "i16", compiler="chess")), tmp_path / "build", gen_args=[])


@pytest.mark.parametrize("old_flag", ["--aie-generate-xclbin", "--no-xchesscc", "--no-compile-host"])
def test_flags_of_older_aiecc_are_refused(tmp_path, monkeypatch, old_flag):
    from gemm_gen.backends import compile as build

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
    fake = Path(__file__).parents[1] / "fake_aiecc.py"
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


# ---- stacks: aiecc 1.4.3's check (and the stand-in's model of it), gemm_gen's record and its own check ----
def _worker_mlir(stack, device="npu2"):
    """The IRON stand-in's text for one core on tile (0, 2) that links k.o."""
    return f"device {device}\nkernel matmul k.o []\nworker Tile(0, 2) stack={stack} trace=[]\n"


def test_the_aiecc_standin_checks_stacks_as_aiecc_1_4_3_does(tmp_path):
    """A core whose linked frames (crt1's _main_init: 64 B on aie2p, plus its kernel's) exceed its
    stack_size fails with aiecc's message; with room it succeeds and reports the measured stack."""
    def run(stack, frame, *extra, device="npu2", outputs=("--get-xclbin", "--get=measured_stack_sizes.mlir")):
        (tmp_path / "design.mlir").write_text(_worker_mlir(stack, device))
        (tmp_path / "k.o").write_text(f"peano object\n.stack_sizes matmul {frame}")
        fake = Path(__file__).parents[1] / "fake_aiecc.py"
        return subprocess.run([sys.executable, str(fake), *extra, *outputs, "design.mlir"], cwd=tmp_path,
                              capture_output=True, text=True)

    done = run(3328, 3300)
    assert done.returncode == 1
    assert "error: stack_size = 3328 is insufficient: this core needs 3364 bytes" in done.stderr
    assert not (tmp_path / "aie.xclbin").exists()
    done = run(3328, 3300, device="npu1")  # aie2's _main_init is 32 B (aiecc's fallback table)
    assert done.returncode == 1 and "this core needs 3332 bytes" in done.stderr
    done = run("None", 1000)  # no stack_size: aiecc's own default, 1024 B
    assert done.returncode == 1 and "stack_size is absent, so this core uses the device default of 1024 bytes, " \
                                    "but it needs 1064 bytes" in done.stderr
    done = run(3328, 3264)
    assert done.returncode == 0, done.stderr
    assert "measured_stack_size = 3328 : i32" in (tmp_path / "measured_stack_sizes.mlir").read_text()
    done = run(3328, 3300, "--no-measure-stack-size")  # aiecc's escape hatch
    assert done.returncode == 0 and "measured_stack_size" not in (tmp_path / "measured_stack_sizes.mlir").read_text()
    done = run(3328, 3300, outputs=("--get-npu-insts",))  # instructions only: no core is compiled or linked
    assert done.returncode == 0 and not done.stderr


def test_the_aiecc_standin_without_frames_gives_a_lower_bound_and_still_refuses(tmp_path):
    """An object compiled without -fstack-size-section: aiecc 1.4.3 warns that the requirement is a
    lower bound, writes no measured_stack_size, and still fails a core declaring less."""
    (tmp_path / "design.mlir").write_text(_worker_mlir(32))
    (tmp_path / "k.o").write_text("peano object")
    fake = Path(__file__).parents[1] / "fake_aiecc.py"
    done = subprocess.run([sys.executable, str(fake), "--get=measured_stack_sizes.mlir", "design.mlir"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 1
    assert "no stack size information for 1 function(s) this core reaches, so its requirement is at least 64 " \
           "bytes" in done.stderr and "stack_size = 32 is insufficient: this core needs 64 bytes" in done.stderr


def test_a_stack_too_small_for_its_kernel_is_refused_in_one_line(tmp_path, monkeypatch):
    """aiecc's check fails the build: gemm_gen says which stack the design needs (rounded to 16 B)
    and keeps aiecc's output."""
    from gemm_gen.facts.errors import StackError

    _fake_tools(tmp_path, monkeypatch)
    monkeypatch.setenv("FAKE_KERNEL_FRAME", "4000")
    design = build_design(small("npu2", "i8", "i16"))
    with pytest.raises(StackError, match=r"^aiecc refused .*: a core's stack frame is 4064 B, more than the 3328 B "
                                         r"stack it has .*; rebuild with --stack 4064 \(aiecc's whole output: ") as e:
        run_build(design, tmp_path / "build", gen_args=[])
    assert "\n" not in str(e.value) and (e.value.frame_bytes, e.value.stack_bytes) == (4064, 3328)
    assert "is insufficient" in (tmp_path / "build" / f"failed_{design.config.suffix}" / "build.log").read_text()


def test_the_build_records_what_aiecc_measured(tmp_path, monkeypatch):
    from gemm_gen.backends.compile import stack_report

    _fake_tools(tmp_path, monkeypatch)
    for dev, main_init in (("npu1", 32), ("npu2", 64)):
        design = build_design(small(dev, "i8", "i16"))
        art = run_build(design, tmp_path / dev, gen_args=[])
        report = stack_report(art)
        assert report is not None and report.status == "measured" and report.stack_bytes == 3328
        assert report.frame_bytes == main_init + KERNEL_FRAME and len(report.frames) == len(design.workers)
        assert report.frames["0,2"] == main_init + KERNEL_FRAME and report.data_bytes == 0


def test_the_aiecc_standin_reports_the_static_data_its_objects_hold(tmp_path):
    """measured_data_size is the linked objects' static data (their `.data_size` lines, which the stand-in
    clang++ writes from the source: backends/kernel_source/static_data.py) plus the core body's (0 in the
    stand-in)."""
    (tmp_path / "design.mlir").write_text(_worker_mlir(3328))
    (tmp_path / "k.o").write_text("peano object\n.stack_sizes matmul 512\n.data_size 1024")
    fake = Path(__file__).parents[1] / "fake_aiecc.py"
    done = subprocess.run([sys.executable, str(fake), "--get=measured_stack_sizes.mlir", "design.mlir"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "measured_data_size = 1024 : i32" in (tmp_path / "measured_stack_sizes.mlir").read_text()


def test_static_data_past_its_reservation_is_refused_in_one_line(tmp_path, monkeypatch):
    """A kernel object holding more static data than the L1 plan keeps for it (facts/devices.py `kernel data`,
    256 B; e.g. the 1 KiB tanh table as it was, two static arrays): aiecc measures it and gemm_gen refuses
    the build, naming the reservation to raise; at the reservation it builds."""
    from gemm_gen.facts.errors import StackError

    _fake_tools(tmp_path, monkeypatch)
    design = build_design(small("npu2", "i8", "i16"))
    monkeypatch.setenv("FAKE_KERNEL_DATA", "1024")
    with pytest.raises(StackError, match=r"^aiecc measured .*: core \(\d+, \d+\) holds 1024 B of static data "
                                         r"\(measured_data_size\), more than the 256 B the L1 plan keeps for it; "
                                         r"raise the `kernel data` reservation") as e:
        run_build(design, tmp_path / "over", gen_args=[])
    assert "\n" not in str(e.value)
    monkeypatch.setenv("FAKE_KERNEL_DATA", "256")
    assert run_build(design, tmp_path / "at", gen_args=[]).complete()


def test_a_chess_build_records_that_aiecc_does_not_validate_its_stack(tmp_path, monkeypatch):
    from gemm_gen.backends.compile import stack_report

    _fake_tools(tmp_path, monkeypatch)
    art = run_build(build_design(small("npu2", "i8", "i16", compiler="chess")), tmp_path / "build", gen_args=[])
    report = stack_report(art)
    assert report is not None and report.status == "not validated" and report.frame_bytes is None


def test_an_aiecc_that_reports_no_stack_is_recorded_as_not_reported(tmp_path, monkeypatch):
    """An aiecc without the measured module (another release, or one that ignores --get): the
    record says so and guesses nothing."""
    from gemm_gen.backends import compile as build
    from gemm_gen.backends import stack

    _fake_tools(tmp_path, monkeypatch)
    real = build.aiecc_flags
    monkeypatch.setattr(build, "aiecc_flags",
                        lambda d, tc, art: [a for a in real(d, tc, art) if a != stack.GET_MEASURED])
    art = run_build(build_design(small("npu2", "i8", "i16")), tmp_path / "build", gen_args=[])
    report = build.stack_report(art)
    assert report is not None and report.status == "not reported" and report.frame_bytes is None


def test_gemm_gen_refuses_a_measured_frame_deeper_than_the_stack(tmp_path, monkeypatch):
    """Break the rule behind aiecc's back (its check off, a measurement still written): gemm_gen's
    own check refuses the design in one line and moves no artifact into place."""
    from gemm_gen.backends import compile as build
    from gemm_gen.backends import stack
    from gemm_gen.facts.errors import StackError

    _fake_tools(tmp_path, monkeypatch)
    real = build.aiecc_flags
    monkeypatch.setattr(build, "aiecc_flags", lambda d, tc, art: [*real(d, tc, art), "--no-measure-stack-size"])
    monkeypatch.setattr(stack, "measured_module", lambda text: ({"1,3": 5000, "0,2": 576}, {}))
    design = build_design(small("npu2", "i8", "i16"))
    out = tmp_path / "build"
    with pytest.raises(StackError, match=r"^aiecc measured .*: core \(1, 3\)'s stack frame is 5000 B, more than the "
                                         r"3328 B stack .*; rebuild with --stack 5008 \(the build's files: "):
        run_build(design, out, gen_args=[])
    assert [p.name for p in out.iterdir()] == [f"failed_{design.config.suffix}"]


def test_the_measured_module_is_read_per_core():
    """measured_stack_size / measured_data_size in the form the 1.4.3 docs print them, per tile."""
    from gemm_gen.backends.stack import measured_module

    text = ('%tile_0_2 = aie.tile(0, 2)\n%mem_tile_0_1 = aie.tile(0, 1)\n%tile_1_3 = aie.tile(1, 3)\n'
            '%core_0_2 = aie.core(%tile_0_2) {\n  aie.end\n} {link_with = "mm.o", measured_data_size = 96 : i32, '
            'measured_stack_size = 4128 : i32, stack_size = 8192 : i32}\n'
            '%core_1_3 = aie.core(%tile_1_3) {\n  aie.end\n} {stack_size = 8192 : i32}\n')
    assert measured_module(text) == ({"0,2": 4128}, {"0,2": 96})


def test_instruction_only_runs_do_not_ask_aiecc_to_measure_stacks(no_tools):
    """Measuring needs the cores compiled and linked; an instructions-only aiecc run must not."""
    from gemm_gen.backends.compile import insts_step
    from gemm_gen.backends.stack import GET_MEASURED

    design = build_design(small("npu2", "i8", "i16"))
    step = insts_step(design, toolchain.find_toolchain(False, strict=False), "a.mlir", "i.bin", "build")
    assert GET_MEASURED not in step.argv and "--get-npu-insts" in step.argv


def test_without_stack_size_sections_aiecc_only_gives_a_lower_bound(tmp_path, monkeypatch):
    """Drop -fstack-size-section (the rule): the kernel's frames count 0, aiecc 1.4.3 can only say
    'at least' the startup frame, and the record says it is a lower bound, not a measurement."""
    from gemm_gen.backends import compile as build

    _fake_tools(tmp_path, monkeypatch)
    monkeypatch.setattr(build, "PEANO_STACK_FLAGS", [])
    art = run_build(build_design(small("npu2", "i8", "i16")), tmp_path / "build", gen_args=[])
    report = build.stack_report(art)
    assert report is not None and report.status == "lower bound" and report.frame_bytes == 64  # crt1 alone
