"""The tanh table of the SiLU / GELU epilogue as the design carries it (issue 31 items 1-3): one copy per target
layout (npu1's 128-bit groups, npu2's 256-bit ones), its two copies worker Buffers with an initial value pinned
to two L1 banks (aie::lut<4>'s rule; mlir-aie issue #3737), counted in the L1 plan, the tuner's space and the
IRON lowering, read by the simulated kernel from its L1 buffers; and the kernel's static data, which the plan
counts from the render (none: render_kernel refuses any) and the build checks against aiecc's
measured_data_size."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gemm_gen.app.cli import main
from gemm_gen.backends.kernel_source import render as render_mod
from gemm_gen.backends.kernel_source.render import render_kernel, static_data
from gemm_gen.design import build_design, l1_banks
from gemm_gen.design.ir import Design, Worker
from gemm_gen.facts.devices import KERNEL_DATA, NPU1, NPU2, device
from gemm_gen.facts.epilogue import tanh_table
from gemm_gen.facts.errors import ConfigError, LayoutError
from gemm_gen.search import space
from gemm_gen.sim import simulate
from gemm_gen.spec.config import GemmConfig
from gemm_gen.spec.request import Pins, Problem
from gemm_gen.spec.rules.l1 import TANH_PARTS, TANH_TABLE_BYTES

from .. import iron_recorder
from ..backends.test_iron import lowered


def config(dev: str, activation: str, m: int = 32, k: int = 32, n: int = 32, **kw: object) -> GemmConfig:
    return GemmConfig(dev, 256, 192, 256, dtype_in="bf16", dtype_out="bf16", m=m, k=k, n=n, k_mt=2 * k, bias=True,
                      activation=activation, **kw)


def _plan_json(capsys, dev: str, activation: str) -> dict:
    assert main(["plan", "--dev", dev, "-M", "512", "-K", "512", "-N", "512", "-m", "64", "-k", "64", "-n", "64",
                 "--bias", "--activation", activation, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_plan_counts_the_table_a_silu_build_reserves_1_kib_more(capsys, dev: str) -> None:
    """Issue 31's check: `plan --json` for a SiLU build with pinned tiles reserves at least 1 KiB more than the
    same ReLU build, the table's two copies, each in a bank of its own."""
    relu, silu = (_plan_json(capsys, dev, a) for a in ("relu", "silu"))
    assert silu["l1_bytes"]["total"] - relu["l1_bytes"]["total"] >= 1024
    assert {k: silu["l1_bytes"][k] for k in TANH_PARTS} == {k: TANH_TABLE_BYTES for k in TANH_PARTS}
    banks = [[i for i, names in enumerate(silu["l1_plan"]["bank_map"]) if part in names] for part in TANH_PARTS]
    assert all(len(b) == 1 for b in banks) and banks[0] != banks[1]
    assert not any(part in names for names in relu["l1_plan"]["bank_map"] for part in TANH_PARTS)


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_the_tight_tilings_are_refused(dev: str) -> None:
    """m 32, k 96, n 96 with a bias and GELU passed every check with 512 B to spare while the table went
    uncounted; counted, it no longer fits (the same tiling with ReLU, which reads no table, still does)."""
    with pytest.raises(ConfigError, match=r"L1 overflow: .*tanh ab 512 \+ tanh cd 512"):
        build_design(config(dev, "gelu", 32, 96, 96))
    assert config(dev, "relu", 32, 96, 96).l1_bytes <= device(dev).l1_bytes


def test_the_tuners_space_counts_the_table() -> None:
    """The tuner's candidates (space.tilings, L1's largest k per m, n) leave the table room: every GELU candidate
    fits with it, and the largest k of a GELU build is never above ReLU's."""
    problem = Problem(512, 512, 512)
    for dev in ("npu1", "npu2"):
        got = {}
        for act in ("relu", "gelu"):
            base = config(dev, act)
            cands = space.tilings(base, problem, Pins())
            got[act] = {(int(m), int(n)): int(k) for m, k, n in zip(cands.m, cands.k, cands.n)}
            for m, k, n, rho in zip(cands.m, cands.k, cands.n, cands.rho):
                assert base.with_(m=int(m), k=int(k), n=int(n), rho=int(rho)).l1_bytes <= device(dev).l1_bytes
        assert all(got["gelu"].get(mn, 0) <= k for mn, k in got["relu"].items())
        assert any(got["gelu"].get(mn, 0) < k for mn, k in got["relu"].items())


def test_the_copies_are_pinned_to_two_banks_bank_aware_only() -> None:
    """Unpinned, basic-sequential allocation puts the two copies side by side (the second across a bank
    boundary, sharing bank 0 with the first: mlir-aie issue #3737's failure); the plan pins them (mem_bank) to
    two banks, which only the bank-aware allocator honours: basic-sequential is refused in one line."""
    c = config("npu2", "silu")
    buffers = l1_banks.core_buffers(c)
    loose = l1_banks.basic_sequential(c.dev, buffers, c.array.stack_bytes)
    assert loose is not None and not l1_banks.tables_apart(loose, c.dev.l1_bytes // 4)
    plan = l1_banks.plan(c)
    assert plan.scheme == "bank-aware" and l1_banks.tables_apart(list(plan.placed), plan.bank_bytes)
    assert len({plan.mem_bank(p) for p in TANH_PARTS}) == 2
    with pytest.raises(ConfigError, match="basic-sequential allocation drops bank pins"):
        l1_banks.plan(c, "basic-sequential")
    with pytest.raises(ConfigError, match="basic-sequential"):
        build_design(config("npu2", "silu", l1_alloc="basic-sequential"))


def test_a_reservation_steered_plan_pins_the_copies_where_its_layout_puts_them() -> None:
    """When reserved bytes steer the allocator (l1_banks._targets), the layout keeps the two copies in different
    groups, so different banks, and each copy is pinned to the bank the layout gives it."""
    c = config("npu1", "gelu", 32, 32, 32)
    plan = l1_banks.plan(c)
    assert plan.reserved and plan.conflict_bytes == 0 and l1_banks.tables_apart(list(plan.placed), plan.bank_bytes)
    for p in plan.placed:
        if p.buffer.role == "table":
            assert p.buffer.mem_bank == p.address // plan.bank_bytes
    assert simulate(build_design(c), seed=2).passed


@pytest.mark.parametrize("dev,act", [("npu1", "gelu"), ("npu2", "silu"), ("npu2", "runtime")])
def test_the_lowering_gives_each_core_its_table(dev: str, act: str) -> None:
    """Each core's two copies are IRON Buffers on its tile with the target's table as initial value (npu2's is
    not npu1's) and the plan's two banks, passed to convert after C, C_acc and the epilogue tile."""
    c = config(dev, act)
    d, rec, text = lowered(c)
    bufs = {b.name: b for b in rec.buffers}
    for w in d.workers:
        tables = [b for b in w.buffers if b.initial_value is not None]
        assert len(tables) == 2
        for t in tables:
            got = bufs[t.name]
            assert np.array_equal(np.asarray(got.initial_value), tanh_table(c.dev.lut_copy_bits))
            assert (got.tile.col, got.tile.row) == (w.tile.col, w.tile.row) and got.mem_bank == t.mem_bank
        assert tables[0].mem_bank != tables[1].mem_bank
        assert f"buffer {tables[0].name} ((128,), 'float32') at" in text and "initial=128" in text
    other = NPU1 if c.dev is NPU2 else NPU2
    assert not np.array_equal(tanh_table(c.dev.lut_copy_bits), tanh_table(other.lut_copy_bits))
    convert = next(k for k in rec.kernels if "convert" in k.name)
    shapes = [iron_recorder.shape_dtype(t)[0] for t in convert.arg_types]
    assert shapes[3:5] == [(128,), (128,)] and shapes[5:] == ([()] if act == "runtime" else [])  # then the mode


def _with_tables(d: Design, change) -> Design:
    """The design with every table Buffer changed by `change` (LocalBuffer -> LocalBuffer)."""
    def worker(w: Worker) -> Worker:
        return replace(w, buffers=tuple(change(b) if b.initial_value is not None else b for b in w.buffers))
    return replace(d, workers=tuple(worker(w) for w in d.workers))


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_the_simulated_kernel_reads_its_table_from_l1(dev: str) -> None:
    """The simulation reads the table the array's configuration wrote, in the target's layout: it passes, and
    fails on the other target's layout (npu1's on npu2 is the defect issue 31 item 1 fixes) or a table with no
    initial value."""
    d = build_design(config(dev, "silu"))
    assert simulate(d, seed=3).passed
    other = 384 - d.config.dev.lut_copy_bits
    wrong = _with_tables(d, lambda b: replace(b, initial_value=tuple(float(v) for v in tanh_table(other))))
    with pytest.raises(LayoutError, match="not in .*lookup layout"):
        simulate(wrong, seed=3)
    with pytest.raises(LayoutError, match="configuration did not write"):
        simulate(_with_tables(d, lambda b: replace(b, initial_value=None)), seed=3)


# ---- the kernel's static data -----------------------------------------------------------------------------
OLD_TABLES = ("alignas(64) static const float TANH_LUT_AB[128] = {\n    0.0f, -1.0f,\n};\n"
              "alignas(64) static const float TANH_LUT_CD[128] = {\n    0.0f, -1.0f,\n};\n")


def test_static_data_is_read_from_the_source() -> None:
    """The two static tables the epilogue kept before issue 31 are 1 KiB of static data; functions,
    static_assert, constexpr constants and automatic arrays are none."""
    assert static_data(OLD_TABLES) == (("TANH_LUT_AB", 512), ("TANH_LUT_CD", 512))
    none = ("static GG_INLINE aie::vector<bfloat16, CHUNK> f(const aie::vector<bfloat16, CHUNK> &x) {\n"
            "  static_assert(CHUNK == 16, \"x\");\n  aie::vector<int32, CHUNK> y[CHUNKS];\n}\n"
            "constexpr int TANH_CENTRE = 256;\nstatic inline void g() {}\n// static float commented[8] = {};\n")
    assert static_data(none) == ()
    with pytest.raises(ValueError, match="cannot be read"):
        static_data("static const float T[N] = {};\n")


def test_a_kernel_with_static_data_does_not_render(tmp_path: Path, monkeypatch) -> None:
    """A template that keeps the table static again renders nothing: the L1 plan counts no static data for
    the kernel, so such data would sit in L1 uncounted."""
    src = Path(render_mod.templates_dir())
    for f in src.iterdir():
        (tmp_path / f.name).write_text(f.read_text())
    epi = tmp_path / "mm_epilogue.cc.j2"
    epi.write_text(epi.read_text().replace("struct TanhTable {", OLD_TABLES + "struct TanhTable {"))
    monkeypatch.setattr(render_mod, "templates_dir", lambda: tmp_path)
    render_mod._environment.cache_clear()
    try:
        build = build_design(config("npu1", "gelu")).kernels[0].build
        with pytest.raises(ConfigError, match="defines 1024 B of static data .TANH_LUT_AB 512 B"):
            render_kernel(build)
    finally:
        render_mod._environment.cache_clear()


def test_kernel_data_is_what_the_plan_reserves() -> None:
    """The one figure the L1 plan, the tuner and the allocator model read (facts/devices.py `kernel data`)."""
    c = config("npu2", "silu")
    assert c.l1_parts[KERNEL_DATA] == c.dev.core_static_bytes
