"""The Design carries its facts (issue 32 item 4, docs/structure.md): the build stores the kernel record, the
grids, the L1 plan, the runtime sequence's traffic and task groups, and its readers read them there.

Two guards that can fail: (1) the readers (the simulator, the keys, the renderer, the model's pricing and
predict) do not import or call the config-level builders that would recompute a fact the Design holds
(kernel_build, grid, the task grouping, the config's pricing), checked with `ast` and shown to catch a
synthetic reader that does; (2) `predict` prices one design once per question: the vectorised model runs once
for each set of constants and each what-if epilogue, never twice for the same one."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest

from gemm_gen.design import build_design
from gemm_gen.design.build import group_blocks, kernel_build, runtime_sequence
from gemm_gen.design.grid import grid
from gemm_gen.model import perf
from gemm_gen.model.params import load, load_ends
from gemm_gen.model.predict import predict
from gemm_gen.model.price import estimate
from gemm_gen.model.traffic import design_traffic
from gemm_gen.spec.config import GemmConfig

PACKAGE = Path(__file__).parents[2] / "gemm_gen"
# the readers of a Design, and what each must not rebuild from the config (the Design holds it)
READERS = (*sorted(str(p.relative_to(PACKAGE)) for p in (PACKAGE / "sim").glob("*.py")),
           "design/keys.py", "backends/kernel_source/render.py", "model/predict.py", "model/price.py")
# config-level builders of a fact the Design stores: the kernel record, the grids (and the host helpers that
# make a grid of the config), the task grouping and a call's sequence, the config's pricing
REBUILDERS = frozenset({"kernel_build", "kernel_specs", "grid", "group_blocks", "group_tasks", "task_span",
                        "runtime_sequence", "host_tensors", "estimate_config", "b_unit", "b_unit_coords",
                        "kernel_order", "tasks_per_group", "task_groups", "design_epilogue"})


def rebuilt(source: str) -> list[str]:
    """The names of REBUILDERS a module's source imports or calls (by name or as an attribute), with their
    lines."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name in REBUILDERS]
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            # a Design's own grid(operand, call) is its stored grid: only a config's grid(c, ...) rebuilds one
            if name in REBUILDERS and not (name == "grid" and isinstance(f, ast.Attribute)):
                found.append(f"{node.lineno}: call {name}")
    return found


@pytest.mark.parametrize("reader", READERS)
def test_the_readers_read_the_design(reader):
    assert rebuilt((PACKAGE / reader).read_text()) == [], f"gemm_gen/{reader} rebuilds what the Design holds"


def test_a_reader_that_rebuilds_is_caught():
    src = ("from ..design.build import kernel_build\n"
           "def f(design, c):\n    b = kernel_build(c)\n    y = design.grid('A')\n"
           "    return perf.estimate_config(c), b, y\n")
    assert rebuilt(src) == ["1: import kernel_build", "3: call kernel_build", "5: call estimate_config"]
    # a Design's grid(operand) is an attribute call; a bare grid(c, ...) is the config's
    assert rebuilt("from ..design.grid import grid\nx = grid(c, 'A')\n") == ["1: import grid", "2: call grid"]


@pytest.fixture(scope="module")
def runtime_relu():
    """A design with a runtime activation: predict prices it under three sets of constants and once per
    activation as a build of that activation alone."""
    return GemmConfig("npu2", 512, 512, 512, 64, 64, 64, 128, "bf16", "bf16", False, bias=True, activation="runtime")


def _counting(monkeypatch):
    calls: list[tuple[int, int, str]] = []
    real = perf.estimate

    def counted(pr, *args, **kwargs):
        params = args[4] if len(args) > 4 else kwargs.get("params")
        calls.append((id(params), id(pr.base), repr(pr.epi)))
        return real(pr, *args, **kwargs)

    monkeypatch.setattr(perf, "estimate", counted)
    return calls


def test_predict_prices_a_design_once_per_question(monkeypatch, runtime_relu):
    p, ends = load(), load_ends()
    calls = _counting(monkeypatch)
    got = predict(runtime_relu, p, ends)
    modes = got.epilogue.specialised if got.epilogue is not None else ()
    assert len(modes) >= 2, "a runtime activation serves several modes"
    # the calibrated constants, the two ends of their spreads, and each mode as a build of its own: each once
    assert len(calls) == 3 + len(modes), calls
    assert len(set(calls)) == len(calls), "one question priced twice"


def test_a_plain_design_is_priced_three_times(monkeypatch):
    c = GemmConfig("npu1", 512, 512, 512, 64, 64, 64, 128, "bf16", "bf16", False)
    calls = _counting(monkeypatch)
    predict(c, load(), load_ends())
    assert len(calls) == 3 and len(set(calls)) == 3, calls


@pytest.mark.parametrize("flags", [{}, {"task_span": 0}, {"dtype_in": "i8", "dtype_out": "i8"}])
def test_the_design_holds_what_its_build_computed(flags):
    dtypes = {k: flags.pop(k) for k in ("dtype_in", "dtype_out") if k in flags}
    c = GemmConfig("npu2", 1024, 512, 1024, 64, 64, 64, 128, dtypes.get("dtype_in", "bf16"),
                   dtypes.get("dtype_out", "bf16"), False, **flags)
    d = build_design(c)
    c = d.config
    assert d.build == kernel_build(c) and all(k.build == d.build for k in d.kernels)
    assert d.grids == tuple(grid(c, op) for op in ("A", "B", "C"))
    assert d.task_groups == len(group_blocks(c, c.call)) == len({t.group for t in d.tasks})
    assert d.tasks_per_group == sum(1 for t in d.tasks if t.group == 0)
    assert d.runtime == runtime_sequence(c, c.call)
    traffic = design_traffic(d)
    assert sorted(traffic) == ["A", "B", "C"] and all(float(t.bytes) > 0 for t in traffic.values())


def test_estimate_reads_the_design_not_the_config(monkeypatch):
    """estimate(design) prices what the Design holds: a Design whose stored task groups say otherwise is
    priced with them (the config is not asked again)."""
    d = build_design(GemmConfig("npu1", 512, 512, 512, 64, 64, 64, 128, "bf16", "bf16", False, queue_groups=1))
    more = replace(d, task_groups=d.task_groups * 2)
    assert float(estimate(more).time) > float(estimate(d).time)
