"""Shared by the reliability tests: every store kind, empty (``postgres``: a schema of its own on
the session's one PostgreSQL server), a retriever over one, and write sequences every kind must
apply alike; the fakes (hash encoder, ACL, clock) are :mod:`tests.fakes`, re-exported here."""

from __future__ import annotations

from memgate.contract.admissibility import SupersessionScope
from memgate.retriever import (
    Applicability,
    EmbeddedStore,
    GatedRetriever,
    RetrieverConfig,
    StoredMemory,
    Supersedes,
)
from memgate.retriever.audit import AuditLog
from memgate.retriever.stores.postgres.store import PostgresStore
from memgate.retriever.stores.qdrant.store import QdrantStore
from tests import pg_test_server
from tests.fakes import ACL, DIM, IDENT, HashEncoder, fixed_clock, hash_vector

vec = hash_vector  # a unit vector per text (the hash encoder's)

KINDS = ("embedded", "qdrant", "postgres")


def make_store(kind: str, tmp_path, name: str = "store", audit=None, identity=IDENT):
    if kind == "embedded":
        return EmbeddedStore(tmp_path / f"{name}-emb", identity, audit=audit, fsync=False, clock=fixed_clock())
    if kind == "postgres":  # no folder of its own: audit=True puts the log beside the others'
        if audit is True:
            audit = AuditLog(tmp_path / f"{name}-pg" / "audit.jsonl")
        return PostgresStore(pg_test_server.url(), identity, schema=pg_test_server.schema_for(tmp_path / name),
                             audit=audit, clock=fixed_clock())
    return QdrantStore("mem", identity, path=tmp_path / f"{name}-qd", audit=audit, clock=fixed_clock())


def make_retriever(store, **config) -> GatedRetriever:
    config.setdefault("acl", ACL)
    return GatedRetriever(store, HashEncoder(), config=RetrieverConfig(**config))


def memory_args(kind: str, path) -> dict:
    """``memgate.Memory`` / ``MemgateStore`` arguments for a new store of ``kind`` "at" ``path``
    (postgres: the session server, a schema of its own, the audit log in ``path``)."""
    if kind == "postgres":
        return {"path": path, "store": kind, "url": pg_test_server.url(),
                "collection": pg_test_server.schema_for(path)}
    return {"path": path, "store": kind}


def supersession_and_derivation_writes(s, V) -> None:
    """One write sequence every store must apply alike: a scoped supersession, derived records
    (one marked reviewed, one corrected), a retire, and another namespace's record (``V``: ten or
    more rows of vectors)."""
    scope = SupersessionScope(subject="dentist", valid_from="2026-01-01", valid_to=None)
    s.add(StoredMemory("src", "alice", "dentist on monday", applicability=Applicability(subject="dentist")),
          V[0], encoder=IDENT)
    s.add(StoredMemory("d1", "alice", "plan around monday", derived_from=("src",)), V[1], encoder=IDENT)
    s.add(StoredMemory("d2", "alice", "reminder for the plan", derived_from=("d1",)), V[2], encoder=IDENT)
    s.add(StoredMemory("new", "alice", "dentist on tuesday", supersedes=(Supersedes("src", scope, 1),)),
          V[3], encoder=IDENT)
    s.mark_reviewed("d2", s.get("d2").revision)
    s.correct("d1", s.get("d1").revision, "plan around tuesday", V[4], encoder=IDENT)
    s.retire("new", 1)
    s.add(StoredMemory("other", "bob", "bob's thing"), V[5], encoder=IDENT)


__all__ = ["ACL", "DIM", "IDENT", "KINDS", "HashEncoder", "fixed_clock", "make_retriever", "make_store",
           "memory_args", "supersession_and_derivation_writes", "vec"]
