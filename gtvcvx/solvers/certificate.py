"""Duality-gap certificates for GTV minimization.

Given any candidate ``W`` and a flow iterate ``U`` (possibly infeasible for the network-flow
dual), build a *feasible* flow and evaluate the gap as a sum of non-negative Fenchel-Young
terms. The result is an honest bound: ``P(W) - P* <= gap``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import math
import time

import numpy as np

from ..problem import GTVProblem
from ..results import relative_gap

__all__ = ["Certificate", "FeasibleFlow", "FlowProjector", "feasible_flow", "certify_pair"]


@dataclass
class FeasibleFlow:
    """A flow made feasible for the network-flow dual.

    Attributes
    ----------
    U : ndarray (|E|, d)
        The feasible flow.
    conservation_residual : float
        ``||N D^T U_in||`` before the projection, relative to the flow scale: how far the
        iterate was from the linear constraints (flow conservation at nodes without data,
        ``range(X_i^T)`` at nodes with ``m_i < d``).
    capacity_scale : float
        The common factor ``alpha <= 1`` applied to the edges touching constrained nodes to fit
        them into their capacity balls (other edges are projected one by one).
    scale : float
        Flow scale of the input iterate (``max deg * max |U|``): net flows below
        ``DOMAIN_RTOL * scale`` are rounding error of the projection.
    projection_iterations : int
        Conjugate-gradient iterations of the minimum-norm projection (0 when the losses have
        full domains).
    message : str
        Why no feasible flow could be built, if so.
    """

    U: np.ndarray
    scale: float = 0.0
    conservation_residual: float = 0.0
    capacity_scale: float = 1.0
    projection_iterations: int = 0
    message: str = ""


@dataclass
class Certificate:
    """Primal value, a dual bound at a feasible flow, and where optimality fails.

    ``gap = primal - dual = sum(node_gaps) + sum(edge_gaps)``, every term ``>= 0`` (Fenchel-Young).
    ``dual`` is ``-inf`` (and ``gap`` ``inf``) when no finite certificate could be built;
    ``message`` says why.
    """

    primal: float
    dual: float
    gap: float
    rel_gap: float
    node_gaps: np.ndarray
    edge_gaps: np.ndarray
    U: np.ndarray
    residuals: dict = field(default_factory=dict)
    message: str = ""

    def worst_nodes(self, k: int = 5) -> list[tuple[int, float]]:
        """The ``k`` nodes with the largest Fenchel-Young gap, as ``(node, gap)``."""
        order = np.argsort(-np.nan_to_num(self.node_gaps, nan=np.inf))[:k]
        return [(int(i), float(self.node_gaps[i])) for i in order]

    def worst_edges(self, k: int = 5) -> list[tuple[int, float]]:
        """The ``k`` edges with the largest Fenchel-Young gap, as ``(edge, gap)``."""
        order = np.argsort(-np.nan_to_num(self.edge_gaps, nan=np.inf))[:k]
        return [(int(e), float(self.edge_gaps[e])) for e in order]


class _ConservationOperator:
    """``A: U -> S N D_C^T U`` on the constrained nodes ``C``, ``N_i = I - Q_i Q_i^T``, ``S = deg^{-1/2}``.

    The minimum-norm correction ``Delta = A^T y`` with ``A A^T y = b`` is computed by conjugate
    gradients in node space, where ``A A^T = S N L_C N S`` only needs the Laplacian block
    ``L_C = D_C^T D_C`` (n_C x n_C), never an |E| x d intermediate. The row scaling ``S``
    changes neither the constraint set ``{U : N D_C^T U = 0}`` nor the minimum-norm
    correction, but normalizes the Laplacian, which CG handles in far fewer iterations.
    """

    def __init__(self, problem: GTVProblem, nodes: np.ndarray):
        self.problem = problem
        self.nodes = nodes
        Dt = problem.graph.incidence.T.tocsr()
        self.Dt_rows = Dt[nodes]
        self.Dt_rows_T = self.Dt_rows.T.tocsr()
        self.laplacian = (self.Dt_rows @ self.Dt_rows_T).tocsr()
        self.row_scale = (1.0 / np.sqrt(np.maximum(problem.graph.degree[nodes], 1)))[:, None]
        self.Q = problem.loss.Q[nodes]
        self.Qt = np.ascontiguousarray(np.swapaxes(self.Q, 1, 2))

    def outside(self, R: np.ndarray) -> np.ndarray:
        """Component of per-node rows (constrained nodes only) outside the conjugate's linear domain."""
        return R - np.matmul(self.Q, np.matmul(self.Qt, R[:, :, None]))[:, :, 0]  # batched, BLAS

    def apply(self, U: np.ndarray) -> np.ndarray:
        """``A U`` (n_C, d)."""
        return self.row_scale * self.outside(self.Dt_rows @ U)

    def apply_transpose(self, Y: np.ndarray) -> np.ndarray:
        """``A^T Y`` (|E|, d)."""
        return self.Dt_rows_T @ self.outside(self.row_scale * Y)

    def gram(self, Y: np.ndarray) -> np.ndarray:
        """``A A^T Y = S N L_C N S Y`` (n_C, d)."""
        return self.row_scale * self.outside(self.laplacian @ self.outside(self.row_scale * Y))

    def solve(self, B: np.ndarray, Y0: np.ndarray | None, atol: float, max_iter: int,
              deadline: float | None = None):
        """Conjugate gradients for ``A A^T Y = B`` (consistent, PSD). Returns (Y, iterations, residual).

        ``deadline`` is a ``time.perf_counter()`` value after which CG stops early (the caller's
        time budget); an unfinished projection is then rejected by the domain checks.
        """
        Y = np.zeros_like(B) if Y0 is None else Y0.copy()
        R = B - self.gram(Y) if Y0 is not None else B.copy()
        P = R.copy()
        rr = float(np.vdot(R, R))
        it = 0
        while math.sqrt(rr) > atol and it < max_iter:
            if deadline is not None and time.perf_counter() > deadline:
                break
            AP = self.gram(P)
            pAp = float(np.vdot(P, AP))
            if pAp <= 0:
                break
            alpha = rr / pAp
            Y += alpha * P
            R -= alpha * AP
            rr_new = float(np.vdot(R, R))
            P *= rr_new / rr
            P += R
            rr = rr_new
            it += 1
        return Y, it, math.sqrt(rr)


def _constrained_nodes(problem: GTVProblem) -> np.ndarray:
    """Nodes whose loss conjugate has linear constraints (rank(X_i) < d, including m_i = 0)."""
    rank = getattr(problem.loss, "rank", None)
    if rank is None:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(rank < problem.d)


class FlowProjector:
    """Restores dual feasibility of flow iterates; reusable across the check-points of a run.

    1. Correction onto the linear constraints of the loss conjugates,
       ``(I - Q_i Q_i^T)(D^T U')_i = 0`` at the constrained nodes: the minimum-norm correction
       ``A^T y`` with ``A A^T y = A U`` by conjugate gradients in node space (see
       ``_ConservationOperator``). Across a run each call starts from the previous ``y`` (the
       flows change little between check-points), so the work is amortized.
    2. Into the capacity balls: edges with no constrained end point are projected edge by
       edge (nothing else depends on their flow); the edges touching a constrained node are
       scaled by one common ``alpha = min(1, min_e c_e / ||U'_e||_*)``, which keeps the
       homogeneous linear constraints at those nodes exactly satisfied.

    The CG target is set from the domain tolerance of the conjugates: the leftover
    violation must be below ``0.1 * DOMAIN_RTOL`` times the flow scale, so that the loss
    conjugates accept the flow; if CG stops short (``max_iter``), the conjugates reject it
    and the certificate reports no finite dual bound rather than a wrong one.
    """

    def __init__(self, problem: GTVProblem, *, max_iter: int | None = None, warm: bool = True):
        self.problem = problem
        nodes = _constrained_nodes(problem)
        self.operator = _ConservationOperator(problem, nodes) if nodes.size and problem.n_edges else None
        constrained = np.zeros(problem.n, dtype=bool)
        constrained[nodes] = True
        self.coupled_edges = constrained[problem.graph.edges].any(axis=1)  # touch a constrained node
        self.max_iter = max_iter or max(1000, 10 * int(np.sqrt(max(problem.n, 1))))
        self.warm = warm
        self.multipliers = None

    def __call__(self, U, *, deadline: float | None = None) -> FeasibleFlow:
        from ..losses import DOMAIN_RTOL

        problem = self.problem
        U = np.asarray(U, dtype=float)
        out = FeasibleFlow(U=U.copy(), scale=problem.flow_scale(U))
        if problem.n_edges == 0:
            return out
        A = self.operator
        if A is not None:
            B = A.apply(U)
            norm_b = float(np.linalg.norm(B))
            flow_scale = out.scale
            out.conservation_residual = norm_b / max(flow_scale, np.finfo(float).tiny)
            if norm_b > 0:
                target = 0.1 * DOMAIN_RTOL * flow_scale * float(A.row_scale.min())
                Y0 = self.multipliers if self.warm else None
                Y, iterations, _ = A.solve(B, Y0, target, self.max_iter, deadline)
                self.multipliers = Y
                out.U = U - A.apply_transpose(Y)
                out.projection_iterations = iterations
        if problem.penalty.is_norm:
            usage = problem.penalty._dual_norms(out.U)
            caps = problem.capacities
            over = usage > caps
            coupled = self.coupled_edges
            if (over & coupled).any():
                with np.errstate(divide="ignore"):
                    alpha = float(np.min(np.where(over & coupled, caps / usage, 1.0)))
                out.capacity_scale = alpha
                out.U[coupled] *= alpha
            free = over & ~coupled
            if free.any():
                out.U[free] = problem.penalty._prox_conjugate(out.U[free], 1.0, caps[free])
        return out


def feasible_flow(problem: GTVProblem, U, *, max_iter: int | None = None) -> FeasibleFlow:
    """Make a flow iterate feasible for the network-flow dual (see :class:`FlowProjector`).

    Parameters
    ----------
    problem : GTVProblem
    U : ndarray (|E|, d)
    max_iter : int, optional
        Conjugate-gradient iteration limit of the minimum-norm projection.
    """
    return FlowProjector(problem, max_iter=max_iter, warm=False)(problem.check_U(U))


def certify_pair(problem: GTVProblem, W, U, *, projector: FlowProjector | None = None,
                 deadline: float | None = None) -> Certificate:
    """Certificate for a primal candidate ``W`` and a flow iterate ``U``.

    The flow is made feasible (:class:`FlowProjector`), then the gap is the sum of node terms
    ``L_i(w_i) + L_i^*(v_i) - <w_i, v_i>`` with ``v = -D^T U`` and edge terms
    ``c_e phi(z_e) + c_e phi^*(u_e / c_e) - <z_e, u_e>`` with ``z = D W``; each term is
    computed in a cancellation-free form where the loss or penalty has one.
    """
    W = problem.check_W(W)
    U = problem.check_U(U)
    flow = (projector or FlowProjector(problem, warm=False))(U, deadline=deadline)
    Uf = flow.U
    D = problem.graph.incidence
    V = -(D.T @ Uf)
    Z = D @ W
    caps = problem.capacities
    # rounding in the projection is relative to the input flow, which may be far larger
    # than the feasible flow (e.g. when flow conservation forces U = 0)
    scale = max(flow.scale, problem.flow_scale(Uf))
    node_gaps = problem.loss.node_fenchel_young(W, V, scale=scale)
    edge_gaps = problem.penalty._edge_fenchel_young(Z, Uf, caps)
    primal = float(problem.loss.node_values(W).sum() + problem.penalty._edge_values(Z, caps).sum())
    gap = float(node_gaps.sum() + edge_gaps.sum())
    message = flow.message
    if not np.isfinite(gap):
        bad = np.flatnonzero(~np.isfinite(node_gaps))
        message = message or (f"no finite dual bound: the flow is outside the conjugate domain at "
                              f"{bad.size} node(s), e.g. node {int(bad[0])}" if bad.size else
                              "no finite dual bound at the edges")
        dual, gap = -np.inf, np.inf
    else:
        dual = primal - gap
    residuals = {
        "conservation": flow.conservation_residual,
        "capacity_scale": flow.capacity_scale,
        "projection_iterations": float(flow.projection_iterations),
    }
    return Certificate(primal=primal, dual=dual, gap=gap, rel_gap=relative_gap(primal, dual),
                       node_gaps=node_gaps, edge_gaps=edge_gaps, U=Uf, residuals=residuals, message=message)
