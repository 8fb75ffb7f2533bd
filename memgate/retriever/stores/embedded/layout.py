"""The embedded store's files on disk: their names, the store format, the SQLite tables and their
migrations from formats 1 and 2."""

from __future__ import annotations

STORE_FORMAT = "memgate-store/3"
OLDER_FORMATS = ("memgate-store/1", "memgate-store/2")
DB_FILE = "store.sqlite"
VECTOR_FILE = "vectors.f32"
AUDIT_FILE = "audit.jsonl"

_TABLES = """
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
{tables};
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


__all__ = ["AUDIT_FILE", "DB_FILE", "OLDER_FORMATS", "STORE_FORMAT", "VECTOR_FILE"]
