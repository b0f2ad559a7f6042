"""The Dask backend: same iterates and certificate as the single-process solver, data that stays on
its worker, a worker killed mid-solve, METIS layouts and clear refusals."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

import gtvcvx
from gtvcvx.solvers import certificate
from gtvcvx.solvers._partition import part_layouts, partition_graph
from gtvcvx.solvers.distributed import PartData, SiteProblem

distributed = pytest.importorskip("dask.distributed")


def _regression(n_blocks=3, size=30, d=3, m=6, lam=0.05, seed=0, penalty=None):
    graph = gtvcvx.graphs.sbm([size] * n_blocks, 0.3, 0.02, seed=seed).graph
    rng = np.random.default_rng(seed)
    truth = np.repeat(rng.standard_normal((n_blocks, d)), size, axis=0)
    X = [rng.standard_normal((m, d)) for _ in range(graph.n)]
    y = [x @ w + 0.1 * rng.standard_normal(m) for x, w in zip(X, truth)]
    return gtvcvx.GTVProblem(graph, gtvcvx.SquaredError(X, y), penalty or gtvcvx.Norm2(), lam)


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def _polish_off(monkeypatch):
    # the single-process solver's active-set polish is a global solve the dask backend does not
    # run, nor does its projection restrict corrections to the faces of the capacity balls
    monkeypatch.setattr(gtvcvx.solvers.gtv, "polish_applies", lambda problem: False)
    monkeypatch.setattr(certificate, "CORRECT_ON_FACES", False)


def test_unreachable_tol_stops_where_the_single_process_run_does(client, monkeypatch):
    """A tol float64 cannot certify ends as ``inaccurate`` once the gap is down to rounding (the
    shared rule, ``gtvcvx.results.tol_out_of_reach``), at the single-process run's iteration,
    not after max_iter."""
    _polish_off(monkeypatch)
    problem = _regression(lam=0.05)
    local = gtvcvx.solve(problem, tol=1e-16, method="halpern", max_iter=20_000)
    dist = gtvcvx.solve(problem, tol=1e-16, backend="dask", client=client, n_parts=2, max_iter=20_000)
    assert local.status == dist.status == "inaccurate"
    assert dist.iterations == local.iterations < 20_000
    assert "float64 cannot certify tol = 1e-16" in dist.message


def test_labels_far_below_1_are_solved_in_scaled_units_as_in_one_process(client, monkeypatch):
    """Labels at 1e-3 (P(0) ~ 1e-4): the relative gap then acts as an absolute one, and the Dask backend
    (without the single process's label scaling) stopped `optimal` at iteration 50 with gap / P = 1.9e-3
    here (tol = 1e-8). It now solves the same power-of-two-scaled problem as one process: same iterates
    (231), gap / P = 3.8e-8, the result in the caller's units."""
    _polish_off(monkeypatch)
    problem = _regression(lam=0.05)
    small = gtvcvx.GTVProblem(problem.graph, gtvcvx.SquaredError(problem.loss.X, [1e-3 * y for y in problem.loss.y]),
                              problem.penalty, 0.05e-3)
    local = gtvcvx.solve(small, tol=1e-8, method="halpern")
    seen = []
    dist = gtvcvx.solve(small, tol=1e-8, backend="dask", client=client, n_parts=2,
                        callback=lambda info: seen.append((info.W, info.certificate.primal)))
    assert local.status == dist.status == "optimal"
    assert dist.info["label_scale"] == local.info["label_scale"] >= 2.0**6
    assert dist.iterations == local.iterations
    np.testing.assert_allclose(dist.W, local.W, rtol=0, atol=1e-13)
    assert dist.gap <= 1e-6 * dist.primal  # relative to the objective, not to 1
    assert abs(dist.primal - small.objective(dist.W)) <= 1e-12 * dist.primal
    assert seen and all(W is None and abs(primal - dist.primal) <= 0.5 * dist.primal for W, primal in seen[-1:])


@pytest.mark.parametrize("penalty", [gtvcvx.Norm2(), gtvcvx.Norm1(), gtvcvx.SquaredNorm2()])
def test_follows_the_single_process_iterates(client, monkeypatch, penalty):
    _polish_off(monkeypatch)
    problem = _regression(penalty=penalty, lam=0.05 if penalty.is_norm else 0.5)
    local = gtvcvx.solve(problem, tol=1e-8, method="halpern")
    dist = gtvcvx.solve(problem, tol=1e-8, backend="dask", client=client, n_parts=2)
    assert local.status == dist.status == "optimal"
    assert dist.iterations == local.iterations
    assert dist.info["restarts"] == local.info["restarts"]
    np.testing.assert_allclose(dist.W, local.W, rtol=0, atol=1e-10)
    np.testing.assert_allclose(dist.U, local.U, rtol=0, atol=1e-10)
    assert abs(dist.gap - local.gap) <= 1e-10 * (1 + abs(local.primal))
    assert abs(dist.primal - local.primal) <= 1e-12 * (1 + abs(local.primal))
    # the certificate is an honest bound: the reference optimum lies within it
    assert dist.primal - problem.objective(local.W) <= 1e-12 * (1 + abs(local.primal))
    assert dist.info["cut_edges"] > 0 and dist.info["n_parts"] == 2 and dist.info["partition"] == "metis"
    assert dist.info["bytes_per_iteration"] > 0
    np.testing.assert_allclose(dist.info["node_gaps"].sum() + dist.info["edge_gaps"].sum(), dist.gap, rtol=1e-6)


def _few_samples(kind, seed=1):
    """m_i < d, nodes without data, or a logistic loss: certificates that need the conservation
    projection (CG across parts) or the residual allowance (partial sums across parts)."""
    graph = gtvcvx.graphs.sbm([30, 30, 30], 0.3, 0.02, seed=seed).graph
    rng = np.random.default_rng(seed)
    d = 3
    truth = np.repeat(rng.standard_normal((3, d)), 30, axis=0)
    counts = np.full(graph.n, {"few": 2, "nodata": 4, "logistic": 8}[kind])
    if kind == "nodata":
        counts[::7] = 0
    X = [rng.standard_normal((k, d)) for k in counts]
    if kind == "logistic":
        y = [np.where(x @ w + 0.5 * rng.standard_normal(len(x)) >= 0, 1.0, -1.0) for x, w in zip(X, truth)]
        return gtvcvx.GTVProblem(graph, gtvcvx.Logistic(X, y), gtvcvx.Norm2(), 0.05)
    y = [x @ w + 0.1 * rng.standard_normal(len(x)) for x, w in zip(X, truth)]
    return gtvcvx.GTVProblem(graph, gtvcvx.SquaredError(X, y), gtvcvx.Norm2(), 0.05)


@pytest.mark.parametrize("kind", ["few", "nodata", "logistic"])
def test_projection_and_allowance_across_parts(client, monkeypatch, kind):
    _polish_off(monkeypatch)
    # the distributed certificate projects once (no alternating rounds, no factorization):
    # compare with the single-process certificate configured alike
    monkeypatch.setattr(certificate, "MAX_ROUNDS", 1)
    monkeypatch.setattr(certificate, "FACTOR_MAX_UNKNOWNS", 0)
    # nor the spanning tree's budget (one process only: subtree sums across parts are not built)
    monkeypatch.setattr(certificate._SubtreeSums, "build", classmethod(lambda cls, *args: None))
    problem = _few_samples(kind)
    local = gtvcvx.solve(problem, tol=1e-6, method="halpern")
    dist = gtvcvx.solve(problem, tol=1e-6, backend="dask", client=client, n_parts=2)
    assert local.status == dist.status == "optimal"
    assert dist.iterations == local.iterations
    np.testing.assert_allclose(dist.W, local.W, rtol=0, atol=1e-10)
    assert abs(dist.rel_gap - local.rel_gap) <= 1e-6 * local.rel_gap
    projected = local.history.projection_iterations.sum()
    assert dist.history.projection_iterations.sum() == projected
    assert (projected > 0) == (kind != "logistic")
    np.testing.assert_allclose(dist.history.conservation, local.history.conservation, rtol=1e-6, atol=1e-14)
    if kind == "logistic":  # rounding-level residuals, paid for by the allowance
        assert dist.residuals["residual_allowance"] > 0
    # honest: the reference optimum is within the certified gap
    reference = gtvcvx.solve(problem, tol=1e-10, method="halpern")
    assert dist.primal - reference.primal <= dist.gap + 1e-12


@pytest.mark.parametrize("exchange", ["direct", "client"])
def test_three_parts_and_plain_pdhg(client, monkeypatch, exchange):
    # three parts on two workers: two of them exchange rows inside one worker
    _polish_off(monkeypatch)
    problem = _regression(lam=0.2)
    local = gtvcvx.solve(problem, tol=1e-6, method="pdhg", max_iter=4000)
    dist = gtvcvx.solve(problem, tol=1e-6, method="pdhg", max_iter=4000, backend="dask", client=client, n_parts=3,
                        exchange=exchange)
    assert dist.iterations == local.iterations and dist.status == local.status
    np.testing.assert_allclose(dist.W, local.W, rtol=0, atol=1e-10)
    assert dist.info["n_parts"] == 3
    # every boundary row crosses once part to part, twice through the client
    halo_rows = dist.info["cut_edges"]  # at least one row per cut edge end point is sent
    assert dist.info["bytes_total"] >= halo_rows * problem.d * 8


def test_site_data_never_reaches_the_client(client, tmp_path, monkeypatch):
    _polish_off(monkeypatch)
    problem = _regression()
    labels, _ = partition_graph(problem.graph, 2)
    parts = []
    for p in range(2):
        nodes = np.flatnonzero(labels == p)
        loss = problem.loss.subset(nodes)
        node = np.repeat(nodes, loss.counts)
        path = tmp_path / f"site{p}.npz"
        np.savez(path, X=loss.X_all, y=loss.y_all, node=node)
        parts.append(PartData(nodes=nodes, path=str(path), loss="squared_error"))
    sites = SiteProblem(problem.graph, problem.penalty, problem.lam, parts)
    opened = []
    real_load = np.load

    def spy(path, *args, **kwargs):  # the client process must not open a site's file
        opened.append(str(path))
        return real_load(path, *args, **kwargs)

    monkeypatch.setattr(np, "load", spy)
    dist = gtvcvx.solve(sites, tol=1e-8, backend="dask", client=client)
    assert not any("site" in path for path in opened)
    local = gtvcvx.solve(problem, tol=1e-8, method="halpern")
    assert dist.status == "optimal" and dist.info["partition"] == "sites"
    np.testing.assert_allclose(dist.W, local.W, rtol=0, atol=1e-10)
    # the parts ran in the workers' processes
    pids = set(client.run(os.getpid).values())
    assert os.getpid() not in pids


def test_sites_with_labels_far_below_1_are_scaled_on_their_workers(client, tmp_path, monkeypatch):
    """The sites report P(0) of their nodes (a number); the client picks the power of two and each
    site loads its data again with the labels scaled: the one-process iterates, the result in the
    caller's units, and still no site file opened by the client."""
    _polish_off(monkeypatch)
    problem = _regression(lam=0.05)
    small = gtvcvx.GTVProblem(problem.graph, gtvcvx.SquaredError(problem.loss.X, [1e-3 * y for y in problem.loss.y]),
                              problem.penalty, 0.05e-3)
    labels, _ = partition_graph(small.graph, 2)
    parts = []
    for p in range(2):
        nodes = np.flatnonzero(labels == p)
        loss = small.loss.subset(nodes)
        path = tmp_path / f"site{p}.npz"
        np.savez(path, X=loss.X_all, y=loss.y_all, node=np.repeat(nodes, loss.counts))
        parts.append(PartData(nodes=nodes, path=str(path), loss="squared_error"))
    sites = SiteProblem(small.graph, small.penalty, small.lam, parts)
    opened = []
    real_load = np.load
    monkeypatch.setattr(np, "load", lambda path, *a, **k: opened.append(str(path)) or real_load(path, *a, **k))
    seen = []
    dist = gtvcvx.solve(sites, tol=1e-8, backend="dask", client=client, callback=lambda info: seen.append(info))
    assert not any("site" in path for path in opened)
    local = gtvcvx.solve(small, tol=1e-8, method="halpern")
    assert local.status == dist.status == "optimal"
    assert dist.info["label_scale"] == local.info["label_scale"] >= 2.0**6
    assert dist.iterations == local.iterations
    np.testing.assert_allclose(dist.W, local.W, rtol=0, atol=1e-13)
    assert dist.gap <= 1e-6 * dist.primal and abs(dist.primal - small.objective(dist.W)) <= 1e-12 * dist.primal
    assert seen and abs(seen[-1].certificate.primal - dist.primal) <= 0.5 * dist.primal  # caller's units


def test_a_component_whose_parts_are_each_separable_is_bounded_from_all_its_samples(client, monkeypatch):
    """Logistic samples with positive labels in one part and negative ones in the other: each part's
    half-spaces bound nothing (its share is separable), the whole does. Each part's box was all
    the Dask certificate had, so the residual allowance was infinite and the dual -inf at 139
    check-points (certified at iteration 2,120, by a chance exact residual); the client holds a
    GTVProblem's data anyway and now bounds the component from all of it, as one process does."""
    _polish_off(monkeypatch)
    X = [np.array([[1.0, 0.5]]), np.array([[1.0, -0.5]]), np.array([[1.0, 0.3]]), np.array([[1.0, -0.2]])]
    y = [np.array([1.0]), np.array([1.0]), np.array([-1.0]), np.array([-1.0])]
    problem = gtvcvx.GTVProblem(gtvcvx.graphs.chain(4), gtvcvx.Logistic(X, y), gtvcvx.Norm2(), lam=0.5)
    local = gtvcvx.solve(problem, tol=1e-8, method="halpern")
    dist = gtvcvx.solve(problem, tol=1e-8, backend="dask", client=client, partition=np.array([0, 0, 1, 1]))
    assert local.status == dist.status == "optimal"
    assert dist.iterations == local.iterations < 500
    assert np.isfinite(dist.history["dual"]).all() and dist.residuals["estimated_allowance"] == 0.0


def test_local_learning_is_certified_on_dask_as_in_one_process(client, monkeypatch):
    """``lam = 0`` with the Huber loss: each part's nodes took the zero dual point wherever the flow was zero,
    i.e. everywhere, so the dual stayed 0.11 below P = 0.83 until the time limit; the zero point is now the
    zero-flow fallback's only, and the loss's own dual points certify at once."""
    _polish_off(monkeypatch)
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(5, 2)) for _ in range(6)]
    y = [rng.normal(size=5) for _ in range(6)]
    problem = gtvcvx.GTVProblem(gtvcvx.graphs.chain(6), gtvcvx.Huber(X, y), gtvcvx.Norm2(), lam=0.0)
    dist = gtvcvx.solve(problem, tol=1e-6, backend="dask", client=client, n_parts=2, time_limit=60)
    local = gtvcvx.solve(problem, tol=1e-6)
    assert dist.status == "optimal" and dist.rel_gap <= 1e-6
    assert dist.dual <= local.primal + 1e-9 and abs(dist.primal - local.primal) <= 1e-6 * (1 + local.primal)


@pytest.mark.slow  # ~12 s: a lost neighbour is declared after the 10 s push timeout
def test_a_killed_worker_does_not_lose_the_solve(tmp_path, monkeypatch):
    _polish_off(monkeypatch)
    problem = _regression(lam=0.1, m=4)
    reference = gtvcvx.solve(problem, tol=1e-9, method="halpern")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
    killed = []
    with distributed.Client(cluster) as c:
        def kill_once(info):
            if not killed and info.iteration >= 40:
                pid = sorted(c.run(os.getpid).values())[0]
                os.kill(pid, signal.SIGKILL)
                killed.append((info.iteration, pid))
            return False

        result = gtvcvx.solve(problem, tol=1e-9, backend="dask", client=c, n_parts=2, checkpoint_dir=tmp_path,
                              checkpoint_every=15, callback=kill_once)
    cluster.close()
    assert killed, "the callback never ran"
    assert result.status == "optimal" and result.rel_gap <= 1e-9
    faults = result.info["faults"]
    assert len(faults) == 1 and faults[0]["resumed_from"] <= killed[0][0]
    assert "resumed" in set(result.history.get("event", []))
    # resumed from a checkpoint, the run repeats the same iterates: the same answer
    assert result.iterations == reference.iterations
    np.testing.assert_allclose(result.W, reference.W, rtol=0, atol=1e-10)
    assert oct(os.stat(tmp_path / "part-0.npz").st_mode & 0o777) == "0o644"


def test_layouts_cover_every_edge_once():
    graph = gtvcvx.graphs.sbm([25, 25, 25, 25], 0.3, 0.05, seed=1).graph
    labels, method = partition_graph(graph, 4)
    assert method == "metis" and np.bincount(labels).min() > 0
    layouts = part_layouts(graph, labels)
    counted = np.concatenate([lay.edge_ids[lay.counted] for lay in layouts])
    assert np.array_equal(np.sort(counted), np.arange(graph.n_edges))
    for lay in layouts:  # every edge at an own node is kept, with both ends known locally
        touching = np.flatnonzero(np.isin(graph.edges, lay.own_nodes).any(axis=1))
        assert np.array_equal(lay.edge_ids, touching)
        assert np.array_equal(lay.ext_nodes[lay.edge_ends], graph.edges[lay.edge_ids])
        for q, positions in lay.send.items():  # what p sends q is what q expects from p, in order
            assert np.array_equal(lay.own_nodes[positions], layouts[q].ext_nodes[layouts[q].receive[lay.index]])


def test_without_pymetis_the_fallback_says_so(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_pymetis(name, *args, **kwargs):
        if name == "pymetis":
            raise ImportError("no pymetis")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pymetis)
    graph = gtvcvx.graphs.sbm([20, 20], 0.3, 0.05, seed=0).graph
    with pytest.warns(RuntimeWarning, match="pymetis is not installed"):
        labels, method = partition_graph(graph, 3)
    assert method == "rcm-blocks" and sorted(np.unique(labels)) == [0, 1, 2]


def test_refusals_are_clear(client):
    problem = _regression()
    with pytest.raises(ValueError, match="backend must be 'local' or 'dask'"):
        gtvcvx.solve(problem, backend="spark")
    with pytest.raises(TypeError, match="only apply with backend='dask'"):
        gtvcvx.solve(problem, n_parts=2)
    with pytest.raises(ValueError, match="method 'halpern' or 'pdhg'"):
        gtvcvx.solve(problem, backend="dask", client=client, method="quadratic")
    with pytest.raises(TypeError, match="dask.distributed.Client"):
        gtvcvx.solve(problem, backend="dask", client="tcp://nowhere:1")
    with pytest.raises(ValueError, match="belongs to no part"):
        SiteProblem(problem.graph, problem.penalty, 0.1, [PartData(nodes=np.arange(5), path="x.npz")])
    every = np.arange(problem.graph.n)
    for factor in (0.0, -2.0, float("nan"), float("inf"), "2"):
        with pytest.raises(ValueError, match=r"parts\[0\]\.label_factor must be a finite number > 0"):
            SiteProblem(problem.graph, problem.penalty, 0.1, [PartData(nodes=every, path="x.npz", label_factor=factor)])


def test_site_file_errors_name_the_file(client, tmp_path):
    problem = _regression()
    path = tmp_path / "bad.npz"
    np.savez(path, X=np.zeros((3, 3)))
    sites = SiteProblem(problem.graph, problem.penalty, 0.1,
                        [PartData(nodes=np.arange(problem.n), path=str(path))])
    with pytest.raises(ValueError, match=r"bad\.npz.*missing \['node', 'y'\]"):
        gtvcvx.solve(sites, backend="dask", client=client)


@pytest.mark.slow  # ~12 s: the unreachable scheduler's 10 s connect timeout
def test_cli_solves_a_spec_on_dask(capsys):
    from gtvcvx.cli import main

    spec = str(Path(__file__).resolve().parents[1] / "problems/quick/blobs_knn.toml")
    assert main(["solve", spec, "--backend", "dask", "--parts", "2", "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "optimal" and out["rel_gap"] <= 1e-6
    assert main(["solve", spec, "--parts", "2"]) == 2
    assert "--parts only apply with --backend dask" in capsys.readouterr().err
    assert main(["solve", spec, "--backend", "dask", "--solver", "clarabel"]) == 2
    assert "fast solver" in capsys.readouterr().err
    assert main(["solve", spec, "--backend", "dask", "--scheduler", "tcp://127.0.0.1:9"]) == 2
    assert "cannot connect" in capsys.readouterr().err


@pytest.mark.slow  # ~12 s: a lost neighbour is declared after the 10 s push timeout
def test_a_lost_worker_without_checkpoints_is_a_status(monkeypatch):
    _polish_off(monkeypatch)
    problem = _regression(lam=0.1, m=4)
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
    with distributed.Client(cluster) as c:
        def kill(info):
            if info.iteration >= 20:
                os.kill(sorted(c.run(os.getpid).values())[0], signal.SIGKILL)
                return False
            return False

        result = gtvcvx.solve(problem, tol=1e-12, max_iter=400, backend="dask", client=c, n_parts=2, callback=kill)
    cluster.close()
    assert result.status == "solver_error" and result.W is None
    assert "no checkpoint to resume from (pass checkpoint_dir)" in result.message


def test_scaling_model_states_its_inputs():
    from gtvcvx.bench.distributed import scaling_model

    rows = [{"part": "per_iteration", "workers": 2, "exchange": "direct", "per_iteration_s": 0.1, "n_edges": 1_000_000,
             "cut_edges": 50_000, "bytes_per_iteration": 1e7}]
    text = scaling_model(rows)
    # 0.1 s over 550,000 local edges: 181.8 ns per edge; 200 bytes per cut edge
    assert "181.8 ns per local edge" in text and "cut fraction 0.050" in text and "200 bytes" in text
    line = next(x for x in text.splitlines() if x.startswith("| 0.100"))
    compute = 0.1 / 550_000 * 1e9 / 64 * 1.1  # s per iteration of one part's local edges
    assert abs(float(line.split("|")[2]) - compute) <= 0.006
    assert scaling_model([]) == ""


def test_bench_rows_are_medians_of_alternating_runs():
    from gtvcvx.bench.distributed import bytes_bound, median_rows

    base = {"part": "per_iteration", "target_edges": 10, "workers": 2, "exchange": "direct"}
    runs = [dict(base, per_iteration_s=t, wall_s=w) for t, w in ((3.0, 30), (1.0, 10), (2.0, 20), (float("nan"), 0))]
    runs.append({"part": "per_iteration", "target_edges": 10, "workers": 0, "exchange": None, "per_iteration_s": 5.0})
    rows = median_rows(runs)
    two = next(r for r in rows if r["workers"] == 2)
    assert two["per_iteration_s"] == 2.0 and two["wall_s"] == 20  # the median run, whole (lower middle of 3 finite)
    assert two["per_iteration_runs"] == "3 1 2 nan"
    assert next(r for r in rows if r["workers"] == 0)["per_iteration_runs"] == "5"
    # 5 |E| d + n d (r + 8) doubles
    assert bytes_bound(100, 1000, 10) == 8.0 * (5 * 1000 * 10 + 100 * 10 * 18)


def test_an_objective_that_overflows_float64_stops_the_cluster_too(client):
    """As the single-process core: P(W) not finite at NONFINITE_CHECKS check-points in a row stops
    the run (status solver_error) with the certificate's reason."""
    from gtvcvx.solvers._pdhg_common import NONFINITE_CHECKS

    problem = _regression()
    huge = gtvcvx.GTVProblem(problem.graph, gtvcvx.SquaredError([1e160 * x for x in problem.loss.X],
                                                                [1e160 * y for y in problem.loss.y]),
                             gtvcvx.Norm2(), 1e160)
    with np.errstate(all="ignore"):
        result = gtvcvx.solve(huge, tol=1e-6, backend="dask", client=client, n_parts=2)
    assert result.status == "solver_error" and result.iterations < 500
    assert f"P(W) was not finite at {NONFINITE_CHECKS} check-points in a row" in result.message
    assert "rescale the data" in result.message
