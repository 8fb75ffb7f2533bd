"""The same retrieval on every store kind (issue 37): the worked example (examples/worked_example.py,
with its seeded gate, scoped supersession, policy exclusion, forget and allowed actions) and a
slice of a LoCoMo report conversation (real MiniLM embeddings) return the same ids in the same
order, the same exclusions with their reasons and the same actions on the embedded, Qdrant and
PostgreSQL stores; and one sequence of writes leaves the same records, field for field."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from memgate.contract.records import QueryContext
from memgate.datasets.real.locomo import read_locomo
from memgate.datasets.real.testing import require_real_data
from memgate.model.gate import MemGate, MemGateConfig
from memgate.retriever import GatedRetriever, RetrieverConfig, StoredMemory
from tests.retriever.store_helpers import DIM, IDENT, KINDS, make_store, supersession_and_derivation_writes

REPO = Path(__file__).resolve().parents[2]


def summary(result) -> dict:
    """What must not differ between stores (timings and query ids aside)."""
    return {
        "items": [(it.memory_id, it.namespace, it.rank, it.lifecycle, it.admissible, it.action,
                   it.needs_review) for it in result.items],
        "scores": [(it.cosine, it.gate_score or 0.0) for it in result.items],
        "excluded": [(e.memory_id, e.reasons, e.cosine_rank) for e in result.excluded],
        "dropped": [d.memory_id for d in result.dropped], "counts": result.excluded_counts,
        "candidates": result.candidates, "unresolved_kept": result.unresolved_kept,
    }


def same(runs: list, first: list, kind: str) -> None:
    """Equal summaries; scores within 1e-6 (Qdrant re-normalises what it stores: its float32
    vectors, and so the exact cosines, may differ from the others' in the last bits)."""
    assert len(runs) == len(first)
    for i, (a, b) in enumerate(zip(runs, first)):
        for key in a:
            if key == "scores":
                np.testing.assert_allclose(np.asarray(a[key]), np.asarray(b[key]), atol=1e-6)
            else:
                assert a[key] == b[key], f"{kind}, query {i}, {key}:\n{a[key]}\n{b[key]}"


def worked_example():
    spec = importlib.util.spec_from_file_location("worked_example", REPO / "examples" / "worked_example.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_worked_example_is_the_same_on_every_store(tmp_path, encoder):
    example = worked_example()
    torch.manual_seed(0)
    ident = encoder.identity
    gate = MemGate(MemGateConfig(encoder_id=ident["id"], encoder_revision=ident["revision"],
                                 encoder_normalize=ident["normalize"]))
    runs = {}
    for kind in KINDS:
        r = GatedRetriever(make_store(kind, tmp_path, name="example", identity=ident), encoder, gate=gate,
                           config=example.CONFIG)
        example.add_memories(r)
        results = []

        def ask(query_id, text, principal="alice", intent="current_state", when="2024-06-01",
                purpose="task_execution", k=4, **action_query):
            context = QueryContext(query_id=query_id, text=text, principal=principal, purpose=purpose,
                                   intent=intent, time=when)
            result = r.retrieve(text, context, k=k, **action_query)  # noqa: B023 (called in this iteration)
            results.append(summary(result))  # noqa: B023
            return result

        example.run_scenario(r, ask, say=lambda *a: None)
        runs[kind] = results
        r.close()
    first = runs[KINDS[0]]
    assert len(first) == 6 and any(s["excluded"] for s in first) and first[0]["items"]
    assert all(it[5] is not None for s in first for it in s["items"])  # actions were decided
    for kind in KINDS[1:]:
        same(runs[kind], first, kind)


def test_a_locomo_report_slice_ranks_the_same_on_every_store(tmp_path, encoder):
    conv = read_locomo(require_real_data(), part="report", purpose="evaluation")[0]
    turns = conv.turns[:240]
    questions = [q for q in conv.questions if set(q.evidence) & {t.dia_id for t in turns}][:24]
    assert len(questions) >= 12
    texts = [f"{t.speaker}: {t.text}" for t in turns]
    vectors = encoder.encode(texts)
    speakers = sorted({t.speaker for t in turns})
    mems = [StoredMemory(t.dia_id, f"conv:{t.speaker}" if i % 7 == 0 else "conv", text,
                   policy_tags=("personal",) if i % 5 == 0 else ("general",), observed_at=t.created_at)
            for i, (t, text) in enumerate(zip(turns, texts))]
    config = RetrieverConfig(acl={"reader": {"conv", *(f"conv:{s}" for s in speakers)}},
                             policy_rules={"personal": {"reason": "purpose", "allow_only": ["chat"]},
                                           "general": {}})
    runs = {}
    for kind in KINDS:
        store = make_store(kind, tmp_path, name="locomo", identity=encoder.identity)
        store.add_many(mems, vectors, encoder=encoder.identity)
        store.retire(turns[3].dia_id, 1)  # some lifecycle for the Kleene exclusion
        r = GatedRetriever(store, encoder, config=config)
        out = []
        for i, q in enumerate(questions):
            ctx = QueryContext(query_id=f"{kind}-{i}", text="", principal="reader",
                               purpose=("chat", "ads")[i % 2], intent="current_state")
            out.append(summary(r.retrieve(q.question, ctx, k=10)))
        runs[kind] = out
        r.close()
    first = runs[KINDS[0]]
    assert all(len(s["items"]) == 10 for s in first) and any(s["counts"] for s in first)
    for kind in KINDS[1:]:
        same(runs[kind], first, kind)


def test_one_write_sequence_leaves_the_same_records_on_every_store(tmp_path):
    rng = np.random.default_rng(4)
    V = rng.normal(size=(10, DIM))
    stores = [make_store(kind, tmp_path) for kind in KINDS]
    for s in stores:
        supersession_and_derivation_writes(s, V)
        s.add(StoredMemory("src", "bob", "the same id in another namespace"), V[6], encoder=IDENT)
        s.forget("d1", StoredMemory("d1-f", "alice", "forget the plan"), V[7], encoder=IDENT)
    first = stores[0]
    keys = sorted((e.namespace, e.memory_id) for e in first.changes_since(0)[1])
    for s in stores[1:]:
        assert s.ids() == first.ids() and s.version() == first.version()
        for ns, mid in keys:
            assert s.get(mid, namespace=ns).to_dict() == first.get(mid, namespace=ns).to_dict(), (ns, mid)
        entries = lambda st: sorted((e.namespace, e.memory_id, e.alive, e.lifecycle_state, e.superseded_in)  # noqa: E731
                                    for e in st.changes_since(0)[1])
        assert entries(s) == entries(first)
        unkeyed = lambda st: sorted((e["namespace"], e["memory_id"], e["kind"], e["n"], e["version"])  # noqa: E731
                                    for e in st.export_suppression()["entries"])  # (each store its own key)
        assert unkeyed(s) == unkeyed(first)
        assert s.verify() == []
    for s in stores:
        s.close()


@pytest.mark.parametrize("kind", KINDS)
def test_the_gated_retriever_opens_every_store_kind(tmp_path, kind):
    from tests import pg_test_server
    from tests.retriever.store_helpers import HashEncoder

    if kind == "postgres":
        r = GatedRetriever.open_postgres(pg_test_server.url(), HashEncoder(), schema=pg_test_server.schema_for(tmp_path),
                                         config=RetrieverConfig(acl={"a": {"a"}}))
    else:
        r = GatedRetriever(make_store(kind, tmp_path), HashEncoder(), config=RetrieverConfig(acl={"a": {"a"}}))
    with r:
        r.add("hello", namespace="a", principal="a", memory_id="m")
        assert r.retrieve("hello", QueryContext(query_id="q", text="", principal="a"), k=1).ids == ["m"]
