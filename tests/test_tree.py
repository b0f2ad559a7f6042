"""The exact tree solver (total variation on a forest by message passing): exactness against
CLARABEL, certificates, automatic selection and refusals."""

import numpy as np
import pytest

import gtvcvx as g
from tv_reference import clarabel_tv
from gtvcvx.capabilities import CapabilityError
from gtvcvx.reference import solve_primal
from gtvcvx.solvers._tree_kernels import compiled
from gtvcvx.solvers.tree import _node_terms, solve_tree, tree_plan, tree_refusal


def _random_forest(rng, n, cuts=0):
    """A random tree on shuffled labels (node k joins an earlier node), minus ``cuts`` edges."""
    attach = [int(rng.integers(0, k)) for k in range(1, n)]
    perm = rng.permutation(n)
    edges = np.array([[perm[k], perm[attach[k - 1]]] for k in range(1, n)], dtype=np.int64).reshape(-1, 2)
    edges = edges[rng.permutation(len(edges))][cuts:]
    return edges


def test_dynamic_program_matches_clarabel_on_random_forests_with_weighted_edges_and_data():
    pytest.importorskip("cvxpy")
    forest_order, tv_tree, *_ = compiled()
    rng = np.random.default_rng(0)
    for trial in range(16):
        n = int(rng.integers(1, 40))
        edges = np.sort(_random_forest(rng, n, cuts=trial % 3 if n > 3 else 0), axis=1)
        ok, order, parent, parent_edge = forest_order(n, edges)
        assert ok and sorted(order) == list(range(n))
        y = rng.normal(size=n) * (100.0 if trial % 2 else 1.0)
        weight = rng.uniform(0.1, 3.0, n)
        lam_e = rng.uniform(0.0, 2.0, len(edges)) * (rng.uniform(size=len(edges)) > 0.2)  # some 0
        lam = np.zeros(n)
        lam[parent >= 0] = lam_e[parent_edge[parent >= 0]]
        out = np.empty((1, n))
        tv_tree(y[None].copy(), weight, lam, order, parent, out)
        assert np.abs(out[0] - clarabel_tv(y, weight, lam_e, edges)).max() <= 1e-6 * (1 + np.abs(y).max()), trial


def test_forest_order_roots_each_tree_and_finds_cycles():
    forest_order, *_ = compiled()
    edges = np.array([[0, 3], [3, 4], [1, 3], [2, 5]], dtype=np.int64)  # trees {0,1,3,4} and {2,5}
    ok, order, parent, parent_edge = forest_order(6, edges)
    assert ok and list(order) == [0, 3, 4, 1, 2, 5]
    assert list(parent) == [-1, 3, -1, 0, 3, 2] and list(parent_edge) == [-1, 2, -1, 0, 1, 3]
    assert not forest_order(4, np.array([[0, 1], [1, 2], [0, 2]], dtype=np.int64))[0]  # a triangle + a node


@pytest.mark.parametrize("penalty, d", [(g.Norm1(), 3), (g.Norm2(), 1)])
@pytest.mark.parametrize("cuts", [0, 2])
def test_solve_picks_the_tree_solver_and_agrees_with_clarabel(penalty, d, cuts):
    rng = np.random.default_rng(cuts + d)
    n = 30
    edges = _random_forest(rng, n, cuts)
    graph = g.Graph.from_edges(n, edges, rng.uniform(0.1, 2.0, len(edges)))
    assert graph.degree.max() > 2  # not a path: the chain solver refuses it
    points = rng.normal(size=(n, d)) * 3.0
    problem = g.GTVProblem(graph, g.SquaredDistance(points), penalty, lam=0.8)
    result = g.solve(problem, tol=1e-10)
    assert result.info["method"] == "tree" and result.info["trees"] == cuts + 1
    assert result.status == "optimal" and 0 <= result.rel_gap <= 1e-12
    ref = solve_primal(problem, "CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    assert abs(result.primal - ref.primal) <= 1e-8 * (1 + abs(ref.primal))
    assert np.abs(result.W - ref.W).max() <= 1e-4
    # strong duality at the certifying flows
    assert abs(problem.dual_objective(result.U) - result.primal) <= 1e-12 * (1 + abs(result.primal))


def test_tree_certificate_is_honest_for_a_suboptimal_W():
    rng = np.random.default_rng(3)
    edges = _random_forest(rng, 40)
    problem = g.GTVProblem(g.Graph.from_edges(40, edges), g.SquaredDistance(rng.normal(size=(40, 2)) * 5),
                           g.Norm1(), lam=1.5)
    exact = solve_tree(problem)
    plan = tree_plan(problem)
    lam = np.where(plan.parent >= 0, problem.capacities[np.maximum(plan.parent_edge, 0)], 0.0)
    for scale in (1e-6, 1e-3, 1e-1):
        W = exact.W + scale * rng.normal(size=exact.W.shape)
        cert = g.solvers.certify_pair(problem, W, _node_terms(problem, W, plan, lam).U)
        assert cert.gap >= problem.objective(W) - exact.primal - 1e-12


@pytest.mark.parametrize("penalty, d", [(g.Norm1(), 3), (g.Norm2(), 1), (g.Norm1(), 1)])
@pytest.mark.parametrize("cuts", [0, 3])
def test_the_certificate_computed_up_the_trees_is_certify_pairs(penalty, d, cuts):
    """The tree solver's one-pass certificate (tree_certificate, direct_certificate) gives what
    certify_pair gives for the same W and flows, at the solution and at perturbed points (then it
    must still bound the true suboptimality): the same flows, terms, primal and gap to rounding (the
    divergence sums a node's edges in another order)."""
    from gtvcvx.solvers.chain import direct_certificate

    rng = np.random.default_rng(30 + d + cuts)
    n = 50
    edges = _random_forest(rng, n, cuts)
    graph = g.Graph.from_edges(n, edges, rng.uniform(0.1, 2.0, len(edges)))
    problem = g.GTVProblem(graph, g.SquaredDistance(rng.normal(size=(n, d)) * 3.0), penalty, lam=0.9)
    plan = tree_plan(problem)
    lam = np.where(plan.parent >= 0, problem.capacities[np.maximum(plan.parent_edge, 0)], 0.0)
    exact = solve_tree(problem, tol=1e-12)
    assert exact.status == "optimal" and exact.rel_gap <= 1e-13
    for step in (0.0, 1e-8, 1e-3, 1.0):
        W = exact.W + step * rng.normal(size=exact.W.shape)
        terms = _node_terms(problem, W, plan, lam)
        fused = direct_certificate(problem, terms)
        generic = g.solvers.certify_pair(problem, W, terms.U)
        np.testing.assert_array_equal(fused.U, generic.U)
        assert fused.primal == pytest.approx(generic.primal, rel=1e-14)
        assert fused.gap == pytest.approx(generic.gap, rel=1e-9, abs=1e-14 * (1 + abs(generic.primal)))
        np.testing.assert_allclose(fused.node_gaps, generic.node_gaps, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(fused.edge_gaps, generic.edge_gaps, rtol=1e-13, atol=1e-13)
        assert fused.gap >= problem.objective(W) - exact.primal - 1e-12 * (1 + abs(exact.primal))


def test_a_star_fuses_to_the_weighted_mean_when_lam_is_large():
    points = np.array([[0.0], [1.0], [2.0], [9.0]])
    problem = g.GTVProblem(g.graphs.star(4), g.SquaredDistance(points), g.Norm1(), lam=100.0)
    result = g.solve(problem, tol=1e-9)
    assert result.info["method"] == "tree" and np.allclose(result.W, points.mean(), atol=1e-12)


def test_paths_keep_the_chain_solver_and_other_graphs_are_refused_with_reasons():
    rng = np.random.default_rng(4)
    chain = g.GTVProblem(g.graphs.chain(10), g.SquaredDistance(rng.normal(size=(10, 2))), g.Norm1(), 0.5)
    assert g.solve(chain, tol=1e-9).info["method"] == "chain"
    assert solve_tree(chain, tol=1e-9).info["method"] == "tree"  # a path is a tree too
    cycle = g.GTVProblem(g.Graph.from_edges(4, [[0, 1], [1, 2], [0, 2]]), g.SquaredDistance(np.ones((4, 1))),
                         g.Norm1(), 0.5)
    assert tree_refusal(cycle) == "" and tree_plan(cycle) is None  # 3 edges on 4 nodes: the walk finds it
    with pytest.raises(CapabilityError, match="tree solver does not apply: the graph has a cycle"):
        g.solve(cycle, method="tree")
    dense = g.GTVProblem(g.graphs.complete(5), g.SquaredDistance(np.ones((5, 1))), g.Norm1(), 0.5)
    assert "a forest has at most n - 1" in tree_refusal(dense)
    group = g.GTVProblem(g.graphs.star(5), g.SquaredDistance(np.ones((5, 2))), g.Norm2(), 0.5)
    assert "does not separate" in tree_refusal(group) and g.solve(group, tol=1e-6).info["method"] != "tree"


def test_bench_tree_instance_is_seeded_a_tree_and_its_calls_agree():
    from gtvcvx.bench import chain as bench

    graph, y = bench.random_tree(2000, seed=3)
    again, y_again = bench.random_tree(2000, seed=3)
    assert np.array_equal(graph.edges, again.edges) and np.array_equal(y, y_again)
    assert graph.n_edges == 1999 and graph.degree.max() > 2
    assert not np.array_equal(y, bench.random_tree(2000, seed=4)[1])
    instance = bench.build(2000, seed=1, kind="tree")
    solved = bench.call_gtvcvx(instance, repeats=1)
    kernel = bench.call_kernel(instance, repeats=1)
    assert solved["method"] == "tree" and solved["status"] == "optimal"
    assert np.abs(solved["x"] - kernel["x"]).max() <= 1e-9
    reference = bench.call_cvxpy(instance, "CLARABEL")
    assert np.abs(solved["x"] - reference["x"]).max() <= 1e-3
