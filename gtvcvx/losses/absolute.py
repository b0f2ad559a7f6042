"""Absolute error loss (lecture notes 000, eq. 5)."""

from __future__ import annotations

import numpy as np

from ._core import register_loss
from ._margin import MarginLoss

__all__ = ["AbsoluteError"]


@register_loss
class AbsoluteError(MarginLoss):
    """Mean absolute error per node: ``L_i(w) = (1/m_i) ||y_i - X_i w||_1`` (``0`` if ``m_i = 0``).

    Parameters
    ----------
    X : sequence of array_like
        ``X[i]`` has shape (m_i, d); ``m_i`` may be smaller than ``d`` or 0.
    y : sequence of array_like
        ``y[i]`` has shape (m_i,).
    d : int, optional
        Dimension; needed only when no node holds data.

    Notes
    -----
    Per sample ``phi(z; y) = |z - y|``, ``phi^*(a; y) = y a`` on ``|a| <= 1``; with the residual
    ``u = z - y`` the Fenchel-Young term is ``|u| (1 - a sign(u)) >= 0``. Robust to a few
    outliers, at the price of a non-differentiable loss (lecture notes, Sec. 2): the prox is an
    iterative solve (see :mod:`gtvcvx.losses._margin`) and :meth:`gradient` is a subgradient.

    References
    ----------
    .. [1] A. Jung, "CS-E4740 Federated Learning" lecture notes, 2023, eq. (5)
       (``../shared/seeds/000``).
    """

    name = "absolute_error"
    traits = ("nonnegative",)
    conic_form = "absolute_residual"

    def _argument(self, W):
        return -self._sample_residuals(W)  # x^T w - y in doubled precision

    def _phi(self, u, y):
        return np.abs(u)

    def _subgradient(self, u, y):
        return np.sign(u)

    def _box(self, y):
        return -np.ones_like(y), np.ones_like(y)

    def _fenchel_young(self, u, y, a):
        return np.abs(u) * (1.0 - a * np.sign(u))

    def _kink_distance(self, u, y):
        return np.abs(u)

    def range_bound(self, value_bound: float) -> np.ndarray:
        """``||Q_i^T w|| <= (||y_i|| + m_i L) / s_min`` whenever ``L_i(w) <= L`` (as
        ``||y - X w||_2 <= ||y - X w||_1 = m_i L_i(w)``)."""
        return self._range_from_residual(self.counts * max(float(value_bound), 0.0))

    def cvxpy_expr(self, W):
        import cvxpy as cp

        if self.X_all.shape[0] == 0:
            return cp.Constant(0.0)
        return cp.sum(cp.multiply(self._inv_counts_per_sample(), cp.abs(self._cvxpy_prediction(W) - self.y_all)))
