"""Kernel sources: render templates/mm.cc.j2 (scalar types) or templates/mm_bfp16.cc.j2 (bfp16
precisions) for a KernelBuild (compiled with kernels/ on -I)."""

from .paths import kernel_include_dir, templates_dir
from .render import (
    BlockKernelParams,
    KernelParams,
    KernelSource,
    kernel_defines,
    kernel_params,
    kernel_source,
    kernel_symbols,
    render_kernel,
    source_file,
)

__all__ = [
    "BlockKernelParams",
    "KernelParams",
    "KernelSource",
    "kernel_defines",
    "kernel_include_dir",
    "kernel_params",
    "kernel_source",
    "kernel_symbols",
    "render_kernel",
    "source_file",
    "templates_dir",
]
