"""AWQ and GPTQ int4 checkpoints (safetensors): `qweight`, `qzeros` (int32 words of eight 4-bit fields) and
fp16 `scales` per layer, each format with its own packing.

AWQ, the GEMM layout (casper-hansen/AutoAWQ @88e4c76b):
- awq/modules/linear/gemm.py lines 135-158: `qweight` is (in_features, out_features / 8) int32, `qzeros`
  (in_features / group_size, out_features / 8) int32, `scales` (in_features / group_size, out_features) fp16;
  so the words pack along N (out_features), K running down the rows;
- gemm.py lines 219-227 (and 243-248 for qzeros): field i (bits 4i..4i+3) of word c holds column
  c * 8 + order_map[i], order_map = [0, 2, 4, 6, 1, 3, 5, 7] (awq/utils/packing_utils.py line 4, AWQ_ORDER);
- packing_utils.py lines 87-102, `dequantize_gemm`: w = (q - z) * s with q, z the unsigned fields (masked to 4
  bits) and s repeated over its group's rows. AutoAWQ computes it in fp16 (a rounding); the rule is the product.
GPTQ, AutoGPTQ's "gptq" checkpoint format (AutoGPTQ/AutoGPTQ @9f7d3707, auto_gptq/nn_modules/qlinear/):
- qlinear_cuda_old.py lines 50-74: `qweight` (in_features / 8, out_features) int32 packs along K (rows),
  `qzeros` (ceil(in_features / group_size), out_features / 8) along N, `scales` (same rows, out_features), and
  `g_idx` (in_features,) int32, i // group_size by default;
- lines 135-138: field j - i of qweight row `row` holds K row i..i+7 in order (sequential); lines 166-174: the zero
  points are stored minus one (`zeros -= 1`), fields sequential along N; lines 296-315, 348: the reader adds the
  one back (`zeros = zeros + 1`, then `& 0xF`) and computes w = scales * (weight - zeros);
- qlinear_cuda.py line 302: with g_idx, row k uses group g_idx[k] (act-order, desc_act). Only the trivial
  g_idx[k] = k // group_size is held here (ours are contiguous groups of K rows); any other is refused.
- AutoGPTQ writes `gptq_group_size`, `gptq_desc_act`, `gptq_checkpoint_format` into the safetensors metadata
  (auto_gptq/modeling/_base.py lines 561-566), read here when present.
GPTQModel's "gptq_v2" format stores the zero points as they are: ModelCloud/GPTQModel @f4c327a1
gptqmodel/utils/model.py lines 750-818 convert v1 to v2 by adding 1 to every 4-bit field (0x11111111 per word).
"""

from __future__ import annotations

from os import PathLike
from typing import Any

import numpy as np

from .weights import LoadedWeights, fields, from_unsigned, need, refuse

AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)  # AutoAWQ's order_map: field i holds column 8 c + AWQ_ORDER[i]
SEQUENTIAL = tuple(range(8))  # GPTQ's packing, in both directions
GPTQ_FORMATS = ("gptq", "gptq_v2")  # zero points stored minus one (AutoGPTQ), or as they are (GPTQModel v2)


def read_safetensors(path: str | PathLike[str]) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """(tensors, metadata) of a safetensors file, as NumPy arrays (needs the `safetensors` package)."""
    st = need("safetensors", "reading safetensors checkpoints")
    with st.safe_open(str(path), framework="numpy") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, dict(f.metadata() or {})


def _tensors(source: str, where: str | PathLike[str] | dict[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    if isinstance(where, dict):
        return {k: np.asarray(v) for k, v in where.items()}, {}
    return read_safetensors(where)


def _get(source: str, tensors: dict[str, np.ndarray], prefix: str, part: str, dtype: Any) -> np.ndarray:
    key = f"{prefix}.{part}"
    if key not in tensors:
        raise refuse(source, prefix, f"no tensor '{key}'", f"pass the layer's prefix, e.g. one of "
                     f"{sorted({k.rsplit('.', 1)[0] for k in tensors if k.endswith('.qweight')})[:6]}")
    t = tensors[key]
    if t.ndim != 2 or t.dtype != np.dtype(dtype):
        raise refuse(source, prefix, f"'{key}' is {t.ndim}-D {t.dtype}, not 2-D {np.dtype(dtype)}",
                     "pass a 4-bit checkpoint as its quantizer wrote it")
    return t


def _group(source: str, prefix: str, K: int, rows: int, given: int | None) -> int:
    """The group size: given (checked against the scale rows), else the one that the scale rows imply."""
    if given is not None:
        g = K if given == -1 else given  # -1: one group over all of K (both quantizers' convention)
        if -(-K // g) != rows:
            raise refuse(source, prefix, f"group size {given} gives {-(-K // g)} scale rows for K = {K}, the file "
                         f"has {rows}", "pass the checkpoint's group size")
        return g
    if K % rows:
        raise refuse(source, prefix, f"{rows} scale rows do not divide K = {K} evenly",
                     "pass group_size= (the checkpoint's quantization config says it)")
    return K // rows


def load_awq(where: str | PathLike[str] | dict[str, Any], prefix: str, group_size: int | None = None
             ) -> LoadedWeights:
    """One AWQ (GEMM layout) layer `prefix` of a safetensors file (or a dict of its tensors): `prefix.qweight`,
    `.qzeros`, `.scales` and, when present, `.bias`. The group size is `group_size` (the model's
    quantization config, `q_group_size`), else what the scale rows imply."""
    source = "AWQ"
    tensors, _ = _tensors(source, where)
    qweight = _get(source, tensors, prefix, "qweight", np.int32)
    qzeros = _get(source, tensors, prefix, "qzeros", np.int32)
    scales = _get(source, tensors, prefix, "scales", np.float16)
    K, N = qweight.shape[0], qweight.shape[1] * 8
    if scales.shape[1] != N or qzeros.shape != (scales.shape[0], qweight.shape[1]):
        raise refuse(source, prefix, f"qweight {qweight.shape}, qzeros {qzeros.shape} and scales {scales.shape} "
                     f"disagree (AutoAWQ: (K, N / 8), (G, N / 8), (G, N))", "pass an AWQ GEMM-layout checkpoint")
    g = _group(source, prefix, K, scales.shape[0], group_size)
    u = fields(qweight, AWQ_ORDER)  # (K, N)
    zu = fields(qzeros, AWQ_ORDER)
    bias = tensors.get(f"{prefix}.bias")
    return from_unsigned(prefix, f"AWQ (group {g})", u, scales, g, zu, bias)


def load_gptq(where: str | PathLike[str] | dict[str, Any], prefix: str, group_size: int | None = None,
              checkpoint_format: str | None = None) -> LoadedWeights:
    """One GPTQ layer `prefix` of a safetensors file (or a dict of its tensors): `prefix.qweight`, `.qzeros`,
    `.scales`, `.g_idx` when present, `.bias` when present. `group_size` and `checkpoint_format` ('gptq':
    AutoGPTQ's, zero points stored minus one; 'gptq_v2': GPTQModel's, stored as they are) default to the
    file's AutoGPTQ metadata, else to what the scale rows imply and 'gptq'. An act-order g_idx is refused."""
    source = "GPTQ"
    tensors, meta = _tensors(source, where)
    fmt = checkpoint_format or meta.get("gptq_checkpoint_format") or "gptq"
    if fmt not in GPTQ_FORMATS:
        raise refuse(source, prefix, f"checkpoint format {fmt!r}: the int32 GPTQ layouts are {GPTQ_FORMATS}",
                     "pass checkpoint_format='gptq' or 'gptq_v2' (marlin and others repack the words)")
    if group_size is None and "gptq_group_size" in meta:
        group_size = int(meta["gptq_group_size"])
    qweight = _get(source, tensors, prefix, "qweight", np.int32)
    qzeros = _get(source, tensors, prefix, "qzeros", np.int32)
    scales = _get(source, tensors, prefix, "scales", np.float16)
    K, N = qweight.shape[0] * 8, qweight.shape[1]
    if scales.shape[1] != N or qzeros.shape != (scales.shape[0], N // 8):
        raise refuse(source, prefix, f"qweight {qweight.shape}, qzeros {qzeros.shape} and scales {scales.shape} "
                     "disagree (AutoGPTQ: (K / 8, N), (G, N / 8), (G, N))", "pass a 4-bit GPTQ checkpoint")
    g = _group(source, prefix, K, scales.shape[0], group_size)
    g_idx = tensors.get(f"{prefix}.g_idx")
    if g_idx is not None:
        g_idx = np.asarray(g_idx).reshape(-1)
        trivial = np.arange(K) // g
        if g_idx.shape != (K,) or not np.array_equal(g_idx, trivial):
            first = int(np.argmax(g_idx != trivial)) if g_idx.shape == (K,) else 0
            raise refuse(source, prefix, f"g_idx is act-order (row {first} in group "
                         f"{int(g_idx[first]) if g_idx.size else '?'}, not {first // g}): our groups are contiguous "
                         "rows of K", "requantize without desc_act (act-order), or reorder K rows and A's columns "
                         "yourself")
    u = fields(qweight.T, SEQUENTIAL).T  # (K, N): field i of row r is K row 8 r + i
    stored = fields(qzeros, SEQUENTIAL)  # (G, N)
    zu = (stored + 1) & 0xF if fmt == "gptq" else stored
    bias = tensors.get(f"{prefix}.bias")
    return from_unsigned(prefix, f"GPTQ {fmt} (group {g})", u, scales, g, zu, bias)
