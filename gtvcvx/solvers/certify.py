"""Certify a candidate GTV solution ``W`` from any solver, with or without its flows ``U``.

Without flows, a dual certificate is built from ``W`` alone (see :func:`flow_from_primal`):
the optimality conditions of GTV minimization are

.. math:: \\nabla F(W) + D^\\top U = 0, \\qquad U_e \\in c_e\\, \\partial\\phi((DW)_e),

so on every edge where ``(DW)_e`` is clearly nonzero the flow is the (single-valued)
subgradient, and on the other edges it is whatever flow within the capacity balls best
balances the node gradients. Every candidate flow is then certified by
:func:`gtvcvx.solvers.certificate.certify_pair` (which restores exact dual feasibility), so
the reported gap is an honest upper bound on ``P(W) - P*`` whatever the construction did.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.sparse.csgraph import connected_components

from .._validation import check_time_limit
from ..capabilities import provides
from ..problem import GTVProblem
from ..results import Status
from ._cg import conjugate_gradient
from .certificate import Certificate, FlowProjector, certify_pair

__all__ = ["certify", "flow_from_primal", "describe_failures", "ZERO_THRESHOLDS"]

#: Relative thresholds below which an edge difference ``||(DW)_e||`` counts as zero; every
#: threshold gives one candidate flow and the certificate keeps the best (all are valid bounds).
ZERO_THRESHOLDS = (0.0, 1e-10, 1e-8, 1e-6, 1e-4, 1e-2)


def _check_problem(problem) -> GTVProblem:
    if not isinstance(problem, GTVProblem):
        raise TypeError(f"problem must be a gtvcvx.GTVProblem, got {type(problem).__name__}")
    return problem


def _lipschitz(problem: GTVProblem) -> float:
    """Upper bound on ``||D||^2 = lambda_max(D^T D)``: ``max_e deg(i) + deg(j)`` (Anderson-Morley)."""
    edges = problem.graph.edges
    deg = problem.graph.degree
    return float(max((deg[edges[:, 0]] + deg[edges[:, 1]]).max(initial=0), 1))


def _project(U, free, caps, penalty):
    """Project ``U`` onto the capacity sets, changing only its free entries (in place).

    The fixed entries lie on the boundary of their balls already, so the projection of the
    whole flow moves only the free ones; copying them back makes that exact.
    """
    np.copyto(U, penalty._prox_conjugate(U.copy(), 1.0, caps), where=free)
    return U


def _component_mean_free(R, D, free_cols, n):
    """Remove from ``R`` (n, d) its mean over each connected component of the free subgraph.

    ``free_cols`` is an (|E|, d) mask; columns sharing the same mask share the components.
    The result lies in the range of ``D_F^T`` (column-wise), so the flow system is consistent.
    """
    out = np.zeros_like(R)
    if D.shape[0] == 0:
        return out
    edges_ij = np.abs(D).T.tocsr()  # (n, |E|)
    masks = {}
    for k in range(R.shape[1]):
        key = free_cols[:, k].tobytes()
        masks.setdefault(key, []).append(k)
    for key, cols in masks.items():
        mask = free_cols[:, cols[0]]
        sub = edges_ij[:, np.flatnonzero(mask)]
        adjacency = (sub @ sub.T).tocsr()
        n_comp, labels = connected_components(adjacency, directed=False)
        counts = np.bincount(labels, minlength=n_comp).astype(float)
        Rk = R[:, cols]
        sums = np.zeros((n_comp, len(cols)))
        np.add.at(sums, labels, Rk)
        out[:, cols] = Rk - (sums / counts[:, None])[labels]
    return out


def _min_norm_flow(D, Dt, free, R, max_iter):
    """Minimum-norm free flow with ``D_F^T U_F = R`` by column-batched conjugate gradients."""
    def gram(Y):
        return Dt @ (free * (D @ Y))

    rr0 = np.einsum("nd,nd->d", R, R)
    Y, _, _ = conjugate_gradient(gram, R, atol=1e-14 * np.sqrt(np.maximum(rr0, np.finfo(float).tiny)),
                                 max_iter=max_iter, columnwise=True)
    return free * (D @ Y)


def _polish(U, free, fixed_part, G, D, Dt, caps, penalty, L, max_iter):
    """Accelerated projected gradient (FISTA with gradient restarts) on
    ``min 1/2 ||D^T U + G||^2`` over the free entries of ``U`` within the capacity sets."""
    X = U.copy()
    Y = X.copy()
    t = 1.0
    step = 1.0 / L
    scale = float(np.abs(G).max(initial=0.0)) + float(np.abs(X).max(initial=0.0))
    for _ in range(max_iter):
        grad = free * (D @ (Dt @ Y + G))
        Xn = _project(Y - step * grad, free, caps, penalty)
        np.copyto(Xn, fixed_part, where=~free)
        if float(np.abs(Xn - Y).max(initial=0.0)) <= 1e-15 * L * max(scale, np.finfo(float).tiny):
            X = Xn
            break  # the projected-gradient step no longer moves: stationary to rounding
        if np.einsum("ed,ed->", Y - Xn, Xn - X) > 0:  # gradient restart (O'Donoghue & Candes)
            t = 1.0
            Y = Xn.copy()
        else:
            tn = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
            Y = Xn + ((t - 1.0) / tn) * (Xn - X)
            t = tn
        X = Xn
    return X


def flow_from_primal(problem: GTVProblem, W, *, threshold: float = 0.0, max_iter: int = 300) -> np.ndarray:
    """A flow ``U`` (|E|, d) built from the optimality conditions at ``W``.

    Parameters
    ----------
    problem : GTVProblem
    W : array_like (n, d)
    threshold : float
        Edge differences with ``|(DW)_e| <= threshold * scale`` count as zero (``scale`` is the
        largest entry of ``|W|`` or ``|DW|``); there the subdifferential is the whole
        capacity ball and the flow is free.
    max_iter : int
        Iterations of the conjugate-gradient minimum-norm solve and of the accelerated
        projected-gradient polish.

    Notes
    -----
    The fixed part comes from :meth:`gtvcvx.penalties.Penalty.subgradient_flow` (no class
    switch here), e.g.:

    * ``(1/2)||.||^2`` penalty: ``U_e = c_e (DW)_e`` (the subdifferential is a point).
    * ``||.||_2``: ``U_e = c_e z_e / ||z_e||`` where ``z_e = (DW)_e`` is nonzero;
      ``||.||_1``: ``U_ek = c_e sign(z_ek)`` entrywise where ``z_ek`` is nonzero.
    * The free entries solve ``min ||D^T U + grad F(W)||^2`` within the capacity balls: the
      minimum-norm solution of the (range-projected) flow equations by conjugate gradients,
      clipped into the balls, then polished by accelerated projected gradient.

    The flow need not be feasible; :func:`certify` makes it so before evaluating the dual.
    """
    problem = _check_problem(problem)
    W = problem.check_W(W)
    n_edges, d = problem.n_edges, problem.d
    if n_edges == 0:
        return np.zeros((0, d))
    D = problem.graph.incidence
    Dt = D.T.tocsr()
    caps = np.asarray(problem.capacities, dtype=float)
    Z = D @ W
    penalty = problem.penalty
    scale = max(float(np.abs(W).max(initial=0.0)), float(np.abs(Z).max(initial=0.0)), np.finfo(float).tiny)
    U, free = penalty.subgradient_flow(Z, caps, float(threshold) * scale)
    if not free.any():
        return U  # differentiable penalty: the optimality conditions fix the flow
    G = problem.loss.gradient(W)
    free &= (caps > 0)[:, None]  # zero capacity: the flow must be zero
    if not free.any():
        return U
    fixed_part = U.copy()
    R = -(G + Dt @ U)
    R = _component_mean_free(R, D, free, problem.n)
    correction = _min_norm_flow(D, Dt, free.astype(float), R, max_iter)
    solved = np.isfinite(correction).all()  # else (overflow) the polish starts from the fixed part
    if solved:
        U = U + correction
    clipped = _project(U.copy(), free, caps, penalty)
    if solved and np.array_equal(clipped, U):
        return U  # the minimum-norm flow fits the capacities: the least-squares problem is solved
    return _polish(clipped, free, fixed_part, G, D, Dt, caps, penalty, _lipschitz(problem), max_iter)


def certify(problem: GTVProblem, W, U=None, *, max_iter: int = 300, thresholds=ZERO_THRESHOLDS,
            solve_time: float | None = None, target: float = 1e-9) -> Certificate:
    """Certificate of optimality for a candidate solution ``W`` produced by any solver.

    Parameters
    ----------
    problem : GTVProblem
    W : array_like (n, d)
        Candidate local models.
    U : array_like (|E|, d), optional
        Candidate flows (dual variables). Given, the pair ``(W, U)`` is certified as is.
        Omitted, flows are constructed from ``W`` (:func:`flow_from_primal`, one candidate per
        zero threshold in ``thresholds``) and the best certificate is returned.
    max_iter : int
        Iterations of each flow construction.
    thresholds : sequence of float
        Relative zero thresholds for edge differences (see :func:`flow_from_primal`).
    solve_time : float, optional
        For a loss that is not smooth (hinge, absolute error: see Notes), where the flows built from ``W``
        leave a relative gap above ``target``, also certify ``W`` with the flows of a fast-core solve of
        the problem (warm-started at ``W``, to ``target / 10``, at most this many seconds) and keep the
        better certificate. None (default): no solve. (A smooth loss has one gradient at ``W``, so the
        flows built from it certify an optimum without a solve, and a bad ``W`` costs no solve either.)
    target : float
        The relative gap the caller is after (see ``solve_time``).

    Returns
    -------
    Certificate
        ``primal = P(W)``, ``dual`` = a certified lower bound on ``P*`` (``-inf`` when no
        finite bound was found), ``gap``, ``rel_gap``, node and edge Fenchel-Young terms,
        the feasible flow ``U`` and residuals; ``worst_nodes(k)`` / ``worst_edges(k)`` say where
        the optimality conditions fail.

    Notes
    -----
    ``gap = P(W) - D(U) >= P(W) - P*``: a small gap proves that ``W`` is nearly optimal
    whatever produced it; a large gap means that ``W`` is not optimal *or* that no good flow
    was found (the bound is one-sided). For an optimal ``W`` the constructed flow satisfies
    the optimality conditions and the gap is at rounding level, except where a loss has kinks: at an
    optimum of the hinge or absolute-error loss the samples on their kinks have a whole interval of
    subgradients, and the one ``W`` suggests is not the optimal dual's (an exact optimum on a 10-node
    graph certified only to 0.83). The flows of a solve (``solve_time``) are the optimal dual's whatever
    produced ``W``; the certificate still bounds ``P(W) - P*`` for the pair ``(W, U)`` as any other,
    so it trusts the solve no more than the caller's own flows.

    Examples
    --------
    >>> import gtvcvx as g
    >>> from gtvcvx.testing import certify
    >>> problem = g.GTVProblem(g.graphs.chain(4), g.SquaredDistance([[0.], [0.], [1.], [1.]]), g.Norm2(), 0.1)
    >>> result = g.solve(problem, tol=1e-9)
    >>> certify(problem, result.W).rel_gap < 1e-8
    True
    """
    problem = _check_problem(problem)
    W = problem.check_W(W)
    solve_time = check_time_limit(solve_time, "solve_time")
    if U is not None:
        return certify_pair(problem, W, problem.check_U(U))
    projector = FlowProjector(problem, warm=False)
    best = None
    seen = set()
    for threshold in thresholds:
        flow = flow_from_primal(problem, W, threshold=threshold, max_iter=max_iter)
        key = hash(flow.tobytes())
        if key in seen:
            continue
        seen.add(key)
        cert = certify_pair(problem, W, flow, projector=projector)
        if best is None or _better(cert, best):
            best = cert
        if best.rel_gap <= 1e-14 or not problem.penalty.is_norm:
            break
    if (solve_time is not None and not best.rel_gap <= target and np.isfinite(best.primal)
            and not provides(problem.loss, "smooth")):  # (a W whose P(W) overflows: nothing to certify)
        solved = _certify_with_solved_flow(problem, W, projector, solve_time, target)
        if solved is not None and _better(solved, best):
            best = solved
    return best


def _certify_with_solved_flow(problem: GTVProblem, W, projector, solve_time: float, target: float):
    """``W``'s certificate with the flows of a fast-core solve warm-started at ``W`` (None where the
    solve returns no flows)."""
    from .gtv import solve  # (the solver imports the certificate machinery; loaded only when asked for)

    result = solve(problem, tol=max(target / 10.0, 1e-15), time_limit=solve_time, warm_start={"W": W})
    if result.U is None or result.status in (Status.SOLVER_ERROR, Status.NO_MINIMIZER):
        return None
    cert = certify_pair(problem, W, result.U, projector=projector)
    note = f"certified with the flows of a fast-core solve from W ({result.status}, its own rel_gap {result.rel_gap:.3g})"
    cert.message = "; ".join(filter(None, (note, cert.message)))
    return cert


def _better(a: Certificate, b: Certificate) -> bool:
    ga, gb = a.gap, b.gap
    if np.isnan(gb):
        return not np.isnan(ga)
    return ga < gb


def describe_failures(problem: GTVProblem, W, cert: Certificate, k: int = 5) -> str:
    """Human-readable lines naming the nodes and edges with the largest Fenchel-Young terms."""
    W = problem.check_W(W)
    lines = []
    D = problem.graph.incidence
    V = -(D.T @ cert.U) if problem.n_edges else np.zeros_like(W)
    stationarity = problem.loss.node_stationarity(W, V)
    has_data = problem.loss.has_data
    for i, gap in cert.worst_nodes(k):
        if not (gap > 0) and np.isfinite(gap):
            break
        stat = float(stationarity[i])
        data = "" if has_data[i] else ", node without data"
        lines.append(f"  node {i}: Fenchel-Young term {gap:.3g} "
                     f"(L_i(w_i) + L_i^*(v_i) - <w_i, v_i>), stationarity (distance of -(D^T U)_i from dL_i(w_i)) "
                     f"= {stat:.3g}{data}")
    if problem.n_edges:
        Z = D @ W
        caps = problem.capacities
        edges = problem.graph.edges
        for e, gap in cert.worst_edges(k):
            if not (gap > 0) and np.isfinite(gap):
                break
            i, j = int(edges[e, 0]), int(edges[e, 1])
            usage = (f", ||u_e||_* = {float(problem.penalty._dual_norms(cert.U[e:e + 1])[0]):.3g} "
                     f"<= c_e = {float(caps[e]):.3g}") if problem.penalty.is_norm else f", c_e = {float(caps[e]):.3g}"
            lines.append(f"  edge {e} ({i}-{j}): Fenchel-Young term {gap:.3g} "
                         f"(c_e phi(z_e) + c_e phi^*(u_e / c_e) - <z_e, u_e>), ||z_e|| = "
                         f"{float(np.linalg.norm(Z[e])):.3g}{usage}")
    return "\n".join(lines)
