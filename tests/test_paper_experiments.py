"""The paper-reproduction experiments: quick runs, spec/measured consistency, the flow certificate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import gtvcvx as g
from gtvcvx.experiments import paper, registry
from gtvcvx import load_spec

SPEC_DIR = Path(__file__).resolve().parents[1] / "problems" / "paper"
STUDY_SPECS = sorted(SPEC_DIR.glob("study_*.toml"))


def _checked_names(spec):
    return {key.split("_", 1)[1] for key in spec.checks}  # max_<name> / min_<name>


@pytest.fixture(scope="module")
def quick_runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("paper")
    runs = {}
    for spec_path in STUDY_SPECS:
        spec = load_spec(spec_path)
        runs[spec.experiment] = (spec, registry()[spec.experiment](dict(spec.params), out, quick=True))
    return out, runs


def test_study_specs_are_registered_and_match_defaults():
    assert len(STUDY_SPECS) == 5
    for spec_path in STUDY_SPECS:
        spec = load_spec(spec_path)
        assert spec.kind == "experiment" and spec.experiment in paper.EXPERIMENTS
        assert spec.params == paper.DEFAULTS[spec.experiment], spec_path.name  # the summary's defaults = the specs
    summary = load_spec(SPEC_DIR / "summary.toml")
    assert summary.experiment == "paper_reproduction" and summary.output == "paper.md"


@pytest.mark.parametrize("spec_path", STUDY_SPECS, ids=lambda p: p.stem)
def test_quick_run_returns_checked_measurements_and_figures(quick_runs, spec_path):
    out, runs = quick_runs
    spec = load_spec(spec_path)
    _, output = runs[spec.experiment]
    missing = _checked_names(spec) - set(output.measured)
    assert not missing, f"{spec_path.name} checks unmeasured keys {sorted(missing)}"
    assert all(isinstance(v, float) for v in output.measured.values())
    assert output.figures and all(Path(f).is_file() for f in output.figures)
    for fig in output.figures:
        assert f"]({Path(fig).name})" in output.markdown
    assert output.tables and all(len(df) for df in output.tables.values())


def test_quick_results_make_sense(quick_runs):
    _, runs = quick_runs
    t1 = runs["paper_sbm_table1"][1].measured
    assert t1["gtv_rel_gap"] <= 1e-6 and t1["gtv_ari"] == 1.0
    assert t1["ifca_mse"] < 1e-4 < t1["fedavg_mse"]  # IFCA with restarts recovers the two clusters
    guidance = runs["paper_lam_guidance"][1].measured
    assert guidance["prediction_violations"] == 0 and guidance["n_predicted"] >= 1
    digits = runs["paper_digits"][1].measured
    assert digits["gtv_uncertified"] == 0


def test_summary_reuses_the_session_and_checks_hold(quick_runs, tmp_path):
    out, runs = quick_runs
    spec = load_spec(SPEC_DIR / "summary.toml")
    output = paper.paper_reproduction(dict(spec.params), tmp_path, quick=True)
    assert "Paper versus measured" in output.markdown
    assert set(_checked_names(spec)) <= set(output.measured)
    assert output.measured["table1_gtv_rel_gap"] == runs["paper_sbm_table1"][1].measured["gtv_rel_gap"]
    assert all((tmp_path / Path(f).name).is_file() for f in output.figures)


def test_flow_certificate_matches_the_gtv_solution():
    graph, labels = g.graphs.sbm([8, 8], 0.9, 0.1, seed=3)
    rng = np.random.default_rng(0)
    W_c = np.array([[1.0, 0.0, 2.0], [-1.0, 1.0, 0.0]])
    X = [rng.standard_normal((5, 3)) for _ in labels]
    y = [x @ W_c[c] + 0.01 * rng.standard_normal(5) for x, c in zip(X, labels)]
    problem = g.GTVProblem(graph, g.SquaredError(X, y), g.Norm2(), 0.05)
    cert = paper.flow_recovery_certificate(problem, labels)
    assert cert["separated"] and cert["certified"] and cert["congestion"] < 1
    W = g.solve(problem, tol=1e-9).W
    np.testing.assert_allclose(W, cert["v"][labels], atol=1e-4)
    assert not paper.flow_recovery_certificate(problem.with_lam(1e-6), labels)["certified"]
