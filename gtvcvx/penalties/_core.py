"""Edge penalties ``phi``, batched over all edges, in the shared vocabulary of gtvcvx.

The GTV term is ``sum_e c_e phi(z_e)`` with per-edge scale ``c_e = lam * A_e >= 0``; every
method takes that ``scale`` (shape (|E|,)) explicitly:

``edge_values(Z, scale)`` / ``value``
    ``c_e phi(z_e)``.
``edge_conjugates(U, scale)`` / ``conjugate``
    ``c_e phi^*(u_e / c_e)``: for a norm, the indicator of ``||u_e||_* <= c_e``
    (``0.0`` / ``inf``); for ``c_e = 0`` the indicator of ``{0}``.
``prox(Z, step, scale)``
    ``prox`` of ``step * c_e * phi`` per edge (``step`` scalar or per edge).
``prox_conjugate(U, step, scale)``
    ``prox`` of ``step * c_e phi^*(. / c_e)``: projection onto the dual-norm ball for norms.
``project_conjugate_domain(U, scale)``
    Euclidean projection onto the domain of the conjugate (the capacity balls).
``edge_fenchel_young(Z, U, scale)``
    ``c_e phi(z_e) + c_e phi^*(u_e / c_e) - <z_e, u_e> >= 0``.
``subgradient_flow(Z, scale, cut)``
    The flow the optimality conditions fix at ``Z`` and the mask of entries they leave free
    (for certifying a candidate ``W`` from any solver).
``flow_bound(scale, d)`` / ``difference_bound(scale)`` / ``l2_lower``
    A-priori bounds used by certificates: the largest ``||u_e||_2`` of a feasible flow, and
    ``||z_e||_2`` from a bound on ``c_e phi(z_e)``.
``cvxpy_expr(Z, scale)`` / ``cvxpy_conjugate(U, scale)``
    The declarative statements for the CVXPY reference (CVXPY imported lazily).

Each public method validates its input and calls an unchecked kernel of the same name with a
leading underscore; the fast core calls the kernels directly in its hot loop.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from .. import _jit
from ..capabilities import CapabilityError, optional, registrar
from .._validation import as_float_array
from . import _compiled

__all__ = ["Penalty", "Norm2", "Norm1", "SquaredNorm2", "CAPACITY_RTOL", "PENALTIES", "register_penalty",
           "get_penalty"]

#: Relative tolerance when testing ``||u_e||_* <= c_e``.
CAPACITY_RTOL = 1e-9
#: A flow whose dual norm is within this fraction of its capacity lies on the ball's face
#: (:meth:`Penalty.face_tangent`).
FACE_RTOL = 1e-6


def _rows(Z, name, scale):
    Z = as_float_array(Z, name, ndim=2)
    scale = np.asarray(scale, dtype=np.float64)
    if scale.shape != (Z.shape[0],):
        raise ValueError(f"scale must have one entry per row of {name} ({Z.shape[0]}), got shape {scale.shape}")
    return Z, scale


def _edge_step(step, n_edges):
    arr = np.asarray(step, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(n_edges, float(arr))
    if arr.shape != (n_edges,) or not (np.isfinite(arr).all() and (arr > 0).all()):
        raise ValueError(f"step must be a positive scalar or have shape ({n_edges},)")
    return arr[:, None]


def _rowdot(A, B):
    return np.einsum("ed,ed->e", A, B)


class Penalty(ABC):
    """Base class for an edge penalty ``phi``."""

    #: Short name used in specs and reports.
    name: str = "penalty"
    #: True when ``phi`` is a norm (conjugate = indicator of the dual-norm ball).
    is_norm: bool = True
    #: Declared properties (see :data:`gtvcvx.capabilities.TRAITS`).
    traits: tuple = ()
    #: Conic form for the direct interior-point solve (:mod:`gtvcvx.solvers.interior`,
    #: one of its ``PENALTY_FORMS``); ``None``: none, and that solve does not apply.
    conic_form: str | None = None

    # -- checked public vocabulary -------------------------------------------------------
    def edge_values(self, Z, scale) -> np.ndarray:
        """``c_e phi(z_e)`` per edge, shape (|E|,)."""
        return self._edge_values(*_rows(Z, "Z", scale))

    def value(self, Z, scale) -> float:
        """``sum_e c_e phi(z_e)``: the GTV term of edge differences ``Z`` (|E|, d) with weights ``scale``."""
        return float(self.edge_values(Z, scale).sum())

    def edge_conjugates(self, U, scale) -> np.ndarray:
        """``c_e phi^*(u_e / c_e)`` per edge (``inf`` outside the domain)."""
        return self._edge_conjugates(*_rows(U, "U", scale))

    def conjugate(self, U, scale) -> float:
        """``sum_e c_e phi^*(u_e / c_e)`` (``inf`` when a flow leaves its domain)."""
        return float(self.edge_conjugates(U, scale).sum())

    def prox(self, Z, step, scale) -> np.ndarray:
        """``argmin_x step c_e phi(x) + ||x - z_e||^2 / 2`` per edge."""
        Z, scale = _rows(Z, "Z", scale)
        return self._prox(Z.copy(), _edge_step(step, Z.shape[0]), scale)

    def prox_conjugate(self, U, step, scale) -> np.ndarray:
        """``argmin_x step c_e phi^*(x / c_e) + ||x - u_e||^2 / 2`` per edge."""
        U, scale = _rows(U, "U", scale)
        return self._prox_conjugate(U.copy(), _edge_step(step, U.shape[0]), scale)

    def project_conjugate_domain(self, U, scale, out: np.ndarray | None = None) -> np.ndarray:
        """Projection of every ``u_e`` onto the domain of the conjugate (a new array, or ``out``:
        a float64 array of ``U``'s shape, e.g. a buffer kept across calls)."""
        U, scale = _rows(U, "U", scale)
        kind = _compiled.ROW_PROJECTIONS.get(self.conjugate_prox_rows) if self.is_norm else None
        if kind is not None and U.size >= _jit.MIN_ENTRIES:  # one compiled pass, no copy first
            out = np.empty(U.shape) if out is None else out
            project = _compiled.load(_jit.parallel_threads() > 1)["project_rows"]
            return project(np.ascontiguousarray(U), np.ascontiguousarray(scale, dtype=float), kind, out)
        if out is None:
            out = U.copy()
        else:
            np.copyto(out, U)
        if self.is_norm:
            return self._prox_conjugate(out, 1.0, scale)
        out[~(scale > 0)] = 0.0
        return out

    def dual_norms(self, U) -> np.ndarray:
        """Row-wise dual norm ``||u_e||_*`` (the capacity usage for norm penalties)."""
        if not self.is_norm:
            raise NotImplementedError(f"{type(self).__name__} is not a norm")
        return self._dual_norms(as_float_array(U, "U", ndim=2))

    def edge_fenchel_young(self, Z, U, scale) -> np.ndarray:
        """``c_e phi(z_e) + c_e phi^*(u_e / c_e) - <z_e, u_e>`` per edge (>= 0)."""
        Z, scale = _rows(Z, "Z", scale)
        U, _ = _rows(U, "U", scale)
        return self._edge_fenchel_young(Z, U, scale)

    # -- unchecked kernels (float64 arrays of matching shapes) ---------------------------
    @abstractmethod
    def _edge_values(self, Z, scale) -> np.ndarray: ...

    @abstractmethod
    def _edge_conjugates(self, U, scale) -> np.ndarray: ...

    @abstractmethod
    def _prox(self, Z, step, scale) -> np.ndarray:
        """In place on ``Z``; ``step`` is a float or an (|E|, 1) column."""

    @abstractmethod
    def _prox_conjugate(self, U, step, scale) -> np.ndarray:
        """In place on ``U``; ``step`` is a float or an (|E|, 1) column. The fast core's hot path."""

    def _dual_norms(self, U) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} is not a norm")

    def _edge_fenchel_young(self, Z, U, scale) -> np.ndarray:
        return self._edge_values(Z, scale) + self._edge_conjugates(U, scale) - _rowdot(Z, U)

    def _ball_indicator(self, U, scale) -> np.ndarray:
        ok = self._dual_norms(U) <= scale * (1.0 + CAPACITY_RTOL) + np.finfo(float).tiny
        return np.where(ok, 0.0, np.inf)

    # -- CVXPY ----------------------------------------------------------------------------
    @abstractmethod
    def cvxpy_expr(self, Z, scale):
        """CVXPY expression of ``sum_e c_e phi(z_e)``."""

    @abstractmethod
    def cvxpy_conjugate(self, U, scale):
        """``(expression, constraints)`` stating ``sum_e c_e phi^*(u_e / c_e)``."""

    # -- a-priori bounds used by certificates ---------------------------------------------
    #: ``mu`` with ``phi(z) >= mu ||z||_2`` (norm penalties only).
    l2_lower: float = 1.0

    #: Geometry of the unit dual-norm ball, for solvers that need more than its projection:
    #: ``"l2"`` (Euclidean ball), ``"linf"`` (box), or None (not a norm). Solvers that need a
    #: geometry refuse others with a message naming it (see :mod:`gtvcvx.capabilities`).
    dual_ball: str | None = None

    #: The form of :meth:`_prox_conjugate` row by row, for the fast core's compiled edge pass
    #: (:mod:`gtvcvx.solvers._edge_kernels`): ``"l2_ball"`` (``u c / max(||u||_2, c)``),
    #: ``"box"`` (clip to ``[-c, c]``), ``"shrink"`` (``u c / (c + step)``), or None (the pass
    #: calls :meth:`_prox_conjugate` on the whole array instead). Must agree with
    #: :meth:`_prox_conjugate` (a contract test checks every registered penalty).
    conjugate_prox_rows: str | None = None

    def dual_ball_radius(self, d: int) -> float:
        """Largest ``||u||_2`` on the unit dual-norm ball in dimension ``d`` (the constant
        ``kappa`` of ``||u||_2 <= kappa ||u||_*``)."""
        return 1.0

    @optional
    def dual_direction(self, B) -> np.ndarray:
        """Rows ``v_k`` with ``phi(v_k) = 1`` and ``<b_k, v_k> = phi_*(b_k)`` (a maximizer of the
        dual-norm pairing), zero rows where ``b_k = 0``."""
        raise CapabilityError(f"penalty '{self.name}' does not provide dual_direction")

    def flow_bound(self, scale, d: int) -> np.ndarray:
        """Per-edge bound on ``||u_e||_2`` over the domain of the conjugate (``inf``: unbounded)."""
        scale = np.asarray(scale, dtype=float)
        if not self.is_norm:
            return np.where(scale > 0, np.inf, 0.0)
        return self.dual_ball_radius(d) * scale

    def difference_bound(self, scale):
        """``(unit, power)`` with ``c_e phi(z_e) <= V  =>  ||z_e||_2 <= unit_e * V**power``.

        For a norm ``unit_e = 1 / (mu c_e)``, ``power = 1``; edges with ``c_e = 0`` bound nothing
        (``inf``). The certificate uses it to bound how far apart optimal models can be.
        """
        scale = np.asarray(scale, dtype=float)
        with np.errstate(divide="ignore"):
            return np.where(scale > 0, 1.0 / (self.l2_lower * scale), np.inf), 1.0

    def subgradient_flow(self, Z, scale, cut: float):
        """The flow the optimality conditions fix at differences ``Z``, and where it is free.

        Returns ``(U, free)``: ``U_e = c_e grad phi(z_e)`` wherever ``phi`` is differentiable at
        ``z_e`` (norms: where ``z_e`` is farther than ``cut`` from the kink), and a boolean
        (|E|, d) mask ``free`` of the entries whose subdifferential is a set (there ``U`` is 0
        and any value in the capacity ball satisfies the conditions).
        """
        Z, scale = _rows(Z, "Z", scale)
        return self._subgradient_flow(Z, scale, float(cut))

    def _subgradient_flow(self, Z, scale, cut):
        raise NotImplementedError(f"{type(self).__name__} does not declare its subgradient flow")

    def face_tangent(self, U, scale, rtol: float = FACE_RTOL):
        """The projection onto the faces of the capacity balls that the flow ``U`` lies on.

        Returns a map ``Delta -> Delta'`` (|E| x d arrays) that removes from every row the
        components normal to the active constraints of ``c_e phi^*(u_e / c_e)`` at ``u_e`` (those
        with the dual norm within ``rtol`` of ``c_e``), or None (not a norm, or no face is
        active): a correction in that subspace changes the edge terms ``c_e phi(z_e) -
        <z_e, u_e>`` only to second order where ``u_e`` is aligned with ``z_e``.

        Notes
        -----
        Used by the certificate's conservation correction
        (:class:`gtvcvx.solvers.certificate.FlowProjector`): where ``u_e`` is at capacity and
        ``Delta_e`` is tangent, ``||u_e + Delta_e||_* = c_e + O(||Delta_e||^2)``.
        """
        if not self.is_norm:
            return None
        U, scale = _rows(U, "U", scale)
        return self._face_tangent(U, scale, float(rtol))

    def _face_tangent(self, U, scale, rtol):
        return None  # no face geometry declared: corrections stay unrestricted

    def check_dimension(self, d: int) -> None:
        """Raise ValueError when the penalty cannot act on differences in ``R^d`` (parametrized
        penalties fix their dimension; the plain norms act on every ``d``)."""

    def content(self) -> dict:
        """The parameters that define the penalty, ``{name: value}`` (none for the plain norms);
        ``get_penalty(name, **content())`` rebuilds it."""
        return {}

    @classmethod
    def example(cls, d: int, rng) -> "Penalty":
        """An instance for dimension ``d`` with parameters drawn from ``rng`` (contract tests)."""
        return cls()

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def __eq__(self, other) -> bool:
        if type(self) is not type(other):
            return False
        mine, theirs = self.content(), other.content()
        return mine.keys() == theirs.keys() and all(np.array_equal(mine[k], theirs[k]) for k in mine)

    def __hash__(self) -> int:
        return hash(type(self).__name__)


class Norm2(Penalty):
    """Euclidean norm ``phi(v) = ||v||_2`` (network Lasso).

    Notes
    -----
    Conjugate: indicator of ``||u||_2 <= c``; prox: block soft-thresholding; dual prox:
    radial projection onto the l2 ball of radius ``c_e``.

    References
    ----------
    .. [1] D. Hallac, J. Leskovec, S. Boyd, "Network Lasso: clustering and optimization in
       large graphs", KDD 2015.
    """

    name = "norm2"
    traits = ("norm",)
    conic_form = "norm2"
    dual_ball = "l2"
    conjugate_prox_rows = "l2_ball"

    def dual_direction(self, B) -> np.ndarray:
        B = np.atleast_2d(np.asarray(B, dtype=float))
        norms = np.linalg.norm(B, axis=1, keepdims=True)
        return np.divide(B, norms, out=np.zeros_like(B), where=norms > 0)

    def _subgradient_flow(self, Z, scale, cut):
        norms = np.sqrt(_rowdot(Z, Z))
        active = norms > cut
        U = np.zeros_like(Z)
        U[active] = scale[active, None] * Z[active] / norms[active, None]
        return U, np.repeat(~active[:, None], Z.shape[1], axis=1)

    def _face_tangent(self, U, scale, rtol):
        norms = np.sqrt(_rowdot(U, U))
        active = (norms >= scale * (1.0 - rtol)) & (norms > 0)
        if not active.any():
            return None
        normals = np.divide(U, norms[:, None], out=np.zeros_like(U), where=active[:, None])
        return lambda delta: delta - normals * _rowdot(normals, delta)[:, None]

    def _dual_norms(self, U):
        return np.sqrt(_rowdot(U, U))

    def _edge_values(self, Z, scale):
        return scale * np.sqrt(_rowdot(Z, Z))

    def _edge_conjugates(self, U, scale):
        return self._ball_indicator(U, scale)

    def _prox(self, Z, step, scale):
        thresh = np.asarray(step).reshape(-1) * scale
        norms = np.sqrt(_rowdot(Z, Z))
        factor = np.divide(np.maximum(norms - thresh, 0.0), norms, out=np.zeros_like(norms), where=norms > 0)
        Z *= factor[:, None]
        return Z

    def _prox_conjugate(self, U, step, scale):
        norms = np.sqrt(_rowdot(U, U))
        factor = np.divide(scale, norms, out=np.ones_like(norms), where=norms > scale)
        U *= factor[:, None]
        return U

    def cvxpy_expr(self, Z, scale):
        import cvxpy as cp

        return scale @ cp.norm(Z, 2, axis=1)

    def cvxpy_conjugate(self, U, scale):
        import cvxpy as cp

        return cp.Constant(0.0), [cp.norm(U, 2, axis=1) <= scale]


class Norm1(Penalty):
    """The l1 norm ``phi(v) = ||v||_1``.

    Notes
    -----
    Conjugate: indicator of ``||u||_inf <= c``; prox: soft-thresholding; dual prox: clipping to
    ``[-c_e, c_e]`` elementwise.
    """

    name = "norm1"
    traits = ("norm",)
    conic_form = "norm1"
    dual_ball = "linf"
    conjugate_prox_rows = "box"

    def dual_direction(self, B) -> np.ndarray:
        B = np.atleast_2d(np.asarray(B, dtype=float))
        V = np.zeros_like(B)
        if B.size:
            k = np.argmax(np.abs(B), axis=1)
            rows = np.arange(B.shape[0])
            V[rows, k] = np.sign(B[rows, k])
        return V

    def dual_ball_radius(self, d: int) -> float:
        return float(np.sqrt(d))  # ||u||_inf <= 1  =>  ||u||_2 <= sqrt(d)

    def _subgradient_flow(self, Z, scale, cut):
        active = np.abs(Z) > cut
        return np.where(active, scale[:, None] * np.sign(Z), 0.0), ~active

    def _face_tangent(self, U, scale, rtol):
        free = ~((np.abs(U) >= (scale * (1.0 - rtol))[:, None]) & (U != 0))
        if free.all():
            return None
        return lambda delta: delta * free

    def _dual_norms(self, U):
        return np.abs(U).max(axis=1, initial=0.0)

    def _edge_values(self, Z, scale):
        return scale * np.abs(Z).sum(axis=1)

    def _edge_conjugates(self, U, scale):
        return self._ball_indicator(U, scale)

    def _prox(self, Z, step, scale):
        thresh = (np.asarray(step).reshape(-1) * scale)[:, None]
        np.copyto(Z, np.sign(Z) * np.maximum(np.abs(Z) - thresh, 0.0))
        return Z

    def _prox_conjugate(self, U, step, scale):
        bound = scale[:, None]
        np.clip(U, -bound, bound, out=U)
        return U

    def cvxpy_expr(self, Z, scale):
        import cvxpy as cp

        return cp.sum(cp.multiply(scale[:, None], cp.abs(Z)))

    def cvxpy_conjugate(self, U, scale):
        import cvxpy as cp

        return cp.Constant(0.0), [cp.abs(U) <= np.repeat(scale[:, None], U.shape[1], axis=1)]


class SquaredNorm2(Penalty):
    """Half squared Euclidean norm ``phi(v) = ||v||_2^2 / 2`` (the MOCHA / Laplacian penalty).

    Notes
    -----
    ``c phi^*(u / c) = ||u||^2 / (2 c)`` (indicator of ``{0}`` when ``c = 0``);
    prox: ``z / (1 + step c)``; dual prox: ``c u / (c + step)``;
    Fenchel-Young: ``||sqrt(c) z - u / sqrt(c)||^2 / 2``.

    References
    ----------
    .. [1] V. Smith, C.-K. Chiang, M. Sanjabi, A. Talwalkar, "Federated multi-task learning",
       NeurIPS 2017.
    """

    name = "squared_norm2"
    is_norm = False
    traits = ("quadratic", "smooth")
    conjugate_prox_rows = "shrink"
    conic_form = "quadratic"

    # coordinates in which phi is ||.||^2 / 2 and phi^* is ||.||^2 / 2 (identity here;
    # QuadraticForm: rows L^T z and L^{-1} u with Q = L L^T); arrays and CVXPY expressions
    def _primal_coords(self, Z):
        return Z

    def _dual_coords(self, U):
        return U

    def _subgradient_flow(self, Z, scale, cut):
        return scale[:, None] * Z, np.zeros(Z.shape, dtype=bool)

    def difference_bound(self, scale):
        """``c ||z||^2 / 2 <= V  =>  ||z|| <= sqrt(2 / c) V**0.5``."""
        scale = np.asarray(scale, dtype=float)
        with np.errstate(divide="ignore"):
            return np.where(scale > 0, np.sqrt(2.0 / np.where(scale > 0, scale, 1.0)), np.inf), 0.5

    def _edge_values(self, Z, scale):
        R = self._primal_coords(Z)
        return 0.5 * scale * _rowdot(R, R)

    def _edge_conjugates(self, U, scale):
        Y = self._dual_coords(U)
        sq = _rowdot(Y, Y)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(scale > 0, sq / (2.0 * scale), np.where(sq > 0, np.inf, 0.0))

    def _prox(self, Z, step, scale):
        Z /= 1.0 + np.asarray(step).reshape(-1, 1) * scale[:, None]
        return Z

    def _prox_conjugate(self, U, step, scale):
        U *= scale[:, None] / (scale[:, None] + step)
        return U

    def _edge_fenchel_young(self, Z, U, scale):
        root = np.sqrt(scale)[:, None]
        inv_root = np.divide(1.0, root, out=np.zeros_like(root), where=root > 0)
        diff = root * self._primal_coords(Z) - self._dual_coords(U) * inv_root
        out = 0.5 * _rowdot(diff, diff)
        blocked = (scale == 0) & (np.abs(U).max(axis=1, initial=0.0) > 0)
        return np.where(blocked, np.inf, out)

    def cvxpy_expr(self, Z, scale):
        import cvxpy as cp

        return 0.5 * cp.sum_squares(cp.multiply(np.sqrt(scale)[:, None], self._primal_coords(Z)))

    def cvxpy_conjugate(self, U, scale):
        import cvxpy as cp

        positive = scale > 0
        constraints = []
        if (~positive).any():
            constraints.append(U[np.flatnonzero(~positive)] == 0)
        if not positive.any():
            return cp.Constant(0.0), constraints
        weight = 1.0 / np.sqrt(2.0 * scale[positive])
        Y = self._dual_coords(U[np.flatnonzero(positive)])
        return cp.sum_squares(cp.multiply(weight[:, None], Y)), constraints


#: Every penalty by the name specs use (filled by :func:`register_penalty`).
PENALTIES: dict[str, type] = {}
_ALIASES = {"l2": "norm2", "nlasso": "norm2", "l1": "norm1", "squared_l2": "squared_norm2",
            "mocha": "squared_norm2"}


#: Class decorator: add a :class:`Penalty` subclass to :data:`PENALTIES` under ``cls.name``.
register_penalty = registrar(PENALTIES, Penalty, "penalty")


def get_penalty(name: str, **params) -> Penalty:
    """Penalty by name (a key of :data:`PENALTIES` or an alias such as ``l2``, ``l1``, ``mocha``).

    ``params`` are the penalty's constructor arguments (a spec's inline table
    ``penalty = {name = ..., <param> = ...}``); a parameter it does not take is named in the error.
    """
    import inspect

    key = _ALIASES.get(str(name).lower(), str(name).lower())
    if key not in PENALTIES:
        raise ValueError(f"unknown penalty {name!r}; expected one of {sorted(set(PENALTIES) | set(_ALIASES))}")
    cls = PENALTIES[key]
    accepted = sorted(p for p in list(inspect.signature(cls.__init__).parameters)[1:] if p not in ("args", "kwargs"))
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ValueError(f"penalty '{cls.name}' takes no parameter {unknown[0]!r}"
                         + (f"; its parameters are {accepted}" if accepted else "; it has no parameters"))
    return cls(**params)


for _cls in (Norm2, Norm1, SquaredNorm2):
    register_penalty(_cls)
