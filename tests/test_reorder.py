"""The fast core on a copy of the problem relabelled for memory locality (large graphs)."""

import numpy as np
import pytest

import gtvcvx as g
import gtvcvx.solvers.gtv as core
from conftest import make_problem
from gtvcvx.clustering import clustering_problem
from gtvcvx.reference import solve_primal
from gtvcvx.solvers import _reorder
from gtvcvx.solvers.certificate import certify_pair

TIGHT = dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)


def shuffled_knn(n=300, d=3, seed=0):
    """A k-NN clustering problem whose node labels are in random order (no locality)."""
    rng = np.random.default_rng(seed)
    points = rng.normal(size=(n, d)) + 4.0 * rng.integers(0, 3, size=(n, 1))
    problem, _ = clustering_problem(points, 0.3, k=6)
    return problem


@pytest.fixture
def always_relabel(monkeypatch):
    monkeypatch.setattr(core, "locality_order", lambda problem: _reorder.locality_order(problem, force=True))


def test_relabelled_problem_is_the_same_problem():
    problem = make_problem("squared_error", "norm2", seed=1, sizes=(6, 5), d=3, lam=0.4)
    relabel = _reorder.locality_order(problem, force=True)
    rng = np.random.default_rng(0)
    W = rng.normal(size=(problem.n, problem.d))
    U = rng.normal(size=(problem.n_edges, problem.d))
    new = relabel.problem
    assert new.objective(relabel.nodes_in(W)) == pytest.approx(problem.objective(W), rel=1e-13)
    assert np.allclose(new.divergence(relabel.flows_in(U)), relabel.nodes_in(problem.divergence(U)), atol=1e-12)
    assert np.allclose(new.differences(relabel.nodes_in(W)), relabel.flows_in(problem.differences(W)), atol=1e-12)
    assert np.array_equal(relabel.nodes_out(relabel.nodes_in(W)), W)
    assert np.array_equal(relabel.flows_out(relabel.flows_in(U)), U)
    # sorted, oriented edges: a valid graph
    assert (new.graph.edges[:, 0] < new.graph.edges[:, 1]).all()
    assert g.Graph.from_edges(new.n, new.graph.edges, new.graph.weights) == new.graph


def test_compiled_edge_order_is_the_sorted_order(monkeypatch):
    """From 2^20 edges the relabelled edges are put in lexicographic order by a counting sort
    (``_graph_kernels.pair_order``): the same permutation as the argsort of the pair keys, here on
    a k-NN graph and on pairs with a hub segment longer than the insertion-sort limit."""
    from gtvcvx import _graph_kernels, _jit

    problem = shuffled_knn()
    want = _reorder.locality_order(problem, force=True)
    monkeypatch.setattr(_jit, "MIN_ENTRIES", 1)
    got = _reorder.locality_order(problem, force=True)
    assert np.array_equal(got.edge_order, want.edge_order) and got.problem.graph == want.problem.graph
    rng = np.random.default_rng(1)
    n = 500
    keys = rng.choice(n * n, size=4000, replace=False)
    low, high = np.minimum(keys // n, keys % n), np.maximum(keys // n, keys % n)
    distinct = np.unique(low * n + high, return_index=True)[1]
    low = np.concatenate([low[distinct], np.zeros(n - 1, np.int64)])  # node 0: a segment of ~500
    high = np.concatenate([high[distinct], np.arange(1, n)])
    distinct = np.unique(low * n + high, return_index=True)[1]
    low, high = low[distinct][::-1].copy(), high[distinct][::-1].copy()
    assert (low == 0).sum() > _graph_kernels.INSERTION_MAX
    order = _graph_kernels.pair_order_compiled()(low, high, n)
    assert np.array_equal(order, np.argsort(low * n + high))


def test_small_or_local_graphs_keep_their_labels():
    problem = shuffled_knn()
    assert _reorder.locality_order(problem) is None  # far below the size where it pays
    relabel = _reorder.locality_order(problem, force=True)
    # ... and relabelling an already relabelled graph gains nothing: refused
    saved = (_reorder.MIN_FLOW_ENTRIES, _reorder.MIN_NODE_BYTES)
    try:
        _reorder.MIN_FLOW_ENTRIES = _reorder.MIN_NODE_BYTES = 0
        assert _reorder.locality_order(relabel.problem) is None
        assert _reorder.locality_order(problem) is not None  # random labels: relabelled
    finally:
        _reorder.MIN_FLOW_ENTRIES, _reorder.MIN_NODE_BYTES = saved


def _reordered_solve(problem, kind):
    """The core's answer on a reordered copy (``kind``), checked against CLARABEL, and its W and U
    recertified on the caller's problem (they are the caller's)."""
    ref = solve_primal(problem, "CLARABEL", **TIGHT)
    fast = g.solve(problem, tol=1e-7, method="halpern")
    assert fast.info["node_order"] == kind
    assert fast.status == "optimal" and fast.rel_gap <= 1e-7
    assert abs(fast.primal - ref.primal) <= 1e-6 * (1 + abs(ref.primal))
    assert fast.dual <= ref.primal + 1e-10 * (1 + abs(ref.primal))
    return fast, certify_pair(problem, fast.W, fast.U)


@pytest.mark.parametrize("loss, penalty", [("squared_distance", "norm2"), ("squared_error", "norm1"),
                                           ("logistic", "norm2")])
def test_relabelled_solve_agrees_with_clarabel_in_the_callers_order(always_relabel, monkeypatch, loss, penalty):
    # (no active-set polish: its exact answer leaves rounding-level node and edge gaps, which say
    # nothing about whose nodes and edges they are)
    monkeypatch.setattr(g.solvers.gtv, "polish_applies", lambda problem: False)
    problem = make_problem(loss, penalty, seed=2, sizes=(5, 4), d=3, lam=0.3)
    fast, again = _reordered_solve(problem, "reverse_cuthill_mckee")
    assert again.rel_gap <= 1e-7
    assert problem.objective(fast.W) == pytest.approx(fast.primal, rel=1e-12)
    assert fast.info["node_gaps"].shape == (problem.n,) and fast.info["edge_gaps"].shape == (problem.n_edges,)
    # the per-node and per-edge gaps are the caller's nodes' and edges'
    for mine, callers in ((fast.info["node_gaps"], again.node_gaps), (fast.info["edge_gaps"], again.edge_gaps)):
        assert np.abs(mine - callers).max() <= 1e-3 * callers.max()


@pytest.mark.parametrize("penalty", [g.Norm2(), g.Norm1(), g.QuadraticForm(np.diag([2.0, 1.0, 0.5]))])
def test_relabelled_solve_with_compiled_sweeps_agrees_with_numpy(always_relabel, monkeypatch, penalty):
    """A graph relabelled by reverse Cuthill-McKee, solved with the compiled sweeps (the fused step
    with prefetches, then the scatter) and with the NumPy path: both certified at tol, the same
    answer (a penalty without a declared row projection too)."""
    import gtvcvx._jit as jit

    base = shuffled_knn(n=200)
    problem = g.GTVProblem(base.graph, base.loss, penalty, 0.3)
    results = []
    for entries in (0, 1 << 60):
        monkeypatch.setattr(jit, "MIN_ENTRIES", entries)
        results.append(g.solve(problem, tol=1e-7, method="halpern"))
    compiled, plain = results
    assert compiled.info["node_order"] == plain.info["node_order"] == "reverse_cuthill_mckee"
    assert compiled.status == plain.status == "optimal"
    assert abs(compiled.primal - plain.primal) <= 1e-7 * (1.0 + abs(plain.primal))
    np.testing.assert_allclose(compiled.W, plain.W, atol=1e-4 * (1.0 + np.abs(plain.W).max()))


def test_relabelled_callback_and_warm_start_are_in_the_callers_order(always_relabel):
    problem = shuffled_knn(n=120)
    seen = []

    def callback(info):
        # the arrays are the caller's: recertifying them on the caller's problem gives the same primal
        assert info.W.shape == (problem.n, problem.d) and info.U.shape == (problem.n_edges, problem.d)
        assert problem.objective(info.W) == pytest.approx(info.certificate.primal, rel=1e-12)
        assert np.abs(problem.divergence(info.certificate.U)).max() < np.inf
        seen.append(info.iteration)

    first = g.solve(problem, tol=1e-8, method="halpern", callback=callback)
    assert seen and first.status == "optimal"
    warm = g.solve(problem, tol=1e-8, method="halpern", warm_start=first)
    assert warm.status == "optimal" and warm.iterations <= 10  # started at the answer
    flows_only = g.solve(problem, tol=1e-8, method="halpern", warm_start={"U": first.U})
    assert flows_only.status == "optimal"
    assert abs(flows_only.primal - first.primal) <= 2e-8 * (1 + abs(first.primal))


def test_relabelling_is_deterministic(always_relabel):
    problem = shuffled_knn(n=150, seed=3)
    a = g.solve(problem, tol=1e-6, method="halpern")
    b = g.solve(problem, tol=1e-6, method="halpern")
    assert a.iterations == b.iterations and np.array_equal(a.W, b.W)


@pytest.mark.parametrize("relabelled", [False, True])
def test_a_callback_is_called_only_where_it_wants_to_be(monkeypatch, relabelled):
    if relabelled:
        monkeypatch.setattr(core, "locality_order", lambda problem: _reorder.locality_order(problem, force=True))
    problem = shuffled_knn(n=120)
    calls, asked = [], []

    class Picky:
        def wants(self, certificate):
            asked.append(certificate.rel_gap)
            return certificate.rel_gap < 1e-4

        def __call__(self, info):
            assert info.certificate.rel_gap < 1e-4
            assert problem.objective(info.W) == pytest.approx(info.certificate.primal, rel=1e-12)
            calls.append(info.iteration)

    result = g.solve(problem, tol=1e-9, method="halpern", callback=Picky(), check_every=20)
    assert result.status == "optimal"
    assert len(asked) > len(calls) > 0 and min(asked) < 1e-4 < max(asked)


def _every_family():
    """One problem per loss and per parametrized penalty: nodes without data, m_i < d, a random
    graph whose relabelling flips edge orientations."""
    rng = np.random.default_rng(11)
    counts = (6, 2, 0, 5, 4, 3, 1, 5)
    X = [rng.normal(size=(m, 3)) for m in counts]
    y = [rng.normal(size=m) for m in counts]
    yc = [np.where(v > 0, 1.0, -1.0) for v in y]
    graph = g.graphs.sbm([4, 4], 0.8, 0.3, seed=2)
    cases = {
        "absolute-norm2": (g.AbsoluteError(X, y), g.Norm2()),
        "huber-group": (g.Huber(X, y, delta=0.5), g.GroupNorm2([0, 0, 1])),
        "hinge-quadratic": (g.Hinge(X, yc), g.QuadraticForm([[2.0, 0.3, 0.0], [0.3, 1.0, 0.0], [0.0, 0.0, 0.5]])),
        "squared_error-squared_norm2": (g.SquaredError(X, y), g.SquaredNorm2()),
        "squared_distance-norm1": (g.SquaredDistance(rng.normal(size=(8, 3))), g.Norm1()),
    }
    return {name: g.GTVProblem(graph.graph, loss, penalty, 0.3) for name, (loss, penalty) in cases.items()}


@pytest.mark.parametrize("name", sorted(_every_family()))
def test_every_loss_and_penalty_family_relabels_to_the_same_answer(monkeypatch, name):
    problem = _every_family()[name]
    plain = g.solve(problem, tol=1e-7, method="halpern", max_iter=50_000)
    monkeypatch.setattr(core, "locality_order", lambda p: _reorder.locality_order(p, force=True))
    relabelled = g.solve(problem, tol=1e-7, method="halpern", max_iter=50_000)
    assert relabelled.info["node_order"] == "reverse_cuthill_mckee"
    assert plain.status == relabelled.status == "optimal"
    assert abs(relabelled.primal - plain.primal) <= 1e-6 * (1 + abs(plain.primal))
    # the returned pair certifies on the caller's problem as reported
    again = certify_pair(problem, relabelled.W, relabelled.U)
    assert again.rel_gap <= 1e-7 and again.dual <= plain.primal + 1e-9 * (1 + abs(plain.primal))


def test_edge_block_order_is_the_same_problem_with_its_edges_sorted():
    """Edges sorted by (block of the second end point, first end point), orientation and node labels
    kept: the same objective, divergence and differences, maps that invert each other."""
    problem = shuffled_knn(n=200, seed=4)
    relabel = _reorder.edge_block_order(problem, force=True, block=16)
    new = relabel.problem
    edges = new.graph.edges
    assert relabel.kind == "edge_blocks" and relabel.sign is None
    assert np.array_equal(relabel.order, np.arange(problem.n)) and new.loss is problem.loss
    assert np.array_equal(edges, problem.graph.edges[relabel.edge_order])
    assert np.array_equal(new.graph.weights, problem.graph.weights[relabel.edge_order])
    key = (edges[:, 1] // 16) * problem.n + edges[:, 0]
    assert (np.diff(key) >= 0).all() and not (np.diff(problem.graph.edges[:, 1] // 16) >= 0).all()
    rng = np.random.default_rng(1)
    W = rng.normal(size=(problem.n, problem.d))
    U = rng.normal(size=(problem.n_edges, problem.d))
    assert new.objective(W) == pytest.approx(problem.objective(W), rel=1e-13)
    assert np.allclose(new.divergence(relabel.flows_in(U)), problem.divergence(U), atol=1e-12)
    assert np.array_equal(new.differences(W), relabel.flows_in(problem.differences(W)))
    assert np.array_equal(relabel.flows_out(relabel.flows_in(U)), U)
    # in this order already, or small: nothing to do
    assert _reorder.edge_block_order(new, force=True, block=16) is None
    assert _reorder.edge_block_order(problem) is None


def test_edge_blocked_solve_agrees_with_clarabel_in_the_callers_order(monkeypatch):
    monkeypatch.setattr(core, "locality_order", lambda problem: None)
    monkeypatch.setattr(core, "edge_block_order",
                        lambda problem: _reorder.edge_block_order(problem, force=True, block=8))
    fast, again = _reordered_solve(shuffled_knn(n=120, seed=5), "edge_blocks")
    assert again.rel_gap <= 1e-7
    assert np.abs(fast.info["edge_gaps"] - again.edge_gaps).max() <= 1e-3 * again.edge_gaps.max()
