"""The ``kind = "rkhs"`` task: the dual of the kernel-sparse RKHS classifier stated by a spec.

The solvers solve the concave dual, so objective errors compare dual values; the compared
solution is the feasible envelope-primal ``alpha``; accuracy is the test accuracy (training
accuracy when the spec has no test set).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..rkhs.run import run_rkhs_spec
from ..rkhs.spec import RKHS_CHECK_KEYS, load_rkhs_spec
from ._base import register_task
from ._problem import ProblemTask

__all__ = ["RKHSTask"]


class RKHSTask(ProblemTask):
    """The kernel-sparse classifier of Peifer, Chamon, Paternain & Ribeiro from a spec."""

    kind = "rkhs"
    description = "dual of the kernel-sparse RKHS classifier"
    objective = "dual"
    check_keys = RKHS_CHECK_KEYS

    def load(self, path, doc):
        return load_rkhs_spec(path, doc)

    def solve(self, spec, solver: str = "fast", **options):
        overrides = {k: options[k] for k in ("max_iter", "time_limit") if k in options}
        if overrides:
            spec = dataclasses.replace(spec, solve_options={**spec.solve_options, **overrides})
        return run_rkhs_spec(spec, solver, tol=options.get("tol"))

    def measure(self, spec, result, *, from_primal: bool = False):
        row = dict(result.to_row())
        row["status"] = str(result.status)
        row.setdefault("message", "")
        row["certify_time"] = 0.0  # certified inside the solve
        return row, None

    def solution_of(self, result):
        alpha = getattr(result, "alpha_envelope", None)
        return None if alpha is None else np.asarray(alpha, dtype=float)

    def sizes(self, spec) -> dict:
        from .compare import problem_size

        problem = spec.problem
        out = {"size": problem_size(problem)}
        for key in ("N", "M", "gamma", "eps"):
            value = getattr(problem, key, None)
            if isinstance(value, (int, float, np.integer, np.floating)):
                out[key] = value
        return out

    def figures(self, spec, rep, comparison, spec_dir):
        result = comparison.results.get(comparison.reference) or next(iter(comparison.results.values()), None)
        if result is None or spec.X.shape[1] != 2:
            return []

        def boundary():
            from ..render import plots

            return plots.decision_boundary_figure(spec, result, spec_dir / "decision_boundary.png",
                                                  title=f"{rep.name}: {result.solver}")

        return [("decision boundary", boundary)]


register_task(RKHSTask())
