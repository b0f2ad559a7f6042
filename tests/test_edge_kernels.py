"""The compiled kernels of the fast core: the fused edge pass and the low-rank quadratic prox.

Each kernel is checked against the NumPy/SciPy operations it replaces (which the small problems of
the other tests run), and the solver with the kernels forced on is checked against CLARABEL.
"""

import numpy as np
import pytest
import scipy.sparse as sp

import gtvcvx as g
import gtvcvx._jit as jit
from conftest import make_problem
from gtvcvx.reference import solve_primal
from gtvcvx.solvers._edge_kernels import MOVE_HALPERN, MOVE_NONE, MOVE_RESTART, EdgeSweep

PENALTY_CASES = {
    "norm2": g.Norm2(),
    "norm1": g.Norm1(),
    "squared_norm2": g.SquaredNorm2(),
    "quadratic_form": g.QuadraticForm(np.array([[2.0, 0.3, 0.0], [0.3, 1.0, 0.1], [0.0, 0.1, 0.5]])),
    "group_norm2": g.GroupNorm2(groups=[0, 0, 1]),
}


def _edges(rng, n_cols, m):
    """Random edges between ``n_cols`` nodes, end points in either order, no self loops."""
    a = rng.integers(0, n_cols, size=m)
    b = (a + rng.integers(1, n_cols, size=m)) % n_cols
    return a, b


@pytest.mark.parametrize("name", sorted(PENALTY_CASES))
@pytest.mark.parametrize("move", [MOVE_NONE, MOVE_HALPERN, MOVE_RESTART])
@pytest.mark.parametrize("part", [False, True])
@pytest.mark.parametrize("threads", [1, 3])
def test_compiled_sweep_matches_numpy(name, move, part, threads):
    """Moves, step, projection, divergence and residual of the compiled sweeps (move, gather and
    projection in one pass with prefetches, then the scatter) agree with the NumPy path to rounding
    and with the operations written out; ``part``: a part's view (halo columns without divergence rows, some edges not counted);
    ``threads``: the serial build, and the threaded one scattering in three chunks."""
    penalty = PENALTY_CASES[name]
    rng = np.random.default_rng(7)
    n_cols, m, d = 30, 200, 3
    head, tail = _edges(rng, n_cols, m)
    caps = rng.uniform(0.0, 1.0, size=m)
    caps[::17] = 0.0  # edges without capacity
    rowmap, counted, n_rows = None, None, n_cols
    if part:
        own = np.sort(rng.choice(n_cols, size=18, replace=False))
        rowmap = np.full(n_cols, -1)
        rowmap[own] = np.arange(own.size)
        counted, n_rows = rng.random(m) < 0.6, own.size
    state = [rng.normal(size=(m, d)) for _ in range(3)]  # U, U+, U0
    X = rng.normal(size=(n_cols, d))
    outs = []
    for compiled in (False, True):
        U, Up, U0 = (a.copy() for a in state)
        DtUp = np.full((n_rows, d), np.nan)
        sweep = EdgeSweep(head, tail, penalty, caps, n_rows, d, rowmap=rowmap, counted=counted, compiled=compiled,
                          threads=threads)
        assert sweep.compiled is compiled and sweep.threads == (threads if compiled else 1)
        residual = sweep(move, U, Up, U0, X, 0.4, DtUp, 0.75, 0.25, 0.9)
        outs.append((U, Up, U0, DtUp, residual))
    for x, y in zip(outs[0], outs[1]):
        np.testing.assert_allclose(y, x, rtol=1e-12, atol=1e-12)
    U, Up, U0, DtUp, residual = outs[1]
    # the reference operations written out: move, step, projection, divergence, residual
    Ur, Upr, U0r = (a.copy() for a in state)
    if move == MOVE_HALPERN:
        Ur = 0.75 * (1.9 * Upr - 0.9 * Ur) + 0.25 * U0r
    elif move == MOVE_RESTART:
        Ur, U0r = Upr.copy(), Upr.copy()
    D = sp.csr_matrix((np.tile([1.0, -1.0], m), (np.repeat(np.arange(m), 2), np.column_stack([head, tail]).ravel())),
                      shape=(m, n_cols))
    step = penalty._prox_conjugate(Ur + D @ X, 0.4, caps)
    Dt = D.T.tocsr() if rowmap is None else D.T.tocsr()[np.flatnonzero(rowmap >= 0)]
    np.testing.assert_allclose(U, Ur, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(U0, U0r, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(Up, step, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(DtUp, Dt @ step, rtol=1e-12, atol=1e-12)
    mask = np.ones(m, bool) if counted is None else counted
    assert residual == pytest.approx(float(np.sum((Ur - step)[mask] ** 2)), rel=1e-12)


def test_declared_row_projection_is_the_penalty_prox():
    """The contract behind ``conjugate_prox_rows``: the kernel's row projection of a declaring
    penalty is its ``_prox_conjugate`` (zero capacities, rows inside and outside the ball)."""
    rng = np.random.default_rng(3)
    m, d = 400, 4
    head, tail = _edges(rng, 50, m)
    caps = rng.uniform(0.0, 2.0, size=m)
    caps[::9] = 0.0
    declaring = [cls() for cls in (g.Norm2, g.Norm1, g.SquaredNorm2)]
    assert [p.conjugate_prox_rows for p in declaring] == ["l2_ball", "box", "shrink"]
    for penalty in declaring:
        U = rng.normal(size=(m, d)) * rng.uniform(0.0, 3.0, size=(m, 1))
        Up = np.empty_like(U)
        EdgeSweep(head, tail, penalty, caps, 50, d, compiled=True)(MOVE_NONE, U.copy(), Up, U.copy(),
                                                                   np.zeros((50, d)), 0.3, np.empty((50, d)))
        np.testing.assert_allclose(Up, penalty._prox_conjugate(U.copy(), 0.3, caps), rtol=1e-14, atol=1e-15)
        # a non-finite iterate stays non-finite (the solver's finiteness check must see it)
        U[0, 0] = np.nan
        EdgeSweep(head, tail, penalty, caps, 50, d, compiled=True)(MOVE_NONE, U.copy(), Up, U.copy(),
                                                                   np.zeros((50, d)), 0.3, np.empty((50, d)))
        assert np.isnan(Up[0]).any()
    assert g.QuadraticForm(np.eye(d)).conjugate_prox_rows is None  # a d x d map per row


def test_threads_only_in_the_main_thread():
    """The threaded build runs in the main thread only (numba's workqueue layer must not be entered
    from two threads; a Dask worker's thread runs its part serially)."""
    import threading

    import numba

    rng = np.random.default_rng(0)
    head, tail = _edges(rng, 10, 20)
    assert jit.parallel_threads() == numba.get_num_threads()
    assert EdgeSweep(head, tail, g.Norm2(), np.ones(20), 10, 3, compiled=True).threads == numba.get_num_threads()
    seen = {}

    def probe():
        seen["threads"] = jit.parallel_threads()
        seen["sweep"] = EdgeSweep(head, tail, g.Norm2(), np.ones(20), 10, 3, compiled=True).threads

    worker = threading.Thread(target=probe)
    worker.start()
    worker.join()
    assert seen == {"threads": 1, "sweep": 1}


def test_sweep_refusals():
    class Odd(g.Norm2):
        conjugate_prox_rows = "ellipsoid"

    with pytest.raises(ValueError, match=r"conjugate_prox_rows = 'ellipsoid'.*'box', 'l2_ball', 'shrink'"):
        EdgeSweep(np.array([0]), np.array([1]), Odd(), np.ones(1), 2, 1)


def test_graph_incidence_has_plus_one_at_the_first_end():
    """The fast core hands ``edges[:, 0]`` / ``edges[:, 1]`` to the sweep as the +1 / -1 columns."""
    graph, _ = g.graphs.sbm([6, 7], 0.6, 0.2, seed=3)
    X = np.random.default_rng(0).normal(size=(graph.n, 2))
    np.testing.assert_array_equal(graph.incidence @ X, X[graph.edges[:, 0]] - X[graph.edges[:, 1]])


def test_size_rule_picks_the_kernels():
    rng = np.random.default_rng(0)
    head, tail = _edges(rng, 10, 20)
    assert not EdgeSweep(head, tail, g.Norm2(), np.ones(20), 10, 3).compiled  # small: no numba load
    big = jit.MIN_ENTRIES // 3 + 1
    head, tail = _edges(rng, 1000, big)
    assert EdgeSweep(head, tail, g.Norm2(), np.ones(big), 1000, 3).compiled


@pytest.mark.parametrize("m", [None, 1])  # mixed m_i (some < d, some nodes without data); one sample each
@pytest.mark.parametrize("threads", [1, 3])  # the serial build; the threaded one in three chunks
def test_lowrank_prox_kernel_matches_numpy(monkeypatch, m, threads):
    monkeypatch.setattr(jit, "parallel_threads", lambda: threads)
    problem = make_problem("squared_error", "norm2", seed=4, sizes=(20, 20), d=5, m=m)
    loss = problem.loss
    rng = np.random.default_rng(1)
    V, step = rng.normal(size=(loss.n, loss.d)) * 10, rng.uniform(0.01, 5.0, size=loss.n)
    monkeypatch.setattr(jit, "MIN_ENTRIES", 1 << 60)
    expected = loss.prox(V, step)
    monkeypatch.setattr(jit, "MIN_ENTRIES", 0)
    got = loss.prox(np.asfortranarray(V), step)  # any memory layout
    np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("threads", [1, 2])
def test_squared_distance_prox_kernel_matches_numpy(monkeypatch, threads):
    monkeypatch.setattr(jit, "parallel_threads", lambda: threads)
    rng = np.random.default_rng(5)
    loss = g.SquaredDistance(rng.normal(size=(30, 4)))
    V, step = rng.normal(size=(30, 4)) * 10, rng.uniform(0.01, 5.0, size=30)
    expected = loss.prox(V, step)
    np.testing.assert_allclose(expected, (V + 2 * step[:, None] * loss.points) / (1 + 2 * step[:, None]), rtol=1e-14)
    monkeypatch.setattr(jit, "MIN_ENTRIES", 0)
    np.testing.assert_allclose(loss.prox(np.asfortranarray(V), step), expected, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("penalty", ["norm2", "norm1", "squared_norm2"])
def test_solver_with_kernels_matches_clarabel(monkeypatch, penalty):
    """The whole loop with the compiled kernels forced on: optimal, honest, CLARABEL's objective,
    and the iterates of the NumPy path (same iterations, W to 1e-9)."""
    problem = make_problem("squared_error", penalty, seed=2, sizes=(5, 5), d=3, lam=0.3)
    numpy_path = g.solve(problem, method="halpern", tol=1e-8)
    monkeypatch.setattr(jit, "MIN_ENTRIES", 0)
    fast = g.solve(problem, method="halpern", tol=1e-8)
    ref = solve_primal(problem, "CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    assert fast.status == "optimal" and fast.rel_gap <= 1e-8
    assert abs(fast.primal - ref.primal) <= 1e-7 * (1 + abs(ref.primal))
    assert fast.gap >= fast.primal - ref.primal - 1e-10 * (1 + abs(ref.primal))
    assert fast.iterations == numpy_path.iterations
    np.testing.assert_allclose(fast.W, numpy_path.W, atol=1e-9)


@pytest.mark.parametrize("threads", [1, 2])
def test_node_sweeps_match_numpy(threads):
    """Each compiled node update (serial and threaded build) against the NumPy expression it
    replaces (which small problems run)."""
    from gtvcvx.solvers._node_kernels import NodeSweeps

    rng = np.random.default_rng(7)
    n, d = 50, 4
    W, Wp, W0, DtU, DtUp, DtU0 = (rng.normal(size=(n, d)) for _ in range(6))
    tau = rng.uniform(0.1, 2.0, size=n)
    numpy_path, compiled = NodeSweeps(n, d, compiled=False), NodeSweeps(n, d, compiled=True, threads=threads)
    assert not numpy_path.compiled and compiled.compiled and not NodeSweeps(n, d).compiled
    for name, args in (("step", (W, DtU, tau, tau[:, None])), ("extrapolate", (Wp, W, 0.7)),
                       ("residual", (W, Wp, 1.0 / tau, DtU, DtUp)), ("halpern", (Wp, W.copy(), W0, 0.6, 0.4, 0.9))):
        expected = getattr(numpy_path, name)(*args)
        np.testing.assert_allclose(getattr(compiled, name)(*args), expected, rtol=1e-13, atol=1e-13, err_msg=name)
    X_numpy, X_compiled = DtU.copy(), DtU.copy()
    numpy_path.halpern_inplace(DtUp, X_numpy, DtU0, 0.6, 0.4, 0.9)
    compiled.halpern_inplace(DtUp, X_compiled, DtU0, 0.6, 0.4, 0.9)
    np.testing.assert_allclose(X_compiled, X_numpy, rtol=1e-13, atol=1e-13)
    assert np.abs(X_numpy - DtU).max() > 0.1  # (the update did something)
    # the Halpern point of W lands in W's own buffer, never in W+ or W0
    Wc = W.copy()
    assert compiled.halpern(Wp, Wc, W0, 0.6, 0.4, 0.9) is Wc
    assert compiled.halpern(Wp, Wp, W0, 0.6, 0.4, 0.9) is not Wp


def test_compiled_incidence_products_match_the_sparse_ones(monkeypatch):
    from gtvcvx.solvers._edge_kernels import differences, divergence

    problem = make_problem("squared_error", "norm2", seed=6, sizes=(8, 7), d=3)
    rng = np.random.default_rng(2)
    W, U = rng.normal(size=(problem.n, 3)), rng.normal(size=(problem.n_edges, 3))
    D = problem.graph.incidence
    monkeypatch.setattr(jit, "MIN_ENTRIES", 0)
    np.testing.assert_allclose(differences(problem.graph, W), D @ W, rtol=0, atol=1e-14)
    np.testing.assert_allclose(divergence(problem.graph, np.asfortranarray(U)), D.T @ U, rtol=0, atol=1e-13)


def test_certificate_leaves_the_callers_flow_alone():
    from gtvcvx.solvers.certificate import certify_pair

    problem = make_problem("squared_error", "norm2", seed=6, sizes=(8, 7), d=3, lam=0.2)
    U = np.random.default_rng(3).normal(size=(problem.n_edges, 3)) * 10.0  # far outside the capacities
    kept = U.copy()
    cert = certify_pair(problem, np.zeros((problem.n, 3)), U)
    assert np.array_equal(U, kept) and cert.U is not U


def test_squared_distance_kernel_matches_numpy(monkeypatch):
    from gtvcvx.solvers._node_kernels import squared_distance

    rng = np.random.default_rng(9)
    A, B, w = rng.normal(size=(40, 3)), rng.normal(size=(40, 3)), rng.uniform(0.5, 2.0, size=40)
    expected = (np.einsum("nd,nd->", A - B, A - B), np.einsum("nd,nd->n", A - B, A - B) @ w)
    monkeypatch.setattr(jit, "MIN_ENTRIES", 0)
    assert squared_distance(A, B) == pytest.approx(expected[0], rel=1e-13)
    assert squared_distance(A, B, w) == pytest.approx(expected[1], rel=1e-13)


def test_gradient_kernel_matches_numpy(monkeypatch):
    problem = make_problem("squared_error", "norm2", seed=4, sizes=(20, 20), d=5, m=None)  # mixed m_i, empty nodes
    loss = problem.loss
    W = np.random.default_rng(3).normal(size=(loss.n, loss.d))
    monkeypatch.setattr(jit, "MIN_ENTRIES", 1 << 60)
    expected = loss.gradient(W)
    monkeypatch.setattr(jit, "MIN_ENTRIES", 0)
    np.testing.assert_array_equal(loss.gradient(W + 0.0), expected)  # same sums, same order


def test_threaded_kernels_survive_a_fork():
    """A process forked after a threaded kernel ran (multiprocessing's default on Linux) runs the
    kernels again: gtvcvx asks numba for a fork-safe threading layer (GNU OpenMP aborts there)."""
    import subprocess
    import sys

    code = """
import multiprocessing as mp, os
os.environ.pop("NUMBA_THREADING_LAYER", None)
import numpy as np
import gtvcvx as g
from gtvcvx.solvers._edge_kernels import laplacian_product
import gtvcvx._jit as jit
jit.MIN_ENTRIES = 0
graph = g.graphs.sbm([40, 40], 0.3, 0.05, seed=0).graph
x = np.arange(graph.n, dtype=float)
expected = laplacian_product(graph, x)
def child(queue):
    queue.put(float(np.abs(laplacian_product(graph, x) - expected).max()))
if __name__ == "__main__":
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    p = ctx.Process(target=child, args=(queue,))
    p.start(); p.join(120)
    assert p.exitcode == 0, p.exitcode
    assert queue.get(timeout=5) == 0.0
"""
    env = {k: v for k, v in __import__("os").environ.items() if k != "NUMBA_THREADING_LAYER"}
    env["NUMBA_NUM_THREADS"] = "2"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_serial_and_threaded_builds_keep_their_own_cache(tmp_path):
    """numba keys its disk cache by name, signature and bytecode, not by ``parallel``: the threaded
    build of a kernel must not load the serial build's machine code (or the reverse) from a cache
    that the other filled first. Two fresh processes on one empty cache: the first compiles the
    serial edge kernels, the second must compile the threaded ones (no cache hit) and run threaded."""
    import subprocess
    import sys

    code = """
import sys
import numpy as np
from gtvcvx.solvers._edge_kernels import _load
move, gather, scatter = _load(sys.argv[1] == "threaded")
X = np.arange(12.0).reshape(6, 2)
head, tail = np.array([0, 1, 2, 3], dtype=np.int64), np.array([1, 2, 3, 5], dtype=np.int64)
out = np.empty((4, 2))
gather(X, head, tail, out)
assert np.array_equal(out, X[head] - X[tail])
stats = gather.stats
print(sum(stats.cache_hits.values()), sum(stats.cache_misses.values()), gather.targetoptions.get("parallel"))
"""
    env = dict(__import__("os").environ, NUMBA_CACHE_DIR=str(tmp_path), NUMBA_NUM_THREADS="2")

    def run(build):
        done = subprocess.run([sys.executable, "-c", code, build], env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.split()

    def compiled(build):  # (cache hits, cache misses, parallel) of the gather
        hits, misses, parallel = run(build)
        return int(hits) > 0, int(misses) > 0, parallel

    assert compiled("serial") == (False, True, "False")  # compiled, into the empty cache
    assert compiled("threaded") == (False, True, "True")  # compiled, not the serial code from the cache
    assert compiled("threaded") == (True, False, "True")  # and cached under its own name
    assert compiled("serial") == (True, False, "False")


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", ["norm2", "norm1", "squared_norm2", "group_norm2"])
def test_compiled_domain_projection_matches_numpy(monkeypatch, threads, name):
    """``project_conjugate_domain`` of large flows (one compiled pass for the declared l2-ball and
    box projections) equals the NumPy path: rows inside and outside, zero capacities, into a
    caller's buffer or a new array, the caller's flows untouched."""
    penalty = PENALTY_CASES[name]
    rng = np.random.default_rng(4)
    m, d = 300, 3
    U = rng.normal(size=(m, d)) * rng.uniform(0.0, 3.0, size=(m, 1))
    caps = rng.uniform(0.0, 2.0, size=m)
    caps[::11] = 0.0
    caps.flags.writeable = False
    kept = U.copy()
    expected = penalty.project_conjugate_domain(U, caps)
    monkeypatch.setattr(jit, "parallel_threads", lambda: threads)
    monkeypatch.setattr(jit, "MIN_ENTRIES", 0)
    got = penalty.project_conjugate_domain(U, caps)
    buffer = np.full((m, d), 7.0)
    into = penalty.project_conjugate_domain(np.asfortranarray(U), caps, out=buffer)
    assert into is buffer
    for result in (got, into):
        np.testing.assert_allclose(result, expected, rtol=1e-14, atol=1e-15)
    assert np.array_equal(U, kept) and np.abs(expected - U).max() > 0.1  # (something was projected)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", sorted(PENALTY_CASES))
def test_compiled_edge_terms_match_the_penalty(monkeypatch, threads, name):
    """The certificate's edge values and Fenchel-Young terms gathered on the fly (one compiled pass
    for the l2 and l1 norms) equal the penalty's own methods on ``Z = D W``: flows inside their
    balls, on them, beyond them (``+inf``) and NaN (non-finite), zero capacities; other penalties
    keep the NumPy form. The edge difference norms likewise."""
    from gtvcvx.solvers._edge_kernels import difference_norms, edge_norm_terms

    penalty = PENALTY_CASES[name]
    problem = make_problem("squared_error", "norm2", seed=3, sizes=(9, 8), d=3)
    rng = np.random.default_rng(5)
    m, d = problem.n_edges, 3
    W = rng.normal(size=(problem.n, d))
    caps = problem.capacities.copy()
    caps[::7] = 0.0
    U = rng.normal(size=(m, d))
    if penalty.is_norm:
        U = penalty.project_conjugate_domain(U, caps)
        U[1] *= 1.0 + 1e-12  # on the ball's boundary to rounding: inside (CAPACITY_RTOL)
        U[2] = U[2] * 1.01 + 1e-3  # outside
        U[3, 0] = np.nan
    Z = problem.graph.incidence @ W
    values, gaps = penalty._edge_values(Z, caps), penalty._edge_fenchel_young(Z, U, caps)
    monkeypatch.setattr(jit, "parallel_threads", lambda: threads)
    with np.errstate(invalid="ignore"):  # compiled=True: at any size, as MIN_ENTRIES = 0 gives
        asked = edge_norm_terms(problem.graph, W, U, caps, penalty, compiled=True)
    monkeypatch.setattr(jit, "MIN_ENTRIES", 0)
    with np.errstate(invalid="ignore"):
        got_values, got_gaps = edge_norm_terms(problem.graph, W, U, caps, penalty)
        numpy_form = edge_norm_terms(problem.graph, W, U, caps, penalty, compiled=False)
    np.testing.assert_array_equal(asked[0], got_values)
    np.testing.assert_array_equal(asked[1], got_gaps)
    np.testing.assert_array_equal(numpy_form[0], values)
    np.testing.assert_array_equal(numpy_form[1], gaps)
    np.testing.assert_allclose(got_values, values, rtol=1e-14, atol=1e-15)
    finite = np.isfinite(gaps)
    assert np.array_equal(np.isfinite(got_gaps), finite)
    np.testing.assert_allclose(got_gaps[finite], gaps[finite], rtol=1e-13, atol=1e-14)
    if penalty.is_norm:
        assert finite[1] and not finite[2] and not finite[3]
        assert got_gaps[2] == np.inf and finite.sum() == m - 2
    np.testing.assert_allclose(difference_norms(problem.graph, W), np.linalg.norm(Z, axis=1), rtol=1e-14)


@pytest.mark.parametrize("relabel, large", [(False, False), (True, False), (False, True), (True, True)])
def test_warm_up_loads_every_specialization_a_compiled_solve_uses(monkeypatch, relabel, large):
    """After ``warm_compiled_kernels`` a solve on the compiled path compiles nothing: every argument
    type it passes (read-only capacities, samples, edge ends; a large solve's single-precision flow
    anchor) was warmed. A missed one is compiled inside the first timed solve (4 s at 10^7 edges:
    read-only capacities in the edge projection)."""
    import gtvcvx.solvers.gtv as core
    from gtvcvx.bench.harness import compiled_kernels, warm_compiled_kernels
    from gtvcvx.clustering import clustering_problem
    from gtvcvx.solvers import _reorder

    warm_compiled_kernels()
    before = {key: set(kernel.signatures) for key, kernel in compiled_kernels().items()}
    monkeypatch.setattr(jit, "MIN_ENTRIES", 0)
    if large:
        monkeypatch.setattr(core, "LARGE_FLOW_ENTRIES", 0)
    if relabel:  # the fused sweep of graphs relabelled by reverse Cuthill-McKee
        monkeypatch.setattr(core, "locality_order", lambda problem: _reorder.locality_order(problem, force=True))
    rng = np.random.default_rng(0)
    points = rng.normal(size=(120, 3)) + 4.0 * rng.integers(0, 3, size=(120, 1))
    problems = [clustering_problem(points, 0.3, k=6)[0], make_problem("squared_error", "norm2", seed=1, sizes=(20, 20)),
                make_problem("logistic", "norm1", seed=2, sizes=(20, 20))]
    for problem in problems:
        result = g.solve(problem, tol=1e-5, method="halpern", max_iter=200)
        assert result.info.get("node_order") == ("reverse_cuthill_mckee" if relabel else None)
    compiled = {key: sorted(map(str, set(kernel.signatures) - before[key]))
                for key, kernel in compiled_kernels().items()}
    assert not {key: new for key, new in compiled.items() if new}


def test_prefetch_is_compiled_and_changes_nothing():
    """The prefetch hint compiles to LLVM's intrinsic here (not the no-op fallback, which would
    silently cost the sweeps 20-30 %), and a kernel that issues it for every row (also past the
    last one, which a prefetch may touch) computes what it computes without."""
    import numba

    prefetch = jit._prefetch_intrinsic()
    assert not isinstance(prefetch, numba.core.registry.CPUDispatcher)

    def gather(X, rows):
        out = np.empty((rows.size, X.shape[1]))
        for e in range(rows.size):
            prefetch(X, rows[min(e + 3, rows.size - 1)])
            prefetch(X, X.shape[0])  # one row past the end: a hint, never a fault
            out[e] = X[rows[e]]
        return out

    X = np.random.default_rng(0).normal(size=(50, 7))
    rows = np.random.default_rng(1).integers(0, 50, size=300)
    np.testing.assert_array_equal(numba.njit(gather)(X, rows), X[rows])
    assert jit.prefetch_row(X, 3) is None  # plain Python: nothing
