"""The fused epilogue's rules (docs/epilogues.md section 3): which epilogue a GEMM's types can take, and
whether its epilogue tile fits the B object that carries it.

- Float outputs (bf16, from the fp32 accumulator) take a bias, ReLU / SiLU / GELU and clamp bounds;
  integer outputs (i8 / i16, from an int32 accumulator) take TFLite's per-channel requantization, with a
  bias and ReLU (its act_min); nothing else takes an epilogue.
- The epilogue runs in the one conversion of C after its last k-step: the wide accumulator is required
  (`--acc out` converts C after every k-step: refused), and so is a scalar kernel (the bfp16 kernels have
  none yet).
- The epilogue tile is one more B object per output tile: its bytes (epilogue.tile_layout) must fit the
  k x n B object, and a B that reaches the memtile in k_mt chunks (column-major) must be walked in
  k-steps (k_mt = k), so that the one extra k-step is a whole chunk.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...facts.dtypes import BF16
from ...facts.epilogue import Activation, Epilogue, tile_layout
from ...facts.errors import ConfigError, opt
from ...facts.precision import Precision
from ..request import ACTIVATIONS, REQUANTS
from . import Ints

FLOAT_ACTIVATIONS = ACTIVATIONS
INT_ACTIVATIONS = ("none", "relu")  # ReLU of a requantized output is its act_min (the zero point)
FLOAT_OUTS = ("bf16",)  # mlir-aie's bf16 sequences write bf16
REQUANT_OUTS = ("i8", "i16")
REQUANT_ACC = "i32"
NO_TILE_B = ("i4",)  # B types whose objects cannot carry the epilogue tile yet
_DROP = f"drop {opt('bias')}, {opt('activation')}, {opt('clamp')} and {opt('requant')}"  # every epilogue option


def epilogue_of(bias: bool, activation: str | None, clamp: tuple[float, float] | None,
                requant: str | None) -> Epilogue:
    """The Epilogue the options ask for (ConfigError for a name no epilogue has)."""
    name = activation or "none"
    if name not in ACTIVATIONS:
        raise ConfigError(f"unknown activation {name!r}", f"use {opt('activation', *ACTIVATIONS)}")
    if requant is not None and requant not in REQUANTS:
        raise ConfigError(f"unknown requantization {requant!r}", f"use {opt('requant', *REQUANTS)}")
    if clamp is not None:
        lo, hi = clamp
        # finite as the kernel holds them, in bf16 (3.4e38 rounds to infinity there)
        with np.errstate(over="ignore"):
            in_bf16 = [float(np.float32(v).astype(BF16.host)) if math.isfinite(v) else v for v in clamp]
        if not all(math.isfinite(v) for v in in_bf16) or lo > hi:
            raise ConfigError(f"clamp bounds {lo},{hi} are not finite LO <= HI in bf16",
                              f"give {opt('clamp')} LO,HI like -6,6")
    return Epilogue(bool(bias), Activation(name), None if clamp is None else (float(clamp[0]), float(clamp[1])),
                    None if requant is None else REQUANTS[requant])


def option_values(e: Epilogue) -> dict[str, Any]:
    """The options an Epilogue is made of (the inverse of epilogue_of): bias, activation, clamp, requant."""
    requant = next((name for name, form in REQUANTS.items() if form == e.requant), None)
    return {"bias": e.bias, "activation": e.activation.value, "clamp": e.clamp, "requant": requant}


def call_activation(e: Epilogue, name: str | None) -> str | None:
    """The activation a call selects, checked against what the build serves (ConfigError otherwise): a
    runtime-activation build takes any of its modes (None: identity, mode 0); any other build only its own."""
    if name is None or (not e.runtime and name == e.activation.value):
        return None if not e.runtime else name
    served = [a.value for a in e.modes]
    if not e.runtime:
        raise ConfigError(f"this build's activation is {e.activation.value}: a call cannot select {name}",
                          f"build with {opt('activation', 'runtime')} to choose per call, or drop the call's "
                          "activation")
    if name not in served:
        raise ConfigError(f"a runtime-activation build serves {', '.join(served)}, not {name!r}",
                          f"select one of {', '.join(served)}")
    return name


def types_problem(e: Epilogue, p: Precision, block_kernel: bool, shift: int) -> tuple[str, str] | None:
    """Why a GEMM of these types cannot take epilogue `e` ((what, fix) for a ConfigError), or None."""
    if e.is_identity:
        return None
    if p.block or block_kernel:
        return (f"an epilogue on the bfp16 kernels ({p.name}) is not built yet",
                f"use a scalar kernel ({opt('convert_once', False)} for bf16 on npu2), or drop the epilogue")
    if p.b in NO_TILE_B:  # the tile is packed in whole bytes into B's object; an int4 B walks words of nibbles
        return (f"an epilogue with {p.b} weights is not built yet (its tile would ride in a B object of {p.b})",
                f"use {opt('dtype_b', p.a)}, or {_DROP}")
    if p.out not in FLOAT_OUTS + REQUANT_OUTS:
        return (f"a {p.out} output takes no epilogue (float: {', '.join(FLOAT_OUTS)}; requantized: "
                f"{' or '.join(REQUANT_OUTS)} from {REQUANT_ACC})", _DROP)
    if not p.converts_c:
        return (f"the epilogue runs in C's one conversion after its last k-step, and {opt('acc', 'out')} converts C "
                "after every k-step", f"drop {opt('acc')} (the wide accumulator), or drop the epilogue")
    if p.out in FLOAT_OUTS:
        if e.requant is not None:
            return (f"{opt('requant')} is TFLite's integer requantization, not for a {p.out} output",
                    f"use {opt('dtype_out', *REQUANT_OUTS)} with integer inputs, or drop {opt('requant')}")
        return None
    if p.acc != REQUANT_ACC:
        return (f"requantization reads an {REQUANT_ACC} accumulator, and this {p.out} C accumulates in {p.acc}",
                f"use an mmul with a 32-bit accumulator ({opt('mmul_shape')}), or drop the epilogue")
    if e.requant is None:
        return (f"an epilogue on a {p.out} output is TFLite's requantization (bias, ReLU as act_min)",
                f"add {opt('requant', 'per_channel')}")
    if e.activation.value not in INT_ACTIVATIONS:
        return (f"{opt('activation', e.activation.value)} on a requantized {p.out} output: integer outputs take "
                f"{' or '.join(INT_ACTIVATIONS)} (ReLU is act_min)",
                f"use a bf16 output, or {opt('activation', 'relu')}")
    if e.clamp is not None:
        return (f"{opt('clamp')} on a requantized {p.out} output: its bounds are the call's act_min / act_max",
                f"drop {opt('clamp')} and pass act_min / act_max with the scales")
    if shift:
        return (f"{opt('shift', shift)} with {opt('requant')}: the requantization's shifts are per column (call data)",
                f"drop {opt('shift')}")
    return None


def tile_bytes(e: Epilogue, n: int) -> int:
    """Bytes of the epilogue tile of an n-column C tile (0: none read)."""
    layout = tile_layout(e, n)
    return 0 if layout is None else layout.nbytes


def tile_fits(e: Epilogue, k: Ints, n: Ints, b_bytes: int) -> Ints:
    """Whether the epilogue tile fits the k x n B object of `b_bytes` per element (arrays: per candidate).
    The tile's bytes are affine in n (tile_layout: arrays of n words and a fixed header)."""
    per_column = tile_bytes(e, 2) - tile_bytes(e, 1)
    fixed = tile_bytes(e, 1) - per_column
    return k * n * b_bytes >= per_column * n + fixed


def smallest_k(e: Epilogue, n: int, b_bytes: int, k_step: int) -> int:
    """The smallest k on the k_step grid whose k x n B object holds the epilogue tile."""
    rows = -(-tile_bytes(e, n) // (n * b_bytes))
    return max(k_step, -(-rows // k_step) * k_step)


def chunk_ok(e: Epilogue, b_chunked: bool, k: Ints, k_mt: Ints) -> Ints:
    """A B that reaches the memtile in k_mt chunks carries the extra k-step only as a whole chunk: k_mt = k."""
    return (k_mt == k) | (not (e.needs_tile and b_chunked))
