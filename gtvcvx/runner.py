"""One entry point that runs any solver (the fast core or a CVXPY backend) on a problem."""

from __future__ import annotations

from .problem import GTVProblem
from .results import GTVResult

__all__ = ["run_solver", "REFERENCE_SOLVERS", "normalize_solver_name"]

#: CVXPY backends gtvcvx uses as references (others installed in CVXPY work too).
REFERENCE_SOLVERS = ("CLARABEL", "SCS")


def normalize_solver_name(solver: str) -> str:
    """``"fast"`` stays lower-case; CVXPY backend names are upper-cased."""
    if not isinstance(solver, str) or not solver:
        raise ValueError(f"solver must be 'fast' or a CVXPY backend name, got {solver!r}")
    return "fast" if solver.lower() == "fast" else solver.upper()


def run_solver(problem: GTVProblem, solver: str = "fast", *, tol: float | None = None,
               max_iter: int | None = None, time_limit: float | None = None,
               backend_options: dict | None = None, **fast_options) -> GTVResult:
    """Solve ``problem`` with ``solver`` and return a certified :class:`GTVResult`.

    Parameters
    ----------
    solver : str
        ``"fast"`` (the gtvcvx primal-dual core) or a CVXPY backend (``"CLARABEL"``, ``"SCS"``).
    tol, max_iter, time_limit
        Stopping rules; for CVXPY backends they are translated to the backend's own options
        (``tol``: CLARABEL's gap and feasibility tolerances, SCS's ``eps_abs`` / ``eps_rel``) or
        refused with a ValueError when the backend has no such option.
    backend_options : dict, optional
        ``{"CLARABEL": {...}, "SCS": {...}}`` options per backend.
    """
    solver = normalize_solver_name(solver)
    if solver == "fast":
        from .solvers import solve

        kwargs = dict(fast_options)
        for key, value in (("tol", tol), ("max_iter", max_iter), ("time_limit", time_limit)):
            if value is not None:
                kwargs[key] = value
        return solve(problem, **kwargs)
    from .reference import solve_primal

    opts = dict((backend_options or {}).get(solver, {}))
    if tol is not None:
        opts.setdefault("tol", tol)
    if max_iter is not None:
        opts.setdefault("max_iter", max_iter)
    if time_limit is not None:
        opts.setdefault("time_limit", time_limit)
    return solve_primal(problem, solver, **opts)
