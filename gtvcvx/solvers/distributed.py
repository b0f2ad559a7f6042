"""The distributed solve on Dask: METIS parts on workers, data where it lives, the same certificate.

``gtvcvx.solve(problem, backend="dask")`` runs the restarted Halpern PDHG solver of
:mod:`gtvcvx.solvers.gtv` with the graph split into parts (:mod:`gtvcvx.solvers._partition`),
each a Dask actor (:class:`gtvcvx.solvers._dask_part.Part`) that keeps its nodes' data, models and
flows. The client keeps the graph and every scalar decision (restarts, primal weight,
certificate schedule); per iteration the parts exchange only their boundary rows, relayed by
the client, and partial sums.
"""

from __future__ import annotations

import copy
import math
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from .._restart import restart_due, updated_primal_weight
from .._validation import check_gap_tolerance, check_positive_int, check_time_limit
from ..capabilities import provides
from ..graph import Graph
from ..losses import DOMAIN_RTOL
from ..penalties import Penalty
from ..problem import GTVProblem
from ..results import GTVResult, Status, out_of_reach_message, relative_gap, tol_out_of_reach
from ._dask_part import Part, PartData
from ._partition import part_layouts, partition_graph
from .certificate import (_ROUNDING_FACTOR, ESTIMATED_ALLOWANCE_MESSAGE, UNBOUNDED_TARGET_RTOL, Certificate,
                          MinorantBoxes, ResidualAllowance, certified_statuses, merge_allowance_partials,
                          no_bound_message, zero_flow_message)
from ._scaling import LabelScale, scale_for, solve_scaled
from ._pdhg_common import (CHECK_SPACING, NONFINITE_CHECKS, IterationInfo, initial_primal_weight, residual_trigger,
                           step_norm_estimate, uniqueness_note, warm_start_parts)

__all__ = ["SiteProblem", "PartData", "solve_distributed"]

#: Exceptions by which Dask reports a worker (and the actors on it) gone.
_LOST = (OSError, EOFError)


@dataclass
class SiteProblem:
    """A GTV problem whose local datasets stay at their sites: the client holds only the graph.

    Parameters
    ----------
    graph : Graph
    penalty : Penalty
    lam : float
    parts : list of PartData
        One entry per part: its nodes and the file its worker reads them from. Every node
        belongs to exactly one part; the parts are the partition (no METIS).
    """

    graph: Graph
    penalty: Penalty
    lam: float
    parts: list

    def __post_init__(self):
        if not isinstance(self.graph, Graph):
            raise TypeError(f"graph must be a gtvcvx.Graph, got {type(self.graph).__name__}")
        if not isinstance(self.penalty, Penalty):
            raise TypeError(f"penalty must be a gtvcvx penalty, got {type(self.penalty).__name__}")
        if not (isinstance(self.lam, (int, float)) and math.isfinite(self.lam) and self.lam >= 0):
            raise ValueError(f"lam must be a finite number >= 0, got {self.lam!r}")
        if not self.parts or not all(isinstance(p, PartData) for p in self.parts):
            raise TypeError("parts must be a non-empty list of gtvcvx.solvers.distributed.PartData")
        labels = np.full(self.graph.n, -1, dtype=np.int64)
        for index, part in enumerate(self.parts):
            nodes = np.asarray(part.nodes)
            if nodes.ndim != 1 or not np.issubdtype(nodes.dtype, np.integer) or nodes.size == 0:
                raise ValueError(f"parts[{index}].nodes must be a non-empty 1-d array of node ids")
            if nodes.min() < 0 or nodes.max() >= self.graph.n:
                raise ValueError(f"parts[{index}].nodes has ids outside [0, {self.graph.n})")
            if (labels[nodes] >= 0).any() or np.unique(nodes).size != nodes.size:
                raise ValueError(f"parts[{index}].nodes repeats a node of an earlier part (or of itself)")
            factor = part.label_factor
            if not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor > 0):
                raise ValueError(f"parts[{index}].label_factor must be a finite number > 0 (leave it at 1), "
                                 f"got {factor!r}")
            labels[nodes] = index
        if (labels < 0).any():
            raise ValueError(f"node {int(np.flatnonzero(labels < 0)[0])} belongs to no part")
        self.labels = labels

    def labels_scaled(self, factor: float) -> SiteProblem:
        """The problem with every site's labels times ``factor`` and ``lam`` times ``factor``."""
        parts = [replace(part, label_factor=part.label_factor * factor) for part in self.parts]
        return SiteProblem(self.graph, self.penalty, self.lam * factor, parts)

    @property
    def n(self) -> int:
        return self.graph.n

    @property
    def n_edges(self) -> int:
        return self.graph.n_edges


class _PartsLost(Exception):
    def __init__(self, parts, cause):
        super().__init__(f"lost part(s) {parts}: {cause}")
        self.parts = parts
        self.cause = cause


class _Cluster:
    """The parts as Dask actors, with the calls, the relay of boundary rows and the byte count."""

    def __init__(self, client, layouts, source, penalty, lam, direct: bool = True):
        self.client = client
        self.direct = direct
        self.layouts = layouts
        self.source = source  # part -> its Loss or PartData (built when the part is placed)
        self.penalty = penalty
        self.lam = lam
        self.bytes = 0
        self.actors = [None] * len(layouts)
        self.place(range(len(layouts)))

    def workers(self) -> list[str]:
        deadline = time.monotonic() + 60.0
        while True:
            workers = sorted(self.client.scheduler_info()["workers"])
            if workers or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if not workers:
            raise RuntimeError("the Dask cluster has no workers")
        return workers

    def place(self, parts) -> None:
        workers = self.workers()
        for p in parts:
            worker = [workers[p % len(workers)]]
            # the part's data and layout go straight to its worker (not through the task graph)
            layout, source = self.client.scatter([self.layouts[p], self.source(p)], workers=worker, hash=False)
            future = self.client.submit(Part, layout, source, self.penalty, self.lam, actor=True, workers=worker,
                                        pure=False)
            self.actors[p] = future.result()
            del layout, source
        if self.direct:  # every part learns its neighbours' (new) actors
            futures = [actor.connect({q: self.actors[q] for q in self.layouts[p].send})
                       for p, actor in enumerate(self.actors)]
            for future in futures:
                future.result()

    def call(self, method: str, per_part=None, **kwargs) -> list:
        """``method`` on every part, in parallel: ``per_part[p]`` is part ``p``'s first argument (a tuple:
        its first arguments), ``kwargs`` go to every part."""
        futures = []
        for p, actor in enumerate(self.actors):
            args = () if per_part is None else per_part[p]
            args = args if isinstance(args, tuple) else (args,)
            futures.append(getattr(actor, method)(*args, **kwargs))
        out, lost, cause = [], [], None
        for p, future in enumerate(futures):
            try:
                out.append(future.result())
            except _LOST as exc:
                lost.append(p)
                cause = exc
                out.append(None)
        if lost:
            raise _PartsLost(lost, cause)
        return out

    def exchange(self, sends: list[dict]) -> list[dict]:
        """Route every part's boundary rows to the parts that need them; count the bytes."""
        halos = [{} for _ in sends]
        for p, rows_for in enumerate(sends):
            for q, rows in rows_for.items():
                halos[q][p] = rows
                self.bytes += 2 * rows.nbytes  # part -> client -> part
        return halos

    def scalars(self, results: list[dict]) -> dict:
        self.bytes += 8 * sum(len(r) for r in results)
        return {key: sum(r[key] for r in results) for key in results[0]} if results else {}

    def alive(self) -> list[int]:
        """Parts whose actor answers."""
        live = []
        for p, actor in enumerate(self.actors):
            try:
                actor.info().result(timeout=30)
                live.append(p)
            except Exception:  # noqa: BLE001 - any failure to answer means the part is gone
                pass
        return live


@certified_statuses
def solve_distributed(problem, tol: float = 1e-6, max_iter: int = 100_000, time_limit: float | None = None,
                      warm_start=None, callback=None, *, client=None, n_parts: int | None = None,
                      partition=None, checkpoint_dir=None, checkpoint_every: int = 200, method: str = "halpern",
                      eta: float = 0.99, reflection: float = 1.0, primal_weight: float | None = None,
                      adaptive_weight: bool = True, check_every: int | None = None, restart_check: int = 4,
                      blas_threads: int | None = 1, verbose: bool = False, seed: int = 0,
                      exchange: str = "direct") -> GTVResult:
    r"""Solve GTV minimization on a Dask cluster, partitioned, with the single-process certificate.

    Parameters
    ----------
    problem : GTVProblem or SiteProblem
        A problem whose data the client holds (split into ``n_parts`` METIS parts, each part's
        data sent to its worker once), or a :class:`SiteProblem` whose parts load their own
        data files on their workers (the client never reads them).
    tol, max_iter, time_limit, warm_start, callback, method, eta, reflection, primal_weight, adaptive_weight, check_every, restart_check
        As in :func:`gtvcvx.solve` (``method`` is ``"halpern"`` or ``"pdhg"``; the callback's
        :class:`IterationInfo` carries ``W = U = None``: the iterates stay on the workers).
    client : dask.distributed.Client, optional
        Used as given. Default: a ``LocalCluster`` with one single-threaded worker process per
        part (at most the machine's cores), closed afterwards.
    n_parts : int, optional
        Number of parts (default: the number of workers). Ignored for a SiteProblem.
    partition : array of int (n,), optional
        The part of every node, instead of METIS.
    checkpoint_dir : path, optional
        Where the parts write their state every ``checkpoint_every`` iterations (a directory
        the client and every worker can reach: the parts write, the client renames a complete
        set into place). Default: a temporary directory with the embedded LocalCluster, none
        with a given client (then a lost worker ends the solve with status ``solver_error``).
    checkpoint_every : int
        Iterations between checkpoints.
    blas_threads : int or None
        BLAS threads per part during its work (default 1).
    verbose : bool
        Print progress (iterations, gap, elapsed, the estimated time to ``tol``) to stderr
        about every 10 seconds.
    seed : int
        Seed of the METIS partitioning.
    exchange : {"direct", "client"}
        How boundary rows travel: from part to part (worker to worker, default), or relayed by
        the client (one hop more; for comparison, and for clusters whose workers cannot reach
        each other).

    Returns
    -------
    GTVResult
        As the single-process solver's; ``info`` adds ``backend``, ``n_parts``, ``partition``,
        ``cut_edges``, ``bytes_per_iteration``, ``bytes_total``, ``workers`` and ``faults``
        (one entry per recovery; the history has a row with ``event = "resumed"`` for each),
        ``rounds`` and ``part_compute_time`` (seconds each part spent in the iteration's
        phases; the rest of the solve time is communication and the client's decisions).

    Notes
    -----
    Each part owns nodes and keeps every edge that touches them, so the divergence
    ``(D^T U)_i`` of its nodes is local; the edges between two parts are kept (and updated
    identically) by both. One iteration is two rounds: the primal step
    ``W+ = prox_{T F}(W - T D^T U)``, after which each part sends ``sigma (2 W+ - W)`` at its
    boundary nodes; then the dual step ``U+ = prox_{Sigma G*}(U + Sigma D (2W+ - W))`` and
    ``D^T U+``, with the partial sums of the fixed-point residual every ``restart_check``
    iterations. The client takes every scalar decision of the single-process loop (restart
    criteria, primal weight, step fallback, certificate schedule) from the summed partials,
    so the iterates follow the single-process ones up to the rounding of those sums. The
    certificate is :func:`gtvcvx.solvers.certificate.certify_pair` assembled from the parts
    (:class:`_Certifier`): the minimum-norm conservation projection at nodes whose loss
    conjugate has linear constraints (fewer samples than features, no data) is conjugate
    gradients whose products exchange boundary rows, the residual allowance is combined from
    per-component partial sums, and the node and edge Fenchel-Young terms are summed over parts.

    Without the active-set polish of the single-process solver (a global reduced solve), so
    problems with ``m_i < d`` may need more iterations to certify than ``backend="local"``.
    A problem whose objective is far below 1 is solved with its labels scaled by a power of two,
    as in one process (:mod:`gtvcvx.solvers._scaling`, ``info["label_scale"]``): a
    :class:`~gtvcvx.GTVProblem` on the client; a :class:`SiteProblem` from the sum of the sites'
    ``P(0)`` (a number each part reports), each site then loading its data again with its labels
    scaled (the labels never leave the workers).

    References
    ----------
    .. [1] Y. SarcheshmehPour, Y. Tian, L. Zhang, A. Jung, "Clustered federated learning via
       generalized total variation minimization", IEEE Trans. Signal Processing 71, 2023
       (Algorithm 1: the same iteration as message passing over the empirical graph).
    .. [2] M. Rocklin, "Dask: parallel computation with blocked algorithms and task scheduling",
       SciPy 2015 (actors: stateful objects on workers).
    """
    check_gap_tolerance(tol, "tol")
    check_positive_int(max_iter, "max_iter")
    check_time_limit(time_limit)
    check_positive_int(checkpoint_every, "checkpoint_every")
    check_positive_int(restart_check, "restart_check")
    check_positive_int(check_every, "check_every", allow_none=True)
    if method not in ("halpern", "pdhg"):
        raise ValueError(f"backend='dask' runs method 'halpern' or 'pdhg', got {method!r}")
    if not (isinstance(eta, (int, float)) and 0 < eta <= 1):
        raise ValueError(f"eta must be in (0, 1], got {eta!r}")
    if not (isinstance(reflection, (int, float)) and 0 <= reflection <= 1):
        raise ValueError(f"reflection must be in [0, 1], got {reflection!r}")
    if method == "pdhg":
        eta, reflection, adaptive_weight = 1.0, 0.0, False
    if exchange not in ("direct", "client"):
        raise ValueError(f"exchange must be 'direct' or 'client', got {exchange!r}")
    if not isinstance(problem, (GTVProblem, SiteProblem)):
        raise TypeError(f"backend='dask' solves a gtvcvx.GTVProblem or a SiteProblem, got {type(problem).__name__}")
    try:
        from dask.distributed import Client
    except ImportError as exc:
        raise ImportError("backend='dask' needs Dask distributed: pip install 'dask[distributed]' "
                          "(or gtvcvx[distributed])") from exc

    t_start = time.perf_counter()
    check_positive_int(n_parts, "n_parts", allow_none=True)
    graph = problem.graph
    owned_cluster = scratch = None
    if client is None:
        cores = os.cpu_count() or 1
        wanted = len(problem.parts) if isinstance(problem, SiteProblem) else (n_parts or cores)
        owned_cluster = local_cluster(max(1, min(int(wanted), cores)))
        client = Client(owned_cluster)
        if checkpoint_dir is None:
            checkpoint_dir = scratch = tempfile.mkdtemp(prefix="gtvcvx-checkpoints-")
    elif not isinstance(client, Client):
        raise TypeError(f"client must be a dask.distributed.Client, got {type(client).__name__}")

    def run(solved, _left, warm, solved_callback):  # (the time limit counts from t_start: the caller's applies)
        return _solve(solved, graph, client, tol, int(max_iter), time_limit, warm, solved_callback, n_parts,
                      partition, checkpoint_dir, int(checkpoint_every), method, float(eta), float(reflection),
                      primal_weight, adaptive_weight, check_every, int(restart_check), blas_threads, verbose,
                      seed, t_start, exchange == "direct")

    try:
        with client.as_current():  # actor handles talk through this client, even if another one is the default
            if isinstance(problem, GTVProblem):  # an objective far below 1: solved where tol is relative
                scaled = solve_scaled(problem, time_limit, warm_start, callback, run)
                if scaled is not None:
                    return scaled
            return run(problem, time_limit, warm_start, callback)
    finally:
        if owned_cluster is not None:
            client.close()
            owned_cluster.close()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def local_cluster(n_workers: int):
    """The embedded cluster: ``n_workers`` single-threaded worker processes on this machine.

    Dask's nannies set ``MALLOC_TRIM_THRESHOLD_`` in their workers, which turns off glibc's
    adaptive mmap threshold: every large temporary then comes from fresh pages, and the
    iteration's per-part work took about twice as long (measured at 10^6 edges, d = 10).
    The embedded cluster keeps Dask's one-thread BLAS settings without it; a cluster you
    start yourself can do the same with the Dask setting
    ``distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_`` removed.
    """
    import dask
    from dask.distributed import LocalCluster

    environ = {k: v for k, v in dask.config.get("distributed.nanny.pre-spawn-environ", {}).items()
               if k != "MALLOC_TRIM_THRESHOLD_"}
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}):
        return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=":0")


def _layout(problem, graph, client, n_parts, partition, seed):
    if isinstance(problem, SiteProblem):
        return problem.labels, "sites", problem.parts.__getitem__
    if partition is not None:
        labels = np.asarray(partition)
        if labels.shape != (graph.n,) or not np.issubdtype(labels.dtype, np.integer) or labels.min() < 0:
            raise ValueError(f"partition must be an array of {graph.n} non-negative part numbers")
        if np.bincount(labels).min() == 0:
            raise ValueError("partition leaves a part number without nodes (number parts 0, 1, ... without gaps)")
        how = "given"
    else:
        if n_parts is None:
            n_parts = max(1, len(client.scheduler_info()["workers"]))
        check_positive_int(n_parts, "n_parts")
        labels, how = partition_graph(graph, min(int(n_parts), graph.n), seed=seed)
    # each part's loss is cut out when the part is placed (again after a fault), not kept here
    return labels, how, lambda p: problem.loss.subset(np.flatnonzero(labels == p))


def _solve(problem, *args) -> GTVResult:
    """:func:`_solve_placed`, its result in the caller's units where a SiteProblem's labels were scaled."""
    scaling = {}
    result = _solve_placed(problem, *args, scaling=scaling)
    return scaling["map"].result_out(result) if "map" in scaling else result


def _site_label_scale(problem: SiteProblem, cluster: _Cluster) -> float:
    """:func:`~gtvcvx.solvers._scaling.scale_for` of the sites' summed ``P(0)`` (1 where the penalty is
    not a norm or a site's loss cannot be scaled)."""
    if not provides(problem.penalty, "norm"):
        return 1.0
    sites = cluster.call("label_scaling")
    if not all(site["scalable"] for site in sites):
        return 1.0
    return scale_for(math.fsum(site["value_at_zero"] for site in sites))


def _solve_placed(problem, graph, client, tol, max_iter, time_limit, warm_start, callback, n_parts, partition,
                  checkpoint_dir, checkpoint_every, method, eta, reflection, primal_weight, adaptive_weight,
                  check_every, restart_check, threads, verbose, seed, t_start, direct, *, scaling) -> GTVResult:
    labels, how, source = _layout(problem, graph, client, n_parts, partition, seed)
    layouts = part_layouts(graph, labels)
    n_parts = len(layouts)
    log = _Log(verbose, tol)
    cluster = _Cluster(client, layouts, source, problem.penalty, problem.lam, direct)
    infos = cluster.call("info")
    factor = _site_label_scale(problem, cluster) if isinstance(problem, SiteProblem) else 1.0
    if factor != 1.0:  # an objective far below 1: the sites' labels times c, lam times c (see _scaling)
        problem = problem.labels_scaled(factor)
        cluster.source, cluster.lam = problem.parts.__getitem__, problem.lam
        cluster.place(range(n_parts))  # each site loads its data again, scaled
        infos = cluster.call("info")
        scaling["map"] = LabelScale(factor)
        callback = scaling["map"].callback_in(callback)
    d = infos[0]["d"]
    constrained = np.zeros(graph.n, dtype=bool)
    has_data = np.zeros(graph.n, dtype=bool)
    for layout, info in zip(layouts, infos):
        constrained[layout.own_nodes] = info["constrained"]
        has_data[layout.own_nodes] = info["has_data"]
    certifier = _Certifier(cluster, graph, problem.penalty, problem.lam, d, constrained,
                           max_terms=max(i["max_terms"] for i in infos),
                           bounded=all(i["bounded"] for i in infos),
                           nonnegative=all(i["nonnegative"] for i in infos),
                           loss=problem.loss if isinstance(problem, GTVProblem) else None)

    # ---- initial point (a warm start is model and flows, not data: sent to the parts)
    if isinstance(problem, GTVProblem):
        W_start, U_start = warm_start_parts(problem, warm_start)
    elif warm_start is not None:
        raise ValueError("warm_start is not supported for a SiteProblem")
    else:
        W_start = U_start = None
    W_start = np.zeros((graph.n, d)) if W_start is None else W_start
    U_start = np.zeros((graph.n_edges, d)) if U_start is None else U_start
    if graph.n_edges:  # as the single-process loop: flows outside the capacities are clipped first
        U_start = problem.penalty.project_conjugate_domain(U_start, problem.lam * graph.weights)
    omega = initial_primal_weight(graph, W_start, U_start, primal_weight)
    knorm = step_norm_estimate(graph) if method == "halpern" else 1.0
    cluster.call("start", [(W_start[lay.own_nodes], U_start[lay.edge_ids]) for lay in layouts], omega=omega,
                 knorm=knorm, eta=eta)
    del W_start, U_start
    check_min, check_fraction = CHECK_SPACING["projection" if constrained.any() and graph.n_edges else "cheap"]
    cut_edges = int(sum((~lay.counted).sum() for lay in layouts))
    setup_time = time.perf_counter() - t_start
    log.say(f"{n_parts} parts ({how}), {cut_edges} cut edges, setup {setup_time:.1f}s")

    state = {"iteration": 0, "omega": omega, "knorm": knorm, "k_in_epoch": 0, "r_epoch0": None, "r_prev": None,
             "r_cert": None, "trigger": 0.1, "restarts": 0, "step_fallbacks": 0, "best_gap": None,
             "best_cert": None, "next_check": (1 if warm_start is not None else 10) if check_every is None
             else check_every, "history": [], "move": None, "bytes": 0}
    checkpoint = None  # (iteration, state copy, paths)
    faults = []
    status, message = Status.MAX_ITER, f"reached max_iter = {max_iter}"
    deadline = None if time_limit is None else t_start + float(time_limit)
    t_solve = time.perf_counter()
    cert_time = 0.0
    n_rounds = 0
    iteration = 0
    while True:
        try:
            while state["iteration"] < max_iter:
                s = state
                iteration = s["iteration"] = s["iteration"] + 1
                if checkpoint_dir is not None and iteration > 1 and (iteration - 1) % checkpoint_every == 0:
                    checkpoint = _checkpoint(cluster, checkpoint_dir, s)
                # ---- one PDHG step: two rounds
                sends = cluster.call("primal_step", None, move=s["move"], omega=s["omega"], knorm=s["knorm"],
                                     threads=threads)
                residual_due = s["k_in_epoch"] % restart_check == 0
                parts = cluster.call("dual_step", cluster.exchange(sends), residual=residual_due,
                                     finite=iteration % 64 == 0, threads=threads)
                n_rounds += 2
                sums = cluster.scalars(parts)
                s["move"] = None
                restart = False
                if residual_due:
                    diagonal = sums["node_diag"] + sums["edge_diag"] / (eta * s["omega"] / (2.0 * s["knorm"]))
                    cross = 2.0 * sums["cross"]
                    if s["knorm"] < 1.0 and cross > 0.98 * diagonal:
                        s["knorm"] = 1.0
                        restart = True
                        s["step_fallbacks"] += 1
                    r = math.sqrt(max(diagonal - cross, 0.0))
                    if check_every is None and s["r_cert"] is not None and r <= s["r_cert"] * s["trigger"]:
                        s["next_check"] = min(s["next_check"], iteration)
                    if method != "halpern":
                        pass
                    elif s["r_epoch0"] is None:
                        s["r_epoch0"] = r
                    elif s["k_in_epoch"] > 0 and not restart:
                        restart = restart_due(r, s["r_epoch0"], s["r_prev"], s["k_in_epoch"], iteration)
                    s["r_prev"] = r
                if method != "halpern":
                    s["k_in_epoch"] += 1

                # ---- certificate check-point
                due = iteration >= s["next_check"] or iteration == max_iter
                if due and deadline is not None and s["best_cert"] is not None and \
                        time.perf_counter() + s.get("last_cert", 0.0) > deadline:
                    due = False
                if due:
                    c0 = time.perf_counter()
                    cert = certifier(deadline)
                    this_cert = time.perf_counter() - c0
                    s["last_cert"] = this_cert
                    cert_time += this_cert
                    s["r_cert"] = s["r_prev"]
                    s["trigger"] = residual_trigger(tol, cert.rel_gap)
                    elapsed = time.perf_counter() - t_start
                    s["history"].append({"iteration": iteration, "time": elapsed, "primal": cert.primal,
                                         "dual": cert.dual, "gap": cert.gap, "rel_gap": cert.rel_gap,
                                         "restarts": s["restarts"], "omega": s["omega"],
                                         **{key: cert.residuals[key] for key in _FLOW_FIELDS},
                                         "certificate_time": this_cert})
                    if s["best_gap"] is None or cert.rel_gap <= s["best_gap"]:
                        cluster.call("keep_best")
                        s["best_gap"], s["best_cert"] = cert.rel_gap, cert
                    log.check(iteration, elapsed, cert.rel_gap)
                    if s["best_gap"] <= tol:
                        status, message = Status.OPTIMAL, ""
                        break
                    s.setdefault("best_gaps", []).append(s["best_gap"])  # (setdefault: an older checkpoint)
                    if callback is None and tol_out_of_reach(tol, s["best_cert"].resolution, s["best_gaps"]):
                        status = Status.INACCURATE
                        message = out_of_reach_message(tol, s["best_cert"].resolution, s["best_gap"])
                        break
                    # (s.get: a checkpoint written before this counter existed)
                    s["nonfinite"] = 0 if np.isfinite(cert.primal) else s.get("nonfinite", 0) + 1
                    if s["nonfinite"] >= NONFINITE_CHECKS:  # the objective overflows float64
                        status = Status.SOLVER_ERROR
                        message = f"P(W) was not finite at {s['nonfinite']} check-points in a row"
                        break
                    if callback is not None and callback(IterationInfo(iteration, elapsed, None, None, cert,
                                                                       s["omega"], s["restarts"])):
                        status, message = Status.MAX_ITER, "stopped by callback"
                        break
                    s["next_check"] = iteration + (check_every or max(check_min, iteration // check_fraction))
                if time_limit is not None and time.perf_counter() - t_start > time_limit:
                    status, message = Status.TIME_LIMIT, f"reached time_limit = {time_limit:g} s"
                    break
                if "finite" in sums and sums["finite"] < n_parts:
                    status, message = Status.SOLVER_ERROR, "iterates became non-finite"
                    break

                # ---- next point (applied by the parts at the start of the next primal step)
                if method == "halpern" and restart:
                    if adaptive_weight:
                        moves = cluster.call("restart_moves")
                        n_rounds += 1
                        dx = math.sqrt(sum(m[0] for m in moves))
                        dy = math.sqrt(2.0 * sum(m[1] for m in moves))
                        s["omega"] = updated_primal_weight(s["omega"], dx, dy)
                    s["move"] = ("restart",)
                    s["restarts"] += 1
                    s["k_in_epoch"] = 0
                    s["r_epoch0"] = s["r_prev"] = None
                elif method == "halpern":
                    s["k_in_epoch"] += 1
                    s["move"] = ("halpern", s["k_in_epoch"], reflection)
                else:
                    s["move"] = ("pdhg",)
            break
        except _PartsLost as lost:
            if checkpoint is None:
                return _failed(state, setup_time, t_solve, faults, f"lost part(s) {lost.parts} at iteration "
                               f"{iteration} ({lost.cause}) and no checkpoint to resume from (pass checkpoint_dir)")
            if len(faults) >= MAX_RECOVERIES:
                return _failed(state, setup_time, t_solve, faults, f"lost part(s) {lost.parts} at iteration "
                               f"{iteration}: gave up after {len(faults)} recoveries")
            try:
                state = _resume(cluster, certifier, checkpoint, lost, iteration, faults, t_start, eta)
            except (_PartsLost, RuntimeError, OSError) as exc:
                return _failed(state, setup_time, t_solve, faults, f"lost part(s) {lost.parts} at iteration "
                               f"{iteration} and could not resume from the checkpoint of iteration "
                               f"{checkpoint[0]}: {exc}")
            log.say(f"lost part(s) {lost.parts} at iteration {iteration}; resumed from the checkpoint of "
                    f"iteration {checkpoint[0]}")
    try:
        return _finish(cluster, certifier, layouts, graph, d, has_data, state, status, message, tol, deadline,
                       setup_time, t_solve, cert_time, n_rounds, faults, infos, how, cut_edges, method, labels)
    except _PartsLost as lost:
        return _failed(state, setup_time, t_solve, faults, f"lost part(s) {lost.parts} while gathering the result "
                       f"({lost.cause})")


#: Worker losses one solve recovers from before it gives up (status ``solver_error``).
MAX_RECOVERIES = 10


def _failed(state, setup_time, t_solve, faults, message) -> GTVResult:
    """A solve that lost parts it could not recover: no iterate, no certificate, the reason."""
    return GTVResult(status=Status.SOLVER_ERROR, solver="fast", W=None, U=None, primal=float("nan"),
                     dual=float("nan"), gap=float("inf"), rel_gap=float("inf"), value=float("nan"),
                     iterations=state["iteration"], setup_time=setup_time, solve_time=time.perf_counter() - t_solve,
                     residuals={}, history=pd.DataFrame(state["history"]), message=message,
                     info={"backend": "dask", "faults": faults})


def _finish(cluster, certifier, layouts, graph, d, has_data, state, status, message, tol, deadline, setup_time,
            t_solve, cert_time, n_rounds, faults, infos, how, cut_edges, method, labels) -> GTVResult:
    """Gather the best certificate's pieces from the parts into one GTVResult."""
    n_parts = len(layouts)
    solve_time = time.perf_counter() - t_solve
    cert = state["best_cert"]
    if cert is None:
        cert = certifier(deadline)
        cluster.call("keep_best")
    if status == Status.MAX_ITER and message.startswith("reached max_iter") and cert.resolution > tol:
        status = Status.INACCURATE
        message = f"{cert.resolution_message(tol)}; {message}"
    if cert.message and status != Status.OPTIMAL and cert.message not in message:
        message = f"{message}; {cert.message}" if message else cert.message
    pieces = cluster.call("result")
    final = cluster.call("info")
    busy = [i["busy"] for i in final]
    cluster.bytes += sum(i["sent_bytes"] for i in final)  # rows sent part to part (direct exchange)
    W = np.zeros((graph.n, d))
    U = np.zeros((graph.n_edges, d))
    node_gaps = np.zeros(graph.n)
    edge_gaps = np.zeros(graph.n_edges)
    for layout, piece in zip(layouts, pieces):
        W[layout.own_nodes] = piece["W"]
        U[piece["edge_ids"]] = piece["U"]
        node_gaps[layout.own_nodes] = piece["node_gaps"]
        edge_gaps[piece["edge_ids"]] = piece["edge_gaps"]
    stationarity = math.sqrt(sum(p["stationarity_sq"] for p in pieces)) / (
        1.0 + math.sqrt(sum(p["divergence_sq"] for p in pieces)))
    note = uniqueness_note(graph, has_data)
    if note:
        message = f"{message}; {note}" if message else note
    residuals = {**cert.residuals, "stationarity": stationarity}
    iterations_run = max(state["iteration"], 1)
    return GTVResult(status=status, solver="fast", W=W, U=U, primal=cert.primal, dual=cert.dual, gap=cert.gap,
                     rel_gap=cert.rel_gap, value=cert.primal, iterations=state["iteration"], setup_time=setup_time,
                     solve_time=solve_time, residuals=residuals, history=pd.DataFrame(state["history"]),
                     message=message,
                     info={"method": method, "backend": "dask", "restarts": state["restarts"],
                           "omega": state["omega"], "step_norm": state["knorm"], "polishes": 0, "polished_at": None,
                           "step_fallbacks": state["step_fallbacks"], "certificate_time": cert_time, "rounds": n_rounds + certifier.rounds,
                           "node_gaps": node_gaps, "edge_gaps": edge_gaps, "n_parts": n_parts, "partition": how,
                           "cut_edges": cut_edges, "bytes_total": cluster.bytes,
                           "bytes_per_iteration": cluster.bytes / iterations_run,
                           "workers": len({i["pid"] for i in infos}), "faults": faults,
                           "labels": labels,
                           "part_compute_time": busy})


_FLOW_FIELDS = ("conservation", "capacity_scale", "projection_iterations")


class _GraphView:
    """What :class:`~gtvcvx.solvers.certificate.ResidualAllowance` needs of a problem, without its data
    (``nonnegative_loss``: whether every part's loss declares the trait ``nonnegative``)."""

    def __init__(self, graph, penalty, lam, d, nonnegative_loss: bool = False):
        self.graph, self.penalty, self.d, self.n = graph, penalty, d, graph.n
        self.capacities = lam * graph.weights
        self.nonnegative_loss = bool(nonnegative_loss)


class _Certifier:
    """The certificate of :func:`gtvcvx.solvers.certificate.certify_pair`, assembled from the parts.

    Same steps: clip the flows into the capacities; at constrained nodes the minimum-norm
    projection onto the conjugates' linear constraints (conjugate gradients whose products
    exchange boundary rows, warm-started across check-points), the common capacity scaling of
    the coupled edges, per-edge projection of the others; then the summed node and edge
    Fenchel-Young terms, the residual allowance from per-component partial sums, and the
    rounding allowance.
    """

    def __init__(self, cluster, graph, penalty, lam, d, constrained, *, max_terms, bounded, loss=None,
                 nonnegative=False):
        self.cluster, self.graph = cluster, graph
        self.max_terms = max_terms
        self.rounds = 0
        view = _GraphView(graph, penalty, lam, d, nonnegative)
        self.allowance = ResidualAllowance(view)
        self._boxes = {}  # component -> the smallest of the parts' minorant boxes (see _minorant_box)
        # a loss the client holds anyway (a GTVProblem, not a SiteProblem) bounds a component from all its samples
        self._client_boxes = None if loss is None else MinorantBoxes(
            loss, self.allowance.component, self.allowance.n_components, self.allowance.dist_unit)
        self.node_bound = (np.zeros(graph.n) if graph.n_edges == 0 else np.bincount(
            graph.edges.reshape(-1), np.repeat(penalty.flow_bound(view.capacities, d), 2), minlength=graph.n))
        self.bound = float(self.node_bound.max(initial=0.0))
        self.constrained = bool(constrained.any()) and graph.n_edges > 0
        degree = np.maximum(graph.degree[constrained], 1)
        self.row_scale_min = float(1.0 / np.sqrt(degree.max())) if degree.size else 1.0
        self.bounded = bool(bounded)
        self.target_rtol = 0.1 * DOMAIN_RTOL if bounded else UNBOUNDED_TARGET_RTOL
        self.max_iter = 200  # as the single-process loop's projector: warm starts carry the work over
        self.constrained_mask = constrained
        self.setup(range(len(cluster.actors)))

    def setup(self, parts) -> None:
        """Give the parts ``parts`` (all, or those recreated after a fault) the graph facts of the certificate."""
        allowance, layouts = self.allowance, self.cluster.layouts
        futures = [self.cluster.actors[p].setup_certificate(
            self.constrained_mask[layouts[p].ext_nodes], allowance.component[layouts[p].own_nodes],
            allowance.dist_unit[layouts[p].own_nodes], allowance.n_components, allowance.power,
            self.constrained) for p in parts]
        for future in futures:
            future.result()

    def __call__(self, deadline=None) -> Certificate:
        cert = self._certify(deadline, zero_flow=False)
        # (as the single-process certificate: the zero flow where the flow's gap is infinite or, for a loss that
        # bounds no optimum, exceeds P(W))
        priced = not self.bounded and cert.gap > abs(cert.primal)
        if (not math.isfinite(cert.gap) or priced) and math.isfinite(cert.primal):
            zero = self._certify(deadline, zero_flow=True)
            if math.isfinite(zero.gap) and zero.gap < cert.gap:
                zero.message = zero_flow_message(not math.isfinite(cert.gap))
                return zero
        return cert

    def _minorant_box(self, comp: int):
        """The smallest of the parts' boxes of component ``comp`` (each bounds the optimum from its
        own samples' half-spaces, :class:`~gtvcvx.solvers.certificate.MinorantBoxes`; a site's data
        stay on its worker) and, where the client holds the loss, of the box from all the component's
        samples (finite where the whole is not separable, even if every part's share is), cached;
        None where there is none."""
        if comp not in self._boxes:
            found = [box for box in self._call("minorant_box", comp=comp) if box is not None]
            whole = None if self._client_boxes is None else self._client_boxes(comp)
            if whole is not None:
                found.append(whole)
            self._boxes[comp] = np.minimum.reduce(found) if found else None
        return self._boxes[comp]

    def _call(self, method, per_part=None, **kwargs):
        self.rounds += 1
        return self.cluster.call(method, per_part, **kwargs)

    def _certify(self, deadline, zero_flow: bool) -> Certificate:
        cluster, graph = self.cluster, self.graph
        halos_W = cluster.exchange(self._call("boundary_W"))
        begun = self._call("flow_begin", zero_flow=zero_flow, warm=True)
        norm_b = math.sqrt(sum(b[1]["bb"] for b in begun))
        big = max(b[1]["big"] for b in begun)
        scale = self.bound if math.isfinite(self.bound) else float(graph.degree.max(initial=0) * big)
        conservation, iterations, correct = 0.0, 0, False
        if self.constrained:  # ||N D^T U|| without the row scaling, as the single-process certificate
            conservation = math.sqrt(sum(b[1]["raw"] for b in begun)) / max(scale, np.finfo(float).tiny)
            correct = norm_b > 0
        if correct:
            iterations = self._project(begun, self.target_rtol * scale * self.row_scale_min, deadline)
            halos_Y = cluster.exchange(self._call("flow_send"))
        else:
            halos_Y = [{} for _ in cluster.actors]
        alpha = min(1.0, min(self._call("flow_correct", halos_Y, correct=correct)))
        sums = cluster.scalars(self._call("certify", halos_W, alpha=alpha))
        primal = sums["node_values"] + sums["edge_values"]
        terms = sums["node_gaps"] + sums["edge_gaps"]
        cross = sums["cross"]
        bound, message, estimated = 0.0, "", 0.0
        if sums["residual"]:
            node_scale = np.where(np.isfinite(self.node_bound), self.node_bound, scale)
            partials = self._call("allowance", [node_scale[lay.own_nodes] for lay in cluster.layouts], primal=primal)
            bound = self.allowance.combine(merge_allowance_partials(partials), primal,
                                           grams=lambda todo: sum(self._call("grams", comps=todo)),
                                           boxes=self._minorant_box)
            estimated = bound if bound > 0 and not self.allowance.last_exact else 0.0
            if estimated:
                message = ESTIMATED_ALLOWANCE_MESSAGE
        rounding = _ROUNDING_FACTOR * (8.0 + math.log2(2.0 + graph.n + graph.n_edges) + float(self.max_terms)) * (
            abs(primal) + abs(terms) + abs(cross))
        gap = float(terms + bound + abs(cross) + rounding)
        if not (math.isfinite(gap) and math.isfinite(primal)):
            message = no_bound_message(primal, sums["edge_gaps"])
            dual, gap = -math.inf, math.inf
        else:
            dual = primal - gap
        residuals = {"conservation": conservation, "capacity_scale": alpha, "projection_iterations": float(iterations),
                     "residual_allowance": bound + abs(cross), "rounding_allowance": rounding,
                     "estimated_allowance": estimated}
        return Certificate(primal=primal, dual=dual, gap=gap, rel_gap=relative_gap(primal, dual), node_gaps=None,
                           edge_gaps=None, U=None, residuals=residuals, message=message)

    def _project(self, begun, atol: float, deadline) -> int:
        """Conjugate gradients for ``A A^T Y = A U`` over the parts (as :func:`gtvcvx.solvers._cg.conjugate_gradient`):
        two rounds per iteration, one reduction each."""
        cluster = self.cluster
        started = self._call("cg_residual", cluster.exchange([b[0] for b in begun]))
        sends = [s[0] for s in started]
        rr = rz = sum(s[1] for s in started)
        beta, iterations = 0.0, 0
        while iterations < self.max_iter and rr > atol * atol:
            if deadline is not None and time.perf_counter() > deadline:
                break
            pAp = sum(self._call("cg_direction", cluster.exchange(sends), beta=beta))
            if not pAp > 0:
                break
            stepped = self._call("cg_step", alpha=rz / pAp)
            sends = [s[0] for s in stepped]
            rr_new = sum(s[1] for s in stepped)
            beta = rr_new / rz if rz > 0 else 0.0
            rr = rz = rr_new
            iterations += 1
        return iterations


def _checkpoint(cluster: _Cluster, directory, state: dict):
    """Every part applies its pending move and writes its state; the client keeps its scalars."""
    os.makedirs(directory, exist_ok=True)
    iteration = state["iteration"] - 1  # the state after `iteration` complete iterations
    paths = [os.path.join(os.fspath(directory), f"part-{p}.npz") for p in range(len(cluster.actors))]
    staged = [f"{path}.iter{iteration}" for path in paths]
    cluster.call("checkpoint", staged, move=state["move"])
    for src, dst in zip(staged, paths):  # complete for every part before it replaces the previous one
        os.replace(src, dst)
    state["move"] = None
    saved = copy.deepcopy({k: v for k, v in state.items() if k != "best_cert"})
    saved["best_cert"] = state["best_cert"]
    saved["iteration"] = iteration
    return iteration, saved, paths


def _resume(cluster: _Cluster, certifier, checkpoint, lost: _PartsLost, iteration: int, faults: list,
            t_start: float, eta):
    """Recreate the lost parts on the surviving workers and roll every part back to the checkpoint."""
    at, saved, paths = checkpoint
    gone = sorted(set(range(len(cluster.actors))) - set(cluster.alive()))
    cluster.place(gone)
    certifier.setup(gone)
    state = copy.deepcopy({k: v for k, v in saved.items() if k != "best_cert"})
    state["best_cert"] = saved["best_cert"]
    for actor, path in zip(cluster.actors, paths):
        actor.restore(path, state["omega"], state["knorm"], eta).result()
    event = {"iteration": iteration, "time": time.perf_counter() - t_start, "event": "resumed", "resumed_from": at,
             "lost_parts": gone or list(lost.parts), "cause": f"{type(lost.cause).__name__}: {lost.cause}"}
    faults.append(event)
    state["history"].append(dict(event))
    return state


class _Log:
    """Progress lines on stderr about every 10 s: iteration, gap, elapsed and a time estimate to ``tol``."""

    def __init__(self, enabled: bool, tol: float):
        self.enabled = enabled
        self.tol = tol
        self.last = time.perf_counter()
        self.first = None

    def say(self, text: str) -> None:
        if self.enabled:
            print(f"[gtvcvx dask] {text}", file=sys.stderr, flush=True)

    def check(self, iteration: int, elapsed: float, rel_gap: float) -> None:
        if self.first is None and math.isfinite(rel_gap) and rel_gap > 0:
            self.first = (elapsed, rel_gap)
        if not self.enabled or time.perf_counter() - self.last < 10.0:
            return
        self.last = time.perf_counter()
        estimate = ""
        if self.first and rel_gap > self.tol and self.first[1] > rel_gap and elapsed > self.first[0]:
            rate = math.log(self.first[1] / rel_gap) / (elapsed - self.first[0])  # log-gap per second
            estimate = f", about {math.log(rel_gap / self.tol) / rate:.0f}s to tol"
        self.say(f"iteration {iteration}, rel. gap {rel_gap:.2e}, {elapsed:.0f}s elapsed{estimate}")
