"""Deprecated path (one release): the embedded store's vector file is
:mod:`memgate.retriever.stores.embedded.vector_file`."""

from memgate.retriever._moved import moved
from memgate.retriever.stores.embedded.vector_file import FIX, VectorFile

moved(__name__)

__all__ = ["FIX", "VectorFile"]
