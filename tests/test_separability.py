"""No minimizer on separable classification data: detected, verified, reported as a status."""

from __future__ import annotations

import numpy as np
import pytest

import gtvcvx as g
from gtvcvx.penalties import get_penalty
from gtvcvx.reference import solve_primal
from gtvcvx.solvers import separability
from gtvcvx.solvers.separability import find_separation


def _logistic(X_nodes, y_nodes, edges, lam=0.1, penalty="norm2"):
    graph = g.Graph.from_edges(len(X_nodes), np.asarray(edges).reshape(-1, 2))
    return g.GTVProblem(graph, g.Logistic(X_nodes, y_nodes), get_penalty(penalty), lam)


def _overlapping(seed=0, n=6, m=4, d=3):
    """Labels drawn independently of the features: no direction separates them."""
    rng = np.random.default_rng(seed)
    X = [np.column_stack([np.ones(m), rng.normal(size=(m, d - 1))]) for _ in range(n)]
    y = [np.array([1.0, -1.0, 1.0, -1.0]) for _ in range(n)]
    for i in range(n):  # a sample and its mirror image with the other label: never strictly separable
        X[i][1] = X[i][0]
    return X, y, [(i, i + 1) for i in range(n - 1)]


def _separable(seed=0, n=4, m=3):
    """The label is the sign of the first feature (no intercept): separable by w = e_1."""
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(m, 2)) for _ in range(n)]
    for x in X:
        x[:, 0] = np.where(np.abs(x[:, 0]) < 0.2, 0.5, x[:, 0])
    return X, [np.sign(x[:, 0]) for x in X], [(i, i + 1) for i in range(n - 1)]


@pytest.mark.parametrize("penalty", ["norm2", "norm1", "squared_norm2"])
def test_separable_data_have_no_minimizer_and_the_direction_shows_it(penalty):
    X, y, edges = _separable()
    problem = _logistic(X, y, edges, penalty=penalty)
    result = g.solve(problem)
    assert str(result.status) == "no_minimizer" and result.W is None and result.iterations == 0
    assert "strictly linearly separable" in result.message and "12 samples" in result.message
    direction = result.info["recession_direction"]
    assert np.ptp(direction, axis=0).max() == 0  # constant on the (connected) graph: the penalty stays 0
    margins = np.concatenate([yi * (xi @ direction[i]) for i, (xi, yi) in enumerate(zip(X, y))])
    assert margins.min() > 0
    values = [problem.objective(t * direction) for t in (1.0, 10.0, 100.0)]
    assert values[0] > values[1] > values[2] > 0  # decreasing towards 0, never reaching it


def test_overlapping_data_are_solved_as_before_and_agree_with_clarabel():
    X, y, edges = _overlapping()
    problem = _logistic(X, y, edges)
    assert find_separation(problem) is None
    result = g.solve(problem, tol=1e-7)
    assert str(result.status) == "optimal"
    reference = solve_primal(problem, "CLARABEL")
    assert result.primal == pytest.approx(reference.primal, rel=1e-5)


def test_components_are_judged_separately():
    X_sep, y_sep, _ = _separable(n=2)
    X_ovl, y_ovl, _ = _overlapping(n=2)
    X, y = X_ovl + [np.column_stack([np.ones(3), x]) for x in X_sep], y_ovl + y_sep
    # nodes 0-1 overlap, nodes 2-3 are separable; the edge 1-2 joins them
    joined = _logistic(X, y, [(0, 1), (1, 2), (2, 3)])
    assert find_separation(joined) is None
    split = _logistic(X, y, [(0, 1), (2, 3)])
    found = find_separation(split)
    assert found is not None and found.component.tolist() == [2, 3] and found.n_samples == 6
    assert np.all(found.direction[:2] == 0)
    assert "the connected component of 2 nodes containing node 2" in g.solve(split).message


def test_without_a_penalty_every_node_is_its_own_component():
    X, y, edges = _overlapping(n=3)
    X[1] = X[1][:2] + np.array([[0.0, 1.0, 0.0], [0.0, -1.0, 0.0]])  # two samples in d = 3: separable
    X[1][0, 0] = X[1][1, 0] = 1.0
    y[1] = np.array([1.0, -1.0])
    assert find_separation(_logistic(X, y, edges, lam=0.1)) is None  # pooled with the overlapping nodes
    found = find_separation(_logistic(X, y, edges, lam=0.0))
    assert found is not None and found.component.tolist() == [1]
    assert "node 1 are strictly" in found.message("logistic")


def test_weak_separation_is_not_claimed():
    # the mirrored pair (same x, both labels) can only be separated with margin 0: no strict claim
    X = [np.array([[1.0, 0.0], [1.0, 0.0]]), np.array([[3.0, 1.0], [-2.0, 1.0]])]
    y = [np.array([1.0, -1.0]), np.array([1.0, -1.0])]
    assert find_separation(_logistic(X, y, [(0, 1)])) is None


def test_the_check_can_be_switched_off_and_only_applies_to_declaring_losses(monkeypatch):
    X, y, edges = _separable()
    problem = _logistic(X, y, edges)
    result = g.solve(problem, max_iter=200, check_separability=False)
    # the iterates drift towards the infimum 0; the zero dual point (inf L_i = 0) bounds it exactly, so a point
    # within tol of it is certified as such (before that point's term was infinite: max_iter, no bound)
    assert result.dual <= 0.0 and result.gap >= result.primal
    assert str(result.status) != "optimal" or result.primal <= 1e-6 * (1 + result.primal)
    squared = g.GTVProblem(problem.graph, g.SquaredError(X, y), get_penalty("norm2"), 0.1)
    assert find_separation(squared) is None  # no declared trait: nothing to decide
    monkeypatch.setattr(separability, "MAX_ENTRIES", 10)  # too large to check: nothing is claimed
    assert find_separation(problem) is None
