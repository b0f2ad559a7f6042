r"""A node order with memory locality for the fast core on large graphs.

Every iteration of the core gathers the rows ``x_i - x_j`` of all edges and scatters the flows
back onto their end points. When the node rows no longer fit in the caches (``n d`` doubles
beyond a few MB) and the end points of consecutive edges are far apart in memory, each edge
costs a cache miss on each end: on 10^6 points in 7-D with their 10-NN graph (6.7 * 10^6
edges) the gather and the scatter take 0.2 s and 0.3 s of a 0.93 s iteration, while the same
graph relabelled by reverse Cuthill-McKee (scipy.sparse.csgraph; mean end-point distance
66,641 -> 13,069) runs at 0.54-0.61 s per iteration (measured in one run, alternating).

:func:`locality_order` decides and builds the relabelled problem; :class:`NodeOrder` maps
warm starts in and results, callbacks and certificates out. The relabelled problem is the same
problem (node ``i`` becomes ``position[i]``, edges sorted by their new end points; an edge whose
orientation flips carries the negated flow), so certificates computed on it are certificates
of the caller's problem.

Where no relabelling gains locality (random graphs, e.g. stochastic block models), only the edges
are reordered (:func:`edge_block_order`): sorted by the block of their second end point, then by
their first. Within a block the second end points' rows (a few MB, :data:`BLOCK_BYTES`) stay in
the caches and the first end points are read in increasing order. Measured on this 2-core
machine, compiled kernels on two threads, medians of five alternating calls, gather / scatter:
10^7 random edges on 10^6 nodes, d = 10: 0.51 / 0.88 -> 0.23 / 0.32 s; d = 7: 0.49 / 0.72 ->
0.17 / 0.24 s; d = 3: 0.30 / 0.48 -> 0.08 / 0.12 s; 10^7 SBM edges (``gtvcvx bench gtv``), d = 10,
inside the solve (25 iterations, same process, three alternating pairs): 0.61-0.69 / 0.94-0.98 ->
0.34-0.37 / 0.43-0.46 s.

References
----------
.. [1] E. Cuthill, J. McKee, "Reducing the bandwidth of sparse symmetric matrices", Proc. 24th
   ACM National Conference, 1969.
.. [2] A. George, J. W. H. Liu, "Computer Solution of Large Sparse Positive Definite Systems",
   Prentice-Hall, 1981 (the reverse ordering).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from .. import _jit
from .._graph_kernels import pair_order_compiled
from ..graph import Graph
from ..problem import GTVProblem

__all__ = ["BLOCK_BYTES", "MIN_FLOW_ENTRIES", "MIN_NODE_BYTES", "MIN_SPAN_GAIN", "NodeOrder", "edge_block_order",
           "locality_order"]

#: Relabel only problems with at least this many flow entries ``|E| d`` (a few iterations pay
#: for the ordering: ~3 s for the ordering and the relabelled copy at 6.7 * 10^6 edges, where
#: an iteration saves ~0.35 s) ...
MIN_FLOW_ENTRIES = 1 << 22
#: ... whose node rows ``n d`` doubles do not fit in this machine class's last-level cache ...
MIN_NODE_BYTES = 16 << 20
#: ... and where the mean distance between an edge's end points falls at least this much.
MIN_SPAN_GAIN = 2.0
#: The node rows of one block of second end points in :func:`edge_block_order` (the block has the
#: power of two of nodes nearest to it). Measured (see above): the best of the sizes tried for
#: d = 7 and 10 (1.3-10 MB), within 20 % of it for d = 3; for d = 50 (2 * 10^5 nodes) 6.5 MB blocks
#: were 1.6x faster than the 1.6 MB this picks, which is still 1.2-1.6x faster than no blocks.
BLOCK_BYTES = 2 << 20


@dataclass(frozen=True)
class NodeOrder:
    """A relabelled copy of a problem and the maps between its arrays and the caller's.

    Attributes
    ----------
    problem : GTVProblem
        The relabelled problem: its node ``k`` is the caller's node ``order[k]``, its edge ``k``
        the caller's edge ``edge_order[k]``, oriented ``sign[k]`` times the caller's.
    order, position : (n,) int arrays
        New to old and old to new node labels (inverse permutations).
    edge_order : (m,) int array
    sign : (m, 1) float array of +-1, or None
        None: no edge changes orientation.
    kind : str
        How the order was made: ``"reverse_cuthill_mckee"`` (:func:`locality_order`) or
        ``"edge_blocks"`` (:func:`edge_block_order`: the nodes keep their labels).
    """

    problem: GTVProblem
    order: np.ndarray
    position: np.ndarray
    edge_order: np.ndarray
    sign: np.ndarray | None
    kind: str = "reverse_cuthill_mckee"

    def nodes_in(self, W: np.ndarray) -> np.ndarray:
        """Caller's node rows -> relabelled."""
        return W[self.order]

    def nodes_out(self, W: np.ndarray) -> np.ndarray:
        """Relabelled node rows (or per-node values) -> the caller's order."""
        return W[self.position]

    def flows_in(self, U: np.ndarray) -> np.ndarray:
        """Caller's flows -> relabelled (re-ordered, re-oriented)."""
        moved = U[self.edge_order]
        if self.sign is not None:
            moved *= self.sign
        return moved

    @cached_property
    def edge_position(self) -> np.ndarray:
        """Old to new edge labels (the inverse permutation of ``edge_order``)."""
        position = np.empty(self.edge_order.size, dtype=np.int64)
        position[self.edge_order] = np.arange(self.edge_order.size)
        return position

    def flows_out(self, U: np.ndarray) -> np.ndarray:
        """Relabelled flows -> the caller's edges and orientation (a gather by the inverse order: 3x
        faster than the scatter by ``edge_order`` at 6.7e6 x 7 flows, the same values)."""
        out = np.take(U, self.edge_position, axis=0)
        if self.sign is not None:
            out *= self.sign[self.edge_position]
        return out

    def edges_out(self, values: np.ndarray) -> np.ndarray:
        """Relabelled per-edge values (orientation-free, e.g. edge gaps) -> the caller's order."""
        return np.take(values, self.edge_position, axis=0)

    def warm_start_in(self, W: np.ndarray | None, U: np.ndarray | None) -> dict:
        """Validated warm-start parts (see ``warm_start_parts``; None: absent) relabelled."""
        return {"W": None if W is None else self.nodes_in(W), "U": None if U is None else self.flows_in(U)}

    def certificate_out(self, certificate):
        """A certificate of the relabelled problem as one of the caller's (same numbers)."""
        return dataclasses.replace(certificate, node_gaps=self.nodes_out(certificate.node_gaps),
                                   edge_gaps=self.edges_out(certificate.edge_gaps),
                                   U=self.flows_out(certificate.U))


def _column_major_edges(m: int) -> np.ndarray:
    """An empty ``(m, 2)`` int64 edge array stored column by column: the reordered graph's
    :attr:`~gtvcvx.graph.Graph.end_columns`, which the compiled sweeps read, are then views of it
    rather than copies (0.15 GiB at 10^7 edges)."""
    return np.empty((2, m), dtype=np.int64).T


def _span(edges: np.ndarray) -> float:
    return float(np.abs(edges[:, 1] - edges[:, 0]).mean())


def locality_order(problem: GTVProblem, force: bool = False) -> NodeOrder | None:
    """A relabelling of ``problem`` by reverse Cuthill-McKee, or ``None`` where it does not pay.

    Parameters
    ----------
    problem : GTVProblem
    force : bool
        Relabel regardless of size (tests), unless the graph has no edges.

    Notes
    -----
    Applied when ``|E| d >= MIN_FLOW_ENTRIES``, ``8 n d >= MIN_NODE_BYTES`` and the mean
    end-point distance ``mean_e |i - j|`` falls by ``MIN_SPAN_GAIN`` or more. The ordering is
    :func:`scipy.sparse.csgraph.reverse_cuthill_mckee` on the adjacency pattern: O(|E|) and
    deterministic, so solves stay reproducible.
    """
    graph = problem.graph
    n, m, d = problem.n, problem.n_edges, problem.d
    if m == 0 or (not force and (m * d < MIN_FLOW_ENTRIES or 8 * n * d < MIN_NODE_BYTES)):
        return None
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    i, j = graph.edges[:, 0], graph.edges[:, 1]
    # (32-bit indices where they fit: scipy would make the same copy, after the 64-bit one)
    index = np.int32 if n <= np.iinfo(np.int32).max else np.int64
    rows, cols = np.concatenate([i, j]).astype(index), np.concatenate([j, i]).astype(index)
    pattern = sp.coo_matrix((np.ones(2 * m, dtype=np.int8), (rows, cols)), shape=(n, n)).tocsr()
    del rows, cols
    order = reverse_cuthill_mckee(pattern, symmetric_mode=True).astype(np.int64)
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    head, tail = position[i], position[j]
    low, high = np.minimum(head, tail), np.maximum(head, tail)
    if not force and _span(graph.edges) < MIN_SPAN_GAIN * float((high - low).mean()):
        return None
    # the keys are distinct (no duplicate edges), so any sort gives this order
    if m >= _jit.MIN_ENTRIES:
        edge_order = pair_order_compiled()(low, high, n)
    else:
        edge_order = np.argsort(low * n + high)
    sign = np.where((head < tail)[edge_order], 1.0, -1.0)[:, None]
    relabelled = _column_major_edges(m)
    np.take(low, edge_order, out=relabelled[:, 0])
    np.take(high, edge_order, out=relabelled[:, 1])
    # the trusted constructor: a permutation of a valid graph's edges is a valid graph
    new_graph = Graph._trusted(n, relabelled, graph.weights[edge_order])
    new_problem = GTVProblem(new_graph, problem.loss.subset(order), problem.penalty, problem.lam)
    return NodeOrder(new_problem, order, position, edge_order, sign)


def edge_block_order(problem: GTVProblem, force: bool = False, block: int | None = None) -> NodeOrder | None:
    """The problem with its edges sorted for cache reuse (node labels kept), or ``None``.

    Parameters
    ----------
    problem : GTVProblem
    force : bool
        Reorder regardless of size (tests), unless the graph has no edges or is in this order.
    block : int, optional
        Nodes per block (default: from :data:`BLOCK_BYTES`).

    Notes
    -----
    Edge ``e = (i, j)`` gets the key ``(floor(j / B), i)`` with ``B`` the power of two nearest to
    ``BLOCK_BYTES / (8 d)`` nodes; the edges are sorted by it (stable, so deterministic), their
    orientation kept. Applied when ``|E| d >= MIN_FLOW_ENTRIES`` and ``8 n d >= MIN_NODE_BYTES``
    and the node rows span at least two blocks (:func:`locality_order` is tried first).
    """
    graph = problem.graph
    n, m, d = problem.n, problem.n_edges, problem.d
    if m == 0 or (not force and (m * d < MIN_FLOW_ENTRIES or 8 * n * d < MIN_NODE_BYTES)):
        return None
    block = 1 << max(0, round(math.log2(BLOCK_BYTES / (8.0 * d)))) if block is None else int(block)
    if not force and n < 2 * block:
        return None
    key = (graph.edges[:, 1] // block) * n + graph.edges[:, 0]
    if (key[1:] >= key[:-1]).all():
        return None  # already in this order
    edge_order = np.argsort(key, kind="stable")
    del key
    reordered = _column_major_edges(m)
    for k in (0, 1):
        np.take(graph.edges[:, k], edge_order, out=reordered[:, k])
    new_graph = Graph._trusted(n, reordered, graph.weights[edge_order])
    identity = np.arange(n)
    return NodeOrder(GTVProblem(new_graph, problem.loss, problem.penalty, problem.lam), identity, identity,
                     edge_order, None, kind="edge_blocks")
