"""What design a config is, as `gemm-gen plan` and `gemm-gen predict` both report it: device,
problem, tiling, types, the accumulator, when C is rounded and the kernel variant."""

from __future__ import annotations

from dataclasses import dataclass

from .. import precision as prec
from ..config import GemmConfig
from ..epilogue import Epilogue
from ..errors import opt, spelled
from ..rules import array
from ..rules import kernel_variant as kv


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
class DesignKeys:
    """What design it is, as plan and predict both report it: device, problem, tiling, types."""

    device: str
    problem: tuple[int, int, int]  # M, K, N
    tile: tuple[int, int, int]  # m, k, n
    k_mt: int
    rho: int
    t_ma: int
    mmul: tuple[int, int, int]
    dtype_in: str
    dtype_b: str
    dtype_out: str
    acc: str
    precision: str
    b_col_maj: bool
    b_pack: str
    n_aie_cols: int
    accumulator: str  # accumulator(config)
    rounding_of_c: str  # c_rounding(config)
    kernel_variant: VariantInfo
    convert_once: bool
    a_col_maj: bool
    c_col_maj: bool
    mapping: str = "whole-array"  # spec.MAPPINGS: every core row, or one (decode)
    epilogue: Epilogue = Epilogue()  # the fused epilogue (reported only when there is one)
    task_span: int = 1  # output blocks per shim task (design/spans.py; reported only when not 1)

    def to_json(self) -> dict[str, object]:
        return {
            "device": self.device,
            "problem": list(self.problem),
            "tile": list(self.tile),
            "k_mt": self.k_mt,
            "rho": self.rho,
            "t_ma": self.t_ma,
            "mmul": list(self.mmul),
            "dtype_in": self.dtype_in,
            "dtype_b": self.dtype_b,
            "dtype_out": self.dtype_out,
            "acc": self.acc,
            "precision": self.precision,
            "b_col_maj": self.b_col_maj,
            "b_pack": self.b_pack,
            "n_aie_cols": self.n_aie_cols,
            "accumulator": self.accumulator,
            "rounding_of_c": self.rounding_of_c,
            "kernel_variant": self.kernel_variant.to_json(),
            "convert_once": self.convert_once,
            "layouts": {name: "column-major" if col else "row-major"
                        for name, col in (("A", self.a_col_maj), ("B", self.b_col_maj), ("C", self.c_col_maj))},
            **({} if self.epilogue.is_identity else {"epilogue": self.epilogue.to_json()}),
            "mapping": self.mapping,
            **({} if self.task_span == 1 else {"task_span": self.task_span}),
        }


def design_keys(c: GemmConfig) -> DesignKeys:
    """What design a config is, as plan and predict both report it."""
    return DesignKeys(c.dev.name, (c.M, c.K, c.N), (c.m, c.k, c.n), c.k_mt, c.rho, c.t_ma, c.mmul, c.dtype_in,
                      c.dtype_b, c.dtype_out, c.acc, c.precision.name, c.b_col_maj, c.b_pack, c.cols,
                      accumulator(c), c_rounding(c), variant_info(c), bool(c.convert_once), c.a_col_maj, c.c_col_maj,
                      array.mapping_of(c.dev, c.rows), c.epilogue, c.task_span)


def variant_info(c: GemmConfig) -> VariantInfo:
    """The kernel variant of a config, with its accumulator sets and code estimate."""
    v = c.variant
    block = c.block_kernel  # bfp16 kernels: one fixed variant of their own template
    code = (None if block else
            int(kv.code_bytes(c.dev, c.dtype_in, c.mmul, bool(c.emulate_bf16_with_bfp16), v.expansion, v.loops,
                              c.k, c.n)))
    return VariantInfo(v.name, v.expansion, v.loops,
                       None if block else kv.acc_sets(c.dev, c.dtype_in, c.mmul, v.expansion,
                                                      bool(c.emulate_bf16_with_bfp16)),
                       code, c.dev.isa.program_bytes,
                       "given" if (c.expansion, c.kernel_loops) != (None, None) else "automatic")


def accumulator(c: GemmConfig) -> str:
    """The kernel's accumulator as the AIE API names it, and what that means for C."""
    if c.t_in.is_float:
        return "accfloat (fp32 lanes)"
    acc = c.acc_bits
    if acc == c.t_out.bits:
        return f"acc{acc} (the {c.dtype_out} C stays in it: loaded and stored unshifted)"
    if c.epilogue.requant is not None:
        return f"acc{acc} ({c.dtype_out} C requantized out of it per column by the epilogue)"
    return f"acc{acc} ({c.dtype_out} C shift-round-saturated out of it, shift {c.shift})"


def c_rounding(c: GemmConfig) -> str:
    """When C is rounded (and saturated) into its output type: once, or after every k-step."""
    steps = c.call.k_steps
    narrow = ("rounded" if c.t_out.is_float else "requantized (per column)" if c.epilogue.requant is not None
              else "shift-round-saturated")
    if c.precision.converts_c:
        return spelled(f"C accumulated in {c.acc} across all of K ({steps} k-step(s)), {narrow} once into "
                       f"{c.dtype_out} after the last ({opt('acc', prec.ACC_OUT)}: per k-step, as mlir-aie and the "
                       "papers)")
    if c.acc == c.dtype_out and c.acc != c.default_acc:
        return spelled(f"C kept in {c.dtype_out} between calls ({opt('acc', prec.ACC_OUT)}): {narrow} after each of "
                       f"its {steps} k-step(s), as mlir-aie's examples and the papers; drop {opt('acc')} to round once")
    return f"C kept in the {c.acc} accumulator type across all of K: exact between calls, no conversion"
