"""Deprecated path (one release): the Qdrant store is :mod:`memgate.retriever.stores.qdrant`."""

from memgate.retriever._moved import moved
from memgate.retriever.stores.qdrant.store import (
    API_KEY_ENV,
    OLDER_FORMATS,
    QDRANT_FORMAT,
    VECTOR_NAME,
    QdrantStore,
    point_id,
)

moved(__name__)

__all__ = ["API_KEY_ENV", "OLDER_FORMATS", "QDRANT_FORMAT", "VECTOR_NAME", "QdrantStore", "point_id"]
