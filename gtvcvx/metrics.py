"""Accuracy measures against ground truth: MSE of local models, adjusted Rand index, accuracy."""

from __future__ import annotations

import numpy as np

from ._validation import as_float_array, as_index_array

__all__ = ["mse", "adjusted_rand_index", "accuracy", "relative_error"]


def mse(W, W_true) -> float:
    r"""Mean squared error of local models: ``(1/n) sum_i ||w_i - w_true_i||_2^2``.

    This is the error measure of the GTV paper's experiments (Table I, Figs. 2-4).
    """
    W = as_float_array(W, "W", ndim=2)
    W_true = as_float_array(W_true, "W_true", shape=W.shape)
    diff = W - W_true
    return float(np.einsum("nd,nd->n", diff, diff).mean())


def relative_error(W, W_ref) -> float:
    """``||W - W_ref||_F / max(1, ||W_ref||_F)``."""
    W = as_float_array(W, "W")
    W_ref = as_float_array(W_ref, "W_ref", shape=W.shape)
    return float(np.linalg.norm(W - W_ref) / max(1.0, np.linalg.norm(W_ref)))


def adjusted_rand_index(labels_true, labels_pred) -> float:
    """Adjusted Rand index (Hubert & Arabie, 1985) between two clusterings of the same items.

    1 for identical partitions (up to relabelling), about 0 for independent ones.
    """
    a = as_index_array(labels_true, "labels_true", ndim=1)
    b = as_index_array(labels_pred, "labels_pred", ndim=1)
    if a.shape != b.shape:
        raise ValueError(f"labels_true and labels_pred must have the same length, got {a.size} and {b.size}")
    n = a.size
    if n < 2:
        return 1.0
    _, ai = np.unique(a, return_inverse=True)
    _, bi = np.unique(b, return_inverse=True)
    table = np.zeros((ai.max() + 1, bi.max() + 1), dtype=np.int64)
    np.add.at(table, (ai, bi), 1)
    comb = lambda x: x * (x - 1) / 2.0  # noqa: E731
    index = comb(table).sum()
    rows = comb(table.sum(axis=1)).sum()
    cols = comb(table.sum(axis=0)).sum()
    expected = rows * cols / comb(n)
    maximum = 0.5 * (rows + cols)
    if maximum == expected:  # both partitions trivial in the same way
        return 1.0
    return float((index - expected) / (maximum - expected))


def accuracy(y_true, y_pred) -> float:
    """Fraction of equal entries."""
    y_true = np.asarray(y_true)
    y_pred = np.asarray(y_pred)
    if y_true.shape != y_pred.shape:
        raise ValueError(f"y_true and y_pred must have the same shape, got {y_true.shape} and {y_pred.shape}")
    return float((y_true == y_pred).mean()) if y_true.size else float("nan")
