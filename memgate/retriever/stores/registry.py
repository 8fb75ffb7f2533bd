"""The store kinds, by name: ``STORE_KINDS`` maps a kind (``"embedded"``, ``"qdrant"``,
``"postgres"``) to its class, imported when first asked for (qdrant-client and psycopg load only
when their kind is opened). Each kind's module also has ``from_options(identity, options)``, how
the agent surfaces open it (:class:`memgate.retriever.stores.base.StoreOptions`). A new kind is
one entry here and a package beside the others."""

from __future__ import annotations

import importlib
from typing import Any

from memgate.retriever.stores.base import MemoryStore, StoreOptions

STORE_KINDS: dict[str, str] = {  # kind -> "module:Class"
    "embedded": "memgate.retriever.stores.embedded.store:EmbeddedStore",
    "qdrant": "memgate.retriever.stores.qdrant.store:QdrantStore",
    "postgres": "memgate.retriever.stores.postgres.store:PostgresStore",
}


def _module(kind: str) -> tuple[Any, str]:
    if kind not in STORE_KINDS:
        raise ValueError(f"store must be one of {tuple(STORE_KINDS)}, got {kind!r}")
    module, _, name = STORE_KINDS[kind].partition(":")
    return importlib.import_module(module), name


def store_class(kind: str) -> type[MemoryStore]:
    """The class of store kind ``kind`` (``ValueError`` naming the kinds for any other)."""
    module, name = _module(kind)
    found: type[MemoryStore] = getattr(module, name)
    return found


def open_kind(kind: str, identity: Any, options: StoreOptions) -> MemoryStore:
    """A store of kind ``kind`` for the encoder ``identity``, opened from ``options`` by the
    kind's ``from_options`` (which refuses the options it cannot use, naming them)."""
    module, _ = _module(kind)
    opened: MemoryStore = module.from_options(identity, options)
    return opened


__all__ = ["STORE_KINDS", "open_kind", "store_class"]
