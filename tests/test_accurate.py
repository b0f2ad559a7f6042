"""The doubled-precision residuals behind every certificate's loss values (gtvcvx._accurate):
NumPy blocks and the compiled pass against exact rational arithmetic."""

from fractions import Fraction

import numpy as np
import pytest

import gtvcvx._jit as jit
from gtvcvx._accurate import gathered_residuals_dot2


def _exact(y, X, W, rows, sign):
    return [Fraction(float(y[k])) + int(sign) * sum(Fraction(float(a)) * Fraction(float(b)) for a, b in zip(X[k], W[rows[k]]))
            for k in range(len(y))]


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_residuals_are_correctly_rounded_under_cancellation(monkeypatch, compiled, threads):
    """Labels near 1e8 fitted to ~1e-2: plain float64 keeps about eight digits of each residual,
    Dot2 all but rounding (relative error <= 4 eps, also with read-only samples)."""
    monkeypatch.setattr(jit, "MIN_ENTRIES", 0 if compiled else 1 << 60)
    monkeypatch.setattr(jit, "parallel_threads", lambda: threads)
    rng = np.random.default_rng(0)
    M, n, d = 300, 7, 6
    X = rng.normal(size=(M, d)) * 10.0 ** rng.integers(-3, 4, size=(M, 1))
    W = rng.normal(size=(n, d)) * 1e4
    rows = rng.integers(0, n, size=M)
    y = np.einsum("kd,kd->k", X, W[rows]) + rng.normal(size=M) * 1e-2  # residuals ~1e-2
    X.flags.writeable = rows.flags.writeable = False
    for sign in (-1.0, 1.0):
        got = gathered_residuals_dot2(y, X, W, rows, sign=sign)
        exact = _exact(y, X, W, rows, sign)
        err = max(abs(Fraction(float(g)) - e) / max(abs(e), Fraction(1, 10 ** 300)) for g, e in zip(got, exact))
        assert err <= 4 * np.finfo(float).eps
    plain = y - np.einsum("kd,kd->k", X, W[rows])
    exact = _exact(y, X, W, rows, -1.0)
    assert max(abs(Fraction(float(g)) - e) / abs(e) for g, e in zip(plain, exact)) > 1e-12  # (the test can tell)


def test_compiled_pass_matches_the_blocks(monkeypatch):
    """The compiled pass and the NumPy blocks agree to rounding, with scaled (huge) operands
    routed through the shift and NaN propagated."""
    rng = np.random.default_rng(1)
    M, n, d = 500, 11, 4
    X, W, rows, y = rng.normal(size=(M, d)), rng.normal(size=(n, d)), rng.integers(0, n, size=M), rng.normal(size=M)
    X[3] *= 1e300  # beyond the splitter's range: the exact power-of-two shift
    X[5, 1] = np.nan
    outs = []
    for entries in (1 << 60, 0):
        monkeypatch.setattr(jit, "MIN_ENTRIES", entries)
        outs.append(gathered_residuals_dot2(y, X, W, rows))
    assert np.isnan(outs[0][5]) and np.isnan(outs[1][5])
    np.testing.assert_allclose(outs[1], outs[0], rtol=4e-16, atol=0)


def test_a_kept_sample_maximum_gives_the_same_residuals():
    """``x_max`` (a loss keeps ``max |X|`` of its read-only samples) replaces the passes over the
    samples: the same residuals, also where the operands need the overflow shift."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(500, 4)) * 1e300
    W = rng.normal(size=(20, 4)) * 1e10
    rows = rng.integers(0, 20, size=500)
    y = rng.normal(size=500) * 1e305
    kept = float(np.abs(X).max())
    with np.errstate(over="ignore"):
        plain = gathered_residuals_dot2(y, X, W, rows)
        given = gathered_residuals_dot2(y, X, W, rows, x_max=kept)
    assert np.array_equal(plain, given) and np.isfinite(plain).any()


def test_a_design_loss_keeps_its_samples_read_only():
    import gtvcvx as g

    loss = g.SquaredError([np.ones((2, 3)), np.zeros((1, 3))], [np.ones(2), np.zeros(1)])
    assert not loss.X_all.flags.writeable and not loss.y_all.flags.writeable
    assert loss._sample_abs_max == 1.0


@pytest.mark.parametrize("threads", [1, 2])
def test_node_sums_are_the_per_sample_path_in_one_pass(monkeypatch, threads):
    """``node_residual_sums_dot2`` (a certificate's loss values and gradients in one pass over the
    samples) gives bit for bit the per-sample residuals' squared sums and weighted sums, nodes
    without samples included; operands that need the exponent shift are left to the per-sample path."""
    from gtvcvx._accurate import node_residual_sums_dot2

    monkeypatch.setattr(jit, "parallel_threads", lambda: threads)
    rng = np.random.default_rng(5)
    n, d = 40, 5
    counts = rng.integers(0, 6, size=n)
    counts[[0, 7, 39]] = 0
    M = int(counts.sum())
    rows = np.repeat(np.arange(n), counts)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    X = rng.normal(size=(M, d)) * 10.0 ** rng.integers(-3, 4, size=(M, 1))
    W = rng.normal(size=(n, d)) * 1e3
    y = np.einsum("kd,kd->k", X, W[rows]) + rng.normal(size=M) * 1e-3
    X.flags.writeable = y.flags.writeable = False
    values, sums = node_residual_sums_dot2(y, X, W, jit.read_only(offsets), float(np.abs(X).max()))
    res = gathered_residuals_dot2(y, X, W, rows)
    expected_values, expected_sums = np.zeros(n), np.zeros((n, d))
    for k in range(M):  # (the reference: samples in order)
        expected_values[rows[k]] += res[k] * res[k]
        expected_sums[rows[k]] += X[k] * res[k]
    assert np.array_equal(values, expected_values) and np.array_equal(sums, expected_sums)
    assert values[[0, 7, 39]].tolist() == [0.0, 0.0, 0.0]
    assert node_residual_sums_dot2(y, X * 1e300, W, offsets, float(np.abs(X).max()) * 1e300) is None


def test_squared_error_values_and_gradients_take_the_one_pass_path(monkeypatch):
    """A large squared-error loss computes values and gradients by the one-pass node sums (one
    computation for both at the same point) and gets what the per-sample path gets."""
    import gtvcvx as g

    rng = np.random.default_rng(6)
    n, d = 30, 4
    Xs = [rng.normal(size=(int(m), d)) for m in rng.integers(0, 7, size=n)]
    ys = [x @ rng.normal(size=d) + 1e6 for x in Xs]
    loss = g.SquaredError(Xs, ys, d=d)
    W = rng.normal(size=(n, d))
    calls = []
    real = g.losses._core.node_residual_sums_dot2
    monkeypatch.setattr(g.losses._core, "node_residual_sums_dot2", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(jit, "MIN_ENTRIES", 0)
    one_pass = loss.node_values(W), loss.gradient(W)
    assert len(calls) == 1
    monkeypatch.setattr(jit, "MIN_ENTRIES", 1 << 60)
    per_sample = loss.node_values(W), loss.gradient(W)
    assert np.array_equal(one_pass[0], per_sample[0])
    np.testing.assert_allclose(one_pass[1], per_sample[1], rtol=1e-15, atol=0)


@pytest.mark.parametrize("parallel", [False, True])
def test_compiled_dot2_kernels_take_the_fused_multiply_add(parallel):
    """The kernels call TwoProduct through their shared compiled helper (``dot2_add``): the
    intrinsic ``njit`` binds must reach the helper's globals too (the kernels no longer name
    ``product_error``), else it compiles Dekker's split (exact too, ~1.5x slower: no result
    would show it). (A kernel loaded from numba's disk cache has no IR to inspect.)"""
    from gtvcvx import _accurate

    _accurate.__dict__["product_error"] = jit.product_error  # (as before any kernel was loaded)
    _accurate._load_dot2.cache_clear()
    _accurate._load_node_sums.cache_clear()
    _accurate._load_dot2(parallel)
    _accurate._load_node_sums(parallel)
    assert _accurate.__dict__["product_error"] is jit._product_error_compiled()


def test_product_error_is_exact_compiled_and_in_python():
    """TwoProduct's error ``a * b - fl(a * b)``: Dekker's split in plain Python and a fused
    multiply-add once compiled give the exact value (checked in rational arithmetic), operands from
    1e-150 to 1e150 and of both signs."""
    import numba

    rng = np.random.default_rng(8)
    a = rng.normal(size=400) * 10.0 ** rng.integers(-150, 150, size=400)
    b = rng.normal(size=400) * 10.0 ** rng.integers(-150, 150, size=400)
    compiled = jit._product_error_compiled()
    assert not isinstance(compiled, numba.core.registry.CPUDispatcher)  # (the intrinsic, not Dekker's fallback)

    @numba.njit
    def errors(a, b):
        out = np.empty(a.size)
        for k in range(a.size):
            out[k] = compiled(a[k], b[k], a[k] * b[k])
        return out

    fast = errors(a, b)
    for k in range(a.size):
        exact = Fraction(float(a[k])) * Fraction(float(b[k])) - Fraction(float(a[k] * b[k]))
        assert Fraction(float(fast[k])) == exact == Fraction(float(jit.product_error(a[k], b[k], a[k] * b[k])))
