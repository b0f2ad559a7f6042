"""numba, loaded on first use: the one place that imports it and sets the compile options.

``import gtvcvx`` does not load numba; the compiled kernels (the chain solver's dynamic program,
the fast core's edge sweeps, the squared-error prox) call :func:`njit` when first needed.
"""

from __future__ import annotations

__all__ = ["MIN_ENTRIES", "njit"]

#: Array entries from which a kernel that has a NumPy twin runs compiled: below it, loading numba
#: (about 0.6 s in a fresh process) costs more than the kernel saves.
MIN_ENTRIES = 1 << 20


def njit(*functions, purpose: str):
    """``functions`` compiled by numba (``cache=True``: on disk when the package directory is
    writable; ``nogil=True``: Dask parts on one worker run them side by side), in order.

    ``purpose`` names what needs them in the error raised when numba is missing.
    """
    try:
        import numba
    except ImportError as exc:  # pragma: no cover - numba is a dependency
        raise ImportError(f"{purpose} needs numba (pip install numba)") from exc
    jit = numba.njit(cache=True, nogil=True)
    return tuple(jit(function) for function in functions)
