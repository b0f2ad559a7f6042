"""The benchmark harness measures the solve, not the build: time and peak memory of the call."""

import numpy as np
import pytest

from gtvcvx.bench.harness import Run, median_run, run_isolated
from gtvcvx.memory import reset_peak_rss


def build_with_temporaries(mb: float) -> int:
    """An instance whose build touched ``mb`` MiB it freed again (like a graph generator's)."""
    temporary = np.ones(int(mb * 2**20 / 8))
    del temporary
    return 1


def allocate(instance, mb: float) -> dict:
    block = np.ones(int(mb * 2**20 / 8))
    return {"first": float(block[0])}


@pytest.mark.skipif(not reset_peak_rss(), reason="no resettable peak RSS here (Linux /proc/self/clear_refs)")
def test_peak_memory_is_the_calls_own():
    run = run_isolated("allocate", build_with_temporaries, {"mb": 400}, allocate, {"mb": 100}, timeout=300)
    assert run.ok, run.error
    assert run.data == {"first": 1.0}
    # the call's 100 MiB, not the build's 400 (the process's peak since start said 400 + imports)
    assert 80 <= run.extra_mb <= 200
    assert run.peak_mb < run.baseline_mb + 300


def test_clustering_bench_million_seeds_are_parsed_with_clear_errors():
    from gtvcvx.bench.clustering import million_seeds

    assert million_seeds("1") == [1]
    assert million_seeds("1, 0,2") == [1, 0, 2]
    for bad in ("", "a", "1,-2", "1.5"):
        with pytest.raises(SystemExit, match="--million-seeds"):
            million_seeds(bad)


def test_median_run_is_the_middle_wall_and_keeps_every_wall():
    runs = [Run("fast", True, wall, 100.0 + wall, 50.0, {"dual": wall}) for wall in (0.9, 0.4, 0.5, 0.7)]
    middle = median_run(runs)
    assert middle.wall == 0.5 and middle.data["dual"] == 0.5  # the lower middle of four, its own data
    assert middle.data["runs"] == 4 and middle.data["walls"] == [0.9, 0.4, 0.5, 0.7]
    assert median_run(runs[:3]).wall == 0.5
    failed = Run("fast", False, error="run timed out")
    assert median_run(runs + [failed]) is failed  # a failure is reported, not hidden by the others
    with pytest.raises(ValueError, match="at least one run"):
        median_run([])
