"""Deprecated path (one release): the embedded store is :mod:`memgate.retriever.stores.embedded`."""

from memgate.retriever._moved import moved
from memgate.retriever.records.identity import ENCODER_KEYS, normalize_identity
from memgate.retriever.records.index import IndexEntry
from memgate.retriever.stores.base import MemoryStore
from memgate.retriever.stores.embedded.layout import (
           AUDIT_FILE,
           DB_FILE,
           OLDER_FORMATS,
           STORE_FORMAT,
           VECTOR_FILE,
)
from memgate.retriever.stores.embedded.store import EmbeddedStore

moved(__name__)

__all__ = ["AUDIT_FILE", "DB_FILE", "ENCODER_KEYS", "OLDER_FORMATS", "STORE_FORMAT", "VECTOR_FILE",
           "EmbeddedStore", "IndexEntry", "MemoryStore", "normalize_identity"]
