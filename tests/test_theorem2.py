"""Theorem 2 of the GTV paper (002, Definition 1, eqs. 35-36) evaluated by gtvcvx.recovery.theorem2."""

import numpy as np
import pytest

import gtvcvx as g
from gtvcvx.capabilities import CapabilityError
from gtvcvx.recovery import _exact_condition, _maxflow_condition, _strong_convexity, theorem2


def _two_cliques(size=6, bridge=0.01, noise=0.01, seed=0, m=5):
    rng = np.random.default_rng(seed)
    n = 2 * size
    labels = np.repeat([0, 1], size)
    edges = [(i, j) for c in range(2) for i in range(size * c, size * (c + 1)) for j in range(i + 1, size * (c + 1))]
    weights = np.ones(len(edges) + 1)
    weights[-1] = bridge
    graph = g.Graph.from_edges(n, np.array(edges + [(0, size)]), weights)
    truth = np.array([[1.0, -1.0], [-2.0, 0.5]])
    X = [rng.normal(size=(m, 2)) for _ in range(n)]
    y = [X[i] @ truth[labels[i]] + noise * rng.normal(size=m) for i in range(n)]
    return graph, g.SquaredError(X, y), labels


@pytest.mark.parametrize("penalty", [g.Norm2(), g.Norm1()])
@pytest.mark.parametrize("lam", [0.05, 1.0])
def test_when_the_condition_holds_the_solution_is_clusterwise_constant_within_the_bound(penalty, lam):
    graph, loss, labels = _two_cliques()
    problem = g.GTVProblem(graph, loss, penalty, lam)
    W = g.solve(problem, tol=1e-11, max_iter=300_000).W
    report = theorem2(problem, labels, W)
    assert report.holds and report.norm == ("l2" if isinstance(penalty, g.Norm2) else "l1")
    table = report.clusters
    assert (table["deviation"] <= table["bound"]).all()
    assert (table["spread"] <= 1e-6).all()  # the theorem's first claim: constant on each cluster
    assert np.allclose(table["boundary"], 0.01) and (table["check"].str.startswith("exact")).all()


def test_constants_match_their_definitions():
    graph, loss, labels = _two_cliques(noise=0.3)
    problem = g.GTVProblem(graph, loss, g.Norm2(), 0.5)
    report = theorem2(problem, labels)
    for c in range(2):
        members = np.flatnonzero(labels == c)
        Xc = np.vstack([loss.X_all[loss.node_of_sample == i] / np.sqrt(loss.counts[i]) for i in members])
        yc = np.concatenate([loss.y_all[loss.node_of_sample == i] / np.sqrt(loss.counts[i]) for i in members])
        Hc = 2.0 * Xc.T @ Xc
        assert np.isclose(report.clusters["alpha"][c], np.linalg.eigvalsh(Hc)[0])
        assert np.allclose(report.wbar[c], np.linalg.lstsq(Xc, yc, rcond=None)[0])
    grad = loss.gradient(report.wbar[labels])
    assert np.allclose(report.nodes["delta"], np.linalg.norm(grad, axis=1))
    # with noise 0.3 the clustering errors delta_i are large: small lam breaks the condition
    weak = theorem2(problem.with_lam(1e-3), labels)
    assert not weak.holds and set(weak.clusters["condition"]) == {"fails"}


def test_l1_strong_convexity_is_the_minimum_over_the_l1_sphere():
    rng = np.random.default_rng(2)
    B = rng.normal(size=(4, 4))
    Hc = B @ B.T + 0.1 * np.eye(4)
    alpha, exact = _strong_convexity(Hc, "l1")
    V = rng.normal(size=(100_000, 4)) * rng.uniform(0, 1, (100_000, 4)) ** 3
    ratios = np.einsum("nd,de,ne->n", V, Hc, V) / np.abs(V).sum(axis=1) ** 2
    assert exact and alpha <= ratios.min() + 1e-12
    # attained at v = Hc^{-1} s for the best sign vector s
    signs = 1.0 - 2.0 * ((np.arange(16)[:, None] >> np.arange(4)) & 1)
    best = signs[np.argmax(np.einsum("sd,de,se->s", signs, np.linalg.inv(Hc), signs))]
    v = np.linalg.solve(Hc, best)
    assert np.isclose(v @ Hc @ v / np.abs(v).sum() ** 2, alpha, rtol=1e-10)


def test_max_flow_check_agrees_with_the_enumeration():
    rng = np.random.default_rng(3)
    for trial in range(30):
        size = int(rng.integers(2, 9))
        pairs = np.array([(i, j) for i in range(size) for j in range(i + 1, size) if rng.uniform() < 0.6])
        if len(pairs) == 0:
            continue
        w = rng.uniform(0.1, 1.0, len(pairs))
        demand = rng.uniform(0.0, 0.6, size)
        members = np.arange(size)
        root, margin = _exact_condition(members, pairs[:, 0], pairs[:, 1], w, demand)
        unmet = _maxflow_condition(members, pairs[:, 0], pairs[:, 1], w, demand, root)
        if margin > 1e-6:
            assert unmet >= 0, trial
        elif margin < -1e-6:
            assert unmet < 0, trial


def test_large_clusters_use_the_max_flow_check():
    graph, loss, labels = _two_cliques(size=20, m=3)
    report = theorem2(g.GTVProblem(graph, loss, g.Norm2(), 1.0), labels)
    assert report.holds and report.clusters["check"].str.startswith("max-flow").all()


def test_theorem2_refuses_what_it_cannot_evaluate():
    graph, loss, labels = _two_cliques()
    with pytest.raises(CapabilityError, match="quadratic"):
        theorem2(g.GTVProblem(graph, g.Logistic([np.ones((2, 2))] * 12, [np.array([1.0, -1.0])] * 12), g.Norm2(), 1.0),
                 labels)
    with pytest.raises(CapabilityError, match="dual ball"):
        theorem2(g.GTVProblem(graph, loss, g.SquaredNorm2(), 1.0), labels)
    with pytest.raises(ValueError, match="lam > 0"):
        theorem2(g.GTVProblem(graph, loss, g.Norm2(), 0.0), labels)
    with pytest.raises(ValueError, match="labels must be 12"):
        theorem2(g.GTVProblem(graph, loss, g.Norm2(), 1.0), labels[:5])


def test_a_cluster_without_strong_convexity_fails_with_the_reason():
    graph, _, labels = _two_cliques()
    X = [np.array([[1.0, 2.0]])] * 12  # every node sees the same direction: rank-1 clusters
    loss = g.SquaredError(X, [np.array([float(i)]) for i in range(12)])
    report = theorem2(g.GTVProblem(graph, loss, g.Norm2(), 1.0), labels)
    assert (report.clusters["condition"] == "fails").all()
    assert report.clusters["check"].str.contains("not strongly convex").all()
