"""Ranking: the store's filtered top ``max(k, rerank_depth)`` (exclusions applied before
truncation), exact cosines, then the gate's re-scoring of the cosine's top ``rerank_depth`` with
calibrated drops (the gate's drop rule: :mod:`memgate.retriever.query.gate`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Optional, cast

import numpy as np

from memgate.retriever.config import RetrieverConfig
from memgate.retriever.query.gate import RetrieverGate
from memgate.retriever.query.index import QueryIndex
from memgate.retriever.query.results import GateDrop
from memgate.retriever.records.identity import UNIT_KEEP
from memgate.retriever.stores.base import MemoryStore, SlotSearch
from memgate.retriever.vectors import exact_cosines, top_by_score


@dataclass
class Ranking:
    final: np.ndarray  # index positions, best first (at most k)
    cos_of: dict[str, Any]  # position -> exact cosine (the head)
    gate_scores: dict[str, Any]  # position -> gate score (the re-scored head)
    dropped: list[Any]  # GateDrop
    gated: bool
    depth: int
    query: np.ndarray  # the unit query vector
    # the namespace-only (unfiltered) top ``log_depth`` as index positions, when the store
    # served it with the filtered search (EmbeddedStore.search_slots); else the audit searches
    unfiltered: Optional[np.ndarray] = None
    # position -> the gate's calibrated risk sigmoid(r) (the re-scored head; mask_risk only)
    gate_risks: dict[int, float] = field(default_factory=dict)




class GatedRanking:
    """The ranking step of the query path over the retriever's query index, store and gate."""

    def __init__(self, index: QueryIndex, store: MemoryStore, config: RetrieverConfig,
                 gate: RetrieverGate) -> None:
        self.index, self.store, self.config, self.gate = index, store, config, gate

    def search(self, q: np.ndarray, readable: frozenset[str], n: int,
                kept: Optional[Callable[[np.ndarray], np.ndarray]],
                exclude_states: Iterable[str] = (), exclude_ids: Iterable[str] = (),
                exclude_signatures: Iterable[str] = ()) -> np.ndarray:
        """Index positions of the store's filtered top ``n`` (:meth:`MemoryStore.search`: the
        namespace filter and exclusions apply before truncation). A hit that is not a kept
        position of this index (``kept(positions)`` -> bools; written by another process since
        the refresh, its verdict unknown here) is left out; ``kept=None`` keeps every hit in
        the index."""
        idx = self.index.support
        slot_search = self._slot_search()
        if slot_search is not None:
            (slots, _), _ = slot_search.search_slots(q, sorted(readable), n, exclude_ids=exclude_ids,
                                                     exclude_states=exclude_states,
                                                     exclude_signatures=list(exclude_signatures),
                                                     exact=self.config.exact_search)
            return self.hit_positions(slots, readable, kept)
        by_signature = {"exclude_signatures": list(exclude_signatures)} if exclude_signatures else {}
        hits = self.store.search(q, sorted(readable), n, exclude_ids=exclude_ids,
                                 exclude_states=exclude_states, exact=self.config.exact_search,
                                 with_namespace=True, **by_signature)
        out: list[int] = []
        for memory_id, _, namespace in hits:
            if namespace not in readable:  # defence in depth
                raise AssertionError(f"store search returned {memory_id!r} outside the readable namespaces")
            p = idx.pos.get((namespace, memory_id))
            if p is not None:
                out.append(p)
        if kept is not None and out:
            ok = kept(np.asarray(out, dtype=np.int64))
            out = [p for p, good in zip(out, ok.tolist()) if good]
        return np.asarray(out, dtype=np.int64)

    def _slot_search(self) -> Optional[SlotSearch]:
        """The store, when it also answers ``search_slots`` (:class:`SlotSearch`; looked up as
        ``hasattr`` does, so a store may hide it), else None."""
        return cast(SlotSearch, self.store) if hasattr(self.store, "search_slots") else None

    def hit_positions(self, slots: np.ndarray, readable: frozenset[str],
                       kept: Optional[Callable[[np.ndarray], np.ndarray]]) -> np.ndarray:
        """Index positions of a store's hits given as vector slots, in order; a slot this index
        does not hold live (written by another process since the refresh) or a position that is
        not ``kept`` is left out, as in :meth:`_search`."""
        return self.kept_hits(slots, readable, kept)[0]

    def kept_hits(self, slots: np.ndarray, readable: frozenset[str],
                   kept: Optional[Callable[[np.ndarray], np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_hit_positions` and, per slot, whether its hit was kept."""
        idx = self.index.support
        pos = idx.positions_of_slots(slots)
        ok = pos >= 0
        codes = np.asarray([idx.ns_code[ns] for ns in readable if ns in idx.ns_code], dtype=np.int32)
        if ok.any() and not np.isin(idx.ns[pos[ok]], codes).all():  # defence in depth
            raise AssertionError("store search returned a record outside the readable namespaces")
        if kept is not None and ok.any():
            ok[ok] = kept(pos[ok])
        return pos[ok], ok

    def rank(self, q: np.ndarray, readable: frozenset[str], k: int, any_kept: bool, search_filter: tuple[Any, ...],
             kept: Callable[[np.ndarray], np.ndarray], audit_excluded: bool = False) -> Ranking:
        """The store's top ``max(k, rerank_depth)`` of the kept support (Kleene exclusion as a
        search filter, ``search_filter`` = (states, ids, signature digests), before truncation),
        exact cosines, then gate re-scoring (and calibrated drops) of the cosine's top
        ``rerank_depth``. With ``audit_excluded`` (the query excludes something), the audit's
        unfiltered top ``log_excluded_depth`` (:meth:`KleeneExclusion.exclusions`) is asked of the same store
        call when the store serves both at once (``ranking.unfiltered``)."""
        idx = self.index.support
        matrix = np.asarray(self.store.vector_matrix())  # (a plain view: no memmap per gather)

        def exact_cos(pos: np.ndarray) -> np.ndarray:
            return exact_cosines(matrix, idx.slot[pos], q)

        gated = self.gate.gate is not None and self.config.use_gate
        depth = max(k, self.config.rerank_depth) if gated else k
        log_depth = self.config.log_excluded_depth
        log_depth = (depth if log_depth is None else log_depth) if audit_excluded else 0
        head = np.zeros(0, dtype=np.int64)
        head_cos = unfiltered = None
        if any_kept:
            states, ids, signatures = search_filter
            slot_search = self._slot_search()
            if slot_search is not None:
                (slots, cos), plain = slot_search.search_slots(
                    q, sorted(readable), depth, exclude_ids=ids, exclude_states=states,
                    exclude_signatures=list(signatures), exact=self.config.exact_search,
                    unfiltered_k=log_depth)
                head, ok = self.kept_hits(slots, readable, kept)
                if abs(float(np.linalg.norm(q)) - 1.0) <= UNIT_KEEP:
                    # the store ranked by these very bits of q (a unit vector is kept as given):
                    # its cosines are exact_cos(head), row for row
                    head_cos = np.asarray(cos, dtype=np.float64)[ok]
                if plain is not None:
                    unfiltered = self.hit_positions(plain[0], readable, None)
            else:
                head = np.asarray(self.search(q, readable, depth, kept, states, ids, signatures),
                                  dtype=np.int64)
        head, head_cos = self.top(head, exact_cos(head) if head_cos is None else head_cos, depth)
        ranking = Ranking(head[:k], dict(zip(head.tolist(), head_cos.tolist())), {}, [], gated,
                           depth, q, unfiltered)
        if not gated or not len(head):
            return ranking
        d = self.config.rerank_depth
        g_pos, g_cos, g_slots = head[:d], head_cos[:d], idx.slot[head[:d]]
        V = np.ascontiguousarray(matrix[g_slots], dtype=np.float32)
        import torch  # loaded with the gate (self.gate above): the first score imports it

        with torch.no_grad():
            scorer, vpart = self.gate.scorer, self.index.vpart
            if scorer is not None:  # write-time split, fused
                assert vpart is not None  # (filled for every indexed record once the gate loaded)
                scored = scorer.score_with_risk(torch.from_numpy(q), torch.from_numpy(V),
                                                torch.from_numpy(vpart[g_slots]))
            else:
                assert self.gate.loaded is not None
                scored = self.gate.loaded.score_with_risk(q, V)
        s = scored.score.numpy().astype(np.float64)
        risk = None if scored.risk is None else scored.risk.numpy().astype(np.float64)
        keep_g = np.ones(len(g_pos), dtype=bool)
        threshold = self.gate.drop_threshold
        if threshold is not None:
            suppression = g_cos - s
            by_risk = self.gate.drop_rule == "risk"
            assert risk is not None or not by_risk  # (the risk rule is a risk head's)
            keep_g = risk < threshold if risk is not None and by_risk else suppression < threshold
            ranking.dropped.extend(
                GateDrop(idx.ids[p], float(suppression[i]), threshold, idx.namespaces[p],
                         rule="risk" if by_risk else "suppression",
                         gate_risk=None if risk is None else float(risk[i]))
                for i, p in enumerate(g_pos.tolist()) if not keep_g[i])
        if risk is not None:
            ranking.gate_risks.update(zip(g_pos.tolist(), risk.tolist()))
        ranking.gate_scores.update(zip(g_pos.tolist(), s.tolist()))
        by_gate, _ = self.top(g_pos[keep_g], s[keep_g], len(g_pos))
        ranking.final = np.concatenate([by_gate, head[d:]])[:k]
        return ranking

    def top(self, positions: np.ndarray, scores: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``n`` best positions by score, ties by memory id ascending."""
        return top_by_score(self.index.support.keys, positions, scores, n)


__all__ = ["GatedRanking", "Ranking"]
