"""Measure solvers fairly: one fresh process per run, wall time and peak memory, ratios.

Every run happens in a new ``spawn``-ed Python process so that its resident set size belongs to
that run alone, including memory allocated by compiled backends (Clarabel, SCS) that Python's
allocator tracking cannot see. The instance is built inside the child by an importable builder
function, and only the solve is timed; the peak memory is that of the solve too: on Linux the
kernel's high-water mark is reset after the build (:func:`gtvcvx.memory.reset_peak_rss`), so a
builder's temporaries do not count (a 10^7-edge SBM instance peaked at 13.5 GiB while built and
held 4.1 GiB). Elsewhere the process's peak since its start (``ru_maxrss``) is reported.
"""

from __future__ import annotations

import multiprocessing as mp
import resource
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import _accurate, _graph_kernels
from ..memory import peak_rss_mb, release_free_memory, reset_peak_rss, rss_mb
from ..losses import _compiled
from ..penalties import _compiled as _penalty_kernels
from ..solvers import _edge_kernels, _node_kernels

__all__ = ["Run", "run_isolated", "median_run", "ratio", "best_peer", "PEER_MATCH", "write_bench_report", "publish", "format_table",
           "bytes_bound", "stream_bandwidth", "warm_compiled_kernels"]


@dataclass
class Run:
    """One measured run.

    Attributes
    ----------
    label : str
    ok : bool
        False when the run raised (``error`` holds the message) or was killed.
    wall : float
        Seconds of the measured call (setup + solve as the callee defines them).
    peak_mb : float
        Peak resident set size during the measured call, MiB: the imports and the instance
        included, the builder's freed temporaries not (see the module docstring).
    baseline_mb : float
        Resident set size when the measured call starts (imports + instance), MiB.
    data : dict
        What the callee returned (times split, status, values, ...).
    """

    label: str
    ok: bool
    wall: float = float("nan")
    peak_mb: float = float("nan")
    baseline_mb: float = float("nan")
    data: dict = field(default_factory=dict)
    error: str = ""

    @property
    def extra_mb(self) -> float:
        """Peak memory added by the measured call (MiB)."""
        return self.peak_mb - self.baseline_mb


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux reports KiB


def _child(queue, builder, builder_kwargs, call, call_kwargs):
    try:
        instance = builder(**builder_kwargs)
        release_free_memory()  # the build's freed temporaries back to the OS: the baseline is live memory
        windowed = reset_peak_rss()
        baseline = rss_mb() if windowed else _maxrss_mb()
        start = time.perf_counter()
        data = call(instance, **call_kwargs)
        wall = time.perf_counter() - start
        peak = peak_rss_mb() if windowed else _maxrss_mb()
        queue.put({"ok": True, "wall": wall, "peak_mb": peak, "baseline_mb": baseline, "data": data})
    except BaseException as exc:  # noqa: BLE001 - report every failure as a row
        queue.put({"ok": False, "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()})


def run_isolated(label: str, builder, builder_kwargs: dict, call, call_kwargs: dict | None = None,
                 timeout: float | None = None) -> Run:
    """Build an instance and run ``call(instance, **call_kwargs)`` in a fresh process.

    ``builder`` and ``call`` must be importable module-level functions; ``call`` returns a
    picklable dict. A crash, exception or timeout gives ``Run(ok=False)`` with the reason.
    """
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(queue, builder, builder_kwargs, call, call_kwargs or {}))
    proc.start()
    try:
        message = queue.get(timeout=timeout)
    except Exception:  # noqa: BLE001 - queue.Empty on timeout, or the child died
        proc.kill()
        proc.join()
        reason = "timed out" if proc.exitcode is None or proc.exitcode < 0 else f"exit code {proc.exitcode}"
        return Run(label, False, error=f"run {reason}" + (f" after {timeout:.0f} s" if timeout else ""))
    proc.join()
    if not message["ok"]:
        return Run(label, False, error=message["error"])
    return Run(label, True, message["wall"], message["peak_mb"], message["baseline_mb"], message["data"])


def measured(bar, label: str, builder, builder_kwargs: dict, call, call_kwargs: dict | None = None,
             timeout: float | None = None) -> Run:
    """:func:`run_isolated` as one step of a :class:`gtvcvx.progress.Progress` bar (its label shown,
    with the bar's heartbeat and estimate, while the run takes)."""
    bar.start(label)
    try:
        return run_isolated(label, builder, builder_kwargs, call, call_kwargs, timeout=timeout)
    finally:
        bar.advance()


def median_run(runs: list[Run]) -> Run:
    """The run of median wall time among repeated runs of one configuration (the lower middle of an even
    count), its ``data`` extended with ``runs`` and every run's ``walls``; the first failed run if any failed.

    Repeats in fresh processes, alternated with the other configurations, are how a shared machine's
    drift is kept out of a ratio: a single run of a sub-second solve moved by 30 % between runs here.
    """
    if not runs:
        raise ValueError("median_run needs at least one run")
    failed = [r for r in runs if not r.ok]
    if failed:
        return failed[0]
    ordered = sorted(runs, key=lambda r: r.wall)
    middle = ordered[(len(ordered) - 1) // 2]
    data = dict(middle.data, runs=len(runs), walls=[r.wall for r in runs])
    return Run(middle.label, True, middle.wall, middle.peak_mb, middle.baseline_mb, data)


def ratio(slow: float, fast: float) -> float:
    """``slow / fast`` (``nan`` if either is missing)."""
    try:
        return float(slow) / float(fast) if float(fast) > 0 else float("nan")
    except (TypeError, ValueError):
        return float("nan")


#: A peer's answer counts as the best-configured peer's when its objective is within this many times
#: gtvcvx's tolerance (relative, ``/ (1 + |best|)``) of the best objective any run found (:func:`best_peer`).
PEER_MATCH = 10.0


def best_peer(peers: dict, gtvcvx_primal: float | None, tol: float) -> tuple[str, float]:
    """``(label, seconds)`` of the fastest peer (``peers``: label -> ``(seconds, status, primal)``)
    whose status is optimal and whose objective is within :data:`PEER_MATCH` ``tol`` of the best
    any run found, gtvcvx's included (``("", nan)`` when none is)."""
    values = [p for _, _, p in peers.values()] + [gtvcvx_primal]
    finite = [float(v) for v in values if v is not None and np.isfinite(v)]
    if not finite:
        return "", float("nan")
    best = min(finite)
    fit = [(seconds, label) for label, (seconds, status, value) in peers.items()
           if status == "optimal" and value is not None and np.isfinite(value) and np.isfinite(seconds)
           and (value - best) / (1.0 + abs(best)) <= PEER_MATCH * tol]
    if not fit:
        return "", float("nan")
    seconds, label = min(fit)
    return label, seconds


def format_table(rows: list[dict], columns: list[str] | None = None, digits: int = 4) -> str:
    """A Markdown table from a list of dicts (:func:`gtvcvx.render.tables.markdown_table`)."""
    from ..render.tables import markdown_table

    return markdown_table(rows, columns, digits, nan="nan")


def write_bench_report(out_dir, target: str, markdown: str, rows: list[dict]) -> Path:
    """Write ``<out_dir>/bench/<target>.md`` and ``.csv``, then rebuild ``<out_dir>/bench/README.md``.

    ``markdown`` is one section starting with a ``## `` heading; ``README.md`` concatenates
    every target's section, so targets never overwrite each other. ``bench/`` is the one folder of
    a report directory that ``gtvcvx report`` does not write (benchmarks take longer than a report).
    """
    import pandas as pd

    from ..environment import environment_markdown
    from ..io import atomic_write_text

    out_dir = Path(out_dir)
    bench_dir = out_dir / "bench"
    bench_dir.mkdir(parents=True, exist_ok=True)
    section = bench_dir / f"{target}.md"
    atomic_write_text(section, markdown.rstrip() + "\n\n### Machine\n\n" + environment_markdown() + "\n")
    if rows:
        atomic_write_text(bench_dir / f"{target}.csv", pd.DataFrame(rows).to_csv(index=False))
    parts = ["# Benchmarks", "",
             "Generated by `gtvcvx bench TARGET --out reports`; each section below is one target, "
             "measured in one run against CVXPY + CLARABEL and CVXPY + SCS on the same instances.", ""]
    for path in sorted(p for p in bench_dir.glob("*.md") if p.name != "README.md"):
        parts += [path.read_text().rstrip(), ""]
    atomic_write_text(bench_dir / "README.md", "\n".join(parts))
    return section


def publish(out_dir, target: str, markdown: str, rows: list[dict]) -> int:
    """Print a target's section, write it (:func:`write_bench_report`) and return exit code 0."""
    print(markdown)
    path = write_bench_report(out_dir, target, markdown, rows)
    print(f"\nwritten: {path}")
    return 0


# ---------------------------------------------------------------------------------- bandwidth
def bytes_bound(n: int, n_edges: int, d: int, rank: int = 10) -> float:
    """Bytes one Halpern PDHG iteration must move: the flows ``U``, ``U+``, ``U0`` read and ``U``,
    ``U+`` written (``5 |E| d`` doubles), and about ``n d (r + 8)`` doubles of node arrays and
    loss factors (``W``, ``W+``, ``W0``, ``D^T U`` and its anchors, the step, ``Q``)."""
    return 8.0 * (5 * n_edges * d + n * d * (rank + 8))


def stream_bandwidth(n: int = 5_000_000, repeats: int = 60) -> float:
    """GB/s of ``c = a + b`` on float64 arrays far larger than the caches (one thread)."""
    a, b = np.random.default_rng(0).random((2, n))
    c = np.empty_like(a)
    np.add(a, b, out=c)
    start = time.perf_counter()
    for _ in range(repeats):
        np.add(a, b, out=c)
    return 3 * 8 * n * repeats / (time.perf_counter() - start) / 1e9


def compiled_kernels() -> dict[tuple[str, bool], object]:
    """The fast core's numba kernels by ``(name, threaded)``, serial and threaded builds, each
    loaded (compiled, or read from numba's on-disk cache) with the specializations its loader
    warms: the argument types a solve passes (read-only capacities, sample arrays and edge ends are
    types of their own), and the graph kernels (the k-NN pair list, components). The chain and tree
    solvers' kernels are not among them (loaded on first use)."""
    kernels = {}
    for parallel in (False, True):
        for loaded in (_edge_kernels._load(parallel), (_edge_kernels._load_fused(parallel),),
                       (_edge_kernels._load_laplacian(parallel),), _edge_kernels._load_terms(parallel),
                       _node_kernels._load(parallel), _compiled.load(parallel).values(),
                       _penalty_kernels.load(parallel).values(),
                       (_accurate._load_dot2(parallel), _accurate._load_node_sums(parallel))):
            for kernel in loaded:
                kernels[kernel.py_func.__name__.split("__")[0], parallel] = kernel
    for kernel in _graph_kernels.warmed():  # (the k-NN graph and the clusters' components)
        kernels[kernel.py_func.__name__.split("__")[0], bool(kernel.targetoptions.get("parallel"))] = kernel
    return kernels


def warm_compiled_kernels() -> float:
    """Compile the fast core's numba kernels (serial and threaded builds, :func:`compiled_kernels`)
    into numba's on-disk cache, or load them from it, so that no measured process pays the first
    compile; returns the seconds it took. The first compile after an install (or an edit of a
    kernel's source) is a one-time cost of about 10-20 s on this machine."""
    start = time.perf_counter()
    compiled_kernels()
    return time.perf_counter() - start
