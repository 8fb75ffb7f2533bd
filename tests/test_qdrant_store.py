"""QdrantStore (issue 9): the MemoryStore protocol on Qdrant, local mode, no server.

Both stores rank identically (exact mode) on the same data; the namespace filter runs inside the
vector search and cannot be bypassed; a forgotten detail is gone from Qdrant's points and
payloads; CAS conflicts; encoder mismatch refused; record semantics match EmbeddedStore's.
"""

from __future__ import annotations

import hashlib
import itertools
import json

import numpy as np
import pytest

pytest.importorskip("qdrant_client")

from memgate.admissibility import SupersessionScope  # noqa: E402
from memgate.records import QueryContext  # noqa: E402
from memgate.retriever import (  # noqa: E402
    Applicability,
    EmbeddedStore,
    EncoderMismatchError,
    ForgottenMemoryError,
    GatedRetriever,
    Memory,
    MemoryStore,
    RetrieverConfig,
    StaleRevisionError,
    Supersedes,
)
from memgate.retriever.qdrant_store import VECTOR_NAME, QdrantStore  # noqa: E402

DIM = 16
IDENT = {"id": "fake-hash-encoder", "revision": "1", "normalize": True, "dim": DIM}
ACL = {"alice": {"alice"}, "bob": {"bob"}, "team": {"alice", "bob"}}


class FakeEncoder:
    """Deterministic text -> unit vector (a hash seed); no model download, no cache."""

    def __init__(self, identity=IDENT):
        self.identity = dict(identity)

    def encode(self, texts, progress=False):
        out = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).normal(size=self.identity["dim"]).astype(np.float32)
            out.append(v / np.linalg.norm(v))
        return np.stack(out)


def fixed_clock():
    counter = itertools.count()
    return lambda: f"2026-01-01T00:00:{next(counter) % 60:02d}+00:00"


@pytest.fixture
def qstore():
    store = QdrantStore("mem", IDENT, location=":memory:", clock=fixed_clock())
    yield store
    store.close()


def both(tmp_path):
    emb = EmbeddedStore(tmp_path / "emb", IDENT, audit=None, fsync=False, clock=fixed_clock())
    qd = QdrantStore("mem", IDENT, path=tmp_path / "qd", clock=fixed_clock())
    return emb, qd


def populate(stores, n=120, seed=0):
    rng = np.random.default_rng(seed)
    vecs = rng.normal(size=(n, DIM)).astype(np.float32)
    mems = [Memory(f"m{i:03d}", ("alice", "bob", "carol")[i % 3], f"fact number {i}",
                   policy_tags=("personal",) if i % 5 else None) for i in range(n)]
    for s in stores:
        s.add_many(mems, vecs, encoder=IDENT)
    return vecs


def test_protocol_and_identity(qstore):
    assert isinstance(qstore, MemoryStore)
    assert qstore.encoder_identity == IDENT and qstore.dim == DIM
    meta = qstore.client.get_collection("mem").config.metadata
    assert meta["encoder"] == IDENT  # the encoder identity lives in the collection's metadata


def test_identical_rankings_exact_mode(tmp_path):
    emb, qd = both(tmp_path)
    vecs = populate([emb, qd])
    # some lifecycle so the Kleene exclusion has something to do
    for s in (emb, qd):
        s.retire("m004", 1)
        s.add(Memory("m900", "alice", "replacement", supersedes=(Supersedes("m009", expected_revision=1),)),
              vecs[9] + 0.01, encoder=IDENT)
    enc = FakeEncoder()
    cfg = RetrieverConfig(acl=ACL)
    r_emb, r_qd = GatedRetriever(emb, enc, config=cfg), GatedRetriever(qd, enc, config=cfg)
    rng = np.random.default_rng(1)
    for i in range(8):
        principal = ("alice", "bob", "team")[i % 3]
        text = f"query {i}"
        a = r_emb.retrieve(text, QueryContext(query_id=f"e{i}", text="", principal=principal), k=15)
        b = r_qd.retrieve(text, QueryContext(query_id=f"q{i}", text="", principal=principal), k=15)
        assert a.ids == b.ids and a.ids
        np.testing.assert_allclose([it.cosine for it in a.items], [it.cosine for it in b.items], atol=1e-6)
        assert [e.memory_id for e in a.excluded] == [e.memory_id for e in b.excluded]
        # Qdrant's own filtered search, exact: the same ranking as brute force over the support
        q = rng.normal(size=DIM)
        ns = sorted(ACL[principal])
        hits = qd.search(q, ns, 10, exact=True, exclude_states=("stale", "superseded"))
        live = [m for m in emb.get_many(emb.ids()).values()
                if m.namespace in ns and m.lifecycle_state == "current"]
        M = emb.vectors_for([m.memory_id for m in live])
        qn = q / np.linalg.norm(q)
        brute = sorted(M, key=lambda mid: -float(M[mid] @ qn))[:10]
        assert [h[0] for h in hits] == brute
    emb.close()
    qd.close()


def test_namespace_filter_cannot_be_bypassed(qstore):
    rng = np.random.default_rng(2)
    target = rng.normal(size=DIM)
    qstore.add(Memory("bob-secret", "bob", "bob's pin is 4321"), target, encoder=IDENT)
    qstore.add_many([Memory(f"a{i}", "alice", f"alice {i}") for i in range(30)],
                    rng.normal(size=(30, DIM)), encoder=IDENT)
    # the query *is* bob's vector: an after-the-fact filter over a global top-k would see it first
    hits = qstore.search(target, ["alice"], 5)
    assert len(hits) == 5 and all(h[0].startswith("a") for h in hits)
    for empty in ([], (), None, set()):
        with pytest.raises(PermissionError):
            qstore.search(target, empty, 5)
    assert qstore.search(target, "bob", 1)[0][0] == "bob-secret"
    # through the retriever: the ACL decides the namespaces, a context can only narrow them
    r = GatedRetriever(qstore, FakeEncoder(), config=RetrieverConfig(acl=ACL))
    with pytest.raises(PermissionError):
        r.retrieve("bob's pin is 4321", QueryContext(query_id="w", text="", principal="alice",
                                                     namespaces={"alice", "bob"}), k=50)
    res = r.retrieve("bob's pin is 4321", QueryContext(query_id="x", text="", principal="alice"), k=50)
    assert "bob-secret" not in res.ids and all(it.namespace == "alice" for it in res.items)


def test_forgotten_detail_gone_from_points_and_payloads(tmp_path):
    store = QdrantStore("mem", IDENT, path=tmp_path / "qd")
    r = GatedRetriever(store, FakeEncoder(), config=RetrieverConfig(acl=ACL))
    r.add("my locker code is 8675309", namespace="alice", memory_id="secret", principal="alice",
          markers=("8675309",))
    r.add("summary: locker code noted", namespace="alice", memory_id="child", principal="alice",
          derived_from=("secret",))
    old_vec = store.vectors_for(["secret"])["secret"]
    r.forget("secret", principal="alice")
    store.close()
    store = QdrantStore("mem", IDENT, path=tmp_path / "qd")  # reopened from disk
    points, _ = store.client.scroll("mem", limit=1000, with_payload=True, with_vectors=True)
    dump = json.dumps([p.payload for p in points])
    assert "8675309" not in dump and "locker code is" not in dump
    for p in points:
        v = (p.vector or {}).get(VECTOR_NAME)
        if v is not None:
            assert not np.allclose(np.asarray(v, np.float32), old_vec, atol=1e-5)
    tomb = store.get("secret")
    assert tomb.forgotten and tomb.text is None and tomb.markers == ()
    (raw,) = store.client.retrieve("mem", [p.id for p in points if p.payload.get("memory_id") == "secret"],
                                   with_vectors=True)
    assert not raw.vector  # no vector left on the tombstone
    assert store.get("child").needs_review and store.get("child").review_reasons == ("forgotten:secret",)
    assert store.get("secret-forget").forgets == "secret"
    with pytest.raises(ForgottenMemoryError):
        store.update("secret", 2, kind="x")
    assert "secret" not in [h[0] for h in store.search(old_vec, ["alice"], 10, exact=True)]
    store.close()


def test_cas_conflicts(qstore):
    rng = np.random.default_rng(3)
    qstore.add(Memory("m", "alice", "v1"), rng.normal(size=DIM), encoder=IDENT)
    m2 = qstore.update("m", 1, kind="note")
    assert m2.revision == 2
    with pytest.raises(StaleRevisionError) as err:
        qstore.update("m", 1, kind="other")
    assert err.value.current == 2 and qstore.get("m").kind == "note"
    with pytest.raises(StaleRevisionError):
        qstore.correct("m", 1, "v2", rng.normal(size=DIM), encoder=IDENT)
    with pytest.raises(StaleRevisionError):  # a stale supersession link applies nothing
        qstore.add(Memory("n", "alice", "new", supersedes=(Supersedes("m", expected_revision=1),)),
                   rng.normal(size=DIM), encoder=IDENT)
    assert qstore.get("n") is None and qstore.get("m").lifecycle_state == "current"
    v_before = qstore.version()
    with pytest.raises(StaleRevisionError):
        qstore.forget("m", Memory("f", "alice", "forget"), rng.normal(size=DIM), encoder=IDENT,
                      expected_revision=1)
    assert qstore.version() == v_before and qstore.get("m").text == "v1"


def test_encoder_mismatch_refused(tmp_path):
    store = QdrantStore("mem", IDENT, path=tmp_path / "qd")
    other = {**IDENT, "revision": "2"}
    with pytest.raises(EncoderMismatchError):
        store.add(Memory("m", "alice", "x"), np.ones(DIM), encoder=other)
    with pytest.raises(EncoderMismatchError):
        GatedRetriever(store, FakeEncoder(other))
    with pytest.raises(ValueError):
        store.add(Memory("m", "alice", "x"), np.ones(DIM + 1), encoder=IDENT)
    store.close()
    with pytest.raises(EncoderMismatchError):
        QdrantStore("mem", other, path=tmp_path / "qd")
    reopened = QdrantStore("mem", path=tmp_path / "qd")  # no identity: the collection's own
    assert reopened.encoder_identity == IDENT
    reopened.close()


def test_record_semantics_match_embedded_store(tmp_path):
    """The same operation sequence on both stores yields the same records, field for field."""
    emb, qd = both(tmp_path)
    rng = np.random.default_rng(4)
    V = rng.normal(size=(10, DIM))
    scope = SupersessionScope(subject="dentist", valid_from="2026-01-01", valid_to=None)
    for s in (emb, qd):
        s.add(Memory("src", "alice", "dentist on monday", applicability=Applicability(subject="dentist")),
              V[0], encoder=IDENT)
        s.add(Memory("d1", "alice", "plan around monday", derived_from=("src",)), V[1], encoder=IDENT)
        s.add(Memory("d2", "alice", "reminder for the plan", derived_from=("d1",)), V[2], encoder=IDENT)
        s.add(Memory("new", "alice", "dentist on tuesday", supersedes=(Supersedes("src", scope, 1),)),
              V[3], encoder=IDENT)
        s.mark_reviewed("d2", s.get("d2").revision)
        s.correct("d1", s.get("d1").revision, "plan around tuesday", V[4], encoder=IDENT)
        s.retire("new", 1)
        s.add(Memory("other", "bob", "bob's thing"), V[5], encoder=IDENT)
        with pytest.raises(PermissionError):  # supersession stays inside a namespace
            s.add(Memory("x", "bob", "cross", supersedes=(Supersedes("new"),)), V[6], encoder=IDENT)
        s.forget("d1", Memory("d1-f", "alice", "forget the plan"), V[7], encoder=IDENT)
    ids = emb.ids()
    assert ids == qd.ids()
    a, b = emb.get_many(ids), qd.get_many(ids)
    for mid in ids:
        assert a[mid].to_dict() == b[mid].to_dict(), mid
    assert emb.version() == qd.version()
    ea = {e.memory_id: (e.alive, e.lifecycle_state, e.superseded_in) for e in emb.changes_since(0)[1]}
    qa = {e.memory_id: (e.alive, e.lifecycle_state, e.superseded_in) for e in qd.changes_since(0)[1]}
    assert ea == qa
    emb.close()
    qd.close()


def test_reopened_store_rebuilds_the_index_and_excludes_by_id(tmp_path):
    store = QdrantStore("mem", IDENT, path=tmp_path / "qd")
    vecs = populate([store], n=30, seed=5)
    r = GatedRetriever(store, FakeEncoder(), config=RetrieverConfig(acl=ACL))
    before = r.retrieve("anything", QueryContext(query_id="a", text="", principal="team"), k=10)
    store.close()
    store = QdrantStore("mem", path=tmp_path / "qd")  # the vector mirror is rebuilt from the points
    r = GatedRetriever(store, FakeEncoder(), config=RetrieverConfig(acl=ACL))
    after = r.retrieve("anything", QueryContext(query_id="b", text="", principal="team"), k=10)
    assert before.ids == after.ids
    top = store.search(vecs[0], ["alice"], 3)
    assert top[0][0] == "m000"
    assert "m000" not in [h[0] for h in store.search(vecs[0], ["alice"], 3, exclude_ids=["m000"])]
    store.close()
