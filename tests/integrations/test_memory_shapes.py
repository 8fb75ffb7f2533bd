"""memgate.Memory in the shapes Mem0 and LangGraph users expect (issue 36): the search result
object, chat-message adds, the default store directory, users / reset, calls by id alone,
agent / run scopes, AND / OR filters, the current-state default and user-stated provenance
(real encoder, real store)."""

from __future__ import annotations

import warnings

import pytest

import memgate
from memgate import Memory, UnknownMemoryError


@pytest.fixture()
def mem(tmp_path):
    with Memory(path=tmp_path / "store", fsync=False) as m:
        yield m


def test_search_is_current_state_by_default_and_history_on_request(mem):
    berlin = mem.add("I live in Berlin.", user_id="alice")
    lisbon = mem.add("I moved to Lisbon.", user_id="alice", supersedes=[berlin["id"]])
    found = mem.search("Where do I live?", user_id="alice")
    assert set(found) == {"results", "forgotten_relevant", "query_id", "route", "excluded", "dropped", "dropped_ids"}
    assert [h["id"] for h in found["results"]] == [lisbon["id"]] and found["excluded"] == 1
    assert found["results"][0]["action"] == "answer"  # user-stated, low risk (agent_default)
    assert found["results"][0]["action_reasons"] == []  # nothing caps it (before: epistemic_missing, ...)
    assert lisbon["provenance"] == "user_stated" and lisbon["kind"] == "memory"
    history = mem.search("Where do I live?", user_id="alice", intent="history")["results"]
    assert {h["id"] for h in history} == {berlin["id"], lisbon["id"]}
    unknown = mem.search("Where do I live?", user_id="alice", intent="unknown")["results"]
    assert {h["id"]: h["action"] for h in unknown}[berlin["id"]] == "archive_only"
    told = mem.add("The user may live near the coast.", user_id="alice", provenance="agent_inferred")
    hit = [h for h in mem.search("coast", user_id="alice")["results"] if h["id"] == told["id"]][0]
    assert hit["action"] == "warn" and told["provenance"] == "agent_inferred"


def test_the_old_list_shape_lasts_one_release(tmp_path, mem):
    mem.add("I'm vegetarian.", user_id="u")
    found = mem.search("food", user_id="u")
    with pytest.warns(DeprecationWarning, match="results"):
        assert found[0] == found["results"][0]
    assert found.query_id == found["query_id"] and found.results == found["results"]
    with pytest.warns(DeprecationWarning, match="v1.0"):
        old = Memory(path=tmp_path / "old", output_format="v1.0", fsync=False)
    with old:
        old.add("I'm vegetarian.", user_id="u")
        hits = old.search("food", user_id="u")
        assert isinstance(hits, list) and hits[0]["memory"] == "I'm vegetarian." and hits.query_id
    with pytest.raises(ValueError, match="output_format"):
        Memory(path=tmp_path / "bad", output_format="v2")


def test_add_takes_chat_messages_each_user_turn_stored_word_for_word(mem):
    messages = [{"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "I'm allergic to peanuts."},
                {"role": "assistant", "content": "Noted, I'll avoid peanuts."},
                {"role": "user", "content": "And I cycle to work."}]
    added = mem.add(messages, user_id="alice", metadata={"source": "chat"}, agent_id="coach")
    assert [a["memory"] for a in added] == ["I'm allergic to peanuts.", "And I cycle to work."]
    assert all(a["metadata"] == {"source": "chat"} and a["agent_id"] == "coach" for a in added)
    assert sorted(m["memory"] for m in mem.get_all(user_id="alice")["results"]) == sorted(a["memory"] for a in added)
    assert mem.add([{"role": "assistant", "content": "Hi!"}], user_id="alice") == []
    for bad, field in (([{"role": "robot", "content": "x"}], "role"), ([{"role": "user", "content": 3}], "content"),
                       ([{"role": "user", "content": "x", "extra": 1}], "unknown field"), (["text"], r"messages\[0\]")):
        with pytest.raises(ValueError, match=field):
            mem.add(bad, user_id="alice")


def test_default_store_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMGATE_HOME", str(tmp_path / "home"))
    with Memory(fsync=False) as m:
        m.add("I'm vegetarian.", user_id="u")
    assert (tmp_path / "home" / "store" / "store.sqlite").exists()
    monkeypatch.delenv("MEMGATE_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    from memgate.integrations.home import default_store_dir
    assert default_store_dir() == tmp_path / "xdg" / "memgate" / "store"


def test_users_reset_and_calls_by_id_alone(mem):
    a = mem.add("Alice's note.", user_id="alice", memory_id="note-1")
    mem.add("Bob's note.", user_id="bob", memory_id="note-1")  # ids are per user: shared here
    b = mem.add("Bob's train leaves at 8:10.", user_id="bob")
    assert mem.users() == ["alice", "bob"]
    assert mem.get(b["id"])["user_id"] == "bob"  # the one user whose memory has this id
    assert mem.update(b["id"], text="Bob's train leaves at 8:20.")["revision"] == 2
    assert [e["event"] for e in mem.history(b["id"])][:2] == ["stored", "updated"]
    messages = []
    for memory_id in ("note-1", "no-such-id"):  # a shared id answers as an unknown one
        assert mem.get(memory_id) is None
        with pytest.raises(UnknownMemoryError) as err:
            mem.delete(memory_id)
        messages.append(str(err.value).replace(memory_id, "<id>"))
    assert messages[0] == messages[1]
    assert mem.delete(b["id"])["kind"] == "forget_directive"
    assert mem.get(a["id"], user_id="alice")["memory"] == "Alice's note."
    mem.reset()
    assert all(mem.get_all(user_id=u)["results"] == [] for u in ("alice", "bob")) and mem.users() == []
    assert len(mem.directives(user_id="bob")) == 1  # the forget list stays (reset(keep_forget_list=True))
    with pytest.raises(ValueError, match="agent_id"):
        mem.add("x", user_id="alice", metadata={"agent_id": "spoof"})


def test_logical_filters(mem):
    for i, (topic, year) in enumerate((("food", 2024), ("travel", 2025), ("travel", 2023), ("work", 2025))):
        mem.add(f"Note {i} about {topic}.", user_id="u", metadata={"topic": topic, "year": year,
                                                                  "tags": ["Urgent"] if i == 3 else []})

    def topics(flt):
        return sorted(m["metadata"]["topic"] + str(m["metadata"]["year"]) for m in mem.get_all(user_id="u", filters=flt)["results"])

    assert topics({"OR": [{"topic": "food"}, {"AND": [{"topic": "travel"}, {"year": {"gte": 2025}}]}]}) == [
        "food2024", "travel2025"]
    assert topics({"NOT": [{"topic": "travel"}]}) == ["food2024", "work2025"]
    assert topics({"topic": {"contains": "rav"}, "year": {"lt": 2025}}) == ["travel2023"]
    assert topics({"tags": {"icontains": "urgent"}}) == ["work2025"]
    hits = mem.search("notes", user_id="u", filters={"OR": [{"year": 2023}, {"year": 2024}]})["results"]
    assert sorted(h["metadata"]["year"] for h in hits) == [2023, 2024]
    for bad in ({"OR": {"topic": "food"}}, {"AND": []}, {"OR": [3]}):
        with pytest.raises(ValueError, match="filters"):
            mem.get_all(user_id="u", filters=bad)


def test_the_caught_errors_are_exported_from_memgate():
    from memgate.retriever import schema
    for name in ("UnknownMemoryError", "StaleRevisionError", "SuppressedContentError", "ForgottenMemoryError",
                 "StoreError", "RepeatedDetailError", "AmbiguousMemoryError"):
        assert getattr(memgate, name) is getattr(schema, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert memgate.retriever.StoredMemory is schema.StoredMemory
    with pytest.warns(DeprecationWarning, match="StoredMemory"):
        assert memgate.retriever.Memory is schema.StoredMemory
