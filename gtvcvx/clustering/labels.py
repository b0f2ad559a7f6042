"""Cluster extraction backed by the network-flow dual: which edges fuse their end points."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..capabilities import provides
from ..problem import GTVProblem
from ..solvers._edge_kernels import differences

__all__ = ["ClusterLabels", "cluster_labels", "canonical_labels", "DISTANCE_RTOL", "EDGE_RULES"]

#: Distance tolerance, relative to the data scale, used when no certificate fixes one (U=None).
DISTANCE_RTOL = 1e-5

#: Meaning of the codes in :attr:`ClusterLabels.edge_rule`.
EDGE_RULES = {
    0: "separated (certified: ||w*_i - w*_j|| > 0)",
    1: "fused by the flow test (certified: ||w*_i - w*_j|| <= tol)",
    2: "fused by the distance test",
    3: "separated by the distance test (not certified)",
}


@dataclass
class ClusterLabels:
    """Clusters read off a (W, U) pair, and how every edge was decided.

    Attributes
    ----------
    labels : ndarray (n,) of int
        Cluster of every node, ``0..n_clusters-1`` in order of first appearance.
    n_clusters : int
    n_flow_decided : int
        Edges fused because their certified flow is strictly inside the capacity ball with
        margin (code 1 of :attr:`edge_rule`).
    n_distance_decided : int
        All other edges, decided by comparing ``||w_i - w_j||`` with ``tol``.
    n_certified_separated : int
        Edges left unfused whose optimal end points provably differ (code 0).
    n_uncertain : int
        Edges whose decision no certificate backs (codes 2 and 3 when the distance bound does
        not settle them).
    tol : float
        Fusion tolerance (a distance in the penalty's norm).
    resolution : float
        Certified bound on the error of any computed edge difference, ``kappa sqrt(2 gap)``
        (``nan`` when unknown: no flow, or a loss that is not strongly convex).
    gap : float
        Certified duality gap ``P(W) - D(U)`` at the feasible flow (``nan`` without ``U``).
    edge_fused : ndarray (|E|,) of bool
    edge_rule : ndarray (|E|,) of int8
        Codes of :data:`EDGE_RULES`.
    edge_distance : ndarray (|E|,)
        ``||w_i - w_j||`` at the given ``W``.
    edge_bound : ndarray (|E|,)
        Certified upper bound on ``||w*_i - w*_j||`` (``inf`` when none).
    """

    labels: np.ndarray
    n_clusters: int
    n_flow_decided: int
    n_distance_decided: int
    n_certified_separated: int
    n_uncertain: int
    tol: float
    resolution: float
    gap: float
    edge_fused: np.ndarray
    edge_rule: np.ndarray
    edge_distance: np.ndarray
    edge_bound: np.ndarray

    @property
    def sizes(self) -> np.ndarray:
        """Number of nodes per cluster."""
        return np.bincount(self.labels, minlength=self.n_clusters)

    def summary(self) -> dict:
        """The counts as one flat dictionary (a pandas row)."""
        return {"n_clusters": self.n_clusters, "n_flow_decided": self.n_flow_decided,
                "n_distance_decided": self.n_distance_decided,
                "n_certified_separated": self.n_certified_separated, "n_uncertain": self.n_uncertain,
                "label_tol": self.tol, "resolution": self.resolution}

    def __repr__(self) -> str:
        return (f"ClusterLabels(n_clusters={self.n_clusters}, flow={self.n_flow_decided}, "
                f"distance={self.n_distance_decided}, certified_separated={self.n_certified_separated}, "
                f"uncertain={self.n_uncertain}, tol={self.tol:.3g})")


def canonical_labels(labels) -> np.ndarray:
    """Relabel ``0, 1, ...`` in order of first appearance (equal partitions -> equal arrays)."""
    labels = np.asarray(labels)
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first)] = np.arange(first.size)
    return rank[inverse.reshape(-1)]


def _data_scale(problem: GTVProblem, W: np.ndarray) -> float:
    """RMS distance to the mean: of the points (clustering) or of W; 1 if that is 0."""
    ref = np.asarray(problem.loss.points) if provides(problem.loss, "separable_points") else W
    spread = float(np.sqrt(np.mean(np.einsum("nd,nd->n", ref - ref.mean(axis=0), ref - ref.mean(axis=0)))))
    return spread if spread > 0 else 1.0


def cluster_labels(problem, W, U=None, *, tol=None) -> ClusterLabels:
    r"""Clusters of a GTV / convex clustering solution, decided edge by edge by the dual flow.

    Parameters
    ----------
    problem : GTVProblem
        With a norm penalty (``Norm2`` or ``Norm1``).
    W : array_like (n, d)
        Primal solution (cluster centers per node).
    U : array_like (|E|, d), optional
        Flow (dual solution). It need not be feasible: it is made feasible and certified here
        (:func:`gtvcvx.solvers.certify_pair`), so nothing reported by a solver is trusted.
        ``None``: distance test only.
    tol : float, optional
        Fusion tolerance, a distance in the penalty's norm. Default: the certificate's
        resolution ``kappa sqrt(2 gap)`` for convex clustering (see Notes), else
        ``1e-5`` times the data scale (RMS distance of the points to their mean).

    Returns
    -------
    ClusterLabels

    Notes
    -----
    KKT: at an optimal pair, ``U_e = c_e`` times a subgradient of the norm at
    ``z*_e = w*_i - w*_j``, with capacity ``c_e = lam A_e``; if ``||U_e||_* < c_e`` then
    ``z*_e = 0``. A flow computed to finite accuracy is strictly inside only with a margin, and
    the certificate quantifies it. Let ``U`` be feasible with gap ``g = P(W) - D(U)``, and
    ``s_e = c_e - ||U_e||_*`` its slack. At any minimizer ``W*`` the gap splits into
    non-negative Fenchel-Young terms, and the edge term is
    ``c_e ||z*_e|| - <U_e, z*_e> >= s_e ||z*_e||``, so

    .. math:: \|w^*_i - w^*_j\| \le g / s_e ,

    a bound that holds with no assumption on the loss. **Flow test**: fuse ``e`` when
    ``g / s_e <= tol``, i.e. when the margin is ``s_e >= g / tol``. With the default
    ``tol = sqrt(2 g)`` the margin is ``sqrt(g / 2)``.

    **Distance test** (every other edge): fuse when ``||w_i - w_j|| <= tol``. For convex
    clustering the objective is 2-strongly convex, ``P(W) - P* >= ||W - W*||_F^2``, so every
    computed difference is within ``kappa sqrt(2 g)`` of the optimal one (``kappa = 1`` for
    ``Norm2``, ``sqrt(d)`` for ``Norm1``, whose distance is the l1 norm). Hence an edge with
    ``||w_i - w_j|| > kappa sqrt(2 g)`` is **certified separated**: ``w*_i != w*_j`` exactly.
    With the default tolerance every edge is either certified fused within ``tol``, certified
    separated, or fused by the distance test with ``||w*_i - w*_j|| <= 2 tol`` (counted as
    uncertain). Exact fusion itself cannot be certified from finite-accuracy data near a merge,
    where optimal centers approach each other continuously; ``tol`` is therefore a resolution,
    and it shrinks with the gap.

    Labels are the connected components of the fused edges.

    References
    ----------
    .. [1] T. D. Hocking, A. Joulin, F. Bach, J.-P. Vert, "Clusterpath: an algorithm for
       clustering using convex fusion penalties", ICML 2011.
    .. [2] D. Sun, K.-C. Toh, Y. Yuan, "Convex clustering: model, theoretical guarantee and
       efficient algorithm", JMLR 22, 2021.
    """
    if not isinstance(problem, GTVProblem):
        raise TypeError(f"problem must be a gtvcvx.GTVProblem, got {type(problem).__name__}")
    if not problem.penalty.is_norm:
        raise ValueError(f"cluster_labels needs a norm penalty (Norm2, Norm1), got {problem.penalty!r}")
    W = problem.check_W(W)
    graph = problem.graph
    m = graph.n_edges
    ones = np.ones(m)
    dist = problem.penalty._edge_values(differences(graph, W), ones) if m else np.zeros(0)
    scale = _data_scale(problem, W)
    kappa = problem.penalty.dual_ball_radius(problem.d)  # ||u||_2 <= kappa ||u||_*
    strongly_convex = provides(problem.loss, "strongly_convex")

    gap = resolution = float("nan")
    bound = np.full(m, np.inf)
    if U is not None and m:
        from ..solvers.certificate import certify_pair

        U = problem.check_U(U)
        if strongly_convex:  # full-domain conjugate: projecting edge by edge keeps U feasible
            U = problem.penalty.project_conjugate_domain(U, problem.capacities)
        cert = certify_pair(problem, W, U)
        if np.isfinite(cert.gap):
            gap = max(float(cert.gap), 0.0)
            slack = problem.capacities - problem.penalty._dual_norms(cert.U)
            with np.errstate(divide="ignore", invalid="ignore"):
                bound = np.where(slack > 0, gap / slack, np.inf)
            if strongly_convex:
                resolution = kappa * math.sqrt(2.0 * gap)
    elif U is not None:
        problem.check_U(U)

    if tol is None:
        tol = resolution if np.isfinite(resolution) else DISTANCE_RTOL * scale
        tol = max(tol, 1e-12 * scale)
    else:
        if isinstance(tol, bool) or not isinstance(tol, (int, float, np.floating)) or not (np.isfinite(tol) and tol >= 0):
            raise ValueError(f"tol must be a finite distance >= 0 or None, got {tol!r}")
        tol = float(tol)

    flow_fused = bound <= tol
    dist_fused = dist <= tol
    fused = flow_fused | dist_fused
    rule = np.full(m, 3, dtype=np.int8)
    rule[dist_fused] = 2
    rule[flow_fused] = 1
    if np.isfinite(resolution):
        certified_sep = ~fused & (dist > resolution)
        rule[certified_sep] = 0
        bound = np.minimum(bound, dist + resolution)
    else:
        certified_sep = np.zeros(m, dtype=bool)
    certified_fused = fused & (bound <= tol)

    n_clusters, raw = graph.edge_components(fused)
    labels = canonical_labels(raw)
    n_flow = int(flow_fused.sum())
    return ClusterLabels(labels=labels, n_clusters=int(n_clusters), n_flow_decided=n_flow,
                         n_distance_decided=m - n_flow, n_certified_separated=int(certified_sep.sum()),
                         n_uncertain=int(m - certified_fused.sum() - certified_sep.sum()), tol=float(tol),
                         resolution=resolution, gap=gap, edge_fused=fused, edge_rule=rule,
                         edge_distance=dist, edge_bound=bound)
