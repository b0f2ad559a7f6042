r"""The kernel-sparse classification problem: data, dictionary, objectives and certificates.

Notation (one place; every solver uses it): samples ``x_n`` with labels ``y_n in {-1, +1}``,
``n = 1..N``; atoms ``j = 1..M`` with weights ``Delta_j``; ``K_nj = k(x_n, s_j; w_j)``;
``s = sqrt(2 gamma)``.

* L0 primal: ``min_alpha sum_j Delta_j (alpha_j^2 / 2 + gamma [alpha_j != 0])``
  s.t. ``y_n f(x_n) >= 1 - eps`` with ``f(x_n) = (K (Delta * alpha))_n``.
* Convex-envelope primal: the same with the per-coefficient cost replaced by its biconjugate
  ``psi(a) = s |a| + pos(|a| - s)^2 / 2``.
* Dual: ``max_{lambda >= 0} (1 - eps)/N sum(lambda) - sum_j Delta_j pos(abar_j^2 / 2 - gamma)``,
  ``abar = (1/N) K^T (y * lambda)``.
* Soft margin ``C``: hinge slack ``xi_n >= 0`` on each margin with cost ``(C / N) sum(xi)`` in the
  primal, and the box ``0 <= lambda <= C`` in the dual.
"""

from __future__ import annotations

import functools
import numbers

import numpy as np
import scipy.sparse as sp

from .._validation import as_float_array, check_magnitude
from .dictionary import Dictionary

__all__ = ["RKHSProblem", "encode_labels", "psi", "phi_conjugate"]


def encode_labels(y, name: str = "y"):
    """Map any two classes to ``-1 / +1``.

    Returns
    -------
    y_pm : ndarray of float, classes : ndarray
        ``classes[0]`` (the smaller one in sorted order) maps to ``-1``, ``classes[1]`` to ``+1``.
    """
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of labels, got shape {arr.shape}")
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise ValueError(f"{name} must not contain NaN or infinite labels")
    if arr.dtype.kind == "O":
        if any(v is None or (isinstance(v, float) and not np.isfinite(v)) for v in arr):
            raise ValueError(f"{name} must not contain missing labels (None / NaN)")
    try:
        classes, inverse = np.unique(arr, return_inverse=True)
    except TypeError as exc:
        raise ValueError(f"{name} holds labels that cannot be compared ({exc})") from None
    if classes.size != 2:
        raise ValueError(f"{name} must hold exactly two classes, got {classes.size}"
                         + (f": {classes.tolist()[:5]}" if classes.size else ""))
    return np.where(inverse == 1, 1.0, -1.0), classes


def psi(a, gamma: float) -> np.ndarray:
    """Convex envelope of ``a^2/2 + gamma [a != 0]``: ``s |a| + pos(|a| - s)^2 / 2``, ``s = sqrt(2 gamma)``."""
    s = np.sqrt(2.0 * gamma)
    a = np.abs(a)
    return s * a + 0.5 * np.maximum(a - s, 0.0) ** 2


def phi_conjugate(b, gamma: float) -> np.ndarray:
    """Conjugate of ``a^2/2 + gamma [a != 0]`` (and of its envelope): ``pos(b^2/2 - gamma)``."""
    return np.maximum(0.5 * np.square(b) - gamma, 0.0)


def _check_positive(x, name, *, allow_zero=False):
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not np.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
        raise ValueError(f"{name} must be a finite number {'>=' if allow_zero else '>'} 0, got {x!r}")
    return float(x)


class RKHSProblem:
    r"""A kernel-sparse classification problem on fixed data and a fixed dictionary.

    Parameters
    ----------
    X : array_like (N, d)
        Samples.
    y : array_like (N,)
        Labels in ``{-1, +1}`` (use :func:`encode_labels` for other classes).
    dictionary : Dictionary
    gamma : float
        L0 weight ``gamma > 0``.
    eps : float
        Margin slack ``eps >= 0``; the margin constraints are ``y_n f(x_n) >= 1 - eps``.
    C : float or None
        Soft-margin bound on the multipliers (``None``: hard margin, the paper's problem).
    K : scipy.sparse matrix or ndarray (N, M), optional
        A precomputed kernel matrix (otherwise ``dictionary.kernel_matrix(X, storage="auto")``:
        dense when mostly filled, CSR otherwise). A dense array is kept dense.

    Notes
    -----
    The dual objective in the minimization form used by the fast core is
    ``F(lambda) = -c^T lambda + h(Phi lambda)`` with ``c = (1 - eps)/N 1``,
    ``Phi = (1/N) K^T diag(y)`` and ``h(u) = sum_j Delta_j pos(u_j^2/2 - gamma)``, so that
    ``D(lambda) = -F(lambda)`` and ``abar = Phi lambda``.

    The dual gradient where it exists is ``(1/N) (1 - eps - y * f_lambda(x))`` with
    ``f_lambda`` the function of the recovered coefficients: ascent raises the multipliers of
    the violated margins (the paper's dual (sub)gradient method).
    """

    def __init__(self, X, y, dictionary: Dictionary, gamma: float, eps: float, C: float | None = None, *, K=None):
        if not isinstance(dictionary, Dictionary):
            raise TypeError(f"dictionary must be a gtvcvx.rkhs.Dictionary, got {type(dictionary).__name__}")
        X = as_float_array(X, "X", ndim=2)
        if X.shape[0] == 0:
            raise ValueError("X must hold at least one sample")
        check_magnitude(X, "X")
        if X.shape[1] != dictionary.dim:
            raise ValueError(f"X must have {dictionary.dim} columns (the dictionary's dimension), got {X.shape[1]}")
        y = as_float_array(y, "y", ndim=1, shape=(X.shape[0],))
        if not np.isin(y, (-1.0, 1.0)).all():
            raise ValueError("y must hold labels -1 / +1 (map other classes with encode_labels)")
        self.X = X
        self.y = y
        self.dictionary = dictionary
        self.gamma = _check_positive(gamma, "gamma")
        self.eps = _check_positive(eps, "eps", allow_zero=True)
        self.C = None if C is None else _check_positive(C, "C")
        if K is None:
            K = dictionary.kernel_matrix(X, storage="auto")
        elif isinstance(K, np.ndarray):
            K = as_float_array(K, "K", ndim=2)  # finite, float64
        else:
            K = sp.csr_matrix(K, dtype=float)
        if K.shape != (X.shape[0], dictionary.n_atoms):
            raise ValueError(f"K must have shape {(X.shape[0], dictionary.n_atoms)}, got {K.shape}")
        self.dense = isinstance(K, np.ndarray)
        if self.dense:
            self.Kt = np.ascontiguousarray(K.T)  # atoms x samples: atom rows contiguous (a view if K is F-ordered)
            K = self.Kt.T
        self.K = K
        self.Delta = np.asarray(dictionary.weights, dtype=float)
        self.N, self.M = K.shape
        self.s = float(np.sqrt(2.0 * self.gamma))
        self.c = np.full(self.N, (1.0 - self.eps) / self.N)

    @functools.cached_property
    def PhiT(self):
        """``Phi^T = (1/N) diag(y) K``, (N, M), stored like ``K`` (CSR or dense)."""
        if self.dense:
            return self.K * (self.y / self.N)[:, None]
        return sp.csr_matrix(sp.diags(self.y / self.N) @ self.K)

    @functools.cached_property
    def Phi(self):
        """``Phi = (1/N) K^T diag(y)``, (M, N), stored like ``K``.

        Sparse: the CSR layout of ``K^T`` is :attr:`K_columns`' CSC layout, so ``Phi`` is built from its
        arrays (one transpose of ``K`` instead of two; entries bit-identical to ``(diag(y/N) K)^T``; the
        index arrays copied, so that no in-place operation on one matrix can change the other)."""
        if self.dense:
            return self.PhiT.T
        columns = self.K_columns
        data = columns.data * (self.y / self.N)[columns.indices]
        return sp.csr_matrix((data, columns.indices.copy(), columns.indptr.copy()), shape=(self.M, self.N))

    @functools.cached_property
    def nonnegative(self) -> bool:
        """Whether every entry of ``K`` is >= 0 (always for Gaussian atoms): then ``|K| = K``."""
        values = self.K if self.dense else self.K.data
        return bool(values.size == 0 or values.min() >= 0)

    @functools.cached_property
    def abs_K(self):
        """``|K|`` entrywise (``K`` itself when nonnegative; cached: the rounding bounds use it)."""
        if self.nonnegative:
            return self.K
        return np.abs(self.K) if self.dense else abs(self.K)

    @property
    def density(self) -> float:
        """Fraction of ``K``'s entries that are stored nonzeros."""
        stored = np.count_nonzero(self.Kt) if self.dense else self.K.nnz
        return float(stored) / max(self.N * self.M, 1)

    def kernel_rows(self, idx):
        """The kernel matrix of samples ``idx`` (for subproblems), stored like ``K``."""
        return self.Kt[:, idx].T if self.dense else self.K[idx]

    # --------------------------------------------------------------------------- dual side
    @property
    def upper(self) -> float:
        """Upper bound of the multipliers (``inf`` for the hard margin)."""
        return np.inf if self.C is None else self.C

    def abar(self, lam) -> np.ndarray:
        """``abar = (1/N) K^T (y * lambda)``."""
        if self.dense:
            return self.Kt @ (self.y * lam / self.N)
        return self.Phi @ lam

    def abar_with_bound(self, lam):
        """``abar`` and ``|Phi| |lambda| = (1/N) |K|^T |lambda|`` (for rounding bounds), in one pass
        over ``K`` when it is dense and nonnegative."""
        lam = np.asarray(lam, dtype=float)
        if self.dense and self.nonnegative:
            both = self.Kt @ np.column_stack([self.y * lam, np.abs(lam)])
            both /= self.N
            return both[:, 0], both[:, 1]
        if self.nonnegative:  # |Phi| = Phi diag(y): the atom-major product (|K|^T is column-major, 2x slower)
            return self.abar(lam), self.Phi @ (self.y * np.abs(lam))
        return self.abar(lam), self.abs_K.T @ (np.abs(lam) / self.N)

    def dual_objective(self, lam, abar=None) -> float:
        """``D(lambda)``; ``-inf`` when ``lambda`` is outside ``[0, C]``."""
        lam = np.asarray(lam, dtype=float)
        if lam.shape != (self.N,) or not np.isfinite(lam).all() or (lam < 0).any() or (lam > self.upper).any():
            return float("-inf")
        if abar is None:
            abar = self.abar(lam)
        return float(self.c @ lam - self.Delta @ phi_conjugate(abar, self.gamma))

    def recover_alpha(self, lam=None, *, abar=None) -> np.ndarray:
        """L0 primal recovery: ``alpha_j = abar_j`` if ``abar_j^2 > 2 gamma`` else 0."""
        if abar is None:
            abar = self.abar(lam)
        return np.where(np.square(abar) > 2.0 * self.gamma, abar, 0.0)

    # --------------------------------------------------------------------------- primal side
    def decision(self, alpha) -> np.ndarray:
        """``f(x_n) = (K (Delta * alpha))_n`` on the training samples (over the atoms in use only
        when they are fewer than half: rows of ``K^T``, or columns of :attr:`K_columns`)."""
        w = self.Delta * np.asarray(alpha, dtype=float)
        support = np.flatnonzero(w)
        if support.size < 0.5 * self.M:
            if self.dense:  # contiguous rows of K^T
                return w[support] @ self.Kt[support]
            return self.K_columns[:, support] @ w[support]
        return self.K @ w

    @functools.cached_property
    def K_columns(self):
        """A sparse ``K`` stored by columns (CSC), for products with coefficients on few atoms
        (the bench instance, 3072 atoms, 39 % filled: 0.15 instead of 0.89 ms a product with 115)."""
        return self.K.tocsc()

    def margin_violation(self, alpha, f=None) -> np.ndarray:
        """``pos(1 - eps - y_n f(x_n))`` per sample."""
        if f is None:
            f = self.decision(alpha)
        return np.maximum(1.0 - self.eps - self.y * f, 0.0)

    def l0_cost(self, alpha) -> float:
        """``sum_j Delta_j (alpha_j^2/2 + gamma [alpha_j != 0])``."""
        alpha = np.asarray(alpha, dtype=float)
        return float(self.Delta @ (0.5 * alpha**2 + self.gamma * (alpha != 0)))

    def envelope_cost(self, alpha) -> float:
        """``sum_j Delta_j psi(alpha_j)``."""
        return float(self.Delta @ psi(alpha, self.gamma))

    def slack_cost(self, violation) -> float:
        """``(C/N) sum(xi)`` with ``xi`` the margin violation (0 for the hard margin)."""
        if self.C is None:
            return 0.0
        return float(self.C / self.N * np.sum(violation))

    def envelope_objective(self, alpha, f=None) -> float:
        """Envelope primal objective; for the hard margin ``inf`` when a margin is violated.
        ``f``: :meth:`decision` at ``alpha``, when the caller has it."""
        v = self.margin_violation(alpha, f)
        if self.C is None:
            return self.envelope_cost(alpha) if not (v > 0).any() else float("inf")
        return self.envelope_cost(alpha) + self.slack_cost(v)

    def l0_objective(self, alpha) -> float:
        """L0 primal objective; for the hard margin ``inf`` when a margin is violated."""
        v = self.margin_violation(alpha)
        if self.C is None:
            return self.l0_cost(alpha) if not (v > 0).any() else float("inf")
        return self.l0_cost(alpha) + self.slack_cost(v)

    def make_feasible(self, alpha, f=None):
        """Scale ``alpha`` so that every hard margin holds, if a positive scale can do it.

        ``f`` is linear in ``alpha``, so ``t alpha`` with ``t = max_n (1 - eps) / (y_n f(x_n))``
        is feasible whenever every ``y_n f(x_n) > 0`` (and ``t <= 1`` is never applied, i.e.
        a feasible ``alpha`` is returned unchanged).

        Returns
        -------
        ndarray or None
            ``None`` when no positive scale makes ``alpha`` feasible.
        """
        if f is None:
            f = self.decision(alpha)
        if self.eps >= 1.0:
            return np.asarray(alpha, dtype=float)
        yf = self.y * f
        target = 1.0 - self.eps
        if (yf >= target).all():
            return np.asarray(alpha, dtype=float)
        if (yf <= 0).any():
            return None
        t = float(np.max(target / yf))
        scaled = alpha * t
        # guard against rounding: the scaled point must satisfy every margin exactly
        short = target - self.y * self.decision(scaled)
        if (short > 0).any():
            scaled = scaled * (1.0 + 4 * np.finfo(float).eps + float(short.max()) / target)
            if (target - self.y * self.decision(scaled) > 0).any():
                return None
        return scaled
