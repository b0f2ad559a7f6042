"""Shared factories: small random GTV problems for every loss x penalty."""

from __future__ import annotations

import numpy as np
import pytest

import gtvcvx as g
from gtvcvx import data, graphs

LOSSES = ("squared_error", "logistic", "squared_distance")
PENALTIES = ("norm2", "norm1", "squared_norm2")


def make_penalty(name):
    return {"norm2": g.Norm2, "norm1": g.Norm1, "squared_norm2": g.SquaredNorm2}[name]()


def make_loss(kind, labels, d, seed, *, m=None, rho=0.75):
    """A loss on ``len(labels)`` nodes; squared error / logistic get nodes without data and m_i < d."""
    rng = np.random.default_rng(seed)
    n = len(labels)
    if kind == "squared_distance":
        centers = rng.normal(scale=2.0, size=(labels.max() + 1, d))
        return g.SquaredDistance(centers[labels] + 0.3 * rng.normal(size=(n, d)))
    if m is None:
        m = rng.integers(1, d + 3, size=n)  # some m_i < d, some > d
    if kind == "squared_error":
        ds = data.linear_model(labels, d, m, sigma=0.3, rho=rho, seed=seed)
    else:  # label noise large enough that the pooled data are not separable (finite optimum)
        ds = data.logistic_model(labels, d, np.asarray(m) + 4, sigma=3.0, rho=rho, seed=seed)
    cls = g.SquaredError if kind == "squared_error" else g.Logistic
    return cls(ds.X, ds.y, d=d)


def make_problem(loss="squared_error", penalty="norm2", *, seed=0, sizes=(4, 4), d=3, lam=0.3,
                 p_in=0.7, p_out=0.15, m=None, rho=0.75):
    graph, labels = graphs.sbm(list(sizes), p_in, p_out, seed=seed)
    return g.GTVProblem(graph, make_loss(loss, labels, d, seed + 100, m=m, rho=rho), make_penalty(penalty), lam)


@pytest.fixture
def problem_factory():
    return make_problem


@pytest.fixture
def core_iterate(monkeypatch):
    """``(problem, max_iter) -> (W, U)``: the fast core's last iterate as it certified it (``U``
    straight from the dual update, before any projection), after ``max_iter`` Halpern iterations
    with a tolerance it cannot reach."""
    def run(problem, max_iter):
        seen = []
        real = g.solvers.gtv.certify_iterate
        with monkeypatch.context() as patch:
            patch.setattr(g.solvers.gtv, "certify_iterate",
                          lambda p, W, U, *args, **kw: seen.append((W, U)) or real(p, W, U, *args, **kw))
            g.solve(problem, tol=1e-15, max_iter=max_iter, method="halpern")
        return seen[-1]

    return run


@pytest.fixture
def iterate_gap(core_iterate):
    """``(problem, max_iter, low, high) -> (W, U, true_gap)``: :func:`core_iterate` with its true gap
    against a tight CLARABEL optimum, checked to lie in ``(low, high)`` (an iterate, not an optimum)."""
    from gtvcvx.reference import solve_primal

    def run(problem, max_iter, low, high):
        optimum = solve_primal(problem, "CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10).primal
        W, U = core_iterate(problem, max_iter)
        true_gap = problem.objective(W) - optimum
        assert low < true_gap < high
        return W, U, true_gap

    return run

