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
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from memgate.retriever.schema import StoreFullError, is_disk_full

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


def make_event(event_type: str, /, clock=utc_now, **payload: Any) -> dict:
    """A complete event dict (validated, not yet written)."""
    if event_type not in EVENTS:
        raise AuditError(f"unknown audit event {event_type!r}; known: {EVENTS}")
    event = {"event": event_type, "event_id": uuid.uuid4().hex, "ts": clock(), "format": AUDIT_FORMAT}
    event.update(payload)
    _check_no_text(event, "")
    return event


class AuditLog:
    """An append-only JSONL file shared by the store (write events) and the retriever."""

    def __init__(self, path: str | os.PathLike, fsync: bool = True):
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

    def _ends_with_newline(self) -> bool:
        with self.path.open("rb") as handle:
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) == b"\n"

    def events(self) -> Iterator[dict]:
        """Every complete event in file order, duplicates (same event_id) dropped."""
        return iter_events(self.path, self)

    def find_retrieval(self, query_id: str) -> Optional[dict]:
        found = None
        for event in self.events():
            if event["event"] == "retrieved" and event.get("query_id") == query_id:
                found = event
        return found


def iter_events(path: str | os.PathLike, log: Optional[AuditLog] = None) -> Iterator[dict]:
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


# --------------------------------------------------------------------------- the trail


@dataclass(frozen=True)
class TrailStep:
    """One stage of one memory's trail: stored / updated / ... / retrieved / not_retrieved /
    dropped / exposed / disclosed, with the event it came from."""

    stage: str
    ts: str
    detail: dict
    query_id: Optional[str] = None


_VERSION_KEYS = ("gate_version", "policy_version", "action_policy_version")
_RANK_KEYS = ("rank", "score", "cosine", "gate_score", "lifecycle", "action", "unresolved")


def _compact(d: Mapping[str, Any], keys: Iterable[str]) -> dict:
    return {k: d[k] for k in keys if d.get(k) not in (None, [], (), {})}


def _item_namespace(item: Mapping[str, Any], query_namespaces: Any) -> Optional[str]:
    """The namespace of an id a query event names: the item's own (events since scoped ids),
    else the query's one readable namespace, else unknown (None)."""
    ns = item.get("namespace")
    if ns is not None:
        return ns
    spaces = list(query_namespaces or ())
    return spaces[0] if len(spaces) == 1 else None


class _Scope:
    """Which events of the log a trail may show: ``namespace`` (the record's namespace, None =
    every namespace) and ``principal`` (whose queries, None = every principal's)."""

    def __init__(self, namespace: Optional[str], principal: Optional[str]):
        self.namespace, self.principal = namespace, principal

    def record(self, event: Mapping[str, Any]) -> bool:
        """A store event of the record: in the namespace (an event from before scoped ids, which
        names none, only when the scope's principal made it)."""
        if self.namespace is None:
            return True
        if "namespace" in event:
            return event["namespace"] == self.namespace
        return self.principal is None or event.get("principal") == self.principal

    def query(self, event: Mapping[str, Any]) -> bool:
        return self.principal is None or event.get("principal") == self.principal

    def item(self, namespace: Optional[str]) -> bool:
        """An id a query event names, whose namespace is ``namespace`` (None: unknown, which a
        namespace scope never shows)."""
        return self.namespace is None or namespace == self.namespace


def _trail(events: Iterable[Mapping[str, Any]], memory_id: str, scope: _Scope) -> list[TrailStep]:
    steps: list[TrailStep] = []
    retrieved_in: dict[str, Optional[str]] = {}  # query id -> the namespace its ranks give the id
    read_by: dict[str, Any] = {}  # query id -> the namespaces it read
    for e in events:
        kind = e.get("event")
        if kind in STORE_EVENTS:
            if not scope.record(e):
                continue
            if e.get("memory_id") == memory_id:
                detail = {k: v for k, v in e.items()
                          if k not in ("event", "event_id", "ts", "format", "memory_id", "slot")}
                encoder = detail.pop("encoder", None)
                if encoder:
                    detail["encoder"] = f"{encoder.get('id')}@{encoder.get('revision')}"
                steps.append(TrailStep(kind, e["ts"], _compact(detail, detail)))
            elif kind == "stored" and memory_id in (e.get("derived_from") or ()):
                steps.append(TrailStep("source_of", e["ts"], {"derived": e["memory_id"]}))
            continue
        if kind not in QUERY_EVENTS or not scope.query(e):
            continue
        qid = e.get("query_id")
        who = _compact(e, ("principal", "intent", "purpose"))
        if kind == "retrieved":
            spaces = read_by[qid] = e.get("namespaces")
            for item in e.get("ranks", ()):
                if item["memory_id"] == memory_id:
                    retrieved_in[qid] = _item_namespace(item, spaces)
            versions = _compact(e, _VERSION_KEYS)
            for item in e.get("ranks", ()):
                if item["memory_id"] == memory_id and scope.item(_item_namespace(item, spaces)):
                    flags = {"needs_review": True} if item.get("needs_review") else {}
                    steps.append(TrailStep("retrieved", e["ts"], {
                        **who, **_compact(item, ("namespace",) + _RANK_KEYS), **flags, **versions}, qid))
            for item in e.get("excluded", ()):
                if item["memory_id"] == memory_id and scope.item(_item_namespace(item, spaces)):
                    steps.append(TrailStep("not_retrieved", e["ts"], {
                        **who, **_compact(item, ("namespace", "reasons", "unresolved", "lifecycle",
                                                 "cosine_rank")), **versions}, qid))
            for item in e.get("dropped", ()):
                if item["memory_id"] == memory_id and scope.item(_item_namespace(item, spaces)):
                    steps.append(TrailStep("dropped", e["ts"], {
                        **who, **_compact(item, ("namespace", "reason", "suppression", "threshold")),
                        **versions}, qid))
        elif kind == "exposed" and memory_id in e.get("memory_ids", ()):
            # an exposure names ids of its query's retrieval: their namespaces are the ranks'
            if scope.item(retrieved_in.get(qid)):
                steps.append(TrailStep("exposed", e["ts"], who, qid))
        elif kind == "disclosed":
            for hit in e.get("hits", ()):
                if hit["memory_id"] != memory_id:
                    continue
                ns = retrieved_in.get(qid) or _item_namespace(hit, read_by.get(qid))
                if scope.item(ns):
                    steps.append(TrailStep("disclosed", e["ts"], {
                        **who, "was_exposed": hit.get("exposed"), "was_retrieved": hit.get("retrieved")}, qid))
    return steps


def trail(events: Iterable[Mapping[str, Any]], memory_id: str, *, namespace: str,
          principal: str) -> list[TrailStep]:
    """One tenant's view of ``memory_id``: the record ``(namespace, memory_id)`` (ids are scoped
    per namespace) through ``principal``'s own queries, in log order (ids and metadata only).

    Store events (stored, updated, forgotten, ...) of the record in ``namespace``; query events
    (retrieved, not_retrieved, dropped, exposed, disclosed) only of queries ``principal`` made
    and only where they name the record in ``namespace``. Another namespace's record with the
    same id, and another principal's queries, are never shown (every agent surface's history
    is this function). The store's operator reads the whole log with :func:`operator_trail`."""
    for name, value in (("namespace", namespace), ("principal", principal)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"trail: field {name!r} must be a non-empty string, got {value!r}")
    return _trail(events, memory_id, _Scope(namespace, principal))


def operator_trail(events: Iterable[Mapping[str, Any]], memory_id: str,
                   namespace: Optional[str] = None, principal: Optional[str] = None) -> list[TrailStep]:
    """The store operator's view (``memgate audit``): every namespace's record of
    ``memory_id`` and every principal's queries, unless ``namespace`` / ``principal`` narrow it.
    Not for tenants: an id used in several namespaces shows all of their events."""
    return _trail(events, memory_id, _Scope(namespace, principal))


def _fmt_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_fmt_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_fmt_value(v)}" for k, v in value.items() if v is not None) + "}"
    return str(value)


def format_trail(memory_id: str, steps: list[TrailStep]) -> str:
    """Human-readable trail, one line per stage."""
    if not steps:
        return f"memory {memory_id}: no audit events"
    counts = {s: sum(1 for x in steps if x.stage == s) for s in ("retrieved", "exposed", "disclosed")}
    lines = [
        f"memory {memory_id}: {len(steps)} event(s); retrieved in {counts['retrieved']} "
        f"quer{'y' if counts['retrieved'] == 1 else 'ies'}, exposed in {counts['exposed']}, "
        f"disclosed in {counts['disclosed']}"
    ]
    for step in steps:
        where = f" query={step.query_id}" if step.query_id else ""
        detail = " ".join(
            f"{k}={_fmt_value(v)}" for k, v in step.detail.items() if v not in (None, [], {}, ())
        )
        lines.append(f"  {step.ts}  {step.stage:<18}{where} {detail}".rstrip())
    return "\n".join(lines)


# --------------------------------------------------------------------------- E <= R <= W


@dataclass
class LogCheck:
    """Result of :func:`verify_log`: per-query E <= R <= W and the content guard."""

    queries: int = 0
    exposures: int = 0
    disclosures: int = 0
    torn_lines: int = 0
    violations: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations


def verify_log(path: str | os.PathLike) -> LogCheck:
    """Check every logged query: R subset of the ids stored before it (W), E subset of R,
    one retrieval per query id, no content keys."""
    log = AuditLog.__new__(AuditLog)  # reader only: no directory creation
    log.torn_lines = 0
    check = LogCheck()
    stored: set[str] = set()
    stored_keys: set[tuple] = set()
    retrieved: dict[str, set] = {}
    for e in iter_events(path, log):
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
    "TrailStep",
    "format_trail",
    "iter_events",
    "make_event",
    "operator_trail",
    "trail",
    "utc_now",
    "verify_log",
]
