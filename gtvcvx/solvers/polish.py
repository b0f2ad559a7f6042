r"""Active-set polish: once the fused structure of an iterate is right, solve the cluster-reduced
problem exactly and certify the lifted solution.

With nodes that hold fewer samples than dimensions (``m_i < d``) the iterate's objective converges
long before its certificate does: the flows on edges between clusters must equal
``c_e z_e / ||z_e||`` exactly and conservation forces ``v_i`` into ``range(X_i^T)``, which only a
``W`` that is optimal in the loss's flat directions allows. The polish takes the clusters of the
iterate (components of the edges with ``||z_e|| <= threshold``), minimizes

.. math:: f(v) = \sum_c \tfrac12 v_c^\top H_c v_c + g_c^\top v_c
          + \sum_{q = (a, b)} c_q \|v_a - v_b\|_2

over one model per cluster by Newton's method (smooth while no quotient difference vanishes;
``H_c``, ``g_c`` the summed node quadratics, ``c_q`` the summed capacities between clusters),
lifts ``W = v[labels]`` and certifies it with flows built from it
(:func:`~gtvcvx.solvers.certify.flow_from_primal`). Nothing is assumed: the certificate is computed
from scratch, so a wrong cluster structure only gives a worse gap, never a wrong one.

With the l1 penalty (dual ball ``linf``) the structure is per coordinate: coordinate ``j`` of the
nodes is constant on the components of the edges whose ``|(DW)_{ej}|`` is fused, and on an edge
between two components of coordinate ``j`` the penalty is linear, ``c_e s_{ej} (w_{hj} - w_{tj})``
with the sign ``s_{ej}`` the iterate shows. With ``W = P v`` (``P`` the selection of each
coordinate's component value) the reduced problem is the quadratic

.. math:: \min_v\ \tfrac12 v^\top P^\top H P\, v + (g + D^\top (c \circ S))^\top P v,

one sparse linear system (``H`` the node Hessians, block diagonal; ``S`` the signs, zero inside
components).

References
----------
.. [1] Y. SarcheshmehPour, Y. Tian, L. Zhang, A. Jung, "Clustered federated learning via
   generalized total variation minimization", IEEE Trans. Signal Processing 71, 2023 (the
   cluster-wise structure of GTV solutions, Sec. V).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import spsolve

from .._linesearch import armijo_step
from ..capabilities import provides
from ..problem import GTVProblem
from ..results import relative_gap
from ._edge_kernels import difference_norms, differences, divergence
from ._sparse_factor import block_indices
from .certificate import Certificate, certify_pair
from .certify import flow_from_primal
from .quadratic import MAX_BLOCK_ENTRIES, node_quadratics

__all__ = ["polish_applies", "fused_clusters", "fused_partitions", "polish_clusters", "reduced_newton",
           "reduced_unknowns", "MAX_POLISH_UNKNOWNS", "POLISHED_BALLS"]

#: Largest number of unknowns (clusters x d) of the reduced Newton system: its sparse factorization
#: must stay cheap next to the iterations it saves (measured: a Fig. 2 instance with d = 100 spent
#: 335 s in two polishes of a larger reduced system before this cap; the lag instance has ~1,000).
MAX_POLISH_UNKNOWNS = 2_000

#: Newton steps the l2 polish allows its reduced problem: a right structure converged in 2-5 on
#: every instance measured (2026-11-27: Table I, the bank's graphs at lam 0.05-5, the housing
#: shapes), while a wrong one ran to the old limit of 40 without converging (les miserables at
#: lam 0.5: 0.13 s; the housing 300 shape at lam 0.2, 299 clusters: 0.45 s of a 0.84 s solve) and
#: its certificate then failed (6.5e-4, 0.47). A polish that has not converged is dropped.
POLISH_NEWTON_STEPS = 10


#: The penalties the polish reduces, by their dual ball: the l2 norm (one model per cluster,
#: a smooth reduced objective) and the l1 norm (one value per coordinate's cluster, a quadratic).
POLISHED_BALLS = ("l2", "linf")


def polish_applies(problem: GTVProblem) -> bool:
    """A quadratic loss and the l2- or l1-norm penalty (:data:`POLISHED_BALLS`), ``lam > 0``."""
    return (provides(problem.loss, "quadratic") and problem.penalty.dual_ball in POLISHED_BALLS
            and problem.lam > 0)


def reduced_unknowns(problem: GTVProblem, key) -> int:
    """Unknowns of the reduced problem of a partition with counts ``key`` (:func:`fused_partitions`)."""
    return int(key) * problem.d if problem.penalty.dual_ball == "l2" else int(sum(key))


def reduced_newton(Hc, gc, pairs, caps_q, v, *, max_iter: int = 40, t_min: float = 1e-12,
                   converged_only: bool = False):
    """Damped Newton on the cluster-reduced nLasso objective ``f`` (module docstring) from ``v``.

    ``f`` is smooth while every quotient difference ``v_a - v_b`` is nonzero; returns None when
    one vanishes (the structure was wrong), and with ``converged_only`` also when ``max_iter``
    steps end outside the quadratic region (a decrement above ``1e-10 (1 + |f|)``). ``t_min`` is
    the smallest Armijo step. Shared by the solver's polish and
    :func:`gtvcvx.recovery.exact_recovery_conditions`.
    """
    k, d = v.shape
    a, b = pairs[:, 0], pairs[:, 1]
    eye = np.eye(d)
    # the Hessian's pattern: node blocks, then the (a, a), (b, b), (a, b), (b, a) blocks of the pairs
    patterns = [block_indices(i, j, d) for i, j in ((np.arange(k), np.arange(k)), (a, a), (b, b), (a, b), (b, a))]
    rows = np.concatenate([r.ravel() for r, _ in patterns])
    cols = np.concatenate([c.ravel() for _, c in patterns])

    def value(x):
        norms = np.linalg.norm(x[a] - x[b], axis=1)
        return float(0.5 * np.einsum("cd,cde,ce->", x, Hc, x) + np.einsum("cd,cd->", gc, x) + caps_q @ norms)

    x = v.copy()
    f = value(x)
    quadratic = False  # the last step was a full step in the quadratic region
    for _ in range(max_iter):
        diff = x[a] - x[b]
        norms = np.linalg.norm(diff, axis=1)
        if not (norms > 0).all():
            return None
        unit = diff / norms[:, None]
        grad = np.einsum("cde,ce->cd", Hc, x) + gc
        np.add.at(grad, a, caps_q[:, None] * unit)
        np.add.at(grad, b, -caps_q[:, None] * unit)
        blocks = (caps_q / norms)[:, None, None] * (eye[None] - unit[:, :, None] * unit[:, None, :])
        vals = np.concatenate([Hc.ravel(), blocks.ravel(), blocks.ravel(), -blocks.ravel(), -blocks.ravel()])
        hess = sp.csc_matrix((vals, (rows, cols)), shape=(k * d, k * d))
        ridge = 1e-14 * (1.0 + float(np.abs(vals).max(initial=0.0)))
        step = -spsolve(hess + ridge * sp.identity(k * d, format="csc"), grad.reshape(-1)).reshape(k, d)
        if not np.isfinite(step).all():
            return None
        decrement = float(-(grad.reshape(-1) @ step.reshape(-1)))
        quadratic = decrement <= 1e-10 * (1.0 + abs(f))
        if quadratic:
            x = x + step  # quadratic region: full steps (Armijo cannot resolve rounding-level decreases)
            if decrement <= 1e-26 * (1.0 + abs(f)):
                break
            f = value(x)
            continue
        x, f = armijo_step(value, x, step, f, decrement, t_min=t_min)
    else:
        if converged_only and not quadratic:
            return None
    return x


def fused_clusters(problem: GTVProblem, W, threshold: float = 1e-6) -> tuple[int, np.ndarray]:
    """``(k, labels)``: components of the edges with ``||(DW)_e|| <= threshold * max |W|``."""
    return _norm_partitions(problem, W, (threshold,), max_unknowns=math.inf)[0]


def fused_partitions(problem: GTVProblem, W, thresholds, *, max_unknowns: int = MAX_POLISH_UNKNOWNS) -> list:
    """The fused structure of ``W`` at each of ``thresholds``, or None at those where the reduced
    problem would have more than ``max_unknowns`` unknowns (:func:`reduced_unknowns`).

    Returns
    -------
    list of (key, labels) or None
        l2 penalty: ``key = k`` and ``labels`` (n,), as :func:`fused_clusters` (edges with
        ``||(DW)_e|| <= threshold * max |W|``); l1 penalty: ``key`` the tuple of the
        coordinates' cluster counts ``k_j`` and ``labels`` (n, d), coordinate ``j``'s clusters
        numbered ``sum_{l<j} k_l ..`` (edges with ``|(DW)_{ej}| <= threshold * max |W|``).

    Notes
    -----
    The fused edges are counted first (for l1 coordinate by coordinate, gathered from the rows of
    ``W^T``: 2x faster than from its columns at 10^6 edges); a structure whose fused edges are
    too few for ``max_unknowns`` (a graph keeps at least ``n - fused`` components) is not built:
    on large graphs the components cost more than the differences.
    """
    if problem.penalty.dual_ball != "linf":
        return _norm_partitions(problem, W, thresholds, max_unknowns)
    graph, n, d = problem.graph, problem.n, problem.d
    cuts = _cuts(W, thresholds)
    head, tail = graph.end_columns
    columns = np.ascontiguousarray(W.T)
    least = np.zeros(len(cuts), dtype=np.int64)  # a lower bound on the unknowns, per threshold
    for j in range(d):  # (a loop over coordinates, one |E| gather each)
        gap = np.abs(columns[j][head] - columns[j][tail])
        least += [max(1, n - np.count_nonzero(gap <= cut)) for cut in cuts]
    out = []
    for cut, bound in zip(cuts, least):
        if bound > max_unknowns:
            out.append(None)
            continue
        # (the gathers again rather than d x |E| differences kept: counting one |E| row at a time
        # took 52-57 ms at 10^6 edges, d = 10, against 105-115 ms with them kept)
        labels = np.empty((n, d), dtype=np.int64)
        counts = []
        for j in range(d):
            k, labels[:, j] = graph.edge_components(np.abs(columns[j][head] - columns[j][tail]) <= cut)
            labels[:, j] += sum(counts)
            counts.append(k)
        out.append((tuple(counts), labels) if sum(counts) <= max_unknowns else None)
    return out


def _cuts(W, thresholds) -> list[float]:
    """The fused-difference bounds ``threshold * max |W|``."""
    scale = max(float(np.abs(W).max(initial=0.0)), np.finfo(float).tiny)
    return [threshold * scale for threshold in thresholds]


def _norm_partitions(problem: GTVProblem, W, thresholds, max_unknowns) -> list:
    """:func:`fused_partitions` by edge norms (every penalty but l1)."""
    graph = problem.graph
    # (a compiled gather on large graphs, without the |E| x d differences)
    norms = difference_norms(graph, W)
    return [graph.edge_components(norms <= cut)
            if (problem.n - np.count_nonzero(norms <= cut)) * problem.d <= max_unknowns else None
            for cut in _cuts(W, thresholds)]


def polish_clusters(problem: GTVProblem, W, *, threshold: float = 1e-6, quadratics: dict | None = None,
                    clusters: tuple | None = None,
                    reach: tuple[float, float] | None = None) -> tuple[np.ndarray, Certificate] | None:
    """``(W_polished, certificate)`` from the clusters of ``W``, or None when the polish does not apply.

    Parameters
    ----------
    problem : GTVProblem
        A quadratic loss with the l2- or l1-norm penalty (:func:`polish_applies`).
    W : ndarray (n, d)
        An iterate whose fused structure is (nearly) right.
    threshold : float
        Edges with ``||(DW)_e|| <= threshold * max |W|`` (l1: coordinates with
        ``|(DW)_{ej}| <= threshold * max |W|``) count as fused.
    quadratics : dict, optional
        A cache for the node quadratics (filled on first use), for repeated calls in one solve.
    clusters : (key, ndarray), optional
        The structure of ``W`` (one entry of :func:`fused_partitions`), when the caller has it;
        default: read at ``threshold``.
    reach : (float, float), optional
        ``(primal, tol)``: the objective value of any point (an upper bound on the optimum) and
        a relative gap; the lifted solution is certified only if its objective could reach
        ``tol`` (see Notes), else None is returned without the certificate's cost.

    Returns
    -------
    (ndarray, Certificate) or None
        None when no edge is fused, the reduced system is too large (:data:`MAX_POLISH_UNKNOWNS`),
        the node Hessians would exceed :data:`~gtvcvx.solvers.quadratic.MAX_BLOCK_ENTRIES`, a
        quotient difference vanishes (the structure was wrong), or the lifted objective is out of
        ``reach``.

    Notes
    -----
    The filter ``reach = (p, tol)`` is exact: any certificate of the lifted ``W`` has a dual value
    ``D <= P* <= p``, and the relative gap ``(P - D) / (1 + |P| + |D|)`` decreases in ``D``, so
    it is at least ``(P - p) / (1 + |P| + |p|)``; when that exceeds ``tol`` the certificate
    cannot reach it (a wrong structure, typically), and its cost (a flow routed through the
    graph and a projection, about ten of the core's certificates on small graphs) is saved.
    """
    if not polish_applies(problem) or problem.n_edges == 0 or problem.n * problem.d ** 2 > MAX_BLOCK_ENTRIES:
        return None  # (the node Hessians would not fit the block budget of the quadratic solver)
    if clusters is None:
        clusters = fused_partitions(problem, W, (threshold,))[0]
        if clusters is None:
            return None
    unknowns = reduced_unknowns(problem, clusters[0])
    if unknowns > MAX_POLISH_UNKNOWNS or unknowns == problem.n * problem.d:
        return None
    if quadratics is None:
        quadratics = {}
    if "H" not in quadratics:
        quadratics["H"], quadratics["g0"] = node_quadratics(problem.loss)
    H, g0 = quadratics["H"], quadratics["g0"]
    if problem.penalty.dual_ball == "linf":
        lifted = _coordinate_solve(problem, W, clusters[1], unknowns, H, g0)
    else:
        lifted = _cluster_solve(problem, W, clusters, H, g0)
    if lifted is None:
        return None
    if reach is not None and relative_gap(problem.objective(lifted), reach[0]) > reach[1]:
        return None
    return lifted, certify_pair(problem, lifted, flow_from_primal(problem, lifted, threshold=0.0))


def _cluster_solve(problem: GTVProblem, W, clusters, H, g0):
    """The l2 polish's lifted solution (reduced Newton over one model per cluster), or None."""
    graph = problem.graph
    k, labels = clusters
    Hc = np.zeros((k, problem.d, problem.d))
    np.add.at(Hc, labels, H)
    gc = np.zeros((k, problem.d))
    np.add.at(gc, labels, g0)
    la, lb = labels[graph.edges[:, 0]], labels[graph.edges[:, 1]]
    cross = la != lb
    pairs, inverse = np.unique(np.column_stack([np.minimum(la, lb), np.maximum(la, lb)])[cross], axis=0,
                               return_inverse=True)
    caps_q = np.bincount(inverse.reshape(-1), problem.capacities[cross], minlength=len(pairs))
    sums = np.zeros((k, problem.d))
    np.add.at(sums, labels, W)
    v0 = sums / np.bincount(labels, minlength=k)[:, None]
    v = reduced_newton(Hc, gc, pairs, caps_q, v0, max_iter=POLISH_NEWTON_STEPS, converged_only=True)
    return None if v is None else v[labels]


def _coordinate_solve(problem: GTVProblem, W, labels, unknowns: int, H, g0):
    """The l1 polish's lifted solution (module docstring): ``P v`` with ``v`` solving the reduced
    quadratic, the signs of the edges between components taken from ``W``; None if not finite."""
    graph, n, d = problem.graph, problem.n, problem.d
    head, tail = graph.end_columns
    caps = np.asarray(problem.capacities, dtype=float)
    # c o S: the signs of the coordinate-edges between components (zero inside one)
    signed = np.where(labels[head] != labels[tail], np.sign(differences(graph, W)), 0.0) * caps[:, None]
    linear = g0 + divergence(graph, signed)  # g + D^T (c o S)
    select = sp.csr_matrix((np.ones(n * d), (np.arange(n * d), labels.ravel())), shape=(n * d, unknowns))
    rows, cols = block_indices(np.arange(n), np.arange(n), d)
    hess = sp.csr_matrix((H.ravel(), (rows.ravel(), cols.ravel())), shape=(n * d, n * d))
    reduced = (select.T @ hess @ select).tocsc()
    ridge = 1e-14 * (1.0 + float(abs(reduced).max()))  # (a cluster its data do not determine)
    v = spsolve(reduced + ridge * sp.identity(unknowns, format="csc"), -(select.T @ linear.ravel()))
    lifted = (select @ v).reshape(n, d)
    return lifted if np.isfinite(lifted).all() else None
