"""gtvcvx.data: the generators' options."""

import numpy as np
import pytest
def test_linear_model_appendix_options_covariances_weights_and_perturbation():
    from gtvcvx.data import linear_model

    labels = np.repeat([0, 1], 400)
    weights = [[2.0, 2.0], [-2.0, 2.0]]
    cov = [[[2.54, 0.41], [0.41, 0.51]], [[2.21, -0.81], [-0.81, 0.97]]]  # paper 002, Sec. IX-B1
    ds = linear_model(labels, 2, m=50, sigma=0.0, weights=weights, covariances=cov, seed=1)
    for c in range(2):
        X = np.vstack([ds.X[i] for i in np.flatnonzero(labels == c)])
        assert np.allclose(np.cov(X.T), cov[c], atol=0.08)
        assert np.allclose(ds.truth.W[labels == c], weights[c])
    noisy = linear_model(labels, 2, m=5, sigma=0.0, weights=weights, perturbation=1e-3, seed=1)
    deviation = noisy.truth.W - np.asarray(weights)[labels]
    assert 0 < np.abs(deviation).max() < 1e-2 and np.allclose(np.concatenate(noisy.y[:3]), np.concatenate(
        [noisy.X[i] @ noisy.truth.W[i] for i in range(3)]))
    with pytest.raises(ValueError, match="covariances must be positive definite"):
        linear_model(labels, 2, covariances=[[[1.0, 2.0], [2.0, 1.0]]] * 2)
    with pytest.raises(ValueError, match=r"weights must be a finite array of shape \(n_clusters, d\) = \(2, 2\)"):
        linear_model(labels, 2, weights=[[1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match="perturbation needs nonzero cluster weights"):
        linear_model(labels, 2, weights=[[0.0, 0.0], [1.0, 1.0]], perturbation=1e-3)
