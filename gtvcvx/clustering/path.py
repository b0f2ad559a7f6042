"""Regularization paths of convex clustering: warm-started, certified at every lam."""

from __future__ import annotations

import numbers
import time
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from .._validation import check_gap_tolerance, check_positive_int
from ..problem import GTVProblem
from ..results import GTVResult
from ._flows import component_means
from ._prep import FAST_SOLVERS, Standardization
from .core import (ClusteringResult, _check_solver, clustering_problem, finish_clustering,
                   run_clustering_solver)
from .lammax import LamMax, lam_max

__all__ = ["ClusteringPath", "clustering_path", "default_lams"]


@dataclass
class ClusteringPath:
    """Convex clustering along a grid of lam values (ascending).

    Attributes
    ----------
    lams : ndarray (L,)
        In the caller's units (of the standardized points if ``standardize=True``).
    results : list of ClusteringResult
        One per lam: centers (original units), labels, the certified solve and the edge decisions.
    lam_max : LamMax
        Certified fusion threshold (the top of the default grid), in the units of ``lams``.
    problem : GTVProblem
        The problem at the last lam (graph, penalty, the points as solved: standardized, or
        divided by ``standardization.unit`` with ``lam / unit``, see :class:`Standardization`).
    standardization : Standardization
    points : ndarray (n, d)
        The original points.
    time : float
        Seconds for the whole path (lam_max included).
    """

    lams: np.ndarray
    results: list
    lam_max: LamMax
    problem: GTVProblem
    standardization: Standardization
    points: np.ndarray
    time: float = 0.0
    info: dict = field(default_factory=dict)

    @property
    def labels(self) -> np.ndarray:
        """(L, n) cluster labels, one row per lam."""
        return np.vstack([r.labels for r in self.results])

    @property
    def n_clusters(self) -> np.ndarray:
        return np.array([r.n_clusters for r in self.results], dtype=np.int64)

    @property
    def centers(self) -> np.ndarray:
        """(L, n, d) centers in the original units."""
        return np.stack([r.centers for r in self.results])

    @property
    def rel_gaps(self) -> np.ndarray:
        return np.array([r.rel_gap for r in self.results])

    def table(self, labels_true=None) -> pd.DataFrame:
        """One row per lam: status, certificate, iterations, times, cluster counts (and ARI)."""
        rows = [r.to_row() for r in self.results]
        df = pd.DataFrame(rows)
        if labels_true is not None:
            df["ari"] = self.ari(labels_true)
        return df

    def ari(self, labels_true) -> np.ndarray:
        """Adjusted Rand index of every lam's clusters against ``labels_true``."""
        from ..metrics import adjusted_rand_index

        return np.array([adjusted_rand_index(labels_true, r.labels) for r in self.results])

    def is_nested(self) -> bool:
        """True when clusters only merge as lam grows (every cluster lies inside one cluster later)."""
        L = self.labels
        for a, b in zip(L[:-1], L[1:]):
            pairs = np.unique(np.column_stack([a, b]), axis=0)
            if pairs.shape[0] != np.unique(a).size:
                return False
        return True

    def splits(self) -> list[int]:
        """Indices ``k`` where some cluster at ``lams[k]`` is split at ``lams[k + 1]``."""
        L = self.labels
        out = []
        for k, (a, b) in enumerate(zip(L[:-1], L[1:])):
            if np.unique(np.column_stack([a, b]), axis=0).shape[0] != np.unique(a).size:
                out.append(k)
        return out

    def __len__(self) -> int:
        return len(self.results)

    def __repr__(self) -> str:
        return (f"ClusteringPath(n_lams={len(self)}, lam in [{self.lams[0]:.4g}, {self.lams[-1]:.4g}], "
                f"n_clusters {self.n_clusters.max()} -> {self.n_clusters.min()}, "
                f"worst rel_gap={np.nanmax(self.rel_gaps):.2g})")


def default_lams(problem: GTVProblem, top: float, n_lams: int, lam_min_ratio=None) -> np.ndarray:
    """Geometric grid from the first fusions to ``top`` (ascending, ``top`` included).

    The bottom is ``top * lam_min_ratio`` if given, else half the smallest two-point fusion
    level ``min_e ||a_i - a_j|| / A_e`` (two points joined by a single edge fuse exactly
    there; on a graph it is a heuristic for where the first merges happen), capped at
    ``top / 100``.
    """
    if top <= 0:
        return np.zeros(1)
    if lam_min_ratio is None:
        E = problem.graph.edges
        pts = np.asarray(problem.loss.points)
        dist = np.linalg.norm(pts[E[:, 0]] - pts[E[:, 1]], axis=1)
        level = dist / problem.graph.weights
        level = level[dist > 0]
        bottom = 0.5 * float(level.min()) if level.size else top * 1e-3
        bottom = min(bottom, top * 1e-2)
    else:
        bottom = top * float(lam_min_ratio)
    return np.geomspace(bottom, top, int(n_lams))


def _check_lams(lams) -> np.ndarray:
    arr = np.asarray(lams, dtype=float) if not isinstance(lams, str) else None
    if arr is None or arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"lams must be a non-empty 1-D sequence of numbers >= 0, got {lams!r}")
    if not np.isfinite(arr).all() or (arr < 0).any():
        raise ValueError(f"lams must be finite and >= 0, got {lams!r}")
    return np.unique(arr)  # sorted ascending, duplicates dropped


def _in_caller_units(lm: LamMax, unit: float) -> LamMax:
    """``lm`` of the problem solved in units of ``unit`` (points / unit, lam / unit) in the caller's:
    the threshold and the flow scale with ``unit`` (exactly, a power of two); the rest is unit-free."""
    if unit == 1.0:
        return lm
    return replace(lm, value=lm.value * unit, lower=lm.lower * unit, upper=lm.upper * unit,
                   flow=None if lm.flow is None else lm.flow * unit)


def clustering_path(points, lams=None, *, n_lams: int = 40, lam_min_ratio=None, graph=None, k: int = 10,
                    weights: str = "gaussian", phi=None, penalty=None, solver: str = "fast", tol: float = 1e-6,
                    standardize: bool = False, label_tol=None, polish: bool = True,
                    solver_options: dict | None = None, lam_max_method=None, keep_flows: bool = False,
                    callback=None) -> ClusteringPath:
    r"""Convex clustering along a lam grid, warm-started, certified at every lam.

    Parameters
    ----------
    points : array_like (n, d)
    lams : sequence of float, optional
        Values of lam (sorted ascending internally). Default: a geometric grid of ``n_lams``
        values up to ``lam_max`` (see :func:`default_lams`).
    n_lams : int
        Grid size of the default grid (>= 2).
    lam_min_ratio : float, optional
        Bottom of the default grid relative to ``lam_max`` (in (0, 1)).
    graph, k, weights, phi, penalty, solver, tol, standardize, label_tol, polish, solver_options
        As in :func:`convex_clustering` (the graph is built once for the whole path).
    lam_max_method : str, optional
        Method of :func:`lam_max`; default ``"auto"`` (solved to ``rtol``) for the default grid,
        ``"tree"`` (a certified bracket from a spanning forest, no conic solve) when ``lams``
        are given.
    keep_flows : bool
        Keep every lam's flow ``U`` (|E| x d) and per-node / per-edge gap arrays in the stored
        results (memory grows with the number of lams); by default only the certificate's
        numbers, the centers and the edge decisions are kept.
    callback : callable, optional
        ``callback(index, result)`` after every lam (e.g. progress).

    Returns
    -------
    ClusteringPath

    Notes
    -----
    Solves run in ascending lam. The gtvcvx methods (``"fast"`` = ``"halpern"``, ``"ssnal"``,
    ``"halpern"``, ``"pdhg"``) start each lam from the previous solution:
    ``W`` as it is and the flow scaled by ``lam / lam_prev``, which keeps it inside the new
    (larger) capacity balls, so the warm start is dual feasible. At ``lam >= lam_max`` the
    exact solution is known (``W`` = component means with the flow of :func:`lam_max`) and is
    the warm start, so the solver only certifies it. CVXPY backends compile the statement
    once (``lam`` is a DPP parameter) and re-solve.

    For uniform weights on the complete graph the path is a tree: clusters only merge
    (Hocking et al. 2011 for l1; Chi & Steinerberger 2019 for l2); with Gaussian k-NN weights
    splits can occur. :meth:`ClusteringPath.is_nested` checks it.

    References
    ----------
    .. [1] T. D. Hocking, A. Joulin, F. Bach, J.-P. Vert, "Clusterpath: an algorithm for
       clustering using convex fusion penalties", ICML 2011.
    .. [2] E. C. Chi, S. Steinerberger, "Recovering trees with convex clustering", SIAM J.
       Mathematics of Data Science 1(3), 2019.
    .. [3] K. M. Tan, D. Witten, "Statistical properties of convex clustering", Electronic
       Journal of Statistics 9(2), 2015.
    """
    t0 = time.perf_counter()
    solver = _check_solver(solver)
    tol = check_gap_tolerance(tol, "tol")
    n_lams = check_positive_int(n_lams, "n_lams", minimum=2)
    if lam_min_ratio is not None and (isinstance(lam_min_ratio, bool) or not isinstance(lam_min_ratio, numbers.Real)
                                      or not 0 < lam_min_ratio < 1):
        raise ValueError(f"lam_min_ratio must be in (0, 1), got {lam_min_ratio!r}")
    problem, std = clustering_problem(points, 0.0, graph, k=k, weights=weights, phi=phi, penalty=penalty,
                                      standardize=standardize)
    pts = np.asarray(points, dtype=float)
    if lam_max_method is None:
        lam_max_method = "auto" if lams is None else "tree"
    lm = lam_max(problem, method=lam_max_method)
    # the problem is solved in units of std.unit (a power of two: lam's convert exactly both ways)
    if lams is None:
        solved_grid = default_lams(problem, lm.value, n_lams, lam_min_ratio)
        grid = solved_grid * std.unit
    else:
        grid = _check_lams(lams)
        solved_grid = grid / std.unit

    statement = None
    if solver not in FAST_SOLVERS:
        from ..reference.clustering import clustering_statement

        statement = clustering_statement(problem.loss.points, problem.graph, problem.penalty)
    fused_W = component_means(problem.graph.components(), np.asarray(problem.loss.points))
    results: list[ClusteringResult] = []
    prev: GTVResult | None = None
    prev_lam = None
    for index, lam in enumerate(solved_grid):
        p = problem.with_lam(float(lam))
        warm = None
        if solver in FAST_SOLVERS:
            if lam >= lm.upper and lm.flow is not None:
                warm = {"W": fused_W, "U": lm.flow}
            elif prev is not None and prev.W is not None and prev.U is not None and prev_lam and prev_lam > 0:
                warm = {"W": prev.W, "U": prev.U * (lam / prev_lam)}
        result = run_clustering_solver(p, solver, tol=tol, warm_start=warm, statement=statement,
                                       solver_options=solver_options, polish=polish)
        item = finish_clustering(p, std, result, label_tol)
        if callback is not None:
            callback(index, item)
        prev, prev_lam = result, float(lam)
        if not keep_flows:
            item.gtv = replace(result, U=None, info={k: v for k, v in result.info.items()
                                                     if k not in ("node_gaps", "edge_gaps")})
        results.append(item)
    return ClusteringPath(lams=grid, results=results, lam_max=_in_caller_units(lm, std.unit),
                          problem=problem.with_lam(float(solved_grid[-1])),
                          standardization=std, points=pts, time=time.perf_counter() - t0,
                          info={"solver": solver, "tol": tol})
