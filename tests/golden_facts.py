"""Pure helpers for tests/design/test_golden.py: turn golden facts (tests/golden/*.json, extracted from MLIR that
mlir-aie generated) and our Design into comparable address sequences.

Everything is in the MLIR's element units: scalar types count elements, bfp16 counts v8bfp16ebs8 blocks
(a Design's bfp16 unit, an 8 x 8 tile, is `blocks_per_unit` = 8 consecutive blocks).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np

from gemm_gen.design.build import build_design
from gemm_gen.design.ir import Design, ObjectFifo
from gemm_gen.design.tap import Tap
from gemm_gen.facts.devices import MLIR_AIE_CORE_DEFAULT_STACK
from gemm_gen.facts.dtypes import dtype
from gemm_gen.spec.config import GemmConfig

GOLDEN_DIR = Path(__file__).parent / "golden"


def golden_files() -> list[str]:
    return sorted(p.name for p in GOLDEN_DIR.glob("*.json"))


@cache
def load(name: str) -> dict:
    return json.loads((GOLDEN_DIR / name).read_text())


# ---- address walks ---------------------------------------------------------------------------
def walk(sizes: list[int] | tuple[int, ...], strides: list[int] | tuple[int, ...], offset: int = 0) -> np.ndarray:
    """Element indices of an (offset, sizes, strides) pattern, outermost dimension first."""
    assert len(sizes) == len(strides)
    idx = np.array([offset], dtype=np.int64)
    for size, stride in zip(sizes, strides):
        idx = (idx[:, None] + np.arange(size, dtype=np.int64) * stride).ravel()
    return idx


def walk_dims(dims: list[list[int]] | None, count: int) -> np.ndarray:
    """An MLIR dims list [[size, stride], ...] (outermost first), or a linear walk of `count` when None."""
    if dims is None:
        return np.arange(count, dtype=np.int64)
    return walk([d[0] for d in dims], [d[1] for d in dims])


def walk_dims_unbounded(dims: list[list[int]], length: int) -> np.ndarray:
    """A memtile BD of `length` elements with 4 dims: only d0-d2 have wraps, the outermost (d3) has a
    stride and steps on until the length is moved (how one MM2S BD walks a whole joined object)."""
    inner = int(np.prod([d[0] for d in dims[1:]]))
    assert length % inner == 0
    sizes = [length // inner] + [d[0] for d in dims[1:]]
    return walk(sizes, [d[1] for d in dims])


def tap_walk(tap: Tap | None, count_units: int, parts: int) -> np.ndarray:
    """A Design pattern (units) as block indices: `parts` blocks per unit (bfp16: 8, else 1)."""
    if tap is None:
        return np.arange(count_units * parts, dtype=np.int64)
    return tap.scaled(parts).indices()


def parts_of(type_name: str) -> int:
    return dtype(type_name).blocks_per_unit


def fifo_parts(f: ObjectFifo) -> int:
    return parts_of(f.dtype)


def fifo_elems(f: ObjectFifo) -> int:
    """A Design fifo's object size in MLIR element units."""
    return f.obj_elems * fifo_parts(f)


# ---- the Design for a golden file ------------------------------------------------------------
def golden_fifo(g: dict, name: str) -> dict:
    for f in g["fifos"]:
        if f["name"] == name:
            return f
    raise KeyError(name)


def config_for(g: dict) -> GemmConfig:
    """Our GemmConfig with the golden design's parameters and mlir-aie's choices where they are options."""
    p = g["params"]
    cols = p["n_aie_cols"]
    M, K, N = p["M"], p["K"], p["N"]
    if M is None:  # lit tests: no problem size; the native size of the array
        M, K, N = 4 * p["m"], p["k_mt"], p["n"] * cols
    # a core that states no stack_size gets aiecc's default (0x400), not ours (0xD00)
    stack = g["cores"].get("stack_size") or MLIR_AIE_CORE_DEFAULT_STACK
    return GemmConfig(
        p["device"], M, K, N, p["m"], p["k"], p["n"], p["k_mt"], p["dtype_in"], p["dtype_out"], p["b_col_maj"],
        cols=cols, emulate_bf16_with_bfp16=p["emulate_bf16_with_bfp16"], stack_bytes=stack, rho=p["rho"],
        dtype_b=p["dtype_b"], b_pack=p.get("b_pack", "tiles"),
        # mlir-aie's kernels keep C in its output type between calls (its ATB config3 in bf16)
        acc=p.get("acc") or "out",
        depth_ab_l1=golden_fifo(g, "A_L2L1_0")["depth"], depth_ab_l2=golden_fifo(g, "A_L3L2_0")["depth"],
        depth_c_l1=golden_fifo(g, "C_L1L2_0_0")["depth"], depth_c_l2=golden_fifo(g, "C_L2L3_0")["depth"],
    )


@cache
def design_for(name: str) -> Design:
    return build_design(config_for(load(name)))


# ---- links -----------------------------------------------------------------------------------
def golden_link_offsets(link: dict) -> tuple[int, ...]:
    """Per-slice offsets as our Link keeps them: a join's per source, a split's per destination,
    (0,) for a forward (printed as [] or [0])."""
    if len(link["srcs"]) > 1:
        return tuple(link["src_offsets"])
    if len(link["dsts"]) > 1:
        return tuple(link["dst_offsets"])
    assert link["dst_offsets"] in ([], [0]) and link["src_offsets"] in ([], [0])
    return (0,)


def golden_link_of(g: dict, fifo: str) -> dict:
    for link in g["links"]:
        if fifo in link["srcs"] or fifo in link["dsts"]:
            return link
    raise KeyError(fifo)


def design_link_of(d: Design, fifo: str):
    for link in d.links:
        if fifo in link.srcs or fifo in link.dsts:
            return link
    raise KeyError(fifo)


# ---- memtile -> core: L1 element -> memtile element (-> L3L2 stream position) ------------------
def _l1_map(l2_elems: int, n_dsts: int, offset: int, l1_elems: int, to_idx: np.ndarray,
            from_idx: np.ndarray) -> np.ndarray:
    """out[obj, l1 index] = memtile object index, for every L1 object one memtile object feeds."""
    slice_len = l2_elems // n_dsts
    assert len(to_idx) == slice_len, (len(to_idx), slice_len)
    objs = (offset + to_idx).reshape(-1, l1_elems)
    assert np.array_equal(np.sort(from_idx), np.arange(l1_elems)), "core S2MM must fill the L1 object once"
    out = np.empty_like(objs)
    out[:, from_idx] = objs
    return out


def _stream_position(s2mm: np.ndarray, l2_elems: int) -> np.ndarray:
    """Inverse of a memtile S2MM walk: position on the L3L2 stream of every memtile object index.
    A walk shorter than the object repeats per slice."""
    assert l2_elems % len(s2mm) == 0
    full = np.concatenate([s2mm + i * len(s2mm) for i in range(l2_elems // len(s2mm))])
    assert np.array_equal(np.sort(full), np.arange(l2_elems)), "memtile S2MM must fill the object once"
    pos = np.empty(l2_elems, dtype=np.int64)
    pos[full] = np.arange(l2_elems)
    return pos


def golden_l1_layout(g: dict, l2l1: str) -> tuple[np.ndarray, np.ndarray]:
    """(memtile index map, L3L2 stream position map) of every L1 object of fifo `l2l1`."""
    link = golden_link_of(g, l2l1)
    (l3l2,) = link["srcs"]
    src, dst = golden_fifo(g, l3l2), golden_fifo(g, l2l1)
    l2_elems, l1_elems = src["elem"][0], dst["elem"][0]
    j = link["dsts"].index(l2l1)
    slice_len = l2_elems // len(link["dsts"])
    to_idx = walk_dims(dst["dims_to_stream"], slice_len)
    from_idx = walk_dims(dst["dims_from_stream"], l1_elems)
    mem = _l1_map(l2_elems, len(link["dsts"]), golden_link_offsets(link)[j], l1_elems, to_idx, from_idx)
    s2mm = walk_dims(src["dims_from_stream"], l2_elems)
    return mem, _stream_position(s2mm, l2_elems)[mem]


def design_l1_layout(d: Design, l2l1: str) -> tuple[np.ndarray, np.ndarray]:
    link = design_link_of(d, l2l1)
    (l3l2,) = link.srcs
    src, dst = d.fifo(l3l2), d.fifo(l2l1)
    parts = fifo_parts(dst)
    l2_elems, l1_elems = fifo_elems(src), fifo_elems(dst)
    j = link.dsts.index(l2l1)
    slice_units = src.obj_elems // len(link.dsts)
    to_idx = tap_walk(dst.dims_to_stream, slice_units, parts)
    from_idx = tap_walk(dst.dims_from_stream, dst.obj_elems, parts)
    mem = _l1_map(l2_elems, len(link.dsts), link.offsets[j] * parts, l1_elems, to_idx, from_idx)
    s2mm = tap_walk(src.dims_from_stream, src.obj_elems, parts)
    return mem, _stream_position(s2mm, l2_elems)[mem]


def golden_memtile_s2mm(g: dict, l3l2: str) -> np.ndarray:
    src = golden_fifo(g, l3l2)
    n = src["elem"][0]
    s2mm = walk_dims(src["dims_from_stream"], n)
    return np.concatenate([s2mm + i * len(s2mm) for i in range(n // len(s2mm))])


def design_memtile_s2mm(d: Design, l3l2: str) -> np.ndarray:
    src = d.fifo(l3l2)
    s2mm = tap_walk(src.dims_from_stream, src.obj_elems, fifo_parts(src))
    n = fifo_elems(src)
    return np.concatenate([s2mm + i * len(s2mm) for i in range(n // len(s2mm))])


# ---- C: which L1 element of which core lands at which position of the C_L2L3 stream -----------
def golden_c_stream(g: dict, l2l3: str) -> np.ndarray:
    """Memtile object index (= join slice offset + core L1 index: the core MM2S is linear) per stream
    position of one C_L2L3 object."""
    f = golden_fifo(g, l2l3)
    link = golden_link_of(g, l2l3)
    for src in link["srcs"]:
        assert golden_fifo(g, src)["dims_to_stream"] is None  # core MM2S linear
    n = f["elem"][0]
    if f["dims_to_stream"] is None:
        return np.arange(n, dtype=np.int64)
    return walk_dims_unbounded(f["dims_to_stream"], n)


def design_c_stream(d: Design, l2l3: str) -> np.ndarray:
    """Our C_L2L3 dims_to_stream is per join slice (one core's object), at the link's offsets."""
    f = d.fifo(l2l3)
    link = design_link_of(d, l2l3)
    parts = fifo_parts(f)
    out = []
    for src, off in zip(link.srcs, link.offsets):
        s = d.fifo(src)
        assert s.dims_to_stream is None  # core MM2S linear
        out.append(off * parts + tap_walk(f.dims_to_stream, s.obj_elems, parts))
    return np.concatenate(out)


# ---- runtime: the DRAM element sequence each shim fifo walks, in issue order --------------------
def golden_transfer_walk(rt: dict, t: list) -> np.ndarray:
    rec = dict(zip(rt["fields"], t))
    sizes, strides = rec["sizes"], rec["strides"]
    if rt["style"] == "dma_memcpy_nd":  # four per-dimension offsets, combined with the strides
        base = sum(o * s for o, s in zip(rec["offsets"], strides))
    else:
        base = rec["offset"]
        reps = (rec["repeat_count"] or 0) + 1  # dma_bd len covers one iteration of the outermost dim
        assert rec["len"] * reps == int(np.prod(sizes)), rec
    return walk(sizes, strides, base)


def golden_shim_streams(g: dict) -> dict[str, np.ndarray]:
    rt = g["runtime"]
    seqs: dict[str, list[np.ndarray]] = {}
    for t in rt["transfers"]:
        seqs.setdefault(t[0], []).append(golden_transfer_walk(rt, t))
    return {k: np.concatenate(v) for k, v in seqs.items()}


def design_shim_streams(d: Design) -> dict[str, np.ndarray]:
    seqs: dict[str, list[np.ndarray]] = {}
    for task in d.tasks:
        parts = parts_of(d.tensor(task.tensor).dtype)
        seqs.setdefault(task.fifo, []).append(task.tap.scaled(parts).indices())
    return {k: np.concatenate(v) for k, v in seqs.items()}


def golden_waited_fifos(g: dict) -> set[str]:
    """Fifos whose transfers the sequence synchronises on (issue_token, dma_wait, npu.sync on a shim
    S2MM channel, dma_await_task)."""
    rt = g["runtime"]
    rec = [dict(zip(rt["fields"], t)) for t in rt["transfers"]]
    out = {r["fifo"] for r in rec if r["issue_token"]}
    for tok in rt["order"]:
        word = tok.split()
        if word[0] == "wait":
            out.add(word[1])
        elif word[0] == "await":
            out.add(rec[int(word[1])]["fifo"])
        elif word[0] == "sync":  # sync col C ch X dir 0: the shim S2MM channel of column C
            col, direction = int(word[2]), int(word[6])
            assert direction == 0
            out |= {f["name"] for f in g["fifos"] if [col, 0] in f["consumers"]}
    return out
