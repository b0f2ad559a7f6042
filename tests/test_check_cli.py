"""``gtvcvx check``: exit codes, one line per check, JUnit XML and JSON for CI."""

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest

import gtvcvx.experiments as experiments
from gtvcvx.cli import main
from gtvcvx.experiments import ExperimentOutput
from gtvcvx.testing.oracle import experiment_threshold, run_checks
from gtvcvx import load_spec

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "problems/quick"


def copy_spec(tmp_path, name, replace=None, append=""):
    text = (QUICK / name).read_text()
    for old, new in (replace or {}).items():
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / name
    path.write_text(text + append)
    return path


def test_all_quick_specs_pass_with_junit_and_json(tmp_path, capsys):
    junit, record = tmp_path / "junit.xml", tmp_path / "check.json"
    assert main(["check", str(QUICK / "sbm_nlasso.toml"), str(QUICK / "logistic_star.toml"),
                 "--junit", str(junit), "--json", str(record)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith("PASS") and "quick_sbm_nlasso" in line and "max_rel_gap" in line and "<= 1e-06" in line
               for line in out)
    # max_solution_error in sbm_nlasso's [check] table brings in the CLARABEL reference
    assert any("max_solution_error" in line and "<= 0.0001" in line for line in out)
    assert any("reference_bounds" in line for line in out)
    assert out[-1].startswith("gtvcvx check: 2 spec(s)") and "0 failed" in out[-1]
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites" and root.get("failures") == "0" and root.get("errors") == "0"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["quick_sbm_nlasso", "quick_logistic_star"]
    cases = suites[0].findall("testcase")
    assert {"status", "max_rel_gap", "max_solution_error", "reference_bounds"} <= {c.get("name") for c in cases}
    assert int(root.get("tests")) == sum(len(s.findall("testcase")) for s in suites)
    doc = json.loads(record.read_text())
    assert doc["passed"] is True and doc["exit_code"] == 0 and doc["counts"]["failed"] == 0
    assert doc["specs"][0]["checks"][0]["name"] == "status" and "environment" in doc


def test_violated_threshold_exits_1_and_is_a_junit_failure(tmp_path, capsys):
    spec = copy_spec(tmp_path, "chain_l1.toml", append="max_mse = 1e-12\n")
    junit = tmp_path / "junit.xml"
    assert main(["check", str(spec), "--junit", str(junit)]) == 1
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "max_mse" in x)
    assert line.startswith("FAIL") and "<= 1e-12" in line
    root = ET.parse(junit).getroot()
    assert root.get("failures") == "1"
    failure = root.find(".//testcase[@name='max_mse']/failure")
    assert failure is not None and "1e-12" in failure.get("message")


def test_max_rel_gap_flag_and_cvxpy_solver(tmp_path, capsys):
    spec = QUICK / "chain_l1.toml"
    assert main(["check", str(spec), "--max-rel-gap", "1e-30"]) == 1
    assert "<= 1e-30" in capsys.readouterr().out
    assert main(["check", str(spec), "--solver", "clarabel", "--reference", "scs", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "PASS" not in out and "0 failed" in out


def test_malformed_spec_exits_2_with_one_line_naming_file_and_key(tmp_path, capsys):
    bad = copy_spec(tmp_path, "chain_l1.toml", replace={"bridge_weight = 0.3": 'bridge_weight = "x"'})
    assert main(["check", str(QUICK / "sbm_nlasso.toml"), str(bad)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.count("\n") == 0 and str(bad) in err and "graph.bridge_weight" in err
    assert "Traceback" not in captured.err and captured.out == ""  # nothing was solved


def test_uncomputable_threshold_exits_2(tmp_path, capsys):
    spec = copy_spec(tmp_path, "chain_l1.toml", append="min_accuracy = 0.9\n")
    assert main(["check", str(spec)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(spec) in err and "check.min_accuracy" in err and "logistic" in err


def test_usage_errors_exit_2(tmp_path, capsys):
    assert main(["check", str(QUICK / "chain_l1.toml"), "--solver", "nope"]) == 2
    assert "--solver 'nope'" in capsys.readouterr().err
    assert main(["check", str(QUICK / "chain_l1.toml"), "--reference", "fast"]) == 2
    assert main(["check", str(tmp_path / "missing.toml")]) == 2
    assert "no such spec" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["check", str(empty)]) == 2
    with pytest.raises(SystemExit) as info:
        main(["check"])
    assert info.value.code == 2


def toy(params, out_dir, *, scale="default", studies=None):
    return ExperimentOutput(title="toy", markdown="", tables={"t": pd.DataFrame({"a": [1]})},
                            measured={"best_ari": 0.8, "runtime": 3.0})


def test_experiment_thresholds(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(experiments, "registry", lambda: {"toy": toy})
    spec = tmp_path / "toy.toml"
    base = 'kind = "experiment"\nname = "toy"\nexperiment = "toy"\n[check]\n'
    spec.write_text(base + "min_best_ari = 0.75\nmax_runtime = 5\n")
    assert main(["check", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "min_best_ari" in out and "0.8 >= 0.75" in out and "3 <= 5" in out
    spec.write_text(base + "min_best_ari = 0.95\n")
    assert main(["check", str(spec)]) == 1
    spec.write_text(base + "best_ari = 0.95\n")
    assert main(["check", str(spec)]) == 2
    assert "check.best_ari" in capsys.readouterr().err
    spec.write_text(base + "min_unknown = 1\n")
    junit = tmp_path / "j.xml"
    assert main(["check", str(spec), "--junit", str(junit)]) == 2
    err = capsys.readouterr().err
    assert "check.min_unknown" in err and "best_ari" in err
    assert ET.parse(junit).getroot().get("errors") == "1"
    assert experiment_threshold("max_time") == ("time", "<=")
    with pytest.raises(ValueError):
        experiment_threshold("time")


def test_reference_cache_dir_and_run_checks_api(tmp_path):
    spec = load_spec(QUICK / "sbm_nlasso.toml")
    from gtvcvx.testing import ReferenceCache

    cache = ReferenceCache(tmp_path / "cache")
    first = run_checks(spec, reference="CLARABEL", cache=cache)
    second = run_checks(spec, reference="CLARABEL", cache=cache)
    assert first.passed and second.passed and (cache.misses, cache.hits) == (1, 1)
    assert first.to_dict()["checks"][0] == {"name": "status", "measured": "optimal", "threshold": "optimal",
                                            "op": "==", "outcome": "passed", "message": ""}
    shutil.rmtree(tmp_path / "cache")
