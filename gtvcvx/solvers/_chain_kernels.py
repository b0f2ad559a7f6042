r"""Compiled kernels of the exact chain solver (:mod:`gtvcvx.solvers.chain`): path ordering and
the dynamic program for 1-D total variation with weighted edges and weighted data terms, and the
certificate terms of its solution in one pass.

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
    sequential pass; then ``order`` and ``step_edge`` are empty (they would be ranges; the caller
    makes them where it needs them).
    """
    m = edges.shape[0]
    if m == n - 1:
        natural = True
        for e in range(m):
            if edges[e, 0] != e or edges[e, 1] != e + 1:
                natural = False
                break
        if natural:
            starts = np.empty(2, np.int64)
            starts[0] = 0
            starts[1] = n
            return True, True, np.empty(0, np.int64), starts, np.empty(0, np.int64)
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


def tv1d_paths(Yt, shift, weight, lam, starts, out):
    r"""Exact 1-D total variation on every path and every coordinate.

    For each row ``j`` of ``Yt`` (coordinates x nodes, in path order), ``y = Yt[j] - shift[j]``, and
    each path ``s = starts[p] .. e = starts[p + 1]``, writes to ``out[j]`` the minimizer of
    ``sum_i weight_i / 2 (beta_i - y_i)^2 + sum_k lam_k |beta_{k+1} - beta_k|`` over the path, plus
    ``shift[j]`` (TV commutes with shifts; a shift to the data's center keeps the knots' arithmetic
    at the scale of the differences). ``lam[k]`` belongs to the edge after position ``k`` (read for
    the positions before a path's end only: a single path's ``lam`` may have ``n - 1`` entries).
    ``weight > 0`` and ``lam >= 0`` are the caller's duty.

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
        s = shift[j]
        for p in range(starts.shape[0] - 1):
            y = Yt[j, starts[p]:starts[p + 1]]
            weight_p = weight[starts[p]:starts[p + 1]]
            lam_p = lam[starts[p]:starts[p + 1]]
            beta = out[j, starts[p]:starts[p + 1]]
            n = y.shape[0]
            if n == 1:
                beta[0] = (y[0] - s) + s
                continue
            w0 = weight_p[0]
            lam0 = lam_p[0]
            y0 = y[0] - s
            tm[0] = y0 - lam0 / w0
            tp[0] = y0 + lam0 / w0
            left = n - 1
            right = n
            x[left] = tm[0]
            x[right] = tp[0]
            a[left] = w0
            b[left] = lam0 - w0 * y0
            a[right] = -w0
            b[right] = lam0 + w0 * y0
            w1 = weight_p[1]
            y1 = y[1] - s
            a_first = w1
            b_first = -lam0 - w1 * y1
            a_last = -w1
            b_last = w1 * y1 - lam0
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
                yk = y[k + 1] - s
                a_first = wk
                b_first = -lk - wk * yk
                a_last = -wk
                b_last = wk * yk - lk
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
            nxt = -b_lo / a_lo
            beta[n - 1] = nxt + s
            for k in range(n - 2, -1, -1):
                nxt = tp[k] if nxt > tp[k] else (tm[k] if nxt < tm[k] else nxt)
                beta[k] = nxt + s


def edge_step(here, there, c, flow, r):
    """One flow of :func:`path_certificate` (and of the tree solver's ``tree_certificate``) and
    its edge's terms, for one coordinate: ``(flow, clipped, value, term)``.

    The flow from a node at ``here`` to the next at ``there`` across an edge of capacity ``c``:
    ``c sign(here - there)`` where they differ (the subgradient of the edge term), else ``flow``
    (what flows in from the nodes before) minus the node's gradient ``2 r``; ``clipped`` into
    ``[-c, c]``; the edge's value ``c |z|`` and Fenchel-Young term ``c |z| - z clipped`` with
    ``z = here - there``.
    """
    if here > there:
        flow = c
    elif here < there:
        flow = -c
    else:
        flow = flow - 2.0 * r
    clipped = flow
    if clipped > c:  # comparisons, not min/max: a NaN stays NaN (as in np.clip)
        clipped = c
    elif clipped < -c:
        clipped = -c
    z = here - there
    value = c * abs(z)
    return flow, clipped, value, value - z * clipped


def neumaier_add(total, carry, value):
    """``total + value`` by Neumaier's step: ``(new total, carry)``, the lost low part added to the carry."""
    s = total + value
    if abs(total) >= abs(value):
        carry += (total - s) + value
    else:
        carry += (value - s) + total
    return s, carry


def path_certificate(Bt, At, lam, starts, Ft, node_gaps, edge_gaps, sums):
    r"""The flows along the paths that make a solution stationary for the data terms
    ``||beta_i - a_i||^2``, and every term of their certificate, in one pass along the paths.

    ``Bt`` and ``At`` hold the solution and the points ``a`` (coordinates x nodes, in path order),
    ``lam[k]`` the capacity of the edge after position ``k`` (read before a path's end only). The
    penalty is separable over the coordinates: ``c ||z||_1``, or ``c |z|`` for one coordinate (any
    norm). Writes, per position ``k``:

    * ``Ft[:, k]``: the flow to position ``k + 1``: where ``beta_k != beta_{k+1}`` it is
      ``lam_k sign(beta_k - beta_{k+1})`` exactly (the subgradient of the edge term); elsewhere
      ``F_k = F_{k-1} - g_k`` (stationarity of node ``k``, gradients ``g = 2 (beta - a)``),
      restarted at every break and path start (``F = 0``), so rounding accumulates only within
      fused runs and lands in the node terms, which are quadratic in it. Then clipped into
      ``[-lam_k, lam_k]`` (the capacity box); 0 at the end of a path;
    * ``node_gaps[k] = ||beta_k - a_k - v_k / 2||^2`` with ``v_k = -(F_k - F_{k-1})``: the
      Fenchel-Young term of the squared distance at the node dual ``v = -D^T U``;
    * ``edge_gaps[k] = sum_j (lam_k |z_kj| - z_kj F_kj)`` with ``z_k = beta_k - beta_{k+1}``: the
      edge's Fenchel-Young term, the flow being in its box (not written at the end of a path);

    and ``sums = (sum_k ||beta_k - a_k||^2, sum_k lam_k ||z_k||_1)``, the two parts of ``P(beta)``,
    by Neumaier's compensated summation (error at most ``2 u |sum| + O(n u^2) sum |terms|``, below
    the pairwise sums' the certificate's rounding allowance assumes). A NaN or infinite entry
    leaves a NaN or infinite sum.

    These are the terms :func:`gtvcvx.solvers.certify_pair` evaluates (clipping, ``SquaredDistance``'s
    ``certify_nodes`` and ``node_values``, the penalty's edge terms) with the same operations per
    coordinate; on a path the edge's orientation changes the signs of ``z`` and ``u`` together.
    The coordinates are the outer loop: each flow's recursion runs in a register.

    References
    ----------
    .. [1] A. Neumaier, "Rundungsfehleranalyse einiger Verfahren zur Summation endlicher Summen",
       ZAMM 54(1), 1974.
    """
    node_sum = 0.0
    node_carry = 0.0
    edge_sum = 0.0
    edge_carry = 0.0
    for j in range(Bt.shape[0]):
        for p in range(starts.shape[0] - 1):
            end = starts[p + 1] - 1
            flow = 0.0
            before = 0.0
            for k in range(starts[p], end + 1):
                here = Bt[j, k]
                r = here - At[j, k]
                clipped = 0.0
                if k < end:
                    flow, clipped, value, term = edge_step(here, Bt[j, k + 1], lam[k], flow, r)
                    edge_gaps[k] = term if j == 0 else edge_gaps[k] + term
                    edge_sum, edge_carry = neumaier_add(edge_sum, edge_carry, value)
                Ft[j, k] = clipped
                diff = r + 0.5 * (clipped - before)
                before = clipped
                node_gaps[k] = diff * diff if j == 0 else node_gaps[k] + diff * diff
                node_sum, node_carry = neumaier_add(node_sum, node_carry, r * r)
    sums[0] = node_sum + node_carry
    sums[1] = edge_sum + edge_carry


@cache
def compiled():
    """``(path_order, tv1d_paths, path_certificate)`` compiled by numba (imported here: it is a
    lazily loaded backend)."""
    return njit(path_order, tv1d_paths, path_certificate, purpose="the exact chain solver",
                helpers=(edge_step, neumaier_add))
