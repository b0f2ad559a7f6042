"""What the kinds that state one convex problem (GTV, RKHS, ...) share: compare, check, report."""

from __future__ import annotations

import time

import numpy as np

from ..memory import MemoryMeter
from ..runner import normalize_solver_name
from ..spec import SpecError
from ._base import ReportContext, SpecReport, Task
from .checks import (BOUNDS_RTOL, FAILED, PASSED, REFERENCE_CHECKS, SKIPPED, CheckOutcome, compare_threshold,
                     status_outcome)

__all__ = ["ProblemTask", "USABLE_STATUSES"]

#: Statuses whose answers are measured (a reference must have one of the first two).
USABLE_STATUSES = ("optimal", "inaccurate", "max_iter", "time_limit")

#: Thresholds every problem kind understands, with the measured quantity.
_ORDER = ("max_rel_gap", "max_abs_gap", "max_objective_error", "max_solution_error", "max_mse", "min_ari",
          "min_accuracy", "max_iterations")


class ProblemTask(Task):
    """A kind whose spec states one convex problem that several solvers can solve and compare.

    Subclasses implement :meth:`solve` and :meth:`measure` (and may override :meth:`figures`,
    :meth:`sizes`, :meth:`validate_checks`, :meth:`solution_of`).
    """

    comparable = True
    overridable_gap = True
    #: Row column holding the optimal value of the convex problem the solvers solve.
    objective = "primal"
    #: Thresholds understood in the ``[check]`` table: name -> description.
    check_keys: dict = {}

    # -- one run -------------------------------------------------------------------------
    def solve_options(self, spec, solver: str, *, time_limit=None, fast_options=None,
                      reference_time_limit: float | None = None) -> dict:
        """The spec's ``[solve]`` options for ``solver`` (tolerance only for the fast core).

        CVXPY backends get ``time_limit`` or, failing that, ``reference_time_limit``.
        """
        options = dict(getattr(spec, "solve_options", {}) or {})
        options.pop("solver", None)
        if solver != "fast":
            options.pop("tol", None)
            limit = time_limit if time_limit is not None else reference_time_limit
            if limit is not None:
                options.setdefault("time_limit", limit)
        else:
            if time_limit is not None:
                options.setdefault("time_limit", time_limit)
            options.update(fast_options or {})
        return options

    def measure(self, spec, result, *, from_primal: bool = False) -> tuple[dict, object]:
        """``(row, certificate)``: certified values, times and accuracy of one result."""
        raise NotImplementedError

    def solution_of(self, result):
        """The array compared between solvers (``solution_error``), or None."""
        return None

    def run(self, spec, solver: str, *, time_limit=None, fast_options=None, memory=None,
            reference_time_limit: float | None = None):
        """Solve with ``solver`` and measure: ``(row, result, certificate)``.

        Wall time and peak memory (``memory``: see :class:`~gtvcvx.memory.MemoryMeter`) cover
        the solve only; ``certify_time`` the certification.
        """
        options = self.solve_options(spec, solver, time_limit=time_limit, fast_options=fast_options,
                                     reference_time_limit=reference_time_limit)
        meter = MemoryMeter(memory)
        wall0 = time.perf_counter()
        with meter:
            result = self.solve(spec, solver, **options)
        wall = time.perf_counter() - wall0
        row, cert = self.measure(spec, result)
        row["wall_time"] = wall
        if meter.column:
            row[meter.column] = meter.peak_mb
        return row, result, cert

    # -- report --------------------------------------------------------------------------
    def units(self, spec, solvers=None, size_limits=None) -> int:
        from .compare import select_solvers

        return sum(1 for _, reason in select_solvers(spec, solvers, size_limits=size_limits) if not reason)

    def write_section(self, spec, rep: SpecReport, spec_dir, ctx: ReportContext) -> None:
        from ..render.tables import write_table
        from .compare import run_comparison, select_solvers

        plan = select_solvers(spec, ctx.solvers, size_limits=ctx.size_limits)
        skip = {s: reason for s, reason in plan if reason}
        comparison = run_comparison(spec, [s for s, reason in plan if not reason], skip=skip, memory=ctx.memory,
                                    time_limit=ctx.time_limit, progress=ctx.progress)
        rep.table = comparison.table
        rep.reference = comparison.reference
        rep.memory = comparison.memory
        data_formats = [f for f in ctx.formats if f in ("csv", "json")]  # the page itself shows the table
        for path in write_table(comparison.table, spec_dir / "comparison", data_formats):
            rep.files.append(ctx.relpath(path))
        figures = []
        self._figure(rep, "convergence plot", figures, lambda: self._convergence(rep, comparison, spec_dir))
        for label, draw in self.figures(spec, rep, comparison, spec_dir):
            self._figure(rep, label, figures, draw)
        for path in figures:
            rel = ctx.relpath(path)
            rep.figures.append(rel)
            rep.files.append(rel)

    @staticmethod
    def _figure(rep, label, figures, draw) -> None:
        try:
            path = draw()
        except Exception as exc:  # noqa: BLE001 - a figure never stops a report
            rep.notes.append(f"{label} failed: {type(exc).__name__}: {exc}")
            return
        if isinstance(path, str):  # a reason why nothing was drawn
            rep.notes.append(path)
        elif path is not None:
            figures.append(path)

    @staticmethod
    def _convergence(rep, comparison, spec_dir):
        from ..render import plots

        table = comparison.table
        finals = {}
        if table is not None and {"solver", "rel_gap", "solve_time"} <= set(table.columns):
            for row in table.to_dict("records"):
                iterations = row.get("iterations")
                finals[row["solver"]] = (float(row["rel_gap"]), None if iterations is None else float(iterations),
                                         float(row["solve_time"]))
        return plots.convergence_figure(comparison.results, spec_dir / "convergence.png", title=rep.name,
                                        finals=finals)

    def figures(self, spec, rep, comparison, spec_dir):
        """Extra figures of the kind: ``[(label, draw)]`` where ``draw()`` returns a path, None,
        or a string saying why nothing was drawn."""
        return []

    # -- checks --------------------------------------------------------------------------
    def validate_checks(self, spec, checks: dict) -> None:
        for key in checks:
            if key not in self.check_keys:
                raise SpecError(spec.path, f"check.{key}", f"unknown check; expected one of {sorted(self.check_keys)}")

    def reference_run(self, spec, reference: str, cache=None):
        """``(row, result)`` of a CVXPY reference for the checks (no time limit by default)."""
        options = self.solve_options(spec, reference)
        result = self.solve(spec, reference, **options)
        row, _ = self.measure(spec, result, from_primal=True)
        return row, result

    def check(self, spec, checks: dict, outcome, *, solver=None, reference=None, cache=None, scale="default",
              out_dir=None, studies=None) -> None:
        solver = normalize_solver_name(solver or (getattr(spec, "solve_options", {}) or {}).get("solver", "fast"))
        if reference is None and any(k in checks for k in REFERENCE_CHECKS):
            reference = "CLARABEL"
        reference = normalize_solver_name(reference) if reference else None
        row, result, _ = self.run(spec, solver)
        outcome.solver, outcome.status = result.solver, str(result.status)
        outcome.outcomes.append(status_outcome(result.status))
        if not self.has_solution(result):
            outcome.outcomes.append(CheckOutcome("solution", None, None, "", FAILED,
                                                 f"{solver} returned no solution: {result.message}"))
            return
        measured = {"max_rel_gap": row.get("rel_gap"), "max_abs_gap": row.get("gap"),
                    "max_iterations": result.iterations if result.iterations is not None else float("nan"),
                    "max_mse": row.get("mse"), "min_ari": row.get("ari"), "min_accuracy": row.get("accuracy")}
        ref = None
        if reference:
            outcome.reference = reference
            ref_row, ref = self.reference_run(spec, reference, cache)
            if (str(ref.status) not in USABLE_STATUSES[:2] or not self.has_solution(ref)
                    or not np.isfinite(ref_row.get(self.objective, np.nan))):
                outcome.outcomes.append(CheckOutcome("reference", str(ref.status), "optimal", "==", FAILED,
                                                     f"{reference}: {ref.message or 'no solution'}"))
                ref = None
        if ref is not None:
            value, value_ref = row[self.objective], ref_row[self.objective]
            measured["max_objective_error"] = abs(value - value_ref) / max(1.0, abs(value_ref))
            x, x_ref = self.solution_of(result), self.solution_of(ref)
            if x is not None and x_ref is not None and x.shape == x_ref.shape:
                measured["max_solution_error"] = float(np.linalg.norm(x - x_ref) / max(1.0, np.linalg.norm(x_ref)))
            p, p_ref = row["primal"], ref_row["primal"]
            violation = max(row["dual"] - p_ref, ref_row["dual"] - p) / (1.0 + abs(p) + abs(p_ref))
            outcome.outcomes.append(compare_threshold("reference_bounds", max(violation, 0.0), BOUNDS_RTOL, "<=",
                                                      f"certified intervals of {solver} and {reference} overlap"))
        for key in _ORDER:
            if key in checks:
                op = "<=" if key.startswith("max_") else ">="
                if key == "min_ari" and measured.get(key) is None:
                    outcome.outcomes.append(CheckOutcome(key, None, checks[key], op, SKIPPED,
                                                         "gtvcvx.clustering is not available"))
                    continue
                outcome.outcomes.append(compare_threshold(key, measured.get(key), checks[key], op))
            elif key in REFERENCE_CHECKS and ref is not None and key in measured:
                outcome.outcomes.append(CheckOutcome(key, measured[key], None, "", PASSED,
                                                     "no threshold; informational"))

    def has_solution(self, result) -> bool:
        return True
