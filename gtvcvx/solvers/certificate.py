"""Duality-gap certificates for GTV minimization.

Given any candidate ``W`` and a flow iterate ``U`` (possibly infeasible for the network-flow
dual, possibly supplied by an untrusted caller), build a feasible flow and evaluate the gap as
a sum of non-negative Fenchel-Young terms plus two allowances. The result is an honest bound,
``P(W) - P* <= gap``, by construction:

* every value is computed from the raw data (doubled-precision residuals, Bregman and
  Kullback-Leibler forms of the Fenchel-Young terms; see :meth:`gtvcvx.losses.Loss.certify_nodes`);
* no tolerance decides feasibility: flows are clipped into their capacities, projected onto
  the conservation constraints, and the leftover residual is paid for by an a-priori bound
  (:class:`ResidualAllowance`) from ``P(W)`` and the problem's own data;
* a first-order bound on the rounding of the reported sums is added.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import functools
import math
import time

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from .._validation import check_gap_tolerance
from ..capabilities import provides
from ..losses import DOMAIN_RTOL
from ..problem import GTVProblem
from ..results import Status, relative_gap, resolution_message
from ._cg import conjugate_gradient
from ._edge_kernels import differences, divergence, edge_norm_terms
from ._sparse_factor import block_indices, symmetric_solver

__all__ = ["Certificate", "FeasibleFlow", "FlowProjector", "feasible_flow", "certify_pair", "certify_iterate",
           "stationarity", "MinorantBoxes", "minorant_box", "zero_flow_nodes", "zero_dual_terms",
           "bounds_optimum", "constrained_nodes", "certificate_from_terms", "no_bound_message",
           "zero_flow_message"]


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
    scale : float or None
        Flow scale from the problem's data (the largest net flow a feasible flow can carry at a
        node, :attr:`GTVProblem.node_flow_bound`; for penalties without capacities, that of the
        flow after clipping): it sets the projection's target, never a feasibility tolerance.
        None until a residual needs it (:meth:`FlowProjector.flow_scale`; flows certified in place).
    projection_iterations : int
        Conjugate-gradient iterations of the projection, over all rounds (0 when the losses have
        full domains).
    rounds : int
        Rounds of alternating projections (constraints, then capacity balls) before the common
        scale ``capacity_scale`` was applied.
    message : str
        Why no feasible flow could be built, if so.
    """

    U: np.ndarray
    scale: float | None = 0.0
    conservation_residual: float = 0.0
    capacity_scale: float = 1.0
    projection_iterations: int = 0
    rounds: int = 0
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

    @property
    def resolution(self) -> float:
        """The smallest relative gap this certificate could show: its rounding allowance over
        ``1 + |P| + |D|``. A requested tolerance below it cannot be certified in float64."""
        rounding = float(self.residuals.get("rounding_allowance", 0.0))
        if not (np.isfinite(self.primal) and np.isfinite(self.dual)):
            return float("nan")
        return rounding / (1.0 + abs(self.primal) + abs(self.dual))

    def resolution_message(self, tol: float) -> str:
        """Why ``tol`` is below what float64 can certify here (see :attr:`resolution`)."""
        return resolution_message(tol, self.resolution)

    def worst_nodes(self, k: int = 5) -> list[tuple[int, float]]:
        """The ``k`` nodes with the largest Fenchel-Young gap, as ``(node, gap)``."""
        order = np.argsort(-np.nan_to_num(self.node_gaps, nan=np.inf))[:k]
        return [(int(i), float(self.node_gaps[i])) for i in order]

    def worst_edges(self, k: int = 5) -> list[tuple[int, float]]:
        """The ``k`` edges with the largest Fenchel-Young gap, as ``(edge, gap)``."""
        order = np.argsort(-np.nan_to_num(self.edge_gaps, nan=np.inf))[:k]
        return [(int(e), float(self.edge_gaps[e])) for e in order]


class _ConservationOperator:
    """``A: U -> S N D_C^T U`` on the constrained nodes ``C``, ``N_i = I - Q_i Q_i^T``, ``S = deg_w^{-1/2}``.

    The correction of least weighted norm ``sum_e ||Delta_e||^2 / w_e`` onto ``{A U = 0}`` is
    ``Delta = Omega A^T y`` with ``A Omega A^T y = b`` (``Omega = diag(w)``), computed by conjugate
    gradients in node space, where ``A Omega A^T = S N L_w N S`` only needs the weighted
    Laplacian block ``L_w = D_C^T Omega D_C`` (n_C x n_C), never an |E| x d intermediate. The
    row scaling ``S`` by the weighted degrees changes neither the constraint set nor the
    correction, but normalizes the Laplacian, which CG handles in far fewer iterations.

    Notes
    -----
    The weights are the edge capacities (relative to the largest) for norm penalties: the
    correction then moves every flow by about the same fraction of its capacity. With equal
    weights (the minimum-norm correction) an edge of capacity 9e-15 on a Gaussian k-NN graph
    received a correction of 1e-8, and the common capacity scaling of the coupled edges fell
    to 3e-5 (the dual bound collapsed to 0; digits, 1,797 nodes, 6,309 edges).
    """

    def __init__(self, problem: GTVProblem, nodes: np.ndarray, weights: np.ndarray | None = None):
        self.problem = problem
        self.nodes = nodes
        Dt = problem.graph.incidence.T.tocsr()
        self.Dt_rows = Dt[nodes]
        self.Dt_rows_T = self.Dt_rows.T.tocsr()
        if weights is None:
            self.weights = None
            self.laplacian = (self.Dt_rows @ self.Dt_rows_T).tocsr()
            degree = problem.graph.degree[nodes].astype(float)
        else:
            self.weights = np.asarray(weights, dtype=float)[:, None]
            self.laplacian = (self.Dt_rows @ sp.diags(self.weights[:, 0]) @ self.Dt_rows_T).tocsr()
            degree = np.asarray(abs(self.Dt_rows) @ self.weights[:, 0]).ravel()
            # a node whose edges all have weight 0 cannot be corrected (its rows of the Gram are 0)
            degree = np.where(degree > 0, degree, 1.0)
        self.row_scale = (1.0 / np.sqrt(np.maximum(degree, 1.0) if weights is None else degree))[:, None]
        self.Q = problem.loss.linear_domain().basis[nodes]  # declared vocabulary, no hidden Q
        self.Qt = np.ascontiguousarray(np.swapaxes(self.Q, 1, 2))
        self._factor = None
        self._factor_entries = None  # estimated entries of the factors (see factorable)
        # corrections restricted to the faces of the capacity balls the flow lies on
        # (``Penalty.face_tangent``; None: unrestricted), set per round by the projector
        self.tangent = None

    def outside(self, R: np.ndarray) -> np.ndarray:
        """Component of per-node rows (constrained nodes only) outside the conjugate's linear domain."""
        return R - np.matmul(self.Q, np.matmul(self.Qt, R[:, :, None]))[:, :, 0]  # batched, BLAS

    def apply(self, U: np.ndarray) -> np.ndarray:
        """``A U`` (n_C, d)."""
        return self.row_scale * self.outside(self.Dt_rows @ U)

    def apply_transpose(self, Y: np.ndarray) -> np.ndarray:
        """``Omega A^T Y`` (|E|, d): the correction for multipliers ``Y``."""
        out = self.Dt_rows_T @ self.outside(self.row_scale * Y)
        if self.tangent is not None:
            out = self.tangent(out)
        return out if self.weights is None else self.weights * out

    def gram(self, Y: np.ndarray) -> np.ndarray:
        """``A Omega A^T Y = S N L_w N S Y`` (n_C, d); restricted to faces ``A Omega T A^T Y``."""
        if self.tangent is not None:
            return self.apply(self.apply_transpose(Y))
        return self.row_scale * self.outside(self.laplacian @ self.outside(self.row_scale * Y))

    def solve(self, B: np.ndarray, Y0: np.ndarray | None, atol: float, max_iter: int,
              deadline: float | None = None, exact: bool = False):
        """``A Omega A^T Y = B`` (consistent, PSD). Returns (Y, iterations, residual).

        Conjugate gradients; with unequal weights and at most ``FACTOR_MAX_UNKNOWNS`` unknowns,
        a CG run that has not converged after ``CG_BEFORE_FACTOR`` iterations is finished by a
        sparse factorization (kept for the next calls): capacities spanning many orders of
        magnitude leave the Gram nearly singular, and CG's residual at its target can still cost
        the certificate much (measured on the digits 5-NN graph, capacities 1e-16..0.024: 723 CG
        iterations to the target, allowance 26 % of P; the factorization, 0.4 s, leaves 2e-19).
        ``exact=True`` solves with the factorization from the start (if :attr:`factorable`),
        to the rounding level rather than to ``atol``. ``deadline`` is a ``time.perf_counter()``
        value after which CG stops early (the caller's time budget); an unfinished projection is
        then paid for by the residual allowance.
        """
        if self.tangent is not None:
            return self._solve_on_faces(B, Y0, atol, max_iter, deadline)
        if self._factor is not None:
            return self._direct(B, Y0)
        if exact and self.factorable:
            self._factorize()
            return self._direct(B, Y0)
        factorable = self.weights is not None and self.factorable
        budget = min(max_iter, CG_BEFORE_FACTOR) if factorable else max_iter
        Y, iterations, residual = conjugate_gradient(self.gram, B, atol=atol, max_iter=budget, x0=Y0,
                                                     deadline=deadline)
        if residual <= atol or not factorable or (deadline is not None and time.perf_counter() > deadline):
            return Y, iterations, residual
        self._factorize()
        Y, _, residual = self._direct(B, Y)
        return Y, iterations, residual

    def _solve_on_faces(self, B, Y0, atol, max_iter, deadline):
        """:meth:`solve` with corrections restricted to faces: conjugate gradients on
        ``A Omega T A^T``, to ``atol`` only (the projector finishes an ``exact`` correction without
        the restriction). Neither preconditioned by the unrestricted Gram's factors nor run to the
        rounding level: measured on a 5-NN graph (120 nodes, d = 3, m_i = 1), either diverged
        (residuals 1e-9 -> 14, corrections of 1.3 where ~1e-5 solve it to ``atol`` in 40 steps):
        near the optimum, flows at capacity on edges about to fuse leave the restricted system
        nearly singular. At most ``CG_BEFORE_FACTOR`` steps (the unrestricted system is factorized
        after that many; the digits 5-NN graph's restricted one was at 1.6e-2 of a 3e-12 target after
        1,000 steps). A singular restricted system can also overflow CG (measured: a logistic
        tree with the l1 penalty, most coordinates frozen, at the 1e-14 target): then the
        residual returned is ``inf`` (the caller falls back to the unrestricted correction)."""
        with np.errstate(all="ignore"):
            Y, iterations, residual = conjugate_gradient(self.gram, B, atol=atol, max_iter=min(max_iter, CG_BEFORE_FACTOR),
                                                         x0=Y0, deadline=deadline)
        if not (np.isfinite(residual) and np.isfinite(Y).all()):
            return np.zeros_like(B), iterations, np.inf
        return Y, iterations, residual

    @property
    def factorable(self) -> bool:
        """Whether the Gram is small enough to factorize: at most ``FACTOR_MAX_UNKNOWNS`` unknowns
        and ``FACTOR_MAX_ENTRIES`` entries in its factors, estimated as ``d^2`` times those of the
        node Laplacian's factors (a SuperLU run on the ``n_C x n_C`` pattern, done once)."""
        if self._factor_entries is None:
            d = self.Q.shape[1]
            if self.nodes.size * d > FACTOR_MAX_UNKNOWNS:
                self._factor_entries = np.inf
            else:
                self._factor_entries = laplacian_factor_entries(self.laplacian) * d * d
        return self._factor_entries <= FACTOR_MAX_ENTRIES

    def _factorize(self) -> None:
        """Factors of ``S N L_w N S + (I - N) + eps I`` (the identity on the free directions
        ``range(Q_i)``, where the Gram is zero, and a tiny shift for graph components whose data
        leave constraints unsolvable); :meth:`_direct` refines against the exact Gram."""
        L = self.laplacian.tocoo()
        d = self.Q.shape[1]
        N = np.eye(d) - np.matmul(self.Q, self.Qt)  # (n_C, d, d)
        S = self.row_scale[:, 0]
        blocks = (L.data * S[L.row] * S[L.col])[:, None, None] * np.matmul(N[L.row], N[L.col])
        rows, cols = block_indices(L.row, L.col, d)
        size = self.nodes.size * d
        free = np.eye(d) - N  # Q_i Q_i^T
        diag_rows, diag_cols = block_indices(np.arange(self.nodes.size), np.arange(self.nodes.size), d)
        data = np.concatenate([blocks.ravel(), free.ravel(), np.full(size, FACTOR_SHIFT)])
        rr = np.concatenate([rows.ravel(), diag_rows.ravel(), np.arange(size)])
        cc = np.concatenate([cols.ravel(), diag_cols.ravel(), np.arange(size)])
        matrix = sp.csc_matrix((data, (rr, cc)), shape=(size, size))
        self._factor = symmetric_solver(matrix)  # (PARDISO where installed: 0.4 s -> 0.03 s on digits 10-NN)

    def _direct(self, B: np.ndarray, Y0: np.ndarray | None):
        """Solve with the factors, refined against the exact Gram until the residual stops falling."""
        shape = B.shape
        Y = np.zeros(shape) if Y0 is None else np.array(Y0, dtype=float)
        R = B - self.gram(Y)
        residual = float(np.linalg.norm(R))
        for _ in range(10):
            step = self._factor(R.ravel()).reshape(shape)
            Y_new = Y + step
            R_new = B - self.gram(Y_new)
            new = float(np.linalg.norm(R_new))
            if not new < residual:
                break
            Y, R, residual = Y_new, R_new, new
            if residual <= 1e-3 * float(np.linalg.norm(B)) * np.finfo(float).eps:
                break
        return Y, 0, residual


def laplacian_factor_entries(laplacian) -> float:
    """Entries of SuperLU's factors (minimum degree on ``A + A^T``, symmetric mode) of a Laplacian's pattern plus
    the identity: the fill of a factorization of any system with that pattern, per coordinate block."""
    pattern = (abs(laplacian) + sp.eye(laplacian.shape[0])).tocsc()
    lu = spla.splu(pattern, permc_spec="MMD_AT_PLUS_A", options={"SymmetricMode": True})
    return float(lu.L.nnz + lu.U.nnz)


def bounds_optimum(loss) -> bool:
    """Whether the loss bounds its optimum (finite :meth:`~gtvcvx.losses.Loss.range_bound` at every
    node with data), so that a certificate can pay for a small flow residual; logistic and hinge
    do not, and their certificates price a residual through the box of their samples' half-spaces
    (:func:`minorant_box`) where it is finite, else accept only rounding-level residuals."""
    return bool(np.isfinite(loss.range_bound(1.0)[loss.has_data]).all())


def constrained_nodes(problem: GTVProblem) -> np.ndarray:
    """Nodes whose loss conjugate has linear constraints (rank(X_i) < d, including m_i = 0)."""
    domain = problem.loss.linear_domain()
    if domain is None:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(domain.rank < problem.d)


#: The linear programs of :func:`minorant_box`: ``2 d`` of them, on at most ``MINORANT_LP_ROWS``
#: samples of a component (an evenly spaced subset beyond: fewer half-spaces, a larger polyhedron,
#: still a bound) and only for ``d <= MINORANT_LP_MAX_D``; beyond, the allowance of a loss that
#: bounds no optimum falls back to the candidate's scale. (HiGHS through SciPy, ~40 ms per program
#: at 625 x 32: 0.5 s for 2000 x 10, 1.1 s for 1000 x 20, 2.5 s for 625 x 32, 3.4 s for 400 x 50.)
MINORANT_LP_ROWS = 1000
MINORANT_LP_MAX_D = 20
#: ... and at most this many programs per allowance (one solve's certificates): components past it
#: keep the candidate's scale.
MINORANT_LP_PROGRAMS = 200


def minorant_box(A: np.ndarray, weight: np.ndarray, reach: np.ndarray) -> np.ndarray | None:
    r"""Rigorous bounds ``|w_j| <= box_j`` on the polyhedron ``{w : a_k^T w <= weight_k + ||a_k|| reach_k}``,
    or None where it is unbounded (the rows' data are separable) or the bound is not certified;
    ``box_j = inf`` for a column of zeros (a feature no sample has).

    Parameters
    ----------
    A : ndarray (M, d)
        Rows ``a_k`` (:meth:`gtvcvx.losses.Loss.linear_minorants` of a component's samples).
    weight, reach : ndarray (M,)
        ``weight_k`` and the unit distance ``reach_k`` of the sample's node from its component's root.

    Notes
    -----
    For a loss with ``a_k^T w <= weight_k L_i(w)`` (logistic, hinge: ``a_k = -y_k x_k``,
    ``weight_k = m_i``) every optimum satisfies ``L_i(w^*_i) <= P^* <= P`` and
    ``||w^*_i - w^*_a|| <= delta_i = P^p reach_i``, so the root's ``w^*_a`` lies in
    ``{a_k^T w <= weight_k P + ||a_k|| delta_i} \subset max(P, P^p) {a_k^T w <= weight_k + ||a_k|| reach_k}``:
    the box at ``P = 1`` scales by ``max(P, P^p)``.

    Each ``max +-w_j`` is a linear program (HiGHS, on columns scaled by powers of two, which is
    exact); its value is not trusted, its dual is: ``mu >= 0`` with ``A^T mu = +-e_j + rho`` gives
    ``+-w_j <= mu^T b + ||rho||_1 ||w||_inf`` for every ``w`` of the polyhedron, with ``||rho||_1``
    bounded above including the rounding of ``A^T mu`` (``gamma_{M+2} |A|^T mu``). With
    ``r = max ||rho||_1 < 1/2``, ``||w||_inf <= max(mu^T b) / (1 - r)``, and each ``box_j`` follows.

    References
    ----------
    .. [1] N. J. Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., SIAM 2002,
       section 3.1 (``gamma_n`` bounds of inner products).
    """
    from scipy.optimize import linprog

    M, d = A.shape
    if M == 0:
        return None
    colmax = np.abs(A).max(axis=0)
    if not np.isfinite(colmax).all():
        return None
    seen = colmax > 0
    if not seen.all():  # a feature no sample has: w_j is free, the others bounded as without it
        if not seen.any():
            return None
        inner = minorant_box(A[:, seen], weight, reach)
        if inner is None:
            return None
        box = np.full(d, np.inf)
        box[seen] = inner
        return box
    scale = np.exp2(np.round(np.log2(colmax)))  # powers of two: A / scale is exact ...
    As = A / scale
    if (np.abs(As[As != 0]) < np.finfo(float).tiny).any():
        return None  # ... unless it underflows
    eps = np.finfo(float).eps / 2
    gamma = (M + 2) * eps / (1 - (M + 2) * eps)
    b = (weight + np.sqrt(np.einsum("kd,kd->k", A, A)) * reach) * (1.0 + 4 * (d + 2) * eps)
    abs_As = np.abs(As)
    values, rhos = np.empty((d, 2)), np.empty((d, 2))
    for j in range(d):  # 2 d small linear programs, once per component (cached by the caller)
        for side, sign in enumerate((1.0, -1.0)):
            c = np.zeros(d)
            c[j] = -sign
            res = linprog(c, A_ub=As, b_ub=b, bounds=[(None, None)] * d, method="highs")
            if res.status != 0 or res.ineqlin is None:
                return None
            mu = np.maximum(-np.asarray(res.ineqlin.marginals, dtype=float), 0.0)
            rho = As.T @ mu
            rho[j] -= sign
            rhos[j, side] = (np.abs(rho).sum() + gamma * float((abs_As.T @ mu).sum())) * (1 + 4 * d * eps)
            values[j, side] = float(mu @ b) * (1 + gamma)
    r = float(rhos.max())
    if not (np.isfinite(values).all() and r < 0.5):
        return None
    box_inf = float(values.max()) / (1.0 - r) * (1 + 4 * eps)
    box_scaled = (values + rhos * box_inf).max(axis=1) * (1 + 4 * eps)
    return box_scaled / scale


class MinorantBoxes:
    """``box(comp)``: :func:`minorant_box` at ``P = 1`` of the samples of component ``comp`` among
    those of ``loss`` (all nodes, or one part's: a subset of a component's half-spaces bounds a
    larger polyhedron, so each part's box is valid and the smallest is taken); ``+inf`` entries
    where the programs ran and certified no bound (the polyhedron is unbounded: the component's
    data are separable, and nothing bounds the optimum); None where they did not run (the loss has
    no :meth:`~gtvcvx.losses.Loss.linear_minorants`, ``d > MINORANT_LP_MAX_D``, no samples, or
    the budget of ``MINORANT_LP_PROGRAMS`` is spent). Cached per component.

    ``component`` and ``dist_unit`` (per node of ``loss``) as in :class:`ResidualAllowance`.
    """

    def __init__(self, loss, component, n_components: int, dist_unit):
        self.loss, self.component, self.n_components, self.dist_unit = loss, component, n_components, dist_unit
        self.boxes = {}
        self.rows = None  # the loss's rows, grouped by component (built at the first call)
        self.programs = 0
        self.applies = provides(loss, "linear_minorants") and loss.d <= MINORANT_LP_MAX_D

    def _rows(self):
        if self.rows is None:
            A, node, weight = self.loss.linear_minorants()
            order = np.argsort(self.component[node], kind="stable")
            starts = np.searchsorted(self.component[node][order], np.arange(self.n_components + 1))
            self.rows = (A, node, weight, order, starts)
        return self.rows

    def lookup(self, comps) -> dict:
        """``{position: box}`` for the entries of ``comps`` (an integer array) that have a box, as
        ``[self(c) for c in comps]`` (the same programs, in the same order) without a Python step per
        component: only components with samples and no box yet run programs, while the budget lasts."""
        comps = np.asarray(comps, dtype=np.int64)
        if not self.applies or comps.size == 0:
            return {}
        starts = self._rows()[4]
        per_program = 2 * self.loss.d
        left = (MINORANT_LP_PROGRAMS - self.programs) // per_program
        if left > 0:
            seen = np.fromiter(self.boxes, dtype=np.int64, count=len(self.boxes))
            new = comps[(starts[comps + 1] > starts[comps]) & ~np.isin(comps, seen)]
            for comp in dict.fromkeys(new.tolist()):  # (first occurrences, in order)
                if left <= 0:
                    break
                self(comp)
                left -= 1
        boxed = np.fromiter((c for c, box in self.boxes.items() if box is not None), dtype=np.int64)
        return {int(k): self.boxes[int(comps[k])] for k in np.flatnonzero(np.isin(comps, boxed))}

    def __call__(self, comp: int) -> np.ndarray | None:
        comp = int(comp)
        if comp not in self.boxes:
            loss, box = self.loss, None
            if self.applies:
                A, node, weight, order, starts = self._rows()
                rows = order[starts[comp]:starts[comp + 1]]
                if rows.size > MINORANT_LP_ROWS:
                    rows = rows[np.linspace(0, rows.size - 1, MINORANT_LP_ROWS).astype(np.int64)]
                if rows.size and self.programs + 2 * loss.d <= MINORANT_LP_PROGRAMS:
                    self.programs += 2 * loss.d
                    box = minorant_box(A[rows], weight[rows], self.dist_unit[node[rows]])
                    if box is None:  # the programs ran and bound nothing (separable data): no bound at all
                        box = np.full(loss.d, np.inf)
            self.boxes[comp] = box
        return self.boxes[comp]


#: :meth:`ResidualAllowance.by_nodes` runs while ``n d^2`` (the entries of the node spectra) is at most this.
BY_NODES_MAX_ENTRIES = 1 << 24


class ResidualAllowance:
    r"""An a-priori bound on what a flow-conservation residual can cost the dual bound.

    A certificate evaluates each ``L_i^*`` at a point ``v'_i`` of its domain, while the flow's
    divergence is ``v_i = -(D^T U)_i``; the residual ``e_i = v_i - v'_i`` (rounding left by the
    projection, or a flow the caller supplied) makes the pair inconsistent. By Fenchel-Young,
    for every ``W'``

    .. math:: P(W') \ge D'(U) - \sum_i \langle w'_i, e_i \rangle,

    so ``P^* \ge D'(U) - A`` for any ``A \ge |\sum_i \langle w^*_i, e_i\rangle|``. With a root
    ``a`` per connected component ``C`` (edges with ``c_e > 0``),

    .. math:: |\sum_{i \in C} \langle w^*_i, e_i\rangle| \le \sum_{i\in C} \delta_i \|e_i\|
              + R_C \|\textstyle\sum_{i \in C} e_i\|,

    where ``delta_i >= ||w*_i - w*_a||`` is a shortest-path sum of per-edge bounds
    ``||z*_e|| <= unit_e P(W)^power`` (from ``c_e phi(z*_e) <= P* <= P(W)``; or, for a norm or
    quadratic penalty, the smaller budget of :class:`_SubtreeSums`, which shares ``P(W)`` among the
    edges of a spanning tree instead of granting it to each), and ``R_C`` bounds
    ``||Pi w*_a||`` on the span of the nodes' domains (``sum_C e`` lies in it): with
    ``G_C = sum_i B_i B_i^T`` and its smallest nonzero eigenvalue ``lambda_C``,
    ``R_C^2 = sum_i (beta_i + delta_i)^2 / lambda_C``, ``beta_i >= ||B_i^T w*_i||`` from the
    loss (:meth:`gtvcvx.losses.Loss.range_bound` at ``P(W)``). Every quantity comes from the
    problem's own data and ``P(W)``; nothing trusts the magnitude of the flow.

    When the loss gives no ``beta_i`` (logistic, hinge), ``|<w*_a, sum_C e>|`` is bounded by a box
    around ``w*_a`` from the linear program of the samples' half-spaces
    (:meth:`gtvcvx.losses.Loss.linear_minorants`, :func:`minorant_box`, :class:`MinorantBoxes`),
    finite where the component's pooled data are not separable (where the programs prove it
    unbounded the allowance is ``inf``: no finite dual with that residual). Where they do not run
    (beyond ``MINORANT_LP_MAX_D`` / ``MINORANT_LP_PROGRAMS``, or a loss without minorants),
    ``R_C`` falls back to the candidate's own ``max_i ||w_i|| + delta_i``, which is not a bound:
    :attr:`last_exact` is False, the certificate says so and :func:`gtvcvx.solve` reports
    ``inaccurate`` rather than ``optimal`` on it (:func:`rigorous_status`).

    ``support`` (|E|,) bool restricts the graph to the edges a flow may use (the others must carry
    exactly zero flow, as :class:`FlowProjector` ensures for negligible capacities): the bound
    holds on any subgraph that carries the flow.
    """

    def __init__(self, problem: GTVProblem, support: np.ndarray | None = None):
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import connected_components, dijkstra

        self.problem = problem
        n = problem.n
        unit, self.power = problem.penalty.difference_bound(problem.capacities)
        finite = np.isfinite(unit) if support is None else np.isfinite(unit) & support
        edges = problem.graph.edges[finite]
        lengths = unit[finite]
        graph = csr_matrix((lengths, (edges[:, 0], edges[:, 1])), shape=(n, n))
        # components of the same weighted matrix the shortest paths need (built once)
        self.n_components, self.component = connected_components(graph, directed=False)
        roots = np.unique(self.component, return_index=True)[1]
        dist, parent, _ = dijkstra(graph, directed=False, indices=roots, min_only=True, return_predecessors=True)
        self.segment = csr_matrix((np.ones(n), (self.component, np.arange(n))), shape=(self.n_components, n))
        self._tree = _SubtreeSums.build(problem, graph, parent, dist, self.component, self.segment, self.power)
        loss = getattr(problem, "loss", None)  # (the Dask backend's graph view has none: it says whether it is)
        nonnegative = provides(loss, "nonnegative") if loss is not None else getattr(problem, "nonnegative_loss", False)
        cap = _budget_reach(problem.penalty, self.power, nonnegative, self.component[edges[:, 0]], lengths,
                            self.n_components)
        self.dist_unit = np.asarray(dist) if cap is None else np.minimum(dist, cap[self.component])
        self._eigen = {}
        self._stacked = {}  # component -> spectrum from the stacked bases (see _stacked_spectrum)
        self._boxes = None  # MinorantBoxes, where the loss bounds no optimum by itself
        self._single = None  # the same allowance node by node (see by_nodes)
        self.last_estimated = np.zeros(self.n_components, dtype=bool)  # components priced by the candidate's scale

    def _eig(self, comps: np.ndarray):
        """Eigenvalues (k, d), eigenvectors (k, d, d) of ``G_C = sum_{i in C} B_i B_i^T`` and the
        component sizes (k,), for the components ``comps`` (computed once per component)."""
        return self.eigen(comps, lambda todo: component_grams(self.problem.loss, self.component, todo))

    def eigen(self, comps: np.ndarray, grams):
        """:meth:`_eig` with the Gram matrices of the components not seen yet from ``grams(todo)``
        ((k, d, d), e.g. summed over the parts of a distributed problem)."""
        todo = np.setdiff1d(comps, np.fromiter(self._eigen, dtype=np.int64, count=len(self._eigen)))
        if todo.size:
            vals, vecs = np.linalg.eigh(grams(todo))
            counts = self.sizes[todo]
            self._eigen.update({int(c): (vals[k], vecs[k], int(counts[k])) for k, c in enumerate(todo)})
        parts = [self._eigen[int(c)] for c in comps]
        return (np.stack([p[0] for p in parts]), np.stack([p[1] for p in parts]),
                np.array([p[2] for p in parts]))

    def _stacked_spectrum(self, comp: int):
        """``(vals, vecs, null)`` of ``G_C = M M^T`` from the SVD of the stacked node bases ``M``
        (d x sum r_i) of component ``comp``: singular values resolve ``sigma_min`` to ``~u sigma_max``
        where ``G_C``'s eigenvalues (its square) resolve only ``~u lambda_max``.

        Notes
        -----
        Two nodes whose one-sample domains are ``theta = 2.8e-14`` rad apart (features 3e-6 and
        8e8) give ``lambda_min = theta^2 / 2 ~ 8e-28``, below the eigenvalue cut, so the
        residual along it was taken for rounding and dropped; but the data determine ``w*``
        along it (~3e4), and the dual bound exceeded the optimum by 1.2e-6 (``P* = 0``). The
        SVD shows ``sigma = 2.8e-14``, 90 times its resolution: a real direction, bounded by
        ``sqrt(reach^2 / sigma^2)`` like any other. Directions with ``sigma`` within
        ``8 u sigma_max sqrt(max(d, sum r_i))`` of zero stay null (cached per component).
        """
        if comp not in self._stacked:
            d = self.problem.d
            domain = self.problem.loss.linear_domain()
            nodes = self.segment.indices[self.segment.indptr[comp]:self.segment.indptr[comp + 1]]  # (no O(n) scan)
            if domain is None:
                stacked = np.repeat(np.eye(d)[None], nodes.size, axis=0)
                ranks = np.full(nodes.size, d)
            else:
                stacked, ranks = domain.basis[nodes], domain.rank[nodes]
            keep = np.arange(stacked.shape[2])[None, :] < ranks[:, None]  # (nodes, r): columns in use
            M = np.swapaxes(stacked, 1, 2)[keep].T  # (d, sum r_i)
            if M.shape[1] == 0:
                vecs, sigma = np.eye(d), np.zeros(0)
            else:
                vecs, sigma, _ = np.linalg.svd(M, full_matrices=True)
            vals = np.zeros(d)
            vals[:sigma.size] = sigma ** 2
            top = float(sigma[0]) if sigma.size else 0.0
            floor = 8.0 * np.finfo(float).eps * top * np.sqrt(max(d, M.shape[1]))
            null = np.ones(d, dtype=bool)
            null[:sigma.size] = sigma <= floor
            order = np.argsort(vals)  # ascending, as eigh's
            self._stacked[comp] = (vals[order], vecs[:, order], null[order])
        return self._stacked[comp]

    @property
    def minorant_boxes(self) -> MinorantBoxes:
        """:class:`MinorantBoxes` of this problem's loss (built at the first use)."""
        if self._boxes is None:
            self._boxes = MinorantBoxes(self.problem.loss, self.component, self.n_components, self.dist_unit)
        return self._boxes

    @property
    def last_exact(self) -> bool:
        """Whether every finite part of the latest allowance is a bound (no component priced by the
        candidate's scale)."""
        return not self.last_estimated.any()

    @property
    def sizes(self) -> np.ndarray:
        """Number of nodes of every component."""
        return np.bincount(self.component, minlength=self.n_components)

    def contributions(self, W: np.ndarray, V: np.ndarray, residual: np.ndarray, primal: float,
                      node_scale: np.ndarray) -> np.ndarray:
        """The allowance for the node residuals ``residual`` (n, d) at ``P(W) = primal``, per connected
        component (n_components,; their sum is the allowance ``A``): each depends on its own nodes'
        residuals only, so a certificate can choose node duals component by component.

        ``node_scale`` (n,) is the problem's flow scale at each node; where the loss bounds no
        optimum and no linear program of its minorants does either, residuals above
        ``UNBOUNDED_RTOL * node_scale`` give ``inf``.
        """
        partial = allowance_partials(self.problem.loss, W, V, residual, primal, node_scale, self.component,
                                     self.n_components, self.dist_unit, self.power)
        if self._tree is not None and partial["any"]:  # the budget along a spanning tree, where it is smaller
            partial["within"] = np.minimum(partial["within"], self._tree.allowance(residual, primal))
        return self.combine(partial, primal, per_component=True)

    def by_nodes(self, per_component: np.ndarray, estimated: np.ndarray, W, V, residual, primal: float,
                 node_scale) -> tuple[np.ndarray, np.ndarray]:
        r"""``(per_component, estimated)`` of :meth:`contributions` with each component's allowance replaced by
        the sum of its nodes' own where that is smaller.

        Notes
        -----
        ``|\sum_{i \in C} \langle w^*_i, e_i\rangle| \le \sum_{i \in C} |\langle w^*_i, e_i\rangle|``, and each
        term is bounded as the allowance of a component of one node (no edge: ``delta_i = 0``, ``R_i`` from
        the loss's range bound on ``w^*_i`` or its samples' half-spaces). Through the graph each residual
        is priced at ``delta_i``, the path length ``sum_e unit_e P(W)^power`` with ``unit_e ~ 1 / c_e``: with
        ``lam = 1e-12`` that is ~1e12 ``P(W)``, and a rounding-level residual of 1e-15 cost 7e-4 of a
        certified gap whose other terms were 1e-13 (three Huber nodes, stopped at their time limit).
        Estimated (not rigorous) node allowances are not used. Skipped above :data:`BY_NODES_MAX_ENTRIES`
        (the node spectra are ``n`` ``d x d`` eigendecompositions: 800 MB at 10^6 nodes and ``d = 10``).
        """
        multi = self.sizes > 1
        if not (multi & (per_component > 0)).any() or self.problem.n * self.problem.d ** 2 > BY_NODES_MAX_ENTRIES:
            return per_component, estimated
        if self._single is None:
            self._single = ResidualAllowance(self.problem, np.zeros(self.problem.n_edges, dtype=bool))
        single = self._single
        node_costs = single.contributions(W, V, residual, primal, node_scale)
        node_costs = np.where(single.last_estimated, np.inf, node_costs)[single.component]  # per node
        with np.errstate(invalid="ignore"):
            summed = np.asarray(self.segment @ node_costs).ravel()
        better = multi & (summed < per_component)
        return np.where(better, summed, per_component), estimated & ~better

    def combine(self, partial: dict, primal: float, grams=None, boxes=None, per_component: bool = False):
        """The allowance from :func:`allowance_partials` (of all nodes, or summed over parts;
        ``grams`` as in :meth:`eigen` and ``boxes(comp)`` as :class:`MinorantBoxes`, default from
        this problem's loss): a float, or with ``per_component`` each component's (n_components,).
        :attr:`last_exact` says whether every finite part of it is a bound."""
        out = self._combine(partial, primal, grams, boxes)
        return out if per_component else float(out.sum())

    def _combine(self, partial: dict, primal: float, grams, boxes) -> np.ndarray:
        self.last_estimated = np.zeros(self.n_components, dtype=bool)
        out = np.zeros(self.n_components)
        if not partial["any"]:
            return out
        if not np.isfinite(primal):
            return np.full(self.n_components, np.inf)
        d = self.problem.d
        out += partial["within"]
        sums = partial["sums"]
        sum_norm = np.sqrt(np.einsum("cd,cd->c", sums, sums))
        comps = np.flatnonzero(sum_norm > 0)
        if comps.size == 0:
            return out
        # rounding level of sum_C e: the sizes of the two divergences that define it
        level = 64.0 * d * np.finfo(float).eps * partial["vsum"]
        if grams is None:
            vals, vecs, sizes = self._eig(comps)
        else:
            vals, vecs, sizes = self.eigen(comps, grams)
        coef = np.einsum("kdj,kd->kj", vecs, sums[comps])  # sum_C e in the eigenbasis of G_C
        cut = 64.0 * d * np.finfo(float).eps * np.maximum(sizes, 1) * np.maximum(vals[:, -1], 1.0)
        null = vals <= cut[:, None]
        ambiguous = np.flatnonzero((null & (coef != 0)).any(axis=1)) if grams is None else []
        if len(ambiguous):
            # G_C's eigenvalues below the cut may be tiny but real (nodes' domains a hair apart),
            # and w*_a huge along them: take those components' spectrum from the bases themselves
            # (vals, vecs: fresh arrays from eigen's np.stack; null from the comparison above)
            for k in ambiguous:
                vals[k], vecs[k], null[k] = self._stacked_spectrum(int(comps[k]))
            coef = np.einsum("kdj,kd->kj", vecs, sums[comps])
        # sum_C e lies in range(G_C) exactly; along numerically null directions only rounding
        outside = (np.abs(np.where(null, coef, 0.0)) > level[comps][:, None]).any(axis=1)
        # |<w*_a, sum e>| <= sqrt(w^T G w) sqrt(coef^T G^+ coef) (Cauchy-Schwarz in G's metric)
        quad = np.where(null, 0.0, coef ** 2 / np.where(null, 1.0, vals)).sum(axis=1)
        with np.errstate(invalid="ignore"):
            radius = np.where(quad > 0, np.sqrt(partial["reach_sq"][comps] * quad), 0.0) / sum_norm[comps]
        radius[outside] = np.inf
        # the loss bounds no optimum by itself (logistic, hinge): bound w*_a by the linear program of
        # the loss's minorants where it is finite (the pooled data not separable: a bound, whatever
        # the residual's size); else use twice the candidate's scale (not rigorous: last_exact says
        # so), and only for a residual at the level float64 leaves (relative to the problem's flow
        # scale or the loss's data, allowance_partials; a larger one is left infinite, so the
        # certificate moves the flow instead, anchored_flow)
        growth = max(primal, primal ** self.power) if primal > 0 else 0.0
        pending = np.flatnonzero(~np.isfinite(radius) & ~outside)
        if boxes is None:  # (one node per component in by_nodes: no Python step per component)
            found = {int(pending[k]): box for k, box in self.minorant_boxes.lookup(comps[pending]).items()}
        else:
            found = {int(k): box for k in pending if (box := boxes(int(comps[k]))) is not None}
        for k, box in found.items():
            along = np.abs(sums[comps[k]])
            free = ~np.isfinite(box)  # (a feature no sample has, or separable data: all)
            if not (along[free] > 0).any():  # else no bound on w*_a that way: no finite dual with this residual
                radius[k] = growth * float(along[~free] @ box[~free]) / sum_norm[comps[k]]
        unboxed = np.setdiff1d(pending, np.fromiter(found, dtype=np.int64, count=len(found)))
        unboxed = unboxed[~partial["over"][comps[unboxed]]]
        self.last_estimated[comps[unboxed]] = True
        radius[unboxed] = 2.0 * (partial["wmax"][comps[unboxed]] + partial["dmax"][comps[unboxed]])
        # lam = 0: no node of the component has data, and sum_C e = 0 exactly (a divergence)
        out[comps] += radius * sum_norm[comps]
        return out


def _budget_penalty(penalty, power: float) -> bool:
    """Whether ``penalty`` is positively homogeneous of degree ``1 / power`` (a norm, ``power = 1``; a quadratic,
    ``1/2``), so that ``(||z|| / unit)^{1/power} <= c phi(z)`` for every ``z`` and the edges share one budget
    ``P(W)`` (with a nonnegative loss): :func:`_budget_reach` and :class:`_SubtreeSums`."""
    return (provides(penalty, "norm") and power == 1.0) or (provides(penalty, "quadratic") and power == 0.5)


def _budget_reach(penalty, power: float, nonnegative: bool, edge_component, unit,
                  n_components: int) -> np.ndarray | None:
    r"""Per component ``C``, a bound on ``||w^*_i - w^*_a|| / P(W)^{power}`` for every node ``i`` of ``C`` from the
    penalty's budget (:class:`_SubtreeSums`' qualification: a norm or quadratic penalty, a ``nonnegative`` loss), or
    None where it does not qualify. ``edge_component`` and ``unit``: the component and the unit of every edge.

    Notes
    -----
    With ``x_e = ||z^*_e|| / unit_e``, ``\sum_e x_e^{1/power} \le \sum_e c_e \phi(z^*_e) \le P^* \le P(W)``, so along
    any path ``\sum_e ||z^*_e|| = \sum_e unit_e x_e \le \|unit\|_q P(W)^{power}`` (Hoelder, ``q = 1 / (1 - power)``):
    the largest unit of the component's edges for a norm, the root of their squares' sum for a quadratic
    penalty. The shortest path's sum of units grants ``P(W)`` to every edge instead: on a chain of 20,000 nodes it
    reached 20,000 units where this is one, and the minorant boxes of a logistic chain, whose half-spaces are
    loosened by it, were unbounded (no finite certificate for any residual).
    """
    if not (nonnegative and _budget_penalty(penalty, power)):
        return None
    cap = np.zeros(n_components)
    if power == 1.0:
        np.maximum.at(cap, edge_component, unit)
        return cap * (1.0 + 1e-12)
    np.add.at(cap, edge_component, unit * unit)
    return np.sqrt(cap) * (1.0 + 1e-12)


class _SubtreeSums:
    r"""The allowance's first term over the shortest-path tree of each component, with the penalty's budget.

    Notes
    -----
    With the tree's edges ``k`` (child ``i_k``, parent ``p_k``), ``z^*_k = w^*_{i_k} - w^*_{p_k}`` and
    ``S_k = \sum_{i \in subtree(i_k)} e_i``,

    .. math:: \sum_{i \in C} \langle w^*_i - w^*_a, e_i\rangle = \sum_k \langle z^*_k, S_k\rangle
              \le \sum_k \|z^*_k\| \|S_k\|.

    A penalty positively homogeneous of degree ``1 / power`` (trait ``norm``: ``power = 1``;
    ``quadratic``: ``1/2``) turns its per-edge bound ``c phi(z) <= V => ||z|| <= unit V^power`` into
    ``(||z|| / unit)^{1/power} <= c phi(z)`` for every ``z``, and the tree's edges share one budget:
    ``\sum_k c_k \phi(z^*_k) \le P^* \le P(W)`` for a nonnegative loss. By Hoelder's inequality

    .. math:: \sum_k \|z^*_k\| \|S_k\| \le P(W)^{power} \|(unit_k \|S_k\|)_k\|_{q},
              \quad q = 1 / (1 - power)

    (the largest term for a norm, ``q = inf``), where the path bound ``\sum_i \delta_i \|e_i\|`` grants ``P(W)``
    to every edge of every path: on a chain of 1,000 hinge nodes (``lam = 0.05``) Clarabel's residuals of
    ~1e-10 cost 3.7e-4 that way (a relative gap of 2.3e-6) and ~1e-8 of it here. ``S`` is one sparse
    triangular solve (children before parents: the nodes by decreasing distance from the root, checked),
    bounded above by ``2 n_C u sum_C ||e_i||`` for its rounding.
    """

    def __init__(self, order, matrix, unit, nonroot, power, component, segment):
        self.order, self.matrix, self.unit, self.nonroot, self.power = order, matrix, unit, nonroot, power
        self.component, self.segment = component, segment
        self.sizes = np.bincount(component, minlength=segment.shape[0]).astype(float)

    @classmethod
    def build(cls, problem: GTVProblem, graph, parent, dist, component, segment, power):
        """The tree of ``parent`` (dijkstra's predecessors on ``graph``, the edges' units, ``< 0`` at the roots),
        or None where the penalty or the loss does not qualify or the distances do not order children before
        parents. ``component`` and ``segment`` as in :class:`ResidualAllowance`."""
        n = problem.n
        if not _budget_penalty(problem.penalty, power):
            return None
        loss = getattr(problem, "loss", None)  # (the Dask backend's graph view has none: it combines partials)
        if loss is None or not provides(loss, "nonnegative") or graph.nnz == 0:
            return None
        nonroot = parent >= 0
        child = np.flatnonzero(nonroot)
        unit = np.zeros(n)  # each tree edge's unit (a graph has no parallel edges)
        unit[child] = np.asarray((graph + graph.T)[child, parent[child]]).ravel()
        order = np.argsort(-dist, kind="stable")  # children before parents, unless distances tie
        position = np.empty(n, dtype=np.int64)
        position[order] = np.arange(n)
        if not (position[parent[child]] > position[child]).all():
            return None
        # (I - A) S = e in that order: S_parent = e_parent + sum of its children's S (lower triangular)
        matrix = (sp.eye(n, format="csr")
                  - sp.csr_matrix((np.ones(child.size), (position[parent[child]], position[child])), shape=(n, n)))
        return cls(order, matrix.tocsr(), unit, nonroot, power, component, segment)

    def allowance(self, residual, primal: float) -> np.ndarray:
        """The bound per component for the node residuals ``residual`` (n, d) at ``P(W) = primal``."""
        if not np.isfinite(primal):
            return np.full(self.sizes.size, np.inf)
        sums = np.empty_like(residual)
        sums[self.order] = spla.spsolve_triangular(self.matrix, residual[self.order], lower=True, unit_diagonal=True)
        enorm = np.sqrt(np.einsum("nd,nd->n", residual, residual))
        rounding = (2.0 * np.finfo(float).eps) * self.sizes * np.asarray(self.segment @ enorm).ravel()  # gamma_{n_C}
        norms = np.sqrt(np.einsum("nd,nd->n", sums, sums)) + rounding[self.component]
        terms = np.where(self.nonroot, self.unit * norms, 0.0)
        if self.power == 1.0:  # q = inf
            out = np.zeros(self.sizes.size)
            np.maximum.at(out, self.component, terms)
        else:  # q = 2
            out = np.sqrt(np.asarray(self.segment @ (terms * terms)).ravel())
        return max(primal, 0.0) ** self.power * out * (1.0 + 1e-12)


def allowance_partials(loss, W, V, residual, primal: float, node_scale, component, n_components: int,
                       dist_unit, power: float) -> dict:
    """The per-component sums and maxima :meth:`ResidualAllowance.combine` needs, over the nodes of
    ``loss`` (all nodes, or one part's: sums and maxima over parts combine them).

    ``component`` and ``dist_unit`` are those nodes' component numbers and unit distances
    from their component's root (:class:`ResidualAllowance`).
    """
    enorm = np.sqrt(np.einsum("nd,nd->n", residual, residual))
    delta = max(primal, 0.0) ** power * dist_unit if np.isfinite(primal) else np.full(enorm.size, np.inf)
    n = enorm.size
    segment = sp.csr_matrix((np.ones(n), (component, np.arange(n))), shape=(n_components, n))
    beta = loss.range_bound(primal) if np.isfinite(primal) else np.full(n, np.inf)
    domain = loss.linear_domain()
    has_range = np.ones(n, dtype=bool) if domain is None else domain.rank > 0
    reach = np.where(has_range, beta + delta, 0.0)
    with np.errstate(invalid="ignore"):
        reach_sq = np.asarray(segment @ (reach * reach)).ravel()
    # rounding level: of the flow (its scale at the node) or of the loss's own sums over samples (a node
    # with no flow, lam = 0, still has those: its data's scale)
    rounding_scale = np.maximum(node_scale, math.sqrt(loss.d) * loss.data_magnitude)
    level = UNBOUNDED_RTOL * rounding_scale
    if provides(loss, "residual_rounding"):  # (the logistic loss: only its sums' rounding is free)
        level = np.minimum(level, loss.residual_rounding(V))
    over = np.zeros(n_components, dtype=bool)
    over[component[enorm > level]] = True
    wmax = np.zeros(n_components)
    dmax = np.zeros(n_components)
    np.maximum.at(wmax, component, np.sqrt(np.einsum("nd,nd->n", W, W)))
    np.maximum.at(dmax, component, delta)
    positive = enorm > 0
    within = np.zeros(n)
    within[positive] = enorm[positive] * delta[positive]  # (delta may be inf where there is no residual)
    return {"any": bool(positive.any()), "within": segment @ within,  # per component
            "sums": segment @ residual, "reach_sq": reach_sq,
            "vsum": np.asarray(segment @ (np.sqrt(np.einsum("nd,nd->n", V, V)) + enorm)).ravel(),
            "over": over, "wmax": wmax, "dmax": dmax}


def merge_allowance_partials(parts: list[dict]) -> dict:
    """Sums (and maxima, logical or) of :func:`allowance_partials` over parts."""
    out = {"any": any(p["any"] for p in parts)}
    for key in ("within", "sums", "reach_sq", "vsum"):
        out[key] = sum(p[key] for p in parts)
    out["over"] = np.logical_or.reduce([p["over"] for p in parts])
    out["wmax"] = np.maximum.reduce([p["wmax"] for p in parts])
    out["dmax"] = np.maximum.reduce([p["dmax"] for p in parts])
    return out


def component_grams(loss, component, comps: np.ndarray) -> np.ndarray:
    """``sum_{i in C} B_i B_i^T`` (k, d, d) over the nodes of ``loss`` in each component of ``comps``."""
    d = loss.d
    domain = loss.linear_domain()
    nodes = np.flatnonzero(np.isin(component, comps))
    local = np.searchsorted(comps, component[nodes])
    gram = np.zeros((comps.size, d, d))
    if domain is None:
        np.add.at(gram, local, np.eye(d))
    else:
        chunk = max(1, int(2 ** 25 // max(d * d, 1)))
        for start in range(0, nodes.size, chunk):  # bounded memory, not a per-node loop
            B = domain.basis[nodes[start:start + chunk]]
            np.add.at(gram, local[start:start + chunk], np.matmul(B, np.swapaxes(B, 1, 2)))
    return gram


class FlowProjector:
    """Restores dual feasibility of flow iterates; reusable across the check-points of a run.

    0. Before anything, every ``u_e`` is projected onto its capacity ball, so no scale below
       depends on the magnitude of a flow a caller supplies.
    1. Correction onto the linear constraints of the loss conjugates,
       ``(I - Q_i Q_i^T)(D^T U')_i = 0`` at the constrained nodes: the correction of least
       capacity-weighted norm ``sum_e ||Delta_e||^2 / c_e`` (see ``_ConservationOperator``), by
       conjugate gradients in node space. Across a run the first solve starts from the previous
       ``y`` (the flows change little between check-points), so the work is amortized. On edges
       whose flow is at capacity the correction is restricted to the face of the ball
       (:meth:`~gtvcvx.penalties.Penalty.face_tangent`, :data:`CORRECT_ON_FACES`): near the
       optimum ``u_e`` is aligned with ``z_e``, and a correction across the face costs the edge
       term ``c_e phi(z_e) - <z_e, u_e>`` to first order, one along it to second order (the bank's
       florentine / diabetes / nLasso row: certified 3e-6 -> 8e-10 at a true gap of 7e-10). The
       unrestricted correction serves where the restricted one is unsolvable or fits the
       capacities worse (:data:`FACE_SCALE_TOL`); in a run the restriction starts near ``tol``
       (:data:`FACES_WITHIN`: its CG steps cost more).
    2. If a flow touching a constrained node now exceeds its capacity, the flows are projected
       onto the capacity balls and step 1 repeats: alternating projections between two convex
       sets in the same (capacity-weighted) metric, which approach a flow in both. At most
       ``max_rounds`` rounds; they stop once the scale of step 3 is within ``ROUND_SCALE_TOL``
       of 1 or has not improved for ``STALLED_ROUNDS`` rounds (the best round's flow is kept).
    3. Into the capacity balls: edges with no constrained end point are projected edge by
       edge (nothing else depends on their flow); the edges touching a constrained node are
       scaled by one common ``alpha = min(1, min_e c_e / ||U'_e||_*)``, which keeps the
       homogeneous linear constraints at those nodes exactly satisfied.

    The CG target is ``0.1 * DOMAIN_RTOL`` times the flow scale of the problem's data (``UNBOUNDED_TARGET_RTOL``
    where the loss bounds no optimum). Whatever
    violation is left (CG stopped by ``max_iter`` or a deadline, rounding) is not trusted: the
    certificate pays for it with :class:`ResidualAllowance`, so a short projection gives a
    larger gap, never a wrong one.

    Edges whose capacity is at most ``negligible_capacity`` (default :data:`NEGLIGIBLE_CAPACITY`)
    times the largest carry no flow (:attr:`support`); :meth:`uncut` is the same projector with
    every edge.

    Notes
    -----
    Measured on a Gaussian 5-NN graph of the digits images (1,797 nodes, one sample per node,
    d = 5, capacities 1e-16..0.024) at Clarabel's solution: the minimum-norm correction gave
    ``alpha = 3e-5`` and a gap equal to ``P`` itself (1e-4); the capacity-weighted one
    ``alpha = 0.78`` (gap 2e-5), and ten alternating rounds ``alpha = 1 - 6e-6`` (gap 2.5e-9).

    References
    ----------
    .. [1] H. H. Bauschke and J. M. Borwein, "On projection algorithms for solving convex
       feasibility problems", SIAM Review 38(3), 1996.
    """

    def __init__(self, problem: GTVProblem, *, max_iter: int | None = None, warm: bool = True,
                 keep_buffers: bool = False, compiled_terms: bool | None = None,
                 negligible_capacity: float | None = None):
        self.problem = problem
        # (None: NEGLIGIBLE_CAPACITY, read at construction)
        negligible_capacity = NEGLIGIBLE_CAPACITY if negligible_capacity is None else float(negligible_capacity)
        # the |E| x d arrays of a certificate in buffers kept across calls (the flow of pass k
        # in buffer k, valid until the next call with that pass): a fresh 373 MB array costs
        # ~0.7 s of page faults at 6.7e6 edges, d = 7, more than the rest of the certificate
        self.keep_buffers = bool(keep_buffers)
        self._buffers = {}
        nodes = constrained_nodes(problem)
        caps = np.asarray(problem.capacities, dtype=float)
        weights = None  # equal capacities (or no capacities): the minimum-norm correction
        self.support = None  # edges the flow may use (None: all)
        if problem.penalty.is_norm and caps.size and caps.max() > caps.min():
            weights = caps / caps.max()
            negligible = weights <= negligible_capacity
            if negligible.any():
                self.support = ~negligible
                weights = np.where(negligible, 0.0, weights)
        self.edge_weights = weights  # of the corrections (None: equal)
        self.operator = (_ConservationOperator(problem, nodes, weights)
                         if nodes.size and problem.n_edges else None)
        # correct along the faces of the capacity balls the flow lies on (step 1)
        self.on_faces = CORRECT_ON_FACES
        self.last_rel_gap = np.inf  # of the latest certificate (certify_pair)
        self.max_rounds = MAX_ROUNDS
        # solve the correction to the rounding level (a factorization) rather than to the CG target;
        # certify_pair sets it where the residual's price dominates a gap
        self.exact = False
        # the certificate's edge terms compiled at any size (True), or from _jit.MIN_ENTRIES (None)
        self.compiled_terms = compiled_terms
        if nodes.size:
            constrained = np.zeros(problem.n, dtype=bool)
            constrained[nodes] = True
            edges = problem.graph.edges  # an edge is coupled when it touches a constrained node
            self.coupled_edges = constrained[edges[:, 0]] | constrained[edges[:, 1]]  # (.any(axis=1): 5x slower)
        else:
            self.coupled_edges = np.zeros(problem.n_edges, dtype=bool)
        self.max_iter = max_iter or max(1000, 10 * int(np.sqrt(max(problem.n, 1))))
        self.warm = warm
        self._uncut = None  # the same projector with every edge in the support (see uncut)
        self.multipliers = {}  # round -> CG solution at the latest call
        self._allowance = None
        self._target_rtol = None
        self.anchored_factorable = None  # whether anchored_flow's system factors sparsely (decided once)
        self.anchored_direct_first = None  # ... and is factored without conjugate gradients first (long paths)

    def uncut(self) -> "FlowProjector":
        """This projector without the cut of negligible capacities (every edge may carry flow),
        built on first use: the certificate's second opinion where the cut edges' terms are most of
        a gap (:func:`_certify`), e.g. one edge heavier than the rest by more than 1 /
        :data:`NEGLIGIBLE_CAPACITY`, which makes every other edge "negligible"."""
        if self._uncut is None:
            self._uncut = FlowProjector(self.problem, max_iter=self.max_iter, warm=self.warm,
                                        compiled_terms=self.compiled_terms, negligible_capacity=0.0)
        return self._uncut

    @property
    def node_bound(self) -> np.ndarray:
        """The largest net flow a feasible flow can carry at each node: problem data, never the
        iterate (:attr:`~gtvcvx.problem.GTVProblem.node_flow_bound`, computed on first use:
        0.44 s at 10^7 edges, which certificates read in place never need)."""
        return self.problem.node_flow_bound

    def flow_scale(self, U) -> float:
        """:attr:`FeasibleFlow.scale` of a flow ``U`` inside the capacity balls: the largest node
        bound of the problem where it is finite, else the flow's own scale."""
        bound = float(self.node_bound.max(initial=0.0))
        return bound if np.isfinite(bound) else self.problem.flow_scale(U)

    def _correct(self, U, B, round_: int, faces, target: float, deadline):
        """Step 1 on ``U`` (``B = A U``): ``(U - Omega T A^T Y, CG iterations, residual)`` with the
        correction restricted by ``faces`` (``Penalty.face_tangent``; None: unrestricted). In
        :attr:`exact` mode a restricted correction is finished by an unrestricted exact one (of
        the residual left at ``target``: it moves the flows by about that much)."""
        A = self.operator
        A.tangent = faces
        try:
            # every round starts from the same round's multipliers at the previous check-point
            key = (round_, faces is not None)
            Y, iterations, residual = A.solve(B, self.multipliers.get(key) if self.warm else None, target,
                                              self.max_iter, deadline, exact=self.exact)
            if self.warm:
                self.multipliers[key] = Y
            corrected = U - A.apply_transpose(Y)
        finally:
            A.tangent = None
        if faces is not None and self.exact and residual <= target:
            Y, more, residual = A.solve(A.apply(corrected), None, target, self.max_iter, deadline, exact=True)
            corrected -= A.apply_transpose(Y)
            iterations += more
        return corrected, iterations, residual

    def _common_scale(self, U, coupled_only: bool = True) -> tuple[float, np.ndarray]:
        """``(alpha, usage)``: the scale of step 3 for the coupled edges (``coupled_only=False``:
        for all edges) and every edge's dual norm."""
        usage = self.problem.penalty._dual_norms(U)
        over = usage > self.problem.capacities
        if coupled_only:
            over &= self.coupled_edges
        with np.errstate(divide="ignore", invalid="ignore"):
            alpha = float(np.min(np.where(over, self.problem.capacities / usage, 1.0))) if over.any() else 1.0
        return alpha, usage

    def buffer(self, name, shape) -> np.ndarray | None:
        """A float64 array kept under ``name`` (None without ``keep_buffers``: allocate anew)."""
        if not self.keep_buffers:
            return None
        kept = self._buffers.get(name)
        if kept is None or kept.shape != tuple(shape):
            kept = self._buffers[name] = np.empty(shape)
        return kept

    def adopt(self, array: np.ndarray, spare: np.ndarray | None = None) -> None:
        """Give up ``array`` if it is a kept buffer (the caller keeps it: no copy), its name taking
        ``spare`` (an array the caller no longer needs, e.g. the previous best certificate's flow)
        or, without one of its shape, a new array at its next use."""
        for name, kept in self._buffers.items():
            if kept is array:
                if spare is not None and spare.shape == array.shape and spare.dtype == array.dtype \
                        and spare.flags.c_contiguous and spare.flags.writeable and spare is not array:
                    self._buffers[name] = spare
                else:
                    del self._buffers[name]
                return

    @property
    def target_rtol(self) -> float:
        """The corrections' residual target relative to the flow scale (computed on first use:
        a loss that bounds no optimum cannot pay for a residual, so project to rounding level)."""
        if self._target_rtol is None:
            self._target_rtol = 0.1 * DOMAIN_RTOL if bounds_optimum(self.problem.loss) else UNBOUNDED_TARGET_RTOL
        return self._target_rtol

    @property
    def allowance(self) -> ResidualAllowance:
        """The residual allowance of this problem (built on first use)."""
        if self._allowance is None:
            self._allowance = ResidualAllowance(self.problem, self.support)
        return self._allowance

    def __call__(self, U, *, deadline: float | None = None, scale_tol: float = 0.0, slot: int = 0,
                 faces: bool = True) -> FeasibleFlow:
        """A feasible flow near ``U``; rounds of step 2 stop once ``1 - alpha <= max(scale_tol,
        ROUND_SCALE_TOL)`` (``scale_tol >= 1``: step 1 once, no rounds). With ``keep_buffers`` the
        flow starts in kept buffer ``slot`` (overwritten by the next call with that slot).
        ``faces=False`` skips the restriction to faces for this call."""
        problem = self.problem
        scale_tol = max(float(scale_tol), ROUND_SCALE_TOL)
        # into the capacity balls first: a caller's huge entry cannot set any scale below
        U = np.asarray(U, dtype=float)
        # (a new array or the kept buffer: the caller's U is not modified)
        U = problem.penalty.project_conjugate_domain(U, problem.capacities, out=self.buffer(("flow", slot), U.shape))
        if self.support is not None:
            U[~self.support] = 0.0  # always feasible; the residual allowance then ignores these edges
        out = FeasibleFlow(U=U, scale=self.flow_scale(U))
        if problem.n_edges == 0:
            return out
        A = self.operator
        caps = problem.capacities
        coupled = self.coupled_edges
        alpha, best, best_round, previous = 1.0, None, 0, None
        use_faces = self.on_faces and faces
        for round_ in range(self.max_rounds if A is not None else 1):
            if A is not None:
                B = A.apply(out.U)
                norm_b = float(np.linalg.norm(B))
                if round_ == 0:  # ||N D^T U||, without the row scaling
                    out.conservation_residual = (float(np.linalg.norm(B / A.row_scale))
                                                 / max(out.scale, np.finfo(float).tiny))
                if norm_b > 0:
                    target = self.target_rtol * out.scale * float(A.row_scale.min())
                    faces = problem.penalty.face_tangent(out.U, caps) if use_faces else None
                    corrected, iterations, residual = self._correct(out.U, B, round_, faces, target, deadline)
                    if faces is not None:
                        # restricted to faces, the correction may be unsolvable (e.g. too few free
                        # directions on a tree) or nearly so (huge): then the unrestricted one, if
                        # its common capacity scale is better, for this and the later rounds
                        face_alpha = self._common_scale(corrected)[0]
                        if residual > target:
                            # unsolved within CG_BEFORE_FACTOR steps: ill-conditioned by the
                            # capacities (digits k-NN graphs: 1e-16..0.024), which do not change
                            # during a run, so the projector stops trying
                            self.on_faces = False
                        if residual > target or (round_ == 0 and face_alpha < 1.0 - FACE_SCALE_TOL):
                            plain, more, _ = self._correct(out.U, B, round_, None, target, deadline)
                            iterations += more
                            if residual > target or self._common_scale(plain)[0] > face_alpha:
                                corrected, use_faces = plain, False
                    # over-relaxed alternating projections: from the previous round's flow (in the
                    # constraint set, as is the correction), a step RELAXATION times as long
                    out.U = corrected if round_ == 0 else previous + RELAXATION * (corrected - previous)
                    out.projection_iterations += iterations
            if not problem.penalty.is_norm:
                break
            alpha, usage = self._common_scale(out.U)
            out.rounds = round_ + 1
            if best is None or alpha > best[1]:
                best, best_round = (out.U, alpha, usage), round_
            elif round_ - best_round >= STALLED_ROUNDS:  # no progress lately: keep the best round's flow
                out.U, alpha, usage = best
                break
            if (alpha >= 1.0 - scale_tol or round_ + 1 == self.max_rounds
                    or (deadline is not None and time.perf_counter() > deadline)):
                out.U, alpha, usage = best
                break
            # alternating projections (capacity balls, then the constraints again): they converge
            # to a flow in both sets, so the common scale below approaches 1
            previous = out.U
            out.U = problem.penalty.project_conjugate_domain(out.U, caps)
        if problem.penalty.is_norm:  # (usage: the dual norms of the kept round's flow)
            over = usage > caps
            if (over & coupled).any():
                out.capacity_scale = alpha
                out.U[coupled] *= alpha
            free = over & ~coupled
            if free.any():
                out.U[free] = problem.penalty._prox_conjugate(out.U[free], 1.0, caps[free])
        return out


_ROUNDING_FACTOR = 2.0 * np.finfo(float).eps

#: Rounds of alternating projections (:class:`FlowProjector`, step 2) at most, and the distance
#: of the common capacity scale from 1 at which they stop (its cost in the gap is about
#: ``(1 - alpha)`` times the penalty term).
MAX_ROUNDS = 30
#: Restrict the conservation correction to the faces of the capacity balls the flow lies on
#: (:class:`FlowProjector`, step 1; False: the unrestricted correction everywhere).
CORRECT_ON_FACES = True
#: ... unless the common capacity scale of the restricted correction is below ``1 - FACE_SCALE_TOL``
#: and the unrestricted one's is higher (then the unrestricted one serves the call).
FACE_SCALE_TOL = 1e-3
#: ... and, in a run (``certify_pair(tol=...)`` with a projector), from the check-point after one
#: whose relative gap was within this factor of ``tol``. Measured on Table I (d = 100, 5,009
#: edges, 1e-6): with faces at every check-point certified at iteration 233 instead of 258 but
#: spent 1.08 instead of 0.43 s in certificates (solve 1.72 -> 1.98 s).
FACES_WITHIN = 1e3
ROUND_SCALE_TOL = 1e-9
STALLED_ROUNDS = 3
#: Edges whose capacity is at most this fraction of the largest carry no flow in the certificate
#: (zero is always feasible; the dual bound gives up at most ``sum_e c_e ||z_e||`` over them).
#: Kept, their flows would have to conserve to float64 rounding, which the residual allowance
#: prices by path lengths ~ ``1/c_e``: the two costs balance near ``sqrt(eps)``. Measured on
#: Gaussian 5-NN graphs (150 nodes in 64-D, capacities down to 1e-71; digits, 1,797 nodes, down to
#: 6e-15 relative) at Clarabel's answers: 1e-12 left allowances of 2e-5..0.6 (uncertified) on the
#: first; 1e-10 / 1e-8 / 1e-6 certified both, with digits' gap 2e-9 / 1.7e-8 / 2.6e-6.
NEGLIGIBLE_CAPACITY = 1e-10
#: Over-relaxation of the alternating rounds (1 = plain alternating projections; < 2 converges):
#: on the bank's grid / diabetes rows 1.5 halved the rounds' CG iterations against 1.0, and 1.6-1.9
#: made the florentine row certify later.
RELAXATION = 1.5
#: The projection's conjugate gradients with unequal capacities: after this many iterations
#: without reaching the target, systems of at most ``FACTOR_MAX_UNKNOWNS`` unknowns (constrained
#: nodes x d) are factorized instead, once per projector (SuperLU, minimum degree; digits 10-NN
#: graph: 8,985 unknowns 0.4-1.2 s and 55-80 MB, 17,970 unknowns (d = 10) 2.4-4.6 s and
#: 240-370 MB). ``FACTOR_SHIFT`` regularizes the factorization (refinement removes it).
CG_BEFORE_FACTOR = 300
FACTOR_MAX_UNKNOWNS = 20_000
#: ... and at most this many estimated entries in the factors (~12 bytes each): the GTV paper's
#: Table I (200 nodes, ~5,000 edges, d = 100, 20,000 unknowns) is a dense block system of
#: ~4e8 entries, which ran the report out of memory. (The estimate was 1.4-2x below SuperLU's
#: actual count on the digits graphs: 1.4M / 3.3M estimated, 3.0M / 4.6M actual.)
FACTOR_MAX_ENTRIES = 1e7
FACTOR_SHIFT = 1e-12

#: Where the loss bounds no optimum (logistic), the largest conservation residual accepted, relative to
#: the problem's flow scale at the node or (a node without flow, lam = 0) the loss's data scale,
#: ``sqrt(d) data_magnitude`` (the projection is run to a tenth of it).
UNBOUNDED_RTOL = 1e-11
#: ... and the projection's target there: the loss's own conjugate (e.g. ``Logistic.certify_nodes``)
#: accepts a residual only at the rounding level of its sums, ~64 (m + 8) u relative to the data, so
#: the projection goes below it (measured on the logistic bank rows: at 1e-12 the flow built from
#: an optimal W left residuals of 6e-13 and the certificate fell back to the zero flow, rel. gap
#: 0.91; at 1e-14, 4-14 CG steps, rel. gap 2e-12 with l1 and 9e-9 with l2; at 1e-15 CG stalls).
UNBOUNDED_TARGET_RTOL = 1e-14


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
                 deadline: float | None = None, tol: float | None = None) -> Certificate:
    """Certificate for a primal candidate ``W`` and a flow iterate ``U``.

    The flow is made feasible (:class:`FlowProjector`), then the gap is the sum of node terms
    ``L_i(w_i) + L_i^*(v_i) - <w_i, v_i>`` with ``v = -D^T U`` and edge terms
    ``c_e phi(z_e) + c_e phi^*(u_e / c_e) - <z_e, u_e>`` with ``z = D W``; each term is
    computed in a cancellation-free form where the loss or penalty has one. The losses evaluate
    their conjugates at a point ``v'`` of their domain; the residual ``v - v'`` is paid for by
    :class:`ResidualAllowance` (an a-priori bound, not a tolerance), so
    ``gap >= P(W) - P*`` holds for any ``U``, including a caller's.

    ``tol`` (a relative gap the caller is after) limits the projector's alternating rounds to
    check-points where they can bring the gap below it; without it they run whenever the common
    capacity scale costs most of the gap.
    """
    W = problem.check_W(W)
    U = problem.check_U(U)
    tol = check_gap_tolerance(tol, "tol", allow_none=True)
    projector = projector or FlowProjector(problem, warm=False)
    cert = _certify(problem, W, U, projector, deadline, tol)
    projector.last_rel_gap = cert.rel_gap
    return cert


def certify_iterate(problem: GTVProblem, W, U, divergence_of_U, projector: FlowProjector, *,
                    deadline: float | None = None, tol: float | None = None) -> Certificate:
    """The fast core's certificate of its own iterate: :func:`certify_pair` for a flow ``U`` that
    the loop's sweep projected onto the capacity balls, with ``divergence_of_U = D^T U`` from that
    sweep. Not for callers' flows (a wrong divergence would give a wrong gap).

    Where the projector would only project ``U`` again (no constrained nodes, so no conservation
    correction, and no negligible capacities), the certificate reads ``U`` and its divergence in
    place: no projected copy, no projection or divergence pass; that first pass then goes through
    what :func:`certify_pair` does after its own (an anchored or zero-flow certificate where the
    first is not finite or its residual allowance dominates). Feasibility is still checked edge by
    edge (:func:`~gtvcvx.solvers._edge_kernels.edge_norm_terms`: a row outside its ball beyond
    :data:`~gtvcvx.penalties.CAPACITY_RTOL` has an infinite term), and a flow with such a row is
    certified by :func:`certify_pair` (projected). ``U`` is not modified, and the returned
    certificate's ``U`` may be ``U`` itself (the caller copies what it keeps).

    Notes
    -----
    Measured at 10^7 SBM edges, d = 10: a certificate's projected copy of the flow and the best
    certificate's kept flow were 1.5 of the 6.6 GiB a solve allocated, and its projection and
    divergence passes ~0.5 s of ~2.7 s per certificate (more at the first, which faulted in fresh
    buffers).
    """
    if projector.operator is not None or projector.support is not None or problem.n_edges == 0:
        return certify_pair(problem, W, U, projector=projector, deadline=deadline, tol=tol)
    # (nothing below writes to U; a read-only view would be one more type for numba to compile.
    # The flow scale prices a residual (e.g. the rounding of a logistic node's dual): computed if one is.)
    flow = FeasibleFlow(U=U, scale=None, rounds=int(problem.penalty.is_norm))
    first = _certificate_of(problem, W, flow, projector, negative_divergence=-divergence_of_U)
    if np.isinf(first.edge_gaps).any():  # a row outside its ball: the projected flow's certificate
        return certify_pair(problem, W, U, projector=projector, deadline=deadline, tol=tol)
    cert = _certify(problem, W, U, projector, deadline, tol, first=first)
    projector.last_rel_gap = cert.rel_gap
    return cert


def _certify(problem: GTVProblem, W, U, projector: FlowProjector, deadline, tol,
             first: Certificate | None = None) -> Certificate:
    # (``first``: the first pass's certificate when the caller has it, certify_iterate)
    # a step of the correction along faces sweeps |E| x d arrays where the unrestricted one uses
    # the node Laplacian (Table I: ~3 vs ~0.6 ms): in a run, it starts near tol
    near = tol is None or projector.last_rel_gap <= FACES_WITHIN * tol
    cert = first if first is not None else _certify_flow(problem, W, U, projector, deadline, scale_tol=1.0,
                                                         faces=near)
    second = _second_pass(problem, W, cert, projector, tol)
    if second is not None:
        exact, scale_tol = second
        projector.exact |= exact  # kept for the later check-points of a run
        better = _certify_flow(problem, W, U, projector, deadline, scale_tol=scale_tol, slot=1, faces=near)
        if not better.gap >= cert.gap:
            cert = better
    infinite = not np.isfinite(cert.gap)
    unbounded = [cert] if infinite else []  # (infinite certificates, whose flows may hold elsewhere)
    if np.isfinite(cert.primal) and U.any() and (infinite or _residual_bound(cert, tol)):
        # the flow's node duals left a bounded conjugate domain, or a residual the loss cannot
        # avoid costs most of the gap: move them in the loss's own metric instead (anchored_flow)
        anchored = _anchored_certificate(problem, W, U, projector, deadline)
        if anchored is not None and not np.isfinite(anchored.gap):
            unbounded.append(anchored)
        if anchored is not None and anchored.gap < cert.gap:
            cert = anchored
    priced = not bounds_optimum(problem.loss) and cert.gap > abs(cert.primal)
    if (infinite or priced) and np.isfinite(cert.primal) and U.any():
        # the zero flow on the components where those flows' terms are infinite, and theirs elsewhere (and,
        # for a loss that bounds no optimum, where a finite gap exceeds P(W): for a nonnegative loss the zero
        # flow's is at most P(W), and a residual priced through the samples' box can cost more)
        for other in unbounded:
            split = _certificate_of(problem, W, FeasibleFlow(U=other.U, scale=None), projector, split_unbounded=True)
            if split.gap < cert.gap:
                cert = split
        # and the zero flow, which is always dual feasible (phi^*(0) = 0): it bounds P* by
        # sum_i min L_i, which is tight when no edge needs a flow (e.g. a separable hinge
        # problem), where U -> 0 comes from outside dom L^*
        zero = _certify_flow(problem, W, np.zeros_like(U), projector, deadline, slot=2)
        zero.message = zero_flow_message(infinite)
        if zero.gap < cert.gap:
            cert = zero
    if _cut_costs_most(projector, cert, tol):
        # the negligible capacities are relative to the largest: one edge far heavier than the rest
        # makes the others "negligible", and their terms c_e phi(z_e) the whole gap
        uncut = _certify(problem, W, U, projector.uncut(), deadline, tol)
        if uncut.gap < cert.gap:
            cert = uncut
    return cert


def _cut_costs_most(projector: FlowProjector, cert: Certificate, tol: float | None) -> bool:
    """Whether the edges the projector's support leaves out (no flow: their terms are ``c_e phi(z_e)``)
    carry more than half of a finite gap that is not yet within ``tol``."""
    if projector.support is None or not np.isfinite(cert.gap) or (tol is not None and cert.rel_gap <= tol):
        return False
    return float(cert.edge_gaps[~projector.support].sum()) > 0.5 * cert.gap


def _residual_bound(cert: Certificate, tol: float | None) -> bool:
    """Whether the residual allowance is most of a finite gap, and (in a run) the rest of the
    gap is within :data:`FACES_WITHIN` of ``tol``: then a flow without the residual may reach it.
    (Not the previous certificate's gap: that is this allowance's, check-point after check-point.)"""
    allowance = cert.residuals["residual_allowance"]
    if not (np.isfinite(cert.gap) and allowance > 0.5 * cert.gap) or (tol is not None and cert.rel_gap <= tol):
        return False  # (a gap within tol is what the caller asked for: no conjugate gradients for more)
    rest = cert.gap - allowance
    return tol is None or rest <= FACES_WITHIN * tol * (1.0 + 2.0 * abs(cert.primal))


#: Rounds of :func:`anchored_flow`, each from the previous one's flow, while its certificate is infinite
#: (or, for a loss that bounds no optimum, mostly its residual's allowance: a sample whose dual left its
#: box once the flow moved, the next round fixes it at its bound); the last round moves the flow off the
#: faces of the capacity balls too.
ANCHORED_ROUNDS = 3
#: ... and up to this many rounds in all while each round on the faces lowers the gap below ``ANCHORED_PROGRESS``
#: times the best so far. Measured on a hinge chain of 10,000 nodes (4 samples, d = 3, Clarabel at 1e-11): the
#: rounds' relative gaps 7.9e-6, 3.7e-6, 2.2e-6, 1.6e-6, 1.2e-6, 9.8e-7 (the residual's allowance falling
#: about as 1 / rounds: each round fixes at their bounds the samples whose duals the last one moved out of
#: their boxes); with three rounds Clarabel ran again and the answer stayed ``inaccurate`` at 2.2e-6.
ANCHORED_MAX_ROUNDS = 8
ANCHORED_PROGRESS = 0.8


def _anchored_certificate(problem: GTVProblem, W, U, projector: FlowProjector, deadline) -> Certificate | None:
    """The best certificate of up to :data:`ANCHORED_ROUNDS` rounds of :func:`anchored_flow`, and where
    none is finite (or, for a loss that bounds no optimum, the best is mostly its residual's allowance), of
    the flow anchored at ``W`` shifted so that the node duals balance over every component
    (:func:`balancing_shift`); or None."""
    best, start = None, U
    # (a loss that bounds no optimum prices a residual only through its samples' box: go on while that
    # allowance is most of the gap, where it was infinite before the box; for the others one finite round)
    unbounded = not bounds_optimum(problem.loss)
    faces = ANCHORED_ROUNDS > 1
    for round_ in range(max(ANCHORED_ROUNDS, ANCHORED_MAX_ROUNDS) if ANCHORED_ROUNDS > 0 else 0):
        # the last round without the faces: restricted to them the system can be unsolvable (an
        # l1 penalty freezes most coordinates, the hinge most samples: grid / hinge / l1 ran into
        # the CG limit while the unrestricted move certified)
        flow = anchored_flow(problem, W, U if faces else start, projector, deadline, faces=faces)
        if flow is None:
            break
        cert = _certificate_of(problem, W, flow, projector)
        progress = best is None or cert.gap < ANCHORED_PROGRESS * best.gap
        if best is None or cert.gap < best.gap:
            best = cert
        if ((np.isfinite(cert.gap) and not (unbounded and _residual_bound(cert, None)))
                or (deadline is not None and time.perf_counter() > deadline) or not faces):
            break
        # the next round on the faces within the first rounds, and past them while each lowers the gap
        # enough (long paths); else the last one, without them
        faces = round_ + 2 < ANCHORED_ROUNDS or (progress and round_ + 2 < ANCHORED_MAX_ROUNDS)
        U = flow.U
    if ((best is None or not np.isfinite(best.gap) or (unbounded and _residual_bound(best, None)))
            and (deadline is None or time.perf_counter() < deadline)):
        # the node duals at W do not balance over a component, and the imbalance pushed a sample's dual out
        # of its domain (an infinite term, or for a loss that bounds no optimum a residual priced through its
        # samples' box): anchor at W shifted per component so that they balance (balancing_shift)
        shift = balancing_shift(problem, W, projector.allowance)
        flow = None if shift is None else anchored_flow(problem, W, start, projector, deadline, faces=False,
                                                        shift=shift)
        if flow is not None:
            cert = _certificate_of(problem, W, flow, projector)
            if best is None or cert.gap < best.gap:
                best = cert
    if best is not None:
        best.message = "; ".join(filter(None, ("certified with a flow built from the loss's duals at W moved in its "
                                               "own metric (node_anchor)", best.message)))
    return best


#: Newton steps of :func:`balancing_shift`.
BALANCING_MAX_ITER = 50


def balancing_shift(problem: GTVProblem, W, allowance: ResidualAllowance) -> np.ndarray | None:
    r"""A shift ``eta_C`` per connected component (rows (n, d), ``eta_C`` at the component's nodes) with
    ``sum_{i in C} grad L_i(w_i + eta_C) = 0``; None where the loss has no ``node_hessians`` or the
    Newton iteration does not give a finite shift.

    Notes
    -----
    A flow's divergence sums to zero over every component, so node duals ``v_i`` that a flow can
    carry do too. The gradients at ``W`` do only at an optimum; near one a smooth loss's gradients
    at ``w_i + eta_C`` with ``eta_C = argmin_eta sum_{i in C} L_i(w_i + eta)`` do, and they lie in the
    conjugate's domain (for the logistic loss every sample dual ``sigmoid`` stays strictly inside
    ``[0, 1]``). Anchored there, :func:`anchored_flow` has a balanced right-hand side and routes it
    through the edges; without the shift the imbalance must be absorbed by the node metrics, whose
    curvature ``s (1 - s)`` vanishes at saturated samples, and a move of ``|x_k^T lambda| > 1`` takes a
    sample's dual out of ``[0, 1]`` (measured: unstandardized breast-cancer rows, areas ~ 700, two
    per node on the karate club, logistic, lam = 1e-3: Clarabel's flows left duals at -1e-7 where
    the optimum's are 1e-15 .. 1e-110, the anchored flow one at -5e-7; the certificate fell back to
    the zero flow, a gap of P itself). The node terms at ``v_i = grad L_i(w_i + eta_C)`` are the
    Bregman divergences ``L_i(w_i) - L_i(w_i + eta_C) + <eta_C, v_i>``, of order ``|eta_C|^2``, and
    ``eta = 0`` at an optimum. The minimizer exists where the component's pooled data bound it (not
    separable); damped Newton, one ``d x d`` system per component, all components at once.
    """
    loss = problem.loss
    if not provides(loss, "node_hessians"):
        return None
    n, d = problem.n, problem.d
    component, k = allowance.component, allowance.n_components
    segment = allowance.segment
    eta, shifted = np.zeros((k, d)), W  # (shifted = W + eta at the components' nodes)
    value = segment @ loss.node_values(W)
    eye = np.eye(d)
    best_grad = np.full(k, np.inf)  # per component: the gradient's norm at eta
    # a single node carries no flow: its dual is the zero divergence, nothing to balance (and where its own
    # data are separable nothing bounds its shift)
    done, near = allowance.sizes < 2, np.zeros(k, dtype=bool)
    for _ in range(BALANCING_MAX_ITER):
        grad = segment @ loss.gradient(shifted)
        norm = np.sqrt(np.einsum("kd,kd->k", grad, grad))
        # near the minimizer f changes at rounding only: full steps while the gradient still halves
        done |= (norm == 0) | (np.isfinite(best_grad) & ~(norm < 0.5 * best_grad) & near)
        best_grad = np.minimum(best_grad, norm)
        if done.all():
            break
        hess = (segment @ loss.node_hessians(shifted).reshape(n, d * d)).reshape(k, d, d)
        level = np.maximum(np.trace(hess, axis1=1, axis2=2) / d, np.finfo(float).tiny)
        hess = hess + (1e-14 * level)[:, None, None] * eye
        try:
            step = -np.linalg.solve(hess, grad[:, :, None])[:, :, 0]
        except np.linalg.LinAlgError:
            step = -np.matmul(np.linalg.pinv(hess, hermitian=True), grad[:, :, None])[:, :, 0]
        decrement = -np.einsum("kd,kd->k", grad, step)
        near = decrement <= 1e-12 * (1.0 + np.abs(value))  # (the quadratic region: no line search)
        t, accepted = np.ones(k), near | done
        for _ in range(40):  # per-component backtracking (Armijo) farther away
            if accepted.all():
                break
            candidate = eta + t[:, None] * step
            finite = np.isfinite(candidate).all(axis=1)  # (a near-singular Hessian: a step to inf is not taken)
            trial = segment @ loss.node_values(W + np.where(finite[:, None], candidate, eta)[component])
            accepted |= finite & (trial <= value - 0.25 * t * decrement)
            t = np.where(accepted, t, 0.5 * t)
        moved = accepted & ~done & (decrement > 0) & np.isfinite(step).all(axis=1)
        if not moved.any():
            break
        eta = np.where(moved[:, None], eta + t[:, None] * step, eta)
        shifted = W + eta[component]
        if not np.isfinite(shifted).all():
            return None
        value = segment @ loss.node_values(shifted)
    return eta[component]


#: Largest ``n d^2`` (entries of the node Hessians) for which :func:`anchored_flow` runs.
ANCHORED_MAX_ENTRIES = 50_000_000


def anchored_max_iter(n: int) -> int:
    """Conjugate-gradient steps of :func:`anchored_flow`: block-Jacobi preconditioned, the solvable
    systems measured took 90-300 steps (bank and margin-loss rows, 15-225 nodes); an unsolvable one
    (faces that do not match the optimum's) runs into this limit at every check-point of a run."""
    return max(300, 3 * int(math.sqrt(max(n, 1))))


#: Conjugate-gradient target of :func:`anchored_flow`, relative to the node gradients and flows.
#: A node dual near its domain's boundary (a logistic sample with ``sigmoid(mu) ~ 1e-13``) must be
#: reproduced to about that: the equation is solved to rounding level.
ANCHORED_RTOL = 1e-15


def anchored_flow(problem: GTVProblem, W, U, projector: FlowProjector,
                  deadline: float | None = None, faces: bool = True, shift=None) -> FeasibleFlow | None:
    """A feasible flow near ``U`` whose node duals are points of the loss conjugate's domain moved
    in the loss's own metric (:meth:`~gtvcvx.losses.Loss.node_anchor`); None where the loss
    provides no ``node_anchor`` (or its metrics would not fit :data:`ANCHORED_MAX_ENTRIES`).
    A penalty without capacities (a squared norm, a quadratic form) keeps ``alpha = 1``: every
    flow is in its conjugate's domain.

    Solves ``(D^T Omega T D + H) Lambda = -(G + D^T U_0)`` by conjugate gradients (finished by a sparse
    factorization where they stop short, or by the factorization alone where the graph has more hops than
    the conjugate gradients have steps: :func:`_anchored_direct`), with ``U_0``
    the flow in its capacity balls, ``(G, H) = node_anchor(W, -D^T U_0)`` the node duals and
    metrics, ``Omega`` the projector's edge weights and ``T`` the projection onto the faces of
    the balls (:meth:`~gtvcvx.penalties.Penalty.face_tangent`; the identity with ``faces=False``),
    and returns ``alpha (U_0 + Omega T D Lambda)`` with one common ``alpha <= 1`` that fits every
    edge into its ball. ``shift`` (n, d): the anchors are taken at ``W + shift``, whose node duals
    balance over every component (:func:`balancing_shift`; the certificate stays ``W``'s), and are
    routed as they are (``H = 0``: the system is the edges' Laplacian, its right-hand side made
    consistent by spreading what Newton left of each component's sum evenly over its nodes, a
    node residual the certificate pays for like any other).

    Notes
    -----
    The node duals are then ``v_i = alpha (G_i + H_i lambda_i)``. For the logistic loss ``G`` is
    the gradient ``-(1/m) X^T (y s)`` at ``W`` and ``H_i = (1/m) X^T diag(s (1 - s)) X`` the
    Hessian, so the sample duals become ``alpha s_k (1 - y_k (1 - s_k) x_k^T lambda_i)``: they
    move in proportion to their own distance ``s_k (1 - s_k)`` from the box ``[0, 1]`` and scale
    towards 0, so they stay in the conjugate's bounded domain for any ``lambda`` with
    ``|x_k^T lambda_i| < 1``. For the margin losses (hinge, absolute error, Huber) ``G`` is
    represented by the box point ``a`` nearest the flow's node duals, and each sample moves by
    its room in the box: a sample on a bound (the hinge off its kink) keeps its dual exactly. A
    flow iterate corrected in any other metric leaves the domain wherever a sample's optimal
    dual is on (logistic: within 1e-13 of) the boundary, and its certificate stays infinite, or
    pays for the residual, until the flows are that accurate. The certificate of the flow is
    computed from scratch like any other (honest whatever the metric).
    """
    loss, penalty, graph = problem.loss, problem.penalty, problem.graph
    if (problem.n_edges == 0 or not provides(loss, "node_anchor")
            or problem.n * problem.d ** 2 > ANCHORED_MAX_ENTRIES):
        return None
    caps = problem.capacities
    U0 = penalty.project_conjugate_domain(U, caps)
    weights = np.ones(problem.n_edges) if projector.edge_weights is None else projector.edge_weights
    if projector.support is not None:
        U0[~projector.support] = 0.0  # (weight 0 there: no correction either)
    divergence_0 = divergence(graph, U0)
    anchors, hessians = loss.node_anchor(W if shift is None else W + shift, -divergence_0)
    if shift is not None:  # balanced anchors: routed through the edges as they are (no move in the metric)
        hessians = np.zeros_like(hessians)
    tangent = penalty.face_tangent(U0, caps) if faces else None

    def edge_move(lam):
        moved = differences(graph, lam)
        moved = moved if tangent is None else tangent(moved)
        return weights[:, None] * moved

    def apply(lam):
        return divergence(graph, edge_move(lam)) + np.matmul(hessians, lam[:, :, None])[:, :, 0]

    rhs = -(anchors + divergence_0)
    if shift is not None:
        # balanced to Newton's accuracy: what is left of each component's sum cannot be routed (the system
        # is singular there, and conjugate gradients stall on it); spread evenly, it is a node residual
        allowance = projector.allowance
        rhs -= (allowance.segment.T @ (allowance.segment @ rhs)) / np.maximum(allowance.sizes, 1)[allowance.component,
                                                                                                    None]
    size = float(np.linalg.norm(anchors)) + float(np.linalg.norm(U0))
    max_iter = min(projector.max_iter, anchored_max_iter(problem.n))
    if projector.anchored_direct_first is None:  # (the fill count only where the paths are long)
        projector.anchored_direct_first = graph.longest_hops > max_iter and _factorable(projector, graph, problem.d)
    if projector.anchored_direct_first:
        # CG moves information one hop per step and would stop at max_iter short of the far ends
        lam, iterations = _anchored_direct(graph, weights, tangent, hessians, rhs, np.zeros_like(rhs), apply), 0
    else:
        # block Jacobi: each node's weighted degree (the faces ignored) plus its metric
        edges = graph.edges
        degree = (np.bincount(edges[:, 0], weights, minlength=problem.n)
                  + np.bincount(edges[:, 1], weights, minlength=problem.n))
        blocks = hessians + degree[:, None, None] * np.eye(problem.d)
        level = np.maximum(np.trace(blocks, axis1=1, axis2=2) / problem.d, 1.0)
        blocks += (1e-12 * level)[:, None, None] * np.eye(problem.d)  # (an isolated node without data)
        inverses = np.linalg.inv(blocks)

        def precond(R):
            return np.matmul(inverses, R[:, :, None])[:, :, 0]

        with np.errstate(all="ignore"):
            lam, iterations, residual = conjugate_gradient(apply, rhs, atol=ANCHORED_RTOL * size, precond=precond,
                                                           max_iter=max_iter, deadline=deadline)
        if not np.isfinite(lam).all():
            return None
        if (residual > ANCHORED_RTOL * size and (deadline is None or time.perf_counter() < deadline)
                and _factorable(projector, graph, problem.d)):
            lam = _anchored_direct(graph, weights, tangent, hessians, rhs, lam, apply)
    flow = U0 + edge_move(lam)
    alpha = 1.0  # (a penalty without capacities, e.g. a squared norm: every flow is in the conjugate's domain)
    if penalty.is_norm:
        alpha = projector._common_scale(flow, coupled_only=False)[0]
        flow *= alpha
    if not np.isfinite(flow).all():  # (e.g. a move of inf * 0 on a frozen face: no flow, not a NaN dual point)
        return None
    return FeasibleFlow(U=flow, scale=projector.flow_scale(flow), capacity_scale=alpha,
                        projection_iterations=iterations)


#: :func:`anchored_flow` finishes a conjugate-gradient run that stopped short of its target by a sparse
#: factorization of the system up to this many unknowns (``n d``) and :data:`FACTOR_MAX_ENTRIES` estimated
#: entries in the factors. Long paths need it: block-Jacobi CG needs about as many steps as the graph has hops,
#: and its limit (:func:`anchored_max_iter`) left a hinge chain of 10,000 / 20,000 nodes (d = 3) residuals whose
#: allowance was 8.5e-6 / 4.1e-6 of the objective (the factorization: 60,000 unknowns in ~0.1 s).
ANCHORED_FACTOR_MAX_UNKNOWNS = 200_000
#: ... and at most this many entries per node in the factors of the node Laplacian's pattern (SuperLU, minimum
#: degree): graphs with long paths factor sparsely (a chain 4, a 100 x 100 grid 37, a 6-NN graph of 2,000 points
#: 22), graphs without locality do not (SBMs of 1,000 / 2,000 nodes 121 / 225), and there CG stops short because
#: the system restricted to the faces has no solution, not for want of steps: the 2,000-node hinge SBM spent
#: 1.35 s per factorization on rounds whose certificates stayed infinite (7.0 -> 11.5 s).
ANCHORED_FACTOR_MAX_FILL = 40


def _factorable(projector, graph, d: int) -> bool:
    """:func:`_anchored_factorable`, decided once per projector."""
    if projector.anchored_factorable is None:
        projector.anchored_factorable = _anchored_factorable(graph, d)
    return projector.anchored_factorable


def _anchored_factorable(graph, d: int) -> bool:
    """Whether :func:`_anchored_direct` factors the anchored system of ``graph`` (``d`` coordinates): at most
    :data:`ANCHORED_FACTOR_MAX_UNKNOWNS` unknowns and :data:`ANCHORED_FACTOR_MAX_FILL` entries per node in the
    factors of the node Laplacian's pattern (a SuperLU run on it, only up to the projection's
    ``FACTOR_MAX_UNKNOWNS`` unknowns or on graphs with at most as many edges as nodes, whose fill is their size:
    a large graph without locality would fill in before the count could refuse it)."""
    n = graph.n
    if n * d > ANCHORED_FACTOR_MAX_UNKNOWNS or (n * d > FACTOR_MAX_UNKNOWNS and graph.n_edges > n):
        return False
    entries = laplacian_factor_entries(graph.laplacian())
    return entries <= ANCHORED_FACTOR_MAX_FILL * n and entries * d * d <= FACTOR_MAX_ENTRIES


def _anchored_direct(graph, weights, tangent, hessians, rhs, lam, apply) -> np.ndarray:
    """:func:`anchored_flow`'s system ``(D^T Omega T D + H) Lambda = rhs`` solved by a sparse factorization,
    refined against ``apply`` (the exact operator) from the conjugate gradients' ``lam``, which is returned
    unchanged where the refinement does not lower the residual (the caller asks :func:`_anchored_factorable`).

    Notes
    -----
    The matrix is assembled as ``(D kron I_d)^T blockdiag(w_e T_e) (D kron I_d) + blockdiag(H_i)`` with ``T_e``
    the face projection's matrix (its values on the basis vectors) and shifted by ``FACTOR_SHIFT`` times its mean
    diagonal. Constants per component are in the Laplacian's null space: on components without a metric
    (``H = 0``) the residual is centred before each solve and ``Lambda`` after it, so that an inconsistent part
    of ``rhs`` cannot grow it by ``1 / shift`` (its flows are differences of ``Lambda``, whose digits a large
    constant would take); what the solve cannot route stays a node residual that the certificate pays for like
    any other.
    """
    n, d = rhs.shape
    E = graph.n_edges
    if tangent is None:
        blocks = np.broadcast_to(np.eye(d), (E, d, d))
    else:  # T_e e_k for every edge, column k of each block
        blocks = np.stack([tangent(np.tile(np.eye(d)[k], (E, 1))) for k in range(d)], axis=2)
    blocks = weights[:, None, None] * blocks
    rows, cols = block_indices(np.arange(E), np.arange(E), d)
    edge_blocks = sp.csr_matrix((blocks.ravel(), (rows.ravel(), cols.ravel())), shape=(E * d, E * d))
    incidence = sp.kron(graph.incidence, sp.eye(d), format="csr")
    rows, cols = block_indices(np.arange(n), np.arange(n), d)
    node_blocks = sp.csr_matrix((np.asarray(hessians).ravel(), (rows.ravel(), cols.ravel())), shape=(n * d, n * d))
    matrix = (incidence.T @ edge_blocks @ incidence + node_blocks).tocsc()
    level = float(np.mean(np.abs(matrix.diagonal()))) or 1.0
    try:
        solve = symmetric_solver((matrix + FACTOR_SHIFT * level * sp.eye(n * d)).tocsc())
    except (RuntimeError, ValueError):  # (a singular factor: keep CG's answer)
        return lam
    # the components of the edges the system moves flow on, and those without any node metric
    from scipy.sparse.csgraph import connected_components

    moving = graph.edges[weights > 0]
    n_comps, component = connected_components(
        sp.csr_matrix((np.ones(moving.shape[0]), (moving[:, 0], moving[:, 1])), shape=(n, n)), directed=False)
    with_metric = np.zeros(n_comps, dtype=bool)
    np.logical_or.at(with_metric, component, (np.abs(np.asarray(hessians)).reshape(n, -1) > 0).any(axis=1))
    centre = ~with_metric[component]
    segment = sp.csr_matrix((np.ones(n), (component, np.arange(n))), shape=(n_comps, n))
    sizes = np.bincount(component, minlength=n_comps).astype(float)

    def centred(x):
        if centre.any():
            means = (segment @ x) / sizes[:, None]
            x = x - np.where(centre[:, None], means[component], 0.0)
        return x

    best, best_residual = lam, float(np.linalg.norm(rhs - apply(lam)))
    current, R = lam, rhs - apply(lam)
    with np.errstate(all="ignore"):
        for _ in range(10):
            trial = centred(current + solve(centred(R).ravel()).reshape(n, d))
            R_trial = rhs - apply(trial)
            value = float(np.linalg.norm(R_trial))
            if not (np.isfinite(value) and np.isfinite(trial).all() and value < best_residual):
                break
            best, best_residual, current, R = trial, value, trial, R_trial
    return best


def _second_pass(problem: GTVProblem, W, cert: Certificate, projector: FlowProjector, tol: float | None):
    """Whether to project again, and how: ``(exact, scale_tol)`` or None.

    Two parts of a first-pass gap are the projection's, not the iterate's: the common capacity
    scale ``alpha`` raises the coupled edges' terms by ``(1 - alpha) <z_e, u'_e>``, and the
    residual left by conjugate gradients costs its allowance. When they are most of the gap
    (without ``tol``) or stand between the gap and ``tol`` (with it, and the rest below ``tol``),
    a second pass uses alternating rounds and/or the exact (factorized) correction.
    """
    operator = projector.operator

    def can_factor() -> bool:  # asked only where a residual is at stake (the fill estimate costs a symbolic LU)
        return operator is not None and not projector.exact and operator.factorable

    can_round = operator is not None and projector.max_rounds > 1
    if not np.isfinite(cert.gap):
        # e.g. a residual a loss without an a-priori bound (logistic) cannot pay for
        return (True, 0.0) if np.isfinite(cert.primal) and can_factor() else None
    alpha = cert.residuals["capacity_scale"]
    carried = 0.0
    if alpha < 1.0 and can_round:
        coupled = projector.coupled_edges
        Z = problem.graph.incidence[coupled] @ W
        carried = max(float(np.einsum("ed,ed->", Z, cert.U[coupled])) / alpha, 0.0)
    cost = (1.0 - alpha) * carried
    residual = cert.residuals["residual_allowance"]
    residual = residual if residual > 0 and can_factor() else 0.0
    rest = cert.gap - cost - residual
    if tol is None:
        target = 0.1 * max(rest, 0.0)
        worth = cost + residual > max(rest, 0.0)
    else:
        allowed = tol * (1.0 + abs(cert.primal) + abs(cert.primal - rest))
        target = 0.5 * (allowed - rest)
        worth = rest < allowed and cost + residual > allowed - rest
    if not worth:
        return None
    exact = residual > 0.5 * target
    scale_tol = 0.5 * target / carried if cost > 0.5 * target and carried > 0 else 1.0
    return exact, scale_tol


def _certify_flow(problem: GTVProblem, W, U, projector, deadline, scale_tol: float = 0.0,
                  slot: int = 0, faces: bool = True) -> Certificate:
    flow = projector(U, deadline=deadline, scale_tol=scale_tol, slot=slot, faces=faces)
    return _certificate_of(problem, W, flow, projector)


def _certificate_of(problem: GTVProblem, W, flow: FeasibleFlow, projector: FlowProjector,
                    negative_divergence: np.ndarray | None = None, split_unbounded: bool = False) -> Certificate:
    """The certificate of ``W`` with a flow inside its capacity balls (its conservation residual
    is paid for by the allowance); ``negative_divergence``: ``-D^T U`` if known. ``split_unbounded``:
    where the gap is infinite, that of the flow with the zero flow on the components whose terms are
    (:func:`_unbounded_flow_edges`)."""
    Uf = flow.U
    V = negative_divergence
    if V is None:
        V = divergence(problem.graph, Uf)
        np.negative(V, out=V)
    node_gaps, node_residual = problem.loss.certify_nodes(W, V)
    edge_values, edge_gaps = edge_norm_terms(problem.graph, W, Uf, problem.capacities, problem.penalty,
                                             compiled=projector.compiled_terms)
    node_values = problem.loss.node_values(W)
    primal = float(node_values.sum() + edge_values.sum())
    bound, estimated = 0.0, False
    per_component = None
    zero = zero_flow_nodes(problem.loss, V, node_gaps, node_residual)
    if node_residual.any() or zero.any():
        # (no capacities, e.g. a squared penalty: the flow's own scale, whose conjugate cost
        # grows quadratically, so a huge flow cannot buy a loose residual)
        scale = projector.flow_scale(Uf) if flow.scale is None else flow.scale
        node_scale = np.where(np.isfinite(projector.node_bound), projector.node_bound, scale)
        allowance = projector.allowance
        per_component = allowance.contributions(W, V, node_residual, primal, node_scale)
        estimated_per = allowance.last_estimated
        if not per_component.sum() <= float(node_gaps.sum() + edge_gaps.sum()):  # the allowance dominates
            per_component, estimated_per = allowance.by_nodes(per_component, estimated_per, W, V, node_residual,
                                                              primal, node_scale)
        if zero.any():
            node_gaps, node_residual, per_component, estimated_per = _with_zero_duals(
                problem, W, V, zero, node_values, node_gaps, node_residual, per_component, estimated_per, primal,
                node_scale, allowance)
        bound = float(per_component.sum())
        estimated = bool(estimated_per.any())
    # the dual point of the losses is v' = v - residual: account for the residual rigorously
    cross = float(np.einsum("nd,nd->", W, node_residual))
    if split_unbounded and np.isfinite(primal) and not np.isfinite(bound + node_gaps.sum() + edge_gaps.sum()):
        unbounded = _unbounded_flow_edges(problem, Uf, node_gaps, edge_gaps, per_component, projector.allowance)
        if unbounded is not None:  # the zero flow on those components, this flow elsewhere
            mixed = _certificate_of(problem, W, dataclasses.replace(flow, U=np.where(unbounded[:, None], 0.0, Uf)),
                                    projector)
            if np.isfinite(mixed.gap):
                mixed.message = "; ".join(filter(None, (
                    f"the zero flow on {int(unbounded.sum())} edges (components where this flow's residual "
                    "cannot be bounded)", mixed.message)))
                return mixed
    return certificate_from_terms(problem, primal, node_gaps, edge_gaps, flow, bound=bound, cross=cross,
                                  estimated_bound=estimated)


def _unbounded_flow_edges(problem: GTVProblem, U, node_gaps, edge_gaps, per_component, allowance) -> np.ndarray | None:
    r"""The edges (|E|,) bool carrying flow in the connected components whose certificate terms are infinite, or
    None where there are none or the loss is not ``nonnegative``.

    Notes
    -----
    The dual is a sum over components (no edge joins two). On a component ``C`` the zero flow is feasible and,
    for a nonnegative loss, certified exactly by the zero dual points: its terms are ``P_C(W)``, its dual 0
    (:func:`zero_flow_nodes`). So a component where the flow's residual cannot be bounded (a small component
    whose samples are separable: no box bounds its optimum) need not cost the whole certificate: measured on
    a hinge SBM of 2,000 nodes, where one two-node component's residual of 1e-12 sent the certificate to the
    global zero flow (relative gap 0.998) while the 1,992-node component certified 6e-8.
    """
    if not provides(problem.loss, "nonnegative"):
        return None
    component, n_components = allowance.component, allowance.n_components
    cost = np.zeros(n_components) if per_component is None else np.asarray(per_component, dtype=float).copy()
    np.add.at(cost, component, node_gaps)
    edges = problem.graph.edges
    np.add.at(cost, component[edges[:, 0]], edge_gaps)
    bad = ~np.isfinite(cost)
    carrying = bad[component[edges[:, 0]]] & bad[component[edges[:, 1]]] & np.any(U != 0, axis=1)
    return carrying if carrying.any() else None


def zero_flow_nodes(loss, V, node_gaps, node_residual) -> np.ndarray:
    """The nodes whose flow is exactly zero (``v_i = 0``: ``lam = 0``, an isolated node, the zero flow)
    and whose loss's dual point left a residual or found none (an infinite term), where the loss is
    nonnegative (so the zero dual point represents ``v_i`` exactly, with the term ``L_i(w_i)``), (n,) bool."""
    if not provides(loss, "nonnegative"):
        return np.zeros(V.shape[0], dtype=bool)
    return ~np.any(V != 0, axis=1) & (np.any(node_residual != 0, axis=1) | ~np.isfinite(node_gaps))


def zero_dual_terms(nodes, node_values, node_gaps, node_residual) -> tuple[np.ndarray, np.ndarray]:
    """The node terms and residuals with the zero dual point at ``nodes`` (of :func:`zero_flow_nodes`):
    the term ``L_i(w_i)`` (``node_values``) and no residual there."""
    return np.where(nodes, node_values, node_gaps), np.where(nodes[:, None], 0.0, node_residual)


def _with_zero_duals(problem, W, V, zero, node_values, node_gaps, node_residual, per_component, estimated_per,
                     primal, node_scale, allowance):
    r"""The node terms, residuals and per-component allowances with the zero dual point at the nodes ``zero``
    of every connected component where that makes the gap smaller.

    Notes
    -----
    At a node with ``v_i = 0`` and a nonnegative loss, ``v'_i = 0`` is in ``dom L_i^*`` and
    ``L_i(w_i) + L_i^*(0) - 0 \le L_i(w_i)`` (``L_i^*(0) = -\inf L_i \le 0``), with no residual. The
    loss's own dual point (its subgradient at ``w_i``) gives a term near 0 at a local optimum but a
    rounding-level residual, which the allowance prices through a bound on the optimum: finite for
    Huber and the absolute error, from the samples' half-spaces for the hinge and logistic losses,
    and infinite where a component's data are separable (there ``inf L_i = 0`` and the zero point is
    exact). Each component's gap (terms, allowance and ``|<w_i, e_i>|``) depends on its own nodes only,
    so the cheaper choice is made per component. Measured: three Huber, absolute-error or hinge nodes
    with ``lam = 0`` (five samples each) stopped at their time limit with a dual bound of 0 (the zero
    point, the whole loss in the gap) and certify at once with their own dual points.
    """
    segment = allowance.segment
    gaps_zero, resid_zero = zero_dual_terms(zero, node_values, node_gaps, node_residual)
    per_zero = allowance.contributions(W, V, resid_zero, primal, node_scale)
    estimated_zero = allowance.last_estimated

    def cost(gaps, resid, per):
        cross = np.abs(np.einsum("nd,nd->n", W, resid))
        with np.errstate(invalid="ignore"):
            return per + np.asarray(segment @ (gaps + cross)).ravel()

    take = cost(gaps_zero, resid_zero, per_zero) < cost(node_gaps, node_residual, per_component)
    if not take.any():
        return node_gaps, node_residual, per_component, estimated_per
    return (*zero_dual_terms(zero & take[allowance.component], node_values, node_gaps, node_residual),
            np.where(take, per_zero, per_component), np.where(take, estimated_zero, estimated_per))


ESTIMATED_ALLOWANCE_MESSAGE = (
    "the allowance for the flow-conservation residual uses the candidate's scale (this loss gives no a-priori "
    "bound on the optimum, and the linear programs of its samples' half-spaces were not run: beyond their "
    "size limits, see gtvcvx.solvers.certificate.MINORANT_LP_MAX_D, or the loss has no linear_minorants)")


def rigorous_status(result):
    """``result`` with status ``inaccurate`` (and the reason) where an ``optimal`` rests on an
    estimated allowance (``residuals["estimated_allowance"] > 0``): such a gap is not a bound."""
    estimated = float((result.residuals or {}).get("estimated_allowance", 0.0))
    if result.status == Status.OPTIMAL and estimated > 0:
        result.status = Status.INACCURATE
        reason = (f"not certified: the gap {result.gap:.3g} includes an estimated allowance of {estimated:.3g}; "
                  + ESTIMATED_ALLOWANCE_MESSAGE)
        result.message = f"{reason}; {result.message}" if result.message else reason
    return result


def certified_statuses(solver):
    """Decorator: ``solver``'s result through :func:`rigorous_status`, so that no entry point (``gtvcvx.solve``
    and every method's own ``solve_*``, called directly) reports ``optimal`` on a gap that includes an
    estimated allowance."""
    @functools.wraps(solver)
    def solve_certified(*args, **kwargs):
        return rigorous_status(solver(*args, **kwargs))
    return solve_certified


def zero_flow_message(infinite: bool) -> str:
    """Why a certificate took the zero flow: the flow iterate's was infinite, or its gap exceeded ``P(W)``."""
    return "certified with the zero flow (the flow iterate's " + (
        "residual cannot be bounded)" if infinite else "gap exceeds P(W))")


def no_bound_message(primal: float, edge_gaps_total: float) -> str:
    """Why a certificate with primal value ``primal`` and edge terms summing to ``edge_gaps_total``
    has no finite gap."""
    if not np.isfinite(primal):
        return (f"no finite certificate: P(W) evaluates to {primal} in float64 (a loss or penalty term overflows, "
                "or W is not finite): rescale the data, e.g. standardize it")
    if not np.isfinite(edge_gaps_total):
        return "no finite dual bound: the flow exceeds an edge capacity"
    return "no finite dual bound: the flow's conservation residual cannot be bounded"


def certificate_from_terms(problem: GTVProblem, primal: float, node_gaps: np.ndarray, edge_gaps: np.ndarray,
                           flow: FeasibleFlow, *, bound: float = 0.0, cross: float = 0.0,
                           estimated_bound: bool = False) -> Certificate:
    """The :class:`Certificate` of a primal value and the Fenchel-Young terms at a feasible flow.

    Parameters
    ----------
    problem : GTVProblem
    primal : float
        ``P(W)``, the sum of the node values and edge values (pairwise sums, as NumPy's).
    node_gaps, edge_gaps : ndarray
        The Fenchel-Young terms of the nodes (at the node duals ``v' = v - residual``) and edges.
    flow : FeasibleFlow
        The flow (its projection statistics go into ``residuals``).
    bound : float
        The allowance for the flow's conservation residual (:class:`ResidualAllowance`), and
        ``cross = <W, residual>``; both 0 where the losses' conjugates have full domains.
    estimated_bound : bool
        Whether ``bound`` rests on the candidate's scale (not rigorous: the message says so,
        ``residuals["estimated_allowance"]`` is ``bound``, and :func:`gtvcvx.solve` does not
        report ``optimal`` on such a certificate).

    Notes
    -----
    ``gap = sum(node_gaps) + sum(edge_gaps) + bound + |cross| + rounding``, where ``rounding =
    2 u (8 + log2(2 + n + |E|) + max_terms) (|P| + |terms| + |cross|)`` is a first-order bound on the
    rounding of the pairwise sums reported (``u`` the unit roundoff, ``max_terms`` the loss's
    longest sum per node).
    """
    terms = float(node_gaps.sum() + edge_gaps.sum())
    rounding = _ROUNDING_FACTOR * (8.0 + math.log2(2.0 + problem.n + problem.n_edges)
                                   + float(problem.loss.max_terms)) * (abs(primal) + abs(terms) + abs(cross))
    allowance = bound + abs(cross) + rounding
    gap = float(terms + allowance)
    message = flow.message
    if not np.isfinite(gap) or not np.isfinite(primal):
        message = message or no_bound_message(primal, float(edge_gaps.sum()))
        dual, gap = -np.inf, np.inf
    else:
        dual = primal - gap
    if bound > 0 and estimated_bound:
        message = message or ESTIMATED_ALLOWANCE_MESSAGE
    residuals = {
        "conservation": flow.conservation_residual,
        "capacity_scale": flow.capacity_scale,
        "projection_iterations": float(flow.projection_iterations),
        "projection_rounds": float(flow.rounds),
        "residual_allowance": bound + abs(cross),
        "rounding_allowance": rounding,
        "estimated_allowance": bound if estimated_bound else 0.0,
    }
    return Certificate(primal=primal, dual=dual, gap=gap, rel_gap=relative_gap(primal, dual),
                       node_gaps=node_gaps, edge_gaps=edge_gaps, U=flow.U, residuals=residuals, message=message)


def stationarity(problem: GTVProblem, W, U) -> float:
    """``||r||_F / (1 + ||D^T U||_F)`` with ``r_i`` the distance of ``-(D^T U)_i`` from
    ``d L_i(w_i)`` (:meth:`~gtvcvx.losses.Loss.node_stationarity`), as the core reports it."""
    V = -divergence(problem.graph, U)
    return float(np.linalg.norm(problem.loss.node_stationarity(W, V)) / (1.0 + np.linalg.norm(V)))
