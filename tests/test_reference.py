"""The CVXPY reference: strong duality between the primal and the network-flow dual."""

import numpy as np
import pytest

import gtvcvx as g
from conftest import LOSSES, PENALTIES, make_problem
from gtvcvx import graphs
from gtvcvx.reference import dual_statement, primal_statement, solve_dual, solve_primal

CLARABEL_TIGHT = dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)


def rel(a, b):
    return abs(a - b) / max(1.0, abs(a), abs(b))


@pytest.mark.parametrize("penalty", PENALTIES)
@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("seed", [0, 1])
def test_strong_duality_clarabel(loss, penalty, seed):
    problem = make_problem(loss, penalty, seed=seed, sizes=(4, 3), d=3, lam=0.4)
    primal = solve_primal(problem, "CLARABEL")
    dual = solve_dual(problem, "CLARABEL")
    assert primal.status == "optimal" and dual.status == "optimal"
    assert rel(primal.value, dual.value) < 1e-6
    # values re-evaluated by gtvcvx agree with the backend's
    assert rel(primal.primal, primal.value) < 1e-7
    assert np.isfinite(dual.dual) and rel(dual.dual, dual.value) < 1e-6
    # the W recovered from the flow problem's multipliers is primal optimal
    assert rel(problem.objective(dual.W), primal.value) < 1e-6


@pytest.mark.parametrize("penalty", PENALTIES)
@pytest.mark.parametrize("loss", LOSSES)
def test_strong_duality_scs(loss, penalty):
    problem = make_problem(loss, penalty, seed=3, sizes=(3, 3), d=2, lam=0.4)
    primal = solve_primal(problem, "SCS")
    dual = solve_dual(problem, "SCS")
    assert primal.status == "optimal" and dual.status == "optimal"
    assert rel(primal.value, dual.value) < 1e-4  # SCS eps 1e-7 (gtvcvx default)


@pytest.mark.parametrize("penalty", PENALTIES)
def test_dual_W_matches_primal_W_when_unique(penalty):
    """Strongly convex losses (squared distance; full-rank squared error) have a unique W."""
    problem = make_problem("squared_distance", penalty, seed=4, sizes=(4, 4), d=2, lam=0.5)
    W_primal = solve_primal(problem, "CLARABEL", **CLARABEL_TIGHT).W
    W_dual = solve_dual(problem, "CLARABEL", **CLARABEL_TIGHT).W
    assert np.abs(W_primal - W_dual).max() < 1e-5
    full_rank = make_problem("squared_error", penalty, seed=5, sizes=(3, 3), d=2, lam=0.2, m=6, rho=1.0)
    W_primal = solve_primal(full_rank, "CLARABEL", **CLARABEL_TIGHT).W
    W_dual = solve_dual(full_rank, "CLARABEL", **CLARABEL_TIGHT).W
    assert np.abs(W_primal - W_dual).max() < 1e-5


def test_lam_zero_gives_local_least_squares():
    problem = make_problem("squared_error", "norm2", seed=6, sizes=(3, 3), d=2, lam=0.0, m=5, rho=1.0)
    result = solve_primal(problem, "CLARABEL")
    for i, (X, y) in enumerate(zip(problem.loss.X, problem.loss.y)):
        w_ls = np.linalg.lstsq(X, y, rcond=None)[0]
        assert np.allclose(result.W[i], w_ls, atol=1e-6)
    dual = solve_dual(problem, "CLARABEL")
    assert np.abs(dual.U).max() < 1e-8  # zero capacity: no flow


def test_large_lam_gives_pooled_solution():
    problem = make_problem("squared_error", "norm2", seed=7, sizes=(5,), d=2, lam=1e4, p_in=0.8, m=4, rho=1.0)
    assert problem.graph.n_components == 1
    result = solve_primal(problem, "CLARABEL")
    # pooled minimizer of sum_i (1/m_i) ||y_i - X_i w||^2 (all m_i equal: ordinary least squares)
    X = np.vstack(problem.loss.X)
    y = np.concatenate(problem.loss.y)
    w_pool = np.linalg.lstsq(X, y, rcond=None)[0]
    assert np.abs(result.W - w_pool).max() < 1e-5


def test_clustering_known_answer_two_points():
    """Two points, one edge: centers move towards each other by lam*A/2 and fuse for lam >= 4."""
    G = g.Graph.from_edges(2, [[0, 1]], [1.0])
    pts = np.array([[0.0, 0.0], [4.0, 0.0]])
    for lam, expected in [(1.0, [[0.5, 0.0], [3.5, 0.0]]), (10.0, [[2.0, 0.0], [2.0, 0.0]])]:
        problem = g.GTVProblem(G, g.SquaredDistance(pts), g.Norm2(), lam)
        assert np.allclose(solve_primal(problem, "CLARABEL").W, expected, atol=1e-6)
        dual = solve_dual(problem, "CLARABEL")
        assert np.allclose(dual.W, expected, atol=1e-6)
        # flow on the edge: u = 2 (w_1 - a_1) ... = min(lam, |a_0 - a_1|)
        assert np.isclose(np.linalg.norm(dual.U), min(lam, 4.0), atol=1e-6)


def test_graph_without_edges_and_node_without_data():
    G = g.Graph.from_edges(3, [])
    loss = g.SquaredError([np.eye(2), np.zeros((0, 2)), np.ones((1, 2))], [np.ones(2), np.zeros(0), np.ones(1)])
    problem = g.GTVProblem(G, loss, g.Norm2(), 1.0)
    p = solve_primal(problem, "CLARABEL")
    d = solve_dual(problem, "CLARABEL")
    assert p.status == d.status == "optimal"
    assert abs(p.value) < 1e-8 and abs(d.value) < 1e-8
    assert d.U.shape == (0, 2)


def test_missing_and_failing_backends_become_a_status():
    problem = make_problem("squared_error", "norm2", seed=0, sizes=(2, 2), d=2)
    missing = solve_primal(problem, "NOT_A_SOLVER")
    assert missing.status == "solver_error" and "not installed" in missing.message and missing.W is None
    limited = solve_primal(problem, "SCS", max_iter=1)
    assert limited.status in ("max_iter", "inaccurate")
    bad_option = solve_dual(problem, "CLARABEL", no_such_option=3)
    assert bad_option.status == "solver_error"


def test_dual_objective_is_minus_inf_outside_domain():
    problem = make_problem("squared_error", "norm2", seed=0, sizes=(3, 3), d=2, lam=0.1)
    U = np.zeros((problem.n_edges, problem.d))
    U[0] = [1.0, 0.0]  # exceeds capacity 0.1
    assert problem.dual_objective(U) == -np.inf
    assert np.isfinite(problem.dual_objective(np.zeros_like(U))) or not problem.loss.has_data.all()


def test_paper_instance_compiles_quickly():
    """The paper's 200-node, ~5000-edge, d = 100 statements are vectorized (no per-node loops)."""
    import time

    graph, labels = graphs.sbm([100, 100], 0.5, 0.01, seed=0)
    from gtvcvx import data

    ds = data.linear_model(labels, d=100, m=10, sigma=1e-3, seed=0)
    problem = g.GTVProblem(graph, g.SquaredError(ds.X, ds.y), g.Norm2(), 1e-2)
    for statement in (primal_statement, dual_statement):
        cp_problem = statement(problem)[0]
        assert len(cp_problem.constraints) <= 3
        assert sum(v.size for v in cp_problem.variables()) < 3 * (problem.n_edges + problem.n) * problem.d
    start = time.perf_counter()
    primal_statement(problem)[0].get_problem_data("CLARABEL")
    assert time.perf_counter() - start < 60  # generous bound on a loaded CI machine


def test_constant_objective_still_returns_W():
    """No data and no edges: the objective is constant, every W is optimal (found by hypothesis)."""
    loss = g.SquaredError([np.zeros((0, 1))] * 2, [np.zeros(0)] * 2, d=1)
    problem = g.GTVProblem(g.Graph.from_edges(2, []), loss, g.Norm2(), 0.0)
    result = solve_primal(problem, "CLARABEL")
    assert result.status == "optimal" and result.W.shape == (2, 1) and result.primal == 0.0


def test_tol_is_mapped_to_each_backend_never_dropped():
    from gtvcvx.reference.backend import _options
    from gtvcvx.runner import run_solver

    assert _options("SCS", {"tol": 1e-3}) == {"eps_abs": 1e-3, "eps_rel": 1e-3, "max_iters": 200_000}
    assert _options("CLARABEL", {"tol": 1e-5}) == {"tol_gap_abs": 1e-5, "tol_gap_rel": 1e-5, "tol_feas": 1e-5}
    with pytest.raises(ValueError, match="option 'tol' is not supported for backend HIGHS"):
        _options("HIGHS", {"tol": 1e-5})
    problem = make_problem("squared_error", "norm2", seed=3)
    loose, tight = run_solver(problem, "SCS", tol=1e-2), run_solver(problem, "SCS", tol=1e-9)
    assert loose.status == tight.status == "optimal"
    assert loose.iterations < tight.iterations  # the tolerance reached SCS
    from gtvcvx.testing import certify

    assert certify(problem, tight.W).rel_gap <= 1e-7 < certify(problem, loose.W).rel_gap
