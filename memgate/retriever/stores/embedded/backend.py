"""``EmbeddedBackend``: the embedded store's primitives (:mod:`memgate.retriever.records.primitives`)
over SQLite (rollback journal, ``synchronous=FULL``, ``secure_delete=ON``) and a float32 vector
file read through a memory map (row = slot, :mod:`memgate.retriever.stores.embedded.vector_file`).

Transactional writes. A write takes SQLite's write lock (``BEGIN IMMEDIATE``), writes the new
vector into a fresh slot and fsyncs it, then commits the row that references the slot together
with its CRC and the audit events (an outbox table). A process killed before the commit leaves
only unreferenced bytes in a slot that the next write reuses; killed after it, the record is
complete. Vectors are never overwritten in place: a changed text gets a new slot and the old one
is queued for zeroing in the same transaction (redone on the next open if the process dies).

Format ``memgate-store/3`` (:mod:`memgate.retriever.stores.embedded.layout`). A format-1 or
format-2 store is migrated in place, in one transaction, when opened; a newer format is refused.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

import numpy as np

import memgate.retriever.stores.embedded.layout as layout
from memgate.retriever.audit.log import AuditLog
from memgate.retriever.errors import (
    AmbiguousMemoryError,
    DamagedStoreError,
    StoreFullError,
    UnknownMemoryError,
    is_disk_full,
)
from memgate.retriever.records.identity import check_encoder, normalize_identity
from memgate.retriever.records.index import IndexEntry, SupportIndex, index_entry
from memgate.retriever.records.links import check_namespace_arg, resolve_namespace
from memgate.retriever.records.memory import StoredMemory
from memgate.retriever.records.primitives import Event, Key
from memgate.retriever.records.suppression import Suppressed, new_key
from memgate.retriever.stores.base import format_error
from memgate.retriever.stores.embedded.ann import AnnIndex
from memgate.retriever.stores.embedded.file_checks import (
    check_pair_before_open,
    check_vectors_present,
    damaged_database,
    unreadable,
)
from memgate.retriever.stores.embedded.vector_file import VectorFile

log = logging.getLogger("memgate")

_SUPPRESSED_COLUMNS = "namespace, digest, n, kind, memory_id, version, key_id, whole"


class EmbeddedBackend:
    """SQLite records (``db``) + a memory-mapped float32 vector file (``vectors``), in one
    directory; with ``ann_threshold``, HNSW graphs (``ann``) over the namespaces that large,
    kept in step with the search index (``search_index``) after each write."""

    def __init__(self, path: Path, encoder_identity: Any, *, audit: AuditLog | bool | None,
                 clock: Callable[[], str], fsync: bool, ann_threshold: Optional[int],
                 allow_damaged: bool) -> None:
        self.path = path
        self.path.mkdir(parents=True, exist_ok=True)
        self.clock = clock
        self.fsync = fsync
        self.lock = threading.RLock()
        # Fault injection for crash tests: called with a stage name inside writes.
        self.fault_hook: Optional[Callable[[str], None]] = None
        self._vector_file: Optional[VectorFile] = None
        check_pair_before_open(self.path)
        self.db = sqlite3.connect(
            str(self.path / layout.DB_FILE), timeout=60.0, isolation_level=None, check_same_thread=False
        )
        try:
            self._open_database(encoder_identity)
        except sqlite3.DatabaseError as exc:
            self.db.close()
            if unreadable(exc):
                raise damaged_database(self.path, exc) from None
            raise
        except BaseException:
            self.db.close()
            raise
        meta = self.meta()
        self.encoder_identity: dict[str, Any] = json.loads(meta["encoder"])
        self.dim: int = int(self.encoder_identity["dim"])
        self._key = bytes.fromhex(meta["suppression_key"])
        if encoder_identity is not None:
            check_encoder(encoder_identity, self.encoder_identity, self.describe(), "open the store")
        if not allow_damaged:
            try:
                check_vectors_present(self.path, int(meta.get("next_slot", "0")))
            except DamagedStoreError:
                self.db.close()
                raise
        self._vector_file = VectorFile(self.path / layout.VECTOR_FILE, self.dim, self.path, self.lock)
        if not allow_damaged:  # (a truncated file is refused before anything reads or writes it)
            problem = self.vector_file_problem()
            if problem:
                self.close()
                raise self.vectors.damaged(problem)
        if audit is True:
            audit = AuditLog(self.path / layout.AUDIT_FILE, fsync=fsync)
        self.audit: Optional[AuditLog] = audit or None
        self.search_index = SupportIndex()  # namespaces, states and slots for the search
        # search(exact=False): HNSW graphs for namespaces with >= ann_threshold live records
        self.ann = None if ann_threshold is None else AnnIndex(self.dim, ann_threshold)
        try:
            self.purge_pending()
            self.flush_outbox()
        except StoreFullError as exc:  # a full disk still opens: reads work, writes say it is full
            log.warning("%s; they are retried by the next write", exc)

    def _open_database(self, encoder_identity: Any) -> None:
        """Set the connection up and create or migrate the tables (inside one transaction)."""
        self.db.execute("PRAGMA journal_mode=DELETE")
        self.db.execute(f"PRAGMA synchronous={'FULL' if self.fsync else 'OFF'}")
        self.db.execute("PRAGMA secure_delete=ON")
        with self._txn():
            self.db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            meta = self.meta()
            if "format" not in meta:
                if encoder_identity is None:
                    raise ValueError(
                        f"{self.path} holds no store yet: pass the encoder identity to create one"
                    )
                identity = normalize_identity(encoder_identity)
                self._run_script(layout._TABLES)
                for key, value in (("format", layout.STORE_FORMAT),
                                   ("encoder", json.dumps(identity, sort_keys=True)),
                                   ("seq", "0"), ("next_slot", "0"), ("suppression_key", new_key())):
                    self.db.execute("INSERT INTO meta VALUES (?, ?)", (key, value))
            elif meta["format"] in layout.OLDER_FORMATS:
                if meta["format"] == "memgate-store/1":
                    self._run_script(layout._MIGRATE_1_TO_2.format(tables=layout._TABLES))  # (format 3's)
                else:
                    self._run_script(layout._MIGRATE_2_TO_3)
                self.db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", [
                    ("format", layout.STORE_FORMAT),
                    ("suppression_key", meta.get("suppression_key") or new_key()),
                    ("migrated_from", meta["format"])])
            elif meta["format"] != layout.STORE_FORMAT:
                raise format_error(str(self.path), meta["format"], layout.STORE_FORMAT, layout.OLDER_FORMATS)

    @property
    def vectors(self) -> VectorFile:
        assert self._vector_file is not None, "the vector file is opened with the store"
        return self._vector_file

    # -- plumbing -----------------------------------------------------------------------------

    def close(self) -> None:
        with self.lock:
            if self._vector_file is not None:
                self._vector_file.close()
            self.db.close()

    def describe(self) -> str:
        return f"the store at {self.path}"

    def hook(self, stage: str) -> None:
        if self.fault_hook is not None:
            self.fault_hook(stage)

    def _run_script(self, script: str) -> None:
        for statement in script.split(";"):  # (executescript would commit our transaction)
            if statement.strip():
                self.db.execute(statement)

    @contextmanager
    def _txn(self) -> Iterator[None]:
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield
                vectors = self._vector_file
                if vectors is not None and vectors.dirty and self.fsync:
                    vectors.sync()  # every vector is durable before its row commits
                if vectors is not None:
                    vectors.dirty = False
                self.hook("before_commit")
                self.db.execute("COMMIT")
            except BaseException as exc:
                if self._vector_file is not None:
                    self._vector_file.dirty = False
                if self.db.in_transaction:  # (SQLite has rolled back itself after SQLITE_FULL)
                    try:
                        self.db.execute("ROLLBACK")
                    except sqlite3.Error:  # (the error that got us here is the one to raise)
                        pass
                if is_disk_full(exc):
                    raise StoreFullError(
                        f"{self.path}: the disk is full ({exc}); nothing of this write was stored: "
                        "free space and retry (this store stays usable)") from exc
                raise

    @contextmanager
    def write(self) -> Iterator[list[Event]]:
        """A write transaction followed by the post-commit work (purges, audit outbox). A full
        disk during the post-commit work does not fail the committed write: the purges and the
        audit events stay queued in the database and are done by the next write or open."""
        with self._txn():
            events: list[Event] = []
            yield events
            for event in events:
                self.db.execute("INSERT INTO outbox (event) VALUES (?)", (json.dumps(event),))
        self.hook("after_commit")
        for step in (self.purge_pending, self.sync_ann, self.flush_outbox):
            try:
                step()
            except StoreFullError as exc:  # (each step on its own: the graphs never wait)
                log.warning("%s; the write itself was committed, this waits in the store", exc)

    def refresh_search_index(self) -> SupportIndex:
        index = self.search_index
        if self.version() != index.seq:
            version, entries, crcs = self._changes(index.seq)
            index.apply(entries)
            self.vectors.note_crcs(crcs)
            index.seq = version
        return index

    def sync_ann(self) -> None:
        """Bring the graphs already built up to date right after a write, so a forgotten or
        replaced vector leaves them at once (not at the next approximate search)."""
        if self.ann is None or not self.ann.parts:
            return
        with self.lock:
            index = self.refresh_search_index()
            matrix = self.vector_matrix()
            for code in list(self.ann.parts):
                self.ann.partition(code, index, matrix)

    def meta(self) -> dict[str, str]:
        return dict(self.db.execute("SELECT key, value FROM meta"))

    def bump(self, key: str) -> int:
        (value,) = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        value = int(value) + 1
        self.db.execute("UPDATE meta SET value = ? WHERE key = ?", (str(value), key))
        return value

    def flush_outbox(self) -> None:
        """Move committed audit events from the outbox to the JSONL log (idempotent)."""
        if self.audit is None:
            return
        with self.lock:
            if self.db.execute("SELECT 1 FROM outbox LIMIT 1").fetchone() is None:
                return
            with self._txn():
                rows = self.db.execute("SELECT id, event FROM outbox ORDER BY id").fetchall()
                if rows:
                    self.audit.append_many(json.loads(e) for _, e in rows)
                    self.hook("after_audit_append")
                    self.db.execute("DELETE FROM outbox WHERE id <= ?", (rows[-1][0],))

    def verify(self) -> list[str]:
        """Integrity problems (empty when sound): vectors that do not match
        their CRC, records without text or vector that are not forgotten, forgotten records that kept
        either, slots beyond the vector file or the slot counter, purges still pending."""
        problems = []
        truncated = self.vector_file_problem()
        if truncated:
            problems.append(f"{self.vectors.path}: {truncated}")
        matrix = self.vector_matrix()
        with self.lock:
            rows = self.db.execute(
                "SELECT namespace, memory_id, text, slot, vec_crc, lifecycle_state FROM records").fetchall()
            pending = self.db.execute("SELECT COUNT(*) FROM purge").fetchone()[0]
            next_slot = int(self.meta()["next_slot"])
        for namespace, memory_id, text, slot, crc, state in rows:
            name = f"{namespace}/{memory_id}"
            if state == "forgotten":
                if text is not None or slot is not None:
                    problems.append(f"{name}: forgotten but kept its text or vector")
                continue
            if text is None or slot is None or crc is None:
                problems.append(f"{name}: half record (text={text is not None}, slot={slot})")
                continue
            if slot >= matrix.shape[0] or slot >= next_slot:
                problems.append(f"{name}: slot {slot} beyond the vector file or the slot counter")
                continue
            if zlib.crc32(np.asarray(matrix[slot], dtype="<f4").tobytes()) != crc:
                problems.append(f"{name}: vector does not match its checksum")
        if pending:
            problems.append(f"{pending} vector purge(s) pending")
        return problems

    # -- vectors ------------------------------------------------------------------------------

    def vector_file_problem(self) -> Optional[str]:
        """Why the vector file cannot hold the records' vectors (shorter than the slots they
        reference), or None."""
        with self.lock:
            (top,) = self.db.execute("SELECT MAX(slot) FROM records").fetchone()
            return self.vectors.problem(top)

    def _new_slot(self, v: np.ndarray) -> tuple[int, int]:
        slot = self.bump("next_slot") - 1
        crc = self.vectors.write(slot, v)
        self.hook("after_vector")
        return slot, crc

    def purge_pending(self) -> None:
        """Zero every vector slot queued for purging (forgotten or replaced vectors)."""
        with self.lock:
            slots = [s for (s,) in self.db.execute("SELECT slot FROM purge")]
            if not slots:
                return
            self.vectors.zero(slots)  # (a full disk: the slots stay queued)
            with self._txn():
                self.db.executemany("DELETE FROM purge WHERE slot = ?", [(s,) for s in slots])

    def vector_matrix(self) -> np.ndarray:
        """All slots as a read-only (n_slots, dim) float32 memory map (remapped when it grows)."""
        return self.vectors.matrix()

    def vectors_for(self, memory_ids: Iterable[str], *,
                    namespace: Optional[str] = None) -> dict[str, np.ndarray]:
        """Copies of the stored vectors of live records (forgotten ones have none), each checked
        against its record's CRC (:class:`DamagedStoreError` if it does not match)."""
        out = {}
        matrix = self.vector_matrix()
        with self.lock:
            for memory_id in memory_ids:
                try:
                    ns = resolve_namespace(self, memory_id, namespace)
                except UnknownMemoryError:
                    continue
                row = self.db.execute(
                    "SELECT slot, vec_crc FROM records WHERE namespace = ? AND memory_id = ? "
                    "AND slot IS NOT NULL", (ns, memory_id)).fetchone()
                if row is not None:
                    out[memory_id] = np.array(self.vectors.checked_row(matrix, row[0], row[1],
                                                                       f"{ns}/{memory_id}"))
        return out

    # -- rows ---------------------------------------------------------------------------------

    def _row_to_memory(self, row: tuple[Any, ...]) -> StoredMemory:
        memory_id, namespace, text, revision, state, data = row
        raw = json.loads(data)
        raw.update(memory_id=memory_id, namespace=namespace, text=text, revision=revision,
                   lifecycle_state=state)
        return StoredMemory.from_dict(raw)

    def _save(self, memory: StoredMemory, seq: int, slot: Any = ..., crc: Any = ...) -> None:
        data = {k: v for k, v in memory.to_dict().items() if k not in layout._ROW_FIELDS}
        values = [memory.text, memory.revision, seq, memory.lifecycle_state,
                  json.dumps(data, sort_keys=True)]
        sets = "text = ?, revision = ?, seq = ?, lifecycle_state = ?, data = ?"
        if slot is not ...:
            sets += ", slot = ?, vec_crc = ?"
            values += [slot, crc]
        self.db.execute(f"UPDATE records SET {sets} WHERE namespace = ? AND memory_id = ?",
                        [*values, memory.namespace, memory.memory_id])

    def _insert(self, memory: StoredMemory, seq: int, slot: Optional[int], crc: Optional[int],
                parents: Iterable[Key]) -> None:
        data = {k: v for k, v in memory.to_dict().items() if k not in layout._ROW_FIELDS}
        self.db.execute(
            "INSERT INTO records (namespace, memory_id, text, slot, vec_crc, revision, seq, "
            "lifecycle_state, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (memory.namespace, memory.memory_id, memory.text, slot, crc, memory.revision, seq,
             memory.lifecycle_state, json.dumps(data, sort_keys=True)),
        )
        self.db.executemany(
            "INSERT OR IGNORE INTO derivations VALUES (?, ?, ?, ?)",
            [(memory.namespace, memory.memory_id, pns, pid) for pns, pid in parents],
        )

    # -- reads --------------------------------------------------------------------------------

    def get_many(self, memory_ids: Iterable[str], *,
                 namespace: Optional[str] = None) -> dict[str, StoredMemory]:
        check_namespace_arg(namespace)
        ids = list(dict.fromkeys(memory_ids))
        out: dict[str, StoredMemory] = {}
        with self.lock:
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                where = f"memory_id IN ({marks})" + ("" if namespace is None else " AND namespace = ?")
                args = chunk + ([] if namespace is None else [namespace])
                for row in self.db.execute(f"SELECT {layout._COLUMNS} FROM records WHERE {where}", args):
                    if row[0] in out:
                        raise AmbiguousMemoryError(
                            f"memory id {row[0]!r} names records in several namespaces (ids are "
                            "scoped per namespace): pass namespace=")
                    out[row[0]] = self._row_to_memory(row)
        return out

    def count(self) -> int:
        with self.lock:
            return int(self.db.execute("SELECT COUNT(*) FROM records").fetchone()[0])

    def ids(self) -> list[str]:
        with self.lock:
            return [r for (r,) in self.db.execute(
                "SELECT memory_id FROM records ORDER BY memory_id, namespace")]

    def version(self) -> int:
        with self.lock:
            return int(self.db.execute("SELECT value FROM meta WHERE key = 'seq'").fetchone()[0])

    def changes_since(self, seq: int) -> tuple[int, list[IndexEntry]]:
        version, entries, _ = self._changes(seq)
        return version, entries

    def _changes(self, seq: int) -> tuple[int, list[IndexEntry], list[tuple[int, int]]]:
        """``changes_since`` and the (slot, CRC) of each live record among the changes."""
        with self.lock:
            self.db.execute("BEGIN")  # one consistent snapshot of version and rows
            try:
                version = self.version()
                rows = self.db.execute(
                    "SELECT memory_id, namespace, slot, lifecycle_state, seq, data, vec_crc FROM records "
                    "WHERE seq > ? ORDER BY seq", (seq,)
                ).fetchall()
            finally:
                self.db.execute("COMMIT")
        entries = [index_entry(json.loads(data), memory_id=memory_id, namespace=namespace, slot=slot,
                               lifecycle_state=state, seq=row_seq)
                   for memory_id, namespace, slot, state, row_seq, data, _ in rows]
        crcs = [(row[2], row[6]) for row in rows if row[2] is not None and row[6] is not None]
        return version, entries, crcs

    def scan_markers(self, namespaces: Iterable[str]) -> list[tuple[str, tuple[str, ...]]]:
        ns = sorted(set(namespaces))
        if not ns:
            return []
        marks = ",".join("?" * len(ns))
        out = []
        with self.lock:
            for memory_id, data in self.db.execute(
                f"SELECT memory_id, data FROM records WHERE namespace IN ({marks}) "
                "AND text IS NOT NULL ORDER BY memory_id, namespace", ns
            ):
                markers = json.loads(data).get("markers") or ()
                if markers:
                    out.append((memory_id, tuple(markers)))
        return out

    # -- write primitives (the rules are memgate.retriever.records.rules.Records) -------------

    def load(self, memory_id: str, namespace: str) -> StoredMemory:
        row = self.db.execute(
            f"SELECT {layout._COLUMNS} FROM records WHERE namespace = ? AND memory_id = ?",
            (namespace, memory_id)).fetchone()
        if row is None:
            raise UnknownMemoryError(f"no memory with id {memory_id!r} in namespace {namespace!r}")
        return self._row_to_memory(row)

    def exists(self, memory_id: str, namespace: str) -> bool:
        return self.db.execute("SELECT 1 FROM records WHERE namespace = ? AND memory_id = ?",
                               (namespace, memory_id)).fetchone() is not None

    def namespaces_of(self, memory_id: str) -> list[str]:
        return [n for (n,) in self.db.execute(
            "SELECT namespace FROM records WHERE memory_id = ? ORDER BY namespace", (memory_id,))]

    def children(self, namespace: str, parent: str) -> list[Key]:
        return [(child_ns, child) for child_ns, child in self.db.execute(
            "SELECT child_ns, child FROM derivations WHERE parent_ns = ? AND parent = ? "
            "ORDER BY child, child_ns", (namespace, parent))]

    def _slot_of(self, memory: StoredMemory) -> Optional[int]:
        (slot,) = self.db.execute("SELECT slot FROM records WHERE namespace = ? AND memory_id = ?",
                                  (memory.namespace, memory.memory_id)).fetchone()
        return None if slot is None else int(slot)

    def put_new(self, memory: StoredMemory, seq: int, v: np.ndarray, parents: Iterable[Key] = ()) -> int:
        slot, crc = self._new_slot(v)
        self._insert(memory, seq, slot, crc, parents)
        return slot

    def put(self, memory: StoredMemory, seq: int) -> None:
        self._save(memory, seq)

    def put_new_vector(self, memory: StoredMemory, seq: int, v: np.ndarray) -> int:
        old_slot = self._slot_of(memory)
        slot, crc = self._new_slot(v)
        self._save(memory, seq, slot, crc)
        if old_slot is not None:
            self.db.execute("INSERT OR IGNORE INTO purge VALUES (?)", (old_slot,))
        return slot

    def put_tombstone(self, tomb: StoredMemory, seq: int) -> None:
        old_slot = self._slot_of(tomb)
        self._save(tomb, seq, None, None)
        self.db.execute("DELETE FROM derivations WHERE child_ns = ? AND child = ?",
                        (tomb.namespace, tomb.memory_id))
        if old_slot is not None:
            self.db.execute("INSERT OR IGNORE INTO purge VALUES (?)", (old_slot,))

    def put_restored_tombstone(self, tomb: StoredMemory, seq: int) -> None:
        self._insert(tomb, seq, None, None, ())

    # -- the suppression list: tables ``suppressed`` and ``suppression_keys`` ----------------
    # (the store's own key is the ``suppression_key`` row of ``meta``)

    def suppression_key(self) -> bytes:
        return self._key

    def foreign_keys(self) -> dict[str, bytes]:
        return {k: bytes.fromhex(v) for k, v in self.db.execute("SELECT key_id, key FROM suppression_keys")}

    def put_foreign_keys(self, keys: Mapping[str, bytes]) -> None:
        self.db.executemany("INSERT OR IGNORE INTO suppression_keys VALUES (?, ?)",
                            [(k, v.hex()) for k, v in keys.items()])

    def suppressed(self, namespaces: Optional[Iterable[str]]) -> list[Suppressed]:
        if namespaces is None:
            rows = self.db.execute(f"SELECT {_SUPPRESSED_COLUMNS} FROM suppressed")
        else:
            ns = sorted(set(namespaces))
            marks = ",".join("?" * len(ns))
            rows = self.db.execute(f"SELECT {_SUPPRESSED_COLUMNS} FROM suppressed WHERE namespace IN ({marks})", ns)
        return [Suppressed(a, b, c, d, e, f, g, bool(h)) for a, b, c, d, e, f, g, h in rows]

    def put_suppressed(self, entries: Iterable[Suppressed]) -> None:
        self.db.executemany("INSERT OR IGNORE INTO suppressed VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            [(e.namespace, e.digest, e.n, e.kind, e.memory_id, e.version, e.key_id,
                              int(e.whole)) for e in entries])

    def lift_suppressed(self, entries: Iterable[Suppressed]) -> None:
        self.db.executemany(
            "DELETE FROM suppressed WHERE namespace = ? AND digest = ? AND memory_id = ?",
            [(e.namespace, e.digest, e.memory_id) for e in entries])


__all__ = ["EmbeddedBackend"]
