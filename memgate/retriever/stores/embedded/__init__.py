"""The embedded store: SQLite records and a memory-mapped vector file in one directory
(:class:`EmbeddedStore`; its back-end :mod:`.backend`, files :mod:`.layout` and
:mod:`.vector_file`, search :mod:`.search` and approximate index :mod:`.ann`)."""

from memgate.retriever.stores.embedded.store import EmbeddedStore

__all__ = ["EmbeddedStore"]
