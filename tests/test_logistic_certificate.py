"""Logistic losses: the conservation projection runs to the rounding level its conjugate accepts."""

from __future__ import annotations

import pytest

import gtvcvx as g
from gtvcvx.reference import solve_primal
from gtvcvx.solvers import certificate, certify_pair
from gtvcvx.solvers.certify import flow_from_primal

pytest.importorskip("networkx")


def _bank(penalty):
    from gtvcvx.bench import real

    # karate club, 3 rows of the weak breast-cancer features per node: m_i = 3 < d = 5
    return real.build("karate_club", "breast_cancer", penalty, 3, 0.05, seed=0)


@pytest.mark.parametrize("penalty", ["norm1", "norm2"])
def test_logistic_rows_certify_and_agree_with_clarabel(penalty):
    problem = _bank(penalty)
    result = g.solve(problem, tol=1e-7, max_iter=5000)
    assert str(result.status) == "optimal" and result.rel_gap <= 1e-7
    reference = solve_primal(problem, "CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    assert result.primal == pytest.approx(reference.primal, rel=1e-6)
    # honest: the certified gap covers the distance to the reference optimum
    assert result.gap >= result.primal - reference.primal - 1e-9 * abs(reference.primal)


def test_a_shallow_projection_leaves_the_l1_row_uncertified(monkeypatch):
    problem = _bank("norm1")
    W = g.solve(problem, tol=1e-9, max_iter=3000).W
    U = flow_from_primal(problem, W, threshold=1e-6)  # the flow W's optimality conditions give
    assert certify_pair(problem, W, U).rel_gap < 1e-8
    monkeypatch.setattr(certificate, "UNBOUNDED_TARGET_RTOL", 1e-12)  # the target before 2026-11-25
    # the second pass solves the correction exactly (a factorization) when the first one's
    # residual cannot be paid for: the shallow target is rescued
    rescued = certify_pair(problem, W, U)
    assert rescued.rel_gap < 1e-8
    monkeypatch.setattr(certificate, "FACTOR_MAX_UNKNOWNS", 0)  # conjugate gradients only
    shallow = certify_pair(problem, W, U)
    assert shallow.rel_gap > 0.5 and "zero flow" in shallow.message  # one node's residual was 6e-13
    stuck = g.solve(problem, tol=1e-7, max_iter=3000)
    assert str(stuck.status) == "max_iter" and stuck.rel_gap > 0.5
