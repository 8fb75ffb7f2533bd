"""The Qdrant store: one collection through qdrant-client (:class:`QdrantStore`; its back-end
:mod:`.backend`, journaled writes :mod:`.journal`, points :mod:`.points`, local mode
:mod:`.local`, older formats :mod:`.migrate`). Importing it imports qdrant-client."""

from memgate.retriever.stores.qdrant.store import QdrantStore

__all__ = ["QdrantStore"]
