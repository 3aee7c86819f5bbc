"""What design a config is, as `gemm-gen plan` and `gemm-gen predict` both report it: device,
problem, tiling, types, the accumulator, when C is rounded and the kernel variant."""

from __future__ import annotations

from .. import precision as prec
from ..config import GemmConfig
from ..rules import kernel_variant as kv


def design_keys(c: GemmConfig) -> dict[str, object]:
    """What design it is, as plan and predict both report it: device, problem, tiling, types."""
    return {
        "device": c.dev.name,
        "problem": [c.M, c.K, c.N],
        "tile": [c.m, c.k, c.n],
        "k_mt": c.k_mt,
        "rho": c.rho,
        "t_ma": c.t_ma,
        "mmul": list(c.mmul),
        "dtype_in": c.dtype_in,
        "dtype_b": c.dtype_b,
        "dtype_out": c.dtype_out,
        "acc": c.acc,
        "precision": c.precision.name,
        "b_col_maj": c.b_col_maj,
        "b_pack": c.b_pack,
        "n_aie_cols": c.cols,
        "accumulator": accumulator(c),
        "rounding_of_c": c_rounding(c),
        "kernel_variant": variant_info(c),
        "convert_once": bool(c.convert_once),
    }


def variant_info(c: GemmConfig) -> dict[str, object]:
    """The kernel variant: accumulators per cluster, the pipelined loop, the code estimate."""
    v = c.variant
    block = c.block_kernel  # bfp16 kernels: one fixed variant of their own template
    code = (None if block else
            int(kv.code_bytes(c.dev, c.dtype_in, c.mmul, bool(c.emulate_bf16_with_bfp16), v.expansion, v.loops,
                              c.k, c.n)))
    return {"name": v.name, "expansion": list(v.expansion), "loops": v.loops,
            "accumulator_sets": None if block else kv.acc_sets(c.dev, c.dtype_in, c.mmul, v.expansion),
            "code_bytes_estimate": code, "program_bytes": c.dev.isa.program_bytes,
            "chosen": "given" if (c.expansion, c.kernel_loops) != (None, None) else "automatic"}


def accumulator(c: GemmConfig) -> str:
    """The kernel's accumulator as the AIE API names it, and what that means for C."""
    if c.t_in.is_float:
        return "accfloat (fp32 lanes)"
    acc = c.acc_bits
    if acc == c.t_out.bits:
        return f"acc{acc} (the {c.dtype_out} C stays in it: loaded and stored unshifted)"
    return f"acc{acc} ({c.dtype_out} C shift-round-saturated out of it, shift {c.shift})"


def c_rounding(c: GemmConfig) -> str:
    """When C is rounded (and saturated) into its output type: once, or after every k-step."""
    steps = c.call.k_steps
    narrow = "rounded" if c.t_out.is_float else "shift-round-saturated"
    if c.precision.converts_c:
        return (f"C accumulated in {c.acc} across all of K ({steps} k-step(s)), {narrow} once into {c.dtype_out} "
                f"after the last (--acc {prec.ACC_OUT}: per k-step, as mlir-aie and the papers)")
    if c.acc == c.dtype_out and c.acc != c.default_acc:
        return (f"C kept in {c.dtype_out} between calls (--acc {prec.ACC_OUT}): {narrow} after each of its {steps} "
                f"k-step(s), as mlir-aie's examples and the papers; drop --acc to round once")
    return f"C kept in the {c.acc} accumulator type across all of K: exact between calls, no conversion"
