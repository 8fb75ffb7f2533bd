"""``memgate.Memory``: two concepts, memories and the user they belong to.

    from memgate import Memory

    with Memory(path="memstore") as m:                 # embedded store (a directory)
        m.add("I'm vegetarian.", user_id="alice", metadata={"topic": "food"})
        hits = m.search("What should I cook tonight?", user_id="alice")
        print(hits[0]["memory"], hits[0]["action"])

Underneath is the full :class:`memgate.retriever.GatedRetriever` (``Memory.retriever``):

- ``user_id`` is the principal and selects the user's namespace (``user:<user_id>``): a search
  reads only that namespace, and every by-id call (``get``, ``update``, ``delete``,
  ``history``) answers "no memory" for another user's id, the same answer as for an unknown id;
- query ids are minted per search (``results.query_id``), for ``report_exposed``;
- ``metadata`` is a free-form JSON object stored with the memory (``Memory.attributes`` of the
  record), returned with it, filterable in ``search`` and ``get_all`` (``filters=``, see
  :mod:`memgate.integrations.filters`) before truncation, and erased by ``delete``;
- ``delete`` forgets: text, metadata and vector are erased for good and a forget directive stays
  in the user's namespace, so later searches can say the user asked to forget;
- memories added without ``policy_tags`` are tagged ``general`` (a rule readable for every
  purpose); pass ``policy_rules`` and ``policy_tags`` to use the policy axis;
- allowed actions use the ``agent_default`` preset (an untagged everyday memory: ``warn``, not
  ``verify_first``); the learned gate follows :func:`memgate.integrations.gate_default`.

One ``Memory`` serialises its calls with a lock (the retriever is not thread-safe), so threads
may share it; processes may share a store directory (SQLite locking) or a PostgreSQL store. Opening one loads no model:
the encoder loads at the first call that embeds (add, update of a text, delete: its directive),
the gate at the first search, or both at ``warm_up()``, which may run in a thread beside calls
that embed nothing (those that embed wait for it).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any, Optional

from memgate.contract.defaults import RERANK_DEPTH, check_limit
from memgate.contract.ids import check_id, derived_id
from memgate.contract.records import QueryContext
from memgate.integrations.catalog import Catalog
from memgate.integrations.filters import check_filters
from memgate.integrations.opening import DEFAULT_POLICY_TAG, open_retriever, open_store
from memgate.retriever import DEFAULT_DIRECTIVE
from memgate.retriever.schema import FORGET_DIRECTIVE_KIND, UnknownMemoryError

USER_PREFIX = "user:"
MAX_USER_ID = 256


class SearchResults(list):
    """The hits of one search (dicts, best first) with the query id it was logged under and how
    many memories were excluded by the metadata rules (``excluded``)."""

    def __init__(self, hits: Iterable[dict], query_id: str, excluded: int, route: str):
        super().__init__(hits)
        self.query_id = query_id
        self.excluded = excluded
        self.route = route


def check_user_id(user_id: Any) -> str:
    if not isinstance(user_id, str) or not user_id.strip():
        raise ValueError(f"field 'user_id' must be a non-empty string, got {user_id!r}")
    if len(user_id) > MAX_USER_ID or any(ord(c) < 32 or ord(c) == 127 for c in user_id):
        raise ValueError(f"field 'user_id' must be at most {MAX_USER_ID} printable characters")
    return user_id


def user_namespace(user_id: str) -> str:
    return USER_PREFIX + check_user_id(user_id)


def check_time(value: Any, field: str = "time") -> str:
    """An ISO 8601 date or date-time (``2026-05-01``, ``2026-05-01T12:00:00+00:00``), else a
    ``ValueError`` naming ``field``: the Kleene exclusion compares times, so a time that is not
    one must not reach it."""
    if isinstance(value, str):
        try:
            datetime.fromisoformat(value)
            return value
        except ValueError:
            pass
    raise ValueError(f"field {field!r} must be an ISO 8601 date or date-time "
                     f"(e.g. 2026-05-01T12:00:00+00:00), got {value!r}")


def now_utc() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def record_view(record: Any, user_id: Optional[str] = None) -> dict:
    """A stored record as the agent surfaces return it (JSON-ready)."""
    return {
        "id": record.memory_id,
        "memory": record.text,
        "user_id": user_id if user_id is not None else record.principal,
        "metadata": dict(record.attributes),
        "kind": record.kind,
        "lifecycle": record.lifecycle_state,
        "policy_tags": None if record.policy_tags is None else list(record.policy_tags),
        "revision": record.revision,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "needs_review": record.needs_review,
    }


class Memory:
    """Agent memory over a memgate store (module docstring).

    ``Memory(path=DIR)`` opens (or creates) an embedded store; ``Memory(store="qdrant",
    path=DIR)`` Qdrant local mode (trusted directories only: qdrant-client pickles its points);
    ``Memory(store="qdrant", url=URL, api_key=...)`` a Qdrant server (``audit_log=FILE`` keeps
    the audit trail that ``history`` reads); ``Memory(store="postgres",
    url="postgresql://...")`` a PostgreSQL + pgvector store (the schema ``collection``, default
    ``memgate``; ``url`` defaults to ``$MEMGATE_POSTGRES_URL``; ``path=DIR`` keeps the audit
    trail in ``DIR/audit.jsonl``, or ``audit_log=FILE``). ``gate="auto"`` (default), ``None`` or a
    checkpoint directory; ``action_preset`` one of memgate.actions' presets.
    """

    def __init__(self, path: Any = None, *, store: str = "embedded", url: Optional[str] = None,
                 collection: str = "memgate", api_key: Optional[str] = None, gate: Any = "auto",
                 action_preset: str = "agent_default",
                 policy_rules: Optional[Mapping[str, Mapping]] = None, encoder: Any = None,
                 rerank_depth: int = RERANK_DEPTH, fail_mode: str = "open", fsync: bool = True,
                 audit_log: Any = None):
        self._lock = threading.RLock()
        self._model_lock = threading.RLock()  # held while the encoder or the gate may load
        self.store = open_store(store, path=path, url=url, collection=collection, api_key=api_key,
                                encoder=encoder, fsync=fsync, audit_log=audit_log)
        try:
            self.retriever, self.gate_decision = open_retriever(
                self.store, encoder=encoder, gate=gate, policy_rules=policy_rules,
                action_preset=action_preset, rerank_depth=rerank_depth, fail_mode=fail_mode)
        except BaseException:
            self.store.close()
            raise
        self.catalog = Catalog(self.store)
        self._closed = False

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self.retriever.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this Memory is closed")

    def warm_up(self) -> None:
        """Load the encoder's model and the learned gate now (otherwise the first call that
        embeds or scores does). The model loads outside the call lock, so list, get and history
        answer meanwhile; calls that embed wait for it."""
        with self._model_lock:
            self._check_open()
            self.retriever.warm_up(gate=False)  # the model: no retriever state
            with self._lock:
                self.retriever.warm_up(encoder=False)  # the gate: its parts join the index

    # -- helpers ------------------------------------------------------------------------------

    def _own(self, memory_id: Any, user_id: str, *, allow_forgotten: bool = False) -> Any:
        """The user's record, or UnknownMemoryError (one answer for unknown and not yours)."""
        if not isinstance(memory_id, str) or not memory_id:
            raise ValueError(f"field 'memory_id' must be a non-empty string, got {memory_id!r}")
        record = self.store.get(memory_id, namespace=user_namespace(user_id))  # ids are per user
        if record is None or record.namespace != user_namespace(user_id) or (
                record.forgotten and not allow_forgotten):
            raise UnknownMemoryError(f"no memory {memory_id!r} for user {user_id!r}")
        return record

    def _check_links(self, fields: Mapping[str, Any], user_id: str) -> None:
        for source in fields.get("derived_from") or ():
            self._own(source, user_id)
        for link in fields.get("supersedes") or ():
            self._own(link if isinstance(link, str) else link.memory_id, user_id)

    # -- writes -------------------------------------------------------------------------------

    def add(self, text: str, *, user_id: str, metadata: Optional[Mapping[str, Any]] = None,
            memory_id: Optional[str] = None, **record_fields: Any) -> dict:
        """Store one memory for ``user_id``; returns it. ``record_fields`` are the record's
        other fields (``policy_tags``, ``observed_at``, ``epistemic_status``, ``risk``,
        ``evidence_strength``, ``applicability``, ``supersedes``, ``derived_from``, ...).
        ``memory_id`` (default: a random id) follows :func:`memgate.contract.ids.check_id`: an
        id this or another surface could not read or forget later is refused, never replaced."""
        ns = user_namespace(user_id)
        if memory_id is not None:
            check_id(memory_id)
        for reserved in ("namespace", "principal", "attributes"):
            if reserved in record_fields:
                raise TypeError(f"add() sets {reserved!r} itself (from user_id / metadata)")
        record_fields.setdefault("policy_tags", [DEFAULT_POLICY_TAG])
        with self._model_lock, self._lock:  # (waits for a warm-up in progress)
            self._check_open()
            self._check_links(record_fields, user_id)
            stored = self.retriever.add(
                text, namespace=ns, principal=user_id,
                memory_id=f"mem-{uuid.uuid4().hex[:16]}" if memory_id is None else memory_id,
                attributes=dict(metadata or {}), **record_fields)
            return record_view(stored, user_id)

    def add_many(self, items: Iterable[Any], *, user_id: str) -> list[dict]:
        """Store several memories in one write (all or none), embedded in one batch; each item
        is a text or a mapping ``{"text": ..., "metadata": {...}, **record_fields}``."""
        ns = user_namespace(user_id)
        texts, per = [], []
        for i, item in enumerate(items):
            item = {"text": item} if isinstance(item, str) else dict(item)
            if "text" not in item:
                raise ValueError(f"items[{i}]: field 'text' is missing")
            for reserved in ("namespace", "principal", "attributes"):
                if reserved in item:
                    raise TypeError(f"items[{i}]: add_many() sets {reserved!r} itself")
            texts.append(item.pop("text"))
            item["attributes"] = dict(item.pop("metadata", None) or {})
            item.setdefault("policy_tags", [DEFAULT_POLICY_TAG])
            item.setdefault("memory_id", f"mem-{uuid.uuid4().hex[:16]}")
            per.append(item)
        with self._model_lock, self._lock:  # (waits for a warm-up in progress)
            self._check_open()
            for item in per:
                self._check_links(item, user_id)
            stored = self.retriever.add_many(texts, namespace=ns, principal=user_id, fields=per)
            return [record_view(r, user_id) for r in stored]

    def update(self, memory_id: str, *, user_id: str, text: Optional[str] = None,
               metadata: Optional[Mapping[str, Any]] = None,
               expected_revision: Optional[int] = None, **fields: Any) -> dict:
        """Change a memory's text (re-embedded), metadata (replaced as a whole) or other
        updatable fields; ``expected_revision`` makes it compare-and-set."""
        changes = dict(fields)
        if text is not None:
            changes["text"] = text
        if metadata is not None:
            changes["attributes"] = dict(metadata)
        if not changes:
            raise ValueError("update: nothing to change (pass text=, metadata= or a field)")
        with self._model_lock, self._lock:  # (waits for a warm-up in progress)
            self._check_open()
            record = self._own(memory_id, user_id)
            revision = record.revision if expected_revision is None else expected_revision
            updated = self.retriever.update(memory_id, revision, principal=user_id,
                                            namespace=record.namespace, **changes)
            return record_view(updated, user_id)

    def delete(self, memory_id: str, *, user_id: str, directive: Optional[str] = None) -> dict:
        """Forget a memory (text, metadata and vector erased for good; the id cannot be reused)
        and keep a forget directive in the user's namespace; returns the directive."""
        with self._model_lock, self._lock:  # (waits for a warm-up in progress)
            self._check_open()
            record = self._own(memory_id, user_id)
            stored = self.retriever.forget(
                memory_id, principal=user_id, namespace=record.namespace,
                directive_text=directive or DEFAULT_DIRECTIVE,
                directive_id=derived_id(memory_id, f"-forget-{uuid.uuid4().hex[:6]}"))
            return record_view(stored, user_id)

    forget = delete

    def delete_all(self, *, user_id: str) -> list[str]:
        """Forget every memory of ``user_id`` (the forget directives stay); returns the ids."""
        with self._model_lock, self._lock:  # (delete takes both, in this order)
            self._check_open()
            ids = self.catalog.ids([user_namespace(user_id)])
            records = self.store.get_many(ids, namespace=user_namespace(user_id))
            targets = [i for i in ids if records[i].kind != FORGET_DIRECTIVE_KIND]
            for memory_id in targets:
                self.delete(memory_id, user_id=user_id)
            return targets

    # -- reads --------------------------------------------------------------------------------

    def search(self, query: str, *, user_id: str, filters: Optional[Mapping[str, Any]] = None,
               limit: int = 10, intent: str = "unknown", purpose: Optional[str] = None,
               time: Optional[str] = None, subject: Optional[str] = None, risk: Optional[str] = None,
               asks: str = "fact", proposed_action: Optional[str] = None) -> SearchResults:
        """The user's top ``limit`` (1 to ``MAX_LIMIT``) admissible memories for ``query``, with
        allowed actions.

        ``filters`` restrict by metadata before truncation; ``intent`` (``current_state``,
        ``history`` or ``unknown``), ``purpose``, ``subject`` and ``time`` (default: now, UTC)
        are the query context the Kleene exclusion reads; ``risk`` / ``asks`` /
        ``proposed_action`` describe the request to the allowed-action policy."""
        ns = user_namespace(user_id)
        check_limit(limit)
        if time is not None:
            check_time(time)
        flt = check_filters(filters)
        with self._model_lock, self._lock:  # (waits for a warm-up in progress)
            self._check_open()
            query_id = f"q-{uuid.uuid4().hex}"
            ctx = QueryContext(query_id=query_id, text="", principal=user_id,
                               namespaces=frozenset({ns}), purpose=purpose, intent=intent,
                               time=time or now_utc(), subject=subject)
            only = self.catalog.ids([ns], flt) if flt else None
            result = self.retriever.retrieve(query, ctx, k=limit, asks=asks,
                                             proposed_action=proposed_action, risk=risk,
                                             only_ids=only)
            hits = []
            for item in result.items:
                hit = record_view(item.memory, user_id)
                hit.update(lifecycle=item.lifecycle, score=item.score, cosine=item.cosine,
                           gate_score=item.gate_score, action=item.action,
                           action_reasons=list(item.action_binding),
                           unresolved=list(item.unresolved), needs_review=item.needs_review)
                hits.append(hit)
            return SearchResults(hits, query_id, sum(result.excluded_counts.values()), result.route)

    def get(self, memory_id: str, *, user_id: str) -> Optional[dict]:
        """The user's memory, or None (unknown, another user's, or forgotten). A read by id
        needs no retriever state, so it does not wait for the lock (the store locks itself)."""
        self._check_open()
        try:
            return record_view(self._own(memory_id, user_id), user_id)
        except UnknownMemoryError:
            return None

    def get_all(self, *, user_id: str, filters: Optional[Mapping[str, Any]] = None,
                limit: Optional[int] = None) -> list[dict]:
        """The user's live memories (forget directives included), oldest first."""
        if limit is not None and (type(limit) is not int or limit < 1):
            raise ValueError(f"field 'limit' must be an int >= 1 or None, got {limit!r}")
        flt = check_filters(filters)
        with self._lock:
            self._check_open()
            ids = self.catalog.ids([user_namespace(user_id)], flt)
            records = sorted(self.store.get_many(ids, namespace=user_namespace(user_id)).values(),
                             key=lambda r: (r.created_at or "", r.memory_id))
            return [record_view(r, user_id) for r in records[:limit]]

    def history(self, memory_id: str, *, user_id: str) -> list[dict]:
        """The memory's audit trail (stored, updated, retrieved, forgotten, ...; never text): this
        user's record of the id and this user's own queries only
        (:meth:`memgate.retriever.GatedRetriever.history`)."""
        with self._lock:
            self._check_open()
            record = self._own(memory_id, user_id, allow_forgotten=True)
            return [{"event": s.stage, "ts": s.ts, "query_id": s.query_id, "detail": s.detail}
                    for s in self.retriever.history(memory_id, principal=user_id, namespace=record.namespace)]

    def report_exposed(self, query_id: str, memory_ids: Iterable[str]) -> None:
        """Record which hits of ``query_id`` went into the prompt (audit: E within R)."""
        with self._lock:
            self._check_open()
            self.retriever.report_exposed(query_id, memory_ids)


__all__ = ["MAX_USER_ID", "USER_PREFIX", "Memory", "SearchResults", "check_time", "check_user_id", "now_utc",
           "record_view", "user_namespace"]
