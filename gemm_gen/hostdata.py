"""Host buffers of a design: inputs zero-padded to the native size in their DRAM layout, C cropped."""

from __future__ import annotations

import numpy as np

from .config import GemmConfig


def pad_inputs(c: GemmConfig, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A (M x K) and B (K x N, logical) as the DRAM buffers the design reads: A Mp x Kp row-major;
    B Kp x Np row-major, or Np x Kp (B^T) when B is column-major."""
    a_pad = np.zeros((c.Mp, c.Kp), dtype=c.t_in.host)
    a_pad[: c.M, : c.K] = a
    if c.b_col_maj:
        b_pad = np.zeros((c.Np, c.Kp), dtype=c.t_in.host)
        b_pad[: c.N, : c.K] = b.T
    else:
        b_pad = np.zeros((c.Kp, c.Np), dtype=c.t_in.host)
        b_pad[: c.K, : c.N] = b
    return a_pad, b_pad


def crop_output(c: GemmConfig, c_flat: np.ndarray) -> np.ndarray:
    """The M x N result from the padded Mp x Np C buffer."""
    return np.asarray(c_flat).reshape(c.Mp, c.Np)[: c.M, : c.N]
