"""The reference cache cannot serve a wrong answer, and its I/O failures never fail a check."""

import errno
import os

import numpy as np
import pytest

import gtvcvx as g
from gtvcvx import load_spec
from gtvcvx.testing import ReferenceCache
from gtvcvx.testing import cache as cache_mod
from gtvcvx.testing.cache import CacheWarning

from test_testing_cache import QUICK


def _problem(lam=0.3):
    points = np.array([[0.0, 0.0], [1.0, 0.0], [4.0, 1.0], [5.0, 1.0], [9.0, 0.0]])
    return g.GTVProblem(g.graphs.chain(5), g.SquaredDistance(points), g.Norm2(), lam)


def test_spec_changed_in_memory_is_not_served_the_old_answer(tmp_path):
    cache = ReferenceCache(tmp_path)
    spec = load_spec(QUICK)
    first = cache.get(spec, "CLARABEL")
    spec.problem = spec.problem.with_lam(spec.problem.lam * 10)
    second = cache.get(spec, "CLARABEL")
    assert cache.misses == 2
    assert second.primal == pytest.approx(spec.problem.objective(second.W))
    assert abs(second.primal - first.primal) > 1e-3


def test_equal_problems_built_twice_hit_and_problem_objects_are_accepted(tmp_path):
    cache = ReferenceCache(tmp_path)
    a = cache.get(_problem(), "CLARABEL")
    b = cache.get(_problem(), "CLARABEL")
    assert (cache.hits, cache.misses) == (1, 1)
    np.testing.assert_array_equal(a.W, b.W)


def test_an_edited_primal_in_the_entry_is_not_trusted(tmp_path):
    import json

    cache = ReferenceCache(tmp_path)
    problem = _problem()
    cache.get(problem, "CLARABEL")
    (entry,) = tmp_path.glob("*.npz")
    with np.load(entry, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    header = json.loads(str(arrays["header"]))
    header["primal"] = 0.001  # a lie
    arrays["header"] = np.array(json.dumps(header))
    np.savez_compressed(entry, **arrays)
    with pytest.warns(CacheWarning, match="does not match"):
        result = cache.get(problem, "CLARABEL")
    assert result.primal == pytest.approx(problem.objective(result.W))
    assert cache.misses == 2


def test_garbage_entry_warns_and_solves_again(tmp_path):
    cache = ReferenceCache(tmp_path)
    problem = _problem()
    cache.get(problem, "CLARABEL")
    (entry,) = tmp_path.glob("*.npz")
    entry.write_bytes(b"not a zip file at all")
    with pytest.warns(CacheWarning, match="unreadable"):
        result = cache.get(problem, "CLARABEL")
    assert str(result.status) == "optimal" and cache.misses == 2


def test_versions_are_part_of_the_key(monkeypatch):
    problem = _problem()
    before = cache_mod.problem_key(problem, "CLARABEL")
    monkeypatch.setattr(cache_mod, "_version", lambda package: "9.9.9" if package == "clarabel" else "1")
    assert cache_mod.problem_key(problem, "CLARABEL") != before


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_directory_warns_and_still_answers(tmp_path):
    directory = tmp_path / "ro"
    directory.mkdir()
    directory.chmod(0o500)
    try:
        with pytest.warns(CacheWarning, match="could not write"):
            result = ReferenceCache(directory).get(_problem(), "CLARABEL")
        assert str(result.status) == "optimal"
    finally:
        directory.chmod(0o700)


def test_full_disk_on_write_warns_and_still_answers(tmp_path, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("gtvcvx.io.save_result", full)
    with pytest.warns(CacheWarning, match="No space left"):
        result = ReferenceCache(tmp_path).get(_problem(), "CLARABEL")
    assert str(result.status) == "optimal"
    assert not list(tmp_path.glob("*.npz"))


def test_uncreatable_directory_warns_and_still_answers(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.warns(CacheWarning):
        result = ReferenceCache(blocker / "sub").get(_problem(), "CLARABEL")
    assert str(result.status) == "optimal"
