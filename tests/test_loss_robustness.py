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


def test_huber_prox_with_a_hessian_singular_to_working_precision_gives_an_answer_not_linalgerror():
    """Found by the nightly honesty profile: features of ~1e6, one sample inside delta and the step t = 1e8 of a
    lam = 0 problem make the prox's Hessian (1/m) X_in^T X_in + I / t rank one plus 1e-8 beside 2e13, and LU met
    an exact zero pivot (``LinAlgError: Singular matrix`` out of ``gtvcvx.solve``). Its eigenvalues are >= 1 / t:
    those rounding put below are raised to it, and the prox moves along the flat direction by t times the
    gradient there."""
    X = np.array([[1257302.210933933, -132104.86329130188], [6404226.504432821, 104900.11715303971]])
    y = np.array([0.2445073679500731, -3.3666454365798595])
    v = np.array([[968089.1489598545, 2301608.7760255537]])
    loss = g.Huber([X], [y], d=2, delta=16.0)
    prox = loss.prox(v, 1e8, warm_start=v)
    assert np.isfinite(prox).all()
    # a descent from the start v of the prox objective
    def objective(w):
        return loss.node_values(w)[0] + float(np.sum((w - v) ** 2)) / 2e8
    assert objective(prox) < objective(v)
    problem = g.GTVProblem(g.graphs.chain(3), g.Huber([X, np.zeros((0, 2)), np.zeros((0, 2))],
                                                      [y, np.zeros(0), np.zeros(0)], d=2, delta=16.0), g.Norm2(), 0.0)
    result = g.solve(problem, tol=1e-6, max_iter=50)
    assert np.isfinite(result.primal) and result.gap >= 0


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
