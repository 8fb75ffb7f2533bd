"""``QdrantStore``: the ``MemoryStore`` protocol on Qdrant (through ``qdrant-client``).

One collection per store. Each record is one point (id ``uuid5([namespace, memory_id])``: ids are
scoped per namespace) whose payload is the record (``StoredMemory.to_dict()``) plus ``_seq`` (the store
version of its last write), ``_slot`` (the vector's slot number, which changes whenever the
vector does) and ``_parents`` (its resolved ``derived_from`` links); live records carry their
vector under the named vector ``dense`` (cosine). A forgotten record's point is deleted (vector
and payload) and replaced by a vector-less tombstone point holding only id, namespace, kind,
timestamps and lifecycle ``forgotten``; the keyed hashes of its text and markers become
suppression points (``_suppressed``, no vector). A metadata point (no vector, no namespace) holds
the version counter, the next slot and the suppression key; the collection's own metadata holds
the store format and encoder identity.

Where it differs from :class:`memgate.retriever.EmbeddedStore` (see docs/qdrant.md):

- Qdrant has no multi-point transactions or conditional writes. A write validates everything
  (CAS on ``revision``, links, encoder, vectors) against the current points while holding this
  process's lock, then commits through a redo journal: (1) the whole write (points, deletions,
  new counters) is stored in the metadata point, one single-point upsert; (2) it is applied
  (one ``batch_update_points``); (3) the metadata point is rewritten with the new counters and
  no journal. A process killed during (2) leaves a journal that the next open (or write)
  applies again, so a write is all or nothing and the counters never fall behind the data (no
  two records ever share a slot). Compare-and-set is exact for writers that share one
  ``QdrantStore`` (local mode allows only one process per path); several processes writing one
  server collection need a single writer in front of it.
- The audit log (optional) is appended after the Qdrant write, without an outbox.
- ``search()`` (the ``MemoryStore`` candidate search, the retriever's only query path) runs
  the namespace restriction and the Kleene exclusions expressible as payload fields or ids
  inside Qdrant's vector search as a filter, before truncation. ``GatedRetriever`` reads the
  metadata through ``changes_since()`` and the re-scored head's vectors through
  ``vector_matrix()`` (a local mirror of the vectors, refreshed from the points).
- Local mode (``path=``) is qdrant-client's pure-Python engine: it stores each point pickled in
  SQLite. The store turns SQLite's ``secure_delete`` on for its collection, so a deleted
  (forgotten) point's bytes are overwritten, not left in free pages.

Format ``memgate-qdrant/3``: a suppression point's payload records its normalisation version,
its key id ("" = the store's own key, kept in the metadata point with the keys of imported
entries) and its matching mode. A format-1 collection (memgate before scoped ids) is migrated when
opened (re-keyed points, counters rebuilt from the data, duplicate slots reassigned), through the
same journal; a format-2 one (before normalisation versions) needs no rewrite: its suppression
points read as version 1. A newer format is refused.

The write semantics (CAS, supersession, review flags, forget, suppression) are
:class:`memgate.retriever.records.rules.Records`, shared with ``EmbeddedStore``; the primitives
are :class:`memgate.retriever.stores.qdrant.backend.QdrantBackend`, its journaled write
:mod:`memgate.retriever.stores.qdrant.journal`, the point ids and payloads
:mod:`memgate.retriever.stores.qdrant.points`, the local-mode path lock
:mod:`memgate.retriever.stores.qdrant.local`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from typing import Any, Optional

import numpy as np

from memgate.retriever.audit.log import AuditLog, utc_now
from memgate.retriever.records.rules import Records
from memgate.retriever.stores.base import StoreOptions
from memgate.retriever.stores.qdrant.backend import QdrantBackend
from memgate.retriever.stores.qdrant.points import (
    API_KEY_ENV,
    OLDER_FORMATS,
    QDRANT_FORMAT,
    VECTOR_NAME,
    point_id,
    qm,
)
from memgate.retriever.vectors import check_k, readable_namespace_list

log = logging.getLogger("memgate")


class QdrantStore(Records):
    """Records and vectors in one Qdrant collection.

    ``QdrantStore(collection, encoder_identity, path=...)`` opens local mode on disk (no server),
    ``location=":memory:"`` local mode in memory, ``url=...`` a server (API key from ``api_key``
    or the ``QDRANT_API_KEY`` environment variable), ``client=`` an existing ``QdrantClient``.
    The collection is created when missing (the identity, with ``dim``, is then required);
    an existing one with a different encoder identity is refused.
    """

    _backend: QdrantBackend

    def __init__(
        self,
        collection: str = "memgate",
        encoder_identity: Any = None,
        *,
        path: str | os.PathLike[str] | None = None,
        location: Optional[str] = None,
        url: Optional[str] = None,
        api_key: Optional[str] = None,
        client: Any = None,
        audit: AuditLog | bool | None = None,
        clock: Callable[[], str] = utc_now,
        on_disk: bool = False,
    ):
        super().__init__(QdrantBackend(collection, encoder_identity, path=path, location=location, url=url,
                                       api_key=api_key, client=client, audit=audit, clock=clock,
                                       on_disk=on_disk))

    @property
    def client(self) -> Any:
        """The ``QdrantClient`` (opened by the store, or the one passed in)."""
        return self._backend.client

    @property
    def collection(self) -> str:
        return self._backend.collection

    @property
    def local(self) -> bool:
        """Whether the client is qdrant-client's local mode (no server)."""
        return self._backend.local

    def __enter__(self) -> QdrantStore:
        return self

    def search(self, query: Any, namespaces: Iterable[str], k: int = 10, *,
               exclude_ids: Iterable[Any] = (), exclude_states: Iterable[str] = (),
               exact: bool = True, hnsw_ef: Optional[int] = None,
               with_namespace: bool = False) -> list[tuple[Any, ...]]:
        """Top ``k`` live records by cosine *within* ``namespaces``: the namespace restriction,
        ``exclude_ids`` and ``exclude_states`` (lifecycle values) are a filter inside Qdrant's
        vector search (filter-aware HNSW), so the candidate set is filtered before truncation.
        ``exact=False`` allows Qdrant's HNSW search (a server; local mode is always exhaustive).
        Returns ``(memory_id, cosine)`` pairs, best first, equal scores by memory id
        (``(memory_id, cosine, namespace)`` with ``with_namespace``).

        There is no unfiltered form: an empty or missing namespace set is an error.
        """
        ns = readable_namespace_list(namespaces)
        check_k(k)
        q = self._check_vector(query).astype(np.float32)
        must_not: list[Any] = [qm.FieldCondition(key="lifecycle_state", match=qm.MatchAny(
            any=sorted({"forgotten", *exclude_states})))]
        excluded: list[str] = []
        for item in exclude_ids:  # an id: in every readable namespace; a pair: one record
            pairs = [(n, item) for n in ns] if isinstance(item, str) else [tuple(item)]
            excluded += [point_id(mid, n) for n, mid in pairs]
        if excluded:
            must_not.append(qm.HasIdCondition(has_id=list(dict.fromkeys(excluded))))
        flt = qm.Filter(must=[qm.FieldCondition(key="namespace", match=qm.MatchAny(any=ns))],
                        must_not=must_not)
        res = self._backend.client.query_points(
            self._backend.collection, query=q.tolist(), using=VECTOR_NAME, query_filter=flt, limit=k,
            # (local mode is always exhaustive and warns about search parameters)
            search_params=None if self._backend.local else qm.SearchParams(exact=exact, hnsw_ef=hnsw_ef),
            with_payload=["memory_id", "namespace"])
        out: list[tuple[str, float, str]] = []
        for p in res.points:
            if p.payload["namespace"] not in ns:  # defence in depth: never cross the filter
                raise AssertionError(f"Qdrant returned {p.payload['memory_id']!r} outside {ns}")
            out.append((p.payload["memory_id"], float(p.score), p.payload["namespace"]))
        out.sort(key=lambda hit: (-hit[1], hit[0], hit[2]))
        return out if with_namespace else [(m, s) for m, s, _ in out]


def from_options(identity: Any, options: StoreOptions) -> QdrantStore:
    """The agent surfaces' Qdrant store (``memgate.integrations.opening.open_store``):
    local mode at ``path=DIR`` (its audit log beside the points) or a server at ``url=``
    (the audit log at ``audit_log=``, if any)."""
    if (options.path is None) == (options.url is None):
        raise ValueError("store='qdrant' needs exactly one of path=DIR (local mode) or url=")
    if options.path is not None:
        return QdrantStore(options.collection, identity, path=options.path, audit=True)
    audit = AuditLog(options.audit_log) if options.audit_log is not None else None
    return QdrantStore(options.collection, identity, url=options.url, api_key=options.api_key, audit=audit)


__all__ = ["from_options", "API_KEY_ENV", "OLDER_FORMATS", "QDRANT_FORMAT", "VECTOR_NAME", "QdrantStore", "point_id"]
