"""The PostgreSQL store's audit trail in its own schema: the table ``audit`` (one event per row,
``id`` in insertion order), an :class:`memgate.retriever.audit.log.AuditLog` that every reader
of a log (``history``, ``memgate audit --url``, ``memgate store export`` and ``verify``) takes
as it takes a JSONL file, through :meth:`TableAuditLog.events`.

A write's store events are inserted in the write's own transaction (no outbox: they commit or
roll back with it); a query's events (``retrieved``, ``exposed``, ``disclosed``) are one
``INSERT`` each. The checks are the file log's: a known event type, no content key.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from memgate.retriever.audit.log import EVENTS, AuditError, AuditLog, _check_no_text

if TYPE_CHECKING:
    from memgate.retriever.stores.postgres.backend import PostgresBackend


def encode(events: Iterable[Mapping[str, Any]]) -> list[tuple[str]]:
    """The rows of ``events`` (each checked as the file log checks it)."""
    rows = []
    for event in events:
        if event.get("event") not in EVENTS:
            raise AuditError(f"unknown audit event {event.get('event')!r}")
        _check_no_text(event, "")
        rows.append((json.dumps(event, sort_keys=True, ensure_ascii=False, allow_nan=False),))
    return rows


class TableAuditLog(AuditLog):
    """The audit log of a :class:`PostgresBackend`, in its schema's ``audit`` table."""

    path = None  # type: ignore[assignment]  # (no file: readers call events())

    def __init__(self, backend: PostgresBackend) -> None:  # (no file, so no AuditLog.__init__)
        self._backend = backend
        self.torn_lines = 0  # (rows are whole: a transaction commits all of them or none)
        self.fsync = True

    @property
    def where(self) -> str:
        return f"the audit table of {self._backend.describe()}"

    def append_many(self, events: Iterable[Mapping[str, Any]]) -> None:
        rows = encode(events)
        if not rows:
            return
        b = self._backend
        with b.lock:
            if b._tx is not None:  # (inside a write: commits with it)
                b._run_many("INSERT INTO {s}.audit (event) VALUES (%s)", rows)
                return
            with b.db.session("writing audit events") as conn, conn.transaction():
                conn.cursor().executemany(b._q("INSERT INTO {s}.audit (event) VALUES (%s)"), rows)

    def clear(self) -> None:
        """Erase the whole history (a store reset): every row of the audit table deleted in one
        transaction; the next erasure pass or ``compact()`` prunes their page versions."""
        b = self._backend
        with b.lock:
            with b.db.session("clearing the audit table") as conn, conn.transaction():
                conn.execute(b._q("DELETE FROM {s}.audit"))
        b.eraser.request()

    def events(self) -> Iterator[dict[str, Any]]:
        """Every event in insertion order (read in pages of 10,000 rows)."""
        last = 0
        while True:
            with self._backend.lock:
                rows = self._backend._rows("SELECT id, event FROM {s}.audit WHERE id > %s ORDER BY id "
                                           "LIMIT 10000", (last,))
            for _, event in rows:
                yield json.loads(event)
            if len(rows) < 10_000:
                return
            last = rows[-1][0]


__all__ = ["TableAuditLog", "encode"]
