"""Store formats (issue 18): a format-1 store written by memgate before scoped ids opens by
migration (tests/fixtures/STORES.md), a torn format-1 Qdrant collection is repaired on the way,
and a newer or unknown format is refused with the fix."""

from __future__ import annotations

import functools
import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from memgate.contract.records import QueryContext
from memgate.retriever import EmbeddedStore, GatedRetriever, RetrieverConfig, StoredMemory
from memgate.retriever.stores.embedded.layout import STORE_FORMAT
from memgate.retriever.stores.qdrant.store import QDRANT_FORMAT, VECTOR_NAME, QdrantStore, point_id
from tests.fakes import HashEncoder

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
IDENT = {"id": "fixture-hash-encoder", "revision": "1", "normalize": True, "dim": 16}
EXPECTED = {  # (namespace, lifecycle, text) of every record the fixture holds
    "a-trip": ("alice", "superseded", "My trip to Lisbon is from 3 to 7 June."),
    "a-trip-new": ("alice", "current", "Trip moved: I am in Lisbon from 10 to 14 June."),
    "a-phone": ("alice", "forgotten", None),
    "a-phone-forget": ("alice", "current", "The user asked me to forget their phone number."),
    "a-card": ("alice", "current", "Contact card built from my phone number."),
    "b-trip": ("bob", "current", "Bob's trip to Lisbon is in September."),
    "b-note": ("bob", "current", "Bob prefers aisle seats."),
}


FixtureEncoder = functools.partial(HashEncoder, IDENT, unit=False)  # the fixtures' vectors, as drawn


def v1_qdrant(tmp_path, edit=None, fixture="qdrant_v1.json") -> Path:
    """The collection of a fixture dump (format 1 by default), restored point for point."""
    from qdrant_client import QdrantClient
    from qdrant_client import models as qm

    dump = json.loads((FIXTURES / fixture).read_text())
    points = dump["points"]
    if edit:
        edit(points)
    path = tmp_path / "qd"
    client = QdrantClient(path=str(path))
    client.create_collection("mem", vectors_config={VECTOR_NAME: qm.VectorParams(
        size=16, distance=qm.Distance.COSINE)}, metadata=dump["metadata"])
    client.upsert("mem", [qm.PointStruct(id=p["id"], vector=p["vector"] or {}, payload=p["payload"])
                          for p in points])
    client.close()
    return path


def check_migrated(store) -> None:
    assert store.verify() == []
    assert sorted(store.ids()) == sorted(EXPECTED)
    for mid, (ns, state, text) in EXPECTED.items():
        record = store.get(mid, namespace=ns)
        assert (record.lifecycle_state, record.text) == (state, text), mid
    assert store.get("b-note", namespace="bob").kind == "preference"
    assert store.get("a-trip", namespace="alice").superseded_in[0].by == "a-trip-new"
    # the derivation link survives, now between namespaced keys
    assert store._backend.children("alice", "a-phone") == [("alice", "a-card")]
    store.correct("a-card", store.get("a-card", namespace="alice").revision, "Contact card, corrected.",
                  FixtureEncoder().encode(["x"])[0], encoder=IDENT, namespace="alice")
    # scoped ids now: bob may take an id alice uses, and the suppression list works on the store
    store.add(StoredMemory("a-trip", "bob", "Bob's own a-trip."), np.ones(16), encoder=IDENT)
    store.forget("b-trip", StoredMemory("b-trip-f", "bob", "forget that trip"), np.ones(16), encoder=IDENT)
    with pytest.raises(ValueError, match="repeats content forgotten"):
        store.add(StoredMemory("again", "bob", "Bob's trip to Lisbon is in September."), np.ones(16), encoder=IDENT)
    r = GatedRetriever(store, FixtureEncoder(), config=RetrieverConfig(acl={"alice": {"alice"}}))
    result = r.retrieve("Lisbon trip", QueryContext(query_id="q", text="", principal="alice"), k=5)
    assert "a-trip-new" in result.ids and "a-phone" not in result.ids
    assert store.verify() == []


def test_a_format_1_embedded_store_is_migrated(tmp_path):
    path = tmp_path / "store"
    shutil.copytree(FIXTURES / "store_v1", path)
    with sqlite3.connect(path / "store.sqlite") as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == ("memgate-store/1",)
    store = EmbeddedStore(path, IDENT)
    meta = store._backend.meta()
    assert meta["format"] == STORE_FORMAT and meta["migrated_from"] == "memgate-store/1"
    check_migrated(store)
    store.close()
    reopened = EmbeddedStore(path)  # idempotent: format 2 now, nothing to migrate
    assert reopened.verify() == [] and len(reopened) == len(EXPECTED) + 2
    reopened.close()


def test_a_format_1_qdrant_collection_is_migrated(tmp_path):
    store = QdrantStore("mem", path=v1_qdrant(tmp_path))
    assert store.client.get_collection("mem").config.metadata["format"] == QDRANT_FORMAT
    check_migrated(store)
    store.close()


def test_a_torn_format_1_collection_is_repaired_by_the_migration(tmp_path):
    """What the audit found after kill -9 under format 1: counters behind the data and two
    records claiming one slot. The migration rebuilds the counters and reassigns the slot."""
    def tear(points):
        by_id = {p["payload"].get("memory_id"): p for p in points}
        by_id["b-note"]["payload"]["_slot"] = by_id["b-trip"]["payload"]["_slot"]  # a shared slot
        meta = next(p for p in points if "_meta" in p["payload"])
        meta["payload"]["_meta"] = {"seq": 2, "next_slot": 3}  # behind the data
    store = QdrantStore("mem", path=v1_qdrant(tmp_path, tear))
    assert store.verify() == []
    entries = [e for e in store.changes_since(0)[1] if e.alive]
    slots = [e.slot for e in entries]
    assert len(slots) == len(set(slots)) and max(slots) < int(store._backend.meta()["next_slot"])
    matrix = store.vector_matrix()
    for e in entries:  # the slot-keyed mirror holds each record's own vector
        own = store.vectors_for([e.memory_id], namespace=e.namespace)[e.memory_id]
        assert np.allclose(matrix[e.slot], own)
    assert store.version() >= max(e.seq for e in entries)
    store.close()


def test_every_migrated_point_is_keyed_by_namespace_and_id(tmp_path):
    store = QdrantStore("mem", path=v1_qdrant(tmp_path))
    points, _ = store.client.scroll("mem", limit=100, with_payload=True)
    records = [p for p in points if "memory_id" in p.payload]
    assert len(records) == len(EXPECTED)
    assert all(str(p.id) == point_id(p.payload["memory_id"], p.payload["namespace"]) for p in records)
    store.close()


FORGOTTEN_V2 = "My locker code is 4417."


def check_still_refused(store) -> None:
    """A store written before normalisation version 2 (tests/fixtures/STORES.md): its entries are
    version 1, and they still refuse the forgotten detail, also through version 2's rewrites of
    its (plain ASCII) text and marker."""
    from memgate.retriever import SuppressedContentError
    assert store.verify() == []
    entries = store._backend.suppressed(["alice"])
    assert sorted((e.kind, e.version, e.key_id, e.whole) for e in entries) == [
        ("marker", 1, "", False), ("text", 1, "", False)]
    v = FixtureEncoder().encode(["x"])[0]
    for text in (FORGOTTEN_V2, "my LOCKER code is 4417!", "new code: X4417", "4\u200b417 again",
                 "my l\u043ecker code is \u0664\u0664\u0661\u0667", "pin_4417"):
        with pytest.raises(SuppressedContentError, match="repeats content forgotten in namespace 'alice'"):
            store.add(StoredMemory("again", "alice", text), v, encoder=IDENT)
    store.add(StoredMemory("b-new", "bob", "Bob's new locker code is 4417."), v, encoder=IDENT)  # per namespace
    assert store.get("a-locker", namespace="alice").forgotten
    # a new forget writes version-2 entries beside the old ones; both are checked
    store.add(StoredMemory("a-gate", "alice", "The gate code is 9921."), v, encoder=IDENT)
    store.forget("a-gate", StoredMemory("a-gate-f", "alice", "forget the gate"), v, encoder=IDENT)
    assert sorted({e.version for e in store._backend.suppressed(["alice"])}) == [1, 2]
    for text in ("THE GATE CODE IS 99-21", FORGOTTEN_V2):
        with pytest.raises(SuppressedContentError):
            store.add(StoredMemory("again", "alice", text), v, encoder=IDENT)
    assert store.verify() == []


def test_a_format_2_embedded_store_keeps_refusing_its_forgotten_detail(tmp_path):
    path = tmp_path / "store"
    shutil.copytree(FIXTURES / "store_v2", path)
    with sqlite3.connect(path / "store.sqlite") as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == ("memgate-store/2",)
        key = db.execute("SELECT value FROM meta WHERE key = 'suppression_key'").fetchone()[0]
    store = EmbeddedStore(path, IDENT)
    meta = store._backend.meta()
    assert (meta["format"], meta["migrated_from"], meta["suppression_key"]) == (STORE_FORMAT, "memgate-store/2", key)
    check_still_refused(store)
    store.close()
    reopened = EmbeddedStore(path)
    assert reopened.verify() == [] and reopened._backend.meta()["format"] == STORE_FORMAT
    reopened.close()


def test_a_format_2_qdrant_collection_keeps_refusing_its_forgotten_detail(tmp_path):
    store = QdrantStore("mem", path=v1_qdrant(tmp_path, fixture="qdrant_v2.json"))
    info = store.client.get_collection("mem").config.metadata
    assert (info["format"], info["migrated_from"]) == (QDRANT_FORMAT, "memgate-qdrant/2")
    check_still_refused(store)
    store.close()


@pytest.mark.parametrize("found, message", [
    ("memgate-store/4", r"store format 'memgate-store/4'; it was written by a newer memgate: upgrade memgate"),
    ("something-else", r"store format 'something-else'; this memgate opens 'memgate-store/3' and migrates \['memgate-store/1', 'memgate-store/2'\]"),
])
def test_an_unknown_store_format_is_refused_with_the_fix(tmp_path, found, message):
    EmbeddedStore(tmp_path / "s", IDENT).close()
    with sqlite3.connect(tmp_path / "s" / "store.sqlite") as db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'format'", (found,))
    with pytest.raises(ValueError, match=message):
        EmbeddedStore(tmp_path / "s")


def test_an_unknown_qdrant_format_is_refused_with_the_fix(tmp_path):
    store = QdrantStore("mem", IDENT, path=tmp_path / "qd")
    store.client.update_collection("mem", metadata={"format": "memgate-qdrant/9", "encoder": IDENT})
    store.close()
    with pytest.raises(ValueError, match="memgate-qdrant/9'; it was written by a newer memgate: upgrade"):
        QdrantStore("mem", path=tmp_path / "qd")


def test_a_unit_vector_is_stored_bit_for_bit_so_export_and_import_copy_it_exactly(tmp_path):
    """Dividing a float32 unit vector by its own norm (1 +- 1 ulp) moves bits; the store keeps a
    vector that is unit already as given, so a store copied through export / import (or written
    twice) holds the same bits whatever normalisation the encoder used."""
    rng = np.random.default_rng(0)
    moved = None
    for _ in range(200):  # a unit vector that renormalisation would change
        v = rng.standard_normal(16).astype(np.float32)
        v = v / np.linalg.norm(v)
        if not np.array_equal((v / float(np.linalg.norm(v))).astype(np.float32), v):
            moved = v
            break
    assert moved is not None
    store = EmbeddedStore(tmp_path / "s", IDENT)
    try:
        assert np.array_equal(store._check_vector(moved), moved)
        assert np.allclose(np.linalg.norm(store._check_vector(moved * 3)), 1.0, atol=1e-6)  # others normalised
    finally:
        store.close()
