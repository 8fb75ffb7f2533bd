"""The candidate support: an in-memory index of live records' metadata and the filtered search
over it.

``SupportIndex`` holds, per record, its namespace, lifecycle state, vector slot and metadata
signature (no text), refreshed incrementally from ``MemoryStore.changes_since``. The retriever
keeps one for its Kleene verdicts; :class:`memgate.retriever.EmbeddedStore` keeps one to answer
:meth:`MemoryStore.search` (namespace filter and exclusions applied before truncation).

``top_by_score`` is the one ranking rule: score descending, ties by memory id ascending.
"""

from __future__ import annotations

import bisect
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Optional

import numpy as np

from memgate.model.ordering import rank_by_score
from memgate.retriever.semantics import IndexEntry, signature_digest, signature_key


def readable_namespace_list(namespaces: Any) -> list[str]:
    """The readable namespaces of a search as a sorted list; there is no unfiltered search, so
    an empty or missing set is a ``PermissionError``. A plain string is one namespace (as in
    :class:`memgate.contract.records.QueryContext`), never its characters."""
    if isinstance(namespaces, str):
        namespaces = [namespaces]
    ns = sorted(set(namespaces or ()))
    if not ns:
        raise PermissionError("search needs the readable namespaces; there is no unfiltered search")
    bad = [n for n in ns if not isinstance(n, str) or not n]
    if bad:
        raise ValueError(f"namespaces must be non-empty strings, got {bad!r}")
    return ns


def check_k(k: Any) -> int:
    if type(k) is not int or k < 1:
        raise ValueError(f"k must be an int >= 1, got {k!r}")
    return k


def matvec(M: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``M @ q`` in torch: the gate already runs in torch's thread pool, and a second pool (the
    BLAS behind numpy) spinning beside it on a few cores slows both down several times.
    (torch is imported here, at the first search, not when the retriever is imported.)"""
    import torch

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        Mt = torch.from_numpy(np.asarray(M))  # the read-only memory map is only read
    return torch.mv(Mt, torch.from_numpy(q)).numpy()


def top_by_score(ids: Sequence[str], positions: np.ndarray, scores: np.ndarray, n: int,
                 exact: Optional[Callable[[np.ndarray], np.ndarray]] = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``n`` best ``positions`` by score, ties broken by memory id (``ids[position]``) ascending.

    ``exact`` recomputes the scores of the shortlist row by row: a blocked matrix-vector
    product can round identical rows differently, which would break true ties by slot
    instead of by id. The shortlist keeps every score within ``1e-5`` of the n-th.
    """
    if len(positions) == 0 or n <= 0:
        return positions[:0], scores[:0]
    if len(positions) > n:
        threshold = np.partition(scores, len(scores) - n)[len(scores) - n]
        sel = scores >= threshold - (1e-5 if exact is not None else 0.0)
        positions, scores = positions[sel], scores[sel]
    if exact is not None:
        scores = exact(positions)
    order = np.argsort(-scores, kind="stable")
    ranked = scores[order]
    if not (ranked[1:] == ranked[:-1]).any() and not np.isnan(ranked).any():
        return positions[order][:n], ranked[:n]  # no tie to break: no id is read
    names = [ids[p] for p in positions.tolist()]  # ids or (memory_id, namespace) keys
    id_rank = np.empty(len(names), dtype=np.int64)
    id_rank[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    order = rank_by_score(id_rank, np.arange(len(positions)), scores)
    return positions[order][:n], scores[order][:n]


def exact_cosines(matrix: np.ndarray, slots: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Cosines of unit rows ``matrix[slots]`` with unit ``q``, row by row in float64."""
    rows = np.asarray(matrix[slots], dtype=np.float32)
    return (rows * q).sum(axis=1, dtype=np.float64)


LOG_KEEP = 4096  # apply() calls whose changed positions SupportIndex.changed_since remembers


class SupportIndex:
    """Query-time metadata and positions of records (no text), refreshed incrementally.

    A record is keyed by ``(namespace, memory_id)`` (ids are scoped per namespace): ``pos`` maps
    the key to a position, ``ids`` / ``namespaces`` give a position's id and namespace, ``keys``
    its ``(memory_id, namespace)`` tie-break key (ties by memory id, then namespace)."""

    def __init__(self) -> None:
        self.pos: dict[tuple, int] = {}
        self.ids: list[str] = []
        self.namespaces: list[str] = []
        self.keys: list[tuple] = []
        self.by_id: dict[str, list[int]] = {}
        self.slot = np.zeros(0, dtype=np.int64)
        self.ns = np.zeros(0, dtype=np.int32)
        self.state = np.zeros(0, dtype=np.int32)
        self.sig = np.zeros(0, dtype=np.int32)
        self.alive = np.zeros(0, dtype=bool)
        # vector slot -> the live position holding it (-1: none), so that a store's hits given as
        # slots map back in one gather (slots are never reused: a vector file only grows)
        self.slot_pos = np.zeros(0, dtype=np.int64)
        self.ns_code: dict[str, int] = {}
        self.state_code: dict[str, int] = {}
        self.sig_code: dict[tuple, int] = {}
        self.sig_keys: list[tuple] = []
        self.sig_digests: list[str] = []  # signature_digest of each key (a store's search filter)
        self.sig_by_digest: dict[str, int] = {}
        self.sig_ns: list[int] = []  # the namespace code of each signature (its key's first part)
        self.seq = 0
        # what each apply() changed: (generation, positions), so that an index derived from this
        # one (an ANN graph, a cached verdict) catches up in O(changes), not O(records)
        self.generation = 0
        self._log_gen: list[int] = []
        self._log_pos: list[np.ndarray] = []
        self.changed_namespaces: set[int] = set()  # namespace codes the last apply() touched
        # per namespace: its positions (append-only: a key never changes namespace) and live
        # counts by lifecycle state, so a search of one namespace never scans the others
        self._ns_positions: dict[int, list[int]] = {}
        self._ns_arrays: dict[int, np.ndarray] = {}
        self._live: dict[tuple[int, int], int] = {}
        self._live_ns: dict[int, int] = {}  # live records per namespace code
        self.sig_live_counts = np.zeros(0, dtype=np.int64)  # live records per signature code

    def _grow(self, n: int) -> None:
        if n <= len(self.slot):
            return
        cap = max(n, 2 * len(self.slot), 1024)
        for name, dtype in (("slot", np.int64), ("ns", np.int32), ("state", np.int32),
                            ("sig", np.int32), ("alive", bool)):
            old = getattr(self, name)
            new = np.zeros(cap, dtype=dtype)
            new[: len(old)] = old
            setattr(self, name, new)

    def _grow_slots(self, n: int) -> None:
        if n > len(self.slot_pos):
            grown = np.full(max(n, 2 * len(self.slot_pos), 1024), -1, dtype=np.int64)
            grown[: len(self.slot_pos)] = self.slot_pos
            self.slot_pos = grown

    def positions_of_slots(self, slots: np.ndarray) -> np.ndarray:
        """The live position holding each vector slot, -1 where none does (a slot written
        after this index's last refresh)."""
        slots = np.asarray(slots, dtype=np.int64)
        out = np.full(len(slots), -1, dtype=np.int64)
        known = (slots >= 0) & (slots < len(self.slot_pos))
        out[known] = self.slot_pos[slots[known]]
        return out

    def apply(self, entries: list[IndexEntry]) -> tuple[list[int], list[int]]:
        """Apply changed entries; return (slots that became live, slots that died)."""
        born, died = [], []
        touched: list[int] = []
        for e in entries:
            p = self.pos.get((e.namespace, e.memory_id))
            if p is None:
                p = len(self.ids)
                self.pos[(e.namespace, e.memory_id)] = p
                self.ids.append(e.memory_id)
                self.namespaces.append(e.namespace)
                self.keys.append((e.memory_id, e.namespace))
                self.by_id.setdefault(e.memory_id, []).append(p)
                self._grow(p + 1)
                self.alive[p] = False
                code = self.ns_code.setdefault(e.namespace, len(self.ns_code))
                self._ns_positions.setdefault(code, []).append(p)
            elif self.alive[p]:
                key = (int(self.ns[p]), int(self.state[p]))
                self._live[key] -= 1
                self._live_ns[key[0]] -= 1
                self.sig_live_counts[int(self.sig[p])] -= 1
            old_slot = int(self.slot[p]) if self.alive[p] else None
            new_slot = e.slot if e.alive else None
            if old_slot is not None and old_slot != new_slot:
                died.append(old_slot)
                self.slot_pos[old_slot] = -1
            if new_slot is not None and new_slot != old_slot:
                born.append(new_slot)
            if new_slot is not None:
                self._grow_slots(new_slot + 1)
                self.slot_pos[new_slot] = p
            self.alive[p] = e.alive
            self.slot[p] = -1 if e.slot is None else e.slot
            self.ns[p] = self.ns_code.setdefault(e.namespace, len(self.ns_code))
            self.state[p] = self.state_code.setdefault(e.lifecycle_state, len(self.state_code))
            if e.alive:
                key = (int(self.ns[p]), int(self.state[p]))
                self._live[key] = self._live.get(key, 0) + 1
                self._live_ns[key[0]] = self._live_ns.get(key[0], 0) + 1
            key = signature_key(e)
            code = self.sig_code.get(key)
            if code is None:
                code = self.sig_code[key] = len(self.sig_keys)
                self.sig_keys.append(key)
                digest = signature_digest(key)
                self.sig_digests.append(digest)
                self.sig_by_digest[digest] = code
                self.sig_ns.append(int(self.ns[p]))
                if code >= len(self.sig_live_counts):
                    grown = np.zeros(max(2 * len(self.sig_live_counts), 64), dtype=np.int64)
                    grown[: len(self.sig_live_counts)] = self.sig_live_counts
                    self.sig_live_counts = grown
            self.sig[p] = code
            if e.alive:
                self.sig_live_counts[code] += 1
            touched.append(p)
        self.changed_namespaces = {int(c) for c in np.unique(self.ns[touched]).tolist()} if touched else set()
        if touched:
            self.generation += 1
            self._log_gen.append(self.generation)
            self._log_pos.append(np.unique(np.asarray(touched, dtype=np.int64)))
            if len(self._log_gen) > LOG_KEEP:  # bounded: an older reader catches up in full
                del self._log_gen[: len(self._log_gen) - LOG_KEEP]
                del self._log_pos[: len(self._log_pos) - LOG_KEEP]
        return born, died

    def changed_since(self, generation: int) -> Optional[np.ndarray]:
        """Positions written by the apply() calls after ``generation``, ascending, unique;
        None when the log no longer reaches back that far (the caller then syncs in full)."""
        if self._log_gen and generation < self._log_gen[0] - 1:
            return None
        start = bisect.bisect_right(self._log_gen, generation)
        if start >= len(self._log_gen):
            return np.zeros(0, dtype=np.int64)
        if start == len(self._log_gen) - 1:
            return self._log_pos[start]
        return np.unique(np.concatenate(self._log_pos[start:]))

    def __len__(self) -> int:
        return int(self.alive[: len(self.ids)].sum())

    def namespace_positions(self, code: int) -> np.ndarray:
        """Every position ever written in namespace ``code`` (live or not), ascending."""
        listed = self._ns_positions.get(code, ())
        arr = self._ns_arrays.get(code)
        if arr is None or len(arr) != len(listed):
            arr = self._ns_arrays[code] = np.asarray(listed, dtype=np.int64)
        return arr

    def live_count(self, code: int, state_codes: Optional[Iterable[int]] = None) -> int:
        """Live records of namespace ``code`` (in ``state_codes`` only, when given), in O(states)."""
        if state_codes is None:
            return self._live_ns.get(code, 0)
        return sum(self._live.get((code, s), 0) for s in state_codes)

    def sig_live(self, code: int) -> int:
        """Live records of signature ``code``."""
        return int(self.sig_live_counts[code]) if code < len(self.sig_live_counts) else 0

    def positions_of(self, exclude_ids: Iterable[Any]) -> list[int]:
        """Positions named by ``exclude_ids`` (an id: every namespace; a pair: one record)."""
        out: list[int] = []
        for item in exclude_ids:
            if isinstance(item, str):
                out.extend(self.by_id.get(item, ()))
            else:
                p = self.pos.get(tuple(item))
                if p is not None:
                    out.append(p)
        return out

    def namespace_support(self, code: int, state_codes: Sequence[int] = (),
                          excluded: Iterable[int] = (), sig_mask: Optional[np.ndarray] = None) -> np.ndarray:
        """``support`` restricted to one namespace, in O(that namespace): its live positions
        minus the lifecycle states ``state_codes``, the signatures ``sig_mask`` marks (a bool
        per signature code) and the positions ``excluded``."""
        pos = self.namespace_positions(code)
        mask = self.alive[pos]
        if len(state_codes):
            mask &= ~np.isin(self.state[pos], np.asarray(state_codes, dtype=np.int32))
        if sig_mask is not None:
            mask &= ~sig_mask[self.sig[pos]]
        drop = [p for p in excluded if self.ns[p] == code]
        if drop:
            mask &= ~np.isin(pos, np.asarray(drop, dtype=np.int64))
        return pos[mask]

    def support(self, namespaces: Iterable[str], exclude_states: Iterable[str] = (),
                exclude_ids: Iterable[str] = (), exclude_signatures: Iterable[str] = ()) -> np.ndarray:
        """Positions of live records in ``namespaces``, minus the excluded states, signatures
        (by :func:`memgate.retriever.semantics.signature_digest`) and ids (an id excludes it in
        every namespace, a ``(namespace, memory_id)`` pair one record), ascending."""
        pos = self.live_positions(namespaces)
        mask = np.ones(len(pos), dtype=bool)
        states = [self.state_code[s] for s in exclude_states if s in self.state_code]
        if states:
            mask &= ~np.isin(self.state[pos], np.array(states, dtype=np.int32))
        if exclude_signatures:
            mask &= ~self.signature_mask(exclude_signatures)[self.sig[pos]]
        named = self.positions_of(exclude_ids)
        if named:
            mask &= ~np.isin(pos, np.asarray(named, dtype=np.int64))
        return pos[mask]

    def live_positions(self, namespaces: Iterable[str]) -> np.ndarray:
        """Positions of live records in ``namespaces``, ascending, in O(those namespaces)."""
        return self.live_positions_of_codes({self.ns_code[ns] for ns in namespaces if ns in self.ns_code})

    def live_positions_of_codes(self, codes: Iterable[int]) -> np.ndarray:
        """Positions of live records in the namespaces ``codes``, ascending."""
        codes = sorted(codes)
        if not codes:
            return np.zeros(0, dtype=np.int64)
        if len(codes) == 1:
            pos = self.namespace_positions(codes[0])
        elif 4 * sum(len(self._ns_positions[c]) for c in codes) > len(self.ids):
            n = len(self.ids)  # most of the index: one pass beats a merge
            mask = np.zeros(len(self.ns_code), dtype=bool)
            mask[codes] = True
            return np.flatnonzero(self.alive[:n] & mask[self.ns[:n]])
        else:
            pos = np.sort(np.concatenate([self.namespace_positions(c) for c in codes]))
        return pos[self.alive[pos]]

    def signature_mask(self, digests: Iterable[str]) -> np.ndarray:
        """A bool per signature code: True for the signatures named by ``digests``."""
        mask = np.zeros(len(self.sig_keys), dtype=bool)
        codes = [self.sig_by_digest[d] for d in digests if d in self.sig_by_digest]
        mask[codes] = True
        return mask


__all__ = ["SupportIndex", "check_k", "exact_cosines", "matvec", "readable_namespace_list",
           "top_by_score"]
