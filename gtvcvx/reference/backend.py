"""Run a CVXPY problem on a named conic backend and map its outcome to gtvcvx's status vocabulary.

A backend that is not installed, raises, or returns an inaccurate / limited status becomes a
:class:`~gtvcvx.results.Status` with a message; it never raises to the caller.
"""

from __future__ import annotations

import threading
import time
import warnings
from dataclasses import dataclass

from ..results import Status

__all__ = ["BackendRun", "run_cvxpy", "installed_backends", "normalize_solver", "map_cvxpy_status",
           "DEFAULT_OPTIONS"]

#: Options applied unless the caller overrides them (tight enough for 1e-6 agreement).
DEFAULT_OPTIONS = {
    "CLARABEL": {},
    "SCS": {"eps_abs": 1e-7, "eps_rel": 1e-7, "max_iters": 200_000},
}

#: Generic option names translated per backend (a tuple sets several native options to the value;
#: None: the backend has no such option and the generic one is refused).
_GENERIC = {
    "max_iter": {"CLARABEL": "max_iter", "SCS": "max_iters", "ECOS": "max_iters", "MOSEK": None},
    "time_limit": {"CLARABEL": "time_limit", "SCS": "time_limit_secs", "ECOS": None, "MOSEK": None},
    # a relative tolerance: duality gap and feasibility (CLARABEL), primal/dual residuals (SCS)
    "tol": {"CLARABEL": ("tol_gap_abs", "tol_gap_rel", "tol_feas"), "SCS": ("eps_abs", "eps_rel"),
            "ECOS": ("abstol", "reltol", "feastol")},
}
#: Generic options that are refused (rather than passed on verbatim) for a backend not listed above.
_MAPPED_ONLY = ("tol",)


@dataclass
class BackendRun:
    """What one CVXPY solve produced (values are read from the CVXPY problem afterwards)."""

    status: Status
    solver: str
    value: float
    compile_time: float
    solve_time: float
    iterations: int | None
    message: str


def installed_backends() -> list[str]:
    """Conic backends CVXPY can use on this machine."""
    import cvxpy as cp

    return list(cp.installed_solvers())


def normalize_solver(solver: str) -> str:
    if not isinstance(solver, str) or not solver:
        raise ValueError(f"solver must be a backend name such as 'CLARABEL' or 'SCS', got {solver!r}")
    return solver.upper()


def map_cvxpy_status(status: str | None) -> Status:
    """Map a CVXPY status string to the gtvcvx vocabulary."""
    import cvxpy as cp

    table = {
        cp.OPTIMAL: Status.OPTIMAL,
        cp.OPTIMAL_INACCURATE: Status.INACCURATE,
        cp.INFEASIBLE: Status.INFEASIBLE,
        cp.INFEASIBLE_INACCURATE: Status.INFEASIBLE,
        cp.UNBOUNDED: Status.UNBOUNDED,
        cp.UNBOUNDED_INACCURATE: Status.UNBOUNDED,
        cp.USER_LIMIT: Status.MAX_ITER,
        cp.SOLVER_ERROR: Status.SOLVER_ERROR,
    }
    return table.get(status, Status.SOLVER_ERROR)


def _options(solver: str, opts: dict) -> dict:
    merged = dict(DEFAULT_OPTIONS.get(solver, {}))
    for key, value in opts.items():
        if key in _GENERIC:
            native = _GENERIC[key].get(solver, None if key in _MAPPED_ONLY else key)
            if native is None:
                raise ValueError(f"option {key!r} is not supported for backend {solver}"
                                 + (" (pass its native tolerances in backend options)" if key == "tol" else ""))
            for name in (native,) if isinstance(native, str) else native:
                merged[name] = value
        else:
            merged[key] = value
    return merged


#: Name prefix of the worker threads of :func:`_solve_interruptibly`.
WORKER_PREFIX = "gtvcvx-backend-"


def workers_running() -> bool:
    """Whether a backend's worker thread (a daemon, possibly inside compiled code) is still running."""
    return any(t.name.startswith(WORKER_PREFIX) and t.is_alive() for t in threading.enumerate())


def _solve_interruptibly(problem, solver: str, options: dict) -> None:
    """``problem.solve`` in a worker thread, so that Ctrl-C reaches the caller at once.

    Compiled backends check for signals rarely (CLARABEL only when it returns) or catch SIGINT
    themselves (SCS stops with status "interrupted" and CVXPY returns normally). Here the main
    thread waits in short slices and re-raises ``KeyboardInterrupt`` immediately (the worker
    is a daemon: it ends with the process, see :func:`workers_running`); an SCS run stopped by SIGINT is turned back into
    ``KeyboardInterrupt`` too. Exceptions of the solve are re-raised in the caller.
    """
    outcome = {}

    def work():
        try:
            problem.solve(solver=solver, **options)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            outcome["error"] = exc

    import signal

    in_main = threading.current_thread() is threading.main_thread()
    handler = signal.getsignal(signal.SIGINT) if in_main else None
    worker = threading.Thread(target=work, name=f"{WORKER_PREFIX}{solver}", daemon=True)
    worker.start()
    while worker.is_alive():
        if in_main and callable(handler):
            # SCS installs its own C-level SIGINT handler for the whole process (and checks it
            # only between iterations, not while factorizing): put Python's back
            signal.signal(signal.SIGINT, handler)
        worker.join(0.1)  # KeyboardInterrupt is raised here, in the main thread
    if "error" in outcome:
        raise outcome["error"]
    stats = getattr(problem, "solver_stats", None)
    extra = getattr(stats, "extra_stats", None) if stats is not None else None
    info = extra.get("info", {}) if isinstance(extra, dict) else {}
    if "interrupt" in str(info.get("status", "")).lower():
        raise KeyboardInterrupt(f"{solver} was interrupted")


def run_cvxpy(problem, solver: str, opts: dict | None = None) -> BackendRun:
    """Solve a ``cvxpy.Problem`` with ``solver``; failures become a status, not an exception.

    Parameters
    ----------
    problem : cvxpy.Problem
    solver : str
        Backend name (case-insensitive), e.g. ``"CLARABEL"`` or ``"SCS"``.
    opts : dict, optional
        Backend options; ``max_iter`` and ``time_limit`` are translated to the backend's names.
    """
    import cvxpy as cp

    solver = normalize_solver(solver)
    installed = installed_backends()
    if solver not in installed:
        return BackendRun(Status.SOLVER_ERROR, solver, float("nan"), 0.0, 0.0, None,
                          f"backend {solver} is not installed (installed: {', '.join(installed)})")
    options = _options(solver, dict(opts or {}))
    start = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _solve_interruptibly(problem, solver, options)
    except cp.error.SolverError as exc:
        elapsed = time.perf_counter() - start
        return BackendRun(Status.SOLVER_ERROR, solver, float("nan"), getattr(problem, "compilation_time", 0.0) or 0.0,
                          elapsed, None, f"{solver} failed: {exc}")
    except (TypeError, ValueError) as exc:  # typically an unknown backend option
        return BackendRun(Status.SOLVER_ERROR, solver, float("nan"), 0.0, time.perf_counter() - start, None,
                          f"{solver} rejected the problem or options: {exc}")
    except Exception as exc:  # noqa: BLE001 - a crashing backend is a status (Ctrl-C still propagates)
        return BackendRun(Status.SOLVER_ERROR, solver, float("nan"), 0.0, time.perf_counter() - start, None,
                          f"{solver} raised {type(exc).__name__}: {exc}")
    elapsed = time.perf_counter() - start
    compile_time = float(problem.compilation_time or 0.0)
    stats = problem.solver_stats
    # wall clock after compilation: the backend's own solve_time leaves out its setup (SCS's
    # factorization) and CVXPY's unpacking, which users wait for too
    solve_time = max(elapsed - compile_time, 0.0)
    iterations = int(stats.num_iters) if stats is not None and stats.num_iters is not None else None
    status = map_cvxpy_status(problem.status)
    limit = (opts or {}).get("time_limit")
    if problem.status == cp.USER_LIMIT and limit is not None and elapsed >= float(limit):
        # CVXPY reports both of a backend's limits as 'user_limit' (CLARABEL keeps no raw status):
        # a run that used its whole time_limit stopped there
        status = Status.TIME_LIMIT
    notes = sorted({str(w.message).split(".")[0] for w in caught if issubclass(w.category, UserWarning)})
    message = "" if status == Status.OPTIMAL else f"CVXPY status {problem.status!r}" + (
        f" (its time_limit of {float(limit):g} s)" if status == Status.TIME_LIMIT else "")
    if notes:
        message = "; ".join(filter(None, [message, *notes]))
    value = float(problem.value) if problem.value is not None else float("nan")
    return BackendRun(status, solver, value, compile_time, solve_time, iterations, message)
