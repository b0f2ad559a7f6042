"""BLAS thread limits, shared by the solvers, the baselines and the experiments.

Threaded level-1/level-2 BLAS on a busy small machine spends milliseconds synchronizing threads
per call, far more than the arithmetic of the small dense blocks these solvers use, so they run
with one BLAS thread by default. The limit is applied through one :class:`threadpoolctl.ThreadpoolController`
built on first use: building a controller scans the loaded shared libraries (about 2 ms), which
dominated short solves when ``threadpool_limits`` was entered afresh on every call.
"""

from __future__ import annotations

import contextlib
import functools

from ._validation import check_positive_int

__all__ = ["blas_threads", "single_threaded"]


@functools.lru_cache(maxsize=1)
def _controller():
    import scipy.linalg  # noqa: F401 - load SciPy's own BLAS first, so the controller sees it too
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def blas_threads(limit):
    """Context limiting BLAS to ``limit`` threads (an int >= 1), or leaving it alone (None).

    The solvers default to one thread; a caller with idle cores and large dense blocks may ask
    for more, or pass None to keep the process setting.
    """
    if limit is None:
        return contextlib.nullcontext()
    return _controller().limit(limits=check_positive_int(limit, "blas_threads"), user_api="blas")


def single_threaded(function):
    """Decorator: run ``function`` with BLAS limited to one thread (see the module docstring)."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with blas_threads(1):
            return function(*args, **kwargs)

    return wrapper
