"""Deprecated path (one release): the embedded store's approximate index is
:mod:`memgate.retriever.stores.embedded.ann`."""

from memgate.retriever._moved import moved
from memgate.retriever.stores.embedded.ann import (
    DEFAULT_THRESHOLD,
    EF_CONSTRUCTION,
    EF_SEARCH,
    AnnIndex,
    M,
    available,
)

moved(__name__)

__all__ = ["DEFAULT_THRESHOLD", "EF_CONSTRUCTION", "EF_SEARCH", "M", "AnnIndex", "available"]
