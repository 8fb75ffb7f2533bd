"""An approximate index for :class:`memgate.retriever.EmbeddedStore`: one HNSW graph (hnswlib)
per namespace that holds at least ``threshold`` live records; smaller namespaces, and searches
whose filter keeps few of a namespace's records, stay exact.

Why this shape (benchmarks/bench_ann.py, docs/integrations.md section 7):

- **Filtering never follows truncation.** The namespace restriction is the partition: a graph
  holds one namespace's vectors only, so a search never truncates across tenants. The Kleene
  exclusions and a caller's id restriction are hnswlib's filter callback, applied while the
  graph is searched (a candidate that fails it is never counted toward k). When the filter keeps
  fewer than ``exact_fraction`` of a partition, the allowed records are scanned exactly instead.
- **No second durable copy.** The graphs live in memory and are built from the store's
  vector file the first time an approximate search needs them (the rows a search returns are
  checked against their CRC, :mod:`memgate.retriever.vector_file`), then kept in step
  with ``SupportIndex`` (the same feed as every other index): nothing to recover after a crash,
  nothing on disk to purge on forget.
- **Forget.** A forgotten or replaced vector is overwritten in the graph (with zeros) and its
  label marked deleted, so the graph keeps no copy of it; the label can come back only for the
  same record with a new vector.

Labels are ``SupportIndex`` positions (one per memory id, never reused).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Optional

import numpy as np

try:  # optional dependency (the [ann] extra)
    import hnswlib
except ImportError:  # pragma: no cover - exercised only without hnswlib
    hnswlib = None

DEFAULT_THRESHOLD = 20_000
M, EF_CONSTRUCTION, EF_SEARCH = 16, 100, 200


def available() -> bool:
    return hnswlib is not None


class _Partition:
    """One namespace's graph: labels = support positions, ``slots[p]`` = the vector it holds."""

    def __init__(self, dim: int, capacity: int, threads: int):
        self.graph = hnswlib.Index(space="ip", dim=dim)
        self.graph.init_index(max_elements=max(capacity, 1024), ef_construction=EF_CONSTRUCTION, M=M)
        self.graph.set_ef(EF_SEARCH)
        self.slots = np.full(0, -1, dtype=np.int64)
        self.threads = threads
        self.seq = -1  # the SupportIndex version the graph was last brought up to
        self.live = 0  # live records of the namespace at that version

    def sync(self, want: np.ndarray, matrix: np.ndarray) -> None:
        """Make the graph hold ``matrix[want[p]]`` for every position with ``want[p] >= 0`` and
        nothing for the others (``want`` indexed by position)."""
        n = len(want)
        if len(self.slots) < n:
            grown = np.full(n, -1, dtype=np.int64)
            grown[: len(self.slots)] = self.slots
            self.slots = grown
        have = self.slots[:n]
        changed = np.flatnonzero(have != want)
        if not len(changed):
            return
        gone = changed[want[changed] < 0]
        if len(gone):  # overwrite the vector in the graph, then hide the label
            dim = matrix.shape[1]
            self.graph.add_items(np.zeros((len(gone), dim), dtype=np.float32), gone, num_threads=1)
            for p in gone.tolist():
                self.graph.mark_deleted(p)
        new = changed[want[changed] >= 0]
        if len(new):
            need = int(self.graph.get_current_count()) + len(new)
            if need > self.graph.get_max_elements():
                self.graph.resize_index(max(need, 2 * self.graph.get_max_elements()))
            vectors = np.ascontiguousarray(matrix[want[new]], dtype=np.float32)
            self.graph.add_items(vectors, new, num_threads=self.threads)
        self.slots[changed] = want[changed]

    def search(self, q: np.ndarray, k: int, allowed: Optional[Callable[[int], bool]]) -> np.ndarray:
        """Top ``k`` labels; ``allowed`` (None: every live label) filters inside the search."""
        k = min(k, self.live)
        if k <= 0:
            return np.zeros(0, dtype=np.int64)
        try:
            labels, _ = self.graph.knn_query(q, k=k, filter=allowed)
        except RuntimeError:  # fewer allowed points than k reachable
            return np.zeros(0, dtype=np.int64)
        return labels[0].astype(np.int64)


class AnnIndex:
    """Per-namespace HNSW partitions for the namespaces with ``>= threshold`` live records."""

    def __init__(self, dim: int, threshold: int = DEFAULT_THRESHOLD, exact_fraction: float = 0.05,
                 threads: int = 2):
        if not available():
            raise ImportError("the approximate index needs hnswlib (pip install memgate[ann])")
        if type(threshold) is not int or threshold < 1:
            raise ValueError(f"ann threshold must be an int >= 1, got {threshold!r}")
        self.dim, self.threshold, self.exact_fraction, self.threads = dim, threshold, exact_fraction, threads
        self.parts: dict[int, _Partition] = {}

    def partition(self, code: int, index, matrix: np.ndarray) -> Optional[_Partition]:
        """The up-to-date graph of namespace ``code`` (``index``: the store's SupportIndex), or
        None when the namespace is below the threshold (searched exactly)."""
        part = self.parts.get(code)
        if part is not None and part.seq == index.seq:
            return part  # nothing written since the last sync
        n = len(index.ids)
        members = index.alive[:n] & (index.ns[:n] == code)
        count = int(members.sum())
        if part is None and count < self.threshold:
            return None
        if part is None:
            part = self.parts[code] = _Partition(self.dim, int(count * 1.25), self.threads)
        part.sync(np.where(members, index.slot[:n], -1), matrix)
        part.seq, part.live = index.seq, count
        return part

    def forget_all(self) -> None:
        self.parts.clear()


__all__ = ["DEFAULT_THRESHOLD", "EF_CONSTRUCTION", "EF_SEARCH", "M", "AnnIndex", "available"]
