"""The fast core against the CVXPY reference, and its certificate."""

import numpy as np
import pytest

import gtvcvx as g
from conftest import LOSSES, PENALTIES, make_problem
from gtvcvx.reference import solve_primal

TIGHT = dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)


def rel(a, b):
    return abs(a - b) / max(1.0, abs(a), abs(b))


@pytest.mark.parametrize("penalty", PENALTIES)
@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("seed", [0, 1])
def test_fast_core_matches_clarabel_and_certificate_is_honest(loss, penalty, seed):
    problem = make_problem(loss, penalty, seed=seed, sizes=(4, 4), d=3, lam=0.3)
    ref = solve_primal(problem, "CLARABEL", **TIGHT)
    fast = g.solve(problem, tol=1e-7)
    assert fast.status == "optimal" and fast.rel_gap <= 1e-7
    assert rel(fast.primal, ref.primal) < 1e-6
    # the dual bound never exceeds a primal value: certified gap >= true suboptimality
    assert fast.dual <= ref.primal + 1e-10 * (1 + abs(ref.primal))
    assert fast.gap >= fast.primal - ref.primal - 1e-10 * (1 + abs(ref.primal))
    # the returned flow is feasible and the reported values are re-computable
    # (the certified dual is the flow's dual value less the allowance for its rounding residual)
    recomputed = problem.dual_objective(fast.U)
    assert np.isfinite(recomputed)
    assert fast.dual <= recomputed + 1e-12 * (1 + abs(recomputed))
    # ... and the allowance is a small part of the gap, or at rounding level: a direct solve ("quadratic")
    # ends with a true gap of ~1e-15, so its whole certified gap (~1e-12 relative) is the allowance
    assert recomputed - fast.dual <= 0.1 * fast.gap + 1e-11 * (1 + abs(recomputed))
    assert rel(problem.objective(fast.W), fast.primal) < 1e-12


@pytest.mark.parametrize("penalty", PENALTIES)
def test_fast_W_matches_when_unique(penalty):
    problem = make_problem("squared_distance", penalty, seed=3, sizes=(5, 4), d=2, lam=0.4)
    ref = solve_primal(problem, "CLARABEL", **TIGHT)
    fast = g.solve(problem, tol=1e-10)
    assert np.abs(fast.W - ref.W).max() < 1e-5
    full_rank = make_problem("squared_error", penalty, seed=4, sizes=(4, 3), d=2, lam=0.2, m=6, rho=1.0)
    ref = solve_primal(full_rank, "CLARABEL", **TIGHT)
    fast = g.solve(full_rank, tol=1e-10)
    assert np.abs(fast.W - ref.W).max() < 1e-5


@pytest.mark.parametrize("method", ["halpern", "pdhg"])
def test_both_methods_converge(method):
    problem = make_problem("squared_error", "norm2", seed=5, sizes=(5, 5), d=3, lam=0.2)
    ref = solve_primal(problem, "CLARABEL", **TIGHT)
    fast = g.solve(problem, tol=1e-8, method=method)
    assert fast.status == "optimal" and rel(fast.primal, ref.primal) < 1e-7


def test_two_points_closed_form():
    G = g.Graph.from_edges(2, [[0, 1]])
    pts = np.array([[0.0, 0.0], [4.0, 0.0]])
    for lam, expected in [(1.0, [[0.5, 0.0], [3.5, 0.0]]), (10.0, [[2.0, 0.0], [2.0, 0.0]])]:
        result = g.solve(g.GTVProblem(G, g.SquaredDistance(pts), g.Norm2(), lam), tol=1e-12)
        assert np.allclose(result.W, expected, atol=1e-6)
        assert np.isclose(np.linalg.norm(result.U), min(lam, 4.0), atol=1e-6)


def test_lam_zero_and_no_edges_give_local_solutions():
    problem = make_problem("squared_error", "norm2", seed=6, sizes=(3, 3), d=2, lam=0.0, m=5, rho=1.0)
    result = g.solve(problem, tol=1e-13)  # W error ~ sqrt(gap / curvature)
    for i, (X, y) in enumerate(zip(problem.loss.X, problem.loss.y)):
        assert np.allclose(result.W[i], np.linalg.lstsq(X, y, rcond=None)[0], atol=1e-5)
    empty = g.GTVProblem(g.Graph.from_edges(3, []), g.SquaredDistance(np.eye(3)), g.Norm2(), 1.0)
    result = g.solve(empty)
    assert result.status == "optimal" and np.allclose(result.W, np.eye(3), atol=1e-6) and result.U.shape == (0, 3)


def test_disconnected_graph_and_isolated_node():
    G = g.Graph.from_edges(6, [[0, 1], [1, 2], [3, 4]])  # node 5 isolated
    pts = np.array([[0.0], [1.0], [5.0], [10.0], [12.0], [7.0]])
    problem = g.GTVProblem(G, g.SquaredDistance(pts), g.Norm2(), 100.0)
    result = g.solve(problem, tol=1e-10)
    assert np.allclose(result.W[:3], 2.0, atol=1e-6)  # fused component mean
    assert np.allclose(result.W[3:5], 11.0, atol=1e-6)
    assert np.isclose(result.W[5, 0], 7.0, atol=1e-6)


def test_warm_start_converges_fast():
    problem = make_problem("squared_error", "norm1", seed=7, sizes=(6, 6), d=3, lam=0.2)
    cold = g.solve(problem, tol=1e-8, method="halpern")
    warm = g.solve(problem, tol=1e-8, warm_start=cold)  # auto: a warm start goes to the core
    assert warm.status == "optimal" and warm.iterations <= 5 < cold.iterations
    nearby = g.solve(problem.with_lam(0.21), tol=1e-8, warm_start=cold)
    fresh = g.solve(problem.with_lam(0.21), tol=1e-8, method="halpern")
    assert nearby.iterations < fresh.iterations


def test_a_warm_start_that_is_already_optimal_is_certified_before_any_step():
    problem = make_problem("squared_error", "norm1", seed=7, sizes=(6, 6), d=3, lam=0.2)
    cold = g.solve(problem, tol=1e-9, method="halpern")
    seen = []
    warm = g.solve(problem, tol=1e-8, warm_start=cold, method="halpern", callback=seen.append)
    assert warm.status == "optimal" and warm.iterations == 0 and warm.rel_gap <= 1e-8
    assert list(warm.history["iteration"]) == [0] and [info.iteration for info in seen] == [0]
    assert np.array_equal(warm.W, cold.W)


def test_the_core_never_returns_worse_than_its_certified_warm_start():
    """One-sample nodes with features from 1e-3 to 1e15 (the nightly profile's instance): from the
    interior-point answer (certified 4.6e-7) the core's first step goes to a gap of 0.996 and stays
    there; it used to return that. The start is now certified before the first step and kept."""
    X = [np.array([[-0.0011612226689743674, 1558678790447199.5, -0.00026679174536867065]]),
         np.array([[-0.000880689649182765, -1049668326872910.4, 0.00034855439506506285]]),
         np.array([[-0.0002640666725028085, 570625862188192.4, -0.001665768104193245]]), np.zeros((0, 3))]
    y = [np.array([0.6033495558419332]), np.array([0.43262866685735524]), np.array([3.85074251098301]),
         np.zeros(0)]
    graph = g.graphs.chain(4, weights=[1.9237290293999984e-12, 975762656492.3843, 8.225004685386062e-08])
    problem = g.GTVProblem(graph, g.SquaredError(X, y, d=3), g.Norm2(), lam=0.01)
    start = g.solve(problem, tol=1e-8, method="interior")
    assert start.rel_gap < 1e-5
    core = g.solve(problem, tol=1e-8, warm_start=start, method="halpern", max_iter=300, check_separability=False)
    assert core.status == "max_iter" and core.rel_gap <= start.rel_gap * (1 + 1e-6)
    assert core.history["rel_gap"].iloc[1:].min() > 0.5  # (the steps themselves do go astray)
    assert np.array_equal(core.W, start.W) and "the warm start is returned" in core.message


def test_callback_stops_and_limits_are_honoured():
    problem = make_problem("logistic", "norm2", seed=8, sizes=(5, 5), d=3, lam=0.3)
    seen = []

    def stop_at_second(info):
        seen.append(info.iteration)
        return len(seen) == 2

    result = g.solve(problem, tol=1e-14, callback=stop_at_second, method="halpern")
    assert result.status == "max_iter" and "callback" in result.message and len(seen) == 2
    limited = g.solve(problem, tol=1e-14, max_iter=7, method="halpern")
    assert limited.status == "max_iter" and limited.iterations == 7
    timed = g.solve(problem, tol=1e-14, time_limit=0.05, method="halpern")
    assert timed.status == "time_limit"
    # whatever the status, the certificate is honest
    ref = solve_primal(problem, "CLARABEL", **TIGHT)
    for r in (result, limited, timed):
        assert r.dual <= ref.primal + 1e-10 and r.primal >= ref.primal - 1e-9


def test_history_and_result_row():
    problem = make_problem("squared_error", "norm2", seed=9, sizes=(4, 4), d=2)
    result = g.solve(problem, method="halpern")
    h = result.history
    assert {"iteration", "time", "primal", "dual", "gap", "rel_gap", "restarts", "omega"} <= set(h.columns)
    assert h.iteration.is_monotonic_increasing
    # the last check-point's certificate is the result's, or its polish's where one certified it
    last = h.iloc[-1]
    polished = result.info["polished_at"] == last.iteration
    assert (last.polished_rel_gap if polished else last.rel_gap) == result.rel_gap
    row = result.to_row()
    assert row["solver"] == "fast" and row["status"] == "optimal" and row["rel_gap"] <= 1e-6


def test_solve_argument_errors():
    problem = make_problem("squared_error", "norm2", seed=0, sizes=(2, 2), d=2)
    with pytest.raises(ValueError, match="tol must be a positive number"):
        g.solve(problem, tol=0)
    # every relative gap is below 1: a tolerance of 1 would call the first iterate optimal
    with pytest.raises(ValueError, match=r"tol must be a relative-gap tolerance below 1, got 1\.5"):
        g.solve(problem, tol=1.5)
    with pytest.raises(ValueError, match="max_iter must be an integer >= 1"):
        g.solve(problem, max_iter=0)
    with pytest.raises(ValueError, match="method must be one of"):
        g.solve(problem, method="admm")
    with pytest.raises(ValueError, match=r"warm_start W must have shape \(4, 2\)"):
        g.solve(problem, warm_start={"W": np.zeros((3, 2))})
    with pytest.raises(TypeError, match="GTVProblem"):
        g.solve("problem.toml")


def test_step_norm_estimate_matches_the_spectrum():
    import scipy.sparse as sp

    from gtvcvx.solvers.gtv import _step_norm_estimate

    for graph in (g.graphs.sbm([30, 30], 0.4, 0.05, seed=1).graph, g.graphs.chain(20), g.graphs.star(9)):
        deg = graph.degree.astype(float)
        S = sp.diags(1.0 / np.sqrt(deg))
        true = np.sqrt(np.linalg.eigvalsh((S @ graph.laplacian() @ S).toarray()).max() / 2.0)
        estimate = _step_norm_estimate(graph)
        assert min(1.0, true) * 0.99 <= estimate <= 1.0
    assert np.isclose(_step_norm_estimate(g.graphs.chain(20)), 1.0)  # bipartite: no room


def test_too_long_steps_fall_back_safely(monkeypatch):
    import gtvcvx.solvers.gtv as core

    problem = make_problem("squared_error", "norm2", seed=11, sizes=(6, 6), d=3, lam=0.3, p_in=0.9)
    ref = solve_primal(problem, "CLARABEL", **TIGHT)
    monkeypatch.setattr(core, "_step_norm_estimate", lambda graph, **_: 0.2)  # far below the true norm
    result = g.solve(problem, tol=1e-8, method="halpern")
    assert result.info["step_fallbacks"] == 1 and result.info["step_norm"] == 1.0
    assert result.status == "optimal" and rel(result.primal, ref.primal) < 1e-7


def test_callback_arrays_are_not_overwritten_by_later_checkpoints(monkeypatch):
    """The loop keeps its buffers (flows, compiled node updates) across check-points; what a
    callback is given stays as it was given."""
    import gtvcvx._jit as jit

    monkeypatch.setattr(jit, "MIN_ENTRIES", 0)  # the compiled node updates with their kept buffers too
    problem = make_problem("squared_error", "norm2", seed=5, sizes=(6, 6), d=3, lam=0.2)
    seen = []
    g.solve(problem, tol=1e-9, method="halpern", check_every=5,
            callback=lambda info: seen.append((info.W, info.W.copy(), info.U, info.U.copy(),
                                               info.certificate.U, info.certificate.primal)))
    assert len(seen) >= 3
    for W, W_then, U, U_then, cert_U, primal in seen:
        assert np.array_equal(W, W_then) and np.array_equal(U, U_then) and cert_U is U
        assert problem.objective(W) == pytest.approx(primal, rel=1e-12)


def test_lanczos_estimate_of_large_graphs(monkeypatch):
    """Large graphs get the Lanczos estimate (30 steps, one compiled pass over the edges each):
    within 1 % of the spectrum from below (before the margin), and the power method's estimate
    on small graphs is unchanged (the two agree on the same operator)."""
    import scipy.sparse as sp

    from gtvcvx.solvers._pdhg_common import top_eigenvalue

    graph = g.graphs.sbm([150, 150], 0.2, 0.02, seed=4).graph
    deg = graph.degree.astype(float)
    S = sp.diags(1.0 / np.sqrt(deg))
    operator = (S @ graph.laplacian() @ S).tocsr()
    true = np.linalg.eigvalsh(operator.toarray()).max()
    start = np.random.default_rng(0).standard_normal(graph.n)
    lanczos = top_eigenvalue(lambda x: operator @ x, start, lanczos=True)
    power = top_eigenvalue(lambda x: operator @ x, start, lanczos=False)
    assert true * 0.99 <= lanczos <= true * (1 + 1e-12)
    assert power <= lanczos  # (the power method's 60 steps trail Lanczos's 30)
    assert top_eigenvalue(lambda x: 0.0 * x, start, lanczos=True) == 0.0
    assert top_eigenvalue(lambda x: 0.0 * x, start, lanczos=False) == 0.0
    # step_norm_estimate takes the Lanczos path from gtvcvx._jit.MIN_ENTRIES edges (the compiled pass)
    import gtvcvx._jit as jit
    from gtvcvx.solvers.gtv import _step_norm_estimate

    small = _step_norm_estimate(graph)
    monkeypatch.setattr(jit, "MIN_ENTRIES", 0)
    large = _step_norm_estimate(graph)
    assert np.sqrt(true / 2) * 1.05 * 0.99 <= large <= np.sqrt(true / 2) * 1.05 * (1 + 1e-12)
    assert large > small


def test_step_norm_estimate_with_compiled_products_below_the_size_threshold(monkeypatch):
    """A solve whose sweeps are compiled runs the step-norm estimate's Laplacian products compiled
    at any size: the same estimate to rounding as the sparse products (the power method either
    way below gtvcvx._jit.MIN_ENTRIES edges), and the solve asks for it exactly then."""
    import gtvcvx._jit as jit
    import gtvcvx.solvers.gtv as core
    from gtvcvx.solvers._edge_kernels import laplacian_product
    from gtvcvx.solvers._pdhg_common import step_norm_estimate

    graph = g.graphs.sbm([150, 150], 0.2, 0.02, seed=4).graph
    x = np.random.default_rng(1).standard_normal(graph.n)
    sparse = graph.incidence_transpose @ (graph.incidence @ x)
    assert np.allclose(laplacian_product(graph, x, compiled=True), sparse, rtol=0, atol=1e-12 * np.abs(sparse).max())
    assert np.array_equal(laplacian_product(graph, x), sparse)  # small graphs: the sparse products by default
    sparse_estimate = step_norm_estimate(graph)
    assert step_norm_estimate(graph, compiled=True) == pytest.approx(sparse_estimate, rel=1e-12, abs=0)
    assert step_norm_estimate(graph, compiled=False) == sparse_estimate

    asked = []

    def spy(graph, **options):
        asked.append(options.get("compiled"))
        return step_norm_estimate(graph, **options)

    monkeypatch.setattr(core, "_step_norm_estimate", spy)
    problem = make_problem("squared_error", "norm2", seed=5, sizes=(6, 6), d=3, lam=0.2)
    g.solve(problem, tol=1e-6, method="halpern", max_iter=20)
    monkeypatch.setattr(jit, "MIN_ENTRIES", 0)  # every sweep compiled
    g.solve(problem, tol=1e-6, method="halpern", max_iter=20)
    assert asked == [None, True]


def test_predicted_spacing_aims_at_the_crossing_of_tol():
    from gtvcvx.solvers._pdhg_common import predicted_spacing

    # the gap falls 10x every 10 iterations: 1e-4 is 30 iterations past 1e-1, plus a quarter (38)
    assert predicted_spacing(10, 100, [(90, 1.0), (100, 0.1)], 1e-4) == 38
    assert predicted_spacing(10, 20, [(10, 1.0), (20, 0.1)], 1e-4) == 20  # at most the iterations so far
    assert predicted_spacing(10, 1000, [(990, 1.0), (1000, 0.1)], 1e-12) == 40  # ... and 4x the spacing
    assert predicted_spacing(10, 100, [(90, 1e-3), (100, 1.1e-4)], 1e-4) == 2  # at least a quarter of it
    # without two decreasing finite gaps above tol: the plain spacing
    for gaps in ([(10, 1.0)], [(10, 0.1), (20, 0.2)], [(10, np.inf), (20, 0.1)], [(10, 0.1), (20, 0.0)],
                 [(10, 0.1), (20, 1e-5)]):
        assert predicted_spacing(10, 20, gaps, 1e-4) == 10



def test_residual_trigger_asks_for_what_the_gap_still_has_to_fall():
    from gtvcvx.solvers._pdhg_common import residual_trigger

    assert residual_trigger(1e-4, 1e-2) == pytest.approx(1e-2 ** 0.7)  # gap ~ r^(1/0.7): 100x in gap
    assert residual_trigger(1e-4, 1e-3, 1.0) == pytest.approx(0.1)  # exponent 1 (large problems)
    assert residual_trigger(1e-8, 1.0) == 0.02 and residual_trigger(1e-4, 2e-4) == 0.3  # clipped
    assert residual_trigger(1e-4, 0.0) == 0.3

def test_predicted_certificates_keep_the_answer(monkeypatch):
    """With the gap-predicted schedule of large problems forced onto a small one, the solve is
    certified to tol, agrees with CLARABEL, and certifies at the iterations the rule gives."""
    import gtvcvx.solvers.gtv as core
    from gtvcvx.solvers._pdhg_common import (CHECK_SPACING, PREDICT_FIRST_CHECK, PREDICT_SECOND_SPACING,
                                             predicted_spacing)
    from gtvcvx.solvers.certificate import FlowProjector

    problem = make_problem("squared_error", "norm2", seed=4, sizes=(10, 8), d=3, lam=0.3)
    ref = solve_primal(problem, "CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    monkeypatch.setattr(core, "PREDICT_FROM_ENTRIES", 0)
    fast = g.solve(problem, tol=1e-8, method="halpern")
    assert fast.status == "optimal" and fast.rel_gap <= 1e-8
    assert abs(fast.primal - ref.primal) <= 1e-7 * (1 + abs(ref.primal))
    assert fast.dual <= ref.primal + 1e-10 * (1 + abs(ref.primal))
    history = list(zip(fast.history["iteration"], fast.history["rel_gap"]))
    assert len(history) >= 4
    kind = "cheap" if FlowProjector(problem).operator is None else "projection"
    minimum, fraction = CHECK_SPACING[kind]
    assert history[0][0] == PREDICT_FIRST_CHECK  # (no residual trigger before a first certificate)
    first_spacing = max(minimum, PREDICT_FIRST_CHECK // fraction) * PREDICT_SECOND_SPACING
    assert history[0][0] < history[1][0] <= history[0][0] + first_spacing
    for k in range(2, len(history)):
        # each check-point at the predicted spacing, or earlier (the residual trigger)
        iteration = history[k - 1][0]
        spacing = max(minimum, iteration // fraction)
        assert history[k][0] - iteration <= predicted_spacing(spacing, iteration, history[:k], 1e-8)


def test_a_time_limit_spent_by_the_label_scaling_ends_as_time_limit_not_an_error():
    """Labels at 1e-3 are solved in scaled units (label_scale 256); a limit used up by that scaling passed
    time_limit = 0.0 to the scaled solve, which refused it: "time_limit must be a positive number ..., got 0.0"."""
    from gtvcvx.solvers._scaling import label_scale

    problem = make_problem("squared_error", "norm2", seed=0, sizes=(4, 4), d=2)
    small = g.GTVProblem(problem.graph, g.SquaredError(problem.loss.X, [y * 1e-3 for y in problem.loss.y]),
                         problem.penalty, problem.lam)
    assert label_scale(small) > 1.0
    result = g.solve(small, time_limit=1e-300, method="halpern")
    assert result.status == "time_limit" and "reached time_limit" in result.message
