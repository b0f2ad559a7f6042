"""Exact recovery of clusters by GTV: the cluster-reduced problem and the network-flow (KKT) check.

If the GTV minimizer is constant on every cluster of a partition, its cluster values solve a
GTV problem on the cluster quotient graph (:func:`reduced_cluster_problem`), and the flows on
the boundary edges are fixed at their capacities; the partition is recovered exactly when the
remaining node demands can be routed inside each cluster within the capacities
``lam A_e`` (:func:`exact_recovery_conditions`). This is the mechanism behind Theorem 2 of the
GTV paper (``../shared/seeds/002``, Sec. V, Definition 1 and eqs. (35)-(36)).

References
----------
.. [1] Y. SarcheshmehPour, Y. Tian, L. Zhang, A. Jung, "Clustered federated learning via
   generalized total variation minimization", IEEE Trans. Signal Processing 71, 2023.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._linesearch import armijo_step
from .capabilities import require
from .graph import Graph
from .losses import SquaredError
from .problem import GTVProblem
from .solvers import solve

__all__ = ["solution_clusters", "reduced_cluster_problem", "exact_recovery_conditions", "RecoveryConditions"]


@dataclass
class RecoveryConditions:
    """Outcome of :func:`exact_recovery_conditions` (sufficient conditions, not a duality-gap certificate).

    Attributes
    ----------
    holds : bool
        Both conditions hold: the GTV minimizer is unique and exactly constant on every cluster.
    separated : bool
        The cluster-reduced problem keeps all neighbouring clusters apart (condition 1).
    congestion : float
        ``max_e ||phi_i - phi_j|| / lam`` of the electrical routing inside the clusters
        (condition 2 holds when it is below 1; ``nan`` when condition 1 failed or ``lam = 0``).
    v : ndarray (k, d)
        Cluster values (solution of the reduced problem).
    reduced_rel_gap : float
        Certified relative gap of the reduced solve.
    demand_residual : float
        Relative imbalance of the demands of a cluster piece (rounding of the reduced solve).
    """

    holds: bool
    separated: bool
    congestion: float
    v: np.ndarray
    reduced_rel_gap: float
    demand_residual: float


def solution_clusters(graph, W, tol: float) -> np.ndarray:
    """Clusters of a GTV solution: components of the edges with ``||w_i - w_j|| <= tol``."""
    e = graph.edges
    return graph.edge_components(np.linalg.norm(W[e[:, 0]] - W[e[:, 1]], axis=1) <= tol)[1]


def reduced_cluster_problem(problem, labels, lam: float | None = None):
    """The GTV problem on the cluster quotient graph.

    One node per cluster ``c`` with loss ``S_c(v) = sum_{i in c} L_i(v)`` (squared error,
    compressed to ``rank(H_c)`` rows with the same Hessian and gradient) and one edge per pair
    of clusters joined by boundary edges, with weight ``A_cc' = sum of their weights``; same
    penalty. If the GTV solution is constant on every cluster, its cluster values solve this
    problem (sum the node optimality conditions over a cluster: the intra-cluster flows cancel).

    Returns
    -------
    GTVProblem (k nodes) and the quotient edges as an array of cluster pairs.
    """
    loss = problem.loss
    require(loss, ("quadratic",), user="reduced_cluster_problem")  # pools the clusters' quadratics
    labels = np.asarray(labels)
    k = int(labels.max()) + 1
    d = loss.d
    weight = 1.0 / loss.counts[loss.node_of_sample]
    cl = labels[loss.node_of_sample]
    Xs, ys = [], []
    for c in range(k):  # one compressed design per cluster
        sel = cl == c
        X, y, s = loss.X_all[sel], loss.y_all[sel], weight[sel]
        H = (X.T * s) @ X
        g = X.T @ (s * y)
        lam_h, V = np.linalg.eigh(H)
        keep = lam_h > lam_h.max(initial=0.0) * d * np.finfo(float).eps
        r = int(keep.sum())
        if r == 0:
            Xs.append(np.zeros((0, d)))
            ys.append(np.zeros(0))
            continue
        root = np.sqrt(lam_h[keep])
        Xs.append(math.sqrt(r) * (root[:, None] * V[:, keep].T))
        ys.append(math.sqrt(r) * (V[:, keep].T @ g) / root)
    e = problem.graph.edges
    a, b = labels[e[:, 0]], labels[e[:, 1]]
    cross = a != b
    lo, hi = np.minimum(a[cross], b[cross]), np.maximum(a[cross], b[cross])
    pairs, inverse = np.unique(np.column_stack([lo, hi]), axis=0, return_inverse=True)
    A = np.bincount(inverse.reshape(-1), problem.graph.weights[cross], minlength=len(pairs))
    graph = Graph.from_edges(k, pairs if len(pairs) else np.zeros((0, 2), dtype=np.int64), A if len(pairs) else None)
    reduced = GTVProblem(graph, SquaredError(Xs, ys, d=d), problem.penalty, problem.lam if lam is None else lam)
    return reduced, pairs


def _cluster_quadratics(loss, labels):
    """``H_c, g_c`` with ``sum_{i in c} L_i(v) = v^T H_c v - 2 g_c^T v + const`` (squared error)."""
    weight = 1.0 / loss.counts[loss.node_of_sample]
    cl = np.asarray(labels)[loss.node_of_sample]
    k = int(np.max(labels)) + 1
    H = np.zeros((k, loss.d, loss.d))
    g = np.zeros((k, loss.d))
    for c in range(k):
        sel = cl == c
        X, y, s = loss.X_all[sel], loss.y_all[sel], weight[sel]
        H[c] = (X.T * s) @ X
        g[c] = X.T @ (s * y)
    return H, g


def _polish_reduced(H, g, pairs, A, lam, v, *, max_iter=50):
    """Newton's method on the reduced nLasso objective where every quotient difference is nonzero.

    ``f(v) = sum_c (v_c^T H_c v_c - 2 g_c^T v_c) + lam sum_q A_q ||v_a - v_b||`` is smooth there;
    a few damped Newton steps from the first-order solution reach rounding accuracy.
    """
    k, d = v.shape

    def value(x):
        diff = x[pairs[:, 0]] - x[pairs[:, 1]]
        return float(np.einsum("cd,cde,ce->", x, H, x) - 2 * np.einsum("cd,cd->", g, x)
                     + lam * (A * np.linalg.norm(diff, axis=1)).sum())

    x = v.copy()
    f = value(x)
    for _ in range(max_iter):
        grad = 2 * np.einsum("cde,ce->cd", H, x) - 2 * g
        hess = np.zeros((k * d, k * d))
        for c in range(k):
            hess[c * d:(c + 1) * d, c * d:(c + 1) * d] = 2 * H[c]
        for q, (a, b) in enumerate(pairs):
            diff = x[a] - x[b]
            nrm = np.linalg.norm(diff)
            if nrm == 0:
                return v, False
            u = diff / nrm
            grad[a] += lam * A[q] * u
            grad[b] -= lam * A[q] * u
            block = lam * A[q] * (np.eye(d) - np.outer(u, u)) / nrm
            for i, j, sgn in ((a, a, 1), (b, b, 1), (a, b, -1), (b, a, -1)):
                hess[i * d:(i + 1) * d, j * d:(j + 1) * d] += sgn * block
        step = -np.linalg.lstsq(hess, grad.reshape(-1), rcond=None)[0].reshape(k, d)
        decrement = float(-(grad.reshape(-1) @ step.reshape(-1)))
        if decrement <= 1e-10 * (1 + abs(f)):
            # quadratic region: full steps (an Armijo test cannot resolve these decreases in rounding)
            x = x + step
            if decrement <= 1e-26 * (1 + abs(f)):
                break
            f = value(x)
            continue
        x, f = armijo_step(value, x, step, f, decrement, t_min=1e-10)
    return x, True


def exact_recovery_conditions(problem, labels, *, tol: float = 1e-11,
                              fusion_tol: float = 1e-6) -> RecoveryConditions:
    """Check the network-flow (KKT) conditions for exact recovery of the clusters ``labels``.

    Exact recovery means that the GTV minimizer is constant on every cluster and different on
    neighbouring clusters. With the nLasso penalty this holds (and the minimizer is unique)
    when

    1. the cluster-reduced problem (:func:`reduced_cluster_problem`) keeps all clusters apart;
       its solution ``v`` fixes the flow on every boundary edge to the capacity,
       ``U_e = lam A_e (v_a - v_b) / ||v_a - v_b||``;
    2. inside every cluster there is a flow that routes the remaining node demands
       ``q_i = -grad L_i(v_c) - (D_bd^T U_bd)_i`` with ``||U_e|| < lam A_e``.

    Condition 2 is checked with the electrical flow (conductances ``A_e``): ``U_e = A_e
    (phi_i - phi_j)`` with ``L_c phi = q_c``; its congestion ``max_e ||phi_i - phi_j|| / lam``
    below 1 certifies condition 2 (the electrical flow is one feasible routing, so this is
    sufficient, not necessary). Then ``(W = v[labels], U)`` satisfies every KKT condition, and
    strict capacity slack inside the clusters forces every minimizer to be cluster-wise
    constant; with full-rank cluster Hessians the reduced problem, hence the GTV minimizer, is
    unique.

    This is the mechanism of the paper's analysis (a flow through each well-connected
    cluster with capacities ``lam A_e``, Sec. V); it is evaluated here in its exact form
    instead of through the constants of Theorem 2.

    Returns
    -------
    RecoveryConditions
    """
    labels = np.asarray(labels)
    reduced, pairs = reduced_cluster_problem(problem, labels)
    red = solve(reduced, tol=tol, max_iter=200_000)
    v = red.W
    lam = problem.lam
    out = RecoveryConditions(holds=False, separated=True, congestion=float("nan"), v=v,
                             reduced_rel_gap=red.rel_gap, demand_residual=float("nan"))
    scale = max(float(np.linalg.norm(v, axis=1).max(initial=0.0)), 1e-300)
    if len(pairs):
        gaps = np.linalg.norm(v[pairs[:, 0]] - v[pairs[:, 1]], axis=1)
        out.separated = bool((gaps > fusion_tol * scale).all())
    if not out.separated or lam <= 0:
        return out
    if len(pairs):
        H, g = _cluster_quadratics(problem.loss, labels)
        v, ok = _polish_reduced(H, g, pairs, reduced.graph.weights, lam, v)
        out.v = v
    graph = problem.graph
    e = graph.edges
    la, lb = labels[e[:, 0]], labels[e[:, 1]]
    cross = la != lb
    diff = v[la[cross]] - v[lb[cross]]
    U_bd = (lam * graph.weights[cross] / np.linalg.norm(diff, axis=1))[:, None] * diff
    W = v[labels]
    demand = -problem.loss.gradient(W)
    # subtract the boundary flows' divergence (D^T U)_i = sum_{e: i = e+} U_e - sum_{e: i = e-} U_e
    np.add.at(demand, e[cross, 0], -U_bd)
    np.add.at(demand, e[cross, 1], U_bd)
    worst = 0.0
    residual = 0.0
    intra = ~cross
    intra_components = graph.edge_components(intra)[1]  # the pieces of every cluster
    for c in range(int(labels.max()) + 1):  # one Laplacian solve per cluster
        nodes = np.flatnonzero(labels == c)
        pos = np.full(graph.n, -1)
        pos[nodes] = np.arange(nodes.size)
        sel = intra & (la == c)
        ei, ej, w = pos[e[sel, 0]], pos[e[sel, 1]], graph.weights[sel]
        nc = nodes.size
        ncomp_labels, comp = np.unique(intra_components[nodes], return_inverse=True)
        ncomp = ncomp_labels.size
        L = np.zeros((nc, nc))
        np.add.at(L, (ei, ei), w)
        np.add.at(L, (ej, ej), w)
        np.add.at(L, (ei, ej), -w)
        np.add.at(L, (ej, ei), -w)
        q = demand[nodes]
        phi = np.zeros_like(q)
        for t in range(ncomp):
            members = np.flatnonzero(comp == t)
            total = q[members].sum(axis=0)
            residual = max(residual, float(np.linalg.norm(total) / max(np.abs(q).sum(), 1e-300)))
            if members.size == 1:
                if np.linalg.norm(total) > 1e-9 * max(np.abs(q).sum(), 1e-300):
                    worst = np.inf  # an isolated node with unmet demand: no intra flow exists
                continue
            qq = q[members] - total / members.size  # remove the reduced solver's rounding residual
            Lm = L[np.ix_(members, members)]
            sub = np.linalg.solve(Lm[1:, 1:], qq[1:])  # ground the first node
            phi[members[1:]] = sub
        if sel.any():
            worst = max(worst, float(np.linalg.norm(phi[ei] - phi[ej], axis=1).max() / lam))
    out.congestion = worst
    out.demand_residual = residual
    out.holds = bool(worst < 1.0 and residual < 1e-8)
    return out
