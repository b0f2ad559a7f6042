"""Weighted undirected graphs with a validated edge list and a sparse incidence matrix."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ._validation import MAX_ELEMENTS, as_float_array, as_index_array, check_positive_int

__all__ = ["Graph"]


class Graph:
    """An undirected graph with positive edge weights.

    Build one with :meth:`Graph.from_edges` (validated) or a generator in
    :mod:`gtvcvx.graphs`. Edges keep the order they were given in, each oriented so that
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

    def __init__(self, n: int, edges: np.ndarray, weights: np.ndarray):
        # Trusted constructor: callers pass validated, oriented int64 edges and float weights.
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
        """
        n = check_positive_int(n, "n")
        if n > MAX_ELEMENTS:  # refuse before any per-node array is allocated
            raise ValueError(f"n = {n} nodes is more than this package can hold (limit {MAX_ELEMENTS})")
        raw = np.asarray(edges) if not isinstance(edges, np.ndarray) else edges
        if raw.size == 0:
            raw = np.zeros((0, 2), dtype=np.int64)
        edges_arr = as_index_array(raw, "edges")
        if edges_arr.ndim != 2 or edges_arr.shape[1] != 2:
            raise ValueError(f"edges must have shape (n_edges, 2), got {edges_arr.shape}")
        n_edges = edges_arr.shape[0]
        if n_edges > MAX_ELEMENTS // 4:
            raise ValueError(f"edges: {n_edges} edges is more than this package can hold")

        bad = np.flatnonzero(((edges_arr < 0) | (edges_arr >= n)).any(axis=1))
        if bad.size:
            e = int(bad[0])
            raise ValueError(
                f"edge {e} = ({edges_arr[e, 0]}, {edges_arr[e, 1]}) has a node index out of range; "
                f"nodes must be in [0, {n})")
        loops = np.flatnonzero(edges_arr[:, 0] == edges_arr[:, 1])
        if loops.size:
            e = int(loops[0])
            raise ValueError(f"edge {e} = ({edges_arr[e, 0]}, {edges_arr[e, 1]}) is a self-loop")

        oriented = np.sort(edges_arr, axis=1)
        if n_edges > 1:
            keys = oriented[:, 0] * n + oriented[:, 1]
            order = np.argsort(keys, kind="stable")
            dup = np.flatnonzero(keys[order][1:] == keys[order][:-1])
            if dup.size:
                first, second = sorted((int(order[dup[0]]), int(order[dup[0] + 1])))
                i, j = oriented[first]
                raise ValueError(
                    f"edges {first} and {second} both connect nodes {i} and {j} "
                    "(duplicate undirected edge)")

        if weights is None:
            w = np.ones(n_edges)
        elif np.ndim(weights) == 0:
            w = np.full(n_edges, float(as_float_array(weights, "weights", finite=False)))
        else:
            w = as_float_array(weights, "weights", ndim=1, finite=False, copy=True)
            if w.shape[0] != n_edges:
                raise ValueError(f"weights must have one entry per edge ({n_edges}), got {w.shape[0]}")
        badw = np.flatnonzero(~(np.isfinite(w) & (w > 0)))
        if badw.size:
            e = int(badw[0])
            raise ValueError(
                f"weights[{e}] = {float(w[e])!r} for edge ({oriented[e, 0]}, {oriented[e, 1]}) "
                "must be finite and > 0 (drop the edge instead of giving it weight 0)")
        return cls(n, np.ascontiguousarray(oriented, dtype=np.int64), np.ascontiguousarray(w))

    @classmethod
    def from_csv(cls, path, n: int | None = None) -> "Graph":
        """Read an edge list CSV with columns ``i, j[, weight]`` (a header line is optional).

        Parameters
        ----------
        path : str or Path
            CSV file. Lines starting with ``#`` are ignored.
        n : int, optional
            Number of nodes; default ``max index + 1``.
        """
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"{path}: edge list file not found")
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            raise ValueError(f"{path}: not a text CSV file (could not decode as UTF-8)") from None
        rows = []
        header_allowed = True
        for lineno, line in enumerate(text.splitlines(), start=1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = [p.strip() for p in line.split(",")]
            try:
                values = [float(p) for p in parts]
            except ValueError:
                if header_allowed:
                    header_allowed = False
                    continue
                raise ValueError(f"{path}:{lineno}: expected numbers 'i,j[,weight]', got {line!r}") from None
            header_allowed = False
            if len(values) not in (2, 3):
                raise ValueError(f"{path}:{lineno}: expected 2 or 3 columns 'i,j[,weight]', got {len(values)}")
            rows.append(values)
        if rows and len({len(r) for r in rows}) != 1:
            raise ValueError(f"{path}: every line must have the same number of columns")
        table = np.array(rows, dtype=np.float64).reshape(len(rows), -1 if rows else 2)
        try:
            edges = as_index_array(table[:, :2], "edges")
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
        weights = table[:, 2] if table.shape[1] == 3 else None
        if n is None:
            if not len(edges):
                raise ValueError(f"{path}: no edges and no node count given")
            n = int(edges.max()) + 1
        try:
            return cls.from_edges(n, edges, weights)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None

    # ------------------------------------------------------------------ properties
    @property
    def n_edges(self) -> int:
        """Number of edges |E|."""
        return int(self.edges.shape[0])

    @cached_property
    def incidence(self) -> sp.csr_matrix:
        """Oriented incidence matrix ``D`` (CSR, |E| x n): ``+1`` at the lower index, ``-1`` at the higher."""
        m = self.n_edges
        rows = np.repeat(np.arange(m), 2)
        cols = self.edges.reshape(-1)
        data = np.tile(np.array([1.0, -1.0]), m)
        D = sp.csr_matrix((data, (rows, cols)), shape=(m, self.n))
        D.sort_indices()
        return D

    @cached_property
    def degree(self) -> np.ndarray:
        """Number of edges at each node (unweighted degree), shape (n,)."""
        return np.bincount(self.edges.reshape(-1), minlength=self.n).astype(np.int64)

    @cached_property
    def weighted_degree(self) -> np.ndarray:
        """Sum of the weights of the edges at each node, shape (n,)."""
        return (np.bincount(self.edges[:, 0], self.weights, minlength=self.n)
                + np.bincount(self.edges[:, 1], self.weights, minlength=self.n))

    @cached_property
    def _components(self) -> tuple[int, np.ndarray]:
        adjacency = sp.csr_matrix((np.ones(self.n_edges), (self.edges[:, 0], self.edges[:, 1])),
                                  shape=(self.n, self.n))
        count, labels = connected_components(adjacency, directed=False)
        return int(count), labels.astype(np.int64)

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
        return Graph(self.n, np.ascontiguousarray(np.sort(perm[self.edges], axis=1)), self.weights.copy())

    def subgraph(self, nodes) -> "Graph":
        """The graph induced by ``nodes`` (relabelled 0..len(nodes)-1 in the given order)."""
        nodes = as_index_array(nodes, "nodes", ndim=1)
        if nodes.size == 0 or nodes.min() < 0 or nodes.max() >= self.n or np.unique(nodes).size != nodes.size:
            raise ValueError(f"nodes must be distinct indices in [0, {self.n})")
        position = np.full(self.n, -1, dtype=np.int64)
        position[nodes] = np.arange(nodes.size)
        mapped = position[self.edges]
        keep = (mapped >= 0).all(axis=1)
        return Graph(nodes.size, np.ascontiguousarray(np.sort(mapped[keep], axis=1)),
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
