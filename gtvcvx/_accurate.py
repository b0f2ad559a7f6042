"""Compensated (doubled-precision) kernels for the numbers a certificate reports.

A certificate is only as honest as its arithmetic: ``y - X w`` with labels near ``1e8`` and
residuals near ``0.05`` loses eight digits to cancellation in plain float64. The kernels here
use error-free transformations (Knuth's TwoSum, Dekker's TwoProduct) so that a residual is
computed *as if* in twice the working precision and then rounded once (Ogita, Rump & Oishi's
``Dot2``): its relative error is about ``eps + cond * eps^2`` instead of ``cond * eps``.

All kernels are vectorized over rows (samples); the only Python loop runs over the ``d``
columns of a row, never over samples, nodes or edges. From :data:`gtvcvx._jit.MIN_ENTRIES`
sample entries :func:`gathered_residuals_dot2` runs as one compiled pass (:func:`dot2_rows`, the
same transformations per sample; numba does not contract ``a * b + c`` into fused multiply-adds
unless asked to, which would break TwoSum; TwoProduct's error is one explicit fused multiply-add
there, :func:`gtvcvx._jit.product_error`): at 2e7 samples x 10 the NumPy blocks took ~5 s per
certificate.

References
----------
.. [1] T. Ogita, S. M. Rump, S. Oishi, "Accurate sum and dot product", SIAM J. Sci. Comput.
   26(6), 2005, Algorithms 3.1 (TwoSum), 3.2 (Split / TwoProduct) and 5.3 (Dot2).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from . import _jit
from ._jit import product_error

__all__ = ["two_sum", "two_product", "residuals_dot2", "rowwise_dot2", "gathered_residuals_dot2", "dot2_rows",
           "node_residual_sums_dot2"]

prange = range  # numba.prange once compiled (gtvcvx._jit.njit)

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
    A = np.asarray(A, dtype=np.float64)
    return gathered_residuals_dot2(np.zeros(A.shape[0]), A, B, np.arange(A.shape[0]), sign=1.0)


def residuals_dot2(y, A, B, *, sign: float = -1.0) -> np.ndarray:
    """``y_k + sign * <A[k], B[k]>`` for every row ``k``, in doubled precision (Dot2).

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
    return gathered_residuals_dot2(y, A, B, np.arange(A.shape[0]), sign=sign)


#: Rows per block: the temporaries of a block stay in cache.
_BLOCK = 8192


def gathered_residuals_dot2(y, X, W, rows, *, sign: float = -1.0, x_max: float | None = None) -> np.ndarray:
    """``y_k + sign * <X[k], W[rows[k]]>`` for every sample ``k``, in doubled precision.

    With ``sign = -1`` this is the residual ``y - X w`` of every sample (``rows`` maps a
    sample to its node), accurate even when ``y`` and ``X w`` agree to many digits. ``W`` is
    split once per row of ``W`` (nodes), the samples are processed in cache-sized blocks.

    Parameters
    ----------
    y : ndarray (M,)
    X : ndarray (M, d)
    W : ndarray (n, d)
    rows : ndarray (M,) of int
    sign : float
        ``+1`` or ``-1``.
    x_max : float, optional
        ``max |X|`` when the caller keeps it (a loss's samples do not change): one pass over the
        samples instead of three (0.3 s per certificate at 2e7 x 10 samples).

    Returns
    -------
    ndarray (M,)
    """
    X = np.asarray(X, dtype=np.float64)
    W = np.asarray(W, dtype=np.float64) * (1.0 if sign > 0 else -1.0)
    out = np.array(y, dtype=np.float64, copy=True)
    M = X.shape[0]
    if M == 0:
        return out
    # exact power-of-two scaling so that no operand exceeds the splitter's range and no
    # product or partial sum overflows (the result is scaled back, and may be +-inf only if
    # the true value is)
    x_max = abs_max(X) if x_max is None else float(x_max)  # (two passes over 1.6 GB at 2e7 x 10)
    w_max = abs_max(W)
    shift = _overflow_shift(x_max, w_max, out, X.shape[1])
    if shift:
        X = np.ldexp(X, -shift[0])
        W = np.ldexp(W, -shift[1])
        out = np.ldexp(out, -(shift[0] + shift[1]))
        x_max, w_max = np.ldexp(x_max, -shift[0]), np.ldexp(w_max, -shift[1])
    huge = x_max > _SPLIT_LIMIT or w_max > _SPLIT_LIMIT
    if not huge and X.size >= _jit.MIN_ENTRIES:  # one compiled pass
        _load_dot2(_jit.parallel_threads() > 1)(out, np.ascontiguousarray(X), np.ascontiguousarray(W),
                                                np.ascontiguousarray(rows, dtype=np.int64))
    else:
        _dot2_blocks(out, X, W, rows, huge)
    if shift:
        with np.errstate(over="ignore"):
            out = np.ldexp(out, shift[0] + shift[1])
    return out


def _dot2_blocks(out, X, W, rows, huge: bool) -> None:
    """:func:`gathered_residuals_dot2`'s accumulation in NumPy, ``_BLOCK`` samples at a time
    (``huge``: entries beyond the splitter's range get the plain product)."""
    M = X.shape[0]
    with np.errstate(over="ignore", invalid="ignore"):
        W_hi, W_lo = _split(W)
        for start in range(0, M, _BLOCK):  # blocks of samples, not a per-sample loop
            stop = min(start + _BLOCK, M)
            idx = rows[start:stop]
            A = X[start:stop]
            B = W[idx]
            P = A * B
            A_hi, A_lo = _split(A)
            B_hi, B_lo = W_hi[idx], W_lo[idx]
            E = A_lo * B_lo - (((P - A_hi * B_hi) - A_lo * B_hi) - A_hi * B_lo)
            if huge:
                E = np.where(np.isfinite(E) & (np.abs(A) <= _SPLIT_LIMIT) & (np.abs(B) <= _SPLIT_LIMIT), E, 0.0)
            total = out[start:stop]
            carry = E.sum(axis=1)
            for j in range(X.shape[1]):  # loop over features only
                s = total + P[:, j]
                bb = s - total
                carry += (total - (s - bb)) + (P[:, j] - bb)
                total = s
            out[start:stop] = total + carry


def dot2_rows(out, X, W, rows):
    """``out_k <- out_k + <X[k], W[rows[k]]>`` in doubled precision (Dot2: TwoProduct, one fused
    multiply-add once compiled (:func:`gtvcvx._jit.product_error`), TwoSum, the errors summed in a
    carry), sample by sample; operands within the splitter's range (:func:`gathered_residuals_dot2`
    scales or falls back first)."""
    M, d = X.shape
    for k in prange(M):
        i = rows[k]
        total = out[k]
        carry = 0.0
        for j in range(d):
            total, carry = dot2_add(total, carry, X[k, j], W[i, j])
        out[k] = total + carry


def dot2_add(total, carry, a, b):
    """One term of Dot2: ``(total + fl(a b), carry + the rounding errors of the product and of the
    sum)`` (TwoProduct, one fused multiply-add once compiled, :func:`gtvcvx._jit.product_error`;
    then TwoSum), the step :func:`dot2_rows` and :func:`node_residual_sums` share (a compiled helper,
    :func:`gtvcvx._jit.njit`)."""
    p = a * b
    carry += product_error(a, b, p)
    s = total + p
    bb = s - total
    carry += (total - (s - bb)) + (p - bb)
    return s, carry


def node_residual_sums(y, X, W, offsets, values, sums):
    """Per node ``i`` (samples ``offsets[i]:offsets[i + 1]``): ``values_i = sum_k r_k^2`` and
    ``sums_i = sum_k r_k x_k`` with ``r_k = y_k - <x_k, w_i>`` in doubled precision, the same
    operations in the same order as :func:`dot2_rows` (on ``-W``), then the sums in sample order
    (as a segment-sum product and ``node_weighted_sums``); nodes split over the threads."""
    n, d = W.shape
    for i in prange(n):
        for j in range(d):
            sums[i, j] = 0.0
        value = 0.0
        for k in range(offsets[i], offsets[i + 1]):
            total = y[k]
            carry = 0.0
            for j in range(d):
                total, carry = dot2_add(total, carry, X[k, j], -W[i, j])
            r = total + carry
            value += r * r
            for j in range(d):
                sums[i, j] += X[k, j] * r
        values[i] = value


def node_residual_sums_dot2(y, X, W, offsets, x_max: float):
    """``(sum_k r_k^2, sum_k r_k x_k)`` per node (shapes (n,), (n, d)) for the residuals
    ``r_k = y_k - <x_k, w_i>`` of samples stored node after node (node ``i``'s at
    ``offsets[i]:offsets[i + 1]``), in one compiled pass over the samples; ``x_max = max |X|``.
    None where the operands need :func:`gathered_residuals_dot2`'s exponent scaling (the caller
    then goes through it).

    The same numbers as :func:`gathered_residuals_dot2` followed by the two sums, without its
    per-sample array and the second and third pass over ``X`` (measured at 2e7 samples x 10, a
    loss's values and gradients at one point: 0.82-0.89 -> 0.50-0.53 s, bit-identical).
    """
    W = np.ascontiguousarray(W, dtype=np.float64)
    w_max = abs_max(W)
    if _overflow_shift(float(x_max), w_max, y, X.shape[1]) is not None or max(x_max, w_max) > _SPLIT_LIMIT:
        return None
    values, sums = np.empty(W.shape[0]), np.empty(W.shape)
    _load_node_sums(_jit.parallel_threads() > 1)(y, X, W, offsets, values, sums)
    return values, sums


@cache
def _load_node_sums(parallel: bool):
    """:func:`node_residual_sums` compiled (``parallel``: the threaded build), for a loss's read-only samples."""
    (kernel,) = _jit.njit(node_residual_sums, purpose="the doubled-precision residuals", parallel=parallel,
                          helpers=(dot2_add,))
    fixed = _jit.read_only(np.zeros((1, 1)))
    kernel(_jit.read_only(np.zeros(1)), fixed, np.zeros((1, 1)), _jit.read_only(np.array([0, 1], np.int64)),
           np.zeros(1), np.zeros((1, 1)))
    return kernel


@cache
def _load_dot2(parallel: bool):
    """:func:`dot2_rows` compiled (``parallel``: the threaded build)."""
    (kernel,) = _jit.njit(dot2_rows, purpose="the doubled-precision residuals", parallel=parallel,
                          helpers=(dot2_add,))
    # a loss's samples (and a caller's node rows) are read-only: other numba types
    for X in (np.zeros((1, 1)), _jit.read_only(np.zeros((1, 1)))):
        for rows in (np.zeros(1, np.int64), _jit.read_only(np.zeros(1, np.int64))):
            kernel(np.zeros(1), X, np.zeros((1, 1)), rows)
    return kernel


def abs_max(a: np.ndarray) -> float:
    """``max |a|`` (0 for an empty array, NaN if ``a`` holds one) without an ``|a|`` temporary: at
    2e7 x 10 samples each temporary cost ~1.2 s of page faults per certificate."""
    if a.size == 0:
        return 0.0
    return float(np.maximum(a.max(), -a.min()))


def _overflow_shift(x_max: float, w_max: float, y, d: int):
    """Binary exponents ``(kx, kw)`` that keep ``X 2^-kx``, ``W 2^-kw`` (``max |X| = x_max``,
    ``max |W| = w_max``) within the splitter's range and their ``d``-term row products and sums
    with ``y 2^-(kx+kw)`` finite; ``None`` if not needed."""
    def log2(m):
        return np.log2(m) if m > 0 else -np.inf

    lx, lw, ly = log2(x_max), log2(w_max), log2(abs_max(y))
    room = 1000.0 - np.log2(d + 2)
    if max(lx, lw) <= 990 and lx + lw <= room and ly <= room:
        return None
    kx = max(0, int(np.ceil(lx - 990))) if np.isfinite(lx) else 0
    kw = max(0, int(np.ceil(lw - 990))) if np.isfinite(lw) else 0
    extra = max(0.0, (lx - kx) + (lw - kw) - room, ly - kx - kw - room)
    return kx, kw + int(np.ceil(extra))
