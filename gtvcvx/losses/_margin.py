"""Shared machinery for sample-separable losses with a box-constrained conjugate.

A *margin loss* is ``L_i(w) = (1/m_i) sum_k phi(x_k^T w; y_k)`` where the per-sample conjugate
is ``phi^*(a; y) = y a + (kappa / 2) a^2`` on a box ``lo(y) <= a <= hi(y)`` (and ``+inf``
outside): the absolute error, Huber and hinge losses. Then

* ``L_i^*(v) = (1/m) min { sum_k phi^*(a_k) : (1/m) X_i^T a = v, lo <= a <= hi }``;
* ``prox_{t L_i}(v) = v - (t/m) X_i^T a*`` with ``a*`` the solution of the box-constrained
  quadratic program ``min_a sum_k phi^*(a_k) + (t / 2m) ||X_i^T a||^2 - a^T X_i v``, solved
  for all nodes at once by FISTA with adaptive restart in each node's row space;
* a Fenchel-Young term ``phi(z) + phi^*(a) - a z >= 0`` has a cancellation-free form per
  sample, so certificates sum non-negative numbers computed from the raw data.

A loss of this family implements four scalar pieces (:meth:`MarginLoss._phi`,
:meth:`MarginLoss._subgradient`, :meth:`MarginLoss._box`, :meth:`MarginLoss._fenchel_young`)
and its CVXPY statement; everything else is here.
"""

from __future__ import annotations

from abc import abstractmethod

import numpy as np

from .._validation import check_memory
from ._core import _DesignLoss, _as_step, _domain_limit

__all__ = ["MarginLoss"]

#: Rounds of :meth:`MarginLoss._dual_point`'s projection restricted to the samples strictly inside their boxes.
DUAL_POINT_POLISH_ROUNDS = 3


class MarginLoss(_DesignLoss):
    """Base class of sample-separable losses whose per-sample conjugate lives on a box.

    Subclasses set :attr:`kappa` and implement the scalar pieces; see the module docstring.

    Notes
    -----
    The dual variables ``a`` of the latest prox are kept (one (M,) array) to warm-start the
    next one: in an iterative solver consecutive proxes are close.
    """

    #: Curvature of the per-sample conjugate ``phi^*(a) = y a + (kappa/2) a^2``.
    kappa: float = 0.0
    #: FISTA iterations of an exact prox, and of a warm-started prox in a solver's loop.
    prox_iterations: int = 20000
    warm_iterations: int = 200

    # -- the scalar pieces a loss of this family defines (vectorized over samples) ---------
    # Each works on the sample's *argument* ``u`` (:meth:`_argument`: the residual
    # ``x^T w - y`` of a regression loss, the margin ``y x^T w`` of a classifier), computed
    # from the raw data in doubled precision, so a large offset in ``y`` costs no accuracy.
    @abstractmethod
    def _argument(self, W) -> np.ndarray:
        """The per-sample argument ``u`` at ``W`` (M,)."""

    @abstractmethod
    def _phi(self, u, y) -> np.ndarray:
        """``phi`` per sample, as a function of the argument."""

    @abstractmethod
    def _subgradient(self, u, y) -> np.ndarray:
        """An element of ``d phi / dz`` (``z = x^T w``) per sample, inside the box."""

    @abstractmethod
    def _box(self, y):
        """``(lo, hi)`` of the conjugate's domain per sample."""

    @abstractmethod
    def _fenchel_young(self, u, y, a) -> np.ndarray:
        """``phi(z) + phi^*(a) - a z >= 0`` per sample, cancellation-free (``a`` in the box)."""

    def _kink_distance(self, u, y) -> np.ndarray:
        """How much moving ``a`` costs in Fenchel-Young terms at ``u``: the correction of a dual
        point goes to the samples where it is cheap (at a kink any ``a`` of the box is exact)."""
        return np.ones_like(u)

    # -- values -----------------------------------------------------------------------------
    def _conj_samples(self, a) -> np.ndarray:
        return self.y_all * a + 0.5 * self.kappa * a * a

    def node_values(self, W) -> np.ndarray:
        W = self._check_W(W)
        sums = self._node_sums(self._phi(self._argument(W), self.y_all))
        return np.divide(sums, self.counts, out=np.zeros(self.n), where=self.counts > 0)

    def gradient(self, W) -> np.ndarray:
        """A subgradient ``(1/m) X^T phi'(X w)`` per node (the gradient where ``phi`` is smooth)."""
        W = self._check_W(W)
        g = self._subgradient(self._argument(W), self.y_all) / np.maximum(self.counts[self.node_of_sample], 1)
        return self._node_sums(self.X_all * g[:, None])

    # -- padded per-node views ----------------------------------------------------------------
    def _padded_samples(self, per_sample) -> np.ndarray:
        """A per-sample array (M,) laid out as (n, m_max), 0 on padding."""
        out = np.zeros(self._padded[1].shape)
        out[self.node_of_sample, self._sample_position] = per_sample
        return out

    def _unpadded(self, padded) -> np.ndarray:
        return padded[self.node_of_sample, self._sample_position]

    def _zero_representable(self, V) -> np.ndarray:
        """The nodes where ``a = 0`` represents ``v_i`` exactly: ``v_i = 0`` and every sample's box holds 0, (n,)."""
        lo, hi = self._box(self.y_all)
        return ~np.any(V != 0, axis=1) & (self._node_sums(((lo > 0) | (hi < 0)).astype(float)) == 0)

    def _padded_box(self):
        lo, hi = self._box(self.y_all)
        return self._padded_samples(lo), self._padded_samples(hi)

    # -- prox ---------------------------------------------------------------------------------
    def _dual_prox(self, q, tau, a, max_iter: int, rtol: float = 1e-15):
        """FISTA with adaptive restart on the prox's dual, all nodes at once (row-space coords).

        ``q`` (n, r): coordinates of ``v``; ``tau`` (n,); ``a`` (n, m_max) start point.
        Returns ``(a, C)`` with ``C = q - (tau/m) Xr^T a`` the prox in coordinates.
        """
        Xp, yp, mask, inv_m = self._padded
        lo, hi = self._padded_box()
        Xt = np.swapaxes(Xp, 1, 2)
        rate = (tau * inv_m)[:, None]
        lipschitz = self.kappa + rate[:, 0] * np.max(self.s, axis=1, initial=0.0) ** 2
        step = np.divide(1.0, lipschitz, out=np.zeros_like(lipschitz), where=lipschitz > 0)[:, None]
        a = np.clip(np.where(mask, a, 0.0), lo, hi)

        def coords(b):
            return q - rate * np.matmul(Xt, b[:, :, None])[:, :, 0]

        C = coords(a)
        prev = a.copy()
        t = np.ones(self.n)
        live = np.arange(self.n)
        for _ in range(max_iter):
            if live.size == 0:
                break
            beta = ((t[live] - 1.0) / (t_next := 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t[live] ** 2))))[:, None]
            a_l, prev_l = a[live], prev[live]
            b = a_l + beta * (a_l - prev_l)
            Cb = q[live] - rate[live] * np.matmul(Xt[live], b[:, :, None])[:, :, 0]
            grad = np.where(mask[live], yp[live] + self.kappa * b - np.matmul(Xp[live], Cb[:, :, None])[:, :, 0], 0.0)
            a_new = np.clip(b - step[live] * grad, lo[live], hi[live])
            # adaptive restart (O'Donoghue & Candes): drop momentum when it points uphill
            uphill = np.einsum("nm,nm->n", b - a_new, a_new - a_l) > 0
            t[live] = np.where(uphill, 1.0, t_next)
            C_new = q[live] - rate[live] * np.matmul(Xt[live], a_new[:, :, None])[:, :, 0]
            change = np.linalg.norm(C_new - C[live], axis=1)
            prev[live], a[live], C[live] = a_l, a_new, C_new
            size = np.linalg.norm(C_new, axis=1) + np.linalg.norm(q[live], axis=1)
            done = (change <= rtol * (1.0 + size)) & ~uphill
            live = live[~done]
        return a, C

    def _prox_start(self, V, warm_start) -> np.ndarray:
        memo = self.__dict__.get("_dual_memo")
        if memo is not None:
            return memo
        W0 = V if warm_start is None else self._check_W(warm_start, "warm_start")
        return self._padded_samples(self._subgradient(self._argument(W0), self.y_all))

    def _prox_iterations(self, V, step, warm_start, max_iter, start=None):
        V = self._check_W(V, "V")
        tau = _as_step(step, self.n)[:, 0]
        if self.X_all.shape[0] == 0:
            return V.copy()
        q = self._coords(V)
        a, C = self._dual_prox(q, tau, self._prox_start(V, warm_start) if start is None else start, max_iter)
        self.__dict__["_dual_memo"] = a
        return V + self._lift(C - q)

    def prox(self, V, step, *, warm_start=None) -> np.ndarray:
        """``argmin_w L_i(w) + ||w - v_i||^2 / (2 t_i)`` by FISTA on its dual (to rounding level)."""
        return self._prox_iterations(V, step, warm_start, self.prox_iterations)

    def prox_warm(self, V, step, warm_start) -> np.ndarray:
        """A prox for iterative solvers: at most :attr:`warm_iterations` FISTA steps from the
        previous prox's dual point (an error that vanishes as consecutive proxes converge)."""
        return self._prox_iterations(V, step, warm_start, self.warm_iterations)

    def node_stationarity(self, W, V) -> np.ndarray:
        """``||w_i - prox_{L_i}(w_i + v_i)||`` per node (:meth:`Loss.node_stationarity`; a smooth loss's gradient
        residual as there), its FISTA started at the dual point that represents ``V`` (:meth:`_dual_point`).

        Notes
        -----
        The prox's dual solution at ``w_i + v_i`` is the box point ``a`` with ``(1/m) X_i^T a = v_i`` and ``a``
        in the subdifferential at the margins of ``w_i`` wherever ``v_i`` is a subgradient there: the dual point
        is that solution up to the iterate's error. From the subgradient at ``W`` instead, FISTA took 1.2-1.9 s
        of a 20,000-node absolute-error chain's 5-6 s solve.
        """
        W = self._check_W(W)
        V = self._check_W(V, "V")
        if "smooth" in self.traits or self.X_all.shape[0] == 0:  # (Huber: its gradient)
            return super().node_stationarity(W, V)
        start = self._dual_point(V, self._argument(W), zero_exact=False)
        return np.linalg.norm(W - self._prox_iterations(W + V, 1.0, None, self.prox_iterations, start=start), axis=1)

    # -- conjugate and certificates --------------------------------------------------------------
    def _dual_point(self, V, u, rounds: int = 50, *, zero_exact: bool = True):
        """A dual point ``a`` in the box with ``(1/m) X^T a`` as close to ``v`` as found.

        Starts at the subgradient at arguments ``u`` (exact where ``v`` is the subgradient there)
        and alternates the projection onto ``{(1/m) X^T a = v}`` in the metric weighted by
        :meth:`_kink_distance` (corrections go where they cost little) with clipping into the
        box, then (:data:`DUAL_POINT_POLISH_ROUNDS`) the same projection restricted to the samples strictly inside
        their boxes. With ``zero_exact`` a node with ``v_i = 0`` gets ``a = 0`` (represents it exactly, but its
        term is ``L_i(w_i)`` itself); without, the subgradient's point like any other (a term near 0 at a
        local optimum, and a rounding-level residual). Returns padded ``a`` (n, m_max).
        """
        Xp, yp, mask, inv_m = self._padded
        lo, hi = self._padded_box()
        target = self._coords(self.project_conjugate_domain(V)) * self.counts[:, None]  # X_r^T a = m c
        dist = self._padded_samples(self._kink_distance(u, self.y_all))
        # weights relative to the node's largest distance, in [1, 1e9] (the projection does not depend on
        # their scale; absolute ones overflowed the Gram matrix where every sample sat on its kink)
        top = dist.max(axis=1, initial=0.0)[:, None]
        top = np.where(top > 0, top, 1.0)
        inv_w = np.where(mask, top / np.maximum(dist, 1e-9 * top), 0.0)
        Xt = np.swapaxes(Xp, 1, 2)
        gram = np.matmul(Xt * inv_w[:, None, :], Xp)  # X_r^T D^{-1} X_r, (n, r, r)
        gram_pinv = np.linalg.pinv(gram, 1e-13, hermitian=True)
        a = np.clip(self._padded_samples(self._subgradient(u, self.y_all)), lo, hi)
        # v_i = 0 is represented exactly by a = 0 where the box holds 0 (the zero flow)
        if zero_exact:
            a[self._zero_representable(V)] = 0.0
        resid = target - np.matmul(Xt, a[:, :, None])[:, :, 0]
        for _ in range(rounds):
            if not (np.abs(resid) > 0).any():
                break
            corr = np.matmul(gram_pinv, resid[:, :, None])
            a_aff = a + inv_w * np.matmul(Xp, corr)[:, :, 0]
            a_new = np.clip(a_aff, lo, hi)
            resid_new = target - np.matmul(Xt, a_new[:, :, None])[:, :, 0]
            # inside the box: refine while the residual falls (the kink weights make the Gram
            # matrix ill-conditioned: one solve leaves ~1e-8 where 1e-15 is reachable)
            if np.array_equal(a_new, a_aff) and not np.linalg.norm(resid_new) < np.linalg.norm(resid):
                break
            a, resid = a_new, resid_new
        # the same projection with the samples at a bound held there: the rounds above move them too, and
        # clipping them back left residuals of ~4e-8 |v| (a 5,000-node hinge chain's flow) where the free
        # samples bring them to ~4e-10 |v|; per node while its residual falls
        for _ in range(DUAL_POINT_POLISH_ROUNDS):
            free_w = np.where(mask & (a > lo) & (a < hi), inv_w, 0.0)
            gram_free = np.matmul(Xt * free_w[:, None, :], Xp)
            corr = np.matmul(np.linalg.pinv(gram_free, 1e-13, hermitian=True), resid[:, :, None])
            a_new = np.clip(a + free_w * np.matmul(Xp, corr)[:, :, 0], lo, hi)
            resid_new = target - np.matmul(Xt, a_new[:, :, None])[:, :, 0]
            better = np.linalg.norm(resid_new, axis=1) < np.linalg.norm(resid, axis=1)
            if not better.any():
                break
            a = np.where(better[:, None], a_new, a)
            resid = np.where(better[:, None], resid_new, resid)
        return np.where(mask, a, 0.0)

    def _represented(self, a_samples) -> np.ndarray:
        """``v' = (1/m) X^T a`` per node from the raw data, (n, d)."""
        inv_m = 1.0 / np.maximum(self.counts[self.node_of_sample], 1)
        return self._node_sums(self.X_all * (a_samples * inv_m)[:, None])

    def certify_nodes(self, W, V):
        """Fenchel-Young terms at a dual point ``a`` of the box, from the raw data.

        ``v' = (1/m) X^T a`` with ``a`` from :meth:`_dual_point`; each term is
        ``(1/m) sum_k [phi(z_k) + phi^*(a_k) - a_k z_k]`` summed from non-negative per-sample
        forms (no cancellation). Returns the terms and the residual ``v - v'``, which the
        certificate pays for with its a-priori allowance. A node with ``v_i = 0`` gets the
        subgradient's point too (``zero_exact=False``): the certificate itself chooses, per
        component, between it and the zero dual point (trait ``"nonnegative"``), whose term is
        ``L_i(w_i)``: with ``lam = 0`` the zero point alone left every node's whole loss in the gap.
        """
        W = self._check_W(W)
        V = self._check_W(V, "V")
        if self.y_all.size == 0:
            return np.zeros(self.n), V.copy()
        u = self._argument(W)
        a = self._unpadded(self._dual_point(V, u, zero_exact=False))
        per_sample = self._fenchel_young(u, self.y_all, a) / self.counts[self.node_of_sample]
        terms = self._node_sums(np.maximum(per_sample, 0.0))
        return np.where(self.has_data, terms, 0.0), V - self._represented(a)

    def node_anchor(self, W, V):
        """``G_i = (1/m) X_i^T a`` with ``a`` in the box representing ``v_i`` as closely as
        :meth:`_dual_point` finds, and ``H_i = (1/m) X_i^T diag(rho) X_i`` with
        ``rho_k = (a_k - lo_k)(hi_k - a_k) / (hi_k - lo_k)`` each sample's room in its box.

        Notes
        -----
        ``G_i + H_i lambda`` is represented by ``a + rho * (X_i lambda)``: a sample at a bound of
        its box (``rho_k = 0``; the hinge of a sample off its kink) keeps its dual exactly, the
        others move in proportion to their room and stay in the box while ``|x_k^T lambda| < 1``;
        as ``lo <= 0 <= hi``, scaling ``a`` by ``alpha in [0, 1]`` keeps it there. This is the
        analogue of the logistic Hessian ``s (1 - s)`` for a loss whose Hessian is zero almost
        everywhere.
        """
        W = self._check_W(W)
        V = self._check_W(V, "V")
        d = self.d
        check_memory(8.0 * self.n * d * d, f"the {self.name} node metrics ({self.n} x {d} x {d})")
        if self.y_all.size == 0:
            return np.zeros((self.n, d)), np.zeros((self.n, d, d))
        a_padded = self._dual_point(V, self._argument(W))
        a = self._unpadded(a_padded)
        lo, hi = self._box(self.y_all)
        width = hi - lo
        with np.errstate(invalid="ignore", divide="ignore"):
            room = np.where(width > 0, np.maximum(a - lo, 0.0) * np.maximum(hi - a, 0.0) / width, 0.0)
        room = np.where(np.isfinite(room), room, np.minimum(np.abs(a - lo), np.abs(hi - a)))
        Xp, _, mask, inv_m = self._padded
        weight = self._padded_samples(room) * inv_m[:, None]
        hess = np.matmul(np.swapaxes(Xp, 1, 2) * weight[:, None, :], Xp)  # row-space coordinates (n, r, r)
        return self._represented(a), np.matmul(np.matmul(self.Q, hess), self._Qt)

    def node_conjugates(self, V, *, scale=None, hint=None) -> np.ndarray:
        """Upper bounds on ``L_i^*(v'_i)``: ``(1/m) sum_k phi^*(a_k)`` at a dual point ``a`` that
        represents ``v'_i`` within ``DOMAIN_RTOL * scale`` of ``v_i`` (the projection convention
        of :meth:`Loss.node_conjugates`), ``+inf`` where none was found (outside the domain, or
        on its boundary).

        The bound is tight when ``hint`` is a maximizer ``w`` of ``v^T w - L(w)`` (as in a
        certificate at an optimum). Without ``hint`` one is sought by proximal-point steps
        ``w <- prox_{t L}(w + t v)`` with ``t`` growing from 1 to 1e6. At ``v_i = 0`` the smaller of
        the value at that point and at ``a = 0`` (exact, ``0``; the point alone gave ``L^*(0) <= 0``
        where ``-min L_i`` is the value, e.g. with ``lam = 0``).
        """
        V = self._check_W(V, "V")
        ok = self._domain_ok(V, scale)
        if self.y_all.size == 0:
            return np.where(ok, 0.0, np.inf)
        if hint is None:
            W = np.zeros_like(V)
            for step in np.geomspace(1.0, 1e6, 13):  # proximal point with growing steps
                W = self.prox(W + step * V, step, warm_start=W)
        else:
            W = self._check_W(hint, "hint")
        a = self._unpadded(self._dual_point(V, self._argument(W), zero_exact=False))
        inv_m = 1.0 / self.counts[self.node_of_sample]
        values = self._node_sums(self._conj_samples(a) * inv_m)
        resid = np.linalg.norm(V - self._represented(a), axis=1)
        rounding = 64.0 * (self.max_terms + 8) * np.finfo(float).eps * (
            self._node_sums(np.linalg.norm(self.X_all, axis=1) * np.abs(a) * inv_m) + np.linalg.norm(V, axis=1))
        exact = (resid <= np.maximum(rounding, _domain_limit(V, scale))) | ~self.has_data
        values = np.where(exact, values, np.inf)
        # where a = 0 represents v_i = 0 exactly: L^*(0) <= 0 (phi^*(0) = 0)
        values = np.where(self._zero_representable(V), np.minimum(values, 0.0), values)
        return np.where(ok, np.where(self.has_data, values, 0.0), np.inf)

    # -- CVXPY --------------------------------------------------------------------------------
    def _cvxpy_prediction(self, W):
        import cvxpy as cp

        return self._block_design @ cp.vec(W, order="C")

    def cvxpy_conjugate(self, V):
        import cvxpy as cp

        if self.X_all.shape[0] == 0:
            return cp.Constant(0.0), [V == 0]
        a = cp.Variable(self.X_all.shape[0], name="a")
        inv_m = self._inv_counts_per_sample()
        lo, hi = self._box(self.y_all)
        expr = cp.sum(cp.multiply(inv_m * self.y_all, a))
        if self.kappa:
            expr = expr + 0.5 * self.kappa * cp.sum_squares(cp.multiply(np.sqrt(inv_m), a))
        flow = self._block_design.T @ cp.multiply(inv_m, a)
        return expr, [flow == cp.vec(V, order="C"), a >= lo, a <= hi]
