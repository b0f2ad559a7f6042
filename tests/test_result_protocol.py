"""One result protocol: GTV, clustering, RKHS and federated results answer the same attributes.

Every family's result is checked on a small real solve (fast core and a CVXPY backend where the
family has one): it is a :class:`gtvcvx.SolveResult`, ``gap = primal - dual`` and
``rel_gap = gap / (1 + |primal| + |dual|)`` hold, and ``to_row()`` carries
:data:`gtvcvx.results.RESULT_ROW_KEYS` with the same values as the attributes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import gtvcvx
from gtvcvx.clustering import convex_clustering
from gtvcvx.results import RESULT_ROW_KEYS, SolveResult, Status, relative_gap
from gtvcvx.rkhs import Dictionary, RKHSProblem, federated_fit, solve_dual
from gtvcvx.rkhs.data import ELLIPSE_BOX, ellipse_agents


def _gtv_result(solver):
    rng = np.random.default_rng(0)
    graph = gtvcvx.graphs.chain(8)
    y = rng.normal(size=(8, 2))
    problem = gtvcvx.GTVProblem(graph, gtvcvx.SquaredDistance(y), gtvcvx.Norm2(), lam=0.3)
    if solver == "fast":
        return gtvcvx.solve(problem)
    from gtvcvx.reference import solve_dual  # the flow statement: W is recovered, both bounds are finite
    return solve_dual(problem, solver)


def _clustering_result(solver):
    points = np.random.default_rng(1).normal(size=(12, 2))
    return convex_clustering(points, 0.2, k=3, solver=solver)


def _rkhs_result(solver):
    data = ellipse_agents(24, n_agents_layout=(1, 1), seed=2)
    D = Dictionary.grid(ELLIPSE_BOX, 4, [3.0], threshold=1e-6)
    problem = RKHSProblem(data.X, data.y, D, 0.5, 0.1, 50.0)
    if solver == "fast":
        return solve_dual(problem)
    from gtvcvx.rkhs.reference import solve_rkhs_dual
    return solve_rkhs_dual(problem, solver)


def _federated_result(solver):
    data = ellipse_agents(36, n_agents_layout=(2, 1), seed=3)
    agents = [(data.X[data.agent == a], data.y[data.agent == a]) for a in range(2)]
    D = Dictionary.grid(ELLIPSE_BOX, 4, [3.0], threshold=1e-6)
    return federated_fit(agents, D, 0.5, 0.1, C=50.0, solver=solver, centralized=False)


CASES = [("gtv", _gtv_result, "fast"), ("gtv", _gtv_result, "CLARABEL"),
         ("clustering", _clustering_result, "fast"), ("clustering", _clustering_result, "CLARABEL"),
         ("rkhs", _rkhs_result, "fast"), ("rkhs", _rkhs_result, "CLARABEL"),
         ("federated", _federated_result, "fast")]


@pytest.mark.parametrize(("family", "make", "solver"), CASES, ids=[f"{f}-{s}" for f, _, s in CASES])
def test_every_family_answers_the_result_protocol(family, make, solver):
    result = make(solver)
    assert isinstance(result, SolveResult), f"{type(result).__name__} is not a SolveResult"
    assert result.status == Status.OPTIMAL and result.ok
    assert isinstance(result.status, Status)
    assert result.solver.lower() == solver.lower()
    assert math.isfinite(result.primal) and math.isfinite(result.dual)
    assert result.gap == pytest.approx(result.primal - result.dual, rel=1e-12, abs=1e-12)
    assert result.rel_gap == pytest.approx(relative_gap(result.primal, result.dual), rel=1e-9, abs=1e-15)
    assert result.rel_gap <= 1e-5
    assert result.total_time == pytest.approx(result.setup_time + result.solve_time)
    row = result.to_row()
    missing = [key for key in RESULT_ROW_KEYS if key not in row]
    assert not missing, f"{type(result).__name__}.to_row() lacks {missing}"
    assert row["status"] == "optimal" and row["solver"] == result.solver
    for key in ("primal", "dual", "gap", "rel_gap", "setup_time", "solve_time"):
        assert row[key] == getattr(result, key), key
    if result.solver == "fast":
        assert result.history is not None and len(result.history) >= 1
        assert {"primal", "dual", "rel_gap"} <= set(result.history.columns)


def test_a_result_without_the_attributes_is_not_a_solve_result():
    from gtvcvx.baselines import BaselineResult

    assert not isinstance(BaselineResult("local_only", np.zeros((2, 1)), None, 0.0, 1), SolveResult)
