"""``memgate.Memory``: two concepts, memories and the user they belong to.

    from memgate import Memory

    with Memory(path="memstore") as m:                 # embedded store (a directory)
        m.add("I'm vegetarian.", user_id="alice", metadata={"topic": "food"})
        hits = m.search("What should I cook tonight?", user_id="alice")["results"]
        print(hits[0]["memory"], hits[0]["action"])

``Memory()`` without a path keeps the store in ``$MEMGATE_HOME/store``, else the per-user data
directory (:mod:`memgate.integrations.home`). Underneath is the full
:class:`memgate.retriever.GatedRetriever` (``Memory.retriever``). The contract, call by call, is
docs/integrations/memory.md; in short: the ids choose and narrow the
namespace, never widen it (:mod:`memgate.integrations.scoping`); ``add`` stores the text as given
(``provenance="user_stated"``, ``policy_tags=["general"]`` unless passed; chat messages:
:mod:`memgate.integrations.messages`; ``infer=True`` only through a configured extractor,
:mod:`memgate.integrations.extraction`), returns the current memory it repeats
(:mod:`memgate.integrations.dedup`) and may expire (:mod:`memgate.integrations.expiry`);
``search`` answers ``{"results": [...], ...}`` (:mod:`memgate.integrations.results`; each hit's
``gate_risk``: :mod:`memgate.integrations.hits`) with ``agent_default`` actions; ``delete``
forgets for good and keeps a directive that never takes a result slot (``forgotten_relevant``
says one would have ranked); ``gate="auto"`` / ``"released"`` / ``None`` as in
:func:`memgate.integrations.gate_default`.

One ``Memory`` serialises its calls with a lock (the retriever is not thread-safe): threads may
share it; processes may share a store directory (SQLite locking) or a PostgreSQL store. Opening
loads no model: the encoder loads at the first call that embeds, the gate at the first search,
or both at ``warm_up()`` (in a thread beside calls that embed nothing; those that embed wait).
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
from memgate.integrations.dedup import check_cosine, duplicate_of, text_digest
from memgate.integrations.expiry import EXPIRES_KEY, check_expiration, is_expired, now_stamp, query_stamp
from memgate.integrations.extraction import NO_EXTRACTOR, Extractor
from memgate.integrations.filters import check_filters
from memgate.integrations.hits import drop_summary, hit_view
from memgate.integrations.home import default_store_dir
from memgate.integrations.inputs import (
    check_item_fields,
    check_item_shape,
    check_metadata,
    check_threshold,
    check_time,
    prefix,
)
from memgate.integrations.mem0_config import memory_kwargs
from memgate.integrations.messages import user_turns
from memgate.integrations.opening import DEFAULT_POLICY_TAG, open_retriever, open_store
from memgate.integrations.results import (
    LegacySearchResults,
    ListResults,
    SearchResults,
    record_view,
    results_of,
)
from memgate.integrations.scoping import (
    MAX_ID,
    PREFIXES,
    SCOPE_KEYS,
    USER_PREFIX,
    Scope,
    check_scope,
    check_user_id,
    resolve,
    scope_of_namespace,
)
from memgate.retriever import DEFAULT_DIRECTIVE
from memgate.retriever.errors import UnknownMemoryError
from memgate.retriever.records.memory import StoredMemory

MAX_USER_ID = MAX_ID
USER_STATED = "user_stated"  # the provenance add() records (the user stating it, about themselves)
RESERVED_METADATA = (*SCOPE_KEYS, EXPIRES_KEY)  # set from their own keywords, not metadata
# v1.2: get_all returns {"results": [...]}; v1.1: get_all returns a list (one release);
# v1.0: search returns a list too (one release)
OUTPUT_FORMATS = ("v1.2", "v1.1", "v1.0")


def user_namespace(user_id: str) -> str:
    return USER_PREFIX + check_user_id(user_id)


def now_utc() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


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
    directory; ``action_preset`` one of memgate.actions' presets; ``output_format="v1.1"``
    keeps the list shape of ``get_all`` and ``"v1.0"`` that of ``search`` too, for one release;
    ``extractor`` an OpenAI-compatible endpoint for ``add(..., infer=True)``
    (:mod:`memgate.integrations.extraction`); ``dedup_cosine`` folds near-duplicates at or
    above that cosine into the memory they repeat (None, the default: exact duplicates only).
    :meth:`from_config` reads Mem0's configuration dict.
    """

    def __init__(self, path: Any = None, *, store: str = "embedded", url: Optional[str] = None,
                 collection: str = "memgate", api_key: Optional[str] = None, gate: Any = "auto",
                 action_preset: str = "agent_default",
                 policy_rules: Optional[Mapping[str, Mapping[str, Any]]] = None, encoder: Any = None,
                 rerank_depth: int = RERANK_DEPTH, fail_mode: str = "open", fsync: bool = True,
                 audit_log: Any = None, output_format: str = "v1.2", extractor: Any = None,
                 dedup_cosine: Optional[float] = None):
        if output_format not in OUTPUT_FORMATS:
            raise ValueError(f"field 'output_format' must be one of {OUTPUT_FORMATS}, got {output_format!r}")
        if output_format != OUTPUT_FORMATS[0]:
            warnings.warn(f"output_format={output_format!r} (get_all{'' if output_format == 'v1.1' else ' and search'}"
                          " return a list) goes in the next release; read get_all(...)['results']",
                          DeprecationWarning, stacklevel=2)
        self.output_format = output_format
        self.extractor = None if extractor is None else Extractor.from_mapping(extractor)
        self.dedup_cosine = check_cosine(dedup_cosine)
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

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **options: Any) -> Memory:
        """A Memory from Mem0's configuration dict (:mod:`memgate.integrations.mem0_config`:
        ``vector_store``, ``embedder``, ``llm``; any other key is refused, named); ``options``
        are further :class:`Memory` keywords."""
        return cls(**{**memory_kwargs(config), **options})

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

    @staticmethod
    def _label(scope: Scope) -> str:
        return f"user {scope.user_id!r}" if scope.user_id is not None else scope.namespace

    def _own(self, memory_id: Any, scope: Scope, *, allow_forgotten: bool = False) -> Any:
        """The scope's record, or UnknownMemoryError (one answer for unknown, not yours and
        expired); an expired record met here is erased."""
        if not isinstance(memory_id, str) or not memory_id:
            raise ValueError(f"field 'memory_id' must be a non-empty string, got {memory_id!r}")
        record = self.store.get(memory_id, namespace=scope.namespace)  # ids are per namespace
        if record is not None and not record.forgotten and is_expired(record.attributes, now_stamp()):
            with self._lock:
                self._erase_expired([scope.namespace])
            record = self.store.get(memory_id, namespace=scope.namespace)  # (now its tombstone)
        if record is None or record.namespace != scope.namespace or (
                record.forgotten and not allow_forgotten):
            raise UnknownMemoryError(f"no memory {memory_id!r} for {self._label(scope)}")
        return record

    def _in_scope(self, record: Any, scope: Scope) -> None:
        """An ``agent_id`` / ``run_id`` that names a scope other than the record's is refused."""
        for key, value in scope.narrow.items():
            if record.attributes.get(key) != value:
                raise ValueError(f"field {key!r}: memory {record.memory_id!r} was not added with "
                                 f"{key}={value!r}")

    def _owner(self, memory_id: Any, user_id: Any, agent_id: Any = None, run_id: Any = None) -> Scope:
        """The scope of the ids given, or (none given) of the one namespace whose live memory
        has this id; an id that names no memory or several answers as an unknown id does."""
        if user_id is not None or agent_id is not None or run_id is not None:
            return resolve(user_id, agent_id, run_id)
        if not isinstance(memory_id, str) or not memory_id:
            raise ValueError(f"field 'memory_id' must be a non-empty string, got {memory_id!r}")
        namespace = self.catalog.namespace_of(memory_id)
        scope = None if namespace is None else scope_of_namespace(namespace)
        if scope is None:
            raise UnknownMemoryError(f"no memory {memory_id!r} (pass user_id= for an id that "
                                     "several users' memories share)")
        return scope

    def _check_links(self, fields: Mapping[str, Any], scope: Scope) -> None:
        for source in fields.get("derived_from") or ():
            self._own(source, scope)
        for link in fields.get("supersedes") or ():
            self._own(link if isinstance(link, str) else link.memory_id, scope)

    def _scoped_ids(self, scope: Scope, flt: Optional[dict[str, Any]], directives: bool,
                    at: str) -> Optional[list[str]]:
        """The scope's ids matching ``flt`` (directives: scope only) and not expired at ``at``,
        or None when nothing narrows (every id of the namespace)."""
        expired = {mid for _, mid in self.catalog.expired(at, [scope.namespace])}
        if not scope.narrow and not flt and not (expired and not directives):
            return None
        where = {**scope.where, **({} if directives else flt or {})}
        return [i for i in self.catalog.ids([scope.namespace], where, directives=directives) if i not in expired]

    def _erase_expired(self, namespaces: Optional[Iterable[str]] = None) -> int:
        """Erase the records expired by now (audit ``expired``); the caller holds the lock."""
        keys = self.catalog.expired(now_stamp(), namespaces)
        if keys:
            self.retriever.erase(keys, event="expired")
        return len(keys)

    def _check_suppressed(self, item: Mapping[str, Any], scope: Scope) -> None:
        """Refuse an item that repeats forgotten content (text, metadata, markers), as a write
        would, though a de-duplicated add writes nothing."""
        check = getattr(self.store, "check_suppressed", None)
        if check is not None:
            check(StoredMemory(memory_id=item["memory_id"], namespace=scope.namespace, text=item["text"],
                               principal=scope.principal, attributes=dict(item["attributes"]),
                               markers=tuple(item.get("markers") or ())))

    # -- writes -------------------------------------------------------------------------------

    def _item(self, given: Any, i: Optional[int], scope: Scope) -> dict[str, Any]:
        """One add's fields (checked): text, attributes (metadata + scope + expiry), provenance,
        tags; ``explicit_id``: the caller chose the id (no de-duplication)."""
        where = prefix(i)
        item = check_item_shape(given, i)
        if "text" not in item:
            raise ValueError(f"{where} field 'text' is missing")
        for reserved in ("namespace", "principal", "attributes"):
            if reserved in item:
                raise TypeError(f"{where} field {reserved!r} is set from user_id / metadata")
        metadata = check_metadata(item.pop("metadata", None), i)
        for key in RESERVED_METADATA:
            if key in metadata:
                raise ValueError(f"{where} field 'metadata.{key}' is reserved: pass {key}= instead")
        expires = check_expiration(item.pop("expiration_date", None))
        item["attributes"] = {**metadata, **scope.narrow, **({EXPIRES_KEY: expires} if expires else {})}
        check_item_fields(item, i)
        item.setdefault("policy_tags", [DEFAULT_POLICY_TAG])
        item.setdefault("provenance", USER_STATED)
        item["explicit_id"] = item.get("memory_id") is not None
        if item["explicit_id"]:
            check_id(item["memory_id"])
        else:
            item["memory_id"] = f"mem-{uuid.uuid4().hex[:16]}"
        return item

    def add(self, text: Any, *, user_id: Optional[str] = None, metadata: Optional[Mapping[str, Any]] = None,
            memory_id: Optional[str] = None, agent_id: Optional[str] = None,
            run_id: Optional[str] = None, infer: bool = False, expiration_date: Any = None,
            allow_relearn: bool = False, **record_fields: Any) -> Any:
        """Store one memory in the scope of ``user_id`` / ``agent_id`` / ``run_id``
        (:mod:`memgate.integrations.scoping`); returns it, or the current memory of the same
        scope whose normalised text it repeats, unchanged (:mod:`memgate.integrations.dedup`;
        not when ``memory_id`` is given). ``text`` may be a chat message or a list of them
        (:func:`memgate.integrations.messages.user_turns`): each user turn is stored, in one
        write, and the list of stored memories is returned; ``infer=True`` distils them into facts
        through the configured extractor (:mod:`memgate.integrations.extraction`; refused without
        one). ``expiration_date`` (a datetime or ISO 8601 text) makes the memory expire
        (:mod:`memgate.integrations.expiry`). ``record_fields`` are the record's other fields
        (``policy_tags``, ``observed_at``, ``epistemic_status``, ``provenance``, ``risk``,
        ``evidence_strength``, ``applicability``, ``supersedes``, ``derived_from``, ...).
        ``memory_id`` (default: a random id) follows :func:`memgate.contract.ids.check_id`: an
        id this or another surface could not read or forget later is refused, never replaced."""
        resolve(user_id, agent_id, run_id)  # (refused before anything else: no scope, bad ids)
        if type(infer) is not bool:
            raise ValueError(f"field 'infer' must be True or False, got {infer!r}")
        if infer and self.extractor is None:
            raise ValueError(NO_EXTRACTOR)
        check_expiration(expiration_date)
        if isinstance(text, Mapping):
            text = [text]  # one chat message
        if not isinstance(text, str) or infer:
            if memory_id is not None:
                raise ValueError("add(messages): field 'memory_id' names one memory; each turn gets its own")
            turns = [text] if isinstance(text, str) else user_turns(text)
            if infer and turns:
                assert self.extractor is not None
                turns = self.extractor.extract(turns)
            items = [{"text": t, "metadata": metadata, "expiration_date": expiration_date, **record_fields}
                     for t in turns]
            return self.add_many(items, user_id=user_id, agent_id=agent_id, run_id=run_id,
                                 allow_relearn=allow_relearn) if items else []
        stored = self.add_many([{"text": text, "metadata": metadata, "memory_id": memory_id,
                                 "expiration_date": expiration_date, **record_fields}],
                               user_id=user_id, agent_id=agent_id, run_id=run_id,
                               allow_relearn=allow_relearn, _single=True)
        return stored[0]

    def add_many(self, items: Iterable[Any], *, user_id: Optional[str] = None, agent_id: Optional[str] = None,
                 run_id: Optional[str] = None, allow_relearn: bool = False,
                 _single: bool = False) -> list[dict[str, Any]]:
        """Store several memories in one write (all or none), embedded in one batch; each item
        is a text or a mapping ``{"text": ..., "metadata": {...}, "expiration_date": ...,
        **record_fields}``. An item repeating a current memory of the scope, or an earlier item
        (no ``memory_id`` given), returns that memory (:mod:`memgate.integrations.dedup`)."""
        scope = resolve(user_id, agent_id, run_id)
        per = [self._item(item, None if _single else i, scope) for i, item in enumerate(items)]
        with self._model_lock, self._lock:  # (waits for a warm-up in progress)
            self._check_open()
            self._erase_expired([scope.namespace])
            out: list[Any] = []  # per item: a stored view, or the index of the item it repeats
            new: list[dict[str, Any]] = []
            batch: dict[tuple[Any, ...], int] = {}
            for item in per:
                self._check_links(item, scope)
                explicit = item.pop("explicit_id")
                key = (text_digest(item["text"]), *(item["attributes"].get(k) for k in SCOPE_KEYS))
                if not explicit:
                    if key in batch:
                        out.append(batch[key])
                        continue
                    same = duplicate_of(self.catalog, self.retriever, item["text"], scope.namespace, item["attributes"],
                                        self.dedup_cosine)
                    if same is not None:
                        if not allow_relearn:  # (forgotten content in its metadata is refused all the same)
                            self._check_suppressed(item, scope)
                        self.store.note("deduplicated", memory_id=same, namespace=scope.namespace,
                                        principal=scope.principal)
                        out.append(record_view(self._own(same, scope), scope.user_id))
                        continue
                    batch[key] = len(out)
                out.append(None)
                new.append(item)
            texts = [item.pop("text") for item in new]
            stored = iter(self.retriever.add_many(texts, namespace=scope.namespace, principal=scope.principal,
                                                  fields=new, allow_relearn=allow_relearn) if new else [])
            for i, got in enumerate(out):
                if got is None:
                    out[i] = record_view(next(stored), scope.user_id)
            return [out[got] if isinstance(got, int) else got for got in out]

    def update(self, memory_id: str, data: Optional[str] = None, *, user_id: Optional[str] = None,
               text: Optional[str] = None, metadata: Optional[Mapping[str, Any]] = None,
               expected_revision: Optional[int] = None, agent_id: Optional[str] = None,
               run_id: Optional[str] = None, allow_relearn: bool = False, **fields: Any) -> dict[str, Any]:
        """Change a memory's text (``data``, Mem0's name, or ``text``; re-embedded), metadata
        (replaced as a whole; its ``agent_id`` / ``run_id`` / ``expiration_date`` stay) or other
        updatable fields; ``expected_revision`` makes it compare-and-set. Without an id of
        its scope, the id must name one memory; an ``agent_id`` / ``run_id`` the record was not
        added with is refused."""
        if data is not None and text is not None and data != text:
            raise ValueError("update: field 'data' and field 'text' both given (pass one)")
        text = text if text is not None else data
        changes = dict(fields)
        if text is not None:
            changes["text"] = text
        if not changes and metadata is None:
            raise ValueError("update: nothing to change (pass data, text=, metadata= or a field)")
        with self._model_lock, self._lock:  # (waits for a warm-up in progress)
            self._check_open()
            scope = self._owner(memory_id, user_id, agent_id, run_id)
            record = self._own(memory_id, scope)
            self._in_scope(record, scope)
            if metadata is not None:
                metadata = check_metadata(metadata, None, "update:")
                reserved = sorted(set(metadata) & set(RESERVED_METADATA))
                if reserved:
                    raise ValueError(f"update: field 'metadata.{reserved[0]}' is reserved (set at add)")
                kept = {k: record.attributes[k] for k in RESERVED_METADATA if k in record.attributes}
                changes["attributes"] = {**dict(metadata), **kept}
            revision = record.revision if expected_revision is None else expected_revision
            updated = self.retriever.update(memory_id, revision, principal=scope.principal,
                                            namespace=record.namespace, allow_relearn=allow_relearn,
                                            **changes)
            return record_view(updated, scope.user_id)

    def delete(self, memory_id: str, *, user_id: Optional[str] = None, agent_id: Optional[str] = None,
               run_id: Optional[str] = None, directive: Optional[str] = None) -> dict[str, Any]:
        """Forget a memory (text, metadata and vector erased for good; the id cannot be reused)
        and keep a forget directive in its namespace; returns the directive. Without an id of
        its scope, the id must name one memory (else :class:`UnknownMemoryError`, the answer
        for an unknown id); an ``agent_id`` / ``run_id`` the record was not added with is
        refused."""
        with self._model_lock, self._lock:  # (waits for a warm-up in progress)
            self._check_open()
            scope = self._owner(memory_id, user_id, agent_id, run_id)
            record = self._own(memory_id, scope)
            self._in_scope(record, scope)
            kept = {k: record.attributes[k] for k in SCOPE_KEYS if k in record.attributes}
            stored = self.retriever.forget(
                memory_id, principal=scope.principal, namespace=record.namespace,
                directive_text=directive or DEFAULT_DIRECTIVE, attributes=kept,
                directive_id=derived_id(memory_id, f"-forget-{uuid.uuid4().hex[:6]}"))
            return record_view(stored, scope.user_id)

    forget = delete

    def delete_all(self, *, user_id: Optional[str] = None, agent_id: Optional[str] = None,
                   run_id: Optional[str] = None) -> list[str]:
        """Forget every memory of the scope (the forget directives stay); returns the ids."""
        scope = resolve(user_id, agent_id, run_id)
        with self._model_lock, self._lock:  # (delete takes both, in this order)
            self._check_open()
            self._erase_expired([scope.namespace])
            targets = self.catalog.ids([scope.namespace], scope.where, directives=False)
            for memory_id in targets:
                self.delete(memory_id, user_id=user_id, agent_id=agent_id, run_id=run_id)
            return targets

    def sweep(self) -> int:
        """Erase every memory whose ``expiration_date`` has passed (audit ``expired``; no forget
        directive: the text may be added again); returns how many."""
        with self._lock:
            self._check_open()
            return self._erase_expired()

    def reset(self, keep_forget_list: bool = True) -> None:
        """Empty the store through the erasure path (records, vectors, the audit history), then
        write one ``reset`` event. ``keep_forget_list`` (default): the forget directives and their
        suppression stay, so forgotten content stays refused; ``False`` removes them too (test
        loops: the protection is given up)."""
        if type(keep_forget_list) is not bool:
            raise ValueError(f"field 'keep_forget_list' must be True or False, got {keep_forget_list!r}")
        with self._model_lock, self._lock:
            self._check_open()
            namespaces = self.catalog.namespaces()
            keys = [(ns, i) for ns in namespaces
                    for i in self.catalog.ids([ns], directives=None if not keep_forget_list else False)]
            self.retriever.erase(keys, event="reset", lift_suppression=not keep_forget_list)
            audit = getattr(self.store, "audit", None)
            if audit is not None:
                audit.clear()
            self.store.note("reset", keep_forget_list=keep_forget_list, erased=len(keys))

    # -- reads --------------------------------------------------------------------------------

    def users(self) -> list[str]:
        """The user ids with a current memory in this store, sorted (directives do not count)."""
        with self._lock:
            self._check_open()
            at = now_stamp()
            return [ns[len(USER_PREFIX):] for ns in self.catalog.namespaces()
                    if ns.startswith(USER_PREFIX)
                    and self.catalog.ids([ns], where=lambda a: not is_expired(a, at), directives=False)]

    def search(self, query: str, *, user_id: Optional[str] = None, filters: Optional[Mapping[str, Any]] = None,
               limit: Optional[int] = None, intent: str = "current_state", purpose: Optional[str] = None,
               time: Optional[str] = None, subject: Optional[str] = None, risk: Optional[str] = None,
               asks: str = "fact", proposed_action: Optional[str] = None,
               agent_id: Optional[str] = None, run_id: Optional[str] = None,
               threshold: Optional[float] = None, top_k: Optional[int] = None) -> Any:
        """The scope's top ``limit`` (1 to ``MAX_LIMIT``, default 10; ``top_k`` is Mem0's name
        for it) admissible memories for ``query``, with allowed actions, as
        :class:`SearchResults` (forget directives never take a slot: ``forgotten_relevant`` says
        one would have); ``threshold``: a minimum ``score`` (docs/design.md gives its range),
        applied to the top ``limit``.

        ``filters`` restrict by metadata before truncation (:mod:`memgate.integrations.filters`,
        ``AND`` / ``OR`` / ``NOT`` included); ``agent_id`` / ``run_id`` select or narrow the
        scope (:mod:`memgate.integrations.scoping`); ``intent`` (``current_state``, the default,
        ``history`` or ``unknown``), ``purpose``, ``subject`` and ``time`` (default: now, UTC)
        are the query context the Kleene exclusion reads (a memory expired at ``time`` is never
        returned); ``risk`` / ``asks`` / ``proposed_action`` describe the request to the
        allowed-action policy."""
        scope = resolve(user_id, agent_id, run_id)
        if top_k is not None and limit is not None and top_k != limit:
            raise ValueError(f"field 'top_k' is Mem0's name for 'limit': pass one (got top_k={top_k!r}, "
                             f"limit={limit!r})")
        limit = top_k if top_k is not None else (10 if limit is None else limit)
        check_limit(limit)
        minimum = check_threshold(threshold)
        if time is not None:
            check_time(time)
        at = query_stamp(time)
        flt = check_filters(filters)
        ns = scope.namespace
        with self._model_lock, self._lock:  # (waits for a warm-up in progress)
            self._check_open()
            self._erase_expired([ns])
            query_id = f"q-{uuid.uuid4().hex}"
            ctx = QueryContext(query_id=query_id, text="", principal=scope.principal,
                               namespaces=frozenset({ns}), purpose=purpose, intent=intent,
                               time=time or now_utc(), subject=subject)
            apart = self._scoped_ids(scope, flt, True, at)
            if apart is None:
                apart = self.catalog.ids([ns], directives=True)
            only = self._scoped_ids(scope, flt, False, at)
            result = self.retriever.retrieve(query, ctx, k=limit, asks=asks,
                                             proposed_action=proposed_action, risk=risk,
                                             only_ids=None if only is None else [*only, *apart],
                                             set_apart=apart)
            hits = [hit_view(item, lambda r: record_view(r, scope.user_id)) for item in result.items
                    if minimum is None or item.score >= minimum]
            found = SearchResults(hits, query_id, sum(result.excluded_counts.values()), result.route,
                                  forgotten_relevant=bool(result.set_apart),
                                  **drop_summary(result, readable=lambda n: n == ns))
            return LegacySearchResults(found) if self.output_format == "v1.0" else found

    def get(self, memory_id: str, *, user_id: Optional[str] = None, agent_id: Optional[str] = None,
            run_id: Optional[str] = None) -> Optional[dict[str, Any]]:
        """The scope's memory, or None (unknown, another scope's, forgotten or expired; without
        an id of its scope, also an id several memories share). A read by id needs no retriever
        state, so it does not wait for the lock (the store locks itself)."""
        self._check_open()
        try:
            scope = self._owner(memory_id, user_id, agent_id, run_id)
            record = self._own(memory_id, scope)
        except UnknownMemoryError:
            return None
        if not scope.holds(record.attributes):
            return None
        return record_view(record, scope.user_id)

    def _listed(self, scope: Scope, filters: Any, limit: Optional[int],
                directives: bool) -> list[dict[str, Any]]:
        if limit is not None and (type(limit) is not int or limit < 1):
            raise ValueError(f"field 'limit' must be an int >= 1 or None, got {limit!r}")
        flt = check_filters(filters)
        with self._lock:
            self._check_open()
            self._erase_expired([scope.namespace])
            at = now_stamp()
            ids = self.catalog.ids([scope.namespace], {**scope.where, **flt}, directives=directives,
                                   where=lambda a: not is_expired(a, at))
            records = sorted(self.store.get_many(ids, namespace=scope.namespace).values(),
                             key=lambda r: (r.created_at or "", r.memory_id))
            return [record_view(r, scope.user_id) for r in records[:limit]]

    def get_all(self, *, user_id: Optional[str] = None, filters: Optional[Mapping[str, Any]] = None,
                limit: Optional[int] = None, agent_id: Optional[str] = None,
                run_id: Optional[str] = None) -> Any:
        """The scope's current memories (not the forget directives: :meth:`directives`), oldest
        first, as ``{"results": [...]}`` (:class:`ListResults`; a list under output format
        v1.1 / v1.0, for one release)."""
        items = self._listed(resolve(user_id, agent_id, run_id), filters, limit, directives=False)
        return ListResults(items) if self.output_format == OUTPUT_FORMATS[0] else items

    def directives(self, *, user_id: Optional[str] = None, limit: Optional[int] = None,
                   agent_id: Optional[str] = None, run_id: Optional[str] = None) -> list[dict[str, Any]]:
        """The scope's forget directives (what is left where a memory was forgotten), oldest
        first."""
        return self._listed(resolve(user_id, agent_id, run_id), None, limit, directives=True)

    def history(self, memory_id: str, *, user_id: Optional[str] = None, agent_id: Optional[str] = None,
                run_id: Optional[str] = None) -> list[dict[str, Any]]:
        """The memory's audit trail (stored, updated, retrieved, forgotten, ...; never text): this
        scope's record of the id and this scope's own queries only
        (:meth:`memgate.retriever.GatedRetriever.history`)."""
        with self._lock:
            self._check_open()
            # (a forgotten id has left the catalog: pass its user_id / agent_id / run_id)
            scope = self._owner(memory_id, user_id, agent_id, run_id)
            record = self._own(memory_id, scope, allow_forgotten=True)
            return [{"event": s.stage, "ts": s.ts, "query_id": s.query_id, "detail": s.detail}
                    for s in self.retriever.history(memory_id, principal=scope.principal,
                                                    namespace=record.namespace)]

    def report_exposed(self, query_id: str, memory_ids: Iterable[str]) -> None:
        """Record which hits of ``query_id`` went into the prompt (audit: E within R)."""
        with self._lock:
            self._check_open()
            self.retriever.report_exposed(query_id, memory_ids)


__all__ = ["MAX_USER_ID", "OUTPUT_FORMATS", "PREFIXES", "SCOPE_KEYS", "USER_PREFIX", "USER_STATED",
           "LegacySearchResults", "ListResults", "Memory", "SearchResults", "check_scope", "check_threshold",
           "check_time", "check_user_id", "now_utc", "record_view", "results_of", "user_namespace"]
