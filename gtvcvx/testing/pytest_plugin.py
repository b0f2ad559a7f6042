"""pytest plugin: cached CVXPY reference solutions and the gtvcvx oracle as fixtures.

Enable it in your top-level ``conftest.py``::

    pytest_plugins = ["gtvcvx.testing.pytest_plugin"]

Fixtures
--------
``gtvcvx_reference_cache`` (session)
    A :class:`gtvcvx.testing.ReferenceCache`. Its directory is ``--gtvcvx-cache-dir`` if given,
    else ``$GTVCVX_CACHE_DIR``, else pytest's cache directory (``.pytest_cache/d/gtvcvx-references``,
    which CI systems usually keep between runs). ``--gtvcvx-refresh`` re-solves everything.
``gtvcvx_reference``
    A function ``gtvcvx_reference(spec_path, solver="CLARABEL", **options) -> GTVResult``.
``gtvcvx_oracle``
    The module :mod:`gtvcvx.testing` (``certify``, ``assert_optimal``), for symmetry.

Example
-------
::

    def test_my_solver(gtvcvx_reference):
        from gtvcvx import load_spec
        from gtvcvx.testing import assert_optimal

        spec = load_spec("problems/quick/sbm_nlasso.toml")
        W = my_solver(spec.problem)
        assert_optimal(spec.problem, W, rtol=1e-6)
        ref = gtvcvx_reference("problems/quick/sbm_nlasso.toml")
        assert abs(spec.problem.objective(W) - ref.primal) <= 1e-6 * (1 + abs(ref.primal))
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("gtvcvx", "gtvcvx reference solutions")
    group.addoption("--gtvcvx-cache-dir", action="store", default=None,
                    help="directory of cached CVXPY reference solutions (default: $GTVCVX_CACHE_DIR or "
                         "pytest's cache directory)")
    group.addoption("--gtvcvx-refresh", action="store_true", default=False,
                    help="ignore cached reference solutions and solve again")


def _cache_dir(config) -> Path:
    option = config.getoption("gtvcvx_cache_dir", default=None)
    if option:
        return Path(option)
    env = os.environ.get("GTVCVX_CACHE_DIR")
    if env:
        return Path(env)
    cache = getattr(config, "cache", None)
    if cache is not None:
        return Path(cache.mkdir("gtvcvx-references"))
    return Path(str(config.rootpath)) / ".pytest_cache" / "d" / "gtvcvx-references"


@pytest.fixture(scope="session")
def gtvcvx_reference_cache(request):
    """A :class:`gtvcvx.testing.ReferenceCache` shared by the whole session."""
    from . import ReferenceCache

    config = request.config
    return ReferenceCache(_cache_dir(config), refresh=bool(config.getoption("gtvcvx_refresh", default=False)))


@pytest.fixture
def gtvcvx_reference(gtvcvx_reference_cache):
    """``gtvcvx_reference(spec_path, solver="CLARABEL", **options)`` -> cached :class:`GTVResult`."""

    def get(spec, solver: str = "CLARABEL", **options):
        return gtvcvx_reference_cache.get(spec, solver, **options)

    return get


@pytest.fixture
def gtvcvx_oracle():
    """The :mod:`gtvcvx.testing` module (``certify``, ``assert_optimal``, ``ReferenceCache``)."""
    from .. import testing

    return testing


def pytest_report_header(config):
    try:
        return f"gtvcvx reference cache: {_cache_dir(config)}"
    except Exception:  # noqa: BLE001 - a header never breaks a session
        return None
