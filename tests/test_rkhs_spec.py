"""``kind = "rkhs"`` specs, run_rkhs_spec, boundary plots and the rkhs experiments (quick)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from gtvcvx.results import Status
from gtvcvx.rkhs import RKHSSpec, plot_decision_boundary, run_rkhs_spec
from gtvcvx import load_spec
from gtvcvx.spec import SpecError

ROOT = Path(__file__).resolve().parents[1]

BASE = """
kind = "rkhs"
name = "t"
seed = 2

[data]
generator = "ellipses"
n = 30
n_test = 50

[dictionary]
type = "grid"
bounds = [[-18.0, 9.0], [-10.0, 20.0]]
points_per_dim = 5
widths = [3.0]

[problem]
gamma = 0.5
eps = 0.1
C = 50.0

[check]
max_rel_gap = 1e-6
"""


def write(tmp_path, text, name="s.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize("name", ["quick.toml", "ellipses_2d.toml"])
def test_shipped_rkhs_specs_solve_and_pass_their_checks(name):
    spec = load_spec(ROOT / "problems" / "rkhs" / name)
    assert isinstance(spec, RKHSSpec) and spec.kind == "rkhs" and spec.has_test
    r = run_rkhs_spec(spec)
    assert r.status == Status.OPTIMAL
    assert r.rel_gap <= spec.checks["max_rel_gap"]
    assert r.accuracy >= spec.checks["min_accuracy"]
    row = r.to_row()
    assert {"accuracy", "n_kernels", "n_critical", "status", "rel_gap"} <= set(row)
    assert row["n_kernels"] == np.count_nonzero(r.alpha_envelope) and row["n_critical"] == r.n_critical


def test_run_rkhs_spec_with_a_backend_and_plot(tmp_path):
    from matplotlib.figure import Figure

    spec = load_spec(write(tmp_path, BASE))
    fast = run_rkhs_spec(spec)
    clar = run_rkhs_spec(spec, "CLARABEL")
    assert clar.status == Status.OPTIMAL
    assert abs(fast.dual - clar.dual) <= 2e-6 * abs(clar.dual)  # both certified to 1e-6 relative gap
    assert fast.info["accuracy_on"] == "test"
    ax = Figure().subplots()
    assert plot_decision_boundary(spec, fast, ax) is ax
    assert ax.collections  # regions, samples, kernels
    ax.figure.savefig(tmp_path / "b.png")
    assert (tmp_path / "b.png").stat().st_size > 0


def test_npz_data_with_any_two_labels(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = np.where(X[:, 0] + 0.3 * X[:, 1] > 0, 7, 3)
    np.savez(tmp_path / "d.npz", X=X, y=y, X_test=X[:10], y_test=y[:10])
    spec = load_spec(write(tmp_path, """
        kind = "rkhs"
        [data]
        file = "d.npz"
        [dictionary]
        type = "samples"
        widths = [1.5]
        weights = 1.0
        [problem]
        gamma = 0.1
        C = 100.0
    """))
    assert list(spec.classes) == [3, 7] and set(spec.y) == {-1.0, 1.0}
    assert spec.dictionary.n_atoms == 40
    r = run_rkhs_spec(spec)
    assert r.status == Status.OPTIMAL and r.accuracy >= 0.8
    with pytest.raises(ValueError, match="2-D data"):
        plot_decision_boundary(spec, r)


@pytest.mark.parametrize("edit,key,words", [
    ("[problem]\ngamma = 0.5", "problem", "missing table"),
    ("gamma = 0.5", "problem.gamma", "expected a number > 0"),
    ('generator = "ellipses"', "data.generator", "expected one of"),
    ('type = "grid"', "dictionary.type", "expected one of"),
    ("widths = [3.0]", "dictionary.widths", "positive number"),
    ("points_per_dim = 5", "dictionary.points_per_dim", "positive integer"),
    ("max_rel_gap = 1e-6", "check.max_mse", "unknown check"),
    ("n = 30", "data.n", "integer"),
    ("C = 50.0", "problem.C", "> 0"),
])
def test_spec_errors_name_the_key(tmp_path, edit, key, words):
    replacement = {
        "[problem]\ngamma = 0.5": "[problems]\ngamma = 0.5",
        "gamma = 0.5": "gamma = -0.5",
        'generator = "ellipses"': 'generator = "moons"',
        'type = "grid"': 'type = "hexagonal"',
        "widths = [3.0]": "widths = [-3.0]",
        "points_per_dim = 5": "points_per_dim = [5]",
        "max_rel_gap = 1e-6": "max_mse = 1e-6",
        "n = 30": "n = 30.5",
        "C = 50.0": "C = 0.0",
    }[edit]
    text = BASE.replace(edit, replacement)
    with pytest.raises(SpecError, match=words) as info:
        load_spec(write(tmp_path, text))
    assert info.value.key == key


def test_spec_file_errors(tmp_path):
    text = BASE.replace('generator = "ellipses"\nn = 30\nn_test = 50', 'file = "missing.npz"')
    with pytest.raises(SpecError, match="file not found") as info:
        load_spec(write(tmp_path, text))
    assert info.value.key == "data.file"
    np.savez(tmp_path / "obj.npz", X=np.array([[1.0], [2.0]], dtype=object), y=np.array([0, 1]))
    with pytest.raises(SpecError, match="pickled") as info:
        load_spec(write(tmp_path, text.replace("missing.npz", "obj.npz")))
    assert info.value.key == "data.file"
    np.savez(tmp_path / "three.npz", X=np.zeros((3, 2)), y=np.array([0, 1, 2]))
    with pytest.raises(SpecError, match="exactly two classes") as info:
        load_spec(write(tmp_path, text.replace("missing.npz", "three.npz")))
    assert info.value.key == "data"
    np.savez(tmp_path / "nan.npz", X=np.array([[0.0, np.nan], [1.0, 1.0]]), y=np.array([0, 1]))
    with pytest.raises(SpecError, match="X must be finite") as info:
        load_spec(write(tmp_path, text.replace("missing.npz", "nan.npz")))
    assert info.value.key == "data"


def test_experiments_run_quick(tmp_path):
    pytest.importorskip("sklearn")
    from gtvcvx.experiments import registry
    from gtvcvx.experiments.rkhs import paper

    assert {"rkhs_federated_ellipses", "rkhs_breast_cancer", "rkhs_paper"} <= set(registry())
    out = paper({}, tmp_path, scale="quick")
    assert (tmp_path / "federated_ellipses.png").stat().st_size > 0
    assert out.measured["ellipses_max_rel_gap"] <= 1e-6
    assert out.measured["breast_cancer_max_rel_gap"] <= 1e-6
    assert 0 < out.measured["ellipses_communication"] <= 1
    runs = out.tables["federated_ellipses_runs"]
    assert sorted(runs["n"].unique()) == [45, 90] and (runs["statuses"] == "optimal").all()
    assert "| N |" in out.markdown and "RBF SVM" in out.markdown
    with pytest.raises(ValueError, match=r"unknown key\(s\) \[.sizes_.\]"):
        paper({"ellipses": {"sizes_": [9]}}, tmp_path, scale="quick")
    spec = load_spec(ROOT / "problems" / "rkhs" / "paper.toml")
    assert spec.experiment == "rkhs_paper" and spec.output == "rkhs.md"
