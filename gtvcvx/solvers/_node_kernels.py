r"""The fast core's node-side updates as single compiled passes over the ``n x d`` rows.

Around the loss's prox, an iteration of the Halpern PDHG loop forms ``W - tau D^T U``, the
extrapolated point ``sigma (2 W^+ - W)``, every few iterations the fixed-point residual's node
terms, and the Halpern move of ``W`` and of ``D^T U``. Written with NumPy these are about
fifteen passes over ``n x d`` arrays, most of them freshly allocated temporaries (page faults on
every allocation): on 10^6 points in 7-D (56 MB per array) they took ~0.27 s of a 0.55 s
iteration. :class:`NodeSweeps` runs each as one compiled pass (the Halpern moves by the edge
kernels' :func:`~gtvcvx.solvers._edge_kernels.edge_move`, the same formula row by row) into kept buffers when the arrays
are large (``n d >= gtvcvx._jit.MIN_ENTRIES``), and as the original NumPy expressions below that
(small problems keep their exact arithmetic).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from .. import _jit
from .._jit import njit
from ._edge_kernels import MOVE_HALPERN
from ._edge_kernels import _load as _edge_kernels
from ._kernels import axpy, scal

prange = range  # numba.prange once compiled (gtvcvx._jit.njit)
__all__ = ["NodeSweeps", "squared_distance"]


def node_step(W, DtU, tau, out):
    """``out <- W - tau_i (D^T U)_i`` row by row (the prox's argument)."""
    n, d = W.shape
    for i in prange(n):
        t = tau[i]
        for k in range(d):
            out[i, k] = W[i, k] - t * DtU[i, k]


def node_extrapolate(Wp, W, sigma, out):
    """``out <- sigma (2 W+ - W)`` (the point the dual step gathers)."""
    n, d = W.shape
    two_sigma = 2.0 * sigma
    for i in prange(n):
        for k in range(d):
            out[i, k] = two_sigma * Wp[i, k] - sigma * W[i, k]


def node_residual(W, Wp, inv_tau, DtU, DtUp):
    """``(sum_i ||w_i - w+_i||^2 / tau_i, 2 <W - W+, D^T U - D^T U+>)``: the node terms of the
    fixed-point residual in the PDHG metric."""
    n, d = W.shape
    diagonal = 0.0
    cross = 0.0
    for i in prange(n):
        row = 0.0
        row_cross = 0.0
        for k in range(d):
            dw = W[i, k] - Wp[i, k]
            row += dw * dw
            row_cross += dw * (DtU[i, k] - DtUp[i, k])
        diagonal += row * inv_tau[i]
        cross += row_cross
    return diagonal, 2.0 * cross


def squared_distance(A: np.ndarray, B: np.ndarray, weights: np.ndarray | None = None) -> float:
    """``sum_i w_i ||a_i - b_i||^2`` over the rows of two equal-shape arrays (``w`` = 1 without
    ``weights``): one compiled pass without temporaries on large arrays, NumPy below
    ``gtvcvx._jit.MIN_ENTRIES`` entries."""
    if A.size < _jit.MIN_ENTRIES:
        diff = A - B
        if weights is None:
            return float(np.einsum("nd,nd->", diff, diff))
        return float(np.einsum("nd,nd->n", diff, diff) @ weights)
    weights = np.ones(A.shape[0]) if weights is None else np.ascontiguousarray(weights, dtype=float)
    return float(_load(_jit.parallel_threads() > 1)[2](A, B, weights, A, A)[0])  # node_residual's diagonal (its cross term is 0)


class NodeSweeps:
    """The node-side updates of one solve, compiled or NumPy by size.

    Parameters
    ----------
    n, d : int
        Rows and columns of the node arrays.
    compiled : bool, optional
        Default: ``n d >= gtvcvx._jit.MIN_ENTRIES``.
    threads : int, optional
        As for :class:`~gtvcvx.solvers._edge_kernels.EdgeSweep` (default
        :func:`gtvcvx._jit.parallel_threads`).
    """

    def __init__(self, n: int, d: int, compiled: bool | None = None, threads: int | None = None):
        self.compiled = n * d >= _jit.MIN_ENTRIES if compiled is None else bool(compiled)
        self._buffers = (np.empty((n, d)), np.empty((n, d))) if self.compiled else None
        if self.compiled:
            parallel = (_jit.parallel_threads() if threads is None else int(threads)) > 1
            self._step, self._extrapolate, self._residual = _load(parallel)
            self._move = _edge_kernels(parallel)[0]  # edge_move: the same Halpern formula, row by row

    def step(self, W, DtU, tau, tau_col):
        """``W - tau D^T U`` (a kept buffer when compiled: valid until the next call)."""
        if not self.compiled:
            return W - tau_col * DtU
        out = self._buffers[0]
        self._step(W, DtU, tau, out)
        return out

    def extrapolate(self, Wp, W, sigma: float):
        """``sigma (2 W+ - W)`` (a kept buffer when compiled)."""
        if not self.compiled:
            return sigma * (2.0 * Wp - W)
        out = self._buffers[1]
        self._extrapolate(Wp, W, float(sigma), out)
        return out

    def residual(self, W, Wp, inv_tau, DtU, DtUp) -> tuple[float, float]:
        """The node terms ``(diagonal, cross)`` of the fixed-point residual."""
        if not self.compiled:
            dW = W - Wp
            return float(np.einsum("nd,nd->n", dW, dW) @ inv_tau), 2.0 * float(np.vdot(dW, DtU - DtUp))
        return self._residual(W, Wp, inv_tau, DtU, DtUp)

    def halpern(self, Wp, W, W0, a: float, b: float, rho: float):
        """The Halpern point ``a ((1 + rho) W+ - rho W) + b W0`` of the node rows (in ``W``'s
        buffer when compiled and ``W`` is neither ``W+`` nor ``W0``)."""
        if not self.compiled:
            return a * ((1.0 + rho) * Wp - rho * W) + b * W0
        out = W if (W is not Wp and W is not W0) else W.copy()
        self._move(MOVE_HALPERN, a, b, rho, out, Wp, W0)
        return out

    def halpern_inplace(self, Xp, X, X0, a: float, b: float, rho: float) -> None:
        """``X <- a ((1 + rho) X+ - rho X) + b X0`` in place (the divergences ``D^T U``)."""
        if not self.compiled:
            scal(-a * rho, X)
            axpy(Xp, X, a * (1.0 + rho))
            axpy(X0, X, b)
            return
        self._move(MOVE_HALPERN, a, b, rho, X, Xp, X0)


@cache
def _load(parallel: bool = False):
    """The node kernels compiled by numba (``parallel``: the threaded build), their
    specializations loaded now."""
    kernels = njit(node_step, node_extrapolate, node_residual, purpose="the fast core's node kernels",
                   parallel=parallel)
    step, extrapolate, residual = kernels
    X, t = np.zeros((1, 1)), np.ones(1)
    step(X, X, t, X.copy())
    extrapolate(X, X, 1.0, X.copy())
    residual(X, X, t, X, X)
    residual(X, X.astype(np.float32), t, X, X)  # (squared_distance to a single-precision flow anchor)
    return kernels
