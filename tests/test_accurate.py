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
