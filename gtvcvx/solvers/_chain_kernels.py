r"""Compiled kernels of the exact chain solver (:mod:`gtvcvx.solvers.chain`): path ordering and
the dynamic program for 1-D total variation with weighted edges and weighted data terms.

The functions are plain Python; :func:`compiled` returns them compiled by numba (on first use,
cached on disk when the package directory is writable), so ``import gtvcvx`` does not load numba.

References
----------
.. [1] N. A. Johnson, "A dynamic programming algorithm for the fused lasso and L0-segmentation",
   J. Computational and Graphical Statistics 22(2), 2013.
.. [2] The proxTV / glmgen implementation of [1] by R. Tibshirani (``dp`` in johnsonRyanTV.cpp), for
   constant weights; here every edge has its own ``lam_k`` and every node its own ``weight_i``.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from .._jit import njit

__all__ = ["compiled"]


def path_order(n, edges):
    """Order the nodes of a graph whose components are all paths.

    Returns ``(ok, natural, order, starts, step_edge)``: ``order`` lists the nodes path after path (each
    from one end to the other), ``starts[p]`` is where path ``p`` begins in ``order`` (with
    ``starts[-1] = n``), ``step_edge[k]`` is the edge joining ``order[k]`` and ``order[k + 1]``
    (``-1`` at the end of a path). ``ok`` is False when a node has degree > 2 or a component
    is a cycle (then the other outputs are meaningless). ``natural`` is True for a chain already
    in node order (edge ``k`` joins ``k`` and ``k + 1``: a signal's samples), recognised in one
    sequential pass; then ``order`` and ``step_edge`` are ranges.
    """
    m = edges.shape[0]
    if m == n - 1:
        natural = True
        for e in range(m):
            if edges[e, 0] != e or edges[e, 1] != e + 1:
                natural = False
                break
        if natural:
            step_edge = np.arange(n, dtype=np.int64)
            step_edge[n - 1] = -1
            starts = np.empty(2, np.int64)
            starts[0] = 0
            starts[1] = n
            return True, True, np.arange(n, dtype=np.int64), starts, step_edge
    degree = np.zeros(n, np.int64)
    nbr = np.full((n, 2), -1, np.int64)
    nbr_edge = np.full((n, 2), -1, np.int64)
    for e in range(m):
        for side in range(2):
            v = edges[e, side]
            if degree[v] >= 2:
                return False, False, np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64)
            nbr[v, degree[v]] = edges[e, 1 - side]
            nbr_edge[v, degree[v]] = e
            degree[v] += 1
    order = np.empty(n, np.int64)
    step_edge = np.full(n, -1, np.int64)
    starts = np.empty(n + 1, np.int64)
    visited = np.zeros(n, np.bool_)
    pos = 0
    n_paths = 0
    for v in range(n):
        if visited[v] or degree[v] == 2:
            continue
        starts[n_paths] = pos
        n_paths += 1
        prev_edge = -1
        cur = v
        while cur != -1:
            visited[cur] = True
            order[pos] = cur
            nxt = -1
            for slot in range(degree[cur]):
                if nbr_edge[cur, slot] != prev_edge:
                    nxt = nbr[cur, slot]
                    prev_edge = nbr_edge[cur, slot]
                    step_edge[pos] = prev_edge
                    break
            pos += 1
            cur = nxt
    starts[n_paths] = pos
    # a component in which every node has degree 2 is a cycle: none of its nodes was reached
    return pos == n, False, order, starts[:n_paths + 1].copy(), step_edge


def tv1d_paths(Yt, weight, lam, starts, out):
    r"""Exact 1-D total variation on every path and every coordinate.

    For each row ``y`` of ``Yt`` (coordinates x nodes, in path order) and each path
    ``s = starts[p] .. e = starts[p + 1]``, writes to ``out`` the minimizer of
    ``sum_i weight_i / 2 (beta_i - y_i)^2 + sum_k lam_k |beta_{k+1} - beta_k|`` over the path;
    ``lam[k]`` belongs to the edge after position ``k``. ``weight > 0`` and ``lam >= 0`` are the
    caller's duty.

    Notes
    -----
    Forward pass: the message ``f_k(t)``, the minimum over ``beta_0 .. beta_{k-1}`` of the
    objective restricted to the first ``k + 1`` nodes with ``beta_k = t``, is convex and piecewise
    quadratic; its derivative is piecewise linear with knots ``x[left..right]``, stored as
    increments ``(a, b)`` of slope and intercept (from the left; negated from the right).
    Minimizing over ``beta_k`` against ``lam_k |t - beta_k|`` clips the derivative to
    ``[-lam_k, lam_k]``: the knots outside ``[tm_k, tp_k]`` (where ``f_k' = -lam_k`` and ``+lam_k``)
    are dropped and the back-pointer is ``beta_k = clip(beta_{k+1}, tm_k, tp_k)``. Each knot is
    created once and dropped at most once, so a path costs O(its length). Backward pass:
    ``beta_{n-1}`` zeroes the last derivative, then the back-pointers.
    """
    n_all = Yt.shape[1]
    x = np.empty(2 * n_all + 2)
    a = np.empty(2 * n_all + 2)
    b = np.empty(2 * n_all + 2)
    tm = np.empty(n_all + 1)
    tp = np.empty(n_all + 1)
    for j in range(Yt.shape[0]):
        for p in range(starts.shape[0] - 1):
            y = Yt[j, starts[p]:starts[p + 1]]
            weight_p = weight[starts[p]:starts[p + 1]]
            lam_p = lam[starts[p]:starts[p + 1]]
            beta = out[j, starts[p]:starts[p + 1]]
            n = y.shape[0]
            if n == 1:
                beta[0] = y[0]
                continue
            w0 = weight_p[0]
            lam0 = lam_p[0]
            tm[0] = y[0] - lam0 / w0
            tp[0] = y[0] + lam0 / w0
            left = n - 1
            right = n
            x[left] = tm[0]
            x[right] = tp[0]
            a[left] = w0
            b[left] = lam0 - w0 * y[0]
            a[right] = -w0
            b[right] = lam0 + w0 * y[0]
            w1 = weight_p[1]
            a_first = w1
            b_first = -lam0 - w1 * y[1]
            a_last = -w1
            b_last = w1 * y[1] - lam0
            for k in range(1, n - 1):
                lk = lam_p[k]
                # the derivative crosses -lam_k: step up from the left end
                a_lo = a_first
                b_lo = b_first
                lo = left
                while lo <= right:
                    if a_lo * x[lo] + b_lo > -lk:
                        break
                    a_lo += a[lo]
                    b_lo += b[lo]
                    lo += 1
                tm[k] = (-lk - b_lo) / a_lo
                left = lo - 1
                x[left] = tm[k]
                # ... and +lam_k: step down from the right end, never past the new left knot
                a_hi = a_last
                b_hi = b_last
                hi = right
                while hi > left:
                    if -a_hi * x[hi] - b_hi < lk:
                        break
                    a_hi += a[hi]
                    b_hi += b[hi]
                    hi -= 1
                tp[k] = max((lk + b_hi) / (-a_hi), tm[k])
                right = hi + 1
                x[right] = tp[k]
                a[left] = a_lo
                b[left] = b_lo + lk
                a[right] = a_hi
                b[right] = b_hi + lk
                wk = weight_p[k + 1]
                a_first = wk
                b_first = -lk - wk * y[k + 1]
                a_last = -wk
                b_last = wk * y[k + 1] - lk
            # the last node: where the derivative is zero
            a_lo = a_first
            b_lo = b_first
            lo = left
            while lo <= right:
                if a_lo * x[lo] + b_lo > 0.0:
                    break
                a_lo += a[lo]
                b_lo += b[lo]
                lo += 1
            beta[n - 1] = -b_lo / a_lo
            for k in range(n - 2, -1, -1):
                nxt = beta[k + 1]
                beta[k] = tp[k] if nxt > tp[k] else (tm[k] if nxt < tm[k] else nxt)


def path_flows(Gt, Bt, lam, starts, Ft):
    r"""Flows along the paths that make a solution ``Bt`` stationary.

    ``Ft[j, k]`` is the flow from position ``k`` to ``k + 1`` (coordinate ``j``): where
    ``beta_k != beta_{k+1}`` it is ``lam_k sign(beta_k - beta_{k+1})`` exactly (the subgradient of
    the edge term); elsewhere ``F_k = F_{k-1} - g_k`` (stationarity of node ``k``, with the
    gradients ``Gt`` of the data terms), restarted at every break and path start (``F = 0``), so
    rounding accumulates only within fused runs and lands in the node terms of the certificate,
    which are quadratic in it. The last position of a path gets no flow.
    """
    for j in range(Bt.shape[0]):
        for p in range(starts.shape[0] - 1):
            flow = 0.0
            for k in range(starts[p], starts[p + 1] - 1):
                here = Bt[j, k]
                there = Bt[j, k + 1]
                if here > there:
                    flow = lam[k]
                elif here < there:
                    flow = -lam[k]
                else:
                    flow = flow - Gt[j, k]
                Ft[j, k] = flow


@cache
def compiled():
    """``(path_order, tv1d_paths, path_flows)`` compiled by numba (imported here: it is a lazily loaded backend)."""
    return njit(path_order, tv1d_paths, path_flows, purpose="the exact chain solver")
