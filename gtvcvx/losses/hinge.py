"""Hinge loss (lecture notes 000, eq. 8)."""

from __future__ import annotations

import numpy as np

from ._core import register_loss
from ._margin import MarginLoss

__all__ = ["Hinge"]


@register_loss
class Hinge(MarginLoss):
    """Mean hinge loss per node: ``L_i(w) = (1/m_i) sum_k max(0, 1 - y_k x_k^T w)``, ``y_k`` in {-1, +1}.

    Parameters
    ----------
    X : sequence of array_like
        ``X[i]`` has shape (m_i, d); ``m_i = 0`` is a node without data.
    y : sequence of array_like
        Labels in {-1, +1}.
    d : int, optional
        Dimension; needed only when no node holds data.

    Notes
    -----
    Per sample ``phi^*(a; y) = y a`` on ``-1 <= y a <= 0``. With the margin ``u = y z`` and
    ``b = y a`` the Fenchel-Young term is ``max(0, 1 - u) + b (1 - u)``, i.e. ``(1 - u)(1 + b)``
    when ``u < 1`` and ``(-b)(u - 1)`` otherwise (products of non-negative numbers). The hinge
    loss bounds no optimum (separable data), so like the logistic loss it gives no a-priori
    range bound: a certificate needs a dual point that represents the flow to rounding.

    References
    ----------
    .. [1] A. Jung, "CS-E4740 Federated Learning" lecture notes, 2023, eq. (8) and eq. (95)
       (``../shared/seeds/000``).
    """

    name = "hinge"
    traits = ("classifier", "nonnegative")
    conic_form = "hinge_margin"

    def linear_minorants(self):
        """``max(0, 1 - u) >= -u``: ``a_k = -y_k x_k``, ``weight_k = m_i``."""
        return self._label_minorants()

    def _argument(self, W):
        return self.y_all * self._sample_margins(W)  # y x^T w in doubled precision

    def _phi(self, u, y):
        return np.maximum(0.0, 1.0 - u)

    def _subgradient(self, u, y):
        return np.where(u < 1.0, -y, 0.0)

    def _box(self, y):
        return np.minimum(-y, 0.0), np.maximum(-y, 0.0)

    def _fenchel_young(self, u, y, a):
        b = np.clip(y * a, -1.0, 0.0)
        rho = 1.0 - u
        return np.where(rho > 0, rho * (1.0 + b), (-b) * (-rho))

    def _kink_distance(self, u, y):
        return np.abs(1.0 - u)

    def cvxpy_expr(self, W):
        import cvxpy as cp

        if self.X_all.shape[0] == 0:
            return cp.Constant(0.0)
        margin = cp.multiply(self.y_all, self._cvxpy_prediction(W))
        return cp.sum(cp.multiply(self._inv_counts_per_sample(), cp.pos(1.0 - margin)))
