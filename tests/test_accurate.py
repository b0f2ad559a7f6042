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
