r"""Does a GTV problem have a minimizer at all? Separable classification data say no.

For a loss that declares ``"no_minimizer_if_separable"`` (the logistic loss), ``L_i(t w)``
decreases strictly towards its infimum 0 as ``t -> inf`` when every sample of node ``i`` has
``y_k x_k^T w > 0``. A GTV penalty acts on differences ``w_i - w_j`` only, so it is constant on
models that are constant over a connected component of the graph (every node on its own
when ``lam = 0``). Hence if the pooled samples of one component are *strictly linearly
separable* the objective decreases along ``W = t w`` on that component (zero elsewhere) without
end: its infimum is not attained, every iterative method drifts to ever larger weights, and a
certificate can only approach a gap of zero. This module decides strict separability per
component with one linear program (HiGHS through :func:`scipy.optimize.linprog`), and verifies
the direction it returns in floating point with a rigorous rounding bound before saying so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..capabilities import provides
from ..problem import GTVProblem

__all__ = ["Separation", "find_separation", "MAX_ENTRIES", "TIME_LIMIT"]

#: The check runs when the pooled design has at most this many entries (samples x (d + 1)) ...
MAX_ENTRIES = 5_000_000
#: ... and the linear program gets at most this many seconds (otherwise nothing is claimed).
TIME_LIMIT = 10.0


@dataclass
class Separation:
    """A verified strict separation of one component's pooled samples.

    Attributes
    ----------
    component : ndarray of int
        The component's nodes.
    direction : ndarray (n, d)
        ``W`` along which the objective decreases without end: ``w`` on the component, 0 elsewhere.
    margin : float
        ``min_k y_k x_k^T w`` over the component's samples (``||w||_inf <= 1``).
    n_samples : int
        Samples of the component.
    """

    component: np.ndarray
    direction: np.ndarray
    margin: float
    n_samples: int

    def message(self, loss_name: str) -> str:
        """Why the problem has no minimizer and what to do about it."""
        nodes = self.component
        where = (f"node {int(nodes[0])}" if nodes.size == 1
                 else f"the connected component of {nodes.size} nodes containing node {int(nodes[0])}")
        return (f"no minimizer: the {self.n_samples} samples of {where} are strictly linearly separable "
                f"(min_k y_k x_k^T w = {self.margin:.3g} with ||w||_inf <= 1), so the {loss_name} loss "
                "decreases towards 0 along W = t w on it while the penalty stays constant; the infimum is "
                "not attained and iterates would grow without bound (result.info['recession_direction']). "
                "Regularize the weights (a ridge term), use fewer features or more samples per component, "
                "or a loss whose minimum is attained (e.g. hinge)")


def _applies(problem: GTVProblem) -> bool:
    loss = problem.loss
    return (provides(loss, "no_minimizer_if_separable")
            and all(hasattr(loss, a) for a in ("X_all", "y_all", "node_of_sample")))


def find_separation(problem: GTVProblem, *, time_limit: float = TIME_LIMIT) -> Separation | None:
    r"""A component whose pooled samples are strictly linearly separable, or None.

    Parameters
    ----------
    problem : GTVProblem
    time_limit : float
        Seconds for the linear program; when it does not finish, None (nothing is claimed).

    Returns
    -------
    Separation or None
        None when the loss does not declare ``"no_minimizer_if_separable"``, when the design is
        larger than :data:`MAX_ENTRIES`, when no component is separable, or when the LP's
        direction does not survive the floating-point check.

    Notes
    -----
    One LP over every component ``c`` with samples at once (the blocks decouple):

    .. math::

        \max \sum_c t_c \quad \text{s.t.} \quad y_k x_k^\top w_{c(k)} \ge t_{c(k)},\;
        -1 \le w_c \le 1,\; 0 \le t_c \le 1.

    ``t_c > 0`` means strict separation. The best such component's ``w_c`` is accepted only if
    ``fl(y_k x_k^T w_c) - gamma_d |x_k|^T |w_c| > 0`` for each of its samples, with
    ``gamma_d = (d + 2) u / (1 - (d + 2) u)`` the rounding bound of a dot product of length ``d``
    (Higham, *Accuracy and Stability of Numerical Algorithms*, 2002, Sec. 3.1).
    """
    if not _applies(problem):
        return None
    from scipy.optimize import linprog  # (0.3 s to import: only where a loss can be separable)

    loss, graph = problem.loss, problem.graph
    X, y, node = np.asarray(loss.X_all, float), np.asarray(loss.y_all, float), np.asarray(loss.node_of_sample)
    n_samples, d = X.shape
    if n_samples == 0 or n_samples * (d + 1) > MAX_ENTRIES:
        return None
    if problem.lam > 0:  # edge weights are > 0 (Graph refuses 0)
        label = graph.components()
    else:  # without a penalty every node is on its own
        label = np.arange(problem.n, dtype=np.int64)
    comp_of_sample = label[node]
    comps, sample_comp = np.unique(comp_of_sample, return_inverse=True)  # components with samples only
    n_comp = comps.size
    # variables: w (n_comp x d, row-major) then t (n_comp); rows: -(y_k x_k^T w_c) + t_c <= 0
    rows = np.repeat(np.arange(n_samples), d + 1)
    cols = np.column_stack([sample_comp[:, None] * d + np.arange(d)[None, :], n_comp * d + sample_comp])
    vals = np.column_stack([-(y[:, None] * X), np.ones(n_samples)])
    A = sp.csr_matrix((vals.ravel(), (rows, cols.ravel())), shape=(n_samples, n_comp * (d + 1)))
    cost = np.concatenate([np.zeros(n_comp * d), -np.ones(n_comp)])
    bounds = [(-1.0, 1.0)] * (n_comp * d) + [(0.0, 1.0)] * n_comp
    res = linprog(cost, A_ub=A, b_ub=np.zeros(n_samples), bounds=bounds, method="highs",
                  options={"time_limit": float(time_limit), "presolve": True})
    if res.status != 0 or res.x is None:
        return None
    w_all = res.x[: n_comp * d].reshape(n_comp, d)
    t = res.x[n_comp * d:]
    u = np.finfo(float).eps / 2
    gamma = (d + 2) * u / (1 - (d + 2) * u)
    for c in np.argsort(-t)[:3]:  # the most clearly separated components first
        if t[c] <= 0:
            break
        members = sample_comp == c
        w = w_all[c]
        margins = y[members] * (X[members] @ w)
        bound = gamma * (np.abs(X[members]) @ np.abs(w)) * 1.01
        if np.all(margins - bound > 0):
            nodes = np.flatnonzero(label == comps[c])
            direction = np.zeros((problem.n, d))
            direction[nodes] = w
            return Separation(component=nodes, direction=direction, margin=float(margins.min()),
                              n_samples=int(members.sum()))
    return None
