"""``convex_clustering``: one call from points to certified centers and clusters."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import check_gap_tolerance, check_nonnegative_scalar, check_positive_int
from ..graph import Graph
from ..losses import SquaredDistance
from ..penalties import Norm2
from ..problem import GTVProblem
from ..results import GTVResult, WrappedSolve
from ._prep import (FAST_SOLVERS, SOLVERS, Standardization, check_norm_penalty, check_points, clustering_graph,
                    standardization)
from .labels import ClusterLabels, cluster_labels

__all__ = ["ClusteringResult", "convex_clustering", "clustering_problem", "run_clustering_solver",
           "snap_to_clusters", "fast_method"]


@dataclass
class ClusteringResult(WrappedSolve):
    """Convex clustering at one lam: centers, clusters and the certificate behind them.

    A :class:`gtvcvx.SolveResult`: ``status``, ``primal``, ``dual``, ``gap``, ``rel_gap``, times and
    ``history`` are those of the GTV solve in ``gtv``, in the units the problem is solved in:
    standardized, or the caller's points divided by ``standardization.unit`` (a power of two that
    makes the objective O(1) when the points spread less than 1, see
    :func:`~gtvcvx.clustering._prep.exact_unit`; the objective is then ``unit^2`` times ``primal``,
    and ``rel_gap`` bounds the caller-unit relative gap from above).

    Attributes
    ----------
    centers : ndarray (n, d)
        ``w_i`` for every point, in the original units (standardization undone).
    labels : ndarray (n,)
        Cluster of every point (:func:`cluster_labels`).
    n_clusters : int
    lam : float
        As given (``problem.lam * standardization.unit``).
    gtv : GTVResult
        The solve of the problem in its units (see above): ``W``, flow ``U``, ``primal``,
        ``dual``, ``gap``, ``rel_gap``, ``status``, times, history.
    clusters : ClusterLabels
        How each edge was decided (flow test, distance test) and the counts.
    problem : GTVProblem
        The problem that was solved (standardized points if ``standardize=True``, else the points
        translated and divided by ``standardization.unit``, with ``lam / unit``).
    standardization : Standardization
    """

    centers: np.ndarray
    labels: np.ndarray
    n_clusters: int
    lam: float
    gtv: GTVResult
    clusters: ClusterLabels
    problem: GTVProblem
    standardization: Standardization

    _solve_field = "gtv"

    @property
    def graph(self) -> Graph:
        return self.problem.graph

    @property
    def cluster_centers(self) -> np.ndarray:
        """One center per cluster (mean of its members' centers), shape (n_clusters, d)."""
        sums = np.zeros((self.n_clusters, self.centers.shape[1]))
        np.add.at(sums, self.labels, self.centers)
        return sums / np.bincount(self.labels, minlength=self.n_clusters)[:, None]

    def to_row(self) -> dict:
        """One flat dictionary: ``lam``, the GTV solve's row and the cluster counts."""
        row = {"lam": self.lam}
        row.update(self.gtv.to_row())
        row.update(self.clusters.summary())
        return row

    def __repr__(self) -> str:
        return (f"ClusteringResult(lam={self.lam:.6g}, n_clusters={self.n_clusters}, status={str(self.status)!r}, "
                f"rel_gap={self.rel_gap:.3g}, solver={self.gtv.solver!r})")


def _check_solver(solver) -> str:
    if not isinstance(solver, str):
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    name = solver.lower() if solver.lower() in FAST_SOLVERS else solver.upper()
    if name not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS} (CVXPY backends case-insensitive), got {solver!r}")
    return name


def clustering_problem(points, lam=0.0, graph=None, *, k: int = 10, weights: str = "gaussian", phi=None,
                       penalty=None, standardize: bool = False) -> tuple[GTVProblem, Standardization]:
    """The GTV problem of convex clustering (and the standardization applied to the points).

    See :func:`convex_clustering` for the parameters. The graph is built on the standardized
    points when ``standardize=True``, else on the caller's (translated) points; the problem's
    points and ``lam`` are divided by ``standardization.unit`` (see :func:`exact_unit`).
    """
    pts = check_points(points)
    lam = check_nonnegative_scalar(lam, "lam")
    k = check_positive_int(k, "k (neighbours per point)")
    penalty = check_norm_penalty(Norm2() if penalty is None else penalty)
    std = standardization(pts, standardize)
    G = clustering_graph(std.translated(pts), graph, k=k, weights=weights, phi=phi)
    return GTVProblem(G, SquaredDistance(std.forward(pts)), penalty, lam / std.unit), std


def snap_to_clusters(problem: GTVProblem, W: np.ndarray, U: np.ndarray, label_tol=None):
    """``(W_snapped, certificate)``: every cluster's centers replaced by their mean, re-certified.

    At large lam the objective charges ``lam A_e ||w_i - w_j||`` on every fused edge, so
    rounding-level differences between fused centers (``1e-16`` relative) alone can cost more
    than the target gap. Snapping the centers of each cluster to one value removes them; the
    certificate is recomputed from scratch for the snapped ``W`` (the flow ``U`` is unchanged),
    so the result is exactly as trustworthy as the solver's. Returns None when nothing fused.
    """
    from ..solvers.certificate import certify_pair

    clusters = cluster_labels(problem, W, U, tol=label_tol)
    if clusters.n_clusters == problem.n:
        return None
    sums = np.zeros((clusters.n_clusters, problem.d))
    np.add.at(sums, clusters.labels, W)
    means = sums / np.bincount(clusters.labels, minlength=clusters.n_clusters)[:, None]
    snapped = means[clusters.labels]
    U = problem.penalty.project_conjugate_domain(U, problem.capacities)
    return snapped, certify_pair(problem, snapped, U)


#: :class:`_Polisher` tries the snapped centers at every check-point on problems of at most this
#: many points; on larger ones only where rounding of the fused centers can matter (see there).
POLISH_ALWAYS_POINTS = 10_000


class _Polisher:
    """Solver callback: at certificate check-points, try the snapped centers.

    A try costs the cluster labels and a certificate (~3-7 s on 10^6 points, 6.7e6 edges, where a
    check-point comes every ~4 s), and snapping helps where the rounding of fused centers,
    about ``eps lam sum_e A_e max_i ||a_i||``, is not negligible next to the gap budget
    ``tol (1 + |P| + |D|)``. Up to ``POLISH_ALWAYS_POINTS`` points every check-point tries; above,
    only those where that rounding exceeds 1e-3 of the budget (data, not timing, decide: runs
    stay reproducible).
    """

    def __init__(self, problem, tol, user_callback=None):
        self.problem, self.tol, self.user_callback = problem, tol, user_callback
        self.best = None  # (W, certificate, iteration)
        points = problem.loss.content().get("points")
        spread = float(np.abs(points).max(initial=0.0)) if points is not None else np.inf
        self.rounding = np.finfo(float).eps * problem.lam * float(problem.graph.weights.sum()) * spread

    def wants(self, certificate) -> bool:
        """Whether the solver should call back at this check-point (see :func:`gtvcvx.solve`)."""
        return self.user_callback is not None or self.worth_trying(certificate)

    def worth_trying(self, certificate) -> bool:
        if self.problem.n <= POLISH_ALWAYS_POINTS:
            return True
        budget = self.tol * (1.0 + abs(certificate.primal) + abs(certificate.dual))
        return not self.rounding <= 1e-3 * budget  # (nan or inf: try)

    def offer(self, W, U, iteration):
        found = snap_to_clusters(self.problem, W, U)
        if found is not None and (self.best is None or found[1].rel_gap < self.best[1].rel_gap):
            self.best = (found[0], found[1], iteration)
        return self.best is not None and self.best[1].rel_gap <= self.tol

    def __call__(self, info):
        stop = bool(self.user_callback(info)) if self.user_callback is not None else False
        if not self.worth_trying(info.certificate):
            return stop
        return self.offer(info.W, info.certificate.U, info.iteration) or stop


def fast_method(solver: str) -> str:
    """The gtvcvx method behind a solver name: ``"fast"`` means :func:`gtvcvx.solve`'s ``"auto"``
    (the exact chain solver on a chain or forest of chains with an l1 penalty; the interior-point
    solve on small graphs whose factorization stays cheap, without a warm start; else the
    restarted Halpern PDHG core).

    On k-NN clustering problems the interior-point choice is not the fastest: 2-D blobs, k = 10,
    tol 1e-6 (2026-11-25): n = 200 / 500 / 1000 take 0.09 / 0.14 / 0.30 s against the core's
    0.05 / 0.10 / 0.16 s and SSNAL's 0.05 / 0.08 / 0.13 s (CVXPY+CLARABEL: ~0.2 s at n = 500);
    on the bundled specs ``blobs_knn`` / ``blobs_knn_l1`` it is 3.5x / 3.2x faster than the core.

    Measured on the clustering benchmark (``reports/bench/clustering.md``): SSNAL is about 1.6x
    faster at n = 500, the PDHG core 2-3x faster from n = 5000 on, also at matched accuracy
    (n = 20000, relative gap 1e-7: 14 s against 32 s).
    """
    return "auto" if solver == "fast" else solver


def run_clustering_solver(problem: GTVProblem, solver: str, *, tol: float = 1e-6, warm_start=None,
                          statement=None, solver_options: dict | None = None, polish: bool = True) -> GTVResult:
    """Solve a clustering problem with SSNAL, the PDHG core or a CVXPY backend (certified either way).

    With ``polish`` (gtvcvx methods only), every certificate check-point also certifies the
    centers snapped to their clusters (:func:`snap_to_clusters`); the run stops as soon as
    either certificate reaches ``tol``, and the better certified pair is returned.
    """
    options = dict(solver_options or {})
    if solver not in FAST_SOLVERS:
        from ..reference.clustering import solve_clustering

        return solve_clustering(problem.loss.points, problem.lam, problem.graph, problem.penalty, solver,
                                statement=statement, **options)
    from ..results import Status, relative_gap

    method = fast_method(solver)
    if method == "ssnal":
        from ..solvers.ssnal import solve_ssnal as solve
    else:
        from ..solvers import solve

        options["method"] = method  # "auto", "halpern" or "pdhg": the names of gtvcvx.solve

    if not polish:
        return solve(problem, tol=tol, warm_start=warm_start, **options)
    polisher = _Polisher(problem, tol, options.pop("callback", None))
    result = solve(problem, tol=tol, warm_start=warm_start, callback=polisher, **options)
    if result.W is not None and result.U is not None and result.rel_gap > tol:
        polisher.offer(result.W, result.U, result.iterations)
    if polisher.best is None or not polisher.best[1].rel_gap < result.rel_gap:
        return result
    W, cert, iteration = polisher.best
    ok = cert.rel_gap <= tol
    stopped_by_polish = result.message == "stopped by callback" and ok
    status = Status.OPTIMAL if ok and (result.ok or stopped_by_polish) else result.status
    message = "centers snapped to their clusters and re-certified"
    if not ok:
        message = f"{result.message}; {message}" if result.message else message
    residuals = dict(result.residuals)
    residuals.update(cert.residuals)
    info = dict(result.info)
    info.update({"polished": True, "polished_at": iteration, "unpolished_rel_gap": result.rel_gap})
    return GTVResult(status=status, solver=result.solver, W=W, U=cert.U, primal=cert.primal, dual=cert.dual,
                     gap=cert.gap, rel_gap=relative_gap(cert.primal, cert.dual), value=cert.primal,
                     iterations=result.iterations, setup_time=result.setup_time, solve_time=result.solve_time,
                     residuals=residuals, history=result.history, message=message, info=info)


def convex_clustering(points, lam, graph=None, k: int = 10, weights: str = "gaussian", phi=None, penalty=None,
                      solver: str = "fast", tol: float = 1e-6, standardize: bool = False, *, label_tol=None,
                      warm_start=None, polish: bool = True, solver_options: dict | None = None) -> ClusteringResult:
    r"""Convex (sum-of-norms) clustering with a certified duality gap and dual-backed clusters.

    Parameters
    ----------
    points : array_like (n, d)
        One point per row (finite).
    lam : float
        Fusion strength ``lam >= 0`` (in the units of the standardized points if
        ``standardize=True``).
    graph : None, "knn", "complete" or Graph
        Default (``None``): the symmetric k-nearest-neighbour graph with Gaussian weights.
    k : int
        Neighbours per point of the k-NN graph.
    weights : {"gaussian", "uniform"}
        ``A_ij = exp(-phi ||a_i - a_j||^2)`` or 1 (ignored for a user ``Graph``).
    phi : float, optional
        Gaussian scale; default as in :func:`clustering_graph`.
    penalty : Norm2 or Norm1, optional
        Default ``Norm2()`` (rotation invariant).
    solver : {"fast", "ssnal", "halpern", "pdhg", "CLARABEL", "SCS"}
        ``"fast"`` (default): :func:`gtvcvx.solve`'s automatic choice (see :func:`fast_method`:
        the interior-point solve on small problems, else ``"halpern"``, the restarted Halpern
        PDHG core); ``"ssnal"``: the
        semismooth Newton augmented Lagrangian method (:func:`gtvcvx.solvers.ssnal.solve_ssnal`,
        faster on a few hundred points); ``"pdhg"``: the paper's plain Algorithm 1
        (``gtvcvx.solve(method="pdhg")``, slow; for comparisons); or the CVXPY reference
        statement on a conic backend.
    tol : float
        Certified relative duality gap at which the gtvcvx methods stop (CVXPY backends use
        their own tolerances, see ``solver_options``).
    standardize : bool
        Scale every coordinate to mean 0 and standard deviation 1 before clustering (explicit,
        never implicit). Centers are reported in the original units.
    label_tol : float, optional
        Fusion tolerance of :func:`cluster_labels` (default: the certificate's resolution).
    warm_start : GTVResult, ClusteringResult or dict, optional
        Start of the gtvcvx methods (e.g. the solution at a nearby lam); ``W`` and ``U`` in the
        units of ``result.problem``, as a previous result's ``gtv`` holds them.
    polish : bool
        For the gtvcvx methods: also certify the centers snapped to their clusters at every check-point
        and keep the better certified pair (see :func:`snap_to_clusters`; at large lam,
        rounding-level differences between fused centers otherwise dominate the gap).
    solver_options : dict, optional
        Passed on: to :func:`~gtvcvx.solvers.ssnal.solve_ssnal` (``max_iter``, ``time_limit``,
        ``linear_solver``, ...), to :func:`gtvcvx.solve` (``max_iter``, ``time_limit``,
        ``primal_weight``, ...) or to the CVXPY backend.

    Returns
    -------
    ClusteringResult

    Notes
    -----
    .. math:: \min_W \sum_i \|w_i - a_i\|_2^2 + \lambda \sum_{\{i,j\} \in E} A_{ij} \|w_i - w_j\|

    is GTV minimization with the squared-distance loss; its network-flow dual is
    ``max_U sum_i [<(D^T U)_i, a_i> - ||(D^T U)_i||^2 / 4]`` s.t. ``||U_e||_* <= lam A_e``, and
    ``W = A - D^T U / 2`` at the optimum. The objective is strongly convex, so the centers are
    unique; points with equal centers form a cluster, read off by :func:`cluster_labels` from
    the certified flow. Properties (Tan & Witten): the path is continuous in lam, and every
    component of the graph fuses into its mean for ``lam >= lam_max`` (:func:`lam_max`).

    References
    ----------
    .. [1] T. D. Hocking, A. Joulin, F. Bach, J.-P. Vert, "Clusterpath: an algorithm for
       clustering using convex fusion penalties", ICML 2011.
    .. [2] E. C. Chi, K. Lange, "Splitting methods for convex clustering", JCGS 24(4), 2015.
    .. [3] D. Sun, K.-C. Toh, Y. Yuan, "Convex clustering: model, theoretical guarantee and
       efficient algorithm", JMLR 22, 2021 (the method behind ``solver="ssnal"``).
    .. [4] K. M. Tan, D. Witten, "Statistical properties of convex clustering", Electronic
       Journal of Statistics 9(2), 2015.
    """
    solver = _check_solver(solver)
    tol = check_gap_tolerance(tol, "tol")
    problem, std = clustering_problem(points, lam, graph, k=k, weights=weights, phi=phi, penalty=penalty,
                                      standardize=standardize)
    if isinstance(warm_start, ClusteringResult):
        warm_start = warm_start.gtv
    result = run_clustering_solver(problem, solver, tol=tol, warm_start=warm_start,
                                   solver_options=solver_options, polish=polish)
    return finish_clustering(problem, std, result, label_tol)


def finish_clustering(problem: GTVProblem, std: Standardization, result: GTVResult, label_tol=None) -> ClusteringResult:
    """Labels and original-unit centers for a solved clustering problem."""
    if result.W is None:
        raise RuntimeError(f"the {result.solver} solve returned no solution (status {result.status}: "
                           f"{result.message})")
    clusters = cluster_labels(problem, result.W, result.U, tol=label_tol)
    return ClusteringResult(centers=std.inverse(result.W), labels=clusters.labels, n_clusters=clusters.n_clusters,
                            lam=problem.lam * std.unit, gtv=result, clusters=clusters, problem=problem, standardization=std)
