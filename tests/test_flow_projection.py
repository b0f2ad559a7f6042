"""The certificate's flow projection on graphs whose capacities span many orders of magnitude.

Gaussian k-NN weights of high-dimensional points range over tens of orders of magnitude; with one
sample per node (rank X_i < d) every node constrains its net flow. The minimum-norm correction
then overfilled the tiny edges and the common capacity scale collapsed the dual bound to ~0
(digits: relative gap 1 at Clarabel's optimum). These tests pin the capacity-weighted correction,
the alternating rounds, the exact (factorized) correction and the negligible edges, and check
every certificate against a tight CVXPY + CLARABEL reference.
"""

from __future__ import annotations

import numpy as np
import pytest

import gtvcvx as g
from gtvcvx.reference import solve_primal
from gtvcvx.solvers import certificate, certify_pair

TIGHT = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}


def _wide_capacities(seed: int = 0, n: int = 150, dim: int = 64):
    """A Gaussian 5-NN graph of points at scales e^-1.5..e^1 in 64-D (capacities ~1e-70..1e-2),
    one sample per node with d = 3 (every node rank-deficient)."""
    rng = np.random.default_rng(seed)
    scale = np.exp(rng.uniform(-1.5, 1.0, size=n))[:, None]
    points = rng.normal(size=(n, dim)) * scale
    graph = g.graphs.knn(points, 5)
    z = rng.normal(size=(n, 2))
    X = [np.array([[1.0, z[i, 0], z[i, 1]]]) for i in range(n)]
    y = [np.array([z[i, 0] + np.log(scale[i, 0])]) for i in range(n)]
    return g.GTVProblem(graph, g.SquaredError(X, y, d=3), g.Norm2(), 0.05)


@pytest.fixture(scope="module")
def wide():
    problem = _wide_capacities()
    caps = problem.capacities
    assert caps.min() < 1e-50 * caps.max()  # the regime this file is about
    reference = solve_primal(problem, "CLARABEL", **TIGHT)
    return problem, reference


def test_interior_answer_is_certified_and_agrees_with_clarabel(wide):
    problem, reference = wide
    result = g.solve(problem, tol=1e-6, method="interior")
    # before the weighted projection: status inaccurate, relative gap 1.0 (allowance 7e44)
    assert str(result.status) == "optimal" and result.rel_gap <= 1e-6
    assert abs(result.primal - reference.primal) <= 1e-6 * (1.0 + abs(reference.primal))
    assert result.gap >= result.primal - reference.primal - 1e-12  # honest


def test_core_certifies_too(wide):
    problem, reference = wide
    result = g.solve(problem, tol=1e-5, method="halpern", max_iter=20000)
    assert str(result.status) == "optimal"
    assert result.gap >= result.primal - reference.primal - 1e-12


def test_projected_flow_is_feasible_and_leaves_negligible_edges_empty(wide):
    problem, _ = wide
    answer = g.solve(problem, tol=1e-6, method="interior")
    rng = np.random.default_rng(1)
    U = answer.U + 1e-3 * problem.capacities.max() * rng.normal(size=answer.U.shape)
    projector = certificate.FlowProjector(problem, warm=False)
    projector.exact = True  # the factorized correction: to the rounding level
    flow = projector(U)
    caps = problem.capacities
    assert (problem.penalty.dual_norms(flow.U) <= caps).all()  # no tolerance: inside every ball
    negligible = caps <= certificate.NEGLIGIBLE_CAPACITY * caps.max()
    assert negligible.any() and not flow.U[negligible].any()
    # the linear constraints of the conjugates hold to rounding at every node
    operator = projector.operator
    residual = operator.apply(flow.U) / operator.row_scale
    assert np.abs(residual).max() <= 1e-14 * caps.max()
    # conjugate gradients stop at their target instead
    cg = certificate.FlowProjector(problem, warm=False)(U)
    target = 0.1 * certificate.DOMAIN_RTOL * cg.scale
    assert np.linalg.norm(operator.apply(cg.U) / operator.row_scale) <= 10 * target


def test_rounds_bring_the_capacity_scale_to_one(wide):
    problem, _ = wide
    answer = g.solve(problem, tol=1e-6, method="interior")
    rng = np.random.default_rng(2)
    U = answer.U + 0.5 * problem.capacities[:, None] * rng.normal(size=answer.U.shape)  # off every ball
    one = certificate.FlowProjector(problem, warm=False)(U, scale_tol=1.0)
    rounds = certificate.FlowProjector(problem, warm=False)(U)
    assert one.rounds == 1 and rounds.rounds > 1
    assert one.capacity_scale < 0.99 and rounds.capacity_scale >= 1.0 - 1e-6


def test_exact_correction_matches_conjugate_gradients(wide, monkeypatch):
    problem, reference = wide
    answer = g.solve(problem, tol=1e-6, method="interior")
    # (node by node the residual costs ~1e-16 here and no exact correction is needed: the graph's path allowance)
    monkeypatch.setattr(certificate.ResidualAllowance, "by_nodes", lambda self, per, estimated, *args: (per, estimated))
    cg_only = certify_pair(problem, answer.W, answer.U)
    monkeypatch.setattr(certificate, "CG_BEFORE_FACTOR", 1)  # factorize at once
    projector = certificate.FlowProjector(problem, warm=False)
    factored = certify_pair(problem, answer.W, answer.U, projector=projector)
    assert projector.operator._factor is not None
    assert factored.rel_gap <= 1e-6 and factored.gap >= answer.primal - reference.primal - 1e-12
    assert factored.dual == pytest.approx(cg_only.dual, rel=1e-6)


def test_a_worse_point_gets_a_gap_that_covers_it(wide):
    problem, reference = wide
    answer = g.solve(problem, tol=1e-6, method="interior")
    # move the node whose edges are weakest (nearly decoupled from the graph) off its own fit
    weakest = int(np.argmin(np.asarray(abs(problem.graph.incidence).T @ problem.capacities).ravel()))
    x = problem.loss.X[weakest][0]
    W = answer.W.copy()
    W[weakest] += 0.3 * x / np.linalg.norm(x)  # along its sample: its loss grows by 0.09 ||x||^2
    cert = certify_pair(problem, W, answer.U)
    assert cert.gap >= cert.primal - reference.primal - 1e-12
    assert cert.primal - reference.primal > 0.05  # the move did cost something


def test_equal_capacities_keep_the_minimum_norm_correction():
    rng = np.random.default_rng(0)
    graph = g.graphs.complete(12)
    X = [rng.normal(size=(1, 3)) for _ in range(graph.n)]
    y = [rng.normal(size=1) for _ in range(graph.n)]
    problem = g.GTVProblem(graph, g.SquaredError(X, y, d=3), g.Norm2(), 0.1)
    projector = certificate.FlowProjector(problem)
    assert projector.operator.weights is None and projector.support is None


def test_a_dense_block_system_is_never_factorized():
    """The GTV paper's Table I shape (dense graph, d = 100, m_i < d) ran the report out of memory
    when its 20,000-unknown correction was factorized; the fill estimate keeps it on CG."""
    rng = np.random.default_rng(0)
    n, d = 100, 100
    graph = g.Graph.from_edges(n, np.array([(i, j) for i in range(n) for j in range(i + 1, n)]),
                               rng.uniform(0.5, 2.0, size=n * (n - 1) // 2))
    X = [rng.normal(size=(5, d)) for _ in range(n)]
    y = [rng.normal(size=5) for _ in range(n)]
    problem = g.GTVProblem(graph, g.SquaredError(X, y), g.Norm2(), 0.05)
    projector = certificate.FlowProjector(problem)
    assert projector.operator.weights is not None and not projector.operator.factorable
    U = 0.05 * rng.normal(size=(problem.n_edges, d))
    cert = certify_pair(problem, np.zeros((n, d)), U, projector=projector, tol=1e-6)
    assert projector.operator._factor is None and np.isfinite(cert.gap)


def test_certify_pair_names_a_bad_tol(wide):
    problem, _ = wide
    W, U = np.zeros((problem.n, problem.d)), np.zeros((problem.n_edges, problem.d))
    for bad in (0.0, -1e-6, float("nan"), "1e-6"):
        with pytest.raises(ValueError, match="tol must be a positive number or None"):
            certify_pair(problem, W, U, tol=bad)


@pytest.mark.parametrize(("penalty", "iterations", "factor"), [("norm2", 500, 0.1), ("norm1", 1500, 0.5)])
def test_corrections_along_the_faces_certify_what_the_iterate_achieved(penalty, iterations, factor, monkeypatch,
                                                                        core_iterate):
    """Near the optimum, flows at capacity must stay aligned with the differences: a correction
    normal to a face costs the edge terms to first order, one along it to second order only.
    Issue 15 item 1: on the bench bank's florentine families / diabetes / nLasso row (15 nodes,
    3 samples each, d = 11: every node rank-deficient) the unrestricted correction stalled at
    3e-6 while the iterate's true gap reached 7e-10."""
    from gtvcvx.bench.real import build

    problem = build("florentine_families", "diabetes", penalty, 3, 0.05, 0)
    optimum = solve_primal(problem, "CLARABEL", **TIGHT).primal
    W, U = core_iterate(problem, iterations)
    true_gap = problem.objective(W) - optimum
    gaps = {}
    for faces in (True, False):
        monkeypatch.setattr(certificate, "CORRECT_ON_FACES", faces)
        cert = certify_pair(problem, W, U)
        assert cert.gap >= true_gap - 1e-12 * (1 + abs(optimum))  # honest either way
        gaps[faces] = cert.gap
    assert gaps[True] <= factor * gaps[False]
    assert gaps[True] <= 10.0 * max(true_gap, 1e-12 * (1 + abs(optimum)))


def test_faces_are_dropped_where_capacities_leave_them_unsolvable(monkeypatch, core_iterate):
    """On the digits 5-NN graph (capacities 1e-16..0.024 relative) conjugate gradients on the
    restricted system stall (1.6e-2 of a 3e-12 target after 1,000 steps): the projector falls
    back to the unrestricted correction, with the same certificate, and stops trying for the
    rest of the run (each attempt cost ~0.4 s, the certificates 1.1 -> 4.2 s in a 35 s solve)."""
    from gtvcvx.bench.real import build

    problem = build("digits_5nn", "digits", "norm2", 1, 0.05, 0)
    W, U = core_iterate(problem, 300)
    projector = certificate.FlowProjector(problem)
    assert problem.penalty.face_tangent(U, problem.capacities) is not None  # flows on faces
    tried = certify_pair(problem, W, U, projector=projector)
    assert projector.on_faces is False
    monkeypatch.setattr(certificate, "CORRECT_ON_FACES", False)
    plain = certify_pair(problem, W, U)
    assert tried.gap == pytest.approx(plain.gap, rel=1e-9)


def test_in_a_run_faces_start_once_the_gap_nears_tol(monkeypatch):
    """A step along faces sweeps |E| x d arrays (the unrestricted one the node Laplacian): in a run
    the projector uses them from the check-point after one within FACES_WITHIN of tol."""
    from gtvcvx.bench.real import build

    problem = build("florentine_families", "diabetes", "norm2", 3, 0.05, 0)
    result = g.solve(problem, tol=1e-15, max_iter=300, method="halpern")
    W, U = result.W, problem.penalty.project_conjugate_domain(result.U * 2.0, problem.capacities)  # on faces
    calls = []
    real = g.Norm2.face_tangent
    monkeypatch.setattr(g.Norm2, "face_tangent", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    projector = certificate.FlowProjector(problem)
    first = certify_pair(problem, W, U, projector=projector, tol=1e-9)
    assert not calls and projector.last_rel_gap == first.rel_gap > certificate.FACES_WITHIN * 1e-9
    certify_pair(problem, W, U, projector=projector, tol=first.rel_gap)  # now within the factor
    assert calls
    calls.clear()
    certify_pair(problem, W, U)  # a one-off certificate: always
    assert calls


def test_an_adopted_flow_is_never_overwritten():
    """The core keeps its best certificate's flow by taking it out of the projector's buffers
    (``FlowProjector.adopt``): the next projections must write elsewhere, and the spare handed back
    (the previous best's flow) is reused instead of a new array."""
    from conftest import make_problem

    problem = make_problem("squared_distance", "norm2", seed=3, sizes=(12, 10), d=3, lam=0.3)
    projector = certificate.FlowProjector(problem, keep_buffers=True)
    rng = np.random.default_rng(0)
    first = projector(rng.normal(size=(problem.n_edges, problem.d))).U
    kept = first.copy()
    projector.adopt(first)
    second = projector(rng.normal(size=(problem.n_edges, problem.d))).U
    assert second is not first and np.array_equal(first, kept)
    projector.adopt(second, spare=first)  # the old best gives its array back
    third = projector(rng.normal(size=(problem.n_edges, problem.d))).U
    assert third is first and third is not second
    projector.adopt(np.zeros(3), spare=second)  # not a kept buffer: nothing changes
    assert projector(rng.normal(size=(problem.n_edges, problem.d))).U is first


def test_the_iterates_certificate_reads_its_flow_in_place(core_iterate):
    """``certify_iterate`` (the core's certificate of its own iterate) gives certify_pair's numbers
    without copying the flow where nothing needs correcting (full-rank nodes; logistic ones, whose
    rounding-level residual is priced the same way), leaves the flow as it was, and goes through
    certify_pair where a row is outside its ball or nodes are constrained."""
    from conftest import make_problem

    from gtvcvx.solvers._edge_kernels import divergence

    full = make_problem("squared_error", "norm2", seed=4, sizes=(10, 9), d=3, m=6, lam=0.4, rho=1.0)
    deficient = make_problem("squared_error", "norm2", seed=4, sizes=(10, 9), d=3, m=1, lam=0.4)
    # (logistic nodes always leave a rounding-level residual to price: still read in place)
    logistic = make_problem("logistic", "norm2", seed=4, sizes=(10, 9), d=3, m=8, lam=0.4, rho=1.0)
    for problem, in_place in ((full, True), (deficient, False), (logistic, True)):
        W, U = (a.copy() for a in core_iterate(problem, 30))
        before = U.copy()
        reference = certify_pair(problem, W, U)
        cert = certificate.certify_iterate(problem, W, U, divergence(problem.graph, U),
                                           certificate.FlowProjector(problem, keep_buffers=True))
        assert (cert.U is U) is in_place and np.array_equal(U, before)
        assert np.isfinite(cert.gap) and cert.gap == pytest.approx(reference.gap, rel=1e-9, abs=1e-12)
        assert cert.primal == reference.primal
    # rows outside their balls (not what the sweep gives): projected like any caller's flow
    W, U = (a.copy() for a in core_iterate(full, 30))
    U *= 3.0
    cert = certificate.certify_iterate(full, W, U, divergence(full.graph, U), certificate.FlowProjector(full))
    assert cert.U is not U and cert.gap == pytest.approx(certify_pair(full, W, U).gap, rel=1e-12)


def test_the_best_certificates_flow_outlives_the_iterations_after_it(monkeypatch):
    """The core certifies its iterate's flow in place and copies it only when the loop goes on:
    where the first certificate stays the best (later ones made to look worse), the returned flow
    is the one that certificate measured, not what later sweeps wrote into the iterate."""
    import dataclasses

    from conftest import make_problem

    import gtvcvx.solvers.gtv as core

    problem = make_problem("squared_error", "norm2", seed=5, sizes=(12, 11), d=3, m=6, lam=0.3, rho=1.0)
    real = core.certify_iterate
    calls = []

    def later_look_worse(p, W, U, *args, **kwargs):
        cert = real(p, W, U, *args, **kwargs)
        calls.append(cert.U is U)
        return cert if len(calls) == 1 else dataclasses.replace(cert, rel_gap=1.0)

    monkeypatch.setattr(core, "certify_iterate", later_look_worse)
    result = g.solve(problem, tol=1e-12, max_iter=60, check_every=20, method="halpern")
    assert calls == [True, True, True] and result.history.iteration.tolist() == [20, 40, 60]
    again = certify_pair(problem, result.W, result.U)
    assert result.rel_gap == result.history.rel_gap.iloc[0] == pytest.approx(again.rel_gap, rel=1e-9)
    assert result.primal == again.primal


@pytest.mark.parametrize("heavy", [1e12, 1e300])
def test_one_heavy_edge_does_not_make_the_others_negligible(heavy, monkeypatch):
    """Two groups of five nodes (two without data, two with one sample in 2-D: constrained nodes) and
    one edge of weight ``heavy`` between two nodes with data. Relative to it every other capacity is
    "negligible" (below NEGLIGIBLE_CAPACITY of the largest): their flows were zeroed, their terms
    ``c_e ||z_e||`` were 8 % of the gap and every method stopped at a certified 0.077 (100,000 Halpern
    iterations). The certificate now asks the projector without the cut too: optimal, equal to CVXPY's."""
    rng = np.random.default_rng(0)
    edges = [(0, 1), (1, 2), (2, 3), (3, 4), (0, 4), (5, 6), (6, 7), (7, 8), (8, 9), (5, 9), (4, 5), (2, 7)]
    weights = np.r_[np.ones(10), 0.1, heavy]
    graph = g.Graph(10, np.array(edges), weights)
    counts = np.array([3, 1, 2, 0, 4, 2, 1, 3, 0, 2])
    node = np.repeat(np.arange(10), counts)
    X = rng.normal(size=(counts.sum(), 2))
    truth = np.where(node[:, None] < 5, [1.0, -1.0], [-1.0, 2.0])
    y = np.einsum("md,md->m", X, truth) + 0.01 * rng.normal(size=node.size)
    problem = g.GTVProblem(graph, g.SquaredError.from_stacked(X, y, node, 10), g.Norm2(), lam=0.05)
    projector = certificate.FlowProjector(problem)
    assert projector.support is not None and projector.support.sum() == 1  # all but the heavy edge are cut
    result = g.solve(problem, tol=1e-6, max_iter=20_000)
    assert result.status == "optimal" and result.rel_gap <= 1e-6
    # (CLARABEL fails at weight 1e300: the reference is the weight-1e12 problem's, the same optimum to ~1e-12)
    reference = solve_primal(problem.__class__(g.Graph(10, np.array(edges), np.r_[weights[:-1], 1e12]),
                                               problem.loss, problem.penalty, problem.lam), "CLARABEL")
    assert reference.status == "optimal"
    assert abs(result.primal - reference.primal) <= 1e-6 * (1.0 + abs(reference.primal))
    monkeypatch.setattr(certificate, "_cut_costs_most", lambda *args: False)
    cut = certify_pair(problem, result.W, result.U)
    assert cut.rel_gap > 0.05 and not cut.U[:-1].any()


@pytest.mark.parametrize("penalty", ["norm2", "squared_norm2"])
def test_the_spanning_trees_budget_is_a_tight_bound(penalty):
    """``_SubtreeSums.allowance`` bounds ``|sum_i <w_i - w_root, e_i>|`` over every W whose penalty is at most
    P, and the bound is attained (all of the budget on the worst tree edge, along its subtree sum)."""
    from gtvcvx.penalties import get_penalty
    from gtvcvx.solvers.certificate import ResidualAllowance

    rng = np.random.default_rng(3)
    n, d, P = 40, 3, 2.5
    edges = np.column_stack([np.arange(1, n), rng.integers(0, np.arange(1, n))])  # a random tree
    graph = g.Graph.from_edges(n, edges, rng.uniform(0.5, 2.0, size=n - 1))
    X = [rng.normal(size=(3, d)) for _ in range(n)]
    problem = g.GTVProblem(graph, g.SquaredError(X, [x @ rng.normal(size=d) for x in X]), get_penalty(penalty), 0.3)
    allowance = ResidualAllowance(problem)
    tree = allowance._tree
    assert tree is not None
    e = rng.normal(size=(n, d)) * 1e-9
    bound = float(tree.allowance(e, P).sum())
    # the subtree sums by brute force along the tree's parent pointers
    parent = np.full(n, -1)
    parent[tree.nonroot] = 0  # (filled below)
    order = tree.order
    position = np.empty(n, dtype=int)
    position[order] = np.arange(n)
    rows, cols = tree.matrix.nonzero()
    off = rows != cols
    parent[order[cols[off]]] = order[rows[off]]
    S = e.copy()
    for i in order:  # children first
        if parent[i] >= 0:
            S[parent[i]] += S[i]
    terms = tree.unit * np.linalg.norm(S, axis=1) * tree.nonroot
    if penalty == "norm2":
        attained = P * terms.max()
    else:
        attained = np.sqrt(P) * np.linalg.norm(terms)
    assert attained <= bound <= attained * (1 + 1e-6)
    # and a W on that budget reaches it: z_k = t_k S_k / ||S_k|| with the budget spent on the tree's edges
    if penalty == "norm2":
        k = int(np.argmax(terms))
        step = {k: P * tree.unit[k] * S[k] / np.linalg.norm(S[k])}
    else:
        scale = np.sqrt(P) / np.linalg.norm(terms)
        step = {k: scale * terms[k] * tree.unit[k] * S[k] / np.linalg.norm(S[k]) for k in np.flatnonzero(tree.nonroot)}
    W = np.zeros((n, d))
    for i in order[::-1]:  # parents first
        if parent[i] >= 0:
            W[i] = W[parent[i]] + step.get(i, 0.0)
    penalty_value = float(problem.penalty.edge_values(W[graph.edges[:, 0]] - W[graph.edges[:, 1]],
                                                      problem.capacities).sum())
    assert penalty_value <= P * (1 + 1e-9)
    root = np.flatnonzero(~tree.nonroot)[0]
    assert abs(np.einsum("nd,nd->", W - W[root], e)) >= bound * (1 - 1e-6)


def test_the_anchored_systems_factorization_solves_a_long_chain_and_centres_what_it_cannot_route(monkeypatch):
    """certificate._anchored_direct: on a 3,000-node chain (d = 2, unit weights, no metric) the Laplacian
    system that block-Jacobi CG leaves at its step limit is solved to the rounding level; a right-hand side
    whose sum is not zero (nothing routes it) leaves exactly that part as the residual, and the solution
    stays centred instead of growing by 1 / shift."""
    from gtvcvx.solvers._edge_kernels import differences, divergence

    n, d = 3000, 2
    graph = g.graphs.chain(n)
    weights = np.ones(graph.n_edges)
    hessians = np.zeros((n, d, d))

    def apply(lam):
        return divergence(graph, weights[:, None] * differences(graph, lam))

    rng = np.random.default_rng(0)
    rhs = rng.normal(size=(n, d))
    rhs -= rhs.mean(axis=0)  # consistent
    start = np.zeros((n, d))
    before = np.linalg.norm(rhs - apply(start))
    lam = certificate._anchored_direct(graph, weights, None, hessians, rhs, start, apply)
    assert np.linalg.norm(rhs - apply(lam)) <= 1e-9 * before
    shifted = rhs + 1.0  # a part of sum 2 n per column that no flow routes
    lam = certificate._anchored_direct(graph, weights, None, hessians, shifted, start, apply)
    left = np.linalg.norm(shifted - apply(lam))
    assert left == pytest.approx(np.sqrt(n * d), rel=1e-6)  # the mean, and nothing else
    assert np.abs(lam.mean(axis=0)).max() <= 1e-9 * np.abs(lam).max()
    # which graphs factor: the chain; not beyond the size limit, and not a large graph with more edges than
    # nodes (a random one would fill in before the count could refuse it)
    assert certificate._anchored_factorable(graph, d)
    monkeypatch.setattr(certificate, "ANCHORED_FACTOR_MAX_UNKNOWNS", n * d - 1)
    assert not certificate._anchored_factorable(graph, d)
    monkeypatch.undo()
    ring = g.Graph(n, np.column_stack([np.arange(n), (np.arange(n) + 1) % n]))  # n edges: still sparse
    assert certificate._anchored_factorable(ring, d)
    dense = g.graphs.sbm([n // 2, n // 2], p_in=0.01, p_out=0.001, seed=0)[0]
    monkeypatch.setattr(certificate, "FACTOR_MAX_UNKNOWNS", 100)
    assert dense.n_edges > n and not certificate._anchored_factorable(dense, d)
