"""Compiled kernels of the losses' hot paths (numba, loaded on first use so ``import gtvcvx`` does
not load it).

The functions are plain Python; :func:`load` returns them compiled (:func:`gtvcvx._jit.njit`). A
loss calls them only from :data:`gtvcvx._jit.MIN_ENTRIES` factor entries on (its NumPy form below).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from .._jit import njit

prange = range  # numba.prange once compiled (gtvcvx._jit.njit)
__all__ = ["load", "lowrank_quadratic_prox", "node_weighted_sums", "squared_distance_prox", "thin_svds"]


def lowrank_quadratic_prox(Q, s, b, rate, V, out, chunks):
    r"""``out_i = v_i + Q_i (c_i - q_i)``, ``q_i = Q_i^T v_i``,
    ``c_i = (q_i + rate_i s_i b_i) / (1 + rate_i s_i^2)``, node by node in one pass.

    The prox of ``t (1/m) ||y - X w||^2`` with the thin SVD ``X = P diag(s) Q^T`` and
    ``b = P^T y``, ``rate = 2 t / m`` (:class:`gtvcvx.losses.SquaredError`); ``Q`` is read once
    (the batched NumPy form reads it, or its transposed copy, twice and allocates four
    ``n x r`` temporaries). The nodes are cut in ``chunks`` consecutive runs (one per thread of the
    threaded build), each with its own ``q``.
    """
    n, d, r = Q.shape
    for c in prange(chunks):
        q = np.empty(r)
        for i in range(c * n // chunks, (c + 1) * n // chunks):
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


def squared_distance_prox(points, tau, V, out):
    r"""``out_i = (v_i + 2 tau_i a_i) / (1 + 2 tau_i)``: the prox of ``tau_i ||w - a_i||^2``
    (:class:`gtvcvx.losses.SquaredDistance`) in one pass, rows split over the threads of the
    threaded build."""
    n, d = V.shape
    for i in prange(n):
        two_tau = 2.0 * tau[i]
        scale = 1.0 / (1.0 + two_tau)
        for k in range(d):
            out[i, k] = (V[i, k] + two_tau * points[i, k]) * scale
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


def thin_svds(A, U, S, Vt):
    """``U[g], S[g], Vt[g] = svd(A[g], full_matrices=False)`` for every matrix of the stack (LAPACK
    ``gesdd``, as :func:`numpy.linalg.svd`), matrices split over the threads of the threaded build."""
    for g in prange(A.shape[0]):
        u, s, vt = np.linalg.svd(A[g], full_matrices=False)
        U[g] = u
        S[g] = s
        Vt[g] = vt


@cache
def load(parallel: bool = False):
    """``{name: compiled function}`` (numba imported here: a lazily loaded backend; ``parallel``:
    the threaded build of the prox)."""
    (sums,) = njit(node_weighted_sums, purpose="the compiled loss kernels")
    prox, distance_prox, svds = njit(lowrank_quadratic_prox, squared_distance_prox, thin_svds,
                                     purpose="the compiled loss kernels", parallel=parallel)
    prox(np.zeros((1, 1, 1)), np.zeros((1, 1)), np.zeros((1, 1)), np.zeros(1), np.zeros((1, 1)), np.zeros((1, 1)), 1)
    fixed = np.zeros((1, 1))  # SquaredDistance's points are read-only: another numba type
    fixed.flags.writeable = False
    distance_prox(fixed, np.ones(1), np.zeros((1, 1)), np.zeros((1, 1)))
    sums(np.zeros((1, 1)), np.zeros(1), np.zeros(1, np.int64), np.zeros((1, 1)))
    sums(fixed, np.zeros(1), np.zeros(1, np.int64), np.zeros((1, 1)))  # (a design loss's samples)
    svds(np.ones((1, 1, 1)), np.empty((1, 1, 1)), np.empty((1, 1)), np.empty((1, 1, 1)))
    # (specializations loaded above, not inside a timed iteration)
    return {"lowrank_quadratic_prox": prox, "squared_distance_prox": distance_prox, "node_weighted_sums": sums,
            "thin_svds": svds}
