import numpy as np
import pytest

from gtvcvx import Graph, graphs


def test_from_edges_orients_and_builds_incidence():
    G = Graph.from_edges(4, [[1, 0], [2, 3], [0, 3]], [1.0, 2.0, 0.5])
    assert G.edges.tolist() == [[0, 1], [2, 3], [0, 3]]
    D = G.incidence.toarray()
    assert D.tolist() == [[1, -1, 0, 0], [0, 0, 1, -1], [1, 0, 0, -1]]
    assert G.degree.tolist() == [2, 1, 1, 2]
    assert np.allclose(G.weighted_degree, [1.5, 1.0, 2.0, 2.5])
    W = np.arange(8.0).reshape(4, 2)
    assert np.allclose(D @ W, [W[0] - W[1], W[2] - W[3], W[0] - W[3]])
    assert np.allclose(G.laplacian(weighted=True).toarray(), D.T @ np.diag(G.weights) @ D)


@pytest.mark.parametrize("edges, weights, message", [
    ([[0, 5]], None, r"edge 0 = \(0, 5\) has a node index out of range"),
    ([[0, 1], [-1, 2]], None, r"edge 1 = \(-1, 2\) has a node index out of range"),
    ([[0, 1], [2, 2]], None, r"edge 1 = \(2, 2\) is a self-loop"),
    ([[0, 1], [1, 2], [1, 0]], None, r"edges 0 and 2 both connect nodes 0 and 1"),
    ([[0, 1], [1, 2]], [1.0, 0.0], r"weights\[1\] = 0.0 for edge \(1, 2\) must be finite and > 0"),
    ([[0, 1], [1, 2]], [-2.0, 1.0], r"weights\[0\] = -2.0"),
    ([[0, 1], [1, 2]], [1.0, np.nan], r"weights\[1\] = nan"),
    ([[0, 1], [1, 2]], [1.0], r"one entry per edge"),
    ([[0, 1, 2]], None, r"shape \(n_edges, 2\)"),
    ([[0.5, 1]], None, r"integer indices"),
])
def test_from_edges_errors_name_the_edge(edges, weights, message):
    with pytest.raises(ValueError, match=message):
        Graph.from_edges(3, edges, weights)


def test_bad_node_count():
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        Graph.from_edges(0, [])


def test_empty_graph_and_components():
    G = Graph.from_edges(3, [])
    assert G.n_edges == 0 and G.incidence.shape == (0, 3)
    assert G.n_components == 3
    G2 = Graph.from_edges(5, [[0, 1], [3, 4]])
    labels = G2.components()
    assert G2.n_components == 3
    assert labels[0] == labels[1] and labels[3] == labels[4] and len({labels[0], labels[2], labels[3]}) == 3


def test_csv_roundtrip(tmp_path):
    G = Graph.from_edges(5, [[0, 1], [1, 4], [2, 3]], [0.5, 2.0, 1.25])
    path = tmp_path / "edges.csv"
    G.to_csv(path)
    assert Graph.from_csv(path, n=5) == G
    bad = tmp_path / "bad.csv"
    bad.write_text("i,j\n0,1\n1,x\n")
    with pytest.raises(ValueError, match=r"bad.csv:3: expected numbers"):
        Graph.from_csv(bad)
    with pytest.raises(ValueError, match="not found"):
        Graph.from_csv(tmp_path / "missing.csv")


def test_permute_and_subgraph():
    G = Graph.from_edges(4, [[0, 1], [1, 2], [2, 3]], [1.0, 2.0, 3.0])
    P = G.permute([3, 2, 1, 0])
    assert P.edges.tolist() == [[2, 3], [1, 2], [0, 1]]
    S = G.subgraph([1, 2, 3])
    assert S.n == 3 and S.edges.tolist() == [[0, 1], [1, 2]] and S.weights.tolist() == [2.0, 3.0]


def test_sbm_is_seeded_and_has_the_right_density():
    a = graphs.sbm([60, 40], 0.5, 0.02, seed=7)
    b = graphs.sbm([60, 40], 0.5, 0.02, seed=7)
    assert a.graph == b.graph and np.array_equal(a.labels, b.labels)
    assert a.labels.tolist() == [0] * 60 + [1] * 40
    same = a.labels[a.graph.edges[:, 0]] == a.labels[a.graph.edges[:, 1]]
    within_pairs = 60 * 59 / 2 + 40 * 39 / 2
    assert abs(same.sum() / within_pairs - 0.5) < 0.05
    assert abs((~same).sum() / (60 * 40) - 0.02) < 0.015


def test_sbm_large_sparse_path_samples_distinct_pairs():
    lg = graphs.sbm([3000, 3000], 0.002, 0.0001, seed=1)  # > 4e6 pairs per block: binomial + choice path
    G = lg.graph
    assert (G.edges[:, 0] < G.edges[:, 1]).all()
    expected = 2 * 3000 * 2999 / 2 * 0.002 + 3000 * 3000 * 0.0001
    assert abs(G.n_edges - expected) < 5 * np.sqrt(expected)


def test_triangular_pairs_are_exact():
    from gtvcvx.graphs import _triangular_pairs

    size = 7
    i, j = _triangular_pairs(np.arange(size * (size - 1) // 2), size)
    ii, jj = np.triu_indices(size, k=1)
    assert np.array_equal(i, ii) and np.array_equal(j, jj)


def test_chain_star_complete_clustered_chain():
    assert graphs.chain(4, [1.0, 2.0, 3.0]).edges.tolist() == [[0, 1], [1, 2], [2, 3]]
    assert graphs.star(4).edges.tolist() == [[0, 1], [0, 2], [0, 3]]
    assert graphs.complete(4).n_edges == 6
    lg = graphs.clustered_chain([3, 2], bridge_weight=0.25)
    assert lg.graph.edges.tolist() == [[0, 1], [1, 2], [2, 3], [3, 4]]
    assert lg.graph.weights.tolist() == [1.0, 1.0, 0.25, 1.0]
    assert lg.labels.tolist() == [0, 0, 0, 1, 1]
    cut = graphs.clustered_chain([3, 2], bridge_weight=0.0)
    assert cut.graph.n_edges == 3 and cut.graph.n_components == 2


def test_knn_gaussian_weights_and_duplicates():
    rng = np.random.default_rng(0)
    pts = rng.normal(size=(30, 2))
    pts[5] = pts[4]  # duplicated point
    G = graphs.knn(pts, k=3, phi=0.5)
    assert (G.edges[:, 0] != G.edges[:, 1]).all()
    dist2 = ((pts[G.edges[:, 0]] - pts[G.edges[:, 1]]) ** 2).sum(axis=1)
    assert np.allclose(G.weights, np.exp(-0.5 * dist2))
    assert [4, 5] in G.edges.tolist()
    assert G.degree.min() >= 3
    with pytest.raises(ValueError, match="underflow"):
        graphs.knn(pts * 1e3, k=3, phi=1e3)



@pytest.mark.parametrize("k", [1, 4, 12])
def test_knn_is_the_union_of_the_k_nearest_relations(k):
    """Against the definition by brute force (continuous points: no distance ties): every point
    with its k nearest others, each pair once in lexicographic order, Gaussian weights of the
    pair's distance, and a graph that from_edges accepts as it is."""
    rng = np.random.default_rng(k)
    pts = rng.normal(size=(120, 3)) * [1.0, 2.0, 0.5]
    G = graphs.knn(pts, k=k, phi=0.3)
    dist2 = ((pts[:, None, :] - pts[None, :, :]) ** 2).sum(axis=2)
    np.fill_diagonal(dist2, np.inf)
    nearest = np.argsort(dist2, axis=1)[:, :k]
    pairs = {(min(i, j), max(i, j)) for i in range(pts.shape[0]) for j in nearest[i].tolist()}
    assert G.edges.tolist() == [list(pair) for pair in sorted(pairs)]
    assert np.allclose(G.weights, np.exp(-0.3 * dist2[G.edges[:, 0], G.edges[:, 1]]), rtol=1e-13, atol=0)
    assert Graph.from_edges(G.n, G.edges, G.weights) == G


@pytest.mark.parametrize("parallel", [False, True])
def test_knn_pair_kernel_matches_its_numpy_twin(parallel):
    """The compiled pair list (used from 2^20 neighbour entries) gives the twin's pairs and
    distances bit for bit: continuous points, a lattice full of ties and duplicates, and a hub
    listed by 600 points (its segment is sorted by argsort, not insertion)."""
    from scipy.spatial import cKDTree

    from gtvcvx import _graph_kernels

    rng = np.random.default_rng(7)
    sphere = rng.normal(size=(600, 200))  # in 200-D the centre is every sphere point's nearest
    sphere /= np.linalg.norm(sphere, axis=1, keepdims=True)
    clouds = [rng.normal(size=(300, 3)), rng.integers(0, 3, size=(200, 2)).astype(float),
              np.vstack([np.zeros((1, 200)), sphere])]
    for pts, k in zip(clouds, [6, 4, 3]):
        dist, nbr = cKDTree(pts).query(pts, k=k + 1)
        want_pairs, want_sq = graphs._knn_pairs(nbr, dist)
        pairs, sq = _graph_kernels._load_knn_pairs(parallel)(nbr, dist)
        assert pairs.tolist() == want_pairs.tolist()
        assert np.array_equal(sq, want_sq)
    assert (want_pairs[:, 0] == 0).sum() == 600  # the hub's segment


def test_edge_components_keep_only_the_given_edges():
    graph = Graph.from_edges(5, [[0, 1], [1, 2], [3, 4]])
    assert graph.edge_components()[0] == graph.n_components == 2
    count, labels = graph.edge_components(np.array([True, False, True]))  # drop 1-2
    assert count == 3 and labels[0] == labels[1] != labels[2] and labels[3] == labels[4]
    count, labels = graph.edge_components([2])  # by index: only 3-4
    assert count == 4 and labels[3] == labels[4] and len(set(labels[:3].tolist())) == 3
    assert graph.edge_components(np.zeros(3, dtype=bool))[0] == 5


def test_union_find_components_number_them_as_scipy_does(monkeypatch):
    """From 2^20 edges edge_components runs a compiled union-find: same count and the same
    labels (components in the order of their lowest node) as SciPy's path, for all edges, a mask
    and indices, isolated nodes included."""
    from gtvcvx import _jit

    rng = np.random.default_rng(3)
    graph = Graph.from_edges(3000, rng.integers(0, 3000, size=(2500, 2)))  # (self loops dropped)
    mask = rng.random(graph.n_edges) < 0.5
    cases = [None, mask, np.flatnonzero(mask)[::-1], np.zeros(graph.n_edges, dtype=bool)]
    want = [graph.edge_components(case) for case in cases]
    monkeypatch.setattr(_jit, "MIN_ENTRIES", 1)
    for case, (count, labels) in zip(cases, want):
        got_count, got_labels = graph.edge_components(case)
        assert got_count == count > 1 and got_labels.dtype == np.int64
        assert np.array_equal(got_labels, labels)


def test_the_public_constructor_validates_like_from_edges():
    """``Graph(n, edges, weights)`` was a trusted constructor: an edge to node 7 of a 3-node graph was accepted
    and a solve crashed the interpreter (SIGSEGV in a compiled kernel); it now checks what from_edges checks."""
    with pytest.raises(ValueError, match=r"edge 0 = \(0, 7\) has a node index out of range"):
        Graph(3, np.array([[0, 7]]), np.array([1.0]))
    with pytest.raises(ValueError, match="self-loop"):
        Graph(3, [[1, 1]], [1.0])
    with pytest.raises(ValueError, match=r"weights\[0\] = -1.0"):
        Graph(3, [[0, 1]], [-1.0])
    graph = Graph(3, [[1, 0], [1, 2]])  # lists, either orientation, default weights
    assert graph.edges.tolist() == [[0, 1], [1, 2]] and graph.weights.tolist() == [1.0, 1.0]
    assert graph.edges.dtype == np.int64 and not graph.edges.flags.writeable
