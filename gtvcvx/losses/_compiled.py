"""Compiled kernels of the losses' hot paths (numba, loaded on first use so ``import gtvcvx`` does
not load it).

The functions are plain Python; :func:`load` returns them compiled (:func:`gtvcvx._jit.njit`). A
loss calls them only from :data:`gtvcvx._jit.MIN_ENTRIES` factor entries on (its NumPy form below).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from .._jit import njit

__all__ = ["load", "lowrank_quadratic_prox", "node_weighted_sums"]


def lowrank_quadratic_prox(Q, s, b, rate, V, out):
    r"""``out_i = v_i + Q_i (c_i - q_i)``, ``q_i = Q_i^T v_i``,
    ``c_i = (q_i + rate_i s_i b_i) / (1 + rate_i s_i^2)``, node by node in one pass.

    The prox of ``t (1/m) ||y - X w||^2`` with the thin SVD ``X = P diag(s) Q^T`` and
    ``b = P^T y``, ``rate = 2 t / m`` (:class:`gtvcvx.losses.SquaredError`); ``Q`` is read once
    (the batched NumPy form reads it, or its transposed copy, twice and allocates four
    ``n x r`` temporaries).
    """
    n, d, r = Q.shape
    q = np.empty(r)
    for i in range(n):
        for k in range(r):
            acc = 0.0
            for j in range(d):
                acc += Q[i, j, k] * V[i, j]
            q[k] = acc
        rt = rate[i]
        for k in range(r):
            q[k] = (q[k] + rt * s[i, k] * b[i, k]) / (1.0 + rt * (s[i, k] * s[i, k])) - q[k]
        for j in range(d):
            acc = V[i, j]
            for k in range(r):
                acc += Q[i, j, k] * q[k]
            out[i, j] = acc
    return out


def node_weighted_sums(X, weights, node, out):
    """``out_i = sum_{k: node_k = i} weights_k x_k`` (``out`` zeroed here), samples in order: the
    sums of the sparse segment product ``S (X * weights[:, None])`` without its (M, d) temporary
    (1.6 GB at 2e7 samples, d = 10)."""
    out[:, :] = 0.0
    M, d = X.shape
    for k in range(M):
        i = node[k]
        w = weights[k]
        for j in range(d):
            out[i, j] += X[k, j] * w
    return out


@cache
def load():
    """``{name: compiled function}`` (numba imported here: a lazily loaded backend)."""
    prox, sums = njit(lowrank_quadratic_prox, node_weighted_sums, purpose="the compiled loss kernels")
    prox(np.zeros((1, 1, 1)), np.zeros((1, 1)), np.zeros((1, 1)), np.zeros(1), np.zeros((1, 1)), np.zeros((1, 1)))
    sums(np.zeros((1, 1)), np.zeros(1), np.zeros(1, np.int64), np.zeros((1, 1)))
    # (specializations loaded above, not inside a timed iteration)
    return {"lowrank_quadratic_prox": prox, "node_weighted_sums": sums}
