"""Ids are scoped per namespace (issue 18): another tenant's id answers exactly like a free id on
both stores and through the retriever, so nothing reveals which ids another tenant uses; plus the
minor input rules: memory_id="" refused, one meaning for a plain-string namespaces, a text size
limit."""

from __future__ import annotations

import numpy as np
import pytest

from memgate.contract.records import QueryContext
from memgate.retriever import (
    MAX_TEXT_CHARS,
    AmbiguousMemoryError,
    StaleRevisionError,
    StoredMemory,
    UnknownMemoryError,
)
from tests.retriever.store_helpers import IDENT, make_retriever, vec


def ctx(qid, principal="alice", namespaces=None):
    return QueryContext(query_id=qid, text="", principal=principal, namespaces=namespaces)


def test_another_tenants_id_answers_like_a_free_id_in_the_store(new_store):
    store = new_store()
    store.add(StoredMemory("b-secret", "bob", "bob's pin is 4321"), vec("b"), encoder=IDENT)
    outcomes = {}
    for memory_id in ("b-secret", "never-used"):  # a tenant's id and a free one
        stored = store.add(StoredMemory(memory_id, "alice", f"alice note {memory_id}"), vec(memory_id), encoder=IDENT)
        directive = store.forget(memory_id, StoredMemory(f"{memory_id}-f" if memory_id != "b-secret" else "b-secret-2",
                                                   "alice", "forget that note"), vec("f" + memory_id),
                                 encoder=IDENT)
        outcomes[memory_id] = (stored.revision, stored.namespace, directive.kind)
    assert outcomes["b-secret"] == outcomes["never-used"] == (1, "alice", "forget_directive")
    # the directive may take another tenant's id too
    store.add(StoredMemory("x", "alice", "alice x"), vec("x"), encoder=IDENT)
    assert store.forget("x", StoredMemory("b-secret-3", "alice", "forget x"), vec("fx"), encoder=IDENT).memory_id == "b-secret-3"
    store.add(StoredMemory("b-secret-3", "bob", "bob's own record"), vec("b3"), encoder=IDENT)
    # bob's record is untouched, and the id is now ambiguous without a namespace
    assert store.get("b-secret", namespace="bob").text == "bob's pin is 4321"
    assert store.get("b-secret", namespace="alice").forgotten
    with pytest.raises(AmbiguousMemoryError, match="pass namespace="):
        store.get("b-secret")
    with pytest.raises(AmbiguousMemoryError):
        store.get_many(["b-secret"])
    assert set(store.get_many(["b-secret", "x"], namespace="alice")) == {"b-secret", "x"}
    # same id, two namespaces: both searchable, each inside its own namespace only
    store.add(StoredMemory("shared", "alice", "alice shared"), vec("s"), encoder=IDENT)
    store.add(StoredMemory("shared", "bob", "bob shared"), vec("s"), encoder=IDENT)
    assert store.search(vec("s"), ["alice"], 1, with_namespace=True)[0][::2] == ("shared", "alice")
    assert store.search(vec("s"), ["bob"], 1, with_namespace=True)[0][::2] == ("shared", "bob")
    both = store.search(vec("s"), ["alice", "bob"], 2, with_namespace=True)
    assert sorted(h[2] for h in both) == ["alice", "bob"]
    hits = store.search(vec("s"), ["alice", "bob"], 5, with_namespace=True, exclude_ids=[("bob", "shared")])
    assert [h[2] for h in hits if h[0] == "shared"] == ["alice"]
    # CAS and writes on one namespace's record leave the other's alone
    store.update("shared", 1, namespace="bob", kind="note")
    assert store.get("shared", namespace="alice").revision == 1
    with pytest.raises(StaleRevisionError):
        store.update("shared", 1, namespace="bob", kind="again")
    # a supersession names a record of its own namespace only
    store.add(StoredMemory("bob-only", "bob", "bob only"), vec("bo"), encoder=IDENT)
    with pytest.raises(UnknownMemoryError):
        store.add(StoredMemory("y", "alice", "replaces bob's", supersedes=({"memory_id": "bob-only"},)),
                  vec("y"), encoder=IDENT)
    assert store.verify() == []
    store.close()


def test_through_the_retriever_no_call_reveals_another_tenants_ids(new_store):
    r = make_retriever(new_store())
    r.add("Bob's pin is 4321.", namespace="bob", principal="bob", memory_id="b-pin")
    r.add("Bob's directive slot.", namespace="bob", principal="bob", memory_id="b-dir")
    answers = {}
    for memory_id, directive_id in (("b-pin", "b-dir"), ("free-id", "free-dir")):
        stored = r.add(f"Alice's note {memory_id}.", namespace="alice", principal="alice", memory_id=memory_id)
        d = r.forget(memory_id, principal="alice", directive_text="The user asked me to forget a note.",
                     directive_id=directive_id)
        answers[memory_id] = (stored.revision, d.kind)
        for call in (lambda: r.update(memory_id, 1, principal="alice", kind="x"),):  # noqa: B023 (called at once)
            with pytest.raises(Exception) as info:
                call()
            answers[memory_id] += (type(info.value).__name__,)
    assert answers["b-pin"] == answers["free-id"]
    # Alice still cannot touch Bob's record; the refusal is the unknown-id refusal
    with pytest.raises(PermissionError, match="unknown id or a namespace outside its ACL"):
        r.retire("b-pin", 1, principal="alice", namespace="bob")
    assert r.store.get("b-pin", namespace="bob").revision == 1
    # a principal reading both namespaces names the record it means
    r.add("Alice's shared plan.", namespace="alice", principal="alice", memory_id="plan")
    r.add("Bob's shared plan.", namespace="bob", principal="bob", memory_id="plan")
    with pytest.raises(AmbiguousMemoryError, match="several of principal 'team'"):
        r.update("plan", 1, principal="team", kind="x")
    assert r.update("plan", 1, principal="team", namespace="bob", kind="x").namespace == "bob"
    result = r.retrieve("shared plan", ctx("q-team", "team"), k=5)
    assert sorted((i.memory_id, i.namespace) for i in result.items if i.memory_id == "plan") == [
        ("plan", "alice"), ("plan", "bob")]
    alice = r.retrieve("shared plan", ctx("q-alice"), k=5)
    assert [(i.memory_id, i.namespace) for i in alice.items if i.memory_id == "plan"] == [("plan", "alice")]
    r.store.close()


def test_an_empty_memory_id_is_refused_not_replaced(new_store):
    r = make_retriever(new_store())
    for bad in ("", 0):
        with pytest.raises(ValueError, match="field 'memory_id' must be a (non-empty )?string"):
            r.add("a note", namespace="alice", principal="alice", memory_id=bad)
        with pytest.raises(ValueError, match="field 'memory_id' must be a (non-empty )?string"):
            r.add_many(["a note"], namespace="alice", principal="alice", fields=[{"memory_id": bad}])
    assert len(r.store) == 0
    r.add("a note", namespace="alice", principal="alice", memory_id="n1")
    with pytest.raises(ValueError, match="field 'directive_id' must be a non-empty string"):
        r.forget("n1", principal="alice", directive_id="")
    assert r.add("another", namespace="alice", principal="alice").memory_id.startswith("m-")  # None: random
    r.store.close()


def test_a_plain_string_namespaces_means_one_namespace_everywhere(new_store):
    assert QueryContext(query_id="q", text="", principal=None, namespaces="alice").namespaces == frozenset({"alice"})
    store = new_store()
    r = make_retriever(store)
    r.add("alice's tea", namespace="alice", principal="alice", memory_id="a1")
    r.add("bob's tea", namespace="bob", principal="bob", memory_id="b1")
    # with an ACL: the one namespace alice may read (its letters would be refused)
    assert r.retrieve("tea", ctx("q1", namespaces="alice"), k=5).ids == ["a1"]
    # without an ACL the caller's namespaces are trusted: "bob" reads bob, as the store does
    open_r = make_retriever(store, acl=None)
    assert open_r.retrieve("tea", ctx("q2", namespaces="bob"), k=5).ids == ["b1"]
    assert [h[0] for h in store.search(vec("bob's tea"), "bob", 5)] == ["b1"]
    store.close()


def test_memory_text_beyond_the_limit_is_refused(new_store):
    store = new_store()
    r = make_retriever(store)
    long = "x" * (MAX_TEXT_CHARS + 1)
    with pytest.raises(ValueError, match=r"8,193 characters, beyond the limit of 8,192"):
        r.add(long, namespace="alice", principal="alice")
    with pytest.raises(ValueError, match="beyond the limit"):
        r.add_many(["short", long], namespace="alice", principal="alice")
    with pytest.raises(ValueError, match="field 'text'.*beyond the limit"):
        store.add(StoredMemory("m", "alice", long), vec("m"), encoder=IDENT)
    r.add("x" * MAX_TEXT_CHARS, namespace="alice", principal="alice", memory_id="edge")  # the limit itself
    with pytest.raises(ValueError, match="beyond the limit"):
        r.update("edge", 1, principal="alice", text=long)
    with pytest.raises(ValueError, match="beyond the limit"):
        r.forget("edge", principal="alice", directive_text=long)
    with pytest.raises(ValueError, match="field 'query_text' has .* beyond the limit"):
        r.retrieve(long, ctx("q"), k=1)
    assert len(store) == 1 and np.isfinite(store.vector_matrix()).all()
    store.close()
