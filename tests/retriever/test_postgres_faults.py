"""PostgresStore with several processes and under faults (issue 37): a second process's retriever
sees an acknowledged write at its next query and never returns a record forgotten elsewhere; a
server stopped and restarted under a client gives a clear error, then the same objects recover;
the URL's password appears in no error, log or audit line; a filter keeping 1 % of 100,000 rows
still returns k through the HNSW index (pgvector's iterative scan). The kill -9 loop and the
two-process CAS race run on postgres in tests/retriever/test_fault_suite.py."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from memgate.commands.store import main as store_cli
from memgate.contract.records import QueryContext
from memgate.retriever import AuditLog, StoredMemory, StoreError
from memgate.retriever.records.index import record_signature
from memgate.retriever.stores.postgres.connection import redact_url
from memgate.retriever.stores.postgres.local import LocalServer
from memgate.retriever.stores.postgres.search import filter_clause
from memgate.retriever.stores.postgres.store import PostgresStore, StoreUnavailableError
from tests import pg_test_server
from tests.retriever.store_helpers import IDENT, make_retriever, vec

REPO = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent("""
    import json, sys
    from memgate.contract.records import QueryContext
    from memgate.retriever.stores.postgres import PostgresStore
    from tests.retriever.store_helpers import IDENT, make_retriever
    r = make_retriever(PostgresStore(sys.argv[1], IDENT, schema=sys.argv[2]))
    print("ready", flush=True)
    for n, line in enumerate(sys.stdin):
        cmd = json.loads(line)
        if cmd["op"] == "add":
            r.add(cmd["text"], namespace="alice", principal="alice", memory_id=cmd["id"])
            out = {"ok": True}
        elif cmd["op"] == "forget":
            r.forget(cmd["id"], principal="alice", namespace="alice")
            out = {"ok": True}
        else:
            ctx = QueryContext(query_id=f"child-{n}", text="", principal="alice")
            out = {"ids": r.retrieve(cmd["text"], ctx, k=50).ids}
        print(json.dumps(out), flush=True)
""")


class Child:
    """A second process with its own retriever over the same store, driven line by line."""

    def __init__(self, url: str, schema: str):
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, url, schema], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, cwd=REPO,
                                     env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
        assert self.proc.stdout.readline().strip() == "ready"

    def ask(self, **cmd) -> dict:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def test_two_processes_see_each_others_writes_and_forgets(tmp_path):
    url, schema = pg_test_server.url(), pg_test_server.schema_for(tmp_path / "shared")
    mine = make_retriever(PostgresStore(url, IDENT, schema=schema))
    child = Child(url, schema)
    try:
        for i in range(12):
            text = f"shared fact number {i}"
            mine.add(text, namespace="alice", principal="alice", memory_id=f"p{i}")  # acknowledged here:
            assert f"p{i}" in child.ask(op="query", text=text)["ids"]  # the other's next query has it
            assert child.ask(op="add", text=f"child fact {i}", id=f"c{i}")["ok"]
            ctx = QueryContext(query_id=f"parent-{i}", text="", principal="alice")
            assert f"c{i}" in mine.retrieve(f"child fact {i}", ctx, k=50).ids
            if i % 3 == 2:  # a forget acknowledged in one process is never returned by the other
                assert child.ask(op="forget", id=f"p{i - 1}")["ok"]
                mine.forget(f"c{i - 2}", principal="alice", namespace="alice")
                got = child.ask(op="query", text=f"child fact {i - 2}")["ids"]
                assert f"c{i - 2}" not in got and f"p{i - 1}" not in got
        forgotten = {"p1", "p4", "p7", "p10", "c0", "c3", "c6", "c9"}
        mine._refresh()  # the vectors forgotten by the child leave this process's mirror too
        matrix = np.asarray(mine.store.vector_matrix())
        for text in ("shared fact number 1", "shared fact number 4", "shared fact number 7"):
            assert not any(np.allclose(row, vec(text), atol=1e-6) for row in matrix)
        for i in range(12):
            ctx = QueryContext(query_id=f"final-{i}", text="", principal="alice")
            assert not forgotten & set(mine.retrieve(f"shared fact number {i}", ctx, k=50).ids)
            assert not forgotten & set(child.ask(op="query", text=f"child fact {i}")["ids"])
    finally:
        child.close()
        mine.close()


@pytest.fixture
def own_server_dir():
    """A folder outside pytest's basetemp (which other pytest sessions chmod to 0700, locking the
    server's own user out of its data)."""
    path = Path(tempfile.mkdtemp(prefix="memgate-pg-restart-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_server_restart_under_a_client_is_a_clear_error_then_recovery(own_server_dir):
    with LocalServer(own_server_dir / "pgdata") as server:
        store = PostgresStore(server.url, IDENT, schema="restart")
        r = make_retriever(store)
        r.add("before the restart", namespace="alice", principal="alice", memory_id="a")
        seen = {}

        def while_down():
            for name, call in (("version", store.version),
                               ("add", lambda: store.add(StoredMemory("b", "alice", "down"), vec("b"), encoder=IDENT)),
                               ("retrieve", lambda: r.retrieve("x", QueryContext(query_id="down", text="",
                                                                                 principal="alice"), k=3))):
                with pytest.raises(StoreUnavailableError) as err:
                    call()
                seen[name] = str(err.value)

        server.restart(stopped=while_down)
        for message in seen.values():
            assert "the PostgreSQL store at" in message and "the next call reconnects" in message
            assert "\n" not in message
        # the same objects recover: reads retry on a fresh connection, writes go through
        assert store.get("a").text == "before the restart" and store.get("b") is None
        r.add("after the restart", namespace="alice", principal="alice", memory_id="c")
        ctx = QueryContext(query_id="after", text="", principal="alice")
        assert set(r.retrieve("restart", ctx, k=5).ids) == {"a", "c"} and store.verify() == []
        store.close()


def _password_role(url: str, password: str) -> str:
    """A role that must log in with ``password`` (scram), its URL without the password."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS memgate_pw")
        conn.execute(psycopg.sql.SQL("CREATE ROLE memgate_pw LOGIN SUPERUSER PASSWORD {}").format(
            psycopg.sql.Literal(password)))
        (hba,) = conn.execute("SHOW hba_file").fetchone()
        rules = Path(hba).read_text()
        if "memgate_pw" not in rules:
            Path(hba).write_text("local all memgate_pw scram-sha-256\n" + rules)
        conn.execute("SELECT pg_reload_conf()")
    base = url.replace("postgres:@", "memgate_pw:@", 1)
    deadline = time.time() + 30
    while time.time() < deadline:  # (the server reloads its rules asynchronously)
        try:
            psycopg.connect(base.replace("memgate_pw:@", "memgate_pw:not-it@", 1)).close()
        except psycopg.OperationalError:
            return base
        time.sleep(0.05)
    raise AssertionError("the server did not take the password rule")


def test_the_urls_password_appears_in_no_error_log_or_audit_line(tmp_path, caplog, capsys):
    password = "S3cret-pw%2Fp4ss"  # (percent-encoded in the URL: the decoded form is probed too)
    decoded = "S3cret-pw/p4ss"
    base = _password_role(pg_test_server.url(), decoded)
    good = base.replace("memgate_pw:@", f"memgate_pw:{password}@", 1)
    wrong = base.replace("memgate_pw:@", "memgate_pw:S3cret-wrong@", 1)
    texts = []
    caplog.set_level(logging.DEBUG)
    unencoded = base.replace("memgate_pw:@", f"memgate_pw:{decoded}@", 1)  # ('/' not encoded)
    for url in (wrong, good + "&sslmode=bogus", good + "&no_such_option=1", unencoded,
                unencoded.replace("/postgres?", "/no_such_db?", 1),
                f"host=/nowhere user=x password={password} dbname=y"):
        with pytest.raises(StoreError) as err:
            PostgresStore(url, IDENT, schema="pw")
        texts += [str(err.value), repr(err.value), str(err.value.__cause__), str(err.value.__context__)]
    store = PostgresStore(good, IDENT, schema="pw", audit=AuditLog(tmp_path / "audit.jsonl"))
    store.add(StoredMemory("m", "alice", "hello"), vec("m"), encoder=IDENT)
    store.forget("m", StoredMemory("m-f", "alice", "forget it"), vec("f"), encoder=IDENT)
    texts += [store.where, store._backend.describe(), repr(store), (tmp_path / "audit.jsonl").read_text()]
    with pytest.raises(StoreError) as err:  # a statement error on the open connection
        store._backend._rows("SELECT * FROM {s}.no_such_table")
    texts.append(str(err.value))
    store.close()
    assert store_cli(["list", "--backend", "postgres", "--url", wrong, "--collection", "pw"]) == 2
    out = capsys.readouterr()
    texts += [out.out, out.err, caplog.text]
    assert "***" in redact_url(good) and redact_url(good).startswith("postgresql://memgate_pw:***@")
    for text in texts:
        assert password not in text and decoded not in text, text


@pytest.mark.slow
def test_a_filter_keeping_1_percent_of_100k_rows_still_returns_k(tmp_path):
    """100,000 rows (loaded with COPY), 1 % of them outside an excluded signature: the HNSW
    search still returns k, through the index, because the iterative scan is on (with it off,
    pgvector stops after ef_search candidates and returns fewer)."""
    n, k = 100_000, 10
    store = PostgresStore(pg_test_server.url(), IDENT, schema=pg_test_server.schema_for(tmp_path))
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(n, IDENT["dim"])).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    keep = rng.random(n) < 0.01
    common, rare = (StoredMemory("x", "bulk", "t", policy_tags=(tag,)) for tag in ("common", "rare"))
    sig = {True: record_signature(rare), False: record_signature(common)}
    data = {flag: store._backend._data(m) for flag, m in ((True, rare), (False, common))}
    with psycopg.connect(pg_test_server.url(), autocommit=True) as conn:
        table = psycopg.sql.Identifier(store.schema, "records")
        conn.execute(psycopg.sql.SQL("DROP INDEX {}").format(psycopg.sql.Identifier(store.schema, "records_embedding")))
        register_vector(conn)
        with conn.cursor().copy(psycopg.sql.SQL(
                "COPY {} (namespace, memory_id, text, revision, seq, lifecycle_state, sig, slot, "
                "embedding, data) FROM STDIN WITH (FORMAT BINARY)").format(table)) as copy:
            copy.set_types(["text", "text", "text", "int4", "int8", "text", "text", "int8", "vector", "text"])
            for i in range(n):
                copy.write_row(("bulk", f"r{i:06d}", f"row {i}", 1, 1, "current", sig[bool(keep[i])], i,
                                vectors[i], data[bool(keep[i])]))
        conn.execute(psycopg.sql.SQL("UPDATE {} SET value = %s WHERE key = 'next_slot'").format(
            psycopg.sql.Identifier(store.schema, "meta")), (str(n),))
        conn.execute("SET maintenance_work_mem = '256MB'")
        # (a sparser graph than the store's own index builds in a third of the time; the test is
        # about the filtered scan, bench_postgres measures recall on the store's own index)
        conn.execute(psycopg.sql.SQL("CREATE INDEX records_embedding ON {} USING hnsw "
                                     "(embedding vector_cosine_ops) WITH (m = 8, ef_construction = 32)").format(table))
        conn.execute(psycopg.sql.SQL("ANALYZE {}").format(table))
    q = vectors[np.flatnonzero(~keep)[0]]
    allowed = np.flatnonzero(keep)
    exact_top = {f"r{i:06d}" for i in allowed[np.argsort(-(vectors[allowed] @ q))[:k]]}
    hits = store.search(q, ["bulk"], k, exclude_signatures=[sig[False]], exact=False)
    assert len(hits) == k and {h[0] for h in hits} <= {f"r{i:06d}" for i in allowed}
    assert len({h[0] for h in hits} & exact_top) >= 8  # approximate, yet close to exact
    assert [h[0] for h in store.search(q, ["bulk"], k, exclude_signatures=[sig[False]])] == \
        sorted(exact_top, key=lambda m: -float(vectors[int(m[1:])] @ q))  # exact search
    # exact search over the whole namespace is brute force (an ORDER BY the index could serve as
    # a prefix made PostgreSQL pick the HNSW scan plus an incremental sort: approximate)
    brute = np.argsort(-(vectors @ q), kind="stable")[:k]
    seen, rows = [], store._backend._rows
    store._backend._rows = lambda template, params=(), **kw: seen.append((template, params)) or rows(template, params, **kw)
    assert [h[0] for h in store.search(q, ["bulk"], k)] == [f"r{i:06d}" for i in brute]
    store._backend._rows = rows
    (template, params), = [(t, p) for t, p in seen if "ORDER BY" in t][:1]
    with psycopg.connect(pg_test_server.url(), autocommit=True) as conn:
        register_vector(conn)
        conn.execute(psycopg.sql.SQL("SET search_path = public"))
        plan = "\n".join(r[0] for r in conn.execute(psycopg.sql.SQL("EXPLAIN ") + store._backend._q(template), params))
    assert "records_embedding" not in plan, plan  # exact: never through the HNSW index
    where, params = filter_clause(["bulk"], (), (), [sig[False]])
    with psycopg.connect(pg_test_server.url(), autocommit=True) as conn:
        register_vector(conn)
        explain = psycopg.sql.SQL(f"EXPLAIN SELECT memory_id FROM {{}} r WHERE {where} "
                                  "ORDER BY embedding <=> %s LIMIT %s").format(table)
        plan = "\n".join(r[0] for r in conn.execute(explain, [*params, q, k]).fetchall())
        assert "records_embedding" in plan, plan  # the HNSW index, filter inside the scan
        conn.execute("SET hnsw.iterative_scan = off")
        without = conn.execute(psycopg.sql.SQL(f"SELECT memory_id FROM {{}} r WHERE {where} "
                                               "ORDER BY embedding <=> %s LIMIT %s").format(table),
                               [*params, q, k]).fetchall()
    assert len(without) < k  # what the iterative scan fixes
    store.close()
