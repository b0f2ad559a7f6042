r"""The one conjugate-gradient routine of the package (SSNAL's Newton systems, the certificate's
minimum-norm flow projection, and the flow-from-primal construction of :func:`certify`).

Notes
-----
Preconditioned CG for ``A X = B`` with ``A`` symmetric positive semidefinite and ``B`` in its range,
``X`` and ``B`` of shape (n, d), with ``r = B - A x``, ``z = M^{-1} r``:

.. math:: \alpha = \frac{\langle r, z\rangle}{\langle p, A p\rangle},\quad
   x \leftarrow x + \alpha p,\quad r \leftarrow r - \alpha A p,\quad
   p \leftarrow z' + \frac{\langle r', z'\rangle}{\langle r, z\rangle} p .

Inner products are either over the whole array (one system in ``n d`` unknowns) or per column
(``d`` independent systems sharing ``A``, each stopping on its own), chosen by ``columnwise``.
A direction of non-positive curvature ends the iteration (of that column), which happens in
floating point once the residual is at rounding level of a singular consistent system.

The curvature can also stay positive but tiny there: the residual's rounding-level component in the
null space of ``A`` then gets a huge step and the iteration diverges (seen on a flow system of two
disjoint free edges, residual 8e-17 -> 3e-3 -> ... -> overflow). In exact arithmetic the energy norm
of the error decreases, so ``||r_k|| <= sqrt(kappa(A)) ||r_j||`` for ``j < k`` (``kappa`` on the range
of ``A``, whatever the preconditioner): a column whose residual grows by more than
``DIVERGENCE_GROWTH = 1e8`` over its best has met a system no float64 iteration resolves
(``kappa > 1e16``); that step is undone and the column stops.

References
----------
.. [1] M. R. Hestenes, E. Stiefel, "Methods of conjugate gradients for solving linear systems",
   J. Res. Nat. Bur. Standards 49 (1952).
.. [2] Y. Saad, "Iterative Methods for Sparse Linear Systems", 2nd ed., SIAM 2003, Alg. 9.1.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

__all__ = ["conjugate_gradient"]

#: A residual this many times its best so far ends a column (see the module notes).
DIVERGENCE_GROWTH = 1e8


def conjugate_gradient(apply: Callable[[np.ndarray], np.ndarray], rhs: np.ndarray, *, atol, max_iter: int,
                       x0: np.ndarray | None = None, precond: Callable[[np.ndarray], np.ndarray] | None = None,
                       columnwise: bool = False, deadline: float | None = None):
    """Solve ``apply(X) = rhs`` by (preconditioned) conjugate gradients.

    Parameters
    ----------
    apply : callable
        ``X -> A X`` for a symmetric positive semidefinite ``A``.
    rhs : ndarray (n, d)
    atol : float or ndarray (d,)
        Stop when ``||rhs - A X|| <= atol`` (Frobenius norm, or per column when ``columnwise``).
    max_iter : int
    x0 : ndarray (n, d), optional
        Starting point (default zero).
    precond : callable, optional
        ``R -> M^{-1} R`` for a symmetric positive definite preconditioner ``M``.
    columnwise : bool
        Treat the ``d`` columns as independent systems (per-column step sizes and stopping).
    deadline : float, optional
        A ``time.perf_counter()`` value after which the iteration stops early.

    Returns
    -------
    X : ndarray (n, d)
    iterations : int
    residual : float or ndarray (d,)
        ``||rhs - A X||`` (per column when ``columnwise``), as tracked by the recursion.
    """
    def dot(a, b):
        return np.einsum("nd,nd->d", a, b) if columnwise else np.asarray(np.vdot(a, b))

    X = np.zeros_like(rhs) if x0 is None else x0.copy()
    R = rhs.copy() if x0 is None else rhs - apply(X)
    Z = R if precond is None else precond(R)
    P = Z.copy()
    rz = dot(R, Z)
    rr = rz if precond is None else dot(R, R)
    atol2 = np.square(atol)
    rr_best = rr
    stopped = np.zeros(np.shape(rr), dtype=bool)
    iterations = 0
    while iterations < max_iter:
        active = (rr > atol2) & ~stopped
        if not active.any() or (deadline is not None and time.perf_counter() > deadline):
            break
        AP = apply(P)
        pAp = dot(P, AP)
        ok = active & (pAp > 0)
        if not ok.any():
            break
        alpha = np.where(ok, rz / np.where(ok, pAp, 1.0), 0.0)
        R -= alpha * AP
        rr_new = dot(R, R)
        diverged = ok & ~(rr_new <= DIVERGENCE_GROWTH**2 * rr_best)  # NaN counts as diverged
        if diverged.any():  # undo that step and stop the column: X stays where its residual was
            R += np.where(diverged, alpha, 0.0) * AP
            alpha = np.where(diverged, 0.0, alpha)
            ok &= ~diverged
            stopped |= diverged
            if not ok.any():
                break
        X += alpha * P
        Z = R if precond is None else precond(R)
        rz_new = rr_new if precond is None else dot(R, Z)
        beta = np.where(ok, rz_new / np.where(rz > 0, rz, 1.0), 0.0)
        P *= beta
        P += Z
        rz = np.where(ok, rz_new, rz)
        rr = np.where(ok, rr_new, rr)
        rr_best = np.minimum(rr_best, rr)
        iterations += 1
    residual = np.sqrt(rr)
    return X, iterations, (residual if columnwise else float(residual))
