"""The GTV minimization problem and its network-flow dual."""

from __future__ import annotations

import hashlib
from functools import cached_property

import numpy as np

from ._validation import as_float_array, check_nonnegative_scalar
from .graph import Graph
from .losses import LOSSES, Loss
from .penalties import PENALTIES, Penalty

__all__ = ["GTVProblem"]


class GTVProblem:
    r"""Generalized total variation minimization over a weighted graph.

    Parameters
    ----------
    graph : Graph
        Graph with ``n`` nodes and edge weights ``A_e``.
    loss : Loss
        Local losses for exactly ``graph.n`` nodes.
    penalty : Penalty
        Edge penalty ``phi``.
    lam : float
        Regularization strength ``lam >= 0``.

    Notes
    -----
    Primal (GTV minimization), with incidence matrix ``D``:

    .. math:: \min_W \; P(W) = \sum_i L_i(w_i) + \lambda \sum_e A_e \, \phi((DW)_e).

    Network-flow dual, with flows ``U`` (|E| x d) and capacities ``c_e = lam A_e``:

    .. math:: \max_U \; -\sum_i L_i^*(-(D^T U)_i) - \sum_e c_e \phi^*(U_e / c_e).

    For a norm penalty the last term is the indicator of ``||U_e||_* <= c_e``; a node without
    data has ``L_i^* = \iota_{\{0\}}`` (flow conservation). Strong duality holds, and the gap
    at any ``(W, U)`` is the sum of the node and edge Fenchel-Young terms,
    ``P(W) - D(U) = \sum_i FY_{L_i}(w_i, -(D^TU)_i) + \sum_e FY_{\phi_e}((DW)_e, U_e)``.

    References
    ----------
    .. [1] Y. SarcheshmehPour, Y. Tian, L. Zhang, A. Jung, "Clustered federated learning via
       generalized total variation minimization", IEEE Trans. Signal Processing 71, 2023.
    """

    def __init__(self, graph: Graph, loss: Loss, penalty: Penalty, lam: float):
        if not isinstance(graph, Graph):
            raise TypeError(f"graph must be a gtvcvx.Graph, got {type(graph).__name__}")
        if not isinstance(loss, Loss):
            raise TypeError(f"loss must be a gtvcvx loss (a gtvcvx.losses.Loss, e.g. one of "
                            f"{sorted(LOSSES)}), got {type(loss).__name__}")
        if not isinstance(penalty, Penalty):
            raise TypeError(f"penalty must be a gtvcvx penalty (a gtvcvx.penalties.Penalty, e.g. one of "
                            f"{sorted(PENALTIES)}), got {type(penalty).__name__}")
        if loss.n != graph.n:
            raise ValueError(f"the loss covers {loss.n} nodes but the graph has {graph.n} nodes")
        penalty.check_dimension(loss.d)
        self.graph = graph
        self.loss = loss
        self.penalty = penalty
        self.lam = check_nonnegative_scalar(lam, "lam")

    # ------------------------------------------------------------------ sizes
    @property
    def n(self) -> int:
        return self.graph.n

    @property
    def d(self) -> int:
        return self.loss.d

    @property
    def n_edges(self) -> int:
        return self.graph.n_edges

    @cached_property
    def capacities(self) -> np.ndarray:
        """Per-edge scale ``c_e = lam * A_e`` (the flow capacities for norm penalties)."""
        out = self.lam * self.graph.weights
        out.flags.writeable = False
        return out

    def with_lam(self, lam: float) -> "GTVProblem":
        """The same problem with another ``lam`` (shares graph, loss and penalty)."""
        return GTVProblem(self.graph, self.loss, self.penalty, lam)

    # ------------------------------------------------------------------ checks
    def check_W(self, W, name: str = "W") -> np.ndarray:
        """``W`` as a finite float64 (n, d) array, or a ValueError naming ``name``."""
        return as_float_array(W, name, shape=(self.n, self.d))

    def check_U(self, U, name: str = "U") -> np.ndarray:
        """``U`` as a finite float64 (|E|, d) array, or a ValueError naming ``name``."""
        return as_float_array(U, name, shape=(self.n_edges, self.d))

    # ------------------------------------------------------------------ objectives
    def differences(self, W) -> np.ndarray:
        """``D W``: ``w_i - w_j`` for every edge ``{i, j}``, shape (|E|, d)."""
        return self.graph.incidence @ self.check_W(W)

    def divergence(self, U) -> np.ndarray:
        """``D^T U``: net flow out of every node, shape (n, d)."""
        return self.graph.incidence.T @ self.check_U(U)

    def objective(self, W) -> float:
        """Primal objective ``P(W)``."""
        W = self.check_W(W)
        return self.loss.value(W) + self.penalty.value(self.graph.incidence @ W, self.capacities)

    def flow_scale(self, U) -> float:
        """Magnitude below which a node's net flow is rounding error: ``max deg * max ||U_e||``."""
        if self.n_edges == 0:
            return 0.0
        return float(self.graph.degree.max() * max(U.max(), -U.min()))

    @cached_property
    def node_flow_bound(self) -> np.ndarray:
        """Largest ``||(D^T U)_i||_2`` of a dual-feasible flow at each node (``inf`` when the
        penalty does not bound flows): the scale of node flows, from the problem's own data."""
        if self.n_edges == 0:
            return np.zeros(self.n)
        edge_bound = self.penalty.flow_bound(self.capacities, self.d)
        return np.bincount(self.graph.edges.reshape(-1), np.repeat(edge_bound, 2), minlength=self.n)

    def dual_objective(self, U, *, hint=None) -> float:
        """Network-flow dual objective ``D(U)``; ``-inf`` when ``U`` is outside the dual domain.

        Net flows within rounding error (``DOMAIN_RTOL`` relative to :attr:`node_flow_bound`, the
        problem's own scale, never the magnitude of ``U``) of the conjugates' linear
        constraints are evaluated at their projection. ``hint`` (n, d), e.g. the primal point
        recovered with ``U``, helps losses whose conjugate is computed iteratively (their value
        is then an upper bound, so ``D(U)`` stays a valid lower bound). A report value; certificates use
        :func:`gtvcvx.solvers.certificate.certify_pair`, which needs no tolerance.
        """
        U = self.check_U(U)
        V = -(self.graph.incidence.T @ U)
        bound = self.node_flow_bound
        scale = np.where(np.isfinite(bound), bound, self.flow_scale(U))
        loss_part = self.loss.conjugate(V, scale=scale, hint=None if hint is None else self.check_W(hint))
        pen_part = self.penalty.conjugate(U, self.capacities)
        total = loss_part + pen_part
        return -total if np.isfinite(total) else -np.inf

    def digest(self) -> str:
        """SHA-256 (hex) of everything that defines the problem: graph, loss data, penalty, ``lam``.

        Equal digests mean the same optimization problem (same class of loss and penalty, equal
        arrays bit for bit); it is the key of content-addressed caches. Changing ``lam`` or any
        datum in memory changes it.
        """
        h = hashlib.sha256(b"gtvcvx-problem-v1")
        _digest_update(h, "graph.n", self.graph.n)
        _digest_update(h, "graph.edges", self.graph.edges)
        _digest_update(h, "graph.weights", self.graph.weights)
        _digest_update(h, "lam", self.lam)
        for part, obj in (("loss", self.loss), ("penalty", self.penalty)):
            _digest_update(h, part, f"{type(obj).__module__}.{type(obj).__qualname__}")
            for key, value in sorted(obj.content().items()):
                _digest_update(h, f"{part}.{key}", value)
        return h.hexdigest()

    def __repr__(self) -> str:
        return (f"GTVProblem(n={self.n}, n_edges={self.n_edges}, d={self.d}, loss={type(self.loss).__name__}, "
                f"penalty={type(self.penalty).__name__}, lam={self.lam:g})")


def _digest_update(h, key: str, value) -> None:
    """Feed ``key`` and ``value`` (str, number or array) into a hash, unambiguously."""
    h.update(b"\0" + key.encode() + b"\0")
    if isinstance(value, str):
        h.update(b"s" + value.encode())
    elif isinstance(value, (bool, int, np.integer)):
        h.update(b"i" + str(int(value)).encode())
    elif isinstance(value, (float, np.floating)):
        h.update(b"f" + float(value).hex().encode())
    else:
        arr = np.ascontiguousarray(value)
        h.update(f"a{arr.dtype.str}{arr.shape}".encode())
        h.update(arr.tobytes())
