"""Deprecated path (one release): the local PostgreSQL server is
:mod:`memgate.retriever.stores.postgres.local`."""

from memgate.retriever._moved import moved
from memgate.retriever.stores.postgres.local import LocalServer

moved(__name__)

__all__ = ["LocalServer"]
