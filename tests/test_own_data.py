"""Bringing one's own data: samples CSV, edge lists, adjacency matrices and networkx graphs."""

import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import gtvcvx as g
from gtvcvx.io import read_samples_csv
from gtvcvx.spec import SpecError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "problems/own_data"


def test_samples_csv_reads_node_label_and_features_in_header_order(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("# a comment\nx1,node,y,x0\n2,0,1.5,1\n4,2,2.5,3\n")
    arrays = read_samples_csv(path)
    np.testing.assert_array_equal(arrays["X"], [[2.0, 1.0], [4.0, 3.0]])  # feature columns in header order
    np.testing.assert_array_equal(arrays["y"], [1.5, 2.5])
    assert arrays["node"].dtype == np.int64 and arrays["node"].tolist() == [0, 2]


@pytest.mark.parametrize("text, message", [
    ("node,x0\n0,1\n", r"no 'y' column; expected a header line 'node,y,x0,x1,...'"),
    ("node,y\n0,1\n", "no feature column"),
    ("node,y,x,x\n0,1,2,3\n", "every column needs its own name"),
    ("node,y,x\n0,1,2\n0,1,secret\n", r":3: column 'x' is not a finite number"),
    ("node,y,x\n0.5,1,2\n", r":2: column 'node' must be an integer >= 0"),
    ("node,y,x\n-1,1,2\n", r":2: column 'node' must be an integer >= 0"),
    ("node,y,x\n0,nan,2\n", r":2: column 'y' is not a finite number"),
    ("", "not a samples CSV"),
])
def test_samples_csv_errors_name_file_line_and_column_never_the_cell(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as info:
        read_samples_csv(path)
    assert str(path) in str(info.value) and "secret" not in str(info.value)


def test_the_shipped_example_solves_and_matches_its_npz_twin(tmp_path):
    spec = g.load_spec(EXAMPLE / "stations.toml")
    assert (spec.problem.graph.n, spec.problem.graph.n_edges, spec.problem.loss.d) == (10, 11, 2)
    assert spec.problem.loss.counts.tolist() == [3, 1, 2, 0, 4, 2, 1, 3, 0, 2]
    fast = g.solve_spec(spec)
    ref = g.solve_spec(spec, "CLARABEL")
    assert fast.status == ref.status == "optimal" and fast.rel_gap <= 1e-6
    assert ref.info["certified"] == "by gtvcvx (flows built from W)" and ref.rel_gap <= 1e-6  # certified too
    assert abs(fast.primal - ref.primal) <= fast.gap + ref.gap  # certified intervals overlap
    # the same samples as .npz give the same problem
    arrays = read_samples_csv(EXAMPLE / "samples.csv")
    np.savez(tmp_path / "samples.npz", **arrays)
    shutil.copy(EXAMPLE / "edges.csv", tmp_path / "edges.csv")
    text = (EXAMPLE / "stations.toml").read_text().replace('"samples.csv"', '"samples.npz"')
    (tmp_path / "stations.toml").write_text(text)
    twin = g.load_spec(tmp_path / "stations.toml")
    np.testing.assert_array_equal(twin.problem.loss.X_all, spec.problem.loss.X_all)
    assert twin.problem.objective(fast.W) == spec.problem.objective(fast.W)


def test_a_bad_samples_csv_in_a_spec_names_the_spec_key_and_file(tmp_path):
    shutil.copy(EXAMPLE / "edges.csv", tmp_path / "edges.csv")
    (tmp_path / "samples.csv").write_text("node,target,x0\n0,1,2\n")
    shutil.copy(EXAMPLE / "stations.toml", tmp_path / "stations.toml")
    with pytest.raises(SpecError, match=r"data\.file.*samples\.csv: no 'y' column"):
        g.load_spec(tmp_path / "stations.toml")


def test_graph_from_scipy_sparse_keeps_weights_and_refuses_bad_matrices():
    A = sp.csr_array(np.array([[0, 2.0, 0], [2.0, 0, 0.5], [0, 0.5, 0]]))
    graph = g.Graph.from_scipy_sparse(A)
    assert graph.n == 3 and graph.edges.tolist() == [[0, 1], [1, 2]] and graph.weights.tolist() == [2.0, 0.5]
    assert g.Graph.from_scipy_sparse(A.toarray()).edges.tolist() == [[0, 1], [1, 2]]  # dense works too
    with pytest.raises(ValueError, match=r"not symmetric: adjacency\[0, 1\] = 1.0 but adjacency\[1, 0\] = 3.0"):
        g.Graph.from_scipy_sparse(np.array([[0, 1.0], [3.0, 0]]))
    with pytest.raises(ValueError, match=r"adjacency\[1, 1\] is nonzero: self-loops"):
        g.Graph.from_scipy_sparse(np.diag([0.0, 1.0]))
    with pytest.raises(ValueError, match="square"):
        g.Graph.from_scipy_sparse(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="real weights, got dtype complex128"):
        g.Graph.from_scipy_sparse(np.array([[0, 1j], [1j, 0]]))
    assert g.Graph.from_scipy_sparse([[0, 1], [1, 0]]).n_edges == 1  # nested lists
    with pytest.raises(ValueError, match="must be finite and > 0"):
        g.Graph.from_scipy_sparse(np.array([[0, -1.0], [-1.0, 0]]))


def test_graph_from_networkx_maps_nodes_in_order_and_reads_weights():
    nx = pytest.importorskip("networkx")
    G = nx.Graph()
    G.add_edge("b", "a", weight=3.0)
    G.add_edge("a", "c")
    graph = g.Graph.from_networkx(G)  # nodes in list(G.nodes) order: b, a, c
    assert list(G.nodes) == ["b", "a", "c"]
    assert graph.edges.tolist() == [[0, 1], [1, 2]] and graph.weights.tolist() == [3.0, 1.0]
    assert g.Graph.from_networkx(G, weight=None).weights.tolist() == [1.0, 1.0]
    karate = nx.karate_club_graph()
    same = g.Graph.from_scipy_sparse(nx.to_scipy_sparse_array(karate))
    assert np.array_equal(g.Graph.from_networkx(karate).weights, same.weights)
    with pytest.raises(ValueError, match="undirected simple graph"):
        g.Graph.from_networkx(nx.DiGraph([(0, 1)]))
    with pytest.raises(ValueError, match="self-loop"):
        g.Graph.from_networkx(nx.Graph([(0, 0)]))
