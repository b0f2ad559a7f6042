"""Weighted undirected graphs with a validated edge list and a sparse incidence matrix."""

from __future__ import annotations

from array import array
from functools import cached_property
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from . import _jit
from ._graph_kernels import components_compiled
from ._validation import (MAX_ELEMENTS, ResourceLimitError, allocation_guard, as_float_array, as_index_array,
                          check_memory, check_positive_int)

__all__ = ["Graph"]

#: Estimated peak bytes per node of a graph: degree and weighted-degree arrays, the
#: component labels and the adjacency matrix behind them, with their temporaries.
_NODE_BYTES = 48
#: Estimated peak bytes per edge: the edge list (16) and weights (8), the CSR incidence matrix
#: (about 40 with its index arrays) and the temporaries of validation and construction.
_EDGE_BYTES = 96
#: Bytes per row held while reading an edge list CSV (three float64 columns and a line number).
_ROW_BYTES = 32
#: Rows between two memory checks while reading a CSV.
_CHECK_ROWS = 1 << 16
#: Longest line accepted in an edge list CSV (characters).
_MAX_LINE = 4096


def graph_nbytes(n, n_edges) -> float:
    """Estimated peak bytes of a graph with ``n`` nodes and ``n_edges`` edges.

    Covers the edge list, the weights, the incidence matrix and the per-node arrays
    (degrees, components) with the temporaries of building them.
    """
    return float(_NODE_BYTES) * float(n) + float(_EDGE_BYTES) * float(n_edges)


def check_graph_memory(n, n_edges, what: str, *, detail: bool = True) -> None:
    """Refuse (``ResourceLimitError``) a graph that would not fit in the memory budget.

    Parameters
    ----------
    n, n_edges : int or float
        Nodes and (expected) edges of the graph.
    what : str
        Who builds it, for the message (e.g. ``"graphs.complete(n=30000)"``).
    detail : bool
        Append ``n`` and the edge count to ``what``.
    """
    if detail:
        what = f"{what}: a graph with n = {int(n)} nodes and {int(n_edges)} edges"
    check_memory(graph_nbytes(n, n_edges), what)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _edge_problem(n: int, edges: np.ndarray):
    """The first invalid edge of an int64 (m, 2) array, or None.

    Returns ``(kind, e, other)``: kind ``"range"`` (index outside ``[0, n)``), ``"loop"``
    or ``"duplicate"`` (edge ``e`` repeats the undirected edge ``other < e``).
    """
    bad = np.flatnonzero(((edges < 0) | (edges >= n)).any(axis=1))
    if bad.size:
        return "range", int(bad[0]), None
    loops = np.flatnonzero(edges[:, 0] == edges[:, 1])
    if loops.size:
        return "loop", int(loops[0]), None
    if edges.shape[0] > 1:
        keys = edges.min(axis=1) * n + edges.max(axis=1)
        order = np.argsort(keys, kind="stable")
        dup = np.flatnonzero(keys[order][1:] == keys[order][:-1])
        if dup.size:
            first, second = sorted((int(order[dup[0]]), int(order[dup[0] + 1])))
            return "duplicate", second, first
    return None


def _edge_weights(weights, n_edges: int) -> np.ndarray:
    if weights is None:
        return np.ones(n_edges)
    if np.ndim(weights) == 0:
        return np.full(n_edges, float(as_float_array(weights, "weights", finite=False)))
    w = as_float_array(weights, "weights", ndim=1, finite=False, copy=True)
    if w.shape[0] != n_edges:
        raise ValueError(f"weights must have one entry per edge ({n_edges}), got {w.shape[0]}")
    return w


class Graph:
    """An undirected graph with positive edge weights.

    Build one with ``Graph(n, edges, weights=None)`` or :meth:`Graph.from_edges` (the same
    validation: node indices in range, no self-loops or duplicate edges, weights finite and
    > 0) or a generator in :mod:`gtvcvx.graphs`. Edges keep the order they were given in, each oriented so that
    ``edges[e, 0] < edges[e, 1]``.

    Attributes
    ----------
    n : int
        Number of nodes.
    edges : ndarray of shape (n_edges, 2), int64
        Edge end points with ``edges[e, 0] < edges[e, 1]`` (read-only).
    weights : ndarray of shape (n_edges,)
        Edge weights ``A_e > 0`` (read-only).

    Notes
    -----
    The incidence matrix ``D`` has one row per edge ``e = {i, j}``, ``i < j``, with ``+1`` in
    column ``i`` and ``-1`` in column ``j``, so that ``(D W)_e = w_i - w_j``.
    """

    __slots__ = ("n", "edges", "weights", "__dict__")

    def __init__(self, n: int, edges, weights=None):
        # the public constructor validates as from_edges does (an edge to node 7 of a 3-node graph was accepted
        # and crashed the interpreter in a compiled kernel); the package's own graphs use _trusted
        valid = type(self).from_edges(n, edges, weights)
        self._set(valid.n, valid.edges, valid.weights)

    @classmethod
    def _trusted(cls, n: int, edges: np.ndarray, weights: np.ndarray) -> "Graph":
        """A graph of already validated, oriented int64 edges and float weights (no checks)."""
        graph = cls.__new__(cls)
        graph._set(n, edges, weights)
        return graph

    def _set(self, n: int, edges: np.ndarray, weights: np.ndarray) -> None:
        self.n = int(n)
        self.edges = edges
        self.weights = weights
        self.edges.flags.writeable = False
        self.weights.flags.writeable = False

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_edges(cls, n, edges, weights=None) -> "Graph":
        """Validate an edge list and build a graph.

        Parameters
        ----------
        n : int
            Number of nodes (>= 1). Nodes are ``0, ..., n-1``; nodes without edges are allowed.
        edges : array_like of shape (n_edges, 2)
            Integer end points. Each undirected edge may appear once, in either orientation.
        weights : array_like of shape (n_edges,) or float, optional
            Positive finite edge weights; default 1.

        Raises
        ------
        ValueError
            Naming the first offending edge: index out of range, self-loop, duplicate
            undirected edge, or a weight that is not finite and > 0.
        ResourceLimitError
            When the graph (with its incidence matrix) would not fit in the memory budget
            (:func:`gtvcvx._validation.memory_budget`); checked before anything is allocated.
        """
        n = check_positive_int(n, "n")
        if n > MAX_ELEMENTS:  # refuse before any per-node array is allocated
            raise ValueError(f"n = {n} nodes is more than this package can hold (limit {MAX_ELEMENTS})")
        check_graph_memory(n, 0, f"Graph.from_edges: a graph with n = {n} nodes", detail=False)
        raw = np.asarray(edges) if not isinstance(edges, np.ndarray) else edges
        if raw.size == 0:
            raw = np.zeros((0, 2), dtype=np.int64)
        if raw.ndim == 2:  # before the int64 copy and the validation temporaries
            check_graph_memory(n, raw.shape[0], "Graph.from_edges")
        edges_arr = as_index_array(raw, "edges")
        if edges_arr.ndim != 2 or edges_arr.shape[1] != 2:
            raise ValueError(f"edges must have shape (n_edges, 2), got {edges_arr.shape}")
        n_edges = edges_arr.shape[0]
        if n_edges > MAX_ELEMENTS // 4:
            raise ValueError(f"edges: {n_edges} edges is more than this package can hold")

        with allocation_guard(f"Graph.from_edges (n = {n} nodes, {n_edges} edges)"):
            problem = _edge_problem(n, edges_arr)
            if problem is not None:
                kind, e, other = problem
                i, j = (int(v) for v in edges_arr[e])
                if kind == "range":
                    raise ValueError(f"edge {e} = ({i}, {j}) has a node index out of range; "
                                     f"nodes must be in [0, {n})")
                if kind == "loop":
                    raise ValueError(f"edge {e} = ({i}, {j}) is a self-loop")
                i, j = sorted((i, j))
                raise ValueError(f"edges {other} and {e} both connect nodes {i} and {j} "
                                 "(duplicate undirected edge)")
            oriented = np.sort(edges_arr, axis=1)
            w = _edge_weights(weights, n_edges)
            badw = np.flatnonzero(~(np.isfinite(w) & (w > 0)))
            if badw.size:
                e = int(badw[0])
                raise ValueError(
                    f"weights[{e}] = {float(w[e])!r} for edge ({oriented[e, 0]}, {oriented[e, 1]}) "
                    "must be finite and > 0 (drop the edge instead of giving it weight 0)")
            return cls._trusted(n, np.ascontiguousarray(oriented, dtype=np.int64), np.ascontiguousarray(w))

    @classmethod
    def from_scipy_sparse(cls, adjacency) -> "Graph":
        """Build a graph from a symmetric weighted adjacency matrix (SciPy sparse or dense).

        Parameters
        ----------
        adjacency : scipy.sparse matrix or array, or array_like of shape (n, n)
            ``A[i, j] = A[j, i] > 0`` is the weight of edge ``{i, j}``; zeros (stored or not)
            are absent edges. The diagonal must be zero.

        Raises
        ------
        ValueError
            When the matrix is not square, not real, not symmetric (naming an entry), has a
            nonzero diagonal entry, or a weight that is not finite and > 0.

        Examples
        --------
        >>> import scipy.sparse as sp
        >>> Graph.from_scipy_sparse(sp.csr_array([[0, 2.0], [2.0, 0]])).weights
        array([2.])
        """
        import scipy.sparse as sp

        A = sp.coo_array(adjacency)  # sparse, dense or nested lists alike
        if A.ndim != 2 or A.shape[0] != A.shape[1]:
            raise ValueError(f"adjacency must be a square matrix, got shape {A.shape}")
        if A.dtype.kind not in "biuf":  # complex weights would lose their imaginary part silently
            raise ValueError(f"adjacency must hold real weights, got dtype {A.dtype}")
        A = A.tocsr()
        A.sum_duplicates()
        A.eliminate_zeros()
        upper, lower = sp.triu(A, k=1).tocoo(), sp.tril(A, k=-1).T.tocsr()
        if A.diagonal().any():
            i = int(np.flatnonzero(A.diagonal())[0])
            raise ValueError(f"adjacency[{i}, {i}] is nonzero: self-loops are not edges of a GTV graph")
        mismatch = (upper.tocsr() != lower).tocoo()
        if mismatch.nnz:
            i, j = int(mismatch.row[0]), int(mismatch.col[0])
            raise ValueError(f"adjacency is not symmetric: adjacency[{i}, {j}] = {float(A[i, j])!r} but "
                             f"adjacency[{j}, {i}] = {float(A[j, i])!r}")
        edges = np.column_stack([upper.row, upper.col])
        return cls.from_edges(A.shape[0], edges, np.asarray(upper.data, dtype=np.float64))

    @classmethod
    def from_networkx(cls, graph, weight: str | None = "weight") -> "Graph":
        """Build a graph from an undirected networkx graph (networkx itself is not required).

        Parameters
        ----------
        graph : networkx.Graph
            Undirected, without self-loops or parallel edges. Node ``k`` of the result is the
            ``k``-th node of ``list(graph.nodes)``; use that list to map models back.
        weight : str or None
            Edge attribute holding the weight (default ``"weight"``; edges without it get 1);
            None gives every edge weight 1.

        Raises
        ------
        ValueError
            For a directed graph or multigraph, a self-loop, or a weight that is not finite and > 0.
        """
        if getattr(graph, "is_directed", lambda: False)() or getattr(graph, "is_multigraph", lambda: False)():
            raise ValueError("from_networkx needs an undirected simple graph (convert with graph.to_undirected() "
                             "and merge parallel edges first)")
        nodes = list(graph.nodes)
        if not nodes:
            raise ValueError("from_networkx: the graph has no nodes")
        index = {node: k for k, node in enumerate(nodes)}
        triples = [(index[u], index[v], 1.0 if weight is None else data.get(weight, 1.0))
                   for u, v, data in graph.edges(data=True)]
        edges = np.array([(i, j) for i, j, _ in triples], dtype=np.int64).reshape(-1, 2)
        try:
            weights = np.array([w for _, _, w in triples], dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"from_networkx: edge attribute {weight!r} must be a number on every edge") from None
        return cls.from_edges(len(nodes), edges, weights)

    @classmethod
    def from_csv(cls, path, n: int | None = None) -> "Graph":
        """Read an edge list CSV with columns ``i, j[, weight]`` (a header line of names is optional).

        Parameters
        ----------
        path : str or Path
            CSV file. Lines starting with ``#`` are ignored.
        n : int, optional
            Number of nodes; default ``max index + 1``.

        Raises
        ------
        ValueError
            Naming the file, the line number and what was expected. The offending line
            itself is never quoted: the file may not be an edge list at all (a path given by
            mistake, or on purpose, to a file holding secrets).
        ResourceLimitError
            When the declared ``n`` or the number of rows read so far needs more memory than
            the budget; checked while reading, before the graph is built.
        """
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"{path}: edge list file not found")
        if n is not None:
            n = check_positive_int(n, "n")
            if n > MAX_ELEMENTS:
                raise ValueError(f"{path}: n = {n} nodes is more than this package can hold (limit {MAX_ELEMENTS})")
            check_graph_memory(n, 0, f"{path}: a graph with n = {n} nodes (as given)", detail=False)
        columns = [array("d"), array("d"), array("d")]
        lines = array("q")  # line number of every row, for error messages
        width = 0
        header_allowed = True
        try:
            with open(path, encoding="utf-8-sig") as fh:  # (a byte-order mark, as spreadsheets save, is dropped)
                lineno = 0
                while True:
                    line = fh.readline(_MAX_LINE + 1)
                    if not line:
                        break
                    lineno += 1
                    if len(line) > _MAX_LINE and not line.endswith("\n"):
                        raise ValueError(f"{path}:{lineno}: line longer than {_MAX_LINE} characters; "
                                         "expected 'i,j[,weight]'")
                    line = line.strip()
                    if not line or line.startswith("#"):
                        continue
                    parts = line.split(",")
                    try:
                        values = [float(p) for p in parts]
                    except ValueError:
                        if header_allowed and not any(_is_number(p) for p in parts):
                            header_allowed = False  # a header: names only ("0,1,1.O" is an edge with a typo)
                            continue
                        bad = next(k for k, p in enumerate(parts, start=1) if not _is_number(p))
                        raise ValueError(
                            f"{path}:{lineno}: expected numbers 'i,j[,weight]', but field {bad} of "
                            f"{len(parts)} is not a number (the line is not shown)") from None
                    header_allowed = False
                    if len(values) not in (2, 3):
                        raise ValueError(f"{path}:{lineno}: expected 2 or 3 columns 'i,j[,weight]', "
                                         f"got {len(values)}")
                    if not width:
                        width, first_line = len(values), lineno
                    elif len(values) != width:
                        raise ValueError(f"{path}:{lineno}: expected {width} columns like line {first_line} "
                                         f"(every line must have the same number of columns), got {len(values)}")
                    for column, value in zip(columns, values):
                        column.append(value)
                    lines.append(lineno)
                    if len(lines) % _CHECK_ROWS == 0:  # the rows held so far, and the graph they make
                        check_memory(len(lines) * (_ROW_BYTES + _EDGE_BYTES),
                                     f"{path}: the edge list (more than {len(lines)} rows)")
        except UnicodeDecodeError:
            raise ValueError(f"{path}: not a text CSV file (could not decode as UTF-8)") from None
        except MemoryError:
            raise ResourceLimitError(f"{path}: out of memory while reading the edge list") from None
        m = len(lines)
        if n is None and not m:
            raise ValueError(f"{path}: no edges and no node count given")
        with allocation_guard(f"{path}: the edge list ({m} rows)"):
            ends = np.column_stack([np.frombuffer(columns[0]), np.frombuffer(columns[1])]).reshape(m, 2)
            rows = np.frombuffer(lines, dtype=np.int64)
            weights = np.frombuffer(columns[2]).copy() if width == 3 else None
            # indices: integral, >= 0 and within the package's limit (checked on floats: no overflow)
            bad = np.flatnonzero(~(np.isfinite(ends) & (ends == np.round(ends)) & (ends >= 0)).all(axis=1))
            if bad.size:
                raise ValueError(f"{path}:{rows[bad[0]]}: expected integer node indices >= 0 "
                                 "in the first two columns")
            big = np.flatnonzero((ends >= MAX_ELEMENTS).any(axis=1))
            if big.size:
                raise ValueError(f"{path}:{rows[big[0]]}: node index is more than this package can hold "
                                 f"(at most {MAX_ELEMENTS} nodes)")
            edges = ends.astype(np.int64)
            if n is None:
                top = int(np.argmax(edges.max(axis=1)))
                n = int(edges[top].max()) + 1
                what = f"{path}: the graph ({m} edges; line {rows[top]} has the largest node index)"
            else:
                what = f"{path}: the graph (n = {n} nodes, {m} edges)"
            check_graph_memory(n, m, what=what, detail=False)
            problem = _edge_problem(n, edges)
            if problem is not None:
                kind, e, other = problem
                if kind == "range":
                    raise ValueError(f"{path}:{rows[e]}: node index out of range; expected indices in "
                                     f"[0, {n}) (n = {n} nodes given)")
                if kind == "loop":
                    raise ValueError(f"{path}:{rows[e]}: the edge is a self-loop; expected two different nodes")
                raise ValueError(f"{path}:{rows[e]}: duplicate undirected edge (the same two nodes "
                                 f"as line {rows[other]})")
            if weights is not None:
                badw = np.flatnonzero(~(np.isfinite(weights) & (weights > 0)))
                if badw.size:
                    raise ValueError(f"{path}:{rows[badw[0]]}: expected a finite weight > 0 in the "
                                     "third column (drop the edge instead of giving it weight 0)")
        try:
            return cls.from_edges(n, edges, weights)
        except ValueError as exc:  # keeps ResourceLimitError a ResourceLimitError
            raise type(exc)(f"{path}: {exc}") from None

    # ------------------------------------------------------------------ properties
    @property
    def n_edges(self) -> int:
        """Number of edges |E|."""
        return int(self.edges.shape[0])

    @cached_property
    def incidence(self) -> sp.csr_matrix:
        """Oriented incidence matrix ``D`` (CSR, |E| x n): ``+1`` at the lower index, ``-1`` at the higher."""
        m = self.n_edges
        with allocation_guard(f"the incidence matrix of a graph with {m} edges"):
            rows = np.repeat(np.arange(m), 2)
            cols = self.edges.reshape(-1)
            data = np.tile(np.array([1.0, -1.0]), m)
            D = sp.csr_matrix((data, (rows, cols)), shape=(m, self.n))
            D.sort_indices()
        return D

    @cached_property
    def incidence_transpose(self) -> sp.csr_matrix:
        """``D^T`` as CSR (n x |E|): the node-side product of small graphs, without building a
        transposed view per call (~50 us each, a conjugate-gradient loop calls it hundreds of times)."""
        with allocation_guard(f"the transposed incidence matrix of a graph with {self.n_edges} edges"):
            return self.incidence.T.tocsr()

    @cached_property
    def end_columns(self) -> tuple[np.ndarray, np.ndarray]:
        """``(heads, tails)``: contiguous int64 copies of ``edges[:, 0]`` and ``edges[:, 1]`` (the
        columns of the ``+1`` and the ``-1`` of each row of :attr:`incidence`), for compiled kernels."""
        heads, tails = (np.ascontiguousarray(self.edges[:, k], dtype=np.int64) for k in (0, 1))
        heads.flags.writeable = tails.flags.writeable = False
        return heads, tails

    @cached_property
    def degree(self) -> np.ndarray:
        """Number of edges at each node (unweighted degree), shape (n,)."""
        with allocation_guard(f"the degrees of a graph with n = {self.n} nodes"):
            return np.bincount(self.edges.reshape(-1), minlength=self.n).astype(np.int64)

    @cached_property
    def weighted_degree(self) -> np.ndarray:
        """Sum of the weights of the edges at each node, shape (n,)."""
        with allocation_guard(f"the weighted degrees of a graph with n = {self.n} nodes"):
            return (np.bincount(self.edges[:, 0], self.weights, minlength=self.n)
                    + np.bincount(self.edges[:, 1], self.weights, minlength=self.n))

    @cached_property
    def _components(self) -> tuple[int, np.ndarray]:
        return self.edge_components()

    def edge_components(self, edges=None) -> tuple[int, np.ndarray]:
        """Connected components of the graph on all nodes keeping only ``edges``.

        The one routine behind "fused" clusters (edges whose models coincide), forests and
        contracted graphs.

        Parameters
        ----------
        edges : array_like of bool (|E|,) or of int, optional
            A mask or the indices of the edges to keep; all edges by default.

        Returns
        -------
        count : int
        labels : ndarray of int64 (n,)
            Component of every node, ``0..count-1`` (isolated nodes are their own component),
            numbered in the order of each component's lowest node.

        Notes
        -----
        SciPy's :func:`~scipy.sparse.csgraph.connected_components` on the kept edges' adjacency;
        from :data:`gtvcvx._jit.MIN_ENTRIES` edges a compiled union-find
        (:func:`gtvcvx._graph_kernels.component_labels`, the same numbering) without the sparse
        matrix and its transpose.
        """
        if self.n_edges >= _jit.MIN_ENTRIES:  # union-find: no sparse matrix and its transpose
            keep = np.zeros(self.n_edges, dtype=bool)
            keep[slice(None) if edges is None else np.asarray(edges)] = True  # (a mask or indices)
            count, labels = components_compiled()(self.n, *self.end_columns, keep)
            return int(count), labels
        kept = self.edges if edges is None else self.edges[np.asarray(edges)]
        with allocation_guard(f"the connected components of a graph with n = {self.n} nodes"):
            adjacency = sp.csr_matrix((np.ones(len(kept)), (kept[:, 0], kept[:, 1])), shape=(self.n, self.n))
            count, labels = connected_components(adjacency, directed=False)
        return int(count), labels.astype(np.int64)

    @cached_property
    def longest_hops(self) -> int:
        """The most hops from each connected component's lowest node to a node of it (between the largest
        component radius and diameter), by one breadth-first search per component; 0 without edges.

        Krylov methods with node-local preconditioners move information one hop per step: the solvers use it
        to tell long paths (chains, time series) from graphs with short ones.
        """
        from scipy.sparse.csgraph import dijkstra

        if self.n_edges == 0:
            return 0
        adjacency = sp.csr_matrix((np.ones(self.n_edges), (self.edges[:, 0], self.edges[:, 1])),
                                  shape=(self.n, self.n))
        roots = np.unique(self._components[1], return_index=True)[1]
        hops = dijkstra(adjacency, directed=False, indices=roots, unweighted=True, min_only=True)
        return int(np.max(hops[np.isfinite(hops)], initial=0))

    def components(self) -> np.ndarray:
        """Connected-component label of every node, shape (n,), labels ``0..n_components-1``."""
        return self._components[1].copy()

    @property
    def n_components(self) -> int:
        """Number of connected components (isolated nodes count as components)."""
        return self._components[0]

    def laplacian(self, weighted: bool = False) -> sp.csr_matrix:
        """Graph Laplacian ``D^T diag(a) D`` (``a = weights`` if ``weighted`` else ones)."""
        D = self.incidence
        scale = self.weights if weighted else np.ones(self.n_edges)
        return (D.T @ sp.diags(scale) @ D).tocsr()

    # ------------------------------------------------------------------ transformations
    def with_weights(self, weights) -> "Graph":
        """The same edges with new (validated) weights."""
        return Graph.from_edges(self.n, self.edges, weights)

    def permute(self, perm) -> "Graph":
        """Relabel nodes: node ``i`` becomes ``perm[i]``; edges keep their order."""
        perm = as_index_array(perm, "perm", ndim=1)
        if perm.shape != (self.n,) or not np.array_equal(np.sort(perm), np.arange(self.n)):
            raise ValueError(f"perm must be a permutation of 0..{self.n - 1}")
        return Graph._trusted(self.n, np.ascontiguousarray(np.sort(perm[self.edges], axis=1)), self.weights.copy())

    def subgraph(self, nodes) -> "Graph":
        """The graph induced by ``nodes`` (relabelled 0..len(nodes)-1 in the given order)."""
        nodes = as_index_array(nodes, "nodes", ndim=1)
        if nodes.size == 0 or nodes.min() < 0 or nodes.max() >= self.n or np.unique(nodes).size != nodes.size:
            raise ValueError(f"nodes must be distinct indices in [0, {self.n})")
        position = np.full(self.n, -1, dtype=np.int64)
        position[nodes] = np.arange(nodes.size)
        mapped = position[self.edges]
        keep = (mapped >= 0).all(axis=1)
        return Graph._trusted(nodes.size, np.ascontiguousarray(np.sort(mapped[keep], axis=1)),
                     self.weights[keep].copy())

    def to_csv(self, path) -> None:
        """Write the edge list as ``i,j,weight`` with a header line (atomically: no partial file)."""
        from .io import atomic_write

        table = np.column_stack([self.edges, self.weights])
        with atomic_write(path, "w", encoding="utf-8") as fh:  # no half-written file on Ctrl-C
            np.savetxt(fh, table, delimiter=",", header="i,j,weight", comments="",
                       fmt=["%d", "%d", "%.17g"])

    def __repr__(self) -> str:
        return f"Graph(n={self.n}, n_edges={self.n_edges}, n_components={self.n_components})"

    def __eq__(self, other) -> bool:
        return (isinstance(other, Graph) and self.n == other.n
                and np.array_equal(self.edges, other.edges) and np.array_equal(self.weights, other.weights))

    __hash__ = None
