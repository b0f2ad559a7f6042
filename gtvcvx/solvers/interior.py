r"""A direct interior-point solve of small GTV problems (Clarabel, called without CVXPY).

On small graphs (tens to a few thousand nodes, a few samples each) the whole cost of a CVXPY
solve is its compilation; the interior-point iterations themselves take milliseconds. This module
writes the conic program of a GTV problem directly as sparse matrices (vectorized, no loop over
nodes, edges or samples) and hands it to Clarabel's own API:

.. math::

    \min_{W, Z}\ \sum_i L_i(w_i) + \sum_e c_e \phi(z_e)
    \quad\text{s.t.}\quad z_e = w_{h(e)} - w_{t(e)}\ \ (Z = D W),

with every loss and penalty written through their epigraphs. The multipliers of ``Z = D W`` are
the flows ``U`` of the network-flow dual, so the pair ``(W, U)`` is certified by
:func:`~gtvcvx.solvers.certify_pair` like any other solver's output: the reported gap never trusts
Clarabel's own stopping test.

The losses and penalties declare their conic form in one vocabulary (attribute ``conic_form``):

* losses ``L_i(w) = (1/m_i) sum_k ell(u_k)`` over samples, with the argument ``u_k`` the
  residual ``x_k^T w - y_k`` or the margin ``y_k x_k^T w``: ``"squared_residual"``
  (``u^2``), ``"absolute_residual"`` (``|u|``), ``"huber_residual"`` (``h_delta(u)``, the loss's
  ``delta``), ``"hinge_margin"`` (``max(0, 1 - u)``), ``"logistic_margin"``
  (``log(1 + exp(-u))``: two exponential cones per sample); and ``"squared_distance"``
  (``||w_i - a_i||^2``);
* penalties: ``"norm2"`` (one second-order cone per edge), ``"norm1"`` (``t >= |z|``),
  ``"group_norm2"`` (a cone per edge and group, the penalty's ``labels``), ``"quadratic"``
  (``z^T Q z / 2``, ``Q`` by :func:`~gtvcvx.solvers.quadratic.penalty_form`).

A loss or penalty without a declaration (e.g. a user's own) is refused by
:func:`interior_refusal`, and ``method="auto"`` then uses the first-order core.

References
----------
.. [1] P. J. Goulart, Y. Chen, "Clarabel: An interior-point solver for conic programs with
   quadratic objectives", arXiv:2405.12762, 2024.
.. [2] Y. SarcheshmehPour, Y. Tian, L. Zhang, A. Jung, "Clustered federated learning via generalized
   total variation minimization", IEEE TSP 2023 (``../shared/seeds/002_99a24ac288dc6cbc.txt``),
   Sec. III-A eq. (16): GTV minimization; Sec. III-B: its dual, the network-flow problem, whose
   flows are the multipliers of ``Z = D W`` here.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from dataclasses import dataclass, field

import clarabel
import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.sparse.csgraph import reverse_cuthill_mckee
from scipy.sparse.linalg import splu

from ..capabilities import CapabilityError, provides
from ..problem import GTVProblem
from ..results import GTVResult, Status
from ._pdhg_common import uniqueness_note
from .certificate import bounds_optimum, certified_statuses, certify_pair, constrained_nodes, stationarity
from .quadratic import penalty_form
from .schur_ipm import MAX_STEPS as SCHUR_MAX_STEPS
from .schur_ipm import SCHUR_MIN_EDGES, schur_refusal, solve_schur

__all__ = ["auto_interior", "auto_plan", "build_program", "conic_rows", "factor_work", "FAER_MIN_WORK", "interior_refusal", "solve_interior",
           "predicted_seconds", "LOSS_FORMS", "PENALTY_FORMS", "MAX_CONIC_ROWS", "MAX_SECONDS",
           "AUTO_MAX_ROWS", "AUTO_MAX_SCHUR_EDGES", "AUTO_SECONDS", "AUTO_SECONDS_DEFICIENT", "AUTO_SECONDS_LARGE",
           "EXP_CONE_SECONDS_FACTOR"]

LOSS_FORMS = ("squared_residual", "absolute_residual", "huber_residual", "hinge_margin", "logistic_margin",
              "squared_distance")
PENALTY_FORMS = ("norm2", "norm1", "group_norm2", "quadratic")

#: Largest number of conic rows the direct solve builds, and the largest :func:`predicted_seconds`
#: it accepts: Clarabel runs silently, so a solve predicted to take longer (a graph without
#: locality fills the factor in) is refused up front, even for ``method="interior"``.
MAX_CONIC_ROWS = 2_000_000
MAX_SECONDS = 30.0

#: ``method="auto"`` considers the interior-point solve up to this many conic rows, and picks it
#: when :func:`predicted_seconds` is at most :data:`AUTO_SECONDS_DEFICIENT` for losses whose
#: nodes do not all determine ``w_i`` (rank of ``X_i`` below ``d``, or no data: the first-order
#: core then needs thousands of iterations), else at most :data:`AUTO_SECONDS`.
#: Measured (2026-11-25, this machine, whole calls, tol 1e-6), interior-point vs core:
#: the bank's graphs (15-225 nodes, 3 samples, d = 5 and 11) 7-400 ms vs 140-1000 ms; the
#: housing-shaped 5-NN graphs (one sample per node, d = 4) at n = 300 / 900 / 2000: 0.11 / 0.18 /
#: 0.43 s vs 0.43 / 0.52 / 4.1 s (CVXPY+CLARABEL 0.24 / 0.19 / 0.44 s); but full-rank problems converge fast in the core: random SBM
#: graphs (d = 10, m_i = 20) of 100 nodes 0.18 s vs 0.027 s, 2-D k-NN clustering at n = 500-2000
#: 0.14-0.59 s vs 0.10-0.34 s, while tiny ones (the bundled specs, 10-120 nodes) take 3-18 ms vs
#: 10-170 ms. Losses that are not smooth take the interior point up to :data:`MAX_SECONDS`, without a
#: race (measured 2026-11-29, tol 1e-6, 40 s limit, core (Halpern) vs interior point, chains, SBMs and
#: a grid of 225-2,000 nodes, 3-20 samples, d = 3-5: absolute error 3.9-15.7 s or the limit (at 3e-4)
#: vs 0.07-3.4 s; hinge the limit at a gap of 0.7-1 on all seven vs 0.27-5.5 s, or ``inaccurate`` on
#: two chains; ``auto`` had taken the core on twelve of the fourteen; a race's core share was lost time:
#: an SBM of 2,000 nodes, absolute error, 9.7 s raced vs 5.5 s). Smooth losses that are not quadratic
#: (Huber, logistic) count as the slow case (measured 2026-11-29, tol 1e-6, interior point vs core, best of
#: two, beside a benchmark: chains of 300 / 1,000 / 3,000 nodes, 4 samples, d = 3, Huber 0.15 / 0.39 /
#: 0.88 s vs 0.74 / 3.9 / 7.0 s, logistic 0.36 / 1.18 / 2.45 s vs 3.56 / 10.3 / 26.6 s; SBMs of 100 nodes,
#: 20 samples, d = 10: Huber 0.33 vs 0.38 s, logistic 0.90 vs 1.77 s; of 300 nodes, 10 samples, d = 5:
#: Huber 1.15 vs 0.86 s, the one the core won).
AUTO_MAX_ROWS = 200_000
#: ... except where :func:`schur_first` holds, up to this many edges (no conic program is built;
#: measured: a 2-D 5-NN graph of 20,000 nodes, one sample each, d = 4, 59,840 edges, 538,560
#: conic rows: the Schur method 6.2 s, predicted 7.0 s, where ``auto`` took the core, 23.3 s).
AUTO_MAX_SCHUR_EDGES = 250_000
AUTO_SECONDS_DEFICIENT = 2.0
AUTO_SECONDS = 0.05
#: Beyond :data:`AUTO_MAX_ROWS` (up to :data:`MAX_CONIC_ROWS`) ``auto`` still considers the interior point
#: for losses whose core is the slow case and whose interior-point iterations the cost model counts
#: (:func:`_large_program_ok`) when :func:`predicted_seconds` is at most this. Measured (2026-11-29, tol 1e-6,
#: 4 samples per node, d = 3, interior point vs the core with a 30 s limit): chains of 20,000 nodes (760,000
#: rows, predicted 8.0 s): absolute error 6.2 s vs the limit at a gap of 1, Huber 7.5 s vs 59 s, hinge (the
#: benchmark's instance) 28.5 s certified vs the core over 8 minutes uncertified; where the
#: prediction is above it, it was 3-4x short: a 150 x 150 grid, Huber (predicted 13.8 s) 56 s, a 6-NN graph of
#: 20,000 nodes, Huber (12.5 s) 33 s, vs the core's 30 s limit at 2e-4 / 3e-4 (those keep the core).
AUTO_SECONDS_LARGE = 10.0
#: ... and for the logistic loss (exponential cones) only on graphs with long paths (:data:`LONG_PATH_HOPS`), where
#: the core needs about as many iterations as hops, with the prediction times this (its iterations cost more than
#: the model's) at most :data:`MAX_SECONDS`. Measured (2026-11-29, tol 1e-6, chains, 4 samples per node, d = 3):
#: 10,000 nodes (380,000 rows, predicted 4.0 s) interior point 12.2 s certified, the core 105 s; 20,000 (760,000,
#: 8.0 s) 28-45 s certified (Clarabel 29-39 iterations at 1e-8), the core at a gap of 1 after 180 s; 5,000
#: (predicted 2.0 s) 4.3-6.1 s.
EXP_CONE_SECONDS_FACTOR = 3.0
#: Between :data:`AUTO_SECONDS_DEFICIENT` and :data:`MAX_SECONDS` (nodes leaving ``w_i``
#: undetermined), ``auto`` races: the core first for this fraction of the predicted
#: interior-point time, then the interior-point solve if the core has not certified ``tol``; a
#: call then costs at most about 1.5x the interior-point solve, and the core's fast cases stay
#: fast. Measured (2026-11-25, tol 1e-6): Erdos-Renyi graphs (300 nodes, 2,245 edges, 2 samples,
#: d = 5; predicted 4.9 s): core 0.07-0.10 s, interior 1.3-1.4 s; the digits 5-NN / 10-NN graphs
#: (1,797 nodes, one sample, d = 5; predicted 3.0 / 10.6 s): core 26-90 s (or max_iter),
#: interior 4.4-6.0 / 13-26 s, CVXPY+CLARABEL 12-30 / 30-49 s.
AUTO_RACE_FRACTION = 0.5
#: The cost model of :func:`predicted_seconds` (fitted to the runs above: per iteration
#: 0.7 us per conic row plus the factorization at >= 1 GFlop/s, about 15 iterations) ...
_ROW_SECONDS, _FLOP_RATE, _ITERATIONS = 0.7e-6, 1e9, 15
#: ... where :func:`factor_work` is at least ``FAER_MIN_WORK`` flops, Clarabel factors by faer (its
#: supernodal solver, one thread) instead of QDLDL, at >= 5 GFlop/s. Measured 2026-11-29 (whole Clarabel
#: solves at tol 1e-8, medians of three; absolute error / hinge, 4 samples per node, d = 3, norm2):
#: SBMs of 500 nodes (3.4e7 flops) QDLDL 0.31 / 0.78 s vs faer 0.51 / 1.18 s; 700 (9.6e7) 0.92 / 1.97 vs
#: 0.89 / 1.44; 1,000 (3.0e8) 2.44 / 3.27 vs 1.36 / 1.65; 2,000 (2.4e9) 22.0 vs 5.8 s (absolute error),
#: where CVXPY+CLARABEL (faer's default, two threads) took 1.0 s at 1,000; chains of 1,000-2,000 nodes
#: (1-2e5 flops) 0.13-0.27 s vs 0.15-0.34 s. Two faer threads were 7-25 % slower than one on this
#: 2-core machine.
FAER_MIN_WORK, _FAER_FLOP_RATE = 1e8, 5e9
#: The same for :func:`~gtvcvx.solvers.schur_ipm.solve_schur` (one factorization per Newton step,
#: 12-15 steps; fitted to the digits 5-NN / 10-NN graphs, 1.35e8 / 6e8 flops, 6,309 / 12,343
#: edges: 0.7-1.2 s / 1.75-1.9 s whole, i.e. PARDISO at ~2e10 flop/s and the batched cone
#: algebra and refined solves ~7.4 us per edge and step).
_SCHUR_FACTORIZATIONS, _SCHUR_FLOP_RATE, _SCHUR_EDGE_SECONDS = 15, 2e10, 7.4e-6
#: Above this many envelope flops (``d = 1``) the minimum-degree count is not attempted.
_EXACT_COUNT_LIMIT = 1e9


def _flat(values, size: int) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    return values.ravel() if values.size == size else np.broadcast_to(values, (size,))


@dataclass
class _Program:
    """A conic program ``min x^T P x / 2 + q^T x  s.t.  A x + s = b, s in K`` built block by block.

    Variables are allocated with :meth:`variables`; constraint blocks are appended in the order
    Clarabel needs them (rows of one block share a cone kind).
    """

    n_vars: int = 0
    q_parts: list = field(default_factory=list)      # (index array, coefficients)
    P_parts: list = field(default_factory=list)      # (rows, cols, values) of the symmetric P
    A_blocks: list = field(default_factory=list)     # (coo rows, cols, values, n_rows, b)
    cones: list = field(default_factory=list)
    n_rows: int = 0
    #: Columns of ``w_head`` and ``w_tail`` per edge and coordinate (|E| d,): a row that refers to
    #: the edge difference ``z_j`` (column ``-1 - j``) gets ``+coef`` on the first, ``-coef`` on
    #: the second, and ``(j, row, coef)`` is kept in :attr:`flow_parts`.
    edge_cols: tuple = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    flow_parts: list = field(default_factory=list)

    def variables(self, count: int) -> np.ndarray:
        idx = np.arange(self.n_vars, self.n_vars + count)
        self.n_vars += count
        return idx

    def linear(self, idx, coef) -> None:
        """Adds ``sum coef * x_idx`` (``coef`` a scalar or one value per index, in C order)."""
        idx = np.asarray(idx).ravel()
        self.q_parts.append((idx, _flat(coef, idx.size)))

    def squares(self, idx, coef) -> None:
        """Adds ``sum coef * x_idx^2`` to the objective."""
        idx = np.asarray(idx).ravel()
        self.P_parts.append((idx, idx, 2.0 * _flat(coef, idx.size)))

    def rows(self, rows, cols, vals, n_rows: int, b, cones) -> None:
        """A block of ``n_rows`` constraint rows ``(A x)_r + s_r = b_r`` with the given cones."""
        rows, cols = np.asarray(rows).ravel(), np.asarray(cols).ravel()
        vals = _flat(vals, rows.size)
        virtual = cols < 0
        if virtual.any():  # z_j = w_head - w_tail, substituted
            j, r, v = -1 - cols[virtual], rows[virtual], vals[virtual]
            self.flow_parts.append((j, r + self.n_rows, v))
            head, tail = self.edge_cols
            rows = np.concatenate([rows[~virtual], r, r])
            cols = np.concatenate([cols[~virtual], head[j], tail[j]])
            vals = np.concatenate([vals[~virtual], v, -v])
        self.A_blocks.append((rows, cols, vals, int(n_rows), _flat(b, int(n_rows))))
        self.n_rows += int(n_rows)
        self.cones.extend(cones)

    def flows(self, y, n_flows: int) -> np.ndarray:
        """``u_j = sum coef * y_row`` over the rows that refer to ``z_j``: the multipliers of the
        edge differences (KKT ``P x + q + A^T y = 0`` with ``grad L_i = -(D^T U)_i``)."""
        if not self.flow_parts:
            return np.zeros(n_flows)
        j, r, v = (np.concatenate(parts) for parts in zip(*self.flow_parts))
        return np.bincount(j, weights=v * y[r], minlength=n_flows)

    def matrices(self):
        n = self.n_vars
        q = np.zeros(n)
        for idx, coef in self.q_parts:
            np.add.at(q, idx, coef)
        if self.P_parts:  # the whole symmetric P; Clarabel takes its upper triangle
            r, c, v = (np.concatenate(parts) for parts in zip(*self.P_parts))
            P = sp.csc_matrix((v, (r, c)), shape=(n, n))
        else:
            P = sp.csc_matrix((n, n))
        offset, rs, cs, vs, bs = 0, [], [], [], []
        for rows, cols, vals, n_rows, b in self.A_blocks:
            rs.append(rows + offset)
            cs.append(cols)
            vs.append(vals)
            bs.append(b)
            offset += n_rows
        if not self.A_blocks:  # e.g. no edges and a loss written in the objective alone
            return sp.triu(P, format="csc"), q, sp.csc_matrix((0, n)), np.zeros(0)
        A = sp.csc_matrix((np.concatenate(vs), (np.concatenate(rs), np.concatenate(cs))), shape=(offset, n))
        return sp.triu(P, format="csc"), q, A, np.concatenate(bs)


def _cone(kind: str, size: int = 0):
    """One Clarabel cone: ``"zero"``, ``"nonneg"`` or ``"soc"`` of ``size`` rows, or ``"exp"`` (3 rows)."""
    if kind == "exp":
        return clarabel.ExponentialConeT()
    return {"zero": clarabel.ZeroConeT, "nonneg": clarabel.NonnegativeConeT, "soc": clarabel.SecondOrderConeT}[kind](size)


def interior_refusal(problem: GTVProblem) -> str:
    """Why the direct interior-point solve does not apply (``""`` when it does)."""
    reason = _form_refusal(problem)
    if reason:
        return reason
    seconds = predicted_seconds(problem)
    if seconds > MAX_SECONDS:
        return (f"it would take about {seconds:.3g} s (more than {MAX_SECONDS:g} s, silently inside Clarabel: "
                f"{factor_work(problem):.2g} flops per factorization, the graph has little locality)")
    return ""


def _form_refusal(problem: GTVProblem) -> str:
    loss_form = getattr(problem.loss, "conic_form", None)
    if loss_form not in LOSS_FORMS:
        return f"the loss '{problem.loss.name}' declares no conic form (attribute 'conic_form')"
    penalty_form_name = getattr(problem.penalty, "conic_form", None)
    if penalty_form_name not in PENALTY_FORMS:
        return f"the penalty '{problem.penalty.name}' declares no conic form (attribute 'conic_form')"
    rows = conic_rows(problem)
    if rows > MAX_CONIC_ROWS:
        return f"the conic program would have {rows} rows (more than {MAX_CONIC_ROWS})"
    return ""


def auto_interior(problem: GTVProblem) -> bool:
    """Whether ``method="auto"`` solves ``problem`` by the interior-point method at once (see
    :func:`auto_plan`)."""
    return auto_plan(problem)[0] == "interior"


def auto_plan(problem: GTVProblem) -> tuple[str, float]:
    """How ``method="auto"`` uses the interior-point solve: ``("interior", 0)`` at once,
    ``("race", seconds)`` the core first for ``seconds`` and then the interior-point solve, or
    ``("core", 0)`` not at all (see :data:`AUTO_MAX_ROWS`, :data:`AUTO_RACE_FRACTION`)."""
    schur = schur_first(problem) and problem.n_edges <= AUTO_MAX_SCHUR_EDGES  # (no Clarabel rows to bound)
    large = conic_rows(problem) > AUTO_MAX_ROWS and not schur
    if (large and not _large_program_ok(problem)) or _form_refusal(problem):
        return "core", 0.0
    seconds = predicted_seconds(problem)  # (after the cheap tests: it orders the graph)
    if large and (seconds * EXP_CONE_SECONDS_FACTOR > MAX_SECONDS if _exponential_cones(problem.loss)
                  else seconds > AUTO_SECONDS_LARGE):
        return "core", 0.0
    # a loss that is not smooth (absolute error, hinge: its prox is a dual box QP solved inexactly): the
    # core never certified one first in a race (see AUTO_MAX_ROWS's notes), so no share goes to it
    if not provides(problem.loss, "smooth"):
        return ("interior", 0.0) if seconds <= MAX_SECONDS else ("core", 0.0)
    # some node leaves part of w_i undetermined (rank X_i < d, or no data), or the loss is smooth but not
    # quadratic (Huber, logistic: the core's prox is a Newton solve and its certificates anchored flows):
    # the core's slow cases
    quadratic = _quadratic_loss(problem.loss)
    if constrained_nodes(problem).size or not quadratic:
        # (long paths: the core needs about as many iterations as there are hops, see LONG_PATH_HOPS; a Huber
        # chain of 5,000 / 20,000 nodes raced 2.6 / 23.6 s where the interior point alone took 1.6 / 8.1 s)
        if seconds <= AUTO_SECONDS_DEFICIENT or (
                not quadratic and seconds <= MAX_SECONDS and problem.graph.longest_hops >= LONG_PATH_HOPS):
            return "interior", 0.0
        if seconds <= MAX_SECONDS:
            return "race", AUTO_RACE_FRACTION * seconds
        return "core", 0.0
    return ("interior", 0.0) if seconds <= AUTO_SECONDS else ("core", 0.0)


def _quadratic_loss(loss) -> bool:
    """Whether the loss is quadratic for the method choice (traits ``quadratic`` or ``separable_points``)."""
    return provides(loss, "quadratic") or provides(loss, "separable_points")


def _exponential_cones(loss) -> bool:
    """Whether the loss's conic form has exponential cones (the logistic loss)."""
    return getattr(loss, "conic_form", None) == "logistic_margin"


def _large_program_ok(problem: GTVProblem) -> bool:
    """Whether ``auto`` may build a program beyond :data:`AUTO_MAX_ROWS` (see :data:`AUTO_SECONDS_LARGE`): a loss
    that is not quadratic (the core's slow case); the logistic loss, whose exponential cones take more time than
    the cost model's, only on graphs with long paths (:data:`EXP_CONE_SECONDS_FACTOR`)."""
    if _quadratic_loss(problem.loss):
        return False
    return not _exponential_cones(problem.loss) or problem.graph.longest_hops >= LONG_PATH_HOPS


def predicted_seconds(problem: GTVProblem) -> float:
    """A cost model of the interior-point solve: ``15 (0.7 us x rows + factor_work / rate)`` for
    Clarabel (``rate`` 1e9 flop/s by QDLDL, 5e9 by faer from :data:`FAER_MIN_WORK` on), and
    ``15 (factor_work / 2e10 + 7.4 us x edges)`` (Newton steps) where :func:`schur_first` holds."""
    if schur_first(problem):
        return _SCHUR_FACTORIZATIONS * (factor_work(problem) / _SCHUR_FLOP_RATE
                                        + _SCHUR_EDGE_SECONDS * problem.n_edges)
    return _clarabel_seconds(problem)


def _clarabel_seconds(problem: GTVProblem) -> float:
    work = factor_work(problem)
    rate = _FAER_FLOP_RATE if work >= FAER_MIN_WORK else _FLOP_RATE
    return _ITERATIONS * (_ROW_SECONDS * conic_rows(problem) + work / rate)


def schur_first(problem: GTVProblem) -> bool:
    """Whether :func:`solve_interior` tries :func:`~gtvcvx.solvers.schur_ipm.solve_schur` (PARDISO on
    the node system) before Clarabel: it applies, and the graph has at least
    :data:`~gtvcvx.solvers.schur_ipm.SCHUR_MIN_EDGES` edges."""
    return problem.n_edges >= SCHUR_MIN_EDGES and not schur_refusal(problem)


def factor_work(problem: GTVProblem) -> float:
    r"""An estimate of the flops of one factorization of the interior-point KKT system.

    The KKT matrix couples the ``d`` coordinates of the two end nodes of every edge, so its
    sparsity is the node graph's with dense ``d x d`` blocks: ``d^3`` times the flops
    ``sum_j c_j^2`` of a Cholesky factor of the node graph's Laplacian, ``c_j`` its column counts.
    Two orderings are counted: reverse Cuthill-McKee (:func:`scipy.sparse.csgraph.reverse_cuthill_mckee`,
    ``O(|E|)``; the factor stays inside the envelope, ``c_j <= b_j + 1`` with ``b_j`` the distance to
    node ``j``'s earliest neighbour), and, when that envelope is below ``1e9`` flops, SuperLU's
    minimum-degree ordering of the Laplacian (:func:`scipy.sparse.linalg.splu`, ``MMD_AT_PLUS_A``,
    as Clarabel's QDLDL orders by AMD); the smaller is returned. Graphs without locality (random
    graphs) fill in, graphs with it (grids, k-NN graphs, social networks) stay cheap.
    """
    n, edges = problem.n, problem.graph.edges
    if edges.shape[0] == 0:
        return float(n) * problem.d ** 3
    adjacency = sp.csr_matrix((np.ones(edges.shape[0]), (edges[:, 0], edges[:, 1])), shape=(n, n))
    order = reverse_cuthill_mckee((adjacency + adjacency.T).tocsr(), symmetric_mode=True)
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    a, b = position[edges[:, 0]], position[edges[:, 1]]
    width = np.zeros(n)
    np.maximum.at(width, np.maximum(a, b), np.abs(a - b))
    flops = float(((width + 1.0) ** 2).sum())
    if flops <= _EXACT_COUNT_LIMIT:
        D = problem.graph.incidence
        laplacian = (D.T @ D + sp.eye(n)).tocsc()
        factor = splu(laplacian, permc_spec="MMD_AT_PLUS_A", options={"SymmetricMode": True}).L
        counts = np.diff(factor.tocsc().indptr).astype(float)
        flops = min(flops, float((counts ** 2).sum()))
    return flops * problem.d ** 3


def conic_rows(problem: GTVProblem) -> int:
    """An upper estimate of the conic program's number of rows (the size rule's measure)."""
    loss, n_edges, d = problem.loss, problem.n_edges, problem.d
    samples = int(getattr(loss, "X_all", np.zeros((problem.n, 0))).shape[0])
    return int(n_edges * (2 * d + 1) + 7 * samples + problem.n * d)


# ---------------------------------------------------------------------------------------
# the losses: W is the block of variables ``w_idx`` (n, d)
# ---------------------------------------------------------------------------------------
def _sample_arguments(prog: _Program, loss, w_idx, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Variables ``u`` equal to each sample's residual or margin; returns ``(u, 1/m per sample)``."""
    terms, offset, inv_m = _sample_expression(loss, w_idx, kind)
    u = prog.variables(offset.size)
    _term_rows(prog, offset.size, -offset, terms + [(u, -1.0)], "zero")  # x^T w - u = y, or y x^T w - u = 0
    return u, inv_m


def _sample_expression(loss, w_idx, kind: str) -> tuple[list, np.ndarray, np.ndarray]:
    """Each sample's residual ``x^T w - y`` or margin ``y x^T w`` as an affine expression of ``W`` (no variable):
    ``u = sum_k coef_k x[cols_k] + offset``; returns ``(terms, offset, 1/m per sample)``."""
    X, y = loss.X_all, loss.y_all
    node = loss.node_of_sample
    cols = w_idx[node]  # (M, d)
    scale = y if kind == "margin" else np.ones(X.shape[0])
    terms = [(cols[:, k], scale * X[:, k]) for k in range(X.shape[1])]
    offset = -y if kind == "residual" else np.zeros(X.shape[0])
    return terms, offset, 1.0 / loss.counts[node]


def _at_least(prog: _Program, t, sign: float, terms, offset) -> None:
    """``t >= sign * u`` elementwise for ``u = sum_k coef_k x[cols_k] + offset`` (see :func:`_sample_expression`)."""
    _nonneg_rows(prog, t.size, -sign * offset, [(t, -1.0)] + [(c, sign * v) for c, v in terms])


def _term_rows(prog: _Program, count: int, b, terms, cone: str) -> None:
    """``count`` rows ``b - sum_k coef_k x[cols_k]`` in the cone ``cone`` (``"nonneg"``: ``>= 0``, ``"zero"``:
    ``= 0``) for ``terms = [(cols_k, coef_k), ...]``."""
    rows = np.arange(count)
    prog.rows(np.concatenate([rows] * len(terms)), np.concatenate([np.asarray(c).ravel() for c, _ in terms]),
              np.concatenate([np.broadcast_to(v, (count,)) for _, v in terms]), count, b,
              [_cone(cone, count)] if count else [])


def _nonneg_rows(prog: _Program, count: int, b, terms) -> None:
    """``count`` rows ``b - sum_k coef_k x[cols_k] >= 0`` for ``terms = [(cols_k, coef_k), ...]``."""
    _term_rows(prog, count, b, terms, "nonneg")


def _abs_epigraph(prog: _Program, t, x) -> None:
    """``t >= |x|`` elementwise, as ``t - x >= 0`` and ``t + x >= 0``."""
    t, x = np.asarray(t).ravel(), np.asarray(x).ravel()
    both = np.concatenate([np.ones(x.size), -np.ones(x.size)])
    _nonneg_rows(prog, 2 * x.size, 0.0, [(np.concatenate([t, t]), -1.0), (np.concatenate([x, x]), both)])


def _add_loss(prog: _Program, loss, w_idx) -> None:
    form = loss.conic_form
    if form == "squared_distance":
        prog.squares(w_idx, 1.0)
        prog.linear(w_idx, -2.0 * loss.points)  # ||w - a||^2 up to the constant ||a||^2
        return
    if loss.X_all.shape[0] == 0:
        return
    kind = "margin" if form.endswith("_margin") else "residual"
    if form in ("absolute_residual", "huber_residual", "hinge_margin"):
        # the residuals / margins substituted (affine in W: no variable and no equality row per sample, as the
        # edge differences): measured (2026-11-29, Clarabel at 1e-9, absolute error, 4 samples, d = 3) on a
        # chain of 20,000 nodes 4.4 -> 3.4 s (21 -> 20 iterations), an SBM of 2,000 5.9 -> 5.0 s (19 -> 17)
        terms, offset, inv_m = _sample_expression(loss, w_idx, kind)
        M = offset.size
        t = prog.variables(M)
        if form == "absolute_residual":  # t >= u, t >= -u
            prog.linear(t, inv_m)
            _at_least(prog, t, 1.0, terms, offset)
            _at_least(prog, t, -1.0, terms, offset)
        elif form == "hinge_margin":  # t >= 0, t >= 1 - u
            prog.linear(t, inv_m)
            _nonneg_rows(prog, M, 0.0, [(t, -1.0)])
            _at_least(prog, t, -1.0, terms, offset - 1.0)
        else:  # Huber: h(u) = min_{u = a + c} a^2/2 + delta |c|, t >= |c|
            a, c = prog.variables(M), prog.variables(M)
            prog.squares(a, 0.5 * inv_m)
            prog.linear(t, loss.delta * inv_m)
            _term_rows(prog, M, -offset, terms + [(a, -1.0), (c, -1.0)], "zero")  # u - a - c = 0
            _abs_epigraph(prog, t, c)
        return
    u, inv_m = _sample_arguments(prog, loss, w_idx, kind)
    M = u.size
    if form == "squared_residual":
        prog.squares(u, inv_m)
    elif form == "logistic_margin":
        # t >= log(1 + e^{-u})  <=>  v1 >= e^{-u-t}, v2 >= e^{-t}, v1 + v2 <= 1; Clarabel's
        # exponential cone is {(a, b, c): b exp(a / b) <= c}, a slack s = b_vec - A x
        t, v1, v2 = prog.variables(M), prog.variables(M), prog.variables(M)
        prog.linear(t, inv_m)
        base = 3 * np.arange(M)
        one = np.ones(M)
        for v, with_u in ((v1, True), (v2, False)):
            rows = [base, base + 2]
            cols = [t, v]
            vals = [one, -one]          # s_a = -t (- u), s_c = v
            if with_u:
                rows.append(base)
                cols.append(u)
                vals.append(one)
            b = np.zeros(3 * M)
            b[1::3] = 1.0               # s_b = 1
            prog.rows(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals), 3 * M, b,
                      [_cone("exp")] * M)
        _nonneg_rows(prog, M, 1.0, [(v1, 1.0), (v2, 1.0)])
    else:  # pragma: no cover - guarded by interior_refusal
        raise CapabilityError(f"unknown conic form {form!r}")


# ---------------------------------------------------------------------------------------
# the penalties: Z (|E|, d) are virtual columns ``z_idx`` (edge differences, substituted), capacities ``caps``
# ---------------------------------------------------------------------------------------
def _add_group_cones(prog: _Program, z_idx, caps, labels) -> None:
    """``c_e sum_g ||z_eg||``: one second-order cone ``(t_eg, z_eg)`` per edge and group."""
    n_edges, d = z_idx.shape
    G = int(labels.max()) + 1
    t = prog.variables(n_edges * G).reshape(n_edges, G)
    prog.linear(t, np.repeat(caps, G))
    order = np.argsort(labels, kind="stable")
    sizes = np.bincount(labels, minlength=G)
    # rows per edge: for each group its t then its coordinates
    cols = np.empty((n_edges, G + d), dtype=np.int64)
    head = np.concatenate([[0], np.cumsum(sizes + 1)[:-1]])
    coord_pos = head[labels[order]] + 1 + (np.arange(d) - np.concatenate([[0], np.cumsum(sizes)[:-1]])[labels[order]])
    cols[:, head] = t
    cols[:, coord_pos] = z_idx[:, order]
    rows = np.arange(n_edges * (G + d)).reshape(n_edges, G + d)
    prog.rows(rows, cols, -1.0, n_edges * (G + d), 0.0,
              [_cone("soc", int(sizes[g]) + 1) for _ in range(n_edges) for g in range(G)])


def _add_penalty(prog: _Program, penalty, z_idx, caps, d: int):
    """Adds ``sum_e c_e phi(z_e)`` with ``z_idx`` the virtual columns of the edge differences;
    returns ``flows(x, y) -> U`` (|E|, d)."""
    form = penalty.conic_form
    n_edges = z_idx.shape[0]

    def multipliers(x, y):
        return prog.flows(y, n_edges * d).reshape(n_edges, d)

    if n_edges == 0:
        return lambda x, y: np.zeros((0, d))
    if form == "norm2":
        _add_group_cones(prog, z_idx, caps, np.zeros(d, dtype=np.int64))
    elif form == "group_norm2":
        penalty.check_dimension(d)
        _add_group_cones(prog, z_idx, caps, np.asarray(penalty.labels, dtype=np.int64))
    elif form == "norm1":
        t = prog.variables(n_edges * d).reshape(n_edges, d)
        prog.linear(t, np.repeat(caps, d))
        _abs_epigraph(prog, t, z_idx)
    elif form == "quadratic":  # c_e z_e^T Q z_e / 2 with z_e = w_head - w_tail: P = D^T (C x Q) D
        Q = penalty_form(penalty, d)
        rr, cc = np.nonzero(Q)
        head, tail = (cols.reshape(n_edges, d) for cols in prog.edge_cols)
        vals = (caps[:, None] * Q[rr, cc][None, :]).ravel()
        pairs = [(head, head, vals), (tail, tail, vals), (head, tail, -vals), (tail, head, -vals)]
        prog.P_parts.extend((a[:, rr].ravel(), b[:, cc].ravel(), v) for a, b, v in pairs)

        def exact_flows(x, y):  # u_e = c_e Q z_e, the gradient of the penalty at the solution
            Z = x[head] - x[tail]
            return caps[:, None] * (Z @ Q)

        return exact_flows
    else:  # pragma: no cover - guarded by interior_refusal
        raise CapabilityError(f"unknown conic form {form!r}")
    return multipliers


def build_program(problem: GTVProblem, *, explicit_differences: bool = False):
    """The conic program of ``problem``; returns ``(program, w_idx, flows)``.

    By default the edge differences ``z_e = w_head - w_tail`` are substituted into the penalty's
    rows (no variables of their own: measured on the 900-node housing shape, 25,038 -> 14,310
    rows, 0.27 -> 0.17 s). ``explicit_differences=True`` gives them variables and the rows
    ``D W - Z = 0`` instead (a different KKT system: :func:`solve_interior` starts with it for
    losses that need rounding-level accuracy and tries the other form when an answer is not
    certified). ``flows(x, y)`` recovers the flows ``U``
    (|E|, d) from Clarabel's primal and dual.
    """
    n, d, graph = problem.n, problem.d, problem.graph
    prog = _Program()
    w_idx = prog.variables(n * d).reshape(n, d)
    n_edges = problem.n_edges
    prog.edge_cols = (w_idx[graph.edges[:, 0]].ravel(), w_idx[graph.edges[:, 1]].ravel())
    virtual = -1 - np.arange(n_edges * d).reshape(n_edges, d)  # see _Program.rows
    z_idx = virtual
    if explicit_differences and n_edges and problem.penalty.conic_form != "quadratic":
        z_idx = prog.variables(n_edges * d).reshape(n_edges, d)
        rows = np.arange(n_edges * d)  # (D W)_e - z_e = 0: its multiplier is u_e
        prog.rows(np.concatenate([rows, rows]), np.concatenate([virtual.ravel(), z_idx.ravel()]),
                  np.concatenate([np.ones(rows.size), -np.ones(rows.size)]), rows.size, 0.0,
                  [_cone("zero", rows.size)])
    _add_loss(prog, problem.loss, w_idx)
    flows = _add_penalty(prog, problem.penalty, z_idx, np.asarray(problem.capacities, dtype=float), d)
    return prog, w_idx, flows


def _accuracies(problem: GTVProblem, tol: float) -> tuple[float, ...]:
    """Clarabel's tolerances to try in turn until the certificate confirms ``tol``.

    ``1e-2 tol`` (at most Clarabel's default 1e-8) suffices where the certificate can pay for a
    small residual of the flows, and for smooth losses (trait ``"smooth"``), whose certificate
    moves the flows' node duals in the loss's own metric (``node_anchor``) where a residual
    cannot be paid for. Other losses that bound no optimum (hinge: no finite
    :meth:`~gtvcvx.losses.Loss.range_bound`, a piecewise-linear conjugate) price a residual only through
    the box of the samples' half-spaces (large: a nearly separable 1,000-node SBM certified 5.4e-6 at
    1e-8 and 4e-8 at 1e-11), and at 1e-8 their certificates failed (the hinge test problems:
    0.73 at 1e-8, 1e-12 at 1e-11) or took their exact and anchored passes (the bank's hinge
    rows, 5 graphs x 2 penalties, 2026-11-26: 1.0-2.9x slower than at 1e-11): they start at 1e-11.
    A miss at the first tolerance is retried once at 1e-11.

    The logistic rows of the same bank certified from 1e-8 on all 15 (graph x penalty) and took
    0.57-0.98x the time at 1e-11 on 14 (grid 15 x 15 / l1: 251 -> 205 ms, 30 -> 23 interior-point
    iterations); florentine / l2 took 25 -> 38 ms (the anchored pass).
    """
    tight = min(1e-11, 1e-2 * float(tol))
    loose = bounds_optimum(problem.loss) or provides(problem.loss, "smooth")
    first = min(1e-8, 1e-2 * float(tol)) if loose else tight
    if loose and not _exponential_cones(problem.loss) and problem.n_edges:
        hops = problem.graph.longest_hops
        if hops >= LONG_PATH_HOPS:  # long paths add up the flows' residuals (see LONG_PATH_HOPS)
            first = max(first * 10.0 ** -(1 + int(np.floor(np.log10(hops / LONG_PATH_HOPS)))), tight)
    return (first,) if first <= tight else (first, tight)


#: From this many hops between a component's first node and its farthest one, the losses that start at
#: ``1e-2 tol`` (:func:`_accuracies`) start one decade tighter, and one more per tenfold hops (not past the
#: retry's tolerance), except the logistic loss: the certificate prices the flows' conservation residual over the
#: paths to each component's root, which grow with the graph's length. Measured (2026-11-29, tol 1e-6,
#: ``gtvcvx.bench.losses`` instances, 4 samples, d = 3): a Huber chain of 2,000 nodes certified 2.8e-6 at 1e-8
#: (allowance 7.0e-3 of a primal of 1,251), so Clarabel ran again at 1e-11: 38 iterations, 1.02 s; at 1e-9 one
#: solve of 19 iterations certified 3.0e-8 (0.46 s). A chain of 1,000: 0.25 vs 0.26 s (20 / 22 iterations, 2e-7 /
#: 9e-9); absolute error chains of 1,000 / 2,000 one more iteration or none. A Huber chain of 20,000: 1.0e-6 at
#: 1e-9 (Clarabel again at 1e-11: 64 iterations, 19 s), 1.2e-7 at 1e-10 (32 iterations, 8.1 s); of 5,000: 1.6e-7
#: at 1e-9, 8.3e-9 at 1e-10 (24 / 25 iterations). The bank's graphs (at most 28 hops) and the SBMs keep 1e-8,
#: where 1e-9 cost an iteration and gained nothing; the logistic loss (exponential cones) took 25 -> 61
#: iterations on the 2,000 chain at 1e-9.
LONG_PATH_HOPS = 500


#: Clarabel's statuses that mean it stopped at a limit, and the gtvcvx status they become.
_LIMITS = {"MaxIterations": Status.MAX_ITER, "MaxTime": Status.TIME_LIMIT}

#: Clarabel's answers that mean its steps stalled or stopped short of its tolerances (not a limit)
#: when the certificate does not confirm ``tol``: the program is solved once more with the next of
#: :data:`STALL_FALLBACKS` (and the remaining attempts keep it).
_STALLS = ("InsufficientProgress", "NumericalError", "AlmostSolved")

#: Clarabel settings tried in turn after a stall. Measured on the karate club with two raw
#: breast-cancer samples per node (features up to 2,499), logistic loss, at Clarabel's tolerance
#: 1e-8 (certified gap with the defaults / the first / the second): l2 penalty, lam = 1,
#: InsufficientProgress with step length 0 at the 4th iteration (0.36 / 6.6e-9; before,
#: ``gtvcvx.solve`` went on with 100,000 first-order iterations, 55 s, to 0.36); l1, lam = 1 (0.36 /
#: 0.36 / 8.1e-9); squared l2, lam = 0.01, 100, 1000, AlmostSolved (9.7e-6, inf, inf / 6.6e-6,
#: 3.2e-6, 2.2e-10). A shorter minimum step before Clarabel switches its scaling of the exponential
#: cones first, then steps of at most 0.9 of the way to the boundary (Clarabel's defaults: 0.1 and
#: 0.99). Only an uncertified answer is retried: a first attempt that certifies costs nothing more.
STALL_FALLBACKS = ({"min_switch_step_length": 0.01}, {"max_step_fraction": 0.9})


@functools.lru_cache(maxsize=1)
def _faer_available() -> bool:
    """Whether the installed Clarabel factors by faer (its supernodal LDL; builds before 0.10 have QDLDL only):
    one solve of a one-variable program, once per process."""
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.direct_solve_method = "faer"
    try:
        solution = clarabel.DefaultSolver(sp.csc_matrix((1, 1)), np.zeros(1), sp.csc_matrix(np.ones((1, 1))),
                                          np.ones(1), [clarabel.NonnegativeConeT(1)], settings).solve()
    except BaseException as exc:  # an unknown method: a Rust panic surfaces as BaseException
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return False
    return str(solution.status) == "Solved"


def _clarabel_settings(verbose, max_iter: int, time_limit: float | None, work: float = 0.0, **changes):
    """Clarabel's settings for :func:`_solve_clarabel`, with ``changes`` (e.g. a stall fallback);
    ``work`` is :func:`factor_work`."""
    settings = clarabel.DefaultSettings()
    settings.verbose = bool(verbose)
    # QDLDL: on the bank's 15-225-node graphs 1.4-2.8x faster than the default (faer,
    # multithreaded) at the same iterations (measured 2026-11-25, grid 15x15 / diabetes); faer with
    # one thread on factorizations of FAER_MIN_WORK flops and more
    settings.direct_solve_method = "faer" if work >= FAER_MIN_WORK and _faer_available() else "qdldl"
    if hasattr(settings, "max_threads"):
        settings.max_threads = 1
    settings.max_iter = int(min(max_iter, settings.max_iter))
    if time_limit is not None:
        settings.time_limit = float(time_limit)
    for name, value in changes.items():
        setattr(settings, name, value)
    return settings


@certified_statuses
def solve_interior(problem: GTVProblem, tol: float = 1e-6, *, max_iter: int = 200, time_limit: float | None = None,
                   verbose: bool = False) -> GTVResult:
    r"""Solve a small GTV problem by one interior-point call (Clarabel), certified by gtvcvx.

    Where :func:`schur_first` holds (a quadratic loss, a norm2 / norm1 penalty, at least
    :data:`~gtvcvx.solvers.schur_ipm.SCHUR_MIN_EDGES` edges, PARDISO installed), the node-system
    interior-point method :func:`~gtvcvx.solvers.schur_ipm.solve_schur` runs first; Clarabel
    only if its answer does not certify ``tol`` (the better certified answer is returned,
    ``info["interior_backend"]`` says whose, ``info["interior_runs"]`` both runs).

    Parameters
    ----------
    problem : GTVProblem
        A loss and a penalty that declare a conic form (see the module docstring).
    tol : float
        Certified relative gap for the status ``optimal``; Clarabel's own tolerances are set
        ``100x`` tighter (at most ``1e-8``, its default; see :func:`_accuracies`), and its answer
        is certified.
    max_iter : int
        Interior-point iterations (Clarabel's limit is the smaller of this and its default 200).
    time_limit : float, optional
        Seconds, passed to Clarabel.
    verbose : bool
        Clarabel's iteration log.

    Returns
    -------
    GTVResult
        ``info["method"] = "interior"``, ``iterations`` = interior-point iterations,
        ``info["clarabel_status"]`` (Clarabel's answers) or ``info["factorizations"]`` (the Schur
        method's). A Clarabel failure (or an answer the certificate does not
        confirm to ``tol``) gives a non-optimal status with the reason in ``message``; the caller
        (``gtvcvx.solve``) then continues with the first-order core from this point.

    Raises
    ------
    CapabilityError
        When the loss or the penalty declares no conic form.

    Notes
    -----
    The program is the primal of the GTV problem with the edge differences as explicit
    variables, ``z = D W``; by Lagrangian duality the multipliers ``u_e`` of these rows are the
    flows of the network-flow dual ``max_U -sum_i L_i^*(-(D^T U)_i) - sum_e c_e phi^*(u_e / c_e)``
    (KKT: ``P x + q + A^T y = 0``, so ``y`` of a row ``(D W)_e - z_e = 0`` enters the node
    stationarity as ``D^T U``). The certificate projects ``U`` onto the dual's constraints and
    bounds the gap rigorously, so Clarabel's accuracy only decides how small the gap is.
    """
    reason = interior_refusal(problem)
    if reason:
        raise CapabilityError(f"the interior-point solve does not apply: {reason}; use method='halpern'")
    if not schur_first(problem):
        return _solve_clarabel(problem, tol, max_iter, time_limit, verbose)
    t_start = time.perf_counter()
    schur = solve_schur(problem, tol, max_iter=min(max_iter, SCHUR_MAX_STEPS), time_limit=time_limit)
    schur.info.update(method="interior", interior_backend="schur")
    spent = time.perf_counter() - t_start
    if (schur.status == Status.OPTIMAL or max_iter <= schur.iterations
            or (time_limit is not None and spent >= time_limit)):
        return schur
    clarabel_seconds = _clarabel_seconds(problem)
    if conic_rows(problem) > AUTO_MAX_ROWS or clarabel_seconds > MAX_SECONDS:
        # (beyond Clarabel's size rules: the caller goes on from this answer, e.g. auto's core)
        schur.message = "; ".join(part for part in (schur.message, (
            f"Clarabel not tried ({conic_rows(problem)} conic rows, predicted {clarabel_seconds:.3g} s)")) if part)
        return schur
    # Clarabel on what is left; the better certified answer is returned, charged with both runs
    clarabel_result = _solve_clarabel(problem, tol, max_iter - schur.iterations,
                                      None if time_limit is None else time_limit - spent, verbose)
    runs = {"schur": {"status": str(schur.status), "rel_gap": schur.rel_gap, "iterations": schur.iterations,
                      "seconds": spent, "message": schur.message},
            "clarabel": {"status": str(clarabel_result.status), "rel_gap": clarabel_result.rel_gap,
                         "iterations": clarabel_result.iterations, "message": clarabel_result.message}}
    best = clarabel_result if clarabel_result.rel_gap <= schur.rel_gap else schur  # (a failure's gap is NaN)
    best.info.update(method="interior", interior_backend="clarabel" if best is clarabel_result else "schur",
                     interior_runs=runs)
    return dataclasses.replace(best, iterations=schur.iterations + clarabel_result.iterations,
                               solve_time=time.perf_counter() - t_start - best.setup_time)


def _solve_clarabel(problem: GTVProblem, tol: float, max_iter: int, time_limit: float | None,
                    verbose: bool) -> GTVResult:
    """:func:`solve_interior` by Clarabel (the conic program of :func:`build_program`)."""
    t_start = time.perf_counter()
    programs = {}

    def program(explicit: bool):
        if explicit not in programs:
            prog, w_idx, flows = build_program(problem, explicit_differences=explicit)
            programs[explicit] = (prog, w_idx, flows, *prog.matrices())
        return programs[explicit]

    # the substituted differences first (fewer rows), except for the logistic loss (rounding-level
    # accuracy through exponential cones), where the explicit form reached it more reliably: on the
    # bank's 10 logistic rows the substitution was 0-25 % faster on 9 and stopped at AlmostSolved
    # (uncertified) on grid / l1, the explicit form certified all 10. The hinge (2026-11-29, both forms
    # at 1e-11): the bank's 10 hinge rows certified either way at the same iterations (0.05-0.2 s,
    # within noise), a 1,000-node SBM 2.91 -> 2.02 s, a 1,000-node chain 0.40 -> 0.34 s substituted
    first = _exponential_cones(problem.loss)
    program(first)
    work = factor_work(problem)  # (which factorization Clarabel uses)
    changes, fallbacks = {}, list(STALL_FALLBACKS)  # Clarabel's settings beyond ours, and those left
    setup_time = time.perf_counter() - t_start
    t_solve = time.perf_counter()
    iterations = 0
    attempts = [(first, accuracy) for accuracy in _accuracies(problem, tol)]
    if problem.n_edges and problem.penalty.conic_form != "quadratic":
        attempts.append((not first, attempts[-1][1]))  # the other KKT system, at the last tolerance
    best = None  # (W, cert, native, explicit, A) of the best certified answer
    last_native = None
    tried = []  # Clarabel's tolerance of each solve, in order
    while attempts:
        # every attempt within what the caller's limits leave (not each its own max_iter / time_limit)
        left_iter = max_iter - iterations
        left_time = None if time_limit is None else time_limit - (time.perf_counter() - t_start)
        if best is not None and (left_iter < 1 or (left_time is not None and left_time <= 0)):
            last_native = "MaxIterations" if left_iter < 1 else "MaxTime"
            break
        left_iter, left_time = max(left_iter, 1), None if left_time is None else max(left_time, 1e-3)
        explicit, accuracy = attempts.pop(0)
        tried.append(accuracy)
        prog, w_idx, flows, P, q, A, b = program(explicit)
        settings = _clarabel_settings(verbose, left_iter, left_time, work, **changes)
        settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = accuracy
        try:
            sol = clarabel.DefaultSolver(P, q, A, b, prog.cones, settings).solve()
            x, y, native = np.asarray(sol.x), np.asarray(sol.z), str(sol.status)
            iterations += int(sol.iterations)
            last_native = native
        except BaseException as exc:  # a Rust panic surfaces as BaseException
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            return GTVResult(status=Status.ERROR, solver="fast", setup_time=setup_time, iterations=iterations,
                             solve_time=time.perf_counter() - t_solve,
                             message=f"Clarabel failed: {type(exc).__name__}: {exc}",
                             info={"method": "interior", "clarabel_status": "exception"})
        W = x[w_idx] if x.size == prog.n_vars and np.isfinite(x).all() else None
        if W is None:
            return GTVResult(status=Status.ERROR, solver="fast", iterations=iterations, setup_time=setup_time,
                             solve_time=time.perf_counter() - t_solve,
                             message=f"Clarabel returned no finite solution (status {native})",
                             info={"method": "interior", "clarabel_status": native})
        U = flows(x, y)
        cert = certify_pair(problem, W, np.where(np.isfinite(U), U, 0.0), tol=tol)
        if best is None or np.isnan(best[1].rel_gap) or cert.rel_gap < best[1].rel_gap:  # (NaN never wins)
            best = (W, cert, native, explicit, A)
        if cert.rel_gap <= tol or native in _LIMITS:
            break
        if native in _STALLS and fallbacks:
            # the same program again with the next steps' rule, and the remaining attempts with it too
            changes = fallbacks.pop(0)
            attempts.insert(0, (explicit, accuracy))
    # (a limit reached by the last attempt, or before the next, is the status, whichever answer is best)
    W, cert, native, explicit, A = best
    if cert.rel_gap <= tol:
        status, message = Status.OPTIMAL, uniqueness_note(problem.graph, problem.loss.has_data)
    else:
        status = _LIMITS.get(last_native, Status.INACCURATE)
        limit = {Status.MAX_ITER: f"reached max_iter = {max_iter}",
                 Status.TIME_LIMIT: f"reached time_limit = {time_limit:g} s" if time_limit is not None else ""}
        message = "; ".join(part for part in (
            limit.get(status, ""), f"Clarabel stopped with status {native}; the certified relative gap of its "
            f"answer is {cert.rel_gap:.3g} > tol = {tol:g}", cert.message) if part)
    solve_time = time.perf_counter() - t_solve
    history = pd.DataFrame([{"iteration": iterations, "time": time.perf_counter() - t_start, "primal": cert.primal,
                             "dual": cert.dual, "gap": cert.gap, "rel_gap": cert.rel_gap}])
    return GTVResult(status=status, solver="fast", W=W, U=cert.U, primal=cert.primal, dual=cert.dual, gap=cert.gap,
                     rel_gap=cert.rel_gap, value=cert.primal, iterations=iterations, setup_time=setup_time,
                     solve_time=solve_time, history=history, message=message,
                     residuals={**cert.residuals, "stationarity": stationarity(problem, W, cert.U)},
                     info={"method": "interior", "clarabel_status": native, "clarabel_iterations": iterations,
                           "clarabel_tolerances": tried, "conic_rows": int(A.shape[0]), "explicit_differences": explicit, "node_gaps": cert.node_gaps, "edge_gaps": cert.edge_gaps})
