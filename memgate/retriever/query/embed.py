"""The encode step: a text checked (a non-empty string, at most ``MAX_TEXT_CHARS``) and embedded
by the retriever's encoder; query embeddings stay out of the encoder's disk cache when it
allows that, and the cached embeddings of forgotten texts can be removed from it."""

from __future__ import annotations

import inspect
from typing import Any, Optional

import numpy as np

from memgate.model.encoder import text_hash
from memgate.retriever.records.memory import MAX_TEXT_CHARS


def check_text(text: Any, what: str = "text") -> None:
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{what} must be a non-empty string")
    if len(text) > MAX_TEXT_CHARS:
        raise ValueError(
            f"{what} has {len(text):,} characters, beyond the limit of {MAX_TEXT_CHARS:,} "
            "(memgate.retriever.MAX_TEXT_CHARS); split it into several memories")


class Embedder:
    """Texts -> vectors through ``encoder`` (:class:`memgate.model.encoder.Encoder` or anything
    with its ``encode(texts, progress=)`` and ``identity``)."""

    def __init__(self, encoder: Any) -> None:
        self.encoder = encoder
        try:  # query embeddings stay out of the encoder's disk cache when it allows that
            self._takes_cache = "cache" in inspect.signature(encoder.encode).parameters
        except (TypeError, ValueError):
            self._takes_cache = False

    def embed(self, text: str, *, what: str = "text", cache: bool = True) -> np.ndarray:
        """One text's vector (``cache=False``: never written to the encoder's disk cache)."""
        check_text(text, what)
        if not cache and self._takes_cache:
            out: np.ndarray = self.encoder.encode([text], progress=False, cache=False)[0]
            return out
        first: np.ndarray = self.encoder.encode([text], progress=False)[0]
        return first

    def embed_many(self, texts: list[str]) -> np.ndarray:
        """Several texts' vectors in one batch (checked by the caller)."""
        vectors: np.ndarray = self.encoder.encode(texts, progress=False)
        return vectors

    def purge_cache(self, text: Optional[str]) -> None:
        """Remove ``text``'s embedding from the encoder's disk cache (a forgotten or refused text)."""
        cache = getattr(self.encoder, "_cache", None)  # memgate's Encoder; others keep no cache here
        if cache is not None and text and hasattr(cache, "delete"):
            cache.delete([text_hash(text)])


__all__ = ["Embedder", "check_text"]
