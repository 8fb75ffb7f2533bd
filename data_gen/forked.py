"""Run a piece of the generator in a forked child process, side by side with the parent.

Generation is pure-Python and CPU-bound, and its pieces are independent once their inputs exist
(the groups of one split, the output files). A forked child inherits those inputs without copying
or pickling them, computes its piece and sends the result back through a pipe; the parent merges
results in a fixed order, so the files are byte-identical to a serial run (tested).

The result travels in ``marshal`` format (plain data only: dicts, lists, tuples, strings, numbers;
no pickle, so nothing callable can ride along), written by our own child a moment earlier and never
read from disk. A child's exception comes back as its class path, arguments and traceback text and
is raised again with the same class. Where ``os.fork`` does not exist, or only one CPU is usable,
or ``MEMGATE_DATAGEN_WORKERS=1``, everything runs inline in the calling process.
"""

from __future__ import annotations

import importlib
import marshal
import os
import signal
import traceback
from collections.abc import Callable
from typing import Any

WORKERS_ENV = "MEMGATE_DATAGEN_WORKERS"


def worker_count() -> int:
    """2 when a second CPU is usable and fork exists; ``MEMGATE_DATAGEN_WORKERS`` overrides (1 or 2)."""
    raw = os.environ.get(WORKERS_ENV)
    if raw is not None:
        if raw.strip() not in ("1", "2"):
            raise ValueError(f"{WORKERS_ENV} must be 1 or 2, got {raw!r}")
        wanted = int(raw)
    else:
        usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        wanted = 2 if usable >= 2 else 1
    return wanted if hasattr(os, "fork") else 1


class Forked:
    """``fn(*args)`` computed in a forked child (or inline when ``inline``); ``result()`` returns it,
    or re-raises the child's exception (same type) with the child's traceback as its cause."""

    def __init__(self, fn: Callable[..., Any], *args: Any, inline: bool = False):
        self._pid = None
        if inline:
            self._value = fn(*args)
            return
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: compute, send, exit without running the parent's atexit handlers
            os.close(read_fd)
            code = 0
            try:
                payload = marshal.dumps((True, fn(*args)))
            except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent
                text = "".join(traceback.format_exception(exc))
                cls = type(exc)
                try:
                    payload = marshal.dumps((False, (cls.__module__, cls.__qualname__, exc.args, text)))
                except ValueError:  # arguments that are not plain data
                    payload = marshal.dumps((False, (cls.__module__, cls.__qualname__, None, text)))
                code = 1
            try:
                with os.fdopen(write_fd, "wb") as out:
                    out.write(payload)
            finally:
                os._exit(code)
        os.close(write_fd)
        self._pid, self._fd = pid, read_fd

    def close(self) -> None:
        """Stop and reap a child whose result is no longer wanted (the parent failed first); a
        no-op once ``result()`` has run."""
        if self._pid is None:
            return
        os.close(self._fd)
        try:
            os.kill(self._pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(self._pid, 0)
        self._pid = None

    def __enter__(self) -> Forked:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def result(self) -> Any:
        if self._pid is None:
            return self._value
        with os.fdopen(self._fd, "rb") as pipe:
            payload = pipe.read()
        _, status = os.waitpid(self._pid, 0)
        self._pid = None
        if not payload:
            raise RuntimeError(f"a forked data_gen worker died without a result (wait status {status})")
        ok, value = marshal.loads(payload)
        if not ok:  # the child's own exception (e.g. DataConflict), its traceback chained as the cause
            module, qualname, exc_args, text = value
            cause = RuntimeError(f"in the forked data_gen worker:\n{text}")
            rebuilt = _rebuild(module, qualname, exc_args)
            if rebuilt is None:
                raise cause
            raise rebuilt from cause
        self._value = value
        return value


def _rebuild(module: str, qualname: str, args) -> BaseException | None:
    """The child's exception, rebuilt from its class path and arguments (None when impossible)."""
    if args is None:
        return None
    try:
        cls: Any = importlib.import_module(module)
        for part in qualname.split("."):
            cls = getattr(cls, part)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            return cls(*args)
    except Exception:  # noqa: BLE001 - a class that cannot be found or built: the cause says it all
        return None
    return None
