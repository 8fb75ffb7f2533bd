"""``PostgresBackend``: the PostgreSQL store's primitives (:mod:`memgate.retriever.records.primitives`)
in one PostgreSQL schema (tables: :mod:`memgate.retriever.stores.postgres.tables`), through one
psycopg connection (:mod:`memgate.retriever.stores.postgres.connection`). A write is one
transaction after the ``seq`` row's lock; compare-and-set is also a conditional ``UPDATE``; the
vectors of live records are mirrored locally by slot for the retriever's re-scoring
(:mod:`memgate.retriever.stores.postgres.store` says how it behaves).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal, Optional, Union

import numpy as np

from memgate.retriever.audit.log import AuditLog
from memgate.retriever.errors import AmbiguousMemoryError, StaleRevisionError, UnknownMemoryError
from memgate.retriever.records.identity import ENCODER_KEYS, check_encoder, normalize_identity
from memgate.retriever.records.index import IndexEntry, index_entry, record_signature
from memgate.retriever.records.links import check_namespace_arg, resolve_namespace
from memgate.retriever.records.memory import StoredMemory
from memgate.retriever.records.primitives import Event, Key
from memgate.retriever.records.suppression import Suppressed, new_key
from memgate.retriever.stores.postgres.audit_table import TableAuditLog, encode
from memgate.retriever.stores.postgres.connection import Connection, psycopg, register_vector, sql
from memgate.retriever.stores.postgres.eraser import Eraser, delete_rows, erasure_pass
from memgate.retriever.stores.postgres.tables import (
    as_array,
    check_schema_name,
    dumps,
    ensure_vector_extension,
    from_db,
    open_schema,
    statement,
    to_db,
)

_ROW_FIELDS = ("memory_id", "namespace", "text", "revision", "lifecycle_state")
_COLUMNS = "memory_id, namespace, text, revision, lifecycle_state, data"
_SUPPRESSED_COLUMNS = "namespace, digest, n, kind, memory_id, version, key_id, whole"
log = logging.getLogger("memgate")
_said: set[str] = set()


def _say_once(key: str, message: str) -> None:
    if key not in _said:
        _said.add(key)
        log.warning(message)


class PostgresBackend:
    """Records and vectors in one PostgreSQL schema (the arguments are
    :class:`memgate.retriever.stores.postgres.store.PostgresStore`'s)."""

    def __init__(self, url: str, encoder_identity: Any, *, schema: str,
                 audit: Union[AuditLog, None, Literal["table"]], clock: Callable[[], str],
                 vacuum_on_forget: bool, erase_in_background: bool = True) -> None:
        self.schema = check_schema_name(schema)
        self.vacuum_on_forget = bool(vacuum_on_forget)
        self.clock = clock
        self.lock = threading.RLock()
        self.fault_hook: Optional[Callable[[str], None]] = None  # crash tests: called per stage
        self._tx: Any = None  # the write's connection while a transaction is open
        self._sql: dict[str, Any] = {}
        self._vector_schema: Optional[str] = None
        self.db = Connection(url, on_connect=self._prepare, lock=self.lock)
        self.where = self.db.where  # the URL without its password
        identity = None if encoder_identity is None else normalize_identity(encoder_identity)
        try:
            with self.db.session("opening the store") as conn:
                meta = open_schema(conn, self.schema, identity, {
                    "seq": "0", "next_slot": "0", "suppression_key": new_key()})
        except BaseException:
            self.db.close()
            raise
        self.encoder_identity: dict[str, Any] = {k: json.loads(meta["encoder"])[k] for k in ENCODER_KEYS}
        self.dim: int = int(self.encoder_identity["dim"])
        self._key = bytes.fromhex(meta["suppression_key"])
        if encoder_identity is not None:
            try:
                check_encoder(encoder_identity, self.encoder_identity, self.describe(), "open the store")
            except BaseException:
                self.db.close()
                raise
        self.audit: Optional[AuditLog] = TableAuditLog(self) if audit == "table" else (
            None if isinstance(audit, str) else audit or None)
        self._audit_table = isinstance(self.audit, TableAuditLog)
        self._eraser_db: Optional[Connection] = None  # (the eraser's own connection)
        self.eraser = Eraser(self._vacuum_pass, background=erase_in_background, describe=self.describe())
        self._mirror = np.zeros((0, self.dim), dtype=np.float32)  # slot -> vector (a cache)
        self._have = np.zeros(0, dtype=bool)  # slots whose vector the mirror holds
        self._rows_known = 0  # mirror rows vector_matrix() exposes (highest slot seen + 1)
        self._slots: dict[Key, int] = {}  # (namespace, id) -> its slot in the mirror
        # the open write's counters, new or dead vectors (slot -> vector, None: gone), erasures
        self._counters: dict[str, int] = {}
        self._born: dict[int, Optional[np.ndarray]] = {}
        self._erased = False
        self._erase_pages: set[int] = set()  # (pages of records: the eraser's work list)
        self._outbox_checked = False
        self.flush_outbox()
        if self.vacuum_on_forget and self._rows("SELECT 1 FROM {s}.erase_pages LIMIT 1"):
            self.eraser.request()  # (a process ended before its eraser finished)

    # -- plumbing -----------------------------------------------------------------------------

    def _prepare(self, conn: Any) -> None:
        """A new connection: pgvector's types (the extension created when missing), its schema
        on the search path, the iterative index scan for filtered searches."""
        self._vector_schema = ensure_vector_extension(conn)
        conn.execute(sql.SQL("SET search_path = {}").format(sql.Identifier(self._vector_schema)))
        register_vector(conn)
        try:  # filtered HNSW scans go on until they have k rows (pgvector 0.8+)
            conn.execute("SET hnsw.iterative_scan = relaxed_order")
        except psycopg.Error:
            _say_once(f"iterative-scan:{self.where}", f"{self.describe()}: pgvector before 0.8 has no "
                      "iterative index scan; an approximate search with a selective filter may return "
                      "fewer than k records (exact search is unaffected)")

    def close(self) -> None:
        """Finish a pending page erasure, close the connections (idempotent)."""
        if not self.db.closed:
            self.eraser.close()
        self.db.close()
        if self._eraser_db is not None:
            self._eraser_db.close()

    def describe(self) -> str:
        return f"the PostgreSQL store {self.schema!r} at {self.where}"

    def hook(self, stage: str) -> None:
        if self.fault_hook is not None:
            self.fault_hook(stage)

    def _q(self, template: str) -> Any:
        composed = self._sql.get(template)
        if composed is None:
            composed = self._sql[template] = statement(template, self.schema)
        return composed

    def _rows(self, template: str, params: Any = (), *, binary: bool = False) -> list[Any]:
        """Rows of one statement: inside the open write's transaction, else on its own (a read,
        retried once on a connection found broken)."""
        rows: list[Any]
        if self._tx is not None:
            rows = self._tx.cursor(binary=binary).execute(self._q(template), params).fetchall()
        else:
            rows = self.db.read("reading", lambda conn: conn.cursor(binary=binary).execute(
                self._q(template), params).fetchall())
        return rows

    def _run(self, template: str, params: Any = ()) -> int:
        """Execute one statement of the open write; returns the rows it changed."""
        changed: int = self._tx.execute(self._q(template), params).rowcount
        return changed

    def _run_many(self, template: str, params: list[Any]) -> None:
        if params:
            self._tx.cursor().executemany(self._q(template), params)

    @contextmanager
    def write(self) -> Iterator[list[Event]]:
        """One transaction, after the ``seq`` row's lock (writes commit in version order); the
        counters are read under the lock and written back before the commit."""
        with self.db.session("writing") as conn:
            with conn.transaction():
                self._tx = conn
                try:
                    rows = conn.execute(self._q(
                        "SELECT key, value FROM {s}.meta WHERE key IN ('seq', 'next_slot') "
                        "ORDER BY key FOR UPDATE")).fetchall()
                    self._counters = {k: int(v) for k, v in rows}
                    start = dict(self._counters)
                    events: list[Event] = []
                    self._born = {}
                    self._erased = False
                    self._erase_pages = set()
                    yield events
                    self._run_many("UPDATE {s}.meta SET value = %s WHERE key = %s",
                                   [(str(v), k) for k, v in self._counters.items() if v != start[k]])
                    if self._audit_table and events:  # (the trail commits with the write)
                        self._run_many("INSERT INTO {s}.audit (event) VALUES (%s)", encode(events))
                    elif self.audit is not None and events:
                        self._run_many("INSERT INTO {s}.outbox (event) VALUES (%s)",
                                       [(json.dumps(e),) for e in events])
                    if self._erase_pages and self.vacuum_on_forget:  # (the eraser's work list)
                        self._run("INSERT INTO {s}.erase_pages (page) SELECT unnest(%s::bigint[])",
                                  (sorted(self._erase_pages),))
                    self.hook("before_commit")
                finally:
                    self._tx = None
            for slot, v in self._born.items():  # committed: the mirror takes the new vectors
                self.mirror_set(slot, v)
        self.hook("after_commit")
        if self._erased and self.vacuum_on_forget:
            self.eraser.request()
        if not self._audit_table:
            self.flush_outbox()

    # -- erasure (:mod:`memgate.retriever.stores.postgres.eraser`) -------------------------------

    def erase(self, keys: Iterable[Key], *, wait: bool = False) -> int:
        """Delete the records ``(namespace, memory_id)`` of ``keys`` outright (rows, derivation
        links, their vectors in the mirror) and have their pages cleaned as after a forget: the
        erasure path of a forget's tombstone, for callers that remove records without leaving a
        tombstone (an expiry sweep, a reset). Runs inside the open write when there is one (the
        pages are cleaned after its commit), else as a write of its own; ``wait``: return only
        once the pages are clean (:meth:`wait_erased`). Returns the records deleted. (A deleted
        row leaves no change-log entry: other processes' retrievers see it at their reload;
        tombstones, the forget path, reach them at once.)"""
        keys = list(keys)
        if self._tx is None:
            with self.lock, self.write():
                n = self.erase(keys)
            if wait:
                self.wait_erased()
            return n
        keys = [(to_db(ns), to_db(mid)) for ns, mid in keys]
        deleted = delete_rows(self._tx, self._q, keys)
        for slot, page in deleted:
            self._erase_pages.add(page)
            if slot is not None:
                self._born[slot] = None
        n = len(deleted)
        for ns, mid in keys:
            self._slots.pop((from_db(ns), from_db(mid)), None)  # (other processes: see the docstring)
        self._erased = self._erased or n > 0
        return n

    def request_erasure(self) -> None:  # (the pages cleaned as after a forget, in the window)
        self.eraser.request()

    def wait_erased(self, timeout: float = 5.0) -> bool:
        """Block until the pages of every erasure this process committed are clean (True), or
        ``timeout`` seconds passed (False)."""
        return self.eraser.wait(timeout)

    def _vacuum_pass(self) -> int:
        """One erasure pass on the eraser's own connection
        (:func:`memgate.retriever.stores.postgres.eraser.erasure_pass`): the dead versions left
        (0: done)."""
        if self._eraser_db is None:
            self._eraser_db = Connection(self.db._url, on_connect=lambda conn: None, lock=threading.RLock())
        with self._eraser_db.session("erasing the pages of forgotten records") as conn:
            return erasure_pass(conn, self._q)

    def compact(self) -> None:
        """``VACUUM FULL`` the store's tables: rewritten (indexes rebuilt) into new files, so no
        data file keeps an erased row version's bytes (the WAL and backups keep them as long as
        the operator does). An exclusive lock on each table while it runs: an operator's step."""
        with self.lock:
            with self.db.session("compacting the store") as conn:
                for table in ("records", "derivations", "suppressed", "outbox", "audit"):
                    conn.execute(self._q(f"VACUUM FULL {{s}}.{table}"))

    def bump(self, key: str) -> int:
        self._counters[key] += 1
        return self._counters[key]

    def flush_outbox(self) -> None:
        """Move committed audit events from the outbox to the audit log (idempotent; events of
        other processes' writes are taken once, by whichever process flushes first). With the
        audit table, a write's events commit with it: only events a file-logging process left
        in the outbox move, once, when the store opens."""
        if self.audit is None or (self._audit_table and self._outbox_checked):
            return
        self._outbox_checked = True
        if self._audit_table:
            with self.db.session("moving audit events") as conn, conn.transaction():
                conn.execute(self._q("INSERT INTO {s}.audit (event) SELECT event FROM {s}.outbox ORDER BY id"))
                conn.execute(self._q("DELETE FROM {s}.outbox"))
            return
        with self.db.session("moving audit events") as conn:
            with conn.transaction():
                rows = conn.execute(self._q(
                    "SELECT id, event FROM {s}.outbox ORDER BY id FOR UPDATE SKIP LOCKED")).fetchall()
                if rows:
                    self.audit.append_many(json.loads(e) for _, e in rows)
                    self.hook("after_audit_append")
                    conn.execute(self._q("DELETE FROM {s}.outbox WHERE id = ANY(%s)"),
                                 ([i for i, _ in rows],))

    # -- vectors ------------------------------------------------------------------------------

    def mirror_set(self, slot: int, v: Optional[np.ndarray]) -> None:
        if slot >= self._mirror.shape[0]:
            cap = max(slot + 1, 2 * self._mirror.shape[0], 1024)
            grown = np.zeros((cap, self.dim), np.float32)
            grown[: self._mirror.shape[0]] = self._mirror
            have = np.zeros(cap, dtype=bool)
            have[: len(self._have)] = self._have
            self._mirror, self._have = grown, have
        self._mirror[slot] = 0.0 if v is None else v
        self._have[slot] = v is not None
        self._rows_known = max(self._rows_known, slot + 1)

    def vector_matrix(self) -> np.ndarray:
        """(slots, dim) float32: a local mirror of the stored vectors by slot, filled by this
        process's writes and by :meth:`changes_since` (slots not seen yet are zero rows)."""
        with self.lock:
            view = self._mirror[: self._rows_known]
            view.flags.writeable = False
            return view

    def vectors_for(self, memory_ids: Iterable[str], *,
                    namespace: Optional[str] = None) -> dict[str, np.ndarray]:
        """Copies of the stored vectors of live records (forgotten ones have none)."""
        out = {}
        with self.lock:
            for memory_id in dict.fromkeys(memory_ids):
                try:
                    ns = resolve_namespace(self, memory_id, namespace)
                except UnknownMemoryError:
                    continue
                rows = self._rows("SELECT embedding FROM {s}.records WHERE namespace = %s AND "
                                  "memory_id = %s AND embedding IS NOT NULL",
                                  (to_db(ns), to_db(memory_id)), binary=True)
                if rows:
                    out[memory_id] = as_array(rows[0][0])
        return out

    # -- rows ---------------------------------------------------------------------------------

    @staticmethod
    def _to_memory(row: tuple[Any, ...]) -> StoredMemory:
        memory_id, namespace, text, revision, state, data = row
        raw = json.loads(data)
        raw.update(memory_id=from_db(memory_id), namespace=from_db(namespace), text=from_db(text),
                   revision=revision, lifecycle_state=state)
        return StoredMemory.from_dict(raw)

    @staticmethod
    def _data(memory: StoredMemory) -> str:
        return dumps({k: v for k, v in memory.to_dict().items() if k not in _ROW_FIELDS})

    def load(self, memory_id: str, namespace: str) -> StoredMemory:
        rows = self._rows(f"SELECT {_COLUMNS} FROM {{s}}.records WHERE namespace = %s AND memory_id = %s",
                          (to_db(namespace), to_db(memory_id)))
        if not rows:
            raise UnknownMemoryError(f"no memory with id {memory_id!r} in namespace {namespace!r}")
        return self._to_memory(rows[0])

    def exists(self, memory_id: str, namespace: str) -> bool:
        return bool(self._rows("SELECT 1 FROM {s}.records WHERE namespace = %s AND memory_id = %s",
                               (to_db(namespace), to_db(memory_id))))

    def namespaces_of(self, memory_id: str) -> list[str]:
        return sorted(from_db(n) for (n,) in self._rows(
            "SELECT namespace FROM {s}.records WHERE memory_id = %s", (to_db(memory_id),)))

    def children(self, namespace: str, parent: str) -> list[tuple[Any, ...]]:
        rows = self._rows("SELECT child_ns, child FROM {s}.derivations WHERE parent_ns = %s AND parent = %s",
                          (to_db(namespace), to_db(parent)))
        return sorted(((from_db(n), from_db(c)) for n, c in rows), key=lambda k: (k[1], k[0]))

    # -- write primitives (the rules are memgate.retriever.records.rules.Records) -------------

    def _insert(self, memory: StoredMemory, seq: int, slot: Optional[int], v: Optional[np.ndarray],
                parents: Iterable[tuple[Any, ...]]) -> None:
        if "\x00" in memory.memory_id:  # (only an imported legacy id could hold one)
            raise ValueError(f"field 'memory_id' {memory.memory_id!r:.80} contains U+0000")
        self._run("INSERT INTO {s}.records (namespace, memory_id, text, revision, seq, "
                  "lifecycle_state, sig, slot, embedding, data) "
                  "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                  (to_db(memory.namespace), to_db(memory.memory_id), to_db(memory.text), memory.revision,
                   seq, memory.lifecycle_state, record_signature(memory), slot, v, self._data(memory)))
        self._run_many("INSERT INTO {s}.derivations VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                       [(to_db(memory.namespace), to_db(memory.memory_id), to_db(pns), to_db(pid))
                        for pns, pid in parents])

    def _save(self, memory: StoredMemory, seq: int, vector: Any = ...) -> None:
        """Replace the record's row, conditional on the revision it replaces (compare-and-set in
        SQL: every stored change raises the revision by one)."""
        values = [to_db(memory.text), memory.revision, seq, memory.lifecycle_state,
                  record_signature(memory), self._data(memory)]
        sets = "text = %s, revision = %s, seq = %s, lifecycle_state = %s, sig = %s, data = %s"
        if vector is not ...:
            slot, v = vector
            sets += ", slot = %s, embedding = %s"
            values += [slot, v]
        changed = self._run(f"UPDATE {{s}}.records SET {sets} WHERE namespace = %s AND memory_id = %s "
                            "AND revision = %s",
                            [*values, to_db(memory.namespace), to_db(memory.memory_id), memory.revision - 1])
        if changed != 1:
            current = self._rows("SELECT revision FROM {s}.records WHERE namespace = %s AND memory_id = %s",
                                 (to_db(memory.namespace), to_db(memory.memory_id)))
            raise StaleRevisionError(memory.memory_id, memory.revision - 1, current[0][0] if current else None)

    def _slot_of(self, memory: StoredMemory) -> Optional[int]:
        rows = self._rows("SELECT slot FROM {s}.records WHERE namespace = %s AND memory_id = %s",
                          (to_db(memory.namespace), to_db(memory.memory_id)))
        return rows[0][0] if rows else None

    def _new_slot(self, v: np.ndarray) -> int:
        slot = self.bump("next_slot") - 1
        self._born[slot] = v
        return slot

    def put_new(self, memory: StoredMemory, seq: int, v: np.ndarray, parents: Iterable[tuple[Any, ...]] = ()) -> int:
        slot = self._new_slot(v)
        self._insert(memory, seq, slot, v, parents)
        return slot

    def put(self, memory: StoredMemory, seq: int) -> None:
        self._save(memory, seq)

    def put_new_vector(self, memory: StoredMemory, seq: int, v: np.ndarray) -> int:
        old_slot = self._slot_of(memory)
        slot = self._new_slot(v)
        self._save(memory, seq, (slot, v))
        if old_slot is not None:
            self._born[old_slot] = None  # (the replaced vector leaves the mirror at the commit)
        return slot

    def put_tombstone(self, tomb: StoredMemory, seq: int) -> None:
        self._erased = True  # (the eraser after the commit: the old row version's bytes go too)
        found = self._rows("SELECT slot, (ctid::text::point)[0]::bigint FROM {s}.records "
                           "WHERE namespace = %s AND memory_id = %s",
                           (to_db(tomb.namespace), to_db(tomb.memory_id)))
        old_slot = found[0][0] if found else None
        self._erase_pages.update(int(page) for _, page in found)
        self._save(tomb, seq, (None, None))
        self._run("DELETE FROM {s}.derivations WHERE child_ns = %s AND child = %s",
                  (to_db(tomb.namespace), to_db(tomb.memory_id)))
        if old_slot is not None:
            self._born[old_slot] = None

    def put_restored_tombstone(self, tomb: StoredMemory, seq: int) -> None:
        self._insert(tomb, seq, None, None, ())

    # -- reads --------------------------------------------------------------------------------

    def get_many(self, memory_ids: Iterable[str], *,
                 namespace: Optional[str] = None) -> dict[str, StoredMemory]:
        """Records by id: in ``namespace``, or (without it) ids that name one record each
        (an id in several namespaces raises :class:`AmbiguousMemoryError`)."""
        check_namespace_arg(namespace)
        ids = [to_db(i) for i in dict.fromkeys(memory_ids) if isinstance(i, str)]
        if not ids:
            return {}
        with self.lock:
            if namespace is None:
                rows = self._rows(f"SELECT {_COLUMNS} FROM {{s}}.records WHERE memory_id = ANY(%s)", (ids,))
            else:
                rows = self._rows(f"SELECT {_COLUMNS} FROM {{s}}.records WHERE memory_id = ANY(%s) "
                                  "AND namespace = %s", (ids, to_db(namespace)))
        out: dict[str, StoredMemory] = {}
        for row in rows:
            memory = self._to_memory(row)
            if memory.memory_id in out:
                raise AmbiguousMemoryError(
                    f"memory id {memory.memory_id!r} names records in several namespaces (ids are "
                    "scoped per namespace): pass namespace=")
            out[memory.memory_id] = memory
        return out

    def count(self) -> int:
        with self.lock:
            return int(self._rows("SELECT count(*) FROM {s}.records")[0][0])

    def ids(self) -> list[str]:
        """Every record's id, sorted (an id used in several namespaces appears once per record)."""
        with self.lock:
            rows = self._rows("SELECT memory_id, namespace FROM {s}.records")
        return [mid for mid, _ in sorted((from_db(m), from_db(n)) for m, n in rows)]

    def version(self) -> int:
        with self.lock:
            return int(self._rows("SELECT value FROM {s}.meta WHERE key = 'seq'")[0][0])

    def changes_since(self, seq: int) -> tuple[int, list[IndexEntry]]:
        """Index entries of every record written after ``seq`` and the current version, read in
        one snapshot; the vectors of live records this process has not seen fill the mirror."""
        def read(conn: Any) -> tuple[int, list[Any], list[Any]]:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                (version,) = conn.execute(self._q("SELECT value FROM {s}.meta WHERE key = 'seq'")).fetchone()
                rows = conn.execute(self._q(
                    "SELECT memory_id, namespace, slot, lifecycle_state, seq, data FROM {s}.records "
                    "WHERE seq > %s ORDER BY seq, memory_id, namespace"), (int(seq),)).fetchall()
                wanted = [r[2] for r in rows if r[2] is not None and not self._has(r[2])]
                vectors = []
                for start in range(0, len(wanted), 20_000):
                    vectors += conn.cursor(binary=True).execute(self._q(
                        "SELECT slot, embedding FROM {s}.records WHERE slot = ANY(%s)"),
                        (wanted[start:start + 20_000],)).fetchall()
            return int(version), rows, vectors

        with self.lock:
            version, rows, vectors = self.db.read("reading the changes", read)
            for slot, v in vectors:
                self.mirror_set(int(slot), as_array(v))
            entries = []
            for memory_id, namespace, slot, state, row_seq, data in rows:
                entry = index_entry(json.loads(data), memory_id=from_db(memory_id),
                                    namespace=from_db(namespace), slot=slot, lifecycle_state=state,
                                    seq=int(row_seq))
                key = (entry.namespace, entry.memory_id)
                old = self._slots.get(key)
                if old is not None and old != slot:  # replaced or forgotten (in any process):
                    self.mirror_set(old, None)       # the old vector leaves this mirror too
                if entry.alive:
                    self._slots[key] = slot
                    self._rows_known = max(self._rows_known, slot + 1)
                else:
                    self._slots.pop(key, None)
                entries.append(entry)
        return version, entries

    def _has(self, slot: int) -> bool:
        return slot < len(self._have) and bool(self._have[slot])

    def scan_markers(self, namespaces: Iterable[str]) -> list[tuple[str, tuple[Any, ...]]]:
        """(memory_id, markers) of live records with markers in ``namespaces``."""
        ns = sorted(set(namespaces))
        if not ns:
            return []
        with self.lock:
            rows = self._rows("SELECT memory_id, namespace, data FROM {s}.records WHERE namespace = ANY(%s) "
                              "AND text IS NOT NULL", ([to_db(n) for n in ns],))
        out = []
        for memory_id, _namespace, data in sorted(rows, key=lambda r: (from_db(r[0]), from_db(r[1]))):
            markers = json.loads(data).get("markers") or ()
            if markers:
                out.append((from_db(memory_id), tuple(markers)))
        return out

    def verify(self) -> list[str]:
        """Integrity problems (empty when sound): live records without text or vector,
        forgotten records that kept content, vectors that are not unit, slots beyond the slot
        counter, rows written at a version beyond the store's, signatures that do not match a
        record's metadata (the search filter would misjudge it), audit events not yet moved."""
        problems: list[str] = []
        with self.lock:
            meta = dict(self._rows("SELECT key, value FROM {s}.meta"))
            rows = self._rows("SELECT memory_id, namespace, text, revision, lifecycle_state, data, slot, "
                              "seq, sig, embedding FROM {s}.records", binary=True)
            pending = self._rows("SELECT count(*) FROM {s}.outbox")[0][0]
        for memory_id, namespace, text, revision, state, data, slot, seq, sig, v in rows:
            name = f"{from_db(namespace)}/{from_db(memory_id)}"
            raw = json.loads(data)
            if seq > int(meta["seq"]):
                problems.append(f"{name}: written at version {seq}, the store's version is {meta['seq']}")
            if state == "forgotten":
                if text is not None or v is not None or slot is not None or raw.get("markers") \
                        or raw.get("attributes"):
                    problems.append(f"{name}: forgotten but kept its text, markers, metadata or vector")
                continue
            if text is None or v is None or slot is None:
                problems.append(f"{name}: half record (text={text is not None}, slot={slot})")
                continue
            if slot >= int(meta["next_slot"]):
                problems.append(f"{name}: slot {slot} is beyond the slot counter {meta['next_slot']}")
            if abs(float(np.linalg.norm(as_array(v).astype(np.float64))) - 1.0) > 1e-4:
                problems.append(f"{name}: stored vector is not unit-normalised")
            memory = self._to_memory((memory_id, namespace, text, revision, state, data))
            if record_signature(memory) != sig:
                problems.append(f"{name}: signature column does not match its metadata")
        if pending and self.audit is not None and not self._audit_table:
            problems.append(f"{pending} audit event(s) not yet moved to the audit log")
        return problems

    # -- the suppression list: tables ``suppressed`` and ``suppression_keys`` ----------------
    # (the store's own key is the ``suppression_key`` row of ``meta``; each statement runs in the
    # write's transaction when there is one)

    def suppression_key(self) -> bytes:
        return self._key

    def foreign_keys(self) -> dict[str, bytes]:
        return {k: bytes.fromhex(v) for k, v in self._rows("SELECT key_id, key FROM {s}.suppression_keys")}

    def put_foreign_keys(self, keys: Mapping[str, bytes]) -> None:
        self._run_many("INSERT INTO {s}.suppression_keys VALUES (%s, %s) ON CONFLICT DO NOTHING",
                       [(k, v.hex()) for k, v in keys.items()])

    def suppressed(self, namespaces: Optional[Iterable[str]]) -> list[Suppressed]:
        if namespaces is None:
            rows = self._rows(f"SELECT {_SUPPRESSED_COLUMNS} FROM {{s}}.suppressed")
        else:
            rows = self._rows(f"SELECT {_SUPPRESSED_COLUMNS} FROM {{s}}.suppressed WHERE namespace = ANY(%s)",
                              ([to_db(n) for n in sorted(set(namespaces))],))
        return [Suppressed(from_db(a), b, c, d, from_db(e), f, g, bool(h)) for a, b, c, d, e, f, g, h in rows]

    def put_suppressed(self, entries: Iterable[Suppressed]) -> None:
        self._run_many(
            f"INSERT INTO {{s}}.suppressed ({_SUPPRESSED_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT DO NOTHING",
            [(to_db(e.namespace), e.digest, e.n, e.kind, to_db(e.memory_id), e.version, e.key_id,
              bool(e.whole)) for e in entries])

    def lift_suppressed(self, entries: Iterable[Suppressed]) -> None:
        self._run_many("DELETE FROM {s}.suppressed WHERE namespace = %s AND digest = %s AND memory_id = %s",
                       [(to_db(e.namespace), e.digest, to_db(e.memory_id)) for e in entries])


__all__ = ["PostgresBackend"]
