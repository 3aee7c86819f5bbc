"""gemm-gen doctor: each pinned tool, what is installed, whether it matches, and how to get it.

Also `environment()`, the toolchain, driver and device as this machine reports them, which
`make validate` stores next to every measurement.
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from typing import Any

from ..facts.errors import ToolchainMissing, spelled
from . import iron, pins, toolchain

# XRT device names per family (mlir-aie's hostruntime NPU_MODELS, matched as substrings)
NPU_MODELS = {"npu1": ("npu1", "Phoenix"), "npu2": ("npu4", "Strix", "npu5", "Strix Halo", "npu6", "Krackan",
                                                     "Gorgon Point")}


@dataclass(frozen=True)
class Check:
    tool: str
    pinned: str
    installed: str | None  # None: not found
    ok: bool
    required: bool
    detail: str
    install: str

    @property
    def status(self) -> str:
        if self.ok:
            return "ok"
        if self.installed is None:
            return "MISSING" if self.required else "absent (optional)"
        return "MISMATCH" if self.required else "differs (optional)"


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _which(name: str) -> str | None:
    return shutil.which(name)


def _tool(finder: Any) -> str | None:
    try:
        return str(finder())
    except ToolchainMissing:
        return None


def xrt_smi() -> dict[str, str]:
    """XRT version, amdxdna driver, firmware and NPU names from `xrt-smi examine` ({} without it)."""
    exe = _which("xrt-smi")
    if not exe:
        return {}
    try:
        out = subprocess.run([exe, "examine"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return parse_xrt_smi(out)


def parse_xrt_smi(text: str) -> dict[str, str]:
    info: dict[str, str] = {}
    for key, pattern in (("xrt", r"^\s*Version\s*:\s*(\S+)"), ("amdxdna", r"amdxdna(?: Version)?\s*:\s*([^,\s]+)"),
                         ("firmware", r"NPU Firmware Version\s*:\s*(\S+)")):
        m = re.search(pattern, text, re.MULTILINE)
        if m:
            info[key] = m.group(1)
    names = re.findall(r"\|\s*\[[0-9a-fA-F:.]+\]\s*\|\s*([^|]+?)\s*\|", text)
    if names:
        info["devices"] = ", ".join(names)
    return info


def npu_family(name: str) -> str | None:
    """npu1 or npu2 for an XRT device name, as mlir-aie's host runtime tells them apart."""
    for family, keys in sorted(NPU_MODELS.items(), key=lambda kv: kv[0] == "npu1"):  # npu2's names first
        if any(k in name for k in keys):
            return family
    return None


def device_name() -> str | None:
    """The first NPU's name as pyxrt reports it (None without pyxrt or a device)."""
    try:
        xrt = toolchain.pyxrt()
        return str(xrt.device(0).get_info(xrt.xrt_info_device.name))
    except Exception:  # noqa: BLE001 - no XRT, no device: the doctor reports it
        return None


def _version_at_least(version: str, minimum: str) -> bool:
    def parts(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", v)[:3])

    return parts(version) >= parts(minimum)


def checks() -> list[Check]:
    out: list[Check] = []
    mlir = _dist_version("mlir_aie")
    detail = ""
    ok = mlir is not None and mlir.split("+")[0] == pins.MLIR_AIE_RELEASE
    if mlir is not None:
        try:
            iron.iron_api()
            detail = "IRON signatures match the pinned release"
        except ToolchainMissing as e:
            ok, detail = False, str(e).split(";")[0]
    out.append(Check(pins.MLIR_AIE.tool, f"{pins.MLIR_AIE_RELEASE} ({pins.MLIR_AIE_COMMIT[:8]})", mlir, ok, True,
                     detail, pins.MLIR_AIE.install))
    aiecc = _tool(toolchain.aiecc)
    out.append(Check("aiecc (mlir-aie's driver)", f"from mlir-aie {pins.MLIR_AIE_RELEASE}", aiecc, aiecc is not None,
                     True, "found" if aiecc else "not in mlir-aie's bin directory nor on PATH", pins.MLIR_AIE.install))
    peano = _dist_version("llvm-aie")
    try:
        where, found = f"clang++ in {toolchain.peano_dir()}/bin", True
    except ToolchainMissing:
        where, found = "no bin/clang++ under PEANO_INSTALL_DIR or the llvm-aie wheel", False
    out.append(Check(pins.PEANO.tool, pins.PEANO_VERSION, peano, peano == pins.PEANO_VERSION and found, True, where,
                     pins.PEANO.install))
    smi = xrt_smi()
    try:
        toolchain.pyxrt()
        has_pyxrt = True
    except ToolchainMissing:
        has_pyxrt = False
    xrt = smi.get("xrt")
    xrt_ok = xrt is not None and _version_at_least(xrt, pins.XRT_MIN_VERSION) and has_pyxrt
    out.append(Check(pins.XRT.tool, pins.XRT.version, xrt, xrt_ok, True,
                     f"amdxdna {smi.get('amdxdna', '?')}, firmware {smi.get('firmware', '?')}; pyxrt "
                     f"{'imports' if has_pyxrt else 'does not import'}" if xrt else "xrt-smi is not on PATH",
                     pins.XRT.install))
    clbin = _which("xclbinutil")
    out.append(Check("xclbinutil (XRT, used by aiecc)", "from XRT", clbin, clbin is not None, True,
                     "on PATH" if clbin else "not on PATH", "source /opt/xilinx/xrt/setup.sh"))
    name = device_name() if has_pyxrt else None
    family = npu_family(name) if name else None
    out.append(Check("NPU", "npu1 (Phoenix/Hawk Point) or npu2 (Strix/Krackan)", name, family is not None, True,
                     f"a {family} device" if family else "no NPU visible to XRT", pins.XRT.install))
    chess = _tool(toolchain.xchesscc)
    out.append(Check(spelled(pins.CHESS.tool), pins.CHESS.version, chess, chess is not None, False,
                     "xchesscc_wrapper and xchesscc found" if chess else "xchesscc_wrapper or xchesscc not found",
                     pins.CHESS.install))
    return out


def environment() -> dict[str, Any]:
    """Toolchain, driver and device as this machine reports them (for measurement records)."""
    smi = xrt_smi()
    name = device_name()
    return {"mlir_aie": _dist_version("mlir_aie"), "llvm_aie": _dist_version("llvm-aie"), "xrt": smi.get("xrt"),
            "amdxdna": smi.get("amdxdna"), "firmware": smi.get("firmware"), "device": name,
            "family": npu_family(name) if name else None, "pinned": {"mlir_aie": pins.MLIR_AIE_RELEASE,
                                                                      "llvm_aie": pins.PEANO_VERSION}}


def report(found: list[Check]) -> str:
    lines = [f"gemm-gen doctor: the NPU toolchain gemm_gen supports is mlir-aie {pins.MLIR_AIE_RELEASE} "
             f"(tag v{pins.MLIR_AIE_RELEASE}, {pins.MLIR_AIE_COMMIT[:8]}), Peano {pins.PEANO_VERSION}, "
             f"XRT {pins.XRT.version}"]
    width = max(len(c.status) for c in found)
    for c in found:
        lines.append(f"  {c.status:<{width}}  {c.tool}: pinned {c.pinned}, installed {c.installed or '-'}"
                     + (f" ({c.detail})" if c.detail else ""))
        if not c.ok:
            lines.append(f"  {'':<{width}}  -> {c.install}")
    missing = [c.tool for c in found if c.required and not c.ok]
    lines.append("everything is in place" if not missing else f"not ready: {', '.join(missing)}")
    return "\n".join(lines)


def to_json(found: list[Check]) -> dict[str, Any]:
    return {"ready": all(c.ok for c in found if c.required),
            "checks": [{**asdict(c), "status": c.status} for c in found]}
