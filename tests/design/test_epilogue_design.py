"""The fused epilogue in the design (issue 21 step 4, docs/epilogues.md section 3): the epilogue tile is one
more B object per output tile (B grows by one k-step per column tile); the shim B walk reads it, the memtile
and the core see k_steps + 1 B objects per output tile, the worker acquires it for the conversion; no new
fifo, link or BD. The host writes the tile through the inverse of B's walk into L1, so that its bytes lie
linear in the core's B buffer (read back from the simulated L1 here, for row- and column-major B)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from gemm_gen.design import build_design
from gemm_gen.design import host_buffers as hostdata
from gemm_gen.design.ir import Acquire, Call, Loop, Release
from gemm_gen.design.patterns import check_dma_limits
from gemm_gen.facts.epilogue_args import tile_bytes
from gemm_gen.facts.errors import LayoutError, SimulationError
from gemm_gen.sim import kernel as sim_kernel
from gemm_gen.sim import simulate
from gemm_gen.spec.config import GemmConfig

from .. import iron_recorder
from ..backends.test_iron import at, lowered

CASES = [  # (device, dtype_in, dtype_out, epilogue options, layout / tiling options)
    ("npu2", "bf16", "bf16", dict(bias=True, activation="silu"), dict()),
    ("npu1", "bf16", "bf16", dict(bias=True, activation="gelu"), dict(b_col_maj=True, k_mt=32)),
    ("npu1", "i8", "i8", dict(bias=True, requant="per_channel"), dict(rho=2, k=64, k_mt=128)),
    ("npu2", "i8", "i16", dict(requant="per_channel", activation="relu"), dict(b_col_maj=True, k=64, k_mt=64)),
    ("npu2", "bf16", "bf16", dict(bias=True), dict(runtime_sizes="mnk")),
]


def config(dev: str, t_in: str, t_out: str, epi: dict, kw: dict) -> GemmConfig:
    tiles = {"m": 32, "k": 32, "n": 32, "k_mt": 64, **{k: v for k, v in kw.items() if k in ("k", "k_mt")}}
    rest = {k: v for k, v in kw.items() if k not in tiles}
    return GemmConfig(dev, 256, 200, 300, dtype_in=t_in, dtype_out=t_out, **tiles, **rest, **epi)


def _ops(program: tuple) -> list:
    """The worker's ops flattened, each loop's body once (the loop counts are checked apart)."""
    out = []
    for op in program:
        out += [op, *_ops(op.body)] if isinstance(op, Loop) else [op]
    return out


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}-{'-'.join(c[3])}-{'-'.join(c[4])}")
def test_the_epilogue_tile_is_one_more_b_object_per_output_tile(case):
    c = config(*case)
    plain = c.with_(bias=False, activation=None, requant=None)
    d, d0 = build_design(c), build_design(plain)
    # no new fifo, link, kernel buffer or BD: the same objects, the shim's B task reads one k-step more; a SiLU /
    # GELU worker has the tanh table's two copies besides (each with its initial value, in two banks)
    assert d.fifos == d0.fifos and d.links == d0.links
    tables = [[b for b in w.buffers if b.initial_value is not None] for w in d.workers]
    assert [[b for b in w.buffers if b.initial_value is None and not b.reservation] for w in d.workers] == \
        [[b for b in w.buffers if not b.reservation] for w in d0.workers]
    assert all(len(t) == 2 * c.epilogue.uses_tanh and len({b.mem_bank for b in t}) == len(t) for t in tables)
    tasks = [op.task for op in d.runtime if op.task is not None]
    assert len(tasks) == len([op for op in d0.runtime if op.task is not None])
    b_tasks = [t for t in tasks if t.tensor == "B"]
    b0 = [op.task for op in d0.runtime if op.task is not None and op.task.tensor == "B"]
    kb = c.call.k_walk + c.tiling.k
    assert all(t.tap.count == kb * c.tiling.n and t0.tap.count == c.call.k_walk * c.tiling.n for t, t0 in zip(b_tasks,
                                                                                                              b0))
    check_dma_limits(c)
    # the worker: k_steps B acquires in the K loop, then Acquire(B), convert(C, C_acc, B), Release(B), Release(C)
    for w in d.workers:
        ops = _ops(w.program)
        b = next(op.args[1] for op in ops if isinstance(op, Call) and "matmul" in op.kernel)
        k_loop = [op for op in ops if isinstance(op, Loop)  # the innermost loop around matmul
                  and any(isinstance(x, Call) and "matmul" in x.kernel for x in op.body)][-1]
        acquires_in_k = sum(isinstance(x, Acquire) and x.fifo == b for x in k_loop.body)
        tile = w.program[-1].body if isinstance(w.program[-1], Loop) else w.program  # a loop of tiles, or one tile
        after = list(tile[-4:])
        convert = after[1]
        assert acquires_in_k == 1 and after[0] == Acquire(b) and after[2] == Release(b)
        assert isinstance(convert, Call) and "convert" in convert.kernel and convert.args[2] == b
        assert convert.args[3:] == tuple(t.name for t in w.buffers if t.initial_value is not None)
        assert isinstance(after[3], Release) and after[3].fifo.startswith("C_L1L2")
    spec = next(k for k in d.kernels if k.role == "convert")
    assert spec.arg_shapes[2] == (c.tiling.k, c.tiling.n) and spec.arg_dtypes[2] == c.types.dtype_b
    tables = spec.arg_shapes[3:]  # the tanh table's two copies, for SiLU / GELU
    assert tables == ((128,),) * len(tables) and len(tables) == 2 * c.epilogue.uses_tanh
    assert d.kernels[0].build.epilogue == c.epilogue


def test_without_an_epilogue_the_design_is_unchanged():
    """An epilogue-free config: no epilogue in its kernel build, B's storage and the worker as before
    (tests/design/test_golden.py pins the whole design text)."""
    plain = config(*CASES[0][:3], {}, {})
    d = build_design(plain)
    assert d.kernels[0].build.epilogue.is_identity and plain.call.b_extra_k == 0
    assert plain.call.storage("B") == (plain.call.K, plain.call.N)  # read in place: no copy for the tile


@pytest.mark.parametrize("case", CASES[:4], ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}-{'-'.join(c[4]) or 'row'}")
def test_the_parameters_land_linear_in_l1(monkeypatch, case):
    """At every convert call, the bytes of the B object the core holds, read linearly from its first, are the
    packed epilogue tile of that output tile's columns (simulated L1, after the shim, memtile and core DMAs)."""
    c = config(*case)
    seen: list[tuple[int, bytes]] = []
    original = sim_kernel.KernelEmulator.convert
    made = {}
    real_random = hostdata.write_epilogue_tiles

    def keep_args(cfg, call, b_dram, args):
        made["args"] = args
        return real_random(cfg, call, b_dram, args)

    def spy(self, tile, c_cells, acc_cells, b_cells=None, mode=None, tables=None):
        data = (b_cells & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.uint8).tobytes()
        seen.append((self.tiles[tile].col0, data))
        return original(self, tile, c_cells, acc_cells, b_cells, mode, tables=tables)

    monkeypatch.setattr(hostdata, "write_epilogue_tiles", keep_args)
    monkeypatch.setattr(sim_kernel.KernelEmulator, "convert", spy)
    r = simulate(c, seed=5, literal=True)  # the literal simulator: its convert kernel sees every object
    assert r.passed and r.kernel.convert_calls == len(seen) > 0
    for col0, data in seen:
        want = tile_bytes(c.epilogue, made["args"], col0, c.tiling.n, c.types.t_out.is_float).tobytes()
        assert data[:len(want)] == want and not any(data[len(want):])


@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[3]], ids=["row", "col", "col-i16"])
def test_a_tile_written_without_the_walks_inverse_fails(monkeypatch, case):
    """Mutant: the host writes the tile linearly into B's rows (no inverse of the memtile -> core walk): the
    simulated kernel reads scrambled parameters, a LayoutError or wrong values."""
    c = config(*case)
    linear = lambda k, n, s, t, col_maj: np.arange(k * n).reshape(k, n)  # noqa: E731
    monkeypatch.setattr(hostdata, "b_layout", linear)
    try:
        r = simulate(c, seed=5)
    except (LayoutError, SimulationError):
        return
    assert not r.passed


def test_a_tile_from_the_wrong_columns_is_caught(monkeypatch):
    """Mutant: every column tile's epilogue tile written at the first column tile's place: the B object the
    convert call holds for the other columns is not theirs (its words say where it came from)."""
    c = config(*CASES[0])
    real = hostdata.tile_bytes

    def shifted(e, args, col0, n, float_out):
        return real(e, args, (col0 + n) % c.call.Np, n, float_out)

    monkeypatch.setattr(hostdata, "tile_bytes", shifted)
    r = simulate(c, seed=5)
    assert not r.passed and r.mismatches > 0


def test_the_iron_lowering_passes_the_epilogue_tile_to_convert():
    c = config(*CASES[2])
    d, rec, _ = lowered(c)
    convert = next(k for k in rec.kernels if k.name.startswith("convert"))
    assert [iron_recorder.shape_dtype(t)[0] for t in convert.arg_types][-1] == (c.tiling.k, c.tiling.n)
    w = next(w for w in rec.workers if at(w.tile) == (0, 2))
    names = [op[1] if op[0] != "call" else op[1] for op in w.trace if op[0] in ("acquire", "release", "call")]
    b = "B_L2L1_0"
    tail = names[names.index(next(n for n in names if n.startswith("convert"))) - 1:]
    assert tail[:3] == [b, tail[1], b] and tail[1].startswith("convert")
    call = next(op for op in w.trace if op[0] == "call" and op[1].startswith("convert"))
    assert repr(call[2][-1]) == f"<{b}>"
    assert replace(c, bias=False, requant=None).epilogue.is_identity


def test_plan_reports_the_epilogue_only_when_there_is_one(capsys):
    """plan (and predict, through design.keys) name the epilogue and the tile B carries; an epilogue-free
    design's report has no epilogue key or line."""
    from gemm_gen.app.cli import main

    base = ["plan", "--dev", "npu1", "-M", "256", "-K", "256", "-N", "256", "--dtype_in", "i8", "--dtype_out", "i8"]
    assert main([*base, "--json"]) == 0
    assert "epilogue" not in json.loads(capsys.readouterr().out)
    assert main([*base, "--requant", "per_channel", "--bias", "--activation", "relu", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["epilogue"] == {"bias": True, "activation": "relu", "clamp": None, "requant": "double"}
    assert main([*base, "--requant", "per_channel"]) == 0
    text = capsys.readouterr().out
    assert "epilogue  per-channel requantization" in text and "requantized out of it per column" in text
    assert main(base) == 0
    assert "epilogue" not in capsys.readouterr().out
