"""Degenerate problems and numerical hygiene of the fast core and the problem model."""

import numpy as np
import pytest

import gtvcvx as g
from gtvcvx.reference import solve_primal

TIGHT = dict(tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)


def rel(a, b):
    return abs(a - b) / max(1.0, abs(a), abs(b))


def test_conservation_forcing_zero_flow_is_certified():
    """Chain with data only at one end: conservation forces U = 0 on every edge.

    The projected flow is then ~0 while the iterate was not; the domain test must judge
    rounding relative to the iterate (regression: the certificate used to stay -inf)."""
    rng = np.random.default_rng(0)
    X = [np.zeros((0, 2))] * 4 + [rng.random((3, 2))]
    y = [np.zeros(0)] * 4 + [rng.random(3)]
    problem = g.GTVProblem(g.graphs.chain(5), g.SquaredError(X, y), g.Norm1(), 0.5)
    result = g.solve(problem)
    assert result.status == "optimal" and np.isfinite(result.dual)
    assert np.abs(result.U).max() < 1e-15
    w_ls = np.linalg.lstsq(X[4], y[4], rcond=None)[0]
    assert np.allclose(result.W, w_ls, atol=1e-3)


def test_without_any_certificate_the_latest_iterate_is_returned(monkeypatch):
    import dataclasses

    import gtvcvx.solvers.gtv as core

    def without_bound(real):
        def no_bound(problem, W, U, *args, **kwargs):  # as if the flows never became dual feasible
            cert = real(problem, W, U, *args, **kwargs)
            return dataclasses.replace(cert, dual=-np.inf, gap=np.inf, rel_gap=np.inf)

        return no_bound

    monkeypatch.setattr(core, "certify_pair", without_bound(core.certify_pair))
    monkeypatch.setattr(core, "certify_iterate", without_bound(core.certify_iterate))
    problem = g.GTVProblem(g.graphs.chain(6), g.SquaredDistance(np.arange(6.0)[:, None] ** 2), g.Norm2(), 3.0)
    result = g.solve(problem, max_iter=200, check_every=50, method="halpern")  # "auto" would solve the chain exactly
    assert result.status == "max_iter" and result.history.iteration.iloc[-1] == 200
    assert result.primal == result.history.primal.iloc[-1] < result.history.primal.iloc[0]


def test_no_data_anywhere_is_optimal_with_a_note():
    loss = g.SquaredError([np.zeros((0, 2))] * 5, [np.zeros(0)] * 5, d=2)
    result = g.solve(g.GTVProblem(g.graphs.chain(5), loss, g.Norm2(), 1.0))
    assert result.status == "optimal" and result.primal == 0.0
    assert "not unique" in result.message


def test_component_without_data_is_reported_not_unique():
    G = g.Graph.from_edges(4, [[0, 1], [2, 3]])
    loss = g.SquaredError([np.ones((2, 1)), np.ones((1, 1)), np.zeros((0, 1)), np.zeros((0, 1))],
                          [np.ones(2), np.ones(1), np.zeros(0), np.zeros(0)])
    result = g.solve(g.GTVProblem(G, loss, g.Norm2(), 1.0))
    assert result.status == "optimal" and "not unique" in result.message and "1 connected component" in result.message


@pytest.mark.parametrize("lam", [1e-12, 1e-6, 1.0, 1e6, 1e10])
def test_extreme_lam(lam):
    pts = np.random.default_rng(1).random((6, 1))  # d = 1
    problem = g.GTVProblem(g.graphs.complete(6), g.SquaredDistance(pts), g.Norm2(), lam)
    result = g.solve(problem, tol=1e-8)
    ref = solve_primal(problem, "CLARABEL", **TIGHT)
    assert result.status == "optimal"
    assert result.dual <= ref.primal + 1e-9 * (1 + abs(ref.primal))
    assert abs(result.primal - ref.primal) <= 1e-7 * (1 + abs(ref.primal))


def test_extreme_weights():
    G = g.Graph.from_edges(4, [[0, 1], [1, 2], [2, 3]], [1e-9, 1.0, 1e9])
    problem = g.GTVProblem(G, g.SquaredDistance(np.arange(8.0).reshape(4, 2)), g.Norm2(), 1.0)
    result = g.solve(problem, tol=1e-9)
    ref = solve_primal(problem, "CLARABEL", **TIGHT)
    assert result.status == "optimal" and rel(result.primal, ref.primal) < 1e-7


def test_float32_and_integer_inputs_are_promoted():
    pts = np.arange(12, dtype=np.float32).reshape(6, 2)
    loss = g.SquaredDistance(pts)
    assert loss.points.dtype == np.float64
    G = g.Graph.from_edges(6, np.array([[0, 1], [2, 3]], dtype=np.int32), np.array([1, 2], dtype=np.int16))
    result = g.solve(g.GTVProblem(G, loss, g.Norm2(), np.float32(0.5)))
    assert result.W.dtype == np.float64 and result.status == "optimal"


def test_nan_inputs_are_rejected_with_names():
    with pytest.raises(ValueError, match=r"points must be finite"):
        g.SquaredDistance(np.array([[0.0, np.nan]]))
    problem = g.GTVProblem(g.graphs.chain(3), g.SquaredDistance(np.zeros((3, 2))), g.Norm2(), 1.0)
    with pytest.raises(ValueError, match=r"W must be finite"):
        problem.objective(np.full((3, 2), np.inf))
    with pytest.raises(ValueError, match=r"lam must be a finite number >= 0"):
        g.GTVProblem(g.graphs.chain(3), g.SquaredDistance(np.zeros((3, 2))), g.Norm2(), float("nan"))
    with pytest.raises(ValueError, match=r"lam must be a finite number >= 0"):
        g.GTVProblem(g.graphs.chain(3), g.SquaredDistance(np.zeros((3, 2))), g.Norm2(), -1.0)
    with pytest.raises(ValueError, match=r"the loss covers 2 nodes but the graph has 3 nodes"):
        g.GTVProblem(g.graphs.chain(3), g.SquaredDistance(np.zeros((2, 2))), g.Norm2(), 1.0)


@pytest.mark.parametrize("method", ["auto", "halpern", "pdhg"])
def test_a_warm_start_whose_objective_overflows_is_refused_by_name(method):
    """A caller's warm start at 1e300 on sane data: the run ended ``solver_error`` telling the caller to
    "rescale the data". The warm start is named instead; a flow of 1e300 is clipped into the
    capacities and does no harm; data that overflow at W = 0 too still end with the solve's status."""
    rng = np.random.default_rng(0)
    problem = g.GTVProblem(g.graphs.star(20), g.SquaredDistance(rng.normal(size=(20, 3))), g.Norm2(), lam=0.3)
    with pytest.raises(ValueError, match=r"warm_start W: P\(W\) evaluates to inf .* up to 1e\+300"):
        g.solve(problem, warm_start={"W": np.full((20, 3), 1e300)}, method=method)
    result = g.solve(problem, warm_start={"U": np.full((problem.n_edges, 3), 1e300)}, method=method, tol=1e-6)
    assert result.status == "optimal"
    huge = g.GTVProblem(g.graphs.star(20), g.SquaredDistance(1e160 * rng.normal(size=(20, 3))), g.Norm2(), lam=1e160)
    with np.errstate(all="ignore"):
        result = g.solve(huge, warm_start={"W": np.full((20, 3), 1e300)}, method="halpern")
    assert result.status == "solver_error" and "rescale the data" in result.message


def test_a_label_whose_square_overflows_is_a_status_not_a_math_domain_error():
    """One label of 1e300 on a 10-node graph: the primal and dual moves of a restart differ by more than
    float64 spans, and ``log(dual_move / primal_move)`` raised "math domain error" out of ``g.solve`` (the
    CLI printed just that). The primal weight now stays where the ratio is not a positive float, and the
    run ends with the overflow status and its reason."""
    from gtvcvx._restart import updated_primal_weight

    assert updated_primal_weight(2.0, 1e300, 1e-300) == 2.0 and updated_primal_weight(2.0, 1e-300, 1e300) == 2.0
    assert updated_primal_weight(2.0, 1.0, 4.0) == pytest.approx(np.sqrt(8.0))  # exp(log(4) / 2 + log(2) / 2)
    rng = np.random.default_rng(0)
    node = np.repeat(np.arange(10), 3)
    y = rng.normal(size=30)
    y[0] = 1e300
    problem = g.GTVProblem(g.graphs.chain(10), g.SquaredError.from_stacked(rng.normal(size=(30, 2)), y, node, 10),
                           g.Norm2(), lam=0.05)
    with np.errstate(all="ignore"):
        result = g.solve(problem, tol=1e-6, method="halpern")
    assert result.status == "solver_error" and "rescale the data" in result.message


def test_features_whose_squares_overflow_stop_the_core_although_the_objective_is_finite():
    """Features near 1e160 with unit labels (the red-team's spec): P(W) is finite at every iterate (W ~ 1e-160)
    but the certificate's allowances square the data, so its dual bound was -inf at every check-point and the
    core ran 100,000 iterations (a minute) to ``max_iter``. It stops after NONFINITE_CHECKS of them, saying why."""
    from gtvcvx.solvers._pdhg_common import NONFINITE_CHECKS

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(2, 2)) * 1e160 for _ in range(4)]
    problem = g.GTVProblem(g.graphs.chain(4), g.SquaredError(X, [rng.normal(size=2) for _ in range(4)]), g.Norm2(), 0.1)
    with np.errstate(all="ignore"):
        result = g.solve(problem, tol=1e-6, method="halpern")
    assert result.status == "solver_error" and result.iterations < 1000 and np.isfinite(result.primal)
    assert f"no finite certificate at {NONFINITE_CHECKS} check-points in a row" in result.message
    assert "data reach 2.33e+160 in magnitude" in result.message and "rescale the data" in result.message
    same = g.GTVProblem(problem.graph, g.SquaredError([x * 1e-20 for x in X], problem.loss.y), g.Norm2(), 0.1)
    assert g.solve(same, tol=1e-6, method="halpern").status == "optimal"  # at 1e140 it certifies


@pytest.mark.parametrize("method", ["halpern", "auto"])
def test_an_objective_that_overflows_float64_stops_the_core_with_the_reason(method):
    """Points near 1e160 on a star (no exact solver): every P(W) overflows, so after
    NONFINITE_CHECKS check-points the core stops (it ran 100,000 iterations before) and says why."""
    from gtvcvx.solvers._pdhg_common import NONFINITE_CHECKS

    rng = np.random.default_rng(0)
    problem = g.GTVProblem(g.graphs.star(30), g.SquaredDistance(1e160 * rng.normal(size=(30, 2))), g.Norm2(),
                           lam=1e160)
    with np.errstate(all="ignore"):
        result = g.solve(problem, tol=1e-6, method=method)
    assert result.status == "solver_error" and result.iterations < 200
    assert f"P(W) was not finite at {NONFINITE_CHECKS} check-points in a row" in result.message
    assert "overflows" in result.message and "rescale the data" in result.message
