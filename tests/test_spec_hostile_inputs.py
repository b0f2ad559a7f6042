"""Hostile or malformed specs and data files get a clear error naming the file and key, never a
silently wrong answer or a traceback (red-team findings on the spec loader and the data readers)."""

import json
from pathlib import Path

import numpy as np
import pytest

import gtvcvx as g

from gtvcvx.graph import Graph

from gtvcvx import load_spec
from gtvcvx.cli import main
from gtvcvx.io import read_samples_csv
from gtvcvx.spec import SpecError, Table, find_specs

BOM = "\ufeff"


def _write_spec(folder: Path, *, name: str = "chain", graph: str = 'generator = "chain"\nn = 4',
                data: str = 'generator = "linear"\nd = 2\nm = 3', lam: str = "0.1", extra: str = "",
                filename: str = "spec.toml", prefix: str = "") -> Path:
    """A small GTV spec (a chain with linear data unless told otherwise) written to ``folder/filename``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / filename
    path.write_text(f'{prefix}name = {json.dumps(name)}\nseed = 1\n[graph]\n{graph}\n[data]\n{data}\n'
                    f'[problem]\nloss = "squared_error"\npenalty = "norm2"\nlam = {lam}\n{extra}', encoding="utf-8")
    return path


SAMPLES = "node,y,x0,x1\n0,1.0,1.0,0.0\n1,2.0,0.0,1.0\n2,0.5,1.0,1.0\n"


# --- 1. samples CSV: a row with another field count than the header --------------------------
@pytest.mark.parametrize("row, fields", [("0,2,2,1", 4), ("0,2", 2)])
def test_samples_csv_row_with_another_field_count_than_the_header_is_refused(tmp_path, capsys, row, fields):
    csv = tmp_path / "samples.csv"
    csv.write_text(f"node,y,x0\n{row}\n1,1,0\n")
    with pytest.raises(ValueError, match=rf"samples.csv:2: line 2 has {fields} fields, the header 3"):
        read_samples_csv(csv)
    (tmp_path / "edges.csv").write_text("0,1\n")
    spec = _write_spec(tmp_path, graph='file = "edges.csv"\nn = 2', data='file = "samples.csv"')
    assert main(["solve", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "data.file" in err and "line 2 has" in err and "Traceback" not in err


# --- 2. byte-order marks and a first line that is neither a header nor data ----------------------
@pytest.mark.parametrize("text", [BOM + SAMPLES, BOM + "# a comment\n" + SAMPLES])
def test_samples_csv_with_a_byte_order_mark_is_read(tmp_path, text):
    csv = tmp_path / "samples.csv"
    csv.write_text(text, encoding="utf-8")
    arrays = read_samples_csv(csv)
    np.testing.assert_array_equal(arrays["node"], [0, 1, 2])
    np.testing.assert_array_equal(arrays["X"], [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])


def test_spec_file_with_a_byte_order_mark_is_read(tmp_path):
    spec = load_spec(_write_spec(tmp_path, prefix=BOM))
    assert spec.name == "chain" and spec.problem.n == 4


def test_edge_list_whose_first_line_has_a_typo_is_refused_not_taken_for_a_header(tmp_path):
    (tmp_path / "edges.csv").write_text("0,1,1.O\n1,2,1\n2,3,1\n")
    spec = _write_spec(tmp_path, graph='file = "edges.csv"\nn = 4')
    with pytest.raises(SpecError, match=r"graph.file: .*edges.csv:1: expected numbers .*field 3 of 3 is not a number"):
        load_spec(spec)
    (tmp_path / "edges.csv").write_text("i,j,weight\n0,1,1\n1,2,1\n2,3,1\n")  # a real header is still skipped
    assert load_spec(spec).problem.n_edges == 3


def test_edge_list_starting_with_a_byte_order_mark_keeps_its_first_edge(tmp_path):
    """Saved by a spreadsheet with a byte-order mark, line 1 read as a header and its edge was lost."""
    (tmp_path / "edges.csv").write_text(BOM + "0,1,1\n1,2,1\n2,3,1\n", encoding="utf-8")
    spec = _write_spec(tmp_path, graph='file = "edges.csv"\nn = 4')
    assert load_spec(spec).problem.n_edges == 3
    assert Graph.from_csv(tmp_path / "edges.csv").n_edges == 3


# --- 3. tracebacks from the loader ------------------------------------------------------------------
@pytest.mark.parametrize("sizes", ['"abc"', '[3, "a"]', "{a = 1}"])
def test_sbm_sizes_of_the_wrong_kind_are_refused_by_key(tmp_path, capsys, sizes):
    spec = _write_spec(tmp_path, graph=f'generator = "sbm"\nsizes = {sizes}\np_in = 0.5\np_out = 0.1')
    with pytest.raises(SpecError, match=r"graph.sizes: expected a non-empty list of integers"):
        load_spec(spec)
    assert main(["solve", str(spec)]) == 2
    assert "graph.sizes" in capsys.readouterr().err


def test_sbm_sizes_as_one_integer_is_one_block(tmp_path):
    spec = _write_spec(tmp_path, graph='generator = "sbm"\nsizes = 5\np_in = 0.5\np_out = 0.1')
    assert load_spec(spec).problem.n == 5


def test_toml_nested_too_deeply_is_refused_with_a_message(tmp_path, capsys):
    spec = tmp_path / "deep.toml"
    spec.write_text('name = "deep"\nx = ' + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(SpecError, match="nest too deeply"):
        load_spec(spec)
    assert main(["solve", str(spec)]) == 2
    assert "nest too deeply" in capsys.readouterr().err


@pytest.mark.parametrize("box", [[[-1e308, 1e308], [0.0, 1.0]], [[0.0, 1.0], [-1e200, -1e199]]])
def test_box_bounds_need_a_finite_width_of_sane_magnitude(tmp_path, box):
    table = Table(tmp_path / "spec.toml", "data", {"box": box})
    with pytest.raises(SpecError, match=r"data.box: pair \d .*expected bounds within"):
        table.bounds("box", dim=2)
    assert Table(tmp_path / "spec.toml", "data", {"box": [[-3, 3], [0, 1e6]]}).bounds("box", dim=2) == \
        [(-3.0, 3.0), (0.0, 1e6)]


def test_rkhs_spec_box_beyond_the_data_magnitude_is_refused_by_key(tmp_path, capsys):
    """The red-team's RKHS spec: ``box = [[-1e308, 1e308], ...]`` raised OverflowError from the ellipse sampler."""
    spec = tmp_path / "box.toml"
    spec.write_text('kind = "rkhs"\nname = "box"\nseed = 1\n[data]\ngenerator = "ellipses"\nn = 20\n'
                    'box = [[-1e308, 1e308], [-1e308, 1e308]]\n[dictionary]\ntype = "grid"\n'
                    'bounds = [[-18.0, 9.0], [-10.0, 20.0]]\npoints_per_dim = 4\nwidths = [3.0]\n'
                    '[problem]\ngamma = 0.5\neps = 0.1\n')
    assert main(["solve", str(spec)]) == 2
    assert "box.toml: data.box: pair 0 [-1e+308, 1e+308]: expected bounds within" in capsys.readouterr().err


# --- 4. line breaks in a spec's name (and keys) ----------------------------------------------------
def test_line_break_in_a_spec_name_is_refused_by_key(tmp_path, capsys):
    folder = tmp_path / "specs"
    spec = _write_spec(folder, name="quick chain\n# Injected heading\nPASS  forged")
    with pytest.raises(SpecError, match=r"spec.toml: name: holds a line break"):
        load_spec(spec)
    assert main(["check", str(folder)]) == 2
    captured = capsys.readouterr()
    assert "\n# Injected" not in captured.out + captured.err and "\nPASS  forged" not in captured.out + captured.err
    for name in ("tab\there", "para\u2029graph"):
        with pytest.raises(SpecError, match="name: holds a line break or tab"):
            load_spec(_write_spec(folder, name=name))
    quoted_key = _write_spec(folder, extra='[check]\n"max_rel\\ngap" = 1e-6\n')
    with pytest.raises(SpecError, match=r"check.max_rel\ngap: holds a line break"):
        load_spec(quoted_key)


# --- 5. spec discovery stays inside the searched folder ----------------------------------------
def test_spec_symlinked_out_of_a_searched_folder_is_refused(tmp_path, capsys):
    specs = tmp_path / "specs"
    _write_spec(specs, filename="a.toml")
    private = _write_spec(tmp_path / "outside", name="PRIVATE", filename="private.toml")
    (specs / "evil.toml").symlink_to(Path("..") / "outside" / "private.toml")
    with pytest.raises(SpecError, match=r"evil.toml: a symbolic link leads outside the searched directory"):
        find_specs([specs])
    assert main(["check", str(specs)]) == 2
    captured = capsys.readouterr()
    assert "evil.toml" in captured.err and "PRIVATE" not in captured.out + captured.err
    assert find_specs([specs / "evil.toml"]) == [specs / "evil.toml"]  # named by the user: allowed
    assert find_specs([private.parent]) == [private]


# --- 6. backend option tables in [solve] ---------------------------------------------------------
def test_misspelled_backend_table_in_solve_is_refused_with_a_suggestion(tmp_path, capsys):
    spec = _write_spec(tmp_path, extra="[solve]\ntol = 1e-6\n[solve.CLARBEL]\nmax_iter = 1\n")
    with pytest.raises(SpecError, match=r"solve.CLARBEL: unknown backend .*did you mean 'CLARABEL'"):
        load_spec(spec)
    assert main(["solve", str(spec), "--solver", "CLARABEL"]) == 2
    assert "solve.CLARBEL" in capsys.readouterr().err
    with pytest.raises(SpecError, match=r"solve.NOT_A_SOLVER: unknown backend"):
        load_spec(_write_spec(tmp_path, extra="[solve.NOT_A_SOLVER]\nmax_iter = 1\n"))
    known = load_spec(_write_spec(tmp_path, extra="[solve.clarabel]\nmax_iter = 5\n"))
    assert known.solve_options["backend_options"] == {"CLARABEL": {"max_iter": 5}}


# --- 7. errors that named the wrong thing, or nothing -----------------------------------------------
def test_unknown_solver_in_a_spec_names_the_spec_key(tmp_path, capsys):
    spec = _write_spec(tmp_path, extra='[solve]\nsolver = "../../etc"\n')
    with pytest.raises(SpecError, match=r"solve.solver: expected 'fast' or a CVXPY backend name, got '../../etc'"):
        load_spec(spec)
    assert main(["solve", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "solve.solver" in err and "--solver" not in err


def test_tiny_time_limit_names_the_spec_key(tmp_path):
    with pytest.raises(SpecError, match=r"solve.time_limit: expected a number >= 0.001, got 1e-300"):
        load_spec(_write_spec(tmp_path, extra="[solve]\ntime_limit = 1e-300\n"))


def test_lam_near_the_largest_float_is_solved_without_scaling_it_to_inf(tmp_path):
    """P(0) of these data is below 1, so the solver scales labels and lam by a power of two (here 2): lam = 1e308
    became inf and the solve raised "lam must be a finite number >= 0, got inf". The scale now stays where the
    scaled capacities are finite."""
    from gtvcvx.solvers._scaling import label_scale

    problem = load_spec(_write_spec(tmp_path, graph='generator = "chain"\nn = 3', lam="1e308")).problem
    assert label_scale(problem) == 1.0
    assert label_scale(g.GTVProblem(problem.graph, problem.loss, problem.penalty, 1.0)) > 1.0
    result = g.solve(problem, max_iter=20)
    assert result.status in ("optimal", "max_iter") and np.isfinite(result.primal)


def test_integer_literal_too_long_to_read_names_the_key_and_line(tmp_path, capsys):
    spec = _write_spec(tmp_path)
    spec.write_text(spec.read_text().replace("seed = 1", "seed = " + "9" * 5000))
    with pytest.raises(SpecError, match=r"spec.toml: seed: line 2: an integer literal of 5,000 digits"):
        load_spec(spec)
    assert main(["solve", str(spec)]) == 2
    assert "Exceeds the limit" not in capsys.readouterr().err


def test_experiment_params_of_the_wrong_kind_or_an_unbounded_size_are_refused():
    from gtvcvx.experiments import clustering, study_params

    defaults = (clustering.DEFAULTS, clustering.SCALED)

    def params(**given):
        return study_params("clustering_real_data", given, "quick", defaults)

    with pytest.raises(ValueError, match=r"params.n_lams = 100000000 .*expected an integer >= 0 and <= 4000"):
        params(n_lams=100_000_000)
    with pytest.raises(ValueError, match=r"params.datasets = 'iris' .*expected a list"):
        params(datasets="iris")
    with pytest.raises(ValueError, match=r"params.standardize = 1 .*expected true or false"):
        params(standardize=1)
    with pytest.raises(ValueError, match=r"params.tol = 'small' .*expected a finite number"):
        params(tol="small")
    assert params(n_lams=12, datasets=["iris"])["n_lams"] == 12


def test_experiment_params_are_checked_when_the_spec_loads(tmp_path, capsys):
    """`n_lams = 100000000` ran silently with memory growing until the study reached it; a study's own
    [params] are now checked by load_spec, before anything runs (exit 2 naming the file and key)."""
    spec = tmp_path / "study.toml"
    spec.write_text('kind = "experiment"\nname = "big"\nexperiment = "clustering_real_data"\n'
                    '[params]\nn_lams = 100000000\n')
    with pytest.raises(SpecError, match=r"study.toml: params: params.n_lams = 100000000 .*<= 4000"):
        load_spec(spec)
    assert main(["check", str(spec), "--quick"]) == 2
    assert "params.n_lams" in capsys.readouterr().err
    spec.write_text(spec.read_text().replace("n_lams = 100000000", 'datasets = "iris"'))
    with pytest.raises(SpecError, match=r"params.datasets = 'iris' .*expected a list"):
        load_spec(spec)
