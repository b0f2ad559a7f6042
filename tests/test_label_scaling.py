"""Objectives far below 1: solved in units where the relative tol is relative (gtvcvx.solvers._scaling)."""

import numpy as np
import pytest

import gtvcvx as g
from gtvcvx.capabilities import provides
from gtvcvx.results import relative_gap
from gtvcvx.solvers._scaling import label_scale


def _problem(scale: float, loss_name: str = "squared_error") -> g.GTVProblem:
    base = g.load_spec("problems/quick/sbm_nlasso.toml").problem
    X, y = base.loss.X, [label * scale for label in base.loss.y]
    loss = g.losses.SquaredError(X, y) if loss_name == "squared_error" else g.losses.Huber(X, y, delta=0.5 * scale)
    return g.GTVProblem(base.graph, loss, base.penalty, base.lam * scale)


@pytest.fixture(scope="module")
def reference():
    """The labels at the scale 1 (where P(0) >= 1: solved as given), to 1e-12."""
    problem = _problem(1.0)
    assert label_scale(problem) == 1.0
    return g.solve(problem, tol=1e-12, method="interior")


@pytest.mark.parametrize("scale", [1e-3, 1e-6, 2.0 ** -30])
def test_labels_far_below_one_are_solved_to_a_relative_tol(reference, scale):
    """Labels at 1e-3: the Halpern core stopped 'optimal' after 10 iterations with W 47 % away from
    the solution and gap / P = 1.1 (the rel. gap's '1 +' made tol = 1e-6 absolute on P ~ 4e-8).
    Solved with labels times a power of two, W is the unit-scale solution times the scale and the
    certified bounds bracket the caller's optimum."""
    problem = _problem(scale)
    result = g.solve(problem, tol=1e-6, method="halpern")
    assert result.status == "optimal"
    c = result.info["label_scale"]
    assert c > 1 and c == 2.0 ** round(np.log2(c)) and 1 <= c * c * problem.objective(np.zeros_like(result.W)) < 4
    relative_error = np.linalg.norm(result.W - scale * reference.W) / np.linalg.norm(scale * reference.W)
    assert relative_error < 1e-4
    optimum = scale**2 * reference.primal  # (the unit-scale optimum, known to 1e-12)
    assert result.dual <= optimum * (1 + 1e-9) and result.primal >= optimum * (1 - 1e-9)
    assert result.gap <= 1e-5 * result.primal  # relative to the objective, not to 1
    assert result.rel_gap == relative_gap(result.primal, result.dual)
    assert np.isclose(result.primal, problem.objective(result.W), rtol=1e-12)
    history = result.history
    assert (history["solved_rel_gap"] >= history["rel_gap"]).all()  # (the run stopped on the solved one)


def test_power_of_two_scales_give_the_same_run_exactly():
    a, b = (g.solve(_problem(2.0 ** -k), tol=1e-6, method="halpern") for k in (20, 30))
    assert a.iterations == b.iterations and a.info["label_scale"] == b.info["label_scale"] / 2.0**10
    assert np.array_equal(b.W, a.W * 2.0 ** -10) and np.array_equal(b.U, a.U * 2.0 ** -10)
    assert b.primal == a.primal * 2.0 ** -20 and b.dual == a.dual * 2.0 ** -20


def test_callbacks_and_warm_starts_are_in_the_callers_units():
    problem = _problem(1e-3)
    seen = []

    def callback(info):
        seen.append((problem.objective(info.W), info.certificate.primal, info.certificate.dual,
                     np.abs(info.U).max(), info.certificate.rel_gap))
        return False

    result = g.solve(problem, tol=1e-6, method="halpern", callback=callback)
    assert seen
    for objective, primal, dual, flow, rel_gap in seen:
        assert np.isclose(objective, primal, rtol=1e-9) and dual <= primal
        assert flow <= problem.lam * problem.graph.weights.max() * (1 + 1e-9)  # caller-unit capacities
        assert rel_gap == relative_gap(primal, dual)
    again = g.solve(problem, tol=1e-6, method="halpern", warm_start=result)
    assert again.status == "optimal" and again.iterations < result.iterations
    assert np.linalg.norm(again.W - result.W) <= 1e-4 * np.linalg.norm(result.W)


def test_scaling_applies_only_where_it_is_exact_and_needed():
    assert label_scale(_problem(1.0)) == 1.0  # P(0) >= 1
    assert label_scale(_problem(1e-3, "huber")) > 1
    spec = g.load_spec("problems/quick/logistic_star.toml")
    assert not provides(spec.problem.loss, "scaled") and label_scale(spec.problem) == 1.0
    result = g.solve(_problem(1.0), tol=1e-6, method="halpern")
    assert "label_scale" not in result.info


@pytest.mark.parametrize("make", [
    lambda rng: g.losses.SquaredError([rng.normal(size=(3, 2)), rng.normal(size=(1, 2))], [rng.normal(size=3), [0.5]]),
    lambda rng: g.losses.Huber([rng.normal(size=(4, 2)), rng.normal(size=(2, 2))], [rng.normal(size=4), [3.0, -2.0]],
                               delta=0.7),
    lambda rng: g.losses.SquaredDistance(rng.normal(size=(2, 2))),
])
def test_scaled_losses_grow_quadratically(make):
    rng = np.random.default_rng(0)
    loss = make(rng)
    W = 3.0 * rng.normal(size=(loss.n, loss.d))
    for factor in (2.0 ** -7, 0.3, 8.0):
        scaled = loss.scaled(factor)
        assert np.isclose(scaled.value(factor * W), factor**2 * loss.value(W), rtol=1e-12)
        assert np.allclose(scaled.gradient(factor * W), factor * loss.gradient(W), rtol=1e-12)


def test_a_message_quoting_the_runs_gaps_says_in_which_units():
    result = g.solve(_problem(1e-3), tol=1e-30, method="halpern")
    assert result.status == "inaccurate" and "float64 cannot certify" in result.message
    assert result.message.endswith("[gaps in this message: labels x 2^10, see info['label_scale']]")
    assert result.rel_gap < 1e-20  # (the caller-unit gap is far below the run's 7e-16)


def test_ssnal_called_directly_scales_tiny_points_too():
    """solve_ssnal (convex clustering's SSNAL) on points at 2^-20 and 2^-30 scale: the same run
    exactly, in the caller's units, and the unit-scale solution times the scale."""
    from gtvcvx.clustering import clustering_problem
    from gtvcvx.solvers.ssnal import solve_ssnal

    rng = np.random.default_rng(3)
    points = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]])[rng.integers(0, 3, size=40)] + 0.5 * rng.normal(size=(40, 2))
    unit, _ = clustering_problem(points, 1.5)
    reference = solve_ssnal(unit, tol=1e-10)
    assert "label_scale" not in reference.info
    runs = []
    for k in (20, 30):
        tiny = g.GTVProblem(unit.graph, g.losses.SquaredDistance(points * 2.0 ** -k), unit.penalty, 1.5 * 2.0 ** -k)
        seen = []
        runs.append(solve_ssnal(tiny, tol=1e-8, callback=lambda info: seen.append(info.certificate.primal) or False))
        assert runs[-1].status == "optimal" and runs[-1].info["label_scale"] > 1
        assert np.isclose(seen[-1], runs[-1].primal, rtol=1e-12)  # the callback's certificate is in caller units
        error = np.linalg.norm(runs[-1].W - 2.0 ** -k * reference.W) / np.linalg.norm(2.0 ** -k * reference.W)
        assert error < 1e-5
    assert np.array_equal(runs[1].W, runs[0].W * 2.0 ** -10) and runs[1].primal == runs[0].primal * 2.0 ** -20
