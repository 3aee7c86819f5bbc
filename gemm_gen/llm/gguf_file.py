"""llama.cpp's GGUF weights: Q4_0 tensors as W4A16 weights; Q8_0 refused (why: `Q8_0_REFUSAL`).

What a Q4_0 tensor means (read at ggml-org/ggml @d99724f2, the library llama.cpp vendors):
- src/ggml-common.h lines 194-198: `block_q4_0` is 32 weights (QK4_0) in 18 bytes, `ggml_half d` (fp16)
  then `uint8_t qs[16]`;
- src/ggml-quants.c lines 459-476, `dequantize_row_q4_0`: byte j of qs holds weight j in its low nibble and
  weight j + 16 in its high nibble (not neighbours: the block's two halves), each w = d * (nibble - 8), in
  fp32 (an fp16 d times an integer in [-8, 7] is exact there);
- include/ggml.h lines 1425-1428, `ggml_mul_mat(a, b)`: a weight of ne = [k, n] (k columns, n rows) times
  activations of k columns; so a GGUF weight is n rows of k inputs, blocks of 32 running along k.
gguf-py (PyPI `gguf` 0.19.0, the package the tests write with): gguf_reader.py line 330 gives NumPy's shape
as the reversed ne, (n, k), and a quantized tensor as its raw bytes, (n, k / 32 * 18); gguf/quants.py's
`Q4_0.dequantize_blocks` (line 241) is the same rule in NumPy.

So a tensor of ne [K, N] is our B (K x N) with its rows along K: q = nibble - 8, no zero point, d the
scale of 32 rows of K (our group size 32), fp16 rounded to bf16.
"""

from __future__ import annotations

from os import PathLike

import numpy as np

from .weights import LoadedWeights, from_unsigned, need, refuse

SOURCE = "GGUF Q4_0"
QK4_0 = 32  # weights per block (ggml-common.h QK4_0)
BLOCK_BYTES = 2 + QK4_0 // 2  # fp16 d, then 16 bytes of nibbles
# ggml's type numbers (include/ggml.h lines 392, 398: GGML_TYPE_Q4_0 = 2, GGML_TYPE_Q8_0 = 8)
Q4_0, Q8_0 = 2, 8
Q8_0_REFUSAL = ("Q8_0 holds 8-bit weights with an fp16 scale per 32 along K; our group-scaled weights are int4 "
                "(bf16 x i4, W4A16), and i8 x i8 has no scales that change along K to take it")


def q4_0_codes(raw: np.ndarray, K: int) -> tuple[np.ndarray, np.ndarray]:
    """(u, d) of a Q4_0 tensor's raw bytes ((N, K / 32 * 18) uint8): u the unsigned codes as our B (K x N,
    [0, 15]), d the fp16 scales (K / 32 x N)."""
    raw = np.asarray(raw, np.uint8)
    N = raw.shape[0]
    blocks = raw.reshape(N, K // QK4_0, BLOCK_BYTES)
    d = np.ascontiguousarray(blocks[..., :2]).view(np.float16)[..., 0]  # (N, K / 32), little-endian as ggml
    qs = blocks[..., 2:]
    u = np.concatenate([qs & 0xF, qs >> 4], axis=-1)  # weights j (low nibbles), then j + 16 (high nibbles)
    return u.reshape(N, K).T, d.T


def load_gguf(path: str | PathLike[str], names: list[str] | None = None) -> dict[str, LoadedWeights]:
    """The Q4_0 weight matrices of a GGUF file, by tensor name (all of them, or `names`, each of which must be
    a 2-D Q4_0 tensor: a named Q8_0 tensor, another type or another rank is refused in one line). Reading
    needs the `gguf` package (the [llm] extra)."""
    gguf = need("gguf", "reading GGUF files")
    reader = gguf.GGUFReader(str(path))
    if reader.byte_order != "I":  # gguf-py swaps typed arrays of a foreign-endian file, never raw block bytes
        raise refuse("GGUF", str(path), "the file's byte order is not this machine's, so its Q4_0 fp16 scales are "
                     "stored swapped", "convert the file on a machine of its byte order (llama.cpp's gguf tools)")
    tensors = {t.name: t for t in reader.tensors}
    wanted = list(names) if names is not None else [n for n, t in tensors.items() if int(t.tensor_type) == Q4_0
                                                   and len(t.shape) == 2]
    out: dict[str, LoadedWeights] = {}
    for name in wanted:
        if name not in tensors:
            raise refuse(SOURCE, name, f"no such tensor in {path}", f"use one of {sorted(tensors)[:8]}")
        t = tensors[name]
        kind = int(t.tensor_type)
        if kind == Q8_0:
            raise refuse("GGUF Q8_0", name, Q8_0_REFUSAL, "use a Q4_0 file, or dequantize it to bf16 weights "
                         "(gguf.quants.dequantize) for Gemm(dtype_in='bf16')")
        if kind != Q4_0:
            raise refuse("GGUF", name, f"type {gguf.GGMLQuantizationType(kind).name}: only Q4_0 maps onto our "
                         "int4 weights", "use a Q4_0 tensor")
        if len(t.shape) != 2:
            raise refuse(SOURCE, name, f"{len(t.shape)}-D (ne {list(map(int, t.shape))}): a weight matrix is 2-D",
                         "pass the names of 2-D weights")
        K, N = (int(x) for x in t.shape)  # ne = [k, n]
        u, d = q4_0_codes(t.data, K)
        out[name] = from_unsigned(name, SOURCE, u, d, QK4_0)
    return out
