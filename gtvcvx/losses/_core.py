"""Local losses ``L_i``, batched over all nodes, in the shared vocabulary of gtvcvx.

Every loss answers, for an ``n x d`` array ``W`` (row ``i`` = ``w^(i)``):

``node_values(W)`` / ``value(W)``
    ``L_i(w_i)`` per node, and their sum.
``gradient(W)``
    ``grad L_i(w_i)`` per node (a subgradient for losses without the ``smooth`` trait).
``prox(V, step)``
    ``argmin_w L_i(w) + ||w - v_i||^2 / (2 step_i)`` per node; ``step`` is a scalar or one per node.
``node_conjugates(V)`` / ``conjugate(V)``
    ``L_i^*(v_i)``; ``+inf`` outside the domain of ``L_i^*`` (never a bool).
``prox_conjugate(Z, step)``
    Moreau: ``prox_{step L^*}(z) = z - step * prox_{L / step}(z / step)``.
``project_conjugate_domain(V)``
    Euclidean projection onto the affine hull where ``L_i^*`` can be finite (the linear
    constraints of the flow problem: ``range(X_i^T)``; ``{0}`` at a node without data).
``node_fenchel_young(W, V)``
    ``L_i(w_i) + L_i^*(v_i) - <w_i, v_i> >= 0``, computed in a cancellation-free form where possible.
``cvxpy_expr(W)`` / ``cvxpy_conjugate(V)``
    The sum of the losses, and of their conjugates (an expression and its constraints), for the
    declarative CVXPY reference. CVXPY is imported lazily.

Nothing here imports a solver or CVXPY at module import time.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from functools import cached_property

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from dataclasses import dataclass

from .._accurate import abs_max, gathered_residuals_dot2, node_residual_sums_dot2
from .._validation import MAX_ELEMENTS, as_float_array, as_index_array, check_memory, check_positive_int
from ..capabilities import CapabilityError, optional, registrar
from .. import _jit
from . import _compiled

__all__ = ["Loss", "LinearDomain", "SquaredError", "Logistic", "SquaredDistance", "DOMAIN_RTOL", "LOSSES",
           "register_loss", "get_loss", "build_loss"]

#: Relative tolerance for deciding that a point lies in the domain of a conjugate.
DOMAIN_RTOL = 1e-9


@dataclass(frozen=True)
class LinearDomain:
    """Per-node subspaces ``dom L_i^* = span(basis[i][:, :rank[i]])`` (the flow constraints).

    Attributes
    ----------
    basis : ndarray (n, d, r)
        Orthonormal columns, zero-padded beyond each node's rank.
    rank : ndarray (n,)
        ``rank[i] < d`` marks a constrained node (``0``: no data, flow conservation).
    """

    basis: np.ndarray
    rank: np.ndarray


def _domain_limit(V, scale) -> np.ndarray:
    """``DOMAIN_RTOL * scale``: the distance to a conjugate's domain that counts as rounding
    (``scale``: a number or one per node; default the largest row norm of ``V``)."""
    if scale is None:
        scale = float(np.linalg.norm(V, axis=1).max(initial=0.0))
    return DOMAIN_RTOL * np.maximum(np.asarray(scale, dtype=float), np.finfo(float).tiny)


def _as_step(step, n: int) -> np.ndarray:
    """Step sizes as an (n, 1) column; a scalar is broadcast. Must be finite and > 0."""
    arr = np.asarray(step, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.shape != (n,):
        raise ValueError(f"step must be a scalar or have shape ({n},), got {arr.shape}")
    if not (np.isfinite(arr).all() and (arr > 0).all()):
        raise ValueError("step must be finite and > 0")
    return arr[:, None]


class Loss(ABC):
    """Base class: a sum of local losses ``sum_i L_i(w_i)`` over ``n`` nodes in dimension ``d``."""

    n: int
    d: int
    #: Short name used in specs and reports.
    name: str = "loss"
    #: Declared properties (see :data:`gtvcvx.capabilities.TRAITS`).
    traits: tuple = ()
    #: What the loss is built from: ``"labelled"`` (per-node ``X``, ``y``) or ``"points"``.
    data: str = "labelled"
    #: Conic form for the direct interior-point solve (:mod:`gtvcvx.solvers.interior`,
    #: one of its ``LOSS_FORMS``); ``None``: the loss has none and that solve does not apply.
    conic_form: str | None = None

    # -- shape checks -----------------------------------------------------------------
    def _check_W(self, W, name: str = "W") -> np.ndarray:
        return as_float_array(W, name, shape=(self.n, self.d))

    # -- values -----------------------------------------------------------------------
    @abstractmethod
    def node_values(self, W) -> np.ndarray:
        """``L_i(w_i)`` for every node, shape (n,)."""

    def value(self, W) -> float:
        """``sum_i L_i(w_i)``."""
        return float(self.node_values(W).sum())

    @abstractmethod
    def gradient(self, W) -> np.ndarray:
        """``grad L_i(w_i)`` for every node, shape (n, d)."""

    @abstractmethod
    def prox(self, V, step, *, warm_start=None) -> np.ndarray:
        """Proximal operator ``argmin_w L_i(w) + ||w - v_i||^2 / (2 step_i)`` per node.

        ``warm_start`` (n, d) is a guess of the result for iterative proxes (ignored by closed forms).
        """

    @abstractmethod
    def node_conjugates(self, V, *, scale: float | None = None, hint=None) -> np.ndarray:
        """``L_i^*(v_i)`` per node, ``+inf`` outside the domain.

        ``scale`` sets the absolute size below which a distance to the domain counts as
        rounding error (default: the largest row norm of ``V``); a point within
        ``DOMAIN_RTOL * scale`` of the domain is evaluated at its projection. ``hint`` is an
        (n, d) guess of the maximizing ``w`` (used by losses whose conjugate is computed
        iteratively; ignored by closed forms).
        """

    def conjugate(self, V, *, scale: float | None = None, hint=None) -> float:
        """``sum_i L_i^*(v_i)`` (``+inf`` if any ``v_i`` is outside the domain)."""
        return float(self.node_conjugates(V, scale=scale, hint=hint).sum())

    def prox_warm(self, V, step, warm_start) -> np.ndarray:
        """A prox for iterative solvers: may be inexact when computed iteratively, with an error
        that vanishes as ``warm_start`` approaches the answer (closed forms are exact)."""
        return self.prox(V, step, warm_start=warm_start)

    def prox_conjugate(self, Z, step) -> np.ndarray:
        """``prox_{step L_i^*}(z_i)`` per node via the Moreau identity."""
        Z = self._check_W(Z, "Z")
        tau = _as_step(step, self.n)
        return Z - tau * self.prox(Z / tau, (1.0 / tau)[:, 0])

    def project_conjugate_domain(self, V) -> np.ndarray:
        """Projection onto the linear constraints of ``dom L_i^*`` (identity for full domains)."""
        return self._check_W(V, "V").copy()

    def node_fenchel_young(self, W, V, *, scale=None) -> np.ndarray:
        """Fenchel-Young gaps ``L_i(w_i) + L_i^*(v_i) - <w_i, v_i>`` per node (>= 0).

        ``+inf`` where ``v_i`` is farther than ``DOMAIN_RTOL * scale`` from the domain of
        ``L_i^*`` (``scale``: a number or one per node; default the largest row norm of ``V``).
        Certificates use :meth:`certify_nodes` instead, which never needs a tolerance.
        """
        W = self._check_W(W)
        V = self._check_W(V, "V")
        terms, residual = self.certify_nodes(W, V)
        return np.where(np.linalg.norm(residual, axis=1) <= _domain_limit(V, scale), terms, np.inf)

    def certify_nodes(self, W, V):
        """Fenchel-Young terms at a dual point the loss can evaluate exactly, and the residual.

        Returns ``(terms, residual)``: ``terms[i] = L_i(w_i) + L_i^*(v'_i) - <w_i, v'_i> >= 0``
        computed without cancellation, for a point ``v'_i`` in the domain of ``L_i^*`` close to
        ``v_i``, and ``residual[i] = v_i - v'_i`` (n, d). The certificate accounts for the
        residual with an a-priori bound (see :mod:`gtvcvx.solvers.certificate`), so no
        tolerance decides feasibility. Default (full domain): ``v' = v``, zero residual.
        """
        W = self._check_W(W)
        V = self._check_W(V, "V")
        terms = self.node_values(W) + self.node_conjugates(V, hint=W) - np.einsum("nd,nd->n", W, V)
        return np.maximum(terms, 0.0), np.zeros_like(V)

    def node_stationarity(self, W, V) -> np.ndarray:
        """How far each ``v_i`` is from ``d L_i(w_i)``, per node (zero at a subgradient).

        Smooth losses: ``||grad L_i(w_i) - v_i||``. Others: the natural residual
        ``||w_i - prox_{L_i}(w_i + v_i)||``, which is zero exactly when ``v_i`` is a
        subgradient (the prox inverts ``I + d L_i``).
        """
        W = self._check_W(W)
        V = self._check_W(V, "V")
        if "smooth" in self.traits:
            return np.linalg.norm(self.gradient(W) - V, axis=1)
        return np.linalg.norm(W - self.prox(W + V, 1.0, warm_start=W), axis=1)

    @property
    def max_terms(self) -> int:
        """Most terms summed into one node's value (samples per node; 1 for closed forms),
        for rounding bounds."""
        return 1

    @property
    def data_magnitude(self) -> float:
        """The largest magnitude of the loss's data (features, labels, points; 0 without data): the solver
        and its certificate square them, so beyond :data:`~gtvcvx._validation.MAX_DATA_MAGNITUDE` they
        overflow float64."""
        return 0.0

    def linear_domain(self):
        """The linear constraints of ``dom L_i^*``: ``None`` (full domain everywhere) or a
        :class:`LinearDomain` with an orthonormal basis of each node's subspace."""
        return None

    @optional
    def node_hessians(self, W) -> np.ndarray:
        """``grad^2 L_i(w_i)`` for every node, shape (n, d, d) (smooth losses).

        The certificate moves node duals in this metric where a flow leaves a bounded conjugate
        domain (:func:`gtvcvx.solvers.certificate.anchored_flow`): for a sum over samples the
        move of each sample's dual is then scaled by its own curvature, so samples near the
        domain's boundary barely move.
        """
        raise CapabilityError(f"loss '{self.name}' does not provide node_hessians")

    @optional
    def node_anchor(self, W, V):
        """Node duals in the conjugate's domain near ``V`` and a metric to move them in, ``(G, H)``.

        ``G`` (n, d) is a dual point of every node, exactly in ``dom L_i^*`` (represented from
        the raw data) and built from the primal ``W`` and the flow's node duals ``V``; ``H``
        (n, d, d) is positive semidefinite, and ``G_i + H_i lambda`` stays in the domain for
        moderate ``lambda``: it moves each sample's dual in proportion to its room inside the
        domain. The certificate routes a flow through the graph in this metric
        (:func:`gtvcvx.solvers.certificate.anchored_flow`) where a flow corrected in any other
        leaves a bounded domain (or pays for a residual it cannot avoid).
        """
        raise CapabilityError(f"loss '{self.name}' does not provide node_anchor")

    @optional
    def scaled(self, factor: float) -> "Loss":
        """The loss of the labels (or points) times ``factor``: ``L'_i(factor w) = factor^2 L_i(w)``
        for every ``w`` (losses of quadratic growth in the residual).

        :func:`gtvcvx.solve` solves a problem whose objective at ``W = 0`` is far below 1 in such
        units, with ``factor`` a power of two (exact), so that its relative ``tol`` stays relative
        (:mod:`gtvcvx.solvers._scaling`).
        """
        raise CapabilityError(f"loss '{self.name}' does not provide scaled")

    @optional
    def residual_rounding(self, V) -> np.ndarray:
        """Per node (n,), the largest residual ``||v_i - v'_i||`` of :meth:`certify_nodes` that the rounding of the
        sums defining ``v_i`` and ``v'_i`` explains, for a loss that bounds no optimum by itself: beyond it the
        certificate pays for a residual only through a bound on the optimum (the minorant boxes), and has none
        (an infinite allowance) where they bound nothing. Without it the certificate's own level applies
        (``UNBOUNDED_RTOL`` of the flow's scale)."""
        raise CapabilityError(f"loss '{self.name}' does not provide residual_rounding")

    @optional
    def linear_minorants(self):
        """Per-sample linear lower bounds of the node losses, ``(A, node, weight)``.

        ``A`` (M, d), ``node`` (M,) int and ``weight`` (M,) > 0 with
        ``a_k^T w <= weight_k L_{node_k}(w)`` for every ``w``: for a loss that bounds no optimum
        by itself (:meth:`range_bound` infinite: logistic, hinge), the certificate bounds the
        optimum of a component by a linear program over these half-spaces
        (:class:`gtvcvx.solvers.certificate.ResidualAllowance`), finite where the pooled data
        are not separable.
        """
        raise CapabilityError(f"loss '{self.name}' does not provide linear_minorants")

    def range_bound(self, value_bound: float) -> np.ndarray:
        """Bounds ``B_i >= ||B_i^T w_i||`` for every ``w_i`` with ``L_i(w_i) <= value_bound``.

        ``B_i`` is the node's :meth:`linear_domain` basis (the identity for full domains);
        ``inf`` where the loss gives no bound (e.g. logistic: not coercive). Used to bound
        how far an optimum can be from the origin in the certificate's allowance.
        """
        return np.full(self.n, np.inf)

    # -- CVXPY --------------------------------------------------------------------------
    @abstractmethod
    def cvxpy_expr(self, W):
        """CVXPY expression of ``sum_i L_i(w_i)`` for an (n, d) CVXPY variable ``W``."""

    @abstractmethod
    def cvxpy_conjugate(self, V):
        """``(expression, constraints)`` stating ``sum_i L_i^*(v_i)`` for an (n, d) variable ``V``."""

    # -- structure ------------------------------------------------------------------------
    @abstractmethod
    def subset(self, nodes) -> "Loss":
        """The loss restricted to ``nodes`` (in that order)."""

    @property
    def has_data(self) -> np.ndarray:
        """Boolean mask of nodes whose loss is not identically zero."""
        return np.ones(self.n, dtype=bool)

    @abstractmethod
    def content(self) -> dict:
        """The data that defines the loss, as ``{name: ndarray or scalar}``.

        Two losses of the same class with equal content are the same function; caches key on
        it (:meth:`gtvcvx.GTVProblem.digest`). Derived factorizations are not part of it.
        """

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n={self.n}, d={self.d})"


# ---------------------------------------------------------------------------------------
# Losses with a design matrix per node
# ---------------------------------------------------------------------------------------
#: The per-node factorization runs over blocks of nodes of about this many data entries, so that
#: its temporaries (copies of the block's data, the singular vectors) stay small: at 10^6 nodes of
#: 20 x 10 samples one batched SVD of everything held ~6 GB of them.
FACTOR_BLOCK_ENTRIES = 1 << 22


def _node_blocks(counts, d: int):
    """``(m, nodes)``: the nodes with ``m >= 1`` samples each, in blocks of about
    :data:`FACTOR_BLOCK_ENTRIES` data entries."""
    for m in np.unique(counts[counts > 0]):
        same = np.flatnonzero(counts == m)
        step = max(FACTOR_BLOCK_ENTRIES // int(m * d), 1)
        for start in range(0, same.size, step):
            yield int(m), same[start:start + step]


def _thin_svds(A: np.ndarray):
    """``np.linalg.svd(A, full_matrices=False)`` of a stack ``(g, m, d)``: the same LAPACK routine
    (``gesdd``) on every matrix, the matrices split over numba's threads from
    :data:`gtvcvx._jit.MIN_ENTRIES` entries on (measured, 10^5 matrices of 20 x 10 on two cores:
    3.7 -> 2.0 s, the same factors)."""
    if A.size < _jit.MIN_ENTRIES:
        return np.linalg.svd(A, full_matrices=False)
    g, m, d = A.shape
    k = min(m, d)
    U, S, Vt = np.empty((g, m, k)), np.empty((g, k)), np.empty((g, k, d))
    _compiled.load(_jit.parallel_threads() > 1)["thin_svds"](np.ascontiguousarray(A), U, S, Vt)
    return U, S, Vt


def _check_design_size(what: str, n: int, d: int, counts) -> None:
    """Refuse data beyond the package's limits or the memory budget, before it is stacked."""
    total = int(counts.sum())
    if total * d > MAX_ELEMENTS:
        raise ValueError(f"{total} samples x d = {d} is too large")
    # the stacked data, the per-node SVD factors and the certificate's equilibrated copy
    r = int(min(counts.max(initial=0), d))
    check_memory(8.0 * (2 * total * d + 2 * n * d * r), f"{what}: {total} samples of dimension {d} on {n} nodes")


def _stacked_float64(X: list, y: list, d: int | None, what: str):
    """``(d, counts, X_all, y_all)`` when every ``X[i]`` is a float64 ``(m_i, d)`` array and every
    ``y[i]`` a float64 ``(m_i,)`` array, all finite (generated or split data): stacked with one
    check of the whole, not one per node (10 us per node: 20 s at 10^6 nodes). None otherwise, and
    the per-node checks of the caller then name the node at fault."""
    if not all(type(x) is np.ndarray and x.ndim == 2 and x.dtype == np.float64 for x in X):
        return None
    if not all(type(v) is np.ndarray and v.ndim == 1 and v.dtype == np.float64 for v in y):
        return None
    rows = np.fromiter((x.shape[0] for x in X), dtype=np.int64, count=len(X))
    cols = np.fromiter((x.shape[1] for x in X), dtype=np.int64, count=len(X))
    labels = np.fromiter((v.shape[0] for v in y), dtype=np.int64, count=len(y))
    d = int(cols[0]) if d is None else d
    if d == 0 or (cols != d).any() or (labels != rows).any():
        return None
    _check_design_size(what, len(X), d, rows)
    X_all = np.concatenate(X) if rows.sum() else np.zeros((0, d))
    y_all = np.concatenate(y) if rows.sum() else np.zeros(0)
    if not (np.isfinite(X_all).all() and np.isfinite(y_all).all()):
        return None
    return d, rows, X_all, y_all


class _DesignLoss(Loss):
    """Shared machinery for losses ``L_i(w) = ell_i(X_i w)`` with local data ``(X_i, y_i)``.

    On construction each ``X_i`` is factored once by a thin SVD ``X_i = P_i diag(s_i) Q_i^T``
    (rank-revealing; ``m_i < d`` and ``m_i = 0`` are exact), stored padded to a common rank
    ``r``: ``Q`` (n, d, r), ``s`` (n, r). Columns beyond the rank of ``X_i`` are zero.
    """

    def __init__(self, X, y, d: int | None = None, *, _name_X: str = "X", _name_y: str = "y"):
        if isinstance(X, np.ndarray) and X.ndim == 2:
            raise ValueError(
                f"{_name_X} must be a sequence with one (m_i, d) array per node; for stacked "
                f"arrays use {type(self).__name__}.from_stacked(X, y, node, n)")
        try:
            X = list(X)
            y = list(y)
        except TypeError:
            raise ValueError(f"{_name_X} and {_name_y} must be sequences of per-node arrays") from None
        if len(X) != len(y):
            raise ValueError(f"{_name_X} has {len(X)} nodes but {_name_y} has {len(y)}")
        if len(X) == 0:
            raise ValueError(f"{_name_X} must hold at least one node")
        self.n = len(X)
        if d is not None:
            d = check_positive_int(d, "d")
        stacked = _stacked_float64(X, y, d, type(self).__name__)
        if stacked is not None:  # float64 arrays of matching shapes: stacked without a per-node pass
            d, counts, X_all, y_all = stacked
            self._set_data(d, counts, X_all, y_all)
            return
        Xs, ys = [], []
        for i, (xi, yi) in enumerate(zip(X, y)):
            xi = as_float_array(xi, f"{_name_X}[{i}]")
            if xi.size == 0:
                xi = xi.reshape(0, xi.shape[1] if xi.ndim == 2 else 0)
            elif xi.ndim != 2:
                raise ValueError(f"{_name_X}[{i}] must be a 2-D array (m_i, d), got shape {xi.shape}")
            yi = as_float_array(yi, f"{_name_y}[{i}]")
            if yi.size == 0:
                yi = yi.reshape(0)
            elif yi.ndim != 1:
                raise ValueError(f"{_name_y}[{i}] must be a 1-D array (m_i,), got shape {yi.shape}")
            if yi.shape[0] != xi.shape[0]:
                raise ValueError(f"{_name_y}[{i}] has {yi.shape[0]} labels but {_name_X}[{i}] has "
                                 f"{xi.shape[0]} rows")
            Xs.append(xi)
            ys.append(yi)
        for i, xi in enumerate(Xs):
            if xi.shape[1] == 0 and xi.shape[0] == 0:
                continue  # node without data and without a stated dimension
            if d is None:
                d = xi.shape[1]
            elif xi.shape[1] != d:
                raise ValueError(f"{_name_X}[{i}] has {xi.shape[1]} columns but d = {d} "
                                 "(all nodes must share the dimension d)")
        if d is None or d == 0:
            raise ValueError("no node has data, so d cannot be inferred; pass d=")
        Xs = [x if x.shape[1] == d else x.reshape(0, d) for x in Xs]
        counts = np.array([x.shape[0] for x in Xs], dtype=np.int64)
        _check_design_size(type(self).__name__, self.n, d, counts)
        total = int(counts.sum())
        X_all = np.concatenate([x.reshape(-1, d) for x in Xs]) if total else np.zeros((0, d))
        y_all = np.concatenate(ys) if total else np.zeros(0)
        self._set_data(d, counts, X_all, y_all)

    def _set_data(self, d: int, counts, X_all, y_all) -> None:
        """Keep the stacked data (read-only from here), check the labels and factor every node."""
        self.d = d
        self.counts = counts
        self.X_all, self.y_all = X_all, y_all
        self.node_of_sample = np.repeat(np.arange(self.n), self.counts)
        # the data the factors and the certificates' cached maxima describe: read-only from here
        self.X_all.flags.writeable = self.y_all.flags.writeable = False
        self._validate_labels()
        self._factor()

    @classmethod
    def from_stacked(cls, X, y, node, n: int, **kwargs):
        """Build from stacked samples: ``X`` (M, d), ``y`` (M,), ``node`` (M,) node index of each sample."""
        n = check_positive_int(n, "n")
        X = as_float_array(X, "X", ndim=2)
        y = as_float_array(y, "y", ndim=1)
        node = as_index_array(node, "node", ndim=1)
        if not (X.shape[0] == y.shape[0] == node.shape[0]):
            raise ValueError(f"X, y and node must have the same number of rows, got "
                             f"{X.shape[0]}, {y.shape[0]}, {node.shape[0]}")
        if node.size and (node.min() < 0 or node.max() >= n):
            raise ValueError(f"node indices must be in [0, {n})")
        order = np.argsort(node, kind="stable")
        counts = np.bincount(node, minlength=n)
        splits = np.cumsum(counts)[:-1]
        return cls(np.split(X[order], splits), np.split(y[order], splits), d=X.shape[1], **kwargs)

    def _validate_labels(self) -> None:
        """Losses with the ``classifier`` trait take labels in {-1, +1}; the first other one is named."""
        if "classifier" not in self.traits:
            return
        bad = np.flatnonzero((self.y_all != 1.0) & (self.y_all != -1.0))
        if bad.size:
            k = int(bad[0])
            node = int(self.node_of_sample[k])
            local = k - int(np.concatenate([[0], np.cumsum(self.counts)])[node])
            raise ValueError(f"y[{node}][{local}] = {float(self.y_all[k])!r}: {self.name} labels must be -1 or +1")

    @property
    def X(self) -> tuple:
        """Per-node feature arrays (views of the stacked data)."""
        return tuple(np.split(self.X_all, np.cumsum(self.counts)[:-1]))

    @property
    def y(self) -> tuple:
        """Per-node label arrays (views of the stacked data)."""
        return tuple(np.split(self.y_all, np.cumsum(self.counts)[:-1]))

    @property
    def has_data(self) -> np.ndarray:
        return self.counts > 0

    def _range_from_residual(self, residual_bound) -> np.ndarray:
        """``||Q_i^T w|| <= (||y_i|| + R_i) / s_min(X_i)`` given ``||X_i w - y_i||_2 <= R_i``
        (0 at nodes without data); with a relative margin for rounding."""
        y_norm = np.sqrt(self._node_sums(self.y_all * self.y_all))
        s_min = np.where(self.active, self.s, np.inf).min(axis=1, initial=np.inf)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = (y_norm + residual_bound) / s_min
        return np.where(self.counts > 0, out * (1.0 + 1e-12), 0.0)

    def _params(self) -> dict:
        """Constructor parameters besides the data (e.g. Huber's ``delta``), for :meth:`subset`
        and :meth:`content`."""
        return {}

    def content(self) -> dict:
        return {"d": self.d, "counts": self.counts, "X": self.X_all, "y": self.y_all, **self._params()}

    def subset(self, nodes):
        nodes = as_index_array(nodes, "nodes", ndim=1)
        X, y = self.X, self.y
        return type(self)([X[i] for i in nodes], [y[i] for i in nodes], d=self.d, **self._params())

    # -- factorization ------------------------------------------------------------------
    def _factor(self) -> None:
        """Thin SVD per node, with the rank decided on the column-equilibrated data.

        A relative cutoff ``s_max * max(m, d) * eps`` on the raw singular values would drop a
        feature at 1e-6 next to one at 1e6 although the data determine it (the solver would
        then solve another problem). The rank is therefore the number of singular values of
        ``X_i C_i^{-1}`` (unit columns) above that cutoff: directions below it are within the
        data's own rounding. Nodes whose kept raw singular values fall below the raw rounding
        level, where LAPACK's divide-and-conquer SVD may lose relative accuracy, are factored
        again by the Jacobi SVD ``dgejsv`` (high relative accuracy for column-graded matrices).
        """
        n, d = self.n, self.d
        r = int(min(self.counts.max(initial=0), d))
        eps = np.finfo(float).eps
        self.rank_width = r
        self.Q = np.zeros((n, d, r))
        self.s = np.zeros((n, r))
        self.b = np.zeros((n, r))  # P_i^T y_i on the range of X_i
        self.y_sq = np.zeros(n)
        # the certificates' accurate factors (see _equilibrated), from the SVD that decides the rank
        inv_col, Vs, ss = np.ones((n, d)), np.zeros((n, d, r)), np.zeros((n, r))
        offsets = self._sample_offsets
        graded = []
        for m, nodes in _node_blocks(self.counts, d):  # setup only: two batched SVDs per block
            rows = offsets[nodes][:, None] + np.arange(m)[None, :]
            Xg = self.X_all[rows]  # (g, m, d)
            yg = self.y_all[rows]  # (g, m)
            P, sv, Vt = _thin_svds(Xg)
            k = sv.shape[1]
            col = np.sqrt(np.einsum("gmd,gmd->gd", Xg, Xg))
            col = np.where(col > 0, col, 1.0)
            Xg /= col[:, None, :]  # (a copy of the data: equilibrated in place)
            _, s_eq, Vt_eq = _thin_svds(Xg)
            kept_eq = s_eq > np.maximum(s_eq[:, :1] * max(m, d) * eps, np.finfo(float).tiny)
            rank = kept_eq.sum(axis=1)
            inv_col[nodes] = 1.0 / col
            ss[nodes, :k] = np.where(kept_eq, s_eq, 0.0)
            Vs[nodes, :, :k] = np.swapaxes(Vt_eq, 1, 2) * kept_eq[:, None, :]
            keep = (np.arange(k)[None, :] < rank[:, None]) & (sv > np.finfo(float).tiny)
            self.s[nodes, :k] = np.where(keep, sv, 0.0)
            self.Q[nodes, :, :k] = np.swapaxes(Vt, 1, 2) * keep[:, None, :]
            self.b[nodes, :k] = np.einsum("gmk,gm->gk", P, yg) * keep
            self.y_sq[nodes] = np.einsum("gm,gm->g", yg, yg)
            below = (keep & (sv <= sv[:, :1] * max(m, d) * eps)).any(axis=1)
            graded.extend(int(i) for i in nodes[below])
        for i in graded:  # setup only, and only for column-graded nodes
            self._factor_jacobi(i, offsets)
        self.active = self.s > 0  # (n, r)
        self.rank = self.active.sum(axis=1)
        self._equilibrated = (inv_col, Vs, ss)

    def _factor_jacobi(self, i: int, offsets) -> None:
        """Refactor node ``i`` with LAPACK's Jacobi SVD ``dgejsv`` (keeps its rank)."""
        from scipy.linalg.lapack import dgejsv

        Xi = self.X_all[offsets[i]:offsets[i + 1]]
        yi = self.y_all[offsets[i]:offsets[i + 1]]
        rank = int((self.s[i] > 0).sum())
        tall = Xi.shape[0] >= Xi.shape[1]
        sva, left, right, work, _, info = dgejsv(Xi if tall else Xi.T, joba=1, jobu=0, jobv=0, jobr=1, jobp=1)
        if info != 0:
            return  # keep the divide-and-conquer factors
        sv = sva * (work[0] / work[1])
        U, V = (left, right) if tall else (right, left)  # X = U diag(sv) V^T
        k = min(rank, sv.size)
        self.s[i] = 0.0
        self.Q[i] = 0.0
        self.b[i] = 0.0
        self.s[i, :k] = sv[:k]
        self.Q[i, :, :k] = V[:, :k]
        self.b[i, :k] = U[:, :k].T @ yi

    @cached_property
    def _Qt(self) -> np.ndarray:
        return np.ascontiguousarray(np.swapaxes(self.Q, 1, 2))

    def _coords(self, W) -> np.ndarray:
        """Coordinates ``Q_i^T w_i`` of every row in its node's row space, shape (n, r)."""
        return np.matmul(self._Qt, W[:, :, None])[:, :, 0]

    def _lift(self, C) -> np.ndarray:
        """``Q_i c_i`` for every node, shape (n, d)."""
        return np.matmul(self.Q, C[:, :, None])[:, :, 0]

    def project_conjugate_domain(self, V) -> np.ndarray:
        V = self._check_W(V, "V")
        out = V.copy()
        constrained = self.rank < self.d  # full-rank nodes keep their row exactly
        if constrained.any():
            out[constrained] = np.matmul(self.Q[constrained], np.matmul(
                self._Qt[constrained], V[constrained][:, :, None]))[:, :, 0]
        return out

    def linear_domain(self) -> LinearDomain:
        return LinearDomain(self.Q, self.rank)

    @property
    def max_terms(self) -> int:
        return max(int(self.counts.max(initial=0)), 1)

    # -- accurate evaluation from the raw data (certificates) ------------------------------
    def _sample_residuals(self, W) -> np.ndarray:
        """``y_k - x_k^T w_{i(k)}`` for every sample, in doubled precision (no cancellation).

        The last result is kept (keyed by the bytes of ``W``): a certificate asks for values
        and gradients at the same point.
        """
        return self._memo_samples("residuals", W, lambda: gathered_residuals_dot2(
            self.y_all, self.X_all, W, self.node_of_sample, x_max=self._sample_abs_max))

    def _sample_margins(self, W) -> np.ndarray:
        """``x_k^T w_{i(k)}`` for every sample, in doubled precision."""
        return self._memo_samples("margins", W, lambda: gathered_residuals_dot2(
            np.zeros(self.y_all.size), self.X_all, W, self.node_of_sample, sign=1.0, x_max=self._sample_abs_max))

    @cached_property
    def _sample_abs_max(self) -> float:
        """``max |X|`` over all samples (read-only data: computed once)."""
        return abs_max(self.X_all)

    @property
    def data_magnitude(self) -> float:
        return max(self._sample_abs_max, abs_max(self.y_all))

    def _memo_samples(self, kind, W, compute):
        """``compute()`` (an array, a tuple of arrays or None), or its kept result for the last
        ``(kind, W)`` asked (one slot; the kept arrays read-only)."""
        memo = self.__dict__.get("_sample_memo")
        if memo is not None and memo[0] == kind and memo[1].shape == W.shape and np.array_equal(memo[1], W):
            return memo[2]
        out = compute()
        for array in out if isinstance(out, tuple) else (out,):
            if array is not None:
                array.flags.writeable = False
        self.__dict__["_sample_memo"] = (kind, W.copy(), out)
        return out

    def _node_residual_sums(self, W):
        """``(sum_k r_k^2, sum_k r_k x_k)`` per node for the residuals ``r = y - X w`` at ``W``, in one
        compiled pass over the samples (doubled-precision residuals,
        :func:`gtvcvx._accurate.node_residual_sums_dot2`), or None (few samples, or operands that
        need exponent scaling: the per-sample path). The last result is kept (keyed by the bytes
        of ``W``): a certificate asks for values and gradients at the same point."""
        if self.X_all.size < _jit.MIN_ENTRIES:
            return None
        return self._memo_samples("node_residual_sums", W, lambda: node_residual_sums_dot2(
            self.y_all, self.X_all, W, self._sample_offsets, self._sample_abs_max))

    @cached_property
    def _sample_offsets(self) -> np.ndarray:
        """Where every node's samples start in the stacked arrays, and their end (samples are
        stored node after node, see :meth:`_set_data`); read-only."""
        return _jit.read_only(np.concatenate([[0], np.cumsum(self.counts)]).astype(np.int64))

    def _node_sums(self, per_sample) -> np.ndarray:
        """Sum per-sample values (M,) or rows (M, d) into their nodes."""
        return self._segment @ per_sample

    #: ``_equilibrated`` (set by :meth:`_factor`): accurate factors of ``(X_i^T X_i)^+`` for
    #: certificates, shape-robust to column scaling. ``X_i = Xt_i C_i`` with ``C_i`` the column
    #: norms (1 for zero columns); the thin SVD of the well-scaled ``Xt_i = P S V^T`` keeps singular
    #: values above ``max(m, d) eps s_max`` (the data's own rounding level, the same cut that decides
    #: the rank), so a feature at 1e15 next to one at 1 keeps both. ``(inv_col (n, d), V (n, d, r),
    #: s (n, r))``; ``(X^T X)^+ = C^-1 V S^-2 V^T C^-1``. (Computed with the rank's SVD: a second
    #: batched SVD at the first certificate took 22 s on 10^6 nodes of 20 x 10 data.)

    def _pinv_norm_sq(self, G) -> np.ndarray:
        """``g_i^T (X_i^T X_i)^+ g_i`` per node from the accurate factors (G: (n, d))."""
        inv_col, Vs, ss = self._equilibrated
        coords = np.matmul(np.swapaxes(Vs, 1, 2), (inv_col * G)[:, :, None])[:, :, 0]
        scaled = np.divide(coords, ss, out=np.zeros_like(coords), where=ss > 0)
        return np.einsum("nr,nr->n", scaled, scaled)

    def _domain_ok(self, V, scale) -> np.ndarray:
        outside = np.linalg.norm(V - self._lift(self._coords(V)), axis=1)
        return outside <= _domain_limit(V, scale)

    @cached_property
    def _segment(self) -> sp.csr_matrix:
        """(n, M) matrix summing per-sample quantities into their node."""
        M = self.node_of_sample.size
        return sp.csr_matrix((np.ones(M), (self.node_of_sample, np.arange(M))), shape=(self.n, M))

    @cached_property
    def _block_design(self) -> sp.csr_matrix:
        """Block-diagonal design (M, n*d): row k holds sample k in the columns of its node (C order)."""
        M, d = self.X_all.shape
        rows = np.repeat(np.arange(M), d)
        cols = (self.node_of_sample[:, None] * d + np.arange(d)[None, :]).reshape(-1)
        return sp.csr_matrix((self.X_all.reshape(-1), (rows, cols)), shape=(M, self.n * d))

    def _inv_counts_per_sample(self) -> np.ndarray:
        return 1.0 / self.counts[self.node_of_sample]

    @cached_property
    def _padded(self):
        """Samples padded per node: features in the node's row space ``X_i Q_i`` (n, m_max, r),
        labels (n, m_max) with 0 on padding, a mask, and ``1/m_i`` (0 for nodes without data)."""
        n, r, d = self.n, self.rank_width, self.d
        m_max = int(self.counts.max(initial=0))
        # padded features, their row-space coordinates, and the Newton step's (n, r, m) temporaries
        check_memory(8.0 * n * m_max * (d + 3 * r), f"the {self.name} prox buffers ({n} nodes x up to {m_max} "
                     f"samples x d = {d})")
        position = self._sample_position
        padded = np.zeros((n, m_max, d))
        padded[self.node_of_sample, position] = self.X_all
        Xp = np.matmul(padded, self.Q)  # (n, m_max, r), never a per-sample (d, r) copy of Q
        del padded
        yp = np.zeros((n, m_max))
        mask = np.zeros((n, m_max), dtype=bool)
        yp[self.node_of_sample, position] = self.y_all
        mask[self.node_of_sample, position] = True
        inv_m = np.divide(1.0, self.counts, out=np.zeros(n), where=self.counts > 0)
        return Xp, yp, mask, inv_m

    @cached_property
    def _sample_position(self) -> np.ndarray:
        """Index of every sample within its node (its column in the padded arrays)."""
        return np.arange(self.node_of_sample.size) - self._sample_offsets[self.node_of_sample]

    def _label_minorants(self):
        """:meth:`Loss.linear_minorants` of a classifier ``L_i(w) = (1/m) sum_k phi(y_k x_k^T w)``
        with ``phi(u) >= max(0, -u)`` (logistic, hinge): ``a_k = -y_k x_k``, ``weight_k = m_i``
        (every other sample's term is >= 0)."""
        return (-self.y_all[:, None] * self.X_all, self.node_of_sample,
                self.counts[self.node_of_sample].astype(float))

    def _rows(self, idx):
        """The padded sample arrays of the nodes ``idx`` (all nodes, without copying, for None)."""
        Xp, yp, mask, inv_m = self._padded
        if idx is None:
            return Xp, yp, mask, inv_m
        return Xp[idx], yp[idx], mask[idx], inv_m[idx]


class SquaredError(_DesignLoss):
    """Mean squared error per node: ``L_i(w) = (1/m_i) ||y_i - X_i w||^2`` (``0`` if ``m_i = 0``).

    Parameters
    ----------
    X : sequence of array_like
        ``X[i]`` has shape (m_i, d); ``m_i`` may be smaller than ``d`` or 0 (node without data).
    y : sequence of array_like
        ``y[i]`` has shape (m_i,).
    d : int, optional
        Dimension; needed only when no node holds data.

    Notes
    -----
    With the thin SVD ``X_i = P diag(s) Q^T`` and ``b = P^T y_i``:

    * prox: ``w = v + Q (c - q)``, ``q = Q^T v``, ``c = (q + 2 t s b / m) / (1 + 2 t s^2 / m)``;
    * conjugate: ``L^*(v) = min { y^T z + (m/4) ||z||^2 : X^T z = v }``, finite iff
      ``v in range(X^T)``, equal to ``v^T w_v - L(w_v)`` at ``w_v = beta + (m/2) (X^T X)^+ v``;
    * Fenchel-Young (certificates): the Bregman distance
      ``(m/4) (grad L(w) - v)^T (X^T X)^+ (grad L(w) - v)``, a sum of squares; at
      rank-deficient nodes ``(1/m) ||r + (m/2) z||^2`` at a sample dual ``z`` (``v' = X^T z``).

    The solver's prox uses the SVD factors; every value a certificate reports (``L_i(w)``,
    gradients, Fenchel-Young terms) is computed from the raw ``X_i, y_i`` with residuals in
    doubled precision (:mod:`gtvcvx._accurate`), so a large common offset in ``y`` or features
    on very different scales cannot make the reported numbers wrong.
    """

    name = "squared_error"
    traits = ("smooth", "quadratic", "nonnegative")
    conic_form = "squared_residual"

    def scaled(self, factor: float) -> "SquaredError":
        return type(self)(self.X, [y * factor for y in self.y], d=self.d)

    def _residual_coords(self, W):
        q = self._coords(W)
        return self.b - self.s * q

    def node_values(self, W) -> np.ndarray:
        W = self._check_W(W)
        fitted = self._node_residual_sums(W)
        if fitted is not None:
            sums = fitted[0]
        else:
            res = self._sample_residuals(W)  # from the raw data, doubled precision
            sums = self._node_sums(res * res)
        return np.divide(sums, self.counts, out=np.zeros(self.n), where=self.counts > 0)

    def gradient(self, W) -> np.ndarray:
        W = self._check_W(W)
        coef = np.divide(-2.0, self.counts, out=np.zeros(self.n), where=self.counts > 0)
        fitted = self._node_residual_sums(W)
        if fitted is not None:
            return coef[:, None] * fitted[1]
        return coef[:, None] * self._weighted_sample_sums(self._sample_residuals(W))

    def _weighted_sample_sums(self, weights) -> np.ndarray:
        """``sum_k weights_k x_k`` per node, (n, d): ``X_i^T weights_i`` from the raw data."""
        if self.X_all.size >= _jit.MIN_ENTRIES:  # one pass, no (M, d) temporary
            node = np.ascontiguousarray(self.node_of_sample, dtype=np.int64)
            return _compiled.load()["node_weighted_sums"](self.X_all, np.ascontiguousarray(weights, dtype=float),
                                                          node, np.empty((self.n, self.d)))
        return self._node_sums(self.X_all * weights[:, None])

    def node_hessians(self, W) -> np.ndarray:
        """``(2/m_i) X_i^T X_i`` per node (the same at every ``W``), shape (n, d, d), assembled in
        each node's row space from the thin SVD factors, ``(2/m) Q diag(s^2) Q^T``: ``n d^2 r``
        operations (the solvers' ``d + 1`` probing gradients over every sample took 0.73 s on
        the paper's Table I instance, d = 100)."""
        self._check_W(W)
        check_memory(8.0 * self.n * self.d * self.d, f"the {self.name} node Hessians ({self.n} x {self.d} x {self.d})")
        coef = np.divide(2.0, self.counts, out=np.zeros(self.n), where=self.counts > 0)
        return np.matmul(self.Q * (coef[:, None, None] * self.s[:, None, :] ** 2), self._Qt)

    def prox(self, V, step, *, warm_start=None) -> np.ndarray:
        V = self._check_W(V, "V")
        tau = _as_step(step, self.n)
        rate = np.divide(2.0 * tau[:, 0], self.counts, out=np.zeros(self.n), where=self.counts > 0)
        if self.Q.size >= _jit.MIN_ENTRIES:  # one pass over the factors
            V = np.ascontiguousarray(V)
            threads = _jit.parallel_threads()
            return _compiled.load(threads > 1)["lowrank_quadratic_prox"](self.Q, self.s, self.b, rate, V,
                                                                         np.empty_like(V), threads)
        q = self._coords(V)
        c = (q + rate[:, None] * self.s * self.b) / (1.0 + rate[:, None] * self.s ** 2)
        return V + self._lift(c - q)

    def _scaled_coords(self, V) -> np.ndarray:
        c = self._coords(V)
        return np.divide(c, self.s, out=np.zeros_like(c), where=self.active)

    def _least_squares(self) -> np.ndarray:
        """A least-squares solution ``beta_i = Q diag(1/s) b`` per node (0 where no data)."""
        coef = np.divide(self.b, self.s, out=np.zeros_like(self.b), where=self.active)
        return self._lift(coef)

    def node_conjugates(self, V, *, scale=None, hint=None) -> np.ndarray:
        """``L_i^*(v_i) = v_i^T w_v - L_i(w_v)`` at the maximizer ``w_v = beta + (m/2)(X^T X)^+ v``.

        Evaluated with the residuals of ``w_v`` computed from the raw data (no
        ``||y||^2 - ||P^T y||^2`` cancellation); ``+inf`` outside the domain.
        """
        V = self._check_W(V, "V")
        half_m = 0.5 * self.counts[:, None]
        Wv = self._least_squares() + half_m * self._lift(self._scaled_coords(V) / np.where(self.active, self.s, 1.0))
        out = np.einsum("nd,nd->n", V, Wv) - self.node_values(Wv)
        return np.where(self._domain_ok(V, scale), np.where(self.counts > 0, out, 0.0), np.inf)

    def certify_nodes(self, W, V):
        """Fenchel-Young terms from the raw data: Bregman distances, and sample duals where the
        conjugate's domain is a proper subspace.

        Full-rank nodes: ``v' = v`` and ``L(w) + L^*(v) - <w, v> = (m/4) (g - v)^T (X^T X)^{-1}
        (g - v)`` with ``g = grad L_i(w_i)`` (a sum of squares, from the column-equilibrated
        factorization and a gradient from doubled-precision residuals). Rank-deficient nodes:
        ``v' = X^T z`` for a sample dual ``z`` (see Notes); nodes without data: ``v' = 0``.
        Returns the terms and the residual ``v - v'``.

        Notes
        -----
        ``L^*(X^T z) <= y^T z + (m/4) ||z||^2`` for every ``z``, so
        ``L(w) + L^*(X^T z) - <w, X^T z> <= (1/m) ||r + (m/2) z||^2`` with ``r = y - X w``, a
        sum of squares that holds for the float ``z`` as it is: the dual point is ``X^T z``
        *exactly* (in the reals), and the residual ``v - X^T z`` is summed from the raw data.
        ``z = q - (2/m) r`` with ``q = X h``, ``h = (X^T X)^+ (v - g)``, so that ``X^T z`` is
        the projection of ``v`` onto ``range(X^T)`` and the term equals the Bregman distance
        ``(m/4) ||X h||^2`` up to rounding.

        The Bregman form at a projected ``v'`` is not used on these nodes: ``v'`` rounded is
        not in ``range(X^T)``, and the equilibrated generalized inverse measures such a point
        at an *oblique* projection, which moves it along the range by up to ``|x_max / x_min|``
        times its rounding. One-sample nodes with features 1e-3 and 1e15 gave terms 49 below
        the true Fenchel-Young value at a point with ``P(W) = 2.5e14`` and a certified dual
        of 45 where ``P^* = 7e-5`` (found by the honesty suite's nightly profile).
        """
        W = self._check_W(W)
        V = self._check_W(V, "V")
        G = self.gradient(W)
        with_data = self.counts > 0
        terms = np.where(with_data, 0.25 * self.counts * self._pinv_norm_sq(G - V), 0.0)
        residual = np.where(with_data[:, None], 0.0, V)
        constrained = with_data & (self.rank < self.d)
        if not constrained.any():
            return terms, residual
        c = constrained
        inv_s2 = np.divide(1.0, self.s[c] ** 2, out=np.zeros_like(self.s[c]), where=self.active[c])
        H = np.zeros_like(V)
        coords = inv_s2 * np.matmul(self._Qt[c], (V[c] - G[c])[:, :, None])[:, :, 0]
        H[c] = np.matmul(self.Q[c], coords[:, :, None])[:, :, 0]  # (X^T X)^+ (v - g)
        q = gathered_residuals_dot2(np.zeros(self.y_all.size), self.X_all, H, self.node_of_sample, sign=1.0,
                                    x_max=self._sample_abs_max)
        r = self._sample_residuals(W)
        m = self.counts[self.node_of_sample].astype(float)
        on = c[self.node_of_sample]
        z = np.where(on, q - (2.0 / m) * r, 0.0)
        terms = np.where(c, self._node_sums(np.where(on, (r + 0.5 * m * z) ** 2 / m, 0.0)), terms)
        residual[c] = V[c] - self._weighted_sample_sums(z)[c]
        return terms, residual

    def range_bound(self, value_bound: float) -> np.ndarray:
        """``||Q_i^T w|| <= (||y_i|| + sqrt(m_i L)) / s_min`` whenever ``L_i(w) <= L``."""
        return self._range_from_residual(np.sqrt(self.counts * max(float(value_bound), 0.0)))

    def cvxpy_expr(self, W):
        import cvxpy as cp

        if self.X_all.shape[0] == 0:
            return cp.Constant(0.0)
        pred = self._block_design @ cp.vec(W, order="C")
        weight = np.sqrt(self._inv_counts_per_sample())
        return cp.sum_squares(cp.multiply(weight, self.y_all - pred))

    def cvxpy_conjugate(self, V):
        import cvxpy as cp

        if self.X_all.shape[0] == 0:
            return cp.Constant(0.0), [V == 0]
        z = cp.Variable(self.X_all.shape[0], name="z")
        scale = np.sqrt(0.25 * self.counts[self.node_of_sample])
        expr = self.y_all @ z + cp.sum_squares(cp.multiply(scale, z))
        return expr, [self._block_design.T @ z == cp.vec(V, order="C")]


class Logistic(_DesignLoss):
    """Mean logistic loss per node: ``L_i(w) = (1/m_i) sum_k log(1 + exp(-y_ik x_ik^T w))``.

    Parameters
    ----------
    X : sequence of array_like
        ``X[i]`` has shape (m_i, d); ``m_i = 0`` is a node without data.
    y : sequence of array_like
        Labels in {-1, +1}.
    d : int, optional
        Dimension; needed only when no node holds data.

    Notes
    -----
    The conjugate is a negative entropy over the samples,
    ``L^*(v) = min { (1/m) sum_k [theta_k log theta_k + (1 - theta_k) log(1 - theta_k)] :
    -(1/m) X^T (y * theta) = v, 0 <= theta <= 1 }``. It is evaluated by a batched damped Newton
    method on ``sup_w v^T w - L(w)`` in each node's row space, followed by a minimum-norm
    correction of ``theta`` that satisfies the constraint exactly; the value returned is that
    of a feasible ``theta`` and therefore an upper bound on ``L^*(v)`` that is tight to
    rounding once Newton has converged (so dual values built from it are valid lower bounds).
    Where no feasible ``theta`` is found (``v`` outside or on the boundary of the domain) the
    value is ``+inf``. The prox is a batched Newton solve in the row space. The value uses
    ``logaddexp`` and is overflow-safe.
    """

    name = "logistic"
    traits = ("smooth", "classifier", "no_minimizer_if_separable", "nonnegative")
    conic_form = "logistic_margin"

    @staticmethod
    def _margins(C, rows) -> np.ndarray:
        """``-y_k x_k^T w`` for every (padded) sample of the given rows, from coordinates C."""
        Xp, yp, _, _ = rows
        return -yp * np.matmul(Xp, C[:, :, None])[:, :, 0]

    def _value_coords(self, C, rows=None) -> np.ndarray:
        rows = self._padded if rows is None else rows
        _, _, mask, inv_m = rows
        return np.where(mask, np.logaddexp(0.0, self._margins(C, rows)), 0.0).sum(axis=1) * inv_m

    def _grad_coords(self, C, rows=None) -> np.ndarray:
        rows = self._padded if rows is None else rows
        Xp, yp, mask, inv_m = rows
        weights = np.where(mask, -yp * expit(self._margins(C, rows)), 0.0) * inv_m[:, None]
        return np.matmul(np.swapaxes(Xp, 1, 2), weights[:, :, None])[:, :, 0]

    def _grad_hess_coords(self, C, rows):
        Xp, yp, mask, inv_m = rows
        p = expit(self._margins(C, rows))
        grad_w = np.where(mask, -yp * p, 0.0) * inv_m[:, None]
        hess_w = np.where(mask, p * (1.0 - p), 0.0) * inv_m[:, None]
        Xt = np.swapaxes(Xp, 1, 2)
        return np.matmul(Xt, grad_w[:, :, None])[:, :, 0], np.matmul(Xt * hess_w[:, None, :], Xp)

    def linear_minorants(self):
        """``log(1 + exp(-u)) >= -u``: ``a_k = -y_k x_k``, ``weight_k = m_i``."""
        return self._label_minorants()

    def node_hessians(self, W) -> np.ndarray:
        """``(1/m) X^T diag(s (1 - s)) X`` per node with ``s_k = sigmoid(-y_k x_k^T w)``, (n, d, d)
        (zero for nodes without data), assembled in each node's row space."""
        W = self._check_W(W)
        if self.y_all.size == 0:
            return np.zeros((self.n, self.d, self.d))
        check_memory(8.0 * self.n * self.d * self.d, f"the {self.name} node Hessians ({self.n} x {self.d} x {self.d})")
        _, hess = self._grad_hess_coords(self._coords(W), self._padded)
        return np.matmul(np.matmul(self.Q, hess), self._Qt)

    def node_anchor(self, W, V):
        """The gradients and :meth:`node_hessians` at ``W`` (``V`` is not needed: every
        ``sigmoid`` lies strictly inside ``[0, 1]``, and ``s (1 - s)`` is each sample's room)."""
        return self.gradient(W), self.node_hessians(W)

    def _sample_logits(self, W) -> np.ndarray:
        """``mu_k = -y_k x_k^T w_{i(k)}`` from the raw data (doubled-precision dot products)."""
        return -self.y_all * self._sample_margins(W)

    def node_values(self, W) -> np.ndarray:
        W = self._check_W(W)
        sums = self._node_sums(np.logaddexp(0.0, self._sample_logits(W)))
        return np.divide(sums, self.counts, out=np.zeros(self.n), where=self.counts > 0)

    def gradient(self, W) -> np.ndarray:
        W = self._check_W(W)
        weight = -self.y_all * expit(self._sample_logits(W)) / self.counts[self.node_of_sample]
        return self._node_sums(self.X_all * weight[:, None])

    def certify_nodes(self, W, V):
        """Fenchel-Young terms as Kullback-Leibler divergences, from the raw data.

        A dual point ``theta in [0, 1]^m`` is built per node as in :meth:`node_conjugates`
        (Newton from ``w``, then the minimum-norm correction towards ``v``, clipped into
        ``[0, 1]``); it represents ``v' = -(1/m) X^T (y theta)`` exactly, and
        ``L(w) + negent(theta) / m - <w, v'> = (1/m) sum_k KL(theta_k || sigmoid(mu_k))``
        with ``mu_k = -y_k x_k^T w`` (>= 0 term by term, no cancellation). Returns those
        terms and ``v - v'``. The domain of ``L^*`` is a bounded zonotope, and the loss gives no
        a-priori bound on an optimum (separable data have none): a residual beyond the rounding of
        the sums defining ``v`` and ``v'`` (:meth:`residual_rounding`) is paid for only through the
        box of the component's samples' half-spaces (:meth:`linear_minorants`), and the certificate
        is infinite where that box bounds nothing. (Such nodes were ``+inf`` here, whatever the box:
        on a 20,000-node chain three confidently classified nodes, whose duals the anchored flow could
        not move, kept Clarabel's answer at 1e-8 uncertified; priced through the box it certifies 4e-7.)
        """
        W = self._check_W(W)
        V = self._check_W(V, "V")
        if self.y_all.size == 0:
            return np.zeros(self.n), V.copy()
        c = self._coords(V)
        start = self._coords(W)
        mu = self._sample_logits(W)
        log_p = -np.logaddexp(0.0, -mu)       # log sigmoid(mu)
        log_q = -np.logaddexp(0.0, mu)        # log (1 - sigmoid(mu))
        inv_m = 1.0 / self.counts[self.node_of_sample]
        best_terms, best_vp = None, None
        for C in (start, self._conjugate_newton(c, start, 8)):
            theta = self._corrected_theta(c, C)[self.node_of_sample, self._sample_position]
            with np.errstate(divide="ignore", invalid="ignore"):
                kl = (np.where(theta > 0, theta * (np.log(theta) - log_p), 0.0)
                      + np.where(theta < 1, (1.0 - theta) * (np.log1p(-theta) - log_q), 0.0))
            terms = self._node_sums(np.maximum(kl, 0.0) * inv_m)
            Vp = -self._node_sums(self.X_all * (self.y_all * theta * inv_m)[:, None])
            if best_terms is None:
                best_terms, best_vp = terms, Vp
            else:
                better = terms < best_terms
                best_terms = np.where(better, terms, best_terms)
                best_vp = np.where(better[:, None], Vp, best_vp)
        return best_terms, V - best_vp

    def residual_rounding(self, V) -> np.ndarray:
        """``64 (m + 8) u ((1/m) sum_k ||x_k|| + ||v_i||)``: the rounding of the two sums that define ``v`` and
        ``v'`` (:meth:`certify_nodes`), relative to the data; ``+inf`` at nodes without data (their residual
        is the flow's conservation, not this loss's)."""
        V = self._check_W(V, "V")
        inv_m = 1.0 / self.counts[self.node_of_sample]
        rounding = 64.0 * (self.max_terms + 8) * np.finfo(float).eps * (
            self._node_sums(np.linalg.norm(self.X_all, axis=1) * inv_m) + np.linalg.norm(V, axis=1))
        return np.where(self.has_data, rounding, np.inf)

    def _newton(self, objective, grad_hess, C0, ridge, *, max_iter=60):
        """Batched damped Newton for per-node smooth convex problems in row-space coordinates.

        ``objective(C, idx, rows)`` -> (len(idx),) and ``grad_hess(C, idx, rows)`` ->
        ((k, r), (k, r, r)) evaluate the nodes ``idx`` (C holds their rows, ``rows`` their
        padded samples, gathered once per Newton step); ``ridge`` (n,) is added to the
        Hessian diagonal. Inactive coordinates (beyond a node's rank) stay fixed. Only nodes
        still iterating are evaluated. Once a node's Newton decrement is below
        ``1e-10 (1 + |f|)`` it is in the quadratic region: it takes one last full step (error
        ~ decrement^2, i.e. rounding level) and stops; farther away, steps are damped by an
        Armijo backtracking per node.
        """
        C = C0.copy()
        eye = np.eye(self.rank_width)
        idx = np.arange(self.n)
        for _ in range(max_iter):
            if idx.size == 0:
                break
            Ci = C[idx]
            rows = self._rows(None if idx.size == self.n else idx)
            inactive = ~self.active[idx]
            f = objective(Ci, idx, rows)
            g, H = grad_hess(Ci, idx, rows)
            g = np.where(inactive, 0.0, g)
            H = H + (ridge[idx, None, None] + 1e-300) * eye + inactive[:, :, None] * eye
            try:
                step = -np.linalg.solve(H, g[:, :, None])[:, :, 0]
            except np.linalg.LinAlgError:  # a Hessian singular to working precision (huge margins)
                step = -np.matmul(np.linalg.pinv(H, hermitian=True), g[:, :, None])[:, :, 0]
            decrement = -np.einsum("nr,nr->n", g, step)
            final = decrement <= 1e-10 * (1.0 + np.abs(f))
            t = np.ones(idx.size)
            accepted = final.copy()
            for _ in range(40):  # per-node backtracking (Armijo) for the nodes far from optimum
                if accepted.all():
                    break
                f_trial = objective(Ci + t[:, None] * step, idx, rows)
                accepted |= f_trial <= f - 0.25 * t * decrement
                t = np.where(accepted, t, 0.5 * t)
            C[idx] = np.where(accepted[:, None], Ci + t[:, None] * step, Ci)
            idx = idx[accepted & ~final]  # a stalled line search means rounding level: stop
        return C

    def prox_warm(self, V, step, warm_start) -> np.ndarray:
        """Two Newton steps from ``warm_start`` (quadratic convergence makes the error of the
        next step about the square of how far ``warm_start`` is; inexact but vanishing)."""
        return self.prox(V, step, warm_start=warm_start, max_newton=2)

    def prox(self, V, step, *, warm_start=None, max_newton: int = 60) -> np.ndarray:
        V = self._check_W(V, "V")
        tau = _as_step(step, self.n)[:, 0]
        q = self._coords(V)
        start = q if warm_start is None else self._coords(self._check_W(warm_start, "warm_start"))

        def objective(C, idx, rows):
            diff = C - q[idx]
            return self._value_coords(C, rows) + np.einsum("nr,nr->n", diff, diff) / (2.0 * tau[idx])

        def grad_hess(C, idx, rows):
            grad, hess = self._grad_hess_coords(C, rows)
            return grad + (C - q[idx]) / tau[idx, None], hess

        C = self._newton(objective, grad_hess, start, 1.0 / tau, max_iter=max_newton)
        return V + self._lift(C - q)

    def _unclipped_theta(self, c, C) -> np.ndarray:
        """``theta = sigmoid(margins at C)`` with the minimum-norm correction towards
        ``-(1/m) X^T (y theta) = v`` (row-space coordinates ``c``); padded (n, m_max)."""
        Xp, yp, mask, inv_m = self._padded
        theta = np.where(mask, expit(self._margins(C, self._padded)), 0.0)
        resid = c + np.matmul(np.swapaxes(Xp, 1, 2), (yp * theta * inv_m[:, None])[:, :, None])[:, :, 0]
        inv_s2 = np.divide(1.0, self.s ** 2, out=np.zeros_like(self.s), where=self.active)
        coef = -(resid * inv_s2) * self.counts[:, None]
        return theta + yp * np.matmul(Xp, coef[:, :, None])[:, :, 0]

    def _corrected_theta(self, c, C) -> np.ndarray:
        """:meth:`_unclipped_theta` clipped into [0, 1] (0 on padding)."""
        return np.where(self._padded[2], np.clip(self._unclipped_theta(c, C), 0.0, 1.0), 0.0)

    def _entropy_bound(self, c, C) -> np.ndarray:
        """Upper bound on ``L_i^*`` at row-space coordinates ``c`` from a point ``C``.

        ``theta = sigmoid(margins at C)`` is the exact maximizer for ``v' = grad L(w)``; a
        minimum-norm correction (``m y * Xr (resid / s^2)``, as ``Xr^T Xr = diag(s^2)``) makes
        it satisfy ``-(1/m) X^T (y theta) = v`` exactly. If the corrected theta lies in
        [0, 1] its negative entropy bounds ``L^*(v)`` from above; otherwise ``+inf``.
        """
        _, _, mask, inv_m = self._padded
        theta = self._unclipped_theta(c, C)
        feasible = ~(mask & ((theta < 0.0) | (theta > 1.0))).any(axis=1)
        th = np.clip(theta, 0.0, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            negent = np.where(th > 0, th * np.log(th), 0.0) + np.where(th < 1, (1 - th) * np.log1p(-th), 0.0)
        return np.where(feasible, np.where(mask, negent, 0.0).sum(axis=1) * inv_m, np.inf)

    def _conjugate_newton(self, c, start, max_iter):
        """Damped Newton on ``sup_w v^T w - L(w)`` (row-space coordinates), from ``start``."""

        def objective(C, idx, rows):
            return self._value_coords(C, rows) - np.einsum("nr,nr->n", c[idx], C)

        def grad_hess(C, idx, rows):
            grad, hess = self._grad_hess_coords(C, rows)
            return grad - c[idx], hess

        return self._newton(objective, grad_hess, start, np.full(self.n, 1e-12), max_iter=max_iter)

    def node_conjugates(self, V, *, scale=None, hint=None) -> np.ndarray:
        """Upper bounds on ``L_i^*(v_i)``, tight to rounding once the inner Newton converges.

        Without ``hint``: Newton from 0 (up to 100 steps). With ``hint`` (the primal point,
        as in a certificate, where ``v ~ grad L(w)``): the better of the bound at the hint
        itself and after a few Newton steps from it; both are valid upper bounds.
        """
        V = self._check_W(V, "V")
        ok = self._domain_ok(V, scale)
        out = np.zeros(self.n)
        if self.y_all.size:
            c = self._coords(V)
            if hint is None:
                out = self._entropy_bound(c, self._conjugate_newton(c, np.zeros_like(c), 100))
            else:
                start = self._coords(self._check_W(hint, "hint"))
                out = np.minimum(self._entropy_bound(c, start),
                                 self._entropy_bound(c, self._conjugate_newton(c, start, 8)))
        return np.where(ok, out, np.inf)

    def cvxpy_expr(self, W):
        import cvxpy as cp

        if self.X_all.shape[0] == 0:
            return cp.Constant(0.0)
        pred = self._block_design @ cp.vec(W, order="C")
        return cp.sum(cp.multiply(self._inv_counts_per_sample(), cp.logistic(cp.multiply(-self.y_all, pred))))

    def cvxpy_conjugate(self, V):
        import cvxpy as cp

        if self.X_all.shape[0] == 0:
            return cp.Constant(0.0), [V == 0]
        theta = cp.Variable(self.X_all.shape[0], name="theta")
        inv_m = self._inv_counts_per_sample()
        negent = -cp.entr(theta) - cp.entr(1.0 - theta)
        expr = cp.sum(cp.multiply(inv_m, negent))
        flow = self._block_design.T @ cp.multiply(self.y_all * inv_m, theta)
        return expr, [flow == -cp.vec(V, order="C"), theta >= 0, theta <= 1]


class SquaredDistance(Loss):
    """Squared distance to a point per node: ``L_i(w) = ||w - a_i||^2`` (convex clustering).

    Notes
    -----
    ``prox``: ``(v + 2 t a) / (1 + 2 t)``; ``L^*(v) = v^T a + ||v||^2 / 4`` (full domain);
    Fenchel-Young: ``||w - a - v/2||^2``.
    """

    name = "squared_distance"
    traits = ("smooth", "strongly_convex", "separable_points", "nonnegative")
    data = "points"
    conic_form = "squared_distance"

    def __init__(self, points):
        pts = as_float_array(points, "points", ndim=2, copy=True)  # (frozen below: never the caller's array)
        if pts.shape[0] == 0 or pts.shape[1] == 0:
            raise ValueError(f"points must have shape (n, d) with n, d >= 1, got {pts.shape}")
        self.points = pts
        self.points.flags.writeable = False
        self.n, self.d = pts.shape

    @property
    def data_magnitude(self) -> float:
        return abs_max(self.points)

    def node_values(self, W) -> np.ndarray:
        diff = self._check_W(W) - self.points
        return np.einsum("nd,nd->n", diff, diff)

    def gradient(self, W) -> np.ndarray:
        return 2.0 * (self._check_W(W) - self.points)

    def prox(self, V, step, *, warm_start=None) -> np.ndarray:
        V = self._check_W(V, "V")
        tau = _as_step(step, self.n)
        if V.size >= _jit.MIN_ENTRIES:  # one compiled pass (the fast core's hot path)
            kernel = _compiled.load(_jit.parallel_threads() > 1)["squared_distance_prox"]
            return kernel(np.ascontiguousarray(self.points), np.ascontiguousarray(tau[:, 0]), np.ascontiguousarray(V),
                          np.empty(V.shape))
        # (V + 2 tau a) / (1 + 2 tau) with one (n, d) temporary
        out = np.multiply(2.0 * tau, self.points)
        out += V
        out /= 1.0 + 2.0 * tau
        return out

    def node_conjugates(self, V, *, scale=None, hint=None) -> np.ndarray:
        V = self._check_W(V, "V")
        return np.einsum("nd,nd->n", V, self.points) + 0.25 * np.einsum("nd,nd->n", V, V)

    def node_fenchel_young(self, W, V, *, scale=None) -> np.ndarray:
        return self.certify_nodes(W, V)[0]

    def certify_nodes(self, W, V):
        V = self._check_W(V, "V")
        diff = self._check_W(W) - self.points - 0.5 * V
        return np.einsum("nd,nd->n", diff, diff), np.zeros_like(V)

    def range_bound(self, value_bound: float) -> np.ndarray:
        """``||w_i|| <= ||a_i|| + sqrt(L)`` whenever ``||w_i - a_i||^2 <= L``."""
        norms = np.linalg.norm(self.points, axis=1)
        return (norms + np.sqrt(max(float(value_bound), 0.0))) * (1.0 + 1e-12)

    def cvxpy_expr(self, W):
        import cvxpy as cp

        return cp.sum_squares(W - self.points)

    def cvxpy_conjugate(self, V):
        import cvxpy as cp

        return cp.sum(cp.multiply(self.points, V)) + 0.25 * cp.sum_squares(V), []

    def content(self) -> dict:
        return {"points": self.points}

    def subset(self, nodes):
        nodes = as_index_array(nodes, "nodes", ndim=1)
        return SquaredDistance(self.points[nodes])

    def scaled(self, factor: float) -> "SquaredDistance":
        return SquaredDistance(self.points * factor)


# ---------------------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------------------
#: Every loss by the name specs use.
LOSSES: dict[str, type] = {}
_LOSS_ALIASES = {"least_squares": "squared_error", "logistic_regression": "logistic",
                 "convex_clustering": "squared_distance"}


#: Class decorator: add a :class:`Loss` subclass to :data:`LOSSES` under ``cls.name``.
register_loss = registrar(LOSSES, Loss, "loss")


def get_loss(name: str) -> type:
    """The loss class registered under ``name`` (or an alias); ValueError listing the known ones."""
    key = _LOSS_ALIASES.get(str(name).lower(), str(name).lower())
    if key not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; expected one of {sorted(set(LOSSES) | set(_LOSS_ALIASES))}")
    return LOSSES[key]


def build_loss(name: str, params: dict | None = None, *, X=None, y=None, points=None, stacked=None) -> Loss:
    """Build the loss ``name`` from its data and parameters (what a spec's ``[problem] loss`` says).

    Parameters
    ----------
    name : str
        A key of :data:`LOSSES` or an alias.
    params : dict, optional
        Keyword arguments of the loss's constructor (e.g. ``delta`` of a Huber loss).
    X, y : lists of per-node arrays, optional
        Labelled data (losses with ``data = "labelled"``).
    points : array (n, d), optional
        Point data (losses with ``data = "points"``).
    stacked : tuple (X, y, node, n), optional
        Labelled data stacked over nodes (as read from an ``.npz`` file).

    Raises
    ------
    ValueError
        Unknown loss, a parameter the loss does not take, or data of the wrong kind.
    """
    import inspect

    cls = get_loss(name)
    params = dict(params or {})
    accepted = {p for p in list(inspect.signature(cls.__init__).parameters)[1:]
                if p not in ("X", "y", "d", "points") and not p.startswith("_")}
    unknown = sorted(set(params) - accepted)
    if unknown:
        raise ValueError(f"loss '{cls.name}' takes no parameter {unknown[0]!r}"
                         + (f"; its parameters are {sorted(accepted)}" if accepted else "; it has no parameters"))
    if cls.data == "points":
        if points is None:
            raise ValueError(f"loss '{cls.name}' needs point data ([data] generator 'blobs' or a file with "
                             "'points')")
        return cls(points, **params)
    if stacked is not None:
        return cls.from_stacked(*stacked, **params)
    if X is None:
        raise ValueError(f"loss '{cls.name}' needs labelled data (X, y), not points")
    return cls(X, y, **params)


for _cls in (SquaredError, Logistic, SquaredDistance):
    register_loss(_cls)
