"""gtvcvx.report.compare: one certified row per solver, failures as rows, solver selection."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gtvcvx as g
from gtvcvx.report import MemoryMeter, compare, problem_size, run_comparison, select_solvers
from gtvcvx.render.html import markdown_to_html
from gtvcvx import load_spec
from gtvcvx.tasks import ExperimentSpec

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "problems/quick"


def test_compare_spec_rows_are_certified_and_agree():
    spec = load_spec(QUICK / "sbm_nlasso.toml")
    table = compare(spec, ("fast", "CLARABEL", "SCS"))
    assert isinstance(table, pd.DataFrame)
    assert list(table["solver"]) == ["fast", "CLARABEL", "SCS"]
    assert (table["status"] == "optimal").all()
    for col in ("primal", "dual", "gap", "rel_gap", "objective_error", "solution_error", "mse", "setup_time",
                "solve_time", "iterations", "peak_rss_delta_mb", "reference", "message"):
        assert col in table.columns, col
    assert (table["rel_gap"] <= 1e-5).all() and (table["dual"] <= table["primal"]).all()
    # weak duality across solvers: every certified lower bound is below every primal value
    assert table["dual"].max() <= table["primal"].min() + 1e-12
    assert table["reference"].sum() == 1
    ref = table[table["reference"]].iloc[0]
    assert ref["objective_error"] == 0 and ref["solution_error"] == 0
    assert (table["objective_error"] < 1e-5).all() and (table["solution_error"] < 1e-3).all()
    assert table.attrs["memory"] in ("rss", "tracemalloc")


def test_failing_or_missing_solvers_are_rows_not_exceptions():
    spec = load_spec(QUICK / "chain_l1.toml")
    table = compare(spec, ("fast", "NO_SUCH_BACKEND"), memory="tracemalloc")
    missing = table[table["solver"] == "NO_SUCH_BACKEND"].iloc[0]
    assert missing["status"] == "solver_error" and "not installed" in missing["message"]
    assert np.isnan(missing["primal"])
    assert "peak_traced_mb" in table.columns
    # a backend stopped by an iteration limit keeps its status; its W is still certified honestly
    comp = run_comparison(spec.problem, ("SCS",), memory=None, time_limit=None)
    assert comp.table.iloc[0]["status"] in ("optimal", "inaccurate", "max_iter")


def test_skip_rows_and_the_size_rule():
    spec = load_spec(QUICK / "blobs_knn.toml")
    plan = dict(select_solvers(spec))
    assert plan == {"fast": "", "CLARABEL": "", "SCS": ""}
    plan = dict(select_solvers(spec, size_limits={"CLARABEL": 10, "SCS": 10**9}))
    assert plan["fast"] == "" and plan["SCS"] == "" and "reference limit 10" in plan["CLARABEL"]
    assert dict(select_solvers(spec, ["fast", "clarabel"], size_limits={"CLARABEL": 1})) == {"fast": "", "CLARABEL": ""}
    table = compare(spec, ("fast",), skip={"CLARABEL": "skipped: too big"})
    row = table[table["solver"] == "CLARABEL"].iloc[0]
    assert row["status"] == "skipped" and row["message"] == "skipped: too big"
    assert problem_size(spec.problem) == spec.problem.n * 2 + spec.problem.n_edges * 2 + spec.problem.n


def test_compare_bare_problem_and_clustering_accuracy():
    spec = load_spec(QUICK / "blobs_knn.toml")
    table = compare(spec, ("fast",))
    assert "mse" in table.columns
    try:
        from gtvcvx.clustering import cluster_labels  # noqa: F401
    except ImportError:
        assert "ari" not in table.columns
    else:
        assert 0.0 <= table.iloc[0]["ari"] <= 1.0
    bare = compare(spec.problem, ("fast",))
    assert "mse" not in bare.columns and bare.iloc[0]["status"] == "optimal"


def test_logistic_accuracy_and_experiment_specs_are_not_compared():
    table = compare(load_spec(QUICK / "logistic_star.toml"), ("fast",))
    assert 0.5 <= table.iloc[0]["accuracy"] <= 1.0
    with pytest.raises(ValueError, match="experiment specs are run"):
        compare(ExperimentSpec(name="x", path=Path("x.toml"), experiment="e"))
    with pytest.raises(TypeError):
        compare("problems/quick/chain_l1.toml")


def test_memory_meter_measures_an_allocation():
    with MemoryMeter("tracemalloc") as meter:
        block = np.ones(2_000_000)
    assert meter.peak_mb >= 15 and block.sum() > 0
    with MemoryMeter("rss") as meter:
        block = np.ones(4_000_000)
        block += 1
    assert meter.peak_mb >= 0
    with pytest.raises(ValueError):
        MemoryMeter("psutil")


def test_markdown_to_html_tables_images_and_escaping(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1])
    fig.savefig(tmp_path / "f.png")
    plt.close(fig)
    md = ("# Title <x>\n\nSome `code` and **bold** [link](a.md).\n\n| a | b |\n|---|---|\n| 1 | x\\|y |\n\n"
          "- item one\n- item two\n\n![fig](f.png)\n\n```\nraw <b>\n```\n")
    html = markdown_to_html(md, base=tmp_path)
    assert "<h1" in html and "Title &lt;x&gt;" in html
    assert "<table>" in html and "<td>x|y</td>" in html
    assert "<code>code</code>" in html and "<strong>bold</strong>" in html and 'href="a.md"' in html
    assert "<li>item one</li>" in html and "data:image/png;base64," in html
    assert "raw &lt;b&gt;" in html


def test_progress_bar_lines(capsys):
    import io

    from gtvcvx.progress import Progress

    stream = io.StringIO()
    bar = Progress(2, stream=stream, interactive=False)
    bar.start("spec: fast")
    bar.advance()
    bar.start("spec: CLARABEL")
    bar.advance()
    bar.close()
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("[") and "0/2" in lines[0] and "spec: fast" in lines[0]
    assert "2/2" in lines[-1] and "done in" in lines[-1]
    quiet = io.StringIO()
    off = Progress(3, stream=quiet, enabled=False)
    off.start("x")
    off.close()
    assert quiet.getvalue() == ""
    tty = io.StringIO()
    live = Progress(1, stream=tty, interactive=True)
    live.start("a")
    live.advance()
    live.close()
    assert "\r" in tty.getvalue() and tty.getvalue().endswith("\n")


def test_compare_problem_without_spec_uses_default_options():
    problem = g.GTVProblem(g.graphs.chain(4), g.SquaredDistance([[0.0], [0.1], [2.0], [2.1]]), g.Norm1(), 0.05)
    table = compare(problem, ("fast", "CLARABEL"), memory=None)
    assert (table["status"] == "optimal").all()
    assert not any(c.startswith("peak_") for c in table.columns)


def test_progress_heartbeat_substeps_and_estimate():
    """A long step is never silent: heartbeat lines with the substep position, time in the step and an ETA."""
    import io
    import time

    from gtvcvx.progress import Progress, substep

    now = [0.0]
    stream = io.StringIO()
    bar = Progress(4, stream=stream, interactive=False, heartbeat=0.02, clock=lambda: now[0])
    with bar:
        bar.start("spec_a: fast")
        now[0] = 10.0
        bar.advance()
        bar.start("study: experiment")
        substep("lam", 3, 12)  # routed to the bar of the enclosing `with`
        now[0] = 45.0
        deadline = time.monotonic() + 10.0  # the heartbeat prints while the step runs
        while "in this step" not in stream.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
        bar.advance()
    substep("ignored", 1, 2)  # outside a run: no-op
    lines = stream.getvalue().splitlines()
    beats = [line for line in lines if "study: experiment (lam 3/12)" in line and "in this step" in line]
    assert beats, lines
    assert "[35.0s in this step]" in beats[0]  # clock 45 - step start 10
    assert "~2m15s left" in beats[0]  # 45 s for the 1 finished step of 4: 3 more at 45 s
    assert lines[-1].endswith("done in 45.0s") and "ignored" not in stream.getvalue()
