"""The runtime-selected activation in the scalar kernel (docs/epilogues.md step 8): a build with
activation="runtime" compiles every bf16 activation, and convert(C, C_acc[, E], lut_ab, lut_cd, mode) switches once
per call on the int32 mode (epilogue.MODES, mlir-aie's numbering) the core read from its runtime-parameter buffer.

Compiled on the host against tests/aie_host (tests/backends/test_kernel_epilogue.py's harness): for every mode, C equals
gemm_gen/epilogue.float_epilogue of that activation bit for bit (on random and edge data), and equals the
compile-time build of the same activation. Mutants (two modes' cases swapped, a case that ignores its mode)
are caught; the compile-time builds render as before (no mode argument, no switch).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from gemm_gen.facts.devices import NPU1, NPU2
from gemm_gen.facts.epilogue import MODES, Activation, Epilogue

from . import test_kernel_epilogue as tke
from . import test_kernels as tk

RUNTIME = Activation.RUNTIME


@dataclass(frozen=True)
class RCase(tke.ECase):
    @property
    def id(self) -> str:
        return super().id.replace("-runtime", "-runtime-modes")


def _cases() -> list[RCase]:
    out = [RCase(tke.ebuild(dev, "bf16", "bf16", (1, 2, 2), Epilogue(bias, RUNTIME, clamp)))
           for dev in (NPU1, NPU2) for bias, clamp in ((False, None), (True, (-1.5, 6.0)))]
    out += [RCase(tke.ebuild(NPU1, "bf16", "bf16", (2, 2, 1), Epilogue(True, RUNTIME), mmul=(8, 8, 4),
                             c_col_maj=True, rounding="floor")),
            RCase(tke.ebuild(NPU2, "bf16", "bf16", (1, 2, 1), Epilogue(True, RUNTIME), mmul=(8, 8, 4), rho=2))]
    return out


CASES = _cases()
_SILU, _GELU = (f"    case MODE_{a}: convert_mode<MODE_{a}>(" for a in ("SILU", "GELU"))
MUTANTS = [
    replace(CASES[1], patches=((_SILU, _SILU.replace("case MODE_SILU", "case MODE_GELU_SWAP")),
                               (_GELU, _GELU.replace("case MODE_GELU", "case MODE_SILU")),
                               ("MODE_GELU_SWAP", "MODE_GELU")), mutant="modes-swapped"),
    replace(CASES[2], patches=(("    case MODE_RELU: convert_mode<MODE_RELU>(",
                                "    case MODE_RELU: convert_mode<MODE_NONE>("),), mutant="relu-case-ignores-mode"),
]


@pytest.fixture(scope="module")
def libraries() -> dict[str, Path | BaseException]:
    fixed = [tke.ECase(replace(c.build, epilogue=replace(c.build.epilogue, activation=a)))
             for c in CASES[:2] for a in MODES if a != Activation.NONE]
    return tk.compile_all([*CASES, *MUTANTS, *fixed])


def _lib(libraries: dict[str, Path | BaseException], case: tke.ECase) -> Path:
    lib = libraries[case.id]
    if isinstance(lib, BaseException):
        raise lib
    return lib


def _run(lib: Path, case: tke.ECase, act: Activation, seed: int):
    """convert with the mode of `act` on seeded data; (C, the expected C of the compile-time chain)."""
    b = case.build
    d = tke.float_data(b, seed)
    fn = getattr(ctypes.CDLL(str(lib)), b.symbols["convert"])
    fn.argtypes = [ctypes.c_void_p] * tke.pointer_args(b) + [ctypes.c_int32]
    got = tke.run_convert(lib, b, d, lambda *args: fn(*args, MODES[act]))
    return got, tke.expected(replace(b, epilogue=b.epilogue.selected(act)), d)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_mode_selected_at_run_time_equals_its_chain(libraries, case: RCase) -> None:
    lib = _lib(libraries, case)
    for act in MODES:
        for seed in range(2):
            got, want = _run(lib, case, act, seed)
            tk.assert_bit_equal(got, want, f"{case.build.object_file} mode {act.value}")


def test_equals_the_compile_time_build_of_each_activation(libraries) -> None:
    for case in CASES[:2]:
        for act in MODES:
            if act == Activation.NONE:
                continue
            fixed = tke.ECase(replace(case.build, epilogue=case.build.epilogue.selected(act)))
            d = tke.float_data(fixed.build, 4)
            plain = tke.run_convert(_lib(libraries, fixed), fixed.build, d)
            got, _ = _run(_lib(libraries, case), case, act, 4)
            tk.assert_bit_equal(got, plain, f"{case.build.object_file} mode {act.value} vs compile-time")


@pytest.mark.parametrize("case", MUTANTS, ids=lambda c: c.mutant)
def test_mutant_mode_switches_are_caught(libraries, case: RCase) -> None:
    lib = _lib(libraries, case)
    with pytest.raises(AssertionError, match="differ"):
        for act in MODES:
            for seed in range(2):
                got, want = _run(lib, case, act, seed)
                tk.assert_bit_equal(got, want, case.mutant)


def test_the_rendered_switch_and_signature() -> None:
    """A runtime build: one MODE_ constant per mode with epilogue.MODES' value, one case per activation, an int32
    mode parameter; a compile-time build has none of them."""
    text = tk.render_kernel(CASES[1].build)
    for act, mode in MODES.items():
        assert f"constexpr int MODE_{act.value.upper()} = {mode};" in text
    assert text.count("    case MODE_") == len(MODES) - 1 and "int32_t mode)" in text
    for act in (Activation.RELU, Activation.SILU, Activation.GELU):
        fixed = tk.render_kernel(replace(CASES[1].build, epilogue=Epilogue(True, act, (-1.5, 6.0))))
        assert "MODE_" not in fixed and "int32_t mode" not in fixed and "switch (mode)" not in fixed
