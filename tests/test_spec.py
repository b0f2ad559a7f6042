import numpy as np
import pytest

import gtvcvx as g
from gtvcvx import load_spec
from gtvcvx.spec import MAX_SPEC_ELEMENTS, SpecError, find_specs

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]
MINIMAL = """
name = "t"
seed = 3
[graph]
generator = "sbm"
sizes = [4, 4]
p_in = 0.5
p_out = 0.1
[data]
generator = "linear"
d = 3
m = 2
[problem]
loss = "squared_error"
penalty = "norm2"
lam = 0.1
"""


def write(tmp_path, text, name="spec.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("path", find_specs([ROOT / "problems"]), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_shipped_spec_loads(path):
    spec = load_spec(path)
    assert spec.kind in ("gtv", "experiment", "rkhs")
    if spec.kind == "gtv":
        assert isinstance(spec.problem, g.GTVProblem)
    assert spec.checks, "every shipped spec states what it checks"


def test_paper_table1_spec_matches_the_paper():
    spec = load_spec(ROOT / "problems/paper/table1.toml")
    p = spec.problem
    assert (p.n, p.d, p.lam) == (200, 100, 1e-2)
    assert isinstance(p.loss, g.SquaredError) and isinstance(p.penalty, g.Norm2)
    assert (p.loss.counts == 10).all()
    assert spec.truth.W.shape == (200, 100) and set(np.unique(spec.truth.W)) <= {0.0, 0.5}
    assert spec.truth.labels.tolist() == [0] * 100 + [1] * 100


def test_specs_are_reproducible(tmp_path):
    a = load_spec(write(tmp_path, MINIMAL))
    b = load_spec(write(tmp_path, MINIMAL, "other.toml"))
    assert a.problem.graph == b.problem.graph
    assert np.array_equal(a.problem.loss.X_all, b.problem.loss.X_all)
    c = load_spec(write(tmp_path, MINIMAL.replace("seed = 3", "seed = 4"), "c.toml"))
    assert not np.array_equal(a.problem.loss.X_all, c.problem.loss.X_all)


@pytest.mark.parametrize("edit, message", [
    (("[problem]", "[problemz]"), r"problem: missing table \(found \[problemz\]: a misspelling of \[problem\]\?\)"),
    (("lam = 0.1", "lamda = 0.1"), r"problem.lam: missing; expected a number \(found 'lamda': a misspelling of 'lam'\?\)"),
    (('penalty = "norm2"', 'penalti = "norm2"'), r"problem.penalty: missing; .*\(found 'penalti'"),
    (("p_out = 0.1", "p_out = 0.1\np_outt = 3"), r"graph.p_outt: unknown key; did you mean 'p_out'\? expected one of"),
    (("p_in = 0.5", "p_in = 1.5"), r"graph.p_in: expected a number <= 1, got 1.5"),
    (("p_in = 0.5", 'p_in = "high"'), r"graph.p_in: expected a number, got 'high'"),
    (("p_out = 0.1", "p_out = 0.1\npout = 3"), r"graph.pout: unknown key"),
    (('loss = "squared_error"', 'loss = "squared_hinge"'), r"problem.loss: unknown loss 'squared_hinge'; expected one of"),
    (('penalty = "norm2"', 'penalty = "l3"'), r"problem.penalty: unknown penalty 'l3'"),
    (("lam = 0.1", "lam = -1.0"), r"problem.lam: expected a number >= 0"),
    (('generator = "sbm"', 'generator = "erdos"'), r"graph.generator: expected one of"),
    (("d = 3", "d = 0"), r"data.d: expected an integer >= 1"),
    (("lam = 0.1", "lam = 0.1\n[check]\nmax_rel_gapp = 1e-6"), r"check.max_rel_gapp: unknown check"),
    (("sizes = [4, 4]", "sizes = [4000000000, 4]"), r"refusing"),
    (("d = 3", "d = 100000000"), r"refusing before allocating"),
])
def test_spec_errors_name_file_and_key(tmp_path, edit, message):
    path = write(tmp_path, MINIMAL.replace(*edit))
    with pytest.raises(SpecError, match=message) as info:
        load_spec(path)
    assert str(path) in str(info.value)


def test_not_toml_and_missing(tmp_path):
    with pytest.raises(SpecError, match="not valid TOML"):
        load_spec(write(tmp_path, "name = [unclosed"))
    with pytest.raises(SpecError, match="spec file not found"):
        load_spec(tmp_path / "nope.toml")


def test_file_graph_and_npz_data(tmp_path):
    G = g.Graph.from_edges(4, [[0, 1], [1, 2], [2, 3]], [1.0, 0.5, 2.0])
    G.to_csv(tmp_path / "edges.csv")
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "data.npz", X=rng.normal(size=(6, 2)), y=rng.normal(size=6),
             node=np.array([0, 0, 1, 3, 3, 3]), W_true=np.zeros((4, 2)))
    spec_text = """
[graph]
file = "edges.csv"
[data]
file = "data.npz"
[problem]
loss = "squared_error"
penalty = "norm1"
lam = 0.2
"""
    spec = load_spec(write(tmp_path, spec_text))
    assert spec.problem.graph == G
    assert spec.problem.loss.counts.tolist() == [2, 1, 0, 3]
    assert spec.truth.W.shape == (4, 2)


def test_npz_with_pickles_is_refused(tmp_path):
    g.Graph.from_edges(2, [[0, 1]]).to_csv(tmp_path / "edges.csv")
    np.savez(tmp_path / "data.npz", X=np.array([np.ones(2), np.ones(3)], dtype=object),
             y=np.ones(2), node=np.zeros(2, dtype=int))
    text = '[graph]\nfile = "edges.csv"\n[data]\nfile = "data.npz"\n[problem]\nloss = "squared_error"\npenalty = "norm2"\nlam = 1.0\n'
    with pytest.raises(SpecError, match=r"data.file: .*pickled object arrays, which are refused"):
        load_spec(write(tmp_path, text))
    (tmp_path / "data.npz").write_text("this is not a zip file")
    with pytest.raises(SpecError, match=r"data.file: .*not a valid .npz archive"):
        load_spec(write(tmp_path, text))


def test_limits_constant_is_sane():
    assert MAX_SPEC_ELEMENTS >= 10**8


def test_loss_and_penalty_as_inline_tables(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL.replace('loss = "squared_error"', 'loss = { name = "least_squares" }')
                                  .replace('penalty = "norm2"', 'penalty = { name = "l1" }')))
    assert spec.problem.loss.name == "squared_error" and spec.problem.penalty.name == "norm1"


@pytest.mark.parametrize("edit, message", [
    (('loss = "squared_error"', 'loss = { name = "squared_error", delta = 1.0 }'),
     r"problem.loss: loss 'squared_error' takes no parameter 'delta'; it has no parameters"),
    (('penalty = "norm2"', 'penalty = { name = "norm2", p = 3 }'),
     r"problem.penalty: penalty 'norm2' takes no parameter 'p'"),
    (('penalty = "norm2"', 'penalty = { groups = [[0]] }'), r"problem.penalty: an inline table needs a string 'name'"),
    (('penalty = "norm2"', 'penalty = 3'), r"problem.penalty: expected a name or an inline table, got 3"),
])
def test_component_parameter_errors_name_the_parameter(tmp_path, edit, message):
    with pytest.raises(SpecError, match=message):
        load_spec(write(tmp_path, MINIMAL.replace(*edit)))
