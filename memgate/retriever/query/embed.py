"""The encode step: a text checked (a non-empty string, at most ``MAX_TEXT_CHARS``) and embedded
by the retriever's encoder; query embeddings stay out of the encoder's disk cache when it
allows that, and the cached embeddings of forgotten texts can be removed from it."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, Optional, Protocol, cast

import numpy as np

from memgate.model.encoder import text_hash
from memgate.retriever.records.memory import MAX_TEXT_CHARS


def check_text(text: Any, what: str = "text") -> None:
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"field {what!r} must be a non-empty string with a non-space character")
    if any("\ud800" <= c <= "\udfff" for c in text):
        raise ValueError(f"field {what!r} holds a lone surrogate (not valid Unicode text)")
    if len(text) > MAX_TEXT_CHARS:
        raise ValueError(
            f"field {what!r} has {len(text):,} characters, beyond the limit of {MAX_TEXT_CHARS:,} "
            "(memgate.retriever.MAX_TEXT_CHARS); split it into several memories")


class TextEncoder(Protocol):
    """The encoder protocol: what the retriever needs from an encoder
    (:class:`memgate.model.encoder.Encoder` implements it; so does any object with an
    ``identity`` mapping, ``{id, revision, normalize, dim}``, and ``encode``). ``encode`` embeds
    a batch of texts into a ``(len(texts), dim)`` float array, unit rows when the identity says
    ``normalize``; an encoder whose ``encode`` also takes ``cache=`` gets ``cache=False`` for
    query texts (they never enter its disk cache)."""

    @property
    def identity(self) -> Mapping[str, Any]: ...

    def encode(self, texts: list[str], progress: bool = ...) -> np.ndarray: ...


class CachingEncoder(TextEncoder, Protocol):
    """An encoder with an embedding cache it can be told to bypass (``cache=False``)."""

    def encode(self, texts: list[str], progress: bool = ..., cache: bool = ...) -> np.ndarray: ...


class Embedder:
    """Texts -> vectors through ``encoder`` (:class:`TextEncoder`)."""

    def __init__(self, encoder: TextEncoder) -> None:
        self.encoder = encoder
        try:  # query embeddings stay out of the encoder's disk cache when it allows that
            self._takes_cache = "cache" in inspect.signature(encoder.encode).parameters
        except (TypeError, ValueError):
            self._takes_cache = False

    def embed(self, text: str, *, what: str = "text", cache: bool = True) -> np.ndarray:
        """One text's vector (``cache=False``: never written to the encoder's disk cache)."""
        check_text(text, what)
        if not cache and self._takes_cache:
            out: np.ndarray = cast(CachingEncoder, self.encoder).encode([text], progress=False, cache=False)[0]
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


__all__ = ["CachingEncoder", "Embedder", "TextEncoder", "check_text"]
