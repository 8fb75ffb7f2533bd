"""memgate.Memory: the two-concept facade over the gated retriever (real encoder, real stores)."""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from memgate import Memory
from memgate.integrations import opening
from memgate.integrations.gate_default import MAX_REPORT_DROP, REQUIRED_GUARDS, gate_default
from memgate.retriever import EmbeddedStore, GatedRetriever, UnknownMemoryError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def mem(tmp_path):
    with Memory(path=tmp_path / "store", fsync=False) as m:
        yield m


def test_quickstart_round_trip(mem):
    a = mem.add("I'm vegetarian and allergic to peanuts.", user_id="alice", metadata={"topic": "food"})
    mem.add("My sister Ana lives in Porto.", user_id="alice", metadata={"topic": "family"})
    found = mem.search("What should I cook for dinner?", user_id="alice", limit=5)
    hits = found["results"]
    assert hits[0]["id"] == a["id"] and hits[0]["metadata"] == {"topic": "food"}
    assert hits[0]["action"] == "answer"  # agent_default: the user's own statement, low risk
    assert found["query_id"].startswith("q-") and found["query_id"] != mem.search("x", user_id="alice")["query_id"]
    assert found.query_id == found["query_id"] and found["forgotten_relevant"] is False
    mem.report_exposed(found["query_id"], [a["id"]])
    assert mem.get(a["id"], user_id="alice")["memory"] == a["memory"]
    updated = mem.update(a["id"], user_id="alice", text="I'm vegan and allergic to peanuts.",
                         metadata={"topic": "food", "diet": "vegan"})
    assert updated["revision"] == 2 and updated["metadata"]["diet"] == "vegan"
    assert [m["id"] for m in mem.get_all(user_id="alice")["results"]][0] == a["id"]
    directive = mem.delete(a["id"], user_id="alice")
    assert directive["kind"] == "forget_directive" and "forget" in directive["memory"]
    assert mem.get(a["id"], user_id="alice") is None
    after = mem.search("What should I cook for dinner?", user_id="alice")
    assert [h["kind"] for h in after["results"]] == ["memory"]  # the directive takes no slot
    assert a["id"] not in [h["id"] for h in after["results"]]
    assert [d["id"] for d in mem.directives(user_id="alice")] == [directive["id"]]
    assert directive["id"] not in [m["id"] for m in mem.get_all(user_id="alice")["results"]]
    events = [e["event"] for e in mem.history(a["id"], user_id="alice")]
    assert events[0] == "stored" and "updated" in events and "retrieved" in events
    assert events[-1] == "forgotten"
    with pytest.raises(Exception, match="forgotten"):  # a tombstone cannot be revived
        mem.retriever.update(a["id"], 3, principal="alice", kind="x")


def test_forget_directives_take_no_result_slot_and_are_flagged_when_relevant(mem):
    kept = [mem.add(t, user_id="alice")["id"] for t in ("I live in Lisbon.", "I cycle to work.")]
    locker = mem.add("My locker code is 4417.", user_id="alice")
    first = mem.delete(locker["id"], user_id="alice")
    second = mem.delete(kept[1], user_id="alice")  # two forgets: two directives
    for limit in (1, 10):
        found = mem.search("What is my locker code?", user_id="alice", limit=limit)
        assert [h["id"] for h in found["results"]] == [kept[0]]  # never a directive, not twice
        assert found["forgotten_relevant"] is True  # a directive ranked above the memory
    assert mem.search("Where do I live?", user_id="alice")["forgotten_relevant"] is False
    # the old behaviour, the retriever without the directives set apart: they take result slots
    from memgate.contract.records import QueryContext
    ctx = QueryContext(query_id="q-old", text="", principal="alice", namespaces=frozenset({"user:alice"}),
                       intent="current_state", time="2026-01-01T00:00:00+00:00")
    plain = mem.retriever.retrieve("What is my locker code?", ctx, k=3)
    assert {first["id"], second["id"]} <= set(plain.ids)
    assert [m["id"] for m in mem.get_all(user_id="alice")["results"]] == [kept[0]]
    assert {d["id"] for d in mem.directives(user_id="alice")} == {first["id"], second["id"]}
    assert mem.get(first["id"], user_id="alice")["kind"] == "forget_directive"  # still readable by id


def test_users_are_isolated_and_ids_are_no_oracle(mem):
    a = mem.add("Alice's door code is 4417.", user_id="alice")
    b = mem.add("Bob's door code is 9021.", user_id="bob")
    for k in (1, 10):
        assert [h["id"] for h in mem.search("Bob's door code", user_id="alice", limit=k)["results"]] == [a["id"]]
    assert mem.get(b["id"], user_id="alice") is None
    unknown_msg = None
    for memory_id in (b["id"], "no-such-id"):
        calls = [lambda: mem.update(memory_id, user_id="alice", text="mine now"),  # noqa: B023 (called below, in this iteration)
                 lambda: mem.delete(memory_id, user_id="alice"),  # noqa: B023
                 lambda: mem.history(memory_id, user_id="alice")]  # noqa: B023
        for call in calls:
            with pytest.raises(UnknownMemoryError) as err:
                call()
            msg = str(err.value).replace(memory_id, "<id>")
            unknown_msg = unknown_msg or msg
            assert msg == unknown_msg  # the same answer for another user's id and a free one
    with pytest.raises(UnknownMemoryError):
        mem.add("Summary of Bob.", user_id="alice", derived_from=[b["id"]])
    with pytest.raises(UnknownMemoryError):
        mem.add("Bob moved.", user_id="alice", supersedes=[b["id"]])
    assert mem.delete_all(user_id="alice") == [a["id"]]
    assert mem.get(b["id"], user_id="bob")["memory"] == b["memory"]
    for bad in ("", None, "a\x00b", "x" * 300):
        with pytest.raises(ValueError, match="user_id"):
            mem.search("q", user_id=bad)


def test_metadata_is_stored_filterable_before_truncation_and_erased(tmp_path, mem):
    notes = mem.add_many([{"text": f"Note {i}: the quarterly budget review moved to room {100 + i}.",
                           "metadata": {"kind": "budget", "n": i}} for i in range(30)], user_id="u")
    assert [n["metadata"]["n"] for n in notes] == list(range(30))
    odd = mem.add("Grandma's apple pie recipe uses cinnamon.", user_id="u",
                  metadata={"kind": "recipe", "tags": ["baking", "family"], "secret": "ZQX-51"})
    # the filtered memory is the worst cosine match: a filter after truncation would return nothing
    plain = mem.search("quarterly budget review room", user_id="u", limit=30)["results"]
    assert odd["id"] not in [h["id"] for h in plain]
    for flt in ({"kind": "recipe"}, {"tags": "baking"}, {"tags": {"in": ["x", "family"]}}):
        hits = mem.search("quarterly budget review room", user_id="u", limit=1, filters=flt)["results"]
        assert [h["id"] for h in hits] == [odd["id"]], flt
    assert len(mem.search("budget", user_id="u", limit=50, filters={"n": {"gte": 25}})["results"]) == 5
    assert len(mem.get_all(user_id="u", filters={"n": {"$lt": 3}})["results"]) == 3
    assert mem.search("budget", user_id="u", filters={"kind": "nothing"})["results"] == []
    with pytest.raises(ValueError, match=r"filters\['n'\]: unknown operator"):
        mem.search("budget", user_id="u", filters={"n": {"near": 3}})
    with pytest.raises(ValueError, match="attributes.x"):
        mem.add("bad", user_id="u", metadata={"x": float("nan")})
    with pytest.raises(ValueError, match="attributes"):
        mem.add("bad", user_id="u", metadata={"x": "y" * 20_000})
    mem.delete(odd["id"], user_id="u")
    db = sqlite3.connect(tmp_path / "store" / "store.sqlite")
    dump = "\n".join(db.iterdump())
    assert "ZQX-51" not in dump and "cinnamon" not in dump


def test_gate_default_rule(tmp_path):
    # the committed release (issue 44's mask_risk gate, trained step 835) records all four guards
    # passed at its exported step and a LoCoMo-report drop within the budget: on by default
    released = gate_default()
    assert released.use is True, released.reason
    assert released.reason.startswith("every selection guard passed at trained step 835")

    def card(selection, drop=None, name="card"):
        d = tmp_path / name
        d.mkdir()
        (d / "config.json").write_text(json.dumps({"export": {"selection": selection}}))
        if drop is not None:
            (d / "headline.json").write_text(json.dumps({"locomo_report": {"drop": drop}}))
        return d

    def guards(failed=(), step=86):
        """A release-format selection: every guard by name, at ``step``."""
        return {"step": step, "passed": not failed, "guard": {
            "passed": not failed, **{g: {"guard": g, "source": "gatemem" if g.startswith("gatemem") else g,
                                         "passed": g not in failed} for g in REQUIRED_GUARDS}}}

    assert REQUIRED_GUARDS == ("locomo", "gatemem_routes", "gatemem", "text_risk")
    on = gate_default(card(guards(), 0.005, "ok"))
    assert on.use is True and "trained step 86" in on.reason
    assert gate_default(card(guards(), MAX_REPORT_DROP, "edge")).use is True
    high = gate_default(card(guards(), 0.02, "high"))
    assert not high.use and "0.0200 exceeds" in high.reason
    assert "no LoCoMo-report" in gate_default(card(guards(), None, "nodrop")).reason
    for name in REQUIRED_GUARDS:  # each new guard alone switches it off
        off = gate_default(card(guards(failed=(name,)), 0.0, f"failed-{name}"))
        assert not off.use and f"the {name} guard as failed" in off.reason
    step0 = gate_default(card(guards(step=0), 0.0, "step0"))  # the fallback: ranks like the cosine
    assert not step0.use and "step-0 gate" in step0.reason
    # a card of the two-guard rule (before the split) records neither new guard: off
    old = {"step": 86, "guard": {"locomo": {"source": "locomo", "passed": True},
                                 "gatemem": {"source": "gatemem", "passed": True}, "passed": True}}
    off = gate_default(card(old, 0.004, "two-guards"))
    assert not off.use and "records no gatemem_routes / text_risk selection guard" in off.reason
    listed = {"step": 86, "guards": [{"guard": g, "source": "gatemem", "passed": True} for g in REQUIRED_GUARDS]}
    assert gate_default(card(listed, 0.0, "listed")).use is True  # a list names each guard by "guard"
    assert not gate_default(tmp_path / "missing").use


def test_the_released_gate_is_on_by_default_and_gate_none_turns_it_off(tmp_path, caplog):
    """The released card passes the rule: Memory() opens gated and says nothing about a gate being
    off; gate=None opens ungated (the cosine after namespace support and Kleene exclusion)."""
    opening._said.discard("gate-off")
    with caplog.at_level(logging.INFO, logger="memgate"):
        with Memory(path=tmp_path / "on", fsync=False) as m:
            assert m.gate_decision.use is True and m.retriever.gate is not None
    assert not [r for r in caplog.records if "learned gate is off" in r.getMessage()]
    with Memory(path=tmp_path / "off", gate=None, fsync=False) as m:
        assert m.retriever.gate is None


def test_gate_off_is_said_once(tmp_path, caplog, monkeypatch):
    from memgate.integrations.gate_default import GateDecision

    off = GateDecision(False, "the model card records no LoCoMo-report recall drop", None)
    monkeypatch.setattr(opening, "gate_default", lambda: off)  # a card that fails the rule
    opening._said.discard("gate-off")
    with caplog.at_level(logging.INFO, logger="memgate"):
        for name in ("a", "b"):
            with Memory(path=tmp_path / name, fsync=False) as m:
                assert m.retriever.gate is None and m.gate_decision.use is False
    said = [r for r in caplog.records if "learned gate is off" in r.getMessage()]
    assert len(said) == 1 and off.reason in said[0].getMessage()


def test_explicit_gate_is_used(tmp_path):
    with Memory(path=tmp_path / "g", gate=ROOT / "checkpoints" / "memgate-minilm-l6", fsync=False) as m:
        m.add("The dentist appointment is on Tuesday.", user_id="u")
        hits = m.search("When is the dentist?", user_id="u")
        assert m.retriever.gate is not None and hits["route"].startswith("hybrid")
        assert hits["results"][0]["gate_score"] is not None


def test_preset_table_in_docs_matches_the_policy():
    from memgate.integrations.preset_table import preset_table

    doc = (ROOT / "docs" / "integrations" / "memory.md").read_text(encoding="utf-8")
    assert preset_table() in doc


def test_stores_and_retriever_are_context_managers(tmp_path):
    from memgate.integrations.opening import default_encoder

    enc = default_encoder()
    with EmbeddedStore(tmp_path / "s", enc.identity, fsync=False) as store:
        with GatedRetriever(store, enc) as r:
            r.add("hello", namespace="n")
    with pytest.raises(sqlite3.ProgrammingError):
        store.get("x")


def test_qdrant_local_mode_warns_and_exits_without_traceback(tmp_path, caplog):
    pytest.importorskip("qdrant_client")
    with caplog.at_level(logging.WARNING, logger="memgate"):
        with Memory(store="qdrant", path=tmp_path / "q") as m:
            a = m.add("I park on level 3.", user_id="u", metadata={"car": "blue"})
            assert m.search("Where did I park?", user_id="u", filters={"car": "blue"})["results"][0]["id"] == a["id"]
            m.delete(a["id"], user_id="u")
            assert m.get(a["id"], user_id="u") is None
            assert [e["event"] for e in m.history(a["id"], user_id="u")][-1] == "forgotten"
    assert any("pickle" in r.getMessage() for r in caplog.records)
    # a store left open at exit used to print qdrant-client's __del__ traceback
    code = ("import sys; from memgate.retriever.stores.qdrant import QdrantStore; "
            "s = QdrantStore('c', {'id': 'x', 'revision': 'r', 'normalize': True, 'dim': 4}, "
            "path=sys.argv[1]); print('opened')")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "exit")], capture_output=True,
                         text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0 and "opened" in out.stdout
    assert "Traceback" not in out.stderr and "Exception ignored" not in out.stderr, out.stderr
