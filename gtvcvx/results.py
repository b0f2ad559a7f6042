"""Result types and the one status vocabulary shared by every backend."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["Status", "SOLUTION_STATUSES", "GTVResult", "SolveResult", "WrappedSolve", "RESULT_ROW_KEYS", "relative_gap",
           "resolution_message", "out_of_reach_message", "gap_stalled", "tol_out_of_reach"]


class Status(StrEnum):
    """Outcome of a solve, the same words for the fast core and every CVXPY backend."""

    OPTIMAL = "optimal"
    MAX_ITER = "max_iter"
    TIME_LIMIT = "time_limit"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    SOLVER_ERROR = "solver_error"
    INACCURATE = "inaccurate"
    #: bounded below, but the infimum is not attained (e.g. logistic loss on separable data)
    NO_MINIMIZER = "no_minimizer"


#: Statuses whose run returns a point worth certifying (a solver stopped short of its tolerance, or at a limit,
#: still has one); the others (infeasible, unbounded, solver_error, no_minimizer) have none.
SOLUTION_STATUSES = (Status.OPTIMAL, Status.INACCURATE, Status.MAX_ITER, Status.TIME_LIMIT)


def relative_gap(primal: float, dual: float) -> float:
    """``(P - D) / (1 + |P| + |D|)``; ``nan`` when either value is missing, ``inf`` if ``D = -inf``."""
    if np.isnan(primal) or np.isnan(dual):
        return float("nan")
    if not (np.isfinite(primal) and np.isfinite(dual)):
        return float("inf")
    return float((primal - dual) / (1.0 + abs(primal) + abs(dual)))


def resolution_message(tol: float, resolution: float) -> str:
    """Why ``tol`` is below what float64 can certify on a problem whose certificate's rounding
    allowance alone is a relative gap of ``resolution``."""
    return (f"float64 cannot certify tol = {tol:g} on this problem: rounding alone allows a relative "
            f"gap of {resolution:.3g} (rescale the data or loosen tol)")


def out_of_reach_message(tol: float, resolution: float, rel_gap: float) -> str:
    """The message of a run stopped by :func:`tol_out_of_reach` at certified ``rel_gap``."""
    return f"{resolution_message(tol, resolution)}; stopped at certified rel_gap {rel_gap:.3g}"


def gap_stalled(gaps, checks: int) -> bool:
    """Whether the last of ``gaps`` (best relative gaps, one per check) is above 90 % of the one
    ``checks`` checks before: no 10 % gain over the last ``checks`` checks."""
    return len(gaps) > checks and gaps[-1] > 0.9 * gaps[-1 - checks]


def tol_out_of_reach(tol: float, resolution: float, gaps, *, factor: float = 2.0, near: float = 100.0,
                     checks: int = 5) -> bool:
    """Whether a run asked for a ``tol`` below its certificate's ``resolution`` has gone as far as
    it usefully can: its best relative gap (the last of ``gaps``, the best gap after each check) is
    within ``factor`` of the resolution, or within ``near`` of it and has not fallen by 10 % over the
    last ``checks`` checks (a plateau far above the resolution, e.g. a certificate lagging the
    iterates, is not a reason to stop). Never true when ``tol`` can be certified."""
    if not resolution > tol or len(gaps) == 0 or not np.isfinite(gaps[-1]):
        return False
    if gaps[-1] <= factor * resolution:
        return True
    return gaps[-1] <= near * resolution and gap_stalled(gaps, checks)


#: Keys every result's ``to_row()`` carries, under these names, whatever the problem family.
RESULT_ROW_KEYS = ("solver", "status", "primal", "dual", "gap", "rel_gap", "iterations", "setup_time", "solve_time")


@runtime_checkable
class SolveResult(Protocol):
    """What every certified solve returns: GTV, clustering, RKHS and federated results alike.

    Attributes
    ----------
    status : Status
        One word of the shared vocabulary (``ok`` is ``status == "optimal"``).
    solver : str
        The fast core (``"fast"``, ...) or the CVXPY backend that produced the point.
    primal, dual : float
        Objective at the primal point and a certified lower bound from the dual point.
    gap, rel_gap : float
        ``primal - dual`` and ``(primal - dual) / (1 + |primal| + |dual|)``.
    iterations : int or None
    setup_time, solve_time, total_time : float
        Seconds.
    history : pandas.DataFrame or None
        Convergence history, one row per certificate check-point.

    Notes
    -----
    ``to_row()`` returns one flat dictionary with at least :data:`RESULT_ROW_KEYS`, so tables of
    mixed results line up. A structural :class:`typing.Protocol`: ``isinstance(r, SolveResult)``
    checks the attributes, not a base class.
    """

    status: Any
    solver: str
    primal: float
    dual: float
    gap: float
    rel_gap: float
    iterations: int | None
    setup_time: float
    solve_time: float
    history: Any

    @property
    def ok(self) -> bool: ...

    @property
    def total_time(self) -> float: ...

    def to_row(self) -> dict:
        """One flat dictionary (a pandas row) with at least :data:`RESULT_ROW_KEYS`."""


class SolveTimes:
    """``ok`` and ``total_time`` of results with ``status``, ``setup_time`` and ``solve_time``."""

    @property
    def ok(self) -> bool:
        """True when the status is ``optimal``."""
        return self.status == Status.OPTIMAL

    @property
    def total_time(self) -> float:
        """Setup (e.g. CVXPY compilation) plus solve time, seconds."""
        return self.setup_time + self.solve_time


class WrappedSolve(SolveTimes):
    """:class:`SolveResult` attributes of a result that wraps one certified solve.

    Subclasses name the wrapped result in ``_solve_field`` (e.g. clustering's ``gtv``, the federated
    protocol's ``server``); status, values, gap and history are read from it, never copied.
    """

    _solve_field: str = ""

    def _wrapped(self):
        return getattr(self, self._solve_field)

    status = property(lambda self: self._wrapped().status, doc="Status of the wrapped solve.")
    solver = property(lambda self: self._wrapped().solver, doc="Solver of the wrapped solve.")
    primal = property(lambda self: self._wrapped().primal, doc="Primal objective of the wrapped solve.")
    dual = property(lambda self: self._wrapped().dual, doc="Certified lower bound of the wrapped solve.")
    gap = property(lambda self: self._wrapped().gap, doc="Duality gap ``primal - dual``.")
    rel_gap = property(lambda self: self._wrapped().rel_gap, doc="``gap / (1 + |primal| + |dual|)``.")
    iterations = property(lambda self: self._wrapped().iterations, doc="Iterations of the wrapped solve.")
    setup_time = property(lambda self: self._wrapped().setup_time, doc="Setup seconds of the wrapped solve.")
    solve_time = property(lambda self: self._wrapped().solve_time, doc="Solve seconds of the wrapped solve.")
    history = property(lambda self: self._wrapped().history, doc="Convergence history of the wrapped solve.")


@dataclass
class GTVResult(SolveTimes):
    """Solution and certificate of a GTV problem from any solver.

    Attributes
    ----------
    status : Status
    solver : str
        ``"fast"``, ``"CLARABEL"``, ``"SCS"``, ...
    W : ndarray (n, d) or None
        Local model parameters.
    U : ndarray (|E|, d) or None
        Edge flows (dual variables).
    primal : float
        ``P(W)`` evaluated by gtvcvx (``nan`` without ``W``).
    dual : float
        ``D(U)`` evaluated by gtvcvx at a feasible flow (``nan`` without ``U``; ``-inf`` when no
        feasible flow could be certified).
    gap, rel_gap : float
        ``P - D`` and ``(P - D) / (1 + |P| + |D|)``.
    value : float
        The objective value reported by the backend itself.
    iterations : int or None
    setup_time, solve_time : float
        Seconds (for CVXPY: compilation and solver time).
    residuals : dict
        Named optimality residuals (e.g. flow conservation, stationarity).
    history : pandas.DataFrame or None
        Per check-point convergence history.
    message : str
        Human-readable detail (why a status, what a backend said).
    info : dict
        Backend-specific extras.
    """

    status: Status
    solver: str
    W: np.ndarray | None = None
    U: np.ndarray | None = None
    primal: float = float("nan")
    dual: float = float("nan")
    gap: float = float("nan")
    rel_gap: float = float("nan")
    value: float = float("nan")
    iterations: int | None = None
    setup_time: float = 0.0
    solve_time: float = 0.0
    residuals: dict = field(default_factory=dict)
    history: Any = None
    message: str = ""
    info: dict = field(default_factory=dict)

    def to_row(self) -> dict:
        """One flat dictionary (a pandas row) for reports."""
        row = {
            "solver": self.solver,
            "status": str(self.status),
            "primal": self.primal,
            "dual": self.dual,
            "gap": self.gap,
            "rel_gap": self.rel_gap,
            "value": self.value,
            "iterations": self.iterations,
            "setup_time": self.setup_time,
            "solve_time": self.solve_time,
        }
        row.update({f"res_{k}": v for k, v in self.residuals.items()})
        if self.message:
            row["message"] = self.message
        return row

    def __repr__(self) -> str:
        return (f"GTVResult(solver={self.solver!r}, status={str(self.status)!r}, primal={self.primal:.10g}, "
                f"dual={self.dual:.10g}, rel_gap={self.rel_gap:.3g}, iterations={self.iterations}, "
                f"time={self.total_time:.3g}s)")
