"""``memgate.Memory``: two concepts, memories and the user they belong to.

    from memgate import Memory

    with Memory(path="memstore") as m:                 # embedded store (a directory)
        m.add("I'm vegetarian.", user_id="alice", metadata={"topic": "food"})
        hits = m.search("What should I cook tonight?", user_id="alice")["results"]
        print(hits[0]["memory"], hits[0]["action"])

``Memory()`` without a path keeps the store in ``$MEMGATE_HOME/store``, else the per-user data
directory (:mod:`memgate.integrations.home`).

Underneath is the full :class:`memgate.retriever.GatedRetriever` (``Memory.retriever``):

- ``user_id`` is the principal and selects the user's namespace (``user:<user_id>``): a search
  reads only that namespace, and every by-id call (``get``, ``update``, ``delete``,
  ``history``) answers "no memory" for another user's id, the same answer as for an unknown id;
- ``agent_id`` / ``run_id`` narrow within the user's namespace, never widen: a memory added with
  them carries them, and a call that passes them (search, get_all, delete_all) sees only the
  user's memories that carry the same values;
- ``search`` returns ``{"results": [...], "forgotten_relevant": bool, "query_id", "route",
  "excluded", "dropped", "dropped_ids"}`` (Mem0's shape and the HTTP API's; each hit carries
  ``gate_risk``, :mod:`memgate.integrations.hits`); query ids are minted per search, for
  ``report_exposed``; its default intent is ``current_state`` (a superseded memory is left out
  for the memory that superseded it; ``intent="history"`` asks for the history);
- ``metadata`` is a free-form JSON object stored with the memory (``Memory.attributes`` of the
  record), returned with it, filterable in ``search`` and ``get_all`` (``filters=``, see
  :mod:`memgate.integrations.filters`) before truncation, and erased by ``delete``;
- ``delete`` forgets: text, metadata and vector are erased for good and a forget directive stays
  in the user's namespace. Directives never take a result slot: ``search`` ranks them with the
  memories and, when one would have ranked within ``limit``, says so with
  ``forgotten_relevant: true`` (the directive's text is all that is left of the forgotten
  detail, so its rank is what "relevant" means); ``get_all`` lists memories only and
  ``directives()`` the directives;
- ``add`` records ``provenance="user_stated"`` (the authenticated user stating something about
  themselves: ``user_id`` is the principal and the memory lands in their own namespace) unless the
  caller passes ``provenance``; it also takes a chat-message list (:mod:`memgate.integrations.messages`:
  each user turn stored word for word, no LLM extraction);
- memories added without ``policy_tags`` are tagged ``general`` (a rule readable for every
  purpose); pass ``policy_rules`` and ``policy_tags`` to use the policy axis;
- allowed actions use the ``agent_default`` preset (a user-stated fact about the user at low risk:
  ``answer``; an untagged everyday memory of other provenance: ``warn``, not ``verify_first``);
- ``gate="auto"`` (default): the learned gate per :func:`memgate.integrations.gate_default`;
  ``gate="released"``: the released gate regardless; ``gate=None``: no learned gate (cosine
  ranking after namespace support and Kleene exclusion), the same meaning as in
  :func:`memgate.rerank`.

One ``Memory`` serialises its calls with a lock (the retriever is not thread-safe), so threads
may share it; processes may share a store directory (SQLite locking) or a PostgreSQL store. Opening one loads no model:
the encoder loads at the first call that embeds (add, update of a text, delete: its directive),
the gate at the first search, or both at ``warm_up()``, which may run in a thread beside calls
that embed nothing (those that embed wait for it).
"""

from __future__ import annotations

import threading
import uuid
import warnings
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any, Optional

from memgate.contract.defaults import RERANK_DEPTH, check_limit
from memgate.contract.ids import check_id, derived_id
from memgate.contract.records import QueryContext
from memgate.integrations.catalog import Catalog
from memgate.integrations.filters import check_filters
from memgate.integrations.hits import drop_summary, hit_view
from memgate.integrations.home import default_store_dir
from memgate.integrations.inputs import (
    check_item_fields,
    check_item_shape,
    check_metadata,
    check_no_surrogate,
    prefix,
)
from memgate.integrations.messages import user_turns
from memgate.integrations.opening import DEFAULT_POLICY_TAG, open_retriever, open_store
from memgate.retriever import DEFAULT_DIRECTIVE
from memgate.retriever.errors import UnknownMemoryError

USER_PREFIX = "user:"
MAX_USER_ID = 256
USER_STATED = "user_stated"  # the provenance add() records (the user stating it, about themselves)
SCOPE_KEYS = ("agent_id", "run_id")  # metadata keys that narrow within a user's namespace
OUTPUT_FORMATS = ("v1.1", "v1.0")  # v1.0: search returns the old list shape (one release)


class SearchResults(dict[str, Any]):
    """One search: ``{"results": [hit, ...], "forgotten_relevant": bool, "query_id": str,
    "route": str, "excluded": int, "dropped": int, "dropped_ids": [str]}`` (hits best first,
    each with ``gate_risk``: :mod:`memgate.integrations.hits`; ``excluded``: memories left out by
    the metadata rules; ``forgotten_relevant``: a forget directive would have ranked within the
    limit; ``dropped`` / ``dropped_ids``: the user's memories the learned gate dropped). The keys are also attributes (``.results``, ``.query_id``, ...). Indexing it with a
    number (``hits[0]``, the shape of 0.1) still reaches ``results``, with a DeprecationWarning,
    for one release."""

    def __init__(self, hits: Iterable[dict[str, Any]], query_id: str, excluded: int, route: str,
                 forgotten_relevant: bool = False, dropped: int = 0,
                 dropped_ids: Iterable[str] = ()):
        super().__init__(results=list(hits), forgotten_relevant=bool(forgotten_relevant),
                         query_id=query_id, route=route, excluded=int(excluded),
                         dropped=int(dropped), dropped_ids=list(dropped_ids))

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, (int, slice)):
            warnings.warn("Memory.search returns {'results': [...]}: read hits['results'][i] "
                          "(indexing the result itself goes in the next release)",
                          DeprecationWarning, stacklevel=2)
            return self["results"][key]
        return super().__getitem__(key)


class LegacySearchResults(list[Any]):
    """The shape of 0.1 (``output_format="v1.0"``, one release): a list of hits with
    ``query_id``, ``excluded``, ``route``, ``forgotten_relevant``, ``dropped`` and
    ``dropped_ids`` attributes."""

    def __init__(self, found: SearchResults):
        super().__init__(found["results"])
        self.query_id, self.excluded, self.route = found["query_id"], found["excluded"], found["route"]
        self.forgotten_relevant = found["forgotten_relevant"]
        self.dropped, self.dropped_ids = found["dropped"], found["dropped_ids"]


def check_user_id(user_id: Any) -> str:
    if not isinstance(user_id, str) or not user_id.strip():
        raise ValueError(f"field 'user_id' must be a non-empty string, got {user_id!r}")
    if len(user_id) > MAX_USER_ID or any(ord(c) < 32 or ord(c) == 127 for c in user_id):
        raise ValueError(f"field 'user_id' must be at most {MAX_USER_ID} printable characters")
    check_no_surrogate(user_id, "user_id")
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


def check_scope(agent_id: Any = None, run_id: Any = None) -> dict[str, Any]:
    """``{"agent_id": ..., "run_id": ...}`` of the given ones (non-empty strings), checked."""
    scope = {}
    for name, value in (("agent_id", agent_id), ("run_id", run_id)):
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_USER_ID:
            raise ValueError(f"field {name!r} must be a non-empty string of at most {MAX_USER_ID} "
                             f"characters, got {value!r}")
        scope[name] = value
    return scope


def record_view(record: Any, user_id: Optional[str] = None) -> dict[str, Any]:
    """A stored record as the agent surfaces return it (JSON-ready); ``agent_id`` / ``run_id``
    are fields of their own, not metadata."""
    metadata = dict(record.attributes)
    scope = {k: metadata.pop(k, None) for k in SCOPE_KEYS}
    return {
        "id": record.memory_id,
        "memory": record.text,
        "user_id": user_id if user_id is not None else record.principal,
        **scope,
        "metadata": metadata,
        "kind": record.kind or "memory",
        "provenance": record.provenance,
        "lifecycle": record.lifecycle_state,
        "policy_tags": None if record.policy_tags is None else list(record.policy_tags),
        "revision": record.revision,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "needs_review": record.needs_review,
    }


class Memory:
    """Agent memory over a memgate store (module docstring).

    ``Memory()`` opens the embedded store in the default directory
    (:func:`memgate.integrations.home.default_store_dir`); ``Memory(path=DIR)`` an embedded
    store in ``DIR``; ``Memory(store="qdrant", path=DIR)`` Qdrant local mode (trusted directories
    only: qdrant-client pickles its points); ``Memory(store="qdrant", url=URL, api_key=...)`` a
    Qdrant server (``audit_log=FILE`` keeps the audit trail that ``history`` reads);
    ``Memory(store="postgres", url="postgresql://...")`` a PostgreSQL + pgvector store (the
    schema ``collection``, default ``memgate``; ``url`` defaults to ``$MEMGATE_POSTGRES_URL``;
    ``path=DIR`` keeps the audit trail in ``DIR/audit.jsonl``, or ``audit_log=FILE``).
    ``gate``: ``"auto"`` (default), ``"released"``, ``None`` (no learned gate) or a checkpoint
    directory; ``action_preset`` one of memgate.actions' presets; ``output_format="v1.0"``
    keeps the list shape of ``search`` for one release.
    """

    def __init__(self, path: Any = None, *, store: str = "embedded", url: Optional[str] = None,
                 collection: str = "memgate", api_key: Optional[str] = None, gate: Any = "auto",
                 action_preset: str = "agent_default",
                 policy_rules: Optional[Mapping[str, Mapping[str, Any]]] = None, encoder: Any = None,
                 rerank_depth: int = RERANK_DEPTH, fail_mode: str = "open", fsync: bool = True,
                 audit_log: Any = None, output_format: str = "v1.1"):
        if output_format not in OUTPUT_FORMATS:
            raise ValueError(f"field 'output_format' must be one of {OUTPUT_FORMATS}, got {output_format!r}")
        if output_format == "v1.0":
            warnings.warn("output_format='v1.0' (search returns a list) goes in the next release; "
                          "read search(...)['results']", DeprecationWarning, stacklevel=2)
        self.output_format = output_format
        if store == "embedded" and path is None and url is None:
            path = default_store_dir()
            path.mkdir(parents=True, exist_ok=True)
        self.path = path
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

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
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

    def _owner(self, memory_id: Any, user_id: Optional[str]) -> str:
        """``user_id``, or (without one) the one user whose live memory has this id; an id that
        names no user's memory or several users' answers as an unknown id does."""
        if user_id is not None:
            return user_id
        if not isinstance(memory_id, str) or not memory_id:
            raise ValueError(f"field 'memory_id' must be a non-empty string, got {memory_id!r}")
        namespace = self.catalog.namespace_of(memory_id)
        if namespace is None or not namespace.startswith(USER_PREFIX):
            raise UnknownMemoryError(f"no memory {memory_id!r} (pass user_id= for an id that "
                                     "several users' memories share)")
        return namespace[len(USER_PREFIX):]

    def _check_links(self, fields: Mapping[str, Any], user_id: str) -> None:
        for source in fields.get("derived_from") or ():
            self._own(source, user_id)
        for link in fields.get("supersedes") or ():
            self._own(link if isinstance(link, str) else link.memory_id, user_id)

    def _scoped_ids(self, user_id: str, scope: Mapping[str, str], flt: Optional[dict[str, Any]],
                    directives: bool) -> Optional[list[str]]:
        """The user's ids within ``scope`` matching ``flt`` (directives: scope only), or None
        when nothing narrows (every id of the namespace)."""
        if not scope and not flt:
            return None
        where = {k: {"eq": v} for k, v in scope.items()}
        return self.catalog.ids([user_namespace(user_id)], {**where, **({} if directives else flt or {})},
                                directives=directives)

    # -- writes -------------------------------------------------------------------------------

    def _item(self, given: Any, i: Optional[int], scope: Mapping[str, str]) -> dict[str, Any]:
        """One add's fields (checked): text, attributes (metadata + scope), provenance, tags."""
        where = prefix(i)
        item = check_item_shape(given, i)
        if "text" not in item:
            raise ValueError(f"{where} field 'text' is missing")
        for reserved in ("namespace", "principal", "attributes"):
            if reserved in item:
                raise TypeError(f"{where} field {reserved!r} is set from user_id / metadata")
        metadata = check_metadata(item.pop("metadata", None), i)
        for key in SCOPE_KEYS:
            if key in metadata:
                raise ValueError(f"{where} field 'metadata.{key}' is reserved: pass {key}= instead")
        item["attributes"] = {**metadata, **scope}
        check_item_fields(item, i)
        item.setdefault("policy_tags", [DEFAULT_POLICY_TAG])
        item.setdefault("provenance", USER_STATED)
        item.setdefault("memory_id", f"mem-{uuid.uuid4().hex[:16]}")
        if item["memory_id"] is None:
            item["memory_id"] = f"mem-{uuid.uuid4().hex[:16]}"
        return item

    def add(self, text: Any, *, user_id: str, metadata: Optional[Mapping[str, Any]] = None,
            memory_id: Optional[str] = None, agent_id: Optional[str] = None,
            run_id: Optional[str] = None, **record_fields: Any) -> Any:
        """Store one memory for ``user_id``; returns it. ``text`` may be a chat-message list
        (:func:`memgate.integrations.messages.user_turns`): each user turn is stored, in one
        write, and the list of stored memories is returned. ``record_fields`` are the record's
        other fields (``policy_tags``, ``observed_at``, ``epistemic_status``, ``provenance``,
        ``risk``, ``evidence_strength``, ``applicability``, ``supersedes``, ``derived_from``,
        ...). ``memory_id`` (default: a random id) follows
        :func:`memgate.contract.ids.check_id`: an id this or another surface could not read or
        forget later is refused, never replaced."""
        if not isinstance(text, str):
            if memory_id is not None:
                raise ValueError("add(messages): field 'memory_id' names one memory; each turn gets its own")
            turns = user_turns(text)
            items = [{"text": t, "metadata": metadata, **record_fields} for t in turns]
            return self.add_many(items, user_id=user_id, agent_id=agent_id, run_id=run_id) if items else []
        user_namespace(user_id)
        if memory_id is not None:
            check_id(memory_id)
        fields = self._item({"text": text, "metadata": metadata, "memory_id": memory_id, **record_fields},
                            None, check_scope(agent_id, run_id))
        with self._model_lock, self._lock:  # (waits for a warm-up in progress)
            self._check_open()
            self._check_links(fields, user_id)
            stored = self.retriever.add(fields.pop("text"), namespace=user_namespace(user_id),
                                        principal=user_id, **fields)
            return record_view(stored, user_id)

    def add_many(self, items: Iterable[Any], *, user_id: str, agent_id: Optional[str] = None,
                 run_id: Optional[str] = None) -> list[dict[str, Any]]:
        """Store several memories in one write (all or none), embedded in one batch; each item
        is a text or a mapping ``{"text": ..., "metadata": {...}, **record_fields}``."""
        ns = user_namespace(user_id)
        scope = check_scope(agent_id, run_id)
        per = [self._item(item, i, scope) for i, item in enumerate(items)]
        texts = [item.pop("text") for item in per]
        with self._model_lock, self._lock:  # (waits for a warm-up in progress)
            self._check_open()
            for item in per:
                self._check_links(item, user_id)
            stored = self.retriever.add_many(texts, namespace=ns, principal=user_id, fields=per)
            return [record_view(r, user_id) for r in stored]

    def update(self, memory_id: str, *, user_id: Optional[str] = None, text: Optional[str] = None,
               metadata: Optional[Mapping[str, Any]] = None,
               expected_revision: Optional[int] = None, **fields: Any) -> dict[str, Any]:
        """Change a memory's text (re-embedded), metadata (replaced as a whole; its
        ``agent_id`` / ``run_id`` stay) or other updatable fields; ``expected_revision`` makes it
        compare-and-set. Without ``user_id``, the id must name one user's memory."""
        changes = dict(fields)
        if text is not None:
            changes["text"] = text
        if not changes and metadata is None:
            raise ValueError("update: nothing to change (pass text=, metadata= or a field)")
        with self._model_lock, self._lock:  # (waits for a warm-up in progress)
            self._check_open()
            user_id = self._owner(memory_id, user_id)
            record = self._own(memory_id, user_id)
            if metadata is not None:
                metadata = check_metadata(metadata, None, "update:")
                reserved = sorted(set(metadata) & set(SCOPE_KEYS))
                if reserved:
                    raise ValueError(f"update: field 'metadata.{reserved[0]}' is reserved (set at add)")
                scope = {k: record.attributes[k] for k in SCOPE_KEYS if k in record.attributes}
                changes["attributes"] = {**dict(metadata), **scope}
            revision = record.revision if expected_revision is None else expected_revision
            updated = self.retriever.update(memory_id, revision, principal=user_id,
                                            namespace=record.namespace, **changes)
            return record_view(updated, user_id)

    def delete(self, memory_id: str, *, user_id: Optional[str] = None,
               directive: Optional[str] = None) -> dict[str, Any]:
        """Forget a memory (text, metadata and vector erased for good; the id cannot be reused)
        and keep a forget directive in the user's namespace; returns the directive. Without
        ``user_id``, the id must name one user's memory (else :class:`UnknownMemoryError`, the
        answer for an unknown id)."""
        with self._model_lock, self._lock:  # (waits for a warm-up in progress)
            self._check_open()
            user_id = self._owner(memory_id, user_id)
            record = self._own(memory_id, user_id)
            scope = {k: record.attributes[k] for k in SCOPE_KEYS if k in record.attributes}
            stored = self.retriever.forget(
                memory_id, principal=user_id, namespace=record.namespace,
                directive_text=directive or DEFAULT_DIRECTIVE, attributes=scope,
                directive_id=derived_id(memory_id, f"-forget-{uuid.uuid4().hex[:6]}"))
            return record_view(stored, user_id)

    forget = delete

    def delete_all(self, *, user_id: str, agent_id: Optional[str] = None,
                   run_id: Optional[str] = None) -> list[str]:
        """Forget every memory of ``user_id`` (within ``agent_id`` / ``run_id`` when given; the
        forget directives stay); returns the ids."""
        scope = check_scope(agent_id, run_id)
        with self._model_lock, self._lock:  # (delete takes both, in this order)
            self._check_open()
            where = {k: {"eq": v} for k, v in scope.items()}
            targets = self.catalog.ids([user_namespace(user_id)], where, directives=False)
            for memory_id in targets:
                self.delete(memory_id, user_id=user_id)
            return targets

    def reset(self) -> None:
        """Forget every user's memories (as ``delete_all`` for each of :meth:`users`): the store
        stays, with its forget directives and its audit trail."""
        for user in self.users():
            self.delete_all(user_id=user)

    # -- reads --------------------------------------------------------------------------------

    def users(self) -> list[str]:
        """The user ids with a live memory or directive in this store, sorted."""
        with self._lock:
            self._check_open()
            return [ns[len(USER_PREFIX):] for ns in self.catalog.namespaces() if ns.startswith(USER_PREFIX)]

    def search(self, query: str, *, user_id: str, filters: Optional[Mapping[str, Any]] = None,
               limit: int = 10, intent: str = "current_state", purpose: Optional[str] = None,
               time: Optional[str] = None, subject: Optional[str] = None, risk: Optional[str] = None,
               asks: str = "fact", proposed_action: Optional[str] = None,
               agent_id: Optional[str] = None, run_id: Optional[str] = None) -> Any:
        """The user's top ``limit`` (1 to ``MAX_LIMIT``) admissible memories for ``query``, with
        allowed actions, as :class:`SearchResults` (forget directives never take a slot:
        ``forgotten_relevant`` says one would have).

        ``filters`` restrict by metadata before truncation (:mod:`memgate.integrations.filters`,
        ``AND`` / ``OR`` / ``NOT`` included); ``agent_id`` / ``run_id`` narrow to the memories
        added with them; ``intent`` (``current_state``, the default, ``history`` or
        ``unknown``), ``purpose``, ``subject`` and ``time`` (default: now, UTC) are the query
        context the Kleene exclusion reads; ``risk`` / ``asks`` / ``proposed_action`` describe
        the request to the allowed-action policy."""
        ns = user_namespace(user_id)
        check_limit(limit)
        if time is not None:
            check_time(time)
        flt = check_filters(filters)
        scope = check_scope(agent_id, run_id)
        with self._model_lock, self._lock:  # (waits for a warm-up in progress)
            self._check_open()
            query_id = f"q-{uuid.uuid4().hex}"
            ctx = QueryContext(query_id=query_id, text="", principal=user_id,
                               namespaces=frozenset({ns}), purpose=purpose, intent=intent,
                               time=time or now_utc(), subject=subject)
            apart = self._scoped_ids(user_id, scope, flt, directives=True)
            if apart is None:
                apart = self.catalog.ids([ns], directives=True)
            only = self._scoped_ids(user_id, scope, flt, directives=False)
            result = self.retriever.retrieve(query, ctx, k=limit, asks=asks,
                                             proposed_action=proposed_action, risk=risk,
                                             only_ids=None if only is None else [*only, *apart],
                                             set_apart=apart)
            hits = [hit_view(item, lambda r: record_view(r, user_id)) for item in result.items]
            found = SearchResults(hits, query_id, sum(result.excluded_counts.values()), result.route,
                                  forgotten_relevant=bool(result.set_apart),
                                  **drop_summary(result, readable=lambda n: n == ns))
            return LegacySearchResults(found) if self.output_format == "v1.0" else found

    def get(self, memory_id: str, *, user_id: Optional[str] = None) -> Optional[dict[str, Any]]:
        """The user's memory, or None (unknown, another user's, or forgotten; without
        ``user_id``, also an id several users' memories share). A read by id needs no retriever
        state, so it does not wait for the lock (the store locks itself)."""
        self._check_open()
        try:
            owner = self._owner(memory_id, user_id)
            return record_view(self._own(memory_id, owner), owner)
        except UnknownMemoryError:
            return None

    def _listed(self, user_id: str, filters: Any, limit: Optional[int], scope: Mapping[str, str],
                directives: bool) -> list[dict[str, Any]]:
        if limit is not None and (type(limit) is not int or limit < 1):
            raise ValueError(f"field 'limit' must be an int >= 1 or None, got {limit!r}")
        flt = check_filters(filters)
        where = {k: {"eq": v} for k, v in scope.items()}
        with self._lock:
            self._check_open()
            ids = self.catalog.ids([user_namespace(user_id)], {**where, **flt}, directives=directives)
            records = sorted(self.store.get_many(ids, namespace=user_namespace(user_id)).values(),
                             key=lambda r: (r.created_at or "", r.memory_id))
            return [record_view(r, user_id) for r in records[:limit]]

    def get_all(self, *, user_id: str, filters: Optional[Mapping[str, Any]] = None,
                limit: Optional[int] = None, agent_id: Optional[str] = None,
                run_id: Optional[str] = None) -> list[dict[str, Any]]:
        """The user's live memories (not the forget directives: :meth:`directives`), oldest
        first; ``agent_id`` / ``run_id`` narrow to the memories added with them."""
        return self._listed(user_id, filters, limit, check_scope(agent_id, run_id), directives=False)

    def directives(self, *, user_id: str, limit: Optional[int] = None) -> list[dict[str, Any]]:
        """The user's forget directives (what is left where a memory was forgotten), oldest
        first."""
        return self._listed(user_id, None, limit, {}, directives=True)

    def history(self, memory_id: str, *, user_id: Optional[str] = None) -> list[dict[str, Any]]:
        """The memory's audit trail (stored, updated, retrieved, forgotten, ...; never text): this
        user's record of the id and this user's own queries only
        (:meth:`memgate.retriever.GatedRetriever.history`)."""
        with self._lock:
            self._check_open()
            if user_id is None:  # (a forgotten id has left the catalog: pass user_id for it)
                user_id = self._owner(memory_id, None)
            record = self._own(memory_id, user_id, allow_forgotten=True)
            return [{"event": s.stage, "ts": s.ts, "query_id": s.query_id, "detail": s.detail}
                    for s in self.retriever.history(memory_id, principal=user_id, namespace=record.namespace)]

    def report_exposed(self, query_id: str, memory_ids: Iterable[str]) -> None:
        """Record which hits of ``query_id`` went into the prompt (audit: E within R)."""
        with self._lock:
            self._check_open()
            self.retriever.report_exposed(query_id, memory_ids)


__all__ = ["MAX_USER_ID", "OUTPUT_FORMATS", "SCOPE_KEYS", "USER_PREFIX", "USER_STATED",
           "LegacySearchResults", "Memory", "SearchResults", "check_scope", "check_time",
           "check_user_id", "now_utc", "record_view", "user_namespace"]
