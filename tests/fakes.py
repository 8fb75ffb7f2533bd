"""The fakes the tests share, each defined once: a deterministic hash encoder (no model, no
cache), the ACL the retriever tests grant, and fixed clocks (store timestamps a test can
predict)."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

DIM = 16
IDENT = {"id": "fake-hash-encoder", "revision": "1", "normalize": True, "dim": DIM}
ACL = {"alice": {"alice"}, "bob": {"bob"}, "team": {"alice", "bob"}}


def hash_vector(text: str, dim: int = DIM, *, unit: bool = True) -> np.ndarray:
    """A float32 vector seeded by the SHA-256 of ``text`` (unit length unless ``unit=False``)."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).normal(size=dim).astype(np.float32)
    return v / np.linalg.norm(v) if unit else v


class HashEncoder:
    """Deterministic text -> vector (:func:`hash_vector`), with an encoder identity (``IDENT`` by
    default: its ``dim`` sets the vectors'); ``unit=False`` leaves the vectors as drawn (the
    store normalises them)."""

    def __init__(self, identity: Mapping[str, Any] = IDENT, *, unit: bool = True) -> None:
        self.identity = dict(identity)
        self.unit = unit

    def encode(self, texts: Iterable[str], progress: bool = False) -> np.ndarray:
        return np.stack([hash_vector(t, self.identity["dim"], unit=self.unit) for t in texts])


def fixed_clock() -> Callable[[], str]:
    """Timestamps one second apart from 2026-01-01T00:00:00+00:00 (one per call)."""
    counter = itertools.count()

    def now() -> str:
        i = next(counter)
        return f"2026-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}+00:00"
    return now


def minute_clock() -> Callable[[], str]:
    """Timestamps within one minute of 2026-01-01T00:00, the seconds wrapping (as the Qdrant
    tests have always written them)."""
    counter = itertools.count()
    return lambda: f"2026-01-01T00:00:{next(counter) % 60:02d}+00:00"


__all__ = ["ACL", "DIM", "IDENT", "HashEncoder", "fixed_clock", "hash_vector", "minute_clock"]
