"""The kernel-sparse classifier as a scikit-learn estimator (``ClassifierMixin`` + ``BaseEstimator``).

It passes scikit-learn's ``check_estimator`` (run in the test suite through
``parametrize_with_checks``), so it works in ``GridSearchCV``, ``cross_val_score`` and pipelines.
The dictionary can be built from the training data at fit time (``dictionary="samples"``,
``"grid"``, ``"sobol"``), so cross-validation does not leak and the number of features is not
fixed at construction. More than two classes are fitted one-vs-rest on one shared dictionary.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import time
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning as _SklearnConvergenceWarning
from sklearn.exceptions import NotFittedError as _SklearnNotFittedError
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

from .._threads import blas_threads
from .._validation import check_gap_tolerance, check_magnitude, check_time_limit
from ..results import Status
from .dictionary import Dictionary
from .problem import RKHSProblem, _check_positive
from .result import DEFAULT_CRITICAL_TOL, RKHSResult, check_critical_tol, critical_mask
from .solver import METHODS, _checked_solver_options, _normalize_solver, solve_problem

__all__ = ["SparseKernelClassifier", "NotFittedError", "ConvergenceWarning", "DICTIONARIES"]

class NotFittedError(_SklearnNotFittedError):
    """The estimator is used before :meth:`SparseKernelClassifier.fit` (scikit-learn's ``NotFittedError``)."""


class ConvergenceWarning(_SklearnConvergenceWarning):
    """A solve stopped at a limit before its certified gap reached the tolerance (scikit-learn's kind)."""


def _rounded_down(value: float) -> str:
    """``value`` to three significant digits, rounded toward ``-inf`` (a quoted lower bound stays one)."""
    if not math.isfinite(value) or value == 0.0:
        return f"{value:g}"
    unit = 10.0 ** (math.floor(math.log10(abs(value))) - 2)
    return f"{math.floor(value / unit) * unit:.3g}"


#: With ``recovery="l0"`` and a hard margin, a fit warns when the L0 coefficients violate a margin by more than
#: this fraction of ``1 - eps`` (they come from the multipliers, whose error is of the order of the square root
#: of the gap's: violations ~1e-4 are the recovery's usual inaccuracy, not a broken margin).
L0_MARGIN_WARNING = 1e-2


#: How :class:`SparseKernelClassifier` builds its dictionary from the training data at fit time.
DICTIONARIES = ("samples", "grid", "sobol")


class SparseKernelClassifier(ClassifierMixin, BaseEstimator):
    r"""Kernel-sparse classifier over a multiresolution Gaussian dictionary (a scikit-learn estimator).

    Fits ``f(x) = sum_j Delta_j alpha_j k(x, s_j; w_j)`` by solving the dual of
    ``min sum_j Delta_j (alpha_j^2/2 + gamma [alpha_j != 0])`` s.t. ``y_n f(x_n) >= 1 - eps``
    (hinge slack with cost ``(C/N) sum xi`` when ``C`` is given) and predicts ``sign f(x)``;
    more than two classes are fitted one-vs-rest on one shared dictionary.

    Parameters
    ----------
    dictionary : {"samples", "grid", "sobol"} or Dictionary, default="samples"
        The atoms. A string builds them from the training data at fit time: ``"samples"``
        centers at (up to ``n_centers``, drawn with ``random_state``) training samples,
        ``"grid"`` a regular grid and ``"sobol"`` a scrambled Sobol set of ``n_centers``
        points in the training data's bounding box; every center is repeated once per width
        and every atom weighs ``Delta_j = atom_weight`` (default 1).
        A :class:`Dictionary` is used as given, weights included (its dimension must match the data).
    gamma : float, default=0.5
        Sparsity weight (> 0): an atom is used only when ``|abar_j| > sqrt(2 gamma)``.
    eps : float, default=0.1
        Margin slack (>= 0).
    C : float or None, default=1000.0
        Soft-margin bound on the multipliers; ``None`` is the paper's hard margin (fit raises a
        ValueError when the margins cannot all hold, as decided by a feasibility LP, HiGHS, or the
        CVXPY backend, to their tolerances: margins that need coefficients far beyond the data's
        scale, as for samples with opposite labels nearly on top of each other, count as infeasible).
    solver : {"fast", "CLARABEL", "SCS"}, default="fast"
    widths : float, sequence of float or None, default=None
        Kernel widths of a built dictionary. ``None``: ``(w0 / 2, w0)`` with
        ``w0 = sqrt(d var(X) / 2)``, the width of scikit-learn's ``SVC(gamma="scale")`` kernel.
    n_centers : int, default=500
        Centers of a built dictionary (``"grid"``: ``floor(n_centers^(1/d))`` points per
        dimension, at least 2).
    atom_weight : float or None, default=1.0
        ``Delta_j`` of a built dictionary's atoms (> 0); ``None`` is ``1 / (number of centers)``,
        the quadrature weight of the paper's integral over the centers. With ``beta_j = Delta_j
        alpha_j`` the model is ``f = sum_j beta_j k_j`` at cost ``sum_j (beta_j^2 / (2 Delta_j) +
        Delta_j gamma [beta_j != 0])``, so ``Delta_j = 1`` makes ``gamma`` the price of one kernel
        in units of ``beta^2/2`` while the quadrature weight weighs the L2 term ``n_centers`` times
        more and the sparsity term ``n_centers`` times less. Measured on the ellipses (N = 1000,
        standardized, 500 centers x 2 widths): ``None`` used 953 atoms at test accuracy 0.877 in
        4.6 s, ``1.0`` 67 atoms at 0.979 in 0.3 s (SVC: 386 support vectors, 0.937); at
        N = 10^4 (with SSNAL's working set of samples) ``None`` stopped at the 120 s limit
        (relative gap 0.02, accuracy 0.869), ``1.0`` was optimal in 7.9 s with 63 atoms at 0.980;
        hence the default 1.
    method : {"ssnal", "pdhg", "subgradient"}, default="ssnal"
        Algorithm of the fast core.
    tol : float, default=1e-6
        Relative duality-gap tolerance.
    max_iter : int, optional
        Iterations of each solve (the method's default when None).
    time_limit : float, optional
        Seconds for the whole fit: the one-vs-rest problems share it, in order (a problem
        reached after it has run out stops at its first check, status ``time_limit``).
    recovery : {"envelope", "l0"}, default="envelope"
        Coefficients used for prediction: the feasible convex-envelope primal point that
        certifies the gap (it satisfies every margin) or the paper's L0 recovery
        ``alpha_j = abar_j [abar_j^2 > 2 gamma]`` (falls back to it when no feasible point exists).
    critical_tol : float
        A sample is critical when ``lambda_n > critical_tol * max(1, max(lambda))``.
    solver_options : dict, optional
        Extra options for the fast core or the CVXPY backend.
    blas_threads : int or None, default=1
        BLAS threads during fit and prediction (one is fastest for the solver's small dense
        blocks on a shared machine); ``None`` keeps the process setting.
    random_state : int, RandomState or None, default=0
        Draws the centers of ``"samples"`` (when there are more samples than ``n_centers``)
        and scrambles ``"sobol"``.
    verbose : bool, default=False
        Print the fast core's progress to stdout: every certificate check with the elapsed
        seconds, the best dual and primal bounds and the relative gap (and, from 2000 samples,
        each working-set round). Silent by default, as scikit-learn's estimators are.

    Attributes
    ----------
    classes_ : ndarray (n_classes,)
        With two classes ``classes_[0]`` is encoded ``-1`` and ``classes_[1]`` ``+1``.
    dictionary_ : Dictionary
        The atoms used (built at fit time, or the given one).
    dual_ : ndarray (N,) or (n_classes, N)
        The multipliers ``lambda`` (one row per one-vs-rest problem with more than two classes).
    alpha_ : ndarray (M,) or (n_classes, M)
        Coefficients used for prediction (see ``recovery``).
    alpha_l0_, alpha_envelope_ : ndarray or None
        Both recoveries (two classes only; ``results_`` holds them per problem).
    critical_samples_ : ndarray of int
        Training indices with a multiplier above ``critical_threshold_`` (in any problem).
    critical_threshold_ : float or ndarray (n_classes,)
        ``critical_tol * max(1, max(lambda))``, per one-vs-rest problem with more than two classes.
    n_kernels_ : int
        Atoms with a nonzero coefficient (in any problem): the model's size.
    gap_, rel_gap_ : float
        Certified duality gap of the fit (the largest over the one-vs-rest problems).
    n_iter_ : int
        Iterations of the solver (the most over the one-vs-rest problems).
    status_ : Status
        ``optimal`` when every problem is certified to ``tol``, else the first other status (a CVXPY
        backend's ``optimal`` that gtvcvx's certificate does not confirm to ``tol`` is ``inaccurate``,
        with a ConvergenceWarning naming both).
    result_ : RKHSResult
        The (first) problem's result; ``results_`` lists all of them.
    n_features_in_ : int

    Notes
    -----
    The dual of the kernel-sparse problem is solved by the fast core (SSNAL by default) and
    certified by a duality gap (:mod:`gtvcvx.rkhs.certificate`); ``predict_proba`` is not
    provided, since the decision values are not calibrated probabilities.

    References
    ----------
    M. Peifer, L. F. O. Chamon, S. Paternain, A. Ribeiro, "Sparse multiresolution representations
    with adaptive kernels", IEEE Trans. Signal Processing 68, 2020; M. Peifer, A. Ribeiro,
    "Federated classification using parsimonious functions in reproducing kernel Hilbert spaces",
    arXiv:2009.03768 (``../shared/seeds/`` 003).
    """

    def __init__(self, dictionary="samples", gamma=0.5, eps=0.1, C=1000.0, solver="fast", *, widths=None,
                 n_centers=500, atom_weight=1.0, method="ssnal", tol=1e-6, max_iter=None, time_limit=None,
                 recovery="envelope",
                 critical_tol=DEFAULT_CRITICAL_TOL, solver_options=None, blas_threads=1, random_state=0,
                 verbose=False):
        self.dictionary = dictionary
        self.gamma = gamma
        self.eps = eps
        self.C = C
        self.solver = solver
        self.widths = widths
        self.n_centers = n_centers
        self.atom_weight = atom_weight
        self.method = method
        self.tol = tol
        self.max_iter = max_iter
        self.time_limit = time_limit
        self.recovery = recovery
        self.critical_tol = critical_tol
        self.solver_options = solver_options
        self.blas_threads = blas_threads
        self.random_state = random_state
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags

    def _check_params(self) -> str:
        if not (isinstance(self.dictionary, Dictionary) or self.dictionary in DICTIONARIES):
            raise ValueError(f"dictionary must be one of {DICTIONARIES} or a gtvcvx.rkhs.Dictionary, "
                             f"got {self.dictionary!r}")
        if (isinstance(self.n_centers, bool) or not isinstance(self.n_centers, numbers.Integral)
                or self.n_centers < 1):
            raise ValueError(f"n_centers must be a positive integer, got {self.n_centers!r}")
        if self.atom_weight is not None and (
                isinstance(self.atom_weight, bool) or not isinstance(self.atom_weight, numbers.Real)
                or not np.isfinite(self.atom_weight) or self.atom_weight <= 0):
            raise ValueError(f"atom_weight must be None or a positive finite number, got {self.atom_weight!r}")
        solver = _normalize_solver(self.solver)
        _check_positive(self.gamma, "gamma")
        if _check_positive(self.eps, "eps", allow_zero=True) >= 1.0:
            raise ValueError(f"eps must be below 1, got {self.eps!r}: with eps >= 1 the margins y f(x) >= 1 - eps "
                             "hold at f = 0, so the fitted model would be empty")
        if self.C is not None:
            _check_positive(self.C, "C")
        check_gap_tolerance(self.tol, "tol")
        check_time_limit(self.time_limit)
        check_critical_tol(self.critical_tol)
        _checked_solver_options(self.solver_options)
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if self.recovery not in ("envelope", "l0"):
            raise ValueError(f"recovery must be 'envelope' or 'l0', got {self.recovery!r}")
        return solver

    # ------------------------------------------------------------------ dictionary
    def _widths(self, X: np.ndarray):
        if self.widths is not None:
            return self.widths
        w0 = float(np.sqrt(X.shape[1] * X.var() / 2.0))
        return (0.5 * w0, w0) if w0 > 0 else (1.0,)

    def _atom_weight(self, n_centers: int) -> float:
        return 1.0 / n_centers if self.atom_weight is None else float(self.atom_weight)

    def _build_dictionary(self, X: np.ndarray) -> Dictionary:
        """The given dictionary, or one built from the training samples ``X`` (see ``dictionary``)."""
        if isinstance(self.dictionary, Dictionary):
            if self.dictionary.dim != X.shape[1]:
                raise ValueError(f"X has {X.shape[1]} features, but the dictionary's atoms have "
                                 f"{self.dictionary.dim} (dictionary.dim)")
            return self.dictionary
        widths, rng = self._widths(X), check_random_state(self.random_state)
        if self.dictionary == "samples":
            points = np.unique(X, axis=0)
            if points.shape[0] > self.n_centers:
                points = points[np.sort(rng.choice(points.shape[0], self.n_centers, replace=False))]
            return Dictionary.from_samples(points, widths, weights=self._atom_weight(points.shape[0]))
        low, high = X.min(axis=0), X.max(axis=0)
        pad = 0.5 * np.where(high > low, 0.0, np.maximum(np.abs(low), 1.0))  # a constant feature
        bounds = np.column_stack([low - pad, high + pad])
        d = X.shape[1]
        if self.dictionary == "grid":
            per_dim = max(2, int(np.floor(self.n_centers ** (1.0 / d) + 1e-9)))
            if per_dim ** d > 10 * self.n_centers:
                raise ValueError(f"dictionary='grid' needs {per_dim}^{d} = {float(per_dim) ** d:.3g} centers for "
                                 f"{d} features (n_centers={self.n_centers}); use 'sobol' or 'samples'")
            return Dictionary.grid(bounds, per_dim, widths, weights=self._atom_weight(per_dim ** d))
        return Dictionary.sobol(bounds, self.n_centers, widths, seed=int(rng.randint(2**31)),
                                weights=self._atom_weight(self.n_centers))

    # ------------------------------------------------------------------ fit / predict
    def fit(self, X, y, *, lam0=None) -> "SparseKernelClassifier":
        """Fit on samples ``X`` (N, d) with labels ``y`` (N,) of at least two classes.

        Parameters
        ----------
        X : array_like (N, d)
        y : array_like (N,)
        lam0 : array_like (N,), optional
            Warm start for the multipliers (fast solver, two classes; refused otherwise).

        Raises
        ------
        ValueError
            Bad input or parameters (naming them), one class only, or a hard margin that cannot
            hold (status ``unbounded`` / ``infeasible``; ``status_`` and ``results_`` are still set).
        """
        solver = self._check_params()  # (a refused parameter leaves a previous fit as it was)
        try:
            X, y = validate_data(self, X, y, dtype=np.float64)
            check_magnitude(X, "X")  # (the widths and the kernels square it)
            check_classification_targets(y)
            classes, encoded = np.unique(y, return_inverse=True)
            if classes.size < 2:
                raise ValueError(f"y must hold at least two classes; got {classes.size} class ({classes.tolist()})")
            if lam0 is not None and (solver != "fast" or classes.size > 2):
                raise ValueError("lam0 warms the fast solver's two-class fit; it is not used "
                                 + (f"by solver={self.solver!r}" if solver != "fast"
                                    else f"with {classes.size} classes (one-vs-rest)") + ": pass lam0=None")
            with blas_threads(self.blas_threads):
                dictionary = self._build_dictionary(X)
                targets = ([encoded] if classes.size == 2
                           else [(encoded == k).astype(int) for k in range(classes.size)])
                options = dict(self.solver_options or {})
                if solver == "fast" and self.verbose:
                    options.setdefault("verbose", True)
                results = []
                deadline = None if self.time_limit is None else time.perf_counter() + float(self.time_limit)
                for target in targets:
                    problem = RKHSProblem(X, np.where(target == 1, 1.0, -1.0), dictionary, self.gamma, self.eps,
                                          self.C)
                    # the one-vs-rest problems share the fit's time_limit, in order
                    left = None if deadline is None else max(deadline - time.perf_counter(), 1e-9)
                    results.append(solve_problem(problem, solver, method=self.method, tol=self.tol,
                                                 max_iter=self.max_iter, time_limit=left,
                                                 lam0=lam0 if len(targets) == 1 else None,
                                                 critical_tol=self.critical_tol, solver_options=options))
        except Exception:
            self._forget_fit()  # a failed refit leaves no model from the previous fit behind
            raise
        self.dictionary_ = dictionary
        return self._set_fitted(results, classes, X.shape[1], X)

    #: The attributes a fit sets (:meth:`_forget_fit` removes them).
    _FITTED = ("classes_", "dual_", "alpha_", "alpha_l0_", "alpha_envelope_", "critical_samples_",
               "critical_threshold_", "dictionary_", "n_kernels_", "gap_", "rel_gap_", "n_iter_", "status_",
               "result_", "results_", "n_features_in_", "feature_names_in_")

    def _forget_fit(self) -> None:
        for name in self._FITTED:
            self.__dict__.pop(name, None)

    def _certified(self, result: RKHSResult) -> RKHSResult:
        """``result``, with a CVXPY backend's ``optimal`` that gtvcvx's certificate does not confirm to ``tol``
        turned into ``inaccurate`` (the fast core's ``optimal`` always is: it stops on that certificate)."""
        if result.status != Status.OPTIMAL or result.rel_gap <= self.tol:
            return result
        message = (f"{result.solver} reported 'optimal', but gtvcvx's certificate at its point gives a relative gap "
                   f"of {result.rel_gap:.3g} > tol = {self.tol:g}")
        return dataclasses.replace(result, status=Status.INACCURATE,
                                   message="; ".join(filter(None, [message, result.message])))

    def _set_fitted(self, results, classes, n_features: int, X=None) -> "SparseKernelClassifier":
        """Store the fitted state from one result per one-vs-rest problem (one for two classes); ``X``, the
        training samples, for the warnings about the fitted model."""
        if isinstance(results, RKHSResult):
            results = [results]
        results = [self._certified(r) for r in results]
        self.results_ = list(results)
        self.result_ = results[0]
        bad = next((r for r in results if r.status != Status.OPTIMAL), None)
        self.status_ = Status.OPTIMAL if bad is None else bad.status
        for name in ("classes_", "dual_", "alpha_", "alpha_l0_", "alpha_envelope_", "critical_samples_"):
            self.__dict__.pop(name, None)
        for r in results:
            if r.status in (Status.UNBOUNDED, Status.INFEASIBLE) or r.multipliers is None:
                raise ValueError(f"fit failed with status {str(r.status)!r}: "
                                 f"{r.message or 'the solver returned no solution'}")
        if bad is not None:
            hint = ""
            if self.C is None and not bad.rel_gap < 0.1:  # (inf and nan included)
                # measured: noisy moons, N = 1000, hard margin: CLARABEL stopped 'inaccurate' (dual) and at its
                # iteration limit (primal) too; the optimum is >= 1e11 there, coefficients ~1e7
                hint = (f"; with the hard margin (C=None) the optimal objective is at least {_rounded_down(bad.dual)} "
                        "(certified): a gap that does not close usually means classes that (nearly) overlap for "
                        "this dictionary, so that the margins need huge coefficients; a soft margin C is the remedy")
            warnings.warn(f"solve stopped with status {str(bad.status)!r} at relative gap {bad.rel_gap:.3g}: "
                          f"{bad.message}{hint}", ConvergenceWarning, stacklevel=3)
        alphas = []
        for r in results:
            if self.recovery == "envelope" and r.alpha_envelope is not None:
                alphas.append(r.alpha_envelope)
            else:
                if self.recovery == "envelope":
                    warnings.warn("no feasible envelope-primal point; predicting with the L0 recovery",
                                  ConvergenceWarning, stacklevel=3)
                alphas.append(r.alpha)
        one = len(results) == 1
        self.classes_ = np.asarray(classes)
        self.dual_ = results[0].multipliers if one else np.vstack([r.multipliers for r in results])
        self.alpha_ = alphas[0] if one else np.vstack(alphas)
        self.alpha_l0_ = results[0].alpha if one else None
        self.alpha_envelope_ = results[0].alpha_envelope if one else None
        thresholds = [self.critical_tol * max(1.0, float(r.multipliers.max(initial=0.0))) for r in results]
        self.critical_threshold_ = thresholds[0] if one else np.asarray(thresholds)
        self.critical_samples_ = np.flatnonzero(np.any([critical_mask(r.multipliers, self.critical_tol)
                                                        for r in results], axis=0))
        self.n_kernels_ = int(np.count_nonzero(np.any(np.atleast_2d(self.alpha_) != 0, axis=0)))
        self.gap_ = max(r.gap for r in results)
        self.rel_gap_ = max(r.rel_gap for r in results)
        self.n_iter_ = max(int(r.iterations or 0) for r in results)
        self.n_features_in_ = n_features
        if X is not None:
            self._warn_about_model(X, results)
        return self

    def _warn_about_model(self, X, results) -> None:
        """Warn when the fitted coefficients predict one class for every training sample, or (``recovery="l0"``,
        hard margin) break the margins the certificate is about."""
        predicted = self._class_indices(self._scores(X))
        if X.shape[0] > 1 and np.all(predicted == predicted[0]):
            where = (f"dictionary={self.dictionary!r} in {X.shape[1]} dimensions" if isinstance(self.dictionary, str)
                     else "the given dictionary")
            warnings.warn(f"the fitted model predicts {self.classes_[predicted[0]]} for every training sample "
                          f"({self.n_kernels_} kernels): its atoms may not reach the data ({where}); a dictionary "
                          "built from the samples ('samples'), wider widths or a smaller gamma may help",
                          UserWarning, stacklevel=4)
        if self.recovery != "l0" or self.C is not None:
            return
        worst = max((r.margin_violation for r in results if r.alpha_envelope is not None), default=0.0)
        if worst > L0_MARGIN_WARNING * (1.0 - self.eps):  # (without an envelope point the fit said so already)
            warnings.warn(f"the L0 recovery (recovery='l0') violates the hard margins y f(x) >= 1 - eps by up to "
                          f"{worst:.3g}: status_ and gap_ certify the envelope point, which meets every margin, "
                          "not these coefficients; recovery='envelope' predicts with that point",
                          UserWarning, stacklevel=4)

    def _check_fitted(self):
        if not hasattr(self, "alpha_"):
            raise NotFittedError(f"This {type(self).__name__} instance is not fitted yet. Call 'fit' with "
                                 "appropriate arguments before using this estimator.")

    def decision_function(self, X) -> np.ndarray:
        """``f(x) = sum_j Delta_j alpha_j k(x, s_j; w_j)``: shape (n,) with two classes (positive values
        predict ``classes_[1]``), else (n, n_classes) one-vs-rest scores."""
        self._check_fitted()
        return self._scores(validate_data(self, X, dtype=np.float64, reset=False))

    def predict(self, X) -> np.ndarray:
        """Class labels: ``classes_[1]`` where ``f(x) > 0`` (two classes), else the highest score's class."""
        indices = self._class_indices(self.decision_function(X))  # (first: an unfitted model has no classes_)
        return self.classes_[indices]

    def _scores(self, X) -> np.ndarray:
        """:meth:`decision_function` of validated samples ``X``."""
        dictionary = getattr(self, "dictionary_", self.dictionary)
        with blas_threads(self.blas_threads):
            if self.alpha_.ndim == 1:
                return dictionary.evaluate(X, self.alpha_)
            return np.column_stack([dictionary.evaluate(X, a) for a in self.alpha_])

    @staticmethod
    def _class_indices(scores) -> np.ndarray:
        """Indices into ``classes_`` of the decision values ``scores`` ((n,) or (n, n_classes))."""
        return (scores > 0).astype(int) if scores.ndim == 1 else np.argmax(scores, axis=1)
