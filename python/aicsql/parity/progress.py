"""A tiny progress bar on stderr for long parity scans.

Why not tqdm: the package depends on datafusion, pyarrow and pyyaml only,
and a scan needs nothing more than "how far, how fast, how long to go".

Two behaviours, chosen by whether the stream is a terminal:

* TTY: one line redrawn in place (at most ten times a second), from the
  start -- a person is watching.
* not a TTY (CI logs, ``nohup ... > log``): nothing for the first
  ``delay`` seconds, so quick scans leave no trace; after that one line per
  10 % step, so a long scan writes at most about ten lines instead of
  flooding the log.
"""

from __future__ import annotations

import sys
import time
from typing import Optional, TextIO


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class Progress:
    """Progress of ``total`` units of work, reported with :meth:`update`.

    ``enabled``: None = automatic (see the module docstring), False = silent,
    True = report even when the stream is not a TTY (still at most one line
    per 10 %, but without the initial delay).
    """

    WIDTH = 30  # characters of the bar itself
    REDRAW = 0.1  # seconds between two redraws on a TTY

    def __init__(
        self,
        total: int,
        label: str,
        *,
        stream: Optional[TextIO] = None,
        enabled: Optional[bool] = None,
        delay: float = 2.0,
    ):
        self.total = max(0, int(total))
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.delay = 0.0 if enabled else delay
        isatty = getattr(self.stream, "isatty", None)
        self.tty = bool(isatty and isatty())
        self.start = time.perf_counter()
        self.done = 0
        self._last_draw = -1.0
        self._last_decile = 0
        self._drawn = False

    # ---- reporting --------------------------------------------------------------

    def update(self, done: int) -> None:
        """Sets the amount of work done so far (not an increment)."""
        self.done = min(int(done), self.total) if self.total else int(done)
        if self.enabled is False:
            return
        now = time.perf_counter()
        elapsed = now - self.start
        finished = self.total and self.done >= self.total
        if self.tty:
            if finished or now - self._last_draw >= self.REDRAW:
                self._last_draw = now
                self._write("\r" + self._line(elapsed) + "\x1b[K")
            return
        if elapsed < self.delay:
            return
        decile = (10 * self.done // self.total) if self.total else 0
        if decile > self._last_decile:
            self._last_decile = decile
            self._write(self._line(elapsed) + "\n")

    def close(self) -> None:
        """Ends the bar's line (TTY); call once the work is finished."""
        if self.tty and self._drawn and self.enabled is not False:
            self._write("\n")
            self._drawn = False

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- formatting -------------------------------------------------------------

    def _line(self, elapsed: float) -> str:
        if self.total:
            fraction = self.done / self.total
            filled = int(self.WIDTH * fraction)
            bar = "#" * filled + "." * (self.WIDTH - filled)
            rate = self.done / elapsed if elapsed > 0 else 0.0
            eta = (self.total - self.done) / rate if rate > 0 else 0.0
            tail = f"eta {_duration(eta)}" if self.done < self.total else "done"
            # Slow units (a deployment search takes seconds) read better as seconds each.
            speed = f"{rate:,.0f}/s" if rate >= 1 or rate == 0 else f"{1 / rate:,.1f} s each"
            return (
                f"{self.label} [{bar}] {100 * fraction:5.1f}% {self.done:,}/{self.total:,} "
                f"{_duration(elapsed)} {speed} {tail}"
            )
        return f"{self.label} {self.done:,} {_duration(elapsed)}"

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()
        self._drawn = True
