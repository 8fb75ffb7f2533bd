"""Deprecated path (one release): the PostgreSQL store is :mod:`memgate.retriever.stores.postgres`."""

from memgate.retriever._moved import moved
from memgate.retriever.stores.postgres.store import (
    URL_ENV,
    PostgresStore,
    StoreUnavailableError,
    record_signature,
)

moved(__name__)

__all__ = ["URL_ENV", "PostgresStore", "StoreUnavailableError", "record_signature"]
