"""Progress of long phases on stderr, with a rate and an ETA.

    with progress("routes synthetic_test/hybrid", total=len(queries), unit="query") as bar:
        for ...:
            bar.update()

On a terminal the line redraws in place (at most 5 times a second); off a terminal (a log file,
CI) a phase prints one line at most every ``interval`` seconds (10) and one closing line, so a
``make demo`` log shows every phase and its speed without flooding. ``--quiet`` (which sets
``MEMGATE_QUIET=1``) or ``MEMGATE_QUIET=1`` silences all of it.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Optional, TextIO

QUIET_ENV = "MEMGATE_QUIET"
OFF_TTY_INTERVAL = 10.0
TTY_INTERVAL = 0.2
QUIET_BELOW = 1.0


def quiet() -> bool:
    return os.environ.get(QUIET_ENV, "").strip().lower() not in ("", "0", "false", "no")


def set_quiet(value: bool = True) -> None:
    """What ``--quiet`` does: silence progress here and in child processes."""
    if value:
        os.environ[QUIET_ENV] = "1"


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    minutes, s = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{s:02d}s"
    hours, m = divmod(minutes, 60)
    return f"{hours}h{m:02d}m"


class Progress:
    def __init__(self, phase: str, total: Optional[int], unit: str = "item",
                 stream: Optional[TextIO] = None, interval: Optional[float] = None,
                 enabled: Optional[bool] = None):
        self.phase, self.total, self.unit = phase, total, unit
        self.units = unit[:-1] + "ies" if unit.endswith("y") else unit + "s"
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval if interval is not None else (TTY_INTERVAL if self.tty else OFF_TTY_INTERVAL)
        self.enabled = (not quiet()) if enabled is None else enabled
        self.count = 0
        self.started = time.perf_counter()
        self._last = self.started
        self.lines = 0

    def line(self, done: bool = False) -> str:
        elapsed = time.perf_counter() - self.started
        rate = self.count / elapsed if elapsed > 0 else 0.0
        if self.total:
            head = f"{self.phase}: {self.count}/{self.total} {self.units} ({100 * self.count / self.total:.0f}%)"
        else:
            head = f"{self.phase}: {self.count} {self.units}"
        speed = f"{rate:.1f} {self.unit}/s" if rate >= 1 or rate == 0 else f"{1 / rate:.1f} s/{self.unit}"
        if done:
            return f"{head} in {_duration(elapsed)}, {speed}"
        eta = f", ETA {_duration((self.total - self.count) / rate)}" if (self.total and rate > 0) else ""
        return f"{head}, {speed}{eta}"

    def _emit(self, text: str, final: bool) -> None:
        if not self.enabled:
            return
        if self.tty:
            self.stream.write("\r\033[K" + text + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self.lines += 1

    def update(self, n: int = 1) -> None:
        self.count += n
        now = time.perf_counter()
        if now - self._last >= self.interval:
            self._last = now
            self._emit(self.line(), final=False)

    def close(self) -> None:
        """The closing line; a phase shorter than ``QUIET_BELOW`` seconds that printed nothing
        stays silent (guards run short route passes many times per training)."""
        if self.lines or time.perf_counter() - self.started >= QUIET_BELOW:
            self._emit(self.line(done=True), final=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def progress(phase: str, total: Optional[int] = None, unit: str = "item", **kwargs) -> Progress:
    return Progress(phase, total, unit, **kwargs)
