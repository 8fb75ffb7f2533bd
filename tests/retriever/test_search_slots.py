"""The embedded store's array search (``search_slots``: hits as vector slots, the audit's
unfiltered ranking from the same call) returns what the protocol's ``search`` path returns:
the same items, scores, gate drops, excluded records with their cosine ranks, and counts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("hnswlib")

from memgate.contract.admissibility import SupersessionScope  # noqa: E402
from memgate.contract.records import QueryContext  # noqa: E402
from memgate.model.gate import MemGate, MemGateConfig  # noqa: E402
from memgate.retriever import EmbeddedStore, GatedRetriever, RetrieverConfig, StoredMemory, Supersedes  # noqa: E402
from memgate.retriever.vectors import top_by_score  # noqa: E402
from tests.retriever.store_helpers import DIM, IDENT, HashEncoder, vec  # noqa: E402

POLICY = {"personal": {}, "roleplay": {"reason": "jailbreak", "deny": ["task_execution"]}}
SIZES = {"big": 700, "s1": 60, "s2": 40, "s3": 25}


class ProtocolSearchStore(EmbeddedStore):
    """The same store seen through ``MemoryStore.search`` only (the path the other stores take)."""

    @property
    def search_slots(self):
        raise AttributeError("search_slots")


def _build(path) -> None:
    rng = np.random.default_rng(1)
    store = EmbeddedStore(path, IDENT, fsync=False, audit=None)
    scope = SupersessionScope(valid_from="2024-05-01")
    for ns, n in SIZES.items():
        memories, last = [], None
        for i in range(n):
            tags = ["roleplay"] if rng.random() < 0.1 else (["personal"] if rng.random() < 0.2 else None)
            sup = (Supersedes(last, scope),) if last and rng.random() < 0.08 else ()
            memories.append(StoredMemory(f"{ns}-{i:04d}", ns, f"{ns} note {i}", policy_tags=tags, supersedes=sup))
            last = None if sup else f"{ns}-{i:04d}"
        store.add_many(memories, np.stack([vec(m.text) for m in memories]), encoder=IDENT)
    for i in range(0, SIZES["big"], 37):  # forgotten records (tombstones) in the graph's namespace
        directive = StoredMemory(f"f{i}", "big", "a forget directive", source_type="correction",
                                 epistemic_status="verified", evidence_strength=1.0)
        try:
            store.forget(f"big-{i:04d}", directive, vec(f"forget {i}"), encoder=IDENT)
        except Exception:  # noqa: BLE001 - superseded away already
            continue
    store.close()


def _run(store, gate, exact: bool, k: int) -> list:
    config = RetrieverConfig(policy_rules=POLICY, exact_search=exact, drop_threshold=0.05)
    retriever = GatedRetriever(store, HashEncoder(), gate=gate, config=config)
    out = []
    for c, namespaces in enumerate((frozenset({"big"}), frozenset(SIZES), frozenset({"s1", "s3"}))):
        for j in range(4):
            ctx = QueryContext(query_id=f"q{c}-{j}", text="", principal="u", namespaces=namespaces,
                               purpose="task_execution", intent="current_state", time="2024-06-01")
            r = retriever.retrieve(f"query {c} {j}", ctx, k=k)
            out.append(([(i.memory_id, i.namespace, i.score, i.cosine, i.gate_score) for i in r.items],
                        [(e.memory_id, e.namespace, e.reasons, e.lifecycle, e.cosine_rank) for e in r.excluded],
                        [(d.memory_id, d.suppression) for d in r.dropped], r.excluded_counts))
    return out


@pytest.mark.parametrize("exact", [False, True])
def test_array_search_returns_what_the_protocol_search_returns(tmp_path, exact):
    _build(tmp_path / "s")
    torch.manual_seed(0)
    gate = MemGate(MemGateConfig(dim=DIM, hidden=32, encoder_id=IDENT["id"], encoder_revision=IDENT["revision"],
                                 encoder_normalize=True)).eval()
    for g, k in ((gate, 10), (None, 10), (gate, 3)):
        fast = EmbeddedStore(tmp_path / "s", IDENT, fsync=False, audit=None, ann_threshold=300)
        got = _run(fast, g, exact, k)
        assert fast._backend.ann is not None and (exact or fast._backend.ann.parts)  # the graph path ran
        fast.close()
        plain = ProtocolSearchStore(tmp_path / "s", IDENT, fsync=False, audit=None, ann_threshold=300)
        want = _run(plain, g, exact, k)
        plain.close()
        assert got == want
        assert any(row[1] for row in got)  # excluded records were logged


def test_top_by_score_orders_ties_by_id_with_or_without_them():
    rng = np.random.default_rng(3)
    ids = [f"m{i:03d}" for i in rng.permutation(300)]
    id_rank = np.empty(300, dtype=np.int64)
    id_rank[sorted(range(300), key=ids.__getitem__)] = np.arange(300)
    for scores in (rng.random(300), np.round(rng.random(300), 1)):  # distinct, then many ties
        pos = rng.permutation(300)[:120]
        got, got_scores = top_by_score(ids, pos, scores[pos], 50)
        want = pos[np.lexsort((id_rank[pos], -scores[pos]))][:50]
        assert got.tolist() == want.tolist() and got_scores.tolist() == scores[want].tolist()
