"""``gtvcvx report``: the whole problems/ directory from scratch, progress, exit codes."""

import json
from pathlib import Path

import pandas as pd
import pytest

from gtvcvx.cli import main
from gtvcvx import load_spec
from gtvcvx.experiments import SCALES
from gtvcvx.spec import find_specs

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "problems/quick"


def stub_experiments(monkeypatch):
    """Replace every registered experiment by a stub: the studies themselves (minutes even in
    quick mode) are tested by their authors; here only the report's handling of them is."""
    import gtvcvx.experiments as experiments
    from gtvcvx.experiments import ExperimentOutput

    names = list(experiments.registry())

    def stub(params, out_dir, *, scale="default", studies=None):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(2, 2))
        ax.plot([0, 1], [1, 0])
        ax.set_title(Path(out_dir).name)  # distinct bytes per experiment
        fig.savefig(Path(out_dir) / "stub.png", dpi=40)
        plt.close(fig)
        return ExperimentOutput(title="Stub study", markdown="### Stub\n\n![stub](stub.png)\n",
                                tables={"sweep": pd.DataFrame({"k": [1, 2], "ari": [0.5, 0.9]})},
                                figures=[Path(out_dir) / "stub.png"], measured={"value": 1.0, "scale": SCALES.index(scale)})

    monkeypatch.setattr(experiments, "registry", lambda: {name: stub for name in names})


@pytest.mark.slow
def test_report_on_all_problems_from_scratch(tmp_path, capsys, monkeypatch):
    stub_experiments(monkeypatch)
    specs = [load_spec(path) for path in find_specs([ROOT / "problems"])]
    out = tmp_path / "reports"
    code = main(["report", str(ROOT / "problems"), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "[" in err and "done in" in err and "->" in err  # progress on stderr
    index = (out / "index.md").read_text()
    html = (out / "index.html").read_text()
    record = json.loads((out / "specs/report.json").read_text())
    assert len(record["specs"]) >= len(specs)
    for spec in specs:
        assert spec.name in index and spec.name in html
        entry = next(s for s in record["specs"] if s["name"] == spec.name)
        assert not entry["error"], entry["error"]
        spec_dir = out / "specs" / spec.name
        assert (spec_dir / "report.md").is_file()
        if spec.kind == "experiment":
            for name in ("experiment.md", "sweep.csv", "measured.json"):
                assert (spec_dir / name).is_file(), name
            assert entry["measured"] == {"value": 1.0, "scale": SCALES.index("default")}
            # figures go next to the experiment's own page when the spec names one (paper.md -> paper/)
            figure_dir = Path(spec.output).with_suffix("").as_posix() if spec.output else f"specs/{spec.name}"
            assert (out / figure_dir / "stub.png").is_file()
            assert f"]({figure_dir}/stub.png)" in index
            assert f"](../../{figure_dir}/stub.png)" in (spec_dir / "report.md").read_text()
            if spec.output:  # the experiment's own page, links relative to it
                page = (out / spec.output).read_text()
                assert page.startswith("# Stub study") and f"]({figure_dir}/stub.png)" in page
            continue
        table = pd.read_csv(spec_dir / "comparison.csv")
        assert table.loc[table["solver"] == "fast", "status"].item() == "optimal"
        assert (spec_dir / "convergence.png").stat().st_size > 1000
        # skipped references are rows with the reason, never silently missing
        for _, row in table[table["status"] == "skipped"].iterrows():
            assert "reference limit" in row["message"]
    assert html.count("data:image/png;base64,") >= 3 and "<table>" in html
    assert "## Environment" in index and "Solver selection:" in index


@pytest.mark.parametrize("flags, scale", [([], "default"), (["--quick"], "quick"), (["--full"], "full")])
def test_report_runs_experiments_at_the_requested_scale_and_records_it(tmp_path, capsys, monkeypatch, flags, scale):
    stub_experiments(monkeypatch)
    out = tmp_path / "o"
    assert main(["report", str(ROOT / "problems/paper/study_3_chain.toml"), "--out", str(out), "--quiet",
                 *flags]) == 0
    doc = json.loads((out / "specs/results.json").read_text())
    assert doc["scale"] == scale and doc["specs"][0]["measured"]["scale"] == SCALES.index(scale)
    assert all(flag in doc["command"] for flag in flags)
    assert f"Experiment specs ran at scale `{scale}`" in (out / "index.md").read_text()
    with pytest.raises(SystemExit) as info:  # one scale per run
        main(["report", str(QUICK), "--out", str(out), "--quick", "--full"])
    assert info.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


def test_scaled_params_order_protocol_then_scale_then_spec():
    from gtvcvx.experiments import scaled_params

    protocol, shrink = {"reps": 5, "sizes": [1, 2, 3], "seed": 0}, {"reps": 2}
    assert scaled_params(protocol, shrink, None, "full", context="x") == protocol
    assert scaled_params(protocol, shrink, {}, "default", context="x")["reps"] == 2
    assert scaled_params(protocol, shrink, {"reps": 7}, "default", context="x")["reps"] == 7  # the spec wins
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['rep'\] for x; expected some of"):
        scaled_params(protocol, shrink, {"rep": 1}, "full", context="x")
    with pytest.raises(ValueError, match="scale must be one of 'quick', 'default', 'full', got 'huge'"):
        scaled_params(protocol, shrink, {}, "huge", context="x")


def test_report_usage_errors_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text((QUICK / "chain_l1.toml").read_text().replace('penalty = "norm1"', 'penalty = "norm7"'))
    assert main(["report", str(bad), "--out", str(tmp_path / "o")]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.count("\n") == 0 and str(bad) in err and "problem.penalty" in err and "Traceback" not in err
    assert main(["report", str(QUICK), "--out", str(tmp_path / "o"), "--format", "md,pdf"]) == 2
    assert "--format" in capsys.readouterr().err
    assert main(["report", str(QUICK), "--out", str(tmp_path / "o"), "--solvers", "fast,gurobi9"]) == 2
    assert "gurobi9" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["report", str(QUICK)])  # --out is required
    assert info.value.code == 2
    assert not (tmp_path / "o").exists()


def test_report_quiet_formats_and_explicit_solvers(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["report", str(QUICK / "chain_l1.toml"), "--out", str(out), "--quiet", "--format", "md",
                 "--format", "html", "--solvers", "fast", "--memory", "tracemalloc"]) == 0
    assert capsys.readouterr().err == ""
    assert (out / "index.md").is_file() and (out / "index.html").is_file()
    assert not (out / "specs/summary.csv").exists() and not (out / "specs/report.json").exists()
    index = (out / "index.md").read_text()
    assert "--solvers fast" in index and "--memory tracemalloc" in index and "peak_traced_mb" in index
    assert "| fast (ref) | optimal |" in index


def test_render_rebuilds_every_page_from_the_results_file_without_solving(tmp_path, capsys, monkeypatch):
    out = tmp_path / "o"
    assert main(["report", str(QUICK / "chain_l1.toml"), str(QUICK / "logistic_star.toml"), "--out", str(out),
                 "--quiet", "--format", "md,json"]) == 0
    results = json.loads((out / "specs/results.json").read_text())
    assert results["format"] == "gtvcvx-report-results/1"
    assert [s["name"] for s in results["specs"]] == ["quick_chain_l1", "quick_logistic_star"]
    assert "fast" in [row["solver"] for row in results["specs"][0]["rows"]]
    pages = {p: p.read_bytes() for p in [out / "index.md", *sorted(out.glob("specs/*/report.md"))]}
    record = (out / "specs/report.json").read_bytes()
    for page in pages:
        page.unlink()

    def no_solving(*args, **kwargs):
        raise AssertionError("render must not load specs or run tasks")

    monkeypatch.setattr("gtvcvx.report.build.task_for", no_solving)
    monkeypatch.setattr("gtvcvx.report.build.load_spec", no_solving)
    assert main(["render", str(out), "--format", "md,html,csv,json"]) == 0
    assert "gtvcvx render: 2 spec(s)" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in pages} == pages  # the same bytes as the run wrote
    assert (out / "specs/report.json").read_bytes() == record
    assert (out / "index.html").is_file() and (out / "specs/summary.csv").is_file()  # formats the run skipped
    summary = pd.read_csv(out / "specs/summary.csv")
    assert set(summary["spec"]) == {"quick_chain_l1", "quick_logistic_star"}
    assert (summary.loc[summary["solver"] == "fast", "status"] == "optimal").all()


def test_render_refuses_a_directory_without_results_and_unsafe_records(tmp_path, capsys):
    assert main(["render", str(tmp_path)]) == 2
    assert "specs/results.json: no results file" in capsys.readouterr().err
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs/results.json").write_text('{"format": "other"}')
    assert main(["render", str(tmp_path)]) == 2
    assert "expected a gtvcvx report results file" in capsys.readouterr().err
    (tmp_path / "specs/results.json").write_text(json.dumps({"format": "gtvcvx-report-results/1", "specs": [
        {"name": "x", "slug": "../../escape", "path": "x.toml", "kind": "gtv"}]}))
    assert main(["render", str(tmp_path)]) == 2
    assert "unsafe folder name '../../escape'" in capsys.readouterr().err
    assert not (tmp_path.parent / "escape").exists()
    (tmp_path / "specs/results.json").write_text(json.dumps({"format": "gtvcvx-report-results/1", "specs": [
        {"name": "x", "slug": "x", "path": "x.toml", "kind": "gtv", "measured": [1, 2]}]}))
    assert main(["render", str(tmp_path)]) == 2  # a clear error, not a traceback
    assert "specs/results.json: specs[0].measured: expected" in capsys.readouterr().err
