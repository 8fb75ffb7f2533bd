"""An evaluation source: a store of memories, the queries against it, and the scorer's truth.

Every source (synthetic test, LoCoMo, GateMem, a cases file) is turned into one ``EvalSource`` so
that every route is scored by the same code. Routes receive only ``RouteView``s: memories and
query contexts. The scorer-only parts (``labels``, ``anchor_groups``, ``query_meta``) stay here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from memgate.contract.admissibility import PolicyRules
from memgate.contract.records import MemoryRecord, PairLabel, QueryContext

DefaultLabel = Callable[[QueryContext, MemoryRecord], PairLabel]


def wrong_scope_or_error(query: QueryContext, memory: MemoryRecord) -> PairLabel:
    """Default scorer rule for generated data: memories outside every readable namespace are
    wrong-scope and not useful; any in-scope memory must carry an explicit label."""
    if query.namespaces is not None and memory.namespace not in query.namespaces:
        return PairLabel(
            query_id=query.query_id,
            memory_id=memory.memory_id,
            relevance="not_useful",
            scope=False,
            policy=None,
            lifecycle=None,
            text_visible=False,
            metadata_visible=True,
            scenario="wrong_scope",
        )
    raise KeyError(
        f"no scorer label for in-scope pair (query {query.query_id!r}, memory {memory.memory_id!r})"
    )


@dataclass
class EvalSource:
    """One evaluation source.

    memories: the union of all stores of the source (index i is row i of the embedding matrix).
    queries: the query contexts (route-visible).
    pools: query_id -> indices into ``memories`` that form the store this query searches
        (global routes rank over the pool; namespace routes over the pool's readable part).
    labels: scorer-only explicit labels, query_id -> memory_id -> PairLabel.
    anchor_groups: scorer-only; query_id -> list of anchor sets. Recall is the share of sets hit
        (each required memory is its own set, except GateMem where a set is one include pattern).
    default_label: scorer-only rule for pairs without an explicit label.
    query_meta: scorer-only per-query facts for breakdowns (scenario, heldout, query_type, ...).
    group_of: query_id -> group id (persona / conversation / episode) for the bootstrap.
    """

    name: str
    memories: list[MemoryRecord]
    queries: list[QueryContext]
    pools: dict[str, np.ndarray]
    labels: dict[str, dict[str, PairLabel]]
    anchor_groups: dict[str, list[frozenset]]
    policy_rules: PolicyRules
    default_label: DefaultLabel = wrong_scope_or_error
    query_meta: dict[str, dict] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.queries:
            raise ValueError(f"source {self.name!r}: no queries")
        ids = [m.memory_id for m in self.memories]
        if len(set(ids)) != len(ids):
            raise ValueError(f"source {self.name!r}: duplicate memory ids")
        self.index_of = {mid: i for i, mid in enumerate(ids)}
        for q in self.queries:
            pool = self.pools.get(q.query_id)
            if pool is None or len(pool) == 0:
                raise ValueError(f"source {self.name!r}: query {q.query_id!r} has an empty candidate pool")

    def group_of(self, query_id: str) -> str:
        query = self._query_by_id()[query_id]
        return query.group_id or query_id

    def _query_by_id(self) -> dict[str, QueryContext]:
        if not hasattr(self, "_queries_by_id"):
            self._queries_by_id = {q.query_id: q for q in self.queries}
        return self._queries_by_id

    def label(self, query_id: str, memory_id: str) -> PairLabel:
        """Scorer-only: the label of a pair, explicit or by the source's default rule."""
        explicit = self.labels.get(query_id, {}).get(memory_id)
        if explicit is not None:
            return explicit
        return self.default_label(self._query_by_id()[query_id], self.memories[self.index_of[memory_id]])

    def route_view(self) -> RouteView:
        return RouteView(memories=self.memories, queries=self.queries, pools=self.pools,
                         policy_rules=self.policy_rules)


@dataclass(frozen=True)
class RouteView:
    """What a route may see of a source: no labels, anchors or scorer metadata."""

    memories: list[MemoryRecord]
    queries: list[QueryContext]
    pools: dict[str, np.ndarray]
    policy_rules: Optional[PolicyRules]
