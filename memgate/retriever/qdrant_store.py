"""``QdrantStore``: the ``MemoryStore`` protocol on Qdrant (through ``qdrant-client``).

One collection per store. Each record is one point (id ``uuid5([namespace, memory_id])``: ids are
scoped per namespace) whose payload is the record (``StoredMemory.to_dict()``) plus ``_seq`` (the store
version of its last write), ``_slot`` (the vector's slot number, which changes whenever the
vector does) and ``_parents`` (its resolved ``derived_from`` links); live records carry their
vector under the named vector ``dense`` (cosine). A forgotten record's point is deleted (vector
and payload) and replaced by a vector-less tombstone point holding only id, namespace, kind,
timestamps and lifecycle ``forgotten``; the keyed hashes of its text and markers become
suppression points (``_suppressed``, no vector). A metadata point (no vector, no namespace) holds
the version counter, the next slot and the suppression key; the collection's own metadata holds
the store format and encoder identity.

Where it differs from :class:`memgate.retriever.EmbeddedStore` (see docs/qdrant.md):

- Qdrant has no multi-point transactions or conditional writes. A write validates everything
  (CAS on ``revision``, links, encoder, vectors) against the current points while holding this
  process's lock, then commits through a redo journal: (1) the whole write (points, deletions,
  new counters) is stored in the metadata point, one single-point upsert; (2) it is applied
  (one ``batch_update_points``); (3) the metadata point is rewritten with the new counters and
  no journal. A process killed during (2) leaves a journal that the next open (or write)
  applies again, so a write is all or nothing and the counters never fall behind the data (no
  two records ever share a slot). Compare-and-set is exact for writers that share one
  ``QdrantStore`` (local mode allows only one process per path); several processes writing one
  server collection need a single writer in front of it.
- The audit log (optional) is appended after the Qdrant write, without an outbox.
- ``search()`` (the ``MemoryStore`` candidate search, the retriever's only query path) runs
  the namespace restriction and the Kleene exclusions expressible as payload fields or ids
  inside Qdrant's vector search as a filter, before truncation. ``GatedRetriever`` reads the
  metadata through ``changes_since()`` and the re-scored head's vectors through
  ``vector_matrix()`` (a local mirror of the vectors, refreshed from the points).
- Local mode (``path=``) is qdrant-client's pure-Python engine: it stores each point pickled in
  SQLite. The store turns SQLite's ``secure_delete`` on for its collection, so a deleted
  (forgotten) point's bytes are overwritten, not left in free pages.

Format ``memgate-qdrant/3``: a suppression point's payload records its normalisation version,
its key id ("" = the store's own key, kept in the metadata point with the keys of imported
entries) and its matching mode. A format-1 collection (memgate before scoped ids) is migrated when
opened (re-keyed points, counters rebuilt from the data, duplicate slots reassigned), through the
same journal; a format-2 one (before normalisation versions) needs no rewrite: its suppression
points read as version 1. A newer format is refused.

The write semantics (CAS, supersession, review flags, forget, suppression) are
:class:`memgate.retriever.semantics.RecordSemantics`, shared with ``EmbeddedStore``; the
journaled write is :mod:`memgate.retriever.qdrant_journal`, the point ids and payloads
:mod:`memgate.retriever.qdrant_points`, the local-mode path lock :mod:`memgate.retriever.qdrant_local`.
"""

from __future__ import annotations

import atexit
import os
import threading
import warnings
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Optional

import numpy as np

from memgate.retriever.audit import AuditLog, utc_now
from memgate.retriever.qdrant_journal import QdrantJournal
from memgate.retriever.qdrant_local import PathLock
from memgate.retriever.qdrant_local import is_local as _is_local
from memgate.retriever.qdrant_points import (
    _RECORDS,
    API_KEY_ENV,
    OLDER_FORMATS,
    QDRANT_FORMAT,
    VECTOR_NAME,
    QdrantClient,
    _key,
    _to_memory,
    point_id,
    qm,
)
from memgate.retriever.schema import AmbiguousMemoryError, StoredMemory, UnknownMemoryError
from memgate.retriever.semantics import (
    ENCODER_KEYS,
    IndexEntry,
    RecordSemantics,
    check_namespace_arg,
    index_entry,
    normalize_identity,
)
from memgate.retriever.store_protocol import format_error as _format_error
from memgate.retriever.support import check_k, readable_namespace_list
from memgate.retriever.suppression import Suppressed, new_key

# Stores whose client this module opened. qdrant-client closes a client in ``__del__``, which at
# interpreter exit runs after the import machinery is gone and prints a traceback; closing the
# open ones in an atexit hook (before that teardown) avoids it.
_OPEN_STORES: "weakref.WeakSet[QdrantStore]" = weakref.WeakSet()


@atexit.register
def _close_open_stores() -> None:
    for store in list(_OPEN_STORES):
        store.close()


class QdrantStore(RecordSemantics, QdrantJournal):
    """Records and vectors in one Qdrant collection.

    ``QdrantStore(collection, encoder_identity, path=...)`` opens local mode on disk (no server),
    ``location=":memory:"`` local mode in memory, ``url=...`` a server (API key from ``api_key``
    or the ``QDRANT_API_KEY`` environment variable), ``client=`` an existing ``QdrantClient``.
    The collection is created when missing (the identity, with ``dim``, is then required);
    an existing one with a different encoder identity is refused.
    """

    def __init__(
        self,
        collection: str = "memgate",
        encoder_identity: Any = None,
        *,
        path: str | os.PathLike | None = None,
        location: Optional[str] = None,
        url: Optional[str] = None,
        api_key: Optional[str] = None,
        client: Any = None,
        audit: AuditLog | bool | None = None,
        clock: Callable[[], str] = utc_now,
        on_disk: bool = False,
    ):
        if QdrantClient is None:
            raise ImportError("QdrantStore needs qdrant-client (pip install qdrant-client)")
        if sum(x is not None for x in (path, location, url, client)) != 1:
            raise ValueError("pass exactly one of path=, location=, url=, client=")
        self.collection = collection
        self.clock = clock
        self._lock = threading.RLock()
        self._fault_hook: Optional[Callable[[str], None]] = None  # crash tests: called per stage
        self._owns_client = client is None
        # Local mode reads every point when the client opens and only then takes its own lock,
        # so a process opening the path while another writes it could load stale points and
        # then write over the other's acknowledged writes (a lost update under CAS): memgate
        # takes a lock on the path first and holds it until close().
        self._path_lock = PathLock(Path(path)) if path is not None and client is None else None
        try:
            if client is None:
                if url is not None:
                    client = QdrantClient(url=url, api_key=api_key or os.environ.get(API_KEY_ENV))
                elif path is not None:
                    client = QdrantClient(path=str(path))
                else:
                    client = QdrantClient(location=location)
            self.client = client
            if self._owns_client:
                _OPEN_STORES.add(self)
            self.local = _is_local(client)
            if not client.collection_exists(collection):
                if encoder_identity is None:
                    raise ValueError(
                        f"collection {collection!r} holds no store yet: pass the encoder identity to create one")
                identity = normalize_identity(encoder_identity)
                client.create_collection(
                    collection,
                    vectors_config={VECTOR_NAME: qm.VectorParams(
                        size=int(identity["dim"]), distance=qm.Distance.COSINE, on_disk=on_disk)},
                    metadata={"format": QDRANT_FORMAT, "encoder": identity},
                )
                with warnings.catch_warnings():  # local mode: "payload indexes have no effect"
                    warnings.simplefilter("ignore")
                    # the tenant field: Qdrant co-locates a tenant's points and builds its HNSW
                    # links per tenant, so a namespace-filtered search stays graph-based.
                    client.create_payload_index(collection, "namespace", qm.KeywordIndexParams(
                        type=qm.KeywordIndexType.KEYWORD, is_tenant=True))
                    self._index_fields()
            self._secure_delete()
            info = client.get_collection(collection)
            meta = dict(info.config.metadata or {})
            fmt = meta.get("format")
            if fmt != QDRANT_FORMAT and fmt not in OLDER_FORMATS:
                raise _format_error(f"collection {collection!r}", fmt, QDRANT_FORMAT, OLDER_FORMATS)
            self.encoder_identity: dict = {k: meta["encoder"][k] for k in ENCODER_KEYS}
            self.dim: int = int(self.encoder_identity["dim"])
            if encoder_identity is not None:
                self.check_encoder(encoder_identity, "open the store")
            if audit is True:
                if path is None:
                    raise ValueError("audit=True needs path= (or pass an AuditLog)")
                audit = AuditLog(Path(path) / "audit.jsonl")
            self.audit: Optional[AuditLog] = audit or None
            self._mirror = np.zeros((0, self.dim), dtype=np.float32)  # slot -> vector (a cache)
            self._pending: Optional[dict] = None
            with self._lock:
                if self._meta_point() is None:  # created, then killed before its metadata point
                    self._put_meta({"seq": 0, "next_slot": 0, "suppression_key": new_key()})
                self._recover()
                if fmt in OLDER_FORMATS:
                    self._migrate(fmt, meta)
            self._key = bytes.fromhex(self._meta()["suppression_key"])
        except BaseException:
            self.close()
            raise

    # -- plumbing -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the client this store opened and release the path (idempotent; a client passed
        in stays open)."""
        if self._owns_client and not getattr(self, "_closed", False) \
                and getattr(self, "client", None) is not None:
            self._closed = True
            _OPEN_STORES.discard(self)
            self.client.close()
        if getattr(self, "_path_lock", None) is not None:
            self._path_lock.release()
            self._path_lock = None

    def __enter__(self) -> "QdrantStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def flush_outbox(self) -> None:
        """No outbox: audit events are appended right after each write."""

    def _describe(self) -> str:
        return f"the Qdrant collection {self.collection!r}"

    def _hook(self, stage: str) -> None:
        if self._fault_hook is not None:
            self._fault_hook(stage)

    def _index_fields(self) -> None:
        for field, schema in (("lifecycle_state", qm.PayloadSchemaType.KEYWORD),
                              ("memory_id", qm.PayloadSchemaType.KEYWORD),
                              ("derived_from", qm.PayloadSchemaType.KEYWORD),
                              ("_parents", qm.PayloadSchemaType.KEYWORD),
                              ("_suppressed.namespace", qm.PayloadSchemaType.KEYWORD),
                              ("_seq", qm.PayloadSchemaType.INTEGER)):
            self.client.create_payload_index(self.collection, field, schema)

    def _secure_delete(self) -> None:
        """Local mode on disk: overwrite deleted points' bytes (SQLite secure_delete)."""
        inner = getattr(self.client, "_client", None)
        local = (getattr(inner, "collections", None) or {}).get(self.collection)
        db = getattr(getattr(local, "storage", None), "storage", None)
        if db is not None:
            db.execute("PRAGMA secure_delete=ON")

    # -- staging ------------------------------------------------------------------------------

    def _raw(self, memory_id: str, namespace: str, vectors: bool = True):
        got = self.client.retrieve(self.collection, [point_id(memory_id, namespace)], with_payload=True,
                                   with_vectors=[VECTOR_NAME] if vectors else False)
        return got[0] if got else None

    def _current(self, memory: StoredMemory) -> tuple:
        """(slot, vector, parents) of the staged or stored version of ``memory``'s record."""
        key = (memory.namespace, memory.memory_id)
        if key in self._pending:
            return self._pending[key][1:]
        raw = self._raw(memory.memory_id, memory.namespace)
        if raw is None:
            return None, None, []
        slot = raw.payload.get("_slot")
        vector = (raw.vector or {}).get(VECTOR_NAME) if slot is not None else None
        return slot, None if vector is None else np.asarray(vector, np.float32), list(
            raw.payload.get("_parents") or [])

    def _stage(self, memory: StoredMemory, slot, vector, parents) -> None:
        self._pending[(memory.namespace, memory.memory_id)] = (memory, slot, vector, parents)

    def _load(self, memory_id: str, namespace: str) -> StoredMemory:
        if self._pending is not None and (namespace, memory_id) in self._pending:
            return self._pending[(namespace, memory_id)][0]
        raw = self._raw(memory_id, namespace, vectors=False)
        if raw is None:
            raise UnknownMemoryError(f"no memory with id {memory_id!r} in namespace {namespace!r}")
        return _to_memory(raw.payload)

    def _exists(self, memory_id: str, namespace: str) -> bool:
        if self._pending is not None and (namespace, memory_id) in self._pending:
            return True
        return bool(self.client.retrieve(self.collection, [point_id(memory_id, namespace)],
                                         with_payload=False))

    def _namespaces_of(self, memory_id: str) -> list[str]:
        found = {ns for (ns, mid) in (self._pending or {}) if mid == memory_id}
        flt = qm.Filter(must=[qm.FieldCondition(key="memory_id", match=qm.MatchValue(value=memory_id))])
        found.update(p.payload["namespace"] for p in self._scroll(flt, ["namespace"]))
        return sorted(found)

    def _children(self, namespace: str, parent: str) -> list[tuple]:
        key = _key(namespace, parent)
        out = {k for k, (_, _, _, parents) in (self._pending or {}).items() if key in parents}
        flt = qm.Filter(must=[qm.FieldCondition(key="_parents", match=qm.MatchAny(any=[key]))])
        for p in self._scroll(flt, ["memory_id", "namespace"]):
            k = (p.payload["namespace"], p.payload["memory_id"])
            if k not in (self._pending or {}):
                out.add(k)
        return sorted(out, key=lambda k: (k[1], k[0]))

    def _scroll(self, flt, payload: Any = True, vectors: Any = False):
        offset = None
        while True:
            points, offset = self.client.scroll(self.collection, scroll_filter=flt, limit=1024,
                                                offset=offset, with_payload=payload,
                                                with_vectors=vectors)
            yield from points
            if offset is None:
                return

    # -- vectors ------------------------------------------------------------------------------

    def _mirror_set(self, slot: int, v: Optional[np.ndarray]) -> None:
        if slot >= self._mirror.shape[0]:
            grown = np.zeros((max(slot + 1, 2 * self._mirror.shape[0], 1024), self.dim), np.float32)
            grown[: self._mirror.shape[0]] = self._mirror
            self._mirror = grown
        self._mirror[slot] = 0.0 if v is None else v

    def vector_matrix(self) -> np.ndarray:
        """(n_slots, dim) float32: a local mirror of the points' vectors by slot, filled by writes
        and by :meth:`changes_since` (zero rows for replaced or forgotten vectors)."""
        with self._lock:
            n = int(self._meta()["next_slot"])
            if n > self._mirror.shape[0]:
                self._mirror_set(n - 1, None)  # (rows not yet seen stay zero until changes_since)
            view = self._mirror[:n]
            view.flags.writeable = False
            return view

    def vectors_for(self, memory_ids: Iterable[str], *,
                    namespace: Optional[str] = None) -> dict[str, np.ndarray]:
        out = {}
        with self._lock:
            for memory_id in dict.fromkeys(memory_ids):
                try:
                    raw = self._raw(memory_id, self._resolve(memory_id, namespace))
                except UnknownMemoryError:
                    continue
                if raw is not None and raw.vector and VECTOR_NAME in raw.vector:
                    out[memory_id] = np.asarray(raw.vector[VECTOR_NAME], dtype=np.float32)
        return out

    # -- reads --------------------------------------------------------------------------------

    def get_many(self, memory_ids: Iterable[str], *,
                 namespace: Optional[str] = None) -> dict[str, StoredMemory]:
        """Records by id: in ``namespace``, or (without it) ids that name one record each
        (an id in several namespaces raises :class:`AmbiguousMemoryError`)."""
        check_namespace_arg(namespace)
        ids = list(dict.fromkeys(memory_ids))
        out: dict[str, StoredMemory] = {}
        for start in range(0, len(ids), 512):
            chunk = ids[start:start + 512]
            if namespace is not None:
                got = self.client.retrieve(self.collection, [point_id(m, namespace) for m in chunk],
                                           with_payload=True)
            else:
                flt = qm.Filter(must=[qm.FieldCondition(key="memory_id", match=qm.MatchAny(any=chunk))])
                got = self._scroll(flt, True)
            for p in got:
                if p.payload["memory_id"] in out:
                    raise AmbiguousMemoryError(
                        f"memory id {p.payload['memory_id']!r} names records in several namespaces "
                        "(ids are scoped per namespace): pass namespace=")
                out[p.payload["memory_id"]] = _to_memory(p.payload)
        return out

    def __len__(self) -> int:
        return self.client.count(self.collection, count_filter=_RECORDS, exact=True).count

    def ids(self) -> list[str]:
        """Every record's id, sorted (an id used in several namespaces appears once per record)."""
        return [mid for mid, _ in sorted((p.payload["memory_id"], p.payload["namespace"])
                                         for p in self._scroll(_RECORDS, ["memory_id", "namespace"]))]

    def version(self) -> int:
        return int(self._meta()["seq"])

    def changes_since(self, seq: int) -> tuple[int, list[IndexEntry]]:
        """Index entries of every record written after ``seq`` (their vectors refresh the mirror)."""
        with self._lock:
            version = self.version()
            flt = qm.Filter(must=[qm.FieldCondition(key="_seq", range=qm.Range(gt=seq, lte=version))])
            points = list(self._scroll(flt, True, [VECTOR_NAME]))
        entries = []
        for p in sorted(points, key=lambda p: (p.payload["_seq"], p.payload["memory_id"], p.payload["namespace"])):
            raw = p.payload
            entry = index_entry(raw, memory_id=raw["memory_id"], namespace=raw["namespace"],
                                slot=raw.get("_slot"), lifecycle_state=raw["lifecycle_state"],
                                seq=raw["_seq"])
            if entry.alive:
                with self._lock:
                    self._mirror_set(entry.slot, np.asarray(p.vector[VECTOR_NAME], dtype=np.float32))
            entries.append(entry)
        return version, entries

    def scan_markers(self, namespaces: Iterable[str]) -> list[tuple[str, tuple]]:
        ns = sorted(set(namespaces))
        if not ns:
            return []
        flt = qm.Filter(must=[qm.FieldCondition(key="namespace", match=qm.MatchAny(any=ns))],
                        must_not=[qm.FieldCondition(key="lifecycle_state", match=qm.MatchValue(value="forgotten"))])
        out = [(p.payload["memory_id"], tuple(p.payload.get("markers") or ()))
               for p in self._scroll(flt, ["memory_id", "markers"])]
        return sorted(o for o in out if o[1])

    def search(self, query: Any, namespaces: Iterable[str], k: int = 10, *,
               exclude_ids: Iterable[Any] = (), exclude_states: Iterable[str] = (),
               exact: bool = True, hnsw_ef: Optional[int] = None,
               with_namespace: bool = False) -> list[tuple]:
        """Top ``k`` live records by cosine *within* ``namespaces``: the namespace restriction,
        ``exclude_ids`` and ``exclude_states`` (lifecycle values) are a filter inside Qdrant's
        vector search (filter-aware HNSW), so the candidate set is filtered before truncation.
        ``exact=False`` allows Qdrant's HNSW search (a server; local mode is always exhaustive).
        Returns ``(memory_id, cosine)`` pairs, best first, equal scores by memory id
        (``(memory_id, cosine, namespace)`` with ``with_namespace``).

        There is no unfiltered form: an empty or missing namespace set is an error.
        """
        ns = readable_namespace_list(namespaces)
        check_k(k)
        q = self._check_vector(query).astype(np.float32)
        must_not = [qm.FieldCondition(key="lifecycle_state", match=qm.MatchAny(
            any=sorted({"forgotten", *exclude_states})))]
        excluded = []
        for item in exclude_ids:  # an id: in every readable namespace; a pair: one record
            pairs = [(n, item) for n in ns] if isinstance(item, str) else [tuple(item)]
            excluded += [point_id(mid, n) for n, mid in pairs]
        if excluded:
            must_not.append(qm.HasIdCondition(has_id=list(dict.fromkeys(excluded))))
        flt = qm.Filter(must=[qm.FieldCondition(key="namespace", match=qm.MatchAny(any=ns))],
                        must_not=must_not)
        res = self.client.query_points(
            self.collection, query=q.tolist(), using=VECTOR_NAME, query_filter=flt, limit=k,
            # (local mode is always exhaustive and warns about search parameters)
            search_params=None if self.local else qm.SearchParams(exact=exact, hnsw_ef=hnsw_ef),
            with_payload=["memory_id", "namespace"])
        out = []
        for p in res.points:
            if p.payload["namespace"] not in ns:  # defence in depth: never cross the filter
                raise AssertionError(f"Qdrant returned {p.payload['memory_id']!r} outside {ns}")
            out.append((p.payload["memory_id"], float(p.score), p.payload["namespace"]))
        out.sort(key=lambda hit: (-hit[1], hit[0], hit[2]))
        return out if with_namespace else [(m, s) for m, s, _ in out]

    # -- write primitives (the semantics are memgate.retriever.semantics.RecordSemantics) -----

    def _put_new(self, memory: StoredMemory, seq: int, v: np.ndarray, parents: Iterable[tuple] = ()) -> int:
        slot = self._bump("next_slot") - 1
        self._stage(memory, slot, v, [_key(*p) for p in parents])
        return slot

    def _put(self, memory: StoredMemory, seq: int) -> None:
        self._stage(memory, *self._current(memory))

    def _put_new_vector(self, memory: StoredMemory, seq: int, v: np.ndarray) -> int:
        """A new slot: the point's vector is overwritten and the old slot dies."""
        old_slot, _, parents = self._current(memory)
        slot = self._bump("next_slot") - 1
        self._stage(memory, slot, v, parents)
        if old_slot is not None:
            self._dead_slots.append(old_slot)
        return slot

    def _put_tombstone(self, tomb: StoredMemory, seq: int) -> None:
        """The point (vector and payload) is deleted and a vector-less tombstone takes its id
        (see ``_journal``); its derivation links go with the payload."""
        old_slot, _, _ = self._current(tomb)
        self._stage(tomb, None, None, [])
        if old_slot is not None:
            self._dead_slots.append(old_slot)

    def _put_restored_tombstone(self, tomb: StoredMemory, seq: int) -> None:
        self._stage(tomb, None, None, [])

    def _suppression_key(self) -> bytes:
        return self._key

    def _foreign_keys(self) -> dict[str, bytes]:
        raw = (self._counters if self._pending is not None else self._meta()).get("suppression_keys") or {}
        return {k: bytes.fromhex(v) for k, v in raw.items()}

    def _put_foreign_keys(self, keys) -> None:
        merged = dict(self._counters.get("suppression_keys") or {})
        merged.update({k: v.hex() for k, v in keys.items()})
        self._counters["suppression_keys"] = merged  # (written with the counters, in the journal)

    def _suppressed(self, namespaces: Optional[Iterable[str]]) -> list[Suppressed]:
        if namespaces is None:
            ns = None
            flt = qm.Filter(must_not=[qm.IsEmptyCondition(is_empty=qm.PayloadField(key="_suppressed"))])
        else:
            ns = sorted(set(namespaces))
            flt = qm.Filter(must=[qm.FieldCondition(key="_suppressed.namespace", match=qm.MatchAny(any=ns))])
        found = {}
        for p in self._scroll(flt, True):
            e = Suppressed.from_dict(p.payload["_suppressed"])
            found[e.key] = e
        if self._pending is not None:
            found.update((k, e) for k, e in self._sup_put.items() if ns is None or e.namespace in ns)
            for k in self._sup_del:
                found.pop(k, None)
        return list(found.values())

    def _put_suppressed(self, entries: Iterable[Suppressed]) -> None:
        for e in entries:
            self._sup_put[(e.namespace, e.digest, e.memory_id)] = e
            self._sup_del.pop((e.namespace, e.digest, e.memory_id), None)

    def _lift_suppressed(self, entries: Iterable[Suppressed]) -> None:
        for e in entries:
            self._sup_del[(e.namespace, e.digest, e.memory_id)] = e
            self._sup_put.pop((e.namespace, e.digest, e.memory_id), None)

    # -- integrity ----------------------------------------------------------------------------

    def verify(self) -> list[str]:
        """Integrity problems (empty when sound): a pending journal, counters behind the data,
        slots shared by two records, points not keyed by (namespace, id), live records without
        text or vector, forgotten records that kept content."""
        problems: list[str] = []
        with self._lock:
            raw = self._meta_point()
            if raw is None:
                return ["no metadata point"]
            if raw.payload.get("_journal") is not None:
                problems.append("a write journal is pending (reopen the store to complete it)")
            meta = raw.payload["_meta"]
            points = list(self._scroll(_RECORDS, True, [VECTOR_NAME]))
        owner: dict[int, str] = {}
        for p in points:
            payload = p.payload
            name = f"{payload['namespace']}/{payload['memory_id']}"
            if str(p.id) != point_id(payload["memory_id"], payload["namespace"]):
                problems.append(f"{name}: point id is not the (namespace, id) key")
            if int(payload.get("_seq") or 0) > int(meta["seq"]):
                problems.append(f"{name}: written at version {payload['_seq']}, the counter is {meta['seq']}")
            slot = payload.get("_slot")
            vector = (p.vector or {}).get(VECTOR_NAME)
            if payload["lifecycle_state"] == "forgotten":
                if payload.get("text") is not None or payload.get("markers") or vector is not None \
                        or slot is not None:
                    problems.append(f"{name}: forgotten but kept its text, markers or vector")
                continue
            if payload.get("text") is None or vector is None or slot is None:
                problems.append(f"{name}: half record (text={payload.get('text') is not None}, slot={slot})")
                continue
            if slot >= int(meta["next_slot"]):
                problems.append(f"{name}: slot {slot} is beyond the slot counter {meta['next_slot']}")
            if slot in owner:
                problems.append(f"{name}: slot {slot} is shared with {owner[slot]}")
            owner[slot] = name
        return problems


__all__ = ["API_KEY_ENV", "OLDER_FORMATS", "QDRANT_FORMAT", "VECTOR_NAME", "QdrantStore", "point_id"]
