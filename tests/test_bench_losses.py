"""gtvcvx bench losses: seeded instances of the stated shape, and a whole (tiny) run's report."""

import argparse

import numpy as np
import pytest

from gtvcvx.bench import losses


def test_instances_are_seeded_and_have_the_stated_shape():
    a = losses.build("sbm", 60, "hinge", "norm2", 4, 3, 0.05, seed=1)
    assert a.digest() == losses.build("sbm", 60, "hinge", "norm2", 4, 3, 0.05, seed=1).digest()
    assert a.digest() != losses.build("sbm", 60, "hinge", "norm2", 4, 3, 0.05, seed=2).digest()
    assert (a.n, a.d) == (60, 3) and np.all(a.loss.counts == 4) and set(np.unique(a.loss.y_all)) == {-1.0, 1.0}
    chain = losses.build("chain", 50, "absolute", "norm1", 2, 5, 0.1, seed=0)
    assert chain.n_edges == 49 and chain.d == 5 and chain.loss.name == "absolute_error" and chain.penalty.name == "norm1"
    with pytest.raises(ValueError, match="loss one of"):
        losses.build("chain", 50, "cauchy", "norm2", 2, 3, 0.1, seed=0)


def _args(tmp_path, **changes):
    parser = argparse.ArgumentParser()
    losses.add_arguments(parser)
    args = parser.parse_args([])
    args.out = str(tmp_path)
    for key, value in changes.items():
        setattr(args, key, value)
    return args


def test_a_tiny_run_writes_its_report_with_ratios_and_memory(tmp_path, capsys):
    args = _args(tmp_path, sizes="40", losses="absolute", repeats=1)
    assert losses.run(args) == 0
    report = (tmp_path / "bench" / "losses.md").read_text()
    assert "gtvcvx bench losses --sizes 40 --graphs chain,sbm --losses absolute" in report
    assert "A chain and a two-block SBM" in report
    rows = [line for line in report.splitlines() if line.startswith("| chain") or line.startswith("| sbm")]
    assert len(rows) == 2 and all("| optimal |" in row for row in rows)
    import pandas as pd

    table = pd.read_csv(tmp_path / "bench" / "losses.csv")
    assert (table.ratio_clarabel > 0).all() and (table.gtvcvx_peak_mb > 0).all()
    assert (table.objective_vs_clarabel.abs() <= 1e-5).all()


@pytest.mark.parametrize("changes, message", [({"sizes": "2"}, "--sizes"), ({"losses": "cauchy"}, "--losses"),
                                              ({"penalties": "group_norm2"}, "--penalties"),
                                              ({"graphs": "grid"}, "--graphs"),
                                              ({"repeats": 0}, "--repeats")])
def test_bad_arguments_are_refused_by_name(tmp_path, changes, message):
    with pytest.raises(SystemExit, match=message):
        losses.run(_args(tmp_path, **changes))


def test_graphs_chooses_the_graph_kinds(tmp_path):
    args = _args(tmp_path, sizes="30", graphs="chain", losses="huber", repeats=1)
    assert losses.run(args) == 0
    report = (tmp_path / "bench" / "losses.md").read_text()
    rows = [line for line in report.splitlines() if line.startswith("| chain") or line.startswith("| sbm")]
    assert len(rows) == 1 and rows[0].startswith("| chain | 30 | huber")
    assert "--graphs chain --losses huber" in report and "A chain of each size" in report
