"""Losses on hostile data: unnormalised features, bounded prox buffers."""

import numpy as np
import pytest

import gtvcvx as g
from gtvcvx._validation import ResourceLimitError
from gtvcvx.testing import certify


def _logistic(n, m, d, scale, seed):
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(m, d)) * scale for _ in range(n)]
    y = [np.where(rng.random(m) < 0.5, -1.0, 1.0) for _ in range(n)]
    return g.Logistic(X, y)


@pytest.mark.parametrize("seed", [4, 6, 8, 9])
def test_logistic_with_unnormalised_features_gives_a_status_not_linalgerror(seed):
    """Features at 1e4..1e7 saturate the sigmoid, so Newton Hessians are singular to working
    precision (was `LinAlgError: Singular matrix` from the prox and from certify: these seeds
    raised it, 11 of 40 in all)."""
    rng = np.random.default_rng(seed)
    n, m, d = 6, int(rng.integers(1, 12)), int(rng.integers(2, 6))
    X = [rng.normal(size=(m, d)) * 10.0 ** rng.uniform(4, 7, size=d) for _ in range(n)]
    y = [np.where(rng.random(m) < 0.5, -1.0, 1.0) for _ in range(n)]
    problem = g.GTVProblem(g.graphs.chain(n), g.Logistic(X, y), g.Norm2(), lam=float(10.0 ** rng.uniform(-3, 1)))
    result = g.solve(problem, tol=1e-6, max_iter=500)
    assert result.status in {"optimal", "max_iter", "inaccurate"}
    assert np.isfinite(result.primal)
    cert = certify(problem, result.W)
    assert cert.gap >= 0 and np.isfinite(cert.primal)


def test_logistic_prox_buffers_are_checked_before_allocation(monkeypatch):
    loss = _logistic(20, 30, 4, 1.0, 0)
    monkeypatch.setenv("GTVCVX_MAX_MEMORY", "10K")
    with pytest.raises(ResourceLimitError, match="logistic prox buffers .*20 nodes.*GTVCVX_MAX_MEMORY"):
        loss.prox(np.zeros((20, 4)), 1.0)


def test_logistic_prox_buffers_scale_with_the_data_not_samples_times_d_times_r():
    """The row-space features were built through a (samples, d, r) gather of Q: 29.8 GiB for
    2,000 nodes x 200 samples x d = 100. Now they are one batched product on padded data."""
    loss = _logistic(30, 40, 12, 1.0, 1)
    Xp, _, mask, _ = loss._padded
    assert Xp.shape == (30, 40, 12) and mask.sum() == 30 * 40
    # same row-space features as the definition X_i Q_i
    X0 = loss.X[0]
    assert np.allclose(Xp[0], X0 @ loss.Q[0])
