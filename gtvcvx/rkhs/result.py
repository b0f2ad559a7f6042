"""Result type of a kernel-sparse classification solve (fast core or CVXPY reference)."""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..results import SolveTimes, Status

__all__ = ["RKHSResult", "critical_mask", "check_critical_tol", "DEFAULT_CRITICAL_TOL"]

#: A sample is critical when ``lambda_n > DEFAULT_CRITICAL_TOL * max(1, max(lambda))``.
DEFAULT_CRITICAL_TOL = 1e-6


def check_critical_tol(critical_tol) -> float:
    """``critical_tol`` as a float in ``[0, 1)``, or a ValueError naming it (a negative value would make
    every sample critical, NaN none)."""
    if (isinstance(critical_tol, bool) or not isinstance(critical_tol, numbers.Real)
            or not 0.0 <= float(critical_tol) < 1.0):
        raise ValueError(f"critical_tol must be a number in [0, 1) (a fraction of the largest multiplier), "
                         f"got {critical_tol!r}")
    return float(critical_tol)


def critical_mask(lam, critical_tol: float = DEFAULT_CRITICAL_TOL) -> np.ndarray:
    """Boolean mask of the critical samples: ``lambda_n > critical_tol * max(1, max_n lambda_n)``.

    The relative threshold absorbs the round-off of interior-point backends, whose inactive
    multipliers are tiny positive numbers rather than exact zeros.
    """
    lam = np.asarray(lam, dtype=float)
    if lam.size == 0:
        return np.zeros(0, dtype=bool)
    return lam > critical_tol * max(1.0, float(np.max(lam)))


@dataclass
class RKHSResult(SolveTimes):
    """Solution and certificate of a kernel-sparse classification problem.

    Attributes
    ----------
    status : Status
    solver : str
        ``"fast"`` (with ``info["method"]``), ``"CLARABEL"``, ``"SCS"``, ...
    multipliers : ndarray (N,) or None
        Dual multipliers ``lambda`` (projected onto ``[0, C]``); formerly ``lam`` (a deprecated alias): in
        gtvcvx ``lam`` is always the regularization weight.
    alpha : ndarray (M,) or None
        L0 primal recovery ``alpha_j = abar_j if abar_j^2 > 2 gamma else 0``.
    alpha_envelope : ndarray (M,) or None
        A *feasible* point of the convex-envelope primal (``None`` when none could be built).
    primal : float
        Envelope primal objective at ``alpha_envelope`` (``inf`` without a feasible point).
    dual : float
        Dual objective at ``lam`` (a lower bound on the envelope optimum).
    gap, rel_gap : float
        ``primal - dual`` and ``(primal - dual) / (1 + |primal| + |dual|)``: a true duality gap,
        never smaller than the suboptimality of ``lam`` or of ``alpha_envelope``.
    l0_primal, l0_gap : float
        L0 objective at ``alpha`` (``inf`` for a hard margin it violates) and ``l0_primal - dual``.
    margin_violation : float
        ``max_n pos(1 - eps - y_n f(x_n))`` for the L0 recovery ``alpha``.
    n_kernels : int
        Nonzero entries of the coefficients used for prediction (see ``info["coef"]``).
    n_critical : int
        Samples with ``lambda_n`` above the critical threshold.
    iterations : int or None
    setup_time, solve_time : float
        Seconds (for CVXPY: compilation and backend time).
    history : pandas.DataFrame or None
        Columns ``iteration, time, dual, primal, gap, rel_gap, restarts`` (plus method extras).
    accuracy : float
        Test accuracy when a test set was evaluated (``nan`` otherwise).
    message : str
    info : dict
    """

    status: Status
    solver: str
    multipliers: np.ndarray | None = None
    alpha: np.ndarray | None = None
    alpha_envelope: np.ndarray | None = None
    primal: float = float("nan")
    dual: float = float("nan")
    gap: float = float("nan")
    rel_gap: float = float("nan")
    l0_primal: float = float("nan")
    l0_gap: float = float("nan")
    margin_violation: float = float("nan")
    n_kernels: int = 0
    n_critical: int = 0
    iterations: int | None = None
    setup_time: float = 0.0
    solve_time: float = 0.0
    history: Any = None
    accuracy: float = float("nan")
    message: str = ""
    info: dict = field(default_factory=dict)

    @property
    def lam(self) -> np.ndarray | None:
        """Deprecated name of :attr:`multipliers` (``lam`` means the regularization weight elsewhere)."""
        import warnings

        warnings.warn("RKHSResult.lam is deprecated; use RKHSResult.multipliers", DeprecationWarning, stacklevel=2)
        return self.multipliers

    @property
    def feasible_primal(self) -> bool:
        """True when ``primal`` was evaluated at a feasible envelope-primal point."""
        return self.alpha_envelope is not None

    def coefficients(self, kind: str = "envelope") -> np.ndarray | None:
        """``"envelope"`` (feasible convex-envelope point) or ``"l0"`` (the paper's recovery)."""
        if kind == "envelope":
            return self.alpha_envelope
        if kind == "l0":
            return self.alpha
        raise ValueError(f"kind must be 'envelope' or 'l0', got {kind!r}")

    def critical_samples(self, critical_tol: float = 1e-6) -> np.ndarray:
        """Indices of the samples with ``lambda_n > critical_tol * max(1, max(lambda))``."""
        if self.multipliers is None:
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(critical_mask(self.multipliers, critical_tol))

    def to_row(self) -> dict:
        """One flat dictionary (a pandas row) for reports."""
        row = {
            "solver": self.solver,
            "method": self.info.get("method", ""),
            "status": str(self.status),
            "primal": self.primal,
            "dual": self.dual,
            "gap": self.gap,
            "rel_gap": self.rel_gap,
            "l0_primal": self.l0_primal,
            "l0_gap": self.l0_gap,
            "margin_violation": self.margin_violation,
            "n_kernels": self.n_kernels,
            "n_critical": self.n_critical,
            "accuracy": self.accuracy,
            "iterations": self.iterations,
            "setup_time": self.setup_time,
            "solve_time": self.solve_time,
        }
        if self.message:
            row["message"] = self.message
        return row

    def __repr__(self) -> str:
        return (f"RKHSResult(solver={self.solver!r}, status={str(self.status)!r}, dual={self.dual:.10g}, "
                f"primal={self.primal:.10g}, rel_gap={self.rel_gap:.3g}, n_kernels={self.n_kernels}, "
                f"n_critical={self.n_critical}, iterations={self.iterations}, time={self.total_time:.3g}s)")
