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

from .capabilities import CapabilityError, require
from .graph import Graph
from .losses import SquaredError
from .problem import GTVProblem
from .solvers import solve
from .solvers.polish import reduced_newton
from .solvers.quadratic import node_quadratics

__all__ = ["solution_clusters", "reduced_cluster_problem", "exact_recovery_conditions", "RecoveryConditions",
           "theorem2", "Theorem2Report"]


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
        # sum_c (v^T H_c v - 2 g_c^T v) + lam sum_q A_q ||v_a - v_b||: Hessians 2 H_c, gradients at 0 -2 g_c
        polished = reduced_newton(2.0 * H, -2.0 * g, pairs, lam * reduced.graph.weights, v, max_iter=50,
                                  t_min=1e-10)
        v = v if polished is None else polished
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


# ------------------------------------------------------------------------------------------ Theorem 2
#: Clusters up to this size get the exact check of condition (35) (every root, every subset).
THEOREM2_EXACT_NODES = 16
#: Dimensions up to this size get the exact l1 strong-convexity modulus (2^d sign vectors).
THEOREM2_EXACT_L1_DIM = 12
#: Roots tried by the max-flow check of a large cluster (largest internal degree first).
THEOREM2_MAXFLOW_ROOTS = 5


@dataclass
class Theorem2Report:
    """Theorem 2 of the GTV paper evaluated on a problem and a partition (:func:`theorem2`).

    Attributes
    ----------
    clusters : pandas.DataFrame
        One row per cluster: ``cluster, size, boundary`` (``|dC|``, eq. 35), ``alpha`` (eq. 13),
        ``alpha_exact`` (False: a sound lower bound), ``beta_max``, ``delta_max`` (eqs. 12, 11),
        ``condition`` (``"holds"``, ``"fails"`` or ``"not shown"``), ``check`` (how it was
        checked), ``demand_sum`` (``sum_{i in C} b_i``, the bracket of eq. 35 summed) and
        ``max_internal_degree`` (taking ``A = C minus {i0}`` in (35) needs ``demand_sum - b_{i0}``
        below the internal degree of ``i0``: a quick necessary test), ``root`` (the node ``i0`` that
        satisfies (35), or -1), ``margin`` (exact check: the smallest ``cut(A) - demand(A)`` over the subsets of the best root; max-flow: the unmet demand,
        negative), ``bound`` (right side of eq. 36, ``inf`` when ``alpha = 0``), and, given ``W``,
        ``deviation`` (``max_i ||w_i - wbar_c||``) and ``spread`` (the largest l2 distance of a
        ``w_i`` from the cluster's mean: 0 when ``W`` is constant on the cluster, as the theorem says).
    nodes : pandas.DataFrame
        One row per node: ``node, cluster, beta, delta, demand`` (the bracket of eq. 35).
    wbar : ndarray (k, d)
        The cluster-wise optimizers (eq. 9).
    norm : str
        ``"l2"`` or ``"l1"``: the norm ``||.||`` of eqs. (12), (13), (36) (the penalty's norm).
    """

    clusters: object
    nodes: object
    wbar: np.ndarray
    norm: str

    @property
    def holds(self) -> bool:
        """Condition (35) shown for every cluster (so the theorem applies)."""
        return bool((self.clusters["condition"] == "holds").all())


def _strong_convexity(Hc, norm: str) -> tuple[float, bool]:
    """``(alpha, exact)``: ``min v^T Hc v / ||v||^2``; for l1 exact up to THEOREM2_EXACT_L1_DIM."""
    eig = np.linalg.eigvalsh(Hc)
    lam_min = float(eig[0])
    if lam_min <= 1e-12 * max(float(eig[-1]), 0.0) * Hc.shape[0]:
        return 0.0, True  # singular within float64 rounding: not strongly convex
    if norm == "l2":
        return lam_min, True
    d = Hc.shape[0]
    if d > THEOREM2_EXACT_L1_DIM:
        return lam_min / d, False  # ||v||_1^2 <= d ||v||_2^2: a sound lower bound
    # min over the l1 sphere = 1 / max_s s^T Hc^{-1} s over sign vectors s
    signs = 1.0 - 2.0 * ((np.arange(2 ** d)[:, None] >> np.arange(d)) & 1)
    inv = np.linalg.inv(Hc)
    return float(1.0 / np.einsum("sd,de,se->s", signs, inv, signs).max()), True


def _exact_condition(members, ei, ej, w, demand):
    """Condition (35) by enumeration: every root ``i0`` and every nonempty ``A`` in ``C minus {i0}``."""
    size = members.size
    masks = np.arange(1, 2 ** size, dtype=np.int64)
    bits = (masks[:, None] >> np.arange(size)) & 1
    need = bits @ demand
    cut = (((masks[:, None] >> ei) & 1) != ((masks[:, None] >> ej) & 1)).astype(float) @ w
    slack = cut - need
    best_root, best_margin = -1, -np.inf
    for r in range(size):  # a loop over the (at most 16) candidate roots
        without_root = bits[:, r] == 0
        margin = float(slack[without_root].min()) if without_root.any() else np.inf
        if margin > best_margin:
            best_root, best_margin = r, margin
    return best_root, best_margin


def _maxflow_condition(members, ei, ej, w, demand, root):
    """Unmet demand when every node of ``C`` but ``root`` sends its demand to ``root`` through
    the cluster's edges (capacities ``A_e``), by an integer max-flow with capacities rounded
    down and demands rounded up (so zero unmet demand shows condition (35) for ``root``)."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import maximum_flow

    size = members.size
    total = float(w.sum() + demand.sum())
    if total <= 0:
        return 0.0
    scale = (2.0 ** 30) / (total * (1.0 + 1e-6))
    caps = np.floor(w * scale).astype(np.int64)
    need = np.ceil(demand * scale * (1.0 + 1e-9)).astype(np.int64)
    need[root] = 0
    source = size
    rows = np.concatenate([ei, ej, np.full(size, source)])
    cols = np.concatenate([ej, ei, np.arange(size)])
    data = np.concatenate([caps, caps, need]).astype(np.int32)
    graph = sp.csr_array((data, (rows, cols)), shape=(size + 1, size + 1))
    flow = maximum_flow(graph, source, root).flow_value
    return -(float(need.sum()) - float(flow)) / scale


def theorem2(problem: GTVProblem, labels, W=None):
    r"""Evaluate Theorem 2 of the GTV paper: constants, condition (35) and bound (36).

    Parameters
    ----------
    problem : GTVProblem
        A quadratic loss (trait ``"quadratic"``, e.g. SquaredError) and a norm penalty whose dual
        ball is ``"l2"`` (Norm2: ``||.|| = ||.||_* = l2``) or ``"linf"`` (Norm1: ``||.|| = l1``,
        ``||.||_* = linf``); ``lam > 0``.
    labels : array_like of int, shape (n,)
        The partition ``P`` (cluster of every node, ``0 .. k-1``).
    W : ndarray (n, d), optional
        A GTV solution, to measure the deviation that (36) bounds.

    Returns
    -------
    Theorem2Report

    Notes
    -----
    With ``f_c = sum_{i in C} L_i`` (Hessian ``H_c``), the constants are exact for quadratic
    losses: ``alpha_c = min_v v^T H_c v / ||v||^2`` (eq. 13; for l1 the minimum over sign vectors
    ``1 / max_s s^T H_c^{-1} s`` up to d = 12, above it the sound bound ``lambda_min / d``),
    ``beta_i`` the operator norm of ``H_i`` from ``||.||`` to ``||.||_*`` (eq. 12; l1 -> linf is the
    largest entry), ``delta_i = ||grad L_i(wbar_c)||_*`` (eq. 11) at the cluster-wise optimizer
    ``wbar_c`` (eq. 9) and ``|dC| = sum_{i in C, j not in C} A_ij``. Condition (35): some root
    ``i0 in C`` has, for every nonempty ``A`` in ``C \ {i0}``,

    .. math:: \sum_{i \in A} b_i < \sum_{i \in A} \sum_{j \in C \setminus A} A_{ij}, \qquad
       b_i = \sum_{j \notin C} A_{ij} + \beta_i |\partial C| / \alpha_c + \delta_i / \lambda,

    checked exactly (all roots, all subsets) for clusters of up to 16 nodes. For larger clusters
    it is the statement that the demands ``b_i`` can be routed to ``i0`` inside ``C`` with
    capacities ``A_ij`` (max-flow / min-cut, the flow of Lemma 3), checked by an integer max-flow
    that rounds capacities down and demands up, for the five roots of largest internal degree:
    ``"holds"`` is then sound, a failure is reported as ``"not shown"``. Bound (36):
    ``||w_i - wbar_c|| <= 2 |dC| lam / alpha_c``.

    References
    ----------
    .. [1] Y. SarcheshmehPour, Y. Tian, L. Zhang, A. Jung, "Clustered federated learning via
       generalized total variation minimization", IEEE Trans. Signal Processing 71, 2023:
       Assumptions 1-2 (eqs. 11-13), Definition 1 (eq. 35), Theorem 2 (eq. 36), appendix IX-A
       (Lemma 3); ``../shared/seeds/002_99a24ac288dc6cbc.txt``.
    """
    import pandas as pd

    if not isinstance(problem, GTVProblem):
        raise TypeError(f"problem must be a gtvcvx.GTVProblem, got {type(problem).__name__}")
    require(problem.loss, ("quadratic", "smooth"), user="theorem2")
    ball = problem.penalty.dual_ball
    if ball not in ("l2", "linf"):
        raise CapabilityError(f"theorem2 needs a norm penalty with dual ball 'l2' (Norm2) or 'linf' (Norm1); "
                              f"penalty '{problem.penalty.name}' declares {ball!r}")
    if not problem.lam > 0:
        raise ValueError(f"Theorem 2 needs lam > 0, got lam = {problem.lam:g}")
    labels = np.asarray(labels)
    if labels.shape != (problem.n,) or not np.issubdtype(labels.dtype, np.integer) or labels.min(initial=0) < 0:
        raise ValueError(f"labels must be {problem.n} non-negative integers (a cluster per node), "
                         f"got shape {labels.shape} and dtype {labels.dtype}")
    norm = "l2" if ball == "l2" else "l1"
    dual_norm = (lambda V: np.linalg.norm(V, axis=-1)) if norm == "l2" else (lambda V: np.abs(V).max(axis=-1))
    H, g0 = node_quadratics(problem.loss)
    if norm == "l2":
        beta = np.linalg.eigvalsh(H)[:, -1]
    else:
        beta = np.abs(H).reshape(problem.n, -1).max(axis=1)
    k = int(labels.max()) + 1
    Hc = np.zeros((k, problem.d, problem.d))
    np.add.at(Hc, labels, H)
    gc = np.zeros((k, problem.d))
    np.add.at(gc, labels, g0)
    wbar = np.full((k, problem.d), np.nan)
    alphas = np.zeros(k)
    exact_alpha = np.ones(k, dtype=bool)
    for c in range(k):  # a loop over clusters: one small eigenproblem and solve each
        alphas[c], exact_alpha[c] = _strong_convexity(Hc[c], norm)
        if alphas[c] > 0:
            wbar[c] = np.linalg.solve(Hc[c], -gc[c])
    Wbar = wbar[labels]
    delta = np.where(alphas[labels] > 0, dual_norm(np.nan_to_num(problem.loss.gradient(np.nan_to_num(Wbar)))), np.inf)
    graph = problem.graph
    e, A = graph.edges, graph.weights
    la, lb = labels[e[:, 0]], labels[e[:, 1]]
    cross = la != lb
    outside = np.bincount(e[cross].reshape(-1), np.repeat(A[cross], 2), minlength=problem.n)
    boundary = np.bincount(labels, outside, minlength=k)
    with np.errstate(divide="ignore", invalid="ignore"):
        demand = outside + beta * (boundary / alphas)[labels] + delta / problem.lam
    rows = []
    for c in range(k):  # the condition is a cut problem per cluster
        members = np.flatnonzero(labels == c)
        pos = np.full(problem.n, -1)
        pos[members] = np.arange(members.size)
        sel = (~cross) & (la == c)
        ei, ej, w = pos[e[sel, 0]], pos[e[sel, 1]], A[sel]
        b = demand[members]
        internal_degree = np.bincount(np.concatenate([ei, ej]), np.concatenate([w, w]), minlength=members.size)
        row = {"cluster": c, "size": int(members.size), "boundary": float(boundary[c]), "alpha": float(alphas[c]),
               "demand_sum": float(b.sum()), "max_internal_degree": float(internal_degree.max(initial=0.0)),
               "alpha_exact": bool(exact_alpha[c]), "beta_max": float(beta[members].max(initial=0.0)),
               "delta_max": float(delta[members].max(initial=0.0)), "root": -1, "margin": float("nan"),
               "bound": 2.0 * boundary[c] * problem.lam / alphas[c] if alphas[c] > 0 else np.inf}
        if members.size == 0:
            row.update(condition="holds", check="empty cluster", margin=np.inf)
        elif not np.isfinite(b).all():
            row.update(condition="fails", check="alpha_c = 0: the cluster's losses are not strongly convex")
        elif members.size <= THEOREM2_EXACT_NODES:
            root, margin = _exact_condition(members, ei, ej, w, b)
            row.update(condition="holds" if margin > 0 else "fails", root=int(members[root]), margin=margin,
                       check=f"exact: every root, all {2 ** (members.size - 1) - 1} subsets each")
        else:
            best = None
            for root in np.argsort(-internal_degree, kind="stable")[:THEOREM2_MAXFLOW_ROOTS]:
                unmet = _maxflow_condition(members, ei, ej, w, b, int(root))
                if best is None or unmet > best[1]:
                    best = (int(root), unmet)
                if unmet >= 0:
                    break
            shown = best[1] >= 0
            row.update(condition="holds" if shown else "not shown", root=int(members[best[0]]) if shown else -1,
                       margin=best[1], check=f"max-flow to the {THEOREM2_MAXFLOW_ROOTS} best-connected roots "
                                             "(integer capacities rounded down, demands up)")
        if W is not None:
            Wc = problem.check_W(W)[members]
            diff = Wc - wbar[c]
            row["deviation"] = float((np.linalg.norm(diff, axis=1) if norm == "l2" else np.abs(diff).sum(axis=1)).max())
            row["spread"] = float(np.linalg.norm(Wc - Wc.mean(axis=0), axis=1).max())
        rows.append(row)
    nodes = pd.DataFrame({"node": np.arange(problem.n), "cluster": labels, "beta": beta, "delta": delta,
                          "demand": demand})
    return Theorem2Report(clusters=pd.DataFrame(rows), nodes=nodes, wbar=wbar, norm=norm)
