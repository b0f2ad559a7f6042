"""Sparse symmetric factorizations: Intel oneMKL PARDISO where installed, SuperLU otherwise.

PARDISO (through ``py-mkl-pardiso``, a pybind11 wrapper with MKL linked statically; Linux and
Windows on x86-64) is a supernodal direct solver, on one thread in these wheels (CPU time equals
wall time, measured). On the digits 10-NN graph's node system (8,985 unknowns in 5 x 5 blocks,
6.8e8 flops per factorization) a numeric refactorization takes 30-45 ms, SuperLU
(:func:`scipy.sparse.linalg.splu`, supernodal but unsymmetric) 260-330 ms and Clarabel's QDLDL
(simplicial) about 550 ms. SuperLU stays the fallback where the wheel does not exist (other
platforms), below :data:`PARDISO_MIN_SIZE`, or where PARDISO reports a failure.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

__all__ = ["block_indices", "pardiso_available", "SymmetricFactor", "symmetric_solver", "PARDISO_MIN_SIZE"]

#: :func:`symmetric_solver` uses PARDISO from this order on; below, SuperLU's lighter setup wins
#: (measured on the certificate's Grams, PARDISO vs SuperLU: the 15 x 15 grid with d = 11, order
#: 2,475, 18.7 vs 13.0 ms; a 2-D 5-NN graph, 1,000 nodes, d = 4, order 4,000, 25 vs 17 ms; the
#: digits 5-NN graph, d = 5, order 8,985, 76 vs 225 ms). Those PARDISO times included its wrapper's row-by-row
#: check (~7 us a row, :func:`_pardiso_solver`); without it (2026-11-29, 7-run medians, setup and one solve):
#: a 20 x 20 grid with d = 5, order 2,000, 8.0 vs 11.9 ms; a 5-NN graph of 1,000 points, d = 4, 15.8 vs 32.9 ms;
#: chains SuperLU (2,000 nodes, d = 3: 7.3 vs 5.7 ms). The threshold stays: a few milliseconds either way.
PARDISO_MIN_SIZE = 5000


def block_indices(block_rows, block_cols, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Scalar row and column indices, each ``(B, d, d)``, of ``d x d`` blocks placed at block
    positions ``(block_rows[b], block_cols[b])`` of a matrix with ``d x d`` blocks (entry
    ``(b, k, l)`` is row ``d block_rows[b] + k``, column ``d block_cols[b] + l``)."""
    within = np.arange(d)
    rows = (np.asarray(block_rows)[:, None, None] * d + within[None, :, None]).repeat(d, axis=2)
    cols = (np.asarray(block_cols)[:, None, None] * d + within[None, None, :]).repeat(d, axis=1)
    return rows, cols


@cache
def _pardiso():
    """The ``pymklpardiso`` module, or ``None`` where it is not installed (or does not load)."""
    try:
        import pymklpardiso
    except Exception:  # ImportError, or an OSError of a wheel that does not load on this CPU
        return None
    return pymklpardiso


def pardiso_available() -> bool:
    """Whether PARDISO can be used (``py-mkl-pardiso`` imports)."""
    return _pardiso() is not None


class SymmetricFactor:
    """Factorizations of symmetric matrices that keep one sparsity pattern (an interior-point
    method's reduced systems): the symbolic analysis is done once, each :meth:`factor` is numeric.

    Parameters
    ----------
    pattern : scipy.sparse matrix
        The upper triangle (diagonal included) of every matrix to come, in CSR with sorted
        indices; only its structure is used.
    positive_definite : bool
        PARDISO's Cholesky (``mtype`` 2) when True, else its Bunch-Kaufman ``LDL^T`` (``-2``).

    Raises
    ------
    RuntimeError
        From :meth:`factor` when PARDISO fails (a zero or negative pivot): the caller decides
        (more regularization, another method).
    """

    def __init__(self, pattern, positive_definite: bool = True):
        module = _pardiso()
        if module is None:
            raise ImportError("SymmetricFactor needs py-mkl-pardiso (pip install py-mkl-pardiso; Linux/Windows x86-64)")
        self._module = module
        self._pattern = sp.csr_matrix(pattern, copy=True)
        self._pattern.sort_indices()
        rows = np.repeat(np.arange(self._pattern.shape[0]), np.diff(self._pattern.indptr))
        if self._pattern.shape[0] != self._pattern.shape[1] or (self._pattern.indices < rows).any():
            raise ValueError(f"SymmetricFactor's pattern must be a square upper triangle, got shape "
                             f"{self._pattern.shape} with entries below the diagonal")
        self._mtype = module.MTYPE_REAL_SYM_POSDEF if positive_definite else module.MTYPE_REAL_SYM_INDEF
        self._solver = None
        self.size = self._pattern.shape[0]

    @property
    def nnz(self) -> int:
        """Entries of the upper triangle."""
        return int(self._pattern.nnz)

    def factor(self, values: np.ndarray) -> None:
        """Factor the matrix whose upper-triangle CSR values (in the pattern's order) are ``values``."""
        values = np.ascontiguousarray(values, dtype=float)
        if self._solver is None:
            self._pattern.data = values.copy()
            self._solver = _pardiso_solver(self._module, self._pattern, self._mtype)
        else:
            self._solver.refactor(values)

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """``A^{-1} rhs`` for a vector (or an ``(size, k)`` array) with the last factors."""
        return np.asarray(self._solver.solve(np.ascontiguousarray(rhs, dtype=float)))


class _CompiledPardiso:
    """py-mkl-pardiso's compiled solver with its wrapper's ``refactor`` / ``solve``."""

    def __init__(self, solver):
        self.refactor, self.solve = solver.refactor_values, solver.solve


def _pardiso_solver(module, upper, mtype):
    """``module.PardisoSolver(upper, mtype)`` (symbolic analysis and first factorization) by the wrapper's own
    steps on its compiled solver: the wrapper checks the upper triangle row by row in Python (~7 us a row,
    0.43 s of a 20,000-node chain's 60,000-row system whose factorization takes 0.06 s; its check is
    :class:`SymmetricFactor`'s, vectorized). The wrapper itself where the compiled class is not as expected."""
    compiled = getattr(getattr(module, "_mkl_pardiso", None), "PardisoSolver", None)
    if compiled is None or not all(hasattr(compiled, name) for name in ("set_pattern", "factor", "refactor_values",
                                                                         "solve")):
        return module.PardisoSolver(upper, mtype)
    solver = compiled(mtype, 0)
    solver.set_pattern(ia=np.asarray(upper.indptr, dtype=np.int64), ja=np.asarray(upper.indices, dtype=np.int64),
                       n=upper.shape[0])
    solver.factor(np.ascontiguousarray(upper.data, dtype=np.float64))
    return _CompiledPardiso(solver)


def symmetric_solver(matrix):
    """A solve function ``b -> A^{-1} b`` of the symmetric (nonsingular) sparse ``matrix``: PARDISO's
    ``LDL^T`` where available and the order is at least :data:`PARDISO_MIN_SIZE`, else (or when
    PARDISO fails) SuperLU with a minimum-degree ordering of ``A + A^T``."""
    if _pardiso() is not None and matrix.shape[0] >= PARDISO_MIN_SIZE:
        try:
            factor = SymmetricFactor(sp.triu(matrix, format="csr"), positive_definite=False)
            factor.factor(factor._pattern.data)
            return factor.solve
        except RuntimeError:  # PARDISO refused the matrix: SuperLU below
            pass
    return spla.splu(sp.csc_matrix(matrix), permc_spec="MMD_AT_PLUS_A").solve
