"""Run a ``kind = "rkhs"`` spec with any solver, and draw 2-D decision boundaries."""

from __future__ import annotations

import numpy as np

from .solver import _normalize_solver, solve_problem
from .result import RKHSResult
from .spec import RKHSSpec

__all__ = ["run_rkhs_spec", "plot_decision_boundary", "prediction_coefficients"]


def prediction_coefficients(result: RKHSResult) -> np.ndarray | None:
    """The coefficients a classifier predicts with: the feasible envelope point, else the L0 recovery."""
    return result.alpha_envelope if result.alpha_envelope is not None else result.alpha


def run_rkhs_spec(spec: RKHSSpec, solver: str = "fast", *, tol: float | None = None) -> RKHSResult:
    """Solve an rkhs spec and evaluate its test accuracy.

    Parameters
    ----------
    spec : RKHSSpec
    solver : str
        ``"fast"`` or a CVXPY backend (``"CLARABEL"``, ``"SCS"``); the fast core uses the
        spec's ``[solve] method``; CVXPY backends get ``[solve.<BACKEND>]`` options.
    tol : float, optional
        Tolerance for this run, whatever the solver (mapped to a backend's own tolerances); by
        default the spec's ``[solve] tol`` for the fast core and the backend's defaults otherwise.

    Returns
    -------
    RKHSResult
        With ``accuracy`` on the spec's test set (training accuracy when there is none; then
        ``info["accuracy_on"] == "train"``).
    """
    if not isinstance(spec, RKHSSpec):
        raise TypeError(f"spec must be an RKHSSpec (from gtvcvx.load_spec), got {type(spec).__name__}")
    solver = _normalize_solver(solver)
    opts = spec.solve_options
    backend = dict(opts.get("backend_options", {}).get(solver, {})) if solver != "fast" else None
    if tol is None and solver == "fast":
        tol = opts.get("tol")  # None: solve_problem's default
    result = solve_problem(spec.problem, solver, method=opts.get("method", "ssnal"), tol=tol,
                           max_iter=opts.get("max_iter"), time_limit=opts.get("time_limit"),
                           solver_options=backend)
    coef = prediction_coefficients(result)
    if coef is not None and result.multipliers is not None:
        if spec.has_test:
            X, y, on = spec.X_test, spec.y_test, "test"
        else:
            X, y, on = spec.X, spec.y, "train"
        f = spec.dictionary.evaluate(X, coef)
        result.accuracy = float(np.mean(np.where(f > 0, 1.0, -1.0) == y))
        result.info["accuracy_on"] = on
    return result


def plot_decision_boundary(spec: RKHSSpec, result: RKHSResult, ax=None, *, resolution: int = 200,
                           coef: str = "auto", show_kernels: bool = True, title: str | None = None):
    """Draw the decision regions, the boundary ``f = 0``, the samples, the critical samples
    (circled) and the centers of the kernels in use (crosses, size ~ width) for 2-D data.

    Works with any matplotlib backend (no ``pyplot.show``); returns the axes.
    """
    if ax is None:  # a Figure without pyplot: no global backend state is touched
        from matplotlib.figure import Figure

        ax = Figure(figsize=(5, 5)).subplots()
    if spec.X.shape[1] != 2:
        raise ValueError(f"plot_decision_boundary needs 2-D data, the spec has {spec.X.shape[1]} features")
    if coef == "auto":
        alpha = prediction_coefficients(result)
    elif coef in ("envelope", "l0"):
        alpha = result.coefficients(coef)
    else:
        raise ValueError(f"coef must be 'auto', 'envelope' or 'l0', got {coef!r}")
    pts = spec.X if not spec.has_test else np.vstack([spec.X, spec.X_test])
    lo, hi = pts.min(0), pts.max(0)
    pad = 0.03 * (hi - lo)
    gx = np.linspace(lo[0] - pad[0], hi[0] + pad[0], resolution)
    gy = np.linspace(lo[1] - pad[1], hi[1] + pad[1], resolution)
    GX, GY = np.meshgrid(gx, gy)
    if alpha is not None:
        F = spec.dictionary.evaluate(np.column_stack([GX.ravel(), GY.ravel()]), alpha).reshape(GX.shape)
        ax.contourf(GX, GY, F > 0, levels=[-0.5, 0.5, 1.5], colors=["#f3d6d6", "#d6e4f3"], alpha=0.9)
        if F.min() < 0 < F.max():
            ax.contour(GX, GY, F, levels=[0.0], colors="k", linewidths=1.2)
    y = spec.y
    ax.scatter(spec.X[y < 0, 0], spec.X[y < 0, 1], s=8, c="#c0392b", label="class -1")
    ax.scatter(spec.X[y > 0, 0], spec.X[y > 0, 1], s=8, c="#2471a3", label="class +1")
    if result.multipliers is not None:
        crit = result.critical_samples()
        ax.scatter(spec.X[crit, 0], spec.X[crit, 1], s=40, facecolors="none", edgecolors="k", linewidths=0.8,
                   label=f"critical ({crit.size})")
    if show_kernels and alpha is not None and np.count_nonzero(alpha):
        used = np.flatnonzero(alpha)
        D = spec.dictionary
        w = D.widths[used]
        ax.scatter(D.centers[used, 0], D.centers[used, 1], marker="x", c="#1e8449",
                   s=12 + 30 * w / max(float(w.max()), 1e-12), linewidths=1.0, label=f"kernels ({used.size})")
    ax.set_xlim(gx[0], gx[-1])
    ax.set_ylim(gy[0], gy[-1])
    ax.set_aspect("equal", adjustable="box")
    ax.set_title(title if title is not None else f"{spec.name}: {result.solver}")
    ax.set_xlabel("feature 1")
    ax.set_ylabel("feature 2")
    if alpha is not None:  # the shaded regions and the line are marks too: say what they are
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch

        extra = [Patch(color="#f3d6d6", label="predicted -1"), Patch(color="#d6e4f3", label="predicted +1"),
                 Line2D([], [], color="k", lw=1.2, label="boundary f = 0")]
    else:
        extra = []
    handles, _ = ax.get_legend_handles_labels()
    # below the axes, so the legend never covers data
    ax.legend(handles=handles + extra, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, fontsize=7,
              frameon=False)
    return ax
