"""Run several solvers on one spec or problem and compare them in one pandas table.

Every row carries an *honest* certified gap: CVXPY backends return only ``W``, so their
solutions are certified by gtvcvx's own certificate (:func:`gtvcvx.solvers.certify.certify`,
which builds a dual-feasible flow from ``W``), exactly like the fast core's. Each row comes
from the task of the spec's kind (:meth:`ProblemTask.run`), so this module never switches on
kinds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..memory import MemoryMeter
from ..problem import GTVProblem
from ..results import SOLUTION_STATUSES, Status
from ._base import task_for

__all__ = ["compare", "run_comparison", "Comparison", "select_solvers", "problem_size", "as_spec",
           "DEFAULT_SOLVERS", "REFERENCE_SIZE_LIMITS", "REFERENCE_TIME_LIMIT", "SKIPPED", "timed_run"]

#: Solvers compared by default: the fast core and the two CVXPY references.
DEFAULT_SOLVERS = ("fast", "CLARABEL", "SCS")

#: Largest :func:`problem_size` on which a CVXPY reference runs unless asked for explicitly.
#: Measured on this project's 2-core machine: CLARABEL takes about 1 s at size 1e3-1e4 and
#: minutes (and gigabytes) at the paper's Table I size (5.2e5); SCS at 1e-7 accuracy is slower
#: still on large, ill-conditioned instances.
REFERENCE_SIZE_LIMITS = {"CLARABEL": 100_000, "SCS": 50_000}

#: Time limit (seconds) given to CVXPY references in reports unless the spec sets one.
REFERENCE_TIME_LIMIT = 300.0

#: Status of a row whose solver was not run (with the reason in ``message``).
SKIPPED = "skipped"

# ---------------------------------------------------------------------------------------
# sizes and solver selection
# ---------------------------------------------------------------------------------------
def problem_size(problem) -> int:
    """What a CVXPY statement of ``problem`` has to carry: ``n d + |E| d + samples``.

    For an RKHS problem: ``samples x atoms`` (the kernel matrix entries) plus ``samples``.
    """
    if isinstance(problem, GTVProblem):
        loss = problem.loss
        samples = int(loss.counts.sum()) if hasattr(loss, "counts") else problem.n
        return int(problem.n * problem.d + problem.n_edges * problem.d + samples)
    K = getattr(problem, "K", None)
    n_samples = int(getattr(problem, "N", 0) or (K.shape[0] if K is not None else 0))
    if K is not None:
        return int(getattr(K, "nnz", np.prod(K.shape)) + n_samples)
    return n_samples


def as_spec(spec_or_problem):
    """A spec for a Spec / RKHS spec / bare GTVProblem (wrapped in an anonymous GTV spec).

    Raises ValueError for specs that are run rather than compared (experiments).
    """
    if isinstance(spec_or_problem, GTVProblem):
        from ..data import GroundTruth
        from ..spec import Spec

        return Spec(name="problem", path=None, problem=spec_or_problem, truth=GroundTruth(None, None))
    if getattr(spec_or_problem, "problem", None) is None and not hasattr(spec_or_problem, "kind"):
        raise TypeError("expected a gtvcvx Spec (kind 'gtv' or 'rkhs') or a GTVProblem, got "
                        f"{type(spec_or_problem).__name__}")
    task = task_for(spec_or_problem)
    if not getattr(task, "comparable", False):
        raise ValueError(f"{getattr(spec_or_problem, 'path', '')}: {task.kind} specs are run, not compared "
                         "(use gtvcvx.tasks.experiment.run_experiment or `gtvcvx report`)")
    return spec_or_problem


def select_solvers(spec_or_problem, solvers=None, *, size_limits=None) -> list[tuple[str, str]]:
    """The solvers a report runs on a spec, as ``(solver, skip_reason)`` pairs (``""`` = run).

    Rule: with ``solvers`` given explicitly every one of them runs. Otherwise the default
    :data:`DEFAULT_SOLVERS` run, except a CVXPY reference on an instance whose
    :func:`problem_size` exceeds its limit in ``size_limits`` (default
    :data:`REFERENCE_SIZE_LIMITS`), which is skipped with the reason recorded in its row.
    The fast core always runs.
    """
    from ..runner import normalize_solver_name

    problem = as_spec(spec_or_problem).problem
    if solvers is not None:
        return [(normalize_solver_name(s), "") for s in solvers]
    limits = dict(REFERENCE_SIZE_LIMITS if size_limits is None else size_limits)
    size = problem_size(problem)
    out = []
    for solver in DEFAULT_SOLVERS:
        limit = limits.get(solver)
        if solver != "fast" and limit is not None and size > limit:
            out.append((solver, f"skipped: instance size {size:,} (n d + |E| d + samples) is above the "
                                f"{solver} reference limit {limit:,}; ask for it with --solvers"))
        else:
            out.append((solver, ""))
    return out


# ---------------------------------------------------------------------------------------
# comparison
# ---------------------------------------------------------------------------------------
@dataclass
class Comparison:
    """What :func:`run_comparison` produced.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per solver (see :func:`compare` for the columns).
    results : dict
        Solver name -> result object (``GTVResult`` / ``RKHSResult``) for the solvers that ran.
    certificates : dict
        Solver name -> :class:`~gtvcvx.solvers.certificate.Certificate` (GTV problems).
    reference : str or None
        The row the errors are measured against (the smallest certified relative gap).
    memory : str or None
        How peak memory was measured (``"rss"``, ``"tracemalloc"`` or None).
    """

    table: pd.DataFrame
    results: dict = field(default_factory=dict)
    certificates: dict = field(default_factory=dict)
    reference: str | None = None
    memory: str | None = None


_BASE_COLUMNS = ["solver", "status", "primal", "dual", "gap", "rel_gap", "objective_error", "solution_error",
                 "reference"]
_TAIL_COLUMNS = ["value", "setup_time", "solve_time", "certify_time", "wall_time", "iterations"]


def timed_run(task, spec, solver, *, memory, time_limit, fast_options):
    """``task.run`` with wall time and peak memory added to its row."""
    meter = MemoryMeter(memory)
    wall0 = time.perf_counter()
    with meter:
        row, result, cert = task.run(spec, solver, time_limit=time_limit, fast_options=fast_options)
    row["wall_time"] = time.perf_counter() - wall0
    if meter.column:
        row[meter.column] = meter.peak_mb
    return row, result, cert


def _failure_row(solver, status, message):
    return {"solver": solver, "status": str(status), "primal": float("nan"), "dual": float("nan"),
            "gap": float("nan"), "rel_gap": float("nan"), "message": message}


def _solution_of(result):
    for name in ("W", "alpha_envelope"):
        value = getattr(result, name, None)
        if value is not None:
            return np.asarray(value, dtype=float)
    return None


def run_comparison(spec_or_problem, solvers=DEFAULT_SOLVERS, *, skip=None, memory: str | None = "rss",
                   time_limit: float | None = None, progress=None, fast_options=None) -> Comparison:
    """Run ``solvers`` on a spec or problem; see :func:`compare` for the table.

    Parameters
    ----------
    skip : dict, optional
        Solver -> reason: rows with status ``"skipped"`` instead of a run (see :func:`select_solvers`).
    progress : gtvcvx.progress.Progress, optional
        Told which solver runs (``start``) and when it finished (``advance``).
    fast_options : dict, optional
        Extra keyword arguments of :func:`gtvcvx.solve` (e.g. ``check_every``).
    """
    from ..runner import normalize_solver_name

    spec = as_spec(spec_or_problem)
    task = task_for(spec)
    skip = {normalize_solver_name(k): v for k, v in (skip or {}).items()}
    fast_options = dict(fast_options or {})
    names = [normalize_solver_name(s) for s in solvers]
    names += [s for s in skip if s not in names]
    rows, results, certificates = [], {}, {}
    memory_method = MemoryMeter(memory).method
    label = getattr(spec, "name", None) or "problem"
    for solver in names:
        if solver in skip and skip[solver]:
            rows.append(_failure_row(solver, SKIPPED, skip[solver]))
            continue
        if progress is not None:
            progress.start(f"{label}: {solver}")
        try:
            if solver != "fast":
                from ..reference import installed_backends

                if solver not in installed_backends():
                    rows.append(_failure_row(solver, Status.SOLVER_ERROR,
                                             f"backend {solver} is not installed "
                                             f"(installed: {', '.join(installed_backends())})"))
                    continue
            row, result, cert = timed_run(task, spec, solver, memory=memory, time_limit=time_limit,
                                          fast_options=fast_options)
            results[solver] = result
            if cert is not None:
                certificates[solver] = cert
            rows.append(row)
        except Exception as exc:  # noqa: BLE001 - a failing solver is a row, never an exception
            rows.append(_failure_row(solver, Status.SOLVER_ERROR, f"{type(exc).__name__}: {exc}"))
        finally:
            if progress is not None:
                progress.advance()

    table = pd.DataFrame(rows)
    for col in _BASE_COLUMNS + _TAIL_COLUMNS + ["message"]:
        if col not in table.columns:
            table[col] = np.nan if col not in ("message", "solver", "status") else ""
    # reference: the smallest certified relative gap among rows with a solution
    reference = None
    usable = [i for i, r in enumerate(rows)
              if r["status"] in {str(s) for s in SOLUTION_STATUSES} and np.isfinite(r.get("rel_gap", np.nan))]
    if usable:
        i_ref = min(usable, key=lambda i: (rows[i]["rel_gap"], i))
        reference = rows[i_ref]["solver"]
        value_key = task.objective  # the value of the convex problem the solvers solve
        p_ref = rows[i_ref][value_key]
        x_ref = task.solution_of(results.get(reference))
        obj_err, sol_err = [], []
        for r in rows:
            p = r.get(value_key, np.nan)
            obj_err.append(abs(p - p_ref) / max(1.0, abs(p_ref)) if np.isfinite(p) else np.nan)
            x = task.solution_of(results.get(r["solver"]))
            if x is not None and x_ref is not None and x.shape == x_ref.shape:
                sol_err.append(float(np.linalg.norm(x - x_ref) / max(1.0, np.linalg.norm(x_ref))))
            else:
                sol_err.append(np.nan)
        table["objective_error"] = obj_err
        table["solution_error"] = sol_err
    table["reference"] = table["solver"] == reference
    table["message"] = table["message"].fillna("").astype(str)
    memory_columns = [c for c in MemoryMeter.COLUMNS.values() if c in table.columns]
    fixed = _BASE_COLUMNS + _TAIL_COLUMNS + memory_columns + ["message"]
    extra = [c for c in table.columns if c not in fixed]
    table = table[_BASE_COLUMNS + extra + _TAIL_COLUMNS + memory_columns + ["message"]]
    table.attrs["reference"] = reference
    table.attrs["memory"] = memory_method
    return Comparison(table=table, results=results, certificates=certificates, reference=reference,
                      memory=memory_method)


def compare(spec_or_problem, solvers=DEFAULT_SOLVERS, **kwargs) -> pd.DataFrame:
    """Solve a spec or problem with several solvers and compare them, one row per solver.

    Parameters
    ----------
    spec_or_problem : Spec, RKHS spec or GTVProblem
        A ``kind = "gtv"`` spec (its solve options and ground truth are used), an RKHS spec
        (run through :func:`gtvcvx.rkhs.run_rkhs_spec`) or a bare problem. Experiment specs
        are not compared (ValueError): run them with :func:`gtvcvx.report.run_experiment`.
    solvers : sequence of str
        ``"fast"`` and CVXPY backends. A backend that fails or is not installed gives a row
        with its status (``solver_error``) and a message, never an exception.
    **kwargs
        ``skip``, ``memory`` (``"rss"`` default, ``"tracemalloc"``, None), ``time_limit``,
        ``progress``, ``fast_options``: see :func:`run_comparison`.

    Returns
    -------
    pandas.DataFrame
        Columns ``solver, status, primal, dual, gap, rel_gap`` (certified by gtvcvx for every
        solver: ``dual`` is a lower bound on the optimum from a feasible flow),
        ``objective_error = |P - P_ref| / max(1, |P_ref|)`` and
        ``solution_error = ||W - W_ref|| / max(1, ||W_ref||)`` against the reference row (the
        smallest certified relative gap; ``reference`` is True on it), accuracy against ground
        truth where the spec has it (``mse``, ``ari``, ``n_clusters``, ``accuracy``),
        ``value`` (the backend's own objective), then ``setup_time, solve_time, certify_time,
        iterations`` (plus ``wall_time``), peak memory (``peak_rss_delta_mb`` or
        ``peak_traced_mb``, see :class:`MemoryMeter`) and ``message``. ``table.attrs`` holds
        ``reference`` and ``memory``. For RKHS specs the columns of
        :meth:`RKHSResult.to_row` (``accuracy`` is the test accuracy, ``n_kernels``,
        ``n_critical``) replace the GTV accuracy columns, ``objective_error`` compares dual
        values ``|D - D_ref| / max(1, |D_ref|)`` (the convex problem the solvers solve) and the
        solution compared is the feasible envelope-primal ``alpha``.
    """
    return run_comparison(spec_or_problem, solvers, **kwargs).table


