"""Huber loss (lecture notes 000, Sec. 2 around eq. 5; Huber 1981)."""

from __future__ import annotations

import numpy as np

from ._core import register_loss
from ._margin import MarginLoss

__all__ = ["Huber"]


@register_loss
class Huber(MarginLoss):
    """Mean Huber loss per node: ``L_i(w) = (1/m_i) sum_k h_delta(x_k^T w - y_k)``.

    ``h_delta(u) = u^2 / 2`` for ``|u| <= delta`` and ``delta |u| - delta^2 / 2`` beyond: squared
    error near the fit, absolute error for outliers.

    Parameters
    ----------
    X, y : sequences of array_like
        Per-node features (m_i, d) and labels (m_i,), as for :class:`~gtvcvx.losses.SquaredError`.
    d : int, optional
        Dimension; needed only when no node holds data.
    delta : float, default 1.0
        Threshold between the quadratic and the linear part (> 0).

    Notes
    -----
    ``h^*(a) = a^2 / 2`` on ``|a| <= delta``, so ``phi^*(a; y) = y a + a^2 / 2`` on the box. With
    ``u = z - y`` and ``s = sign(u)`` the Fenchel-Young term is ``(u - a)^2 / 2`` for
    ``|u| <= delta`` and ``(a - delta s)^2 / 2 + (|u| - delta)(delta - a s)`` beyond, both sums
    of non-negative terms. ``h_delta / delta -> |u|`` as ``delta -> 0`` (the absolute error is
    its limit, lecture notes Sec. 2); CVXPY's ``huber(u, M)`` is ``2 h_M(u)``.

    References
    ----------
    .. [1] A. Jung, "CS-E4740 Federated Learning" lecture notes, 2023, Sec. 2, eq. (5) and
       Fig. 6 (``../shared/seeds/000``).
    .. [2] P. J. Huber, *Robust Statistics*, Wiley, 1981.
    """

    name = "huber"
    traits = ("smooth", "nonnegative")
    conic_form = "huber_residual"
    kappa = 1.0

    def __init__(self, X, y, d: int | None = None, *, delta: float = 1.0):
        try:
            delta = float(delta)
        except (TypeError, ValueError):
            raise ValueError(f"loss 'huber': delta must be a positive number, got {delta!r}") from None
        if not (np.isfinite(delta) and delta > 0):
            raise ValueError(f"loss 'huber': delta must be a positive number, got {delta!r}")
        self.delta = delta
        super().__init__(X, y, d)

    def _params(self) -> dict:
        return {"delta": self.delta}

    def scaled(self, factor: float) -> "Huber":
        """Labels and ``delta`` times ``factor``: ``h_{c delta}(c r) = c^2 h_delta(r)``."""
        return type(self)(self.X, [y * factor for y in self.y], d=self.d, delta=self.delta * factor)

    def _argument(self, W):
        return -self._sample_residuals(W)

    def _phi(self, u, y):
        au = np.abs(u)
        return np.where(au <= self.delta, 0.5 * u * u, self.delta * (au - 0.5 * self.delta))

    def _subgradient(self, u, y):
        return np.clip(u, -self.delta, self.delta)

    def _box(self, y):
        return np.full_like(y, -self.delta), np.full_like(y, self.delta)

    def _fenchel_young(self, u, y, a):
        s = np.sign(u)
        inner = 0.5 * (u - a) ** 2
        outer = 0.5 * (a - self.delta * s) ** 2 + (np.abs(u) - self.delta) * (self.delta - a * s)
        return np.where(np.abs(u) <= self.delta, inner, outer)

    def _kink_distance(self, u, y):
        return np.maximum(np.abs(u) - self.delta, 0.0) + np.where(np.abs(u) <= self.delta, 1.0, 0.0)

    def range_bound(self, value_bound: float) -> np.ndarray:
        """``||Q_i^T w|| <= (||y_i|| + m_i (L + delta/2)) / s_min`` when ``L_i(w) <= L`` (as
        ``h_delta(u) >= delta |u| - delta^2/2``, so ``||u||_2 <= ||u||_1 <= m (L + delta^2/2) / delta``)."""
        return self._range_from_residual(self.counts * (max(float(value_bound), 0.0) + 0.5 * self.delta ** 2)
                                         / self.delta)

    def cvxpy_expr(self, W):
        import cvxpy as cp

        if self.X_all.shape[0] == 0:
            return cp.Constant(0.0)
        residual = self._cvxpy_prediction(W) - self.y_all
        return 0.5 * cp.sum(cp.multiply(self._inv_counts_per_sample(), cp.huber(residual, self.delta)))
