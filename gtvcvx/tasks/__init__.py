"""Tasks: one object per spec kind that loads, runs, measures, checks and renders.

=============== =====================================================================
``gtv``         :class:`~gtvcvx.tasks.gtv.GTVTask` - GTV minimization / convex clustering
``rkhs``        :class:`~gtvcvx.tasks.rkhs.RKHSTask` - the kernel-sparse classifier's dual
``experiment``  :class:`~gtvcvx.tasks.experiment.ExperimentTask` - a named study
=============== =====================================================================

``gtvcvx solve``, ``check``, ``report`` and ``bench`` reach a spec only through
:func:`load_spec` and :func:`task_for`; a new kind registers a :class:`Task` with
:func:`register_task` and every command handles it.
"""

import os

from ..spec import find_specs
from ._base import (DEFAULT_KIND, TASKS, ReportContext, SpecReport, Task, get_task, load_spec, register_task,
                    task_for)
from . import gtv, rkhs, experiment  # noqa: E402,F401  (register the built-in kinds)
from .checks import CheckOutcome, SpecCheck, run_checks, validate_checks
from .compare import Comparison, compare, problem_size, run_comparison, select_solvers
from .experiment import ExperimentSpec, run_experiment

__all__ = ["Task", "TASKS", "register_task", "get_task", "task_for", "load_spec", "SpecReport", "ReportContext",
           "DEFAULT_KIND", "run_checks", "validate_checks", "CheckOutcome", "SpecCheck", "compare", "run_comparison",
           "Comparison", "select_solvers", "problem_size", "ExperimentSpec", "run_experiment", "solve_spec", "find_specs"]


def solve_spec(spec, solver: str | None = None, **options):
    """Solve a loaded spec with its own ``[solve]`` options (keyword arguments override them).

    Parameters
    ----------
    spec : Spec, RKHSSpec, str or path
        From :func:`load_spec`, or the path of a spec file (loaded here).
    solver : str, optional
        ``"fast"`` (default, or the spec's ``[solve] solver``) or a CVXPY backend.
    **options
        ``tol``, ``max_iter``, ``time_limit`` and fast-core options.

    Returns
    -------
    GTVResult or RKHSResult
        Certified whatever the solver: a CVXPY answer comes back with the dual bound and gap
        gtvcvx certifies for its ``W`` (``result.info["certified"]`` says so).
    """
    from ..runner import normalize_solver_name

    if isinstance(spec, (str, os.PathLike)):
        spec = load_spec(spec)
    task = task_for(spec)
    solver = normalize_solver_name(solver or (getattr(spec, "solve_options", {}) or {}).get("solver", "fast"))
    base = task.solve_options(spec, solver) if hasattr(task, "solve_options") else {}
    base.update(options)
    return task.certified(spec, task.solve(spec, solver, **base))
