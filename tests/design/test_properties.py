"""Property tests: random valid designs simulate exactly; random broken patterns never pass."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gemm_gen.design import build_design
from gemm_gen.design.ir import Design
from gemm_gen.design.tap import Tap
from gemm_gen.facts.devices import DEVICES
from gemm_gen.facts.dtypes import dtype
from gemm_gen.facts.errors import ConfigError, DmaLimitError, SimulationError
from gemm_gen.facts.precision import PRESETS
from gemm_gen.sim import simulate
from gemm_gen.spec.config import GemmConfig

from ..random_designs import record_config

# (device, A, C, B, C's L1 type): every scalar pair, and every bfp16 precision the datapath runs
PAIRS = [(dev, t_in, t_out, None, None) for dev, d in DEVICES.items() for t_in, outs in d.out_types.items()
         for t_out in outs]
PAIRS += [("npu2", p.a, p.out, p.b, p.acc) for p in PRESETS.values()]
PAIRS += [("npu2", "bfp16", "bf16", "bfp16", None), ("npu2", "bfp16", "f32", "bfp16", None),
          ("npu2", "bf16", "bfp16", "bfp16", None), ("npu2", "bfp16", "bfp16", "bfp16", "f32")]
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def small_configs(draw: st.DrawFn, whole_blocks: bool = False) -> GemmConfig:
    dev_name, t_in, t_out, t_b, acc = draw(st.sampled_from(PAIRS))
    dev = DEVICES[dev_name]
    emulate = dev_name == "npu2" and t_in == "bf16" and t_b is None and draw(st.booleans())
    r, s, t = GemmConfig(dev_name, 1, 1, 1, 1, 1, 1, 1, t_in, t_out, dtype_b=t_b, acc=acc,
                         emulate_bf16_with_bfp16=emulate).kernel.mmul
    rho = draw(st.sampled_from([1, 1, 2, 3]))  # asymmetric tile buffering in a third of the designs
    m = 2 * r * draw(st.integers(1, 3 if rho == 1 else 2)) * rho
    k = s * draw(st.integers(1, 3))
    n = 2 * t * draw(st.integers(1, 2))
    k_mt = k * draw(st.integers(1, 3))
    cols = draw(st.sampled_from(sorted(dev.column_devices)))  # mlir-aie's --n-aie-cols choices
    if whole_blocks:  # one or two blocks each way, no tails
        M, K, N = (draw(st.integers(1, 2)) * size for size in (4 * m, k_mt, cols * n))
    else:  # up to two block rows, ragged sizes get padded
        M, K, N = draw(st.integers(1, 2 * 4 * m)), draw(st.integers(1, 2 * k_mt)), draw(st.integers(1, 2 * cols * n))
    b_is_block = (t_b or t_in) == "bfp16"
    pack = draw(st.sampled_from(["tiles", "strips"])) if b_is_block else "tiles"  # mlir-aie's packing too
    # column-major A: scalar kernels, on any column count (fewer columns than rows: the shim's iteration)
    a_col = "bfp16" not in (t_in, t_b) and draw(st.booleans())
    return GemmConfig(dev_name, M, K, N, m, k, n, k_mt, t_in, t_out, draw(st.booleans()),
                      cols=cols, emulate_bf16_with_bfp16=emulate, queue_groups=draw(st.integers(1, 4)), rho=rho,
                      dtype_b=t_b, acc=acc, b_pack=pack, a_col_maj=a_col,
                      c_col_maj=(t_out in ("i32", "f32") or "bfp16" not in (t_in, t_b, t_out)) and draw(st.booleans()))


def _design(c: GemmConfig) -> Design:
    try:
        return build_design(c)
    except (ConfigError, DmaLimitError):
        assume(False)
        raise


@SETTINGS
@given(small_configs(), st.integers(0, 2**16))
def test_random_designs_match_the_reference(c, seed):
    r = simulate(_design(c), seed=seed)
    assert r.passed, (c, r.first_mismatch)
    assert r.kernel.tiles_done == c.array.rows * c.array.cols * c.call.tiles_per_core
    if not c.types.precision.block and not c.numerics.bfp16_inputs:
        # C in the default accumulator is the exact product rounded (and saturated) once: the seeded
        # float inputs sum exactly in fp32, so nothing but that one rounding (or a saturation) can show
        acc = r.accuracy
        assert c.types.acc == c.default_acc and acc.exact + acc.saturated == r.elements, (c, acc)
    record_config(c)


def _words(tap: Tap | None, t: str, count: int) -> np.ndarray:
    return (tap or Tap.linear(count)).to_words(dtype(t)).indices()


@st.composite
def perturbations(draw: st.DrawFn, c: GemmConfig) -> tuple[str, Design]:
    """Change one access pattern of a design so that it walks different words."""
    d = _design(c)
    fifos = [f for f in d.fifos if f.dims_to_stream is not None or f.dims_from_stream is not None]
    assume(fifos)  # bfp16 tiles often move with no dims at all
    f = draw(st.sampled_from(fifos))
    field = draw(st.sampled_from([x for x in ("dims_to_stream", "dims_from_stream") if getattr(f, x)]))
    tap: Tap = getattr(f, field)
    kind = draw(st.sampled_from(["swap", "drop", "stride"]))
    if kind == "drop":
        new = None
    elif kind == "swap":
        i, j = draw(st.permutations(range(len(tap.sizes))).map(lambda p: p[:2]))
        sizes, strides = list(tap.sizes), list(tap.strides)
        sizes[i], sizes[j] = sizes[j], sizes[i]
        strides[i], strides[j] = strides[j], strides[i]
        new = Tap(0, tuple(sizes), tuple(strides))
    else:
        i = draw(st.integers(0, len(tap.sizes) - 2))  # keep the innermost (word) run
        strides = list(tap.strides)
        strides[i] += draw(st.sampled_from([-1, 1])) * max(1, strides[-2] if len(strides) > 1 else 1)
        assume(strides[i] > 0)
        new = Tap(0, tap.sizes, tuple(strides))
    count = tap.count
    try:
        before, after = _words(tap, f.dtype, count), _words(new, f.dtype, count)
    except DmaLimitError:
        assume(False)
        raise
    assume(before.shape != after.shape or not np.array_equal(before, after))
    broken = replace(d, fifos=tuple(replace(g, **{field: new}) if g is f else g for g in d.fifos))
    return f"{f.name}.{field} {kind}", broken


@SETTINGS
@given(st.data())
def test_broken_patterns_never_pass(data):
    # whole blocks only: a ragged size reads rows that alias in the memtile object (B's junk columns
    # are its next rows' values when N < n cols; A's K tail is its next row), where a changed walk
    # can deliver the very same data (npu2 i16 1x1x8 on 8x4x32: B's blocked and linear walks match)
    c = data.draw(small_configs(whole_blocks=True))
    label, broken = data.draw(perturbations(c), label="perturbation")
    try:
        r = simulate(broken)
    except SimulationError:
        record_config(c, "caught")
        return  # layout error, deadlock, out-of-range...: caught
    assert not r.passed, f"{label} went unnoticed"
    record_config(c, "caught")
