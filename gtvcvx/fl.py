r"""Federated-learning algorithms of the FL lecture notes, run on GTV problems and certified by the gap.

Each algorithm takes a :class:`~gtvcvx.GTVProblem` (its graph and local losses), runs rounds of
message passing, counts what travels (bytes per round, float64 payloads), and returns an
:class:`FLResult` whose models are certified against the GTV problem the algorithm converges to
(:func:`gtvcvx.solvers.certify.certify`), so "converged" is a duality gap, not a guess.

``fedrelax``
    FedRelax (notes 000, Sec. 9.1, Algorithm 1, update (82)): every node minimizes its local
    loss plus ``(lam/2) sum_j A_ij ||w - w_j||^2`` against its neighbours' shared models.
    With ``noise > 0`` it is Algorithm 5 (Sec. 11.1, eq. 87): the shared models carry Gaussian
    noise for privacy.
``fedrelax_nonparametric``
    Algorithm 2 (Sec. 9.1, update (84)): models of any class (scikit-learn estimators with
    ``sample_weight``) that share their predictions on a common unlabeled test set.
``fedavg_gd``
    Iterative FedAvg: clients take ``local_steps`` gradient steps from the server's model and
    the server averages them with weights ``n_k / n`` (slides 001, Algorithms 1-2) or ``1/|V|``
    (notes 000, Sec. 9.3: projected gradient descent on the consensus problem (85));
    ``local_steps = 1`` with sample weights is FedSGD (full local gradients).
``fedavg_prox``
    FedAvg with a regularized local update (notes 000, Algorithms 3-4): ``w_i = argmin L_i(v)
    + lam ||v - w_bar||^2``, server average ``w_bar = mean_i w_i``.

References
----------
.. [1] A. Jung, "CS-E4740 Federated Learning" lecture notes, 2023 (``../shared/seeds/000``):
   Sec. 9.1 (FedRelax, Algorithms 1-2), 9.3 (FedAvg, Algorithms 3-4), 11.1 (Algorithm 5).
.. [2] D. Schalk, "Federated Learning" slides, 2018 (``../shared/seeds/001``): FedAvg with
   ``n_k / n`` weights and ``E`` local steps.
.. [3] H. B. McMahan et al., "Communication-efficient learning of deep networks from
   decentralized data", AISTATS 2017 (FedSGD and FedAvg).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ._validation import check_positive_int
from .capabilities import CapabilityError, provides, require
from .clustering import lam_max
from .penalties import QuadraticForm
from .problem import GTVProblem
from .progress import substep
from .solvers.certify import certify as certify_W
from .solvers.quadratic import penalty_form

__all__ = ["FLResult", "fedrelax", "fedrelax_nonparametric", "fedavg_gd", "fedavg_prox", "consensus_problem",
           "FLOAT_BYTES"]

#: Bytes of one transmitted number (float64).
FLOAT_BYTES = 8


@dataclass
class FLResult:
    """Models learnt by a federated-learning algorithm, what they cost to communicate, and their certificate.

    Attributes
    ----------
    name : str
    W : ndarray (n, d) or None
        One model per node (None for non-parametric models without coefficients).
    rounds : int
        Communication rounds run.
    bytes_per_round, bytes_total : int
        Payload sent per round and in all (float64 numbers, every message counted once per receiver).
    history : pandas.DataFrame
        Per round: ``round``, ``objective`` (of ``target``, where there is one), ``change`` (relative
        change of the models).
    target : GTVProblem or None
        The problem whose minimizer the algorithm converges to.
    certificate : Certificate or None
        Duality-gap certificate of ``W`` for ``target`` (``rel_gap`` says how far from optimal).
    seconds : float
    info : dict
        The algorithm's parameters; ``diverged_at_round`` where a round's models were not finite (a step
        size too large): the run stopped there and ``W`` / ``rounds`` are those of the round before.
    """

    name: str
    W: np.ndarray | None
    rounds: int
    bytes_per_round: int
    bytes_total: int
    history: pd.DataFrame
    target: GTVProblem | None = None
    certificate: object = None
    seconds: float = 0.0
    info: dict = field(default_factory=dict)

    @property
    def rel_gap(self) -> float:
        """Certified relative gap of ``W`` for ``target`` (nan without a certificate)."""
        return float(self.certificate.rel_gap) if self.certificate is not None else float("nan")


def _check(problem) -> GTVProblem:
    if not isinstance(problem, GTVProblem):
        raise TypeError(f"problem must be a gtvcvx.GTVProblem, got {type(problem).__name__}")
    return problem


def _adjacency(graph) -> sp.csr_matrix:
    e, w = graph.edges, graph.weights
    A = sp.coo_matrix((np.concatenate([w, w]), (np.concatenate([e[:, 0], e[:, 1]]),
                                                np.concatenate([e[:, 1], e[:, 0]]))), shape=(graph.n, graph.n))
    return A.tocsr()


def _is_half_squared_norm(penalty, d: int) -> bool:
    """``phi(u) = ||u||^2 / 2`` exactly: a quadratic penalty whose form (by polarization) is the identity."""
    if not provides(penalty, "quadratic") or penalty.is_norm:
        return False
    return bool(np.allclose(penalty_form(penalty, d), np.eye(d), rtol=1e-12, atol=1e-12))


def _finish(name, W, rounds, per_round, history, target, certify, t0, info=None) -> FLResult:
    info = dict(info or {})
    if history and history[-1].get("diverged"):
        info["diverged_at_round"] = int(history[-1]["round"])  # W is the last round's finite models
    with np.errstate(over="ignore", invalid="ignore") if "diverged_at_round" in info else contextlib.nullcontext():
        # (the last finite models of a diverging run may overflow P(W): the certificate says inf)
        cert = certify_W(target, W) if (certify and target is not None and W is not None) else None
    return FLResult(name=name, W=W, rounds=rounds, bytes_per_round=int(per_round), bytes_total=int(per_round * rounds),
                    history=pd.DataFrame(history), target=target, certificate=cert,
                    seconds=time.perf_counter() - t0, info=info)


def _change(new, old) -> float:
    return float(np.linalg.norm(new - old) / (1.0 + np.linalg.norm(old)))


def _run_rounds(update, state, rounds: int, tol, label: str, objective=None, every: int = 50):
    """Apply ``state = update(state)`` for at most ``rounds`` rounds, stopping when the relative change
    falls to ``tol``; returns ``(state, rounds run, history)`` with ``objective(state)`` recorded if given.
    A round whose update is not finite (a diverging step size) ends the loop with the previous state and
    a last history row ``{"round": k, "change": inf, "diverged": True}`` (see ``_finish``)."""
    history = []
    k = 0
    for k in range(1, rounds + 1):
        if k % every == 0:
            substep(label, k, rounds)
        with np.errstate(over="ignore", invalid="ignore"):  # (a diverging run is reported, not warned about)
            new = update(state)
            if not np.isfinite(new).all():
                history.append({"round": k, "change": float("inf"), "diverged": True})
                return state, k - 1, history
            change = _change(new, state)
            state = new
            row = {"round": k, "change": change}
            if objective is not None:
                row["objective"] = objective(state)
        history.append(row)
        if tol is not None and change <= tol:
            break
    return state, k, history


# ---------------------------------------------------------------------------------------- FedRelax
def fedrelax(problem: GTVProblem, rounds: int = 1000, *, tol: float | None = 1e-12, noise: float = 0.0, seed=None,
             certify: bool = True) -> FLResult:
    r"""FedRelax (Algorithm 1 of the notes; Algorithm 5 with ``noise > 0``).

    Parameters
    ----------
    problem : GTVProblem
        The half squared penalty ``phi(u) = ||u||^2 / 2`` (:class:`~gtvcvx.SquaredNorm2`), any
        loss (its ``prox`` is the local update); ``lam > 0``.
    rounds : int
        Most communication rounds.
    tol : float or None
        Stop when the relative change of the models falls below ``tol`` (None: run every round).
    noise : float
        ``sigma`` of Algorithm 5: every shared model is perturbed by ``sigma * N(0, I)``.
    seed : int or Generator, optional
        Seeds the noise.
    certify : bool
        Certify the final models against ``problem``.

    Returns
    -------
    FLResult
        ``target = problem``; ``bytes_per_round = 8 d 2 |E|`` (every node sends its model to
        each neighbour).

    Notes
    -----
    Round ``k``: ``w_{k+1}^(i) = argmin_w L_i(w) + (lam/2) sum_j A_ij ||w - w_k^(j)||^2
    = prox_{L_i / (lam deg_i)}(v_i)`` with ``v_i`` the ``A``-weighted mean of the neighbours'
    shared models and ``deg_i = sum_j A_ij`` (notes 000, eq. 82), for all nodes at once.
    A fixed point satisfies ``grad L_i(w_i) + lam sum_j A_ij (w_i - w_j) = 0``, the optimality
    condition of ``sum_i L_i + lam sum_e A_e ||w_i - w_j||^2 / 2``: GTV with ``SquaredNorm2``
    and the same ``lam``. (The notes' objective (79) has ``lam ||.||^2``; the simultaneous
    update (82) drops the neighbours' copies of each edge term, so its fixed points solve (79)
    with ``lam / 2``.) The rounds are Jacobi sweeps: they converge when the local losses are
    strongly convex enough; the certificate says how close the result is. With ``noise`` the
    models keep fluctuating at the noise level (the privacy-accuracy trade-off).
    """
    problem = _check(problem)
    rounds = check_positive_int(rounds, "rounds")
    if not _is_half_squared_norm(problem.penalty, problem.d):
        raise CapabilityError(f"fedrelax solves GTV with the half squared penalty ||u||^2 / 2 (SquaredNorm2); "
                              f"penalty '{problem.penalty.name}' is not it")
    if not problem.lam > 0:
        raise ValueError(f"fedrelax needs lam > 0, got {problem.lam:g}")
    if not (np.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise must be a finite number >= 0, got {noise!r}")
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    A = _adjacency(problem.graph)
    degree = problem.graph.weighted_degree
    connected = degree > 0
    step = np.where(connected, 1.0 / (problem.lam * np.where(connected, degree, 1.0)), 1e12)
    mean_weight = 1.0 / np.where(connected, degree, 1.0)[:, None]

    def update(W):
        new = problem.loss.prox((A @ W) * mean_weight, step)  # prox at the neighbours' weighted mean
        return new + noise * rng.standard_normal(new.shape) if noise > 0 else new

    W, k, history = _run_rounds(update, np.zeros((problem.n, problem.d)), rounds, tol, "FedRelax round",
                                problem.objective)
    per_round = FLOAT_BYTES * problem.d * 2 * problem.n_edges
    return _finish("fedrelax" if noise == 0 else "fedrelax_private", W, k, per_round, history, problem, certify, t0,
                   {"noise": float(noise)})


def fedrelax_nonparametric(problem: GTVProblem, make_model, X_test, rounds: int = 100, *, tol: float | None = 1e-10,
                           certify: bool = True) -> FLResult:
    r"""FedRelax for non-parametric models (Algorithm 2 of the notes): nodes share predictions, not parameters.

    Parameters
    ----------
    problem : GTVProblem
        Its graph, ``lam`` and local data (a squared-error loss: ``X``/``y`` per node); its penalty
        is not used.
    make_model : callable
        ``make_model()`` returns a fresh estimator with ``fit(X, y, sample_weight=...)`` and
        ``predict(X)`` (e.g. scikit-learn's ``DecisionTreeRegressor`` or ``LinearRegression``).
    X_test : array_like (m', d)
        The unlabeled test set every node predicts on and shares predictions for.
    rounds, tol, certify
        As in :func:`fedrelax`; the certificate needs linear models (``coef_``), see Notes.

    Returns
    -------
    FLResult
        ``W`` = the models' ``coef_`` when every model has one (else None); ``info["models"]``,
        ``info["predictions"]`` (n, m'); ``bytes_per_round = 8 m' 2 |E|``.

    Notes
    -----
    Round ``k``: node ``i`` fits ``argmin_h L_i(h) + (lam/2) sum_j (A_ij / m') sum_r (h(x_r) -
    h_k^(j)(x_r))^2`` (notes 000, eq. 84): a weighted least-squares fit on its own samples
    (weight ``1/m_i``) and on the test points labelled by each neighbour's predictions (weight
    ``lam A_ij / (2 m')``). For linear models ``h(x) = w^T x`` the discrepancy is
    ``(w_i - w_j)^T Q (w_i - w_j)`` with ``Q = X'^T X' / m'``, so the fixed point is GTV with
    the penalty :class:`~gtvcvx.QuadraticForm` ``(Q)`` and the same ``lam``: the target that
    is certified. Fitting a model is per node by nature (a Python loop over nodes).
    """
    problem = _check(problem)
    rounds = check_positive_int(rounds, "rounds")
    loss = problem.loss
    if getattr(loss, "data", None) != "labelled" or not provides(loss, "quadratic"):
        raise CapabilityError(f"fedrelax_nonparametric needs labelled local data with a squared-error loss, got "
                              f"loss '{loss.name}'")
    X_test = np.asarray(X_test, dtype=float)
    if X_test.ndim != 2 or X_test.shape[1] != problem.d or X_test.shape[0] == 0 or not np.isfinite(X_test).all():
        raise ValueError(f"X_test must be a finite array of shape (m', d = {problem.d}) with m' >= 1, got "
                         f"{X_test.shape}")
    t0 = time.perf_counter()
    m_test = X_test.shape[0]
    graph = problem.graph
    A = _adjacency(graph)
    own = [(loss.X_all[loss.node_of_sample == i], loss.y_all[loss.node_of_sample == i]) for i in range(problem.n)]
    models = [None] * problem.n

    def update(predictions):
        new = np.empty_like(predictions)
        for i in range(problem.n):  # one model fit per node (non-parametric models do not batch)
            row = A.getrow(i)
            Xi, yi = own[i]
            blocks_X = [Xi] + [X_test] * row.nnz
            blocks_y = [yi] + [predictions[j] for j in row.indices]
            weights = [np.full(len(yi), 1.0 / max(len(yi), 1))]
            weights += [np.full(m_test, problem.lam * a / (2.0 * m_test)) for a in row.data]
            model = make_model()
            model.fit(np.vstack(blocks_X), np.concatenate(blocks_y), sample_weight=np.concatenate(weights))
            models[i] = model
            new[i] = model.predict(X_test)
        return new

    predictions, k, history = _run_rounds(update, np.zeros((problem.n, m_test)), rounds, tol,
                                          "FedRelax (non-parametric) round", every=1)
    W = np.vstack([np.ravel(m.coef_) for m in models]) if all(hasattr(m, "coef_") for m in models) else None
    target = None
    if W is not None and W.shape[1] == problem.d:
        target = GTVProblem(graph, loss, QuadraticForm(X_test.T @ X_test / m_test), problem.lam)
        history[-1]["objective"] = target.objective(W)
    per_round = FLOAT_BYTES * m_test * 2 * problem.n_edges
    return _finish("fedrelax_nonparametric", W, k, per_round, history, target, certify, t0,
                   {"models": models, "predictions": predictions})


# ---------------------------------------------------------------------------------------- FedAvg
def _node_smoothness(loss, iterations: int = 40, seed: int = 0) -> np.ndarray:
    """Per-node Lipschitz constants of ``grad L_i``, by power iteration on gradient differences at 0
    (exact for quadratic losses; the logistic curvature is largest at 0)."""
    rng = np.random.default_rng(seed)
    V = rng.standard_normal((loss.n, loss.d))
    base = loss.gradient(np.zeros((loss.n, loss.d)))
    estimate = np.zeros(loss.n)
    for _ in range(iterations):
        V /= np.maximum(np.linalg.norm(V, axis=1), 1e-300)[:, None]
        HV = loss.gradient(V) - base
        estimate = np.linalg.norm(HV, axis=1)
        V = HV + 1e-12 * rng.standard_normal(V.shape)
    return 1.05 * estimate


def consensus_problem(problem: GTVProblem) -> GTVProblem:
    """``problem`` at a ``lam`` above ``lam_max``: its minimizer is the consensus (pooled) model.

    Any ``lam >= lam_max`` has the pooled model as its minimizer, so the cheap spanning-forest
    upper bound of :func:`~gtvcvx.clustering.lam_max` (``method="tree"``) suffices; the exact
    conic value takes about a minute on Table I's graph.
    """
    threshold = lam_max(problem, method="tree").upper
    return problem.with_lam(1.01 * threshold) if threshold > 0 else problem


def fedavg_gd(problem: GTVProblem, rounds: int = 1000, *, lr: float | None = None, local_steps: int = 1,
              weighting: str = "samples", tol: float | None = 1e-12, certify: bool = True) -> FLResult:
    r"""Iterative FedAvg: ``local_steps`` gradient steps per client, weighted averaging on the server.

    Parameters
    ----------
    problem : GTVProblem
        Its smooth local losses (the graph only fixes the consensus target's components).
    rounds : int
    lr : float, optional
        Step size ``eta`` (default ``1 / max_i L_i``, ``L_i`` the Lipschitz constant of ``grad L_i``).
    local_steps : int
        ``E``: gradient steps per client and round (slides 001, Algorithm 2); 1 is FedSGD (Algorithm 1).
    weighting : {"samples", "nodes"}
        ``"samples"``: server weights ``n_k / n`` (slides); ``"nodes"``: ``1/|V|``, projected gradient
        descent on the consensus problem (85) of the notes, whose minimizer is GTV's for ``lam``
        above :func:`~gtvcvx.clustering.lam_max` (the certified target, at an upper bound of it).
    tol, certify
        As in :func:`fedrelax`; ``weighting="samples"`` has no GTV target (it weighs the nodes
        differently), so it is not certified.

    Returns
    -------
    FLResult
        ``W`` = the server model at every node; ``bytes_per_round = 8 d 2 n`` (broadcast + uploads).

    Notes
    -----
    Client ``k``: ``gamma_k = theta - eta sum_{s<E} grad L_k(gamma_{k,s})``; server: ``theta = sum_k
    p_k gamma_k``. With ``E = 1`` this is gradient descent on ``sum_k p_k L_k``, converging for
    ``eta <= 1/L``; with ``E > 1`` and heterogeneous clients the fixed point drifts from the
    minimizer (client drift), which the certificate shows.
    """
    problem = _check(problem)
    rounds = check_positive_int(rounds, "rounds")
    local_steps = check_positive_int(local_steps, "local_steps")
    require(problem.loss, ("smooth",), user="fedavg_gd")
    if weighting not in ("samples", "nodes"):
        raise ValueError(f"weighting must be 'samples' or 'nodes', got {weighting!r}")
    loss = problem.loss
    counts = np.asarray(getattr(loss, "counts", np.ones(problem.n)), dtype=float)
    has_data = counts > 0
    if not has_data.any():
        raise ValueError("fedavg_gd needs at least one node with data")
    weights = (counts if weighting == "samples" else has_data.astype(float))
    weights = weights / weights.sum()
    if lr is None:
        lr = 1.0 / max(float(_node_smoothness(loss)[has_data].max()), 1e-300)
    if not (np.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a finite number > 0, got {lr!r}")
    t0 = time.perf_counter()

    def update(theta):
        G = np.tile(theta, (problem.n, 1))
        for _ in range(local_steps):  # every client at once
            G = G - lr * loss.gradient(G)  # (under _run_rounds' errstate)
            if not np.isfinite(G).all():  # diverged (lr too large): _run_rounds stops
                return np.full(problem.d, np.nan)
        return weights @ G

    def objective(theta):
        return float(loss.node_values(np.tile(theta, (problem.n, 1))) @ weights)

    theta, k, history = _run_rounds(update, np.zeros(problem.d), rounds, tol, "FedAvg round", objective)
    W = np.tile(theta, (problem.n, 1))
    target = consensus_problem(problem) if (weighting == "nodes" and certify) else None
    per_round = FLOAT_BYTES * problem.d * 2 * problem.n
    name = "fedsgd" if local_steps == 1 and weighting == "samples" else "fedavg_gd"
    return _finish(name, W, k, per_round, history, target, certify, t0,
                   {"lr": float(lr), "local_steps": local_steps, "weighting": weighting})


def fedavg_prox(problem: GTVProblem, rounds: int = 1000, *, lam: float = 1.0, tol: float | None = 1e-12,
                certify: bool = True) -> FLResult:
    r"""FedAvg with a regularized local update (Algorithms 3-4 of the notes).

    Parameters
    ----------
    problem : GTVProblem
        Its local losses (their ``prox`` is the client update).
    rounds : int
        Most communication rounds.
    lam : float
        The local regularization ``lam`` of the client update (the notes' ``lambda``).
    tol, certify
        As in :func:`fedavg_gd`.

    Returns
    -------
    FLResult
        ``W`` = the server model at every node, certified against the consensus GTV problem.

    Notes
    -----
    Client: ``w_i = argmin_v L_i(v) + lam ||v - w_bar||^2 = prox_{L_i / (2 lam)}(w_bar)``; server:
    ``w_bar = (1/|V|) sum_i w_i``. A fixed point has ``sum_i grad L_i(w_i) = 0`` with
    ``w_i - w_bar = -grad L_i(w_i) / (2 lam)``: the pooled model up to ``O(1/lam)``, which is why
    the notes obtain FedAvg from GTV as ``lam -> infinity``; the certificate measures the rest.
    """
    problem = _check(problem)
    rounds = check_positive_int(rounds, "rounds")
    if not (np.isfinite(lam) and lam > 0):
        raise ValueError(f"lam must be a finite number > 0, got {lam!r}")
    t0 = time.perf_counter()
    step = np.full(problem.n, 1.0 / (2.0 * lam))

    def update(w_bar):
        return problem.loss.prox(np.tile(w_bar, (problem.n, 1)), step).mean(axis=0)

    def objective(w_bar):
        return float(problem.loss.node_values(np.tile(w_bar, (problem.n, 1))).sum())

    w_bar, k, history = _run_rounds(update, np.zeros(problem.d), rounds, tol, "FedAvg (prox) round", objective)
    W = np.tile(w_bar, (problem.n, 1))
    per_round = FLOAT_BYTES * problem.d * 2 * problem.n
    return _finish("fedavg_prox", W, k, per_round, history, consensus_problem(problem) if certify else None, certify,
                   t0, {"lam": lam})

