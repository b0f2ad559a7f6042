r"""Compiled graph kernels: the symmetric pair list of a k-NN relation (:func:`gtvcvx.graphs.knn`),
the lexicographic order of a relabelled graph's edges (:func:`gtvcvx.solvers._reorder.locality_order`)
and connected components by union-find (:meth:`gtvcvx.Graph.edge_components`).

The functions are plain Python; the loaders return them compiled by numba (on first use, cached on
disk when the package directory is writable), so ``import gtvcvx`` does not load numba. Their
callers run them from :data:`gtvcvx._jit.MIN_ENTRIES` entries on and a NumPy / SciPy twin below;
both give the same output (tested). Measured at 10^6 points, k = 10 (7-D blobs, 6.7e6 edges):
pair list 0.9 s threaded on two cores vs 2.4-3.8 s for the twin (the random reads of the
neighbours' rows dominate); components of the 6.7e6 fused edges 0.11 s vs ~1.0 s for SciPy's
(a CSR matrix built, transposed and searched); the edge order of 6.7e6 / 10^7 shuffled pairs on 10^6
nodes 0.40 / 0.63-0.94 s vs 0.94-1.24 / 1.52-2.11 s for the argsort of their keys.

References
----------
.. [1] R. E. Tarjan, J. van Leeuwen, "Worst-case analysis of set union algorithms", J. ACM 31(2),
   1984 (union by index with path halving).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from . import _jit
from ._jit import njit

prange = range  # numba.prange once compiled (gtvcvx._jit.njit)

__all__ = ["knn_pairs_compiled", "pair_order_compiled", "components_compiled"]

#: Segments up to this length are sorted by insertion, longer ones (hubs) by ``np.argsort``.
INSERTION_MAX = 32


def sort_segments(start, keys, carry):
    """Sort each segment ``keys[start[i]:start[i + 1]]`` ascending in place, permuting ``carry``
    alike: by insertion up to :data:`INSERTION_MAX` entries, by ``np.argsort`` beyond (hubs)."""
    for i in range(start.shape[0] - 1):
        first, stop = start[i], start[i + 1]
        if stop - first > INSERTION_MAX:
            order = np.argsort(keys[first:stop]) + first
            keys[first:stop] = keys[order]
            carry[first:stop] = carry[order]
            continue
        for a in range(first + 1, stop):
            key, value = keys[a], carry[a]
            b = a - 1
            while b >= first and keys[b] > key:
                keys[b + 1] = keys[b]
                carry[b + 1] = carry[b]
                b -= 1
            keys[b + 1] = key
            carry[b + 1] = value


def pair_order(low, high, n):
    """The permutation that sorts distinct pairs ``(low[e], high[e])`` (nodes ``< n``)
    lexicographically, i.e. ``np.argsort(low * n + high)``: a counting sort by ``low``, then each
    segment by ``high``. O(m + n) passes instead of a comparison sort of ``m`` keys."""
    m = low.shape[0]
    start = np.zeros(n + 1, np.int64)
    for e in range(m):
        start[low[e] + 1] += 1
    for i in range(n):
        start[i + 1] += start[i]
    fill = start[:n].copy()
    order = np.empty(m, np.int64)
    keys = np.empty(m, np.int64)
    for e in range(m):
        at = fill[low[e]]
        order[at] = e
        keys[at] = high[e]
        fill[low[e]] = at + 1
    sort_segments(start, keys, order)
    return order


def knn_pairs(nbr, dist):
    """The undirected pairs ``i < j`` of the union of k-NN relations, in lexicographic order.

    ``nbr[i]`` / ``dist[i]`` are point ``i``'s ``k + 1`` nearest neighbours and their distances
    (``i`` itself among them, or not when duplicates of ``i`` filled its list). Each row drops
    ``i`` itself, or its last entry when ``i`` is not listed, leaving ``k`` neighbours. A pair is
    kept once, with the distance of the row of its lower end when that row lists it, else of the
    upper end's (the copy :func:`numpy.unique` would keep; both are the same distance).

    Returns ``(pairs, sq)``: ``(m, 2)`` int64 end points and the ``(m,)`` squared distances.
    """
    n, width = nbr.shape
    kept = np.ones((n, width), np.bool_)
    for i in range(n):
        own = width - 1
        for c in range(width):
            if nbr[i, c] == i:
                own = c
                break
        kept[i, own] = False
    # A pair (j, i) with j < i listed by row i only: kept when row j does not list i.
    listed = np.zeros((n, width), np.bool_)
    for i in prange(n):
        for c in range(width):
            j = nbr[i, c]
            if kept[i, c] and j < i:
                for c2 in range(width):
                    if nbr[j, c2] == i and kept[j, c2]:
                        listed[i, c] = True
                        break
    count = np.zeros(n + 1, np.int64)
    for i in range(n):
        for c in range(width):
            if kept[i, c] and listed[i, c]:
                kept[i, c] = False
            elif kept[i, c]:
                j = nbr[i, c]
                count[(i if j > i else j) + 1] += 1
    for i in range(n):
        count[i + 1] += count[i]
    m = count[n]
    high = np.empty(m, np.int64)
    sq = np.empty(m)
    fill = count[:n].copy()
    for i in range(n):
        for c in range(width):
            if kept[i, c]:
                j = nbr[i, c]
                low = i if j > i else j
                at = fill[low]
                high[at] = j if j > i else i
                sq[at] = dist[i, c] * dist[i, c]
                fill[low] = at + 1
    sort_segments(count, high, sq)
    pairs = np.empty((m, 2), np.int64)
    for low in range(n):
        for a in range(count[low], count[low + 1]):
            pairs[a, 0] = low
            pairs[a, 1] = high[a]
    return pairs, sq


def component_labels(n, heads, tails, keep):
    """Connected components of the graph on ``n`` nodes with the edges ``(heads[e], tails[e])``
    for which ``keep[e]``.

    Returns ``(count, labels)``: components numbered in the order of their lowest node (the
    numbering of :func:`scipy.sparse.csgraph.connected_components`), isolated nodes included.
    """
    parent = np.arange(n)
    for e in range(heads.shape[0]):
        if not keep[e]:
            continue
        a = heads[e]
        while parent[a] != a:  # path halving
            parent[a] = parent[parent[a]]
            a = parent[a]
        b = tails[e]
        while parent[b] != b:
            parent[b] = parent[parent[b]]
            b = parent[b]
        if a < b:  # the lower index becomes the root: every root is its component's lowest node
            parent[b] = a
        elif b < a:
            parent[a] = b
    labels = np.empty(n, np.int64)
    count = 0
    for i in range(n):
        # parents have lower indices than their children, so parent[i] (< i) is labelled already
        if parent[i] == i:
            labels[i] = count
            count += 1
        else:
            labels[i] = labels[parent[i]]
    return count, labels


@cache
def _load_knn_pairs(parallel: bool):
    (kernel,) = njit(knn_pairs, purpose="graphs.knn's pair list", parallel=parallel, helpers=(sort_segments,))
    return kernel


def knn_pairs_compiled():
    """:func:`knn_pairs`, compiled: threaded in the main thread (:func:`gtvcvx._jit.parallel_threads`)."""
    return _load_knn_pairs(_jit.parallel_threads() > 1)


@cache
def pair_order_compiled():
    """:func:`pair_order`, compiled."""
    (kernel,) = njit(pair_order, purpose="the lexicographic order of a graph's edges", helpers=(sort_segments,))
    return kernel


@cache
def components_compiled():
    """:func:`component_labels`, compiled."""
    (kernel,) = njit(component_labels, purpose="the connected components of a graph")
    return kernel


def warmed() -> list:
    """Every build of the kernels, each called once with the argument types its callers pass (a
    k-d tree's neighbour arrays, a :class:`~gtvcvx.Graph`'s read-only edge ends), so that numba compiles
    them, or loads them from its on-disk cache, ahead of a measured run."""
    nbr, dist = np.array([[0, 1], [1, 0]], dtype=np.intp), np.ones((2, 2))
    heads, tails = _jit.read_only(np.zeros(1, np.int64)), _jit.read_only(np.ones(1, np.int64))  # (Graph.end_columns)
    kernels = [_load_knn_pairs(False), _load_knn_pairs(True), components_compiled(), pair_order_compiled()]
    for kernel in kernels[:2]:
        kernel(nbr, dist)
    kernels[2](2, heads, tails, np.ones(1, dtype=bool))
    kernels[3](np.zeros(1, np.int64), np.ones(1, np.int64), 2)
    return kernels
