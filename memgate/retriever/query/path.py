"""The query path's driver: ``retrieve`` runs support -> Kleene exclusion -> ranking -> top k
records -> allowed actions -> audit, with per-stage timings; the steps are the parts of
:mod:`memgate.retriever.query`, the access check and the audit log the retriever's own (given as
:class:`ReadableNamespaces` and :class:`RetrievalLog`)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, Optional, Protocol

import numpy as np

from memgate.contract.defaults import check_limit
from memgate.contract.records import QueryContext
from memgate.retriever.audit.log import AuditError
from memgate.retriever.config import RetrieverConfig
from memgate.retriever.query.actions import AllowedActions
from memgate.retriever.query.embed import Embedder
from memgate.retriever.query.exclusion import KleeneExclusion, Verdicts
from memgate.retriever.query.gate import RetrieverGate
from memgate.retriever.query.index import QueryIndex
from memgate.retriever.query.ranking import GatedRanking, Ranking
from memgate.retriever.query.results import RetrievalResult, RetrievedItem
from memgate.retriever.records.memory import StoredMemory
from memgate.retriever.stores.base import MemoryStore


class _Stopwatch:
    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._t = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = (now - self._t) * 1e3
        self._t = now


class ReadableNamespaces(Protocol):
    """The access check the query path asks (:class:`memgate.retriever.access.Access`)."""

    def readable_namespaces(self, context: QueryContext) -> frozenset[str]: ...


class RetrievalLog(Protocol):
    """Where a retrieval is logged (:class:`memgate.retriever.exposure.ExposureAudit`)."""

    def seen(self, query_id: str) -> bool: ...

    def log_retrieval(self, result: RetrievalResult, context: QueryContext) -> None: ...


class QueryPath:
    """``retrieve`` over the retriever's parts: its access check, encoder, query index, Kleene
    exclusion, ranking, allowed actions and retrieval log."""

    def __init__(self, *, store: MemoryStore, config: RetrieverConfig, access: ReadableNamespaces, embedder: Embedder,
                 index: QueryIndex, gate: RetrieverGate, exclusion: KleeneExclusion, ranking: GatedRanking,
                 actions: AllowedActions, log: RetrievalLog) -> None:
        self.store, self.config, self.access, self.embedder = store, config, access, embedder
        self.index, self.gate, self.exclusion, self.ranking = index, gate, exclusion, ranking
        self.actions, self.log = actions, log

    def retrieve(
        self,
        query_text: str,
        context: QueryContext,
        k: int = 10,
        *,
        asks: str = "fact",
        proposed_action: Optional[str] = None,
        risk: Optional[str] = None,
        only_ids: Optional[Iterable[str]] = None,
        set_apart: Optional[Iterable[Any]] = None,
    ) -> RetrievalResult:
        """Top ``k`` admissible memories for ``query_text`` under ``context`` (``k`` from 1 to
        :data:`memgate.contract.defaults.MAX_LIMIT`).

        ``asks`` / ``proposed_action`` / ``risk`` describe the request to the allowed-action
        policy (:class:`memgate.actions.ActionQuery`); ``context.intent`` is its intent.
        ``only_ids`` restricts the candidates to those ids (a caller's metadata filter; an id
        names its records in every readable namespace, a ``(namespace, memory_id)`` pair one
        record): it is part of the store search's filter like the Kleene exclusions, so it
        applies before truncation; ids outside the readable namespaces are ignored.

        ``set_apart`` (ids or pairs, as ``only_ids``) are candidates that never take a result
        slot: they are ranked with the rest, and those that would have displaced a returned item
        (ranked within the top ``k`` and above the last item returned, or within the top ``k``
        when nothing else is returned) are reported in ``result.set_apart`` (ids, best first)
        instead of being returned (the facades set forget directives apart:
        ``forgotten_relevant``). A set-apart candidate that would only fill a free slot below
        every returned item is not reported.
        """
        check_limit(k, "k")
        if not isinstance(query_text, str):
            raise TypeError("query_text must be a string")
        readable = self.access.readable_namespaces(context)
        if self.log.seen(context.query_id):
            raise AuditError(f"query id {context.query_id!r} was already used; one retrieval per query id")
        action_query = self.actions.request(context.intent, asks, proposed_action, risk)
        clock = _Stopwatch()
        self.index.refresh()
        # (a query may hold a detail that is later forgotten: its embedding is never cached)
        q = self.embedder.embed(query_text, what="query_text", cache=False).astype(np.float32)
        clock.lap("encode_ms")
        verdicts = self.exclusion.verdicts(context, readable)
        summary = verdicts.summary
        clock.lap("exclusion_ms")
        idx = self.index.support
        if only_ids is not None:
            # an id allows its records in every readable namespace; a (namespace, memory_id)
            # pair, one record (a caller's filter: O(support), as the ids it leaves out go by id)
            support = idx.live_positions(readable)
            keep = verdicts.kept(idx, support) & np.isin(support, self._positions(only_ids, "only_ids"))
            search_filter = self.exclusion.exclusion_filter(support, keep)
            kept_mask = np.zeros(len(idx.ids), dtype=bool)
            kept_mask[support[keep]] = True
            any_kept = bool(keep.any())

            def kept(pos: np.ndarray) -> np.ndarray:
                found: np.ndarray = kept_mask[pos]
                return found
        else:
            search_filter = (summary.states, summary.ids, summary.digests)
            any_kept = summary.kept > 0

            def kept(pos: np.ndarray) -> np.ndarray:
                return verdicts.kept(idx, pos)
        apart = np.zeros(0, dtype=np.int64)
        if set_apart is not None:  # (only candidates that could rank: live, readable, kept)
            apart = self._positions(set_apart, "set_apart")
            codes = np.array([idx.ns_code[ns] for ns in readable if ns in idx.ns_code], dtype=np.int32)
            apart = apart[idx.alive[apart] & np.isin(idx.ns[apart], codes)]
            apart = apart[kept(apart)]
        ranking = self.ranking.rank(q, readable, k + len(apart), any_kept, search_filter, kept,
                                    audit_excluded=summary.dropped > 0)
        if ranking.gated and len(apart):
            ranking = self._set_apart_by_cosine(ranking, apart, k + len(apart))
        is_apart = np.isin(ranking.final, apart)
        returned = np.flatnonzero(~is_apart)[:k]  # combined ranks of the k items returned
        reach = min(k, int(returned[-1])) if len(returned) else k  # above the last one returned
        apart_hits = tuple(idx.ids[p] for p in ranking.final[:reach][is_apart[:reach]].tolist())
        ranking.final = ranking.final[returned]
        clock.lap("rank_ms")
        items = self._items(ranking, verdicts, readable)
        clock.lap("fetch_ms")
        items = self.actions.decide(items, action_query, self.gate.risk_warn)
        clock.lap("actions_ms")
        excluded, counts = self.exclusion.exclusions(verdicts, ranking, readable, self.ranking.search)
        clock.lap("exclusions_ms")
        result = RetrievalResult(
            query_id=context.query_id, principal=context.principal,
            namespaces=tuple(sorted(readable)), route=self.gate.route, k=k, items=tuple(items),
            excluded=tuple(excluded), dropped=tuple(ranking.dropped), excluded_counts=counts,
            candidates=summary.candidates, unresolved_kept=summary.unresolved_kept,
            set_apart=apart_hits,
            gate_version=self.gate.version if ranking.gated else None,
            policy_version=self.config.policy_version,
            action_policy_version=self.actions.version, timings_ms=clock.laps,
        )
        self.log.log_retrieval(result, context)
        clock.lap("log_ms")  # (the same dict as result.timings_ms)
        return result

    def _set_apart_by_cosine(self, ranking: Ranking, apart: np.ndarray, n: int) -> Ranking:
        """Set-apart candidates (forget directives: the system's words, not a memory) keep their
        cosine, never scored or dropped by the text gate, whose job is the risk of a memory's text
        (an instruction-like directive reads as one); the gated order of the others is unchanged
        and each directive is placed in it by its cosine."""
        ids = self.index.support.ids
        apart_set = set(apart.tolist())
        order = [p for p in ranking.final.tolist() if p not in apart_set]
        score = [ranking.gate_scores.get(p, ranking.cos_of[p]) for p in order]
        for p in sorted((p for p in ranking.cos_of if p in apart_set), key=lambda p: -ranking.cos_of[p]):
            at = next((i for i, v in enumerate(score) if v < ranking.cos_of[p]), len(order))
            order.insert(at, p)
            score.insert(at, ranking.cos_of[p])
        apart_ids = {ids[p] for p in apart_set}
        return replace(ranking, final=np.asarray(order[:n], dtype=np.int64),
                       dropped=[d for d in ranking.dropped if d.memory_id not in apart_ids])

    def _positions(self, ids: Iterable[Any], field: str) -> np.ndarray:
        """Index positions named by ``ids``: an id names its records in every namespace, a
        ``(namespace, memory_id)`` pair one record."""
        if isinstance(ids, str):
            raise TypeError(f"{field} must be a collection of memory ids, not one string")
        idx = self.index.support
        found = [p for i in set(ids)
                 for p in (idx.by_id.get(i, ()) if isinstance(i, str)
                           else [idx.pos[tuple(i)]] if tuple(i) in idx.pos else ())]
        return np.asarray(sorted(found), dtype=np.int64)

    def _items(self, ranking: Ranking, verdicts: Verdicts, readable: frozenset[str]) -> list[RetrievedItem]:
        """Fetch the records of the final ranking only (text, action attributes)."""
        idx = self.index.support
        final = ranking.final.tolist()
        records: dict[tuple[Any, ...], StoredMemory] = {}
        for namespace in sorted({idx.namespaces[p] for p in final}):  # ids are scoped per namespace
            got = self.store.get_many([idx.ids[p] for p in final if idx.namespaces[p] == namespace],
                                      namespace=namespace)
            records.update(((namespace, mid), m) for mid, m in got.items())
        items: list[RetrievedItem] = []
        for p in final:
            record = records.get((idx.namespaces[p], idx.ids[p]))
            if record is None or record.forgotten or record.text is None:
                continue  # forgotten by another process since the index refresh (no text left)
            if record.namespace not in readable:  # defence in depth: never cross the ACL
                raise AssertionError(f"index returned {record.memory_id!r} outside the readable namespaces")
            resolved, a, _, unresolved = verdicts.info[int(idx.sig[p])]
            g = ranking.gate_scores.get(p)
            cos = ranking.cos_of[p]
            gate_risk = ranking.gate_risks.get(p)
            items.append(RetrievedItem(
                memory_id=record.memory_id, rank=len(items) + 1, text=record.text,
                namespace=record.namespace, score=cos if g is None else g, cosine=cos,
                gate_score=g, lifecycle=resolved, admissible=a,
                unresolved=unresolved if a is None else (), needs_review=record.needs_review,
                review_reasons=record.review_reasons, action=None, action_binding=(), memory=record,
                gate_risk=gate_risk,
            ))
        return items


__all__ = ["QueryPath", "ReadableNamespaces", "RetrievalLog"]
