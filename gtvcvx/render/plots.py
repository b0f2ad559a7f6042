"""Figures of a report: convergence of the certified gap, clusterpath, RKHS decision boundary.

Matplotlib is imported lazily with the non-interactive Agg backend; every figure is saved
atomically (a temporary file renamed into place).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["convergence_figure", "clusterpath_figure", "decision_boundary_figure", "save_figure"]

_DPI = 90


def _pyplot():
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "pdf", "svg", "ps", "cairo"):
        try:
            matplotlib.use("Agg", force=True)
        except Exception:  # noqa: BLE001 - keep whatever backend is active
            pass
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path) -> Path:
    """Save ``fig`` as PNG atomically and close it."""
    from ..io import atomic_write

    plt = _pyplot()
    path = Path(path)
    try:
        with atomic_write(path, "wb") as fh:
            fig.savefig(fh, format="png", dpi=_DPI, metadata={"Software": None})
    finally:
        plt.close(fig)
    return path


def _positive(values):
    arr = np.asarray(values, dtype=float)
    tiny = np.finfo(float).tiny
    return np.where(arr > 0, arr, tiny)


def convergence_figure(results: dict, path, title: str = "", finals: dict | None = None) -> Path | None:
    """Relative gap vs iteration and vs time for every solver that ran.

    ``results`` maps solver -> result; one with a ``history`` DataFrame (``iteration``, ``time``,
    ``rel_gap``) is drawn as a curve. ``finals`` maps solver -> ``(rel_gap, iterations, seconds)``
    of its certified answer: solvers without a history (CVXPY backends) are drawn as one marker
    there. Returns None when there is nothing to draw.
    """
    curves = {}
    for solver, result in results.items():
        hist = getattr(result, "history", None)
        if hist is None or len(hist) == 0 or "rel_gap" not in getattr(hist, "columns", ()):
            continue
        curves[solver] = hist
    points = {solver: final for solver, final in (finals or {}).items()
              if solver not in curves and np.isfinite(final[0]) and final[0] > 0}
    if not curves and not points:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(8.0, 3.0), constrained_layout=True)
    for solver, hist in curves.items():
        gap = _positive(hist["rel_gap"])
        if "iteration" in hist.columns:
            axes[0].semilogy(hist["iteration"], gap, marker=".", label=solver)
        if "time" in hist.columns:
            axes[1].semilogy(hist["time"], gap, marker=".", label=solver)
    for k, (solver, (rel_gap, iterations, seconds)) in enumerate(points.items()):
        style = {"marker": "*D^sv"[k % 5], "ms": 9, "ls": "none", "color": f"C{len(curves) + k}",
                 "label": f"{solver} (final answer, certified by gtvcvx)"}
        if iterations is not None and np.isfinite(iterations):
            axes[0].semilogy([iterations], [rel_gap], **style)
        axes[1].semilogy([seconds], [rel_gap], **style)
    axes[0].set_xlabel("iteration")
    axes[1].set_xlabel("time [s]")
    for ax in axes:
        ax.set_ylabel("certified relative gap")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    if title:
        fig.suptitle(title, fontsize="medium")
    return save_figure(fig, path)


def clusterpath_figure(problem, path, title: str = "", *, labels=None, n_lams: int = 16) -> Path | None:
    """The convex-clustering path over ``lam`` on the problem's graph and penalty (via
    :mod:`gtvcvx.clustering`), colored by ``labels`` when given."""
    from ..clustering import clustering_path, plot_clusterpath

    cluster_path = clustering_path(problem.loss.points, graph=problem.graph, penalty=problem.penalty, n_lams=n_lams)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(4.5, 4.0), constrained_layout=True)
    kwargs = {"color_by": labels} if labels is not None else {}
    plot_clusterpath(cluster_path, ax=ax, **kwargs)
    if title:
        ax.set_title(title, fontsize="medium")
    return save_figure(fig, path)


def decision_boundary_figure(spec, result, path, title: str = "") -> Path | None:
    """The RKHS classifier's decision boundary for 2-D data (via :mod:`gtvcvx.rkhs`)."""
    from ..rkhs import plot_decision_boundary

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(4.5, 4.0), constrained_layout=True)
    try:
        plot_decision_boundary(spec, result, ax)
    except Exception:
        plt.close(fig)
        raise
    if title:
        ax.set_title(title, fontsize="medium")
    return save_figure(fig, path)
