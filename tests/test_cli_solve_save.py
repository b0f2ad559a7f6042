"""``gtvcvx solve SPEC --save result.npz`` and ``gtvcvx.io.load_result``: round trip and re-certification."""

from pathlib import Path

import re
import pytest

from gtvcvx.cli import main
from gtvcvx.io import load_result
from gtvcvx import load_spec
from gtvcvx.testing import assert_optimal, certify

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "problems/quick/sbm_nlasso.toml"


def test_saved_fast_result_round_trips_and_recertifies(tmp_path, capsys):
    path = tmp_path / "result.npz"
    assert main(["solve", str(QUICK), "--save", str(path)]) == 0
    assert f"saved       {path}" in capsys.readouterr().out
    result = load_result(path)
    spec = load_spec(QUICK)
    assert str(result.status) == "optimal" and result.solver == "fast"
    assert result.W.shape == (spec.problem.n, spec.problem.d) and result.U.shape == (spec.problem.n_edges, spec.problem.d)
    assert result.iterations > 0 and result.history is not None and "rel_gap" in result.history.columns
    assert {"conservation", "stationarity"} <= set(result.residuals)
    # the saved pair certifies to the saved gap, and W alone certifies as well
    cert = certify(spec.problem, result.W, result.U)
    assert cert.gap == pytest.approx(result.gap, rel=1e-6, abs=1e-14)
    assert certify(spec.problem, result.W).rel_gap <= 1e-6
    assert_optimal(spec.problem, result.W, rtol=1e-6)


def test_saved_cvxpy_result_carries_the_flows_that_certify_it(tmp_path):
    path = tmp_path / "clarabel.npz"
    assert main(["solve", str(QUICK), "--solver", "CLARABEL", "--save", str(path), "--json"]) == 0
    result = load_result(path)
    assert result.solver == "CLARABEL" and result.U is not None and result.rel_gap <= 1e-6
    spec = load_spec(QUICK)
    again = certify(spec.problem, result.W, result.U)  # the saved pair certifies on its own
    assert again.dual == result.dual and again.rel_gap <= 1e-6


def test_save_errors_exit_2(tmp_path, capsys):
    assert main(["solve", str(QUICK), "--save", str(tmp_path / "result.txt")]) == 2
    assert "saved as .npz" in capsys.readouterr().err
    not_npz = tmp_path / "x.npz"
    not_npz.write_text("hello")
    with pytest.raises(ValueError, match="not a valid .npz"):
        load_result(not_npz)


def test_solve_other_spec_kinds(capsys):
    assert main(["solve", str(ROOT / "problems/rkhs/quick.toml")]) == 0
    assert re.search(r"^status\s+optimal$", capsys.readouterr().out, re.M)
    assert main(["solve", str(ROOT / "problems/clustering/iris_wine.toml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "iris_wine.toml" in err and "Traceback" not in err
