"""gemm_gen's version, in a module of its own: the build stamps and the instruction-stream ledger read
it, and they sit below the package's `__init__` (which imports the operator from the application layer)."""

__version__ = "0.1.0"
