"""Every bad input ends in one line on stderr and exit 2 (130 for Ctrl-C), with no traceback and
nothing written: one test per class of bad input (issue 17, item 5)."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gemm_gen import Gemm
from gemm_gen.app.cli import main
from gemm_gen.facts.errors import ConfigError

SMALL = ["--dev", "npu1", "-M", "128", "-K", "64", "-N", "128", "-m", "16", "-k", "16", "-n", "16", "--k-mt", "32"]
OPEN = ["--dev", "npu1", "-M", "128", "-K", "64", "-N", "128"]  # tiles left to the tuner
ROOT = Path(__file__).resolve().parents[2]


def refused(capsys, args: list[str], code: int = 2) -> str:
    """Run gemm-gen in this process; the one stderr line it ends with (argparse exits, main returns)."""
    try:
        got = main(args)
    except SystemExit as e:
        got = e.code
    out, err = capsys.readouterr()
    assert got == code, (args, got, out, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def no_files(where: Path) -> list[str]:
    return sorted(str(p.relative_to(where)) for p in where.rglob("*"))


@pytest.fixture
def cwd(tmp_path, monkeypatch) -> Path:
    """A fresh working directory: build/ must stay absent after a refusal."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


# ---- 1. malformed shapes and int flags out of range, each named by its own flag ----------------
@pytest.mark.parametrize("cmd,flag,value,text", [
    ("plan", "--mmul", "0x8x8", "each of RxSxT is 1 to 64"),
    ("tune", "--mmul", "-4x8x8", "expected RxSxT"),
    ("plan", "--mmul", "axbxc", "expected RxSxT"),
    ("plan", "--mmul", "1x0x8", "each of RxSxT is 1 to 64"),
    ("plan", "--mmul", "4x8", "expected RxSxT"),
    ("plan", "--mmul", "x", "expected RxSxT"),
    ("roofline", "--mmul", "1099511627776x8x8", "each of RxSxT is 1 to 64"),
    ("tune", "--expansion", "0x2", "each of ERxET is 1 to 64"),
    ("tune", "--expansion", "3x3", "not an expansion the kernels have"),
    ("roofline", "--expansion", "1099511627776x2", "each of ERxET"),
    ("plan", "-M", "0", "0 is out of range: a size is 1 to 2,147,483,647"),
    ("plan", "-K", "-5", "-5 is out of range"),
    ("plan", "-N", str(2**31), "out of range"),
    ("plan", "-M", "1e3", "'1e3' is not a whole number"),
    ("roofline", "-m", "0", "0 is out of range"),
    ("roofline", "-k", "-5", "-5 is out of range"),
    ("roofline", "-n", str(2**40), "out of range"),
    ("generate", "--k-mt", "0", "0 is out of range"),
    ("plan", "--rho", "0", "0 is out of range: rho"),
    ("tune", "--top", "0", "0 is out of range: a design count"),
    ("tune", "--measure", "-1", "-1 is out of range"),
    ("plan", "--stack", "-16", "-16 is out of range"),
    ("plan", "--queue-groups", "0", "0 is out of range"),
    ("plan", "--n-aie-cols", "-1", "-1 is out of range"),
    ("plan", "--shift", "-1", "-1 is out of range: a shift is 0 to 63"),
    ("plan", "--shift", str(2**40), "out of range"),
    ("plan", "--rounding", "bogus", "unknown mode 'bogus'"),
    ("plan", "--saturation", "", "unknown mode ''"),
    ("roofline", "--max-size", "0", "0 is out of range"),
    ("roofline", "--points", "0", "0 is out of range"),
    ("simulate", "--seed", "-1", "-1 is out of range: a seed"),  # 2. seeds
    ("simulate", "--seed", str(2**70), "out of range: a seed"),
    ("run", "--seed", "-1", "out of range: a seed"),
    ("run", "--iters", "0", "0 is out of range"),
])
def test_flags_out_of_range_name_their_flag(capsys, cwd, cmd, flag, value, text):
    base = OPEN if cmd == "tune" or flag == "--rho" else SMALL
    base = [x for i, x in enumerate(base) if x != flag and (i == 0 or base[i - 1] != flag)]
    err = refused(capsys, [cmd, *base, f"{flag}={value}"])
    assert f"argument {flag}" in err and text in err
    assert no_files(cwd) == []


@pytest.mark.parametrize("dev,types,mmul", [("npu2", ["--dtype_in", "i16", "--dtype_out", "i32"], "8x1x8"),
                                             ("npu2", ["--emulate-bf16-mmul-with-bfp16", "0"], "8x1x8")])
def test_an_mmul_no_design_can_feed_is_refused_up_front_naming_it(capsys, cwd, monkeypatch, dev, types, mmul):
    """npu2's 8x1x8 (int16's only acc32 mmul, and a plain bf16 one) has A blocks one 16-bit value wide, which no
    DMA lays out: refused before the tuner tries a tiling, naming the mmul, with the shapes that can (it said
    "choose sizes whose rows are whole 32-bit words", which no size can, issue 33 item 7)."""
    monkeypatch.setattr("gemm_gen.search.space.tilings", _no_tuner)  # no tiling is enumerated
    err = refused(capsys, ["plan", "--dev", dev, "-M", "512", "-K", "512", "-N", "512", *types, "--mmul", mmul])
    assert f"mmul {mmul} for " in err and "can feed no design: s=1 x " in err and "2 B is not a multiple" in err
    assert "; use one of " in err and "8x1x8" not in err.split("; use one of ")[1]
    with pytest.raises(ConfigError, match=r"mmul 8x1x8 for i16 can feed no design.*use one of 4x4x8$"):
        Gemm(device="npu2", dtype_in="i16", dtype_out="i32", mmul_shape=(8, 1, 8))


@pytest.mark.parametrize("flag,value,text", [
    ("--stack", "17", "--stack 17: the core stack is a multiple of 16 bytes below the 65,536 B of L1"),
    ("--stack", "65536", "--stack 65536"),
    ("--n-aie-cols", "3", "--n-aie-cols 3: npu1 designs use 1, 2, 4 columns"),
    ("--queue-groups", "9", "--queue-groups 9: a shim channel's task queue holds 4"),
])
def test_device_dependent_flags_name_their_flag(capsys, cwd, flag, value, text):
    err = refused(capsys, ["generate", *SMALL, flag, value])
    assert err.startswith("gemm-gen: error: ") and text in err
    assert no_files(cwd) == []


def test_roofline_refuses_a_sweep_smaller_than_the_design(capsys, cwd):
    err = refused(capsys, ["roofline", *SMALL, "--max-size", "32", "--points", "5"])
    assert "--max-size 32 is smaller than the design's native size 64x32x64" in err
    assert no_files(cwd) == []


# ---- 3. calibration files ------------------------------------------------------------------------
def _calibrations(tmp: Path) -> dict[str, tuple[Path, str]]:
    from gemm_gen.model.params import raw

    good = raw()
    bad_value = json.loads(json.dumps(good))
    bad_value["kernel"]["bank_stall_cycles_per_c_access"]["value"] = "abc"
    no_device = json.loads(json.dumps(good))
    del no_device["dram"]["npu1"]
    files = {"missing": (tmp / "nope.json", None, "cannot read it (No such file or directory)"),
             "directory": (tmp, None, "cannot read it (Is a directory)"),
             "not json": (tmp / "bad.txt", "not json{", "is not a JSON file"),
             "a list": (tmp / "list.json", "[1, 2]", "the top level is list, not an object"),
             "wrong keys": (tmp / "keys.json", '{"a": 1}', "kernel is missing"),
             "wrong types": (tmp / "types.json", '{"kernel": 1}', "kernel is int, not an object"),
             "bad value": (tmp / "value.json", json.dumps(bad_value),
                           "kernel.bank_stall_cycles_per_c_access.value is 'abc', not a number"),
             "no device": (tmp / "dev.json", json.dumps(no_device), "dram.npu1 is missing")}
    out = {}
    for name, (path, text, expect) in files.items():
        if text is not None:
            path.write_text(text)
        out[name] = (path, expect)
    return out


@pytest.fixture
def fresh_params():
    from gemm_gen.model.params import load, load_ends

    load.cache_clear()
    load_ends.cache_clear()
    yield
    load.cache_clear()
    load_ends.cache_clear()


@pytest.mark.parametrize("case", ["missing", "directory", "not json", "a list", "wrong keys", "wrong types",
                                  "bad value", "no device"])
@pytest.mark.parametrize("cmd", ["predict", "tune"])
def test_a_bad_calibration_file_is_one_line(capsys, cwd, monkeypatch, fresh_params, tmp_path, case, cmd):
    path, expect = _calibrations(tmp_path)[case]
    monkeypatch.setenv("GEMM_GEN_CALIBRATION", str(path))
    err = refused(capsys, [cmd, *(SMALL if cmd == "predict" else OPEN)])
    assert f"GEMM_GEN_CALIBRATION={path}" in err and expect in err and "unset GEMM_GEN_CALIBRATION" in err


@pytest.mark.parametrize("text,expect", [
    (None, "cannot read it (No such file or directory)"),
    ("not json{", "is not a JSON file"),
    ("[1, 2]", "is not a `make validate` record (no list of designs)"),
    ('{"designs": 5}', "no list of designs"),
    ('{"designs": [5]}', "designs[0] is int, not an object"),
    ('{"designs": [{"status": "PASS", "config": {"device": "npu9"}}]}', "is not a measured design (TypeError"),
    ('{"designs": [{"status": "PASS", "name": "x", "role": "fit", "config": {"device": "npu9", "M": 1, "K": 1, '
     '"N": 1, "m": 1, "k": 1, "n": 1, "k_mt": 1}, "measured": {"avg_us": 1}}]}', "unknown device 'npu9'"),
])
def test_a_bad_measurements_file_is_one_line(capsys, cwd, tmp_path, text, expect):
    path = tmp_path / "validate_npu2.json"
    if text is not None:
        path.write_text(text)
    err = refused(capsys, ["calibrate", "--measurements", str(path), "-o", str(cwd / "cal.json")])
    assert str(path) in err and expect in err and "make validate" in err
    assert not (cwd / "cal.json").exists()


# ---- 4. output paths and build directories; the umask ---------------------------------------------
def _places(tmp: Path) -> dict[str, str]:
    (tmp / "afile").write_text("mine")
    (tmp / "adir").mkdir()
    (tmp / "dangling").symlink_to(tmp / "nowhere")
    os.mkfifo(tmp / "fifo")
    return {"file as folder": str(tmp / "afile" / "sub"), "dangling link": str(tmp / "dangling"),
            "under a dangling link": str(tmp / "dangling" / "x"), "directory as file": str(tmp / "adir"),
            "special file": str(tmp / "fifo"), "empty": ""}


@pytest.mark.parametrize("place,expect", [
    ("file as folder", "sub: {tmp}/afile is a file, not a directory; give -o a file in a directory"),
    ("dangling link", "is a symlink to"),
    ("under a dangling link", "is a symlink to"),
    ("directory as file", "is a directory; give -o a file name"),
    ("special file", "is not a regular file (a device, pipe or socket)"),
    ("empty", "-o is empty"),
])
@pytest.mark.parametrize("cmd", ["generate", "kernel", "mlir", "calibrate"])
def test_a_bad_output_file_is_one_line(capsys, cwd, tmp_path, cmd, place, expect):
    out = _places(tmp_path)[place]
    before = no_files(tmp_path)
    args = ["calibrate", "--measurements", "x.json"] if cmd == "calibrate" else [cmd, *SMALL]
    err = refused(capsys, [*args, "-o", out])
    assert expect.format(tmp=tmp_path) in err and "-o" in err
    assert no_files(tmp_path) == before and stat.S_ISFIFO((tmp_path / "fifo").stat().st_mode)


@pytest.mark.parametrize("place,expect", [
    ("file as folder", "afile is a file, not a directory"),
    ("dangling link", "is a symlink to"),
    ("under a dangling link", "is a symlink to"),
    ("special file", "fifo is a file, not a directory; give --build-dir a directory"),
    ("empty", "--build-dir is empty"),
])
@pytest.mark.parametrize("cmd,flag", [("generate", "--build-dir"), ("build", "--build-dir"),
                                      ("run", "--build-dir"), ("roofline", "--out-dir")])
def test_a_bad_build_directory_is_one_line(capsys, cwd, tmp_path, cmd, flag, place, expect):
    out = _places(tmp_path)[place]
    before = no_files(tmp_path)
    err = refused(capsys, [cmd, *SMALL, flag, out])
    assert expect.replace("--build-dir", flag) in err and flag in err
    assert no_files(tmp_path) == before


def test_an_unwritable_directory_is_one_line(capsys, cwd, tmp_path, monkeypatch):
    """Root writes anywhere, so the refusal of a read-only directory is checked through os.access
    (what a user without the permission gets), and the write itself through mkstemp's error."""
    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: Path(p) != ro and real(p, mode, **kw))
    err = refused(capsys, ["generate", *SMALL, "--build-dir", str(ro)])
    assert f"--build-dir {ro}: {ro} is not writable (permission denied)" in err
    err = refused(capsys, ["generate", *SMALL, "-o", str(ro / "sub" / "d.json")])
    assert f"cannot create {ro / 'sub'} in {ro} (permission denied)" in err
    monkeypatch.setattr(os, "access", real)

    real_mkstemp = tempfile.mkstemp

    def denied(*a, **k):
        if not k.get("prefix", "").startswith(refuse_prefix):
            return real_mkstemp(*a, **k)
        raise PermissionError(13, "Permission denied", str(ro / ".d.json.tmp"))

    monkeypatch.setattr("tempfile.mkstemp", denied)
    refuse_prefix = "."  # every file: the check before any work tries a write and is refused
    err = refused(capsys, ["generate", *OPEN, "-o", str(ro / "new" / "d.json")])
    assert f"-o {ro / 'new' / 'd.json'}: cannot write in {ro / 'new'}: Permission denied" in err
    assert no_files(tmp_path) == ["ro"]  # the folder it made to try is gone again
    refuse_prefix = ".d.json."  # the output's own write only (a disk that fills during the work)
    err = refused(capsys, ["generate", *SMALL, "-o", str(ro / "new" / "d.json")])
    assert f"cannot write {ro / 'new' / 'd.json'}: Permission denied" in err
    assert no_files(tmp_path) == ["ro"]  # the folder it made for the file is gone again


def test_a_directory_only_a_write_can_refuse_is_refused_before_the_tuner(capsys, cwd, monkeypatch):
    """os.access lets root write into /proc; the write itself fails there. Tried before any work: the tuner
    never runs (issue 33 item 7)."""
    monkeypatch.setattr("gemm_gen.search.choose", _no_tuner)
    err = refused(capsys, ["generate", *OPEN, "--build-dir", "/proc/gemm_gen_x"])
    assert "--build-dir /proc/gemm_gen_x: cannot create /proc/gemm_gen_x" in err
    err = refused(capsys, ["generate", *OPEN, "-o", "/proc/gemm_gen_x/d.json"])
    assert "-o /proc/gemm_gen_x/d.json: cannot create /proc/gemm_gen_x" in err
    assert no_files(cwd) == []


def _no_tuner(*a, **k):
    raise AssertionError("the tuner ran before a refusal that needs no design")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a read-only directory")
def test_a_read_only_directory_is_one_line(capsys, cwd, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    err = refused(capsys, ["generate", *SMALL, "--build-dir", str(ro)])
    assert "not writable" in err


def test_missing_parents_are_created_and_links_followed(capsys, cwd, tmp_path):
    deep = tmp_path / "a" / "b" / "d.json"
    assert main(["generate", *SMALL, "-o", str(deep)]) == 0 and deep.exists()
    target = tmp_path / "target.json"
    target.write_text("old")
    (tmp_path / "link.json").symlink_to(target)
    assert main(["kernel", *SMALL, "-o", str(tmp_path / "link.json")]) == 0
    assert (tmp_path / "link.json").is_symlink() and "mmul" in target.read_text()


def test_outputs_follow_the_umask(capsys, cwd, tmp_path):
    old = os.umask(0o022)
    try:
        assert main(["generate", *SMALL, "-o", str(tmp_path / "d.json")]) == 0
        assert main(["roofline", *SMALL, "--points", "5", "--max-size", "256", "--out-dir", str(tmp_path)]) == 0
        os.umask(0o027)
        assert main(["kernel", *SMALL, "-o", str(tmp_path / "k.cc")]) == 0
    finally:
        os.umask(old)
    modes = {p.name.split("_")[0]: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert modes == {"d.json": 0o644, "roofline": 0o644, "heatmap": 0o644, "k.cc": 0o640}


# ---- 5. the plotting backend ------------------------------------------------------------------------
def test_an_unknown_plotting_backend_is_one_line(tmp_path):
    env = {**os.environ, "MPLBACKEND": "nonexistent"}
    env.pop("GEMM_GEN_DEBUG", None)
    done = subprocess.run([sys.executable, "-m", "gemm_gen.app.cli", "roofline", *SMALL, "--points", "5",
                           "--out-dir", str(tmp_path / "plots")], capture_output=True, text=True, cwd=ROOT, env=env)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "MPLBACKEND=nonexistent is not a plotting backend" in done.stderr and "MPLBACKEND=Agg" in done.stderr
    assert not (tmp_path / "plots").exists()


def test_matplotlib_that_cannot_be_imported_is_one_line(capsys, cwd, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    err = refused(capsys, ["roofline", *SMALL, "--points", "5"])
    assert "matplotlib cannot be imported" in err and "pip install matplotlib" in err
    assert no_files(cwd) == []


# ---- 7. Ctrl-C ------------------------------------------------------------------------------------
def _interrupt(*a, **k):
    raise KeyboardInterrupt


@pytest.mark.parametrize("cmd,where", [
    (["simulate", *SMALL], "gemm_gen.sim.run.simulate_calls"),
    (["plan", *OPEN], "gemm_gen.search.choosing.tuned_config"),
    (["generate", *SMALL], "gemm_gen.app.design_commands.dumps"),
    (["roofline", *SMALL, "--points", "5"], "gemm_gen.app.plots.evaluate_all"),
])
def test_ctrl_c_is_one_line_and_exit_130(capsys, cwd, monkeypatch, cmd, where):
    monkeypatch.setattr(where, _interrupt)
    err = refused(capsys, cmd, code=130)
    assert err == "gemm-gen: interrupted\n"
    assert no_files(cwd) == []


def test_ctrl_c_between_two_outputs_removes_the_first(capsys, cwd, monkeypatch):
    """roofline writes two PNGs as one: interrupted after the first rename, neither stays (nor the
    directory made for them)."""
    real = os.replace
    calls = []

    def second_interrupted(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real(src, dst)

    monkeypatch.setattr(os, "replace", second_interrupted)
    err = refused(capsys, ["roofline", *SMALL, "--points", "5", "--out-dir", "plots/new"], code=130)
    assert err == "gemm-gen: interrupted\n" and len(calls) == 2
    assert no_files(cwd) == []


# ---- 6. memory -------------------------------------------------------------------------------------
def test_a_simulation_too_large_for_memory_is_refused_up_front(capsys, cwd, monkeypatch):
    from gemm_gen.sim import memory

    ran = []
    monkeypatch.setattr("gemm_gen.sim.run.simulate_calls", lambda *a, **k: ran.append(1))
    monkeypatch.setattr(memory, "available_bytes", lambda: 10**9)
    err = refused(capsys, ["simulate", "--dev", "npu2", "-M", "8192", "-K", "8192", "-N", "4096"])
    assert "simulating 8192x8192x4096 needs about" in err and "1.0 GB are available" in err
    assert "--runtime-sizes" in err and not ran
    monkeypatch.setattr(memory, "available_bytes", lambda: 3 * 10**9)  # the literal simulator needs more
    err = refused(capsys, ["simulate", "--dev", "npu2", "-M", "8192", "-K", "8192", "-N", "4096", "--literal"])
    assert "3.0 GB are available" in err and not ran


def test_an_impossible_simulation_is_refused_before_the_tuner(capsys, cwd, monkeypatch):
    """The memory a simulation needs depends on the types and sizes only: refused before a design is chosen
    (which took 126 s for 65536^3, issue 33 item 2); so are operands with more words than the simulator numbers,
    on a machine with the memory for them."""
    from gemm_gen.sim import memory

    monkeypatch.setattr("gemm_gen.search.choose", _no_tuner)
    monkeypatch.setattr(memory, "available_bytes", lambda: 24 * 10**9)
    err = refused(capsys, ["simulate", "-M", "65536", "-K", "65536", "-N", "65536"])
    need = re.search(r"simulating 65536x65536x65536 needs about ([\d.]+) GB", err)
    assert need and float(need[1]) > 24.0 and "24.0 GB are available" in err
    monkeypatch.setattr(memory, "available_bytes", lambda: 10**15)
    err = refused(capsys, ["simulate", "--dev", "npu1", "--dtype_in", "i8", "--dtype_out", "i32",
                           "-M", "65536", "-K", "65537", "-N", "1"])
    assert "A of a 65536x65537x1 call has 1,073,758,208 words, more than the simulator's 1,073,741,824" in err
    err = refused(capsys, ["simulate", "--dev", "npu1", "--dtype_in", "i8", "--dtype_out", "i32",
                           "--runtime-sizes", "64x64x64,65536x16x65537"])
    assert "C of a 65536x16x65537 call has" in err


def test_a_large_simulation_says_what_it_needs_first(capsys, cwd, monkeypatch):
    from gemm_gen.sim import memory

    monkeypatch.setattr(memory, "available_bytes", lambda: 64 * 10**9)
    monkeypatch.setattr("gemm_gen.sim.run.simulate_calls", _interrupt)  # stop where it would start
    assert main(["simulate", "--dev", "npu2", "-M", "8192", "-K", "8192", "-N", "4096"]) == 130
    need, stop = capsys.readouterr().err.splitlines()
    assert need.startswith("simulating needs about 1.") and need.endswith(" GB of memory")
    assert stop == "gemm-gen: interrupted"
    assert main(["simulate", *SMALL]) == 130 and capsys.readouterr().err == "gemm-gen: interrupted\n"  # small: quiet



def test_a_large_simulation_no_design_serves_is_refused_in_one_line(capsys, cwd, monkeypatch):
    from gemm_gen.sim import memory

    monkeypatch.setattr(memory, "available_bytes", lambda: 64 * 10**9)  # memory allows it: the tuner refuses
    err = refused(capsys, ["simulate", "--dev", "npu2", "-M", "512", "-N", "512", "-K", "2188800"])
    assert "no valid design for npu2 512x2188800x512" in err and "needs about" not in err

# peak RSS in MiB of `gemm-gen simulate --literal` (tuner's designs), measured for gemm_gen/sim/memory.py's fit
MEASURED_PEAKS = [
    ("npu2", "bf16", "bf16", (512, 512, 512), 89), ("npu2", "bf16", "bf16", (1024, 1024, 1024), 175),
    ("npu2", "bf16", "bf16", (2048, 2048, 1024), 413), ("npu2", "bf16", "bf16", (2048, 2048, 2048), 455),
    ("npu2", "bf16", "bf16", (4096, 4096, 2048), 1390), ("npu2", "bf16", "bf16", (4096, 1024, 1024), 447),
    ("npu2", "bf16", "bf16", (1024, 4096, 1024), 425), ("npu1", "i8", "i32", (1024, 1024, 1024), 151),
    ("npu1", "i8", "i8", (2048, 2048, 2048), 296), ("npu2", "i8", "i8", (512, 512, 512), 81),
    ("npu2", "i16", "i32", (2048, 1024, 2048), 396), ("npu1", "bf16", "f32", (2048, 1024, 1024), 232),
]


# the same rows in the fast simulator, the default (docs/simulator.md)
MEASURED_FAST_PEAKS = [
    ("npu2", "bf16", "bf16", (512, 512, 512), 83), ("npu2", "bf16", "bf16", (1024, 1024, 1024), 107),
    ("npu2", "bf16", "bf16", (2048, 2048, 1024), 148), ("npu2", "bf16", "bf16", (2048, 2048, 2048), 191),
    ("npu2", "bf16", "bf16", (4096, 4096, 2048), 317), ("npu2", "bf16", "bf16", (4096, 1024, 1024), 176),
    ("npu2", "bf16", "bf16", (1024, 4096, 1024), 170), ("npu1", "i8", "i32", (1024, 1024, 1024), 137),
    ("npu1", "i8", "i8", (2048, 2048, 2048), 240), ("npu2", "i8", "i8", (512, 512, 512), 78),
    ("npu2", "i16", "i32", (2048, 1024, 2048), 268), ("npu1", "bf16", "f32", (2048, 1024, 1024), 140),
]


@pytest.mark.parametrize("literal, rows, most", [(True, MEASURED_PEAKS, 1.3), (False, MEASURED_FAST_PEAKS, 1.55)])
def test_the_memory_estimate_bounds_the_measured_peaks(literal, rows, most):
    """Never below a measured peak (a refusal must not let a run through that then fails), and
    at most `most` times it (nor refuse runs that would fit)."""
    from gemm_gen.sim.memory import estimate_bytes
    from gemm_gen.spec.config import GemmConfig
    from gemm_gen.spec.request import Problem

    for dev, dtype_in, dtype_out, (M, K, N), peak in rows:
        c = GemmConfig(dev, M, K, N, 64, 64, 64, 128, dtype_in, dtype_out)  # the tiles do not enter the estimate
        ratio = estimate_bytes(c, Problem(M, K, N), literal) / (peak * 2**20)
        assert 1.0 <= ratio <= most, (dev, dtype_in, dtype_out, M, K, N, ratio)


# ---- 8, 9. runtime sizes, weights, boolean flags ----------------------------------------------------
@pytest.mark.parametrize("flag,value,text", [
    ("--runtime-sizes", "-5x4x4", "is not MxKxN"),
    ("--runtime-sizes", "0x1x1", "M=0 must be a positive integer"),
    ("--runtime-sizes", "1x1", "is not MxKxN"),
    ("--runtime-sizes", "axbxc", "is not MxKxN"),
    ("--runtime-sizes", "1x1x1,,", "has an empty size between commas"),
    ("--runtime-sizes", ",", "has an empty size between commas"),
    ("--runtime-sizes", f"{2**31}x1x1", "each of M, K, N is at most 2,147,483,647"),
    ("--weights", "-1,1", "each weight must be a finite number >= 0"),
    ("--weights", "nan,1", "each weight must be a finite number >= 0"),
    ("--weights", "inf,1", "each weight must be a finite number >= 0"),
    ("--weights", "0,0", "at least one must be above 0"),
    ("--weights", "a,b", "is not a list of numbers"),
    ("--b-col-maj", "", "expected 0 or 1, got ''"),
    ("--b-col-maj", "junk", "expected 0 or 1, got 'junk'"),
    ("--emulate-bf16-mmul-with-bfp16", "2", "expected 0 or 1, got '2'"),
    ("--convert-once", "yes please", "expected 0 or 1"),
])
def test_sizes_weights_and_switches_are_one_line(capsys, cwd, flag, value, text):
    sizes = [] if flag == "--runtime-sizes" else ["--runtime-sizes", "128x64x128,64x64x64"]
    err = refused(capsys, ["plan", "--dev", "npu1", *sizes, f"{flag}={value}"])
    assert f"argument {flag}" in err and text in err


def test_wrong_weight_count_and_a_negative_value_without_equals(capsys, cwd):
    err = refused(capsys, ["tune", "--dev", "npu1", "--runtime-sizes", "128x64x128,64x64x64", "--weights", "1"])
    assert "--weights gives 1 weights for 2 --runtime-sizes" in err
    err = refused(capsys, ["plan", *SMALL, "--weights", "-1,1"])
    assert "expected one argument (a value that starts with '-' is written --flag=VALUE)" in err
    err = refused(capsys, ["plan", *SMALL, "--chess", "junk"])
    assert "unrecognized arguments: junk" in err


# ---- debug switch ----------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["0", "", "false", "off"])
def test_gemm_gen_debug_off_values_keep_one_line(capsys, monkeypatch, value):
    monkeypatch.setenv("GEMM_GEN_DEBUG", value)
    err = refused(capsys, ["plan", *SMALL, "-m", "30"])
    assert "m=30 is not a multiple" in err


def test_gemm_gen_debug_on_shows_an_interrupts_traceback(monkeypatch, tmp_path):
    monkeypatch.setenv("GEMM_GEN_DEBUG", "1")
    monkeypatch.setattr("gemm_gen.app.design_commands.dumps", _interrupt)
    with pytest.raises(KeyboardInterrupt):
        main(["generate", *SMALL, "-o", str(tmp_path / "d.json")])
    assert not (tmp_path / "d.json").exists()


# ---- the fused epilogue (issue 21): each option a design cannot take is one line naming it ----------------
I8 = ["--dtype_in", "i8", "--dtype_out", "i8"]


@pytest.mark.parametrize("args,text", [
    (["--activation", "silu", "--requant", "per_channel", *I8], "--activation silu on a requantized i8 output"),
    (["--requant", "per_channel"], "--requant is TFLite's integer requantization, not for a bf16 output"),
    (["--bias", "--acc", "out"], "--acc out converts C after every k-step"),
    (["--bias", *I8], "add --requant per_channel"),
    (["--bias", "--dtype_in", "i8", "--dtype_out", "i32"], "a i32 output takes no epilogue"),
    (["--requant", "per_channel", "--shift", "2", *I8], "the requantization's shifts are per column"),
    (["--clamp=-1,1", "--requant", "per_channel", *I8], "its bounds are the call's act_min / act_max"),
    (["--bias", "--requant", "per_channel", *I8, "-k", "8", "--k-mt", "64"], "use k >= 24"),
    (["--bias", "--b-col-maj", "-k", "16", "--k-mt", "32"], "use --k-mt 16"),
    (["--bias", "--dtype_in", "bfp16", "--dtype_out", "bf16"], "an epilogue on the bfp16 kernels"),
    (["--requant", "per_channel", *I8, "--dtype_b", "i4"], "an epilogue with i4 weights is not built yet"),
])
def test_an_epilogue_a_design_cannot_take_is_one_line(capsys, cwd, args, text):
    base = ["plan", "--dev", "npu2", "-M", "256", "-K", "256", "-N", "256"]
    if "-k" in args:
        base += ["-m", "32", "-n", "32"]
    err = refused(capsys, [*base, *args])
    assert text in err, err
    assert no_files(cwd) == []


def test_the_convert_once_kernel_refuses_an_epilogue(capsys, cwd):
    err = refused(capsys, ["plan", "--dev", "npu2", "-M", "256", "-K", "256", "-N", "256", "--bias",
                           "--convert-once", "1"])
    assert "has no fused epilogue yet" in err


@pytest.mark.parametrize("flag,value,text", [
    ("--clamp", "3,1", "LO <= HI"), ("--clamp", "1", "expected LO,HI"), ("--clamp", "a,b", "expected LO,HI"),
    ("--clamp", "nan,1", "two finite numbers"), ("--activation", "tanh", "invalid choice"),
    ("--requant", "per_tensor", "invalid choice"),
])
def test_malformed_epilogue_flags_name_their_flag(capsys, cwd, flag, value, text):
    err = refused(capsys, ["plan", *OPEN, f"{flag}={value}"])
    assert flag in err and text in err, err


def test_an_epilogue_the_types_take_is_planned(capsys, cwd):
    assert main(["plan", *OPEN, "--bias", "--activation", "gelu", "--clamp=-6,6"]) == 0
    assert main(["plan", *OPEN, *I8, "--bias", "--requant", "per_channel", "--activation", "relu"]) == 0
    capsys.readouterr()
