"""The exact chain solver (1-D total variation by dynamic programming): exactness against
CLARABEL, certificates, automatic selection and refusals."""

import numpy as np
import pytest

import gtvcvx as g
from tv_reference import clarabel_tv
from gtvcvx.capabilities import CapabilityError
from gtvcvx.reference import solve_primal
from gtvcvx.solvers._chain_kernels import compiled
from gtvcvx.solvers.chain import chain_plan, chain_refusal, solve_chain


def _tight_clarabel(problem):
    return solve_primal(problem, "CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)


def _shuffled_paths(rng, n, cuts=()):
    """A forest of paths on shuffled node labels, edges in random order and orientation."""
    perm = rng.permutation(n)
    edges = np.stack([perm[:-1], perm[1:]], axis=1)
    edges = np.delete(edges, list(cuts), axis=0)
    flip = rng.uniform(size=len(edges)) < 0.5
    edges[flip] = edges[flip][:, ::-1]
    edges = edges[rng.permutation(len(edges))]
    return g.Graph.from_edges(n, edges, rng.uniform(0.1, 2.0, len(edges)))


def test_dynamic_program_matches_clarabel_with_weighted_edges_and_data():
    pytest.importorskip("cvxpy")
    _, tv1d_paths, *_ = compiled()
    rng = np.random.default_rng(0)
    for trial in range(12):
        n = int(rng.integers(1, 30))
        y = rng.normal(size=n) * (100.0 if trial % 2 else 1.0)
        weight = rng.uniform(0.1, 3.0, n)
        lam = rng.uniform(0.0, 2.0, n) * (rng.uniform(size=n) > 0.3)  # some edges with lam = 0
        out = np.empty((1, n))
        tv1d_paths(y[None].copy(), np.zeros(1), weight, lam, np.array([0, n]), out)
        path = np.column_stack([np.arange(n - 1), np.arange(1, n)])
        assert np.abs(out[0] - clarabel_tv(y, weight, lam[:-1], path)).max() <= 1e-6 * (1 + np.abs(y).max()), trial


def test_large_lam_fuses_a_path_to_the_weighted_mean_and_zero_lam_returns_the_data():
    _, tv1d_paths, *_ = compiled()
    rng = np.random.default_rng(1)
    y, weight = rng.normal(size=50), rng.uniform(0.5, 2.0, 50)
    out = np.empty((1, 50))
    tv1d_paths(y[None].copy(), np.zeros(1), weight, np.full(50, 1e6), np.array([0, 50]), out)
    assert np.allclose(out[0], (weight * y).sum() / weight.sum(), atol=1e-10)
    tv1d_paths(y[None].copy(), np.zeros(1), weight, np.zeros(50), np.array([0, 50]), out)
    assert np.allclose(out[0], y, rtol=0, atol=1e-12)


@pytest.mark.parametrize("penalty, d", [(g.Norm1(), 3), (g.Norm2(), 1), (g.Norm1(), 1)])
@pytest.mark.parametrize("cuts", [(), (7, 15)])
def test_solve_picks_the_chain_solver_and_agrees_with_clarabel(penalty, d, cuts):
    rng = np.random.default_rng(len(cuts) + d)
    n = 24
    graph = _shuffled_paths(rng, n, cuts)
    points = np.cumsum(rng.normal(size=(n, d)), axis=0)
    problem = g.GTVProblem(graph, g.SquaredDistance(points), penalty, lam=0.8)
    result = g.solve(problem, tol=1e-10)
    assert result.info["method"] == "chain" and result.info["paths"] == len(cuts) + 1
    assert result.status == "optimal" and 0 <= result.rel_gap <= 1e-12
    ref = _tight_clarabel(problem)
    assert abs(result.primal - ref.primal) <= 1e-8 * (1 + abs(ref.primal))
    assert np.abs(result.W - ref.W).max() <= 1e-4
    # strong duality at the certifying flows: the dual objective equals the primal
    assert abs(problem.dual_objective(result.U) - result.primal) <= 1e-12 * (1 + abs(result.primal))


@pytest.mark.parametrize("d", [1, 3])
def test_a_chain_in_node_order_takes_the_natural_path_and_agrees_with_the_general_walk(d):
    rng = np.random.default_rng(10 + d)
    n = 60
    points = np.cumsum(rng.normal(size=(n, d)), axis=0)
    natural = g.graphs.chain(n, weights=rng.uniform(0.2, 2.0, n - 1))
    plan = chain_plan(g.GTVProblem(natural, g.SquaredDistance(points), g.Norm1(), 0.7))
    assert plan.natural and plan.n_paths == 1 and np.array_equal(plan.order, np.arange(n))
    # the same graph with its nodes relabelled by a permutation, solved by the general walk
    perm = rng.permutation(n)
    inverse = np.argsort(perm)
    shuffled = g.Graph.from_edges(n, inverse[natural.edges], natural.weights)
    results = []
    for graph, data in ((natural, points), (shuffled, points[perm])):
        problem = g.GTVProblem(graph, g.SquaredDistance(data), g.Norm1(), 0.7)
        assert chain_plan(problem).natural is (graph is natural)
        results.append(solve_chain(problem, tol=1e-12))
    assert all(r.status == "optimal" and r.rel_gap <= 1e-13 for r in results)
    assert np.allclose(results[0].W, results[1].W[inverse], rtol=0, atol=1e-12)
    assert abs(results[0].primal - results[1].primal) <= 1e-12 * (1 + abs(results[0].primal))
    # not natural: a chain whose edges are in node order but one is missing, or a single node
    cut = g.Graph.from_edges(n, np.delete(natural.edges, 5, axis=0))
    assert not chain_plan(g.GTVProblem(cut, g.SquaredDistance(points), g.Norm1(), 0.7)).natural
    single = g.GTVProblem(g.Graph.from_edges(1, np.zeros((0, 2), dtype=int)), g.SquaredDistance(points[:1]),
                          g.Norm1(), 0.7)
    assert chain_plan(single).natural and np.allclose(solve_chain(single).W, points[:1])


def test_chain_certificate_is_honest_for_a_suboptimal_W():
    rng = np.random.default_rng(3)
    graph = _shuffled_paths(rng, 40)
    problem = g.GTVProblem(graph, g.SquaredDistance(rng.normal(size=(40, 2)) * 5), g.Norm1(), lam=1.5)
    exact = solve_chain(problem)
    plan = chain_plan(problem)
    from gtvcvx.solvers.chain import _path_terms

    for scale in (1e-6, 1e-3, 1e-1):
        W = exact.W + scale * rng.normal(size=exact.W.shape)
        cert = g.solvers.certify_pair(problem, W, _path_terms(problem, W, plan).U)
        assert cert.gap >= problem.objective(W) - exact.primal - 1e-12


def test_exact_result_certifies_with_the_compiled_edge_terms_from_the_size_rule(monkeypatch):
    """From EXACT_COMPILED_ENTRIES flow entries a direct solve certified by ``certify_pair`` (the tree
    solver's path) takes the compiled one-pass edge terms (numba is loaded by the dynamic program):
    the same certificate as the NumPy form's to rounding, and the same honesty for a perturbed W."""
    from gtvcvx.solvers import certificate
    from gtvcvx.solvers.chain import EXACT_COMPILED_ENTRIES, _path_terms

    rng = np.random.default_rng(8)
    n = EXACT_COMPILED_ENTRIES + 5
    levels = np.repeat(rng.normal(size=40) * 3, -(-n // 40))[:n]
    problem = g.GTVProblem(g.graphs.chain(n), g.SquaredDistance((levels + rng.normal(size=n))[:, None]),
                           g.Norm1(), lam=2.0)
    assert problem.n_edges * problem.d < g._jit.MIN_ENTRIES  # the size rule alone would take NumPy
    result = g.solve(problem, tol=1e-9)
    assert result.info["method"] == "chain" and result.status == "optimal"
    asked = []
    terms = certificate.edge_norm_terms
    monkeypatch.setattr(certificate, "edge_norm_terms", lambda *a, **k: asked.append(k.get("compiled")) or terms(*a, **k))
    W = result.W + 1e-3 * rng.normal(size=result.W.shape)
    perturbed = g.solvers.chain.exact_result(problem, W, _path_terms(problem, W, chain_plan(problem)).U,
                                             1e-9, 0.0, 0.0, "chain", {})
    assert asked == [True]
    monkeypatch.undo()
    numpy_cert = g.solvers.certify_pair(problem, W, perturbed.U)
    assert perturbed.gap >= problem.objective(W) - result.primal - 1e-9 * abs(result.primal)
    assert perturbed.gap == pytest.approx(numpy_cert.gap, rel=1e-10)
    np.testing.assert_allclose(perturbed.info["edge_gaps"], numpy_cert.edge_gaps, rtol=1e-12, atol=1e-12)


def _path_problem(rng, n, d, penalty, cuts=(), scale=1.0, natural=False):
    graph = (g.graphs.chain(n, weights=rng.uniform(0.1, 2.0, n - 1)) if natural
             else _shuffled_paths(rng, n, cuts))
    points = scale * np.cumsum(rng.normal(size=(n, d)), axis=0)
    return g.GTVProblem(graph, g.SquaredDistance(points), penalty, lam=0.9)


@pytest.mark.parametrize("penalty, d", [(g.Norm1(), 3), (g.Norm2(), 1), (g.Norm1(), 1)])
@pytest.mark.parametrize("natural, cuts", [(True, ()), (False, ()), (False, (0, 9, 10, 30))])
def test_the_certificate_computed_along_the_paths_is_certify_pairs(penalty, d, natural, cuts):
    """The chain solver's one-pass certificate (path_certificate, direct_certificate) gives what
    certify_pair gives for the same W and flows, at the solution and at perturbed points (then it
    must still bound the true suboptimality): the same flows, node and edge terms, primal and gap
    to rounding. Cuts at 9 and 10 leave a path of one node."""
    from gtvcvx.solvers.chain import _path_terms, direct_certificate

    rng = np.random.default_rng(20 + d + len(cuts))
    problem = _path_problem(rng, 48, d, penalty, cuts, natural=natural)
    plan = chain_plan(problem)
    assert plan.natural is natural
    exact = solve_chain(problem, tol=1e-12)
    assert exact.status == "optimal" and exact.rel_gap <= 1e-13
    for step in (0.0, 1e-8, 1e-3, 1.0):
        W = exact.W + step * rng.normal(size=exact.W.shape)
        terms = _path_terms(problem, W, plan)
        fused = direct_certificate(problem, terms)
        generic = g.solvers.certify_pair(problem, W, terms.U)
        np.testing.assert_array_equal(fused.U, generic.U)
        assert fused.primal == pytest.approx(generic.primal, rel=1e-14, abs=1e-300)
        assert fused.gap == pytest.approx(generic.gap, rel=1e-9, abs=1e-14 * (1 + abs(generic.primal)))
        np.testing.assert_allclose(fused.node_gaps, generic.node_gaps, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(fused.edge_gaps, generic.edge_gaps, rtol=1e-13, atol=1e-13)
        assert fused.gap >= problem.objective(W) - exact.primal - 1e-12 * (1 + abs(exact.primal))
        assert fused.residuals == pytest.approx(generic.residuals, rel=1e-12)


def test_the_path_certificate_leaves_negligible_capacities_and_infinite_gaps_to_certify_pair():
    """Where certify_pair zeroes the flows of negligible capacities (NEGLIGIBLE_CAPACITY), or a term is
    not finite, direct_certificate returns None and exact_result certifies with certify_pair."""
    from gtvcvx.solvers.chain import _path_terms, direct_certificate

    rng = np.random.default_rng(5)
    n = 30
    weights = np.ones(n - 1)
    weights[7] = 1e-12
    problem = g.GTVProblem(g.graphs.chain(n, weights=weights), g.SquaredDistance(rng.normal(size=(n, 1))),
                           g.Norm1(), lam=0.5)
    plan = chain_plan(problem)
    exact = solve_chain(problem, tol=1e-10)
    assert direct_certificate(problem, _path_terms(problem, exact.W, plan)) is None
    assert exact.status == "optimal"
    generic = g.solvers.certify_pair(problem, exact.W, exact.U)
    assert exact.gap == generic.gap
    # a W with an infinite entry: no finite certificate along the paths
    plain = g.GTVProblem(g.graphs.chain(n), problem.loss, g.Norm1(), lam=0.5)
    W = solve_chain(plain).W.copy()
    W[3] = np.inf
    assert direct_certificate(plain, _path_terms(plain, W, chain_plan(plain))) is None


def test_badly_scaled_data_is_still_certified_near_machine_precision():
    rng = np.random.default_rng(4)
    points = 1e9 + np.cumsum(rng.normal(size=(200, 2)), axis=0)
    problem = g.GTVProblem(g.graphs.chain(200), g.SquaredDistance(points), g.Norm1(), lam=0.5)
    result = g.solve(problem, tol=1e-9)
    assert result.info["method"] == "chain" and result.status == "optimal" and result.rel_gap <= 1e-12


@pytest.mark.parametrize("make, reason, methods", [
    (lambda: g.GTVProblem(g.graphs.chain(8), g.SquaredDistance(np.ones((8, 2))), g.Norm2(), 1.0), "separate",
     ("halpern", "interior")),
    (lambda: g.GTVProblem(g.graphs.star(8), g.SquaredDistance(np.ones((8, 1))), g.Norm1(), 1.0), "degree > 2",
     ("tree",)),  # a forest: the exact tree solver (tests/test_tree.py)
    (lambda: g.GTVProblem(g.graphs.chain(8), g.SquaredError([np.eye(2)] * 8, [np.ones(2)] * 8), g.Norm1(), 1.0),
     "squared distance", ("halpern", "interior")),
])
def test_other_problems_fall_back_to_another_method_and_explicit_chain_says_why(make, reason, methods):
    problem = make()
    assert reason in chain_refusal(problem)
    assert g.solve(problem, tol=1e-6).info["method"] in methods
    with pytest.raises(CapabilityError, match=reason):
        g.solve(problem, method="chain")


def test_a_cycle_is_refused_after_the_walk():
    ring = g.Graph.from_edges(6, np.array([[0, 1], [1, 2], [2, 0], [3, 4], [4, 5]]))
    problem = g.GTVProblem(ring, g.SquaredDistance(np.arange(6.0)[:, None]), g.Norm1(), 1.0)
    assert chain_refusal(problem) == "" and chain_plan(problem) is None
    assert g.solve(problem).info["method"] in ("halpern", "interior")
    with pytest.raises(CapabilityError, match="cycle"):
        g.solve(problem, method="chain")


def test_chain_calls_the_callback_once_and_validates_the_warm_start():
    problem = g.GTVProblem(g.graphs.chain(5), g.SquaredDistance(np.arange(5.0)[:, None]), g.Norm1(), 0.3)
    seen = []
    result = g.solve(problem, callback=seen.append)
    assert len(seen) == 1 and seen[0].certificate.rel_gap == result.rel_gap
    with pytest.raises(ValueError, match="warm_start W"):
        g.solve(problem, warm_start={"W": np.ones((4, 1))})


def test_convex_clustering_on_a_chain_uses_the_exact_solver():
    from gtvcvx.clustering import convex_clustering

    points = np.concatenate([np.zeros((10, 1)), np.ones((10, 1)) * 5]) + np.linspace(0, 0.1, 20)[:, None]
    result = convex_clustering(points, 0.5, g.graphs.chain(20))
    assert result.gtv.info["method"] == "chain" and result.status == "optimal"


def test_bench_chain_instance_is_seeded_and_its_calls_agree():
    from gtvcvx.bench import chain as bench

    assert np.array_equal(bench.signal(5000, seed=3), bench.signal(5000, seed=3))
    assert not np.array_equal(bench.signal(5000, seed=3), bench.signal(5000, seed=4))
    instance = bench.build(3000, seed=1)
    solved = bench.call_gtvcvx(instance, repeats=1)
    kernel = bench.call_kernel(instance, repeats=1)
    assert solved["method"] == "chain" and solved["status"] == "optimal"
    assert np.abs(solved["x"] - kernel["x"]).max() <= 1e-9
    reference = bench.call_cvxpy(instance, "CLARABEL")
    assert np.abs(solved["x"] - reference["x"]).max() <= 1e-3


def test_data_whose_squares_overflow_float64_get_a_clear_inaccurate_status():
    """Points near 1e200 (their squares overflow): the exact solve still runs, and the result says
    that P(W) is not finite in float64 and to rescale, not that a flow exceeds its capacity."""
    rng = np.random.default_rng(6)
    problem = g.GTVProblem(g.graphs.chain(30), g.SquaredDistance(1e200 * rng.normal(size=(30, 1))), g.Norm1(),
                           lam=1e200)
    with np.errstate(all="ignore"):
        result = g.solve(problem, tol=1e-6)
    assert result.info["method"] == "chain" and result.status == "inaccurate"
    assert result.rel_gap == np.inf
    assert "P(W) evaluates to inf in float64" in result.message and "rescale the data" in result.message
    assert "capacity" not in result.message


def test_the_certificate_kernels_sum_by_neumaier_and_clip_their_flows():
    """The shared steps of path_certificate and tree_certificate: a compensated sum keeps what a
    plain one loses (1e16 + 1 - 1e16 = 1), and a flow is the edge's subgradient at a break, the
    stationarity recursion elsewhere, clipped into the capacity (a NaN stays NaN)."""
    from gtvcvx.solvers._chain_kernels import edge_step, neumaier_add

    total = carry = 0.0
    for value in (1e16, 1.0, -1e16):
        total, carry = neumaier_add(total, carry, value)
    assert total + carry == 1.0 and (1e16 + 1.0) - 1e16 == 0.0
    assert edge_step(2.0, 1.0, 0.5, 9.0, 0.0) == (0.5, 0.5, 0.5, 0.0)  # a break: c sign(z), term 0
    flow, clipped, value, term = edge_step(1.0, 1.0, 0.5, 0.2, -0.3)  # fused: 0.2 - 2 (-0.3) = 0.8
    assert flow == pytest.approx(0.8) and clipped == 0.5 and value == 0.0 and term == 0.0
    assert np.isnan(edge_step(np.nan, 1.0, 0.5, 0.0, np.nan)[1])
