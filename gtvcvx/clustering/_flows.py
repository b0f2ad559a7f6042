"""Flow utilities on spanning forests: exact routing of a divergence, subtree cuts.

A flow on the edges of a forest is determined by its divergence: the flow on the edge from a
node ``c`` to its parent is the total divergence of the subtree rooted at ``c``. Subtree sums
are one sparse unit-triangular solve in depth-first preorder (a parent precedes its children),
so routing is vectorized and exact up to rounding.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import depth_first_order, minimum_spanning_tree
from scipy.sparse.linalg import spsolve_triangular

from ..graph import Graph

__all__ = ["ForestRouter", "max_spanning_forest", "component_means"]


def component_means(labels: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Mean of ``points`` over every label, returned per row (shape of ``points``)."""
    count = np.bincount(labels)
    sums = np.zeros((count.size, points.shape[1]))
    np.add.at(sums, labels, points)
    return (sums / np.maximum(count, 1)[:, None])[labels]


def max_spanning_forest(graph: Graph, edge_mask: np.ndarray | None = None) -> np.ndarray:
    """Indices of the edges of a maximum-weight spanning forest (of the edges in ``edge_mask``).

    Heavy edges carry routed flow at low congestion ``||u_e|| / A_e``, and a maximum spanning
    tree maximizes the lightest edge on every tree path (a bottleneck path), so routing on it
    keeps corrections cheap even when the weights span many orders of magnitude.
    """
    idx = np.arange(graph.n_edges) if edge_mask is None else np.flatnonzero(edge_mask)
    if idx.size == 0:
        return idx
    # ranks 1..m (heaviest first): order-reversing, positive, exact (no float ties with 0)
    rank = np.empty(idx.size)
    rank[np.argsort(-graph.weights[idx], kind="stable")] = np.arange(1, idx.size + 1)
    E = graph.edges[idx]
    M = sp.csr_matrix((rank, (E[:, 0], E[:, 1])), shape=(graph.n, graph.n))
    T = minimum_spanning_tree(M).tocoo()
    pos_of_rank = np.empty(idx.size, dtype=np.int64)
    pos_of_rank[(rank - 1).astype(np.int64)] = np.arange(idx.size)
    return np.sort(idx[pos_of_rank[(T.data - 1).astype(np.int64)]])


class ForestRouter:
    """Route any divergence exactly on a spanning forest of a graph.

    Parameters
    ----------
    graph : Graph
    tree_edges : ndarray of int
        Indices (into ``graph.edges``) of the edges of a forest.

    Notes
    -----
    Nodes are ordered by a depth-first preorder from a virtual root joined to one node of every
    tree; with ``P`` the child-to-parent incidence in that order, subtree sums solve the unit
    upper-triangular system ``(I - P) S = r``. For the edge between ``c`` and its parent the
    flow (oriented as in ``graph``) is ``+S_c`` if ``c`` is the lower index, else ``-S_c``.
    """

    def __init__(self, graph: Graph, tree_edges: np.ndarray):
        n = graph.n
        self.graph = graph
        self.tree_edges = np.asarray(tree_edges, dtype=np.int64)
        E = graph.edges[self.tree_edges]
        # forest components, one representative each, joined to the virtual root n
        _, comp = graph.edge_components(self.tree_edges)
        reps = np.unique(comp, return_index=True)[1]
        rows = np.concatenate([E[:, 0], np.full(reps.size, n)])
        cols = np.concatenate([E[:, 1], reps])
        full = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n + 1, n + 1))
        order, pred = depth_first_order(full, n, directed=False, return_predecessors=True)
        order = order[1:]  # drop the virtual root
        pred = pred[:n]
        pos = np.empty(n, dtype=np.int64)
        pos[order] = np.arange(n)
        child = np.flatnonzero(pred < n)
        parent = pred[child]
        self.order, self.pos = order, pos
        self.M = (sp.eye(n, format="csr")
                  - sp.csr_matrix((np.ones(child.size), (pos[parent], pos[child])), shape=(n, n))).tocsr()
        # graph edge of every (child, parent) pair
        lo, hi = np.minimum(child, parent), np.maximum(child, parent)
        key_tree = lo * n + hi
        key_edges = E[:, 0] * n + E[:, 1]
        srt = np.argsort(key_edges)
        self.child = child
        self.child_edge = self.tree_edges[srt[np.searchsorted(key_edges[srt], key_tree)]]
        self.child_sign = np.where(child < parent, 1.0, -1.0)
        self._sizes = None

    def subtree_sums(self, r: np.ndarray) -> np.ndarray:
        """``S_c = sum of r over the subtree rooted at c`` (same shape as ``r``)."""
        r = np.asarray(r, dtype=float)
        rhs = r[self.order]
        S = spsolve_triangular(self.M, rhs if rhs.ndim == 2 else rhs[:, None], lower=False,
                               unit_diagonal=True)
        S = np.asarray(S).reshape(rhs.shape[0], -1)
        out = np.empty_like(S)
        out[self.order] = S
        return out if r.ndim == 2 else out[:, 0]

    def route(self, r: np.ndarray) -> np.ndarray:
        """The unique forest flow ``F`` (|E| x d, zero off the forest) with ``D^T F = r``.

        ``r`` must sum to zero over every tree of the forest (otherwise the root absorbs the rest).
        """
        r = np.asarray(r, dtype=float)
        S = self.subtree_sums(r)
        F = np.zeros((self.graph.n_edges, r.shape[1]))
        F[self.child_edge] = self.child_sign[:, None] * S[self.child]
        return F

    @property
    def sizes(self) -> np.ndarray:
        """Number of nodes in every subtree."""
        if self._sizes is None:
            self._sizes = np.rint(self.subtree_sums(np.ones(self.graph.n))).astype(np.int64)
        return self._sizes

    def subtree_mask(self, node: int) -> np.ndarray:
        """Boolean mask of the subtree rooted at ``node`` (a contiguous block of the preorder)."""
        start = self.pos[node]
        mask = np.zeros(self.graph.n, dtype=bool)
        mask[self.order[start:start + self.sizes[node]]] = True
        return mask

    def edge_child(self, edge: int) -> int:
        """The child end point of a forest edge."""
        where = np.flatnonzero(self.child_edge == edge)
        if where.size == 0:
            raise ValueError(f"edge {edge} is not a forest edge")
        return int(self.child[where[0]])
