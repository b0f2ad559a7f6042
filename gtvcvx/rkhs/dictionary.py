"""Dictionaries of Gaussian kernel atoms and their (sparsified) kernel matrices.

An atom ``j`` is a center ``s_j``, a width ``w_j`` and a quadrature weight ``Delta_j``; the
function represented by coefficients ``alpha`` is ``f(x) = sum_j Delta_j alpha_j k(x, s_j; w_j)``
with ``k(x, s; w) = exp(-||x - s||^2 / (2 w^2))``.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp

from .._validation import allocation_guard, as_float_array, check_magnitude, check_memory

__all__ = ["Dictionary", "gaussian_kernel", "DEFAULT_THRESHOLD"]

#: Kernel values below this fraction of the kernel's maximum (1) are dropped.
DEFAULT_THRESHOLD = 1e-8

#: Dense block size (rows x atoms) used while building a sparse kernel matrix.
_BLOCK_ELEMENTS = 2_000_000

#: ``storage="auto"`` keeps a kernel matrix dense when at least this fraction of its entries is kept.
DENSE_FRACTION = 0.5


def gaussian_kernel(X, centers, widths) -> np.ndarray:
    """Dense Gaussian kernel ``k(x_n, s_j; w_j) = exp(-||x_n - s_j||^2 / (2 w_j^2))``.

    Parameters
    ----------
    X : array_like (N, d)
    centers : array_like (M, d)
    widths : array_like (M,) or float

    Returns
    -------
    ndarray (N, M)
    """
    X = as_float_array(X, "X", ndim=2)
    centers = as_float_array(centers, "centers", ndim=2, shape=(None, X.shape[1]))
    check_magnitude(X, "X")  # (squared distances)
    check_magnitude(centers, "centers")
    widths = np.broadcast_to(as_float_array(widths, "widths"), (centers.shape[0],))
    n, m = X.shape[0], centers.shape[0]
    # X @ S.T, the broadcast sum and the scaled copy: three dense (N, M) float64 arrays
    what = f"rkhs.gaussian_kernel: a dense kernel matrix of {n} samples x {m} atoms"
    check_memory(24.0 * n * m, what)
    with allocation_guard(what):
        return np.exp(-_sq_dist(X, centers) / (2.0 * widths**2))


def _sq_dist(X: np.ndarray, S: np.ndarray) -> np.ndarray:
    d2 = (X * X).sum(1)[:, None] + (S * S).sum(1)[None, :] - 2.0 * (X @ S.T)
    return np.maximum(d2, 0.0, out=d2)


def _as_bounds(bounds) -> np.ndarray:
    b = as_float_array(bounds, "bounds")
    if b.ndim == 1 and b.shape == (2,):
        b = b[None, :]
    if b.ndim != 2 or b.shape[1] != 2 or b.shape[0] < 1:
        raise ValueError(f"bounds must be a sequence of (low, high) pairs, one per dimension, got shape {b.shape}")
    if not (b[:, 1] > b[:, 0]).all():
        raise ValueError(f"bounds must have low < high in every dimension, got {b.tolist()}")
    return b


def _as_widths(widths) -> np.ndarray:
    w = as_float_array(widths, "widths")
    w = np.atleast_1d(w)
    if w.ndim != 1 or w.size == 0:
        raise ValueError(f"widths must be a positive number or a non-empty list of positive numbers, got {widths!r}")
    if not (w > 0).all():
        raise ValueError(f"widths must be > 0, got {w.tolist()}")
    return w


def _as_weights(weights, m: int) -> np.ndarray:
    w = np.atleast_1d(as_float_array(weights, "weights"))
    if w.size == 1:
        w = np.full(m, float(w[0]))
    if w.shape != (m,):
        raise ValueError(f"weights must be a number or have one entry per atom ({m}), got shape {w.shape}")
    if not (w > 0).all():
        raise ValueError("weights (quadrature weights Delta_j) must be > 0")
    return w


def _check_atoms(n_points: int, d: int, widths, what: str) -> None:
    """Refuse a multiresolution dictionary (points x widths atoms) over the memory budget."""
    n_widths = np.size(widths) if np.ndim(widths) else 1
    atoms = float(n_points) * float(n_widths)
    # the points, the tiled centers and the constructor's copy, plus widths and weights
    check_memory(8.0 * (n_points * d + 2.0 * atoms * d + 4.0 * atoms),
                 f"{what}: a dictionary of {atoms:.0f} atoms in dimension {d}")


#: Bytes per stored nonzero of a CSR kernel matrix (float64 value, int32/int64 column index),
#: counted twice: the row blocks and their stacked copy coexist.
_NNZ_BYTES = 2 * (8 + 8)


class Dictionary:
    r"""A finite dictionary of Gaussian kernel atoms ``(s_j, w_j, Delta_j)``.

    Parameters
    ----------
    centers : array_like (M, d)
        Kernel centers ``s_j``.
    widths : array_like (M,) or float
        Kernel widths ``w_j > 0``.
    weights : array_like (M,) or float
        Quadrature weights ``Delta_j > 0``.
    threshold : float
        Relative sparsification threshold: kernel values ``k < threshold`` (the kernel's maximum
        is 1) are dropped from kernel matrices. ``0`` keeps every entry.

    Notes
    -----
    The dictionary discretizes the integral representation
    ``f(x) = int alpha(s, w) k(x, s; w) ds dw`` of the paper by the quadrature
    ``f(x) = sum_j Delta_j alpha_j k(x, s_j; w_j)``. Every atom of a multiresolution dictionary
    is a (center, width) pair; :meth:`grid`, :meth:`sobol` and :meth:`from_samples` repeat each
    center once per width, the widths varying slowest.

    A kernel matrix has entries ``K_nj = k(x_n, s_j; w_j)``; an entry is below the threshold
    exactly when ``||x_n - s_j||^2 > 2 w_j^2 log(1 / threshold)``, so with narrow widths most
    entries vanish and the matrix is stored as ``scipy.sparse.csr_matrix``. Every solver
    (fast core and CVXPY references) uses the same sparsified matrix, so they solve the same
    problem.

    References
    ----------
    .. [1] M. Peifer, L. F. O. Chamon, S. Paternain, A. Ribeiro, "Sparse multiresolution
       representations with adaptive kernels", IEEE Transactions on Signal Processing, 68, 2020.
    """

    def __init__(self, centers, widths, weights=1.0, *, threshold: float = DEFAULT_THRESHOLD):
        centers = as_float_array(centers, "centers", copy=True)
        check_magnitude(centers, "centers")  # (squared distances)
        if centers.ndim == 1:
            centers = centers[:, None]
        if centers.ndim != 2 or centers.shape[0] == 0 or centers.shape[1] == 0:
            raise ValueError(f"centers must be a non-empty 2-D array (M, d), got shape {centers.shape}")
        m = centers.shape[0]
        w = _as_widths(widths)
        if w.size == 1:
            w = np.full(m, float(w[0]))
        if w.shape != (m,):
            raise ValueError(f"widths must be a number or have one entry per center ({m}), got shape {w.shape}")
        if (isinstance(threshold, bool) or not isinstance(threshold, numbers.Real)
                or not 0 <= float(threshold) < 1):
            raise ValueError(f"threshold must be a number in [0, 1), got {threshold!r}")
        self.centers = centers
        self.widths = w.astype(float)
        self.weights = _as_weights(weights, m)
        self.threshold = float(threshold)
        for arr in (self.centers, self.widths, self.weights):
            arr.setflags(write=False)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def grid(cls, bounds, points_per_dim, widths, *, weights=None,
             threshold: float = DEFAULT_THRESHOLD) -> "Dictionary":
        """Centers on a regular grid (cell midpoints) times every width; ``Delta_j`` = cell volume
        unless ``weights`` is given.

        Parameters
        ----------
        bounds : sequence of (low, high)
            One pair per dimension.
        points_per_dim : int or sequence of int
            Grid points per dimension.
        widths : float or sequence of float
            Kernel widths; each grid point is repeated once per width.
        """
        b = _as_bounds(bounds)
        d = b.shape[0]
        ppd = np.atleast_1d(np.asarray(points_per_dim))
        if ppd.dtype.kind not in "iu" or (ppd < 1).any():
            raise ValueError(f"points_per_dim must be a positive integer or one per dimension, got {points_per_dim!r}")
        if ppd.size == 1:
            ppd = np.full(d, int(ppd[0]))
        if ppd.shape != (d,):
            raise ValueError(f"points_per_dim must have one entry per dimension ({d}), got {points_per_dim!r}")
        n_total = int(np.prod(ppd.astype(float)))
        if n_total > 10_000_000:
            raise ValueError(f"points_per_dim gives {n_total} grid points; use Dictionary.sobol in high dimension")
        _check_atoms(n_total, d, widths, f"Dictionary.grid(points_per_dim={points_per_dim!r})")
        h = (b[:, 1] - b[:, 0]) / ppd
        axes = [b[i, 0] + (np.arange(ppd[i]) + 0.5) * h[i] for i in range(d)]
        pts = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, d)
        return cls._multiresolution(pts, widths, float(np.prod(h)) if weights is None else weights, threshold)

    @classmethod
    def sobol(cls, bounds, n: int, widths, *, seed=0, weights=None,
              threshold: float = DEFAULT_THRESHOLD) -> "Dictionary":
        """Centers from a scrambled Sobol sequence in a box (``scipy.stats.qmc``) times every width.

        ``Delta_j`` = box volume / ``n`` (quasi-Monte Carlo quadrature of the box) unless ``weights``
        is given; in high dimension the box volume is astronomically large or small, so pass
        ``weights`` (e.g. ``1 / n``, quadrature against a probability measure on the box).
        """
        from scipy.stats import qmc

        b = _as_bounds(bounds)
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        # random_base2 draws the next power of two >= n points (at most 2 n)
        _check_atoms(2 * n, b.shape[0], widths, f"Dictionary.sobol(n={n})")
        sampler = qmc.Sobol(d=b.shape[0], scramble=True, seed=seed)
        m = int(np.ceil(np.log2(n)))
        pts = sampler.random_base2(m)[:n]  # balanced prefix of a power-of-two sequence
        pts = qmc.scale(pts, b[:, 0], b[:, 1])
        volume = float(np.prod(b[:, 1] - b[:, 0]))
        return cls._multiresolution(pts, widths, volume / n if weights is None else weights, threshold)

    @classmethod
    def from_samples(cls, X, widths, *, weights=None, threshold: float = DEFAULT_THRESHOLD) -> "Dictionary":
        """Centers at the given points (e.g. training samples) times every width.

        ``Delta_j`` = 1 / (number of points) unless ``weights`` is given (quadrature against the
        empirical distribution of the points).
        """
        X = as_float_array(X, "X", ndim=2)
        if X.shape[0] == 0:
            raise ValueError("X must hold at least one point")
        weight = 1.0 / X.shape[0] if weights is None else weights
        _check_atoms(X.shape[0], X.shape[1], widths, f"Dictionary.from_samples (X of shape {X.shape})")
        return cls._multiresolution(X, widths, weight, threshold)

    @classmethod
    def _multiresolution(cls, pts, widths, weight, threshold):
        w = _as_widths(widths)
        centers = np.tile(pts, (w.size, 1))
        wid = np.repeat(w, pts.shape[0])
        if np.ndim(weight) == 0:
            weights = weight
        else:
            weights = np.tile(_as_weights(weight, pts.shape[0]), w.size)
        return cls(centers, wid, weights, threshold=threshold)

    # ------------------------------------------------------------------ basic properties
    @property
    def n_atoms(self) -> int:
        return self.centers.shape[0]

    def __len__(self) -> int:
        return self.n_atoms

    @property
    def dim(self) -> int:
        return self.centers.shape[1]

    def __repr__(self) -> str:
        return (f"Dictionary(n_atoms={self.n_atoms}, dim={self.dim}, widths={np.unique(self.widths).tolist()}, "
                f"threshold={self.threshold:g})")

    def subset(self, index) -> "Dictionary":
        """The atoms ``index`` (an index array or boolean mask) as a new dictionary."""
        idx = np.asarray(index)
        return Dictionary(self.centers[idx], self.widths[idx], self.weights[idx], threshold=self.threshold)

    # ------------------------------------------------------------------ kernel matrices
    def kernel_matrix(self, X, *, name: str = "X", storage: str = "sparse"):
        """Kernel matrix ``K_nj = k(x_n, s_j; w_j)`` with entries ``< threshold`` dropped (set to 0).

        Built in dense blocks of bounded size (no Python loop over samples or atoms).

        Parameters
        ----------
        X : array_like (N, d)
        name : str
            The argument's name in error messages.
        storage : {"sparse", "auto"}
            ``"sparse"``: a CSR matrix. ``"auto"``: a dense Fortran-ordered array (``K.T`` is
            C-contiguous: each atom's column is contiguous) when at least :data:`DENSE_FRACTION`
            of the entries are kept, CSR otherwise. The first block decides; a dense result that
            ends up below the fraction is converted. Dense BLAS products are ~3x faster than CSR
            ones on such matrices, and CSR would store them in at least 3/4 of the bytes.

        Returns
        -------
        scipy.sparse.csr_matrix or ndarray (N, M)
        """
        if storage not in ("sparse", "auto"):
            raise ValueError(f"storage must be 'sparse' or 'auto', got {storage!r}")
        X = as_float_array(X, name, ndim=2)
        if X.shape[1] != self.dim:
            raise ValueError(f"{name} must have {self.dim} columns (the dictionary's dimension), got {X.shape[1]}")
        check_magnitude(X, name)  # (squared distances)
        n, m = X.shape[0], self.n_atoms
        if n == 0 or m == 0:
            return sp.csr_matrix((n, m))
        inv = 1.0 / (2.0 * self.widths**2)
        cut = np.inf if self.threshold == 0 else np.log(1.0 / self.threshold)
        rows = max(1, _BLOCK_ELEMENTS // m)
        what = f"Dictionary.kernel_matrix: the kernel matrix of {n} samples x {m} atoms"
        block_bytes = 24.0 * min(rows, n) * m  # one block: three float64 arrays of rows x m

        def block(start, out=None):  # exp(-E) of every atom against samples start..start+rows, (m, rows)
            E = _sq_dist(self.centers, X[start:start + rows])
            E *= inv[:, None]
            if np.isfinite(cut):
                E[E > cut] = np.inf
            return np.exp(-E, out=E if out is None else out)

        check_memory(block_bytes, what)
        with allocation_guard(what):
            first = block(0)
        if storage == "auto" and np.count_nonzero(first) >= DENSE_FRACTION * first.size:
            check_memory(block_bytes + 8.0 * n * m, what)
            with allocation_guard(what):
                Kt = np.empty((m, n))  # atoms x samples, C-ordered; returned transposed
                Kt[:, :first.shape[1]] = first
                for start in range(first.shape[1], n, rows):  # loop over sample blocks, not samples
                    block(start, out=Kt[:, start:start + rows])
                K = Kt.T
                return K if np.count_nonzero(Kt) >= DENSE_FRACTION * n * m else sp.csr_matrix(K)
        # without sparsification every entry is stored; with a threshold the nonzeros are counted
        check_memory(block_bytes + (_NNZ_BYTES * float(n) * m if self.threshold == 0 else 0.0), what)
        with allocation_guard(what):
            blocks, nnz = [], 0
            for start in range(0, n, rows):
                blocks.append(sp.csr_matrix((first if start == 0 else block(start)).T))
                nnz += blocks[-1].nnz
                check_memory(block_bytes + _NNZ_BYTES * nnz, f"{what} (at least {nnz} entries above the threshold)")
            K = sp.vstack(blocks, format="csr")
            K.sort_indices()
        return K

    def evaluate(self, X, alpha, *, name: str = "X") -> np.ndarray:
        """``f(x) = sum_j Delta_j alpha_j k(x, s_j; w_j)`` at the rows of ``X`` (only nonzero atoms used)."""
        alpha = as_float_array(alpha, "alpha", ndim=1, shape=(self.n_atoms,))
        support = np.flatnonzero(alpha)
        X = as_float_array(X, name, ndim=2)
        if support.size == 0:
            if X.shape[1] != self.dim:
                raise ValueError(f"{name} must have {self.dim} columns (the dictionary's dimension), got {X.shape[1]}")
            return np.zeros(X.shape[0])
        sub = self.subset(support)
        return sub.kernel_matrix(X, name=name, storage="auto") @ (sub.weights * alpha[support])
