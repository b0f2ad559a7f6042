"""Large solves (``gtvcvx.solvers.gtv.LARGE_FLOW_ENTRIES`` flow entries and more) keep the Halpern
anchor of the flows in single precision and do not copy the best certificate's flow; forced here
on small problems (the threshold and the compiled sweeps' size limit set to 0)."""

import dataclasses
import time

import numpy as np
import pytest

import gtvcvx as g
import gtvcvx._jit as jit
import gtvcvx.solvers.gtv as core
from gtvcvx.clustering import clustering_problem
from gtvcvx.solvers._edge_kernels import EdgeSweep
from gtvcvx.solvers.certificate import certify_pair


def knn_problem(penalty=None, n=300, seed=0):
    rng = np.random.default_rng(seed)
    points = rng.normal(size=(n, 3)) + 4.0 * rng.integers(0, 3, size=(n, 1))
    problem, _ = clustering_problem(points, 0.3, k=6)
    if penalty is not None:
        problem = g.GTVProblem(problem.graph, problem.loss, penalty, problem.lam)
    return problem


@pytest.fixture
def anchor_dtypes(monkeypatch):
    """The dtypes of the anchor ``U0`` the sweeps were given; the compiled sweeps on any size."""
    monkeypatch.setattr(jit, "MIN_ENTRIES", 0)
    seen = set()
    call = EdgeSweep.__call__

    def spy(self, move, U, Up, U0, *args, **kwargs):
        seen.add(U0.dtype)
        return call(self, move, U, Up, U0, *args, **kwargs)

    monkeypatch.setattr(EdgeSweep, "__call__", spy)
    return seen


def test_single_precision_anchor_reaches_the_same_certified_answer(anchor_dtypes, monkeypatch):
    problem = knn_problem()
    plain = g.solve(problem, tol=1e-7, method="halpern")
    assert anchor_dtypes == {np.dtype(np.float64)}
    anchor_dtypes.clear()
    monkeypatch.setattr(core, "LARGE_FLOW_ENTRIES", 0)
    large = g.solve(problem, tol=1e-7, method="halpern")
    assert anchor_dtypes == {np.dtype(np.float32)}
    assert plain.status == large.status == "optimal"
    assert large.rel_gap <= 1e-7 and not large.info["recertified"]
    assert abs(large.iterations - plain.iterations) <= 0.1 * plain.iterations
    assert abs(large.primal - plain.primal) <= 2e-7 * (1.0 + abs(plain.primal))


def test_unbounded_flows_keep_a_double_precision_anchor(anchor_dtypes, monkeypatch):
    """A penalty whose conjugate domain is not a ball (squared norm): the flows have no capacity
    bound that float32 is sure to hold."""
    monkeypatch.setattr(core, "LARGE_FLOW_ENTRIES", 0)
    result = g.solve(knn_problem(g.SquaredNorm2()), tol=1e-6, method="halpern")
    assert result.status == "optimal"
    assert anchor_dtypes == {np.dtype(np.float64)}


class _Clock:
    """``time`` for gtvcvx.solvers.gtv whose clock jumps ahead on request (a deterministic time limit)."""

    def __init__(self):
        self.jump = 0.0

    def perf_counter(self):
        return time.perf_counter() + self.jump


@pytest.mark.parametrize("method, last_worse", [("halpern", False), ("pdhg", False), ("halpern", True)])
def test_a_stop_after_the_best_flow_was_dropped_is_certified_again(anchor_dtypes, monkeypatch, method, last_worse):
    """The run stops on the time limit after check-points whose in-place flows were not copied:
    the returned certificate is computed again and bounds the true suboptimality. ``last_worse``:
    the last iterate's certificate is made to read worse than the lost one (its gap set to inf),
    so the best ``W`` is certified with the last flow as well."""
    problem = knn_problem()
    optimum = g.solve(problem, tol=1e-11, method="halpern", max_iter=100_000)
    assert optimum.status == "optimal"
    monkeypatch.setattr(core, "LARGE_FLOW_ENTRIES", 0)
    clock = _Clock()
    monkeypatch.setattr(core, "time", clock)
    paired = []
    if last_worse:
        certify_iterate, certify_pair_ = core.certify_iterate, core.certify_pair

        def after_the_stop_worse(*args, **kwargs):
            cert = certify_iterate(*args, **kwargs)
            return dataclasses.replace(cert, rel_gap=float("inf")) if clock.jump else cert

        def counted(*args, **kwargs):
            paired.append(clock.jump > 0)
            return certify_pair_(*args, **kwargs)

        monkeypatch.setattr(core, "certify_iterate", after_the_stop_worse)
        monkeypatch.setattr(core, "certify_pair", counted)
    seen = []

    def callback(info):
        seen.append(info.certificate.rel_gap)
        if len(seen) == 3:
            clock.jump = 1e6  # the time limit passes right after this check-point
        return False

    result = g.solve(problem, tol=1e-12, method=method, time_limit=1e5, check_every=5, callback=callback)
    assert result.status == "time_limit" and len(seen) == 3
    assert result.info["recertified"]
    # the last iterate is the one of the last check-point: at least its certificate comes back
    assert np.isfinite(result.gap) and result.rel_gap <= seen[-1] * (1.0 + 1e-9)
    assert any(paired) == last_worse  # (W_best, last flow) certified only when the last iterate reads worse
    slack = 1e-9 * (1.0 + abs(optimum.primal))
    assert result.primal >= optimum.dual - slack  # P(W) >= P* >= D(U*)
    assert result.dual <= optimum.primal + slack
    assert result.gap >= result.primal - optimum.primal - slack
    # the returned pair is the certificate's: certifying it from scratch gives its numbers
    again = certify_pair(problem, result.W, result.U)
    assert again.primal == pytest.approx(result.primal, rel=1e-12)
    assert again.rel_gap <= 1.5 * result.rel_gap + 1e-12
