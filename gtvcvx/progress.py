"""A small dependency-free progress bar for long command-line runs (``gtvcvx report``).

On a terminal the bar is redrawn in place (``\\r``); elsewhere (CI logs, pipes) every step is
printed once on its own line, so logs stay readable. Everything goes to ``stderr``; a
disabled bar (``--quiet``) prints nothing.

Nothing is silent for long: while a step runs, a heartbeat redraws the bar every
``heartbeat`` seconds (on a terminal) or prints a ``still running`` line (elsewhere) with the
time spent in the step, and long computations inside a step (paper studies, sweeps) report
their own position with :func:`substep`, which shows next to the step's label.
"""

from __future__ import annotations

import contextvars
import sys
import threading
import time

from ._text import printable

__all__ = ["Progress", "substep"]

_CURRENT: contextvars.ContextVar = contextvars.ContextVar("gtvcvx_progress", default=None)


def substep(label: str, done: int | None = None, total: int | None = None) -> None:
    """Report the position inside the current step (e.g. ``substep("lam", 3, 12)``); a no-op outside a run.

    The step's bar is the :class:`Progress` entered with ``with`` around the work.

    Parameters
    ----------
    label : str
        What is being worked on inside the step.
    done, total : int, optional
        Position, shown as ``label 3/12``.
    """
    bar = _CURRENT.get()
    if bar is not None:
        bar.substep(label, done, total)


def _format_seconds(seconds: float) -> str:
    seconds = max(0.0, float(seconds))
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class Progress:
    """Progress over ``total`` steps, showing the step being worked on.

    Parameters
    ----------
    total : int
        Number of steps (e.g. spec x solver runs).
    stream : file, optional
        Where to draw (default ``sys.stderr``).
    enabled : bool
        False draws nothing.
    width : int
        Characters of the bar itself.
    interactive : bool, optional
        Redraw in place; default: ``stream.isatty()``.
    heartbeat : float or None
        Seconds between redraws (terminal) or ``still running`` lines (logs) while a step runs;
        None turns the heartbeat off.

    Examples
    --------
    >>> bar = Progress(3, enabled=False)
    >>> bar.start("spec_a: fast"); bar.advance(); bar.close()
    """

    def __init__(self, total: int, *, stream=None, enabled: bool = True, width: int = 24,
                 interactive: bool | None = None, clock=time.perf_counter, heartbeat: float | None = 5.0):
        self.total = max(int(total), 0)
        self.stream = sys.stderr if stream is None else stream
        self.enabled = bool(enabled)
        self.width = int(width)
        if interactive is None:
            isatty = getattr(self.stream, "isatty", None)
            interactive = bool(isatty()) if callable(isatty) else False
        self.interactive = interactive
        self.clock = clock
        self.done = 0
        self.label = ""
        self.sublabel = ""
        self.t0 = clock()
        self.step_t0 = self.t0
        self._last_len = 0
        self.heartbeat = heartbeat
        self.closed = False
        self._last_write = time.monotonic()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread = None
        self._context_token = None

    # ------------------------------------------------------------------
    def eta(self) -> float | None:
        """Seconds left, from the mean time of the finished steps (None before the first)."""
        if self.closed or not self.done or not self.total or self.done >= self.total:
            return None
        return (self.clock() - self.t0) / self.done * (self.total - self.done)

    def bar(self) -> str:
        """The current line, e.g. ``[#######.........]  3/8  12.4s  ~40s left  quick_chain: CLARABEL``."""
        total = max(self.total, 1)
        filled = min(self.width, int(round(self.width * self.done / total)))
        now = self.clock()
        elapsed = _format_seconds(now - self.t0)
        counter = f"{self.done}/{self.total}".rjust(2 * len(str(self.total)) + 1)
        line = f"[{'#' * filled}{'.' * (self.width - filled)}] {counter} {elapsed:>6}"
        eta = self.eta()
        if eta is not None:
            line += f"  ~{_format_seconds(eta)} left"
        if self.label:  # labels name specs and files: escaped (see gtvcvx._text)
            line += f"  {printable(self.label)}"
            if self.sublabel:
                line += f" ({printable(self.sublabel)})"
            if now - self.step_t0 >= 10.0 and not self.closed:
                line += f" [{_format_seconds(now - self.step_t0)} in this step]"
        return line

    def _draw(self, final: bool = False) -> None:
        if not self.enabled:
            return
        with self._lock:
            line = self.bar()
            if self.interactive:
                pad = " " * max(0, self._last_len - len(line))
                self.stream.write("\r" + line + pad + ("\n" if final else ""))
                self._last_len = len(line)
            else:
                self.stream.write(line + "\n")
            self.stream.flush()
            self._last_write = time.monotonic()

    def _beat(self) -> None:
        """Heartbeat thread: redraw, or in logs print a line when none was written for two beats."""
        while not self._stop.wait(self.heartbeat):
            if not self.label or self.closed:
                continue
            if self.interactive or time.monotonic() - self._last_write >= 2 * self.heartbeat - 1e-9:
                self._draw()

    def _start_heartbeat(self) -> None:
        if self.enabled and self.heartbeat and self._thread is None:
            self._thread = threading.Thread(target=self._beat, name="gtvcvx-progress", daemon=True)
            self._thread.start()

    def substep(self, label: str, done: int | None = None, total: int | None = None) -> None:
        """Show the position inside the current step (drawn by the next redraw or heartbeat)."""
        text = str(label)
        if done is not None:
            text += f" {done}/{total}" if total is not None else f" {done}"
        with self._lock:
            self.sublabel = text

    def start(self, label: str) -> None:
        """Show that ``label`` (e.g. ``"spec: solver"``) is being worked on."""
        with self._lock:
            self.label = str(label)
            self.sublabel = ""
            self.step_t0 = self.clock()
        self._start_heartbeat()
        self._draw()

    def advance(self, steps: int = 1) -> None:
        """Mark ``steps`` steps as finished."""
        self.done = min(self.total, self.done + int(steps)) if self.total else self.done + int(steps)
        if self.interactive:
            self._draw()

    def note(self, message: str) -> None:
        """Print a message on its own line (above the bar on a terminal)."""
        if not self.enabled:
            return
        with self._lock:
            if self.interactive and self._last_len:
                self.stream.write("\r" + " " * self._last_len + "\r")
                self._last_len = 0
            self.stream.write(str(message) + "\n")
            self.stream.flush()
        if self.interactive and self.label:
            self._draw()

    def close(self) -> None:
        """Stop the heartbeat and draw the final state."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            self.closed = True
            self.label = f"done in {_format_seconds(self.clock() - self.t0)}"
            self.sublabel = ""
        self._draw(final=True)

    def __enter__(self):
        self._context_token = _CURRENT.set(self)
        return self

    def __exit__(self, *exc):
        if self._context_token is not None:
            _CURRENT.reset(self._context_token)
            self._context_token = None
        if exc[0] is None:
            self.close()
            return False
        self._stop.set()
        if self.enabled and self.interactive and self._last_len:
            with self._lock:
                self.stream.write("\n")
                self.stream.flush()
        return False
