"""docs/changes.md's counts (issue 32): a new device, dtype pair or activation is written in its home and read
from there, not repeated elsewhere. Each test adds the new thing the way the counted example did (a Device
entry, a mixed mmul of a device) and fails if a reader still keeps its own copy of the fact."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gemm_gen.app import linear
from gemm_gen.backends.iron import device_class, lower
from gemm_gen.backends.kernel_source import render_kernel
from gemm_gen.design import build_design
from gemm_gen.design.build import kernel_build
from gemm_gen.design.ir import KernelBuild
from gemm_gen.facts import devices
from gemm_gen.facts.devices import NPU2
from gemm_gen.facts.epilogue import REFERENCE, Activation
from gemm_gen.facts.errors import ConfigError
from gemm_gen.facts.inputs import make_inputs
from gemm_gen.facts.precision import check_precision, resolve
from gemm_gen.spec.request import Types

from .. import iron_recorder
from ..conftest import small

# npu2's core on 4 columns (the counted example: a Krackan-like part), and npu2 with an i16 x i8 mmul
# (aie_api detail/aie2p/mmul_16_8.hpp: 8x4x8, acc32)
FOUR_COLUMNS = replace(NPU2, name="npu2k", aliases=(), columns=4,
                       column_devices={1: "npu2_1col", 2: "npu2_2col", 4: "npu2_4col"})
I16_I8 = replace(NPU2, mixed_mmul_shapes={**NPU2.mixed_mmul_shapes, "i16xi8": ((8, 4, 8),)},
                 peak_macs={**NPU2.peak_macs, "i16xi8": 256})


def test_a_second_device_of_a_target_renders_its_kernels(monkeypatch) -> None:
    """The renderer reads the core's facts from any device of the build's target (it asserted one per target)."""
    monkeypatch.setitem(devices.DEVICES, FOUR_COLUMNS.name, FOUR_COLUMNS)
    c = small("npu2k", "i8", "i32")
    assert "aie::mmul<8, 8, 8, T_in, T_b" in render_kernel(kernel_build(c))


def test_a_new_column_device_lowers_through_iron_without_an_edit(monkeypatch) -> None:
    """IRON's Device class of every aie.device in facts.devices is named by IRON's own rule, not listed again."""
    monkeypatch.setitem(devices.DEVICES, FOUR_COLUMNS.name, FOUR_COLUMNS)
    api, _ = iron_recorder.api()
    design = build_design(small("npu2k", "i8", "i32", N=2 * 4 * 16))
    assert str(lower(design, api).resolve_program()).startswith("device npu2_4col\n")
    assert [device_class(n) for n in ("npu1", "npu1_2col", "npu2", "npu2_4col")] == \
        ["NPU1", "NPU1Col2", "NPU2", "NPU2Col4"]


def test_a_mixed_pair_runs_where_the_device_has_its_mmul() -> None:
    """Which two scalar types multiply is the device's mixed mmul table, not a list in facts/precision.py."""
    p = resolve("i16", "i8", "i32", None)
    with pytest.raises(ConfigError, match="scalar kernels multiply one input type"):
        check_precision(p, NPU2)
    check_precision(p, I16_I8)


def test_a_mixed_pair_kernel_names_b_in_its_own_type(monkeypatch) -> None:
    monkeypatch.setitem(devices.DEVICES, "npu2", I16_I8)
    b = KernelBuild("aie2p", Types.of("i16", "i32", "i8"), 32, 8, 32, (8, 4, 8), False, False, "conv_even",
                    "saturate", 0)
    text = render_kernel(b)
    assert "using T_in = int16;" in text and "using T_b = int8;" in text and "using T_b_mem = int8;" in text


def test_a_narrower_b_is_drawn_in_its_own_type() -> None:
    a, b = make_inputs(16, 64, 32, "i16", "i32", seed=3, dtype_b="i8")
    assert a.dtype == np.int16 and b.dtype == np.int8 and b.min() < 0 < b.max()
    same = make_inputs(16, 64, 32, "i16", "i32", seed=3)
    assert same[1].dtype == np.int16 and np.array_equal(same[0], a)  # A's draw is unchanged


def test_a_linear_applies_every_float_activation_the_epilogue_has() -> None:
    assert set(linear.ACTIVATIONS) == {a.value for a in REFERENCE} - {Activation.NONE.value}
    assert all(linear.ACTIVATIONS[a.value] is REFERENCE[a] for a in REFERENCE if a is not Activation.NONE)
