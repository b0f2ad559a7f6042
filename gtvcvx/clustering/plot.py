"""Clusterpath and cluster-tree figures (matplotlib, safe with the Agg backend)."""

from __future__ import annotations

import numpy as np

__all__ = ["plot_clusterpath", "plot_cluster_tree", "projection_2d"]


def projection_2d(points: np.ndarray):
    """``(project, axis_names)``: coordinates 0 and 1 for 2-D data, else the first two principal
    axes of ``points``; ``project`` maps (..., d) arrays to (..., 2)."""
    points = np.asarray(points, dtype=float)
    d = points.shape[1]
    if d == 1:
        return (lambda Z: np.concatenate([Z, np.zeros(Z.shape[:-1] + (1,))], axis=-1)), ("x1", "")
    if d == 2:
        return (lambda Z: Z), ("x1", "x2")
    center = points.mean(axis=0)
    _, _, Vt = np.linalg.svd(points - center, full_matrices=False)
    basis = Vt[:2].T
    return (lambda Z: (Z - center) @ basis), ("PC 1", "PC 2")


def _new_axes(ax, figsize=(6, 5)):
    if ax is not None:
        return ax
    from matplotlib.figure import Figure  # no pyplot: works under any backend, including Agg

    fig = Figure(figsize=figsize)
    return fig.add_subplot(1, 1, 1)


def _color_labels(path, color_by):
    if color_by is None:
        counts = path.n_clusters
        # the last level with more than one cluster (the final split), else the first level
        many = np.flatnonzero(counts > 1)
        return path.results[int(many[-1]) if many.size else 0].labels
    labels = np.asarray(color_by)
    if labels.shape != (path.points.shape[0],):
        raise ValueError(f"color_by must have one label per point ({path.points.shape[0]}), got shape {labels.shape}")
    return labels


def plot_clusterpath(path, ax=None, *, color_by=None, show_points: bool = True, linewidth: float = 0.8):
    """Clusterpath: every point's center traced from ``lam`` small (the point) to large (fused).

    Parameters
    ----------
    path : ClusteringPath
    ax : matplotlib Axes, optional
        Default: a new figure (``matplotlib.figure.Figure``, no pyplot state, Agg-safe).
    color_by : array_like (n,), optional
        Labels that color the traces (e.g. true classes); default the clusters at the last
        lam with more than one cluster.
    show_points : bool
        Draw the data points.

    Returns
    -------
    matplotlib Axes

    Notes
    -----
    2-D data are drawn as is; higher-dimensional data (and centers) are projected on the first
    two principal axes of the points (Hocking et al. 2011 draw the same picture). When the
    path was computed on standardized points, the picture is drawn in the standardized
    coordinates too (the space where the fusion penalty acts).
    """
    from matplotlib.collections import LineCollection
    from matplotlib import colormaps

    ax = _new_axes(ax)
    std = path.standardization
    points, centers = (std.forward(path.points), std.forward(path.centers)) if std.enabled else (path.points, path.centers)
    project, names = projection_2d(points)
    if std.enabled:
        names = tuple(f"{name} (standardized)" if name else name for name in names)
    C = project(centers)  # (L, n, 2)
    P = project(points)
    traces = np.concatenate([P[None], C], axis=0)  # start at the points themselves
    labels = _color_labels(path, color_by)
    _, codes = np.unique(labels, return_inverse=True)
    cmap = colormaps["tab10" if codes.max(initial=0) < 10 else "tab20"]
    colors = cmap(codes % cmap.N)
    seg = np.stack([traces[:-1], traces[1:]], axis=2)  # (L, n, 2 points, 2 coords)
    seg = seg.transpose(1, 0, 2, 3).reshape(-1, 2, 2)
    line_colors = np.repeat(colors, traces.shape[0] - 1, axis=0)
    ax.add_collection(LineCollection(seg, colors=line_colors, linewidths=linewidth, alpha=0.8))
    if show_points:
        ax.scatter(P[:, 0], P[:, 1], s=10, c=colors, edgecolors="none", zorder=3)
    final = C[-1]
    ax.scatter(final[:, 0], final[:, 1], s=40, marker="x", c="k", zorder=4, linewidths=1.0,
               label=f"centroids at the largest lam ({path.lams[-1]:.3g})")
    if show_points:
        ax.scatter([], [], s=10, c=[colors[0]], label="points (colour: " + (
            "given labels" if color_by is not None else "clusters at the last split") + ")")
    ax.plot([], [], color=colors[0], lw=linewidth, label="paths of the centroids as lam grows")
    ax.legend(fontsize=7, loc="best", framealpha=0.8)
    ax.autoscale_view()
    ax.set_xlabel(names[0])
    ax.set_ylabel(names[1])
    ax.set_title(f"Clusterpath ({len(path)} values of lam)")
    return ax


def plot_cluster_tree(path, ax=None, *, color_by=None):
    """Dendrogram of the path: clusters as vertical lines joined where they merge.

    Points are ordered so that every cluster of a nested path is a contiguous block (sorted by
    the labels at the largest lam first, then at smaller ones). A cluster at ``lams[k]`` is a
    vertical line at the mean position of its points, from ``lams[k]`` up to ``lams[k + 1]``,
    then a horizontal line to the cluster that contains it at ``lams[k + 1]`` (for a path with
    splits, the cluster of its first point). The number of clusters is drawn on the top axis.

    Parameters
    ----------
    path : ClusteringPath
    ax : matplotlib Axes, optional
    color_by : array_like (n,), optional
        Labels shown as coloured ticks under the leaves (e.g. the true classes).

    Returns
    -------
    matplotlib Axes
    """
    from matplotlib import colormaps
    from matplotlib.collections import LineCollection

    ax = _new_axes(ax, figsize=(7, 4.5))
    L = path.labels  # (n_lams, n)
    n = L.shape[1]
    order = np.lexsort(L)  # primary key: the coarsest level (last row, largest lam)
    Lo = L[:, order]
    lams = np.asarray(path.lams, dtype=float)
    y = lams if lams[0] > 0 else np.maximum(lams, lams[lams > 0].min(initial=1.0) * 1e-3)
    ybottom = y[0] / 1.5
    pos = np.arange(n, dtype=float)
    segments = []
    xs = [np.bincount(Lo[k], weights=pos) / np.bincount(Lo[k]) for k in range(Lo.shape[0])]
    # leaves: every cluster of the first lam from the bottom of the axis
    segments.append(np.stack([np.column_stack([xs[0], np.full(xs[0].size, ybottom)]),
                              np.column_stack([xs[0], np.full(xs[0].size, y[0])])], axis=1))
    for k in range(Lo.shape[0] - 1):  # one pass per lam of the grid (not per point)
        _, first = np.unique(Lo[k], return_index=True)
        parent = Lo[k + 1][first]
        x, xp = xs[k], xs[k + 1][parent]
        up = np.stack([np.column_stack([x, np.full(x.size, y[k])]),
                       np.column_stack([x, np.full(x.size, y[k + 1])])], axis=1)
        join = np.stack([np.column_stack([x, np.full(x.size, y[k + 1])]),
                         np.column_stack([xp, np.full(x.size, y[k + 1])])], axis=1)
        segments += [up, join]
    top = xs[-1]
    segments.append(np.stack([np.column_stack([top, np.full(top.size, y[-1])]),
                              np.column_stack([top, np.full(top.size, y[-1] * 1.5)])], axis=1))
    ax.add_collection(LineCollection(np.concatenate(segments), colors="tab:blue", linewidths=0.8))
    if color_by is not None:
        labels = np.asarray(color_by)
        if labels.shape != (n,):
            raise ValueError(f"color_by must have one label per point ({n}), got shape {labels.shape}")
        _, codes = np.unique(labels[order], return_inverse=True)
        cmap = colormaps["tab10"]
        ax.scatter(pos, np.full(n, ybottom), c=cmap(codes % cmap.N), marker="|", s=60, zorder=3)
    ax.set_xlim(-1, n)
    ax.set_ylim(ybottom / 1.2, y[-1] * 1.5)
    ax.set_yscale("log")
    ax.set_xlabel("points (tree order)")
    ax.set_ylabel("lam")
    ax2 = ax.twiny()
    ax2.plot(path.n_clusters, y, color="tab:red", lw=1.0, marker=".", ms=3)
    ax2.set_xscale("log")
    ax2.set_xlabel("number of clusters", color="tab:red")
    ax2.tick_params(axis="x", colors="tab:red")
    return ax
