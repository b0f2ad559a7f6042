"""Compensated (doubled-precision) kernels for the numbers a certificate reports.

A certificate is only as honest as its arithmetic: ``y - X w`` with labels near ``1e8`` and
residuals near ``0.05`` loses eight digits to cancellation in plain float64. The kernels here
use error-free transformations (Knuth's TwoSum, Dekker's TwoProduct) so that a residual is
computed *as if* in twice the working precision and then rounded once (Ogita, Rump & Oishi's
``Dot2``): its relative error is about ``eps + cond * eps^2`` instead of ``cond * eps``.

All kernels are vectorized over rows (samples); the only Python loop runs over the ``d``
columns of a row, never over samples, nodes or edges.

References
----------
.. [1] T. Ogita, S. M. Rump, S. Oishi, "Accurate sum and dot product", SIAM J. Sci. Comput.
   26(6), 2005, Algorithms 3.1 (TwoSum), 3.2 (Split / TwoProduct) and 5.3 (Dot2).
"""

from __future__ import annotations

import numpy as np

__all__ = ["two_sum", "two_product", "residuals_dot2", "rowwise_dot2"]

_SPLITTER = 134217729.0  # 2**27 + 1 (Dekker's split of a 53-bit significand)
_SPLIT_LIMIT = 2.0 ** 996  # beyond this the splitter overflows


def two_sum(a, b):
    """``s + e = a + b`` exactly, with ``s = fl(a + b)`` (Knuth; elementwise)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def _split(a):
    c = _SPLITTER * a
    high = c - (c - a)
    return high, a - high


def two_product(a, b):
    """``p + e = a * b`` exactly, with ``p = fl(a * b)`` (Dekker; elementwise).

    Exact unless an operand exceeds ``2**996`` in magnitude or the product underflows; those
    entries get ``e = 0`` (the plain product), which callers' data never reach in practice.
    """
    with np.errstate(over="ignore", invalid="ignore"):  # huge operands: masked below
        p = a * b
        a1, a2 = _split(a)
        b1, b2 = _split(b)
        e = a2 * b2 - (((p - a1 * b1) - a2 * b1) - a1 * b2)
    bad = ~np.isfinite(e) | (np.abs(a) > _SPLIT_LIMIT) | (np.abs(b) > _SPLIT_LIMIT)
    if bad.any():
        e = np.where(bad, 0.0, e)
    return p, e


def rowwise_dot2(A, B) -> np.ndarray:
    """``sum_j A[k, j] * B[k, j]`` for every row ``k``, in doubled precision (Dot2).

    Parameters
    ----------
    A, B : ndarray (M, d)

    Returns
    -------
    ndarray (M,)
    """
    return residuals_dot2(np.zeros(A.shape[0]), A, B, sign=1.0)


def residuals_dot2(y, A, B, *, sign: float = -1.0) -> np.ndarray:
    """``y_k + sign * <A[k], B[k]>`` for every row ``k``, in doubled precision (Dot2).

    With ``sign = -1`` this is the residual ``y - X w`` of every sample, accurate even when
    ``y`` and ``X w`` agree to many digits.

    Parameters
    ----------
    y : ndarray (M,)
    A, B : ndarray (M, d)
    sign : float
        ``+1`` or ``-1``.

    Returns
    -------
    ndarray (M,)
    """
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    total = np.array(y, dtype=np.float64, copy=True)
    if A.shape[0] == 0:
        return total
    P, E = two_product(A, B)
    if sign < 0:
        P, E = -P, -E
    carry = E.sum(axis=1)  # the product errors are O(eps) of the terms: a plain sum suffices
    for j in range(A.shape[1]):  # loop over features only
        total, err = two_sum(total, P[:, j])
        carry += err
    return total + carry
