"""The direct interior-point solve (Clarabel without CVXPY): every declared loss and penalty form
agrees with CVXPY+CLARABEL, its answers are certified by gtvcvx (never trusted), ``method="auto"``
picks it only on small problems whose factorization stays cheap, and an answer the certificate
does not confirm continues in the first-order core."""

import numpy as np
import pytest

import gtvcvx as g
from gtvcvx.capabilities import CapabilityError
from gtvcvx.losses import AbsoluteError, Hinge, Huber
from gtvcvx.reference import solve_primal
from gtvcvx.results import GTVResult, Status
from gtvcvx.solvers import interior
from gtvcvx.solvers.interior import (LOSS_FORMS, PENALTY_FORMS, auto_interior, factor_work, interior_refusal,
                                     solve_interior)

TIGHT = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}


def _graph(n, seed):
    return g.graphs.sbm([n // 2, n - n // 2], 0.6, 0.2, seed=seed).graph


def _loss(kind, n, d, rng, counts):
    if kind == "squared_distance":
        return g.SquaredDistance(rng.normal(size=(n, d)))
    X = [rng.normal(size=(int(k), d)) for k in counts]
    truth = rng.normal(size=d)
    if kind in ("logistic", "hinge"):
        y = [np.where(Xi @ truth + 3.0 * rng.normal(size=len(Xi)) > 0, 1.0, -1.0) for Xi in X]  # overlapping
        return (g.Logistic if kind == "logistic" else Hinge)(X, y, d=d)
    y = [Xi @ truth + 0.5 * rng.standard_t(2, size=len(Xi)) for Xi in X]
    return {"squared_error": g.SquaredError, "absolute": AbsoluteError,
            "huber": lambda X, y, d: Huber(X, y, d=d, delta=0.7)}[kind](X, y, d=d)


def _problem(loss_kind, penalty, *, seed=0, n=10, d=3, lam=0.3, counts=None):
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 5, size=n) if counts is None else counts  # m_i < d and nodes without data
    return g.GTVProblem(_graph(n, seed), _loss(loss_kind, n, d, rng, counts), penalty, lam)


PENALTIES = [g.Norm2(), g.Norm1(), g.SquaredNorm2(), g.GroupNorm2([0, 0, 1]),
             g.QuadraticForm([[2.0, 0.3, 0.0], [0.3, 1.0, 0.1], [0.0, 0.1, 0.5]])]
LOSSES = ["squared_error", "absolute", "huber", "hinge", "logistic", "squared_distance"]


def test_every_declared_form_is_covered():
    """Each loss/penalty class of the package declares a form the solver builds (and only those)."""
    forms = {type(_problem(kind, g.Norm2()).loss).conic_form for kind in LOSSES}
    assert forms == set(LOSS_FORMS)
    assert {p.conic_form for p in PENALTIES} == set(PENALTY_FORMS)


@pytest.mark.parametrize("loss_kind", LOSSES)
@pytest.mark.parametrize("penalty", PENALTIES, ids=lambda p: p.name)
def test_agrees_with_cvxpy_clarabel_and_is_certified(loss_kind, penalty):
    counts = np.full(10, 4) if loss_kind == "logistic" else None  # 4 labels per node: not separable
    problem = _problem(loss_kind, penalty, counts=counts, seed=1)
    result = solve_interior(problem, tol=1e-6)
    ref = solve_primal(problem, "CLARABEL", **TIGHT)
    scale = 1 + abs(ref.primal)
    assert result.info["method"] == "interior"
    assert abs(problem.objective(result.W) - ref.primal) <= 1e-6 * scale
    # the certificate is gtvcvx's own: the dual bound is below the reference optimum and the gap
    # covers the true suboptimality, whatever Clarabel reported
    assert result.dual <= ref.primal + 1e-9 * scale
    assert result.gap >= problem.objective(result.W) - ref.primal - 1e-9 * scale
    assert result.status == Status.OPTIMAL, result.message
    assert result.rel_gap <= 1e-6


def test_losses_that_bound_no_optimum_ask_clarabel_for_rounding_level_accuracy_unless_smooth():
    """The hinge's certificate accepts only rounding-level flow residuals: at Clarabel's default
    1e-8 the hinge problem's answer certified only to 0.73, at 1e-11 to 1e-12. The logistic loss
    (smooth: its certificate moves the node duals in the loss's metric) starts at 1e-8 and
    certifies there."""
    from gtvcvx.solvers.interior import _accuracies

    hinge = _problem("hinge", g.Norm2(), seed=1)
    assert _accuracies(hinge, 1e-6) == (1e-11,)
    assert _accuracies(_problem("squared_error", g.Norm2()), 1e-6) == (1e-8, 1e-11)  # one retry
    assert _accuracies(_problem("squared_error", g.Norm2()), 1e-12) == (1e-14,)
    result = solve_interior(hinge, tol=1e-9)
    assert result.status == "optimal" and result.rel_gap <= 1e-9
    logistic = _problem("logistic", g.Norm1(), counts=np.full(10, 4), seed=1)
    assert _accuracies(logistic, 1e-6) == (1e-8, 1e-11)
    result = solve_interior(logistic, tol=1e-6)
    assert result.status == "optimal" and result.rel_gap <= 1e-6


def test_long_paths_start_clarabel_one_decade_tighter_except_the_logistic_loss():
    """The flows' conservation residual is priced over each component's paths to its root: on a Huber chain of
    2,000 nodes Clarabel's answer at 1e-8 certified 2.8e-6 (> tol 1e-6), and Clarabel ran again at 1e-11 (38
    iterations); from LONG_PATH_HOPS hops it starts at 1e-9 and certifies with one solve. Short graphs keep 1e-8,
    and so does the logistic loss (exponential cones: 25 -> 61 iterations at 1e-9 on the same chain)."""
    from gtvcvx.bench.losses import build
    from gtvcvx.solvers.interior import LONG_PATH_HOPS, _accuracies

    assert g.graphs.chain(700).longest_hops == 699
    two = g.Graph(9, [[0, 1], [1, 2], [3, 4], [4, 5], [5, 6], [6, 7]])  # components of 3 and 5 nodes (+ one alone)
    assert two.longest_hops == 4 and g.Graph(3, np.zeros((0, 2), dtype=int)).longest_hops == 0
    long_huber = build("chain", 2000, "huber", "norm2", 4, 3, 0.05, 0)
    assert long_huber.graph.longest_hops >= LONG_PATH_HOPS
    assert _accuracies(long_huber, 1e-6) == (1e-9, 1e-11)
    longer = g.GTVProblem(g.graphs.chain(6000), long_huber.loss.__class__(  # one more decade per tenfold hops
        [np.ones((1, 3))] * 6000, [np.zeros(1)] * 6000), g.Norm2(), 0.05)
    assert _accuracies(longer, 1e-6) == (1e-10, 1e-11) and _accuracies(longer, 1e-9) == (1e-11,)  # (not past it)
    assert _accuracies(build("chain", 2000, "logistic", "norm2", 4, 3, 0.05, 0), 1e-6) == (1e-8, 1e-11)
    assert _accuracies(build("sbm", 300, "huber", "norm2", 4, 3, 0.05, 0), 1e-6) == (1e-8, 1e-11)
    result = solve_interior(long_huber, tol=1e-6)
    assert result.status == "optimal" and result.rel_gap <= 1e-6
    assert result.info["clarabel_tolerances"] == [1e-9]  # one solve


def test_the_residuals_and_margins_are_substituted_not_variables():
    """Absolute error, Huber and hinge programs express each sample's residual / margin affinely in W (as CVXPY
    does), without a variable and an equality row per sample: an SBM of 2,000 nodes, absolute error, 6.6 -> 4.2 s
    (19 -> 16 Clarabel iterations). Counted on a chain with the substituted edge differences (an SOC of d + 1
    rows per edge): two rows per sample for |u|, two for the hinge, one equality and two for Huber's split."""
    from gtvcvx.solvers.interior import build_program

    for kind, per_sample in (("absolute", 2), ("hinge", 2), ("huber", 3)):
        problem = _problem(kind, g.Norm2(), counts=np.full(10, 4), seed=1)
        prog, _, _ = build_program(problem, explicit_differences=False)
        _, _, A, _ = prog.matrices()
        samples = problem.loss.X_all.shape[0]
        assert A.shape[0] == per_sample * samples + problem.n_edges * (problem.d + 1), kind


def test_auto_picks_it_on_a_small_real_graph():
    from gtvcvx.bench.real import build

    problem = build("karate_club", "diabetes", "norm2", 3, 0.05, 0)
    assert auto_interior(problem)
    result = g.solve(problem, tol=1e-6)
    assert result.info["method"] == "interior" and result.status == "optimal"
    ref = solve_primal(problem, "CLARABEL")
    assert abs(result.primal - ref.primal) <= 1e-6 * (1 + abs(ref.primal))


@pytest.mark.parametrize("loss_cls", [AbsoluteError, Hinge])
def test_auto_picks_it_for_losses_that_are_not_smooth(loss_cls):
    """A 300-node chain, four samples per node, d = 3 (every node determines w_i): the rule took the core
    above 0.05 predicted seconds, where for the absolute error it took 4.9 s (interior point 0.11 s) and
    for the hinge the 40 s limit at a gap of 0.9 (0.3 s): their prox is a dual box QP solved inexactly."""
    rng = np.random.default_rng(0)
    w = rng.normal(size=3)
    X = [rng.normal(size=(4, 3)) for _ in range(300)]
    y = [x @ w + 0.3 * rng.normal(size=4) for x in X]
    if loss_cls is Hinge:
        y = [np.sign(v) for v in y]
    problem = g.GTVProblem(g.graphs.chain(300), loss_cls(X, y), g.Norm2(), 0.05)
    assert interior.AUTO_SECONDS < interior.predicted_seconds(problem) <= interior.AUTO_SECONDS_DEFICIENT
    assert interior.auto_plan(problem) == ("interior", 0.0)
    result = g.solve(problem, tol=1e-6)
    assert result.status == "optimal" and result.info["method"].startswith("interior")
    # smooth but not quadratic (Huber, logistic: Newton proxes, anchored certificates) as well: measured on
    # this chain 0.15 vs 0.74 s (Huber), 0.36 vs 3.6 s (logistic); a quadratic loss keeps the core
    targets = [x @ w for x in X]
    for smooth in (Huber(X, targets), g.Logistic(X, [np.sign(t) for t in targets])):
        assert interior.auto_plan(g.GTVProblem(problem.graph, smooth, g.Norm2(), 0.05)) == ("interior", 0.0)
    quadratic = g.GTVProblem(problem.graph, g.SquaredError(X, targets), g.Norm2(), 0.05)
    assert interior.auto_plan(quadratic) == ("core", 0.0)


@pytest.mark.parametrize("loss_cls", [AbsoluteError, Hinge])
def test_auto_gives_no_race_share_to_the_core_for_losses_that_are_not_smooth(monkeypatch, loss_cls):
    """Above the deficient nodes' 2 s a race gave the core half the predicted time first, which it never used
    to certify a non-smooth loss (an absolute-error SBM of 2,000 nodes: 9.7 s raced, 5.5 s interior point)."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(4, 3)) for _ in range(60)]
    y = [np.sign(x @ np.ones(3) + 0.3 * rng.normal(size=4)) for x in X]
    problem = g.GTVProblem(g.graphs.chain(60), loss_cls(X, y), g.Norm2(), 0.05)
    monkeypatch.setattr(interior, "AUTO_SECONDS_DEFICIENT", 0.0)  # as if predicted above it
    assert interior.auto_plan(problem) == ("interior", 0.0)
    monkeypatch.setattr(interior, "MAX_SECONDS", 0.0)  # beyond the silent-solve limit: the core
    assert interior.auto_plan(problem) == ("core", 0.0)


def test_auto_races_huber_only_on_graphs_without_long_paths(monkeypatch):
    """The core needs about as many iterations as the graph has hops: above the race's 2 s a Huber chain of
    5,000 / 20,000 nodes raced 2.6 / 23.6 s where the interior point alone took 1.6 / 8.1 s. From LONG_PATH_HOPS
    hops a smooth loss that is not quadratic takes the interior point without a race; elsewhere the race stays
    (the core won a Huber SBM of 1,200 nodes, 8 samples, d = 4: 2.5 vs 4.6 s)."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(4, 3)) for _ in range(600)]
    y = [x @ np.ones(3) + 0.3 * rng.standard_t(2, size=4) for x in X]
    monkeypatch.setattr(interior, "AUTO_SECONDS_DEFICIENT", 0.0)  # as if predicted above it
    long_chain = g.GTVProblem(g.graphs.chain(600), Huber(X, y), g.Norm2(), 0.05)
    assert long_chain.graph.longest_hops >= interior.LONG_PATH_HOPS
    assert interior.auto_plan(long_chain) == ("interior", 0.0)
    short = g.GTVProblem(g.graphs.chain(60), Huber(X[:60], y[:60]), g.Norm2(), 0.05)
    assert interior.auto_plan(short)[0] == "race"


def test_auto_takes_large_programs_for_losses_whose_core_is_slow_and_certificate_loose(monkeypatch):
    """Beyond AUTO_MAX_ROWS the interior point stays in ``auto``'s choice for absolute error, Huber and the
    hinge when predicted at most AUTO_SECONDS_LARGE (a 20,000-node absolute-error chain: 6.2 s certified, where
    the core it took before stood at a gap of 1 after 30 s); squared error (the core's fast case) keeps the core
    there, and so does the logistic loss (exponential cones) except on long paths, where the core needs as many
    iterations as hops (a 10,000-node chain: 12.2 s certified vs the core's 105 s), while EXP_CONE_SECONDS_FACTOR
    times the prediction is at most MAX_SECONDS."""
    rng = np.random.default_rng(0)
    n = 60
    X = [rng.normal(size=(4, 3)) for _ in range(n)]
    y = [x @ np.ones(3) + 0.3 * rng.standard_t(2, size=4) for x in X]
    labels = [np.where(v > 0, 1.0, -1.0) for v in y]
    problems = {name: g.GTVProblem(g.graphs.chain(n), loss, g.Norm2(), 0.05) for name, loss in (
        ("absolute", g.AbsoluteError(X, y)), ("huber", g.Huber(X, y)), ("hinge", g.Hinge(X, labels)),
        ("logistic", g.Logistic(X, labels)), ("squared_error", g.SquaredError(X, y)))}
    monkeypatch.setattr(interior, "AUTO_MAX_ROWS", 0)  # as if the chain were long
    assert interior.auto_plan(problems["absolute"]) == ("interior", 0.0)
    assert interior.auto_plan(problems["huber"]) == ("interior", 0.0)
    assert interior.auto_plan(problems["hinge"]) == ("interior", 0.0)
    for name in ("logistic", "squared_error"):
        assert interior.auto_plan(problems[name]) == ("core", 0.0), name
    result = g.solve(problems["absolute"], tol=1e-6)
    assert result.info["method"] == "interior" and result.status == "optimal"
    monkeypatch.setattr(interior, "AUTO_SECONDS_LARGE", 0.0)  # predicted above it: the core
    assert interior.auto_plan(problems["absolute"]) == ("core", 0.0)
    long_chain = g.GTVProblem(g.graphs.chain(600), g.Logistic(X * 10, labels * 10), g.Norm2(), 0.05)
    assert long_chain.graph.longest_hops >= interior.LONG_PATH_HOPS
    assert interior.auto_plan(long_chain) == ("interior", 0.0)
    monkeypatch.setattr(interior, "MAX_SECONDS", interior.predicted_seconds(long_chain) * 2.9)
    assert interior.auto_plan(long_chain) == ("core", 0.0)


def test_auto_leaves_random_graphs_to_the_core():
    """A 300-node random graph fills the factorization in (measured 2-3 s against the core's
    0.1 s), so the size rule's work estimate keeps it on the first-order core."""
    from gtvcvx.bench.gtv import build_sbm

    problem = build_sbm(300, 1500, 10, 0, m=2)
    assert not interior_refusal(problem)
    assert interior.predicted_seconds(problem) > interior.AUTO_SECONDS_DEFICIENT and not auto_interior(problem)
    # rank-deficient nodes: a race, which the core wins well inside its share of the budget
    plan, seconds = interior.auto_plan(problem)
    assert plan == "race" and seconds == pytest.approx(
        interior.AUTO_RACE_FRACTION * interior.predicted_seconds(problem))
    result = g.solve(problem, tol=1e-4)
    assert result.info["method"] == "halpern" and result.status == "optimal"
    assert result.info["race"]["core_budget"] == pytest.approx(seconds)


def test_a_race_the_core_does_not_finish_goes_to_the_interior_point_solve(monkeypatch):
    problem = _problem("squared_error", g.Norm2(), n=30, counts=np.full(30, 1))  # m_i = 1 < d = 3
    monkeypatch.setattr(interior, "AUTO_SECONDS_DEFICIENT", 0.0)  # small as it is, race
    monkeypatch.setattr(interior, "AUTO_RACE_FRACTION", 1e-9)  # and give the core no time
    assert interior.auto_plan(problem)[0] == "race"
    result = g.solve(problem, tol=1e-7, max_iter=10_000)
    assert result.status == "optimal" and result.info["method"] == "halpern+interior"
    race = result.info["race"]
    assert race["core_status"] == "time_limit" and race["core_rel_gap"] > 1e-7
    assert result.iterations > result.info["clarabel_iterations"]  # the core's iterations are counted
    ref = solve_primal(problem, "CLARABEL")
    assert abs(result.primal - ref.primal) <= 1e-6 * (1 + abs(ref.primal))
    # the caller's time limit below the core's share: the core's answer, in the caller's terms
    monkeypatch.setattr(interior, "AUTO_RACE_FRACTION", 1e9)
    short = g.solve(problem, tol=1e-15, time_limit=0.05)
    assert short.status == "time_limit" and short.info["method"] == "halpern"
    assert "time_limit = 0.05 s" in short.message


def test_refuses_a_solve_predicted_to_run_silently_for_long(monkeypatch):
    from gtvcvx.bench.gtv import build_sbm

    problem = build_sbm(300, 1500, 10, 0, m=2)
    assert 2 < interior.predicted_seconds(problem) < interior.MAX_SECONDS  # measured 1.3 s (faer): an overestimate
    monkeypatch.setattr(interior, "MAX_SECONDS", 1.0)
    assert "would take about" in interior_refusal(problem)
    with pytest.raises(CapabilityError, match="little locality"):
        g.solve(problem, method="interior")


def test_auto_picks_it_for_rank_deficient_nodes_on_a_knn_graph():
    """The issue's housing shape (one sample per node, d = 4, geographic 5-NN graph, 900 nodes):
    the minimum-degree count sees the locality the envelope misses; measured 0.18 s against the
    core's 0.52 s. A full-rank problem of the same size stays on the core."""
    from test_polish import _few_samples_per_node

    problem = _few_samples_per_node(n=900, d=4, lam=0.02)
    assert interior.constrained_nodes(problem).size and auto_interior(problem)
    rng = np.random.default_rng(1)
    full = g.GTVProblem(problem.graph, g.SquaredDistance(rng.normal(size=(900, 4))), g.Norm2(), 0.02)
    assert not interior.constrained_nodes(full).size and not auto_interior(full)


def test_work_estimate_grows_with_the_envelope():
    chain = g.GTVProblem(g.graphs.chain(50), g.SquaredDistance(np.zeros((50, 2))), g.Norm2(), 0.1)
    # a chain in RCM order has width 1 per node: (1 + 1)^2 per node, times d^3
    assert factor_work(chain) == pytest.approx(8.0 * (4 * 49 + 1))
    dense = g.GTVProblem(g.graphs.complete(50), g.SquaredDistance(np.zeros((50, 2))), g.Norm2(), 0.1)
    assert factor_work(dense) > 100 * factor_work(chain)


def test_refuses_a_loss_without_a_conic_form():
    problem = _problem("squared_error", g.Norm2())

    class Custom(type(problem.loss)):
        conic_form = None

    custom = g.GTVProblem(problem.graph, Custom(problem.loss.X, problem.loss.y, d=problem.d), g.Norm2(), 0.3)
    assert "declares no conic form" in interior_refusal(custom)
    with pytest.raises(CapabilityError, match="conic form"):
        g.solve(custom, method="interior")
    assert not auto_interior(custom)
    assert g.solve(custom, tol=1e-6).info["method"] == "halpern"


def test_an_unconfirmed_answer_continues_in_the_core(monkeypatch):
    """auto: an interior answer whose certificate misses tol warm-starts the core; explicit
    method='interior' returns it as it is (status inaccurate, the reason in the message)."""
    problem = _problem("squared_error", g.Norm2(), seed=3)
    assert auto_interior(problem)
    good = solve_interior(problem, tol=1e-8)

    def rough(problem, tol, **kwargs):
        W = good.W + 1e-2
        return GTVResult(status=Status.INACCURATE, solver="fast", W=W, U=good.U, iterations=5,
                         message="test: rough answer", info={"method": "interior"})

    monkeypatch.setattr("gtvcvx.solvers.gtv.solve_interior", rough)
    result = g.solve(problem, tol=1e-8)
    assert result.status == "optimal" and result.info["method"] == "interior+halpern"
    assert result.info["interior"]["status"] == "inaccurate"
    assert abs(result.primal - good.primal) <= 1e-7 * (1 + abs(good.primal))
    assert g.solve(problem, tol=1e-8, method="interior").status == "inaccurate"


def test_inaccurate_when_the_certificate_cannot_confirm():
    problem = _problem("squared_error", g.Norm2(), seed=4)
    result = solve_interior(problem, tol=1e-15)  # below what float64 certifies here
    assert result.status == Status.INACCURATE
    assert "certified relative gap" in result.message and result.rel_gap > 1e-15


def test_edgeless_graph_and_nodes_without_data():
    rng = np.random.default_rng(5)
    X = [rng.normal(size=(2, 2)), np.zeros((0, 2)), rng.normal(size=(3, 2))]
    y = [Xi @ np.ones(2) for Xi in X]
    problem = g.GTVProblem(g.Graph.from_edges(3, np.zeros((0, 2), dtype=int)), g.SquaredError(X, y, d=2),
                           g.Norm2(), 0.5)
    result = solve_interior(problem, tol=1e-8)
    assert result.status == "optimal"
    np.testing.assert_allclose(result.W[[0, 2]], 1.0, atol=1e-6)


@pytest.mark.parametrize("penalty", [g.Norm2(), g.Norm1(), g.GroupNorm2([0, 0, 1])], ids=lambda p: p.name)
def test_substituted_and_explicit_edge_differences_give_the_same_certified_answer(penalty):
    """The two KKT systems (z = D W substituted, or variables with rows D W - Z = 0) are the same
    problem: their flows, recovered from Clarabel's multipliers, certify the same optimum."""
    import clarabel

    from gtvcvx.solvers import certify_pair
    from gtvcvx.solvers.interior import build_program

    problem = _problem("squared_error", penalty, seed=2)
    answers = []
    for explicit in (False, True):
        prog, w_idx, flows = build_program(problem, explicit_differences=explicit)
        P, q, A, b = prog.matrices()
        settings = clarabel.DefaultSettings()
        settings.verbose = False
        sol = clarabel.DefaultSolver(P, q, A, b, prog.cones, settings).solve()
        x, y = np.asarray(sol.x), np.asarray(sol.z)
        cert = certify_pair(problem, x[w_idx], flows(x, y))
        assert cert.rel_gap <= 1e-7
        answers.append((x[w_idx], cert.primal))
    assert abs(answers[0][1] - answers[1][1]) <= 1e-7 * (1 + abs(answers[0][1]))
    assert (A.shape[0] > 0) and build_program(problem)[0].n_vars < build_program(problem, explicit_differences=True)[0].n_vars


def _karate_raw_breast_cancer(penalty, lam):
    """The karate club, two raw (unstandardized) breast-cancer samples per node: radius, texture,
    perimeter, area (up to 2,499) and an intercept, logistic loss."""
    import networkx as nx
    from sklearn.datasets import load_breast_cancer

    club = nx.karate_club_graph()
    graph = g.Graph.from_edges(club.number_of_nodes(), np.array(list(club.edges())))
    X, labels = load_breast_cancer(return_X_y=True)
    X = np.c_[X[:, :4], np.ones(len(X))]
    rng = np.random.default_rng(0)
    rng.permutation(442)  # (the dealing of the session that found it: the diabetes rows first)
    rows = rng.permutation(len(X))[: 2 * graph.n].reshape(graph.n, 2)
    loss = g.Logistic([X[r] for r in rows], [np.where(labels[r] == 1, 1.0, -1.0) for r in rows])
    return g.GTVProblem(graph, loss, penalty, lam)


@pytest.mark.parametrize("penalty", [g.Norm2(), g.Norm1()], ids=["norm2", "norm1"])
def test_a_clarabel_stall_is_retried_with_shorter_steps(penalty):
    """Clarabel stopped with step length 0 at its 4th iteration (InsufficientProgress) on every
    attempt; the certified gap was 0.36 and ``gtvcvx.solve`` went on with 100,000 first-order
    iterations (55 s) to the same 0.36. With steps of at most 0.9 of the way to the boundary it
    solves the problem in ~45 iterations, certified."""
    problem = _karate_raw_breast_cancer(penalty, 1.0)
    result = interior.solve_interior(problem, 1e-6)
    assert result.status == Status.OPTIMAL and result.rel_gap <= 1e-6, result.message
    assert result.info["clarabel_status"] == "Solved"
    reference = solve_primal(problem, "CLARABEL")  # CVXPY's own statement
    assert result.primal == pytest.approx(reference.primal, rel=1e-6)


@pytest.mark.parametrize("lam", [1.0, 100.0, 1000.0])
def test_a_squared_penalty_moves_logistic_node_duals_in_the_loss_metric(lam):
    """Raw features put the optimal sample duals within ~1e-10 of their domain's boundary: the
    interior solve's flows left it at 20 of 34 nodes, the anchored flow (the node duals moved in the
    loss's own metric) ran for norm penalties only, and the zero flow's rounding-level residual was
    refused, so the certificate was infinite and 100,000 first-order iterations (50 s) could not
    change that. A squared penalty has no capacities: the anchored flow needs no common scale. (At
    lam = 100 and 1000 Clarabel also stopped AlmostSolved, short of the accuracy the certificate needs:
    the stall fallbacks; at lam = 0.01 the run ends at max_iter with a certified 1.6e-6.)"""
    problem = _karate_raw_breast_cancer(g.SquaredNorm2(), lam)
    result = g.solve(problem, tol=1e-6)
    assert result.status == Status.OPTIMAL and result.rel_gap <= 1e-6, result.message
    assert result.info["method"] == "interior"
    reference = solve_primal(problem, "CLARABEL")
    assert reference.primal >= result.dual - 1e-12 * (1 + abs(result.dual))  # weak duality against CVXPY
    assert result.primal == pytest.approx(reference.primal, rel=1e-5)


def _nearly_separable_hinge_sbm(n, seed=0):
    """Labels of one linear model with a little noise: each node's four samples are separable (hinge 0
    within reach), the pooled data are not, and the graph (an SBM at mean degree ~5) has long paths."""
    rng = np.random.default_rng(seed)
    graph = g.graphs.sbm([n // 2, n - n // 2], p_in=10 / n, p_out=1 / n, seed=1).graph
    X = [rng.normal(size=(4, 3)) for _ in range(n)]
    truth = rng.normal(size=3)
    y = [np.sign(x @ truth + 0.3 * rng.normal(size=4)) for x in X]
    return g.GTVProblem(graph, Hinge(X, y), g.Norm2(), 0.05)


def test_a_nearly_separable_hinge_problem_is_certified_from_clarabels_flows():
    """Clarabel's flows leave conservation residuals of ~1e-10 at the hinge nodes, above the rounding level
    the allowance once took without a bound on the optimum; the box of the pooled samples' half-spaces
    (minorant_box) is such a bound whatever the residual's size, so the answer certifies (it was
    ``inaccurate`` at a relative gap of 0.96: the zero flow's bound) and agrees with CVXPY+CLARABEL."""
    problem = _nearly_separable_hinge_sbm(300)
    result = solve_interior(problem, tol=1e-6)
    assert result.status == "optimal" and result.rel_gap <= 1e-6
    assert result.residuals["residual_allowance"] > 0  # a residual was priced, not absent
    ref = solve_primal(problem, "CLARABEL")
    assert ref.primal >= result.dual - 1e-9 * (1 + abs(ref.primal))  # the bound holds
    assert abs(result.primal - ref.primal) <= 1e-6 * (1 + abs(ref.primal))


def test_a_hinge_chain_certifies_with_the_spanning_trees_budget():
    """On a chain every residual was priced at its path length times P(W) (each edge granted the whole
    budget): Clarabel's ~1e-10 residuals cost a relative gap of 2e-7 at 400 nodes (1.8e-6 at 1,000, and
    ``gtvcvx.solve`` then ran the core to its 60 s limit); the edges of a spanning tree share one budget
    (certificate._SubtreeSums): 1.7e-8."""
    rng = np.random.default_rng(0)
    n = 400
    X = [rng.normal(size=(4, 3)) for _ in range(n)]
    truth = rng.normal(size=3)
    y = [np.sign(x @ truth + 0.3 * rng.normal(size=4)) for x in X]
    problem = g.GTVProblem(g.graphs.chain(n), Hinge(X, y), g.Norm2(), 0.05)
    result = solve_interior(problem, tol=1e-7)
    assert result.status == "optimal" and result.rel_gap <= 1e-7
    ref = solve_primal(problem, "CLARABEL")
    assert ref.primal >= result.dual - 1e-9 * (1 + abs(ref.primal))


def test_a_long_hinge_chain_certifies_by_factorized_anchored_flows(monkeypatch):
    """The anchored flow's system on a chain needs about as many block-Jacobi CG steps as the chain has hops,
    and their limit left residuals whose allowance (priced along the chain) missed tol: a 4,000-node hinge chain
    read ``inaccurate`` at 2.5e-6 after Clarabel ran twice (it now certifies without anchored rounds, the dual
    point's polish); a 10,000-node chain needed four until the penalty's budget capped the nodes' distances from
    the root (``_budget_reach``; now none: 1.0e-8 in 3.9 s, was 4.8e-9 in 5.9 s), so they run without the cap
    here. Where the graph has more hops than CG has steps and factors sparsely, the anchored system is factored
    without CG (on a 20,000-node chain CG's 424 steps a round were 4.9 s of the certificate's 11.9), and rounds
    go on while each lowers the gap by a fifth: one Clarabel solve, certified. A short chain runs CG as before."""
    from gtvcvx.bench.losses import build
    from gtvcvx.solvers import certificate

    real, steps = certificate.anchored_flow, []

    def spy(*args, **kwargs):
        flow = real(*args, **kwargs)
        steps.append(None if flow is None else flow.projection_iterations)
        return flow

    monkeypatch.setattr(certificate, "anchored_flow", spy)
    problem = build("chain", 10_000, "hinge", "norm2", 4, 3, 0.05, 0)
    capped = solve_interior(problem, tol=1e-6)
    assert capped.status == "optimal" and not steps
    monkeypatch.setattr(certificate, "_budget_reach", lambda *args: None)
    result = solve_interior(problem, tol=1e-6)
    assert result.status == "optimal" and result.rel_gap <= 1e-6, result.message
    assert result.info["clarabel_tolerances"] == [1e-11]
    assert steps and set(steps) == {0}  # factored, no CG step
    # a chain with fewer hops than CG has steps: CG first, as on every graph with short paths
    short = build("chain", 200, "hinge", "norm2", 4, 3, 0.05, 0)
    assert short.graph.longest_hops < certificate.anchored_max_iter(short.n)
    rng = np.random.default_rng(0)
    projector = certificate.FlowProjector(short)
    flow = real(short, rng.normal(size=(200, 3)), 0.01 * rng.normal(size=(199, 3)), projector)
    assert flow.projection_iterations > 0 and projector.anchored_direct_first is False


def test_clarabel_factors_by_faer_on_large_factorizations_where_the_build_has_it(monkeypatch):
    """QDLDL below FAER_MIN_WORK flops (faster on small graphs), faer from it on (1.8-3.8x faster on SBMs of
    1,000-2,000 nodes), and QDLDL whatever the size on a Clarabel build without faer."""
    assert interior._faer_available()  # (the Clarabel the test extra installs)
    small = interior._clarabel_settings(False, 50, None, work=interior.FAER_MIN_WORK / 2)
    large = interior._clarabel_settings(False, 50, None, work=interior.FAER_MIN_WORK)
    assert (small.direct_solve_method, large.direct_solve_method) == ("qdldl", "faer")
    monkeypatch.setattr(interior, "_faer_available", lambda: False)
    assert interior._clarabel_settings(False, 50, None, work=1e12).direct_solve_method == "qdldl"


def test_a_component_whose_residual_cannot_be_bounded_takes_the_zero_flow_alone():
    """An SBM with a two-node component whose eight samples are separable (no box bounds its optimum) beside a
    large component: a rounding-level flow on the pair (Clarabel's left ~1e-12 on a 2,000-node SBM) sent the
    whole certificate to the zero flow (relative gap ~1); the zero flow on that component alone (exact there,
    its dual term 0) and Clarabel's flow elsewhere certify."""
    from gtvcvx.solvers import certify_pair

    rng = np.random.default_rng(0)
    big = _nearly_separable_hinge_sbm(200)
    n = big.n + 2
    edges = np.vstack([big.graph.edges, [[n - 2, n - 1]]])
    X = list(big.loss.X) + [rng.normal(size=(4, 3)) for _ in range(2)]
    truth = np.array([1.0, -2.0, 0.5])
    y = list(big.loss.y) + [np.sign(x @ truth) for x in X[-2:]]  # the pair: separable through the origin
    problem = g.GTVProblem(g.Graph.from_edges(n, edges, 1.0), Hinge(X, y), g.Norm2(), 0.05)
    result = solve_interior(problem, tol=1e-6)  # Clarabel's flows, certified
    assert result.status == "optimal" and result.rel_gap <= 1e-6
    U = result.U.copy()
    U[-1] = 1e-13 * rng.normal(size=3)  # a rounding-level flow on the pair's edge
    cert = certify_pair(problem, result.W, U)
    assert "zero flow on 1 edges" in cert.message and not cert.U[-1].any()
    assert cert.rel_gap <= 1e-6  # (the zero flow everywhere: ~1)
    ref = solve_primal(problem, "CLARABEL", **TIGHT)
    assert ref.primal >= cert.dual - 1e-9 * (1 + abs(ref.primal))
