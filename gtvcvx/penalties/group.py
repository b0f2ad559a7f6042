"""Group-l2 penalty ``phi(v) = sum_g ||v_g||_2`` over a partition of the coordinates."""

from __future__ import annotations

import numpy as np

from ._core import Penalty, register_penalty

__all__ = ["GroupNorm2"]


@register_penalty
class GroupNorm2(Penalty):
    """Sum of Euclidean norms over coordinate groups, ``phi(v) = sum_g ||v_g||_2``.

    Parameters
    ----------
    groups : sequence of int
        The group of every coordinate (length ``d``); any labels, e.g. ``[0, 0, 1, 1, 1]``.
        One group is :class:`~gtvcvx.penalties.Norm2`, singleton groups are
        :class:`~gtvcvx.penalties.Norm1`.

    Notes
    -----
    A norm whose dual norm is ``max_g ||u_g||_2``, so ``c phi^*(u / c)`` is the indicator of
    ``||u_g||_2 <= c`` for every group; prox: block soft-thresholding per group; dual prox:
    radial projection of each group onto the l2 ball of radius ``c_e``. With ``G`` groups,
    ``||u||_2 <= sqrt(G) max_g ||u_g||_2`` (the constant ``kappa``) and ``phi(v) >= ||v||_2``.
    The fused models it produces agree group by group: an edge can fuse one block of
    parameters (e.g. the slopes) while leaving another free (paper 002, Sec. III, allows any
    convex ``phi``; group-sparse recovery is discussed in its Sec. I).

    References
    ----------
    .. [1] Y. SarcheshmehPour, Y. Tian, L. Zhang, A. Jung, "Clustered federated learning via
       generalized total variation minimization", IEEE Trans. Signal Processing 71, 2023, Sec. III.
    .. [2] M. Yuan, Y. Lin, "Model selection and estimation in regression with grouped
       variables", J. R. Stat. Soc. B 68, 2006.
    """

    name = "group_norm2"
    traits = ("norm",)
    conic_form = "group_norm2"
    dual_ball = "group_l2"

    def __init__(self, groups):
        labels = np.asarray(groups)
        if labels.ndim != 1 or labels.size == 0:
            raise ValueError(f"penalty 'group_norm2': groups must be a non-empty list with the group of every coordinate, got {groups!r}")
        if not (np.issubdtype(labels.dtype, np.integer) or np.issubdtype(labels.dtype, np.str_)):
            raise ValueError(f"penalty 'group_norm2': groups must hold integer (or string) labels, one per coordinate, got {groups!r}")
        _, self.labels = np.unique(labels, return_inverse=True)
        self.labels = self.labels.astype(np.int64)
        self.labels.flags.writeable = False
        self.n_groups = int(self.labels.max()) + 1
        self._members = np.zeros((self.labels.size, self.n_groups))
        self._members[np.arange(self.labels.size), self.labels] = 1.0

    @classmethod
    def example(cls, d: int, rng) -> "GroupNorm2":
        """Groups of two consecutive coordinates (the last one alone when ``d`` is odd)."""
        return cls(np.arange(d) // 2)

    def check_dimension(self, d: int) -> None:
        if d != self.labels.size:
            raise ValueError(f"penalty 'group_norm2' has groups for d = {self.labels.size} coordinates, "
                             f"but the models have d = {d}")

    def _group_norms(self, Z) -> np.ndarray:
        """``||z_g||_2`` for every row and group, shape (rows, G)."""
        self.check_dimension(Z.shape[1])
        return np.sqrt((Z * Z) @ self._members)

    def dual_ball_radius(self, d: int) -> float:
        self.check_dimension(d)
        return float(np.sqrt(self.n_groups))

    def dual_direction(self, B) -> np.ndarray:
        B = np.atleast_2d(np.asarray(B, dtype=float))
        norms = self._group_norms(B)
        V = np.zeros_like(B)
        if B.size:
            best = np.argmax(norms, axis=1)
            top = norms[np.arange(B.shape[0]), best]
            inside = self.labels[None, :] == best[:, None]
            V = np.where(inside & (top[:, None] > 0), B / np.where(top > 0, top, 1.0)[:, None], 0.0)
        return V

    def _subgradient_flow(self, Z, scale, cut):
        norms = self._group_norms(Z)
        active = norms > cut
        factor = np.divide(scale[:, None], norms, out=np.zeros_like(norms), where=active)
        return Z * factor[:, self.labels], ~active[:, self.labels]

    def _face_tangent(self, U, scale, rtol):
        norms = self._group_norms(U)
        active = (norms >= (scale * (1.0 - rtol))[:, None]) & (norms > 0)
        if not active.any():
            return None
        inverse = np.divide(1.0, norms, out=np.zeros_like(norms), where=active)
        normals = U * inverse[:, self.labels]
        return lambda delta: delta - normals * ((normals * delta) @ self._members)[:, self.labels]

    def _dual_norms(self, U):
        return self._group_norms(U).max(axis=1, initial=0.0)

    def _edge_values(self, Z, scale):
        return scale * self._group_norms(Z).sum(axis=1)

    def _edge_conjugates(self, U, scale):
        return self._ball_indicator(U, scale)

    def _prox(self, Z, step, scale):
        thresh = (np.asarray(step).reshape(-1) * scale)[:, None]
        norms = self._group_norms(Z)
        factor = np.divide(np.maximum(norms - thresh, 0.0), norms, out=np.zeros_like(norms), where=norms > 0)
        Z *= factor[:, self.labels]
        return Z

    def _prox_conjugate(self, U, step, scale):
        norms = self._group_norms(U)
        bound = np.broadcast_to(scale[:, None], norms.shape)
        factor = np.divide(bound, norms, out=np.ones_like(norms), where=norms > bound)
        U *= factor[:, self.labels]
        return U

    def cvxpy_expr(self, Z, scale):
        import cvxpy as cp

        self.check_dimension(Z.shape[1])
        return sum(scale @ cp.norm(Z[:, np.flatnonzero(self.labels == g)], 2, axis=1)
                   for g in range(self.n_groups))  # a loop over groups, not edges

    def cvxpy_conjugate(self, U, scale):
        import cvxpy as cp

        self.check_dimension(U.shape[1])
        return cp.Constant(0.0), [cp.norm(U[:, np.flatnonzero(self.labels == g)], 2, axis=1) <= scale
                                  for g in range(self.n_groups)]

    def content(self) -> dict:
        return {"groups": self.labels}

    def __repr__(self) -> str:
        return f"GroupNorm2(groups={self.labels.tolist()})"

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.labels.tobytes()))


