"""``StoreBackend``: the storage primitives a back-end gives :class:`memgate.retriever.records.rules.Records`.

The record rules (compare-and-set, supersession, review flags, forget, the suppression list) are
written once, in :mod:`memgate.retriever.records`; a back-end (SQLite + a vector file, Qdrant,
PostgreSQL: :mod:`memgate.retriever.stores`) implements only these primitives. Each write
primitive runs inside one atomic write (``write()``) and sees the write's own earlier changes; a
new back-end implements exactly these and inherits every rule:

=======================================  ======================================================
``write()``                              context manager: one all-or-nothing write; yields the
                                         list the write's audit events go into (persisted with
                                         the write, appended to the log after it)
``load(memory_id, namespace)``           the record (``UnknownMemoryError`` when missing)
``exists(memory_id, namespace)``         whether the key is taken (tombstones included)
``namespaces_of(memory_id)``             the namespaces holding that id, sorted
``children(namespace, parent)``          ``(namespace, id)`` of records derived from the
                                         parent, sorted
``bump("seq")``                          the write's new store version
``put_new(memory, seq, v, parents)``     insert a record with its vector in a fresh slot and its
                                         resolved ``(namespace, id)`` parents -> slot
``put(memory, seq)``                     replace a record, keeping its vector
``put_new_vector(memory, seq, v)``       replace a record and its vector (fresh slot; the old
                                         vector is erased) -> slot
``put_tombstone(tomb, seq)``             replace a record by its tombstone: vector, text,
                                         markers and its derivation links erased
``put_restored_tombstone(tomb, seq)``    insert an exported tombstone (no vector, no text)
``suppression_key()``                    the store's own HMAC key (bytes)
``foreign_keys()``                       ``{key id: key}`` of suppression entries imported from
                                         another store (``memgate store import``)
``put_foreign_keys(keys)``               add such keys (idempotent)
``suppressed(namespaces)``               the suppression entries of those namespaces (``None``:
                                         every namespace), each with its normalisation
                                         ``version``, ``key_id`` ("" = the store's own key) and
                                         ``whole`` flag, all persisted
``put_suppressed(entries)``              add entries (idempotent)
``lift_suppressed(entries)``             remove entries (a consented relearn)
``describe()``                           where the store lives, for error messages
=======================================  ======================================================

Beside them a back-end answers the reads every store shares (``get_many``, ``version``,
``changes_since``, ``vector_matrix``, ``vectors_for``, ``scan_markers``, ``ids``, ``count``),
``verify``, ``flush_outbox`` and ``close``; its candidate search is its store class's
(:mod:`memgate.retriever.stores.base`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Optional, Protocol

import numpy as np

from memgate.retriever.audit.log import AuditLog
from memgate.retriever.records.index import IndexEntry
from memgate.retriever.records.memory import StoredMemory
from memgate.retriever.records.suppression import Suppressed

Key = tuple[str, str]  # (namespace, memory_id): a record's key (ids are scoped per namespace)
Event = dict[str, Any]  # one audit event (memgate.retriever.audit.log.make_event)


class StoreFacts(Protocol):
    """What a store, and each back-end under one, says of itself: the identity of the encoder its
    vectors come from, their dimension, and its audit log (None: no log)."""

    @property
    def encoder_identity(self) -> dict[str, Any]: ...

    @property
    def dim(self) -> int: ...

    @property
    def audit(self) -> Optional[AuditLog]: ...


class StoreBackend(StoreFacts, Protocol):
    """The storage primitives of one back-end (module docstring)."""

    @property
    def clock(self) -> Callable[[], str]: ...

    @property
    def lock(self) -> AbstractContextManager[Any]: ...  # re-entrant: the back-end's reads and writes hold it

    # -- the write primitives -----------------------------------------------------------------

    def write(self) -> AbstractContextManager[list[Event]]: ...

    def load(self, memory_id: str, namespace: str) -> StoredMemory: ...

    def exists(self, memory_id: str, namespace: str) -> bool: ...

    def namespaces_of(self, memory_id: str) -> list[str]: ...

    def children(self, namespace: str, parent: str) -> list[Key]: ...

    def bump(self, key: str) -> int: ...

    def put_new(self, memory: StoredMemory, seq: int, v: np.ndarray, parents: Iterable[Key] = ()) -> int: ...

    def put(self, memory: StoredMemory, seq: int) -> None: ...

    def put_new_vector(self, memory: StoredMemory, seq: int, v: np.ndarray) -> int: ...

    def put_tombstone(self, tomb: StoredMemory, seq: int) -> None: ...

    def put_restored_tombstone(self, tomb: StoredMemory, seq: int) -> None: ...

    def suppression_key(self) -> bytes: ...

    def foreign_keys(self) -> dict[str, bytes]: ...

    def put_foreign_keys(self, keys: Mapping[str, bytes]) -> None: ...

    def suppressed(self, namespaces: Optional[Iterable[str]]) -> list[Suppressed]: ...

    def put_suppressed(self, entries: Iterable[Suppressed]) -> None: ...

    def lift_suppressed(self, entries: Iterable[Suppressed]) -> None: ...

    def describe(self) -> str: ...

    # -- reads, integrity, lifetime -----------------------------------------------------------

    def get_many(self, memory_ids: Iterable[str], *,
                 namespace: Optional[str] = None) -> dict[str, StoredMemory]: ...

    def version(self) -> int: ...

    def changes_since(self, seq: int) -> tuple[int, list[IndexEntry]]: ...

    def vector_matrix(self) -> np.ndarray: ...

    def vectors_for(self, memory_ids: Iterable[str], *,
                    namespace: Optional[str] = None) -> dict[str, np.ndarray]: ...

    def scan_markers(self, namespaces: Iterable[str]) -> list[tuple[str, tuple[str, ...]]]: ...

    def ids(self) -> list[str]: ...

    def count(self) -> int: ...

    def verify(self) -> list[str]: ...

    def flush_outbox(self) -> None: ...

    def close(self) -> None: ...


__all__ = ["Event", "Key", "StoreBackend", "StoreFacts"]
