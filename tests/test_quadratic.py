"""The direct solver for quadratic GTV problems (quadratic loss + quadratic penalty): exactness against
CLARABEL, honest certificates, automatic selection, singular blocks and refusals."""

import numpy as np
import pytest

import gtvcvx as g
from gtvcvx.capabilities import CapabilityError
from gtvcvx.reference import solve_primal
from gtvcvx.solvers import certify_pair
from gtvcvx.solvers.quadratic import penalty_form, quadratic_refusal, solve_quadratic

TIGHT = {"tol_gap_abs": 1e-11, "tol_gap_rel": 1e-11, "tol_feas": 1e-11}


def _problem(penalty, *, seed=0, n=10, d=3, m=None, lam=0.4):
    rng = np.random.default_rng(seed)
    graph = g.graphs.sbm([n // 2, n - n // 2], 0.7, 0.2, seed=seed).graph
    counts = m if m is not None else rng.integers(0, 5, size=n)  # m_i < d and nodes without data
    X = [rng.normal(size=(int(k), d)) for k in counts]
    y = [Xi @ rng.normal(size=d) + 0.1 * rng.normal(size=len(Xi)) for Xi in X]
    return g.GTVProblem(graph, g.SquaredError(X, y, d=d), penalty, lam)


@pytest.mark.parametrize("penalty", [g.SquaredNorm2(), g.QuadraticForm([[2.0, 0.3, 0.0], [0.3, 1.0, 0.1],
                                                                         [0.0, 0.1, 0.5]])])
def test_auto_picks_the_quadratic_solver_and_agrees_with_clarabel(penalty):
    problem = _problem(penalty)
    result = g.solve(problem, tol=1e-10)
    assert result.info["method"] == "quadratic" and result.status == "optimal" and result.rel_gap <= 1e-10
    ref = solve_primal(problem, "CLARABEL", **TIGHT)
    assert abs(result.primal - ref.primal) <= 1e-8 * (1 + abs(ref.primal))
    assert result.dual <= ref.primal + 1e-10 * (1 + abs(ref.primal))


def test_the_certificate_bounds_the_suboptimality_of_a_perturbed_solution():
    problem = _problem(g.SquaredNorm2(), seed=2)
    exact = g.solve(problem, tol=1e-12)
    rng = np.random.default_rng(3)
    for scale in (1e-6, 1e-3, 1e-1):
        W = exact.W + scale * rng.normal(size=exact.W.shape)
        cert = certify_pair(problem, W, problem.capacities[:, None] * (problem.graph.incidence @ W))
        assert cert.gap >= problem.objective(W) - exact.primal - 1e-12


def test_isolated_nodes_without_data_and_a_warm_start():
    rng = np.random.default_rng(4)
    graph = g.Graph.from_edges(6, np.array([[0, 1], [1, 2], [3, 4]]))  # node 5 is isolated
    X = [rng.normal(size=(2, 2)), np.zeros((0, 2)), rng.normal(size=(3, 2)), rng.normal(size=(1, 2)),
         rng.normal(size=(2, 2)), np.zeros((0, 2))]
    y = [Xi @ np.ones(2) for Xi in X]
    problem = g.GTVProblem(graph, g.SquaredError(X, y, d=2), g.SquaredNorm2(), 0.5)
    cold = g.solve(problem, tol=1e-10)
    assert cold.status == "optimal" and cold.info["method"] == "quadratic"
    warm = g.solve(problem, tol=1e-10, warm_start=cold)
    assert warm.status == "optimal" and warm.iterations <= cold.iterations


def test_penalty_form_recovers_q_by_polarization():
    Q = np.array([[2.0, 0.3], [0.3, 1.0]])
    assert np.allclose(penalty_form(g.QuadraticForm(Q), 2), Q)
    assert np.allclose(penalty_form(g.SquaredNorm2(), 4), np.eye(4))


def test_non_quadratic_problems_are_refused_with_the_reason_and_auto_falls_back():
    problem = _problem(g.Norm2())
    assert "penalty 'norm2' is not quadratic" in quadratic_refusal(problem)
    assert g.solve(problem, tol=1e-6).info["method"] in ("halpern", "interior")
    with pytest.raises(CapabilityError, match="not quadratic"):
        g.solve(problem, method="quadratic")
    logistic = g.GTVProblem(problem.graph, g.Logistic([np.ones((2, 3))] * 10, [np.array([1.0, -1.0])] * 10),
                            g.SquaredNorm2(), 1.0)
    with pytest.raises(CapabilityError, match="loss 'logistic' is not quadratic"):
        solve_quadratic(logistic)
