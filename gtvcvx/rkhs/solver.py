r"""Fast core for the kernel-sparse dual: semismooth-Newton augmented Lagrangian (default),
restarted PDHG (PDLP-style) and the paper's projected (sub)gradient ascent (baseline).

All three solve the *exact* dual

.. math::  \max_{0 \le \lambda \le C} \; \frac{1-\epsilon}{N} \sum_n \lambda_n
           - \sum_j \Delta_j \,\mathrm{pos}(\bar a_j^2 / 2 - \gamma),
           \qquad \bar a = \tfrac1N K^T (y \circ \lambda),

(no smoothing), stop on the certified relative duality gap of :func:`~gtvcvx.rkhs.certificate.certify`,
and return an :class:`~gtvcvx.rkhs.result.RKHSResult` with a convergence history.

Internally the multipliers are scaled, ``lambda' = lambda / N``, so that the dual reads
``min_{0 <= lambda' <= C/N} -c^T lambda' + h(B lambda')`` with ``c = (1 - eps) 1``,
``B = K^T diag(y)`` (an ``M x N`` sparse matrix) and ``h(u) = sum_j Delta_j pos(u_j^2/2 - gamma)``.
"""

from __future__ import annotations

import inspect
import time
import warnings
from collections.abc import Mapping

import numpy as np
from scipy.linalg.blas import dsyrk
from scipy.linalg.lapack import dpotrf, dpotrs

from .._restart import restart_due, updated_primal_weight
from .._validation import check_gap_tolerance, check_positive_int, check_time_limit
from ..results import Status, gap_stalled, out_of_reach_message, resolution_message, tol_out_of_reach
from .certificate import (RKHSCertificate, certify, envelope_bound, farkas_dual_bound, farkas_ray,
                          hard_margin_feasible_point)
from .problem import RKHSProblem
from .result import DEFAULT_CRITICAL_TOL, RKHSResult, check_critical_tol, critical_mask

__all__ = ["solve_dual", "solve_problem", "METHODS", "SOLVERS", "prox_h", "prox_h_conjugate", "DEFAULT_TOL",
           "WORKING_SET_MIN_SAMPLES", "weight_scale"]

#: Solvers :func:`solve_problem` accepts: the fast core or a CVXPY backend.
SOLVERS = ("fast", "CLARABEL", "SCS")

#: Methods of the fast core.
METHODS = ("ssnal", "pdhg", "subgradient")

#: Default stopping tolerance on the relative duality gap.
DEFAULT_TOL = 1e-6

_DEFAULT_MAX_ITER = {"ssnal": 200, "pdhg": 200_000, "subgradient": 200_000}

_EPS = float(np.finfo(float).eps)


# ---------------------------------------------------------------------------------------
# proximal operators (pure functions)
# ---------------------------------------------------------------------------------------
def prox_h(v, t, s):
    r"""Prox of ``t_j pos(u_j^2/2 - s^2/2)`` coordinate-wise (``t`` = step times ``Delta``).

    Piecewise: ``u = v`` for ``|v| <= s`` (identity), ``u = s sign(v)`` for
    ``s < |v| <= s (1 + t)`` (clip), ``u = v / (1 + t)`` beyond (shrink).
    """
    a = np.abs(v)
    return np.where(a <= s, v, np.where(a <= s * (1.0 + t), np.sign(v) * s, v / (1.0 + t)))


def prox_h_conjugate(v, sigma, Delta, s):
    """Prox of ``sigma h^*`` by Moreau's identity: ``v - sigma prox_{h/sigma}(v / sigma)``."""
    return v - sigma * prox_h(v / sigma, Delta / sigma, s)


# ---------------------------------------------------------------------------------------
# shared machinery
# ---------------------------------------------------------------------------------------
#: Up to this many rows :meth:`_Scaled.rows` copies a sparse problem's rows one by one (measured on the
#: benchmark instance: 3 rows 16 vs 106 us, 8 rows 40 vs 137 us; 30 rows 144 vs 131 us).
ROW_LOOP_MAX = 16


#: The fast core solves the problem in other units (:func:`weight_scale`) when their factor ``kappa`` lies
#: outside this band.
UNIT_BAND = (1e-3, 1e3)


def weight_scale(problem: RKHSProblem) -> float:
    r"""``kappa``, the change of units of the problem the fast core solves: multipliers ``kappa lambda``,
    atom weights ``Delta / kappa``; ``1 / kappa`` is the multipliers' expected size, and 1 (the problem as
    given) when ``kappa`` lies inside :data:`UNIT_BAND`.

    Notes
    -----
    The problem with weights ``Delta / kappa``, sparsity weight ``kappa^2 gamma`` and hinge bound ``kappa C``
    is the same problem in other units: ``(Delta_j / kappa) psi_{kappa^2 gamma}(kappa a) = kappa Delta_j
    psi_gamma(a)`` (the envelope ``psi`` is quadratic beyond its kink ``s = sqrt(2 gamma)``, linear inside,
    and the kink moves to ``kappa s``), the decision function is unchanged (``(Delta_j / kappa)(kappa
    alpha_j) = Delta_j alpha_j``), so ``P'(kappa alpha) = kappa P(alpha)``, and ``D'(kappa lambda) = kappa
    D(lambda)`` on the box ``[0, kappa C]``. Only the units of the multipliers change (``Delta_j s_j`` is
    invariant), and the solvers' parameters (SSNAL's ``sigma`` from 10 to 1e6, its proximal weight, its
    absolute floors) assume multipliers of order one. The margins need ``lambda`` of order ``1 / Delta``
    (``f = sum_j Delta_j alpha_j k_j`` ~ 1 with ``alpha = abar ~ lambda``), an atom enters at ``|abar_j| =
    s``, and a soft margin caps ``lambda`` at ``C``: ``1 / kappa = min(max(1 / median(Delta), s), C)``.
    A grid dictionary's default weights (cell volumes) on unscaled data are far from 1: features at the
    scale 1e-3 give ``Delta`` ~ 1e-5 and multipliers ~ 1e8. Measured (162 problems: the ellipses at feature
    scales 1e-4 .. 1e4 with a grid at its default weights, gamma 1e-4 .. 25, eps 0 / 0.1, hard and soft
    margins): 156 optimal and 6 hard margins at the scale 1e-4 stalled at a certified gap of 0.37 in the
    problem's units; 162 optimal in these, with 7,455 Newton steps instead of 9,274 (weights divided by
    their median instead: 130 optimal, 32 stalled or at ``max_iter``, most with large weights). On 1,469
    random small problems (weights per atom over 16 decades, thresholds, duplicate samples; 136 of them in
    other units) 1,093 -> 1,119 optimal, no optimal run lost; PDHG and the subgradient method, which adapt
    their steps to the scale, answer the same either way. The tracker certifies every iterate on the
    problem as given (multipliers divided by ``kappa``), so results, gaps and history are the problem's own.
    """
    typical = max(1.0 / float(np.median(problem.Delta)), problem.s)
    if problem.C is not None:
        typical = min(typical, problem.C)
    kappa = 1.0 / typical
    low, high = UNIT_BAND
    if low <= kappa <= high or not 0.0 < kappa < np.inf:  # (subnormal weights: 1 / median overflows)
        return 1.0
    return kappa


class _Scaled:
    """The dual in scaled multipliers ``lambda' = lambda / N``, with ``B = K^T diag(y)`` (M x N).

    A dense problem keeps only ``K^T`` (``p.Kt``, atom rows contiguous) and applies the signs on
    the fly; a sparse one applies the problem's own CSR ``Phi = B / N`` and ``Phi^T`` (built once,
    the certificate uses them too) and scales the result: no copy of the kernel matrix is made. With
    ``kappa != 1`` it is the problem in the units of :func:`weight_scale` (weights ``Delta / kappa``,
    ``s`` times ``kappa``, box ``[0, kappa C / N]``); ``B`` is the same.
    """

    def __init__(self, problem: RKHSProblem, kappa: float = 1.0):
        p = problem
        self.p = p
        self.N, self.M = p.N, p.M
        self.dense = p.dense
        self.kappa = kappa  # the problem in other units: multipliers kappa lambda (see weight_scale)
        self.c = np.full(p.N, 1.0 - p.eps)
        self.ub = np.inf if p.C is None else kappa * p.C / p.N
        self.Delta = p.Delta / kappa
        self.s = kappa * p.s

    def B_mul(self, lam) -> np.ndarray:
        """``B lam = K^T (y * lam)``, (M,)."""
        if self.dense:
            return self.p.Kt @ (self.p.y * lam)
        out = self.p.Phi @ lam
        out *= self.N
        return out

    def BT_mul(self, z) -> np.ndarray:
        """``B^T z = y * (K z)``, (N,)."""
        if self.dense:
            return self.p.y * (self.p.K @ z)
        out = self.p.PhiT @ z
        out *= self.N
        return out

    def rows(self, atoms) -> np.ndarray:
        """The rows ``B[atoms]`` as a dense array (SSNAL asks for the atoms new to its active set)."""
        if self.dense:
            return self.p.Kt[atoms] * self.p.y
        Phi = self.p.Phi
        if atoms.size > ROW_LOOP_MAX:
            out = Phi[atoms].toarray()
        else:  # a few rows (the usual Newton step): SciPy's fancy indexing costs ~20x a row's copy
            out = np.zeros((atoms.size, self.N))
            for i, atom in enumerate(atoms):
                lo, hi = Phi.indptr[atom], Phi.indptr[atom + 1]
                out[i, Phi.indices[lo:hi]] = Phi.data[lo:hi]
        out *= self.N
        return out

    def norm_B(self, iters: int = 30, seed: int = 0) -> float:
        """Power-iteration estimate of ``||B||_2`` (slightly inflated for safety)."""
        rng = np.random.default_rng(seed)
        x = rng.normal(size=self.N)
        x /= np.linalg.norm(x)
        val = 0.0
        for _ in range(iters):
            y = self.BT_mul(self.B_mul(x))
            val = np.linalg.norm(y)
            if val == 0:
                return 1.0
            x = y / val
        return 1.01 * float(np.sqrt(val))


class _Tracker:
    """Keeps the best dual point, the best feasible primal point, the history and stopping state.

    Certifies on ``problem`` itself: multipliers of the equivalent problem a solver runs on (``scaled.kappa``,
    see :func:`weight_scale`) are divided by ``kappa`` first; ``z = Delta * alpha`` is the same in both."""

    def __init__(self, problem, scaled, method, tol, max_iter, time_limit, record, verbose, start):
        self.p = problem
        self.sc = scaled
        self.lam_unit = problem.N / (1.0 if scaled is None else scaled.kappa)  # solver multipliers -> problem's
        self.method = method
        self.tol = tol
        self.max_iter = max_iter
        self.time_limit = time_limit
        self.record = record
        self.verbose = verbose
        self.start = start
        self.rows = []
        self.best_dual = -np.inf
        self.best_lam = np.zeros(problem.N)
        self.best_primal = np.inf
        self.best_alpha = None
        self.best_dual_rounding = self.best_primal_rounding = 0.0  # the allowances inside the best bounds
        self.last: RKHSCertificate | None = None
        self.feasible_alpha = None  # from the hard-margin LP, if run
        self.lp_checked = False
        self.lp_result = None

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def out_of_time(self) -> bool:
        return self.time_limit is not None and self.elapsed() >= self.time_limit

    def check(self, iteration: int, lam_scaled, z=None, record: bool = True, **extra) -> float:
        """Certify (lam, z); update the best bounds; record a history row. Returns rel_gap."""
        best_gap = self.best_primal - self.best_dual
        cert = certify(self.p, lam_scaled * self.lam_unit, z, feasible_alpha=self.feasible_alpha,
                       gap_hint=best_gap if np.isfinite(best_gap) else None)
        self.last = cert
        if cert.dual > self.best_dual:
            self.best_dual, self.best_lam, self.best_dual_rounding = cert.dual, cert.multipliers, cert.dual_rounding
        if cert.alpha_envelope is not None and cert.primal < self.best_primal:
            self.best_primal, self.best_alpha, self.best_primal_rounding = (cert.primal, cert.alpha_envelope,
                                                                            cert.primal_rounding)
        gap, rel = self.gap()
        if self.record and record:
            row = {"iteration": iteration, "time": self.elapsed(), "dual": self.best_dual,
                   "primal": self.best_primal, "gap": gap, "rel_gap": rel}
            row.update(extra)
            row.setdefault("restarts", 0)
            self.rows.append(row)
        if self.verbose:
            print(f"[{self.method}] it={iteration:6d} dual={self.best_dual:.10g} primal={self.best_primal:.10g} "
                  f"rel_gap={rel:.3e} t={self.elapsed():.2f}s " + " ".join(f"{k}={v}" for k, v in extra.items()))
        return rel

    @property
    def resolution(self) -> float:
        """The resolution of the best bounds: the rounding allowances inside the best primal and dual
        over ``1 + |P| + |D|`` (``nan`` until both are finite). Not the last certificate's: a later,
        worse iterate's certificate may carry a looser allowance than the bounds the run reports."""
        if not (np.isfinite(self.best_primal) and np.isfinite(self.best_dual)):
            return float("nan")
        return ((self.best_dual_rounding + self.best_primal_rounding)
                / (1.0 + abs(self.best_primal) + abs(self.best_dual)))

    def gap(self):
        from ..results import relative_gap

        if not np.isfinite(self.best_primal):
            return float("inf"), float("inf")
        return self.best_primal - self.best_dual, relative_gap(self.best_primal, self.best_dual)

    def _farkas_bound(self, message: str) -> str:
        """After the LP called the margins infeasible: certify the dual along a Farkas ray of them (best bounds
        updated) and say how large it is. HiGHS decides at its tolerance; the certified value is a bound in
        any case (two samples 1e-5 apart with opposite labels are separable with coefficients ~2e10: then it is
        below their cost, and it says that no cheaper classifier meets the margins)."""
        remaining = None if self.time_limit is None else max(self.time_limit - self.elapsed(), 1.0)
        ray = farkas_ray(self.p, time_limit=remaining)
        if ray is None:
            return message
        _, t = farkas_dual_bound(self.p, ray)
        if not np.isfinite(t):
            return message
        self.check(0, t * ray / self.lam_unit, None, record=False)
        return (f"{message}; along a Farkas ray of the margins the dual certifies {self.best_dual:.3g}: every "
                "classifier meeting all margins with this dictionary would cost at least that")

    def maybe_lp_check(self) -> bool:
        """Hard margin without a feasible primal point: decide feasibility once (LP).

        Returns True when the primal is infeasible (dual unbounded)."""
        if self.p.C is not None or self.lp_checked or self.best_alpha is not None:
            return False
        self.lp_checked = True
        remaining = None if self.time_limit is None else max(self.time_limit - self.elapsed(), 1.0)
        feasible, alpha, message = hard_margin_feasible_point(self.p, time_limit=remaining)
        if feasible is False:
            message = self._farkas_bound(message)
        self.lp_result = (feasible, message)
        if feasible:
            self.feasible_alpha = alpha
            # with its rounding allowance, as a certificate's point (the bare float64 value can be an ulp below)
            bound, rounding = envelope_bound(self.p, alpha)
            if bound < self.best_primal:
                self.best_primal, self.best_alpha, self.best_primal_rounding = bound, alpha, rounding
        return feasible is False


def _history_frame(rows):
    import pandas as pd

    cols = ["iteration", "time", "dual", "primal", "gap", "rel_gap", "restarts"]
    if not rows:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame(rows)
    return df[cols + [c for c in df.columns if c not in cols]]


def _check_options(method, tol, max_iter, time_limit):
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    check_gap_tolerance(tol, "tol")
    check_time_limit(time_limit)
    return check_positive_int(_DEFAULT_MAX_ITER[method] if max_iter is None else max_iter, "max_iter")


def _check_method_options(method, options) -> None:
    """Refuse options ``method`` does not take, naming them and the ones it takes."""
    runner = {"ssnal": _ssnal, "pdhg": _pdhg, "subgradient": _subgradient}[method]
    known = [name for name, par in inspect.signature(runner).parameters.items()
             if par.kind == inspect.Parameter.KEYWORD_ONLY]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for method {method!r}; it takes {known} (and solve_dual's "
                         "own arguments)")


# ---------------------------------------------------------------------------------------
# public entry point
# ---------------------------------------------------------------------------------------
def solve_dual(problem: RKHSProblem, *, method: str = "ssnal", tol: float = DEFAULT_TOL,
               max_iter: int | None = None, time_limit: float | None = None, lam0=None, z0=None,
               record_history: bool = True, verbose: bool = False, critical_tol: float = DEFAULT_CRITICAL_TOL,
               working_set: bool | None = None, **options) -> RKHSResult:
    r"""Solve the kernel-sparse dual with the fast core and certify the answer.

    Parameters
    ----------
    problem : RKHSProblem
    method : {"ssnal", "pdhg", "subgradient"}
        ``"ssnal"`` (default): semismooth-Newton augmented Lagrangian; ``"pdhg"``: restarted
        primal-dual hybrid gradient with adaptive restarts and primal weight (PDLP-style);
        ``"subgradient"``: the paper's projected dual (sub)gradient ascent (a baseline).
    tol : float
        Stop when the certified relative gap ``(P - D) / (1 + |P| + |D|) <= tol``.
    max_iter : int, optional
        Outer iterations (SSNAL) or iterations (PDHG, subgradient).
    time_limit : float, optional
        Seconds.
    lam0 : array_like (N,), optional
        Warm start for the multipliers (same scaling as the result's ``lam``).
    z0 : array_like (M,), optional
        Warm start for ``Delta * alpha`` (SSNAL and PDHG). A warm-started run that stops
        ``inaccurate`` far above ``tol`` and its resolution (a stall, e.g. from coefficients far
        from any solution) runs once more from zero with the time left, keeping the best bounds of
        both; the message says so.
    record_history : bool
    verbose : bool
    critical_tol : float
        Relative threshold for the critical samples (see :func:`critical_mask`).
    working_set : bool or None
        Solve on a working set of samples grown by the margin violators (see Notes); ``None``
        (default) uses it with SSNAL from :data:`WORKING_SET_MIN_SAMPLES` samples.
    **options
        Method parameters: SSNAL ``sigma0`` (10), ``sigma_growth`` (2), ``sigma_max`` (1e6),
        ``tau_factor`` (a rule of ``Delta`` and ``C/N`` with a soft margin, see Notes; 10 with the
        hard margin), ``inner_tol`` (0.3),
        ``max_inner`` (200); PDHG ``check_every`` (64),
        ``restart`` (True); subgradient ``step0`` (``1/L``), ``decay`` (1000), ``check_every`` (64). Also
        ``lp_check_after`` (5): outer checks without a feasible hard-margin point before the
        feasibility LP decides whether the dual is unbounded.

    Returns
    -------
    RKHSResult
        Status ``optimal`` (gap reached), ``max_iter``, ``time_limit``, ``unbounded`` (hard
        margin infeasible to an LP's tolerance; ``dual`` is then the value certified along a Farkas ray
        of the margins, :func:`~gtvcvx.rkhs.certificate.farkas_dual_bound`: no classifier meeting every
        margin costs less) or ``solver_error`` (linear algebra failure).
        ``info["polished_rel_gap"]``: the own gap of the active-set point tried before a run stops
        short of ``tol`` (None when not tried); ``info["weight_scale"]``: the units the method ran in
        (:func:`weight_scale`; 1: the problem's own; absent with the working set, whose subsets each
        run in their own).

    Notes
    -----
    **SSNAL.** Split the scaled dual as ``min -c^T l + h(u) + I_[0,C'](w)`` s.t. ``B l = u``,
    ``l = w`` with multipliers ``z`` (which converges to ``Delta * alpha``, the envelope primal)
    and ``mu``. Each outer step minimizes the proximal augmented Lagrangian in ``l`` alone,

    ``phi(l) = -c^T l + sigma e_h(B l + z/sigma) + (sigma/2) dist^2(l + mu/sigma, [0, C'])
    + ||l - l_k||^2 / (2 tau)``,

    with ``e_h`` the Moreau envelope of ``h / sigma``; ``phi`` is convex, C^1 and piecewise
    quadratic, so it is minimized by semismooth Newton: the generalized Hessian is
    ``sigma B_A^T diag(d_A) B_A + diag(sigma 1[l + mu/sigma outside the box] + 1/tau)``, where
    only the atoms ``A`` outside the identity zone of the prox enter (``d = 1`` in the clip zone,
    ``Delta/(sigma + Delta)`` in the shrink zone), solved by a Woodbury identity with an
    ``|A| x |A|`` Cholesky factor when ``|A| < N``, its matrix assembled from the Gram matrix of
    the active atoms' rows (kept across steps in slot-ordered buffers, :class:`_ActiveRows`) and
    the samples inside the box only (see :func:`_newton_direction`; same iterates. Measured, one
    BLAS thread, to 4e-8, against a fresh ``|A| x N`` product per step: the Gram matrix alone, medians
    of three alternating processes, hard margin N = 900 0.94 -> 0.69 s, soft margin N = 3000 2.86 ->
    2.55 s, the bench instance unchanged at ~0.6 s; classifier fits with default threads N = 10^4
    1.63 -> 1.43 s, 3 10^4 5.17 -> 4.53 s; with ``atom_weight=None``, ~930 kernels active, N = 10^3
    3.7 -> 2.5 s and 10^4 39.5 -> 11.0 s; then the slot-ordered buffers instead of a per-step gather,
    in-process medians of seven alternating runs, bench instance 0.84 -> 0.72 s, hard margin
    0.97 -> 0.71 s); the step is an exact line search on the
    piecewise-linear monotone ``phi'`` along the direction. Then ``z <- prox_{sigma h*}(z + sigma B l)``,
    ``mu <- sigma (l + mu/sigma - P(l + mu/sigma))``, ``sigma <- min(growth sigma, sigma_max)``,
    ``tau = tau_factor sigma``. The proximal weight ``tau_factor`` is measured, not derived: on the
    ellipses at N = 300 .. 900 (gamma = 25, eps = 1e-2, hard margin, 800 atoms) ``10`` halves the
    Newton steps and the time of ``0.1`` (e.g. 0.07 vs 0.30 s, 0.45 vs 0.94 s, 0.73 vs 1.30 s), while
    on soft-margin instances (gamma = 0.5, C = 1000, and the ``bench rkhs`` instance) ``0.1`` is
    faster than ``10`` (0.55 vs 1.77 s, 2.6 vs 4.3 s). The best soft-margin value moves with the
    atom weights ``Delta`` and the scaled box ``C' = C/N``, and the default follows the
    measurements: ``tau_factor = 0.01 median(Delta)^(-3/4) min(C', 1)^(1/2)`` (clipped to
    [1e-3, 10]; the median weight clipped to the measured range :data:`TAU_RULE_WEIGHTS`). Measured
    (seconds, SSNAL to 1e-6; "sub" is the working set of the classifier's fit): bench instance
    (N = 900, Delta = 0.79, C' = 1.1): 0.001 1.33, 0.01 0.55, 0.1 0.55; classifier defaults
    (Delta = 1) N = 10^4 sub (C' = 0.1): 0.001 0.43, 0.01 0.46, 0.1 0.49;
    N = 10^5 sub (C' = 0.01, 22k samples, most at the bound): 0.001 3.3, 0.01 5.1, 0.1 stalls at
    a gap of 2.5e-3 (the Newton loop ran into a cap of 50 steps at every outer iteration);
    ``atom_weight=None`` (Delta = 0.002) N = 1000 (C' = 1): 0.01 10.8, 0.1 6.0, 0.3 4.6, 1 3.5,
    3 4.3; N = 10^4 (C' = 0.1): 0.1 47.7 (another run), 0.3 41.9, 1 61.8. With the rule: bench
    instance 0.54-0.59 s; classifier fits (default threads) 0.16 s at N = 10^3, 1.1-1.3 s at 10^4,
    10.6 s at 10^5; ``atom_weight=None`` 3.6 s at 10^3, 42 s at 10^4 (before the Gram cache below). ``max_inner`` 200
    (hard margin: the as-written instances at N = 900 take 5.3 s for six seeds, 6.1 s with 50).

    An inner loop also ends when ``g`` is down to a bound on its own rounding
    (:func:`_gradient_noise`: ``z = sigma (v - prox(v))`` loses ``sigma u |v|``, ``u`` the unit
    roundoff, so at ``sigma`` ~ 1e5-1e6 no Newton step can reduce ``g`` further), or when the exact line
    search's step is below the multipliers' own rounding (``t max|d| <= 4u max|l|``: the iterate cannot
    move; 40 samples at C = 1e3 and tol = 1e-11 ran 9,000 such steps into a 30 s limit); before these
    rules such a loop ran into ``max_inner``. Measured to tol = 1e-8 / 1e-10 (seconds, Newton steps): the bench
    instance 1.55 s, 363 / 2.48 s, 563 before against 0.64 s, 164 / 0.63 s, 165; a hard margin at N = 900
    1.40 s, 595 / 8.2 s, 1995 (then ``inaccurate``) against 1.08 s, 396 / 0.75 s, 403; a 40-sample soft margin
    (C = 1000) 0.85 s, 470 against 0.07 s, 72. Every method stops as ``inaccurate`` when the
    requested ``tol`` is below the certificate's resolution (its rounding allowance over
    ``1 + |P| + |D|``, see :class:`~gtvcvx.rkhs.certificate.RKHSCertificate`) and the gap is down to
    twice that, and SSNAL also when, at ``sigma_max``, its best gap has not fallen by 10 % over
    :data:`SSNAL_STALL_CHECKS` outer iterations whose inner loops all ended on that rounding; both
    messages say why.

    **PDHG.** ``l+ = P_[0,C'](l - tau (B^T z - c))``, ``z+ = prox_{sigma h*}(z + sigma B (2 l+ - l))``
    with ``tau = eta / omega``, ``sigma = eta omega``, ``eta < 1/||B||``; restarts to the better of
    the current and the averaged iterate on the fixed-point residual (sufficient 0.2, necessary
    0.8, artificial 0.36 of the iterations) and the primal weight ``omega`` updated at restarts by
    the smoothed ratio of the dual / primal movement, as in PDLP.

    **Subgradient.** ``l+ = P_[0,C'](l + eta_k (c - B^T (Delta * alpha(l))))`` with
    ``alpha(l)`` the L0 recovery (a supergradient of the concave dual: the margin violations),
    ``eta_k = step0 / sqrt(1 + k / decay)``, ``step0 = 1 / (||B||^2 max Delta)`` by default.

    **Active-set polish.** Before any method stops short of ``tol`` (stalled, at the resolution, at a
    limit) the optimality conditions are solved on the active sets of its best point (samples strictly
    inside the box, at ``C``; atoms in the shrink zone, at the kink: :func:`_active_set_point`, a least-
    squares solve with one unknown per free multiplier and kink coefficient, skipped above
    :data:`POLISH_MAX_UNKNOWNS`) and the result certified like any iterate: right sets give the solution
    to rounding, wrong ones a worse point that is not kept. On grid weights ~1e-5 (samples at the scale
    1e-3, all atoms shrinking, multipliers ~3e8) SSNAL's dual converged while its primal lagged and the
    run stalled at a gap of 9e-6; polished, 3e-12 (a 135-problem survey of feature scales, C, gamma and
    eps at N = 120: optimal 104 -> 123, the other 12 at their certificate's resolution; all 135 with
    the tree-summed extended dual and the pulled-back multipliers of
    :func:`~gtvcvx.rkhs.certificate.certify`).

    **Units.** Every method runs on the problem in the units of :func:`weight_scale` (multipliers of
    order one; weights of a grid dictionary on unscaled data ask for ~1e8 at feature scales 1e-3) and every
    iterate is certified on the problem as given.

    **Working set.** A sample whose margin holds strictly at the optimum has ``lambda_n = 0``
    (complementary slackness) and can be dropped without changing the solution (the paper's
    Proposition 2). So the dual is solved on a subset ``S`` of the samples (hinge cost ``C / N``
    per sample kept: ``C_S = C |S| / N``, multipliers rescaled by ``|S| / N``). The first ``S``
    is chosen by a pilot model fitted on 1000 random samples at the population's scale (hinge
    cost ``C`` over those samples): the samples with margin below ``1.5 (1 - eps)`` under it
    (from 4000 samples; below, or with a warm start, 1000 random samples or the positive ``lam0``).
    Each subset's envelope-primal point is checked against every sample, the worst violators (at
    most ``max(|S|, 1000)``) join ``S``, and the next solve starts from the current multipliers and
    coefficients; a subset is solved to ``1e-3`` while more than 5 % of its size still joins, then
    to ``tol``; a subset that stops at ``max_iter`` with its own gap above
    :data:`WORKING_SET_STALL_FACTOR` times its round's tolerance ends the rounds (``max_iter``, the
    message says so). Every round is certified on the *full* problem (the padded multipliers give the
    same dual value; the primal point is scored with every sample's hinge, or made feasible for a
    hard margin), so the reported gap is the full problem's, and a round without violators has
    the subset's gap. The Newton systems are ``|A| x |S|`` instead of ``|A| x N``. Rounds that stop short of
    ``tol`` end with the active-set polish of the whole problem's best point (below).

    ``B = K^T diag(y)`` is applied through the problem's kernel matrix: a dense problem (the kernel
    matrix built with ``storage="auto"`` is dense when at least half its entries are kept:
    Gaussian atoms as wide as the data) keeps only ``K^T`` with contiguous atom rows and applies
    the signs on the fly; BLAS products there are ~3x faster than CSR ones (classifier defaults
    at N = 10^4, 96 % filled: whole fit 3.2 -> 1.6 s); a sparse problem holds ``B`` and ``B^T`` as CSR.

    Measured on the benchmark instance (``gtvcvx bench rkhs``: N = 900, 3072 atoms, soft margin),
    SSNAL certified a relative gap of 2e-8 after 141 Newton steps (2.7 s) while restarted PDHG
    was at 3e-4 after 120 s; hence the default. Hard-margin instances whose multipliers grow
    large are harder for SSNAL (several hundred Newton steps at N = 900).

    References
    ----------
    .. [1] M. Peifer, L. F. O. Chamon, S. Paternain, A. Ribeiro, "Sparse multiresolution
       representations with adaptive kernels", IEEE Trans. Signal Processing 68, 2020.
    .. [2] X. Li, D. Sun, K.-C. Toh, "A highly efficient semismooth Newton augmented Lagrangian
       method for solving Lasso problems", SIAM J. Optim. 28(1), 2018.
    .. [3] D. Applegate et al., "Practical large-scale linear programming using primal-dual
       hybrid gradient" (PDLP), NeurIPS 2021.
    """
    if not isinstance(problem, RKHSProblem):
        raise TypeError(f"problem must be a gtvcvx.rkhs.RKHSProblem, got {type(problem).__name__}")
    max_iter = _check_options(method, tol, max_iter, time_limit)
    _check_method_options(method, options)
    check_critical_tol(critical_tol)
    if working_set not in (None, True, False):
        raise ValueError(f"working_set must be True, False or None, got {working_set!r}")
    lam0, z0 = _checked_start(problem, lam0, z0)
    if working_set is None:
        working_set = method == "ssnal" and problem.N >= WORKING_SET_MIN_SAMPLES
    if working_set:
        return _solve_working_set(problem, method=method, tol=tol, max_iter=max_iter, time_limit=time_limit,
                                  lam0=lam0, z0=z0, record_history=record_history, verbose=verbose,
                                  critical_tol=critical_tol, **options)
    start = time.perf_counter()
    sc = _Scaled(problem, weight_scale(problem))
    lam = np.zeros(problem.N) if lam0 is None else lam0 * (sc.kappa / problem.N)
    z = z0
    if z is None and lam0 is not None:
        z = problem.Delta * problem.recover_alpha(lam0)
    setup_time = time.perf_counter() - start
    solve_start = time.perf_counter()
    tracker = _Tracker(problem, sc, method, tol, max_iter, time_limit, record_history, verbose, solve_start)
    runner = {"ssnal": _ssnal, "pdhg": _pdhg, "subgradient": _subgradient}[method]
    status, iterations, message, info = _guarded_run(runner, sc, tracker, lam, z, max_iter, options,
                                                     "linear algebra failure")
    if _warm_start_stalled(tracker, status, lam0, z0):
        # a caller's start far from the solution (coefficients 1e50 times the optimum's) can leave SSNAL's
        # multiplier estimate stalled at a gap of 1: once more from zero, the tracker keeping the best bounds
        first_steps = info.get("newton_steps")
        status, more, message, info = _guarded_run(runner, sc, tracker, np.zeros(problem.N), None, max_iter, options,
                                                   "linear algebra failure after a restart from zero")
        iterations = (iterations or 0) + (more or 0)
        if first_steps is not None and info.get("newton_steps") is not None:
            info["newton_steps"] += first_steps  # (both runs' work)
        if status != Status.SOLVER_ERROR:  # (the runners return solver_error only through _guarded_run)
            message = "; ".join(filter(None, (_RESTART_NOTE,
                                              message)))
    status, message, info["polished_rel_gap"] = _polish_finish(tracker, iterations, status, message)
    info["weight_scale"] = sc.kappa
    solve_time = time.perf_counter() - solve_start
    return _finish(problem, tracker, status, iterations, message, info, method, setup_time, solve_time,
                   critical_tol)


#: What :func:`solve_dual` says when a warm start stalled far from ``tol`` and it ran once more from zero.
_RESTART_NOTE = "the warm start (lam0 / z0) stalled far from tol: restarted from zero"


def _subset_message(res, n_samples: int) -> str:
    """A working-set round's message as the caller reads it: whose it is, and the warm start the rounds gave
    it (not the caller's ``lam0`` / ``z0``) named as such."""
    text = res.message.replace(_RESTART_NOTE, "the previous round's point stalled this round's solve far from its "
                                              "tol: restarted from zero")
    return f"the working set of {n_samples} samples: {text}" if text else ""


def _guarded_run(runner, sc, tracker, lam, z, max_iter, options, failure: str):
    """``runner(...)`` with RuntimeWarnings silenced; a linear-algebra failure becomes ``solver_error``
    with the message ``f"{failure}: {exc}"``. Returns ``(status, iterations, message, info)``."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return runner(sc, tracker, lam, z, max_iter, **options)
    except (np.linalg.LinAlgError, FloatingPointError) as exc:
        return Status.SOLVER_ERROR, None, f"{failure}: {exc}", {}


def _warm_start_stalled(tracker, status, lam0, z0) -> bool:
    """Whether a warm-started run stopped ``inaccurate`` far above both ``tol`` and its resolution
    (a stall, not float64's limit) with time left: then :func:`solve_dual` runs once more from zero."""
    if status != Status.INACCURATE or (lam0 is None and z0 is None) or tracker.out_of_time():
        return False
    rel = tracker.gap()[1]
    resolution = tracker.resolution
    return rel > tracker.tol and not rel <= 10.0 * resolution


#: The active-set polish (:func:`_active_set_point`) is skipped when its linear system would have more
#: unknowns (free multipliers plus coefficients at the kink) than this.
POLISH_MAX_UNKNOWNS = 1000

#: Multipliers within this fraction of the box (of ``C``, or of the largest multiplier for a hard margin)
#: of a bound count as at that bound for the polish; coefficients within it of ``s`` as at the kink.
POLISH_ZONE_TOL = 1e-6


def _active_set_point(problem: RKHSProblem, lam, alpha):
    r"""The point the optimality conditions give on the active sets of ``(lam, alpha)``, or None.

    Notes
    -----
    At an optimum the samples split into ``F`` (``0 < lambda_n < C``: margin ``y_n f_n = 1 - eps``),
    ``U`` (``lambda_n = C``) and the rest (``lambda_n = 0``), and the atoms into the shrink zone ``S``
    (``|abar_j| > s``: ``alpha_j = abar_j``), the kink ``Kk`` (``|abar_j| = s``, ``alpha_j`` between 0
    and ``s sign(abar_j)``) and the rest (``alpha_j = 0``). With the sets read off a near-optimal point
    (``F``, ``U`` from ``lam``; ``S``, ``Kk`` from ``alpha``, :data:`POLISH_ZONE_TOL`) the conditions
    are linear in ``(lambda_F, alpha_Kk)``:

    .. math::  N \Phi_{SF}^T \Delta_S (\Phi_{SF} \lambda_F + C \Phi_{SU} 1) + N \Phi_{KF}^T \Delta_K lpha_K
               = (1 - \epsilon) 1, \qquad \Phi_{KF} \lambda_F + C \Phi_{KU} 1 = s\, \mathrm{sign}(lpha_K),

    (``N Phi_jn Delta_j alpha_j`` sums to the margin ``y_n f_n``), solved by least squares in the
    unknowns ``(lambda_F, N Delta_K alpha_K)`` with every row divided by its largest entry (so that
    atom weights far from 1 do not make one block look like noise to ``lstsq``); then
    ``alpha_S = Phi_S lambda``. Once SSNAL's iterates have found the sets this is the exact solution up
    to rounding (the bench instance at a gap of 6e-7: 8e-13), where its own convergence can stall at
    ``sigma_max`` (grid weights ~1e-5: a hard margin stalled at 9e-6, polished 3e-12). A wrong set gives a
    worse point, which the certificate simply does not keep.
    """
    p = problem
    N, s, Delta, C = p.N, p.s, p.Delta, p.upper
    scale = C if np.isfinite(C) else float(np.max(lam, initial=0.0))
    if scale <= 0.0 or alpha is None:
        return None
    cut = POLISH_ZONE_TOL * scale
    at_upper = lam >= C - cut if np.isfinite(C) else np.zeros(N, dtype=bool)
    F, U = np.flatnonzero((lam > cut) & ~at_upper), np.flatnonzero(at_upper)
    used = np.flatnonzero(alpha)
    shrink = np.abs(alpha[used]) > s * (1.0 + POLISH_ZONE_TOL)
    S, Kk = used[shrink], used[~shrink]
    if F.size + Kk.size > POLISH_MAX_UNKNOWNS or F.size + Kk.size == 0:
        return None
    cols = np.concatenate([F, U])
    if p.dense:  # Phi = K^T diag(y) / N, atoms x samples
        block = p.Kt[np.ix_(np.concatenate([S, Kk]), cols)] * (p.y[cols] / N)
    else:
        block = p.Phi[np.concatenate([S, Kk])][:, cols].toarray()
    PS, PK = block[:S.size], block[S.size:]
    upper = C if U.size else 0.0
    PSF, PKF = PS[:, :F.size], PK[:, :F.size]
    at_c_S, at_c_K = upper * PS[:, F.size:].sum(axis=1), upper * PK[:, F.size:].sum(axis=1)
    weighted = N * PSF.T * Delta[S]
    # unknowns (lambda_F, w_K = N Delta_K alpha_K) and rows divided by their largest entry: with atom
    # weights far from 1 (Delta ~ 1e9) the raw blocks differ by that factor and lstsq's rcond cut the small one
    system = np.block([[weighted @ PSF, PKF.T], [PKF, np.zeros((Kk.size, Kk.size))]])
    rhs = np.concatenate([(1.0 - p.eps) - weighted @ at_c_S, s * np.sign(alpha[Kk]) - at_c_K])
    row_scale = np.max(np.abs(system), axis=1, initial=0.0)
    row_scale[row_scale == 0.0] = 1.0
    solution = np.linalg.lstsq(system / row_scale[:, None], rhs / row_scale, rcond=None)[0]
    if not np.isfinite(solution).all():
        return None
    lam_new = np.zeros(N)
    lam_new[U] = upper
    lam_new[F] = solution[:F.size]
    alpha_new = np.zeros(p.M)
    alpha_new[S] = PS @ lam_new[cols]
    alpha_new[Kk] = solution[F.size:] / (N * Delta[Kk])
    return np.clip(lam_new, 0.0, C), alpha_new


def _polish_finish(tracker, iterations, status, message):
    """Before a run stops short of ``tol``: certify the active-set point of its best bounds
    (:func:`_active_set_point`); returns ``(status, message, the polished point's own rel_gap or None)``."""
    if status in (Status.OPTIMAL, Status.UNBOUNDED, Status.INFEASIBLE, Status.SOLVER_ERROR):
        return status, message, None
    p = tracker.p
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            point = _active_set_point(p, tracker.best_lam, tracker.best_alpha)
    except (np.linalg.LinAlgError, FloatingPointError, ValueError):
        point = None  # (a polish that cannot be computed changes nothing)
    if point is None:
        return status, message, None
    before = tracker.gap()[1]
    rel = tracker.check(iterations or 0, point[0] / p.N, p.Delta * point[1], polished=True)  # the best bounds'
    own = tracker.last.rel_gap  # the polished point's own
    if rel <= tracker.tol:
        return Status.OPTIMAL, "", own
    if rel < before:
        reason = _at_resolution(tracker, rel)
        if reason:
            return Status.INACCURATE, reason, own
        message = f"{message}; the active-set polish of the best point brought the certified rel_gap to {rel:.3g}"
    return status, message, own


#: From this many samples SSNAL runs on a working set of samples (``solve_dual(working_set=None)``).
WORKING_SET_MIN_SAMPLES = 2000
#: Size of the first working set (or the samples with positive ``lam0`` when more).
WORKING_SET_INITIAL = 1000
#: The pilot model's band: samples with margin below ``(1 - eps)(1 + band)`` form the first working set.
WORKING_SET_BAND = 0.5
#: Relative gap to which a working set is solved while more than 5 % of its size still joins.
WORKING_SET_COARSE_TOL = 1e-3
#: A working set that ends at ``max_iter`` with its own gap above this many times its round's tolerance ends
#: the rounds. Measured: a hard margin on overlapping ellipses (noise 0.6, N = 2000, ``C=None``) ran four rounds of
#: 200 outer iterations, each at ``max_iter`` without a feasible primal point, for 221 s before its warning.
WORKING_SET_STALL_FACTOR = 10.0


def _subset_problem(problem: RKHSProblem, idx, *, population: bool = False) -> RKHSProblem:
    """The problem restricted to samples ``idx``: with the same per-sample hinge cost ``C / N``, or
    (``population=True``) with hinge cost ``C`` over the subset, i.e. a smaller sample of the same population."""
    C = problem.C if problem.C is None or population else problem.C * idx.size / problem.N
    return RKHSProblem(problem.X[idx], problem.y[idx], problem.dictionary, problem.gamma, problem.eps, C,
                       K=problem.kernel_rows(idx))


def _checked_start(problem: RKHSProblem, lam0, z0):
    """The warm start as arrays: ``lam0`` clipped to ``[0, C]`` (unscaled) and ``z0``; errors name the argument."""
    if lam0 is not None:
        lam0 = np.asarray(lam0, dtype=float)
        if lam0.shape != (problem.N,) or not np.isfinite(lam0).all():
            raise ValueError(f"lam0 must be a finite array of shape ({problem.N},)")
        lam0 = np.clip(lam0, 0.0, problem.upper)
    if z0 is not None:
        z0 = np.asarray(z0, dtype=float)
        if z0.shape != (problem.M,) or not np.isfinite(z0).all():
            raise ValueError(f"z0 must be a finite array of shape ({problem.M},)")
    return lam0, z0


def _solve_working_set(problem, *, method, tol, max_iter, time_limit, lam0, z0, record_history, verbose,
                       critical_tol, **options) -> RKHSResult:
    """SSNAL (or another method) on a growing working set of samples; see :func:`solve_dual`'s Notes."""
    start = time.perf_counter()
    N = problem.N
    lam_full = np.zeros(N) if lam0 is None else lam0
    z = z0
    rng = np.random.default_rng(0)
    in_set = lam_full > 0
    target = 1.0 - problem.eps
    pilot = None
    if lam0 is None and z is None and N >= 4 * WORKING_SET_INITIAL:
        # a pilot model from a random sample at the population's scale (hinge cost C per sample
        # average, not C / N): the samples it puts near or inside the margin are the likely critical ones
        sample = np.sort(rng.choice(N, size=WORKING_SET_INITIAL, replace=False))
        small = _subset_problem(problem, sample, population=True)
        guess = solve_dual(small, method=method, tol=max(tol, WORKING_SET_COARSE_TOL), max_iter=max_iter,
                           time_limit=None if time_limit is None else 0.25 * time_limit, record_history=False,
                           working_set=False, **options)
        coef = guess.alpha_envelope if guess.alpha_envelope is not None else guess.alpha
        if coef is not None and np.isfinite(coef).all():
            margins = problem.y * problem.decision(coef)
            in_set |= margins < target * (1.0 + WORKING_SET_BAND)
            z = problem.Delta * coef
            pilot = {"samples": int(sample.size), "status": str(guess.status), "selected": int(in_set.sum())}
    fill = max(WORKING_SET_INITIAL - int(in_set.sum()), 0)
    if fill:
        in_set[rng.choice(np.flatnonzero(~in_set), size=min(fill, int((~in_set).sum())), replace=False)] = True
    setup_time = time.perf_counter() - start
    tracker = _Tracker(problem, None, method, tol, max_iter, time_limit, record_history, verbose, time.perf_counter())
    rounds, inner_total = [], 0
    status, message, k = None, "", 0
    # while many samples still join, solving a subset to ``tol`` is wasted: a coarse tolerance first
    round_tol = max(tol, WORKING_SET_COARSE_TOL)
    while True:
        k += 1
        idx = np.flatnonzero(in_set)
        sub = _subset_problem(problem, idx)
        remaining = None if time_limit is None else max(time_limit - tracker.elapsed(), 1e-3)
        res = solve_dual(sub, method=method, tol=round_tol, max_iter=max_iter, time_limit=remaining,
                         lam0=lam_full[idx] * idx.size / N, z0=z, record_history=False, verbose=verbose,
                         critical_tol=critical_tol, working_set=False, **options)
        inner_total += int(res.iterations or 0)
        if res.multipliers is not None:
            lam_full = np.zeros(N)
            lam_full[idx] = res.multipliers * N / idx.size
        coef = res.alpha_envelope if res.alpha_envelope is not None else res.alpha
        z = None if coef is None else problem.Delta * coef
        rel = tracker.check(k, lam_full / N, z, working_set=int(idx.size), inner_iterations=inner_total)
        violators, margins = np.zeros(N, dtype=bool), None
        if coef is not None:
            margins = problem.y * problem.decision(coef)
            violators = ~in_set & (margins < target)
        rounds.append({"samples": int(idx.size), "tol": round_tol, "status": str(res.status),
                       "violators": int(violators.sum())})
        if rel <= tol:
            status = Status.OPTIMAL
        elif reason := _at_resolution(tracker, rel):
            status, message = Status.INACCURATE, reason
        elif res.status in (Status.UNBOUNDED, Status.INFEASIBLE, Status.SOLVER_ERROR):
            status, message = res.status, _subset_message(res, idx.size)  # a subset that cannot be solved: nor the whole
        elif res.status == Status.MAX_ITER and not res.rel_gap <= WORKING_SET_STALL_FACTOR * round_tol:
            # far from even this round's tolerance: growing the set from its point would repeat max_iter per round
            status = Status.MAX_ITER
            message = (f"the working set of {idx.size} samples stopped at max_iter ({res.iterations} iterations) "
                       f"with its own rel_gap {res.rel_gap:.3g} (this round asked {round_tol:g}), so the rounds "
                       "stop there instead of solving larger sets from it")
        elif tracker.out_of_time():
            status, message = Status.TIME_LIMIT, f"time limit of {time_limit:g} s reached (rel_gap {rel:.3g})"
        elif violators.sum() <= 0.05 * idx.size and round_tol > tol and res.status == Status.OPTIMAL:
            round_tol = tol  # the set has (nearly) settled: solve it to the requested tolerance
        elif not violators.any():
            status, message = (res.status if res.status != Status.OPTIMAL else Status.MAX_ITER), (
                _subset_message(res, idx.size) or f"no margin violators left but rel_gap {rel:.3g} > tol")
        if status is not None:
            break
        worst = np.flatnonzero(violators)
        cap = max(idx.size, WORKING_SET_INITIAL)
        if worst.size > cap:
            worst = worst[np.argsort(margins[worst])[:cap]]
        in_set[worst] = True
    # the rounds' subsets were polished on their own; the whole problem's best point gets its own try
    status, message, polished = _polish_finish(tracker, k, status, message)
    solve_time = time.perf_counter() - tracker.start
    info = {"working_set_rounds": rounds, "inner_iterations": inner_total, "working_set_pilot": pilot,
            "polished_rel_gap": polished}
    return _finish(problem, tracker, status, k, message, info, method, setup_time, solve_time, critical_tol)


def _finish(problem, tracker, status, iterations, message, info, method, setup_time, solve_time, critical_tol):
    lam = tracker.best_lam
    cert = certify(problem, lam, None, feasible_alpha=tracker.feasible_alpha)
    alpha_env = tracker.best_alpha
    primal = tracker.best_primal
    gap, rel = tracker.gap()
    if status == Status.UNBOUNDED:
        primal, gap, rel, alpha_env = float("inf"), float("inf"), float("inf"), None
    if alpha_env is None and status != Status.UNBOUNDED and not message:
        message = cert.message or "no feasible primal point was found"
    coef = alpha_env if alpha_env is not None else cert.alpha
    info = dict(info)
    info.update(method=method, coef="envelope" if alpha_env is not None else "l0")
    if tracker.lp_result is not None:
        info["lp_check"] = tracker.lp_result[1] or ("feasible" if tracker.lp_result[0] else "")
    return RKHSResult(
        status=status, solver="fast", multipliers=lam, alpha=cert.alpha, alpha_envelope=alpha_env,
        primal=primal, dual=tracker.best_dual, gap=gap, rel_gap=rel, l0_primal=cert.l0_primal,
        l0_gap=cert.l0_primal - tracker.best_dual, margin_violation=cert.margin_violation,
        n_kernels=int(np.count_nonzero(coef)), n_critical=int(critical_mask(lam, critical_tol).sum()),
        iterations=iterations, setup_time=setup_time, solve_time=solve_time,
        history=_history_frame(tracker.rows) if tracker.record else None, message=message, info=info)


#: Stop as ``inaccurate`` once the gap is within this factor of the rounding allowance of a
#: certificate that cannot show ``tol`` (further iterations could at most halve it).
RESOLUTION_STOP = 2.0


def _at_resolution(tracker, rel) -> str:
    """The reason to stop when ``tol`` is below the certificate's resolution and the gap is down
    to it (``""`` otherwise)."""
    if tol_out_of_reach(tracker.tol, tracker.resolution, [rel], factor=RESOLUTION_STOP):
        return out_of_reach_message(tracker.tol, tracker.resolution, rel)
    return ""


def _stop_state(tracker, rel, k, max_iter, lp_check_after, n_checks):
    """Common stopping logic after a check. Returns (status or None, message)."""
    if rel <= tracker.tol:
        return Status.OPTIMAL, ""
    reason = _at_resolution(tracker, rel)
    if reason:
        return Status.INACCURATE, reason
    if tracker.p.C is None and tracker.best_alpha is None and n_checks >= lp_check_after:
        if tracker.maybe_lp_check():
            return Status.UNBOUNDED, tracker.lp_result[1]
        gap, rel = tracker.gap()
        if rel <= tracker.tol:
            return Status.OPTIMAL, ""
    if tracker.out_of_time():
        return Status.TIME_LIMIT, f"time limit of {tracker.time_limit:g} s reached (rel_gap {rel:.3g})"
    if k >= max_iter:
        message = f"max_iter = {max_iter} reached (rel_gap {rel:.3g})"
        if tracker.resolution > tracker.tol:
            return Status.INACCURATE, f"{resolution_message(tracker.tol, tracker.resolution)}; {message}"
        return Status.MAX_ITER, message
    return None, ""


def _final_lp_check(tracker, status, message):
    """At a limit without a feasible hard-margin point, let the LP say whether the dual is unbounded."""
    if status in (Status.MAX_ITER, Status.TIME_LIMIT) and tracker.p.C is None and tracker.best_alpha is None:
        if tracker.maybe_lp_check():
            return Status.UNBOUNDED, tracker.lp_result[1]
    return status, message


# ---------------------------------------------------------------------------------------
# SSNAL
# ---------------------------------------------------------------------------------------
class _ActiveRows:
    """The rows of ``B`` of SSNAL's active atoms and their Gram matrix, kept across Newton steps.

    Successive steps share most of their active atoms (a few enter or leave per step), so the
    rows and Gram entries ``b_i . b_j`` live in buffers in a fixed slot order: a leaving atom's
    slot is filled by the last one (one row and one Gram row / column moved), an entering atom
    costs its row and one product with the active rows, and ``U`` and ``U U^T`` are views of the
    buffers' leading block: no per-step gather. Buffers grow geometrically and are given back
    when the active set shrinks to a quarter of them (memory O(|A| N)).
    """

    def __init__(self, sc):
        self.sc = sc
        self.slot = np.full(sc.M, -1, dtype=np.intp)  # atom -> its slot, -1 if not active
        self.atoms = np.empty(0, dtype=np.intp)  # the active atoms in slot order
        self.R = np.empty((0, sc.N))
        self.G = np.empty((0, 0))

    def update(self, active):
        """Make ``active`` (atom indices) the active set; returns ``(atoms, U, G)``: the same atoms in
        slot order, their rows ``U = B[atoms]`` (|A| x N) and ``G = U U^T`` (views: read, do not keep)."""
        n = self.atoms.size
        member = np.zeros(self.sc.M, dtype=bool)
        member[active] = True
        stay = member[self.atoms]
        k = int(np.count_nonzero(stay))
        if k < n:  # fill the leaving slots below k with the kept atoms at or above k
            self.slot[self.atoms[~stay]] = -1
            holes = np.flatnonzero(~stay[:k])
            movers = k + np.flatnonzero(stay[k:])
            self.R[holes] = self.R[movers]
            self.G[holes, :n] = self.G[movers, :n]
            self.G[:n, holes] = self.G[:n, movers]
            self.atoms[holes] = self.atoms[movers]
            self.atoms = self.atoms[:k].copy()
            self.slot[self.atoms] = np.arange(k)
        new = active[self.slot[active] < 0]
        m = k + new.size
        capacity = self.R.shape[0]
        if m > capacity or capacity > 4 * max(m, 64):
            self._resize(k, max(2 * m, 64))
        if new.size:
            self.R[k:m] = self.sc.rows(new)
            cross = self.R[k:m] @ self.R[:m].T  # the new rows against every active one (themselves included)
            self.G[k:m, :m] = cross
            self.G[:m, k:m] = cross.T
            self.atoms = np.concatenate([self.atoms, new])
            self.slot[new] = np.arange(k, m)
        return self.atoms, self.R[:m], self.G[:m, :m]

    def _resize(self, k, capacity):
        R, G = np.empty((capacity, self.sc.N)), np.empty((capacity, capacity))
        R[:k], G[:k, :k] = self.R[:k], self.G[:k, :k]
        self.R, self.G = R, G


def _newton_direction(sc, U, W, x, g, sigma, tau, gram=None):
    r"""Solve ``(U^T diag(W) U + diag(r)) d = -g`` with ``r = sigma 1[x outside box] + 1/tau``.

    ``U`` holds the rows of ``B`` of the atoms outside the identity zone (dense, |A| x N), ``W =
    sigma d_A`` their generalized-Hessian weights and ``gram`` ``U U^T`` (computed here if not given).

    Notes
    -----
    With fewer atoms than samples the solve goes through Woodbury's identity, an |A| x |A| system
    ``S y = U r^{-1} g``, ``S = U diag(1/r) U^T + diag(1/W)``, ``d = -(r^{-1} g - r^{-1} U^T y)``.
    ``r`` takes two values, ``1/tau`` on the samples inside the box (set F) and ``sigma + 1/tau``
    outside, so with ``rho = 1 / (sigma + 1/tau)``

    .. math::  U \operatorname{diag}(1/r) U^T = \rho\, U U^T + (\tau - \rho)\, U_F U_F^T,

    a sum of two positive semidefinite terms (no cancellation): given the Gram matrix the step costs
    ``|A|^2 |F|`` flops instead of ``|A|^2 N`` (on the benchmark instance |F| ~ 80 of 900 samples).
    """
    out = (x < 0.0) | (x > sc.ub)
    r = sigma * out + 1.0 / tau
    if U.shape[0] == 0:
        return -g / r
    if U.shape[0] < sc.N:  # Woodbury: an |A| x |A| system, upper triangle (symmetric rank-k updates)
        if gram is None:  # (SSNAL passes it from its buffers)
            gram = U @ U.T
        rho = 1.0 / (sigma + 1.0 / tau)
        S = rho * gram
        free = np.flatnonzero(~out)
        if free.size:  # U_F^T is Fortran-ordered, so BLAS reads it in place
            S += dsyrk(tau - rho, U[:, free].T, trans=1)
        np.einsum("ii->i", S)[...] += 1.0 / W
        rg = g / r
        try:
            y = _cholesky_solve(S, U @ rg)
        except np.linalg.LinAlgError:
            S = np.triu(S) + np.triu(S, 1).T
            y = np.linalg.lstsq(S, U @ rg, rcond=None)[0]
        return -(rg - (U.T @ y) / r)
    # N x N: H = X^T X + diag(r), X = diag(sqrt W) U, upper triangle by one rank-k update
    H = dsyrk(1.0, (U * np.sqrt(W)[:, None]).T, trans=0)
    np.einsum("ii->i", H)[...] += r
    try:
        return -_cholesky_solve(H, g)
    except np.linalg.LinAlgError:
        H = np.triu(H) + np.triu(H, 1).T
        return -np.linalg.lstsq(H, g, rcond=None)[0]


def _cholesky_solve(S, b) -> np.ndarray:
    """Solve ``S x = b`` for a symmetric positive definite ``S`` given by its upper triangle, by LAPACK's
    ``potrf`` / ``potrs`` called directly (SciPy's ``cholesky`` / ``cho_solve`` wrappers cost as much again
    as the factorization at |A| ~ 100: 155 vs 67 us). Raises ``LinAlgError`` when the factorization fails."""
    factor, info = dpotrf(S, lower=0, clean=0)
    if info == 0:
        x, info = dpotrs(factor, b, lower=0)
        if info == 0:
            return x
    raise np.linalg.LinAlgError(f"Cholesky factorization failed (LAPACK info {info})")


def _gradient_noise(sc, U, vA, x, ztA, lam_step, sigma, tau) -> float:
    """A bound (16 u times the 2-norm of the per-sample magnitudes) on the rounding in SSNAL's inner gradient
    ``g = -c + U^T zt + sigma (x - P(x)) + (l - l_k) / tau``, ``zt = sigma (v - prox(v))``."""
    terms = (np.abs(sc.c) + np.abs(U).T @ (np.abs(ztA) + sigma * np.abs(vA)) + sigma * np.abs(x)
             + np.abs(lam_step) / tau)
    return float(16.0 * _EPS * np.linalg.norm(terms))


def _line_search(sc, v, x, lam_minus_k, d, Bd, sigma, tau, tdelta):
    r"""Exact minimization of phi along d: the root of the monotone piecewise-linear ``phi'(t)``.

    ``phi'(t) = -c.d + Bd . zz(v + t Bd) + d . mm(x + t d) + (lkd + t d.d) / tau`` is continuous and
    piecewise linear: an atom's term bends where ``v_j + t Bd_j`` crosses ``+-s`` or
    ``+-s (1 + tdelta_j)`` (the edges of the prox's identity, clip and shrink zones), a sample's where
    ``x_n + t d_n`` crosses 0 or ``C'``. So the root is found in one pass over the sorted kinks in
    ``(lo, T]``: one evaluation of ``phi'`` inside the first segment gives its value and slope there,
    each kink adds its known change of slope (``sigma Bd_j^2`` times the change of the zone's slope
    1, ``tdelta_j / (1 + tdelta_j)`` or 0; ``sigma d_n^2`` for a sample entering or leaving the box),
    and the cumulative sums give ``phi'`` at every kink; the root is in the first segment where it
    turns nonnegative. A root past ``T`` (1 first) restarts the pass from ``T`` with ``T`` doubled.

    An atom with ``|v_j| + T |Bd_j| <= s`` stays in the identity zone for every ``t`` in ``[0, T]`` and
    adds nothing: the pass runs over the other atoms only (on the benchmark instance a median of 143
    of 3072 atoms for ``T = 1``). Against the safeguarded Newton iteration on ``phi'`` it replaces (5.7
    evaluations of ``phi'`` per step on the benchmark instance, 6.4 on the as-written hard margin at
    N = 900), medians of five alternating processes, one BLAS thread: benchmark instance 0.450 -> 0.387 s,
    hard margin (800 atoms, gamma = 25, eps = 1e-2) seeds 0, 1, 2: 1.97 -> 1.68, 0.55 -> 0.47,
    0.39 -> 0.32 s, with the same Newton steps (163; 958, 451 / 450, 291).
    """
    s, ub = sc.s, sc.ub
    const = lam_minus_k @ d / tau - sc.c @ d  # phi'(t) = const + t d.d / tau + (the zones' terms)
    dd_tau = (d @ d) / tau
    v_abs, Bd_abs = np.abs(v), np.abs(Bd)
    moving = d != 0.0
    x_m, d_m = x[moving], d[moving]
    with np.errstate(divide="ignore", invalid="ignore"):
        sample_kinks = np.concatenate([-x_m / d_m, (ub - x_m) / d_m])
    # crossing 0 upward leaves the outside (slope -1), crossing C' upward enters it (+1); reversed downward
    sample_weight = sigma * np.sign(d_m) * d_m * d_m
    sample_jumps = np.concatenate([-sample_weight, sample_weight])
    lo, T = 0.0, 1.0
    for _ in range(64):
        A = np.flatnonzero(v_abs + T * Bd_abs > s)
        vA, BdA, tdA = v[A], Bd[A], tdelta[A]
        outer = s * (1.0 + tdA)
        q = tdA / (1.0 + tdA)
        nz = BdA != 0.0
        vN, bN, oN, qN = vA[nz], BdA[nz], outer[nz], q[nz]
        atom_kinks = np.concatenate([(s - vN) / bN, (-s - vN) / bN, (oN - vN) / bN, (-oN - vN) / bN])
        weight = sigma * np.sign(bN) * bN * bN
        atom_jumps = np.concatenate([weight, -weight, weight * (qN - 1.0), weight * (1.0 - qN)])
        kinks = np.concatenate([atom_kinks, sample_kinks])
        jumps = np.concatenate([atom_jumps, sample_jumps])
        inside = (kinks > lo) & (kinks <= T)
        kinks, jumps = kinks[inside], jumps[inside]
        order = np.argsort(kinks, kind="stable")
        kinks, jumps = kinks[order], jumps[order]
        first = kinks[0] if kinks.size else T
        mid = 0.5 * (lo + first)
        # phi' and its slope at a point inside the first segment (no zone changes between lo and first)
        vv = vA + mid * BdA
        a = np.abs(vv)
        clip = (a > s) & (a <= outer)
        shrink = a > outer
        zz = sigma * np.where(clip, vv - np.sign(vv) * s, np.where(shrink, vv * q, 0.0))
        curv = sigma * np.where(clip, 1.0, np.where(shrink, q, 0.0))
        xx = x + mid * d
        out = (xx < 0.0) | (xx > ub)
        value_mid = const + mid * dd_tau + BdA @ zz + d @ (sigma * (xx - np.clip(xx, 0.0, ub)))
        slope0 = curv @ (BdA * BdA) + sigma * (d[out] @ d[out]) + dd_tau
        # phi' at the segment ends lo, kinks..., T and the slope after each
        ends = np.concatenate([[lo], kinks, [T]])
        slopes = slope0 + np.concatenate([[0.0], np.cumsum(jumps)])
        values = (value_mid - slope0 * (mid - lo)) + np.concatenate([[0.0], np.cumsum(slopes * np.diff(ends))])
        hit = np.flatnonzero(values[1:] >= 0.0)
        if hit.size:
            i = int(hit[0])  # the root is in (ends[i], ends[i + 1]]
            if slopes[i] <= 0.0:
                return float(ends[i + 1])
            return float(min(max(ends[i] - values[i] / slopes[i], ends[i]), ends[i + 1]))
        lo, T = T, 2.0 * T
    return float(T)


#: The atom weights over which SSNAL's soft-margin ``tau_factor`` rule was measured (see :func:`solve_dual`'s
#: Notes); the rule takes the median weight clipped to this range. Extrapolated, grid weights ~1e9 (samples
#: at the scale 1e4) gave 1e-3 and a run stalled at a gap of 0.63 where 0.01 certifies 1.6e-5.
TAU_RULE_WEIGHTS = (2e-3, 1.0)


#: SSNAL stops as ``inaccurate`` when, at ``sigma_max``, the best certified gap has not fallen by 10 %
#: over this many outer iterations whose inner loops all ended on their gradient's rounding.
SSNAL_STALL_CHECKS = 3


#: An SSNAL stall whose gap is within this factor of the certificate's resolution is float64's limit on the
#: certificate (the message says to loosen tol); beyond it, the iterates' own (the message says so).
STALL_NEAR_RESOLUTION = 1e3


def _stall_hint(tracker, rel) -> str:
    """What an SSNAL stall at ``rel`` says about its cause: near the certificate's resolution, loosen tol;
    far above it (a gap of 0.5 against a resolution of 1e-12), the iterates' scale."""
    resolution = tracker.resolution
    if rel <= STALL_NEAR_RESOLUTION * resolution:
        return f"the certificate's own rounding allows {resolution:.3g}; loosen tol"
    p = tracker.p
    largest = float(np.max(tracker.best_lam, initial=0.0))
    return (f"far above the certificate's own rounding, {resolution:.3g}: the iterates, not the certificate, are "
            f"at float64's limit, with multipliers up to {largest:.3g} and atom weights from {p.Delta.min():.3g} "
            f"to {p.Delta.max():.3g}; weights or data closer to unit scale"
            f"{', or a soft margin C,' if p.C is None else ''} may help")


def _ssnal(sc, tracker, lam, z, max_iter, *, sigma0=10.0, sigma_growth=2.0, sigma_max=1e6, tau_factor=None,
           inner_tol=0.3, max_inner=200, lp_check_after=5):
    if tau_factor is None:  # measured per margin kind and atom weight (see solve_dual's Notes)
        typical_weight = float(np.clip(np.median(sc.Delta), *TAU_RULE_WEIGHTS))  # (not extrapolated)
        tau_factor = 10.0 if sc.p.C is None else float(np.clip(
            0.01 * typical_weight ** -0.75 * min(sc.ub, 1.0) ** 0.5, 1e-3, 10.0))
    M = sc.M
    s, ub, Delta = sc.s, sc.ub, sc.Delta
    if z is None:
        z = np.zeros(M)
    # stationarity of the Lagrangian in lambda (a cold start's B^T 0 skipped: a sparse problem's Phi^T,
    # 13 MB on the bench instance, is then never built)
    mu = sc.c - sc.BT_mul(z) if np.any(z) else sc.c.copy()
    sigma = float(sigma0)
    newton_total = 0
    status, message = None, ""
    k = 0
    n_checks = 0
    best_gaps, noise_stops = [], []  # per outer iteration: best gap, inner loop ended at float64's rounding
    active_rows = _ActiveRows(sc)
    while True:
        k += 1
        tau = tau_factor * sigma
        lam_k = lam.copy()
        tdelta = Delta / sigma
        v = sc.B_mul(lam) + z / sigma
        x = lam + mu / sigma
        n_active = 0
        at_noise = False
        for it in range(max_inner + 1):
            P = prox_h(v, tdelta, s)
            zt = sigma * (v - P)  # zero on the identity zone |v| <= s
            mut = sigma * (x - np.clip(x, 0.0, ub))
            a = np.abs(v)
            A = np.flatnonzero(a > s)  # atoms in the clip or shrink zone: the only ones with zt != 0
            n_active = A.size
            # |A| x N, dense; B^T zt = U^T zt_A (no full product); the Gram matrix for Woodbury's system
            if A.size < sc.N:
                A, U, gram = active_rows.update(A)  # A in the buffers' slot order from here on
            else:
                U, gram = sc.rows(A), None
            g = -sc.c + U.T @ zt[A] + mut + (lam - lam_k) / tau
            gn = float(np.linalg.norm(g))
            pres = float(np.linalg.norm(zt - z) + np.linalg.norm(mut - mu)) / sigma
            if (it > 0 and gn <= max(1e-12, inner_tol * min(1.0, pres))) or it == max_inner or tracker.out_of_time():
                break
            if it > 0 and gn <= 1e-6 and gn <= _gradient_noise(sc, U, v[A], x, zt[A], lam - lam_k, sigma, tau):
                at_noise = True
                break  # g is down to its own rounding (sigma magnifies that of v - prox(v)): no Newton step can help
            tA = tdelta[A]
            W = sigma * np.where(a[A] <= s * (1.0 + tA), 1.0, tA / (1.0 + tA))
            d = _newton_direction(sc, U, W, x, g, sigma, tau, gram)
            if not np.isfinite(d).all():
                raise np.linalg.LinAlgError("non-finite Newton direction")
            Bd = sc.B_mul(d)
            gd = float(g @ d)
            if gd >= 0:  # not a descent direction (numerical trouble): fall back to the gradient
                d, Bd, gd = -g, sc.B_mul(-g), -gn * gn
            t = _line_search(sc, v, x, lam - lam_k, d, Bd, sigma, tau, tdelta)
            newton_total += 1
            if t * float(np.max(np.abs(d))) <= 4.0 * _EPS * float(np.max(np.abs(lam), initial=0.0)):
                at_noise = True
                break  # the step is below the multipliers' own rounding: no Newton step can move them
            lam = lam + t * d
            v = v + t * Bd
            x = x + t * d
        z, mu = zt, mut
        rel = tracker.check(k, np.clip(lam, 0.0, ub), z, restarts=0, sigma=sigma, newton=newton_total,
                            active_atoms=n_active)
        n_checks += 1
        status, message = _stop_state(tracker, rel, k, max_iter, lp_check_after, n_checks)
        best_gaps.append(tracker.gap()[1])
        noise_stops.append(at_noise)
        if (status is None and sigma >= sigma_max and np.isfinite(best_gaps[-1]) and all(
                noise_stops[-SSNAL_STALL_CHECKS:]) and gap_stalled(best_gaps, SSNAL_STALL_CHECKS)):
            status = Status.INACCURATE
            message = (f"SSNAL stalled: the certified rel_gap stayed at {best_gaps[-1]:.3g} over the last "
                       f"{SSNAL_STALL_CHECKS} outer iterations at sigma = sigma_max = {sigma:g}, each ended "
                       f"with its gradient or its Newton step at float64's rounding, above "
                       f"tol = {tracker.tol:g} ({_stall_hint(tracker, best_gaps[-1])})")
        if status is not None:
            break
        sigma = min(sigma * sigma_growth, sigma_max)
    status, message = _final_lp_check(tracker, status, message)
    return status, k, message, {"newton_steps": newton_total, "sigma": sigma}


# ---------------------------------------------------------------------------------------
# restarted PDHG
# ---------------------------------------------------------------------------------------
def _pdhg(sc, tracker, lam, z, max_iter, *, check_every=64, restart=True, lp_check_after=20, omega0=1.0):
    ub, Delta, s = sc.ub, sc.Delta, sc.s
    if z is None:
        z = np.zeros(sc.M)
    eta = 0.95 / sc.norm_B()
    omega = float(omega0)

    def step(lam, z, tau, sigma):
        lam1 = np.clip(lam - tau * (sc.BT_mul(z) - sc.c), 0.0, ub)
        z1 = prox_h_conjugate(z + sigma * sc.B_mul(2.0 * lam1 - lam), sigma, Delta, s)
        return lam1, z1

    def residual(lam, z, lam1, z1, tau, sigma):
        dl, dz = lam1 - lam, z1 - z
        return float(np.sqrt(max(dl @ dl / tau + dz @ dz / sigma - 2.0 * dz @ sc.B_mul(dl), 0.0)))

    lam_avg, z_avg, n_avg = lam.copy(), z.copy(), 0
    lam_last, z_last = lam.copy(), z.copy()
    r_last = r_prev = None
    since = 0
    restarts = 0
    n_checks = 0
    k = 0
    status, message = None, ""
    while True:
        tau, sigma = eta / omega, eta * omega
        lam, z = step(lam, z, tau, sigma)
        n_avg += 1
        lam_avg += (lam - lam_avg) / n_avg
        z_avg += (z - z_avg) / n_avg
        k += 1
        since += 1
        if k % check_every and k < max_iter and not tracker.out_of_time():
            continue
        tracker.check(k, lam_avg, z_avg, record=False)  # the averaged iterate improves the bounds too
        rel = tracker.check(k, lam, z, restarts=restarts, omega=omega)
        n_checks += 1
        status, message = _stop_state(tracker, min(rel, tracker.gap()[1]), k, max_iter, lp_check_after, n_checks)
        if status is not None:
            break
        if restart:
            l2, z2 = step(lam, z, tau, sigma)
            rc = residual(lam, z, l2, z2, tau, sigma)
            l3, z3 = step(lam_avg, z_avg, tau, sigma)
            ra = residual(lam_avg, z_avg, l3, z3, tau, sigma)
            cand_l, cand_z, r = (lam_avg.copy(), z_avg.copy(), ra) if ra < rc else (lam.copy(), z.copy(), rc)
            if r_last is None:
                r_last = r
            do = restart_due(r, r_last, r_prev, since, k)
            r_prev = r
            if do:
                omega = updated_primal_weight(omega, float(np.linalg.norm(cand_l - lam_last)),
                                              float(np.linalg.norm(cand_z - z_last)))
                lam, z = cand_l, cand_z
                lam_last, z_last = cand_l.copy(), cand_z.copy()
                lam_avg, z_avg, n_avg = cand_l.copy(), cand_z.copy(), 0
                r_last, r_prev, since = r, None, 0
                restarts += 1
    status, message = _final_lp_check(tracker, status, message)
    return status, k, message, {"restarts": restarts, "omega": omega}


# ---------------------------------------------------------------------------------------
# projected (sub)gradient ascent (the paper's method, kept as a baseline)
# ---------------------------------------------------------------------------------------
def _subgradient(sc, tracker, lam, z, max_iter, *, step0=None, decay=1000.0, check_every=64, lp_check_after=20):
    ub, Delta, s = sc.ub, sc.Delta, sc.s
    if step0 is None:
        step0 = 1.0 / (sc.norm_B() ** 2 * float(Delta.max()))
    k = 0
    n_checks = 0
    status, message = None, ""
    while True:
        u = sc.B_mul(lam)
        alpha = np.where(np.abs(u) > s, u, 0.0)
        g = sc.c - sc.BT_mul(Delta * alpha)  # ascent direction: margin violations
        lam = np.clip(lam + step0 / np.sqrt(1.0 + k / decay) * g, 0.0, ub)
        k += 1
        if k % check_every and k < max_iter and not tracker.out_of_time():
            continue
        rel = tracker.check(k, lam, None, restarts=0)
        n_checks += 1
        status, message = _stop_state(tracker, rel, k, max_iter, lp_check_after, n_checks)
        if status is not None:
            break
    status, message = _final_lp_check(tracker, status, message)
    return status, k, message, {"step0": step0}


def solve_problem(problem: RKHSProblem, solver: str = "fast", *, method: str = "ssnal", tol: float | None = None,
                  max_iter=None, time_limit=None, lam0=None, critical_tol: float = DEFAULT_CRITICAL_TOL,
                  solver_options: dict | None = None, statement: str = "dual") -> RKHSResult:
    """Solve an :class:`RKHSProblem` with the fast core or a CVXPY backend (dual statement by default).

    ``tol`` is the fast core's relative gap (default 1e-6); for a CVXPY backend, when given, it is
    mapped to the backend's own tolerances (see :func:`gtvcvx.runner.run_solver`).
    """
    solver = _normalize_solver(solver)
    opts = _checked_solver_options(solver_options)
    check_critical_tol(critical_tol)
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


#: Arguments of :func:`solve_problem` that ``solver_options`` must not repeat.
_OWN_ARGUMENTS = ("method", "tol", "max_iter", "time_limit", "lam0", "critical_tol")


def _checked_solver_options(solver_options) -> dict:
    """``solver_options`` as a dict of option names, refusing what is not one or repeats an argument."""
    if solver_options is None:
        return {}
    if not isinstance(solver_options, Mapping) or not all(isinstance(k, str) for k in solver_options):
        raise ValueError(f"solver_options must be a dict of option names to values, got {solver_options!r}")
    repeated = [k for k in _OWN_ARGUMENTS if k in solver_options]
    if repeated:
        raise ValueError(f"solver_options must not set {repeated}: pass {'it' if len(repeated) == 1 else 'them'} "
                         "as the argument(s) of the same name")
    return dict(solver_options)


def _normalize_solver(solver) -> str:
    if not isinstance(solver, str) or not solver:
        raise ValueError(f"solver must be one of {SOLVERS} (or another CVXPY backend), got {solver!r}")
    return "fast" if solver.lower() == "fast" else solver.upper()
