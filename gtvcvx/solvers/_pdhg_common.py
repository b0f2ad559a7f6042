"""Pieces shared by the single-process and the distributed PDHG loops (:mod:`gtvcvx.solvers.gtv`,
:mod:`gtvcvx.solvers.distributed`): the callback record, the certificate schedule, the step-norm
estimate and warm-start validation."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import _jit
from ..problem import GTVProblem
from ..results import GTVResult
from ._edge_kernels import laplacian_product
from .certificate import Certificate

__all__ = ["IterationInfo", "CHECK_SPACING", "PREDICT_FROM_ENTRIES", "NONFINITE_CHECKS", "predicted_spacing",
           "step_norm_estimate", "warm_start_parts", "initial_primal_weight", "uniqueness_note"]


@dataclass
class IterationInfo:
    """What a callback sees at every certificate check-point."""

    iteration: int
    elapsed: float
    W: np.ndarray
    U: np.ndarray
    certificate: Certificate
    omega: float
    restarts: int


#: Certificate spacing ``max(minimum, iteration // fraction)`` (plus the residual trigger), for
#: cheap certificates and for those that need the conservation projection (CG), which cost
#: about ten iterations each. Measured: Table I (projection) 19 -> 11 certificates and
#: 3.3 s -> 2.2 s with (20, 4); clustering (no projection) is fastest with (10, 8).
CHECK_SPACING = {"cheap": (10, 8), "projection": (20, 4)}
#: From this many flow entries ``|E| d`` a certificate costs several iterations (10^7 SBM edges,
#: d = 10: ~3.8 s against ~0.9 s), and the spacing follows the certified gaps instead
#: (:func:`predicted_spacing`).
PREDICT_FROM_ENTRIES = 1 << 22
#: On those large problems: the first certificate at this iteration (at iteration 10 the certified
#: gap of 10^6 and 10^7 SBM edges was still 0.9999, a certificate that tells nothing), the second
#: after twice the usual spacing (:func:`predicted_spacing` needs two gaps), and the residual
#: trigger with exponent 1 instead of 0.7 (it certified at 1.2-1.8 tol, one certificate too early,
#: on all three instances below; the gap fell like r^1.2 on SBM graphs, r^2 on the clustering
#: instance). Replayed on the recorded gaps and residuals of every iteration (10^6 / 10^7 SBM
#: edges, 10^6 points in 7-D), in iterations plus certificates at their cost in iterations
#: (2.7, 4.7, 3.0): 80.5 -> 75.1, 84.5 -> 77.1, 102 -> 99; certificates 5 -> 3, 5 -> 3, 5 -> 4.
PREDICT_FIRST_CHECK, PREDICT_SECOND_SPACING, PREDICT_TRIGGER_EXPONENT = 20, 2, 1.0
#: The residual trigger's exponent elsewhere: the gap decays roughly like r^1.4 (r the fixed-point
#: residual) in our measurements (:func:`residual_trigger`).
RESIDUAL_TRIGGER_EXPONENT = 0.7
#: Stop (status ``solver_error``) once this many check-points in a row found ``P(W)`` not finite:
#: with finite data every loss and penalty is finite everywhere, so the objective overflows float64
#: at the iterates (data near 1e154 and above ran 100,000 iterations to no certificate).
NONFINITE_CHECKS = 3


def residual_trigger(tol: float, rel_gap: float, exponent: float = RESIDUAL_TRIGGER_EXPONENT) -> float:
    """The fraction of the fixed-point residual at a certificate below which the next certificate
    is due: about what the certified gap ``rel_gap`` still has to fall to reach ``tol``, with the
    gap decaying like ``r^(1/exponent)``; clipped to ``[0.02, 0.3]`` (0.3 for a zero gap)."""
    return min(max((tol / rel_gap) ** exponent, 0.02), 0.3) if rel_gap > 0 else 0.3


def predicted_spacing(spacing: int, iteration: int, gaps: list[tuple[int, float]], tol: float) -> int:
    """Iterations to the next certificate of a large problem: where the certified relative gap
    reaches ``tol`` at the geometric rate of the last two certificates (``gaps``: ``(iteration,
    rel_gap)`` pairs) plus a quarter, at least ``spacing // 4`` and at most ``4 * spacing`` (and
    ``iteration``) ahead; ``spacing`` itself without two decreasing finite gaps above ``tol``.

    Notes
    -----
    The core converges linearly on these problems (10^5-10^7 SBM edges: the gap falls ~5x every
    10 iterations), so a certificate every ``spacing`` iterations spends most of its cost on gaps
    far above ``tol``: with ``(k_1, g_1), (k_2, g_2)`` the last two, the rate is
    ``(g_2 / g_1)^(1 / (k_2 - k_1))`` and the gap reaches ``tol`` about
    ``log(tol / g_2) / log(rate)`` iterations after ``k_2``. A prediction that comes early costs one
    more certificate; the residual trigger of the loop still certifies earlier where the iterate
    converges faster than predicted. The schedule depends on iteration counts and gaps only, so
    runs stay reproducible.
    """
    if len(gaps) < 2:
        return spacing
    (k1, g1), (k2, g2) = gaps[-2], gaps[-1]
    if not (math.isfinite(g1) and 0.0 < g2 < g1 and g2 > tol and k2 > k1):
        return spacing
    rate = math.log(g2 / g1) / (k2 - k1)  # < 0
    # (a quarter more: the rate slows as the gap falls, e.g. 4 iterations predicted, 6 needed)
    ahead = math.ceil(1.25 * math.log(tol / g2) / rate)
    return int(min(max(ahead, max(spacing // 4, 1)), 4 * spacing, max(iteration, spacing)))


def warm_start_parts(problem: GTVProblem, warm_start):
    """Validated copies ``(W, U)`` of a warm start (a GTVResult or a dict); missing parts are None."""
    if warm_start is None:
        return None, None
    if isinstance(warm_start, GTVResult):
        W, U = warm_start.W, warm_start.U
    elif isinstance(warm_start, dict):
        unknown = sorted(map(str, set(warm_start) - {"W", "U"}))
        if unknown:  # ({"w": ...} ran as a cold start, silently)
            raise ValueError(f"warm_start: unknown key(s) {unknown}; expected 'W' and/or 'U'")
        W, U = warm_start.get("W"), warm_start.get("U")
    else:
        raise TypeError("warm_start must be a GTVResult or a dict with keys 'W' and/or 'U'")
    W = None if W is None else problem.check_W(W, "warm_start W").copy()
    U = None if U is None else problem.check_U(U, "warm_start U").copy()
    if W is not None:
        with np.errstate(over="ignore", invalid="ignore"):
            start_is_finite = np.isfinite(problem.objective(W)) or not np.isfinite(problem.objective(np.zeros_like(W)))
        if not start_is_finite:  # (where P(0) overflows too, the data are to blame: the solve says so)
            raise ValueError(f"warm_start W: P(W) evaluates to inf in float64 (entries up to "
                             f"{float(np.abs(W).max()):.3g}) while P(0) is finite; pass a start within the "
                             "data's range, or none")
    return W, U


def step_norm_estimate(graph, margin: float = 1.05, compiled: bool | None = None) -> float:
    r"""Estimate ``||Sigma_0^{1/2} D T_0^{1/2}||`` for the unit preconditioned steps.

    With ``tau_i = 1/deg_i`` and ``sigma_e = 1/2`` the norm squared is half the largest
    eigenvalue of the normalized Laplacian ``I - S A S``: at most 1 (bipartite graphs), often
    about 0.6 - 0.85 on clustered and random graphs, where steps ``1/norm`` times longer stay
    convergent. A lower estimate of the eigenvalue (:func:`top_eigenvalue`) gets a 5 % margin,
    the result is capped at 1, and the solver falls back to 1 if the PDHG metric turns
    indefinite along the iterates. ``compiled``: how the Laplacian products run
    (:func:`~gtvcvx.solvers._edge_kernels.laplacian_product`; the same estimate to rounding).
    """
    if graph.n_edges == 0:
        return 1.0
    deg = graph.degree.astype(float)
    scale = np.divide(1.0, np.sqrt(deg), out=np.zeros_like(deg), where=deg > 0)
    start = np.random.default_rng(0).standard_normal(graph.n) * (deg > 0)
    top = top_eigenvalue(lambda x: scale * laplacian_product(graph, scale * x, compiled), start,
                         lanczos=graph.n_edges >= _jit.MIN_ENTRIES)
    if not top > 0:  # (an operator that vanished on the start: no estimate, the safe steps)
        return 1.0
    return float(min(1.0, math.sqrt(top / 2.0) * margin))


def top_eigenvalue(apply, start: np.ndarray, lanczos: bool, power_steps: int = 60, lanczos_steps: int = 30) -> float:
    r"""A lower estimate of the largest eigenvalue of the symmetric PSD operator ``apply``:
    ``lanczos_steps`` Lanczos steps (the largest Ritz value), or ``power_steps`` steps of the
    power method (the last Rayleigh quotient).

    Notes
    -----
    On random and k-NN graphs with 10^5-10^6 nodes 20 Lanczos steps came closer to the converged
    value (within 0.3 %) than 60 power steps (within 0.6-1.3 %), in a third of the passes over
    the edges (at 10^7 edges 60 power steps took 11 s). Lanczos runs on graphs from
    ``gtvcvx._jit.MIN_ENTRIES`` edges; below, the power method stays: its estimate is the one the
    small problems' certificate lags and iteration counts were measured and tuned with (with the
    Lanczos step one test instance's uncorrected certificate lagged 2.4x instead of <= 2x). The
    three-term recurrence runs without reorthogonalization: lost orthogonality only repeats
    converged Ritz values, which stay inside the spectrum [2]_.

    References
    ----------
    .. [1] C. Lanczos, "An iteration method for the solution of the eigenvalue problem of linear
       differential and integral operators", J. Res. Nat. Bur. Standards 45, 1950.
    .. [2] B. N. Parlett, *The Symmetric Eigenvalue Problem*, SIAM 1998, ch. 13.
    """
    from scipy.linalg import eigvalsh_tridiagonal

    q = start / np.linalg.norm(start)
    if not lanczos:
        theta = 0.0
        for _ in range(int(power_steps)):
            y = apply(q)
            theta = float(q @ y)
            norm = np.linalg.norm(y)
            if norm == 0:
                return 0.0
            q = y / norm
        return theta
    q_prev, beta = np.zeros_like(q), 0.0
    alphas, betas = [], []
    for _ in range(int(lanczos_steps)):
        w = apply(q)
        alpha = float(q @ w)
        alphas.append(alpha)
        w -= alpha * q
        w -= beta * q_prev
        beta = float(np.linalg.norm(w))
        if not beta > 1e-10 * max(abs(alpha), 1e-300):  # an invariant subspace: T is exact
            break
        betas.append(beta)
        q_prev, q = q, w / beta
    return float(eigvalsh_tridiagonal(np.array(alphas), np.array(betas[: len(alphas) - 1]))[-1])


def initial_primal_weight(graph, W: np.ndarray, U: np.ndarray, primal_weight: float | None) -> float:
    """The starting primal weight ``omega``: the caller's, or the PDLP-style magnitude ratio
    ``||U|| sqrt(2) / ||W||_deg`` of the start point when it has both parts, else 1."""
    if primal_weight is None:
        size_x = math.sqrt(np.einsum("nd,nd->n", W, W) @ np.maximum(graph.degree, 1))
        size_y = math.sqrt(2.0 * np.einsum("ed,ed->", U, U))
        return min(max(size_y / size_x, 1e-8), 1e8) if size_x > 0 and size_y > 0 else 1.0
    omega = float(primal_weight)
    if not omega > 0:
        raise ValueError(f"primal_weight must be > 0, got {primal_weight!r}")
    return omega


def uniqueness_note(graph, has_data: np.ndarray) -> str:
    """Say when part of W is not determined: connected components where no node holds data
    (the loss is 0 there, so any common value of the component's w_i is optimal)."""
    if has_data.all():
        return ""
    labels = graph.components()
    with_data = np.zeros(graph.n_components, dtype=bool)
    with_data[labels[has_data]] = True
    blind = int((~with_data).sum())
    if blind == 0:
        return ""
    return (f"W is not unique on {blind} connected component(s) without any data: any common value of "
            f"their local models is optimal (returned the value reached from the start point)")
