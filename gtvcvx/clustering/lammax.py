"""``lam_max``: the smallest lam at which convex clustering fuses every connected component.

Computed from the flow problem, with a certified bracket ``lower <= lam_max <= upper``:
``upper`` is the congestion of an explicit flow that satisfies the optimality conditions of the
fused solution, ``lower`` the ratio ``<B, X> / TV(X)`` at explicit potentials ``X``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..baselines import fit_pooled
from ..graph import Graph
from ..capabilities import CapabilityError, provides
from ..penalties import Norm2, Penalty
from ..problem import GTVProblem
from ._flows import ForestRouter, component_means, max_spanning_forest
from ._prep import check_norm_penalty, check_points

__all__ = ["LamMax", "lam_max", "fusion_divergence"]

#: Weight ranges (max / min) above which heavy edges are contracted before the conic solve.
CONTRACT_RANGE = 1e8
#: Edges at least ``CONTRACT_HEAVY`` times the heaviest weight are contracted (the rest stay).
CONTRACT_HEAVY = 1e-8
#: A candidate flow is rejected when, after exact routing of its residual, rounding leaves more
#: than this (relative to ``max |B|``) in ``D^T U - B``: huge circulating flows lose exactness.
FEASIBILITY_RTOL = 1e-9
#: Rounds of column generation before the conic problem is solved on the whole graph.
MAX_ROUNDS = 12


@dataclass
class LamMax:
    """The fusion threshold of convex clustering and its certificate.

    Attributes
    ----------
    value : float
        ``lam_max`` as reported: equal to ``upper``, so that every ``lam >= value`` provably
        fuses each connected component into one cluster (``flow`` is the proof).
    lower, upper : float
        Certified bracket: for ``lam < lower`` at least one component has two or more
        clusters; for ``lam >= upper`` none has.
    rel_width : float
        ``(upper - lower) / upper`` (0 for a forest, where the flow is unique).
    flow : ndarray (|E|, d)
        ``U`` with ``D^T U = B`` (``2 (A - M)``, M: component means; ``-grad L(M)`` for other
        losses; up to rounding) and ``||U_e||_* <= upper * A_e``; at any ``lam >= upper``,
        ``(W = M, U)`` is an optimal primal-dual pair.
    potentials : ndarray (n, d)
        ``X`` with ``<B, X> / sum_e A_e ||(D X)_e|| = lower``.
    method : str
        ``"tree"`` (forest: unique flow), ``"conic"`` (Clarabel on the flow problem), or
        ``"contracted conic"`` (heavy edges contracted first, see :func:`lam_max`).
    status : str
        ``"exact"`` (forest), ``"optimal"`` (``rel_width <= rtol``) or ``"inexact"`` (the bracket
        is still valid, only wider than asked).
    residual : float
        ``||D^T flow - B||_max / max(1, ||B||_max)``: rounding level.
    critical_edges : ndarray of int
        Edges whose congestion ``||U_e||_* / A_e`` is within ``rtol`` of ``upper`` (the bottleneck).
    time : float
        Seconds.
    message : str
    """

    value: float
    lower: float
    upper: float
    rel_width: float
    flow: np.ndarray
    potentials: np.ndarray
    method: str
    status: str
    residual: float = 0.0
    critical_edges: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    time: float = 0.0
    message: str = ""

    def __float__(self) -> float:
        return float(self.value)

    def __repr__(self) -> str:
        return (f"LamMax(value={self.value:.10g}, bracket=[{self.lower:.10g}, {self.upper:.10g}], "
                f"rel_width={self.rel_width:.2g}, method={self.method!r}, status={self.status!r})")


# ---------------------------------------------------------------------------------------- helpers
def _pooled_demands(problem: GTVProblem) -> tuple[np.ndarray, str]:
    """``B = -grad L(W_pool)``: the demands at the pooled model of every connected component."""
    loss = problem.loss
    if not (provides(loss, "smooth") and getattr(loss, "data", None) == "labelled"):
        raise CapabilityError(f"lam_max needs a smooth loss with a pooled fit (squared distance, squared error or "
                              f"logistic), got loss '{loss.name}'")
    labels = problem.graph.components()
    W_pool = np.zeros((problem.n, problem.d))
    unconverged = 0
    for c in range(problem.graph.n_components):  # one pooled fit per connected component
        mask = labels == c
        w, _, converged = fit_pooled(loss, mask)
        W_pool[mask] = w
        unconverged += not converged
    message = (f"the pooled fit did not converge on {unconverged} component(s) (e.g. separable logistic data: the "
               "pooled loss has no minimizer, the models never fuse)") if unconverged else ""
    return -loss.gradient(W_pool), message


def fusion_divergence(graph: Graph, points: np.ndarray) -> np.ndarray:
    """``B = 2 (a_i - mean of a over the component of i)``: the divergence a fusing flow must have.

    The mean is corrected by a second pass (the mean of the first differences; Higham 2002, Sec.
    1.9): points offset by 1e9 with unit spread left component sums of ``n 1e-7`` in a one-pass ``B``,
    no routed flow was feasible to rounding and lam_max failed; two-pass sums are ``n u |B|``."""
    components = graph.components()
    centered = points - component_means(components, points)
    centered -= component_means(components, centered)
    return 2.0 * centered


def _congestion(penalty: Penalty, U: np.ndarray, weights: np.ndarray) -> np.ndarray:
    return penalty._dual_norms(U) / weights


def _ratio(penalty: Penalty, graph: Graph, B: np.ndarray, X: np.ndarray) -> float:
    """``|<B, X>| / TV(X)``, a lower bound on lam_max for every X (0 when TV(X) = 0)."""
    tv = float(penalty._edge_values(graph.incidence @ X, graph.weights).sum())
    val = abs(float(np.einsum("nd,nd->", B, X)))
    return val / tv if tv > 0 and np.isfinite(tv) else 0.0


class _Bounds:
    """Best certified bounds so far, with the flow and potentials that prove them."""

    def __init__(self, graph, B, penalty, router):
        self.graph, self.B, self.penalty, self.router = graph, B, penalty, router
        self.upper, self.flow = np.inf, None
        self.lower, self.potentials = 0.0, np.zeros_like(B)

    def offer_flow(self, U):
        """Make ``U`` exactly feasible (route the divergence residual on the forest) and offer it."""
        U = U + self.router.route(self.B - self.graph.incidence.T @ U)
        scale = max(1.0, float(np.abs(self.B).max(initial=0.0)))
        if not (np.isfinite(U).all()
                and np.abs(self.graph.incidence.T @ U - self.B).max(initial=0.0) <= FEASIBILITY_RTOL * scale):
            return np.inf  # not feasible to rounding: no certificate from this flow
        value = float(_congestion(self.penalty, U, self.graph.weights).max(initial=0.0))
        if value < self.upper:
            self.upper, self.flow = value, U
        return value

    def offer_potentials(self, X):
        value = _ratio(self.penalty, self.graph, self.B, X)
        if value > self.lower:
            self.lower, self.potentials = value, X
        return value


def _cut_potentials(penalty, router: ForestRouter, S_sums: np.ndarray, child: int) -> np.ndarray:
    """``X = 1_S v`` for the subtree ``S`` of ``child``, ``v`` attaining ``<B(S), v> = ||B(S)||_*``."""
    return router.subtree_mask(child)[:, None] * _dual_direction(penalty, S_sums[child])[None, :]


def _dual_direction(penalty, BS: np.ndarray) -> np.ndarray:
    """``v`` with ``||v|| = 1`` (penalty norm) and ``<BS, v> = ||BS||_*``."""
    return penalty.dual_direction(np.asarray(BS, dtype=float)[None, :])[0]


def _sweep_cuts(graph: Graph, B: np.ndarray, penalty, scores: np.ndarray):
    """Best cut ``S_k`` = the ``k`` nodes with the smallest scores: ``max_k ||B(S_k)||_* / A(delta S_k)``.

    All ``n - 1`` cuts at once: an edge whose end points have ranks ``r < s`` crosses the cuts
    ``k = r .. s - 1`` (a difference array), and ``B(S_k)`` is a cumulative sum. Returns the
    potentials ``X = 1_S v`` of the best cut (or None).
    """
    n = graph.n
    if n < 2 or graph.n_edges == 0:
        return None
    order = np.argsort(scores, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    r = rank[graph.edges]
    lo, hi = r.min(axis=1), r.max(axis=1)
    diff = np.bincount(lo, weights=graph.weights, minlength=n + 1) - np.bincount(hi, weights=graph.weights,
                                                                                  minlength=n + 1)
    cut = np.cumsum(diff)[: n - 1]
    BS = np.cumsum(B[order], axis=0)[: n - 1]
    value = penalty._dual_norms(BS)
    ok = cut > 0
    if not ok.any():
        return None
    ratio = np.where(ok, value / np.where(ok, cut, 1.0), 0.0)
    k = int(np.argmax(ratio))
    X = np.zeros_like(B)
    X[order[: k + 1]] = _dual_direction(penalty, BS[k])
    return X


def _offer_sweeps(bounds, penalty, X: np.ndarray) -> None:
    """Sweep cuts along the leading principal direction of ``X`` and along each coordinate."""
    graph, B = bounds.graph, bounds.B
    Xc = X - X.mean(axis=0)
    directions = [Xc[:, k] for k in range(X.shape[1])]
    if X.shape[1] > 1 and np.isfinite(Xc).all():
        _, _, Vt = np.linalg.svd(Xc, full_matrices=False)
        directions.insert(0, Xc @ Vt[0])
    for score in directions:
        cand = _sweep_cuts(graph, B, penalty, score)
        if cand is not None:
            bounds.offer_potentials(cand)


# ---------------------------------------------------------------------------------------- conic
def _conic_flow(graph: Graph, B: np.ndarray, penalty: Penalty, upper_hint: float, max_iter: int = 200):
    """Clarabel on ``min t  s.t.  D^T U = B, ||U_e||_* <= A_e t`` (scaled). Returns (U, X, status)."""
    try:
        import clarabel
    except ImportError as exc:  # pragma: no cover - clarabel is a dependency
        raise ImportError("lam_max(method='conic') needs the 'clarabel' package") from exc

    n, d = B.shape
    m = graph.n_edges
    beta = float(np.abs(B).max())
    gamma = float(upper_hint) if np.isfinite(upper_hint) and upper_hint > 0 else 1.0
    alpha = graph.weights * gamma / beta  # ||U_s,e|| <= alpha_e t_s  with U = beta U_s, t = gamma t_s
    nv = m * d + 1
    Dt = graph.incidence.T.tocoo()
    cols_k = np.arange(d)
    Aeq = sp.csc_matrix((np.repeat(Dt.data, d), ((Dt.row[:, None] * d + cols_k).ravel(),
                                                 (Dt.col[:, None] * d + cols_k).ravel())), shape=(n * d, nv))
    e = np.arange(m)
    if penalty.dual_ball not in ("l2", "linf"):
        raise CapabilityError(f"lam_max's conic flow needs a dual-norm ball with geometry 'l2' or 'linf'; "
                              f"penalty '{penalty.name}' declares {penalty.dual_ball!r}")
    if penalty.dual_ball == "l2":  # (alpha_e t, U_e) in SOC(d + 1)
        r_t = e * (d + 1)
        r_u = (e[:, None] * (d + 1) + 1 + cols_k).ravel()
        rows = np.concatenate([r_t, r_u])
        cols = np.concatenate([np.full(m, nv - 1), (e[:, None] * d + cols_k).ravel()])
        vals = np.concatenate([-alpha, -np.ones(m * d)])
        Acone = sp.csc_matrix((vals, (rows, cols)), shape=(m * (d + 1), nv))
        cones = [clarabel.ZeroConeT(n * d)] + [clarabel.SecondOrderConeT(d + 1)] * m
        b = np.concatenate([(B / beta).ravel(), np.zeros(m * (d + 1))])
    else:  # box (l1 penalty): |U_ek| <= alpha_e t
        idx = np.arange(m * d)
        ee = idx // d
        rows = np.concatenate([idx, idx, m * d + idx, m * d + idx])
        cols = np.concatenate([np.full(m * d, nv - 1), idx, np.full(m * d, nv - 1), idx])
        vals = np.concatenate([-alpha[ee], np.ones(m * d), -alpha[ee], -np.ones(m * d)])
        Acone = sp.csc_matrix((vals, (rows, cols)), shape=(2 * m * d, nv))
        cones = [clarabel.ZeroConeT(n * d), clarabel.NonnegativeConeT(2 * m * d)]
        b = np.concatenate([(B / beta).ravel(), np.zeros(2 * m * d)])
    Acon = sp.vstack([Aeq, Acone]).tocsc()
    q = np.zeros(nv)
    q[-1] = 1.0
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.max_iter = max_iter
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = 1e-10
    solution = clarabel.DefaultSolver(sp.csc_matrix((nv, nv)), q, Acon, b, cones, settings).solve()
    x = np.asarray(solution.x, dtype=float)
    z = np.asarray(solution.z, dtype=float)
    if x.size != nv or not np.isfinite(x).all():
        return None, None, str(solution.status)
    U = beta * x[:-1].reshape(m, d)
    X = -z[:n * d].reshape(n, d) if np.isfinite(z).all() else None
    return U, X, str(solution.status)


# ---------------------------------------------------------------------------------------- contraction
def _contract(graph: Graph, B: np.ndarray, heavy: np.ndarray):
    """Contract the components of the heavy edges; merge parallel light edges (weights add).

    Returns (contracted graph, contracted B, node -> supernode, light edge -> contracted edge or -1).
    """
    E = graph.edges
    n_super, node_map = graph.edge_components(heavy)
    light = np.flatnonzero(~heavy)
    ends = node_map[E[light]]
    keep = ends[:, 0] != ends[:, 1]
    pairs = np.sort(ends[keep], axis=1)
    edge_of_light = np.full(graph.n_edges, -1, dtype=np.int64)
    if pairs.shape[0]:
        uniq, inverse = np.unique(pairs, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        w = np.bincount(inverse, weights=graph.weights[light[keep]], minlength=uniq.shape[0])
        edge_of_light[light[keep]] = inverse
        small = Graph._trusted(n_super, np.ascontiguousarray(uniq, dtype=np.int64), np.ascontiguousarray(w))
    else:
        small = Graph._trusted(n_super, np.zeros((0, 2), dtype=np.int64), np.zeros(0))
    Bs = np.zeros((n_super, B.shape[1]))
    np.add.at(Bs, node_map, B)
    return small, Bs, node_map, edge_of_light


def _lift_flow(graph: Graph, small: Graph, node_map, edge_of_light, F_small: np.ndarray) -> np.ndarray:
    """Split a contracted flow over the parallel light edges in proportion to their weights."""
    U = np.zeros((graph.n_edges, F_small.shape[1]))
    sel = np.flatnonzero(edge_of_light >= 0)
    if sel.size == 0:
        return U
    ce = edge_of_light[sel]
    share = graph.weights[sel] / small.weights[ce]
    # orientation: the contracted edge goes from its lower supernode to its higher one
    sign = np.where(node_map[graph.edges[sel, 0]] == small.edges[ce, 0], 1.0, -1.0)
    U[sel] = (sign * share)[:, None] * F_small[ce]
    return U


# ---------------------------------------------------------------------------------------- core
def _solve_bracket(graph: Graph, B: np.ndarray, penalty: Penalty, rtol: float, method: str, depth: int = 0):
    """Returns (_Bounds, method used, status message)."""
    tree = max_spanning_forest(graph)
    router = ForestRouter(graph, tree)
    bounds = _Bounds(graph, B, penalty, router)
    if graph.n_edges == 0 or not np.abs(B).max(initial=0.0) > 0:
        bounds.upper, bounds.flow = 0.0, np.zeros((graph.n_edges, B.shape[1]))
        return bounds, "tree", ""
    # 1. the forest flow (the unique flow when the graph is a forest) and its bottleneck cut
    F = router.route(B)
    bounds.offer_flow(F)
    cong = _congestion(penalty, bounds.flow, graph.weights)
    worst = int(np.argmax(cong))
    S_sums = router.subtree_sums(B)
    bounds.offer_potentials(_cut_potentials(penalty, router, S_sums, router.edge_child(worst)))
    bounds.offer_potentials(B)
    _offer_sweeps(bounds, penalty, B)
    is_forest = tree.size == graph.n_edges
    if is_forest or method == "tree":
        return bounds, "tree", ""
    if bounds.upper - bounds.lower <= rtol * bounds.upper:
        return bounds, "tree", ""

    # 2. wide weight ranges: contract the heavy edges, solve the light problem, route the rest
    w = graph.weights
    used = "conic"
    if method == "auto" and w.max() / w.min() > CONTRACT_RANGE and depth < 8:
        heavy = w >= w.max() * CONTRACT_HEAVY
        small, Bs, node_map, edge_of_light = _contract(graph, B, heavy)
        if 0 < small.n_edges < graph.n_edges:
            sub, _, _ = _solve_bracket(small, Bs, penalty, rtol, method, depth + 1)
            if sub.flow is not None and np.isfinite(sub.upper):
                bounds.offer_flow(_lift_flow(graph, small, node_map, edge_of_light, sub.flow))
                bounds.offer_potentials(sub.potentials[node_map])
                if bounds.upper - bounds.lower <= rtol * bounds.upper:
                    return bounds, "contracted conic", ""
            used = "contracted conic"

    # 3. the conic problem, by column generation from the spanning forest (see lam_max Notes)
    work = np.zeros(graph.n_edges, dtype=bool)
    work[tree] = True
    work[np.argsort(-cong)[: max(1, min(graph.n_edges, tree.size // 10))]] = True
    message = ""
    for _ in range(MAX_ROUNDS):
        U, X, status = _conic_on_edges(graph, B, penalty, work, bounds.upper)
        message = "" if status == "Solved" else f"Clarabel status {status}"
        if U is not None:
            bounds.offer_flow(U)
        if X is not None:
            bounds.offer_potentials(X)
            _offer_sweeps(bounds, penalty, X)
        if bounds.upper - bounds.lower <= rtol * bounds.upper or X is None or work.all():
            break
        # price the edges outside the working set: A_e ||(D X)_e|| is what X is charged there
        charge = penalty._edge_values(graph.incidence @ X, graph.weights)
        charge[work] = 0.0
        candidates = np.flatnonzero(charge > 1e-12 * charge.max(initial=0.0))
        if candidates.size == 0:
            break
        add = max(20, int(work.sum()) // 2)
        work[candidates[np.argsort(-charge[candidates])[:add]]] = True
    used_edges = int(work.sum())
    if bounds.upper - bounds.lower > rtol * bounds.upper and not work.all():
        U, X, status = _conic_flow(graph, B, penalty, bounds.upper)  # the whole graph
        message = "" if status == "Solved" else f"Clarabel status {status}"
        used_edges = graph.n_edges
        if U is not None:
            bounds.offer_flow(U)
        if X is not None:
            bounds.offer_potentials(X)
    label = f"conic ({used_edges} of {graph.n_edges} edges)"
    return bounds, label if used == "conic" else f"contracted + {label}", message


def _conic_on_edges(graph: Graph, B, penalty, mask, upper_hint):
    """The conic problem on the subgraph of the edges in ``mask``; the flow lifted to all edges."""
    idx = np.flatnonzero(mask)
    sub = Graph._trusted(graph.n, graph.edges[idx], graph.weights[idx])
    U, X, status = _conic_flow(sub, B, penalty, upper_hint)
    if U is None:
        return None, X, status
    full = np.zeros((graph.n_edges, B.shape[1]))
    full[idx] = U
    return full, X, status


def lam_max(points, graph=None, penalty: Penalty | None = None, *, method: str = "auto",
            rtol: float = 1e-7) -> LamMax:
    r"""Smallest ``lam`` at which GTV fuses each connected component into one model.

    For convex clustering the component means; for any GTV problem with a smooth loss that has
    a pooled fit (squared error, logistic) the pooled model of each component (the GTV paper's
    critical lam, ``../shared/seeds/002``, Sec. IX-B3 and Fig. 13).

    Parameters
    ----------
    points : array_like (n, d) or GTVProblem
        Data ``a_i`` (as used in the loss, i.e. already standardized if you standardize), or a
        :class:`~gtvcvx.GTVProblem` (``SquaredDistance``, ``SquaredError`` or ``Logistic``
        loss), whose graph and penalty are then used.
    graph : Graph
        The clustering graph (required with points).
    penalty : Norm2 or Norm1, optional
        Default ``Norm2()``.
    method : {"auto", "tree", "conic"}
        ``"auto"``: exact forest flow on forests; otherwise the conic flow problem (Clarabel,
        called directly, no modeling layer), after contracting heavy edges when the weights
        span more than 8 orders of magnitude. ``"tree"``: bounds from a maximum spanning forest
        only (exact on forests, a bracket otherwise). ``"conic"``: skip the contraction.
    rtol : float
        Relative width of the certified bracket that counts as solved.

    Returns
    -------
    LamMax

    Notes
    -----
    Write ``B = 2 (A - M)`` with ``M_i`` the mean of the points in the component of ``i``
    (general losses: ``B = -grad L(M)`` with ``M_i`` the pooled model of ``i``'s component,
    ``argmin_w sum_{j in comp(i)} L_j(w)``, the same argument with stationarity
    ``grad L(W) + D^T U = 0``). ``W = M`` is optimal at ``lam`` iff some flow has ``D^T U = B`` and
    ``||U_e||_* <= lam A_e`` (stationarity ``2 (W - A) + D^T U = 0`` and the subdifferential of
    the norm at 0). Hence

    .. math:: \lambda_{\max} = \min_U \max_e \|U_e\|_* / A_e \quad \text{s.t.}\quad D^\top U = B
              = \max_X \frac{\langle B, X\rangle}{\sum_e A_e \|(DX)_e\|},

    a minimum-congestion flow problem and its dual (the TV "Cheeger ratio"). Any flow with
    ``D^T U = B`` gives an upper bound, any ``X`` a lower bound (since
    ``<B, X> = <U*, D X> <= lam_max TV(X)``), so the result is certified by the pair it returns.

    The algorithm: (1) route ``B`` on a maximum-weight spanning forest (the unique flow when
    the graph is a forest, and then exact: the cut of its most congested edge attains the
    same ratio); (2) if the weights span a huge range (Gaussian weights of outliers can be
    ``1e-100``), contract the components of the heavy edges, solve the small light-edge
    problem, and lift it: its potentials stay valid, its flow is completed inside the heavy
    components by forest routing -- when the bracket closes, done; (3) otherwise solve the
    conic problem on the whole graph with Clarabel. Every candidate flow is made exactly
    feasible by routing its divergence residual on the maximum spanning forest before its
    congestion is counted.

    References
    ----------
    .. [1] T. D. Hocking, A. Joulin, F. Bach, J.-P. Vert, "Clusterpath: an algorithm for
       clustering using convex fusion penalties", ICML 2011.
    .. [2] K. M. Tan, D. Witten, "Statistical properties of convex clustering", Electronic
       Journal of Statistics 9(2), 2015.
    .. [3] E. C. Chi, K. Lange, "Splitting methods for convex clustering", JCGS 24(4), 2015.
    """
    t0 = time.perf_counter()
    pooled_message = ""
    if isinstance(points, GTVProblem):
        problem = points
        if graph is not None:
            raise ValueError("graph: do not pass a graph together with a GTVProblem")
        graph = problem.graph
        penalty = problem.penalty if penalty is None else penalty
        if provides(problem.loss, "separable_points"):
            B = fusion_divergence(graph, np.asarray(problem.loss.points))
        else:
            B, pooled_message = _pooled_demands(problem)
    else:
        pts = check_points(points)
        if not isinstance(graph, Graph):
            raise ValueError(f"graph must be a gtvcvx.Graph on the {pts.shape[0]} points, got "
                             f"{type(graph).__name__}")
        if graph.n != pts.shape[0]:
            raise ValueError(f"graph has {graph.n} nodes but points has {pts.shape[0]} rows")
        B = fusion_divergence(graph, pts)
    penalty = check_norm_penalty(Norm2() if penalty is None else penalty)
    if method not in ("auto", "tree", "conic"):
        raise ValueError(f"method must be 'auto', 'tree' or 'conic', got {method!r}")
    if not (isinstance(rtol, (int, float)) and 0 < rtol < 1):
        raise ValueError(f"rtol must be in (0, 1), got {rtol!r}")
    bounds, used, message = _solve_bracket(graph, B, penalty, float(rtol), method)
    if pooled_message:
        message = f"{pooled_message}; {message}" if message else pooled_message
    upper, lower = float(bounds.upper), float(min(bounds.lower, bounds.upper))
    flow = bounds.flow
    width = (upper - lower) / upper if upper > 0 else 0.0
    is_forest = graph.n_edges == max_spanning_forest(graph).size
    status = "exact" if (is_forest or upper == 0.0) else ("optimal" if width <= rtol else "inexact")
    if status == "inexact" and not message:
        message = f"certified bracket is wider than rtol = {rtol:g}"
    residual = float(np.abs(graph.incidence.T @ flow - B).max(initial=0.0) / max(1.0, np.abs(B).max(initial=0.0)))
    cong = _congestion(penalty, flow, graph.weights) if graph.n_edges else np.zeros(0)
    critical = np.flatnonzero(cong >= upper * (1.0 - max(rtol, 1e-12))) if upper > 0 else np.zeros(0, np.int64)
    return LamMax(value=upper, lower=lower, upper=upper, rel_width=width, flow=flow,
                  potentials=bounds.potentials, method=used, status=status, residual=residual,
                  critical_edges=critical, time=time.perf_counter() - t0, message=message)
