"""What every store kind stands on: ``MemoryStore``, what :class:`memgate.retriever.GatedRetriever`
needs from a store (every kind of :mod:`memgate.retriever.stores` implements it: the record rules
of :class:`memgate.retriever.records.rules.Records` over a back-end's primitives,
:class:`memgate.retriever.records.primitives.StoreBackend`, plus the kind's own candidate search),
and the one error every kind gives for a store format it cannot open."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Optional, Protocol, runtime_checkable

import numpy as np

from memgate.retriever.records.index import IndexEntry
from memgate.retriever.records.memory import StoredMemory
from memgate.retriever.records.primitives import StoreBackend, StoreFacts

SlotHits = tuple[np.ndarray, np.ndarray]  # (vector slots, cosines), best first


@runtime_checkable
class MemoryStore(StoreFacts, Protocol):
    """What :class:`memgate.retriever.GatedRetriever` needs from a store.

    Vectors are unit-normalised float32 rows addressed by ``IndexEntry.slot``; every write that
    carries a vector declares the identity of the encoder that produced it. Ids are scoped per
    namespace: by-id calls take ``namespace=`` (without it an id must be unique). The writes'
    semantics (CAS, supersession, review flags, forget, the suppression list) are
    :class:`memgate.retriever.records.rules.Records`.

    ``search(query, namespaces, k, *, exclude_ids=(), exclude_states=(), exact=True,
    with_namespace=False)`` is the candidate search, the only query path: the top ``k`` live
    records by cosine among those whose ``namespace`` is one of ``namespaces``, minus forgotten
    records, records whose ``lifecycle_state`` is in ``exclude_states`` and ``exclude_ids`` (an
    id, every namespace's; a ``(namespace, memory_id)`` pair, one record), all applied to the
    candidate set *before* truncation to ``k``. An empty or missing ``namespaces`` raises
    ``PermissionError`` (there is no unfiltered form); ``exact=False`` allows an approximate
    index. Returns ``(memory_id, cosine)`` pairs (``(memory_id, cosine, namespace)`` with
    ``with_namespace``), best first, ties by memory id where exact. The by-id reads (``get``,
    ``get_many``, ``changes_since``, ``vector_matrix``) are for the trusted layer above the
    store: the access boundary is ``GatedRetriever``'s ACL.

    Stores built on ``Records`` also have ``check_suppressed(memory, previous=)`` and
    ``check_forget_directive(memory_id, directive)``, the read-only suppression checks the
    retriever runs before it embeds anything (it skips them for a store without them, which then
    refuses only inside its write), and ``export_suppression()`` / ``restore_many(...,
    suppression=)`` for ``memgate store export`` / ``import``.
    """

    def add(self, memory: StoredMemory, vector: Any, *, encoder: Any, allow_relearn: bool = False,
            parent_namespaces: Optional[Mapping[str, str]] = None) -> StoredMemory: ...

    def add_many(self, memories: Iterable[StoredMemory], vectors: Any, *, encoder: Any,
                 allow_relearn: bool = False,
                 parent_namespaces: Optional[Mapping[str, str]] = None) -> list[StoredMemory]: ...

    def get(self, memory_id: str, *, namespace: Optional[str] = None) -> Optional[StoredMemory]: ...

    def get_many(self, memory_ids: Iterable[str], *,
                 namespace: Optional[str] = None) -> dict[str, StoredMemory]: ...

    def update(self, memory_id: str, expected_revision: int, *, vector: Any = None,
               encoder: Any = None, principal: Optional[str] = None, namespace: Optional[str] = None,
               allow_relearn: bool = False, **changes: Any) -> StoredMemory: ...

    def retire(self, memory_id: str, expected_revision: int, principal: Optional[str] = None, *,
               namespace: Optional[str] = None) -> tuple[StoredMemory, list[str]]: ...

    def correct(self, memory_id: str, expected_revision: int, text: str, vector: Any, *,
                encoder: Any, principal: Optional[str] = None, namespace: Optional[str] = None,
                allow_relearn: bool = False, **changes: Any) -> tuple[StoredMemory, list[str]]: ...

    def mark_reviewed(self, memory_id: str, expected_revision: int, principal: Optional[str] = None, *,
                      namespace: Optional[str] = None) -> StoredMemory: ...

    def forget(self, memory_id: str, directive: StoredMemory, directive_vector: Any, *, encoder: Any,
               expected_revision: Optional[int] = None,
               on_erased: Optional[Callable[[StoredMemory], None]] = None) -> StoredMemory: ...

    def erase(self, keys: Iterable[tuple[str, str]], *, event: str, principal: Optional[str] = None,
              lift_suppression: bool = False,
              on_erased: Optional[Callable[[StoredMemory], None]] = None) -> list[StoredMemory]: ...

    def note(self, event: str, /, **payload: Any) -> None: ...

    def search(self, query: Any, namespaces: Iterable[str], k: int = 10, *,
               exclude_ids: Iterable[Any] = (), exclude_states: Iterable[str] = (),
               exact: bool = True, with_namespace: bool = False) -> list[tuple[Any, ...]]: ...

    def scan_markers(self, namespaces: Iterable[str]) -> list[tuple[str, tuple[str, ...]]]: ...

    def version(self) -> int: ...

    def changes_since(self, seq: int) -> tuple[int, list[IndexEntry]]: ...

    def vector_matrix(self) -> np.ndarray: ...

    def check_encoder(self, identity: Any, action: str = "use") -> None: ...

    def flush_outbox(self) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class SlotSearch(Protocol):
    """A store that also answers its search with vector slots (:class:`EmbeddedStore`): the
    retriever then maps hits into its own index in one gather and takes the audit's unfiltered
    ranking from the same call."""

    def search_slots(self, query: Any, namespaces: Iterable[str], k: int = 10, *,
                     exclude_ids: Iterable[Any] = (), exclude_states: Iterable[str] = (),
                     exclude_signatures: Iterable[str] = (), exact: bool = True,
                     unfiltered_k: int = 0) -> tuple[SlotHits, Optional[SlotHits]]: ...


@dataclass(frozen=True)
class StoreOptions:
    """Where and how the agent surfaces open a store (``memgate.integrations.opening.open_store``);
    each store kind's ``from_options`` reads the fields it needs and refuses what it cannot use."""

    path: Optional[str | os.PathLike[str]] = None  # a folder: the store's (embedded, Qdrant local mode) or its audit log's
    url: Optional[str] = None  # a server (Qdrant, PostgreSQL)
    collection: str = "memgate"  # the Qdrant collection / the PostgreSQL schema
    api_key: Optional[str] = None  # Qdrant server
    fsync: bool = True  # embedded
    audit_log: Optional[str | os.PathLike[str]] = None  # the audit log's file (servers)
    allow_damaged: bool = False  # embedded: open a truncated vector file (to verify it)


def format_error(where: str, found: Any, expected: str, older: tuple[str, ...]) -> ValueError:
    def number(fmt: Any) -> Optional[int]:
        try:
            return int(str(fmt).rsplit("/", 1)[1])
        except (IndexError, ValueError):
            return None
    found_n, expected_n = number(found), number(expected)
    if found_n is not None and expected_n is not None and found_n > expected_n:
        fix = "it was written by a newer memgate: upgrade memgate to open it"
    else:
        fix = f"this memgate opens {expected!r} and migrates {list(older)}"
    return ValueError(f"{where}: store format {found!r}; {fix}")


__all__ = ["MemoryStore", "SlotHits", "SlotSearch", "StoreBackend", "StoreOptions", "format_error"]
