"""QdrantStore (issue 9): the MemoryStore protocol on Qdrant, local mode, no server.

Both stores rank identically (exact mode) on the same data; the namespace filter runs inside the
vector search and cannot be bypassed; a forgotten detail is gone from Qdrant's points and
payloads; CAS conflicts; encoder mismatch refused; record semantics match EmbeddedStore's.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("qdrant_client")

from memgate.contract.records import QueryContext  # noqa: E402
from memgate.retriever import (
    EmbeddedStore,
    EncoderMismatchError,
    ForgottenMemoryError,
    GatedRetriever,
    MemoryStore,
    RetrieverConfig,
    StaleRevisionError,
    StoredMemory,
    Supersedes,
    UnknownMemoryError,
)
from memgate.retriever.stores.postgres.store import PostgresStore  # noqa: E402
from memgate.retriever.stores.qdrant.store import VECTOR_NAME, QdrantStore  # noqa: E402
from tests.fakes import ACL, DIM, IDENT  # noqa: E402
from tests.fakes import HashEncoder as FakeEncoder  # noqa: E402
from tests.fakes import minute_clock as fixed_clock  # noqa: E402
from tests.retriever.store_helpers import supersession_and_derivation_writes  # noqa: E402


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
    mems = [StoredMemory(f"m{i:03d}", ("alice", "bob", "carol")[i % 3], f"fact number {i}",
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
        s.add(StoredMemory("m900", "alice", "replacement", supersedes=(Supersedes("m009", expected_revision=1),)),
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
    qstore.add(StoredMemory("bob-secret", "bob", "bob's pin is 4321"), target, encoder=IDENT)
    qstore.add_many([StoredMemory(f"a{i}", "alice", f"alice {i}") for i in range(30)],
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
    child = store.get("child")  # a derived record may hold the detail: it is erased with it
    assert child.forgotten and child.text is None and child.forgotten_by == "secret-forget"
    assert "locker code noted" not in dump
    assert store.get("secret-forget").forgets == "secret"
    with pytest.raises(ForgottenMemoryError):
        store.update("secret", 2, kind="x")
    assert "secret" not in [h[0] for h in store.search(old_vec, ["alice"], 10, exact=True)]
    store.close()


def test_cas_conflicts(qstore):
    rng = np.random.default_rng(3)
    qstore.add(StoredMemory("m", "alice", "v1"), rng.normal(size=DIM), encoder=IDENT)
    m2 = qstore.update("m", 1, kind="note")
    assert m2.revision == 2
    with pytest.raises(StaleRevisionError) as err:
        qstore.update("m", 1, kind="other")
    assert err.value.current == 2 and qstore.get("m").kind == "note"
    with pytest.raises(StaleRevisionError):
        qstore.correct("m", 1, "v2", rng.normal(size=DIM), encoder=IDENT)
    with pytest.raises(StaleRevisionError):  # a stale supersession link applies nothing
        qstore.add(StoredMemory("n", "alice", "new", supersedes=(Supersedes("m", expected_revision=1),)),
                   rng.normal(size=DIM), encoder=IDENT)
    assert qstore.get("n") is None and qstore.get("m").lifecycle_state == "current"
    v_before = qstore.version()
    with pytest.raises(StaleRevisionError):
        qstore.forget("m", StoredMemory("f", "alice", "forget"), rng.normal(size=DIM), encoder=IDENT,
                      expected_revision=1)
    assert qstore.version() == v_before and qstore.get("m").text == "v1"


def test_encoder_mismatch_refused(tmp_path):
    store = QdrantStore("mem", IDENT, path=tmp_path / "qd")
    other = {**IDENT, "revision": "2"}
    with pytest.raises(EncoderMismatchError):
        store.add(StoredMemory("m", "alice", "x"), np.ones(DIM), encoder=other)
    with pytest.raises(EncoderMismatchError):
        GatedRetriever(store, FakeEncoder(other))
    with pytest.raises(ValueError):
        store.add(StoredMemory("m", "alice", "x"), np.ones(DIM + 1), encoder=IDENT)
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
    for s in (emb, qd):
        supersession_and_derivation_writes(s, V)
        with pytest.raises(UnknownMemoryError):  # supersession stays inside a namespace (ids are
            s.add(StoredMemory("x", "bob", "cross", supersedes=(Supersedes("new"),)), V[6], encoder=IDENT)  # scoped)
        s.forget("d1", StoredMemory("d1-f", "alice", "forget the plan"), V[7], encoder=IDENT)
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


# ----------------------------------------------------------------------------- one search path


def test_search_filters_before_truncation(new_store):
    """The top of the unfiltered ranking is all other namespaces (and excluded states): the
    filtered search still returns k records from the readable part."""
    store = new_store()
    rng = np.random.default_rng(6)
    q = rng.normal(size=DIM)
    q /= np.linalg.norm(q)
    near = q + 0.05 * rng.normal(size=(40, DIM))  # 40 records right next to the query ...
    far = rng.normal(size=(12, DIM))  # ... and 12 anywhere
    store.add_many([StoredMemory(f"b{i:02d}", "bob", f"bob {i}") for i in range(30)], near[:30], encoder=IDENT)
    store.add_many([StoredMemory(f"s{i:02d}", "alice", f"old {i}") for i in range(10)], near[30:], encoder=IDENT)
    for i in range(10):
        store.retire(f"s{i:02d}", 1)
    store.add_many([StoredMemory(f"a{i:02d}", "alice", f"alice {i}") for i in range(12)], far, encoder=IDENT)
    top_all = store.search(q, ["alice", "bob"], 40)
    assert {h[0][0] for h in top_all} == {"b", "s"}  # the unfiltered top 40: none readable below
    hits = store.search(q, ["alice"], 5, exclude_states=("stale",))
    assert len(hits) == 5 and all(h[0].startswith("a") for h in hits)
    M = {f"a{i:02d}": far[i] / np.linalg.norm(far[i]) for i in range(12)}
    assert [h[0] for h in hits] == sorted(M, key=lambda m: -float(M[m] @ q))[:5]
    by_id = store.search(q, ["alice"], 5, exclude_ids=[f"s{i:02d}" for i in range(10)])
    assert [h[0] for h in by_id] == [h[0] for h in hits]
    # through the retriever: namespaces from the ACL, the stale records excluded by the filter
    r = GatedRetriever(store, FakeEncoder(), config=RetrieverConfig(acl=ACL))
    calls = []
    search = store.search
    asked = "search_slots" if hasattr(store, "search_slots") else "search"  # (the embedded store's array search)
    called = getattr(store, asked)

    def spy(*args, **kwargs):
        calls.append((args, kwargs))
        return called(*args, **kwargs)

    setattr(store, asked, spy)
    r.encoder.encode = lambda texts, progress=False: q[None].astype(np.float32)
    res = r.retrieve("anything", QueryContext(query_id="x", text="", principal="alice",
                                              intent="current_state"), k=5)
    assert res.ids == [h[0] for h in hits]
    (args, kwargs), *_ = calls
    assert args[1] == ["alice"] and args[2] == 5 and kwargs["exclude_states"] == ["stale"]
    # exclusions are listed where the namespace-only ranking had them, all counted
    unfiltered = [h[0] for h in search(q, ["alice"], 5)]
    assert [(e.memory_id, e.cosine_rank) for e in res.excluded] == list(zip(unfiltered, range(1, 6)))
    assert all(m.startswith("s") for m in unfiltered) and res.excluded_counts == {"lifecycle": 10}


def test_no_public_store_call_bypasses_the_namespace_filter(new_store, store_kind):
    kind, store = store_kind, new_store()
    rng = np.random.default_rng(7)
    secret = rng.normal(size=DIM)
    store.add(StoredMemory("bob-secret", "bob", "bob's pin is 4321", markers=("4321",)), secret, encoder=IDENT)
    store.add_many([StoredMemory(f"a{i}", "alice", f"alice {i}") for i in range(8)],
                   rng.normal(size=(8, DIM)), encoder=IDENT)
    for empty in ([], (), None, set()):
        with pytest.raises(PermissionError):
            store.search(secret, empty, 5)
    for odd in ("", [""], [None], [1]):
        with pytest.raises((PermissionError, ValueError)):
            store.search(secret, odd, 5)
    for namespaces in ("alice", ["alice"], {"alice"}, ("alice", "nobody")):
        for kwargs in ({}, {"exclude_ids": ["a0"]}, {"exclude_states": ("current",)},
                       {"exact": False}, {"exclude_ids": [f"a{i}" for i in range(8)]}):
            hits = store.search(secret, namespaces, 50, **kwargs)
            assert all(h[0].startswith("a") for h in hits), (namespaces, kwargs)
            if kind == "embedded":  # the array search is the same search: the same hits' cosines
                (slots, cos), plain = store.search_slots(secret, namespaces, 50, unfiltered_k=50, **kwargs)
                assert cos.tolist() == [h[1] for h in hits] and len(slots) == len(hits)
                assert plain[1].tolist() == [h[1] for h in store.search(secret, namespaces, 50,
                                                                        exact=kwargs.get("exact", True))]
    assert store.search(secret, ["nobody"], 5) == []
    assert store.scan_markers(["alice"]) == [] and store.scan_markers([]) == []
    # The store's namespace-filtered calls are reviewed above; the rest read or write by id for
    # the trusted layer (GatedRetriever checks the ACL before each). A new public method must be
    # classified here.
    filtered = {"search", "scan_markers", "scan_suppressed"} | ({"search_slots"} if kind == "embedded" else set())
    by_id_or_admin = {
        "add", "add_many", "get", "get_many", "update", "correct", "retire", "mark_reviewed",
        "forget", "version", "changes_since", "vector_matrix", "vectors_for", "check_encoder",
        "flush_outbox", "namespace_of", "ids", "close", "restore_many",  # restore_many: store import
        # pre-checks of one record's own namespace before embedding; export: the store's owner
        "check_suppressed", "check_forget_directive", "export_suppression",
        # expiry and reset erase records the trusted layer named by (namespace, id); note: an audit event
        "erase", "note"}
    # compact: VACUUM FULL; wait_erased: waits for the eraser's pass (reads and writes no record)
    extra = {"verify"} | ({"compact", "wait_erased"} if kind == "postgres" else set())
    attrs = {"encoder_identity", "dim", "audit", "clock", "path", "fsync", "collection", "client",
             "local", "schema", "where", "filters_signatures", "vacuum_on_forget"}
    public = {n for n in dir(store) if not n.startswith("_")} - attrs
    assert public == filtered | by_id_or_admin | extra, sorted(public ^ (filtered | by_id_or_admin | extra))


def test_both_stores_share_one_implementation_of_record_semantics():
    from memgate.retriever.records.rules import Records as RecordSemantics
    for name in ("add", "add_many", "update", "correct", "retire", "mark_reviewed", "forget",
                 "check_encoder", "_flag_derived", "_cas", "_check_vector"):
        assert getattr(EmbeddedStore, name) is getattr(RecordSemantics, name), name
        assert getattr(QdrantStore, name) is getattr(RecordSemantics, name), name
        assert getattr(PostgresStore, name) is getattr(RecordSemantics, name), name


def test_identical_gated_rankings_exact_mode(tmp_path):
    """With a gate (re-scoring depth below the support) and policy exclusions, both stores
    return the same ids, cosines, gate scores and exclusions."""
    import torch

    from memgate.model.gate import MemGate, MemGateConfig

    torch.manual_seed(0)
    gate = MemGate(MemGateConfig(dim=DIM, hidden=32, encoder_id=IDENT["id"],
                                 encoder_revision=IDENT["revision"], encoder_normalize=True,
                                 init_std=1e-3, init_bias=0.0)).eval()
    with torch.no_grad():  # a gate that is far from identity, so it reorders the cosine's head
        for prm in gate.parameters():
            prm.add_(0.5 * torch.randn_like(prm))
    emb, qd = both(tmp_path)
    vecs = populate([emb, qd], n=90, seed=8)
    for s in (emb, qd):
        s.retire("m003", 1)
        s.forget("m006", StoredMemory("m006-f", "alice", "forget it"), vecs[7], encoder=IDENT)
    enc = FakeEncoder()
    cfg = RetrieverConfig(acl=ACL, rerank_depth=7, fail_mode="open",
                          policy_rules={"personal": {"reason": "purpose", "allow_only": ["chat"]}})
    r_emb = GatedRetriever(emb, enc, gate=gate, config=cfg)
    r_qd = GatedRetriever(qd, enc, gate=gate, config=cfg)
    reordered = False
    for i in range(6):
        principal = ("alice", "bob", "team")[i % 3]
        c = dict(text="", principal=principal, purpose=("chat", "ads")[i % 2], intent="current_state")
        a = r_emb.retrieve(f"q {i}", QueryContext(query_id=f"e{i}", **c), k=10)
        b = r_qd.retrieve(f"q {i}", QueryContext(query_id=f"q{i}", **c), k=10)
        assert a.ids == b.ids and a.ids
        np.testing.assert_allclose([it.gate_score or 0 for it in a.items],
                                   [it.gate_score or 0 for it in b.items], atol=1e-6)
        assert [(e.memory_id, e.reasons) for e in a.excluded] == [(e.memory_id, e.reasons) for e in b.excluded]
        assert a.excluded_counts == b.excluded_counts and a.candidates == b.candidates
        reordered |= [it.memory_id for it in sorted(a.items, key=lambda it: -it.cosine)] != a.ids
    assert reordered  # the gate did change an order, so the comparison covers its path
    emb.close()
    qd.close()
