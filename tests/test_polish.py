"""Active-set polish (gtvcvx.solvers.polish): with m_i < d the certificate keeps up with the iterate,
and a polished certificate is as honest as any other."""

import numpy as np
import pytest

import gtvcvx as g
from gtvcvx.reference import solve_primal
from gtvcvx.solvers import certificate
from gtvcvx.solvers.polish import fused_clusters, polish_applies, polish_clusters


def _few_samples_per_node(n=120, d=3, seed=0, lam=0.02):
    """The issue's housing shape: a geographic 5-NN graph, one sample per node, d > 1, nLasso."""
    rng = np.random.default_rng(seed)
    points = rng.uniform(size=(n, 2))
    graph = g.graphs.knn(points, 5)
    graph = graph.graph if hasattr(graph, "graph") else graph
    X = [np.concatenate([[1.0], rng.normal(size=d - 1)])[None] for _ in range(n)]
    truth = np.where(points[:, :1] > 0.5, 1.0, -1.0) * np.ones((n, d))
    y = [X[i] @ truth[i] + 0.1 * rng.normal(size=1) for i in range(n)]
    return g.GTVProblem(graph, g.SquaredError(X, y, d=d), g.Norm2(), lam)


@pytest.mark.parametrize("faces", [True, False])
@pytest.mark.parametrize("seed", [0, 1])
def test_the_certificate_reaches_tol_within_twice_the_iterations_of_the_true_gap(seed, faces, monkeypatch):
    # by default the projection corrects flows along the faces of their capacity balls, which
    # keeps up by itself (measured: certified at the true gap's check-point or the next); without
    # it (the distributed backend's projection) the polish must supply the certificate
    monkeypatch.setattr(certificate, "CORRECT_ON_FACES", faces)
    problem = _few_samples_per_node(seed=seed)
    optimum = solve_primal(problem, "CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12).primal
    true_at = []

    def record(info):
        if (problem.objective(info.W) - optimum) / (1 + abs(optimum)) <= 1e-7:
            true_at.append(info.iteration)
        return False

    result = g.solve(problem, tol=1e-7, callback=record, method="halpern")  # the core's certificate lag
    assert result.status == "optimal" and result.rel_gap <= 1e-7
    if not faces:
        assert result.info["polished_at"] is not None
    # the true gap is only observed at the check-points the callback sees: the first one where it
    # is below tol, else the certifying one (the loop stops before the callback; lag 1)
    first = true_at[0] if true_at else result.iterations
    assert result.iterations <= 2 * first
    assert result.gap >= problem.objective(result.W) - optimum - 1e-12  # honest


def test_a_polish_from_a_wrong_structure_is_refused_or_honest():
    problem = _few_samples_per_node(n=60, seed=2)
    optimum = g.solve(problem, tol=1e-9).primal
    rng = np.random.default_rng(3)
    W = np.repeat(rng.normal(size=(2, problem.d)), [30, 30], axis=0)  # a made-up two-cluster structure
    out = polish_clusters(problem, W)
    if out is not None:
        W_polished, cert = out
        assert cert.gap >= problem.objective(W_polished) - optimum - 1e-12
    clusters = fused_clusters(problem, W)
    assert clusters[0] <= 60


def test_the_polish_declines_problems_it_does_not_cover():
    problem = _few_samples_per_node(n=40)
    assert polish_applies(problem)
    assert not polish_applies(problem.with_lam(0.0))
    l1 = g.GTVProblem(problem.graph, problem.loss, g.Norm1(), 0.02)
    assert not polish_applies(l1) and polish_clusters(l1, np.zeros((40, problem.d))) is None
    assert g.solve(l1, tol=1e-6, method="halpern").info["polishes"] == 0
