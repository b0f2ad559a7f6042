"""Run several solvers on one spec or problem and compare them in one pandas table.

Every row carries an *honest* certified gap: CVXPY backends return only ``W``, so their
solutions are certified by gtvcvx's own certificate (:func:`gtvcvx.testing.certify`, which
builds a dual-feasible flow from ``W``), exactly like the fast core's.
"""

from __future__ import annotations

import gc
import math
import os
import threading
import time
import tracemalloc
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..problem import GTVProblem
from ..results import Status

__all__ = ["compare", "run_comparison", "Comparison", "select_solvers", "problem_size", "truth_metrics",
           "MemoryMeter", "DEFAULT_SOLVERS", "REFERENCE_SIZE_LIMITS", "REFERENCE_TIME_LIMIT", "SKIPPED",
           "cluster_module"]

#: Solvers compared by default: the fast core and the two CVXPY references.
DEFAULT_SOLVERS = ("fast", "CLARABEL", "SCS")

#: Largest :func:`problem_size` on which a CVXPY reference runs unless asked for explicitly.
#: Measured on this project's 2-core machine: CLARABEL takes about 1 s at size 1e3-1e4 and
#: minutes (and gigabytes) at the paper's Table I size (5.2e5); SCS at 1e-7 accuracy is slower
#: still on large, ill-conditioned instances.
REFERENCE_SIZE_LIMITS = {"CLARABEL": 100_000, "SCS": 50_000}

#: Time limit (seconds) given to CVXPY references in reports unless the spec sets one.
REFERENCE_TIME_LIMIT = 300.0

#: Status of a row whose solver was not run (with the reason in ``message``).
SKIPPED = "skipped"

def cluster_module():
    """:mod:`gtvcvx.clustering` if it is available (it provides ``cluster_labels``), else None."""
    try:
        from .. import clustering
    except ImportError:
        return None
    return clustering if hasattr(clustering, "cluster_labels") else None


# ---------------------------------------------------------------------------------------
# sizes and solver selection
# ---------------------------------------------------------------------------------------
def problem_size(problem) -> int:
    """What a CVXPY statement of ``problem`` has to carry: ``n d + |E| d + samples``.

    For an RKHS problem: ``samples x atoms`` (the kernel matrix entries) plus ``samples``.
    """
    if isinstance(problem, GTVProblem):
        loss = problem.loss
        samples = int(loss.counts.sum()) if hasattr(loss, "counts") else problem.n
        return int(problem.n * problem.d + problem.n_edges * problem.d + samples)
    K = getattr(problem, "K", None)
    n_samples = int(getattr(problem, "N", 0) or (K.shape[0] if K is not None else 0))
    if K is not None:
        return int(getattr(K, "nnz", np.prod(K.shape)) + n_samples)
    return n_samples


def _spec_problem(spec_or_problem):
    """(spec or None, problem) of a Spec / RKHS spec / GTVProblem."""
    if isinstance(spec_or_problem, GTVProblem):
        return None, spec_or_problem
    kind = getattr(spec_or_problem, "kind", None)
    if kind == "experiment":
        raise ValueError(f"{getattr(spec_or_problem, 'path', '')}: experiment specs are run, not compared "
                         "(use gtvcvx.report.run_experiment or `gtvcvx report`)")
    problem = getattr(spec_or_problem, "problem", None)
    if problem is None:
        raise TypeError("expected a gtvcvx Spec (kind 'gtv' or 'rkhs') or a GTVProblem, got "
                        f"{type(spec_or_problem).__name__}")
    return spec_or_problem, problem


def select_solvers(spec_or_problem, solvers=None, *, size_limits=None) -> list[tuple[str, str]]:
    """The solvers a report runs on a spec, as ``(solver, skip_reason)`` pairs (``""`` = run).

    Rule: with ``solvers`` given explicitly every one of them runs. Otherwise the default
    :data:`DEFAULT_SOLVERS` run, except a CVXPY reference on an instance whose
    :func:`problem_size` exceeds its limit in ``size_limits`` (default
    :data:`REFERENCE_SIZE_LIMITS`), which is skipped with the reason recorded in its row.
    The fast core always runs.
    """
    from ..runner import normalize_solver_name

    _, problem = _spec_problem(spec_or_problem)
    if solvers is not None:
        return [(normalize_solver_name(s), "") for s in solvers]
    limits = dict(REFERENCE_SIZE_LIMITS if size_limits is None else size_limits)
    size = problem_size(problem)
    out = []
    for solver in DEFAULT_SOLVERS:
        limit = limits.get(solver)
        if solver != "fast" and limit is not None and size > limit:
            out.append((solver, f"skipped: instance size {size:,} (n d + |E| d + samples) is above the "
                                f"{solver} reference limit {limit:,}; ask for it with --solvers"))
        else:
            out.append((solver, ""))
    return out


# ---------------------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------------------
_LIBC = []


def release_free_memory() -> None:
    """Collect garbage and return freed heap memory to the OS (glibc ``malloc_trim``), so that
    the resident set size afterwards reflects live memory only."""
    gc.collect()
    if not _LIBC:
        try:
            import ctypes

            _LIBC.append(ctypes.CDLL("libc.so.6"))
        except (OSError, AttributeError):
            _LIBC.append(None)
    libc = _LIBC[0]
    if libc is not None:
        try:
            libc.malloc_trim(0)
        except AttributeError:  # not glibc
            pass


def _rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class MemoryMeter:
    """Peak memory of a block of code, in MiB (``.peak_mb`` after the block).

    ``method="rss"`` (default on Linux): the resident set size sampled every 5 ms from
    ``/proc/self/statm`` in a background thread, peak minus the value before the block. Before
    the block, freed memory is handed back to the OS (``gc.collect`` and glibc's
    ``malloc_trim``) so that allocations of the block show up as growth. It sees native
    allocations of compiled backends (Clarabel, SCS); it may miss peaks shorter than the
    sampling interval and memory reused from allocator caches that could not be trimmed, so
    it is a lower bound. ``method="tracemalloc"``: the peak of Python's allocation
    tracer (NumPy arrays included, native backend allocations not), with its overhead on
    Python-heavy code such as CVXPY's compilation. ``None`` measures nothing.
    """

    COLUMNS = {"rss": "peak_rss_delta_mb", "tracemalloc": "peak_traced_mb"}

    def __init__(self, method: str | None = "rss", interval: float = 0.005):
        if method not in (None, "rss", "tracemalloc"):
            raise ValueError(f"memory must be 'rss', 'tracemalloc' or None, got {method!r}")
        if method == "rss" and _rss_bytes() is None:
            method = "tracemalloc"  # no /proc on this platform
        self.method = method
        self.interval = interval
        self.peak_mb = float("nan")
        self._stop = threading.Event()
        self._thread = None
        self._peak = 0
        self._base = 0
        self._was_tracing = False

    @property
    def column(self) -> str | None:
        return self.COLUMNS.get(self.method)

    def _sample(self):
        while not self._stop.wait(self.interval):
            value = _rss_bytes()
            if value is not None and value > self._peak:
                self._peak = value

    def __enter__(self):
        if self.method == "rss":
            release_free_memory()
            self._base = self._peak = _rss_bytes() or 0
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        elif self.method == "tracemalloc":
            self._was_tracing = tracemalloc.is_tracing()
            if not self._was_tracing:
                tracemalloc.start()
            tracemalloc.reset_peak()
            self._base = tracemalloc.get_traced_memory()[0]
        return self

    def __exit__(self, *exc):
        if self.method == "rss":
            self._stop.set()
            self._thread.join()
            last = _rss_bytes() or 0
            self.peak_mb = max(self._peak, last) - self._base
            self.peak_mb = max(self.peak_mb, 0) / 2**20
        elif self.method == "tracemalloc":
            peak = tracemalloc.get_traced_memory()[1]
            if not self._was_tracing:
                tracemalloc.stop()
            self.peak_mb = max(peak - self._base, 0) / 2**20
        return False


# ---------------------------------------------------------------------------------------
# accuracy against ground truth
# ---------------------------------------------------------------------------------------
def _train_accuracy(problem: GTVProblem, W) -> float:
    loss = problem.loss
    if loss.name != "logistic" or loss.X_all.shape[0] == 0:
        return float("nan")
    scores = np.einsum("kd,kd->k", loss.X_all, np.asarray(W)[loss.node_of_sample])
    return float(np.mean(np.where(scores >= 0, 1.0, -1.0) == loss.y_all))


def truth_metrics(spec, problem: GTVProblem, W, U=None) -> dict:
    """Accuracy of a GTV solution against the spec's ground truth, where it has one.

    * ``mse``: mean squared error of the local models against ``truth.W``;
    * ``ari``: adjusted Rand index of the clusters (:func:`gtvcvx.clustering.cluster_labels`)
      against ``truth.labels`` for convex-clustering specs (loss ``squared_distance``); absent
      when :mod:`gtvcvx.clustering` is not available;
    * ``n_clusters``: the number of clusters found (same condition);
    * ``accuracy``: training accuracy of logistic local models, ``sign(x^T w_i) == y``.
    """
    from ..metrics import adjusted_rand_index, mse

    out = {}
    if W is None:
        return out
    truth = getattr(spec, "truth", None)
    if truth is not None and truth.W is not None and np.shape(truth.W) == np.shape(W):
        out["mse"] = mse(W, truth.W)
    if (truth is not None and truth.labels is not None and problem.loss.name == "squared_distance"):
        module = cluster_module()
        if module is not None:
            clusters = module.cluster_labels(problem, W, U)
            out["ari"] = adjusted_rand_index(truth.labels, clusters.labels)
            out["n_clusters"] = int(clusters.n_clusters)
    if problem.loss.name == "logistic":
        out["accuracy"] = _train_accuracy(problem, W)
    return out


# ---------------------------------------------------------------------------------------
# comparison
# ---------------------------------------------------------------------------------------
@dataclass
class Comparison:
    """What :func:`run_comparison` produced.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per solver (see :func:`compare` for the columns).
    results : dict
        Solver name -> result object (``GTVResult`` / ``RKHSResult``) for the solvers that ran.
    certificates : dict
        Solver name -> :class:`~gtvcvx.solvers.certificate.Certificate` (GTV problems).
    reference : str or None
        The row the errors are measured against (the smallest certified relative gap).
    memory : str or None
        How peak memory was measured (``"rss"``, ``"tracemalloc"`` or None).
    """

    table: pd.DataFrame
    results: dict = field(default_factory=dict)
    certificates: dict = field(default_factory=dict)
    reference: str | None = None
    memory: str | None = None


_BASE_COLUMNS = ["solver", "status", "primal", "dual", "gap", "rel_gap", "objective_error", "solution_error",
                 "reference"]
_TAIL_COLUMNS = ["value", "setup_time", "solve_time", "certify_time", "wall_time", "iterations"]
_USABLE = (Status.OPTIMAL, Status.INACCURATE, Status.MAX_ITER, Status.TIME_LIMIT)


def _solve_options(spec, solver, time_limit):
    options = dict(getattr(spec, "solve_options", {}) or {}) if spec is not None else {}
    options.pop("solver", None)
    if solver != "fast":
        options.pop("tol", None)
        options.setdefault("time_limit", time_limit if time_limit is not None else REFERENCE_TIME_LIMIT)
    elif time_limit is not None:
        options.setdefault("time_limit", time_limit)
    return options


def _run_gtv(problem, spec, solver, memory, time_limit, fast_options):
    from ..runner import run_solver
    from ..testing._certify import certify

    options = _solve_options(spec, solver, time_limit)
    if solver == "fast":
        options.update(fast_options)
    meter = MemoryMeter(memory)
    wall0 = time.perf_counter()
    with meter:
        result = run_solver(problem, solver, **options)
    wall = time.perf_counter() - wall0
    row = {"solver": result.solver, "status": str(result.status)}
    cert = None
    c0 = time.perf_counter()
    if result.W is not None and np.isfinite(result.W).all():
        cert = certify(problem, result.W, result.U)
        row.update(primal=cert.primal, dual=cert.dual, gap=cert.gap, rel_gap=cert.rel_gap)
    else:
        row.update(primal=float("nan"), dual=float("nan"), gap=float("nan"), rel_gap=float("nan"))
    certify_time = time.perf_counter() - c0
    row.update(setup_time=result.setup_time, solve_time=result.solve_time, certify_time=certify_time,
               wall_time=wall, iterations=result.iterations, value=result.value)
    if meter.column:
        row[meter.column] = meter.peak_mb
    if spec is not None and result.W is not None:
        row.update(truth_metrics(spec, problem, result.W, cert.U if cert is not None else None))
    row["message"] = result.message
    return row, result, cert


def _run_rkhs(spec, solver, memory):
    from ..rkhs import run_rkhs_spec

    meter = MemoryMeter(memory)
    wall0 = time.perf_counter()
    with meter:
        result = run_rkhs_spec(spec, solver=solver)
    wall = time.perf_counter() - wall0
    row = dict(result.to_row())
    row["status"] = str(result.status)
    row.setdefault("message", "")
    row["wall_time"] = wall
    row["certify_time"] = 0.0
    if meter.column:
        row[meter.column] = meter.peak_mb
    return row, result, None


def _failure_row(solver, status, message):
    return {"solver": solver, "status": str(status), "primal": float("nan"), "dual": float("nan"),
            "gap": float("nan"), "rel_gap": float("nan"), "message": message}


def _solution_of(result):
    for name in ("W", "alpha_envelope"):
        value = getattr(result, name, None)
        if value is not None:
            return np.asarray(value, dtype=float)
    return None


def run_comparison(spec_or_problem, solvers=DEFAULT_SOLVERS, *, skip=None, memory: str | None = "rss",
                   time_limit: float | None = None, progress=None, fast_options=None) -> Comparison:
    """Run ``solvers`` on a spec or problem; see :func:`compare` for the table.

    Parameters
    ----------
    skip : dict, optional
        Solver -> reason: rows with status ``"skipped"`` instead of a run (see :func:`select_solvers`).
    progress : gtvcvx.progress.Progress, optional
        Told which solver runs (``start``) and when it finished (``advance``).
    fast_options : dict, optional
        Extra keyword arguments of :func:`gtvcvx.solve` (e.g. ``check_every``).
    """
    from ..runner import normalize_solver_name

    spec, problem = _spec_problem(spec_or_problem)
    is_rkhs = getattr(spec, "kind", "gtv") == "rkhs"
    skip = {normalize_solver_name(k): v for k, v in (skip or {}).items()}
    fast_options = dict(fast_options or {})
    names = [normalize_solver_name(s) for s in solvers]
    names += [s for s in skip if s not in names]
    rows, results, certificates = [], {}, {}
    memory_method = MemoryMeter(memory).method
    label = getattr(spec, "name", None) or "problem"
    for solver in names:
        if solver in skip and skip[solver]:
            rows.append(_failure_row(solver, SKIPPED, skip[solver]))
            continue
        if progress is not None:
            progress.start(f"{label}: {solver}")
        try:
            if solver != "fast":
                from ..reference import installed_backends

                if solver not in installed_backends():
                    rows.append(_failure_row(solver, Status.SOLVER_ERROR,
                                             f"backend {solver} is not installed "
                                             f"(installed: {', '.join(installed_backends())})"))
                    continue
            if is_rkhs:
                row, result, cert = _run_rkhs(spec, solver, memory)
            else:
                row, result, cert = _run_gtv(problem, spec, solver, memory, time_limit, fast_options)
            results[solver] = result
            if cert is not None:
                certificates[solver] = cert
            rows.append(row)
        except Exception as exc:  # noqa: BLE001 - a failing solver is a row, never an exception
            rows.append(_failure_row(solver, Status.SOLVER_ERROR, f"{type(exc).__name__}: {exc}"))
        finally:
            if progress is not None:
                progress.advance()

    table = pd.DataFrame(rows)
    for col in _BASE_COLUMNS + _TAIL_COLUMNS + ["message"]:
        if col not in table.columns:
            table[col] = np.nan if col not in ("message", "solver", "status") else ""
    # reference: the smallest certified relative gap among rows with a solution
    reference = None
    usable = [i for i, r in enumerate(rows)
              if r["status"] in {str(s) for s in _USABLE} and np.isfinite(r.get("rel_gap", np.nan))]
    if usable:
        i_ref = min(usable, key=lambda i: (rows[i]["rel_gap"], i))
        reference = rows[i_ref]["solver"]
        value_key = "dual" if is_rkhs else "primal"  # RKHS: the dual is the convex problem solved
        p_ref = rows[i_ref][value_key]
        x_ref = _solution_of(results.get(reference))
        obj_err, sol_err = [], []
        for r in rows:
            p = r.get(value_key, np.nan)
            obj_err.append(abs(p - p_ref) / max(1.0, abs(p_ref)) if np.isfinite(p) else np.nan)
            x = _solution_of(results.get(r["solver"]))
            if x is not None and x_ref is not None and x.shape == x_ref.shape:
                sol_err.append(float(np.linalg.norm(x - x_ref) / max(1.0, np.linalg.norm(x_ref))))
            else:
                sol_err.append(np.nan)
        table["objective_error"] = obj_err
        table["solution_error"] = sol_err
    table["reference"] = table["solver"] == reference
    table["message"] = table["message"].fillna("").astype(str)
    memory_columns = [c for c in MemoryMeter.COLUMNS.values() if c in table.columns]
    fixed = _BASE_COLUMNS + _TAIL_COLUMNS + memory_columns + ["message"]
    extra = [c for c in table.columns if c not in fixed]
    table = table[_BASE_COLUMNS + extra + _TAIL_COLUMNS + memory_columns + ["message"]]
    table.attrs["reference"] = reference
    table.attrs["memory"] = memory_method
    return Comparison(table=table, results=results, certificates=certificates, reference=reference,
                      memory=memory_method)


def compare(spec_or_problem, solvers=DEFAULT_SOLVERS, **kwargs) -> pd.DataFrame:
    """Solve a spec or problem with several solvers and compare them, one row per solver.

    Parameters
    ----------
    spec_or_problem : Spec, RKHS spec or GTVProblem
        A ``kind = "gtv"`` spec (its solve options and ground truth are used), an RKHS spec
        (run through :func:`gtvcvx.rkhs.run_rkhs_spec`) or a bare problem. Experiment specs
        are not compared (ValueError): run them with :func:`gtvcvx.report.run_experiment`.
    solvers : sequence of str
        ``"fast"`` and CVXPY backends. A backend that fails or is not installed gives a row
        with its status (``solver_error``) and a message, never an exception.
    **kwargs
        ``skip``, ``memory`` (``"rss"`` default, ``"tracemalloc"``, None), ``time_limit``,
        ``progress``, ``fast_options``: see :func:`run_comparison`.

    Returns
    -------
    pandas.DataFrame
        Columns ``solver, status, primal, dual, gap, rel_gap`` (certified by gtvcvx for every
        solver: ``dual`` is a lower bound on the optimum from a feasible flow),
        ``objective_error = |P - P_ref| / max(1, |P_ref|)`` and
        ``solution_error = ||W - W_ref|| / max(1, ||W_ref||)`` against the reference row (the
        smallest certified relative gap; ``reference`` is True on it), accuracy against ground
        truth where the spec has it (``mse``, ``ari``, ``n_clusters``, ``accuracy``),
        ``value`` (the backend's own objective), then ``setup_time, solve_time, certify_time,
        iterations`` (plus ``wall_time``), peak memory (``peak_rss_delta_mb`` or
        ``peak_traced_mb``, see :class:`MemoryMeter`) and ``message``. ``table.attrs`` holds
        ``reference`` and ``memory``. For RKHS specs the columns of
        :meth:`RKHSResult.to_row` (``accuracy`` is the test accuracy, ``n_kernels``,
        ``n_critical``) replace the GTV accuracy columns, ``objective_error`` compares dual
        values ``|D - D_ref| / max(1, |D_ref|)`` (the convex problem the solvers solve) and the
        solution compared is the feasible envelope-primal ``alpha``.
    """
    return run_comparison(spec_or_problem, solvers, **kwargs).table


def format_number(value, digits: int = 4) -> str:
    """Compact numbers for tables: ``nan`` -> "", floats with ``digits`` significant digits."""
    if value is None:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else ""
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return ""
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if value == int(value) and abs(value) < 1e6:
            return str(int(value))
        return f"{value:.{digits}g}"
    return str(value)
