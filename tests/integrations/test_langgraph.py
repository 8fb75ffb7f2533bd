"""MemgateStore: LangGraph's BaseStore contract with the real langgraph package, and a compiled
StateGraph whose node reads and writes memories through it (no LLM)."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import TypedDict

import pytest

pytest.importorskip("langgraph")

from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.store.base import BaseStore, GetOp, ListNamespacesOp, PutOp, SearchOp  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402

from memgate.integrations.langgraph_store import MemgateStore  # noqa: E402
from memgate.retriever import SuppressedContentError  # noqa: E402


@pytest.fixture()
def store(tmp_path):
    with MemgateStore(path=tmp_path / "lg", fsync=False) as s:
        yield s


def _plain(items):
    return [(tuple(i.namespace), i.key, i.value) for i in items]


def test_key_value_contract_matches_in_memory_store(store):
    """The same operations on LangGraph's InMemoryStore and on MemgateStore give the same items
    (no query: the key-value half of the contract)."""
    ref = InMemoryStore()
    ops = [
        (("users", "alice", "prefs"), "diet", {"text": "Alice is vegetarian.", "stars": 5}),
        (("users", "alice", "prefs"), "city", {"text": "Alice lives in Porto.", "stars": 3,
                                               "meta": {"src": "chat", "n": 1}}),
        (("users", "bob", "prefs"), "diet", {"text": "Bob eats everything.", "stars": 1}),
        (("docs",), "readme", {"text": "memgate docs", "tags": ["a", "b"]}),
    ]
    for s in (ref, store):
        for ns, key, value in ops:
            s.put(ns, key, value)
    listings = ({}, {"prefix": ("users",)}, {"suffix": ("prefs",)}, {"prefix": ("users", "*", "prefs")},
                {"max_depth": 1}, {"max_depth": 2, "prefix": ("users",)}, {"limit": 1, "offset": 1})
    for kwargs in listings:
        assert store.list_namespaces(**kwargs) == ref.list_namespaces(**kwargs), kwargs
    for s in (ref, store):
        s.put(("users", "alice", "prefs"), "city", {"text": "Alice moved to Lisbon.", "stars": 4,
                                                    "meta": {"src": "chat", "n": 2}})
        s.delete(("users", "bob", "prefs"), "diet")
        s.delete(("users", "bob", "prefs"), "never-there")  # a no-op
    for ns, key, _ in ops:
        a, b = ref.get(ns, key), store.get(ns, key)
        assert (a is None) == (b is None), (ns, key)
        if a is not None:
            assert (a.key, a.namespace, a.value) == (b.key, b.namespace, b.value)
    assert store.get(("users", "alice", "prefs"), "city").value["text"] == "Alice moved to Lisbon."
    item = store.get(("users", "alice", "prefs"), "city")
    assert item.updated_at > item.created_at
    # an emptied namespace is no longer listed (InMemoryStore keeps listing it; a database-backed
    # store lists the namespaces of its items, as this one does)
    assert ("users", "bob", "prefs") in ref.list_namespaces()
    assert store.list_namespaces() == [ns for ns in ref.list_namespaces() if ns != ("users", "bob", "prefs")]
    for prefix, flt in ((("users",), None), (("users",), {"stars": {"$gte": 4}}),
                        (("users", "alice"), {"meta": {"src": "chat"}}), ((), {"tags": ["a", "b"]}),
                        ((), {"stars": {"$ne": 5}}), (("users", "bob"), None)):
        got = sorted(_plain(store.search(prefix, filter=flt, limit=10)))
        assert got == sorted(_plain(ref.search(prefix, filter=flt, limit=10))), (prefix, flt)


def test_search_is_gated_retrieval_within_the_prefix_and_filters_before_truncation(store):
    store.batch([PutOp(("users", "alice"), f"note-{i}", {"text": f"Budget meeting {i} moved to room "
                                                               f"{100 + i}.", "kind": "budget"})
                 for i in range(25)])  # new keys in a batch: one embedding batch, one write
    store.put(("users", "alice"), "pie", {"text": "Grandma's apple pie uses cinnamon.", "kind": "recipe"})
    store.put(("users", "bob"), "pie", {"text": "Bob's apple pie recipe is secret.", "kind": "recipe"})
    hits = store.search(("users", "alice"), query="apple pie recipe", limit=3)
    assert hits[0].key == "pie" and hits[0].namespace == ("users", "alice")
    assert all(h.namespace == ("users", "alice") for h in hits) and hits[0].score > hits[1].score
    both = store.search(("users",), query="apple pie recipe", limit=2)
    assert {h.namespace for h in both} == {("users", "alice"), ("users", "bob")}
    # the recipe is the worst match for this query; a filter after truncation would miss it
    budget = store.search(("users", "alice"), query="budget meeting room", limit=25)
    assert "pie" not in [h.key for h in budget]
    only = store.search(("users", "alice"), query="budget meeting room", filter={"kind": "recipe"}, limit=1)
    assert [(h.namespace, h.key) for h in only] == [(("users", "alice"), "pie")]
    page = store.search(("users", "alice"), query="budget meeting room", limit=2, offset=1)
    assert [h.key for h in page] == [h.key for h in budget[1:3]]
    # index=False: stored and listed, never ranked by a query; index=[...] picks the field
    store.put(("users", "alice"), "raw", {"text": "apple pie apple pie"}, index=False)
    store.put(("users", "alice"), "titled", {"title": "apple pie festival", "body": "tickets"}, index=["title"])
    ranked = store.search(("users", "alice"), query="apple pie", limit=3)
    assert "raw" not in [h.key for h in ranked] and "titled" in [h.key for h in ranked]
    assert store.get(("users", "alice"), "raw").value == {"text": "apple pie apple pie"}


def test_delete_is_forget_and_a_later_put_is_a_new_record(tmp_path, store):
    store.put(("u",), "phone", {"text": "My phone number is 555-0199."})
    old_id = store.catalog.by_key('lg:["u"]', "phone")
    store.delete(("u",), "phone")
    assert store.get(("u",), "phone") is None and store.search(("u",), query="phone number") == []
    assert store.mstore.get(old_id).forgotten  # a tombstone: the id is never reused
    dump = "\n".join(sqlite3.connect(tmp_path / "lg" / "store.sqlite").iterdump())
    assert "555-0199" not in dump
    # Deviation from key-value semantics (documented): the key comes back as a new record, and
    # the forgotten content is refused under any key
    with pytest.raises(SuppressedContentError):
        store.put(("u",), "phone", {"text": "My phone number is 555-0199."})
    store.put(("u",), "phone", {"text": "My phone number is 555-0142."})
    assert store.get(("u",), "phone").value["text"].endswith("555-0142.")
    assert store.catalog.by_key('lg:["u"]', "phone") != old_id


def test_ttl_items_expire_are_never_returned_and_are_erased_not_forgotten(tmp_path):
    import time

    with MemgateStore(path=tmp_path / "ttl", fsync=False, gate=None,
                      ttl={"default_ttl": 60, "refresh_on_read": True}) as store:
        store.put(("u",), "trip", {"text": "I'm in Lisbon this week."}, ttl=0.001)  # 60 ms
        store.put(("u",), "diet", {"text": "I'm vegetarian."})  # default_ttl: an hour
        first = store.mstore.get(store.catalog.by_key('lg:["u"]', "diet")).attributes["expiration_date"]
        time.sleep(0.1)
        assert store.get(("u",), "trip") is None
        assert [i.key for i in store.search(("u",), query="Where am I?")] == ["diet"]
        assert [i.key for i in store.search(("u",))] == ["diet"] and store.list_namespaces() == [("u",)]
        refreshed = store.mstore.get(store.catalog.by_key('lg:["u"]', "diet")).attributes["expiration_date"]
        assert refreshed > first  # refresh_on_read restarted its time
        store.put(("u",), "trip", {"text": "I'm in Lisbon this week."})  # not a forget: may come back
        assert store.get(("u",), "trip").value["text"] == "I'm in Lisbon this week."
        for bad in (0, -1, float("nan"), float("inf")):
            with pytest.raises(ValueError, match="^field 'ttl'"):
                store.put(("u",), "x", {"text": "never stored"}, ttl=bad)
        assert store.get(("u",), "x") is None
    with pytest.raises(ValueError, match="^field 'ttl.default_ttl'"):
        MemgateStore(path=tmp_path / "bad", ttl={"default_ttl": 0})


def test_batch_reads_before_writes_and_async_forms(store):
    store.put(("b",), "k1", {"text": "first"})
    out = store.batch([GetOp(("b",), "k1"), PutOp(("b",), "k1", {"text": "second"}),
                       PutOp(("b",), "k2", {"text": "other"}), PutOp(("b",), "k2", {"text": "last wins"}),
                       SearchOp(("b",), limit=10), ListNamespacesOp()])
    assert out[0].value == {"text": "first"} and out[1] is None and out[2] is None
    assert [i.key for i in out[4]] == ["k1"] and out[5] == [("b",)]
    assert store.get(("b",), "k1").value == {"text": "second"}
    assert store.get(("b",), "k2").value == {"text": "last wins"}

    async def run():
        await store.aput(("a", "x"), "k", {"text": "async value"})
        got = await store.aget(("a", "x"), "k")
        hits = await store.asearch(("a",), query="async value")
        names = await store.alist_namespaces(prefix=("a",))
        await store.adelete(("a", "x"), "k")
        return got, hits, names, await store.aget(("a", "x"), "k")

    got, hits, names, gone = asyncio.run(run())
    assert got.value == {"text": "async value"} and hits[0].key == "k"
    assert names == [("a", "x")] and gone is None


class State(TypedDict):
    user: str
    said: str
    recalled: list


def test_compiled_state_graph_reads_and_writes_through_the_store(store):
    def remember(state: State, *, store: BaseStore) -> dict:
        ns = ("users", state["user"], "memories")
        recalled = [h.value["text"] for h in store.search(ns, query=state["said"], limit=3)]
        store.put(ns, f"m{len(store.search(ns, limit=100))}", {"text": state["said"]})
        return {"recalled": recalled}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)
    graph = builder.compile(store=store)

    first = graph.invoke({"user": "alice", "said": "I am allergic to peanuts.", "recalled": []})
    assert first["recalled"] == []
    graph.invoke({"user": "bob", "said": "I love peanut butter.", "recalled": []})
    second = graph.invoke({"user": "alice", "said": "Can I eat satay sauce with peanuts?", "recalled": []})
    assert second["recalled"] == ["I am allergic to peanuts."]  # Bob's memory never crosses
    assert store.list_namespaces(prefix=("users",)) == [("users", "alice", "memories"),
                                                       ("users", "bob", "memories")]
