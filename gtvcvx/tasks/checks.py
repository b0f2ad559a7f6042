"""Checks of a spec: thresholds from its ``[check]`` table evaluated on a run (``gtvcvx check``).

The thresholds each kind understands are its task's ``check_keys`` (the table is in
:mod:`gtvcvx.testing.oracle`, the user-facing entry point). Every solve also gets a
``status`` check (the solver must report ``optimal``) and, when a reference runs, a ``reference_bounds`` check: the certified intervals ``[D, P]`` of the solver
and of the reference must overlap (weak duality; a violation means a wrong certificate).
Experiment specs: a threshold ``max_<name>`` / ``min_<name>`` bounds ``measured[<name>]`` of
the experiment's output from above / below.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..spec import SpecError
from ._base import task_for

__all__ = ["CheckOutcome", "SpecCheck", "run_checks", "validate_checks", "REFERENCE_CHECKS",
           "BOUNDS_RTOL", "experiment_threshold", "compare_threshold", "status_outcome",
           "PASSED", "FAILED", "SKIPPED", "ERROR"]

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


def compare_threshold(name, measured, threshold, op, message="") -> CheckOutcome:
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


def thresholds(spec, max_rel_gap=None) -> dict:
    """The spec's ``[check]`` thresholds, with ``max_rel_gap`` overridden when given."""
    checks = dict(getattr(spec, "checks", {}) or {})
    if max_rel_gap is not None and task_for(spec).overridable_gap:
        checks["max_rel_gap"] = float(max_rel_gap)
    return checks


def validate_checks(spec, *, max_rel_gap=None) -> None:
    """Raise a :class:`~gtvcvx.spec.SpecError` naming file and key for a check that cannot be computed."""
    path = getattr(spec, "path", "<spec>")
    checks = thresholds(spec, max_rel_gap)
    for key, value in checks.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise SpecError(path, f"check.{key}", f"expected a finite number, got {value!r}")
    task_for(spec).validate_checks(spec, checks)


def status_outcome(status) -> CheckOutcome:
    """The ``status`` check: the solver must report ``optimal``."""
    status = str(status)
    return CheckOutcome("status", status, "optimal", "==", PASSED if status == "optimal" else FAILED)


def run_checks(spec, *, solver: str | None = None, reference: str | None = None, max_rel_gap: float | None = None,
               scale: str = "default", cache=None, out_dir=None, studies=None) -> SpecCheck:
    """Solve ``spec`` and evaluate its checks (through the task of its kind).

    Parameters
    ----------
    spec : Spec, RKHSSpec or ExperimentSpec
    solver : str, optional
        ``"fast"`` (default, or the spec's ``[solve] solver``) or a CVXPY backend.
    reference : str, optional
        CVXPY backend to compare with. Without it, a reference (CLARABEL) runs only when the
        spec has ``max_objective_error`` / ``max_solution_error`` thresholds.
    max_rel_gap : float, optional
        Overrides the spec's ``max_rel_gap``.
    scale : {"quick", "default", "full"}
        Size of experiment specs (see :data:`gtvcvx.experiments.SCALES`).
    cache : ReferenceCache, optional
        Where reference solutions are cached.
    out_dir : path, optional
        Where experiments write their figures (default: a temporary directory).
    studies : gtvcvx.experiments.StudyStore, optional
        Study records shared by the specs of one run (a summary experiment reuses them).
    """
    task = task_for(spec)
    checks = thresholds(spec, max_rel_gap)
    report = SpecCheck(name=spec.name, path=str(spec.path), kind=task.kind)
    t0 = time.perf_counter()
    try:
        task.check(spec, checks, report, solver=solver, reference=reference, cache=cache, scale=scale,
                   out_dir=out_dir, studies=studies)
    except Exception as exc:  # noqa: BLE001 - a crash is a failed check with the reason
        report.outcomes.append(CheckOutcome("run", None, None, "", ERROR if isinstance(exc, ValueError) else FAILED,
                                            f"{type(exc).__name__}: {' '.join(str(exc).split())}"))
    report.time = time.perf_counter() - t0
    return report
