"""memgate store / memgate serve: the verbs, export/import round trips between backends, and the
imports that are refused (a Qdrant local-mode directory, tampered or mismatched exports)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from memgate import Memory
from memgate.commands import serve as serve_cli
from memgate.commands import store as store_cli
from memgate.commands.cli import main as memgate_main
from memgate.integrations import transfer
from memgate.integrations.opening import default_encoder, open_store


def run(capsys, *argv):
    code = store_cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _populated(path):
    with Memory(path=path, fsync=False) as m:
        a = m.add("I'm vegetarian and allergic to peanuts.", user_id="alice", metadata={"topic": "food"})
        b = m.add("My phone number is 555-0199.", user_id="alice")
        m.add("Bob supports Porto FC.", user_id="bob")
        c = m.add("Trip moved: Lisbon from 10 to 14 June.", user_id="alice",
                  derived_from=[a["id"]])
        m.search("what do I eat?", user_id="alice")
        m.delete(b["id"], user_id="alice")
        m.update(c["id"], user_id="alice", metadata={"trip": True})
    return a["id"], b["id"], c["id"]


def test_store_verbs(tmp_path, capsys):
    s = str(tmp_path / "s")
    code, out, _ = run(capsys, "add", "I park on level 3.", "--user", "alice", "--store", s,
                       "--metadata", '{"car": "blue"}')
    assert code == 0 and out.startswith("added ")
    mid = out.split()[1]
    code, out, _ = run(capsys, "search", "where did I park?", "--user", "alice", "--store", s, "--json")
    assert code == 0 and json.loads(out)["results"][0]["id"] == mid
    assert run(capsys, "search", "where did I park?", "--user", "bob", "--store", s)[0] == 1
    code, out, _ = run(capsys, "list", "--store", s)
    assert code == 0 and out.strip() == "alice\t1"
    assert mid in run(capsys, "list", "--user", "alice", "--store", s)[1]
    code, out, err = run(capsys, "forget", mid, "--user", "bob", "--store", s)
    assert code == 1 and "no memory" in err  # another user's id: the unknown-id answer
    code, out, _ = run(capsys, "forget", mid, "--user", "alice", "--store", s)
    assert code == 0 and "directive" in out
    code, out, _ = run(capsys, "history", mid, "--user", "alice", "--store", s)
    assert code == 0 and "stored" in out and "retrieved" in out and "forgotten" in out
    code, out, _ = run(capsys, "verify", "--store", s)
    assert code == 0 and "no integrity problems" in out and "E <= R <= W holds" in out
    code, _, err = run(capsys, "add", "x", "--user", "alice", "--store", s, "--metadata", "{bad")
    assert code == 2  # argparse: not valid JSON
    # through the memgate console script: the forget directive is what alice has left, and it
    # is listed on its own (list shows memories only)
    assert memgate_main(["store", "list", "--store", s, "--user", "alice"]) == 1
    capsys.readouterr()
    assert memgate_main(["store", "list", "--store", s, "--user", "alice", "--directives"]) == 0
    assert "asked me to forget" in capsys.readouterr().out


def test_export_import_round_trip_embedded_and_qdrant(tmp_path, capsys):
    src = tmp_path / "src"
    a, forgotten, c = _populated(src)
    out = tmp_path / "export"
    assert run(capsys, "export", "--store", str(src), "--out", str(out))[0] == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["records"] == 5 and manifest["vectors"] == 4  # 4 live (one a directive) + 1 tombstone
    assert "555-0199" not in (out / "records.jsonl").read_text()
    source = open_store("embedded", path=src)
    before = {i: source.get(i).to_dict() for i in source.ids()}
    vecs = source.vectors_for(list(before))
    source.close()
    for backend, dest in (("embedded", tmp_path / "dst"), ("qdrant", tmp_path / "qdst")):
        code, text, err = run(capsys, "import", "--from", str(out), "--store", str(dest), "--backend", backend)
        assert code == 0, err
        store = open_store(backend, path=dest)
        try:
            assert {i: store.get(i).to_dict() for i in store.ids()} == before
            got = store.vectors_for(list(before))
            assert set(got) == set(vecs) and all(np.array_equal(got[i], vecs[i]) for i in vecs)
        finally:
            store.close()
        with Memory(path=dest, store=backend, fsync=False) as m:
            hits = m.search("what do I eat?", user_id="alice")["results"]
            assert hits[0]["id"] == a and forgotten not in [h["id"] for h in hits]
            events = [e["event"] for e in m.history(forgotten, user_id="alice")]
            assert events[0] == "stored" and "forgotten" in events  # the trail came along
            assert m.get(c, user_id="alice")["metadata"] == {"trip": True}
    # and back: the Qdrant copy exports and imports into an embedded store unchanged
    back = tmp_path / "back-export"
    assert run(capsys, "export", "--store", str(tmp_path / "qdst"), "--backend", "qdrant", "--out", str(back))[0] == 0
    assert run(capsys, "import", "--from", str(back), "--store", str(tmp_path / "again"))[0] == 0
    again = open_store("embedded", path=tmp_path / "again")
    assert {i: again.get(i).to_dict() for i in again.ids()} == before
    assert all(np.array_equal(again.vectors_for([i])[i], vecs[i]) for i in vecs)
    again.close()
    # importing twice clashes; nothing is written the second time
    code, _, err = run(capsys, "import", "--from", str(out), "--store", str(tmp_path / "dst"))
    assert code == 2 and "already holds" in err


def test_import_refuses_qdrant_dirs_tampering_and_other_encoders(tmp_path, capsys):
    qdir = tmp_path / "qlocal"
    with Memory(path=qdir, store="qdrant") as m:
        m.add("a memory in Qdrant local mode", user_id="u")
    code, _, err = run(capsys, "import", "--from", str(qdir), "--store", str(tmp_path / "t1"))
    assert code == 2 and "pickle" in err and "never imports" in err
    src = tmp_path / "src"
    _populated(src)
    out = tmp_path / "export"
    run(capsys, "export", "--store", str(src), "--out", str(out))
    records = (out / "records.jsonl").read_text()
    (out / "records.jsonl").write_text(records.replace("vegetarian", "omnivore"))
    with pytest.raises(transfer.ImportRefused, match="sha256"):
        transfer.read_export(out)
    (out / "records.jsonl").write_text(records)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["encoder"]["revision"] = "another-revision"
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(transfer.ImportRefused, match="exported with encoder"):
        transfer.import_store(open_store("embedded", path=tmp_path / "t2"), out)
    assert run(capsys, "export", "--store", str(src), "--out", str(out))[0] == 2  # not empty
    assert default_encoder().identity["revision"] != "another-revision"


def test_serve_cli_refuses_bad_setups(tmp_path, capsys):
    with pytest.raises(SystemExit):  # argparse: a server name is required
        serve_cli.main([])
    assert "the following arguments are required" in capsys.readouterr().err
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"k" * 20: "alice"}))
    assert serve_cli.main(["http", "--store", str(tmp_path / "s"), "--api-keys", str(keys),
                           "--host", "0.0.0.0"]) == 2
    assert "not a loopback" in capsys.readouterr().err
    keys.write_text("[]")
    assert serve_cli.main(["http", "--store", str(tmp_path / "s"), "--api-keys", str(keys)]) == 2
    assert "mapping API keys" in capsys.readouterr().err


def test_serve_cli_opens_a_postgres_store_and_says_what_store_means(tmp_path, capsys):
    from memgate.retriever.stores.postgres.store import PostgresStore
    from tests import pg_test_server

    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"k" * 20: "alice"}))
    assert serve_cli.main(["http", "--api-keys", str(keys)]) == 2  # the embedded store needs --store
    assert "--store DIR is required with --backend embedded" in capsys.readouterr().err
    bad = "postgresql://someone:pw-not-shown@/postgres?host=" + str(tmp_path / "no-server")
    assert serve_cli.main(["http", "--backend", "postgres", "--url", bad, "--api-keys", str(keys)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("memgate serve http: the PostgreSQL store at") and "pw-not-shown" not in err
    args = serve_cli.build_parser().parse_args(
        ["mcp", "--backend", "postgres", "--url", pg_test_server.url(), "--schema", pg_test_server.schema_for(tmp_path),
         "--store", str(tmp_path / "audit"), "--principal", "alice", "--gate", "none"])
    with serve_cli.open_memory(args) as memory:  # --store: the folder of the audit log
        assert isinstance(memory.store, PostgresStore) and memory.store.schema == pg_test_server.schema_for(tmp_path)
        memory.add("served from PostgreSQL", user_id="alice")
        assert memory.store.audit.path == tmp_path / "audit" / "audit.jsonl"
    assert (tmp_path / "audit" / "audit.jsonl").read_text().count('"stored"') == 1


def test_store_verbs_on_postgres_with_an_audit_folder(tmp_path, capsys):
    """docs/integrations/postgres.md: import into PostgreSQL with --store AUDIT_DIR, then search
    and verify with the same --store (the existence check looked for an embedded store's lock
    file there and refused every verb after the import)."""
    from tests import pg_test_server

    src = tmp_path / "src"
    _populated(src)
    assert run(capsys, "export", "--store", str(src), "--out", str(tmp_path / "export"))[0] == 0
    pg = ["--backend", "postgres", "--url", pg_test_server.url(), "--collection", pg_test_server.schema_for(tmp_path),
          "--store", str(tmp_path / "pgaudit")]
    assert run(capsys, "import", "--from", str(tmp_path / "export"), *pg)[0] == 0
    code, out, err = run(capsys, "search", "what do I eat?", "--user", "alice", *pg, "--limit", "1")
    assert code == 0 and "vegetarian" in out, err
    assert run(capsys, "verify", *pg)[0] == 0
    code, _, err = run(capsys, "list", *pg[:-1], str(tmp_path / "pgaudt"))  # a mistyped folder
    assert code == 2 and "no postgres memgate store there" in err
