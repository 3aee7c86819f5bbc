"""Integer C past its type under every saturation mode (issue 20 item 3, "A saturation defect").

Every integer pair the kernels write (i8 -> i8, i16; i16 -> i16, i32; on both devices, with the
default acc64 i16 shapes and an acc32 one), C in the wide accumulator (the default, narrowed once)
and in its own type (--acc out, narrowed per call), under saturate, symmetric and none, with a
nonzero shift and the rounding modes in turn: the rendered kernel is compiled on the host
(tests/backends/test_kernels.py's helpers) and fed inputs that leave the output type both ways. Checked:
(1) the kernel equals gemm_gen/facts/numerics.py bit for bit, whatever mode registers it finds;
(2) it equals an independent reference written here from the exact int64 products (exact
fractions rounded by the mode's definition, then clamped, clamped to +-max, or wrapped);
(3) gemm_gen/facts/accuracy.py reports the outputs that left the type (clamped or wrapped, never silent).
The defect: a kernel rendered without setting the saturation mode wraps acc64 -> int32 (it
inherits the reset mode, none) and must fail on both devices. Where only the acc32 lanes could
overflow (an int32 C of an acc32 mmul), the host refuses (the hardware's behaviour is unpublished)
and the operator warns. Refused combinations say so in one line with the fix.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

from gemm_gen import Gemm
from gemm_gen.backends.kernel_source import kernel_params, render_kernel
from gemm_gen.backends.kernel_source import render as render_module
from gemm_gen.design.ir import KernelBuild
from gemm_gen.facts.accuracy import bound_losses, measure
from gemm_gen.facts.devices import NPU1, NPU2, Device
from gemm_gen.facts.dtypes import dtype
from gemm_gen.facts.errors import ConfigError, NumericsWarning
from gemm_gen.facts.l1_layout import a_layout, b_layout, c_layout
from gemm_gen.facts.numerics import KernelNumerics
from gemm_gen.facts.rounding import Rounding, Saturation

from .test_kernels import (
    Guarded,
    HostApiError,
    Kernel,
    assert_bit_equal,
    build,
    compile_all,
    expected,
    needs_gxx,
    numerics,
    run_tile,
)

ROUNDINGS = [r.name.lower() for r in Rounding]
SATURATIONS = [s.name.lower() for s in Saturation]
# the shift of each pair: nonzero, legal for C in the accumulator and in its own type, and small
# enough that full-scale sums still leave the output type
SHIFTS = {("i8", "i8"): 3, ("i8", "i16"): 2, ("i16", "i16"): 9, ("i16", "i32"): 1}
ACC32_I16_SHIFT = 5
STEPS = 2  # k-steps per tile
# the mode registers a kernel may find (reset: floor, none): it must give the same C under each
FOUND = ((Rounding.FLOOR, Saturation.NONE), (Rounding.CEIL, Saturation.SATURATE),
         (Rounding.SYM_INF, Saturation.SYMMETRIC))


def _dev(b: KernelBuild) -> Device:
    return NPU1 if b.aie_target == NPU1.aie_target else NPU2


def acc_bits(b: KernelBuild) -> int:
    return _dev(b).acc_bits(b.types.dtype_in, tuple(b.mmul))


@dataclass(frozen=True)
class Flow:
    """One kernel fed overflowing inputs; `unsaturated`: rendered with sets_saturation forced False
    (the issue's defect)."""

    build: KernelBuild
    unsaturated: bool = False

    @property
    def id(self) -> str:
        b = self.build
        acc = "wide" if b.types.precision.converts_c else "out"
        tag = "-no-set-saturation" if self.unsaturated else ""
        t = b.types
        return (f"{_dev(b).name}-{t.dtype_in}-{t.dtype_out}-{'x'.join(map(str, b.mmul))}-acc{acc_bits(b)}-{acc}-"
                f"{b.saturation}-{b.rounding}-shift{b.shift}{tag}")

    @property
    def source(self) -> str:
        if not self.unsaturated:
            return render_kernel(self.build)
        real = render_module.kernel_params

        def params(b: KernelBuild):  # type: ignore[no-untyped-def]
            return replace(real(b), sets_saturation=False)

        with mock.patch.object(render_module, "kernel_params", params):
            return render_kernel(self.build)


def _flows() -> list[Flow]:
    """Every integer pair whose C can leave its type without leaving the accumulator's lanes, on
    both devices: the default mmul, C wide and --acc out; for i16 -> i16 an acc32 shape too, C wide;
    every saturation mode; the rounding modes in turn; B in both layouts in turn."""
    flows, i = [], 0
    for dev in (NPU1, NPU2):
        combos = [(din, dout, dev.mmul_shape(din), SHIFTS[din, dout]) for din, outs in dev.out_types.items()
                  if din != "bf16" for dout in outs if (din, dout) in SHIFTS]
        acc32 = next(s for s in dev.mmul_shapes["i16"] if dev.acc_bits("i16", s) == 32)
        combos.append(("i16", "i16", acc32, ACC32_I16_SHIFT))
        for din, dout, shape, shift in combos:
            for wide in (True, False) if dev.acc_bits(din, shape) == 64 or din == "i8" else (True,):
                for sat in SATURATIONS:
                    flows.append(Flow(build(dev, din, dout, (1, 2, 1), bool(i % 2), mmul=shape,
                                            rounding=ROUNDINGS[i % len(ROUNDINGS)], saturation=sat, shift=shift,
                                            wide=wide)))
                    i += 1
    return flows


FLOWS = _flows()
# the case: full-scale i16 -> i32 on the default (acc64) shape, shift 0, both devices, C wide
# and in its own type; each kernel rendered as it is and with the saturation mode never set
DEFECT = [Flow(build(dev, "i16", "i32", (1, 2, 1), not wide, mmul=dev.mmul_shape("i16"), saturation=sat, shift=0,
                     wide=wide)) for dev in (NPU1, NPU2) for wide, sat in ((True, "saturate"), (False, "symmetric"))]
UNSATURATED = [replace(f, unsaturated=True) for f in DEFECT]
# an int32 C of an acc32 mmul: nothing saturates, only the lanes can overflow (refused)
ACC32_INT32 = [build(dev, din, "i32", (1, 2, 1), False, wide=True,
                     mmul=next(s for s in dev.mmul_shapes[din] if dev.acc_bits(din, s) == 32))
               for dev in (NPU1, NPU2) for din in ("i8", "i16")]
ALL = [*FLOWS, *DEFECT, *UNSATURATED, *(Flow(b) for b in ACC32_INT32)]


@pytest.fixture(scope="module")
def kernels() -> dict[str, Path | BaseException]:
    """Every kernel of ALL compiled once (cached by content under .pytest_cache, as test_kernels)."""
    return compile_all(ALL)


def load(kernels: dict[str, Path | BaseException], flow: Flow) -> Kernel:
    lib = kernels[flow.id]
    if isinstance(lib, BaseException):
        raise lib
    return Kernel(lib, flow.build)


# ---- inputs and the independent reference ------------------------------------------------------
def magnitude(b: KernelBuild) -> int:
    """The largest |input| that keeps every sum (and C shifted up) inside the accumulator's lanes:
    the type's full scale, except int16 into acc32."""
    t_in, t_out = dtype(b.types.dtype_in), dtype(b.types.dtype_out)
    if acc_bits(b) == 64 or t_in.bits == 8:
        return -t_in.min
    room = (1 << 31) - 1 - (t_out.max << b.shift)
    return min(t_in.max, math.isqrt(room // (STEPS * b.k)))


def overflow_steps(b: KernelBuild, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """STEPS k-steps of A (m x k) and B (k x n) whose products leave the output type both ways:
    A's rows 0, 1 all -big and all +big (big: full scale), row 2 alternating; B's columns 0, 1 the
    same; every other value -big, +big or uniform in between. Rows x columns of one sign sum past
    the maximum, of opposite signs past the minimum; the uniform values land anywhere."""
    rng = np.random.default_rng(seed)
    host = dtype(b.types.dtype_in).host
    big = magnitude(b)
    lo, hi = -big, min(big, int(np.iinfo(host).max))
    K = STEPS * b.k

    def mixed(shape: tuple[int, int]) -> np.ndarray:
        pick = rng.integers(0, 3, shape)
        uniform = rng.integers(lo, hi + 1, shape)
        return np.where(pick == 0, lo, np.where(pick == 1, hi, uniform))

    a, bb = mixed((b.m, K)), mixed((K, b.n))
    a[0], a[1], a[2] = lo, hi, np.where(np.arange(K) % 2, hi, lo)
    bb[:, 0], bb[:, 1], bb[:, 2] = lo, hi, np.where(np.arange(K) % 2, lo, hi)
    a, bb = a.astype(host), bb.astype(host)
    return [(a[:, i * b.k:(i + 1) * b.k], bb[i * b.k:(i + 1) * b.k]) for i in range(STEPS)]


def round_exact(x: Fraction, mode: str) -> int:
    """x rounded to an integer by the mode's definition (UG1583 crRnd), from exact fractions."""
    floor = math.floor(x)
    if mode == "floor":
        return floor
    if mode == "ceil":
        return math.ceil(x)
    if mode == "sym_floor":  # toward zero
        return math.trunc(x)
    if mode == "sym_ceil":  # away from zero
        return math.ceil(x) if x > 0 else floor
    frac = x - floor
    if frac != Fraction(1, 2):  # nearest
        return floor + (frac > Fraction(1, 2))
    tie_up = {"neg_inf": False, "pos_inf": True, "sym_zero": x < 0, "sym_inf": x > 0,
              "conv_even": floor % 2 == 1, "conv_odd": floor % 2 == 0}[mode]
    return floor + tie_up


def narrow_exact(v: int, bits: int, saturation: str) -> int:
    """An integer into a signed `bits`-bit type: clamped, clamped to +-max, or wrapped (two's complement)."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if saturation == "none":
        return (v - lo) % (1 << bits) + lo
    return min(max(v, -hi if saturation == "symmetric" else lo), hi)


def independent(b: KernelBuild, steps: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """C from the exact int64 products, without gemm_gen's numerics: a wide C narrowed once (the
    sum over all steps / 2^shift, rounded, then saturated or wrapped), a C in its own type narrowed
    after every step (C 2^shift plus the step's products, the same)."""
    bits, shift = dtype(b.types.dtype_out).bits, b.shift

    def convert(v: int) -> int:
        return narrow_exact(round_exact(Fraction(int(v), 1 << shift), b.rounding), bits, b.saturation)

    conv = np.frompyfunc(convert, 1, 1)
    products = [a.astype(np.int64) @ bb.astype(np.int64) for a, bb in steps]
    if b.types.precision.converts_c:
        return conv(sum(products).astype(object)).astype(np.int64)
    c = np.zeros((b.m, b.n), dtype=object)
    for p in products:
        c = conv(c * (1 << shift) + p.astype(object))
    return c.astype(np.int64)


def whole(steps: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    return np.concatenate([a for a, _ in steps], axis=1), np.concatenate([bb for _, bb in steps], axis=0)


def exact_rounded(b: KernelBuild, steps: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """A @ B / 2^shift rounded once, unclamped (object ints)."""
    a, bb = whole(steps)
    p = a.astype(np.int64) @ bb.astype(np.int64)
    return np.frompyfunc(lambda v: round_exact(Fraction(int(v), 1 << b.shift), b.rounding), 1, 1)(p.astype(object))


# ---- the checks ----------------------------------------------------------------------------------
def test_the_flows_cover_every_pair_mode_and_rounding() -> None:
    """Every integer pair of both devices whose C can saturate, with C wide and in its own type,
    under every saturation mode; every rounding mode; both B layouts; acc32 and acc64 shapes."""
    seen = {(_dev(f.build).name, f.build.types.dtype_in, f.build.types.dtype_out, f.build.types.precision.converts_c,
             f.build.saturation) for f in FLOWS}
    for dev in (NPU1, NPU2):
        for din in ("i8", "i16"):
            for dout in dev.out_types[din]:
                if dtype(dout).bits >= dev.acc_bits(din, dev.mmul_shape(din)):
                    continue  # i8 -> i32: C is the acc32 lanes themselves (test_acc32_int32_...)
                for wide in (True, False):
                    assert {s for d, i, o, w, s in seen if (d, i, o, w) == (dev.name, din, dout, wide)} == set(
                        SATURATIONS), (dev.name, din, dout, wide)
    assert {f.build.rounding for f in FLOWS} == set(ROUNDINGS)
    assert {f.build.b_col_maj for f in FLOWS} == {False, True}
    assert {acc_bits(f.build) for f in FLOWS} == {32, 64} and all(f.build.shift for f in FLOWS)


@needs_gxx
@pytest.mark.parametrize("flow", FLOWS + DEFECT, ids=lambda f: f.id)
def test_overflowing_c_is_the_exact_product_narrowed_by_the_mode(kernels, flow: Flow) -> None:
    b = flow.build
    t_out = dtype(b.types.dtype_out)
    steps = overflow_steps(b)
    q = exact_rounded(b, steps)
    above, below = int(np.count_nonzero(q > t_out.max)), int(np.count_nonzero(q < t_out.min))
    assert above and below, f"{flow.id}: the inputs must leave {b.types.dtype_out} both ways"
    assert kernel_params(b).sets_saturation, f"{flow.id}: a C narrower than the accumulator sets the mode"
    want = expected(b, steps)  # gemm_gen/facts/numerics.py
    kernel = load(kernels, flow)
    for modes in FOUND:  # (1) the kernel sets its own modes, whatever it finds
        assert_bit_equal(run_tile(kernel, steps, modes=modes), want, f"{flow.id} found {modes}")
    mine = independent(b, steps)  # (2) the exact products, narrowed as the mode says
    assert_bit_equal(want.astype(np.int64), mine, f"{flow.id}: numerics.py against the independent reference")
    if b.types.precision.converts_c:  # C narrowed once: clip (or wrap) of the rounded exact product
        lo = -t_out.max if b.saturation == "symmetric" else t_out.min
        clipped = np.clip(q, lo, t_out.max).astype(np.int64)
        if b.saturation == "none":
            assert not np.array_equal(want, clipped), f"{flow.id}: wrapped values must differ from clipped ones"
            wrapped = (q.astype(np.int64) - t_out.min) % (1 << t_out.bits) + t_out.min
            assert np.array_equal(want, wrapped)
        else:
            assert np.array_equal(want, clipped)
            assert (want == t_out.max).any() and (want == lo).any()
            assert not (want == t_out.min).any() or b.saturation == "saturate"
    # (3) the accuracy report says how many outputs left the type (symmetric keeps +-max: its minimum too), and
    # what became of them
    acc = measure(want, *whole(steps), numerics(b))
    kept_min = -t_out.max if b.saturation == "symmetric" else t_out.min
    assert acc.saturated == above + int(np.count_nonzero(q < kept_min))
    word = "overflowed" if b.saturation == "none" else "saturated"
    assert f"{acc.saturated:,} {word} (A @ B outside the output type" in acc.text()
    assert ("wrapped" in acc.text()) == (b.saturation == "none")
    assert acc.exact < acc.elements or b.types.precision.converts_c  # per-call narrowing loses more than one rounding


@needs_gxx
@pytest.mark.parametrize("flow", UNSATURATED, ids=lambda f: f.id)
def test_a_kernel_that_never_sets_the_saturation_mode_fails(kernels, flow: Flow) -> None:
    """The issue's defect, on both devices: i16 -> i32 out of acc64 lanes through SRS, rendered
    without setting the saturation mode. At reset (none) full-scale sums wrap (the issue saw
    -1048560 where the model says 2147483647); the comparison catches it. Only a caller that left
    the register set would hide it."""
    b = flow.build
    assert "aie::set_saturation" not in flow.source and "saturation not set" in flow.source
    assert f"aie::set_saturation(aie::saturation_mode::{b.saturation})" in render_kernel(b)
    steps = overflow_steps(b)
    want = expected(b, steps)
    got = run_tile(load(kernels, flow), steps, modes=(Rounding.FLOOR, Saturation.NONE))
    with pytest.raises(AssertionError, match="elements differ"):
        assert_bit_equal(got, want, flow.id)
    wrapped = independent(replace(b, saturation="none"), steps)
    assert_bit_equal(got, wrapped.astype(np.int32), f"{flow.id}: the unsaturated kernel wraps")
    assert (want == np.iinfo(np.int32).max).any() and not (got == np.iinfo(np.int32).max).all()


def test_every_conversion_that_can_saturate_sets_the_mode() -> None:
    """Rendered for every integer pair and mmul shape of both devices: the kernel sets the saturation
    mode exactly when C is narrower than the accumulator lanes (every SRS that can saturate); an
    int32 C of acc32 lanes is a plain cast, which cannot."""
    for dev in (NPU1, NPU2):
        for din in ("i8", "i16"):
            for dout in dev.out_types[din]:
                for shape in dev.mmul_shapes[din]:
                    for wide in (True, False):
                        b = build(dev, din, dout, (1, 2, 1), False, mmul=shape, saturation="symmetric", wide=wide)
                        text = render_kernel(b)
                        narrower = dtype(dout).bits < dev.acc_bits(din, shape)
                        assert ("aie::set_saturation(aie::saturation_mode::symmetric);" in text) == narrower, b
                        assert text.count("aie::set_saturation(") == (2 * (1 + b.types.precision.converts_c)
                                                                      if narrower else 0), b


@needs_gxx
@pytest.mark.parametrize("b", ACC32_INT32,
                         ids=lambda b: f"{_dev(b).name}-{b.types.dtype_in}-{'x'.join(map(str, b.mmul))}")
def test_acc32_int32_overflow_is_refused_not_wrapped(kernels, b: KernelBuild) -> None:
    """An int32 C of an acc32 mmul (i8 -> i32, int16 4x2x8 / 8x1x8): C is the lanes themselves, so only
    they can overflow, and what acc32 does then is unpublished: the host refuses a C near the top
    plus positive products, and full-scale int16 products, instead of guessing."""
    kernel = load(kernels, Flow(b))
    r, s, t = b.mmul
    t_in = dtype(b.types.dtype_in)
    c = Guarded(b.m * b.n, np.dtype(np.int32))
    c.body[c_layout(b.m, b.n, r, t)] = np.full((b.m, b.n), (1 << 31) - 2, np.int32)
    a_buf, b_buf = Guarded(b.m * b.k, t_in.host), Guarded(b.k * b.n, t_in.host)
    a_buf.body[a_layout(b.m, b.k, r, s)] = np.full((b.m, b.k), t_in.max, t_in.host)
    b_buf.body[b_layout(b.k, b.n, s, t, b.b_col_maj)] = np.full((b.k, b.n), t_in.max, t_in.host)
    with pytest.raises(HostApiError, match="leaves the acc32 lanes"):
        kernel.checked(kernel.matmul_fn, a_buf.ptr, b_buf.ptr, c.ptr)
    ones = [(np.ones((b.m, b.k), t_in.host), np.ones((b.k, b.n), t_in.host))] * 2
    assert_bit_equal(run_tile(kernel, ones), expected(b, ones), "small inputs still pass")


def test_the_operator_warns_when_acc32_lanes_can_overflow() -> None:
    """i8 -> i32 with K past 2^31 / 128^2: the simulator narrows as the model does and reports the
    saturated outputs, and the operator warns that the 32-bit accumulator's overflow is unpublished."""
    K = (1 << 17) + 256
    a, b = np.full((2, K), -128, np.int8), np.full((K, 2), -128, np.int8)
    for dev in ("npu1", "npu2"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # long k tiles: the simulation walks K in 257 steps
            c, acc = Gemm(dev, "i8", "i32", tiles=(16, 512, 16, 2048)).simulate(a, b, report=True)
        assert (c == np.iinfo(np.int32).max).all() and acc.saturated == c.size
        said = [str(w.message) for w in caught if w.category is NumericsWarning]
        assert any(f"{c.size:,} saturated" in m for m in said)
        assert any("reaches past the 32-bit accumulator" in m and "64-bit accumulator" in m for m in said)


# ---- end to end: the operator on full-range inputs ------------------------------------------------
def full_scale(t: str, shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """Values of type t: a third at its minimum, a third at its maximum, a third uniform."""
    info = np.iinfo(dtype(t).host)
    pick = rng.integers(0, 3, shape)
    return np.where(pick == 0, info.min, np.where(pick == 1, info.max, rng.integers(info.min, info.max + 1, shape))
                    ).astype(info.dtype)


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("t_in,t_out,shift,rounding", [("i16", "i32", 0, "conv_even"), ("i16", "i32", 1, "floor"),
                                                       ("i8", "i8", 0, "conv_even"), ("i8", "i8", 5, "sym_inf")])
@pytest.mark.parametrize("saturation", SATURATIONS)
def test_the_operator_simulates_full_range_and_says_what_overflowed(dev, t_in, t_out, shift, rounding,
                                                                     saturation) -> None:
    """Gemm(...).simulate on full-scale inputs (the default wide accumulator): C is A @ B / 2^shift
    rounded once, then clamped, clamped to +-max or wrapped; the warning and the report count them."""
    rng = np.random.default_rng(len(t_in) + shift)
    M, K, N = 32, 96, 48
    a, b = full_scale(t_in, (M, K), rng), full_scale(t_in, (K, N), rng)
    g = Gemm(dev, t_in, t_out, saturation=saturation, shift=shift, rounding=rounding)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        c, acc = g.simulate(a, b, report=True)
    flow = build(NPU1 if dev == "npu1" else NPU2, t_in, t_out, (1, 1, 1), False, rounding=rounding,
                 saturation=saturation, shift=shift, wide=True)
    want = independent(flow, [(a, b)])
    assert np.array_equal(c.astype(np.int64), want)
    p = a.astype(np.int64) @ b.astype(np.int64)
    q = np.frompyfunc(lambda v: round_exact(Fraction(int(v), 1 << shift), rounding), 1, 1)(p.astype(object))
    outside = int(np.count_nonzero((q > dtype(t_out).max) | (q < dtype(t_out).min)))
    assert outside > M * N // 4 and acc.saturated == outside and acc.saturation == saturation
    said = [str(w.message) for w in caught if w.category is NumericsWarning]
    word = "overflowed" if saturation == "none" else "saturated"
    assert len(said) == 1 and f"{outside:,} {word} (A @ B outside the output type" in said[0]
    assert ("wrapped" in said[0]) == (saturation == "none")


def test_the_npu_call_check_sees_wrapped_outputs() -> None:
    """The NPU call's check without a host GEMM (bound_losses) looked only at outputs at the type's
    bounds: under saturation none a wrapped output can be anything, so it must count them all."""
    rng = np.random.default_rng(5)
    a, b = full_scale("i8", (24, 64), rng), full_scale("i8", (64, 40), rng)
    for mode in Saturation:
        nm = KernelNumerics.of("i8", "i8", saturation=mode, shift=2, acc="i32")
        c = nm.finish(a.astype(np.int64) @ b.astype(np.int64))
        saturated = measure(c, a, b, nm).saturated
        assert saturated > c.size // 4 and bound_losses(c, a, b, nm) == (saturated, 0), mode


# ---- refusals ------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs,fix", [
    (dict(dtype_in="i8", dtype_out="i32", shift=3), "drop shift"),
    (dict(dtype_in="i16", dtype_out="i32", acc="out", shift=33), "use a shift in 0..32"),
    (dict(dtype_in="i8", dtype_out="i8", shift=32), "use a shift in 0..31"),
    (dict(dtype_in="i8", dtype_out="i8", saturation="wrap"), "use none, saturate or symmetric"),
    (dict(dtype_in="i8", dtype_out="i8", rounding="nearest"), "use "),
])
@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_refused_combinations_say_the_fix_in_one_line(dev, kwargs, fix) -> None:
    with pytest.raises(ConfigError) as e:
        Gemm(dev, **kwargs)
    assert "\n" not in str(e.value) and fix in str(e.value)


@pytest.mark.parametrize("saturation", ["none", "symmetric"])  # saturate: tests/spec/test_calls.py
def test_an_npu_call_says_what_overflowed_under_every_mode(tmp_path, monkeypatch, saturation) -> None:
    """g(A, B) on full-scale int8 -> int8 (stand-in tools and XRT, as tests/spec/test_calls.py): the check
    without a host GEMM warns with the count and what became of them, wrapped ones included."""
    from gemm_gen.backends import cache, toolchain

    from ..fake_pyxrt import FakeXrt
    from .test_build import _fake_tools

    _fake_tools(tmp_path, monkeypatch)
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    g = Gemm(device="npu1", dtype_in="i8", dtype_out="i8", saturation=saturation, shift=2)
    rng = np.random.default_rng(2)
    a, b = full_scale("i8", (64, 96), rng), full_scale("i8", (96, 64), rng)
    monkeypatch.setattr(toolchain, "pyxrt", lambda: FakeXrt(g.design(64, 96, 64).config))
    flow = build(NPU1, "i8", "i8", (1, 1, 1), False, saturation=saturation, shift=2, wide=True)
    p = a.astype(np.int64) @ b.astype(np.int64)
    q = np.frompyfunc(lambda v: round_exact(Fraction(int(v), 4), flow.rounding), 1, 1)(p.astype(object))
    outside = int(np.count_nonzero((q > 127) | (q < (-127 if saturation == "symmetric" else -128))))  # +-max kept
    word = "overflowed" if saturation == "none" else "saturated"
    with pytest.warns(NumericsWarning, match=f"{outside:,} of {p.size:,} outputs {word} .*"
                      + ("wrapped" if saturation == "none" else "clamped")):
        c = g(a, b)
    assert np.array_equal(c.astype(np.int64), independent(flow, [(a, b)])) and outside > p.size // 4
