r"""A primal-dual interior-point method for GTV problems with a quadratic loss and a norm penalty,
on the node system: each Newton step is one sparse ``n d x n d`` factorization (PARDISO).

For ``L_i(w) = w^T H_i w / 2 + g_i^T w + const`` (squared error, squared distance: the losses'
``conic_form`` ``"squared_residual"`` / ``"squared_distance"``; ``H_i``, ``g_i`` by
:func:`~gtvcvx.solvers.quadratic.node_quadratics`) and the penalty ``c_e ||z_e||_2`` or
``c_e ||z_e||_1`` (``conic_form`` ``"norm2"`` / ``"norm1"``), GTV minimization is the cone program

.. math::

    \min_{W, t}\ \tfrac12 \sum_i w_i^T H_i w_i + g_i^T w_i + \sum_e c_e \mathbf 1^T t_e
    \quad\text{s.t.}\quad s_e = A (t_e, (D W)_e) \in K_e,

with ``K_e`` the second-order cone and ``A = I`` (norm2, ``t_e`` scalar), or ``K_e = R^{2d}_+`` and
``A (t, z) = (t - z, t + z)`` (norm1, ``t_e in R^d``). The method is Mehrotra's
predictor-corrector with Nesterov-Todd scaling in the form of CVXOPT's ``coneqp`` [1]_ [2]_ (an
infeasible start; no homogeneous embedding: GTV problems are always primal and dual feasible).

Its Newton systems are never formed whole (one factorization per step serves the affine and the
combined direction; each solve is refined once against the unreduced equations): with the scaling
``H_e`` of cone ``e``, the local block ``N_e = A^T H_e^{-1} A`` over ``(t_e, z_e)`` is reduced to
``z_e`` by eliminating ``t_e``, ``S_e = N_zz - N_zt N_tt^{-1} N_tz``, computed batched over the
edges without that difference (block inversion: ``S_e = ((A^{-1} H_e A^{-T})_zz)^{-1}``, a Gram
matrix; the difference cancels near the optimum, where the scalings span many orders of
magnitude), and the node system

.. math:: (\operatorname{blockdiag}(H_i) + D^T \operatorname{blockdiag}(S_e) D)\, \Delta W = r

has the sparsity of the graph Laplacian with ``d x d`` blocks. It is factored by PARDISO
(:mod:`gtvcvx.solvers._sparse_factor`; symbolic analysis once, a numeric factorization per
iteration). On graphs with locality (k-NN graphs, grids) its fill stays small: on the digits 10-NN
graph (1,797 nodes, 12,343 edges, d = 5) one factorization is 6.8e8 flops, 30-45 ms, where
Clarabel's simplicial LDL of the same problem's full KKT system takes ~550 ms per iteration.

The iterates are certified like any other solver's: ``W`` and the flows ``U`` read off the cone
multipliers (``U = -z_{e,1:}`` for norm2, ``U = z_e^- - z_e^+`` for norm1: the multipliers of
``s_e = A(t_e, (DW)_e)``) go to :func:`~gtvcvx.solvers.certify_pair` once the method's own
duality measure ``s^T z / (1 + 2 |P|)`` is below ``100 tol``, and then after every tenfold
decrease.

References
----------
.. [1] L. Vandenberghe, "The CVXOPT linear and quadratic cone program solvers", 2010,
   Secs. 7-8 (the ``coneqp`` iteration, Nesterov-Todd scaling of second-order cones, the
   starting point).
.. [2] S. Mehrotra, "On the implementation of a primal-dual interior point method", SIAM J.
   Optim. 2(4), 1992.
.. [3] Y. E. Nesterov, M. J. Todd, "Self-scaled barriers and interior-point methods for convex
   programming", Math. Oper. Res. 22(1), 1997.
.. [4] Y. SarcheshmehPour, Y. Tian, L. Zhang, A. Jung, "Clustered federated learning via
   generalized total variation minimization", IEEE TSP 2023
   (``../shared/seeds/002_99a24ac288dc6cbc.txt``), Sec. III-A eq. (16) and Sec. III-B (the flows).
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..capabilities import CapabilityError
from ..problem import GTVProblem
from ..results import GTVResult, Status
from ._pdhg_common import uniqueness_note
from ._edge_kernels import differences, divergence
from ._sparse_factor import SymmetricFactor, block_indices, pardiso_available
from .certificate import certified_statuses, certify_pair, stationarity
from .quadratic import MAX_BLOCK_ENTRIES, node_quadratics

__all__ = ["schur_refusal", "solve_schur", "SCHUR_MIN_EDGES"]

#: ``method="auto"`` (through :func:`~gtvcvx.solvers.interior.solve_interior`) tries this method
#: first from this many edges on; below, Clarabel's whole solve takes milliseconds.
SCHUR_MIN_EDGES = 2_000

#: Largest number of Newton steps (each one factorization).
MAX_STEPS = 60

#: A run whose barrier parameter ``mu`` fell less than ``1 / STALL_FACTOR`` over the last
#: ``STALL_STEPS`` Newton steps stops (``inaccurate``; :func:`~gtvcvx.solvers.interior.solve_interior`
#: goes on with Clarabel): on well-posed problems mu falls 3-10x per step (12-20 steps to 1e-9), on
#: data whose feature scales span 1e-3 .. 1e5 it crawled for 100 steps and did not certify.
STALL_STEPS, STALL_FACTOR = 10, 0.1

#: Iterative-refinement passes of each Newton solve (stopped when the residual stops falling).
REFINEMENTS = 1
#: ... and not run once the residual is below this fraction of the right-hand side (rounding).
REFINE_BELOW = 1e-13

#: Step to the cone boundary taken (of the largest feasible one).
STEP_FRACTION = 0.99


# ---------------------------------------------------------------------------------------
# the two cone families, batched over the edges (rows of (E, k) arrays)
# ---------------------------------------------------------------------------------------
class _SecondOrderCones:
    """``E`` second-order cones of dimension ``k = d + 1``, ``s_e = (t_e, z_e)``."""

    def __init__(self, E: int, d: int):
        self.k, self.t_size = d + 1, 1
        self.A = np.eye(d + 1)
        self.degree = E
        self.unit = np.zeros((E, d + 1))
        self.unit[:, 0] = 1.0

    @staticmethod
    def _det(u):
        return u[:, 0] ** 2 - np.einsum("ek,ek->e", u[:, 1:], u[:, 1:])

    def min_eig(self, u):
        return u[:, 0] - np.linalg.norm(u[:, 1:], axis=1)

    def scaling(self, s, z):
        """Nesterov-Todd scaling ``W`` (symmetric, ``W z = W^{-1} s``) and ``W^{-1}``, (E, k, k)."""
        det_s, det_z = self._det(s), self._det(z)
        s_n = s / np.sqrt(det_s)[:, None]
        z_n = z / np.sqrt(det_z)[:, None]
        gamma = np.sqrt((1.0 + np.einsum("ek,ek->e", s_n, z_n)) / 2.0)
        z_n[:, 1:] *= -1.0  # J z_n
        w = (s_n + z_n) / (2.0 * gamma)[:, None]
        eta = (det_s / det_z) ** 0.25
        k = self.k
        W_bar = np.empty((s.shape[0], k, k))
        W_bar[:, 0, :] = w
        W_bar[:, 1:, 0] = w[:, 1:]
        W_bar[:, 1:, 1:] = np.eye(k - 1) + w[:, 1:, None] * w[:, None, 1:] / (1.0 + w[:, 0])[:, None, None]
        J = np.ones(k)
        J[1:] = -1.0
        return eta[:, None, None] * W_bar, (J[:, None] * W_bar * J[None, :]) / eta[:, None, None]

    def identity_scaling(self, E: int):
        eye = np.broadcast_to(np.eye(self.k), (E, self.k, self.k))
        return eye, eye

    @staticmethod
    def times(matrices, v):
        """``W v`` (or ``W^{-1} v``) per cone, ``matrices`` one of :meth:`scaling`'s pair."""
        return np.einsum("eij,ej->ei", matrices, v)

    def reduce(self, scaling):
        """The per-edge elimination of ``t_e`` (see :func:`solve_schur`'s Notes): ``N_tt^{-1}``
        (E, 1, 1), ``X = N_tt^{-1} N_tz`` (E, 1, d) and ``S`` (E, d, d), with ``N = W^{-2}`` as the
        Gram matrix of ``W^{-1}``'s columns and ``S = ((W^2)_zz)^{-1}`` (block inversion, no
        cancelling difference)."""
        W, W_inv = scaling
        column = W_inv[:, :, 0]
        N_tt_inv = 1.0 / np.einsum("ek,ek->e", column, column)
        X = (N_tt_inv[:, None] * np.einsum("ek,ekj->ej", column, W_inv[:, :, 1:]))[:, None, :]
        rows = W[:, 1:, :]
        S = np.linalg.inv(rows @ np.swapaxes(rows, 1, 2))
        return N_tt_inv[:, None, None], X, 0.5 * (S + np.swapaxes(S, 1, 2))

    def product(self, u, v):
        """The Jordan product ``u o v = (u^T v, u_0 v_1 + v_0 u_1)``."""
        out = np.empty_like(u)
        out[:, 0] = np.einsum("ek,ek->e", u, v)
        out[:, 1:] = u[:, :1] * v[:, 1:] + v[:, :1] * u[:, 1:]
        return out

    def divide(self, lam, r):
        """``x`` with ``lam o x = r``."""
        x = np.empty_like(r)
        x[:, 0] = (lam[:, 0] * r[:, 0] - np.einsum("ek,ek->e", lam[:, 1:], r[:, 1:])) / self._det(lam)
        x[:, 1:] = (r[:, 1:] - x[:, :1] * lam[:, 1:]) / lam[:, :1]
        return x

    def max_step(self, u, du) -> float:
        """Largest ``alpha`` with ``u + alpha du`` in the cones (``u`` interior): the smallest
        positive root of ``det(u + alpha du)``, in the cancellation-free form."""
        a, c = self._det(du), self._det(u)
        b = u[:, 0] * du[:, 0] - np.einsum("ek,ek->e", u[:, 1:], du[:, 1:])
        disc = b * b - a * c
        real = disc >= 0
        q = -(b + np.copysign(np.sqrt(np.where(real, disc, 0.0)), b))
        with np.errstate(divide="ignore", invalid="ignore"):
            roots = np.stack([np.where(a != 0, q / a, np.inf), np.where(q != 0, c / q, np.inf)])
        roots = np.where(real & (roots > 0), roots, np.inf)
        return float(roots.min()) if roots.size else np.inf

    def flows(self, z, d: int):
        return -z[:, 1:]


class _NonnegativeOrthants:
    """``E`` blocks of ``2 d`` nonnegative slacks, ``s_e = (t_e - z_e, t_e + z_e)``."""

    def __init__(self, E: int, d: int):
        self.k, self.t_size = 2 * d, d
        eye = np.eye(d)
        self.A = np.block([[eye, -eye], [eye, eye]])
        self.degree = 2 * d * E
        self.unit = np.ones((E, 2 * d))

    def min_eig(self, u):
        return u.min(axis=1)

    def scaling(self, s, z):
        """The diagonal scaling ``w = sqrt(s / z)`` and ``1 / w``, (E, 2d) each."""
        w = np.sqrt(s / z)
        return w, 1.0 / w

    def identity_scaling(self, E: int):
        return np.ones((E, self.k)), np.ones((E, self.k))

    @staticmethod
    def times(diagonal, v):
        return diagonal * v

    def reduce(self, scaling):
        """As :meth:`_SecondOrderCones.reduce`, diagonal: with ``h = w^2`` of the slacks
        ``t - z`` and ``t + z``, ``N_tt = 1/h_1 + 1/h_2``, ``N_tz = 1/h_2 - 1/h_1`` and
        ``S = 4 / (h_1 + h_2)`` (never as the cancelling ``N_zz - N_tz^2 / N_tt``)."""
        w, _ = scaling
        d = self.t_size
        h1, h2 = w[:, :d] ** 2, w[:, d:] ** 2
        N_tt_inv = h1 * h2 / (h1 + h2)
        X = N_tt_inv * (1.0 / h2 - 1.0 / h1)
        diagonal = np.arange(d)
        blocks = np.zeros((3, w.shape[0], d, d))
        blocks[0][:, diagonal, diagonal] = N_tt_inv
        blocks[1][:, diagonal, diagonal] = X
        blocks[2][:, diagonal, diagonal] = 4.0 / (h1 + h2)
        return blocks[0], blocks[1], blocks[2]

    def product(self, u, v):
        return u * v

    def divide(self, lam, r):
        return r / lam

    def max_step(self, u, du) -> float:
        falling = du < 0
        return float((-u[falling] / du[falling]).min()) if falling.any() else np.inf

    def flows(self, z, d: int):
        return z[:, :d] - z[:, d:]


#: The losses' declared ``conic_form`` values that are quadratic in ``w`` (their Hessians and
#: gradients at 0 by :func:`~gtvcvx.solvers.quadratic.node_quadratics`).
QUADRATIC_LOSS_FORMS = ("squared_residual", "squared_distance")

#: The penalty's declared ``conic_form`` -> its cone family.
CONES = {"norm2": _SecondOrderCones, "norm1": _NonnegativeOrthants}


def schur_refusal(problem: GTVProblem) -> str:
    """Why :func:`solve_schur` does not apply (``""`` when it does)."""
    if not pardiso_available():
        return "PARDISO is not installed (py-mkl-pardiso: Linux/Windows x86-64 wheels)"
    loss_form = getattr(problem.loss, "conic_form", None)
    if loss_form not in QUADRATIC_LOSS_FORMS:
        return f"the loss '{problem.loss.name}' is not quadratic (conic_form {loss_form!r})"
    form = getattr(problem.penalty, "conic_form", None)
    if form not in CONES:
        return f"the penalty '{problem.penalty.name}' is not a norm2 or norm1 penalty (conic_form {form!r})"
    if problem.n_edges == 0:
        return "the graph has no edges"
    if problem.n * problem.d ** 2 + problem.n_edges * (2 * problem.d) ** 2 > MAX_BLOCK_ENTRIES:
        return f"the node and edge blocks exceed {MAX_BLOCK_ENTRIES} entries"
    return ""


class _NodeSystem:
    """``blockdiag(H_i) + D^T blockdiag(S_e) D`` as PARDISO's upper-triangle CSR with a fixed pattern:
    node blocks ``(i, i)`` and edge blocks ``(min(h, t), max(h, t))``, values gathered by one index
    array."""

    def __init__(self, graph, d: int, H: np.ndarray):
        n = graph.n
        head, tail = graph.end_columns
        node_rows, node_cols = block_indices(np.arange(n), np.arange(n), d)
        edge_rows, edge_cols = block_indices(np.minimum(head, tail), np.maximum(head, tail), d)
        rows = np.concatenate([node_rows.ravel(), edge_rows.ravel()])
        cols = np.concatenate([node_cols.ravel(), edge_cols.ravel()])
        upper = rows <= cols
        ids = np.flatnonzero(upper)
        pattern = sp.csr_matrix((ids + 1.0, (rows[upper], cols[upper])), shape=(n * d, n * d))
        pattern.sort_indices()
        self.gather = pattern.data.astype(np.int64) - 1
        self.factor = SymmetricFactor(pattern, positive_definite=True)
        self.H, self.n, self.d = H, n, d
        self.ends = abs(graph.incidence).T.tocsr()  # (n, E): each edge's two end nodes

    def factorize(self, S: np.ndarray, shift: float) -> None:
        n, d = self.n, self.d
        node = self.H + (self.ends @ S.reshape(S.shape[0], d * d)).reshape(n, d, d)
        node += shift * np.eye(d)
        self.factor.factor(np.concatenate([node.ravel(), -S.ravel()])[self.gather])

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        return self.factor.solve(rhs.ravel()).reshape(self.n, self.d)


@certified_statuses
def solve_schur(problem: GTVProblem, tol: float = 1e-6, *, max_iter: int = MAX_STEPS,
                time_limit: float | None = None) -> GTVResult:
    r"""Solve a GTV problem with a quadratic loss and a norm2 / norm1 penalty by the interior-point
    method of this module, certified.

    Parameters
    ----------
    problem : GTVProblem
        Loss with ``conic_form`` ``"squared_residual"`` or ``"squared_distance"``; penalty with
        ``conic_form`` ``"norm2"`` or ``"norm1"``.
    tol : float
        Certified relative gap to reach (status ``optimal``).
    max_iter : int
        Most Newton steps (each one factorization of the node system).
    time_limit : float, optional
        Seconds; checked between Newton steps.

    Returns
    -------
    GTVResult
        The best certified pair; ``info["method"] = "schur"``, ``info["factorizations"]``.
        Status ``optimal`` when its gap is at most ``tol``; else ``max_iter``, ``time_limit`` or
        ``inaccurate`` (the node system turned singular in floating point, or the steps stalled)
        with the gap reached: :func:`~gtvcvx.solvers.interior.solve_interior` then goes on with
        Clarabel.

    Raises
    ------
    CapabilityError
        When :func:`schur_refusal` gives a reason.

    Notes
    -----
    Each step solves the Newton system of the perturbed KKT conditions ``H W + g + (G^T z)_W = 0``,
    ``c + (G^T z)_t = 0``, ``G x + s = 0``, ``lam o lam = sigma mu e`` in the scaled variables
    ``lam = W_nt z = W_nt^{-1} s`` twice (affine and combined direction, [2]_), both with one
    factorization: ``dz = H_nt^{-1} (G dx - b_z)`` and, with ``t`` eliminated per edge, the node
    system of the module notes. A zero pivot (the node system is only positive semidefinite where
    a component has too little data to fix ``W``) is met by a 100x larger diagonal shift, from
    ``1e-11 max |H|``.

    References
    ----------
    See the module notes.
    """
    if not isinstance(problem, GTVProblem):
        raise TypeError(f"problem must be a gtvcvx.GTVProblem, got {type(problem).__name__}")
    reason = schur_refusal(problem)
    if reason:
        raise CapabilityError(f"the Schur interior-point method does not apply: {reason}")
    t_start = time.perf_counter()
    deadline = None if time_limit is None else t_start + float(time_limit)
    graph, d, E = problem.graph, problem.d, problem.n_edges
    H, g0 = node_quadratics(problem.loss)
    cones = CONES[problem.penalty.conic_form](E, d)
    A, t_size, k = cones.A, cones.t_size, cones.k
    cost_t = np.repeat(problem.capacities[:, None], t_size, axis=1)
    system = _NodeSystem(graph, d, H)
    shift = 1e-11 * max(1.0, float(np.abs(H).max()))
    factorizations = 0

    def G_times(W, t):  # (E, k): -A (t_e, (D W)_e)
        return -(np.concatenate([t, differences(graph, W)], axis=1) @ A.T)

    def G_transpose(z):  # (node part (n, d), t part (E, t_size))
        y = -(z @ A)
        return divergence(graph, y[:, t_size:]), y[:, :t_size]

    def factorize(scaling):
        """Reduce and factor the Newton system for the cones' scaling (``H_nt = W_nt^2``; see
        the cone families' ``reduce``); returns the solve of ``P dx + G^T dz = (b_W, b_t)``,
        ``G dx - H_nt dz = b_z``."""
        nonlocal shift, factorizations
        N_tt_inv, X, S = cones.reduce(scaling)
        for _ in range(4):
            try:
                system.factorize(S, shift)
                break
            except RuntimeError:  # PARDISO: a zero pivot
                shift *= 100.0
        else:
            raise FloatingPointError("the node system stayed singular after four larger shifts")
        factorizations += 1
        X_T = np.swapaxes(X, 1, 2)
        W_inv = scaling[1]

        def H_inv(v):  # H_nt^{-1} v = W^{-1} (W^{-1} v)
            return cones.times(W_inv, cones.times(W_inv, v))

        def reduced_solve(b_W, b_t, b_z):
            y_W, y_t = G_transpose(H_inv(b_z))
            r_W, r_t = b_W + y_W, b_t + y_t
            dW = system.solve(r_W - divergence(graph, np.einsum("eij,ej->ei", X_T, r_t)))
            dt = np.einsum("eij,ej->ei", N_tt_inv, r_t) - np.einsum("eij,ej->ei", X, differences(graph, dW))
            G_dx = G_times(dW, dt)
            return dW, dt, H_inv(G_dx - b_z), G_dx

        def solve(b_W, b_t, b_z):
            """With iterative refinement against the unreduced equations: near the end the
            scalings span many orders of magnitude and the per-edge elimination loses digits
            (the third block, ``dz = H_inv (G dx - b_z)``, holds by construction)."""
            dW, dt, dz, G_dx = reduced_solve(b_W, b_t, b_z)
            size = np.inf
            enough = REFINE_BELOW * max(float(np.abs(b_W).max()), float(np.abs(b_t).max()))
            for _ in range(REFINEMENTS):
                y_W, y_t = G_transpose(dz)
                e_W = b_W - np.einsum("nij,nj->ni", H, dW) - y_W
                e_t = b_t - y_t
                new_size = max(float(np.abs(e_W).max()), float(np.abs(e_t).max()))
                if not new_size < size or new_size <= enough:
                    break
                size = new_size
                cW, ct, cz, cG = reduced_solve(e_W, e_t, np.zeros_like(b_z))
                dW, dt, dz, G_dx = dW + cW, dt + ct, dz + cz, G_dx + cG
            return dW, dt, dz, G_dx

        return solve

    # the starting point of [1] Sec. 8: the Newton system with H_nt = I, then into the cones
    W, t, z, G_x = factorize(cones.identity_scaling(E))(-g0, -cost_t, np.zeros((E, k)))
    s = -G_x
    z = G_x.copy()
    for u in (s, z):
        lowest = float(cones.min_eig(u).min())
        if lowest <= 0:
            u += (1.0 - lowest) * cones.unit
    setup_time = time.perf_counter() - t_start
    best, history, status, message = None, [], None, ""
    next_check = 100.0 * tol
    iteration = 0
    mu_history = []
    while True:
        y_W, y_t = G_transpose(z)
        r_W = np.einsum("nij,nj->ni", H, W) + g0 + y_W
        r_t = cost_t + y_t
        r_z = G_times(W, t) + s
        mu = float(np.einsum("ek,ek->", s, z)) / cones.degree
        measure = mu * cones.degree / (1.0 + 2.0 * abs(problem.objective(W)))
        mu_history.append(mu)
        last = iteration >= max_iter or (deadline is not None and time.perf_counter() > deadline)
        if measure <= next_check or last:
            cert = certify_pair(problem, W, cones.flows(z, d), tol=tol)
            history.append({"iteration": iteration, "time": time.perf_counter() - t_start, "primal": cert.primal,
                            "dual": cert.dual, "gap": cert.gap, "rel_gap": cert.rel_gap, "measure": measure})
            next_check = min(next_check, measure) / 10.0
            if best is None or cert.rel_gap < best[0].rel_gap:
                best = (cert, W.copy())
            if cert.rel_gap <= tol:
                status = Status.OPTIMAL
                break
        if last:
            status = Status.MAX_ITER if iteration >= max_iter else Status.TIME_LIMIT
            message = (f"reached max_iter = {max_iter}" if status == Status.MAX_ITER
                       else f"reached time_limit = {time_limit:g} s")
            break
        if iteration >= STALL_STEPS and not mu_history[-1] < STALL_FACTOR * mu_history[-1 - STALL_STEPS]:
            status = Status.INACCURATE
            message = (f"the barrier parameter fell less than {1 / STALL_FACTOR:g}x in the last {STALL_STEPS} "
                       f"Newton steps (badly scaled data: Clarabel's equilibration copes better)")
            break
        iteration += 1
        # (NaN from a point that rounding pushed out of the cones ends the run at the step test)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            scaling = cones.scaling(s, z)
            W_nt, W_nt_inv = scaling
            lam = cones.times(W_nt, z)
            try:
                newton = factorize(scaling)  # (one factorization for both directions)
                # affine direction: lam o (W dz + W^-1 ds) = -lam o lam
                dW, dt, dz, G_dx = newton(-r_W, -r_t, -r_z + s)
                ds = -r_z - G_dx
                alpha = min(1.0, cones.max_step(s, ds), cones.max_step(z, dz))
                sigma = min(1.0, max(0.0, float(np.einsum("ek,ek->", s + alpha * ds, z + alpha * dz))
                                     / (mu * cones.degree))) ** 3
                # combined direction with Mehrotra's second-order term
                scaled_ds = cones.times(W_nt_inv, ds)
                scaled_dz = cones.times(W_nt, dz)
                xi = cones.divide(lam, -cones.product(lam, lam) - cones.product(scaled_ds, scaled_dz)
                                  + sigma * mu * cones.unit)
                dW, dt, dz, G_dx = newton(-r_W, -r_t, -r_z - cones.times(W_nt, xi))
            except FloatingPointError as exc:
                status, message = Status.INACCURATE, f"stopped at Newton step {iteration}: {exc}"
                break
            ds = -r_z - G_dx
            alpha = min(1.0, STEP_FRACTION * min(cones.max_step(s, ds), cones.max_step(z, dz)))
            if not alpha > 1e-10:
                status, message = Status.INACCURATE, f"the steps stalled at Newton step {iteration}"
                break
        W, t, s, z = W + alpha * dW, t + alpha * dt, s + alpha * ds, z + alpha * dz
    if best is None:  # (stopped before any certificate)
        best = (certify_pair(problem, W, cones.flows(z, d), tol=tol), W.copy())
    cert, W = best
    if cert.rel_gap <= tol:
        status, message = Status.OPTIMAL, uniqueness_note(graph, problem.loss.has_data)
    else:
        message = "; ".join(part for part in (message, f"certified relative gap {cert.rel_gap:.3g} > tol = {tol:g}",
                                              cert.message) if part)
    solve_time = time.perf_counter() - t_start - setup_time
    return GTVResult(status=status, solver="fast", W=W, U=cert.U, primal=cert.primal, dual=cert.dual, gap=cert.gap,
                     rel_gap=cert.rel_gap, value=cert.primal, iterations=iteration, setup_time=setup_time,
                     solve_time=solve_time, history=pd.DataFrame(history), message=message,
                     residuals={**cert.residuals, "stationarity": stationarity(problem, W, cert.U)},
                     info={"method": "schur", "factorizations": factorizations, "node_system_nnz": system.factor.nnz,
                           "node_gaps": cert.node_gaps, "edge_gaps": cert.edge_gaps})
