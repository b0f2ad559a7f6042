"""Declarative CVXPY statement of convex (sum-of-norms) clustering.

Convex clustering is the GTV instance ``L_i(w) = ||w - a_i||^2`` with a norm penalty; this
statement adds what a clustering reference needs: the edge differences are a variable ``Z``
tied to ``W`` by one sparse equality ``Z = D W`` whose multiplier is the flow ``U`` (so the
reference returns a dual certificate too), and ``lam`` is a CVXPY ``Parameter`` (DPP), so that a
path over lam compiles once. Everything is vectorized (one sparse incidence product, row-wise
cones): a complete graph on 300 points (44,850 edges) compiles in well under a second.
"""

from __future__ import annotations

import numpy as np

from ..graph import Graph
from ..losses import SquaredDistance
from ..penalties import Norm2, Penalty
from ..problem import GTVProblem
from ..results import SOLUTION_STATUSES, GTVResult, relative_gap
from .backend import run_cvxpy

__all__ = ["ClusteringStatement", "clustering_statement", "solve_clustering"]


class ClusteringStatement:
    """A compiled-once CVXPY statement of convex clustering on fixed points and graph.

    Attributes
    ----------
    problem : cvxpy.Problem
    W : cvxpy.Variable (n, d)
    Z : cvxpy.Variable (|E|, d) or None
    lam : cvxpy.Parameter
    coupling : cvxpy.Constraint or None
        ``Z == D W``; the flow is ``U = -coupling.dual_value`` (stationarity
        ``2 (W - A) + D^T U = 0``).
    """

    def __init__(self, points: np.ndarray, graph: Graph, penalty: Penalty):
        import cvxpy as cp

        self.points, self.graph, self.penalty = points, graph, penalty
        n, d = points.shape
        self.W = cp.Variable((n, d), name="W")
        self.lam = cp.Parameter(nonneg=True, name="lam", value=0.0)
        objective = cp.sum_squares(self.W - points)
        constraints = []
        self.Z = self.coupling = None
        if graph.n_edges:
            self.Z = cp.Variable((graph.n_edges, d), name="Z")
            self.coupling = self.Z == graph.incidence @ self.W
            constraints.append(self.coupling)
            objective = objective + self.lam * penalty.cvxpy_expr(self.Z, np.asarray(graph.weights))
        self.problem = cp.Problem(cp.Minimize(objective), constraints)


def clustering_statement(points, graph: Graph, penalty: Penalty | None = None) -> ClusteringStatement:
    r"""CVXPY statement of ``min_W sum_i ||w_i - a_i||^2 + lam sum_e A_e ||w_i - w_j||``.

    Parameters
    ----------
    points : array_like (n, d)
    graph : Graph
    penalty : Penalty, optional
        Any gtvcvx penalty with a CVXPY expression (default ``Norm2()``).

    Returns
    -------
    ClusteringStatement
        Set ``statement.lam.value`` and solve ``statement.problem``.

    Notes
    -----
    Statement: ``min_{W, Z} ||W - A||_F^2 + lam sum_e A_e phi(Z_e)`` s.t. ``Z = D W``. With
    multiplier ``Y`` of the equality, stationarity in ``W`` reads ``2 (W - A) - D^T Y = 0``,
    so ``U = -Y`` is the flow of the network-flow dual (``||U_e||_* <= lam A_e``).

    References
    ----------
    .. [1] T. D. Hocking, A. Joulin, F. Bach, J.-P. Vert, "Clusterpath: an algorithm for
       clustering using convex fusion penalties", ICML 2011.
    .. [2] E. C. Chi, K. Lange, "Splitting methods for convex clustering", JCGS 24(4), 2015.
    """
    pts = SquaredDistance(points).points  # validated (n, d), finite
    if not isinstance(graph, Graph):
        raise ValueError(f"graph must be a gtvcvx.Graph, got {type(graph).__name__}")
    if graph.n != pts.shape[0]:
        raise ValueError(f"graph has {graph.n} nodes but points has {pts.shape[0]} rows")
    penalty = Norm2() if penalty is None else penalty
    if not isinstance(penalty, Penalty):
        raise ValueError(f"penalty must be a gtvcvx penalty, got {penalty!r}")
    return ClusteringStatement(np.asarray(pts), graph, penalty)


def solve_clustering(points, lam, graph: Graph, penalty: Penalty | None = None, solver: str = "CLARABEL",
                     *, statement: ClusteringStatement | None = None, **opts) -> GTVResult:
    """Solve convex clustering with a CVXPY backend and certify the answer with gtvcvx.

    Parameters
    ----------
    points : array_like (n, d)
    lam : float
        ``lam >= 0``.
    graph : Graph
    penalty : Penalty, optional
        Default ``Norm2()``.
    solver : str
        CVXPY backend (``"CLARABEL"``, ``"SCS"``, ...).
    statement : ClusteringStatement, optional
        Reuse a statement built by :func:`clustering_statement` on the same points, graph and
        penalty (a path compiles once).
    **opts
        Backend options (``max_iter`` / ``time_limit`` translated per backend).

    Returns
    -------
    GTVResult
        ``W``; ``U`` the backend's flow made dual feasible by gtvcvx; ``primal``, ``dual``,
        ``gap``, ``rel_gap`` re-evaluated by gtvcvx (the backend's own objective is ``value``);
        ``setup_time`` = CVXPY compile time, ``solve_time`` = wall time after compilation
        (backend setup, solve and unpacking). A failing or missing backend gives a status,
        never an exception.
    """
    from ..solvers.certificate import certify_pair

    statement = statement if statement is not None else clustering_statement(points, graph, penalty)
    penalty = statement.penalty
    problem = GTVProblem(statement.graph, SquaredDistance(statement.points), penalty, lam)
    statement.lam.value = problem.lam
    run = run_cvxpy(statement.problem, solver, opts)
    n, d = statement.points.shape
    W = U = None
    if run.status in SOLUTION_STATUSES and statement.W.value is not None:
        W = np.asarray(statement.W.value, dtype=float).reshape(n, d)
        if statement.coupling is None:
            U = np.zeros((0, d))
        elif statement.coupling.dual_value is not None:
            U = -np.asarray(statement.coupling.dual_value, dtype=float).reshape(problem.n_edges, d)
        if not np.isfinite(W).all():
            W = None
        if U is not None and not np.isfinite(U).all():
            U = None
    primal = dual = gap = float("nan")
    residuals = {}
    if W is not None:
        if U is not None:
            # the loss conjugate has full domain, so a per-edge projection onto the capacity
            # balls keeps the flow feasible (certify_pair alone would scale all edges globally)
            U = problem.penalty.project_conjugate_domain(U, problem.capacities)
            cert = certify_pair(problem, W, U)
            primal, dual, gap, U = cert.primal, cert.dual, cert.gap, cert.U
            residuals = dict(cert.residuals)
        else:
            primal = problem.objective(W)
    return GTVResult(status=run.status, solver=run.solver, W=W, U=U, primal=primal, dual=dual, gap=gap,
                     rel_gap=relative_gap(primal, dual), value=run.value, iterations=run.iterations,
                     setup_time=run.compile_time, solve_time=run.solve_time, residuals=residuals,
                     message=run.message)
