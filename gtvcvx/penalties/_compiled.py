"""Compiled kernels of the penalties' hot paths (numba, loaded on first use so ``import gtvcvx``
does not load it).

The functions are plain Python; :func:`load` returns them compiled (:func:`gtvcvx._jit.njit`). A
penalty calls them only from :data:`gtvcvx._jit.MIN_ENTRIES` flow entries on (its NumPy form
below), and only for the row projections it declares (:attr:`Penalty.conjugate_prox_rows`).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from .._jit import njit

prange = range  # numba.prange once compiled (gtvcvx._jit.njit)
__all__ = ["ROW_PROJECTIONS", "load", "project_rows"]

#: The row projections :func:`project_rows` runs, by the name a penalty declares.
ROW_PROJECTIONS = {"l2_ball": 1, "box": 2}


def project_rows(U, caps, kind, out):
    """``out_e <-`` the projection of ``u_e`` onto the ball of radius ``c_e`` (``kind`` 1: the
    Euclidean ball, ``u c / max(||u||_2, c)``; 2: the box ``[-c, c]^d``), in one pass that reads
    ``U`` once (the NumPy form copies it, then reads and writes the copy twice). A NaN stays NaN."""
    m, d = U.shape
    for e in prange(m):
        c = caps[e]
        if kind == 1:
            sq = 0.0
            for k in range(d):
                sq += U[e, k] * U[e, k]
            f = 1.0
            if sq > c * c:
                f = c / np.sqrt(sq)
            for k in range(d):
                out[e, k] = U[e, k] * f
        else:
            for k in range(d):
                v = U[e, k]
                if v > c:  # comparisons, not min/max: a NaN stays NaN (as in np.clip)
                    v = c
                elif v < -c:
                    v = -c
                out[e, k] = v
    return out


@cache
def load(parallel: bool = False):
    """``{name: compiled function}`` (numba imported here; ``parallel``: the threaded build)."""
    (project,) = njit(project_rows, purpose="the compiled penalty kernels", parallel=parallel)
    fixed_U, fixed_caps = np.zeros((1, 1)), np.ones(1)
    fixed_U.flags.writeable = fixed_caps.flags.writeable = False  # read-only arrays: other numba types
    for U in (np.zeros((1, 1)), fixed_U):
        for caps in (np.ones(1), fixed_caps):  # (a problem's capacities are read-only)
            project(U, caps, 1, np.zeros((1, 1)))
    return {"project_rows": project}
