"""What design a config is, as `gemm-gen plan` and `gemm-gen predict` both report it: device,
problem, tiling, types, the accumulator, when C is rounded and the kernel variant, read from a built Design
(its config's records and its KernelBuild)."""

from __future__ import annotations

from dataclasses import dataclass

from ..facts import precision as prec
from ..facts.dtypes import dtype
from ..facts.epilogue import Epilogue
from ..facts.errors import opt, spelled
from ..spec.config import GemmConfig
from ..spec.request import Layout, Problem, Tiling, Types
from ..spec.rules import array
from ..spec.rules import kernel_variant as kv
from .ir import Design, KernelBuild


@dataclass(frozen=True)
class VariantInfo:
    """The kernel variant: accumulators per cluster, the pipelined loop, the code estimate."""

    name: str
    expansion: tuple[int, int]  # er x et accumulators per cluster
    loops: str
    accumulator_sets: int | None  # None: a bfp16 kernel (one fixed variant of its own template)
    code_bytes_estimate: int | None  # None: as accumulator_sets
    program_bytes: int  # the program memory the code must fit
    chosen: str  # "given" (--expansion / --kernel-loops) or "automatic"

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "expansion": list(self.expansion), "loops": self.loops,
                "accumulator_sets": self.accumulator_sets, "code_bytes_estimate": self.code_bytes_estimate,
                "program_bytes": self.program_bytes, "chosen": self.chosen}


@dataclass(frozen=True)
class AccSplit:
    """A converted C's accumulator in place (spec/rules/l1.c_split_blocks): its first blocks in the C object, the
    rest in the worker's C acc buffer."""

    block: tuple[int, int]  # rows x columns of one accumulator block (an r x t mmul block, an 8 x 8 tile)
    blocks: int  # of the m x n tile
    in_object: int
    unit: int  # blocks the kernel addresses through one pointer: the split falls between whole units

    def to_json(self) -> dict[str, object]:
        return {"block": list(self.block), "blocks": self.blocks, "in_object": self.in_object, "unit": self.unit}


def acc_split(b: KernelBuild) -> AccSplit | None:
    """Where a converted C's accumulator lives in kernel build `b`, None when C is not converted."""
    if not b.types.precision.converts_c:
        return None
    values, unit = b.acc_block
    r, _, t = b.mmul
    q = dtype(prec.BFP16).tile_rows
    block = (q, q) if b.block_kernel else (r, t)
    return AccSplit(block, b.m * b.n // values, b.c_split_elems // values, unit)


@dataclass(frozen=True)
class DesignKeys:
    """What design it is, as plan and predict both report it: device, problem, tiling, types (the config's own
    records: spec.Problem, Tiling, Types, Layout), and what they mean for C and the kernel."""

    device: str
    size: Problem
    tiling: Tiling
    t_ma: int
    mmul: tuple[int, int, int]
    types: Types
    layout: Layout
    n_aie_cols: int
    accumulator: str  # accumulator(config)
    rounding_of_c: str  # c_rounding(config)
    kernel_variant: VariantInfo
    convert_once: bool
    mapping: str = "whole-array"  # spec.MAPPINGS: every core row, or one (decode)
    epilogue: Epilogue = Epilogue()  # the fused epilogue (reported only when there is one)
    task_span: int = 1  # output blocks per shim task (design/spans.py; reported only when not 1)
    acc_split: AccSplit | None = None  # where a converted C's accumulator lives (None: C is not converted)

    def to_json(self) -> dict[str, object]:
        t, lay = self.types, self.layout
        return {
            "device": self.device,
            "problem": [self.size.M, self.size.K, self.size.N],
            "tile": [self.tiling.m, self.tiling.k, self.tiling.n],
            "k_mt": self.tiling.k_mt,
            "rho": self.tiling.rho,
            "t_ma": self.t_ma,
            "mmul": list(self.mmul),
            "dtype_in": t.dtype_in,
            "dtype_b": t.dtype_b,
            "dtype_out": t.dtype_out,
            "acc": t.acc,
            "precision": t.precision.name,
            "b_col_maj": lay.b_col_maj,
            "b_pack": lay.b_pack,
            "n_aie_cols": self.n_aie_cols,
            "accumulator": self.accumulator,
            "rounding_of_c": self.rounding_of_c,
            "kernel_variant": self.kernel_variant.to_json(),
            "convert_once": self.convert_once,
            "layouts": {name: "column-major" if col else "row-major"
                        for name, col in (("A", lay.a_col_maj), ("B", lay.b_col_maj), ("C", lay.c_col_maj))},
            **({} if self.epilogue.is_identity else {"epilogue": self.epilogue.to_json()}),
            "mapping": self.mapping,
            **({} if self.task_span == 1 else {"task_span": self.task_span}),
            **({} if self.acc_split is None else {"acc_split": self.acc_split.to_json()}),
        }


def design_keys(design: Design) -> DesignKeys:
    """What design it is, as plan and predict both report it: the config's own records, and the kernel the build
    made of them (the Design's KernelBuild)."""
    c, b = design.config, design.build
    return DesignKeys(c.dev.name, c.size, c.tiling, b.t_ma, b.mmul, c.types, c.layout, c.array.cols,
                      accumulator(c, b), c_rounding(c, b), variant_info(c, b), b.convert_once,
                      array.mapping_of(c.dev, c.array.rows, c.array.cols), b.epilogue, c.runtime.task_span,
                      acc_split(b))


def variant_info(c: GemmConfig, b: KernelBuild) -> VariantInfo:
    """The kernel variant config `c` built as `b`, with its accumulator sets and code estimate."""
    v = b.variant
    block = b.block_kernel  # bfp16 kernels: one fixed variant of their own template
    code = (None if block else int(kv.code_bytes(c.dev, c.types.dtype_in, b.mmul, b.emulate_bf16_with_bfp16,
                                                 v.expansion, v.loops, b.k, b.n)))
    return VariantInfo(v.name, v.expansion, v.loops,
                       None if block else kv.acc_sets(c.dev, c.types.dtype_in, b.mmul, v.expansion,
                                                      b.emulate_bf16_with_bfp16),
                       code, c.dev.isa.program_bytes,
                       "given" if (c.kernel.expansion, c.kernel.kernel_loops) != (None, None) else "automatic")


def accumulator(c: GemmConfig, b: KernelBuild) -> str:
    """The kernel's accumulator as the AIE API names it, and what that means for C."""
    if c.types.t_in.is_float:
        return "accfloat (fp32 lanes)"
    acc = c.dev.acc_bits(c.types.dtype_in, b.mmul)
    if acc == c.types.t_out.bits:
        return f"acc{acc} (the {c.types.dtype_out} C stays in it: loaded and stored unshifted)"
    if b.epilogue.requant is not None:
        return f"acc{acc} ({c.types.dtype_out} C requantized out of it per column by the epilogue)"
    return f"acc{acc} ({c.types.dtype_out} C shift-round-saturated out of it, shift {b.shift})"


def c_rounding(c: GemmConfig, b: KernelBuild) -> str:
    """When C is rounded (and saturated) into its output type: once, or after every k-step."""
    steps = c.call.k_steps
    narrow = ("rounded" if c.types.t_out.is_float else "requantized (per column)" if b.epilogue.requant is not None
              else "shift-round-saturated")
    if c.types.precision.converts_c:
        return spelled(f"C accumulated in {c.types.acc} across all of K ({steps} k-step(s)), {narrow} once into "
                       f"{c.types.dtype_out} after the last ({opt('acc', prec.ACC_OUT)}: per k-step, as mlir-aie and "
                       "the papers)")
    if c.types.acc == c.types.dtype_out and c.types.acc != c.default_acc:
        return spelled(f"C kept in {c.types.dtype_out} between calls ({opt('acc', prec.ACC_OUT)}): {narrow} after "
                       f"each of its {steps} k-step(s), as mlir-aie's examples and the papers; drop {opt('acc')} to "
                       "round once")
    return f"C kept in the {c.types.acc} accumulator type across all of K: exact between calls, no conversion"
