r"""The fast core's dual half-step as compiled sweeps over the ``|E| x d`` flows.

An iteration of the Halpern PDHG loop touches the flows in six places: the Halpern (or restart)
move of ``U``, the extrapolated step ``U + sigma D X``, the projection ``prox_{sigma G*}``, the
divergence ``D^T U+`` and, every few iterations, the fixed-point residual ``||U - U+||``. With
NumPy and SciPy these were about 17 passes over arrays far larger than the caches. ``D`` has
exactly one ``+1`` and one ``-1`` per row, so ``D X`` is a gather ``X[head] - X[tail]`` and
``D^T U+`` a scatter-add; the step is two sweeps:

1. :func:`edge_fused_step` (per edge: the Halpern or restart move of ``u_e``, the gather
   ``x_head(e) - x_tail(e)``, the projection ``u+_e <- prox(u_e + ...)`` and its residual term:
   ``U``, ``U+`` and ``U0`` streamed once, node rows read at random),
2. :func:`edge_scatter` (``D^T U+``: the random read-modify-writes of node rows).

Both ask for the node rows of the edge :data:`PREFETCH_DISTANCE` positions ahead
(:func:`gtvcvx._jit.prefetch_row`). Without that, mixing the sequential streams with the random
node reads starved the reads of outstanding cache misses: one fused sweep was slower than the
three sweeps it replaces (:func:`edge_move`, :func:`edge_gather`, then a projection sweep) on
graphs without locality (10^7 SBM edges in cache blocks: 402 vs 360 ms), faster only on graphs
relabelled for locality, so it served those alone. With the prefetch, measured in one process
(threaded builds, d = 10 unless said, medians of 7-15), separate sweeps without prefetch -> fused
sweep with it, scatter included: 10^7 SBM edges in cache blocks 533 -> 381 ms, 10^6 SBM edges
47.0 -> 35.9 ms, 10^6 points in 7-D, 10-NN (6.7e6 edges, reverse Cuthill-McKee) 225 -> 140 ms
(fused without prefetch: 159 ms), 2 * 10^5 SBM edges 8.3 -> 8.0 ms (in cache: no difference).
Fusing the scatter too was no faster (42 vs 46 ms at 10^6 SBM edges, without prefetch; with it, each
thread scattering into its own node array: 341 vs 332 ms at 10^7 SBM edges, 150 vs 164 ms on the
10^6-point graph), nor was prefetching in :func:`edge_laplacian`, whose vectors fit in cache
(43 vs 32 ms at 10^7 SBM edges).

Every sweep is a ``prange`` loop, built twice (:func:`gtvcvx._jit.njit`): serial, and threaded for
the main thread of a single-process solve (:func:`gtvcvx._jit.parallel_threads`; a Dask part runs
the serial build). The scatter cannot split the edges among threads writing the same node rows,
so each of ``T`` threads scatters a consecutive chunk of edges into its own ``n x d`` array and the
arrays are summed after (one more pass over node rows); pulling each node's flows through a
tail-sorted edge list instead was slower (0.48 vs 0.43 s at 10^7 edges) and needs ``|E|`` more
indices. Measured on this 2-core machine, 10^7 random edges, d = 10, serial build -> two threads:
gather 0.73 -> 0.23 s, projection 0.22 -> 0.14 s, scatter 0.94 -> 0.43 s (the threaded build is
faster even on one thread, 0.34 s for the gather: its loop body is compiled as a separate function
whose arrays do not alias). :func:`edge_move` also serves the node-side Halpern moves and
:func:`edge_gather` the differences ``D W`` outside the loop (:func:`differences`).

The projection is the penalty's declared :attr:`gtvcvx.penalties.Penalty.conjugate_prox_rows`
(``"l2_ball"``, ``"box"``, ``"shrink"``); a penalty without one is projected by its own
``_prox_conjugate`` between :func:`edge_fused_step` (which then only adds) and :func:`edge_scatter`.

Certificates read the flows once more per check-point: :func:`edge_terms` gathers ``z_e`` on the fly
and returns every edge's penalty value and Fenchel-Young term for the l2 and l1 norms (measured at
3 * 10^6 SBM edges, d = 10: certificates 12.1-12.7 -> 7.7-9.9 s of a 76-iteration solve, with
:func:`edge_difference_norms` for the polish's fused-cluster test).

The functions are plain Python; :func:`_load` returns them compiled by numba (on first use,
cached on disk when the package directory is writable), so ``import gtvcvx`` does not load numba.

References
----------
.. [1] J. D. McCalpin, "Memory bandwidth and machine balance in current high performance
   computers", IEEE TCCA Newsletter, 1995 (the STREAM triad, the bound of the sequential sweeps).
"""

from __future__ import annotations

from functools import cache

import numpy as np
import scipy.sparse as sp

from .. import _jit
from .._jit import njit, prefetch_row
from .._jit import read_only as _read_only
from ..penalties import CAPACITY_RTOL

prange = range  # numba.prange once compiled (gtvcvx._jit.njit)
__all__ = ["MOVE_NONE", "MOVE_HALPERN", "MOVE_RESTART", "PROJECTIONS", "NORM_BALLS", "EdgeSweep", "differences",
           "difference_norms", "divergence", "edge_norm_terms", "laplacian_product"]

#: Edges ahead at which the sweeps that read or update node rows in edge order prefetch those rows
#: (:func:`gtvcvx._jit.prefetch_row`). Measured in one process at 10^7 SBM edges in cache blocks,
#: d = 10, threaded (medians of 7), without prefetch / 16 / 32 / 64 ahead: gather 94 / 83 / 87 / 90 ms,
#: scatter 213 / 155 / 163 / 153 ms, fused step + scatter 510 / 381 / 415 / 442 ms (and 16 or 32
#: best at 10^6 SBM edges and on the 10^6-point 10-NN graph).
PREFETCH_DISTANCE = 16

#: How :func:`edge_move` obtains the current flow ``z = U`` before the step.
MOVE_NONE, MOVE_HALPERN, MOVE_RESTART = 0, 1, 2

#: Row projections :func:`edge_fused_step` runs, by the name a penalty declares.
PROJECTIONS = {"l2_ball": 1, "box": 2, "shrink": 3}
#: Norm penalties :func:`edge_terms` evaluates, by their declared dual ball
#: (:attr:`gtvcvx.penalties.Penalty.dual_ball`): ``"l2"`` (``phi = ||.||_2``), ``"linf"`` (``phi = ||.||_1``).
NORM_BALLS = {"l2": 1, "linf": 2}


def edge_move(move, a, b, rho, U, Up, U0):
    """``MOVE_HALPERN``: ``U <- a ((1 + rho) U+ - rho U) + b U0``; ``MOVE_RESTART``: ``U <- U+``,
    ``U0 <- U+``; ``MOVE_NONE``: nothing. One sequential sweep over the flows."""
    m, d = U.shape
    if move == 1:
        gain = a * (1.0 + rho)
        keep = -a * rho
        for e in prange(m):
            for k in range(d):
                U[e, k] = (keep * U[e, k] + gain * Up[e, k]) + b * U0[e, k]
    elif move == 2:
        for e in prange(m):
            for k in range(d):
                z = Up[e, k]
                U[e, k] = z
                U0[e, k] = z


def edge_gather(X, head, tail, out):
    """``out <- D X``: ``out_e = x_head(e) - x_tail(e)`` (the only random reads of the step)."""
    m, d = out.shape
    for e in prange(m):
        ahead = e + PREFETCH_DISTANCE
        if ahead < m:
            prefetch_row(X, head[ahead])
            prefetch_row(X, tail[ahead])
        h = head[e]
        t = tail[e]
        for k in range(d):
            out[e, k] = X[h, k] - X[t, k]


def edge_fused_step(move, a, b, rho, U, Up, U0, X, head, tail, caps, sigma, projection, counted):
    r"""The dual step of one iteration in one sweep: per edge, the move of ``u_e`` (as in
    :func:`edge_move`), then ``u+_e = prox_{sigma G*}(u_e + x_head(e) - x_tail(e))`` row by row
    (``X`` holds ``sigma`` times the extrapolated node rows); returns ``sum_e ||u_e - u+_e||^2``
    over the counted edges (``counted`` empty: all).

    ``projection`` is a value of :data:`PROJECTIONS`, or 0: only ``U+ <- U + D X`` (the penalty's
    own ``_prox_conjugate`` follows, and the residual comes from :func:`edge_scatter`).

    The node rows of the edge :data:`PREFETCH_DISTANCE` ahead are prefetched (see the module
    docstring for the measurements); on graphs relabelled for locality (reverse Cuthill-McKee)
    they are mostly in the caches already. The projection was also tried as a shared compiled
    helper (arrays passed per row): 40 % slower than written out (70 vs 50 ms at 6.7e6 edges, d = 7).
    """
    m, d = U.shape
    all_counted = counted.shape[0] == 0
    gain = a * (1.0 + rho)
    keep = -a * rho
    residual = 0.0
    for e in prange(m):
        ahead = e + PREFETCH_DISTANCE
        if ahead < m:
            prefetch_row(X, head[ahead])
            prefetch_row(X, tail[ahead])
        h = head[e]
        t = tail[e]
        sq = 0.0
        for k in range(d):
            u = U[e, k]  # (kept in a register: numba cannot prove the stores below leave it alone)
            if move == 1:
                u = (keep * u + gain * Up[e, k]) + b * U0[e, k]
                U[e, k] = u
            elif move == 2:
                u = Up[e, k]
                U[e, k] = u
                U0[e, k] = u
            v = u + (X[h, k] - X[t, k])
            Up[e, k] = v
            sq += v * v
        if projection != 0:
            c = caps[e]
            re = 0.0
            if projection == 2:
                for k in range(d):
                    v = Up[e, k]
                    if v > c:  # comparisons, not min/max: a NaN stays NaN (as in np.clip)
                        v = c
                    elif v < -c:
                        v = -c
                    Up[e, k] = v
                    r = U[e, k] - v
                    re += r * r
            else:
                f = 1.0
                if projection == 1:
                    if sq > c * c:
                        f = c / np.sqrt(sq)
                else:
                    f = c / (c + sigma)
                for k in range(d):
                    v = Up[e, k] * f
                    Up[e, k] = v
                    r = U[e, k] - v
                    re += r * r
            if all_counted or counted[e] != 0:
                residual += re
    return residual


def edge_scatter(U, Up, head, tail, rowmap, counted, DtUp, spare, with_residual):
    """``DtUp <- D^T U+`` and, when ``with_residual``, the residual sum of :func:`edge_fused_step` (for a
    projection done outside it). ``rowmap`` (empty: identity) maps a column of ``D`` to its row of
    ``DtUp``, ``-1`` for columns without one (a part's halo nodes).

    ``spare`` (``(T - 1, rows, d)``, may be empty) lets ``T`` threads scatter at once without
    conflicting writes: the edges are cut in ``T`` consecutive chunks, the first scattered into
    ``DtUp``, chunk ``c`` into ``spare[c - 1]``, and the spares are added to ``DtUp`` after.
    """
    m, d = Up.shape
    n_rows = DtUp.shape[0]
    chunks = spare.shape[0] + 1
    mapped = rowmap.shape[0] > 0
    for c in prange(chunks):
        out = DtUp if c == 0 else spare[c - 1]
        for i in range(n_rows):
            for k in range(d):
                out[i, k] = 0.0
        end = (c + 1) * m // chunks
        for e in range(c * m // chunks, end):
            ahead = e + PREFETCH_DISTANCE
            if ahead < end and not mapped:
                prefetch_row(out, head[ahead])
                prefetch_row(out, tail[ahead])
            h = head[e]
            t = tail[e]
            if mapped:
                h = rowmap[h]
                t = rowmap[t]
            if h >= 0 and t >= 0:
                # one load of u+_e for both ends (a store to out may alias Up for numba: with
                # two loops every entry is loaded twice; threaded, d = 10, edges in random
                # order: 28 -> 25 ms at 10^6 edges, 480 -> 425 ms at 10^7)
                for k in range(d):
                    u = Up[e, k]
                    out[h, k] += u
                    out[t, k] -= u
            elif h >= 0:
                for k in range(d):
                    out[h, k] += Up[e, k]
            elif t >= 0:
                for k in range(d):
                    out[t, k] -= Up[e, k]
    if chunks > 1:
        for i in prange(n_rows):
            for c in range(chunks - 1):
                for k in range(d):
                    DtUp[i, k] += spare[c, i, k]
    residual = 0.0
    if with_residual:
        all_counted = counted.shape[0] == 0
        for e in prange(m):
            if all_counted or counted[e] != 0:
                re = 0.0
                for k in range(d):
                    r = U[e, k] - Up[e, k]
                    re += r * r
                residual += re
    return residual


def edge_laplacian(x, head, tail, out, spare):
    """``out <- D^T D x`` for one vector ``x`` in one pass over the edges (``spare``: the threads'
    partial sums, as in :func:`edge_scatter`)."""
    m = head.shape[0]
    n = out.shape[0]
    chunks = spare.shape[0] + 1
    for c in prange(chunks):
        y = out if c == 0 else spare[c - 1]
        for i in range(n):
            y[i] = 0.0
        for e in range(c * m // chunks, (c + 1) * m // chunks):
            h = head[e]
            t = tail[e]
            v = x[h] - x[t]
            y[h] += v
            y[t] -= v
    if chunks > 1:
        for i in prange(n):
            for c in range(chunks - 1):
                out[i] += spare[c, i]


def edge_terms(X, head, tail, U, caps, ball, rtol, values, gaps):
    r"""Every edge's penalty value and Fenchel-Young term with ``z_e = x_head(e) - x_tail(e)``
    gathered on the fly (no ``|E| x d`` array of differences): ``values_e = c_e phi(z_e)`` and
    ``gaps_e = c_e phi(z_e) - <z_e, u_e>`` where ``||u_e||_* <= c_e (1 + rtol)``, ``+inf`` elsewhere
    (the conjugate's indicator; a NaN flow is outside). ``ball`` is a value of :data:`NORM_BALLS`."""
    m, d = U.shape
    for e in prange(m):
        ahead = e + PREFETCH_DISTANCE
        if ahead < m:
            prefetch_row(X, head[ahead])
            prefetch_row(X, tail[ahead])
        h = head[e]
        t = tail[e]
        size = 0.0
        dual = 0.0
        dot = 0.0
        for k in range(d):
            z = X[h, k] - X[t, k]
            u = U[e, k]
            dot += z * u
            if ball == 1:
                size += z * z
                dual += u * u
            else:
                size += abs(z)
                a = abs(u)
                if a > dual or a != a:  # (a NaN is kept: a later entry compares False with it)
                    dual = a
        if ball == 1:
            size = np.sqrt(size)
            dual = np.sqrt(dual)
        c = caps[e]
        value = c * size
        values[e] = value
        if dual <= c * (1.0 + rtol) + 2.2250738585072014e-308:  # (as Penalty._ball_indicator)
            gaps[e] = value - dot
        else:
            gaps[e] = np.inf


def edge_difference_norms(X, head, tail, out):
    """``out_e <- ||x_head(e) - x_tail(e)||_2`` (a gather without the ``|E| x d`` differences)."""
    m = head.shape[0]
    d = X.shape[1]
    for e in prange(m):
        h = head[e]
        t = tail[e]
        sq = 0.0
        for k in range(d):
            z = X[h, k] - X[t, k]
            sq += z * z
        out[e] = np.sqrt(sq)


class EdgeSweep:
    """The dual half of a PDHG iteration for one problem (or one part of it): move the flows,
    step, project, divergence and residual.

    Parameters
    ----------
    head, tail : (m,) int arrays
        The columns of the ``+1`` and of the ``-1`` of each row of the incidence matrix (for a
        graph: ``edges[:, 0]`` and ``edges[:, 1]``, see :attr:`gtvcvx.graph.Graph.incidence`).
    penalty : Penalty
    caps : (m,) float array
        Capacities ``c_e``.
    n_rows : int
        Rows of the divergence ``D^T U+`` (the graph's nodes, or a part's own nodes).
    d : int
        Columns of the flows (the model dimension); with ``m`` it decides ``compiled``.
    rowmap : (n_cols,) int array, optional
        Row of ``D^T U+`` of each column of ``D``, ``-1`` where none (default: the identity).
    counted : (m,) bool array, optional
        Edges whose residual terms count (default all).
    compiled : bool, optional
        Use the numba kernels (:func:`edge_fused_step`, :func:`edge_scatter`); default: when
        ``m d >= gtvcvx._jit.MIN_ENTRIES`` (flow entries). Otherwise the same operations with NumPy and a sparse
        product (identical up to rounding).
    threads : int, optional
        Threads of the compiled kernels (their ``parallel=True`` build above 1); default
        :func:`gtvcvx._jit.parallel_threads` (numba's thread count in the main thread, else 1).
        The scatter keeps ``threads - 1`` spare ``n_rows x d`` arrays. The result does not depend
        on it beyond rounding.
    """

    def __init__(self, head, tail, penalty, caps, n_rows: int, d: int, rowmap=None, counted=None,
                 compiled: bool | None = None, threads: int | None = None):
        rows = penalty.conjugate_prox_rows
        if rows is not None and rows not in PROJECTIONS:
            raise ValueError(f"penalty '{penalty.name}' declares conjugate_prox_rows = {rows!r}; expected one of "
                             f"{sorted(PROJECTIONS)} or None")
        self.projection = PROJECTIONS.get(rows, 0)
        self.penalty = penalty
        self.head = np.ascontiguousarray(head, dtype=np.int64)
        self.tail = np.ascontiguousarray(tail, dtype=np.int64)
        self.caps = np.ascontiguousarray(caps, dtype=float)
        self.rowmap = np.zeros(0, np.int64) if rowmap is None else np.ascontiguousarray(rowmap, dtype=np.int64)
        self.counted = (np.zeros(0, np.uint8) if counted is None or np.all(counted)
                        else np.ascontiguousarray(counted, dtype=np.uint8))
        m = self.head.size
        self.compiled = m * d >= _jit.MIN_ENTRIES if compiled is None else bool(compiled)
        if self.compiled:
            self.threads = max(1, int(_jit.parallel_threads() if threads is None else threads))
            self._step, self._scatter = _load_fused(self.threads > 1), _load(self.threads > 1)[2]
            self._spare = np.empty((self.threads - 1, int(n_rows), d))
        else:
            self.threads = 1
            rowmap = np.arange(int(n_rows)) if rowmap is None else self.rowmap
            rows_h, rows_t = rowmap[self.head], rowmap[self.tail]
            keep_h, keep_t = rows_h >= 0, rows_t >= 0
            edge_ids = np.arange(m)
            self._divergence = sp.csr_matrix(
                (np.concatenate([np.ones(keep_h.sum()), -np.ones(keep_t.sum())]),
                 (np.concatenate([rows_h[keep_h], rows_t[keep_t]]),
                  np.concatenate([edge_ids[keep_h], edge_ids[keep_t]]))), shape=(int(n_rows), m))
            self._counted_ids = None if self.counted.size == 0 else np.flatnonzero(self.counted)

    def __call__(self, move: int, U, Up, U0, X, sigma: float, DtUp, a: float = 0.0, b: float = 0.0,
                 rho: float = 0.0) -> float:
        """One dual half-step in place: ``U`` moved (``move``), ``Up = prox(U + sigma D X)``,
        ``DtUp = D^T Up``; returns the residual ``sum_e ||u_e - u+_e||^2`` over the counted edges."""
        if not self.compiled:
            return self._numpy(move, U, Up, U0, X, sigma, DtUp, a, b, rho)
        residual = self._step(move, float(a), float(b), float(rho), U, Up, U0, X, self.head, self.tail, self.caps,
                              float(sigma), self.projection, self.counted)
        if not self.projection:
            self.penalty._prox_conjugate(Up, sigma, self.caps)
        outside = self._scatter(U, Up, self.head, self.tail, self.rowmap, self.counted, DtUp, self._spare,
                                not self.projection)
        return residual if self.projection else outside

    @staticmethod
    def move(move: int, U, Up, U0, a: float = 0.0, b: float = 0.0, rho: float = 0.0) -> None:
        """Only the move of :meth:`__call__` (in place on ``U`` and ``U0``), e.g. before a checkpoint."""
        if move == MOVE_HALPERN:
            U *= -a * rho
            U += (a * (1.0 + rho)) * Up
            U += b * U0
        elif move == MOVE_RESTART:
            U[...] = Up
            U0[...] = Up

    def _numpy(self, move, U, Up, U0, X, sigma, DtUp, a, b, rho) -> float:
        self.move(move, U, Up, U0, a, b, rho)
        np.subtract(X[self.head], X[self.tail], out=Up)
        Up += U
        self.penalty._prox_conjugate(Up, sigma, self.caps)
        DtUp[...] = self._divergence @ Up
        diff = U - Up if self._counted_ids is None else U[self._counted_ids] - Up[self._counted_ids]
        return float(np.vdot(diff, diff))


def differences(graph, W: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``D W`` (rows ``w_i - w_j``): a compiled gather on large graphs (into ``out`` if given, a
    C-contiguous float64 array), the sparse product below ``gtvcvx._jit.MIN_ENTRIES`` flow entries."""
    if graph.n_edges * W.shape[1] < _jit.MIN_ENTRIES:
        return graph.incidence @ W
    out = np.empty((graph.n_edges, W.shape[1])) if out is None else out
    head, tail = graph.end_columns
    _load(_jit.parallel_threads() > 1)[1](np.ascontiguousarray(W, dtype=float), head, tail, out)
    return out


def divergence(graph, U: np.ndarray) -> np.ndarray:
    """``D^T U`` (net flow out of every node): a compiled scatter-add on large graphs, the sparse
    product below ``gtvcvx._jit.MIN_ENTRIES`` flow entries."""
    if U.size < _jit.MIN_ENTRIES:
        return graph.incidence_transpose @ U
    out = np.empty((graph.n, U.shape[1]))
    head, tail = graph.end_columns
    U = np.ascontiguousarray(U, dtype=float)
    none = np.zeros(0, np.int64)
    threads = _jit.parallel_threads()
    spare = np.empty((threads - 1, graph.n, U.shape[1]))
    _load(threads > 1)[2](U, U, head, tail, none, np.zeros(0, np.uint8), out, spare, False)
    return out


def edge_norm_terms(graph, W: np.ndarray, U: np.ndarray, caps: np.ndarray, penalty,
                    compiled: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    r"""``(c_e phi(z_e), c_e phi(z_e) + c_e phi^*(u_e / c_e) - <z_e, u_e>)`` per edge, ``Z = D W``.

    The penalty's :meth:`~gtvcvx.penalties.Penalty.edge_values` and Fenchel-Young terms: one compiled
    pass that gathers ``z_e`` on the fly for a norm penalty whose dual ball is in :data:`NORM_BALLS`
    on large graphs (the NumPy form writes ``Z``, then reads it three times and ``U`` twice: ~1.2 s
    and 800 MB per certificate at 10^7 edges, d = 10), the penalty's own methods otherwise.
    ``compiled``: ``None`` from ``gtvcvx._jit.MIN_ENTRIES`` flow entries; ``True`` at any size
    (for callers that have loaded numba anyway: 7-8 vs 26 ms at 10^6 edges, d = 1).
    """
    ball = NORM_BALLS.get(penalty.dual_ball) if penalty.is_norm else None
    if compiled is None:
        compiled = graph.n_edges * W.shape[1] >= _jit.MIN_ENTRIES
    if ball is None or not compiled:
        Z = differences(graph, W)
        return penalty._edge_values(Z, caps), penalty._edge_fenchel_young(Z, U, caps)
    head, tail = graph.end_columns
    values, gaps = np.empty(graph.n_edges), np.empty(graph.n_edges)
    _load_terms(_jit.parallel_threads() > 1)[0](np.ascontiguousarray(W, dtype=float), head, tail,
                                                np.ascontiguousarray(U, dtype=float),
                                                np.ascontiguousarray(caps, dtype=float), ball, CAPACITY_RTOL,
                                                values, gaps)
    return values, gaps


def difference_norms(graph, W: np.ndarray) -> np.ndarray:
    """``||(D W)_e||_2`` per edge: one compiled gather on large graphs (no ``|E| x d`` differences)."""
    if graph.n_edges * W.shape[1] < _jit.MIN_ENTRIES:
        return np.linalg.norm(differences(graph, W), axis=1)
    head, tail = graph.end_columns
    out = np.empty(graph.n_edges)
    _load_terms(_jit.parallel_threads() > 1)[1](np.ascontiguousarray(W, dtype=float), head, tail, out)
    return out


def laplacian_product(graph, x: np.ndarray, compiled: bool | None = None) -> np.ndarray:
    """``D^T D x`` for one vector ``x`` of node values: one compiled pass on large graphs (no
    ``|E|``-sized temporary), the sparse products below ``gtvcvx._jit.MIN_ENTRIES`` edges.

    ``compiled``: ``None`` by that size; ``True`` at any size (a caller whose compiled kernels
    are loaded anyway: at 10^6 edges the pass takes 3.7 ms, the two sparse products 8.7 ms).
    """
    if compiled is None:
        compiled = graph.n_edges >= _jit.MIN_ENTRIES
    if not compiled:
        return graph.incidence_transpose @ (graph.incidence @ x)
    threads = _jit.parallel_threads()
    out = np.empty(graph.n)
    head, tail = graph.end_columns
    _load_laplacian(threads > 1)(np.ascontiguousarray(x, dtype=float), head, tail, out,
                                 np.empty((threads - 1, graph.n)))
    return out


@cache
def _load_laplacian(parallel: bool):
    """:func:`edge_laplacian` compiled (``parallel``: the threaded build)."""
    (kernel,) = njit(edge_laplacian, purpose="the fast core's edge kernels", parallel=parallel)
    ends = _read_only(np.array([0, 1], dtype=np.int64))  # (Graph.end_columns are read-only)
    kernel(np.zeros(2), ends[:1], ends[1:], np.zeros(2), np.zeros((1, 2)))
    return kernel


@cache
def _load(parallel: bool = False):
    """``(edge_move, edge_gather, edge_scatter)`` compiled by numba (imported here: a lazily loaded
    backend; ``parallel``: the threaded build), the specializations a solve uses loaded now rather
    than inside a timed iteration."""
    kernels = njit(edge_move, edge_gather, edge_scatter, purpose="the fast core's edge kernels", parallel=parallel)
    move, gather, scatter = kernels
    U, X, ends, none = np.zeros((1, 1)), np.zeros((2, 1)), np.array([0, 1], dtype=np.int64), np.zeros(0, np.int64)
    spare = np.zeros((1, 2, 1))
    move(MOVE_HALPERN, 0.0, 0.0, 0.0, U, U.copy(), U.copy())
    gather(X, ends[:1], ends[1:], U)
    scatter(U, U.copy(), ends[:1], ends[1:], none, np.zeros(0, np.uint8), X.copy(), spare, False)
    fixed = _read_only(ends.copy())  # the read-only ends of Graph.end_columns are another numba type
    gather(X, fixed[:1], fixed[1:], U)
    scatter(U, U.copy(), fixed[:1], fixed[1:], none, np.zeros(0, np.uint8), X.copy(), spare, False)
    return kernels


@cache
def _load_fused(parallel: bool = False):
    """:func:`edge_fused_step` compiled (``parallel``: the threaded build), its specializations loaded now
    (edge ends and capacities writable or read-only, as a problem's are; the anchor ``U0`` in double
    precision, or in single precision as large solves keep it, :data:`gtvcvx.solvers.gtv.LARGE_FLOW_ENTRIES`)."""
    (kernel,) = njit(edge_fused_step, purpose="the fast core's edge kernels", parallel=parallel)
    U, X, none = np.zeros((1, 1)), np.zeros((2, 1)), np.zeros(0, np.uint8)
    for ends in (np.array([0, 1], dtype=np.int64), _read_only(np.array([0, 1], dtype=np.int64))):
        for caps in (np.ones(1), _read_only(np.ones(1))):
            for anchor in (U.copy(), U.astype(np.float32)):
                kernel(MOVE_HALPERN, 0.0, 0.0, 0.0, U, U.copy(), anchor, X, ends[:1], ends[1:], caps, 1.0, 1, none)
    return kernel


@cache
def _load_terms(parallel: bool):
    """``(edge_terms, edge_difference_norms)`` compiled (``parallel``: the threaded build)."""
    kernels = njit(edge_terms, edge_difference_norms, purpose="the certificate's edge kernels", parallel=parallel)
    terms, norms = kernels
    X, U = np.zeros((2, 1)), np.zeros((1, 1))
    for ends in (np.array([0, 1], dtype=np.int64), _read_only(np.array([0, 1], dtype=np.int64))):
        for caps in (np.ones(1), _read_only(np.ones(1))):
            terms(X, ends[:1], ends[1:], U, caps, 1, 0.0, np.zeros(1), np.zeros(1))
        norms(X, ends[:1], ends[1:], np.zeros(1))
    return kernels
