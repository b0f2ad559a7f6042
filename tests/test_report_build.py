"""gtvcvx.report.build_report: per-spec files, index pages, experiments, reproducibility."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

import gtvcvx.experiments as experiments
from gtvcvx.experiments import ExperimentOutput
from gtvcvx.report import build_report
from gtvcvx.spec import SpecError

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "problems/quick"


def toy_experiment(params, out_dir, *, scale="default", studies=None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [0, params.get("slope", 1.0)])
    fig.savefig(Path(out_dir) / "toy.png")
    plt.close(fig)
    table = pd.DataFrame({"k": [1, 2], "ari": [0.5, 0.9]})
    return ExperimentOutput(title="Toy experiment", markdown="### Result\n\n| k | ari |\n|---|---|\n| 1 | 0.5 |\n\n"
                            "![toy](toy.png)\n", tables={"sweep": table}, figures=[Path("toy.png")],
                            measured={"best_ari": 0.9, "quick": float(scale == "quick")})


@pytest.fixture
def toy_registry(monkeypatch):
    monkeypatch.setattr(experiments, "registry", lambda: {"toy": toy_experiment})


def write_experiment_spec(path, **checks):
    lines = ['kind = "experiment"', 'name = "toy_study"', 'experiment = "toy"', "", "[params]", "slope = 2.0", ""]
    if checks:
        lines.append("[check]")
        lines += [f"{k} = {v}" for k, v in checks.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_report_writes_tables_figures_and_index(tmp_path, toy_registry):
    specs = tmp_path / "specs"
    specs.mkdir()
    shutil.copy(QUICK / "chain_l1.toml", specs / "chain_l1.toml")
    write_experiment_spec(specs / "toy.toml")
    out = tmp_path / "out"
    reports = build_report([specs], out, solvers=["fast"], scale="quick")
    assert [r.kind for r in reports] == ["gtv", "experiment"] and not any(r.error for r in reports)
    chain = out / "specs/quick_chain_l1"
    for name in ("comparison.csv", "comparison.json", "convergence.png", "report.md"):
        assert (chain / name).is_file(), name
    table = pd.read_csv(chain / "comparison.csv")
    assert list(table["solver"]) == ["fast"] and (table["status"] == "optimal").all()
    toy = out / "specs/toy_study"
    for name in ("experiment.md", "sweep.csv", "measured.json", "toy.png"):
        assert (toy / name).is_file(), name
    assert json.loads((toy / "measured.json").read_text()) == {"best_ari": 0.9, "quick": 1.0}
    index = (out / "index.md").read_text()
    assert "| solver | status | primal |" in index and "quick_chain_l1" in index and "toy_study" in index
    assert "specs/toy_study/toy.png" in index and "specs/quick_chain_l1/convergence.png" in index
    assert "## Environment" in index and "numpy" in index and "| quick_chain_l1 | 2 |" in index
    html = (out / "index.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "<table>" in html and "<td>fast (ref)</td>" in html
    assert html.count("data:image/png;base64,") >= 2 and 'src="specs/' not in html
    summary = pd.read_csv(out / "specs/summary.csv")
    assert set(summary["spec"]) == {"quick_chain_l1"}
    record = json.loads((out / "specs/report.json").read_text())
    assert record["specs"][1]["measured"]["best_ari"] == 0.9
    assert not list(out.rglob(".*.tmp"))  # atomic writes leave no temporary files


def test_report_numbers_are_reproducible(tmp_path):
    spec = QUICK / "chain_l1.toml"
    timing = ("setup_time", "solve_time", "certify_time", "wall_time", "peak_rss_delta_mb", "peak_traced_mb")
    tables = []
    for run in ("a", "b"):
        build_report([spec], tmp_path / run, solvers=["fast", "SCS"], formats=["csv"])
        tables.append(pd.read_csv(tmp_path / run / "specs/quick_chain_l1/comparison.csv"))
        assert not (tmp_path / run / "index.md").exists()  # only the requested formats
    a, b = (t.drop(columns=[c for c in timing if c in t.columns]) for t in tables)
    pd.testing.assert_frame_equal(a, b)


def test_report_rejects_bad_input_before_running(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text((QUICK / "chain_l1.toml").read_text().replace("lam = 0.1", "lam = -1"))
    with pytest.raises(SpecError, match="problem.lam"):
        build_report([QUICK / "chain_l1.toml", bad], tmp_path / "out")
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="format"):
        build_report([QUICK / "chain_l1.toml"], tmp_path / "out", formats=["pdf"])


def test_a_crashing_experiment_is_reported_not_raised(tmp_path, monkeypatch):
    def broken(params, out_dir, *, scale="default", studies=None):
        raise RuntimeError("boom")

    monkeypatch.setattr(experiments, "registry", lambda: {"toy": broken})
    spec = write_experiment_spec(tmp_path / "toy.toml")
    reports = build_report([spec], tmp_path / "out", formats=["md"])
    assert reports[0].error == "RuntimeError: boom"
    assert "**error:** RuntimeError: boom" in (tmp_path / "out/index.md").read_text()


def test_index_shows_the_table1_benchmark_when_the_report_directory_holds_one(tmp_path):
    """The Table I instance is above a report run's reference size limit; its comparison comes from
    ``bench/gtv.csv`` (written by ``gtvcvx bench gtv``), the same when built and when re-rendered."""
    from gtvcvx.report import render_report

    out = tmp_path / "out"
    (out / "bench").mkdir(parents=True)
    (out / "bench/gtv.csv").write_text(
        "solver,status,certified_rel_gap,total_s,time_ratio_vs_fast,peak_MiB,part\n"
        "fast,optimal,3.6e-07,2.25,1.0,145,paper\nCVXPY+CLARABEL,optimal,3.8e-09,221,98.3,2493,paper\n"
        "fast,optimal,1e-4,25,1.0,1200,large\n")
    build_report([QUICK / "chain_l1.toml"], out, solvers=["fast"])
    index = (out / "index.md").read_text()
    assert "## Headline: the GTV paper's Table I instance" in index
    assert "| CVXPY+CLARABEL | optimal | 3.8e-09 | 221 | 98.3 | 2493 |" in index and "| large |" not in index
    render_report(out)
    assert (out / "index.md").read_text() == index
    (out / "bench/gtv.csv").write_text("not,a\nbench,table\n")  # a broken file is said, not fatal
    render_report(out)
    assert "could not be read as a `gtvcvx bench gtv` table" in (out / "index.md").read_text()


def recorded_study(params, out_dir, *, scale="default", studies=None):
    """A study that leaves a record: its text is a function of the record alone."""
    record = experiments.StudyRecord(study="toy", title="Recorded toy", params=dict(params),
                                     measured={"best_ari": 0.9}, tables={"sweep": pd.DataFrame({"k": [1, 2]})})
    path = record.save(out_dir)
    return ExperimentOutput(title=record.title, markdown=experiments.render_record(record), tables=record.tables,
                            measured=record.measured, record=path)


def test_render_rewrites_a_study_page_from_its_record_without_running_it(tmp_path, monkeypatch):
    from gtvcvx.report import render_report

    monkeypatch.setattr(experiments, "registry", lambda: {"toy": recorded_study})
    monkeypatch.setattr(experiments, "renderers", lambda: {"toy": lambda r: f"rows: {len(r.tables['sweep'])}"})
    spec = write_experiment_spec(tmp_path / "toy.toml")
    spec.write_text(spec.read_text().replace('experiment = "toy"', 'experiment = "toy"\noutput = "toy.md"'))
    out = tmp_path / "out"
    build_report([spec], out)
    assert (out / "toy/toy.json").is_file() and (out / "toy/toy.sweep.csv").is_file()
    assert "rows: 2" in (out / "toy.md").read_text()
    results = json.loads((out / "specs/results.json").read_text())["specs"][0]
    assert results["experiment_record"] == "toy/toy.json" and "toy/toy.sweep.csv" in results["files"]

    monkeypatch.setattr(experiments, "registry", lambda: {})  # nothing can run now
    monkeypatch.setattr(experiments, "renderers", lambda: {"toy": lambda r: f"{len(r.tables['sweep'])} rows"})
    render_report(out)
    for page in ("toy.md", "specs/toy_study/experiment.md", "specs/toy_study/report.md"):
        text = (out / page).read_text()
        assert "2 rows" in text and "rows: 2" not in text, page

    doc = json.loads((out / "specs/results.json").read_text())
    doc["specs"][0]["experiment_record"] = "../elsewhere/toy.json"
    (out / "specs/results.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="leaves the report directory"):
        render_report(out)
    (tmp_path / "elsewhere").mkdir()
    (out / "link").symlink_to(tmp_path / "elsewhere")  # a symbolic link out of the report is refused too
    doc["specs"][0]["experiment_record"] = "link/toy.json"
    (out / "specs/results.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="leaves the report directory .*symbolic link"):
        render_report(out)
