"""Generalized MOCHA penalty ``phi(v) = (1/2) v^T Q v`` with a fixed positive definite ``Q``."""

from __future__ import annotations

import numpy as np
from scipy.linalg import solve_triangular

from ._core import SquaredNorm2, register_penalty

__all__ = ["QuadraticForm"]


@register_penalty
class QuadraticForm(SquaredNorm2):
    """Quadratic form ``phi(v) = (1/2) v^T Q v`` (the generalized MOCHA penalty).

    Parameters
    ----------
    Q : array_like (d, d)
        Symmetric positive definite. ``Q = I`` is :class:`~gtvcvx.penalties.SquaredNorm2`.

    Notes
    -----
    With the Cholesky factor ``Q = L L^T`` and the eigendecomposition ``Q = V diag(mu) V^T``:
    ``c phi^*(u / c) = u^T Q^{-1} u / (2 c)`` (the indicator of ``{0}`` when ``c = 0``);
    prox ``(I + t c Q)^{-1} z``; dual prox ``((t / c) Q^{-1} + I)^{-1} u``, the paper's dual
    update operator; Fenchel-Young term ``||sqrt(c) L^T z - L^{-1} u / sqrt(c)||^2 / 2``, a sum
    of squares. ``Q`` must be definite: the paper's dual operator uses ``Q^{-1}``, and for a
    singular ``Q`` the conjugate is finite only on ``range(Q)``, which a flow computed in
    floating point never meets exactly.

    References
    ----------
    .. [1] Y. SarcheshmehPour, Y. Tian, L. Zhang, A. Jung, "Clustered federated learning via
       generalized total variation minimization", IEEE Trans. Signal Processing 71, 2023,
       Sec. III (after the MOCHA dual update operator).
    .. [2] V. Smith, C.-K. Chiang, M. Sanjabi, A. Talwalkar, "Federated multi-task learning",
       NeurIPS 2017.
    """

    name = "quadratic_form"
    is_norm = False
    traits = ("quadratic", "smooth")
    conjugate_prox_rows = None  # a d x d map per row, not SquaredNorm2's scaling

    def __init__(self, Q):
        try:
            Q = np.array(Q, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"penalty 'quadratic_form': Q must be a square matrix of numbers, got {Q!r}") from None
        if Q.ndim != 2 or Q.shape[0] != Q.shape[1] or Q.shape[0] == 0:
            raise ValueError(f"penalty 'quadratic_form': Q must be a square (d, d) matrix, got shape {Q.shape}")
        if not np.isfinite(Q).all():
            raise ValueError("penalty 'quadratic_form': Q must be finite")
        if not np.allclose(Q, Q.T, rtol=1e-12, atol=1e-12 * np.abs(Q).max(initial=0.0)):
            raise ValueError("penalty 'quadratic_form': Q must be symmetric")
        Q = 0.5 * (Q + Q.T)
        mu, V = np.linalg.eigh(Q)
        d = Q.shape[0]
        if not mu[0] > 16 * d * np.finfo(float).eps * max(mu[-1], 0.0):
            why = ("positive definite" if mu[0] <= 0 else
                   f"positive definite to float64's resolution: its condition number {mu[-1] / mu[0]:.3g} is beyond "
                   f"{1 / (16 * d * np.finfo(float).eps):.3g} (rescale the coordinates)")
            raise ValueError(f"penalty 'quadratic_form': Q must be {why}; its smallest eigenvalue is {mu[0]:.3g} "
                             f"(largest {mu[-1]:.3g})")
        self.Q = Q
        self.Q.flags.writeable = False
        self._mu, self._V = mu, V
        self._L = np.linalg.cholesky(Q)
        self._L_inv_T = solve_triangular(self._L, np.eye(d), lower=True).T

    @classmethod
    def example(cls, d: int, rng) -> "QuadraticForm":
        """A random, moderately conditioned positive definite ``Q``."""
        A = rng.normal(size=(d, d))
        return cls(A @ A.T / d + 0.5 * np.eye(d))

    def check_dimension(self, d: int) -> None:
        if d != self.Q.shape[0]:
            raise ValueError(f"penalty 'quadratic_form' has Q of size {self.Q.shape[0]}, but the models "
                             f"have d = {d}")

    def _primal_coords(self, Z):
        """Rows ``L^T z_e`` (so ``||.||^2 = z^T Q z``); arrays or CVXPY expressions."""
        self.check_dimension(Z.shape[1])
        return Z @ self._L

    def _dual_coords(self, U):
        """Rows ``L^{-1} u_e`` (so ``||.||^2 = u^T Q^{-1} u``); arrays or CVXPY expressions."""
        self.check_dimension(U.shape[1])
        if isinstance(U, np.ndarray):
            return solve_triangular(self._L, U.T, lower=True).T
        return U @ self._L_inv_T  # CVXPY: rows u^T L^{-T} = (L^{-1} u)^T

    def difference_bound(self, scale):
        """``c z^T Q z / 2 <= V  =>  ||z|| <= sqrt(2 / (c mu_min)) V**0.5``."""
        scale = np.asarray(scale, dtype=float)
        with np.errstate(divide="ignore"):
            unit = np.sqrt(2.0 / (np.where(scale > 0, scale, 1.0) * self._mu[0]))
        return np.where(scale > 0, unit, np.inf), 0.5

    def _subgradient_flow(self, Z, scale, cut):
        self.check_dimension(Z.shape[1])
        return scale[:, None] * (Z @ self.Q), np.zeros(Z.shape, dtype=bool)

    def _prox(self, Z, step, scale):
        self.check_dimension(Z.shape[1])
        coords = Z @ self._V
        coords /= 1.0 + (np.asarray(step).reshape(-1, 1) * scale[:, None]) * self._mu[None, :]
        # edges without capacity keep z exactly (the round trip through the eigenbasis is not exact)
        np.copyto(Z, coords @ self._V.T, where=(scale > 0)[:, None])
        return Z

    def _prox_conjugate(self, U, step, scale):
        self.check_dimension(U.shape[1])
        coords = U @ self._V
        weight = scale[:, None] * self._mu[None, :]
        coords *= weight / (weight + np.asarray(step).reshape(-1, 1))
        np.copyto(U, coords @ self._V.T)
        return U

    def content(self) -> dict:
        return {"Q": self.Q}

    def __repr__(self) -> str:
        return f"QuadraticForm(Q={self.Q.tolist()})"

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.Q.tobytes()))
