"""``EmbeddedStore``'s files on disk: their names, the store format, the SQLite schema and its
format-1 migration, and the integrity check over them (``verify``, a mixin of
:class:`memgate.retriever.EmbeddedStore`)."""

from __future__ import annotations

import zlib

import numpy as np

STORE_FORMAT = "memgate-store/3"
OLDER_FORMATS = ("memgate-store/1", "memgate-store/2")
DB_FILE = "store.sqlite"
VECTOR_FILE = "vectors.f32"
AUDIT_FILE = "audit.jsonl"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    namespace TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    text TEXT,
    slot INTEGER UNIQUE,
    vec_crc INTEGER,
    revision INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    lifecycle_state TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (namespace, memory_id)
);
CREATE INDEX IF NOT EXISTS records_seq ON records (seq);
CREATE INDEX IF NOT EXISTS records_id ON records (memory_id);
CREATE TABLE IF NOT EXISTS derivations (
    child_ns TEXT NOT NULL, child TEXT NOT NULL, parent_ns TEXT NOT NULL, parent TEXT NOT NULL,
    PRIMARY KEY (child_ns, child, parent_ns, parent)
);
CREATE INDEX IF NOT EXISTS derivations_parent ON derivations (parent_ns, parent);
CREATE TABLE IF NOT EXISTS purge (slot INTEGER PRIMARY KEY);
CREATE TABLE IF NOT EXISTS outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, event TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS suppressed (
    namespace TEXT NOT NULL, digest TEXT NOT NULL, n INTEGER NOT NULL, kind TEXT NOT NULL,
    memory_id TEXT NOT NULL, version INTEGER NOT NULL DEFAULT 1, key_id TEXT NOT NULL DEFAULT '',
    whole INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (namespace, digest, memory_id)
);
CREATE TABLE IF NOT EXISTS suppression_keys (key_id TEXT PRIMARY KEY, key TEXT NOT NULL);
"""

# Format 1 -> 2: records keyed by (namespace, memory_id), derivation links with namespaces, the
# suppression list (records forgotten under format 1 have no text left to hash: none for them).
_MIGRATE_1_TO_2 = """
DROP INDEX IF EXISTS records_seq;
DROP INDEX IF EXISTS derivations_parent;
ALTER TABLE records RENAME TO records_v1;
ALTER TABLE derivations RENAME TO derivations_v1;
{schema};
INSERT INTO records SELECT namespace, memory_id, text, slot, vec_crc, revision, seq,
    lifecycle_state, data FROM records_v1;
INSERT INTO derivations SELECT c.namespace, d.child, p.namespace, d.parent FROM derivations_v1 d
    JOIN records_v1 c ON c.memory_id = d.child JOIN records_v1 p ON p.memory_id = d.parent;
DROP TABLE derivations_v1;
DROP TABLE records_v1
"""

# Format 2 -> 3: each suppression entry records its normalisation version (the entries already
# there are version 1), the key it was made under ('' = the store's own) and whether it matches
# whole texts only; keys of imported suppression entries get a table.
_MIGRATE_2_TO_3 = """
ALTER TABLE suppressed ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE suppressed ADD COLUMN key_id TEXT NOT NULL DEFAULT '';
ALTER TABLE suppressed ADD COLUMN whole INTEGER NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS suppression_keys (key_id TEXT PRIMARY KEY, key TEXT NOT NULL)
"""

# Columns of ``records`` that are not kept inside the ``data`` JSON.
_ROW_FIELDS = ("memory_id", "namespace", "text", "revision", "lifecycle_state")
_COLUMNS = "memory_id, namespace, text, revision, lifecycle_state, data"


class StoreIntegrity:
    """``verify()`` over the records table, the vector file and the purge queue."""

    def verify(self) -> list[str]:
        """Integrity problems (empty when sound): vectors that do not match their CRC, records
        without text or vector that are not forgotten, forgotten records that kept either,
        slots beyond the vector file or the slot counter, purges still pending."""
        problems = []
        truncated = self._vector_file_problem()
        if truncated:
            problems.append(f"{self._vpath}: {truncated}")
        matrix = self.vector_matrix()
        with self._lock:
            rows = self._db.execute(
                "SELECT namespace, memory_id, text, slot, vec_crc, lifecycle_state FROM records").fetchall()
            pending = self._db.execute("SELECT COUNT(*) FROM purge").fetchone()[0]
            next_slot = int(self._meta()["next_slot"])
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


__all__ = ["AUDIT_FILE", "DB_FILE", "OLDER_FORMATS", "STORE_FORMAT", "VECTOR_FILE", "StoreIntegrity"]
