"""Issue 47: Mem0 calls that work as written on memgate.Memory (real encoder, embedded store):
agent / run scopes, infer (against a local OpenAI-compatible server), threshold / top_k,
update(id, data), a single message, from_config, get_all's shape, de-duplication, expiry, reset."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone

import pytest

from memgate import Memory
from memgate.integrations.expiry import EXPIRES_KEY
from memgate.retriever import EmbeddedStore, UnknownMemoryError
from memgate.retriever.errors import SuppressedContentError

PAST = (datetime.now(timezone.utc) - timedelta(days=1)).isoformat()
FUTURE = (datetime.now(timezone.utc) + timedelta(days=30)).isoformat()


@pytest.fixture()
def mem(tmp_path):
    with Memory(path=tmp_path / "store", fsync=False, gate=None) as m:
        yield m


def ids(found):
    return sorted(x["id"] for x in found["results"])


def test_agent_only_run_only_and_combined_scopes_never_widen(mem):
    user = mem.add("I like green tea.", user_id="alice", agent_id="planner")
    agent = mem.add("Plan trips a week ahead.", agent_id="planner")
    run = mem.add("This run books a hotel.", run_id="r1")
    both = mem.add("Run r1 of the planner uses the train.", agent_id="planner", run_id="r1")
    assert agent["user_id"] is None and agent["agent_id"] == "planner" and run["run_id"] == "r1"
    assert ids(mem.get_all(agent_id="planner")) == sorted([agent["id"], both["id"]])
    assert ids(mem.get_all(agent_id="planner", run_id="r1")) == [both["id"]]
    assert ids(mem.get_all(run_id="r1")) == [run["id"]]  # never the agent's, though it carries r1
    assert ids(mem.get_all(user_id="alice")) == [user["id"]]
    assert ids(mem.search("tea", agent_id="planner", limit=10)) == sorted([agent["id"], both["id"]])
    assert ids(mem.search("hotel", run_id="r1")) == [run["id"]]
    assert mem.get(user["id"], agent_id="planner") is None  # the user's memory is not the agent's
    assert mem.get(agent["id"], agent_id="planner")["memory"] == agent["memory"]
    assert mem.get(agent["id"])["agent_id"] == "planner"  # by id alone: the one namespace holding it
    with pytest.raises(ValueError, match="^field 'run_id': memory .* was not added with run_id='r2'$"):
        mem.update(both["id"], "x", agent_id="planner", run_id="r2")
    with pytest.raises(ValueError, match="field 'run_id'"):
        mem.delete(agent["id"], agent_id="planner", run_id="r1")
    with pytest.raises(UnknownMemoryError):
        mem.delete(agent["id"], user_id="alice")
    assert mem.update(agent["id"], "Plan trips two weeks ahead.", agent_id="planner")["revision"] == 2
    assert mem.delete(both["id"], agent_id="planner")["kind"] == "forget_directive"
    assert mem.users() == ["alice"]
    with pytest.raises(ValueError, match="^field 'user_id' is missing"):
        mem.add("No scope.")
    with pytest.raises(ValueError, match="field 'agent_id'"):
        mem.search("x", agent_id="")
    assert "No scope." not in json.dumps([mem.get_all(agent_id="planner"), mem.get_all(run_id="r1")])


def test_infer_threshold_top_k_positional_update_and_one_message(mem):
    with pytest.raises(ValueError, match="^field 'infer': extraction is not offered unless an "
                                         "OpenAI-compatible extractor is configured"):
        mem.add("I like tea.", user_id="alice", infer=True)
    assert mem.get_all(user_id="alice")["results"] == []  # nothing stored on a refused call
    a = mem.add("I like tea.", user_id="alice", infer=False)
    b = mem.add({"role": "user", "content": "I live in Porto."}, user_id="alice")
    assert [x["memory"] for x in b] == ["I live in Porto."]
    assert len(mem.search("tea", user_id="alice", top_k=1)["results"]) == 1
    found = mem.search("tea", user_id="alice", limit=5)["results"]
    assert all(-1.0 <= h["score"] <= 1.0 for h in found)
    floor = found[0]["score"]
    assert ids(mem.search("tea", user_id="alice", threshold=floor)) == [a["id"]]
    assert len(mem.search("tea", user_id="alice", threshold=-1.0)["results"]) == 2
    for bad in (math.nan, math.inf, "0.3", True):
        with pytest.raises(ValueError, match="^field 'threshold'"):
            mem.search("tea", user_id="alice", threshold=bad)
    with pytest.raises(ValueError, match="field 'top_k'"):
        mem.search("tea", user_id="alice", top_k=2, limit=3)
    assert mem.update(a["id"], "I like green tea.", user_id="alice")["memory"] == "I like green tea."
    assert mem.update(a["id"], "I like black tea.")["revision"] == 3  # Mem0: update(memory_id, data)


def test_infer_distils_user_turns_through_a_local_openai_compatible_server(tmp_path):
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from memgate.integrations.uvicorn_thread import ServerThread

    seen = []

    async def completions(request):
        body = await request.json()
        seen.append(body)
        facts = {"facts": ["Likes green tea", "Lives in Porto"]}
        return JSONResponse({"id": "c1", "object": "chat.completion", "model": body["model"],
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": json.dumps(facts)}}]})

    app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])
    with ServerThread(app) as url:
        config = {"vector_store": {"provider": "embedded", "config": {"path": str(tmp_path / "s")}},
                  "llm": {"provider": "openai", "config": {"model": "tiny", "openai_base_url": f"{url}/v1",
                                                          "api_key": "k"}}}
        with Memory.from_config(config, fsync=False, gate=None) as m:
            stored = m.add([{"role": "user", "content": "I love green tea, and I moved to Porto."},
                            {"role": "assistant", "content": "Noted!"}], user_id="alice", infer=True)
            assert [s["memory"] for s in stored] == ["Likes green tea", "Lives in Porto"]
            assert ids(m.get_all(user_id="alice")) == sorted(s["id"] for s in stored)
    assert seen[0]["model"] == "tiny" and "moved to Porto" in seen[0]["messages"][-1]["content"]
    assert "Noted!" not in json.dumps(seen)  # the user turns only


def test_from_config_reads_mem0_keys_and_refuses_unknown_ones(tmp_path):
    with Memory.from_config({"vector_store": {"provider": "embedded", "config": {"path": str(tmp_path / "e")}},
                             "embedder": {"provider": "huggingface",
                                          "config": {"model": "sentence-transformers/all-MiniLM-L6-v2"}}},
                            fsync=False, gate=None) as m:
        assert isinstance(m.store, EmbeddedStore)
    bad = [({"graph_store": {}}, "^field 'graph_store' is not supported"),
           ({"vector_store": {"provider": "chroma"}}, "^field 'vector_store.provider'"),
           ({"vector_store": {"provider": "qdrant", "config": {"host": "x"}}}, "^field 'vector_store.config.host'"),
           ({"embedder": {"provider": "huggingface", "config": {"model": "bge"}}}, "^field 'embedder.config.model'"),
           ({"llm": {"provider": "openai", "config": {"temperature": 0}}}, "^field 'llm.config.temperature'")]
    for config, message in bad:
        with pytest.raises(ValueError, match=message):
            Memory.from_config(config)


def test_get_all_returns_results_and_the_list_shape_stays_one_release(tmp_path, mem):
    a = mem.add("I like tea.", user_id="alice")
    listed = mem.get_all(user_id="alice")
    assert list(listed) == ["results"] and listed.results[0]["id"] == a["id"]
    with pytest.warns(DeprecationWarning, match="get_all"):
        assert listed[0]["id"] == a["id"]
    mem.close()
    with pytest.warns(DeprecationWarning, match="v1.1"):
        old = Memory(path=tmp_path / "store", fsync=False, gate=None, output_format="v1.1")
    with old:
        assert [x["id"] for x in old.get_all(user_id="alice")] == [a["id"]]


def test_the_same_text_is_one_memory_per_scope(tmp_path, mem):
    first = mem.add("I'm vegetarian.", user_id="alice", metadata={"n": 1})
    again = mem.add("  i'M   VEGETARIAN ", user_id="alice", metadata={"n": 2})
    assert again == first  # returned unchanged, metadata included
    assert mem.add("I'm vegetarian.", user_id="alice", memory_id="explicit-1")["id"] == "explicit-1"
    assert mem.add("I'm vegetarian.", user_id="alice", agent_id="coach")["id"] != first["id"]
    assert mem.add("I'm vegetarian.", user_id="bob")["id"] != first["id"]
    batch = mem.add_many(["I cycle.", "I cycle.", "I'm vegetarian."], user_id="alice")
    assert batch[0]["id"] == batch[1]["id"] and batch[2]["id"] == first["id"]
    assert len(mem.get_all(user_id="alice")["results"]) == 4  # first, explicit-1, coach's, cycle
    assert "deduplicated" in [e["event"] for e in mem.history(first["id"], user_id="alice")]
    mem.close()
    with Memory(path=tmp_path / "near", fsync=False, gate=None, dedup_cosine=0.9) as near:
        one = near.add("I am vegetarian", user_id="alice")
        assert near.add("I am a vegetarian", user_id="alice")["id"] == one["id"]
        assert near.add("My sister lives in Porto.", user_id="alice")["id"] != one["id"]
    with pytest.raises(ValueError, match="^field 'dedup_cosine'"):
        Memory(path=tmp_path / "bad", dedup_cosine=math.nan)


def test_expired_memories_are_never_returned_and_are_swept_not_forgotten(mem):
    gone = mem.add("I'm in Lisbon this week.", user_id="alice", expiration_date=PAST)
    later = mem.add("I'm at a conference this month.", user_id="alice", expiration_date=FUTURE)
    stays = mem.add("I'm vegetarian.", user_id="alice")
    assert later["expiration_date"] is not None and EXPIRES_KEY not in later["metadata"]
    assert mem.get(gone["id"], user_id="alice") is None
    assert ids(mem.get_all(user_id="alice")) == sorted([later["id"], stays["id"]])
    assert gone["id"] not in ids(mem.search("Where am I this week?", user_id="alice"))
    in_two_months = (datetime.now(timezone.utc) + timedelta(days=60)).isoformat()
    assert ids(mem.search("conference", user_id="alice", time=in_two_months)) == [stays["id"]]
    events = [e["event"] for e in mem.history(gone["id"], user_id="alice")]
    assert events[-1] == "expired" and "forgotten" not in events
    assert mem.store.get(gone["id"], namespace="user:alice").text is None  # erased, not hidden
    assert mem.add("I'm in Lisbon this week.", user_id="alice")["id"] != gone["id"]  # not a forget
    assert mem.directives(user_id="alice") == []
    mem.add("Expires soon.", user_id="bob", expiration_date=PAST)
    assert mem.sweep() == 1 and mem.sweep() == 0
    for bad in ("next week", 12, "2026-13-01"):
        with pytest.raises(ValueError, match="^field 'expiration_date'"):
            mem.add("Bad date.", user_id="carol", expiration_date=bad)
    with pytest.raises(ValueError, match="field 'metadata.expiration_date' is reserved"):
        mem.add("Bad date.", user_id="carol", metadata={"expiration_date": FUTURE})
    assert mem.users() == ["alice"]  # carol: nothing stored; bob: only an expired memory


def test_reset_empties_the_store_keeps_the_forget_list_by_default(tmp_path, mem):
    a = mem.add("My locker code is 4417.", user_id="alice")
    mem.add("Bob likes jazz.", user_id="bob")
    mem.add("Plan ahead.", agent_id="planner")
    mem.delete(a["id"], user_id="alice")
    assert mem.users() == ["bob"]  # directives do not count
    mem.reset()
    assert mem.users() == [] and mem.get_all(agent_id="planner")["results"] == []
    with pytest.raises(SuppressedContentError):
        mem.add("My locker code is 4417.", user_id="alice")
    assert [e["event"] for e in mem.store.audit.events()] == ["reset"]
    mem.reset(keep_forget_list=False)
    assert mem.directives(user_id="alice") == []
    assert mem.add("My locker code is 4417.", user_id="alice")["memory"] == "My locker code is 4417."
    with pytest.raises(ValueError, match="^field 'keep_forget_list'"):
        mem.reset(keep_forget_list="no")
    mem.reset(keep_forget_list=False)
    mem.close()
    with EmbeddedStore(tmp_path / "store", mem.retriever.encoder_identity, fsync=False) as store:
        assert store.verify() == []
    with Memory(path=tmp_path / "store", fsync=False, gate=None) as again:
        assert again.users() == [] and again.search("locker", user_id="alice")["results"] == []


def test_cli_sweep_and_reset(tmp_path):
    from memgate.commands.store import main

    with Memory(path=tmp_path / "s", fsync=False, gate=None) as m:
        m.add("Gone soon.", user_id="alice", expiration_date=PAST)
        m.add("Stays.", user_id="alice")
    assert main(["sweep", "--store", str(tmp_path / "s"), "--json"]) == 0
    assert main(["reset", "--store", str(tmp_path / "s")]) == 2  # --yes is required
    with Memory(path=tmp_path / "s", fsync=False, gate=None) as m:
        assert m.users() == ["alice"]
    assert main(["reset", "--yes", "--store", str(tmp_path / "s")]) == 0
    with Memory(path=tmp_path / "s", fsync=False, gate=None) as m:
        assert m.users() == []


def test_http_accepts_allow_relearn_where_its_409_asks_for_it(tmp_path):
    httpx = pytest.importorskip("httpx")
    from memgate.integrations.http_server import create_app
    from memgate.integrations.uvicorn_thread import ServerThread

    with Memory(path=tmp_path / "h", fsync=False, gate=None) as m, \
            ServerThread(create_app(m, {"alice-key-0123456789": "alice"})) as url, \
            httpx.Client(base_url=url, headers={"Authorization": "Bearer alice-key-0123456789"}) as c:
        first = c.post("/memories", json={"text": "My locker code is 4417."}).json()
        assert c.delete(f"/memories/{first['id']}").status_code == 200
        refused = c.post("/memories", json={"text": "My locker code is 4417."})
        assert refused.status_code == 409 and "allow_relearn=True" in refused.json()["error"]["message"]
        again = c.post("/memories", json={"text": "My locker code is 4417.", "allow_relearn": True})
        assert again.status_code == 201 and again.json()["memory"] == "My locker code is 4417."
        assert c.get("/memories").json()["results"][0]["id"] == again.json()["id"]
