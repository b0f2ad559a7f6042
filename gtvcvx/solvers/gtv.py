"""The fast core: a restarted, preconditioned primal-dual (PDHG) solver for GTV minimization.

Everything is batched over the ``n x d`` local models and the ``|E| x d`` flows; no Python loop
runs over nodes or edges. The dual half-step (Halpern move of the flows, extrapolated step,
projection, divergence, residual) is two compiled sweeps over the edges (the fused move-step-project
and the scatter-add; :mod:`gtvcvx.solvers._edge_kernels`, numba) on problems with at least
``gtvcvx._jit.MIN_ENTRIES`` flow entries, and the same operations in NumPy/SciPy below.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import time

import numpy as np
import pandas as pd

from .._restart import restart_due, updated_primal_weight
from .._threads import blas_threads as _blas_threads
from .._validation import MAX_DATA_MAGNITUDE, check_gap_tolerance, check_positive_int, check_time_limit
from ..problem import GTVProblem
from ..results import GTVResult, Status, out_of_reach_message, tol_out_of_reach
from ._edge_kernels import MOVE_HALPERN, MOVE_NONE, MOVE_RESTART, EdgeSweep, divergence
from ._node_kernels import NodeSweeps, squared_distance
from ._pdhg_common import CHECK_SPACING as _CHECK_SPACING
from ._pdhg_common import (NONFINITE_CHECKS, PREDICT_FIRST_CHECK, PREDICT_FROM_ENTRIES, PREDICT_SECOND_SPACING,
                           PREDICT_TRIGGER_EXPONENT, RESIDUAL_TRIGGER_EXPONENT, predicted_spacing, residual_trigger)
from ._pdhg_common import IterationInfo, initial_primal_weight, uniqueness_note, warm_start_parts
from ._pdhg_common import step_norm_estimate as _step_norm_estimate
from ._reorder import edge_block_order, locality_order
from ._scaling import solve_scaled
from .certificate import Certificate, FlowProjector, certified_statuses, certify_iterate, certify_pair, stationarity
from .chain import chain_plan, solve_chain
from .tree import solve_tree, tree_plan
from .distributed import solve_distributed
from .interior import auto_plan, solve_interior
from .polish import fused_partitions, polish_applies, polish_clusters, reduced_unknowns
from .quadratic import quadratic_refusal, solve_quadratic
from .separability import find_separation

__all__ = ["solve", "IterationInfo", "METHODS"]

#: Algorithms of :func:`solve` (``"auto"``: ``"chain"``, ``"tree"`` or ``"quadratic"`` where they
#: apply, then ``"interior"`` on small problems, else ``"halpern"``).
METHODS = ("auto", "halpern", "pdhg", "chain", "tree", "quadratic", "interior")


#: From this many flow entries (``|E| d``; 512 MiB a flow array in double precision) a solve keeps
#: its Halpern anchor of the flows in single precision and does not copy the best certificate's
#: flow out of the iterate (see :func:`_iterate`): at 10^7 edges, d = 10, 1.1 of the 5.0 GiB the
#: solve added to the instance.
LARGE_FLOW_ENTRIES = 1 << 26
#: Capacities up to which a single-precision anchor holds the flows (float32 overflows at 3.4e38).
_SINGLE_ANCHOR_MAX_CAPACITY = 1e30

#: Try the active-set polish (:mod:`gtvcvx.solvers.polish`) at check-points whose certified
#: relative gap is below this (and above ``tol``).
_POLISH_BELOW = 1e-2
#: Fused-edge thresholds of the polish (``||(DW)_e|| <= threshold * max |W|``), loosest first: a
#: first-order iterate's fused differences shrink only as fast as the iterate converges (on the
#: bank's karate club / diabetes at lam = 5, the structure was right at 1e-3 from iteration 112,
#: at 1e-6 only from 1,616), so the structure is read at each threshold and polished where it
#: held at two check-points in a row (for the l1 penalty, per coordinate). A polish costs a few
#: certificates on small graphs (the reduced solve, a flow routed through the graph, the
#: certificate): the loose thresholds' partitions are polished at most :data:`_POLISH_LOOSE_TRIES`
#: times in a solve, the strictest one's whenever it changes (the structure a converging iterate
#: shows).
_POLISH_THRESHOLDS = (1e-3, 1e-6)
_POLISH_LOOSE_TRIES = 3
#: Flow entries (|E| d) up to which the polish runs, by the penalty's dual ball: its certificate
#: builds flows from the lifted point (a minimum-norm flow, an accelerated projected gradient, the
#: projection), about six more |E| x d arrays, which at 10^7 edges (d = 10) would alone exceed
#: the 8 GiB the solve fits in. The l1 structure is read one coordinate at a time (d gathers of
#: |E| values and, where few enough are cut, d components per threshold, at every check-point
#: below :data:`_POLISH_BELOW`): the SBM bench instances with an l1 penalty (d = 10, tol 1e-4,
#: no polish applying) took 2.5-2.7 s instead of 1.8-2.5 s at 10^5 edges and 10.4-10.5 s instead
#: of 8.0-8.5 s at 10^6, so it is read up to 2^18 flow entries (the bank's graphs have 10^3-10^4).
_POLISH_MAX_FLOW_ENTRIES = {"l2": 1 << 24, "linf": 1 << 18}


def _warm_start_arrays(problem: GTVProblem, warm_start):
    """``(W, U, flow_given)``: the start point (zeros where the warm start has no part)."""
    W, U = warm_start_parts(problem, warm_start)
    flow_given = U is not None
    W = np.zeros((problem.n, problem.d)) if W is None else W
    U = np.zeros((problem.n_edges, problem.d)) if U is None else U
    return np.ascontiguousarray(W, dtype=float), np.ascontiguousarray(U, dtype=float), flow_given


def _check_options(tol, max_iter, time_limit, method, eta, reflection, check_every, restart_check):
    check_gap_tolerance(tol, "tol")
    check_positive_int(max_iter, "max_iter")
    check_time_limit(time_limit)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if not (_is_real(eta) and 0 < eta <= 1):
        raise ValueError(f"eta must be in (0, 1], got {eta!r}")
    if not (_is_real(reflection) and 0 <= reflection <= 1):
        raise ValueError(f"reflection must be in [0, 1], got {reflection!r}")
    check_positive_int(check_every, "check_every", allow_none=True)
    check_positive_int(restart_check, "restart_check")


def _is_real(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


@certified_statuses
def solve(problem: GTVProblem, tol: float = 1e-6, max_iter: int = 100_000, time_limit: float | None = None,
          warm_start=None, callback=None, *, method: str = "auto", eta: float = 0.99,
          reflection: float = 1.0, primal_weight: float | None = None, adaptive_weight: bool = True,
          check_every: int | None = None, restart_check: int = 4, blas_threads: int | None = 1,
          backend: str = "local", client=None, n_parts: int | None = None, check_separability: bool = True,
          **dask_options) -> GTVResult:
    r"""Solve GTV minimization and its network-flow dual with a certified duality gap.

    Parameters
    ----------
    problem : GTVProblem
    tol : float
        Stop when the certified relative gap ``(P - D) / (1 + |P| + |D|) <= tol``. A ``tol`` below
        the certificate's resolution (its rounding allowance, :attr:`Certificate.resolution`) ends
        as ``inaccurate`` with the reason once the gap is within 2x of it, or within 100x and has
        not fallen by 10 % over 5 check-points (:func:`gtvcvx.results.tol_out_of_reach`), unless a
        ``callback`` is given: then the run goes on until it or ``max_iter`` stops it (e.g. a fixed
        number of iterations asked for with ``tol = 1e-300``). Where the objective at ``W = 0`` is
        below 1 and the loss scales (squared error, Huber, squared distance; norm penalties;
        ``backend="local"``), the problem is solved with its labels times a power of two ``c`` that
        brings ``P(0)`` into ``[1, 4)`` (exact; ``info["label_scale"] = c``), so that ``tol`` is
        relative to the objective rather than absolute; everything returned and every callback is
        in the caller's units (the history adds ``solved_rel_gap``, the gap the run stopped on; see
        :mod:`gtvcvx.solvers._scaling`).
    max_iter : int
        Iteration limit (status ``max_iter``).
    time_limit : float, optional
        Seconds (status ``time_limit``); checked every iteration.
    warm_start : GTVResult or dict, optional
        Start from a previous solution (``W`` and/or flows ``U``), e.g. along a path over lam. The
        first-order methods certify the start before their first step (``history`` row 0) and return
        it when no iterate certifies better (the message says so); one already within ``tol``
        returns after 0 iterations.
    callback : callable, optional
        Called with an :class:`IterationInfo` at every certificate check-point; returning
        ``True`` stops the run (status ``max_iter``, message "stopped by callback"). A callback
        with a ``wants(certificate)`` method is called only where that returns True (on large
        graphs handing over the arrays costs a copy of the flows).
    method : {"auto", "halpern", "pdhg", "chain", "tree", "quadratic", "interior"}
        ``"auto"`` (default): ``"chain"``, ``"tree"`` or ``"quadratic"`` when the problem has their
        structure, else ``"interior"`` on small problems whose factorization stays cheap
        (:func:`gtvcvx.solvers.interior.auto_plan`; an answer it cannot certify to ``tol``
        warm-starts ``"halpern"``, ``info["method"] = "interior+halpern"``); where some node
        leaves ``w_i`` undetermined and the factorization is dearer, a race: ``"halpern"`` for
        half the predicted interior-point time, then ``"interior"`` if it has not certified
        (``info["method"] = "halpern+interior"``, ``info["race"]``); else ``"halpern"``.
        ``"halpern"``: reflected Halpern PDHG with adaptive restarts on the
        fixed-point residual and an adaptive primal weight. ``"pdhg"``: the GTV paper's
        Algorithm 1, plain PDHG with the fixed diagonal steps ``tau_i = 1/deg_i``,
        ``sigma_e = 1/2`` (no restarts, ``eta`` = 1). ``"chain"``: the exact O(n) solver for
        graphs whose components are paths, with squared-distance losses and an l1 penalty (any
        norm penalty when ``d = 1``), :func:`gtvcvx.solvers.chain.solve_chain`; it ignores the
        iteration options and ``warm_start`` and calls ``callback`` once. ``"tree"``: the same
        for forests (a node of degree > 2), exact in O(n log n) per coordinate,
        :func:`gtvcvx.solvers.tree.solve_tree`. ``"quadratic"``: a
        quadratic loss with a quadratic penalty (e.g. SquaredError with SquaredNorm2) is one
        linear system, solved by block-preconditioned conjugate gradients
        (:func:`gtvcvx.solvers.quadratic.solve_quadratic`; ``max_iter`` bounds the CG
        iterations). ``"interior"``: one interior-point solve of the problem's conic form by
        Clarabel (no CVXPY compilation), certified by gtvcvx
        (:func:`gtvcvx.solvers.interior.solve_interior`; ignores ``warm_start``, calls
        ``callback`` once); from 2,000 edges, quadratic losses with l2 / l1 penalties go first
        to gtvcvx's own interior-point method on the node system
        (:func:`gtvcvx.solvers.schur_ipm.solve_schur`, PARDISO; ``info["interior_backend"]``). The result's ``info["method"]`` names the method that ran.
    eta : float
        Step-size safety factor (< 1 keeps the PDHG metric positive definite).
    reflection : float
        Reflection ``rho`` of the Halpern step, ``(1 + rho) T(z) - rho z``.
    primal_weight : float, optional
        Initial primal weight ``omega`` (default 1 in the preconditioned scaling).
    adaptive_weight : bool
        Update ``omega`` at restarts from the distances moved.
    check_every : int, optional
        Iterations between certificates (default: geometric spacing, every 1/8 of the
        iterations so far and at least 10, or 1/4 and at least 20 when certificates need the
        conservation projection; plus a certificate whenever the fixed-point residual has
        fallen by about what the gap still has to; from ``|E| d >= 2^22`` flow entries, where a
        certificate costs several iterations, the first comes at iteration 20 and the next where
        the last two certified gaps predict ``tol``:
        :func:`~gtvcvx.solvers._pdhg_common.predicted_spacing`). The
        schedule depends on iteration counts and certified gaps only, so repeated runs give
        identical results.
    restart_check : int
        Iterations between evaluations of the restart criteria.
    blas_threads : int or None
        Threads BLAS may use during the solve (default 1: the iteration's level-1 BLAS calls
        are too small to pay for thread synchronization); None keeps the process setting.
        The compiled sweeps of large problems (``gtvcvx._jit.MIN_ENTRIES`` flow entries on) use
        numba's thread count instead (``NUMBA_NUM_THREADS`` or :func:`numba.set_num_threads`;
        default every core), in the main thread only (:func:`gtvcvx._jit.parallel_threads`).
    backend : {"local", "dask"}
        ``"dask"``: the same iteration and certificate on a Dask cluster, the graph split into
        METIS parts whose data stay on their workers
        (:func:`gtvcvx.solvers.distributed.solve_distributed`; ``problem`` may then also be a
        :class:`~gtvcvx.solvers.distributed.SiteProblem` whose parts read their own files).
    client : dask.distributed.Client, optional
        The cluster of ``backend="dask"`` (default: a LocalCluster for the call).
    n_parts : int, optional
        Number of parts of ``backend="dask"`` (default: one per worker).
    check_separability : bool
        For a loss that declares ``"no_minimizer_if_separable"`` (logistic), first decide by one
        linear program whether some connected component's pooled samples are strictly linearly
        separable (:func:`gtvcvx.solvers.separability.find_separation`, up to
        ``separability.MAX_ENTRIES`` design entries, local backend). If so the objective has no
        minimizer and the result returns at once with status ``no_minimizer``, ``W = None``, the
        reason in ``message`` and the direction of descent in ``info["recession_direction"]``.
    **dask_options
        Further options of ``backend="dask"``: ``partition``, ``checkpoint_dir``,
        ``checkpoint_every``, ``verbose``, ``seed``.

    Returns
    -------
    GTVResult
        ``W``, a feasible flow ``U``, ``primal``, ``dual``, ``gap``, ``rel_gap``, ``status``,
        ``iterations``, ``setup_time``, ``solve_time``, ``residuals`` and ``history``. Status
        ``solver_error`` (with the reason in ``message``) where the iterates became non-finite or
        ``P(W)`` overflowed float64 at :data:`~gtvcvx.solvers._pdhg_common.NONFINITE_CHECKS`
        check-points in a row (data of magnitude near 1e154 and above: rescale it), or the certificate
        did at as many check-points with data beyond :data:`~gtvcvx._validation.MAX_DATA_MAGNITUDE`
        (their squares overflow even where ``P(W)`` does not). A run that
        stops short of ``tol`` returns its best certificate; from
        :data:`LARGE_FLOW_ENTRIES` flow entries, where that certificate's flow is not kept, the
        last iterate's (or, if worse, the better of it and the best ``W``'s with the last flow),
        certified again after the loop (``info["recertified"]``; past a time limit by one or two
        certificates). ``history`` has a row per check-point with the iterate's certificate;
        where the active-set polish (:mod:`gtvcvx.solvers.polish`: quadratic losses, l2 or l1
        penalty) improved on the best certificate, the row's ``polished_rel_gap`` (with
        ``polished_primal`` and ``polished_dual``) is the polished point's certified gap
        (``info["polished_at"]``, the last such iteration; a result certified by a polish is the
        polished point).

    Notes
    -----
    Chambolle-Pock on ``min_W F(W) + G(D W)`` with ``F = sum_i L_i`` and
    ``G = sum_e lam A_e phi``, diagonally preconditioned (Pock & Chambolle, 2011):
    ``tau_i = eta / (omega deg_i)``, ``sigma_e = eta omega / 2``, so that
    ``||Sigma^{1/2} D T^{1/2}|| <= eta``. One PDHG step ``T(z)`` is

    .. math::

        W^+ = \operatorname{prox}_{T F}(W - T D^\top U), \qquad
        U^+ = \operatorname{prox}_{\Sigma G^*}(U + \Sigma D (2 W^+ - W)).

    The default method iterates the reflected Halpern scheme
    ``z^{k+1} = (k+1)/(k+2) ((1+rho) T(z^k) - rho z^k) + z^0 / (k+2)`` and restarts
    (``z^0 <- T(z^k)``) when the fixed-point residual ``r(z) = ||z - T(z)||_P`` in the PDHG
    metric has decayed by 0.2, or by 0.8 without local progress, or after 36 % of the
    iterations so far (the cuPDLPx rules); at each restart the primal weight moves
    half-way (in log scale) to the ratio of the dual and primal distances travelled.

    Every check-point certifies the PDHG output ``(W^+, U^+)``: the flow is made dual
    feasible (a capacity-weighted projection onto the conjugates' linear constraints by conjugate
    gradients in node space, alternated with the capacity balls where it can bring the gap below
    ``tol``, then a common scaling into the balls; :class:`~gtvcvx.solvers.certificate.FlowProjector`)
    and the gap is the sum of the node and edge Fenchel-Young terms, an upper bound on ``P(W^+) - P^*``.

    On large graphs whose node rows outgrow the caches (``|E| d >= 2^22`` flow entries, ``n d``
    beyond 16 MB) with labels far apart along the edges, the core iterates on a copy relabelled
    by reverse Cuthill-McKee (:func:`~gtvcvx.solvers._reorder.locality_order`; ``W``, ``U``, the
    per-node and per-edge gaps and everything a callback sees are in the caller's labels,
    ``info["node_order"]`` says so): 10^6 points in 7-D, 10-NN, 0.93 -> 0.57 s per iteration.
    Where relabelling gains nothing (random graphs) the edges are sorted into blocks of their
    second end point instead (:func:`~gtvcvx.solvers._reorder.edge_block_order`,
    ``info["node_order"] = "edge_blocks"``): gather and scatter 2-4x faster at 10^7 random edges.

    References
    ----------
    .. [1] Y. SarcheshmehPour, Y. Tian, L. Zhang, A. Jung, "Clustered federated learning via
       generalized total variation minimization", IEEE Trans. Signal Processing 71, 2023.
    .. [2] T. Pock, A. Chambolle, "Diagonal preconditioning for first order primal-dual
       algorithms in convex optimization", ICCV 2011.
    .. [3] D. Applegate et al., "Practical large-scale linear programming using primal-dual
       hybrid gradient" (PDLP), NeurIPS 2021.
    .. [4] H. Lu, Z. Peng, J. Yang, "cuPDLPx: A further enhanced GPU-based first-order solver
       for linear programming", 2025 (reflected restarted Halpern PDHG).
    """
    if backend == "dask":
        if method not in ("auto", "halpern", "pdhg"):
            raise ValueError(f"backend='dask' runs method 'halpern' or 'pdhg' (or 'auto'), got {method!r}")
        return solve_distributed(problem, tol, max_iter, time_limit, warm_start, callback, client=client,
                                 n_parts=n_parts, method="halpern" if method == "auto" else method, eta=eta,
                                 reflection=reflection, primal_weight=primal_weight, adaptive_weight=adaptive_weight,
                                 check_every=check_every, restart_check=restart_check, blas_threads=blas_threads,
                                 **dask_options)
    if backend != "local":
        raise ValueError(f"backend must be 'local' or 'dask', got {backend!r}")
    if client is not None or n_parts is not None or dask_options:
        named = sorted(dask_options) + [k for k, v in (("client", client), ("n_parts", n_parts)) if v is not None]
        raise TypeError(f"{', '.join(named)} only apply with backend='dask'")
    if not isinstance(problem, GTVProblem):
        raise TypeError(f"problem must be a gtvcvx.GTVProblem, got {type(problem).__name__}")
    _check_options(tol, max_iter, time_limit, method, eta, reflection, check_every, restart_check)
    if primal_weight is not None and not (_is_real(primal_weight) and primal_weight > 0):
        raise ValueError(f"primal_weight must be > 0, got {primal_weight!r}")
    max_iter = int(max_iter)

    def run_scaled(scaled, left, warm, scaled_callback):
        result = solve(scaled, tol, max_iter, left, warm, scaled_callback, method=method, eta=eta,
                       reflection=reflection, primal_weight=primal_weight, adaptive_weight=adaptive_weight,
                       check_every=check_every, restart_check=restart_check, blas_threads=blas_threads,
                       check_separability=check_separability)
        _caller_limits(result, max_iter, time_limit, max_iter, left)
        return result

    # an objective far below 1: solved where tol is relative (see _scaling)
    scaled_result = solve_scaled(problem, time_limit, warm_start, callback, run_scaled)
    if scaled_result is not None:
        return scaled_result
    if check_separability:
        t_check = time.perf_counter()
        separation = find_separation(problem)
        if separation is not None:
            return GTVResult(status=Status.NO_MINIMIZER, solver="fast", iterations=0,
                             setup_time=time.perf_counter() - t_check, message=separation.message(problem.loss.name),
                             info={"method": "separability", "recession_direction": separation.direction,
                                   "separable_component": separation.component})
    if method in ("auto", "chain", "tree"):
        t_plan = time.perf_counter()
        plan = chain_plan(problem) if method == "auto" else None
        forest = tree_plan(problem) if method == "auto" and plan is None else None
        plan_time = time.perf_counter() - t_plan  # the graph walks (and numba's first load)
        if method in ("chain", "tree") or plan is not None or forest is not None:
            warm_start_parts(problem, warm_start)  # validated, not needed: the solve is direct
            if method == "chain" or plan is not None:
                result = solve_chain(problem, tol, plan=plan)
            else:
                result = solve_tree(problem, tol, plan=forest)
            result.setup_time += plan_time
            return _report_once(result, callback)
        method = "halpern" if quadratic_refusal(problem) else "quadratic"
        if method == "halpern" and warm_start is None:  # (a warm start is the core's to use: Clarabel starts cold)
            plan, race_seconds = auto_plan(problem)
            method = {"interior": "auto_interior", "race": "race"}.get(plan, method)
    prior = None  # the core's run of a race, if it did not finish the job
    iter_left, time_left = max_iter, None if time_limit is None else float(time_limit)
    if method == "race":
        # the core first, within a share of the predicted interior-point time (its fast cases
        # stay fast), then the interior-point solve
        limit = race_seconds if time_limit is None else min(race_seconds, float(time_limit))
        with _blas_threads(blas_threads):
            prior = _solve(problem, tol, max_iter, limit, None, callback, "halpern", eta, reflection, primal_weight,
                           adaptive_weight, check_every, restart_check)
        spent = prior.setup_time + prior.solve_time
        iter_left -= prior.iterations
        time_left = None if time_limit is None else float(time_limit) - spent
        prior.info["race"] = {"core_seconds": spent, "core_budget": limit}
        if (prior.status not in (Status.TIME_LIMIT, Status.SOLVER_ERROR) or iter_left < 1 or limit == time_limit
                or (time_left is not None and time_left <= 0)):
            return prior  # certified, or stopped by the caller's limits or callback
        method = "auto_interior"
    if method in ("interior", "auto_interior"):
        warm_start_parts(problem, warm_start)  # validated; the interior-point solve starts cold
        with _blas_threads(blas_threads):
            result = solve_interior(problem, tol, max_iter=iter_left, time_limit=time_left)
        _after_race(result, prior)
        spent = result.setup_time + result.solve_time
        left_iter = max_iter - result.iterations  # (a race's core iterations included)
        left_time = None if time_limit is None else float(time_limit) - spent
        if (method == "interior" or result.status == Status.OPTIMAL or left_iter < 1
                or (left_time is not None and left_time <= 0)):
            _caller_limits(result, max_iter, time_limit, iter_left, time_left)
            return _report_once(result, callback)
        # auto: an answer the certificate does not confirm to tol is a warm start for the core
        # (a failed call, no answer: the core starts cold); the limits are the caller's, less
        # what the interior-point solve (and a race's core run) used
        warm = result if result.W is not None else None
        with _blas_threads(blas_threads):
            final = _solve(problem, tol, left_iter, left_time, warm, callback, "halpern", eta, reflection,
                           primal_weight, adaptive_weight, check_every, restart_check)
        _caller_limits(final, max_iter, time_limit, left_iter, left_time)  # (the core keeps its start if no better)
        final.iterations += result.iterations
        final.setup_time += spent
        final.info["method"] = result.info["method"] + "+halpern"
        final.info["interior"] = {"status": str(result.status), "rel_gap": result.rel_gap,
                                  "seconds": spent, "message": result.message}
        if prior is not None:
            final.info["race"] = prior.info["race"]
        return final
    if method == "quadratic":
        W0, _ = warm_start_parts(problem, warm_start)  # CG starts from a warm-start W
        with _blas_threads(blas_threads):
            result = solve_quadratic(problem, tol, max_iter=max_iter, time_limit=time_limit, W0=W0)
        return _report_once(result, callback)
    if method == "pdhg":
        eta, reflection, adaptive_weight = 1.0, 0.0, False
    with _blas_threads(blas_threads):
        return _solve(problem, tol, max_iter, time_limit, warm_start, callback, method, eta, reflection,
                      primal_weight, adaptive_weight, check_every, restart_check)


def _after_race(result: GTVResult, prior: GTVResult | None) -> None:
    """Charge a race's core run (its iterations and time) to the interior-point result."""
    if prior is None:
        return
    result.iterations += prior.iterations
    result.setup_time += prior.setup_time + prior.solve_time
    result.info["method"] = "halpern+" + result.info.get("method", "interior")
    result.info["race"] = {**prior.info["race"], "core_status": str(prior.status), "core_rel_gap": prior.rel_gap}


def _caller_limits(result: GTVResult, max_iter: int, time_limit, left_iter: int, left_time) -> None:
    """Say the caller's limits in a message written with what was left of them."""
    if result.status == Status.TIME_LIMIT and left_time is not None and left_time != time_limit:
        result.message = result.message.replace(f"reached time_limit = {left_time:g} s",
                                                f"reached time_limit = {time_limit:g} s")
    elif result.status == Status.MAX_ITER and left_iter != max_iter:
        result.message = result.message.replace(f"reached max_iter = {left_iter}", f"reached max_iter = {max_iter}")


def _solve(problem, tol, max_iter, time_limit, warm_start, callback, *options) -> GTVResult:
    """The core on ``problem``, or on a copy relabelled for memory locality (large graphs,
    :func:`~gtvcvx.solvers._reorder.locality_order`, else with its edges in cache blocks,
    :func:`~gtvcvx.solvers._reorder.edge_block_order`) with everything mapped back."""
    t_start = time.perf_counter()
    relabel = locality_order(problem) or edge_block_order(problem)
    inner_problem, warm, inner_callback = problem, warm_start, callback
    if relabel is not None:
        inner_problem = relabel.problem
        warm = None if warm_start is None else relabel.warm_start_in(*warm_start_parts(problem, warm_start))
        if callback is not None:
            def inner_callback(info: IterationInfo):
                certificate = relabel.certificate_out(info.certificate)  # (new arrays: the loop's buffers stay its own)
                U = certificate.U if info.U is info.certificate.U else relabel.flows_out(info.U)
                return callback(dataclasses.replace(info, W=relabel.nodes_out(info.W), U=U, certificate=certificate))

            inner_callback.copies_arrays = True
            if hasattr(callback, "wants"):  # (primal and dual do not depend on the labels)
                inner_callback.wants = callback.wants
    # (the ordering, also one that did not pay, is setup: 4.5 s of RCM at 10^7 SBM edges)
    spent = time.perf_counter() - t_start
    left = None if time_limit is None else max(float(time_limit) - spent, 0.0)
    result = _iterate(inner_problem, tol, max_iter, left, warm, inner_callback, *options)
    if relabel is not None:
        result.W = relabel.nodes_out(result.W)
        result.U = relabel.flows_out(result.U)
        result.info["node_gaps"] = relabel.nodes_out(result.info["node_gaps"])
        result.info["edge_gaps"] = relabel.edges_out(result.info["edge_gaps"])
        result.info["node_order"] = relabel.kind
    result.setup_time += spent
    _caller_limits(result, max_iter, time_limit, max_iter, left)
    return result


def _iterate(problem, tol, max_iter, time_limit, warm_start, callback, method, eta, reflection, primal_weight,
             adaptive_weight, check_every, restart_check) -> GTVResult:
    """The PDHG / Halpern loop of :func:`solve` with its certificate check-points.

    On problems with at least :data:`LARGE_FLOW_ENTRIES` flow entries (and flows bounded by their
    capacity balls) two ``|E| x d`` arrays are saved:

    * the Halpern anchor ``U0`` is stored in single precision: the anchor of an epoch is then
      ``U+`` rounded to float32 at the restart, an anchor like any other (Halpern's iteration
      converges to a fixed point from any anchor). The anchor's divergence ``D^T U0`` is kept from
      ``U+`` in double precision, so the iterate's divergence differs from ``D^T U`` by ``b_k``
      times that rounding, which vanishes along the epoch (``b_k = 1/(k+1)``); certificates read
      ``U+`` and its own divergence, never the anchor;
    * the best certificate's flow, when it is the iterate's own (certified in place), is not
      copied before the next sweep overwrites it. A run that ends on such a certificate without
      reaching ``tol`` (time or iteration limit, callback) certifies again: the last iterate, and
      where that is worse than the lost certificate, also the best certificate's ``W`` with the last
      flow, the better of the two returned.
    """
    t_start = time.perf_counter()

    # ---- setup
    graph, loss, penalty = problem.graph, problem.loss, problem.penalty
    caps = np.ascontiguousarray(problem.capacities)
    # the dual half-step; D has +1 at edges[:, 0] and -1 at edges[:, 1]
    sweep = EdgeSweep(*graph.end_columns, penalty, caps, problem.n, problem.d)  # (no copies of the ends)
    nodes = NodeSweeps(problem.n, problem.d)  # the node-side updates around the loss's prox
    inv_deg = 1.0 / np.maximum(graph.degree, 1).astype(float)
    W, U, flow_given = _warm_start_arrays(problem, warm_start)
    # a warm-start flow outside the capacities (e.g. from a larger lam, down to lam = 0 where
    # every capacity is 0) would be amplified by the long steps of decoupled nodes (the zero
    # flow of a cold start is in every ball: 0.5 s of projecting zeros at 10^7 edges, d = 10)
    U = penalty.project_conjugate_domain(U, caps) if problem.n_edges and flow_given else U
    deadline = None if time_limit is None else t_start + float(time_limit)
    omega = initial_primal_weight(graph, W, U, primal_weight)
    # warm-started (work accumulates across check-points), its |E| x d arrays kept across them
    projector = FlowProjector(problem, max_iter=200, keep_buffers=True)

    best_flow = None  # the best certificate's flow where it was the iterate's own (certify_iterate)
    large = (problem.n_edges * problem.d >= LARGE_FLOW_ENTRIES and sweep.compiled and penalty.is_norm
             and bool(np.all(caps <= _SINGLE_ANCHOR_MAX_CAPACITY)))

    def kept(cert: Certificate) -> Certificate:
        """The new best certificate. A flow in the projector's pass buffers is taken out of them
        without a copy (the previous best's flow takes its buffer's place: 0.1-0.4 s a copy at
        6.7e6 x 7); the iterate's own flow is copied only if the loop goes on (`keep_best`)."""
        if cert.U is not Up:
            spare = None if best is None or best[2].U is best_flow else best[2].U
            projector.adopt(cert.U, spare)
        return cert

    def keep_best():
        """Copy the best certificate's flow out of the iterate before the next sweep overwrites it."""
        nonlocal best, best_flow
        if best is not None and best[2].U is Up:
            if large:  # not copied (see the docstring): the flow is re-derived if the run ends on it
                best = (best[0], best[1], dataclasses.replace(best[2], U=None))
                return
            best_flow = np.empty_like(Up) if best_flow is None else best_flow
            np.copyto(best_flow, Up)
            best = (best[0], best[1], dataclasses.replace(best[2], U=best_flow))
    check_min, check_fraction = _CHECK_SPACING["cheap" if projector.operator is None else "projection"]
    # (the compiled scatter on large graphs: no sparse D built)
    DtU = divergence(graph, U) if flow_given else np.zeros((problem.n, problem.d))
    W0, U0, DtU0 = W.copy(), U.astype(np.float32 if large else float), DtU.copy()
    Up = np.empty_like(U)  # the dual step U+ = prox(U + sigma D (2 W+ - W))
    DtUp = np.empty_like(DtU)
    # the Halpern or restart move of U is done by the next iteration's dual half-step
    move, move_weights = MOVE_NONE, (0.0, 0.0, 0.0)

    # Nodes without edges (or every node when lam = 0, where the flows stay 0) are decoupled:
    # the step-size condition does not involve them, so a long step solves their prox exactly.
    decoupled = (graph.degree == 0) | (problem.lam == 0)

    # (its Laplacian products compiled whenever the sweeps are: numba is loaded anyway)
    knorm = _step_norm_estimate(graph, compiled=sweep.compiled or None) if method == "halpern" else 1.0
    setup_time = time.perf_counter() - t_start  # (the step-norm estimate included: 30-60 passes over the edges)
    polish_on = (polish_applies(problem)
                 and problem.n_edges * problem.d <= _POLISH_MAX_FLOW_ENTRIES.get(problem.penalty.dual_ball, 0))
    quadratics = {}  # node quadratics for the polish, computed on its first use
    polishes, polished_at = 0, None
    last_clusters = dict.fromkeys(_POLISH_THRESHOLDS)  # cluster counts at the last check-point
    polished_partitions, loose_tries = set(), 0

    def steps(w):
        return np.where(decoupled, 1e8, (eta / (w * knorm)) * inv_deg), eta * w / (2.0 * knorm)

    tau, sigma = steps(omega)
    tau_col, inv_tau = tau[:, None], 1.0 / tau

    history = []
    restarts = 0
    k_in_epoch = 0
    r_epoch0 = r_prev = r_cert = None
    trigger = 0.1
    step_fallbacks = 0
    status, message = Status.MAX_ITER, f"reached max_iter = {max_iter}"
    best = None  # (rel_gap, W, certificate)
    best_gaps = []  # best[0] after each check
    # large problems: certificates where the certified gaps predict tol (predicted_spacing)
    predict = check_every is None and problem.n_edges * problem.d >= PREDICT_FROM_ENTRIES
    next_check = (PREDICT_FIRST_CHECK if predict else 10) if check_every is None else check_every
    # with check_every=None certificates also come when the fixed-point residual has fallen
    # about as much as the gap still has to (see `trigger`)
    trigger_exponent = PREDICT_TRIGGER_EXPONENT if predict else RESIDUAL_TRIGGER_EXPONENT
    cert_time = 0.0
    nonfinite = 0  # check-points in a row whose P(W) was not finite
    unbounded = 0  # ... whose certificate was not finite, with data beyond MAX_DATA_MAGNITUDE
    overflowing_data = problem.loss.data_magnitude > MAX_DATA_MAGNITUDE
    last_cert = 0.0  # cost of the latest certificate, to keep the next one inside a time budget
    iteration = 0
    Wp = W
    start_best = None  # the warm start's certificate, while it is the best
    t_solve = time.perf_counter()
    if warm_start is not None:
        # the start is certified before the first step, and kept as the best so far: on an ill-conditioned
        # problem one step can leave a near-optimal start far behind, and the run returns the better point
        c0 = time.perf_counter()
        cert = certify_pair(problem, W, U, projector=projector, deadline=deadline, tol=tol)
        if np.may_share_memory(cert.U, U):  # (the loop writes U in place)
            cert = dataclasses.replace(cert, U=cert.U.copy())
        cert_time = last_cert = time.perf_counter() - c0
        history.append(_history_row(0, time.perf_counter() - t_start, cert, 0, omega, cert_time))
        best = start_best = (cert.rel_gap, W.copy(), kept(cert))
        if cert.rel_gap <= tol:
            status, message = Status.OPTIMAL, ""
            if callback is not None:  # (the run's one check-point; copies, as at the loop's check-points)
                shown = dataclasses.replace(cert, U=cert.U.copy())
                callback(IterationInfo(0, history[-1]["time"], W.copy(), shown.U, shown, omega, 0))
    iterations_to_run = 0 if status == Status.OPTIMAL else max_iter

    for iteration in range(1, iterations_to_run + 1):
        # ---- one PDHG step T(z) = (W+, U+)
        V = nodes.step(W, DtU, tau, tau_col)
        Wp = loss.prox_warm(V, tau, Wp)
        if np.may_share_memory(Wp, V):  # (V may be a kept buffer)
            Wp = Wp.copy()
        a, b, rho = move_weights
        edge_residual = sweep(move, U, Up, U0, nodes.extrapolate(Wp, W, sigma), sigma, DtUp, a, b, rho)
        last = (Wp, Up, DtUp)  # T(z): no sweep after the last one writes these arrays again

        # ---- fixed-point residual ||z - T(z)||_P: restart test, and certificate trigger
        restart = False
        if k_in_epoch % restart_check == 0:
            node_diagonal, cross = nodes.residual(W, Wp, inv_tau, DtU, DtUp)
            diagonal = node_diagonal + edge_residual / sigma
            if knorm < 1.0 and cross > 0.98 * diagonal:
                # the enlarged steps make the PDHG metric (nearly) indefinite along the
                # trajectory: fall back to the always-safe preconditioned steps
                knorm = 1.0
                tau, sigma = steps(omega)
                tau_col, inv_tau = tau[:, None], 1.0 / tau
                restart = True
                step_fallbacks += 1
            r = math.sqrt(max(diagonal - cross, 0.0))
            if check_every is None and r_cert is not None and r <= r_cert * trigger:
                next_check = min(next_check, iteration)  # enough progress since the last certificate
            if method != "halpern":
                pass
            elif r_epoch0 is None:
                r_epoch0 = r
            elif k_in_epoch > 0 and not restart:
                restart = restart_due(r, r_epoch0, r_prev, k_in_epoch, iteration)
            r_prev = r
        if method != "halpern":
            k_in_epoch += 1

        # ---- certificate check-point on the PDHG output
        due = iteration >= next_check or iteration == max_iter
        if due and deadline is not None and best is not None and time.perf_counter() + last_cert > deadline:
            due = False  # the certificate would not fit in the time budget: keep the best so far
        if due:
            c0 = time.perf_counter()
            # (the flow read in place where the projector has nothing to correct: no copy)
            cert = certify_iterate(problem, Wp, Up, DtUp, projector, deadline=deadline, tol=tol)
            this_cert = time.perf_counter() - c0
            last_cert = this_cert
            cert_time += this_cert
            r_cert = r_prev
            # certify again once the residual has fallen by about what the gap still has to fall
            trigger = residual_trigger(tol, cert.rel_gap, trigger_exponent)
            elapsed = time.perf_counter() - t_start
            history.append(_history_row(iteration, elapsed, cert, restarts, omega, this_cert))
            if best is None or cert.rel_gap <= best[0]:  # ties (e.g. no finite bound yet): the latest
                best = (cert.rel_gap, Wp.copy(), kept(cert))
            nonfinite = 0 if np.isfinite(cert.primal) else nonfinite + 1
            if nonfinite >= NONFINITE_CHECKS:
                status = Status.SOLVER_ERROR
                message = f"P(W) was not finite at {nonfinite} check-points in a row"  # (+ the certificate's reason)
                break
            # data whose squares overflow: the certificate's allowances overflow with them even where P(W) is
            # finite (features at 1e160: a dual bound of -inf at every check-point, to the 100,000th iteration)
            unbounded = unbounded + 1 if overflowing_data and not np.isfinite(cert.gap) else 0
            if unbounded >= NONFINITE_CHECKS:
                status = Status.SOLVER_ERROR
                message = (f"no finite certificate at {unbounded} check-points in a row: the {problem.loss.name} "
                           f"loss's data reach {problem.loss.data_magnitude:.3g} in magnitude, and beyond "
                           f"{MAX_DATA_MAGNITUDE:.0e} their squares, which the certificate forms, overflow float64: "
                           "rescale the data, e.g. standardize it")
                break
            if tol < cert.rel_gap < _POLISH_BELOW and polish_on:
                # the iterate's objective converges long before its flows when m_i < d: once the
                # fused structure is the same at two check-points, try the exact cluster-reduced
                # solution (certified from scratch, so never a wrong gap)
                c0 = time.perf_counter()
                # (the loose thresholds' structures are not read once their tries are spent)
                reading = _POLISH_THRESHOLDS if loose_tries < _POLISH_LOOSE_TRIES else _POLISH_THRESHOLDS[-1:]
                for threshold, clusters in zip(reading, fused_partitions(problem, Wp, reading)):
                    count = None if clusters is None else clusters[0]  # (None: too many to polish)
                    stable = count is not None and count == last_clusters[threshold]
                    last_clusters[threshold] = count
                    loose = threshold != _POLISH_THRESHOLDS[-1]
                    if (not stable or reduced_unknowns(problem, count) == problem.n * problem.d or best[0] <= tol
                            or (loose and loose_tries >= _POLISH_LOOSE_TRIES)):
                        continue
                    partition = (count, hash(clusters[1].tobytes()))
                    if partition in polished_partitions:
                        continue  # (its exact solution is what it was: a structure is polished once)
                    polished_partitions.add(partition)
                    polished = polish_clusters(problem, Wp, quadratics=quadratics, clusters=clusters,
                                               reach=(cert.primal, tol))
                    polishes += 1
                    loose_tries += loose
                    if polished is not None and polished[1].rel_gap < best[0]:
                        best = (polished[1].rel_gap, polished[0], polished[1])
                        polished_at = iteration
                        history[-1].update(polished_rel_gap=polished[1].rel_gap, polished_primal=polished[1].primal,
                                           polished_dual=polished[1].dual)
                cert_time += time.perf_counter() - c0
            if best[0] <= tol:
                status, message = Status.OPTIMAL, ""
                break
            best_gaps.append(best[0])
            if callback is None and tol_out_of_reach(tol, best[2].resolution, best_gaps):  # (a callback decides itself)
                status = Status.INACCURATE
                message = out_of_reach_message(tol, best[2].resolution, best[0])
                break
            call = callback is not None and (not hasattr(callback, "wants") or callback.wants(cert))
            shown = cert
            if call and not getattr(callback, "copies_arrays", False):
                shown = dataclasses.replace(cert, U=cert.U.copy())  # (the projector's buffer or the iterate)
            if call and callback(IterationInfo(iteration, elapsed, Wp.copy(), shown.U, shown, omega, restarts)):
                status, message = Status.MAX_ITER, "stopped by callback"
                break
            if iteration < max_iter:  # (no sweep comes after the last iteration)
                keep_best()
            # otherwise geometrically spaced (about log(iterations) certificates in all), or where
            # the gaps predict tol; the schedule depends on iteration counts and gaps only, so
            # runs are reproducible
            spacing = check_every or max(check_min, iteration // check_fraction)
            if predict:
                gaps = [(h["iteration"], h["rel_gap"]) for h in history[-2:]]
                spacing = predicted_spacing(spacing * (PREDICT_SECOND_SPACING if len(gaps) < 2 else 1), iteration,
                                            gaps, tol)
            next_check = iteration + spacing
        if time_limit is not None and time.perf_counter() - t_start > time_limit:
            status, message = Status.TIME_LIMIT, f"reached time_limit = {time_limit:g} s"
            break
        if iteration % 64 == 0 and not np.isfinite(DtUp).all():
            status, message = Status.SOLVER_ERROR, "iterates became non-finite"
            break

        # ---- next point: restart at T(z), Halpern step, or plain PDHG
        if method == "halpern" and restart:
            if adaptive_weight:
                dx = math.sqrt(squared_distance(Wp, W0, 1.0 / inv_deg))
                dy = math.sqrt(2.0 * squared_distance(Up, U0))
                updated = updated_primal_weight(omega, dx, dy)
                if updated != omega:
                    omega = updated
                    tau, sigma = steps(omega)
                    tau_col, inv_tau = tau[:, None], 1.0 / tau
            W, (DtU, DtUp) = Wp, (DtUp, DtU)
            W0 = W.copy()
            np.copyto(DtU0, DtU)
            move = MOVE_RESTART  # U <- U+, U0 <- U+
            restarts += 1
            k_in_epoch = 0
            r_epoch0 = r_prev = None
        elif method == "halpern":
            k_in_epoch += 1
            a = k_in_epoch / (k_in_epoch + 1.0)
            b = 1.0 - a
            W = nodes.halpern(Wp, W, W0, a, b, reflection)
            nodes.halpern_inplace(DtUp, DtU, DtU0, a, b, reflection)
            move, move_weights = MOVE_HALPERN, (a, b, reflection)  # U <- a((1+rho) U+ - rho U) + b U0
        else:
            W, (DtU, DtUp) = Wp, (DtUp, DtU)
            U, Up = Up, U
            move = MOVE_NONE

    recertified = False
    if best is None:
        cert = certify_pair(problem, Wp, Up, projector=projector, deadline=deadline)
        best = (cert.rel_gap, Wp.copy(), cert)
    elif best[2].U is None:  # a large problem's best flow was not kept
        U = U0 = Up = None  # (the iterate's other flow arrays, released first: `last` holds T(z))
        best, recertified = _recertify(problem, best[0], best[1], last, projector, tol), True
    solve_time = time.perf_counter() - t_solve  # everything, the last certificate included
    _, W_best, cert = best
    if status == Status.MAX_ITER and message.startswith("reached max_iter") and cert.resolution > tol:
        status = Status.INACCURATE
        message = f"{cert.resolution_message(tol)}; {message}"
    residuals = dict(cert.residuals)
    residuals["stationarity"] = stationarity(problem, W_best, cert.U)
    if cert.message and status != Status.OPTIMAL:
        message = f"{message}; {cert.message}" if message else cert.message
    if best is start_best and status != Status.OPTIMAL:
        message = (f"{message}; the warm start is returned (certified rel_gap {cert.rel_gap:.3g}): "
                   f"no iterate improved on it")
    note = _uniqueness_note(problem)
    if note:
        message = f"{message}; {note}" if message else note
    return GTVResult(status=status, solver="fast", W=W_best, U=cert.U, primal=cert.primal, dual=cert.dual,
                     gap=cert.gap, rel_gap=cert.rel_gap, value=cert.primal, iterations=iteration,
                     setup_time=setup_time, solve_time=solve_time, residuals=residuals,
                     history=pd.DataFrame(history), message=message,
                     info={"method": method, "restarts": restarts, "omega": omega, "step_norm": knorm,
                           "polishes": polishes, "polished_at": polished_at,
                           "step_fallbacks": step_fallbacks,
                           "certificate_time": cert_time, "recertified": recertified, "node_gaps": cert.node_gaps,
                           "edge_gaps": cert.edge_gaps})


def _history_row(iteration: int, elapsed: float, cert: Certificate, restarts: int, omega: float,
                 certificate_time: float) -> dict:
    """One row of the core's ``history``: a check-point's certificate (row 0: a warm start's)."""
    return {"iteration": iteration, "time": elapsed, "primal": cert.primal, "dual": cert.dual, "gap": cert.gap,
            "rel_gap": cert.rel_gap, "restarts": restarts, "omega": omega,
            "conservation": cert.residuals["conservation"], "capacity_scale": cert.residuals["capacity_scale"],
            "projection_iterations": cert.residuals["projection_iterations"], "certificate_time": certificate_time}


def _recertify(problem, best_gap, W_best, last, projector, tol):
    """``(rel_gap, W, certificate)`` for a run whose best certificate (relative gap ``best_gap``)
    lost its flow: the last iterate's certificate (``last = (W+, U+, D^T U+)`` of the final sweep),
    or, if that is worse than ``best_gap``, the better of it and ``W_best`` with the last flow; see
    :func:`_iterate`. Each is certified from scratch."""
    W_last, U_last, DtU_last = last
    first = certify_iterate(problem, W_last, U_last, DtU_last, projector, deadline=None, tol=tol)
    if first.rel_gap <= best_gap:  # (one certificate past a time limit, not two)
        return first.rel_gap, W_last, first
    projector.adopt(first.U)  # (a projected copy in the projector's buffers: out of the next pass's way)
    second = certify_pair(problem, W_best, U_last, projector=projector, deadline=None, tol=tol)
    options = [(first.rel_gap, W_last, first), (second.rel_gap, W_best, second)]
    return min(options, key=lambda option: option[0] if option[0] == option[0] else math.inf)  # (NaN: last)


def _report_once(result: GTVResult, callback) -> GTVResult:
    """A direct method's result, after one callback with its certificate (its only check-point)."""
    if callback is not None:
        cert = Certificate(primal=result.primal, dual=result.dual, gap=result.gap, rel_gap=result.rel_gap,
                           node_gaps=result.info["node_gaps"], edge_gaps=result.info["edge_gaps"], U=result.U,
                           residuals=dict(result.residuals), message=result.message)
        callback(IterationInfo(result.iterations, result.setup_time + result.solve_time, result.W, result.U, cert,
                               float("nan"), 0))
    return result


def _uniqueness_note(problem: GTVProblem) -> str:
    """Say when part of W is not determined (:func:`gtvcvx.solvers._pdhg_common.uniqueness_note`)."""
    return uniqueness_note(problem.graph, problem.loss.has_data)


