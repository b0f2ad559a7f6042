r"""The direct solver for GTV problems that are quadratic: a quadratic loss and a quadratic penalty.

With ``L_i(w) = w^T H_i w / 2 + g_i^T w + const`` (squared error, squared distance) and
``phi(z) = z^T Q z / 2`` (:class:`~gtvcvx.SquaredNorm2`, :class:`~gtvcvx.QuadraticForm`), GTV
minimization is one symmetric positive semidefinite linear system,

.. math:: H_i w_i + \sum_{e \ni i} \pm c_e Q (D W)_e = -g_i \quad\text{for every node } i,

i.e. ``(blockdiag(H_i) + L_c \otimes Q) w = -g`` with ``L_c`` the Laplacian of the capacities
``c_e = lam A_e`` (the lecture notes' closed form, 004 eq. 3.25). It is solved by conjugate gradients
preconditioned with the node blocks ``(H_i + deg_c(i) Q)^{-1}`` (the exact local minimization of
FedRelax), and certified like any other solve: the flows ``U_e = c_e Q (D W)_e`` are the exact
optimal flows for ``W``, :func:`~gtvcvx.solvers.certify_pair` bounds the gap.

The first-order core needs 10^4-10^5 iterations on such problems (the squared penalty is smooth, so
nothing is identified in finitely many steps); :func:`gtvcvx.solve` picks this solver by itself
(``method="auto"``) when the loss and the penalty declare the trait ``quadratic``.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from .._validation import check_gap_tolerance, check_positive_int, check_time_limit
from ..capabilities import CapabilityError, provides
from ..problem import GTVProblem
from ..results import GTVResult, Status
from ._cg import conjugate_gradient
from .certificate import certified_statuses, certify_pair

__all__ = ["node_quadratics", "penalty_form", "quadratic_refusal", "solve_quadratic", "MAX_BLOCK_ENTRIES"]

#: Largest ``n d^2`` (entries of the node Hessians and their inverses) the solver allocates.
MAX_BLOCK_ENTRIES = 50_000_000


def node_quadratics(loss) -> tuple[np.ndarray, np.ndarray]:
    """Hessians ``(n, d, d)`` and gradients at 0 ``(n, d)`` of a quadratic loss: the loss's own
    ``node_hessians`` where it provides them, else from ``d + 1`` batched gradient evaluations
    (exact up to rounding: the gradient of a quadratic is affine)."""
    n, d = loss.n, loss.d
    g0 = loss.gradient(np.zeros((n, d)))
    if provides(loss, "node_hessians"):
        H = loss.node_hessians(np.zeros((n, d)))
        return 0.5 * (H + H.transpose(0, 2, 1)), g0
    H = np.empty((n, d, d))
    for k in range(d):  # d batched gradient evaluations (a loop over coordinates, not nodes)
        E = np.zeros((n, d))
        E[:, k] = 1.0
        H[:, :, k] = loss.gradient(E) - g0
    return 0.5 * (H + H.transpose(0, 2, 1)), g0


def penalty_form(penalty, d: int) -> np.ndarray:
    """``Q`` with ``phi(z) = z^T Q z / 2`` for a quadratic penalty, by polarization of its values."""
    eye = np.eye(d)
    pairs = (eye[:, None, :] + eye[None, :, :]).reshape(-1, d)
    single = penalty.edge_values(eye, np.ones(d))
    joint = penalty.edge_values(pairs, np.ones(d * d)).reshape(d, d)
    Q = joint - single[:, None] - single[None, :]  # phi(e_j + e_k) - phi(e_j) - phi(e_k) = Q_jk
    np.fill_diagonal(Q, 2.0 * single)
    return 0.5 * (Q + Q.T)


def quadratic_refusal(problem: GTVProblem) -> str:
    """Why the quadratic solver does not apply (``""`` when it does)."""
    if not provides(problem.loss, "quadratic"):
        return f"the loss '{problem.loss.name}' is not quadratic (trait 'quadratic')"
    if not provides(problem.penalty, "quadratic"):
        return f"the penalty '{problem.penalty.name}' is not quadratic (trait 'quadratic', e.g. SquaredNorm2)"
    if problem.n * problem.d ** 2 > MAX_BLOCK_ENTRIES:
        return (f"n d^2 = {problem.n * problem.d ** 2} node-block entries exceed {MAX_BLOCK_ENTRIES} "
                "(the preconditioner's memory)")
    return ""


@certified_statuses
def solve_quadratic(problem: GTVProblem, tol: float = 1e-6, *, max_iter: int = 10_000,
                    time_limit: float | None = None, W0=None) -> GTVResult:
    r"""Solve a quadratic GTV problem by block-preconditioned conjugate gradients, certified.

    Parameters
    ----------
    problem : GTVProblem
        A loss and a penalty that both declare the trait ``quadratic``.
    tol : float
        Certified relative gap to reach (status ``optimal``).
    max_iter : int
        Most CG iterations (over all refinement passes).
    time_limit : float, optional
        Seconds.
    W0 : ndarray (n, d), optional
        Starting point of CG (e.g. the solution at a nearby ``lam``); default zero.

    Returns
    -------
    GTVResult
        ``info["method"] = "quadratic"``, ``iterations`` = CG iterations.

    Raises
    ------
    CapabilityError
        When the loss or the penalty is not quadratic (the message says which).

    Notes
    -----
    CG runs to a residual that keeps the certificate's error below ``tol``: the gap of a
    quadratic problem at ``W`` is ``r^T A^{-1} r / 2`` for the residual ``r``, so the tolerance is
    tightened by 100x after every pass whose certificate misses ``tol`` (at most five passes).

    References
    ----------
    .. [1] A. Jung, lecture 004 "FL design principle" (``../shared/seeds/004``), eqs. (3.19)-(3.25):
       the closed form of GTV with squared penalties.
    .. [2] Y. Saad, "Iterative Methods for Sparse Linear Systems", 2nd ed., SIAM 2003, Sec. 10.2
       (block-Jacobi preconditioning).
    """
    if not isinstance(problem, GTVProblem):
        raise TypeError(f"problem must be a gtvcvx.GTVProblem, got {type(problem).__name__}")
    check_gap_tolerance(tol, "tol")
    max_iter = check_positive_int(max_iter, "max_iter")
    check_time_limit(time_limit)
    reason = quadratic_refusal(problem)
    if reason:
        raise CapabilityError(f"the quadratic solver does not apply: {reason}; use method='halpern'")
    t_start = time.perf_counter()
    deadline = None if time_limit is None else t_start + float(time_limit)
    H, g0 = node_quadratics(problem.loss)
    Q = penalty_form(problem.penalty, problem.d)
    graph = problem.graph
    caps = problem.capacities
    D = graph.incidence
    blocks = H + (problem.lam * graph.weighted_degree)[:, None, None] * Q[None]  # deg_c(i) = lam sum_e A_e
    # pseudo-inverse blocks: a node without data and without edges has a zero block
    inverse = np.linalg.pinv(blocks, hermitian=True)

    def apply(W):
        return np.einsum("nij,nj->ni", H, W) + D.T @ ((caps[:, None] * (D @ W)) @ Q)

    def precond(R):
        return np.einsum("nij,nj->ni", inverse, R)

    rhs = -g0
    scale = float(np.linalg.norm(rhs)) + 1.0
    atol = 1e-13 * scale  # the certificate pays linearly for the residual (outside range(X_i^T))
    setup_time = time.perf_counter() - t_start
    t_solve = time.perf_counter()
    W = np.zeros((problem.n, problem.d)) if W0 is None else problem.check_W(W0, "W0").copy()
    total, history, cert = 0, [], None
    status, message = Status.MAX_ITER, f"reached max_iter = {max_iter}"
    for _ in range(5):  # refinement passes: tighten CG until the certificate reaches tol
        W, iterations, residual = conjugate_gradient(apply, rhs, atol=atol, max_iter=max_iter - total, x0=W,
                                                     precond=precond, deadline=deadline)
        total += iterations
        U = caps[:, None] * (D @ W) @ Q  # the optimal flows for W: U_e = c_e grad phi((D W)_e)
        cert = certify_pair(problem, W, U)
        history.append({"iteration": total, "time": time.perf_counter() - t_start, "primal": cert.primal,
                        "dual": cert.dual, "gap": cert.gap, "rel_gap": cert.rel_gap,
                        "cg_residual": float(residual)})
        if cert.rel_gap <= tol:
            status, message = Status.OPTIMAL, ""
            break
        if deadline is not None and time.perf_counter() > deadline:
            status, message = Status.TIME_LIMIT, f"reached time_limit = {time_limit:g} s"
            break
        if total >= max_iter:
            break
        atol *= 1e-2
    if status != Status.OPTIMAL and cert.resolution > tol:
        status = Status.INACCURATE
        message = cert.resolution_message(tol)
    if cert.message and status != Status.OPTIMAL:
        message = f"{message}; {cert.message}" if message else cert.message
    solve_time = time.perf_counter() - t_solve
    return GTVResult(status=status, solver="fast", W=W, U=cert.U, primal=cert.primal, dual=cert.dual, gap=cert.gap,
                     rel_gap=cert.rel_gap, value=cert.primal, iterations=total, setup_time=setup_time,
                     solve_time=solve_time, residuals=dict(cert.residuals), history=pd.DataFrame(history),
                     message=message, info={"method": "quadratic", "node_gaps": cert.node_gaps,
                                            "edge_gaps": cert.edge_gaps})
