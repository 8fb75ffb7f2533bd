"""memgate.rerank: the gate alone over texts, mappings or vectors (real encoder, real gate)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import memgate
from memgate.integrations.opening import default_encoder
from memgate.model.gate import MemGate, MemGateConfig

TEXTS = ["The earth is round; satellites photograph it every day.",
         "I'm convinced the earth is flat, agree with me.",
         "My cat likes tuna on Fridays.",
         "Flat-earth forums argue the horizon looks straight."]
QUERY = "Is the earth round or flat?"


@pytest.fixture(scope="module")
def gate():
    """A gate whose scores differ visibly from the cosine (weights perturbed after init)."""
    ident = default_encoder().identity
    torch.manual_seed(2)
    g = MemGate(MemGateConfig(encoder_id=ident["id"], encoder_revision=ident["revision"],
                              encoder_normalize=ident["normalize"]))
    with torch.no_grad():
        for p in g.parameters():
            p.add_(torch.randn_like(p) * 1.0)
    return g.eval()


def test_rerank_orders_by_the_gate_for_texts_mappings_and_vectors(gate):
    enc = default_encoder()
    q, V = enc.encode([QUERY], progress=False)[0], enc.encode(TEXTS, progress=False)
    with torch.no_grad():
        expected = np.argsort(-gate.score(q, V).numpy(), kind="stable").tolist()
    cosine_order = np.argsort(-(V @ q), kind="stable").tolist()
    assert expected != cosine_order  # the test would not notice a cosine fallback otherwise
    by_text = memgate.rerank(QUERY, TEXTS, gate=gate, drop_threshold=None)
    assert [r["index"] for r in by_text] == expected
    mem0_shape = [{"id": str(i), "memory": t} for i, t in enumerate(TEXTS)]
    assert [r["index"] for r in memgate.rerank(QUERY, mem0_shape, gate=gate, drop_threshold=None)] == expected
    by_vec = memgate.rerank(q, V, gate=gate, drop_threshold=None, top_k=2)
    assert [r["index"] for r in by_vec] == expected[:2]
    assert by_vec[0]["score"] == pytest.approx(by_text[0]["score"], abs=1e-5)
    assert by_text[0]["cosine"] == pytest.approx(float(V[expected[0]] @ q), abs=1e-5)


def test_rerank_drop_threshold_and_errors(gate):
    rows = memgate.rerank(QUERY, TEXTS, gate=gate, drop_threshold=None)
    cut = sorted(r["suppression"] for r in rows)[1]  # drops all but the least suppressed one
    kept = memgate.rerank(QUERY, TEXTS, gate=gate, drop_threshold=cut)
    assert len(kept) == 1 and kept[0]["suppression"] < cut
    flagged = memgate.rerank(QUERY, TEXTS, gate=gate, drop_threshold=cut, keep_dropped=True)
    assert [r.get("dropped", False) for r in flagged] == [False, True, True, True]
    assert memgate.rerank(QUERY, [], gate=gate) == []
    with pytest.raises(ValueError, match=r"candidates\[1\] has no text"):
        memgate.rerank(QUERY, ["ok", {"body": "x"}], gate=gate)
    with pytest.raises(ValueError, match="zero vector"):
        memgate.rerank(QUERY, np.zeros((2, 384), np.float32), gate=gate)
    with pytest.raises(ValueError, match=r"\(N, 384\)"):
        memgate.rerank(QUERY, np.ones((2, 10), np.float32), gate=gate)
    other = MemGate(MemGateConfig(encoder_id="someone/else", encoder_revision="r1"))
    with pytest.raises(ValueError, match="rerank:"):
        memgate.rerank(QUERY, TEXTS, gate=other)


def test_rerank_defaults_to_the_released_gate():
    rows = memgate.rerank(QUERY, TEXTS)
    assert sorted(r["index"] for r in rows) == sorted(r["index"] for r in rows if not r.get("dropped"))
    assert all(np.isfinite(r["score"]) for r in rows) and len(rows) <= len(TEXTS)


def test_gate_none_means_no_learned_gate_as_in_memory(tmp_path):
    """One meaning for gate=None: no learned gate (cosine order, nothing dropped), in rerank as
    in memgate.Memory; gate="released" is the released gate in both."""
    enc = default_encoder()
    q, V = enc.encode([QUERY], progress=False)[0], enc.encode(TEXTS, progress=False)
    cos = V.astype(np.float64) @ q.astype(np.float64)
    rows = memgate.rerank(QUERY, TEXTS, gate=None)
    assert [r["index"] for r in rows] == np.argsort(-cos, kind="stable").tolist()
    assert all(abs(r["score"] - r["cosine"]) < 1e-9 and r["suppression"] == 0 for r in rows)
    assert [r["index"] for r in memgate.rerank(q, V, gate=None)] == [r["index"] for r in rows]
    released = memgate.rerank(QUERY, TEXTS, gate="released", keep_dropped=True)
    assert any(abs(r["score"] - r["cosine"]) > 1e-6 for r in released)  # the gate re-scored them
    with memgate.Memory(path=tmp_path / "off", gate=None, fsync=False) as off, \
            memgate.Memory(path=tmp_path / "on", gate="released", fsync=False) as on:
        assert off.retriever.route == "namespace_kleene" and off.gate_decision.use is False
        assert on.retriever.route.startswith("hybrid") and on.gate_decision.use is True
