"""``lam = 0`` (every node learns alone, the local baseline of federated learning) and tiny ``lam``: certified.

Before: with ``lam = 0`` the Huber, absolute-error, hinge and logistic losses never certified (three nodes of
five samples: the dual bound stayed at 0 or ``-inf`` until the time limit, and with no limit ``gtvcvx.solve``
did not return), although the primal was optimal; squared error certified at once. Two causes: a margin
loss represented a zero flow by the zero dual point (exact, but its Fenchel-Young term is the node's whole
loss), and a rounding-level residual of the loss's own dual point was measured against the flow's scale,
which is 0 without coupling. With ``lam = 1e-12`` the residual was priced through the graph at
``P(W) / c_e ~ 1e12`` per edge.
"""

import numpy as np
import pytest

import gtvcvx as g
from gtvcvx.reference import solve_primal
from gtvcvx.solvers.certificate import certify_pair


def _local_problem(loss_cls, lam, seed=0, n=3, m=5, d=2):
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(m, d)) for _ in range(n)]
    y = [rng.normal(size=m) for _ in range(n)]
    if "classifier" in loss_cls.traits:
        y = [np.sign(v) for v in y]
    return g.GTVProblem(g.graphs.chain(n), loss_cls(X, y), g.Norm2(), lam)


@pytest.mark.parametrize("loss_cls", [g.Huber, g.AbsoluteError, g.Hinge, g.Logistic, g.SquaredError])
def test_local_learning_is_certified_at_its_optimum(loss_cls):
    problem = _local_problem(loss_cls, 0.0)
    result = g.solve(problem, tol=1e-6, time_limit=30)
    p_star = problem.objective(solve_primal(problem, "CLARABEL").W)
    assert result.status == "optimal", result.message
    assert result.rel_gap <= 1e-6
    assert result.dual <= p_star + 1e-9 * (1 + abs(p_star))  # a lower bound
    assert abs(result.primal - p_star) <= 1e-6 * (1 + abs(p_star))


@pytest.mark.parametrize("loss_cls", [g.Huber, g.AbsoluteError, g.Hinge, g.Logistic])
def test_without_coupling_the_certificate_of_a_worse_point_still_bounds_its_suboptimality(loss_cls):
    problem = _local_problem(loss_cls, 0.0, seed=1)
    ref = solve_primal(problem, "CLARABEL")
    p_star = problem.objective(ref.W)
    for shift in (1e-6, 1e-3, 0.3):
        W = ref.W + shift * np.random.default_rng(2).normal(size=ref.W.shape)
        cert = certify_pair(problem, W, np.zeros((problem.n_edges, problem.d)))
        assert cert.gap >= problem.objective(W) - p_star - 1e-9 * (1 + abs(p_star))
        assert cert.dual <= p_star + 1e-9 * (1 + abs(p_star))
    exact = certify_pair(problem, ref.W, np.zeros((problem.n_edges, problem.d)))
    assert exact.rel_gap < 1e-5  # (CLARABEL's point: the certificate is as tight as the point)


def test_a_separable_hinge_node_keeps_the_zero_dual_point_and_the_others_their_own():
    """Node 0's samples are separable (``inf L_0 = 0``, no bound on its optimum: the zero dual point is exact
    and its term 0); nodes 1 and 2 overlap (their own dual points): the choice is made per component."""
    rng = np.random.default_rng(3)
    X = [rng.normal(size=(6, 2)) for _ in range(3)]
    y = [np.sign(X[0][:, 0]), np.sign(rng.normal(size=6)), np.sign(rng.normal(size=6))]
    problem = g.GTVProblem(g.graphs.chain(3), g.Hinge(X, y), g.Norm2(), 0.0)
    result = g.solve(problem, tol=1e-6, time_limit=30)
    p_star = problem.objective(solve_primal(problem, "CLARABEL").W)
    assert result.status == "optimal", result.message
    assert result.dual <= p_star + 1e-9 * (1 + abs(p_star))
    assert result.info["node_gaps"][0] == 0.0  # the zero dual point at the separable node


def test_a_tiny_coupling_prices_rounding_residuals_node_by_node():
    """``lam = 1e-12``: through the graph a residual of 1e-15 costs ~1e12 P(W) per edge (the gap stayed at
    4e-4 until the time limit); node by node, each at its own range bound."""
    problem = _local_problem(g.Huber, 1e-12, seed=165 % 7, n=3, m=8)
    result = g.solve(problem, tol=1e-6, time_limit=30)
    p_star = problem.objective(solve_primal(problem, "CLARABEL").W)
    assert result.status == "optimal", result.message
    assert result.dual <= p_star + 1e-9 * (1 + abs(p_star))


@pytest.mark.parametrize("loss_cls", [g.Huber, g.AbsoluteError, g.Hinge])
def test_the_dual_objective_at_the_zero_flow_is_the_sum_of_local_optima(loss_cls):
    """``D(0) = -sum_i L_i^*(0) = sum_i min L_i``: the margin losses' conjugate at ``v = 0`` was the zero dual
    point's value 0 (a bound, but not the value)."""
    problem = _local_problem(loss_cls, 0.0, seed=4)
    ref = solve_primal(problem, "CLARABEL")
    p_star = problem.objective(ref.W)
    dual = problem.dual_objective(np.zeros((problem.n_edges, problem.d)), hint=ref.W)
    assert dual <= p_star + 1e-9 * (1 + abs(p_star))
    assert dual >= p_star - 1e-6 * (1 + abs(p_star))
