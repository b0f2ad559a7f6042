r"""Compiled kernels of the exact tree solver (:mod:`gtvcvx.solvers.tree`): a rooted order of a
forest, the dynamic program for total variation on a tree with weighted edges and data, and the
certificate terms of its solution in one pass per coordinate.

The functions are plain Python; :func:`compiled` returns them compiled by numba (on first use,
cached on disk when the package directory is writable), so ``import gtvcvx`` does not load numba.

References
----------
.. [1] V. Kolmogorov, T. Pock, M. Rolinek, "Total variation on a tree", SIAM J. Imaging Sciences
   9(2), 2016 (the message passing and its mergeable knot sets).
.. [2] N. A. Johnson, "A dynamic programming algorithm for the fused lasso and L0-segmentation",
   J. Computational and Graphical Statistics 22(2), 2013 (the same program on a path).
.. [3] D. D. Sleator, R. E. Tarjan, "Self-adjusting heaps", SIAM J. Computing 15(1), 1986 (skew
   heaps: merges in amortized O(log n)).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from .._jit import njit
from ._chain_kernels import edge_step, neumaier_add

__all__ = ["compiled"]


def forest_order(n, edges):
    """Root every tree of a forest and list its nodes parents first.

    Returns ``(ok, order, parent, parent_edge)``: ``order`` lists the nodes tree after tree in
    breadth-first order from each tree's lowest-numbered node (its root), ``parent[i]`` is the
    node above ``i`` (``-1`` at a root) and ``parent_edge[i]`` the edge joining them. ``ok`` is
    False when the graph has a cycle (then the other outputs are meaningless).
    """
    m = edges.shape[0]
    degree = np.zeros(n + 1, np.int64)
    for e in range(m):
        degree[edges[e, 0] + 1] += 1
        degree[edges[e, 1] + 1] += 1
    start = np.cumsum(degree)  # the neighbours of v are slots start[v] .. start[v + 1] - 1
    fill = start[:-1].copy()
    nbr = np.empty(2 * m, np.int64)
    nbr_edge = np.empty(2 * m, np.int64)
    for e in range(m):
        for side in range(2):
            v = edges[e, side]
            nbr[fill[v]] = edges[e, 1 - side]
            nbr_edge[fill[v]] = e
            fill[v] += 1
    order = np.empty(n, np.int64)
    parent = np.full(n, -1, np.int64)
    parent_edge = np.full(n, -1, np.int64)
    seen = np.zeros(n, np.bool_)
    head = 0
    tail = 0
    for root in range(n):
        if seen[root]:
            continue
        seen[root] = True
        order[tail] = root
        tail += 1
        while head < tail:
            v = order[head]
            head += 1
            for slot in range(start[v], start[v + 1]):
                if nbr_edge[slot] == parent_edge[v]:
                    continue
                u = nbr[slot]
                if seen[u]:  # reached twice: a cycle
                    return False, order, parent, parent_edge
                seen[u] = True
                parent[u] = v
                parent_edge[u] = nbr_edge[slot]
                order[tail] = u
                tail += 1
    return True, order, parent, parent_edge


def tv_tree(Yt, weight, lam, order, parent, out):
    r"""Exact total variation on every tree of a forest and every coordinate.

    For each row ``y`` of ``Yt`` (coordinates x nodes) writes to ``out`` the minimizer of
    ``sum_i weight_i / 2 (beta_i - y_i)^2 + sum_{i not a root} lam_i |beta_i - beta_{parent(i)}|``
    (``order`` and ``parent`` from :func:`forest_order`; ``lam_i`` belongs to the edge above
    ``i``). ``weight > 0`` and ``lam >= 0`` are the caller's duty.

    Notes
    -----
    Leaves first, each node ``i`` sums its data term's derivative and its children's messages
    into ``F_i'``, a continuous nondecreasing piecewise-linear function (slope >= ``weight_i``)
    stored as its leftmost piece ``(a, b)`` (``F' = a t + b`` left of every knot) and knots
    carrying increments of slope and intercept. The message to the parent,
    ``M_i(t) = min_x F_i(x) + lam_i |x - t|``, has the derivative ``F_i'`` clipped to
    ``[-lam_i, lam_i]``: the knots left of ``tm_i`` (where ``F_i' = -lam_i``) and right of
    ``tp_i`` (``+lam_i``) are dropped, two knots are added at ``tm_i`` and ``tp_i``, and
    ``beta_i = clip(beta_parent, tm_i, tp_i)``. A child's knots join its parent's by merging
    two skew heaps (one ordered from the left, one from the right; a knot dropped from one end
    is marked and skipped at the other), so a forest costs O(n log n) per coordinate.
    Backward: each root zeroes its ``F'``, then the clips, parents first.
    """
    n = Yt.shape[1]
    size = 2 * n + 1
    kx = np.empty(size)  # knot positions
    kda = np.empty(size)  # increments of slope and intercept across each knot (left to right)
    kdb = np.empty(size)
    alive = np.zeros(size, np.bool_)
    # child links of the two skew heaps: row 0 orders knots from the left (min), row 1 from the right (max)
    left = np.empty((2, size), np.int64)
    right = np.empty((2, size), np.int64)
    top = np.empty((2, n), np.int64)  # each node's heap roots
    base_a = np.empty(n)  # leftmost piece of F_i'
    base_b = np.empty(n)
    total_a = np.empty(n)  # sum of the increments of node i's live knots
    total_b = np.empty(n)
    tm = np.empty(n)
    tp = np.empty(n)
    sign = np.array([1.0, -1.0])

    def merge(h, a, b):
        # top-down skew-heap merge of the heaps rooted at knots a and b (-1: empty)
        if a < 0:
            return b
        if b < 0:
            return a
        if sign[h] * kx[b] < sign[h] * kx[a]:
            a, b = b, a
        root = a
        while True:
            r = right[h, a]
            right[h, a] = left[h, a]
            if r < 0:
                left[h, a] = b
                break
            if sign[h] * kx[b] < sign[h] * kx[r]:
                r, b = b, r
            left[h, a] = r
            a = r
        return root

    for j in range(Yt.shape[0]):
        count = 0
        for i in range(n):
            base_a[i] = weight[i]
            base_b[i] = -weight[i] * Yt[j, i]
            total_a[i] = 0.0
            total_b[i] = 0.0
            top[0, i] = -1
            top[1, i] = -1
        for pos in range(n - 1, -1, -1):
            i = order[pos]
            p = parent[i]
            lk = lam[i] if p >= 0 else 0.0
            # the rightmost piece before anything is dropped
            ar = base_a[i] + total_a[i]
            br = base_b[i] + total_b[i]
            # from the left: absorb the knots below the crossing of -lk (of 0 at a root)
            a = base_a[i]
            b = base_b[i]
            while top[0, i] >= 0:
                k = top[0, i]
                if alive[k]:
                    if a * kx[k] + b > -lk:
                        break
                    a += kda[k]
                    b += kdb[k]
                    total_a[i] -= kda[k]
                    total_b[i] -= kdb[k]
                    alive[k] = False
                top[0, i] = merge(0, left[0, k], right[0, k])
            tm[i] = (-lk - b) / a
            if p < 0:
                out[j, i] = tm[i]
                continue
            # ... and from the right: drop the knots above the crossing of +lk
            while top[1, i] >= 0:
                k = top[1, i]
                if alive[k]:
                    if ar * kx[k] + br < lk:
                        break
                    ar -= kda[k]
                    br -= kdb[k]
                    total_a[i] -= kda[k]
                    total_b[i] -= kdb[k]
                    alive[k] = False
                top[1, i] = merge(1, left[1, k], right[1, k])
            tp[i] = max((lk - br) / ar, tm[i])
            # the message: -lk left of tm, F_i' between, +lk right of tp
            for x, da, db in ((tm[i], a, b + lk), (tp[i], -ar, lk - br)):
                kx[count] = x
                kda[count] = da
                kdb[count] = db
                alive[count] = True
                for h in range(2):
                    left[h, count] = -1
                    right[h, count] = -1
                    top[h, i] = merge(h, top[h, i], count)
                total_a[i] += da
                total_b[i] += db
                count += 1
            base_b[p] -= lk
            total_a[p] += total_a[i]
            total_b[p] += total_b[i]
            for h in range(2):
                top[h, p] = merge(h, top[h, p], top[h, i])
        for pos in range(n):
            i = order[pos]
            p = parent[i]
            if p >= 0:
                t = out[j, p]
                out[j, i] = tp[i] if t > tp[i] else (tm[i] if t < tm[i] else t)


def tree_certificate(Bt, At, lam, order, parent, Ft, node_gaps, edge_gaps, sums):
    r"""The flows up the trees that make a solution stationary for the data terms
    ``||beta_i - a_i||^2``, and every term of their certificate, in one pass per coordinate.

    ``Bt`` and ``At`` hold the solution and the points ``a`` (coordinates x nodes), ``lam[i]`` the
    capacity of the edge above node ``i``; ``order`` and ``parent`` from :func:`forest_order`. The
    penalty is separable over the coordinates (``c ||z||_1``, or ``c |z|`` for one coordinate).
    Writes, per node ``i``:

    * ``Ft[:, i]``: the flow from ``i`` to its parent: where ``beta_i != beta_parent`` it is
      ``lam_i sign(beta_i - beta_parent)`` exactly (the subgradient of the edge term); elsewhere the
      flows from ``i``'s children minus ``i``'s data-term gradient ``2 (beta_i - a_i)`` (stationarity
      of node ``i``), leaves first, so rounding accumulates only within fused subtrees. Then
      clipped into ``[-lam_i, lam_i]``; 0 at a root;
    * ``node_gaps[i] = ||beta_i - a_i - v_i / 2||^2`` with ``v_i = -(F_i - sum_children F_c)`` (the
      clipped flows): the Fenchel-Young term of the squared distance at the node dual
      ``v = -D^T U``;
    * ``edge_gaps[i] = sum_j (lam_i |z_ij| - z_ij F_ij)`` with ``z_i = beta_i - beta_parent``: the
      Fenchel-Young term of the edge above ``i``, the flow being in its box (not written at a root);

    and ``sums = (sum_i ||beta_i - a_i||^2, sum_i lam_i ||z_i||_1)`` by Neumaier's compensated
    summation, as :func:`gtvcvx.solvers._chain_kernels.path_certificate` (whose terms these are on a
    path). A NaN or infinite entry leaves a NaN or infinite sum.
    """
    n = Bt.shape[1]
    inflow = np.empty(n)  # the children's flows, as the recursion sums them
    clipped_in = np.empty(n)  # ... and clipped, as the divergence sums them
    node_sum = 0.0
    node_carry = 0.0
    edge_sum = 0.0
    edge_carry = 0.0
    for j in range(Bt.shape[0]):
        inflow[:] = 0.0
        clipped_in[:] = 0.0
        for pos in range(n - 1, -1, -1):
            i = order[pos]
            p = parent[i]
            here = Bt[j, i]
            r = here - At[j, i]
            clipped = 0.0
            if p >= 0:
                flow, clipped, value, term = edge_step(here, Bt[j, p], lam[i], inflow[i], r)
                inflow[p] += flow
                clipped_in[p] += clipped
                edge_gaps[i] = term if j == 0 else edge_gaps[i] + term
                edge_sum, edge_carry = neumaier_add(edge_sum, edge_carry, value)
            Ft[j, i] = clipped
            diff = r + 0.5 * (clipped - clipped_in[i])
            node_gaps[i] = diff * diff if j == 0 else node_gaps[i] + diff * diff
            node_sum, node_carry = neumaier_add(node_sum, node_carry, r * r)
    sums[0] = node_sum + node_carry
    sums[1] = edge_sum + edge_carry


@cache
def compiled():
    """``(forest_order, tv_tree, tree_certificate)`` compiled by numba (imported here: a lazily loaded
    backend)."""
    return njit(forest_order, tv_tree, tree_certificate, purpose="the exact tree solver",
                helpers=(edge_step, neumaier_add))
