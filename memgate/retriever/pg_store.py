"""``PostgresStore``: the ``MemoryStore`` protocol on PostgreSQL with pgvector (through psycopg 3).

One store is one PostgreSQL schema (default ``memgate``) in a database the caller names by URL;
its tables are :mod:`memgate.retriever.pg_schema`. Several processes may open the same store:

- **Transactions are PostgreSQL's.** A write (``add_many`` batch, update, correct, retire,
  forget, import) is one transaction: all or nothing, durable when it returns (the server's
  ``synchronous_commit``). Every write first locks the ``seq`` row of ``meta`` (``SELECT ...
  FOR UPDATE``), so writes from any number of processes run one after another and commit in
  version order; compare-and-set is a conditional ``UPDATE ... WHERE revision = %s`` on top of
  the checks the shared semantics make inside that transaction, so two racing writers based on
  one revision have exactly one winner.
- **Forget** erases the record's text, markers, metadata, vector and derivation links (and those
  of every record derived from it) in the transaction that writes the directive and the
  suppression entries. PostgreSQL's MVCC leaves the old row versions' bytes in the table's data
  files (and the WAL) until ``VACUUM`` reclaims them; no query can read them after the commit.
- **Many processes, one database.** ``version()`` is the ``seq`` row (one indexed read);
  ``changes_since(seq)`` reads the records written after ``seq`` (``records.seq`` is the change
  log: monotone because writes commit in ``seq`` order) in one snapshot, with the vectors this
  process has not seen yet, which fill the local mirror ``vector_matrix()`` returns.
- **Search** (:mod:`memgate.retriever.pg_search`) is one SQL query whose ``WHERE`` holds the
  namespace restriction and the Kleene exclusions (lifecycle states, signatures, ids), applied
  before its ``LIMIT``.
- **Errors** never hold the URL's password: database errors become
  :class:`memgate.retriever.StoreError` (:class:`StoreUnavailableError` when the server cannot be
  reached; the next call reconnects), their text scrubbed (:mod:`memgate.retriever.pg_connection`).

The write semantics (CAS, supersession, review flags, forget, suppression) are
:class:`memgate.retriever.semantics.RecordSemantics`, shared with the other stores.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from typing import Any, Optional

import numpy as np

from memgate.retriever.audit import AuditLog, utc_now
from memgate.retriever.pg_connection import Connection, StoreUnavailableError, psycopg, register_vector, sql
from memgate.retriever.pg_schema import (
    as_array,
    check_schema_name,
    dumps,
    ensure_vector_extension,
    from_db,
    open_schema,
    statement,
    to_db,
)
from memgate.retriever.pg_search import PostgresSearch
from memgate.retriever.pg_suppression import PostgresSuppression
from memgate.retriever.schema import (
    AmbiguousMemoryError,
    StaleRevisionError,
    StoredMemory,
    StoreError,
    UnknownMemoryError,
)
from memgate.retriever.semantics import (
    ENCODER_KEYS,
    IndexEntry,
    RecordSemantics,
    check_namespace_arg,
    index_entry,
    normalize_identity,
    record_signature,
)
from memgate.retriever.suppression import new_key

_ROW_FIELDS = ("memory_id", "namespace", "text", "revision", "lifecycle_state")
_COLUMNS = "memory_id, namespace, text, revision, lifecycle_state, data"
URL_ENV = "MEMGATE_POSTGRES_URL"
log = logging.getLogger("memgate")
_said: set[str] = set()


def _say_once(key: str, message: str) -> None:
    if key not in _said:
        _said.add(key)
        log.warning(message)


class PostgresStore(PostgresSuppression, PostgresSearch, RecordSemantics):
    """Records and vectors in one PostgreSQL schema (module docstring).

    ``PostgresStore(url, encoder_identity, schema="memgate")`` creates the store's tables when
    the schema holds none (the identity, with ``dim``, is then required; ``CREATE EXTENSION
    vector`` runs when pgvector is not installed in the database yet) or opens them and refuses
    a different identity or a newer format. ``audit`` is an :class:`AuditLog` or ``None``
    (processes sharing a store should share one log file). ``vacuum_on_forget`` (default): each
    forget is followed by a ``VACUUM`` of the records table, so the erased row versions leave
    the data files at once rather than at the next autovacuum.
    """

    filters_signatures = True  # search(exclude_signatures=): the retriever's Kleene filter by digest

    def __init__(self, url: str, encoder_identity: Any = None, *, schema: str = "memgate",
                 audit: AuditLog | None = None, clock: Callable[[], str] = utc_now,
                 vacuum_on_forget: bool = True):
        self.schema = check_schema_name(schema)
        self.vacuum_on_forget = bool(vacuum_on_forget)
        self.clock = clock
        self._lock = threading.RLock()
        self._fault_hook: Optional[Callable[[str], None]] = None  # crash tests: called per stage
        self._tx: Any = None  # the write's connection while a transaction is open
        self._sql: dict[str, Any] = {}
        self._vector_schema: Optional[str] = None
        self._db = Connection(url, on_connect=self._prepare, lock=self._lock)
        self.where = self._db.where  # the URL without its password
        identity = None if encoder_identity is None else normalize_identity(encoder_identity)
        try:
            with self._db.session("opening the store") as conn:
                meta = open_schema(conn, self.schema, identity, {
                    "seq": "0", "next_slot": "0", "suppression_key": new_key()})
        except BaseException:
            self._db.close()
            raise
        self.encoder_identity: dict = {k: json.loads(meta["encoder"])[k] for k in ENCODER_KEYS}
        self.dim: int = int(self.encoder_identity["dim"])
        self._key = bytes.fromhex(meta["suppression_key"])
        if encoder_identity is not None:
            try:
                self.check_encoder(encoder_identity, "open the store")
            except BaseException:
                self._db.close()
                raise
        self.audit: Optional[AuditLog] = audit or None
        self._mirror = np.zeros((0, self.dim), dtype=np.float32)  # slot -> vector (a cache)
        self._have = np.zeros(0, dtype=bool)  # slots whose vector the mirror holds
        self._rows_known = 0  # mirror rows vector_matrix() exposes (highest slot seen + 1)
        self._slots: dict[tuple, int] = {}  # (namespace, id) -> its slot in the mirror
        self.flush_outbox()

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
            _say_once(f"iterative-scan:{self.where}", f"{self._describe()}: pgvector before 0.8 has no "
                      "iterative index scan; an approximate search with a selective filter may return "
                      "fewer than k records (exact search is unaffected)")

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._db.close()

    def __enter__(self) -> "PostgresStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _describe(self) -> str:
        return f"the PostgreSQL store {self.schema!r} at {self.where}"

    def _hook(self, stage: str) -> None:
        if self._fault_hook is not None:
            self._fault_hook(stage)

    def _q(self, template: str) -> Any:
        composed = self._sql.get(template)
        if composed is None:
            composed = self._sql[template] = statement(template, self.schema)
        return composed

    def _rows(self, template: str, params: Any = (), *, binary: bool = False) -> list:
        """Rows of one statement: inside the open write's transaction, else on its own (a read,
        retried once on a connection found broken)."""
        if self._tx is not None:
            return self._tx.cursor(binary=binary).execute(self._q(template), params).fetchall()
        return self._db.read("reading", lambda conn: conn.cursor(binary=binary).execute(
            self._q(template), params).fetchall())

    def _run(self, template: str, params: Any = ()) -> int:
        """Execute one statement of the open write; returns the rows it changed."""
        return self._tx.execute(self._q(template), params).rowcount

    def _run_many(self, template: str, params: list) -> None:
        if params:
            self._tx.cursor().executemany(self._q(template), params)

    @contextmanager
    def _write(self):
        """One transaction, after the ``seq`` row's lock (writes commit in version order); the
        counters are read under the lock and written back before the commit."""
        with self._db.session("writing") as conn:
            with conn.transaction():
                self._tx = conn
                try:
                    rows = conn.execute(self._q(
                        "SELECT key, value FROM {s}.meta WHERE key IN ('seq', 'next_slot') "
                        "ORDER BY key FOR UPDATE")).fetchall()
                    self._counters = {k: int(v) for k, v in rows}
                    start = dict(self._counters)
                    self._events: list[dict] = []
                    self._born: dict[int, Optional[np.ndarray]] = {}
                    self._erased = False
                    yield
                    self._run_many("UPDATE {s}.meta SET value = %s WHERE key = %s",
                                   [(str(v), k) for k, v in self._counters.items() if v != start[k]])
                    if self.audit is not None and self._events:
                        self._run_many("INSERT INTO {s}.outbox (event) VALUES (%s)",
                                       [(json.dumps(e),) for e in self._events])
                    self._hook("before_commit")
                finally:
                    self._tx = None
            for slot, v in self._born.items():  # committed: the mirror takes the new vectors
                self._mirror_set(slot, v)
        self._hook("after_commit")
        if self._erased and self.vacuum_on_forget:
            self._vacuum()
        self.flush_outbox()

    def _vacuum(self) -> None:
        """``VACUUM (INDEX_CLEANUP ON)`` the records table after a forget: the dead row versions
        holding the erased text and vector are pruned (no query, index scan or live row reaches
        them) and their entries leave every index, the HNSW graph's copy of the vector included
        (a plain VACUUM skips the indexes while under 2 % of the table's pages hold dead rows,
        which at 100,000 records is always). PostgreSQL does not zero the space it frees: the
        pruned bytes stay in the pages' free space until reused, which :meth:`compact` ends; the
        WAL and backups keep them as long as the operator does."""
        try:
            with self._db.session("vacuuming after a forget") as conn:
                conn.execute(self._q("VACUUM (INDEX_CLEANUP ON) {s}.records"))
        except StoreError as exc:  # (the forget is committed: an autovacuum prunes them later)
            _say_once(f"vacuum:{self.where}", f"{exc}; the erased row versions stay in the data files "
                      "until the next (auto)vacuum")

    def compact(self) -> None:
        """``VACUUM FULL`` the store's tables: PostgreSQL rewrites them (and rebuilds their
        indexes) into new files, so the bytes of erased row versions that a plain VACUUM left in
        pages' free space are in no data file any more (the WAL and backups keep them as long as
        the operator does). Takes an exclusive lock on each table while it runs (writers and
        searches wait): an operator's maintenance step, e.g. after a batch of forget requests."""
        with self._lock:
            with self._db.session("compacting the store") as conn:
                for table in ("records", "derivations", "suppressed", "outbox"):
                    conn.execute(self._q(f"VACUUM FULL {{s}}.{table}"))

    def _bump(self, key: str) -> int:
        self._counters[key] += 1
        return self._counters[key]

    def flush_outbox(self) -> None:
        """Move committed audit events from the outbox to the audit log (idempotent; events of
        other processes' writes are taken once, by whichever process flushes first)."""
        if self.audit is None:
            return
        with self._db.session("moving audit events") as conn:
            with conn.transaction():
                rows = conn.execute(self._q(
                    "SELECT id, event FROM {s}.outbox ORDER BY id FOR UPDATE SKIP LOCKED")).fetchall()
                if rows:
                    self.audit.append_many(json.loads(e) for _, e in rows)
                    self._hook("after_audit_append")
                    conn.execute(self._q("DELETE FROM {s}.outbox WHERE id = ANY(%s)"),
                                 ([i for i, _ in rows],))

    # -- vectors ------------------------------------------------------------------------------

    def _mirror_set(self, slot: int, v: Optional[np.ndarray]) -> None:
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
        with self._lock:
            view = self._mirror[: self._rows_known]
            view.flags.writeable = False
            return view

    def vectors_for(self, memory_ids: Iterable[str], *,
                    namespace: Optional[str] = None) -> dict[str, np.ndarray]:
        """Copies of the stored vectors of live records (forgotten ones have none)."""
        out = {}
        with self._lock:
            for memory_id in dict.fromkeys(memory_ids):
                try:
                    ns = self._resolve(memory_id, namespace)
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
    def _to_memory(row) -> StoredMemory:
        memory_id, namespace, text, revision, state, data = row
        raw = json.loads(data)
        raw.update(memory_id=from_db(memory_id), namespace=from_db(namespace), text=from_db(text),
                   revision=revision, lifecycle_state=state)
        return StoredMemory.from_dict(raw)

    @staticmethod
    def _data(memory: StoredMemory) -> str:
        return dumps({k: v for k, v in memory.to_dict().items() if k not in _ROW_FIELDS})

    def _load(self, memory_id: str, namespace: str) -> StoredMemory:
        rows = self._rows(f"SELECT {_COLUMNS} FROM {{s}}.records WHERE namespace = %s AND memory_id = %s",
                          (to_db(namespace), to_db(memory_id)))
        if not rows:
            raise UnknownMemoryError(f"no memory with id {memory_id!r} in namespace {namespace!r}")
        return self._to_memory(rows[0])

    def _exists(self, memory_id: str, namespace: str) -> bool:
        return bool(self._rows("SELECT 1 FROM {s}.records WHERE namespace = %s AND memory_id = %s",
                               (to_db(namespace), to_db(memory_id))))

    def _namespaces_of(self, memory_id: str) -> list[str]:
        return sorted(from_db(n) for (n,) in self._rows(
            "SELECT namespace FROM {s}.records WHERE memory_id = %s", (to_db(memory_id),)))

    def _children(self, namespace: str, parent: str) -> list[tuple]:
        rows = self._rows("SELECT child_ns, child FROM {s}.derivations WHERE parent_ns = %s AND parent = %s",
                          (to_db(namespace), to_db(parent)))
        return sorted(((from_db(n), from_db(c)) for n, c in rows), key=lambda k: (k[1], k[0]))

    # -- write primitives (the semantics are memgate.retriever.semantics.RecordSemantics) -----

    def _insert(self, memory: StoredMemory, seq: int, slot: Optional[int], v: Optional[np.ndarray],
                parents: Iterable[tuple]) -> None:
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
        slot = self._bump("next_slot") - 1
        self._born[slot] = v
        return slot

    def _put_new(self, memory: StoredMemory, seq: int, v: np.ndarray, parents: Iterable[tuple] = ()) -> int:
        slot = self._new_slot(v)
        self._insert(memory, seq, slot, v, parents)
        return slot

    def _put(self, memory: StoredMemory, seq: int) -> None:
        self._save(memory, seq)

    def _put_new_vector(self, memory: StoredMemory, seq: int, v: np.ndarray) -> int:
        old_slot = self._slot_of(memory)
        slot = self._new_slot(v)
        self._save(memory, seq, (slot, v))
        if old_slot is not None:
            self._born[old_slot] = None  # (the replaced vector leaves the mirror at the commit)
        return slot

    def _put_tombstone(self, tomb: StoredMemory, seq: int) -> None:
        self._erased = True  # (VACUUM after the commit: the old row version's bytes go too)
        old_slot = self._slot_of(tomb)
        self._save(tomb, seq, (None, None))
        self._run("DELETE FROM {s}.derivations WHERE child_ns = %s AND child = %s",
                  (to_db(tomb.namespace), to_db(tomb.memory_id)))
        if old_slot is not None:
            self._born[old_slot] = None

    def _put_restored_tombstone(self, tomb: StoredMemory, seq: int) -> None:
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
        with self._lock:
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

    def __len__(self) -> int:
        with self._lock:
            return int(self._rows("SELECT count(*) FROM {s}.records")[0][0])

    def ids(self) -> list[str]:
        """Every record's id, sorted (an id used in several namespaces appears once per record)."""
        with self._lock:
            rows = self._rows("SELECT memory_id, namespace FROM {s}.records")
        return [mid for mid, _ in sorted((from_db(m), from_db(n)) for m, n in rows)]

    def version(self) -> int:
        with self._lock:
            return int(self._rows("SELECT value FROM {s}.meta WHERE key = 'seq'")[0][0])

    def changes_since(self, seq: int) -> tuple[int, list[IndexEntry]]:
        """Index entries of every record written after ``seq`` and the current version, read in
        one snapshot; the vectors of live records this process has not seen fill the mirror."""
        def read(conn):
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

        with self._lock:
            version, rows, vectors = self._db.read("reading the changes", read)
            for slot, v in vectors:
                self._mirror_set(int(slot), as_array(v))
            entries = []
            for memory_id, namespace, slot, state, row_seq, data in rows:
                entry = index_entry(json.loads(data), memory_id=from_db(memory_id),
                                    namespace=from_db(namespace), slot=slot, lifecycle_state=state,
                                    seq=int(row_seq))
                key = (entry.namespace, entry.memory_id)
                old = self._slots.get(key)
                if old is not None and old != slot:  # replaced or forgotten (in any process):
                    self._mirror_set(old, None)       # the old vector leaves this mirror too
                if entry.alive:
                    self._slots[key] = slot
                    self._rows_known = max(self._rows_known, slot + 1)
                else:
                    self._slots.pop(key, None)
                entries.append(entry)
        return version, entries

    def _has(self, slot: int) -> bool:
        return slot < len(self._have) and bool(self._have[slot])

    def scan_markers(self, namespaces: Iterable[str]) -> list[tuple[str, tuple]]:
        """(memory_id, markers) of live records with markers in ``namespaces``."""
        ns = sorted(set(namespaces))
        if not ns:
            return []
        with self._lock:
            rows = self._rows("SELECT memory_id, namespace, data FROM {s}.records WHERE namespace = ANY(%s) "
                              "AND text IS NOT NULL", ([to_db(n) for n in ns],))
        out = []
        for memory_id, namespace, data in sorted(rows, key=lambda r: (from_db(r[0]), from_db(r[1]))):
            markers = json.loads(data).get("markers") or ()
            if markers:
                out.append((from_db(memory_id), tuple(markers)))
        return out


__all__ = ["URL_ENV", "PostgresStore", "StoreUnavailableError", "record_signature"]
