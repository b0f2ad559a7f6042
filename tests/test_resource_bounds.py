"""Bounded resources on untrusted input: every size-dependent allocation is estimated and
refused (``ResourceLimitError``, a ValueError: exit 2 on the command line) before it happens.

Nothing here allocates anything large: each case is refused from a declared size, a file
header or a zip directory, and the budget is set small with ``GTVCVX_MAX_MEMORY`` where the
default (75 % of RAM) would depend on the machine.
"""

from __future__ import annotations

import io
import os
import stat
import time
import tracemalloc
import warnings
import zipfile

import numpy as np
import pytest

import gtvcvx as g
from gtvcvx import data as data_mod
from gtvcvx import graphs
from gtvcvx._validation import ResourceLimitError, allocation_guard, as_float_array
from gtvcvx.clustering._prep import clustering_graph
from gtvcvx.graph import Graph
from gtvcvx.io import _read_umask, atomic_savefig, atomic_write, atomic_write_text, read_npy, read_npz
from gtvcvx.rkhs import data as rkhs_data
from gtvcvx.rkhs.dictionary import Dictionary, gaussian_kernel

#: About 75 % of a 24 GiB machine: the default budget where these cases were found.
BUDGET_24G = "18G"


@pytest.fixture
def budget(monkeypatch):
    def set_budget(value: str) -> None:
        monkeypatch.setenv("GTVCVX_MAX_MEMORY", value)
    set_budget(BUDGET_24G)
    return set_budget


def npy_bytes(shape, descr="<f8", payload=b"") -> bytes:
    """A ``.npy`` header declaring ``shape`` followed by ``payload`` (not necessarily matching)."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue() + payload


# ----------------------------------------------------------------------------- graphs
def test_graph_from_edges_with_a_billion_nodes_is_refused(budget):
    with pytest.raises(ResourceLimitError, match=r"Graph.from_edges: a graph with n = 1000000000 nodes would need "
                                                 r"about .* GiB, more than the memory budget .*GTVCVX_MAX_MEMORY"):
        Graph.from_edges(10**9, [[0, 1]])
    budget("1M")
    with pytest.raises(ResourceLimitError, match=r"n = 1000 nodes and 100000 edges"):
        Graph.from_edges(1000, np.zeros((100_000, 2), dtype=np.int64))
    assert issubclass(ResourceLimitError, ValueError)  # the CLI reports it as bad input (exit 2)


def test_graph_csv_with_a_huge_node_index_or_declared_n_is_refused(tmp_path, budget):
    path = tmp_path / "edges.csv"
    path.write_text("i,j\n0,1\n1,999999999\n")
    with pytest.raises(ResourceLimitError, match=r"edges.csv: the graph \(2 edges; line 3 has the largest node "
                                                 r"index\) would need about"):
        Graph.from_csv(path)
    small = tmp_path / "small.csv"
    small.write_text("0,1\n")
    with pytest.raises(ResourceLimitError, match=r"small.csv: a graph with n = 1000000000 nodes \(as given\)"):
        Graph.from_csv(small, n=10**9)
    budget("64K")  # rows are counted while reading: refused before the whole file is held
    many = tmp_path / "many.csv"
    many.write_text("".join(f"{i},{i + 1}\n" for i in range(70_000)))
    with pytest.raises(ResourceLimitError, match=r"many.csv: the edge list \(more than 65536 rows\)"):
        Graph.from_csv(many)


def test_graph_csv_overlong_line_is_refused_without_reading_it(tmp_path):
    path = tmp_path / "long.csv"
    path.write_text("0,1\n" + "9" * 100_000 + "\n")
    with pytest.raises(ValueError, match=r"long.csv:2: line longer than 4096 characters") as info:
        Graph.from_csv(path)
    assert "999" not in str(info.value)


@pytest.mark.parametrize("build, message", [
    (lambda: graphs.complete(30000), r"graphs.complete\(n=30000\): a complete graph with 449985000 edges "
                                     r"would need about \d+(\.\d+)? GiB"),
    (lambda: graphs.chain(10**9), r"graphs.chain\(n=1000000000\): a graph with 1000000000 nodes"),
    (lambda: graphs.star(10**9), r"graphs.star\(n=1000000000\)"),
    (lambda: graphs.clustered_chain([10**9, 10], 1.0), r"graphs.clustered_chain\(sizes summing to 1000000010\)"),
    (lambda: graphs.sbm([100_000, 100_000], 0.5, 0.1), r"graphs.sbm\(sizes with 200000 nodes, p_in=0.5, "
                                                       r"p_out=0.1\): a graph with n = 200000 nodes"),
    (lambda: clustering_graph(np.zeros((30000, 2)), "complete"), r"clustering graph 'complete' on 30000 points"),
])
def test_graph_generators_are_refused_before_allocating(budget, build, message):
    start = time.perf_counter()
    with pytest.raises(ResourceLimitError, match=message):
        build()
    assert time.perf_counter() - start < 0.5  # refused from the arguments, nothing drawn


def test_knn_and_sbm_sampling_are_bounded(budget):
    budget("1M")
    with pytest.raises(ResourceLimitError, match=r"graphs.knn\(k=50\) on 2000 points of dimension 2"):
        graphs.knn(np.random.default_rng(0).random((2000, 2)), k=50)
    # the sparse cross-block draw: numpy's shuffle of all pairs would need 8 bytes per pair
    budget("100M")  # the graph (about 750,000 edges) fits; shuffling 25M pairs does not
    with pytest.raises(ResourceLimitError, match=r"graphs.sbm: sampling \d+ of 25000000 node pairs"):
        graphs.sbm([5000, 5000], 0.0, 0.03, seed=0)


def test_small_graphs_still_build(budget):
    budget("64M")
    assert graphs.complete(200).n_edges == 199 * 100
    assert graphs.sbm([50, 50], 0.2, 0.01, seed=1).graph.n == 100
    assert graphs.knn(np.random.default_rng(0).random((100, 2)), k=5).n == 100


# ----------------------------------------------------------------------------- data generators
@pytest.mark.parametrize("limit, build, message", [
    (BUDGET_24G, lambda: data_mod.blobs([50, 50], d=10**7),
     r"data.blobs\(d=10000000\): 100 points of dimension 10000000 in 2 clusters would need about"),
    ("10M", lambda: data_mod.linear_model(np.zeros(10, dtype=int), d=1000, m=100),
     r"data.linear_model\(d=1000\): 10 nodes, 1000 samples of dimension 1000"),
    ("10M", lambda: data_mod.logistic_model(np.zeros(10, dtype=int), d=1000, m=100),
     r"data.logistic_model\(d=1000\)"),
    (BUDGET_24G, lambda: data_mod.linear_model([0, 10**12], d=2), r"data.linear_model\(d=2\)"),  # 10^12 clusters
    (BUDGET_24G, lambda: rkhs_data.ellipses(10**9), r"rkhs.data.ellipses\(n=1000000000\)"),
    (BUDGET_24G, lambda: rkhs_data.ellipse_agents(10**9), r"rkhs.data.ellipse_agents\(n_total=1000000000\)"),
    (BUDGET_24G, lambda: rkhs_data.agent_regions(layout=(10**6, 10**6)), r"rkhs.data.agent_regions"),
    (BUDGET_24G, lambda: rkhs_data.split_agents(10**12, 2), r"rkhs.data.split_agents\(n=1000000000000\)"),
])
def test_data_generators_are_refused_before_allocating(budget, limit, build, message):
    budget(limit)  # small budgets where a missed refusal would still allocate little
    with pytest.raises(ResourceLimitError, match=message):
        build()


def test_data_hard_cap_on_entries():
    with pytest.raises(ValueError, match=r"data.logistic_model: 10000 samples x d = 1000000 is too large to generate"):
        data_mod.logistic_model(np.zeros(10, dtype=int), d=10**6, m=1000)


def test_kernel_matrices_and_dictionaries_are_bounded(budget):
    budget("4M")
    X = np.random.default_rng(0).random((500, 2))
    dense = Dictionary.from_samples(X, 1.0, threshold=0.0)
    with pytest.raises(ResourceLimitError, match=r"Dictionary.kernel_matrix: the kernel matrix of 500 samples "
                                                 r"x 500 atoms"):
        dense.kernel_matrix(X)
    # with a threshold the nonzeros are counted block by block (here all 10^6 entries are kept)
    budget("40M")  # one dense block (24 MB) fits, the 10^6 kept entries (32 MB more) do not
    wide = Dictionary.from_samples(X, 10.0)
    with pytest.raises(ResourceLimitError, match=r"at least 1000000 entries above the threshold"):
        wide.kernel_matrix(np.tile(X, (4, 1)))
    budget("4M")
    with pytest.raises(ResourceLimitError, match=r"rkhs.gaussian_kernel: a dense kernel matrix of 500 samples"):
        gaussian_kernel(X, X, 1.0)
    with pytest.raises(ResourceLimitError, match=r"Dictionary.sobol\(n=1000000\)"):
        Dictionary.sobol([(0, 1), (0, 1)], 10**6, [1.0, 2.0])
    with pytest.raises(ResourceLimitError, match=r"Dictionary.grid"):
        Dictionary.grid([(0, 1), (0, 1)], 3000, [1.0, 2.0])
    narrow = Dictionary.from_samples(X[:50], 0.01)  # sparse: fits
    assert narrow.kernel_matrix(X[:50]).shape == (50, 50)


# ----------------------------------------------------------------------------- .npz / .npy files
def test_npz_header_claiming_1e11_by_2_is_refused_from_the_header(tmp_path):
    path = tmp_path / "forged.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("X.npy", npy_bytes((10**11, 2), payload=b"\0" * 64))
        archive.writestr("y.npy", npy_bytes((2,), payload=b"\0" * 16))
    with pytest.raises(ValueError, match=r"forged.npz: array 'X' declares shape \(100000000000, 2\) of float64 "
                                         r"\(1600000000000 bytes\) but holds 64 bytes of data"):
        read_npz(path)


def test_zip_bomb_is_refused_without_decompressing(tmp_path, monkeypatch):
    path = tmp_path / "bomb.npz"
    chunk = bytes(2**20)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        with archive.open("X.npy", "w", force_zip64=True) as member:
            member.write(npy_bytes((100 * 2**20 // 8,)))
            for _ in range(100):  # 100 MiB of zeros: a valid array, about 0.4 MB on disk
                member.write(chunk)
    assert path.stat().st_size < 2**20
    for budget, message in [("50M", r"bomb.npz: its 1 arrays \(member 'X.npy' alone declares \d+ bytes "
                                    r"uncompressed\) would need about"),
                            ("18G", r"bomb.npz: member 'X.npy' expands \d+ compressed bytes to \d+ .* "
                                    r"refused as a likely zip bomb")]:
        monkeypatch.setenv("GTVCVX_MAX_MEMORY", budget)
        tracemalloc.start()
        start = time.perf_counter()
        try:
            with pytest.raises(ResourceLimitError, match=message):
                read_npz(path)
            elapsed = time.perf_counter() - start
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert elapsed < 0.5 and peak < 8 * 2**20, (elapsed, peak)


def test_npz_complex_and_foreign_members_are_refused(tmp_path):
    path = tmp_path / "complex.npz"
    np.savez(path, X=np.ones((2, 2)), y=np.ones(2) + 1j)
    with pytest.raises(ValueError, match=r"complex.npz: array 'y' has dtype complex128; expected real numbers"):
        read_npz(path)
    path = tmp_path / "record.npz"
    np.savez(path, X=np.zeros(2, dtype=[("a", "<f8")]))
    with pytest.raises(ValueError, match=r"record.npz: array 'X' has dtype .*; expected numbers"):
        read_npz(path)
    path = tmp_path / "plain.npy"
    np.save(path, np.ones(3))
    with pytest.raises(ValueError, match=r"plain.npy is a single .npy array, not an .npz archive"):
        read_npz(path)
    good = tmp_path / "good.npz"
    np.savez(good, X=np.ones((2, 2)), y=np.arange(2), header=np.array("text"))
    arrays = read_npz(good)
    assert arrays["X"].shape == (2, 2) and str(arrays["header"]) == "text"


def test_read_npy_checks_the_header(tmp_path, monkeypatch):
    forged = tmp_path / "forged.npy"
    forged.write_bytes(npy_bytes((10**11, 2), payload=b"\0" * 32))
    with pytest.raises(ValueError, match=r"forged.npy: array 'forged' declares shape \(100000000000, 2\)"):
        read_npy(forged)
    good = tmp_path / "good.npy"
    np.save(good, np.arange(6.0).reshape(2, 3))
    assert read_npy(good).shape == (2, 3)
    monkeypatch.setenv("GTVCVX_MAX_MEMORY", "16")
    with pytest.raises(ResourceLimitError, match=r"good.npy: an array of shape \(2, 3\)"):
        read_npy(good)
    np.save(tmp_path / "c.npy", np.ones(2) + 1j)
    with pytest.raises(ValueError, match=r"c.npy: array 'c' has dtype complex128"):
        read_npy(tmp_path / "c.npy")


def test_cli_refuses_a_zip_bomb_data_file_with_exit_2(tmp_path, capsys, monkeypatch):
    from gtvcvx.cli import main

    Graph.from_edges(2, [[0, 1]]).to_csv(tmp_path / "edges.csv")
    with zipfile.ZipFile(tmp_path / "data.npz", "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("X.npy", npy_bytes((2**20, 2), payload=bytes(2**24)))
    (tmp_path / "spec.toml").write_text('[graph]\nfile = "edges.csv"\n[data]\nfile = "data.npz"\n'
                                        '[problem]\nloss = "squared_error"\npenalty = "norm2"\nlam = 1.0\n')
    monkeypatch.setenv("GTVCVX_MAX_MEMORY", "1M")
    assert main(["check", str(tmp_path / "spec.toml")]) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and "data.npz" in err and "X.npy" in err, err


# ----------------------------------------------------------------------------- complex input
def test_complex_input_is_refused_not_truncated():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning: an error instead
        with pytest.raises(ValueError, match=r"^X\[3\] must be real, got complex128$"):
            as_float_array(np.ones((2, 2)) + 1j, "X[3]")
        with pytest.raises(ValueError, match=r"^y must be real, got complex128$"):
            as_float_array([1.0, 2j], "y")
        with pytest.raises(ValueError, match=r"X\[0\] must be real, got complex64"):
            g.SquaredError([np.ones((2, 2), dtype=np.complex64)], [np.ones(2)])
        with pytest.raises(ValueError, match=r"y\[0\] must be real, got complex128"):
            g.SquaredError([np.ones((2, 2))], [np.ones(2) + 0j])
        with pytest.raises(ValueError, match=r"must be an array of real numbers, got an object array"):
            as_float_array(np.array([1.0, None], dtype=object), "X")
        with pytest.raises(ValueError, match=r"must be an array of real numbers, got dtype <U3"):
            as_float_array(["1.5"], "X")
    assert as_float_array([True, 2], "x").dtype == np.float64


def test_memory_errors_become_resource_limit_errors(monkeypatch):
    with pytest.raises(ResourceLimitError, match=r"the widget: out of memory while allocating"):
        with allocation_guard("the widget"):
            raise MemoryError
    graph = Graph.from_edges(3, [[0, 1], [1, 2]])

    def no_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr("gtvcvx.graph.sp.csr_matrix", no_memory)
    with pytest.raises(ResourceLimitError, match=r"the incidence matrix of a graph with 2 edges: out of memory"):
        graph.incidence


# ----------------------------------------------------------------------------- secrets in CSV files
SECRET = "aws_secret_access_key = SECRETMARKER"


@pytest.mark.parametrize("text, message", [
    (f"0,1\n{SECRET}\n", r"secret.csv:2: expected numbers 'i,j\[,weight\]', but field 1 of 1 is not a number"),
    (f"{SECRET}\n", r"secret.csv: no edges and no node count given"),  # taken for a header line
    (f"i,j\n{SECRET}\n", r"secret.csv:2: expected numbers"),
    (f"0,1\n1,2,{SECRET}\n", r"secret.csv:2: expected numbers 'i,j\[,weight\]', but field 3 of 3"),
    (f"0,1\n{SECRET},1\n", r"secret.csv:2: expected numbers"),
    ("0,1\n2,3,4,5\n", r"secret.csv:2: expected 2 or 3 columns"),
    ("0,1\n1,2,0.5\n", r"secret.csv:2: expected 2 columns like line 1"),
    ("0,1\n1.5,2\n", r"secret.csv:2: expected integer node indices >= 0"),
    ("0,1\n1,1\n", r"secret.csv:2: the edge is a self-loop"),
    ("0,1\n1,0\n", r"secret.csv:2: duplicate undirected edge \(the same two nodes as line 1\)"),
    ("0,1,1\n1,2,-4\n", r"secret.csv:2: expected a finite weight > 0"),
])
def test_csv_errors_name_file_and_line_but_never_echo_the_line(tmp_path, text, message):
    path = tmp_path / "secret.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as info:
        Graph.from_csv(path)
    text = str(info.value).replace(str(path), "FILE")  # the tmp path itself may contain '-4'
    assert "SECRETMARKER" not in text and "aws_secret" not in text
    assert "-4" not in text


def test_csv_secret_is_not_echoed_through_a_spec(tmp_path, capsys):
    from gtvcvx.cli import main

    (tmp_path / "credentials").write_text(f"[default]\naws_access_key_id = AKIA\n{SECRET}\n")
    (tmp_path / "spec.toml").write_text('[graph]\nfile = "credentials"\n[data]\ngenerator = "linear"\nd = 2\n'
                                        '[problem]\nloss = "squared_error"\npenalty = "norm2"\nlam = 1.0\n')
    assert main(["check", str(tmp_path / "spec.toml")]) == 2
    err = capsys.readouterr().err
    assert "SECRETMARKER" not in err and "AKIA" not in err and "credentials" in err, err


# ----------------------------------------------------------------------------- file permissions
def test_atomic_writes_get_the_usual_file_mode(tmp_path):
    expected = 0o666 & ~_read_umask()
    old = os.umask(0o022)
    os.umask(old)
    assert old == _read_umask()
    atomic_write_text(tmp_path / "a.txt", "hello")
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == expected
    with atomic_write(tmp_path / "b.bin", "wb") as fh:
        fh.write(b"x")
    assert stat.S_IMODE((tmp_path / "b.bin").stat().st_mode) == expected
    if old == 0o022:
        assert expected == 0o644
    private = tmp_path / "private.txt"  # replacing a file keeps its mode
    private.write_text("old")
    private.chmod(0o600)
    atomic_write_text(private, "new")
    assert stat.S_IMODE(private.stat().st_mode) == 0o600 and private.read_text() == "new"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_atomic_savefig_gets_the_usual_file_mode(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(1, 1))
    try:
        path = atomic_savefig(fig, tmp_path / "fig.png")
    finally:
        plt.close(fig)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~_read_umask()


# ----------------------------------------------------------------------------- paths from untrusted input
def test_contained_path_refuses_escapes(tmp_path):
    from gtvcvx._validation import contained_path

    root = tmp_path / "specs"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "edges.csv").write_text("0,1\n")
    (tmp_path / "secret").write_text(SECRET)
    (root / "link.csv").symlink_to(tmp_path / "secret")
    (root / "inner.csv").symlink_to(root / "sub" / "edges.csv")
    assert contained_path("sub/edges.csv", root, "graph.file") == (root / "sub" / "edges.csv").resolve()
    assert contained_path("inner.csv", root, "graph.file") == (root / "sub" / "edges.csv").resolve()
    for value, message in [(str(tmp_path / "secret"), r"graph.file = .*: expected a path relative to"),
                           ("../secret", r"expected a path inside the directory .*, without '\.\.'"),
                           ("sub/../../secret", r"without '\.\.'"),
                           ("link.csv", r"graph.file = 'link.csv': a symbolic link leads outside the directory"),
                           ("", r"expected a path relative to")]:
        with pytest.raises(ValueError, match=message) as info:
            contained_path(value, root, "graph.file")
        assert "SECRETMARKER" not in str(info.value)


def test_npz_with_too_many_members_is_refused_from_the_directory(tmp_path):
    path = tmp_path / "many.npz"
    small = npy_bytes((1,), payload=bytes(8))
    with zipfile.ZipFile(path, "w") as archive:
        for k in range(1001):
            archive.writestr(f"a{k}.npy", small)
    with pytest.raises(ResourceLimitError, match=r"many.npz: the archive lists 1001 members; expected at most 1000"):
        read_npz(path)
