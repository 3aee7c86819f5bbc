"""gemm_gen: generate, check and model whole-array GEMM designs for AMD Ryzen AI NPUs."""

from .config import GemmConfig
from .design import Design, build_design

__version__ = "0.1.0"
__all__ = ["Design", "GemmConfig", "__version__", "build_design"]
