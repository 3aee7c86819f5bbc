"""A README that works when copied (issue 33 item 6): every command in README.md runs, and every figure in it is
computed.

- Every fenced `sh` command runs as written (the words after `#` are a comment), each in a scratch folder that has
  the checkout's Makefile (with gemm_gen.mk), pyproject.toml and .venv/ (so `make generate` or `make clean` writes
  or removes only there), with .venv/bin first on PATH. make is told that the install is done
  (`-o .venv/.installed`): the tests never reinstall. A command that would run this very suite (`make test`) is run
  as a dry run. Each must exit 0; a simulation must PASS; the first command's output must show what the README
  says it ends with.
- A block whose first line is `# needs an NPU` holds commands that need an NPU and its toolchain: each is checked
  here with the stand-ins the other tests use (tests/fake_aiecc.py, tests/iron_recorder.py, tests/fake_pyxrt.py,
  the doctor's laptop), through the gemm-gen command line make would run (`make -n`), or, for the install
  steps, against the pins they must match (gemm_gen/backends/pins.py, pyproject.toml's npu extra).
- The `python` block runs as a script.
- Every figure (a number with a unit: %, TOPS, us, s, GB, x, ...) outside a generated block and outside code is an
  error; the generated blocks are what scripts/readme_figures.py computes (`--check`). The make targets the
  README names in prose are tests/app/test_make.py's.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from gemm_gen.app.cli import main
from gemm_gen.backends import doctor, pins, toolchain
from gemm_gen.facts.errors import ToolchainMissing

from ..backends.test_build import _fake_tools
from ..backends.test_doctor import laptop  # noqa: F401 - the fixture
from ..fake_pyxrt import FakeXrt

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
NPU_MARK = "# needs an NPU"
RECURSIVE = {("make", "test")}  # would run this suite inside itself: a dry run


@dataclass(frozen=True)
class Command:
    text: str  # as the README writes it, continuation lines joined, the comment dropped
    line: int  # where it starts in the README
    npu: bool  # in a block marked as needing an NPU

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.text)

    def __str__(self) -> str:
        return self.text if len(self.text) < 90 else self.text[:87] + "..."


def fenced(text: str) -> list[tuple[str, list[str], int]]:
    """Each fenced block: its info string, its lines, the README line of its first line."""
    out = []
    for m in re.finditer(r"^```(\w*)[^\n]*\n(.*?)^```", text, re.M | re.S):
        out.append((m.group(1), m.group(2).splitlines(), text.count("\n", 0, m.start(2)) + 1))
    return out


def commands(text: str) -> list[Command]:
    """The shell commands of every `sh` block."""
    found = []
    for info, lines, first in fenced(text):
        if info != "sh":
            continue
        npu = bool(lines) and lines[0].startswith(NPU_MARK)
        i = 0
        while i < len(lines):
            start, joined = i, lines[i]
            while joined.rstrip().endswith("\\"):
                i += 1
                joined = joined.rstrip()[:-1] + " " + lines[i].strip()
            i += 1
            words = shlex.split(joined, comments=True)
            if words:
                found.append(Command(shlex.join(words), first + start, npu))
    return found


COMMANDS = commands(README.read_text())
HERE = [c for c in COMMANDS if not c.npu]
NPU = [c for c in COMMANDS if c.npu]


def test_the_readme_has_commands_of_both_kinds_and_one_python_example():
    assert len(HERE) >= 10 and len(NPU) >= 6, COMMANDS
    assert [info for info, _, _ in fenced(README.read_text())].count("python") == 1
    assert all(c.argv[0] in ("make", "gemm-gen", "python", ".venv/bin/pip", "source") for c in COMMANDS), COMMANDS


# ---- the commands that run here -----------------------------------------------------------------------------
@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A folder where make and gemm-gen find what a clone has: the Makefile (with gemm_gen.mk, the option variables
    it includes), pyproject.toml and .venv/."""
    for name in ("Makefile", "gemm_gen.mk", "pyproject.toml", ".venv"):
        (tmp_path / name).symlink_to(ROOT / name)
    return tmp_path


def run_here(argv: list[str], where: Path) -> subprocess.CompletedProcess[str]:
    if argv[0] == "make":  # the install is done: never reinstall from the tests
        argv = ["make", "--no-print-directory", "-o", ".venv/.installed", *argv[1:]]
    env = dict(os.environ, PATH=f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run(argv, cwd=where, capture_output=True, text=True, timeout=600, env=env)


def _readme_block(name: str) -> str:
    m = re.search(rf"<!-- figures: {name} -->\n(.*?)<!-- /figures -->", README.read_text(), re.S)
    assert m, name
    return m.group(1)


@pytest.mark.parametrize("command", HERE, ids=str)
def test_every_command_runs_as_written(command: Command, scratch: Path) -> None:
    argv = command.argv
    if tuple(argv[:2]) in RECURSIVE:
        done = run_here(["make", "-n", *argv[1:]], scratch)
        assert done.returncode == 0 and "pytest" in done.stdout, done.stderr
        return
    done = run_here(argv, scratch)
    said = done.stdout[-3000:] + done.stderr[-3000:]
    assert done.returncode == 0, f"README line {command.line}: {command.text}\n{said}"
    if "simulate" in argv or argv[:2] == ["make", "sim"]:
        assert re.search(r"^PASS", done.stdout, re.M), said
    if command == HERE[0]:  # the first run ends as the README shows (scripts/readme_figures.py writes that block)
        figures = _figures()
        assert tuple(argv) == figures.FIRST_RUN
        shown = [line for line in _readme_block("first-run").splitlines() if not line.startswith("```")]
        assert figures.first_run_lines(done.stdout) == shown and done.stdout.splitlines()[-2:] == shown[-2:]
    for target, made in (("generate", "design_*.json"), ("roofline", "roofline_*.png")):
        if target in argv:
            assert list((scratch / "build").glob(made)), said


def test_the_python_example_runs(scratch: Path) -> None:
    code = next("\n".join(lines) for info, lines, _ in fenced(README.read_text()) if info == "python")
    done = run_here([str(ROOT / ".venv" / "bin" / "python"), "-c", code], scratch)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "equal to A @ B rounded once" in done.stdout


def test_activating_the_venv_is_a_file_that_exists():
    assert "`source .venv/bin/activate`" in README.read_text() and (ROOT / ".venv" / "bin" / "activate").is_file()


# ---- the commands that need an NPU, checked with the stand-ins --------------------------------------------------
def _npu(prefix: str) -> Command:
    found = [c for c in NPU if c.text.startswith(prefix)]
    assert len(found) == 1, (prefix, NPU)
    return found[0]


def gemm_gen_argv(command: Command) -> list[str]:
    """The gemm-gen command line a `make ...` of the README runs (make's dry run), or the README's own."""
    if command.argv[0] == "gemm-gen":
        return command.argv[1:]
    done = subprocess.run(["make", "--no-print-directory", "-o", ".venv/.installed", "-n", *command.argv[1:]],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    line = next(x for x in done.stdout.replace("\\\n", " ").splitlines() if "/gemm-gen " in x)
    words = shlex.split(line)
    return words[next(i for i, w in enumerate(words) if w.endswith("/gemm-gen")) + 1:]


def test_the_npu_block_is_every_npu_command_the_readme_has():
    assert [c.text.split()[0] for c in NPU] == ["source", "make", ".venv/bin/pip", "make", "make", "make", "make",
                                                "gemm-gen"]
    header = next(lines[0] for info, lines, _ in fenced(README.read_text()) if lines and lines[0].startswith(NPU_MARK))
    assert f"utils/build_drivers.sh at v{pins.MLIR_AIE_RELEASE}" in header


def test_the_xrt_setup_is_the_one_the_pins_name():
    assert f"{_npu('source ').text} " in pins.XRT.install + " "


def test_make_install_takes_the_python_it_is_given():
    argv = _npu("make install").argv
    python = next(a.split("=", 1)[1] for a in argv if a.startswith("PYTHON="))
    done = subprocess.run(["make", "--no-print-directory", "-n", "-B", *argv[1:]], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=True)
    assert f"{python} -m venv .venv" in done.stdout
    assert "3.12" in python and "Python 3.12" in pins.MLIR_AIE.install  # the mlir-aie wheels' Python


def test_the_npu_install_is_the_pinned_toolchain():
    argv = _npu(".venv/bin/pip").argv
    assert argv[1:4] == ["install", "-e", ".[npu]"]
    indexes = [argv[i + 1] for i, a in enumerate(argv) if a == "-f"]
    assert indexes == [pins.MLIR_AIE_INDEX, pins.PEANO_INDEX]
    extra = re.search(r"^npu = \[(.*)\]$", (ROOT / "pyproject.toml").read_text(), re.M)  # the [npu] extra
    assert extra and extra.group(1) == f'"mlir_aie=={pins.MLIR_AIE_RELEASE}", "llvm-aie=={pins.PEANO_VERSION}"'


@pytest.fixture
def npu_machine(tmp_path, monkeypatch, laptop):  # noqa: F811
    """A Ryzen AI laptop made of stand-ins: doctor's checks pass, stand-in Peano and aiecc 1.4.3 on PATH, IRON's
    stand-in, and a pyxrt stand-in (`npu_machine.xrt`, set per test) that computes C with the exact reference."""
    _fake_tools(tmp_path, monkeypatch)
    monkeypatch.setattr(toolchain, "peano_dir", lambda: tmp_path / "peano")
    monkeypatch.setattr(toolchain, "aiecc", lambda: str(tmp_path / "bin" / "aiecc"))

    def no_chess() -> str:
        raise ToolchainMissing("xchesscc is not on PATH", "install it")

    monkeypatch.setattr(toolchain, "xchesscc", no_chess)
    monkeypatch.setattr(doctor, "_which", lambda name: None if name == "xchesscc" else f"/usr/bin/{name}")
    work = tmp_path / "clone"
    work.mkdir()
    monkeypatch.chdir(work)
    holder = {"xrt": FakeXrt()}
    monkeypatch.setattr(toolchain, "pyxrt", lambda: holder["xrt"])
    return holder


def _xrt_for(argv: list[str]) -> FakeXrt:
    from gemm_gen.app.choice import choose_design
    from gemm_gen.app.cli import parser

    return FakeXrt(choose_design(parser().parse_args(argv)))


def test_make_doctor_is_ready_on_the_npu_machine(npu_machine, capsys):
    argv = gemm_gen_argv(_npu("make doctor"))
    assert argv == ["doctor"]
    assert main(argv) == 0 and "everything is in place" in capsys.readouterr().out


def test_make_run_builds_runs_and_passes_on_the_npu_machine(npu_machine, capsys, monkeypatch):
    argv = gemm_gen_argv(_npu("make run"))
    npu_machine["xrt"] = _xrt_for(argv)
    monkeypatch.setenv("XRT_HACK_UNSECURE_LOADING_XCLBIN", "1")  # what make run exports
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Avg NPU matmul time:" in out and out.endswith("PASS!\n\n"), out[-2000:]


def test_make_all_builds_the_xclbin_and_instructions_on_the_npu_machine(npu_machine, capsys):
    argv = gemm_gen_argv(_npu("make all"))
    assert argv[0] == "build" and main(argv) == 0
    built = {p.name.split("_")[0] for p in Path("build").iterdir()}
    assert {"final", "insts"} <= built, built


def test_make_validate_and_calibrate_on_the_npu_machine(npu_machine, capsys):
    """The sweep's small rows (`--only fit`; the papers' full-size rows take the same path at sizes whose stand-in
    runs would take minutes), then the README's calibrate on the record validate wrote."""
    from gemm_gen.app import validate
    from gemm_gen.backends.compile import artifacts
    from gemm_gen.design import build_design

    argv = gemm_gen_argv(_npu("make validate"))
    dev = argv[argv.index("--dev") + 1]
    configs = {str(artifacts(build_design(i.config), Path(argv[argv.index("--build-dir") + 1])).xclbin): i.config
               for i in validate.sweep(dev, chess=False) if i.config is not None and i.role == "fit"}
    npu_machine["xrt"] = FakeXrt(configs=configs, device_name="RyzenAI-npu4")
    assert main([*argv, "--only", "fit"]) == 0, capsys.readouterr().out[-2000:]
    calibrate = _npu("gemm-gen calibrate").argv[1:]
    record = Path(calibrate[calibrate.index("--measurements") + 1])
    assert record.is_file() and all(d["status"] == "PASS" for d in json.loads(record.read_text())["designs"])
    capsys.readouterr()
    code = main(calibrate)
    out, err = capsys.readouterr()
    assert code == 0, out[-2000:] + err
    assert Path(calibrate[calibrate.index("-o") + 1]).is_file()


# ---- the figures -------------------------------------------------------------------------------------------------
def _figures():
    spec = importlib.util.spec_from_file_location("readme_figures", ROOT / "scripts" / "readme_figures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# a number with a unit: what the README may only hold inside a generated block (or inside code: commands, names)
FIGURE = re.compile(r"(?<![\w.-])\d[\d,]*(\.\d+)?\s*(%|x\b|TOPS|TFLOPS|GFLOPS|GB|MB|KiB|MiB|ms\b|us\b|µs|s\b|"
                    r"seconds|minutes|hours|tests|designs|cores|kernels)")


def untyped(text: str) -> str:
    """The README without its generated blocks, fenced blocks and inline code."""
    text = re.sub(r"<!-- figures: [a-z0-9-]+ -->.*?<!-- /figures -->", "", text, flags=re.S)
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`]*`", "", text)


def test_no_figure_is_typed_outside_a_generated_block():
    typed = [m.group(0) for m in FIGURE.finditer(untyped(README.read_text()))]
    assert not typed, f"figures typed into README.md: {typed}; generate them (scripts/readme_figures.py)"


def test_the_figure_rule_sees_a_typed_figure():
    for typed in ("it runs at 13.4 TOPS", "about 4x NumPy", "0.94% error", "in 250 ms", "2,064,384 designs"):
        assert FIGURE.search(untyped(f"text {typed} more")), typed
    for fine in ("`--rho 4`", "npu2 (aie2p)", "mlir-aie v1.4.3", "Python 3.10 or newer", "<!-- figures: x -->9%"
                 "<!-- /figures -->"):
        assert not FIGURE.search(untyped(fine)), fine


def test_the_readme_figures_are_what_the_script_computes():
    figures = _figures()
    assert set(figures.blocks(README.read_text())) == {"devices", "first-run", "losses"}
    assert figures.main(["--check", "--fast"]) == 0


def test_the_check_sees_a_stale_figure(tmp_path, monkeypatch):
    figures = _figures()
    stale = tmp_path / "README.md"
    stale.write_text(README.read_text().replace(" x 8 cores", " x 7 cores"))
    monkeypatch.setattr(figures, "ROOT", tmp_path)
    differ = figures.stale(stale, {"devices"}, {})
    assert len(differ) == 1 and "block devices differs" in differ[0]
    assert "\n-- npu2 = XDNA2 (Strix / Strix Halo / Krackan): 4 x 7 cores" in differ[0]  # the diff names the figure
    assert "\n+- npu2 = XDNA2 (Strix / Strix Halo / Krackan): 4 x 8 cores" in differ[0]
    with pytest.raises(SystemExit, match="unknown figure blocks"):
        figures.blocks("<!-- figures: typed-by-hand -->\n1 TOPS\n<!-- /figures -->")


@pytest.mark.slow
def test_the_docs_figures_are_what_the_script_computes():
    """docs/accuracy.md's table takes a few dozen simulations (scripts/accuracy_table.py)."""
    assert _figures().main(["--check", "docs/accuracy.md"]) == 0


def test_the_accuracy_docs_quick_figures_are_what_the_script_computes():
    assert _figures().main(["--check", "--fast", "docs/accuracy.md"]) == 0
