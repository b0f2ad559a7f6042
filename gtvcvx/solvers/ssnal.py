"""Semismooth Newton augmented Lagrangian (SSNAL) for convex clustering problems.

GTV minimization with the squared-distance loss ``L_i(w) = ||w - a_i||^2`` and a norm penalty
(``Norm2`` or ``Norm1``) on any weighted graph (disconnected graphs and isolated nodes
included), solved by the method of Sun, Toh & Yuan: an augmented Lagrangian method on the
splitting ``Y = D W`` whose subproblems are strongly convex, once continuously differentiable
and solved by a globalized semismooth Newton method. Everything is exact (no smoothing of the
problem); every returned result carries a :func:`~gtvcvx.solvers.certificate.certify_pair`
certificate.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from .._threads import blas_threads as blas_threads_limit
from .._validation import check_gap_tolerance, check_positive_int, check_positive_number, check_time_limit
from ..capabilities import CapabilityError, require
from ..problem import GTVProblem
from ..results import GTVResult, Status
from ._cg import conjugate_gradient
from .certificate import Certificate, FlowProjector, certified_statuses, certify_pair
from ._pdhg_common import warm_start_parts
from ._scaling import solve_scaled

#: Dual-ball geometries whose projection SSNAL differentiates (Norm2: Euclidean balls, Norm1: boxes).
SSNAL_BALLS = ("l2", "linf")

__all__ = ["solve_ssnal", "SSNALIterationInfo", "LINEAR_SOLVERS"]

#: Linear solvers of the Newton systems.
LINEAR_SOLVERS = ("auto", "direct", "kron", "cg")

#: ``linear_solver="auto"`` uses ``"kron"`` up to this many points whatever the dimension ...
KRON_ALWAYS = 3_000
#: ... and for points in at most this many dimensions, ``"cg"`` otherwise.
KRON_MAX_DIM = 3


@dataclass
class SSNALIterationInfo:
    """What a callback sees after every augmented Lagrangian iteration (a certified pair)."""

    iteration: int
    elapsed: float
    W: np.ndarray
    U: np.ndarray
    certificate: Certificate
    sigma: float
    newton_iterations: int
    cg_iterations: int


# ------------------------------------------------------------------------------------ checks
def _check_problem(problem) -> None:
    if not isinstance(problem, GTVProblem):
        raise TypeError(f"problem must be a gtvcvx.GTVProblem, got {type(problem).__name__}")
    require(problem.loss, ("separable_points",), user="solve_ssnal")
    if problem.penalty.dual_ball not in SSNAL_BALLS:
        raise CapabilityError(f"solve_ssnal needs a norm penalty whose dual ball it can differentiate "
                              f"(geometry {' or '.join(repr(b) for b in SSNAL_BALLS)}, e.g. Norm2, Norm1); penalty "
                              f"'{problem.penalty.name}' declares {problem.penalty.dual_ball!r}; use gtvcvx.solve "
                              "for other penalties")


def _check_options(tol, max_iter, time_limit, max_newton, linear_solver, sigma):
    check_gap_tolerance(tol, "tol")
    check_positive_int(max_iter, "max_iter")
    check_time_limit(time_limit)
    check_positive_int(max_newton, "max_newton")
    if linear_solver not in LINEAR_SOLVERS:
        raise ValueError(f"linear_solver must be one of {LINEAR_SOLVERS}, got {linear_solver!r}")
    check_positive_number(sigma, "sigma", allow_none=True)


# ------------------------------------------------------------------------------------ projections
class _Balls:
    """Projection onto the capacity balls ``||z_e||_* <= b_e`` and its generalized Jacobian.

    For ``Norm2`` the Jacobian at ``w_e`` is ``I`` inside the ball and
    ``rho_e (I - n_e n_e^T)`` outside (``rho_e = b_e / ||w_e||``, ``n_e = w_e / ||w_e||``);
    for ``Norm1`` (boxes) it is the 0/1 diagonal of the coordinates inside ``(-b_e, b_e)``.
    On the boundary the element with the larger identity part is chosen; ``b_e = 0`` gives 0.
    """

    def __init__(self, penalty, radius: np.ndarray):
        self.l2 = penalty.dual_ball == "l2"
        self.radius = radius
        self.rcol = radius[:, None]

    def project(self, Wv: np.ndarray) -> np.ndarray:
        if self.l2:
            norms = np.sqrt(np.einsum("ed,ed->e", Wv, Wv))
            factor = np.divide(self.radius, norms, out=np.ones_like(norms), where=norms > self.radius)
            return Wv * factor[:, None]
        return np.clip(Wv, -self.rcol, self.rcol)

    def jacobian(self, Wv: np.ndarray):
        """Per-edge Jacobian data: ``(inside, rho, normal)`` for Norm2, the 0/1 mask for Norm1."""
        if self.l2:
            norms = np.sqrt(np.einsum("ed,ed->e", Wv, Wv))
            positive = self.radius > 0
            out = (norms > self.radius) & positive
            rho = np.divide(self.radius, norms, out=np.zeros_like(norms), where=out)
            coef = np.where(out, rho, positive.astype(float))
            normal = np.divide(Wv, norms[:, None], out=np.zeros_like(Wv), where=out[:, None])
            return _L2Jacobian(coef, rho, normal)
        mask = (np.abs(Wv) < self.rcol).astype(float)
        return _L1Jacobian(mask)


@dataclass
class _L2Jacobian:
    """``J_e = coef_e I - rho_e n_e n_e^T``: ``coef = 1, rho = 0`` inside, ``coef = rho = b / ||w||`` outside."""

    coef: np.ndarray    # (E,)
    rho: np.ndarray     # (E,)
    normal: np.ndarray  # (E, d), zero rows inside

    def apply(self, G: np.ndarray) -> np.ndarray:
        """``J G`` edge by edge."""
        proj = np.einsum("ed,ed->e", G, self.normal)
        proj *= self.rho
        R = G * self.coef[:, None]
        R -= proj[:, None] * self.normal
        return R

    def blocks(self, d: int) -> np.ndarray:
        """Dense (E, d, d) Jacobian blocks."""
        B = -self.rho[:, None, None] * (self.normal[:, :, None] * self.normal[:, None, :])
        idx = np.arange(d)
        B[:, idx, idx] += self.coef[:, None]
        return B

    def scalar_weights(self, d: int) -> np.ndarray:
        """Per-edge scalar ``trace(J_e) / d`` (the Kronecker part of the Jacobian)."""
        return self.coef - self.rho / d


@dataclass
class _L1Jacobian:
    mask: np.ndarray  # (E, d) 0/1

    def apply(self, G: np.ndarray) -> np.ndarray:
        return self.mask * G


# ------------------------------------------------------------------------------------ linear solvers
class _DirectSolver:
    """Sparse direct solves of ``H = I + sigma D^T J D`` (nd x nd, node-major unknowns ``i d + r``).

    The sparsity pattern (full ``d x d`` blocks per edge for Norm2, diagonal blocks for Norm1)
    is built once; every Newton step only scatters the new values into it (``bincount``) and
    factorizes with SuperLU in symmetric mode, reusing the fill-reducing column ordering
    computed at the first factorization.
    """

    def __init__(self, edges: np.ndarray, n: int, d: int, full_blocks: bool):
        self.n, self.d, self.full = n, d, full_blocks
        N = n * d
        i, j = edges[:, 0].astype(np.int64), edges[:, 1].astype(np.int64)
        if full_blocks:
            r = np.repeat(np.arange(d), d)
            s = np.tile(np.arange(d), d)
        else:
            r = s = np.arange(d)
        m = r.size
        rows, cols = [], []
        for p, q in ((i, i), (j, j), (i, j), (j, i)):
            rows.append((p[:, None] * d + r[None, :]).reshape(-1))
            cols.append((q[:, None] * d + s[None, :]).reshape(-1))
        diag = np.arange(N, dtype=np.int64)
        rows.append(diag)
        cols.append(diag)
        keys = np.concatenate(cols) * N + np.concatenate(rows)  # column-major: sorted keys = CSC order
        uniq, inverse = np.unique(keys, return_inverse=True)
        self.inverse = inverse
        self.n_edge_entries = 4 * edges.shape[0] * m
        self.nnz = uniq.size
        self.indices = (uniq % N).astype(np.int32)
        counts = np.bincount(uniq // N, minlength=N)
        self.indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
        self.N = N
        self.m = m
        self.perm = None
        self.factorizations = 0

    def matrix(self, sigma: float, values: np.ndarray) -> sp.csc_matrix:
        """``H`` from per-edge block values (E, m) (``m = d^2`` full blocks or ``d`` diagonals)."""
        sv = sigma * values.reshape(-1)
        weights = np.concatenate([sv, sv, -sv, -sv, np.ones(self.N)])
        data = np.bincount(self.inverse, weights=weights, minlength=self.nnz)
        return sp.csc_matrix((data, self.indices, self.indptr), shape=(self.N, self.N))

    def factorize(self, H: sp.csc_matrix):
        from scipy.sparse.linalg import splu

        options = dict(SymmetricMode=True)
        if self.perm is None:
            lu = splu(H, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0, options=options)
            self.perm = lu.perm_c.copy()
            self.iperm = np.argsort(self.perm)
            self.factorizations += 1
            return lambda b: lu.solve(b)
        P = H[self.iperm][:, self.iperm].tocsc()
        lu = splu(P, permc_spec="NATURAL", diag_pivot_thresh=0.0, options=options)
        self.factorizations += 1
        iperm, perm = self.iperm, self.perm
        return lambda b: lu.solve(b[iperm])[perm]

    def solve(self, sigma: float, jac, rhs: np.ndarray) -> tuple[np.ndarray, int]:
        if isinstance(jac, _L2Jacobian):
            values = jac.blocks(self.d).reshape(jac.coef.shape[0], -1)
        else:
            values = jac.mask
        H = self.matrix(sigma, values)
        solve = self.factorize(H)
        x = solve(rhs.reshape(-1))
        return x.reshape(self.n, self.d), 0


class _CGSolver:
    """Preconditioned conjugate gradients on ``H = I + sigma D^T J D`` (matrix free).

    Preconditioner: the diagonal of ``H`` (Jacobi), computed edge-wise without forming ``H``.
    """

    def __init__(self, D: sp.csr_matrix, Dt: sp.csr_matrix, n: int, d: int, max_iter: int):
        self.D, self.Dt, self.n, self.d = D, Dt, n, d
        self.absDt = abs(Dt).tocsr()
        self.max_iter = max_iter
        self.rtol = 0.1

    def solve(self, sigma: float, jac, rhs: np.ndarray, atol: float) -> tuple[np.ndarray, int]:
        D, Dt = self.D, self.Dt

        def apply(V):
            return V + sigma * (Dt @ jac.apply(D @ V))

        if isinstance(jac, _L2Jacobian):
            diag_j = jac.coef[:, None] - jac.rho[:, None] * jac.normal ** 2
        else:
            diag_j = jac.mask
        inv = 1.0 / (1.0 + sigma * (self.absDt @ diag_j))

        def precond(R):
            return inv * R

        X, its, _ = conjugate_gradient(apply, rhs, atol=max(self.rtol * float(np.linalg.norm(rhs)), atol),
                                       max_iter=self.max_iter, precond=precond)
        return X, its


class _KronSolver:
    """Conjugate gradients on ``H = I + sigma D^T J D`` preconditioned by ``M = I + sigma D^T S D``.

    ``S = diag(s_e)`` is the scalar (Kronecker) part of the Jacobian, ``s_e = trace(J_e) / d``,
    so ``M`` acts on every coordinate with the same ``n x n`` matrix: one sparse factorization
    (SuperLU, symmetric mode, fill-reducing ordering computed once) serves all ``d``
    coordinates. ``M`` is exact on fused edges (``J_e = I``, where the large ``sigma`` lives) and
    differs from ``H`` only on the edges at capacity, so few iterations are needed.
    """

    def __init__(self, D: sp.csr_matrix, Dt: sp.csr_matrix, edges: np.ndarray, n: int, d: int, max_iter: int):
        self.D, self.Dt, self.n, self.d = D, Dt, n, d
        self.scalar = _DirectSolver(edges, n, 1, full_blocks=False)
        self.max_iter = max_iter
        self.rtol = 0.1
        self.M = None
        self.M_sigma = None
        self.base_its = self.last_its = 0
        self.factor_time = self.iter_time = 0.0

    @property
    def factorizations(self):
        return self.scalar.factorizations

    def solve(self, sigma: float, jac, rhs: np.ndarray, atol: float) -> tuple[np.ndarray, int]:
        D, Dt, d = self.D, self.Dt, self.d
        # refactor when sigma changed, or when the lagging preconditioner costs more extra CG
        # iterations than a factorization is worth (both timed as we go)
        stale = (self.M is None or sigma != self.M_sigma
                 or self.last_its > self.base_its + max(2.0, self.factor_time / max(self.iter_time, 1e-9)))
        if stale:
            t0 = time.perf_counter()
            s = jac.scalar_weights(d) if isinstance(jac, _L2Jacobian) else jac.mask.mean(axis=1)
            self.M = self.scalar.factorize(self.scalar.matrix(sigma, s[:, None]))
            self.M_sigma = sigma
            self.factor_time = time.perf_counter() - t0
        M = self.M

        def apply(V):
            return V + sigma * (Dt @ jac.apply(D @ V))

        t0 = time.perf_counter()
        X, its, _ = conjugate_gradient(apply, rhs, atol=max(self.rtol * float(np.linalg.norm(rhs)), atol),
                                       max_iter=self.max_iter, precond=M)
        if its:
            self.iter_time = (time.perf_counter() - t0) / (its + 1)
        if stale:
            self.base_its = its
        self.last_its = its
        return X, its


def _line_search(balls, XA, dX, Wv, dW, dDX, slope, *, c: float = 0.2, max_evals: int = 30):
    """Step ``t`` along a descent direction with ``|f'(t)| <= c |f'(0)|`` (or ``t = 1`` if ``f'(1) <= 0``).

    ``f(t) = varphi(X + t dX)`` is convex, so its derivative
    ``f'(t) = <X - A + t dX, dX> + <Pi_B(w + t dW), dD X>`` is nondecreasing; its root in
    ``(0, 1]`` is bracketed and found by regula falsi (Illinois), one projection per evaluation.
    Returns ``(t, evaluations)``.
    """
    c0 = float(np.einsum("nd,nd->", XA, dX))
    dd = float(np.einsum("nd,nd->", dX, dX))

    def deriv(t):
        return c0 + t * dd + float(np.einsum("ed,ed->", balls.project(Wv + t * dW), dDX))

    g_hi = deriv(1.0)
    if g_hi <= c * abs(slope):
        return 1.0, 1
    lo, g_lo, hi = 0.0, slope, 1.0
    side = 0
    t = 1.0
    for evals in range(2, max_evals + 1):
        t = (lo * g_hi - hi * g_lo) / (g_hi - g_lo)
        if not lo < t < hi:
            t = 0.5 * (lo + hi)
        g = deriv(t)
        if abs(g) <= c * abs(slope):
            return t, evals
        if g < 0:
            lo, g_lo = t, g
            if side == -1:
                g_hi *= 0.5
            side = -1
        else:
            hi, g_hi = t, g
            if side == 1:
                g_lo *= 0.5
            side = 1
    return t, max_evals


def _auto_linear_solver(n: int, d: int) -> str:
    """``"kron"`` (one scalar sparse factorization per Newton system, reused while it pays) for
    small problems and low-dimensional point clouds, whose k-NN graphs factorize with little
    fill; ``"cg"`` (Jacobi-preconditioned CG) otherwise: k-NN graphs of points in 5 or more
    dimensions have large separators, so their factors fill in (measured: 10^4 points in 10-D
    take 1.3 s per factorization, 10^5 points did not finish in minutes)."""
    return "kron" if n <= KRON_ALWAYS or d <= KRON_MAX_DIM else "cg"


# ------------------------------------------------------------------------------------ the solver
@certified_statuses
def solve_ssnal(problem: GTVProblem, tol: float = 1e-6, max_iter: int = 200, time_limit: float | None = None,
                warm_start=None, callback=None, *, sigma: float | None = None, sigma_growth: float = 5.0,
                sigma_max: float = 1e8, max_newton: int = 50, linear_solver: str = "auto",
                cg_max_iter: int = 500, blas_threads: int | None = 1) -> GTVResult:
    r"""Convex clustering (GTV with the squared-distance loss and a norm penalty) by SSNAL.

    Parameters
    ----------
    problem : GTVProblem
        With the ``SquaredDistance`` loss and the ``Norm2`` or ``Norm1`` penalty.
    tol : float
        Stop when the certified relative gap ``(P - D) / (1 + |P| + |D|) <= tol``. Points whose
        objective at ``W = 0`` is below 1 are solved scaled by a power of two, as by
        :func:`gtvcvx.solve` (:mod:`gtvcvx.solvers._scaling`; results and callbacks in the caller's
        units, ``info["label_scale"]``).
    max_iter : int
        Limit on the augmented Lagrangian (outer) iterations (status ``max_iter``).
    time_limit : float, optional
        Seconds (status ``time_limit``), checked after every Newton step.
    warm_start : GTVResult or dict, optional
        Start from ``W`` and/or a flow ``U`` (e.g. the solution at a nearby lam); the flow is
        projected into the capacity balls.
    callback : callable, optional
        Called with an :class:`SSNALIterationInfo` (a certified pair) after every outer
        iteration; returning ``True`` stops the run (status ``max_iter``, message
        "stopped by callback").
    sigma : float, optional
        Initial penalty parameter of the augmented Lagrangian (default: from the data).
    sigma_growth, sigma_max : float
        ``sigma`` is multiplied by ``sigma_growth`` (up to ``sigma_max``) after every outer
        iteration in which the primal infeasibility did not fall tenfold.
    max_newton : int
        Newton steps per subproblem.
    linear_solver : {"auto", "direct", "cg"}
        Newton systems by sparse direct factorization (SuperLU, symmetric mode, fill-reducing
        ordering computed once, the whole ``nd x nd`` system); ``"kron"``: conjugate gradients
        preconditioned by the factorized scalar ``n x n`` part of the Newton matrix (one
        factorization serves all ``d`` coordinates and is reused across Newton steps while it
        pays); ``"cg"``: Jacobi-preconditioned conjugate gradients (no factorization); ``"auto"``
        (default): ``"kron"`` for up to 3000 points or points in at most 3 dimensions, ``"cg"``
        otherwise (k-NN graphs of higher-dimensional points fill in when factorized).
    cg_max_iter : int
        Conjugate-gradient iterations per Newton system.
    blas_threads : int or None
        Threads BLAS may use (default 1, as :func:`gtvcvx.solve`); None keeps the process setting.

    Returns
    -------
    GTVResult
        ``solver="ssnal"``; ``iterations`` counts outer iterations; ``info`` has
        ``newton_iterations``, ``cg_iterations``, ``factorizations``, ``sigma``,
        ``linear_solver``, ``certificate_time``; ``history`` one row per outer iteration.

    Notes
    -----
    Divide the objective by 2: ``min_X (1/2)||X - A||^2 + sum_e b_e phi((D X)_e)`` with
    ``b_e = lam A_e / 2``. With the splitting ``Y = D X`` and multiplier ``Z`` (|E| x d), the
    augmented Lagrangian method minimizes, at every outer step,

    .. math::

        \varphi(X) = \tfrac12\|X - A\|^2 + \tfrac{1}{2\sigma}\big(\|\sigma D X + Z\|^2
                     - \operatorname{dist}^2(\sigma D X + Z, \mathcal{B})\big),

    (``B`` = the capacity balls ``||z_e||_* <= b_e``; the Moreau envelope of the penalty with
    ``Y`` eliminated) and updates ``Z <- Pi_B(sigma D X + Z)``. ``varphi`` is strongly convex
    with the semismooth gradient ``X - A + D^T Pi_B(sigma D X + Z)``; Newton steps solve

    .. math:: (I + \sigma D^\top J D)\, \Delta X = -\nabla\varphi(X), \qquad J \in \partial \Pi_B,

    where ``J`` is block diagonal over edges: ``I`` on edges inside their ball (fused),
    ``rho_e (I - n_e n_e^T)`` outside (Norm2), a 0/1 diagonal (Norm1). An Armijo line search
    on ``varphi`` globalizes the steps. A subproblem stops when
    ``||grad varphi|| <= 0.2 ||Pi_B(.) - Z|| / sigma`` (its error is a fraction of the outer
    progress) or below the level at which it no longer limits the gap.

    Certificate: the flow ``U = 2 Pi_B(sigma D X + Z)`` is dual feasible, and the gap of
    ``(X, U)`` is ``||grad varphi(X)||^2 + sum_e (lam A_e phi(z_e) - <z_e, U_e>)`` with
    ``z = D X``; the run stops when :func:`certify_pair` confirms ``rel_gap <= tol``.

    References
    ----------
    .. [1] D. Sun, K.-C. Toh, Y. Yuan, "Convex clustering: model, theoretical guarantee and
       efficient algorithm", JMLR 22(9), 2021.
    .. [2] Y. Yuan, D. Sun, K.-C. Toh, "An efficient semismooth Newton based algorithm for
       convex clustering", ICML 2018.
    .. [3] X. Li, D. Sun, K.-C. Toh, "A highly efficient semismooth Newton augmented
       Lagrangian method for solving Lasso problems", SIAM J. Optim. 28(1), 2018.
    """
    _check_problem(problem)
    _check_options(tol, max_iter, time_limit, max_newton, linear_solver, sigma)
    max_iter, max_newton = int(max_iter), int(max_newton)

    def run(problem, time_limit, warm_start, callback):
        with blas_threads_limit(blas_threads):
            return _solve(problem, float(tol), max_iter, time_limit, warm_start, callback, sigma, float(sigma_growth),
                          float(sigma_max), max_newton, linear_solver, int(cg_max_iter))

    # points far below 1: solved where tol is relative (as gtvcvx.solve does)
    scaled_result = solve_scaled(problem, time_limit, warm_start, callback, run)
    return scaled_result if scaled_result is not None else run(problem, time_limit, warm_start, callback)


def _solve(problem, tol, max_iter, time_limit, warm_start, callback, sigma, sigma_growth, sigma_max, max_newton,
           linear_solver, cg_max_iter) -> GTVResult:
    t_start = time.perf_counter()
    n, d, m = problem.n, problem.d, problem.n_edges
    A = np.asarray(problem.loss.points, dtype=float)
    caps = np.asarray(problem.capacities, dtype=float)
    radius = 0.5 * caps
    l2 = problem.penalty.dual_ball == "l2"
    balls = _Balls(problem.penalty, radius)
    D = problem.graph.incidence.tocsr()
    Dt = D.T.tocsr()

    W0, U0 = warm_start_parts(problem, warm_start)
    X = A.copy() if W0 is None else W0
    Z = np.zeros((m, d)) if U0 is None else balls.project(0.5 * U0)

    if linear_solver == "auto":
        linear_solver = _auto_linear_solver(n, d)
    lin = None
    if m and linear_solver == "direct":
        lin = _DirectSolver(problem.graph.edges, n, d, full_blocks=l2)
    elif m and linear_solver == "kron":
        lin = _KronSolver(D, Dt, problem.graph.edges, n, d, cg_max_iter)
    elif m:
        lin = _CGSolver(D, Dt, n, d, cg_max_iter)

    if sigma is None:
        # balance sigma (D X) against the flows: sigma ~ typical capacity / typical difference
        DA = D @ A
        diff = float(np.sqrt(np.einsum("ed,ed->", DA, DA) / max(m, 1)))
        cap = float(np.sqrt(np.mean(radius ** 2))) if m else 0.0
        sigma = min(max(cap / diff, 1e-3), 1e3) if diff > 0 and cap > 0 else 1.0
    sigma = float(sigma)
    projector = FlowProjector(problem, warm=False)
    setup_time = time.perf_counter() - t_start

    def evaluate(Xc, Zc, sig, DX=None):
        DX = D @ Xc if DX is None else DX
        Wv = sig * DX + Zc
        P = balls.project(Wv)
        R = Wv - P
        value = 0.5 * float(np.einsum("nd,nd->", Xc - A, Xc - A)) + (
            float(np.einsum("ed,ed->", Wv, Wv)) - float(np.einsum("ed,ed->", R, R))) / (2.0 * sig)
        return DX, Wv, P, value

    def primal_parts(Xc, DX):
        node = float(np.einsum("nd,nd->", Xc - A, Xc - A))
        if l2:
            edge_norm = np.sqrt(np.einsum("ed,ed->e", DX, DX))
        else:
            edge_norm = np.abs(DX).sum(axis=1)
        return node + float(caps @ edge_norm)

    history = []
    status, message = Status.MAX_ITER, f"reached max_iter = {max_iter}"
    newton_total = cg_total = 0
    cert_time = 0.0
    best = None  # (rel_gap, W, certificate)
    iteration = 0
    eta_prev = None
    t_solve = time.perf_counter()
    timed_out = False
    DX, Wv, P, phi = evaluate(X, Z, sigma)
    grad = X - A + Dt @ P if m else X - A

    for iteration in range(1, max_iter + 1):
        newton = cg = line_steps = 0
        # ---------------- inner: semismooth Newton on varphi
        while True:
            gnorm = float(np.linalg.norm(grad))
            eta_now = float(np.linalg.norm(P - Z)) / sigma if m else 0.0
            primal = primal_parts(X, DX) if m else float(np.einsum("nd,nd->", X - A, X - A))
            floor = math.sqrt(0.05 * tol * (1.0 + 2.0 * abs(primal)))
            if gnorm <= max(0.2 * eta_now, floor) or newton >= max_newton or m == 0:
                break
            if time_limit is not None and time.perf_counter() - t_start > time_limit:
                timed_out = True
                break
            jac = balls.jacobian(Wv)
            if linear_solver == "direct":
                dX, its = lin.solve(sigma, jac, -grad)
            else:
                dX, its = lin.solve(sigma, jac, -grad, atol=0.1 * max(0.2 * eta_now, floor))
            cg += its
            newton += 1
            dDX = D @ dX
            slope = float(np.einsum("nd,nd->", grad, dX))
            if slope >= 0:  # not a descent direction (inexact solve): fall back to the gradient
                dX, dDX, slope = -grad, -(D @ grad), -gnorm ** 2
            step, evals = _line_search(balls, X - A, dX, Wv, sigma * dDX, dDX, slope)
            line_steps += evals
            DXt = DX + step * dDX
            Xt = X + step * dX
            _, Wt, Pt, phit = evaluate(Xt, Z, sigma, DXt)
            X, DX, Wv, P, phi = Xt, DXt, Wt, Pt, phit
            grad = X - A + Dt @ P
        newton_total += newton
        cg_total += cg

        # ---------------- multiplier update and certificate of (X, U = 2 P)
        Znew = P
        eta = float(np.linalg.norm(Znew - Z)) / sigma if m else 0.0
        c0 = time.perf_counter()
        cert = certify_pair(problem, X, 2.0 * Znew, projector=projector, tol=tol)
        cert_time += time.perf_counter() - c0
        elapsed = time.perf_counter() - t_start
        history.append({"iteration": iteration, "time": elapsed, "primal": cert.primal, "dual": cert.dual,
                        "gap": cert.gap, "rel_gap": cert.rel_gap, "sigma": sigma, "newton": newton, "cg": cg,
                        "line_search": line_steps, "grad_norm": float(np.linalg.norm(grad)),
                        "primal_infeasibility": eta})
        if best is None or cert.rel_gap <= best[0]:
            best = (cert.rel_gap, X.copy(), cert)
        if cert.rel_gap <= tol:
            status, message = Status.OPTIMAL, ""
            break
        if callback is not None and callback(SSNALIterationInfo(iteration, elapsed, X, cert.U, cert, sigma,
                                                                newton_total, cg_total)):
            status, message = Status.MAX_ITER, "stopped by callback"
            break
        if timed_out or (time_limit is not None and time.perf_counter() - t_start > time_limit):
            status, message = Status.TIME_LIMIT, f"reached time_limit = {time_limit:g} s"
            break
        if not (np.isfinite(X).all() and np.isfinite(Znew).all()):
            status, message = Status.SOLVER_ERROR, "iterates became non-finite"
            break
        Z = Znew
        if eta_prev is not None and eta > 0.1 * eta_prev:
            sigma = min(sigma * sigma_growth, sigma_max)
        eta_prev = eta
        DX, Wv, P, phi = evaluate(X, Z, sigma, DX)
        grad = X - A + Dt @ P

    solve_time = time.perf_counter() - t_solve
    _, W_best, cert = best
    residuals = dict(cert.residuals)
    grad_f = 2.0 * (W_best - A)
    residuals["stationarity"] = float(np.linalg.norm(grad_f + Dt @ cert.U) / (1.0 + np.linalg.norm(grad_f)))
    if cert.message and status != Status.OPTIMAL:
        message = f"{message}; {cert.message}" if message else cert.message
    return GTVResult(status=status, solver="ssnal", W=W_best, U=cert.U, primal=cert.primal, dual=cert.dual,
                     gap=cert.gap, rel_gap=cert.rel_gap, value=cert.primal, iterations=iteration,
                     setup_time=setup_time, solve_time=solve_time, residuals=residuals,
                     history=pd.DataFrame(history), message=message,
                     info={"method": "ssnal", "linear_solver": linear_solver, "sigma": sigma,
                           "newton_iterations": newton_total, "cg_iterations": cg_total,
                           "factorizations": getattr(lin, "factorizations", 0),
                           "certificate_time": cert_time, "node_gaps": cert.node_gaps,
                           "edge_gaps": cert.edge_gaps})
