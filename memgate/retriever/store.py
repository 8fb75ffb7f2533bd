"""The memory store: a ``MemoryStore`` protocol and its embedded default, ``EmbeddedStore``.

``EmbeddedStore`` keeps records in SQLite (rollback journal, ``synchronous=FULL``,
``secure_delete=ON``) and vectors in a float32 file read through a memory map (row = slot).

Transactional writes. A write takes SQLite's write lock (``BEGIN IMMEDIATE``), writes the new
vector into a fresh slot and fsyncs it, then commits the row that references the slot together
with its CRC and the audit events (an outbox table). A process killed before the commit leaves
only unreferenced bytes in a slot that the next write reuses; killed after it, the record is
complete. Vectors are never overwritten in place: a changed text gets a new slot and the old one
is queued for zeroing in the same transaction (redone on the next open if the process dies).

Record semantics (see :mod:`memgate.retriever.schema`): revisions and compare-and-set updates;
scoped supersession; ``derived_from`` links with transitive review flags when a source is
retired, corrected, superseded or forgotten; forget requests that erase the detail's text,
markers and vector for good (SQLite ``secure_delete``, zeroed vector slot) and store the forget
directive as a new, usable memory. The store records its encoder identity and refuses vectors
declared as coming from any other encoder.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import zlib
from collections.abc import Callable, Iterable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Protocol, runtime_checkable

import numpy as np

from memgate.admissibility import SupersessionScope
from memgate.retriever.audit import AuditLog, make_event, utc_now
from memgate.retriever.schema import (
    CONTENT_FIELDS,
    FORGET_DIRECTIVE_KIND,
    UPDATABLE_FIELDS,
    Applicability,
    EncoderMismatchError,
    ForgottenMemoryError,
    Memory,
    StaleRevisionError,
    SupersededIn,
    UnknownMemoryError,
    scope_to_dict,
)

STORE_FORMAT = "memgate-store/1"
ENCODER_KEYS = ("id", "revision", "normalize", "dim")
DB_FILE = "store.sqlite"
VECTOR_FILE = "vectors.f32"
AUDIT_FILE = "audit.jsonl"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    memory_id TEXT PRIMARY KEY,
    namespace TEXT NOT NULL,
    text TEXT,
    slot INTEGER UNIQUE,
    vec_crc INTEGER,
    revision INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    lifecycle_state TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS records_seq ON records (seq);
CREATE TABLE IF NOT EXISTS derivations (
    child TEXT NOT NULL, parent TEXT NOT NULL, PRIMARY KEY (child, parent)
);
CREATE INDEX IF NOT EXISTS derivations_parent ON derivations (parent);
CREATE TABLE IF NOT EXISTS purge (slot INTEGER PRIMARY KEY);
CREATE TABLE IF NOT EXISTS outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, event TEXT NOT NULL);
"""

# Columns of ``records`` that are not kept inside the ``data`` JSON.
_ROW_FIELDS = ("memory_id", "namespace", "text", "revision", "lifecycle_state")


def normalize_identity(identity: Any) -> dict:
    """An encoder identity as ``{id, revision, normalize, dim}``; anything else is an error."""
    if hasattr(identity, "identity") and not isinstance(identity, Mapping):
        identity = identity.identity  # an Encoder
    if not isinstance(identity, Mapping):
        raise TypeError(
            f"an encoder identity must be a mapping with keys {ENCODER_KEYS} or an Encoder, "
            f"got {type(identity).__name__}"
        )
    missing = [k for k in ENCODER_KEYS if identity.get(k) is None]
    if missing:
        raise ValueError(f"encoder identity is missing {missing}: {dict(identity)!r}")
    return {k: identity[k] for k in ENCODER_KEYS}


@dataclass(frozen=True)
class IndexEntry:
    """What a query-time index needs about one record (metadata only, never text)."""

    memory_id: str
    namespace: str
    slot: Optional[int]
    alive: bool  # False once forgotten (no text, no vector)
    lifecycle_state: str
    superseded_in: tuple
    applicability: Applicability
    policy_tags: Optional[tuple]
    seq: int


@runtime_checkable
class MemoryStore(Protocol):
    """What :class:`memgate.retriever.GatedRetriever` needs from a store.

    Vectors are unit-normalised float32 rows addressed by ``IndexEntry.slot``; every write that
    carries a vector declares the identity of the encoder that produced it.
    """

    encoder_identity: dict
    dim: int
    audit: Optional[AuditLog]

    def add(self, memory: Memory, vector: Any, *, encoder: Any) -> Memory: ...

    def add_many(self, memories: Iterable[Memory], vectors: Any, *, encoder: Any) -> list[Memory]: ...

    def get(self, memory_id: str) -> Optional[Memory]: ...

    def get_many(self, memory_ids: Iterable[str]) -> dict[str, Memory]: ...

    def update(self, memory_id: str, expected_revision: int, *, vector: Any = None,
               encoder: Any = None, **changes: Any) -> Memory: ...

    def retire(self, memory_id: str, expected_revision: int) -> tuple[Memory, list[str]]: ...

    def correct(self, memory_id: str, expected_revision: int, text: str, vector: Any, *,
                encoder: Any, **changes: Any) -> tuple[Memory, list[str]]: ...

    def mark_reviewed(self, memory_id: str, expected_revision: int) -> Memory: ...

    def forget(self, memory_id: str, directive: Memory, directive_vector: Any, *, encoder: Any,
               expected_revision: Optional[int] = None) -> Memory: ...

    def version(self) -> int: ...

    def changes_since(self, seq: int) -> tuple[int, list[IndexEntry]]: ...

    def vector_matrix(self) -> np.ndarray: ...

    def check_encoder(self, identity: Any, action: str = "use") -> None: ...

    def flush_outbox(self) -> None: ...


class EmbeddedStore:
    """SQLite records + a memory-mapped float32 vector file, in one directory.

    ``EmbeddedStore(path, encoder_identity)`` creates the store (the identity, with ``dim``, is
    then required) or opens it and refuses a different identity. ``audit`` is an
    :class:`AuditLog`, ``True`` for ``<path>/audit.jsonl`` (default) or ``None`` for no log.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        encoder_identity: Any = None,
        *,
        audit: AuditLog | bool | None = True,
        clock: Callable[[], str] = utc_now,
        fsync: bool = True,
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
            for statement in _SCHEMA.split(";"):  # (executescript would commit our transaction)
                if statement.strip():
                    self._db.execute(statement)
            meta = self._meta()
            if "format" not in meta:
                if encoder_identity is None:
                    raise ValueError(
                        f"{self.path} holds no store yet: pass the encoder identity to create one"
                    )
                identity = normalize_identity(encoder_identity)
                for key, value in (("format", STORE_FORMAT), ("encoder", json.dumps(identity, sort_keys=True)),
                                   ("seq", "0"), ("next_slot", "0")):
                    self._db.execute("INSERT INTO meta VALUES (?, ?)", (key, value))
                meta = self._meta()
        if meta["format"] != STORE_FORMAT:
            raise ValueError(f"{self.path}: store format {meta['format']!r}, expected {STORE_FORMAT!r}")
        self.encoder_identity: dict = json.loads(meta["encoder"])
        self.dim: int = int(self.encoder_identity["dim"])
        if encoder_identity is not None:
            self.check_encoder(encoder_identity, "open the store")
        self._vpath = self.path / VECTOR_FILE
        self._vfd = os.open(self._vpath, os.O_RDWR | os.O_CREAT, 0o644)
        self._mmap: Optional[np.ndarray] = None
        if audit is True:
            audit = AuditLog(self.path / AUDIT_FILE, fsync=fsync)
        self.audit: Optional[AuditLog] = audit or None
        self._purge_pending()
        self.flush_outbox()

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
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    @contextmanager
    def _write(self):
        """A write transaction followed by the post-commit work (purges, audit outbox)."""
        with self._txn():
            self._events: list[dict] = []
            yield
            for event in self._events:
                self._db.execute("INSERT INTO outbox (event) VALUES (?)", (json.dumps(event),))
        self._hook("after_commit")
        self._purge_pending()
        self.flush_outbox()

    def _meta(self) -> dict:
        return dict(self._db.execute("SELECT key, value FROM meta"))

    def _bump(self, key: str) -> int:
        (value,) = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        value = int(value) + 1
        self._db.execute("UPDATE meta SET value = ? WHERE key = ?", (str(value), key))
        return value

    def _event(self, event_type: str, /, **payload: Any) -> None:
        if self.audit is not None:
            self._events.append(make_event(event_type, clock=self.clock, **payload))

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

    # -- encoder identity ---------------------------------------------------------------------

    def check_encoder(self, identity: Any, action: str = "use") -> None:
        """Raise :class:`EncoderMismatchError` unless ``identity`` is the store's encoder."""
        try:
            given = normalize_identity(identity)
        except (TypeError, ValueError) as exc:
            raise EncoderMismatchError(f"cannot {action}: {exc}") from None
        clashes = [k for k in ENCODER_KEYS if given[k] != self.encoder_identity[k]]
        if clashes:
            raise EncoderMismatchError(
                f"cannot {action} with encoder {given!r}: the store at {self.path} was built with "
                f"encoder {self.encoder_identity!r} (differs on {clashes}); re-embed into a new "
                "store or use the store's encoder"
            )

    # -- vectors ------------------------------------------------------------------------------

    def _check_vector(self, vector: Any) -> np.ndarray:
        if hasattr(vector, "detach"):
            vector = vector.detach().cpu().numpy()
        v = np.asarray(vector)
        if not np.issubdtype(v.dtype, np.floating):
            raise TypeError(f"vector must be a float array, got dtype {v.dtype}")
        v = v.astype(np.float32)
        if v.ndim == 2 and v.shape[0] == 1:
            v = v[0]
        if v.shape != (self.dim,):
            raise ValueError(f"vector has shape {v.shape}, the store's encoder has dim {self.dim}")
        if not np.isfinite(v).all():
            raise ValueError("vector contains NaN or inf")
        norm = float(np.linalg.norm(v))
        if norm < 1e-8:
            raise ValueError("vector is zero; it has no direction to rank by")
        return (v / norm).astype("<f4")

    def _write_vector(self, slot: int, v: np.ndarray) -> int:
        """Write one vector; it is fsynced before the transaction that references it commits."""
        data = v.tobytes()
        os.pwrite(self._vfd, data, slot * self.dim * 4)
        self._vectors_dirty = True
        return zlib.crc32(data)

    def _new_slot(self, v: np.ndarray) -> tuple[int, int]:
        slot = self._bump("next_slot") - 1
        crc = self._write_vector(slot, v)
        self._hook("after_vector")
        return slot, crc

    def _purge_pending(self) -> None:
        """Zero every vector slot queued for purging (forgotten or replaced vectors)."""
        with self._lock:
            slots = [s for (s,) in self._db.execute("SELECT slot FROM purge")]
            if not slots:
                return
            zero = np.zeros(self.dim, dtype="<f4")
            for slot in slots:
                os.pwrite(self._vfd, zero.tobytes(), slot * self.dim * 4)
            os.fsync(self._vfd)
            with self._txn():
                self._db.executemany("DELETE FROM purge WHERE slot = ?", [(s,) for s in slots])

    def vector_matrix(self) -> np.ndarray:
        """All slots as a read-only (n_slots, dim) float32 memory map (remapped when it grows)."""
        with self._lock:
            rows = os.fstat(self._vfd).st_size // (self.dim * 4)
            if self._mmap is None or self._mmap.shape[0] != rows:
                if rows == 0:
                    self._mmap = np.zeros((0, self.dim), dtype=np.float32)
                else:
                    self._mmap = np.memmap(self._vpath, dtype="<f4", mode="r", shape=(rows, self.dim))
            return self._mmap

    def vectors_for(self, memory_ids: Iterable[str]) -> dict[str, np.ndarray]:
        """Copies of the stored vectors of live records (forgotten ones have none)."""
        out = {}
        matrix = self.vector_matrix()
        for memory_id in memory_ids:
            row = self._db.execute(
                "SELECT slot FROM records WHERE memory_id = ? AND slot IS NOT NULL", (memory_id,)
            ).fetchone()
            if row is not None:
                if row[0] >= matrix.shape[0]:
                    matrix = self.vector_matrix()
                out[memory_id] = np.array(matrix[row[0]])
        return out

    # -- rows ---------------------------------------------------------------------------------

    def _row_to_memory(self, row) -> Memory:
        memory_id, namespace, text, revision, state, data = row
        raw = json.loads(data)
        raw.update(memory_id=memory_id, namespace=namespace, text=text, revision=revision,
                   lifecycle_state=state)
        return Memory.from_dict(raw)

    def _load(self, memory_id: str) -> Memory:
        row = self._db.execute(
            "SELECT memory_id, namespace, text, revision, lifecycle_state, data FROM records "
            "WHERE memory_id = ?", (memory_id,)
        ).fetchone()
        if row is None:
            raise UnknownMemoryError(f"no memory with id {memory_id!r}")
        return self._row_to_memory(row)

    def _save(self, memory: Memory, seq: int, slot: Any = ..., crc: Any = ...) -> None:
        data = {k: v for k, v in memory.to_dict().items() if k not in _ROW_FIELDS}
        values = [memory.namespace, memory.text, memory.revision, seq, memory.lifecycle_state,
                  json.dumps(data, sort_keys=True)]
        sets = "namespace = ?, text = ?, revision = ?, seq = ?, lifecycle_state = ?, data = ?"
        if slot is not ...:
            sets += ", slot = ?, vec_crc = ?"
            values += [slot, crc]
        self._db.execute(f"UPDATE records SET {sets} WHERE memory_id = ?", [*values, memory.memory_id])

    def _insert(self, memory: Memory, seq: int, slot: int, crc: int) -> None:
        data = {k: v for k, v in memory.to_dict().items() if k not in _ROW_FIELDS}
        self._db.execute(
            "INSERT INTO records (memory_id, namespace, text, slot, vec_crc, revision, seq, "
            "lifecycle_state, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (memory.memory_id, memory.namespace, memory.text, slot, crc, memory.revision, seq,
             memory.lifecycle_state, json.dumps(data, sort_keys=True)),
        )
        self._db.executemany(
            "INSERT OR IGNORE INTO derivations VALUES (?, ?)",
            [(memory.memory_id, parent) for parent in memory.derived_from],
        )

    def _cas(self, memory: Memory, expected_revision: Optional[int]) -> None:
        if memory.forgotten:
            raise ForgottenMemoryError(
                f"memory {memory.memory_id!r} was forgotten (directive {memory.forgotten_by!r}); "
                "it cannot be changed"
            )
        if expected_revision is None:
            return
        if type(expected_revision) is not int:
            raise TypeError(f"expected_revision must be an int, got {expected_revision!r}")
        if memory.revision != expected_revision:
            raise StaleRevisionError(memory.memory_id, expected_revision, memory.revision)

    # -- reads --------------------------------------------------------------------------------

    def get(self, memory_id: str) -> Optional[Memory]:
        with self._lock:
            try:
                return self._load(memory_id)
            except UnknownMemoryError:
                return None

    def get_many(self, memory_ids: Iterable[str]) -> dict[str, Memory]:
        ids = list(dict.fromkeys(memory_ids))
        out: dict[str, Memory] = {}
        with self._lock:
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for row in self._db.execute(
                    "SELECT memory_id, namespace, text, revision, lifecycle_state, data FROM "
                    f"records WHERE memory_id IN ({marks})", chunk
                ):
                    out[row[0]] = self._row_to_memory(row)
        return out

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM records").fetchone()[0]

    def ids(self) -> list[str]:
        with self._lock:
            return [r for (r,) in self._db.execute("SELECT memory_id FROM records ORDER BY memory_id")]

    def version(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT value FROM meta WHERE key = 'seq'").fetchone()[0])

    def changes_since(self, seq: int) -> tuple[int, list[IndexEntry]]:
        """Index entries of every record written after ``seq``, and the current version."""
        with self._lock:
            self._db.execute("BEGIN")  # one consistent snapshot of version and rows
            try:
                version = self.version()
                rows = self._db.execute(
                    "SELECT memory_id, namespace, slot, lifecycle_state, seq, data FROM records "
                    "WHERE seq > ? ORDER BY seq", (seq,)
                ).fetchall()
            finally:
                self._db.execute("COMMIT")
        entries = []
        for memory_id, namespace, slot, state, row_seq, data in rows:
            raw = json.loads(data)
            entries.append(IndexEntry(
                memory_id=memory_id,
                namespace=namespace,
                slot=slot,
                alive=state != "forgotten" and slot is not None,
                lifecycle_state=state,
                superseded_in=tuple(
                    SupersededIn(s["by"], None if s["scope"] is None else SupersessionScope(**s["scope"]))
                    for s in raw.get("superseded_in") or ()
                ),
                applicability=Applicability.from_dict(raw.get("applicability")),
                policy_tags=None if raw.get("policy_tags") is None else tuple(raw["policy_tags"]),
                seq=row_seq,
            ))
        return version, entries

    def namespace_of(self, memory_id: str) -> Optional[str]:
        with self._lock:
            row = self._db.execute(
                "SELECT namespace FROM records WHERE memory_id = ?", (memory_id,)).fetchone()
        return None if row is None else row[0]

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
                "AND text IS NOT NULL", ns
            ):
                markers = json.loads(data).get("markers") or ()
                if markers:
                    out.append((memory_id, tuple(markers)))
        return out

    # -- writes -------------------------------------------------------------------------------

    def add(self, memory: Memory, vector: Any, *, encoder: Any) -> Memory:
        """Store a new record and its vector; apply its ``supersedes`` links. Returns it at
        revision 1 with the store's timestamps."""
        return self.add_many([memory], [vector], encoder=encoder)[0]

    def add_many(self, memories: Iterable[Memory], vectors: Any, *, encoder: Any) -> list[Memory]:
        """Store several new records in one transaction (all or none); links may point at
        records earlier in the batch."""
        self.check_encoder(encoder, "write")
        memories = list(memories)
        vectors = list(vectors) if not isinstance(vectors, np.ndarray) else vectors
        if len(memories) != len(vectors):
            raise ValueError(f"{len(memories)} memories but {len(vectors)} vectors")
        checked = []
        for memory, vector in zip(memories, vectors):
            if not isinstance(memory, Memory):
                raise TypeError(f"memory must be a Memory, got {type(memory).__name__}")
            if memory.lifecycle_state in ("superseded", "forgotten"):
                raise ValueError(
                    f"memory {memory.memory_id!r}: lifecycle_state {memory.lifecycle_state!r} is "
                    "set by the store (add a superseding record / call forget), not written directly"
                )
            checked.append((memory, self._check_vector(vector)))
        stored_all = []
        with self._write():
            seq = self._bump("seq")
            now = self.clock()
            for memory, v in checked:
                stored_all.append(self._add_in_txn(memory, v, seq, now))
        return stored_all

    def _add_in_txn(self, memory: Memory, v: np.ndarray, seq: int, now: str) -> Memory:
        if self._db.execute("SELECT 1 FROM records WHERE memory_id = ?", (memory.memory_id,)).fetchone():
            raise ValueError(f"memory {memory.memory_id!r} already exists; use update()")
        for parent in memory.derived_from:
            if self._load(parent).forgotten:
                raise ForgottenMemoryError(
                    f"memory {memory.memory_id!r}: derived_from names forgotten memory {parent!r}")
        old_records = []
        for link in memory.supersedes:
            old = self._load(link.memory_id)
            self._cas(old, link.expected_revision)
            if old.namespace != memory.namespace:
                raise PermissionError(
                    f"memory {memory.memory_id!r} (namespace {memory.namespace!r}) cannot "
                    f"supersede {old.memory_id!r} in namespace {old.namespace!r}"
                )
            old_records.append((link, old))
        slot, crc = self._new_slot(v)
        stored = memory.replace(
            revision=1, created_at=now, updated_at=now, superseded_in=(), needs_review=False,
            review_reasons=(), forgotten_by=None,
        )
        self._insert(stored, seq, slot, crc)
        self._event(
            "stored", memory_id=stored.memory_id, namespace=stored.namespace, revision=1,
            principal=stored.principal, kind=stored.kind, derived_from=list(stored.derived_from),
            supersedes=[s.to_dict() for s in stored.supersedes], encoder=self.encoder_identity,
            slot=slot,
        )
        for link, old in old_records:
            new_old = old.replace(
                lifecycle_state="superseded",
                superseded_in=old.superseded_in + (SupersededIn(stored.memory_id, link.scope),),
                revision=old.revision + 1, updated_at=now,
            )
            self._save(new_old, seq)
            self._event("superseded", memory_id=old.memory_id, by=stored.memory_id,
                        scope=scope_to_dict(link.scope), revision=new_old.revision)
            self._flag_derived(old.memory_id, "superseded", seq, now)
        return stored

    def _flag_derived(self, source_id: str, cause: str, seq: int, now: str) -> list[str]:
        """Mark every record derived (transitively) from ``source_id`` as needing review."""
        flagged: list[str] = []
        seen = {source_id}
        frontier = [source_id]
        while frontier:
            parent = frontier.pop(0)
            children = [c for (c,) in self._db.execute(
                "SELECT child FROM derivations WHERE parent = ? ORDER BY child", (parent,))]
            for child in children:
                if child in seen:
                    continue
                seen.add(child)
                frontier.append(child)
                record = self._load(child)
                if record.forgotten:
                    continue
                reason = f"{cause}:{source_id}" + ("" if parent == source_id else f" via {parent}")
                flagged_record = record.replace(
                    needs_review=True,
                    review_reasons=tuple(dict.fromkeys(record.review_reasons + (reason,))),
                    revision=record.revision + 1, updated_at=now,
                )
                self._save(flagged_record, seq)
                self._event("flagged_for_review", memory_id=child, source=source_id, via=parent,
                            cause=cause, revision=flagged_record.revision)
                flagged.append(child)
        return flagged

    def update(self, memory_id: str, expected_revision: int, *, vector: Any = None,
               encoder: Any = None, principal: Optional[str] = None, **changes: Any) -> Memory:
        """Compare-and-set update: applied only if the stored revision is ``expected_revision``.

        A text change needs the new ``vector`` (and ``encoder``); content changes (text,
        applicability) flag every derived record for review.
        """
        return self._update(memory_id, expected_revision, vector, encoder, principal, "updated", changes)[0]

    def _update(self, memory_id, expected_revision, vector, encoder, principal, cause, changes):
        if type(expected_revision) is not int:
            raise TypeError(f"expected_revision must be an int, got {expected_revision!r}")
        unknown = sorted(set(changes) - set(UPDATABLE_FIELDS))
        if unknown:
            raise ValueError(f"update: field(s) {unknown} cannot be updated; allowed: {UPDATABLE_FIELDS}")
        if changes.get("lifecycle_state") in ("superseded", "forgotten"):
            raise ValueError(
                "update: lifecycle_state 'superseded' / 'forgotten' are set by add(supersedes=...) "
                "and forget()"
            )
        if ("text" in changes) != (vector is not None):
            raise ValueError("update: a text change and a new vector go together (pass both or neither)")
        v = None
        if vector is not None:
            self.check_encoder(encoder, "write")
            v = self._check_vector(vector)
        if "applicability" in changes:
            changes["applicability"] = Applicability.from_dict(changes["applicability"])
        with self._write():
            current = self._load(memory_id)
            self._cas(current, expected_revision)
            seq = self._bump("seq")
            now = self.clock()
            new = current.replace(**changes, revision=current.revision + 1, updated_at=now)
            if v is not None:
                (old_slot,) = self._db.execute(
                    "SELECT slot FROM records WHERE memory_id = ?", (memory_id,)).fetchone()
                slot, crc = self._new_slot(v)
                self._save(new, seq, slot, crc)
                self._db.execute("INSERT OR IGNORE INTO purge VALUES (?)", (old_slot,))
            else:
                self._save(new, seq)
            self._event("retired" if cause == "retired" else "updated", memory_id=memory_id,
                        revision=new.revision, fields=sorted(changes), cause=cause,
                        principal=principal)
            flagged: list[str] = []
            if cause == "retired":
                flagged = self._flag_derived(memory_id, "retired", seq, now)
            elif any(f in changes for f in CONTENT_FIELDS):
                flagged = self._flag_derived(memory_id, "corrected", seq, now)
        return new, flagged

    def correct(self, memory_id: str, expected_revision: int, text: str, vector: Any, *,
                encoder: Any, principal: Optional[str] = None, **changes: Any) -> tuple[Memory, list[str]]:
        """Replace a record's content (compare-and-set); returns it and the ids flagged for review."""
        return self._update(memory_id, expected_revision, vector, encoder, principal, "corrected",
                            {**changes, "text": text})

    def retire(self, memory_id: str, expected_revision: int,
               principal: Optional[str] = None) -> tuple[Memory, list[str]]:
        """Mark a record stale (kept for history); returns it and the ids flagged for review."""
        return self._update(memory_id, expected_revision, None, None, principal, "retired",
                            {"lifecycle_state": "stale"})

    def mark_reviewed(self, memory_id: str, expected_revision: int,
                      principal: Optional[str] = None) -> Memory:
        with self._write():
            current = self._load(memory_id)
            self._cas(current, expected_revision)
            seq = self._bump("seq")
            new = current.replace(needs_review=False, review_reasons=(),
                                  revision=current.revision + 1, updated_at=self.clock())
            self._save(new, seq)
            self._event("reviewed", memory_id=memory_id, revision=new.revision, principal=principal)
        return new

    def forget(self, memory_id: str, directive: Memory, directive_vector: Any, *, encoder: Any,
               expected_revision: Optional[int] = None) -> Memory:
        """Erase a detail for good and store the forget directive as a usable memory.

        The forgotten record keeps only its id, namespace, kind, timestamps and lifecycle
        ``forgotten`` (a tombstone: the id cannot be reused or revived); its text, markers,
        applicability and vector are erased, and records derived from it are flagged. The
        directive (a new record in the same namespace; its text must not repeat the detail) is
        stored with ``kind = forget_directive`` and ``forgets = memory_id``.
        """
        self.check_encoder(encoder, "write")
        if not isinstance(directive, Memory):
            raise TypeError("directive must be a Memory")
        if memory_id in directive.derived_from:
            raise ValueError("the forget directive must not be derived from the forgotten record")
        v = self._check_vector(directive_vector)
        with self._write():
            current = self._load(memory_id)
            self._cas(current, expected_revision)
            if directive.namespace != current.namespace:
                raise PermissionError(
                    f"forget directive {directive.memory_id!r} must live in namespace "
                    f"{current.namespace!r}, the forgotten record's"
                )
            if self._db.execute("SELECT 1 FROM records WHERE memory_id = ?",
                                (directive.memory_id,)).fetchone():
                raise ValueError(f"memory {directive.memory_id!r} already exists")
            (old_slot,) = self._db.execute(
                "SELECT slot FROM records WHERE memory_id = ?", (memory_id,)).fetchone()
            slot, crc = self._new_slot(v)
            seq = self._bump("seq")
            now = self.clock()
            tomb = Memory(
                memory_id=memory_id, namespace=current.namespace, text=None,
                kind=current.kind, lifecycle_state="forgotten", principal=current.principal,
                revision=current.revision + 1, created_at=current.created_at, updated_at=now,
                forgotten_by=directive.memory_id,
            )
            self._save(tomb, seq, None, None)
            self._db.execute("DELETE FROM derivations WHERE child = ?", (memory_id,))
            if old_slot is not None:
                self._db.execute("INSERT OR IGNORE INTO purge VALUES (?)", (old_slot,))
            stored = directive.replace(
                kind=FORGET_DIRECTIVE_KIND, forgets=memory_id, revision=1, created_at=now,
                updated_at=now, superseded_in=(), needs_review=False, review_reasons=(),
                forgotten_by=None, supersedes=(),
            )
            self._insert(stored, seq, slot, crc)
            self._event("forgotten", memory_id=memory_id, directive_id=stored.memory_id,
                        revision=tomb.revision, principal=directive.principal)
            self._event(
                "stored", memory_id=stored.memory_id, namespace=stored.namespace, revision=1,
                principal=stored.principal, kind=stored.kind, derived_from=list(stored.derived_from),
                supersedes=[], forgets=memory_id, encoder=self.encoder_identity, slot=slot,
            )
            self._flag_derived(memory_id, "forgotten", seq, now)
        return stored

    # -- integrity ----------------------------------------------------------------------------

    def verify(self) -> list[str]:
        """Integrity problems (empty when sound): vectors that do not match their CRC, records
        without text or vector that are not forgotten, forgotten records that kept either,
        purges still pending."""
        problems = []
        matrix = self.vector_matrix()
        with self._lock:
            rows = self._db.execute(
                "SELECT memory_id, text, slot, vec_crc, lifecycle_state FROM records").fetchall()
            pending = self._db.execute("SELECT COUNT(*) FROM purge").fetchone()[0]
        for memory_id, text, slot, crc, state in rows:
            if state == "forgotten":
                if text is not None or slot is not None:
                    problems.append(f"{memory_id}: forgotten but kept its text or vector")
                continue
            if text is None or slot is None or crc is None:
                problems.append(f"{memory_id}: half record (text={text is not None}, slot={slot})")
                continue
            if slot >= matrix.shape[0]:
                problems.append(f"{memory_id}: slot {slot} beyond the vector file")
                continue
            if zlib.crc32(np.asarray(matrix[slot], dtype="<f4").tobytes()) != crc:
                problems.append(f"{memory_id}: vector does not match its checksum")
        if pending:
            problems.append(f"{pending} vector purge(s) pending")
        return problems


__all__ = [
    "AUDIT_FILE",
    "DB_FILE",
    "ENCODER_KEYS",
    "STORE_FORMAT",
    "VECTOR_FILE",
    "EmbeddedStore",
    "IndexEntry",
    "MemoryStore",
    "normalize_identity",
]
