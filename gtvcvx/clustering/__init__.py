"""Convex (sum-of-norms) clustering: certified centers, dual-backed clusters, lam_max and paths.

Convex clustering is GTV minimization with ``L_i(w) = ||w - a_i||^2`` and a norm penalty::

    from gtvcvx.clustering import convex_clustering, clustering_path, plot_clusterpath

    result = convex_clustering(points, lam=0.5, standardize=True)    # k-NN graph, Gaussian weights
    result.centers, result.labels, result.n_clusters, result.rel_gap  # certified
    path = clustering_path(points, standardize=True)                 # grid up to lam_max, warm starts
    plot_clusterpath(path)

* :func:`convex_clustering` -- one lam, fast core or the CVXPY reference (CLARABEL, SCS).
* :func:`cluster_labels` -- clusters of any ``(problem, W, U)`` from the dual flow (flow test
  with a margin derived from the certified gap, distance test otherwise).
* :func:`lam_max` -- the fusion threshold from the minimum-congestion flow problem, with a
  certified bracket.
* :func:`clustering_path`, :func:`plot_clusterpath`, :func:`plot_cluster_tree`.
"""

from ._prep import Standardization, clustering_graph
from .core import ClusteringResult, clustering_problem, convex_clustering, snap_to_clusters
from .labels import ClusterLabels, canonical_labels, cluster_labels
from .lammax import LamMax, fusion_divergence, lam_max
from .path import ClusteringPath, clustering_path, default_lams
from .plot import plot_cluster_tree, plot_clusterpath

__all__ = ["convex_clustering", "ClusteringResult", "clustering_problem", "clustering_graph", "Standardization",
           "snap_to_clusters",
           "cluster_labels", "ClusterLabels", "canonical_labels", "lam_max", "LamMax", "fusion_divergence",
           "clustering_path", "ClusteringPath", "default_lams", "plot_clusterpath", "plot_cluster_tree"]
