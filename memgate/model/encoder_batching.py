"""Micro-batching of concurrent requests' embeddings (the HTTP server's add and search).

A server serves each request in a worker thread, and :class:`memgate.Memory` serialises its
calls; the texts to embed are known before the call. :meth:`EmbeddingBatcher.prefetch` embeds
them first, outside that lock: the first thread to arrive leads, waits ``window_ms`` for the
others' texts, embeds them all in one model call per token width, and hands each vector to
:class:`PrefetchedVectors`; the call that follows (``Encoder.encode`` inside the retriever) takes
the vector there instead of running the model, with every other rule of ``encode`` unchanged (a
disk-cache hit still wins, a miss is still written to the disk cache when the call caches,
query texts still never are).

Identical to unbatched. Texts of one token width need no padding, so their rows of a batch are
the rows each text gets alone (tests/model/test_encoder_batching.py checks the vectors bit for bit
and the server's answers); texts of different widths are never padded together. Only the
fast backends (ONNX Runtime, OpenVINO: :class:`memgate.model.encoder_backends.FastEncoder`)
batch; with torch, or before the model has loaded, ``prefetch`` does nothing.

A prefetched vector nobody takes (the request failed before it embedded) is dropped after
``ttl_s`` seconds or when more than ``capacity`` wait, never written anywhere.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from memgate.model.encoder import text_hash

DEFAULT_WINDOW_MS = 2.0


class PrefetchedVectors:
    """Vectors by text hash, waiting for the ``Encoder.encode`` call that asked for them."""

    def __init__(self, ttl_s: float = 30.0, capacity: int = 4096):
        self._lock = threading.Lock()
        self._items: OrderedDict[str, tuple[float, np.ndarray]] = OrderedDict()
        self.ttl_s, self.capacity = ttl_s, capacity
        self.taken = 0  # vectors handed to encode (diagnostics)

    def put(self, vectors: dict) -> None:
        now = time.monotonic()
        with self._lock:
            for h, v in vectors.items():
                self._items[h] = (now, v)
                self._items.move_to_end(h)
            while self._items and (len(self._items) > self.capacity
                                   or next(iter(self._items.values()))[0] < now - self.ttl_s):
                self._items.popitem(last=False)

    def take(self, hashes: Sequence[str]) -> dict:
        """The waiting vectors of ``hashes`` (each handed out once)."""
        with self._lock:
            found = {h: self._items.pop(h)[1] for h in hashes if h in self._items}
        self.taken += len(found)
        return found

    def __contains__(self, h: str) -> bool:
        with self._lock:
            return h in self._items


class EmbeddingBatcher:
    """Batches the embeddings of concurrent :meth:`prefetch` calls on ``encoder``
    (a :class:`memgate.model.encoder.Encoder`, which takes the vectors from it)."""

    def __init__(self, encoder: Any, window_ms: float = DEFAULT_WINDOW_MS):
        if not (0 <= window_ms <= 5):
            raise ValueError(f"window_ms must be between 0 and 5, got {window_ms!r}")
        self.encoder = encoder
        self.window_s = window_ms / 1e3
        self.vectors = PrefetchedVectors()
        self._cond = threading.Condition()
        self._pending: dict[str, str] = {}  # hash -> text, not yet taken by a leader
        self._inflight: set[str] = set()  # pending or being embedded
        self._leading = False
        self.batches = 0  # model batches run (diagnostics: fewer than texts when batching)
        self.texts = 0
        encoder.prefetched = self.vectors

    def _model(self) -> Any:
        """The loaded fast model, or None (torch, or not loaded: then nothing is batched)."""
        if getattr(self.encoder, "backend", "torch") == "torch" or getattr(self.encoder, "_model", None) is None:
            return None
        return self.encoder.model

    def prefetch(self, texts: Sequence[str]) -> None:
        """Embed ``texts`` with the other threads' texts of the same moment (at most
        ``window_ms`` of waiting); the next ``encode`` of them takes the vectors."""
        model = self._model()
        if model is None or not texts:
            return
        hashes = [text_hash(t) for t in texts]
        with self._cond:
            for h, t in zip(hashes, texts):
                if h not in self._inflight and h not in self.vectors:
                    self._pending[h] = t
                    self._inflight.add(h)
            while True:
                if not any(h in self._inflight for h in hashes):
                    return
                if not self._leading:
                    self._leading = True
                    break
                self._cond.wait(timeout=5.0)
        batch: dict[str, str] = {}
        try:
            if self.window_s:
                time.sleep(self.window_s)  # the others' texts of this moment join
            with self._cond:
                batch, self._pending = self._pending, {}
            self.vectors.put(self._embed(model, batch))
        except Exception:  # noqa: BLE001 - the request's own encode then embeds unbatched
            pass
        finally:
            with self._cond:
                self._inflight.difference_update(batch)
                self._leading = False
                self._cond.notify_all()

    def _embed(self, model: Any, batch: dict) -> dict:
        """One model call per token width (no padding: each row is the text's row alone)."""
        if not batch:
            return {}
        hashes, texts = list(batch), list(batch.values())
        widths = [len(e.ids) for e in model.tokenizer.encode_batch(texts)]
        out: dict[str, np.ndarray] = {}
        for width in sorted(set(widths)):
            rows = [i for i, w in enumerate(widths) if w == width]
            vectors = model.encode([texts[i] for i in rows], batch_size=len(rows),
                                   normalize=self.encoder.config.normalize)
            out.update((hashes[i], vectors[j]) for j, i in enumerate(rows))
            self.batches += 1
        self.texts += len(texts)
        return out


__all__ = ["DEFAULT_WINDOW_MS", "EmbeddingBatcher", "PrefetchedVectors"]
