r"""Federated kernel-sparse classification: agents send only their critical samples.

Protocol (Peifer & Ribeiro): every agent solves the dual on its own data; the samples with a
positive multiplier (the *critical* samples, those whose margin constraints hold the local model
up) are sent to the server together with their multipliers; the server solves the dual on the
union of what it received, warm-started from the received multipliers, and returns the global
model. Nothing else leaves an agent.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .._validation import as_float_array
from ..results import RESULT_ROW_KEYS, Status, WrappedSolve
from .classifier import SparseKernelClassifier
from .solver import solve_problem
from .dictionary import Dictionary
from .problem import RKHSProblem, encode_labels
from .result import DEFAULT_CRITICAL_TOL, RKHSResult, critical_mask

__all__ = ["FederatedResult", "federated_fit"]


@dataclass
class FederatedResult(WrappedSolve):
    """Outcome of :func:`federated_fit`.

    A :class:`gtvcvx.SolveResult`: ``status``, ``primal``, ``dual``, ``gap``, ``rel_gap``, times and
    ``history`` are those of the server's solve (the global model); the agents' solves are in ``agents``.

    Attributes
    ----------
    model : SparseKernelClassifier
        The global model fitted by the server on the received samples.
    server : RKHSResult
    agents : pandas.DataFrame
        One row per agent: ``agent, n_held, n_sent, status, rel_gap, n_kernels, solve_time``.
    n_held, n_sent : int
        Samples held by all agents and samples sent to the server.
    communication : float
        ``n_sent / n_held`` (the fraction of the data that travelled).
    sent : list of ndarray
        Per agent, the local indices of the samples it sent.
    centralized : SparseKernelClassifier or None
        The same model fitted on all the data, for comparison.
    summary : pandas.DataFrame
        Federated vs centralized side by side (samples used, kernels, dual, gap, accuracy).
    """

    model: SparseKernelClassifier
    server: RKHSResult
    agents: object
    n_held: int
    n_sent: int
    communication: float
    sent: list = field(default_factory=list)
    centralized: SparseKernelClassifier | None = None
    summary: object = None

    _solve_field = "server"

    def to_row(self) -> dict:
        """The server's solve (:data:`gtvcvx.results.RESULT_ROW_KEYS`) and the communication counts."""
        server = self.server.to_row()
        row = {key: server[key] for key in RESULT_ROW_KEYS}
        row.update({"n_held": self.n_held, "n_sent": self.n_sent, "communication": self.communication,
                    "n_kernels": self.model.n_kernels_})
        if self.summary is not None and "accuracy" in self.summary.columns:
            acc = dict(zip(self.summary["model"], self.summary["accuracy"]))
            row["accuracy_federated"] = acc.get("federated", float("nan"))
            row["accuracy_centralized"] = acc.get("centralized", float("nan"))
        return row


def _agent_data(agents):
    if isinstance(agents, (str, bytes)) or not hasattr(agents, "__len__") or len(agents) == 0:
        raise ValueError("agents must be a non-empty list of (X, y) pairs, one per agent")
    out = []
    for i, item in enumerate(agents):
        if hasattr(item, "X") and hasattr(item, "y"):
            X, y = item.X, item.y
        elif isinstance(item, dict):  # (unpacking a dict would give its keys)
            if not {"X", "y"} <= item.keys():
                raise ValueError(f"agents[{i}] is a dict without the keys 'X' and 'y'; expected an (X, y) pair")
            X, y = item["X"], item["y"]
        else:
            try:
                X, y = item
            except (TypeError, ValueError):
                raise ValueError(f"agents[{i}] must be an (X, y) pair") from None
        X = as_float_array(X, f"agents[{i}].X", ndim=2)
        y = np.asarray(y)
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(f"agents[{i}].y must have one label per row of agents[{i}].X ({X.shape[0]}), "
                             f"got shape {y.shape}")
        if X.shape[0] == 0:
            raise ValueError(f"agents[{i}] holds no samples")
        out.append((X, y))
    d = {X.shape[1] for X, _ in out}
    if len(d) != 1:
        raise ValueError(f"all agents must have the same number of features, got {sorted(d)}")
    return out


def federated_fit(agents, dictionary: Dictionary, gamma: float, eps: float, *, C: float | None = None,
                  solver: str = "fast", method: str = "ssnal", tol: float = 1e-6, max_iter=None,
                  time_limit=None, critical_tol: float = DEFAULT_CRITICAL_TOL, recovery: str = "envelope",
                  warm_start: bool = True, centralized: bool = True, test=None) -> FederatedResult:
    r"""Run the federated protocol and, optionally, the centralized fit next to it.

    Parameters
    ----------
    agents : sequence of (X_a, y_a)
        Local datasets; labels are encoded with the classes of the union (an agent may hold
        a single class).
    dictionary : Dictionary
        Shared by every agent and the server.
    gamma, eps, C
        As in :class:`SparseKernelClassifier`; ``C`` is the soft-margin bound of the
        *centralized* problem on all ``N`` samples (per-sample hinge cost ``C / N``).
    solver, method, tol, max_iter, time_limit, critical_tol, recovery
        Solve settings used by the agents, the server and the centralized fit.
    warm_start : bool
        Start the server from the received multipliers.
    centralized : bool
        Also fit on all the data and report it next to the federated model.
    test : (X_test, y_test), optional
        A test set: both models' accuracies go into ``summary``.

    Returns
    -------
    FederatedResult

    Notes
    -----
    Every problem of the protocol is the centralized problem restricted to a subset of the
    samples: the per-sample hinge cost is ``C / N`` everywhere, i.e. an agent (or the server)
    with ``n`` samples solves with ``C_n = C n / N``. Then a sample that is not critical for the
    centralized solution can be dropped without changing it, which is why sending the local
    critical samples is enough when the local problems see the same constraints.

    An agent with ``N_a`` samples sends ``{(x_n, y_n, lambda_n / N_a) : lambda_n critical}``;
    ``lambda_n / N_a`` is the unnormalized multiplier of the margin ``y_n f(x_n) >= 1 - eps``,
    which does not depend on the sample count. The server with ``N_s`` received samples starts
    from ``lambda_n = N_s * (lambda_n / N_a)`` (clipped to ``[0, C]``). An agent whose hard-margin
    problem is infeasible or whose solve fails sends all its samples (and says so in
    ``agents.status``), so the server never misses information because of a local failure.

    References
    ----------
    .. [1] M. Peifer, A. Ribeiro, "Federated classification using parsimonious functions in
       reproducing kernel Hilbert spaces", arXiv:2009.03768, 2020.
    """
    import pandas as pd

    data = _agent_data(agents)
    all_y = np.concatenate([y for _, y in data])
    _, classes = encode_labels(all_y, "labels of the agents")

    def encode(y):
        return np.where(y == classes[1], 1.0, -1.0)

    n_total = sum(X.shape[0] for X, _ in data)

    def restricted_C(n):
        return None if C is None else C * n / n_total

    rows, sent, send_X, send_y, send_mult = [], [], [], [], []
    for a, (X, y) in enumerate(data):
        start = time.perf_counter()
        problem = RKHSProblem(X, encode(y), dictionary, gamma, eps, restricted_C(X.shape[0]))
        res = solve_problem(problem, solver, method=method, tol=tol, max_iter=max_iter, time_limit=time_limit,
                            critical_tol=critical_tol)
        usable = res.multipliers is not None and res.status not in (Status.UNBOUNDED, Status.INFEASIBLE, Status.SOLVER_ERROR)
        if usable:
            idx = np.flatnonzero(critical_mask(res.multipliers, critical_tol))
            mult = res.multipliers[idx] / problem.N
        else:  # no local model: send everything, without multipliers
            idx = np.arange(problem.N)
            mult = np.zeros(idx.size)
        sent.append(idx)
        send_X.append(X[idx])
        send_y.append(y[idx])
        send_mult.append(mult)
        rows.append({"agent": a, "n_held": problem.N, "n_sent": int(idx.size), "status": str(res.status),
                     "rel_gap": res.rel_gap, "n_kernels": res.n_kernels,
                     "solve_time": time.perf_counter() - start})
    agents_df = pd.DataFrame(rows)
    Xs = np.concatenate(send_X)
    ys = np.concatenate(send_y)
    mult = np.concatenate(send_mult)
    n_held = int(agents_df["n_held"].sum())
    n_sent = int(Xs.shape[0])

    C_server = restricted_C(n_sent)
    model = SparseKernelClassifier(dictionary, gamma, eps, C_server, solver, method=method, tol=tol, max_iter=max_iter,
                                   time_limit=time_limit, recovery=recovery, critical_tol=critical_tol)
    lam0 = None
    if warm_start and solver.lower() == "fast" and n_sent:
        lam0 = n_sent * mult
        if C_server is not None:
            lam0 = np.minimum(lam0, C_server)
    if np.unique(ys).size == 2:
        model.fit(Xs, ys, lam0=lam0)
        server = model.result_
    else:
        # the received samples hold one class only: the server still solves, with the global classes
        problem = RKHSProblem(Xs, encode(ys), dictionary, gamma, eps, C_server)
        server = solve_problem(problem, solver, method=method, tol=tol, max_iter=max_iter, time_limit=time_limit,
                               lam0=lam0, critical_tol=critical_tol)
        model._set_fitted(server, classes, Xs.shape[1])
    model.classes_ = np.asarray(classes)

    central = None
    summary_rows = [{"model": "federated", "n_samples": n_sent, "n_kernels": model.n_kernels_,
                     "n_critical": int(model.critical_samples_.size), "dual": server.dual,
                     "rel_gap": server.rel_gap, "status": str(server.status), "solve_time": server.total_time}]
    if centralized:
        Xall = np.concatenate([X for X, _ in data])
        central = SparseKernelClassifier(dictionary, gamma, eps, C, solver, method=method, tol=tol,
                                         max_iter=max_iter, time_limit=time_limit, recovery=recovery,
                                         critical_tol=critical_tol).fit(Xall, all_y)
        summary_rows.append({"model": "centralized", "n_samples": n_held, "n_kernels": central.n_kernels_,
                             "n_critical": int(central.critical_samples_.size), "dual": central.result_.dual,
                             "rel_gap": central.result_.rel_gap, "status": str(central.status_),
                             "solve_time": central.result_.total_time})
    summary = pd.DataFrame(summary_rows)
    if test is not None:
        X_test, y_test = test
        summary["accuracy"] = [m.score(X_test, y_test) for m in ([model] + ([central] if central else []))]
    return FederatedResult(model=model, server=server, agents=agents_df, n_held=n_held, n_sent=n_sent,
                           communication=n_sent / n_held, sent=sent, centralized=central, summary=summary)
