"""Build and run on a real NPU (`pytest -m hardware` on a Ryzen AI laptop with the toolchain).

Skipped here, with the reason, when mlir-aie, Peano, XRT or the NPU is missing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gemm_gen.backends import doctor, toolchain
from gemm_gen.backends.compile import run_build
from gemm_gen.backends.iron import iron_api
from gemm_gen.backends.runner import run_design
from gemm_gen.design import build_design
from gemm_gen.facts.errors import ToolchainMissing
from gemm_gen.spec.config import GemmConfig

pytestmark = pytest.mark.hardware


def _require_npu(dev: str) -> None:
    try:
        toolchain.find_toolchain(chess=False, strict=True)
        iron_api()  # also checks the installed IRON against the pinned release
        toolchain.pyxrt()
    except ToolchainMissing as e:
        pytest.skip(f"needs the NPU toolchain: {e}")
    if not any(Path("/dev/accel").glob("accel*")):
        pytest.skip("needs an NPU: no /dev/accel/accel* device")
    name = doctor.device_name()
    if name is None or doctor.npu_family(name) != dev:
        pytest.skip(f"needs an {dev}: this machine's NPU is {name or 'not visible to XRT'}")


@pytest.mark.parametrize("dev,args", [
    ("npu1", dict(M=512, K=512, N=512, m=64, k=64, n=32, k_mt=128, dtype_in="i8", dtype_out="i16")),
    ("npu1", dict(M=512, K=512, N=256, m=32, k=64, n=32, k_mt=128, dtype_in="i16", dtype_out="i32", cols=2)),
    ("npu2", dict(M=512, K=512, N=512, m=32, k=64, n=32, k_mt=128, dtype_in="bf16", dtype_out="bf16",
                  b_col_maj=True)),
    ("npu2", dict(M=512, K=512, N=256, m=64, k=64, n=64, k_mt=128, dtype_in="i8", dtype_out="i32", cols=2)),
])
def test_build_and_run_on_the_npu(tmp_path, dev, args):
    _require_npu(dev)
    config = GemmConfig(dev, **args)
    design = build_design(config)
    art = run_build(design, tmp_path / "build", gen_args=[])
    result = run_design(config, art, iters=5, warmup=1)
    print("\n".join(result.lines()))
    assert result.passed
