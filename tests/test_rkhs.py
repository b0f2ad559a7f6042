"""Kernel-sparse RKHS classifier: dictionary, prox, fast core vs CVXPY, certificates, errors.

Every CVXPY instance here is tiny (at most 40 samples x 72 atoms). Tolerances are stated
next to each assertion.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp

from gtvcvx.reference import installed_backends
from gtvcvx.rkhs.reference import solve_rkhs_dual, solve_rkhs_primal
from gtvcvx.results import Status
from gtvcvx.rkhs import (Dictionary, NotFittedError, RKHSProblem, SparseKernelClassifier, certify, gaussian_kernel,
                         psi, solve_dual)
from gtvcvx.rkhs.data import ELLIPSE_BOX, ellipses
from gtvcvx.rkhs.solver import prox_h, prox_h_conjugate

BACKENDS = [b for b in ("CLARABEL", "SCS") if b in installed_backends()]
needs_clarabel = pytest.mark.skipif("CLARABEL" not in BACKENDS, reason="CLARABEL is not installed")


def tiny_problem(C=None, n=40, seed=3, ppd=6, widths=(2.0, 4.0), gamma=0.5, eps=0.1):
    data = ellipses(n, seed=seed)
    D = Dictionary.grid(ELLIPSE_BOX, ppd, widths, threshold=1e-6)
    return RKHSProblem(data.X, data.y, D, gamma, eps, C)


@pytest.fixture(scope="module")
def references():
    """CLARABEL dual optimum of the two tiny instances (hard margin and soft margin)."""
    if "CLARABEL" not in BACKENDS:
        pytest.skip("CLARABEL is not installed")
    out = {}
    for C in (None, 20.0):
        p = tiny_problem(C)
        out[C] = (p, solve_rkhs_dual(p, "CLARABEL"))
    return out


# --------------------------------------------------------------------------- dictionary
def test_grid_dictionary_atoms_weights_and_sparse_kernel():
    D = Dictionary.grid([(0.0, 4.0), (0.0, 2.0)], [4, 2], [0.5, 1.0], threshold=1e-3)
    assert D.n_atoms == 4 * 2 * 2 and D.dim == 2
    np.testing.assert_allclose(D.weights, 1.0)  # cell area (4/4) * (2/2)
    np.testing.assert_allclose(np.unique(D.centers[:, 0]), [0.5, 1.5, 2.5, 3.5])  # cell midpoints
    X = np.random.default_rng(0).uniform(0, 4, size=(30, 2))
    K = D.kernel_matrix(X)
    dense = gaussian_kernel(X, D.centers, D.widths)
    kept = dense >= 1e-3
    np.testing.assert_allclose(K.toarray()[kept], dense[kept], rtol=1e-12)
    assert (K.toarray()[~kept] == 0).all() and K.nnz == kept.sum()
    alpha = np.zeros(D.n_atoms)
    alpha[[1, 7]] = [2.0, -1.0]
    np.testing.assert_allclose(D.evaluate(X, alpha), K @ (D.weights * alpha), rtol=1e-12)


def test_sobol_and_sample_dictionaries():
    S = Dictionary.sobol([(-1, 1)] * 3, 100, [1.0, 2.0], seed=1)
    assert S.n_atoms == 200 and S.dim == 3
    np.testing.assert_allclose(S.weights, 8.0 / 100)  # box volume / n
    assert (np.abs(S.centers) <= 1).all()
    X = np.random.default_rng(1).normal(size=(10, 3))
    F = Dictionary.from_samples(X, 1.5)
    np.testing.assert_allclose(F.centers, X)
    np.testing.assert_allclose(F.weights, 0.1)
    with pytest.raises(ValueError, match="widths"):
        Dictionary.grid([(0, 1)], 3, [-1.0])
    with pytest.raises(ValueError, match="bounds"):
        Dictionary.grid([(1, 0)], 3, 1.0)


# --------------------------------------------------------------------------- prox
def test_prox_h_matches_brute_force_and_moreau():
    rng = np.random.default_rng(0)
    s, t = 1.3, 0.7
    grid = np.linspace(-6, 6, 240_001)
    for v in np.concatenate([rng.uniform(-4, 4, 20), [s, -s, s * (1 + t), 0.0]]):
        obj = t * np.maximum(grid**2 / 2 - s**2 / 2, 0) + (grid - v) ** 2 / 2
        assert abs(prox_h(np.array([v]), t, s)[0] - grid[np.argmin(obj)]) < 1e-4  # grid step 5e-5
    # Moreau: prox_{sigma h*}(v) + sigma prox_{h/sigma}(v/sigma) = v
    v = rng.normal(scale=3, size=50)
    Delta = rng.uniform(0.5, 2.0, 50)
    sigma = 0.8
    np.testing.assert_allclose(prox_h_conjugate(v, sigma, Delta, s) + sigma * prox_h(v / sigma, Delta / sigma, s), v)


def test_psi_is_the_convex_envelope():
    gamma = 0.5
    a = np.linspace(-4, 4, 161)
    b = np.linspace(-20, 20, 40_001)
    conj = np.maximum(b**2 / 2 - gamma, 0)
    biconj = np.max(a[:, None] * b[None, :] - conj[None, :], axis=1)
    np.testing.assert_allclose(psi(a, gamma), biconj, atol=1e-3)  # b-grid step 1e-3
    assert (psi(a, gamma) <= a**2 / 2 + gamma * (a != 0) + 1e-12).all()


# --------------------------------------------------------------------------- closed form
def two_points(gamma):
    """One kernel at the origin (width 1, Delta = 1); samples at distance 0 and 1, both +1."""
    D = Dictionary(np.zeros((1, 2)), 1.0, 1.0, threshold=0.0)
    X = np.array([[0.0, 0.0], [1.0, 0.0]])
    return RKHSProblem(X, np.array([1.0, 1.0]), D, gamma, 0.1)


@pytest.mark.parametrize("solver", ["fast"] + BACKENDS)
def test_two_points_one_kernel_closed_form(solver):
    # alpha >= (1 - eps)/kappa binds at the far sample (kappa = e^{-1/2}); with gamma = 0.5,
    # alpha* = 0.9 e^{1/2} > sqrt(2 gamma) = 1, so P* = D* = alpha*^2/2 + gamma, lambda* = (0, 2 alpha*/kappa).
    p = two_points(0.5)
    kappa = np.exp(-0.5)
    a_star = 0.9 / kappa
    value = a_star**2 / 2 + 0.5
    r = solve_dual(p, tol=1e-9) if solver == "fast" else solve_rkhs_dual(p, solver)
    tol = 1e-6 if solver != "SCS" else 1e-4
    assert r.status == Status.OPTIMAL
    assert r.dual == pytest.approx(value, rel=tol)
    assert r.primal == pytest.approx(value, rel=tol)
    # multipliers converge like the square root of the objective (curvature kappa^2/4 in lambda_2)
    np.testing.assert_allclose(r.multipliers, [0.0, 2 * a_star / kappa], atol=1e-3, rtol=1e-3)
    with pytest.warns(DeprecationWarning, match="use RKHSResult.multipliers"):
        assert r.lam is r.multipliers  # the old name, kept as a deprecated alias
    # the feasible envelope point is first-order accurate (psi has slope a* there); the L0
    # recovery abar inherits the multipliers' square-root accuracy
    np.testing.assert_allclose(r.alpha_envelope, [a_star], rtol=tol)
    np.testing.assert_allclose(r.alpha, [a_star], rtol=1e-3)
    # no relaxation gap in this case: the L0 cost at the recovery is the optimum; its objective is that
    # cost where the recovery meets the hard margin and inf where it does not (SCS's, by ~1e-5)
    assert p.l0_cost(r.alpha) - r.dual == pytest.approx(0.0, abs=1e-3 * value)
    assert r.l0_primal == (p.l0_cost(r.alpha) if r.margin_violation <= 0 else np.inf)
    assert list(r.critical_samples()) == [1]


def test_two_points_kink_case_value():
    # gamma = 2: alpha* = 0.9 e^{1/2} < sqrt(2 gamma) = 2, the envelope is linear there: P* = 2 alpha*.
    p = two_points(2.0)
    r = solve_dual(p, tol=1e-9)
    assert r.dual == pytest.approx(2.0 * 0.9 / np.exp(-0.5), rel=1e-8)
    assert r.primal == pytest.approx(r.dual, rel=1e-8)


# --------------------------------------------------------------------------- fast vs CVXPY
@needs_clarabel
@pytest.mark.parametrize("C", [None, 20.0])
def test_fast_dual_agrees_with_clarabel(references, C):
    p, ref = references[C]
    assert ref.status == Status.OPTIMAL
    fast = solve_dual(p, tol=1e-7)
    assert fast.status == Status.OPTIMAL and fast.rel_gap <= 1e-7
    assert abs(fast.dual - ref.dual) <= 1e-6 * abs(ref.dual)  # the stated 1e-6 relative agreement
    for method in ("pdhg", "subgradient"):  # the other methods certify what they return
        other = solve_dual(p, method=method, max_iter=3000)
        assert other.dual <= ref.dual + 1e-7 * abs(ref.dual)
        assert other.primal >= ref.dual - 1e-7 * abs(ref.dual)


@pytest.mark.parametrize("solver", BACKENDS)
@pytest.mark.parametrize("C", [None, 20.0])
def test_strong_duality_between_cvxpy_statements(solver, C):
    p = tiny_problem(C)
    d = solve_rkhs_dual(p, solver)
    q = solve_rkhs_primal(p, solver)
    assert d.status == q.status == Status.OPTIMAL
    tol = 1e-6 if solver == "CLARABEL" else 1e-4  # SCS is a first-order method (eps 1e-7)
    assert d.info["value"] == pytest.approx(q.info["value"], rel=tol)  # backends' own objectives
    # the multipliers of the primal's margins are lambda / N: re-evaluated, they give the same dual
    assert q.dual == pytest.approx(d.dual, rel=tol)


@needs_clarabel
@pytest.mark.parametrize("C", [None, 20.0])
def test_predictions_agree_between_solvers(references, C):
    p, ref = references[C]
    fast = SparseKernelClassifier(p.dictionary, p.gamma, p.eps, C).fit(p.X, p.y)
    clar = SparseKernelClassifier(p.dictionary, p.gamma, p.eps, C, solver="CLARABEL").fit(p.X, p.y)
    grid = ellipses(400, seed=11).X
    f_fast, f_clar = fast.decision_function(grid), clar.decision_function(grid)
    clear = np.abs(f_clar) > 1e-3 * np.abs(f_clar).max()  # away from the boundary itself
    assert (np.sign(f_fast[clear]) == np.sign(f_clar[clear])).all()
    np.testing.assert_allclose(f_fast, f_clar, atol=1e-3 * np.abs(f_clar).max())
    assert set(fast.critical_samples_) == set(clar.critical_samples_)


@needs_clarabel
@pytest.mark.parametrize("C", [None, 20.0])
@pytest.mark.parametrize("method,max_iter", [("ssnal", 1), ("ssnal", 3), ("pdhg", 200), ("subgradient", 200)])
def test_certified_gap_bounds_true_suboptimality(references, C, method, max_iter):
    p, ref = references[C]
    d_star = ref.dual  # CLARABEL optimum, itself accurate to ~1e-8 relative
    r = solve_dual(p, method=method, max_iter=max_iter, check_every=50) if method != "ssnal" \
        else solve_dual(p, method=method, max_iter=max_iter)
    slack = 1e-7 * abs(d_star)
    if r.feasible_primal:
        assert r.gap >= d_star - r.dual - slack  # dual suboptimality
        assert r.gap >= r.primal - d_star - slack  # primal suboptimality
        assert r.primal == pytest.approx(p.envelope_objective(r.alpha_envelope), rel=1e-12)
        assert (p.margin_violation(r.alpha_envelope) == 0).all() or C is not None
    else:
        assert not np.isfinite(r.gap) and r.message  # says so instead of a number


def test_certificate_without_feasible_primal_point():
    p = tiny_problem(None)
    cert = certify(p, np.zeros(p.N), np.zeros(p.M))
    assert cert.alpha_envelope is None and cert.primal == np.inf and cert.gap == np.inf
    assert "no feasible primal point" in cert.message
    assert cert.dual == 0.0 and cert.margin_violation == pytest.approx(0.9)


# --------------------------------------------------------------------------- infeasible / errors
def overlapping():
    X = np.array([[0.0, 0.0], [0.0, 0.0], [2.0, 1.0]])
    y = np.array([1.0, -1.0, 1.0])
    D = Dictionary.grid([(-1, 3), (-1, 2)], 3, 1.0)
    return X, y, D


@pytest.mark.parametrize("C", [1e12, 1e50, 1e200])
def test_a_soft_margin_with_a_huge_C_certifies_like_the_hard_margin(C):
    """A separable instance with C far above every hard-margin multiplier has the hard margin's solution.
    Its certificate used to score the primal point with the hinges at the margins, paying C/N times the
    rounding of ``f`` at each margin at the kink: C = 1e12 stopped ``inaccurate`` at a gap of 0.054 and
    C = 1e50 at 1. The point scaled up until every margin holds despite rounding pays no hinge."""
    hard = solve_dual(tiny_problem(), tol=1e-8, record_history=False)
    soft = solve_dual(tiny_problem(C=C), tol=1e-8, record_history=False)
    assert hard.status == soft.status == Status.OPTIMAL
    assert soft.rel_gap <= 1e-8
    assert soft.dual == pytest.approx(hard.dual, rel=1e-7)
    assert soft.primal == pytest.approx(hard.primal, rel=1e-7)


@pytest.mark.parametrize("which", ["dual", "primal"])
def test_a_backend_claiming_a_soft_margin_unbounded_or_infeasible_is_a_solver_error(monkeypatch, which):
    """A soft margin's dual maximizes a concave function over a box and its primal is feasible with slacks:
    a backend's "unbounded" / "infeasible" there is its own numerical failure (CLARABEL said the dual was
    unbounded with grid weights ~1e9), reported as ``solver_error`` naming the backend and the weights;
    the same claim on a hard margin is explained as overlapping classes."""
    from gtvcvx.reference.backend import BackendRun
    from gtvcvx.rkhs import reference

    claim = Status.UNBOUNDED if which == "dual" else Status.INFEASIBLE
    monkeypatch.setattr(reference, "run_cvxpy", lambda problem, solver, opts: BackendRun(
        claim, solver, float("nan"), 0.0, 0.0, None, f"CVXPY status '{claim}'"))
    solve = solve_rkhs_dual if which == "dual" else solve_rkhs_primal
    soft = solve(tiny_problem(C=10.0), "CLARABEL")
    assert soft.status == Status.SOLVER_ERROR
    assert "CLARABEL reported that" in soft.message and "cannot be" in soft.message and "Delta" in soft.message
    hard = solve(tiny_problem(), "CLARABEL")
    assert hard.status == claim and "overlapping classes" in hard.message


def test_ssnal_soft_margin_rule_is_not_extrapolated_to_huge_atom_weights():
    """Samples at the scale 1e4 on a grid dictionary (cell-volume weights Delta ~ 1.3e9): the measured
    ``tau_factor`` rule, extrapolated to such weights, gave its floor 1e-3 and SSNAL stalled at a certified
    gap of 0.63; with the weight clipped to the measured range it certifies 1e-4."""
    scale = 1e4
    data = ellipses(120, seed=2)
    D = Dictionary.grid(np.asarray(ELLIPSE_BOX) * scale, 8, (2.0 * scale, 4.0 * scale), threshold=1e-6)
    p = RKHSProblem(data.X * scale, data.y, D, 25.0, 0.9, 1000.0)
    assert p.Delta.min() > 1e9
    r = solve_dual(p, tol=1e-4, record_history=False)
    assert r.status == Status.OPTIMAL and r.rel_gap <= 1e-4


def _tiny_weights_problem(C, scale=1e-3):
    """Samples at the scale 1e-3 on a grid dictionary: cell-volume weights Delta ~ 1.3e-5, all 128 atoms
    in the shrink zone, multipliers ~ 3e8."""
    data = ellipses(120, seed=2)
    D = Dictionary.grid(np.asarray(ELLIPSE_BOX) * scale, 8, (2.0 * scale, 4.0 * scale), threshold=1e-6)
    return RKHSProblem(data.X * scale, data.y, D, 0.5, 0.1, C)


@pytest.mark.parametrize("C", [None, 1e8])
def test_active_set_polish_finishes_a_run_whose_iterates_stall(monkeypatch, C):
    """Grid weights ~1e-5: SSNAL's dual converges but its primal lags, and the run stalled at sigma_max at a
    certified gap of 9e-6 (C = 1e8: 4e-6). Solving the optimality conditions on the active sets of the best
    point certifies ~3e-12; with the polish off the run still stops ``inaccurate``. (In the problem's own
    units: in those of :func:`weight_scale` SSNAL certifies by itself, see the next test.)"""
    from gtvcvx.rkhs import solver as rs

    monkeypatch.setattr(rs, "UNIT_BAND", (0.0, np.inf))
    p = _tiny_weights_problem(C)
    r = solve_dual(p, tol=1e-9, record_history=False)
    assert r.status == Status.OPTIMAL and r.rel_gap <= 1e-9 and r.info["polished_rel_gap"] <= 1e-9
    monkeypatch.setattr(rs, "POLISH_MAX_UNKNOWNS", 0)
    unpolished = solve_dual(p, tol=1e-9, record_history=False)
    assert unpolished.status == Status.INACCURATE and unpolished.rel_gap > 1e-7
    assert unpolished.info["polished_rel_gap"] is None


@pytest.mark.parametrize("C, scale", [(None, 1e-3), (1e8, 1e-3), (None, 1e-4)])
def test_tiny_grid_weights_are_solved_in_units_of_their_multipliers(monkeypatch, C, scale):
    """Grid weights ~1e-5 (samples at the scale 1e-3) ask for multipliers ~3e8: in the problem's own units
    SSNAL stalled at sigma_max (certified 9e-6, rescued by the active-set polish after ~150 Newton steps);
    at the scale 1e-4 (weights 1.3e-7) it stalled at a gap of 0.49, which the polish could not rescue, and
    its message said to loosen tol. In the units of :func:`weight_scale` (multipliers of order one) SSNAL
    certifies by itself in ~20 steps; results and history are the problem's own (certified on it)."""
    from gtvcvx.rkhs import solver as rs

    p = _tiny_weights_problem(C, scale)
    assert rs.weight_scale(p) == pytest.approx(np.median(p.Delta), rel=1e-12)
    r = solve_dual(p, tol=1e-9)
    assert r.status == Status.OPTIMAL and r.rel_gap <= 1e-9 and r.info["polished_rel_gap"] is None
    assert (r.history["dual"].iloc[-1], r.history["primal"].iloc[-1]) == (r.dual, r.primal)
    monkeypatch.setattr(rs, "UNIT_BAND", (0.0, np.inf))
    own = solve_dual(p, tol=1e-9, record_history=False)
    assert r.info["newton_steps"] < 0.5 * own.info["newton_steps"]
    if own.status == Status.OPTIMAL:  # (polished)
        assert abs(own.dual - r.dual) <= 2e-9 * (1.0 + abs(r.dual))
    else:  # stalled far above the certificate's resolution: the message says it is not tol's fault
        assert own.status == Status.INACCURATE and own.rel_gap > 0.1
        assert "the iterates, not the certificate" in own.message and "loosen tol" not in own.message
        assert own.primal >= r.primal - 1e-9 * (1.0 + abs(r.primal)) and own.dual <= r.dual + 1e-9 * abs(r.dual)


def test_weight_scale_is_the_inverse_of_the_multipliers_expected_size():
    """``1 / kappa = min(max(1 / median(Delta), s), C)``: the margins ask for multipliers ~ 1 / Delta, an atom
    enters at ``|abar| = s``, a soft margin caps them at C; inside the band the problem is solved as given."""
    from gtvcvx.rkhs import solver as rs

    def problem(weight, gamma, C):
        data = ellipses(20, seed=0)
        D = Dictionary.from_samples(data.X, 1.0, weights=weight)
        return RKHSProblem(data.X, data.y, D, gamma, 0.1, C)

    assert rs.weight_scale(problem(1e-6, 0.5, None)) == pytest.approx(1e-6)  # margins: multipliers ~1e6
    assert rs.weight_scale(problem(1e-6, 0.5, 10.0)) == 1.0  # capped at C = 10: in the band
    assert rs.weight_scale(problem(1e-6, 0.5, 1e5)) == pytest.approx(1e-5)
    assert rs.weight_scale(problem(1e9, 25.0, 1e3)) == 1.0  # sparsity: multipliers ~ s = 7
    assert rs.weight_scale(problem(1e9, 1e-12, None)) == pytest.approx(1.0 / np.sqrt(2e-12))  # s = 1.4e-6
    assert rs.weight_scale(problem(0.79, 0.5, 1e3)) == 1.0
    assert rs.weight_scale(problem(5e-324, 0.5, None)) == 1.0  # (1 / median overflows: the problem as given)


def test_a_polish_that_misses_changes_nothing(monkeypatch):
    """A polished point from wrong active sets is certified like any other and, being worse, kept by nobody:
    the run's bounds, status and message are those it had."""
    from gtvcvx.rkhs import solver as rs

    monkeypatch.setattr(rs, "UNIT_BAND", (0.0, np.inf))  # (the problem's own units, where its run stalls)
    p = _tiny_weights_problem(None)
    monkeypatch.setattr(rs, "POLISH_MAX_UNKNOWNS", 0)
    plain = solve_dual(p, tol=1e-9, record_history=False)
    monkeypatch.setattr(rs, "POLISH_MAX_UNKNOWNS", 1000)
    monkeypatch.setattr(rs, "_active_set_point", lambda problem, lam, alpha: (0.5 * lam, 2.0 * alpha))
    missed = solve_dual(p, tol=1e-9, record_history=False)
    assert (missed.status, missed.primal, missed.dual, missed.message) == (plain.status, plain.primal, plain.dual,
                                                                           plain.message)
    assert missed.info["polished_rel_gap"] > 1e3 * plain.rel_gap  # (the polished point's own gap)

    def failing(problem, lam, alpha):
        raise np.linalg.LinAlgError("SVD did not converge")

    monkeypatch.setattr(rs, "_active_set_point", failing)
    again = solve_dual(p, tol=1e-9, record_history=False)
    assert (again.status, again.primal, again.dual) == (plain.status, plain.primal, plain.dual)


@pytest.mark.parametrize("C", [None, 1000.0, 10.0])
def test_active_set_point_of_a_near_optimal_point_is_optimal_to_rounding(C):
    """From a point certified at 1e-6 (hard margin; soft with no multiplier at C; soft with some at C; atoms
    in the shrink zone and at the kink) the active-set point certifies below 1e-11."""
    from gtvcvx.rkhs import solver as rs

    p = tiny_problem(C=C, gamma=0.01)
    r = solve_dual(p, tol=1e-6, record_history=False)
    alpha, lam = r.alpha_envelope, r.multipliers
    assert (np.abs(alpha[alpha != 0]) < 0.999 * p.s).any()
    if C == 10.0:
        assert (lam >= 0.999 * C).any()
    else:
        assert (np.abs(alpha) > 1.001 * p.s).any()
    lam_polished, alpha_polished = rs._active_set_point(p, lam, alpha)
    assert certify(p, lam_polished, p.Delta * alpha_polished).rel_gap < 1e-11 < r.rel_gap


def test_active_set_point_with_huge_atom_weights():
    """Grid weights Delta ~ 1.3e9 (samples at the scale 1e4), gamma = 25, eps = 0.9, every used atom at the
    kink: the active-set system's two block rows differ by ~Delta. Unscaled, least squares cut the small
    block as noise and the polished margins missed ``1 - eps`` by 5 %; with coefficients ``N Delta alpha``
    as unknowns and equilibrated rows they hold to 1e-12 and the point certifies below 1e-11."""
    from gtvcvx.rkhs import solver as rs

    scale = 1e4
    data = ellipses(120, seed=2)
    D = Dictionary.grid(np.asarray(ELLIPSE_BOX) * scale, 8, (2.0 * scale, 4.0 * scale), threshold=1e-6)
    p = RKHSProblem(data.X * scale, data.y, D, 25.0, 0.9)
    assert p.Delta.min() > 1e9
    r = solve_dual(p, tol=1e-6, record_history=False)
    lam, alpha = rs._active_set_point(p, r.multipliers, r.alpha_envelope)
    free = lam > 0
    assert free.sum() >= 30 and not (np.abs(alpha) > p.s).any()
    margins = p.y * p.decision(alpha)
    assert np.abs(margins[free] - (1.0 - p.eps)).max() < 1e-12
    assert certify(p, lam, p.Delta * alpha).rel_gap < 1e-11


def test_hard_margin_with_overlapping_classes_is_unbounded():
    X, y, D = overlapping()
    p = RKHSProblem(X, y, D, 0.5, 0.1)
    fast = solve_dual(p)
    assert fast.status == Status.UNBOUNDED and "soft margin" in fast.message
    assert not np.isfinite(fast.gap)
    # the LP's claim is at its tolerance; along a Farkas ray of the margins the dual is certified (was ~5e3)
    assert "Farkas ray" in fast.message and fast.dual > 1e20
    if "CLARABEL" in BACKENDS:
        assert solve_rkhs_dual(p, "CLARABEL").status == Status.UNBOUNDED
        primal = solve_rkhs_primal(p, "CLARABEL")
        assert primal.status == Status.INFEASIBLE and "soft margin" in primal.message
    with pytest.raises(ValueError, match="unbounded"):
        SparseKernelClassifier(D, 0.5, 0.1, C=None).fit(X, y)
    soft = solve_dual(RKHSProblem(X, y, D, 0.5, 0.1, C=5.0))
    assert soft.status == Status.OPTIMAL and soft.rel_gap <= 1e-6


def test_margins_the_lp_calls_infeasible_get_a_certified_dual_that_is_still_a_bound():
    """Two samples 1e-5 apart with opposite labels, one width-1 atom on each: the margins hold, but only with
    coefficients ~1.8e10, and HiGHS calls them infeasible. The Farkas ray's certified dual (1.4e20) says how
    costly any classifier meeting them is, and stays below the cost of an explicit feasible one (3.3e20)."""
    from gtvcvx.rkhs.certificate import envelope_bound

    X, y = np.array([[0.0], [1e-5]]), np.array([-1.0, 1.0])
    D = Dictionary(X, 1.0, 1.0)
    p = RKHSProblem(X, y, D, 0.5, 0.1)
    fast = solve_dual(p)
    assert fast.status == Status.UNBOUNDED and "Farkas ray" in fast.message
    alpha = np.linalg.solve(D.kernel_matrix(X).toarray(), (1.0 - p.eps) * y)  # meets every margin exactly
    upper = min(envelope_bound(p, alpha * f)[0] for f in (1.0, 1.01, 1.1))
    assert 1e19 < fast.dual <= upper


def test_a_hard_margin_met_by_the_lp_to_its_tolerance_is_repaired_not_dropped():
    """Noisy moons (N = 200, seed 2) with the classifier's dictionary: the hard margins hold only with
    coefficients whose |K| |Delta alpha| reaches ~700. HiGHS's point meets them to its tolerance (a margin
    short by ~1e-9); the rescaling by 1 + 1e-12 was lost in the fresh rounding of ``f``, so the LP was
    reported as "a point that violates the margins in floating point" and the solve ran with no primal
    bound at all (at N = 1000: 200 outer iterations, rel_gap inf, predictions from the L0 recovery)."""
    from sklearn.datasets import make_moons

    from gtvcvx.rkhs.certificate import _abs_decision, hard_margin_feasible_point

    X, labels = make_moons(200, noise=0.2, random_state=2)
    y = np.where(labels == 1, 1.0, -1.0)
    widths = np.sqrt(X.shape[1] * X.var() / 2) * np.array([0.5, 1.0])
    p = RKHSProblem(X, y, Dictionary.from_samples(X, widths, weights=1.0), 0.5, 0.1)
    feasible, alpha, message = hard_margin_feasible_point(p)
    assert feasible is True and message == ""
    rounding = 4.0 * (p.M + 2) * np.finfo(float).eps * _abs_decision(p, alpha)
    assert (y * p.decision(alpha) - rounding >= 0.9).all()  # margins that hold despite the rounding of f
    assert np.isfinite(p.envelope_objective(alpha))


@pytest.mark.parametrize("C", [100.0, None])
def test_a_warm_start_that_stalls_ssnal_is_followed_by_a_cold_start(C):
    """Coefficients z0 1e50 times any sensible size: SSNAL's multiplier estimate never recovered and the
    run stopped ``inaccurate`` at a gap of 1 telling the caller to "loosen tol". It now runs once more
    from zero (the best bounds of both runs kept), certifies, and says so; garbage multipliers are
    named (lam must be numbers)."""
    data = ellipses(150, seed=1)
    p = RKHSProblem(data.X, data.y, Dictionary.grid(ELLIPSE_BOX, 8, (1.0, 2.0), threshold=1e-6), 0.5, 0.1, C)
    cold = solve_dual(p, record_history=False)
    warm = solve_dual(p, record_history=False, z0=1e50 * p.Delta)
    assert cold.status == warm.status == Status.OPTIMAL and warm.rel_gap <= 1e-6
    assert "restarted from zero" in warm.message and "restarted" not in cold.message
    assert warm.info["newton_steps"] > cold.info["newton_steps"]  # both runs' steps
    assert abs(warm.dual - cold.dual) <= 2e-6 * (1.0 + abs(cold.dual))
    with pytest.raises(ValueError, match="lam must be an array of real numbers"):
        certify(p, "abc")


def test_data_whose_squares_overflow_is_refused_by_name():
    """Features at 1e200: the default widths (from the data's spread) and the kernels' squared distances
    overflow. The classifier said "widths must be finite, found inf at index (0,)" (the caller passed no
    widths); now every entry point names the offending entry of X (or centers) and says to rescale."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    y = (X[:, 0] > 0).astype(int)
    huge = X * 1e200
    with pytest.raises(ValueError, match=r"X\[\d+, \d\] = .*e\+200: data beyond 1e\+150 .* rescale the data"):
        SparseKernelClassifier().fit(huge, y)
    clf = SparseKernelClassifier().fit(X, y)
    with pytest.raises(ValueError, match=r"X\[\d+, \d\] = .* rescale the data"):
        clf.predict(huge)
    dictionary = Dictionary.from_samples(X, 1.0)
    with pytest.raises(ValueError, match=r"X\[\d+, \d\] = .* rescale the data"):
        RKHSProblem(huge, np.where(y == 1, 1.0, -1.0), dictionary, 0.5, 0.1)
    with pytest.raises(ValueError, match=r"centers\[\d+, \d\] = .* rescale the data"):
        Dictionary(huge, 1.0)
    with pytest.raises(ValueError, match=r"X\[\d+, \d\] = .* rescale the data"):
        gaussian_kernel(huge, X, 1.0)
    at_limit = X / np.abs(X).max() * 1e150  # the limit itself still works
    assert SparseKernelClassifier().fit(at_limit, y).score(at_limit, y) > 0.9


def test_classifier_input_errors_name_the_argument():
    p = tiny_problem(20.0)
    clf = SparseKernelClassifier(p.dictionary, 0.5, 0.1, 20.0)
    with pytest.raises(NotFittedError, match="not fitted"):
        clf.predict(p.X)
    bad = p.X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):  # scikit-learn's conventions
        clf.fit(bad, p.y)
    with pytest.raises(ValueError, match="at least two classes"):
        clf.fit(p.X, np.ones(p.N))
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        clf.fit(p.X, p.y[:-1])
    y_nan = p.y.copy()
    y_nan[0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        clf.fit(p.X, y_nan)
    with pytest.raises(ValueError, match=r"X has 1 features, but the dictionary's atoms have 2 \(dictionary.dim\)"):
        clf.fit(p.X[:, :1], p.y)
    clf.fit(p.X, p.y)
    with pytest.raises(ValueError, match="X has 1 features, but SparseKernelClassifier is expecting 2"):
        clf.predict(p.X[:, :1])
    with pytest.raises(ValueError, match="Invalid parameter 'lambda_'"):
        clf.set_params(lambda_=1.0)
    with pytest.raises(ValueError, match="solver"):
        SparseKernelClassifier(p.dictionary, solver="").fit(p.X, p.y)
    with pytest.raises(ValueError, match="gamma"):
        SparseKernelClassifier(p.dictionary, gamma=-1.0).fit(p.X, p.y)
    with pytest.raises(ValueError, match="dictionary must be one of"):
        SparseKernelClassifier("atoms").fit(p.X, p.y)
    with pytest.raises(ValueError, match="n_centers must be a positive integer"):
        SparseKernelClassifier(n_centers=0).fit(p.X, p.y)


def test_solve_dual_and_solve_problem_refuse_options_they_do_not_take():
    from gtvcvx.rkhs import solve_dual
    from gtvcvx.rkhs.solver import solve_problem

    p = tiny_problem(20.0)
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['bogus'\] for method 'ssnal'; it takes \['sigma0'"):
        solve_dual(p, bogus=1)
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['sigma0'\] for method 'pdhg'"):
        solve_dual(p, method="pdhg", sigma0=5.0)  # an SSNAL option given to PDHG
    with pytest.raises(ValueError, match=r"tol must be a relative-gap tolerance below 1"):
        solve_dual(p, tol=1.0)
    with pytest.raises(ValueError, match=r"critical_tol must be a number in \[0, 1\)"):
        solve_dual(p, critical_tol=float("nan"))
    for options, match in [({"max_iter": 3}, r"solver_options must not set \['max_iter'\]"),
                           ({1: 2}, "solver_options must be a dict of option names"),
                           ("sigma0=5", "solver_options must be a dict of option names")]:
        for solver in ("fast", "CLARABEL"):
            with pytest.raises(ValueError, match=match):
                solve_problem(p, solver, solver_options=options)
    assert solve_problem(p, "fast", solver_options={"sigma0": 5.0}).status == Status.OPTIMAL


def test_classifier_maps_any_two_labels_and_back():
    p = tiny_problem(20.0)
    labels = np.where(p.y > 0, "inside", "outside")
    clf = SparseKernelClassifier(p.dictionary, 0.5, 0.1, 20.0).fit(p.X, labels)
    assert list(clf.classes_) == ["inside", "outside"]  # sorted: "inside" -> -1
    pred = clf.predict(p.X)
    assert set(pred) <= {"inside", "outside"}
    assert clf.score(p.X, labels) == pytest.approx(np.mean(pred == labels))
    assert clf.status_ == Status.OPTIMAL and clf.rel_gap_ <= 1e-6
    assert clf.n_kernels_ == np.count_nonzero(clf.alpha_) > 0
    assert (clf.dual_[clf.critical_samples_] > clf.critical_threshold_).all()
    params = clf.get_params()
    assert params["C"] == 20.0 and params["solver"] == "fast"
    assert clf.set_params(C=5.0).C == 5.0
    # scikit-learn's score: a label not seen in fit is a wrong prediction, not an error
    elsewhere = np.where(p.y > 0, "inside", "elsewhere")
    assert clf.set_params(C=20.0).fit(p.X, labels).score(p.X, elsewhere) == pytest.approx(
        np.mean(clf.predict(p.X) == elsewhere))


@pytest.mark.parametrize("method", ["ssnal", "pdhg", "subgradient"])
def test_tol_below_the_certificate_resolution_stops_as_inaccurate(method):
    """A tolerance float64 cannot certify ends as ``inaccurate`` with the reason, once the gap is
    down to the certificate's rounding, not after every iteration allowed (200 SSNAL outer
    iterations of up to 200 Newton steps before)."""
    p = tiny_problem(C=1.0)  # solved to the last bits in a few iterations
    r = solve_dual(p, method=method, tol=1e-16, record_history=False)
    assert r.status == Status.INACCURATE and r.iterations <= 64
    assert "float64 cannot certify tol = 1e-16" in r.message
    cert = certify(p, r.multipliers)
    assert 0 < cert.resolution < 1e-12 and cert.rounding > 0
    assert r.rel_gap <= 2.0 * cert.resolution * 1.01
    assert "rounding alone allows" in cert.resolution_message(1e-16)


def test_working_set_run_stops_as_inaccurate_below_the_resolution():
    p = tiny_problem(C=1.0)
    r = solve_dual(p, tol=1e-16, working_set=True, record_history=False)
    assert r.status == Status.INACCURATE and "float64 cannot certify tol = 1e-16" in r.message
    assert r.rel_gap < 1e-12


def test_ssnal_stops_as_inaccurate_when_its_gap_stalls():
    """Above the certificate's resolution but below what the iterates reach (3.7e-12 here, against a
    resolution of 2.1e-12): the stall rule ends the run instead of max_iter or the clock."""
    p = tiny_problem(C=1000.0)
    r = solve_dual(p, tol=3e-12, max_inner=20, record_history=False)
    assert r.iterations < 60
    if r.status == Status.OPTIMAL:  # another BLAS may round its way below 3e-12
        assert r.rel_gap <= 3e-12
    else:
        assert r.status == Status.INACCURATE
        assert "SSNAL stalled" in r.message or "float64 cannot certify" in r.message


def test_ssnal_stops_when_its_newton_steps_cannot_move_the_multipliers():
    """40 samples, C = 1e3: at sigma_max the exact line search returns steps ~1e-19 against multipliers
    ~100 (below their own rounding), with a gradient above the absolute 1e-6 of the noise rule; every
    inner loop ran its 200 steps unchanged, and tol = 1e-11 ran into a 30 s limit after 9,000 Newton
    steps. Such a loop ends at once and the stall rule stops the run as inaccurate."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 2))
    y = np.where(X[:, 0] * X[:, 1] > 0, 1.0, -1.0)
    p = RKHSProblem(X, y, Dictionary.from_samples(X, 1.0), 0.5, 0.1, 1e3)
    r = solve_dual(p, tol=1e-11, record_history=False, time_limit=60)
    assert r.info["newton_steps"] < 200
    if r.status != Status.OPTIMAL:  # another BLAS may round its way below 1e-11
        assert r.status == Status.INACCURATE
        assert "SSNAL stalled" in r.message and "float64's rounding" in r.message


def test_history_and_limits():
    p = tiny_problem(20.0)
    r = solve_dual(p)
    assert list(r.history.columns[:7]) == ["iteration", "time", "dual", "primal", "gap", "rel_gap", "restarts"]
    assert (np.diff(r.history["dual"]) >= 0).all()  # best bounds are monotone
    assert r.history["rel_gap"].iloc[-1] == pytest.approx(r.rel_gap)
    limited = solve_dual(p, method="pdhg", max_iter=64, check_every=32)
    assert limited.status == Status.MAX_ITER and limited.iterations == 64
    assert "max_iter" in limited.message
    with pytest.raises(ValueError, match="method"):
        solve_dual(p, method="newton")
    with pytest.raises(ValueError, match="tol"):
        solve_dual(p, tol=0)


def test_ssnal_newton_direction_solves_the_generalized_newton_system(monkeypatch):
    """The Woodbury solve (a symmetric rank-k update and a Cholesky factor of its upper triangle,
    or least squares where the factor fails) gives ``(U^T diag(W) U + diag(r))^{-1} (-g)``."""
    from gtvcvx.rkhs import solver as rs

    rng = np.random.default_rng(0)
    N, A = 40, 7
    sc = SimpleNamespace(N=N, ub=0.5)
    U, W, g = rng.normal(size=(A, N)), rng.uniform(0.5, 2.0, A), rng.normal(size=N)
    x = rng.uniform(-0.2, 0.7, N)  # some outside the box [0, 0.5]
    sigma, tau = 3.0, 0.1
    r = sigma * ((x < 0) | (x > sc.ub)) + 1.0 / tau
    expected = -np.linalg.solve(U.T @ (W[:, None] * U) + np.diag(r), g)
    np.testing.assert_allclose(rs._newton_direction(sc, U, W, x, g, sigma, tau), expected, rtol=1e-10)

    # with the Gram matrix: rho U U^T + (tau - rho) U_F U_F^T; all samples inside or all outside the box too
    for xs in (x, np.full(N, 0.25), np.full(N, -1.0)):
        rs_ = sigma * ((xs < 0) | (xs > sc.ub)) + 1.0 / tau
        want = -np.linalg.solve(U.T @ (W[:, None] * U) + np.diag(rs_), g)
        np.testing.assert_allclose(rs._newton_direction(sc, U, W, xs, g, sigma, tau, U @ U.T), want, rtol=1e-10)
    # more atoms than samples: the N x N system
    Ub, Wb = rng.normal(size=(N + 5, N)), rng.uniform(0.5, 2.0, N + 5)
    want = -np.linalg.solve(Ub.T @ (Wb[:, None] * Ub) + np.diag(r), g)
    np.testing.assert_allclose(rs._newton_direction(sc, Ub, Wb, x, g, sigma, tau), want, rtol=1e-10)

    monkeypatch.setattr(rs, "dpotrf", lambda S, **kw: (S, 1))  # LAPACK: "not positive definite"
    np.testing.assert_allclose(rs._newton_direction(sc, U, W, x, g, sigma, tau), expected, rtol=1e-8)
    np.testing.assert_allclose(rs._newton_direction(sc, U, W, x, g, sigma, tau, U @ U.T), expected, rtol=1e-8)
    np.testing.assert_allclose(rs._newton_direction(sc, Ub, Wb, x, g, sigma, tau), want, rtol=1e-8)


def test_ssnal_active_rows_match_the_rows_and_their_gram_matrix():
    """For any sequence of active sets (growing, shrinking, replaced, empty) the buffers return the
    same atoms in their slot order with ``U = B[atoms]`` and ``G = U U^T``, and give memory back
    when the active set shrinks."""
    from gtvcvx.rkhs import solver as rs

    rng = np.random.default_rng(1)
    B = rng.normal(size=(300, 12))
    sc = SimpleNamespace(M=300, N=12, rows=lambda atoms: B[atoms])
    active_rows = rs._ActiveRows(sc)
    current = np.array([], dtype=np.intp)
    for step in range(40):
        if step in (10, 30):
            current = np.sort(rng.choice(300, 150 if step == 10 else 0, replace=False))  # replaced wholesale
        else:  # a few leave, a few enter
            leave = rng.random(current.size) < 0.2
            enter = rng.choice(300, 5, replace=False)
            current = np.union1d(current[~leave], enter)
        atoms, U, G = active_rows.update(current)
        assert sorted(atoms.tolist()) == current.tolist()
        np.testing.assert_array_equal(U, B[atoms])
        np.testing.assert_allclose(G, B[atoms] @ B[atoms].T, rtol=1e-12, atol=1e-12)
        assert active_rows.R.shape[0] <= max(4 * max(atoms.size, 64), 2 * atoms.size)
    assert active_rows.R.shape[0] <= 64 + 4 * 64  # given back after the 150 atoms left


@pytest.mark.parametrize("storage", ["sparse", "dense"])
def test_scaled_rows_are_the_rows_of_B_one_by_one_or_gathered(storage):
    """``_Scaled.rows`` returns ``B[atoms] = N Phi[atoms]`` whether it copies a few rows one by one or
    gathers many (sparse storage), or slices ``K^T`` (dense); empty rows and no atoms too."""
    from gtvcvx.rkhs import solver as rs

    data = ellipses(60, seed=3)
    D = Dictionary.grid(ELLIPSE_BOX, 6, (0.3, 1.0), threshold=1e-3)
    K = D.kernel_matrix(data.X)
    K = K.toarray() if storage == "dense" else K
    p = RKHSProblem(data.X, data.y, D, 0.5, 0.1, 10.0, K=K)
    assert p.dense == (storage == "dense")
    B = p.N * np.asarray(sp.csr_matrix(p.Phi).todense())
    assert (np.count_nonzero(B, axis=1) == 0).any() or storage == "dense"  # some atoms touch no sample
    sc = rs._Scaled(p)
    rng = np.random.default_rng(0)
    for size in (0, 1, rs.ROW_LOOP_MAX, rs.ROW_LOOP_MAX + 1, p.M):
        atoms = np.sort(rng.choice(p.M, size, replace=False)).astype(np.intp)
        np.testing.assert_allclose(sc.rows(atoms), B[atoms], rtol=1e-15, atol=0)



def _full_dphi(t, sc, v, x, lam_minus_k, d, Bd, sigma, tau, tdelta):
    """``phi'(t)`` of SSNAL's line search summed over every atom and sample (the reference)."""
    s, ub = sc.s, sc.ub
    vv = v + t * Bd
    a = np.abs(vv)
    clip = (a > s) & (a <= s * (1.0 + tdelta))
    shrink = a > s * (1.0 + tdelta)
    zz = sigma * np.where(clip, vv - np.sign(vv) * s, np.where(shrink, vv * tdelta / (1.0 + tdelta), 0.0))
    xx = x + t * d
    mm = sigma * (xx - np.clip(xx, 0.0, ub))
    return -sc.c @ d + Bd @ zz + d @ mm + (lam_minus_k @ d + t * (d @ d)) / tau


@pytest.mark.parametrize("ub", [0.8, np.inf])
@pytest.mark.parametrize("seed", range(4))
def test_ssnal_line_search_finds_the_root_over_every_atom(seed, ub):
    """The exact line search walks the kinks of ``phi'`` of the atoms that can leave the identity zone
    of the prox in the searched range and of the samples crossing the box's bounds (a soft and a hard
    margin): its step is still the root of ``phi'`` summed over every atom (a one-sided check at
    ``t (1 -/+ 1e-9)``)."""
    from gtvcvx.rkhs import solver as rs

    rng = np.random.default_rng(seed)
    M, N = 400, 60
    sigma, tau = 5.0, 0.3
    sc = SimpleNamespace(s=1.0, ub=ub, c=np.full(N, 0.9))
    tdelta = rng.uniform(0.01, 2.0, M)
    v = rng.uniform(-1.5, 1.5, M)
    v[: M // 2] *= 0.3  # many atoms deep in the identity zone
    Bd = rng.normal(size=M) * rng.choice([1e-3, 0.05, 0.5], size=M)
    x, d, lam_minus_k = rng.uniform(-0.3, 1.0, N), rng.normal(size=N) * 0.2, rng.normal(size=N) * 0.1
    args = (sc, v, x, lam_minus_k, d, Bd, sigma, tau, tdelta)
    if _full_dphi(0.0, *args) > 0:  # a descent direction (phi'(0) is linear in the pair (d, Bd))
        d, Bd = -d, -Bd
        args = (sc, v, x, lam_minus_k, d, Bd, sigma, tau, tdelta)
    gd = _full_dphi(0.0, *args)
    t = rs._line_search(sc, v, x, lam_minus_k, d, Bd, sigma, tau, tdelta)
    assert t > 0
    assert _full_dphi(t * (1.0 - 1e-9), *args) <= 1e-9 * abs(gd) <= _full_dphi(t * (1.0 + 1e-9), *args) + 2e-9 * abs(gd)


def test_ssnal_line_search_counts_the_atoms_that_enter_past_t_1():
    """Atoms inside the identity zone that cross its edge at t_j in (0.5, 3) and a root past t = 2:
    the search widens its set of atoms past t = 1 and finds the root of
    ``phi'(t) = -c.d + sigma b^2 sum_j (t - t_j)_+`` (``b = |Bd_j|``)."""
    from scipy.optimize import brentq

    from gtvcvx.rkhs import solver as rs

    rng = np.random.default_rng(1)
    M, N, sigma = 300, 20, 1.0
    sc = SimpleNamespace(s=1.0, ub=100.0, c=np.full(N, 0.1))
    crossing = rng.uniform(0.5, 3.0, M // 2)  # the t at which each outer atom leaves the identity zone
    sign = rng.choice([-1.0, 1.0], M // 2)
    b = 0.25
    v = np.concatenate([rng.uniform(-0.3, 0.3, M // 2), sign * (1.0 - b * crossing)])
    Bd = np.concatenate([rng.uniform(-1e-3, 1e-3, M // 2), b * sign])
    tdelta = np.full(M, 100.0)  # a wide clip zone: no shrink in range
    x, d = np.full(N, 5.0), np.full(N, 3.0)  # (the samples stay inside [0, ub]: no box terms)
    lam_minus_k = np.zeros(N)
    args = (sc, v, x, lam_minus_k, d, Bd, sigma, 1e12, tdelta)
    assert _full_dphi(0.0, *args) == pytest.approx(-6.0)  # -c.d: a descent direction, no atom active at t = 0
    t = rs._line_search(sc, v, x, lam_minus_k, d, Bd, sigma, 1e12, tdelta)
    expected = brentq(lambda u: -6.0 + sigma * b**2 * np.maximum(u - crossing, 0.0).sum(), 0.5, 10.0, xtol=1e-14)
    assert 2.0 < expected < 3.0
    assert t == pytest.approx(expected, rel=1e-8)


def test_a_cold_start_ssnal_solve_never_builds_phi_transpose():
    """``Phi^T`` (as large as ``Phi``: 13 MB on the bench instance) serves SSNAL only for ``mu = c - B^T z``
    at a warm start; a cold start skips it, and a warm start (which needs it) reaches the same optimum."""
    data = ellipses(120, seed=3)
    D = Dictionary.grid(ELLIPSE_BOX, 12, (0.3,), threshold=1e-3)
    p = RKHSProblem(data.X, data.y, D, 0.5, 0.1, 10.0)
    assert not p.dense
    cold = solve_dual(p, tol=1e-8, record_history=False)
    assert cold.status == Status.OPTIMAL
    assert "PhiT" not in vars(p)  # (a cached property: built on first use only)
    warm = solve_dual(p, tol=1e-8, record_history=False, z0=np.full(p.M, 1e-3))
    assert "PhiT" in vars(p) and warm.status == Status.OPTIMAL
    assert abs(warm.dual - cold.dual) <= 1e-7 * (1.0 + abs(cold.dual))


def test_sparse_decision_over_few_atoms_is_the_full_product():
    data = ellipses(120, seed=3)
    D = Dictionary.grid(ELLIPSE_BOX, 12, (0.3,), threshold=1e-3)
    p = RKHSProblem(data.X, data.y, D, 0.5, 0.1, 10.0)
    assert not p.dense
    alpha = np.zeros(p.M)
    alpha[np.random.default_rng(0).choice(p.M, 9, replace=False)] = np.linspace(-2.0, 2.0, 9)
    np.testing.assert_allclose(p.decision(alpha), p.K @ (p.Delta * alpha), rtol=1e-14, atol=1e-15)
