"""Input checks, explicit standardization and the default clustering graph."""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from .. import graphs as graphs_mod
from .._validation import allocation_guard, as_float_array, check_memory, check_positive_int
from ..graph import Graph, graph_nbytes
from ..penalties import Penalty

__all__ = ["check_points", "check_norm_penalty", "Standardization", "standardization",
           "clustering_graph", "SOLVERS", "FAST_SOLVERS"]

#: Solvers of :func:`gtvcvx.clustering.convex_clustering`: ``"fast"`` (``gtvcvx.solve``'s
#: automatic choice: interior-point on small problems, else ``"halpern"``), ``"ssnal"`` (:func:`gtvcvx.solvers.ssnal.solve_ssnal`),
#: ``"halpern"`` (:func:`gtvcvx.solve`, the restarted Halpern PDHG core), ``"pdhg"`` (the paper's
#: plain Algorithm 1, ``gtvcvx.solve(method="pdhg")``: the same names as ``gtvcvx.solve``) and
#: the CVXPY backends.
SOLVERS = ("fast", "ssnal", "halpern", "pdhg", "CLARABEL", "SCS")
#: The gtvcvx methods among :data:`SOLVERS` (warm-startable, certified by gtvcvx).
FAST_SOLVERS = ("fast", "ssnal", "halpern", "pdhg")


def check_points(points, name: str = "points") -> np.ndarray:
    """``points`` as a finite float64 (n, d) array with n, d >= 1, or a ValueError naming it."""
    if points is None:
        raise ValueError(f"{name} must be an (n, d) array of finite numbers, got None")
    pts = as_float_array(points, name)
    if pts.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array of shape (n, d) (one point per row), got shape {pts.shape}")
    if pts.shape[0] < 1 or pts.shape[1] < 1:
        raise ValueError(f"{name} must have shape (n, d) with n, d >= 1, got {pts.shape}")
    return pts


def check_norm_penalty(penalty) -> Penalty:
    if not isinstance(penalty, Penalty):
        raise ValueError(f"penalty must be a gtvcvx norm penalty (Norm2() or Norm1()), got {penalty!r}")
    if not penalty.is_norm:
        raise ValueError(f"penalty must be a norm (Norm2() or Norm1()) for clusters to fuse, got {penalty!r}")
    return penalty


@dataclass(frozen=True)
class Standardization:
    """Affine map ``z = (a - center) / scale`` per coordinate; when not standardizing, the exact
    map ``z = (a - offset) / unit`` (see :func:`exact_offset` and :func:`exact_unit`).

    Attributes
    ----------
    center, scale : ndarray (d,)
    enabled : bool
    offset : ndarray (d,) or None
        Without standardization, the translation the problem is solved in (zeros where none is
        exact); convex clustering is translation invariant, so objective, gap and clusters are the
        original data's.
    unit : float
        Without standardization, the power of two the translated points are divided by (1 when
        their spread is 1 or more). With points and centers divided by ``unit``, the problem at
        ``lam`` is the problem at ``lam / unit`` with its objective times ``unit^-2``, exactly
        (powers of two scale without rounding); lam's are reported in the caller's units, the
        solve (``ClusteringResult.gtv`` / ``problem``) is in the solved ones.
    """

    center: np.ndarray
    scale: np.ndarray
    enabled: bool
    offset: np.ndarray | None = None
    unit: float = 1.0

    def translated(self, points: np.ndarray) -> np.ndarray:
        """The points the graph is built on: standardized, or translated only (the caller's
        distances, so that Gaussian weights and a caller's ``phi`` keep their meaning)."""
        if self.enabled:
            return self.forward(points)
        return points if self.offset is None else points - self.offset

    def forward(self, points: np.ndarray) -> np.ndarray:
        """To the units the problem is solved in."""
        if self.enabled:
            return (points - self.center) / self.scale
        moved = points if self.offset is None else points - self.offset
        return moved if self.unit == 1.0 else moved / self.unit

    def inverse(self, Z: np.ndarray) -> np.ndarray:
        """Back to the original units (centers are reported there)."""
        if self.enabled:
            return Z * self.scale + self.center
        Z = Z if self.unit == 1.0 else Z * self.unit
        return Z if self.offset is None else Z + self.offset


def exact_offset(points: np.ndarray) -> np.ndarray:
    """Per coordinate, a translation ``c`` with ``a - c`` exact in float64 for every point: the
    column's clipped mean where all its values lie in ``[c / 2, 2 c]`` (Sterbenz's lemma), else 0.

    Notes
    -----
    Points offset far from the origin (1e9 + N(0, 1)) made every squared distance, gradient and
    certificate term carry rounding of ``u 1e9`` where the spread is 1: a clustering path at an
    offset of 1e12 stopped at ``max_iter`` with gaps of 1e-4 where the centered data certify to
    1e-7. Only exact translations are applied, so the problem solved is the caller's.
    """
    low, high = points.min(axis=0, initial=np.inf), points.max(axis=0, initial=-np.inf)
    center = np.clip(points.mean(axis=0), low, high) if points.size else np.zeros(points.shape[1])
    positive = (low > 0) & (high <= 2.0 * low)
    negative = (high < 0) & (low >= 2.0 * high)
    return np.where(positive | negative, center, 0.0)


#: :func:`exact_unit` scales by at most ``2^UNIT_MIN_EXPONENT``, far from the subnormals (centers
#: ``~unit`` map back exactly) and from overflowing ``lam / unit`` for any sensible lam.
UNIT_MIN_EXPONENT = -200


def exact_unit(points: np.ndarray) -> float:
    """A power of two ``2^k <= 1`` with the points' root-mean-square spread ``/ 2^k`` in ``[1, 2)``
    (1 when the spread is 1 or more, or 0).

    Notes
    -----
    The certified relative gap is ``(P - D) / (1 + |P| + |D|)``, so where the objective is far below
    1 ``tol`` acts as an absolute tolerance: 80 blobs at the scale 1e-2 gave 14 clusters where
    the same points at the scale 1 give 36, and at 1e-3 a 3-cluster answer where the scale 1 gives
    79, all certified. Dividing the points by ``2^k`` (exact: no rounding unless the result leaves
    the normal range) makes the objective O(1), so ``tol`` is relative again, and the path is the
    one of the points at the scale 1.
    """
    if points.shape[0] < 2:
        return 1.0
    spread = float(np.sqrt(np.mean(np.square(points - points.mean(axis=0)))))
    if not 0.0 < spread < 1.0:
        return 1.0
    return float(np.ldexp(1.0, max(int(np.floor(np.log2(spread))), UNIT_MIN_EXPONENT)))


def standardization(points: np.ndarray, standardize: bool) -> Standardization:
    """Per-coordinate mean 0, standard deviation 1 (constant coordinates keep scale 1); when not
    standardizing, the exact translation and power-of-two unit of :func:`exact_offset` /
    :func:`exact_unit`."""
    if not isinstance(standardize, (bool, np.bool_)):
        raise ValueError(f"standardize must be True or False, got {standardize!r}")
    d = points.shape[1]
    if not standardize:
        offset = exact_offset(points)
        return Standardization(np.zeros(d), np.ones(d), False, offset, exact_unit(points - offset))
    center = points.mean(axis=0)
    scale = points.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    return Standardization(center, scale, True)


def clustering_graph(points, graph=None, *, k: int = 10, weights: str = "gaussian", phi=None) -> Graph:
    """The clustering graph: a user :class:`Graph`, ``"complete"``, or (default) a k-NN union.

    Parameters
    ----------
    points : ndarray (n, d)
        Points the graph is built on (after standardization, if any).
    graph : None, "knn", "complete" or Graph
        ``None`` / ``"knn"``: symmetric k-nearest-neighbour graph; ``"complete"``: all pairs.
    k : int
        Neighbours per point for the k-NN graph (>= 1).
    weights : {"gaussian", "uniform"}
        ``A_ij = exp(-phi ||a_i - a_j||^2)`` or 1 (for ``"complete"`` and ``"knn"``).
    phi : float, optional
        Gaussian scale; default ``0.5 / mean feature variance`` for the k-NN graph (see
        :func:`gtvcvx.graphs.knn`) and ``1 / median`` squared pair distance for the complete graph.
    """
    n = points.shape[0]
    if isinstance(graph, Graph):
        if graph.n != n:
            raise ValueError(f"graph has {graph.n} nodes but points has {n} rows")
        return graph
    if weights not in ("gaussian", "uniform"):
        raise ValueError(f"weights must be 'gaussian' or 'uniform', got {weights!r}")
    if phi is not None:
        if isinstance(phi, bool) or not isinstance(phi, numbers.Real) or not (np.isfinite(phi) and phi >= 0):
            raise ValueError(f"phi must be a finite number >= 0 or None, got {phi!r}")
    if graph is None or (isinstance(graph, str) and graph == "knn"):
        return graphs_mod.knn(points, check_positive_int(k, "k (neighbours per point)"), weights=weights, phi=phi)
    if isinstance(graph, str) and graph == "complete":
        d = points.shape[1]
        m = n * (n - 1) // 2
        what = f"clustering graph 'complete' on {n} points of dimension {d} ({m} edges)"
        if weights == "gaussian":
            # the unit-weight graph and the weighted copy made from it, plus per edge the two
            # gathered end points, their difference and a few weight vectors
            check_memory(2 * graph_nbytes(n, m) + 24.0 * m * d + 32.0 * m, what)
        base = graphs_mod.complete(n)
        if weights == "uniform" or base.n_edges == 0:
            return base
        with allocation_guard(what):
            diff = points[base.edges[:, 0]] - points[base.edges[:, 1]]
            sq = np.einsum("ed,ed->e", diff, diff)
            del diff
            if phi is None:
                positive = sq[sq > 0]
                phi = 1.0 / float(np.median(positive)) if positive.size else 1.0
            w = np.exp(-float(phi) * sq)
        if (w <= 0).any():
            raise ValueError(f"phi = {phi:g} makes some Gaussian weights underflow to 0; use a smaller phi "
                             "or standardize the points")
        return base.with_weights(w)
    raise ValueError(f"graph must be None, 'knn', 'complete' or a gtvcvx.Graph, got {graph!r}")
