"""Baselines on tiny problems with known answers."""

from __future__ import annotations

import numpy as np
import pytest

import gtvcvx as g
from gtvcvx import baselines, graphs
from gtvcvx.metrics import adjusted_rand_index


def _problem(X, y, graph=None, loss=g.SquaredError, d=None):
    n = len(X)
    graph = graph if graph is not None else graphs.chain(n)
    return g.GTVProblem(graph, loss(X, y, d=d), g.Norm2(), 0.1)


def _two_cluster_data(rng, n_per=6, d=3, m=8, sigma=0.0):
    W_c = np.array([[2.0, -1.0, 0.5], [-1.5, 2.0, 1.0]])[:, :d]
    labels = np.repeat([0, 1], n_per)
    X = [rng.standard_normal((m, d)) for _ in labels]
    y = [x @ W_c[c] + sigma * rng.standard_normal(m) for x, c in zip(X, labels)]
    return X, y, labels, W_c


def test_fedavg_is_pooled_least_squares():
    rng = np.random.default_rng(0)
    X = [rng.standard_normal((m, 3)) for m in (4, 6, 5, 7)]
    y = [rng.standard_normal(len(x)) for x in X]
    res = baselines.fedavg(_problem(X, y))
    # sum_i (1/m_i)||y_i - X_i w||^2 is weighted least squares with weights 1/m_i
    scale = np.concatenate([np.full(len(v), 1 / np.sqrt(len(v))) for v in y])
    w_ref = np.linalg.lstsq(np.vstack(X) * scale[:, None], np.concatenate(y) * scale, rcond=None)[0]
    assert res.W.shape == (4, 3)
    np.testing.assert_allclose(res.W, np.tile(w_ref, (4, 1)), atol=1e-12)
    np.testing.assert_allclose(res.loss, sum(np.mean((v - x @ w_ref) ** 2) for x, v in zip(X, y)), rtol=1e-12)


def test_oracle_fedavg_is_per_cluster_least_squares():
    rng = np.random.default_rng(1)
    X, y, labels, W_c = _two_cluster_data(rng, sigma=0.1)
    res = baselines.oracle_fedavg(_problem(X, y), labels)
    for c in (0, 1):
        members = np.flatnonzero(labels == c)
        w_ref = np.linalg.lstsq(np.vstack([X[i] for i in members]), np.concatenate([y[i] for i in members]),
                                rcond=None)[0]  # equal m_i: plain stacked least squares
        np.testing.assert_allclose(res.W[members], np.tile(w_ref, (len(members), 1)), atol=1e-12)
    np.testing.assert_array_equal(res.labels, labels)
    # noise-free perfect clusters: the oracle recovers the true weights exactly
    X0, y0, labels0, W0 = _two_cluster_data(rng, sigma=0.0)
    np.testing.assert_allclose(baselines.oracle_fedavg(_problem(X0, y0), labels0).W, W0[labels0], atol=1e-12)


def test_local_only_is_per_node_least_squares_min_norm_and_zero_without_data():
    rng = np.random.default_rng(2)
    d = 4
    X = [rng.standard_normal((6, d)), rng.standard_normal((2, d)), np.zeros((0, d)), rng.standard_normal((4, d))]
    y = [rng.standard_normal(len(x)) for x in X]
    res = baselines.local_only(_problem(X, y, d=d))
    np.testing.assert_allclose(res.W[0], np.linalg.lstsq(X[0], y[0], rcond=None)[0], atol=1e-12)
    np.testing.assert_allclose(res.W[1], np.linalg.pinv(X[1]) @ y[1], atol=1e-12)  # m_i < d: minimum norm
    np.testing.assert_array_equal(res.W[2], 0.0)  # node without data
    np.testing.assert_allclose(res.W[3], np.linalg.solve(X[3], y[3]), atol=1e-10)
    # ridge: (X^T X / m + rho/2 I) w = X^T y / m
    rho = 0.3
    res_r = baselines.local_only(_problem(X, y, d=d), ridge=rho)
    w_ref = np.linalg.solve(X[1].T @ X[1] / 2 + rho / 2 * np.eye(d), X[1].T @ y[1] / 2)
    np.testing.assert_allclose(res_r.W[1], w_ref, atol=1e-12)


def test_ifca_recovers_well_separated_clusters():
    rng = np.random.default_rng(3)
    X, y, labels, W_c = _two_cluster_data(rng, n_per=8, sigma=0.01)
    res = baselines.ifca(_problem(X, y), 2, n_restarts=4, seed=0)
    assert adjusted_rand_index(labels, res.labels) == 1.0
    oracle = baselines.oracle_fedavg(_problem(X, y), labels)
    np.testing.assert_allclose(res.W, oracle.W, atol=1e-10)
    assert len(res.info["restart_losses"]) == 4 and res.info["converged"]
    assert res.loss == pytest.approx(min(res.info["restart_losses"]))


def test_ifca_gradient_protocol_and_nodes_without_data():
    rng = np.random.default_rng(4)
    X, y, labels, _ = _two_cluster_data(rng, n_per=5)
    X[2] = np.zeros((0, 3))  # node 2 (cluster 0) holds no data: it follows its chain neighbours
    y[2] = np.zeros(0)
    res = baselines.ifca(_problem(X, y), 2, n_restarts=2, seed=1)
    assert res.labels[2] == res.labels[1] == res.labels[3]
    res_g = baselines.ifca(_problem(X, y), 2, n_restarts=1, seed=1, refit="gradient", init="bernoulli",
                           max_rounds=7, lr=0.1)
    assert res_g.W.shape == (10, 3) and res_g.iterations == 7


def test_logistic_baselines_are_stationary_points():
    rng = np.random.default_rng(5)
    d = 3
    X = [rng.standard_normal((12, d)) for _ in range(4)]
    w_true = np.array([1.0, -2.0, 0.5])
    y = [np.where(x @ w_true + 1.5 * rng.standard_normal(12) >= 0, 1.0, -1.0) for x in X]
    prob = _problem(X, y, loss=g.Logistic)
    rho = 1e-2
    res = baselines.fedavg(prob, ridge=rho)
    grad = prob.loss.gradient(res.W).sum(axis=0) + rho * res.W[0]  # sum_i grad L_i(w) + rho w = 0
    assert np.linalg.norm(grad) < 1e-8
    loc = baselines.local_only(prob, ridge=rho)
    np.testing.assert_allclose(prob.loss.gradient(loc.W) + rho * loc.W, 0.0, atol=1e-8)
    assert baselines.local_only(prob).ridge == baselines.DEFAULT_LOGISTIC_RIDGE
    with pytest.raises(ValueError, match="ridge > 0"):
        baselines.local_only(prob, ridge=0.0)


def test_baseline_input_errors():
    rng = np.random.default_rng(6)
    X, y, labels, _ = _two_cluster_data(rng, n_per=3)
    prob = _problem(X, y)
    with pytest.raises(ValueError, match="one entry per node"):
        baselines.oracle_fedavg(prob, labels[:-1])
    with pytest.raises(ValueError, match="k must be"):
        baselines.ifca(prob, 0)
    with pytest.raises(ValueError, match="ridge"):
        baselines.fedavg(prob, ridge=-1.0)
    with pytest.raises(TypeError):
        baselines.fedavg("not a problem")
