r"""Declarative CVXPY statements of the kernel-sparse classifier: the concave dual and the
convex-envelope primal (Peifer, Chamon, Paternain & Ribeiro).

Both statements are vectorized (one sparse kernel product, element-wise atoms) and solved
through :func:`~gtvcvx.reference.backend.run_cvxpy`, so a missing or failing backend becomes a
status. Every result is re-certified by :func:`gtvcvx.rkhs.certify`, the same certificate the
fast core uses.
"""

from __future__ import annotations

import numpy as np

from ..results import SOLUTION_STATUSES, Status
from ..reference.backend import run_cvxpy

__all__ = ["rkhs_dual_statement", "rkhs_primal_statement", "solve_rkhs_dual", "solve_rkhs_primal"]

#: Coefficients with ``|alpha_j| <= KERNEL_TOL * max|alpha|`` in a backend's answer are set to 0
#: before certification (interior-point round-off, not kernels).
KERNEL_TOL = 1e-7


def _check_problem(problem):
    from .problem import RKHSProblem

    if not isinstance(problem, RKHSProblem):
        raise TypeError(f"problem must be a gtvcvx.rkhs.RKHSProblem, got {type(problem).__name__}")
    return problem


def rkhs_dual_statement(problem):
    r"""CVXPY statement of the dual.

    ``max_{0 <= lambda (<= C)} (1 - eps)/N sum(lambda) - sum_j Delta_j pos(u_j^2/2 - gamma)``
    s.t. ``u = (1/N) K^T (y * lambda)``.

    The auxiliary ``u`` (= ``abar``) is tied by an equality whose multiplier is ``-Delta * alpha``,
    the envelope primal point.

    Returns
    -------
    cvxpy.Problem, cvxpy.Variable, cvxpy.Constraint
        The problem, ``lambda`` (N,) and the coupling constraint ``u == Phi lambda``.
    """
    import cvxpy as cp

    p = _check_problem(problem)
    lam = cp.Variable(p.N, nonneg=True, name="lambda")
    u = cp.Variable(p.M, name="abar")
    coupling = u == p.Phi @ lam
    objective = p.c @ lam - p.Delta @ cp.pos(cp.square(u) / 2.0 - p.gamma)
    constraints = [coupling]
    if p.C is not None:
        constraints.append(lam <= p.C)
    return cp.Problem(cp.Maximize(objective), constraints), lam, coupling


def rkhs_primal_statement(problem):
    r"""CVXPY statement of the convex-envelope primal.

    ``min_alpha sum_j Delta_j psi(alpha_j) (+ (C/N) sum(xi))``
    s.t. ``y_n f(x_n) >= 1 - eps (- xi_n)``, ``xi >= 0``, with
    ``psi(a) = sqrt(2 gamma) |a| + pos(|a| - sqrt(2 gamma))^2 / 2`` and
    ``f(x_n) = (K (Delta * alpha))_n``.

    Returns
    -------
    cvxpy.Problem, cvxpy.Variable, cvxpy.Constraint
        The problem, ``alpha`` (M,) and the margin constraint, whose multipliers are
        ``lambda / N``.
    """
    import cvxpy as cp

    p = _check_problem(problem)
    alpha = cp.Variable(p.M, name="alpha")
    f = p.K @ cp.multiply(p.Delta, alpha)
    absa = cp.abs(alpha)
    cost = p.Delta @ (p.s * absa + cp.square(cp.pos(absa - p.s)) / 2.0)
    if p.C is None:
        margin = cp.multiply(p.y, f) >= 1.0 - p.eps
        objective = cost
    else:
        xi = cp.Variable(p.N, nonneg=True, name="xi")
        margin = cp.multiply(p.y, f) >= 1.0 - p.eps - xi
        objective = cost + (p.C / p.N) * cp.sum(xi)
    return cp.Problem(cp.Minimize(objective), [margin]), alpha, margin


def _usable(run) -> bool:
    return run.status in SOLUTION_STATUSES


def _vector(value, n):
    if value is None:
        return None
    arr = np.asarray(value, dtype=float).reshape(n)
    return arr if np.isfinite(arr).all() else None


def _sparsify(alpha):
    if alpha is None or not alpha.size:
        return alpha
    cut = KERNEL_TOL * float(np.abs(alpha).max())
    return np.where(np.abs(alpha) > cut, alpha, 0.0)


def _checked_claim(problem, run, which):
    """The backend's ``(status, message)``, with its infeasibility claims checked against the problem:
    a hard margin that cannot hold is explained; a soft margin can be neither (its dual maximizes a
    concave function over the box ``[0, C]^N``, its primal is feasible with slacks), so such a claim
    is the backend's numerical failure and becomes ``solver_error`` saying so."""
    if run.status not in (Status.UNBOUNDED, Status.INFEASIBLE):
        return run.status, run.message
    what = "the dual is unbounded" if which == "dual" else "the primal is infeasible"
    if problem.C is None:
        return run.status, (f"{run.solver} reports that {what} (to its tolerances): the hard-margin constraints "
                            f"y_n f(x_n) >= 1 - eps cannot all hold with this dictionary (overlapping classes), or "
                            f"only with coefficients too large for the backend (samples with opposite labels very "
                            f"close together); use a soft margin C ({run.message})")
    weights = f"{float(problem.Delta.min()):.3g} .. {float(problem.Delta.max()):.3g}"
    return Status.SOLVER_ERROR, (f"{run.solver} reported that {what}, which a soft margin (C = {problem.C:g}) "
                                 f"cannot be: a numerical failure of the backend, likely from the problem's scaling "
                                 f"(atom weights Delta {weights}); rescale the data or the dictionary's weights "
                                 f"({run.message})")


def _result(problem, run, lam, alpha_env, critical_tol):
    from .certificate import certify
    from .result import RKHSResult, critical_mask

    info = {"value": run.value, "method": "cvxpy"}
    if lam is None:
        return RKHSResult(status=run.status, solver=run.solver, iterations=run.iterations,
                          setup_time=run.compile_time, solve_time=run.solve_time, message=run.message, info=info)
    z = None if alpha_env is None else problem.Delta * alpha_env
    cert = certify(problem, lam, z)
    coef = cert.alpha_envelope if cert.alpha_envelope is not None else cert.alpha
    info["coef"] = "envelope" if cert.alpha_envelope is not None else "l0"
    info["repair"] = cert.repair
    message = "; ".join(filter(None, [run.message, cert.message]))
    return RKHSResult(
        status=run.status, solver=run.solver, multipliers=cert.multipliers, alpha=cert.alpha, alpha_envelope=cert.alpha_envelope,
        primal=cert.primal, dual=cert.dual, gap=cert.gap, rel_gap=cert.rel_gap, l0_primal=cert.l0_primal,
        l0_gap=cert.l0_gap, margin_violation=cert.margin_violation, n_kernels=int(np.count_nonzero(coef)),
        n_critical=int(critical_mask(cert.multipliers, critical_tol).sum()), iterations=run.iterations,
        setup_time=run.compile_time, solve_time=run.solve_time, message=message, info=info)


def solve_rkhs_dual(problem, solver: str = "CLARABEL", *, critical_tol: float = 1e-6, **opts):
    r"""Solve the kernel-sparse dual with a CVXPY backend and certify the answer.

    Parameters
    ----------
    problem : gtvcvx.rkhs.RKHSProblem
    solver : str
        ``"CLARABEL"``, ``"SCS"`` or any installed backend with second-order cones.
    critical_tol : float
        Relative threshold for counting critical samples.
    **opts
        Backend options (``max_iter`` and ``time_limit`` are translated).

    Returns
    -------
    gtvcvx.rkhs.RKHSResult
        ``lam`` from the dual variable, the envelope point ``alpha_envelope`` from the coupling
        multiplier, the L0 recovery, and the certificate (``dual``, ``primal``, gaps) evaluated by
        gtvcvx; ``info["value"]`` is the backend's own objective. A hard margin that cannot hold
        gives status ``unbounded`` with a message; a backend claiming a soft margin unbounded or
        infeasible (which it cannot be) gives ``solver_error`` saying so.

    Notes
    -----
    **Derivation of the dual and of the primal scaling.** Write ``phi(a) = a^2/2 + gamma [a != 0]``.
    Attach the multiplier ``lambda_n / N >= 0`` to the margin ``y_n f(x_n) >= 1 - eps`` of the
    primal ``min sum_j Delta_j phi(alpha_j)`` with ``f(x_n) = sum_j K_nj Delta_j alpha_j``. The
    Lagrangian is

    ``L = (1 - eps)/N sum_n lambda_n + sum_j Delta_j [phi(alpha_j) - alpha_j abar_j]``,
    ``abar = (1/N) K^T (y * lambda)``,

    because ``(1/N) sum_n lambda_n y_n K_nj Delta_j alpha_j = Delta_j alpha_j abar_j``. Minimizing
    each term over ``alpha_j`` gives ``-Delta_j phi^*(abar_j)`` with
    ``phi^*(b) = sup_a (a b - a^2/2 - gamma [a != 0]) = pos(b^2/2 - gamma)`` (``a = 0`` or
    ``a = b``), i.e. exactly the dual above. The same dual arises from any cost with the same
    conjugate, in particular the biconjugate ``psi = phi^**``:
    ``psi(a) = sup_b (a b - pos(b^2/2 - gamma))`` is ``sqrt(2 gamma)|a|`` for
    ``|a| <= sqrt(2 gamma)`` (``b = sqrt(2 gamma) sign a``) and ``a^2/2 + gamma`` beyond (``b = a``),
    which equals ``sqrt(2 gamma)|a| + pos(|a| - sqrt(2 gamma))^2/2``. The envelope primal is
    therefore ``min sum_j Delta_j psi(alpha_j)`` with the *unscaled* margins and no factor on the
    objective; the ``1/N`` of the dual is absorbed by the multipliers (the margin constraint's
    CVXPY multipliers are ``lambda / N``). For a soft margin, slack ``xi_n >= 0`` with cost
    ``(C/N) xi_n`` contributes ``xi_n (C - lambda_n)/N``, bounded below over ``xi_n >= 0`` iff
    ``lambda_n <= C``: the box of the dual. The envelope primal is convex with linear
    constraints, so its optimal value equals the dual optimum whenever it is feasible (always
    for a soft margin); an infeasible hard margin makes the dual unbounded (Farkas). The L0
    optimum is ``>=`` this common value (``psi <= phi``); the difference is what the relaxation
    loses on a finite dictionary.

    References
    ----------
    .. [1] M. Peifer, L. F. O. Chamon, S. Paternain, A. Ribeiro, "Sparse multiresolution
       representations with adaptive kernels", IEEE Trans. Signal Processing 68, 2020.
    """
    p = _check_problem(problem)
    cp_problem, lam, coupling = rkhs_dual_statement(p)
    run = run_cvxpy(cp_problem, solver, opts)
    run.status, run.message = _checked_claim(p, run, "dual")
    lam_val = alpha_env = None
    if _usable(run):
        lam_val = _vector(lam.value, p.N)
        zz = _vector(coupling.dual_value, p.M)
        if zz is not None:
            alpha_env = _sparsify(-zz / p.Delta)
    return _result(p, run, lam_val, alpha_env, critical_tol)


def solve_rkhs_primal(problem, solver: str = "CLARABEL", *, critical_tol: float = 1e-6, **opts):
    r"""Solve the convex-envelope primal with a CVXPY backend and certify the answer.

    The multipliers are recovered from the margin constraint (``lambda = N * multiplier``); see
    :func:`solve_rkhs_dual` for the derivation that makes both statements' optimal values equal.

    Returns
    -------
    gtvcvx.rkhs.RKHSResult
        A hard margin that cannot hold gives status ``infeasible`` with a message (a soft margin
        claimed infeasible: ``solver_error``, see :func:`solve_rkhs_dual`).
    """
    p = _check_problem(problem)
    cp_problem, alpha, margin = rkhs_primal_statement(p)
    run = run_cvxpy(cp_problem, solver, opts)
    run.status, run.message = _checked_claim(p, run, "primal")
    lam_val = alpha_env = None
    if _usable(run):
        mult = _vector(margin.dual_value, p.N)
        lam_val = None if mult is None else p.N * mult
        alpha_env = _sparsify(_vector(alpha.value, p.M))
        if lam_val is None and alpha_env is not None:
            lam_val = np.zeros(p.N)
    return _result(p, run, lam_val, alpha_env, critical_tol)
