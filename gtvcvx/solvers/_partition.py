"""Graph partitioning for the distributed solver: METIS parts and the halo layout of each part.

A part owns a set of nodes. It keeps every edge with an end point among them (so the
divergence ``(D^T U)_i`` of an owned node is complete locally); an edge between two parts (a
*cut* edge) is kept by both and computed identically on both sides, and *counted* (reductions,
results) by the part of its lower end point. Per iteration a part needs the values of the
other end points of its cut edges (its *halo*), which the parts that own them send.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import reverse_cuthill_mckee

from ..graph import Graph

__all__ = ["PartLayout", "partition_graph", "part_layouts"]


def partition_graph(graph: Graph, n_parts: int, *, seed: int = 0) -> tuple[np.ndarray, str]:
    """Assign every node to one of ``n_parts`` balanced parts with few cut edges.

    Parameters
    ----------
    graph : Graph
    n_parts : int
        Number of parts (``1 <= n_parts <= graph.n``).
    seed : int
        Seed of METIS's randomized coarsening (runs are reproducible).

    Returns
    -------
    labels : ndarray of int (n,)
        Part of every node; every part is non-empty.
    method : str
        ``"metis"``, or ``"rcm-blocks"`` when pymetis is not installed (contiguous blocks of
        the reverse Cuthill-McKee order, with a warning: more cut edges than METIS).

    Notes
    -----
    METIS balances node weights ``1 + deg_i`` (the work of a node is its prox plus its
    edges) and minimizes the number of cut edges, i.e. the halo exchanged per iteration.

    References
    ----------
    .. [1] G. Karypis, V. Kumar, "A fast and high quality multilevel scheme for partitioning
       irregular graphs", SIAM J. Sci. Comput. 20(1), 1998.
    """
    n = graph.n
    if not 1 <= n_parts <= n:
        raise ValueError(f"n_parts must be between 1 and the number of nodes ({n}), got {n_parts}")
    if n_parts == 1:
        return np.zeros(n, dtype=np.int64), "single"
    adjacency = _adjacency(graph)
    node_weight = 1 + graph.degree
    try:
        import pymetis
    except ImportError:
        warnings.warn("pymetis is not installed (pip install pymetis, or gtvcvx[distributed]): partitioning by "
                      "blocks of the reverse Cuthill-McKee order, which cuts more edges than METIS",
                      RuntimeWarning, stacklevel=3)
        return _rcm_blocks(adjacency, node_weight, n_parts), "rcm-blocks"
    options = pymetis.Options(seed=int(seed))
    csr = (pymetis.CSRAdjacency(adjacency.indptr, adjacency.indices) if hasattr(pymetis, "CSRAdjacency")
           else None)  # pymetis < 2025: xadj / adjncy
    if csr is not None:
        _, membership = pymetis.part_graph(n_parts, adjacency=csr, vweights=node_weight, options=options)
    else:
        _, membership = pymetis.part_graph(n_parts, xadj=adjacency.indptr, adjncy=adjacency.indices,
                                           vweights=node_weight, options=options)
    labels = np.asarray(membership, dtype=np.int64)
    if np.bincount(labels, minlength=n_parts).min() == 0:  # METIS may leave a part empty on tiny graphs
        return _rcm_blocks(adjacency, node_weight, n_parts), "rcm-blocks"
    return labels, "metis"


def _adjacency(graph: Graph) -> sp.csr_matrix:
    e = graph.edges
    rows = np.concatenate([e[:, 0], e[:, 1]])
    cols = np.concatenate([e[:, 1], e[:, 0]])
    return sp.csr_matrix((np.ones(rows.size, dtype=np.int8), (rows, cols)), shape=(graph.n, graph.n))


def _rcm_blocks(adjacency: sp.csr_matrix, node_weight: np.ndarray, n_parts: int) -> np.ndarray:
    order = reverse_cuthill_mckee(adjacency, symmetric_mode=True)
    cumulative = np.cumsum(node_weight[order])
    block = np.minimum((cumulative * n_parts - 1) // cumulative[-1], n_parts - 1).astype(np.int64)
    if np.bincount(block, minlength=n_parts).min() == 0:  # a heavy node swallowed a part: equal counts
        block = np.arange(order.size, dtype=np.int64) * n_parts // order.size
    labels = np.empty(order.size, dtype=np.int64)
    labels[order] = block
    return labels


@dataclass
class PartLayout:
    """What one part holds of the graph (all indices global unless named ``*_pos``).

    Attributes
    ----------
    index : int
        The part's number.
    own_nodes : ndarray (n_own,)
        Its nodes, sorted.
    ext_nodes : ndarray (n_ext,)
        Its nodes and its halo, sorted (local node numbering follows the global order, so
        sparse products sum in the same order as the single-process solver's).
    own_pos : ndarray (n_own,)
        Positions of ``own_nodes`` in ``ext_nodes``.
    edge_ids : ndarray (n_edges_local,)
        Global ids of its edges (sorted): every edge with an end point among its nodes.
    edge_ends : ndarray (n_edges_local, 2)
        End points of those edges as positions in ``ext_nodes``.
    counted : ndarray of bool (n_edges_local,)
        The edges this part counts (its internal edges, and the cut edges whose lower end
        point it owns).
    weights : ndarray (n_edges_local,)
        Edge weights ``A_e``.
    degree : ndarray (n_own,)
        Degrees of its nodes.
    send : dict
        ``{part q: positions in own_nodes}`` of the values part ``q`` needs (sorted by node).
    receive : dict
        ``{part q: positions in ext_nodes}`` where the values from part ``q`` go.
    """

    index: int
    own_nodes: np.ndarray
    ext_nodes: np.ndarray
    own_pos: np.ndarray
    edge_ids: np.ndarray
    edge_ends: np.ndarray
    counted: np.ndarray
    weights: np.ndarray
    degree: np.ndarray
    send: dict = field(default_factory=dict)
    receive: dict = field(default_factory=dict)

    @property
    def halo_size(self) -> int:
        """Nodes of other parts whose values this part receives each exchange."""
        return int(sum(v.size for v in self.receive.values()))


def part_layouts(graph: Graph, labels: np.ndarray) -> list[PartLayout]:
    """The :class:`PartLayout` of every part of ``labels`` (vectorized over nodes and edges;
    a loop over parts only)."""
    labels = np.asarray(labels, dtype=np.int64)
    n_parts = int(labels.max()) + 1
    edges = graph.edges
    lab = labels[edges]  # (|E|, 2)
    degree = graph.degree
    layouts = []
    for p in range(n_parts):
        own = np.flatnonzero(labels == p)
        touches = (lab == p).any(axis=1)
        edge_ids = np.flatnonzero(touches)
        ends = edges[edge_ids]
        ext = np.union1d(own, ends.reshape(-1))
        halo = np.setdiff1d(ext, own, assume_unique=True)
        layouts.append(PartLayout(
            index=p, own_nodes=own, ext_nodes=ext, own_pos=np.searchsorted(ext, own),
            edge_ids=edge_ids, edge_ends=np.searchsorted(ext, ends),
            counted=lab[edge_ids, 0] == p, weights=graph.weights[edge_ids], degree=degree[own],
            receive={}, send={}))
        for q in np.unique(labels[halo]):
            from_q = halo[labels[halo] == q]
            layouts[p].receive[int(q)] = np.searchsorted(ext, from_q)
    # what p sends q is exactly what q receives from p, in the same (sorted) node order
    for q, layout in enumerate(layouts):
        for p, positions in layout.receive.items():
            nodes = layout.ext_nodes[positions]
            layouts[p].send[q] = np.searchsorted(layouts[p].own_nodes, nodes)
    return layouts
