"""``QdrantBackend``: the Qdrant store's primitives (:mod:`memgate.retriever.records.primitives`)
over one collection, through ``qdrant-client`` (the layout of points:
:mod:`memgate.retriever.stores.qdrant.store`). A write is staged in this process (validated
against the current points under its lock), then committed through the redo journal
(:mod:`memgate.retriever.stores.qdrant.journal`); the vectors are mirrored locally by slot for
the retriever's re-scoring.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

import numpy as np

from memgate.retriever.audit.log import AuditLog
from memgate.retriever.errors import AmbiguousMemoryError, StoreFullError, UnknownMemoryError, is_disk_full
from memgate.retriever.records.identity import ENCODER_KEYS, check_encoder, normalize_identity
from memgate.retriever.records.index import IndexEntry, index_entry
from memgate.retriever.records.links import check_namespace_arg, resolve_namespace
from memgate.retriever.records.memory import StoredMemory
from memgate.retriever.records.primitives import Event, Key
from memgate.retriever.records.suppression import Suppressed, new_key
from memgate.retriever.stores.base import format_error
from memgate.retriever.stores.qdrant.journal import Journal, WriteJournal
from memgate.retriever.stores.qdrant.local import PathLock
from memgate.retriever.stores.qdrant.local import is_local as _is_local
from memgate.retriever.stores.qdrant.migrate import migrate
from memgate.retriever.stores.qdrant.points import (
    _RECORDS,
    API_KEY_ENV,
    OLDER_FORMATS,
    QDRANT_FORMAT,
    VECTOR_NAME,
    QdrantClient,
    _key,
    _suppressed_id,
    _to_memory,
    index_fields,
    point_id,
    qm,
    scroll,
)

log = logging.getLogger("memgate")

Staged = tuple[StoredMemory, Optional[int], Optional[np.ndarray], list[str]]  # record, slot, vector, parents
Key3 = tuple[str, str, str]  # a suppression entry's key: (namespace, digest, memory_id)

# Back-ends whose client this module opened. qdrant-client closes a client in ``__del__``, which at
# interpreter exit runs after the import machinery is gone and prints a traceback; closing the
# open ones in an atexit hook (before that teardown) avoids it.
_OPEN_STORES: weakref.WeakSet[QdrantBackend] = weakref.WeakSet()


@atexit.register
def _close_open_stores() -> None:
    for store in list(_OPEN_STORES):
        store.close()


class QdrantBackend:
    """Records and vectors in one Qdrant collection (the arguments are
    :class:`memgate.retriever.stores.qdrant.store.QdrantStore`'s)."""

    def __init__(self, collection: str, encoder_identity: Any, *, path: str | os.PathLike[str] | None,
                 location: Optional[str], url: Optional[str], api_key: Optional[str], client: Any,
                 audit: AuditLog | bool | None, clock: Callable[[], str], on_disk: bool) -> None:
        if QdrantClient is None:
            raise ImportError("QdrantStore needs qdrant-client (pip install qdrant-client)")
        if sum(x is not None for x in (path, location, url, client)) != 1:
            raise ValueError("pass exactly one of path=, location=, url=, client=")
        self.collection = collection
        self.clock = clock
        self.lock = threading.RLock()
        self.fault_hook: Optional[Callable[[str], None]] = None  # crash tests: called per stage
        self._owns_client = client is None
        self._closed = False
        self.client: Any = None
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
            self.journal = WriteJournal(client, collection, self.hook)
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
                    self.index_fields()
            self._secure_delete()
            info = client.get_collection(collection)
            meta = dict(info.config.metadata or {})
            fmt = meta.get("format")
            if fmt != QDRANT_FORMAT and fmt not in OLDER_FORMATS:
                raise format_error(f"collection {collection!r}", fmt, QDRANT_FORMAT, OLDER_FORMATS)
            self.encoder_identity: dict[str, Any] = {k: meta["encoder"][k] for k in ENCODER_KEYS}
            self.dim: int = int(self.encoder_identity["dim"])
            if encoder_identity is not None:
                check_encoder(encoder_identity, self.encoder_identity, self.describe(), "open the store")
            if audit is True:
                if path is None:
                    raise ValueError("audit=True needs path= (or pass an AuditLog)")
                audit = AuditLog(Path(path) / "audit.jsonl")
            self.audit: Optional[AuditLog] = audit or None
            self._mirror = np.zeros((0, self.dim), dtype=np.float32)  # slot -> vector (a cache)
            # the open write's staged records, suppression entries, dead slots and counters
            self._pending: Optional[dict[Key, Staged]] = None
            self._sup_put: dict[Key3, Suppressed] = {}
            self._sup_del: dict[Key3, Suppressed] = {}
            self._dead_slots: list[int] = []
            self._counters: dict[str, Any] = {}
            self._unlogged: list[Event] = []  # events a full disk kept out of the log
            with self.lock:
                if self.journal.meta_point() is None:  # created, then killed before its metadata point
                    self.journal.put_meta({"seq": 0, "next_slot": 0, "suppression_key": new_key()})
                self.journal.recover()
                if fmt in OLDER_FORMATS:
                    migrate(self.journal, fmt, meta)
            self._key = bytes.fromhex(self.meta()["suppression_key"])
        except BaseException:
            self.close()
            raise

    # -- plumbing -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the client this store opened and release the path (idempotent; a client passed
        in stays open)."""
        if self._owns_client and not self._closed and self.client is not None:
            self._closed = True
            _OPEN_STORES.discard(self)
            self.client.close()
        if self._path_lock is not None:
            self._path_lock.release()
            self._path_lock = None

    def flush_outbox(self) -> None:
        """No outbox: audit events are appended right after each write."""

    def describe(self) -> str:
        return f"the Qdrant collection {self.collection!r}"

    def hook(self, stage: str) -> None:
        if self.fault_hook is not None:
            self.fault_hook(stage)

    def meta(self) -> dict[str, Any]:
        """The counters of the metadata point (as committed)."""
        return self.journal.meta()

    def bump(self, key: str) -> int:
        self._counters[key] = int(self._counters[key]) + 1
        return int(self._counters[key])

    @contextmanager
    def write(self) -> Iterator[list[Event]]:
        """Stage a write (validated against current points), then commit it through the journal.
        A full disk raises :class:`StoreFullError` saying whether the write is absent or
        journaled (then completed by the next write or open); audit events a full disk kept out
        of the log are appended after the next write (they are lost if the process ends first:
        this store has no outbox)."""
        with self.lock:
            try:
                self.journal.recover()
            except Exception as exc:
                if is_disk_full(exc):
                    raise self.journal.full(exc, staged=False) from exc
                raise
            meta = self.meta()
            pending: dict[Key, Staged] = {}
            self._pending = pending
            self._sup_put, self._sup_del, self._dead_slots = {}, {}, []
            events: list[Event] = []
            self._counters = dict(meta)
            try:
                yield events
                try:
                    self.journal.commit(self._journal())
                except Exception as exc:
                    if not is_disk_full(exc):
                        raise
                    full = self.journal.full(exc)
                    if "journal" in str(full):  # (completed later: so are its events)
                        self._unlogged = self._unlogged + events
                    raise full from exc
                for slot in self._dead_slots:  # replaced or forgotten vectors
                    self.mirror_set(slot, None)
                for _, new_slot, vector, _ in pending.values():
                    if vector is not None and new_slot is not None:
                        self.mirror_set(new_slot, vector)
            finally:
                self._pending = None
            events = self._unlogged + events
            if self.audit is not None and events:
                try:
                    self.audit.append_many(events)
                    self._unlogged = []
                except StoreFullError as exc:  # the write is applied: it must not look refused
                    self._unlogged = events
                    log.warning("%s; the write itself was applied, its events wait in this process", exc)

    def _journal(self) -> Journal:
        """The staged write as JSON: deletions, points (record, tombstone, suppression), counters."""
        assert self._pending is not None
        deletes, points = [], []
        for (namespace, memory_id), (memory, slot, vector, parents) in self._pending.items():
            pid = point_id(memory_id, namespace)
            if memory.forgotten:
                deletes.append(pid)  # the old point (vector + payload) goes before its tombstone
            payload = memory.to_dict()
            payload.update(_seq=self._counters["seq"], _slot=slot, _parents=list(parents))
            points.append({"id": pid, "payload": payload,
                           "vector": {} if vector is None else {VECTOR_NAME: np.asarray(vector).tolist()}})
        deletes += [_suppressed_id(e) for e in self._sup_del.values()]
        points += [{"id": _suppressed_id(e), "payload": {"_suppressed": e.to_dict()}, "vector": {}}
                   for e in self._sup_put.values()]
        return {"deletes": deletes, "points": points, "meta": self._counters}

    def index_fields(self) -> None:
        index_fields(self.client, self.collection)

    def _secure_delete(self) -> None:
        """Local mode on disk: overwrite deleted points' bytes (SQLite secure_delete)."""
        inner = getattr(self.client, "_client", None)
        local = (getattr(inner, "collections", None) or {}).get(self.collection)
        db = getattr(getattr(local, "storage", None), "storage", None)
        if db is not None:
            db.execute("PRAGMA secure_delete=ON")

    # -- staging ------------------------------------------------------------------------------

    def _raw(self, memory_id: str, namespace: str, vectors: bool = True) -> Any:
        got = self.client.retrieve(self.collection, [point_id(memory_id, namespace)], with_payload=True,
                                   with_vectors=[VECTOR_NAME] if vectors else False)
        return got[0] if got else None

    def _current(self, memory: StoredMemory) -> tuple[Optional[int], Optional[np.ndarray], list[str]]:
        """(slot, vector, parents) of the staged or stored version of ``memory``'s record."""
        key = (memory.namespace, memory.memory_id)
        assert self._pending is not None  # (staging happens inside write())
        if key in self._pending:
            _, slot, vector, parents = self._pending[key]
            return slot, vector, parents
        raw = self._raw(memory.memory_id, memory.namespace)
        if raw is None:
            return None, None, []
        slot = raw.payload.get("_slot")
        vector = (raw.vector or {}).get(VECTOR_NAME) if slot is not None else None
        return slot, None if vector is None else np.asarray(vector, np.float32), list(
            raw.payload.get("_parents") or [])

    def _stage(self, memory: StoredMemory, slot: Optional[int], vector: Optional[np.ndarray],
               parents: list[str]) -> None:
        assert self._pending is not None  # (staging happens inside write())
        self._pending[(memory.namespace, memory.memory_id)] = (memory, slot, vector, parents)

    def load(self, memory_id: str, namespace: str) -> StoredMemory:
        if self._pending is not None and (namespace, memory_id) in self._pending:
            return self._pending[(namespace, memory_id)][0]
        raw = self._raw(memory_id, namespace, vectors=False)
        if raw is None:
            raise UnknownMemoryError(f"no memory with id {memory_id!r} in namespace {namespace!r}")
        return _to_memory(raw.payload)

    def exists(self, memory_id: str, namespace: str) -> bool:
        if self._pending is not None and (namespace, memory_id) in self._pending:
            return True
        return bool(self.client.retrieve(self.collection, [point_id(memory_id, namespace)],
                                         with_payload=False))

    def namespaces_of(self, memory_id: str) -> list[str]:
        found = {ns for (ns, mid) in (self._pending or {}) if mid == memory_id}
        flt = qm.Filter(must=[qm.FieldCondition(key="memory_id", match=qm.MatchValue(value=memory_id))])
        found.update(p.payload["namespace"] for p in self.scroll(flt, ["namespace"]))
        return sorted(found)

    def children(self, namespace: str, parent: str) -> list[tuple[Any, ...]]:
        key = _key(namespace, parent)
        out = {k for k, (_, _, _, parents) in (self._pending or {}).items() if key in parents}
        flt = qm.Filter(must=[qm.FieldCondition(key="_parents", match=qm.MatchAny(any=[key]))])
        for p in self.scroll(flt, ["memory_id", "namespace"]):
            k = (p.payload["namespace"], p.payload["memory_id"])
            if k not in (self._pending or {}):
                out.add(k)
        return sorted(out, key=lambda k: (k[1], k[0]))

    def scroll(self, flt: Any, payload: Any = True, vectors: Any = False) -> Iterator[Any]:
        return scroll(self.client, self.collection, flt, payload, vectors)

    # -- vectors ------------------------------------------------------------------------------

    def mirror_set(self, slot: int, v: Optional[np.ndarray]) -> None:
        if slot >= self._mirror.shape[0]:
            grown = np.zeros((max(slot + 1, 2 * self._mirror.shape[0], 1024), self.dim), np.float32)
            grown[: self._mirror.shape[0]] = self._mirror
            self._mirror = grown
        self._mirror[slot] = 0.0 if v is None else v

    def vector_matrix(self) -> np.ndarray:
        """(n_slots, dim) float32: a local mirror of the points' vectors by slot, filled by writes
        and by :meth:`changes_since` (zero rows for replaced or forgotten vectors)."""
        with self.lock:
            n = int(self.meta()["next_slot"])
            if n > self._mirror.shape[0]:
                self.mirror_set(n - 1, None)  # (rows not yet seen stay zero until changes_since)
            view = self._mirror[:n]
            view.flags.writeable = False
            return view

    def vectors_for(self, memory_ids: Iterable[str], *,
                    namespace: Optional[str] = None) -> dict[str, np.ndarray]:
        out = {}
        with self.lock:
            for memory_id in dict.fromkeys(memory_ids):
                try:
                    raw = self._raw(memory_id, resolve_namespace(self, memory_id, namespace))
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
                got = self.scroll(flt, True)
            for p in got:
                if p.payload["memory_id"] in out:
                    raise AmbiguousMemoryError(
                        f"memory id {p.payload['memory_id']!r} names records in several namespaces "
                        "(ids are scoped per namespace): pass namespace=")
                out[p.payload["memory_id"]] = _to_memory(p.payload)
        return out

    def count(self) -> int:
        found: int = self.client.count(self.collection, count_filter=_RECORDS, exact=True).count
        return found

    def ids(self) -> list[str]:
        """Every record's id, sorted (an id used in several namespaces appears once per record)."""
        return [mid for mid, _ in sorted((p.payload["memory_id"], p.payload["namespace"])
                                         for p in self.scroll(_RECORDS, ["memory_id", "namespace"]))]

    def version(self) -> int:
        return int(self.meta()["seq"])

    def changes_since(self, seq: int) -> tuple[int, list[IndexEntry]]:
        """Index entries of every record written after ``seq`` (their vectors refresh the mirror)."""
        with self.lock:
            version = self.version()
            flt = qm.Filter(must=[qm.FieldCondition(key="_seq", range=qm.Range(gt=seq, lte=version))])
            points = list(self.scroll(flt, True, [VECTOR_NAME]))
        entries = []
        for p in sorted(points, key=lambda p: (p.payload["_seq"], p.payload["memory_id"], p.payload["namespace"])):
            raw = p.payload
            entry = index_entry(raw, memory_id=raw["memory_id"], namespace=raw["namespace"],
                                slot=raw.get("_slot"), lifecycle_state=raw["lifecycle_state"],
                                seq=raw["_seq"])
            if entry.alive and entry.slot is not None:
                with self.lock:
                    self.mirror_set(entry.slot, np.asarray(p.vector[VECTOR_NAME], dtype=np.float32))
            entries.append(entry)
        return version, entries

    def scan_markers(self, namespaces: Iterable[str]) -> list[tuple[str, tuple[Any, ...]]]:
        ns = sorted(set(namespaces))
        if not ns:
            return []
        flt = qm.Filter(must=[qm.FieldCondition(key="namespace", match=qm.MatchAny(any=ns))],
                        must_not=[qm.FieldCondition(key="lifecycle_state", match=qm.MatchValue(value="forgotten"))])
        out = [(p.payload["memory_id"], tuple(p.payload.get("markers") or ()))
               for p in self.scroll(flt, ["memory_id", "markers"])]
        return sorted(o for o in out if o[1])

    # -- write primitives (the rules are memgate.retriever.records.rules.Records) -------------

    def put_new(self, memory: StoredMemory, seq: int, v: np.ndarray, parents: Iterable[tuple[Any, ...]] = ()) -> int:
        slot = self.bump("next_slot") - 1
        self._stage(memory, slot, v, [_key(*p) for p in parents])
        return slot

    def put(self, memory: StoredMemory, seq: int) -> None:
        self._stage(memory, *self._current(memory))

    def put_new_vector(self, memory: StoredMemory, seq: int, v: np.ndarray) -> int:
        """A new slot: the point's vector is overwritten and the old slot dies."""
        old_slot, _, parents = self._current(memory)
        slot = self.bump("next_slot") - 1
        self._stage(memory, slot, v, parents)
        if old_slot is not None:
            self._dead_slots.append(old_slot)
        return slot

    def put_tombstone(self, tomb: StoredMemory, seq: int) -> None:
        """The point (vector and payload) is deleted and a vector-less tombstone takes its id
        (see ``_journal``); its derivation links go with the payload."""
        old_slot, _, _ = self._current(tomb)
        self._stage(tomb, None, None, [])
        if old_slot is not None:
            self._dead_slots.append(old_slot)

    def put_restored_tombstone(self, tomb: StoredMemory, seq: int) -> None:
        self._stage(tomb, None, None, [])

    def suppression_key(self) -> bytes:
        return self._key

    def foreign_keys(self) -> dict[str, bytes]:
        raw = (self._counters if self._pending is not None else self.meta()).get("suppression_keys") or {}
        return {k: bytes.fromhex(v) for k, v in raw.items()}

    def put_foreign_keys(self, keys: Mapping[str, bytes]) -> None:
        merged = dict(self._counters.get("suppression_keys") or {})
        merged.update({k: v.hex() for k, v in keys.items()})
        self._counters["suppression_keys"] = merged  # (written with the counters, in the journal)

    def suppressed(self, namespaces: Optional[Iterable[str]]) -> list[Suppressed]:
        if namespaces is None:
            ns = None
            flt = qm.Filter(must_not=[qm.IsEmptyCondition(is_empty=qm.PayloadField(key="_suppressed"))])
        else:
            ns = sorted(set(namespaces))
            flt = qm.Filter(must=[qm.FieldCondition(key="_suppressed.namespace", match=qm.MatchAny(any=ns))])
        found = {}
        for p in self.scroll(flt, True):
            e = Suppressed.from_dict(p.payload["_suppressed"])
            found[e.key] = e
        if self._pending is not None:
            found.update((k, e) for k, e in self._sup_put.items() if ns is None or e.namespace in ns)
            for k in self._sup_del:
                found.pop(k, None)
        return list(found.values())

    def put_suppressed(self, entries: Iterable[Suppressed]) -> None:
        for e in entries:
            self._sup_put[(e.namespace, e.digest, e.memory_id)] = e
            self._sup_del.pop((e.namespace, e.digest, e.memory_id), None)

    def lift_suppressed(self, entries: Iterable[Suppressed]) -> None:
        for e in entries:
            self._sup_del[(e.namespace, e.digest, e.memory_id)] = e
            self._sup_put.pop((e.namespace, e.digest, e.memory_id), None)

    # -- integrity ----------------------------------------------------------------------------

    def verify(self) -> list[str]:
        """Integrity problems (empty when sound): a pending journal, counters behind the data,
        slots shared by two records, points not keyed by (namespace, id), live records without
        text or vector, forgotten records that kept content."""
        problems: list[str] = []
        with self.lock:
            raw = self.journal.meta_point()
            if raw is None:
                return ["no metadata point"]
            if raw.payload.get("_journal") is not None:
                problems.append("a write journal is pending (reopen the store to complete it)")
            meta = raw.payload["_meta"]
            points = list(self.scroll(_RECORDS, True, [VECTOR_NAME]))
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


__all__ = ["QdrantBackend"]
