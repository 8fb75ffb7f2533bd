"""What a query-time index keeps about records: an ``IndexEntry`` per record (metadata only, never
text), its Kleene *signature* (what its verdict depends on), and ``SupportIndex``, the in-memory
index of live records' metadata and vector slots.

``SupportIndex`` holds, per record, its namespace, lifecycle state, vector slot and metadata
signature, refreshed incrementally from ``MemoryStore.changes_since``. The retriever keeps one for
its Kleene verdicts (:mod:`memgate.retriever.query`); :class:`memgate.retriever.EmbeddedStore`
keeps one to answer its search (namespace filter and exclusions applied before truncation).
"""

from __future__ import annotations

import bisect
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from memgate.contract.admissibility import SupersessionScope
from memgate.retriever.records.memory import Applicability, StoredMemory, SupersededIn


@dataclass(frozen=True)
class IndexEntry:
    """What a query-time index needs about one record (metadata only, never text)."""

    memory_id: str
    namespace: str
    slot: Optional[int]
    alive: bool  # False once forgotten (no text, no vector)
    lifecycle_state: str
    superseded_in: tuple[Any, ...]
    applicability: Applicability
    policy_tags: Optional[tuple[Any, ...]]
    seq: int


def index_entry(raw: Mapping[str, Any], *, memory_id: str, namespace: str, slot: Optional[int],
                lifecycle_state: str, seq: int) -> IndexEntry:
    """An :class:`IndexEntry` from a record's stored fields (``raw``: its ``to_dict()`` form)."""
    return IndexEntry(
        memory_id=memory_id, namespace=namespace, slot=slot,
        alive=lifecycle_state != "forgotten" and slot is not None,
        lifecycle_state=lifecycle_state,
        superseded_in=tuple(
            SupersededIn(s["by"], None if s["scope"] is None else SupersessionScope(**s["scope"]))
            for s in raw.get("superseded_in") or ()),
        applicability=Applicability.from_dict(raw.get("applicability")),
        policy_tags=None if raw.get("policy_tags") is None else tuple(raw["policy_tags"]),
        seq=seq,
    )


def signature_key(entry: IndexEntry) -> tuple[Any, ...]:
    """What a record's Kleene verdict depends on (namespace, policy tags, lifecycle, the scopes it
    was superseded in, its validity window): records with one key get one verdict per query."""
    return (
        entry.namespace,
        entry.policy_tags,
        entry.lifecycle_state,
        tuple(sorted({(None if s.scope is None else (s.scope.subject, s.scope.valid_from, s.scope.valid_to))
                      for s in entry.superseded_in}, key=repr)),
        (entry.applicability.valid_from, entry.applicability.valid_to),
    )


def signature_digest(key: tuple[Any, ...]) -> str:
    """A stable name for a :func:`signature_key` (a store that keeps it per record can filter a
    search by the signatures a query excludes instead of by each excluded record's id)."""
    return hashlib.sha256(json.dumps(key, ensure_ascii=False).encode()).hexdigest()[:32]


def record_signature(memory: StoredMemory) -> str:
    """The :func:`signature_digest` of a record as stored (what a store filtering by signature
    keeps beside it)."""
    entry = index_entry(memory.to_dict(), memory_id=memory.memory_id, namespace=memory.namespace,
                        slot=None, lifecycle_state=memory.lifecycle_state, seq=0)
    return signature_digest(signature_key(entry))


LOG_KEEP = 4096  # apply() calls whose changed positions SupportIndex.changed_since remembers


class SupportIndex:
    """Query-time metadata and positions of records (no text), refreshed incrementally.

    A record is keyed by ``(namespace, memory_id)`` (ids are scoped per namespace): ``pos`` maps
    the key to a position, ``ids`` / ``namespaces`` give a position's id and namespace, ``keys``
    its ``(memory_id, namespace)`` tie-break key (ties by memory id, then namespace)."""

    def __init__(self) -> None:
        self.pos: dict[tuple[Any, ...], int] = {}
        self.ids: list[str] = []
        self.namespaces: list[str] = []
        self.keys: list[tuple[Any, ...]] = []
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
        self.sig_code: dict[tuple[Any, ...], int] = {}
        self.sig_keys: list[tuple[Any, ...]] = []
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
            found = self.sig_code.get(key)
            if found is None:
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
            else:
                code = found
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
        kept: np.ndarray = pos[mask]
        return kept

    def support(self, namespaces: Iterable[str], exclude_states: Iterable[str] = (),
                exclude_ids: Iterable[str] = (), exclude_signatures: Iterable[str] = ()) -> np.ndarray:
        """Positions of live records in ``namespaces``, minus the excluded states, signatures
        (by :func:`memgate.retriever.records.index.signature_digest`) and ids (an id excludes it in
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
        live: np.ndarray = pos[self.alive[pos]]
        return live

    def signature_mask(self, digests: Iterable[str]) -> np.ndarray:
        """A bool per signature code: True for the signatures named by ``digests``."""
        mask = np.zeros(len(self.sig_keys), dtype=bool)
        codes = [self.sig_by_digest[d] for d in digests if d in self.sig_by_digest]
        mask[codes] = True
        return mask


__all__ = ["IndexEntry", "SupportIndex", "index_entry", "record_signature", "signature_digest",
           "signature_key"]
