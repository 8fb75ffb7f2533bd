"""What the fault suite's processes share (benchmarks/fault_suite.py, benchmarks/fault_disk.py):
a deterministic hash encoder's identity and vectors (no model) and the namespaces written."""

from __future__ import annotations

import hashlib

import numpy as np

DIM = 16
IDENT = {"id": "fault-hash-encoder", "revision": "1", "normalize": True, "dim": DIM}
NAMESPACES = ("alice", "bob", "carol")


def vec(text: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
    return v / np.linalg.norm(v)


__all__ = ["DIM", "IDENT", "NAMESPACES", "vec"]
