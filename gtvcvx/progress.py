"""A small dependency-free progress bar for long command-line runs (``gtvcvx report``).

On a terminal the bar is redrawn in place (``\\r``); elsewhere (CI logs, pipes) every step is
printed once on its own line, so logs stay readable. Everything goes to ``stderr``; a
disabled bar (``--quiet``) prints nothing.
"""

from __future__ import annotations

import sys
import time

__all__ = ["Progress"]


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

    Examples
    --------
    >>> bar = Progress(3, enabled=False)
    >>> bar.start("spec_a: fast"); bar.advance(); bar.close()
    """

    def __init__(self, total: int, *, stream=None, enabled: bool = True, width: int = 24,
                 interactive: bool | None = None, clock=time.perf_counter):
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
        self.t0 = clock()
        self._last_len = 0

    # ------------------------------------------------------------------
    def bar(self) -> str:
        """The current line, e.g. ``[#######.........]  3/8  12.4s  quick_chain: CLARABEL``."""
        total = max(self.total, 1)
        filled = min(self.width, int(round(self.width * self.done / total)))
        elapsed = _format_seconds(self.clock() - self.t0)
        counter = f"{self.done}/{self.total}".rjust(2 * len(str(self.total)) + 1)
        line = f"[{'#' * filled}{'.' * (self.width - filled)}] {counter} {elapsed:>6}"
        return f"{line}  {self.label}" if self.label else line

    def _draw(self, final: bool = False) -> None:
        if not self.enabled:
            return
        line = self.bar()
        if self.interactive:
            pad = " " * max(0, self._last_len - len(line))
            self.stream.write("\r" + line + pad + ("\n" if final else ""))
            self._last_len = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def start(self, label: str) -> None:
        """Show that ``label`` (e.g. ``"spec: solver"``) is being worked on."""
        self.label = str(label)
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
        if self.interactive and self._last_len:
            self.stream.write("\r" + " " * self._last_len + "\r")
            self._last_len = 0
        self.stream.write(str(message) + "\n")
        self.stream.flush()
        if self.interactive and self.label:
            self._draw()

    def close(self) -> None:
        """Draw the final state."""
        self.label = f"done in {_format_seconds(self.clock() - self.t0)}"
        self._draw(final=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            self.close()
        elif self.enabled and self.interactive and self._last_len:
            self.stream.write("\n")
            self.stream.flush()
        return False
