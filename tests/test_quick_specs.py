"""Every shipped quick spec: the fast core agrees with the CLARABEL reference, through the package's own
reference cache (the ``gtvcvx_reference`` fixture of :mod:`gtvcvx.testing.pytest_plugin`, enabled for this
suite in pyproject.toml), so repeated runs do not re-solve with CVXPY.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import gtvcvx
from gtvcvx.results import Status
from gtvcvx.testing import certify

QUICK_SPECS = sorted((Path(__file__).resolve().parents[1] / "problems" / "quick").glob("*.toml"))


@pytest.mark.parametrize("path", QUICK_SPECS, ids=[p.stem for p in QUICK_SPECS])
def test_fast_core_agrees_with_cached_reference(path, gtvcvx_reference, gtvcvx_reference_cache):
    spec = gtvcvx.load_spec(path)
    problem = spec.problem
    fast = gtvcvx.solve(problem, tol=1e-8)
    assert fast.status == Status.OPTIMAL and fast.rel_gap <= 1e-8
    reference = gtvcvx_reference(path)  # solved now, or read from a cache a previous run left
    assert reference.status == Status.OPTIMAL
    # both are certified by gtvcvx: the fast dual bound lies below the reference's objective, and the
    # reference's own certificate (flows built from its W) is small
    assert fast.dual <= reference.primal + 1e-12 * (1 + abs(reference.primal))
    assert abs(fast.primal - reference.primal) <= 1e-6 * (1 + abs(reference.primal))
    assert certify(problem, reference.W).rel_gap <= 1e-5
    np.testing.assert_allclose(fast.W, reference.W, atol=1e-3 * (1 + np.abs(reference.W).max()))
    # asked again, the reference comes from the cache
    hits = gtvcvx_reference_cache.hits
    again = gtvcvx_reference(path)
    assert gtvcvx_reference_cache.hits == hits + 1
    np.testing.assert_array_equal(again.W, reference.W)
