"""Allocation-free building blocks for the fast core's hot loop.

Large ``|E| x d`` temporaries cost page faults on every allocation, so the loop keeps a fixed
set of buffers and updates them with BLAS level-1 routines and sparse products written into
preallocated output.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg.blas import daxpy, dscal

__all__ = ["axpy", "scal", "SparseTimesDense"]


def axpy(x: np.ndarray, y: np.ndarray, a: float) -> None:
    """``y += a * x`` in place (C-contiguous float64 arrays of equal size)."""
    if y.size:
        daxpy(x.reshape(-1), y.reshape(-1), a=a)


def scal(a: float, x: np.ndarray) -> None:
    """``x *= a`` in place."""
    if x.size:
        dscal(a, x.reshape(-1))


class SparseTimesDense:
    """``out (+)= A @ X`` for a CSR matrix ``A`` and a C-contiguous dense ``X``, into a given buffer.

    Uses SciPy's compiled CSR kernel directly when available (checked once against ``A @ X``)
    and falls back to ``A @ X`` otherwise.
    """

    def __init__(self, A):
        self.A = A.tocsr()
        self.A.sort_indices()
        self._kernel = None
        try:
            from scipy.sparse import _sparsetools

            kernel = _sparsetools.csr_matvecs
            probe = np.arange(A.shape[1] * 2, dtype=float).reshape(A.shape[1], 2)
            out = np.zeros((A.shape[0], 2))
            kernel(A.shape[0], A.shape[1], 2, self.A.indptr, self.A.indices, self.A.data,
                   probe.reshape(-1), out.reshape(-1))
            if np.allclose(out, self.A @ probe):
                self._kernel = kernel
        except Exception:  # noqa: BLE001 - any change in SciPy internals: use the public product
            self._kernel = None

    def __call__(self, X: np.ndarray, out: np.ndarray, accumulate: bool = False) -> np.ndarray:
        """``out = A @ X``, or ``out += A @ X`` with ``accumulate=True``."""
        if self._kernel is None:
            if accumulate:
                out += self.A @ X
            else:
                out[...] = self.A @ X
            return out
        if not accumulate:
            out.fill(0.0)
        self._kernel(self.A.shape[0], self.A.shape[1], X.shape[1], self.A.indptr, self.A.indices,
                     self.A.data, np.ascontiguousarray(X).reshape(-1), out.reshape(-1))
        return out
