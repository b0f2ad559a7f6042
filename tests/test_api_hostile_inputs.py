"""Red-team findings on the Python API (2026-11-29): inputs a user with their own data gives the GTV API."""

from __future__ import annotations

import numpy as np
import pytest

import gtvcvx as g
from gtvcvx.reference.backend import BackendRun
from gtvcvx.results import Status
from gtvcvx.testing import assert_optimal


def _chain_problem():
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(3, 2)) for _ in range(3)]
    return g.GTVProblem(g.graphs.chain(3), g.SquaredError(X, [rng.normal(size=3) for _ in range(3)]), g.Norm2(), 0.1)


def test_squared_distance_leaves_the_callers_points_writeable():
    """The loss froze the caller's own array (it kept it, read-only): a later ``pts -= pts.mean(0)`` failed."""
    points = np.random.default_rng(0).normal(size=(6, 2))
    loss = g.SquaredDistance(points)
    assert points.flags.writeable and not np.shares_memory(points, loss.points)
    points -= points.mean(axis=0)  # the user's own data stays theirs
    assert not loss.points.flags.writeable


def test_a_misspelt_warm_start_key_is_refused():
    """``{"w": ...}`` ran as a cold start, silently."""
    problem = _chain_problem()
    with pytest.raises(ValueError, match=r"warm_start: unknown key\(s\) \['w'\]; expected 'W' and/or 'U'"):
        g.solve(problem, warm_start={"w": np.zeros((3, 2))}, method="halpern")


def test_a_backend_calling_a_gtv_problem_infeasible_is_a_solver_error(monkeypatch):
    """A GTV problem is always feasible and bounded: CLARABEL's 'infeasible_inaccurate' on badly scaled data (features
    at 1e-8 and 1e8, labels offset by 1e9; the fast core certifies it) is the backend's failure, said so."""
    from gtvcvx.reference import gtv

    for claim in (Status.INFEASIBLE, Status.UNBOUNDED):
        monkeypatch.setattr(gtv, "run_cvxpy", lambda problem, solver, opts, claim=claim: BackendRun(
            claim, solver, float("nan"), 0.0, 0.0, None, "CVXPY status 'infeasible_inaccurate'"))
        for solve in (gtv.solve_primal, gtv.solve_dual):
            result = solve(_chain_problem(), "CLARABEL")
            assert result.status == Status.SOLVER_ERROR and result.W is None
            assert f"CLARABEL reported the problem {claim}, which a GTV problem cannot be" in result.message


def test_assert_optimal_refuses_a_tolerance_that_is_not_one():
    """``rtol=-1`` or ``nan`` failed every W with an AssertionError, as if it were not optimal."""
    problem = _chain_problem()
    W = g.solve(problem, tol=1e-10).W
    for rtol in (-1.0, float("nan"), 1.0, "1e-6"):
        with pytest.raises(ValueError, match="rtol must be a relative gap in"):
            assert_optimal(problem, W, rtol=rtol)
    with pytest.raises(ValueError, match="atol must be a number >= 0"):
        assert_optimal(problem, W, atol=float("nan"))
    assert assert_optimal(problem, W, rtol=1e-8).rel_gap <= 1e-8


def test_an_ill_conditioned_quadratic_form_says_it_is_the_conditioning():
    """``diag(1e-8, 1, 1e8)`` is positive definite: the refusal said it was not."""
    with pytest.raises(ValueError, match=r"Q must be positive definite to float64's resolution: its condition number "
                                         r"1e\+16 is beyond"):
        g.QuadraticForm(np.diag([1e-8, 1.0, 1e8]))
    with pytest.raises(ValueError, match=r"Q must be positive definite; its smallest eigenvalue is -1"):
        g.QuadraticForm(np.diag([-1.0, 1.0]))
