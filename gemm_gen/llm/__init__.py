"""Weights as language models ship them, read into our W4A16 weights (QuantB) without changing a weight.

    from gemm_gen.llm import load_gguf, load_awq, load_gptq, load_onnx
    layers = load_gguf("model.gguf")                 # {tensor name: LoadedWeights}, every Q4_0 matrix
    w = load_awq("model.safetensors", "model.layers.0.mlp.up_proj")
    w.quant                                          # QuantB: Gemm(dtype_in='bf16', dtype_b='i4', ...) runs it
    w.exact()                                        # float64 weights by the format's own rule
    print(w.text())                                  # its mapping and what bf16 scales cost it

Formats (docs/llm_weights.md): GGUF Q4_0 (gguf_file.py; Q8_0 refused in one line), AWQ GEMM and GPTQ int32
checkpoints in safetensors (safetensors_file.py), ONNX com.microsoft.MatMulNBits with bits=4 (onnx_file.py).
Each reads its file with the format's own package (the [llm] extra: gguf, safetensors, onnx), imported when
a loader first runs, never by `import gemm_gen`. `gemm_gen.app.linear.Linear` runs the weights, on npu2 in plain
bf16 (within 1% per layer) unless asked for the faster bfp16 datapath (not within it: docs/llm_weights.md section 4);
`Gemm` itself runs npu2's bfp16 datapath by default.
"""

from .gguf_file import load_gguf
from .onnx_file import load_onnx
from .safetensors_file import load_awq, load_gptq
from .weights import LoadedWeights, ScaleLoss

__all__ = ["LoadedWeights", "ScaleLoss", "load_awq", "load_gguf", "load_gptq", "load_onnx"]
