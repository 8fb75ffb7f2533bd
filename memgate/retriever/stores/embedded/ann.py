"""An approximate index for :class:`memgate.retriever.EmbeddedStore`: one HNSW graph (hnswlib)
per namespace that holds at least ``threshold`` live records; smaller namespaces, and searches
whose filter keeps few of a namespace's records, stay exact.

Why this shape (benchmarks/bench_ann.py, docs/integrations/scale.md):

- **Filtering never follows truncation.** The namespace restriction is the partition: a graph
  holds one namespace's vectors only, so a search never truncates across tenants. The Kleene
  exclusions and a caller's id restriction are hnswlib's filter callback, applied while the
  graph is searched (a candidate that fails it is never counted toward k). When the filter keeps
  fewer than ``exact_fraction`` of a partition, the allowed records are scanned exactly instead.
- **No second durable copy.** The graphs live in memory and are built from the store's
  vector file the first time an approximate search needs them (the rows a search returns are
  checked against their CRC, :mod:`memgate.retriever.stores.embedded.vector_file`), then kept in step
  with ``SupportIndex`` (the same feed as every other index): nothing to recover after a crash,
  nothing on disk to purge on forget.
- **Forget.** A forgotten or replaced vector is overwritten in the graph (with zeros) and its
  label marked deleted, so the graph keeps no copy of it; the label can come back only for the
  same record with a new vector.

Labels are ``SupportIndex`` positions (one per memory id, never reused).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, Optional

import numpy as np

from memgate.retriever.records.index import SupportIndex

try:  # optional dependency (the [ann] extra)
    import hnswlib
except ImportError:  # pragma: no cover - exercised only without hnswlib
    hnswlib = None

DEFAULT_THRESHOLD = 20_000
M, EF_CONSTRUCTION, EF_SEARCH = 16, 100, 200


def available() -> bool:
    return hnswlib is not None


def _allowed_by(allowed: bytes) -> Callable[[int], bool]:
    """A graph search's filter: label -> whether ``allowed`` (a byte per label) marks it."""
    def test(label: int, allowed: bytes = allowed) -> bool:
        return allowed[label] == 1
    return test


class _Partition:
    """One namespace's graph: labels = support positions, ``slots[p]`` = the vector it holds."""

    def __init__(self, dim: int, capacity: int, threads: int):
        self.graph = hnswlib.Index(space="ip", dim=dim)
        self.graph.init_index(max_elements=max(capacity, 1024), ef_construction=EF_CONSTRUCTION, M=M)
        self.graph.set_ef(EF_SEARCH)
        self.slots = np.full(0, -1, dtype=np.int64)
        self.threads = threads
        self.generation = -1  # the SupportIndex generation the graph was last brought up to
        self.live = 0  # live records of the namespace at that generation

    def sync(self, positions: np.ndarray, want: np.ndarray, matrix: np.ndarray) -> None:
        """Make the graph hold ``matrix[want[i]]`` at label ``positions[i]`` where ``want[i] >= 0``
        and nothing there where ``want[i] < 0`` (the other labels stay as they are)."""
        if not len(positions):
            return
        n = int(positions.max()) + 1
        if len(self.slots) < n:
            grown = np.full(max(n, 2 * len(self.slots)), -1, dtype=np.int64)
            grown[: len(self.slots)] = self.slots
            self.slots = grown
        differs = self.slots[positions] != want
        changed, want = positions[differs], want[differs]
        if not len(changed):
            return
        gone = changed[want < 0]
        if len(gone):  # overwrite the vector in the graph, then hide the label
            dim = matrix.shape[1]
            self.graph.add_items(np.zeros((len(gone), dim), dtype=np.float32), gone, num_threads=1)
            for p in gone.tolist():
                self.graph.mark_deleted(p)
        new = changed[want >= 0]
        if len(new):
            need = int(self.graph.get_current_count()) + len(new)
            if need > self.graph.get_max_elements():
                self.graph.resize_index(max(need, 2 * self.graph.get_max_elements()))
            vectors = np.ascontiguousarray(matrix[want[want >= 0]], dtype=np.float32)
            self.graph.add_items(vectors, new, num_threads=self.threads)
        self.slots[changed] = want

    def search(self, q: np.ndarray, k: int, allowed: Optional[Callable[[int], bool]]) -> np.ndarray:
        """Top ``k`` labels; ``allowed`` (None: every live label) filters inside the search."""
        k = min(k, self.live)
        if k <= 0:
            return np.zeros(0, dtype=np.int64)
        try:
            labels, _ = self.graph.knn_query(q, k=k, filter=allowed)
        except RuntimeError:  # fewer allowed points than k reachable
            return np.zeros(0, dtype=np.int64)
        found: np.ndarray = labels[0].astype(np.int64)
        return found


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
        # a graph search's allowed labels by (namespace, index generation, filter): a repeated
        # filter (the same Kleene verdicts) costs no pass over the namespace
        self._allowed: dict[tuple[Any, ...], bytes] = {}

    def partition(self, code: int, index: SupportIndex, matrix: np.ndarray) -> Optional[_Partition]:
        """The up-to-date graph of namespace ``code`` (``index``: the store's SupportIndex), or
        None when the namespace is below the threshold (searched exactly). Brought up to date in
        O(records written since its last sync), through ``index.changed_since``; built from the
        namespace's records the first time."""
        part = self.parts.get(code)
        if part is not None and part.generation == index.generation:
            return part  # nothing written since the last sync
        count = index.live_count(code)
        if part is None:
            if count < self.threshold:
                return None
            part = self.parts[code] = _Partition(self.dim, int(count * 1.25), self.threads)
            positions = index.namespace_positions(code)
        else:
            changed = index.changed_since(part.generation)
            if changed is None:  # too far behind the change log: every position of the namespace
                positions = index.namespace_positions(code)
            else:
                positions = changed[index.ns[changed] == code]
        part.sync(positions, np.where(index.alive[positions], index.slot[positions], -1), matrix)
        part.generation, part.live = index.generation, count
        return part

    def forget_all(self) -> None:
        self.parts.clear()

    def search(self, q: np.ndarray, codes: list[int], k: int, index: SupportIndex, matrix: np.ndarray,
               state_codes: list[int], named: list[int],
               sig_mask: Optional[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Candidate positions for the top ``k`` of namespaces ``codes`` minus the excluded
        ``state_codes``, signatures (``sig_mask``) and positions ``named``: per namespace with a
        graph, the graph's filtered top ``k`` (the exclusions are its search filter; the plain
        graph search when nothing of the namespace is excluded, known from live counts per state
        and signature); below the threshold, or when the filter keeps few records, the allowed
        records of the namespace. O(k) per graph beyond its search when nothing of it is
        excluded, O(namespace) otherwise: never a pass over the whole store."""
        excluded_sigs_by_ns: dict[int, int] = {}
        sig_key = None if sig_mask is None else hashlib.sha256(np.packbits(sig_mask).tobytes()).hexdigest()
        if sig_mask is not None:
            ex = np.flatnonzero(sig_mask)
            ex = ex[index.sig_live_counts[ex] > 0]
            excluded_sigs_by_ns = dict.fromkeys([index.sig_ns[c] for c in ex.tolist()], 1)  # O(excluded)
        named_by_ns: dict[int, list[Any]] = {}
        for p in named:
            if index.alive[p]:
                named_by_ns.setdefault(int(index.ns[p]), []).append(p)
        graphs, exact, small = [], [], []
        for code in codes:
            part = self.partition(code, index, matrix)
            if part is None:
                small.append(code)  # below the threshold: exact, all such namespaces at once below
                continue
            mine_named = named_by_ns.get(code, ())
            if (part is not None and not mine_named and code not in excluded_sigs_by_ns
                    and index.live_count(code, state_codes) == 0):
                graphs.append(part.search(q, k, None))  # nothing excluded: the plain graph search
                continue
            key = (code, index.generation, tuple(state_codes), tuple(mine_named), sig_key)
            allowed = self._allowed.get(key)
            if allowed is None:
                mine = index.namespace_support(code, state_codes, mine_named, sig_mask)
                if len(mine) < self.exact_fraction * part.live:
                    exact.append(mine)
                    continue
                mask = np.zeros(len(index.ids), dtype=bool)
                mask[mine] = True
                allowed = mask.tobytes()  # (indexing bytes is the cheapest per-label test in Python)
                self._allowed[key] = allowed  # the next query with this filter skips the O(namespace) mask
                while len(self._allowed) > 8:
                    self._allowed.pop(next(iter(self._allowed)))
            graphs.append(part.search(q, k, _allowed_by(allowed)))
        if small:
            pos = index.live_positions_of_codes(small)
            keep = np.ones(len(pos), dtype=bool)
            if len(state_codes):
                keep &= ~np.isin(index.state[pos], np.asarray(state_codes, dtype=np.int32))
            if sig_mask is not None:
                keep &= ~sig_mask[index.sig[pos]]
            if named:
                keep &= ~np.isin(pos, np.asarray(named, dtype=np.int64))
            exact.append(pos[keep])
        return graphs, exact


__all__ = ["DEFAULT_THRESHOLD", "EF_CONSTRUCTION", "EF_SEARCH", "M", "AnnIndex", "available"]
