"""gemm-gen doctor: pins against what is installed; ready only when every required tool matches."""

from __future__ import annotations

import json

import pytest

from gemm_gen.app.cli import main
from gemm_gen.backends import doctor, pins, toolchain
from gemm_gen.facts.errors import ToolchainMissing

from .. import iron_recorder
from ..fake_pyxrt import FakeXrt

XRT_SMI = """
System Configuration
  OS Name              : Linux
XRT
  Version              : 2.21.75
  Branch               : HEAD
  amdxdna Version      : 2.21.75_20260401, 1234abcd
  NPU Firmware Version : 1.1.2.64
Device(s) Present
|BDF             |Name          |
|----------------|--------------|
|[0000:c5:00.1]  |RyzenAI-npu4  |
"""


@pytest.fixture
def bare(monkeypatch):
    """A machine with none of the NPU toolchain, whatever this one has."""

    def missing(*_a, **_k):
        raise ToolchainMissing("not installed", "install it")

    monkeypatch.setattr(doctor, "_dist_version", lambda name: None)
    monkeypatch.setattr(doctor, "_which", lambda name: None)
    for finder in ("pyxrt", "peano_dir", "aiecc", "xchesscc"):
        monkeypatch.setattr(toolchain, finder, missing)


@pytest.fixture
def laptop(monkeypatch, tmp_path):
    """Everything pinned is installed (stand-ins)."""
    versions = {"mlir_aie": pins.MLIR_AIE_RELEASE, "llvm-aie": pins.PEANO_VERSION}
    monkeypatch.setattr(doctor, "_dist_version", versions.get)
    monkeypatch.setattr(doctor, "_which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(doctor, "xrt_smi", lambda: doctor.parse_xrt_smi(XRT_SMI))
    monkeypatch.setattr(toolchain, "pyxrt", lambda: FakeXrt())
    monkeypatch.setattr(toolchain, "peano_dir", lambda: tmp_path)
    monkeypatch.setattr(toolchain, "aiecc", lambda: "/opt/venv/lib/python3.12/site-packages/mlir_aie/bin/aiecc")
    monkeypatch.setattr(toolchain, "xchesscc", lambda: "/opt/aietools/bin/xchesscc_wrapper")
    from gemm_gen.backends import iron

    monkeypatch.setattr(iron, "iron_api", lambda: iron_recorder.api()[0])
    return versions


def test_here_every_missing_tool_is_named_with_its_pin_and_install(bare, capsys):
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    for pin in (pins.MLIR_AIE, pins.PEANO, pins.XRT):
        line = next(x for x in lines if f"{pin.tool}: pinned {pin.version}" in x)
        assert line.split()[0] == "MISSING" and f"-> {pin.install}" in lines[lines.index(line) + 1]
    assert f"mlir_aie=={pins.MLIR_AIE_RELEASE}" in out and pins.PEANO_VERSION in out
    assert "absent (optional)" in out and out.rstrip().splitlines()[-1].startswith("not ready: ")


def test_ready_when_everything_matches(laptop, capsys):
    assert main(["doctor", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["ready"] and all(c["status"] == "ok" for c in info["checks"])
    npu = next(c for c in info["checks"] if c["tool"] == "NPU")
    assert npu["installed"] == "RyzenAI-npu4" and "npu2" in npu["detail"]
    xrt = next(c for c in info["checks"] if c["tool"].startswith("XRT"))
    assert xrt["installed"] == "2.21.75" and "amdxdna 2.21.75_20260401" in xrt["detail"]


def test_another_release_is_a_mismatch(laptop, monkeypatch, capsys):
    laptop["mlir_aie"] = "1.4.2"
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert f"MISMATCH  {pins.MLIR_AIE.tool}: pinned 1.4.3 ({pins.MLIR_AIE_COMMIT[:8]}), installed 1.4.2" in out


def test_an_iron_with_other_signatures_is_a_mismatch(laptop, monkeypatch, capsys):
    from gemm_gen.backends import iron

    def other():
        raise ToolchainMissing("the installed IRON is not mlir-aie 1.4.3's: Worker.__init__ differs", "pip install")

    monkeypatch.setattr(iron, "iron_api", other)
    assert main(["doctor"]) == 1
    assert "MISMATCH" in capsys.readouterr().out


def test_old_xrt_and_unknown_device(laptop, monkeypatch, capsys):
    monkeypatch.setattr(doctor, "xrt_smi", lambda: {"xrt": "2.19.0"})
    monkeypatch.setattr(toolchain, "pyxrt", lambda: FakeXrt(device_name="SomeOtherAccelerator"))
    assert main(["doctor", "--json"]) == 1
    checks = {c["tool"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert checks[pins.XRT.tool]["status"] == "MISMATCH" and checks["NPU"]["status"] == "MISMATCH"


def test_xrt_smi_and_device_names():
    assert doctor.parse_xrt_smi(XRT_SMI) == {"xrt": "2.21.75", "amdxdna": "2.21.75_20260401",
                                             "firmware": "1.1.2.64", "devices": "RyzenAI-npu4"}
    assert doctor.parse_xrt_smi("XRT\n  Version : 2.25.0\n  amdxdna              : 2.25.0_2026, abc\n")["amdxdna"] == (
        "2.25.0_2026")
    assert [doctor.npu_family(n) for n in ("RyzenAI-npu1", "NPU Phoenix", "RyzenAI-npu4", "NPU Strix Halo",
                                           "RyzenAI-npu6", "Krackan", "GPU")] == [
        "npu1", "npu1", "npu2", "npu2", "npu2", "npu2", None]


def test_mlir_aies_tools_are_found_where_the_wheel_keeps_them(tmp_path, monkeypatch):
    """mlir-aie's wheel keeps aiecc in site-packages/mlir_aie/bin, on PATH only after its env_setup.sh:
    look there (as mlir-aie's aiecc_path() does), AIECC_PATH first."""
    root = tmp_path / "mlir_aie"
    (root / "bin").mkdir(parents=True)
    tool = root / "bin" / "aiecc"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("MLIR_AIE_DIR", str(root))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("AIECC_PATH", raising=False)
    assert toolchain.aiecc() == str(tool)
    monkeypatch.setenv("AIECC_PATH", "/elsewhere/aiecc")
    assert toolchain.aiecc() == "/elsewhere/aiecc"
    monkeypatch.delenv("AIECC_PATH")
    tool.unlink()
    with pytest.raises(ToolchainMissing, match="neither in mlir-aie's bin directory nor on PATH"):
        toolchain.aiecc()
