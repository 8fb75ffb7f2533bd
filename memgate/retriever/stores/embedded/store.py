"""``EmbeddedStore``: the embedded default, one directory: SQLite records and a memory-mapped
float32 vector file (:class:`memgate.retriever.stores.embedded.backend.EmbeddedBackend`), the
record rules of :class:`memgate.retriever.records.rules.Records`, and a candidate search over an
in-memory index (:mod:`memgate.retriever.stores.embedded.search`).

Record semantics (shared with the other stores; fields in :mod:`memgate.retriever.records.memory`):
ids scoped per namespace (a record's key is ``(namespace, memory_id)``); revisions and
compare-and-set updates; scoped supersession; ``derived_from`` links with transitive review flags
when a source is retired, corrected or superseded; forget requests that erase the detail's text,
markers and vector for good (SQLite ``secure_delete``, zeroed vector slot) together with every
record derived from it, keep keyed hashes of the erased content (the suppression list) and store
the forget directive as a new, usable memory. The store records its encoder identity and refuses
vectors declared as coming from any other encoder.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Optional

import numpy as np

from memgate.retriever.audit.log import AuditLog, utc_now
from memgate.retriever.records.rules import Records
from memgate.retriever.stores.base import SlotHits, StoreOptions
from memgate.retriever.stores.embedded.ann import DEFAULT_THRESHOLD, available
from memgate.retriever.stores.embedded.backend import EmbeddedBackend
from memgate.retriever.stores.embedded.search import Hits, searched
from memgate.retriever.vectors import check_k, readable_namespace_list


class EmbeddedStore(Records):
    """SQLite records + a memory-mapped float32 vector file, in one directory.

    ``EmbeddedStore(path, encoder_identity)`` creates the store (the identity, with ``dim``, is
    then required) or opens it and refuses a different identity. ``audit`` is an
    :class:`AuditLog`, ``True`` for ``<path>/audit.jsonl`` (default) or ``None`` for no log.
    ``ann_threshold`` (needs hnswlib): ``search(exact=False)`` uses an in-memory HNSW graph for
    each namespace with at least that many live records (``GatedRetriever`` asks for it with
    ``RetrieverConfig(exact_search=False)``; ``memgate.Memory`` does by default). A vector
    file shorter than its records need is refused (:class:`DamagedStoreError`) unless
    ``allow_damaged=True`` (for ``verify()``; :mod:`memgate.retriever.stores.embedded.vector_file`).
    """

    filters_signatures = True  # search(exclude_signatures=): the retriever's Kleene filter by digest
    _backend: EmbeddedBackend

    def __init__(
        self,
        path: str | os.PathLike[str],
        encoder_identity: Any = None,
        *,
        audit: AuditLog | bool | None = True,
        clock: Callable[[], str] = utc_now,
        fsync: bool = True,
        ann_threshold: Optional[int] = None,
        allow_damaged: bool = False,
    ):
        super().__init__(EmbeddedBackend(Path(path), encoder_identity, audit=audit, clock=clock,
                                         fsync=fsync, ann_threshold=ann_threshold,
                                         allow_damaged=allow_damaged))

    @property
    def path(self) -> Path:
        return self._backend.path

    @property
    def fsync(self) -> bool:
        return self._backend.fsync

    def __enter__(self) -> EmbeddedStore:
        return self

    # -- search -------------------------------------------------------------------------------

    def search(self, query: Any, namespaces: Iterable[str], k: int = 10, *,
               exclude_ids: Iterable[Any] = (), exclude_states: Iterable[str] = (),
               exact: bool = True, hnsw_ef: Optional[int] = None,
               with_namespace: bool = False, exclude_signatures: Iterable[str] = ()) -> list[tuple[Any, ...]]:
        """Top ``k`` live records by cosine *within* ``namespaces`` (see :class:`MemoryStore`):
        the namespace restriction, ``exclude_ids`` and ``exclude_states`` apply to the candidate
        set before truncation. Exact unless ``exact=False`` on a store opened with
        ``ann_threshold``: then a namespace with at least that many live records is searched in
        its own HNSW graph with the exclusions as the graph search's filter
        (:mod:`memgate.retriever.stores.embedded.ann`); the returned cosines are exact either way
        (``hnsw_ef`` is accepted for the protocol); ``exclude_signatures`` (digests of
        :func:`memgate.retriever.records.index.signature_key`) excludes those signatures' records.
        Ties by memory id. Returns ``(memory_id, cosine)`` pairs,
        best first (``(memory_id, cosine, namespace)`` with ``with_namespace``)."""
        ns = readable_namespace_list(namespaces)
        check_k(k)
        q = self._check_vector(query).astype(np.float32)
        backend = self._backend
        with backend.lock:
            index = backend.refresh_search_index()
            (top, scores), _ = searched(backend, q, ns, k, exclude_ids, exclude_states, exclude_signatures,
                                        exact, 0, index)
            if with_namespace:
                return [(index.ids[p], float(c), index.namespaces[p])
                        for p, c in zip(top.tolist(), scores.tolist())]
            return [(index.ids[p], float(c)) for p, c in zip(top.tolist(), scores.tolist())]

    def search_slots(self, query: Any, namespaces: Iterable[str], k: int = 10, *,
                     exclude_ids: Iterable[Any] = (), exclude_states: Iterable[str] = (),
                     exclude_signatures: Iterable[str] = (), exact: bool = True,
                     unfiltered_k: int = 0) -> tuple[SlotHits, Optional[SlotHits]]:
        """:meth:`search` with its hits as arrays: ``((slots, cosines), unfiltered)``, best
        first, each hit named by its vector slot (never reused) instead of an id (the
        retriever maps slots to its own index in one gather, :class:`GatedRetriever`). With
        ``unfiltered_k``, ``unfiltered`` is the same search's top ``unfiltered_k`` with the
        namespace filter only (what :meth:`search` without exclusions returns), from the same
        pass: an exactly scanned namespace is scored once for both; else None."""
        ns = readable_namespace_list(namespaces)
        check_k(k)
        if unfiltered_k:
            check_k(unfiltered_k)
        q = self._check_vector(query).astype(np.float32)
        backend = self._backend
        with backend.lock:
            index = backend.refresh_search_index()
            hits, plain = searched(backend, q, ns, k, exclude_ids, exclude_states, exclude_signatures,
                                   exact, unfiltered_k, index)

            def as_slots(found: Hits) -> SlotHits:
                return index.slot[found[0]], found[1]
            return as_slots(hits), (as_slots(plain) if plain is not None else None)


def from_options(identity: Any, options: StoreOptions) -> EmbeddedStore:
    """The agent surfaces' embedded store (``memgate.integrations.opening.open_store``):
    ``path=DIR``, with the approximate index for namespaces of 20,000+ records when hnswlib
    is installed (exact below)."""
    if options.path is None or options.url is not None:
        raise ValueError("the embedded store needs path=DIR (and no url=)")
    threshold = DEFAULT_THRESHOLD if available() else None  # the [ann] extra
    return EmbeddedStore(options.path, identity, fsync=options.fsync, ann_threshold=threshold,
               allow_damaged=options.allow_damaged)


__all__ = ["EmbeddedStore", "from_options"]
