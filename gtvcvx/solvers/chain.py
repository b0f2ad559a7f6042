r"""The exact direct solver for graphs whose components are paths (1-D total variation).

On a chain (or a forest of chains) with squared-distance losses ``L_i(w) = ||w - a_i||^2`` and
an l1 penalty (or any norm penalty when ``d = 1``), GTV minimization separates over the ``d``
coordinates into 1-D total-variation denoising problems, which a dynamic program solves exactly
in O(n) (:mod:`gtvcvx.solvers._chain_kernels`). The result carries the same certificate as any
other solve: the flows that make ``W`` stationary are read off the path by cumulative sums and
certified as :func:`gtvcvx.solvers.certify_pair` certifies them, its terms computed in the same
compiled pass along the paths (:func:`direct_certificate`).

:func:`gtvcvx.solve` picks this solver by itself (``method="auto"``) when :func:`chain_plan`
finds the structure.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._validation import check_gap_tolerance
from ..capabilities import CapabilityError, provides
from ..problem import GTVProblem
from ..results import GTVResult, Status
from ._chain_kernels import compiled
from .certificate import (NEGLIGIBLE_CAPACITY, Certificate, FeasibleFlow, FlowProjector, certificate_from_terms,
                          certified_statuses, certify_pair)

__all__ = ["ChainPlan", "chain_plan", "solve_chain", "chain_refusal", "separable_refusal", "exact_result",
           "checked_plan", "centered_points", "DirectTerms", "direct_certificate", "terms_in_graph_order"]

#: Dual-ball geometries for which the penalty separates over coordinates: the box (l1 norm) in
#: any dimension; any norm ball when d = 1 (an interval).
_SEPARABLE_BALLS = ("linf",)
_INTERVAL_BALLS = ("l2", "linf")

#: Flow entries from which a direct solve's certificate takes the compiled edge terms (numba is
#: loaded by the dynamic program anyway; below it, the NumPy form: a floor against thread start-up
#: on tiny graphs, not tuned).
EXACT_COMPILED_ENTRIES = 1 << 14


@dataclass(frozen=True)
class ChainPlan:
    """The path structure of a graph whose components are all paths.

    Attributes
    ----------
    order : ndarray of int64, shape (n,)
        The nodes, path after path, each path from one end to the other.
    starts : ndarray of int64, shape (n_paths + 1,)
        Where each path begins in ``order`` (``starts[-1] = n``).
    step_edge : ndarray of int64, shape (n,)
        The edge joining ``order[k]`` and ``order[k + 1]`` (``-1`` at the end of a path).
    natural : bool
        One path in node order whose edge ``k`` joins ``k`` and ``k + 1`` (``order`` and
        ``step_edge`` are ranges, made on first access): the solver then works on the data in
        place, without gathers.
    """

    walk_order: np.ndarray
    starts: np.ndarray
    walk_step_edge: np.ndarray
    natural: bool = False

    @property
    def n_paths(self) -> int:
        return int(self.starts.shape[0] - 1)

    @property
    def order(self) -> np.ndarray:
        return np.arange(self.starts[-1], dtype=np.int64) if self.natural else self.walk_order

    @property
    def step_edge(self) -> np.ndarray:
        if not self.natural:
            return self.walk_step_edge
        step_edge = np.arange(self.starts[-1], dtype=np.int64)
        step_edge[-1:] = -1
        return step_edge


def separable_refusal(problem: GTVProblem) -> str:
    """Why the loss or the penalty of ``problem`` does not separate into 1-D total-variation
    problems per coordinate (``""`` when they do): the chain and tree solvers' requirement."""
    if not provides(problem.loss, "separable_points"):
        return (f"the loss '{problem.loss.name}' is not a squared distance to points (trait 'separable_points', "
                "e.g. SquaredDistance)")
    ball = problem.penalty.dual_ball
    if not (ball in _SEPARABLE_BALLS or (problem.d == 1 and ball in _INTERVAL_BALLS)):
        return (f"the penalty '{problem.penalty.name}' (dual ball {ball!r}) does not separate over the "
                f"{problem.d} coordinates (an l1 penalty does, and any norm penalty when d = 1)")
    return ""


def chain_refusal(problem: GTVProblem) -> str:
    """Why the chain solver does not apply to ``problem`` (``""`` when it does), without the
    graph walk: loss, penalty and degrees only."""
    reason = separable_refusal(problem)
    if reason:
        return reason
    graph = problem.graph
    if graph.n_edges > graph.n - 1 or (graph.n_edges and graph.degree.max() > 2):
        return "the graph is not a path or a forest of paths (a node has degree > 2 or there is a cycle)"
    return ""


def chain_plan(problem: GTVProblem) -> ChainPlan | None:
    """The :class:`ChainPlan` of ``problem`` when the chain solver applies, else None."""
    if chain_refusal(problem):
        return None
    path_order, *_ = compiled()
    ok, natural, order, starts, step_edge = path_order(problem.graph.n, np.ascontiguousarray(problem.graph.edges))
    if not ok:
        return None
    return ChainPlan(order, starts, step_edge, natural)


def _step_capacities(problem: GTVProblem, plan: ChainPlan) -> np.ndarray:
    """``c_e`` of the edge after every path position (0 at the end of a path; on a natural chain
    the capacities themselves, ``n - 1`` of them: the kernels read none at a path's end)."""
    if plan.natural:
        return problem.capacities
    lam = np.zeros(problem.n)
    has_step = plan.step_edge >= 0
    lam[has_step] = problem.capacities[plan.step_edge[has_step]]
    return lam


def _path_major(A: np.ndarray, plan: ChainPlan) -> np.ndarray:
    """The n x d array ``A`` as d x n rows in path order, C-contiguous (a view when possible)."""
    return np.ascontiguousarray((A if plan.natural else A[plan.order]).T)


@dataclass(frozen=True)
class DirectTerms:
    """The stationary flows of an exact solution (chain or tree) and the terms of their
    certificate, in node and edge order."""

    U: np.ndarray
    node_value: float  # sum_i L_i(w_i)
    node_gaps: np.ndarray
    edge_value: float  # sum_e c_e phi(z_e)
    edge_gaps: np.ndarray


def _path_terms(problem: GTVProblem, W, plan: ChainPlan, lam: np.ndarray | None = None) -> DirectTerms:
    """The flows that make ``W`` stationary on every path, clipped into their capacities, and the
    node and edge terms of their certificate (:func:`~gtvcvx.solvers._chain_kernels.path_certificate`).

    Along a path ``v_0 .. v_m`` with ``F_k`` the flow from ``v_k`` to ``v_{k+1}``, node ``v_j``
    sees ``(D^T U)_{v_j} = F_j - F_{j-1}``; ``D`` has ``+1`` at an edge's lower node index, so
    ``U_e = F_k`` when ``v_k < v_{k+1}`` and ``-F_k`` otherwise (``z_e`` changes its sign with it:
    the edge terms do not).
    """
    *_, path_certificate = compiled()
    n, d = W.shape
    lam = _step_capacities(problem, plan) if lam is None else lam
    Ft = np.empty((d, n))
    node_gaps = np.empty(n)
    edge_gaps = np.empty(problem.n_edges if plan.natural else n)  # (by position: the edge after it)
    sums = np.empty(2)
    path_certificate(_path_major(W, plan), _path_major(problem.loss.points, plan), lam, plan.starts, Ft, node_gaps,
                     edge_gaps, sums)
    if plan.natural:  # edge k runs from node k (+1 in D) to k + 1: U_e = F_e
        return DirectTerms(np.ascontiguousarray(Ft[:, :-1].T), float(sums[0]), node_gaps, float(sums[1]), edge_gaps)
    order, step_edge = plan.order, plan.step_edge
    pos = np.flatnonzero(step_edge >= 0)
    sign = np.where(order[pos] < order[pos + 1], 1.0, -1.0)
    return terms_in_graph_order(problem, order, pos, step_edge[pos], sign, Ft, node_gaps, edge_gaps, sums)


def terms_in_graph_order(problem: GTVProblem, order, positions, edges, sign, Ft, node_gaps, edge_gaps,
                         sums) -> DirectTerms:
    """:class:`DirectTerms` from a kernel's outputs in its own order of the nodes (``order[k]``: the
    node at position ``k``): the flow ``Ft[:, positions[j]]`` runs along edge ``edges[j]``, with the
    edge's orientation ``sign[j]`` (``+1`` where it runs from the lower node index to the higher,
    the ``+1`` of ``D``), and ``edge_gaps[positions[j]]`` is that edge's term."""
    U = np.zeros((problem.n_edges, Ft.shape[0]))
    U[edges] = sign[:, None] * Ft.T[positions]
    by_node, by_edge = np.empty(problem.n), np.zeros(problem.n_edges)
    by_node[order] = node_gaps
    by_edge[edges] = edge_gaps[positions]
    return DirectTerms(U, float(sums[0]), by_node, float(sums[1]), by_edge)


def direct_certificate(problem: GTVProblem, terms: DirectTerms) -> Certificate | None:
    """The certificate :func:`~gtvcvx.solvers.certify_pair` gives ``W`` with the flows of ``terms``,
    from the terms an exact solver computed along its paths or trees; None where ``certify_pair``
    must decide (a gap that is not finite, or capacities it treats as negligible,
    :data:`NEGLIGIBLE_CAPACITY`).

    The flows are in their capacity balls, and the squared distances' conjugates have full
    domains, so there is no conservation residual to pay for: the certificate is the sum of the
    Fenchel-Young terms plus the rounding allowance (:func:`certificate_from_terms`).
    """
    caps = problem.capacities
    if caps.size and not caps.min() > NEGLIGIBLE_CAPACITY * caps.max():
        return None
    primal = terms.node_value + terms.edge_value
    cert = certificate_from_terms(problem, primal, terms.node_gaps, terms.edge_gaps, FeasibleFlow(U=terms.U, rounds=1))
    return cert if np.isfinite(cert.gap) else None


@certified_statuses
def solve_chain(problem: GTVProblem, tol: float = 1e-6, *, plan: ChainPlan | None = None) -> GTVResult:
    r"""Solve GTV minimization exactly on a chain (or a forest of chains).

    Parameters
    ----------
    problem : GTVProblem
        A squared-distance loss (trait ``separable_points``), an l1 penalty (dual ball ``"linf"``;
        any norm penalty when ``d = 1``) and a graph whose components are paths.
    tol : float
        The certified relative gap that counts as ``optimal``; the solve itself is exact, so
        only float64 rounding can leave a gap (status ``inaccurate`` with the reason).
    plan : ChainPlan, optional
        The path structure, when the caller has it (:func:`chain_plan`).

    Returns
    -------
    GTVResult
        ``solver = "fast"``, ``info["method"] = "chain"``, with the flows and certificate of
        :func:`gtvcvx.solvers.certify_pair`.

    Raises
    ------
    CapabilityError
        When the loss, the penalty or the graph does not have the structure (the message says which).

    Notes
    -----
    With ``L_i(w) = ||w - a_i||^2`` and ``phi = ||.||_1`` the objective is
    ``sum_k [ sum_i (w_ik - a_ik)^2 + sum_e c_e |w_{h(e)k} - w_{t(e)k}| ]``: per coordinate ``k``
    and path, 1-D total-variation denoising with data weights 2 and edge weights ``c_e = lam A_e``,
    solved by Johnson's dynamic program [1]_ (O(n) per coordinate; the same algorithm as Condat's
    direct method [2]_ solves, for weighted edges and data). The dual certificate routes the
    residual ``-grad L`` along each path (cumulative sums), which is the exact optimal flow.

    References
    ----------
    .. [1] N. A. Johnson, "A dynamic programming algorithm for the fused lasso and
       L0-segmentation", J. Computational and Graphical Statistics 22(2), 2013.
    .. [2] L. Condat, "A direct algorithm for 1-D total variation denoising", IEEE Signal
       Processing Letters 20(11), 2013.
    """
    t_start = time.perf_counter()
    plan = checked_plan(problem, tol, plan, chain_refusal, chain_plan, "chain")
    _, tv1d_paths, *_ = compiled()
    points, center = centered_points(problem)
    Yt = _path_major(points, plan)
    lam = _step_capacities(problem, plan)
    out = np.empty_like(Yt)
    setup_time = time.perf_counter() - t_start
    t_solve = time.perf_counter()
    # (the data weights 2 of ||w - a||^2 as one broadcast value: no n-array to build or stream)
    tv1d_paths(Yt, center, np.broadcast_to(2.0, problem.n), lam, plan.starts, out)
    if plan.natural:
        W = np.ascontiguousarray(out.T)
    else:
        W = np.empty_like(points)
        W[plan.order] = out.T
    terms = _path_terms(problem, W, plan, lam)
    return exact_result(problem, W, terms.U, tol, setup_time, t_solve, "chain", {"paths": plan.n_paths},
                        cert=direct_certificate(problem, terms))


def checked_plan(problem: GTVProblem, tol: float, plan, refusal, make_plan, name: str):
    """``plan``, or the one ``make_plan(problem)`` finds, of the exact ``name`` solver; a
    :class:`CapabilityError` saying why (``refusal(problem)``, or a cycle the walk found) where
    the structure is not there."""
    if not isinstance(problem, GTVProblem):
        raise TypeError(f"problem must be a gtvcvx.GTVProblem, got {type(problem).__name__}")
    check_gap_tolerance(tol, "tol")
    reason = refusal(problem)
    if not reason and plan is None:
        plan = make_plan(problem)
        if plan is None:
            reason = "the graph has a cycle"
    if reason:
        raise CapabilityError(f"the exact {name} solver does not apply: {reason}; use method='halpern'")
    return plan


def centered_points(problem: GTVProblem) -> tuple[np.ndarray, np.ndarray]:
    """``(points, center)``: TV commutes with shifts, and centering each coordinate keeps the
    knots' arithmetic at the scale of the differences, not of the data (points near 1e8 lose 8
    digits otherwise)."""
    points = np.asarray(problem.loss.points, dtype=float)
    return points, 0.5 * (points.max(axis=0) + points.min(axis=0))


def exact_result(problem: GTVProblem, W, U, tol: float, setup_time: float, t_solve: float, method: str,
                 info: dict, cert: Certificate | None = None) -> GTVResult:
    """The :class:`GTVResult` of a direct solve: ``(W, U)`` certified by :func:`certify_pair` (or
    ``cert``, its certificate computed by the solver), status ``optimal`` at ``tol`` or
    ``inaccurate`` with the reason float64 gives."""
    if cert is None:
        # numba is loaded (the direct solvers' dynamic programs): the one-pass edge terms at any size
        projector = FlowProjector(problem, warm=False,
                                  compiled_terms=problem.n_edges * problem.d >= EXACT_COMPILED_ENTRIES)
        cert = certify_pair(problem, W, U, projector=projector)
    solve_time = time.perf_counter() - t_solve
    if cert.rel_gap <= tol:
        status, message = Status.OPTIMAL, ""
    else:
        status = Status.INACCURATE
        if not np.isfinite(cert.gap):  # (e.g. squares of data near 1e160 overflow)
            message = f"the exact {method} solve has {cert.message or 'no finite certificate'}"
        else:
            if cert.resolution > tol:
                message = cert.resolution_message(tol)
            else:
                message = (f"float64 cannot hold the exact solution closer: W rounded to float64 certifies a "
                           f"relative gap of {cert.rel_gap:.3g} > tol = {tol:g} (data far larger than its "
                           "differences: center or rescale the data, or loosen tol)")
            message = f"{message}; the exact {method} solve certified {cert.rel_gap:.3g}"
            if cert.message:
                message = f"{message}; {cert.message}"
    history = pd.DataFrame([{"iteration": 1, "time": setup_time + solve_time, "primal": cert.primal,
                             "dual": cert.dual, "gap": cert.gap, "rel_gap": cert.rel_gap}])
    return GTVResult(status=status, solver="fast", W=W, U=cert.U, primal=cert.primal, dual=cert.dual,
                     gap=cert.gap, rel_gap=cert.rel_gap, value=cert.primal, iterations=1,
                     setup_time=setup_time, solve_time=solve_time, residuals=dict(cert.residuals),
                     history=history, message=message,
                     info={"method": method, **info, "node_gaps": cert.node_gaps, "edge_gaps": cert.edge_gaps})
