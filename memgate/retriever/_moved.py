"""The module paths of memgate 0.1's flat retriever (``memgate.retriever.pg_store`` and the
like), kept for one release: each is a module that re-exports its names from their new home and
warns (``DeprecationWarning``) when imported. ``MOVED`` lists them."""

from __future__ import annotations

import warnings

MOVED = {  # old module -> where its names live now
    "memgate.retriever.schema": "memgate.retriever.records.memory and memgate.retriever.errors",
    "memgate.retriever.semantics": "memgate.retriever.records (identity, index, links, rules)",
    "memgate.retriever.store": "memgate.retriever.stores.embedded",
    "memgate.retriever.ann": "memgate.retriever.stores.embedded.ann",
    "memgate.retriever.vector_file": "memgate.retriever.stores.embedded.vector_file",
    "memgate.retriever.qdrant_store": "memgate.retriever.stores.qdrant",
    "memgate.retriever.pg_store": "memgate.retriever.stores.postgres",
    "memgate.retriever.pg_schema": "memgate.retriever.stores.postgres.tables",
    "memgate.retriever.pg_local": "memgate.retriever.stores.postgres.local",
}


def moved(module: str) -> None:
    """Warn that ``module`` (an old path) moved; called by the old path's module when imported."""
    warnings.warn(f"{module} moved to {MOVED[module]}; the old path goes in the next release",
                  DeprecationWarning, stacklevel=3)


__all__ = ["MOVED", "moved"]
