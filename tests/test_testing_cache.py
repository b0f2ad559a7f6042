"""gtvcvx.testing.ReferenceCache and the pytest plugin around it."""

import textwrap
from pathlib import Path

import numpy as np
import pytest

from gtvcvx.testing import ReferenceCache, spec_key

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "problems/quick/sbm_nlasso.toml"


def test_cache_solves_once_then_reads_from_disk(tmp_path):
    cache = ReferenceCache(tmp_path / "cache")
    first = cache.get(QUICK, "clarabel")
    assert (cache.hits, cache.misses) == (0, 1) and str(first.status) == "optimal"
    files = list((tmp_path / "cache").glob("*.npz"))
    assert len(files) == 1 and files[0].name.startswith("sbm_nlasso-CLARABEL-")
    again = ReferenceCache(tmp_path / "cache").get(str(QUICK), "CLARABEL")
    np.testing.assert_array_equal(again.W, first.W)
    assert again.primal == first.primal
    refreshed = ReferenceCache(tmp_path / "cache", refresh=True)
    refreshed.get(QUICK, "CLARABEL")
    assert refreshed.misses == 1
    assert ReferenceCache(tmp_path / "cache").clear() == 1


def test_key_depends_on_contents_solver_and_options(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(QUICK.read_text())
    base = spec_key(spec, "CLARABEL")
    assert spec_key(spec, "CLARABEL") == base
    assert spec_key(spec, "SCS") != base
    assert spec_key(spec, "CLARABEL", {"max_iter": 5}) != base
    spec.write_text(QUICK.read_text().replace("lam = 0.05", "lam = 0.06"))
    assert spec_key(spec, "CLARABEL") != base


def test_key_includes_data_files(tmp_path):
    edges = tmp_path / "edges.csv"
    edges.write_text("0,1\n1,2\n")
    spec = tmp_path / "s.toml"
    spec.write_text('[graph]\nfile = "edges.csv"\n')
    before = spec_key(spec, "CLARABEL")
    edges.write_text("0,1\n0,2\n")
    assert spec_key(spec, "CLARABEL") != before


def test_pytest_plugin_caches_between_sessions(tmp_path, monkeypatch):
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["gtvcvx.testing.pytest_plugin"]\n')
    (tmp_path / "test_user.py").write_text(textwrap.dedent(f"""
        import os
        from gtvcvx import load_spec
        from gtvcvx.testing import assert_optimal

        def test_reference(gtvcvx_reference, gtvcvx_reference_cache, gtvcvx_oracle):
            ref = gtvcvx_reference({str(QUICK)!r})
            assert str(ref.status) == "optimal"
            assert_optimal(load_spec({str(QUICK)!r}).problem, ref.W, rtol=1e-6)
            assert gtvcvx_oracle.certify is not None
            assert gtvcvx_reference_cache.hits == int(os.environ["EXPECT_HITS"])
    """))
    cache_dir = tmp_path / "refs"
    args = ["-q", "-p", "no:cacheprovider", "--import-mode=importlib", "--rootdir", str(tmp_path),
            "--gtvcvx-cache-dir", str(cache_dir), str(tmp_path / "test_user.py")]
    for hits in (0, 1):
        monkeypatch.setenv("EXPECT_HITS", str(hits))
        monkeypatch.chdir(tmp_path)
        assert pytest.main(args) == 0
    assert len(list(cache_dir.glob("*.npz"))) == 1
