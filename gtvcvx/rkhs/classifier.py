"""A scikit-learn-style estimator for the kernel-sparse classifier (no sklearn dependency)."""

from __future__ import annotations

import inspect
import warnings

import numpy as np

from .._validation import as_float_array
from ..results import Status
from .dictionary import Dictionary
from .problem import RKHSProblem, encode_labels
from .result import DEFAULT_CRITICAL_TOL, RKHSResult, critical_mask
from .solver import METHODS, solve_dual

__all__ = ["SparseKernelClassifier", "NotFittedError", "ConvergenceWarning", "SOLVERS", "solve_problem"]

#: Solvers an estimator accepts: the fast core or a CVXPY backend.
SOLVERS = ("fast", "CLARABEL", "SCS")


class NotFittedError(ValueError, AttributeError):
    """The estimator is used before :meth:`SparseKernelClassifier.fit`."""


class ConvergenceWarning(UserWarning):
    """A solve stopped at a limit before its certified gap reached the tolerance."""


def solve_problem(problem: RKHSProblem, solver: str = "fast", *, method: str = "ssnal", tol: float | None = None,
                  max_iter=None, time_limit=None, lam0=None, critical_tol: float = DEFAULT_CRITICAL_TOL,
                  solver_options: dict | None = None, statement: str = "dual") -> RKHSResult:
    """Solve an :class:`RKHSProblem` with the fast core or a CVXPY backend (dual statement by default).

    ``tol`` is the fast core's relative gap (default 1e-6); for a CVXPY backend, when given, it is
    mapped to the backend's own tolerances (see :func:`gtvcvx.runner.run_solver`).
    """
    solver = _normalize_solver(solver)
    opts = dict(solver_options or {})
    if solver == "fast":
        return solve_dual(problem, method=method, tol=1e-6 if tol is None else tol, max_iter=max_iter,
                          time_limit=time_limit, lam0=lam0, critical_tol=critical_tol, **opts)
    from .reference import solve_rkhs_dual, solve_rkhs_primal

    if tol is not None:
        opts.setdefault("tol", tol)
    if max_iter is not None:
        opts.setdefault("max_iter", max_iter)
    if time_limit is not None:
        opts.setdefault("time_limit", time_limit)
    if statement not in ("dual", "primal"):
        raise ValueError(f"statement must be 'dual' or 'primal', got {statement!r}")
    fn = solve_rkhs_dual if statement == "dual" else solve_rkhs_primal
    return fn(problem, solver, critical_tol=critical_tol, **opts)


def _normalize_solver(solver) -> str:
    if not isinstance(solver, str) or not solver:
        raise ValueError(f"solver must be one of {SOLVERS} (or another CVXPY backend), got {solver!r}")
    return "fast" if solver.lower() == "fast" else solver.upper()


class SparseKernelClassifier:
    r"""Kernel-sparse classifier over a multiresolution Gaussian dictionary.

    Fits ``f(x) = sum_j Delta_j alpha_j k(x, s_j; w_j)`` by solving the dual of
    ``min sum_j Delta_j (alpha_j^2/2 + gamma [alpha_j != 0])`` s.t. ``y_n f(x_n) >= 1 - eps``
    (hinge slack with cost ``(C/N) sum xi`` when ``C`` is given) and predicts ``sign f(x)``.

    Parameters
    ----------
    dictionary : Dictionary
    gamma : float
        Sparsity weight (> 0): an atom is used only when ``|abar_j| > sqrt(2 gamma)``.
    eps : float
        Margin slack (>= 0).
    C : float or None
        Soft-margin bound on the multipliers; ``None`` is the paper's hard margin (fit raises a
        ValueError when the margins cannot all hold).
    solver : {"fast", "CLARABEL", "SCS"}
    method : {"ssnal", "pdhg", "subgradient"}
        Algorithm of the fast core.
    tol : float
        Relative duality-gap tolerance.
    max_iter, time_limit : optional
    recovery : {"envelope", "l0"}
        Coefficients used for prediction: the feasible convex-envelope primal point that
        certifies the gap (default; it satisfies every margin) or the paper's L0 recovery
        ``alpha_j = abar_j [abar_j^2 > 2 gamma]`` (falls back to it when no feasible point exists).
    critical_tol : float
        A sample is critical when ``lambda_n > critical_tol * max(1, max(lambda))``.
    solver_options : dict, optional
        Extra options for the fast core or the CVXPY backend.

    Attributes
    ----------
    classes_ : ndarray (2,)
        ``classes_[0]`` is encoded ``-1``, ``classes_[1]`` is ``+1``.
    dual_ : ndarray (N,)
        The multipliers ``lambda``.
    alpha_ : ndarray (M,)
        Coefficients used for prediction (see ``recovery``).
    alpha_l0_, alpha_envelope_ : ndarray (M,) or None
    critical_samples_ : ndarray of int
        Training indices with ``lambda_n`` above ``critical_threshold_``.
    critical_threshold_ : float
    n_kernels_ : int
        Nonzero entries of ``alpha_``.
    gap_, rel_gap_ : float
        Certified duality gap of the fit.
    status_ : Status
    result_ : RKHSResult
    n_features_in_ : int
    """

    def __init__(self, dictionary, gamma=0.5, eps=0.1, C=None, solver="fast", *, method="ssnal", tol=1e-6,
                 max_iter=None, time_limit=None, recovery="envelope", critical_tol=DEFAULT_CRITICAL_TOL,
                 solver_options=None):
        self.dictionary = dictionary
        self.gamma = gamma
        self.eps = eps
        self.C = C
        self.solver = solver
        self.method = method
        self.tol = tol
        self.max_iter = max_iter
        self.time_limit = time_limit
        self.recovery = recovery
        self.critical_tol = critical_tol
        self.solver_options = solver_options

    # ------------------------------------------------------------------ params
    @classmethod
    def _param_names(cls):
        sig = inspect.signature(cls.__init__)
        return [n for n in sig.parameters if n != "self"]

    def get_params(self, deep: bool = True) -> dict:
        """The constructor parameters (scikit-learn convention)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params) -> "SparseKernelClassifier":
        """Set constructor parameters; unknown names raise a ValueError naming them."""
        valid = set(self._param_names())
        for key, value in params.items():
            if key not in valid:
                raise ValueError(f"invalid parameter {key!r} for SparseKernelClassifier; "
                                 f"valid parameters: {sorted(valid)}")
            setattr(self, key, value)
        return self

    def __repr__(self) -> str:
        return (f"SparseKernelClassifier(dictionary={self.dictionary!r}, gamma={self.gamma!r}, eps={self.eps!r}, "
                f"C={self.C!r}, solver={self.solver!r})")

    def _check_params(self):
        if not isinstance(self.dictionary, Dictionary):
            raise ValueError(f"dictionary must be a gtvcvx.rkhs.Dictionary, got {type(self.dictionary).__name__}")
        solver = _normalize_solver(self.solver)
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if self.recovery not in ("envelope", "l0"):
            raise ValueError(f"recovery must be 'envelope' or 'l0', got {self.recovery!r}")
        return solver

    # ------------------------------------------------------------------ fit / predict
    def fit(self, X, y, *, lam0=None) -> "SparseKernelClassifier":
        """Fit on samples ``X`` (N, d) with labels ``y`` (N,) of exactly two classes.

        Parameters
        ----------
        lam0 : array_like (N,), optional
            Warm start for the multipliers (fast solver).

        Raises
        ------
        ValueError
            Bad input (naming the argument), or a hard margin that cannot hold (status
            ``unbounded`` / ``infeasible``; ``status_`` and ``result_`` are still set).
        """
        solver = self._check_params()
        X = as_float_array(X, "X", ndim=2)
        if X.shape[0] == 0:
            raise ValueError("X must hold at least one sample")
        if X.shape[1] != self.dictionary.dim:
            raise ValueError(f"X must have {self.dictionary.dim} columns (the dictionary's dimension), got {X.shape[1]}")
        y_arr = np.asarray(y)
        if y_arr.ndim != 1 or y_arr.shape[0] != X.shape[0]:
            raise ValueError(f"y must be a 1-D array with one label per row of X ({X.shape[0]}), got shape {y_arr.shape}")
        y_pm, classes = encode_labels(y_arr, "y")
        problem = RKHSProblem(X, y_pm, self.dictionary, self.gamma, self.eps, self.C)
        result = solve_problem(problem, solver, method=self.method, tol=self.tol, max_iter=self.max_iter,
                               time_limit=self.time_limit, lam0=lam0, critical_tol=self.critical_tol,
                               solver_options=self.solver_options)
        return self._set_fitted(result, classes, X.shape[1])

    def _set_fitted(self, result: RKHSResult, classes, n_features: int) -> "SparseKernelClassifier":
        self.status_ = result.status
        self.result_ = result
        for name in ("classes_", "dual_", "alpha_", "alpha_l0_", "alpha_envelope_", "critical_samples_"):
            self.__dict__.pop(name, None)
        if result.status in (Status.UNBOUNDED, Status.INFEASIBLE) or result.multipliers is None:
            raise ValueError(f"fit failed with status {str(result.status)!r}: "
                             f"{result.message or 'the solver returned no solution'}")
        if result.status != Status.OPTIMAL:
            warnings.warn(f"solve stopped with status {str(result.status)!r} at relative gap {result.rel_gap:.3g}: "
                          f"{result.message}", ConvergenceWarning, stacklevel=3)
        self.classes_ = np.asarray(classes)
        self.dual_ = result.multipliers
        self.alpha_l0_ = result.alpha
        self.alpha_envelope_ = result.alpha_envelope
        if self.recovery == "envelope" and result.alpha_envelope is not None:
            self.alpha_ = result.alpha_envelope
        else:
            if self.recovery == "envelope":
                warnings.warn("no feasible envelope-primal point; predicting with the L0 recovery",
                              ConvergenceWarning, stacklevel=3)
            self.alpha_ = result.alpha
        self.critical_threshold_ = self.critical_tol * max(1.0, float(np.max(result.multipliers))) if result.multipliers.size else 0.0
        self.critical_samples_ = np.flatnonzero(critical_mask(result.multipliers, self.critical_tol))
        self.n_kernels_ = int(np.count_nonzero(self.alpha_))
        self.gap_ = result.gap
        self.rel_gap_ = result.rel_gap
        self.n_features_in_ = n_features
        return self

    def _check_fitted(self):
        if not hasattr(self, "alpha_"):
            raise NotFittedError("this SparseKernelClassifier is not fitted yet; call fit(X, y) first")

    def decision_function(self, X) -> np.ndarray:
        """``f(x) = sum_j Delta_j alpha_j k(x, s_j; w_j)``; positive values predict ``classes_[1]``."""
        self._check_fitted()
        X = as_float_array(X, "X", ndim=2)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X must have {self.n_features_in_} columns (as in fit), got {X.shape[1]}")
        return self.dictionary.evaluate(X, self.alpha_)

    def predict(self, X) -> np.ndarray:
        """Class labels (``classes_[1]`` where ``f(x) > 0``, else ``classes_[0]``)."""
        f = self.decision_function(X)
        return self.classes_[(f > 0).astype(int)]

    def score(self, X, y) -> float:
        """Mean accuracy on ``(X, y)``."""
        self._check_fitted()
        y = np.asarray(y)
        X_arr = as_float_array(X, "X", ndim=2)
        if y.ndim != 1 or y.shape[0] != X_arr.shape[0]:
            raise ValueError(f"y must be a 1-D array with one label per row of X ({X_arr.shape[0]}), got shape {y.shape}")
        unknown = ~np.isin(y, self.classes_)
        if unknown.any():
            raise ValueError(f"y holds labels not seen in fit: {np.unique(y[unknown]).tolist()[:5]}; "
                             f"expected {self.classes_.tolist()}")
        return float(np.mean(self.predict(X_arr) == y))
