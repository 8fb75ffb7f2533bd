"""Append-only JSONL audit log: one memory id followed through stored W -> retrieved R ->
exposed E -> disclosed Y (docs/design.md section 3, "Audit trace").

Each line is one JSON event with ``event``, ``event_id`` (unique; a reader drops duplicates, which
a crash between appending and acknowledging an outbox row can produce) and ``ts``. Events:

- store: ``stored``, ``updated``, ``superseded``, ``retired``, ``flagged_for_review``,
  ``reviewed``, ``forgotten``, ``relearned`` (a write that repeated forgotten content, stored
  with the caller's explicit re-consent); each names its record by ``memory_id`` and
  ``namespace`` (ids are scoped per namespace);
- query: ``retrieved`` (query id, principal, readable namespaces, purpose, intent, route, ranks
  with scores and actions, Kleene-excluded ids with their reasons, gate drops, unresolved flags,
  gate / policy / encoder versions), ``exposed`` (what the caller put in the prompt: must be a
  subset of the query's retrieved ids), ``disclosed`` (ids whose protected markers a scan found in
  the answer the caller reported).

The log never holds a memory's text, a marker, a query text or an answer: :meth:`AuditLog.append`
refuses events carrying such keys, and every event is built from ids and metadata only.
Lines are appended with a single ``write`` on an ``O_APPEND`` descriptor and fsynced; a reader
skips a torn final line (a process killed mid-append) and reports it.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from memgate.retriever.errors import StoreFullError, is_disk_full

AUDIT_FORMAT = "memgate-audit/1"
STORE_EVENTS = (
    "stored",
    "updated",
    "superseded",
    "retired",
    "flagged_for_review",
    "reviewed",
    "forgotten",
    "relearned",
    "deduplicated",
    "expired",
    "reset",
)
QUERY_EVENTS = ("retrieved", "exposed", "disclosed")
EVENTS = STORE_EVENTS + QUERY_EVENTS
# Keys that would carry content; an event holding any of them anywhere is refused.
FORBIDDEN_KEYS = frozenset({"text", "markers", "answer", "query_text", "content", "detail"})


class AuditError(ValueError):
    """An event breaks the audit contract (E <= R <= W, no text, known event type)."""


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _check_no_text(value: Any, path: str) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key in FORBIDDEN_KEYS:
                raise AuditError(f"audit event key {path}{key!r} would put content in the log")
            _check_no_text(item, f"{path}{key}.")
    elif isinstance(value, (list, tuple)):
        for item in value:
            _check_no_text(item, path)


def make_event(event_type: str, /, clock: Callable[[], str] = utc_now, **payload: Any) -> dict[str, Any]:
    """A complete event dict (validated, not yet written)."""
    if event_type not in EVENTS:
        raise AuditError(f"unknown audit event {event_type!r}; known: {EVENTS}")
    event = {"event": event_type, "event_id": uuid.uuid4().hex, "ts": clock(), "format": AUDIT_FORMAT}
    event.update(payload)
    _check_no_text(event, "")
    return event


class AuditLog:
    """An append-only JSONL file shared by the store (write events) and the retriever."""

    def __init__(self, path: str | os.PathLike[str], fsync: bool = True):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        self._lock = threading.Lock()
        self.torn_lines = 0

    def append(self, event: Mapping[str, Any]) -> None:
        self.append_many([event])

    def append_many(self, events: Iterable[Mapping[str, Any]]) -> None:
        lines = []
        for event in events:
            if event.get("event") not in EVENTS:
                raise AuditError(f"unknown audit event {event.get('event')!r}")
            _check_no_text(event, "")
            lines.append(json.dumps(event, sort_keys=True, ensure_ascii=False, allow_nan=False))
        if not lines:
            return
        data = ("\n".join(lines) + "\n").encode("utf-8")
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                start = os.fstat(fd).st_size
                # A torn previous line (killed mid-append) must not swallow this one.
                if start > 0 and not self._ends_with_newline():
                    data = b"\n" + data
                written = 0
                try:
                    while written < len(data):
                        written += os.write(fd, data[written:])
                    if self.fsync:
                        os.fsync(fd)
                except OSError as exc:  # a full disk: leave no part of these lines behind
                    if os.fstat(fd).st_size == start + written:  # (unless another process appended)
                        os.ftruncate(fd, start)
                    if is_disk_full(exc):
                        raise StoreFullError(f"{self.path}: the disk is full ({exc}); "
                                             f"{len(lines)} audit event(s) not written") from exc
                    raise
            finally:
                os.close(fd)

    def clear(self) -> None:
        """Erase the whole history (a store reset): the file's bytes are overwritten with zeros,
        synced, then truncated to nothing."""
        with self._lock:
            if not self.path.exists():
                return
            with self.path.open("r+b") as handle:
                size = handle.seek(0, os.SEEK_END)
                handle.seek(0)
                for start in range(0, size, 1 << 20):
                    handle.write(b"\0" * min(1 << 20, size - start))
                handle.flush()
                os.fsync(handle.fileno())
                handle.truncate(0)
                handle.flush()
                os.fsync(handle.fileno())

    def _ends_with_newline(self) -> bool:
        with self.path.open("rb") as handle:
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) == b"\n"

    def events(self) -> Iterator[dict[str, Any]]:
        """Every complete event in file order, duplicates (same event_id) dropped."""
        return iter_events(self.path, self)

    def find_retrieval(self, query_id: str) -> Optional[dict[str, Any]]:
        found = None
        for event in self.events():
            if event["event"] == "retrieved" and event.get("query_id") == query_id:
                found = event
        return found


def iter_events(path: str | os.PathLike[str], log: Optional[AuditLog] = None) -> Iterator[dict[str, Any]]:
    path = Path(path)
    if not path.exists():
        return
    seen: set[str] = set()
    torn = 0
    with path.open("rb") as handle:
        for raw in handle:
            line = raw.strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                torn += 1  # a process killed mid-append; the event was never acknowledged
                continue
            eid = event.get("event_id")
            if eid in seen:
                continue
            seen.add(eid)
            yield event
    if log is not None:
        log.torn_lines = torn


@dataclass
class LogCheck:
    """Result of :func:`verify_log`: per-query E <= R <= W and the content guard."""

    queries: int = 0
    exposures: int = 0
    disclosures: int = 0
    torn_lines: int = 0
    violations: list[Any] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations


def verify_log(source: str | os.PathLike[str] | AuditLog) -> LogCheck:
    """Check every logged query: R subset of the ids stored before it (W), E subset of R,
    one retrieval per query id, no content keys. ``source``: a log file, or an :class:`AuditLog`
    (whose ``events()`` are read: a trail kept in a database)."""
    log = AuditLog.__new__(AuditLog)  # reader only: no directory creation
    log.torn_lines = 0
    check = LogCheck()
    events = source.events() if isinstance(source, AuditLog) else iter_events(source, log)
    stored: set[str] = set()
    stored_keys: set[tuple[Any, ...]] = set()
    retrieved: dict[str, set[Any]] = {}
    for e in events:
        kind = e.get("event")
        try:
            _check_no_text(e, "")
        except AuditError as exc:
            check.violations.append(f"event {e.get('event_id')}: {exc}")
        if kind == "stored":
            stored.add(e["memory_id"])
            stored_keys.add((e.get("namespace"), e["memory_id"]))
        elif kind == "retrieved":
            check.queries += 1
            qid = e["query_id"]
            if qid in retrieved:
                check.violations.append(f"query {qid}: retrieved twice")
            ids = {r["memory_id"] for r in e.get("ranks", ())}
            # ids are scoped per namespace: a rank that names its namespace must match a record
            # stored in that namespace
            missing = sorted({r["memory_id"] for r in e.get("ranks", ())
                              if ((r["namespace"], r["memory_id"]) not in stored_keys
                                  if "namespace" in r else r["memory_id"] not in stored)})
            if missing:
                check.violations.append(f"query {qid}: R not within W, never stored: {missing}")
            excluded = {x["memory_id"] for x in e.get("excluded", ())} | {
                x["memory_id"] for x in e.get("dropped", ())}
            both = sorted(ids & excluded)
            if both:
                check.violations.append(f"query {qid}: ids both retrieved and excluded: {both}")
            retrieved[qid] = ids
        elif kind == "exposed":
            check.exposures += 1
            qid = e["query_id"]
            if qid not in retrieved:
                check.violations.append(f"query {qid}: exposure logged before any retrieval")
                continue
            extra = sorted(set(e.get("memory_ids", ())) - retrieved[qid])
            if extra:
                check.violations.append(f"query {qid}: E not within R: {extra}")
        elif kind == "disclosed":
            check.disclosures += 1
    check.torn_lines = log.torn_lines
    return check


__all__ = [
    "AUDIT_FORMAT",
    "EVENTS",
    "FORBIDDEN_KEYS",
    "AuditError",
    "AuditLog",
    "LogCheck",
    "iter_events",
    "make_event",
    "utc_now",
    "verify_log",
]
