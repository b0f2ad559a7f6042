"""SSNAL for convex clustering: against CLARABEL, certificate honesty, warm starts, statuses, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from gtvcvx.capabilities import CapabilityError

import gtvcvx as g
from gtvcvx import graphs
from gtvcvx.reference import solve_primal
from gtvcvx.solvers.ssnal import LINEAR_SOLVERS, SSNALIterationInfo, solve_ssnal

TIGHT = dict(tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
PENALTIES = [g.Norm2(), g.Norm1()]


def rel(a, b):
    return abs(a - b) / max(1.0, abs(a), abs(b))


def random_graph_problem(seed, penalty, *, n=14, d=2, kind="knn", lam=None):
    """Clustered points on a random weighted graph; "split" = two components plus isolated nodes."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=3.0, size=(3, d))
    pts = centers[rng.integers(0, 3, size=n)] + 0.7 * rng.normal(size=(n, d))
    if kind == "knn":
        graph = graphs.knn(pts, 4)
    else:  # two random components on nodes 0..n-3, nodes n-2 and n-1 isolated
        half = (n - 2) // 2
        pairs = []
        for lo, hi in ((0, half), (half, n - 2)):
            nodes = np.arange(lo, hi)
            pairs += [(a, b) for a in nodes for b in nodes if a < b and rng.random() < 0.5]
            pairs += [(a, a + 1) for a in nodes[:-1]]  # keep each part connected
        edges = np.unique(np.array(pairs), axis=0)
        graph = g.Graph.from_edges(n, edges, rng.uniform(0.2, 2.0, size=len(edges)))
    lam = float(rng.uniform(0.2, 1.5)) if lam is None else lam
    return g.GTVProblem(graph, g.SquaredDistance(pts), penalty, lam)


@pytest.fixture(scope="module")
def references():
    cache = {}

    def get(key, problem):
        if key not in cache:
            cache[key] = solve_primal(problem, "CLARABEL", **TIGHT)
        return cache[key]

    return get


# ------------------------------------------------------------------------- against CLARABEL
@pytest.mark.parametrize("penalty", PENALTIES, ids=["norm2", "norm1"])
@pytest.mark.parametrize("kind", ["knn", "split"])
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_clarabel_and_certificate_is_honest(seed, kind, penalty, references):
    problem = random_graph_problem(seed, penalty, kind=kind, d=2 + seed)
    if kind == "split":
        assert problem.graph.n_components >= 4 and (problem.graph.degree == 0).sum() == 2
    ref = references((seed, kind, penalty.name), problem)
    r = solve_ssnal(problem, tol=1e-10)
    assert r.status == "optimal" and r.solver == "ssnal" and r.rel_gap <= 1e-10
    assert rel(r.primal, ref.primal) < 1e-7                       # objective, 1e-7 relative
    assert np.abs(r.W - ref.W).max() < 1e-5                       # centers, 1e-5
    # the certified gap bounds the true suboptimality (the reference is a primal value >= P*)
    p_star = min(ref.primal, r.primal)
    assert r.gap >= r.primal - p_star - 1e-12 * (1 + abs(p_star))
    assert r.dual <= ref.primal + 1e-12 * (1 + abs(ref.primal))
    # what the result reports is re-computable from W and the returned (feasible) flow
    assert rel(problem.objective(r.W), r.primal) < 1e-12
    assert np.isfinite(problem.dual_objective(r.U)) and rel(problem.dual_objective(r.U), r.dual) < 1e-9
    # isolated nodes keep their own point
    iso = problem.graph.degree == 0
    assert np.allclose(r.W[iso], problem.loss.points[iso])


@pytest.mark.parametrize("linear_solver", [s for s in LINEAR_SOLVERS if s != "auto"])
@pytest.mark.parametrize("penalty", PENALTIES, ids=["norm2", "norm1"])
def test_every_linear_solver_reaches_the_optimum(linear_solver, penalty, references):
    problem = random_graph_problem(5, penalty, kind="split", d=3)
    ref = references((5, "split", penalty.name), problem)
    r = solve_ssnal(problem, tol=1e-9, linear_solver=linear_solver)
    assert r.status == "optimal" and r.info["linear_solver"] == linear_solver
    assert rel(r.primal, ref.primal) < 1e-7 and np.abs(r.W - ref.W).max() < 1e-5
    if linear_solver != "cg":
        assert r.info["factorizations"] >= 1


@pytest.mark.parametrize("penalty", PENALTIES, ids=["norm2", "norm1"])
def test_every_reported_gap_is_an_upper_bound(penalty, references):
    # every history row and every loose-tolerance result: certified gap >= P(W) - P*
    problem = random_graph_problem(2, penalty, kind="knn", n=20, d=2)
    ref = references((2, "knn20", penalty.name), problem)
    p_star = ref.primal
    for tol in (1e-2, 1e-4, 1e-6):
        r = solve_ssnal(problem, tol=tol)
        assert r.rel_gap <= tol and r.gap >= r.primal - p_star - 1e-12 * (1 + abs(p_star))
        h = r.history
        assert {"iteration", "time", "primal", "dual", "gap", "rel_gap", "newton", "cg", "sigma"} <= set(h.columns)
        assert (h["dual"] <= p_star + 1e-12 * (1 + abs(p_star))).all()
        assert (h["gap"] >= h["primal"] - p_star - 1e-12 * (1 + abs(p_star))).all()


def test_trivial_cases_lam_zero_and_no_edges():
    pts = np.random.default_rng(0).normal(size=(6, 2))
    zero = solve_ssnal(g.GTVProblem(graphs.knn(pts, 2), g.SquaredDistance(pts), g.Norm2(), 0.0))
    assert zero.ok and np.allclose(zero.W, pts) and zero.gap <= 1e-12
    empty = g.Graph.from_edges(6, np.zeros((0, 2), dtype=int))
    lone = solve_ssnal(g.GTVProblem(empty, g.SquaredDistance(pts), g.Norm1(), 1.0))
    assert lone.ok and np.allclose(lone.W, pts) and lone.U.shape == (0, 2)


def test_large_lam_fuses_each_component_to_its_mean():
    problem = random_graph_problem(3, g.Norm2(), kind="split", lam=1e3)
    r = solve_ssnal(problem, tol=1e-9)
    assert r.ok
    labels = problem.graph.components()
    pts = problem.loss.points
    for c in np.unique(labels):
        assert np.abs(r.W[labels == c] - pts[labels == c].mean(axis=0)).max() < 1e-6


# ------------------------------------------------------------------------- warm starts, statuses
def test_warm_start_converges_in_few_iterations():
    problem = random_graph_problem(4, g.Norm2(), kind="knn", n=40)
    cold = solve_ssnal(problem, tol=1e-8)
    again = solve_ssnal(problem, tol=1e-8, warm_start=cold)
    assert again.ok and again.iterations == 1 and again.info["newton_iterations"] <= 2
    # nearby lam, the path idiom: W as is, flow scaled by lam ratio (stays in the balls)
    near = problem.with_lam(problem.lam * 1.1)
    warm = solve_ssnal(near, tol=1e-8, warm_start={"W": cold.W, "U": cold.U * 1.1})
    fresh = solve_ssnal(near, tol=1e-8)
    assert warm.ok and rel(warm.primal, fresh.primal) < 1e-7
    assert warm.info["newton_iterations"] < fresh.info["newton_iterations"]
    # either part alone is accepted
    assert solve_ssnal(near, tol=1e-8, warm_start={"W": cold.W}).ok
    assert solve_ssnal(near, tol=1e-8, warm_start={"U": cold.U}).ok


def test_max_iter_time_limit_and_callback_statuses():
    problem = random_graph_problem(6, g.Norm2(), kind="knn", n=40)
    short = solve_ssnal(problem, tol=1e-12, max_iter=1)
    assert short.status == "max_iter" and short.iterations == 1
    assert np.isfinite(short.gap) and short.W is not None and short.U is not None  # still certified
    timed = solve_ssnal(problem, tol=1e-14, time_limit=1e-6)
    assert timed.status == "time_limit" and np.isfinite(timed.gap)
    seen = []

    def stop_after_two(info):
        assert isinstance(info, SSNALIterationInfo) and info.certificate.gap >= 0
        seen.append(info.iteration)
        return info.iteration >= 2

    stopped = solve_ssnal(problem, tol=1e-14, callback=stop_after_two)
    assert stopped.status == "max_iter" and "callback" in stopped.message and seen == [1, 2]
    assert len(stopped.history) == 2 and stopped.setup_time >= 0 and stopped.solve_time > 0


# ------------------------------------------------------------------------- bad input
def test_bad_input_gives_clear_errors():
    problem = random_graph_problem(0, g.Norm2())
    with pytest.raises(TypeError, match="GTVProblem"):
        solve_ssnal("not a problem")
    other = g.GTVProblem(problem.graph, problem.loss, g.SquaredNorm2(), 0.5)
    with pytest.raises(CapabilityError, match="penalty 'squared_norm2' declares None"):
        solve_ssnal(other)
    X = np.ones((problem.n, 4, 2)).reshape(problem.n, 8)
    regression = g.GTVProblem(problem.graph, g.SquaredError([X[i:i + 1] for i in range(problem.n)],
                                                            [np.ones(1)] * problem.n, d=8), g.Norm2(), 0.5)
    with pytest.raises(CapabilityError, match="solve_ssnal needs the loss 'squared_error' to provide "
                                              "'separable_points'"):
        solve_ssnal(regression)
    for kwargs, match in [(dict(tol=0.0), "tol"), (dict(tol=float("nan")), "tol"), (dict(max_iter=0), "max_iter"),
                          (dict(max_iter=2.5), "max_iter"), (dict(time_limit=-1.0), "time_limit"),
                          (dict(linear_solver="lu"), "linear_solver"), (dict(sigma=-1.0), "sigma"),
                          (dict(max_newton=0), "max_newton")]:
        with pytest.raises(ValueError, match=match):
            solve_ssnal(problem, **kwargs)
    with pytest.raises(ValueError, match="warm_start W"):
        solve_ssnal(problem, warm_start={"W": np.ones((3, 2))})
    with pytest.raises(ValueError, match="warm_start U"):
        solve_ssnal(problem, warm_start={"U": np.full((problem.n_edges, 2), np.nan)})
    with pytest.raises(TypeError, match="warm_start"):
        solve_ssnal(problem, warm_start=[1, 2])


def test_options_share_one_validator_with_the_fast_core():
    problem = random_graph_problem(0, g.Norm2())
    # numpy integers are integers for every solver (solve accepted them, solve_ssnal did not)
    a = solve_ssnal(problem, max_iter=np.int64(50), blas_threads=None)
    b = g.solve(problem, max_iter=np.int64(50), tol=1e-4, blas_threads=2)
    assert a.iterations <= 50 and b.iterations <= 50
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="max_iter must be an integer >= 1"):
            solve_ssnal(problem, max_iter=bad)
    with pytest.raises(ValueError, match="blas_threads must be an integer >= 1"):
        g.solve(problem, blas_threads=0)
