"""Peak memory of a block of code (:class:`MemoryMeter`: resident set size or tracemalloc), and the
process's resident set size and its resettable peak (:func:`rss_mb`, :func:`reset_peak_rss`, :func:`peak_rss_mb`).

Used by reports and benchmarks so that every peak-memory number is measured the same way.
"""

from __future__ import annotations

import gc
import os
import threading
import tracemalloc

__all__ = ["MemoryMeter", "release_free_memory", "reset_peak_rss", "peak_rss_mb", "rss_mb"]

# ---------------------------------------------------------------------------------------
_LIBC = []


def release_free_memory() -> None:
    """Collect garbage and return freed heap memory to the OS (glibc ``malloc_trim``), so that
    the resident set size afterwards reflects live memory only."""
    gc.collect()
    if not _LIBC:
        try:
            import ctypes

            _LIBC.append(ctypes.CDLL("libc.so.6"))
        except (OSError, AttributeError):
            _LIBC.append(None)
    libc = _LIBC[0]
    if libc is not None:
        try:
            libc.malloc_trim(0)
        except AttributeError:  # not glibc
            pass


def _rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def reset_peak_rss() -> bool:
    """Start a new peak window of the process's resident set size: Linux resets its high-water
    mark ``VmHWM`` to the current size when ``5`` is written to ``/proc/self/clear_refs``.
    Returns False where that is not possible (then only the peak since the process started is known)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return peak_rss_mb() is not None
    except OSError:
        return False


def _status_mb(field: str) -> float | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024.0  # kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def peak_rss_mb() -> float | None:
    """The process's peak resident set size since the last :func:`reset_peak_rss` (or its start),
    MiB; None without ``/proc``."""
    return _status_mb("VmHWM")


def rss_mb() -> float | None:
    """The process's resident set size now, MiB; None without ``/proc``."""
    size = _rss_bytes()
    return None if size is None else size / 2.0**20


class MemoryMeter:
    """Peak memory of a block of code, in MiB (``.peak_mb`` after the block).

    ``method="rss"`` (default on Linux): the resident set size sampled every 5 ms from
    ``/proc/self/statm`` in a background thread, peak minus the value before the block. Before
    the block, freed memory is handed back to the OS (``gc.collect`` and glibc's
    ``malloc_trim``) so that allocations of the block show up as growth. It sees native
    allocations of compiled backends (Clarabel, SCS); it may miss peaks shorter than the
    sampling interval and memory reused from allocator caches that could not be trimmed, so
    it is a lower bound. ``method="tracemalloc"``: the peak of Python's allocation
    tracer (NumPy arrays included, native backend allocations not), with its overhead on
    Python-heavy code such as CVXPY's compilation. ``None`` measures nothing.
    """

    COLUMNS = {"rss": "peak_rss_delta_mb", "tracemalloc": "peak_traced_mb"}

    def __init__(self, method: str | None = "rss", interval: float = 0.005):
        if method not in (None, "rss", "tracemalloc"):
            raise ValueError(f"memory must be 'rss', 'tracemalloc' or None, got {method!r}")
        if method == "rss" and _rss_bytes() is None:
            method = "tracemalloc"  # no /proc on this platform
        self.method = method
        self.interval = interval
        self.peak_mb = float("nan")
        self._stop = threading.Event()
        self._thread = None
        self._peak = 0
        self._base = 0
        self._was_tracing = False

    @property
    def column(self) -> str | None:
        return self.COLUMNS.get(self.method)

    def _sample(self):
        while not self._stop.wait(self.interval):
            value = _rss_bytes()
            if value is not None and value > self._peak:
                self._peak = value

    def __enter__(self):
        if self.method == "rss":
            release_free_memory()
            self._base = self._peak = _rss_bytes() or 0
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        elif self.method == "tracemalloc":
            self._was_tracing = tracemalloc.is_tracing()
            if not self._was_tracing:
                tracemalloc.start()
            tracemalloc.reset_peak()
            self._base = tracemalloc.get_traced_memory()[0]
        return self

    def __exit__(self, *exc):
        if self.method == "rss":
            self._stop.set()
            self._thread.join()
            last = _rss_bytes() or 0
            self.peak_mb = max(self._peak, last) - self._base
            self.peak_mb = max(self.peak_mb, 0) / 2**20
        elif self.method == "tracemalloc":
            peak = tracemalloc.get_traced_memory()[1]
            if not self._was_tracing:
                tracemalloc.stop()
            self.peak_mb = max(peak - self._base, 0) / 2**20
        return False
