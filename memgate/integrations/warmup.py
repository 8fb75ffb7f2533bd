"""The servers' background warm-up: load a :class:`memgate.Memory`'s encoder model and learned
gate in a thread while the server already accepts connections.

    warmup = Warmup(memory)             # starts loading at once
    warmup.ready                        # False until both are loaded (/health says it)
    warmup.wait(timeout=30)             # before a call that embeds or scores: returns once they
                                        # are loaded, raises WarmingUp after the timeout

Calls that embed nothing (list, get, history) never wait. A load that fails is re-raised by every
``wait`` as a one-line ``WarmupFailed`` (the server answers it as an error, not as "warming up").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Optional

WAIT_SECONDS = 30.0  # how long a call that needs the encoder or the gate waits for them


class WarmingUp(RuntimeError):
    """The encoder and the gate are still loading (the call may be retried shortly)."""


class WarmupFailed(RuntimeError):
    """Loading the encoder or the gate failed (the message says why)."""


class Warmup:
    """Run ``load`` (default ``memory.warm_up``) once in a daemon thread; ``ready``, ``wait``,
    ``status``."""

    def __init__(self, memory: Any = None, *, load: Optional[Callable[[], Any]] = None,
                 wait_seconds: float = WAIT_SECONDS, start: bool = True):
        if load is None and memory is None:
            raise ValueError("Warmup needs a memory or a load function")
        self._load = load if load is not None else memory.warm_up
        self.wait_seconds = float(wait_seconds)
        self._done = threading.Event()
        self._error: Optional[str] = None
        self._started_at: Optional[float] = None
        self._seconds: Optional[float] = None
        self._thread = threading.Thread(target=self._run, name="memgate-warmup", daemon=True)
        if start:
            self.start()

    def start(self) -> Warmup:
        if self._started_at is None:
            self._started_at = time.perf_counter()
            self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self._load()
        except BaseException as exc:  # noqa: BLE001 -- reported by wait() and status()
            self._error = " ".join(str(exc).split()) or type(exc).__name__
        finally:
            assert self._started_at is not None  # (set by start(), before the thread runs)
            self._seconds = time.perf_counter() - self._started_at
            self._done.set()

    @property
    def ready(self) -> bool:
        return self._done.is_set() and self._error is None

    def wait(self, timeout: Optional[float] = None) -> None:
        """Return once loaded; ``WarmingUp`` after ``timeout`` seconds (default
        ``wait_seconds``); ``WarmupFailed`` naming the failure if the load failed."""
        if not self._done.wait(self.wait_seconds if timeout is None else timeout):
            raise WarmingUp("memgate is warming up (loading the encoder and the gate); "
                            "retry in a few seconds")
        if self._error is not None:
            raise WarmupFailed(f"memgate could not load the encoder or the gate: {self._error}")

    def status(self) -> dict[str, Any]:
        """``{"ready", "seconds", "error"}`` (seconds: how long the load took, once done)."""
        return {"ready": self.ready, "seconds": None if self._seconds is None else round(self._seconds, 2),
                "error": self._error}


__all__ = ["WAIT_SECONDS", "Warmup", "WarmingUp", "WarmupFailed"]
