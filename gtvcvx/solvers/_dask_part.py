"""One part of a partitioned GTV solve, as it lives on a Dask worker (a Dask actor).

The part keeps its nodes' local data, their models ``W`` and the flows ``U`` of its edges, and
runs the per-node and per-edge work of the restarted Halpern PDHG solver
(:mod:`gtvcvx.solvers.gtv`) with the same floating-point operations in the same order: local
nodes are numbered in global order, local edges too, so the sparse products sum exactly as in
the single-process solver. Between phases it sends the values its neighbours need (its
boundary rows) and returns partial sums for the client's scalar decisions (restarts, primal
weight, certificates).
"""

from __future__ import annotations

import inspect
import os
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from .._threads import blas_threads
from ..capabilities import provides
from ..losses import Loss, build_loss
from ..losses._core import get_loss
from ._edge_kernels import MOVE_HALPERN, MOVE_NONE, MOVE_RESTART, EdgeSweep
from ._kernels import axpy, scal
from ._partition import PartLayout
from .certificate import MinorantBoxes, allowance_partials, bounds_optimum, component_grams, zero_dual_terms, zero_flow_nodes

__all__ = ["PartData", "Part"]


@dataclass(frozen=True)
class PartData:
    """Where a part's local datasets live: a ``.npz`` file opened on the worker, never on the client.

    Parameters
    ----------
    nodes : array of int
        The global node ids whose data the file holds (they become one part).
    path : str
        An ``.npz`` file readable by the worker: labelled losses need ``X`` (m, d), ``y`` (m,)
        and ``node`` (m,), the global node id of every sample (each in ``nodes``; nodes
        without samples have no data); point losses (``squared_distance``) need ``points``
        (len(nodes), d) in the order of ``nodes``. Loaded with ``allow_pickle=False``.
    loss : str
        Name of the loss (a key of :data:`gtvcvx.losses.LOSSES`).
    params : dict
        Its parameters (e.g. Huber's ``delta``).
    label_factor : float
        Labels times this power of two (:meth:`gtvcvx.losses.Loss.scaled`): set by the distributed
        solve for an objective far below 1 (:mod:`gtvcvx.solvers._scaling`); leave it at 1.
    """

    nodes: np.ndarray
    path: str
    loss: str = "squared_error"
    params: dict = field(default_factory=dict)
    label_factor: float = 1.0

    def load(self, own_nodes: np.ndarray) -> Loss:
        """The loss of ``own_nodes`` (sorted) built from the file (runs on the worker)."""
        loss = self._load(own_nodes)
        return loss if self.label_factor == 1.0 else loss.scaled(self.label_factor)

    def _load(self, own_nodes: np.ndarray) -> Loss:
        cls = get_loss(self.loss)
        try:
            with np.load(self.path, allow_pickle=False) as archive:
                arrays = {key: archive[key] for key in archive.files}
        except (OSError, ValueError) as exc:
            raise ValueError(f"part data {self.path!r}: cannot be read as an .npz file ({exc})") from exc
        if cls.data == "points":
            if "points" not in arrays:
                raise ValueError(f"part data {self.path!r}: loss {self.loss!r} needs an array 'points', "
                                 f"the file has {sorted(arrays)}")
            order = np.argsort(np.asarray(self.nodes))
            return build_loss(self.loss, self.params, points=np.asarray(arrays["points"], dtype=float)[order])
        missing = sorted({"X", "y", "node"} - set(arrays))
        if missing:
            raise ValueError(f"part data {self.path!r}: loss {self.loss!r} needs arrays 'X', 'y' and 'node', "
                             f"missing {missing}")
        node = np.asarray(arrays["node"])
        if node.ndim != 1 or not np.issubdtype(node.dtype, np.integer):
            raise ValueError(f"part data {self.path!r}: 'node' must be a 1-d integer array of global node ids")
        local = np.searchsorted(own_nodes, node)
        inside = (local < own_nodes.size) & (own_nodes[np.minimum(local, own_nodes.size - 1)] == node)
        if not inside.all():
            bad = int(node[~inside][0])
            raise ValueError(f"part data {self.path!r}: sample of node {bad}, which is not among the part's nodes")
        return build_loss(self.loss, self.params, stacked=(arrays["X"], arrays["y"], local, own_nodes.size))


#: Seconds a push of boundary rows may take (plus its bytes at PUSH_RATE bytes/s) before the
#: neighbour counts as lost (the client then checks which parts answer and resumes).
PUSH_TIMEOUT = 10.0
PUSH_RATE = 1e8


def _run_inline(coroutine) -> None:
    """Finish a coroutine that never awaits (:meth:`Part.receive`) without an event loop."""
    try:
        coroutine.send(None)
    except StopIteration:
        return
    coroutine.close()
    raise RuntimeError("Part.receive awaited; it must store the rows and return")


class Part:
    """A part's state and its share of every phase of the distributed solver (a Dask actor).

    Parameters
    ----------
    layout : PartLayout
    data : Loss or PartData
        The part's loss (already restricted to ``layout.own_nodes``), or where to load it from.
    penalty : Penalty
    lam : float
    """

    def __init__(self, layout: PartLayout, data, penalty, lam: float):
        self.layout = layout
        self.loss = data.load(layout.own_nodes) if isinstance(data, PartData) else data
        if self.loss.n != layout.own_nodes.size:
            raise ValueError(f"part {layout.index}: the loss covers {self.loss.n} nodes, the part has "
                             f"{layout.own_nodes.size}")
        self.penalty = penalty
        self.lam = float(lam)
        self.d = self.loss.d
        self.zero_flow = False  # whether the certificate in progress is the zero flow's (flow_begin)
        self.caps = np.ascontiguousarray(self.lam * layout.weights)
        m = layout.edge_ids.size
        rows = np.repeat(np.arange(m), 2)
        D = sp.csr_matrix((np.tile([1.0, -1.0], m), (rows, layout.edge_ends.reshape(-1))),
                          shape=(m, layout.ext_nodes.size))
        D.sort_indices()
        self.D = D
        self.Dt = D.T.tocsr()[layout.own_pos]  # divergence rows of the part's own nodes
        self.counted = np.flatnonzero(layout.counted)
        self.all_counted = self.counted.size == m
        rowmap = np.full(layout.ext_nodes.size, -1, dtype=np.int64)
        rowmap[layout.own_pos] = np.arange(layout.own_nodes.size)
        # the dual half-step of the single-process loop, on the part's edges; one thread: the
        # parts of a worker share its cores
        self.sweep = EdgeSweep(layout.edge_ends[:, 0], layout.edge_ends[:, 1], penalty, self.caps,
                               layout.own_nodes.size, self.d, rowmap=rowmap, counted=layout.counted, threads=1)
        self.pending = (MOVE_NONE, 0.0, 0.0, 0.0)  # the move of U, done by the next dual step
        deg = np.maximum(layout.degree, 1).astype(float)
        self.inv_deg = 1.0 / deg
        self.decoupled = (layout.degree == 0) | (self.lam == 0)
        self.ext = np.zeros((layout.ext_nodes.size, self.d))  # own rows and halo rows of an exchange
        self.best = None
        self.peers, self.inbox, self.sent_bytes = None, {}, 0
        self.busy = 0.0  # seconds spent in the iteration's phases (the rest of a round is communication)

    # ---------------------------------------------------------------- setup
    def info(self) -> dict:
        """Facts the client needs (none of them the data): sizes, process, rank deficiency."""
        domain = self.loss.linear_domain()
        constrained = np.zeros(self.loss.n, dtype=bool) if domain is None else domain.rank < self.d
        has_data = self.loss.has_data
        return {"pid": os.getpid(), "d": self.d, "n_own": int(self.layout.own_nodes.size),
                "n_edges": int(self.layout.edge_ids.size), "constrained": constrained,
                "max_terms": int(self.loss.max_terms), "has_data": has_data,
                "bounded": bounds_optimum(self.loss), "nonnegative": provides(self.loss, "nonnegative"),
                "busy": self.busy, "sent_bytes": self.sent_bytes}

    def label_scaling(self) -> dict:
        """Whether this part's loss scales with its labels (:meth:`gtvcvx.losses.Loss.scaled`) and its
        value at ``W = 0`` (a number, not the labels): the client's label scaling of a SiteProblem."""
        with np.errstate(all="ignore"):
            at_zero = float(self.loss.value(np.zeros((self.loss.n, self.d))))
        return {"scalable": provides(self.loss, "scaled"), "value_at_zero": at_zero}

    def start(self, W, U, omega: float, knorm: float, eta: float) -> None:
        """Initial point: ``W`` (n_own, d) and ``U`` (n_edges_local, d), flows clipped into capacities."""
        self.W = np.ascontiguousarray(W, dtype=float)
        U = np.ascontiguousarray(U, dtype=float)
        self.U = self.penalty.project_conjugate_domain(U, self.caps) if U.shape[0] else U
        self.DtU = self.Dt @ self.U
        self.W0, self.U0, self.DtU0 = self.W.copy(), self.U.copy(), self.DtU.copy()
        self.Up = np.empty_like(self.U)
        self.Wp = self.W
        self.DtUp = np.empty_like(self.DtU)
        self.pending = (MOVE_NONE, 0.0, 0.0, 0.0)
        self.eta = float(eta)
        self.set_steps(omega, knorm)

    def set_steps(self, omega: float, knorm: float) -> None:
        """``tau_i = eta / (omega knorm deg_i)`` (long steps at decoupled nodes), ``sigma = eta omega / (2 knorm)``."""
        self.omega, self.knorm = float(omega), float(knorm)
        self.tau = np.where(self.decoupled, 1e8, (self.eta / (omega * knorm)) * self.inv_deg)
        self.tau_col = self.tau[:, None]
        self.sigma = self.eta * omega / (2.0 * knorm)

    # ---------------------------------------------------------------- one iteration
    def primal_step(self, move, omega: float, knorm: float, threads: int | None = 1) -> dict:
        """Move to the next point (``move``), then ``W+ = prox(W - tau D^T U)``; send ``sigma (2 W+ - W)``.

        ``move`` is ``None`` (first iteration), ``("restart",)``, ``("halpern", k, rho)`` or
        ``("pdhg",)``, exactly as the single-process loop's last block.
        """
        started = time.perf_counter()
        with blas_threads(threads):
            if move is not None:
                self._move(move)
            if (omega, knorm) != (self.omega, self.knorm):
                self.set_steps(omega, knorm)
            self.Wp = self.loss.prox_warm(self.W - self.tau_col * self.DtU, self.tau, self.Wp)
            self.X = self.sigma * (2.0 * self.Wp - self.W)
            sends = self._sends(self.X, "X")
        self.busy += time.perf_counter() - started
        return sends

    def dual_step(self, halos: dict, residual: bool, finite: bool, threads: int | None = 1) -> dict:
        """``U+ = prox_{sigma G*}(U + sigma D X)`` on every local edge, ``D^T U+`` at the own nodes,
        and (if asked) the partial sums of the fixed-point residual and a finiteness check."""
        started = time.perf_counter()
        with blas_threads(threads):
            self._fill(self.X, self._halos(halos, "X"))
            move, a, b, rho = self.pending
            edge_residual = self.sweep(move, self.U, self.Up, self.U0, self.ext, self.sigma, self.DtUp, a, b, rho)
            self.pending = (MOVE_NONE, 0.0, 0.0, 0.0)
            out = {}
            if residual:
                dW = self.W - self.Wp
                out["node_diag"] = float(np.einsum("nd,nd->n", dW, dW) @ (1.0 / self.tau))
                out["edge_diag"] = edge_residual
                out["cross"] = float(np.vdot(dW, self.DtU - self.DtUp))
            if finite:
                out["finite"] = bool(np.isfinite(self.DtUp).all())
        self.busy += time.perf_counter() - started
        return out

    def restart_moves(self) -> tuple[float, float]:
        """Squared distances moved in the epoch: ``sum deg_i ||w+_i - w0_i||^2`` and ``sum_e ||u+_e - u0_e||^2``."""
        dW = self.Wp - self.W0
        dU = self.Up - self.U0
        dU = dU if self.all_counted else dU[self.counted]
        return float(np.einsum("nd,nd->n", dW, dW) @ (1.0 / self.inv_deg)), float(np.einsum("ed,ed->", dU, dU))

    def _move(self, move) -> None:
        kind = move[0]
        if kind == "restart":
            self.W, (self.DtU, self.DtUp) = self.Wp, (self.DtUp, self.DtU)
            self.W0 = self.W.copy()
            np.copyto(self.DtU0, self.DtU)
            self.pending = (MOVE_RESTART, 0.0, 0.0, 0.0)  # U <- U+, U0 <- U+
        elif kind == "halpern":
            k_in_epoch, rho = move[1], move[2]
            a = k_in_epoch / (k_in_epoch + 1.0)
            b = 1.0 - a
            self.W = a * ((1.0 + rho) * self.Wp - rho * self.W) + b * self.W0
            scal(-a * rho, self.DtU)
            axpy(self.DtUp, self.DtU, a * (1.0 + rho))
            axpy(self.DtU0, self.DtU, b)
            self.pending = (MOVE_HALPERN, a, b, rho)
        else:  # plain PDHG
            self.W, (self.DtU, self.DtUp) = self.Wp, (self.DtUp, self.DtU)
            self.U, self.Up = self.Up, self.U
            self.pending = (MOVE_NONE, 0.0, 0.0, 0.0)

    def _fill(self, X_own, halos: dict) -> None:
        self.ext[self.layout.own_pos] = X_own
        for q, rows in halos.items():
            self.ext[self.layout.receive[q]] = rows

    # ---------------------------------------------------------------- certificates
    def setup_certificate(self, constrained_ext: np.ndarray, component: np.ndarray, dist_unit: np.ndarray,
                          n_components: int, power: float, any_constrained: bool) -> None:
        """Graph facts the certificate needs: which nodes of the part and its halo have linear
        conjugate constraints (``rank(X_i) < d``), whether any node of the problem has, and the
        own nodes' components and unit distances for the residual allowance
        (:class:`gtvcvx.solvers.certificate.ResidualAllowance`). A part without constrained
        nodes takes part in the projection with empty blocks (it relays zeros)."""
        self.component, self.dist_unit = component, dist_unit
        self.n_components, self.power = int(n_components), float(power)
        self.boxes = MinorantBoxes(self.loss, component, self.n_components, dist_unit)
        ext_mask = np.asarray(constrained_ext, dtype=bool)
        own_mask = ext_mask[self.layout.own_pos]
        self.coupled = ext_mask[self.layout.edge_ends].any(axis=1)  # edges touching a constrained node
        self.C_own = np.flatnonzero(own_mask)
        self.constrained = bool(any_constrained)
        self.multipliers = None
        Dt_C = self.Dt[self.C_own]
        # S N L_C N S restricted to the own constrained rows; columns over the whole halo, where
        # the exchanged rows are zero at unconstrained nodes
        self.L = (Dt_C @ self.D).tocsr()
        self.Dt_C = Dt_C
        self.row_scale = np.sqrt(self.inv_deg[self.C_own])[:, None]
        domain = self.loss.linear_domain()
        basis = np.zeros((0, self.d, self.d)) if domain is None else domain.basis[self.C_own]
        self.Q, self.Qt = basis, np.ascontiguousarray(np.swapaxes(basis, 1, 2))

    def _outside(self, R: np.ndarray) -> np.ndarray:
        return R - np.matmul(self.Q, np.matmul(self.Qt, R[:, :, None]))[:, :, 0]

    def _T(self, Y: np.ndarray) -> np.ndarray:
        """``N S Y`` of the own constrained rows, as full own rows (zero elsewhere)."""
        out = np.zeros((self.layout.own_nodes.size, self.d))
        out[self.C_own] = self._outside(self.row_scale * Y)
        return out

    def _gram(self, T_ext: np.ndarray) -> np.ndarray:
        return self.row_scale * self._outside(self.L @ T_ext)

    def _ext_of(self, own_rows, halos: dict) -> np.ndarray:
        ext = np.zeros((self.layout.ext_nodes.size, self.d))
        ext[self.layout.own_pos] = own_rows
        for q, rows in halos.items():
            ext[self.layout.receive[q]] = rows
        return ext

    # ---------------------------------------------------------------- boundary exchange
    def connect(self, peers: dict) -> None:
        """Send boundary rows straight to the neighbouring parts (``{q: actor}``) from now on,
        instead of returning them for the client to relay."""
        self.peers = peers
        self.inbox = {}

    async def receive(self, tag: str, source: int, rows) -> None:
        """A neighbour's boundary rows (runs on the worker's event loop, beside a busy phase)."""
        self.inbox[(tag, source)] = rows

    def _sends(self, own_rows, tag: str) -> dict:
        """The rows each neighbour needs: pushed to it directly (returns ``{}``), or returned."""
        sends = {q: own_rows[pos] for q, pos in self.layout.send.items()}
        if self.peers is None:
            return sends
        futures = [(q, self.peers[q].receive(tag, self.layout.index, rows)) for q, rows in sends.items()]
        for q, future in futures:
            if inspect.iscoroutine(future):
                _run_inline(future)  # a part on this worker: Dask calls the method directly
                continue
            try:  # delivered before this phase returns, so before the next phase starts
                future.result(timeout=PUSH_TIMEOUT + sends[q].nbytes / PUSH_RATE)
            except Exception as exc:  # noqa: BLE001 - a neighbour that does not answer is lost
                raise OSError(f"part {q} did not take the boundary rows of part {self.layout.index}: "
                              f"{type(exc).__name__}: {exc}") from exc
        self.sent_bytes += sum(rows.nbytes for rows in sends.values())
        return {}

    def _halos(self, halos, tag: str) -> dict:
        """The neighbours' rows of this exchange: relayed by the client, or from the inbox."""
        if self.peers is None:
            return halos
        return {q: self.inbox.pop((tag, q)) for q in self.layout.receive}

    def flow_begin(self, zero_flow: bool, warm: bool) -> tuple:
        """Clip ``U+`` into the capacities; with constrained nodes start the projection
        ``A A^T Y = A U`` (:class:`gtvcvx.solvers.certificate.FlowProjector`): returns the
        boundary rows of ``N S Y0``, ``||A U||^2`` and the largest clipped entry (partials)."""
        Uc = np.zeros_like(self.Up) if zero_flow else self.penalty.project_conjugate_domain(self.Up, self.caps)
        self.Uc = Uc
        self.zero_flow = zero_flow
        big = float(np.abs(Uc).max(initial=0.0))
        if not self.constrained:
            return {}, {"bb": 0.0, "raw": 0.0, "big": big}
        raw = self._outside(self.Dt_C @ Uc)  # N D^T U at the own constrained nodes
        self.B = self.row_scale * raw
        self.Y = self.multipliers if (warm and self.multipliers is not None) else np.zeros_like(self.B)
        self.TY_own = self._T(self.Y)
        return self._sends(self.TY_own, "TY"), {"bb": float(np.vdot(self.B, self.B)), "raw": float(np.vdot(raw, raw)),
                                                "big": big}

    def cg_residual(self, halos: dict) -> tuple:
        """``R = B - A A^T Y0``; returns the boundary rows of ``N S R`` and ``||R||^2``."""
        halos = self._halos(halos, "TY")
        self.R = self.B - self._gram(self._ext_of(self.TY_own, halos)) if self.Y.any() else self.B.copy()
        self.P = np.zeros_like(self.R)
        self.TP_ext = np.zeros((self.layout.ext_nodes.size, self.d))
        self.TR_own = self._T(self.R)
        return self._sends(self.TR_own, "TR"), float(np.vdot(self.R, self.R))

    def cg_direction(self, halos: dict, beta: float) -> float:
        """``P = R + beta P`` and ``A A^T P`` (the halo of ``N S P`` from its linearity:
        ``N S R + beta N S P_old``); returns ``<P, A A^T P>``."""
        self.P *= beta
        self.P += self.R
        self.TP_ext *= beta
        self.TP_ext += self._ext_of(self.TR_own, self._halos(halos, "TR"))
        self.AP = self._gram(self.TP_ext)
        return float(np.vdot(self.P, self.AP))

    def cg_step(self, alpha: float) -> tuple:
        """``Y += alpha P``, ``R -= alpha A A^T P``; the boundary rows of ``N S R`` and ``||R||^2``."""
        self.Y += alpha * self.P
        self.R -= alpha * self.AP
        self.TR_own = self._T(self.R)
        return self._sends(self.TR_own, "TR"), float(np.vdot(self.R, self.R))

    def flow_send(self) -> dict:
        """Boundary rows of ``N S Y`` (the multipliers the projection found)."""
        self.multipliers = self.Y
        self.TY_own = self._T(self.Y)
        return self._sends(self.TY_own, "TY")

    def flow_correct(self, halos: dict, correct: bool) -> float:
        """``U' = U - A^T Y`` on the local edges (if ``correct``); returns the smallest
        ``c_e / ||u'_e||_*`` over the coupled edges above their capacity (1 if none)."""
        if correct:
            self.Uc = self.Uc - self.D @ self._ext_of(self.TY_own, self._halos(halos, "TY"))
        if not self.penalty.is_norm or not self.Uc.shape[0]:
            return 1.0
        usage = self.penalty._dual_norms(self.Uc)
        hit = (usage > self.caps) & self.coupled
        if not hit.any():
            return 1.0
        with np.errstate(divide="ignore"):
            return float(np.min(self.caps[hit] / usage[hit]))

    def boundary_W(self) -> dict:
        """The rows of ``W+`` the neighbours need for the edge differences ``D W+``."""
        return self._sends(self.Wp, "W")

    def certify(self, halos: dict, alpha: float, threads: int | None = 1) -> dict:
        """This part's share of :func:`gtvcvx.solvers.certificate.certify_pair` at ``(W+, U')``.

        The coupled edges' flows are scaled by the common ``alpha``, the others projected one
        by one into their capacities; node terms at the own nodes, edge terms and values at the
        counted edges. Returns their sums, ``sum_i <w_i, e_i>`` of the node residuals ``e``
        and whether any residual is nonzero.
        """
        with blas_threads(threads):
            penalty, caps = self.penalty, self.caps
            Uf = self.Uc
            if penalty.is_norm and Uf.shape[0]:
                if alpha < 1.0:
                    Uf[self.coupled] *= alpha
                free = (penalty._dual_norms(Uf) > caps) & ~self.coupled
                if free.any():
                    Uf[free] = penalty._prox_conjugate(Uf[free], 1.0, caps[free])
            V = -(self.Dt @ Uf)
            Z = self.D @ self._ext_of(self.Wp, self._halos(halos, "W"))
            counted = slice(None) if self.all_counted else self.counted
            node_gaps, node_residual = self.loss.certify_nodes(self.Wp, V)
            # the zero flow's certificate takes the zero dual point where the loss's left a residual (exact: the
            # fallback where the flow's own is infinite; the single-process certificate chooses per component)
            zero = zero_flow_nodes(self.loss, V, node_gaps, node_residual) if self.zero_flow else None
            if zero is not None and zero.any():
                node_gaps, node_residual = zero_dual_terms(zero, self.loss.node_values(self.Wp), node_gaps,
                                                           node_residual)
            edge_gaps = penalty._edge_fenchel_young(Z[counted], Uf[counted], caps[counted])
            self._cert = (self.Wp.copy(), Uf, node_gaps, edge_gaps, V)
            self._residual = node_residual
            return {"node_values": float(self.loss.node_values(self.Wp).sum()),
                    "edge_values": float(penalty._edge_values(Z[counted], caps[counted]).sum()),
                    "node_gaps": float(node_gaps.sum()), "edge_gaps": float(edge_gaps.sum()),
                    "cross": float(np.einsum("nd,nd->", self.Wp, node_residual)),
                    "residual": bool(node_residual.any())}

    def allowance(self, node_scale: np.ndarray, primal: float) -> dict:
        """This part's :func:`gtvcvx.solvers.certificate.allowance_partials` for the latest certificate."""
        W, _, _, _, V = self._cert
        return allowance_partials(self.loss, W, V, self._residual, primal, node_scale, self.component,
                                  self.n_components, self.dist_unit, self.power)

    def minorant_box(self, comp: int):
        """This part's :class:`gtvcvx.solvers.certificate.MinorantBoxes` box of component ``comp``."""
        return self.boxes(comp)

    def grams(self, comps: np.ndarray) -> np.ndarray:
        """This part's share of ``G_C = sum_{i in C} B_i B_i^T`` for the components ``comps``."""
        return component_grams(self.loss, self.component, comps)

    def keep_best(self) -> None:
        """Remember the latest certificate as the best so far (the client compared the gaps)."""
        self.best = self._cert

    def result(self) -> dict:
        """The best certificate's pieces: ``W`` of the own nodes, the counted edges' flows and gaps,
        and the partial sums of the stationarity residual."""
        W, Uf, node_gaps, edge_gaps, V = self.best
        counted = slice(None) if self.all_counted else self.counted
        res = self.loss.node_stationarity(W, V)
        return {"W": W, "U": Uf[counted], "edge_ids": self.layout.edge_ids[counted], "node_gaps": node_gaps,
                "edge_gaps": edge_gaps, "stationarity_sq": float(np.sum(res * res)),
                "divergence_sq": float(np.einsum("nd,nd->", V, V))}

    # ---------------------------------------------------------------- checkpoints
    _STATE = ("W", "U", "DtU", "W0", "U0", "DtU0", "Wp")

    def checkpoint(self, path: str, move) -> str:
        """Apply the pending ``move`` (see :meth:`primal_step`), then write the iteration state and
        the best certificate to ``path`` (an .npz), atomically."""
        if move is not None:
            self._move(move)
        self.sweep.move(*self.pending[:1], self.U, self.Up, self.U0, *self.pending[1:])  # U as the state has it
        self.pending = (MOVE_NONE, 0.0, 0.0, 0.0)
        arrays = {name: getattr(self, name) for name in self._STATE}
        if self.best is not None:
            arrays.update(zip(("best_W", "best_U", "best_node_gaps", "best_edge_gaps", "best_V"), self.best))
        tmp = f"{path}.tmp-{os.getpid()}.npz"
        np.savez(tmp, **arrays)
        os.replace(tmp, path)
        os.chmod(path, 0o644)
        return path

    def restore(self, path: str, omega: float, knorm: float, eta: float) -> None:
        """Continue from a checkpoint written by :meth:`checkpoint` (on this or another worker)."""
        with np.load(path, allow_pickle=False) as archive:
            state = {key: archive[key] for key in archive.files}
        self.eta = float(eta)
        for name in self._STATE:
            setattr(self, name, np.ascontiguousarray(state[name]))
        self.Up = np.empty_like(self.U)
        self.DtUp = np.empty_like(self.DtU)
        self.pending = (MOVE_NONE, 0.0, 0.0, 0.0)
        names = ("best_W", "best_U", "best_node_gaps", "best_edge_gaps", "best_V")
        self.best = tuple(state[k] for k in names) if names[0] in state else None
        self.omega = None
        self.inbox = {}  # rows of the interrupted round
        self.set_steps(omega, knorm)
