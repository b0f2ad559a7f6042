"""Bad input, degenerate problems, solver failures and numerical hygiene not pinned elsewhere.

Every test is small and fast; ``docs/robustness.md`` maps each case to its test.
"""

from __future__ import annotations

import time
import types
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest

import gtvcvx as g
from gtvcvx.cli import main
from gtvcvx.io import atomic_write, load_result, save_result
from gtvcvx.reference import solve_primal
from gtvcvx.reference.backend import run_cvxpy
from gtvcvx.results import Status
from gtvcvx import load_spec
from gtvcvx.spec import SpecError

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "problems/quick/sbm_nlasso.toml"
TIGHT = dict(tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)

FILE_SPEC = """
[graph]
file = "edges.csv"
[data]
file = "data.npz"
[problem]
loss = "LOSS"
penalty = "norm2"
lam = 1.0
"""

GEN_SPEC = """
[graph]
generator = "chain"
n = 3
[data]
generator = "linear"
d = 2
[problem]
loss = "squared_error"
penalty = "norm2"
lam = 1.0
"""


def file_spec(tmp_path, loss="squared_error", **arrays):
    """A spec reading ``edges.csv`` (chain of 4 nodes) and ``data.npz`` holding ``arrays``."""
    g.graphs.chain(4).to_csv(tmp_path / "edges.csv")
    np.savez(tmp_path / "data.npz", **arrays)
    path = tmp_path / "spec.toml"
    path.write_text(FILE_SPEC.replace("LOSS", loss))
    return path


def one_line_exit_2(capsys, argv, *words):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    for word in words:
        assert word in err, err
    return err


# =========================================================================== 1. bad input
@pytest.mark.parametrize("build, message", [
    (lambda: g.SquaredDistance(np.arange(3.0)), r"points must be a 2-D array"),
    (lambda: g.SquaredError([np.ones((2, 2, 1))], [np.ones(2)]), r"X\[0\] must be a 2-D array \(m_i, d\)"),
    (lambda: g.SquaredError([np.ones((2, 2))], [np.ones((2, 1))]), r"y\[0\] must be a 1-D array"),
    (lambda: g.SquaredError([np.ones((2, 2))], [np.array([np.inf, 1.0])]), r"y\[0\] must be finite"),
    (lambda: g.Logistic([np.ones((2, 2))], [np.array([np.nan, 1.0])]), r"y\[0\] must be finite"),
    (lambda: g.SquaredError.from_stacked(np.ones((2, 2)), np.ones(2), [0, 5], 3), r"node indices must be in \[0, 3\)"),
    (lambda: g.SquaredError.from_stacked(np.ones((2, 2)), np.ones(3), [0, 1], 3), r"same number of rows"),
    (lambda: g.Graph.from_edges(3, [[0, 1]], [np.inf]), r"weights\[0\] = inf .* must be finite and > 0"),
    (lambda: g.Graph.from_edges(3, [[0, np.nan]]), r"edges must hold integer indices"),
    (lambda: g.GTVProblem(g.graphs.chain(3), g.SquaredDistance(np.zeros((3, 2))), g.Norm2(), np.inf),
     r"lam must be a finite number >= 0"),
])
def test_python_api_shape_and_value_errors_name_the_argument(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_unknown_loss_or_penalty_objects_are_type_errors():
    with pytest.raises(TypeError, match="loss must be a gtvcvx loss"):
        g.GTVProblem(g.graphs.chain(3), "squared_error", g.Norm2(), 1.0)
    with pytest.raises(TypeError, match="penalty must be a gtvcvx penalty"):
        g.GTVProblem(g.graphs.chain(3), g.SquaredDistance(np.zeros((3, 2))), "norm3", 1.0)


def test_huge_node_count_is_refused_before_allocating():
    with pytest.raises(ValueError, match=r"n = 1000000000000 nodes is more than this package can hold"):
        g.Graph.from_edges(10**12, [[0, 1]])


def test_fast_core_option_errors_and_numpy_integers():
    problem = g.GTVProblem(g.graphs.chain(3), g.SquaredDistance(np.arange(6.0).reshape(3, 2)), g.Norm2(), 1.0)
    assert g.solve(problem, max_iter=np.int64(50)).iterations <= 50  # numpy integers are integers
    for kwargs, message in [(dict(restart_check=0), "restart_check must be an integer >= 1"),
                            (dict(check_every=0), "check_every must be an integer >= 1 or None"),
                            (dict(check_every=-1), "check_every must be an integer >= 1 or None"),
                            (dict(eta="big"), r"eta must be in \(0, 1\]"),
                            (dict(time_limit=float("nan")), "time_limit must be a positive number"),
                            (dict(primal_weight=0.0), "primal_weight must be > 0")]:
        with pytest.raises(ValueError, match=message):
            g.solve(problem, **kwargs)


def test_csv_graph_files_that_are_not_edge_lists(tmp_path):
    binary = tmp_path / "binary.csv"
    binary.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(ValueError, match=r"binary.csv: not a text CSV file"):
        g.Graph.from_csv(binary)
    garbage = tmp_path / "garbage.csv"
    garbage.write_text("hello world\nfoo bar\n")  # the first line may be a header, the second may not
    with pytest.raises(ValueError, match=r"garbage.csv:2: expected numbers 'i,j\[,weight\]', but field 1 of 1 "
                                         r"is not a number \(the line is not shown\)") as info:
        g.Graph.from_csv(garbage)
    assert "foo bar" not in str(info.value)  # the line itself is never echoed
    header_only = tmp_path / "header.csv"
    header_only.write_text("i,j\n")
    with pytest.raises(ValueError, match=r"header.csv: no edges and no node count given"):
        g.Graph.from_csv(header_only)
    for name, text, message in [("loop.csv", "0,0\n", "is a self-loop"),
                                ("dup.csv", "0,1\n1,0\n", "duplicate undirected edge"),
                                ("nanw.csv", "0,1,nan\n", r"nanw.csv:1: expected a finite weight > 0"),
                                ("zero.csv", "0,1,0\n", r"zero.csv:1: expected a finite weight > 0"),
                                ("cols.csv", "0,1,2,3\n", "expected 2 or 3 columns"),
                                ("huge.csv", "0,999999999999\n", "more than this package can hold")]:
        (tmp_path / name).write_text(text)
        with pytest.raises(ValueError, match=message):
            g.Graph.from_csv(tmp_path / name)


def test_spec_that_is_binary_is_not_toml(tmp_path):
    path = tmp_path / "binary.toml"
    path.write_bytes(b"\x00\xff\xfe\x80 binary")
    with pytest.raises(SpecError, match=r"binary.toml: not a text TOML file"):
        load_spec(path)


@pytest.mark.parametrize("loss, arrays, key, message", [
    ("squared_error", dict(X=np.array([[np.nan, 1.0]]), y=np.ones(1), node=np.zeros(1, int)),
     "data", r"X must be finite"),
    ("squared_error", dict(X=np.ones(2), y=np.ones(2), node=np.zeros(2, int)), "data", r"X must be a 2-D array"),
    ("squared_error", dict(X=np.ones((2, 2)), y=np.ones(2), node=np.array([0, 7])),
     "data", r"node indices must be in \[0, 4\)"),
    ("logistic", dict(X=np.ones((2, 2)), y=np.array([0.0, 1.0]), node=np.array([0, 1])),
     "data", r"logistic labels must be -1 or \+1"),
    ("squared_error", dict(X=np.ones((2, 2)), y=np.ones(2), node=np.array([0, 1]), W_true=np.zeros((3, 2))),
     "data.W_true", r"expected shape \(4, 2\)"),
    ("squared_error", dict(X=np.ones((2, 2)), y=np.ones(2)), "data.file", r"must hold 'X', 'y' and 'node'"),
    ("squared_distance", dict(points=np.ones((3, 2))), "data", r"the loss covers 3 nodes but the graph has 4"),
    ("squared_distance", dict(points=np.array(["a", "b"])), "data.file", r"dtype <U1; expected numbers"),
])
def test_spec_data_file_errors_name_the_key(tmp_path, loss, arrays, key, message):
    path = file_spec(tmp_path, loss, **arrays)
    with pytest.raises(SpecError, match=message) as info:
        load_spec(path)
    assert info.value.key == key and str(path) in str(info.value)


def test_spec_graph_file_that_is_garbage(tmp_path):
    path = file_spec(tmp_path, X=np.ones((2, 2)), y=np.ones(2), node=np.array([0, 1]))
    (tmp_path / "edges.csv").write_text("this is, not a graph\nat all\n")
    with pytest.raises(SpecError, match=r"garbage|edges.csv:2: expected numbers") as info:
        load_spec(path)
    assert info.value.key == "graph.file"


@pytest.mark.parametrize("edit, message", [
    (("n = 3", "n = 10000000000"), r"graph: declares 1e\+10 nodes, more than the limit; refusing"),
    (('generator = "chain"\nn = 3', 'generator = "complete"\nn = 100000'),
     r"flow entries .* refusing before allocating"),
    (("d = 2", "d = 2\nm = 1000000000"), r"data entries .* refusing before allocating"),
])
def test_spec_huge_declared_sizes_are_refused_before_allocating(tmp_path, edit, message):
    path = tmp_path / "huge.toml"
    path.write_text(GEN_SPEC.replace(*edit))
    with pytest.raises(SpecError, match=message):
        load_spec(path)


def test_spec_unknown_solve_key_lists_the_known_ones(tmp_path):
    path = tmp_path / "spec.toml"
    path.write_text(GEN_SPEC + "[solve]\ntoll = 1e-6\n")
    with pytest.raises(SpecError, match=r"solve.toll: unknown key; did you mean 'tol'\? expected one of \['max_iter', 'solver', "
                                        r"'time_limit', 'tol'\]"):
        load_spec(path)


def test_result_files_that_are_not_results(tmp_path):
    with zipfile.ZipFile(tmp_path / "other.npz", "w") as archive:  # a zip, but not of .npy arrays
        archive.writestr("notes.txt", "hello")
    with pytest.raises(ValueError, match=r"other.npz: member 'notes.txt' is not a .npy array"):
        load_result(tmp_path / "other.npz")
    np.savez(tmp_path / "arrays.npz", x=np.zeros(2))
    with pytest.raises(ValueError, match=r"arrays.npz: not a gtvcvx result file \(no 'header' entry\)"):
        load_result(tmp_path / "arrays.npz")
    np.savez(tmp_path / "list.npz", header=np.array("[1, 2]"))
    with pytest.raises(ValueError, match=r"list.npz: corrupt result header \(expected a JSON object"):
        load_result(tmp_path / "list.npz")
    np.savez(tmp_path / "hist.npz", header=np.array('{"status": "optimal"}'), history=np.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"hist.npz: corrupt result file \('history' needs"):
        load_result(tmp_path / "hist.npz")
    np.savez(tmp_path / "pickled.npz", header=np.array([{"status": "optimal"}], dtype=object))
    with pytest.raises(ValueError, match=r"pickled object arrays, which are refused"):
        load_result(tmp_path / "pickled.npz")
    with pytest.raises(ValueError, match=r"missing.npz: file not found"):
        load_result(tmp_path / "missing.npz")


@pytest.mark.parametrize("command", ["solve", "check"])
def test_cli_bad_files_exit_2_with_one_line(tmp_path, capsys, command):
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\x00\xff\xfe\x80")
    one_line_exit_2(capsys, [command, str(binary)], str(binary), "not a text TOML file")
    pickled = file_spec(tmp_path, X=np.array([np.ones(2), np.ones(3)], dtype=object), y=np.ones(2),
                        node=np.zeros(2, dtype=int))
    one_line_exit_2(capsys, [command, str(pickled)], str(pickled), "data.file", "pickled object arrays")
    (tmp_path / "data.npz").write_text("text, not a zip archive")
    one_line_exit_2(capsys, [command, str(pickled)], "data.file", "not a valid .npz archive")
    np.savez(tmp_path / "data.npz", X=np.ones((2, 2)), y=np.ones(2), node=np.array([0, 1]))
    (tmp_path / "edges.csv").write_text("garbage\nmore garbage\n")
    one_line_exit_2(capsys, [command, str(pickled)], "graph.file", "edges.csv:2")
    huge = tmp_path / "huge.toml"
    huge.write_text(GEN_SPEC.replace("n = 3", "n = 10000000000"))
    one_line_exit_2(capsys, [command, str(huge)], str(huge), "refusing")


def test_cli_debug_reraises_the_exception(tmp_path):
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\x00\xff")
    with pytest.raises(SpecError, match="not a text TOML file"):
        main(["--debug", "solve", str(binary)])


def test_cli_bad_numeric_options_exit_2(capsys):
    one_line_exit_2(capsys, ["solve", str(QUICK), "--tol", "-1"], "tol must be a positive number")
    one_line_exit_2(capsys, ["solve", str(QUICK), "--time-limit", "nan"], "time_limit must be a positive number")


# =========================================================================== 2. degenerate problems
def test_disconnected_graph_is_solved_per_component_and_matches_clarabel():
    rng = np.random.default_rng(4)
    G = g.Graph.from_edges(7, [[0, 1], [1, 2], [0, 2], [3, 4], [4, 5]])  # node 6 isolated
    m = [3, 1, 0, 2, 3, 1, 2]
    loss = g.SquaredError([rng.normal(size=(k, 2)) for k in m], [rng.normal(size=k) for k in m], d=2)
    problem = g.GTVProblem(G, loss, g.Norm2(), 0.4)
    fast = g.solve(problem, tol=1e-9)
    ref = solve_primal(problem, "CLARABEL", **TIGHT)
    assert fast.status == "optimal" and ref.status == "optimal"
    assert abs(fast.primal - ref.primal) <= 1e-7 * (1 + abs(ref.primal))
    assert fast.dual <= ref.primal + 1e-9
    # the optimum is the sum of the components' optima
    total = 0.0
    for nodes in ([0, 1, 2], [3, 4, 5], [6]):
        sub = g.GTVProblem(G.subgraph(nodes), loss.subset(nodes), g.Norm2(), 0.4)
        total += solve_primal(sub, "CLARABEL", **TIGHT).primal
    assert abs(total - ref.primal) <= 1e-7 * (1 + abs(ref.primal))


def test_duplicated_points_in_clustering_share_a_cluster_and_match_clarabel():
    from gtvcvx.clustering import convex_clustering
    from gtvcvx.reference import solve_clustering

    rng = np.random.default_rng(0)
    pts = np.vstack([rng.normal(size=(4, 2)), rng.normal(size=(4, 2)) + 5.0])
    pts = np.vstack([pts, pts[:3]])  # points 8, 9, 10 duplicate points 0, 1, 2
    for graph in ("complete", None):  # None: the default k-NN graph
        result = convex_clustering(pts, 0.3, graph=graph, tol=1e-9)
        assert result.status == "optimal"
        assert np.array_equal(result.labels[8:], result.labels[:3])
        ref = solve_clustering(pts, 0.3, result.graph, solver="CLARABEL")
        assert ref.status == "optimal"
        assert abs(result.gtv.primal - ref.primal) <= 1e-6 * (1 + abs(ref.primal))
        assert np.allclose(result.gtv.W[8:], result.gtv.W[:3], atol=1e-5)


# =========================================================================== 3. solver failures
class FakeCvxpyProblem:
    """Just enough of ``cvxpy.Problem`` for ``run_cvxpy``: ``solve`` sets a status or raises."""

    def __init__(self, status=None, value=None, raises=None, warn=None, seconds=0.0):
        self._outcome = (status, value, raises, warn)
        self._seconds = seconds  # how long the "backend" runs
        self.status = self.value = None
        self.compilation_time = 0.01
        self.solver_stats = types.SimpleNamespace(solve_time=0.02, num_iters=7)

    def solve(self, solver, **options):
        status, value, raises, warn = self._outcome
        time.sleep(self._seconds)
        if raises is not None:
            raise raises
        if warn:
            warnings.warn(warn, UserWarning)
        self.status, self.value = status, value


def test_backend_that_raises_becomes_a_status():
    import cvxpy as cp

    run = run_cvxpy(FakeCvxpyProblem(raises=cp.error.SolverError("numerical trouble")), "CLARABEL")
    assert run.status == Status.SOLVER_ERROR and run.message == "CLARABEL failed: numerical trouble"
    run = run_cvxpy(FakeCvxpyProblem(raises=RuntimeError("segfault-ish")), "CLARABEL")
    assert run.status == Status.SOLVER_ERROR and run.message == "CLARABEL raised RuntimeError: segfault-ish"
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C is not swallowed
        run_cvxpy(FakeCvxpyProblem(raises=KeyboardInterrupt()), "CLARABEL")


def test_backend_inaccurate_and_iteration_limit_become_statuses():
    import cvxpy as cp

    run = run_cvxpy(FakeCvxpyProblem(cp.OPTIMAL_INACCURATE, 1.5, warn="Solution may be inaccurate. Try another"),
                    "CLARABEL")
    assert run.status == Status.INACCURATE and run.value == 1.5 and run.iterations == 7
    assert "optimal_inaccurate" in run.message and "Solution may be inaccurate" in run.message
    run = run_cvxpy(FakeCvxpyProblem(cp.USER_LIMIT, None), "SCS")
    assert run.status == Status.MAX_ITER and np.isnan(run.value) and "user_limit" in run.message
    run = run_cvxpy(FakeCvxpyProblem(cp.INFEASIBLE_INACCURATE, None), "SCS")
    assert run.status == Status.INFEASIBLE
    # CVXPY says 'user_limit' for both limits (CLARABEL keeps no raw status): a run that used its whole
    # time_limit stopped there, one that did not hit its iteration limit
    run = run_cvxpy(FakeCvxpyProblem(cp.USER_LIMIT, None, seconds=0.05), "CLARABEL", {"time_limit": 0.01})
    assert run.status == Status.TIME_LIMIT and "its time_limit of 0.01 s" in run.message
    run = run_cvxpy(FakeCvxpyProblem(cp.USER_LIMIT, None), "CLARABEL", {"time_limit": 60.0, "max_iter": 3})
    assert run.status == Status.MAX_ITER


def test_compare_gives_rows_for_raising_and_limited_solvers(monkeypatch):
    import gtvcvx.reference as reference
    from gtvcvx.report import compare

    def boom(problem, solver, **opts):
        raise RuntimeError("backend exploded")

    monkeypatch.setattr(reference, "solve_primal", boom)
    spec = load_spec(ROOT / "problems/quick/chain_l1.toml")
    table = compare(spec, ("fast", "CLARABEL"), memory=None, fast_options={"max_iter": 5, "method": "halpern"})
    fast = table[table["solver"] == "fast"].iloc[0]
    crashed = table[table["solver"] == "CLARABEL"].iloc[0]
    assert fast["status"] == "max_iter" and fast["iterations"] == 5
    assert crashed["status"] == "solver_error" and crashed["message"] == "RuntimeError: backend exploded"
    assert np.isnan(crashed["primal"])


def test_fast_core_time_limit_reports_the_status():
    problem = g.GTVProblem(g.graphs.chain(30), g.SquaredDistance(np.arange(60.0).reshape(30, 2) ** 2),
                           g.Norm2(), 5.0)
    result = g.solve(problem, tol=1e-15, time_limit=1e-6)
    assert result.status == "time_limit" and "reached time_limit = 1e-06 s" in result.message
    assert result.dual <= result.primal  # still an honest certificate


def test_interrupted_writes_leave_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "table.csv"
    path.write_text("old\n")
    with pytest.raises(KeyboardInterrupt):
        with atomic_write(path) as fh:
            fh.write("half of the new ")
            raise KeyboardInterrupt
    assert path.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["table.csv"]

    def half_then_interrupt(fh, **arrays):
        fh.write(b"PK\x03\x04 partial")
        raise KeyboardInterrupt

    problem = g.GTVProblem(g.graphs.chain(3), g.SquaredDistance(np.eye(3)), g.Norm2(), 1.0)
    result = g.solve(problem)
    monkeypatch.setattr(np, "savez_compressed", half_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        save_result(result, tmp_path / "result.npz")
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.csv"]
    def half_then_disk_full(fh, *args, **kwargs):
        fh.write("0,1")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savetxt", half_then_disk_full)
    with pytest.raises(OSError, match="disk full"):
        problem.graph.to_csv(tmp_path / "edges.csv")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.csv"]


def test_cli_ctrl_c_exits_130_and_writes_nothing(tmp_path, monkeypatch, capsys):
    import gtvcvx.runner as runner

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_solver", interrupted)
    out = tmp_path / "result.npz"
    assert main(["solve", str(QUICK), "--save", str(out)]) == 130
    assert capsys.readouterr().err.strip() == "gtvcvx: interrupted"
    assert list(tmp_path.iterdir()) == []


# =========================================================================== 5. numerical hygiene
def test_logistic_with_huge_margins_is_finite_without_warnings():
    X = [np.array([[1.0, -2.0], [0.5, 1.0]]) * 1e300, np.array([[1.0, 1.0]])]
    loss = g.Logistic(X, [np.array([1.0, -1.0]), np.array([-1.0])])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any overflow / invalid-value RuntimeWarning fails the test
        values = loss.node_values(np.ones((2, 2)))
        grad = loss.gradient(np.ones((2, 2)))
        small = g.Logistic([np.array([[1.0, 2.0], [-1.0, 0.5]])], [np.array([1.0, -1.0])])
        huge_w = np.array([[1e308, -1e308]])
        v_huge, g_huge = small.value(huge_w), small.gradient(huge_w)
    assert np.isfinite(values).all() and values[0] == pytest.approx(1.25e300)
    assert np.isfinite(grad).all()
    assert np.isfinite(v_huge) and v_huge == pytest.approx(5e307)
    assert np.allclose(g_huge, [[-0.5, -1.0]])


@pytest.mark.parametrize("method", ["halpern", "pdhg"])
def test_isolated_nodes_do_not_divide_by_zero(method):
    G = g.Graph.from_edges(5, [[0, 1], [1, 2]])  # nodes 3 and 4 have degree 0
    X = [np.ones((2, 2)), np.eye(2), np.ones((1, 2)), np.eye(2), np.zeros((0, 2))]
    y = [np.ones(2), np.ones(2), np.ones(1), np.array([1.0, 2.0]), np.zeros(0)]
    problem = g.GTVProblem(G, g.SquaredError(X, y), g.Norm2(), 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = g.solve(problem, tol=1e-8, method=method)
    assert result.status == "optimal" and np.isfinite(result.W).all()
    assert np.allclose(result.W[3], [1.0, 2.0], atol=1e-6)  # the isolated node's own least squares
    assert "not unique on 1 connected component" in result.message  # node 4: no edges, no data


# =========================================================================== known limitations
def test_separable_logistic_data_has_no_minimizer_and_no_false_certificate():
    X = [np.array([[1.0, 0.0], [2.0, 1.0]]), np.array([[-1.0, 0.5], [-2.0, -1.0]])]
    y = [np.ones(2), -np.ones(2)]
    problem = g.GTVProblem(g.graphs.chain(2), g.Logistic(X, y), g.Norm2(), 0.1)
    found = g.solve(problem, max_iter=300)  # decided up front by the separability LP
    assert found.status == "no_minimizer" and found.W is None and "strictly linearly separable" in found.message
    result = g.solve(problem, max_iter=300, check_separability=False, method="halpern")
    # iterating anyway: the flow iterates are unbounded, and the rounding-level residual even of the
    # zero flow's node duals cannot be paid for: the samples' half-spaces bound no optimum (separable)
    assert result.status == "max_iter" and "cannot be bounded" in result.message
    assert result.dual <= 0.0 and result.gap >= result.primal  # never below the true gap P(W) - 0
    assert 0 < result.primal < 1e-3  # the infimum 0 is approached, never attained
    # the interior-point solve drives W out towards the infimum 0: never a minimizer's bound, and
    # "optimal" only if P(W) itself is within tol of it
    interior = g.solve(problem, tol=1e-6, check_separability=False, method="interior")
    assert interior.dual <= 0.0 and interior.gap >= interior.primal > 0
    assert interior.status != "optimal" or interior.primal <= 1e-6 * (1 + interior.primal)


def _option_entry_points():
    from gtvcvx.clustering import convex_clustering
    from gtvcvx.rkhs import Dictionary, RKHSProblem, solve_dual
    from gtvcvx.rkhs.data import ELLIPSE_BOX, ellipses
    from gtvcvx.solvers.ssnal import solve_ssnal

    points = np.random.default_rng(0).normal(size=(12, 2))
    problem = convex_clustering(points, 0.3, k=3).problem
    data = ellipses(16, seed=1)
    rkhs = RKHSProblem(data.X, data.y, Dictionary.grid(ELLIPSE_BOX, 3, [3.0], threshold=1e-6), 0.5, 0.1, 10.0)
    return {"solve": lambda **o: g.solve(problem, **o), "solve_ssnal": lambda **o: solve_ssnal(problem, **o),
            "rkhs.solve_dual": lambda **o: solve_dual(rkhs, **o),
            "convex_clustering": lambda **o: convex_clustering(points, 0.3, k=3, tol=o.get("tol", 1e-6))}


def test_one_option_validator_for_every_solver_entry_point():
    """The same option values are accepted (numpy scalars too) and refused with the same words everywhere."""
    for name, run in _option_entry_points().items():
        result = run(tol=np.float32(1e-4), **({} if name == "convex_clustering" else {"max_iter": np.int64(5000)}))
        assert result.status in ("optimal", "max_iter"), name
        for bad, message in [(dict(tol=True), "tol must be a positive number, got True"),
                             (dict(tol="1e-6"), "tol must be a positive number, got '1e-6'"),
                             (dict(tol=float("inf")), "tol must be a positive number, got inf")]:
            with pytest.raises(ValueError, match=message):
                run(**bad)
        if name == "convex_clustering":
            continue
        for bad, message in [(dict(max_iter=True), "max_iter must be an integer >= 1, got True"),
                             (dict(max_iter=2.0), "max_iter must be an integer >= 1, got 2.0"),
                             (dict(time_limit=-1), "time_limit must be a positive number of seconds or None, got -1")]:
            with pytest.raises(ValueError, match=message):
                run(**bad)
