import re
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gtvcvx.cli import main

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "problems/quick/sbm_nlasso.toml"


def test_solve_with_clarabel_prints_the_summary(capsys):
    assert main(["solve", str(QUICK), "--solver", "clarabel"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^status\s+optimal$", out, re.M) and "mse" in out and "objective" in out
    # a CVXPY answer is certified by gtvcvx, so the gap is a number, not nan
    gap = float(re.search(r"^rel gap\s+(\S+)$", out, re.M).group(1))
    assert 0 <= gap < 1e-6


def test_solve_json(capsys):
    assert main(["solve", str(QUICK), "--solver", "SCS", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["status"] == "optimal" and record["n"] == 12 and record["mse"] >= 0


def test_failed_solve_exits_1(capsys):
    assert main(["solve", str(QUICK), "--solver", "SCS", "--max-iter", "1"]) == 1


def test_malformed_spec_exits_2_with_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text(QUICK.read_text().replace("p_in = 0.6", "p_in = 2.0"))
    assert main(["solve", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(bad) in err and "graph.p_in" in err and "Traceback" not in err


def test_unknown_solver_and_missing_file_exit_2(capsys):
    assert main(["solve", str(QUICK), "--solver", "gurobi_9000"]) == 2
    assert "--solver 'gurobi_9000'" in capsys.readouterr().err
    assert main(["solve", "no/such/spec.toml"]) == 2
    assert "spec file not found" in capsys.readouterr().err


def test_console_script_runs_and_debug_shows_traceback(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("not toml [")
    quiet = subprocess.run([sys.executable, "-m", "gtvcvx", "solve", str(bad)], capture_output=True, text=True)
    assert quiet.returncode == 2 and "Traceback" not in quiet.stderr
    loud = subprocess.run([sys.executable, "-m", "gtvcvx", "--debug", "solve", str(bad)], capture_output=True,
                          text=True)
    assert loud.returncode != 0 and "Traceback" in loud.stderr


def test_usage_error_exits_2():
    with pytest.raises(SystemExit) as info:
        main(["solve"])
    assert info.value.code == 2


def test_solve_rkhs_spec_and_refuse_experiment_spec(capsys):
    assert main(["solve", str(ROOT / "problems/rkhs/quick.toml"), "--tol", "1e-8"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^status\s+optimal$", out, re.M) and "accuracy" in out
    assert main(["solve", str(ROOT / "problems/clustering/iris_wine.toml")]) == 2
    assert "experiment spec" in capsys.readouterr().err


def test_a_long_solve_says_it_is_still_running(capsys, monkeypatch):
    """A solve is silent while short; a long one prints a line with the elapsed time every
    HEARTBEAT_SECONDS (10 s; shortened here) and what bounds the rest."""
    import time

    import gtvcvx.tasks as tasks
    from gtvcvx.commands import solve as solve_command

    spec = str(ROOT / "problems" / "quick" / "chain_l1.toml")
    assert main(["solve", spec]) == 0
    assert "still solving" not in capsys.readouterr().err
    real = tasks.solve_spec

    def slow(*args, **kwargs):
        time.sleep(0.35)
        return real(*args, **kwargs)

    monkeypatch.setattr(tasks, "solve_spec", slow)
    monkeypatch.setattr(solve_command, "HEARTBEAT_SECONDS", 0.1)
    assert main(["solve", spec, "--time-limit", "60"]) == 0
    err = capsys.readouterr().err
    assert "gtvcvx solve: still solving quick_chain_l1 with fast (0 s; at most 60 s left (time_limit 60 s))" in err
