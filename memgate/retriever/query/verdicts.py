"""Cached Kleene verdicts: per query, work proportional to the readable namespaces' metadata
signatures, not to their records.

A record's verdict depends only on its metadata signature
(:func:`memgate.retriever.records.index.signature_key`: namespace, policy tags, lifecycle, the scopes
it was superseded in, its validity window) and on the query's purpose, intent, subject and time;
its namespace is readable whenever it is in the support. Times enter only through comparisons
with the boundary dates of the signatures (``time >= valid_from``, ``time < valid_to``, ISO
strings compared as strings), so every time between two consecutive boundaries gets the same
verdicts: the *time bucket* is the number of boundaries ``<=`` the time (``None``: no time).

- :class:`SignatureVerdicts`: one verdict per signature code for one ``(purpose, intent,
  subject, time bucket)``, computed the first time a query needs that signature, then kept
  (a signature never changes meaning; new signatures get new codes).
- :class:`ExclusionSummary`: for one ``(readable namespaces, purpose, intent, subject, time
  bucket)``, what a query needs from the whole support: the signatures and lifecycle states
  to exclude in the search filter, the counts by reason, the support size and the unresolved
  records kept. Built in O(signatures of those namespaces) (O(support) only for a store that
  cannot filter by signature, for its id list) and dropped when ``SupportIndex.apply`` (fed by
  ``MemoryStore.changes_since``, so another process's writes and forgets count too) touches
  one of its namespaces.

Both are bounded (least recently used out first).
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

A_FALSE, A_TRUE, A_NONE, A_UNSET = 0, 1, 2, -1
MAX_VERDICT_SETS = 64
MAX_SUMMARIES = 64


def signature_times(key: tuple[Any, ...]) -> list[str]:
    """The boundary times a signature's verdict compares the query time with."""
    _, _, _, scopes, (vf, vt) = key
    out = [t for t in (vf, vt) if t is not None]
    for scope in scopes:
        if scope is not None:
            out.extend(t for t in scope[1:] if t is not None)
    return out


class SignatureVerdicts:
    """Verdicts per signature code for one ``(purpose, intent, subject, time bucket)``."""

    def __init__(self) -> None:
        self.a = np.full(0, A_UNSET, dtype=np.int8)  # A_FALSE / A_TRUE / A_NONE per code
        self.info: dict[int, tuple[Any, ...]] = {}  # code -> (resolved lifecycle, admissible, reasons, unresolved axes)

    def ensure(self, codes: np.ndarray, n_codes: int, decide: Callable[[int], tuple[Any, ...]]) -> None:
        """Compute the verdicts of ``codes`` not computed yet (``decide(code)`` -> info)."""
        if len(self.a) < n_codes:
            grown = np.full(max(n_codes, 2 * len(self.a), 64), A_UNSET, dtype=np.int8)
            grown[: len(self.a)] = self.a
            self.a = grown
        todo = codes[self.a[codes] == A_UNSET]
        for s in todo.tolist():
            info = decide(s)
            a = info[1]
            self.info[s] = info
            self.a[s] = A_TRUE if a is True else A_FALSE if a is False else A_NONE


@dataclass
class ExclusionSummary:
    """What one (readable namespaces, verdict key) asks of the whole support."""

    sig_codes: np.ndarray  # signature codes of the readable namespaces
    keep_sig: np.ndarray  # bool per signature code (index-wide length): kept by the Kleene step
    states: list[Any]  # lifecycle states whose every readable record is excluded (search filter)
    digests: list[Any]  # signature digests of the other excluded records (search filter)
    ids: list[Any]  # (namespace, memory_id) of excluded records not covered above (stores without digests)
    counts: dict[str, Any]  # reason -> excluded records
    candidates: int  # the support's size
    kept: int  # records kept by the Kleene step
    unresolved_kept: int  # records kept with an unresolved axis (fail_mode="open")

    @property
    def dropped(self) -> int:
        return self.candidates - self.kept


class VerdictCache:
    """The retriever's cached verdicts and exclusion summaries (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._verdicts: OrderedDict[tuple[Any, ...], SignatureVerdicts] = OrderedDict()
        self._summaries: OrderedDict[tuple[Any, ...], tuple[ExclusionSummary, frozenset[int]]] = OrderedDict()
        self._boundaries: list[str] = []
        self._seen_sigs = 0  # signature codes whose times are in _boundaries

    def time_bucket(self, time: Optional[str]) -> Optional[int]:
        return None if time is None else bisect.bisect_right(self._boundaries, time)

    def note_changes(self, index: Any) -> None:
        """After ``index.apply``: drop the summaries of the namespaces it touched; when a new
        signature brings a new boundary time, every bucket shifts, so drop everything."""
        with self._lock:
            new_times = set()
            for key in index.sig_keys[self._seen_sigs:]:
                new_times.update(signature_times(key))
            self._seen_sigs = len(index.sig_keys)
            fresh = new_times.difference(self._boundaries)
            if fresh:
                self._boundaries = sorted(set(self._boundaries) | fresh)
                self._verdicts.clear()
                self._summaries.clear()
                return
            touched = index.changed_namespaces
            if touched:
                for key in [k for k, (_, codes) in self._summaries.items() if not codes.isdisjoint(touched)]:
                    del self._summaries[key]

    def verdicts(self, key: tuple[Any, ...]) -> SignatureVerdicts:
        with self._lock:
            found = self._verdicts.get(key)
            if found is None:
                found = self._verdicts[key] = SignatureVerdicts()
                while len(self._verdicts) > MAX_VERDICT_SETS:
                    self._verdicts.popitem(last=False)
            else:
                self._verdicts.move_to_end(key)
            return found

    def summary(self, key: tuple[Any, ...]) -> Optional[ExclusionSummary]:
        with self._lock:
            found = self._summaries.get(key)
            if found is None:
                return None
            self._summaries.move_to_end(key)
            return found[0]

    def put_summary(self, key: tuple[Any, ...], summary: ExclusionSummary, ns_codes: frozenset[int]) -> None:
        with self._lock:
            self._summaries[key] = (summary, ns_codes)
            while len(self._summaries) > MAX_SUMMARIES:
                self._summaries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._verdicts.clear()
            self._summaries.clear()


__all__ = ["A_FALSE", "A_NONE", "A_TRUE", "ExclusionSummary", "SignatureVerdicts", "VerdictCache",
           "signature_times"]
