"""The ``kind = "gtv"`` task: a GTV problem (and convex clustering) stated by a spec.

Measures every solver's answer with gtvcvx's own certificate (flows built from ``W`` for
CVXPY answers), and accuracy against the spec's ground truth where it has one: the local
models' mean squared error, the clusters' adjusted Rand index (losses with the
``separable_points`` trait, i.e. convex clustering) and the training accuracy of classifiers
(losses with the ``classifier`` trait).
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from ..capabilities import provides
from ..metrics import adjusted_rand_index, mse
from .. import runner
from ..solvers.certify import certify
from ..spec import CHECK_KEYS, SpecError, load_gtv_spec
from ._base import register_task
from ._problem import ProblemTask

__all__ = ["GTVTask", "truth_metrics", "training_accuracy"]


def training_accuracy(problem, W) -> float:
    """``mean(sign(x^T w_i) == y)`` over the samples of a classifier loss (``nan`` otherwise)."""
    loss = problem.loss
    if not provides(loss, "classifier") or loss.X_all.shape[0] == 0:
        return float("nan")
    scores = np.einsum("kd,kd->k", loss.X_all, np.asarray(W)[loss.node_of_sample])
    return float(np.mean(np.where(scores >= 0, 1.0, -1.0) == loss.y_all))


def truth_metrics(spec, problem, W, U=None) -> dict:
    """Accuracy of a GTV solution against the spec's ground truth, where it has one.

    * ``mse``: mean squared error of the local models against ``truth.W``;
    * ``ari``: adjusted Rand index of the clusters (:func:`gtvcvx.clustering.cluster_labels`)
      against ``truth.labels``, for convex-clustering problems (a loss with the
      ``separable_points`` trait);
    * ``n_clusters``: the number of clusters found (same condition);
    * ``accuracy``: training accuracy of classifier local models, ``sign(x^T w_i) == y``.
    """
    out = {}
    if W is None:
        return out
    truth = getattr(spec, "truth", None)
    if truth is not None and truth.W is not None and np.shape(truth.W) == np.shape(W):
        out["mse"] = mse(W, truth.W)
    if truth is not None and truth.labels is not None and provides(problem.loss, "separable_points"):
        from ..clustering import cluster_labels

        clusters = cluster_labels(problem, W, U)
        out["ari"] = adjusted_rand_index(truth.labels, clusters.labels)
        out["n_clusters"] = int(clusters.n_clusters)
    if provides(problem.loss, "classifier"):
        out["accuracy"] = training_accuracy(problem, W)
    return out


#: How :meth:`GTVTask.certified` certified a result (shown by ``gtvcvx solve``).
CERTIFIED_FROM_W = "by gtvcvx (flows built from W)"


class GTVTask(ProblemTask):
    """GTV minimization ``sum_i L_i(w_i) + lam sum_e A_e phi(w_i - w_j)`` from a spec."""

    kind = "gtv"
    description = "GTV minimization over a weighted graph (network Lasso, MOCHA, convex clustering)"
    check_keys = CHECK_KEYS

    def load(self, path, doc):
        return load_gtv_spec(path, doc)

    def solve(self, spec, solver: str = "fast", **options):
        return runner.run_solver(spec.problem, solver, **options)

    def measure(self, spec, result, *, from_primal: bool = False):
        problem = spec.problem
        row = {"solver": result.solver, "status": str(result.status)}
        cert = None
        c0 = time.perf_counter()
        if result.W is not None and np.isfinite(result.W).all():
            cert = certify(problem, result.W, None if from_primal else result.U)
            row.update(primal=cert.primal, dual=cert.dual, gap=cert.gap, rel_gap=cert.rel_gap)
        else:
            row.update(primal=float("nan"), dual=float("nan"), gap=float("nan"), rel_gap=float("nan"))
        row.update(setup_time=result.setup_time, solve_time=result.solve_time,
                   certify_time=time.perf_counter() - c0, iterations=result.iterations, value=result.value)
        if result.W is not None:
            row.update(truth_metrics(spec, problem, result.W, cert.U if cert is not None else None))
        row["message"] = result.message
        return row, cert

    def certified(self, spec, result):
        """A CVXPY answer carries no certified bound: certify its ``W`` as reports do (flows built
        from ``W``, :func:`gtvcvx.testing.certify`) and return a copy holding the bound."""
        if ("certified" in result.info or np.isfinite(result.dual) or result.W is None
                or not np.isfinite(result.W).all()):
            return result  # certified already (also when no finite bound exists), or nothing to certify
        cert = certify(spec.problem, result.W)
        return dataclasses.replace(result, U=cert.U, primal=cert.primal, dual=cert.dual, gap=cert.gap,
                                   rel_gap=cert.rel_gap, info={**result.info, "certified": CERTIFIED_FROM_W})

    def reference_run(self, spec, reference, cache=None):
        if cache is None:
            return super().reference_run(spec, reference)
        result = cache.get(spec, reference)
        row, _ = self.measure(spec, result, from_primal=True)
        return row, result

    def has_solution(self, result) -> bool:
        return result.W is not None

    def solution_of(self, result):
        W = getattr(result, "W", None)
        return None if W is None else np.asarray(W, dtype=float)

    def summarize(self, spec, result) -> dict:
        problem = spec.problem
        out = {"spec": spec.name, "path": str(spec.path), "n": problem.n, "n_edges": problem.n_edges,
               "d": problem.d, "loss": problem.loss.name, "penalty": problem.penalty.name, "lam": problem.lam}
        out.update(result.to_row())
        if spec.truth.W is not None and result.W is not None:
            out["mse"] = mse(result.W, spec.truth.W)
        return out

    def sizes(self, spec) -> dict:
        from .compare import problem_size

        p = spec.problem
        return {"n": p.n, "edges": p.n_edges, "d": p.d, "loss": p.loss.name, "penalty": p.penalty.name,
                "lam": p.lam, "size": problem_size(p)}

    def validate_checks(self, spec, checks: dict) -> None:
        super().validate_checks(spec, checks)
        truth = getattr(spec, "truth", None)
        loss = spec.problem.loss
        for key in checks:
            where = f"check.{key}"
            if key == "max_mse" and (truth is None or truth.W is None):
                raise SpecError(spec.path, where, "needs ground-truth local models (synthetic data or W_true in the "
                                                  "data file)")
            if key == "min_ari" and (truth is None or truth.labels is None):
                raise SpecError(spec.path, where, "needs ground-truth cluster labels (synthetic data or labels in "
                                                  "the data file)")
            if key == "min_accuracy" and not provides(loss, "classifier"):
                raise SpecError(spec.path, where, f"needs a classifier loss (e.g. 'logistic'), not loss '{loss.name}'")

    def figures(self, spec, rep, comparison, spec_dir):
        problem = spec.problem
        if not provides(problem.loss, "separable_points"):
            return []

        def clusterpath():
            from ..render import plots

            truth = getattr(spec, "truth", None)
            return plots.clusterpath_figure(problem, spec_dir / "clusterpath.png", title=f"{rep.name}: clusterpath",
                                            labels=None if truth is None else truth.labels)

        return [("clusterpath", clusterpath)]


register_task(GTVTask())
