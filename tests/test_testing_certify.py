"""gtvcvx.testing: certify any solver's W, assert_optimal messages, flows built from W."""

import numpy as np
import pytest

import gtvcvx as g
from gtvcvx.runner import run_solver
from gtvcvx.testing import assert_optimal, certify, flow_from_primal

CASES = [("squared_error", "norm2"), ("squared_error", "norm1"), ("logistic", "norm2"),
         ("squared_distance", "norm1"), ("squared_distance", "squared_norm2"), ("logistic", "squared_norm2")]


@pytest.mark.parametrize("loss,penalty", CASES)
def test_certify_accepts_optimal_and_rejects_perturbed(problem_factory, loss, penalty):
    problem = problem_factory(loss, penalty, seed=3)
    fast = g.solve(problem, tol=1e-9, check_every=10)
    assert fast.ok
    cert = certify(problem, fast.W)  # flows rebuilt from W alone
    assert cert.rel_gap <= 1e-7 and cert.gap >= 0
    assert np.isclose(cert.primal, problem.objective(fast.W), rtol=1e-12, atol=1e-14)
    assert cert.dual <= cert.primal
    clarabel = run_solver(problem, "CLARABEL")
    assert clarabel.W is not None
    assert certify(problem, clarabel.W).rel_gap <= 1e-6
    rng = np.random.default_rng(0)
    perturbed = fast.W + 0.05 * rng.standard_normal(fast.W.shape)
    bad = certify(problem, perturbed)
    assert bad.rel_gap > 100 * max(cert.rel_gap, 1e-9)
    # the bound is honest: the certified gap is at least the true suboptimality
    assert bad.gap >= problem.objective(perturbed) - fast.primal - 1e-9


def test_certify_with_given_flows_matches_the_solver_certificate(problem_factory):
    problem = problem_factory("squared_error", "norm2", seed=5)
    result = g.solve(problem, tol=1e-8, check_every=10)
    cert = certify(problem, result.W, result.U)
    assert cert.gap == pytest.approx(result.gap, rel=1e-6, abs=1e-12)
    assert cert.U.shape == (problem.n_edges, problem.d)
    assert certify(problem, result.W, np.zeros_like(result.U)).gap > 10 * cert.gap


def test_flow_from_primal_is_the_subgradient_on_nonzero_edges(problem_factory):
    problem = problem_factory("squared_distance", "squared_norm2", seed=1)
    W = np.arange(problem.n * problem.d, dtype=float).reshape(problem.n, problem.d)
    U = flow_from_primal(problem, W)
    np.testing.assert_allclose(U, problem.capacities[:, None] * problem.differences(W))
    problem = problem_factory("squared_distance", "norm2", seed=1)
    U = flow_from_primal(problem, W)
    Z = problem.differences(W)
    nz = np.linalg.norm(Z, axis=1) > 0
    np.testing.assert_allclose(U[nz], problem.capacities[nz, None] * Z[nz] / np.linalg.norm(Z[nz], axis=1)[:, None])


def test_an_overflowing_minimum_norm_flow_falls_back_to_the_polish(problem_factory, monkeypatch):
    """If the minimum-norm solve overflows (it did, before the conjugate-gradient divergence guard),
    the flow is still finite and the certificate still a bound: no `U must be finite` traceback."""
    import gtvcvx.solvers.certify as certify_module
    problem = problem_factory("logistic", "norm2", seed=3)
    fast = g.solve(problem, tol=1e-9, check_every=10)
    honest = certify(problem, fast.W)
    monkeypatch.setattr(certify_module, "_min_norm_flow", lambda D, Dt, free, R, max_iter: np.full(free.shape, np.nan))
    U = flow_from_primal(problem, fast.W)
    assert np.isfinite(U).all()
    cert = certify(problem, fast.W)
    assert np.isfinite(cert.dual) and cert.dual <= honest.primal
    assert cert.rel_gap <= 1e-3  # the polish alone still finds a good flow


def test_certify_handles_graphs_without_edges_and_lam_zero():
    points = np.array([[0.0, 1.0], [2.0, 3.0], [4.0, 4.0]])
    graph = g.Graph.from_edges(3, np.zeros((0, 2), dtype=int))
    problem = g.GTVProblem(graph, g.SquaredDistance(points), g.Norm2(), 0.5)
    assert certify(problem, points).gap == pytest.approx(0.0, abs=1e-14)
    problem = g.GTVProblem(g.graphs.chain(3), g.SquaredDistance(points), g.Norm2(), 0.0)
    assert certify(problem, points).rel_gap == pytest.approx(0.0, abs=1e-14)
    assert certify(problem, points + 1.0).rel_gap > 0.1


def test_assert_optimal_passes_and_names_nodes_and_edges(problem_factory):
    problem = problem_factory("squared_error", "norm2", seed=2)
    result = g.solve(problem, tol=1e-9, check_every=10)
    cert = assert_optimal(problem, result.W, rtol=1e-7)
    assert cert.rel_gap <= 1e-7
    W = result.W.copy()
    W[1] += 0.5
    with pytest.raises(AssertionError) as info:
        assert_optimal(problem, W, rtol=1e-6, k=3)
    message = str(info.value)
    assert "not optimal to rtol=1e-06" in message and "certified relative gap" in message
    assert "node 1:" in message and "Fenchel-Young term" in message and "stationarity" in message
    assert "edge " in message and "||z_e||" in message and "c_e" in message
    # an absolute tolerance large enough accepts the same W
    assert_optimal(problem, W, rtol=0.0, atol=10.0 * certify(problem, W).gap)


def test_certify_rejects_bad_input(problem_factory):
    problem = problem_factory("squared_distance", "norm2")
    with pytest.raises(ValueError, match="W"):
        certify(problem, np.zeros((problem.n + 1, problem.d)))
    with pytest.raises(ValueError):
        certify(problem, np.full((problem.n, problem.d), np.nan))
    with pytest.raises(TypeError, match="GTVProblem"):
        certify("not a problem", np.zeros((2, 2)))


def _hinge_at_kinks():
    rng = np.random.default_rng(1)
    graph, _ = g.graphs.sbm([5, 5], p_in=0.8, p_out=0.2, seed=2)
    X = [rng.normal(size=(int(rng.integers(1, 5)), 3)) for _ in range(10)]
    y = [np.sign(rng.normal(size=len(x))) for x in X]
    return g.GTVProblem(graph, g.Hinge(X, y), g.Norm2(), 0.1)


def test_an_exact_hinge_optimum_passes_assert_optimal_through_the_flows_of_a_solve():
    """At a hinge optimum the samples on their kinks have a whole interval of subgradients; the flows built
    from W take the wrong one (an optimum to ~1e-9 certified only to 0.83, 0.024 today, so ``assert_optimal`` rejected
    every exact solution of a non-smooth problem). The flows of a solve warm-started at W certify it, and
    the bound stays a bound for a W that is not optimal."""
    problem = _hinge_at_kinks()
    W = run_solver(problem, "CLARABEL").W
    assert certify(problem, W).rel_gap > 1e-3  # the flows built from W alone (0.024)
    with pytest.raises(AssertionError, match="not optimal"):
        assert_optimal(problem, W, rtol=1e-6, solve_time=None)
    cert = assert_optimal(problem, W, rtol=1e-6)
    assert "fast-core solve" in cert.message and cert.rel_gap <= 1e-6
    fast = g.solve(problem, tol=1e-10)
    assert cert.dual <= fast.primal + 1e-12 * (1 + abs(fast.primal))  # P* <= P(W_fast): a lower bound on it
    assert cert.primal - fast.dual <= 1e-6 * (1 + abs(fast.dual))  # and W is optimal by the solver's bound too
    worse = W + 0.03 * np.random.default_rng(0).normal(size=W.shape)
    with pytest.raises(AssertionError, match="not optimal"):
        assert_optimal(problem, worse, rtol=1e-6)
    assert certify(problem, worse, solve_time=30).gap >= problem.objective(worse) - problem.objective(W) - 1e-9
    with pytest.raises(ValueError, match="solve_time"):
        assert_optimal(problem, W, solve_time=-1)
