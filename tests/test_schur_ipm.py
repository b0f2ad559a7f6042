"""The node-system interior-point method (PARDISO): agrees with CVXPY+CLARABEL on quadratic losses
with norm2 / norm1 penalties (few samples per node, nodes without data, clustering), its answers
are certified by gtvcvx, ``solve_interior`` runs it first on large enough graphs and falls back to
Clarabel when it does not certify, and everything still works where PARDISO is not installed."""

import numpy as np
import pytest
import scipy.sparse as sp

import gtvcvx as g
from gtvcvx.capabilities import CapabilityError
from gtvcvx.reference import solve_primal
from gtvcvx.results import Status
from gtvcvx.solvers import _sparse_factor, interior, schur_ipm
from gtvcvx.solvers.schur_ipm import schur_refusal, solve_schur

TIGHT = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}
needs_pardiso = pytest.mark.skipif(not _sparse_factor.pardiso_available(),
                                   reason="py-mkl-pardiso has wheels for Linux/Windows x86-64 only")


def _knn_problem(penalty, *, n=60, d=4, lam=0.1, seed=0, samples=1, empty=0):
    """One (or ``samples``) rows per node on the points' own 5-NN graph: m_i < d, as on the digits."""
    rng = np.random.default_rng(seed)
    points = rng.normal(size=(n, 2))
    graph = g.graphs.knn(points, 5)
    counts = np.full(n, samples)
    counts[:empty] = 0  # nodes without data
    X = [rng.normal(size=(int(m), d)) for m in counts]
    truth = np.where(points[:, :1] > 0, 1.0, -1.0) * np.ones(d)
    y = [Xi @ truth[i] + 0.1 * rng.normal(size=len(Xi)) for i, Xi in enumerate(X)]
    return g.GTVProblem(graph, g.SquaredError(X, y, d=d), penalty, lam)


def _assert_agrees(problem, result, tol):
    ref = solve_primal(problem, "CLARABEL", **TIGHT)
    scale = 1 + abs(ref.primal)
    assert result.status == Status.OPTIMAL, result.message
    assert result.rel_gap <= tol
    assert abs(problem.objective(result.W) - ref.primal) <= tol * 2 * scale
    # gtvcvx's own certificate: a dual bound below the optimum, a gap covering the suboptimality
    assert result.dual <= ref.primal + 1e-9 * scale
    assert result.gap >= problem.objective(result.W) - ref.primal - 1e-9 * scale


@needs_pardiso
@pytest.mark.parametrize("penalty", [g.Norm2(), g.Norm1()], ids=lambda p: p.name)
@pytest.mark.parametrize("case", ["one_sample", "three_samples_some_empty", "weak_fusion"])
def test_agrees_with_cvxpy_clarabel_and_is_certified(penalty, case):
    options = {"one_sample": {}, "three_samples_some_empty": {"samples": 3, "empty": 7, "seed": 1},
               "weak_fusion": {"lam": 0.005, "seed": 2}}[case]
    problem = _knn_problem(penalty, **options)
    result = solve_schur(problem, tol=1e-7)
    assert result.info["method"] == "schur" and result.info["factorizations"] == result.iterations + 1
    assert 5 <= result.iterations <= 40  # a Newton method: tens of steps, not thousands
    _assert_agrees(problem, result, 1e-7)


@needs_pardiso
@pytest.mark.parametrize("penalty", [g.Norm2(), g.Norm1()], ids=lambda p: p.name)
def test_convex_clustering_agrees(penalty):
    points = np.random.default_rng(3).normal(size=(80, 2)) + np.repeat([[0, 0], [4, 0]], 40, axis=0)
    from gtvcvx.clustering import clustering_problem

    problem, _ = clustering_problem(points, 0.3, k=6, standardize=True)
    problem = g.GTVProblem(problem.graph, problem.loss, penalty, problem.lam)
    _assert_agrees(problem, solve_schur(problem, tol=1e-7), 1e-7)


@needs_pardiso
def test_a_component_without_data_is_met_by_the_shift():
    """Two components, one without any data: its nodes' rows of the node system are only
    positive semidefinite (W is free there); the method still certifies (its W there is 0)."""
    rng = np.random.default_rng(4)
    graph = g.Graph.from_edges(12, np.array([[i, i + 1] for i in range(5)] + [[i, i + 1] for i in range(6, 11)]))
    X = [rng.normal(size=(2, 3)) if i < 6 else np.zeros((0, 3)) for i in range(12)]
    y = [Xi @ np.ones(3) for Xi in X]
    problem = g.GTVProblem(graph, g.SquaredError(X, y, d=3), g.Norm2(), 0.2)
    result = solve_schur(problem, tol=1e-7)
    assert result.status == Status.OPTIMAL, result.message
    assert np.allclose(result.W[6:], result.W[6])  # fused (the penalty), value undetermined


def test_refusals_name_the_reason(monkeypatch):
    logistic = g.GTVProblem(g.graphs.chain(4), g.Logistic([np.ones((2, 2))] * 4, [np.array([1.0, -1.0])] * 4, d=2),
                            g.Norm2(), 0.1)
    squared = _knn_problem(g.SquaredNorm2(), n=12)
    no_edges = g.GTVProblem(g.Graph.from_edges(3, np.zeros((0, 2), dtype=int)),
                            g.SquaredDistance(np.ones((3, 2))), g.Norm2(), 0.1)
    if _sparse_factor.pardiso_available():
        assert "not quadratic" in schur_refusal(logistic)
        assert "norm2 or norm1" in schur_refusal(squared)
        assert "no edges" in schur_refusal(no_edges)
        assert schur_refusal(_knn_problem(g.Norm1(), n=12)) == ""
    with pytest.raises(CapabilityError, match="does not apply"):
        solve_schur(logistic)
    monkeypatch.setattr(_sparse_factor, "_pardiso", lambda: None)
    assert "PARDISO is not installed" in schur_refusal(_knn_problem(g.Norm2(), n=12))


@needs_pardiso
def test_solve_interior_runs_it_first_from_the_size_threshold(monkeypatch):
    problem = _knn_problem(g.Norm2())
    assert not interior.schur_first(problem)  # 60 nodes: Clarabel's whole solve takes milliseconds
    assert "clarabel_status" in interior.solve_interior(problem, tol=1e-6).info
    monkeypatch.setattr(interior, "SCHUR_MIN_EDGES", 0)
    assert interior.schur_first(problem)
    result = interior.solve_interior(problem, tol=1e-6)
    assert result.info["method"] == "interior" and result.info["interior_backend"] == "schur"
    assert result.status == Status.OPTIMAL and "clarabel_status" not in result.info
    # gtvcvx.solve(method="interior") goes the same way
    assert g.solve(problem, tol=1e-6, method="interior").info["interior_backend"] == "schur"


@needs_pardiso
def test_an_uncertified_schur_answer_continues_in_clarabel(monkeypatch):
    """Stopped after two Newton steps (gap ~1e-1), the method's answer is not returned as optimal:
    Clarabel solves, its certified answer is returned, charged with both runs."""
    problem = _knn_problem(g.Norm1())
    monkeypatch.setattr(interior, "SCHUR_MIN_EDGES", 0)
    monkeypatch.setattr(interior, "SCHUR_MAX_STEPS", 2)
    result = interior.solve_interior(problem, tol=1e-6)
    runs = result.info["interior_runs"]
    assert runs["schur"]["status"] == "max_iter" and runs["schur"]["rel_gap"] > 1e-6
    assert result.info["interior_backend"] == "clarabel" and result.status == Status.OPTIMAL
    assert result.iterations == runs["schur"]["iterations"] + runs["clarabel"]["iterations"]


def test_without_pardiso_solve_interior_uses_clarabel(monkeypatch):
    monkeypatch.setattr(_sparse_factor, "_pardiso", lambda: None)
    monkeypatch.setattr(interior, "SCHUR_MIN_EDGES", 0)
    problem = _knn_problem(g.Norm2(), n=30)
    assert not interior.schur_first(problem)
    result = interior.solve_interior(problem, tol=1e-6)
    assert result.status == Status.OPTIMAL and "clarabel_status" in result.info


@pytest.mark.parametrize("pardiso", [True, False], ids=["pardiso", "superlu"])
def test_symmetric_solver_solves_indefinite_systems(monkeypatch, pardiso):
    if pardiso and not _sparse_factor.pardiso_available():
        pytest.skip("py-mkl-pardiso not installed")
    if not pardiso:
        monkeypatch.setattr(_sparse_factor, "_pardiso", lambda: None)
    monkeypatch.setattr(_sparse_factor, "PARDISO_MIN_SIZE", 0)  # (small systems go to SuperLU by default)
    rng = np.random.default_rng(5)
    B = sp.random(40, 40, density=0.1, random_state=6)
    matrix = (B + B.T + sp.diags(np.where(np.arange(40) % 2, 3.0, -3.0))).tocsc()  # symmetric, indefinite
    rhs = rng.normal(size=40)
    solve = _sparse_factor.symmetric_solver(matrix)
    assert np.allclose(matrix @ solve(rhs), rhs, atol=1e-10)
    # PARDISO's solve is a bound method of its factor, SuperLU's of its LU object
    assert type(getattr(solve, "__self__", None)).__name__ == ("SymmetricFactor" if pardiso else "SuperLU")


@needs_pardiso
def test_pardiso_without_its_wrappers_row_by_row_check_gives_the_same_factors(monkeypatch):
    """SymmetricFactor runs PARDISO's compiled solver itself (the wrapper checks the upper triangle one row at a
    time in Python: 0.43 s of a 60,000-row chain system that factors in 0.06 s) and checks the triangle
    vectorized; the same solutions as the wrapper's, numeric refactorizations included."""
    rng = np.random.default_rng(3)
    B = sp.random(300, 300, density=0.02, random_state=4)
    matrix = (B + B.T + sp.diags(np.where(np.arange(300) % 3, 5.0, -5.0))).tocsr()
    upper = sp.triu(matrix, format="csr")
    rhs = rng.normal(size=300)
    factor = _sparse_factor.SymmetricFactor(upper, positive_definite=False)
    factor.factor(factor._pattern.data)
    assert type(factor._solver).__name__ == "_CompiledPardiso"
    wrapper = _sparse_factor._pardiso().PardisoSolver(upper, _sparse_factor._pardiso().MTYPE_REAL_SYM_INDEF)
    np.testing.assert_allclose(factor.solve(rhs), wrapper.solve(rhs), rtol=1e-12, atol=1e-14)
    factor.factor(2.0 * factor._pattern.data)  # numeric only (the same pattern)
    np.testing.assert_allclose(factor.solve(rhs), 0.5 * wrapper.solve(rhs), rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="upper triangle"):
        _sparse_factor.SymmetricFactor(matrix)
    # a py-mkl-pardiso whose compiled class is not as expected: its wrapper, as before
    monkeypatch.setattr(_sparse_factor._pardiso(), "_mkl_pardiso", None)
    fallback = _sparse_factor.SymmetricFactor(upper, positive_definite=False)
    fallback.factor(fallback._pattern.data)
    assert type(fallback._solver).__name__ == "PardisoSolver"
    np.testing.assert_allclose(fallback.solve(rhs), wrapper.solve(rhs), rtol=1e-12, atol=1e-14)


def test_schur_module_declares_the_penalty_forms_it_takes():
    assert set(schur_ipm.CONES) == {"norm2", "norm1"}
    assert set(schur_ipm.CONES) <= set(interior.PENALTY_FORMS)


@needs_pardiso
def test_auto_takes_it_beyond_clarabels_row_limit(monkeypatch):
    """``auto`` considers the interior-point solve only up to AUTO_MAX_ROWS conic rows (Clarabel's
    size); the Schur method builds no conic program, so where it applies the limit is its own
    (AUTO_MAX_SCHUR_EDGES)."""
    problem = _knn_problem(g.Norm2())
    monkeypatch.setattr(interior, "SCHUR_MIN_EDGES", 0)
    monkeypatch.setattr(interior, "AUTO_MAX_ROWS", 10)
    assert interior.auto_plan(problem)[0] == "interior"
    result = g.solve(problem, tol=1e-6)
    assert result.info["method"] == "interior" and result.info["interior_backend"] == "schur"
    monkeypatch.setattr(interior, "AUTO_MAX_SCHUR_EDGES", problem.n_edges - 1)
    assert interior.auto_plan(problem)[0] == "core"


@needs_pardiso
def test_an_uncertified_schur_answer_is_returned_where_clarabel_would_be_too_slow(monkeypatch):
    problem = _knn_problem(g.Norm1())
    monkeypatch.setattr(interior, "SCHUR_MIN_EDGES", 0)
    monkeypatch.setattr(interior, "SCHUR_MAX_STEPS", 2)
    monkeypatch.setattr(interior, "_clarabel_seconds", lambda problem: 1e9)
    result = interior.solve_interior(problem, tol=1e-6)
    assert result.status == Status.MAX_ITER and result.info["interior_backend"] == "schur"
    assert "Clarabel not tried" in result.message and "clarabel_status" not in result.info
    # auto goes on from it with the first-order core and certifies
    monkeypatch.setattr(interior, "AUTO_SECONDS_DEFICIENT", 1e9)
    final = g.solve(problem, tol=1e-6)
    assert final.status == Status.OPTIMAL and final.info["method"] == "interior+halpern"


@needs_pardiso
def test_badly_scaled_data_stop_early_and_go_to_clarabel(monkeypatch):
    """Feature scales spanning 1e-3 .. 1e5 with one sample per node: the method's barrier
    parameter crawls (it has no equilibration); it stops within a few tens of steps, says why, and
    solve_interior's Clarabel (Ruiz-equilibrated) answers. Its answer certified 1e-6 on an AMD EPYC
    and 2.5e-6 on an Intel Xeon (OpenBLAS 0.3.31; Clarabel "Solved" at 1e-8 and 1e-11 alike): within
    a few times tol either way, and `gtvcvx.solve` finishes from it."""
    rng = np.random.default_rng(0)
    n, d = 300, 4
    graph = g.graphs.knn(rng.normal(size=(n, 2)), 5)
    scales = np.array([1e-3, 1.0, 1e3, 1e5])
    X = [rng.normal(size=(1, d)) * scales for _ in range(n)]
    truth = rng.normal(size=d) / scales
    y = [Xi @ truth + rng.normal(size=1) for Xi in X]
    problem = g.GTVProblem(graph, g.SquaredError(X, y, d=d), g.Norm2(), 0.05)
    with np.errstate(all="ignore"):
        alone = solve_schur(problem, tol=1e-6)
        assert alone.status == Status.INACCURATE and alone.iterations <= 40
        assert "barrier parameter fell less than" in alone.message
        monkeypatch.setattr(interior, "SCHUR_MIN_EDGES", 0)
        result = interior.solve_interior(problem, tol=1e-6)
    assert result.info["interior_backend"] == "clarabel" and result.rel_gap <= 1e-5
    assert result.status == (Status.OPTIMAL if result.rel_gap <= 1e-6 else Status.INACCURATE)
    assert result.info["interior_runs"]["schur"]["status"] == "inaccurate"
    monkeypatch.setattr(interior, "SCHUR_MIN_EDGES", 10**9)
    with np.errstate(all="ignore"):
        final = g.solve(problem, tol=1e-6)
    assert final.status == Status.OPTIMAL and final.info["method"].startswith("interior")
