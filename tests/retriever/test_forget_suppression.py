"""Forget for good (issue 18): a forgotten detail cannot come back by being added again (the
suppression list: keyed hashes per namespace, never the text), the directive may not repeat it,
records derived from it go with it, the disclosure scan still flags it, and no read path or file
of either store returns it."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from memgate.contract.records import QueryContext
from memgate.contract.text_normal import normal_tokens
from memgate.retriever import AuditLog, StoredMemory, SuppressedContentError
from memgate.retriever.records.suppression import entries_for, matching
from tests import pg_test_server
from tests.retriever.store_helpers import IDENT, KINDS, make_retriever, make_store, vec

SECRET = "Alice likes green tea with two sugars."
MARKER = "two sugars"


def ctx(qid, principal="alice", intent="current_state"):
    return QueryContext(query_id=qid, text="", principal=principal, intent=intent)


def forgotten_setup(kind, tmp_path):
    audit = AuditLog(tmp_path / f"{kind}-audit.jsonl", fsync=False)
    r = make_retriever(make_store(kind, tmp_path, audit=audit))
    r.add(SECRET, namespace="alice", principal="alice", memory_id="tea", markers=[MARKER])
    r.add("Shopping list built from Alice's tea order: green tea, sugar.", namespace="alice",
          principal="alice", memory_id="list", derived_from=["tea"], markers=["sugar cubes"])
    r.add("Reminder made from the shopping list.", namespace="alice", principal="alice",
          memory_id="reminder", derived_from=["list"])
    r.add("Alice's flight is on Tuesday.", namespace="alice", principal="alice", memory_id="flight")
    r.add("Bob drinks his coffee black.", namespace="bob", principal="bob", memory_id="b-coffee")
    directive = r.forget("tea", principal="alice", directive_text="The user asked me to forget a drink preference.")
    return r, directive


def test_normalised_tokens_make_spacing_case_and_punctuation_irrelevant():
    assert normal_tokens("Alice's phone: 555-0199!") == normal_tokens("alice S  phone 555 0199") == [
        "alice", "s", "phone", "555", "0199"]
    key = b"k" * 32
    keys = {"": key}
    entries = entries_for(key, "ns", "m", "My phone is 555-0199.", ["555-0199"])
    assert [e.kind for e in entries] == ["text", "marker"] and all(re.fullmatch("[0-9a-f]{64}", e.digest) for e in entries)
    assert all(e.version == 2 for e in entries)
    assert "555" not in json.dumps([e.to_dict() for e in entries])  # hashes and counts, never content
    assert [e.kind for e in matching(keys, "call 555 0199 now", entries)] == ["marker"]
    assert [e.kind for e in matching(keys, "call 5550199 now", entries)] == ["marker"]
    assert matching(keys, "call 555 0198 now", entries) == []
    assert matching({"": b"x" * 32}, "call 555 0199 now", entries) == []  # keyed: another key, no match


@pytest.mark.parametrize("kind", KINDS)
def test_a_forgotten_detail_cannot_be_added_again(tmp_path, kind):
    r, _ = forgotten_setup(kind, tmp_path)
    for text in (SECRET, "alice LIKES green-tea with two   sugars", "Note: Alice likes green tea with two sugars!",
                 "She takes TWO SUGARS.", "Shopping list built from Alice's tea order: green tea, sugar.",
                 "sugar cubes"):
        with pytest.raises(SuppressedContentError, match="repeats content forgotten in namespace 'alice'"):
            r.add(text, namespace="alice", principal="alice", memory_id="again")
        assert r.store.get("again", namespace="alice") is None
    with pytest.raises(SuppressedContentError):  # nor through an update, a correction or a batch
        r.update("flight", 1, principal="alice", text="Alice likes green tea with two sugars.")
    with pytest.raises(SuppressedContentError):
        r.correct("flight", 1, "Flight note: two sugars", principal="alice")
    with pytest.raises(SuppressedContentError):
        r.store.add_many([StoredMemory("ok", "alice", "fine"), StoredMemory("bad", "alice", SECRET)],
                         np.stack([vec("ok"), vec("bad")]), encoder=IDENT)
    assert r.store.get("ok", namespace="alice") is None  # all or nothing
    result = r.retrieve(SECRET, ctx("q1"), k=10)
    assert not any(MARKER in item.text for item in result.items)
    # the list is per namespace: Bob's own record and Bob's writes are unaffected
    r.add("Bob likes green tea with two sugars, still.", namespace="bob", principal="bob")
    r.store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_relearning_needs_explicit_consent_and_is_audited(tmp_path, kind):
    r, _ = forgotten_setup(kind, tmp_path)
    stored = r.add(SECRET, namespace="alice", principal="alice", memory_id="tea-again", allow_relearn=True)
    assert stored.text == SECRET
    assert r.retrieve("green tea", ctx("q1"), k=1).ids == ["tea-again"]
    events = [e for e in r.store.audit.events() if e["event"] == "relearned"]
    assert [(e["memory_id"], e["namespace"], e["forgotten"], e["principal"]) for e in events] == [
        ("tea-again", "alice", ["tea"], "alice")]
    assert SECRET not in r.store.audit.path.read_text()
    # the consent lifts the entries it matched: the detail is a memory again, not a forgotten one
    r.add("Alice takes two sugars.", namespace="alice", principal="alice", memory_id="sugars")
    r.store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_directive_that_repeats_the_detail_is_refused(tmp_path, kind):
    r = make_retriever(make_store(kind, tmp_path))
    r.add(SECRET, namespace="alice", principal="alice", memory_id="tea", markers=[MARKER])
    for directive in ("Forget that Alice likes green tea with two sugars…",
                      "Forget the preference about two sugars.",
                      "forget: alice likes GREEN TEA with two sugars"):
        with pytest.raises(ValueError, match="repeats forgotten content"):
            r.forget("tea", principal="alice", directive_text=directive)
        assert r.store.get("tea", namespace="alice").text == SECRET  # nothing was applied
    r.forget("tea", principal="alice", directive_text="Forget the user's drink preference.")
    r.store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_derived_records_are_erased_with_the_detail(tmp_path, kind):
    r, directive = forgotten_setup(kind, tmp_path)
    for mid in ("tea", "list", "reminder"):
        record = r.store.get(mid, namespace="alice")
        assert record.forgotten and record.text is None and record.markers == ()
        assert record.forgotten_by == directive.memory_id
    assert r.store.get("flight", namespace="alice").text == "Alice's flight is on Tuesday."
    events = [(e["memory_id"], e.get("cause")) for e in r.store.audit.events() if e["event"] == "forgotten"]
    assert events == [("tea", None), ("list", "derived_from:tea"), ("reminder", "derived_from:tea")]
    r.store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_the_disclosure_scan_still_flags_a_forgotten_detail(tmp_path, kind):
    r, _ = forgotten_setup(kind, tmp_path)
    result = r.retrieve("What does Alice drink?", ctx("q1"), k=5)
    hits = r.report_answer(result.query_id, "I remember: she takes TWO sugars.")
    assert [(h.memory_id, h.forgotten, h.exposed, h.retrieved) for h in hits] == [("tea", True, False, False)]
    assert r.report_answer(result.query_id, "She likes coffee.") == []
    bob = r.retrieve("What does Bob drink?", ctx("q2", principal="bob"), k=5)
    assert r.report_answer(bob.query_id, "two sugars") == []  # Alice's list is Alice's
    logged = [e for e in r.store.audit.events() if e["event"] == "disclosed"][0]
    assert logged["hits"][0]["forgotten"] is True and "sugars" not in json.dumps(logged)
    r.store.close()


FORGOTTEN = ("Alice likes green tea with two sugars", "two sugars", "Shopping list built", "sugar cubes",
             "Reminder made from the shopping list")


@pytest.mark.parametrize("kind", KINDS)
def test_no_read_path_or_file_returns_the_forgotten_detail(tmp_path, kind):
    """The forget probes: every read path of the store and the retriever, and every file."""
    r, directive = forgotten_setup(kind, tmp_path)
    store = r.store
    old_vectors = [vec(t) for t in (SECRET, "Shopping list built from Alice's tea order: green tea, sugar.",
                                    "Reminder made from the shopping list.")]
    probes = 0

    def clean(value) -> None:
        nonlocal probes
        probes += 1
        text = json.dumps(value, default=str)
        assert not any(f.lower() in text.lower() for f in FORGOTTEN), text[:300]

    for intent in ("current_state", "history", "unknown"):
        for i, query in enumerate((SECRET, MARKER, "What does Alice drink?", "shopping list")):
            result = r.retrieve(query, ctx(f"q-{intent}-{i}", intent=intent), k=20)
            clean([it.text for it in result.items] + [it.memory.to_dict() for it in result.items])
            assert not {"tea", "list", "reminder"} & set(result.ids + [e.memory_id for e in result.excluded])
    for mid in ("tea", "list", "reminder"):
        clean(store.get(mid, namespace="alice").to_dict())
        assert store.vectors_for([mid], namespace="alice") == {}
    clean([m.to_dict() for m in store.get_many(["tea", "list", "reminder", "flight"], namespace="alice").values()])
    clean(store.scan_markers(["alice", "bob"]))
    clean([e.__dict__ for e in store.changes_since(0)[1]])
    for v in old_vectors:
        clean(store.search(v, ["alice"], 50))
        probes += 1
        assert not any(np.allclose(row, v, atol=1e-5) for row in np.asarray(store.vector_matrix()))
    clean(list(store.audit.events()))
    store.close()
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    if kind == "postgres":  # the store's tables, indexes and TOAST in the server's data folder
        files += pg_test_server.relation_files(store.schema)
    assert files
    for path in files:  # the store's database / points, vectors, journal, audit log
        data = path.read_bytes()
        probes += len(FORGOTTEN) + len(old_vectors)
        for needle in FORGOTTEN:
            assert needle.encode() not in data, (path, needle)
        for v in old_vectors:
            assert v.astype("<f4").tobytes() not in data, path
    print(f"{kind}: {probes} forget probes over {len(files)} files")
    assert probes >= 45, probes  # 25 read-path probes, 8 per file
