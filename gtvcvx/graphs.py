"""Seeded graph generators: stochastic block model, chains, stars, complete and k-NN graphs.

Every random generator takes a ``seed`` (anything :func:`numpy.random.default_rng` accepts),
so that the same call always returns the same graph.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import _jit
from ._graph_kernels import knn_pairs_compiled
from ._validation import MAX_ELEMENTS, allocation_guard, as_float_array, check_memory, check_positive_int
from .graph import Graph, check_graph_memory, graph_nbytes as _graph_bytes

__all__ = ["LabeledGraph", "sbm", "chain", "clustered_chain", "star", "complete", "knn"]


class LabeledGraph(NamedTuple):
    """A graph together with a ground-truth cluster label per node."""

    graph: Graph
    labels: np.ndarray


def _check_probability(p, name: str) -> float:
    p = float(as_float_array(p, name, ndim=0))
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1], got {p}")
    return p


def _check_sizes(sizes, name: str = "sizes") -> np.ndarray:
    arr = np.atleast_1d(np.asarray(sizes))
    if arr.ndim != 1 or arr.size == 0 or arr.dtype.kind not in "iu" or (arr < 1).any():
        raise ValueError(f"{name} must be a non-empty list of positive integers, got {sizes!r}")
    return arr.astype(np.int64)


def _triangular_pairs(index: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Map linear indices of the strict upper triangle (row-major) of a size x size matrix to (i, j)."""
    index = index.astype(np.int64)
    start = lambda i: i * size - (i * (i + 1)) // 2  # noqa: E731  first index of row i
    disc = (2.0 * size - 1.0) ** 2 - 8.0 * index
    i = np.floor(((2.0 * size - 1.0) - np.sqrt(np.maximum(disc, 0.0))) / 2.0).astype(np.int64)
    i = np.clip(i, 0, size - 2)
    for _ in range(2):  # fix floating-point rounding at row boundaries
        i = np.where(start(i + 1) <= index, i + 1, i)
        i = np.where(start(i) > index, i - 1, i)
    j = index - start(i) + i + 1
    return i, j


def _sample_pair_indices(rng: np.random.Generator, n_pairs: int, p: float, what: str = "graphs.sbm") -> np.ndarray:
    """Indices of a Bernoulli(p) subset of ``range(n_pairs)`` (``what`` names the caller in errors)."""
    if n_pairs == 0 or p == 0.0:
        return np.zeros(0, dtype=np.int64)
    if n_pairs <= 4_000_000:
        return np.flatnonzero(rng.random(n_pairs) < p)
    count = int(rng.binomial(n_pairs, p))
    if count > MAX_ELEMENTS // 8:
        raise ValueError(f"the requested graph would have about {count} edges, too many to hold")
    # Generator.choice without replacement shuffles all n_pairs indices when count > n_pairs / 50,
    # else runs Floyd's algorithm with a hash set of about 2.4 count entries; then the sort's copy.
    work = 8.0 * n_pairs if count > n_pairs // 50 else 8.0 * 3.4 * count
    check_memory(work + 8.0 * count, f"{what}: sampling {count} of {n_pairs} node pairs")
    with allocation_guard(f"{what}: sampling {count} of {n_pairs} node pairs"):
        return np.sort(rng.choice(n_pairs, size=count, replace=False))


def _check_path_like(n: int, what: str) -> None:
    """Refuse a graph with ``n`` nodes and ``n - 1`` edges (chain, star) over the memory budget."""
    if n > MAX_ELEMENTS:
        raise ValueError(f"{what}: {n} nodes is more than this package can hold (limit {MAX_ELEMENTS})")
    # the graph plus the two index ranges and their stacked copy (32 bytes per edge)
    check_memory(_graph_bytes(n, n - 1) + 32.0 * (n - 1), f"{what}: a graph with {n} nodes and {n - 1} edges")


def sbm(sizes, p_in: float, p_out: float, seed=None) -> LabeledGraph:
    """Stochastic block model with unit edge weights.

    Parameters
    ----------
    sizes : sequence of int
        Block sizes; nodes ``0..sizes[0]-1`` form block 0, and so on.
    p_in, p_out : float
        Edge probability inside a block and between two blocks.
    seed : int or Generator, optional
        Random seed.

    Returns
    -------
    LabeledGraph
        ``(graph, labels)`` with the block of every node.

    Notes
    -----
    Each block pair is sampled independently: a binomial number of edges drawn without
    replacement from all node pairs, so sparse graphs with 10^5 nodes are cheap.

    References
    ----------
    .. [1] P. W. Holland, K. B. Laskey, S. Leinhardt, "Stochastic blockmodels: First steps",
       Social Networks 5(2), 1983.
    """
    sizes = _check_sizes(sizes)
    p_in = _check_probability(p_in, "p_in")
    p_out = _check_probability(p_out, "p_out")
    # expected edges (the sample exceeds it by a few standard deviations at most), before sampling
    within = float((sizes.astype(float) * (sizes - 1) / 2).sum())
    across = float((float(sizes.sum()) ** 2 - float((sizes.astype(float) ** 2).sum())) / 2)
    expected = within * p_in + across * p_out
    n_total = int(sizes.sum())
    if n_total > MAX_ELEMENTS:
        raise ValueError(f"sizes: {n_total} nodes in all is more than this package can hold (limit {MAX_ELEMENTS})")
    check_graph_memory(n_total, expected + 6.0 * np.sqrt(expected),
                       f"graphs.sbm(sizes with {n_total} nodes, p_in={p_in:g}, p_out={p_out:g})")
    rng = np.random.default_rng(seed)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    parts = []
    for a, size_a in enumerate(sizes):
        idx = _sample_pair_indices(rng, int(size_a * (size_a - 1) // 2), p_in)
        i, j = _triangular_pairs(idx, int(size_a))
        parts.append(np.column_stack([i, j]) + offsets[a])
        for b in range(a + 1, len(sizes)):
            idx = _sample_pair_indices(rng, int(size_a * sizes[b]), p_out)
            i, j = np.divmod(idx, sizes[b])
            parts.append(np.column_stack([i + offsets[a], j + offsets[b]]))
    edges = np.concatenate(parts) if parts else np.zeros((0, 2), dtype=np.int64)
    labels = np.repeat(np.arange(len(sizes)), sizes)
    return LabeledGraph(Graph.from_edges(int(offsets[-1]), edges), labels)


def chain(n: int, weights=1.0) -> Graph:
    """Path graph ``0 - 1 - ... - (n-1)``; ``weights`` is a scalar or one weight per edge."""
    n = check_positive_int(n, "n")
    _check_path_like(n, f"graphs.chain(n={n})")
    edges = np.column_stack([np.arange(n - 1), np.arange(1, n)])
    return Graph.from_edges(n, edges, weights)


def clustered_chain(sizes, bridge_weight: float, weight: float = 1.0) -> LabeledGraph:
    """A chain made of consecutive clusters; neighbouring clusters meet at one bridge edge.

    Edges inside a cluster have weight ``weight``; each bridge edge between the last node of
    one cluster and the first node of the next has weight ``bridge_weight`` (0 drops the
    bridges, leaving the clusters disconnected). This is the chain setting of Section VI-B of
    SarcheshmehPour et al. (2023).
    """
    sizes = _check_sizes(sizes)
    bridge = float(as_float_array(bridge_weight, "bridge_weight", ndim=0))
    if bridge < 0:
        raise ValueError(f"bridge_weight must be >= 0, got {bridge}")
    n = int(sizes.sum())
    _check_path_like(n, f"graphs.clustered_chain(sizes summing to {n})")
    edges = np.column_stack([np.arange(n - 1), np.arange(1, n)])
    labels = np.repeat(np.arange(sizes.size), sizes)
    is_bridge = labels[:-1] != labels[1:]
    weights = np.where(is_bridge, bridge, float(weight))
    keep = ~is_bridge | (bridge > 0)
    return LabeledGraph(Graph.from_edges(n, edges[keep], weights[keep]), labels)


def star(n: int, weights=1.0) -> Graph:
    """Star graph: node 0 joined to every other node."""
    n = check_positive_int(n, "n")
    _check_path_like(n, f"graphs.star(n={n})")
    edges = np.column_stack([np.zeros(n - 1, dtype=np.int64), np.arange(1, n)])
    return Graph.from_edges(n, edges, weights)


def complete(n: int, weights=1.0) -> Graph:
    """Complete graph on ``n`` nodes (edges in row-major upper-triangle order)."""
    n = check_positive_int(n, "n")
    m = n * (n - 1) // 2
    if m > MAX_ELEMENTS // 4:
        raise ValueError(f"graphs.complete(n={n}): {m} edges is more than this package can hold "
                         f"(at most {MAX_ELEMENTS // 4} edges)")
    # the graph, plus triu_indices' two index arrays and their stacked copy (32 bytes per edge)
    check_memory(_graph_bytes(n, m) + 32.0 * m,
                 f"graphs.complete(n={n}): a complete graph with {m} edges")
    with allocation_guard(f"graphs.complete(n={n}) ({m} edges)"):
        i, j = np.triu_indices(n, k=1)
        edges = np.column_stack([i, j])
        del i, j
    return Graph.from_edges(n, edges, weights)


def knn(points, k: int = 10, *, weights: str = "gaussian", phi: float | None = None) -> Graph:
    """Symmetric k-nearest-neighbour graph (union of the k-NN relations).

    Parameters
    ----------
    points : array_like of shape (n, d)
    k : int
        Number of neighbours per point (capped at ``n - 1``).
    weights : {"gaussian", "uniform"}
        ``"gaussian"`` gives ``A_ij = exp(-phi ||a_i - a_j||^2)``; ``"uniform"`` gives 1.
    phi : float, optional
        Gaussian scale; default ``0.5 / mean feature variance`` of the points, i.e. Chi &
        Lange's ``phi = 0.5`` on standardized data, scale-free and mild enough that weights
        of far-away outliers do not underflow.

    Notes
    -----
    Gaussian k-NN weights are the standard choice for convex clustering [1]_ [2]_.

    References
    ----------
    .. [1] E. C. Chi, K. Lange, "Splitting methods for convex clustering", JCGS 24(4), 2015.
    .. [2] D. Sun, K.-C. Toh, Y. Yuan, "Convex clustering: model, theoretical guarantee and
       efficient algorithm", JMLR 22, 2021.
    """
    pts = as_float_array(points, "points", ndim=2)
    n = pts.shape[0]
    if n == 0:
        raise ValueError("points must contain at least one point")
    k = check_positive_int(k, "k")
    if weights not in ("gaussian", "uniform"):
        raise ValueError(f"weights must be 'gaussian' or 'uniform', got {weights!r}")
    kk = min(k, n - 1)
    if kk == 0:
        return Graph.from_edges(n, np.zeros((0, 2), dtype=np.int64))
    # the k-d tree (a copy of the points), the (n, k+1) distances and neighbours, the pair
    # list with np.unique's sorted copies (about 120 bytes per pair) and the graph itself
    check_memory(16.0 * pts.size + 120.0 * n * (kk + 1) + _graph_bytes(n, n * kk),
                 f"graphs.knn(k={k}) on {n} points of dimension {pts.shape[1]}")
    with allocation_guard(f"graphs.knn(k={k}) on {n} points"):
        return _knn_graph(pts, kk, weights, phi)


def _knn_graph(pts: np.ndarray, kk: int, weights: str, phi) -> Graph:
    from scipy.spatial import cKDTree

    n = pts.shape[0]
    tree = cKDTree(pts)
    # Queried in the tree's own leaf order (neighbouring queries walk the same leaves: 2-3x
    # fewer cache misses on 10^5-10^6 points) on every core; each query's answer, ties
    # included, depends only on the tree and the point, so the graph is the same.
    order = tree.indices
    dist = np.empty((n, kk + 1))
    nbr = np.empty((n, kk + 1), dtype=np.intp)
    dist[order], nbr[order] = tree.query(pts[order], k=kk + 1, workers=-1)
    if nbr.size >= _jit.MIN_ENTRIES:
        pairs, sq = knn_pairs_compiled()(nbr, dist)
    else:
        pairs, sq = _knn_pairs(nbr, dist)
    # (the trusted constructor: distinct in-range pairs i < j, weights checked below)
    if weights == "uniform":
        return Graph._trusted(n, pairs, np.ones(pairs.shape[0]))
    if phi is None:
        spread = float(pts.var(axis=0).mean())
        phi = 0.5 / spread if spread > 0 else 1.0
    phi = float(as_float_array(phi, "phi", ndim=0))
    if phi < 0:
        raise ValueError(f"phi must be >= 0, got {phi}")
    w = np.exp(-phi * sq)
    if (w <= 0).any():
        raise ValueError(
            f"phi = {phi:g} makes some Gaussian weights underflow to 0; use a smaller phi or "
            "standardize the points")
    return Graph._trusted(n, pairs, w)


def _knn_pairs(nbr: np.ndarray, dist: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """NumPy twin of :func:`gtvcvx._graph_kernels.knn_pairs` (same pairs, same distances)."""
    n, kk = nbr.shape[0], nbr.shape[1] - 1
    # Drop each point itself; with duplicate points "self" may not come first.
    own = nbr == np.arange(n)[:, None]
    no_own = ~own.any(axis=1)
    own[no_own, kk] = True
    keep = ~own
    # Each undirected pair once: found from its lower end (i < j) or, if that end did not list the
    # other, from the upper one (the copy np.unique's first occurrence kept, same distances).
    forward = keep & (nbr > np.arange(n)[:, None])
    backward = keep & (nbr < np.arange(n)[:, None])
    rows, cols = np.nonzero(backward)
    listed = np.zeros(rows.size, dtype=bool)
    for start in range(0, rows.size, 1 << 20):  # (row blocks: an (m, k+1) temporary is 88 bytes a pair)
        part = slice(start, start + (1 << 20))
        ends = nbr[rows[part], cols[part]]
        listed[part] = ((nbr[ends] == rows[part, None]) & keep[ends]).any(axis=1)
    backward[rows[listed], cols[listed]] = False
    src = np.broadcast_to(np.arange(n, dtype=np.int64)[:, None], nbr.shape)
    low = np.concatenate([src[forward], nbr[backward].astype(np.int64)])
    high = np.concatenate([nbr[forward].astype(np.int64), src[backward]])
    sq = np.concatenate([dist[forward], dist[backward]]) ** 2
    # in lexicographic order (the keys are distinct: any sort gives it)
    order = np.argsort(low * n + high)
    pairs = np.empty((order.size, 2), dtype=np.int64)
    np.take(low, order, out=pairs[:, 0])
    np.take(high, order, out=pairs[:, 1])
    return pairs, sq[order]
