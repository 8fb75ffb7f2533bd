"""The memory store: a ``MemoryStore`` protocol and its embedded default, ``EmbeddedStore``.

``EmbeddedStore`` keeps records in SQLite (rollback journal, ``synchronous=FULL``,
``secure_delete=ON``) and vectors in a float32 file read through a memory map (row = slot).

Transactional writes. A write takes SQLite's write lock (``BEGIN IMMEDIATE``), writes the new
vector into a fresh slot and fsyncs it, then commits the row that references the slot together
with its CRC and the audit events (an outbox table). A process killed before the commit leaves
only unreferenced bytes in a slot that the next write reuses; killed after it, the record is
complete. Vectors are never overwritten in place: a changed text gets a new slot and the old one
is queued for zeroing in the same transaction (redone on the next open if the process dies).

Record semantics (:class:`memgate.retriever.semantics.RecordSemantics`, shared with
``QdrantStore``; fields in :mod:`memgate.retriever.schema`): ids scoped per namespace (a record's
key is ``(namespace, memory_id)``); revisions and compare-and-set updates; scoped supersession;
``derived_from`` links with transitive review flags when a source is retired, corrected or
superseded; forget requests that erase the detail's text, markers and vector for good (SQLite
``secure_delete``, zeroed vector slot) together with every record derived from it, keep keyed
hashes of the erased content (the suppression list) and store the forget directive as a new,
usable memory. The store records its encoder identity and refuses vectors declared as coming
from any other encoder.

Format ``memgate-store/3`` (scoped ids, a suppression list whose entries record their
normalisation version, key and matching mode). A format-1 store (memgate before scoped ids) or
format-2 store (before normalisation versions: its entries are version 1) is migrated in place,
in one transaction, when opened; a newer format is refused.

The protocol lives in :mod:`memgate.retriever.store_protocol`, the on-disk layout (file names,
schema, migration, ``verify``) in :mod:`memgate.retriever.store_layout`; both are re-exported here.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

import numpy as np

from memgate.retriever.ann import AnnIndex
from memgate.retriever.audit import AuditLog, utc_now
from memgate.retriever.schema import (
    AmbiguousMemoryError,
    StoredMemory,
    StoreFullError,
    UnknownMemoryError,
    is_disk_full,
)
from memgate.retriever.semantics import (
    ENCODER_KEYS,
    IndexEntry,
    RecordSemantics,
    check_namespace_arg,
    index_entry,
    normalize_identity,
)
from memgate.retriever.store_layout import (
    _COLUMNS,
    _MIGRATE_1_TO_2,
    _MIGRATE_2_TO_3,
    _ROW_FIELDS,
    _SCHEMA,
    AUDIT_FILE,
    DB_FILE,
    OLDER_FORMATS,
    STORE_FORMAT,
    VECTOR_FILE,
    StoreIntegrity,
)
from memgate.retriever.store_protocol import MemoryStore
from memgate.retriever.store_protocol import format_error as _format_error
from memgate.retriever.store_suppression import EmbeddedSuppression
from memgate.retriever.support import (
    SupportIndex,
    check_k,
    exact_cosines,
    matvec,
    readable_namespace_list,
    top_by_score,
)
from memgate.retriever.suppression import new_key
from memgate.retriever.vector_file import VectorFile

log = logging.getLogger("memgate")


class _Scan:
    """One query's pass over the whole vector file, computed at most once per search call (a
    filtered search and its unfiltered twin scan the same rows)."""

    def __init__(self, matrix: np.ndarray, q: np.ndarray) -> None:
        self.matrix, self.q, self._cos = matrix, q, None

    def all_rows(self) -> np.ndarray:
        if self._cos is None:
            self._cos = matvec(self.matrix, self.q)
        return self._cos


class EmbeddedStore(EmbeddedSuppression, VectorFile, RecordSemantics, StoreIntegrity):
    """SQLite records + a memory-mapped float32 vector file, in one directory.

    ``EmbeddedStore(path, encoder_identity)`` creates the store (the identity, with ``dim``, is
    then required) or opens it and refuses a different identity. ``audit`` is an
    :class:`AuditLog`, ``True`` for ``<path>/audit.jsonl`` (default) or ``None`` for no log.
    ``ann_threshold`` (needs hnswlib): ``search(exact=False)`` uses an in-memory HNSW graph for
    each namespace with at least that many live records (``GatedRetriever`` asks for it with
    ``RetrieverConfig(exact_search=False)``; ``memgate.Memory`` does by default). A vector
    file shorter than its records need is refused (:class:`DamagedStoreError`) unless
    ``allow_damaged=True`` (for ``verify()``; :mod:`memgate.retriever.vector_file`).
    """

    filters_signatures = True  # search(exclude_signatures=): the retriever's Kleene filter by digest

    def __init__(
        self,
        path: str | os.PathLike,
        encoder_identity: Any = None,
        *,
        audit: AuditLog | bool | None = True,
        clock: Callable[[], str] = utc_now,
        fsync: bool = True,
        ann_threshold: Optional[int] = None,
        allow_damaged: bool = False,
    ):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.clock = clock
        self.fsync = fsync
        self._lock = threading.RLock()
        # Fault injection for crash tests: called with a stage name inside writes.
        self._fault_hook: Optional[Callable[[str], None]] = None
        self._vectors_dirty = False
        self._db = sqlite3.connect(
            str(self.path / DB_FILE), timeout=60.0, isolation_level=None, check_same_thread=False
        )
        self._db.execute("PRAGMA journal_mode=DELETE")
        self._db.execute(f"PRAGMA synchronous={'FULL' if fsync else 'OFF'}")
        self._db.execute("PRAGMA secure_delete=ON")
        with self._txn():
            self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            meta = self._meta()
            if "format" not in meta:
                if encoder_identity is None:
                    raise ValueError(
                        f"{self.path} holds no store yet: pass the encoder identity to create one"
                    )
                identity = normalize_identity(encoder_identity)
                self._run_script(_SCHEMA)
                for key, value in (("format", STORE_FORMAT), ("encoder", json.dumps(identity, sort_keys=True)),
                                   ("seq", "0"), ("next_slot", "0"), ("suppression_key", new_key())):
                    self._db.execute("INSERT INTO meta VALUES (?, ?)", (key, value))
            elif meta["format"] in OLDER_FORMATS:
                if meta["format"] == "memgate-store/1":
                    self._run_script(_MIGRATE_1_TO_2.format(schema=_SCHEMA))  # (format 3's tables)
                else:
                    self._run_script(_MIGRATE_2_TO_3)
                self._db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", [
                    ("format", STORE_FORMAT), ("suppression_key", meta.get("suppression_key") or new_key()),
                    ("migrated_from", meta["format"])])
            elif meta["format"] != STORE_FORMAT:
                raise _format_error(str(self.path), meta["format"], STORE_FORMAT, OLDER_FORMATS)
            meta = self._meta()
        self.encoder_identity: dict = json.loads(meta["encoder"])
        self.dim: int = int(self.encoder_identity["dim"])
        self._key = bytes.fromhex(meta["suppression_key"])
        if encoder_identity is not None:
            self.check_encoder(encoder_identity, "open the store")
        self._open_vectors(self.path / VECTOR_FILE, allow_damaged)  # (refuses a truncated file)
        if audit is True:
            audit = AuditLog(self.path / AUDIT_FILE, fsync=fsync)
        self.audit: Optional[AuditLog] = audit or None
        self._search_index = SupportIndex()  # namespaces, states and slots for search()
        # search(exact=False): HNSW graphs for namespaces with >= ann_threshold live records
        self._ann = None if ann_threshold is None else AnnIndex(self.dim, ann_threshold)
        try:
            self._purge_pending()
            self.flush_outbox()
        except StoreFullError as exc:  # a full disk still opens: reads work, writes say it is full
            log.warning("%s; they are retried by the next write", exc)

    # -- plumbing -----------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._mmap = None
            if self._vfd is not None:
                os.close(self._vfd)
                self._vfd = None
            self._db.close()

    def __enter__(self) -> "EmbeddedStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _hook(self, stage: str) -> None:
        if self._fault_hook is not None:
            self._fault_hook(stage)

    def _run_script(self, script: str) -> None:
        for statement in script.split(";"):  # (executescript would commit our transaction)
            if statement.strip():
                self._db.execute(statement)

    @contextmanager
    def _txn(self):
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
                if self._vectors_dirty and self.fsync:
                    os.fsync(self._vfd)  # every vector is durable before its row commits
                self._vectors_dirty = False
                self._hook("before_commit")
                self._db.execute("COMMIT")
            except BaseException as exc:
                self._vectors_dirty = False
                if self._db.in_transaction:  # (SQLite has rolled back itself after SQLITE_FULL)
                    try:
                        self._db.execute("ROLLBACK")
                    except sqlite3.Error:  # (the error that got us here is the one to raise)
                        pass
                if is_disk_full(exc):
                    raise StoreFullError(
                        f"{self.path}: the disk is full ({exc}); nothing of this write was stored: "
                        "free space and retry (this store stays usable)") from exc
                raise

    @contextmanager
    def _write(self):
        """A write transaction followed by the post-commit work (purges, audit outbox). A full
        disk during the post-commit work does not fail the committed write: the purges and the
        audit events stay queued in the database and are done by the next write or open."""
        with self._txn():
            self._events: list[dict] = []
            yield
            for event in self._events:
                self._db.execute("INSERT INTO outbox (event) VALUES (?)", (json.dumps(event),))
        self._hook("after_commit")
        for step in (self._purge_pending, self._sync_ann, self.flush_outbox):
            try:
                step()
            except StoreFullError as exc:  # (each step on its own: the graphs never wait)
                log.warning("%s; the write itself was committed, this waits in the store", exc)

    def _refresh_search_index(self) -> SupportIndex:
        index = self._search_index
        if self.version() != index.seq:
            version, entries, crcs = self._changes(index.seq)
            index.apply(entries)
            self._note_crcs(crcs)
            index.seq = version
        return index

    def _sync_ann(self) -> None:
        """Bring the graphs already built up to date right after a write, so a forgotten or
        replaced vector leaves them at once (not at the next approximate search)."""
        if self._ann is None or not self._ann.parts:
            return
        with self._lock:
            index = self._refresh_search_index()
            matrix = self.vector_matrix()
            for code in list(self._ann.parts):
                self._ann.partition(code, index, matrix)

    def _meta(self) -> dict:
        return dict(self._db.execute("SELECT key, value FROM meta"))

    def _bump(self, key: str) -> int:
        (value,) = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        value = int(value) + 1
        self._db.execute("UPDATE meta SET value = ? WHERE key = ?", (str(value), key))
        return value

    def flush_outbox(self) -> None:
        """Move committed audit events from the outbox to the JSONL log (idempotent)."""
        if self.audit is None:
            return
        with self._lock:
            if self._db.execute("SELECT 1 FROM outbox LIMIT 1").fetchone() is None:
                return
            with self._txn():
                rows = self._db.execute("SELECT id, event FROM outbox ORDER BY id").fetchall()
                if rows:
                    self.audit.append_many(json.loads(e) for _, e in rows)
                    self._hook("after_audit_append")
                    self._db.execute("DELETE FROM outbox WHERE id <= ?", (rows[-1][0],))

    def _describe(self) -> str:
        return f"the store at {self.path}"

    # -- rows ---------------------------------------------------------------------------------

    def _row_to_memory(self, row) -> StoredMemory:
        memory_id, namespace, text, revision, state, data = row
        raw = json.loads(data)
        raw.update(memory_id=memory_id, namespace=namespace, text=text, revision=revision,
                   lifecycle_state=state)
        return StoredMemory.from_dict(raw)

    def _load(self, memory_id: str, namespace: str) -> StoredMemory:
        row = self._db.execute(
            f"SELECT {_COLUMNS} FROM records WHERE namespace = ? AND memory_id = ?",
            (namespace, memory_id)).fetchone()
        if row is None:
            raise UnknownMemoryError(f"no memory with id {memory_id!r} in namespace {namespace!r}")
        return self._row_to_memory(row)

    def _save(self, memory: StoredMemory, seq: int, slot: Any = ..., crc: Any = ...) -> None:
        data = {k: v for k, v in memory.to_dict().items() if k not in _ROW_FIELDS}
        values = [memory.text, memory.revision, seq, memory.lifecycle_state,
                  json.dumps(data, sort_keys=True)]
        sets = "text = ?, revision = ?, seq = ?, lifecycle_state = ?, data = ?"
        if slot is not ...:
            sets += ", slot = ?, vec_crc = ?"
            values += [slot, crc]
        self._db.execute(f"UPDATE records SET {sets} WHERE namespace = ? AND memory_id = ?",
                         [*values, memory.namespace, memory.memory_id])

    def _insert(self, memory: StoredMemory, seq: int, slot: int, crc: int, parents: Iterable[tuple]) -> None:
        data = {k: v for k, v in memory.to_dict().items() if k not in _ROW_FIELDS}
        self._db.execute(
            "INSERT INTO records (namespace, memory_id, text, slot, vec_crc, revision, seq, "
            "lifecycle_state, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (memory.namespace, memory.memory_id, memory.text, slot, crc, memory.revision, seq,
             memory.lifecycle_state, json.dumps(data, sort_keys=True)),
        )
        self._db.executemany(
            "INSERT OR IGNORE INTO derivations VALUES (?, ?, ?, ?)",
            [(memory.namespace, memory.memory_id, pns, pid) for pns, pid in parents],
        )

    # -- reads --------------------------------------------------------------------------------

    def get_many(self, memory_ids: Iterable[str], *,
                 namespace: Optional[str] = None) -> dict[str, StoredMemory]:
        """Records by id: in ``namespace``, or (without it) ids that name one record each
        (an id in several namespaces raises :class:`AmbiguousMemoryError`)."""
        check_namespace_arg(namespace)
        ids = list(dict.fromkeys(memory_ids))
        out: dict[str, StoredMemory] = {}
        with self._lock:
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                where = f"memory_id IN ({marks})" + ("" if namespace is None else " AND namespace = ?")
                args = chunk + ([] if namespace is None else [namespace])
                for row in self._db.execute(f"SELECT {_COLUMNS} FROM records WHERE {where}", args):
                    if row[0] in out:
                        raise AmbiguousMemoryError(
                            f"memory id {row[0]!r} names records in several namespaces (ids are "
                            "scoped per namespace): pass namespace=")
                    out[row[0]] = self._row_to_memory(row)
        return out

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM records").fetchone()[0]

    def ids(self) -> list[str]:
        """Every record's id, sorted (an id used in several namespaces appears once per record)."""
        with self._lock:
            return [r for (r,) in self._db.execute(
                "SELECT memory_id FROM records ORDER BY memory_id, namespace")]

    def version(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT value FROM meta WHERE key = 'seq'").fetchone()[0])

    def changes_since(self, seq: int) -> tuple[int, list[IndexEntry]]:
        """Index entries of every record written after ``seq``, and the current version."""
        version, entries, _ = self._changes(seq)
        return version, entries

    def _changes(self, seq: int) -> tuple[int, list[IndexEntry], list[tuple[int, int]]]:
        """``changes_since`` and the (slot, CRC) of each live record among the changes."""
        with self._lock:
            self._db.execute("BEGIN")  # one consistent snapshot of version and rows
            try:
                version = self.version()
                rows = self._db.execute(
                    "SELECT memory_id, namespace, slot, lifecycle_state, seq, data, vec_crc FROM records "
                    "WHERE seq > ? ORDER BY seq", (seq,)
                ).fetchall()
            finally:
                self._db.execute("COMMIT")
        entries = [index_entry(json.loads(data), memory_id=memory_id, namespace=namespace, slot=slot,
                               lifecycle_state=state, seq=row_seq)
                   for memory_id, namespace, slot, state, row_seq, data, _ in rows]
        crcs = [(row[2], row[6]) for row in rows if row[2] is not None and row[6] is not None]
        return version, entries, crcs

    def scan_markers(self, namespaces: Iterable[str]) -> list[tuple[str, tuple]]:
        """(memory_id, markers) of live records with markers in ``namespaces``."""
        ns = sorted(set(namespaces))
        if not ns:
            return []
        marks = ",".join("?" * len(ns))
        out = []
        with self._lock:
            for memory_id, data in self._db.execute(
                f"SELECT memory_id, data FROM records WHERE namespace IN ({marks}) "
                "AND text IS NOT NULL ORDER BY memory_id, namespace", ns
            ):
                markers = json.loads(data).get("markers") or ()
                if markers:
                    out.append((memory_id, tuple(markers)))
        return out

    # -- search -------------------------------------------------------------------------------

    def search(self, query: Any, namespaces: Iterable[str], k: int = 10, *,
               exclude_ids: Iterable[Any] = (), exclude_states: Iterable[str] = (),
               exact: bool = True, hnsw_ef: Optional[int] = None,
               with_namespace: bool = False, exclude_signatures: Iterable[str] = ()) -> list[tuple]:
        """Top ``k`` live records by cosine *within* ``namespaces`` (see :class:`MemoryStore`):
        the namespace restriction, ``exclude_ids`` and ``exclude_states`` apply to the candidate
        set before truncation. Exact unless ``exact=False`` on a store opened with
        ``ann_threshold``: then a namespace with at least that many live records is searched in
        its own HNSW graph with the exclusions as the graph search's filter
        (:mod:`memgate.retriever.ann`); the returned cosines are exact either way (``hnsw_ef`` is
        accepted for the protocol); ``exclude_signatures`` (digests of
        :func:`memgate.retriever.semantics.signature_key`) excludes those signatures' records.
        Ties by memory id. Returns ``(memory_id, cosine)`` pairs,
        best first (``(memory_id, cosine, namespace)`` with ``with_namespace``)."""
        ns = readable_namespace_list(namespaces)
        check_k(k)
        q = self._check_vector(query).astype(np.float32)
        with self._lock:
            index = self._refresh_search_index()
            (top, scores), _ = self._searched(q, ns, k, exclude_ids, exclude_states, exclude_signatures,
                                              exact, 0, index)
            if with_namespace:
                return [(index.ids[p], float(c), index.namespaces[p])
                        for p, c in zip(top.tolist(), scores.tolist())]
            return [(index.ids[p], float(c)) for p, c in zip(top.tolist(), scores.tolist())]

    def search_slots(self, query: Any, namespaces: Iterable[str], k: int = 10, *,
                     exclude_ids: Iterable[Any] = (), exclude_states: Iterable[str] = (),
                     exclude_signatures: Iterable[str] = (), exact: bool = True,
                     unfiltered_k: int = 0) -> tuple[tuple, Optional[tuple]]:
        """:meth:`search` with its hits as arrays: ``((slots, cosines), unfiltered)``, best
        first, each hit named by its vector slot (never reused) instead of an id (the
        retriever maps slots to its own index in one gather, :class:`GatedRetriever`). With
        ``unfiltered_k``, ``unfiltered`` is the same search's top ``unfiltered_k`` with the
        namespace filter only (what :meth:`search` without exclusions returns), from the same
        pass: an exactly scanned namespace is scored once for both; else None."""
        ns = readable_namespace_list(namespaces)
        check_k(k)
        if unfiltered_k:
            check_k(unfiltered_k)
        q = self._check_vector(query).astype(np.float32)
        with self._lock:
            index = self._refresh_search_index()
            hits, plain = self._searched(q, ns, k, exclude_ids, exclude_states, exclude_signatures,
                                         exact, unfiltered_k, index)
            as_slots = (lambda found: (index.slot[found[0]], found[1]))
            return as_slots(hits), (as_slots(plain) if plain is not None else None)

    def _searched(self, q: np.ndarray, ns: list[str], k: int, exclude_ids: Iterable[Any],
                  exclude_states: Iterable[str], exclude_signatures: Iterable[str], exact: bool,
                  unfiltered_k: int, index: SupportIndex) -> tuple[tuple, Optional[tuple]]:
        """The filtered top ``k`` (index positions, exact cosines) and, with ``unfiltered_k``,
        the namespace-only top ``unfiltered_k``; every returned row checked against its CRC."""
        matrix = self.vector_matrix()
        scan = _Scan(matrix, q)
        plain = None
        try:
            sig_mask = index.signature_mask(exclude_signatures) if exclude_signatures else None
            if not exact and self._ann is not None:
                found = self._ann_search(q, ns, {"forgotten", *exclude_states}, exclude_ids, k,
                                         index, matrix, sig_mask, scan)
                if unfiltered_k:
                    plain = self._ann_search(q, ns, {"forgotten"}, (), unfiltered_k, index, matrix, None, scan)
            else:
                support = index.support(ns, {"forgotten", *exclude_states}, exclude_ids)
                if sig_mask is not None:
                    support = support[~sig_mask[index.sig[support]]]
                found = self._exact_search(q, support, k, index, matrix, scan)
                if unfiltered_k:
                    plain = self._exact_search(q, index.support(ns, {"forgotten"}), unfiltered_k, index,
                                               matrix, scan)
        except IndexError:  # a slot beyond the file: it was cut short while open
            raise self._damaged(self._vector_file_problem() or "a record's slot lies beyond the "
                                "vector file") from None
        returned = found[0] if plain is None else np.union1d(found[0], plain[0])  # (mostly the same rows)
        readable_codes = np.asarray([index.ns_code[n] for n in ns if n in index.ns_code], dtype=np.int32)
        if not np.isin(index.ns[returned], readable_codes).all():  # defence in depth
            raise AssertionError(f"search returned a record outside {ns}")
        self._check_returned(returned, index, matrix)  # (a damaged row is refused, not returned)
        return found, plain

    def _exact_search(self, q: np.ndarray, support: np.ndarray, k: int, index: SupportIndex,
                      matrix: np.ndarray, scan: Optional["_Scan"] = None) -> tuple[np.ndarray, np.ndarray]:
        """The exact top ``k`` of ``support``: index positions and cosines."""
        slots = index.slot[support]
        if len(support) > 0.25 * matrix.shape[0]:
            # one pass over the file beats a gather (and serves every search of this call)
            cos = (scan or _Scan(matrix, q)).all_rows()[slots]
        else:
            cos = matvec(matrix[slots], q)
        return top_by_score(index.keys, support, cos.astype(np.float64), k,
                            lambda pos: exact_cosines(matrix, index.slot[pos], q))

    def _ann_search(self, q: np.ndarray, ns: list[str], exclude_states: set, exclude_ids: Iterable[Any],
                    k: int, index: SupportIndex, matrix: np.ndarray,
                    sig_mask: Optional[np.ndarray], scan: Optional["_Scan"] = None) -> tuple[np.ndarray, np.ndarray]:
        """search(exact=False): per namespace, the graph's filtered top k or every allowed record
        (:meth:`memgate.retriever.ann.AnnIndex.search`); the exactly searched records ranked in
        one float32 pass (rechecked row by row near the k-th), then exact cosines and the one
        ranking rule over the union."""
        states = [index.state_code[s] for s in sorted(exclude_states) if s in index.state_code]
        named = index.positions_of(exclude_ids)
        codes = [index.ns_code[name] for name in ns if name in index.ns_code]
        graphs, pools = self._ann.search(q, codes, k, index, matrix, states, named, sig_mask)
        if pools:
            pool = np.concatenate(pools)
            if len(pool) > k:
                pool, _ = self._exact_search(q, pool, k, index, matrix, scan)
            graphs.append(pool)
        pos = np.unique(np.concatenate(graphs)) if graphs else np.zeros(0, dtype=np.int64)
        # defence in depth: the graph's filter, checked again on the candidates only
        ok = index.alive[pos] & np.isin(index.ns[pos], np.asarray(codes, dtype=np.int32))
        if states:
            ok &= ~np.isin(index.state[pos], np.asarray(states, dtype=np.int32))
        if sig_mask is not None:
            ok &= ~sig_mask[index.sig[pos]]
        if named:
            ok &= ~np.isin(pos, np.asarray(named, dtype=np.int64))
        pos = pos[ok]
        return top_by_score(index.keys, pos, exact_cosines(matrix, index.slot[pos], q), k)

    # -- write primitives (the semantics are memgate.retriever.semantics.RecordSemantics) -----

    def _exists(self, memory_id: str, namespace: str) -> bool:
        return self._db.execute("SELECT 1 FROM records WHERE namespace = ? AND memory_id = ?",
                                (namespace, memory_id)).fetchone() is not None

    def _namespaces_of(self, memory_id: str) -> list[str]:
        return [n for (n,) in self._db.execute(
            "SELECT namespace FROM records WHERE memory_id = ? ORDER BY namespace", (memory_id,))]

    def _children(self, namespace: str, parent: str) -> list[tuple]:
        return [tuple(r) for r in self._db.execute(
            "SELECT child_ns, child FROM derivations WHERE parent_ns = ? AND parent = ? "
            "ORDER BY child, child_ns", (namespace, parent))]

    def _slot_of(self, memory: StoredMemory) -> Optional[int]:
        (slot,) = self._db.execute("SELECT slot FROM records WHERE namespace = ? AND memory_id = ?",
                                   (memory.namespace, memory.memory_id)).fetchone()
        return slot

    def _put_new(self, memory: StoredMemory, seq: int, v: np.ndarray, parents: Iterable[tuple] = ()) -> int:
        slot, crc = self._new_slot(v)
        self._insert(memory, seq, slot, crc, parents)
        return slot

    def _put(self, memory: StoredMemory, seq: int) -> None:
        self._save(memory, seq)

    def _put_new_vector(self, memory: StoredMemory, seq: int, v: np.ndarray) -> int:
        old_slot = self._slot_of(memory)
        slot, crc = self._new_slot(v)
        self._save(memory, seq, slot, crc)
        if old_slot is not None:
            self._db.execute("INSERT OR IGNORE INTO purge VALUES (?)", (old_slot,))
        return slot

    def _put_tombstone(self, tomb: StoredMemory, seq: int) -> None:
        old_slot = self._slot_of(tomb)
        self._save(tomb, seq, None, None)
        self._db.execute("DELETE FROM derivations WHERE child_ns = ? AND child = ?",
                         (tomb.namespace, tomb.memory_id))
        if old_slot is not None:
            self._db.execute("INSERT OR IGNORE INTO purge VALUES (?)", (old_slot,))

    def _put_restored_tombstone(self, tomb: StoredMemory, seq: int) -> None:
        self._insert(tomb, seq, None, None, ())


__all__ = [
    "AUDIT_FILE",
    "DB_FILE",
    "ENCODER_KEYS",
    "OLDER_FORMATS",
    "STORE_FORMAT",
    "VECTOR_FILE",
    "EmbeddedStore",
    "IndexEntry",
    "MemoryStore",
    "normalize_identity",
]
