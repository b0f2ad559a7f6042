"""The correctness oracle behind ``gtvcvx check``: solve a spec, measure, compare with thresholds.

Thresholds come from the spec's ``[check]`` table (and command-line overrides):

===================== ===============================================================
``max_rel_gap``       certified relative gap ``(P - D) / (1 + |P| + |D|)``
``max_abs_gap``       certified gap ``P - D``
``max_objective_error`` ``|P - P_ref| / max(1, |P_ref|)`` against the CVXPY reference
``max_solution_error`` ``||W - W_ref|| / max(1, ||W_ref||)`` against the CVXPY reference
``max_mse``           mean squared error of the local models against the ground truth
``min_ari``           adjusted Rand index of the clusters against the true labels
``min_accuracy``      logistic local models: training accuracy; RKHS: test accuracy
``max_iterations``    iterations of the solver
===================== ===============================================================

Every solve also gets a ``status`` check (the solver must report ``optimal``) and, when a
reference runs, a ``reference_bounds`` check: the certified intervals ``[D, P]`` of the solver
and of the reference must overlap (weak duality; a violation means a wrong certificate).
Experiment specs: a threshold ``max_<name>`` / ``min_<name>`` bounds ``measured[<name>]`` of
the experiment's output from above / below.
"""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["CheckOutcome", "SpecCheck", "run_checks", "validate_checks", "REFERENCE_CHECKS",
           "BOUNDS_RTOL", "experiment_threshold"]

#: Checks that need a CVXPY reference solution.
REFERENCE_CHECKS = ("max_objective_error", "max_solution_error")

#: Slack of the ``reference_bounds`` check, relative to ``1 + |P| + |P_ref|`` (rounding only).
BOUNDS_RTOL = 1e-9

PASSED, FAILED, SKIPPED, ERROR = "passed", "failed", "skipped", "error"


@dataclass
class CheckOutcome:
    """One check of one spec."""

    name: str
    measured: object
    threshold: object
    op: str
    outcome: str
    message: str = ""

    @property
    def passed(self) -> bool:
        return self.outcome in (PASSED, SKIPPED)

    def describe(self) -> str:
        """``measured <op> threshold`` in words."""
        m = _fmt(self.measured)
        if self.threshold is None or self.op == "":
            text = m
        else:
            text = f"{m} {self.op} {_fmt(self.threshold)}"
        return f"{text} ({self.message})" if self.message else text

    def to_dict(self) -> dict:
        return {"name": self.name, "measured": _plain(self.measured), "threshold": _plain(self.threshold),
                "op": self.op, "outcome": self.outcome, "message": self.message}


@dataclass
class SpecCheck:
    """All checks of one spec."""

    name: str
    path: str
    kind: str
    solver: str = ""
    status: str = ""
    time: float = 0.0
    outcomes: list = field(default_factory=list)
    reference: str | None = None

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outcomes)

    @property
    def errors(self) -> list:
        return [o for o in self.outcomes if o.outcome == ERROR]

    def to_dict(self) -> dict:
        return {"spec": self.name, "path": self.path, "kind": self.kind, "solver": self.solver,
                "status": self.status, "time": self.time, "reference": self.reference, "passed": self.passed,
                "checks": [o.to_dict() for o in self.outcomes]}


def _plain(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        v = float(v)
        return v if math.isfinite(v) else (None if math.isnan(v) else ("inf" if v > 0 else "-inf"))
    return v


def _fmt(v) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return "nan" if math.isnan(v) else f"{float(v):.3g}"
    return str(v)


def _compare(name, measured, threshold, op, message="") -> CheckOutcome:
    if measured is None or (isinstance(measured, float) and math.isnan(measured)):
        return CheckOutcome(name, measured, threshold, op, FAILED, message or "not measured")
    ok = measured <= threshold if op == "<=" else measured >= threshold
    return CheckOutcome(name, measured, threshold, op, PASSED if ok else FAILED, message)


def experiment_threshold(key: str) -> tuple[str, str]:
    """``"min_best_ari"`` -> ``("best_ari", ">=")``; ``"max_time"`` -> ``("time", "<=")``."""
    if key.startswith("max_") and len(key) > 4:
        return key[4:], "<="
    if key.startswith("min_") and len(key) > 4:
        return key[4:], ">="
    raise ValueError(f"expected 'max_<measured>' or 'min_<measured>', got {key!r}")


def _thresholds(spec, max_rel_gap=None) -> dict:
    checks = dict(getattr(spec, "checks", {}) or {})
    if max_rel_gap is not None and getattr(spec, "kind", "gtv") != "experiment":
        checks["max_rel_gap"] = float(max_rel_gap)
    return checks


def validate_checks(spec, *, max_rel_gap=None) -> None:
    """Raise a :class:`~gtvcvx.spec.SpecError` naming file and key for a check that cannot be computed."""
    from ..spec import CHECK_KEYS, SpecError

    kind = getattr(spec, "kind", "gtv")
    path = getattr(spec, "path", "<spec>")
    for key, value in _thresholds(spec, max_rel_gap).items():
        where = f"check.{key}"
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise SpecError(path, where, f"expected a finite number, got {value!r}")
        if kind == "experiment":
            try:
                experiment_threshold(key)
            except ValueError as exc:
                raise SpecError(path, where, str(exc)) from None
            continue
        if key not in CHECK_KEYS:
            raise SpecError(path, where, f"unknown check; expected one of {sorted(CHECK_KEYS)}")
        if kind == "rkhs":
            if key in ("max_mse", "min_ari", "max_solution_error"):
                raise SpecError(path, where, "not available for kind 'rkhs' specs")
            continue
        problem = spec.problem
        truth = getattr(spec, "truth", None)
        if key == "max_mse" and (truth is None or truth.W is None):
            raise SpecError(path, where, "needs ground-truth local models (synthetic data or W_true in the data file)")
        if key == "min_ari" and (truth is None or truth.labels is None):
            raise SpecError(path, where, "needs ground-truth cluster labels (synthetic data or labels in the data file)")
        if key == "min_accuracy" and problem.loss.name != "logistic":
            raise SpecError(path, where, f"needs a classifier (loss 'logistic'), not loss '{problem.loss.name}'")


def _solve_options(spec, solver):
    options = dict(getattr(spec, "solve_options", {}) or {})
    options.pop("solver", None)
    if solver != "fast":
        options.pop("tol", None)
    return options


def _reference_result(spec, reference, cache):
    from ..runner import run_solver

    if cache is not None:
        return cache.get(spec, reference)
    return run_solver(spec.problem, reference, **_solve_options(spec, reference))


def run_checks(spec, *, solver: str | None = None, reference: str | None = None, max_rel_gap: float | None = None,
               quick: bool = False, cache=None, out_dir=None) -> SpecCheck:
    """Solve ``spec`` and evaluate its checks.

    Parameters
    ----------
    spec : Spec, RKHS spec or ExperimentSpec
    solver : str, optional
        ``"fast"`` (default, or the spec's ``[solve] solver``) or a CVXPY backend.
    reference : str, optional
        CVXPY backend to compare with. Without it, a reference (CLARABEL) runs only when the
        spec has ``max_objective_error`` / ``max_solution_error`` thresholds.
    max_rel_gap : float, optional
        Overrides the spec's ``max_rel_gap``.
    quick : bool
        Passed to experiment functions.
    cache : ReferenceCache, optional
        Where reference solutions are cached.
    out_dir : path, optional
        Where experiments write their figures (default: a temporary directory).
    """
    from ..runner import normalize_solver_name

    kind = getattr(spec, "kind", "gtv")
    checks = _thresholds(spec, max_rel_gap)
    report = SpecCheck(name=spec.name, path=str(spec.path), kind=kind)
    t0 = time.perf_counter()
    try:
        if kind == "experiment":
            _check_experiment(spec, checks, report, quick, out_dir)
        else:
            solver = normalize_solver_name(solver or getattr(spec, "solve_options", {}).get("solver", "fast"))
            if reference is None and any(k in checks for k in REFERENCE_CHECKS):
                reference = "CLARABEL"
            reference = normalize_solver_name(reference) if reference else None
            if kind == "rkhs":
                _check_rkhs(spec, checks, report, solver, reference)
            else:
                _check_gtv(spec, checks, report, solver, reference, cache)
    except Exception as exc:  # noqa: BLE001 - a crash is a failed check with the reason
        report.outcomes.append(CheckOutcome("run", None, None, "", ERROR if isinstance(exc, ValueError) else FAILED,
                                            f"{type(exc).__name__}: {' '.join(str(exc).split())}"))
    report.time = time.perf_counter() - t0
    return report


def _status_outcome(status) -> CheckOutcome:
    status = str(status)
    return CheckOutcome("status", status, "optimal", "==", PASSED if status == "optimal" else FAILED)


def _check_gtv(spec, checks, report, solver, reference, cache):
    from ..metrics import relative_error
    from ..report.compare import truth_metrics
    from ..runner import run_solver
    from ._certify import certify

    problem = spec.problem
    options = _solve_options(spec, solver)
    result = run_solver(problem, solver, **options)
    report.solver, report.status = result.solver, str(result.status)
    report.outcomes.append(_status_outcome(result.status))
    if result.W is None:
        report.outcomes.append(CheckOutcome("solution", None, None, "", FAILED,
                                            f"{solver} returned no solution: {result.message}"))
        return
    cert = certify(problem, result.W, result.U)
    measured = {"max_rel_gap": cert.rel_gap, "max_abs_gap": cert.gap,
                "max_iterations": result.iterations if result.iterations is not None else float("nan")}
    metrics = truth_metrics(spec, problem, result.W, cert.U)
    measured.update(max_mse=metrics.get("mse"), min_ari=metrics.get("ari"), min_accuracy=metrics.get("accuracy"))
    ref = None
    if reference:
        report.reference = reference
        ref = _reference_result(spec, reference, cache)
        if ref.W is None or str(ref.status) not in ("optimal", "inaccurate"):
            report.outcomes.append(CheckOutcome("reference", str(ref.status), "optimal", "==", FAILED,
                                                f"{reference}: {ref.message or 'no solution'}"))
            ref = None
    if ref is not None:
        ref_cert = certify(problem, ref.W, None)
        p, p_ref = cert.primal, ref_cert.primal
        measured["max_objective_error"] = abs(p - p_ref) / max(1.0, abs(p_ref))
        measured["max_solution_error"] = relative_error(result.W, ref.W)
        violation = max(cert.dual - p_ref, ref_cert.dual - p) / (1.0 + abs(p) + abs(p_ref))
        report.outcomes.append(_compare("reference_bounds", max(violation, 0.0), BOUNDS_RTOL, "<=",
                                        f"certified intervals of {solver} and {reference} overlap"))
    for key in ("max_rel_gap", "max_abs_gap", "max_objective_error", "max_solution_error", "max_mse", "min_ari",
                "min_accuracy", "max_iterations"):
        if key in checks:
            if key == "min_ari" and measured.get(key) is None:
                report.outcomes.append(CheckOutcome(key, None, checks[key], ">=", SKIPPED,
                                                    "gtvcvx.clustering is not available"))
                continue
            report.outcomes.append(_compare(key, measured.get(key), checks[key], "<=" if key.startswith("max_") else ">="))
        elif key in ("max_objective_error", "max_solution_error") and ref is not None:
            report.outcomes.append(CheckOutcome(key, measured[key], None, "", PASSED, "no threshold; informational"))


def _check_rkhs(spec, checks, report, solver, reference):
    from ..rkhs import run_rkhs_spec

    result = run_rkhs_spec(spec, solver=solver)
    report.solver, report.status = result.solver, str(result.status)
    report.outcomes.append(_status_outcome(result.status))
    measured = {"max_rel_gap": result.rel_gap, "max_abs_gap": result.gap, "min_accuracy": result.accuracy,
                "max_iterations": result.iterations if result.iterations is not None else float("nan")}
    if reference:
        report.reference = reference
        ref = run_rkhs_spec(spec, solver=reference)
        if str(ref.status) not in ("optimal", "inaccurate") or not np.isfinite(ref.dual):
            report.outcomes.append(CheckOutcome("reference", str(ref.status), "optimal", "==", FAILED,
                                                f"{reference}: {ref.message or 'no solution'}"))
        else:
            measured["max_objective_error"] = abs(result.dual - ref.dual) / max(1.0, abs(ref.dual))
            violation = max(result.dual - ref.primal, ref.dual - result.primal)
            violation /= 1.0 + abs(result.primal) + abs(ref.primal)
            report.outcomes.append(_compare("reference_bounds", max(violation, 0.0), BOUNDS_RTOL, "<=",
                                            f"certified intervals of {solver} and {reference} overlap"))
    for key, threshold in checks.items():
        report.outcomes.append(_compare(key, measured.get(key), threshold, "<=" if key.startswith("max_") else ">="))


def _check_experiment(spec, checks, report, quick, out_dir):
    from ..report.build import run_experiment

    report.solver = f"experiment {spec.experiment}"
    if out_dir is None:
        with tempfile.TemporaryDirectory(prefix="gtvcvx-check-") as tmp:
            output = run_experiment(spec, Path(tmp), quick=quick)
    else:
        output = run_experiment(spec, Path(out_dir), quick=quick)
    report.status = "ran"
    measured = output.measured or {}
    for key, threshold in checks.items():
        name, op = experiment_threshold(key)
        if name not in measured:
            report.outcomes.append(CheckOutcome(key, None, threshold, op, ERROR,
                                                f"the experiment measured no {name!r}; it measured "
                                                f"{sorted(measured)}"))
            continue
        report.outcomes.append(_compare(key, float(measured[name]), threshold, op))
