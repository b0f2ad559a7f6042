"""Contract checks for losses and penalties: does a component answer the shared vocabulary correctly?

Every loss and penalty in :data:`gtvcvx.losses.LOSSES` / :data:`gtvcvx.penalties.PENALTIES` is
checked by these functions in the package's own suite (``tests/test_contracts.py``); authors
of a new loss or penalty call them on theirs. Each check compares the component's fast
operations with the component's own CVXPY statements solved by CLARABEL, or with an identity
that must hold exactly (Moreau, Fenchel-Young), so a wrong prox, conjugate, CVXPY statement
or a-priori bound fails with an ``AssertionError`` naming the check and the numbers.

Examples
--------
>>> import numpy as np
>>> from gtvcvx.penalties import Norm2
>>> from gtvcvx.testing.contracts import check_penalty
>>> check_penalty(Norm2(), d=3, rng=np.random.default_rng(0))   # doctest: +SKIP

Notes
-----
For a proper closed convex ``f`` and ``t > 0`` the checks use

* the prox ``x = prox_{t f}(z)`` as a minimizer of ``t f(x) + ||x - z||^2 / 2`` (compared with
  CLARABEL on ``cvxpy_expr``), and the pair ``(x, (z - x) / t)`` as a subgradient pair, where the
  Fenchel-Young term ``f(x) + f^*(g) - <x, g>`` vanishes;
* Moreau's decomposition ``z = prox_{t f}(z) + t prox_{f^* / t}(z / t)``;
* ``f(x) + f^*(g) - <x, g> >= 0`` for every pair (Fenchel's inequality);
* the conjugate at a subgradient ``g`` of ``f`` at ``x`` equals ``<x, g> - f(x)`` and the
  optimum of ``cvxpy_conjugate`` at ``g``.

References
----------
.. [1] H. H. Bauschke and P. L. Combettes, *Convex Analysis and Monotone Operator Theory in
   Hilbert Spaces*, 2nd ed., Springer, 2017: Thm 14.3 (Moreau), Prop. 13.15 (Fenchel-Young).
.. [2] ``../shared/DESIGN.md``, "Losses and penalties" (the vocabulary).
"""

from __future__ import annotations

import numpy as np

from ..capabilities import TRAITS, provides
from ..penalties import PENALTIES, get_penalty

__all__ = ["check_loss", "check_penalty", "example_loss"]


def _close(name: str, got, want, *, rtol: float, atol: float) -> None:
    got = np.asarray(got, dtype=float)
    want = np.broadcast_to(np.asarray(want, dtype=float), got.shape) if np.ndim(want) == 0 else \
        np.asarray(want, dtype=float)
    if got.shape != want.shape:
        raise AssertionError(f"{name}: shape {got.shape}, expected {want.shape}")
    err = np.abs(got - want)
    limit = atol + rtol * np.abs(want)
    if not np.all(err <= limit):
        worst = np.unravel_index(int(np.argmax(err - limit)), err.shape) if err.ndim else ()
        raise AssertionError(f"{name}: differs by {float(err[worst]):.3g} at {worst} (got {float(got[worst]):.10g}, "
                             f"expected {float(want[worst]):.10g}; allowed {float(limit[worst]):.3g})")


def _shape(name: str, value, shape) -> np.ndarray:
    value = np.asarray(value)
    if value.shape != tuple(shape):
        raise AssertionError(f"{name}: returned shape {value.shape}, expected {tuple(shape)}")
    return value


def _solve(objective, constraints=()):
    import warnings

    import cvxpy as cp

    problem = cp.Problem(cp.Minimize(objective), list(constraints))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "may be inaccurate": retried below
        problem.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
        # exponential cones (logistic) can stall near 1e-10: CLARABEL's defaults, then SCS to 1e-9
        for solver, options in (("CLARABEL", {}), ("SCS", {"eps": 1e-9, "max_iters": 200_000})):
            if problem.status == "optimal":
                break
            problem.solve(solver=solver, **options)
    if problem.status != "optimal":
        raise AssertionError(f"CLARABEL and SCS returned {problem.status!r} on a contract check (the CVXPY "
                             "statement may be wrong)")
    return problem


# ---------------------------------------------------------------------------------------------
# losses
# ---------------------------------------------------------------------------------------------
def example_loss(cls, d: int = 3, rng=None, counts=(5, 1, 0, 2, 4)):
    """An instance of the loss class ``cls`` on random data with the given samples per node.

    The default ``counts`` include a node with more samples than ``d``, nodes with fewer
    (``m_i < d``: the conjugate's domain is a subspace) and a node without data. Labels are
    ``+-1`` for losses with the ``classifier`` trait; point losses get one point per node.
    """
    rng = np.random.default_rng(0) if rng is None else rng
    if cls.data == "points":
        return cls(rng.normal(size=(len(counts), d)))
    X = [rng.normal(size=(m, d)) for m in counts]
    if "classifier" in cls.traits:
        y = [np.where(rng.random(m) < 0.5, -1.0, 1.0) for m in counts]
    else:
        y = [rng.normal(size=m) for m in counts]
    return cls(X, y)


def check_loss(loss, rng=None, *, rtol: float = 1e-6) -> None:
    """Check that ``loss`` answers the loss vocabulary consistently; AssertionError otherwise.

    Parameters
    ----------
    loss : Loss
        An instance with its data (small: every check solves CVXPY problems on it).
    rng : numpy.random.Generator, optional
        Source of the random test points.
    rtol : float
        Relative tolerance of the comparisons with CLARABEL (scaled by the problem's size).

    Notes
    -----
    Checked: shapes; ``value`` against ``cvxpy_expr``; ``prox`` against the CVXPY minimizer of
    ``L(w) + ||w - v||^2 / (2 t)``; the Fenchel-Young term (``node_conjugates`` with the prox
    as hint, and ``certify_nodes``) vanishes at the prox pair and is ``>= 0`` at random pairs;
    the conjugate at that subgradient against ``cvxpy_conjugate``; ``prox_conjugate`` against
    the CVXPY minimizer of ``t L^*(v) + ||v - z||^2 / 2``; ``node_stationarity`` is zero at the
    pair; the gradient by central differences (``smooth`` trait); ``project_conjugate_domain``
    and ``linear_domain`` against the pair; ``range_bound`` on random points; ``scaled`` (where
    provided: values and conjugates grow by ``c^2``); ``subset``; nodes without data contribute
    zero.
    """
    import cvxpy as cp

    rng = np.random.default_rng(1) if rng is None else rng
    n, d = loss.n, loss.d
    tag = f"loss '{loss.name}'"
    W = rng.normal(size=(n, d))
    V = rng.normal(size=(n, d))
    step = 0.7

    values = _shape(f"{tag}: node_values", loss.node_values(W), (n,))
    _close(f"{tag}: value == sum(node_values)", loss.value(W), values.sum(), rtol=1e-12, atol=1e-12)
    var = cp.Variable((n, d))
    var.value = W
    _close(f"{tag}: value vs cvxpy_expr", loss.cvxpy_expr(var).value, values.sum(), rtol=1e-9, atol=1e-9)
    _close(f"{tag}: nodes without data have L_i = 0", values[~loss.has_data], 0.0, rtol=0, atol=0)

    # prox against CVXPY
    X = _shape(f"{tag}: prox", loss.prox(V, step), (n, d))
    ref = _solve(loss.cvxpy_expr(var) + cp.sum_squares(var - V) / (2 * step))
    scale = 1.0 + float(np.abs(V).max())
    _close(f"{tag}: prox vs CVXPY argmin of L(w) + ||w - v||^2/(2t)", X, var.value, rtol=0, atol=rtol * scale * 10)
    _close(f"{tag}: prox objective vs CVXPY", loss.value(X) + np.sum((X - V) ** 2) / (2 * step), ref.value,
           rtol=rtol, atol=rtol)

    # the prox pair (X, G) with G in dL(X)
    G = (V - X) / step
    conj = _shape(f"{tag}: node_conjugates", loss.node_conjugates(G, hint=X), (n,))
    if not np.all(np.isfinite(conj)):
        raise AssertionError(f"{tag}: node_conjugates(G, hint=prox) is inf at nodes "
                             f"{np.flatnonzero(~np.isfinite(conj)).tolist()}, although G = (v - prox)/t is a subgradient")
    values_X, pairing = loss.node_values(X), np.einsum("nd,nd->n", X, G)
    fy_scale = 1.0 + np.abs(values_X) + np.abs(pairing)
    fy = values_X + conj - pairing
    _close(f"{tag}: Fenchel-Young term at the prox pair", fy, np.zeros(n), rtol=0, atol=rtol * fy_scale)
    terms, residual = loss.certify_nodes(X, G)
    _shape(f"{tag}: certify_nodes residual", residual, (n, d))
    if np.any(np.asarray(terms) < 0):
        raise AssertionError(f"{tag}: certify_nodes returned negative Fenchel-Young terms {terms}")
    _close(f"{tag}: certify_nodes terms at the prox pair", terms, np.zeros(n), rtol=0, atol=rtol * fy_scale)
    _close(f"{tag}: certify_nodes residual at the prox pair", np.linalg.norm(residual, axis=1), np.zeros(n),
           rtol=0, atol=rtol * (1.0 + np.linalg.norm(G, axis=1)))
    stat = _shape(f"{tag}: node_stationarity", loss.node_stationarity(X, G), (n,))
    _close(f"{tag}: node_stationarity at the prox pair", stat, np.zeros(n), rtol=0, atol=rtol * 10 * scale)

    # the conjugate against its CVXPY statement
    cvar = cp.Variable((n, d))
    expr, cons = loss.cvxpy_conjugate(cvar)
    ref = _solve(expr, [*cons, cvar == G])
    _close(f"{tag}: conjugate vs cvxpy_conjugate at a subgradient", conj.sum(), ref.value,
           rtol=rtol, atol=rtol * float(fy_scale.sum()))

    # prox of the conjugate against CVXPY (validates cvxpy_conjugate and the Moreau identity)
    Z = rng.normal(size=(n, d))
    P = _shape(f"{tag}: prox_conjugate", loss.prox_conjugate(Z, step), (n, d))
    expr, cons = loss.cvxpy_conjugate(cvar)
    _solve(step * expr + cp.sum_squares(cvar - Z) / 2, cons)
    _close(f"{tag}: prox_conjugate vs CVXPY argmin of t L*(v) + ||v - z||^2/2", P, cvar.value, rtol=0,
           atol=rtol * 10 * (1.0 + float(np.abs(Z).max())))

    # Fenchel's inequality at random pairs (in the domain: projected subgradient-like points)
    Vd = loss.project_conjugate_domain(G + 0.1 * rng.normal(size=(n, d)))
    _shape(f"{tag}: project_conjugate_domain", Vd, (n, d))
    terms, _ = loss.certify_nodes(W, Vd)
    if np.any(np.asarray(terms) < 0):
        raise AssertionError(f"{tag}: Fenchel-Young terms must be >= 0, got {np.asarray(terms).min():.3g}")
    _close(f"{tag}: project_conjugate_domain is idempotent", loss.project_conjugate_domain(Vd), Vd,
           rtol=0, atol=1e-10 * (1.0 + float(np.abs(Vd).max())))
    domain = loss.linear_domain()
    if domain is not None:
        basis = _shape(f"{tag}: linear_domain basis", domain.basis, (n, d, np.asarray(domain.basis).shape[2]))
        outside = G - np.einsum("ndr,nr->nd", basis, np.einsum("ndr,nd->nr", basis, G))
        _close(f"{tag}: subgradients lie in linear_domain", np.linalg.norm(outside, axis=1), np.zeros(n),
               rtol=0, atol=1e-8 * (1.0 + np.linalg.norm(G, axis=1)))

    # smooth: gradient by central differences
    if "smooth" in loss.traits:
        grad = _shape(f"{tag}: gradient", loss.gradient(W), (n, d))
        h = 1e-6
        numeric = np.zeros((n, d))
        for k in range(d):
            E = np.zeros((n, d))
            E[:, k] = h
            numeric[:, k] = (loss.node_values(W + E) - loss.node_values(W - E)) / (2 * h)
        _close(f"{tag}: gradient vs central differences", grad, numeric, rtol=1e-5, atol=1e-6)

    # range_bound: ||B_i^T w_i|| <= bound whenever L_i(w_i) <= value_bound
    Wr = 3.0 * rng.normal(size=(n, d))
    vals = loss.node_values(Wr)
    bound = _shape(f"{tag}: range_bound", loss.range_bound(float(vals.max(initial=0.0))), (n,))
    if domain is not None:
        norms = np.linalg.norm(np.einsum("ndr,nd->nr", domain.basis, Wr), axis=1)
    else:
        norms = np.linalg.norm(Wr, axis=1)
    if np.any(norms > bound * (1 + 1e-9) + 1e-12):
        i = int(np.argmax(norms - bound))
        raise AssertionError(f"{tag}: range_bound is not sound at node {i}: ||B^T w|| = {norms[i]:.6g} > "
                             f"bound {bound[i]:.6g} with L_i(w_i) = {vals[i]:.6g}")

    # linear_minorants: a_k^T w <= weight_k L_i(w) everywhere (the certificate bounds optima by them)
    if provides(loss, "linear_minorants"):
        A, node, weight = loss.linear_minorants()
        M = node.shape[0]
        _shape(f"{tag}: linear_minorants rows", A, (M, d))
        _shape(f"{tag}: linear_minorants weights", weight, (M,))
        if M and not (np.all(weight > 0) and np.all((node >= 0) & (node < n))):
            raise AssertionError(f"{tag}: linear_minorants needs weights > 0 and node indices in [0, {n})")
        for Wm in (Wr, 30.0 * rng.normal(size=(n, d))):
            lhs = np.einsum("kd,kd->k", A, Wm[node])
            rhs = weight * loss.node_values(Wm)[node]
            if np.any(lhs > rhs + 1e-9 * (1 + np.abs(rhs))):
                k = int(np.argmax(lhs - rhs))
                raise AssertionError(f"{tag}: linear_minorants is not a lower bound at sample {k} (node "
                                     f"{int(node[k])}): a^T w = {lhs[k]:.6g} > weight L_i(w) = {rhs[k]:.6g}")

    # scaled: L'(c w) = c^2 L(w), so L'^*(c v) = c^2 L^*(v); solve() maps certificates through it,
    # so a loss that answers it wrongly would be certified on another problem
    if provides(loss, "scaled"):
        for factor in (2.0 ** -5, 3.0, 2.0 ** 7):
            scaled = loss.scaled(factor)
            if (scaled.n, scaled.d) != (n, d):
                raise AssertionError(f"{tag}: scaled({factor:g}) has (n, d) = ({scaled.n}, {scaled.d})")
            _close(f"{tag}: scaled(c).node_values(c w) == c^2 node_values(w) (c = {factor:g})",
                   scaled.node_values(factor * W), factor**2 * values, rtol=1e-11, atol=1e-300)
            _close(f"{tag}: scaled(c).node_conjugates(c v) == c^2 node_conjugates(v) (c = {factor:g})",
                   scaled.node_conjugates(factor * G, hint=factor * X), factor**2 * conj, rtol=1e-9,
                   atol=1e-12 * factor**2 * fy_scale)

    # subset
    nodes = np.array([n - 1, 0])
    sub = loss.subset(nodes)
    if (sub.n, sub.d) != (2, d):
        raise AssertionError(f"{tag}: subset of 2 nodes has (n, d) = ({sub.n}, {sub.d})")
    _close(f"{tag}: subset(nodes).node_values", sub.node_values(W[nodes]), values[nodes], rtol=1e-12, atol=1e-12)
    if not isinstance(loss.content(), dict):
        raise AssertionError(f"{tag}: content() must return a dict")


# ---------------------------------------------------------------------------------------------
# penalties
# ---------------------------------------------------------------------------------------------
def check_penalty(penalty, d: int, rng=None, *, n_edges: int = 5, rtol: float = 1e-6) -> None:
    """Check that ``penalty`` answers the penalty vocabulary consistently; AssertionError otherwise.

    Parameters
    ----------
    penalty : Penalty
    d : int
        Dimension of the edge differences.
    rng : numpy.random.Generator, optional
    n_edges : int
        Number of test edges; capacities are random and one is zero.
    rtol : float
        Tolerance of the comparisons with CLARABEL.

    Notes
    -----
    Checked: shapes and ``value`` against ``cvxpy_expr``; ``prox`` and ``prox_conjugate``
    against CVXPY minimizers (the latter through ``cvxpy_conjugate``); Moreau's decomposition;
    the Fenchel-Young term is zero at prox pairs and ``>= 0`` at random ones; the conjugate at
    a prox pair against ``cvxpy_conjugate``; ``project_conjugate_domain`` idempotent and
    inside the domain; for norms ``dual_norms``, ``l2_lower``, ``dual_ball_radius`` (kappa),
    ``flow_bound`` and ``dual_direction``; ``difference_bound``; ``subgradient_flow`` (fixed
    entries form zero Fenchel-Young terms); declared traits are known; for a registered
    penalty, rebuilding from ``content()`` gives an equal penalty.
    """
    import cvxpy as cp

    rng = np.random.default_rng(2) if rng is None else rng
    tag = f"penalty '{penalty.name}'"
    unknown = [t for t in penalty.traits if t not in TRAITS]
    if unknown:
        raise AssertionError(f"{tag}: undeclared traits {unknown}; known: {sorted(TRAITS)}")
    c = rng.uniform(0.5, 2.0, size=n_edges)
    c[1] = 0.0
    Z = rng.normal(size=(n_edges, d))
    Z[2] *= 1e-3  # near the kink of a norm
    step = 0.8

    values = _shape(f"{tag}: edge_values", penalty.edge_values(Z, c), (n_edges,))
    if np.any(values < 0):
        raise AssertionError(f"{tag}: edge_values must be >= 0, got {values.min():.3g}")
    var = cp.Variable((n_edges, d))
    var.value = Z
    _close(f"{tag}: value vs cvxpy_expr", penalty.cvxpy_expr(var, c).value, values.sum(), rtol=1e-9, atol=1e-9)

    X = _shape(f"{tag}: prox", penalty.prox(Z, step, c), (n_edges, d))
    _solve(penalty.cvxpy_expr(var, c) * step + cp.sum_squares(var - Z) / 2)
    _close(f"{tag}: prox vs CVXPY argmin", X, var.value, rtol=0, atol=rtol * 10 * (1 + float(np.abs(Z).max())))

    U = rng.normal(size=(n_edges, d)) * 2
    P = _shape(f"{tag}: prox_conjugate", penalty.prox_conjugate(U, step, c), (n_edges, d))
    expr, cons = penalty.cvxpy_conjugate(var, c)
    _solve(step * expr + cp.sum_squares(var - U) / 2, cons)
    _close(f"{tag}: prox_conjugate vs CVXPY argmin", P, var.value, rtol=0,
           atol=rtol * 10 * (1 + float(np.abs(U).max())))

    # Moreau: z = prox_{t f}(z) + t prox_{f*/t}(z/t)
    _close(f"{tag}: Moreau decomposition", X + step * penalty.prox_conjugate(Z / step, 1.0 / step, c), Z,
           rtol=0, atol=1e-10 * (1 + float(np.abs(Z).max())))

    # Fenchel-Young at the prox pair and at random pairs
    G = (Z - X) / step
    fy = _shape(f"{tag}: edge_fenchel_young", penalty.edge_fenchel_young(X, G, c), (n_edges,))
    fy_scale = 1.0 + np.abs(penalty.edge_values(X, c)) + np.abs(np.einsum("ed,ed->e", X, G))
    _close(f"{tag}: Fenchel-Young term at the prox pair", fy, np.zeros(n_edges), rtol=0, atol=1e-9 * fy_scale)
    conj = penalty.edge_conjugates(G, c)
    expr, cons = penalty.cvxpy_conjugate(var, c)
    ref = _solve(expr, [*cons, var == G])
    _close(f"{tag}: conjugate vs cvxpy_conjugate", conj.sum(), ref.value, rtol=rtol, atol=rtol * fy_scale.sum())
    Ud = _shape(f"{tag}: project_conjugate_domain", penalty.project_conjugate_domain(U, c), (n_edges, d))
    if not np.all(np.isfinite(penalty.edge_conjugates(Ud, c))):
        raise AssertionError(f"{tag}: project_conjugate_domain leaves points outside the conjugate's domain")
    _close(f"{tag}: project_conjugate_domain is idempotent", penalty.project_conjugate_domain(Ud, c), Ud,
           rtol=0, atol=1e-12 * (1 + float(np.abs(Ud).max())))
    random_fy = penalty.edge_fenchel_young(Z, Ud, c)
    if np.any(random_fy < -1e-12 * (1 + np.abs(penalty.edge_values(Z, c)))):
        raise AssertionError(f"{tag}: Fenchel-Young terms must be >= 0, got {random_fy.min():.3g}")

    # a-priori bounds
    flow = _shape(f"{tag}: flow_bound", penalty.flow_bound(c, d), (n_edges,))
    if np.any(np.linalg.norm(Ud, axis=1) > flow * (1 + 1e-12) + 1e-300):
        raise AssertionError(f"{tag}: flow_bound is not sound: ||u_e||_2 exceeds it on the conjugate's domain")
    unit, power = penalty.difference_bound(c)
    unit = _shape(f"{tag}: difference_bound unit", np.broadcast_to(unit, (n_edges,)), (n_edges,))
    lhs = np.linalg.norm(Z, axis=1)
    with np.errstate(invalid="ignore"):  # inf * 0 on edges without capacity (no bound there)
        rhs = unit * np.power(values, power)
    if np.any((c > 0) & (lhs > rhs * (1 + 1e-12) + 1e-300)):
        raise AssertionError(f"{tag}: difference_bound is not sound: ||z_e|| = {lhs.max():.6g} above the bound")
    if provides(penalty, "norm"):  # positively homogeneous (solve() scales lam with the labels)
        for factor in (2.0 ** -5, 3.0):
            _close(f"{tag}: trait 'norm': phi(c z) == c phi(z) (c = {factor:g})", penalty.edge_values(factor * Z, c),
                   factor * penalty.edge_values(Z, c), rtol=1e-12, atol=1e-300)
    if penalty.is_norm:
        ones = np.ones(n_edges)
        norms = penalty.edge_values(Z, ones)
        if np.any(norms < penalty.l2_lower * np.linalg.norm(Z, axis=1) * (1 - 1e-12)):
            raise AssertionError(f"{tag}: l2_lower = {penalty.l2_lower} is not a lower bound phi(z) >= mu ||z||")
        duals = _shape(f"{tag}: dual_norms", penalty.dual_norms(U), (n_edges,))
        kappa = penalty.dual_ball_radius(d)
        if np.any(np.linalg.norm(U, axis=1) > kappa * duals * (1 + 1e-12)):
            raise AssertionError(f"{tag}: dual_ball_radius(d) = {kappa} is not a bound ||u||_2 <= kappa ||u||_*")
        if np.any(penalty.dual_norms(Ud) > c * (1 + 1e-12) + 1e-300):
            raise AssertionError(f"{tag}: project_conjugate_domain leaves dual norms above the capacities")
        # the pairing: <z, u> <= phi(z) phi_*(u)
        if np.any(np.einsum("ed,ed->e", Z, U) > norms * duals * (1 + 1e-12) + 1e-12):
            raise AssertionError(f"{tag}: dual_norms is not the dual norm of edge_values (<z, u> > phi(z) phi_*(u))")
        if provides(penalty, "dual_direction"):
            B = U.copy()
            B[0] = 0.0
            dirs = _shape(f"{tag}: dual_direction", penalty.dual_direction(B), (n_edges, d))
            nz = np.any(B != 0, axis=1)
            _close(f"{tag}: phi(dual_direction) == 1", penalty.edge_values(dirs[nz], ones[nz]), ones[nz],
                   rtol=1e-9, atol=0)
            _close(f"{tag}: <b, dual_direction(b)> == ||b||_*", np.einsum("ed,ed->e", B, dirs)[nz],
                   penalty.dual_norms(B[nz]), rtol=1e-9, atol=1e-12)
            _close(f"{tag}: dual_direction(0) == 0", dirs[~nz], np.zeros_like(dirs[~nz]), rtol=0, atol=0)

    # subgradient_flow: where not free, (Z, U) is a subgradient pair
    try:
        Uf, free = penalty.subgradient_flow(Z, c, 1e-6)
    except NotImplementedError:
        Uf = None
    if Uf is not None:
        _shape(f"{tag}: subgradient_flow U", Uf, (n_edges, d))
        _shape(f"{tag}: subgradient_flow free mask", free, (n_edges, d))
        fixed_edges = ~np.any(free, axis=1)
        fy = penalty.edge_fenchel_young(Z[fixed_edges], Uf[fixed_edges], c[fixed_edges])
        _close(f"{tag}: subgradient_flow gives zero Fenchel-Young terms on fixed edges", fy,
               np.zeros_like(fy), rtol=0, atol=1e-9 * (1 + np.abs(penalty.edge_values(Z[fixed_edges],
                                                                                      c[fixed_edges]))))

    if PENALTIES.get(penalty.name) is type(penalty):  # registered: specs can name it
        rebuilt = get_penalty(penalty.name, **penalty.content())
        if rebuilt != penalty:
            raise AssertionError(f"{tag}: get_penalty(name, **content()) does not rebuild an equal penalty")
    repr(penalty)
