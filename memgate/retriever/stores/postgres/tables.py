"""``PostgresStore``'s tables in its own PostgreSQL schema: the store format, the DDL (every
identifier through :mod:`psycopg.sql`), creating and migrating them under an advisory lock, and
how text values travel (PostgreSQL ``text`` cannot hold U+0000).

Tables (schema ``<name>``, default ``memgate``):

``meta``              key -> value: ``format``, ``encoder`` (JSON), ``seq`` (the store version:
                      the head of the change log, and the row every write locks first, so writes
                      commit in ``seq`` order), ``next_slot``, ``suppression_key``
``records``           one row per record, keyed by ``(namespace, memory_id)``: ``text``,
                      ``revision``, ``seq`` (of its last write: the change log), ``lifecycle_state``,
                      ``sig`` (its Kleene signature digest), ``slot`` and ``embedding``
                      (``vector(dim)``; NULL once forgotten), ``data`` (the rest, JSON)
``derivations``       ``(child_ns, child) -> (parent_ns, parent)`` links
``suppressed``        the suppression list (keyed hashes of forgotten content)
``suppression_keys``  keys of imported suppression entries
``outbox``            audit events committed with their write, moved to an audit log file after it
``erase_pages``       pages of ``records`` that held erased row versions (one row per write
                      and page), until the eraser has pruned and scrubbed them (:mod:`memgate.retriever.stores.postgres.eraser`);
                      ``records.pad`` (always NULL in a committed row) is its scrubbing column
``audit``             the audit trail kept in the database (when no audit log file is given):
                      one row per event, ``id`` in commit order of the writes that made it

Format 2 (``memgate-postgres/2``) added the ``audit`` table; a format 1 schema gets it when a
store opens it (:data:`_MIGRATIONS`). Both formats keep ``records.embedding`` in the row
(``STORAGE MAIN`` and a ``toast_tuple_target`` of a page: a row that fits a page is never moved
to the TOAST table, whose pruned chunks kept a forgotten vector in its free space; a wider one,
``dim`` over about 2,000, is compressed first and moved out only as the last resort).

Indexes: ``records (seq)`` (the change log), ``records (memory_id)``, ``records (namespace,
lifecycle_state)``, and an HNSW index ``records USING hnsw (embedding vector_cosine_ops)`` for
the approximate search (for ``dim`` <= 2000, pgvector's limit for an indexed ``vector``).
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from memgate.retriever.stores.base import format_error
from memgate.retriever.stores.postgres.connection import sql

POSTGRES_FORMAT = "memgate-postgres/2"
OLDER_FORMATS: tuple[Any, ...] = ("memgate-postgres/1",)  # migrated on open (_MIGRATIONS)
HNSW_MAX_DIM = 2000  # pgvector's limit for an HNSW index over `vector`
SCHEMA_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_LOCK_KEY = "memgate-postgres-schema:"

# every statement takes the schema as {s} (an Identifier) and the dimension as {dim} (a Literal)
_DDL = (
    "CREATE SCHEMA IF NOT EXISTS {s}",
    "CREATE TABLE {s}.meta (key text PRIMARY KEY, value text NOT NULL)",
    """CREATE TABLE {s}.records (
        namespace text COLLATE "C" NOT NULL,
        memory_id text COLLATE "C" NOT NULL,
        text text,
        revision integer NOT NULL,
        seq bigint NOT NULL,
        lifecycle_state text NOT NULL,
        sig text NOT NULL,
        slot bigint UNIQUE,
        embedding vector({dim}),
        data text NOT NULL,
        PRIMARY KEY (namespace, memory_id),
        CHECK ((slot IS NULL) = (embedding IS NULL))
    )""",
    "CREATE INDEX records_seq ON {s}.records (seq)",
    "CREATE INDEX records_id ON {s}.records (memory_id)",
    "CREATE INDEX records_ns_state ON {s}.records (namespace, lifecycle_state)",
    """CREATE TABLE {s}.derivations (
        child_ns text COLLATE "C" NOT NULL, child text COLLATE "C" NOT NULL,
        parent_ns text COLLATE "C" NOT NULL, parent text COLLATE "C" NOT NULL,
        PRIMARY KEY (child_ns, child, parent_ns, parent)
    )""",
    "CREATE INDEX derivations_parent ON {s}.derivations (parent_ns, parent)",
    """CREATE TABLE {s}.suppressed (
        namespace text COLLATE "C" NOT NULL, digest text NOT NULL, n integer NOT NULL,
        kind text NOT NULL, memory_id text COLLATE "C" NOT NULL, version integer NOT NULL,
        key_id text NOT NULL, whole boolean NOT NULL,
        PRIMARY KEY (namespace, digest, memory_id)
    )""",
    "CREATE TABLE {s}.suppression_keys (key_id text PRIMARY KEY, key text NOT NULL)",
    "CREATE TABLE {s}.outbox (id bigserial PRIMARY KEY, event text NOT NULL)",
)
# format 2: the audit trail in the database, and the vector kept in the row (the same statements
# create a new schema's and migrate a format 1 schema)
_FORMAT_2 = (
    "CREATE TABLE IF NOT EXISTS {s}.audit (id bigserial PRIMARY KEY, event text NOT NULL)",
    "ALTER TABLE {s}.records ALTER COLUMN embedding SET STORAGE MAIN",
    "ALTER TABLE {s}.records SET (toast_tuple_target = 8160)",
    "ALTER TABLE {s}.records ADD COLUMN IF NOT EXISTS pad bytea",
    "ALTER TABLE {s}.records ALTER COLUMN pad SET STORAGE PLAIN",
    "CREATE TABLE IF NOT EXISTS {s}.erase_pages (id bigserial PRIMARY KEY, page bigint NOT NULL)",
)
_HNSW = "CREATE INDEX records_embedding ON {s}.records USING hnsw (embedding vector_cosine_ops)"

# format -> (the next format, the statements that bring a schema there). A new format adds its
# predecessor here and to OLDER_FORMATS.
_MIGRATIONS: dict[str, tuple[str, tuple[Any, ...]]] = {"memgate-postgres/1": ("memgate-postgres/2", _FORMAT_2)}


def check_schema_name(schema: Any) -> str:
    if not isinstance(schema, str) or not SCHEMA_RE.fullmatch(schema):
        raise ValueError(f"field 'schema' must be a PostgreSQL identifier of letters, digits and "
                         f"'_' (at most 63, not starting with a digit), got {schema!r:.80}")
    return schema


def statement(template: str, schema: str, dim: int = 0) -> sql.Composed:
    return sql.SQL(template).format(s=sql.Identifier(schema), dim=sql.Literal(int(dim)))


# PostgreSQL text holds no U+0000: text values are stored with "\" doubled and U+0000 as "\0"
# (injective, so equality and uniqueness are those of the original strings).
_DECODE = re.compile(r"\\([\\0])")


def to_db(value: Any) -> Any:
    if not isinstance(value, str) or ("\\" not in value and "\x00" not in value):
        return value
    return value.replace("\\", "\\\\").replace("\x00", "\\0")


def from_db(value: Any) -> Any:
    if not isinstance(value, str) or "\\" not in value:
        return value
    return _DECODE.sub(lambda m: "\x00" if m.group(1) == "0" else "\\", value)


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)  # (U+0000 leaves as \u0000)


def as_array(value: Any) -> np.ndarray:
    """A stored ``vector`` as float32 (pgvector's binary loader gives a ``Vector``)."""
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32)


def ensure_vector_extension(conn: Any) -> str:
    """The schema holding pgvector's types and operators (``CREATE EXTENSION vector`` when it is
    available but not installed: that needs the right to create extensions)."""
    row = conn.execute("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n "
                       "ON n.oid = e.extnamespace WHERE e.extname = 'vector'").fetchone()
    if row is None:
        conn.execute("SELECT pg_advisory_lock(hashtext('memgate-create-extension-vector'))")
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext('memgate-create-extension-vector'))")
        row = conn.execute("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n "
                           "ON n.oid = e.extnamespace WHERE e.extname = 'vector'").fetchone()
    return str(row[0])


def open_schema(conn: Any, schema: str, identity: Any, create_meta: dict[str, Any]) -> dict[str, Any]:
    """Create the store's tables (when ``identity`` is given and the schema holds no store) or
    migrate an older format, all in one transaction under an advisory lock (two processes
    opening a new store at once create it once); returns ``meta``. A newer format is refused."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (_LOCK_KEY + schema,))
        exists = conn.execute("SELECT 1 FROM information_schema.tables WHERE table_schema = %s "
                              "AND table_name = 'meta'", (schema,)).fetchone() is not None
        if not exists:
            if identity is None:
                raise ValueError(f"PostgreSQL schema {schema!r} holds no store yet: pass the encoder "
                                 "identity to create one")
            dim = int(identity["dim"])
            for template in _DDL + _FORMAT_2 + ((_HNSW,) if dim <= HNSW_MAX_DIM else ()):
                conn.execute(statement(template, schema, dim))
            conn.cursor().executemany(
                statement("INSERT INTO {s}.meta VALUES (%s, %s)", schema),
                [("format", POSTGRES_FORMAT), ("encoder", dumps(identity)), *create_meta.items()])
        meta = dict(conn.execute(statement("SELECT key, value FROM {s}.meta", schema)).fetchall())
        fmt = meta.get("format")
        while fmt in _MIGRATIONS:  # (one transaction: a failed step leaves the old format)
            following, templates = _MIGRATIONS[fmt]
            for template in templates:
                conn.execute(statement(template, schema))
            conn.execute(statement("INSERT INTO {s}.meta VALUES ('migrated_from', %s) ON CONFLICT "
                                   "(key) DO UPDATE SET value = excluded.value", schema), (fmt,))
            conn.execute(statement("UPDATE {s}.meta SET value = %s WHERE key = 'format'", schema),
                         (following,))
            meta.update(format=following, migrated_from=fmt)
            fmt = following
        if fmt != POSTGRES_FORMAT:
            raise format_error(f"PostgreSQL schema {schema!r}", fmt, POSTGRES_FORMAT, OLDER_FORMATS)
    return meta


__all__ = ["HNSW_MAX_DIM", "as_array", "OLDER_FORMATS", "POSTGRES_FORMAT", "check_schema_name", "dumps",
           "ensure_vector_extension", "from_db", "open_schema", "statement", "to_db"]
