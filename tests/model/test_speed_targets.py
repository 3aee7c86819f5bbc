"""docs/speed.md is scripts/speed_targets.py's output (issue 20 item 5): regenerated from the tuner and
the model, never stale; its records come from their sources and its limits name the larger side."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gemm_gen.model.fit import paper
from gemm_gen.model.params import load
from gemm_gen.model.predict import predict
from gemm_gen.spec.config import GemmConfig

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "speed_targets.py"


def _script():
    spec = importlib.util.spec_from_file_location("speed_targets", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["speed_targets"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_docs_speed_md_is_up_to_date():
    result = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_records_are_their_sources_best():
    st = _script()
    facts = json.loads((ROOT / "tests" / "data" / "mlir_aie_atb_peano.json").read_text())
    by_name = {t.name: t for t in st.targets()}
    for preset in ("config1", "config2", "config3"):
        t = by_name[f"ATB {preset.replace('config', 'config ')}"]
        published = [float(v) for run in ("chess_pr3076", "peano_pr3650")
                     for v in facts["numbers"][run][preset].values()]
        assert t.record.value == max(published) and len(t.records) == len(published)
        shape = facts["configs"][preset]["shape"]
        assert (t.size.M, t.size.K, t.size.N) == (shape["M"], shape["K"], shape["N"])
    bf16 = by_name["npu2 bf16 4096^3"]
    assert paper.SWEEP_MAX_TOPS[("npu2", "bf16", "bf16")] in [r.value for r in bf16.records]
    size, seconds = st.IRON_FLM
    assert bf16.record.value == pytest.approx(2 * size.M * size.K * size.N / seconds / 1e12)
    assert by_name["npu2 i8 4096^3"].record.value == paper.SWEEP_MAX_TOPS[("npu2", "i8", "i8")]


def test_the_limit_is_the_larger_side_of_the_models_time():
    """A design with DRAM made slow is limited by DRAM; with DRAM and the streams made fast, by the kernel."""
    st = _script()
    c = GemmConfig("npu2", 2048, 2048, 2048, 64, 64, 64, 512, "i8", "i16")
    p = load()
    slow = predict(c, p.with_dram("npu2", peak_gbps=5.0))
    assert slow.bound == "memory" and st.limit(slow).startswith("DRAM")
    fast = predict(c, p.with_dram("npu2", peak_gbps=1000.0, stream_gbps_256=1000.0).with_(stream_bytes_per_cycle=1024))
    assert fast.bound == "compute" and st.limit(fast).startswith("kernel")


def test_each_row_is_the_tuners_design_for_its_numerics():
    """The page's designs are search.choose's for each target's options (the papers' numerics differ
    from the default only in C's accumulator)."""
    st = _script()
    t = next(t for t in st.targets() if t.name == "npu2 i8 4096^3")
    p = load()
    acc, pap = (st.outcome(t, n, p, (p, p)) for n in (t.accurate, t.papers))
    paper = pap.chosen.config.types
    assert acc.chosen.config.types.acc == "i32" and paper.acc == paper.dtype_out == "i8"
    text = st.DOC.read_text()  # what --check holds equal to render()
    assert f"| {acc.tops:.2f} | " in text and f"| {pap.tops:.2f} | " in text
