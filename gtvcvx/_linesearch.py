"""Backtracking (Armijo) line search shared by the damped Newton methods (baselines, recovery)."""

from __future__ import annotations

__all__ = ["armijo_step"]


def armijo_step(value, x, step, f: float, decrement: float, *, t_min: float = 1e-12, slope: float = 0.25):
    """The point ``x + t step`` for the largest ``t = 2^-j`` with sufficient decrease.

    Parameters
    ----------
    value : callable
        The objective.
    x, step : ndarray
        Current point and (Newton) direction.
    f : float
        ``value(x)``.
    decrement : float
        The predicted decrease ``-grad^T step`` (> 0 for a descent direction).
    t_min : float
        Smallest step tried; it is taken when no larger one decreases enough.
    slope : float
        Armijo constant ``c`` in ``value(x + t step) <= f - c t decrement``.

    Returns
    -------
    (ndarray, float)
        The new point and its objective value.

    References
    ----------
    .. [1] J. Nocedal, S. J. Wright, *Numerical Optimization*, 2nd ed., Springer, 2006,
       Algorithm 3.1 (backtracking line search).
    """
    t = 1.0
    while True:
        f_new = value(x + t * step)
        if f_new <= f - slope * t * decrement or t <= t_min:
            return x + t * step, f_new
        t *= 0.5
