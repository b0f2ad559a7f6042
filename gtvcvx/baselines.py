"""Federated-learning baselines for GTV minimization: local models, FedAvg, oracle FedAvg, IFCA.

Every baseline takes a :class:`~gtvcvx.problem.GTVProblem` and uses only its local losses
(squared error or logistic; the graph is ignored except where stated) and returns a
:class:`BaselineResult` with one model per node, ``W`` (n x d), so that it can be compared
with a GTV solution by the same metrics (:func:`gtvcvx.metrics.mse`, accuracy, ...).

What each baseline minimizes (``L_i`` is node ``i``'s mean loss, ``rho >= 0`` an optional ridge):

``local_only``
    ``w_i = argmin L_i(w) + (rho/2) ||w||^2`` for every node (GTV with ``lam = 0``).
``fedavg``
    one model ``w = argmin sum_i L_i(w) + (rho/2) ||w||^2`` for all nodes (GTV with
    ``lam -> infinity`` on a connected graph).
``oracle_fedavg``
    one model per true cluster ``c``: ``argmin sum_{i in c} L_i(w) + (rho/2) ||w||^2``.
``ifca``
    ``k`` models; alternately every node picks the model with the least local loss and every
    model is re-fitted on the nodes that picked it (Ghosh et al., 2020).

Ill-posed cases are resolved explicitly and the same way everywhere:

* ``m_i < d`` (or any rank-deficient pooled design) with squared error and ``rho = 0``: the
  minimum-norm least-squares solution (the limit ``rho -> 0`` of ridge regression);
* a node without data (``m_i = 0``, ``L_i = 0``): ``w_i = 0`` in :func:`local_only` (the
  minimum-norm minimizer of the zero function); it contributes nothing to pooled fits;
* logistic loss with ``rho = 0``: the unregularized maximum-likelihood model does not exist
  when the data are linearly separable (always so when ``m_i <= d`` in general position), so
  logistic fits default to ``rho = 1e-4`` (see :data:`DEFAULT_LOGISTIC_RIDGE`); pass another
  ``ridge`` explicitly if needed. Squared-error fits default to ``rho = 0``.

Logistic fits use a damped Newton method with backtracking on the pooled (per-node weighted)
objective; squared-error fits are exact (SVD based least squares).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import expit

from ._linesearch import armijo_step
from ._threads import single_threaded
from .capabilities import CapabilityError, provides
from .problem import GTVProblem

__all__ = ["BaselineResult", "local_only", "fedavg", "oracle_fedavg", "ifca", "fit_pooled",
           "DEFAULT_LOGISTIC_RIDGE"]

#: Ridge ``rho`` used for logistic fits when ``ridge=None`` (the unregularized fit may not exist).
DEFAULT_LOGISTIC_RIDGE = 1e-4


@dataclass
class BaselineResult:
    """Local models produced by a baseline.

    Attributes
    ----------
    name : str
        ``"local_only"``, ``"fedavg"``, ``"oracle_fedavg"`` or ``"ifca"``.
    W : ndarray of shape (n, d)
        Model of every node.
    labels : ndarray of shape (n,) or None
        Cluster (model index) of every node, where the baseline has clusters.
    loss : float
        Total training loss ``sum_i L_i(w_i)`` (without the ridge term).
    iterations : int
        Rounds (IFCA), Newton iterations (logistic fits) or 1 (closed forms).
    ridge : float
        The ridge ``rho`` that was used.
    info : dict
        Extras, e.g. IFCA's cluster models and the loss of every restart.
    """

    name: str
    W: np.ndarray
    labels: np.ndarray | None
    loss: float
    iterations: int
    ridge: float = 0.0
    info: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------
def _loss_of(problem):
    if not isinstance(problem, GTVProblem):
        raise TypeError(f"problem must be a gtvcvx.GTVProblem, got {type(problem).__name__}")
    loss = problem.loss
    if loss.data != "labelled" or not provides(loss, "smooth"):
        raise CapabilityError(f"baselines need a smooth loss of labelled local data (e.g. SquaredError or "
                              f"Logistic), got loss '{loss.name}'")
    return loss


def _ridge(loss, ridge) -> float:
    if ridge is None:
        return 0.0 if provides(loss, "quadratic") else DEFAULT_LOGISTIC_RIDGE
    ridge = float(ridge)
    if not (np.isfinite(ridge) and ridge >= 0):
        raise ValueError(f"ridge must be a finite number >= 0, got {ridge!r}")
    return ridge


def _sample_weights(loss) -> np.ndarray:
    """Weight ``1/m_i`` of every sample (so that the pooled objective is ``sum_i L_i``)."""
    return 1.0 / loss.counts[loss.node_of_sample]


@single_threaded
def fit_pooled(loss, nodes, ridge: float = 0.0, w0=None, *, max_iter: int = 100, tol: float = 1e-10):
    """Minimize ``sum_{i in nodes} L_i(w) + (ridge/2) ||w||^2`` over one shared model ``w``.

    Parameters
    ----------
    loss : SquaredError or Logistic
    nodes : array_like of int or bool mask
        The nodes whose data are pooled (nodes without data contribute nothing).
    ridge : float
        ``rho >= 0``. With squared error and ``rho = 0`` the minimum-norm least-squares
        solution is returned (unique even when the pooled design has rank < d).
    w0 : ndarray of shape (d,), optional
        Starting point of the logistic Newton method.
    max_iter, tol : int, float
        Newton iteration limit and stopping tolerance on the Newton decrement (logistic).

    Returns
    -------
    w : ndarray of shape (d,)
    iterations : int
    converged : bool
    """
    nodes = np.asarray(nodes)
    mask = nodes if nodes.dtype == bool else np.isin(np.arange(loss.n), nodes)
    sel = mask[loss.node_of_sample]
    X = loss.X_all[sel]
    y = loss.y_all[sel]
    s = _sample_weights(loss)[sel]
    d = loss.d
    if X.shape[0] == 0:
        return np.zeros(d), 0, True
    if provides(loss, "quadratic"):  # closed form
        # min sum_k s_k (y_k - x_k^T w)^2 + (ridge/2) ||w||^2  (rows scaled by sqrt(s_k))
        root = np.sqrt(s)
        A = X * root[:, None]
        b = y * root
        if ridge > 0:
            A = np.vstack([A, np.sqrt(ridge / 2.0) * np.eye(d)])
            b = np.concatenate([b, np.zeros(d)])
        w = np.linalg.lstsq(A, b, rcond=None)[0]
        return w, 1, True
    # logistic: damped Newton on f(w) = sum_k s_k log(1 + exp(-y_k x_k^T w)) + (ridge/2)||w||^2
    w = np.zeros(d) if w0 is None else np.array(w0, dtype=float)

    def value(v):
        return float(s @ np.logaddexp(0.0, -y * (X @ v)) + 0.5 * ridge * (v @ v))

    f = value(w)
    converged = False
    it = 0
    for it in range(1, max_iter + 1):
        z = -y * (X @ w)
        p = expit(z)
        g = -(X.T @ (s * y * p)) + ridge * w
        h = s * p * (1.0 - p)
        H = (X.T * h) @ X + (ridge + 1e-12) * np.eye(d)
        try:
            step = -np.linalg.solve(H, g)
        except np.linalg.LinAlgError:
            step = -np.linalg.lstsq(H, g, rcond=None)[0]
        decrement = float(-(g @ step))
        if decrement <= tol * (1.0 + abs(f)):
            w = w + step
            converged = True
            break
        w, f = armijo_step(value, w, step, f, decrement, t_min=1e-12)
    return w, it, converged


def _node_losses_for_models(loss, models) -> np.ndarray:
    """``L_i(theta_j)`` for every node ``i`` and model ``j``: shape (n, k); one pass per model."""
    n = loss.n
    return np.column_stack([loss.node_values(np.broadcast_to(theta, (n, loss.d))) for theta in models])


# ---------------------------------------------------------------------------------------
# baselines
# ---------------------------------------------------------------------------------------
@single_threaded
def local_only(problem: GTVProblem, ridge: float | None = None) -> BaselineResult:
    """Local models only: every node fits its own data (GTV with ``lam = 0``).

    Parameters
    ----------
    problem : GTVProblem
        Its local losses are used; graph and ``lam`` are ignored.
    ridge : float, optional
        ``rho``: node ``i`` minimizes ``L_i(w) + (rho/2) ||w||^2``. Default 0 for squared
        error and :data:`DEFAULT_LOGISTIC_RIDGE` for logistic loss.

    Returns
    -------
    BaselineResult

    Notes
    -----
    Squared error with ``rho = 0``: ``w_i = X_i^+ y_i``, the minimum-norm least-squares
    solution, so ``m_i < d`` is handled exactly (it is the ``rho -> 0`` limit of ridge
    regression); a node without data gets ``w_i = 0``. With the thin SVD
    ``X_i = P diag(s) Q^T`` and ``b = P^T y_i``: ``w_i = Q (s b / (s^2 + rho m_i / 2))``.
    Logistic loss: ``w_i = prox_{L_i / rho}(0)`` computed by the loss's batched Newton
    method (all nodes at once); nodes without data get ``w_i = 0``.

    This is the "local learning" baseline that GTV minimization interpolates from
    (``lam = 0``), see SarcheshmehPour et al. [1]_, Sec. III.

    References
    ----------
    .. [1] Y. SarcheshmehPour, Y. Tian, L. Zhang, A. Jung, "Clustered federated learning via
       generalized total variation minimization", IEEE Trans. Signal Processing 71, 2023.
    """
    loss = _loss_of(problem)
    rho = _ridge(loss, ridge)
    n, d = loss.n, loss.d
    if provides(loss, "quadratic"):  # closed form
        m = loss.counts[:, None].astype(float)
        denom = loss.s ** 2 + 0.5 * rho * m
        coef = np.divide(loss.s * loss.b, denom, out=np.zeros_like(loss.s), where=loss.active & (denom > 0))
        W = np.matmul(loss.Q, coef[:, :, None])[:, :, 0]
        iterations = 1
    else:
        if rho == 0:
            raise ValueError("local_only with logistic loss needs ridge > 0: the unregularized local "
                             "models do not exist when a node's data are linearly separable")
        W = loss.prox(np.zeros((n, d)), 1.0 / rho)
        W[~loss.has_data] = 0.0
        iterations = 1
    return BaselineResult("local_only", W, None, loss.value(W), iterations, rho)


@single_threaded
def fedavg(problem: GTVProblem, ridge: float | None = None) -> BaselineResult:
    """FedAvg's target: one model for all nodes, ``argmin_w sum_i L_i(w) + (rho/2) ||w||^2``.

    This is the fixed point that federated averaging (McMahan et al. [1]_) approximates with
    local SGD steps and server averaging; here it is computed exactly (least squares, or
    Newton for logistic loss), so the comparison is not blurred by optimization error. It is
    also the limit ``lam -> infinity`` of GTV minimization on a connected graph. Every node
    has the same weight (``L_i`` is a mean over the node's samples); nodes without data
    contribute nothing and receive the pooled model.

    Parameters
    ----------
    problem : GTVProblem
    ridge : float, optional
        Default 0 (squared error) or :data:`DEFAULT_LOGISTIC_RIDGE` (logistic).

    References
    ----------
    .. [1] H. B. McMahan, E. Moore, D. Ramage, S. Hampson, B. Aguera y Arcas,
       "Communication-efficient learning of deep networks from decentralized data", AISTATS 2017.
    """
    loss = _loss_of(problem)
    rho = _ridge(loss, ridge)
    w, iterations, converged = fit_pooled(loss, np.ones(loss.n, dtype=bool), rho)
    W = np.tile(w, (loss.n, 1))
    return BaselineResult("fedavg", W, np.zeros(loss.n, dtype=np.int64), loss.value(W), iterations, rho,
                          {"converged": converged})


@single_threaded
def oracle_fedavg(problem: GTVProblem, labels, ridge: float | None = None) -> BaselineResult:
    """Cluster-wise FedAvg with the true clusters (an oracle no federated method has).

    Model of cluster ``c``: ``argmin_w sum_{i in c} L_i(w) + (rho/2) ||w||^2``, given to every
    node of ``c``. This is the "oracle-based clustered federated learning" that the GTV
    paper's analysis compares GTV minimization with (SarcheshmehPour et al. [1]_, Sec. V).

    Parameters
    ----------
    problem : GTVProblem
    labels : array_like of shape (n,)
        True cluster of every node.
    ridge : float, optional
        Default 0 (squared error) or :data:`DEFAULT_LOGISTIC_RIDGE` (logistic).

    References
    ----------
    .. [1] Y. SarcheshmehPour, Y. Tian, L. Zhang, A. Jung, "Clustered federated learning via
       generalized total variation minimization", IEEE Trans. Signal Processing 71, 2023.
    """
    loss = _loss_of(problem)
    rho = _ridge(loss, ridge)
    labels = np.asarray(labels)
    if labels.shape != (loss.n,):
        raise ValueError(f"labels must have one entry per node ({loss.n}), got shape {labels.shape}")
    clusters, inverse = np.unique(labels, return_inverse=True)
    models = np.zeros((clusters.size, loss.d))
    iterations = 0
    converged = True
    for j in range(clusters.size):  # one pooled fit per cluster
        models[j], it, ok = fit_pooled(loss, inverse == j, rho)
        iterations = max(iterations, it)
        converged &= ok
    W = models[inverse]
    return BaselineResult("oracle_fedavg", W, inverse.astype(np.int64), loss.value(W), iterations, rho,
                          {"models": models, "converged": converged})


@single_threaded
def ifca(problem: GTVProblem, k: int, n_restarts: int = 10, seed=None, *, max_rounds: int = 100,
         init: str = "nodes", refit: str = "exact", lr: float = 0.1, ridge: float | None = None,
         use_graph_for_empty: bool = True) -> BaselineResult:
    """Iterative Federated Clustering Algorithm (IFCA) with random restarts.

    Every round, (1) every node with data picks the cluster model with the least local
    training loss, ``j_i = argmin_j L_i(theta_j)``; (2) every model is updated on the nodes
    that picked it. Runs stop when the assignment no longer changes (or after ``max_rounds``);
    of ``n_restarts`` independent random initializations the run with the least total
    training loss ``sum_i min_j L_i(theta_j)`` is returned.

    Parameters
    ----------
    problem : GTVProblem
        Its local losses are used; the graph only for nodes without data (below).
    k : int
        Number of cluster models.
    n_restarts : int
        Independent random initializations.
    seed : int or Generator, optional
    max_rounds : int
        Rounds per run.
    init : {"nodes", "gaussian", "bernoulli"}
        ``"nodes"``: model ``j`` starts as the local model (:func:`local_only`) of a distinct
        random node with data; ``"gaussian"``: i.i.d. normal entries scaled to the norm of
        the pooled model; ``"bernoulli"``: entries i.i.d. uniform on {0, 1}, as in the
        reference implementation of IFCA's linear-model experiments.
    refit : {"exact", "gradient"}
        ``"exact"``: ``theta_j = argmin sum_{i in S_j} L_i + (rho/2)||.||^2`` (the limit of
        many local steps, IFCA's model-averaging variant taken to convergence);
        ``"gradient"``: one gradient step per round, ``theta_j -= lr / n * sum_{i in S_j}
        grad L_i(theta_j)`` (IFCA's gradient-averaging variant, exactly ``max_rounds`` rounds).
    lr : float
        Step size of ``refit="gradient"``.
    ridge : float, optional
        Ridge of the exact refits; default 0 (squared error) / :data:`DEFAULT_LOGISTIC_RIDGE`.
    use_graph_for_empty : bool
        IFCA has no rule for nodes without data (all their losses are 0). They get the model
        chosen by most of their graph neighbours with data (ties and isolated nodes: the
        model chosen by most nodes).

    Returns
    -------
    BaselineResult
        ``labels`` = chosen model of every node, ``info["models"]`` (k x d),
        ``info["restart_losses"]``, ``info["converged"]`` (assignment stable in the best run).

    References
    ----------
    .. [1] A. Ghosh, J. Chung, D. Yin, K. Ramchandran, "An efficient framework for clustered
       federated learning", NeurIPS 2020.
    """
    loss = _loss_of(problem)
    k = int(k)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if int(n_restarts) < 1:
        raise ValueError(f"n_restarts must be >= 1, got {n_restarts}")
    if init not in ("nodes", "gaussian", "bernoulli"):
        raise ValueError(f"init must be 'nodes', 'gaussian' or 'bernoulli', got {init!r}")
    if refit not in ("exact", "gradient"):
        raise ValueError(f"refit must be 'exact' or 'gradient', got {refit!r}")
    rho = _ridge(loss, ridge)
    rng = np.random.default_rng(seed)
    n, d = loss.n, loss.d
    has_data = loss.has_data
    with_data = np.flatnonzero(has_data)
    if with_data.size == 0:
        raise ValueError("ifca needs at least one node with data")
    local = local_only(problem, None if provides(loss, "quadratic") else max(rho, DEFAULT_LOGISTIC_RIDGE)).W \
        if init == "nodes" else None
    scale = None
    if init == "gaussian":
        w_pool, _, _ = fit_pooled(loss, has_data, rho)
        scale = max(float(np.linalg.norm(w_pool)), 1e-12) / np.sqrt(d)

    best = None
    restart_losses = []
    for _ in range(int(n_restarts)):
        if init == "nodes":
            seeds = rng.choice(with_data, size=min(k, with_data.size), replace=False)
            models = local[seeds].copy()
            if models.shape[0] < k:  # fewer nodes with data than models
                models = np.vstack([models, np.zeros((k - models.shape[0], d))])
        elif init == "gaussian":
            models = scale * rng.standard_normal((k, d))
        else:
            models = rng.integers(0, 2, size=(k, d)).astype(float)
        assign = None
        converged = False
        rounds = 0
        for rounds in range(1, int(max_rounds) + 1):
            new_assign = np.argmin(_node_losses_for_models(loss, models), axis=1)
            if refit == "exact":
                if assign is not None and np.array_equal(new_assign[has_data], assign[has_data]):
                    converged = True
                    assign = new_assign
                    break
                assign = new_assign
                for j in range(k):  # loop over the k clusters only
                    members = has_data & (assign == j)
                    if members.any():
                        models[j], _, _ = fit_pooled(loss, members, rho, w0=models[j])
            else:
                assign = new_assign
                for j in range(k):
                    members = has_data & (assign == j)
                    if members.any():
                        grads = loss.gradient(np.broadcast_to(models[j], (n, d)))
                        models[j] = models[j] - lr / n * grads[members].sum(axis=0)
        node_losses = _node_losses_for_models(loss, models)
        assign = np.argmin(node_losses, axis=1)
        total = float(node_losses[np.arange(n), assign].sum())
        restart_losses.append(total)
        if best is None or total < best[0]:
            best = (total, models.copy(), assign.copy(), rounds, converged)

    total, models, assign, rounds, converged = best
    if (~has_data).any():
        assign = _assign_empty(problem, assign, has_data, k, use_graph_for_empty)
    W = models[assign]
    return BaselineResult("ifca", W, assign.astype(np.int64), loss.value(W), rounds, rho,
                          {"models": models, "restart_losses": restart_losses, "converged": converged,
                           "refit": refit, "init": init})


def _assign_empty(problem, assign, has_data, k, use_graph):
    """Nodes without data: majority model of their neighbours with data, else the largest cluster."""
    assign = assign.copy()
    counts = np.bincount(assign[has_data], minlength=k)
    fallback = int(np.argmax(counts))
    empty = np.flatnonzero(~has_data)
    assign[empty] = fallback
    if use_graph and problem.graph.n_edges:
        e = problem.graph.edges
        votes = np.zeros((problem.n, k))
        for a, b in ((0, 1), (1, 0)):  # neighbour b of node a votes with its model (if it has data)
            ok = has_data[e[:, b]]
            np.add.at(votes, (e[ok, a], assign[e[ok, b]]), 1.0)
        voted = empty[votes[empty].max(axis=1) > 0]
        assign[voted] = np.argmax(votes[voted], axis=1)
    return assign
