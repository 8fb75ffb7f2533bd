"""PostgresStore (issue 37) against a real PostgreSQL + pgvector server (the session's pgserver):
the format and schema, transactions, the search filter inside SQL (the Kleene exclusions as the
WHERE, before LIMIT, by signature rather than by id; exact and HNSW search), SQL-like values on
every surface, audit and verify. The shared store contract runs on it through
``store_helpers.KINDS``; processes, faults and the password in tests/retriever/test_postgres_faults.py."""

from __future__ import annotations

import json

import numpy as np
import psycopg
import pytest

from memgate.contract.records import QueryContext
from memgate.retriever import (
    AuditLog,
    EncoderMismatchError,
    MemoryStore,
    StaleRevisionError,
    StoredMemory,
    StoreError,
)
from memgate.retriever.records.rules import Records as RecordSemantics
from memgate.retriever.stores.postgres.store import PostgresStore
from memgate.retriever.stores.postgres.tables import POSTGRES_FORMAT, from_db, to_db
from tests import pg_test_server
from tests.integrations.surfaces import SURFACES, open_surface
from tests.retriever.store_helpers import DIM, IDENT, make_retriever, make_store, vec


@pytest.fixture
def store(tmp_path):
    s = make_store("postgres", tmp_path)
    yield s
    s.close()


def sql(query, params=()):
    with psycopg.connect(pg_test_server.url(), autocommit=True) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else cur.rowcount


def dump(schema: str) -> str:
    """Every row of every table of the store's schema, as text."""
    tables = [t for (t,) in sql("SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                                (schema,))]
    assert {"meta", "records", "derivations", "suppressed", "suppression_keys", "outbox"} <= set(tables)
    return json.dumps({t: [[str(c) for c in row] for row in sql(
        psycopg.sql.SQL("SELECT * FROM {}.{}").format(psycopg.sql.Identifier(schema), psycopg.sql.Identifier(t)))]
        for t in tables})


# ---------------------------------------------------------------------------- format and schema


def test_the_store_records_its_format_and_encoder_and_refuses_others(tmp_path, store):
    assert isinstance(store, MemoryStore)
    meta = dict(sql(psycopg.sql.SQL("SELECT key, value FROM {}.meta").format(psycopg.sql.Identifier(store.schema))))
    assert meta["format"] == POSTGRES_FORMAT and json.loads(meta["encoder"]) == IDENT
    url = pg_test_server.url()
    reopened = PostgresStore(url, schema=store.schema)  # no identity: the store's own
    assert reopened.encoder_identity == IDENT and reopened.dim == DIM
    reopened.close()
    with pytest.raises(EncoderMismatchError):
        PostgresStore(url, {**IDENT, "revision": "2"}, schema=store.schema)
    with pytest.raises(ValueError, match="holds no store yet"):
        PostgresStore(url, schema="t_nothing_here")
    for bad in ("", "1abc", "a-b", 'x"; DROP SCHEMA public; --', "a" * 64, None):
        with pytest.raises(ValueError, match="field 'schema'"):
            PostgresStore(url, IDENT, schema=bad)


@pytest.mark.parametrize("found, message", [("memgate-postgres/3", "written by a newer memgate"),
                                            ("something-else", "this memgate opens")])
def test_a_newer_or_unknown_format_is_refused_with_the_fix(store, found, message):
    sql(psycopg.sql.SQL("UPDATE {}.meta SET value = %s WHERE key = 'format'").format(
        psycopg.sql.Identifier(store.schema)), (found,))
    with pytest.raises(ValueError, match=message):
        PostgresStore(pg_test_server.url(), IDENT, schema=store.schema)


def test_it_shares_the_one_implementation_of_record_semantics():
    for name in ("add", "add_many", "update", "correct", "retire", "mark_reviewed", "forget",
                 "restore_many", "check_suppressed", "check_forget_directive", "export_suppression",
                 "check_encoder", "_flag_derived", "_cas", "_check_vector"):
        assert getattr(PostgresStore, name) is getattr(RecordSemantics, name), name


def test_text_values_round_trip_with_nul_and_backslashes(store):
    ns, text = "ns\x00with\\0nul\\", "a \x00 b \\0 c \\\\ d"
    assert from_db(to_db(ns)) == ns and to_db("a\\0") != to_db("a\x00")
    store.add(StoredMemory("m", ns, text, attributes={"k\x00": "v\\0"}), vec(text), encoder=IDENT)
    got = store.get("m", namespace=ns)
    assert (got.namespace, got.text, got.attributes) == (ns, text, {"k\x00": "v\\0"})
    assert store.search(vec(text), [ns], 1)[0][0] == "m" and store.search(vec(text), ["ns"], 1) == []


# ---------------------------------------------------------------------------- transactions


class Killed(BaseException):
    """Stands for the client dying inside its transaction (the server rolls it back)."""


def test_a_batch_is_one_transaction(store):
    store.add(StoredMemory("kept", "alice", "kept"), vec("kept"), encoder=IDENT)
    version = store.version()
    batch = [StoredMemory(f"b{i}", "alice", f"batch {i}") for i in range(5)] + [StoredMemory("kept", "alice", "again")]
    with pytest.raises(ValueError, match="already exists"):
        store.add_many(batch, np.stack([vec(m.text) for m in batch]), encoder=IDENT)
    assert store.version() == version and store.ids() == ["kept"]

    def die(stage):
        if stage == "before_commit":
            raise Killed

    store._backend.fault_hook = die
    with pytest.raises(Killed):
        store.add_many(batch[:5], np.stack([vec(m.text) for m in batch[:5]]), encoder=IDENT)
    with pytest.raises(Killed):
        store.forget("kept", StoredMemory("kept-f", "alice", "forget it"), vec("f"), encoder=IDENT)
    store._backend.fault_hook = None
    assert store.version() == version and store.ids() == ["kept"] and store.get("kept").text == "kept"
    assert store.export_suppression()["entries"] == [] and store.verify() == []
    store.add_many(batch[:5], np.stack([vec(m.text) for m in batch[:5]]), encoder=IDENT)  # goes on
    assert len(store) == 6 and store.verify() == []


def test_forget_erases_everything_in_the_directives_transaction(store):
    r = make_retriever(store)
    r.add("Alice's locker code is 8675309", namespace="alice", memory_id="secret", principal="alice",
          markers=("8675309",), attributes={"topic": "lockers", "code_hint": "8675309"})
    r.add("summary: the locker code noted", namespace="alice", memory_id="child", principal="alice",
          derived_from=("secret",))
    directive = r.forget("secret", principal="alice", namespace="alice")
    rows = sql(psycopg.sql.SQL("SELECT memory_id, seq, text, embedding IS NULL, data FROM {}.records "
                               "WHERE memory_id IN ('secret', 'child', %s)").format(
        psycopg.sql.Identifier(store.schema)), (directive.memory_id,))
    assert len({seq for _, seq, *_ in rows}) == 1  # one write: tombstones and directive
    for memory_id, _, text, no_vector, data in rows:
        if memory_id != directive.memory_id:
            assert text is None and no_vector and "8675309" not in data and "lockers" not in data
    text = dump(store.schema)
    assert "8675309" not in text and "locker code" not in text and "lockers" not in text
    assert {e["memory_id"] for e in store.export_suppression()["entries"]} == {"secret", "child"}
    assert store.verify() == []


def test_cas_is_a_conditional_update(store):
    store.add(StoredMemory("m", "alice", "v1"), vec("v1"), encoder=IDENT)
    store.update("m", 1, kind="note")
    with pytest.raises(StaleRevisionError):
        store.update("m", 1, kind="other")
    # the SQL guard on its own: a row write based on a revision that is not stored changes nothing
    with store._backend.write():
        stale = store._backend.load("m", "alice").replace(revision=2)  # (stored: 2; "based on" 1)
        with pytest.raises(StaleRevisionError):
            store._backend.put(stale, store._backend.bump("seq"))
    assert store.get("m").revision == 2 and store.get("m").kind == "note"


# ---------------------------------------------------------------------------- search inside SQL


def test_the_kleene_exclusions_go_as_signatures_not_as_ids(tmp_path, store):
    n = 300
    mems = [StoredMemory(f"m{i:03d}", "alice", f"fact {i}", policy_tags=("personal",) if i % 3 else ("work",))
            for i in range(n)]
    vectors = np.stack([vec(m.text) for m in mems])
    embedded = make_store("embedded", tmp_path)
    for s in (store, embedded):
        s.add_many(mems, vectors, encoder=IDENT)
        for i in range(0, 30, 2):
            s.retire(f"m{i:03d}", 1)
    rules = {"personal": {"reason": "purpose", "allow_only": ["chat"]}, "work": {}}
    calls, statements = [], []
    search, rows = store.search, store._backend._rows
    store.search = lambda *a, **kw: calls.append(kw) or search(*a, **kw)
    store._backend._rows = lambda template, params=(), **kw: statements.append((template, params)) or rows(template, params, **kw)
    results = {}
    for kind, s in (("postgres", store), ("embedded", embedded)):
        r = make_retriever(s, policy_rules=rules, fail_mode="closed")
        ctx = QueryContext(query_id=f"q-{kind}", text="", principal="alice", purpose="ads", intent="current_state")
        results[kind] = r.retrieve("fact 7", ctx, k=10)
    a, b = results["postgres"], results["embedded"]
    assert a.ids == b.ids and len(a.ids) == 10
    assert [(e.memory_id, e.reasons) for e in a.excluded] == [(e.memory_id, e.reasons) for e in b.excluded]
    assert a.excluded_counts == b.excluded_counts and sum(a.excluded_counts.values()) >= 200
    kwargs = calls[0]
    assert kwargs["exclude_ids"] == [] and 1 <= len(kwargs["exclude_signatures"]) <= 2
    searches = [(t, p) for t, p in statements if "ORDER BY cosine_distance" in t]
    assert searches and all("sig <> ALL(%s)" in t and "LIMIT %s" in t for t, _ in searches[:1])
    longest = max(len(x) for _, params in searches for x in params if isinstance(x, list))
    assert longest <= 3  # namespaces, states, signatures: no list of 200 excluded ids
    embedded.close()


def test_exact_search_is_brute_force_with_ties_by_id(store):
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(60, DIM)).astype(np.float32)
    vectors[40:45] = vectors[5]  # five ties with m05
    mems = [StoredMemory(f"m{i:02d}", ("alice", "bob")[i % 2], f"t{i}") for i in range(60)]
    store.add_many(mems, vectors, encoder=IDENT)
    q = vectors[5] / np.linalg.norm(vectors[5])
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cos = unit.astype(np.float64) @ q
    for ns in (["alice"], ["alice", "bob"]):
        allowed = [i for i in range(60) if mems[i].namespace in ns]
        brute = sorted(allowed, key=lambda i: (-round(cos[i], 6), mems[i].memory_id))[:12]
        assert [h[0] for h in store.search(q, ns, 12)] == [mems[i].memory_id for i in brute]
        approx = store.search(q, ns, 12, exact=False)
        assert len(approx) == 12 and {h[0] for h in approx} <= {mems[i].memory_id for i in allowed}


def test_sql_like_ids_namespaces_and_metadata_keys_on_every_surface(tmp_path):
    hostile = ["x'); DROP TABLE records; --", 'a" OR "1"="1', "%s %(x)s {s} $1", "; DELETE FROM meta"]
    for name in SURFACES:
        with open_surface(name, "postgres", tmp_path / name) as surface:
            user = surface.new_user()
            for i, word in enumerate(hostile):
                memory_id = None if name in ("http", "mcp", "langgraph") else word
                got_id = surface.add(user, f"note {i} about {word}", memory_id=memory_id,
                                     metadata={word: word, "n": i})
                if memory_id is not None:
                    assert got_id == word
                hit = surface.get(user, got_id)
                assert hit is not None and hit["metadata"][word] == word, (name, word)
                surface.forget(user, got_id)
                assert surface.get(user, got_id) is None
    store = make_store("postgres", tmp_path, name="ns")
    r = make_retriever(store, acl=None)
    for word in hostile:  # as namespaces
        r.add(f"a note in {word}", namespace=word, principal=word, memory_id="same-id")
    for word in hostile:
        ctx = QueryContext(query_id=f"ns-{word}", text="", principal=word, namespaces=frozenset({word}))
        result = r.retrieve("a note", ctx, k=10)
        assert [it.namespace for it in result.items] == [word]
    assert len(store) == len(hostile) and store.verify() == []
    assert sql("SELECT count(*) FROM information_schema.tables WHERE table_schema = %s",
               (store.schema,))[0][0] == 8  # nothing dropped
    store.close()


# ---------------------------------------------------------------------------- audit and verify


def test_audit_events_commit_with_their_write_and_verify_finds_tampering(tmp_path):
    store = make_store("postgres", tmp_path, audit=AuditLog(tmp_path / "audit.jsonl"))
    store.add(StoredMemory("m", "alice", "hello there", markers=("there",)), vec("m"), encoder=IDENT)
    store.forget("m", StoredMemory("m-f", "alice", "forget it"), vec("f"), encoder=IDENT)
    events = [e["event"] for e in store.audit.events()]
    assert events == ["stored", "forgotten", "stored"]
    assert sql(psycopg.sql.SQL("SELECT count(*) FROM {}.outbox").format(psycopg.sql.Identifier(store.schema)))[0][0] == 0
    assert "hello there" not in (tmp_path / "audit.jsonl").read_text() and store.verify() == []
    records = psycopg.sql.Identifier(store.schema)
    sql(psycopg.sql.SQL("UPDATE {}.records SET text = 'put back' WHERE memory_id = 'm'").format(records))
    sql(psycopg.sql.SQL("UPDATE {}.records SET sig = 'x' WHERE memory_id = 'm-f'").format(records))
    problems = store.verify()
    assert any("alice/m: forgotten but kept" in p for p in problems)
    assert any("alice/m-f: signature" in p for p in problems)
    store.close()


def test_a_closed_store_says_so(store):
    store.close()
    with pytest.raises(StoreError, match="is closed"):
        store.version()


def test_a_failed_vacuum_after_a_forget_warns_and_keeps_the_forget(store, caplog):
    """VACUUM runs after the commit (it cannot run inside a transaction), in the eraser: when it
    fails (a role that does not own the table, say), the forget stands, the store says so, and
    the pages stay listed for the next pass."""
    store.add(StoredMemory("m", "alice", "a detail to forget"), vec("m"), encoder=IDENT)
    store._backend._sql["VACUUM (INDEX_CLEANUP ON, VERBOSE) {s}.records"] = psycopg.sql.SQL(
        "VACUUM no_such_schema.no_such_table")
    directive = store.forget("m", StoredMemory("m-f", "alice", "forget it"), vec("f"), encoder=IDENT)
    assert store.get("m").forgotten and store.get(directive.memory_id) is not None
    assert not store.wait_erased(1.0)
    assert "erasing the pages failed" in caplog.text
    assert sql(psycopg.sql.SQL("SELECT count(*) FROM {}.erase_pages").format(
        psycopg.sql.Identifier(store.schema)))[0][0] >= 1


def test_compact_leaves_no_erased_bytes_in_any_data_file(tmp_path, store):
    """VACUUM prunes erased row versions but PostgreSQL does not zero the space it frees (at
    100,000 records bench_postgres found a forgotten vector in the TOAST table's free space);
    compact() rewrites the tables, so no data file of the store holds the detail any more."""
    rng = np.random.default_rng(5)
    filler = [StoredMemory(f"f{i}", "alice", f"filler {i} " + "x" * 3000) for i in range(40)]  # (TOASTed rows)
    store.add_many(filler, rng.normal(size=(40, DIM)), encoder=IDENT)
    secret = "the vault combination is 31-07-62 " + "y" * 3000
    store.add(StoredMemory("vault", "alice", secret), vec("vault"), encoder=IDENT)
    stored = store.vectors_for(["vault"])["vault"].astype("<f4").tobytes()
    store.forget("vault", StoredMemory("vault-f", "alice", "forget the combination"), vec("f"), encoder=IDENT)
    store.compact()
    files = pg_test_server.relation_files(store.schema)
    assert files and not any(b"31-07-62" in p.read_bytes() or stored in p.read_bytes() for p in files)
    assert store.get("vault").forgotten and len(store) == 42 and store.verify() == []
    assert [h[0] for h in store.search(vec("filler 3"), ["alice"], 3)]  # the rebuilt indexes serve
