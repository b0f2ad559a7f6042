"""Seeded synthetic local datasets: the GTV paper's linear model, a logistic variant, and points.

Every generator takes a ``seed`` and returns the data together with its ground truth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validation import (MAX_ELEMENTS, allocation_guard, as_index_array, check_memory, check_nonnegative_scalar,
                          check_positive_int)

__all__ = ["GroundTruth", "Dataset", "PointSet", "linear_model", "logistic_model", "blobs",
           "cluster_weights", "observed_nodes"]


@dataclass(frozen=True)
class GroundTruth:
    """What the data were generated from.

    Attributes
    ----------
    W : ndarray of shape (n, d) or None
        True local model parameters (or true cluster centers for point data).
    labels : ndarray of shape (n,) or None
        True cluster of every node.
    """

    W: np.ndarray | None = None
    labels: np.ndarray | None = None


@dataclass(frozen=True)
class Dataset:
    """Local labelled datasets: node ``i`` holds features ``X[i]`` (m_i x d) and labels ``y[i]``."""

    X: tuple
    y: tuple
    truth: GroundTruth

    @property
    def n(self) -> int:
        return len(self.X)

    @property
    def counts(self) -> np.ndarray:
        """Samples per node ``m_i`` (0 = node without data)."""
        return np.array([x.shape[0] for x in self.X], dtype=np.int64)


@dataclass(frozen=True)
class PointSet:
    """One point per node (convex clustering) with its true cluster."""

    points: np.ndarray
    truth: GroundTruth


def _labels(labels, name="labels") -> np.ndarray:
    lab = as_index_array(labels, name, ndim=1)
    if lab.size == 0:
        raise ValueError(f"{name} must contain at least one node")
    if lab.min() < 0:
        raise ValueError(f"{name} must be non-negative cluster indices")
    return lab


def _counts(m, n: int) -> np.ndarray:
    if np.ndim(m) == 0:
        counts = np.full(n, check_positive_int(m, "m", minimum=0))
    else:
        counts = as_index_array(m, "m", ndim=1)
        if counts.shape != (n,) or (counts < 0).any():
            raise ValueError(f"m must be an integer >= 0 or one such integer per node ({n})")
    return counts


def cluster_weights(n_clusters: int, d: int, rng: np.random.Generator, values=(0.0, 0.5)) -> np.ndarray:
    """Cluster-wise true weights: entries i.i.d. uniform over ``values`` (paper: {0, 0.5})."""
    return rng.choice(np.asarray(values, dtype=float), size=(n_clusters, d))


def observed_nodes(n: int, rho: float, rng: np.random.Generator) -> np.ndarray:
    """Boolean mask with ``round(rho * n)`` nodes (at least one if ``rho > 0``) chosen at random."""
    rho = check_nonnegative_scalar(rho, "rho")
    if rho > 1:
        raise ValueError(f"rho must be a fraction in [0, 1], got {rho}")
    count = int(round(rho * n))
    if rho > 0:
        count = max(count, 1)
    mask = np.zeros(n, dtype=bool)
    mask[rng.choice(n, size=count, replace=False)] = True
    return mask


def _cluster_options(k: int, d: int, weights, covariances, perturbation):
    """Validated explicit cluster weights (k, d), Cholesky factors (k, d, d) and perturbation."""
    if weights is not None:
        weights = np.asarray(weights, dtype=float)
        if weights.shape != (k, d) or not np.isfinite(weights).all():
            raise ValueError(f"weights must be a finite array of shape (n_clusters, d) = ({k}, {d}), got shape "
                             f"{weights.shape}")
    factors = None
    if covariances is not None:
        cov = np.asarray(covariances, dtype=float)
        if cov.shape != (k, d, d) or not np.isfinite(cov).all():
            raise ValueError(f"covariances must be a finite array of shape (n_clusters, d, d) = ({k}, {d}, {d}), "
                             f"got shape {cov.shape}")
        if not np.allclose(cov, cov.transpose(0, 2, 1)):
            raise ValueError("covariances must be symmetric")
        try:
            factors = np.linalg.cholesky(cov)
        except np.linalg.LinAlgError as exc:
            raise ValueError("covariances must be positive definite") from exc
    perturbation = check_nonnegative_scalar(perturbation, "perturbation")
    return weights, factors, perturbation


def _features(labels, d, m, rho, seed, what, weights=None, covariances=None, perturbation=0.0):
    labels = _labels(labels)
    n = labels.size
    d = check_positive_int(d, "d")
    counts = _counts(m, n)
    weights, factors, perturbation = _cluster_options(int(labels.max()) + 1, d, weights, covariances, perturbation)
    rng = np.random.default_rng(seed)
    counts = np.where(observed_nodes(n, rho, rng), counts, 0)
    # before anything of size samples x d is drawn
    total, k = int(counts.sum()), int(labels.max()) + 1
    if total * d > MAX_ELEMENTS:
        raise ValueError(f"{what}: {total} samples x d = {d} is too large to generate "
                         f"(at most {MAX_ELEMENTS} entries)")
    check_memory(_features_bytes(n, k, d, total),
                 f"{what}(d={d}): {n} nodes, {total} samples of dimension {d}")
    with allocation_guard(f"{what}(d={d}): {total} samples of dimension {d}"):
        w_clusters = cluster_weights(k, d, rng) if weights is None else weights
        W = w_clusters[labels]
        if perturbation > 0:  # non-i.i.d. nodes: w_i = w_c + perturbation * e_i / ||w_c||, e_i ~ N(0, I)
            norms = np.linalg.norm(w_clusters, axis=1)
            if not (norms > 0).all():
                raise ValueError("perturbation needs nonzero cluster weights (it is scaled by 1 / ||w_c||)")
            W = W + perturbation * rng.standard_normal((n, d)) / norms[labels][:, None]
        X_all = rng.standard_normal((total, d))
        node_of_sample = np.repeat(np.arange(n), counts)
        if factors is not None:  # x ~ N(0, Sigma_c) for the nodes of cluster c
            for c in range(k):  # a loop over clusters, each a batched product
                rows = labels[node_of_sample] == c
                X_all[rows] = X_all[rows] @ factors[c].T
        scores = np.einsum("kd,kd->k", X_all, W[node_of_sample])
    return labels, counts, rng, W, X_all, scores


def _features_bytes(n: int, k: int, d: int, total: int) -> float:
    """Peak bytes of :func:`_features` and the label draw: the cluster and node weights, the
    features, the per-sample weight rows of the scores, and a few per-sample vectors."""
    return 8.0 * d * (k + n + 2 * total) + 8.0 * (4 * total + 4 * n)


def _split(values: np.ndarray, counts: np.ndarray) -> tuple:
    return tuple(np.split(values, np.cumsum(counts)[:-1]))


def linear_model(labels, d: int, m=10, sigma: float = 1e-3, rho: float = 1.0, seed=None, *, weights=None,
                 covariances=None, perturbation: float = 0.0) -> Dataset:
    """The GTV paper's linear model.

    Node ``i`` in cluster ``c`` has ``m_i`` samples ``x ~ N(0, I_d)`` and labels
    ``y = w_c^T x + sigma * e`` with ``e ~ N(0, 1)``; the cluster weights ``w_c`` have entries
    i.i.d. uniform in {0, 0.5}. A fraction ``rho`` of the nodes is observed; the others hold
    no data (``m_i = 0``). The appendix experiments (paper, Sec. IX-B) also need given cluster
    weights, per-cluster feature covariances and per-node perturbations of the weights.

    Parameters
    ----------
    labels : array_like of shape (n,)
        Cluster of every node.
    d : int
        Feature dimension.
    m : int or array_like of shape (n,)
        Samples per observed node.
    sigma : float
        Noise standard deviation.
    rho : float
        Fraction of nodes that hold data.
    seed : int or Generator, optional
    weights : array_like of shape (n_clusters, d), optional
        The cluster weights ``w_c`` (default: drawn as above).
    covariances : array_like of shape (n_clusters, d, d), optional
        Feature covariance of each cluster, ``x ~ N(0, Sigma_c)`` (default identity).
    perturbation : float
        Non-i.i.d. nodes: ``w_i = w_c + perturbation * e_i / ||w_c||`` with ``e_i ~ N(0, I_d)``
        (paper, Sec. IX-B2, uses ``1e-3``); the ground truth is then per node.

    References
    ----------
    .. [1] Y. SarcheshmehPour, Y. Tian, L. Zhang, A. Jung, "Clustered federated learning via
       generalized total variation minimization", IEEE Trans. Signal Processing, 2023
       (``../shared/seeds/002``: eq. (37), Sec. VI-A; Sec. IX-B for the covariances and perturbations).
    """
    sigma = check_nonnegative_scalar(sigma, "sigma")
    labels, counts, rng, W, X_all, scores = _features(labels, d, m, rho, seed, "data.linear_model", weights,
                                                      covariances, perturbation)
    y_all = scores + sigma * rng.standard_normal(scores.size)
    return Dataset(_split(X_all, counts), _split(y_all, counts), GroundTruth(W=W, labels=labels))


def logistic_model(labels, d: int, m=10, sigma: float = 0.0, rho: float = 1.0, seed=None) -> Dataset:
    """Logistic variant of :func:`linear_model`: ``y = sign(w_c^T x + sigma * e)`` in {-1, +1}.

    A zero score is labelled +1. Cluster weights and observed nodes are drawn as in
    :func:`linear_model`.
    """
    sigma = check_nonnegative_scalar(sigma, "sigma")
    labels, counts, rng, W, X_all, scores = _features(labels, d, m, rho, seed, "data.logistic_model")
    noisy = scores + sigma * rng.standard_normal(scores.size)
    y_all = np.where(noisy >= 0, 1.0, -1.0)
    return Dataset(_split(X_all, counts), _split(y_all, counts), GroundTruth(W=W, labels=labels))


def blobs(sizes, d: int = 2, *, separation: float = 5.0, std: float = 1.0, seed=None) -> PointSet:
    """Gaussian blobs for clustering: cluster ``c`` has ``sizes[c]`` points ``N(mu_c, std^2 I)``.

    The centers ``mu_c`` are drawn uniformly in a cube of side ``separation * n_clusters``.
    """
    sizes = np.atleast_1d(np.asarray(sizes))
    if sizes.ndim != 1 or sizes.size == 0 or sizes.dtype.kind not in "iu" or (sizes < 1).any():
        raise ValueError(f"sizes must be a non-empty list of positive integers, got {sizes!r}")
    d = check_positive_int(d, "d")
    separation = check_nonnegative_scalar(separation, "separation")
    std = check_nonnegative_scalar(std, "std")
    n = int(sizes.sum())
    if n * d > MAX_ELEMENTS:
        raise ValueError(f"data.blobs(d={d}): {n} points x d = {d} is too many to generate "
                         f"(at most {MAX_ELEMENTS} entries)")
    # centers, then per point: the noise, its scaled copy, the points and the true centers
    check_memory(8.0 * d * (sizes.size + 4 * n) + 8.0 * n,
                 f"data.blobs(d={d}): {n} points of dimension {d} in {sizes.size} clusters")
    rng = np.random.default_rng(seed)
    with allocation_guard(f"data.blobs(d={d}): {n} points of dimension {d}"):
        centers = rng.uniform(0.0, separation * sizes.size, size=(sizes.size, d))
        labels = np.repeat(np.arange(sizes.size), sizes)
        points = centers[labels] + std * rng.standard_normal((labels.size, d))
        return PointSet(points, GroundTruth(W=centers[labels], labels=labels))

