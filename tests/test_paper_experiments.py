"""The paper-reproduction experiments: quick runs, spec/measured consistency, the flow certificate."""

from __future__ import annotations

from pathlib import Path

import pytest

from gtvcvx.experiments import StudyRecord, StudyStore, paper, registry, render_record
from gtvcvx import load_spec

SPEC_DIR = Path(__file__).resolve().parents[1] / "problems" / "paper"
STUDY_SPECS = sorted(SPEC_DIR.glob("study_*.toml"))


def _checked_names(spec):
    return {key.split("_", 1)[1] for key in spec.checks}  # max_<name> / min_<name>


@pytest.fixture(scope="module")
def quick_runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("paper")
    runs = {}
    studies = StudyStore()
    for spec_path in STUDY_SPECS:
        spec = load_spec(spec_path)
        runs[spec.experiment] = (spec, registry()[spec.experiment](dict(spec.params), out, scale="quick",
                                                                   studies=studies))
    return out, runs, studies


def test_study_specs_are_registered_and_match_defaults():
    assert len(STUDY_SPECS) == 8
    for spec_path in STUDY_SPECS:
        spec = load_spec(spec_path)
        assert spec.kind == "experiment" and spec.experiment in paper.EXPERIMENTS
        # one source of parameters: the specs override nothing, so the summary's defaults are theirs
        assert spec.params == {}, spec_path.name
        for scale in ("quick", "default"):  # the smaller scales only change declared parameters
            assert set(paper.SCALED[scale].get(spec.experiment, {})) <= set(paper.DEFAULTS[spec.experiment])
    assert set(paper.SCALED) == {"quick", "default"} and paper.SCALED["default"], "the main job shrinks a study"
    summary = load_spec(SPEC_DIR / "summary.toml")
    assert summary.experiment == "paper_reproduction" and summary.output == "paper.md"


@pytest.mark.parametrize("spec_path", STUDY_SPECS, ids=lambda p: p.stem)
def test_quick_run_returns_checked_measurements_and_figures(quick_runs, spec_path):
    out, runs, _ = quick_runs
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
    _, runs, _ = quick_runs
    t1 = runs["paper_sbm_table1"][1].measured
    assert t1["gtv_rel_gap"] <= 1e-6 and t1["gtv_ari"] == 1.0
    assert t1["ifca_mse"] < 1e-4 < t1["fedavg_mse"]  # IFCA with restarts recovers the two clusters
    guidance = runs["paper_lam_guidance"][1].measured
    assert guidance["prediction_violations"] == 0 and guidance["n_predicted"] >= 1
    # Theorem 2 evaluated at every lam: where condition (35) holds, bound (36) must hold
    assert guidance["thm2_bound_violations"] == 0
    guidance_table = runs["paper_lam_guidance"][1].tables["lam_guidance"]
    assert (guidance_table["thm2_bound"] > 0).all() and guidance_table["thm2_deviation"].notna().all()
    assert "**Theorem 2 as stated**" in runs["paper_lam_guidance"][1].markdown
    appendix = runs["paper_appendix_sbm"][1].measured
    assert appendix["max_rel_gap"] <= 1e-6
    assert appendix["noniid_norm2_mse"] < 1e-3 < appendix["noniid_squared_norm2_mse"]  # the paper's ordering
    star = runs["paper_star"][1].measured
    assert star["lam_critical"] > 0 and star["max_spread_above"] <= 1e-6 < 1e-3 <= star["min_spread_below"]
    fl = runs["paper_fl_algorithms"][1]
    assert fl.measured["fedrelax_rel_gap"] <= 1e-8
    privacy = fl.tables["fl_privacy"]
    assert privacy["excess_objective_mean"].is_monotonic_increasing  # more noise, less accuracy
    digits = runs["paper_digits"][1].measured
    assert digits["gtv_uncertified"] == 0


def test_summary_reuses_runs_with_the_same_parameters_and_checks_hold(quick_runs, tmp_path):
    out, runs, studies = quick_runs
    # every study wrote its record (parameters, measured values, tables) next to its figures
    record = StudyRecord.load(out / "paper_sbm_table1.json")
    assert record.measured == runs["paper_sbm_table1"][1].measured and record.params["seed"] == 0
    saved, ran = record.tables["table1"], runs["paper_sbm_table1"][1].tables["table1"]
    assert list(saved["method"]) == list(ran["method"])
    for column in ("weight_mse", "prediction_mse", "rel_gap"):  # CSV keeps every bit (%.17g)
        assert saved[column].astype(float).equals(ran[column].astype(float)), column
    # a run with other parameters must not leak into the summary (results never depend on call order)
    other = paper.sbm_k_clusters({"seed": 7}, tmp_path / "other", scale="quick", studies=studies)
    spec = load_spec(SPEC_DIR / "summary.toml")
    output = paper.paper_reproduction(dict(spec.params), tmp_path, scale="quick", studies=studies)
    summary = StudyRecord.load(output.record)
    assert summary.facts["ran_here"] == []  # nothing re-run: every study was run with these parameters
    assert set(summary.tables["runtime"]["study"]) == set(paper.RENDERERS) - {"paper_reproduction"}
    comparison = summary.tables["paper_vs_measured"]
    gtv_row = comparison[comparison["quantity"] == "Table I, GTV"].iloc[0]
    assert gtv_row["paper"] == paper.PAPER_VALUES["gtv"] and gtv_row["measured"] == pytest.approx(
        runs["paper_sbm_table1"][1].measured["gtv_mse"], rel=1e-15)
    assert set(_checked_names(spec)) <= set(output.measured)
    assert output.measured["table1_gtv_rel_gap"] == runs["paper_sbm_table1"][1].measured["gtv_rel_gap"]
    k_measured = runs["paper_sbm_k_clusters"][1].measured
    assert all(output.measured[f"kclusters_{k}"] == v for k, v in k_measured.items())
    assert other.measured != k_measured
    assert all((tmp_path / Path(f).name).is_file() for f in output.figures)
    # the summary's directory holds every study's record: its page renders again from there alone
    assert render_record(summary) == output.markdown


def test_summary_without_a_store_runs_every_study(tmp_path):
    output = paper.paper_reproduction({"paper_chain": {"repetitions": 1}}, tmp_path, scale="quick")
    assert StudyRecord.load(output.record).facts["ran_here"] == list(paper.RENDERERS)[:-1]


@pytest.mark.parametrize("spec_path", STUDY_SPECS, ids=lambda p: p.stem)
def test_study_text_renders_again_from_its_record_alone(quick_runs, spec_path):
    _, runs, _ = quick_runs
    output = runs[load_spec(spec_path).experiment][1]
    record = StudyRecord.load(output.record)
    assert render_record(record) == output.markdown
    assert record.figures == [Path(f).name for f in output.figures]


def test_a_study_record_refuses_foreign_files(tmp_path):
    (tmp_path / "x.json").write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match="expected a study record"):
        StudyRecord.load(tmp_path / "x.json")
    (tmp_path / "y.json").write_text('{"format": "gtvcvx-study/1", "study": "paper_chain", '
                                     '"tables": {"chain_summary": "../secret.csv"}}')
    with pytest.raises(ValueError, match="tables.chain_summary: expected a file name next to the record"):
        StudyRecord.load(tmp_path / "y.json")
    with pytest.raises(ValueError, match="no renderer for study 'nope'"):
        render_record(StudyRecord(study="nope", title="", params={}, measured={}))
