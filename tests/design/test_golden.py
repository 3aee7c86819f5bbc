"""Our Design against golden facts: MLIR that mlir-aie itself generated for whole-array GEMMs (tests/golden/).

Each golden file is rebuilt as a GemmConfig with the same parameters and mlir-aie's choices where they are
options (C depths, stack, emulation, rho); then the FACTS must agree, where equal address sequences count as
equal: fifos (tiles, depths, object sizes), link offsets, the composed memtile -> core layouts (mlir-aie
reorders on the memtile, we split the reordering between memtile and core), the C path, the DRAM element
sequence of every shim fifo (whatever the BD granularity), what the runtime synchronises on, and the core
loops. Differences that are choices, not options, are listed in tests/golden/README.md.
"""

from __future__ import annotations

import numpy as np
import pytest

from gemm_gen.design.ir import Acquire, Call, Loop, TileRef
from gemm_gen.spec.checks import check_config

from ..golden_facts import (
    config_for,
    design_c_stream,
    design_for,
    design_l1_layout,
    design_link_of,
    design_memtile_s2mm,
    design_shim_streams,
    fifo_elems,
    fifo_parts,
    golden_c_stream,
    golden_files,
    golden_l1_layout,
    golden_link_offsets,
    golden_memtile_s2mm,
    golden_shim_streams,
    golden_waited_fifos,
    load,
    parts_of,
)

FILES = golden_files()
WITH_RUNTIME = [f for f in FILES if load(f)["runtime"] is not None]
WITH_CORES = [f for f in FILES if not load(f)["cores"].get("stripped")]
MLIR_TYPES = {"i8": "i8", "i16": "i16", "i32": "i32", "bf16": "bf16", "f32": "f32",
              "bfp16": '!aiex.bfp<"v8bfp16ebs8">'}
ATB = "idx_npu2_8col_atb_config1_bf16_bfp16_1024x3072x1024_128x64x128.json"


def _placed(g: dict) -> bool:
    return isinstance(g["fifos"][0]["producer"], list)


def _tile(t: TileRef) -> list[int]:
    return [t.col, t.row]


def test_every_golden_file_is_expressible():
    assert len(FILES) == 11
    for name in FILES:
        check_config(config_for(load(name)))


# ---- a. fifos and links ------------------------------------------------------------------------
@pytest.mark.parametrize("name", FILES)
def test_fifos(name: str):
    g, d = load(name), design_for(name)
    assert {f["name"] for f in g["fifos"]} == {f.name for f in d.fifos}
    tiles: dict[str, TileRef] = {}  # unplaced lit tests: golden logical tile -> our tile, must be a function
    kinds = {"logical_shim_noc": "shim", "logical_mem": "mem", "logical_core": "core"}
    for gf in g["fifos"]:
        f = d.fifo(gf["name"])
        assert gf["depth"] == f.depth, gf["name"]
        assert gf["elem"] == [fifo_elems(f), f.dtype], gf["name"]
        ends = [(gf["producer"], f.producer)] + list(zip(gf["consumers"], f.consumers, strict=True))
        for golden_tile, ours in ends:
            if _placed(g):
                assert golden_tile == _tile(ours), gf["name"]
            else:
                assert tiles.setdefault(golden_tile, ours) == ours, (gf["name"], golden_tile)
                kind = kinds[golden_tile.rstrip("_0123456789")]
                assert ours.kind.value == kind, (gf["name"], golden_tile, ours)


@pytest.mark.parametrize("name", FILES)
def test_links(name: str):
    g, d = load(name), design_for(name)
    assert len(g["links"]) == len(d.links)
    for gl in g["links"]:
        link = design_link_of(d, gl["srcs"][0])
        assert (list(link.srcs), list(link.dsts)) == (gl["srcs"], gl["dsts"])
        parts = fifo_parts(d.fifo(gl["srcs"][0]))
        assert golden_link_offsets(gl) == tuple(o * parts for o in link.offsets), gl


# ---- b. memtile -> core layouts, memtile S2MM, the C path --------------------------------------
def _l2l1(g: dict) -> list[str]:
    return [f["name"] for f in g["fifos"] if "_L2L1_" in f["name"]]


@pytest.mark.parametrize("name", FILES)
def test_l1_layouts(name: str):
    """L1 element -> memtile object element for every L1 object, and -> position on the L3L2 stream."""
    g, d = load(name), design_for(name)
    for fifo in _l2l1(g):
        mem_g, pos_g = golden_l1_layout(g, fifo)
        mem_d, pos_d = design_l1_layout(d, fifo)
        assert mem_g.shape == mem_d.shape, fifo
        np.testing.assert_array_equal(pos_d, pos_g, err_msg=f"{fifo}: L1 element -> L3L2 stream position")
        np.testing.assert_array_equal(mem_d, mem_g, err_msg=f"{fifo}: L1 element -> memtile element")


@pytest.mark.parametrize("name", FILES)
def test_memtile_s2mm(name: str):
    """Where the memtile S2MM reorders (ATB's A), the memtile layout is the same."""
    g, d = load(name), design_for(name)
    for gf in g["fifos"]:
        if "_L3L2_" in gf["name"]:
            np.testing.assert_array_equal(design_memtile_s2mm(d, gf["name"]), golden_memtile_s2mm(g, gf["name"]),
                                          err_msg=gf["name"])


@pytest.mark.parametrize("name", FILES)
def test_c_path(name: str):
    """Which core's L1 element is at which position of the joined C stream to the shim."""
    g, d = load(name), design_for(name)
    for gf in g["fifos"]:
        if gf["name"].startswith("C_L2L3_"):
            np.testing.assert_array_equal(design_c_stream(d, gf["name"]), golden_c_stream(g, gf["name"]),
                                          err_msg=gf["name"])


# ---- c. the runtime: DRAM elements per shim fifo, in issue order -------------------------------
def _runtime_params() -> list:
    out = []
    for name in WITH_RUNTIME:
        for op in "ABC":
            out.append(pytest.param(name, op, id=f"{name.removesuffix('.json')}-{op}"))
    return out


@pytest.mark.parametrize(("name", "operand"), _runtime_params())
def test_runtime_sequences(name: str, operand: str):
    g, d = load(name), design_for(name)
    golden, ours = golden_shim_streams(g), design_shim_streams(d)
    fifos = sorted(f for f in golden if f.startswith(operand))
    assert fifos and fifos == sorted(f for f in ours if f.startswith(operand))
    for fifo in fifos:
        assert golden[fifo].shape == ours[fifo].shape, fifo
        np.testing.assert_array_equal(ours[fifo], golden[fifo], err_msg=fifo)


@pytest.mark.parametrize("name", WITH_RUNTIME)
def test_runtime_args(name: str):
    """The host buffers (size and element type, in the MLIR's units) and which one each shim fifo uses."""
    g, d = load(name), design_for(name)
    rt = g["runtime"]
    ours = []
    for t in d.tensors:
        count = t.shape[0] * t.shape[1] * parts_of(t.dtype)
        ours.append(f"{count}x{MLIR_TYPES[t.dtype]}")
    assert rt["args"] == ours
    arg_of = {t[0]: t[1] for t in rt["transfers"]}
    assert len(arg_of) == len({(t[0], t[1]) for t in rt["transfers"]})  # one buffer per fifo
    names = [t.name for t in d.tensors]
    assert arg_of == {task.fifo: names.index(task.tensor) for task in d.tasks}


@pytest.mark.parametrize("name", WITH_RUNTIME)
def test_runtime_sync(name: str):
    """Both sequences synchronise on C only; with task awaits, every C task is awaited and every
    other task freed (IRON's finish_task_group does both)."""
    g, d = load(name), design_for(name)
    c_fifos = {f.name for f in d.fifos if f.name.startswith("C_L2L3_")}
    assert golden_waited_fifos(g) == c_fifos
    assert {t.fifo for t in d.tasks if t.wait} == c_fifos
    rt = g["runtime"]
    awaited = {int(tok.split()[1]) for tok in rt["order"] if tok.startswith("await")}
    freed = {int(tok.split()[1]) for tok in rt["order"] if tok.startswith("free")}
    if awaited:
        c_transfers = {i for i, t in enumerate(rt["transfers"]) if t[0] in c_fifos}
        assert awaited == c_transfers
        assert freed == set(range(len(rt["transfers"]))) - c_transfers
    groups = {op.group for op in d.runtime if op.op == "task"}
    assert groups == {op.group for op in d.runtime if op.op == "finish"}


# ---- d. cores --------------------------------------------------------------------------------
def _flat(ops: tuple) -> list:
    """The ops in textual order (each loop body once)."""
    out: list = []
    for op in ops:
        out += _flat(op.body) if isinstance(op, Loop) else [op]
    return out


def _role(fifo: str) -> str:
    return fifo[0]


@pytest.mark.parametrize("name", WITH_CORES)
def test_cores(name: str):
    g, d = load(name), design_for(name)
    gc = g["cores"]
    first = d.config.dev.first_core_row
    assert sorted(gc["tiles"]) == sorted(_tile(w.tile) for w in d.workers)
    for w in d.workers:
        col, row = w.tile.col, w.tile.row - first
        (tile_loop,) = w.program
        assert isinstance(tile_loop, Loop)
        assert tile_loop.count == gc["tiles_per_core"]
        k_loops = [op for op in tile_loop.body if isinstance(op, Loop)]
        assert [k.count for k in k_loops] == [gc["k_steps"]]
        body = _flat(tile_loop.body)
        acquires = [op.fifo for op in body if isinstance(op, Acquire)]
        names = {r: gc["fifos"][r].format(col=col, row=row) for r in "ABC"}
        assert acquires == [names[r] for r, _ in gc["acquires_per_tile"]]
        produced = [names[r] for r, kind in gc["acquires_per_tile"] if kind == "Produce"]
        assert all(d.fifo(f).producer == w.tile for f in produced)
        calls = [d.kernel(op.kernel).role for op in body if isinstance(op, Call)]
        assert calls == [_golden_call_role(c) for c in gc["calls_per_tile"]]
        if gc["stack_size"] is not None:
            assert w.stack_bytes == gc["stack_size"]


def _golden_call_role(fn: str) -> str:
    for role in ("zero", "matmul"):
        if fn.startswith(role):
            return role
    raise AssertionError(fn)


@pytest.mark.parametrize("name", [f for f in FILES if load(f)["cores"].get("stripped")])
def test_stripped_cores_stack(name: str):
    """The lit tests keep only the cores' stack_size."""
    g, d = load(name), design_for(name)
    assert len(d.workers) == g["cores"]["count"]
    assert {w.stack_bytes for w in d.workers} == {g["cores"]["stack_size"]}
