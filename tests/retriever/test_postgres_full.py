"""PostgreSQL at full strength (issue 47, item 5) against the session's real pgserver: the audit
trail in the schema's ``audit`` table (``history`` with only ``url=``, ``memgate audit --url``,
export, verify) and the migration of a format 1 schema; the erasure window (a forget returns
before the table pass; the forgotten text and vector leave every data file of the schema within
5 s, also when a snapshot held them past the first pass; ``erase``, the path a sweep or a reset
reuses); ``LocalServer`` stopping its postmaster when its process is terminated."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import psycopg
import pytest

from memgate import Memory
from memgate.commands import audit as audit_cli
from memgate.integrations import transfer
from memgate.retriever import StoredMemory
from memgate.retriever.audit import make_event
from memgate.retriever.stores.postgres import tables
from memgate.retriever.stores.postgres.audit_table import TableAuditLog
from memgate.retriever.stores.postgres.store import PostgresStore
from memgate.retriever.stores.postgres.tables import POSTGRES_FORMAT
from tests import pg_test_server
from tests.retriever.store_helpers import DIM, IDENT, vec

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _hnsw_where_it_works(monkeypatch):
    """Stores without the HNSW index where pgserver's pgvector cannot run it on this CPU
    (``pg_test_server.hnsw_works``): the erasure checks then cover the table's pages only."""
    if not pg_test_server.hnsw_works():
        monkeypatch.setattr(tables, "HNSW_MAX_DIM", 0)


def sql(query, params=()):
    with psycopg.connect(pg_test_server.url(), autocommit=True) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else cur.rowcount


def ident(schema: str, template: str) -> psycopg.sql.Composed:
    return psycopg.sql.SQL(template).format(psycopg.sql.Identifier(schema))


def found(schema: str, needles: list[bytes]) -> list[str]:
    """The needles some data file of the schema's relations holds (after a checkpoint)."""
    files = pg_test_server.relation_files(schema)
    assert files
    data = [p.read_bytes() for p in files]
    return [n.decode("latin-1")[:30] for n in needles if any(n in d for d in data)]


# ---------------------------------------------------------------------------- the audit table


def _id(added) -> str:
    if isinstance(added, dict):
        return added["id"] if "id" in added else added["results"][0]["id"]
    return added[0]["id"]


def test_history_audit_export_and_verify_work_with_only_a_url(tmp_path, capsys):
    schema = pg_test_server.schema_for(tmp_path / "mem")
    with Memory(store="postgres", url=pg_test_server.url(), collection=schema) as m:
        memory_id = _id(m.add("I keep my bike in the blue shed.", user_id="alice"))
        assert isinstance(m.store.audit, TableAuditLog)  # (no file anywhere)
        m.store.audit.append(make_event("retrieved", query_id="q-1", principal="alice", namespaces=["user:alice"],
                                        ranks=[{"memory_id": memory_id, "namespace": "user:alice", "rank": 1}]))
        assert m.store.audit.find_retrieval("q-1")["principal"] == "alice"
        m.delete(memory_id, user_id="alice")
        assert [s["event"] for s in m.history(memory_id, user_id="alice")] == ["stored", "retrieved", "forgotten"]
    rows = sql(ident(schema, "SELECT event FROM {}.audit ORDER BY id"))
    assert [json.loads(e)["event"] for (e,) in rows][:3] == ["stored", "retrieved", "forgotten"]
    assert not any("blue shed" in e for (e,) in rows)  # ids and metadata only, never the text
    assert audit_cli.main([memory_id, "--url", pg_test_server.url(), "--schema", schema]) == 0
    assert "stored" in capsys.readouterr().out
    assert audit_cli.main(["--verify", "--url", "", "--schema", schema]) == 0  # ($MEMGATE_POSTGRES_URL)
    assert "E <= R <= W holds" in capsys.readouterr().out
    store = PostgresStore(pg_test_server.url(), schema=schema)
    manifest = transfer.export_store(store, tmp_path / "export")
    exported = [json.loads(line)["event"] for line in (tmp_path / "export" / "audit.jsonl").read_text().splitlines()]
    assert "audit.jsonl" in manifest["files"] and exported[:3] == ["stored", "retrieved", "forgotten"]
    store.close()


def test_a_reset_on_postgres_clears_the_audit_table_and_the_store_takes_writes_again(tmp_path):
    schema = pg_test_server.schema_for(tmp_path / "mem")
    with Memory(store="postgres", url=pg_test_server.url(), collection=schema) as m:
        memory_id = _id(m.add("My locker code is 4417.", user_id="alice"))
        m.reset(keep_forget_list=False)  # (raised AttributeError: TableAuditLog had no clear())
        assert m.get_all(user_id="alice")["results"] == [] and m.history(memory_id, user_id="alice") == []
        assert _id(m.add("My locker code is 4417.", user_id="alice"))
    events = [json.loads(e)["event"] for (e,) in sql(ident(schema, "SELECT event FROM {}.audit ORDER BY id"))]
    assert "stored" in events and len(events) <= 3  # the reset's own event and what came after it


def test_a_format_1_schema_gets_the_audit_table_on_open_and_keeps_its_records(tmp_path):
    schema = pg_test_server.schema_for(tmp_path / "old")
    with Memory(store="postgres", url=pg_test_server.url(), collection=schema) as m:
        old_id = _id(m.add("written before the upgrade", user_id="alice"))
    # what main's code (format 1) created: no audit table, the vector's storage pgvector's own
    sql(ident(schema, "DROP TABLE {}.audit"))
    sql(ident(schema, "DROP TABLE {}.erase_pages"))
    sql(ident(schema, "ALTER TABLE {}.records DROP COLUMN pad"))
    sql(ident(schema, "ALTER TABLE {}.records ALTER COLUMN embedding SET STORAGE EXTERNAL"))
    sql(ident(schema, "ALTER TABLE {}.records RESET (toast_tuple_target)"))
    sql(ident(schema, "UPDATE {}.meta SET value = 'memgate-postgres/1' WHERE key = 'format'"))
    tables = {t for (t,) in sql("SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                                (schema,))}
    assert tables == {"meta", "records", "derivations", "suppressed", "suppression_keys", "outbox"}

    with Memory(store="postgres", url=pg_test_server.url(), collection=schema) as m:
        assert m.get(old_id, user_id="alice")["memory"] == "written before the upgrade"
        added = m.add("I moved to Porto.", user_id="bob")
        memory_id = _id(added)
        assert [s["event"] for s in m.history(memory_id, user_id="bob")] == ["stored"]
    meta = dict(sql(ident(schema, "SELECT key, value FROM {}.meta")))
    assert meta["format"] == POSTGRES_FORMAT and meta["migrated_from"] == "memgate-postgres/1"
    storage = sql("SELECT a.attstorage FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN "
                  "pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = 'records' "
                  "AND a.attname = 'embedding'", (schema,))
    assert storage == [("m",)]  # (the vector stays in the row from now on)


# ---------------------------------------------------------------------------- the erasure window


def _store_with(tmp_path, name: str, n: int = 60) -> tuple[PostgresStore, str]:
    schema = pg_test_server.schema_for(tmp_path / name)
    store = PostgresStore(pg_test_server.url(), IDENT, schema=schema, audit=None)
    rng = np.random.default_rng(3)
    store.add_many([StoredMemory(f"f{i}", "alice", f"filler note {i} " + "z" * 200) for i in range(n)],
                   rng.normal(size=(n, DIM)), encoder=IDENT)
    return store, schema


def _forget(store: PostgresStore, memory_id: str, text: str) -> tuple[list[bytes], float]:
    store.add(StoredMemory(memory_id, "alice", text), vec(memory_id), encoder=IDENT)
    stored = store.vectors_for([memory_id])[memory_id].astype("<f4").tobytes()
    t = time.perf_counter()
    store.forget(memory_id, StoredMemory(f"{memory_id}-f", "alice", "forget that"), vec("f"), encoder=IDENT)
    return [text.encode(), stored], time.perf_counter() - t


def _clean_within(schema: str, needles: list[bytes], seconds: float) -> float:
    start = time.monotonic()
    while found(schema, needles):
        assert time.monotonic() - start < seconds, f"still in the data files: {found(schema, needles)}"
        time.sleep(0.2)
    return time.monotonic() - start


def test_a_forget_returns_before_the_table_pass_and_the_pages_are_clean_within_5_s(tmp_path):
    store, schema = _store_with(tmp_path, "window")
    needles, _ = _forget(store, "secret", "the alarm code is 4417-2290")
    _clean_within(schema, needles, 5.0)
    assert store._backend.eraser.passes >= 1 and store.wait_erased(5.0)
    assert sql(ident(schema, "SELECT count(*) FROM {}.erase_pages"))[0][0] == 0
    # a burst of forgets shares passes (one per window, not one per forget)
    before = store._backend.eraser.passes
    burst = [n for i in range(6) for n in _forget(store, f"s{i}", f"burst secret number {i} 90{i}")[0]]
    assert store.wait_erased(5.0) and store._backend.eraser.passes - before < 6
    _clean_within(schema, burst, 5.0)
    assert store.get("secret").forgotten and store.verify() == []
    store.close()


def test_a_snapshot_holding_the_old_rows_delays_the_erasure_until_it_ends(tmp_path):
    """A transaction whose snapshot still sees the forgotten row keeps VACUUM from removing it;
    the eraser reads VACUUM's own report, tries again, and cleans the pages once it ends."""
    store, schema = _store_with(tmp_path, "held")
    store.add(StoredMemory("held", "alice", "the safe opens with 5521-8080"), vec("held"), encoder=IDENT)
    needles = [b"the safe opens with 5521-8080", store.vectors_for(["held"])["held"].astype("<f4").tobytes()]
    with psycopg.connect(pg_test_server.url()) as reader:  # (a transaction, REPEATABLE READ)
        reader.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        assert reader.execute(ident(schema, "SELECT count(*) FROM {}.records")).fetchone()[0] > 0
        store.forget("held", StoredMemory("held-f", "alice", "forget it"), vec("f"), encoder=IDENT)
        time.sleep(1.0)
        assert found(schema, needles)  # (the old version is still visible to that snapshot)
        passes = store._backend.eraser.passes
        assert passes >= 2  # (it tried, read "dead but not yet removable", tried again)
        reader.rollback()
    _clean_within(schema, needles, 5.0)
    store.close()


def test_erase_deletes_records_and_cleans_their_pages_for_a_sweep_or_a_reset(tmp_path):
    store, schema = _store_with(tmp_path, "erase", n=10)
    store.add(StoredMemory("gone", "alice", "expired: in Lisbon this week"), vec("gone"), encoder=IDENT)
    needles = [b"expired: in Lisbon this week", store.vectors_for(["gone"])["gone"].astype("<f4").tobytes()]
    assert store._backend.erase([("alice", "gone"), ("alice", "nothing")], wait=True) == 1
    assert not found(schema, needles) and store.get("gone") is None and len(store) == 10
    assert "gone" not in store.ids() and store.verify() == []
    store.close()


def test_close_finishes_a_pending_erasure_and_a_crash_leaves_it_to_the_next_open(tmp_path):
    store, schema = _store_with(tmp_path, "close", n=10)
    needles, _ = _forget(store, "x", "closing time secret 3141")
    store.close()  # (before the window ended: close runs the pass)
    assert not found(schema, needles)
    # a process that ended before its pass: the mark in meta makes the next open erase
    store = PostgresStore(pg_test_server.url(), IDENT, schema=schema, audit=None)
    store._backend.eraser.request = lambda: None  # (this "process" dies before any pass)
    needles, _ = _forget(store, "y", "crash time secret 2718")
    assert sql(ident(schema, "SELECT count(*) FROM {}.erase_pages"))[0][0] >= 1
    store._backend.db.close()
    assert found(schema, needles)
    reopened = PostgresStore(pg_test_server.url(), IDENT, schema=schema, audit=None)
    assert reopened.wait_erased(5.0)
    _clean_within(schema, needles, 5.0)
    reopened.close()


# ---------------------------------------------------------------------------- LocalServer


def wait_until_gone(pid: int, when: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        assert time.monotonic() < deadline, f"postmaster {pid} still running {when}"
        time.sleep(0.1)


def test_localserver_stops_its_postmaster_when_its_process_is_terminated(tmp_path):
    """SIGTERM (by default it ends Python without atexit, which left the server running); SIGINT
    and a normal exit end through atexit, which also stops it."""
    sig = signal.SIGTERM
    pgdata = tmp_path / "pgdata"
    script = textwrap.dedent(f"""
        import sys, time
        from memgate.retriever.stores.postgres.local import LocalServer
        server = LocalServer({str(pgdata)!r})
        print(open({str(pgdata / "postmaster.pid")!r}).readline().strip(), flush=True)
        time.sleep(120)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        pid = int(child.stdout.readline())
        os.kill(pid, 0)  # (running)
        child.send_signal(sig)
        child.wait(60)
        wait_until_gone(pid, f"after {sig.name}")
        assert not (pgdata / "postmaster.pid").exists()
    finally:
        if child.poll() is None:
            child.kill()


def test_serve_postgres_prints_its_url_and_ctrl_c_stops_the_server(tmp_path):
    """``memgate serve postgres DIR`` (the docs' server block): the line it prints points a client at
    a live server; SIGINT (Ctrl-C in its terminal) stops the postmaster and ends the command with 0."""
    import shlex

    child = subprocess.Popen([sys.executable, "-m", "memgate", "serve", "postgres", str(tmp_path / "pgdata")],
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline().strip()
        assert line.startswith("export MEMGATE_POSTGRES_URL="), (line, child.stderr.read() if child.poll() else "")
        url = shlex.split(line.partition("=")[2])[0]
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        pid = int((tmp_path / "pgdata" / "postmaster.pid").read_text().split()[0])
        child.send_signal(signal.SIGINT)
        assert child.wait(60) == 0
        wait_until_gone(pid, "after Ctrl-C")
    finally:
        if child.poll() is None:
            child.kill()
