"""ONNX Runtime's `com.microsoft.MatMulNBits` (4-bit) nodes as W4A16 weights.

What the node means (microsoft/onnxruntime @004b79ed, docs/ContribOperators.md, section
"com.microsoft.MatMulNBits", generated from onnxruntime/core/graph/contrib_ops/contrib_defs.cc; read through the
search index by character offset, so cited by its section, not a line number):
- Y = A @ dequant(B) (+ bias), dequantized_weight = (quantized_weight - zero_point) * scale, blocks of
  `block_size` (a power of two >= 16) along K, one scale and zero point per block and output column;
- attributes K, N (required), bits (2, 4 or 8; 4 here), block_size (required);
- input B: uint8 (N, k_blocks, blob_size), k_blocks = ceil(K / block_size), blob_size = block_size * bits / 8,
  "the first 4 bits are stored in the lower 4 bits of a byte, and the second 4 bits ... in the higher 4 bits";
- scales: (N, k_blocks), the type of A (float, float16 or bfloat16);
- zero_points (optional): packed uint8 (N, ceil(k_blocks * bits / 8)) with B's bit packing, or unpacked in
  A's type (N, k_blocks); absent, 2^(bits - 1) = 8 for 4 bits;
- g_idx (optional, deprecated), bias (optional, (N,)).
ONNX Runtime's own quantizer writes exactly these shapes (onnxruntime 1.32.0, quantization/
matmul_nbits_quantizer.py `DefaultWeightOnlyQuantizer.qbits_block_quant`: packed (cols, k_blocks, blob_size),
zero_point (cols, ceil(k_blocks / 2)), scales (cols, k_blocks); no zero points when symmetric).
Older writers give scales and packed zero points flattened (N * k_blocks, and N * ceil(k_blocks / 2)
bytes): the same order, accepted.
"""

from __future__ import annotations

from os import PathLike
from typing import Any

import numpy as np

from .weights import LoadedWeights, from_unsigned, need, nibbles_low_first, refuse

SOURCE = "ONNX MatMulNBits"
DOMAIN = "com.microsoft"
OP = "MatMulNBits"


def _initializer(model: Any, numpy_helper: Any, node: Any, index: int) -> np.ndarray | None:
    """The constant behind input `index` of `node` (None where the input is absent or empty)."""
    if index >= len(node.input) or not node.input[index]:
        return None
    name = node.input[index]
    for init in model.graph.initializer:
        if init.name == name:
            return np.asarray(numpy_helper.to_array(init))
    raise refuse(SOURCE, node.name or node.output[0], f"input {index} ('{name}') is not an initializer: the weights "
                 "must be constants of the graph", "pass a model whose MatMulNBits weights are initializers")


def _attributes(node: Any, helper: Any) -> dict[str, Any]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def weights_of_node(model: Any, node: Any) -> LoadedWeights:
    """The LoadedWeights of one MatMulNBits node of a loaded ONNX model (its B, scales, zero points, bias)."""
    onnx = need("onnx", "reading ONNX models")
    name = node.name or node.output[0]
    at = _attributes(node, onnx.helper)
    bits = int(at.get("bits", 4))
    K, N, block = int(at["K"]), int(at["N"]), int(at["block_size"])
    if bits != 4:
        raise refuse(SOURCE, name, f"bits={bits}: our group-scaled weights are int4", "use a 4-bit MatMulNBits model")
    if int(at.get("weight_prepacked", 0)):
        raise refuse(SOURCE, name, "B is prepacked for an execution provider, not the documented layout",
                     "export the model without weight prepacking")
    k_blocks, blob = -(-K // block), block // 2
    get = lambda i: _initializer(model, onnx.numpy_helper, node, i)  # noqa: E731
    b, scales, zp, g_idx, bias = get(1), get(2), get(3), get(4), get(5)
    if b is None or scales is None:
        raise refuse(SOURCE, name, "B and scales are required inputs", "pass a complete MatMulNBits node")
    if b.dtype != np.uint8 or b.size != N * k_blocks * blob:
        raise refuse(SOURCE, name, f"B is {b.dtype} {b.shape}, not uint8 ({N}, {k_blocks}, {blob})",
                     "pass B as the spec packs it")
    if scales.size != N * k_blocks:
        raise refuse(SOURCE, name, f"scales have {scales.size} values, for {N} x {k_blocks} blocks",
                     f"give ({N}, {k_blocks}) scales")
    if g_idx is not None and not np.array_equal(np.asarray(g_idx).reshape(-1), np.arange(K) // block):
        raise refuse(SOURCE, name, "g_idx (deprecated) reorders K rows across blocks: our groups are contiguous",
                     "export without g_idx")
    codes = nibbles_low_first(b.reshape(N, k_blocks, blob)).reshape(N, k_blocks * block)[:, :K]  # element 2j low
    zu = None
    if zp is not None:
        if zp.dtype == np.uint8:  # packed like B: block 2j in the low nibble of byte j of row n
            per_row = -(-k_blocks // 2)
            if zp.size != N * per_row:
                raise refuse(SOURCE, name, f"packed zero points have {zp.size} bytes, for {N} x {per_row}",
                             f"give ({N}, {per_row}) uint8")
            zu = nibbles_low_first(zp.reshape(N, per_row))[:, :k_blocks]
        else:  # unpacked, in A's type: held only where each is an integer code in [0, 15]
            z = np.asarray(zp, np.float64).reshape(-1)
            if z.size != N * k_blocks or not np.isin(z, np.arange(16)).all():
                raise refuse(SOURCE, name, "float zero points that are not integers in [0, 15]: (q - z) s would "
                             "not be an int4 code times a scale", "quantize with integer zero points")
            zu = z.reshape(N, k_blocks).astype(np.uint8)
    return from_unsigned(name, f"{SOURCE} (block {block})", codes.T, scales.reshape(N, k_blocks).T, block,
                         None if zu is None else zu.T, bias)


def load_onnx(path: str | PathLike[str], names: list[str] | None = None) -> dict[str, LoadedWeights]:
    """Every 4-bit `com.microsoft.MatMulNBits` node of an ONNX model (or those named), by node name (its first
    output where it has none). Needs the `onnx` package (the [llm] extra)."""
    onnx = need("onnx", "reading ONNX models")
    model = onnx.load(str(path))
    nodes = {n.name or n.output[0]: n for n in model.graph.node if n.op_type == OP and n.domain == DOMAIN}
    wanted = list(names) if names is not None else list(nodes)
    out = {}
    for name in wanted:
        if name not in nodes:
            raise refuse(SOURCE, name, f"no such node in {path}", f"use one of {sorted(nodes)[:8]}")
        out[name] = weights_of_node(model, nodes[name])
    return out
