r"""Problems whose objective is far below 1, solved in units where it is not.

The certified relative gap is ``(P - D) / (1 + |P| + |D|)`` (PDLP's choice), so where the
objective is far below 1, ``tol`` acts as an absolute tolerance on it: ``problems/quick/sbm_nlasso.toml``
with labels at the scale 1e-3 (``P(0) ~ 1e-7``) stopped ``optimal`` after 10 Halpern iterations
with ``W`` 47 % away from the solution and ``gap / P = 1.1``. A loss of quadratic growth answers
:meth:`~gtvcvx.losses.Loss.scaled`: with labels times ``c`` and a norm penalty at ``c lam``,

.. math:: P'(c W) = c^2 P(W), \qquad D'(c U) = c^2 D(U),

so :func:`gtvcvx.solve` (``backend="dask"`` too, for a problem whose data the client holds) and
:func:`~gtvcvx.solvers.ssnal.solve_ssnal` solve the problem with
``c = 2^k`` chosen to bring ``P(0)`` into ``[1, 4)`` (the problem as it would be at the scale 1)
and map everything back: powers of two scale without rounding (away from overflow and the
subnormals), so the caller's certified bounds are the solved ones divided by ``c^2`` exactly,
and the reported ``rel_gap`` (caller's units) is at most the one the run stopped at.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from ..capabilities import provides
from ..problem import GTVProblem
from ..results import GTVResult, relative_gap
from ._pdhg_common import IterationInfo, warm_start_parts

__all__ = ["label_scale", "scale_for", "LabelScale", "ScaledSolve", "solve_scaled"]

#: ``P(0)`` below this is solved in scaled units (``c^2 P(0)`` in ``[1, 4)``).
SCALE_BELOW = 1.0
#: The largest exponent ``k`` of ``c = 2^k``: ``c^2 P(0)`` stays far from overflow and the labels
#: far from it too (``P(0) < 2^-1000`` is solved at ``c = 2^500``).
MAX_EXPONENT = 500


def label_scale(problem: GTVProblem) -> float:
    """The power of two ``c >= 1`` the labels are scaled by (1: solved as given).

    ``c = 2^k`` with ``c^2 P(0)`` in ``[1, 4)`` where ``0 < P(0) < 1``, the loss provides
    :meth:`~gtvcvx.losses.Loss.scaled` and the penalty declares the trait ``"norm"`` (positively
    homogeneous: ``lam`` then scales by ``c``).
    """
    if not (provides(problem.penalty, "norm") and provides(problem.loss, "scaled")):
        return 1.0
    with np.errstate(all="ignore"):
        at_zero = float(problem.loss.value(np.zeros((problem.n, problem.d))))
    factor = scale_for(at_zero)
    while factor > 1.0 and not np.isfinite(problem.lam * factor * problem.graph.weights.max(initial=0.0)):
        factor *= 0.5  # (lam near float64's largest: its scaled capacities must stay finite)
    return factor


def scale_for(at_zero: float) -> float:
    """The power of two ``c >= 1`` with ``c^2 P(0)`` in ``[1, 4)`` for ``0 < P(0) = at_zero < 1``; else 1.
    (The Dask backend sums ``at_zero`` over the sites, which keep their labels.)"""
    if not 0.0 < at_zero < SCALE_BELOW:
        return 1.0
    exponent = int(np.ceil(-0.5 * np.log2(at_zero)))  # c^2 P(0) = 2^(2k) P(0) >= 1
    while exponent > 0 and np.ldexp(at_zero, 2 * exponent - 2) >= 1.0:
        exponent -= 1  # (log2 rounding)
    return float(np.ldexp(1.0, min(exponent, MAX_EXPONENT)))


def solve_scaled(problem: GTVProblem, time_limit, warm_start, callback, run) -> GTVResult | None:
    """``None`` where :func:`label_scale` is 1; else ``run(scaled problem, time left, warm start,
    callback)`` in scaled units (see :class:`ScaledSolve`), its result mapped back, the scaling's
    own time charged to ``setup_time`` and taken off ``time_limit``."""
    start = time.perf_counter()
    factor = label_scale(problem)
    if factor == 1.0:
        return None
    scaled = ScaledSolve(problem, factor)
    warm = scaled.warm_start_in(warm_start)
    spent = time.perf_counter() - start
    # (a limit spent on the scaling itself still runs: the smallest positive limit stops at the first check)
    left = None if time_limit is None else max(float(time_limit) - spent, float(np.finfo(float).tiny))
    result = run(scaled.problem, left, warm, scaled.callback_in(callback))
    result.setup_time += spent
    return scaled.result_out(result)


def _over(array, divisor):
    """``array / divisor``, or None (arrays the Dask backend keeps on its workers)."""
    return None if array is None else array / divisor


class LabelScale:
    """The maps of callbacks, certificates and results from units with labels times ``factor``
    back to the caller's.

    Parameters
    ----------
    factor : float
        ``c`` from :func:`label_scale` / :func:`scale_for` (a power of two > 1).
    """

    def __init__(self, factor: float):
        self.factor = float(factor)

    def certificate_out(self, certificate):
        """A certificate of the scaled problem as one of the caller's (values over ``c^2``)."""
        area = self.factor * self.factor
        primal, dual = certificate.primal / area, certificate.dual / area
        residuals = dict(certificate.residuals)
        for key in ("rounding_allowance", "residual_allowance", "estimated_allowance"):
            if key in residuals:
                residuals[key] = residuals[key] / area
        return dataclasses.replace(certificate, primal=primal, dual=dual, gap=certificate.gap / area,
                                   rel_gap=relative_gap(primal, dual), node_gaps=_over(certificate.node_gaps, area),
                                   edge_gaps=_over(certificate.edge_gaps, area),
                                   U=_over(certificate.U, self.factor),
                                   residuals=residuals)

    def callback_in(self, callback):
        """The caller's callback, seeing ``W``, ``U`` and the certificate in the caller's units."""
        if callback is None:
            return None

        def scaled_callback(info: IterationInfo):
            certificate = self.certificate_out(info.certificate)
            shared = info.U is not None and info.U is info.certificate.U
            U = certificate.U if shared else _over(info.U, self.factor)
            return callback(dataclasses.replace(info, W=_over(info.W, self.factor), U=U, certificate=certificate))

        scaled_callback.copies_arrays = True
        if hasattr(callback, "wants"):
            scaled_callback.wants = lambda certificate: callback.wants(self.certificate_out(certificate))
        return scaled_callback

    def result_out(self, result: GTVResult) -> GTVResult:
        """The result in the caller's units (in place): ``W``, ``U``, values, gaps, history."""
        c, area = self.factor, self.factor * self.factor
        result.W, result.U = _over(result.W, c), _over(result.U, c)
        result.primal, result.dual, result.gap = result.primal / area, result.dual / area, result.gap / area
        if np.isfinite(result.value):
            result.value = result.value / area
        result.rel_gap = relative_gap(result.primal, result.dual) if np.isfinite(result.gap) else result.rel_gap
        for key in ("rounding_allowance", "residual_allowance", "estimated_allowance"):
            if key in result.residuals:
                result.residuals[key] = result.residuals[key] / area
        for key in ("node_gaps", "edge_gaps"):
            if isinstance(result.info.get(key), np.ndarray):
                result.info[key] = result.info[key] / area
        history = result.history
        if history is not None and len(history) and {"primal", "dual", "gap", "rel_gap"} <= set(history.columns):
            history = history.copy()
            for prefix in ("", "polished_"):
                if f"{prefix}primal" not in history.columns:
                    continue
                primal, dual = history[f"{prefix}primal"] / area, history[f"{prefix}dual"] / area
                history[f"{prefix}primal"], history[f"{prefix}dual"] = primal, dual
                history[f"solved_{prefix}rel_gap"] = history[f"{prefix}rel_gap"]
                # relative_gap row by row (same operations, same order: equal to the result's)
                finite = np.isfinite(primal) & np.isfinite(dual)
                history[f"{prefix}rel_gap"] = ((primal - dual) / (1.0 + primal.abs() + dual.abs())).where(
                    finite, history[f"{prefix}rel_gap"])
            history["gap"] = history["gap"] / area
            result.history = history
        result.info["label_scale"] = c
        if "gap" in result.message:  # (a message's gaps are the run's: say in which units)
            result.message += f" [gaps in this message: labels x 2^{int(np.log2(c))}, see info['label_scale']]"
        return result


class ScaledSolve(LabelScale):
    """The problem in scaled units, and the maps of warm starts, callbacks and results.

    Parameters
    ----------
    problem : GTVProblem
        The caller's problem.
    factor : float
        ``c`` from :func:`label_scale` (a power of two > 1).
    """

    def __init__(self, problem: GTVProblem, factor: float):
        super().__init__(factor)
        self.original = problem
        self.problem = GTVProblem(problem.graph, problem.loss.scaled(self.factor), problem.penalty,
                                  problem.lam * self.factor)

    def warm_start_in(self, warm_start):
        """The caller's warm start (validated on the caller's problem) in scaled units."""
        if warm_start is None:
            return None
        W, U = warm_start_parts(self.original, warm_start)
        return {"W": None if W is None else W * self.factor, "U": None if U is None else U * self.factor}
