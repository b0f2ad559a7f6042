"""Convex clustering: fast core vs CVXPY, dual-backed labels, lam_max, paths, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import gtvcvx as g
from gtvcvx import data, graphs
from gtvcvx.clustering import (ClusterLabels, cluster_labels, clustering_path, clustering_problem,
                               convex_clustering, lam_max, plot_cluster_tree, plot_clusterpath)
from gtvcvx.metrics import adjusted_rand_index
from gtvcvx.reference.clustering import clustering_statement, solve_clustering
from gtvcvx.solvers import certify_pair

ROOT = Path(__file__).resolve().parents[1]
TIGHT = dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
PENALTIES = [g.Norm2(), g.Norm1()]


def rel(a, b):
    return abs(a - b) / max(1.0, abs(a), abs(b))


def small_points(seed, n=12, d=2):
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=3.0, size=(3, d))
    return centers[rng.integers(0, 3, size=n)] + 0.6 * rng.normal(size=(n, d))


def lam_max_cvxpy(points, graph, penalty):
    """The flow statement of lam_max as a plain CVXPY problem (independent check)."""
    import cvxpy as cp

    labels = graph.components()
    means = np.array([points[labels == c].mean(axis=0) for c in range(labels.max() + 1)])
    B = 2.0 * (points - means[labels])
    U = cp.Variable((graph.n_edges, points.shape[1]))
    t = cp.Variable()
    usage = cp.norm(U, 2, axis=1) if isinstance(penalty, g.Norm2) else cp.max(cp.abs(U), axis=1)
    prob = cp.Problem(cp.Minimize(t), [graph.incidence.T @ U == B, usage <= t * graph.weights])
    prob.solve(solver="CLARABEL", **TIGHT)
    return float(t.value)


# ------------------------------------------------------------------------- fast core vs reference
@pytest.mark.parametrize("penalty", PENALTIES, ids=["norm2", "norm1"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fast_core_matches_clarabel(seed, penalty):
    rng = np.random.default_rng(100 + seed)
    pts = small_points(seed, n=12, d=2 + seed % 2)
    graph = "complete" if seed == 2 else None
    lam = float(rng.uniform(0.05, 0.6))
    fast = convex_clustering(pts, lam, graph=graph, k=4, penalty=penalty, tol=1e-11,
                             solver_options={"max_iter": 200_000})
    ref = convex_clustering(pts, lam, graph=graph, k=4, penalty=penalty, solver="CLARABEL", solver_options=TIGHT)
    assert fast.status == "optimal" and fast.rel_gap <= 1e-11
    assert np.abs(fast.centers - ref.centers).max() < 1e-5          # centers to 1e-5
    assert rel(fast.gtv.primal, ref.gtv.primal) < 1e-6              # objective to 1e-6 relative
    # both certificates are honest: each dual bound is below the other's primal value
    assert fast.gtv.dual <= ref.gtv.primal + 1e-9 and ref.gtv.dual <= fast.gtv.primal + 1e-9
    assert ref.rel_gap < 1e-7  # the reference flow (multiplier of Z = D W) certifies too


def test_reference_statement_returns_a_flow_satisfying_kkt():
    pts = small_points(3, n=10)
    G = graphs.knn(pts, 4)
    r = solve_clustering(pts, 0.3, G, g.Norm2(), "CLARABEL", **TIGHT)
    # stationarity 2 (W - A) + D^T U = 0 and capacities ||U_e|| <= lam A_e
    assert np.abs(2 * (r.W - pts) + G.incidence.T @ r.U).max() < 1e-6
    assert (np.linalg.norm(r.U, axis=1) <= 0.3 * G.weights * (1 + 1e-12)).all()
    # one statement, lam as a parameter: a second lam re-solves without rebuilding
    st = clustering_statement(pts, G)
    a = solve_clustering(pts, 0.3, G, statement=st, **TIGHT)
    b = solve_clustering(pts, 0.6, G, statement=st, **TIGHT)
    assert rel(a.primal, r.primal) < 1e-8 and b.primal > a.primal
    scs = solve_clustering(pts, 0.3, G, solver="SCS")
    assert scs.status == "optimal" and rel(scs.primal, r.primal) < 1e-5


def test_labels_identical_between_solvers_on_separated_blobs():
    ps = data.blobs([10, 12, 8], 2, separation=12.0, std=0.5, seed=3)
    problem, _ = clustering_problem(ps.points, k=4)
    assert problem.graph.n_components == 3  # the blobs are not joined by the 4-NN graph
    lam = 1.5 * lam_max(problem).value  # above every blob's fusion level
    results = [convex_clustering(ps.points, lam, k=4, solver=s, tol=1e-8) for s in ("fast", "CLARABEL", "SCS")]
    for r in results:
        assert r.n_clusters == 3
        assert adjusted_rand_index(ps.truth.labels, r.labels) == 1.0
        assert np.array_equal(r.labels, results[0].labels)  # canonical labels: identical arrays
    # cluster centers = blob means (each blob is a graph component that fused)
    for c in range(3):
        mean = ps.points[ps.truth.labels == c].mean(axis=0)
        assert np.abs(results[0].centers[ps.truth.labels == c] - mean).max() < 1e-4


def test_fast_means_auto_and_method_names_match_gtvcvx_solve():
    pts = small_points(12, n=20)
    fast = convex_clustering(pts, 0.4, k=5, tol=1e-9)  # gtvcvx.solve's "auto": interior-point here
    ssnal = convex_clustering(pts, 0.4, k=5, tol=1e-9, solver="SSNAL")  # gtvcvx names case-insensitive
    halpern = convex_clustering(pts, 0.4, k=5, tol=1e-9, solver="halpern")
    plain = convex_clustering(pts, 0.4, k=5, tol=1e-7, solver="pdhg")  # the paper's Algorithm 1, as in g.solve
    assert fast.gtv.solver == "fast" and ssnal.gtv.solver == "ssnal" and halpern.gtv.solver == "fast"
    assert fast.gtv.info["method"] == "interior" and halpern.gtv.info["method"] == "halpern"
    assert plain.gtv.info["method"] == "pdhg"
    assert all(r.status == "optimal" and r.rel_gap <= 1e-9 for r in (fast, ssnal, halpern))
    assert plain.status == "optimal" and plain.rel_gap <= 1e-7
    assert np.abs(ssnal.centers - halpern.centers).max() < 1e-4 and np.array_equal(ssnal.labels, halpern.labels)
    assert np.array_equal(plain.labels, halpern.labels)
    assert "newton_iterations" in ssnal.gtv.info and ssnal.gtv.history is not None


def test_path_warm_starts_ssnal_and_agrees_with_halpern():
    pts = small_points(13, n=30)
    path = clustering_path(pts, n_lams=6, k=5, tol=1e-7, solver="ssnal")
    assert all(r.gtv.solver == "ssnal" and r.rel_gap <= 1e-7 for r in path.results)
    mid = path.lams[3]
    cold = convex_clustering(pts, mid, k=5, tol=1e-7, polish=False, solver="ssnal")
    assert path.results[3].gtv.info["newton_iterations"] <= cold.gtv.info["newton_iterations"]
    halpern = clustering_path(pts, path.lams, k=5, tol=1e-7, solver="halpern")
    assert all(r.gtv.solver == "fast" for r in halpern.results)
    assert np.abs(halpern.centers - path.centers).max() < 1e-3


# ------------------------------------------------------------------------- cluster extraction
def test_cluster_labels_claims_hold_against_a_precise_solution():
    X = small_points(7, n=40, d=2)
    problem, _ = clustering_problem(X, 0.8, k=6)
    exact = g.solve(problem, tol=1e-13, max_iter=500_000)  # W* to about sqrt(gap) ~ 1e-6
    star = np.linalg.norm(problem.differences(exact.W), axis=1)
    rough = g.solve(problem, tol=1e-5)
    cl = cluster_labels(problem, rough.W, rough.U)
    assert isinstance(cl, ClusterLabels)
    assert cl.n_flow_decided + cl.n_distance_decided == problem.n_edges
    assert cl.n_flow_decided > 0 and cl.n_certified_separated > 0
    slack = np.sqrt(exact.gap) * 2 + 1e-9
    # flow-decided edges: the certified bound ||w*_i - w*_j|| <= gap / (c_e - ||U_e||) <= tol holds
    assert (star[cl.edge_rule == 1] <= cl.tol + slack).all()
    # certified separated edges really are separated at the optimum
    assert (star[cl.edge_rule == 0] > 0).all()
    # every certified upper bound holds
    assert (star <= cl.edge_bound + slack).all()
    # without a flow: distance test only
    only_distance = cluster_labels(problem, rough.W)
    assert only_distance.n_flow_decided == 0 and only_distance.n_distance_decided == problem.n_edges
    # a precise pair certifies almost every edge
    precise = cluster_labels(problem, exact.W, exact.U)
    assert precise.n_uncertain <= 0.05 * problem.n_edges


def test_cluster_labels_does_not_trust_the_flow_it_is_given():
    X = small_points(8, n=20)
    problem, _ = clustering_problem(X, 0.5, k=5)
    r = g.solve(problem, tol=1e-8)
    bad = r.U * 3.0  # outside the capacity balls: projected and certified, not believed
    cl = cluster_labels(problem, r.W, bad)
    good = cluster_labels(problem, r.W, r.U)
    assert np.isfinite(cl.gap) and cl.gap >= good.gap
    with pytest.raises(ValueError, match="U"):
        cluster_labels(problem, r.W, r.U[:-1])
    with pytest.raises(ValueError, match="norm penalty"):
        cluster_labels(problem.__class__(problem.graph, problem.loss, g.SquaredNorm2(), 0.5), r.W)


# ------------------------------------------------------------------------- lam_max
@pytest.mark.parametrize("penalty", PENALTIES, ids=["norm2", "norm1"])
@pytest.mark.parametrize("kind", ["knn", "complete"])
def test_lam_max_matches_the_conic_statement(kind, penalty):
    pts = small_points(11, n=14, d=3)
    graph = graphs.knn(pts, 4) if kind == "knn" else graphs.complete(14)
    lm = lam_max(pts, graph, penalty)
    assert lm.status == "optimal" and lm.lower <= lm.upper and lm.rel_width <= 1e-7
    assert rel(lm.value, lam_max_cvxpy(pts, graph, penalty)) < 1e-6
    # the returned flow proves the upper bound: divergence 2 (A - component mean), capacities lam_max A_e
    labels = graph.components()
    B = 2 * (pts - np.array([pts[labels == c].mean(axis=0) for c in range(labels.max() + 1)])[labels])
    assert np.abs(graph.incidence.T @ lm.flow - B).max() < 1e-9
    assert (penalty.dual_norms(lm.flow) <= lm.upper * graph.weights * (1 + 1e-12)).all()


def test_lam_max_on_a_tree_is_exact():
    pts = np.random.default_rng(4).normal(size=(9, 2))
    G = graphs.chain(9, 2.0)
    lm = lam_max(pts, G)
    B = 2 * (pts - pts.mean(axis=0))
    prefix = np.linalg.norm(np.cumsum(B, axis=0)[:-1], axis=1) / 2.0  # flow on edge (k, k+1) = B(0..k)
    assert lm.status == "exact" and lm.method == "tree" and lm.lower == lm.upper
    assert rel(lm.value, prefix.max()) < 1e-12


@pytest.mark.parametrize("penalty", PENALTIES, ids=["norm2", "norm1"])
def test_lam_max_is_the_fusion_threshold(penalty):
    pts = small_points(5, n=16, d=2)
    problem, _ = clustering_problem(pts, 1.0, k=5, penalty=penalty)
    lm = lam_max(problem)
    mean = np.broadcast_to(pts.mean(axis=0), pts.shape)
    if problem.graph.n_components == 1:
        # at lam_max, (W = mean, U = flow) is an optimal pair: the certified gap is rounding
        cert = certify_pair(problem.with_lam(lm.upper), mean, lm.flow)
        assert cert.gap <= 1e-10 * (1 + cert.primal)
    for solver in ("fast", "CLARABEL"):
        above = convex_clustering(pts, lm.value * 1.001, k=5, penalty=penalty, solver=solver, tol=1e-10,
                                  solver_options=None if solver == "fast" else TIGHT)
        assert above.n_clusters == problem.graph.n_components
    below_problem = problem.with_lam(lm.lower * 0.98)
    below = solve_clustering(pts, below_problem.lam, problem.graph, penalty, "CLARABEL", **TIGHT)
    cl = cluster_labels(below_problem, below.W, below.U)
    assert cl.n_clusters >= problem.graph.n_components + 1
    assert cl.n_certified_separated >= 1  # separation proved, not guessed


def test_lam_max_handles_extreme_weight_ranges():
    # Gaussian weights of a far outlier underflow towards 1e-100: contraction keeps the bracket exact
    rng = np.random.default_rng(0)
    pts = np.vstack([rng.normal(size=(30, 2)), [[10.0, 10.0]]])
    G = graphs.knn(pts, 5, phi=2.7)
    assert G.weights.max() / G.weights.min() > 1e20
    lm = lam_max(pts, G)
    assert lm.status in ("optimal", "exact") and lm.rel_width <= 1e-7
    B = 2 * (pts - pts.mean(axis=0))
    assert np.abs(G.incidence.T @ lm.flow - B).max() <= 1e-9 * np.abs(B).max()


def test_snapping_certifies_large_lam():
    # the weights span 1e-12..1, so lam_max ~ 6e11; at lam ~ 1e9 rounding-level differences between
    # fused centers cost lam A_e 1e-16 per edge, about the whole gap budget: the front end snaps the
    # centers of each cluster to one value and re-certifies (the certificate is recomputed)
    pts = small_points(4, n=20, d=3)
    res = convex_clustering(pts, 1.65e9, k=5, tol=1e-7, solver="halpern")
    assert res.status == "optimal" and res.rel_gap <= 1e-7 and res.gtv.info.get("polished")
    assert convex_clustering(pts, 1.65e9, k=5, tol=1e-7).rel_gap <= 1e-7  # auto (interior-point)
    assert res.gtv.info["unpolished_rel_gap"] > res.rel_gap


# ------------------------------------------------------------------------- paths
@pytest.mark.parametrize("penalty", PENALTIES, ids=["norm2", "norm1"])
def test_path_on_complete_graph_with_uniform_weights_only_merges(penalty):
    # Hocking et al. (2011, l1) and Chi & Steinerberger (2019, l2): no splits with uniform weights
    pts = np.random.default_rng(21).normal(size=(10, 2))
    path = clustering_path(pts, graph="complete", weights="uniform", penalty=penalty, n_lams=14, tol=1e-10,
                           solver_options={"max_iter": 400_000})
    assert all(r.status == "optimal" for r in path.results)
    assert path.is_nested() and path.splits() == []
    counts = path.n_clusters
    assert (np.diff(counts) <= 0).all() and counts[-1] == 1 and counts[0] > 1
    assert np.isclose(path.lams[-1], path.lam_max.value)


def test_path_warm_starts_and_certificates():
    pts = small_points(9, n=30)
    path = clustering_path(pts, n_lams=8, k=5, tol=1e-7)
    assert len(path) == 8 and np.all(np.diff(path.lams) > 0)
    assert (path.rel_gaps <= 1e-7).all()
    # the top of the grid is lam_max: each component fused, certified from the exact warm start
    assert path.n_clusters[-1] == path.problem.graph.n_components and path.results[-1].gtv.iterations <= 5
    table = path.table()
    assert {"lam", "n_clusters", "rel_gap", "n_flow_decided", "n_distance_decided"} <= set(table.columns)
    explicit = clustering_path(pts, [0.5, 0.1, 0.3], k=5)
    assert np.allclose(explicit.lams, [0.1, 0.3, 0.5])
    ref = clustering_path(pts, [0.1, 0.3], k=5, solver="CLARABEL")
    assert np.abs(ref.centers - explicit.centers[:2]).max() < 1e-3


@pytest.mark.parametrize("name", ["iris", "wine"])
def test_real_data_path_records_ari(name, record_property):
    datasets = pytest.importorskip("sklearn.datasets")
    bunch = getattr(datasets, f"load_{name}")()
    # a fixed grid in standardized units (the experiment runs the full grid up to lam_max)
    path = clustering_path(bunch.data, np.geomspace(0.2, 1e3, 9), standardize=True, tol=1e-5)
    ari = path.ari(bunch.target)
    record_property(f"best_ari_{name}", float(ari.max()))
    assert np.isfinite(ari).all() and ari.max() > 0.0  # recorded, not hard-coded
    assert path.n_clusters[0] > 10 * path.n_clusters[-1] and (path.rel_gaps <= 1e-5).all()
    assert path.lam_max.lower <= path.lam_max.upper  # a certified bracket even without the conic solve
    # centers are reported in the original units: their mean is the mean of the raw data
    assert np.allclose(path.results[-1].centers.mean(axis=0), bunch.data.mean(axis=0), rtol=1e-4)


def test_standardization_is_explicit_and_undone():
    rng = np.random.default_rng(2)
    pts = rng.normal(size=(15, 2)) * [1.0, 1000.0] + [5.0, -300.0]
    small = convex_clustering(pts, 1e-9, standardize=True, k=4, tol=1e-12)
    assert np.allclose(small.centers, pts, atol=1e-3)  # original units
    assert small.standardization.enabled and np.allclose(small.problem.loss.points.std(axis=0), 1.0)
    plain = convex_clustering(pts, 1e-9, k=4, tol=1e-12)
    assert not plain.standardization.enabled and np.allclose(plain.problem.loss.points, pts)
    fused = convex_clustering(pts, 1e6, graph="complete", standardize=True, tol=1e-10)
    assert fused.n_clusters == 1 and np.allclose(fused.centers, pts.mean(axis=0), atol=1e-3)


def test_plots_work_with_agg(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    pts = small_points(4, n=20, d=3)  # 3-D: drawn on the first two principal axes
    path = clustering_path(pts, [0.1, 1.0, 10.0, 100.0], k=5, tol=1e-6)
    ax = plot_clusterpath(path)
    assert len(ax.collections) >= 2
    ax.figure.savefig(tmp_path / "path.png")
    ax = plot_cluster_tree(path, color_by=np.arange(20) % 2)
    ax.figure.savefig(tmp_path / "tree.png")
    assert (tmp_path / "tree.png").stat().st_size > 0


# ------------------------------------------------------------------------- specs and experiment
@pytest.mark.parametrize("spec", sorted((ROOT / "problems" / "clustering").glob("blobs_*.toml")), ids=lambda p: p.stem)
def test_clustering_specs_meet_their_checks(spec):
    from gtvcvx import load_spec

    s = load_spec(spec)
    r = g.solve(s.problem, **s.solve_options)
    assert r.rel_gap <= s.checks["max_rel_gap"]
    cl = cluster_labels(s.problem, r.W, r.U)
    assert adjusted_rand_index(s.truth.labels, cl.labels) >= s.checks["min_ari"]


def test_experiment_quick(tmp_path):
    pytest.importorskip("sklearn")
    from gtvcvx.experiments import get_experiment
    from gtvcvx import load_spec

    spec = load_spec(ROOT / "problems" / "clustering" / "iris_wine.toml")
    assert spec.kind == "experiment" and spec.experiment == "clustering_real_data"
    out = get_experiment(spec.experiment)({**spec.params, "datasets": ["iris"]}, tmp_path, scale="quick")
    assert 0.0 < out.measured["ari_iris"] <= 1.0 and out.measured["rel_gap"] <= 1e-5
    assert all(Path(f).is_file() for f in out.figures) and "clustering_path_iris" in out.tables
    assert "ARI" in out.markdown


# ------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("kwargs, match", [
    (dict(points=np.array([[0.0, 1.0], [np.nan, 2.0], [3.0, 1.0]])), "points"),
    (dict(points=np.arange(5.0)), "points"),
    (dict(points=np.zeros((0, 2))), "points"),
    (dict(lam=-1.0), "lam"),
    (dict(lam=float("nan")), "lam"),
    (dict(k=0), "k"),
    (dict(k=2.5), "k"),
    (dict(graph=graphs.chain(3)), "graph"),
    (dict(graph="ring"), "graph"),
    (dict(weights="cosine"), "weights"),
    (dict(phi=-1.0), "phi"),
    (dict(penalty=g.SquaredNorm2()), "penalty"),
    (dict(solver="ECOS"), "solver"),
    (dict(tol=0.0), "tol"),
    (dict(tol=1.0), "tol must be a relative-gap tolerance below 1"),
    (dict(standardize="yes"), "standardize"),
])
def test_bad_input_gives_clear_errors(kwargs, match):
    args = dict(points=small_points(0, n=6), lam=0.5)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        convex_clustering(args.pop("points"), args.pop("lam"), **args)


def test_bad_input_path_and_lam_max():
    pts = small_points(0, n=6)
    with pytest.raises(ValueError, match="lams"):
        clustering_path(pts, [0.1, -1.0])
    with pytest.raises(ValueError, match="n_lams"):
        clustering_path(pts, n_lams=1)
    with pytest.raises(ValueError, match="graph"):
        lam_max(pts, graphs.chain(5))
    with pytest.raises(ValueError, match="points"):
        lam_max(np.ones((3, 2, 1)), graphs.chain(3))
    with pytest.raises(ValueError, match="points"):
        solve_clustering(pts[:, :1] * np.nan, 0.1, graphs.chain(6))


def test_large_problems_snap_only_where_rounding_of_fused_centers_matters(monkeypatch):
    """Above POLISH_ALWAYS_POINTS a snapping try (labels and a certificate, seconds at 10^6 points)
    runs only where eps lam sum A_e max|a| is not negligible next to the gap budget."""
    from gtvcvx.clustering import core

    monkeypatch.setattr(core, "POLISH_ALWAYS_POINTS", 0)
    pts = small_points(4, n=20, d=3)
    huge = convex_clustering(pts, 1.65e9, k=5, tol=1e-7, solver="halpern")  # the case above: still snaps
    assert huge.status == "optimal" and huge.gtv.info.get("polished")
    ordinary, _ = clustering_problem(pts, 0.5, k=5)
    polisher = core._Polisher(ordinary, 1e-7)
    cert = g.solve(ordinary, tol=1e-7, method="halpern")
    assert not polisher.worth_trying(cert)  # rounding ~1e-16 of the budget: no try
    monkeypatch.setattr(core, "POLISH_ALWAYS_POINTS", 10_000)
    assert polisher.worth_trying(cert)


@pytest.mark.parametrize("offset", [1e9, 1e12, -1e12])
def test_points_far_from_the_origin_cluster_like_centered_ones(offset):
    """60 points of unit spread offset by 1e9: lam_max's one-pass component means left sums of n 1e-7 in
    its divergence, no routed flow was feasible and clustering_path raised a bare einsum error; at 1e12
    the path stopped at max_iter with gaps of 1e-4. With the two-pass divergence and the problem solved
    in exactly translated coordinates the path is the centered data's (same lams, same clusters, all
    certified) and the centers come back in the caller's units."""
    from gtvcvx.clustering import clustering_path, convex_clustering, lam_max
    from gtvcvx.clustering._prep import exact_offset

    rng = np.random.default_rng(0)
    base = rng.normal(size=(60, 3))
    points = base + offset
    shift = exact_offset(points)
    assert np.array_equal((points - shift) + shift, points) and np.all(shift != 0)
    assert np.all(exact_offset(base) == 0)  # (straddling the origin: no exact translation)
    ref = clustering_path(base, n_lams=8)
    path = clustering_path(points, n_lams=8)
    assert np.allclose(path.lams, ref.lams, rtol=1e-4)  # (lam_max is certified to a relative 1e-4)
    assert [r.n_clusters for r in path.results] == [r.n_clusters for r in ref.results]
    assert all(r.status == "optimal" for r in path.results)
    one, centered = convex_clustering(points, ref.lams[3]), convex_clustering(base, ref.lams[3])
    # 2-strong convexity: ||W - W*||_F^2 <= gap for each; the shift back rounds at u |offset|
    distance = np.linalg.norm(one.centers - offset - centered.centers)
    assert distance <= np.sqrt(one.gtv.gap) + np.sqrt(centered.gtv.gap) + 60 * 3 * 2.3e-16 * abs(offset)
    graph = one.problem.graph
    assert np.isfinite(lam_max(points, graph).value)


def test_points_of_small_spread_cluster_like_unit_spread_ones():
    """80 blobs at the scale 1e-3: the certified relative gap (P - D) / (1 + |P| + |D|) was an
    absolute tolerance on an objective ~1e-4 and the path read 3 clusters where the same points at
    the scale 1 give 36 (at 1e-6: 2 for 36). Solved in units of a power of two (exact), the path
    is the unit-scale one (the same clusters at 2^-20, 1e-3 and 1e-6; two power-of-two scales give
    the same path bit for bit: lams, lam_max and centers scaled, gaps equal); lam's stay in the
    caller's units."""
    from gtvcvx.clustering import clustering_path, convex_clustering
    from gtvcvx.clustering._prep import exact_unit

    rng = np.random.default_rng(3)
    centers = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0], [4.0, 4.0]])
    base = centers[rng.integers(0, 4, size=80)] + 0.6 * rng.normal(size=(80, 2))
    assert exact_unit(base) == 1.0
    for scale in (1e-3, 1e-6, 2.0 ** -20):
        spread = np.sqrt(np.mean((base * scale - (base * scale).mean(axis=0)) ** 2))
        unit = exact_unit(base * scale)
        assert 1 <= spread / unit < 2 and unit == 2.0 ** np.round(np.log2(unit))
    ref = clustering_path(base, n_lams=10)
    counts = [r.n_clusters for r in ref.results]
    assert counts[0] > 40 and counts[-1] <= 4  # (a path that is informative at the scale 1)

    small, tiny = (clustering_path(base * 2.0 ** -k, n_lams=10) for k in (20, 30))  # both solved as base / 2
    assert small.standardization.unit == 2.0 ** -19 and tiny.standardization.unit == 2.0 ** -29
    assert np.array_equal(tiny.lams, small.lams * 2.0 ** -10) and tiny.lam_max.value == small.lam_max.value * 2.0 ** -10
    assert np.array_equal(tiny.centers, small.centers * 2.0 ** -10) and np.array_equal(tiny.rel_gaps, small.rel_gaps)
    assert [r.n_clusters for r in tiny.results] == counts
    for scale in (1e-3, 1e-6):
        path = clustering_path(base * scale, n_lams=10)
        assert [r.n_clusters for r in path.results] == counts
        assert np.allclose(path.lams, ref.lams * scale, rtol=1e-4)  # (lam_max certified to 1e-4)
        assert all(r.status == "optimal" for r in path.results)
        one = convex_clustering(base * scale, ref.lams[4] * scale)
        assert one.lam == ref.lams[4] * scale and one.n_clusters == ref.results[4].n_clusters
        # the objective in the caller's units is unit^2 times the solved one
        caller = g.GTVProblem(one.problem.graph, g.losses.SquaredDistance(base * scale), one.problem.penalty, one.lam)
        unit = one.standardization.unit
        assert np.isclose(caller.objective(one.centers), unit**2 * one.problem.objective(one.gtv.W), rtol=1e-9)
