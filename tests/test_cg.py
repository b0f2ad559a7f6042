"""The package's one conjugate-gradient routine against dense solves."""

from __future__ import annotations

import time

import numpy as np
import pytest

from gtvcvx.solvers._cg import conjugate_gradient


def _spd(n, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, n))
    return A @ A.T + 0.1 * np.eye(n), rng.normal(size=(n, 3))


@pytest.mark.parametrize("columnwise", [False, True])
@pytest.mark.parametrize("preconditioned", [False, True])
def test_solves_spd_systems(columnwise, preconditioned):
    A, B = _spd(30)
    precond = (lambda R: R / np.diag(A)[:, None]) if preconditioned else None
    X, iterations, residual = conjugate_gradient(lambda V: A @ V, B, atol=1e-10, max_iter=500,
                                                 precond=precond, columnwise=columnwise)
    np.testing.assert_allclose(X, np.linalg.solve(A, B), rtol=1e-6, atol=1e-8)
    assert 0 < iterations <= 500
    assert np.all(np.asarray(residual) <= 1e-10)
    true = np.linalg.norm(B - A @ X, axis=0) if columnwise else np.linalg.norm(B - A @ X)
    np.testing.assert_allclose(true, residual, atol=1e-9)


def test_columns_stop_independently_and_warm_start_counts():
    A, B = _spd(20, seed=1)
    B[:, 1] = 0.0  # an already-solved column takes no step and does not hold the others back
    X, _, residual = conjugate_gradient(lambda V: A @ V, B, atol=np.full(3, 1e-10), max_iter=200, columnwise=True)
    assert np.all(X[:, 1] == 0.0) and residual[1] == 0.0
    exact = np.linalg.solve(A, B)
    _, warm_iterations, _ = conjugate_gradient(lambda V: A @ V, B, atol=1e-10, max_iter=200, x0=exact)
    assert warm_iterations <= 1


def test_singular_consistent_system_gives_minimum_norm_solution():
    # path-graph Laplacian: singular, right-hand sides with zero mean are in its range
    L = np.diag([1.0, 2.0, 2.0, 1.0]) - np.eye(4, k=1) - np.eye(4, k=-1)
    B = np.array([[1.0], [-2.0], [0.5], [0.5]])
    X, _, residual = conjugate_gradient(lambda V: L @ V, B, atol=1e-12, max_iter=50)
    np.testing.assert_allclose(X, np.linalg.pinv(L) @ B, atol=1e-10)
    assert residual <= 1e-12


@pytest.mark.parametrize("columnwise", [False, True])
def test_a_tolerance_below_rounding_on_a_singular_system_does_not_diverge(columnwise):
    """Captured from a nightly run (`certify` on a warm-started logistic solve): the free flow of two
    disjoint edges {2, 3} and {0, 5} of a 7-node graph, a right-hand side whose component means are
    zero up to rounding, and a tolerance below that rounding. The residual reached 8e-17 in one step,
    the next step's curvature was tiny but positive, and the iteration grew to overflow: a NaN flow
    and a traceback from `certify`. Now the diverging step is undone and the column stops.

    The right-hand side is inconsistent by 1.1e-16 (entries 2 and 3), so a second step can still overshoot
    the residual's range part by the ratio of its null-space part to it: on an Intel Xeon (OpenBLAS 0.3.31)
    8e-17 -> 1e-14: the step length comes from the fixed null-space part, the overshoot stays at that
    scale (no growth after it), and the residual is reported as it is."""
    edges = np.array([[2, 3], [0, 5]])
    D = np.zeros((2, 7))
    D[np.arange(2), edges[:, 0]], D[np.arange(2), edges[:, 1]] = 1.0, -1.0
    gram = D.T @ D  # rank 2
    b = np.array([-0.0001335983013550251, 0.0, -0.0022529380367163343, 0.0022529380367164453, 0.0,
                  0.0001335983013550251, 0.0])
    B = np.column_stack([b, np.zeros(7), 2.0 * b]) if columnwise else b[:, None]
    X, iterations, residual = conjugate_gradient(lambda V: gram @ V, B, atol=3e-17, max_iter=300,
                                                 columnwise=columnwise)
    assert np.isfinite(X).all() and iterations <= 2
    np.testing.assert_allclose(X, np.linalg.pinv(gram) @ B, atol=1e-15)
    true = np.linalg.norm(B - gram @ X, axis=0) if columnwise else np.linalg.norm(B - gram @ X)
    assert np.all(true <= 1e-13)  # (||b|| = 3.2e-3; a divergence went to overflow)
    np.testing.assert_allclose(residual, true, rtol=1e-5, atol=1e-16)  # the residual reported is the true one


def test_deadline_and_max_iter_stop_early():
    A, B = _spd(40, seed=2)
    _, iterations, residual = conjugate_gradient(lambda V: A @ V, B, atol=0.0, max_iter=3)
    assert iterations == 3 and residual > 0
    _, iterations, _ = conjugate_gradient(lambda V: A @ V, B, atol=0.0, max_iter=100,
                                          deadline=time.perf_counter() - 1.0)
    assert iterations == 0
