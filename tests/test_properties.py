"""Property-based tests (hypothesis) of the fast core and its certificate.

Profiles: the default ("ci") keeps the suite fast; ``HYPOTHESIS_PROFILE=nightly`` runs many more
examples.
"""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import gtvcvx as g
from conftest import make_penalty
from gtvcvx import data
from gtvcvx.reference import solve_primal

settings.register_profile("ci", max_examples=15, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("nightly", max_examples=300, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

TIGHT = dict(tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)


def build_loss(kind, n, d, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, size=n)
    if kind == "squared_distance":
        return g.SquaredDistance(rng.normal(scale=2.0, size=(n, d)))
    m = rng.integers(0, d + 3, size=n)  # nodes without data and m_i < d included
    if kind == "squared_error":
        ds = data.linear_model(labels, d, m, sigma=0.3, seed=seed)
        return g.SquaredError(ds.X, ds.y, d=d)
    ds = data.logistic_model(labels, d, m + 5, sigma=3.0, seed=seed)  # noisy: not separable
    return g.Logistic(ds.X, ds.y, d=d)


@st.composite
def problems(draw, losses=("squared_error", "logistic", "squared_distance")):
    n = draw(st.integers(2, 7))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=len(pairs))) if pairs else []
    weights = draw(st.lists(st.floats(0.1, 10.0), min_size=len(chosen), max_size=len(chosen)))
    graph = g.Graph.from_edges(n, np.array(chosen, dtype=int).reshape(-1, 2), np.array(weights))
    loss = build_loss(draw(st.sampled_from(losses)), n, draw(st.integers(1, 3)), draw(st.integers(0, 10**6)))
    penalty = make_penalty(draw(st.sampled_from(("norm2", "norm1", "squared_norm2"))))
    lam = draw(st.sampled_from([0.0, 0.01, 0.3, 2.0]))
    return g.GTVProblem(graph, loss, penalty, lam)


def assert_strictly_separated(problem, direction):
    """A ``no_minimizer`` claim checked exactly: along ``direction`` every sample's margin
    ``y_k x_k^T w_i`` is > 0 (rational arithmetic) and no edge with capacity changes, so the objective
    decreases without end and its infimum is not attained."""
    from fractions import Fraction

    nodes = np.flatnonzero(np.any(direction != 0, axis=1))
    assert nodes.size, "no_minimizer without a recession direction"
    for i in nodes:
        for x, y in zip(problem.loss.X[i], problem.loss.y[i]):
            margin = Fraction(float(y)) * sum(Fraction(float(a)) * Fraction(float(w)) for a, w in zip(x, direction[i]))
            assert margin > 0, f"node {i}: a sample with margin {float(margin)} along the claimed recession direction"
    for (i, j), c in zip(problem.graph.edges, problem.capacities):
        assert c == 0 or np.array_equal(direction[i], direction[j]), f"edge ({i}, {j}) changes along the direction"


@pytest.mark.slow
@given(problems())
def test_certificate_never_lies(problem):
    fast = g.solve(problem, tol=1e-7, max_iter=20_000)
    if fast.status == "no_minimizer":  # (frequent with lam = 0: every node its own component)
        assert_strictly_separated(problem, fast.info["recession_direction"])
        return  # CLARABEL then stops "optimal" somewhere along the recession direction
    ref = solve_primal(problem, "CLARABEL", **TIGHT)
    slack = 1e-9 * (1 + abs(ref.primal))
    if ref.status != "optimal":  # CLARABEL cannot always reach 1e-11 (exponential cones)
        ref = solve_primal(problem, "CLARABEL")
        slack = 1e-7 * (1 + abs(ref.primal))
    assume(ref.status == "optimal")
    assert fast.dual <= ref.primal + slack  # certified gap >= true suboptimality
    assert fast.primal >= ref.primal - slack
    if fast.status == "optimal":
        assert fast.rel_gap <= 1e-7
        assert fast.primal - ref.primal <= 1e-6 * (1 + abs(ref.primal))


@pytest.mark.slow
@given(problems(losses=("squared_error", "squared_distance")), st.integers(0, 10**6))
def test_node_relabelling_invariance(problem, seed):
    perm = np.random.default_rng(seed).permutation(problem.n)
    inverse = np.argsort(perm)
    permuted = g.GTVProblem(problem.graph.permute(perm), problem.loss.subset(inverse), problem.penalty, problem.lam)
    a = g.solve(problem, tol=1e-9)
    b = g.solve(permuted, tol=1e-9)
    assert abs(a.primal - b.primal) <= 2e-8 * (1 + abs(a.primal))
    # the objective is invariant: evaluating one solution in the other labelling gives the same value
    assert np.isclose(permuted.objective(a.W[inverse]), a.primal, rtol=1e-12, atol=1e-12)


@given(problems(losses=("squared_error", "squared_distance")), st.sampled_from([1e-3, 0.5, 7.0]))
def test_scaling_weights_and_lam_inversely(problem, factor):
    if problem.n_edges == 0:
        return
    scaled = g.GTVProblem(problem.graph.with_weights(problem.graph.weights * factor), problem.loss,
                          problem.penalty, problem.lam / factor)
    W = np.random.default_rng(0).normal(size=(problem.n, problem.d))
    assert np.isclose(scaled.objective(W), problem.objective(W), rtol=1e-12, atol=1e-14)
    a, b = g.solve(problem, tol=1e-9), g.solve(scaled, tol=1e-9)
    assert abs(a.primal - b.primal) <= 2e-8 * (1 + abs(a.primal))


@pytest.mark.slow
@given(problems(losses=("squared_error", "squared_distance")))
def test_duplicate_component_doubles_the_optimum(problem):
    n = problem.n
    edges = np.vstack([problem.graph.edges, problem.graph.edges + n])
    weights = np.concatenate([problem.graph.weights] * 2)
    graph = g.Graph.from_edges(2 * n, edges, weights)
    loss = problem.loss.subset(np.concatenate([np.arange(n), np.arange(n)]))
    double = g.GTVProblem(graph, loss, problem.penalty, problem.lam)
    a, b = g.solve(problem, tol=1e-9), g.solve(double, tol=1e-9)
    assert abs(b.primal - 2 * a.primal) <= 4e-8 * (1 + abs(b.primal))
