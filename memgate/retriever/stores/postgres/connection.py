"""``PostgresStore``'s connection to the server: the URL with its password redacted, one
connection opened (and re-opened after the server went away) with the pgvector types and the
session settings the store relies on, and database errors turned into memgate errors whose text
never holds the password.

A connection that breaks (the server restarted, the network dropped) makes the call in progress
raise :class:`StoreUnavailableError`; the next call opens a new connection, so a long-running
process recovers without a restart. A read that finds the connection broken before it sent
anything retries once on a fresh connection; a write never retries (whether the server committed
it before the connection dropped is unknown to the client: the caller re-reads and decides).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Optional
from urllib.parse import unquote

from memgate.retriever.errors import StoreError

try:  # optional dependency: the [postgres] extra
    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg import sql
except ImportError:  # pragma: no cover - exercised only without the extra
    psycopg = None  # type: ignore[assignment]
    sql = None  # type: ignore[assignment]
    register_vector = None  # type: ignore[assignment]

CONNECT_TIMEOUT_S = 10
PASSWORD_ENV = "PGPASSWORD"  # libpq's own variable (used when the URL has no password)
_SECRET = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


class StoreUnavailableError(StoreError, ConnectionError):
    """The database could not be reached (or the connection broke during the call); the next
    call reconnects. Nothing is known to be applied of a write that raised it: re-read."""


def _userinfo(url: str) -> tuple[str, str, str]:
    """``(scheme, userinfo, rest)`` of a URL, the userinfo being everything before the last
    ``@`` of the authority and path (a password holding an unencoded ``/`` or ``@`` included)."""
    scheme, sep, tail = url.partition("://")
    if not sep:
        return "", "", url
    head, q, query = tail.partition("?")
    userinfo, at, rest = head.rpartition("@")
    if not at:
        return scheme, "", tail
    return scheme, userinfo, rest + q + query


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (URL or ``key=value`` form; in a URL,
    everything between the user name and the last ``@``)."""
    scheme, userinfo, rest = _userinfo(url)
    if scheme and ":" in userinfo:
        return f"{scheme}://{userinfo.partition(':')[0]}:***@{rest}"
    return _SECRET.sub(r"\1***", url)


def secrets_of(url: str) -> list[str]:
    """Every spelling of the URL's password that an error text might quote (raw, decoded)."""
    out = []
    _, userinfo, _ = _userinfo(url)
    if ":" in userinfo:
        raw = userinfo.partition(":")[2]
        out += [raw, unquote(raw)]
    for match in _SECRET.finditer(url):
        raw = match.group(2).strip("'")
        out += [raw, unquote(raw)]
    # a password with an unencoded delimiter is cut up by the URL parser, whose errors quote a
    # piece ("invalid port 'pw-start'"): every piece of 3+ characters is a secret too
    out += [piece for secret in list(out) for piece in re.split(r"[/@:?#&=]", secret) if len(piece) >= 3]
    return sorted({s for s in out if s}, key=len, reverse=True)


def scrub(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return _SECRET.sub(r"\1***", text)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class Connection:
    """One psycopg connection (autocommit; writes open explicit transactions), guarded by the
    store's lock, with reconnect-on-next-call and password-free errors."""

    def __init__(self, url: str, *, on_connect: Callable[[Any], None], lock: threading.RLock):
        if psycopg is None:
            raise ImportError("PostgresStore needs psycopg 3 and pgvector (pip install 'memgate[postgres]')")
        if not isinstance(url, str) or not url:
            raise ValueError("field 'url' must be a PostgreSQL connection URL (postgresql://...)")
        self._url = url
        self.where = redact_url(url)
        self._secrets = secrets_of(url)
        self._on_connect = on_connect
        self._lock = lock
        self._conn: Optional[Any] = None
        self.closed = False

    def error(self, exc: BaseException, doing: str) -> StoreError:
        """A memgate error for a database error (its text scrubbed of the password)."""
        message = scrub(f"the PostgreSQL store at {self.where}: {doing} failed: {_one_line(exc)}",
                        self._secrets)
        if psycopg is not None and isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
            return StoreUnavailableError(message + " (the next call reconnects)")
        return StoreError(message)

    def connect(self) -> Any:
        """The live connection (a new one when there is none or the last one broke)."""
        if self.closed:
            raise StoreError(f"the PostgreSQL store at {self.where} is closed")
        if self._conn is not None and not self._conn.closed and not self._conn.broken:
            return self._conn
        self._drop()
        try:
            conn = psycopg.connect(self._url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - every failure becomes one scrubbed error
            raise self.error(exc, "connecting") from None
        try:
            self._on_connect(conn)
        except StoreError:
            conn.close()
            raise
        except Exception as exc:  # noqa: BLE001
            conn.close()
            raise self.error(exc, "preparing the connection") from None
        self._conn = conn
        return conn

    def _drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - a broken connection may fail to close
                pass
            self._conn = None

    @contextmanager
    def session(self, doing: str) -> Iterator[Any]:
        """The connection for one call (under the store's lock); database errors leave as
        scrubbed memgate errors, and a connection that broke is dropped (the next call opens a
        new one)."""
        with self._lock:
            conn = self.connect()
            try:
                yield conn
            except StoreError:
                raise
            except Exception as exc:  # noqa: BLE001
                if psycopg is not None and isinstance(exc, psycopg.Error):
                    if conn.broken or conn.closed:
                        self._drop()
                    raise self.error(exc, doing) from None
                raise

    def read(self, doing: str, body: Callable[[Any], Any]) -> Any:
        """Run ``body(conn)`` (a read); on a connection that turns out broken, once more on a
        fresh one."""
        for attempt in (0, 1):
            try:
                with self.session(doing) as conn:
                    return body(conn)
            except StoreUnavailableError:
                if attempt == 1 or self.closed:
                    raise

    def close(self) -> None:
        with self._lock:
            self.closed = True
            self._drop()


__all__ = ["CONNECT_TIMEOUT_S", "Connection", "StoreUnavailableError", "psycopg", "redact_url",
           "register_vector", "scrub", "secrets_of", "sql"]
