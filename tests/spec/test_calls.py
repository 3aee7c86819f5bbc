"""Calls of a design: sizes that are not multiples of its blocks, several sizes on one design
(runtime parameters), the operator API and the build cache (gemm_gen/spec/call.py, app/operator.py)."""

from __future__ import annotations

from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest

from gemm_gen.app.cli import main
from gemm_gen.app.operator import Gemm
from gemm_gen.design import build_design
from gemm_gen.design.ir import Loop, RuntimeCount
from gemm_gen.design.serve import serve
from gemm_gen.facts.errors import ConfigError, GemmGenError, SimulationError
from gemm_gen.sim.run import simulate, simulate_calls
from gemm_gen.spec.call import parse_sizes, plan_call
from gemm_gen.spec.config import GemmConfig
from gemm_gen.spec.request import Problem
from gemm_gen.spec.rules import padding

from ..conftest import small

# (device, dtype_in, dtype_out, B column-major): every scalar type pair of both devices
TYPES = [("npu1", "i8", "i32", False), ("npu1", "i8", "i16", True), ("npu1", "bf16", "bf16", False),
         ("npu1", "i16", "i32", True), ("npu2", "i8", "i32", True), ("npu2", "i8", "i8", False),
         ("npu2", "bf16", "bf16", False), ("npu2", "bf16", "f32", True)]


def _design(dev: str, t_in: str, t_out: str, col: bool, **kw: object) -> GemmConfig:
    base = small(dev, t_in, t_out, col)
    return replace(base, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("dev,t_in,t_out,col", TYPES)
def test_ragged_sizes_are_bit_exact_on_one_design(dev, t_in, t_out, col):
    """One design per type, called at sizes with every kind of tail: M and N tails moved back,
    problems smaller than a block (junk into slack), K tails (B slack or host padding), rows that
    are not whole words (host copies); all bit-exact, all on the same simulated array."""
    c = _design(dev, t_in, t_out, col, runtime_sizes="mnk")
    c = replace(c, M=3 * c.size.M, K=3 * c.size.K, N=3 * c.size.N)
    design = build_design(c)
    bm, bn = c.tiling.m * c.array.rows, c.tiling.n * c.array.cols
    sizes = [Problem(bm + 4, 2 * c.tiling.k_mt + 8, bn + 4), Problem(1, c.tiling.k_mt * 3 - 8, bn * 2 + 12),
             Problem(2 * bm - 3, 8, 2 * bn), Problem(bm * 2, c.tiling.k_mt + 4, 4), Problem(7, 3, 5)]
    results = simulate_calls(design, sizes)
    for r in results:
        assert r.passed and r.mismatches == 0 and r.elements == r.call.M * r.call.N, r.call.problem
    first, tiny = results[0].call, results[-1].call
    assert first.shift_m and first.shift_n
    # 7 x 3 x 5: no row is a whole number of words for 1- and 2-byte types
    assert {x.operand for x in tiny.copies} >= {"A"}


@pytest.mark.parametrize("dev,t_in,t_out,col", TYPES[::3])
def test_aligned_ragged_sizes_need_no_host_copy(dev, t_in, t_out, col):
    c = _design(dev, t_in, t_out, col)
    bm, bn = c.tiling.m * c.array.rows, c.tiling.n * c.array.cols
    p = Problem(2 * bm - 4, 2 * c.tiling.k_mt, 2 * bn - 4)  # whole-word rows; M and N tails moved back
    call = plan_call(c, p)
    assert call.host_copies == 0 and call.shift_m and call.shift_n
    assert simulate_calls(build_design(replace(c, M=p.M, K=p.K, N=p.N)), [p])[0].passed


def test_k_tail_reads_b_slack_zeros_or_pads():
    row = plan_call(small("npu1", "i8", "i32", False), Problem(64, 100, 64))
    assert row.host_copies == 0 and "slack" in row.k_tail
    col = plan_call(small("npu1", "i8", "i32", True), Problem(64, 100, 128))
    assert [x.operand for x in col.copies] == ["A"] and "column-major" in col.copies[0].why
    # bf16 on npu2's bfp16 datapath: a K tail inside a block of 8 would reach the shared exponent
    emu = plan_call(small("npu2", "bf16", "bf16", False), Problem(64, 100, 128))
    assert [x.operand for x in emu.copies] == ["A", "B"] and "block of 8" in emu.copies[0].why


def test_rows_that_are_not_words_are_copied_with_the_reason():
    call = plan_call(small("npu2", "bf16", "bf16", False), Problem(1000, 777, 333))
    assert call.host_copies == 3
    assert "1554 B are not whole 32-bit words" in call.copies[0].why


def test_sizes_parse_and_refuse_in_one_line():
    assert parse_sizes("1000x777x333, 1X4096x4096") == (Problem(1000, 777, 333), Problem(1, 4096, 4096))
    for bad in ("", "1000x777", "0x1x1", "axbxc"):
        with pytest.raises(ConfigError):
            parse_sizes(bad)


def test_a_design_refuses_sizes_it_does_not_serve():
    fixed = small("npu1", "i8", "i32")
    with pytest.raises(ConfigError, match="--runtime-sizes"):
        serve(fixed, Problem(fixed.size.M // 2, fixed.size.K, fixed.size.N))
    mn = replace(fixed, runtime_sizes="mn")
    assert serve(mn, Problem(5, fixed.size.K, 7)).M == 5
    with pytest.raises(ConfigError, match="runtime sizes mnk"):
        serve(mn, Problem(5, fixed.size.K - fixed.tiling.k_mt, 7))
    with pytest.raises(ConfigError, match=f"N={fixed.size.N + 1} > {fixed.size.N}"):
        serve(replace(fixed, runtime_sizes="mnk"), Problem(1, 1, fixed.size.N + 1))


def test_runtime_k_comes_from_a_parameter_written_per_call():
    """mnk: the core's program is one call: wait on its barrier, close it, then the call's tiles (the tiles word),
    each walking the K the k-steps word says; the sequence writes both words of every core, then sets every
    core's barrier, before any transfer. Calls of several sizes pass on one design."""
    from gemm_gen.design.ir import BarrierRelease, BarrierWait
    from gemm_gen.spec.rules.l1 import K_WORD, TILES_WORD

    c = replace(small("npu2", "i8", "i32"), runtime_sizes="mnk")
    d = build_design(c)
    wait, release, tiles = d.workers[0].program
    assert (wait, release) == (BarrierWait(1), BarrierRelease(1))
    assert tiles.count == RuntimeCount("rtp_0_0", TILES_WORD)
    (k_loop,) = [op for op in tiles.body if isinstance(op, Loop)]
    assert k_loop.count == RuntimeCount("rtp_0_0", K_WORD)
    assert any(b.rtp for b in d.workers[0].buffers) and "RTP" in c.l1_parts
    writes = [op for op in d.runtime if op.op == "rtp"]
    assert len(writes) == 2 * c.array.rows * c.array.cols
    assert {(op.rtp.index, op.rtp.value) for op in writes} == {(K_WORD, c.call.k_steps - 1),
                                                               (TILES_WORD, c.call.tiles_per_core)}
    sets = [i for i, op in enumerate(d.runtime) if op.op == "barrier"]
    assert len(sets) == c.array.rows * c.array.cols
    assert d.runtime.index(writes[-1]) < min(sets) and max(sets) < min(i for i, op in enumerate(d.runtime)
                                                                       if op.op == "task")
    results = simulate_calls(d, [Problem(c.size.M, c.size.K // 2, c.size.N), Problem(c.size.M, c.size.K, c.size.N),
                                 Problem(9, c.tiling.k_mt, 9)])
    assert all(r.passed for r in results)


def test_a_parameter_never_written_is_refused():
    c = replace(small("npu2", "i8", "i32"), runtime_sizes="mnk")
    d = build_design(c)
    silent = replace(d, runtime=tuple(op for op in d.runtime if op.op != "rtp"))
    with pytest.raises(SimulationError, match="before any call wrote it"):
        simulate(silent)


def test_operator_simulates_the_users_arrays():
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (300, 200)).astype(np.int8)
    b = rng.integers(-128, 128, (200, 100)).astype(np.int8)
    g = Gemm(device="npu1", dtype_in="i8", dtype_out="i32")
    got = g.simulate(a, b)
    assert got.dtype == np.int32 and np.array_equal(got, a.astype(np.int32) @ b.astype(np.int32))


def test_operator_serves_many_shapes_with_one_design():
    g = Gemm(device="npu2", dtype_in="bf16", dtype_out="f32", max_size=(256, 512, 256))
    rng = np.random.default_rng(2)
    for M, K, N in ((256, 512, 256), (37, 200, 130), (1, 512, 256)):
        a = (rng.integers(-8, 9, (M, K)) / 8).astype(ml_dtypes.bfloat16)
        b = (rng.integers(-8, 9, (K, N)) / 8).astype(ml_dtypes.bfloat16)
        want = a.astype(np.float64) @ b.astype(np.float64)
        assert np.array_equal(g.simulate(a, b).astype(np.float64), want), (M, K, N)
    assert len(g._designs) == 1
    with pytest.raises(ConfigError, match="K=513 > 512"):
        g.simulate(np.zeros((1, 513), ml_dtypes.bfloat16), np.zeros((513, 1), ml_dtypes.bfloat16))


def test_operator_refuses_inexact_conversions_and_bad_shapes():
    g = Gemm(device="npu2", dtype_in="bf16")
    with pytest.raises(ConfigError, match=r"not bf16 values .*astype"):
        g.simulate(np.full((4, 4), 0.1, np.float32), np.ones((4, 4), np.float32))
    assert g.simulate(np.ones((4, 4), np.float32), np.ones((4, 4), np.int64)).shape == (4, 4)  # exact: converted
    with pytest.raises(ConfigError, match="K differs"):
        g.simulate(np.ones((4, 3)), np.ones((4, 4)))
    with pytest.raises(ConfigError, match=r"outside i8's range \[-128, 127\]"):
        Gemm(device="npu1", dtype_in="i8").simulate(np.full((2, 2), 300), np.ones((2, 2)))
    with pytest.raises(ConfigError, match=r"Gemm\(no_such_option=1\): unknown option"):
        Gemm(device="npu1", no_such_option=1)


def test_operator_on_npu_needs_the_toolchain():
    try:
        import pyxrt  # noqa: F401
    except ImportError:
        with pytest.raises(GemmGenError):
            Gemm(device="npu1", dtype_in="i8", dtype_out="i32")(np.ones((8, 8), np.int8), np.ones((8, 8), np.int8))
    else:  # pragma: no cover - NPU machines
        pytest.skip("pyxrt is installed: the NPU path is checked by test_hardware.py")


def test_cache_key_ignores_the_size_of_a_design_that_serves_many(tmp_path, monkeypatch, capsys):
    from gemm_gen.backends import cache

    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path))
    c = replace(small("npu2", "i8", "i32"), runtime_sizes="mnk")
    d = build_design(c)
    assert cache.key(d) == cache.key(build_design(replace(c, M=2 * c.size.M, N=2 * c.size.N, K=2 * c.size.K)))
    assert cache.key(d) != cache.key(build_design(replace(c, runtime_sizes="fixed")))
    assert cache.key(build_design(small("npu2", "i8", "i32"))) != cache.key(
        build_design(small("npu2", "i8", "i32", M=2 * c.size.M)))  # a fixed design's loop counts differ
    entry = cache.make_entry(d)
    cache.write_meta(d, entry)
    (entry / "insts_9x64x9.bin").write_bytes(b"\0" * 8)
    assert main(["cache", "list"]) == 0
    out = capsys.readouterr().out
    assert "1 cached build(s)" in out and "serves M<=" in out and "9x64x9" in out
    assert main(["cache", "clear"]) == 0 and not entry.exists()


def test_cli_simulates_several_sizes_on_one_design(capsys):
    code = main(["simulate", "--dev", "npu1", "--dtype_in", "i8", "--dtype_out", "i32", "-m", "16", "-k", "32",
                 "-n", "16", "--runtime-sizes", "100x200x50,64x64x64,1x260x33"])
    out = capsys.readouterr().out
    assert code == 0 and out.count(": PASS") == 3 and "one design served all 3 sizes" in out
    assert main(["simulate", "--dev", "npu1", "-M", "50", "--runtime-sizes", "100x20x20"]) == 2
    assert "-M 50 is less than the 100" in capsys.readouterr().err


def test_plan_reports_host_copies_and_the_k_tail(capsys):
    assert main(["plan", "--dev", "npu2", "-M", "1000", "-K", "776", "-N", "2000", "--json"]) == 0
    import json

    info = json.loads(capsys.readouterr().out)
    assert info["host_copies"] == 0 and info["call"]["k_tail"].startswith("K=776 is walked to")


RUN_SIZES = ["--dev", "npu1", "--dtype_in", "i8", "--dtype_out", "i32", "--runtime-sizes", "150x200x100,64x96x33"]


def _expected_insts(config: GemmConfig, sizes: str) -> dict[bytes, object]:
    """What the aiecc stand-in writes for each size's instruction stream (its runtime sequence as
    the IRON stand-in lowers it), keyed for the pyxrt stand-in."""
    from gemm_gen.backends.iron import to_mlir
    from gemm_gen.design.build import host_tensors, runtime_sequence

    from .. import iron_recorder
    from ..fake_aiecc import fake_insts

    design = build_design(config)
    out: dict[bytes, object] = {}
    for p in parse_sizes(sizes):
        call = serve(config, p)
        runtime = runtime_sequence(config, call)
        sized = replace(design, runtime=runtime, tensors=host_tensors(config, call, runtime))
        out[fake_insts(to_mlir(sized, iron_recorder.api()[0]))] = call
    return out


def test_run_of_many_sizes_loads_one_xclbin_builds_once_and_writes_one_stream_per_size(tmp_path, monkeypatch,
                                                                                      capsys):
    """`gemm-gen run --runtime-sizes` with stand-in tools: one build into the cache (a second run
    finds it), one xclbin loaded once per run, each size run with its own instruction stream (the
    pyxrt stand-in computes the size that stream names), every size checked."""
    from gemm_gen.app.choice import choose_design as config_from_args
    from gemm_gen.app.cli import parser
    from gemm_gen.backends import cache, toolchain

    from ..backends.test_build import _fake_tools
    from ..fake_pyxrt import FakeXrt

    _fake_tools(tmp_path, monkeypatch)
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    c = config_from_args(parser().parse_args(["run", *RUN_SIZES]))
    streams = _expected_insts(c, RUN_SIZES[-1])
    assert len(streams) == 2  # the two sizes' streams differ
    fakes: list[FakeXrt] = []
    monkeypatch.setattr(toolchain, "pyxrt", lambda: fakes.append(FakeXrt(c, calls=streams)) or fakes[-1])
    aiecc_runs = []
    real_run = __import__("subprocess").run

    def counting_run(argv, *args, **kw):
        if argv and str(argv[0]).endswith("aiecc"):
            aiecc_runs.append([a for a in argv if a.startswith("--get-")])
        return real_run(argv, *args, **kw)

    monkeypatch.setattr("subprocess.run", counting_run)
    assert main(["run", *RUN_SIZES, "--iters", "1", "--warmup", "0"]) == 0
    out = capsys.readouterr().out
    assert "built into the build cache" in out and out.count("PASS!") == 2
    assert "PASS: one xclbin served all 2 sizes" in out
    log = fakes[0].log
    assert [e for e in log if e[0] == "xclbin"] == [("xclbin", str(next((tmp_path / "cache").glob("*/*.xclbin"))))]
    assert [e[1] for e in log if e[0] == "size"] == ["150x200x100", "64x96x33"]
    # one full build (xclbin and the largest size's stream) and one instructions-only run for the other size
    assert aiecc_runs == [["--get-xclbin", "--get-npu-insts"], ["--get-npu-insts"]]
    entry = next((tmp_path / "cache").iterdir())
    assert cache.is_entry(entry)  # the build went into an entry gemm_gen marked as its own
    assert {p.name for p in entry.glob("insts*.bin")} == {"insts_64x96x33.bin", f"insts_{c.suffix}.bin"}
    # the stand-in aiecc's stream is not TXN, so the host encoder is not trusted for this xclbin
    ledger = __import__("json").loads((entry / "streams.json").read_text())
    assert ledger["encoder"]["matches"] is False and ledger["encoder"]["first_difference"] == 0
    assert ledger["streams"] == {"insts_64x96x33.bin": "aiecc"} and "(by aiecc)" in out
    # a second run finds the xclbin and both streams: nothing is built
    aiecc_runs.clear()
    assert main(["run", *RUN_SIZES, "--iters", "1", "--warmup", "0", "--json"]) == 0
    result = __import__("json").loads(capsys.readouterr().out)
    assert result["cache_hit"] and result["passed"] and aiecc_runs == []
    assert [call["size"] for call in result["calls"]] == ["150x200x100", "64x96x33"]


def test_run_with_a_stream_for_another_size_fails(tmp_path, monkeypatch):
    """The pyxrt stand-in refuses a stream that no size of the xclbin has (a wrong stream on the
    NPU runs garbage or hangs): the runner must hand each size its own."""
    from gemm_gen.backends import runner

    from ..fake_pyxrt import FakeXrt

    c = replace(small("npu1", "i8", "i32"), runtime_sizes="mn")
    insts = tmp_path / "insts.bin"
    insts.write_bytes(b"\0" * 8)
    (tmp_path / "a.xclbin").write_text("xclbin")
    files = type("F", (), {"xclbin": tmp_path / "a.xclbin", "insts": insts})()
    xrt = FakeXrt(c, calls={b"other": c.call})
    with pytest.raises(GemmGenError, match="ended in state ERT_CMD_STATE_ERROR"):
        runner.run_calls(c, [(c.call, files)], iters=1, warmup=0, xrt=xrt)


def test_run_encodes_other_sizes_on_the_host_once_it_matches_aiecc(tmp_path, monkeypatch, capsys):
    """When aiecc's streams for the xclbin's own size and for the sizes probe_calls picks are the
    host encoder's, word for word, every other size's stream comes from the encoder (no aiecc run)
    and the NPU runs it; a rebuild (another aiecc stream of the own size) drops that trust and
    every stream it made."""
    import json

    from gemm_gen.app.choice import choose_design as config_from_args
    from gemm_gen.app.cli import parser
    from gemm_gen.backends import cache, toolchain, txn
    from gemm_gen.backends.npu_call import STREAMS, call_files, probe_calls, stream_name

    from ..backends.test_build import _fake_tools
    from ..fake_pyxrt import FakeXrt

    _fake_tools(tmp_path, monkeypatch)
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    c = config_from_args(parser().parse_args(["run", *RUN_SIZES]))
    design = build_design(c)
    own = call_files(design, c.call)  # the build: xclbin and aiecc's stream of the own size
    entry = own.insts.parent
    own.insts.write_bytes(txn.encode_call(design, c.call).tobytes())  # as if aiecc wrote what the encoder writes
    probes = probe_calls(design)
    for probe in probes[1:]:  # as if aiecc wrote them: the encoder's streams
        (entry / stream_name(design, probe)).write_bytes(txn.encode_call(design, probe).tobytes())
    calls = [serve(c, p) for p in parse_sizes(RUN_SIZES[-1])]
    streams = {txn.encode_call(design, call).tobytes(): call for call in calls}
    monkeypatch.setattr(toolchain, "pyxrt", lambda: FakeXrt(c, calls=streams))
    ran = []
    real_run = __import__("subprocess").run
    monkeypatch.setattr("subprocess.run", lambda argv, *a, **kw: ran.append(argv) or real_run(argv, *a, **kw))
    assert main(["run", *RUN_SIZES, "--iters", "1", "--warmup", "0"]) == 0
    out = capsys.readouterr().out
    assert ran == [] and "found in the build cache" in out and "(by host encoder)" in out
    assert "PASS: one xclbin served all 2 sizes" in out
    other = entry / "insts_64x96x33.bin"
    assert other.read_bytes() == txn.encode_call(design, calls[1]).tobytes()
    ledger = json.loads((entry / STREAMS).read_text())
    assert ledger["encoder"]["matches"] is True and ledger["streams"] == {other.name: "host encoder"}
    assert ledger["encoder"]["checked"] == [str(p.problem) for p in probes]
    # a rebuild writes another own-size stream: the ledger, its verdict and its streams go
    own.insts.write_bytes(b"rebuilt by another aiecc\0\0\0\0")
    files = call_files(design, calls[1])
    assert files.how == "aiecc" and other.read_bytes() != txn.encode_call(design, calls[1]).tobytes()
    ledger = json.loads((entry / STREAMS).read_text())
    assert ledger["encoder"]["matches"] is False and ledger["streams"] == {other.name: "aiecc"}


def test_an_encoder_that_fails_hands_every_stream_to_aiecc(tmp_path, monkeypatch):
    from gemm_gen.backends import cache, txn
    from gemm_gen.backends.npu_call import STREAMS, call_files

    from ..backends.test_build import _fake_tools

    _fake_tools(tmp_path, monkeypatch)
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    c = replace(small("npu1", "i8", "i32"), runtime_sizes="mn")
    design = build_design(c)
    own = call_files(design, c.call)

    def broken(*_a, **_k):
        raise AssertionError("a TXN word out of 32 bits")

    monkeypatch.setattr(txn, "encode_call", broken)
    files = call_files(design, serve(c, Problem(3, c.size.K, 5)))
    assert files.how == "aiecc" and files.insts.exists()
    verdict = __import__("json").loads((own.insts.parent / STREAMS).read_text())["encoder"]
    assert verdict["matches"] is False and "out of 32 bits" in verdict["encoder_failed"]


def test_a_call_with_a_padded_a_gets_its_own_stream(tmp_path, monkeypatch):
    """The operator pads an A holding Inf or NaN: the same size then reads other buffer strides, so
    its instruction stream must not be the one cached for the size's usual plan."""
    from gemm_gen.backends import cache
    from gemm_gen.backends.npu_call import call_files, stream_name
    from gemm_gen.spec.call import HostCopy

    from ..backends.test_build import _fake_tools

    _fake_tools(tmp_path, monkeypatch)
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    c = replace(small("npu1", "bf16", "bf16", False), runtime_sizes="mnk")
    design = build_design(c)
    usual = serve(c, Problem(3, c.size.K - 4, 8))
    padded = replace(usual, padded=tuple(sorted({*usual.padded, "A"})), copies=(*usual.copies, HostCopy("A", "Inf")),
                     a_finite=False)
    assert usual.a_finite and "A" not in usual.padded  # the K tail reads A's next row: the operator's case
    assert stream_name(design, usual) == f"insts_{usual.problem}.bin"
    assert stream_name(design, padded) != stream_name(design, usual)
    first, second = call_files(design, usual), call_files(design, padded)
    assert first.insts != second.insts and first.insts.read_bytes() != second.insts.read_bytes()


def test_the_operator_loads_its_xclbin_once(tmp_path, monkeypatch):
    """g(A, B) twice: one build, one xclbin load, two runs, each C exact (stand-in tools and XRT)."""
    from gemm_gen.backends import cache, toolchain

    from ..backends.test_build import _fake_tools
    from ..fake_pyxrt import FakeXrt

    _fake_tools(tmp_path, monkeypatch)
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    g = Gemm(device="npu1", dtype_in="i8", dtype_out="i32")
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (64, 96), dtype=np.int8)
    b = rng.integers(-128, 128, (96, 64), dtype=np.int8)
    fake = FakeXrt(g.design(64, 96, 64).config)
    monkeypatch.setattr(toolchain, "pyxrt", lambda: fake)
    for _ in range(2):
        assert np.array_equal(g(a, b), a.astype(np.int32) @ b.astype(np.int32))
    assert [e[0] for e in fake.log].count("xclbin") == 1 and [e[0] for e in fake.log].count("run") == 2


def test_an_npu_call_says_what_c_lost(tmp_path, monkeypatch):
    """g(A, B) on full-range int8 -> int8 (stand-in tools and XRT): C is clip(A @ B), the saturated
    outputs are said without a host GEMM (only outputs at i8's bounds recomputed), report=True gives
    the whole Accuracy, check=False says nothing."""
    import warnings

    from gemm_gen.app import operator as operator_module
    from gemm_gen.backends import cache, toolchain
    from gemm_gen.facts.errors import NumericsWarning

    from ..backends.test_build import _fake_tools
    from ..fake_pyxrt import FakeXrt

    _fake_tools(tmp_path, monkeypatch)
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    g = Gemm(device="npu1", dtype_in="i8", dtype_out="i8")
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (64, 96), dtype=np.int8)
    b = rng.integers(-128, 128, (96, 64), dtype=np.int8)
    fake = FakeXrt(g.design(64, 96, 64).config)
    monkeypatch.setattr(toolchain, "pyxrt", lambda: fake)
    exact = np.clip(a.astype(np.int64) @ b.astype(np.int64), -128, 127)
    whole = []  # calls of the whole-product measure
    real = operator_module.measure
    monkeypatch.setattr(operator_module, "measure", lambda *args: whole.append(1) or real(*args))
    with pytest.warns(NumericsWarning, match=r"outputs saturated"):
        c = g(a, b)
    assert np.array_equal(c, exact) and whole == []
    with pytest.warns(NumericsWarning):
        c, acc = g(a, b, report=True)
    assert whole == [1] and acc.exact + acc.saturated == acc.elements  # a clamped output is not A @ B
    assert acc.saturated == int(np.count_nonzero(exact != a.astype(np.int64) @ b))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.array_equal(g(a, b, check=False), exact)


@pytest.mark.parametrize("dev,cols", [("npu1", 1), ("npu1", 2), ("npu1", 4), ("npu2", 1), ("npu2", 4), ("npu2", 8)])
def test_the_task_count_rule_counts_what_the_runtime_sequence_pushes(dev, cols):
    """rules.padding's tasks per group (what the MAX_RUNTIME_TASKS check and the model count) equals
    the tasks of one group of the built design's runtime sequence, narrow arrays included (one A task
    per shim that carries A, not per core row)."""
    c = GemmConfig(dev, 512, 256, 256, 32, 32, 32, 64, "i8", "i32", cols=cols)
    design = build_design(c)
    pushed = sum(1 for t in design.tasks if t.group == 0)
    assert padding.tasks_per_group(c.a_shims, c.array.cols) == pushed
    assert padding.runtime_tasks(c.call.tiles_per_core, c.a_shims, c.array.cols) == pushed * c.call.tiles_per_core
