r"""Honest certificates for the kernel-sparse dual: dual bound, feasible primal point, gaps.

Given any multiplier vector ``lambda`` and, optionally, a candidate envelope-primal point
``z = Delta * alpha``, :func:`certify` evaluates

* the dual objective at ``lambda`` projected onto ``[0, C]`` (a valid lower bound);
* the paper's L0 recovery ``alpha_j = abar_j [abar_j^2 > 2 gamma]``, its L0 objective and its
  margin violation;
* the convex-envelope primal at a *feasible* point built from the candidates (soft margin:
  every point is feasible; hard margin: a positive rescaling, or a convex combination with a
  known feasible point), so that ``primal - dual`` is a true duality gap and bounds the
  suboptimality of both the multipliers and the primal point.

When no feasible primal point can be built (hard margin, violated margins that no rescaling
fixes), ``primal`` is ``inf`` and the message says so: the gap is never a made-up number.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_float_array, check_nonnegative_scalar
from ..results import relative_gap, resolution_message
from .problem import RKHSProblem, phi_conjugate

__all__ = ["RKHSCertificate", "certify", "envelope_bound", "hard_margin_feasible_point", "farkas_ray", "farkas_dual_bound"]


@dataclass
class RKHSCertificate:
    """See :func:`certify`.

    Attributes
    ----------
    multipliers : ndarray (N,)
        The multipliers whose dual value ``dual`` bounds: ``lambda`` projected onto ``[0, C]``, times
        ``1 - pullback``.
    dual : float
    alpha : ndarray (M,)
        L0 recovery from ``lam`` (before any pull-back).
    l0_primal : float
        L0 objective at ``alpha`` (cost, plus the hinge term for a soft margin); ``inf`` for a hard
        margin the point violates (by how much: ``margin_violation``).
    l0_gap : float
        ``l0_primal - dual``.
    margin_violation : float
        ``max_n pos(1 - eps - y_n f_alpha(x_n))``.
    alpha_envelope : ndarray (M,) or None
        The feasible envelope-primal point, or None.
    primal, gap, rel_gap : float
        Envelope objective at ``alpha_envelope`` and the duality gap (``inf`` without a point).
    repair : str
        How the feasible point was obtained (``"none"``, ``"scaled"``, ``"combined"``).
    message : str
    rounding : float
        The first-order bounds on the rounding of the reported ``dual`` and ``primal`` (already
        subtracted from / added to them), summed: the part of ``gap`` that no iterate can remove.
    dual_rounding, primal_rounding : float
        Its two parts (``primal_rounding`` is 0 without a primal point).
    pullback : float
        ``t`` when the dual bound is that of ``(1 - t) lambda`` (atoms a rounding above the kink pulled
        below it, see :func:`_pullback`), else 0.
    """

    multipliers: np.ndarray
    dual: float
    alpha: np.ndarray
    l0_primal: float
    l0_gap: float
    margin_violation: float
    alpha_envelope: np.ndarray | None
    primal: float
    gap: float
    rel_gap: float
    repair: str = "none"
    message: str = ""
    rounding: float = 0.0
    dual_rounding: float = 0.0
    primal_rounding: float = 0.0
    pullback: float = 0.0

    @property
    def resolution(self) -> float:
        """The smallest relative gap this certificate could show: its rounding allowance over
        ``1 + |P| + |D|`` (``nan`` without a finite primal and dual). A requested tolerance below
        it cannot be certified in float64."""
        if not (np.isfinite(self.primal) and np.isfinite(self.dual)):
            return float("nan")
        return self.rounding / (1.0 + abs(self.primal) + abs(self.dual))

    def resolution_message(self, tol: float) -> str:
        """Why ``tol`` is below what float64 can certify here (see :attr:`resolution`)."""
        return resolution_message(tol, self.resolution)


def _dual_rounding(problem: RKHSProblem, lam, abar, abar_bound) -> float:
    r"""A bound on ``|fl(D(lambda)) - D(lambda)|`` for ``lambda`` in the box (first order in the unit roundoff).

    Notes
    -----
    With ``u`` the machine epsilon (twice the unit roundoff: every ``u`` below is generous) and ``b = (1/N) |K|^T |lambda|`` (computed, all terms >= 0), each
    computed ``abar_j`` is within ``delta_j = 4 (N + 8) u b_j`` of the exact one (a dot product of at
    most ``N`` terms plus the rounded entries of ``K y / N``; twice the classical ``gamma_N``). The
    conjugate ``phi*(a) = pos(a^2/2 - gamma)`` is zero on ``|a| <= s`` and ``max |a|``-Lipschitz
    beyond, so an atom with ``|abar_j| + delta_j <= s (1 - 8u)`` has ``phi*`` exactly zero both
    computed and exact, and any other atom is off by at most
    ``(|abar_j| + delta_j) delta_j + 4u ((|abar_j| + delta_j)^2/2 + gamma)`` (the segment, then the
    evaluation of ``a^2/2 - gamma``). The two sums add ``4 (M + 2) u sum_j Delta_j phi*_j`` and
    ``4 (N + 2) u sum_n |c_n lambda_n|`` (products and the rounded ``c``), and the final
    subtraction ``2u`` of both magnitudes. The whole is doubled. Unlike a bound through
    ``phi*(b)``, atoms inside the identity zone cost nothing, which is what lets a certificate
    show gaps near ``1e-11`` instead of ``1e-9`` on the benchmark instance (``3e-12`` with the
    extended-precision re-evaluation of :func:`_extended_dual`).
    """
    p = problem
    near, delta = _kink_atoms(p, abar, abar_bound)
    conjugate_sum = float(p.Delta @ phi_conjugate(abar, p.gamma))
    linear_sum = float(np.abs(p.c) @ np.abs(lam))
    return _allowance(p, near, np.abs(abar[near]) + delta, delta, np.finfo(float).eps, p.M, conjugate_sum, linear_sum)


def _kink_atoms(problem: RKHSProblem, abar, abar_bound):
    """``(near, delta)``: the atoms whose ``phi*`` may be nonzero, exactly or as computed
    (``|abar_j| + delta_j > s (1 - 8u)``), and ``delta_j = 4 (N + 8) u b_j``, the bound on the rounding of
    their float64 ``abar_j`` (see :func:`_dual_rounding`); every other atom has ``phi* = 0`` both ways."""
    u = np.finfo(float).eps
    delta = 4.0 * (problem.N + 8) * u * abar_bound
    near = np.flatnonzero(np.abs(abar) + delta > problem.s * (1.0 - 8.0 * u))
    return near, delta[near]


def _allowance(problem: RKHSProblem, near, reach, delta, unit: float, n_terms: int, conjugate_sum: float,
               linear_sum: float) -> float:
    """The doubled first-order allowance of :func:`_dual_rounding` (and, with the extended unit and
    ``delta``, of :func:`_extended_dual`): the near atoms' segments and evaluations, the two sums
    (``n_terms`` conjugate terms, ``N`` linear ones) and the final subtraction, in units of ``unit``."""
    p = problem
    atom_error = reach * delta + 4.0 * unit * (0.5 * np.square(reach) + p.gamma)
    total = (float(p.Delta[near] @ atom_error) + 4.0 * (n_terms + 2) * unit * conjugate_sum
             + 4.0 * (p.N + 2) * unit * linear_sum + 2.0 * unit * (linear_sum + conjugate_sum))
    return 2.0 * total


#: The unit of the extended-precision re-evaluation of the dual (machine epsilon of ``np.longdouble``:
#: 1.1e-19 for x86-64's 80-bit format; where ``longdouble`` is plain float64 the re-evaluation is skipped).
EXTENDED_EPS = float(np.finfo(np.longdouble).eps)


#: Atoms per block of :func:`_abar_extended` are chosen so that a block holds about this many kernel entries.
EXTENDED_BLOCK_ENTRIES = 1 << 21


def _tree_segment_sums(values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Sums of consecutive segments of ``values`` (``lengths[k]`` entries each, in order) by balanced
    trees: at each level the entries ``2i`` and ``2i + 1`` of a segment are added (a last odd one
    passes unchanged), so an entry of a segment of ``L`` passes through at most ``ceil(log2 L)``
    additions. Work ~``2 values.size``, vectorized over all segments at once."""
    lengths = np.asarray(lengths, dtype=np.int64)
    out = np.zeros(lengths.size, dtype=values.dtype)
    while lengths.size and lengths.max() > 1:
        starts = np.cumsum(lengths) - lengths
        local = np.arange(values.size) - np.repeat(starts, lengths)
        left = np.flatnonzero(local % 2 == 0)
        halved = (lengths + 1) // 2
        paired = local[left] + 1 < np.repeat(lengths, halved)
        summed = values[left]
        summed[paired] += values[left[paired] + 1]
        values, lengths = summed, halved
    out[lengths == 1] = values
    return out


def _abar_extended(problem: RKHSProblem, lam, atoms):
    r"""``abar[atoms] = (1/N) K[:, atoms]^T (y lam)`` in ``np.longdouble`` from the problem's own kernel
    entries (columns of :attr:`~RKHSProblem.K_columns`, or rows of ``K^T`` when dense: exact data, not
    the rounded entries of ``Phi``), each summed by :func:`_tree_segment_sums`, in blocks of atoms
    of about :data:`EXTENDED_BLOCK_ENTRIES` entries (bounded temporaries at large N).

    Notes
    -----
    The weights ``y_n lambda_n`` are exact (sign flips of float64 values), each product rounds once and
    the tree adds ``ceil(log2 N)`` roundings, the division by ``N`` one more, so the result is within
    ``gamma_{ceil(log2 N) + 2} b_j`` of the exact ``abar_j`` (``b = (1/N) |K|^T |lambda|``; Higham 2002,
    eq. (3.5) and Sec. 4.2): see :func:`_extended_delta`. A sequential sum would be within
    ``gamma_{N + 1} b_j``, ~``N / log2 N`` times looser (75 times at N = 900).

    References
    ----------
    N. J. Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., SIAM, 2002.
    """
    p = problem
    out = np.zeros(atoms.size, dtype=np.longdouble)
    weights = (p.y * lam).astype(np.longdouble)  # exact: a sign flip of float64 values
    per_block = max(1, EXTENDED_BLOCK_ENTRIES // p.N)
    for start in range(0, atoms.size, per_block):
        block = atoms[start:start + per_block]
        if p.dense:
            terms = (p.Kt[block].astype(np.longdouble) * weights).ravel()
            lengths = np.full(block.size, p.N)
        else:
            columns = p.K_columns[:, block]
            terms = columns.data.astype(np.longdouble) * weights[columns.indices]
            lengths = np.diff(columns.indptr)
        out[start:start + block.size] = _tree_segment_sums(terms, lengths)
    return out / p.N


def _extended_delta(problem: RKHSProblem, abar_bound) -> np.ndarray:
    """The bound ``2 (ceil(log2 N) + 4) u_x b_j`` on the rounding of :func:`_abar_extended`'s
    ``abar_j``: ``gamma_{ceil(log2 N) + 2}`` with room for the float64 rounding of ``b`` itself
    (``u_x`` is ``np.longdouble``'s machine epsilon, twice its unit roundoff)."""
    depth = max(problem.N - 1, 0).bit_length()
    return 2.0 * (depth + 4) * EXTENDED_EPS * abar_bound


#: The extended-precision re-evaluation runs when the float64 dual's rounding allowance exceeds this
#: fraction of the gap (near the float64 resolution); elsewhere it could not change the gap noticeably.
EXTENDED_WHEN = 0.01


def _extended_dual(problem: RKHSProblem, lam, abar, abar_bound) -> tuple[float, float] | None:
    r"""``(dual, rounding)``: a lower bound ``dual <= D(lambda)`` (exact arithmetic) re-evaluated in
    extended precision, and the allowance already subtracted; ``None`` where ``np.longdouble`` is float64.

    Notes
    -----
    The atoms whose ``phi*`` may be nonzero (``|abar_j| + delta_j > s (1 - 8u)``, see
    :func:`_dual_rounding`; on the benchmark instance ~120 of 3072) and the linear term are
    re-evaluated in ``np.longdouble`` with unit ``u_x``: such an ``abar_j`` is summed from the
    problem's own kernel entries times ``y_n lambda_n`` (all exact) by a balanced tree and divided by
    ``N`` (:func:`_abar_extended`), so it is within ``delta'_j = 2 (ceil(log2 N) + 4) u_x b_j`` of the
    exact value (:func:`_extended_delta`), ~10^5 times tighter than the float64 sum at N = 900 (a
    sequential long-double sum would give ``4 (N + 8) u_x b_j``; from the rows of ``Phi``, whose entries
    carry a rounding of ``u`` relative of their own, ``4 (u + (N + 8) u_x) b_j``: with atom weights
    ``Delta ~ 1e9``, samples at the scale 1e4, that ``u`` alone held the resolution at 2.7e-6, the
    sequential sum at 1.6e-7, the tree sum at 7e-9). The allowance is the float64 one with
    ``delta'`` for ``delta``, ``u_x`` for the sums, doubled, plus ``2u (|c.l| + sum Delta phi*)`` for
    the return to float64. Under cancellation (hard margins, large multipliers) this is what lets the
    certificate's resolution on a hard margin at N = 900 (gamma = 25, multipliers in the thousands)
    fall from 6.8e-11 to 2e-12 (2.4e-13 with :func:`_primal_rounding` counting nonzero terms, 8.4e-14
    with the tree sum). It
    costs ``|near| N`` long-double products (a fifth of a classifier fit at N = 10^5 if run at every
    check), so :func:`certify` runs it only where the float64 allowance weighs in the gap
    (:data:`EXTENDED_WHEN`) or in a caller's ``gap_hint``.
    """
    p = problem
    u = np.finfo(float).eps
    if EXTENDED_EPS > u / 64.0:
        return None
    ux = EXTENDED_EPS
    near, _ = _kink_atoms(p, abar, abar_bound)  # the others have phi* = 0 exactly
    a = _abar_extended(p, lam, near)
    conj = np.sum(p.Delta[near] * np.maximum(np.square(a) / 2 - p.gamma, 0))
    lin = (1 - np.longdouble(p.eps)) * np.sum(lam.astype(np.longdouble)) / p.N
    value = float(lin - conj)
    delta_x = _extended_delta(p, abar_bound[near])
    lin, conj = abs(float(lin)), float(conj)
    rounding = (_allowance(p, near, np.abs(a.astype(float)) + delta_x, delta_x, ux, near.size, conj, lin)
                + 2.0 * u * (lin + conj))
    return value - rounding, rounding


def _dual_bound(problem: RKHSProblem, lam, abar, abar_bound, primal: float, gap_hint: float) -> tuple[float, float]:
    """``(dual, rounding)``: ``D(lam)`` lowered by its float64 allowance (:func:`_dual_rounding`), or by the
    extended-precision one (:func:`_extended_dual`) where the float64 allowance exceeds
    :data:`EXTENDED_WHEN` times the smaller of ``primal - dual`` and ``gap_hint`` and the re-evaluation
    gives the higher bound."""
    # c.lam - sum Delta phi*(abar) can cancel when C is large: lower the bound by a first-order
    # bound on its rounding, so that dual <= D(lam) <= P* holds to the last bit
    rounding = _dual_rounding(problem, lam, abar, abar_bound)
    dual = problem.dual_objective(lam, abar) - rounding
    if rounding > EXTENDED_WHEN * min(primal - dual, gap_hint):  # near float64's resolution: tighten it
        extended = _extended_dual(problem, lam, abar, abar_bound)
        if extended is not None and extended[0] > dual:
            return extended
    return dual, rounding


#: Atoms with ``s < |abar_j| <= s (1 + PULLBACK_REACH)`` count as "at the kink" for :func:`_pullback`.
PULLBACK_REACH = 1e-6


def _pullback(problem: RKHSProblem, lam, abar, abar_bound, dual_rounding: float) -> float | None:
    r"""The factor ``t`` for which ``(1 - t) lambda`` may give a higher dual bound than ``lambda``, or None.

    Notes
    -----
    At an optimum with atoms at the kink (``|abar_j| = s``, the usual case: the kernels the model
    uses at less than full shrinkage), float64 multipliers put those ``abar_j`` a rounding above or
    below ``s``, and each atom above or within its rounding allowance ``delta_j`` of ``s`` costs
    ``Delta_j (phi*(abar_j) + |abar_j| delta_j)``: with atom weights ``Delta ~ 1e9`` (grid
    weights on unscaled data) that held certified gaps at 3e-6. Since ``abar`` is linear in
    ``lambda``, ``(1 - t) lambda`` with ``t`` just above ``max_j (|abar_j| + 2 delta_j - s (1 - 16 u))
    / |abar_j|`` over those atoms (``|abar_j| <= s (1 +`` :data:`PULLBACK_REACH` ``)``) puts every one
    of them strictly inside the zone where ``phi*`` is exactly zero, for the price of ``t`` times the
    linear term. ``t`` is returned where that price is below the atoms' cost plus the allowance,
    i.e. where the pulled-back point may pay; :func:`certify` evaluates it like any multipliers (it
    lies in the box) and keeps the higher bound, so the choice of ``t`` affects only how tight the
    bound is, never its validity.
    """
    p = problem
    u = np.finfo(float).eps
    near, delta = _kink_atoms(p, abar, abar_bound)
    magnitude = np.abs(abar[near])
    at_kink = (magnitude <= p.s * (1.0 + PULLBACK_REACH)) & (magnitude > 0.0)
    if not at_kink.any():
        return None
    magnitude, delta, atoms = magnitude[at_kink], delta[at_kink], near[at_kink]
    t = float(np.max((magnitude + 2.0 * delta - p.s * (1.0 - 16.0 * u)) / magnitude))
    t = 2.0 * max(t, 0.0) + 16.0 * u
    cost = float(p.Delta[atoms] @ phi_conjugate(abar[atoms], p.gamma)) + dual_rounding
    price = t * abs(float(p.c @ lam))
    return t if t < 1.0 and price < cost else None


def _combine(problem: RKHSProblem, alpha, f, feasible_alpha, feasible_f):
    """Largest ``theta in [0, 1]`` with ``theta * alpha + (1 - theta) * feasible`` margin-feasible."""
    target = 1.0 - problem.eps
    m = problem.y * f
    m0 = problem.y * feasible_f
    bad = m < target
    if not bad.any():
        return np.asarray(alpha, dtype=float)
    denom = m0[bad] - m[bad]
    theta = float(np.min((m0[bad] - target) / denom)) if (denom > 0).all() else 0.0
    theta = min(max(theta * (1.0 - 1e-12), 0.0), 1.0)
    point = theta * alpha + (1.0 - theta) * feasible_alpha
    if (problem.y * problem.decision(point) < target).any():
        return None
    return point


def _hinge_rounding(problem: RKHSProblem, alpha, f) -> float:
    r"""A bound on the rounding of the soft-margin hinge sum ``(C/N) sum_n pos(1 - eps - y_n f_n)``
    carried in from that of ``f = K (Delta alpha)``.

    Notes
    -----
    Each computed ``f_n`` sums the ``k = nnz(alpha)`` nonzero products (exact zeros add no
    rounding), so it is within ``4 (k + 2) u (|K| |Delta alpha|)_n`` of the exact value, plus
    ``4u (1 + eps + |f_n|)`` for forming ``1 - eps - y_n f_n``: ``delta_n``. A sample's hinge
    can differ from its computed value by at most ``delta_n``, and only where the computed
    ``1 - eps - y_n f_n + delta_n > 0``; the sum of those, times ``C/N``, doubled. (The sum of the
    hinges and the cost are charged in :func:`_primal_rounding`.) Without this
    term a soft-margin point with many margins at the kink and a large ``C`` could be reported
    below its own exact objective (found by ``tests/test_rkhs_honesty.py``: up to 9e-12 relative).
    """
    p = problem
    u = np.finfo(float).eps
    alpha = np.asarray(alpha, dtype=float)
    k = np.count_nonzero(alpha)
    delta = 4.0 * (k + 2) * u * _abs_decision(p, alpha) + 4.0 * u * (1.0 + p.eps + np.abs(f))
    at_risk = (1.0 - p.eps - p.y * f) + delta > 0
    return 2.0 * p.C / p.N * float(np.sum(delta[at_risk]))


def _abs_decision(problem: RKHSProblem, alpha) -> np.ndarray:
    """``|K| |Delta alpha|`` per sample (the scale of the rounding of ``f = K (Delta alpha)``); with ``K >= 0``
    (Gaussian atoms) and ``Delta > 0`` it is ``K (Delta |alpha|)``, a product over the support only."""
    p = problem
    if p.nonnegative:
        return p.decision(np.abs(alpha))
    return p.abs_K @ np.abs(p.Delta * alpha)


def _primal_rounding(problem: RKHSProblem, alpha, f, value: float) -> float:
    r"""A bound on the rounding of the computed envelope objective ``value`` at ``alpha`` (``f = K (Delta alpha)``).

    Notes
    -----
    ``value`` is ``Delta . psi(alpha) + (C/N) sum_n xi_n``: a dot product over the atoms and a sum of
    the hinges ``xi_n = pos(1 - eps - y_n f_n)``. An exactly zero term (``psi(0) = 0``, a margin that
    holds) adds no rounding in any summation order (``x + 0 = x``, ``fma(a, 0, x) = x``), so along any
    term's path through the summation tree at most ``k - 1`` additions round, ``k`` the number of
    nonzero terms: the sums are within ``gamma_{k-1}`` of the sum of their terms' magnitudes, bounded
    by ``|value| + sum_j Delta_j (alpha_j^2/2 + s |alpha_j|)``; each term's own evaluation (``s``,
    ``psi``, the product with ``Delta_j``, ``C/N``) and the final addition add a few ``u``. Charged
    as ``4 (k + 8) u`` times that magnitude (``u`` the machine epsilon, twice the unit roundoff).
    The hinges' inheritance of the rounding of ``f`` is :func:`_hinge_rounding`'s. Counting nonzero
    terms instead of ``N + M``: on the benchmark instance (115 of 3072 atoms, 84 of 900 hinges)
    an allowance ~19x smaller.
    """
    p = problem
    k = np.count_nonzero(alpha)
    if p.C is not None:
        k += np.count_nonzero(p.margin_violation(alpha, f))
    magnitude = abs(value) + float(p.Delta @ (0.5 * np.square(alpha) + p.s * np.abs(alpha)))
    rounding = 4.0 * (k + 8) * np.finfo(float).eps * magnitude
    if p.C is not None:
        rounding += _hinge_rounding(p, alpha, f)
    return rounding


def envelope_bound(problem: RKHSProblem, alpha) -> tuple[float, float]:
    """``(bound, allowance)``: the computed envelope objective at ``alpha`` plus a bound on its own rounding
    (:func:`_primal_rounding`), so that ``bound >= P_env(alpha)`` exactly, as every certified primal value is.

    For a point known to be margin-feasible (e.g. :func:`hard_margin_feasible_point`'s) that does not go
    through :func:`certify`; ``bound`` is ``inf`` when a hard margin is violated in floating point.
    """
    f = problem.decision(alpha)
    value = problem.envelope_objective(alpha, f)
    if not np.isfinite(value):
        return float("inf"), 0.0
    rounding = _primal_rounding(problem, alpha, f, value)
    return value + rounding, rounding


def _rescaling_may_pay(problem: RKHSProblem, alpha, f, best_bound: float) -> bool:
    r"""Whether scaling a soft-margin point up until every margin holds (:func:`_rigorously_feasible`) may
    give a lower certified value than ``best_bound`` (the best so far, this point's own included): every
    margin positive, and ``t^2 sum_j Delta_j psi(alpha_j)`` (a bound on the cost of ``t alpha``, which pays
    no hinge; ``t = max_n (1 - eps) / (y_n f_n)``) below it. With a large ``C`` (a soft margin standing in
    for a hard one) a point at the margins pays ``C/N`` times the rounding of ``f`` at every margin at the
    kink; the scaled point none.
    """
    p = problem
    margins = p.y * f
    if not (margins > 0).all():
        return False
    t = max(float(np.max((1.0 - p.eps) / margins)), 1.0)
    return t * t * p.envelope_cost(alpha) < best_bound


def _rigorously_feasible(problem: RKHSProblem, alpha):
    """``alpha`` scaled up (``t >= 1``) so that ``y_n f(x_n) >= 1 - eps`` holds even after the
    rounding of ``f = K (Delta alpha)`` (bounded by ``4 (M + 2) eps |K| |Delta alpha|``); None
    when a margin is not positive beyond that rounding.

    The scale leaves room for one allowance, then, where the fresh rounding of ``f`` at the scaled
    point took back more than the ``1e-12`` margin, for three (computed ``f >= t (exact f - err) -
    t err``): a hard margin met by an LP to its tolerance needs that when the coefficients are large
    (``|K| |Delta alpha| ~ 3e7`` on noisy moons)."""
    p = problem
    target = 1.0 - p.eps
    if target <= 0:
        return alpha

    def margins_and_rounding(point):  # y f(x) at the point and the bound on its rounding
        rounding = 4.0 * (p.M + 2) * np.finfo(float).eps * _abs_decision(p, point)
        return p.y * p.decision(point), rounding

    margins, err = margins_and_rounding(alpha)
    if (margins - err >= target).all():
        return alpha
    for allowances in (1.0, 3.0):
        low = margins - allowances * err
        if (low <= 0).any():
            return None
        scaled = float(np.max(target / low)) * (1.0 + 1e-12) * np.asarray(alpha, dtype=float)
        again, again_err = margins_and_rounding(scaled)
        if (again - again_err >= target).all():
            return scaled
    return None


def certify(problem: RKHSProblem, lam, z=None, *, feasible_alpha=None,
            gap_hint: float | None = None) -> RKHSCertificate:
    r"""Certificate of optimality for multipliers ``lam`` and an optional primal candidate.

    Parameters
    ----------
    problem : RKHSProblem
    lam : array_like (N,)
        Multipliers (projected onto ``[0, C]`` before use).
    z : array_like (M,), optional
        Candidate envelope-primal point in the scaled form ``z = Delta * alpha`` (what the
        primal-dual solvers carry).
    feasible_alpha : array_like (M,), optional
        A margin-feasible point (hard margin), used to repair candidates by convex combination.
    gap_hint : float, optional
        A duality gap already certified for this problem by other bounds (a solver's best so far).
        The extended-precision re-evaluation of the dual (:func:`_extended_dual`) runs when the
        float64 allowance weighs in the smaller of this and the certificate's own gap: a solver's
        later, worse iterate still gets the resolution its best bounds need.

    Returns
    -------
    RKHSCertificate

    Notes
    -----
    Weak duality: for any ``lambda in [0, C]^N`` and any envelope-feasible ``alpha``,
    ``D(lambda) <= D* = P_env* <= P_env(alpha)``, so ``gap = P_env(alpha) - D(lambda)`` is at
    least ``D* - D(lambda)`` and at least ``P_env(alpha) - P_env*``. The candidates tried are
    ``z / Delta`` and the L0 recovery (which also minimizes the envelope Lagrangian); for a hard
    margin each is made feasible by the smallest rescaling ``t >= 1`` (when every
    ``y_n f(x_n) > 0``) or by the convex combination with ``feasible_alpha`` closest to it; for a
    soft margin each is also tried scaled up until every margin holds despite rounding, where that
    may pay (:func:`_rescaling_may_pay`: a large ``C`` standing in for a hard margin). The lowest
    bound (value plus its rounding allowance) is reported. On the dual side ``(1 - t) lambda`` is
    also evaluated where atoms sit a rounding above the kink of ``phi*`` and pulling them below it
    may pay (:func:`_pullback`); the higher bound is reported with the multipliers it belongs to.
    """
    p = problem
    if gap_hint is not None:
        gap_hint = check_nonnegative_scalar(gap_hint, "gap_hint")
    lam = np.clip(as_float_array(lam, "lam", finite=False), 0.0, p.upper)  # (not finite: said below)
    if lam.shape != (p.N,) or not np.isfinite(lam).all():
        nan_alpha = np.zeros(p.M)
        return RKHSCertificate(np.zeros(p.N), float("-inf"), nan_alpha, float("nan"), float("nan"), float("nan"), None,
                           float("inf"), float("inf"), float("inf"), message="multipliers are not finite")
    abar, abar_bound = p.abar_with_bound(lam)
    alpha = p.recover_alpha(abar=abar)
    f_alpha = p.decision(alpha)
    viol = p.margin_violation(alpha, f_alpha)
    # (a hard margin the recovery violates, by any amount, has no L0 objective there: inf, as l0_objective)
    l0_primal = (p.l0_cost(alpha) + p.slack_cost(viol) if p.C is not None or not (viol > 0).any()
                 else float("inf"))
    margin_violation = float(viol.max()) if viol.size else 0.0

    candidates = [(alpha, f_alpha)]
    if z is not None:
        z = np.asarray(z, dtype=float)
        if z.shape == (p.M,) and np.isfinite(z).all():
            a = z / p.Delta
            candidates.insert(0, (a, p.decision(a)))
    feasible_f = None
    if feasible_alpha is not None:
        feasible_alpha = np.asarray(feasible_alpha, dtype=float)
        feasible_f = p.decision(feasible_alpha)
        candidates.append((feasible_alpha, feasible_f))

    best, best_value, repair = None, float("inf"), "none"
    best_bound, primal_rounding = float("inf"), 0.0
    for a, f in candidates:
        v = p.margin_violation(a, f)
        if p.C is not None:  # (the scaled option is tried only if it may pay, once "none" is scored)
            options = [(a, "none"), (a, "scaled")]
        elif not (v > 0).any():
            options = [(a, "none")]
        else:
            options = []
            scaled = p.make_feasible(a, f)
            if scaled is not None:
                options.append((scaled, "scaled"))
            if feasible_alpha is not None:
                combined = _combine(p, a, f, feasible_alpha, feasible_f)
                if combined is not None:
                    options.append((combined, "combined"))
        for point, how in options:
            if how == "scaled" and p.C is not None and not _rescaling_may_pay(p, a, f, best_bound):
                continue
            if p.C is None or how == "scaled":
                point = _rigorously_feasible(p, point)  # margins that hold despite rounding of f
                if point is None:
                    continue
            f_point = f if point is a else p.decision(point)
            value = p.envelope_objective(point, f_point)
            if not value < best_bound:  # (an allowance only adds)
                continue
            # reported bounds carry a first-order bound on their own rounding, so primal >= P(alpha) >= P*
            # holds to the last bit (see _primal_rounding); the best bound wins
            rounding = _primal_rounding(p, point, f_point, value)
            if value + rounding < best_bound:
                best, best_value, repair = point, value, how
                best_bound, primal_rounding = value + rounding, rounding

    message = ""
    if best is None:
        message = ("no feasible primal point: the hard margins are violated "
                   f"(max violation {float(p.margin_violation(candidates[0][0], candidates[0][1]).max()):.3g}) "
                   "and no positive rescaling repairs them; the gap is not certified")
        primal = gap = rel = float("inf")
    else:
        primal = best_value + primal_rounding
    hint = float("inf") if gap_hint is None else gap_hint
    dual, dual_rounding = _dual_bound(p, lam, abar, abar_bound, primal, hint)
    l0_gap = l0_primal - dual
    pullback = _pullback(p, lam, abar, abar_bound, dual_rounding)
    if pullback is not None:  # atoms a rounding above the kink: the same multipliers scaled down may pay
        pulled = lam * (1.0 - pullback)
        abar_pulled, bound_pulled = p.abar_with_bound(pulled)
        trial = _dual_bound(p, pulled, abar_pulled, bound_pulled, primal, min(primal - dual, hint))
        if trial[0] > dual:
            lam, (dual, dual_rounding) = pulled, trial
        else:
            pullback = None
    if best is not None:
        gap = primal - dual
        rel = relative_gap(primal, dual)
    else:
        primal_rounding = 0.0
    return RKHSCertificate(multipliers=lam, dual=dual, alpha=alpha, l0_primal=l0_primal, l0_gap=l0_gap,
                           margin_violation=margin_violation, alpha_envelope=best, primal=primal, gap=gap,
                           rel_gap=rel, repair=repair, message=message, rounding=dual_rounding + primal_rounding,
                           dual_rounding=dual_rounding, primal_rounding=primal_rounding, pullback=pullback or 0.0)


def hard_margin_feasible_point(problem: RKHSProblem, *, time_limit: float | None = None):
    r"""Decide whether the hard margins ``y_n f(x_n) >= 1 - eps`` can all hold (an LP, HiGHS).

    Solves ``min ||Delta * alpha||_1  s.t.  y_n (K (Delta * alpha))_n >= 1 - eps`` with
    :func:`scipy.optimize.linprog`.

    Returns
    -------
    feasible : bool or None
        ``False``: the margin constraints are infeasible to HiGHS's feasibility tolerance, so the dual
        is unbounded to it (Farkas: some ``lambda >= 0`` with ``K^T (y * lambda) = 0`` and ``sum(lambda) >
        0``). Not a proof in exact arithmetic: two samples 1e-5 apart with opposite labels under a
        width-1 kernel are separable with coefficients ~2e10, which the LP cannot tell from infeasible
        (the message says so).
        ``None``: the LP did not finish.
    alpha : ndarray (M,) or None
        A feasible point when ``feasible`` is True.
    message : str
    """
    import scipy.sparse as sp
    from scipy.optimize import linprog

    p = problem
    if p.eps >= 1.0:
        return True, np.zeros(p.M), "eps >= 1: alpha = 0 is feasible"
    A = sp.csr_matrix(sp.diags(p.y) @ p.K)  # rows: y_n K_n., columns: z_j = Delta_j alpha_j
    A_ub = sp.hstack([-A, A], format="csr")  # z = zp - zn
    b_ub = -np.full(p.N, 1.0 - p.eps)
    options = {"presolve": True}
    if time_limit is not None:
        options["time_limit"] = float(time_limit)
    res = linprog(np.ones(2 * p.M), A_ub=A_ub, b_ub=b_ub, bounds=(0, None), method="highs", options=options)
    if res.status == 2:  # (HiGHS decides at its feasibility tolerance, 1e-7 by default: said so)
        return False, None, ("the hard-margin constraints y_n f(x_n) >= 1 - eps are infeasible for this dictionary "
                             "to HiGHS's feasibility tolerance: overlapping classes, or samples with opposite labels "
                             "so close that the margins could hold only with coefficients too large for the LP to "
                             "tell apart from infeasible; the dual is unbounded to that tolerance; use a soft margin C")
    if res.status != 0 or res.x is None:
        return None, None, f"feasibility LP did not finish: {res.message}"
    zz = res.x[: p.M] - res.x[p.M:]
    alpha = zz / p.Delta
    scaled = _rigorously_feasible(p, alpha)  # HiGHS meets the margins to its tolerance, not to the last bit
    if scaled is None:
        return None, None, "feasibility LP returned a point that violates the margins in floating point"
    return True, scaled, ""


#: The scales ``t`` at which :func:`farkas_dual_bound` certifies ``t * ray`` (the dual along a Farkas ray
#: grows linearly until the ray's residual ``K^T (y * t ray)`` leaves the identity zone of the penalty).
FARKAS_SCALES = np.geomspace(1.0, 1e30, 61)


def farkas_ray(problem: RKHSProblem, *, time_limit: float | None = None):
    r"""A Farkas ray of the hard-margin constraints: ``lambda >= 0``, ``sum(lambda) = 1``, minimizing
    ``||K^T (y * lambda)||_inf`` (an LP, HiGHS), or None where the LP does not finish.

    Notes
    -----
    The margins ``y_n (K z)_n >= 1 - eps`` are infeasible exactly when some ``lambda >= 0`` has
    ``K^T (y * lambda) = 0`` and ``sum(lambda) > 0``; along such a ray the dual grows without bound. In
    floating point the residual is not 0, so the ray proves nothing by itself; :func:`farkas_dual_bound`
    turns it into a certified (finite) dual value.
    """
    import scipy.sparse as sp
    from scipy.optimize import linprog

    p = problem
    At = sp.csr_matrix(p.K.T @ sp.diags(p.y)) if sp.issparse(p.K) else sp.csr_matrix(p.K.T * p.y)  # (M, N)
    ones = np.ones((p.M, 1))
    # variables (lambda, t): min t  s.t.  -t <= (At lambda)_j <= t,  sum(lambda) = 1,  lambda, t >= 0
    A_ub = sp.vstack([sp.hstack([At, -ones]), sp.hstack([-At, -ones])], format="csr")
    A_eq = sp.csr_matrix(np.concatenate([np.ones(p.N), [0.0]])[None, :])
    c = np.zeros(p.N + 1)
    c[-1] = 1.0
    options = {"presolve": True}
    if time_limit is not None:
        options["time_limit"] = float(time_limit)
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(2 * p.M), A_eq=A_eq, b_eq=[1.0], bounds=(0, None), method="highs",
                  options=options)
    if res.status != 0 or res.x is None:
        return None
    return np.maximum(res.x[:p.N], 0.0)


def farkas_dual_bound(problem: RKHSProblem, ray) -> tuple[float, float]:
    """The largest certified dual value (:func:`certify`) of ``t * ray`` over :data:`FARKAS_SCALES`, and its ``t``.

    Every value is a certified lower bound on the hard-margin primal optimum, so a huge one says that any
    classifier meeting every margin with this dictionary costs at least that much (``+inf`` if none exists).
    Projected onto ``[0, C]`` first, as any multipliers."""
    best, best_t = -np.inf, float("nan")
    for t in FARKAS_SCALES:
        with np.errstate(over="ignore", invalid="ignore"):
            dual = certify(problem, t * np.asarray(ray, dtype=float)).dual
        if dual > best:
            best, best_t = float(dual), float(t)
        elif np.isfinite(best) and dual < 0.5 * best:
            break  # past the ray's reach: the penalty's quadratic part has taken over
    return best, best_t
