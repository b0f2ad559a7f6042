"""gtvcvx.recovery: the cluster-reduced problem and the network-flow certificate of exact recovery."""

import numpy as np
import pytest

import gtvcvx as g
from gtvcvx.capabilities import CapabilityError
from gtvcvx.metrics import adjusted_rand_index
from gtvcvx.recovery import exact_recovery_conditions, reduced_cluster_problem, solution_clusters


def _two_clusters(lam=0.05):
    graph, labels = g.graphs.sbm([8, 8], 0.9, 0.1, seed=3)
    rng = np.random.default_rng(0)
    W_c = np.array([[1.0, 0.0, 2.0], [-1.0, 1.0, 0.0]])
    X = [rng.standard_normal((5, 3)) for _ in labels]
    y = [x @ W_c[c] + 0.01 * rng.standard_normal(5) for x, c in zip(X, labels)]
    return g.GTVProblem(graph, g.SquaredError(X, y), g.Norm2(), lam), labels


def test_recovery_conditions_match_the_gtv_solution():
    problem, labels = _two_clusters()
    conditions = exact_recovery_conditions(problem, labels)
    assert conditions.separated and conditions.holds and conditions.congestion < 1
    W = g.solve(problem, tol=1e-9).W
    np.testing.assert_allclose(W, conditions.v[labels], atol=1e-4)
    assert adjusted_rand_index(solution_clusters(problem.graph, W, 1e-3), labels) == 1.0
    # a tiny lam cannot fuse the clusters: no certificate
    assert not exact_recovery_conditions(problem.with_lam(1e-6), labels).holds


def test_reduced_problem_has_the_cluster_values_of_a_fused_solution():
    problem, labels = _two_clusters()
    reduced, pairs = reduced_cluster_problem(problem, labels)
    assert reduced.n == 2 and pairs.tolist() == [[0, 1]]
    cross = labels[problem.graph.edges[:, 0]] != labels[problem.graph.edges[:, 1]]
    assert reduced.graph.weights[0] == pytest.approx(problem.graph.weights[cross].sum())
    W = g.solve(problem, tol=1e-10).W
    V = g.solve(reduced, tol=1e-10).W
    np.testing.assert_allclose(W[labels == 0].mean(axis=0), V[0], atol=1e-5)


def test_reduced_problem_needs_a_quadratic_loss():
    graph, labels = g.graphs.sbm([3, 3], 0.9, 0.2, seed=1)
    X = [np.ones((2, 2))] * 6
    problem = g.GTVProblem(graph, g.Logistic(X, [np.array([1.0, -1.0])] * 6), g.Norm2(), 0.1)
    with pytest.raises(CapabilityError, match="reduced_cluster_problem needs the loss 'logistic'"):
        reduced_cluster_problem(problem, labels)


@pytest.mark.parametrize("penalty", [g.Norm2(), g.Norm1()])
@pytest.mark.parametrize("graph_kind", ["star", "sbm"])
def test_lam_max_of_a_general_gtv_problem_is_where_all_local_models_fuse(penalty, graph_kind):
    from gtvcvx.clustering import lam_max

    rng = np.random.default_rng(0)
    graph = g.graphs.star(30) if graph_kind == "star" else g.graphs.sbm([15, 15], 0.5, 0.1, seed=1).graph
    X = [rng.normal(size=(5, 2)) for _ in range(30)]
    y = [X[i] @ rng.normal(size=2) + 0.1 * rng.normal(size=5) for i in range(30)]
    problem = g.GTVProblem(graph, g.SquaredError(X, y), penalty, 1.0)
    threshold = lam_max(problem)
    assert threshold.status == ("exact" if graph_kind == "star" else "optimal")
    spread = {}
    for factor in (0.97, 1.03):
        W = g.solve(problem.with_lam(factor * threshold.value), tol=1e-10, max_iter=500_000).W
        spread[factor] = np.linalg.norm(W - W.mean(axis=0), axis=1).max()
    assert spread[1.03] <= 1e-7 < 1e-3 <= spread[0.97]


def test_lam_max_refuses_a_loss_without_a_pooled_fit():
    from gtvcvx.clustering import lam_max

    X, y = [np.ones((2, 2))] * 4, [np.array([1.0, 2.0])] * 4
    with pytest.raises(CapabilityError, match="smooth loss with a pooled fit"):
        lam_max(g.GTVProblem(g.graphs.chain(4), g.AbsoluteError(X, y), g.Norm2(), 1.0))
