"""Allocation-free building blocks for the fast core's hot loop.

Large ``|E| x d`` temporaries cost page faults on every allocation, so the loop keeps a fixed
set of buffers and updates them with BLAS level-1 routines (the flows themselves go through the
compiled edge pass of :mod:`gtvcvx.solvers._edge_kernels`).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg.blas import daxpy, dscal

__all__ = ["axpy", "scal"]


def axpy(x: np.ndarray, y: np.ndarray, a: float) -> None:
    """``y += a * x`` in place (C-contiguous float64 arrays of equal size)."""
    if y.size:
        daxpy(x.reshape(-1), y.reshape(-1), a=a)


def scal(a: float, x: np.ndarray) -> None:
    """``x *= a`` in place."""
    if x.size:
        dscal(a, x.reshape(-1))
