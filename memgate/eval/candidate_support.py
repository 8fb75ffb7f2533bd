"""Candidate support, vectorised: which memories of a pool a route may rank for a query.

The rule is ``memgate.contract.records.route_verdict`` (scope AND policy AND lifecycle, strong Kleene),
evaluated from per-memory tables instead of once per (query, memory) pair: policy per query
purpose, lifecycle per intent, scoped supersession per query applicability (subject, time). The
tables are built once per route view; ``inclusion`` then answers a block of memories against a
block of queries in a few numpy operations. tests/eval/test_corruption.py checks it against
``route_verdict`` pair by pair, on clean and corrupted metadata.

Tri-states are coded 1 / 0 / -1 (True / False / None).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np

from memgate.contract.admissibility import INTENTS, lifecycle_value
from memgate.contract.sources import RouteView

LIFECYCLE_STATES = ("current", "stale", "superseded", "forgotten", "unknown")


def tri_code(value) -> int:
    return -1 if value is None else int(value)


def and3_codes(axes: np.ndarray) -> np.ndarray:
    """Strong Kleene AND over axis 0 of an int array of tri-state codes."""
    return np.where((axes == 0).any(axis=0), 0, np.where((axes == 1).all(axis=0), 1, -1))


class SupportTables:
    """Per-memory verdict tables of one route view; namespaces are passed in as integer codes
    (``ns_code``; -1 = no namespace, never readable) so that a caller may swap the namespace
    column (random_partition) without rebuilding the tables."""

    def __init__(self, view: RouteView, ns_code: dict):
        mems, queries = view.memories, view.queries
        rules = view.policy_rules
        self.view = view
        self.ns_code = ns_code
        purposes = list(dict.fromkeys(q.purpose for q in queries))
        purpose_col = {p: i for i, p in enumerate(purposes)}
        by_tags: dict = {}
        self.policy = np.empty((len(mems), len(purposes)), dtype=np.int8)
        for i, m in enumerate(mems):
            if m.policy_tags not in by_tags:
                by_tags[m.policy_tags] = [tri_code(rules.evaluate(m.policy_tags, p)[0]) for p in purposes]
            self.policy[i] = by_tags[m.policy_tags]
        by_state = {s: [tri_code(lifecycle_value(s, intent)) for intent in INTENTS] for s in LIFECYCLE_STATES}
        self.life = np.array([by_state[m.lifecycle_state] for m in mems], dtype=np.int8).reshape(
            len(mems), len(INTENTS))
        self.current_or_unknown = np.array(
            [m.lifecycle_state in ("current", "unknown") for m in mems], dtype=bool)
        # Scoped supersession, column-wise over the scoped memories (SupersessionScope.contains).
        self.scoped = np.array([m.lifecycle_state == "superseded" and m.supersession_scope is not None
                                for m in mems], dtype=bool)
        scopes = [mems[i].supersession_scope for i in np.flatnonzero(self.scoped)]
        self._scoped_row = np.cumsum(self.scoped) - 1  # memory index -> row among the scoped
        self._sc_subject = np.array([sc.subject for sc in scopes], dtype=object)
        self._sc_has_subject = np.array([sc.subject is not None for sc in scopes], dtype=bool)
        self._sc_has_window = np.array([sc.valid_from is not None or sc.valid_to is not None
                                        for sc in scopes], dtype=bool)
        self._sc_from = [sc.valid_from or "" for sc in scopes]
        self._sc_to = [sc.valid_to for sc in scopes]
        self._scoped_cache: dict = {}
        self._readable_cache: dict = {}
        # Per query: readable namespace codes (a row of a table), purpose column, intent column.
        self.q_readable = np.zeros((len(queries), len(ns_code) + 1), dtype=bool)
        for qi, q in enumerate(queries):
            table = self.readable(q.namespaces)
            if table is not None:
                self.q_readable[qi] = table
        self.q_has_ns = np.array([q.namespaces is not None for q in queries], dtype=bool)
        self.q_purpose = np.array([purpose_col[q.purpose] for q in queries], dtype=np.int64)
        self.q_intent = np.array([INTENTS.index(q.intent) for q in queries], dtype=np.int64)

    def readable(self, namespaces) -> Optional[np.ndarray]:
        """Boolean table over namespace codes (last entry: code -1, never readable); None when
        the query has no readable set (scope unresolved)."""
        if namespaces is None:
            return None
        if namespaces not in self._readable_cache:
            table = np.zeros(len(self.ns_code) + 1, dtype=bool)
            table[[self.ns_code[n] for n in namespaces if n in self.ns_code]] = True
            self._readable_cache[namespaces] = table
        return self._readable_cache[namespaces]

    def _scoped_lifecycle(self, subject, time, intent) -> np.ndarray:
        """Lifecycle code of every scoped-superseded memory for one query applicability."""
        key = (subject, time, intent)
        if key not in self._scoped_cache:
            n = len(self._sc_subject)
            if subject is None:
                subj = np.where(self._sc_has_subject, -1, 1)
            else:
                subj = np.where(self._sc_has_subject, (self._sc_subject == subject).astype(np.int8), 1)
            if time is None:
                window = np.where(self._sc_has_window, -1, 1)
            else:
                inside = [time >= f and (t is None or time < t) for f, t in zip(self._sc_from, self._sc_to)]
                window = np.where(self._sc_has_window, np.array(inside, dtype=np.int8).reshape(n), 1)
            inside = and3_codes(np.stack([subj, window]).reshape(2, n))
            # inside -> superseded, outside -> current, unresolved -> unknown (effective_state)
            value = {s: tri_code(lifecycle_value(s, intent)) for s in ("superseded", "current", "unknown")}
            self._scoped_cache[key] = np.select(
                [inside == 1, inside == 0], [value["superseded"], value["current"]], value["unknown"]
            ).astype(np.int8)
        return self._scoped_cache[key]

    def inclusion(self, spec, ns: np.ndarray, memories: np.ndarray, queries: Sequence[int]) -> np.ndarray:
        """(len(queries), len(memories)) booleans: is the memory in the query's support under the
        route ``spec`` (pool membership aside)? ``ns``: namespace code of every memory."""
        memories = np.asarray(memories, dtype=np.int64)
        queries = np.asarray(queries, dtype=np.int64)
        codes = ns[memories]
        readable = self.q_readable[queries][:, codes]  # code -1 -> the last column, never readable
        keep = np.ones(readable.shape, dtype=bool)
        if spec.namespace:
            keep &= readable
        if spec.current_only:
            keep &= self.current_or_unknown[memories][None, :]
        if spec.kleene:
            scope = np.where(codes[None, :] < 0, -1, readable.astype(np.int8))
            scope[~self.q_has_ns[queries], :] = -1
            policy = self.policy[np.ix_(memories, self.q_purpose[queries])].T
            life = self.life[np.ix_(memories, self.q_intent[queries])].T
            scoped = np.flatnonzero(self.scoped[memories])
            if len(scoped):
                life = life.copy()
                rows = self._scoped_row[memories[scoped]]
                for r, qi in enumerate(queries):
                    q = self.view.queries[qi]
                    life[r, scoped] = self._scoped_lifecycle(q.subject, q.time, q.intent)[rows]
            verdict = and3_codes(np.stack([scope, policy, life]))
            keep &= (verdict != 0) if spec.kleene == "open" else (verdict == 1)
        return keep

    def support(self, spec, ns: np.ndarray, qi: int, pool: np.ndarray) -> np.ndarray:
        """Positions (into ``pool``) of the route's candidates for query ``qi``, after exclusion.

        Pre-filters to what scope can keep (the namespace routes need a readable namespace; a
        Kleene route drops a known wrong scope), then applies the full rule to those only.
        """
        table = self.readable(self.view.queries[qi].namespaces)
        if table is None:
            cand = np.zeros(0, dtype=np.int64) if spec.namespace else np.arange(len(pool))
        elif spec.namespace:
            cand = np.flatnonzero(table[ns[pool]])
        elif spec.kleene:
            codes = ns[pool]
            cand = np.flatnonzero(table[codes] | (codes < 0))
        else:
            cand = np.arange(len(pool))
        if not (spec.kleene or spec.current_only):
            return cand
        return cand[self.inclusion(spec, ns, pool[cand], [qi])[0]]
